"""tidu.lax (cond, switch, scan, fori_loop, while_loop, map) against jax.lax: values,
first and second derivatives in every mode, vmap, nesting, and the errors bad input gets."""

from __future__ import annotations

import functools
import re
import tracemalloc

import numpy as np
import pytest
from rk4_util import rk4_step

import tidu
import tidu.numpy as tnp
from tidu import lax
from tidu.core.body import Body
from tidu.simplify import loops
from tidu.simplify.loops import executions
from tidu.transforms import control as control_rules
from tidu.transforms import schedules

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

X = np.linspace(0.1, 1.0, 4)
BATCH = np.stack([X, 0.5 * X, X + 1.0])


def _cond(m, L):
    def f(x):
        return m.sum(L.cond(m.sum(x) > 1.0, lambda v: m.sin(v) * x[0], lambda v: m.cos(v) ** 2, x * 2.0))
    return f


def _switch_traced(m, L):
    def f(x):
        i = (m.sum(x) * 2).astype(np.int32)  # 5: clipped to the last branch
        return m.sum(L.switch(i, [lambda v: v, lambda v: m.sin(v), lambda v: m.exp(v) * x[1]], x))
    return f


def _scan(m, L):
    def f(x):
        def step(c, xi):
            return c * m.sin(xi) + 1.0 + 0.1 * c ** 2, c
        c, ys = L.scan(step, x[0], x)
        return c + m.sum(ys)
    return f


def _scan_reverse_pytree(m, L):
    def f(x):
        def step(c, xi):
            a, b = c["a"], c["b"]
            return {"a": a * xi + m.sin(b), "b": b * 0.5 + xi}, m.stack([a, xi])
        c, ys = L.scan(step, {"a": x[1], "b": x[2]}, x, reverse=True)
        return c["a"] * c["b"] + m.sum(ys ** 2)
    return f


def _fori(m, L):
    def f(x):
        return m.sum(L.fori_loop(0, 9, lambda i, v: m.sin(v) * 0.9 + x * i, x))  # 9 > unroll.MAX_LENGTH: a loop
    return f


def _map(m, L):
    def f(x):
        # 10 rows: a short map (up to unroll.MAX_LENGTH) may be unrolled
        return m.sum(L.map(lambda r: m.sin(r) * r[0], m.reshape(m.concatenate([x] * 5), (10, 2))))
    return f


def _nested(m, L):
    def f(x):
        def outer(c, xi):
            inner, _ = L.scan(lambda a, b: (a * m.cos(b) + xi, None), c, x)
            return inner + L.cond(xi > 0.5, lambda v: m.sin(v), lambda v: v * v, c), m.sum(inner)
        c, ys = L.scan(outer, 0.1 * x[0], x)
        return c + m.sum(ys)
    return f


def _while(m, L):
    def f(x):
        return m.sum(L.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, m.sin(c[1]) + x), (0, x))[1])
    return f


REVERSIBLE = {"cond": _cond, "switch": _switch_traced, "scan": _scan, "scan_reverse_pytree": _scan_reverse_pytree,
              "fori_loop": _fori, "map": _map, "nested": _nested}
ALL = {**REVERSIBLE, "while_loop": _while}


def both(name):
    return ALL[name](tnp, lax), ALL[name](jnp, jax.lax)


def close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in ("nested", "scan_reverse_pytree")
                                  else n for n in sorted(ALL)])
def test_values_forward_mode_and_vmap(name):
    f, fj = both(name)
    want = jax.jit(fj)(X)
    close(f(X), want)  # concrete values: Python control flow
    close(tidu.jit(f)(X), want)
    close(tidu.jacfwd(f)(X), jax.jit(jax.jacfwd(fj))(X))
    close(tidu.jvp(f, (X,), (X[::-1],))[1], jax.jit(jax.jvp, static_argnums=0)(fj, (X,), (X[::-1],))[1])
    close(tidu.vmap(f)(BATCH), jax.jit(jax.vmap(fj))(BATCH))
    close(tidu.vmap(tidu.jacfwd(f))(BATCH), jax.jit(jax.vmap(jax.jacfwd(fj)))(BATCH))


# the nested case and the pytree scan repeat the others' rules at more cost: CI's slow step
HEAVY = {"nested", "scan_reverse_pytree"}


def cases(names):
    return [pytest.param(n, marks=pytest.mark.slow) if n in HEAVY else n for n in sorted(names)]


@pytest.mark.parametrize("name", cases(REVERSIBLE))
def test_reverse_mode_and_hessians(name):
    f, fj = both(name)
    close(tidu.grad(f)(X), jax.jit(jax.grad(fj))(X))
    ct = np.array(1.7)
    out, pullback = tidu.vjp(f, X)
    close(pullback(ct)[0], jax.jit(lambda x, c: jax.vjp(fj, x)[1](c)[0])(X, ct))
    want = jax.jit(jax.hessian(fj))(X)
    for mode in ("FoF", "FoR", "RoF", "RoR"):
        close(tidu.hessian(f, mode=mode)(X), want)


def test_while_loop_second_order_forward():
    f, fj = both("while_loop")
    close(tidu.hessian(f, mode="FoF")(X), jax.jit(jax.jacfwd(jax.jacfwd(fj)))(X))


@pytest.mark.parametrize("transform", [tidu.grad, tidu.jacrev, lambda f: tidu.hessian(f, mode="RoR")])
def test_reverse_mode_through_while_loop_is_refused(transform):
    f, _ = both("while_loop")
    with pytest.raises(lax.ReverseModeRefused, match="does not work through tidu.lax.while_loop"):
        transform(f)(X)
    g = lambda x: tnp.sum(lax.fori_loop(0, tnp.sum(x).astype(np.int32), lambda i, v: v * 1.5, x))  # noqa: E731
    with pytest.raises(lax.ReverseModeRefused, match="fori_loop with traced bounds"):
        tidu.grad(g)(X)


