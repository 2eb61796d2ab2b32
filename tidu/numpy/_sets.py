"""tidu.numpy set operations, as jax.numpy's: ``unique`` (and the array API's
``unique_values``, ``unique_counts``, ``unique_inverse``, ``unique_all``), ``union1d``,
``intersect1d``, ``setdiff1d``, ``setxor1d``, ``isin``.

Their output sizes depend on the values. Eager calls (no traced operand) return those
sizes, as NumPy; traced calls need a static ``size=`` (the output is truncated or padded
to it with ``fill_value``), as jax.numpy under ``jax.jit``. Both paths compute one
definition: values in ``sort``'s order (nan last, complex values lexicographically), -0.0
and 0.0 one value (the first occurrence's, as every value and index: a stable sort's), nan
one value with ``equal_nan=True``. Traced, the groups come from all pairwise comparisons
(n^2 per call, as ``sort``), and each output value is a one-hot pick of its first
occurrence, so its derivative goes there (JAX's)."""

from __future__ import annotations

import builtins
import operator
from typing import Any, NamedTuple

import numpy as np

from tidu.core.keys import is_complex, is_inexact
from tidu.numpy._casting import asarray
from tidu.numpy._core import ArrayLike, _convert, _norm_axis, _prep, _trace_of
from tidu.numpy._dtypes import result_type
from tidu.numpy._elementwise import equal, where
from tidu.numpy._reductions import _one_hot_sum, any, sum
from tidu.numpy._shapes import broadcast_to, concatenate, expand_dims, moveaxis, ravel, reshape
from tidu.numpy._sorting import _np_key, _order
from tidu.numpy._ufuncs import isnan, logical_and, logical_not, logical_or
from tidu.trace.tracing import Tracer


class UniqueAllResult(NamedTuple):
    values: Any
    indices: Any
    inverse_indices: Any
    counts: Any


class UniqueCountsResult(NamedTuple):
    values: Any
    counts: Any


class UniqueInverseResult(NamedTuple):
    values: Any
    inverse_indices: Any


def _static_size(size: Any, traced: bool, name: str) -> int | None:
    if size is None:
        if traced:
            raise TypeError(f"tnp.{name}: the output size depends on the values, which are traced here; pass a "
                            f"static size= (and fill_value= for the padding), as jax.numpy requires under jit")
        return None
    if isinstance(size, Tracer):
        raise TypeError(f"tnp.{name}: size must be a static int, got a traced value")
    size = operator.index(size)
    if size < 0:
        raise ValueError(f"tnp.{name}: size must be >= 0, got {size}")
    return size


# --- the groups: each row's group (its rank among the distinct rows) ---------------------


def _np_groups(cols: np.ndarray, equal_nan: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first, inverse, counts) of the rows of ``cols`` (n, m): the index of each distinct
    row's first occurrence in sorted order, each row's group, each group's size."""
    n, m = cols.shape
    ranks = np.zeros((n, m), np.int64)
    for c in range(m):
        ranks[:, c] = _np_dense_rank(cols[:, c])
    order = np.lexsort(ranks.T[::-1]) if m else np.arange(n)  # stable: first occurrences first
    new = np.ones(n, bool)
    if n:
        new[1:] = (ranks[order][1:] != ranks[order][:-1]).any(axis=1)
        if not equal_nan and (cols.dtype.kind in "fc" or cols.dtype.name == "bfloat16"):
            new |= np.isnan(_np_key(cols)).any(axis=1)[order]
    group = np.cumsum(new) - 1
    inverse = np.empty(n, np.int64)
    inverse[order] = group
    return order[new].astype(np.int64), inverse, np.bincount(group, minlength=int(new.sum())).astype(np.int64)


def _np_dense_rank(v: np.ndarray) -> np.ndarray:
    """Each element's rank among the distinct values of ``v`` in ``_set_order`` (-0.0
    equals 0.0; nan equals nan; complex values with a nan part all equal, last)."""
    v = _np_key(v)
    if v.dtype.kind == "c":
        nan = np.isnan(v)
        v = np.where(nan, complex(np.nan, np.nan), v)
    order = np.argsort(v, kind="stable")
    s = v[order]
    if s.dtype.kind == "c":
        def same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            return (a == b) | (np.isnan(a) & np.isnan(b))
        eq = same(s.real[1:], s.real[:-1]) & same(s.imag[1:], s.imag[:-1])
    elif s.dtype.kind == "f":
        eq = (s[1:] == s[:-1]) | (np.isnan(s[1:]) & np.isnan(s[:-1]))
    else:
        eq = s[1:] == s[:-1]
    rank = np.empty(v.shape[0], np.int64)
    rank[order] = np.concatenate([[0], np.cumsum(~eq)]).astype(np.int64)
    return rank


