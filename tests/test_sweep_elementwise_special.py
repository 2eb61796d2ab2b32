"""Elementwise functions at special points (0, -0.0, +-inf, huge and tiny values): values
against NumPy, first and second derivatives against JAX (x64) and mpmath, in every
Hessian mode, batched and not, on the NumPy and XLA back ends."""
from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

import tidu
import tidu.numpy as tnp

MODES = ("FoF", "FoR", "RoF", "RoR")


def _same(got, want) -> None:
    got, want = np.asarray(got, float), np.asarray(want, float)
    assert got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want)), (got, want)
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-13, atol=0)


# -- batched RoF Hessians at a singular point ---------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_hessian_of_sqrt_with_a_zero_among_the_inputs_is_minus_inf_there(mode) -> None:
    # sqrt's tangent was dx / (2 sqrt(x)): jacrev(jacfwd) then met 0 / 0 in the basis
    # vectors that are 0 at x = 0 and summed it into the diagonal (nan, JAX: -inf)
    x = np.array([0.0, 1.0, 4.0])
    _same(tidu.vmap(tidu.hessian(tnp.sqrt, mode=mode))(x), [-np.inf, -0.25, -0.03125])
    if mode != "FoF":  # (forward over forward, JAX's too, spreads 0 * inf over the rest)
        h = tidu.hessian(lambda v: tnp.sum(tnp.sqrt(v)), mode=mode)(x)
        _same(np.diag(h), [-np.inf, -0.25, -0.03125])


def test_rof_hessian_of_sqrt_matches_jax_entry_by_entry() -> None:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    x = np.array([0.0, 1.0, 4.0])
    want = np.asarray(jax.jacrev(jax.jacfwd(lambda v: jnp.sum(jnp.sqrt(v))))(x))
    got = tidu.hessian(lambda v: tnp.sum(tnp.sqrt(v)), mode="RoF")(x)
    _same(got, want)


# -- negative integer powers ---------------------------------------------------------------

@pytest.mark.parametrize("n", [-2, -3])
def test_negative_integer_power_derivatives_at_zero_and_infinity(n) -> None:
    # x ** -n was 1 / x ** n, whose derivative is 0 * inf = nan at 0 and +-inf (JAX's:
    # n x ** (n - 1), +-inf at 0 and 0 at +-inf)
    x = np.array([0.0, -0.0, np.inf, -np.inf, 2.0, -1.5])
    with np.errstate(all="ignore"):
        d1 = n * x ** (n - 1.0)
        d2 = n * (n - 1) * x ** (n - 2.0)
    _same(tidu.vmap(tidu.grad(lambda v: v ** n))(x), d1)
    _same(tidu.grad(lambda v: tnp.sum(tnp.power(v, n)))(x), d1)
    for mode in MODES:
        _same(tidu.vmap(tidu.hessian(lambda v: v ** n, mode=mode))(x), d2)


@pytest.mark.parametrize("e", [-2, -3, -7, -0.5])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_negative_powers_traced_are_numpys(e, dtype) -> None:
    # 1 / x ** n and 1 / sqrt(x) were an ulp off np.power at a third of the points, and
    # (-0.0) ** -0.5 was -inf (NumPy's: +inf)
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(0.0, 10.0, 300), [0.0, -0.0, np.inf, -np.inf, -2.0]]).astype(dtype)
    with np.errstate(all="ignore"):
        want = np.power(x, e)
        got = tidu.jit(lambda v: v ** e)(x)
    assert got.dtype == want.dtype
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))


# -- floor_divide by zero ------------------------------------------------------------------

def test_floor_divide_by_zero_has_no_derivative() -> None:
    # x // 0 is x / 0 (constant +-inf or nan): its gradient was inf in x and nan in y
    x = np.array([1.0, -2.0, 0.0, 3.5])
    y = np.zeros(4)
    for argnums in (0, 1):
        _same(tidu.vmap(tidu.grad(tnp.floor_divide, argnums=argnums))(x, y), np.zeros(4))
        _same(tidu.jit(tidu.vmap(tidu.grad(tnp.floor_divide, argnums=argnums)), device="cpu")(x, y), np.zeros(4))
    h = tidu.vmap(tidu.hessian(tnp.floor_divide, argnums=(0, 1)))(x, y)
    for row in h:
        for block in row:
            _same(block, np.zeros(4))
    with np.errstate(all="ignore"):
        _same(tidu.jit(tnp.floor_divide)(x, y), np.floor_divide(x, y))


# -- sinc far out --------------------------------------------------------------------------

def _sinc_derivative(v: float, k: int) -> float:
    """The k-th derivative of sin(p) / p at tidu's own p = fl(pi * v), times pi^k."""
    with mp.workdps(60):
        p = mp.mpf(float(np.pi * v))
        return float(mp.diff(lambda t: mp.sin(t) / t, p, k) * mp.pi ** k)


@pytest.mark.parametrize("mode", MODES)
def test_sinc_derivatives_far_out_are_finite(mode) -> None:
    # past |x| ~ 1e14 the unused Taylor branch overflowed and reverse mode's 0 * inf made
    # the gradient and the FoR/RoF/RoR Hessians nan
    x = np.array([1e20, -3e15, 123.25])
    f = lambda v: tnp.sum(tnp.sinc(v))  # noqa: E731
    np.testing.assert_allclose(tidu.grad(f)(x), [_sinc_derivative(v, 1) for v in x], rtol=1e-9)
    np.testing.assert_allclose(np.diag(tidu.hessian(f, mode=mode)(x)), [_sinc_derivative(v, 2) for v in x], rtol=1e-9)
    huge = np.array([1e300])
    assert np.isfinite(tidu.grad(f)(huge)).all() and np.isfinite(tidu.hessian(f, mode=mode)(huge)).all()


# -- cbrt ------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_cbrt_derivatives_at_zero_and_away(mode) -> None:
    x = np.array([0.0, -0.0, 8.0, -8.0, 1e300])
    with np.errstate(all="ignore"):
        c = np.cbrt(x)
        d1 = 1.0 / (3.0 * c * c)
        d2 = -2.0 / (9.0 * c ** 5)
    d1[:2], d2[:2] = np.inf, [-np.inf, np.inf]  # (1/3) out^-2 and -(2/9) out^-5 at +-0
    _same(tidu.vmap(tidu.grad(tnp.cbrt))(x), d1)
    _same(tidu.vmap(tidu.hessian(tnp.cbrt, mode=mode))(x), d2)


@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
@pytest.mark.parametrize("a, b", [(np.int8(2), np.float16(1.5)), (np.int32(1), np.float32(2.0)),
                                  (2, np.float32(1.5)), (True, np.float32(1.0))])
def test_logaddexp_of_an_integer_and_a_float_traced_has_the_floats_dtype(name, a, b):
    """Traced, the integer operand was made float64 before meeting the float one (float64
    results); JAX's promotion gives the float's dtype, as tidu's other binary functions."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    got = tidu.jit(getattr(tnp, name))(a, b)
    want = getattr(jnp, name)(a, b)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-3)
