"""An exact build whose graph gives the rewrites nothing to match skips the e-graph
(tidu.simplify.egraph.prematch): it must give the very graph the e-graph gives, and only where
the e-graph would match nothing."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tidu
import tidu.numpy as tnp
import tidu.simplify.egraph as egraph
from tidu.ops.catalog import catalog
from tidu.ops.dsl.ast import show
from tidu.ops.dsl.to_egglog import rule_name
from tidu.simplify.egraph import prematch

UNARY = ["sin", "exp", "tanh", "neg", "cos"]
BINARY = ["add", "sub", "mul", "div"]
CONSTANTS = [1.0, -1.0, 0.0, 2.0, 0.5, 3.0]


def random_function(seed: int, depth: int = 5):
    """A random scalar expression of two inputs over ops the exact rules talk about, with
    the constants their patterns name (1, -1, 0, 2) among others."""
    rng = random.Random(seed)

    def expr(d):
        r = rng.random()
        if d == 0 or r < 0.2:
            return rng.choice(["x", "y", "x", "y", "c"])
        if r < 0.45:
            return (rng.choice(UNARY), expr(d - 1))
        return (rng.choice(BINARY), expr(d - 1), expr(d - 1))

    tree = expr(depth)
    consts = [rng.choice(CONSTANTS) for _ in range(64)]

    def f(x, y):
        it = iter(consts)

        def ev(t):
            if t == "x":
                return x
            if t == "y":
                return y
            if t == "c":
                return next(it) * tnp.ones_like(x)
            if len(t) == 2:
                a = ev(t[1])
                return -a if t[0] == "neg" else getattr(tnp, t[0])(a)
            a, b = ev(t[1]), ev(t[2])
            return {"add": a + b, "sub": a - b, "mul": a * b, "div": a / b}[t[0]]
        return ev(tree)
    return f


NO_CHANGE = {rule_name(rw.loc) for rw in catalog().all_rewrites()
             if prematch.is_doubling(rw) or prematch.loaded_as_one(rw)}


def build(fun, *args, fast: bool):
    tidu.clear_trace_cache()  # built again, not served from a cache
    tidu.clear_cache()
    with pytest.MonkeyPatch.context() as mp:
        if not fast:
            mp.setattr(egraph, "shortcut", lambda dag, cat, dfs, doubling=True: None)
        return tidu.make_graph(fun)(*args).graph


def check_same(fun, *args) -> bool:
    """Builds ``fun`` with and without the shortcut; returns whether it was taken."""
    fast = build(fun, *args, fast=True)
    full = build(fun, *args, fast=False)
    skipped = fast.stats["iterations"] == 0
    if skipped:  # the e-graph changed nothing: it matched nothing but a doubling (x + x ->
        # 2 * x beside no 2 * x) or a swap of a sum's or product's operands (merge rules)
        assert set(full.stats["rule_matches"]) <= NO_CHANGE, full.stats["rule_matches"]
    if len(fast.nodes) <= prematch.DFS_MAX or not skipped:
        assert fast.listing() == full.listing()  # listed as extraction lists them
    else:  # listed in the traced order: the same nodes
        assert fast.op_histogram() == full.op_histogram()
        assert len(fast.nodes) == len(full.nodes)
        ins = [np.asarray(a, dtype=np.float64) for a in args]
        got = tidu.compile(fast).eval(ins)
        want = tidu.compile(full).eval(ins)
        assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
    return skipped


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6))
def test_shortcut_only_where_the_rules_match_nothing(seed):
    f = random_function(seed)
    x, y = np.float64(0.3), np.float64(0.7)
    check_same(f, x, y)
    check_same(tidu.grad(f, argnums=(0, 1)), x, y)


def test_large_gradient_takes_the_shortcut():
    """A long chain's gradient (past PUSH_FROM): once its negations and products by one are
    pushed, no rule matches; the graph is the e-graph's, op for op."""
    def chain(x):
        y = x
        for i in range(800):
            k = i % 4
            y = tnp.sin(y) if k == 0 else y * x if k == 1 else 0.5 * y if k == 2 else tnp.exp(y)
        return y

    g = tidu.grad(chain)
    assert check_same(g, 0.4)
    # grad(grad): its sums x + x become 2 * x in the pass (a rule's form), then nothing matches
    assert check_same(tidu.grad(g), 0.4)
    # the Hessian (forward over reverse): u*v and v*u both appear; one node, then as above
    assert check_same(tidu.hessian(chain), 0.4)
    assert tidu.make_graph(g)(0.4).graph.stats["rule_matches"] == {}
    got = tidu.jit(g)(0.4)
    h = 1e-6
    want = (tidu.jit(chain)(0.4 + h) - tidu.jit(chain)(0.4 - h)) / (2 * h)
    assert abs(got - want) < 1e-6 * max(1.0, abs(want))


