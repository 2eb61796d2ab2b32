"""The rule DSL: grammar, checks against the catalog, and error locations."""

import pytest

from tidu.ops.catalog import builtin_rule_files, catalog, load_catalog, use_catalog
from tidu.ops.dsl.ast import Call, Loc, Num, RuleSyntaxError, Var, show
from tidu.ops.dsl.parse import parse_rules


def load_extra(text: str, path: str = "extra.rules"):
    return load_catalog(builtin_rule_files() + [(path, text)])


def error_of(text: str, path: str = "extra.rules") -> str:
    with pytest.raises(RuleSyntaxError) as info:
        load_extra(text, path)
    return str(info.value)


def test_builtin_catalog_loads_every_primitive():
    cat = catalog()
    declared = [line for _, text in builtin_rule_files() for line in text.splitlines()
                if line.startswith("primitive ")]
    assert len(cat) == len(declared) >= 45
    mul = cat["mul"]
    assert mul.operands == ("x", "y") and set(mul.transpose) == {"x", "y"}
    assert show(mul.jvp["x"].template) == "mul(dx, y)"
    assert mul.decl.doc.startswith("Multiplication.")


def test_infix_precedence_and_literals():
    rf = parse_rules("primitive f(x, y)\n    type elementwise\n    jvp: -dx * y ** 2 + 0.5 / x - 1j\n")
    t = rf.primitives[0].jvps[0].template
    assert show(t) == "sub(add(mul(neg(dx), pow(y, 2)), div(0.5, x)), 1j)"
    assert isinstance(t, Call) and isinstance(t.args[1], Num) and t.args[1].value == 1j


def test_attributes_and_variadic_operands_parse():
    rf = parse_rules("primitive cat(xs...)[axis]\n    type concatenate\n"
                     "    transpose xs[i]: slice(ct)[start=f(i, axis, shapes(xs)), limit=(1, -2), strides=()]\n")
    p = rf.primitives[0]
    assert p.variadic and p.attrs == ("axis",)
    call = p.transposes[0].template
    assert [k for k, _ in call.attrs] == ["start", "limit", "strides"]


def test_rewrite_with_guards_parses():
    rf = parse_rules("rewrite x * 0 -> 0 when finite(x), real(x)\n")
    (rw,) = rf.rewrites
    assert isinstance(rw.lhs, Call) and isinstance(rw.lhs.args[0], Var)
    assert [g.name for g in rw.guards] == ["finite", "real"]


def test_merge_rewrites_match_their_replacement():
    """``merge`` rewrites apply only where the replacement exists: it is part of the
    query, the rule adds no e-node (the merging ruleset), and it keeps its semantics."""
    from tidu.ops.dsl.to_egglog import GROW, compile_rewrites

    rf = parse_rules("rewrite merge: x + y -> y + x\nrewrite real merge: x * y -> y * x\n")
    assert [(rw.merge, rw.semantics) for rw in rf.rewrites] == [(True, "exact"), (True, "real")]
    rules = compile_rewrites(catalog(), list(rf.rewrites))
    for text, ruleset in zip(rules.rules, rules.rulesets, strict=True):
        assert "(= _merged (op_add" in text or "(= _merged (op_mul" in text
        assert "((union _root _merged))" in text and not ruleset.endswith(GROW)
    plain = compile_rewrites(catalog(), list(parse_rules("rewrite x + y -> y + x\n").rewrites))
    assert plain.rulesets[0].endswith(GROW) and "_merged" not in plain.rules[0]
    with pytest.raises(RuleSyntaxError, match="either a 'normalizer' law or a 'merge' rule"):
        parse_rules("rewrite real normalizer merge: x + y -> y + x\n")
    with pytest.raises(RuleSyntaxError, match="known: exact, real, normalizer, merge"):
        parse_rules("rewrite merged: x + y -> y + x\n")


