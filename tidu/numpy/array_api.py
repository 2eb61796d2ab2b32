"""The array API standard's namespace for tidu's traced values: what
``tracer.__array_namespace__()`` returns, so that code written against the standard
(SciPy's with ``SCIPY_ARRAY_API=1``, array-api-compat users) traces and differentiates.

It is tidu.numpy where the standard and NumPy agree, and a thin layer where the standard
names or spells things differently: keyword-only ``dtype``/``keepdims`` on reductions,
``correction`` for ``std``/``var``, ``copy``/``device`` on creation functions,
``astype(x, dtype)``, ``isdtype``, ``finfo``/``iinfo`` and ``__array_namespace_info__``.
Every function also takes NumPy values (eagerly, as tidu.numpy). The device is always
``"cpu"``: a traced value lives in the program, which runs where the program is run.

Not here (tidu has no traced counterpart): value-dependent shapes (``nonzero``,
``unique_*``, boolean masks), ``searchsorted``, bitwise operations, unsigned and 8/16-bit
integer dtypes, in-place updates and ``from_dlpack``.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
from numpy import e, inf, nan, newaxis, pi

from tidu.numpy import fft, linalg
from tidu.numpy._casting import (
    asarray as _asarray,
)
from tidu.numpy._casting import (
    astype as _astype,
)
from tidu.numpy._contractions import (
    matmul,
    tensordot,
    vecdot,
)
from tidu.numpy._creation import (
    full as _full,
)
from tidu.numpy._creation import (
    linspace as _linspace,
)
from tidu.numpy._dtypes import result_type as _result_type
from tidu.numpy._elementwise import (
    abs,
    add,
    conj,
    cos,
    cosh,
    divide,
    equal,
    exp,
    expm1,
    greater,
    greater_equal,
    imag,
    less,
    less_equal,
    log,
    log1p,
    log2,
    log10,
    maximum,
    minimum,
    multiply,
    negative,
    not_equal,
    positive,
    real,
    reciprocal,
    sign,
    sin,
    sinh,
    sqrt,
    square,
    subtract,
    tan,
    tanh,
    where,
)
from tidu.numpy._elementwise import (
    clip as _clip,
)
from tidu.numpy._elementwise import (
    power as pow,
)
from tidu.numpy._filled import (
    full_like as _full_like,
)
from tidu.numpy._filled import (
    ones_like as _ones_like,
)
from tidu.numpy._filled import (
    zeros_like as _zeros_like,
)
from tidu.numpy._indexing import (
    take,
    take_along_axis,
)
from tidu.numpy._introspection import can_cast as _can_cast
from tidu.numpy._introspection import finfo, iinfo, isdtype
from tidu.numpy._matrices import (
    empty_like as _empty_like,
)
from tidu.numpy._matrices import (
    tril,
    triu,
)
from tidu.numpy._reductions import (
    all,
    any,
    argmax,
    argmin,
)
from tidu.numpy._reductions import (
    max as _max,
)
from tidu.numpy._reductions import (
    mean as _mean,
)
from tidu.numpy._reductions import (
    min as _min,
)
from tidu.numpy._reductions import (
    prod as _prod,
)
from tidu.numpy._reductions import (
    std as _std,
)
from tidu.numpy._reductions import (
    sum as _sum,
)
from tidu.numpy._reductions import (
    var as _var,
)
from tidu.numpy._scans import (
    cumulative_prod,
    diff,
)
from tidu.numpy._scans import (
    cumulative_sum as _cumulative_sum,
)
from tidu.numpy._shapes import (
    broadcast_arrays,
    broadcast_to,
    concat,
    expand_dims,
    flip,
    matrix_transpose,
    meshgrid,
    moveaxis,
    permute_dims,
    repeat,
    roll,
    squeeze,
    stack,
    tile,
    unstack,
)
from tidu.numpy._shapes import (
    reshape as _reshape,
)
from tidu.numpy._sorting import (
    argsort,
    sort,
)
from tidu.numpy._ufuncs import (
    arccos as acos,
)
from tidu.numpy._ufuncs import (
    arccosh as acosh,
)
from tidu.numpy._ufuncs import (
    arcsin as asin,
)
from tidu.numpy._ufuncs import (
    arcsinh as asinh,
)
from tidu.numpy._ufuncs import (
    arctan as atan,
)
from tidu.numpy._ufuncs import (
    arctan2 as atan2,
)
from tidu.numpy._ufuncs import (
    arctanh as atanh,
)
from tidu.numpy._ufuncs import (
    ceil,
    copysign,
    floor,
    floor_divide,
    hypot,
    isfinite,
    isinf,
    isnan,
    logaddexp,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    remainder,
    round,
    signbit,
    trunc,
)
from tidu.trace.tracing import Tracer, current_trace

__array_api_version__ = "2023.12"

bool = np.dtype("bool")  # noqa: A001 (the standard's name)
int32, int64 = np.dtype("int32"), np.dtype("int64")
float32, float64 = np.dtype("float32"), np.dtype("float64")
complex64, complex128 = np.dtype("complex64"), np.dtype("complex128")
_DTYPES = {"bool": bool, "int32": int32, "int64": int64, "float32": float32, "float64": float64,
           "complex64": complex64, "complex128": complex128}

ArrayLike = Any
Axis = int | tuple[int, ...] | None


def _device(device: Any) -> None:
    if device not in (None, "cpu"):
        raise ValueError(f"tidu's array API namespace has one device, 'cpu'; got device={device!r}")


# --- data types ---------------------------------------------------------------------


def astype(x: ArrayLike, dtype: Any, /, *, copy: Any = True, device: Any = None) -> Any:
    """``x`` converted to ``dtype`` (a traced value is never shared: ``copy`` has no effect)."""
    _device(device)
    return _astype(x, dtype)


def result_type(*arrays_and_dtypes: Any) -> np.dtype:
    """The standard's type promotion (JAX's, with Python scalars weakly typed)."""
    return np.dtype(_result_type(*arrays_and_dtypes))


def can_cast(from_: Any, to: Any, /) -> Any:
    return _can_cast(from_, to)


# --- creation -----------------------------------------------------------------------
# Inside a transform a new array is a constant of the innermost trace, not a NumPy array:
# code written for the standard assigns traced values into it (``z = xp.zeros(n); z[0] = x``).


def _made(value: Any) -> Any:
    trace = current_trace()
    return trace.constant(np.asarray(value)) if trace is not None and not isinstance(value, Tracer) else value




def asarray(obj: Any, /, *, dtype: Any = None, device: Any = None, copy: Any = None) -> Any:
    """``obj`` as an array; with ``copy=True`` a traced value is a new object (so that an
    item assignment to it leaves ``obj`` as it was)."""
    _device(device)
    out = _asarray(obj, dtype=dtype)
    if copy and isinstance(out, Tracer) and out is obj:
        out = Tracer(out.trace, out.ref, out.aval, out.weak)
    return out


def arange(start: Any, /, stop: Any = None, step: Any = 1, *, dtype: Any = None, device: Any = None) -> Any:
    _device(device)
    return _made(np.arange(start, stop, step, dtype=dtype) if stop is not None else np.arange(start, dtype=dtype))


def empty(shape: Any, *, dtype: Any = None, device: Any = None) -> Any:
    _device(device)
    return _made(np.zeros(shape, dtype=dtype or float64))


def zeros(shape: Any, *, dtype: Any = None, device: Any = None) -> Any:
    _device(device)
    return _made(np.zeros(shape, dtype=dtype or float64))


def ones(shape: Any, *, dtype: Any = None, device: Any = None) -> Any:
    _device(device)
    return _made(np.ones(shape, dtype=dtype or float64))


def eye(n_rows: int, n_cols: int | None = None, /, *, k: int = 0, dtype: Any = None, device: Any = None) -> Any:
    _device(device)
    return _made(np.eye(n_rows, n_cols, k=k, dtype=dtype or float64))


def full(shape: Any, fill_value: Any, *, dtype: Any = None, device: Any = None) -> Any:
    _device(device)
    return _made(_full(shape, fill_value, dtype=dtype))


def empty_like(x: ArrayLike, /, *, dtype: Any = None, device: Any = None) -> Any:
    _device(device)
    return _empty_like(x, dtype=dtype)


def zeros_like(x: ArrayLike, /, *, dtype: Any = None, device: Any = None) -> Any:
    _device(device)
    return _zeros_like(x, dtype=dtype)


def ones_like(x: ArrayLike, /, *, dtype: Any = None, device: Any = None) -> Any:
    _device(device)
    return _ones_like(x, dtype=dtype)


def full_like(x: ArrayLike, /, fill_value: Any, *, dtype: Any = None, device: Any = None) -> Any:
    _device(device)
    return _full_like(x, fill_value, dtype=dtype)


def linspace(start: Any, stop: Any, /, num: int, *, dtype: Any = None, device: Any = None,
             endpoint: Any = True) -> Any:
    _device(device)
    return _linspace(start, stop, num, endpoint=endpoint, dtype=dtype)


# --- manipulation and elementwise functions with the standard's spelling ----------------


def reshape(x: ArrayLike, /, shape: Sequence[int], *, copy: Any = None) -> Any:
    return _reshape(x, tuple(shape))


def clip(x: ArrayLike, /, min: Any = None, max: Any = None) -> Any:  # noqa: A002
    return x if min is None and max is None else _clip(x, min, max)


# --- statistics: keyword-only dtype and keepdims, correction ----------------------------


def sum(x: ArrayLike, /, *, axis: Axis = None, dtype: Any = None, keepdims: Any = False) -> Any:  # noqa: A001
    return _sum(x, axis=axis, keepdims=keepdims, dtype=dtype)


def prod(x: ArrayLike, /, *, axis: Axis = None, dtype: Any = None, keepdims: Any = False) -> Any:
    return _prod(x, axis=axis, keepdims=keepdims, dtype=dtype)


def mean(x: ArrayLike, /, *, axis: Axis = None, keepdims: Any = False) -> Any:
    return _mean(x, axis=axis, keepdims=keepdims)


def max(x: ArrayLike, /, *, axis: Axis = None, keepdims: Any = False) -> Any:  # noqa: A001
    return _max(x, axis=axis, keepdims=keepdims)


def min(x: ArrayLike, /, *, axis: Axis = None, keepdims: Any = False) -> Any:  # noqa: A001
    return _min(x, axis=axis, keepdims=keepdims)


def std(x: ArrayLike, /, *, axis: Axis = None, correction: Any = 0.0, keepdims: Any = False) -> Any:
    return _std(x, axis=axis, ddof=correction, keepdims=keepdims)


def var(x: ArrayLike, /, *, axis: Axis = None, correction: Any = 0.0, keepdims: Any = False) -> Any:
    return _var(x, axis=axis, ddof=correction, keepdims=keepdims)


def cumulative_sum(x: ArrayLike, /, *, axis: int | None = None, dtype: Any = None,
                   include_initial: Any = False) -> Any:
    return _cumulative_sum(x, axis=axis, dtype=dtype, include_initial=include_initial)


# --- inspection ---------------------------------------------------------------------


def __array_namespace_info__() -> Any:
    """The standard's inspection object: one device, the dtypes tidu traces."""
    def dtypes(*, device: Any = None, kind: Any = None) -> dict[str, np.dtype]:
        _device(device)
        return {n: d for n, d in _DTYPES.items() if kind is None or isdtype(d, kind)}

    return SimpleNamespace(
        capabilities=lambda: {"boolean indexing": False, "data-dependent shapes": False, "max dimensions": None},
        default_device=lambda: "cpu", devices=lambda: ["cpu"],
        default_dtypes=lambda *, device=None: {"real floating": float64, "complex floating": complex128,
                                               "integral": int64, "indexing": int64},
        dtypes=dtypes)


