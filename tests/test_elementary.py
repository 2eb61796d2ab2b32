"""Mode E: K-th derivatives of elementary functions in their differential ring
(tidu.transforms.elementary), against SymPy's exact derivatives (mpmath at 50 digits),
and the CLI's choice between it and Taylor mode."""

import math

import mpmath
import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import tidu
from tidu.cli import main
from tidu.cli.main import high_order_derivative, taylor_derivative
from tidu.sympy.expr import parse, to_function, to_sympy
from tidu.transforms.elementary import NotElementary, elementary_derivative

X, Y = sympy.symbols("x y", real=True)
mpmath.mp.dps = 50

EXPRESSIONS = [
    "exp(x)*sin(x)*tanh(x)",
    "(x^2 + 1)/(x^3 + 2*x + 3)",
    "sin(cos(x) + x)",
    "1/(1 + exp(-x))",
    "exp(-x^2/2)",
    "log1p(x^2)*sqrt(x + 2)",
    "(x + 2)^2.5",
    "tanh(tanh(x))",
    "sqrt(1 + x^2)*cos(x)",
    # beyond bench/highorder.py's functions
    "(exp(x) - exp(-x))/(exp(x) + exp(-x))",
    "sin(x)/cos(x)",
    "log(x)*x^3",
    "exp(sin(x))",
    "cos(x)^3 - sin(2*x)",
    "x^y*exp(-y*x)",
    "1/(x^2 + 1)^3 - sqrt(x)/(x + 1)",
    "expm1(x)/x",
    "log(1 + exp(x))",
    "exp(x)*exp(-x)*x^2",
    # inverse trigonometric atoms (asin' = P' (1 - P^2)^(-1/2), atan' = P' / (1 + P^2))
    "asin(x)*x^2",
    "acos(x/2) + atan(x^2)",
    "asin(x^2)*exp(x)",
    "atan(x*y)^2",
]


def exact(text, variables=("x",)):
    symbols = {"x": X, "y": Y}
    return to_sympy(parse(text, list(variables)), {v: symbols[v] for v in variables})


def close(a, b, digits=30):
    a, b = complex(a), complex(b)
    return abs(a - b) <= 10.0 ** -digits * max(1.0, abs(b))


def at(expr, point):
    return complex(sympy.N(expr.subs(point), 50))


@pytest.mark.parametrize("text", EXPRESSIONS)
def test_exact_form_equals_sympy(text):
    variables = ("x", "y") if "y" in text else ("x",)
    f = to_function(parse(text, list(variables)), list(variables))
    symbols = [X, Y][: len(variables)]
    point = {X: sympy.Rational(7, 10), Y: sympy.Rational(13, 10)}
    for order in (1, 3, 6):
        d = elementary_derivative(f, order)
        named, expr = d.to_sympy(symbols)
        ours = expr.subs(list(reversed(named)))
        ref = sympy.diff(exact(text, variables), X, order)
        assert close(at(ours, point), at(ref, point)), (text, order)
        # the float program of the same Horner scheme, at a low order where it is well conditioned
        if order <= 3:
            value = d(*[np.float64(float(point[s])) for s in symbols])
            assert math.isclose(float(value), at(ref, point).real, rel_tol=1e-10, abs_tol=1e-10)


def test_coefficients_are_exact_beyond_float64():
    """Printed coefficients are SymPy's integers, not float64's roundings of them."""
    f = to_function(parse("1/(1 + exp(-x))", ["x"]), ["x"])
    named, expr = elementary_derivative(f, 25).to_sympy([X])
    coefficients = {abs(int(c)) for c in expr.atoms(sympy.Integer)}
    assert max(coefficients) > 2**53
    sigma = sympy.Symbol("s")
    ours = sympy.expand(expr.subs(named[0][0], sigma))
    ref = sympy.expand(sympy.diff(1 / (1 + sympy.exp(-X)), X, 25)
                       .subs(sympy.exp(-X), (1 - sigma) / sigma))
    assert sympy.simplify(ours - ref) == 0


def test_relations_keep_the_polynomial_small():
    """The logistic's derivatives are polynomials in the logistic; a power of a sum stays one
    term; exp(x)*exp(-x) is 1; the terms grow linearly with the order on compositions."""
    def terms(text, order):
        return elementary_derivative(to_function(parse(text, ["x"]), ["x"]), order).terms

    assert terms("1/(1 + exp(-x))", 30) == 31
    assert terms("(x + 2)^2.5", 40) == 1
    assert terms("exp(x)*exp(-x)*x^3", 3) == 1
    assert terms("sin(cos(x) + x)", 40) <= 2 * 41
    assert terms("exp(x)*sin(x)*tanh(x)", 40) <= 3 * 41


@pytest.mark.parametrize("text, op", [
    ("abs(x)*x", "abs"), ("max(x, 1)", "maximum"), ("erf(x)", "erf"),
])
def test_not_elementary_names_the_operation(text, op):
    f = to_function(parse(text, ["x"]), ["x"])
    with pytest.raises(NotElementary, match=op):
        elementary_derivative(f, 4)


