"""tidu.numpy dtypes: the supported dtypes, JAX-style promotion with weakly typed Python
scalars (``result_type``), and dtype names."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from tidu.trace.tracing import Tracer

_KIND = {"bool": 0, "int32": 1, "int64": 1, "float32": 2, "float64": 2,
         "complex64": 3, "complex128": 3}
_BITS = {"bool": 1, "int32": 32, "int64": 64, "float32": 32, "float64": 64,
         "complex64": 64, "complex128": 128}
_DEFAULT = {0: "bool", 1: "int64", 2: "float64", 3: "complex128"}


def _info(x: Any) -> tuple[str, bool]:
    """(dtype name, weakly typed?) of an operand."""
    if isinstance(x, Tracer):
        return x.aval.dtype, x.weak
    for py, name in ((bool, "bool"), (int, "int64"), (float, "float64"), (complex, "complex128")):
        if type(x) is py:
            return name, True
    name = np.asarray(x).dtype.name
    if name not in _KIND:
        raise TypeError(f"tidu.numpy does not handle dtype {name} (value {x!r:.60}); "
                        f"use one of {', '.join(_KIND)}")
    return name, False


def _join(a: str, b: str) -> str:
    ka, kb = _KIND[a], _KIND[b]
    if ka == kb:
        return a if _BITS[a] >= _BITS[b] else b
    hi, lo = (a, b) if ka > kb else (b, a)
    return "complex128" if _KIND[hi] == 3 and lo == "float64" else hi


def result_type(*xs: Any) -> str:
    """The dtype of an elementwise result (JAX promotion, weak Python scalars)."""
    infos = [_info(x) for x in xs]
    strong = [d for d, weak in infos if not weak]
    weak = [d for d, w in infos if w]
    if not strong:
        return _DEFAULT[builtins.max(_KIND[d] for d in weak)]
    dtype = strong[0]
    for d in strong[1:]:
        dtype = _join(dtype, d)
    for d in weak:
        if _KIND[d] > _KIND[dtype]:
            dtype = "complex64" if _KIND[d] == 3 and dtype == "float32" else _DEFAULT[_KIND[d]]
    return dtype


def _dtype_name(dtype: Any) -> str:
    name = np.dtype(dtype).name
    if name not in _KIND:
        raise TypeError(f"tidu.numpy does not handle dtype {name}; use one of {', '.join(_KIND)}")
    return name
