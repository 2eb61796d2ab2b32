"""tnp.roots as a set (functions of its roots that do not depend on their order) and
tidu.scipy.special's dawsn and owens_t: values against SciPy and mpmath over wide ranges,
derivatives against their closed forms, mpmath, finite differences and JAX (x64), eager,
traced, batched and in XLA. (tests/test_special.py has both in its grids too; roots'
sorted values and derivatives are in tests/test_linalg_more.py and
tests/test_numpy_coverage.py.)"""

from __future__ import annotations

import math
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

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402
from tidu.scipy import special as tss  # noqa: E402

# --- roots ------------------------------------------------------------------------------------


def _power_sums(m: Any, r: Any) -> Any:
    """Functions of the roots that do not depend on their order: the real parts of the sum
    of their squares and cubes, and of their product."""
    return m.real(m.sum(r * r)) + 0.5 * m.real(m.sum(r * r * r)) + m.real(m.prod(r))


def test_roots_order_free_functions_against_jax_and_finite_differences() -> None:
    rng = np.random.default_rng(41)
    p = rng.normal(size=6)
    mine = lambda c: _power_sums(tnp, tnp.roots(c, strip_zeros=False))  # noqa: E731
    theirs = lambda c: _power_sums(jnp, jnp.roots(c, strip_zeros=False))  # noqa: E731
    np.testing.assert_allclose(tidu.jit(mine)(p), theirs(p), rtol=1e-12)
    g = tidu.grad(mine)(p)
    np.testing.assert_allclose(g, jax.grad(theirs)(p), rtol=1e-10, atol=1e-12)
    # the power sums are rational in p (Newton's identities): central differences are exact to O(eps^2)
    eps = 1e-6
    fd = [(theirs(p + eps * e) - theirs(p - eps * e)) / (2 * eps) for e in np.eye(6)]
    np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-8)
    # second derivatives: jnp.roots has none (eigenvector derivatives): central differences of tidu's gradient
    h = tidu.hessian(mine)(p)
    fd2 = np.stack([(tidu.grad(mine)(p + eps * e) - tidu.grad(mine)(p - eps * e)) / (2 * eps) for e in np.eye(6)])
    np.testing.assert_allclose(h, fd2, rtol=1e-6, atol=1e-6)
    # sum of the squares = (p1/p0)^2 - 2 p2/p0: its gradient in closed form
    sq = tidu.grad(lambda c: tnp.real(tnp.sum(tnp.roots(c, strip_zeros=False) ** 2)))(p)
    want = np.zeros(6)
    want[0] = -2 * p[1] ** 2 / p[0] ** 3 + 2 * p[2] / p[0] ** 2
    want[1], want[2] = 2 * p[1] / p[0] ** 2, -2 / p[0]
    np.testing.assert_allclose(sq, want, rtol=1e-10, atol=1e-12)


def test_roots_batched_and_trailing_zeros() -> None:
    rng = np.random.default_rng(42)
    ps = rng.normal(size=(3, 5))
    f_t = lambda c: _power_sums(tnp, tnp.roots(c, strip_zeros=False))  # noqa: E731
    f_j = lambda c: _power_sums(jnp, jnp.roots(c, strip_zeros=False))  # noqa: E731
    np.testing.assert_allclose(tidu.vmap(f_t)(ps), jax.vmap(f_j)(ps), rtol=1e-12)
    np.testing.assert_allclose(tidu.vmap(tidu.grad(f_t))(ps), jax.vmap(jax.grad(f_j))(ps), rtol=1e-10, atol=1e-12)
    # trailing zeros: zero roots (JAX's and NumPy's), eager and traced
    p = np.array([1.0, 2.0, 0.0, 0.0])
    for got in (tnp.roots(p), tidu.jit(lambda c: tnp.roots(c, strip_zeros=False))(p)):
        np.testing.assert_allclose(np.sort_complex(got), np.sort_complex(np.asarray(jnp.roots(p))), atol=1e-15)


# --- dawsn ------------------------------------------------------------------------------------


