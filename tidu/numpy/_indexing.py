"""tidu.numpy indexing: basic indexing (integers, slices, None, ...) as ``slice``,
``reverse`` (negative steps) and ``reshape``; advanced indexing (integer arrays, boolean
masks) with constant indices as a gather of the flat array, written as runs of strided
slices joined by ``concatenate`` (exact, also for inf and nan; one slice per run of
evenly spaced positions); traced integer scalar indices (x[i], x[i, j], x[:, i]) as
``dynamic_slice``, traced index arrays as a one-hot selection; and JAX's
``x.at[index].set / add / multiply / ...`` (the updated array is a gather from the
original and the new values; at traced scalar indices a ``dynamic_update_slice``)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from tidu.core.keys import Attrs, holds_index_arithmetic, is_integer
from tidu.numpy._core import ArrayLike, _convert, _prep, _trace_of, numpy_fallback
from tidu.numpy._dtypes import _info, result_type
from tidu.numpy._elementwise import (
    add,
    clip,
    divide,
    equal,
    greater_equal,
    less,
    maximum,
    minimum,
    multiply,
    power,
    subtract,
    where,
)
from tidu.numpy._filled import zeros_like
from tidu.numpy._functional import guarded, numpy_calling_back
from tidu.numpy._reductions import _one_hot_sum
from tidu.numpy._reductions import any as _reduce_any
from tidu.numpy._reductions import max as _reduce_max
from tidu.numpy._reductions import min as _reduce_min
from tidu.numpy._reductions import prod as _reduce_prod
from tidu.numpy._reductions import sum as _reduce_sum
from tidu.numpy._scans import cumsum
from tidu.numpy._shapes import _gather, broadcast_to, concatenate, expand_dims, moveaxis, ravel, reshape, resize
from tidu.numpy._ufuncs import logical_and, logical_not, logical_or, remainder
from tidu.trace.evaluator import run_traced
from tidu.trace.tracing import Tracer


@numpy_fallback(lambda x, index: np.asarray(x)[index])
def getitem(x: ArrayLike, index: Any) -> Any:
    """Basic indexing: integers, slices with positive steps, None and Ellipsis."""
    x.check_alive()
    if type(index) is int:  # x[i], the commonest index (state vectors), without the general parsing
        shape = x.aval.shape
        if shape and -shape[0] <= index < shape[0]:
            i, rest = index % shape[0], shape[1:]
            return _sliced(x, (i, *(0,) * len(rest)), (i + 1, *rest), (1,) * len(shape), [], rest)
    items = index if isinstance(index, tuple) else (index,)
    if not builtins.all(_basic(it) for it in items):
        return _advanced(x, index)
    if builtins.sum(it is Ellipsis for it in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = builtins.sum(1 for it in items if it is not None and it is not Ellipsis)
    if used > x.ndim:
        raise IndexError(f"too many indices for array: array is {x.ndim}-dimensional, "
                         f"but {used} were indexed")
    fill = [slice(None)] * (x.ndim - used)
    if Ellipsis in items:
        k = items.index(Ellipsis)
        items = items[:k] + tuple(fill) + items[k + 1:]
    else:
        items = items + tuple(fill)
    start, limit, strides, out_shape, flips = [], [], [], [], []
    axis = 0
    for it in items:
        if it is None:
            out_shape.append(1)
            continue
        d = x.shape[axis]
        if isinstance(it, slice):
            s, e_, st = it.indices(d)
            n = len(range(s, e_, st))
            if st < 0 and n:  # the same elements with a positive step, then reversed
                s, st = s + (n - 1) * st, -st
                flips.append(axis)
            start.append(s if n else 0)
            limit.append(s + (n - 1) * st + 1 if n else 0)
            strides.append(st)
            out_shape.append(n)
        else:
            i = int(it)
            if not -d <= i < d:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {d}")
            i %= d
            start.append(i)
            limit.append(i + 1)
            strides.append(1)
        axis += 1
    return _sliced(x, tuple(start), tuple(limit), tuple(strides), flips, tuple(out_shape))


# the attributes of basic indexing's slices and reshapes, made once: x[i] in a loop body
# repeats them, and making them (frozen, hashed) cost as much as the rest of the op
_INDEX_ATTRS: dict[tuple, Attrs] = {}


def _index_attrs(key: tuple) -> Attrs:
    attrs = _INDEX_ATTRS.get(key)
    if attrs is None:
        if len(_INDEX_ATTRS) >= 4096:
            _INDEX_ATTRS.clear()
        attrs = _INDEX_ATTRS[key] = (Attrs(start=key[1], limit=key[2], strides=key[3]) if key[0] == "slice"
                                     else Attrs(shape=key[1]))
    return attrs


def _sliced(x: Tracer, start: tuple[int, ...], limit: tuple[int, ...], strides: tuple[int, ...],
            flips: list[int], shape: tuple[int, ...]) -> Tracer:
    """The ops of basic indexing: ``x`` sliced (positive strides), reversed along the axes
    ``flips`` and reshaped to ``shape``, each op only where it changes something."""
    out = x
    if (start, limit, strides) != ((0,) * x.ndim, x.shape, (1,) * x.ndim):
        out = x.trace.emit("slice", [x], _index_attrs(("slice", start, limit, strides)))
    flips = [a for a in flips if out.shape[a] > 1]
    if flips:
        out = x.trace.emit("reverse", [out], {"dims": tuple(flips)})
    return out if out.shape == shape else x.trace.emit("reshape", [out], _index_attrs(("reshape", shape)))


def _basic(it: Any) -> bool:
    return (it is None or it is Ellipsis or isinstance(it, slice)
            or (isinstance(it, int | np.integer) and not isinstance(it, bool | np.bool_)))


def _advanced(x: Tracer, index: Any) -> Any:
    items = index if isinstance(index, tuple) else (index,)
    if builtins.any(isinstance(it, Tracer) for it in items):
        return _getitem_traced(x, items)
    try:
        positions = np.arange(x.size).reshape(x.shape)[index]
    except IndexError as e:
        raise IndexError(f"tidu.numpy: {e}") from None
    return _gather(x, np.asarray(positions))


def _explicit(x: Tracer, items: tuple[Any, ...], what: str, several: bool = False) -> list[tuple[int | None, Any]]:
    """An index with traced integers as (axis, item) pairs, Ellipsis spelled out as full
    slices (axis None for ``None``); checks what traced indices tidu can take: integers;
    unless ``several``, several scalars or one array, no constant index arrays beside them
    (``several``: integer index arrays, traced or constant, broadcast together; no mask)."""
    traced = [it for it in items if isinstance(it, Tracer)]
    for it in traced:
        if not is_integer(it.aval.dtype):
            raise TypeError(f"tidu.numpy: a traced index must be integers (x[i], x[i, j], x[:, i]); {what} one of "
                            f"dtype {it.aval.dtype}" + (": a traced boolean mask gives a shape that depends on the "
                                                        "values, use tnp.where(mask, x, 0) instead"
                                                        if it.aval.dtype == "bool" else ""))
    if several:
        for it in items:
            if not _basic(it) and not isinstance(it, Tracer) and np.asarray(it).dtype.kind not in "iu":
                raise TypeError(f"tidu.numpy: {what} traced indices beside a constant index of dtype "
                                f"{np.asarray(it).dtype} (a mask, say): index in two steps (x[mask][i]), or use "
                                "integer indices (tnp.nonzero(mask, size=...))")
    else:
        if len(traced) > 1 and builtins.any(it.ndim for it in traced):
            raise TypeError(f"tidu.numpy: {what} several traced indices with one of them an array: tidu takes "
                            "several traced scalar indices (x.at[i, j]) or one traced index array (x.at[idx], "
                            "x.at[:, idx])")
        if builtins.any(not _basic(it) and not isinstance(it, Tracer) for it in items):
            raise TypeError(f"tidu.numpy: {what} traced indices beside a constant index array or mask: index in "
                            "two steps (x[i][idx]) or make the constant index traced too")
    if builtins.sum(it is Ellipsis for it in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = builtins.sum(1 for it in items if it is not None and it is not Ellipsis)
    if used > x.ndim:
        raise IndexError(f"too many indices for array: array is {x.ndim}-dimensional, but {used} were indexed")
    pairs = _spelled(x.ndim, items)
    assert pairs is not None  # (a mask was refused above)
    return pairs


def _getitem_traced(x: Tracer, items: tuple[Any, ...]) -> Any:
    """x[items] where some items are traced integers: each picks along its axis (a one-hot
    selection, indices clamped into range as JAX's), the other items index what is left."""
    arrays = builtins.sum(1 for it in items if (isinstance(it, Tracer) and it.ndim)
                          or (not _basic(it) and not isinstance(it, Tracer)))
    if arrays > 1 or (arrays and builtins.any(not _basic(it) and not isinstance(it, Tracer) for it in items)):
        return _getitem_broadcast(x, _explicit(x, items, "indexing with", several=True))
    pairs = _explicit(x, items, "indexing with")
    out, rest = x, []
    for axis, it in reversed(pairs):
        if isinstance(it, Tracer):
            out = _take_traced(out, it, axis, "index")
            rest[:0] = [slice(None)] * it.ndim
        else:
            rest.insert(0, it)
    out = getitem(out, tuple(rest)) if rest else out
    # NumPy's rule: the integers beside an index array are advanced indices too; where a
    # slice or None separates them, the index array's axes go first (x[1, :, idx])
    advanced = [k for k, (_, it) in enumerate(pairs) if isinstance(it, Tracer) or _basic_integer(it)]
    k, array = next(((k, it) for k, (_, it) in enumerate(pairs) if isinstance(it, Tracer) and it.ndim), (0, None))
    if array is None or advanced[-1] - advanced[0] + 1 == len(advanced):
        return out
    at = builtins.sum(1 for _, it in pairs[:k] if it is None or isinstance(it, slice))
    return moveaxis(out, list(range(at, at + array.ndim)), list(range(array.ndim)))


def _merged_index(x: Tracer, pairs: list[tuple[int | None, Any]], clamp: bool) -> tuple[Any, ...]:
    """The integer index items of ``pairs`` (several arrays, some traced, and scalars) as one
    index into the axes they index merged, broadcast as NumPy's: (the items' positions in
    ``pairs``, their axes, those axes' sizes, the other axes' sizes, the broadcast shape,
    the flat index of that shape, where the index axes go in ``x[items]``: after the items
    before the first one when they are adjacent, else first). Each index counts from the
    end where negative, then is clamped into range (``clamp``, a read as JAX's) or, out of
    range, is -1 (an update that hits nothing)."""
    adv = [k for k, (axis, it) in enumerate(pairs) if axis is not None and not isinstance(it, slice)]
    axes = [pairs[k][0] for k in adv]
    sizes = [x.shape[a] for a in axes]
    shapes = [it.shape if isinstance(it, Tracer) else np.shape(it) for _, it in (pairs[k] for k in adv)]
    try:
        bshape = tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise IndexError("tidu.numpy: shape mismatch: indexing arrays could not be broadcast together with shapes "
                         + " ".join(str(tuple(s)) for s in shapes)) from None
    flat: Any = None
    inside: Any = True
    for k, n in zip(adv, sizes, strict=True):
        it = pairs[k][1]
        # (the merged index needs 64 bits)
        i = (it if it.aval.dtype == "int64" else _convert(it, "int64")) if isinstance(it, Tracer) \
            else np.asarray(it, np.int64)
        i = where(less(i, 0), add(i, n), i)
        if clamp:
            i = clip(i, 0, builtins.max(n - 1, 0))
        else:
            inside = logical_and(inside, logical_and(greater_equal(i, 0), less(i, n)))
        flat = i if flat is None else add(multiply(flat, n), i)
    flat = broadcast_to(flat if clamp else where(inside, flat, -1), bshape)
    rest_shape = tuple(d for a, d in enumerate(x.shape) if a not in axes)
    adjacent = adv[-1] - adv[0] + 1 == len(adv)
    at = builtins.sum(1 for _, it in pairs[:adv[0]] if it is None or isinstance(it, slice)) if adjacent else 0
    return adv, axes, sizes, rest_shape, bshape, flat, at


def _getitem_broadcast(x: Tracer, pairs: list[tuple[int | None, Any]]) -> Any:
    """x[items] with several integer index arrays (some traced) and scalars: NumPy's
    advanced indexing, read as one index into the indexed axes merged (``_merged_index``)."""
    adv, axes, sizes, rest_shape, bshape, flat, at = _merged_index(x, pairs, clamp=True)
    merged = reshape(moveaxis(x, axes, list(range(len(axes)))), (int(np.prod(sizes, dtype=np.int64)), *rest_shape))
    out = _take_traced(merged, flat, 0, "index")
    rest = [it for k, (_, it) in enumerate(pairs) if k not in adv]
    if builtins.any(it is None or it != slice(None) for it in rest):
        out = getitem(out, (*(slice(None),) * len(bshape), *rest))
    return moveaxis(out, list(range(len(bshape))), list(range(at, at + len(bshape)))) if at and bshape else out


def _basic_integer(it: Any) -> bool:
    """Whether an index item is a constant integer scalar (an advanced index beside arrays)."""
    return isinstance(it, int | np.integer) and not isinstance(it, bool | np.bool_)


def _take_traced(x: Tracer, idx: Tracer, axis: int, mode: str | None = None, fill_value: Any = None) -> Any:
    """x taken along ``axis`` at traced integer indices: a one-hot selection (size
    idx.size * x.shape[axis] * rest). Out of range: ``"index"`` counts negative indices
    from the end, then clamps (JAX's indexing); ``"clip"`` clamps (NumPy's take), ``"wrap"``
    wraps; otherwise negative indices count from the end and the rest give ``fill_value``
    (by default JAX's: nan; for integers the most negative value, or the largest unsigned;
    True)."""

    n = x.shape[axis]
    if n == 0 and idx.size and mode in ("index", "clip", "wrap"):  # (as JAX: no element to clamp to)
        raise IndexError(f"tidu.numpy: a traced index into axis {axis} of size 0: there is no element to read; "
                         "read with mode='fill' (x.at[i].get(mode='fill'), tnp.take) for a fill value")
    fill = _fill_value(x.aval.dtype, fill_value)
    idx = _wide_index(idx, n)
    if mode == "wrap":
        idx = remainder(idx, n)
    elif mode == "clip":
        idx = clip(idx, 0, n - 1)
    else:
        idx = where(less(idx, 0), add(idx, n), idx)
        if mode == "index" and idx.ndim:  # (a dynamic slice clamps a scalar index itself)
            idx = clip(idx, 0, n - 1)
    if idx.ndim == 0 and n:  # one index: a dynamic slice, which clamps as "index" does
        picked = dynamic_slice(x, idx, axis, 1)
        picked = reshape(picked, x.shape[:axis] + x.shape[axis + 1:])
        if mode in ("index", "clip", "wrap"):
            return picked
        inside = logical_and(greater_equal(idx, 0), less(idx, n))
        return where(inside, picked, fill)
    xm = moveaxis(x, axis, 0)  # (n, rest...)
    rest = xm.shape[1:]
    hit = equal(reshape(idx, (*idx.shape, 1) + (1,) * len(rest)),
                np.arange(n).reshape((n,) + (1,) * len(rest)))
    picked = _one_hot_sum(xm, hit, idx.ndim)  # exact: -0.0 stays -0.0
    if mode not in ("index", "clip", "wrap"):  # out of range: the fill value, not the one-hot's 0
        inside = logical_and(greater_equal(idx, 0), less(idx, n))
        picked = where(reshape(inside, (*idx.shape,) + (1,) * len(rest)), picked, fill)
    return moveaxis(picked, list(range(idx.ndim)), list(range(axis, axis + idx.ndim))) if axis else picked


_TAKE_MODES = (None, "raise", "fill", "clip", "wrap", "promise_in_bounds")


def _take_mode(name: str, mode: Any, fill_value: Any, modes: tuple[str | None, ...] = _TAKE_MODES) -> str | None:
    """``mode`` checked and normalized: "fill" where ``fill_value`` is given without a mode
    (jax.numpy's default mode is "fill"), "clip" for "promise_in_bounds" (an index out of
    range gives an unspecified element there, as in JAX), None for NumPy's "raise"."""
    if mode not in modes:
        listed = ", ".join(repr(m) for m in modes if m is not None)
        raise ValueError(f"tnp.{name}: mode {mode!r} is not one of {listed} (or None)")
    if isinstance(fill_value, Tracer):
        raise TypeError(f"tnp.{name}: fill_value must be a constant scalar (as in jax.numpy), not a traced value")
    if fill_value is not None and np.ndim(fill_value) != 0:
        raise ValueError(f"tnp.{name}: fill_value must be a scalar, got one of shape {np.shape(fill_value)}")
    if mode is None and fill_value is not None:
        return "fill"
    return {"raise": None, "promise_in_bounds": "clip"}.get(mode, mode)


def _filled_take(a: Any, safe_pick: Any, inside: np.ndarray, mask_shape: tuple[int, ...], fill: np.ndarray) -> Any:
    """``safe_pick`` (the elements at in-range positions) where ``inside`` holds (reshaped to
    ``mask_shape``), else ``fill``: NumPy arrays or a tracer."""
    mask = np.reshape(inside, mask_shape)
    if isinstance(safe_pick, Tracer):
        return where(mask, safe_pick, fill)
    return np.where(mask, safe_pick, fill).astype(np.asarray(a).dtype)


def _constant_indices(name: str, a: Any, indices: Any, axis: int | None) -> tuple[Any, np.ndarray, int, bool]:
    """``take``'s and ``take_along_axis``'s operands for constant indices: ``a`` (a NumPy
    array unless traced; flattened, with axis 0, where ``axis`` is None), the integer
    indices, the axis, and whether ``a`` is traced."""
    traced = isinstance(a, Tracer)
    if not traced:
        a = np.asarray(a)
    idx = np.asarray(indices)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"tnp.{name}: indices must be integers, got dtype {idx.dtype}")
    if axis is None:
        a, axis = reshape(a, (a.size,)) if traced else a.ravel(), 0
    return a, idx, axis, traced


