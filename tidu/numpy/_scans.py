"""tidu.numpy cumulative operations along an axis (``cumsum``, ``cumprod``, ``cummax``, ...)
and differences (``diff``, ``ediff1d``, ``trapezoid``).

A scan is Hillis and Steele's: log2(n) steps, each combining the array with itself
shifted by 1, 2, 4, ... (a ``pad`` with the operation's identity that crops the other
end), so the graph stays small and the derivative is that of the products and sums."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tidu.core.keys import is_complex, is_inexact
from tidu.numpy._casting import astype
from tidu.numpy._core import ArrayLike, _convert, _norm_axis, _prep, _trace_of, numpy_fallback
from tidu.numpy._elementwise import abs as _abs
from tidu.numpy._elementwise import (
    add,
    divide,
    equal,
    greater,
    less,
    maximum,
    minimum,
    multiply,
    negative,
    not_equal,
    subtract,
    where,
)
from tidu.numpy._filled import full_like
from tidu.numpy._reductions import _accumulating, _narrowed, _traced, _widened
from tidu.numpy._reductions import sum as sum_
from tidu.numpy._shapes import broadcast_to, concatenate, ravel, reshape, stack
from tidu.numpy._ufuncs import isnan, logical_and, remainder
from tidu.trace.tracing import Tracer


def _shift(x: Tracer, axis: int, k: int, fill: Any) -> Tracer:
    """x moved k places up ``axis``: the last k elements dropped, k ``fill`` in front."""
    idx = [slice(None)] * x.ndim
    idx[axis] = slice(0, x.shape[axis] - k)
    low = [0] * x.ndim
    low[axis] = k
    fill = fill(x.aval.dtype) if callable(fill) else fill
    value = x.trace.constant(np.asarray(fill, dtype=x.aval.dtype))
    return x.trace.emit("pad", [x[tuple(idx)], value], {"low": tuple(low), "high": (0,) * x.ndim,
                                                         "interior": (0,) * x.ndim})


def _scan(name: str, x: Any, axis: int | None, combine: Any, identity: Any, dtype: Any = None,
          widen: bool = False) -> Any:
    """``combine(later, earlier)`` scanned along ``axis``; ``widen``: in ``dtype``, or (as
    NumPy's sums and products) in int64 / uint64 for bools and narrower integers, and
    float16 / bfloat16 in float32, each result rounded once (as the reductions)."""
    x = _traced(x)
    if widen:
        x, half = _widened(_accumulating(x, dtype))
        if half is not None:
            return _narrowed(_scan(name, x, axis, combine, identity, widen=True), half)
    elif dtype is not None:
        x = astype(x, dtype)
    if axis is None:
        x, axis = ravel(x), 0
    axis = _norm_axis(axis, x.ndim, name)
    boolean = x.aval.dtype == "bool"  # (dtype=bool: a running or / and, NumPy's and JAX's)
    if boolean:
        x = _convert(x, "int64")
    n, k = x.shape[axis], 1
    while k < n:
        x = combine(x, _shift(x, axis, k, identity))
        k *= 2
    return _convert(x, "bool") if boolean else x


@numpy_fallback(np.cumsum, nested=True, accumulates=True)
def cumsum(x: ArrayLike, axis: int | None = None, dtype: Any = None) -> Any:
    """Running sums along ``axis`` (of the flattened array by default); bools and narrow
    integers are summed as int64 (uint64), as NumPy."""
    return _scan("cumsum", x, axis, add, _negative_zero, dtype, widen=True)


def _negative_zero(dtype: str) -> Any:
    """The identity of IEEE addition, -0.0 (-0.0 + x is x, also for x = -0.0; 0 for integers)."""
    return complex(-0.0, -0.0) if is_complex(dtype) else -0.0 if is_inexact(dtype) else 0


@numpy_fallback(np.cumprod, nested=True, accumulates=True)
def cumprod(x: ArrayLike, axis: int | None = None, dtype: Any = None) -> Any:
    """Running products along ``axis`` (of the flattened array by default); exact
    derivatives also where factors are 0 (only products, no division)."""
    return _scan("cumprod", x, axis, multiply, 1, dtype, widen=True)


def _odd_even_scan(x: Tracer, axis: int, combine: Any) -> Tracer:
    """Inclusive prefix combination along ``axis`` in the order of JAX's
    ``associative_scan``: neighbours paired, the scan of those, then the entries between
    (``combine(earlier, later)``). ``cummax`` and ``cummin`` go this way (here and in
    ``tidu.lax``): at ties, where ``maximum`` and ``minimum`` give each operand half the
    derivative, the derivative is then shared as JAX's ``lax.cummax`` shares it."""
    n = x.shape[axis]
    if n < 2:
        return x

    def strided(v: Tracer, start: int, stop: int | None) -> Tracer:
        idx: list[Any] = [slice(None)] * v.ndim
        idx[axis] = slice(start, stop, 2)
        return v[tuple(idx)]

    def first(v: Tracer, k: int) -> Tracer:
        idx: list[Any] = [slice(None)] * v.ndim
        idx[axis] = slice(0, k)
        return v[tuple(idx)]

    odd = _odd_even_scan(combine(strided(x, 0, n - 1), strided(x, 1, None)), axis, combine)  # entries 1, 3, ...
    evens = strided(x, 2, None)
    even = concatenate([first(x, 1), combine(first(odd, evens.shape[axis]), evens)], axis=axis)  # 0, 2, ...
    # interleave even[0], odd[0], even[1], odd[1], ... (even has one more entry when n is odd)
    both = stack([first(even, n // 2), odd], axis=axis + 1)
    shape = list(even.shape)
    shape[axis] = 2 * (n // 2)
    out = reshape(both, tuple(shape))
    if n % 2:
        idx: list[Any] = [slice(None)] * x.ndim
        idx[axis] = slice(n // 2, None)
        out = concatenate([out, even[tuple(idx)]], axis=axis)
    return out


def _running(name: str, x: Any, axis: int | None, combine: Any) -> Any:
    x = _traced(x)
    if x.aval.dtype == "bool":  # a running any (all), as NumPy's (a bool result)
        return _convert(_running(name, _convert(x, "int8"), axis, combine), "bool")
    if axis is None:
        x, axis = ravel(x), 0
    return _odd_even_scan(x, _norm_axis(axis, x.ndim, name), combine)


@numpy_fallback(lambda x, axis=None: np.maximum.accumulate(np.ravel(x) if axis is None else x, axis=axis or 0),
                nested=True)
def cummax(x: ArrayLike, axis: int | None = None) -> Any:
    """Running maximum along ``axis``; at ties the derivative is shared as JAX's
    ``lax.cummax`` shares it (``_odd_even_scan``)."""
    # maximum(earlier, later): at ties (0.0 and -0.0) the later one, as NumPy's accumulate
    return _running("cummax", x, axis, maximum)


@numpy_fallback(lambda x, axis=None: np.minimum.accumulate(np.ravel(x) if axis is None else x, axis=axis or 0),
                nested=True)
def cummin(x: ArrayLike, axis: int | None = None) -> Any:
    """Running minimum along ``axis``; at ties the derivative is shared as JAX's
    ``lax.cummin`` shares it."""
    return _running("cummin", x, axis, minimum)


@numpy_fallback(np.nancumsum, nested=True, accumulates=True)
def nancumsum(x: ArrayLike, axis: int | None = None, dtype: Any = None) -> Any:
    """cumsum with nan counted as 0."""
    x = _traced(x)
    return cumsum(where(isnan(x), 0.0, x) if is_inexact(x.aval.dtype) else x, axis, dtype)


@numpy_fallback(np.nancumprod, nested=True, accumulates=True)
def nancumprod(x: ArrayLike, axis: int | None = None, dtype: Any = None) -> Any:
    """cumprod with nan counted as 1."""
    x = _traced(x)
    return cumprod(where(isnan(x), 1.0, x) if is_inexact(x.aval.dtype) else x, axis, dtype)


def _with_initial(out: Any, x: Any, axis: int | None, initial: float, include_initial: bool) -> Any:
    if not include_initial:
        return out
    ax = 0 if axis is None else axis
    first = out[(slice(None),) * (ax % out.ndim) + (slice(0, 1),)]
    return concatenate([full_like(first, initial), out], axis=ax)  # not first * 0: inf * 0 is nan


@numpy_fallback("cumulative_sum", nested=True, accumulates=True)
def cumulative_sum(x: ArrayLike, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Any:
    """``cumsum`` (the array-API name); ``include_initial`` puts a 0 first."""
    return _with_initial(cumsum(x, axis, dtype), x, axis, 0.0, include_initial)


@numpy_fallback("cumulative_prod", nested=True, accumulates=True)
def cumulative_prod(x: ArrayLike, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Any:
    """``cumprod`` (the array-API name); ``include_initial`` puts a 1 first."""
    return _with_initial(cumprod(x, axis, dtype), x, axis, 1.0, include_initial)


def _np_diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None) -> Any:
    kw = {k: v for k, v in (("prepend", prepend), ("append", append)) if v is not None}
    return np.diff(a, n=n, axis=axis, **kw)


@numpy_fallback(_np_diff, "a", "prepend", "append", nested=True)
def diff(a: ArrayLike, n: int = 1, axis: int = -1, prepend: ArrayLike | None = None,
         append: ArrayLike | None = None) -> Any:
    """n-th differences a[i + 1] - a[i] along ``axis`` (after ``prepend``/``append``)."""
    a = _traced(a)
    if n < 0:
        raise ValueError(f"tnp.diff: order must be non-negative but got {n} (as NumPy)")
    nd = a.ndim if isinstance(a, Tracer) else np.ndim(a)
    ax = _norm_axis(axis, nd, "diff")

    def edge(v: Any) -> Any:
        if np.ndim(v) != 0:
            return v
        shape = list(a.shape if isinstance(a, Tracer) else np.shape(a))
        shape[ax] = 1
        return broadcast_to(v, tuple(shape))

    parts = ([edge(prepend)] if prepend is not None else []) + [a] + (
        [edge(append)] if append is not None else [])
    x = concatenate(parts, axis=ax) if len(parts) > 1 else a
    step = not_equal if x.aval.dtype == "bool" else subtract  # booleans: whether neighbours differ (NumPy's)
    for _ in range(n):
        hi = [slice(None)] * x.ndim
        lo = [slice(None)] * x.ndim
        hi[ax], lo[ax] = slice(1, None), slice(0, -1)
        x = step(x[tuple(hi)], x[tuple(lo)])
    return x


@numpy_fallback(np.ediff1d, nested=True)
def ediff1d(ary: ArrayLike, to_end: ArrayLike | None = None, to_begin: ArrayLike | None = None) -> Any:
    """Differences of the flattened array, with optional values before and after, in the
    array's dtype (as NumPy: values that do not cast to it by the same_kind rule are a
    TypeError)."""
    d = diff(ravel(_traced(ary)))
    parts = []
    for name, extra in (("to_begin", to_begin), ("to_end", to_end)):
        if extra is None:
            continue
        given = extra.aval.dtype if isinstance(extra, Tracer) else np.asarray(extra).dtype.name
        if not np.can_cast(np.dtype(given), np.dtype(d.aval.dtype), casting="same_kind"):
            raise TypeError(f"tnp.ediff1d: {name} of dtype {given} does not cast to the array's dtype "
                            f"{d.aval.dtype} (same_kind, as NumPy); convert it first")
        part = ravel(extra if isinstance(extra, Tracer) else np.asarray(extra))
        parts.append(astype(part, d.aval.dtype))
    if not parts:
        return d
    return concatenate([parts[0], d, *parts[1:]] if to_begin is not None else [d, *parts])


@numpy_fallback("trapezoid", "y", "x", nested=True, accumulates=True)
def trapezoid(y: ArrayLike, x: ArrayLike | None = None, dx: float = 1.0, axis: int = -1) -> Any:
    """Integral of y by the trapezoidal rule along ``axis`` (sample points ``x``, or spacing ``dx``)."""
    y = _traced(y)
    yt = y if isinstance(y, Tracer) else np.asarray(y)
    ax = _norm_axis(axis, np.ndim(yt), "trapezoid")
    hi = [slice(None)] * np.ndim(yt)
    lo = [slice(None)] * np.ndim(yt)
    hi[ax], lo[ax] = slice(1, None), slice(0, -1)
    mids = multiply(add(yt[tuple(hi)], yt[tuple(lo)]), 0.5)
    if x is None:
        return multiply(sum_(mids, axis=ax), dx)
    d = diff(x)
    if np.ndim(d) == 1 and np.ndim(yt) > 1:
        shape = [1] * np.ndim(yt)
        shape[ax] = np.shape(d)[0]
        d = d.reshape(tuple(shape)) if isinstance(d, Tracer) else np.reshape(d, shape)
    return sum_(multiply(mids, d), axis=ax)



@numpy_fallback(np.gradient, "f", "varargs", nested=True)
def gradient(f: ArrayLike, *varargs: Any, axis: int | Sequence[int] | None = None, edge_order: int = 1) -> Any:
    """NumPy's np.gradient: second-order central differences inside, one-sided ones of order
    ``edge_order`` (1 or 2) at the edges; per axis a scalar spacing or a 1-D array of
    coordinates (uneven spacing, NumPy's formulas; differentiable in them too). One array
    per axis (a single one for one axis)."""
    f = _traced(f)
    trace = _trace_of((f, *varargs))
    if not isinstance(f, Tracer):  # traced coordinates of a constant f
        arr = np.asarray(f)
        f = _prep(trace, arr, arr.dtype.name if arr.dtype.kind in "fc" else "float64")
    if edge_order not in (1, 2):
        raise ValueError(f"tnp.gradient: edge_order must be 1 or 2, got {edge_order!r}")
    axes = list(range(f.ndim)) if axis is None else (
        [axis] if isinstance(axis, int | np.integer) else list(axis))
    axes = [_norm_axis(int(a), f.ndim, "gradient") for a in axes]
    if len(varargs) == 0:
        spacing = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        spacing = [varargs[0]] * len(axes)
    elif len(varargs) == len(axes):
        spacing = list(varargs)
    else:
        raise TypeError(f"tnp.gradient: {len(varargs)} spacings for {len(axes)} axes; give one scalar, "
                        "or one per axis")
    x = _convert(f, "float64") if not is_inexact(f.aval.dtype) else f
    outs = []
    for a, h in zip(axes, spacing, strict=True):
        n = x.shape[a]
        if n < edge_order + 1:
            raise ValueError(f"tnp.gradient: axis {a} has {n} samples; edge_order={edge_order} needs at least "
                             f"{edge_order + 1}")

        def sl(lo: int | None, hi: int | None, a: int = a) -> Any:
            idx = [slice(None)] * x.ndim
            idx[a] = slice(lo, hi)
            return x[tuple(idx)]

        if np.ndim(h) == 0:
            # NumPy writes each axis's result into an array of the values' dtype
            outs.append(_convert(concatenate(_even_gradient(sl, n, h, edge_order), axis=a), x.aval.dtype))
            continue
        if np.ndim(h) != 1 or np.shape(h)[0] != n:
            raise ValueError(f"tnp.gradient: the coordinates of axis {a} must be a 1-D array of {n} values, "
                             f"got shape {np.shape(h)}")
        outs.append(_convert(concatenate(_uneven_gradient(sl, n, h, edge_order, x.ndim, a), axis=a), x.aval.dtype))
    return outs[0] if len(outs) == 1 else tuple(outs)


def _even_gradient(sl: Any, n: int, h: Any, edge_order: int) -> list[Any]:
    """The first, inner and last parts along an axis of spacing ``h``."""
    if edge_order == 1:
        first = multiply(subtract(sl(1, 2), sl(0, 1)), 1.0 / h)
        last = multiply(subtract(sl(n - 1, n), sl(n - 2, n - 1)), 1.0 / h)
    else:  # NumPy's a f0 + b f1 + c f2 with (a, b, c) = (-1.5, 2, -0.5) / h, mirrored at the end
        first = add(add(multiply(sl(0, 1), -1.5 / h), multiply(sl(1, 2), 2.0 / h)), multiply(sl(2, 3), -0.5 / h))
        last = add(add(multiply(sl(n - 3, n - 2), 0.5 / h), multiply(sl(n - 2, n - 1), -2.0 / h)),
                   multiply(sl(n - 1, n), 1.5 / h))
    parts = [first]
    if n > 2:
        parts.append(multiply(subtract(sl(2, None), sl(0, n - 2)), 0.5 / h))
    parts.append(last)
    return parts


def _uneven_gradient(sl: Any, n: int, coords: Any, edge_order: int, ndim: int, a: int) -> list[Any]:
    """NumPy's formulas for coordinates ``coords`` along axis ``a``: second order inside
    (weights of the three neighbours from the two spacings), ``edge_order`` at the edges."""
    c = coords if isinstance(coords, Tracer) else np.asarray(coords, dtype=np.float64)
    dx = subtract(c[1:], c[:-1])

    def along(w: Any) -> Any:  # a 1-D weight along axis a
        shape = [1] * ndim
        shape[a] = -1
        return reshape(w, tuple(shape)) if isinstance(w, Tracer) else np.reshape(w, shape)

    def combine(ws: list[Any], lo: int, hi: int) -> Any:  # sum_k w_k f[lo + k : hi + k]
        out = None
        for k, w in enumerate(ws):
            term = multiply(along(w), sl(lo + k, hi + k))
            out = term if out is None else add(out, term)
        return out

    parts = []
    if edge_order == 1:
        parts.append(divide(subtract(sl(1, 2), sl(0, 1)), along(dx[0:1])))
    else:
        d1, d2 = dx[0:1], dx[1:2]
        s = add(d1, d2)
        parts.append(combine([negative(divide(add(multiply(d1, 2.0), d2), multiply(d1, s))),
                              divide(s, multiply(d1, d2)), negative(divide(d1, multiply(d2, s)))], 0, 1))
    if n > 2:
        d1, d2 = dx[:-1], dx[1:]
        s = add(d1, d2)
        parts.append(combine([negative(divide(d2, multiply(d1, s))), divide(subtract(d2, d1), multiply(d1, d2)),
                              divide(d1, multiply(d2, s))], 0, n - 2))
    if edge_order == 1:
        parts.append(divide(subtract(sl(n - 1, n), sl(n - 2, n - 1)), along(dx[n - 2:n - 1])))
    else:
        d1, d2 = dx[n - 3:n - 2], dx[n - 2:n - 1]
        s = add(d1, d2)
        parts.append(combine([divide(d2, multiply(d1, s)), negative(divide(s, multiply(d1, d2))),
                              divide(add(multiply(d2, 2.0), d1), multiply(d2, s))], n - 3, n - 2))
    return parts


@numpy_fallback(np.unwrap, nested=True, accumulates=True)
def unwrap(p: ArrayLike, discont: float | None = None, axis: int = -1, period: float = 2 * np.pi) -> Any:
    """Phases with jumps larger than ``discont`` (period/2) along ``axis`` replaced by their
    ``period`` complement (NumPy's np.unwrap)."""
    p = _traced(p)
    x = _convert(p, "float64") if not is_inexact(p.aval.dtype) else p
    ax = _norm_axis(axis, x.ndim, "unwrap")
    dd = diff(x, axis=ax)
    discont = period / 2 if discont is None else discont
    half = period / 2
    ddmod = subtract(remainder(add(dd, half), period), half)
    ddmod = where(logical_and(equal(ddmod, -half), greater(dd, 0)), half, ddmod)
    correction = where(less(_abs(dd), discont), 0.0, subtract(ddmod, dd))
    idx = [slice(None)] * x.ndim
    idx[ax] = slice(0, 1)
    rest = [slice(None)] * x.ndim
    rest[ax] = slice(1, None)
    return concatenate([x[tuple(idx)], add(x[tuple(rest)], cumsum(correction, axis=ax))], axis=ax)

