"""arcsin, arccos and arctan of real values are the primitives asin, acos and atan: values
are NumPy's on the NumPy back end (eagerly and traced, bit for bit), derivatives JAX's
(inf at +-1, signed zeros included), and the derivative graphs are small (they went
through the complex logarithm of arctan2 before, and arcsin's Hessian had 38 ops)."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import sympy

import tidu
import tidu.numpy as tnp

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)

NAMES = ("arcsin", "arccos", "arctan")
X = np.array([-1.0, -0.999999, -0.5, -0.0, 0.0, 1e-300, 0.3, 0.9999999999, 1.0, 1.5, np.nan, np.inf, -np.inf])


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_values_are_numpys(name: str, dtype: str) -> None:
    x = X.astype(dtype)
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x)
        eager, traced = getattr(tnp, name)(x), tidu.jit(getattr(tnp, name))(x)
    assert eager.dtype == traced.dtype == want.dtype
    bits = f"uint{8 * want.itemsize}"  # (nan never equals nan in bfloat16 comparisons)
    np.testing.assert_array_equal(eager.view(bits), want.view(bits))
    np.testing.assert_array_equal(traced.view(bits), want.view(bits))


@pytest.mark.parametrize("name", NAMES)
def test_derivatives_are_jaxs(name: str) -> None:
    f, g = getattr(tnp, name), getattr(jnp, name)
    for ours, theirs in [(tidu.grad(f), jax.grad(g)), (tidu.jacrev(f), jax.jacrev(g)),
                         (tidu.grad(tidu.grad(f)), jax.grad(jax.grad(g))),
                         (tidu.hessian(f, mode="RoR"), jax.hessian(g)),
                         (tidu.jacfwd(tidu.grad(f)), jax.jacfwd(jax.grad(g)))]:
        got, want = tidu.vmap(ours)(X), np.asarray(jax.vmap(theirs)(X))
        # 1 - x^2 near +-1 (see rules/transcendental.rules; JAX has (1 - x)(1 + x)): at
        # 1 - 1e-10 the two differ by 2.5e-11, away from +-1 by an ulp or two
        away = ~(np.abs(X) > 0.9)
        np.testing.assert_allclose(got[away], want[away], rtol=1e-14, atol=0)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=0)
        numbers = ~np.isnan(want)
        assert np.array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))


@pytest.mark.parametrize("name", NAMES)
def test_xla_and_c_agree(name: str) -> None:
    program = tidu.make_graph(tidu.vmap(tidu.grad(getattr(tnp, name))))(X).program
    want = program.eval([X])[0]
    # (XLA contracts 1 - x * x into a fused multiply-add: near +-1 it keeps more digits)
    np.testing.assert_allclose(program.run([X], backend="xla")[0], want, rtol=1e-10)
    np.testing.assert_allclose(program.run([X], backend="c")[0], want, rtol=1e-14)
    text = tidu.to_stablehlo(getattr(tnp, name), X)
    assert f'"chlo.{name.replace("arc", "a")}"' in text


def test_derivative_graphs_are_small() -> None:
    """Ops in the real semantics against SymPy's simplify + cse (bench/simplify.py's count):
    first derivatives as few, second ones at most twice as many (arcsin's had 38 ops
    through the complex logarithm, SymPy's 5)."""
    x = sympy.Symbol("x", real=True)

    def sympy_ops(exprs: list[sympy.Expr]) -> int:
        reps, reduced = sympy.cse([sympy.simplify(e) for e in exprs])
        return sum(sympy.count_ops(e) for _, e in reps) + sum(sympy.count_ops(e) for e in reduced)

    for ours, theirs in [(lambda v: tnp.arcsin(0.5 * v), sympy.asin(x / 2)),
                         (lambda v: tnp.arccos(0.5 * v) * v, sympy.acos(x / 2) * x),
                         (lambda v: tnp.arctan(v * v) ** 2, sympy.atan(x * x) ** 2)]:
        for order in (1, 2):
            f = tidu.grad(ours) if order == 1 else tidu.grad(tidu.grad(ours))
            graph = tidu.make_graph(f, semantics="real")(0.3).graph
            assert graph.op_count <= order * sympy_ops([sympy.diff(theirs, x, order)])
            want = float(sympy.diff(theirs, x, order).subs(x, 0.3))
            assert tidu.compile(graph).eval([np.float64(0.3)])[0] == pytest.approx(want, rel=1e-14)


def test_complex_inputs_keep_the_logarithm_formulas() -> None:
    z = np.array([0.3 + 0.4j, -2.0 + 0.5j, 1.5 - 0.1j])
    for name in NAMES:
        got = tidu.jit(getattr(tnp, name))(z)
        np.testing.assert_allclose(got, getattr(np, name)(z), rtol=1e-14)


SPECIAL = np.array([0.0, -0.0, 1e-310, -2.5, 0.7, 1e300, np.inf, -np.inf, np.nan])


def test_arctan2_is_numpys_bit_for_bit_with_its_dtypes() -> None:
    rng = np.random.default_rng(0)
    y, x = rng.normal(size=20000), rng.normal(size=20000)  # (the complex logarithm was an ulp off in 7%)
    np.testing.assert_array_equal(tidu.jit(tnp.arctan2)(y, x), np.arctan2(y, x))
    Y, X = np.meshgrid(SPECIAL, SPECIAL)
    got, want = tidu.jit(tnp.arctan2)(Y, X), np.arctan2(Y, X)
    np.testing.assert_array_equal(got.view("uint64"), want.view("uint64"))
    for args in [(np.float32(1), 2), (np.array([1.0], np.float32), 2), (np.array([1.5], np.float16), 2.0),
                 (1, 2), (np.array([1, 2]), np.array([3, 4], np.int32))]:
        got, want = tidu.jit(tnp.arctan2)(*args), np.arctan2(*args)
        assert np.asarray(got).dtype == np.asarray(want).dtype, args  # float32 with a Python int: float32
        np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64))