def _np_take(a: Any, indices: Any, axis: int | None = None, out: Any = None, mode: str | None = None,
             unique_indices: bool = False, indices_are_sorted: bool = False, fill_value: Any = None) -> Any:
    """``take`` of NumPy values (``a`` a NumPy array, or a tracer with constant indices)."""
    if out is not None:
        raise TypeError("tnp.take: out= is not supported (as in jax.numpy); use the returned array")
    mode = _take_mode("take", mode, fill_value)
    a, idx, axis, traced = _constant_indices("take", a, indices, axis)
    if not -a.ndim <= axis < a.ndim:
        raise ValueError(f"tnp.take: axis {axis} is out of bounds for an array of rank {a.ndim}")
    ax = axis % a.ndim
    n = a.shape[ax]
    if mode != "fill":
        if n == 0 and mode in ("clip", "wrap") and idx.size:
            raise IndexError(f"tnp.take: mode {mode!r} takes from an axis of size 0; there is no element to take")
        try:
            positions = np.take(np.arange(a.size).reshape(a.shape), idx, axis=ax, mode=mode or "raise")
        except IndexError as e:
            raise IndexError(f"tnp.take: {e}; give mode='fill' (jax.numpy's default), 'clip' or 'wrap' for "
                             "indices out of range") from None
        return _gather(a, np.asarray(positions)) if traced else np.asarray(a.ravel()[positions])
    fill = _fill_value(a.aval.dtype if traced else a.dtype.name, fill_value)
    norm = np.where(idx < 0, idx + n, idx)
    inside = (norm >= 0) & (norm < n)
    out_shape = a.shape[:ax] + idx.shape + a.shape[ax + 1:]
    if n == 0:  # every index is out of range
        return broadcast_to(a.trace.constant(fill), out_shape) if traced else np.full(out_shape, fill)
    safe = np.where(inside, norm, 0)
    picked = _gather(a, np.take(np.arange(a.size).reshape(a.shape), safe, axis=ax)) if traced else np.take(a, safe, ax)
    return _filled_take(a, picked, inside, (1,) * ax + idx.shape + (1,) * (a.ndim - ax - 1), fill)


