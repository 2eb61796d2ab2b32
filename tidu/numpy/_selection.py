"""tidu.numpy value-dependent selections and integer utilities, as jax.numpy's:
``nonzero``, ``flatnonzero``, ``argwhere``, ``extract``, ``bincount``, ``digitize``,
``histogram``, ``histogram_bin_edges``, ``trim_zeros``, and ``gcd``, ``lcm``, ``frexp``,
``spacing``, ``iscomplex``, ``isreal``, ``array_equal``, ``array_equiv``, ``bitwise_count``.

Eager calls (no traced operand) are NumPy's; with jax.numpy's ``size=`` (``length=`` for
``bincount``) they are truncated or padded as jax.numpy's. Traced calls whose output
size depends on the values need that static size, as jax.numpy under ``jax.jit``. A
traced selection is a one-hot pick of each selected entry (the k-th true entry of the
mask: its running count is k), so derivatives go to the picked entries, as jax.grad of
jax.numpy's gives. Dtypes are NumPy's, eager and traced alike (``digitize`` int64,
``histogram``'s unweighted counts int64, ``bincount``'s weighted ones float64), where
jax.numpy's differ. ``gcd``, ``lcm`` and ``trim_zeros`` take constants only."""

from __future__ import annotations

import builtins
import math
from typing import Any

import ml_dtypes
import numpy as np

from tidu.core.keys import is_complex, is_inexact
from tidu.numpy._bitwise import bitwise_and, bitwise_or, right_shift
from tidu.numpy._casting import asarray, astype
from tidu.numpy._core import ArrayLike, _shape, _trace_of, broadcast_shapes, numpy_fallback
from tidu.numpy._creation import linspace
from tidu.numpy._dtypes import result_type
from tidu.numpy._elementwise import (
    abs,
    divide,
    equal,
    greater_equal,
    imag,
    less,
    not_equal,
    subtract,
    where,
)
from tidu.numpy._reductions import _one_hot_sum, all, max, min, sum
from tidu.numpy._scans import cumsum, diff
from tidu.numpy._sets import _static_size
from tidu.numpy._shapes import atleast_1d, expand_dims, ravel, reshape, stack
from tidu.numpy._sorting import searchsorted
from tidu.numpy._ufuncs import _bits_of, _float_of, copysign, isnan, logical_and, logical_not, logical_or, nextafter
from tidu.trace.tracing import Tracer

# --- the k-th true entry -------------------------------------------------------------------


def _picks(mask: Tracer, size: int) -> tuple[Tracer, Tracer, Tracer]:
    """(hit, flat, valid) for a traced 1-D bool ``mask``: hit[k, i] (entry i is the k-th true
    one), the flat index of each (0 past the last), and whether slot k has one."""
    running = subtract(cumsum(mask, dtype="int64"), 1)
    slot = np.arange(size, dtype=np.int64).reshape(size, 1)
    hit = logical_and(expand_dims(mask, 0), equal(expand_dims(running, 0), slot))
    iota = np.arange(mask.shape[0], dtype=np.int64)
    flat = sum(where(hit, iota, np.int64(0)), axis=1, dtype="int64")
    valid = less(np.arange(size, dtype=np.int64), sum(mask, dtype="int64"))
    return hit, flat, valid


def _mask_of(a: Any) -> Any:
    if isinstance(a, Tracer):
        return a if a.aval.dtype == "bool" else not_equal(a, np.zeros((), a.aval.dtype))
    a = np.asarray(a)
    return a if a.dtype == bool else a != 0


def _fills(name: str, fill_value: Any, ndim: int) -> list[Any]:
    if fill_value is None:
        return [0] * ndim
    if isinstance(fill_value, tuple | list):
        if len(fill_value) != ndim:
            raise ValueError(f"tnp.{name}: fill_value has {len(fill_value)} entries for an input of rank {ndim}; "
                             "pass one value, or one per axis")
        return list(fill_value)
    if np.ndim(fill_value) != 0:
        raise ValueError(f"tnp.{name}: fill_value must be a scalar or a tuple of one scalar per axis")
    return [fill_value] * ndim


