"""tidu.numpy shape manipulation: reshape, transpose, squeeze, broadcast_to, concatenate,
stack, ..."""

from __future__ import annotations

import builtins
import math
import operator
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from tidu.core.keys import Attrs, is_complex
from tidu.numpy._core import (
    ArrayLike,
    _broadcast_to,
    _norm_axes,
    _norm_axis,
    _prep,
    _shape,
    _trace_of,
    _tracer,
    broadcast_shapes,
    numpy_fallback,
)
from tidu.numpy._dtypes import result_type
from tidu.trace.tracing import Tracer


def shape(x: ArrayLike) -> tuple[int, ...]:
    return _shape(x)


def ndim(x: ArrayLike) -> int:
    return len(_shape(x))


def _dims(newshape: int | Sequence[int], more: tuple[int, ...], order: str) -> list[int]:
    """The new shape of ``reshape(x, newshape, *more, order=order)``."""
    if order != "C":
        raise NotImplementedError("tnp.reshape supports order='C' (row-major) only")
    if more:
        newshape = (newshape, *more)  # type: ignore[assignment]
    return _ints(newshape, "reshape", "the new shape")


def _ints(value: Any, what: str, name: str) -> list[int]:
    """``value``, an int or a sequence of ints (NumPy integers too), as a list of ints; a
    TypeError naming ``name`` of ``tnp.<what>`` for anything else (a float, a str, None: NumPy
    refuses them, and ``int("12")`` would read a str as digits)."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    items = [value] if isinstance(value, int | np.integer) or not isinstance(value, Sequence | np.ndarray) \
        or isinstance(value, str | bytes) else list(value)
    out = []
    for v in items:
        if isinstance(v, bool | np.bool_ | Tracer) or not isinstance(v, int | np.integer):
            got = "a traced value (it must be a constant)" if isinstance(v, Tracer) else \
                f"{v!r:.60} ({type(v).__name__})"
            raise TypeError(f"tnp.{what}: {name} must be an int or a sequence of ints, got {got}")
        out.append(int(v))
    return out


@numpy_fallback(lambda x, newshape, *more, order="C": np.reshape(x, _dims(newshape, more, order)))
def reshape(x: ArrayLike, newshape: int | Sequence[int], *more: int, order: str = "C") -> Any:
    """Row-major reshape; one entry may be -1. ``x.reshape(2, 3)`` also works."""
    dims = _dims(newshape, more, order)
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


@numpy_fallback(lambda x, axes=None, *more: np.transpose(x, (axes, *more) if more else axes))
def transpose(x: ArrayLike, axes: Sequence[int] | None = None, *more: int) -> Any:
    """Permute axes (reverse them by default). ``x.transpose(1, 0)`` also works."""
    if more:
        axes = (axes, *more)  # type: ignore[assignment]
    x.check_alive()
    perm = tuple(range(x.ndim))[::-1] if axes is None else tuple(
        _norm_axis(a, x.ndim, "transpose") for a in _ints(axes, "transpose", "axes"))
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"tnp.transpose: axes {axes} are not a permutation of range({x.ndim})")
    return x if perm == tuple(range(x.ndim)) else x.trace.emit("transpose", [x], {"perm": perm})


@numpy_fallback(np.swapaxes)
def swapaxes(x: ArrayLike, axis1: int, axis2: int) -> Any:
    perm = list(range(x.ndim))
    a, b = _norm_axis(axis1, x.ndim, "swapaxes"), _norm_axis(axis2, x.ndim, "swapaxes")
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


@numpy_fallback(np.expand_dims)
def expand_dims(x: ArrayLike, axis: int | Sequence[int]) -> Any:
    """x with axes of size 1 inserted at ``axis`` (an int or a tuple: positions in the result)."""
    axes_ = _ints(axis, "expand_dims", "axis")
    axes = _norm_axes(axes_, x.ndim + len(axes_), "expand_dims")
    shape, rest = [], iter(x.shape)
    for k in range(x.ndim + len(axes)):
        shape.append(1 if k in axes else next(rest))
    return reshape(x, tuple(shape))


@numpy_fallback(np.squeeze)
def squeeze(x: ArrayLike, axis: int | Sequence[int] | None = None) -> Any:
    axes = tuple(i for i, d in enumerate(x.shape) if d == 1) if axis is None else _norm_axes(
        axis, x.ndim, "squeeze")
    if any(x.shape[a] != 1 for a in axes):
        raise ValueError(f"tnp.squeeze: cannot squeeze axes {axes} of shape {x.shape}")
    return reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


@numpy_fallback(np.broadcast_to)
def broadcast_to(x: ArrayLike, shape: Sequence[int]) -> Any:
    x.check_alive()
    shape_ = tuple(_ints(shape, "broadcast_to", "shape"))
    if any(d < 0 for d in shape_):
        raise ValueError(f"tnp.broadcast_to: shape must hold sizes >= 0, got {shape_}")
    if broadcast_shapes(x.shape, shape_, what="broadcast_to") != shape_:
        raise ValueError(f"tnp.broadcast_to: cannot broadcast shape {x.shape} to {shape_}")
    return _broadcast_to(x, shape_)


@numpy_fallback(lambda arrays, axis=0: np.concatenate(list(arrays), axis=axis), nested=True)
def concatenate(arrays: Sequence[ArrayLike], axis: int | None = 0) -> Any:
    arrays = list(arrays)
    trace = _trace_of(arrays)
    assert trace is not None
    if axis is None:  # the arrays flattened, as NumPy and JAX
        arrays, axis = [ravel(a) if isinstance(a, Tracer) else np.ravel(a) for a in arrays], 0
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


@numpy_fallback(lambda arrays, axis=0: np.stack(list(arrays), axis=axis), nested=True)
def stack(arrays: Sequence[ArrayLike], axis: int = 0) -> Any:
    arrays = list(arrays)
    first = arrays[0] if arrays else None
    if type(first) is Tracer and axis == 0 and not first.weak and all(
            type(a) is Tracer and a.trace is first.trace and a.aval == first.aval and not a.weak for a in arrays):
        # tracers of one trace, shape and dtype (the state vector of an ODE's right-hand side):
        # the general path's ops, spelt out
        first.check_alive()
        trace, shape = first.trace, (1, *first.aval.shape)
        attrs = Attrs(shape=shape)
        parts = [trace.emit("reshape", [a], attrs) for a in arrays]
        return parts[0] if len(parts) == 1 else trace.emit("concatenate", parts, {"axis": 0})
    shapes = {_shape(a) for a in arrays}
    if len(shapes) != 1:
        raise ValueError(f"tnp.stack: all arrays must have the same shape, got {sorted(shapes)}")
    nd = len(shapes.pop())
    axis = _norm_axis(axis, nd + 1, "stack")
    trace = _trace_of(arrays)
    assert trace is not None
    return concatenate([expand_dims(_tracer(trace, a), axis) for a in arrays], axis=axis)


# --- more shape manipulation: axes, stacking, splitting, tiling, flipping, padding ---------


def _t(x: Any) -> Any:
    """A traced operand as is; a constant as a NumPy array (for the concrete path)."""
    return x if isinstance(x, Tracer) else np.asarray(x)


@numpy_fallback(np.moveaxis)
def moveaxis(x: ArrayLike, source: int | Sequence[int], destination: int | Sequence[int]) -> Any:
    """Move axes ``source`` to positions ``destination``, keeping the others in order."""
    src = _ints(source, "moveaxis", "source")
    dst = _ints(destination, "moveaxis", "destination")
    if len(src) != len(dst):
        raise ValueError("tnp.moveaxis: source and destination need the same number of axes")
    src = [_norm_axis(a, x.ndim, "moveaxis") for a in src]
    dst = [_norm_axis(a, x.ndim, "moveaxis") for a in dst]
    for name, axes in (("source", src), ("destination", dst)):
        if len(set(axes)) != len(axes):
            raise ValueError(f"tnp.moveaxis: repeated axis in {name} {source if name == 'source' else destination}")
    order = [a for a in range(x.ndim) if a not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return transpose(x, order)


def permute_dims(x: ArrayLike, axes: Sequence[int] | None = None) -> Any:
    """``transpose`` (the array-API name)."""
    return transpose(x, axes)


def matrix_transpose(x: ArrayLike) -> Any:
    """Swap the last two axes."""
    return swapaxes(x, -1, -2)


def atleast_1d(*arys: ArrayLike) -> Any:
    """Each argument with at least one axis (a scalar becomes shape (1,))."""
    out = [x if ndim(x) >= 1 else reshape(x, (1,)) for x in map(_t, arys)]
    return out[0] if len(out) == 1 else out


def atleast_2d(*arys: ArrayLike) -> Any:
    """Each argument with at least two axes (new axes in front)."""
    out = [x if ndim(x) >= 2 else reshape(x, (1,) * (2 - ndim(x)) + shape(x)) for x in map(_t, arys)]
    return out[0] if len(out) == 1 else out


def atleast_3d(*arys: ArrayLike) -> Any:
    """Each argument with at least three axes: (n,) -> (1, n, 1), (m, n) -> (m, n, 1)."""
    def three(x: Any) -> Any:
        s = shape(x)
        return reshape(x, {0: (1, 1, 1), 1: (1, *s, 1), 2: (*s, 1)}[len(s)]) if len(s) < 3 else x

    out = [three(x) for x in map(_t, arys)]
    return out[0] if len(out) == 1 else out


def vstack(tup: Sequence[ArrayLike]) -> Any:
    """Stack along the first axis (1-D arrays become rows)."""
    return concatenate(list(atleast_2d(*tup)) if len(tup) > 1 else [atleast_2d(*tup)], axis=0)



def hstack(tup: Sequence[ArrayLike]) -> Any:
    """Stack along the second axis (along the first for 1-D arrays)."""
    arrs = atleast_1d(*tup)
    arrs = list(arrs) if len(tup) > 1 else [arrs]
    return concatenate(arrs, axis=0 if ndim(arrs[0]) == 1 else 1)


def dstack(tup: Sequence[ArrayLike]) -> Any:
    """Stack along the third axis."""
    arrs = atleast_3d(*tup)
    return concatenate(list(arrs) if len(tup) > 1 else [arrs], axis=2)


def column_stack(tup: Sequence[ArrayLike]) -> Any:
    """1-D arrays as columns of a 2-D array; 2-D arrays are stacked along axis 1."""
    cols = [reshape(x, (-1, 1)) if ndim(x) < 2 else x for x in map(_t, tup)]
    return concatenate(cols, axis=1)


def concat(arrays: Sequence[ArrayLike], axis: int = 0) -> Any:
    """``concatenate`` (the array-API name)."""
    return concatenate(arrays, axis=axis)


@numpy_fallback(np.append, "arr", "values")
def append(arr: ArrayLike, values: ArrayLike, axis: int | None = None) -> Any:
    """``values`` appended to ``arr`` (both flattened when ``axis`` is None)."""
    if axis is None:
        return concatenate([ravel(_t(arr)), ravel(_t(values))])
    return concatenate([arr, values], axis=axis)


@numpy_fallback(np.broadcast_arrays, "args")
def broadcast_arrays(*args: ArrayLike) -> tuple[Any, ...]:
    """The arguments broadcast to their common shape (a tuple, as NumPy's)."""
    target = broadcast_shapes(*(shape(a) for a in args), what="broadcast_arrays")
    return tuple(broadcast_to(_t(a), target) for a in args)


@numpy_fallback(np.meshgrid, "xi")
def meshgrid(*xi: ArrayLike, indexing: str = "xy", sparse: bool = False) -> tuple[Any, ...]:
    """Coordinate arrays from 1-D coordinate vectors (``indexing`` "xy" or "ij"), a tuple as
    NumPy's."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"tnp.meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    vecs = [ravel(_t(x)) for x in xi]
    n = len(vecs)
    out = []
    for i, v in enumerate(vecs):
        s = [1] * n
        s[i] = shape(v)[0]
        if indexing == "xy" and n >= 2 and i < 2:
            s[0], s[1] = s[1], s[0]
        out.append(reshape(v, tuple(s)))
    if sparse:
        return tuple(out)
    full = broadcast_shapes(*(shape(o) for o in out))
    return tuple(broadcast_to(o, full) for o in out)


def _split_points(n: int, indices_or_sections: Any, what: str, even: bool) -> list[int]:
    if isinstance(indices_or_sections, int | np.integer):
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError(f"tnp.{what}: the number of sections must be positive")
        if even and n % k:
            raise ValueError(f"tnp.{what}: array split does not result in an equal division "
                             f"({n} into {k}); use tnp.array_split")
        size, extra = divmod(n, k)
        points, at = [], 0
        for i in range(k - 1):
            at += size + (1 if i < extra else 0)
            points.append(at)
        return points
    return _ints(indices_or_sections, what, "indices_or_sections")


def _split(x: Any, indices_or_sections: Any, axis: int, what: str, even: bool) -> list[Any]:
    axis = _norm_axis(axis, x.ndim, what)
    n = x.shape[axis]
    bounds = [0, *_split_points(n, indices_or_sections, what, even), n]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        lo, hi = builtins.min(builtins.max(lo, 0), n), builtins.min(builtins.max(hi, 0), n)
        idx = [slice(None)] * x.ndim
        idx[axis] = slice(lo, builtins.max(lo, hi))
        out.append(x[tuple(idx)])
    return out


@numpy_fallback(np.split)
def split(x: ArrayLike, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Any]:
    """Split into equal sections (an int) or at the given indices along ``axis``."""
    return _split(x, indices_or_sections, axis, "split", True)


@numpy_fallback(np.array_split)
def array_split(x: ArrayLike, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Any]:
    """``split`` that allows sections of unequal size (the first ones one longer)."""
    return _split(x, indices_or_sections, axis, "array_split", False)


def vsplit(x: ArrayLike, indices_or_sections: int | Sequence[int]) -> list[Any]:
    """``split`` along axis 0."""
    return split(x, indices_or_sections, axis=0)


def hsplit(x: ArrayLike, indices_or_sections: int | Sequence[int]) -> list[Any]:
    """``split`` along axis 1 (axis 0 for 1-D arrays)."""
    return split(x, indices_or_sections, axis=1 if ndim(x) > 1 else 0)


def dsplit(x: ArrayLike, indices_or_sections: int | Sequence[int]) -> list[Any]:
    """``split`` along axis 2."""
    return split(x, indices_or_sections, axis=2)


@numpy_fallback(np.tile)
def tile(x: ArrayLike, reps: int | Sequence[int]) -> Any:
    """``x`` repeated ``reps`` times along each axis (by broadcasting, then reshaping)."""
    reps_ = tuple(_ints(reps, "tile", "reps"))
    if any(r < 0 for r in reps_):
        raise ValueError(f"tnp.tile: reps must be counts >= 0, got {reps}")
    nd = builtins.max(len(reps_), x.ndim)
    reps_ = (1,) * (nd - len(reps_)) + reps_
    s = (1,) * (nd - x.ndim) + x.shape
    inter = tuple(v for r, d in zip(reps_, s, strict=True) for v in (1, d))
    big = tuple(v for r, d in zip(reps_, s, strict=True) for v in (r, d))
    return reshape(broadcast_to(reshape(x, inter), big), tuple(r * d for r, d in zip(reps_, s, strict=True)))


def _runs(p: np.ndarray) -> list[tuple[int, int, int]]:
    """(first, count, step) of maximal evenly spaced runs of the positions ``p``."""
    out, i, n = [], 0, len(p)
    while i < n:
        if i + 1 < n and p[i + 1] != p[i]:
            step = int(p[i + 1] - p[i])
            j = i + 1
            while j + 1 < n and p[j + 1] - p[j] == step:
                j += 1
            out.append((int(p[i]), j - i + 1, step))
            i = j + 1
        else:
            out.append((int(p[i]), 1, 1))
            i += 1
    return out


def _take(x: Tracer, indices: np.ndarray, axis: int) -> Any:
    """``take`` along a valid ``axis`` at constant indices: a gather of the flat positions."""
    return _gather(x, np.asarray(np.take(np.arange(x.size).reshape(x.shape), indices, axis=axis, mode="raise")))


def _gather(x: Tracer, positions: np.ndarray) -> Any:
    """The elements of ``x`` at these flat positions, shaped like ``positions``."""
    flat = reshape(x, (x.size,))
    p = positions.reshape(-1).astype(np.int64)
    if p.size == 0:
        return reshape(flat[0:0], positions.shape)
    parts = []
    for first, count, step in _runs(p):
        if step > 0:
            parts.append(flat[first:first + (count - 1) * step + 1:step])
        else:
            last = first + (count - 1) * step
            parts.append(flip(flat[last:first + 1:-step]))
    out = concatenate(parts) if len(parts) > 1 else parts[0]
    return reshape(out, positions.shape)


@numpy_fallback(np.repeat)
def repeat(x: ArrayLike, repeats: int | Sequence[int], axis: int | None = None) -> Any:
    """Each element repeated ``repeats`` times along ``axis`` (of the flattened array by
    default); ``repeats`` may be one count per element."""
    if axis is None:
        x, axis = ravel(x), 0
    axis = _norm_axis(axis, x.ndim, "repeat")
    if np.ndim(repeats) == 0:
        r = int(repeats)  # (NumPy takes 2.0)
        if r < 0:
            raise ValueError(f"tnp.repeat: repeats must be a count >= 0, got {r}")
        inter = x.shape[:axis + 1] + (1,) + x.shape[axis + 1:]
        big = x.shape[:axis + 1] + (r,) + x.shape[axis + 1:]
        return reshape(broadcast_to(reshape(x, inter), big),
                       x.shape[:axis] + (x.shape[axis] * r,) + x.shape[axis + 1:])
    counts = np.asarray(repeats, dtype=np.int64)
    if counts.shape != (x.shape[axis],) or (counts < 0).any():
        raise ValueError(f"tnp.repeat: repeats must be one count >= 0 per element ({x.shape[axis]}), "
                         f"got {counts.tolist()}")
    return _take(x, np.repeat(np.arange(x.shape[axis]), counts), axis)


@numpy_fallback(np.flip)
def flip(x: ArrayLike, axis: int | Sequence[int] | None = None) -> Any:
    """Reverse the order of elements along ``axis`` (all axes by default)."""
    dims = _norm_axes(axis, x.ndim, "flip")
    dims = tuple(d for d in dims if x.shape[d] > 1)
    return x.trace.emit("reverse", [x], {"dims": dims}) if dims else x


def fliplr(x: ArrayLike) -> Any:
    """Reverse the order along axis 1."""
    return flip(x, 1)


def flipud(x: ArrayLike) -> Any:
    """Reverse the order along axis 0."""
    return flip(x, 0)


@numpy_fallback(np.rot90)
def rot90(x: ArrayLike, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Any:
    """Rotate by 90 degrees ``k`` times in the plane of ``axes`` (from the first toward the second)."""
    k = operator.index(k) % 4
    if len(axes) != 2:
        raise ValueError(f"tnp.rot90: axes must be two axes, got {axes}")
    a, b = (_norm_axis(v, x.ndim, "rot90") for v in axes)
    if a == b:
        raise ValueError(f"tnp.rot90: axes {axes} must be two different axes")
    if k == 0:
        return x
    if k == 2:
        return flip(flip(x, a), b)
    perm = list(range(x.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(flip(x, b), perm) if k == 1 else flip(transpose(x, perm), b)


@numpy_fallback(np.roll)
def roll(x: ArrayLike, shift: int | Sequence[int], axis: int | Sequence[int] | None = None) -> Any:
    """Shift elements cyclically by ``shift`` along ``axis`` (the flattened array by default)."""
    if axis is None:
        return reshape(roll(ravel(x), shift, 0), x.shape)
    shifts = [int(s) for s in np.ravel(shift)]  # (NumPy takes floats, as ints)
    axes = _ints(axis, "roll", "axis")
    if len(shifts) != len(axes) and 1 not in (len(shifts), len(axes)):  # broadcast against each other, as NumPy
        raise ValueError(f"tnp.roll: shift {shift} and axis {axis} have different lengths; give one shift per "
                         "axis, or one for all")
    total: dict[int, int] = {}  # the shifts of each axis summed (NumPy's, for an axis given twice)
    for s, a in zip(shifts * len(axes) if len(shifts) == 1 else shifts, axes * len(shifts) if len(axes) == 1
                    else axes, strict=True):
        a = _norm_axis(a, x.ndim, "roll")
        total[a] = total.get(a, 0) + s
    for a, s in total.items():
        n = x.shape[a]
        s = s % n if n else 0
        if s:
            lead = [slice(None)] * x.ndim
            tail = [slice(None)] * x.ndim
            lead[a], tail[a] = slice(n - s, None), slice(0, n - s)
            x = concatenate([x[tuple(lead)], x[tuple(tail)]], axis=a)
    return x


@numpy_fallback(np.rollaxis)
def rollaxis(x: ArrayLike, axis: int, start: int = 0) -> Any:
    """Move ``axis`` to before position ``start`` (NumPy's older moveaxis)."""
    axis = _norm_axis(axis, x.ndim, "rollaxis")
    start = start % (x.ndim + 1) if start < 0 else start
    if axis < start:
        start -= 1
    return moveaxis(x, axis, start) if axis != start else x


@numpy_fallback(lambda x, axis=0: tuple(np.moveaxis(np.asarray(x), axis, 0)))
def unstack(x: ArrayLike, axis: int = 0) -> tuple[Any, ...]:
    """The slices of ``x`` along ``axis``, as a tuple."""
    m = moveaxis(x, axis, 0)
    return tuple(m[i] for i in range(m.shape[0]))


@numpy_fallback(np.block, nested=True)
def block(arrays: Any) -> Any:
    """An array assembled from nested lists of blocks (the innermost lists are joined along
    the last axis, the next ones along the axis before, ...)."""
    def depth(a: Any) -> int:
        return 1 + depth(a[0]) if isinstance(a, list) and a else 0

    leaves: list[Any] = []

    def collect(a: Any) -> None:
        if isinstance(a, list):
            for item in a:
                collect(item)
        else:
            leaves.append(a)

    collect(arrays)
    d = depth(arrays)
    nd = builtins.max([d] + [ndim(v) for v in leaves])

    def build(a: Any, level: int) -> Any:
        if not isinstance(a, list):
            v = _t(a)
            return reshape(v, (1,) * (nd - ndim(v)) + shape(v))
        parts = [build(item, level + 1) for item in a]
        return concatenate(parts, axis=nd - d + level) if len(parts) > 1 else parts[0]

    return build(arrays, 0)


@numpy_fallback(np.resize)
def resize(x: ArrayLike, new_shape: int | Sequence[int]) -> Any:
    """``x`` flattened, repeated as needed and cut to ``new_shape`` (NumPy's np.resize)."""
    shape_ = (int(new_shape),) if isinstance(new_shape, int | np.integer) else tuple(int(d) for d in new_shape)
    n = math.prod(shape_)
    flat = ravel(x)
    if flat.shape[0] == 0:
        raise ValueError("tnp.resize: cannot resize an empty array")
    reps = -(-n // flat.shape[0])
    return reshape(tile(flat, reps)[:n], shape_)


@numpy_fallback(np.delete)
def delete(arr: ArrayLike, obj: Any, axis: int | None = None) -> Any:
    """``arr`` without the entries ``obj`` (indices, a slice or a mask) along ``axis``."""
    _constant_positions("delete", obj)
    if axis is None:
        arr, axis = ravel(arr), 0
    axis = _norm_axis(axis, arr.ndim, "delete")
    keep = np.delete(np.arange(arr.shape[axis]), obj)
    return _take(arr, keep, axis)


def _constant_positions(name: str, obj: Any) -> None:
    if isinstance(obj, Tracer) or (isinstance(obj, list | tuple) and any(isinstance(o, Tracer) for o in obj)):
        raise TypeError(f"tnp.{name}: the positions (obj) must be constants, not traced values: the result's "
                        f"shape depends on them; use tnp.where (or x.at[...]) to select by traced indices")


@numpy_fallback(np.insert, "arr", "values")
def insert(arr: ArrayLike, obj: Any, values: ArrayLike, axis: int | None = None) -> Any:
    """``values`` inserted before the indices ``obj`` along ``axis`` (NumPy's np.insert)."""
    _constant_positions("insert", obj)
    a, v = _t(arr), _t(values)
    # NumPy decides the layout on position arrays: an old element at flat position i stays
    # i, the j-th (flat) value is marked -1 - j (broadcast as NumPy broadcasts values)
    markers = -1 - np.arange(math.prod(shape(v))).reshape(shape(v))
    src = np.insert(np.arange(math.prod(shape(a))).reshape(shape(a)), obj, markers, axis=axis)
    size = math.prod(shape(a))
    flat_pos = np.where(src >= 0, src, size + (-1 - src))
    trace = _trace_of((a, v))
    # NumPy's: the values cast to arr's dtype (np.array(values, dtype=arr.dtype): 2.5 into
    # int32 is 2; complex values into a real array keep their real part, with its warning)
    dtype = a.aval.dtype if isinstance(a, Tracer) else a.dtype.name
    if isinstance(v, Tracer) and is_complex(v.aval.dtype) and not is_complex(dtype):
        warnings.warn(f"tnp.insert: casting complex values to {dtype} discards the imaginary part",
                      np.exceptions.ComplexWarning, stacklevel=3)
        v = v.trace.emit("real", [v])
    both = concatenate([ravel(_prep(trace, a, dtype)), ravel(_prep(trace, v, dtype))])
    return _gather(both, flat_pos)