def _dawson(x: Any) -> Any:
    """F(x) = sqrt(pi)/2 exp(-x^2) erfi(x), in mpmath."""
    return mpmath.sqrt(mpmath.pi) / 2 * mpmath.exp(-x * x) * mpmath.erfi(x)


def _mp_derivative(f: Callable[[Any], Any], x: float, k: int) -> float:
    with mpmath.workdps(40):
        return float(mpmath.diff(f, mpmath.mpf(x), k))


DAWSN_X = np.concatenate([np.linspace(-30, 30, 241), -np.logspace(-300, 300, 61), np.logspace(-300, 300, 61),
                          [0.0, 0.4999999, 0.5, 6.9999999, 7.0, 7.0000001, 5e-324]])


def test_dawsn_values_against_scipy_and_mpmath() -> None:
    want = scipy.special.dawsn(DAWSN_X)
    for got in (tss.dawsn(DAWSN_X), tidu.jit(tss.dawsn)(DAWSN_X)):
        np.testing.assert_allclose(got, want, rtol=4e-15, atol=0)
    x = np.array([-25.0, -7.0, -6.99, -3.3, -0.7, -0.49, 1e-5, 0.2, 0.51, 1.0, 2.5, 4.0, 6.5, 7.01, 11.0, 1e4])
    mp = np.array([_mp_derivative(_dawson, v, 0) for v in x])
    np.testing.assert_allclose(tss.dawsn(x), mp, rtol=2e-15, atol=0)
    # the edges: odd (-0.0 too), 0 at +-inf, nan kept; ints are float64, float32 stays float32
    got = tss.dawsn(np.array([0.0, -0.0, np.inf, -np.inf, np.nan]))
    np.testing.assert_array_equal(got, [0.0, -0.0, 0.0, -0.0, np.nan])
    assert np.signbit(got[1]) and np.signbit(got[3])
    assert tss.dawsn(np.arange(3)).dtype == np.float64 and tss.dawsn(np.float32([1.0])).dtype == np.float32
    assert tidu.jit(tss.dawsn)(np.float32([1.0, 9.0])).dtype == np.float32
    np.testing.assert_allclose(tss.dawsn(np.float32(DAWSN_X[:241])), scipy.special.dawsn(DAWSN_X[:241]),
                               rtol=3e-7)
    with pytest.raises(TypeError, match="dawsn: x must be real"):
        tss.dawsn(np.array([1j]))


# (each order's worst relative error against mpmath, over both regimes: the rule F' = 1 - 2xF
# up to |x| = 7, where 2xF is near 1, and the asymptotic series above)
DAWSN_ORDER_TOL = [2e-15, 1e-13, 5e-12, 2e-10, 5e-9]


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_dawsn_derivatives_against_mpmath(order: int) -> None:
    x = np.array([-1000.0, -30.0, -7.0000001, -7.0, -6.5, -3.0, -0.5, -0.49, 1e-9, 0.3, 0.9, 2.0, 5.1, 7.01, 12.5,
                  100.0])
    f = tss.dawsn
    for _ in range(order):
        f = tidu.grad(f)
    got = np.array([f(v) for v in x])
    want = np.array([_mp_derivative(_dawson, v, order) for v in x])
    np.testing.assert_allclose(got, want, rtol=DAWSN_ORDER_TOL[order], atol=0)