@numpy_fallback(_np_take, "a", "indices")
def take(a: ArrayLike, indices: ArrayLike, axis: int | None = None, out: Any = None, mode: str | None = None,
         unique_indices: bool = False, indices_are_sorted: bool = False, fill_value: Any = None) -> Any:
    """Elements of ``a`` at ``indices`` along ``axis`` (of the flattened array by default),
    as ``jax.numpy.take``: negative indices count from the end. Out of range: ``mode="fill"``
    gives ``fill_value`` (JAX's default: nan, the most negative integer, the largest
    unsigned one, True), ``"clip"`` clamps to [0, n - 1] (a negative index is 0), ``"wrap"``
    takes the index modulo n; with no mode (NumPy's "raise") constant indices out of range
    are an IndexError and traced ones give the fill value, as JAX's default.
    ``unique_indices`` and ``indices_are_sorted`` are accepted and ignored."""
    if not isinstance(a, Tracer):  # traced indices into a constant
        return take(_const(indices, a), indices, axis, out, mode, unique_indices, indices_are_sorted, fill_value)
    if not isinstance(indices, Tracer):
        return _np_take(a, indices, axis, out, mode, unique_indices, indices_are_sorted, fill_value)
    if out is not None:
        raise TypeError("tnp.take: out= is not supported (as in jax.numpy); use the returned array")
    mode = _take_mode("take", mode, fill_value)
    if not is_integer(indices.aval.dtype):
        raise TypeError(f"tnp.take: indices must be integers, got dtype {indices.aval.dtype}")
    if axis is None:
        a, axis = reshape(a, (a.size,)), 0
    ax = axis % a.ndim if -a.ndim <= axis < a.ndim else None
    if ax is None:
        raise ValueError(f"tnp.take: axis {axis} is out of bounds for an array of rank {a.ndim}")
    if a.shape[ax] == 0 and mode in ("clip", "wrap") and indices.size:
        raise IndexError(f"tnp.take: mode {mode!r} takes from an axis of size 0; there is no element to take")
    return _take_traced(a, indices, ax, mode, fill_value)


def _const(indices: Tracer, a: Any) -> Tracer:
    return indices.trace.constant(np.asarray(a))


_ALONG_MODES = (None, "raise", "fill", "clip", "promise_in_bounds")


