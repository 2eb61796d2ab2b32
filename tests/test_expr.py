"""tidu.sympy.expr: tokenizer, parser, errors with columns, conversions."""

import builtins
import math

import numpy as np
import pytest
import sympy

from tidu.sympy.expr import (
    Binary,
    Call,
    ExprError,
    Name,
    Num,
    Unary,
    free_variables,
    functions,
    parse,
    to_function,
    to_sympy,
    to_text,
    tokenize,
)

X, Y = sympy.symbols("x y", real=True)


def sym(text, variables=("x", "y")):
    return to_sympy(parse(text, variables), {"x": X, "y": Y})


def error(text, variables=("x", "y")):
    with pytest.raises(ExprError) as info:
        parse(text, variables)
    return info.value


# --- tokens and trees ---------------------------------------------------------


def test_tokens_carry_columns():
    toks = tokenize("x**2 ^ 1.5e-3")
    assert [(t.kind, t.text, t.col) for t in toks] == [
        ("name", "x", 1), ("op", "**", 2), ("num", "2", 4), ("op", "^", 6),
        ("num", "1.5e-3", 8), ("end", "", 14),
    ]


@pytest.mark.parametrize("text, value", [
    ("3", 3), ("2.5", 2.5), (".5", 0.5), ("5.", 5.0), ("1e3", 1000.0), ("6.02E23", 6.02e23),
    ("1e-3", 0.001), ("2.5e+2", 250.0),
])
def test_numbers(text, value):
    node = parse(text)
    assert isinstance(node, Num)
    assert float(node.value) == value


def test_decimal_numbers_are_exact_in_sympy():
    assert sym("0.1") == sympy.Rational(1, 10)
    assert sym("1e-3*x") == X / 1000


def test_precedence_tree():
    two = Num(2, "2", 0)  # columns do not take part in equality
    assert parse("x + y * 2") == Binary("+", Name("x", 0), Binary("*", Name("y", 0), two, 0), 0)
    # a power binds tighter than a unary minus on its left, and is right-associative
    assert parse("-x**2") == Unary("-", Binary("**", Name("x", 0), two, 0), 0)
    assert parse("2**3**2") == parse("2**(3**2)")
    assert parse("x - y - 1") == parse("(x - y) - 1")
    assert parse("x / y / 2") == parse("(x / y) / 2")


@pytest.mark.parametrize("text, expected", [
    ("x**2*y + sin(x*y)", X**2 * Y + sympy.sin(X * Y)),
    ("exp(-x^2)", sympy.exp(-X**2)),           # ^ is a power
    ("x^y^2", X ** (Y**2)),
    ("-x**2", -X**2),
    ("(-x)**2", X**2),
    ("x**-1", 1 / X),
    ("2*-x", -2 * X),
    ("--x", X),
    ("+x", X),
    ("x - y - 1", X - Y - 1),
    ("x/y/2", X / Y / 2),
    ("2**3**2", sympy.Integer(512)),
    ("max(x, y) - min(x, 2)", sympy.Max(X, Y) - sympy.Min(X, 2)),
    ("log1p(x) + expm1(y)", sympy.log(1 + X) + sympy.exp(Y) - 1),
    ("abs(x)*sign(y) + sqrt(x) + tanh(y) + cos(x) + log(y)",
     sympy.Abs(X) * sympy.sign(Y) + sympy.sqrt(X) + sympy.tanh(Y) + sympy.cos(X) + sympy.log(Y)),
    ("pi*e", sympy.pi * sympy.E),
])
def test_to_sympy(text, expected):
    assert sympy.simplify(sym(text) - expected) == 0
    assert sym(text) == expected


@pytest.mark.parametrize("text", [
    "x**2*y + sin(x*y)", "-x**2", "(-x)**2", "x**-1", "x - (y - 1)", "x / (y * 2)",
    "(x**y)**2", "x**y**2", "max(x, -y) * -(x + y)", "1.5e-3 - .5",
])
def test_text_round_trip(text):
    node = parse(text)
    assert parse(to_text(node)) == node


def test_to_function_with_numpy():
    f = to_function(parse("x**2*y + sin(x*y) - max(x, y)/pi"), ["x", "y"], np)
    assert f(2.0, 3.0) == pytest.approx(12 + math.sin(6) - 3 / math.pi, rel=1e-15)
    g = to_function(parse("exp(-x^2)"), ["x"], np)
    assert g(np.array([0.0, 1.0])) == pytest.approx([1.0, math.exp(-1)])


def test_to_function_checks_arity():
    f = to_function(parse("x + y"), ["x", "y"], np)
    with pytest.raises(TypeError, match="expected 2 argument"):
        f(1.0)
    with pytest.raises(ValueError, match="not in"):
        to_function(parse("x + z"), ["x"], np)


def test_free_variables_in_order_of_appearance():
    assert free_variables(parse("y*sin(x) + pi*y + e")) == ["y", "x"]


