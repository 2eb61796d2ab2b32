"""tidu.numpy sorting and order statistics: ``sort``, ``argsort``, ``partition``,
``argpartition``, ``median``, ``quantile``, ``percentile`` (and their nan-ignoring variants).

Sorting is a composition (there is no sort primitive): the rank of each element is the
number of elements before it in the order (ties broken by position, nan last, as NumPy),
computed from all pairwise comparisons, and the k-th result picks the element of rank k
with ``where`` and a sum. That is exact (the sum adds zeros to one value) and its
derivative routes each tangent to the element's new place, but it costs n^2 per sorted
row: use it for rows of up to a few thousand elements."""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from tidu.core.keys import is_complex, is_inexact
from tidu.numpy._core import ArrayLike, _convert, _norm_axes, _norm_axis, _prep, _trace_of, numpy_fallback
from tidu.numpy._dtypes import result_type
from tidu.numpy._elementwise import (
    add,
    divide,
    equal,
    greater,
    imag,
    less,
    less_equal,
    maximum,
    multiply,
    real,
    subtract,
    where,
)
from tidu.numpy._reductions import _one_hot_sum, _traced, _widened, any, sum
from tidu.numpy._shapes import broadcast_to, concatenate, expand_dims, flip, moveaxis, ravel, reshape, stack
from tidu.numpy._ufuncs import (
    _complex,
    ceil,
    floor,
    isfinite,
    isnan,
    logical_and,
    logical_not,
    logical_or,
    remainder,
    rint,
    signbit,
)
from tidu.trace.evaluator import run_traced
from tidu.trace.tracing import Tracer


def _before(x: Tracer) -> Tracer:
    """before[..., i, j]: element j (of the last axis) comes before element i."""
    xi, xj = expand_dims(x, -1), expand_dims(x, -2)
    n = x.shape[-1]
    j_lt_i = np.tri(n, n, -1, dtype=bool)  # [i, j] = j < i
    less_, same = _order(xj, xi)
    return logical_or(less_, logical_and(same, j_lt_i))


def _order(xj: Any, xi: Any) -> tuple[Tracer, Tracer]:
    """(xj comes before xi, they are equal) in NumPy's sort order: nan last; complex values
    R + Rj, then R + nanj, nan + Rj, nan + nanj (R not nan), each class by its parts that
    are not nan, lexicographically (real part first)."""
    dtype = xj.aval.dtype if isinstance(xj, Tracer) else xi.aval.dtype
    if is_complex(dtype):
        return _complex_order(xj, xi)
    if dtype == "bool":
        xi, xj = _convert(xi, "int64"), _convert(xj, "int64")
    ni, nj = isnan(xi), isnan(xj)
    less_ = logical_or(less(xj, xi), logical_and(ni, logical_not(nj)))
    same = logical_or(equal(xj, xi), logical_and(ni, nj))
    return less_, same


def _complex_order(xj: Any, xi: Any) -> tuple[Tracer, Tracer]:
    ri, rj, ii, ij = real(xi), real(xj), imag(xi), imag(xj)
    nri, nrj, nii, nij = isnan(ri), isnan(rj), isnan(ii), isnan(ij)
    # the nan class, 2 * (real part nan) + (imaginary part nan): a smaller one comes first
    class_i = add(multiply(_convert(nri, "int8"), 2), _convert(nii, "int8"))
    class_j = add(multiply(_convert(nrj, "int8"), 2), _convert(nij, "int8"))
    real_equal = logical_or(equal(rj, ri), logical_and(nri, nrj))  # (nan real parts say nothing)
    within = logical_or(less(rj, ri), logical_and(real_equal, less(ij, ii)))
    same_class = equal(class_j, class_i)
    same = logical_and(same_class, logical_and(real_equal, logical_or(equal(ij, ii), logical_and(nii, nij))))
    return logical_or(less(class_j, class_i), logical_and(same_class, within)), same


def _ranks(x: Tracer) -> Tracer:
    """The sorted position of each element of the last axis (int64)."""
    return sum(_before(x), axis=-1)


def _by_rank(x: Tracer, rank: Tracer) -> Tracer:
    """out[..., k] = the element of rank k."""
    n = x.shape[-1]
    hit = equal(expand_dims(rank, -2), np.arange(n).reshape(n, 1))  # [..., k, i]
    # exact, -0.0 kept, in x's dtype (sort of int8 values is int8)
    return _one_hot_sum(expand_dims(x, -2), hit, -1)


def _np_key(a: Any) -> Any:
    """``a`` as NumPy orders it: bfloat16 (ml_dtypes, which NumPy's sort orders without
    putting nan last) as float32, exactly; other arrays as they are."""
    a = np.asarray(a)
    return a.astype(np.float32) if a.dtype.name == "bfloat16" else a


def _np_sort(a: Any, axis: int | None = -1, kind: Any = None, order: Any = None, stable: bool = True,
             descending: bool = False) -> Any:
    a = np.asarray(a)
    if a.dtype.name == "bfloat16":
        a = a.ravel() if axis is None else a
        ax = 0 if axis is None else axis
        out = np.take_along_axis(a, _np_argsort(a, ax), ax)
    else:
        out = np.sort(a, axis=axis, kind="stable")  # as traced and JAX: -0.0 and 0.0 tie, in their order
    return np.flip(out, axis=-1 if axis is None else axis) if descending else out


def _np_argsort(a: Any, axis: int | None = -1, kind: Any = None, order: Any = None, stable: bool = True,
                descending: bool = False) -> Any:
    a = _np_key(a)
    if axis is None:
        a, axis = a.ravel(), 0
    if descending:
        return np.flip(np.argsort(np.flip(a, axis), axis=axis, kind="stable"), axis) * -1 + (
            np.shape(a)[axis] - 1)
    return np.argsort(a, axis=axis, kind="stable")