def test_patterns_cover_every_exact_rewrite():
    cat = catalog()
    pats = prematch.exact_patterns(cat)
    assert pats is not None
    exact = [rw for rw in cat.all_rewrites() if rw.semantics == "exact" and not rw.by_normalizer]
    # the merge rules swapping a sum's or a product's operands match nothing on a loaded
    # graph (ingest loads both orders as one term); every other rewrite is matched
    swaps = [rw for rw in exact if prematch.loaded_as_one(rw)]
    assert sorted(show(rw.lhs) for rw in swaps) == ["add(x, y)", "mul(x, y)"]
    assert sum(len(v.patterns) for v in pats.values()) == len(exact) - 2


def test_a_match_is_seen():
    """maximum(x, x) (which the negation pass leaves to the rules) is a match."""
    g = build(lambda x: tnp.maximum(tnp.sin(x), tnp.sin(x)), 0.3, fast=True)
    assert g.stats["iterations"] >= 1 and g.op_count == 1


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6))
def test_pushed_dags_need_no_class_mirror(seed):
    """After the negation pass (which merges commuted adds and products), each kept node
    is an e-class of its own: the shortcut on the nodes gives what the class mirror
    gives (same graph, or both None)."""
    from tidu.simplify.dag import Collected
    from tidu.simplify.egraph.negation import push

    f = random_function(seed, depth=6)
    pats = prematch.exact_patterns(catalog())
    for fun in (f, tidu.grad(f, argnums=(0, 1))):
        graph = tidu.make_graph(fun, simplify=False)(np.float64(0.3), np.float64(0.7)).graph
        dag = push(Collected.of(graph))
        if not dag.commuted_merged:
            continue
        classes = prematch._Classes(dag)
        want = None if not classes.ok or classes.could_rewrite(pats, dag) else classes.emit(dag, False)
        got = prematch.shortcut(dag, catalog(), dfs=False)
        assert (got is None) == (want is None)
        if got is not None:
            assert got.listing() == want.listing()


def test_chain_gradients_take_the_node_shortcut():
    from tidu.simplify.dag import Collected
    from tidu.simplify.egraph.negation import push

    def chain(x):
        y = x
        for i in range(600):
            y = tnp.sin(y) if i % 3 == 0 else y * x if i % 3 == 1 else tnp.cos(y) * 0.5
        return y

    for fun in (tidu.grad(chain), tidu.grad(tidu.grad(chain)), tidu.hessian(chain)):
        graph = tidu.make_graph(fun, simplify=False)(0.4).graph
        dag = push(Collected.of(graph))
        assert dag.commuted_merged
        fast = prematch._pushed_shortcut(dag, prematch.exact_patterns(catalog()))
        assert isinstance(fast, tidu.MaterializedGraph)
        assert check_same(fun, 0.4)


def test_vector_gradients_decide_identity_guards_and_take_the_shortcut():
    """A vector program's gradient has sums, broadcasts, slices and pads, whose rules
    (``reduce_sum(x) -> x when identity(self)``...) only fire on identities, which AD
    never emits: decided on the nodes, as egglog decides them, they match nothing, and
    the shortcut gives the e-graph's graph."""
    def f(x):
        y = x
        for i in range(40):
            y = tnp.tanh(y) * 0.5 - y * tnp.sum(y) * 0.01 if i % 2 else -tnp.sin(y) - y * x
        return tnp.sum(y * y[::-1]) + y[0]

    x = np.linspace(-0.9, 0.8, 8)
    assert check_same(tidu.grad(f), x)
    assert check_same(tidu.grad(lambda x: tnp.sum(tidu.grad(f)(x))), x)


