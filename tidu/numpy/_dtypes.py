"""tidu.numpy dtypes: the supported dtypes, JAX-style promotion with weakly typed Python
scalars (``result_type``), and dtype names.

Promotion is the join (least upper bound) in JAX's type-promotion lattice with 64-bit
types: Python scalars are the weak nodes ``i*``, ``f*``, ``c*`` (a bool is ``bool``),
which sit below every integer, floating and complex dtype of their kind::

    bool -> i* -> u8 -> u16 -> u32 -> u64 -> f*
           i* -> i8 -> i16 -> i32 -> i64 -> f*      (u8 -> i16, u16 -> i32, u32 -> i64)
    f* -> bf16 -> f32,  f* -> f16 -> f32,  f32 -> f64 -> c128,  f* -> c* -> c64 -> c128,  f32 -> c64

A join that lands on a weak node is that kind's default dtype (int64, float64,
complex128): ``int64 + uint64`` and ``int8 + 1.5`` are float64, ``uint8 + 1`` is uint8,
``bfloat16 + float16`` is float32."""

from __future__ import annotations

from typing import Any

import numpy as np

from tidu.core.keys import DTYPES
from tidu.trace.tracing import Tracer

_SUPPORTED = frozenset(DTYPES)
# the lattice's edges: each node and the nodes right above it
_ABOVE: dict[str, tuple[str, ...]] = {
    "bool": ("i*",), "i*": ("uint8", "int8"),
    "uint8": ("uint16", "int16"), "uint16": ("uint32", "int32"), "uint32": ("uint64", "int64"), "uint64": ("f*",),
    "int8": ("int16",), "int16": ("int32",), "int32": ("int64",), "int64": ("f*",),
    "f*": ("bfloat16", "float16", "c*"), "bfloat16": ("float32",), "float16": ("float32",),
    "float32": ("float64", "complex64"), "float64": ("complex128",),
    "c*": ("complex64",), "complex64": ("complex128",), "complex128": (),
}
_DEFAULT = {"i*": "int64", "f*": "float64", "c*": "complex128"}
_WEAK_NODE = {"b": "bool", "i": "i*", "u": "i*", "f": "f*", "c": "c*"}


def _upper(node: str) -> frozenset[str]:
    """``node`` and every node above it."""
    return frozenset({node}).union(*(_upper(n) for n in _ABOVE[node]))


_UP = {n: _upper(n) for n in _ABOVE}


def _join_nodes(a: str, b: str) -> str:
    common = _UP[a] & _UP[b]
    # the least common upper bound: the one above which all the others are
    return next(n for n in common if common <= _UP[n])


_JOIN = {(a, b): _join_nodes(a, b) for a in _ABOVE for b in _ABOVE}


def _node(dtype: str, weak: bool) -> str:
    return _WEAK_NODE[np.dtype(dtype).kind] if weak else dtype


def _info(x: Any) -> tuple[str, bool]:
    """(dtype name, weakly typed?) of an operand."""
    if isinstance(x, Tracer):
        return x.aval.dtype, x.weak
    for py, name in ((bool, "bool"), (int, "int64"), (float, "float64"), (complex, "complex128")):
        if type(x) is py:
            return name, True
    name = np.asarray(x).dtype.name
    if name not in _SUPPORTED:
        raise TypeError(f"tidu.numpy does not handle dtype {name} (value {x!r:.60}); "
                        f"use one of {', '.join(DTYPES)}")
    return name, False


_PY_TYPES = {bool: "bool", int: "int64", float: "float64", complex: "complex128"}


def _dtype_info(x: Any) -> tuple[str, bool]:
    """``_info`` of an operand of ``result_type``, which may also be a dtype: a NumPy dtype,
    scalar type or dtype name (strongly typed), or Python's bool, int, float or complex
    (weakly typed, as JAX's ``result_type`` takes them)."""
    if isinstance(x, type) and x in _PY_TYPES:
        return _PY_TYPES[x], True
    if isinstance(x, str):  # a dtype's name, or an operand given as text by mistake
        try:
            return _dtype_name(x), False
        except TypeError as err:
            raise TypeError(f"an operand is the str {x!r}, which is neither an array, a number nor a "
                            f"dtype's name ({err})") from None
    if isinstance(x, np.dtype) or (isinstance(x, type) and issubclass(x, np.generic)):
        return _dtype_name(x), False
    return _info(x)


def result_type(*xs: Any) -> str:
    """The dtype of an elementwise result (JAX promotion, weak Python scalars) of values
    or dtypes (``result_type(np.float32, 1.0)`` is float32, as JAX's)."""
    node = None
    for x in xs:
        n = _node(*_dtype_info(x))
        node = n if node is None else _JOIN[node, n]
    if node is None:
        raise TypeError("result_type needs at least one operand")
    return _DEFAULT.get(node, node)


def promote_dtypes(a: str, b: str) -> str:
    """The join of two (strongly typed) dtype names."""
    n = _JOIN[a, b]
    return _DEFAULT.get(n, n)


def _dtype_name(dtype: Any) -> str:
    try:
        name = np.dtype(dtype).name
    except TypeError:
        raise TypeError(f"dtype {dtype!r} is not a NumPy dtype; use one of {', '.join(DTYPES)}") from None
    if name not in _SUPPORTED:
        raise TypeError(f"tidu.numpy does not handle dtype {name}; use one of {', '.join(DTYPES)}")
    return name