@numpy_fallback(_np_sort, nested=True)
def sort(a: ArrayLike, axis: int | None = -1, kind: Any = None, order: Any = None, stable: bool = True,
         descending: bool = False) -> Any:
    """Sorted copy along ``axis`` (the flattened array if None); nan last; complex values
    by real then imaginary part."""
    a = _traced(a)
    if a.aval.dtype == "bool":  # sorted as 0 and 1, a bool result (NumPy's)
        return _convert(sort(_convert(a, "int8"), axis, kind, order, stable, descending), "bool")
    if axis is None:
        a, axis = ravel(a), 0
    axis = _norm_axis(axis, a.ndim, "sort")
    x = moveaxis(a, axis, -1)
    out = _by_rank(x, _ranks(x))
    if descending:
        out = flip(out, -1)
    return moveaxis(out, -1, axis)


@numpy_fallback(_np_argsort, nested=True)
def argsort(a: ArrayLike, axis: int | None = -1, kind: Any = None, order: Any = None, stable: bool = True,
            descending: bool = False) -> Any:
    """Indices that sort ``a`` along ``axis`` (stable: equal elements keep their order)."""
    a = _traced(a)
    if axis is None or (a.ndim == 0 and axis in (0, -1)):  # (NumPy's argsort of a 0-d array: [0])
        a, axis = ravel(a), 0
    axis = _norm_axis(axis, a.ndim, "argsort")
    x = moveaxis(a, axis, -1)
    if descending:  # the ascending order of the reversed row, reversed: stable, nan first (JAX's)
        idx = _by_rank(x.trace.constant(np.broadcast_to(np.arange(x.shape[-1]), x.shape).copy()),
                       _ranks(flip(x, -1)))
        idx = add(multiply(flip(idx, -1), -1), x.shape[-1] - 1)
        return moveaxis(idx, -1, axis)
    iota = x.trace.constant(np.broadcast_to(np.arange(x.shape[-1]), x.shape).copy())
    return moveaxis(_by_rank(iota, _ranks(x)), -1, axis)


def _np_searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None, method: Any = None) -> Any:
    return np.searchsorted(_np_key(a), _np_key(v), side=side, sorter=sorter)


@numpy_fallback(_np_searchsorted, "a", "v")
def searchsorted(a: ArrayLike, v: ArrayLike, side: str = "left", sorter: ArrayLike | None = None,
                 method: str | None = None) -> Any:
    """Where each element of ``v`` goes in the sorted 1-D ``a`` to keep it sorted: the number
    of elements of ``a`` before it (``side="left"``) or not after it (``"right"``), in
    NumPy's sort order (nan last; complex values lexicographically, nan parts last), as
    int64 indices (NumPy's). ``sorter``: constant indices that sort ``a``. ``method``
    (JAX's choice of algorithm) is accepted: the result does not depend on it."""
    if side not in ("left", "right"):
        raise ValueError(f"tnp.searchsorted: side must be 'left' or 'right', got {side!r}")
    if method not in (None, "scan", "scan_unrolled", "sort", "compare_all"):
        raise ValueError(f"tnp.searchsorted: unknown method {method!r}")
    if isinstance(sorter, Tracer):
        raise TypeError("tnp.searchsorted: sorter must be constant indices (tnp.argsort of a constant)")
    trace = _trace_of((a, v))
    assert trace is not None  # (numpy_fallback computed the concrete case)
    dtype = result_type(a, v)
    at, vt = _prep(trace, a, dtype), _prep(trace, v, dtype)
    if at.ndim != 1:
        raise ValueError(f"tnp.searchsorted: a must be 1-D, got shape {at.shape}")
    if sorter is not None:
        at = at[np.asarray(sorter)]
    less_, same = _order(at, expand_dims(vt, -1))  # [..., len(a)]: a_j before v, a_j equal to v
    hits = less_ if side == "left" else logical_or(less_, same)
    return sum(hits, axis=-1, dtype="int64")


def _np_lexsort(keys: Any, axis: int = -1) -> Any:
    return np.lexsort([_np_key(k) for k in keys], axis=axis)


@numpy_fallback(_np_lexsort, "keys", nested=True)
def lexsort(keys: Any, axis: int = -1) -> Any:
    """Indices that sort by several keys along ``axis``: by the last key, ties by the one
    before it, and so on (stable: full ties keep their order), each in NumPy's sort order;
    ``keys`` a sequence of arrays of one shape, or an array whose first axis runs over them."""
    trace = _trace_of(keys if isinstance(keys, list | tuple) else (keys,))
    assert trace is not None
    rows = list(keys) if isinstance(keys, list | tuple) else [keys[k] for k in range(keys.shape[0])]
    if not rows:
        raise TypeError("tnp.lexsort: need at least one key")
    rows = [_prep(trace, k, result_type(k)) for k in rows]
    shape = rows[0].shape
    if builtins.any(k.shape != shape for k in rows):
        raise ValueError(f"tnp.lexsort: all keys must have one shape, got {[k.shape for k in rows]}")
    if not shape:
        raise ValueError("tnp.lexsort: the keys must have at least one axis")
    axis = _norm_axis(axis, len(shape), "lexsort")
    rows = [moveaxis(k, axis, -1) for k in rows]
    n = shape[axis]
    before: Any = np.tri(n, n, -1, dtype=bool)  # [i, j] = j < i: full ties keep their order
    for k in rows:  # the last key decides first: it is applied last
        less_, same = _order(expand_dims(k, -2), expand_dims(k, -1))
        before = logical_or(less_, logical_and(same, before))
    ranks = sum(before, axis=-1)
    iota = trace.constant(np.broadcast_to(np.arange(n), rows[0].shape).copy())
    return moveaxis(_by_rank(iota, ranks), -1, axis)


