"""tidu.scipy.special.hyp2f1, the Gauss hypergeometric function 2F1(a, b; c; x): values
against SciPy and mpmath (the NumPy back end runs SciPy's kernel; the StableHLO algorithm
of tidu/lowering/stablehlo_numerics.py, run by XLA, is checked here), derivatives in x,
a, b and c against mpmath and JAX, eager against traced, vmap against jax.vmap, and the
refusals."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from typing import Any

import mpmath
import numpy as np
import pytest
import scipy.special

os.environ.setdefault("JAX_PLATFORMS", "cpu")
jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jax.scipy.special as jss  # noqa: E402
from tidu.lowering.c_source import CLoweringError  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402
from tidu.scipy import special as tss  # noqa: E402

# a and b of both signs (none an integer: no polynomial), c of both signs off the poles
PARAMS = [-3.7, -1.3, -0.4, 0.3, 1.0, 2.5, 4.2]
C_VALUES = [-2.5, -0.7, 0.6, 1.5, 3.3, 5.0]
X_INSIDE = np.linspace(-0.95, 0.95, 20)


def _grid(a: list[float], b: list[float], c: list[float], x: Any) -> tuple[np.ndarray, ...]:
    return tuple(np.array(v, np.float64) for v in zip(*itertools.product(a, b, c, x), strict=True))


def _xla(f: Callable[..., Any], *args: np.ndarray) -> np.ndarray:
    return tidu.make_graph(f)(*args).program.run(list(args), backend="xla")[0]


def _mp(a: float, b: float, c: float, x: float) -> float:
    mpmath.mp.dps = 40
    return float(mpmath.hyp2f1(*(mpmath.mpf(float(v)) for v in (a, b, c, x))))


def test_series_and_transformations_in_xla() -> None:
    """XLA's values (the series; Pfaff's transformation below 0; the connection to 1 - x
    above 0.9) over a, b in (-3.7, 4.2), c in (-2.5, 5) and x in (-0.95, 0.95) equal
    mpmath's to 1e-12 (or 1e-13 absolute), and SciPy's to 1e-12 wherever SciPy's are within 5e-13 of mpmath's
    (a few points where the sum cancels to 1% of its terms are not: there tidu's are the
    nearer); the NumPy back end is SciPy's."""
    a, b, c, x = _grid(PARAMS, PARAMS, C_VALUES, X_INSIDE)
    want = scipy.special.hyp2f1(a, b, c, x)
    np.testing.assert_array_equal(tss.hyp2f1(a, b, c, x), want)
    got = _xla(tss.hyp2f1, a, b, c, x)
    exact = np.array([_mp(*v) for v in zip(a, b, c, x, strict=True)])
    # (1e-13 absolute where the sum cancels: 0.0088 at a, b, c, x = -3.7, 2.5, -0.7, 0.65)
    np.testing.assert_allclose(got, exact, rtol=1e-12, atol=1e-13)
    scipy_exact = np.abs(want - exact) <= 5e-13 * np.abs(exact)
    assert scipy_exact.mean() > 0.99
    np.testing.assert_allclose(got[scipy_exact], want[scipy_exact], rtol=1e-12)


@pytest.mark.parametrize("x", [0.93, 0.97, 0.99, 0.995, 0.999, 0.9999, 1.0, -1.5, -3.0, -12.0, -40.0, -99.0])
def test_near_one_and_far_below_zero(x: float) -> None:
    """The connection to 1 - z (c - a - b, or b - a after Pfaff's transformation, 0.01 or
    more from an integer) near x = 1, at x = 1 Gauss's sum (inf where c - a - b <= 0),
    and far below 0, against mpmath (well-conditioned a, b, c: no cancellation between
    the two terms) and SciPy."""
    a = np.array([0.5, 1.5, 0.25, 2.2, 0.7, 3.1, 1.2])
    b = np.array([0.7, 2.5, 1.75, 0.45, 1.1, 0.6, -0.35])
    c = np.array([1.9, 3.1, 1.5, 4.3, 0.6, 5.2, 2.3])
    xs = np.full(a.shape, x)
    got = _xla(tss.hyp2f1, a, b, c, xs)
    want = np.array([_mp(*v) if (x < 1 or v[2] - v[0] - v[1] > 0) else np.inf
                     for v in zip(a, b, c, xs, strict=True)])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(got, scipy.special.hyp2f1(a, b, c, xs), rtol=1e-12)


