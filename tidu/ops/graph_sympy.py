"""A graph's outputs as SymPy (``to_sympy``, re-exported by ``tidu.sympy``): each
elementwise primitive through its ``meaning`` (``tidu.ops.meaning``), ``select`` as
``Piecewise``, ``compare`` as a relation, the structural ops through their NumPy
reference kernels on arrays of SymPy expressions.

It sits in ``tidu.ops`` with the meanings it reads, below ``tidu.transforms``, whose
``GraphView.formula`` shows a graph this way. SymPy is imported on first use.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from tidu.core.graph import MaterializedGraph
from tidu.core.keys import Literal, is_complex
from tidu.ops import reference
from tidu.ops.catalog import catalog
from tidu.ops.meaning import meaning_sympy, number

# SymPy's relation (class name) for each direction of ``compare``
_RELATIONS = {"EQ": "Eq", "NE": "Ne", "LT": "Lt", "LE": "Le", "GT": "Gt", "GE": "Ge"}
# structural ops whose NumPy reference kernels move SymPy expressions about as they are
_SHAPE_OPS = ("broadcast_in_dim", "reshape", "transpose", "reduce_sum", "reduce_prod",
              "dot_general", "slice", "dynamic_slice", "dynamic_update_slice", "pad", "concatenate")


def _elementwise(fn: Callable[..., Any], args: list[np.ndarray]) -> np.ndarray:
    return np.asarray(np.frompyfunc(fn, len(args), 1)(*args), dtype=object)


def _reduce_max(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    import sympy

    keep = [i for i in range(x.ndim) if i not in axes]
    moved = np.transpose(x, keep + list(axes))
    rows = moved.reshape(math.prod(moved.shape[: len(keep)]), -1)
    out = [sympy.Max(*r) if len(r) else -sympy.oo for r in rows]
    return np.array(out, dtype=object).reshape([x.shape[i] for i in keep])


def _node_value(graph: MaterializedGraph, i: int, vals: list[np.ndarray]) -> np.ndarray:
    import sympy

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
        return _elementwise(getattr(sympy, _RELATIONS[at["direction"]]), args)
    if n.op == "select":
        return _elementwise(lambda p, a, b: sympy.Piecewise((a, p), (b, True)), args)
    if n.op == "reduce_max":
        return _reduce_max(args[0], at["axes"])
    if n.op in _SHAPE_OPS:
        return np.asarray(reference.kernel_of(n.op)(*args, **at), dtype=object)
    prim = catalog().get(n.op)
    if prim is None:
        raise ValueError(f"to_sympy: {n.op} is not a primitive of the active catalog")
    if prim.decl.meaning is None:
        if prim.decl.type_rule not in ("elementwise", "abs"):
            raise ValueError(f"to_sympy: primitive {n.op} has no meaning in the rule files")
        # a primitive computed by its kernel only (gammainc_da, hyp1f1): an undefined SymPy
        # function of its name and attributes, so that a graph using it still prints
        fn = sympy.Function(_opaque_name(n.op, at), real=not is_complex(n.aval.dtype),
                            __dict__={"_latex": _opaque_latex})
        return _elementwise(fn, args)
    return _elementwise(lambda *a: meaning_sympy(prim, a), args)


def _opaque_name(op: str, attrs: Mapping[str, Any]) -> str:
    """``gammainc_da[order=1]``: the name of a primitive without a meaning as SymPy prints
    it, its attributes spelled as in the rule files (they select what it computes)."""
    if not attrs:
        return op
    return f"{op}[{', '.join(f'{k}={_attr_text(v)}' for k, v in attrs.items())}]"


def _opaque_latex(self: Any, printer: Any) -> str:
    """LaTeX of such a function: ``\\operatorname{zeta\\_d}_{[order\\_s=1]}(x, 2)`` (SymPy's
    default would read the name as a Greek letter with a subscript)."""
    op, _, attrs = type(self).__name__.partition("[")
    text = r"\operatorname{" + op.replace("_", r"\_") + "}"
    if attrs:
        text += r"_{\left[" + attrs[:-1].replace("_", r"\_").replace('"', "") + r"\right]}"
    args = ", ".join(printer._print(a) for a in self.args)  # noqa: SLF001 (SymPy's printer protocol)
    return text + r"\left(" + args + r"\right)"


def _attr_text(v: Any) -> str:
    if isinstance(v, tuple | list):
        return f"({', '.join(_attr_text(x) for x in v)})"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    return str(v)


def _input_symbols(graph: MaterializedGraph, symbols: Any) -> list[Any]:
    import sympy

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


def _uses(graph: MaterializedGraph) -> list[int]:
    """How often each node is read as an operand (each occurrence), plus one if it is an
    output (an output listed twice, a symmetric pair of a Hessian, is still printed whole)."""
    uses = [0] * len(graph.nodes)
    for n in graph.nodes:
        for j in n.inputs:
            uses[j] += 1
    for o in set(graph.outputs):
        uses[o] += 1
    return uses


# A shared value whose expression has at most this many operations is written out where
# it is used (tanh(x), x*y, 2*x): a name for it would not be shorter, only harder to read.
INLINE_OPS = 2


def to_sympy(
    graph: MaterializedGraph,
    symbols: Sequence[Any] | Mapping[Any, Any] | None = None,
    *,
    cse: bool = False,
) -> Any:
    """SymPy expressions for the outputs of ``graph`` (a list, one per output); a
    ``GraphView`` from ``tidu.make_graph`` works too.

    Inputs become ``symbols`` (in the graph's input order, or a mapping from input
    name), by default real Symbols named after the input keys. A rank-0 output is a
    SymPy expression, a tensor output a ``sympy.Array`` of them. Elementwise primitives
    use their ``meaning`` from the rule files, ``select`` becomes ``Piecewise``.

    The expressions are trees: a value the graph shares is written out at each use, so
    they can be exponentially larger than the graph (a high-order derivative). With
    ``cse=True`` the result is ``(replacements, outputs)`` in ``sympy.cse``'s form: every
    value the graph uses more than once (unless its expression has at most
    ``INLINE_OPS`` operations) is named ``x0``, ``x1``, ... (a name no input has), defined
    by one ``(symbol, expression)`` pair in the order of the graph, and used by name
    afterwards; its size is then proportional to the graph's.
    """
    import sympy

    graph = getattr(graph, "graph", graph)  # a GraphView from tidu.make_graph
    if not isinstance(graph, MaterializedGraph):
        raise TypeError(f"to_sympy takes a MaterializedGraph, got {type(graph).__name__}")
    inputs = _input_symbols(graph, symbols)
    vals = _leaf_values(graph, inputs)
    replacements: list[tuple[Any, Any]] = []
    uses = _uses(graph) if cse else []
    taken = {str(s) for s in inputs}
    names = (f"x{k}" for k in itertools.count() if f"x{k}" not in taken)
    for i, n in enumerate(graph.nodes):
        if n.op is not None:
            vals[i] = _node_value(graph, i, vals)
            if cse and uses[i] > 1 and n.op != "constant":
                vals[i] = _named(vals[i], names, not is_complex(n.aval.dtype), replacements)
    out = []
    for o in graph.outputs:
        v = vals[o]
        if cse:
            v = _elementwise(compact, [v])
        out.append(v[()] if v.ndim == 0 else sympy.Array(v.tolist()))
    if cse:
        replacements = [(name, compact(e)) for name, e in replacements]
    return (replacements, out) if cse else out


# Sums of at most this many operations are also tried expanded by ``compact``; those of
# more than ``SMALL_SUM_OPS`` only where no enclosing sum of that size was tried already:
# each level of a Horner scheme is a sum inside the last, and trying each would cost time
# quadratic in its length for what trying the whole scheme once decides.
COMPACT_OPS = 120
SMALL_SUM_OPS = 20


def compact(e: Any) -> Any:
    """``e`` with each sum written the shorter way: as the graph computes it (a Horner
    scheme, a factored product) or expanded (``x**8 - 28*x**6 + 210*x**4 - 420*x**2 +
    105``, as a mathematician writes a polynomial), by printed length. Products and
    function arguments are compacted part by part; sums of more than ``COMPACT_OPS``
    operations are left as they are."""
    return _compact(e, True)


def _compact(e: Any, try_large: bool) -> Any:
    import sympy

    if not isinstance(e, sympy.Expr) or e.is_Atom:
        return e
    small = e.is_Add and ops_at_most(e, SMALL_SUM_OPS)
    large = e.is_Add and not small and try_large and ops_at_most(e, COMPACT_OPS)
    if e.is_Add or e.is_Mul:
        parts = [_compact(a, try_large and not large) for a in e.args]
    else:  # a function's arguments or a power's base and exponent: sums of their own
        parts = [_compact(a, True) for a in e.args]
    if e.is_Add or e.is_Mul or e.is_Pow or isinstance(e, sympy.Function):
        e = e.func(*parts)
    if not (small or large) or not e.is_Add:
        return e
    expanded = sympy.expand(e, power_exp=False, power_base=False, log=False)  # distribute only
    return expanded if len(str(expanded)) < len(str(e)) else e


def _named(v: np.ndarray, names: Iterator[str], real: bool, replacements: list[tuple[Any, Any]]) -> np.ndarray:
    """``v`` with each element that is not small replaced by a new symbol (recorded)."""
    import sympy

    def name(e: Any) -> Any:
        if not isinstance(e, sympy.Expr) or ops_at_most(e, INLINE_OPS):
            return e
        s = sympy.Symbol(next(names), real=True) if real else sympy.Symbol(next(names))
        replacements.append((s, e))
        return s

    return _elementwise(name, [v])


def ops_at_most(e: Any, limit: int) -> bool:
    """Whether ``e`` has at most ``limit`` operations (as ``sympy.count_ops`` counts a sum
    or product of n terms: n - 1), without walking more of it than that."""
    count, stack = 0, [e]
    while stack:
        a = stack.pop()
        if a.is_Atom:
            if a.is_Number and a.is_negative:  # written with a minus
                count += 1
            continue
        count += max(len(a.args) - 1, 1) if (a.is_Add or a.is_Mul) else 1
        if count > limit:
            return False
        stack.extend(a.args)
    return True


def _leaf_values(graph: MaterializedGraph, inputs: list[Any]) -> list[np.ndarray]:
    import sympy

    vals: list[np.ndarray] = [None] * len(graph.nodes)  # type: ignore[list-item]
    for i, s in zip(graph.inputs, inputs, strict=True):
        shape = graph.nodes[i].aval.shape
        if shape:
            flat = [sympy.Symbol(f"{s}[{j}]", **s.assumptions0) for j in range(math.prod(shape))]
            vals[i] = np.array(flat, dtype=object).reshape(shape)
        else:
            vals[i] = np.asarray(s, dtype=object)
    return vals


__all__ = ["INLINE_OPS", "compact", "ops_at_most", "to_sympy"]
