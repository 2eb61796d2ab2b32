"""tidu.numpy shape manipulation: reshape, transpose, squeeze, broadcast_to, concatenate,
stack, ..."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..tracing import Tracer
from ._core import (
    ArrayLike,
    _broadcast_to,
    _norm_axes,
    _norm_axis,
    _prep,
    _shape,
    _trace_of,
    _tracer,
    broadcast_shapes,
)
from ._dtypes import result_type


def shape(x: ArrayLike) -> tuple[int, ...]:
    return _shape(x)


def ndim(x: ArrayLike) -> int:
    return len(_shape(x))


def reshape(x: ArrayLike, newshape: int | Sequence[int], *more: int, order: str = "C") -> Any:
    """Row-major reshape; one entry may be -1. ``x.reshape(2, 3)`` also works."""
    if order != "C":
        raise NotImplementedError("tnp.reshape supports order='C' (row-major) only")
    if more:
        newshape = (newshape, *more)  # type: ignore[assignment]
    dims = [int(newshape)] if isinstance(newshape, int | np.integer) else [int(d) for d in newshape]
    if not isinstance(x, Tracer):
        return np.reshape(x, dims)
    x.check_alive()
    if dims.count(-1) > 1:
        raise ValueError("tnp.reshape: at most one dimension can be -1")
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        if known == 0 or x.size % known:
            raise ValueError(f"tnp.reshape: cannot reshape an array of shape {x.shape} "
                             f"into {tuple(dims)}")
        dims[dims.index(-1)] = x.size // known
    shape_ = tuple(dims)
    if math.prod(shape_) != x.size:
        raise ValueError(f"tnp.reshape: cannot reshape an array of shape {x.shape} (size {x.size}) "
                         f"into shape {shape_}")
    return x if shape_ == x.shape else x.trace.emit("reshape", [x], {"shape": shape_})


def ravel(x: ArrayLike) -> Any:
    return reshape(x, -1)


flatten = ravel


def transpose(x: ArrayLike, axes: Sequence[int] | None = None, *more: int) -> Any:
    """Permute axes (reverse them by default). ``x.transpose(1, 0)`` also works."""
    if more:
        axes = (axes, *more)  # type: ignore[assignment]
    if not isinstance(x, Tracer):
        return np.transpose(x, axes)
    x.check_alive()
    perm = tuple(range(x.ndim))[::-1] if axes is None else tuple(
        _norm_axis(int(a), x.ndim, "transpose") for a in axes)
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"tnp.transpose: axes {axes} are not a permutation of range({x.ndim})")
    return x if perm == tuple(range(x.ndim)) else x.trace.emit("transpose", [x], {"perm": perm})


def swapaxes(x: ArrayLike, axis1: int, axis2: int) -> Any:
    if not isinstance(x, Tracer):
        return np.swapaxes(x, axis1, axis2)
    perm = list(range(x.ndim))
    a, b = _norm_axis(axis1, x.ndim, "swapaxes"), _norm_axis(axis2, x.ndim, "swapaxes")
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


def expand_dims(x: ArrayLike, axis: int) -> Any:
    if not isinstance(x, Tracer):
        return np.expand_dims(x, axis)
    axis = _norm_axis(axis, x.ndim + 1, "expand_dims")
    return reshape(x, x.shape[:axis] + (1,) + x.shape[axis:])


def squeeze(x: ArrayLike, axis: int | Sequence[int] | None = None) -> Any:
    if not isinstance(x, Tracer):
        return np.squeeze(x, axis)
    axes = tuple(i for i, d in enumerate(x.shape) if d == 1) if axis is None else _norm_axes(
        axis, x.ndim, "squeeze")
    if any(x.shape[a] != 1 for a in axes):
        raise ValueError(f"tnp.squeeze: cannot squeeze axes {axes} of shape {x.shape}")
    return reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


def broadcast_to(x: ArrayLike, shape: Sequence[int]) -> Any:
    if not isinstance(x, Tracer):
        return np.broadcast_to(x, shape)
    x.check_alive()
    shape_ = tuple(int(d) for d in shape)
    if broadcast_shapes(x.shape, shape_, what="broadcast_to") != shape_:
        raise ValueError(f"tnp.broadcast_to: cannot broadcast shape {x.shape} to {shape_}")
    return _broadcast_to(x, shape_)


def concatenate(arrays: Sequence[ArrayLike], axis: int = 0) -> Any:
    arrays = list(arrays)
    trace = _trace_of(arrays)
    if trace is None:
        return np.concatenate(arrays, axis=axis)
    ranks = {len(_shape(a)) for a in arrays}
    if len(ranks) != 1 or 0 in ranks:
        raise ValueError("tnp.concatenate: arrays must have the same rank >= 1, got shapes "
                         + " ".join(str(_shape(a)) for a in arrays))
    axis = _norm_axis(axis, ranks.pop(), "concatenate")
    dtype = result_type(*arrays)
    parts = [_prep(trace, a, dtype) for a in arrays]
    if len(parts) == 1:
        return parts[0]
    for p in parts[1:]:
        if p.shape[:axis] + p.shape[axis + 1:] != parts[0].shape[:axis] + parts[0].shape[axis + 1:]:
            raise ValueError(f"tnp.concatenate: shapes {parts[0].shape} and {p.shape} differ "
                             f"outside axis {axis}")
    return trace.emit("concatenate", parts, {"axis": axis})


def stack(arrays: Sequence[ArrayLike], axis: int = 0) -> Any:
    arrays = list(arrays)
    if _trace_of(arrays) is None:
        return np.stack(arrays, axis=axis)
    shapes = {_shape(a) for a in arrays}
    if len(shapes) != 1:
        raise ValueError(f"tnp.stack: all arrays must have the same shape, got {sorted(shapes)}")
    nd = len(shapes.pop())
    axis = _norm_axis(axis, nd + 1, "stack")
    trace = _trace_of(arrays)
    assert trace is not None
    return concatenate([expand_dims(_tracer(trace, a), axis) for a in arrays], axis=axis)