def test_fold_constants_gives_the_nodes_ingest_would_load():
    """Ops of constants become constants, equal splats one node, and the nodes that then
    have the same operands one node: x*(1*0.5) + x*0.5 is (x*0.5) + (x*0.5)."""
    from tidu.core.graph import MaterializedGraph, MNode
    from tidu.core.keys import NO_ATTRS, Attrs, Aval, Literal, input_key
    from tidu.ops.reference import evaluate
    from tidu.simplify.dag import Collected
    from tidu.simplify.egraph.constfold import fold_constants

    f64 = Aval((), "float64")

    def const(v):
        return MNode("constant", Attrs(value=Literal(np.array(v))), (), f64)

    nodes = [MNode(None, NO_ATTRS, (), f64, input_key("x")), const(1.0), const(0.5),
             MNode("mul", NO_ATTRS, (1, 2), f64), MNode("mul", NO_ATTRS, (0, 3), f64), const(0.5),
             MNode("mul", NO_ATTRS, (0, 5), f64), MNode("add", NO_ATTRS, (4, 6), f64)]
    dag = fold_constants(Collected.of(MaterializedGraph(nodes, [0], [7])), evaluate)
    g = dag.graph()
    assert [n.op for n in g.nodes] == [None, "constant", "mul", "add"]
    assert g.nodes[3].inputs == (2, 2) and float(g.nodes[1].attrs["value"].array) == 0.5
    got = tidu.compile(g).eval([np.float64(3.0)])[0]
    assert got == 3.0
    # a node made equal to a later one (x * 0.5' becomes x * 0.5, which comes after it):
    # the later one is the earlier
    later = [MNode(None, NO_ATTRS, (), f64, input_key("x")), const(0.5), const(0.5),
             MNode("mul", NO_ATTRS, (0, 2), f64), MNode("mul", NO_ATTRS, (0, 1), f64),
             MNode("add", NO_ATTRS, (3, 4), f64)]
    g = fold_constants(Collected.of(MaterializedGraph(later, [0], [5])), evaluate).graph()
    assert [n.op for n in g.nodes] == [None, "constant", "mul", "add"] and g.nodes[3].inputs == (2, 2)
    # nothing to do: the same object, nothing kept aside
    plain = Collected.of(MaterializedGraph(nodes[:1] + [const(2.0), MNode("mul", NO_ATTRS, (0, 1), f64)], [0], [2]))
    assert fold_constants(plain, evaluate) is plain and plain.keep is None


def test_folded_constants_equal_to_others_are_one_node_after_the_pass():
    """1 + 1 folds to the 2 the graph also has, and x * 2 and 2 * x then have one operand
    pair: one node of the 2, the first, which its identity names too, so the doubling
    the negation pass writes (2 * m, for m + m) reads that node, not the other 2 again,
    and the pushed DAG takes the node shortcut (two nodes of one term would send it to
    the class mirror)."""
    from tidu.core.graph import MaterializedGraph, MNode
    from tidu.core.keys import NO_ATTRS, Attrs, Aval, Literal, input_key

    f64 = Aval((), "float64")

    def const(v):
        return MNode("constant", Attrs(value=Literal(np.array(v))), (), f64)

    nodes = [MNode(None, NO_ATTRS, (), f64, input_key("x")), const(1.0), MNode("add", NO_ATTRS, (1, 1), f64),
             const(2.0), MNode("sin", NO_ATTRS, (0,), f64), MNode("mul", NO_ATTRS, (2, 4), f64),
             MNode("mul", NO_ATTRS, (4, 3), f64), MNode("add", NO_ATTRS, (5, 6), f64)]
    g = _one_constant_node_and_the_node_shortcut(MaterializedGraph(nodes, [0], [7]))
    assert tidu.compile(g).eval([np.float64(0.3)])[0] == 4 * np.sin(0.3)


def _one_constant_node_and_the_node_shortcut(graph):
    """``graph`` folded and pushed, asserting it keeps one node of its one constant term and
    takes the node shortcut (two nodes of a term would send it to the class mirror); the
    shortcut's graph."""
    from tidu.ops.reference import evaluate
    from tidu.simplify.dag import Collected
    from tidu.simplify.egraph.constfold import fold_constants
    from tidu.simplify.egraph.negation import push

    dag = push(fold_constants(Collected.of(graph), evaluate), doubling=True, zeros=True)
    kept = [i for i, k in enumerate(dag.keep) if k]
    assert [dag.idents[i][0] for i in kept].count("constant") == 1
    g = prematch._pushed_shortcut(dag, prematch.exact_patterns(catalog()))
    assert isinstance(g, tidu.MaterializedGraph)
    return g


