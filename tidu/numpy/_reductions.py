"""tidu.numpy reductions: sum, prod, max, min, mean over axes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..keys import is_complex
from ..tracing import Tracer
from ._core import ArrayLike, _convert, _norm_axes
from ._elementwise import divide, negative
from ._shapes import reshape


def _reduce(op: str, name: str, x: Any, axis: Any, keepdims: bool, np_fn: Any) -> Any:
    if not isinstance(x, Tracer):
        return np_fn(x, axis=axis, keepdims=keepdims)
    x.check_alive()
    axes = _norm_axes(axis, x.ndim, name)
    if x.aval.dtype == "bool":
        x = _convert(x, "int64")
    out = x.trace.emit(op, [x], {"axes": axes}) if axes else x
    if keepdims:
        out = reshape(out, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
    return out


def sum(x: ArrayLike, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:  # noqa: A001
    return _reduce("reduce_sum", "sum", x, axis, keepdims, np.sum)


def prod(x: ArrayLike, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
    return _reduce("reduce_prod", "prod", x, axis, keepdims, np.prod)


def max(x: ArrayLike, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:  # noqa: A001
    if isinstance(x, Tracer) and is_complex(x.aval.dtype):
        raise TypeError("tnp.max is not defined for complex values")
    return _reduce("reduce_max", "max", x, axis, keepdims, np.max)


def min(x: ArrayLike, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:  # noqa: A001
    if not isinstance(x, Tracer):
        return np.min(x, axis=axis, keepdims=keepdims)
    return negative(max(negative(x), axis=axis, keepdims=keepdims))


amax, amin = max, min


def mean(x: ArrayLike, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
    if not isinstance(x, Tracer):
        return np.mean(x, axis=axis, keepdims=keepdims)
    axes = _norm_axes(axis, x.ndim, "mean")
    count = math.prod(x.shape[a] for a in axes)
    return divide(sum(x, axis=axes, keepdims=keepdims), float(count))