def test_arctan2_derivatives_are_jaxs() -> None:
    Y, X = (a.ravel() for a in np.meshgrid([-2.5, -0.3, 0.0, 1e-300, 0.7, 50.0], [-1.5, 0.4, 1e-30, 3.0]))
    for ours, theirs in [(tidu.grad(tnp.arctan2, argnums=(0, 1)), jax.grad(jnp.arctan2, argnums=(0, 1))),
                         (tidu.hessian(tnp.arctan2, argnums=(0, 1)), jax.hessian(jnp.arctan2, argnums=(0, 1))),
                         (tidu.jacfwd(tidu.grad(tnp.arctan2), argnums=1),
                          jax.jacfwd(jax.grad(jnp.arctan2), argnums=1))]:
        got = np.array(tidu.vmap(ours)(Y, X), dtype=float)
        want = np.array(jax.vmap(theirs)(Y, X), dtype=float)
        # (at y = 1e-300 second derivatives are tiny, and the formulas' underflows differ:
        # at x = 1e-30, d2/dy2 = -2xy / (x^2 + y^2)^2 is -2e-210, which JAX gives as 0)
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-200)
    f = tidu.grad(lambda y, x: tnp.arctan2(y, x) * x, argnums=(0, 1))
    view = tidu.make_graph(tidu.vmap(f))(Y, X)
    assert "complex" not in view.graph.op_histogram()  # (the logarithm's derivative was complex)
    program = view.program
    want = program.eval([Y, X])
    for backend in ("xla", "c"):  # (XLA on the CPU flushes subnormal results to zero)
        for a, b in zip(program.run([Y, X], backend=backend), want, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-280)


ONE_MINUS = np.concatenate([1 - np.logspace(-16, -1, 16), np.logspace(-16, -1, 16) - 1,
                            [0.3, -0.7, 1e-300, 1e-8, -1e-8]])


@pytest.mark.parametrize("name, first, second", [
    ("arcsin", lambda x: 1 / mpmath.sqrt(1 - x * x), lambda x: x / (1 - x * x) ** mpmath.mpf(1.5)),
    ("arccos", lambda x: -1 / mpmath.sqrt(1 - x * x), lambda x: -x / (1 - x * x) ** mpmath.mpf(1.5)),
    ("arctanh", lambda x: 1 / (1 - x * x), lambda x: 2 * x / (1 - x * x) ** 2),
])
def test_derivatives_keep_their_digits_next_to_one_and_to_zero(name, first, second):
    # 1 - x^2 is (1 - x)(1 + x) with the derivative -2x (one_minus_square): 1 - x * x lost
    # log10(1 / (1 - |x|)) digits of the first derivative (2.8e-10 relative at 1 - 1e-16),
    # and the product's own derivative (1 - x) - (1 + x) those of the second next to 0
    f = getattr(tnp, name)
    firsts, seconds = tidu.vmap(tidu.grad(f))(ONE_MINUS), tidu.vmap(tidu.grad(tidu.grad(f)))(ONE_MINUS)
    for got, exact in ((firsts, first), (seconds, second)):
        with mpmath.workdps(60):
            want = np.array([float(exact(mpmath.mpf(float(v)))) for v in ONE_MINUS])
        np.testing.assert_allclose(got, want, rtol=4e-16)
    program = tidu.make_graph(tidu.vmap(tidu.grad(tidu.grad(f))))(ONE_MINUS).program
    for backend in ("xla", "c"):
        np.testing.assert_allclose(program.run([ONE_MINUS], backend=backend)[0], program.run([ONE_MINUS])[0],
                                   rtol=1e-15)
