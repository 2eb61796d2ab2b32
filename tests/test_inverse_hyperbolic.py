"""arcsinh, arccosh and arctanh of float32 and float64 values are the primitives asinh,
acosh and atanh: values are NumPy's on the NumPy back end (eagerly and traced, bit for
bit), derivatives JAX's, and the derivative graphs are small (arcsinh was a composite of
about 20 ops, each of them differentiated at every order)."""

from __future__ import annotations

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)

POINTS = {
    "arcsinh": np.array([-3e5, -2.0, -0.5, -0.0, 0.0, 1e-300, 1e-8, 0.3, 1.0, 7.5, 1e100, np.nan, np.inf, -np.inf]),
    "arccosh": np.array([1.0, 1.0 + 1e-12, 1.0 + 1e-7, 1.5, 2.0, 30.0, 1e100, 1e308, 0.5, np.nan, np.inf]),
    "arctanh": np.array([-1.0, -0.999999, -0.5, -0.0, 0.0, 1e-300, 1e-8, 0.3, 0.9999999999, 1.0, 1.5, np.nan]),
}
NAMES = tuple(POINTS)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_values_are_numpys(name: str, dtype: str) -> None:
    with np.errstate(all="ignore"):
        x = POINTS[name].astype(dtype)  # (1e100 is inf in float32)
        want = getattr(np, name)(x)
        eager, traced = getattr(tnp, name)(x), tidu.jit(getattr(tnp, name))(x)
    assert eager.dtype == traced.dtype == want.dtype
    bits = f"uint{8 * want.itemsize}"
    np.testing.assert_array_equal(eager.view(bits), want.view(bits))
    np.testing.assert_array_equal(traced.view(bits), want.view(bits))


@pytest.mark.parametrize("name", NAMES)
def test_derivatives_are_jaxs(name: str) -> None:
    f, g = getattr(tnp, name), getattr(jnp, name)
    x = POINTS[name]
    # JAX's asinh derivative is rsqrt(x^2 + 1) too (0 where x^2 overflows); its acosh one
    # overflows at 1e308 (tidu's is rsqrt(x - 1) rsqrt(x + 1): 1e-308 there)
    x = x[x != 1e308]
    for ours, theirs in [(tidu.grad(f), jax.grad(g)), (tidu.jacrev(f), jax.jacrev(g)),
                         (tidu.grad(tidu.grad(f)), jax.grad(jax.grad(g))),
                         (tidu.hessian(f, mode="RoR"), jax.hessian(g)),
                         (tidu.jacfwd(tidu.grad(f)), jax.jacfwd(jax.grad(g)))]:
        with np.errstate(all="ignore"):
            got, want = np.asarray(tidu.vmap(ours)(x)), np.asarray(jax.vmap(theirs)(x))
        # near +-1 atanh's 1 - x^2 and JAX's (1 - x)(1 + x) differ in the last digits
        away = ~((name == "arctanh") & (np.abs(x) > 0.9))
        np.testing.assert_allclose(got[away], want[away], rtol=1e-13, atol=0)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)
        numbers = ~np.isnan(want)
        assert np.array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))


def test_arccosh_derivative_has_no_overflow_nor_cancellation() -> None:
    for x, want in [(1e308, 1e-308), (1 + 1e-12, 1 / np.sqrt(1e-12 * (2 + 1e-12)))]:
        np.testing.assert_allclose(tidu.grad(tnp.arccosh)(x), want, rtol=1e-4 if x < 2 else 1e-15)
    assert tidu.grad(tnp.arccosh)(1.0) == np.inf


@pytest.mark.parametrize("name", NAMES)
def test_xla_and_c_agree(name: str) -> None:
    x = POINTS[name][np.isfinite(POINTS[name]) & (np.abs(POINTS[name]) < 1e50)]
    program = tidu.make_graph(tidu.vmap(tidu.grad(getattr(tnp, name))))(x).program
    want = program.eval([x])[0]
    np.testing.assert_allclose(program.run([x], backend="xla")[0], want, rtol=1e-10)
    np.testing.assert_allclose(program.run([x], backend="c")[0], want, rtol=1e-14)
    text = tidu.to_stablehlo(getattr(tnp, name), x)
    assert f'"chlo.{name.replace("arc", "a")}"' in text


def test_derivative_graphs_are_small() -> None:
    """The gradient and Hessian of arcsinh(x) * cosh(x / 2): a handful of ops (the
    composite's gradient had 50, its second derivative 80)."""
    def f(v):
        return tnp.arcsinh(v) * tnp.cosh(0.5 * v)

    first = tidu.make_graph(tidu.grad(f))(0.3).graph
    second = tidu.make_graph(tidu.grad(tidu.grad(f)))(0.3).graph
    assert first.op_count <= 12 and second.op_count <= 24, (first.op_count, second.op_count)
    want = jax.grad(jax.grad(lambda v: jnp.arcsinh(v) * jnp.cosh(0.5 * v)))(0.3)
    assert tidu.compile(second).eval([np.float64(0.3)])[0] == pytest.approx(float(want), rel=1e-14)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_keeps_its_compositions(dtype: str) -> None:
    # x^2 overflows past 256 in float16: the primitive's derivative rsqrt(1 + x^2) would be 0
    x = np.array([300.0, 1000.0], dtype=dtype)
    got = tidu.vmap(tidu.grad(tnp.arcsinh))(x)
    np.testing.assert_allclose(np.asarray(got, np.float64), 1 / np.asarray(x, np.float64), rtol=1e-2)