def _traced_groups(cols: Tracer, equal_nan: bool) -> tuple[Tracer, Tracer, Tracer]:
    """(first, rank, before) of the rows of ``cols`` (n, m): whether row i is its group's
    first occurrence, its group's rank among the distinct rows, and before[i, j]: row j
    comes before row i in the total order (ties of rows that stay apart by position)."""
    n, m = cols.shape
    lt: Any = np.zeros((n, n), bool)
    eq: Any = np.ones((n, n), bool)
    for c in reversed(range(m)):  # lexicographic: the first column decides first, applied last
        col = cols[:, c]
        less_c, same_c = _set_order(expand_dims(col, 0), expand_dims(col, 1))  # [i, j]
        lt = logical_or(less_c, logical_and(same_c, lt))
        eq = logical_and(same_c, eq)
    j_lt_i = np.tri(n, n, -1, dtype=bool)
    merge = eq
    if not equal_nan and is_inexact(cols.aval.dtype) and m:
        merge = logical_and(eq, logical_not(expand_dims(any(isnan(cols), axis=1), 1)))
    apart = logical_and(eq, logical_not(merge))  # equal rows with nan: each its own value, by position
    before = logical_or(lt, logical_and(apart, j_lt_i))
    first = logical_not(any(logical_and(merge, j_lt_i), axis=1))
    rank = sum(logical_and(expand_dims(first, 0), before), axis=1, dtype="int64")
    return first, rank, before


def _set_order(xj: Any, xi: Any) -> tuple[Any, Any]:
    """``sort``'s order (``_order``), except that complex values with a nan part are all one
    value, after the others (jax.numpy's unique merges them; apart, they keep their order)."""
    if not is_complex(xj.aval.dtype if isinstance(xj, Tracer) else xi.aval.dtype):
        return _order(xj, xi)
    ni, nj = isnan(xi), isnan(xj)
    less_, same = _order(xj, xi)
    both = logical_and(logical_not(ni), logical_not(nj))
    return (logical_or(logical_and(both, less_), logical_and(ni, logical_not(nj))),
            logical_or(logical_and(both, same), logical_and(ni, nj)))


def _pick_rows(x: Tracer, hit: Any) -> Tracer:
    """out[k, ...] = x[i, ...] where hit[k, i]: the one-hot sum over i (exact, -0.0 kept)."""
    if x.ndim == 1:
        return _one_hot_sum(expand_dims(x, 0), hit, -1)
    xs = moveaxis(expand_dims(x, 0), 1, -1)  # [1, ..., i]
    extra = x.ndim - 1
    h = reshape(hit, (hit.shape[0], *(1,) * extra, hit.shape[1]))
    return _one_hot_sum(xs, h, -1)


def _pad_rows(v: Any, count: Any, size: int, fill: Any) -> Any:
    """v (size, ...) with the rows from ``count`` on replaced by ``fill``."""
    valid = np.arange(size).reshape(size, *(1,) * (v.ndim - 1)) < (
        count if not isinstance(count, Tracer) else reshape(count, (1,) * v.ndim))
    if isinstance(v, Tracer) or isinstance(fill, Tracer) or isinstance(count, Tracer):
        return where(valid, v, fill)
    return np.where(valid, v, fill)


def _fill_of(fill_value: Any, dtype: Any) -> Any:
    """``fill_value`` in the result's dtype (jax.numpy casts it so)."""
    if isinstance(fill_value, Tracer):
        return _convert(fill_value, str(dtype)) if fill_value.aval.dtype != str(dtype) else fill_value
    return np.asarray(fill_value).astype(dtype)