def _np_take_along_axis(arr: Any, indices: Any, axis: int | None = -1, mode: str | None = None,
                        fill_value: Any = None) -> Any:
    """``take_along_axis`` of NumPy values (``arr`` a NumPy array, or a tracer with constant
    indices)."""
    mode = _take_mode("take_along_axis", mode, fill_value, _ALONG_MODES)
    arr, idx, axis, traced = _constant_indices("take_along_axis", arr, indices, axis)
    if idx.ndim != arr.ndim:
        raise ValueError(f"tnp.take_along_axis: indices have {idx.ndim} axes and arr {arr.ndim}; they must have "
                         "as many (add axes of size 1 with tnp.expand_dims)")
    if not -arr.ndim <= axis < arr.ndim:
        raise ValueError(f"tnp.take_along_axis: axis {axis} is out of bounds for an array of rank {arr.ndim}")
    ax = axis % arr.ndim
    n = arr.shape[ax]
    flat = np.arange(arr.size).reshape(arr.shape)
    if mode is None:
        try:
            positions = np.take_along_axis(flat, idx, axis=ax)
        except IndexError as e:
            raise IndexError(f"tnp.take_along_axis: {e}; give mode='fill' (jax.numpy's default) or 'clip' for "
                             "indices out of range") from None
        return _gather(arr, positions) if traced else np.asarray(arr.ravel()[positions])
    norm = np.where(idx < 0, idx + n, idx)
    if mode == "clip":
        if n == 0 and idx.size:
            raise IndexError("tnp.take_along_axis: mode 'clip' takes from an axis of size 0; there is no element "
                             "to take")
        safe = np.clip(norm, 0, max(n - 1, 0))
        return _gather(arr, np.take_along_axis(flat, safe, axis=ax)) if traced else np.take_along_axis(arr, safe, ax)
    fill = _fill_value(arr.aval.dtype if traced else arr.dtype.name, fill_value)
    inside = (norm >= 0) & (norm < n)
    out_shape = np.broadcast_shapes(tuple(d for i, d in enumerate(arr.shape) if i != ax),
                                    tuple(d for i, d in enumerate(idx.shape) if i != ax))
    out_shape = (*out_shape[:ax], idx.shape[ax], *out_shape[ax:])
    if n == 0:
        return broadcast_to(arr.trace.constant(fill), out_shape) if traced else np.full(out_shape, fill)
    safe = np.where(inside, norm, 0)
    picked = (_gather(arr, np.take_along_axis(flat, safe, axis=ax)) if traced
              else np.take_along_axis(arr, safe, ax))
    return _filled_take(arr, picked, np.broadcast_to(inside, out_shape), out_shape, fill)


@numpy_fallback(_np_take_along_axis, "arr", "indices")
def take_along_axis(arr: ArrayLike, indices: ArrayLike, axis: int | None = -1, mode: str | None = None,
                    fill_value: Any = None) -> Any:
    """``arr`` picked along ``axis`` at ``indices`` (shaped like arr except along axis), as
    ``jax.numpy.take_along_axis``: negative indices count from the end; out of range,
    ``mode="fill"`` gives ``fill_value`` (JAX's default as ``take``'s), ``"clip"`` clamps
    (after counting negative indices from the end); with no mode constant indices out of
    range are an IndexError (NumPy's) and traced ones give the fill value (JAX's default)."""
    if not isinstance(arr, Tracer):
        arr = _const(indices, arr)
    if not isinstance(indices, Tracer):
        return _np_take_along_axis(arr, indices, axis, mode, fill_value)
    mode = _take_mode("take_along_axis", mode, fill_value, _ALONG_MODES)
    if not is_integer(indices.aval.dtype):
        raise TypeError(f"tnp.take_along_axis: indices must be integers, got dtype {indices.aval.dtype}")
    if axis is None:
        arr, axis = reshape(arr, (arr.size,)), 0
    if indices.ndim != arr.ndim:
        raise ValueError(f"tnp.take_along_axis: indices have {indices.ndim} axes and arr {arr.ndim}; they must "
                         "have as many (add axes of size 1 with tnp.expand_dims)")
    if not -arr.ndim <= axis < arr.ndim:
        raise ValueError(f"tnp.take_along_axis: axis {axis} is out of bounds for an array of rank {arr.ndim}")
    ax = axis % arr.ndim
    n = arr.shape[ax]
    if n == 0 and mode == "clip" and indices.size:
        raise IndexError("tnp.take_along_axis: mode 'clip' takes from an axis of size 0; there is no element to take")
    idx = _wide_index(indices, n)
    idx = where(less(idx, 0), add(idx, n), idx)
    if mode == "clip":
        idx = clip(idx, 0, n - 1)
    hit = equal(reshape(idx, (*idx.shape, 1)), np.arange(n))  # [..., m(at ax), ..., n]
    src = expand_dims(moveaxis(arr, ax, -1), ax)  # [..., 1(at ax), ..., n]
    picked = _one_hot_sum(src, hit, -1)  # exact: -0.0 stays -0.0
    if mode == "clip":
        return picked
    inside = logical_and(greater_equal(idx, 0), less(idx, n))
    return where(inside, picked, _fill_value(arr.aval.dtype, fill_value))


# --- x.at[index] ------------------------------------------------------------------------


def at(x: ArrayLike) -> _At:
    """``tnp.at(x)[index].set(values)`` (``add``, ``subtract``, ``multiply``, ``divide``,
    ``power``, ``min``, ``max``, ``get``): JAX's functional update ``x.at[index]`` as a
    function, so that the same code runs on NumPy arrays (a new NumPy array, computed by NumPy)
    and on traced values (``x.at[index]`` itself, which NumPy arrays lack)."""
    return _At(x)


class _At:
    """``x.at``: ``x.at[index]`` names the elements an update touches."""
    def __init__(self, x: Any) -> None:
        self.x = x

    def __getitem__(self, index: Any) -> _AtIndex:
        return _AtIndex(self.x, index)


# NumPy's unbuffered in-place ufuncs: repeated indices combine all their values, as traced
_NUMPY_AT = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
             "power": np.power, "min": np.minimum, "max": np.maximum}


class _AtIndex:
    """``x.at[index]``: functional updates of those elements (JAX's ``.at``); each returns a
    new array of x's dtype. Repeated indices: ``set`` keeps the last value, ``add``/
    ``multiply``/``min``/``max`` combine them all. A constant index out of range is an
    IndexError (as NumPy; docs/numpy.md says why) unless a ``mode`` is given; a traced one
    is never an error. Out-of-range indices (after counting negative ones from the end)
    then follow JAX's ``mode`` as XLA runs it: updates drop them (traced indices by
    default; ``"drop"``, ``"fill"``, ``"promise_in_bounds"``) or, with ``"clip"``, clamp
    them into range; ``get`` clamps them (traced indices by default; ``"clip"``,
    ``"promise_in_bounds"``) or reads ``fill_value`` (JAX's default: nan, the most negative
    integer...) with ``"fill"`` or ``"drop"``.
    ``unique_indices`` and ``indices_are_sorted`` are accepted and ignored. With nothing
    traced (``tnp.at`` of a NumPy array) NumPy computes the same where every index is in
    range and no mode is given; otherwise tidu's implementation runs (traced and compiled)."""

    def __init__(self, x: Any, index: Any) -> None:
        self.x, self.index = x, index

    def _apply(self, values: Any, name: str | None, combine: Any, options: dict[str, Any]) -> Any:
        mode = _at_mode(options, name or "set", update=True)
        items = self.index if isinstance(self.index, tuple) else (self.index,)
        trace = _trace_of((self.x, values, *items))
        if trace is not None:
            x = self.x if isinstance(self.x, Tracer) else _prep(trace, self.x, _info(self.x)[0])
            index = _clamped(x.shape, self.index) if mode == "clip" else self.index
            return _update(x, index, values, combine, drop=mode is not None)
        if mode is None:
            out = np.array(self.x)  # a copy, of x's dtype
            if name is None:
                out[self.index] = values
            else:
                _NUMPY_AT[name].at(out, self.index, values)
            return out
        return run_traced(lambda x, v: _AtIndex(x, self.index)._apply(v, name, combine, options),
                          (np.asarray(self.x), np.asarray(values)), {})

    def get(self, **options: Any) -> Any:
        """x[index]; with ``mode="fill"`` (or ``"drop"``) out-of-range indices read
        ``fill_value``."""
        mode = _at_mode(options, "get", update=False)
        items = self.index if isinstance(self.index, tuple) else (self.index,)
        traced = _trace_of((self.x, *items)) is not None
        if mode not in ("fill", "drop"):
            if mode is None or not _out_of_range(np.shape(self.x), items):
                return self.x[self.index] if traced else np.asarray(self.x)[self.index]
            index = _clamped(np.shape(self.x), self.index)  # (constant indices: traced ones clamp anyway)
            return self.x[index] if traced else np.asarray(self.x)[index]
        if not traced:
            return run_traced(lambda x: _AtIndex(x, self.index).get(**options), (np.asarray(self.x),), {})
        x = self.x if isinstance(self.x, Tracer) else _prep(_trace_of(items), self.x, _info(self.x)[0])
        fill = _fill_value(x.aval.dtype, options.get("fill_value"))
        if builtins.any(isinstance(it, Tracer) for it in items):
            pairs = _spelled(x.ndim, items) or []
            if builtins.any(isinstance(it, Tracer) and a is not None and a < x.ndim and x.shape[a] == 0
                            for a, it in pairs):  # nothing to read: every entry is the fill value
                picked = {a for a, it in pairs if a is not None and not isinstance(it, slice)}
                probe = np.zeros(tuple(builtins.max(n, 1) if k in picked else n for k, n in enumerate(x.shape)))
                shape = probe[tuple(it if it is None or it is Ellipsis or isinstance(it, slice)
                                    else np.zeros(np.shape(it), np.int64) for it in items)].shape
                return broadcast_to(x.trace.constant(fill), shape)
            ok = _traced_in_range(x.shape, items)
            return where(ok, x[_clamped(x.shape, self.index)], fill)
        positions = _positions(x.shape, items)
        flat = concatenate([reshape(x, (x.size,)), x.trace.constant(fill.reshape(1))])
        return reshape(_gather(flat, np.where(positions < 0, x.size, positions).reshape(-1)), positions.shape)

    def set(self, values: ArrayLike, **options: Any) -> Any:
        """x with x[index] = values."""
        return self._apply(values, None, None, options)

    def add(self, values: ArrayLike, **options: Any) -> Any:
        """x with x[index] += values."""
        return self._apply(values, "add", add, options)

    def subtract(self, values: ArrayLike, **options: Any) -> Any:
        """x with x[index] -= values."""
        return self._apply(values, "subtract", subtract, options)

    def multiply(self, values: ArrayLike, **options: Any) -> Any:
        """x with x[index] *= values."""
        return self._apply(values, "multiply", multiply, options)

    mul = multiply

    def divide(self, values: ArrayLike, **options: Any) -> Any:
        """x with x[index] /= values."""
        return self._apply(values, "divide", divide, options)

    def power(self, values: ArrayLike, **options: Any) -> Any:
        """x with x[index] **= values."""
        return self._apply(values, "power", power, options)

    def min(self, values: ArrayLike, **options: Any) -> Any:
        """x with x[index] = minimum(x[index], values)."""
        return self._apply(values, "min", minimum, options)

    def max(self, values: ArrayLike, **options: Any) -> Any:
        """x with x[index] = maximum(x[index], values)."""
        return self._apply(values, "max", maximum, options)