def test_integer_c_minus_a_minus_b_by_the_series() -> None:
    """Where c - a - b is an integer (the connection's Gamma(c - a - b) has a pole) the
    series runs on up to x = 0.99; and b - a an integer below 0 (Pfaff's series) down to
    x = -99."""
    a = np.array([0.5, 1.0, 1.0, 1.5, 0.5, -2.5, 0.3])
    b = np.array([0.5, 1.0, 2.0, 2.5, 1.5, 2.0, 0.7])
    c = np.array([1.0, 2.0, 3.0, 4.0, 1.0, 0.5, 3.0])
    for x in (0.95, 0.99, -0.7, -20.0, -99.0):
        xs = np.full(a.shape, x)
        want = np.array([_mp(*v) for v in zip(a, b, c, xs, strict=True)])
        np.testing.assert_allclose(_xla(tss.hyp2f1, a, b, c, xs), want, rtol=1e-12)


def test_polynomials() -> None:
    """a (or b) 0, -1, -2, ...: a polynomial in x, summed as it is for every x (x > 1
    too), and finite where c is a pole past its degree (SciPy's values); against mpmath
    and SciPy."""
    a, b, c, x = _grid([0.0, -1.0, -2.0, -3.0, -5.0], [-4.5, 0.7, 2.3], [-6.0, -0.5, 1.5, 4.0],
                       [-3.0, -0.8, -0.3, 0.0, 0.4, 0.9, 1.0, 1.7, 2.5])
    got = _xla(tss.hyp2f1, a, b, c, x)
    want = scipy.special.hyp2f1(a, b, c, x)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    exact = np.array([float(mpmath.hyp2f1(*v)) for v in zip(a, b, c, x, strict=True)])
    np.testing.assert_allclose(got, exact, rtol=1e-12, atol=1e-15)
    # the two terminating operands the other way round, c a pole past the degree (a = -2, c = -6)
    np.testing.assert_allclose(_xla(tss.hyp2f1, b, a, c, x), want, rtol=1e-12, atol=1e-15)


def test_special_points_are_scipys() -> None:
    """1 at x = 0 (c a pole too); inf where c is 0, -1, ... (no polynomial ending before
    it), for x > 1 (no polynomial), and at x = 1 where c - a - b <= 0; Gauss's sum at x =
    1 otherwise; nan in, nan out: eager and in XLA, as SciPy's."""
    cases = [(0.5, 0.7, -2.0, 0.0), (0.5, 0.7, -2.0, -0.3), (0.5, 0.7, 0.0, 0.3), (-3.0, 0.7, -2.0, 0.3),
             (-1.0, 0.7, -2.0, 0.3), (0.0, 0.7, -2.0, 0.3), (0.5, 0.7, 1.3, 1.5), (0.5, 0.7, 1.3, 3.0),
             (1.0, 1.0, 2.0, 1.0), (1.0, 1.0, 1.5, 1.0), (0.3, 0.2, 1.5, 1.0), (-2.5, 1.0, 1.5, 1.0),
             (np.nan, 1.0, 1.0, 0.5), (1.0, 1.0, 2.0, np.nan), (1.0, 2.0, 3.0, -0.0)]
    a, b, c, x = (np.array(v) for v in zip(*cases, strict=True))
    want = scipy.special.hyp2f1(a, b, c, x)
    assert np.isinf(want).sum() == 7 and np.isnan(want).sum() == 2  # what is tested: inf and nan as well
    got = _xla(tss.hyp2f1, a, b, c, x)
    np.testing.assert_allclose(got, want, rtol=1e-14)
    np.testing.assert_array_equal(tss.hyp2f1(a, b, c, x), want)