def _unique_parts(ar: Any, axis: int | None, equal_nan: bool, size: int | None, fill_value: Any, name: str,
                  ) -> tuple[Any, Any, Any, Any, Any]:
    """(values, indices, inverse, counts, number of distinct values) of ``unique``."""
    trace = _trace_of((ar,))
    traced = trace is not None
    size = _static_size(size, traced, name)
    a = ar if traced else np.asarray(ar)
    shape = tuple(a.shape)
    if axis is None:
        flat = ravel(a) if traced else a.reshape(-1)
        rows, inv_shape = flat, shape
    else:
        if not shape:
            raise ValueError(f"tnp.{name}: axis {axis} is out of bounds for a 0-d array; pass axis=None")
        axis = _norm_axis(axis, len(shape), name)
        rows = moveaxis(a, axis, 0) if traced else np.moveaxis(a, axis, 0)
        inv_shape = (shape[axis],)
    n = rows.shape[0]
    if n == 0 and size and fill_value is None:
        raise ValueError(f"tnp.{name}: the input is empty and size={size} > 0: pass fill_value= for the padding "
                         "(jax.numpy's rule)")
    cols = reshape(rows, (n, -1) if n else (0, int(np.prod(rows.shape[1:])))) if traced else rows.reshape(
        n, int(np.prod(rows.shape[1:])))
    if traced:
        first, rank, _ = _traced_groups(cols, equal_nan)
        k = size
        slot = np.arange(k).reshape(k, 1)
        hit = logical_and(expand_dims(first, 0), equal(expand_dims(rank, 0), slot))  # [k, i]
        values = _pick_rows(rows, hit) if n else None  # (an empty input: below)
        iota = trace.constant(np.arange(n, dtype=np.int64))
        indices = _one_hot_sum(expand_dims(iota, 0), hit, -1) if n else None
        counts = sum(equal(expand_dims(rank, 0), slot), axis=1, dtype="int64") if n else None
        count = sum(first, dtype="int64")
        inverse = reshape(rank, inv_shape)
    else:
        first_np, inverse_np, counts_np = _np_groups(cols, equal_nan)
        values, indices, counts = rows[first_np], first_np, counts_np
        count = len(first_np)
        inverse = inverse_np.reshape(inv_shape)
        k = count if size is None else size
        if size is not None and n:  # truncated, or padded (below) from the first entries
            take = np.minimum(np.arange(size), builtins.max(count - 1, 0))
            values, indices, counts = values[take], indices[take], np.where(np.arange(size) < count, counts[take], 0)
    if n == 0:  # jax.numpy's: the values all fill_value, the other outputs empty
        empty = (trace.constant(np.zeros(0, np.int64)) if traced else np.zeros(0, np.int64))
        dtype = a.aval.dtype if traced else a.dtype
        fill = _fill_of(fill_value if fill_value is not None else 0, dtype)
        vshape = (k, *rows.shape[1:])
        values = broadcast_to(fill if traced else np.asarray(fill), vshape) if traced else np.broadcast_to(
            fill, vshape).copy()
        return values, empty, inverse, empty, count
    if size:
        dtype = values.aval.dtype if isinstance(values, Tracer) else values.dtype
        fill = values[0] if fill_value is None else _fill_of(fill_value, dtype)
        values = _pad_rows(values, count, size, fill)
        indices = _pad_rows(indices, count, size, indices[0])
    return values, indices, inverse, counts, count


def _moved_back(values: Any, axis: int | None, ndim: int) -> Any:
    if axis is None:
        return values
    ax = _norm_axis(axis, ndim, "unique")
    return moveaxis(values, 0, ax) if isinstance(values, Tracer) else np.moveaxis(values, 0, ax)


def unique(ar: ArrayLike, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False,
           axis: int | None = None, *, equal_nan: bool = True, size: int | None = None,
           fill_value: ArrayLike | None = None, sorted: bool = True) -> Any:
    """The distinct values of ``ar`` (flattened, or the distinct slices along ``axis``), in
    ``sort``'s order, and on request the index of each one's first occurrence, each
    element's (slice's) index into them (``ar``'s shape for axis=None) and their counts,
    int64. ``equal_nan=False``: every nan a value of its own. ``size``: the number of
    values returned, truncated or padded with ``fill_value`` (default the smallest value;
    indices padded with the first index, counts with 0); required when ``ar`` is traced.
    ``sorted=False`` is accepted and returns them sorted (jax.numpy's too)."""
    ar = _as_operand(ar)
    ndim = ar.ndim if isinstance(ar, Tracer) else np.ndim(ar)
    values, indices, inverse, counts, _ = _unique_parts(ar, axis, equal_nan, size, fill_value, "unique")
    values = _moved_back(values, axis, ndim)
    out = [values]
    if return_index:
        out.append(indices)
    if return_inverse:
        out.append(inverse)
    if return_counts:
        out.append(counts)
    return out[0] if len(out) == 1 else tuple(out)


