"""Loop optimizations chosen on the materialized graph (tidu.simplify.unroll, .loops):
short scans unrolled where the e-graph makes the steps cheaper than the loop, and while
loops with the same trip count fused. Values and derivatives against jax.lax."""

from __future__ import annotations

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp
from tidu import lax
from tidu.ops import control
from tidu.simplify import loops
from tidu.simplify.unroll import ITERATION_COST, MAX_LENGTH, graph_cost

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402


def close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)


def ops(fn, *args):
    return tidu.make_graph(fn)(*args).graph.op_histogram()


def _scan_nodes(graph):
    return [n for n in graph.nodes if n.op == "scan"]


# --- unrolling chosen by cost ----------------------------------------------------------------


def _constant_xs(m, L, reverse=False):
    xs = np.array([0.5, 2.0, -1.0])

    def f(x):
        c, ys = L.scan(lambda c, xi: (c * xi + m.sin(c), m.cos(xi)), x, xs, reverse=reverse)
        return c + m.sum(ys)
    return f


def _counter(m, L):
    def f(x):
        return m.sum(L.fori_loop(0, 3, lambda i, v: 0.5 * v + i * m.sin(x), x))
    return f


def _swap(m, L):
    def f(a, b):
        c = L.scan(lambda c, _: ((c[1] * 1.0, c[0]), None), (a, b), None, length=4)[0]
        return c[0] * 2.0 + c[1]
    return f


@pytest.mark.parametrize("reverse", [False, True])
def test_a_short_scan_over_constant_xs_is_unrolled(reverse):
    """Three steps over constant xs: written out, each step's x is a constant the e-graph
    folds in (and the stacked ys, of the xs only, are a constant), which costs fewer ops
    than the loop; the values and derivatives are the loop's and JAX's."""
    f, fj = _constant_xs(tnp, lax, reverse), _constant_xs(jnp, jax.lax, reverse)
    graph = tidu.make_graph(f)(0.7).graph
    assert not _scan_nodes(graph)
    assert graph.op_count > 0 and "slice" not in graph.op_histogram()  # the xs were folded in
    close(tidu.jit(f)(0.7), fj(0.7))
    close(tidu.grad(f)(0.7), jax.grad(fj)(0.7))
    close(tidu.hessian(f)(0.7), jax.hessian(fj)(0.7))
    close(tidu.jacfwd(f)(0.7), jax.jacfwd(fj)(0.7))


def test_a_fori_loop_with_few_steps_folds_its_counter():
    f, fj = _counter(tnp, lax), _counter(jnp, jax.lax)
    x = np.linspace(0.1, 0.9, 3)
    graph = tidu.make_graph(f)(x).graph
    assert not _scan_nodes(graph)
    close(tidu.jit(f)(x), fj(x))
    close(tidu.grad(f)(x), jax.grad(fj)(x))
    close(tidu.hessian(f, mode="RoR")(x), jax.hessian(fj)(x))
    close(tidu.vmap(f)(np.stack([x, 2 * x])), jax.vmap(fj)(np.stack([x, 2 * x])))


def test_steps_that_cancel_leave_no_op():
    """Four swaps of a pair are the pair: nothing is left of the loop."""
    f, fj = _swap(tnp, lax), _swap(jnp, jax.lax)
    graph = tidu.make_graph(f)(0.3, 1.1).graph
    assert not _scan_nodes(graph) and graph.op_count == 2  # c[0] * 2.0 + c[1]
    close(tidu.jit(f)(0.3, 1.1), fj(0.3, 1.1))
    for got, want in zip(tidu.grad(f, argnums=(0, 1))(0.3, 1.1), jax.grad(fj, argnums=(0, 1))(0.3, 1.1),
                         strict=True):
        close(got, want)


def test_a_short_scan_that_does_not_simplify_stays_a_loop():
    """Steps over traced xs that share nothing: slicing each x and stacking each y cost
    more than the loop does."""
    def mk(m, L):
        def f(x):
            c, ys = L.scan(lambda c, xi: (c * m.sin(xi) + 1.0 + 0.1 * c ** 2, c), x[0], x)
            return c + m.sum(ys)
        return f

    f, fj = mk(tnp, lax), mk(jnp, jax.lax)
    x = np.linspace(0.1, 1.0, 4)
    graph = tidu.make_graph(f)(x).graph
    assert len(_scan_nodes(graph)) == 2
    (body,) = graph.bodies()
    # the loop is the cheaper: what the graph costs with it is less than its steps written out
    assert graph_cost(graph) < graph.op_count - 2 + 4 * (body.op_count + 4)
    close(tidu.jit(f)(x), fj(x))
    close(tidu.grad(f)(x), jax.grad(fj)(x))


