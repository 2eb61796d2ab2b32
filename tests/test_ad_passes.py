"""linearize and linear_transpose contracts beyond the golden values: aliases, eager
transposition through a caller's builder, symbolic zeros, and rule errors."""

import numpy as np
import pytest
from adutil import F64, build, evaluate, op

import tidu
from tidu import Aval, FragmentBuilder
from tidu.ops.catalog import builtin_rule_files, load_catalog, use_catalog
from tidu.trace.eager import EagerBuilder


def sin_exp():
    return build({"x": F64}, lambda b, x: op(b, "mul", op(b, "sin", x), op(b, "exp", x)))


def test_tangent_keys_are_fresh_and_nested():
    f, y = sin_exp()
    l1 = tidu.passes.linearize(tidu.resolve(f), [y], ["x"])
    l2 = tidu.passes.linearize(tidu.resolve(l1.fragment), l1.output_keys, ["x"])
    assert l1.pass_id != l2.pass_id
    (k1, _), = l1.tangent_inputs
    assert str(l1.input_keys[0].input) == f"x.t{l1.pass_id}" and str(k1) == "x"
    l3 = tidu.passes.linearize(tidu.resolve(l2.fragment), l2.output_keys, [l1.input_keys[0]])
    assert str(l3.input_keys[0].input) == f"x.t{l1.pass_id}.t{l3.pass_id}"


def test_linear_fragment_references_primal_values_externally():
    f, y = sin_exp()
    lin = tidu.passes.linearize(tidu.resolve(f), [y], ["x"])
    for node in lin.fragment.ops:
        for r in node.inputs:
            if isinstance(r, tidu.External):
                assert f.defines(r.key) or r.key.input is not None


def test_inactive_outputs_are_none_and_build_nothing():
    b = FragmentBuilder()
    x, a = b.input("x", F64), b.input("a", F64)
    y1 = b.output(op(b, "exp", a))
    y2 = b.output(op(b, "mul", x, a))
    f = b.build()
    lin = tidu.passes.linearize(tidu.resolve(f), [y1, y2], ["x"])
    assert lin.tangent_outputs[0] is None and lin.tangent_outputs[1] is not None
    assert [n.op for n in lin.fragment.ops] == ["mul"]


def test_aliases_bind_an_input_to_an_existing_value():
    # g(u) = u*u with u aliased to sin(x): d/dx = 2 sin(x) cos(x).
    b = FragmentBuilder("outer")
    x = b.input("x", F64)
    s = b.output(op(b, "sin", x))
    outer = b.build()
    inner, y = build({"u": F64}, lambda bb, u: op(bb, "mul", u, u), name="inner")
    view = tidu.resolve([outer, inner], aliases={"u": s})
    lin = tidu.passes.linearize(view, [y], ["x"])
    full = tidu.resolve([lin.fragment], aliases={"u": s})
    graph = tidu.materialize_merge(full, lin.output_keys)
    prog = tidu.compile(graph)
    assert {str(k) for k in graph.input_keys} == {"x", f"x.t{lin.pass_id}"}
    (v,) = prog.eval({"x": 0.4, f"x.t{lin.pass_id}": 1.0})
    assert v == pytest.approx(2 * np.sin(0.4) * np.cos(0.4), rel=1e-15)
    # The same aliases can be given to linearize directly.
    lin2 = tidu.passes.linearize(tidu.resolve([outer, inner]), [y], ["x"], aliases={"u": s})
    assert lin2.tangent_outputs[0] is not None


def test_eager_transpose_through_a_callers_builder():
    v = Aval((3,), "float64")
    f, y = build({"x": v, "a": v},
                 lambda b, x, a: op(b, "reduce_sum", op(b, "exp", op(b, "mul", x, a)), axes=(0,)))
    lin = tidu.passes.linearize(tidu.resolve(f), [y], ["x"])
    xv, av = np.array([0.1, 0.2, 0.3]), np.array([1.0, -2.0, 0.5])
    primal = tidu.compile(tidu.materialize_merge(tidu.resolve(f), list(_all_keys(f)), simplify=False))
    values = dict(zip(_all_keys(f), primal.eval({"x": xv, "a": av}), strict=True))
    values.update({k: {"x": xv, "a": av}[str(k.input)] for k in f.keys if k.input is not None})
    eager = EagerBuilder(lambda k: values[k], {tidu.Cotangent(99, 0): 2.0})
    t = tidu.passes.linear_transpose(lin, builder=eager, pass_id=99)
    assert t.fragment is None and eager.ops_run > 0
    (ct,) = t.tangent_outputs
    np.testing.assert_allclose(ct, 2.0 * av * np.exp(av * xv), rtol=1e-15)
    # Same numbers as the graph route.
    tg = tidu.passes.linear_transpose(lin)
    (ct2,), _ = evaluate(tg.fragment, tg.output_keys, {"x": xv, "a": av}, seed=2.0)
    np.testing.assert_array_equal(ct, ct2)


