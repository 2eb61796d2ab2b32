"""Slices at offsets known only when the program runs, as ``jax.lax``: ``dynamic_slice``,
``dynamic_update_slice`` and their one-axis forms ``dynamic_slice_in_dim``,
``dynamic_index_in_dim``, ``dynamic_update_slice_in_dim``, ``dynamic_update_index_in_dim``
(docs/control-flow.md, "Indexing in loop bodies").

A start index may be a Python int or a traced integer (a loop counter). JAX's rules hold:
a negative start counts from the end, then every start is clamped so that the slice fits in
the operand (a slice never reads or writes outside it). Along an axis with a traced start
the slice is the primitive ``dynamic_slice`` (``dynamic_update_slice``), one per such
axis: its cost is the slice's size, and on XLA an update is made in place. With no traced
operand or start, NumPy computes the result."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import tidu.numpy as tnp
from tidu.core.keys import holds_index_arithmetic, is_integer
from tidu.numpy import ArrayLike
from tidu.trace.tracing import Tracer


def primitive_slice(x: Any, start: Any, axis: int, size: int) -> Any:
    """The primitive ``dynamic_slice``: one axis, a traced start."""
    return tnp.op("dynamic_slice")(x, start, axis=axis, size=size)


def primitive_update(x: Any, update: Any, start: Any, axis: int) -> Any:
    """The primitive ``dynamic_update_slice``: one axis, a traced start."""
    return tnp.op("dynamic_update_slice")(x, update, start, axis=axis)


def _shape_dtype(x: Any) -> tuple[tuple[int, ...], str]:
    if isinstance(x, Tracer):
        return x.shape, x.aval.dtype
    a = np.asarray(x)
    return a.shape, a.dtype.name


def _starts(fn: str, start_indices: Any, ndim: int, shape: tuple[int, ...]) -> list[Any]:
    """The start indices as one int or traced integer scalar per axis, checked."""
    if isinstance(start_indices, Tracer):
        if start_indices.ndim != 1:
            raise TypeError(f"{fn}: start_indices must be a sequence or a 1-D array of integers, got a traced "
                            f"array of shape {start_indices.shape}")
        starts: list[Any] = [start_indices[k] for k in range(start_indices.shape[0])]
    elif isinstance(start_indices, np.ndarray):
        starts = list(start_indices.reshape(-1)) if start_indices.ndim == 1 else [start_indices]
    elif isinstance(start_indices, Sequence):
        starts = list(start_indices)
    else:
        raise TypeError(f"{fn}: start_indices must be a sequence of integers (one per axis), got "
                        f"{type(start_indices).__name__}")
    if len(starts) != ndim:
        raise TypeError(f"{fn}: start_indices has {len(starts)} entries, the operand has {ndim} axes (shape "
                        f"{shape}); give one start per axis")
    out = []
    for axis, s in enumerate(starts):
        dtype = s.aval.dtype if isinstance(s, Tracer) else np.asarray(s).dtype.name
        shape_s = s.shape if isinstance(s, Tracer) else np.shape(s)
        if not is_integer(dtype) or shape_s != ():
            raise TypeError(f"{fn}: start index {axis} must be an integer scalar, got dtype {dtype} and shape "
                            f"{shape_s}")
        out.append(s if isinstance(s, Tracer) else int(s))
    return out


def _clamped(fn: str, start: Any, size: int, n: int, allow_negative_indices: bool) -> Any:
    """JAX's start: a negative one counts from the end, then clamped into [0, n - size]."""
    if isinstance(start, Tracer):
        if not holds_index_arithmetic(start.aval.dtype, n):
            start = start.astype(np.int64)
        if allow_negative_indices:
            start = tnp.where(start < 0, start + n, start)
        return tnp.clip(start, 0, n - size)
    if start < 0 and not allow_negative_indices:  # (as jax.lax: a traced start is clamped instead)
        raise ValueError(f"{fn}: start index {start} is negative (axis of size {n}) with "
                         "allow_negative_indices=False; a negative start counts from the end only with True")
    if start < 0:
        start += n
    return min(max(start, 0), n - size)


