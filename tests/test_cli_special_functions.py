"""The special and reciprocal functions of the expression language (gamma, beta, polygamma,
factorial, sinc, cot...): what SymPy reads them as, their values and derivatives in every
command that takes expressions, against SymPy evaluated with mpmath (an independent
computation: SymPy differentiates its own functions, mpmath evaluates them)."""

import math

import mpmath
import numpy as np
import pytest
import scipy.special
import sympy
from cli_util import one_error_line, run

from tidu.sympy import from_sympy
from tidu.sympy.expr import ExprError, functions, parse, to_function, to_sympy
from tidu.transforms.inspection import make_graph

X, Y = sympy.Symbol("x", real=True), sympy.Symbol("y", real=True)

# text -> SymPy's own function of it
SYMPY_OF = {
    "gamma(x)": sympy.gamma(X), "beta(x, y)": sympy.beta(X, Y), "factorial(x)": sympy.factorial(X),
    "loggamma(x)": sympy.loggamma(X), "gammaln(x)": sympy.log(sympy.Abs(sympy.gamma(X))),
    "polygamma(2, x)": sympy.polygamma(2, X), "trigamma(x)": sympy.polygamma(1, X),
    "erfcinv(x)": sympy.erfinv(1 - X),  # (SymPy's erfcinv has no numeric value)
    "sinc(x)": sympy.sinc(X), "cot(x)": sympy.cot(X), "sec(x)": sympy.sec(X),
    "csc(x)": sympy.csc(X), "coth(x)": sympy.coth(X), "sech(x)": sympy.sech(X), "csch(x)": sympy.csch(X),
}


def sympy_value(e, **at):
    """SymPy's value of ``e`` at ``at``, evaluated by mpmath at 30 digits."""
    return float(e.evalf(30, subs={sympy.Symbol(k, real=True): sympy.Float(v, 30) for k, v in at.items()}))


def cli_value(out):
    """The value a command printed last (``  = 1.234``)."""
    return float(out.splitlines()[-1].split("=")[-1])


def test_the_functions_are_known_with_their_arity():
    fns = functions()
    for name, arity in [("gamma", 1), ("beta", 2), ("factorial", 1), ("loggamma", 1), ("gammaln", 1),
                        ("polygamma", 2), ("trigamma", 1), ("erfcinv", 1), ("sinc", 1), ("cot", 1),
                        ("sec", 1), ("csc", 1), ("coth", 1), ("sech", 1), ("csch", 1)]:
        assert fns[name][0] == arity
    assert fns["lgamma"] == (1, "lgamma") and fns["erfinv"] == (1, "erfinv")  # primitives already


@pytest.mark.parametrize("text", SYMPY_OF)
def test_sympy_reads_its_own_function(text):
    assert to_sympy(parse(text), {"x": X, "y": Y}) == SYMPY_OF[text]


@pytest.mark.parametrize("text", SYMPY_OF)
@pytest.mark.parametrize("x", [0.3, 0.7, 1.9])
def test_values_traced_and_eager_agree_with_sympy(text, x):
    at = {"x": x, "y": 2.5} if "y" in text else {"x": x}
    ref = sympy_value(SYMPY_OF[text], **at)
    node = parse(text)
    names = list(at)
    assert float(to_function(node, names, np)(*at.values())) == pytest.approx(ref, rel=1e-13)
    assert float(to_function(node, names)(*[np.float64(v) for v in at.values()])) == pytest.approx(ref, rel=1e-13)


def test_sinc_is_sympys_unnormalized_sinc():
    f = to_function(parse("sinc(x)"), ["x"], np)
    assert f(0.0) == 1.0
    assert f(2.0) == pytest.approx(math.sin(2.0) / 2.0, rel=1e-15)
    assert f(np.pi) == pytest.approx(0.0, abs=1e-16)  # not NumPy's sinc(pi) = sin(pi^2) / pi^2


def test_factorial_is_gamma_of_x_plus_1_on_all_the_reals():
    f = to_function(parse("factorial(x)"), ["x"], np)
    assert f(-0.5) == pytest.approx(math.sqrt(math.pi), rel=1e-15)  # SciPy's factorial(-0.5) is 0
    assert f(4.0) == pytest.approx(24.0, rel=1e-15)


