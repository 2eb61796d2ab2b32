"""tnp.cbrt (and tidu.lax.cbrt) is the primitive cbrt: NumPy's own values when traced (the
composition sign(x) |x|^(1/3) it replaces was up to 105 ulp off them near 1e298, 1/3 not
being a double), JAX's derivatives (1/3) out^-2 in every transform, stablehlo.cbrt on XLA,
libm's cbrt in C, and derivative graphs of a few ops."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tidu
import tidu.numpy as tnp

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)

LOG = np.logspace(-300, 300, 2001)
EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e-310, -2.2e-308,
                  np.finfo(np.float64).tiny, np.finfo(np.float64).max, -np.finfo(np.float64).max,
                  1.0, -1.0, 8.0, -27.0, 1e-45, 1.4e-45, -3e-39])
VALUES = np.concatenate([LOG, -LOG, EDGES])
# derivatives against JAX: XLA on the CPU flushes subnormals to zero, so none here
POINTS = np.array([0.0, -0.0, 1e-300, -1e-300, 1e-8, -0.3, 0.7, -1.0, 8.0, -27.0, 12.5, 1e100, -1e300,
                   np.inf, -np.inf, np.nan])


def ordered(a: np.ndarray) -> np.ndarray:
    """Floats as integers in the order of their values (one apart for neighbours; +-0 both 0)."""
    size = a.dtype.itemsize
    bits = a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[size]).astype(np.uint64)
    sign = np.uint64(1) << np.uint64(8 * size - 1)
    magnitude = (bits & (sign - np.uint64(1))).astype(np.int64)
    return np.where((bits & sign) != 0, -magnitude, magnitude)


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """The distance in ulps of the non-nan values (nan where both are nan); asserts nan
    positions agree."""
    wide = want.astype(np.float64)
    assert np.array_equal(np.isnan(got.astype(np.float64)), np.isnan(wide))
    return np.abs(ordered(got) - ordered(want))[~np.isnan(wide)]


def same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[want.itemsize]
    np.testing.assert_array_equal(np.asarray(got).view(bits), want.view(bits))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_traced_values_are_numpys_bit_for_bit(dtype: str) -> None:
    with np.errstate(all="ignore"):
        x = VALUES.astype(dtype)  # (past 3.4e38 inf, below 1.4e-45 +-0 in float32)
        want = np.cbrt(x)
    for fn in (tnp.cbrt, tidu.lax.cbrt):
        same_bits(np.asarray(fn(x)), want)
        same_bits(np.asarray(tidu.jit(fn)(x)), want)
    np.testing.assert_array_equal(np.signbit(tidu.jit(tnp.cbrt)(x)), np.signbit(want))


def test_the_old_compositions_error_is_gone() -> None:
    # sign(x) |x|^(1/3) was 105 ulp off np.cbrt at 7.9e297 (and 3976 of these 4002 values)
    x = np.concatenate([LOG, -LOG])
    assert np.max(ulps(np.asarray(tidu.jit(tnp.cbrt)(x)), np.cbrt(x))) == 0


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_half_precisions_every_value_within_an_ulp(dtype: type) -> None:
    x = np.arange(2**16, dtype=np.uint16).view(dtype)  # every bit pattern
    with np.errstate(invalid="ignore"):
        want = np.cbrt(x)
    got = np.asarray(tidu.jit(tnp.cbrt)(x))
    assert got.dtype == want.dtype
    assert np.max(ulps(got, want)) <= 1
    assert np.array_equal(np.signbit(got), np.signbit(want))


def test_one_primitive_and_small_derivative_graphs() -> None:
    # the composition had 7, 14 and 16 ops
    for fn in (tnp.cbrt, tidu.lax.cbrt):
        g = tidu.make_graph(fn)(0.3).graph
        assert g.op_count == 1 and "cbrt(" in str(tidu.make_graph(fn)(0.3).program)
    assert tidu.make_graph(tidu.grad(tnp.cbrt))(0.3).graph.op_count <= 3
    assert tidu.make_graph(tidu.grad(tidu.grad(tnp.cbrt)))(0.3).graph.op_count <= 7
    x16 = np.array([1.0, -8.0], ml_dtypes.bfloat16)  # in float32: converts around the one op
    assert tidu.make_graph(tnp.cbrt)(x16).graph.op_count == 3


def test_complex_values_are_refused() -> None:
    with pytest.raises(TypeError, match="complex"):
        tidu.jit(tnp.cbrt)(np.array([1 + 1j]))


def _close(got: object, want: object, zero_signs: bool = True) -> None:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)  # (equal infinities and nans too)
    numbers = ~np.isnan(want) & (zero_signs | (want != 0))
    assert np.array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))


def test_first_derivatives_are_jaxs() -> None:
    x = POINTS
    with np.errstate(all="ignore"):
        want = np.asarray(jax.vmap(jax.grad(jnp.cbrt))(x))
        _close(tidu.vmap(tidu.grad(tnp.cbrt))(x), want)
        _close(tidu.vmap(tidu.grad(tidu.lax.cbrt))(x), want)
        dx = np.linspace(-2.0, 2.0, x.size)
        out, tangent = tidu.jvp(tnp.cbrt, (x,), (dx,))
        j_out, j_tangent = jax.jvp(jnp.cbrt, (x,), (dx,))
        _close(out, j_out)
        _close(tangent, j_tangent)
        out, pull = tidu.vjp(tnp.cbrt, x)
        _close(pull(dx)[0], jax.vjp(jnp.cbrt, x)[1](dx)[0])
        # the Jacobian of a vector function, by rows and by columns
        finite = x[np.isfinite(x) & (x != 0)]
        _close(tidu.jacfwd(tnp.cbrt)(finite), jax.jacfwd(jnp.cbrt)(finite))
        _close(tidu.jacrev(tnp.cbrt)(finite), jax.jacrev(jnp.cbrt)(finite))


@pytest.mark.parametrize("mode", ["FoF", "FoR", "RoF", "RoR"])
def test_second_derivatives_are_jaxs(mode: str) -> None:
    # -(2/9) out^-5: -inf at +0 and +inf at -0, as JAX's integer_pow(out, -2)
    with np.errstate(all="ignore"):
        want = np.asarray(jax.vmap(jax.hessian(jnp.cbrt))(POINTS))
        _close(tidu.vmap(tidu.hessian(tnp.cbrt, mode=mode))(POINTS), want)
        _close(tidu.vmap(tidu.grad(tidu.grad(tnp.cbrt)))(POINTS), want)
        # a Hessian of a sum over a batch: a diagonal matrix. Left out: 0, where the basis
        # vectors' zeros meet the weight's infinities, and +-1e-300, whose second
        # derivative overflows (FoF's basis meets that inf as sqrt's does). The signs of
        # the zeros off the diagonal are the order of the products, not compared.
        x = POINTS[np.isfinite(POINTS) & (np.abs(POINTS) > 1e-200)]
        got = tidu.hessian(lambda v: tnp.sum(tnp.cbrt(v)), mode=mode)(x)
        _close(got, jax.hessian(lambda v: jnp.sum(jnp.cbrt(v)))(x), zero_signs=False)


def test_third_derivative_is_jaxs() -> None:
    with np.errstate(all="ignore"):
        want = np.asarray(jax.vmap(jax.grad(jax.grad(jax.grad(jnp.cbrt))))(POINTS))
        _close(tidu.vmap(tidu.grad(tidu.grad(tidu.grad(tnp.cbrt))))(POINTS), want)


def test_jet_is_the_nested_derivatives() -> None:
    # y^3 = u solved order by order, against JAX's nested jvp along the same path
    x0, series = np.array([-1.3, 0.45, 8.0]), [np.array([0.5, -1.0, 2.0]), np.array([1.0, 0.3, -0.7]),
                                               np.array([-0.2, 0.8, 0.1])]
    y0, ys = tidu.jet(tnp.cbrt, (x0,), (series,))
    _close(y0, np.cbrt(x0))

    def path(t):
        return x0 + series[0] * t + series[1] * t**2 / 2 + series[2] * t**3 / 6

    g = lambda t: jnp.cbrt(path(t))  # noqa: E731
    for k in range(3):
        g = (lambda h: lambda t: jax.jvp(h, (t,), (1.0,))[1])(g)
        np.testing.assert_allclose(ys[k], g(0.0), rtol=1e-13)


def test_xla_and_c_back_ends() -> None:
    """stablehlo.cbrt on XLA, libm's cbrt in C: within 3 ulp of NumPy's (glibc's cbrt is
    not correctly rounded; NumPy's may be SIMD code), normal values only (XLA on the CPU
    flushes subnormals to zero); derivatives as the NumPy back end's."""
    for dtype in ("float64", "float32"):
        with np.errstate(all="ignore"):
            x = VALUES.astype(dtype)
            x = x[np.isnan(x) | (np.abs(x) >= np.finfo(dtype).tiny) | (x == 0)]
            want = np.cbrt(x)
        program = tidu.make_graph(tnp.cbrt)(x).program
        for backend in ("xla", "c"):
            got = program.run([x], backend=backend)[0]
            assert got.dtype == want.dtype and np.max(ulps(got, want)) <= 3, backend
            assert np.array_equal(np.signbit(got), np.signbit(want)), backend
    assert "stablehlo.cbrt %" in tidu.to_stablehlo(tnp.cbrt, POINTS)
    for order in (tidu.grad(tnp.cbrt), tidu.grad(tidu.grad(tnp.cbrt))):
        program = tidu.make_graph(tidu.vmap(order))(POINTS).program
        with np.errstate(all="ignore"):
            want = program.eval([POINTS])[0]
        for backend in ("xla", "c"):
            got = program.run([POINTS], backend=backend)[0]
            np.testing.assert_allclose(got, want, rtol=2e-15, atol=0)
            numbers = ~np.isnan(want)
            assert np.array_equal(np.signbit(got[numbers]), np.signbit(want[numbers])), backend
    half = np.arange(2**16, dtype=np.uint16).view(np.float16)
    half = half[np.isfinite(half)]
    got = tidu.make_graph(tnp.cbrt)(half).program.run([half], backend="xla")[0]
    assert np.max(ulps(got, np.cbrt(half))) <= 1
