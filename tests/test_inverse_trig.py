"""arcsin, arccos and arctan of real values are the primitives asin, acos and atan: values
are NumPy's on the NumPy back end (eagerly and traced, bit for bit), derivatives JAX's
(inf at +-1, signed zeros included), and the derivative graphs are small (they went
through the complex logarithm of arctan2 before, and arcsin's Hessian had 38 ops)."""

from __future__ import annotations

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