def test_grad_inside_a_body_and_grad_of_grad_through_a_scan():
    def mk(m, L, G):
        def f(x):
            def step(c, xi):
                g = G(lambda y: m.sin(y * c) * y)(xi)
                return 0.9 * c + 0.1 * g, g
            c, ys = L.scan(step, x[0], x)
            return c + m.sum(ys)
        return f

    f, fj = mk(tnp, lax, tidu.grad), mk(jnp, jax.lax, jax.grad)
    close(tidu.jit(f)(X), fj(X))
    close(tidu.grad(f)(X), jax.jit(jax.grad(fj))(X))

    def inner(m, L, x):
        return lambda y: m.sum(L.scan(lambda c, xi: (c * m.sin(xi * y), c), 1.0, x)[1])

    gg = tidu.grad(lambda x: tidu.grad(inner(tnp, lax, x))(x[0]))(X)
    close(gg, jax.jit(jax.grad(lambda x: jax.grad(inner(jnp, jax.lax, x))(x[0])))(X))


def test_a_batched_predicate_selects_and_a_batched_while_runs_until_every_example_is_done():
    def mk(m, L):
        def f(x):
            n = L.while_loop(lambda c: c[1] < x, lambda c: (c[0] + 1, c[1] * 2.0 + 0.1), (0, 0.3 * x))[0]
            return L.cond(x > 0.5, lambda v: m.sin(v), lambda v: v ** 3, x) + n
        return f

    xs = np.array([0.2, 0.7, 3.0, 10.0])
    close(tidu.vmap(mk(tnp, lax))(xs), jax.jit(jax.vmap(mk(jnp, jax.lax)))(xs))
    close(tidu.vmap(tidu.jacfwd(mk(tnp, lax)))(xs),
          jax.jit(jax.vmap(jax.jacfwd(mk(jnp, jax.lax))))(xs))


def test_the_graph_does_not_grow_with_the_number_of_steps():
    def run(n):
        def f(x):
            return lax.fori_loop(0, n, lambda i, v: tnp.sin(v) * 0.5 + x, x)
        return tidu.make_graph(tidu.grad(lambda x: tnp.sum(f(x))))(X)

    small, large = run(10), run(10_000)
    assert small.graph.op_count == large.graph.op_count < 40
    # the same bodies: the listings differ only in the trip count (attributes, stacked shapes)
    def shape_free(g):
        return re.sub(r"length=\d+|\[10+[,\]]", "", str(g))

    assert shape_free(small) == shape_free(large)
    f = lambda x: tnp.sum(lax.fori_loop(0, 10_000, lambda i, v: tnp.sin(v) * 0.5 + x, x))  # noqa: E731
    fj = lambda x: jnp.sum(jax.lax.fori_loop(0, 10_000, lambda i, v: jnp.sin(v) * 0.5 + x, x))  # noqa: E731
    close(tidu.grad(f)(X), jax.jit(jax.grad(fj))(X))


def test_a_constant_predicate_takes_its_branch_only():
    def f(x):
        return lax.cond(True, lambda v: tnp.sin(v), lambda v: tnp.cos(v), x) + lax.switch(0, [tnp.exp, tnp.log], x)

    g = tidu.make_graph(f)(X)
    assert "cond" not in str(g)
    close(tidu.jit(f)(X), np.sin(X) + np.exp(X))


@pytest.mark.parametrize(("call", "message"), [
    (lambda x: lax.cond(tnp.sum(x), lambda v: v, lambda v: v, x), r"cond: pred must be a boolean scalar, got f64\[\]"),
    (lambda x: lax.cond(x > 0, lambda v: v, lambda v: v, x), r"cond: pred must be a boolean scalar, got i1\[4\]"),
    (lambda x: lax.switch(x[0], [lambda v: v], x), r"switch: index must be an integer scalar, got f64\[\]"),
    (lambda x: lax.scan(lambda c, xi: (tnp.stack([c, c]), None), x[0], x),
     r"scan: the body <lambda> changes the carry: init is \* \(f64\[\]\), the body returns \* \(f64\[2\]\)"),
    (lambda x: lax.scan(lambda c, xi: c, x[0], x), "must return a pair"),
    (lambda x: lax.scan(lambda c, xi: (c, None), x[0], (x, x[:2])), r"leading axes of xs .* differ: \[2, 4\]"),
    (lambda x: lax.while_loop(lambda c: c, lambda c: c + 1.0, x[0]),
     r"while_loop: cond_fun <lambda> must return a boolean scalar, got \(f64\[\]\)"),
    (lambda x: lax.while_loop(lambda c: c[0] < 1.0, lambda c: c[:2], x),
     r"while_loop: body_fun <lambda> changes the loop value"),
    (lambda x: lax.scan(lambda c, xi: (c * xi, None), x[0], x, checkpoint=lax.Revolve(2)),
     r"Revolve: slots=2 cannot reverse 4 steps .* at most 2\^\(slots - 1\) = 2\); give it more slots"),
])
def test_bad_input_gets_a_one_line_error_naming_the_argument(call, message):
    for run in (tidu.jit(call), call):  # traced, and on concrete values (staged the same way)
        with pytest.raises((TypeError, ValueError), match=message) as info:
            run(X)
        assert "\n" not in str(info.value)


@pytest.mark.parametrize(("slots", "error", "message"), [
    (0, ValueError, r"Revolve: slots must be >= 1 \(the carries stored at once\), got 0"),
    (-3, ValueError, "Revolve: slots must be >= 1"),
    (2.5, TypeError, r"Revolve: slots must be an int \(the carries stored at once\), got 2.5"),
    (True, TypeError, "Revolve: slots must be an int"),
    ("8", TypeError, "Revolve: slots must be an int"),
])
def test_revolve_refuses_bad_slots_by_name(slots, error, message):
    with pytest.raises(error, match=message) as info:
        lax.Revolve(slots)
    assert "\n" not in str(info.value)


def test_branches_of_different_types_are_refused():
    def f(x):
        return lax.cond(x[0] > 0, lambda v: v, lambda v: v[:2], x)

    with pytest.raises(TypeError, match=r"cond: true_fun returns \* \(f64\[4\]\) but false_fun returns "
                                        r"\* \(f64\[2\]\); the branches must return the same"):
        tidu.jit(f)(X)


def test_python_if_on_a_traced_value_names_tidu_lax():
    def f(x):
        return x if x[0] > 0 else -x

    with pytest.raises(tidu.TraceError, match="use tidu.lax: cond or switch"):
        tidu.jit(f)(X)


