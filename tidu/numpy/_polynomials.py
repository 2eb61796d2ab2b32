"""tidu.numpy polynomials (coefficient arrays, highest power first, as NumPy) and 1-D
convolution: ``polyval`` (Horner), ``polyadd``, ``polysub``, ``polymul``, ``polyder``,
``polyint``, ``poly``, ``vander``, ``convolve``, ``correlate``. Convolution of lengths n and
m is a sum of m shifted (padded) copies: n m multiplications, no FFT."""

from __future__ import annotations

from typing import Any

import numpy as np

from tidu.core.keys import is_inexact
from tidu.numpy._casting import asarray, astype
from tidu.numpy._core import ArrayLike, _prep, _trace_of, _tracer, numpy_fallback
from tidu.numpy._dtypes import result_type
from tidu.numpy._elementwise import add, conj, multiply, subtract
from tidu.numpy._filled import zeros_like
from tidu.numpy._shapes import concatenate, flip, ravel, stack
from tidu.trace.tracing import Tracer


def _vec(x: Any, trace: Any, name: str) -> Tracer:
    t = x if isinstance(x, Tracer) else _tracer(trace, np.asarray(x))
    if t.ndim != 1:  # (NumPy's: "object too deep / of too small depth for desired array")
        raise ValueError(f"tnp.{name}: both inputs must be 1-D, got one of shape {t.shape}")
    return t


def _pad1(v: Tracer, low: int, high: int) -> Tracer:
    zero = v.trace.constant(np.zeros((), v.aval.dtype))
    return v.trace.emit("pad", [v, zero], {"low": (low,), "high": (high,), "interior": (0,)})


@numpy_fallback(np.convolve, "a", "v")
def convolve(a: ArrayLike, v: ArrayLike, mode: str = "full") -> Any:
    """Discrete linear convolution of two 1-D arrays (``mode`` full, same or valid)."""
    trace = _trace_of((a, v))
    dtype = result_type(a, v)
    x, y = _prep(trace, a, dtype), _prep(trace, v, dtype)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError("tnp.convolve: both inputs must be 1-D")
    n, m = x.shape[0], y.shape[0]
    if n == 0 or m == 0:
        raise ValueError("tnp.convolve: inputs cannot be empty")
    if m > n:
        x, y, n, m = y, x, m, n
    full = None
    for k in range(m):  # out[i] = sum_k y[k] x[i - k]; padded after the product: 0 * inf is not a term
        term = _pad1(multiply(x, y[k]), k, m - 1 - k)
        full = term if full is None else add(full, term)
    if mode == "full":
        return full
    if mode == "same":
        start = (m - 1) // 2
        return full[start:start + n]
    if mode == "valid":
        return full[m - 1:n]
    raise ValueError(f"tnp.convolve: mode must be 'full', 'same' or 'valid', got {mode!r}")


