"""maximum and minimum differentiate by weights of the primals (1, one half at a tie, or
0 times each operand's tangent), as JAX's rules do: values against JAX at ties, away from
them and with an infinite tangent on the operand not taken; the weights are primal
values, so reverse mode multiplies the cotangent by them (fewer ops than the selects of
tangents they replace, counted on a chain)."""

from __future__ import annotations

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

POINTS = [(1.5, -0.5), (-0.5, 1.5), (0.75, 0.75), (0.0, -0.0)]


@pytest.mark.parametrize("name", ["maximum", "minimum"])
@pytest.mark.parametrize("x, y", POINTS)
def test_first_and_second_derivatives_match_jax(name, x, y):
    t, j = getattr(tnp, name), getattr(jnp, name)
    f = lambda a, b: t(a * a, b) * b + t(a, b * b)  # noqa: E731
    g = lambda a, b: j(a * a, b) * b + j(a, b * b)  # noqa: E731
    np.testing.assert_allclose(tidu.grad(f, argnums=(0, 1))(x, y), jax.grad(g, argnums=(0, 1))(x, y), rtol=1e-15)
    np.testing.assert_allclose(tidu.hessian(f, argnums=(0, 1))(x, y), jax.hessian(g, argnums=(0, 1))(x, y),
                               rtol=1e-15)
    np.testing.assert_allclose(tidu.jvp(f, (x, y), (0.3, -0.7))[1], jax.jvp(g, (x, y), (0.3, -0.7))[1],
                               rtol=1e-15)


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_a_tie_splits_the_derivative_in_halves(name):
    t = getattr(tnp, name)
    assert tidu.grad(lambda a, b: t(a, b), argnums=(0, 1))(2.0, 2.0) == (0.5, 0.5)
    assert tidu.jit(tidu.grad(lambda a, b: t(a, b), argnums=(0, 1)))(2.0, 2.0) == (0.5, 0.5)


def test_an_infinite_tangent_of_the_operand_not_taken_is_nan_as_jax():
    # 0 times inf: the weight form's IEEE value, JAX's too
    got = tidu.jvp(tnp.maximum, (2.0, 1.0), (1.0, np.inf))[1]
    want = jax.jvp(jnp.maximum, (2.0, 1.0), (1.0, np.inf))[1]
    assert np.isnan(got) and np.isnan(want)
    assert tidu.jvp(tnp.maximum, (2.0, 1.0), (1.0, 0.5))[1] == 1.0


def test_vmap_of_the_gradient_matches_jax():
    x = np.array([-1.0, 0.0, 0.5, 2.0, 0.5])
    y = np.array([0.5, 0.0, 0.5, -1.0, 3.0])
    f = lambda a, b: tnp.minimum(tnp.maximum(a, b) * a, b)  # noqa: E731
    g = lambda a, b: jnp.minimum(jnp.maximum(a, b) * a, b)  # noqa: E731
    got = tidu.vmap(tidu.grad(f, argnums=(0, 1)))(x, y)
    want = jax.vmap(jax.grad(g, argnums=(0, 1)))(x, y)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-15)


def test_the_gradient_of_a_chain_multiplies_cotangents_by_weights():
    # the weights' three selects a step, of primals (shared by both operands' rules);
    # the cotangents are multiplied by them (selects of tangents made four a step)
    def f(x):
        y = x
        for _ in range(20):
            y = tnp.minimum(tnp.tanh(y), x) + 0.5 * y
        return y
    graph = tidu.make_graph(tidu.grad(f))(0.3).graph
    ops = [n.op for n in graph.nodes if n.op is not None]
    assert ops.count("select") <= 3 * 20
    np.testing.assert_allclose(tidu.grad(f)(0.3), jax.grad(lambda x: _jax_chain(x))(0.3), rtol=1e-14)


def _jax_chain(x):
    y = x
    for _ in range(20):
        y = jnp.minimum(jnp.tanh(y), x) + 0.5 * y
    return y