@pytest.mark.parametrize("name", cases(ALL))
def test_stablehlo_runs_in_xla_and_through_to_jax(name):
    """while and case ops in the emitted text, compiled and run by XLA: values and
    derivatives equal the NumPy back end's and JAX's."""
    f, fj = both(name)
    fns = {"value": (f, jax.jit(fj)), "jacfwd": (tidu.jacfwd(f), jax.jit(jax.jacfwd(fj)))}
    if name in REVERSIBLE:
        fns["grad"] = (tidu.grad(f), jax.jit(jax.grad(fj)))
    for t, tj in fns.values():
        program = tidu.make_graph(t)(X).program
        text = program.to_stablehlo()
        assert ("stablehlo.while" in text) or ("stablehlo.case" in text)
        close(program.run([X], backend="xla")[0], tj(X))
        close(program.run([X], backend="xla")[0], program.eval([X])[0])
    close(jax.jit(tidu.to_jax(tidu.jacfwd(f)))(X), fns["jacfwd"][1](X))  # JAX's, compiled above


@pytest.mark.parametrize("reverse", [False, True])
def test_checkpoint_policies_give_identical_values_and_derivatives(reverse):
    xs = np.linspace(-1.0, 1.0, 23)  # 23 steps: segments of 4 and 5 leave a remainder

    def make(policy):
        def f(x):
            def step(c, xi):
                return c * tnp.cos(xi) + 0.3 * tnp.sin(c * x), c * xi
            c, ys = lax.scan(step, x, xs, reverse=reverse, checkpoint=policy)
            return c * tnp.sum(ys)
        return f

    base = make(None)
    for policy in (4, "sqrt", 1, 100, (8, 3), lax.MemoryBudget(9)):
        f = make(policy)
        assert np.array_equal(tidu.jit(f)(0.7), tidu.jit(base)(0.7))
        assert np.array_equal(tidu.grad(f)(0.7), tidu.grad(base)(0.7))
        close(tidu.hessian(f, mode="RoR")(0.7), tidu.hessian(base, mode="FoF")(0.7))
    with pytest.raises(TypeError, match="checkpoint must be None, a positive int, 'sqrt', a tuple"):
        tidu.jit(make("all"))(0.7)
    with pytest.raises(TypeError, match="MemoryBudget: carries must be an int >= 2"):
        lax.MemoryBudget(1)


def test_memory_budgets_choose_the_fewest_levels_that_fit():
    """Levels L with L * fan stored carries (fan ** L >= n): one level when the carries fit."""
    assert lax.MemoryBudget(10_000).levels(10_000) == ()
    assert lax.MemoryBudget(300).levels(10_000) == (100,)  # sqrt: 2 x 100 carries
    assert lax.MemoryBudget(60).levels(10_000) == (1000, 100, 10)  # 4 levels of 10
    for budget in (20, 45, 150, 500):
        levels = lax.MemoryBudget(budget).levels(10_000)
        fan = round(10_000 ** (1 / (len(levels) + 1)) + 0.5)
        assert (len(levels) + 1) * fan <= budget or fan <= 2
        assert all(a > b for a, b in zip(levels, levels[1:], strict=False))


def test_sqrt_checkpointing_stores_about_two_sqrt_n_carries():
    n, size = 400, 50
    a = np.linspace(0.5, 1.5, size)

    def residual_elements(policy):
        def f(x):
            c, _ = lax.scan(lambda c, _: (c + 1e-3 * tnp.sin(c * a), None), x, None, length=n, checkpoint=policy)
            return tnp.sum(c ** 2)
        graph = tidu.make_graph(tidu.grad(f))(np.ones(size)).graph

        def stacked(g):  # elements of every stacked (length-axis) scan result, bodies included
            total = 0
            for node in g.nodes:
                if node.op == "scan":
                    if node.attrs["index"] >= node.attrs["n_carry"]:
                        total += node.aval.size
                    total += stacked(node.attrs["body"].graph)
            return total
        return stacked(graph)

    assert residual_elements(None) == n * size
    assert residual_elements("sqrt") <= 2 * 20 * size + size


def _as_traced(monkeypatch):
    """No loop unrolled (tidu.simplify.unroll): the program runs the schedule's segments as
    loops, every step of them. Written out, a short segment of a body runs as many steps or
    fewer (the last carry of one that only stacks its carries is read by nothing)."""
    monkeypatch.setattr(loops, "unroll_cheaper", lambda graph, semantics: graph)


def _sin_steps(n, policy, size=3):
    """The program of the gradient through n steps of x <- x + 1e-3 sin(a x): the steps'
    forward evaluations are its sins, the reverse steps its cosines."""
    a = np.linspace(0.5, 1.5, size)

    def f(x):
        c, _ = lax.scan(lambda c, _: (c + 1e-3 * tnp.sin(c * a), None), x, None, length=n, checkpoint=policy)
        return tnp.sum(c ** 2)
    return tidu.make_graph(tidu.grad(f))(np.linspace(0.0, 1.0, size))


def test_nested_segments_run_their_steps_again_once_per_level(monkeypatch):
    """(25, 7) over 60 steps: two segments of 25 (each three of 7 and 4 steps) and a tail of
    10 (one segment of 7 and 3 steps). Reverse mode runs the 60 steps forward once, each
    segment of 25 again (46 steps with its own segments of 7) and the tail's segment of 7:
    159 forward steps; the reverse steps once each. The tangents of the steps before a
    segment's last part are not computed (they were, 42 times: a carry dropped from one
    loop left another loop's unread result in the graph)."""
    unrolled = _sin_steps(60, (25, 7))
    assert executions(unrolled.graph, "sin") <= 60 + 2 * (25 + 3 * 7) + 7
    assert executions(unrolled.graph, "cos") == 60
    _as_traced(monkeypatch)
    graph = _sin_steps(60, (25, 7))
    assert executions(graph.graph, "sin") == 60 + 2 * (25 + 3 * 7) + 7
    assert executions(graph.graph, "cos") == 60
    x = np.linspace(0.0, 1.0, 3)
    np.testing.assert_array_equal(unrolled.program.eval([x])[0], graph.program.eval([x])[0])


