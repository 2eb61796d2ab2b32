"""tidu.numpy core: shapes and axes (NumPy broadcasting), and the tracing helpers every
function uses: the trace of the operands, implicit ``convert`` and ``broadcast_in_dim``,
and operands as tracers (``_prep``)."""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tidu.core.keys import is_complex
from tidu.numpy._dtypes import _info
from tidu.trace.tracing import Trace, TraceError, Tracer

ArrayLike = Any
_CONST_INLINE = 4096  # constants up to this size are stored whole, not broadcast


# --- shapes ----------------------------------------------------------------------------


def _shape(x: Any) -> tuple[int, ...]:
    return x.shape if isinstance(x, Tracer) else np.shape(x)


def broadcast_shapes(*shapes: tuple[int, ...], what: str = "") -> tuple[int, ...]:
    """NumPy broadcasting of shapes, with an error that names every shape."""
    ndim = builtins.max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-ndim, 0):
        sizes = {s[i] for s in shapes if len(s) >= -i} - {1}
        if len(sizes) > 1:
            where = f"tnp.{what}: " if what else ""
            raise ValueError(f"{where}operands could not be broadcast together with shapes "
                             f"{' '.join(str(tuple(s)) for s in shapes)}; make them compatible "
                             "(equal sizes, or 1, aligned from the right) with reshape or "
                             "x[:, None]")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _norm_axis(axis: int, ndim: int, what: str) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"tnp.{what}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim


def _norm_axes(axis: int | Sequence[int] | None, ndim: int, what: str) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    out = tuple(_norm_axis(int(a), ndim, what) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"tnp.{what}: repeated axis in {axis}")
    return tuple(sorted(out))


# --- tracing helpers ---------------------------------------------------------------------


def _trace_of(xs: Sequence[Any]) -> Trace | None:
    """The innermost trace among the tracers in ``xs`` (None when all are concrete)."""
    best: Trace | None = None
    for x in xs:
        if isinstance(x, Tracer):
            x.check_alive()
            if best is None or x.trace.depth > best.depth:
                best = x.trace
    if best is not None:
        for x in xs:
            if isinstance(x, Tracer) and not x.trace.is_ancestor_of(best):
                raise TraceError("values of two unrelated traces are combined; a traced value "
                                 "escaped the transform that made it")
    return best


def _convert(t: Tracer, dtype: str) -> Tracer:
    if t.aval.dtype == dtype:
        return t
    if is_complex(t.aval.dtype) and not is_complex(dtype):
        raise TypeError(f"cannot convert {t.aval.dtype} to {dtype} implicitly; use tnp.real")
    return t.trace.emit("convert", [t], {"dtype": dtype})


def _broadcast_to(t: Tracer, shape: tuple[int, ...]) -> Tracer:
    if t.shape == shape:
        return t
    dims = tuple(range(len(shape) - t.ndim, len(shape)))
    return t.trace.emit("broadcast_in_dim", [t], {"shape": shape, "dims": dims})


def _prep(trace: Trace, x: Any, dtype: str, shape: tuple[int, ...] | None = None) -> Tracer:
    """``x`` as a tracer of ``trace`` with ``dtype`` (and broadcast to ``shape``)."""
    if isinstance(x, Tracer):
        t = x if x.trace is trace else Tracer(trace, trace.lift(x), x.aval, x.weak)
        t = _convert(t, dtype)
        return t if shape is None else _broadcast_to(t, shape)
    arr = np.asarray(x, dtype=dtype)
    if shape is not None and arr.shape != shape and math.prod(shape) <= _CONST_INLINE:
        arr = np.broadcast_to(arr, shape).copy()
    t = trace.constant(arr)
    return t if shape is None else _broadcast_to(t, shape)


def _tracer(trace: Trace, x: Any) -> Tracer:
    return _prep(trace, x, _info(x)[0])
