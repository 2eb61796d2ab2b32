"""The SymPy check's three outcomes (proved, agrees numerically, differs), its assumptions
(``assume=``, ``--assume x=positive``) and the time bound of its symbolic step (issue 30).

No test here depends on wall-clock speed: a time bound is tested with a bound far below
what the deliberately heavy comparison takes, and every bound given to make a check
finish is far above what it needs (a hang guard, not a measurement).
"""

import os
import subprocess
import sys

import pytest
import sympy
from cli_util import run

import tidu.sympy.bridge as bridge
import tidu.sympy.check as check
from tidu.cli.errors import CliError
from tidu.cli.main import parse_assume
from tidu.sympy import check_derivative, check_gradient, check_hessian, compare
from tidu.sympy.symbolic import SymbolicStep

X, Y = sympy.symbols("x y", real=True)
HANG_GUARD_S = 600  # far above what any check here needs: only stops a hung run
# a difference SymPy takes many seconds to decide (it is not 0): the heavy comparison
HEAVY = sum(sympy.sin(k * X) * sympy.cos((k + 1) * Y) for k in range(1, 9)) ** 2


# --- where the symbolic step is inconclusive ------------------------------------


def test_compare_says_where_a_piecewise_difference_is_not_shown_zero():
    # tidu's guarded log against SymPy's: equal wherever x != 0; at x = 0 SymPy's side
    # is 0**y*zoo, undefined: inconclusive there, not a disproof
    guarded = sympy.log(sympy.Piecewise((1, sympy.Eq(X, 0)), (X, True)))
    assert compare(X**Y * guarded**2, X**Y * sympy.log(X) ** 2) == ("?", "at x = 0")
    assert compare(guarded, sympy.log(X)) == ("?", "at x = 0")
    positive = sympy.Symbol("x", positive=True)  # Eq(x, 0) is False: the guard is gone
    assert compare(sympy.log(sympy.Piecewise((1, sympy.Eq(positive, 0)), (positive, True))),
                   sympy.log(positive)) == ("yes", "")
    assert compare(X, X + 1) == ("no", "")


def test_compare_of_max_derivatives_avoids_piecewise_fold(monkeypatch):
    # The Hessian of max(x*y, x + y)^2 took minutes: piecewise_fold of the nested
    # Piecewise. Fixing each side's conditions collapses them without it.
    expr = sympy.Max(X * Y, X + Y) ** 2
    f = bridge.from_sympy(expr, [X, Y])
    deriv = check.derivative_fn(f, 2, "Hessian", "FoR")
    got = bridge.to_sympy(check.make_graph(deriv, (1.2, 0.7)), [X, Y])
    ref = list(check.pointwise(sympy.hessian(expr, [X, Y])))

    def no_fold(*args, **kwargs):
        raise AssertionError("piecewise_fold is not needed here")

    monkeypatch.setattr(sympy, "piecewise_fold", no_fold)
    assert [compare(a, b) for a, b in zip(got, ref, strict=True)] == [("yes", "")] * 4


# --- outcomes and assumptions ----------------------------------------------------


def test_x_pow_y_agrees_numerically_and_says_where():
    report = check_hessian("x^y", "x,y", [(1.5, 2.0)], modes=("FoR",), timeout=HANG_GUARD_S)
    assert report.ok and report.outcome == "agrees numerically"
    assert {e.outcome for e in report.entries} == {"proved", "agrees numerically"}
    assert all(e.numeric_ok for e in report.entries)
    open_ = [e for e in report.entries if e.outcome == "agrees numerically"]
    assert {(e.symbolic, e.where) for e in open_} == {("?", "at x = 0")}
    last = str(report).splitlines()[-1]
    assert last.startswith("PASS: agrees numerically, symbolic step inconclusive at x = 0 (")
    html = report._repr_html_()
    assert "agrees numerically" in html and "inconclusive at x = 0" in html


@pytest.mark.parametrize("how", ["assume", "symbol"])
def test_assumptions_prove_x_pow_y(how):
    if how == "assume":
        report = check_hessian("x^y", "x,y", [(1.5, 2.0)], modes=("FoR",), assume={"x": "positive"},
                               timeout=HANG_GUARD_S)
    else:
        xp = sympy.Symbol("x", positive=True)
        report = check_hessian(xp**Y, [xp, Y], [(1.5, 2.0)], modes=("FoR",), timeout=HANG_GUARD_S)
    assert report.outcome == "proved", str(report)
    assert report.symbols[0].is_positive
    assert str(report).splitlines()[-1].startswith("PASS: all 4 entries agree with SymPy")