def dynamic_slice(operand: ArrayLike, start_indices: Any, slice_sizes: Sequence[int], *,
                  allow_negative_indices: bool = True) -> Any:
    """``operand[s0:s0+k0, s1:s1+k1, ...]`` for starts ``s`` (ints or traced integers) and
    constant sizes ``k`` (``jax.lax.dynamic_slice``); the starts are clamped so the slice
    fits."""
    shape, _ = _shape_dtype(operand)
    starts = _starts("dynamic_slice", start_indices, len(shape), shape)
    sizes = _sizes("dynamic_slice", slice_sizes, shape)
    starts = [_clamped("dynamic_slice", s, k, n, allow_negative_indices)
              for s, k, n in zip(starts, sizes, shape, strict=True)]
    if not any(isinstance(s, Tracer) for s in starts) and not isinstance(operand, Tracer):
        return np.asarray(operand)[tuple(slice(s, s + k) for s, k in zip(starts, sizes, strict=True))].copy()
    out = operand
    static = tuple(slice(None) if isinstance(s, Tracer) else slice(s, s + k)
                   for s, k in zip(starts, sizes, strict=True))
    if any(sl != slice(None) for sl in static):
        out = out[static] if isinstance(out, Tracer) else np.asarray(out)[static]
    for axis, (s, k) in enumerate(zip(starts, sizes, strict=True)):
        if isinstance(s, Tracer):
            out = primitive_slice(out, s, axis, k)
    return out


def _sizes(fn: str, slice_sizes: Sequence[int], shape: tuple[int, ...]) -> list[int]:
    sizes = list(slice_sizes) if isinstance(slice_sizes, Sequence | np.ndarray) else None
    if sizes is None or len(sizes) != len(shape):
        raise TypeError(f"{fn}: slice_sizes must give one size per axis of the operand (shape {shape}), got "
                        f"{slice_sizes!r}")
    out = []
    for axis, (k, n) in enumerate(zip(sizes, shape, strict=True)):
        if isinstance(k, Tracer) or not isinstance(k, int | np.integer) or not 0 <= int(k) <= n:
            raise TypeError(f"{fn}: slice size {axis} must be a constant int in [0, {n}] (the operand's shape is "
                            f"{shape}), got {k!r}")
        out.append(int(k))
    return out


def dynamic_update_slice(operand: ArrayLike, update: ArrayLike, start_indices: Any, *,
                         allow_negative_indices: bool = True) -> Any:
    """``operand`` with the block at ``start_indices`` replaced by ``update``
    (``jax.lax.dynamic_update_slice``): a new array; the starts are clamped so the block
    fits, and update has the operand's dtype and rank."""
    shape, dtype = _shape_dtype(operand)
    ushape, udtype = _shape_dtype(update)
    if udtype != dtype:
        raise TypeError(f"dynamic_update_slice: update has dtype {udtype}, the operand {dtype}; they must be the "
                        "same (convert update with .astype)")
    if len(ushape) != len(shape) or any(u > n for u, n in zip(ushape, shape, strict=True)):
        raise TypeError(f"dynamic_update_slice: update of shape {ushape} does not fit in the operand of shape "
                        f"{shape}: it needs the operand's rank and no larger size along any axis")
    starts = _starts("dynamic_update_slice", start_indices, len(shape), shape)
    if 0 in ushape:  # an empty block changes nothing
        return operand if isinstance(operand, Tracer) else np.array(operand)
    starts = [_clamped("dynamic_update_slice", s, k, n, allow_negative_indices)
              for s, k, n in zip(starts, ushape, shape, strict=True)]
    if not any(isinstance(v, Tracer) for v in (operand, update, *starts)):
        out = np.array(operand)
        out[tuple(slice(s, s + k) for s, k in zip(starts, ushape, strict=True))] = update
        return out
    return _updated(operand, update, starts, 0)


