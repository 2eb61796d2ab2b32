"""High-order derivatives as text (issue 28): printed results name shared values instead of
expanding the graph into a tree, and are checked against SymPy's own derivatives."""

from __future__ import annotations

import pytest
import sympy

import tidu
import tidu.numpy as tnp
from tidu.cli.main import main
from tidu.sympy import to_sympy

X = sympy.Symbol("x", real=True)


def shared(x):
    s = tnp.sin(x) * x + 1.0
    t = s * s + tnp.exp(s)
    return t * t + tnp.cos(t)


def test_cse_form_is_the_tree_with_shared_values_named():
    view = tidu.make_graph(shared, simplify=False)(0.5)
    named, (out,) = to_sympy(view, [X], cse=True)
    assert [str(s) for s, _ in named] == ["x0", "x1"]  # s and t: each used more than once
    tree = sympy.sin(X) * X + 1
    tree = tree ** 2 + sympy.exp(tree)
    assert sympy.simplify(tidu.transforms.display.expand(named, [out])[0] - (tree ** 2 + sympy.cos(tree))) == 0
    assert to_sympy(view, [X])[0] == tidu.transforms.display.expand(named, [out])[0]
    formula = view.formula([X])
    assert str(formula).splitlines()[0] == f"x0 = {named[0][1]}"
    assert formula.to_latex().startswith(r"\begin{aligned}x_{0} &= ")


def test_cse_names_avoid_the_inputs_names():
    view = tidu.make_graph(lambda x0: shared(x0), simplify=False)(0.5)
    named, _ = to_sympy(view, cse=True)
    assert "x0" not in [str(s) for s, _ in named]


@pytest.mark.parametrize("mode", ["E", "T"])
def test_high_order_cli_output_is_smaller_than_sympys_and_agrees(capsys, mode):
    expr = sympy.exp(X) * sympy.sin(X) * sympy.tanh(X)
    given = [] if mode == "E" else ["--mode", "T"]  # E: the default here
    assert main(["diff", "exp(x)*sin(x)*tanh(x)", "--wrt", "x", "--order", "8", "--at", "x=1", *given]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].endswith(f"[mode {mode}]") and (mode == "E" or lines[1].startswith("  x0 = "))
    reference = sympy.diff(expr, X, 8)
    assert len(out) < len(str(reference))
    assert abs(float(lines[-1].split("=")[1]) - float(reference.subs(X, 1).evalf(20))) < 1e-9 * 1e3
    # the printed lines, read back by SymPy and evaluated in order at x = 0.7, are the
    # derivative (substituting expressions instead would build the whole tree)
    at = sympy.Rational(7, 10)
    env = {"x": at, "exp": sympy.exp, "sin": sympy.sin, "cos": sympy.cos, "tanh": sympy.tanh}
    for line in lines[1:-3]:
        name, _, rhs = line.strip().partition(" = ")
        env[name] = sympy.sympify(rhs, locals=env).evalf(40)
    printed = sympy.sympify(lines[-3].strip()[2:], locals=env).evalf(40)
    assert abs(float(printed - reference.subs(X, at).evalf(40))) < 1e-6


@pytest.mark.parametrize("expr, mode", [("exp(x)*sin(x)*tanh(x)", "T"), ("1/(1 + exp(-x))", "E")])
def test_latex_of_a_high_order_derivative_is_an_aligned_block(capsys, expr, mode):
    assert main(["diff", expr, "--wrt", "x", "--order", "5", "--emit", "latex", "--mode", mode]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith(r"\begin{aligned}x_{0} &= ") and r"\frac{d^{5}}{d x^{5}} &= " in out
