"""tidu.numpy constants shaped like an operand: ``full_like``, ``zeros_like``, ``ones_like``
(traced constants for a traced operand: they do not depend on its value)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tidu.numpy._core import ArrayLike, numpy_fallback
from tidu.numpy._dtypes import _dtype_name


def zeros_like(x: ArrayLike, dtype: Any = None) -> Any:
    return full_like(x, 0, dtype)


def ones_like(x: ArrayLike, dtype: Any = None) -> Any:
    return full_like(x, 1, dtype)


@numpy_fallback(np.full_like)
def full_like(x: ArrayLike, fill_value: Any, dtype: Any = None) -> Any:
    """A constant array shaped like ``x`` (no dependence on x's value)."""
    x.check_alive()
    name = _dtype_name(dtype) if dtype is not None else x.aval.dtype
    return x.trace.constant(np.full(x.shape, fill_value, dtype=name))
