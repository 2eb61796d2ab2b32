"""jax.numpy's dtype and value introspection for tidu values and dtypes: ``finfo``,
``iinfo``, ``promote_types``, ``can_cast``, ``issubdtype``, ``isdtype``, ``size``,
``isscalar``, ``iscomplexobj``, ``isrealobj``, ``iterable``. Nothing is traced: each reads
a dtype or a shape (of a traced value, its aval's), so it may steer a traced function
(``tnp.finfo(x.dtype).eps * x``). bfloat16 is a floating dtype here, as in JAX (NumPy
does not place ml_dtypes' bfloat16 in its hierarchy)."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from tidu.numpy._dtypes import _dtype_info, _dtype_name, result_type
from tidu.trace.tracing import Tracer

_BF16 = np.dtype(ml_dtypes.bfloat16)


def _dtype_of(x: Any) -> np.dtype:
    """The NumPy dtype of a dtype-like (a dtype, a scalar type, a name) or of a value."""
    if isinstance(x, Tracer):
        return np.dtype(x.aval.dtype)
    return np.dtype(_dtype_info(x)[0])  # (dtype-likes too: result_type's reading)


def finfo(dtype: Any) -> Any:
    """Machine limits of a floating (or complex: its real part's) dtype, or of a value's
    dtype (``ml_dtypes.finfo``, which knows bfloat16)."""
    d = _dtype_of(dtype)
    if d.kind not in "fc" and d != _BF16:
        raise ValueError(f"tnp.finfo: {d} is not a floating or complex dtype; use tnp.iinfo for integers")
    return ml_dtypes.finfo(d)


def iinfo(int_type: Any) -> Any:
    """Machine limits of an integer dtype, or of a value's dtype."""
    d = _dtype_of(int_type)
    if d.kind not in "iu":
        raise ValueError(f"tnp.iinfo: {d} is not an integer dtype; use tnp.finfo for floating dtypes")
    return np.iinfo(d)


def promote_types(a: Any, b: Any) -> np.dtype:
    """The dtype JAX promotes ``a`` and ``b`` to (Python's types weakly typed): tidu's
    ``result_type`` of the two, as a NumPy dtype."""
    return np.dtype(result_type(a, b))


def can_cast(from_: Any, to: Any, casting: str = "safe") -> bool:
    """Whether ``from_``'s dtype casts to ``to`` under ``casting`` (NumPy's rule, which is
    JAX's for tidu's dtypes)."""
    return bool(np.can_cast(_dtype_of(from_), _dtype_of(to), casting=casting))  # type: ignore[arg-type]


def _in_hierarchy(d: np.dtype) -> np.dtype:
    """``d`` as NumPy's type hierarchy sees it: bfloat16 takes float16's place."""
    return np.dtype(np.float16) if d == _BF16 else d


def issubdtype(arg1: Any, arg2: Any) -> bool:
    """Whether ``arg1`` is ``arg2`` or below it in NumPy's hierarchy (``np.floating``,
    ``np.inexact``, ``np.integer``...), bfloat16 a floating dtype."""
    if isinstance(arg2, type) and issubclass(arg2, np.generic) and arg2 in (np.generic, np.number, np.inexact,
                                                                             np.floating, np.complexfloating,
                                                                             np.integer, np.signedinteger,
                                                                             np.unsignedinteger, np.bool_):
        return bool(np.issubdtype(_in_hierarchy(_dtype_of(arg1)), arg2))
    return _dtype_of(arg1) == _dtype_of(arg2)


_KINDS = {"bool": "b", "signed integer": "i", "unsigned integer": "u", "integral": "iu", "real floating": "f",
          "complex floating": "c", "numeric": "iufc"}


def isdtype(dtype: Any, kind: Any) -> bool:
    """The array API's ``isdtype``: whether ``dtype`` is of ``kind`` (a name of
    ``_KINDS``, a dtype, or a tuple of them)."""
    d = _dtype_of(dtype)
    letter = "f" if d == _BF16 else d.kind
    for k in kind if isinstance(kind, tuple) else (kind,):
        if isinstance(k, str) and k in _KINDS:
            if letter in _KINDS[k]:
                return True
        elif isinstance(k, str) and not _is_dtype_name(k):
            raise ValueError(f"isdtype: unknown kind {k!r}; the standard's kinds are {', '.join(map(repr, _KINDS))}, "
                             "or give a dtype")
        elif _dtype_of(k) == d:
            return True
    return False


def _is_dtype_name(name: str) -> bool:
    try:
        _dtype_name(name)
    except TypeError:
        return False
    return True


def size(a: Any, axis: int | None = None) -> int:
    """The number of elements of ``a`` (along ``axis``)."""
    if isinstance(a, Tracer):
        return a.size if axis is None else a.shape[axis]
    return int(np.size(a, axis))


def isscalar(element: Any) -> bool:
    """True for a number and for a rank-0 array or traced value (JAX's: rank-0 arrays are
    its scalars)."""
    if isinstance(element, Tracer | np.ndarray):
        return element.ndim == 0
    return bool(np.isscalar(element))


def iscomplexobj(x: Any) -> bool:
    """Whether ``x`` has a complex dtype."""
    return _dtype_of(x).kind == "c"


def isrealobj(x: Any) -> bool:
    """Whether ``x`` does not have a complex dtype."""
    return not iscomplexobj(x)


def iterable(y: Any) -> bool:
    """Whether ``y`` can be iterated (a traced value of rank 1 or more)."""
    if isinstance(y, Tracer):
        return y.ndim > 0
    return bool(np.iterable(y))


__all__ = ["can_cast", "finfo", "iinfo", "iscomplexobj", "isdtype", "isrealobj", "isscalar", "issubdtype",
           "iterable", "promote_types", "size"]