def test_a_short_rest_of_steps_takes_the_next_level_that_fits_it(monkeypatch):
    """Levels (625, 125, 25, 5) over 1375 steps: two segments of 625, then 125 steps, as
    long as the next level's segments. Those are reversed by the levels below (five
    segments of 25 steps, each of five of 5), not by storing their 125 carries: 22 carries
    stored at most, was 127 (the levels of MemoryBudget(30) at 10^4 steps, 5^5 ... 5,
    left 625 steps after three segments of 3125 and stored 628). The plan is what the
    program runs and stores."""
    levels, size = (625, 125, 25, 5), 5_000
    plan = schedules._nested(1375, levels)
    assert str(plan) == "2*[5*[5*[5*[5]]]] 5*[5*[5]]" and plan.peak == 22
    graph = _sin_steps(1375, levels, size)
    assert executions(graph.graph, "sin") <= 1375 + plan.recomputed
    assert plan.peak < _peak_carries(graph, size) < plan.peak + 16
    _as_traced(monkeypatch)
    assert executions(_sin_steps(1375, levels, size).graph, "sin") == 1375 + plan.recomputed
    assert schedules._nested(10_000, lax.MemoryBudget(30).levels(10_000)).peak == 28


def _peak_carries(graph, size):
    """Peak memory of one NumPy call of ``graph``'s program, in carries of ``size`` floats."""
    x = np.linspace(0.0, 1.0, size)
    graph.program.eval([x])
    tracemalloc.start()
    try:
        graph.program.eval([x])
        return tracemalloc.get_traced_memory()[1] / (8 * size)
    finally:
        tracemalloc.stop()


def test_a_loop_result_is_freed_after_its_last_use():
    """checkpoint=25 over 60 steps: the tail of 10 steps is reversed first, and its stacked
    carries go before the segments of 25 are run again (the tuple of the loop's results
    held them to the end: 2 + 10 + 25 carries and the temporaries)."""
    size = 20_000
    assert _peak_carries(_sin_steps(60, 25, size), size) < 2 + 25 + 10


def _steps_program(m, L, n, policy):
    """A scan of n steps with slices, a parameter and stacked results, as a loss."""
    xs = np.linspace(-1.0, 1.0, n)

    def f(p):
        def step(c, xi):
            return c * m.cos(xi) + 0.3 * m.sin(c * p), c * xi
        c, ys = L.scan(step, p, xs) if policy is None else L.scan(step, p, xs, checkpoint=policy)
        return c * m.sum(ys)
    return f


@pytest.mark.parametrize(("n", "slots"), [(1, 3), (7, 4), (16, 6), (17, 6), (100, 10),
                                          pytest.param(1000, 40, marks=pytest.mark.slow)])
def test_revolve_gives_the_values_of_storing_every_carry_and_jax_gradients(n, slots):
    """Revolve(slots) over n steps: n = 16 fills the schedule of 6 slots exactly (segments of
    5, 4, 3, 2 steps and 2 stored steps), n = 17 does not; n = 1000 is past the dynamic
    programming (the binomial layout). Values and gradients are those of storing every
    carry, bit for bit, and the gradient is JAX's; second derivatives go through it."""
    f, base = _steps_program(tnp, lax, n, lax.Revolve(slots)), _steps_program(tnp, lax, n, None)
    assert np.array_equal(tidu.jit(f)(0.7), tidu.jit(base)(0.7))
    assert np.array_equal(tidu.grad(f)(0.7), tidu.grad(base)(0.7))
    close(tidu.grad(f)(0.7), jax.jit(jax.grad(_steps_program(jnp, jax.lax, n, None)))(0.7))
    if n <= 100:
        close(tidu.grad(tidu.grad(f))(0.7), jax.jit(jax.grad(jax.grad(_steps_program(jnp, jax.lax, n, None))))(0.7))
        close(tidu.jvp(f, (0.7,), (1.0,))[1], tidu.grad(base)(0.7))


def test_revolve_reverse_scans_and_pytrees_match_storing_every_carry():
    xs = np.linspace(-1.0, 1.0, 23)

    def make(policy):
        def f(x):
            def step(c, xi):
                return {"a": c["a"] * tnp.cos(xi) + 0.3 * tnp.sin(c["b"] * x), "b": c["b"] + xi}, (c["a"] * xi, xi)
            c, (ys, zs) = lax.scan(step, {"a": x, "b": 0.5 * x}, xs, reverse=True, checkpoint=policy)
            return c["a"] * tnp.sum(ys) + tnp.sum(zs) * c["b"]
        return f

    base = make(None)
    for policy in (lax.Revolve(6), lax.MemoryBudget(8)):
        f = make(policy)
        assert np.array_equal(tidu.jit(f)(0.7), tidu.jit(base)(0.7))
        assert np.array_equal(tidu.grad(f)(0.7), tidu.grad(base)(0.7))
        close(tidu.hessian(f, mode="RoR")(0.7), tidu.hessian(base, mode="FoF")(0.7))