def test_arrays_and_bad_arguments_are_refused():
    with pytest.raises(NotElementary, match="real scalars"):
        elementary_derivative(lambda x: tidu.numpy.sum(tidu.numpy.sin(x * tidu.numpy.arange(3.0))), 2)
    with pytest.raises(ValueError, match="order"):
        elementary_derivative(lambda x: x, -1)
    with pytest.raises(ValueError, match="argnum 2"):
        elementary_derivative(lambda x, y: x * y, 2, argnum=2)
    with pytest.raises(TypeError, match="takes a function"):
        elementary_derivative(3.0, 2)


def test_the_cli_chooses_mode_e_where_its_polynomial_stays_small():
    def mode(text, order):
        return high_order_derivative(to_function(parse(text, ["x"]), ["x"]), 0, order)[1]

    assert mode("1/(1 + exp(-x))", 12) == "E"
    assert mode("asin(x)", 12) == "E" and mode("atan(x^2)", 12) == "E"
    assert mode("tanh(tanh(x))", 12) == "E"  # no product: Taylor mode is quadratic too
    assert mode("log1p(x^2)*sqrt(x + 2)", 20) == "T"  # a product of two families: Leibniz's K^2 terms
    assert mode("log1p(x^2)*sqrt(x + 2)", 8) == "E"  # still few: 28 terms
    assert mode("abs(x)*x^7", 6) == "T"


def test_cli_prints_the_exact_form_and_values_in_taylor_mode(capsys):
    """At order 30 the closed form loses every digit to cancellation in float64 (as SymPy's
    lambdified one does); the printed value comes from Taylor mode and is right."""
    code = main(["diff", "1/(1+exp(-x))", "--wrt", "x", "--order", "30", "--at", "x=-0.5"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0 and out[0].endswith("[mode E]") and out[1] == "  x0 = 1/(1 + exp(-x))"
    ref = float(mpmath.diff(lambda t: 1 / (1 + mpmath.exp(-t)), mpmath.mpf(-0.5), 30))
    assert math.isclose(float(out[-1].split("= ")[1]), ref, rel_tol=1e-10)
    closed = elementary_derivative(to_function(parse("1/(1+exp(-x))", ["x"]), ["x"]), 30)
    assert not math.isclose(float(closed(np.float64(-0.5))), ref, rel_tol=1e-6)


def test_cli_check_sympy_in_modes_e_and_t(capsys):
    for mode in ("E", "T"):
        code = main(["diff", "exp(x)*sin(x)", "--wrt", "x", "--order", "5", "--mode", mode, "--check-sympy"])
        out = capsys.readouterr().out
        assert code == 0 and "PASS" in out and f"d5/dx5  {mode}" in out


# --- random elementary expressions (hypothesis) ---------------------------------------

_LEAVES = st.sampled_from(["x", "x", "2", "0.5", "3"])
_UNARY = st.sampled_from(["exp", "sin", "cos", "tanh", "log1p", "sqrt"])


def _expressions():
    return st.recursive(
        _LEAVES,
        lambda inner: st.one_of(
            st.tuples(_UNARY, inner).map(lambda t: f"{t[0]}(({t[1]})*({t[1]}) + 0.25)"
                                         if t[0] in ("log1p", "sqrt") else f"{t[0]}({t[1]})"),
            st.tuples(inner, st.sampled_from(["+", "-", "*", "/"]), inner)
            .map(lambda t: f"({t[0]}) {t[1]} ({t[2]})" if t[1] != "/" else f"({t[0]}) / (({t[2]})*({t[2]}) + 1)"),
            st.tuples(inner, st.sampled_from(["2", "3", "-1", "0.5"])).map(lambda t: f"({t[0]}*({t[0]}) + 1)^{t[1]}"),
        ),
        max_leaves=5,
    )


@settings(max_examples=25, deadline=None)
@given(_expressions(), st.integers(1, 4))
def test_random_expressions_against_sympy(text, order):
    """Mode E's exact form of random compositions equals SymPy's derivative at a point."""
    f = to_function(parse(text, ["x"]), ["x"])
    named, expr = elementary_derivative(f, order).to_sympy([X])
    ours = expr.subs(list(reversed(named)))
    ref = sympy.diff(exact(text), X, order)
    point = {X: sympy.Rational(3, 7)}
    assert close(at(ours, point), at(ref, point), digits=25), text
    # and Taylor mode agrees in float64
    t = float(np.asarray(taylor_derivative(f, 0, order)(np.float64(3 / 7))))
    assert math.isclose(t, at(ref, point).real, rel_tol=1e-8, abs_tol=1e-8)


def test_hyperbolic_primitives_are_written_with_exp():
    """sinh and cosh are primitives (for their accuracy near 0); in the ring they are
    (exp(x) -+ exp(-x)) / 2, exactly."""
    x = sympy.Symbol("x", real=True)
    import tidu.numpy as tnp

    d = tidu.elementary_derivative(lambda v: tnp.sinh(v) * tnp.cosh(2 * v), 5)
    named, expr = d.to_sympy([x])
    want = sympy.diff(sympy.sinh(x) * sympy.cosh(2 * x), x, 5)
    assert sympy.simplify((expr.subs(dict(named)) - want).rewrite(sympy.exp)) == 0
    assert np.isclose(d(0.5), float(want.subs(x, 0.5)), rtol=1e-13)