def _real_only(a: Any, name: str) -> None:
    """jax.numpy's quantiles (and NumPy's) refuse complex values: their order is not one
    a quantile can interpolate in."""
    dtype = a.aval.dtype if isinstance(a, Tracer) else np.asarray(a).dtype
    if is_complex(dtype):
        raise TypeError(f"tnp.{name}: complex input is not supported (jax.numpy and NumPy refuse it: "
                        "complex values have no order to interpolate in); pass tnp.real(a) or tnp.abs(a)")


def _numpy_order_stats(fn: Any, real_only: bool = True) -> Any:
    """NumPy's ``fn`` for concrete operands, behind tidu's complex-input error (NumPy's own
    does not name the function). Float16 and bfloat16 operands get tidu's implementation,
    traced and run, as under ``tidu.jit`` and as JAX (float32 inside, rounded once; NumPy
    returns float64, and its sort of bfloat16 does not put nan last), with q a fixed value."""
    def call(a: Any, *args: Any, **kwargs: Any) -> Any:
        if real_only:
            _real_only(a, fn.__name__)
        dtype = np.asarray(a).dtype
        if dtype.kind == "b":  # (NumPy's subtracts bools and fails; tidu orders them as 0 and 1, as JAX)
            a = np.asarray(a, dtype=np.float64)
        if dtype.name in ("float16", "bfloat16"):
            return _traced_order_stats(fn, a, args, kwargs)
        with np.errstate(invalid="ignore" if fn in _INTERPOLATED and np.isinf(a).any() else "warn"):
            out = fn(a, *args, **kwargs)
        if (fn in _INTERPOLATED and dtype.kind == "f" and np.isnan(out).any() and np.isinf(a).any()
                and set(kwargs) <= _OWN_KEYWORDS and kwargs.get("method", "linear") in QUANTILE_METHODS):
            # NumPy interpolates a + (b - a) t also where t is 0: (b - a) = inf makes nan of
            # an order statistic ([0, 1, inf] at q = 0.5); tidu's quantile is that statistic,
            # traced and so eagerly
            return _traced_order_stats(fn, a, args, kwargs)
        return out

    call.__name__ = fn.__name__
    return call