def test_deep_left_nesting_does_not_recurse():
    text = " + ".join(["x"] * 5000)
    node = parse(text, ["x"])
    assert to_function(node, ["x"], np)(1.0) == 5000.0
    assert sym(" + ".join(["x"] * 300)) == 300 * X


# --- errors -------------------------------------------------------------------


@pytest.mark.parametrize("text, col, fragment", [
    ("x +", 4, "expected a number, a name or '(', found end of input"),
    ("(x + y", 7, "expected ')' to close the '(' at col 1, found end of input"),
    ("sin(x", 6, "expected ')' to close the call of sin at col 4"),
    ("x*(y + 1))", 10, "')' without a matching '('"),
    ("x y", 3, "expected an operator or end of input, found 'y'"),
    ("2x", 2, "expected an operator or end of input, found 'x'"),
    ("x * # y", 5, "unexpected character '#'"),
    ("1e+", 4, "expected digits in the exponent"),
    ("", 1, "expected an expression, found end of input"),
    ("x +* y", 4, "found '*'"),
    ("sin x", 1, "sin is a function: write sin(...)"),
    ("sin(x, y)", 1, "sin takes 1 argument, got 2"),
    ("max(x)", 1, "max takes 2 arguments, got 1"),
    ("x + f(y)", 5, "unknown function 'f' (known: abs, "),
    ("x + z", 5, "unknown variable 'z' (declared: x, y)"),
])
def test_errors_have_column_and_expectation(text, col, fragment):
    e = error(text)
    assert e.col == col
    assert str(e).startswith(f"col {col}: ")
    assert fragment in str(e)


def test_unknown_function_lists_known_ones():
    e = error("besselj(x)")
    known = ", ".join(sorted(functions()))
    assert str(e) == f"col 1: unknown function 'besselj' (known: {known})"
    assert {"tan", "atan", "arctan", "sinh", "log10", "hypot", "atan2"} <= set(functions())  # compositions
    assert {"gamma", "beta", "polygamma", "factorial", "sinc", "sec", "cot"} <= set(functions())  # special ones
    # the catalog's elementwise primitives of reals: the special functions, not the bitwise ones
    assert {"lgamma", "erfinv", "gammainc", "sin", "max"} <= set(functions())
    assert not {"bitwise_and", "shift_left"} & set(functions())


def test_deep_nesting_is_an_error_not_a_crash():
    e = error("(" * 500 + "x" + ")" * 500)
    assert "nested more than" in str(e)
    assert "deep" in error("-" * 500 + "x").message


def test_no_eval(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("eval/exec must not be called")

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    monkeypatch.setattr(sympy, "sympify", forbidden)
    e = error("__import__('os').system('echo hacked')")
    assert e.col == 1
    assert "unknown function '__import__'" in str(e)
    assert "unknown variable '__class__'" in str(error("__class__", ["x"]))
    assert "unexpected character '.'" in str(error("x.real", ["x"]))
    assert "unexpected character '['" in str(error("x[0]", ["x"]))
    assert "unexpected character '\"'" in str(error('"x"', ["x"]))
    # the good path does not call them either
    assert sym("x**2*y + sin(x*y)") == X**2 * Y + sympy.sin(X * Y)
    assert to_function(parse("x*y"), ["x", "y"], np)(2.0, 3.0) == 6.0


def test_undeclared_names_are_free_variables_when_none_declared():
    node = parse("a*b + pi")
    assert free_variables(node) == ["a", "b"]
    assert isinstance(parse("exp(a)"), Call)


COMPOSITE_TEXTS = ["tan(x) * sinh(y)", "cosh(x - y) + log10(x) - log2(y) + exp2(x)",
                   "asin(y) + acos(y) * atan(x * y) + arctan(x)", "asinh(x) + acosh(x + 2) + atanh(y)",
                   "atan2(y, x) + hypot(x, y) + arctan2(x, y)"]


@pytest.mark.parametrize("text", COMPOSITE_TEXTS)
def test_composite_functions_agree_with_sympy_values_and_derivatives(text):
    """tan, atan, log10, hypot...: no primitive but tidu.numpy's compositions; SymPy reads
    them as its own functions. Values, gradients (tidu) and SymPy's agree, and from_sympy
    converts SymPy's form back."""
    import tidu
    from tidu.sympy import from_sympy

    node = parse(text, ["x", "y"])
    expr = to_sympy(node)
    x, y = sorted(expr.free_symbols, key=str)
    point = {x: 0.7, y: 0.3}
    f = to_function(node, ["x", "y"])
    assert float(tidu.jit(f)(0.7, 0.3)) == pytest.approx(float(expr.subs(point)), rel=1e-14)
    grad = tidu.grad(f, argnums=(0, 1))(0.7, 0.3)
    want = [float(sympy.diff(expr, s).subs(point)) for s in (x, y)]
    assert [float(g) for g in grad] == pytest.approx(want, rel=1e-13)
    back = from_sympy(sympy.diff(expr, x), [x, y])
    assert float(tidu.jit(back)(0.7, 0.3)) == pytest.approx(want[0], rel=1e-13)
    assert to_text(node) == to_text(parse(to_text(node)))
