"""Templates as SymPy (each primitive through its ``meaning``, read by ``tidu.ops.meaning``),
and SymPy's verdicts on a JVP rule: its template against the derivative of the primitive's
``meaning`` (on real and on complex symbols), and its linearity in the tangents."""

from __future__ import annotations

import atexit
import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import sympy

from tidu.checkrules._report import _fmt
from tidu.ops.catalog import Catalog, Primitive
from tidu.ops.dsl.ast import AConst, Call, Expr, Num, OperandRule, Var, walk
from tidu.ops.meaning import meaning_sympy
from tidu.sympy import number, pointwise, symbolic_difference
from tidu.sympy.symbolic import SymbolicStep

# Seconds SymPy may spend on one comparison of a check (a rule whose difference it cannot
# simplify would otherwise hang the check); past it the verdict is "?" and the numeric
# checks decide. Run in a worker process (killed at the bound), one per process, reused.
SYMPY_TIMEOUT = 120.0
_STEP: list[SymbolicStep | None] = [None]  # the bounded comparisons of the check under way


@contextlib.contextmanager
def sympy_bound(timeout: float | None) -> Iterator[None]:
    """Run the SymPy comparisons of the checks inside under ``timeout`` seconds each (None:
    unbounded, in this process)."""
    outer = _STEP[0]
    step = _bounded_step(timeout) if timeout is not None else None
    _STEP[0] = step
    try:
        yield
    finally:
        _STEP[0] = outer


_STEPS: dict[float, SymbolicStep] = {}


def _bounded_step(timeout: float) -> SymbolicStep:
    """One worker per bound, kept for the process (starting one imports SymPy)."""
    step = _STEPS.get(timeout)
    if step is None:
        if not _STEPS:
            atexit.register(lambda: [s.close() for s in _STEPS.values()])
        step = _STEPS[timeout] = SymbolicStep(timeout, float("inf"))
    return step


def _difference(a: Any, b: Any) -> tuple[str, str]:
    """``symbolic_difference(a, b)`` and a note: under ``sympy_bound``, a comparison past
    its time is "?" (the numeric checks decide) with a note saying so."""
    step = _STEP[0]
    if step is None:
        return symbolic_difference(a, b), ""
    verdict, detail = step(a, b, stop_at_kinks=False)
    if verdict == "timeout":
        return "?", f"SymPy stopped after {step.timeout:g} s"
    return verdict, ""


_RELATIONS = {"EQ": sympy.Eq, "NE": sympy.Ne, "LT": sympy.Lt, "LE": sympy.Le, "GT": sympy.Gt, "GE": sympy.Ge}


def template_expr(cat: Catalog, e: Expr, env: dict[str, Any]) -> Any | None:
    """A template as SymPy (each op through its meaning; select as Piecewise, compare as a
    relation), or None if it uses an op SymPy cannot express."""
    if isinstance(e, Num):
        return number(e.value)
    if isinstance(e, Var):
        return env[e.name]
    if not isinstance(e, Call):
        return None
    args = [template_expr(cat, a, env) for a in e.args]
    if any(a is None for a in args):
        return None
    prim = cat[e.fn]
    if prim.decl.meaning is not None and not prim.variadic:
        return meaning_sympy(prim, args)
    if e.fn == "select":
        return sympy.Piecewise((args[1], args[0]), (args[2], True))
    direction = dict(e.attrs).get("direction")
    if e.fn == "compare" and isinstance(direction, AConst) and direction.value in _RELATIONS:
        return _RELATIONS[direction.value](*args)
    return None


# --- SymPy's verdicts on a JVP rule -----------------------------------------------------