def test_assume_is_checked():
    with pytest.raises(ValueError, match="unknown variable 'z'"):
        check_hessian("x*y", "x,y", assume={"z": "positive"})
    with pytest.raises(ValueError, match="use positive, nonneg, nonzero"):
        check_hessian("x*y", "x,y", assume={"x": "big"})
    with pytest.raises(ValueError, match="timeout must be positive"):
        check_gradient("x*y", "x,y", timeout=0)


def test_a_numeric_disagreement_differs(monkeypatch):
    real = check.derivative_fn

    def wrong(f, n, kind, mode):
        g = real(f, n, kind, mode)
        return lambda x, y: tuple(v * 1.5 for v in g(x, y))

    monkeypatch.setattr(check, "derivative_fn", wrong)
    report = check_gradient("x^y", "x,y", [(1.5, 2.0)], modes=("R",))
    assert report.outcome == "differs" and not report.ok
    assert {e.outcome for e in report.entries} == {"differs"}
    assert str(report).splitlines()[-1] == "FAIL: 2 of 2 entries disagree with SymPy"


def test_check_derivative():
    report = check_derivative("x^3*y", "x,y", "x", 3, [(1.5, 2.0)], timeout=HANG_GUARD_S)
    assert report.outcome == "proved"
    assert [(report.label(e.index), e.mode) for e in report.entries] == [("d3/dx3", "FoFoR")]
    report = check_derivative("x^y", "x,y", "y", 2, [(1.5, 2.0)], ["RoF", "FoR"], timeout=HANG_GUARD_S)
    assert report.outcome == "agrees numerically"
    assert {e.where for e in report.entries} == {"at x = 0"}
    with pytest.raises(ValueError, match="one of F or R per derivative"):
        check_derivative("x*y", "x,y", "x", 2, modes=["F"])


# --- the time bound ----------------------------------------------------------------


def test_symbolic_step_times_out_and_stops_its_worker():
    assert SymbolicStep(0.05).total == pytest.approx(0.2)  # 4 times one comparison's
    with SymbolicStep(0.05, total=HANG_GUARD_S) as step:
        assert step(HEAVY, sympy.Integer(0)) == ("timeout", "timed out after 0.05 s")
        assert step._proc is None  # killed
        step.timeout = HANG_GUARD_S  # each comparison has its own time: a new worker answers
        assert step(X, X) == ("yes", "")
    with SymbolicStep(0.05, total=0.05) as step:
        assert step(HEAVY, sympy.Integer(0)) == ("timeout", "timed out after 0.05 s")
        # the time for all entries is spent: the rest are not run
        assert step(X, X) == ("timeout", "stopped: the 0.05 s for all entries were spent")


def test_symbolic_step_in_its_worker_answers_like_compare():
    guarded = sympy.log(sympy.Piecewise((1, sympy.Eq(X, 0)), (X, True)))
    with SymbolicStep(HANG_GUARD_S) as step:
        assert step(guarded, sympy.log(X)) == ("?", "at x = 0")
        assert step(sympy.sin(X) ** 2 + sympy.cos(X) ** 2, sympy.Integer(1)) == ("yes", "")
        proc = step._proc
        assert proc is not None and proc.poll() is None
    assert proc.wait(timeout=HANG_GUARD_S) == 0  # it ends when its stdin closes


def test_check_past_its_timeout_keeps_the_numeric_verdict(monkeypatch):
    # tidu's entries read back as a deliberately heavy (and wrong) expression: SymPy
    # cannot finish within the bound; the numbers are right, so it agrees numerically
    monkeypatch.setattr(bridge, "to_sympy", lambda graph, symbols: [HEAVY] * 4)
    monkeypatch.setattr(check, "_proved", lambda deriv, refs, *rest: [False] * len(refs))
    report = check_hessian(X * Y, [X, Y], [(1.0, 2.0)], modes=("RoR",), timeout=0.05)
    assert [e.symbolic for e in report.entries] == ["timeout"] * 4
    assert report.ok and report.outcome == "agrees numerically"
    assert str(report).splitlines()[-1] == (
        "PASS: agrees numerically, symbolic step timed out after 0.05 s (4 of 4 entries; 0 proved)")
    assert "timed out" in report.table()


# --- the command line ----------------------------------------------------------------


def test_parse_assume_takes_words_and_relations():
    assert parse_assume("x=positive, y>=0,z=nonzero", ["x", "y", "z"]) == {
        "x": "positive", "y": "nonneg", "z": "nonzero"}
    assert parse_assume("x>0", ["x"]) == {"x": "positive"}
    for bad in ("x=big", "x<0", "x"):
        with pytest.raises(CliError, match="--assume: expected name>0"):
            parse_assume(bad, ["x"])
    with pytest.raises(CliError, match="unknown variable 'q'"):
        parse_assume("q=positive", ["x"])


