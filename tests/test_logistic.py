"""tidu.nn.sigmoid (and expit, lax.logistic) of real floats is the primitive logistic:
SciPy's expit on the NumPy back end, stablehlo.logistic on XLA, its meaning in C; its
derivative sigmoid(x) sigmoid(-x) keeps the tails' digits; derivative graphs are small."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special

import tidu
import tidu.numpy as tnp

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)

X = np.array([-800.0, -745.0, -40.0, -3.0, -1e-300, -0.0, 0.0, 0.5, 3.0, 40.0, 800.0, np.nan, np.inf, -np.inf])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_values_are_expits(dtype: str) -> None:
    x = X.astype(dtype)
    want = scipy.special.expit(x)
    for fn in (tidu.nn.sigmoid, tidu.scipy.special.expit, tidu.lax.logistic):
        for got in (fn(x), tidu.jit(fn)(x)):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)


def test_derivatives_keep_the_tails() -> None:
    s = scipy.special.expit
    first = tidu.vmap(tidu.grad(tidu.nn.sigmoid))(X)
    np.testing.assert_allclose(first, s(X) * s(-X), rtol=1e-15)
    assert first[X == 40.0][0] == pytest.approx(4.248354255291589e-18, rel=1e-14)  # jax.nn's is 0
    second = tidu.vmap(tidu.grad(tidu.grad(tidu.nn.sigmoid)))(X)
    want = np.asarray(jax.vmap(jax.grad(jax.grad(jax.nn.sigmoid)))(X))
    inner = np.abs(X) < 30
    np.testing.assert_allclose(second[inner], want[inner], rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(second[X == 40.0], -s(40.0) * s(-40.0) * (1 - 2 * s(-40.0)), rtol=1e-14)


def test_xla_and_c_agree() -> None:
    x = X[np.isfinite(X) & (np.abs(X) < 100)]
    program = tidu.make_graph(tidu.vmap(tidu.grad(tidu.grad(tidu.nn.sigmoid))))(x).program
    want = program.eval([x])[0]
    np.testing.assert_allclose(program.run([x], backend="xla")[0], want, rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(program.run([x], backend="c")[0], want, rtol=1e-13, atol=1e-300)
    assert "stablehlo.logistic %" in tidu.to_stablehlo(tidu.nn.sigmoid, x)


def test_graphs_are_small() -> None:
    """sigmoid is one op, its derivative three more; softplus's derivative is sigmoid,
    by a rule of its own (10 ops through logaddexp's rule, its 0's tangent included)."""
    assert tidu.make_graph(tidu.nn.sigmoid)(0.3).graph.op_count == 1
    assert tidu.make_graph(tidu.grad(tidu.nn.sigmoid))(0.3).graph.op_count <= 4
    assert tidu.make_graph(tidu.grad(tidu.nn.softplus))(0.3).graph.op_count == 1
    g = tidu.make_graph(tidu.grad(tidu.grad(lambda v: tnp.sum(tidu.nn.softplus(v) * v))))(0.3).graph
    assert g.op_count <= 8, g.op_count