def _all_keys(frag):
    return [k for k in frag.keys if k.input is None]


def test_missing_rule_raises_ad_rule_error():
    # compare has no tangent; reduce_max is not linear, so it has no transpose rule.
    v = Aval((3,), "float64")
    f, y = build({"x": v}, lambda b, x: op(b, "reduce_max", x, axes=(0,)))
    lin = tidu.passes.linearize(tidu.resolve(f), [y], ["x"])
    b = FragmentBuilder()
    t = b.input("t", v)
    bad = b.output(b.add_op("reduce_max", [t], {"axes": (0,)}, tidu.Linearized([True]))[0])
    frag = b.build()
    fake = tidu.LinearizedGraph(frag, [(tidu.Named("t"), tidu.Local(0))], [tidu.Local(frag.index[bad])], 0)
    with pytest.raises(tidu.ADRuleError, match=r"reduce_max: transpose x: no transpose rule"):
        tidu.passes.linear_transpose(fake)
    assert lin.tangent_outputs[0] is not None


def test_differentiating_integer_inputs_is_an_error():
    f, y = build({"n": Aval((), "int64")}, lambda b, n: op(b, "mul", n, n))
    with pytest.raises(TypeError, match="cannot differentiate with respect to n of dtype int64"):
        tidu.passes.linearize(tidu.resolve(f), [y], ["n"])


def test_unresolvable_external_key_names_key_and_fragments():
    f, y = sin_exp()
    b = FragmentBuilder("G")
    z = b.output(op(b, "neg", tidu.External(y)))
    g = b.build()  # no parent: y's definition is not reachable
    with pytest.raises(tidu.UnresolvedKeyError, match=r"not defined by any fragment.*searched: G"):
        tidu.passes.linearize(tidu.resolve(g), [z], ["x"])


CUSTOM = """
# A primitive whose JVP is missing for one operand.
primitive half_mul(x, y)
    type       elementwise
    dtypes     inexact
    meaning    x * y
    jvp x:     dx * y
"""


def test_catalog_reports_missing_jvp_as_ad_rule_error():
    cat = load_catalog(builtin_rule_files() + [("custom.rules", CUSTOM)])
    with use_catalog(cat):
        f, y = build({"x": F64, "y": F64}, lambda b, x, yy: op(b, "half_mul", x, yy))
        with pytest.raises(tidu.ADRuleError, match=r"half_mul: jvp y: no JVP rule for operand 'y'"):
            tidu.passes.linearize(tidu.resolve(f), [y], ["x", "y"])
        lin = tidu.passes.linearize(tidu.resolve(f), [y], ["x"])
        assert lin.tangent_outputs[0] is not None


def test_fragment_ops_are_read_off_the_keys():
    # ops are made from the keys when first read: one node per op (a two-output op's
    # outputs together), operands Local when the fragment holds them, External otherwise
    from tidu.ops.catalog import INTERNAL, InternalPrimitive, register_internal
    if "test_two_outputs" not in INTERNAL:
        register_internal(InternalPrimitive("test_two_outputs", (), lambda avals, attrs: [avals[0], avals[0]],
                                            jvp=None, batch=None))
    f, s = sin_exp()
    b = FragmentBuilder("G")
    x = b.input("x", F64)
    p, q = b.add_op("test_two_outputs", [x])
    c = b.constant(2.0)
    z = op(b, "add", op(b, "mul", p, c), op(b, "mul", q, tidu.External(s)))
    b.output(z)
    g = b.build(parents=[f])
    got = [(n.op, n.inputs, n.outputs, str(n.role)) for n in g.ops]
    assert got == [
        ("test_two_outputs", (x,), (p.id, q.id), "Primary"),
        ("constant", (), (c.id,), "Primary"),
        ("mul", (p, c), (p.id + 3,), "Primary"),
        ("mul", (q, tidu.External(s)), (p.id + 4,), "Primary"),
        ("add", (tidu.Local(p.id + 3), tidu.Local(p.id + 4)), (z.id,), "Primary"),
    ]
    assert q.id == p.id + 1
    assert g.ops is g.ops  # made once
    assert "%1, %2 = test_two_outputs(%0)" in g.listing()