def unique_values(x: ArrayLike, /, *, size: int | None = None, fill_value: ArrayLike | None = None) -> Any:
    """The distinct values of ``x``, every nan one of its own (the array API's:
    ``unique`` with ``equal_nan=False``), as the other ``unique_*``."""
    return unique(x, equal_nan=False, size=size, fill_value=fill_value)


def unique_counts(x: ArrayLike, /, *, size: int | None = None,
                  fill_value: ArrayLike | None = None) -> UniqueCountsResult:
    """(values, counts) of ``unique``, a named tuple (the array API's)."""
    return UniqueCountsResult(*unique(x, return_counts=True, equal_nan=False, size=size, fill_value=fill_value))


def unique_inverse(x: ArrayLike, /, *, size: int | None = None,
                   fill_value: ArrayLike | None = None) -> UniqueInverseResult:
    """(values, inverse_indices) of ``unique``, the inverse in ``x``'s shape (the array API's)."""
    return UniqueInverseResult(*unique(x, return_inverse=True, equal_nan=False, size=size, fill_value=fill_value))


def unique_all(x: ArrayLike, /, *, size: int | None = None, fill_value: ArrayLike | None = None) -> UniqueAllResult:
    """(values, indices, inverse_indices, counts) of ``unique`` (the array API's)."""
    return UniqueAllResult(*unique(x, return_index=True, return_inverse=True, return_counts=True, equal_nan=False,
                                   size=size, fill_value=fill_value))


# --- sets of two arrays -----------------------------------------------------------------


def _as_operand(x: Any) -> Any:
    if isinstance(x, Tracer):
        x.check_alive()
        return x
    if isinstance(x, list | tuple) and _trace_of(list(x)) is not None:
        return asarray(x)
    return x


def _two(ar1: Any, ar2: Any, name: str) -> tuple[Any, Any, Any]:
    """Both operands flattened, in their common dtype (jax.numpy's promotion), and the trace."""
    ar1, ar2 = _as_operand(ar1), _as_operand(ar2)
    trace = _trace_of((ar1, ar2))
    dtype = result_type(ar1, ar2)
    if trace is None:
        return np.asarray(ar1).astype(dtype).reshape(-1), np.asarray(ar2).astype(dtype).reshape(-1), None
    return ravel(_prep(trace, ar1, dtype)), ravel(_prep(trace, ar2, dtype)), trace


def _member(v: Any, of: Any) -> Any:
    """v[k] == some of[j] (==: -0.0 equals 0.0, nan equals nothing)."""
    if isinstance(v, Tracer) or isinstance(of, Tracer):
        if of.shape[0] == 0 or v.shape[0] == 0:
            return broadcast_to(np.zeros((), bool), v.shape) if isinstance(v, Tracer) else np.zeros(v.shape, bool)
        return any(equal(expand_dims(v, -1), of), axis=-1)
    return np.isin(_np_key(v), _np_key(of))


def _compact(traced: bool, keep: Any, slot: Any, vals: list[Any], size: int | None) -> tuple[list[Any], Any]:
    """The entries with ``keep`` of each of ``vals``, at their ``slot`` (0, 1, ... among the
    kept, the order they go in), and how many there are; ``size`` entries when traced."""
    if not traced:
        idx = np.nonzero(keep)[0]
        idx = idx[np.argsort(np.asarray(slot)[idx], kind="stable")]
        count = len(idx)
        if size is not None:
            idx = idx[np.minimum(np.arange(size), builtins.max(count - 1, 0))] if count else np.zeros(size, int)
            return [np.asarray(v)[idx] if len(v) else np.zeros(size, np.asarray(v).dtype) for v in vals], count
        return [np.asarray(v)[idx] for v in vals], count
    assert size is not None
    hit = logical_and(expand_dims(keep, 0), equal(expand_dims(slot, 0), np.arange(size).reshape(size, 1)))
    return [_one_hot_sum(expand_dims(v, 0), hit, -1) for v in vals], sum(keep, dtype="int64")


def _positions(keep: Any) -> Any:
    """The number of kept entries before each one (its slot, keeping their order)."""
    if not isinstance(keep, Tracer):
        return np.cumsum(keep) - keep
    n = keep.shape[0]
    return sum(logical_and(expand_dims(keep, 0), np.tri(n, n, -1, dtype=bool)), axis=1, dtype="int64")


