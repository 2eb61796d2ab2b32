"""tidu.numpy explicit dtype conversion: ``astype`` and ``asarray``."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from tidu.core.keys import is_complex, is_integer
from tidu.numpy._core import ArrayLike, _convert, numpy_fallback
from tidu.numpy._dtypes import _dtype_name
from tidu.numpy._elementwise import real
from tidu.numpy._shapes import stack
from tidu.ops.reference import float_to_int
from tidu.trace.tracing import Tracer


def _np_astype(x: Any, dtype: Any) -> Any:
    """NumPy's astype, but floats to integers as XLA converts them (saturating, nan 0), as
    the traced conversion does on every back end."""
    a, name = np.asarray(x), _dtype_name(dtype)
    if is_integer(name) and (a.dtype.kind == "f" or a.dtype.name == "bfloat16"):
        return float_to_int(a, name)
    return a.astype(name)


def _np_asarray(x: Any, dtype: Any = None) -> Any:
    return np.asarray(x) if dtype is None else _np_astype(np.asarray(x), dtype)


@numpy_fallback(_np_astype)
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


@numpy_fallback(_np_asarray, nested=True)
def asarray(x: ArrayLike, dtype: Any = None) -> Any:
    """``x`` as an array; nested lists and tuples holding traced values are stacked into one
    traced array (``tnp.array([x, 2 * x])``)."""
    if isinstance(x, Tracer):
        return x if dtype is None else astype(x, dtype)
    out = stack([asarray(item) for item in x])
    return out if dtype is None else astype(out, dtype)


array = asarray