@functools.cache
def _fewest(steps, carries):
    """Brute force: the fewest steps run again over every schedule of this design for
    ``steps`` steps storing at most ``carries`` carries at once (inf: none fits). A schedule
    is blocks in order, each ``count`` stored steps (``count`` carries) or ``count`` segments
    of ``size`` steps (``count`` carries; each segment runs its steps again and reverses
    them by a schedule of its own, with the carries this block and the earlier ones left)."""
    if steps == 0:
        return 0
    best = float("inf")
    for count in range(1, carries + 1):
        if count <= steps:
            best = min(best, _fewest(steps - count, carries - count))
        for size in range(1, steps // count + 1):
            inner = _fewest(size, carries - count)
            if inner < best:
                best = min(best, count * (size + inner) + _fewest(steps - count * size, carries - count))
    return best


def test_revolve_runs_the_fewest_steps_again_within_its_slots():
    """For small n the schedule is the optimum (against brute force over every schedule of
    blocks); past the dynamic programming it stays within its slots and below the nested
    levels; its counts are what the program runs."""
    for slots in range(1, 8):
        for n in range(1, 41):
            want = _fewest(n, slots)
            if want == float("inf"):
                with pytest.raises(ValueError, match=f"Revolve: slots={slots} cannot reverse {n} steps"):
                    lax.Revolve(slots).schedule(n)
                continue
            plan = lax.Revolve(slots).schedule(n)
            assert (plan.steps, plan.recomputed) == (n, want), (n, slots, str(plan))
            assert plan.peak <= slots
    assert str(lax.Revolve(6).schedule(16)) == "[5] [4] [3] [2] 2"
    for n, slots in ((10_000, 60), (10_000, 30), (100_000, 100)):
        plan, levels = lax.Revolve(slots).schedule(n), lax.MemoryBudget(slots).levels(n)
        assert plan.steps == n and plan.peak <= slots
        assert plan.recomputed < len(levels) * n  # the nested levels run every step again per level
        assert lax.MemoryBudget(slots).schedule(n) == plan  # where the binomial schedule runs fewer again


@pytest.mark.parametrize(("n", "slots"), [(40, 7), (300, 12)])
def test_revolve_counts_are_what_the_program_runs(n, slots, monkeypatch):
    plan = lax.Revolve(slots).schedule(n)
    assert executions(_sin_steps(n, lax.Revolve(slots)).graph, "sin") <= n + plan.recomputed
    _as_traced(monkeypatch)
    graph = _sin_steps(n, lax.Revolve(slots)).graph
    assert executions(graph, "sin") == n + plan.recomputed
    assert executions(graph, "cos") == n
    # the graph has a loop per block of each kind of segment, not per step
    loops = {(tuple((k, v) for k, v in node.attrs.items() if k != "index")) for b in [graph, *(
        b.graph for b in graph.bodies())] for node in b.nodes if node.op == "scan"}
    assert len(loops) <= 3 * plan.loops + 2


def test_revolve_peak_memory_is_its_stored_carries_and_a_few_more():
    """300 steps with 12 slots: the 12 stored carries at most, the cotangent of each level
    of segments and the temporaries of a step (storing every carry: 300)."""
    size, plan = 20_000, lax.Revolve(12).schedule(300)
    peak = _peak_carries(_sin_steps(300, lax.Revolve(12), size), size)
    assert plan.peak <= 12 < peak < plan.peak + 16


def _solver(m, L, jacfwd):
    def newton(f, x0):
        def step(c):
            i, x = c
            return i + 1, x - m.linalg.solve(jacfwd(f)(x), f(x))
        return L.while_loop(lambda c: c[0] < 20, step, (0, x0))[1]

    def tangent_solve(g, y):  # g is linear: its matrix, column by column
        return m.linalg.solve(m.stack([g(m.array([1.0, 0.0])), g(m.array([0.0, 1.0]))], axis=1), y)

    def loss(theta):
        def f(x):
            return m.stack([x[0] + 0.3 * m.sin(x[1]) - theta[0], x[1] + 0.2 * x[0] ** 2 - theta[1] * x[0]])
        return m.sum(L.custom_root(f, m.array([0.0, 0.0]), newton, tangent_solve) ** 2)

    return loss


def test_custom_root_of_a_newton_while_loop_matches_jax():
    theta = np.array([0.7, 1.3])
    f, fj = _solver(tnp, lax, tidu.jacfwd), _solver(jnp, jax.lax, jax.jacfwd)
    close(tidu.jit(f)(theta), fj(theta))
    close(tidu.grad(f)(theta), jax.jit(jax.grad(fj))(theta))  # reverse mode: the while loop is not differentiated
    close(tidu.jacfwd(f)(theta), jax.jit(jax.jacfwd(fj))(theta))
    close(tidu.hessian(f, mode="FoF")(theta), jax.jit(jax.hessian(fj))(theta))
    close(f(theta), fj(theta))  # concrete values


def test_custom_root_scalar_with_a_fori_newton():
    def mk(m, L, grad):
        def f(theta):
            newton = lambda g, x0: L.fori_loop(0, 20, lambda i, x: x - g(x) / grad(g)(x), x0)  # noqa: E731
            return L.custom_root(lambda x: x ** 3 + theta * x - 2.0, 1.0, newton, lambda g, y: y / g(1.0)) ** 2
        return f

    f, fj = mk(tnp, lax, tidu.grad), mk(jnp, jax.lax, jax.grad)
    close(tidu.grad(f)(0.7), jax.jit(jax.grad(fj))(0.7))
    close(tidu.hessian(f, mode="RoR")(0.7), jax.jit(jax.hessian(fj))(0.7))


def test_sparsity_goes_through_bodies():
    """Patterns through scan (a fixpoint over the carries), cond (the union over branches)
    and while: supersets of the dense derivatives' nonzeros, and sparse."""
    def f(x):
        c, ys = lax.scan(lambda c, xi: (c * tnp.sin(c) + xi, c[0] * xi), x[:3], tnp.reshape(x, (2, 3)))
        d = lax.cond(x[0] > 0, lambda v: v * v, lambda v: tnp.cos(v), x[3:])
        return tnp.sum(c ** 2) + tnp.sum(ys) + tnp.sum(d) + x[0] * x[1]

    x = np.linspace(0.1, 1.0, 6)
    pattern = tidu.hessian_sparsity(f)(x).toarray()
    dense = tidu.hessian(f)(x)
    assert not (np.abs(dense) > 0)[~pattern].any()  # a superset
    close(tidu.hessian(f, sparse=True)(x).toarray(), dense)
    assert pattern.sum() < pattern.size  # sparse: the loops did not make it dense

    def h(x):  # here the pattern is exact: each carry element meets one x element per step
        c, _ = lax.scan(lambda c, xi: (c * tnp.sin(c) + xi, None), x[:3], tnp.reshape(x, (2, 3)))
        return tnp.sum(c ** 2) + x[0] * x[1]

    assert np.array_equal(tidu.hessian_sparsity(h)(x).toarray(), np.abs(tidu.hessian(h)(x)) > 0)

    def g(x):  # a while loop: a Jacobian pattern (forward mode)
        return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * tnp.sin(c[1])), (0, x))[1]

    jac = tidu.jacobian_sparsity(g)(x).toarray()
    assert not (np.abs(tidu.jacfwd(g)(x)) > 0)[~jac].any()
    assert jac.sum() < jac.size


def test_reverse_mode_runs_the_forward_steps_once():
    """The primal scan and the scan that stacks the carries for the reverse pass run the
    same steps over the same operands: simplify.loops fuses them into one loop."""
    def f(p):
        def step(x, _):
            return x + 0.01 * tnp.stack([x[1], p[0] * (1.0 - x[0] ** 2) * x[1] - x[0]]), x[0]
        xT, first = lax.scan(step, tnp.array([1.0, 0.5]), None, length=50)
        return tnp.sum(xT ** 2) + tnp.mean(first)

    def fj(p):
        def step(x, _):
            return x + 0.01 * jnp.stack([x[1], p[0] * (1.0 - x[0] ** 2) * x[1] - x[0]]), x[0]
        xT, first = jax.lax.scan(step, jnp.array([1.0, 0.5]), None, length=50)
        return jnp.sum(xT ** 2) + jnp.mean(first)

    p = np.array([1.5])
    graph = tidu.make_graph(tidu.grad(f))(p).graph
    loops = {(n.attrs["body"], n.inputs, n.attrs["reverse"]) for n in graph.nodes if n.op == "scan"}
    assert sorted(r for _, _, r in loops) == [0, 1]  # one forward loop, one reverse loop
    close(tidu.grad(f)(p), jax.jit(jax.grad(fj))(p))


