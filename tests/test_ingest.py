"""Loading a graph into the e-graph: guard facts only where the rules can use them."""

from __future__ import annotations

from tidu import Aval, FragmentBuilder, resolve
from tidu.ops.catalog import catalog
from tidu.ops.dsl.to_egglog import compile_rewrites, compiled_rules
from tidu.ops.reference import evaluate as reference_evaluate
from tidu.simplify.dag import collect
from tidu.simplify.egraph.ingest import Ingest, exact_class_guards

R = Aval((), "float64")


def graph_of_products():
    """sqrt(x*y) * 0 and exp(x) * y: operands at sites of exact guards (finite, on mul)
    and of real-only ones (real and positive on mul operands, real on exp's)."""
    b = FragmentBuilder("F")
    x, y = b.input("x", R), b.input("y", R)
    zero = b.constant(0.0)
    p = b.add_op("mul", [b.add_op("sqrt", [b.add_op("mul", [x, y])[0]])[0], zero])[0]
    q = b.add_op("mul", [b.add_op("exp", [x])[0], y])[0]
    keys = [b.output(p), b.output(q)]
    return collect(resolve(b.build()), keys)


def test_exact_guard_sites_are_those_of_the_exact_rewrites():
    cat = catalog()
    exact = exact_class_guards(cat)
    assert exact is exact_class_guards(cat)  # cached per catalog
    want = compile_rewrites(cat, [rw for rw in cat.all_rewrites() if rw.semantics == "exact"]).class_guards
    assert exact == want
    every = compiled_rules(cat).class_guards
    assert all(sites <= every[g] for g, sites in exact.items())
    assert exact != every  # the real rewrites ask more (real(x) at products...)


def test_an_exact_load_writes_no_facts_only_real_rules_ask():
    cat = catalog()
    rules = compiled_rules(cat)
    g = graph_of_products()
    everything = Ingest(g, cat, rules, reference_evaluate)
    exact = Ingest(g, cat, rules, reference_evaluate, semantics="exact")
    terms = {rel: rows for rel, rows in everything.rows.items() if not rel.startswith("g_")}
    assert {rel: rows for rel, rows in exact.rows.items() if not rel.startswith("g_")} == terms
    facts = {rel for rel in everything.rows if rel.startswith("g_")}
    assert {"g_real", "g_positive", "g_finite"} <= facts  # exp(x) is positive
    # exact rules only ask finite(x) of products' operands: the constant 0 here
    assert {rel for rel in exact.rows if rel.startswith("g_")} == {"g_finite"}
    zero = next(i for i, n in enumerate(exact.nodes) if n.op == "constant")
    assert exact.rows["g_finite"] == [str(zero)]


def test_commuted_sums_and_products_load_as_one_term():
    """y*x and x*y (and y+x, x+y) are one node in an exact build; the order the graph
    was written in is kept (x*2 still meets the one-sided rule x * 2 -> x + x)."""
    import numpy as np

    import tidu
    import tidu.numpy as tnp

    def f(x, y):
        return tnp.sin(x * y) + tnp.cos(y * x) + tnp.exp(x + y) * tnp.exp(y + x)

    view = tidu.make_graph(f)(0.3, 0.7)
    listing = str(view.graph)
    assert listing.count("mul %0 %1") == 1 and "mul %1 %0" not in listing
    assert listing.count("add %0 %1") == 1 and "add %1 %0" not in listing
    assert "sin %2" in listing and "cos %2" in listing and "mul %7 %7" in listing
    assert view.ops_after == 8  # mul, sin, cos, add, add, exp, mul, add
    want = np.sin(0.21) + np.cos(0.21) + np.exp(1.0) ** 2
    assert abs(tidu.jit(f)(0.3, 0.7) - want) < 1e-12

    g = tidu.make_graph(lambda x: x * 2.0)(0.5).graph
    assert [n.op for n in g.nodes if n.op is not None] == ["add"]  # x + x, as before


def test_the_finite_guard_reads_one_value_of_a_splat_and_none_of_an_identity():
    """finite(x) of a large splat reads its one value, not its broadcast view, and of an
    identity basis (zeros and ones) nothing: scanning the 10^9-element splat in the
    Hessian of a 1030-element Rosenbrock function took seconds."""
    import numpy as np

    from tidu.core.keys import Literal
    from tidu.ops.dsl.guards import is_finite

    shape = (1000, 1000, 1000)
    big = Aval(shape, "float64")
    assert is_finite("constant", {"value": Literal.filled(2.5, shape, "float64")}, big)
    assert not is_finite("constant", {"value": Literal.filled(np.inf, shape, "float64")}, big)
    assert not is_finite("constant", {"value": Literal.filled(np.nan, shape, "complex128")},
                         Aval(shape, "complex128"))
    basis = Literal.identity(4000, (4000, 4000), "float64")
    assert is_finite("constant", {"value": basis}, Aval((4000, 4000), "float64"))
    assert basis._array is None  # never made
    small = Aval((3,), "float64")
    assert is_finite("constant", {"value": Literal(np.array([1.0, -0.0, 3.0]))}, small)
    assert not is_finite("constant", {"value": Literal(np.array([1.0, np.nan, 3.0]))}, small)
    assert not is_finite("sin", {}, small)
    assert is_finite("sin", {}, Aval((3,), "int32"))
