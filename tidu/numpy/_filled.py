"""tidu.numpy constants shaped like an operand: ``full_like``, ``zeros_like``, ``ones_like``
(traced constants for a traced operand: they do not depend on its value)."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from tidu.core.keys import Literal
from tidu.numpy._core import ArrayLike, _prep, _shape, _trace_of, numpy_fallback
from tidu.numpy._dtypes import _dtype_name, _info
from tidu.trace.tracing import Tracer


def zeros_like(x: ArrayLike, dtype: Any = None, shape: Any = None) -> Any:
    return full_like(x, 0, dtype, shape=shape)


def ones_like(x: ArrayLike, dtype: Any = None, shape: Any = None) -> Any:
    return full_like(x, 1, dtype, shape=shape)


@numpy_fallback(np.full_like, "x", "fill_value")
def full_like(x: ArrayLike, fill_value: Any, dtype: Any = None, shape: Any = None) -> Any:
    """An array shaped like ``x`` (or of ``shape``, as NumPy's and JAX's ``shape=``) filled
    with ``fill_value`` (no dependence on x's value; a traced ``fill_value`` is broadcast,
    so its derivative flows)."""
    trace = _trace_of((x, fill_value))
    assert trace is not None
    name = _dtype_name(dtype) if dtype is not None else _info(x)[0]
    shape = _shape(x) if shape is None else _new_shape(shape)
    if isinstance(fill_value, Tracer):
        return _prep(trace, fill_value, name, shape)
    return trace.constant(Literal.filled(fill_value, shape, name))


def _new_shape(shape: Any) -> tuple[int, ...]:
    """``shape=`` as a tuple of sizes (an int is one axis), with a clear error otherwise."""
    dims = (shape,) if isinstance(shape, int | np.integer) else shape
    try:  # operator.index: "3" and 2.5 are refused, as NumPy does (int() read them)
        out = tuple(operator.index(d) for d in dims)
    except (TypeError, ValueError):
        raise TypeError(f"shape= must be an int or a sequence of ints, got {shape!r}") from None
    if any(d < 0 for d in out) or any(isinstance(d, bool) for d in dims):
        raise ValueError(f"shape= must hold non-negative ints, got {shape!r}")
    return out
