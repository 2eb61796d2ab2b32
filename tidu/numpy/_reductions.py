"""tidu.numpy reductions over axes: sum, prod, max, min, mean, all, any, the statistics
built on them (var, std, average, ptp, logsumexp), their nan-ignoring variants and
argmax / argmin."""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tidu.core.keys import is_complex, is_inexact, is_integer
from tidu.numpy._bitwise import invert
from tidu.numpy._casting import asarray, astype
from tidu.numpy._core import (
    ArrayLike,
    _convert,
    _leaves,
    _norm_axes,
    _norm_axis,
    _prep,
    _shape,
    _trace_of,
    numpy_fallback,
)
from tidu.numpy._elementwise import (
    abs,
    add,
    divide,
    equal,
    exp,
    greater,
    less_equal,
    log,
    multiply,
    negative,
    not_equal,
    real,
    sign,
    sqrt,
    subtract,
    where,
)
from tidu.numpy._shapes import broadcast_to, ravel, reshape
from tidu.numpy._ufuncs import isclose, isnan, logical_not, logical_or
from tidu.trace.tracing import Tracer

Axis = int | Sequence[int] | None


def _traced(x: Any) -> Any:
    """A list or tuple holding traced values becomes one traced array (``tnp.asarray``)."""
    if isinstance(x, list | tuple) and _trace_of(_leaves(x)) is not None:
        return asarray(x)
    return x


def _reduce(op: str, name: str, x: Any, axis: Any, keepdims: bool) -> Any:
    x = _traced(x)
    x.check_alive()
    axes = _norm_axes(axis, x.ndim, name)
    if x.aval.dtype == "bool":
        x = _convert(x, "int64")
    out = x.trace.emit(op, [x], {"axes": axes}) if axes else x
    if keepdims:
        out = reshape(out, _kept(x.shape, axes))
    return out


