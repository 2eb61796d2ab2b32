"""Reverse mode through a scan whose step computes matrix products (a neural ODE's
tanh(W x)): the products and the costly values after them are stored per step, as JAX
stores a step's residuals, instead of being computed again in each reverse step. Checked
against JAX (values, gradients, Hessians, vmap, XLA), across checkpoint policies, and on
the structure of the reverse step."""

from __future__ import annotations

import numpy as np
import pytest
from rk4_util import rk4_step

import tidu
import tidu.numpy as tnp
from tidu import lax
from tidu.transforms import control as control_rules

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

W = np.random.default_rng(3).normal(size=(5, 5)) / 2
P = np.linspace(0.8, 1.2, 5)
X0 = np.linspace(-1.0, 1.0, 5)


def loss(xp, scan, n=12, checkpoint=None):
    """An RK4 integration of x' = tanh((W * p) x) - x / 10: the loss reads the final state
    and every step's first entry."""
    dt = 0.1

    def rhs(x, p):
        return xp.tanh((W * p) @ x) - 0.1 * x

    advance = rk4_step(rhs, dt)

    def f(p, x0):
        def step(x, _):
            x = advance(x, p)
            return x, x[0]
        kw = {} if checkpoint is None else {"checkpoint": checkpoint}
        xT, firsts = scan(step, x0, None, length=n, **kw)
        return xp.sum(xT ** 2) + xp.sum(xp.sin(firsts))
    return f


def close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-11, atol=1e-12)


def test_gradients_equal_jax_on_numpy_and_xla():
    g = tidu.grad(loss(tnp, lax.scan), argnums=(0, 1))
    want = jax.jit(jax.grad(loss(jnp, jax.lax.scan), argnums=(0, 1)))(P, X0)
    for got, w in zip(g(P, X0), want, strict=True):
        close(got, w)
    program = tidu.make_graph(g)(P, X0).program
    for got, w in zip(program.run([P, X0], backend="xla"), want, strict=True):
        close(got, w)


def test_second_derivatives_and_vmap_equal_jax():
    f, fj = loss(tnp, lax.scan, n=6), loss(jnp, jax.lax.scan, n=6)
    want = jax.hessian(fj)(P, X0)
    for mode in ("RoR", "RoF", "FoR"):
        close(tidu.hessian(f, mode=mode)(P, X0), want)
    batch = np.stack([X0, 0.5 * X0, X0 + 0.25])
    got = tidu.vmap(tidu.grad(f, argnums=1), in_axes=(None, 0))(P, batch)
    close(got, jax.vmap(jax.grad(fj, argnums=1), in_axes=(None, 0))(P, batch))


def test_checkpoint_policies_give_the_same_values():
    """The initial state's gradient is the same bit for bit; the loop constant's may differ
    in the last bit (each segment sums its steps' share of it first)."""
    base = tidu.grad(loss(tnp, lax.scan, n=23), argnums=(0, 1))(P, X0)
    for policy in (4, "sqrt", (8, 3), lax.Revolve(6)):
        got = tidu.grad(loss(tnp, lax.scan, n=23, checkpoint=policy), argnums=(0, 1))(P, X0)
        np.testing.assert_allclose(got[0], base[0], rtol=1e-14, atol=0, err_msg=str(policy))
        assert np.array_equal(got[1], base[1]), policy


def _bodies(graph, reverse: bool) -> list:
    """The bodies of the graph's reverse (or forward) scans."""
    return [n.attrs["body"].graph for n in graph.nodes if n.op == "scan" and bool(n.attrs["reverse"]) == reverse]


def _contracting_products(graph) -> int:
    return sum(1 for n in graph.nodes if n.op == "dot_general" and n.attrs["lhs_contract"])


def test_the_reverse_step_runs_no_product_and_no_tanh_again():
    """The forward step's four products W x and tanhs are stored; the reverse step computes
    only the four products of cotangents with W (and the outer products for W's cotangent)."""
    graph = tidu.make_graph(tidu.grad(loss(tnp, lax.scan), argnums=(0, 1)))(P, X0).graph
    reverse = _bodies(graph, reverse=True)
    forward = _bodies(graph, reverse=False)
    assert reverse and forward
    assert {_contracting_products(b) for b in forward} == {4}
    for body in reverse:
        assert _contracting_products(body) == 4
        assert not any(n.op == "tanh" for n in body.nodes)


@pytest.mark.parametrize("size", [7, 100])
def test_an_elementwise_step_stores_its_tanh_only_where_it_is_a_few_numbers(size):
    """Without products, the costly values are stored where they are a few numbers per
    step (at most SMALL_RESIDUALS); a large elementwise step is run again from its carry,
    so that memory grows with the carry alone."""
    a = np.linspace(0.5, 1.5, size)

    def make(xp, scan):
        def f(x):
            c, _ = scan(lambda c, _: (c + 0.1 * xp.tanh(c * a) * c, None), x, None, length=30)
            return xp.sum(c ** 2)
        return f

    x = np.linspace(-1.0, 1.0, size)
    graph = tidu.make_graph(tidu.grad(make(tnp, lax.scan)))(x).graph
    stacked = [n for n in graph.nodes if n.op == "scan" and not n.attrs["reverse"]
               and n.attrs["index"] >= n.attrs["n_carry"]]
    reverse = _bodies(graph, reverse=True)
    runs_tanh_again = any(n.op == "tanh" for body in reverse for n in body.nodes)
    small = size <= control_rules.SMALL_RESIDUALS
    assert runs_tanh_again == (not small)
    assert sum(n.aval.size for n in stacked) == 30 * size * (2 if small else 1)  # (the carry, and the tanh)
    close(tidu.grad(make(tnp, lax.scan))(x), jax.grad(make(jnp, jax.lax.scan))(x))


@pytest.mark.parametrize("size", [6, 80])
def test_stored_values_stay_within_a_multiple_of_the_carry(size):
    """exp of an outer product: size^2 values per step beside a carry of size. Stored at
    6 (36 + the product's 6 <= 64 x 6); at 80 (6400 > 64 x 80) the step runs again, so
    memory does not grow by the square of the carry."""
    v = np.linspace(-0.5, 0.5, size)

    def make(xp, scan):
        def f(x):
            def step(c, _):
                return c + 0.01 * (xp.exp(0.01 * (c[:, None] * c[None, :])) @ v), None
            c, _ = scan(step, x, None, length=15)
            return xp.sum(c ** 2)
        return f

    x = np.linspace(-1.0, 1.0, size)
    graph = tidu.make_graph(tidu.grad(make(tnp, lax.scan)))(x).graph
    reverse = _bodies(graph, reverse=True)
    runs_exp_again = any(n.op == "exp" for body in reverse for n in body.nodes)
    assert runs_exp_again == (size * size > control_rules.RESIDUALS_PER_CARRY * size)
    close(tidu.grad(make(tnp, lax.scan))(x), jax.grad(make(jnp, jax.lax.scan))(x))
