"""tidu.numpy reductions over axes: sum, prod, max, min, mean, all, any, the statistics
built on them (var, std, average, ptp, logsumexp), their nan-ignoring variants and
argmax / argmin."""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np

from tidu.core.keys import HALF_DTYPES, is_complex, is_inexact, is_integer
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
    imag,
    less_equal,
    log,
    maximum,
    multiply,
    negative,
    not_equal,
    real,
    sign,
    sqrt,
    subtract,
    where,
)
from tidu.numpy._shapes import broadcast_to, concatenate, moveaxis, ravel, reshape
from tidu.numpy._ufuncs import isclose, isnan, logical_and, logical_not, logical_or
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


def _one_hot_sum(x: Tracer, hit: Any, axis: int) -> Tracer:
    """The one entry of ``x`` along ``axis`` (negative) where ``hit`` holds, in ``x``'s
    dtype (``hit`` and ``x`` broadcast together): a one-hot selection, as sorting, ``take``
    and ``take_along_axis`` pick. Floats are added in log2(n) exact halving steps with
    -0.0 elsewhere, so the picked value keeps its bits (-0.0 too; a reduction's +0.0
    start would make it 0.0) and its tangent; integers and bools are summed."""
    dtype = x.aval.dtype
    if not is_inexact(dtype):
        r = sum(where(hit, x, np.zeros((), dtype)), axis=axis)
        return r if r.aval.dtype == dtype else _convert(r, dtype)
    neg_zero = np.negative(np.zeros((), dtype))  # -0.0 (-0.0-0.0j): v + -0.0 is v, -0.0 too
    terms = where(hit, x, neg_zero)
    terms = moveaxis(terms, axis, -1) if axis != -1 else terms
    n = terms.shape[-1]
    if n == 0:
        return broadcast_to(terms.trace.constant(neg_zero), terms.shape[:-1])
    while n > 1:
        if n % 2:
            pad = broadcast_to(terms.trace.constant(neg_zero), (*terms.shape[:-1], 1))
            terms = concatenate([terms, pad], axis=-1)
            n += 1
        terms = add(terms[..., : n // 2], terms[..., n // 2:])
        n //= 2
    return reshape(terms, terms.shape[:-1])


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


def _numpy_keywords(fn: Any, *names: str) -> Any:
    """NumPy's ``fn`` called without the keywords ``names`` where they are None (tidu's
    defaults; NumPy's own are sentinels: ``where=None`` is not ``where=True``)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        for name in names:
            if name in kwargs and kwargs[name] is None:
                del kwargs[name]
        return fn(*args, **kwargs)

    call.__name__ = fn.__name__
    return call


def _no_out(out: Any, name: str) -> None:
    if out is not None:
        raise TypeError(f"tnp.{name}: out= is not supported (traced values are immutable); use the result")


def _masked(x: Any, where_: Any, fill: Any) -> Any:
    """``x`` with ``fill`` where the mask ``where_`` (None: everywhere) is false: what a
    reduction with NumPy's ``where=`` reduces."""
    if where_ is None or where_ is True:
        return x
    return where(where_, x, np.asarray(fill, x.aval.dtype))


def _counted(x: Tracer, axis: Axis, keepdims: bool, where_: Any, name: str) -> Any:
    """The number of elements each reduction over ``axis`` takes (where ``where_`` holds):
    an int, or an int64 array (traced when the mask is)."""
    if where_ is None or where_ is True:
        return _count(x, axis, name)
    mask = broadcast_to(where_, x.shape) if isinstance(where_, Tracer) else np.broadcast_to(where_, x.shape)
    return sum(mask, axis=axis, keepdims=keepdims)


def _lowest(dtype: str) -> Any:
    """The identity of max in ``dtype``: -inf, the least integer, or False."""
    if dtype == "bool":
        return False
    return -np.inf if is_inexact(dtype) else np.iinfo(dtype).min


@numpy_fallback(_numpy_keywords(np.sum, "initial", "where"), nested=True, accumulates=True)
def sum(x: ArrayLike, axis: Axis = None, dtype: Any = None, out: Any = None,  # noqa: A001
        keepdims: bool = False, initial: Any = None, where: Any = None) -> Any:
    """Sum over ``axis`` (of the elements where ``where`` holds, plus ``initial``); bools and
    narrow integers are summed as int64 (uint64), as NumPy; ``dtype=bool`` is a logical or."""
    _no_out(out, "sum")
    x = _accumulating(x, dtype)
    r = _reduce("reduce_sum", "sum", _masked(x, where, 0), axis, keepdims)
    r = r if initial is None else _convert(add(r, initial), r.aval.dtype)
    return _convert(r, "bool") if x.aval.dtype == "bool" else r  # (a count, > 0 where any)


@numpy_fallback(_numpy_keywords(np.prod, "initial", "where"), nested=True, accumulates=True)
def prod(x: ArrayLike, axis: Axis = None, dtype: Any = None, out: Any = None,
         keepdims: bool = False, initial: Any = None, where: Any = None) -> Any:
    """Product over ``axis`` (of the elements where ``where`` holds, times ``initial``);
    bools and narrow integers are multiplied as int64 (uint64), as NumPy; ``dtype=bool`` is a
    logical and."""
    _no_out(out, "prod")
    x = _accumulating(x, dtype)
    r = _reduce("reduce_prod", "prod", _masked(x, where, 1), axis, keepdims)
    r = r if initial is None else _convert(multiply(r, initial), r.aval.dtype)
    return _convert(r, "bool") if x.aval.dtype == "bool" else r  # (a product of 0s and 1s)


@numpy_fallback(_numpy_keywords(np.max, "initial", "where"), nested=True)
def max(x: ArrayLike, axis: Axis = None, out: Any = None, keepdims: bool = False,  # noqa: A001
        initial: Any = None, where: Any = None) -> Any:
    """The largest element over ``axis`` (of those where ``where`` holds, and ``initial``:
    NumPy needs it with ``where``, as max has no identity; over an axis of size 0 too)."""
    _no_out(out, "max")
    x = _traced(x)
    if initial is None:
        _refuse_empty(x, axis, "max", "zero-size array to reduction operation maximum which has no identity")
    return _max(x, axis, keepdims, initial, where)


def _max(x: Tracer, axis: Axis, keepdims: bool, initial: Any, where: Any) -> Any:
    """``max`` without its check for empty axes (over none it is the dtype's lowest value:
    what ``logsumexp`` of nothing, -inf, is built on)."""
    if is_complex(x.aval.dtype):
        return _complex_extreme("max", x, axis, keepdims, initial, where)
    if where is not None and where is not True and initial is None:
        raise ValueError("tnp.max: the maximum has no identity, so where= needs initial= (as in NumPy)")
    if x.aval.dtype == "bool":
        r = any(x, axis=axis, keepdims=keepdims, where=where)
        return r if initial is None else logical_or(r, bool(initial))
    r = _reduce("reduce_max", "max", _masked(x, where, _lowest(x.aval.dtype)), axis, keepdims)
    if initial is None:
        return r
    return _convert(maximum(r, initial), r.aval.dtype)


@numpy_fallback(_numpy_keywords(np.min, "initial", "where"), nested=True)
def min(x: ArrayLike, axis: Axis = None, out: Any = None, keepdims: bool = False,  # noqa: A001
        initial: Any = None, where: Any = None) -> Any:
    """The smallest element over ``axis`` (see ``max``)."""
    _no_out(out, "min")
    x = _traced(x)
    if initial is None:
        _refuse_empty(x, axis, "min", "zero-size array to reduction operation minimum which has no identity")
    if is_complex(x.aval.dtype):
        return _complex_extreme("min", x, axis, keepdims, initial, where)
    if where is not None and where is not True and initial is None:
        raise ValueError("tnp.min: the minimum has no identity, so where= needs initial= (as in NumPy)")
    if x.aval.dtype == "bool":
        r = all(x, axis=axis, keepdims=keepdims, where=where)
        return r if initial is None else logical_and(r, bool(initial))
    if initial is not None:
        initial = np.asarray(initial, x.aval.dtype)
        initial = ~initial if is_integer(x.aval.dtype) else -initial
    return _flip_order(_max(_flip_order(x), axis, keepdims, initial, where))


def minmax(a: ArrayLike, axis: Axis = None, out: Any = None, keepdims: bool = False, initial: Any = None,
           where: Any = None) -> tuple[Any, Any]:
    """``(min, max)`` over ``axis``, as ``jax.numpy.minmax``: ``initial`` is both bounds, or a
    pair (the largest the minimum may be, the smallest the maximum may be); ``where`` needs
    ``initial``."""
    _no_out(out, "minmax")
    low, high = initial if isinstance(initial, tuple) else (initial, initial)
    return (min(a, axis=axis, keepdims=keepdims, initial=low, where=where),
            max(a, axis=axis, keepdims=keepdims, initial=high, where=where))


def _complex_extreme(name: str, x: Tracer, axis: Axis, keepdims: bool, initial: Any, where_: Any) -> Tracer:
    """max / min of complex values in NumPy's (and JAX's) lexicographic order, the real
    parts first: the element at ``argmax`` (``argmin``), picked whole (its tangent too)."""
    if initial is not None or (where_ is not None and where_ is not True):
        raise TypeError(f"tnp.{name} of complex values takes no initial= or where=; select the elements first")
    axes = _norm_axes(axis, x.ndim, name)
    if not axes:
        return x
    moved = moveaxis(x, axes, tuple(range(x.ndim - len(axes), x.ndim)))
    flat = reshape(moved, (*moved.shape[:moved.ndim - len(axes)], -1)) if len(axes) != 1 else moved
    if flat.shape[-1] == 0:
        raise ValueError(f"tnp.{name}: zero-size array to reduction operation {name}imum which has no identity")
    first = _complex_arg("argmax" if name == "max" else "argmin", flat, flat.ndim - 1, True)
    picked = _one_hot_sum(flat, equal(np.arange(flat.shape[-1]), first), -1)
    return reshape(picked, _kept(x.shape, axes)) if keepdims else picked


def _complex_arg(name: str, x: Tracer, ax: int, keepdims: bool) -> Tracer:
    """argmax / argmin of complex values, lexicographically (the real parts, then the
    imaginary ones), the first nan (in either part) where there is one: NumPy's."""
    re, im = real(x), imag(x)
    if name == "argmin":
        re, im = negative(re), negative(im)
    bad = logical_or(isnan(re), isnan(im))
    top_re = max(where(bad, -np.inf, re), axis=ax, keepdims=True)
    tied = logical_and(equal(re, top_re), logical_not(bad))
    top_im = max(where(tied, im, -np.inf), axis=ax, keepdims=True)
    hit = where(any(bad, axis=ax, keepdims=True), bad, logical_and(tied, equal(im, top_im)))
    n = x.shape[ax]
    iota = np.arange(n).reshape([n if i == ax else 1 for i in range(x.ndim)])
    return min(where(hit, iota, n), axis=ax, keepdims=keepdims)


def _flip_order(x: Tracer) -> Tracer:
    """An order-reversing bijection: -x for floats, ~x (= -x - 1, no overflow) for integers."""
    return invert(x) if is_integer(x.aval.dtype) else negative(x)


amax, amin = max, min


def _refuse_empty(x: Tracer, axis: Axis, name: str, message: str) -> None:
    """NumPy's and JAX's ValueError where a reduction without identity (max, argmax, ...)
    reduces an axis of size 0: traced, it would give -inf, inf or a meaningless index."""
    if builtins.any(x.shape[a] == 0 for a in _norm_axes(axis, x.ndim, name)):
        raise ValueError(f"tnp.{name}: {message} (an axis of size 0 is reduced)")


def _count(x: Tracer, axis: Axis, name: str) -> int:
    return math.prod(x.shape[a] for a in _norm_axes(axis, x.ndim, name))


def _as_dtype(n: Any, like: Tracer) -> Any:
    """A count ``n`` (int, array or tracer) as a value of ``like``'s dtype (a Python float
    for an int: weakly typed)."""
    if isinstance(n, int | float):
        return float(n)
    dtype = real(like).aval.dtype if is_complex(like.aval.dtype) else like.aval.dtype
    return astype(n, dtype) if isinstance(n, Tracer) else np.asarray(n, dtype)


@numpy_fallback(_numpy_keywords(np.mean, "where"), nested=True, accumulates=True)
def mean(x: ArrayLike, axis: Axis = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
         *, where: Any = None) -> Any:
    """The mean over ``axis`` (of the elements where ``where`` holds), in ``dtype`` if given
    (an integer one: the sum in it divided as a float and truncated, as NumPy)."""
    _no_out(out, "mean")
    x = _traced(x)
    x = astype(x, dtype) if dtype is not None else _inexact(x)  # integers are summed as floats: no overflow
    x, half = _widened(x)
    n = _counted(x, axis, keepdims, where, "mean")
    r = _narrowed(divide(sum(x, axis=axis, keepdims=keepdims, where=where), _as_dtype(n, x)), half)
    return r if r.aval.dtype == x.aval.dtype or half is not None else astype(r, x.aval.dtype)


@numpy_fallback(_numpy_keywords(np.all, "where"), nested=True)
def all(x: ArrayLike, axis: Axis = None, out: Any = None, keepdims: bool = False,  # noqa: A001
        *, where: Any = None) -> Any:
    """Whether every element (along ``axis``, where ``where`` holds) is nonzero."""
    _no_out(out, "all")
    x = _traced(x)
    return logical_not(any(logical_not(x), axis=axis, keepdims=keepdims, where=where))


@numpy_fallback(_numpy_keywords(np.any, "where"), nested=True)
def any(x: ArrayLike, axis: Axis = None, out: Any = None, keepdims: bool = False,  # noqa: A001
        *, where: Any = None) -> Any:
    """Whether some element (along ``axis``, where ``where`` holds) is nonzero."""
    _no_out(out, "any")
    x = _traced(x)
    nonzero = x if x.aval.dtype == "bool" else not_equal(x, 0)
    hits = _reduce("reduce_max", "any", _masked(_convert(nonzero, "int32"), where, 0), axis, keepdims)
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
    _refuse_empty(x, axis, "ptp", "zero-size array to reduction operation maximum which has no identity")
    return subtract(max(x, axis=axis, keepdims=keepdims), min(x, axis=axis, keepdims=keepdims))


# --- statistics ---------------------------------------------------------------------------


def _inexact(x: Tracer) -> Tracer:
    return x if is_inexact(x.aval.dtype) else _convert(x, "float64")


def _widened(x: Tracer) -> tuple[Tracer, str | None]:
    """A float16 or bfloat16 ``x`` in float32, and its dtype (else ``x`` and None): sums,
    scans and statistics are computed in float32 and rounded once (``_narrowed``), as JAX's."""
    half = x.aval.dtype if x.aval.dtype in HALF_DTYPES else None
    return (x, None) if half is None else (_convert(x, "float32"), half)


def _narrowed(x: Tracer, half: str | None) -> Tracer:
    return x if half is None else _convert(x, half)


def _inexact_dtype(x: Tracer, dtype: Any, name: str) -> Tracer:
    """``x`` in ``dtype`` (integers: in float64) for a variance; an integer ``dtype`` is
    refused: NumPy's truncates the mean and each square to it, JAX's ignores it."""
    if dtype is None:
        return _inexact(x)
    x = astype(x, dtype)
    if not is_inexact(x.aval.dtype):
        raise TypeError(f"tnp.{name}: dtype={x.aval.dtype} is not a float or complex dtype: traced, a "
                        "variance is computed in one; give dtype=float64 (or leave it out) and convert the result")
    return x


def _ddof(ddof: Any, correction: Any, name: str) -> Any:
    if correction is None:
        return ddof
    if ddof != 0:
        raise ValueError(f"tnp.{name}: give ddof or correction, not both")
    return correction


@numpy_fallback(_numpy_keywords(np.var, "where", "correction"), nested=True, accumulates=True)
def var(x: ArrayLike, axis: Axis = None, dtype: Any = None, out: Any = None, ddof: int = 0,
        keepdims: bool = False, *, where: Any = None, correction: Any = None) -> Any:
    """Variance: mean(|x - mean(x)|^2) over ``axis`` (the elements where ``where`` holds),
    divided by N - ddof instead of N (``correction`` is the array API's name of ddof)."""
    _no_out(out, "var")
    ddof = _ddof(ddof, correction, "var")
    x = _inexact_dtype(_traced(x), dtype, "var")
    x, half = _widened(x)
    centered = subtract(x, mean(x, axis=axis, keepdims=True, where=where))
    sq = real(multiply(centered, centered.conj())) if is_complex(x.aval.dtype) else multiply(centered, centered)
    total = sum(sq, axis=axis, keepdims=keepdims, where=where)
    n = _counted(x, axis, keepdims, where, "var")
    # NumPy divides by max(N - ddof, 0): inf (or nan) when ddof >= N
    if isinstance(n, int):
        return _narrowed(divide(total, float(builtins.max(n - ddof, 0))), half)
    return _narrowed(divide(total, _as_dtype(maximum(subtract(n, ddof), 0), total)), half)


@numpy_fallback(_numpy_keywords(np.std, "where", "correction"), nested=True, accumulates=True)
def std(x: ArrayLike, axis: Axis = None, dtype: Any = None, out: Any = None, ddof: int = 0,
        keepdims: bool = False, *, where: Any = None, correction: Any = None) -> Any:
    """Standard deviation: sqrt(var(x)). Over a single element (an axis of size 1, or one
    element left by ``where``) it is var itself: identically 0 (nan for a nan, or N - ddof
    <= 0), so its derivative is 0 and not sqrt's 0/0 at 0. Where more values are all equal
    the derivative is nan, as in JAX: std grows like |t| along x + t v there, so it has none."""
    _no_out(out, "std")
    x = _traced(x)
    v = var(x, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, where=where, correction=correction)
    return _root_of_variance(v, _counted(x, axis, keepdims, where, "std"))


@numpy_fallback(np.average, "a", "weights", nested=True, accumulates=True)
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
        if _shape(w)[0] != _shape(a)[ax]:
            raise ValueError(f"tnp.average: {_shape(w)[0]} weights for axis {axis} of size {_shape(a)[ax]}; "
                             "give one weight per element along the axis (as NumPy)")
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


@numpy_fallback(_scipy_logsumexp, "a", "b", nested=True, accumulates=True)
def logsumexp(a: ArrayLike, axis: Axis = None, b: ArrayLike | None = None, keepdims: bool = False,
              return_sign: bool = False) -> Any:
    """log(sum(b exp(a))) over ``axis`` without overflow: m + log(sum(b exp(a - m))), m = max(a)
    (as ``jax.scipy.special.logsumexp``; the derivative is the softmax)."""
    a = _traced(a)
    a = _inexact(asarray(a)) if isinstance(a, Tracer) else _prep(_trace_of((a, b)), a, "float64")
    if is_complex(a.aval.dtype):  # shifted by the largest real part (SciPy's and JAX's)
        m = _max(real(a), axis, True, None, None)
        m = where(logical_or(isnan(m), equal(abs(m), np.inf)), 0.0, m)
        e = exp(subtract(a, m))
        s = sum(e if b is None else multiply(e, b), axis=axis, keepdims=True)
        out = add(log(s), m)
        out = out if keepdims else reshape(out, _shape(sum(a, axis=axis)))
        # with return_sign, log |sum| and the phase sum / |sum| (SciPy's and JAX's)
        return (real(out), exp(multiply(1j, imag(out)))) if return_sign else out
    # a term with b = 0 adds nothing, whatever its a (inf, nan, or far above the others): the
    # shift is the largest a of the terms that count (SciPy's and JAX's), and such a term's
    # exponent is clipped below overflow, so that its 0 * exp is 0 and the derivative in its
    # b, exp(a - m) / s, is exact where it is finite (JAX's, which drops a there, gives 0)
    kept = None if b is None else not_equal(b, 0)
    m = _max(a if kept is None else where(kept, a, -np.inf), axis, True, None, None)
    m = where(logical_or(isnan(m), equal(abs(m), np.inf)), 0.0, m)  # -inf over nothing: a sum of 0
    # the shift cancels: held constant (as JAX's), the derivative is the softmax alone, not
    # also its sum's difference from 1 times the max's tie weights (16 ops more in a gradient)
    m = m.trace.emit("stop_gradient", [m])
    t = subtract(a, m)
    if kept is not None:
        top = math.floor(math.log(float(ml_dtypes.finfo(t.aval.dtype).max)))  # exp(top) is finite
        t = where(kept, t, where(less_equal(t, top), t, top))
    e = exp(t)
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


_pick = where  # the reductions' where= keyword hides the function in their bodies


def _selected(ok: Tracer, mask: Any) -> Tracer:
    """The elements a nan-ignoring reduction takes: not nan and, with ``where=``, selected."""
    return ok if mask is None or mask is True else logical_and(ok, mask)


@numpy_fallback(_numpy_keywords(np.nansum, "initial", "where"), nested=True, accumulates=True)
def nansum(x: ArrayLike, axis: Axis = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
           initial: Any = None, where: Any = None) -> Any:
    """sum with nan counted as 0 (``sum`` for integers and bools: they hold no nan)."""
    _no_out(out, "nansum")
    x = _traced(x)
    x = _zero_nans(x, 0.0) if is_inexact(x.aval.dtype) else x
    return sum(x, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)


@numpy_fallback(_numpy_keywords(np.nanprod, "initial", "where"), nested=True, accumulates=True)
def nanprod(x: ArrayLike, axis: Axis = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
            initial: Any = None, where: Any = None) -> Any:
    """prod with nan counted as 1 (``prod`` for integers and bools)."""
    _no_out(out, "nanprod")
    x = _traced(x)
    x = _zero_nans(x, 1.0) if is_inexact(x.aval.dtype) else x
    return prod(x, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)


@numpy_fallback(_numpy_keywords(np.nanmean, "where"), nested=True, accumulates=True)
def nanmean(x: ArrayLike, axis: Axis = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
            *, where: Any = None) -> Any:
    """mean of the elements that are not nan (and where ``where`` holds); nan where there
    are none."""
    _no_out(out, "nanmean")
    x = _traced(x)
    if dtype is not None and not is_inexact(x.aval.dtype):  # no nans: mean's (integer dtypes too)
        return mean(x, axis=axis, dtype=dtype, keepdims=keepdims, where=where)
    x = astype(x, dtype) if dtype is not None else _inexact(x)
    if not is_inexact(x.aval.dtype):
        raise TypeError("tnp.nanmean: If a is inexact, then dtype must be inexact (as NumPy)")
    x, half = _widened(x)
    count = sum(_selected(logical_not(isnan(x)), where), axis=axis, keepdims=keepdims)
    return _narrowed(divide(nansum(x, axis=axis, keepdims=keepdims, where=where), _as_dtype(count, x)), half)


@numpy_fallback(_numpy_keywords(np.nanmax, "initial", "where"), nested=True)
def nanmax(x: ArrayLike, axis: Axis = None, out: Any = None, keepdims: bool = False, initial: Any = None,
           where: Any = None) -> Any:
    """max of the elements that are not nan (and where ``where`` holds, with ``initial``):
    nan where there are none and no ``initial``; ``max`` for integers and bools, in their
    dtype."""
    _no_out(out, "nanmax")
    x = _traced(x)
    if initial is None:
        _refuse_empty(x, axis, "nanmax", "zero-size array to reduction operation fmax which has no identity")
    if not is_inexact(x.aval.dtype):
        return max(x, axis=axis, keepdims=keepdims, initial=initial, where=where)
    out = max(_zero_nans(x, -np.inf), axis=axis, keepdims=keepdims, initial=initial, where=where)
    if initial is not None:  # NumPy's fmax.reduce: initial stands where every element is nan
        return out
    none = logical_not(any(_selected(logical_not(isnan(x)), where), axis=axis, keepdims=keepdims))
    return _pick(none, np.nan, out)


@numpy_fallback(_numpy_keywords(np.nanmin, "initial", "where"), nested=True)
def nanmin(x: ArrayLike, axis: Axis = None, out: Any = None, keepdims: bool = False, initial: Any = None,
           where: Any = None) -> Any:
    """min of the elements that are not nan (see ``nanmax``)."""
    _no_out(out, "nanmin")
    x = _traced(x)
    if initial is None:
        _refuse_empty(x, axis, "nanmin", "zero-size array to reduction operation fmin which has no identity")
    if not is_inexact(x.aval.dtype):
        return min(x, axis=axis, keepdims=keepdims, initial=initial, where=where)
    neg_initial = None if initial is None else -np.asarray(initial, x.aval.dtype)
    return negative(nanmax(negative(x), axis=axis, keepdims=keepdims, initial=neg_initial, where=where))


@numpy_fallback(_numpy_keywords(np.nanvar, "where", "correction"), nested=True, accumulates=True)
def nanvar(x: ArrayLike, axis: Axis = None, dtype: Any = None, out: Any = None, ddof: int = 0,
           keepdims: bool = False, *, where: Any = None, correction: Any = None) -> Any:
    """var of the elements that are not nan (and where ``where`` holds); nan where
    N - ddof <= 0 (N: their number), as NumPy."""
    _no_out(out, "nanvar")
    ddof = _ddof(ddof, correction, "nanvar")
    x = _inexact_dtype(_traced(x), dtype, "nanvar")
    x, half = _widened(x)
    ok = _selected(logical_not(isnan(x)), where)
    centered = _pick(ok, subtract(x, nanmean(x, axis=axis, keepdims=True, where=where)), 0.0)
    sq = real(multiply(centered, centered.conj())) if is_complex(x.aval.dtype) else multiply(centered, centered)
    dof = subtract(sum(ok, axis=axis, keepdims=keepdims), ddof)
    bad = less_equal(dof, 0)
    out = divide(sum(sq, axis=axis, keepdims=keepdims), _pick(bad, 1, dof))  # no 1/0 in the gradient
    return _narrowed(_pick(bad, np.nan, out), half)


@numpy_fallback(_numpy_keywords(np.nanstd, "where", "correction"), nested=True, accumulates=True)
def nanstd(x: ArrayLike, axis: Axis = None, dtype: Any = None, out: Any = None, ddof: int = 0,
           keepdims: bool = False, *, where: Any = None, correction: Any = None) -> Any:
    """std of the elements that are not nan (over a single one, nans or ``where`` leaving
    one: nanvar, as in ``std``)."""
    x = _traced(x)
    v = nanvar(x, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, where=where,
               correction=correction)
    if _count(x, axis, "nanstd") == 1 and (where is None or where is True):
        return v
    if not is_inexact(x.aval.dtype):  # (no nans: the count is where's)
        return _root_of_variance(v, _counted(x, axis, keepdims, where, "nanstd"))
    return _root_of_variance(v, sum(_selected(logical_not(isnan(x)), where), axis=axis, keepdims=keepdims))


def _root_of_variance(v: Tracer, n: Any) -> Tracer:
    """std from var ``v`` over ``n`` elements per slice (an int, a constant array or a
    traced count): where a slice has one element, std is identically 0 (or nan), so it is
    ``v`` itself (derivative 0), and sqrt is given 1 there (its derivative at 0 is inf,
    and 0 * inf is nan even in the branch not taken)."""
    if isinstance(n, int):
        return v if n == 1 else sqrt(v)
    if not isinstance(n, Tracer):
        one = np.asarray(n) == 1
        if not one.any():
            return sqrt(v)
        if one.all():
            return v
    else:
        one = equal(n, 1)
    return _pick(one, v, sqrt(_pick(one, 1.0, v)))


# --- argmax / argmin ---------------------------------------------------------------------


def _arg_extreme(name: str, x: Any, axis: int | None, keepdims: bool) -> Any:
    x = _traced(x)
    _refuse_empty(x, axis, name, f"attempt to get {name} of an empty sequence")
    if axis is None:
        out = _arg_extreme(name, ravel(x), 0, False)
        return reshape(out, (1,) * x.ndim) if keepdims else out
    ax = _norm_axis(axis, x.ndim, name)
    if is_complex(x.aval.dtype):
        return _complex_arg(name, x, ax, keepdims)
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
    _refuse_empty(x, axis, "nanargmax", "attempt to get argmax of an empty sequence")
    return _all_nan_to_minus_one(x, argmax(_zero_nans(x, -np.inf), axis=axis, keepdims=keepdims), axis, keepdims)


@numpy_fallback(np.nanargmin, nested=True)
def nanargmin(x: ArrayLike, axis: int | None = None, keepdims: bool = False) -> Any:
    """argmin ignoring nan; -1 where every element is nan (as JAX; NumPy raises, as the
    eager call does)."""
    x = _traced(x)
    _refuse_empty(x, axis, "nanargmin", "attempt to get argmin of an empty sequence")
    return _all_nan_to_minus_one(x, argmin(_zero_nans(x, np.inf), axis=axis, keepdims=keepdims), axis, keepdims)


def _all_nan_to_minus_one(x: Any, index: Any, axis: int | None, keepdims: bool) -> Any:
    if not is_inexact(x.aval.dtype):
        return index
    return where(all(isnan(x), axis=axis, keepdims=keepdims), -1, index)
