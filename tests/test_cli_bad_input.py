"""Bad and heavy input to the command line: one ``tidu: error:`` line, exit status 2, in
bounded time (docs/cli.md#exit-status, #limits). Inputs that hung on the old code run in
one subprocess that forks a child per command, each killed past ``HANG_S`` seconds."""

import json
import math
import os
import subprocess
import sys
import textwrap
import time

import pytest
import sympy
from cli_util import one_error_line, run

from tidu.sympy.expr import ExprError, parse, to_sympy

# a command slower than this on bad input is a hang: each takes well under a second
# (generous, so that a busy machine never trips it; a hang runs for minutes or forever)
HANG_S = 120


# --- commands that hung: run in a child process each, killed past HANG_S ----------

_DRIVER = textwrap.dedent("""
    import io, json, os, sys, time
    from tidu.cli import main
    results = []
    for argv in json.loads(sys.argv[1]):
        r, w = os.pipe()
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the command, its stdout and stderr sent back as JSON
            os.close(r)
            out, err = io.StringIO(), io.StringIO()
            sys.stdout, sys.stderr = out, err
            try:
                code = main(argv)
            except BaseException as e:
                code = repr(e)
            with os.fdopen(w, "w") as f:
                json.dump([code, out.getvalue(), err.getvalue()], f)
            os._exit(0)
        os.close(w)
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            if time.monotonic() - t0 > float(sys.argv[2]):
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                break
            time.sleep(0.02)
        with os.fdopen(r) as f:
            text = f.read()
        results.append(json.loads(text) if text else ["hang", "", ""])
    print(json.dumps(results))
""")

# (argv, the error line's start): each hung (or ran every rule) on the old code
BOUNDED = [
    # SymPy computed the exact constant (10**10**10: gigabytes) before anything else
    (["series", "log(x)", "--wrt", "x", "--about", "2**(-10**10)"],
     "tidu: error: --about: col 2: 2**-10**10 has too many digits to compute exactly (more than 4,000"),
    (["diff", "x*10**10**10", "--wrt", "x", "--check-sympy"],
     "tidu: error: col 5: 10**10**10 has too many digits to compute exactly"),
    (["hessian", "x*y*2**(10**10/3)", "--check-sympy"],
     "tidu: error: col 6: 2**(10**10 / 3) has too many digits to compute exactly"),
    # an --only without names checked every built-in rule (minutes), --mutate ran every mutant
    (["check-rules", "--only", ","], "tidu: error: --only: no primitive names in ','"),
    (["check-rules", "--only", ""], "tidu: error: --only: no primitive names in ''"),
    (["check-rules", "--mutate", "--only", ""], "tidu: error: --mutate checks a whole catalog"),
]


@pytest.fixture(scope="module")
def bounded_results():
    argvs = [argv for argv, _ in BOUNDED]
    r = subprocess.run([sys.executable, "-c", _DRIVER, json.dumps(argvs), str(HANG_S)],
                       capture_output=True, text=True, timeout=HANG_S * len(argvs) + 60)
    assert r.returncode == 0, r.stderr
    return dict(zip(map(json.dumps, argvs), json.loads(r.stdout), strict=True))


@pytest.mark.parametrize("argv, start", BOUNDED, ids=[" ".join(a)[:40] for a, _ in BOUNDED])
def test_hanging_input_is_a_prompt_error(bounded_results, argv, start):
    code, out, err = bounded_results[json.dumps(argv)]
    assert code != "hang", f"no answer within {HANG_S} s"
    assert code == 2
    assert out == ""
    assert one_error_line(err).startswith(start)


# --- an exact constant SymPy cannot hold ------------------------------------------


@pytest.mark.parametrize("text, col, shown", [  # col: the operator's
    ("x*10**4001", 5, "10**4001"),
    ("2**13288*x", 2, "2**13288"),
    ("(10**3000*10**3000)*x", 10, "10**3000 * 10**3000"),
    ("x + (1/3)**(-9000)", 10, "(1 / 3)**-9000"),
])
def test_exact_constant_too_large_for_sympy(text, col, shown):
    with pytest.raises(ExprError) as info:
        to_sympy(parse(text))
    assert info.value.col == col
    assert info.value.message.startswith(f"{shown} has too many digits to compute exactly")


def test_exact_constants_within_the_bound_stay_exact():
    x = sympy.Symbol("x", real=True)
    assert to_sympy(parse("2**1000*x"), {"x": x}) == sympy.Integer(2) ** 1000 * x
    assert to_sympy(parse("(-1)**(10**100) + 0**(10**100)")) == 1  # powers of 0, 1, -1: any exponent
    assert to_sympy(parse("8**(1/3)")) == 2