def sympy_derivative(text, order, x):
    """SymPy's derivative of ``text`` at ``x``, by mpmath; at x = 0 from SymPy's series
    (sinc's derivatives as SymPy writes them divide by x). A positive x is a positive
    symbol: gammaln's Abs(gamma(x)) has no evaluable derivative otherwise."""
    sym = sympy.Symbol("x", positive=True) if x > 0 else X
    e = to_sympy(parse(text), {"x": sym})
    if x == 0:
        return float(sympy.series(e, sym, 0, order + 1).removeO().coeff(sym, order) * math.factorial(order))
    return sympy_value(sympy.diff(e, sym, order), x=x) if x <= 0 else float(
        sympy.diff(e, sym, order).evalf(30, subs={sym: sympy.Float(x, 30)}))


# (expression, point, orders checked): derivatives against SymPy's diff evaluated by mpmath
DERIVATIVES = [
    ("gamma(x)*beta(x, 2)", 0.7), ("gamma(x)", -0.4), ("beta(x, 2.5)", 1.3), ("factorial(x)", 0.7),
    ("loggamma(x) + gammaln(x)", 2.2), ("polygamma(1, x) + polygamma(0, x)", 0.9), ("trigamma(x)", 3.0),
    ("erfcinv(x)", 0.4), ("sinc(x)", 0.0), ("sinc(x)", 0.8), ("cot(x) + sec(x) + csc(x)", 0.6),
    ("coth(x) + sech(x) + csch(x)", 0.6),
]