def _kept(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


_WIDE = {"bool": "int64", "int8": "int64", "int16": "int64", "int32": "int64",
         "uint8": "uint64", "uint16": "uint64", "uint32": "uint64"}


def _accumulating(x: Any, dtype: Any) -> Any:
    """``x`` in the dtype a sum or product accumulates in: ``dtype`` if given, else bools
    and integers narrower than 64 bits widened to int64 (uint64 for unsigned ones), as
    NumPy (and JAX's ``promote_integers``) do; other dtypes are kept."""
    x = _traced(x)
    if dtype is not None:
        return astype(x, dtype)
    x.check_alive()
    return _convert(x, _WIDE.get(x.aval.dtype, x.aval.dtype))


@numpy_fallback(np.sum, nested=True)
def sum(x: ArrayLike, axis: Axis = None, keepdims: bool = False, dtype: Any = None) -> Any:  # noqa: A001
    """Sum over ``axis``; bools and narrow integers are summed as int64 (uint64), as NumPy."""
    return _reduce("reduce_sum", "sum", _accumulating(x, dtype), axis, keepdims)


@numpy_fallback(np.prod, nested=True)
def prod(x: ArrayLike, axis: Axis = None, keepdims: bool = False, dtype: Any = None) -> Any:
    """Product over ``axis``; bools and narrow integers are multiplied as int64 (uint64), as NumPy."""
    return _reduce("reduce_prod", "prod", _accumulating(x, dtype), axis, keepdims)


@numpy_fallback(np.max, nested=True)
def max(x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Any:  # noqa: A001
    x = _traced(x)
    if is_complex(x.aval.dtype):
        raise TypeError("tnp.max is not defined for complex values")
    if x.aval.dtype == "bool":
        return any(x, axis=axis, keepdims=keepdims)
    return _reduce("reduce_max", "max", x, axis, keepdims)


@numpy_fallback(np.min, nested=True)
def min(x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Any:  # noqa: A001
    x = _traced(x)
    if x.aval.dtype == "bool":
        return all(x, axis=axis, keepdims=keepdims)
    return _flip_order(max(_flip_order(x), axis=axis, keepdims=keepdims))


def _flip_order(x: Tracer) -> Tracer:
    """An order-reversing bijection: -x for floats, ~x (= -x - 1, no overflow) for integers."""
    return invert(x) if is_integer(x.aval.dtype) else negative(x)


amax, amin = max, min


def _count(x: Tracer, axis: Axis, name: str) -> int:
    return math.prod(x.shape[a] for a in _norm_axes(axis, x.ndim, name))


@numpy_fallback(np.mean, nested=True)
def mean(x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Any:
    x = _inexact(_traced(x))  # integers are summed as floats, as NumPy: no overflow
    return divide(sum(x, axis=axis, keepdims=keepdims), float(_count(x, axis, "mean")))


@numpy_fallback(np.all, nested=True)
def all(x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Whether every element (along ``axis``) is nonzero."""
    x = _traced(x)
    return logical_not(any(logical_not(x), axis=axis, keepdims=keepdims))


@numpy_fallback(np.any, nested=True)
def any(x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Whether some element (along ``axis``) is nonzero."""
    x = _traced(x)
    nonzero = x if x.aval.dtype == "bool" else not_equal(x, 0)
    hits = _reduce("reduce_max", "any", _convert(nonzero, "int32"), axis, keepdims)
    return greater(hits, 0)  # an empty max is the lowest int32: false


@numpy_fallback(np.allclose, "a", "b")
def allclose(a: ArrayLike, b: ArrayLike, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> Any:
    """Whether ``isclose`` holds everywhere (a traced bool scalar for traced inputs)."""
    return all(isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


@numpy_fallback(np.count_nonzero, nested=True)
def count_nonzero(x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Any:
    """The number of nonzero elements (along ``axis``)."""
    x = _traced(x)
    return sum(not_equal(x, 0), axis=axis, keepdims=keepdims)


@numpy_fallback(np.ptp, nested=True)
def ptp(x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Any:
    """max - min (along ``axis``)."""
    x = _traced(x)
    return subtract(max(x, axis=axis, keepdims=keepdims), min(x, axis=axis, keepdims=keepdims))


# --- statistics ---------------------------------------------------------------------------


def _inexact(x: Tracer) -> Tracer:
    return x if is_inexact(x.aval.dtype) else _convert(x, "float64")


@numpy_fallback(np.var, nested=True)
def var(x: ArrayLike, axis: Axis = None, ddof: int = 0, keepdims: bool = False) -> Any:
    """Variance: mean(|x - mean(x)|^2) over ``axis``, divided by N - ddof instead of N."""
    x = _traced(x)
    x = _inexact(x)
    centered = subtract(x, mean(x, axis=axis, keepdims=True))
    sq = real(multiply(centered, centered.conj())) if is_complex(x.aval.dtype) else multiply(centered, centered)
    # NumPy divides by max(N - ddof, 0): inf (or nan) when ddof >= N
    return divide(sum(sq, axis=axis, keepdims=keepdims), float(builtins.max(_count(x, axis, "var") - ddof, 0)))


@numpy_fallback(np.std, nested=True)
def std(x: ArrayLike, axis: Axis = None, ddof: int = 0, keepdims: bool = False) -> Any:
    """Standard deviation: sqrt(var(x)). Over a single element (an axis of size 1) it is var
    itself: identically 0 (nan for a nan, or N - ddof <= 0), so its derivative is 0 and not
    sqrt's 0/0 at 0. Where more values are all equal the derivative is nan, as in JAX: std
    grows like |t| along x + t v there, so it has none."""
    x = _traced(x)
    v = var(x, axis=axis, ddof=ddof, keepdims=keepdims)
    return v if _count(x, axis, "std") == 1 else sqrt(v)


@numpy_fallback(np.average, "a", "weights", nested=True)
def average(a: ArrayLike, axis: Axis = None, weights: ArrayLike | None = None, returned: bool = False,
            keepdims: bool = False) -> Any:
    """Weighted mean sum(a w) / sum(w) over ``axis`` (1-D weights go along a single axis)."""
    a = _traced(a)
    if weights is None:
        avg = mean(a, axis=axis, keepdims=keepdims)
        total = float(_count(a, axis, "average")) if isinstance(a, Tracer) else float(np.size(a))
        return (avg, broadcast_to(total, _shape(avg))) if returned else avg
    w = weights
    # integers are weighted and summed as floats, as NumPy: no overflow
    if isinstance(a, Tracer):
        a = _inexact(a)
    elif not is_inexact(np.asarray(a).dtype):
        a = np.asarray(a, dtype=np.float64)
    if _shape(w) != _shape(a):
        if axis is None or not isinstance(axis, int) or len(_shape(w)) != 1:
            raise ValueError(f"tnp.average: weights of shape {_shape(w)} differ from a's {_shape(a)}; "
                             "give one axis with 1-D weights, or weights shaped like a")
        ax = _norm_axis(axis, len(_shape(a)), "average")
        shape = [1] * len(_shape(a))
        shape[ax] = _shape(w)[0]
        w = reshape(asarray(w), tuple(shape)) if isinstance(w, Tracer) else np.reshape(w, shape)
    wsum = sum(multiply(w, 1.0) if not isinstance(w, Tracer) else w, axis=axis, keepdims=keepdims)
    wsum = broadcast_to(wsum, _shape(sum(multiply(a, w), axis=axis, keepdims=keepdims)))
    avg = divide(sum(multiply(a, w), axis=axis, keepdims=keepdims), wsum)
    return (avg, wsum) if returned else avg


def _scipy_logsumexp(a: Any, axis: Axis = None, b: Any = None, keepdims: bool = False,
                     return_sign: bool = False) -> Any:
    from scipy.special import logsumexp as sp_logsumexp  # scipy is optional: only for NumPy inputs

    return sp_logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign)


@numpy_fallback(_scipy_logsumexp, "a", "b", nested=True)
def logsumexp(a: ArrayLike, axis: Axis = None, b: ArrayLike | None = None, keepdims: bool = False,
              return_sign: bool = False) -> Any:
    """log(sum(b exp(a))) over ``axis`` without overflow: m + log(sum(b exp(a - m))), m = max(a)
    (as ``jax.scipy.special.logsumexp``; the derivative is the softmax)."""
    a = _traced(a)
    a = _inexact(asarray(a)) if isinstance(a, Tracer) else _prep(_trace_of((a, b)), a, "float64")
    if is_complex(a.aval.dtype):
        raise TypeError("tnp.logsumexp is implemented for real values")
    m = max(a, axis=axis, keepdims=True)
    m = where(logical_or(isnan(m), equal(abs(m), np.inf)), 0.0, m)
    e = exp(subtract(a, m))
    if b is not None:
        e = multiply(e, b)
    s = sum(e, axis=axis, keepdims=True)
    out = add(log(abs(s)) if return_sign else log(s), m)
    if not keepdims:
        out = reshape(out, _shape(sum(a, axis=axis)))
        s = reshape(s, _shape(out))
    return (out, sign(s)) if return_sign else out


# --- nan-ignoring reductions ----------------------------------------------------------------


def _zero_nans(x: Tracer, fill: float) -> Tracer:
    return where(isnan(x), fill, x)


@numpy_fallback(np.nansum, nested=True)
def nansum(x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Any:
    """sum with nan counted as 0 (``sum`` for integers and bools: they hold no nan)."""
    x = _traced(x)
    return sum(_zero_nans(x, 0.0) if is_inexact(x.aval.dtype) else x, axis=axis, keepdims=keepdims)


@numpy_fallback(np.nanprod, nested=True)
def nanprod(x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Any:
    """prod with nan counted as 1 (``prod`` for integers and bools)."""
    x = _traced(x)
    return prod(_zero_nans(x, 1.0) if is_inexact(x.aval.dtype) else x, axis=axis, keepdims=keepdims)


@numpy_fallback(np.nanmean, nested=True)
def nanmean(x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Any:
    """mean of the elements that are not nan."""
    x = _inexact(_traced(x))
    count = sum(logical_not(isnan(x)), axis=axis, keepdims=keepdims)
    return divide(nansum(x, axis=axis, keepdims=keepdims), count)


@numpy_fallback(np.nanmax, nested=True)
def nanmax(x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Any:
    """max of the elements that are not nan (nan where all are; ``max`` for integers and
    bools, in their dtype)."""
    x = _traced(x)
    if not is_inexact(x.aval.dtype):
        return max(x, axis=axis, keepdims=keepdims)
    out = max(_zero_nans(x, -np.inf), axis=axis, keepdims=keepdims)
    return where(all(isnan(x), axis=axis, keepdims=keepdims), np.nan, out)


@numpy_fallback(np.nanmin, nested=True)
def nanmin(x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Any:
    """min of the elements that are not nan (nan where all are; ``min`` for integers and
    bools, in their dtype)."""
    x = _traced(x)
    if not is_inexact(x.aval.dtype):
        return min(x, axis=axis, keepdims=keepdims)
    return negative(nanmax(negative(x), axis=axis, keepdims=keepdims))


@numpy_fallback(np.nanvar, nested=True)
def nanvar(x: ArrayLike, axis: Axis = None, ddof: int = 0, keepdims: bool = False) -> Any:
    """var of the elements that are not nan; nan where N - ddof <= 0 (N: their number), as NumPy."""
    x = _traced(x)
    x = _inexact(x)
    ok = logical_not(isnan(x))
    centered = where(ok, subtract(x, nanmean(x, axis=axis, keepdims=True)), 0.0)
    sq = real(multiply(centered, centered.conj())) if is_complex(x.aval.dtype) else multiply(centered, centered)
    dof = subtract(sum(ok, axis=axis, keepdims=keepdims), ddof)
    bad = less_equal(dof, 0)
    out = divide(sum(sq, axis=axis, keepdims=keepdims), where(bad, 1, dof))  # no 1/0 in the gradient
    return where(bad, np.nan, out)


@numpy_fallback(np.nanstd, nested=True)
def nanstd(x: ArrayLike, axis: Axis = None, ddof: int = 0, keepdims: bool = False) -> Any:
    """std of the elements that are not nan (over a single element: nanvar, as in ``std``)."""
    x = _traced(x)
    v = nanvar(x, axis=axis, ddof=ddof, keepdims=keepdims)
    return v if _count(x, axis, "nanstd") == 1 else sqrt(v)


# --- argmax / argmin ---------------------------------------------------------------------


def _arg_extreme(name: str, x: Any, axis: int | None, keepdims: bool) -> Any:
    x = _traced(x)
    if is_complex(x.aval.dtype):
        raise TypeError(f"tnp.{name} is not defined for complex values")
    if axis is None:
        out = _arg_extreme(name, ravel(x), 0, False)
        return reshape(out, (1,) * x.ndim) if keepdims else out
    ax = _norm_axis(axis, x.ndim, name)
    if x.aval.dtype == "bool":
        x = _convert(x, "int8")
    v = x if name == "argmax" else _flip_order(x)
    m = max(v, axis=ax, keepdims=True)
    hit = logical_or(equal(v, m), isnan(v)) if is_inexact(x.aval.dtype) else equal(v, m)
    n = x.shape[ax]
    iota = np.arange(n).reshape([n if i == ax else 1 for i in range(x.ndim)])
    first = min(where(hit, iota, n), axis=ax, keepdims=keepdims)  # the first hit (first nan)
    return first


@numpy_fallback(np.argmax, nested=True)
def argmax(x: ArrayLike, axis: int | None = None, keepdims: bool = False) -> Any:
    """Index of the (first) maximum along ``axis`` (of the flattened array by default); the
    first nan if there is one."""
    return _arg_extreme("argmax", x, axis, keepdims)


@numpy_fallback(np.argmin, nested=True)
def argmin(x: ArrayLike, axis: int | None = None, keepdims: bool = False) -> Any:
    """Index of the (first) minimum along ``axis`` (of the flattened array by default); the
    first nan if there is one."""
    return _arg_extreme("argmin", x, axis, keepdims)


@numpy_fallback(np.nanargmax, nested=True)
def nanargmax(x: ArrayLike, axis: int | None = None, keepdims: bool = False) -> Any:
    """argmax ignoring nan; -1 where every element is nan (as JAX; NumPy raises, as the
    eager call does)."""
    x = _traced(x)
    return _all_nan_to_minus_one(x, argmax(_zero_nans(x, -np.inf), axis=axis, keepdims=keepdims), axis, keepdims)


@numpy_fallback(np.nanargmin, nested=True)
def nanargmin(x: ArrayLike, axis: int | None = None, keepdims: bool = False) -> Any:
    """argmin ignoring nan; -1 where every element is nan (as JAX; NumPy raises, as the
    eager call does)."""
    x = _traced(x)
    return _all_nan_to_minus_one(x, argmin(_zero_nans(x, np.inf), axis=axis, keepdims=keepdims), axis, keepdims)


def _all_nan_to_minus_one(x: Any, index: Any, axis: int | None, keepdims: bool) -> Any:
    if not is_inexact(x.aval.dtype):
        return index
    return where(all(isnan(x), axis=axis, keepdims=keepdims), -1, index)