@pytest.mark.parametrize("n", [MAX_LENGTH + 1, 50, 5000])
def test_long_loops_are_never_unrolled(n):
    """Past MAX_LENGTH steps a scan stays one loop, even where its steps would fold: the
    graph is the same for every number of steps (but the length)."""
    def mk(m, L, n):
        def f(x):
            return m.sum(L.fori_loop(0, n, lambda i, v: 0.5 * v + i * m.sin(x), x))
        return f

    x = np.linspace(0.1, 0.9, 3)
    graph = tidu.make_graph(mk(tnp, lax, n))(x).graph
    reference = tidu.make_graph(mk(tnp, lax, MAX_LENGTH + 1))(x).graph
    assert len(_scan_nodes(graph)) == 1
    assert str(graph).replace(f"length={n}", "") == str(reference).replace(f"length={MAX_LENGTH + 1}", "")
    close(tidu.jit(mk(tnp, lax, n))(x), mk(jnp, jax.lax, n)(x))
    close(tidu.grad(mk(tnp, lax, n))(x), jax.jit(jax.grad(mk(jnp, jax.lax, n)))(x))


def test_the_cost_counts_a_loop_per_step():
    f = lambda x: lax.scan(lambda c, _: (tnp.sin(c) * 2.0, None), x, None, length=50)[0]  # noqa: E731
    graph = tidu.make_graph(f)(0.3).graph
    assert graph_cost(graph) == 50 * (2 + ITERATION_COST)


def test_unrolling_is_deterministic():
    f = _constant_xs(tnp, lax)
    g = tidu.grad(_counter(tnp, lax))
    x = np.linspace(0.1, 0.9, 3)
    assert str(tidu.make_graph(f)(0.7).graph) == str(tidu.make_graph(_constant_xs(tnp, lax))(0.7).graph)
    assert str(tidu.make_graph(g)(x).graph) == str(tidu.make_graph(tidu.grad(_counter(tnp, lax)))(x).graph)


# --- unrolling inside bodies ------------------------------------------------------------------


def _inner_fori(m, L, n=3):
    return lambda c: L.fori_loop(0, n, lambda i, v: 0.5 * v + i, c)


def _nested(m, L, n=3):
    """A 50-step scan whose body runs a fori_loop of ``n`` steps."""
    def f(x):
        return L.scan(lambda c, _: (m.sin(_inner_fori(m, L, n)(c)), None), x, None, length=50)[0]
    return f


def _scans_in(body):
    return [n for n in body.graph.nodes if n.op == "scan"]


def _loop_form(monkeypatch, build):
    """What ``build()`` gives with nothing unrolled (the loops as traced)."""
    with monkeypatch.context() as patch:
        patch.setattr(loops, "unroll_cheaper", lambda graph, semantics: graph)
        return build()


def test_a_short_loop_in_a_body_is_unrolled(monkeypatch):
    """The program's graph is final: the loops of its bodies are too, and a short one
    whose steps fold (a fori_loop's counter) is written out in its body. The values are
    the loop's, bit for bit, and JAX's; so is the gradient."""
    f, fj = _nested(tnp, lax), _nested(jnp, jax.lax)
    graph = tidu.make_graph(f)(0.4).graph
    (outer,) = {n.attrs["body"] for n in _scan_nodes(graph)}
    assert not _scans_in(outer) and outer.op_count == 6  # 3 steps of 2 ops (the first adds 0) and a sin
    close(tidu.jit(f)(0.4), fj(0.4))
    close(tidu.grad(f)(0.4), jax.grad(fj)(0.4))
    for fresh in (lambda: _nested(tnp, lax), lambda: tidu.grad(_nested(tnp, lax))):  # (no cached trace)
        traced = _loop_form(monkeypatch, lambda fresh=fresh: tidu.make_graph(fresh())(0.4).graph)
        assert any(_scans_in(b) for b in traced.bodies())
        looped = _loop_form(monkeypatch, lambda fresh=fresh: tidu.jit(fresh())(0.4))
        np.testing.assert_array_equal(tidu.jit(fresh())(0.4), looped)


def test_a_short_loop_in_a_branch_and_in_a_while_body_is_unrolled():
    def mk(m, L):
        inner = _inner_fori(m, L)

        def f(x):
            y = L.cond(x > 0.0, lambda v: m.sin(inner(v)), lambda v: m.cos(v), x)
            return L.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, m.sin(inner(c[1]))), (0, y))[1]
        return f

    f, fj = mk(tnp, lax), mk(jnp, jax.lax)
    graph = tidu.make_graph(f)(0.4).graph
    assert {"cond", "while"} <= set(graph.op_histogram())
    assert graph.bodies() and not any(_scans_in(b) for b in graph.bodies())
    for x in (0.4, -0.3):
        close(tidu.jit(f)(x), fj(x))