@pytest.mark.parametrize("text, x", DERIVATIVES)
@pytest.mark.parametrize("order", [1, 2, 3])
def test_diff_at_a_point_matches_sympy(capsys, text, x, order):
    code, out, err = run(capsys, "diff", text, "--wrt", "x", "--order", str(order), "--at", f"x={x}")
    assert code == 0, err
    ref = sympy_derivative(text, order, x)
    assert cli_value(out) == pytest.approx(ref, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("mode", ["F", "R", "FoR", "RoF", "RoR", "T"])
def test_every_mode(capsys, mode):
    order = 2 if len(mode) > 1 or mode == "T" else 1
    text = "gamma(x)*beta(x, 2) + polygamma(1, x) + sinc(x) + sec(x)"
    code, out, err = run(capsys, "diff", text, "--wrt", "x", "--mode", mode, "--order", str(order),
                         "--at", "x=0.7")
    assert code == 0, err
    assert cli_value(out) == pytest.approx(sympy_derivative(text, order, 0.7), rel=1e-10)


def test_gamma_derivative_is_printed_in_sympys_functions(capsys):
    code, out, _ = run(capsys, "diff", "gamma(x)*beta(x, 2)", "--wrt", "x", "--assume", "x>0")
    assert code == 0
    assert out.splitlines()[-1] == "  = (2*polygamma(0, x) - polygamma(0, x + 2))*gamma(x)**2/gamma(x + 2)"


def test_diff_check_sympy(capsys):
    code, out, err = run(capsys, "diff", "gamma(x)*beta(x, 2) + factorial(x)", "--wrt", "x", "--check-sympy",
                         "--at", "x=0.7")
    assert code == 0, err
    assert out.splitlines()[-1].startswith("PASS")


@pytest.mark.parametrize("text", ["beta(x, y)", "polygamma(1, x*y) + cot(x)*sec(y) + gamma(x)*csch(y)"])
def test_hessian_check_sympy(capsys, text):
    # (SymPy's simplify takes long on beta's entries: one second each, then the numeric check decides)
    code, out, err = run(capsys, "hessian", text, "--mode", "FoR", "--check-sympy", "--sympy-timeout", "1",
                         "--at", "x=0.7,y=1.3")
    assert code == 0, err
    assert out.splitlines()[-1].startswith("PASS")


def test_series_matches_sympy(capsys):
    text = "gamma(1 + x) + sinc(x) + sec(x) + beta(x + 1, 2)"
    code, out, err = run(capsys, "series", text, "--wrt", "x", "--order", "4")
    assert code == 0, err
    got = [float(line.split("=")[1]) for line in out.splitlines() if line.startswith("  c")]
    poly = sympy.series(to_sympy(parse(text), {"x": X}), X, 0, 5).removeO()
    ref = [float(poly.coeff(X, k).evalf(30)) for k in range(5)]
    assert got == pytest.approx(ref, rel=1e-10)


@pytest.mark.parametrize("target", ["stablehlo", "numpy", "c"])
def test_lower(capsys, target):
    code, out, err = run(capsys, "lower", "gamma(x)*beta(x, 2) + factorial(x) + sinc(x) + cot(x) + csch(x)",
                         "--to", target)
    assert code == 0, err
    assert {"stablehlo": "func.func public @main", "numpy": "gammaln(s0)", "c": "lgamma("}[target] in out


def test_lower_to_c_without_a_c_kernel_is_one_line(capsys):
    # polygamma(n >= 1) runs on zeta, erfcinv on ndtri: the rule files give them no C lowering
    code, _, err = run(capsys, "lower", "polygamma(1, x)", "--to", "c")
    assert code == 2
    assert "no C lowering for zeta" in one_error_line(err)


def test_equal(capsys):
    assert run(capsys, "equal", "factorial(x)", "gamma(x + 1)")[0] == 0
    assert run(capsys, "equal", "cot(x)", "1/tan(x)")[0] == 0


@pytest.mark.parametrize("text, message", [
    ("polygamma(x, x)", "col 11: polygamma's first argument must be a constant non-negative integer (at most 100), "
                        "such as polygamma(1, x); got x"),
    ("2*polygamma(1.5, x)", "col 13: polygamma's first argument must be"),
    ("polygamma(-1, x)", "col 11: polygamma's first argument must be"),
    ("polygamma(1 + 1, x)", "col 11: polygamma's first argument must be"),
    ("polygamma(101, x)", "col 11: polygamma's first argument must be"),
    ("beta(x)", "col 1: beta takes 2 arguments, got 1"),
    ("x + gamma(x, 2)", "col 5: gamma takes 1 argument, got 2"),
    ("gamma + x", "col 1: gamma is a function: write gamma(...)"),
])
def test_bad_input_is_one_line_with_the_column(capsys, text, message):
    code, _, err = run(capsys, "diff", text, "--wrt", "x")
    assert code == 2
    assert one_error_line(err).startswith(f"tidu: error: {message}")
    with pytest.raises(ExprError):
        parse(text)


# --- the bridge -------------------------------------------------------------------


@pytest.mark.parametrize("e", [sympy.gamma(X) * sympy.beta(X, Y), sympy.polygamma(2, X) + sympy.polygamma(0, Y),
                               sympy.factorial(X) + sympy.sinc(Y), sympy.sec(X) * sympy.coth(Y),
                               sympy.loggamma(X) + sympy.erfinv(Y / 3)])
def test_from_sympy_converts_them(e):
    ref = sympy_value(e, x=0.7, y=1.3)
    assert float(from_sympy(e, [X, Y], np)(0.7, 1.3)) == pytest.approx(ref, rel=1e-13)
    assert float(from_sympy(e, [X, Y])(np.float64(0.7), np.float64(1.3))) == pytest.approx(ref, rel=1e-13)


def test_from_sympy_reads_lgammas_meaning_as_lgamma():
    # log|gamma(x)| as the primitive: computed through gamma it would overflow past 171
    f = from_sympy(sympy.log(sympy.Abs(sympy.gamma(X))), [X])
    assert float(f(np.float64(300.0))) == pytest.approx(float(mpmath.loggamma(300)), rel=1e-14)
    assert "lgamma" in make_graph(f)(np.float64(2.0)).listing()


def test_from_sympy_refuses_a_non_constant_polygamma_order():
    with pytest.raises(TypeError, match="polygamma must be a constant non-negative integer"):
        from_sympy(sympy.polygamma(Y, X), [X, Y])


def test_from_sympy_converts_erfcinv():  # (which SymPy itself cannot evaluate)
    ref = scipy.special.erfcinv(0.4)
    assert float(from_sympy(sympy.erfcinv(X), [X], np)(0.4)) == pytest.approx(ref, rel=1e-15)
    assert float(from_sympy(sympy.erfcinv(X), [X])(np.float64(0.4))) == pytest.approx(ref, rel=1e-14)