def test_check_sympy_refuses_a_huge_constant_before_printing(capsys):
    # before: the derivative printed ('= oo'), then an internal error (Python will not
    # print an int of more than 4,300 digits)
    code, out, err = run(capsys, "diff", "x*10**5000", "--wrt", "x", "--check-sympy")
    assert (code, out) == (2, "")
    assert one_error_line(err).startswith("tidu: error: col 5: 10**5000 has too many digits")


# --- expressions that start with '--' ---------------------------------------------


@pytest.mark.parametrize("expr, same", [  # same: the expression without the sign pairs, for SymPy
    ("---x", lambda x: -x), ("--(x)", lambda x: x), ("--x+3*x", lambda x: 4 * x), ("---x**2", lambda x: -(x**2)),
])
def test_expression_starting_with_two_minus_signs(capsys, expr, same):
    # before: argparse took it for an option ("the following arguments are required: expr")
    code, out, err = run(capsys, "diff", expr, "--wrt", "x", "--at", "x=2")
    assert code == 0, err
    x = sympy.Symbol("x")
    assert float(out.splitlines()[-1].split("=")[-1]) == float(sympy.diff(same(x), x).subs(x, 2))


def test_unknown_double_dash_word_names_the_option(capsys):
    code, out, err = run(capsys, "diff", "--x", "--wrt", "x")
    assert (code, out) == (2, "")
    assert one_error_line(err) == ("tidu: error: unknown option --x (see 'tidu diff --help'); an expression "
                                   "that starts with '--' needs a space first: ' --x'")
    code, _, err = run(capsys, "diff", "x", "--wrt", "x", "--bogus=3")
    assert code == 2
    assert one_error_line(err) == "tidu: error: unknown option --bogus (see 'tidu diff --help')"


# --- a wall-clock bound: heavy but valid input ------------------------------------


def test_max_seconds_stops_a_long_command(capsys):
    # 16 nested reverse derivatives, each simplified: under the per-call graph limit, and
    # minutes of work
    t0 = time.monotonic()
    code, out, err = run(capsys, "diff", "exp(x)*sin(x)*tanh(x)", "--wrt", "x", "--mode", "Ro" * 15 + "R",
                         "--max-seconds", "1")
    assert time.monotonic() - t0 < HANG_S
    assert (code, out) == (2, "")
    assert one_error_line(err) == ("tidu: error: stopped after 1 s (--max-seconds); simplify the expression, "
                                   "use a lower --order, or raise --max-seconds")
    # the timer is gone: a later command in this process runs to its end
    code, out, _ = run(capsys, "diff", "x**3", "--wrt", "x", "--at", "x=2")
    assert code == 0 and float(out.splitlines()[-1].split("=")[-1]) == 12.0


@pytest.mark.parametrize("value", ["0", "-1", "nan", "-inf"])
def test_max_seconds_must_be_positive(capsys, value):
    code, out, err = run(capsys, "hessian", "x*y", "--max-seconds", value)
    assert (code, out) == (2, "")
    assert one_error_line(err) == f"tidu: error: --max-seconds must be a positive number of seconds, got {value}"


# --- engine errors on extreme but valid input (not in tidu/cli) --------------------


@pytest.mark.parametrize("argv", [
    ["diff", "x**1e308*x**1e308", "--wrt", "x"],  # (normalize's 2e308 coefficient overflowed float)
    ["series", "sin(x)", "--wrt", "x", "--order", "200", "--max-order", "1000"],  # (k! overflowed float)
    ["hessian", "exp(" * 6 + "x*y" + ")" * 6, "--check-sympy", "--mode", "FoR"],  # (mpmath overflowed)
])
def test_extreme_valid_input_is_no_internal_error(capsys, argv):
    t0 = time.monotonic()
    code, _, err = run(capsys, *argv)
    assert time.monotonic() - t0 < HANG_S
    assert "internal error" not in err
    assert code in (0, 1, 2)


def _value(out):
    return float(out.splitlines()[-1].split("=")[-1])


@pytest.mark.parametrize(("expr", "at", "want"), [
    # d/dx (a*a), a = x**1e308: 2*a*a' with a' = 1e308*x**(1e308 - 1) (1e308 - 1 is 1e308 in
    # float64); as the tape computes it: a*a' + a'*a
    ("x**1e308*x**1e308", 1.0, lambda x: 1e308 * x**1e308 * x**1e308 + x**1e308 * 1e308 * x**1e308),
    ("x**1e308*x**1e308", 0.999, lambda x: 0.0),
    # d/dx (x*1e200)**2 is 2e400*x: the exact coefficient past float64 is not written; at
    # x = 1e-300 the tape's value (x*1e200)*1e200 twice is finite, SymPy's too
    ("(x*1e200)*(x*1e200)", 1e-300, lambda x: 2 * ((x * 1e200) * 1e200)),
    ("(x*1e200)*(x*1e200)", 1.0, lambda x: math.inf),
])
def test_coefficients_past_float64_are_not_written(capsys, expr, at, want):
    code, out, err = run(capsys, "diff", expr, "--wrt", "x", "--at", f"x={at!r}")
    assert (code, err) == (0, "")
    expected = want(at)  # Python floats: overflow is inf
    assert _value(out) == pytest.approx(expected, rel=1e-12)
    if math.isfinite(expected):  # SymPy's exact derivative agrees
        x = sympy.Symbol("x")
        exact = sympy.diff(to_sympy(parse(expr, ["x"]), {"x": x}), x).subs(x, sympy.Float(at, 30))
        assert float(exact) == pytest.approx(expected, rel=1e-12)