def test_a_node_made_equal_to_a_folded_constant_is_that_constant():
    """1 * 0.5 (the 1 a reshape of [1.0]) is congruent with a later 1 * 0.5 and folds to
    a 0.5 the graph has: the later node is the first 0.5, not the folded node that is no
    longer a node of its own. (Before, the graph kept two nodes of the term 0.5, and the
    pushed DAG went to the class mirror, several times slower on large graphs.)"""
    from tidu.core.graph import MaterializedGraph, MNode
    from tidu.core.keys import NO_ATTRS, Attrs, Aval, Literal, input_key

    f64, v1 = Aval((), "float64"), Aval((1,), "float64")

    def const(v, aval=f64):
        return MNode("constant", Attrs(value=Literal(np.array(v))), (), aval)

    nodes = [const(1.0), MNode(None, NO_ATTRS, (), f64, input_key("x")), const([1.0], v1),
             MNode("reshape", Attrs(shape=()), (2,), f64), const(0.5), MNode("mul", NO_ATTRS, (3, 4), f64),
             MNode("mul", NO_ATTRS, (0, 4), f64), MNode("sin", NO_ATTRS, (1,), f64),
             MNode("mul", NO_ATTRS, (6, 7), f64), MNode("mul", NO_ATTRS, (4, 1), f64),
             MNode("add", NO_ATTRS, (8, 9), f64)]
    g = _one_constant_node_and_the_node_shortcut(MaterializedGraph(nodes, [1], [10]))
    assert tidu.compile(g).eval([np.float64(0.3)])[0] == 0.5 * np.sin(0.3) + 0.5 * 0.3


def test_equal_literals_are_one_node():
    """Not only splats: an op of constants that folds to a literal the graph has is that
    node (one term in the e-graph too), and so are the nodes that then read it."""
    from tidu.core.graph import MaterializedGraph, MNode
    from tidu.core.keys import NO_ATTRS, Attrs, Aval, Literal, input_key
    from tidu.ops.reference import evaluate
    from tidu.simplify.dag import Collected
    from tidu.simplify.egraph.constfold import fold_constants

    v2 = Aval((2,), "float64")
    c = MNode("constant", Attrs(value=Literal(np.array([1.0, 2.0]))), (), v2)
    nodes = [MNode(None, NO_ATTRS, (), v2, input_key("x")), c, MNode("neg", NO_ATTRS, (1,), v2),
             MNode("neg", NO_ATTRS, (2,), v2), MNode("mul", NO_ATTRS, (0, 1), v2), MNode("mul", NO_ATTRS, (0, 3), v2),
             MNode("sub", NO_ATTRS, (4, 5), v2)]
    g = fold_constants(Collected.of(MaterializedGraph(nodes, [0], [6])), evaluate).graph()
    assert [n.op for n in g.nodes] == [None, "constant", "mul", "sub"] and g.nodes[3].inputs == (2, 2)


def test_a_doubling_alone_does_not_need_the_egraph():
    """In a small exact graph the negation pass leaves x + x, and writes x * 2 as x + x
    (the rule x * 2 -> x + x, as extraction keeps it); the doubling rule would only put a
    dearer 2 * x beside it, so the shortcut is taken and gives the e-graph's graph. An
    x + x beside a 2 * x becomes one node (the CSE the rules would make)."""
    def alone(x):
        s = tnp.sin(x)
        return tnp.exp(s + s)

    assert check_same(alone, 0.3)

    def beside(x):
        s = tnp.sin(x)
        return (s + s) * tnp.exp(2.0 * s)

    assert check_same(beside, 0.3)
    g = build(beside, 0.3, fast=True)
    assert g.op_histogram() == {"sin": 1, "add": 1, "exp": 1, "mul": 1}
    assert tidu.compile(g).eval([np.float64(0.3)])[0] == 2 * np.sin(0.3) * np.exp(2 * np.sin(0.3))


def test_a_users_doubling_leaves_a_small_hessian_to_the_shortcut():
    """``2.0 * x`` in the program: its Hessian (pads, slices, tanh) used to reach the
    e-graph for ``x * 2 -> x + x`` alone; the negation pass now writes the sum, and the
    graph is the one the e-graph gives."""
    def band(x):
        return tnp.sum(tnp.tanh(x[2:] - 2.0 * x[1:-1] + x[:-2]) ** 2)

    x = np.linspace(-1.2, 1.1, 12)
    assert check_same(tidu.hessian(band), x)
    assert check_same(tidu.grad(band), x)
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    want = jax.hessian(lambda x: jax.numpy.sum(jax.numpy.tanh(x[2:] - 2.0 * x[1:-1] + x[:-2]) ** 2))(x)
    np.testing.assert_allclose(tidu.hessian(band)(x), np.asarray(want), rtol=1e-13, atol=1e-13)


