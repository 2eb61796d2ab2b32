"""What an array constant is made of, so a back end can build it instead of spelling it.

Derivative programs carry big constants with little information: identities and shifted
identities (the seed of a dense Jacobian or Hessian), one-hot basis vectors, index
ranges, values repeated along an axis. Written out element by element, an n x n identity
is O(n^2) text. ``structure(array)`` finds a plan of O(sum of dimensions) size:

- ``Splat(value)``: every element is ``value``;
- ``Broadcast(inner, dims)``: ``inner`` repeated along the axes not in ``dims``;
- ``Reshape(inner, inner_shape)``: ``inner`` reshaped (a basis of one-hot matrices is
  the identity, reshaped);
- ``Select(mask, on_true, on_false)``: two plans chosen elementwise by a ``Mask``;
- ``Iota(axis, start, step)``: an integer progression along one axis (exact integers
  only, in integer or float dtypes, so every back end computes the same values);
- ``Dense(array)``: anything else, spelled out.

A ``Mask`` is the AND of per-axis conditions (``AxisMask``: an index range or a 1-D bool
array) and diagonals (``Diagonal``: index along axis p minus index along axis q == k).
Equality is bitwise (so -0.0 is not 0.0 and NaN payloads are kept), and the plan, a
function of the array alone, is deterministic. ``realize(plan, shape, dtype)`` builds
the array again with NumPy (the reference the tests compare against).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Union

import numpy as np

# below this many elements a constant is spelled out: small literals read best as numbers
SMALL = 16
_MAX_EXACT = 2**24  # integers a float32 represents exactly (float64: more)


@dataclass(frozen=True)
class Splat:
    value: np.generic


@dataclass(frozen=True)
class Dense:
    array: np.ndarray


@dataclass(frozen=True)
class Broadcast:
    inner: Plan
    inner_shape: tuple[int, ...]
    dims: tuple[int, ...]  # the result axes inner's axes become (broadcast_in_dim's dims)


@dataclass(frozen=True)
class Reshape:
    inner: Plan
    inner_shape: tuple[int, ...]


@dataclass(frozen=True)
class Iota:
    axis: int
    start: int
    step: int


@dataclass(frozen=True)
class AxisMask:
    axis: int
    start: int  # the range start <= i < stop, or ``where`` when the set is not a range
    stop: int
    where: np.ndarray | None = None


@dataclass(frozen=True)
class Diagonal:
    p: int
    q: int
    offset: int  # i_p - i_q == offset


@dataclass(frozen=True)
class Mask:
    conditions: tuple[AxisMask | Diagonal, ...]


@dataclass(frozen=True)
class Select:
    mask: Mask
    on_true: Plan
    on_false: Plan


Plan = Union[Splat, Dense, Broadcast, Reshape, Iota, Select]  # noqa: UP007 (a runtime alias of dataclasses)


def _bits(arr: np.ndarray) -> np.ndarray:
    """The array's elements as unsigned integers, ``shape + (k,)`` (k words per element):
    equality of these is bitwise equality of the elements."""
    arr = np.ascontiguousarray(arr)
    size = arr.dtype.itemsize
    word = np.dtype(f"uint{8 * min(size, 8)}")
    return arr.view(word).reshape(*arr.shape, max(size // 8, 1))


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.array_equal(_bits(a), _bits(b)))


def _equal_to_first(bits: np.ndarray) -> np.ndarray:
    """Per element (bits: n x k words), whether it is bitwise the first element."""
    eq = bits == bits[:1]
    return eq[:, 0] if eq.shape[1] == 1 else np.all(eq, axis=1)


def identity(size: int) -> Select:
    """The plan of ``np.eye(size)``."""
    return Select(Mask((Diagonal(0, 1, 0),)), Splat(np.int8(1)), Splat(np.int8(0)))


def structure(arr: np.ndarray) -> Plan:
    """The plan of ``arr`` (see the module docstring)."""
    arr = np.asarray(arr)
    if arr.size == 0:
        return Dense(arr)
    if not any(arr.strides):  # a broadcast view of one element
        return Splat(arr[(0,) * arr.ndim])
    if not arr.flags.c_contiguous:  # (np.ascontiguousarray would make a 0-d array 1-d)
        arr = arr.copy(order="C")
    flat_bits = _bits(arr.reshape(-1))
    probe = flat_bits[[0, arr.size // 2, -1]]  # most arrays differ early: no full pass for them
    if bool(np.all(probe == probe[:1])) and bool(np.all(_equal_to_first(flat_bits))):
        return Splat(arr.reshape(-1)[0])
    if arr.size <= SMALL:
        return Dense(arr)
    plan = _broadcast(arr) or _iota(arr) or _select(arr)
    if plan is None and arr.ndim > 2:  # e.g. a basis of one-hot matrices: the identity, reshaped
        for split in range(1, arr.ndim):
            flat_shape = (math.prod(arr.shape[:split]), math.prod(arr.shape[split:]))
            inner = structure(arr.reshape(flat_shape))
            if not isinstance(inner, Dense):
                return Reshape(inner, flat_shape)
    return plan or Dense(arr)


def _broadcast(arr: np.ndarray) -> Broadcast | None:
    """``arr`` as a smaller array repeated along the axes it is constant on."""
    bits = _bits(arr)
    constant_axes = set()
    for ax in range(arr.ndim):
        if arr.shape[ax] == 1:
            continue
        first = np.take(bits, [0], axis=ax)
        if bool(np.all(np.take(bits, [1], axis=ax) == first)) and bool(np.all(bits == first)):
            constant_axes.add(ax)
    if not constant_axes:
        return None
    inner = arr[tuple(0 if ax in constant_axes else slice(None) for ax in range(arr.ndim))]
    return Broadcast(structure(inner), inner.shape, tuple(ax for ax in range(arr.ndim) if ax not in constant_axes))


def _iota(arr: np.ndarray) -> Iota | None:
    """A 1-D progression of exact integers: ``start + step * i``."""
    if arr.ndim != 1 or arr.dtype.kind not in "iuf":
        return None
    if arr.dtype.kind == "f" and not bool(np.all(np.isfinite(arr))):
        return None
    vals = arr.astype(np.float64) if arr.dtype.kind == "f" else arr.astype(np.int64)
    if arr.dtype.kind == "f":
        if not bool(np.all(vals == np.round(vals))):
            return None
        if bool(np.any(np.abs(vals) > _MAX_EXACT)) or bool(np.any(np.signbit(arr) & (vals == 0))):
            return None  # beyond exact float32 integers, or a -0.0 a progression would not give
    start, step = int(vals[0]), int(vals[1] - vals[0])
    expected = start + step * np.arange(arr.size, dtype=np.int64)
    if not bool(np.array_equal(vals, expected)):
        return None
    return Iota(0, start, step)


def _select(arr: np.ndarray) -> Select | None:
    """Two values, or values that vary along one axis only, placed by a structured mask."""
    flat = arr.reshape(-1)
    bits = _bits(flat)
    # the background is the first element's value unless that value is rare
    is_bg = _equal_to_first(bits)
    n_bg = int(np.count_nonzero(is_bg))
    if n_bg * 2 < flat.size:
        other = int(np.argmin(is_bg))
        alt = _equal_to_first(bits[other:]) if other else is_bg
        if int(np.count_nonzero(alt)) > n_bg:
            is_bg = np.concatenate([np.zeros(other, bool), alt])
    positions = np.flatnonzero(~is_bg)
    coords = np.unravel_index(positions, arr.shape)
    mask = _mask(coords, arr.shape)
    if mask is None:
        return None
    background = flat[int(np.argmax(is_bg))]
    on = flat[positions]
    on_bits = _bits(on)
    if bool(np.all(_equal_to_first(on_bits))):
        return Select(mask, Splat(on[0]), Splat(background))
    diagonal = next((c for c in mask.conditions if isinstance(c, Diagonal)), None)
    if diagonal is None:
        return None
    # values along a diagonal: a function of the index on axis p (repeated along q)
    along = np.zeros(arr.shape[diagonal.p], arr.dtype)
    along[coords[diagonal.p]] = on
    if not _same(along[coords[diagonal.p]], on):
        return None
    return Select(mask, Broadcast(structure(along), along.shape, (diagonal.p,)), Splat(background))


def _mask(coords: tuple[np.ndarray, ...], shape: tuple[int, ...]) -> Mask | None:
    """The positions ``coords`` (one index array per axis) as an AND of axis conditions
    and at most one diagonal, or None.

    The positions lie inside the candidate by construction (its conditions are read off
    them), so the candidate is exactly them when both count as many positions: counted
    from the conditions, without building the candidate."""
    count = len(coords[0])
    along = []
    for ax, n in enumerate(shape):
        seen = np.zeros(n, bool)
        seen[coords[ax]] = True
        along.append(seen)
    axes = [_axis_condition(seen) for seen in along]
    conditions = tuple(AxisMask(ax, *c) for ax, c in enumerate(axes) if c is not None)
    counts = [int(np.count_nonzero(seen)) for seen in along]
    if math.prod(counts) == count:
        return Mask(conditions)
    for p in range(len(shape)):
        for q in range(p + 1, len(shape)):
            offsets = coords[p] - coords[q]
            if not bool(np.all(offsets == offsets[0])):
                continue
            k = int(offsets[0])
            i = np.flatnonzero(along[p])
            j = i - k
            inside = (j >= 0) & (j < shape[q])
            pairs = int(np.count_nonzero(along[q][j[inside]]))
            rest = math.prod(c for a, c in enumerate(counts) if a not in (p, q))
            if pairs * rest == count:
                return Mask((Diagonal(p, q, k), *conditions))
    return None


def _axis_condition(seen: np.ndarray) -> tuple[int, int, np.ndarray | None] | None:
    """(start, stop, where) of the indices ``seen`` along an axis; None: all of them."""
    if bool(seen.all()):
        return None
    hits = np.flatnonzero(seen)
    start, stop = int(hits[0]), int(hits[-1]) + 1
    return (start, stop, None) if hits.size == stop - start else (start, stop, seen.copy())


def _line(c: AxisMask, n: int) -> np.ndarray:
    if c.where is not None:
        return c.where
    i = np.arange(n)
    return (i >= c.start) & (i < c.stop)


def _realize_conditions(conditions: tuple[AxisMask | Diagonal, ...], shape: tuple[int, ...]) -> np.ndarray:
    out = np.ones(shape, bool)
    for c in conditions:
        if isinstance(c, AxisMask):
            out &= np.expand_dims(_line(c, shape[c.axis]), [a for a in range(len(shape)) if a != c.axis])
        else:
            ip = np.expand_dims(np.arange(shape[c.p]), [a for a in range(len(shape)) if a != c.p])
            iq = np.expand_dims(np.arange(shape[c.q]), [a for a in range(len(shape)) if a != c.q])
            out &= (ip - iq) == c.offset
    return out


def realize(plan: Plan, shape: tuple[int, ...], dtype: np.dtype | str) -> np.ndarray:
    """The array ``plan`` describes, built with NumPy."""
    dtype = np.dtype(dtype)
    if isinstance(plan, Splat):
        return np.full(shape, plan.value, dtype)
    if isinstance(plan, Dense):
        return plan.array.astype(dtype).reshape(shape)
    if isinstance(plan, Broadcast):
        inner = realize(plan.inner, plan.inner_shape, dtype)
        expanded = inner.reshape([shape[a] if a in plan.dims else 1 for a in range(len(shape))])
        return np.broadcast_to(expanded, shape).copy()
    if isinstance(plan, Reshape):
        return realize(plan.inner, plan.inner_shape, dtype).reshape(shape)
    if isinstance(plan, Iota):
        line = plan.start + plan.step * np.arange(shape[plan.axis], dtype=np.int64)
        return np.broadcast_to(np.expand_dims(line, [a for a in range(len(shape)) if a != plan.axis]),
                               shape).astype(dtype)
    mask = _realize_conditions(plan.mask.conditions, shape)
    return np.where(mask, realize(plan.on_true, shape, dtype), realize(plan.on_false, shape, dtype))


__all__ = ["SMALL", "AxisMask", "Broadcast", "Dense", "Diagonal", "Iota", "Mask", "Plan", "Reshape", "Select", "Splat",
           "identity", "realize", "structure"]
