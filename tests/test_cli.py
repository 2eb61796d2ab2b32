"""The tidu command line, through main([...]) and as a subprocess."""

import math
import os
import subprocess
import sys

import pytest
from cli_util import one_error_line, run

from tidu.cli import parse_at, parse_mode
from tidu.sympy.expr import functions

EXPR = "x**2*y + sin(x*y)"


def tidu(*argv):
    """Run the installed command (its console script next to this Python)."""
    exe = os.path.join(os.path.dirname(sys.executable), "tidu")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "tidu.cli"]
    return subprocess.run(cmd + list(argv), capture_output=True, text=True, timeout=600)


# --- bad input: one line on stderr, exit 2 --------------------------------------

# the expression language's functions: the catalog's elementwise primitives of reals
KNOWN = ", ".join(sorted(functions()))


@pytest.mark.parametrize("argv, message", [
    (["hessian", "x**2*y + (sin(x*y)", "--vars", "x,y"],
     "tidu: error: col 19: expected ')' to close the '(' at col 10, found end of input"),
    (["hessian", "x**2*y + foo(x*y)", "--vars", "x,y"],
     f"tidu: error: col 10: unknown function 'foo' (known: {KNOWN})"),
    (["hessian", "x**2*z", "--vars", "x,y"],
     "tidu: error: col 6: unknown variable 'z' (declared: x, y)"),
    (["diff", "__import__('os').system('true')", "--wrt", "x"],
     f"tidu: error: col 1: unknown function '__import__' (known: {KNOWN})"),
    (["hessian", EXPR, "--at", "x=1"], "tidu: error: --at: no value for y"),
    (["hessian", EXPR, "--at", "x=1,y"],
     "tidu: error: --at: expected name=value, got 'y' (e.g. --at x=1,y=2)"),
    (["hessian", EXPR, "--at", "x=1,z=2"],
     "tidu: error: --at: unknown variable 'z' (variables: x, y)"),
    (["hessian", EXPR, "--at", "x=1,y=(2"],
     "tidu: error: --at y: col 3: expected ')' to close the '(' at col 1, found end of input"),
    (["hessian", EXPR, "--mode", "FoX"],
     "tidu: error: unknown mode 'FoX' (use FoF, FoR, RoF, RoR)"),
    (["diff", EXPR, "--wrt", "x", "--mode", "Q"],
     "tidu: error: unknown mode 'Q': use F or R per derivative, joined by 'o' "
     "(e.g. R, FoR, FoFoR), T (Taylor mode, any order) or E (exact differentiation of an "
     "elementary expression, any order)"),
    (["diff", "abs(x)*x", "--wrt", "x", "--order", "5", "--mode", "E"],
     "tidu: error: --mode E: abs is not one of the elementary operations (+ - * / pow exp log sin cos tan "
     "tanh sinh cosh sqrt log1p expm1 asin acos atan logistic); use --mode T (Taylor mode) for this expression"),
    (["diff", EXPR, "--wrt", "x", "--mode", "FoR", "--order", "3"],
     "tidu: error: mode FoR has 2 derivative(s) but --order is 3"),
    (["diff", EXPR, "--wrt", "z"], "tidu: error: --wrt z: not a variable (variables: x, y)"),
    (["diff", EXPR, "--wrt", "x", "--emit", "svg"],
     "tidu: error: --emit: unknown kind 'svg' (use expr, latex, graph, dot, stablehlo, numpy, c)"),
    (["diff", EXPR, "--wrt", "x", "--vars", "x,x"], "tidu: error: --vars: x listed twice"),
    (["hessian", "x*y", "--vars", "x,pi"],
     "tidu: error: --vars: pi is a constant, not a variable name"),
    (["hessian", "x*y", "--vars", "x,y-1"],
     "tidu: error: --vars: 'y-1' is not a variable name (expected e.g. x,y)"),
    (["diff", EXPR, "--wrt", "x", "--order", "0"], "tidu: error: --order must be at least 1, got 0"),
    (["lower", EXPR, "--to", "llvm"],
     "tidu: error: --to: unknown target 'llvm' (use stablehlo, numpy or c)"),
    (["frobnicate"], "tidu: error: argument COMMAND: invalid choice: 'frobnicate' "
                     "(choose from 'diff', 'series', 'hessian', 'lower', 'equal', 'check-rules') (see 'tidu --help')"),
    ([], "tidu: error: give a command: diff, series, hessian, lower, equal, check-rules (see 'tidu --help')"),
    (["hessian"], "tidu: error: the following arguments are required: expr "
                  "(see 'tidu hessian --help')"),
    (["hessian", "2 + pi"], "tidu: error: the expression has no variables; give some with --vars"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert one_error_line(err) == message


def test_help_exits_0(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    assert "hessian" in out and "diff" in out and "lower" in out


def test_parse_at_accepts_constant_expressions():
    assert parse_at("y=pi/2, x=-1e-3", ["x", "y"]) == [-0.001, math.pi / 2]
    assert parse_at("x=max(1, 2)", ["x"]) == [2.0]


def test_parse_mode():
    assert parse_mode("FoR", 2) == ["F", "R"]
    assert parse_mode("R", None) == ["R"]
    assert parse_mode("FoFoR", None) == ["F", "F", "R"]


# one process each (about 2 s): the default run starts one; the other two, whose messages
# test_bad_input_is_one_line_and_exit_2 checks in this process, start in CI's slow step
@pytest.mark.parametrize("expr, fragment", [
    ("x**2*y + (sin(x*y)", "col 19: expected ')'"),
    pytest.param("x**2*y + foo(x*y)", "col 10: unknown function 'foo'", marks=pytest.mark.slow),
    pytest.param("x**2*z", "col 6: unknown variable 'z' (declared: x, y)", marks=pytest.mark.slow),
])
def test_subprocess_bad_input(expr, fragment):
    r = tidu("hessian", expr, "--vars", "x,y", "--check-sympy")
    assert r.returncode == 2
    assert r.stdout == ""
    assert fragment in one_error_line(r.stderr)


# --- success ------------------------------------------------------------------


def test_subprocess_hessian_check_sympy_passes():
    r = tidu("hessian", EXPR, "--vars", "x,y", "--check-sympy")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines[0] == "Hessian of x**2*y + sin(x*y) in (x, y)   [mode FoR]"
    # the e-graph's expressions (real rules), printed by SymPy without simplification;
    # H[y,x] is the node of H[x,y]: printed once
    assert lines[1].split("   ")[0].strip() == "[ y*(-y*sin(x*y) + 2)"
    assert lines[1].rstrip().endswith("-x*y*sin(x*y) + 2*x + cos(x*y) ]")
    assert lines[2].split() == ["[", "sym.", "-x**2*sin(x*y)", "]"]
    assert lines[3].startswith("  (sym.: the same node as its mirror entry")
    assert "Hessian check of x**2*y + sin(x*y) in (x, y), modes FoF FoR RoF RoR" in lines
    rows = [ln.split() for ln in lines if ln.startswith("H[")]
    assert len(rows) == 16
    assert all(row[2] == "proved" and row[-1] == "ok" for row in rows)
    assert lines[-1] == "PASS: all 16 entries agree with SymPy (16 proved equal in the e-graph)"


def test_hessian_values_at_a_point(capsys):
    code, out, err = run(capsys, "hessian", EXPR, "--vars", "x,y", "--at", "x=1,y=2")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[4] == "at x=1, y=2:"
    hxx, hxy = (float(v) for v in lines[5].strip("[] ").split())
    hyx, hyy = (float(v) for v in lines[6].strip("[] ").split())
    assert hxx == pytest.approx(4 - 4 * math.sin(2), rel=1e-11)
    assert hxy == hyx == pytest.approx(2 + math.cos(2) - 2 * math.sin(2), rel=1e-11)
    assert hyy == pytest.approx(-math.sin(2), rel=1e-11)


@pytest.mark.parametrize("mode", ["FoF", "RoF", "RoR"])
def test_hessian_check_in_one_mode(capsys, mode):
    code, out, _ = run(capsys, "hessian", "exp(a*x)", "--mode", mode, "--check-sympy",
                       "--at", "a=2,x=1")
    assert code == 0
    assert f"[mode {mode}]" in out.splitlines()[0]
    assert out.splitlines()[2].split()[-2:] == ["a**2*exp(a*x)", "]"]
    assert f"modes {mode}\n" in out
    assert out.splitlines()[-1] == "PASS: all 4 entries agree with SymPy (4 proved equal in the e-graph)"
    value = float(out.splitlines()[6].strip("[] ").split()[1])
    assert value == pytest.approx(4 * math.exp(2), rel=1e-12)  # d2/dx2 = a^2 e^(ax)


def test_failed_check_exits_1(capsys, monkeypatch):
    import tidu.sympy.check as check

    real = check.derivative_fn

    def wrong(f, n, kind, mode):
        h = real(f, n, kind, mode)
        return lambda x, y: tuple(tuple(hij + 1.0 for hij in row) for row in h(x, y))

    monkeypatch.setattr(check, "derivative_fn", wrong)
    code, out, err = run(capsys, "hessian", EXPR, "--check-sympy", "--mode", "RoR")
    assert code == 1
    assert err == ""
    assert out.splitlines()[-1] == "FAIL: 4 of 4 entries disagree with SymPy"


def test_diff_first_and_higher_order(capsys):
    code, out, _ = run(capsys, "diff", EXPR, "--wrt", "x", "--at", "x=1,y=2")
    assert code == 0
    assert out.splitlines() == [
        "d/dx (x**2*y + sin(x*y))   [mode R]", "  = 2*x*y + y*cos(x*y)", "at x=1, y=2:",
        f"  = {4 + 2 * math.cos(2):.12g}"]
    code, out, _ = run(capsys, "diff", "x**3*y", "--wrt", "x", "--order", "3")
    assert out.splitlines() == ["d3/dx3 (x**3*y)   [mode FoFoR]", "  = 6*y"]
    code, out, _ = run(capsys, "diff", "exp(2*x)", "--wrt", "x", "--mode", "RoF", "--at", "x=0")
    assert out.splitlines() == ["d2/dx2 (exp(2*x))   [mode RoF]", "  = 4*exp(2*x)", "at x=0:",
                                "  = 4"]


def test_diff_emit_kinds(capsys):
    _, graph, _ = run(capsys, "diff", "x*y", "--wrt", "y", "--emit", "graph")
    assert graph.splitlines()[1:] == ["{ inputs %0:f64[] = x, %1:f64[] = y", "  return %0 }"]
    _, dot, _ = run(capsys, "diff", "sin(x)", "--wrt", "x", "--emit", "dot")
    assert dot.startswith("digraph tidu {") and "cos" in dot
    _, src, _ = run(capsys, "diff", "sin(x)", "--wrt", "x", "--emit", "numpy")
    assert "def program(s0):" in src and "np.cos(s0)" in src
    _, hlo, _ = run(capsys, "diff", "sin(x)", "--wrt", "x", "--emit", "stablehlo")
    assert "func.func public @main(%s0: tensor<f64>) -> tensor<f64>" in hlo
    assert "stablehlo.cosine %s0" in hlo


def test_lower(capsys):
    code, out, _ = run(capsys, "lower", "x*y", "--to", "stablehlo")
    assert code == 0
    assert "stablehlo.multiply %s0, %s1 : tensor<f64>" in out
    code, out, _ = run(capsys, "lower", "exp(-x^2)", "--to", "numpy")
    assert code == 0
    namespace = {"np": __import__("numpy")}
    exec(out, namespace)  # the generated source (our own output, not user text)
    assert float(namespace["program"](__import__("numpy").float64(1.5))[0]) == \
        pytest.approx(math.exp(-2.25), rel=1e-15)


def test_user_text_never_reaches_eval(capsys, monkeypatch):
    import builtins

    import sympy.parsing.sympy_parser as sympy_parser

    markers = ("sin(x*y)", "pi/4", "__import__")  # pieces of the user's text
    seen = []

    def guard(real):
        def checked(source, *args, **kwargs):
            if isinstance(source, str) and any(m in source for m in markers):
                seen.append(source)
                raise AssertionError("user text reached eval/exec")
            return real(source, *args, **kwargs)

        return checked

    monkeypatch.setattr(builtins, "eval", guard(builtins.eval))
    monkeypatch.setattr(builtins, "exec", guard(builtins.exec))
    monkeypatch.setattr(sympy_parser, "parse_expr", guard(lambda *a, **k: None))
    code, out, _ = run(capsys, "hessian", EXPR, "--check-sympy", "--mode", "FoR",
                       "--at", "x=pi/4,y=2")
    assert code == 0
    assert out.splitlines()[-1] == "PASS: all 4 entries agree with SymPy (4 proved equal in the e-graph)"
    code, _, err = run(capsys, "diff", "__import__('os').system('echo pwned')", "--wrt", "x")
    assert code == 2 and "unknown function '__import__'" in err
    assert seen == []


def test_composite_functions_are_checked_against_sympy(capsys):
    code, out, _ = run(capsys, "hessian", "atan(x*y) + tan(x) + hypot(x, y)", "--mode", "FoR", "--check-sympy",
                       "--at", "x=0.7,y=0.3")
    assert code == 0
    assert out.splitlines()[-1].startswith("PASS")
    code, out, _ = run(capsys, "diff", "sinh(x) * log10(x)", "--wrt", "x", "--at", "x=2")
    assert code == 0
    assert float(out.splitlines()[-1].split("=")[-1]) == pytest.approx(
        math.cosh(2) * math.log10(2) + math.sinh(2) / (2 * math.log(10)), rel=1e-11)  # 12 digits printed