__all__ = ["abs", "acos", "acosh", "add", "all", "any", "arange", "argmax", "argmin", "argsort", "asarray", "asin",
           "asinh", "astype", "atan", "atan2", "atanh", "bool", "broadcast_arrays", "broadcast_to", "can_cast",
           "ceil", "clip", "complex128", "complex64", "concat", "conj", "copysign", "cos", "cosh", "cumulative_prod",
           "cumulative_sum", "diff", "divide", "e", "empty", "empty_like", "equal", "exp", "expand_dims", "expm1",
           "eye", "fft", "finfo", "flip", "float32", "float64", "floor", "floor_divide", "full", "full_like",
           "greater", "greater_equal", "hypot", "iinfo", "imag", "inf", "int32", "int64", "isdtype", "isfinite",
           "isinf", "isnan", "less", "less_equal", "linalg", "linspace", "log", "log10", "log1p", "log2",
           "logaddexp", "logical_and", "logical_not", "logical_or", "logical_xor", "matmul", "matrix_transpose",
           "max", "maximum", "mean", "meshgrid", "min", "minimum", "moveaxis", "multiply", "nan", "negative",
           "newaxis", "not_equal", "ones", "ones_like", "permute_dims", "pi", "positive", "pow", "prod", "real",
           "reciprocal", "remainder", "repeat", "reshape", "result_type", "roll", "round", "sign", "signbit", "sin",
           "sinh", "sort", "sqrt", "square", "squeeze", "stack", "std", "subtract", "sum", "take", "take_along_axis",
           "tan", "tanh", "tensordot", "tile", "tril", "triu", "trunc", "unstack", "var", "vecdot", "where", "zeros",
           "zeros_like", "__array_api_version__", "__array_namespace_info__"]
