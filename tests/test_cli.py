"""The tidu command line, through main([...]) and as a subprocess."""

import math
import os
import subprocess
import sys

import pytest

from tidu.cli import main, parse_at, parse_mode

EXPR = "x**2*y + sin(x*y)"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def tidu(*argv):
    """Run the installed command (its console script next to this Python)."""
    exe = os.path.join(os.path.dirname(sys.executable), "tidu")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "tidu.cli"]
    return subprocess.run(cmd + list(argv), capture_output=True, text=True, timeout=600)


def one_error_line(err):
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("tidu: error: ")
    assert "Traceback" not in err
    return lines[0]


# --- bad input: one line on stderr, exit 2 --------------------------------------


@pytest.mark.parametrize("argv, message", [
    (["hessian", "x**2*y + (sin(x*y)", "--vars", "x,y"],
     "tidu: error: col 19: expected ')' to close the '(' at col 10, found end of input"),
    (["hessian", "x**2*y + foo(x*y)", "--vars", "x,y"],
     "tidu: error: col 10: unknown function 'foo' (known: abs, cos, exp, expm1, log, log1p, "
     "max, min, sign, sin, sqrt, tanh)"),
    (["hessian", "x**2*z", "--vars", "x,y"],
     "tidu: error: col 6: unknown variable 'z' (declared: x, y)"),
    (["diff", "__import__('os').system('true')", "--wrt", "x"],
     "tidu: error: col 1: unknown function '__import__' (known: abs, cos, exp, expm1, log, "
     "log1p, max, min, sign, sin, sqrt, tanh)"),
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
     "(e.g. R, FoR, FoFoR)"),
    (["diff", EXPR, "--wrt", "x", "--mode", "FoR", "--order", "3"],
     "tidu: error: mode FoR has 2 derivative(s) but --order is 3"),
    (["diff", EXPR, "--wrt", "z"], "tidu: error: --wrt z: not a variable (variables: x, y)"),
    (["diff", EXPR, "--wrt", "x", "--emit", "svg"],
     "tidu: error: --emit: unknown kind 'svg' (use expr, graph, dot, stablehlo, numpy)"),
    (["diff", EXPR, "--wrt", "x", "--vars", "x,x"], "tidu: error: --vars: x listed twice"),
    (["lower", EXPR, "--to", "llvm"],
     "tidu: error: --to: unknown target 'llvm' (use stablehlo or numpy)"),
    (["frobnicate"], "tidu: error: argument COMMAND: invalid choice: 'frobnicate' "
                     "(choose from 'diff', 'hessian', 'lower') (see 'tidu --help')"),
    ([], "tidu: error: give a command: diff, hessian, lower (see 'tidu --help')"),
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


@pytest.mark.parametrize("expr, fragment", [
    ("x**2*y + (sin(x*y)", "col 19: expected ')'"),
    ("x**2*y + foo(x*y)", "col 10: unknown function 'foo'"),
    ("x**2*z", "col 6: unknown variable 'z' (declared: x, y)"),
])
def test_subprocess_bad_input(expr, fragment):
    r = tidu("hessian", expr, "--vars", "x,y", "--check-sympy")
    assert r.returncode == 2
    assert r.stdout == ""
    assert fragment in one_error_line(r.stderr)
