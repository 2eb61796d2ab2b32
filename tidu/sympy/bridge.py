"""Bridge to SymPy, both ways (re-exported by ``tidu.sympy``):

- ``from_sympy(expr, symbols)``: a function of the symbols (positionally) that tidu
  transforms can trace.
- ``to_sympy(graph, symbols=None)``: the outputs of a ``MaterializedGraph`` as SymPy,
  each elementwise primitive through its ``meaning`` in the rule files (it lives in
  ``tidu.ops.graph_sympy``, below ``tidu.transforms``, whose graph views show formulas).
- ``number(v)``: a SymPy number for a constant (``tidu.ops.meaning``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import sympy

import tidu.numpy as tnp
from tidu.ops.catalog import catalog
from tidu.ops.dsl.ast import Call as DslCall
from tidu.ops.graph_sympy import to_sympy
from tidu.ops.kernels import function_primitives
from tidu.ops.meaning import meaning_sympy, number
from tidu.sympy.expr import (
    COMPOSITES,
    INTEGER_ARGUMENTS,
    MAX_INTEGER_ARGUMENT,
    composite_function,
    function_of,
    name_parameters,
)

# ---------------------------------------------------------------------------
# SymPy -> tidu
# ---------------------------------------------------------------------------


def _constant(e: sympy.Expr) -> float | complex:
    v = complex(e.evalf(30))
    return v.real if v.imag == 0 else v


class _Symbolic:
    """Which sub-expressions contain a Symbol, found iteratively (SymPy's own
    ``free_symbols`` recurses) and remembered."""

    def __init__(self) -> None:
        self.known: dict[sympy.Basic, bool] = {}

    def __call__(self, expr: sympy.Basic) -> bool:
        stack: list[tuple[sympy.Basic, bool]] = [(expr, False)]
        while stack:
            e, ready = stack.pop()
            if ready:
                self.known[e] = e.is_Symbol or any(self.known[a] for a in e.args)
            elif e not in self.known:
                stack.append((e, True))
                stack.extend((a, False) for a in e.args if a not in self.known)
        return self.known[expr]


def _split(e: sympy.Basic, symbolic: _Symbolic, patterns: dict[type, list[_Meaning]]
           ) -> tuple[str, list[sympy.Basic], Any]:
    """How to build ``e``: (kind, sub-expressions to convert first, extra)."""
    if e.is_Symbol:
        return "symbol", [], None
    if not symbolic(e):
        return "const", [], _constant(e)
    if e.is_Add:
        pos = [a for a in e.args if not a.could_extract_minus_sign()]
        neg = [-a for a in e.args if a.could_extract_minus_sign()]
        return "add", pos + neg, len(pos)
    if e.is_Mul:
        coeff, rest = e.as_coeff_Mul()
        num, den = [], []
        for f in sympy.Mul.make_args(rest):
            b, x = f.as_base_exp()
            if x.is_Number and x.is_negative:
                den.append(b if x == -1 else b ** (-x))
            else:
                num.append(f)
        return "mul", num + den, (len(num), _constant(coeff))
    if e.is_Pow:
        b, x = e.args
        if x == sympy.S.Half:
            return "sqrt", [b], None
        if x == -sympy.S.Half:
            return "rsqrt", [b], None
        if x == -1:
            return "recip", [b], None
        if x.is_Number:
            return "pow_const", [b], _constant(x)
        return "pow", [b, x], None
    name = type(e).__name__
    for pattern in patterns.get(type(e), ()):  # lgamma's log(Abs(gamma(x))): the primitive itself
        args = pattern.match(e)
        if args is not None:
            return "call", args, pattern.prim
    prim = function_primitives(catalog()).get(name)  # the primitive meaning this function (Abs: abs)
    if prim is not None:
        arity = len(catalog()[prim].operands)
        if len(e.args) == arity:
            return "call", list(e.args), prim
        if arity == 2 and len(e.args) > 2:  # SymPy's n-ary Max and Min: associative, folded
            return "fold", list(e.args), prim
    composite = _COMPOSITE_OF.get(name)  # tan, atan, gamma, ...: the language's composition
    if composite is not None and len(e.args) == composite[0]:
        for i in INTEGER_ARGUMENTS.get(composite[1], ()):
            n = e.args[i]
            if not (n.is_Integer and 0 <= n <= MAX_INTEGER_ARGUMENT):
                raise TypeError(f"from_sympy: cannot convert {e}: the {('first', 'second')[i]} argument of {name} "
                                f"must be a constant non-negative integer (at most {MAX_INTEGER_ARGUMENT})")
        return "composite", list(e.args), composite[1]
    means = sorted({*(f for f in function_primitives(catalog())
                      if isinstance(getattr(sympy, f, None), sympy.FunctionClass)), *_COMPOSITE_OF})
    known = ", ".join(["Add", "Mul", "Pow", "numbers", *means])
    raise TypeError(f"from_sympy: cannot convert {name} ({e}); supported: {known} "
                    "(the functions a primitive of the active catalog means)")


# SymPy's function classes that no primitive means but a composition computes (the
# expression language's COMPOSITES): class name -> (arity, the composite's name)
_COMPOSITE_OF = {fn.__name__: (arity, name) for name, (arity, _, fn) in COMPOSITES.items()
                 if isinstance(fn, sympy.FunctionClass)}
_COMPOSITE_OF["erfcinv"] = (1, "erfcinv")  # (the language reads it as erfinv(1 - x), which SymPy evaluates)


@dataclass(frozen=True)
class _Meaning:
    """The meaning of the primitive ``prim`` (of its operands ``dummies``) that holds a
    function a composition computes (lgamma's ``log(Abs(gamma(x)))``): an expression of
    that form is the primitive, not the composition (``gamma`` overflows past 171,
    ``lgamma`` not). Each operand occurs once, at ``paths`` (indices into ``args``)."""

    meaning: sympy.Basic
    dummies: tuple[sympy.Dummy, ...]
    paths: tuple[tuple[int, ...], ...]
    prim: str

    def match(self, e: sympy.Basic) -> list[sympy.Basic] | None:
        """The operands when ``e`` is this meaning of them, else None."""
        args = []
        for path in self.paths:
            sub = e
            for i in path:
                if i >= len(sub.args):
                    return None
                sub = sub.args[i]
            args.append(sub)
        return args if self.meaning.xreplace(dict(zip(self.dummies, args, strict=True))) == e else None


def _meanings() -> dict[type, list[_Meaning]]:
    """The ``_Meaning``s of the active catalog, by the type of the meaning's top node."""
    cat = catalog()
    plain = set(function_primitives(cat).values())  # (tan's meaning tan(x): a call as it is)
    out: dict[type, list[_Meaning]] = {}
    for name, p in cat.items():
        if (p.decl.meaning is None or name in plain or p.attrs or p.variadic
                or not _calls(p.decl.meaning) & _COMPOSITE_OF.keys()):
            continue
        dummies = tuple(sympy.Dummy(o) for o in p.operands)
        meaning = meaning_sympy(cat.get_primitive(name), list(dummies))
        paths = [_paths(meaning, d) for d in dummies]
        if all(len(ps) == 1 for ps in paths):
            out.setdefault(type(meaning), []).append(_Meaning(meaning, dummies, tuple(ps[0] for ps in paths), name))
    return out


def _calls(e: Any) -> set[str]:
    """The functions a meaning (the rule DSL's tree: a few nodes) calls."""
    if not isinstance(e, DslCall):
        return set()
    return {e.fn}.union(*(_calls(a) for a in e.args))


def _paths(e: sympy.Basic, d: sympy.Dummy) -> list[tuple[int, ...]]:
    """Where ``d`` occurs in ``e`` (a meaning: a few nodes)."""
    if e == d:
        return [()]
    return [(i, *rest) for i, a in enumerate(e.args) for rest in _paths(a, d)]


def _build(kind: str, vals: list[Any], extra: Any, mod: ModuleType) -> Any:
    if kind == "add":
        pos, neg = vals[:extra], vals[extra:]
        out = pos[0] if pos else -neg.pop(0)
        for v in pos[1:]:
            out = out + v
        for v in neg:
            out = out - v
        return out
    if kind == "mul":
        n_num, coeff = extra  # coeff * prod(num) / prod(den)
        num, den = vals[:n_num], vals[n_num:]
        if num:
            out = num[0]
            for v in num[1:]:
                out = out * v
            out = -out if coeff == -1 else (out if coeff == 1 else coeff * out)
        else:
            out = coeff
        for v in den:
            out = out / v
        return out
    if kind == "sqrt":
        return mod.sqrt(vals[0])
    if kind == "rsqrt":
        return 1.0 / mod.sqrt(vals[0])
    if kind == "recip":
        return 1.0 / vals[0]
    if kind == "pow_const":
        return vals[0] ** extra
    if kind == "pow":
        return vals[0] ** vals[1]
    if kind == "call":
        return function_of(extra, mod)(*vals)
    if kind == "composite":
        return composite_function(extra, mod)(*vals)
    fn = function_of(extra, mod)  # fold
    out = vals[0]
    for v in vals[1:]:
        out = fn(out, v)
    return out


def from_sympy(
    expr: sympy.Expr, symbols: Sequence[sympy.Symbol], module: ModuleType | None = None
) -> Callable[..., Any]:
    """A function of ``symbols`` (positionally) computing ``expr`` with ``module``
    (default ``tidu.numpy``, so tidu transforms can trace it; plain ``numpy`` works).
    Shared sub-expressions are computed once. A function no primitive means is the
    expression language's composition (``gamma``, ``polygamma(n, x)`` of a constant
    integer n, ``sec``...), and a primitive's meaning (``log(Abs(gamma(x)))``) that primitive."""
    if isinstance(expr, int | float | complex):
        expr = number(expr)
    if not isinstance(expr, sympy.Basic):
        raise TypeError(f"from_sympy takes a SymPy expression, got {type(expr).__name__}")
    symbols = list(symbols)
    symbolic = _Symbolic()
    symbolic(expr)
    missing = sorted(str(s) for s, v in symbolic.known.items() if s.is_Symbol and s not in symbols)
    if missing:
        raise ValueError(f"from_sympy: free symbol(s) {', '.join(missing)} not in symbols")
    patterns = _meanings()
    plan: dict[sympy.Basic, tuple[str, list[sympy.Basic], Any]] = {}
    order: list[sympy.Basic] = []
    stack: list[tuple[sympy.Basic, bool]] = [(expr, False)]
    while stack:  # post-order, iteratively, each distinct sub-expression once
        e, ready = stack.pop()
        if ready:
            order.append(e)
        elif e not in plan:
            plan[e] = _split(e, symbolic, patterns)
            stack.append((e, True))
            stack.extend((s, False) for s in reversed(plan[e][1]) if s not in plan)

    def fn(*args: Any) -> Any:
        if len(args) != len(symbols):
            raise TypeError(f"expected {len(symbols)} argument(s), got {len(args)}")
        mod = tnp if module is None else module
        env = dict(zip(symbols, args, strict=True))
        val: dict[sympy.Basic, Any] = {}
        for e in order:
            if e in val:
                continue
            kind, subs, extra = plan[e]
            if kind == "symbol":
                val[e] = env[e]
            elif kind == "const":
                val[e] = extra
            else:
                val[e] = _build(kind, [val[s] for s in subs], extra, mod)
        return val[expr]

    fn.__doc__ = f"A SymPy expression as a function of ({', '.join(map(str, symbols))})."
    return name_parameters(fn, [str(s) for s in symbols], "sympy_fn")


__all__ = ["from_sympy", "number", "to_sympy"]
