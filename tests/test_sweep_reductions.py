"""An outside sweep of tidu.numpy's reductions, order statistics, scans, statistics and
functions of functions against NumPy and JAX (x64), each test failing before its fix:
reductions without identity over an axis of size 0 (NumPy's and JAX's ValueError, where the
traced call gave -inf, inf or a meaningless index), ``dtype=bool`` sums and products
(logical or / and), integer-``dtype`` means (truncated), variances refusing an integer
``dtype``, ``cov`` with ddof past N (inf, not a negative divisor), ``vectorize`` with traced
keyword arguments, and bad arguments (q = nan, k past the axis, diff order < 0, weights of
the wrong length) as one-line errors."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402

# --- reductions without identity over an axis of size 0 ------------------------------------

NO_IDENTITY = ["max", "min", "amax", "amin", "ptp", "argmax", "argmin", "nanmax", "nanmin", "nanargmax",
               "nanargmin"]
EMPTY = [((0, 3), None), ((0, 3), 0), ((0,), None), ((0,), -1), ((2, 0), 1), ((0, 0), 1), ((2, 0, 3), (0, 1))]


@pytest.mark.parametrize("shape, axis", EMPTY)
@pytest.mark.parametrize("name", NO_IDENTITY)
def test_reductions_without_identity_refuse_an_empty_axis_traced_as_numpy(name, shape, axis) -> None:
    if name.endswith(("argmax", "argmin")) and isinstance(axis, tuple):
        return
    x = np.zeros(shape)
    with pytest.raises(ValueError):
        getattr(np, name)(x, axis=axis)
    with pytest.raises(ValueError):
        getattr(jnp, name)(x, axis=axis)
    with pytest.raises(ValueError, match=f"tnp.{name.replace('amax', 'max').replace('amin', 'min')}: .*size 0"):
        tidu.jit(lambda v: getattr(tnp, name)(v, axis=axis))(x)
    with pytest.raises(ValueError):
        getattr(tnp, name)(x, axis=axis)  # eagerly: NumPy's own error


@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin", "ptp", "nanmax", "nanmin"])
def test_reductions_without_identity_keep_empty_results_of_nonempty_axes(name) -> None:
    """Over a nonempty axis of an empty array the result is empty, no error (NumPy's)."""
    x = np.zeros((0, 3))
    got = tidu.jit(lambda v: getattr(tnp, name)(v, axis=1))(x)
    want = getattr(np, name)(x, axis=1)
    assert got.shape == want.shape == (0,) and got.dtype == want.dtype


@pytest.mark.parametrize("name, initial", [("max", -1.0), ("min", 2.0), ("nanmax", -1.0), ("nanmin", 2.0)])
def test_reductions_with_initial_reduce_an_empty_axis_to_it(name, initial) -> None:
    x = np.zeros((0, 3))
    got = tidu.jit(lambda v: getattr(tnp, name)(v, axis=0, initial=initial))(x)
    np.testing.assert_array_equal(got, getattr(np, name)(x, axis=0, initial=initial))
    np.testing.assert_array_equal(got, [initial] * 3)


def test_logsumexp_and_bool_extremes_of_nothing_keep_their_values() -> None:
    """logsumexp over no terms is -inf (the sum of none is 0), traced as in SciPy; its
    shift by the maximum does not trip the refusal."""
    x = np.zeros((0, 3))
    np.testing.assert_array_equal(tidu.jit(lambda v: tnp.logsumexp(v, axis=0))(x), [-np.inf] * 3)
    with pytest.raises(ValueError):
        tidu.jit(lambda v: tnp.max(v))(np.zeros(0, bool))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert tidu.jit(lambda v: tnp.any(v))(np.zeros(0, bool)) == np.any(np.zeros(0, bool))


# --- dtype= of sums, products, scans and means; cov's degrees of freedom ---------------------

X = np.array([[1.0, 2.0, 4.0], [0.5, 0.5, 3.0]])
DTYPE_CASES = {
    "sum_bool": lambda m, v: m.sum(v - 1, dtype=bool),
    "sum_bool_axis": lambda m, v: m.sum(v > 1, axis=0, dtype=bool),
    "sum_bool_where_initial": lambda m, v: m.sum(v - 1, axis=1, dtype=bool, initial=0, where=v > 2),
    "prod_bool": lambda m, v: m.prod(v - 0.5, axis=1, dtype=bool),
    "prod_bool_initial": lambda m, v: m.prod(v, dtype=bool, initial=0),
    "nansum_bool": lambda m, v: m.nansum(v - 1, axis=0, dtype=bool),
    "cumsum_bool": lambda m, v: m.cumsum(v - 1, dtype=bool),
    "cumprod_bool": lambda m, v: m.cumprod(v - 0.5, axis=1, dtype=bool),
    "nancumsum_bool": lambda m, v: m.nancumsum(v - 1, axis=0, dtype=bool),
    "cumulative_sum_bool": lambda m, v: m.cumulative_sum(v - 1, axis=1, dtype=bool),
    "mean_int32": lambda m, v: m.mean(v, dtype=np.int32),
    "mean_uint8_axis": lambda m, v: m.mean(v, axis=1, dtype=np.uint8),
    "mean_int64_large": lambda m, v: m.mean(m.astype(v, np.int64) * 10**17, dtype=np.int64),
    "mean_bool": lambda m, v: m.mean(v - 1, axis=0, dtype=bool),
    "mean_float16_to_int": lambda m, v: m.mean(m.astype(v, np.float16), dtype=np.int32),
    "cov_ddof_past_n": lambda m, v: m.cov(v, ddof=5),
    "cov_ddof_past_n_fweights": lambda m, v: m.cov(v, ddof=4, fweights=np.array([1, 1, 1])),
    "cov_ddof_past_n_aweights": lambda m, v: m.cov(v, ddof=4, aweights=np.array([1.0, 2.0, 0.5])),
    "nanmean_int_to_int": lambda m, v: m.nanmean(m.astype(v, np.int8), axis=0, dtype=np.int16, where=v > 1),
    "nanmean_int_dtype_of_ints": lambda m, v: m.nanmean(m.astype(v, np.int64), dtype=np.int32),
}


@pytest.mark.parametrize("name", sorted(DTYPE_CASES))
def test_dtype_keywords_and_cov_ddof_traced_as_numpy_bit_for_bit(name) -> None:
    """dtype=bool sums (products, running sums) are logical ors (ands), an integer dtype=
    mean is truncated to that dtype, and cov divides by max(N - ddof, 0), as NumPy (the
    traced calls gave int64 counts, float64 means and a negative divisor)."""
    f = DTYPE_CASES[name]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        want = f(np, X)
        eager = f(tnp, X)
    traced = tidu.jit(lambda v: f(tnp, v))(X)
    for got in (eager, traced):
        assert np.asarray(got).dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(got, want)



@pytest.mark.parametrize("name", ["var", "std", "nanvar", "nanstd"])
def test_variances_refuse_an_integer_dtype_traced(name) -> None:
    """NumPy's var with an integer dtype truncates the mean and each square to it (2 for
    values whose variance is 2.22), JAX's ignores it; traced, tidu gave the float64
    variance. It is a one-line TypeError now (eagerly, NumPy's own answer or error)."""
    with pytest.raises(TypeError, match="not a float or complex dtype"):
        tidu.jit(lambda v: getattr(tnp, name)(v, dtype=np.int32))(X)
    with pytest.raises(TypeError, match="must be inexact"):
        tidu.jit(lambda v: tnp.nanmean(v, dtype=np.int32))(X)  # NumPy's TypeError for floats
    np.testing.assert_array_equal(tidu.jit(lambda v: getattr(tnp, name)(v, axis=0, dtype=np.float32))(X),
                                  getattr(np, name)(X, axis=0, dtype=np.float32))


# --- vectorize and apply_along_axis ---------------------------------------------------------


def test_vectorize_broadcasts_traced_keyword_arguments_as_numpy() -> None:
    """np.vectorize vectorizes keyword arguments too (unless ``excluded`` names them);
    traced, each element's call got the whole keyword array (a reshape error)."""
    x = np.arange(6.0).reshape(2, 3) + 1

    def f(m, v):
        return m.vectorize(lambda a, b=1.0, c=0.0: a * b + c, excluded={"c"})(v, b=v[0], c=2.0)

    np.testing.assert_array_equal(tidu.jit(lambda v: f(tnp, v))(x), f(np, x))
    np.testing.assert_array_equal(tidu.grad(lambda v: tnp.sum(f(tnp, v)))(x),
                                  jax.grad(lambda v: jnp.sum(v * v[0] + 2.0))(x))
    g = lambda m, v: m.vectorize(lambda a, b: a * b, excluded={0})(3.0, b=v)  # noqa: E731
    np.testing.assert_array_equal(tidu.jit(lambda v: g(tnp, v))(x), g(np, x))


CLOSURES = {  # a constant array, the function closing over the traced value a
    "vectorize": lambda m, a: m.vectorize(lambda r: r * a + r * r)(X_CLOSURE),
    "apply_along_axis": lambda m, a: m.apply_along_axis(lambda r: m.cumsum(r) * a, 1, X_CLOSURE),
    "apply_over_axes": lambda m, a: m.apply_over_axes(lambda v, ax: m.sum(v * a, axis=ax), X_CLOSURE, [0, 1]),
    "piecewise": lambda m, a: m.piecewise(X_CLOSURE, [X_CLOSURE < 3], [lambda v: v * a, lambda v: v + a * a]),
}
X_CLOSURE = np.arange(6.0).reshape(2, 3)


@pytest.mark.parametrize("name", list(CLOSURES))
def test_functions_of_a_constant_array_closing_over_a_traced_value(name) -> None:
    """NumPy's own function ran on the constant array and failed on the traced value the
    function returned (a TraceError): values and gradients as JAX's. (apply_over_axes, which
    NumPy calls with the whole array, worked before.)"""
    f = CLOSURES[name]
    np.testing.assert_allclose(tidu.jit(lambda a: f(tnp, a))(1.5), f(jnp, 1.5), rtol=1e-15)
    np.testing.assert_allclose(tidu.grad(lambda a: tnp.sum(f(tnp, a) ** 2))(1.5),
                               jax.grad(lambda a: jnp.sum(f(jnp, a) ** 2))(1.5), rtol=1e-14)
    np.testing.assert_array_equal(f(tnp, 1.5), f(np, 1.5))  # eagerly: NumPy's


def test_functions_of_functions_refuse_empty_iterations_in_one_line() -> None:
    """NumPy's ValueErrors (apply_along_axis over an empty other axis, vectorize of size-0
    inputs without otypes) where the traced calls raised IndexError or stack's error."""
    x = np.ones((2, 0))
    with pytest.raises(ValueError, match="tnp.apply_along_axis: .*size 0"):
        tidu.jit(lambda v: tnp.apply_along_axis(tnp.sum, 0, v))(x)
    with pytest.raises(ValueError, match="tnp.vectorize: .*size 0"):
        tidu.jit(lambda v: tnp.vectorize(lambda a: a * 2)(v))(x)


# --- bad arguments: one-line errors where a traced call gave garbage or a deep error ------------

BAD_CALLS = {
    "quantile_nan_q": (lambda v: tnp.quantile(v, np.nan), "tnp.quantile: q must be in"),
    "nanquantile_q_above_1": (lambda v: tnp.nanquantile(v, [0.2, 2.0]), "tnp.nanquantile: q must be in"),
    "percentile_negative": (lambda v: tnp.percentile(v, -1.0), r"tnp.percentile: q must be in \[0, 100\]"),
    "nanpercentile_nan": (lambda v: tnp.nanpercentile(v, np.nan), "tnp.nanpercentile: q must be in"),
    "top_k_past_the_axis": (lambda v: tnp.top_k(v, 5), "tnp.top_k: k must be"),
    "top_k_negative": (lambda v: tnp.top_k(v, -1), "tnp.top_k: k must be"),
    "diff_negative_order": (lambda v: tnp.diff(v, n=-1), "tnp.diff: order must be non-negative"),
    "average_weights_length": (lambda v: tnp.average(v, axis=1, weights=np.ones(2)), "tnp.average: 2 weights"),
}


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_bad_arguments_are_one_line_errors_eager_and_traced(name) -> None:
    """quantile(x, nan) raised an IndexError from deep inside, top_k with k past the axis
    (or negative) returned fewer (or n - 1) values, diff with n < 0 returned x unchanged,
    where NumPy and JAX raise."""
    f, match = BAD_CALLS[name]
    x = np.arange(6.0).reshape(2, 3)
    with pytest.raises(ValueError, match=match):
        tidu.jit(f)(x)
    with pytest.raises((ValueError, IndexError)):
        f(x)  # eagerly (NumPy's own error, or tidu's)
    assert tnp.top_k(x, 3)[0].shape == (2, 3) and tidu.jit(lambda v: tnp.top_k(v, 0)[0])(x).shape == (2, 0)


@pytest.mark.parametrize("lo, hi", [(1, 300), (-5, 4), (None, 1000), (-1000, None)])
def test_clip_of_integers_with_python_bounds_beyond_the_dtype(lo, hi):
    # NumPy clips to the dtype's range (traced, maximum(x, 300) raised OverflowError)
    for x in (np.array([0, 5, 255], np.uint8), np.array([-128, 0, 127], np.int8)):
        got = tidu.jit(lambda a: tnp.clip(a, lo, hi))(x)
        want = np.clip(x, lo, hi)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [None, bool, np.float32, np.int8])
def test_trace_takes_numpys_dtype(dtype):
    x = np.array([[1, 0], [3, 2]], np.int32)
    got, want = tidu.jit(lambda a: tnp.trace(a, dtype=dtype))(x), np.trace(x, dtype=dtype)
    assert got.dtype == want.dtype and got == want
