"""The negation pass before the e-graph (tidu/egraph/negation.py): values bit for bit,
never more ops, and what it does to the 1000-op chain's derivatives."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tidu
import tidu.numpy as tnp
from tidu.core.graph import MaterializedGraph, MNode
from tidu.core.keys import NO_ATTRS, Attrs, Aval, Literal, Named
from tidu.ops.catalog import catalog
from tidu.simplify.dag import Collected
from tidu.simplify.egraph.negation import push, push_negations, symmetric_ops

AVAL = Aval((6,), "float64")
OPS = ("neg", "neg", "add", "sub", "mul", "div", "sin", "exp")
# signed zeros, infinities and nan as well: the identities hold for every IEEE value
# (up to the sign of a zero)
VALUES = np.array([[0.0, -0.0, 1.5, -2.25, np.inf, -3.0],
                   [-0.0, 0.0, -0.5, 4.0, 2.0, np.nan],
                   [2.0, -0.0, -np.inf, 0.75, -1.0, 0.0]])


def random_graph(steps: list[tuple[int, int, int]], n_out: int) -> MaterializedGraph:
    nodes = [MNode(None, NO_ATTRS, (), AVAL, Named(name)) for name in "xyz"]
    for kind, a, b in steps:
        op = OPS[kind % len(OPS)]
        x, y = a % len(nodes), b % len(nodes)
        ins = (x,) if op in ("neg", "sin", "exp") else (x, y)
        nodes.append(MNode(op, NO_ATTRS, ins, AVAL))
    outputs = list(range(max(3, len(nodes) - n_out), len(nodes)))
    return MaterializedGraph(nodes, [0, 1, 2], outputs)


def evaluate(graph: MaterializedGraph) -> list[np.ndarray]:
    with np.errstate(all="ignore"):
        return tidu.compile(graph, cache=False).eval(list(VALUES))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 99), st.integers(0, 99)), min_size=1, max_size=40),
       st.integers(1, 4))
def test_pushed_graph_computes_the_same_bits(steps, n_out) -> None:
    graph = random_graph(steps, n_out)
    pushed = push_negations(graph)
    assert pushed.op_count <= graph.op_count
    for want, got in zip(evaluate(graph), evaluate(pushed), strict=True):
        # equal values, nan where nan; a zero's sign may differ (-(0 + 0) is -0, (-0) - 0
        # is -0 but (-0) - (-0) is +0), as for the exact rewrites (docs/egraph.md)
        assert np.array_equal(want, got, equal_nan=True), (want, got)


# constants the pass reads (0 and -0 with zeros=True; 1, -1, 2) and an identity reshape,
# mixed into random graphs of OPS
CONSTANTS = (0.0, -0.0, 1.0, -1.0, 2.0)


def random_graph_with_constants(steps: list[tuple[int, int, int]], n_out: int) -> MaterializedGraph:
    nodes = [MNode(None, NO_ATTRS, (), AVAL, Named(name)) for name in "xyz"]
    nodes += [MNode("constant", Attrs(value=Literal.filled(c, AVAL.shape, AVAL.dtype)), (), AVAL) for c in CONSTANTS]
    pool = list(range(len(nodes)))  # the nodes of AVAL, operands of the next ones

    def add(node: MNode) -> None:
        pool.append(len(nodes))
        nodes.append(node)

    for kind, a, b in steps:
        x, y = pool[a % len(pool)], pool[b % len(pool)]
        if kind == len(OPS):  # a reshape to the operand's own shape: the identity
            add(MNode("reshape", Attrs(shape=AVAL.shape), (x,), AVAL))
        elif kind == len(OPS) + 1:  # a reshape of a reshape (to (2, 3) and back)
            nodes.append(MNode("reshape", Attrs(shape=(2, 3)), (x,), Aval((2, 3), AVAL.dtype)))
            add(MNode("reshape", Attrs(shape=AVAL.shape), (len(nodes) - 1,), AVAL))
        else:
            op = OPS[kind % len(OPS)]
            add(MNode(op, NO_ATTRS, (x,) if op in ("neg", "sin", "exp") else (x, y), AVAL))
    outputs = [i for i in pool[3 + len(CONSTANTS):]][-n_out:] or [pool[-1]]
    return MaterializedGraph(nodes, [0, 1, 2], outputs)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(OPS) + 1), st.integers(0, 99), st.integers(0, 99)), min_size=1,
                max_size=40),
       st.integers(1, 4), st.booleans())
def test_identities_with_constants_compute_the_same_bits(steps, n_out, doubling) -> None:
    """Sums with 0 (``zeros=True``, the exact semantics), products by 1, -1 and 2, identity
    reshapes and reshapes of reshapes: the same values (a zero's sign aside), never more ops."""
    graph = random_graph_with_constants(steps, n_out)
    dag = push(Collected.of(graph), doubling=doubling, zeros=True)
    pushed = graph if dag.keep is None else dag.graph()
    assert pushed.op_count <= graph.op_count
    for want, got in zip(evaluate(graph), evaluate(pushed), strict=True):
        assert np.array_equal(want, got, equal_nan=True), (want, got)


def test_sums_with_zero_and_identity_ops_skip_the_egraph() -> None:
    """0 - x, x + 0, x - 0, a reshape of a reshape and a reshape to its operand's shape
    leave the rules nothing to match: no e-graph is built (iterations 0), and the
    gradient's values are the derivatives' (checked against SymPy)."""
    sympy = pytest.importorskip("sympy")

    def f(v):
        x, y = v[0], v[1]
        zero = tnp.zeros(())
        u = tnp.reshape(tnp.reshape(tnp.stack([x * y, y]), (2, 1)), (2,))
        return (zero - x) * tnp.sin(y) + (x - zero) * (zero + y) + tnp.sum(tnp.reshape(u, (2,)) ** 2)

    point = np.array([0.7, -0.3])
    graph = tidu.make_graph(tidu.grad(f))(point).graph
    assert graph.stats["iterations"] == 0
    sx, sy = sympy.symbols("x y")
    e = -sx * sympy.sin(sy) + sx * sy + (sx * sy) ** 2 + sy ** 2
    want = [float(sympy.diff(e, a).subs({sx: 0.7, sy: -0.3})) for a in (sx, sy)]
    assert tidu.compile(graph).eval([point])[0] == pytest.approx(want, rel=1e-12)


def test_negations_leave_products_and_sums() -> None:
    """-(x) * y * z + -(w) becomes -((x*y)*z + w): one neg where there were two."""
    nodes = [MNode(None, NO_ATTRS, (), AVAL, Named(n)) for n in "xyzw"]
    nodes += [MNode("neg", NO_ATTRS, (0,), AVAL),  # 4: -x
              MNode("mul", NO_ATTRS, (4, 1), AVAL),  # 5: -x * y
              MNode("mul", NO_ATTRS, (5, 2), AVAL),  # 6: (-x * y) * z
              MNode("neg", NO_ATTRS, (3,), AVAL),  # 7: -w
              MNode("add", NO_ATTRS, (6, 7), AVAL),  # 8: ... + -w
              MNode("sin", NO_ATTRS, (8,), AVAL)]
    graph = MaterializedGraph(nodes, [0, 1, 2, 3], [9])
    pushed = push_negations(graph)
    assert pushed.op_histogram() == {"mul": 2, "add": 1, "neg": 1, "sin": 1}
    assert [n.op for n in pushed.nodes[4:]] == ["mul", "mul", "add", "neg", "sin"]


def test_small_graphs_are_pushed_too() -> None:
    """Small graphs are replaced by their pushed form as large ones are: the real Hessian
    of the Lennard-Jones potential has 30 ops, its values checked against SymPy."""
    sympy = pytest.importorskip("sympy")

    def lj(x, y):
        r2 = x * x + y * y
        s6 = 1.0 / (r2 * r2 * r2)
        return 4.0 * (s6 * s6 - s6)

    graph = tidu.make_graph(tidu.hessian(lj, argnums=(0, 1)), semantics="real")(1.1, 0.4).graph
    assert graph.op_count <= 30
    sx, sy = sympy.symbols("x y")
    e = lj(sx, sy)
    want = [float(sympy.diff(e, a, b).subs({sx: 1.1, sy: 0.4})) for a in (sx, sy) for b in (sx, sy)]
    got = [float(v) for v in tidu.compile(graph).eval([1.1, 0.4])]
    assert got == pytest.approx(want, rel=1e-12)


def chain(x, n: int):
    """bench/common.py's chain: sin, times x, halved, exp, tanh, cos, plus x, in turn."""
    steps = (tnp.sin, lambda y: y * x, lambda y: 0.5 * y, tnp.exp, tnp.tanh, tnp.cos, lambda y: y + x)
    y = x
    for i in range(n):
        y = steps[i % 7](y)
    return y


def test_chain_gradient_reaches_the_sign_rules_fixpoint() -> None:
    """The 1000-op chain's gradient: the pass gives the e-graph the sign rules' result, so
    it saturates within 3 iterations (it stopped at the budget of 12 before) with fewer
    ops than the graph as linearized and transposed, and the same value."""
    f = tidu.grad(lambda x: chain(x, 1000))
    raw = tidu.make_graph(f, simplify=False)(0.3).graph
    view = tidu.make_graph(f)(0.3)
    graph = view.graph
    assert graph.stats["stop_reason"] == "saturated" and graph.stats["iterations"] <= 3
    assert graph.op_count < 0.96 * raw.op_count
    want = tidu.compile(raw).eval([0.3])[0]
    assert tidu.compile(graph).eval([0.3])[0] == pytest.approx(want, rel=1e-12)


def test_odd_and_even_functions_take_their_operands_base() -> None:
    """In the real semantics tanh(-x) is -tanh(x) and cos(-x) is cos(x) (rewrites of
    transcendental.rules; IEEE leaves the symmetry to the math library, so the exact
    semantics keeps them): the negation pass applies them, so tanh(-x) * tanh(x) shares
    its tanh and the e-graph has no sign left to move. abs(-x) is abs(x) in both."""
    def f(x, y):
        return tnp.tanh(-x) * tnp.tanh(x) + tnp.cos(-y) * tnp.sin(-y) + tnp.abs(-x)

    odd, even = symmetric_ops(catalog(), "real")
    assert {"tanh", "sin"} <= odd and {"cos", "abs"} <= even
    assert symmetric_ops(catalog(), "exact") == (frozenset(), frozenset({"abs"}))
    point = (0.4, -1.1)
    real = tidu.make_graph(f, semantics="real")(*point).graph
    assert real.op_histogram()["tanh"] == 1 and "abs" in real.op_histogram()
    assert not any(rule.startswith("rules/transcendental") for rule in real.stats["rule_matches"])
    exact = tidu.make_graph(f)(*point).graph
    assert exact.op_histogram()["tanh"] == 2  # tanh(-x) stays
    x, y = point
    want = np.tanh(-x) * np.tanh(x) + np.cos(-y) * np.sin(-y) + abs(x)
    for graph in (real, exact):
        assert float(tidu.compile(graph).eval(list(point))[0]) == pytest.approx(want, rel=1e-14)


def test_a_large_graph_takes_its_pushed_form_with_a_few_more_ops() -> None:
    """Pushing -b out of four products read by sin writes four negations where there was
    one: 3 ops more in a graph of about 1,200. The pushed form is taken (within
    1/PUSH_SLACK of the ops), so the e-graph is not built; a small graph keeps its form."""
    from tidu.simplify.egraph.negation import DOUBLING_FROM, PUSH_SLACK

    def f(x, steps):
        acc = x[0]
        for _ in range(steps):
            acc = tnp.sin(acc) * 0.5 + x[1]
        nb = -x[2]
        for j in range(4):
            acc = acc + tnp.sin(x[3 + j] * nb)
        return acc

    x = np.linspace(0.1, 0.7, 7)
    graph = tidu.make_graph(tidu.jit(lambda v: f(v, 400)))(x).graph
    assert graph.stats["nodes_before"] >= DOUBLING_FROM
    assert graph.stats["iterations"] == 0
    assert graph.stats["ops_before"] < graph.op_count <= graph.stats["ops_before"] * (1 + 1 / PUSH_SLACK)
    assert [n.op for n in graph.nodes].count("neg") == 4
    with np.errstate(all="ignore"):
        want = x[0]
        for _ in range(400):
            want = np.sin(want) * 0.5 + x[1]
        want = want + sum(np.sin(x[3 + j] * -x[2]) for j in range(4))
    assert tidu.compile(graph).eval([x])[0] == want
    small = tidu.make_graph(tidu.jit(lambda v: f(v, 3)))(x).graph
    assert small.stats["nodes_before"] < DOUBLING_FROM
    assert [n.op for n in small.nodes].count("neg") == 1