_AT_MODES = (None, "drop", "fill", "clip", "promise_in_bounds")
_AT_OPTIONS = {"mode", "fill_value", "indices_are_sorted", "unique_indices"}


def _at_mode(options: dict[str, Any], op: str, update: bool) -> str | None:
    unknown = sorted(set(options) - _AT_OPTIONS)
    if unknown:
        raise TypeError(f"x.at[...].{op}: unexpected keyword argument(s) {', '.join(unknown)} (JAX's options are "
                        f"{', '.join(sorted(_AT_OPTIONS))})")
    mode = options.get("mode")
    if mode not in _AT_MODES:
        raise ValueError(f"x.at[...].{op}: mode must be one of 'drop', 'fill', 'clip', 'promise_in_bounds' "
                         f"(or None), got {mode!r}")
    if update and options.get("fill_value") is not None:
        raise TypeError(f"x.at[...].{op}: fill_value is for reads (x.at[...].get(mode='fill', fill_value=...))")
    return mode


def _spelled(ndim: int, items: tuple[Any, ...]) -> list[tuple[int | None, Any]] | None:
    """``items`` as (axis, item) pairs with Ellipsis spelled out as full slices (axis None
    for ``None``), or None where a boolean mask makes the pairing not one axis per item."""
    if builtins.any(getattr(it, "dtype", None) == np.bool_ or isinstance(it, bool | np.bool_)
                    or (isinstance(it, Tracer) and it.aval.dtype == "bool") for it in items):
        return None
    used = builtins.sum(1 for it in items if it is not None and it is not Ellipsis)
    k = next((k for k, it in enumerate(items) if it is Ellipsis), None)  # not `in`: tracers compare elementwise
    if k is not None:
        items = items[:k] + (slice(None),) * builtins.max(ndim - used, 0) + items[k + 1:]
    out, axis = [], 0
    for it in items:
        out.append((None, it) if it is None else (axis, it))
        axis += it is not None
    return out


def _is_index_array(it: Any) -> bool:
    return not isinstance(it, slice | Tracer) and it is not None and it is not Ellipsis


def _out_of_range(shape: tuple[int, ...], items: tuple[Any, ...]) -> bool:
    """Whether a constant integer item of the index is out of range (traced ones: unknown)."""
    pairs = _spelled(len(shape), items)
    return pairs is not None and builtins.any(
        axis is not None and axis < len(shape) and _is_index_array(it)
        and np.any((np.asarray(it) < -shape[axis]) | (np.asarray(it) >= shape[axis])) for axis, it in pairs)


def _clamped(shape: tuple[int, ...], index: Any) -> Any:
    """``index`` with each integer item (constant or traced) counted from the end where
    negative and clamped into its axis' range (JAX's mode "clip")."""
    items = index if isinstance(index, tuple) else (index,)
    pairs = _spelled(len(shape), items)
    if pairs is None:
        raise TypeError("x.at[...] with mode 'clip' and a boolean mask: a mask has no index to clamp; drop the mode")
    out = []
    for axis, it in pairs:
        if axis is None or axis >= len(shape) or shape[axis] == 0 or isinstance(it, slice):
            out.append(it)
            continue
        n = shape[axis]
        if isinstance(it, Tracer):
            i = _wide_index(it, n)
            i = where(less(i, 0), add(i, n), i)
            out.append(minimum(maximum(i, 0), n - 1))
        else:
            i = np.asarray(it)
            i = np.clip(np.where(i < 0, i + n, i), 0, n - 1)
            out.append(i if np.ndim(it) else int(i))
    return tuple(out) if isinstance(index, tuple) else out[0]


def _traced_in_range(shape: tuple[int, ...], items: tuple[Any, ...]) -> Any:
    """Whether every integer item (a traced scalar or a constant) of an index is in range."""
    ok: Any = True
    for axis, it in _spelled(len(shape), items) or ():
        if axis is None or isinstance(it, slice) or axis >= len(shape):
            continue
        n = shape[axis]
        if isinstance(it, Tracer):
            i = _wide_index(it, n)
            inside = logical_and(greater_equal(i, -n), less(i, n))
        else:
            inside = bool(np.all((np.asarray(it) >= -n) & (np.asarray(it) < n)))
        ok = logical_and(ok, inside)
    return ok


def _positions(shape: tuple[int, ...], items: tuple[Any, ...]) -> np.ndarray:
    """The flat positions in an array of ``shape`` of ``x[items]`` (constant items), -1
    where an integer index is out of range after counting negative ones from the end."""
    size = int(np.prod(shape, dtype=np.int64))
    index = items if len(items) != 1 else items[0]
    try:
        return np.asarray(np.arange(size).reshape(shape)[index])
    except IndexError as e:
        pairs = _spelled(len(shape), items)
        if (pairs is None or builtins.sum(a is not None for a, _ in pairs) > len(shape)
                or builtins.any(_is_index_array(it) and np.asarray(it).dtype.kind not in "iu" for _, it in pairs)):
            raise IndexError(f"tidu.numpy: {e}") from None  # not an index out of range (a float index, say)
    # the same index into a table one larger along each axis, its last entries -1, with
    # each out-of-range index pointing there
    table = np.full(tuple(n + 1 for n in shape), -1, np.int64)
    table[tuple(slice(0, n) for n in shape)] = np.arange(size).reshape(shape)
    moved = []
    for axis, it in pairs:
        if axis is None:
            moved.append(it)
            continue
        n = shape[axis]
        if isinstance(it, slice):
            start, stop, step = it.indices(n)
            moved.append(slice(start, stop if stop >= 0 else None, step))
        else:
            i = np.asarray(it)
            i = np.where(i < 0, i + n, i)
            i = np.where((i < 0) | (i >= n), n, i)
            moved.append(i if np.ndim(it) else int(i))
    # the axes after the last one the index names are whole: of the table's, without its -1 entry
    last = builtins.max((a for a, _ in pairs if a is not None), default=-1)
    moved += [slice(0, n) for n in shape[last + 1:]]
    return np.asarray(table[tuple(moved)])


