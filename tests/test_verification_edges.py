"""The SymPy checker at points where SymPy's formula is undefined (0/0, 0 * log(0): not a
disagreement, undecided) and on floor/ceiling (its evalf took SymPy numbers only and the
check crashed); prove_equal refuses assumptions on names that are not arguments."""

from __future__ import annotations

import pytest
import sympy as sp

import tidu
import tidu.numpy as tnp
import tidu.sympy

x, y = sp.symbols("x y", real=True)


def test_floor_and_ceiling_are_checked() -> None:
    for e in (sp.floor(x) * y, sp.ceiling(x) * y):
        r = tidu.sympy.check_gradient(e, [x, y])
        assert r.ok and all(entry.outcome in ("proved", "agrees numerically") for entry in r.entries)
        assert tidu.sympy.check_hessian(e, [x, y], points=[(0.5, 2.0)]).ok


def test_an_undefined_reference_is_undecided_not_a_failure() -> None:
    # d/dy x**y = x**y log(x) and d/dx = x**y y / x: SymPy's formulas are 0 * log(0) and 0/0
    # at x = 0; tidu's (0, 0) are the limits, and so its Hessian [[2, 0], [0, 0]]
    r = tidu.sympy.check_gradient(x**y, [x, y], points=[(0.0, 2.0)])
    assert r.ok and {e.outcome for e in r.entries} <= {"proved", "undecided"}
    assert tidu.sympy.check_hessian(x**y, [x, y], points=[(0.0, 2.0)]).ok
    # an infinity SymPy's exact arithmetic also gives is still compared
    r = tidu.sympy.check_gradient(sp.log(x) * y, [x, y], points=[(0.0, 2.0)])
    assert r.ok and all(e.outcome == "proved" for e in r.entries)


def test_prove_equal_refuses_an_assumption_on_no_argument() -> None:
    with pytest.raises(ValueError, match="'z', which is not an argument; the arguments are v"):
        tidu.prove_equal(lambda v: tnp.exp(tnp.log(v)), lambda v: v, 0.5, assume={"z": "positive"})
    assert tidu.prove_equal(lambda v: tnp.exp(tnp.log(v)), lambda v: v, 0.5, assume={"v": "positive"})
    assert tidu.prove_equal(lambda p: tnp.exp(tnp.log(p[0])), lambda p: p[0], (0.5, 1.0),
                            assume={"p[0]": "positive"})
