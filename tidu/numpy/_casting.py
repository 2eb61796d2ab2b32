"""tidu.numpy explicit dtype conversion: ``astype`` and ``asarray``."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from tidu.core.keys import is_complex
from tidu.numpy._core import ArrayLike, _convert, numpy_fallback
from tidu.numpy._dtypes import _dtype_name
from tidu.numpy._elementwise import real
from tidu.numpy._shapes import stack
from tidu.trace.tracing import Tracer


@numpy_fallback(lambda x, dtype: np.asarray(x).astype(_dtype_name(dtype)))
def astype(x: ArrayLike, dtype: Any) -> Any:
    name = _dtype_name(dtype)
    x.check_alive()
    if is_complex(x.aval.dtype) and name == "bool":  # NumPy's and JAX's: nonzero in either part
        return x != 0
    if is_complex(x.aval.dtype) and not is_complex(name):
        # an explicit cast keeps the real part, with NumPy's (and JAX's) warning
        warnings.warn(f"casting complex values to {name} discards the imaginary part; use tnp.real to "
                      "say so", np.exceptions.ComplexWarning, stacklevel=2)
        x = real(x)
    return _convert(x, name)


@numpy_fallback(np.asarray, nested=True)
def asarray(x: ArrayLike, dtype: Any = None) -> Any:
    """``x`` as an array; nested lists and tuples holding traced values are stacked into one
    traced array (``tnp.array([x, 2 * x])``)."""
    if isinstance(x, Tracer):
        return x if dtype is None else astype(x, dtype)
    out = stack([asarray(item) for item in x])
    return out if dtype is None else astype(out, dtype)


array = asarray