def _update(x: Tracer, index: Any, values: Any, combine: Any, drop: bool = False) -> Any:
    """x with x[index] combined with ``values``; ``drop``: constant indices out of range
    update nothing (a mode was given), else they are an IndexError."""

    x.check_alive()
    items = index if isinstance(index, tuple) else (index,)
    if builtins.any(isinstance(it, Tracer) for it in items):
        return _update_traced(x, items, values, combine, drop)
    if builtins.all(isinstance(it, slice) and it == slice(None) for it in items):  # x.at[()], x.at[:]
        return _update_whole(x, values, combine)
    positions = _positions(x.shape, items)  # -1: out of range
    if not drop and positions.size and positions.min() < 0:
        raise IndexError(f"tidu.numpy: x.at[...]: an index is out of range for shape {x.shape} (JAX would drop "
                         "this update silently); pass mode='drop' (or 'clip') to x.at[...].set/add/... for that")
    v = broadcast_to(_fitted(x, values, positions.shape), positions.shape)
    if not isinstance(v, Tracer):
        v = x.trace.constant(np.ascontiguousarray(v))
    p = positions.reshape(-1)
    vflat = reshape(v, (p.size,))
    if p.size and p.min() < 0:
        kept = np.flatnonzero(p >= 0)
        p, vflat = p[kept], _gather(vflat, kept)
    out = x
    # one layer per occurrence: within a layer the positions are distinct
    order = np.argsort(p, kind="stable")
    occurrence = np.empty(p.size, np.int64)
    if p.size:
        sp = p[order]
        starts = np.r_[0, np.flatnonzero(sp[1:] != sp[:-1]) + 1]
        group = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, p.size]))
        occurrence[order] = np.arange(p.size) - starts[group]
    if combine in (maximum, minimum) and p.size and occurrence.max() > 0:
        return _extremal_repeated(x, p, vflat, occurrence, combine is maximum)
    for layer in range(int(occurrence.max()) + 1 if p.size else 0):
        ks = np.flatnonzero(occurrence == layer)
        pos = p[ks]
        new_vals = _gather(vflat, ks) if ks.size != p.size else vflat
        if combine is not None:
            new_vals = combine(_gather(out, pos), new_vals)
        flat = reshape(out, (x.size,))

        new_vals = _convert(new_vals, out.aval.dtype) if new_vals.aval.dtype != out.aval.dtype else new_vals
        src = np.arange(x.size)
        src[pos] = x.size + np.arange(pos.size)
        out = reshape(_gather(concatenate([flat, new_vals]), src), x.shape)
    return out


def _extremal_repeated(x: Tracer, p: np.ndarray, vflat: Tracer, occurrence: np.ndarray, is_max: bool) -> Tracer:
    """x.at[positions].max (min) with repeated positions, as JAX's scatter_max (min): each
    updated element the extreme of its old value and all values sent to it in one
    reduction, so that at ties the derivative is shared equally among all tied entries
    (the old value and every tied update), not pairwise in the order of the updates."""
    uniq = np.unique(p)
    k = int(occurrence.max()) + 1
    flat = reshape(x, (x.size,))
    vals = _convert(vflat, x.aval.dtype) if vflat.aval.dtype != x.aval.dtype else vflat
    dtype = np.dtype(x.aval.dtype)
    if dtype.kind == "f":
        pad_value = -np.inf if is_max else np.inf
    elif dtype.kind == "b":
        pad_value = not is_max
    else:
        pad_value = np.iinfo(dtype).min if is_max else np.iinfo(dtype).max
    pad = x.trace.constant(np.full((1,), pad_value, dtype))
    source = concatenate([flat, vals, pad])  # x, then the values, then the neutral entry
    table = np.full((uniq.size, k + 1), x.size + p.size, np.int64)
    table[:, 0] = uniq
    row = np.searchsorted(uniq, p)
    table[row, 1 + occurrence] = x.size + np.arange(p.size)
    reduced = (_reduce_max if is_max else _reduce_min)(_gather(source, table), axis=1)
    src = np.arange(x.size)
    src[uniq] = x.size + np.arange(uniq.size)
    return reshape(_gather(concatenate([flat, reduced]), src), x.shape)


def _fitted(x: Tracer, values: Any, shape: tuple[int, ...]) -> Any:
    """``values`` (a tracer, or a NumPy array in the dtype ``x`` and they promote to)
    without the leading axes of size 1 beyond ``shape``'s rank (as NumPy's assignment drops
    them, so that ``tnp.at`` of a NumPy array and of a traced one agree), checked to
    broadcast to ``shape``: the elements ``x.at[...]`` updates."""
    v = values if isinstance(values, Tracer) else np.asarray(values, dtype=result_type(x, values))
    extra = builtins.max(v.ndim - len(shape), 0)
    if extra and builtins.all(d == 1 for d in v.shape[:extra]):
        v = reshape(v, v.shape[extra:]) if isinstance(v, Tracer) else v.reshape(v.shape[extra:])
    try:
        fits = np.broadcast_shapes(v.shape, shape) == tuple(shape)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"tidu.numpy: x.at[...]: values of shape {np.shape(values)} do not fit the elements of shape "
                         f"{tuple(shape)} they update (they must broadcast to that shape)")
    return v


def _update_whole(x: Tracer, values: Any, combine: Any) -> Tracer:
    """x with every element updated: ``values`` broadcast to x's shape (``set``) or
    combined with x, in x's dtype."""
    v = _fitted(x, values, x.shape)
    v = v if isinstance(v, Tracer) else x.trace.constant(v)
    new = broadcast_to(v, x.shape) if combine is None else combine(x, v)
    return _convert(new, x.aval.dtype) if new.aval.dtype != x.aval.dtype else new


def _update_traced(x: Tracer, items: tuple[Any, ...], values: Any, combine: Any, drop: bool = False) -> Any:
    """x.at[items] updated where some items are traced integer scalars, as JAX's: the
    slice at the first traced index is updated by the rest of the index, then put back
    where the index hits (an index out of range after counting negative ones from the end
    updates nothing)."""
    if builtins.any((isinstance(it, Tracer) and it.ndim) or (not _basic(it) and not isinstance(it, Tracer))
                    for it in items):  # a traced index array, or a constant one beside traced indices
        return _update_broadcast(x, _explicit(x, items, "x.at[...] with", several=True), values, combine)
    pairs = _explicit(x, items, "x.at[...] with")
    k = next(k for k, (_, it) in enumerate(pairs) if isinstance(it, Tracer))
    axis, i = pairs[k]
    n = x.shape[axis]
    if n == 0:  # nothing to update
        return x
    i = _wide_index(i, n)
    i = where(less(i, 0), add(i, n), i)  # (once: an index still negative is out of range)
    part = reshape(dynamic_slice(x, i, axis, 1), x.shape[:axis] + x.shape[axis + 1:])  # at i clamped into range
    rest = tuple(it for j, (_, it) in enumerate(pairs) if j != k)
    new = _update(part, rest, values, combine, drop)
    # written back where it was read (the update clamps i as the read did); an index out of
    # range writes what it read: no change
    new = where(logical_and(greater_equal(i, 0), less(i, n)), new, part)
    return dynamic_update_slice(x, expand_dims(new, axis), i, axis)


# how the values at repeated indices combine before they meet x: the op's own reduction
_AGGREGATES = {add: "sum", subtract: "sum", multiply: "prod", divide: "prod", minimum: "min", maximum: "max",
               None: "last"}