@pytest.mark.parametrize("text,where,what", [
    ("primitive f(x\n", "2:1", "expected ',' or ')'"),
    ("primitive f(x)\n    type elementwise\n    jvp x dx\n", "3:11", "expected ':' before the template"),
    ("primitive f(x)\n    typo elementwise\n", "2:5", "expected a clause"),
    ("primitive f(x)\n    jvp: (dx + \n", "3:1", "expected an expression"),
    ("  primitive f(x)\n", "1:3", "unexpected indentation"),
    ("primitive f(x)\n    jvp: dx $ 2\n", "2:13", "unexpected character '$'"),
    ("rewrite x * 1 x\n", "1:15", "expected '->'"),
])
def test_parse_errors_name_file_line_col(text, where, what):
    with pytest.raises(RuleSyntaxError) as info:
        parse_rules(text, "bad.rules")
    msg = str(info.value)
    assert msg.startswith(f"bad.rules:{where}: ") and what in msg


BASE = "primitive twice(x)\n    type elementwise\n    dtypes inexact\n"


@pytest.mark.parametrize("body,where,what", [
    ("    jvp: frob(dx)\n", "4:10", "unknown primitive 'frob'"),
    ("    jvp: dz * 2\n", "4:10", "unknown name 'dz' in the jvp of twice"),
    ("    jvp: add(dx)\n", "4:10", "add takes 2 operand(s), got 1"),
    ("    transpose x: x * ct\n", "4:18", "unknown name 'x' in the transpose of twice for x"),
    ("    jvp: reduce_sum(dx)[axes=nope(1)]\n", "4:30", "unknown attribute function 'nope'"),
    ("    jvp: reduce_sum(dx)\n", "4:10", "reduce_sum needs attribute(s) axes"),
    ("    rewrite twice(x) -> y\n", "4:25", "'y' is not bound by the pattern"),
    ("    rewrite twice(x) -> x when sunny(x)\n", "4:32", "unknown guard 'sunny'"),
    ("    jvp y: dx\n", "4:5", "twice has no operand 'y'"),
])
def test_check_errors_name_file_line_col(body, where, what):
    msg = error_of(BASE + body)
    assert msg.startswith(f"extra.rules:{where}: ") and what in msg


def test_declaration_errors():
    assert "needs a 'type' clause" in error_of("primitive f(x)\n    jvp: dx\n")
    assert "unknown type rule 'shapeless'" in error_of("primitive f(x)\n    type shapeless\n")
    assert "unknown dtype class 'floaty'" in error_of("primitive f(x)\n    type elementwise\n    dtypes floaty\n")
    msg = error_of("primitive exp(x)\n    type elementwise\n")
    assert "already declared at rules/transcendental.rules:" in msg


def test_a_new_primitive_is_usable_by_linearize():
    import tidu
    from tidu.core.keys import Aval

    text = ("# Square.\nprimitive square(x)\n    type elementwise\n    dtypes inexact\n"
            "    meaning x * x\n    jvp: 2 * x * dx\n    rewrite square(-x) -> square(x)\n")
    with use_catalog(load_extra(text, "square.rules")):
        b = tidu.FragmentBuilder()
        x = b.input("x", Aval((), "float64"))
        y = b.output(b.add_op("square", [x])[0])
        lin = tidu.passes.linearize(tidu.resolve(b.build()), [y], ["x"])
        assert [n.op for n in lin.fragment.ops] == ["constant", "mul", "mul"]
        t = tidu.passes.linear_transpose(lin)
        assert t.tangent_outputs[0] is not None


def test_use_catalog_restores_the_active_catalog_also_on_error():
    builtin = catalog()
    extra = load_extra("# Square.\nprimitive square(x)\n    type elementwise\n")
    with pytest.raises(RuntimeError), use_catalog(extra) as active:
        assert active is extra and catalog() is extra
        with use_catalog(builtin):
            assert catalog() is builtin
        assert catalog() is extra
        raise RuntimeError
    assert catalog() is builtin