def test_float32_in_xla() -> None:
    """float32 operands give float32 values within 2e-5 of SciPy's float64 ones (a, b, c
    positive: no cancellation for float32's rounding of the inputs to grow)."""
    a, b, c, x = (v.astype(np.float32) for v in _grid([0.3, 1.0, 2.5], [0.4, 1.7, 3.2], [0.6, 1.5, 4.5],
                                                       np.linspace(-0.95, 0.97, 15)))
    got = _xla(tss.hyp2f1, a, b, c, x)
    assert got.dtype == np.float32
    want = scipy.special.hyp2f1(*(v.astype(np.float64) for v in (a, b, c, x)))
    np.testing.assert_allclose(got, want, rtol=2e-5)
    assert tss.hyp2f1(a, b, c, x).dtype == np.float32


# --- derivatives --------------------------------------------------------------------------

# points inside the domain: x of both signs (Pfaff's series below 0), a negative a and c
DERIV_A = np.array([1.5, -1.5, 0.3, 2.5, 0.7, 1.2, -3.0])
DERIV_B = np.array([2.0, 0.7, -2.2, 1.2, 1.1, 0.4, 1.6])
DERIV_C = np.array([3.5, 2.2, 1.5, -0.7, 2.9, 1.7, 2.4])
DERIV_X = np.array([0.3, -0.6, 0.8, -3.0, 0.95, -20.0, 0.45])


def _partial(f: Callable[..., Any], *orders: int) -> Callable[..., Any]:
    """f's partial derivative, ``orders[k]`` times in its operand k (by nested grads)."""
    for argnum, order in enumerate(orders):
        for _ in range(order):
            f = tidu.grad(f, argnums=argnum)
    return f


def _mp_diff(orders: tuple[int, ...]) -> np.ndarray:
    mpmath.mp.dps = 40
    return np.array([float(mpmath.diff(mpmath.hyp2f1, tuple(map(float, v)), orders))
                     for v in zip(DERIV_A, DERIV_B, DERIV_C, DERIV_X, strict=True)])


@pytest.mark.parametrize("orders", [(0, 0, 0, 1), (0, 0, 0, 2), (1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0),
                                    (2, 0, 0, 0), (1, 1, 0, 0), (0, 1, 1, 0), (0, 0, 2, 0), (1, 0, 1, 1),
                                    (1, 1, 1, 0), (0, 2, 0, 1)])
def test_derivatives_in_the_parameters_to_any_order(orders: tuple[int, ...]) -> None:
    """Partial derivatives in a, b, c and x, mixed and of the second and third order
    (hyp2f1_d: the series on truncated Taylor series in a, b and c), against mpmath, on
    the NumPy back end and in XLA."""
    want = _mp_diff(orders)
    f = tidu.vmap(_partial(tss.hyp2f1, *orders))
    args = (DERIV_A, DERIV_B, DERIV_C, DERIV_X)
    np.testing.assert_allclose(f(*args), want, rtol=1e-10)
    np.testing.assert_allclose(_xla(f, *args), want, rtol=1e-10)


def test_gradients_and_hessian_as_jax() -> None:
    """tidu.grad in a, b, c and x and tidu.hessian in x equal jax.grad's and jax.hessian's
    (JAX's derivatives in the parameters are series of digammas: its derivative in a is
    nan at a = -3, digamma's pole, where tidu's is mpmath's, tested above)."""
    a, b, c, x = DERIV_A, DERIV_B, DERIV_C, np.array([0.3, -0.6, 0.8, -0.3, 0.7, 0.1, 0.45])
    assert np.isnan(jax.jit(jax.grad(jss.hyp2f1))(-3.0, 1.6, 2.4, 0.45))
    a = np.where(a == -3.0, -2.6, a)
    got = tidu.grad(lambda *v: tnp.sum(tss.hyp2f1(*v)), argnums=(0, 1, 2, 3))(a, b, c, x)
    want = jax.jit(jax.grad(lambda *v: jnp.sum(jss.hyp2f1(*v)), argnums=(0, 1, 2, 3)))(a, b, c, x)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-10)
    h = tidu.hessian(lambda v: tnp.sum(tss.hyp2f1(a, b, c, v)))(x)
    np.testing.assert_allclose(h, jax.jit(jax.hessian(lambda v: jnp.sum(jss.hyp2f1(a, b, c, v))))(x),
                               rtol=1e-10, atol=1e-14)