def _update_broadcast(x: Tracer, pairs: list[tuple[int | None, Any]], values: Any, combine: Any) -> Any:
    """x.at[items] updated where the integer index items (some traced, an array among them)
    broadcast together, as NumPy indexes and JAX scatters: each update is a one-hot over the
    indexed axes merged; the values at repeated indices are summed (``add``, ``subtract``),
    multiplied (``multiply``, ``divide``), reduced (``min``, ``max``), or the last one is
    kept (``set``); an index out of range after counting negative ones from the end updates
    nothing (JAX's default for traced indices)."""
    kind = _AGGREGATES.get(combine)
    if kind is None:
        raise TypeError("tidu.numpy: x.at[...].power with a traced index array: repeated powers do not combine "
                        "into one; use constant indices, or loop with tidu.lax.fori_loop")
    adv, axes, sizes, rest_shape, bshape, flat, at = _merged_index(x, pairs, clamp=False)
    rest = [it for k, (_, it) in enumerate(pairs) if k not in adv]
    if builtins.any(it is None or it != slice(None) for it in rest):
        raise TypeError("tidu.numpy: x.at[...] with a traced index array beside a partial slice or None: tidu "
                        "updates at index arrays with whole axes beside them (x.at[i, j], x.at[:, idx]); update "
                        "in two steps (x.at[i].set(x[i].at[:, 1:3].set(v)))")
    flat = reshape(flat, (-1,))  # -1: out of range, hits nothing
    m, total = flat.shape[0], int(np.prod(sizes, dtype=np.int64))
    # the values as x[items] has them (the index axes where NumPy puts them), then index axes first
    got = (*rest_shape[:at], *bshape, *rest_shape[at:])
    v = broadcast_to(_fitted(x, values, got), got)
    v = v if isinstance(v, Tracer) else x.trace.constant(np.ascontiguousarray(v))
    v = moveaxis(v, list(range(at, at + len(bshape))), list(range(len(bshape)))) if at and bshape else v
    v = reshape(v, (m, 1, *rest_shape))
    merged = reshape(moveaxis(x, axes, list(range(len(axes)))), (total, *rest_shape))
    hit = equal(reshape(flat, (m, 1)), np.arange(total).reshape(1, total))  # (m, total)
    hits = reshape(hit, (m, total) + (1,) * len(rest_shape))
    if kind == "last":  # the last update of each element, as NumPy's assignment keeps it
        last = _reduce_max(where(hit, np.arange(m).reshape(m, 1), -1), axis=0)
        chosen = logical_and(hit, equal(np.arange(m).reshape(m, 1), reshape(last, (1, total))))
        agg = _one_hot_sum(v, reshape(chosen, (m, total) + (1,) * len(rest_shape)), 0)
    else:
        dtype = v.aval.dtype
        identity = {"sum": np.zeros((), dtype), "prod": np.ones((), dtype), "min": _fill_extreme(dtype, True),
                    "max": _fill_extreme(dtype, False)}[kind]
        reduce = {"sum": _reduce_sum, "prod": _reduce_prod, "min": _reduce_min, "max": _reduce_max}[kind]
        agg = reduce(where(hits, v, identity), axis=0)
    touched = reshape(_reduce_any(hit, axis=0), (total,) + (1,) * len(rest_shape))
    new = where(touched, agg if combine is None else combine(merged, agg), merged)
    new = _convert(new, x.aval.dtype) if new.aval.dtype != x.aval.dtype else new
    out = reshape(new, (*sizes, *rest_shape))
    return moveaxis(out, list(range(len(axes))), axes)


def _fill_extreme(dtype: str, highest: bool) -> np.ndarray:
    """The identity of min (``highest``) or max in ``dtype``."""
    if is_integer(dtype):
        info = np.iinfo(dtype)
        return np.array(info.max if highest else info.min, dtype)
    if dtype == "bool":
        return np.array(highest)
    return np.array(np.inf if highest else -np.inf, dtype)


def _fill_value(dtype: str, fill_value: Any = None) -> np.ndarray:
    """The value of a read out of range (``take``'s mode "fill"): ``fill_value`` in
    ``dtype`` (as JAX converts it), by default JAX's."""
    if fill_value is not None:
        return np.asarray(fill_value).astype(dtype)
    if dtype == "bool":
        return np.array(True)
    if is_integer(dtype):
        info = np.iinfo(dtype)
        return np.array(info.max if info.min == 0 else info.min, dtype)
    return np.array(np.nan, dtype)


def _wide_index(idx: Tracer, n: int) -> Tracer:
    """A traced index in a dtype that holds -n..2n (what counting from the end and
    clamping compute): int64 where its own (unsigned, or too narrow) does not."""
    return idx if holds_index_arithmetic(idx.aval.dtype, n) else _convert(idx, "int64")


def dynamic_slice(x: Any, start: Any, axis: int, size: int) -> Tracer:
    """The ``size`` entries of ``x`` along ``axis`` from traced integer scalar ``start``,
    clamped so they fit (the ``dynamic_slice`` primitive)."""
    trace = _trace_of([x, start])
    return trace.emit("dynamic_slice", [x, start], {"axis": axis, "size": size})


def dynamic_update_slice(x: Any, update: Any, start: Any, axis: int) -> Tracer:
    """``x`` with the entries along ``axis`` from traced integer scalar ``start`` (clamped
    so ``update`` fits) replaced by ``update`` (the ``dynamic_update_slice`` primitive)."""
    trace = _trace_of([x, update, start])
    return trace.emit("dynamic_update_slice", [x, update, start], {"axis": axis})


# --- selection by conditions and indices ------------------------------------------------


@numpy_fallback(np.select, "condlist", "choicelist", "default", nested=True)
def select(condlist: Sequence[ArrayLike], choicelist: Sequence[ArrayLike], default: ArrayLike = 0) -> Any:
    """Elementwise the choice of the first true condition (``default`` where none is)."""
    if len(condlist) != len(choicelist):
        raise ValueError("tnp.select: condlist and choicelist must have the same length")
    out = default
    for cond, choice in reversed(list(zip(condlist, choicelist, strict=True))):
        out = where(cond, choice, out)
    return out


def _numpy_piecewise(x: ArrayLike, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any) -> Any:
    return numpy_calling_back(lambda: np.piecewise(x, condlist, [guarded(fn) for fn in funclist], *args, **kw),
                              lambda: _piecewise_selected(x, condlist, funclist, *args, **kw))


@numpy_fallback(_numpy_piecewise, "x", "condlist", "funclist", nested=True)
def piecewise(x: ArrayLike, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any) -> Any:
    """funclist[i](x) where condlist[i] (a constant or callable value each); one more
    function than conditions gives the value where none holds (0 by default, also where x
    is nan or inf: not x * 0). The result has ``x``'s dtype, each function's values cast
    to it, as NumPy and JAX assign them (an integer ``x`` truncates a float value)."""
    return _piecewise_selected(x, condlist, funclist, *args, **kw)


def _piecewise_selected(x: ArrayLike, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any) -> Any:
    conds = [condlist] if not isinstance(condlist, list | tuple) else list(condlist)
    if len(funclist) == len(conds) + 1:
        none = conds[0]
        for c in conds[1:]:
            none = logical_or(none, c)
        conds.append(logical_not(none))
    if len(funclist) != len(conds):
        raise ValueError("tnp.piecewise: funclist needs one function per condition (or one more)")
    out = zeros_like(x)
    dtype = out.aval.dtype if isinstance(out, Tracer) else np.asarray(out).dtype.name
    for cond, fn in zip(conds, funclist, strict=True):
        val = fn(x, *args, **kw) if callable(fn) else fn
        val = val if isinstance(val, Tracer) else np.asarray(val)
        out = where(cond, _convert(val, dtype) if isinstance(val, Tracer) else val.astype(dtype), out)
    return out