def test_rule_caches_follow_the_active_catalog():
    """Two catalogs declare ``pick`` alike but only one has the zero rewrite
    ``pick(x, 0) -> x``: linearizing in x alone drops the zero tangent of y only there."""
    import tidu
    from tidu.core.keys import Aval

    text = ("# Pick.\nprimitive pick(x, y)\n    type elementwise\n    dtypes inexact\n"
            "    meaning x + y\n    jvp: pick(dx, dy)\n")
    plain, with_rule = load_extra(text), load_extra(text + "    rewrite pick(x, 0) -> x\n")

    def tangent_ops(cat):
        with use_catalog(cat):
            b = tidu.FragmentBuilder()
            x, y = b.input("x", Aval((), "float64")), b.input("y", Aval((), "float64"))
            out = b.output(b.add_op("pick", [x, y])[0])
            return [n.op for n in tidu.passes.linearize(tidu.resolve(b.build()), [out], ["x"]).fragment.ops]

    for _ in range(2):  # either order: nothing cached under one catalog leaks into the other
        assert "pick" not in tangent_ops(with_rule)
        assert "pick" in tangent_ops(plain)


# --- let and the matrix shorthands (desugared by the parser) ------------------------------

MATRIX = "primitive f(x, y)\n    type elementwise\n"
MM = "[lhs_contract=mm_lhs(rank(x)), rhs_contract=mm_rhs(rank(x)), lhs_batch=mm_batch(rank(x)), " \
     "rhs_batch=mm_batch(rank(x))]"


def templates(text: str) -> list[str]:
    p = parse_rules(text, "t.rules").primitives[0]
    return [show(r.template) for r in p.jvps + p.transposes]


def test_let_and_matrix_shorthands_desugar_to_the_written_out_templates():
    sugared = templates(MATRIX + "    let S = (dx + mH(dx)) * 0.5\n    let T = S @ mT(y)\n"
                                 "    jvp x:     T - S @ T\n    jvp y:     x @ mT(dy)\n"
                                 "    transpose y: mT(mH(x) @ ct)\n")
    written = templates(MATRIX
                        + "    jvp x:     dot_general((dx + conj(transpose(dx)[perm=mT(rank(x))])) * 0.5, "
                          "transpose(y)[perm=mT(rank(x))])" + MM
                        + " - dot_general((dx + conj(transpose(dx)[perm=mT(rank(x))])) * 0.5, "
                          "dot_general((dx + conj(transpose(dx)[perm=mT(rank(x))])) * 0.5, "
                          "transpose(y)[perm=mT(rank(x))])" + MM + ")" + MM + "\n"
                        + "    jvp y:     dot_general(x, transpose(dy)[perm=mT(rank(x))])" + MM + "\n"
                        + "    transpose y: transpose(dot_general(conj(transpose(x)[perm=mT(rank(x))]), ct)" + MM
                        + ")[perm=mT(rank(x))]\n")
    assert sugared == written
    # '@' is a product: as tight as '*' and '/', left to right; unary minus binds tighter
    (t,) = templates(MATRIX + "    jvp: -dx @ y * 2 + x @ dy\n")
    assert t.startswith("add(mul(dot_general(neg(dx), y)[") and ", dot_general(x, dy)[" in t


def test_matrix_shorthands_take_the_first_operands_rank():
    (t,) = templates("primitive g(a, b)[lower]\n    type linear_solve\n    jvp a: da @ out\n")
    assert t == "dot_general(da, out)" + MM.replace("rank(x)", "rank(a)")


def test_each_use_of_a_let_is_its_own_copy():
    p = parse_rules(MATRIX + "    let S = dx * y\n    jvp x: S + S\n    transpose x: ct\n", "t.rules").primitives[0]
    s1, s2 = p.jvps[0].template.args
    assert show(s1) == show(s2) == "mul(dx, y)" and s1 is not s2
    assert p.lets == {"S": Loc("t.rules", 3, 9)}


def test_builtin_linalg_rules_read_with_lets():
    """cholesky's jvp names L^-1 dS L^-H once (a let) and uses it twice: both copies equal."""
    t = catalog()["cholesky"].jvp[None].template
    assert t.fn == "dot_general" and [k for k, _ in t.attrs] == ["lhs_contract", "rhs_contract", "lhs_batch",
                                                                 "rhs_batch"]
    lower, strict = t.args[1].args[0].args
    assert show(lower.args[0]) == show(strict.args[0]) and "triangular_solve(out" in show(lower.args[0])


