"""Bridge to SymPy, both ways (re-exported by ``tidu.sympy``):

- ``from_sympy(expr, symbols)``: a function of the symbols (positionally) that tidu
  transforms can trace.
- ``to_sympy(graph, symbols=None)``: the outputs of a ``MaterializedGraph`` as SymPy,
  each elementwise primitive through its ``meaning`` in the rule files.
- ``number(v)``: a SymPy number for a constant.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np
import sympy

import tidu.numpy as tnp
from tidu.core.graph import MaterializedGraph
from tidu.core.keys import Literal, is_complex
from tidu.ops import reference as semantics
from tidu.ops.catalog import catalog
from tidu.ops.kernels import function_primitives
from tidu.ops.meaning import meaning_sympy, number
from tidu.sympy.expr import function_of, name_parameters

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


def _split(e: sympy.Basic, symbolic: _Symbolic) -> tuple[str, list[sympy.Basic], Any]:
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
    prim = function_primitives(catalog()).get(name)  # the primitive meaning this function (Abs: abs)
    if prim is not None:
        arity = len(catalog()[prim].operands)
        if len(e.args) == arity:
            return "call", list(e.args), prim
        if arity == 2 and len(e.args) > 2:  # SymPy's n-ary Max and Min: associative, folded
            return "fold", list(e.args), prim
    means = sorted(f for f in function_primitives(catalog())
                   if isinstance(getattr(sympy, f, None), sympy.FunctionClass))
    known = ", ".join(["Add", "Mul", "Pow", "numbers", *means])
    raise TypeError(f"from_sympy: cannot convert {name} ({e}); supported: {known} "
                    "(the functions a primitive of the active catalog means)")


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
    Shared sub-expressions are computed once."""
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
    plan: dict[sympy.Basic, tuple[str, list[sympy.Basic], Any]] = {}
    order: list[sympy.Basic] = []
    stack: list[tuple[sympy.Basic, bool]] = [(expr, False)]
    while stack:  # post-order, iteratively, each distinct sub-expression once
        e, ready = stack.pop()
        if ready:
            order.append(e)
        elif e not in plan:
            plan[e] = _split(e, symbolic)
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


# ---------------------------------------------------------------------------
# tidu graph -> SymPy
# ---------------------------------------------------------------------------

_RELATIONS = {"EQ": sympy.Eq, "NE": sympy.Ne, "LT": sympy.Lt, "LE": sympy.Le,
              "GT": sympy.Gt, "GE": sympy.Ge}
_SHAPE_OPS = ("broadcast_in_dim", "reshape", "transpose", "reduce_sum", "reduce_prod",
              "dot_general", "slice", "pad", "concatenate")


def _elementwise(fn: Callable[..., Any], args: list[np.ndarray]) -> np.ndarray:
    return np.asarray(np.frompyfunc(fn, len(args), 1)(*args), dtype=object)


def _reduce_max(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    keep = [i for i in range(x.ndim) if i not in axes]
    moved = np.transpose(x, keep + list(axes))
    rows = moved.reshape(math.prod(moved.shape[: len(keep)]), -1)
    out = [sympy.Max(*r) if len(r) else -sympy.oo for r in rows]
    return np.array(out, dtype=object).reshape([x.shape[i] for i in keep])


def _node_value(graph: MaterializedGraph, i: int, vals: list[np.ndarray]) -> np.ndarray:
    n = graph.nodes[i]
    args = [vals[j] for j in n.inputs]
    at = dict(n.attrs.items())
    if n.op == "constant":
        lit: Literal = at["value"]
        return _elementwise(number, [np.asarray(lit.array, dtype=object)])
    if n.op == "convert":
        src = graph.nodes[n.inputs[0]].aval.dtype
        if is_complex(src) and not is_complex(at["dtype"]):
            return _elementwise(sympy.re, args)
        return args[0]
    if n.op == "compare":
        return _elementwise(_RELATIONS[at["direction"]], args)
    if n.op == "select":
        return _elementwise(lambda p, a, b: sympy.Piecewise((a, p), (b, True)), args)
    if n.op == "reduce_max":
        return _reduce_max(args[0], at["axes"])
    if n.op in _SHAPE_OPS:
        return np.asarray(semantics.kernel_of(n.op)(*args, **at), dtype=object)
    prim = catalog().get(n.op)
    if prim is None or prim.decl.meaning is None:
        raise ValueError(f"to_sympy: primitive {n.op} has no meaning in the rule files")
    return _elementwise(lambda *a: meaning_sympy(prim, a), args)


def _input_symbols(graph: MaterializedGraph, symbols: Any) -> list[Any]:
    keys = graph.input_keys
    if symbols is None:
        out = []
        for i, k in zip(graph.inputs, keys, strict=True):
            real = not is_complex(graph.nodes[i].aval.dtype)
            out.append(sympy.Symbol(str(k), real=True) if real else sympy.Symbol(str(k)))
        return out
    if isinstance(symbols, Mapping):
        by_name = {str(k): v for k, v in symbols.items()}
        missing = [str(k) for k in keys if str(k) not in by_name]
        if missing:
            raise ValueError(f"to_sympy: no symbol given for input(s) {', '.join(missing)}")
        return [by_name[str(k)] for k in keys]
    symbols = list(symbols)
    if len(symbols) != len(keys):
        names = ", ".join(map(str, keys))
        raise ValueError(f"to_sympy: the graph has {len(keys)} input(s) ({names}), "
                         f"got {len(symbols)} symbol(s)")
    return symbols


def to_sympy(
    graph: MaterializedGraph,
    symbols: Sequence[Any] | Mapping[Any, Any] | None = None,
) -> list[Any]:
    """SymPy expressions for the outputs of ``graph`` (a list, one per output); a
    ``GraphView`` from ``tidu.make_graph`` works too.

    Inputs become ``symbols`` (in the graph's input order, or a mapping from input
    name), by default real Symbols named after the input keys. A rank-0 output is a
    SymPy expression, a tensor output a ``sympy.Array`` of them. Elementwise primitives
    use their ``meaning`` from the rule files, ``select`` becomes ``Piecewise``.
    """
    graph = getattr(graph, "graph", graph)  # a GraphView from tidu.make_graph
    if not isinstance(graph, MaterializedGraph):
        raise TypeError(f"to_sympy takes a MaterializedGraph, got {type(graph).__name__}")
    vals: list[np.ndarray] = [None] * len(graph.nodes)  # type: ignore[list-item]
    for i, s in zip(graph.inputs, _input_symbols(graph, symbols), strict=True):
        shape = graph.nodes[i].aval.shape
        if shape:
            flat = [sympy.Symbol(f"{s}[{j}]", **s.assumptions0) for j in range(math.prod(shape))]
            vals[i] = np.array(flat, dtype=object).reshape(shape)
        else:
            vals[i] = np.asarray(s, dtype=object)
    for i, n in enumerate(graph.nodes):
        if n.op is not None:
            vals[i] = _node_value(graph, i, vals)
    out = []
    for o in graph.outputs:
        v = vals[o]
        out.append(v[()] if v.ndim == 0 else sympy.Array(v.tolist()))
    return out