def test_swapped_sums_of_equal_classes_are_one_class():
    """A forward-over-forward Hessian has (a + b) and (b + a) with a, b equal classes but
    distinct nodes: the merge rule makes them one class, and so does the mirror (20 ops,
    as the e-graph gives, not 21)."""
    def rosen(x):
        return tnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    assert check_same(tidu.hessian(rosen, mode="FoF"), np.linspace(0.5, 1.5, 4))


def test_a_large_broadcast_of_a_constant_matrix_is_mirrored():
    """A forward-over-forward Hessian broadcasts an identity matrix to n x n x n: past
    fold_node's limits ingest loads that broadcast as it is (only a splat's becomes a
    Const), so the mirror takes it as a node, and the shortcut applies."""
    def f(x):
        return tnp.sum(x ** 4) + tnp.sum(tnp.sin(x)) ** 2

    x = np.linspace(-1.2, 1.1, 20)
    assert check_same(tidu.hessian(f, mode="FoF"), x)
    assert check_same(tidu.hessian(f, mode="RoF"), x)


def test_a_doubled_large_splat_constant_goes_to_the_egraph():
    """1 + 1 over 200 x 200 (too large for constfold) is 2 * 1 for the doubling rule,
    which the rules of constants fold to 2: a change, so the e-graph runs (and the graph
    has the folded constant)."""
    def f(x):
        return tnp.sum(x ** 4) + tnp.sum(x) ** 2

    x = np.linspace(-1.2, 1.1, 200)
    assert not check_same(tidu.hessian(f, mode="FoF"), x)


def test_selects_that_constants_decide_are_folded_before_the_shortcut():
    """select(p, x, x) is x, and a select of a constant predicate its branch: logaddexp(0, z)
    tests ``0 == z and |0| == inf`` (a constant false), whose gradient and Hessian used to
    reach the e-graph for ``select(p, 0, 0)`` alone."""
    def softplus(z):
        return tnp.sum(tnp.logaddexp(0.0, z) - 2.0 * z)

    z = np.linspace(-0.9, 1.3, 6)
    assert check_same(tidu.grad(softplus), z)
    assert check_same(tidu.hessian(softplus), z)
    s = 1 / (1 + np.exp(-z))
    np.testing.assert_allclose(tidu.grad(softplus)(z), s - 2.0, rtol=1e-15)
    np.testing.assert_allclose(tidu.hessian(softplus)(z), np.diag(s * (1 - s)), rtol=1e-14, atol=1e-300)


def test_fold_constants_forwards_selects():
    from tidu.core.graph import MaterializedGraph, MNode
    from tidu.core.keys import NO_ATTRS, Attrs, Aval, Literal, input_key
    from tidu.ops.reference import evaluate
    from tidu.simplify.dag import Collected
    from tidu.simplify.egraph.constfold import fold_constants

    v2, b2 = Aval((2,), "float64"), Aval((2,), "bool")
    nodes = [MNode(None, NO_ATTRS, (), v2, input_key("x")), MNode(None, NO_ATTRS, (), v2, input_key("y")),
             MNode(None, NO_ATTRS, (), b2, input_key("p")),
             MNode("constant", Attrs(value=Literal(np.array([False, False]))), (), b2),
             MNode("select", NO_ATTRS, (2, 0, 0), v2),  # x
             MNode("select", NO_ATTRS, (3, 0, 1), v2),  # false: y
             MNode("select", NO_ATTRS, (2, 4, 5), v2)]  # select(p, x, y): kept
    g = fold_constants(Collected.of(MaterializedGraph(nodes, [0, 1, 2], [6])), evaluate).graph()
    assert [n.op for n in g.nodes].count("select") == 1
    sel = next(n for n in g.nodes if n.op == "select")
    assert [g.nodes[k].op for k in sel.inputs] == [None, None, None]
    x, y, p = np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array([True, False])
    assert np.array_equal(tidu.compile(g).eval([x, y, p])[0], np.where(p, x, y))