def test_loops_in_bodies_are_unrolled_innermost_first():
    """The innermost fori_loop written out leaves the one around it a body of plain ops
    whose counter folds too: no loop is left but the long one."""
    def mk(m, L):
        inner = _inner_fori(m, L)
        middle = lambda c: L.fori_loop(0, 2, lambda i, v: inner(v) * i + v, c)  # noqa: E731
        return lambda x: L.scan(lambda c, _: (m.sin(middle(c)), None), x, None, length=50)[0]

    f, fj = mk(tnp, lax), mk(jnp, jax.lax)
    graph = tidu.make_graph(f)(0.4).graph
    assert len({n.attrs["body"] for n in _scan_nodes(graph)}) == 1
    assert not any(_scans_in(b) for b in graph.bodies())
    close(tidu.jit(f)(0.4), fj(0.4))
    close(tidu.grad(f)(0.4), jax.grad(fj)(0.4))


def test_a_loop_in_a_body_that_does_not_simplify_stays_a_loop():
    """Steps over traced xs (a row of the outer loop's xs) that share nothing: the inner
    loop is cheaper than its steps written out."""
    def mk(m, L):
        def row(c, r):
            c, ys = L.scan(lambda a, xi: (a * m.sin(xi) + 1.0 + 0.1 * a ** 2, a), c, r)
            return c + m.sum(ys), None
        return lambda x: L.scan(row, x[0, 0], x)[0]

    f, fj = mk(tnp, lax), mk(jnp, jax.lax)
    x = np.linspace(0.1, 1.0, 200).reshape(50, 4)
    graph = tidu.make_graph(f)(x).graph
    (outer,) = {n.attrs["body"] for n in _scan_nodes(graph)}
    assert _scans_in(outer)
    close(tidu.jit(f)(x), fj(x))
    close(tidu.grad(f)(x), jax.grad(fj)(x))


@pytest.mark.parametrize("inner", ["long", "branch"])
def test_a_long_loop_or_one_holding_a_branch_stays_in_its_body(inner):
    """Past MAX_LENGTH steps, or with a branch in its body, an inner loop is never written out."""
    def mk(m, L):
        if inner == "long":
            loop = _inner_fori(m, L, MAX_LENGTH + 1)
        else:
            loop = lambda c: L.fori_loop(  # noqa: E731
                0, 3, lambda i, v: L.cond(v > 1.0, lambda u: 0.5 * u, lambda u: u + i, v), c)
        return lambda x: L.scan(lambda c, _: (m.sin(loop(c)), None), x, None, length=50)[0]

    f, fj = mk(tnp, lax), mk(jnp, jax.lax)
    graph = tidu.make_graph(f)(0.4).graph
    (outer,) = {n.attrs["body"] for n in _scan_nodes(graph)}
    assert _scans_in(outer)
    close(tidu.jit(f)(0.4), fj(0.4))
    close(tidu.grad(f)(0.4), jax.grad(fj)(0.4))


def test_unrolling_in_bodies_is_deterministic():
    """Two loops sharing a body (by structure): it is rewritten once, the same way."""
    def f(x):
        g = _nested(tnp, lax)
        return g(x) + g(2.0 * x) * 3.0

    def listing(fn):
        return str(tidu.make_graph(fn)(0.4).graph)

    text = listing(f)
    assert text == listing(f) and text == listing(lambda x: f(x))
    graph = tidu.make_graph(f)(0.4).graph
    assert len({n.attrs["body"] for n in _scan_nodes(graph)}) == 1 and len(graph.bodies()) == 1
    assert str(tidu.make_graph(tidu.grad(f))(0.4).graph) == str(tidu.make_graph(tidu.grad(f))(0.4).graph)


# --- fusion of while loops -------------------------------------------------------------------


def _newton(m, L, steps=6):
    def f(a):
        def body(c):
            i, x = c
            return i + 1, x - (x * x - a) / (2.0 * x)
        return L.while_loop(lambda c: c[0] < steps, body, (0, a))[1]
    return f


def _while_loops(graph):
    """The distinct while loops of ``graph`` (its while nodes are one per result)."""
    return {(control.without_index(n.attrs), n.inputs) for n in graph.nodes if n.op == "while"}


def _without_while_fusion(monkeypatch):
    monkeypatch.setattr(loops, "_fuse_whiles", lambda graph: graph)


def test_jvp_of_a_while_loop_runs_one_loop(monkeypatch):
    """jvp's tangent loop carries the primal loop's carries, from the same initial values,
    under the same condition: the primal results are read from it."""
    f, fj = _newton(tnp, lax), _newton(jnp, jax.lax)
    a, t = np.array([2.0, 3.0]), np.array([1.0, -0.5])
    h = lambda a: tidu.jvp(f, (a,), (t,))  # noqa: E731
    graph = tidu.make_graph(h)(a).graph
    assert len(_while_loops(graph)) == 1 and sum(n.op == "while" for n in graph.nodes) == 2
    for got, want in zip(tidu.jit(h)(a), jax.jvp(fj, (a,), (t,)), strict=True):
        close(got, want)
    _without_while_fusion(monkeypatch)
    assert len(_while_loops(tidu.make_graph(lambda a: tidu.jvp(f, (a,), (t,)))(a).graph)) == 2


