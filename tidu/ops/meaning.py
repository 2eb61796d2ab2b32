"""A primitive's ``meaning`` as SymPy: the one reading of the rule files' meanings.

Every user of a meaning reads it here: ``tidu.ops.kernels`` (a primitive that has only a
meaning runs it lambdified), ``tidu.sympy`` (graphs and typed expressions as SymPy,
SymPy back to primitives) and ``tidu.checkrules`` (SymPy's verdicts on the rules). The
expression is built from the syntax tree with SymPy constructors, never from text.

It lives in ``tidu.ops``, the lowest stage that runs meanings; SymPy is imported on first
use, so that ``import tidu`` does not load it.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from tidu.ops.catalog import Primitive
from tidu.ops.dsl.ast import Call, Expr, Num, RuleSyntaxError, Var

if TYPE_CHECKING:
    import sympy

# the arithmetic of the meaning language, as Python operators on SymPy expressions
_ARITH: dict[str, Callable[..., Any]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
    "neg": operator.neg, "pow": operator.pow,
}
# SymPy functions that are plain Python functions (they build a Pow), not function classes
_HELPERS = ("sqrt", "cbrt")


def number(v: complex | float | int | bool) -> sympy.Basic:
    """A SymPy number for a constant: exact when a float is a simple fraction (0.5 is
    1/2), ``pi``/``E`` for those floats, else the float's exact binary value."""
    import sympy

    if isinstance(v, bool | np.bool_):
        return sympy.true if v else sympy.false
    if isinstance(v, complex | np.complexfloating):
        re, im = number(float(v.real)), number(float(v.imag))
        return re + sympy.I * im if im != 0 else re
    if isinstance(v, int | np.integer):
        return sympy.Integer(int(v))
    v = float(v)
    if not math.isfinite(v):
        return sympy.nan if math.isnan(v) else (sympy.oo if v > 0 else -sympy.oo)
    if v == math.pi:
        return sympy.pi
    if v == math.e:
        return sympy.E
    frac = Fraction(v).limit_denominator(10**6)
    if float(frac) == v:
        return sympy.Rational(frac.numerator, frac.denominator)
    return sympy.Float(v)


def meaning_sympy(prim: Primitive, args: Sequence[Any]) -> Any:
    """``prim``'s meaning as a SymPy expression of ``args`` (one per operand). A meaning
    calls SymPy functions by their SymPy names (``Abs``, ``Max``, ``erf``); a call of
    anything else is a RuleSyntaxError at its position."""
    import sympy

    if prim.decl.meaning is None:
        raise ValueError(f"{prim.loc}: primitive {prim.name} has no meaning")
    env = dict(zip(prim.operands, args, strict=True))

    def build(e: Expr) -> Any:  # meanings are tiny: recursion is fine
        if isinstance(e, Num):
            return number(e.value)
        if isinstance(e, Var):
            return env[e.name]
        if not isinstance(e, Call):
            raise RuleSyntaxError(prim.loc, f"unexpected {type(e).__name__} in the meaning of {prim.name}")
        vals = [build(a) for a in e.args]
        if e.fn in _ARITH:
            return _ARITH[e.fn](*vals)
        fn = getattr(sympy, e.fn, None)
        if not (e.fn in _HELPERS or isinstance(fn, sympy.FunctionClass)):
            raise RuleSyntaxError(e.loc, f"the meaning of {prim.name} calls {e.fn}, which is not a SymPy function")
        try:
            return fn(*vals)
        except (TypeError, ValueError) as err:  # SymPy's own arity and argument checks
            raise RuleSyntaxError(e.loc, f"the meaning of {prim.name} calls {e.fn} with {len(vals)} "
                                         f"argument(s), which SymPy refuses: {err}") from None

    return build(prim.decl.meaning)


__all__ = ["meaning_sympy", "number"]
