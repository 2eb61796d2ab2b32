"""Bugs an outside tester found in the command line, user rule files and the rule DSL,
the rule checker and the SymPy bridge, each as the behaviour a user expects. The CLI runs
in-process (``tidu.cli.main``), as in tests/test_cli.py."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import sympy
from cli_util import run

from tidu.checkrules import check_rules
from tidu.ops.dsl.ast import RuleSyntaxError
from tidu.ops.dsl.parse import parse_rules

SOFTPLUS = ("primitive sp(x)\n"
            "    type       elementwise\n"
            "    dtypes     float\n"
            "    meaning    log(1 + exp(x))\n"
            "    jvp:       dx / (1 + exp(-x))\n")


def bad_input(capsys, *argv) -> str:
    """Exit 2, nothing on stdout, one ``tidu: error:`` line on stderr: that line."""
    code, out, err = run(capsys, *argv)
    assert code == 2, (code, out, err)
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tidu: error: "), err
    return lines[0]


def last_value(out: str) -> float:
    return float(out.strip().splitlines()[-1].split("=")[-1])


# --- primitives without a meaning print as functions of their own name ------------------

def test_derivative_through_a_primitive_without_meaning_prints(capsys):
    # gammainc's derivative in a is gammainc_da, a kernel with no SymPy meaning: printing
    # it was an internal error (exit 3)
    code, out, err = run(capsys, "diff", "gammainc(x, y)", "--wrt", "x", "--at", "x=0.7,y=1.3")
    assert code == 0, err
    assert "  = gammainc_da[order=1](x, y)" in out.splitlines()
    h = 1e-5
    fd = (mpmath.gammainc(0.7 + h, 0, 1.3, regularized=True)
          - mpmath.gammainc(0.7 - h, 0, 1.3, regularized=True)) / (2 * h)
    assert last_value(out) == pytest.approx(float(fd), rel=1e-8)


def test_hessian_and_series_through_primitives_without_meaning(capsys):
    code, out, err = run(capsys, "hessian", "betainc(x, 2, y)", "--at", "x=0.7,y=0.3")
    assert code == 0, err
    assert "betainc_d[order_a=2, order_b=0](x, 2, y)" in out
    code, out, err = run(capsys, "series", "gammainc(2, x)", "--wrt", "x", "--about", "1", "--order", "2")
    assert code == 0, err
    assert "gamma_density_d[order_a=0, order_x=0](2, 1)" in out
    code, out, err = run(capsys, "diff", "zeta(x, 2)", "--wrt", "x", "--emit", "latex")
    assert code == 0, err
    assert out.strip() == r"\operatorname{zeta\_d}_{\left[order\_q=0, order\_s=1\right]}\left(x, 2\right)"


def test_a_function_without_meaning_differentiates_and_refuses_only_the_sympy_check(capsys):
    # hyp1f1 has no meaning: diff and lower were internal errors before anything ran
    code, out, err = run(capsys, "diff", "hyp1f1(1, 2, x)", "--wrt", "x", "--at", "x=0.5")
    assert code == 0, err
    assert out.splitlines()[1] == "  = hyp1f1(2, 3, x)/2"
    assert last_value(out) == pytest.approx(float(mpmath.hyp1f1(2, 3, 0.5)) / 2, rel=1e-11)
    code, out, err = run(capsys, "lower", "hyp1f1(1, 2, x)", "--to", "numpy")
    assert code == 0, err
    line = bad_input(capsys, "diff", "hyp1f1(1, 2, x)", "--wrt", "x", "--check-sympy")
    assert "col 1: hyp1f1 has no meaning in the rule files" in line and "leave out --check-sympy" in line


def test_a_user_primitive_with_only_a_numpy_kernel_differentiates(capsys, tmp_path):
    path = tmp_path / "nomean.rules"
    path.write_text("primitive nomean(x)\n    type       elementwise\n    dtypes     float\n"
                    "    numpy      numpy.sinh\n    jvp:       dx * cosh(x)\n")
    code, out, err = run(capsys, "diff", "nomean(x)*x", "--wrt", "x", "--at", "x=1", "--rules", str(path))
    assert code == 0, err
    assert "nomean(x)" in out
    assert last_value(out) == pytest.approx(math.sinh(1) + math.cosh(1), rel=1e-11)


# --- --check-sympy on special functions whose SymPy meaning tidu cannot build back ------

@pytest.mark.parametrize("expr, at", [
    ("lgamma(x)", "x=0.7"),          # log(Abs(gamma(x))): from_sympy cannot build gamma
    ("digamma(x)", "x=0.7"),         # polygamma(0, x)
    ("i0e(x)", "x=0.7"),             # besseli(0, x) * exp(-Abs(x))
    ("cosine_integral(x)", "x=0.7"),  # Ci(Abs(x))
    ("zeta(x, 2)", "x=3"),           # SymPy leaves d/ds zeta(s, q) unevaluated
    ("betainc(x, 2, 0.3)", "x=0.7"),  # and d/da betainc_regularized(a, b, 0, x)
])
def test_check_sympy_of_special_functions_passes(capsys, expr, at):
    # each was an internal error (exit 3: from_sympy: cannot convert ..., or a recursion in
    # SymPy's evalf) or a FAIL where SymPy could not evaluate its own derivative
    code, out, err = run(capsys, "diff", expr, "--wrt", "x", "--at", at, "--check-sympy", "--sympy-timeout", "2")
    assert code == 0, (out, err)
    assert out.splitlines()[-1].startswith("PASS"), out


def test_hessian_check_evaluates_sympys_unevaluated_derivatives_at_points(capsys):
    # SymPy's Hessian of zeta(x + 2, y) holds Subs(Derivative(zeta(_xi, y), _xi), _xi, x + 3)
    code, out, err = run(capsys, "hessian", "zeta(x+2, y)", "--check-sympy", "--at", "x=0.7,y=1.3",
                         "--mode", "FoR", "--sympy-timeout", "2")
    assert code == 0, (out, err)
    assert out.splitlines()[-1].startswith("PASS"), out


def test_unevaluated_derivatives_are_numbers_that_still_catch_a_wrong_value():
    from tidu.sympy.check import _evaluate, _numeric

    s, q = sympy.symbols("s q", real=True)
    d = sympy.diff(sympy.zeta(s, q), s, 2)
    want = complex(mpmath.zeta(3, 2, derivative=2))
    got = _evaluate(d, {s: 3.0, q: 2.0})
    assert got == pytest.approx(want, rel=1e-20)
    assert not _numeric([want * (1 + 1e-6)], [got], 1e-9, 1e-12)[2]  # a wrong value still differs


def test_check_hessian_takes_text_with_a_function_sympy_cannot_build_back():
    from tidu.sympy import check_hessian

    report = check_hessian("lgamma(x*y)", "x,y", [(0.7, 1.3)], ("FoR",), symbolic=False)
    assert report.ok and len(report.entries) == 4


# --- rule files: line endings, byte order mark, duplicate names -------------------------

@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_rule_files_with_windows_or_old_mac_line_endings_load(newline):
    text = "# softplus\n" + SOFTPLUS + "\n    rewrite    sp(-(-x)) -> sp(x)\n"
    rf = parse_rules(text.replace("\n", newline), "win.rules")
    (prim,) = rf.primitives
    assert prim.name == "sp" and prim.doc == "softplus" and prim.loc.line == 2
    assert [r.loc.line for r in prim.rewrites] == [8]


def test_a_utf8_byte_order_mark_is_skipped():
    rf = parse_rules("\ufeff# softplus\n" + SOFTPLUS, "bom.rules")
    (prim,) = rf.primitives
    assert prim.doc == "softplus" and (prim.loc.line, prim.loc.col) == (2, 1)


def test_check_rules_on_a_crlf_file_with_a_wrong_jvp_names_the_line(tmp_path):
    path = tmp_path / "wrong.rules"
    path.write_bytes(SOFTPLUS.replace("exp(-x)", "exp(x)").replace("\n", "\r\n").encode())
    report = check_rules([str(path)])
    assert [r.where for r in report.failures] == [f"{path}:5"]


@pytest.mark.parametrize("header, col, message", [
    ("primitive sp(x, x)", 17, "operand x of sp is named twice"),
    ("primitive sp(x)[x]", 17, "attribute x of sp has the name of an operand"),
    ("primitive sp(x)[k, k]", 20, "attribute k of sp has the name of an attribute"),
])
def test_duplicate_operand_and_attribute_names_are_errors(header, col, message):
    text = header + "\n    type       elementwise\n    dtypes     float\n    meaning    x\n    jvp:       dx\n"
    with pytest.raises(RuleSyntaxError) as e:
        parse_rules(text, "dup.rules")
    assert str(e.value).startswith(f"dup.rules:1:{col}: {message}")


def test_check_rules_given_the_same_file_twice_checks_it_once(capsys, tmp_path, monkeypatch):
    path = tmp_path / "sp.rules"
    path.write_text(SOFTPLUS)
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "check-rules", "sp.rules", "./sp.rules", str(path), "-q")
    assert code == 0, err  # was: sp.rules:1:1: primitive sp is already declared at sp.rules:1:1
    assert out.splitlines()[-1] == "3 checks: 3 pass, 0 exempt, 0 warn, 0 skip, 0 FAIL"


def test_an_unsound_rewrite_in_rules_is_one_error_line_with_the_cli_fix(capsys, tmp_path):
    # was several lines, the last telling a command-line user to pass trusted=True
    path = tmp_path / "bad.rules"
    path.write_text(SOFTPLUS + "    rewrite    sp(x) -> x\n    rewrite    sp(x) -> 0\n")
    line = bad_input(capsys, "diff", "x", "--wrt", "x", "--rules", str(path))
    assert line.startswith(f"tidu: error: --rules: {path}:6:16: 2 rewrites failed the soundness check, "
                           f"so the file is not loaded: {path}:6: rewrite sp(x) -> x: fail: float64: at x=0: ")
    assert f"; {path}:7: rewrite sp(x) -> 0: fail" in line
    assert "--trust-rules" in line and "trusted=True" not in line
    code, out, err = run(capsys, "diff", "x", "--wrt", "x", "--rules", str(path), "--trust-rules")
    assert code == 0, err


# --- printing ---------------------------------------------------------------------------

def test_eulers_number_prints_as_e_not_as_the_variable_E(capsys):
    code, out, _ = run(capsys, "diff", "E*e", "--wrt", "E", "--at", "E=2")
    assert code == 0
    assert out.splitlines()[1] == "  = e"  # was '= E': the variable, whose value is 2
    assert last_value(out) == pytest.approx(math.e, rel=1e-11)
    code, out, _ = run(capsys, "series", "exp(x)", "--wrt", "x", "--about", "1", "--order", "1")
    assert out.splitlines()[1] == "  = e + e*(x - 1) + O((x - 1)**2)"


def test_a_zero_coefficient_prints_as_0_not_minus_0(capsys):
    code, out, _ = run(capsys, "series", "sin(x)*y", "--wrt", "x", "--order", "3", "--at", "y=2")
    assert code == 0
    assert "  c2 = 0" in out.splitlines()
    assert not any(line.endswith(" = -0") for line in out.splitlines())


# --- bad input: one line, exit 2 --------------------------------------------------------

def test_a_point_that_contradicts_the_assumptions_is_bad_input(capsys):
    # with x > 0 the e-graph and SymPy read exp(log(x)) as x; at x = -1 the check compared
    # the derivatives of x*y and reported 'proved' next to printed values of nan
    line = bad_input(capsys, "hessian", "exp(log(x))*y", "--assume", "x>0", "--at", "x=-1,y=1", "--check-sympy")
    assert line == "tidu: error: --at: x=-1 contradicts --assume x>0; give a point where the assumption holds"
    line = bad_input(capsys, "diff", "sqrt(x^2)", "--wrt", "x", "--assume", "x=nonneg", "--at", "x=-2")
    assert "x=-2 contradicts --assume x>=0" in line
    line = bad_input(capsys, "series", "log(x)", "--wrt", "x", "--about", "0", "--assume", "x!=0")
    assert "--about: x=0 contradicts --assume x!=0" in line


def test_an_assumption_given_twice_is_bad_input(capsys):
    line = bad_input(capsys, "diff", "x", "--wrt", "x", "--assume", "x>0,x=nonzero")
    assert line == "tidu: error: --assume: x given twice (give one of positive, nonneg, nonzero)"


@pytest.mark.parametrize("expr, k, value", [("log(x)", 0, "zoo"), ("1/x", 0, "zoo"), ("sqrt(x)", 1, "zoo")])
def test_a_series_about_a_singularity_is_bad_input(capsys, expr, k, value):
    # was 'zoo + zoo*x + ...', coefficients inf, and NumPy RuntimeWarning lines on stderr
    line = bad_input(capsys, "series", expr, "--wrt", "x", "--order", "3")
    assert line == (f"tidu: error: {expr} has no Taylor series in x about x = 0: its coefficient c{k} is "
                    f"{value} there (a pole, a branch point or a kink)")


def test_no_numpy_warnings_on_stderr_at_a_singular_point(capsys):
    code, out, err = run(capsys, "series", "log(x)*y", "--wrt", "x", "--order", "2", "--at", "y=1")
    assert code == 0 and err == ""
    assert "  c0 = -inf" in out.splitlines()


@pytest.mark.parametrize("argv, message", [
    (["series", "sin(x)", "--wrt", "x", "--about", "(1"],
     "tidu: error: --about: col 3: expected ')' to close the '(' at col 1, found end of input"),
    (["series", "sin(x)", "--wrt", "x", "--about", "1/0"],
     "tidu: error: --about 1/0: the point is inf; a series is about a finite point"),
    (["equal", "x", "("],
     "tidu: error: second expression: col 2: expected a number, a name or '(', found end of input"),
    (["equal", "(", "x"],
     "tidu: error: first expression: col 2: expected a number, a name or '(', found end of input"),
    (["equal", "x", "y", "--vars", "x"],
     "tidu: error: second expression: col 1: unknown variable 'y' (declared: x)"),
])
def test_errors_say_which_text_they_are_in(capsys, argv, message):
    assert bad_input(capsys, *argv) == message


# --- found at the edge of this area: C from the CLI, Taylor mode at a kink --------------------

def test_diff_emits_c(capsys):
    code, out, err = run(capsys, "diff", "sin(x)", "--wrt", "x", "--emit", "c")
    assert code == 0, err
    assert "cos(" in out


def test_taylor_mode_agrees_with_reverse_mode_at_the_kink_of_abs(capsys):
    values = {}
    for mode in ("FoR", "T"):
        code, out, _ = run(capsys, "diff", "x*abs(x)", "--wrt", "x", "--order", "2", "--mode", mode, "--at", "x=0")
        assert code == 0
        values[mode] = last_value(out)
    assert values["FoR"] == 2
    assert values["T"] == values["FoR"]


def test_numeric_values_agree_with_finite_differences(capsys):
    # a spot check of printed values against central differences of NumPy's function
    code, out, _ = run(capsys, "diff", "atan2(y, x)*log1p(x^2) + hypot(x, y)", "--wrt", "x", "--at", "x=0.4,y=-1.3")
    assert code == 0

    def f(x, y):
        return np.arctan2(y, x) * np.log1p(x * x) + np.hypot(x, y)

    h = 1e-6
    assert last_value(out) == pytest.approx((f(0.4 + h, -1.3) - f(0.4 - h, -1.3)) / (2 * h), rel=1e-8)