def _symbolic_jvp(cat: Catalog, prim: Primitive, rule: OperandRule, complex_: bool) -> tuple[str, str]:
    """SymPy's verdict on ``template == d/de meaning(x + e dx)``: yes / ≈ / no / ? / n/a."""
    if prim.decl.meaning is None or prim.variadic:
        return "n/a", "no meaning"
    eps = sympy.Dummy("e", real=True)
    env: dict[str, Any] = {}
    shifted = []
    for name in prim.operands:
        if complex_:
            a, b, da, db = sympy.symbols(f"{name}_re {name}_im d{name}_re d{name}_im", real=True)
            x, dx = a + sympy.I * b, da + sympy.I * db
        else:
            x, dx = sympy.Symbol(name, real=True), sympy.Symbol("d" + name, real=True)
        if rule.operand not in (None, name):
            dx = sympy.Integer(0)
        env[name], env["d" + name] = x, dx
        shifted.append(x + eps * dx)
    reference = pointwise(sympy.diff(meaning_sympy(prim, shifted), eps).subs(eps, 0))
    env["out"] = meaning_sympy(prim, [env[n] for n in prim.operands])
    got = sympy.Integer(0) if rule.template is None else template_expr(cat, rule.template, env)
    if got is None:
        return "n/a", "template uses ops without a meaning"
    verdict, note = _difference(got, reference)
    if verdict in ("no", "?"):
        verdict, detail = _spot_check(got - reference, verdict)
        return verdict, "; ".join(filter(None, (note, detail)))
    return verdict, ""


def _spot_check(diff: Any, verdict: str) -> tuple[str, str]:
    """Evaluate a difference SymPy could not simplify to 0 at a few points in [0.5, 2]:
    nonzero somewhere is a counterexample ("no"), else undecided ("?")."""
    syms = sorted(diff.free_symbols, key=str)
    rng = np.random.default_rng(0)
    for _ in range(3):
        point = {s: number(round(float(rng.uniform(0.5, 2.0)), 3)) for s in syms}
        try:
            value = complex(diff.xreplace(point).evalf(30))
        except (TypeError, ValueError, ArithmeticError):
            return "?", ""
        if abs(value) > 1e-9:
            pt = ", ".join(f"{s}={float(v):g}" for s, v in point.items())
            shown = _fmt(value.real if value.imag == 0 else value)
            # (simplified for the reader where SymPy is not bounded: a bounded check
            # shows the difference as it is, which simplify might not finish)
            expr = sympy.simplify(diff) if _STEP[0] is None else diff
            return "no", f"jvp - derivative = {_short(expr)} = {shown} at {pt}"
    return "?", ""


def _short(expr: Any, most: int = 300) -> str:
    text = str(expr)
    return text if len(text) <= most else text[:most] + " ..."


def _symbolic_linear(cat: Catalog, prim: Primitive, rule: OperandRule) -> str:
    """Whether SymPy shows the template linear in the tangents (real symbols): yes / no / ? / n/a."""
    if rule.template is None:
        return "yes"
    env: dict[str, Any] = {}
    for name in prim.operands:
        env[name] = sympy.Symbol(name, real=True)
    if prim.variadic:
        return "n/a"
    if prim.decl.meaning is not None:
        env["out"] = meaning_sympy(prim, [env[n] for n in prim.operands])
    tangents = ["d" + n for n in prim.operands]
    t1 = {d: sympy.Symbol(d + "_1", real=True) for d in tangents}
    t2 = {d: sympy.Symbol(d + "_2", real=True) for d in tangents}
    if "out" not in env and any(isinstance(v, Var) and v.name == "out" for v in walk(rule.template)):
        return "n/a"

    def at(ts: dict[str, Any]) -> Any:
        return template_expr(cat, rule.template, {**env, **ts})

    one, two, both = at(t1), at(t2), at({d: t1[d] + t2[d] for d in tangents})
    doubled = at({d: 2 * t1[d] for d in tangents})
    if one is None:
        return "n/a"
    verdicts = {_difference(doubled, 2 * one)[0], _difference(both, one + two)[0]}
    return "no" if "no" in verdicts else ("?" if "?" in verdicts else "yes")
