"""Extraction from a frozen e-graph: the forced-choice shortcut agrees with the Knuth
extractor, and emission hash-conses ops once two classes were given one node."""

import random
from types import SimpleNamespace

import numpy as np
import pytest

from tidu.core.graph import MNode
from tidu.core.keys import Attrs, Aval, Literal, Named
from tidu.simplify.egraph.dagrefine import several_enodes
from tidu.simplify.egraph.extract import Tables, _choose, _emit, _forced

F64 = Aval((), "float64")


def random_forced(rng: random.Random, n_cls: int) -> tuple[list[int], list[tuple[int, ...]]]:
    """An e-graph where every class has one e-node (operands are earlier classes), plus
    self-loops: on some classes next to their e-node, on one class alone."""
    node_cls: list[int] = []
    kids: list[tuple[int, ...]] = []
    for c in range(n_cls):
        if c < 3:
            node_cls.append(c)
            kids.append(())
            continue
        node_cls.append(c)
        kids.append(tuple(rng.randrange(c) for _ in range(rng.choice((1, 2, 2, 3)))))
        if rng.random() < 0.2:  # x * 1 in the class of x
            node_cls.append(c)
            kids.append((c, rng.randrange(3)))
    node_cls.append(n_cls)  # a class holding only a self-loop: no finite extraction
    kids.append((n_cls, 0))
    order = list(range(len(node_cls)))
    rng.shuffle(order)  # row order is egglog's, not topological
    return [node_cls[k] for k in order], [kids[k] for k in order]


@pytest.mark.parametrize("seed", range(20))
def test_forced_choice_is_what_the_knuth_extractor_chooses(seed):
    rng = random.Random(seed)
    node_cls, kids = random_forced(rng, rng.randrange(5, 200))
    n_cls = max(node_cls) + 1
    weight = [0.0 if not k else 1.0 for k in kids]
    last = dict(zip(node_cls, range(len(node_cls)), strict=True))
    best = _forced(n_cls, node_cls, kids, several_enodes(node_cls), last)
    expected, choice, _ = _choose(n_cls, node_cls, lambda k: ("op", k), kids, weight)
    assert best == expected and not choice
    assert best[n_cls - 1] == -1


def test_a_real_choice_goes_to_the_knuth_extractor():
    # class 2 = {f(class 0), g(class 1)}: two e-nodes, neither a self-loop
    last = {0: 0, 1: 1, 2: 3}
    assert _forced(3, [0, 1, 2, 2], [(), (), (0,), (1,)], {2: [2, 3]}, last) is None
    # the same with one of them a self-loop: forced
    assert _forced(3, [0, 1, 2, 2], [(), (), (0,), (2, 1)], {2: [2, 3]}, last) == [0, 1, 2]


def tables() -> Tables:
    two = MNode("constant", Attrs(value=Literal(np.array(2.0))), (), F64)
    x = MNode(None, Attrs(), (), F64, Named("x"))
    return Tables(nodes=[x], avals={"f64[]": F64}, literals=[two],
                  constructors={"op_mul": ("mul", 2, ()), "op_add": ("add", 2, ())})


def op(prim):
    """The label extraction gives an op of type f64[] without attributes."""
    return ("op", prim, "f64[]", (), f"op_{prim}", Attrs(), F64, False)


def fake_nodes(labels, kids, out_cls, input_cls):
    return SimpleNamespace(cls=range(len(labels)), kids=kids, labels=labels, out_cls=out_cls, input_cls=input_cls)


def test_ops_over_merged_classes_are_one_node():
    # class 1 = Const 2.0 and class 2 = Lit 0 (also 2.0) become one constant node, so
    # mul(x, class 1) and mul(x, class 2) become one node too: add(m, m)
    mul, add = op("mul"), op("add")
    labels = [("inp", "f64[]", 0), ("const", "f64[]", 2.0, 0.0), ("lit", "f64[]", 0), mul, mul, add]
    kids = [(), (), (), (0, 1), (0, 2), (3, 4)]
    nodes = fake_nodes(labels, kids, {0: 5}, {0: 0})
    em = _emit(nodes, list(range(6)), tables(), [0], 1, None, dedup=False)
    assert em.merged  # the shortcut saw the merge ...
    em = _emit(nodes, list(range(6)), tables(), [0], 1, None, dedup=True)
    g = em.graph(em.new_inputs, em.new_outputs)  # ... and emitting again hash-conses the ops
    assert [n.op for n in g.nodes] == [None, "constant", "mul", "add"]
    assert g.nodes[3].inputs == (2, 2) and g.outputs == [3]