def _pendulum(m, L, n, dt=0.05):
    """The state after n RK4 steps of a damped pendulum, of its parameters and initial state."""
    def rhs(x, p):
        return m.stack([x[1], -p[0] * m.sin(x[0]) - p[1] * x[1]])

    advance = rk4_step(rhs, dt)

    def final(p, x0):
        return L.scan(lambda x, _: (advance(x, p), None), x0, None, length=n)[0]
    return final


def _loops(graph):
    return {(n.attrs["body"], n.inputs) for n in graph.nodes if n.op == "scan"}


def test_jacfwd_by_two_arguments_runs_one_loop_of_n_steps():
    """jacfwd by p and by x0 is one JVP batched over the 4 elements of both (the leaves are
    small: nested.JOINT_BASIS_MAX): one scan carrying the primal trajectory and the tangents
    of all 4 directions, so the n steps run once and each stage's sine once per step. The
    values are those of one argument at a time, bit for bit, and JAX's."""
    n = 30
    f, fj = _pendulum(tnp, lax, n), _pendulum(jnp, jax.lax, n)
    p, x0 = np.array([1.3, 0.2]), np.array([0.8, -0.3])
    jf = tidu.jacfwd(f, argnums=(0, 1))
    graph = tidu.make_graph(jf)(p, x0).graph
    assert len(_loops(graph)) == 1
    assert {n.attrs["n_carry"] for n in graph.nodes if n.op == "scan"} == {2}  # x, dx/d(p, x0)
    assert executions(graph, "sin") == executions(graph, "cos") == 4 * n
    got = jf(p, x0)
    assert np.array_equal(got[0], tidu.jacfwd(f, argnums=0)(p, x0))
    assert np.array_equal(got[1], tidu.jacfwd(f, argnums=1)(p, x0))
    for a, b in zip(got, jax.jit(jax.jacfwd(fj, argnums=(0, 1)))(p, x0), strict=True):
        close(a, b)
    close(tidu.make_graph(jf)(p, x0).program.run([p, x0], backend="xla")[1], got[1])


def test_scans_that_depend_on_each_other_or_diverge_are_not_one_carry():
    """A scan that reads another's result runs after it (two loops); two independent scans
    whose carries start at the same value but are updated differently are one loop with
    both carries."""
    xs = np.linspace(0.1, 1.0, 12)  # constant xs: a shorter loop over them may be unrolled

    def dependent(m, L):
        def f(x):
            a = L.scan(lambda c, xi: (c * m.cos(xi) + 0.1, None), x, xs)[0]
            return L.scan(lambda c, xi: (c * m.sin(xi) + a, None), x, xs)[0]
        return f

    def diverging(m, L):
        def f(x):
            a = L.scan(lambda c, xi: (c * 0.5 + xi, None), x, xs)[0]
            b = L.scan(lambda c, xi: (c * 2.0 - m.sin(xi), None), x, xs)[0]
            return a * b
        return f

    assert len(_loops(tidu.make_graph(dependent(tnp, lax))(0.7).graph)) == 2
    ((body, _),) = _loops(tidu.make_graph(diverging(tnp, lax))(0.7).graph)
    assert len(body.graph.outputs) == 2  # the two carries
    for make in (dependent, diverging):
        close(tidu.jit(make(tnp, lax))(0.7), make(jnp, jax.lax)(0.7))
        close(tidu.grad(make(tnp, lax))(0.7), jax.jit(jax.grad(make(jnp, jax.lax)))(0.7))


def test_scans_are_not_fused_where_their_stacked_results_would_be_held_together():
    """The first scan's stacked results are summed before the second scan runs: one loop
    would hold both loops' stacked results at once (as reverse mode's residuals would be
    held past their reverse loop), so the two stay apart."""
    xs = np.linspace(0.0, 1.0, 2000).reshape(200, 10)

    def f(x):
        a = lax.scan(lambda c, xi: (c * 0.9 + xi, tnp.sin(c * xi)), x, xs)[1]
        b = lax.scan(lambda c, xi: (c * 0.8 + xi, tnp.cos(c * xi)), x, xs)[1]
        return tnp.sum(a) * tnp.sum(b)

    assert len(_loops(tidu.make_graph(f)(np.ones(10)).graph)) == 2


def test_a_fused_loops_results_read_only_what_their_own_steps_read():
    """Whether a body's result reads a parameter (which carries are linear when a scan is
    transposed, which are batched) looks into a nested scan per result: one loop may run
    a scan of the primal values and a scan of the tangents."""
    xs = np.linspace(0.1, 1.0, 12)  # constant xs: a shorter loop over them may be unrolled

    def f(x, t):
        a = lax.scan(lambda c, xi: (c * tnp.cos(xi) + 0.1, None), x, xs)[0]
        b = lax.scan(lambda c, xi: (c * 2.0 - tnp.sin(xi) * x, None), t, xs)[0]
        return a, b

    graph = tidu.make_graph(f)(0.7, 0.3).graph
    assert len(_loops(graph)) == 1
    body = Body(graph)
    assert control_rules._depends(body, {1}) == {1} and control_rules._depends(body, {0}) == {0, 1}


