"""``tidu.op(name)`` (also ``tidu.numpy.op``): a NumPy-like function for any primitive of
the active catalog, user rule files' primitives included. Its operands broadcast and
promote as in ``tidu.numpy``; concrete operands are evaluated with the primitive's
reference kernel (``tidu.ops.reference``), traced ones add the primitive to the trace."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tidu.core.keys import Attrs, is_complex, is_inexact
from tidu.numpy._core import _prep, _shape, _trace_of, _tracer, broadcast_shapes
from tidu.numpy._dtypes import _info, result_type
from tidu.ops.catalog import Primitive, catalog
from tidu.ops.reference import evaluate

# the type rules whose operands broadcast together and promote to one dtype
_BROADCASTING = ("elementwise", "compare", "select")


def _promoted(prim: Primitive, operands: tuple[Any, ...]) -> str:
    dtype = result_type(*operands)
    if dtype not in prim.dtypes and not is_inexact(dtype) and "float64" in prim.dtypes:
        dtype = "float64"  # ints and bools go to float, as for tnp.exp
    if dtype not in prim.dtypes:
        kind = "complex" if is_complex(dtype) else dtype
        raise TypeError(f"tidu.op({prim.name!r}) does not accept {kind} operands (accepts "
                        f"{', '.join(sorted(prim.dtypes))}; declared at {prim.loc})")
    return dtype


def _apply(name: str, operands: tuple[Any, ...], attrs: dict[str, Any]) -> Any:
    prim = catalog().get_primitive(name)
    if not prim.variadic and len(operands) != len(prim.operands):
        raise TypeError(f"tidu.op({name!r}) takes {len(prim.operands)} operand(s) "
                        f"({', '.join(prim.operands)}), got {len(operands)}")
    trace = _trace_of(operands)
    decl = getattr(prim, "decl", None)  # (an internal op, a loop say, has none: its operands as they are)
    rule = decl.type_rule if decl is not None else None
    if rule in _BROADCASTING:
        data = operands[1:] if rule == "select" else operands
        dtype = _promoted(prim, data) if rule != "select" else result_type(*data)
        shape = broadcast_shapes(*(_shape(x) for x in operands), what=name)
        dtypes = ["bool"] * (rule == "select") + [dtype] * len(data)
        if trace is None:
            args = [np.broadcast_to(np.asarray(x, dtype=d), shape) for x, d in zip(operands, dtypes, strict=True)]
            return evaluate(name, args, Attrs(attrs))
        weak = all(_info(x)[1] for x in data)
        refs = [_prep(trace, x, d, shape) for x, d in zip(operands, dtypes, strict=True)]
        return trace.emit(name, refs, attrs, weak=weak and rule == "elementwise")
    if trace is None:
        return evaluate(name, [np.asarray(x) for x in operands], Attrs(attrs))
    return trace.emit(name, [_tracer(trace, x) for x in operands], attrs)


def op(name: str) -> Callable[..., Any]:
    """A NumPy-like function for the primitive ``name`` of the active catalog (looked up
    at each call, so it may be made before ``use_rules``): ``op("logistic")(x)``. For
    elementwise, compare and select primitives the operands broadcast and promote as in
    ``tidu.numpy`` (Python scalars weakly typed; ints go to float64 when the primitive
    takes floats only); attributes are keyword arguments (``op("reduce_sum")(x,
    axes=(0,))``). Works on NumPy values (eagerly) and under every transform."""
    if not isinstance(name, str):
        raise TypeError(f"tidu.op takes a primitive's name, got {type(name).__name__}")

    def fn(*operands: Any, **attrs: Any) -> Any:
        return _apply(name, operands, attrs)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"The primitive {name} of the active catalog (tidu.op)."
    return fn


__all__ = ["op"]