def test_without_merges_nothing_is_emitted_twice():
    mul, add = op("mul"), op("add")
    labels = [("inp", "f64[]", 0), ("lit", "f64[]", 0), mul, add]
    kids = [(), (), (0, 1), (2, 0)]
    em = _emit(fake_nodes(labels, kids, {0: 3}, {0: 0}), [0, 1, 2, 3], tables(), [0], 1, None, dedup=False)
    g = em.graph(em.new_inputs, em.new_outputs)
    assert not em.merged
    assert g.listing().splitlines()[1:] == ["  %1:f64[] = constant[value=2.0]",
                                            "  %2:f64[] = mul %0 %1", "  %3:f64[] = add %2 %0", "  return %3 }"]


def test_a_cycle_of_forced_choices_is_reported():
    # class 1 = f(class 2), class 2 = g(class 1): each has one e-node, no finite extraction
    f = op("sin")
    labels = [("inp", "f64[]", 0), f, f, op("add")]
    kids = [(), (2,), (1,), (1, 0)]
    best = _forced(4, [0, 1, 2, 3], kids, {}, {0: 0, 1: 1, 2: 2, 3: 3})
    assert best == [0, 1, 2, 3]
    with pytest.raises(RuntimeError, match="no finite extraction"):
        _emit(fake_nodes(labels, kids, {0: 3}, {0: 0}), best, tables(), [0], 1, None, dedup=False)


def random_egraph(rng: random.Random) -> tuple[int, list[int], list[tuple[int, ...]]]:
    """Classes with one to three e-nodes of arity 0-3, operands mostly earlier classes,
    sometimes any class (cycles, self-loops); rows shuffled."""
    n_cls = rng.randrange(3, 60)
    node_cls, kids = [], []
    for c in range(n_cls):
        for _ in range(1 if c < 3 else rng.choice((1, 1, 2, 3))):
            node_cls.append(c)
            hi = n_cls if rng.random() < 0.15 else c
            kids.append(tuple(rng.randrange(hi) for _ in range(rng.choice((0, 1, 2, 2, 3)) if c >= 3 else 0)))
    order = list(range(len(node_cls)))
    rng.shuffle(order)
    return n_cls, [node_cls[k] for k in order], [kids[k] for k in order]


@pytest.mark.parametrize("seed", range(200))
def test_choice_has_the_least_tree_cost(seed):
    """Against the least fixpoint of cost(class) = min over its e-nodes of (weight + sum
    of operand sizes, 1 + max operand height), computed by plain iteration."""
    rng = random.Random(seed)
    n_cls, node_cls, kids = random_egraph(rng)
    weight = [0.0 if not ks and rng.random() < 0.5 else 1.0 for ks in kids]
    labels = [(rng.choice("ab"),) for _ in node_cls]  # ties between labels too
    inf = (float("inf"), 0)
    cost = [inf] * n_cls
    changed = True
    while changed:
        changed = False
        for k, (c, ks) in enumerate(zip(node_cls, kids, strict=True)):
            if any(cost[x] == inf for x in ks):
                continue
            ks = set(ks)
            cand = (weight[k] + sum(cost[x][0] for x in ks), 1 + max((cost[x][1] for x in ks), default=-1))
            if cand < cost[c]:
                cost[c], changed = cand, True
    best, _, _ = _choose(n_cls, node_cls, labels.__getitem__, kids, weight)
    for c in range(n_cls):
        if cost[c] == inf:
            assert best[c] == -1
            continue
        ks = set(kids[best[c]])
        assert node_cls[best[c]] == c and c not in ks
        assert (weight[best[c]] + sum(cost[x][0] for x in ks), 1 + max((cost[x][1] for x in ks), default=-1)) == cost[c]
