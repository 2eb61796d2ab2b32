"""Quantiles of slices with infinities and std over one effective element: eager calls
give what traced ones give (NumPy's `a + (b - a) t` makes nan of an order statistic next
to an infinity), and std's derivative where one element is left is 0, as its docs say."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp

INF = np.inf
CASES = [
    (np.array([0.0, INF, 0.0, 1.0, INF]), 0.5, {}, 1.0),
    (np.array([-INF, 1.0]), 0.0, {}, -INF),
    (np.array([0.0, 1.0, INF]), [0.5, 0.75, 1.0], {}, [1.0, INF, INF]),
    (np.array([1.0, INF]), 0.5, {"method": "midpoint"}, INF),
    (np.array([[0.0, INF, 2.0], [1.0, 2.0, 3.0]]), 0.5, {"axis": 1}, [2.0, 2.0]),
    (np.array([1.0, 2.0, 4.0]), [0.1, 0.5, 0.9], {}, None),  # no infinity: NumPy's own values
]


@pytest.mark.parametrize("x, q, kw, want", CASES)
@pytest.mark.parametrize("name", ["quantile", "nanquantile"])
def test_eager_quantiles_are_the_traced_ones(name, x, q, kw, want) -> None:
    fn = getattr(tnp, name)
    with np.errstate(invalid="ignore"):
        eager = np.asarray(fn(x, q, **kw))
        numpy = getattr(np, name)(x, q, **kw)
    traced = np.asarray(tidu.jit(lambda v: fn(v, q, **kw))(x))
    np.testing.assert_array_equal(eager, traced)
    np.testing.assert_array_equal(eager, numpy if want is None else want)
    percent = np.asarray(getattr(tnp, name.replace("quantile", "percentile"))(x, np.asarray(q) * 100, **kw))
    np.testing.assert_array_equal(percent, eager)


def test_nanquantile_ignores_the_nan_beside_an_infinity() -> None:
    x = np.array([INF, 0.0, np.nan, 2.5])
    assert tnp.nanquantile(x, 0.5) == tidu.jit(lambda v: tnp.nanquantile(v, 0.5))(x) == 2.5


def test_std_over_one_element_left_has_derivative_zero() -> None:
    np.testing.assert_array_equal(tidu.grad(tnp.nanstd)(np.array([3.0, np.nan])), [0.0, 0.0])
    np.testing.assert_array_equal(
        tidu.grad(lambda v: tnp.std(v, where=np.array([True, False])))(np.array([3.0, 1.0])), [0.0, 0.0])
    rows = np.array([[3.0, np.nan], [1.0, 2.0]])
    g = tidu.grad(lambda v: tnp.sum(tnp.nanstd(v, axis=1)))(rows)
    np.testing.assert_allclose(g, [[0.0, 0.0], [-0.5, 0.5]])
    mask = np.array([[True, False], [True, True]])
    g = tidu.grad(lambda v: tnp.sum(tnp.std(v, axis=1, where=mask)))(np.array([[3.0, 5.0], [1.0, 2.0]]))
    np.testing.assert_allclose(g, [[0.0, 0.0], [-0.5, 0.5]])
    # a traced mask: the count is traced too
    g = tidu.grad(lambda v, m: tnp.std(v, where=m))(np.array([3.0, 1.0]), np.array([True, False]))
    np.testing.assert_array_equal(g, [0.0, 0.0])


def test_std_values_where_some_slices_have_one_element() -> None:
    x = np.array([[3.0, np.nan, 4.0], [1.0, 2.0, np.nan]])
    for f in (lambda v: tnp.nanstd(v, axis=1), lambda v: tnp.nanstd(v, axis=0),
              lambda v: tnp.std(v, axis=0, where=~np.isnan(x)), lambda v: tnp.nanstd(v, axis=1, ddof=1)):
        with np.errstate(invalid="ignore", divide="ignore"):
            np.testing.assert_allclose(tidu.jit(f)(x), f(x), rtol=1e-15)
    # several equal values: no derivative (std grows like |t|), nan as in JAX
    assert np.isnan(tidu.grad(tnp.std)(np.array([1.0, 1.0]))).all()


@pytest.mark.parametrize("method", ["linear", "midpoint", "lower", "higher", "nearest"])
@pytest.mark.parametrize("name", ["quantile", "nanquantile"])
def test_eager_and_traced_quantiles_agree_bit_for_bit(name, method) -> None:
    """NumPy's interpolation, a + (b - a) t below t = 1/2 and b - (b - a)(1 - t) above, is
    what the traced quantiles compute too."""
    rng = np.random.default_rng(7)
    fn = getattr(tnp, name)
    q = [0.0, 0.1, 0.25, 1 / 3, 0.5, 0.7, 0.9, 1.0]
    for shape in [(7,), (4, 6), (5, 2)]:
        x = rng.normal(size=shape)
        if name == "nanquantile":
            x[rng.random(shape) < 0.3] = np.nan
        for axis in [None, -1] if len(shape) > 1 else [None]:
            with warnings.catch_warnings():  # (NumPy's all-nan slices)
                warnings.simplefilter("ignore", RuntimeWarning)
                want = getattr(np, name)(x, q, axis=axis, method=method)
                eager = fn(x, q, axis=axis, method=method)
            traced = tidu.jit(lambda v, axis=axis: fn(v, q, axis=axis, method=method))(x)
            np.testing.assert_array_equal(eager, want)
            np.testing.assert_array_equal(traced, want)