def _updated(operand: Any, update: Any, starts: list[Any], axis: int) -> Any:
    """``operand`` with ``update`` written at clamped ``starts`` along ``axis`` and after:
    along a traced start, the block the update lands in is read, updated along the later
    axes and written back (``dynamic_update_slice``); constant starts are static slices."""
    shape = _shape_dtype(operand)[0]
    ushape = _shape_dtype(update)[0]
    while axis < len(shape) and not isinstance(starts[axis], Tracer) and (starts[axis], ushape[axis]) == (
            0, shape[axis]):
        axis += 1  # a whole axis: nothing to select
    if axis == len(shape):
        return update
    s, k = starts[axis], ushape[axis]
    if isinstance(s, Tracer):
        block = primitive_slice(operand, s, axis, k) if axis + 1 < len(shape) else None
        new = update if block is None else _updated(block, update, starts, axis + 1)
        return primitive_update(operand, new, s, axis)
    index = (slice(None),) * axis + (slice(s, s + k),)
    block = operand[index] if isinstance(operand, Tracer) else np.asarray(operand)[index]
    return tnp.at(operand)[index].set(_updated(block, update, starts, axis + 1))


def dynamic_slice_in_dim(operand: ArrayLike, start_index: Any, slice_size: int = 1, axis: int = 0, *,
                         allow_negative_indices: bool = True) -> Any:
    """``dynamic_slice`` along one axis: ``slice_size`` entries from ``start_index``."""
    shape, _ = _shape_dtype(operand)
    axis = _axis("dynamic_slice_in_dim", axis, len(shape))
    starts = [0] * len(shape)
    starts[axis] = start_index
    sizes = list(shape)
    sizes[axis] = slice_size
    return dynamic_slice(operand, starts, sizes, allow_negative_indices=allow_negative_indices)


def dynamic_index_in_dim(operand: ArrayLike, index: Any, axis: int = 0, keepdims: bool = True, *,
                         allow_negative_indices: bool = True) -> Any:
    """The entry at ``index`` along ``axis`` (kept as an axis of size 1 with ``keepdims``)."""
    shape, _ = _shape_dtype(operand)
    axis = _axis("dynamic_index_in_dim", axis, len(shape))
    out = dynamic_slice_in_dim(operand, index, 1, axis, allow_negative_indices=allow_negative_indices)
    return out if keepdims else tnp.squeeze(out, axis=axis)


def dynamic_update_slice_in_dim(operand: ArrayLike, update: ArrayLike, start_index: Any, axis: int, *,
                                allow_negative_indices: bool = True) -> Any:
    """``dynamic_update_slice`` along one axis: ``update`` written from ``start_index``."""
    shape, _ = _shape_dtype(operand)
    axis = _axis("dynamic_update_slice_in_dim", axis, len(shape))
    starts: list[Any] = [0] * len(shape)
    starts[axis] = start_index
    return dynamic_update_slice(operand, update, starts, allow_negative_indices=allow_negative_indices)


def dynamic_update_index_in_dim(operand: ArrayLike, update: ArrayLike, index: Any, axis: int, *,
                                allow_negative_indices: bool = True) -> Any:
    """``operand`` with the entry at ``index`` along ``axis`` replaced by ``update`` (of the
    operand's shape without that axis, or with size 1 there)."""
    shape, _ = _shape_dtype(operand)
    axis = _axis("dynamic_update_index_in_dim", axis, len(shape))
    ushape, _ = _shape_dtype(update)
    if len(ushape) == len(shape) - 1:
        update = tnp.expand_dims(update, axis)
    return dynamic_update_slice_in_dim(operand, update, index, axis, allow_negative_indices=allow_negative_indices)


def _axis(fn: str, axis: int, ndim: int) -> int:
    if not isinstance(axis, int | np.integer) or not -ndim <= axis < ndim:
        raise ValueError(f"{fn}: axis {axis!r} is out of range for an operand with {ndim} axes")
    return int(axis) % ndim


__all__ = ["dynamic_index_in_dim", "dynamic_slice", "dynamic_slice_in_dim", "dynamic_update_index_in_dim",
           "dynamic_update_slice", "dynamic_update_slice_in_dim"]
