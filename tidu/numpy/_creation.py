"""tidu.numpy array creation: constants shaped like an operand (``zeros_like``, ...) and
NumPy's own constructors (``zeros``, ``eye``, ``arange``, ...)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tracing import Tracer
from ._core import ArrayLike
from ._dtypes import _dtype_name


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


zeros, ones, full, eye = np.zeros, np.ones, np.full, np.eye
arange, linspace = np.arange, np.linspace