def _traced_order_stats(fn: Any, a: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
    """tidu's own ``fn`` (by NumPy's name) on concrete ``a``, traced and run, q a fixed value."""
    args = tuple(np.asarray(v).tolist() if isinstance(v, np.ndarray | np.generic) else v for v in args)
    if isinstance(kwargs.get("q"), np.ndarray | np.generic):
        kwargs = {**kwargs, "q": np.asarray(kwargs["q"]).tolist()}
    return run_traced(globals()[fn.__name__].__wrapped__, (np.asarray(a), *args), kwargs)


# NumPy's quantiles that interpolate (the medians take a mean: (1 + inf) / 2 is inf), and
# the keywords tidu's forms take
_INTERPOLATED = (np.quantile, np.percentile, np.nanquantile, np.nanpercentile)
_OWN_KEYWORDS = {"q", "axis", "method", "keepdims"}


@numpy_fallback(_numpy_order_stats(np.quantile), nested=True)
def quantile(a: ArrayLike, q: ArrayLike, axis: int | None = None, method: str = "linear",
             keepdims: bool = False) -> Any:
    """The q-th quantiles (q in [0, 1], constant) along ``axis`` of the order statistics
    s_0 <= ... <= s_(n-1), at position (n - 1) q: ``linear`` interpolates between the two
    around it, ``lower`` and ``higher`` take one of them, ``nearest`` the nearer (ties to
    even positions), ``midpoint`` their mean, ``inverted_cdf`` s_k for the smallest k with
    k + 1 >= n q (NumPy's and JAX's methods of those names); nan if the slice holds a nan."""
    return _quantile(a, q, axis, method, keepdims, False, _interpolated_in(a, q, method))


QUANTILE_METHODS = ("linear", "lower", "higher", "nearest", "midpoint", "inverted_cdf")
_ONE_STATISTIC = ("lower", "higher", "nearest", "inverted_cdf")  # the methods that pick one order statistic


def _interpolated_in(a: Any, q: Any, method: str, percent: bool = False) -> str | None:
    """float64 where NumPy interpolates float32 values with float64 weights: q a float64
    array, list or NumPy scalar (for percentiles, integers too: q / 100 is float64), not a
    Python number (NumPy's weak q, which keeps a's dtype); None elsewhere. NumPy's b - a is
    then float32, the rest float64, as ``_lerp`` computes it with ``wide``."""
    if method not in ("linear", "midpoint") or not isinstance(a, Tracer) or a.aval.dtype != "float32":
        return None
    if type(q) in (int, float) or isinstance(q, Tracer):  # (NumPy's test of a weak q)
        return None
    qd = np.asarray(q).dtype
    if qd.kind in "iub":  # linear quantile: whole positions, nothing interpolated; percentile: q / 100
        return "float64" if percent or method == "midpoint" else None
    return "float64" if qd == np.float64 else None


def _quantile(a: Any, q: Any, axis: int | None, method: str, keepdims: bool, median: bool,
              wide: str | None = None) -> Any:
    """``quantile``; ``median``: the mean of the two middle values (a + b) / 2, as NumPy's
    median (not the interpolation a (1 - q) + b q: (1 + inf) / 2 is inf), and nan for an
    empty slice. ``wide``: the dtype NumPy interpolates in (``_interpolated_in``)."""
    a = _traced(a)
    if isinstance(q, Tracer):
        raise TypeError("tnp.quantile: q must be a constant (the positions it picks are structure)")
    if method not in QUANTILE_METHODS:
        raise NotImplementedError(f"tnp.quantile: method {method!r} is not supported on traced values; "
                                  f"use one of {', '.join(QUANTILE_METHODS)}")
    if not median:
        _real_only(a, "quantile")
    qs = _unit_q(q, "quantile")
    x, kept = _to_last(a, axis, "quantile")
    # one order statistic of integers is an integer of their dtype (NumPy's), exact at
    # every magnitude; the interpolating methods give float64
    x, half = (x, None) if _one_integer_statistic(x, method, median) else _order_dtype(x)
    n = x.shape[-1]
    if n == 0 and median:  # NumPy's median of nothing: nan (with a warning)
        out = broadcast_to(x.trace.constant(np.full((), np.nan, x.aval.dtype)), (1, *x.shape[:-1]))
    else:
        s = _by_rank(x, _ranks(x))
        pos = qs.ravel() * (n - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, n - 1)
        frac = pos - lo
        if method in _ONE_STATISTIC:  # one order statistic: no interpolation
            lo = {"lower": lo, "higher": np.ceil(pos), "nearest": np.around(pos),
                  "inverted_cdf": _inverted_cdf(qs.ravel() * n - 1)}[method].astype(np.int64)
            frac = np.zeros_like(pos)
        halfway = median or method == "midpoint"  # (a + b) / 2 between two of them
        outs = []
        for k in range(pos.size):
            v_lo, v_hi = s[..., int(lo[k])], s[..., int(hi[k])]
            if frac[k] == 0:
                outs.append(v_lo if wide is None else _convert(v_lo, wide))
            elif median:
                outs.append(divide(add(v_lo, v_hi), 2.0))
            else:  # Python floats: the weights take x's dtype (float32 stays float32)
                t = 0.5 if halfway else float(frac[k])
                beyond = divide(add(v_lo, v_hi), 2.0) if halfway else add(multiply(v_lo, 1.0 - t), multiply(v_hi, t))
                outs.append(_lerp(v_lo, v_hi, t, beyond, wide))
        out = stack(outs, axis=0)
        if is_inexact(x.aval.dtype):  # a slice holding a nan: nan (complex: the last sorted, a nan itself, as NumPy)
            out = where(any(isnan(x), axis=-1), s[..., -1] if is_complex(x.aval.dtype) else np.nan, out)
    if keepdims:
        out = reshape(out, (qs.size, *kept))
    out = reshape(out, (*qs.shape, *out.shape[1:]))
    return out if half is None else _convert(out, half)


def _inverted_cdf(index: Any) -> Any:
    """NumPy's ``inverted_cdf`` position from ``n q - 1`` (a NumPy array or traced): the
    statistic at that index when it is whole, else the next one up (the smallest x with
    ecdf(x) >= q), never below 0."""
    if isinstance(index, Tracer):
        below = floor(index)
        return maximum(where(equal(index, below), below, add(below, 1.0)), 0.0)
    below = np.floor(index)
    return np.maximum(np.where(index == below, below, below + 1), 0)


def _one_integer_statistic(x: Tracer, method: str, median: bool) -> bool:
    """Whether the quantile of ``x`` is one of its order statistics in its own dtype: the
    methods that pick one (``lower``, ``higher``, ``nearest``, ``inverted_cdf``) on integers (not bools,
    which order as 0 and 1 in float64, as the eager call orders them)."""
    dtype = np.dtype(x.aval.dtype)
    return not median and method in _ONE_STATISTIC and dtype.kind in "iu"


def _lerp(a: Tracer, b: Tracer, t: Any, beyond: Tracer, wide: str | None = None) -> Tracer:
    """NumPy's interpolation between order statistics a <= b at weight t (a Python float or
    traced, not 0): a + (b - a) t below t = 1/2, b - (b - a)(1 - t) from there (so eager and
    traced values agree bit for bit); ``beyond`` where b - a is not finite (an infinity:
    inf - inf would make nan of [1, inf] at q = 3/4, whose quantile is inf). ``wide``: the
    rest computed in that dtype after b - a (NumPy's float32 values at float64 positions)."""
    diff = subtract(b, a)
    if wide is not None:
        a, b, diff, beyond = (_convert(v, wide) for v in (a, b, diff, beyond))
    if isinstance(t, Tracer):
        # t and 1 - t in t's dtype (float64), then rounded to the values' (NumPy's Python-float weights)
        dtype = real(a).aval.dtype if is_complex(a.aval.dtype) else a.aval.dtype
        w_lo, w_hi = ((v if v.aval.dtype == dtype else _convert(v, dtype)) for v in (t, subtract(1.0, t)))
        near = where(less(t, 0.5), add(a, multiply(diff, w_lo)), subtract(b, multiply(diff, w_hi)))
    else:
        near = add(a, multiply(diff, t)) if t < 0.5 else subtract(b, multiply(diff, 1.0 - t))
    return where(isfinite(diff), near, beyond)


def _order_dtype(x: Tracer) -> tuple[Tracer, str | None]:
    """The order statistics' working dtype: float64 for integers and bools, float32 for
    float16 / bfloat16 (whose dtype the result keeps, rounded once: returned as ``half``)."""
    return _widened(x if is_inexact(x.aval.dtype) else _convert(x, "float64"))


def _to_last(a: Tracer, axis: int | tuple[int, ...] | None, name: str) -> tuple[Tracer, tuple[int, ...]]:
    """``a`` with the axes ``axis`` (every axis if None; one axis or a tuple, as NumPy's
    order statistics take) made one last axis, and the shape ``keepdims`` keeps."""
    axes = _norm_axes(axis, a.ndim, name)
    kept = tuple(1 if i in axes else d for i, d in enumerate(a.shape))
    rest = [i for i in range(a.ndim) if i not in axes]
    x = moveaxis(a, axes, tuple(range(len(rest), a.ndim))) if axes else a
    return reshape(x, (*(a.shape[i] for i in rest), math.prod(a.shape[i] for i in axes))), kept


def _unit_q(q: ArrayLike, name: str, scale: float = 1.0) -> np.ndarray:
    """The constant quantiles ``q`` / ``scale`` as float64, checked to lie in [0, 1] (nan
    is out of range too, as NumPy's check says)."""
    qs = np.asarray(q, dtype=np.float64)
    if not ((qs >= 0) & (qs <= scale)).all():
        raise ValueError(f"tnp.{name}: q must be in [0, {scale:g}], got {q!r}")
    return qs / scale if scale != 1.0 else qs


@numpy_fallback(_numpy_order_stats(np.percentile), nested=True)
def percentile(a: ArrayLike, q: ArrayLike, axis: int | None = None, method: str = "linear",
               keepdims: bool = False) -> Any:
    """``quantile`` with q in percent."""
    a = _traced(a)
    _real_only(a, "percentile")
    qs = _unit_q(q, "percentile", 100.0)
    return _quantile(a, qs, axis, method, keepdims, False, _interpolated_in(a, q, method, percent=True))


@numpy_fallback(_numpy_order_stats(np.median, real_only=False), nested=True)
def median(a: ArrayLike, axis: int | None = None, keepdims: bool = False) -> Any:
    """The middle value (mean of the two middle ones for even counts) along ``axis``; nan
    for an empty slice, as NumPy."""
    return _quantile(a, 0.5, axis, "linear", keepdims, True)


def _nan_last_order_stats(a: Tracer, qs: np.ndarray, axis: int | None, keepdims: bool, method: str,
                          median: bool = False, wide: str | None = None) -> Any:
    """Quantiles of the non-nan elements: nan sorts last, so the k-th statistic of the n_ok
    valid ones sits at position q (n_ok - 1); picked with a one-hot over positions. Methods
    as ``quantile``'s; ``median``: the mean of the two middle values (NumPy's nanmedian,
    complex values too, in ``sort``'s order)."""
    x, kept = _to_last(a, axis, "nanquantile")
    x, half = _order_dtype(x)
    n = x.shape[-1]
    if math.prod(a.shape) == 0:  # NumPy's nanmean of nothing (and JAX's): nan, no axis for q
        out = x.trace.constant(np.full(kept if keepdims else x.shape[:-1], np.nan, x.aval.dtype))
        return out if half is None else _convert(out, half)
    s = _by_rank(x, _ranks(x))
    ok = sum(logical_not(isnan(x)), axis=-1, keepdims=True)  # [..., 1] int
    # positions in float64, as NumPy's (its weights are then rounded to x's dtype, or not: ``wide``)
    pos_dtype = wide or (real(x).aval.dtype if is_complex(x.aval.dtype) else "float64")
    out_dtype = wide or x.aval.dtype
    okf = _convert(ok, pos_dtype)
    iota = np.arange(n, dtype=pos_dtype)
    safe_s = where(isnan(s), np.zeros((), x.aval.dtype), s)
    halfway = median or method == "midpoint"
    outs = []
    for qk in qs.ravel():
        pos = multiply(subtract(okf, 1.0), float(qk))
        lo = floor(pos)
        if method in _ONE_STATISTIC:  # one order statistic (nearest: ties to even, NumPy's)
            lo = {"lower": lo, "higher": ceil(pos), "nearest": rint(pos),
                  "inverted_cdf": _inverted_cdf(subtract(multiply(okf, float(qk)), 1.0))}[method]
        frac = subtract(pos, lo) if method in ("linear", "midpoint") or median else multiply(pos, 0.0)
        hi = where(less(add(lo, 1.0), okf), add(lo, 1.0), lo)
        v_lo = _one_hot_sum(safe_s, equal(iota, lo), -1)
        v_hi = _one_hot_sum(safe_s, equal(iota, hi), -1)
        f = reshape(frac, frac.shape[:-1])
        if median:
            between = divide(add(v_lo, v_hi), 2.0)
        elif halfway:
            between = _lerp(v_lo, v_hi, 0.5, divide(add(v_lo, v_hi), 2.0), wide)
        else:
            between = _lerp(v_lo, v_hi, f, add(multiply(v_lo, subtract(1.0, f)), multiply(v_hi, f)), wide)
        # at a whole position v_lo itself: inf * 0 would make nan of [1, inf, inf]'s median
        outs.append(where(equal(f, 0), v_lo if wide is None else _convert(v_lo, wide), between))

    out = stack(outs, axis=0)
    if out.aval.dtype != out_dtype:  # (beyond an infinity: float64 weights; its value is inf or nan)
        out = _convert(out, out_dtype)
    out = where(equal(reshape(ok, ok.shape[:-1]), 0), np.full((), np.nan, out_dtype), out)
    if keepdims:
        out = reshape(out, (qs.size, *kept))
    out = reshape(out, (*qs.shape, *out.shape[1:]))
    return out if half is None else _convert(out, half)


@numpy_fallback(_numpy_order_stats(np.nanquantile), nested=True)
def nanquantile(a: ArrayLike, q: ArrayLike, axis: int | None = None, method: str = "linear",
                keepdims: bool = False) -> Any:
    """``quantile`` of the elements that are not nan (nan where there are none)."""
    a = _traced(a)
    _real_only(a, "nanquantile")
    if isinstance(q, Tracer):
        raise TypeError("tnp.nanquantile: q must be a constant (the positions it picks are structure)")
    if method not in QUANTILE_METHODS:
        raise NotImplementedError(f"tnp.nanquantile: method {method!r} is not supported on traced values; "
                                  f"use one of {', '.join(QUANTILE_METHODS)}")
    return _nanquantile(a, _unit_q(q, "nanquantile"), axis, method, keepdims, _interpolated_in(a, q, method))


def _nanquantile(a: Tracer, qs: np.ndarray, axis: int | None, method: str, keepdims: bool,
                 wide: str | None) -> Any:
    if _one_integer_statistic(a, method, False) and math.prod(a.shape) > 0:  # no nans: quantile's, in the dtype
        return _quantile(a, qs, axis, method, keepdims, False)
    return _nan_last_order_stats(a, qs, axis, keepdims, method, wide=wide)


@numpy_fallback(_numpy_order_stats(np.nanpercentile), nested=True)
def nanpercentile(a: ArrayLike, q: ArrayLike, axis: int | None = None, method: str = "linear",
                  keepdims: bool = False) -> Any:
    """``nanquantile`` with q in percent."""
    a = _traced(a)
    _real_only(a, "nanpercentile")
    if isinstance(q, Tracer):
        raise TypeError("tnp.nanpercentile: q must be a constant (the positions it picks are structure)")
    if method not in QUANTILE_METHODS:
        raise NotImplementedError(f"tnp.nanpercentile: method {method!r} is not supported on traced values; "
                                  f"use one of {', '.join(QUANTILE_METHODS)}")
    return _nanquantile(a, _unit_q(q, "nanpercentile", 100.0), axis, method, keepdims,
                        _interpolated_in(a, q, method, percent=True))


@numpy_fallback(_numpy_order_stats(np.nanmedian, real_only=False), nested=True)
def nanmedian(a: ArrayLike, axis: int | None = None, keepdims: bool = False) -> Any:
    """``median`` of the elements that are not nan (the mean of the two middle ones; complex
    values in ``sort``'s order, as NumPy's: jax.numpy refuses them)."""
    a = _traced(a)
    out = _nan_last_order_stats(a, np.asarray(0.5), axis, keepdims, "linear", median=True)
    return out


@numpy_fallback(np.sort_complex)
def sort_complex(a: ArrayLike) -> Any:
    """Sorted (along the last axis) by real part, then imaginary part; complex result."""
    dtype = a.aval.dtype
    out = sort(a, axis=-1)
    if is_complex(dtype):
        return out
    # NumPy's dtypes: complex64 for 8- and 16-bit integers, complex128 otherwise (also float32)
    small = dtype in ("int8", "int16", "uint8", "uint16")
    return _convert(out, "complex64" if small else "complex128")


def _top_k_size(k: Any, n: int) -> int:
    """``k`` checked as lax.top_k checks it: an integer from 0 to the axis's size ``n``."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 0 <= k <= n:
        raise ValueError(f"tnp.top_k: k must be an integer in [0, {n}] (the axis's size), got {k!r}")
    return int(k)


def _np_top_k(a: Any, k: int, axis: int = -1) -> tuple[Any, Any]:
    a = np.asarray(a)
    k = _top_k_size(k, a.shape[_norm_axis(axis, a.ndim, "top_k")])
    idx = np.take(_np_argsort(a, axis=axis, descending=True), np.arange(k), axis=axis)
    return np.take_along_axis(a, idx, axis=axis), idx


@numpy_fallback(_np_top_k)
def top_k(a: ArrayLike, k: int, axis: int = -1) -> tuple[Any, Any]:
    """The k largest values along ``axis`` (descending; nan above inf, as ``lax.top_k``) and
    their indices (lower index first among ties)."""

    ax = _norm_axis(axis, a.ndim, "top_k")
    x = moveaxis(a, ax, -1)
    n = x.shape[-1]
    k = _top_k_size(k, n)
    # rank in the stable descending order (the ascending ranks of the reversed row, mirrored):
    # ties go to the lower index first, values and derivatives alike (lax.top_k's)
    rank = add(multiply(flip(_ranks(flip(x, -1)), -1), -1), n - 1)
    order = _by_rank(x.trace.constant(np.broadcast_to(np.arange(n), x.shape).copy()), rank)[..., :k]
    vals = _by_rank(x, rank)[..., :k]
    return moveaxis(vals, -1, ax), moveaxis(order, -1, ax)


@numpy_fallback(np.interp, "x", "xp", "fp", "left", "right")
def interp(x: ArrayLike, xp: ArrayLike, fp: ArrayLike, left: ArrayLike | None = None,
           right: ArrayLike | None = None, period: float | None = None) -> Any:
    """Piecewise-linear interpolation of (xp, fp) at x (xp increasing); left/right outside.
    The interval of each x is found by comparing with every xp (size len(x) * len(xp)).
    NumPy's algorithm step by step (float64; complex fp: its two parts apart): fp[j] at a
    knot xp[j] (the last of equal knots), slope (x - xp[j]) + fp[j] between knots, from the
    right knot where that is nan; with a single knot fp[0] also at x = nan. The slope's
    divisor is 1 where two knots are equal (a branch never taken), so no inf reaches
    the derivative with respect to xp. ``period``: periodic knots (``_periodic_interp``)."""
    trace = _trace_of((x, xp, fp, left, right))
    xp_shape, fp_shape = (tuple(v.shape) if isinstance(v, Tracer) else np.shape(v) for v in (xp, fp))
    if len(xp_shape) != 1 or xp_shape != fp_shape:
        raise ValueError(f"tnp.interp: xp and fp must be 1-D arrays of one length, got shapes {xp_shape} and "
                         f"{fp_shape}")
    if xp_shape[0] == 0:
        raise ValueError("tnp.interp: xp and fp are empty: there are no sample points to interpolate between")
    if period is not None:
        return _periodic_interp(trace, x, xp, fp, period)
    if is_complex(result_type(fp, 1.0)):  # as NumPy: the real and imaginary parts apart
        fc = _prep(trace, fp, "complex128")

        def part(v: Any, take: Any) -> Any:
            return None if v is None else take(v if isinstance(v, Tracer) else np.asarray(v))

        return _complex(interp(x, xp, real(fc), part(left, real), part(right, real)),
                        interp(x, xp, imag(fc), part(left, imag), part(right, imag)))
    xq, xs = _prep(trace, x, "float64"), _prep(trace, xp, "float64")
    fs = _prep(trace, fp, "float64")
    n = xs.shape[0]
    lo = fs[0] if left is None else left
    hi = fs[n - 1] if right is None else right
    if n == 1:
        return where(less(xq, xs[0]), lo, where(greater(xq, xs[0]), hi, broadcast_to(fs[0], xq.shape)))
    x_nan = isnan(xq)  # nan out; inside, x = xp[0], so no nan slope term reaches fp's and xp's derivatives
    xq = where(x_nan, xs[0], xq)
    j = sum(less_equal(reshape(xs, (1,) * xq.ndim + (n,)), expand_dims(xq, -1)), axis=-1)  # #{xp <= x}
    i = where(less(j, 1), 1, where(greater(j, n - 1), n - 1, j))  # interval [i - 1, i]
    onehot_hi = equal(expand_dims(i, -1), np.arange(n))
    onehot_lo = equal(expand_dims(i, -1), np.arange(n) + 1)
    zero = np.zeros((), "float64")
    x0, x1 = sum(where(onehot_lo, xs, zero), axis=-1), sum(where(onehot_hi, xs, zero), axis=-1)
    f0, f1 = sum(where(onehot_lo, fs, zero), axis=-1), sum(where(onehot_hi, fs, zero), axis=-1)
    dx = subtract(x1, x0)
    slope = divide(subtract(f1, f0), where(equal(dx, 0), 1.0, dx))
    from_left = add(multiply(slope, subtract(xq, x0)), f0)
    from_right = add(multiply(slope, subtract(xq, x1)), f1)
    out = where(isnan(from_left), where(logical_and(isnan(from_right), equal(f0, f1)), f0, from_right), from_left)
    out = where(equal(xq, x0), _at_knot(from_left, f0), out)
    out = where(equal(j, n), where(equal(dx, 0), f1, _at_knot(from_right, f1)), out)  # x == xp[-1]
    out = where(less(xq, xs[0]), lo, where(greater(xq, xs[n - 1]), hi, out))
    return where(x_nan, np.nan, out)


def _periodic_interp(trace: Any, x: Any, xp: Any, fp: Any, period: Any) -> Any:
    """``interp`` with ``period``, as NumPy: x and xp taken modulo the period, the knots
    sorted (fp with them: by xp's ranks, as ``sort``) and extended by one period on each
    side; left and right are not read."""
    if isinstance(period, Tracer):
        raise TypeError("tnp.interp: period must be a constant")
    if period == 0:
        raise ValueError("tnp.interp: period must be a non-zero value")
    period = abs(float(period))
    xs = _prep(trace, xp, "float64")
    if xs.ndim != 1 or np.ndim(fp) != 1 or xs.shape[0] != np.shape(fp)[0]:
        raise ValueError("tnp.interp: xp and fp must be 1-D sequences of the same length")
    fs = _prep(trace, fp, "complex128" if is_complex(result_type(fp, 1.0)) else "float64")
    xq = remainder(_prep(trace, x, "float64"), period)
    xs = remainder(xs, period)
    rank = _ranks(xs)
    xs, fs = _by_rank(xs, rank), _by_rank(fs, rank)
    xs = concatenate([subtract(xs[-1:], period), xs, add(xs[:1], period)])
    fs = concatenate([fs[-1:], fs, fs[:1]])
    return interp(xq, xs, fs)


def _at_knot(line: Tracer, f: Tracer) -> Tracer:
    """The value f at a knot, as NumPy, with the tangent of the line f + slope (x - knot)
    through it (JAX's derivative there): the line is f itself there, except where it is
    nan (an infinite slope)."""
    return where(isnan(line), f, line)


# --- partition ---------------------------------------------------------------------------
# jax.numpy's layout: the kth + 1 smallest elements in ascending order, then the others in
# descending order (its two lax.top_k calls); argpartition gives the rest's indices in
# increasing index order. Ties go to the lower index first, as top_k's, and among equal
# zeros -0.0 counts below 0.0 (top_k's total order); nan is last, as in ``sort`` (JAX puts
# a nan with its sign bit set first: a documented deviation from NumPy that tidu does not
# copy).


def _partition_k(kth: Any, n: int, name: str) -> int:
    """The largest of the ``kth`` (an int, or a sequence of them as NumPy takes), in [0, n):
    the layout that puts it in place puts every smaller one in place too."""
    if isinstance(kth, Tracer):
        raise TypeError(f"tnp.{name}: kth must be a constant int (the layout it picks is structure)")
    ks = np.asarray(kth)
    if ks.dtype.kind not in "iu" or ks.ndim > 1 or ks.size == 0:
        raise TypeError(f"tnp.{name}: kth must be an int or a non-empty sequence of ints, got {kth!r}")
    bad = [int(k) for k in ks.ravel() if not -n <= k < n]
    if bad:
        raise ValueError(f"tnp.{name}: kth {bad[0]} is out of bounds for an axis of size {n}; "
                         f"use -{n} <= kth < {n}")
    return int(np.max(ks % n))


def _partition_axis(a: Any, axis: int | None, name: str) -> tuple[Any, int]:
    if axis is None:  # NumPy's: the flattened array
        return (ravel(a) if isinstance(a, Tracer) else np.ravel(a)), 0
    ndim = a.ndim if isinstance(a, Tracer) else np.ndim(a)
    if ndim == 0:
        raise ValueError(f"tnp.{name}: a 0-d array has no axis to partition; give an array with one")
    return a, _norm_axis(axis, ndim, name)


def _signed_zero_first(x: Tracer) -> Tracer | None:
    """The sign bit of the non-nan elements of a real float ``x`` (None for other dtypes):
    the tie-break between -0.0 and 0.0."""
    if not is_inexact(x.aval.dtype) or is_complex(x.aval.dtype):
        return None
    return logical_and(signbit(x), logical_not(isnan(x)))


def _top_k_ranks(x: Tracer, descending: bool) -> Tracer:
    """Each element's position in the order that top_k-based selection gives: ascending (or
    descending), ties to the lower index, -0.0 below 0.0."""
    xi, xj = expand_dims(x, -1), expand_dims(x, -2)
    n = x.shape[-1]
    j_lt_i = np.tri(n, n, -1, dtype=bool)  # [i, j] = j < i
    first, same = _order(xi, xj) if descending else _order(xj, xi)  # j comes first
    z = _signed_zero_first(x)
    if z is not None:
        zi, zj = expand_dims(z, -1), expand_dims(z, -2)
        by_sign = logical_and(zi, logical_not(zj)) if descending else logical_and(zj, logical_not(zi))
        tie = logical_or(by_sign, logical_and(equal(zi, zj), j_lt_i))
    else:
        tie = j_lt_i
    return sum(logical_or(first, logical_and(same, tie)), axis=-1)


def _pick_ranks(x: Tracer, rank: Tracer, m: int) -> Tracer:
    """out[..., k] = the element of rank k, for k < m."""
    hit = equal(expand_dims(rank, -2), np.arange(m).reshape(m, 1))  # [..., k, i]
    return _one_hot_sum(expand_dims(x, -2), hit, -1)


def _np_orders(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """NumPy's counterpart of ``_top_k_ranks`` on the last axis: the stable ascending and
    descending orders (indices), -0.0 below 0.0."""
    def ascending(v: np.ndarray) -> np.ndarray:
        v = _np_key(v)
        if v.dtype.kind == "f":
            z = np.signbit(v) & ~np.isnan(v)
            return np.lexsort((~z, v), axis=-1)
        return np.argsort(v, axis=-1, kind="stable")

    n = a.shape[-1]
    return ascending(a), n - 1 - np.flip(ascending(np.flip(a, -1)), -1)


def _np_last_axis(a: Any, kth: Any, axis: int | None, what: str) -> tuple[np.ndarray, int, int, int]:
    """(a with ``axis`` moved last, that axis, its length, the checked kth)."""
    a, ax = _partition_axis(np.asarray(a), axis, what)
    x = np.moveaxis(a, ax, -1)
    n = x.shape[-1]
    return x, ax, n, _partition_k(kth, n, what)


def _np_partition(a: Any, kth: Any, axis: int | None = -1) -> Any:
    x, ax, n, k = _np_last_axis(a, kth, axis, "partition")
    asc, desc = _np_orders(x)
    out = np.concatenate([np.take_along_axis(x, asc[..., :k + 1], -1),
                          np.take_along_axis(x, desc[..., :n - k - 1], -1)], axis=-1)
    return np.moveaxis(out, -1, ax)


def _np_argpartition(a: Any, kth: Any, axis: int | None = -1) -> Any:
    x, ax, n, k = _np_last_axis(a, kth, axis, "argpartition")
    asc, _ = _np_orders(x)
    rank = np.empty_like(asc)
    np.put_along_axis(rank, asc, np.arange(n), -1)
    rest = np.argsort(rank > k, axis=-1, kind="stable")[..., k + 1:]  # the others, by index
    return np.moveaxis(np.concatenate([asc[..., :k + 1], rest], axis=-1).astype(np.int64), -1, ax)


@numpy_fallback(_np_partition)
def partition(a: ArrayLike, kth: int | Any, axis: int | None = -1) -> Any:
    """A copy of ``a`` with the element of sorted position ``kth`` (an int, or the largest
    of a sequence) in place along ``axis`` (the flattened array if None): those before it
    are not larger, those after not smaller. The layout is jax.numpy's: the kth + 1
    smallest ascending, then the rest descending (ties to the lower index, -0.0 below 0.0,
    nan last as in ``sort``), and so is the derivative, which follows the picked elements;
    complex values in ``sort``'s order (jax.numpy refuses them)."""
    a, ax = _partition_axis(_traced(a), axis, "partition")
    if a.aval.dtype == "bool":  # ordered as 0 and 1, a bool result
        return _convert(partition(_convert(a, "int8"), kth, ax), "bool")
    x = moveaxis(a, ax, -1)
    n = x.shape[-1]
    k = _partition_k(kth, n, "partition")
    bottom = _pick_ranks(x, _top_k_ranks(x, False), k + 1)
    top = _pick_ranks(x, _top_k_ranks(x, True), n - k - 1)
    return moveaxis(concatenate([bottom, top], axis=-1), -1, ax)


@numpy_fallback(_np_argpartition)
def argpartition(a: ArrayLike, kth: int | Any, axis: int | None = -1) -> Any:
    """Indices that partition ``a`` (see ``partition``), int64: those of the kth + 1 smallest
    elements in ascending order, then the others' in increasing index order (jax.numpy's
    layout)."""
    a, ax = _partition_axis(_traced(a), axis, "argpartition")
    x = moveaxis(a, ax, -1)
    n = x.shape[-1]
    k = _partition_k(kth, n, "argpartition")
    asc = _top_k_ranks(x, False)
    after = greater(asc, k)
    # the others keep their index order: their place is k + 1 + the number of others before them
    others_before = sum(logical_and(expand_dims(after, -2), np.tri(n, n, -1, dtype=bool)), axis=-1)
    place = where(after, add(others_before, k + 1), asc)
    iota = x.trace.constant(np.broadcast_to(np.arange(n), x.shape).copy())
    return moveaxis(_by_rank(iota, place), -1, ax)
