"""tidu.numpy array creation: NumPy's own constructors (``zeros``, ``eye``, ``arange``, ...),
and ``full``, ``linspace``, ``logspace``, ``geomspace``, traced when a value they start
from is (constants shaped like an operand, ``zeros_like`` and the rest, are in
``tidu.numpy._filled``)."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from tidu.numpy._casting import astype
from tidu.numpy._core import ArrayLike, numpy_fallback
from tidu.numpy._dtypes import result_type
from tidu.numpy._elementwise import add, exp, less, log, multiply, power, subtract, where
from tidu.numpy._indexing import _At
from tidu.numpy._shapes import _ints, broadcast_to, expand_dims, moveaxis
from tidu.trace.tracing import Tracer

zeros, ones, eye = np.zeros, np.ones, np.eye
arange = np.arange


@numpy_fallback(np.full, "fill_value")
def full(shape: Any, fill_value: ArrayLike, dtype: Any = None) -> Any:
    """An array of ``shape`` filled with ``fill_value`` (traced if the value is)."""
    shape_ = tuple(_ints(shape, "full", "shape"))  # (int("3") read a str as digits)
    if any(d < 0 for d in shape_):
        raise ValueError(f"tnp.full: shape must hold sizes >= 0, got {shape!r}")
    out = broadcast_to(fill_value, shape_)
    return out if dtype is None else astype(out, dtype)


@numpy_fallback(np.linspace, "start", "stop")
def linspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True,
             retstep: bool = False, dtype: Any = None, axis: int = 0) -> Any:
    """``num`` evenly spaced values from start to stop (traced if start or stop is)."""
    num = _count(num, "linspace")
    div = (num - 1) if endpoint else num
    steps = np.arange(num, dtype=np.float64) / div if div > 0 else np.zeros(num)
    # the steps in start's and stop's precision (a float64 array would make float32 ends
    # float64); bool and integer ends as floats, as NumPy
    dtype_ = result_type(start, stop, 1.0)
    start, stop = (astype(v, dtype_) if isinstance(v, Tracer) and v.aval.dtype != dtype_ else v for v in (start, stop))
    delta = subtract(stop, start)
    nd = max(np.ndim(start) if not isinstance(start, Tracer) else start.ndim,
             np.ndim(stop) if not isinstance(stop, Tracer) else stop.ndim)
    t = steps.astype({"complex64": "float32", "complex128": "float64"}.get(dtype_, dtype_)).reshape((num,) + (1,) * nd)
    out = add(expand_dims(start, 0) if nd else start, multiply(t, expand_dims(delta, 0) if nd else delta))
    if endpoint and num > 1:  # the last value is stop exactly, as NumPy
        out = _At(out)[-1].set(stop)
    out = moveaxis(out, 0, axis) if nd else out
    if dtype is not None:
        out = astype(out, dtype)
    return (out, multiply(delta, 1.0 / div if div > 0 else np.nan)) if retstep else out


def _count(num: Any, what: str) -> int:
    """``num`` of linspace (logspace, geomspace) as an int >= 0, else the error NumPy's would be,
    naming the function."""
    try:
        n = operator.index(num) if not isinstance(num, bool | np.bool_ | Tracer) else None
    except TypeError:
        n = None
    if n is None:
        raise TypeError(f"tnp.{what}: num must be an int (a constant count), got {num!r:.60} ({type(num).__name__})")
    if n < 0:
        raise ValueError(f"tnp.{what}: num must be >= 0, got {n}")
    return n


@numpy_fallback(np.logspace, "start", "stop")
def logspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True, base: float = 10.0,
             dtype: Any = None, axis: int = 0) -> Any:
    """base ** linspace(start, stop)."""
    num = _count(num, "logspace")
    return power(base, linspace(start, stop, num, endpoint, axis=axis))


@numpy_fallback(np.geomspace, "start", "stop")
def geomspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True, dtype: Any = None,
              axis: int = 0) -> Any:
    """Values spaced evenly on a log scale from start to stop (both positive, or both
    negative: then the negated values of -start to -stop, as NumPy)."""
    num = _count(num, "geomspace")
    sign = where(less(start, 0), -1.0, 1.0)  # no derivative: the sign is locally constant
    out = exp(linspace(log(multiply(start, sign)), log(multiply(stop, sign)), num, endpoint, axis=axis))
    if (sign.ndim if isinstance(sign, Tracer) else np.ndim(sign)) > 0:  # start's axes, num's inserted at axis
        sign = expand_dims(sign, axis % out.ndim)
    out = multiply(out, sign)
    return out if dtype is None else astype(out, dtype)


@numpy_fallback(lambda x: np.array(x, copy=True))
def copy(x: ArrayLike) -> Any:
    """A copy (for traced values: the value itself; traced values are immutable)."""
    return x