@numpy_fallback(np.correlate, "a", "v")
def correlate(a: ArrayLike, v: ArrayLike, mode: str = "valid") -> Any:
    """Cross-correlation of two 1-D arrays: convolve(a, reversed conj(v)). For
    ``mode='same'`` with a shorter than v, NumPy correlates v with a and reverses: its
    window of the full result starts len(a) // 2 in, not (len(a) - 1) // 2."""
    trace = _trace_of((a, v))
    x, y = _vec(a, trace, "correlate"), _vec(v, trace, "correlate")
    n, m = x.shape[0], y.shape[0]
    if mode == "same" and 0 < n < m:
        return convolve(x, flip(conj(y)), "full")[n // 2:n // 2 + m]
    return convolve(x, flip(conj(y)), mode)


def _numpy_dtype(v: Any) -> np.dtype:
    """The dtype NumPy gives ``v`` as an array (a Python number: int64, float64,
    complex128, strongly typed); nested lists and tuples may hold tracers."""
    if isinstance(v, Tracer):
        return np.dtype(v.aval.dtype)
    if isinstance(v, list | tuple) and any(isinstance(item, Tracer) for item in v):
        return _numpy_promote(*(_numpy_dtype(item) for item in v))
    return np.asarray(v).dtype


def _numpy_promote(*dtypes: np.dtype) -> np.dtype:
    """NumPy's promotion of strongly typed dtypes (int64 and float32 give float64); where
    NumPy has none (bfloat16 with integers or float16), JAX's."""
    try:
        return np.result_type(*dtypes)
    except (TypeError, np.exceptions.DTypePromotionError):
        return np.dtype(result_type(*dtypes))


@numpy_fallback(np.polyval, "p", "x", nested=True)
def polyval(p: ArrayLike, x: ArrayLike) -> Any:
    """The polynomial with coefficients ``p`` (highest power first) at ``x`` (Horner), in
    NumPy's steps and dtype: x as an array (a Python number is int64 or float64, not
    weakly typed), y = zeros_like(x), then y = y * x + p[i]; so int32 coefficients at 2
    give int64 (jax.numpy's int32), float32 ones at 2.0 float64."""
    xt = x if isinstance(x, Tracer) else np.asarray(x)
    dtype = _numpy_promote(_numpy_dtype(xt), _numpy_dtype(p)).name
    trace = _trace_of((p, x) if not isinstance(p, list | tuple) else (*p, x))
    coefs = _prep(trace, asarray(p), dtype)  # (a list holding tracers: stacked)
    y = zeros_like(xt)
    for i in range(coefs.shape[0]):
        y = add(multiply(y, xt), coefs[i])  # (0 * x first: -0.0 for x < 0, nan at inf, as NumPy's)
    return y


def _pair(a: Any, b: Any) -> tuple[Tracer, Tracer]:
    trace = _trace_of((a, b))
    dtype = result_type(a, b)
    return ravel(_prep(trace, a, dtype)), ravel(_prep(trace, b, dtype))


def _leading(a: Any, b: Any) -> tuple[Tracer, Tracer]:
    """``a`` and ``b`` (at least 1-D, as tracers) with zeros in front along axis 0 to the same
    length, as NumPy's polyadd: arrays of coefficients keep their other axes."""
    trace = _trace_of((a, b))
    dtype = result_type(a, b)
    out = []
    for v in (a, b):
        v = _prep(trace, v, dtype)
        out.append(v.trace.emit("reshape", [v], {"shape": (1,)}) if v.ndim == 0 else v)
    n = max(v.shape[0] for v in out)
    zero = trace.constant(np.zeros((), dtype))
    return tuple(v if v.shape[0] == n else v.trace.emit(  # type: ignore[return-value]
        "pad", [v, zero], {"low": (n - v.shape[0],) + (0,) * (v.ndim - 1), "high": (0,) * v.ndim,
                           "interior": (0,) * v.ndim}) for v in out)


@numpy_fallback(np.polyadd, "a1", "a2")
def polyadd(a1: ArrayLike, a2: ArrayLike) -> Any:
    """Sum of two polynomials (coefficients along axis 0, highest power first)."""
    return add(*_leading(a1, a2))


@numpy_fallback(np.polysub, "a1", "a2")
def polysub(a1: ArrayLike, a2: ArrayLike) -> Any:
    """Difference of two polynomials (coefficients along axis 0, highest power first)."""
    return subtract(*_leading(a1, a2))


@numpy_fallback(np.polymul, "a1", "a2")
def polymul(a1: ArrayLike, a2: ArrayLike) -> Any:
    """Product of two polynomials (their coefficients' convolution)."""
    return convolve(*_pair(a1, a2))


def _polydiv_numpy(u: Any, v: Any, trim_leading_zeros: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``polydiv`` on NumPy values, as jax.numpy's (NumPy's trims the remainder)."""
    u, v = np.atleast_1d(np.asarray(u)), np.atleast_1d(np.asarray(v))
    dtype = np.result_type(u, v, np.float64 if not np.issubdtype(np.result_type(u, v), np.inexact) else u.dtype)
    quotient, remainder = _long_division(list(u.astype(dtype)), list(v.astype(dtype)), np.zeros((), dtype))
    q, r = np.array(quotient, dtype=dtype), np.array(remainder, dtype=dtype)
    return q, (np.trim_zeros(r, "f") if trim_leading_zeros else r)


def _long_division(u: list[Any], v: list[Any], zero: Any) -> tuple[list[Any], list[Any]]:
    """Quotient and remainder of u / v (coefficient lists, highest power first): the
    remainder has u's length, its first len(u) - len(v) + 1 entries exactly 0."""
    n, m = len(u), len(v)
    if m == 0 or n == 0:
        raise ValueError("tnp.polydiv: u and v must not be empty")
    r = list(u)
    quotient = []
    for k in range(max(n - m + 1, 0)):
        d = r[k] / v[0]
        quotient.append(d)
        for j in range(1, m):
            r[k + j] = r[k + j] - d * v[j]
    leading = max(n - m + 1, 0)
    return quotient or [zero], [zero] * leading + r[leading:]


@numpy_fallback(_polydiv_numpy, "u", "v")
def polydiv(u: ArrayLike, v: ArrayLike, trim_leading_zeros: bool = False) -> tuple[Any, Any]:
    """Quotient and remainder of polynomial division (as jax.numpy.polydiv: the remainder
    keeps u's length unless ``trim_leading_zeros``, which needs concrete values)."""
    if trim_leading_zeros:
        raise ValueError("tnp.polydiv: trim_leading_zeros=True needs concrete values (the remainder's length "
                         "would depend on traced values); trim the result after evaluation")
    x, y = _pair(u, v)
    dtype = x.aval.dtype if x.aval.dtype not in ("int32", "int64", "bool") else "float64"
    x, y = x.astype(dtype), y.astype(dtype)
    zero = x.trace.constant(np.zeros((), dtype))
    quotient, remainder = _long_division([x[i] for i in range(x.shape[0])], [y[i] for i in range(y.shape[0])], zero)
    return stack(quotient), stack(remainder)


@numpy_fallback(np.polyder)
def polyder(p: ArrayLike, m: int = 1) -> Any:
    """The m-th derivative of a polynomial."""
    for _ in range(m):
        n = p.shape[0] - 1
        if n <= 0:
            return multiply(p[:0], 1)
        p = multiply(p[:n], np.arange(n, 0, -1, dtype=np.float64 if p.aval.dtype.startswith("int") else None))
    return p


@numpy_fallback(lambda p, m=1, k=None: np.polyint(p, m, k if k is not None else 0), "p", "k")
def polyint(p: ArrayLike, m: int = 1, k: Any = None) -> Any:
    """The m-th antiderivative, integration constants ``k`` (0 by default)."""
    if k is None:
        ks: list[Any] = [0.0] * m
    elif isinstance(k, Tracer):
        flat = ravel(k)
        ks = [flat[0]] * m if flat.shape[0] == 1 else [flat[i] for i in range(m)]
    else:
        arr = np.atleast_1d(np.asarray(k, dtype=float))
        ks = [arr[0]] * m if arr.size == 1 else list(arr)
    p = asarray(p) if not isinstance(p, Tracer) else p
    for i in range(m):
        n = p.shape[0]
        scaled = multiply(p, 1.0 / np.arange(n, 0, -1))
        c = ks[i]
        p = concatenate([scaled, c.reshape(1) if isinstance(c, Tracer) else np.array([c], dtype=float)])
    return p


@numpy_fallback(np.poly)
def poly(seq_of_zeros: ArrayLike) -> Any:
    """Coefficients of the monic polynomial with these roots (a 1-D array; float64 for
    integer roots, as NumPy)."""
    r = ravel(seq_of_zeros)
    if not is_inexact(r.aval.dtype):
        r = astype(r, "float64")
    c = r.trace.constant(np.ones(1, r.aval.dtype))
    for i in range(r.shape[0]):
        c = convolve(c, concatenate([r.trace.constant(np.ones(1, r.aval.dtype)), multiply(r[i:i + 1], -1)]))
    return c


@numpy_fallback(np.vander)
def vander(x: ArrayLike, N: int | None = None, increasing: bool = False) -> Any:
    """Columns of powers of ``x`` (x**(N-1), ..., x, 1; reversed if ``increasing``)."""
    n = x.shape[0] if N is None else N
    cols = []
    p = multiply(x, 0) + 1
    for _ in range(n):
        cols.append(p)
        p = multiply(p, x)
    if not increasing:
        cols = cols[::-1]
    return stack(cols, axis=1) if cols else multiply(x, 0)[:, None][:, :0]