def test_cli_hessian_x_pow_y(capsys):
    code, out, err = run(capsys, "hessian", "x^y", "--check-sympy", "--at", "x=1.5,y=2",
                         "--sympy-timeout", str(HANG_GUARD_S))
    assert code == 0 and err == ""
    assert "agrees numerically, symbolic step inconclusive at x = 0" in out.splitlines()[-1]
    code, out, err = run(capsys, "hessian", "x^y", "--check-sympy", "--at", "x=1.5,y=2",
                         "--assume", "x=positive", "--sympy-timeout", str(HANG_GUARD_S))
    assert code == 0 and err == ""
    assert out.splitlines()[-1].startswith("PASS: all 16 entries agree with SymPy (proved: ")


def test_cli_hessian_of_max_is_proved(capsys):
    code, out, _ = run(capsys, "hessian", "max(x*y, x + y)^2", "--vars", "x,y", "--check-sympy",
                       "--sympy-timeout", str(HANG_GUARD_S))
    assert code == 0
    assert out.splitlines()[-1].startswith("PASS: all 16 entries agree with SymPy")


def test_cli_diff_check_sympy(capsys):
    code, out, _ = run(capsys, "diff", "x^y", "--wrt", "y", "--order", "2", "--check-sympy",
                       "--at", "x=1.5,y=2", "--sympy-timeout", str(HANG_GUARD_S))
    assert code == 0
    assert "derivative check of x**y in (x, y), modes FoR" in out
    assert "agrees numerically, symbolic step inconclusive at x = 0" in out.splitlines()[-1]
    code, out, _ = run(capsys, "diff", "x^y", "--wrt", "y", "--order", "2", "--check-sympy",
                       "--assume", "x>0", "--sympy-timeout", str(HANG_GUARD_S))
    assert code == 0
    assert out.splitlines()[-1].startswith("PASS: the entry agrees with SymPy")
    code, out, _ = run(capsys, "diff", "x**2*y", "--wrt", "x", "--emit", "latex", "--check-sympy")
    assert code == 0 and out.splitlines()[0] == "2 x y"
    assert out.splitlines()[-1] == "PASS: the entry agrees with SymPy (1 proved equal in the e-graph)"


def test_cli_diff_check_sympy_differs(capsys, monkeypatch):
    cli = sys.modules["tidu.cli.main"]  # the module (tidu.cli.main is also the function)
    real = cli.nth_derivative
    monkeypatch.setattr(cli, "nth_derivative", lambda *a, **k: (lambda g: lambda *v: 2.0 * g(*v))(real(*a, **k)))
    code, out, err = run(capsys, "diff", "sin(x)", "--wrt", "x", "--check-sympy", "--at", "x=1")
    assert code == 1 and err == ""
    assert out.splitlines()[-1] == "FAIL: the entry disagrees with SymPy"


@pytest.mark.parametrize("argv, message", [
    (["hessian", "x*y", "--check-sympy", "--sympy-timeout", "0"],
     "tidu: error: --sympy-timeout must be a positive number of seconds, got 0"),
    (["diff", "x*y", "--wrt", "x", "--check-sympy", "--emit", "graph"],
     "tidu: error: --check-sympy checks the printed expression; it does not go with --emit graph"),
    (["hessian", "x*y", "--assume", "x=big"],
     "tidu: error: --assume: expected name>0, name>=0, name!=0 or name=positive|nonneg|nonzero, got 'x=big'"),
])
def test_cli_check_options_bad_input(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.strip() == message


@pytest.mark.slow  # the installed command in a fresh process; test_cli_hessian_x_pow_y runs the same in-process
def test_subprocess_acceptance_x_pow_y():
    """The issue's command line, as a user runs it (quiet time a few seconds)."""
    exe = os.path.join(os.path.dirname(sys.executable), "tidu")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "tidu.cli"]
    argv = ["hessian", "x^y", "--check-sympy", "--at", "x=1.5,y=2", "--sympy-timeout", str(HANG_GUARD_S)]
    r = subprocess.run(cmd + argv, capture_output=True, text=True, timeout=HANG_GUARD_S * 2)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "agrees numerically, symbolic step inconclusive at x = 0" in r.stdout
    r = subprocess.run(cmd + [*argv, "--assume", "x=positive"], capture_output=True, text=True,
                       timeout=HANG_GUARD_S * 2)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "agrees numerically" not in r.stdout and "PASS: all 16 entries agree with SymPy" in r.stdout