def _unique_1d(v: Any, traced: bool) -> tuple[Any, Any, Any]:
    """(distinct values, first indices, valid): ``unique`` of 1-D ``v``, padded to len(v) when traced."""
    n = v.shape[0]
    if n == 0:
        return v, (v.trace.constant(np.zeros(0, np.int64)) if traced else np.zeros(0, np.int64)), (
            broadcast_to(np.zeros((), bool), (0,)) if traced else np.zeros(0, bool))
    values, index, _, _, count = _unique_parts(v, None, True, n if traced else None, None, "unique")
    valid = np.arange(n) < count if traced else np.ones(count, bool)
    if traced:
        valid = broadcast_to(valid, (n,)) if isinstance(valid, Tracer) else valid
    return values, index, valid


def _finish(traced: bool, out: Any, count: Any, size: int | None, fill_value: Any, default: Any) -> Any:
    """Pad (with fill_value, or ``default``: the first value, or 0 when there is none)."""
    if size is None:
        return out
    dtype = out.aval.dtype if isinstance(out, Tracer) else out.dtype
    if fill_value is not None:  # promoted with the values, as jax.numpy's where (setdiff1d: ar1's dtype)
        fill = _fill_of(fill_value, dtype) if default == "zero" else fill_value
    elif default == "first":  # the smallest result, nan if one is (jax.numpy's min of them), 0 if none
        if traced:
            last = _one_hot_sum(out, equal(np.arange(size), sum(count) - 1), -1) if size else None
            fill = where(count > 0, where(isnan(last), last, out[0]), np.zeros((), dtype)) if size else None
        elif count and size:
            last = out[builtins.min(count, size) - 1]
            fill = last if np.isnan(_np_key(last)) else out[0]
        else:
            fill = np.zeros((), dtype)
    else:
        fill = np.zeros((), dtype)
    if size == 0:
        return out
    return _pad_rows(out, count, size, fill)


def union1d(ar1: ArrayLike, ar2: ArrayLike, *, size: int | None = None, fill_value: ArrayLike | None = None) -> Any:
    """The distinct values of both (flattened), sorted (``unique`` of their concatenation)."""
    a, b, trace = _two(ar1, ar2, "union1d")
    _static_size(size, trace is not None, "union1d")
    both = concatenate([a, b]) if trace is not None else np.concatenate([a, b])
    return unique(both, size=size, fill_value=fill_value)


def intersect1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, return_indices: bool = False, *,
                size: int | None = None, fill_value: ArrayLike | None = None) -> Any:
    """The sorted distinct values found in both (flattened; ``==``, so nan is in neither);
    with ``return_indices`` the index of each one's first occurrence in each (padded with
    len(ar1) and len(ar2)). ``size`` pads with fill_value (default the smallest value).
    ``assume_unique`` is accepted: the result is the same on distinct inputs."""
    a, b, trace = _two(ar1, ar2, "intersect1d")
    traced = trace is not None
    size = _static_size(size, traced, "intersect1d")
    ua, ia, valid = _unique_1d(a, traced)
    keep = logical_and(valid, _member(ua, b)) if traced else valid & _member(ua, b)
    slot = _positions(keep)
    if return_indices:
        n2 = b.shape[0]
        if traced:
            hit = equal(expand_dims(ua, -1), b) if n2 else None
            first_b = logical_and(hit, logical_not(any(logical_and(expand_dims(hit, 1), np.tri(n2, n2, -1, dtype=bool)),
                                                       axis=-1))) if n2 else None
            ib = (_one_hot_sum(trace.constant(np.arange(n2, dtype=np.int64)), first_b, -1) if n2
                  else broadcast_to(np.zeros((), np.int64), ua.shape))
        else:
            hit = ua[:, None] == b[None, :]
            ib = np.argmax(hit, axis=1).astype(np.int64) if n2 else np.zeros(len(ua), np.int64)
        (vals, ia, ib), count = _compact(traced, keep, slot, [ua, ia, ib], size)
        vals = _finish(traced, vals, count, size, fill_value, "first")
        if size:
            ia = _pad_rows(ia, count, size, np.int64(a.shape[0]))
            ib = _pad_rows(ib, count, size, np.int64(b.shape[0]))
        return vals, ia, ib
    (vals,), count = _compact(traced, keep, slot, [ua], size)
    return _finish(traced, vals, count, size, fill_value, "first")


