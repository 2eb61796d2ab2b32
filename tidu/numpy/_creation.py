"""tidu.numpy array creation: constants shaped like an operand (``zeros_like``, ...) and
NumPy's own constructors (``zeros``, ``eye``, ``arange``, ...)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tidu.numpy._core import ArrayLike
from tidu.numpy._dtypes import _dtype_name
from tidu.trace.tracing import Tracer


def zeros_like(x: ArrayLike, dtype: Any = None) -> Any:
    return full_like(x, 0, dtype)


def ones_like(x: ArrayLike, dtype: Any = None) -> Any:
    return full_like(x, 1, dtype)


def full_like(x: ArrayLike, fill_value: Any, dtype: Any = None) -> Any:
    """A constant array shaped like ``x`` (no dependence on x's value)."""
    if not isinstance(x, Tracer):
        return np.full_like(x, fill_value, dtype=dtype)
    x.check_alive()
    name = _dtype_name(dtype) if dtype is not None else x.aval.dtype
    return x.trace.constant(np.full(x.shape, fill_value, dtype=name))


zeros, ones, eye = np.zeros, np.ones, np.eye
arange = np.arange


def _traced_any(*xs: Any) -> Any:
    from tidu.numpy._core import _trace_of

    return _trace_of(xs)


def full(shape: Any, fill_value: ArrayLike, dtype: Any = None) -> Any:
    """An array of ``shape`` filled with ``fill_value`` (traced if the value is)."""
    if not isinstance(fill_value, Tracer):
        return np.full(shape, fill_value, dtype=dtype)
    from tidu.numpy._casting import astype
    from tidu.numpy._shapes import broadcast_to

    shape_ = (int(shape),) if isinstance(shape, int | np.integer) else tuple(int(d) for d in shape)
    out = broadcast_to(fill_value, shape_)
    return out if dtype is None else astype(out, dtype)


def linspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True,
             retstep: bool = False, dtype: Any = None, axis: int = 0) -> Any:
    """``num`` evenly spaced values from start to stop (traced if start or stop is)."""
    if _traced_any(start, stop) is None:
        return np.linspace(start, stop, num, endpoint, retstep, dtype, axis)
    from tidu.numpy._elementwise import add, multiply, subtract
    from tidu.numpy._shapes import expand_dims, moveaxis

    div = (num - 1) if endpoint else num
    steps = np.arange(num, dtype=np.float64) / div if div > 0 else np.zeros(num)
    delta = subtract(stop, start)
    nd = max(np.ndim(start) if not isinstance(start, Tracer) else start.ndim,
             np.ndim(stop) if not isinstance(stop, Tracer) else stop.ndim)
    t = steps.reshape((num,) + (1,) * nd)
    out = add(expand_dims(start, 0) if nd else start, multiply(t, expand_dims(delta, 0) if nd else delta))
    if endpoint and num > 1:  # the last value is stop exactly, as NumPy
        from tidu.numpy._indexing import _At

        out = _At(out)[-1].set(stop)
    out = moveaxis(out, 0, axis) if nd else out
    if dtype is not None:
        from tidu.numpy._casting import astype

        out = astype(out, dtype)
    return (out, multiply(delta, 1.0 / div if div > 0 else np.nan)) if retstep else out


def logspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True, base: float = 10.0,
             dtype: Any = None, axis: int = 0) -> Any:
    """base ** linspace(start, stop)."""
    if _traced_any(start, stop) is None:
        return np.logspace(start, stop, num, endpoint, base, dtype, axis)
    from tidu.numpy._elementwise import power

    return power(base, linspace(start, stop, num, endpoint, axis=axis))


def geomspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True, dtype: Any = None,
              axis: int = 0) -> Any:
    """Values spaced evenly on a log scale from start to stop (positive reals)."""
    if _traced_any(start, stop) is None:
        return np.geomspace(start, stop, num, endpoint, dtype, axis)
    from tidu.numpy._elementwise import exp, log

    return exp(linspace(log(start), log(stop), num, endpoint, axis=axis))


def copy(x: ArrayLike) -> Any:
    """A copy (for traced values: the value itself; traced values are immutable)."""
    return x if isinstance(x, Tracer) else np.array(x, copy=True)