@pytest.mark.parametrize("unroll", [2, pytest.param(3, marks=pytest.mark.slow), True])
@pytest.mark.parametrize("reverse", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_unroll_writes_steps_out_with_the_same_values(unroll, reverse):
    xs = np.linspace(-1.0, 1.0, 28)  # 14 and 9 segments: loops too long to be unrolled by cost

    def make(m, L, u):
        def f(x):
            step = lambda c, xi: (c * m.cos(xi) + 0.3 * m.sin(c * x), c * xi)  # noqa: E731
            c, ys = L.scan(step, x, xs, reverse=reverse, unroll=u)
            return c * m.sum(ys)
        return f

    f, fj = make(tnp, lax, unroll), make(jnp, jax.lax, 1)
    close(tidu.jit(f)(0.7), fj(0.7))
    close(tidu.grad(f)(0.7), jax.jit(jax.grad(fj))(0.7))
    ops = tidu.make_graph(f)(0.7).graph.op_histogram()
    assert ("scan" in ops) == (unroll is not True)


def _edge(name):
    z = np.array([0.3 + 0.2j, -0.1 + 0.5j])
    x = np.linspace(0.1, 1.0, 3)
    cases = {
        "complex carry": (lambda m, L: lambda z: m.real(m.sum(L.scan(lambda c, zi: (c * zi + m.sin(c), c), z[0], z)[1]
                                                                ** 2)), z),
        "float32": (lambda m, L: lambda x: m.sum(L.scan(lambda c, xi: (c * m.cos(xi), c), x[0], x)[1]),
                    x.astype(np.float32)),
        "zero steps": (lambda m, L: lambda x: m.sum(L.scan(lambda c, xi: (c * xi, c), x[0], x[:0])[0] + x), x),
        "no carry": (lambda m, L: lambda x: m.sum(L.scan(lambda c, xi: (c, m.sin(xi) * x[0]), (), x)[1]), x),
        "int carry": (lambda m, L: lambda x: m.sum(L.scan(lambda c, xi: ((c[0] + 1, c[1] * xi + c[0]), c[1]),
                                                          (0, x[0]), x)[1]), x),
        "map with two results": (lambda m, L: lambda x: m.sum(L.map(lambda r: (m.sin(r), r * 2.0),
                                                                    m.reshape(m.concatenate([x, x]), (3, 2)))[0]), x),
    }
    return cases[name]


@pytest.mark.parametrize("name", ["complex carry", "float32", "zero steps", "no carry", "int carry",
                                  "map with two results"])
def test_edge_cases_against_jax(name):
    make, x = _edge(name)
    f, fj = make(tnp, lax), make(jnp, jax.lax)
    tol = 1e-5 if x.dtype == np.float32 else 1e-10
    np.testing.assert_allclose(tidu.jit(f)(x), fj(x), rtol=tol)
    g = tidu.grad(f)(x)
    # tidu's complex gradient is the conjugate of JAX's (the adjoint convention)
    np.testing.assert_allclose(np.conj(g) if np.iscomplexobj(x) else g, jax.jit(jax.grad(fj))(x), rtol=tol, atol=tol)


def test_nested_vmap_of_a_scan():
    def mk(m, L):
        return lambda x: L.scan(lambda c, xi: (c * m.sin(xi) + xi, c), x[0], x)[1]

    xb = np.linspace(0.1, 1.0, 24).reshape(2, 3, 4)
    close(tidu.vmap(tidu.vmap(mk(tnp, lax)))(xb), jax.jit(jax.vmap(jax.vmap(mk(jnp, jax.lax))))(xb))


def test_loop_invariant_terms_are_computed_once_before_the_loop():
    a = np.linspace(0.5, 1.5, 4)

    def mk(m, L):
        def f(p, x):
            step = lambda c, _: (c * m.cos(p[0] * a) + m.exp(p[1]) * m.sin(c), None)  # noqa: E731
            return m.sum(L.scan(step, x, None, length=10)[0])  # too long to be unrolled by cost
        return f

    p, x = np.array([0.3, 0.2]), np.linspace(0.0, 1.0, 4)
    f, fj = mk(tnp, lax), mk(jnp, jax.lax)
    graph = tidu.make_graph(f)(p, x).graph
    (body,) = graph.bodies()
    assert "cos" in graph.op_histogram() and "cos" not in body.graph.op_histogram()
    assert body.op_count == 4  # c * k1 + k2 * sin(c)
    close(tidu.jit(f)(p, x), fj(p, x))
    for got, want in zip(tidu.grad(f, argnums=(0, 1))(p, x), jax.jit(jax.grad(fj, argnums=(0, 1)))(p, x), strict=True):
        close(got, want)


def test_while_loops_drop_dead_carries_and_hoist_invariants():
    """A carry that neither the result nor the condition reads is dropped; a term of the
    body's constants only is computed once, before the loop."""
    a = np.linspace(0.5, 1.5, 4)

    def mk(m, L):
        def f(x):
            def body(c):
                return c[0] + 1, c[1] * 0.9 + m.sin(a * x), c[2] * 2.0 + c[1]  # c[2]: read by nothing

            return m.sum(L.while_loop(lambda c: c[0] < 5, body, (0, x, x))[1])
        return f

    x = np.linspace(0.1, 0.4, 4)
    f, fj = mk(tnp, lax), mk(jnp, jax.lax)
    graph = tidu.make_graph(f)(x).graph
    (loop,) = [n for n in graph.nodes if n.op == "while"]
    assert loop.attrs["body"].out_avals == (tidu.Aval((), "int64"), tidu.Aval((4,), "float64"))  # i and y
    assert "sin" in graph.op_histogram() and "sin" not in loop.attrs["body"].graph.op_histogram()
    close(tidu.jit(f)(x), fj(x))
    close(tidu.jacfwd(f)(x), jax.jit(jax.jacfwd(fj))(x))


def test_results_nobody_reads_are_not_computed():
    def f(x):
        def step(c, xi):
            a, b = c
            return (a * tnp.sin(xi) + 1.0, b * 2.0 + a), (a * xi, tnp.exp(b))
        (a, b), (ys, zs) = lax.scan(step, (x[0], x[1]), x)
        return a + tnp.sum(ys)  # b and zs are never read: b's carry and zs are dropped

    x = np.linspace(0.1, 1.0, 4)
    graph = tidu.make_graph(f)(x).graph
    (body,) = graph.bodies()
    assert len(body.graph.inputs) == 2 and len(body.graph.outputs) == 2  # a and x in; a and ys out
    assert "exp" not in body.graph.op_histogram()

    def fj(x):
        def step(c, xi):
            a, b = c
            return (a * jnp.sin(xi) + 1.0, b * 2.0 + a), (a * xi, jnp.exp(b))
        (a, b), (ys, zs) = jax.lax.scan(step, (x[0], x[1]), x)
        return a + jnp.sum(ys)

    close(tidu.jit(f)(x), fj(x))
    close(tidu.grad(f)(x), jax.jit(jax.grad(fj))(x))


def test_custom_root_with_aux():
    def mk(m, L, grad):
        def f(theta):
            def newton(g, x0):  # the root, and the number of steps taken (not differentiated)
                return L.while_loop(lambda c: (c[0] < 30) & (m.abs(g(c[1])) > 1e-13),
                                    lambda c: (c[0] + 1, c[1] - g(c[1]) / grad(g)(c[1])), (0, x0))[::-1]
            x, steps = L.custom_root(lambda x: x ** 3 + theta * x - 2.0, 1.0, newton, lambda g, y: y / g(1.0),
                                     has_aux=True)
            return x ** 2 + 0.0 * steps
        return f

    f, fj = mk(tnp, lax, tidu.grad), mk(jnp, jax.lax, jax.grad)
    close(tidu.jit(f)(0.7), fj(0.7))
    close(tidu.grad(f)(0.7), jax.jit(jax.grad(fj))(0.7))
    with pytest.raises(TypeError, match=r"has_aux=True\): solve <lambda> must return a pair"):
        tidu.jit(lambda t: lax.custom_root(lambda x: x - t, 0.0, lambda g, x0: x0, lambda g, y: y, has_aux=True))(1.0)


def _batched_while(name):
    """vmap cases of a while loop: (make(m, L) -> f of one example, the examples)."""
    xs = np.array([0.2, 0.7, 3.0, 10.0])
    cases = {
        # the counter alone decides: the predicate is not batched
        "unbatched predicate": lambda m, L: lambda x: L.while_loop(
            lambda c: c[0] < 5, lambda c: (c[0] + 1, m.sin(c[1]) + x, c[2] * 0.5), (0, x, 1.0)),
        "batched cond constant": lambda m, L: lambda x: L.while_loop(
            lambda c: c[1] < x, lambda c: (c[0] + 1, c[1] * 2.0 + 0.1, c[2] + 1.0), (0, 0.1, 0.0)),
        # c[1] is batched from the first step on, c[2] from the second (a fixpoint); the
        # predicate, which reads neither, is not
        "batched body constant": lambda m, L: lambda x: L.while_loop(
            lambda c: c[0] < 4, lambda c: (c[0] + 1, c[1] * 0.5 + x, m.cos(c[2]) + c[1]), (0, 1.0, 2.0)),
        # the predicate reads a carry that only the body makes batched
        "carry batched after a step": lambda m, L: lambda x: L.while_loop(
            lambda c: c[1] < 5.0, lambda c: (c[0] + 1, c[1] + x + 0.5, c[2] * 1.5), (0, 0.0, 1.0)),
        "while in a scan": lambda m, L: lambda x: L.scan(
            lambda c, xi: (L.while_loop(lambda k: k[0] < 3, lambda k: (k[0] + 1, m.sin(k[1]) * xi + c), (0, c))[1],
                           c), x, m.array([0.5, 1.0, 1.5]))[1],
        "scan in a while": lambda m, L: lambda x: L.while_loop(
            lambda c: c[0] < 3, lambda c: (c[0] + 1, L.scan(lambda a, t: (m.sin(a) + t * x, a), c[1],
                                                           m.array([0.1, 0.2]))[0]), (0, 1.0)),
    }
    return cases[name], xs


@pytest.mark.parametrize("name", ["unbatched predicate", "batched cond constant", "batched body constant",
                                  "carry batched after a step", "while in a scan", "scan in a while"])
def test_vmap_of_a_while_loop_matches_jax(name):
    make, xs = _batched_while(name)
    f, fj = make(tnp, lax), make(jnp, jax.lax)
    got, want = tidu.vmap(f)(xs), jax.jit(jax.vmap(fj))(xs)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        close(a, b)
    grid = np.stack([xs, 0.5 * xs + 0.1])
    for a, b in zip(jax.tree.leaves(tidu.vmap(tidu.vmap(f))(grid)),
                    jax.tree.leaves(jax.jit(jax.vmap(jax.vmap(fj)))(grid)), strict=True):
        close(a, b)
    close(tidu.vmap(tidu.jacfwd(_float_result(f)))(xs), jax.jit(jax.vmap(jax.jacfwd(_float_result(fj))))(xs))


def _float_result(f):
    """``f`` with only its last result (a loop's float carry, or a scan's ys)."""
    def g(x):
        r = f(x)
        return r[-1] if isinstance(r, tuple) else r
    return g


def test_a_while_loop_whose_predicate_is_not_batched_batches_only_its_batched_carries():
    """The counter and the constant carry stay unbatched, and no example is masked: the
    loop's body and condition are those of one example's loop over the batched carry."""
    make, xs = _batched_while("unbatched predicate")
    graph = tidu.make_graph(tidu.vmap(make(tnp, lax)))(xs).graph
    (loop,) = {(n.attrs["body"], n.attrs["cond_body"]) for n in graph.nodes if n.op == "while"}
    body, cond = loop
    assert body.out_avals == (tidu.Aval((), "int64"), tidu.Aval((4,), "float64"), tidu.Aval((), "float64"))
    assert "select" not in body.graph.op_histogram()
    assert not {"reduce_max", "reduce_or"} & set(cond.graph.op_histogram())


def _newton(m, L, jacfwd):
    def solve(a):
        def f(x):
            return m.stack([x[0] ** 2 + x[1] - a[0], x[1] ** 3 + x[0] - a[1]])

        step = lambda c: (c[0] + 1, c[1] - m.linalg.solve(jacfwd(f)(c[1]), f(c[1])))  # noqa: E731
        return L.while_loop(lambda c: c[0] < 8, step, (0, m.array([1.0, 1.0])))[1]
    return solve


def test_jacfwd_of_a_newton_while_loop_and_its_value_run_one_loop():
    """jacfwd batches the tangent loop; its predicate reads the primal carries only, which
    stay unbatched: the batched loop carries the primal loop's own carries, and the two
    loops are one (simplify.loops._fuse_whiles)."""
    f, fj = _newton(tnp, lax, tidu.jacfwd), _newton(jnp, jax.lax, jax.jacfwd)
    a = np.array([2.0, 3.0])
    both_ = lambda a: (f(a), tidu.jacfwd(f)(a))  # noqa: E731
    graph = tidu.make_graph(both_)(a).graph
    assert len({(n.attrs["body"], n.inputs) for n in graph.nodes if n.op == "while"}) == 1
    value, jac = tidu.jit(both_)(a)
    close(value, jax.jit(fj)(a))
    close(jac, jax.jit(jax.jacfwd(fj))(a))
    assert tidu.make_graph(both_)(a).graph.listing() == graph.listing()
