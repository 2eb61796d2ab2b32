"""Operand names the rules give another meaning (out, ct, d<operand>) and primitives with
nothing to compute from are refused where they are declared: `primitive fo(out)` passed
the checker with `out` read as the output, and `primitive foo()` failed inside the
checker (IndexError) and at its first call (result_type of no operands)."""

from __future__ import annotations

import pytest

import tidu
import tidu.numpy
from tidu.ops.catalog import load_catalog
from tidu.ops.dsl.ast import RuleSyntaxError

BODY = "\n    type       elementwise\n    dtypes     float\n    meaning    {meaning}\n    jvp{which}:       {jvp}\n"
CASES = {
    "primitive fo(out)": ("exp(out)", "", "out * dout", "1:14: operand out of fo has a name the rules give to"),
    "primitive fc(ct, y)": ("ct * y", " y", "ct * dy", "1:14: operand ct of fc has a name"),
    "primitive g(x, dx)": ("x * dx", " x", "dx * dx", "1:16: operands x and dx of g: dx names the tangent"),
    "primitive h(dy, y)": ("dy * y", " y", "dy * dy", "1:17: operands dy and y of h: dy names the tangent"),
    "primitive foo()": ("1", "", "zero", "1:15: primitive foo has no operands and no attributes"),
}


@pytest.mark.parametrize("head", list(CASES))
def test_a_declaration_that_rules_cannot_read_is_refused_at_its_name(head: str) -> None:
    meaning, which, jvp, message = CASES[head]
    text = head + BODY.format(meaning=meaning, which=which, jvp=jvp)
    with pytest.raises(RuleSyntaxError, match=message.replace("(", r"\(")):
        load_catalog([("user.rules", text)])


def test_operands_named_like_tangents_of_nothing_are_fine(tmp_path) -> None:
    path = tmp_path / "user.rules"
    path.write_text("primitive k(d, e)" + BODY.format(meaning="d * e", which=" d", jvp="dd * e")
                    + "    jvp e:     de * d\n", encoding="utf-8")
    with tidu.use_rules(str(path)):
        assert float(tidu.numpy.op("k")(2.0, 3.0)) == 6.0
        assert tidu.grad(tidu.numpy.op("k"), argnums=(0, 1))(2.0, 3.0) == (3.0, 2.0)


def test_a_meaning_sympy_cannot_read_is_refused_when_the_file_loads(tmp_path) -> None:
    """(the CLI refused it; tidu.use_rules loaded it and failed at the first call)"""
    path = tmp_path / "user.rules"
    path.write_text("primitive foo(x)" + BODY.format(meaning="sinus(x)", which="", jvp="cos(x) * dx"),
                    encoding="utf-8")
    with pytest.raises(RuleSyntaxError, match=r"user.rules:4:16: the meaning of foo calls sinus, which is not"), \
            tidu.use_rules(str(path)):
        pass