def test_check_sympy_of_values_too_large_for_mpmath_says_so(capsys):
    # SymPy's entries of exp^6(x*y) at points in (0.3, 1.7) are past what mpmath can hold
    # (exp of a number of millions of digits): not compared, and the report says so
    t0 = time.monotonic()
    code, out, err = run(capsys, "hessian", "exp(" * 6 + "x*y" + ")" * 6, "--check-sympy", "--mode", "FoR")
    assert time.monotonic() - t0 < HANG_S
    assert (code, err) == (0, "")
    verdict = out.splitlines()[-1]
    assert verdict.startswith("PASS: all 4 entries agree with SymPy"), verdict
    assert verdict.endswith("SymPy cannot evaluate 4 of 4 entries at any of the points (not compared there)")
    # with no symbolic step, nothing decides: UNDECIDED, which is not a failure
    from tidu.sympy import check_derivative
    from tidu.sympy.check import UNEVALUATED, _evaluate
    report = check_derivative("exp(exp(exp(exp(exp(exp(x))))))", "x", "x", symbolic=False)
    assert report.outcome == "undecided" and report.ok
    assert [e.result_text for e in report.entries] == ["undecided"]
    assert math.isnan(report.entries[0].max_abs) and report.entries[0].unevaluated == 3
    assert report.verdict().startswith("UNDECIDED: SymPy cannot evaluate the entry numerically")
    x = sympy.Symbol("x", real=True)
    exp4 = sympy.exp(sympy.exp(sympy.exp(sympy.exp(x))))
    assert _evaluate(sympy.exp(exp4), {x: 1.0}) is UNEVALUATED  # exp of about 10**1600000
    # a large value mpmath holds is still computed (inf in float64), and compared
    assert _evaluate(exp4, {x: 1.0}) == complex(math.inf)
    assert _evaluate(sympy.exp(sympy.exp(x)) / sympy.exp(sympy.exp(x) - 1), {x: 5.0}) == pytest.approx(math.e)


# --- a sweep of malformed input (guards the one-line contract) --------------------

LONG = "x+" * 50_000 + "x"
DEEP = "(" * 10_000 + "x" + ")" * 10_000


@pytest.mark.parametrize("argv", [
    ["diff", "", "--wrt", "x"], ["diff", "   ", "--wrt", "x"], ["diff", "x +", "--wrt", "x"],
    ["diff", "(x+1", "--wrt", "x"], ["diff", "x+1)", "--wrt", "x"], ["diff", "α*x", "--wrt", "x"],
    ["diff", LONG, "--wrt", "x"],
    ["diff", DEEP, "--wrt", "x", "--max-length", "200000"],
    ["diff", "__import__('os').system('true')", "--wrt", "x"], ["diff", "x.real", "--wrt", "x"],
    ["diff", "lambda: x", "--wrt", "x"], ["diff", "'x'", "--wrt", "x"], ["diff", "1e400*x", "--wrt", "x"],
    ["diff", "x", "--wrt", "x", "--order", "-1"], ["diff", "x", "--wrt", "x", "--order", "abc"],
    ["diff", "x", "--wrt", "x", "--at", "x=__import__('os')"], ["diff", "x", "--wrt", "x", "--at", "x=(1"],
    ["series", "log(x)", "--wrt", "x", "--about", "1/0"], ["series", "log(x)", "--wrt", "x", "--about", "y"],
    ["hessian", "x*y", "--vars", "x"], ["lower", "x", "--to", "llvm"], ["equal", "x", "(x"],
    ["check-rules", "/nonexistent.rules"], ["check-rules", os.path.dirname(__file__)],
    ["check-rules", sys.executable], ["diff", "x", "--wrt", "x", "--rules", sys.executable],
])
def test_malformed_input_is_one_error_line(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    one_error_line(err)


def test_constant_arithmetic_follows_float64(capsys):
    # x**10**10 stays symbolic; the constant part of x*2**10000 is inf in float64 (docs/cli.md)
    code, out, _ = run(capsys, "diff", "x*2**10000", "--wrt", "x", "--at", "x=1")
    assert code == 0 and math.isinf(float(out.splitlines()[-1].split("=")[-1]))