@numpy_fallback(np.choose, "a", "choices", nested=True)
def choose(a: ArrayLike, choices: Sequence[ArrayLike], mode: str = "raise") -> Any:
    """choices[a[i]][i] elementwise (``a`` constant integers, or traced). ``mode`` as
    NumPy's: "wrap" takes an index modulo the number of choices, "clip" clamps it; with
    "raise" a constant index out of range is a ValueError and a traced one gives the fill
    value of ``take`` (JAX's default: nan, the most negative integer, ...)."""
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"tnp.choose: mode {mode!r} is not one of 'raise', 'wrap', 'clip'")
    n = len(choices)
    if n == 0:
        raise ValueError("tnp.choose: choices must hold at least one array")
    idx = a
    if isinstance(a, Tracer) and not is_integer(a.aval.dtype):
        raise TypeError(f"tnp.choose: the index array must be integers, got a traced one of dtype {a.aval.dtype}")
    if not isinstance(a, Tracer):
        idx = np.asarray(a)
        if mode == "wrap":
            idx = idx % n
        elif mode == "clip":
            idx = np.clip(idx, 0, n - 1)
        elif ((idx < 0) | (idx >= n)).any():
            raise ValueError("tnp.choose: invalid entry in the choice array")
    elif mode == "wrap":
        idx = remainder(_wide_index(a, n), n)
    elif mode == "clip":
        idx = clip(_wide_index(a, n), 0, n - 1)
    out = choices[-1]
    for k in range(n - 2, -1, -1):
        out = where(equal(idx, k), choices[k], out)
    if isinstance(a, Tracer) and mode == "raise":  # out of range: no choice, the fill value
        inside = logical_and(greater_equal(a, 0), less(a, n))
        out = where(inside, out, _fill_value(out.aval.dtype))
    return out


@numpy_fallback(lambda condition, a, axis=None, *, size=None: np.compress(condition, a, axis=axis), "a")
def compress(condition: ArrayLike, a: ArrayLike, axis: int | None = None, *, size: int | None = None) -> Any:
    """The slices of ``a`` along ``axis`` where the (constant) ``condition`` is true (``size``,
    as in JAX, must then equal their number)."""
    if isinstance(condition, Tracer):
        raise TypeError("tnp.compress: the condition must be a constant (the result's shape depends on it)")
    keep = np.flatnonzero(np.asarray(condition))
    if size is not None and size != keep.size:
        raise ValueError(f"tnp.compress: size={size} but the condition selects {keep.size}")
    shape = a.shape if isinstance(a, Tracer) else np.shape(a)
    n = int(np.prod(shape)) if axis is None else shape[axis] if -len(shape) <= axis < len(shape) else None
    if n is not None and keep.size and keep[-1] >= n:
        raise IndexError(f"tnp.compress: the condition selects entry {keep[-1]} of an axis of size {n}; a condition "
                         "longer than the axis may only have False entries past it")
    return take(a, keep, axis=axis)


def _np_put(a: Any, ind: Any, v: Any, mode: str | None = None, *, inplace: bool = False) -> Any:
    out = np.array(a, copy=True)
    np.put(out, ind, v, mode=mode or "raise")
    return out


@numpy_fallback(_np_put, "a", "v")
def put(a: ArrayLike, ind: ArrayLike, v: ArrayLike, mode: str | None = None, *, inplace: bool = False) -> Any:
    """``a`` with its flat entries ``ind`` replaced by ``v`` (a new array: traced values are
    immutable, so ``inplace=True`` is refused)."""
    if inplace:
        raise ValueError("tnp.put: traced arrays are immutable; call with inplace=False and use the result")
    flat = reshape(a, (a.size,))
    idx = np.asarray(ind).ravel()
    if mode == "wrap":
        idx = idx % a.size
    elif mode == "clip":
        idx = np.clip(idx, 0, a.size - 1)
    vv = v if isinstance(v, Tracer) else np.asarray(v)
    n = idx.size

    vals = resize(ravel(vv), n) if (vv.size if not isinstance(vv, Tracer) else vv.size) != n else ravel(vv)
    return reshape(_At(flat)[idx].set(vals), a.shape)


def place(arr: ArrayLike, mask: ArrayLike, vals: ArrayLike, *, inplace: bool = True) -> Any:
    """``arr`` with its entries where ``mask`` holds (in C order) replaced by the entries of
    ``vals`` in turn, repeated as often as needed (``jax.numpy.place``: a new array, so
    ``inplace=False`` is required, as JAX's). ``mask`` has ``arr``'s size; it may be traced
    (the positions come from a running count of its True entries)."""
    if inplace:
        raise ValueError("tnp.place cannot modify arrays in place (traced arrays are immutable); "
                         "pass inplace=False and use the returned array")
    a = arr if isinstance(arr, Tracer) else np.asarray(arr)
    m = mask if isinstance(mask, Tracer) else np.asarray(mask)
    v = vals if isinstance(vals, Tracer) else np.asarray(vals)
    if m.size != a.size:
        raise ValueError(f"tnp.place: mask has {m.size} elements and arr {a.size}; they must have as many")
    if a.size == 0 or v.size == 0:
        return a
    flat = ravel(v)
    if not isinstance(m, Tracer):  # which entries is known: those entries set, as put
        where_set = np.flatnonzero(m)
        return put(a, where_set, resize(flat, where_set.size), inplace=False) if where_set.size else a
    hit = ravel(m != 0)
    turn = remainder(cumsum(_convert(hit, "int64")) - 1, v.size)  # the i-th True entry takes vals[i % n]
    picked = _convert(take(flat, turn, mode="clip"), result_type(a))
    return reshape(where(hit, picked, ravel(a)), a.shape)


def _np_put_along_axis(arr: Any, indices: Any, values: Any, axis: int | None, inplace: bool = False,
                       mode: str | None = None) -> Any:
    out = np.array(arr, copy=True)
    np.put_along_axis(out, indices, values, axis)
    return out


@numpy_fallback(_np_put_along_axis, "arr", "values")
def put_along_axis(arr: ArrayLike, indices: ArrayLike, values: ArrayLike, axis: int | None,
                   inplace: bool = False, mode: str | None = None) -> Any:
    """``arr`` with the entries ``take_along_axis`` would read replaced by ``values``."""
    if inplace:
        raise ValueError("tnp.put_along_axis: traced arrays are immutable; use inplace=False")
    if axis is None:
        flat = reshape(arr, (arr.size,))
        return reshape(put_along_axis(flat, np.ravel(indices), values, 0), arr.shape)
    positions = np.take_along_axis(np.arange(arr.size).reshape(arr.shape), np.asarray(indices), axis=axis)

    vals = broadcast_to(values if isinstance(values, Tracer) else np.asarray(values), positions.shape)
    return reshape(_At(reshape(arr, (arr.size,)))[positions.ravel()].set(reshape(vals, (positions.size,))),
                   arr.shape)


def _np_fill_diagonal(a: Any, val: Any, wrap: bool = False, *, inplace: bool = False) -> Any:
    out = np.array(a, copy=True)
    np.fill_diagonal(out, val, wrap)
    return out


@numpy_fallback(_np_fill_diagonal, "a", "val")
def fill_diagonal(a: ArrayLike, val: ArrayLike, wrap: bool = False, *, inplace: bool = False) -> Any:
    """``a`` with its main diagonal set to ``val`` (a new array)."""
    if inplace:
        raise ValueError("tnp.fill_diagonal: traced arrays are immutable; use inplace=False")
    marks = np.zeros(a.shape, dtype=bool)
    np.fill_diagonal(marks, True, wrap)
    pos = np.flatnonzero(marks)

    v = ravel(val) if isinstance(val, Tracer) else np.ravel(np.asarray(val))
    v = resize(v, pos.size) if (v.size if not isinstance(v, Tracer) else v.shape[0]) != pos.size else v
    if not isinstance(v, Tracer):
        v = a.trace.constant(np.asarray(v, dtype=a.aval.dtype))
    return reshape(_At(reshape(a, (a.size,)))[pos].set(v), a.shape)