def setdiff1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *, size: int | None = None,
              fill_value: ArrayLike | None = None) -> Any:
    """The sorted distinct values of ar1 not in ar2 (``==``: a nan of ar1 stays); with
    ``assume_unique`` ar1's values in their order, as given. ``size`` pads with fill_value
    (default 0, jax.numpy's)."""
    ar1 = _as_operand(ar1)
    a1dtype = ar1.aval.dtype if isinstance(ar1, Tracer) else np.asarray(ar1).dtype
    a, b, trace = _two(ar1, ar2, "setdiff1d")
    traced = trace is not None
    size = _static_size(size, traced, "setdiff1d")
    if traced:
        a = _convert(a, str(a1dtype)) if a.aval.dtype != str(a1dtype) else a
        base, valid = (a, np.ones(a.shape, bool)) if assume_unique else _unique_1d(a, True)[::2]
        keep = logical_and(valid, logical_not(_member(base, b)))
    else:
        a = a.astype(a1dtype)
        base, valid = (a, np.ones(a.shape, bool)) if assume_unique else _unique_1d(a, False)[::2]
        keep = valid & ~_member(base, b)
    (vals,), count = _compact(traced, keep, _positions(keep), [base], size)
    return _finish(traced, vals, count, size, fill_value, "zero")


def setxor1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *, size: int | None = None,
             fill_value: ArrayLike | None = None) -> Any:
    """The sorted values in exactly one of ar1 and ar2 (distinct values; ``==``, so a nan
    of each stays). ``size`` pads with fill_value (default the smallest value, 0 when there
    is none). ``assume_unique`` is accepted: the result is the same on distinct inputs."""
    a, b, trace = _two(ar1, ar2, "setxor1d")
    traced = trace is not None
    size = _static_size(size, traced, "setxor1d")
    ua, _, va = _unique_1d(a, traced)
    ub, _, vb = _unique_1d(b, traced)
    if traced:
        c, valid = concatenate([ua, ub]), concatenate([_bool(trace, va), _bool(trace, vb)])
        n = c.shape[0]
        if n == 0:
            return _finish(True, broadcast_to(c[:0], (0,)), 0, size, fill_value, "first") if not size else \
                broadcast_to(_fill_of(fill_value if fill_value is not None else 0, c.aval.dtype), (size,))
        others = logical_and(equal(expand_dims(c, 1), expand_dims(c, 0)), logical_not(np.eye(n, dtype=bool)))
        keep = logical_and(valid, logical_not(any(logical_and(others, expand_dims(valid, 0)), axis=1)))
        less_, same = _set_order(expand_dims(c, 0), expand_dims(c, 1))  # [i, j]: c_j before c_i
        before = logical_or(less_, logical_and(same, np.tri(n, n, -1, dtype=bool)))
        slot = sum(logical_and(expand_dims(keep, 0), before), axis=1, dtype="int64")
    else:
        c = np.concatenate([ua, ub])
        others = (c[:, None] == c[None, :]) & ~np.eye(len(c), dtype=bool)
        keep = ~others.any(axis=1)
        slot = np.empty(len(c), np.int64)
        slot[np.argsort(_np_key(c), kind="stable")] = np.arange(len(c))
    (vals,), count = _compact(traced, keep, slot, [c], size)
    return _finish(traced, vals, count, size, fill_value, "first")


def _bool(trace: Any, v: Any) -> Any:
    return v if isinstance(v, Tracer) else trace.constant(np.asarray(v, bool))


def isin(element: ArrayLike, test_elements: ArrayLike, assume_unique: bool = False, invert: bool = False, *,
         method: str = "auto") -> Any:
    """Whether each element of ``element`` equals (``==``) one of ``test_elements``, in
    ``element``'s shape; ``invert``: the opposite. ``assume_unique`` and ``method``
    (jax.numpy's choice of algorithm) are accepted: the result does not depend on them."""
    e, t = _as_operand(element), _as_operand(test_elements)
    trace = _trace_of((e, t))
    if trace is None:
        return np.isin(_np_key(e), _np_key(t), invert=invert)
    dtype = result_type(e, t)
    et, tt = _prep(trace, e, dtype), ravel(_prep(trace, t, dtype))
    if tt.shape[0] == 0:
        out: Any = broadcast_to(trace.constant(np.zeros((), bool)), et.shape)
    else:
        out = any(equal(expand_dims(et, -1), tt), axis=-1)
    return logical_not(out) if invert else out


__all__ = ["intersect1d", "isin", "setdiff1d", "setxor1d", "union1d", "unique", "unique_all", "unique_counts",
           "unique_inverse", "unique_values"]
