"""The negation pass before the e-graph (tidu/egraph/negation.py): values bit for bit,
never more ops, and what it does to the 1000-op chain's derivatives."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tidu
import tidu.numpy as tnp
from tidu.egraph import negation
from tidu.egraph.negation import push_negations
from tidu.graph import MaterializedGraph, MNode
from tidu.keys import NO_ATTRS, Aval, Named

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
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(negation, "PUSH_FROM", 0)
        pushed = push_negations(graph)
    assert pushed.op_count <= graph.op_count
    for want, got in zip(evaluate(graph), evaluate(pushed), strict=True):
        # equal values, nan where nan; a zero's sign may differ (-(0 + 0) is -0, (-0) - 0
        # is -0 but (-0) - (-0) is +0), as for the exact rewrites (docs/egraph.md)
        assert np.array_equal(want, got, equal_nan=True), (want, got)


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
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(negation, "PUSH_FROM", 0)
        pushed = push_negations(graph)
    assert pushed.op_histogram() == {"mul": 2, "add": 1, "neg": 1, "sin": 1}
    assert [n.op for n in pushed.nodes[4:]] == ["mul", "mul", "add", "neg", "sin"]


def test_small_graphs_go_to_the_egraph_unchanged() -> None:
    graph = random_graph([(0, 0, 0), (4, 3, 1)], 1)
    assert push_negations(graph) is graph


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