@pytest.mark.parametrize("body,where,what", [
    ("    let x = dy\n", "3:9", "let x clashes with an operand of f"),
    ("    let dy = x\n", "3:9", "let dy clashes with the tangent of operand y"),
    ("    let out = x\n", "3:9", "let out clashes with the primal output"),
    ("    let ct = x\n", "3:9", "let ct clashes with the output cotangent"),
    ("    let pi = x\n", "3:9", "let pi clashes with a named constant"),
    ("    let zero = x\n", "3:9", "let zero clashes with a reserved word"),
    ("    let mH = x\n", "3:9", "let mH clashes with a reserved word"),
    ("    let f = x\n", "3:9", "let f clashes with a primitive"),
    ("    let A = dx\n    let A = dy\n    jvp: A\n", "4:9", "let A clashes with the let at t.rules:3:9"),
    ("    let A = dx\n    jvp: dx\n", "3:9", "let A is never used"),
    ("    jvp: A\n    let A = dx\n", "3:10", "A is bound by the let at t.rules:4:9, after this use"),
    ("    let A = x\n    rewrite f(A, y) -> y\n    jvp: A\n", "4:15", "A is the let at t.rules:3:9: lets serve jvp"),
    ("    let A = dx +\n", "3:17", "expected an expression, found end of line"),
    ("    let = dx\n", "3:9", "expected the let's name"),
    ("    let A dx\n", "3:11", "expected '=' after the let's name"),
    ("    meaning x @ y\n", "3:15", "'@' (the matrix product) belongs in jvp and transpose templates"),
    ("    rewrite mT(x) -> x\n", "3:13", "mT(...) (the matrix transpose) belongs in jvp and transpose"),
    ("    jvp: mT(dx)[perm=(1, 0)]\n", "3:16", "mT(...) takes no attributes"),
    ("    jvp: mH(dx, dy)\n", "3:15", "expected ')': mH takes one matrix"),
])
def test_let_and_shorthand_errors_name_file_line_col(body, where, what):
    with pytest.raises(RuleSyntaxError) as info:
        parse_rules(MATRIX + body, "t.rules")
    msg = str(info.value)
    assert msg.startswith(f"t.rules:{where}: ") and what in msg


def test_let_and_shorthand_errors_that_need_the_catalog_or_the_declaration():
    assert "let a clashes with an attribute of g" in str(pytest.raises(
        RuleSyntaxError, parse_rules, "primitive g(x)[a]\n    type e\n    let a = dx\n    jvp: a\n").value)
    msg = str(pytest.raises(RuleSyntaxError, parse_rules,
                            "primitive g(xs...)\n    type e\n    jvp: mT(dxs)\n", "v.rules").value)
    assert msg.startswith("v.rules:3:10: ") and "first operand of g" in msg
    msg = str(pytest.raises(RuleSyntaxError, parse_rules, "primitive mH(x)\n    type e\n", "v.rules").value)
    assert msg.startswith("v.rules:1:1: ") and "matrix shorthand" in msg
    # a primitive of another file: the catalog refuses the let when it loads
    msg = error_of(BASE + "    let exp = dx * 2\n    jvp: exp\n")
    assert msg.startswith("extra.rules:4:9: let exp clashes with the primitive declared at rules/transcendental")
    # a let's names are checked where the let is used: dx means nothing in a transpose
    msg = error_of(BASE + "    let A = dx * 2\n    jvp: A\n    transpose x: A * ct\n")
    assert msg.startswith("extra.rules:4:13: ") and "unknown name 'dx' in the transpose of twice for x" in msg


def test_mutation_testing_mutates_let_lines_and_checks_the_rules_after_them(tmp_path):
    from tidu.checkrules._mutate import mutants

    (tmp_path / "m.rules").write_text("primitive f(x, y)\n    type elementwise\n    let S = dx * 2\n"
                                      "    jvp x:     S + mH(dx)\n    transpose x: ct\n\nprimitive g(x)\n"
                                      "    type elementwise\n    jvp:       dx\n")
    ms = mutants(tmp_path)
    on_let = [m for m in ms if m.line == 3]
    assert {m.operator for m in on_let} == {"constant"} and all(m.rule_lines == (4, 5) for m in on_let)
    assert any(m.operator == "drop-conj" and m.after == "jvp x:     S + mT(dx)" for m in ms)
    assert all(m.rule_lines == () for m in ms if m.line != 3)