def test_dawsn_derivatives_against_jax_and_the_rule() -> None:
    """Where JAX's derivatives keep their digits (|x| <= 8: its rule cancels in the tails,
    the second derivative at 10^4 is 200 % off): the gradient, jax.grad(jax.grad) and the
    Hessian; the gradient is 1 - 2 x F (SciPy's F) everywhere, and finite differences."""
    x = np.linspace(-8, 8, 23)
    total_t, total_j = (lambda v: tnp.sum(tss.dawsn(v))), (lambda v: jnp.sum(jss.dawsn(v)))
    g = tidu.grad(total_t)(x)
    np.testing.assert_allclose(g, jax.grad(total_j)(x), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(g, 1 - 2 * x * scipy.special.dawsn(x), rtol=1e-12, atol=1e-15)
    fd = (scipy.special.dawsn(x + 1e-6) - scipy.special.dawsn(x - 1e-6)) / 2e-6
    np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(tidu.hessian(total_t)(x), jax.hessian(total_j)(x), rtol=1e-11, atol=1e-14)
    gg_t = tidu.jit(tidu.grad(tidu.grad(tss.dawsn)))
    gg_j = jax.jit(jax.grad(jax.grad(jss.dawsn)))
    np.testing.assert_allclose([gg_t(v) for v in x[::4]], [gg_j(v) for v in x[::4]], rtol=1e-11, atol=1e-14)


def test_dawsn_batched_against_jax() -> None:
    x = np.linspace(-9, 9, 12).reshape(3, 4)
    np.testing.assert_allclose(tidu.vmap(tss.dawsn)(x), jax.vmap(jss.dawsn)(x), rtol=1e-14)
    np.testing.assert_allclose(tidu.vmap(tidu.vmap(tidu.grad(tss.dawsn)))(x),
                               jax.vmap(jax.vmap(jax.grad(jss.dawsn)))(x), rtol=1e-12, atol=1e-15)
    h = tidu.vmap(tidu.hessian(lambda v: tnp.sum(tss.dawsn(v))))(x)
    np.testing.assert_allclose(h, jax.vmap(jax.hessian(lambda v: jnp.sum(jss.dawsn(v))))(x), rtol=1e-11, atol=1e-14)


# --- owens_t ----------------------------------------------------------------------------------

def _owens_t_grid() -> tuple[np.ndarray, np.ndarray]:
    """h and a: random over h in (-15, 15), a in (-6, 6) and a in 1e-4..1e3, the special
    values (h = 0, a = 0, a = +-1, a = +-inf, large h) and their neighbours."""
    rng = np.random.default_rng(43)
    special_h = [0.0, 0.0, 0.0, -0.0, 1e-8, 0.5, -1.0, 2.0, 3.0, 8.0, 20.0, 37.0, 50.0, 1.0, 2.0, -0.5, 0.0, 3.0]
    special_a = [0.0, 1.0, -3.0, 0.5, 1.0, 0.0, 1.0, -1.0, 1.0 + 1e-12, 1.0, 1.0, 0.7, 2.0, 1e-300, np.inf, -np.inf,
                 np.inf, 1e300]
    h = np.concatenate([rng.uniform(-15, 15, 300), rng.uniform(-1, 1, 100), rng.uniform(0, 40, 50), special_h])
    a = np.concatenate([rng.uniform(-6, 6, 300), 10 ** rng.uniform(-4, 3, 100), rng.uniform(0.9, 1.1, 50), special_a])
    return h, a


def test_owens_t_values_against_scipy() -> None:
    h, a = _owens_t_grid()
    want = scipy.special.owens_t(h, a)
    # (2e-13: for h > 20 and a > 1, T ~ (1 - Phi(h)) / 2 < 1e-87, SciPy's is up to 1.2e-13 off
    # mpmath there, tidu's 7e-14: the next test; elsewhere both within 6e-14)
    for got in (tss.owens_t(h, a), tidu.jit(tss.owens_t)(h, a)):
        np.testing.assert_allclose(got, want, rtol=2e-13, atol=0)
    inner = np.abs(h) < 20
    np.testing.assert_allclose(tss.owens_t(h[inner], a[inner]), want[inner], rtol=1e-13, atol=0)
    # closed forms: T(0, a) = atan(a) / (2 pi), T(h, 1) = Phi(h) (1 - Phi(h)) / 2, T(h, 0) = 0,
    # T(h, inf) = (1 - Phi(|h|)) / 2; even in h, odd in a
    a1 = np.linspace(-5, 5, 21)
    np.testing.assert_allclose(tss.owens_t(0.0, a1), np.arctan(a1) / (2 * np.pi), rtol=1e-15, atol=1e-17)
    h1 = np.linspace(-10, 10, 21)
    np.testing.assert_allclose(tss.owens_t(h1, 1.0), scipy.special.ndtr(h1) * scipy.special.ndtr(-h1) / 2, rtol=1e-13)
    np.testing.assert_allclose(tss.owens_t(h1, np.inf), scipy.special.ndtr(-np.abs(h1)) / 2, rtol=1e-13)
    np.testing.assert_array_equal(tss.owens_t(h1, 0.0), 0.0)
    np.testing.assert_array_equal(tss.owens_t(-h, a), tss.owens_t(h, a))
    np.testing.assert_array_equal(tss.owens_t(h, -a), -tss.owens_t(h, a))


def _owens_t_mp(h: float, a: float) -> float:
    """T(h, a) for h > 0, a > 0: exp(-h^2 / 2) / (2 pi) times mpmath's quadrature of
    exp(-h^2 x^2 / 2) / (1 + x^2) over [0, a], split at k / h (its peak at 0 is 1/h wide;
    mpmath's tolerance is absolute: the factor exp(-h^2 / 2) kept outside)."""
    with mpmath.workdps(50):
        hh, aa = mpmath.mpf(h), mpmath.mpf(a)
        f = lambda x: mpmath.exp(-hh * hh * x * x / 2) / (1 + x * x)  # noqa: E731
        points = [mpmath.mpf(0), *(k / hh for k in (1, 2, 4, 8, 16) if k / hh < aa), aa]
        return float(mpmath.quad(f, points) * mpmath.exp(-hh * hh / 2) / (2 * mpmath.pi))


def test_owens_t_against_mpmath_where_it_is_small() -> None:
    """Relative accuracy in the tails (T ~ exp(-h^2 / 2)) and near a = 1 (both branches)."""
    h = np.array([5.0, 9.0, 12.0, 20.0, 30.0, 12.0, 0.3, 7.0, 25.0, 33.67459304044693, 28.311143632322995])
    a = np.array([0.999, 1.0, 0.3, 1.0, 0.05, 1.5, 0.999999, 4.0, 1.2, 1.0048718721723602, 1.0390188396785909])
    want = [_owens_t_mp(u, v) for u, v in zip(h, a, strict=True)]
    np.testing.assert_allclose(tss.owens_t(h, a), want, rtol=1e-13, atol=0)


def _owens_t_dh(h: np.ndarray, a: np.ndarray) -> np.ndarray:
    return -np.exp(-h * h / 2) * scipy.special.erf(a * h / np.sqrt(2)) / (2 * np.sqrt(2 * np.pi))


def _owens_t_da(h: np.ndarray, a: np.ndarray) -> np.ndarray:
    return np.exp(-h * h * (1 + a * a) / 2) / (2 * np.pi * (1 + a * a))


def test_owens_t_derivatives() -> None:
    """dT/dh and dT/da against the closed forms, central differences of SciPy's T and
    jax.grad; the second derivatives against jax.hessian."""
    rng = np.random.default_rng(44)
    h = np.concatenate([rng.uniform(-4, 4, 40), [0.0, 0.0, 1.0, -2.0]])
    a = np.concatenate([rng.uniform(-3, 3, 40), [0.5, 2.0, 0.0, 1.0]])
    total_t = lambda u, v: tnp.sum(tss.owens_t(u, v))  # noqa: E731
    total_j = lambda u, v: jnp.sum(jss.owens_t(u, v))  # noqa: E731
    gh, ga = tidu.grad(total_t, argnums=(0, 1))(h, a)
    np.testing.assert_allclose(gh, _owens_t_dh(h, a), rtol=1e-13, atol=1e-16)
    np.testing.assert_allclose(ga, _owens_t_da(h, a), rtol=1e-13, atol=1e-16)
    eps = 1e-5
    fd_h = (scipy.special.owens_t(h + eps, a) - scipy.special.owens_t(h - eps, a)) / (2 * eps)
    fd_a = (scipy.special.owens_t(h, a + eps) - scipy.special.owens_t(h, a - eps)) / (2 * eps)
    np.testing.assert_allclose(gh, fd_h, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(ga, fd_a, rtol=1e-7, atol=1e-10)
    jh, ja = jax.grad(total_j, argnums=(0, 1))(h, a)
    np.testing.assert_allclose(gh, jh, rtol=1e-12, atol=1e-16)
    np.testing.assert_allclose(ga, ja, rtol=1e-12, atol=1e-16)
    hs, as_ = h[::4], a[::4]
    got = tidu.hessian(total_t, argnums=(0, 1))(hs, as_)
    want = jax.hessian(total_j, argnums=(0, 1))(hs, as_)
    for i in range(2):
        for j in range(2):
            np.testing.assert_allclose(got[i][j], want[i][j], rtol=1e-12, atol=1e-16, err_msg=f"d2/d{i}d{j}")
    # d2T/dh2 at one point against central differences of the closed-form dT/dh
    u, v = 0.7, 1.8
    d2 = tidu.grad(tidu.grad(tss.owens_t))(u, v)
    fd2 = (_owens_t_dh(np.array(u + eps), v) - _owens_t_dh(np.array(u - eps), v)) / (2 * eps)
    assert d2 == pytest.approx(float(fd2), rel=1e-8)


def test_owens_t_batched_dtypes_and_errors() -> None:
    h, a = np.linspace(-3, 3, 12).reshape(3, 4), np.linspace(-2.5, 2.5, 12).reshape(3, 4)[::-1]
    np.testing.assert_allclose(tidu.vmap(tss.owens_t)(h, a), jax.vmap(jss.owens_t)(h, a), rtol=1e-13, atol=1e-16)
    np.testing.assert_allclose(tidu.vmap(tss.owens_t, in_axes=(0, None))(h, a[0]),
                               jax.vmap(jss.owens_t, in_axes=(0, None))(h, a[0]), rtol=1e-13, atol=1e-16)
    g_t = tidu.vmap(tidu.grad(lambda u, v: tnp.sum(tss.owens_t(u, v)), argnums=(0, 1)))(h, a)
    g_j = jax.vmap(jax.grad(lambda u, v: jnp.sum(jss.owens_t(u, v)), argnums=(0, 1)))(h, a)
    for x, y in zip(g_t, g_j, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-16)
    # float32 stays float32 (SciPy's; JAX's is float64), ints go to float64, complex is refused
    assert tss.owens_t(np.float32([0.5]), np.float32([2.0])).dtype == np.float32
    assert tidu.jit(tss.owens_t)(np.float32([0.5]), 2.0).dtype == np.float32
    np.testing.assert_allclose(tss.owens_t(np.float32(h), np.float32(a)), scipy.special.owens_t(h, a), rtol=2e-6,
                               atol=1e-8)
    assert float(tss.owens_t(1, 2)) == pytest.approx(scipy.special.owens_t(1.0, 2.0), rel=1e-14)
    with pytest.raises(TypeError, match="owens_t: h and a must be real"):
        tss.owens_t(np.array([1j]), 1.0)


def test_dawsn_and_owens_t_in_xla() -> None:
    pytest.importorskip("jaxlib")
    x = DAWSN_X[:241]
    got = tidu.make_graph(tss.dawsn)(x).program.run([x], backend="xla")[0]
    np.testing.assert_allclose(got, scipy.special.dawsn(x), rtol=4e-15, atol=0)
    grad = tidu.grad(lambda v: tnp.sum(tss.dawsn(v)))
    got = tidu.make_graph(grad)(x).program.run([x], backend="xla")[0]
    np.testing.assert_allclose(got, grad(x), rtol=1e-14, atol=1e-16)
    h, a = _owens_t_grid()
    h, a = h[:450], a[:450]  # (the finite ones)
    got = tidu.make_graph(tss.owens_t)(h, a).program.run([h, a], backend="xla")[0]
    np.testing.assert_allclose(got, tss.owens_t(h, a), rtol=1e-14, atol=0)
    assert math.isclose(float(tidu.jit(tss.owens_t)(0.0, 1.0)), 0.125, rel_tol=1e-15)