def nonzero(a: ArrayLike, *, size: int | None = None, fill_value: Any = None) -> tuple[Any, ...]:
    """The indices of the nonzero elements, one int64 array per axis. ``size`` (required when
    ``a`` is traced): that many, the first ones, padded with ``fill_value`` (default 0; a
    scalar or one per axis), as jax.numpy's."""
    traced = isinstance(a, Tracer)
    size = _static_size(size, traced, "nonzero")
    shape = _shape(a)
    if not shape:
        raise ValueError("tnp.nonzero: a 0-d array has no nonzero indices; use tnp.atleast_1d(a) first")
    fills = _fills("nonzero", fill_value, len(shape))
    dtype = result_type("int64", *fills)
    if not traced:
        out = np.nonzero(np.asarray(a))
        if size is None:
            return out
        keep = np.arange(size) < out[0].size
        return tuple(np.where(keep, np.resize(o, size) if o.size else 0, f).astype(dtype)
                     for o, f in zip(out, fills, strict=True))
    _, flat, valid = _picks(ravel(_mask_of(a)), size)
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    return tuple(where(valid, astype((flat // s) % n if n else flat, dtype), astype(asarray(f), dtype)
                       if isinstance(f, Tracer) else np.asarray(f).astype(dtype))
                 for s, n, f in zip(strides, shape, fills, strict=True))


def flatnonzero(a: ArrayLike, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The indices of the nonzero elements of the flattened ``a`` (``size`` as ``nonzero``)."""
    _static_size(size, isinstance(a, Tracer), "flatnonzero")
    return nonzero(ravel(a) if isinstance(a, Tracer) else np.ravel(a), size=size, fill_value=fill_value)[0]


def argwhere(a: ArrayLike, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The indices of the nonzero elements as rows (n, a.ndim) (``size`` as ``nonzero``)."""
    _static_size(size, isinstance(a, Tracer), "argwhere")
    if not isinstance(a, Tracer):
        if size is None:
            return np.argwhere(a)
        cols = nonzero(np.atleast_1d(a), size=size, fill_value=fill_value)
        return np.stack(cols, axis=1)[:, :np.ndim(a)]
    ndim = a.ndim
    cols = nonzero(atleast_1d(a), size=size, fill_value=fill_value)
    out = stack(list(cols), axis=1)
    return out[:, :0] if ndim == 0 else out


def extract(condition: ArrayLike, arr: ArrayLike, *, size: int | None = None, fill_value: ArrayLike = 0) -> Any:
    """The elements of the flattened ``arr`` where the flattened ``condition`` is nonzero.
    A traced ``condition`` needs ``size`` (the first ``size`` ones, padded with
    ``fill_value``), as jax.numpy's; the picked elements carry their derivatives."""
    traced_cond = isinstance(condition, Tracer)
    trace = _trace_of((condition, arr, fill_value))
    if trace is None and size is None:
        return np.extract(condition, arr)
    size = _static_size(size, traced_cond, "extract")
    flat = ravel(arr) if isinstance(arr, Tracer) else np.ravel(arr)
    mask = ravel(_mask_of(condition)) if traced_cond else np.ravel(_mask_of(condition))
    if mask.shape[0] != flat.shape[0]:
        raise ValueError(f"tnp.extract: condition has {mask.shape[0]} elements and arr {flat.shape[0]}; "
                         "they must have as many")
    if not traced_cond:
        idx = np.flatnonzero(mask)
        if size is None:
            return flat[idx]
        picked = flat[np.resize(idx, size) if idx.size else np.zeros(size, np.int64)] if flat.shape[0] else None
        keep = np.arange(size) < idx.size
        dtype = flat.aval.dtype if isinstance(flat, Tracer) else flat.dtype
        fill = astype(asarray(fill_value), dtype)
        if picked is None:
            return np.broadcast_to(fill, (size,)).copy() if not isinstance(fill, Tracer) else \
                reshape(fill, (1,)) * np.ones(size, dtype)
        return where(keep, picked, fill) if trace is not None else np.where(keep, picked, fill).astype(dtype)
    hit, _, valid = _picks(mask, size)
    flat = flat if isinstance(flat, Tracer) else trace.constant(np.asarray(flat))
    picked = _one_hot_sum(expand_dims(flat, 0), hit, -1)
    return where(valid, picked, astype(asarray(fill_value), flat.aval.dtype))


# --- counting and binning -----------------------------------------------------------------


def bincount(x: ArrayLike, weights: ArrayLike | None = None, minlength: int = 0, *,
             length: int | None = None) -> Any:
    """The number of occurrences of each value 0, 1, ... of the non-negative integers ``x``
    (with ``weights``: their sums). Eagerly NumPy's; with ``length`` (required when ``x`` is
    traced) exactly that many counts, negative values counted as 0 and values past the end
    dropped, as jax.numpy's. Weighted counts are float64 (complex128 for complex weights),
    as NumPy's, traced too (jax.numpy keeps the weights' dtype)."""
    trace = _trace_of((x, weights))
    if trace is None and length is None:
        return np.bincount(x, weights, minlength=minlength)
    if length is None and isinstance(x, Tracer):
        raise TypeError("tnp.bincount: the number of counts depends on the values of x, which are traced here; pass "
                        "a static length=, as jax.numpy requires under jit")
    length = _static_size(length, False, "bincount")
    if length is None:  # constant x, traced weights
        xs = np.asarray(x)
        length = builtins.max(int(minlength), int(xs.max()) + 1 if xs.size else 0)
    xdtype = x.aval.dtype if isinstance(x, Tracer) else np.asarray(x).dtype.name
    if not (xdtype == "bool" or xdtype.startswith(("int", "uint"))):
        raise TypeError(f"tnp.bincount: x must be integers, got {xdtype}")
    if len(_shape(x)) != 1:
        raise ValueError(f"tnp.bincount: x must be 1-D, got shape {tuple(_shape(x))}")
    if weights is not None and tuple(_shape(weights)) != tuple(_shape(x)):
        raise ValueError(f"tnp.bincount: weights has shape {tuple(_shape(weights))}, x {tuple(_shape(x))}; "
                         "they must be equal")
    if trace is None:
        xs = np.maximum(np.asarray(x).astype(np.int64), 0)
        keep = xs < length
        if weights is None:
            return np.bincount(xs[keep], minlength=length)[:length]
        w = np.asarray(weights)
        out = np.zeros(length, np.complex128 if w.dtype.kind == "c" else np.float64)
        np.add.at(out, xs[keep], w[keep])
        return out
    xi = astype(asarray(x), "int64")
    slot = np.arange(length, dtype=np.int64).reshape(length, 1)
    hit = equal(expand_dims(xi, 0), slot)  # [k, i]
    hit = logical_or(hit, logical_and(less(expand_dims(xi, 0), 0), slot == 0))
    if weights is None:
        return sum(hit, axis=1, dtype="int64")
    wdtype = "complex128" if is_complex(result_type(weights)) else "float64"
    w = astype(asarray(weights), wdtype)
    return sum(where(hit, expand_dims(w, 0), np.zeros((), wdtype)), axis=1)


def _np_digitize(x: Any, bins: Any, right: bool = False, *, method: str | None = None) -> Any:
    return np.digitize(x, bins, right=right)


@numpy_fallback(_np_digitize, "x", "bins")
def digitize(x: ArrayLike, bins: ArrayLike, right: bool = False, *, method: str | None = None) -> Any:
    """The index of the bin of each element of ``x``, for increasing or decreasing 1-D
    ``bins`` (NumPy's rule), int64 as NumPy's (jax.numpy's is int32): the bins' order is
    read from their ends, so traced bins must be monotonic as NumPy requires."""
    bins_shape = _shape(bins)
    if len(bins_shape) != 1:
        raise ValueError(f"tnp.digitize: bins must be 1-D, got shape {tuple(bins_shape)}")
    n = bins_shape[0]
    if n == 0:
        return np.zeros(_shape(x), np.int64)
    if not isinstance(bins, Tracer):  # (NumPy checks; traced bins cannot be)
        step = np.diff(np.asarray(bins))
        if not ((step >= 0).all() or (step <= 0).all()):
            raise ValueError(f"tnp.digitize: bins must be monotonically increasing or decreasing, got {bins!r:.60}")
    side = "left" if right else "right"
    up = searchsorted(bins, x, side=side)
    down = subtract(n, searchsorted(bins[::-1], x, side=side))
    return where(greater_equal(bins[-1], bins[0]), up, down)


def _inexact(dtype: str) -> str:
    return dtype if is_inexact(dtype) else "float64"


def _traced_edges(a: Any, bins: Any, range: Any, dtype: str) -> Any:
    if isinstance(bins, str):
        raise TypeError(f"tnp.histogram: bins={bins!r} (a rule for choosing bins) is not supported for traced "
                        "values; pass a number of bins or the edges")
    if np.ndim(bins) == 1:  # the edges as given (NumPy's; jax.numpy makes them inexact)
        if not isinstance(bins, Tracer) and (np.diff(np.asarray(bins)) < 0).any():  # (NumPy's check)
            raise ValueError(f"tnp.histogram: bins must increase monotonically, got {bins!r:.60}")
        return asarray(bins)
    if isinstance(bins, Tracer):
        raise TypeError("tnp.histogram: the number of bins must be a Python int, not a traced value")
    nbins = int(bins)
    if nbins < 1:
        raise ValueError(f"tnp.histogram: bins must be >= 1, got {nbins}")
    if range is None:
        if math.prod(_shape(a)) == 0:
            lo, hi = np.zeros((), dtype), np.ones((), dtype)
        else:
            lo, hi = astype(min(a), dtype), astype(max(a), dtype)
    else:
        if not (isinstance(range, tuple | list) and len(range) == 2) and (
                isinstance(range, Tracer) or np.shape(range) != (2,)):
            raise ValueError(f"tnp.histogram: range must be None or (low, high), got {range!r:.60}")
        if not builtins.any(isinstance(r, Tracer) for r in range):  # (NumPy's checks of a constant range)
            if not np.isfinite(np.asarray(range, dtype=np.float64)).all():
                raise ValueError(f"tnp.histogram: range {tuple(range)!r:.60} is not finite")
            if range[0] > range[1]:
                raise ValueError(f"tnp.histogram: range {tuple(range)!r:.60}: its max must not be below its min")
        lo, hi = (astype(asarray(r), dtype) for r in range)
    same = equal(lo, hi)
    lo, hi = where(same, subtract(lo, 0.5), lo), where(same, hi + 0.5, hi)
    return linspace(lo, hi, nbins + 1, dtype=dtype)


def histogram_bin_edges(a: ArrayLike, bins: Any = 10, range: Any = None, weights: ArrayLike | None = None) -> Any:
    """The bin edges ``histogram`` uses: NumPy's eagerly; traced, ``bins`` equal bins over
    ``range`` (default the data's min to max, widened by 0.5 each way when equal) or the
    given edges, as jax.numpy's, differentiable through min and max."""
    if _trace_of((a, bins, range if isinstance(range, tuple | list) else (range,))) is None:
        return np.histogram_bin_edges(a, bins, range, weights)
    dtype = _inexact(a.aval.dtype if isinstance(a, Tracer) else np.asarray(a).dtype.name)
    return _traced_edges(a, bins, range, dtype)


def histogram(a: ArrayLike, bins: Any = 10, range: Any = None, weights: ArrayLike | None = None,
              density: bool | None = None) -> tuple[Any, Any]:
    """(counts, edges) of the flattened ``a``, the last bin closed, values outside and nan
    counted nowhere: NumPy's eagerly, and its values and dtypes traced (int64 counts, the
    weights' dtype with weights, floats with ``density``; jax.numpy's counts are always
    inexact). The counts' derivative in ``a`` is 0 (a step function), in ``weights`` the
    bin's indicator; the edges' goes through the data's min and max, as jax.numpy's."""
    ranges = tuple(range) if isinstance(range, tuple | list) else (range,)
    if _trace_of((a, bins, weights, *ranges)) is None:
        return np.histogram(a, bins, range, weights=weights, density=density)
    if weights is not None and tuple(_shape(weights)) != tuple(_shape(a)):
        raise ValueError(f"tnp.histogram: weights has shape {tuple(_shape(weights))}, a {tuple(_shape(a))}; "
                         "they must be equal")
    flat = ravel(asarray(a))
    edges = _traced_edges(flat, bins, range, _inexact(result_type(a)))
    n_edges = _shape(edges)[0]
    idx = searchsorted(edges, flat, side="right")
    idx = where(equal(flat, edges[-1]), n_edges - 1, idx)
    slot = np.arange(1, n_edges, dtype=np.int64).reshape(-1, 1)
    hit = equal(expand_dims(idx, 0), slot)
    if weights is None:
        counts = sum(hit, axis=1, dtype="int64")
    else:
        wdtype = result_type(weights)
        w = ravel(asarray(weights))
        counts = astype(sum(where(hit, expand_dims(w, 0), np.zeros((), wdtype)), axis=1), wdtype)
    if density:  # NumPy's n / db / n.sum(), in NumPy's promotion of the counts and edges
        out = np.result_type(np.dtype(counts.aval.dtype), np.dtype(result_type(edges)), np.float16).name
        counts = astype(counts, out)
        counts = divide(divide(counts, astype(diff(edges), out)), sum(counts))
    return counts, edges


def trim_zeros(filt: ArrayLike, trim: str = "fb") -> Any:
    """NumPy's: ``filt`` without its leading (``"f"``) and trailing (``"b"``) zeros; a
    constant only, since the result's length depends on the values."""
    if isinstance(filt, Tracer):
        raise TypeError("tnp.trim_zeros: the result's length depends on the values, which are traced here; "
                        "trim a constant, or keep the zeros and mask them with tnp.where")
    return np.trim_zeros(filt, trim)


# --- elementwise integer and float utilities --------------------------------------------------


def _constant_only(name: str, *xs: Any) -> None:
    if _trace_of(xs) is not None:
        raise TypeError(f"tnp.{name} is computed by NumPy on constants only; it has no traced form in tidu yet "
                        "(its result has no derivative: compute it outside the transform)")


def gcd(x1: ArrayLike, x2: ArrayLike) -> Any:
    """NumPy's greatest common divisor of integers (constants only)."""
    _constant_only("gcd", x1, x2)
    return np.gcd(x1, x2)


def lcm(x1: ArrayLike, x2: ArrayLike) -> Any:
    """NumPy's least common multiple of integers (constants only)."""
    _constant_only("lcm", x1, x2)
    return np.lcm(x1, x2)


@numpy_fallback(np.frexp)
def frexp(x: ArrayLike) -> tuple[Any, Any]:
    """The mantissa (0.5 <= |m| < 1, x's sign) and int32 exponent with x = m * 2**e, bit
    for bit as NumPy (subnormals too: read from the bits, as XLA on CPU flushes them); 0,
    inf and nan are their own mantissa with exponent 0. Integers become float64. The
    mantissa's derivative is 2**-e, as jax.numpy's."""
    dtype = x.aval.dtype
    if is_complex(dtype):
        raise TypeError("tnp.frexp: complex values have no mantissa and exponent; pass real values")
    if not is_inexact(dtype):
        x, dtype = astype(x, "float64"), "float64"
    width = 8 * np.dtype(dtype).itemsize
    ints = f"int{width}"
    info = ml_dtypes.finfo(dtype)
    nm, bias = int(info.nmant), int(info.maxexp) - 1
    emask = (1 << (width - 1 - nm)) - 1

    def c(v: int) -> np.ndarray:  # v's low bits as the signed integer of the width
        return np.asarray(v & ((1 << width) - 1), f"uint{width}").view(ints)

    bits = _bits_of(x)
    field = bitwise_and(right_shift(bits, c(nm)), c(emask))
    frac = bitwise_and(bits, c((1 << nm) - 1))
    special = logical_or(equal(field, c(emask)), logical_and(equal(field, c(0)), equal(frac, c(0))))
    subnormal = logical_and(equal(field, c(0)), logical_not(equal(frac, c(0))))
    # a subnormal's fraction as a float (exact: fewer bits than the mantissa) is normal:
    # x = frac * 2**(1 - bias - nm)
    fbits = _bits_of(astype(frac, dtype))
    src = where(subnormal, bitwise_or(fbits, bitwise_and(bits, c(1 << (width - 1)))), bits)
    field = where(subnormal, bitwise_and(right_shift(fbits, c(nm)), c(emask)), field)
    exponent = subtract(field, c(bias - 1))
    exponent = where(subnormal, exponent + c(1 - bias - nm), exponent)
    mant_bits = bitwise_or(bitwise_and(src, c(~(emask << nm))), c((bias - 1) << nm))
    mant = _float_of(where(special, bits, mant_bits), dtype)
    # the derivative 2**-e, carried by (x - x) * 2**-e, whose value is 0
    x_copy = _float_of(bits, dtype)
    scale = where(logical_or(special, subnormal), np.zeros((), dtype), divide(mant, where(special, 1, x_copy)))
    mant = where(special, x, mant + (x - x_copy) * scale)
    return mant, astype(where(special, c(0), exponent), "int32")


@numpy_fallback(np.spacing)
def spacing(x: ArrayLike) -> Any:
    """The distance from ``x`` to the next float away from 0 (negative for negative ``x``;
    nan at inf and nan), bit for bit as NumPy (``nextafter``); derivative 0, as jax.numpy's."""
    if is_complex(x.aval.dtype):
        raise TypeError("tnp.spacing: complex values have no spacing; pass real values")
    xf = x if is_inexact(x.aval.dtype) else astype(x, "float64")
    away = copysign(np.asarray(np.inf, xf.aval.dtype), xf)
    step = subtract(nextafter(xf, away), xf)
    return step.trace.emit("stop_gradient", [step])


@numpy_fallback(np.iscomplex)
def iscomplex(x: ArrayLike) -> Any:
    """Whether each element has a nonzero imaginary part (False for real dtypes)."""
    return not_equal(imag(x), 0)


@numpy_fallback(np.isreal)
def isreal(x: ArrayLike) -> Any:
    """Whether each element's imaginary part is 0 (True for real dtypes)."""
    return equal(imag(x), 0)


def array_equal(a1: ArrayLike, a2: ArrayLike, equal_nan: bool = False) -> Any:
    """Whether the arrays have one shape and equal elements (nan equal to nan with
    ``equal_nan``): NumPy's bool eagerly, a traced bool scalar traced (a constant False
    when the shapes differ)."""
    if _trace_of((a1, a2)) is None:
        return np.array_equal(a1, a2, equal_nan=equal_nan)
    if tuple(_shape(a1)) != tuple(_shape(a2)):
        return np.bool_(False)
    eq = equal(a1, a2)
    if equal_nan:
        eq = logical_or(eq, logical_and(isnan(a1), isnan(a2)))
    return all(eq)


def array_equiv(a1: ArrayLike, a2: ArrayLike) -> Any:
    """Whether the arrays broadcast together and are equal elementwise."""
    if _trace_of((a1, a2)) is None:
        return np.array_equiv(a1, a2)
    try:
        broadcast_shapes(tuple(_shape(a1)), tuple(_shape(a2)))
    except ValueError:
        return np.bool_(False)
    return all(equal(a1, a2))


@numpy_fallback("bitwise_count")
def bitwise_count(x: ArrayLike) -> Any:
    """The number of 1 bits of each integer's absolute value, uint8 (NumPy's and jax.numpy's)."""
    dtype = x.aval.dtype
    if dtype == "bool":
        return astype(x, "uint8")
    if not dtype.startswith(("int", "uint")):
        raise TypeError(f"tnp.bitwise_count: x must be integers, got {dtype}")
    width = 8 * np.dtype(dtype).itemsize
    u = astype(abs(x) if dtype.startswith("int") else x, f"uint{width}")
    udt = np.dtype(f"uint{width}")

    def c(v: int) -> np.ndarray:
        return np.asarray(v & ((1 << width) - 1), udt)

    # the bits summed in pairs, nibbles, bytes, then the bytes added by a multiply
    u = u - ((u >> c(1)) & c(0x5555555555555555))
    u = (u & c(0x3333333333333333)) + ((u >> c(2)) & c(0x3333333333333333))
    u = (u + (u >> c(4))) & c(0x0F0F0F0F0F0F0F0F)
    if width > 8:
        u = (u * c(0x0101010101010101)) >> c(width - 8)
    return astype(u, "uint8")