def test_parameter_derivatives_outside_the_domain_are_nan() -> None:
    """Derivatives in a, b or c are nan for x >= 1 (the series diverges; SciPy's value
    there is the analytic continuation's or inf) and where c is a pole, on both back ends."""
    a, b, c, x = np.array([0.5, 0.5, 0.5]), np.array([0.7, 0.7, 0.7]), np.array([3.0, 3.0, -1.0]), \
        np.array([1.0, 1.5, 0.5])
    f = tidu.vmap(tidu.grad(tss.hyp2f1))
    assert np.isnan(f(a, b, c, x)).all()
    assert np.isnan(_xla(f, a, b, c, x)).all()


# --- transforms ---------------------------------------------------------------------------


def test_eager_and_traced_agree() -> None:
    """tidu.jit of hyp2f1 and of its gradient equals the eager call."""
    a, b, c, x = _grid([-1.3, 0.3, 2.5], [0.4, 1.7], [-0.7, 1.5], np.linspace(-0.9, 0.9, 5))
    np.testing.assert_array_equal(tidu.jit(tss.hyp2f1)(a, b, c, x), tss.hyp2f1(a, b, c, x))
    grad = tidu.grad(lambda *v: tnp.sum(tss.hyp2f1(*v)), argnums=(0, 3))
    for g, e in zip(tidu.jit(grad)(a, b, c, x), grad(a, b, c, x), strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-14)


def test_vmap_as_jax() -> None:
    """tidu.vmap over a and x with b and c fixed, and over c alone, equals jax.vmap's."""
    a, x = np.array([0.3, 1.5, -0.4, 2.5]), np.array([-0.7, 0.2, 0.5, 0.85])
    got = tidu.vmap(tss.hyp2f1, in_axes=(0, None, None, 0))(a, 1.7, 2.9, x)
    want = jax.jit(jax.vmap(jss.hyp2f1, in_axes=(0, None, None, 0)))(a, 1.7, 2.9, x)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    c = np.array([0.6, 1.5, 3.3])
    got = tidu.vmap(tidu.grad(tss.hyp2f1, argnums=2), in_axes=(None, None, 0, None))(0.5, 1.2, c, 0.4)
    want = jax.jit(jax.vmap(jax.grad(jss.hyp2f1, argnums=2), in_axes=(None, None, 0, None)))(0.5, 1.2, c, 0.4)
    np.testing.assert_allclose(got, want, rtol=1e-10)


# --- refusals -----------------------------------------------------------------------------


def test_bad_input_is_refused_in_one_line() -> None:
    """Complex operands, operands that do not broadcast, and the C back end (no 'c'
    clause, as hyp1f1) each raise one line naming what is wrong."""
    with pytest.raises(TypeError, match=r"hyp2f1.*complex") as e:
        tss.hyp2f1(1.0, 2.0, 3.0, np.array([0.5 + 1j]))
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match=r"hyp2f1: operands could not be broadcast") as e:
        tss.hyp2f1(np.ones(2), np.ones(3), 1.0, 0.5)
    assert "\n" not in str(e.value)
    with pytest.raises(CLoweringError, match=r"no C lowering for hyp2f1 \(.*special.rules.*no 'c' clause\)") as e:
        tidu.to_c(lambda v: tss.hyp2f1(1.0, 2.0, 3.0, v), np.linspace(0.1, 0.5, 3))
    assert "\n" not in str(e.value)