@pytest.mark.parametrize("mode", ["jacfwd", "hessian", "vmap"])
def test_forward_derivatives_and_values_share_the_loop(mode, monkeypatch):
    f, fj = _newton(tnp, lax), _newton(jnp, jax.lax)
    if mode == "jacfwd":
        make = lambda f, d, v: lambda a: (f(a), d.jacfwd(f)(a))  # noqa: E731
        x = 2.0
    elif mode == "hessian":
        make = lambda f, d, v: lambda a: (f(a), d.jacfwd(f)(a), d.jacfwd(d.jacfwd(f))(a))  # noqa: E731
        x = 2.0
    else:
        make = lambda f, d, v: v(lambda a: d.jvp(f, (a,), (1.0,)))  # noqa: E731
        x = np.array([2.0, 3.0, 5.0])
    h, hj = make(f, tidu, tidu.vmap), make(fj, jax, jax.vmap)
    assert len(_while_loops(tidu.make_graph(h)(x).graph)) == 1
    for got, want in zip(tidu.jit(h)(x), hj(x), strict=True):
        close(got, want)
    _without_while_fusion(monkeypatch)
    assert len(_while_loops(tidu.make_graph(make(f, tidu, tidu.vmap))(x).graph)) > 1


def test_while_loops_with_other_trip_counts_stay_apart():
    """Only a provably equal trip count fuses: the same condition on carries that start
    at the same values and are updated by the same terms."""
    def mk(m, L):
        def f(a):
            other_steps = _newton(m, L, 7)(a)  # another condition
            other_start = L.while_loop(lambda c: c[0] < 6, lambda c: (c[0] + 1, c[1] * 0.5), (1, a))[1]
            other_body = L.while_loop(lambda c: c[0] < 6, lambda c: (c[0] + 2, c[1] * 0.5), (0, a))[1]
            return _newton(m, L)(a) + other_steps + other_start + other_body
        return f

    f, fj = mk(tnp, lax), mk(jnp, jax.lax)
    a = np.array([2.0, 3.0])
    assert len(_while_loops(tidu.make_graph(f)(a).graph)) == 4
    close(tidu.jit(f)(a), fj(a))
    close(tidu.jacfwd(f)(a), jax.jacfwd(fj)(a))


def test_a_while_loop_reading_another_runs_after_it():
    def mk(m, L):
        def f(a):
            first = _newton(m, L)(a)
            return L.while_loop(lambda c: c[0] < 6, lambda c: (c[0] + 1, c[1] * 0.5 + first), (0, a))[1]
        return f

    f, fj = mk(tnp, lax), mk(jnp, jax.lax)
    a = np.array([2.0, 3.0])
    assert len(_while_loops(tidu.make_graph(f)(a).graph)) == 2
    close(tidu.jit(f)(a), fj(a))
    close(tidu.jacfwd(f)(a), jax.jacfwd(fj)(a))


def test_terms_a_body_gets_from_an_unrolled_loop_are_hoisted_out_of_its_loop():
    """Written out, a fori_loop's counter is a constant in each step: cos(a) * i no longer
    depends on the step of the scan around it, and is computed once before that loop (its
    body keeps the three steps' products and sums, no cos)."""
    def f(x, a):
        def body(c, _):
            return tnp.sin(lax.fori_loop(0, 3, lambda i, v: v * a + tnp.cos(a) * i, c)), None
        return lax.scan(body, x, None, length=50)[0]

    def g(x, a):
        def body(c, _):
            return jnp.sin(jax.lax.fori_loop(0, 3, lambda i, v: v * a + jnp.cos(a) * i, c)), None
        return jax.lax.scan(body, x, None, length=50)[0]

    graph = tidu.make_graph(f)(1.0, 0.7).graph
    (scan,) = [n for n in graph.nodes if n.op == "scan"]
    assert {n.op for n in scan.attrs["body"].graph.nodes} == {None, "mul", "add", "sin"}
    assert "cos" in graph.op_histogram()
    np.testing.assert_allclose(tidu.compile(graph).eval([1.0, 0.7])[0], g(1.0, 0.7), rtol=1e-13)
    np.testing.assert_allclose(tidu.grad(f, argnums=(0, 1))(1.0, 0.7), jax.grad(g, argnums=(0, 1))(1.0, 0.7),
                               rtol=1e-12)
