"""tidu.numpy explicit dtype conversion: ``astype`` and ``asarray``."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from tidu.core.keys import is_complex
from tidu.numpy._core import ArrayLike, _convert
from tidu.numpy._dtypes import _dtype_name
from tidu.numpy._elementwise import real
from tidu.trace.tracing import Tracer


def astype(x: ArrayLike, dtype: Any) -> Any:
    name = _dtype_name(dtype)
    if not isinstance(x, Tracer):
        return np.asarray(x).astype(name)
    x.check_alive()
    if is_complex(x.aval.dtype) and not is_complex(name):
        # an explicit cast keeps the real part, with NumPy's (and JAX's) warning
        warnings.warn(f"casting complex values to {name} discards the imaginary part; use tnp.real to "
                      "say so", np.exceptions.ComplexWarning, stacklevel=2)
        x = real(x)
    return _convert(x, name)


def asarray(x: ArrayLike, dtype: Any = None) -> Any:
    """``x`` as an array; nested lists and tuples holding traced values are stacked into one
    traced array (``tnp.array([x, 2 * x])``)."""
    if isinstance(x, Tracer):
        return x if dtype is None else astype(x, dtype)
    if isinstance(x, list | tuple) and _holds_tracer(x):
        from tidu.numpy._shapes import stack

        out = stack([asarray(item) for item in x])
        return out if dtype is None else astype(out, dtype)
    return np.asarray(x, dtype=dtype)


def _holds_tracer(x: Any) -> bool:
    if isinstance(x, Tracer):
        return True
    return isinstance(x, list | tuple) and any(_holds_tracer(item) for item in x)


array = asarray
