"""tidu.numpy: a NumPy-like API that records into the current trace.

``import tidu.numpy as tnp``. Called with traced values (``Tracer``) the functions add
primitives to the trace, inserting the explicit ``broadcast_in_dim`` and ``convert``
that NumPy broadcasting and dtype promotion imply (promotion as in JAX with 64-bit
types: Python scalars are weakly typed, ``int + float32 -> float32``). Called with
plain NumPy values or Python numbers they return NumPy results.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy import (  # noqa: F401 (re-exported constants and dtypes)
    bool_,
    complex64,
    complex128,
    e,
    float32,
    float64,
    inf,
    int32,
    int64,
    nan,
    newaxis,
    pi,
)

from . import einsum as _einsum
from .keys import is_complex, is_inexact
from .tracing import Trace, TraceError, Tracer

ArrayLike = Any

# --- dtypes ----------------------------------------------------------------------------

_KIND = {"bool": 0, "int32": 1, "int64": 1, "float32": 2, "float64": 2,
         "complex64": 3, "complex128": 3}
_BITS = {"bool": 1, "int32": 32, "int64": 64, "float32": 32, "float64": 64,
         "complex64": 64, "complex128": 128}
_DEFAULT = {0: "bool", 1: "int64", 2: "float64", 3: "complex128"}
_CONST_INLINE = 4096  # constants up to this size are stored whole, not broadcast


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


# --- shapes ----------------------------------------------------------------------------


def _shape(x: Any) -> tuple[int, ...]:
    return x.shape if isinstance(x, Tracer) else np.shape(x)


def broadcast_shapes(*shapes: tuple[int, ...], what: str = "") -> tuple[int, ...]:
    """NumPy broadcasting of shapes, with an error that names every shape."""
    ndim = builtins.max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-ndim, 0):
        sizes = {s[i] for s in shapes if len(s) >= -i} - {1}
        if len(sizes) > 1:
            where = f"tnp.{what}: " if what else ""
            raise ValueError(f"{where}operands could not be broadcast together with shapes "
                             f"{' '.join(str(tuple(s)) for s in shapes)}; make them compatible "
                             "(equal sizes, or 1, aligned from the right) with reshape or "
                             "x[:, None]")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _norm_axis(axis: int, ndim: int, what: str) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"tnp.{what}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim


def _norm_axes(axis: int | Sequence[int] | None, ndim: int, what: str) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    out = tuple(_norm_axis(int(a), ndim, what) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"tnp.{what}: repeated axis in {axis}")
    return tuple(sorted(out))


# --- tracing helpers ---------------------------------------------------------------------


def _trace_of(xs: Sequence[Any]) -> Trace | None:
    """The innermost trace among the tracers in ``xs`` (None when all are concrete)."""
    best: Trace | None = None
    for x in xs:
        if isinstance(x, Tracer):
            x.check_alive()
            if best is None or x.trace.depth > best.depth:
                best = x.trace
    if best is not None:
        for x in xs:
            if isinstance(x, Tracer) and not x.trace.is_ancestor_of(best):
                raise TraceError("values of two unrelated traces are combined; a traced value "
                                 "escaped the transform that made it")
    return best


def _convert(t: Tracer, dtype: str) -> Tracer:
    if t.aval.dtype == dtype:
        return t
    if is_complex(t.aval.dtype) and not is_complex(dtype):
        raise TypeError(f"cannot convert {t.aval.dtype} to {dtype} implicitly; use tnp.real")
    return t.trace.emit("convert", [t], {"dtype": dtype})


def _broadcast_to(t: Tracer, shape: tuple[int, ...]) -> Tracer:
    if t.shape == shape:
        return t
    dims = tuple(range(len(shape) - t.ndim, len(shape)))
    return t.trace.emit("broadcast_in_dim", [t], {"shape": shape, "dims": dims})


def _prep(trace: Trace, x: Any, dtype: str, shape: tuple[int, ...] | None = None) -> Tracer:
    """``x`` as a tracer of ``trace`` with ``dtype`` (and broadcast to ``shape``)."""
    if isinstance(x, Tracer):
        t = x if x.trace is trace else Tracer(trace, trace.lift(x), x.aval, x.weak)
        t = _convert(t, dtype)
        return t if shape is None else _broadcast_to(t, shape)
    arr = np.asarray(x, dtype=dtype)
    if shape is not None and arr.shape != shape and math.prod(shape) <= _CONST_INLINE:
        arr = np.broadcast_to(arr, shape).copy()
    t = trace.constant(arr)
    return t if shape is None else _broadcast_to(t, shape)


def _tracer(trace: Trace, x: Any) -> Tracer:
    return _prep(trace, x, _info(x)[0])


# --- elementwise ---------------------------------------------------------------------------


def _binary(op: str, name: str, x: Any, y: Any, np_fn: Any, *, inexact: bool = False,
            real_only: bool = False) -> Any:
    trace = _trace_of((x, y))
    if trace is None:
        return np_fn(x, y)
    dtype = result_type(x, y)
    if inexact and not is_inexact(dtype):
        dtype = "float64"
    if real_only and is_complex(dtype):
        raise TypeError(f"tnp.{name} is not defined for complex values ({dtype})")
    shape = broadcast_shapes(_shape(x), _shape(y), what=name)
    weak = _info(x)[1] and _info(y)[1]
    return trace.emit(op, [_prep(trace, x, dtype, shape), _prep(trace, y, dtype, shape)],
                      weak=weak)


def _unary(op: str, x: Any, np_fn: Any, *, inexact: bool = True) -> Any:
    trace = _trace_of((x,))
    if trace is None:
        return np_fn(x)
    dtype = x.aval.dtype
    if inexact and not is_inexact(dtype):
        dtype = "float64"
    return trace.emit(op, [_convert(x, dtype)], weak=x.weak and op != "abs")


def add(x: ArrayLike, y: ArrayLike) -> Any:
    return _binary("add", "add", x, y, np.add)


def subtract(x: ArrayLike, y: ArrayLike) -> Any:
    return _binary("sub", "subtract", x, y, np.subtract)


def multiply(x: ArrayLike, y: ArrayLike) -> Any:
    return _binary("mul", "multiply", x, y, np.multiply)


def divide(x: ArrayLike, y: ArrayLike) -> Any:
    return _binary("div", "divide", x, y, np.divide, inexact=True)


true_divide = divide


def maximum(x: ArrayLike, y: ArrayLike) -> Any:
    return _binary("maximum", "maximum", x, y, np.maximum, real_only=True)


def minimum(x: ArrayLike, y: ArrayLike) -> Any:
    return _binary("minimum", "minimum", x, y, np.minimum, real_only=True)


def _compare(direction: str, name: str, np_fn: Any) -> Any:
    def fn(x: ArrayLike, y: ArrayLike) -> Any:
        trace = _trace_of((x, y))
        if trace is None:
            return np_fn(x, y)
        dtype = result_type(x, y)
        shape = broadcast_shapes(_shape(x), _shape(y), what=name)
        return trace.emit("compare", [_prep(trace, x, dtype, shape), _prep(trace, y, dtype, shape)],
                          {"direction": direction})

    fn.__name__ = name
    fn.__doc__ = f"Elementwise x {direction} y (a bool array)."
    return fn


less = _compare("LT", "less", np.less)
less_equal = _compare("LE", "less_equal", np.less_equal)
greater = _compare("GT", "greater", np.greater)
greater_equal = _compare("GE", "greater_equal", np.greater_equal)
equal = _compare("EQ", "equal", np.equal)
not_equal = _compare("NE", "not_equal", np.not_equal)


def negative(x: ArrayLike) -> Any:
    return _unary("neg", x, np.negative, inexact=False)


def positive(x: ArrayLike) -> Any:
    return x


def exp(x: ArrayLike) -> Any:
    return _unary("exp", x, np.exp)


def log(x: ArrayLike) -> Any:
    return _unary("log", x, np.log)


def expm1(x: ArrayLike) -> Any:
    return _unary("expm1", x, np.expm1)


def log1p(x: ArrayLike) -> Any:
    return _unary("log1p", x, np.log1p)


def sin(x: ArrayLike) -> Any:
    return _unary("sin", x, np.sin)


def cos(x: ArrayLike) -> Any:
    return _unary("cos", x, np.cos)


def tanh(x: ArrayLike) -> Any:
    return _unary("tanh", x, np.tanh)


def sqrt(x: ArrayLike) -> Any:
    return _unary("sqrt", x, np.sqrt)


def rsqrt(x: ArrayLike) -> Any:
    """1 / sqrt(x)."""
    return _unary("rsqrt", x, lambda v: 1.0 / np.sqrt(v))


def sign(x: ArrayLike) -> Any:
    return _unary("sign", x, np.sign, inexact=False)


def abs(x: ArrayLike) -> Any:  # noqa: A001 (numpy name)
    """|x|; the modulus (a real array) for complex x."""
    return _unary("abs", x, np.abs, inexact=False)


absolute = abs


def tan(x: ArrayLike) -> Any:
    return divide(sin(x), cos(x))


def sinh(x: ArrayLike) -> Any:
    return multiply(subtract(exp(x), exp(negative(x))), 0.5)


def cosh(x: ArrayLike) -> Any:
    return multiply(add(exp(x), exp(negative(x))), 0.5)


def log2(x: ArrayLike) -> Any:
    return divide(log(x), math.log(2.0))


def log10(x: ArrayLike) -> Any:
    return divide(log(x), math.log(10.0))


def square(x: ArrayLike) -> Any:
    return multiply(x, x)


def reciprocal(x: ArrayLike) -> Any:
    return divide(1.0, x)


def clip(x: ArrayLike, a_min: ArrayLike | None = None, a_max: ArrayLike | None = None) -> Any:
    if a_min is not None:
        x = maximum(x, a_min)
    if a_max is not None:
        x = minimum(x, a_max)
    return x


def conj(x: ArrayLike) -> Any:
    """Complex conjugate (the identity on real values)."""
    if isinstance(x, Tracer) and not is_complex(x.aval.dtype):
        x.check_alive()
        return x
    return _unary("conj", x, np.conj, inexact=False)


conjugate = conj


def real(x: ArrayLike) -> Any:
    if isinstance(x, Tracer) and not is_complex(x.aval.dtype):
        x.check_alive()
        return x
    return _unary("real", x, np.real, inexact=False)


def imag(x: ArrayLike) -> Any:
    if isinstance(x, Tracer) and not is_complex(x.aval.dtype):
        return zeros_like(x)
    return _unary("imag", x, np.imag, inexact=False)


def where(condition: ArrayLike, x: ArrayLike, y: ArrayLike) -> Any:
    """Elementwise ``x`` where ``condition`` else ``y`` (broadcast together)."""
    trace = _trace_of((condition, x, y))
    if trace is None:
        return np.where(condition, x, y)
    shape = broadcast_shapes(_shape(condition), _shape(x), _shape(y), what="where")
    if _info(condition)[0] != "bool":
        condition = not_equal(condition, 0)
    dtype = result_type(x, y)
    return trace.emit("select", [_prep(trace, condition, "bool", shape),
                                 _prep(trace, x, dtype, shape), _prep(trace, y, dtype, shape)])


def power(x: ArrayLike, y: ArrayLike) -> Any:
    """x ** y. A constant integer exponent becomes repeated multiplication; 0.5 and -0.5
    become sqrt and rsqrt; anything else is the ``pow`` primitive."""
    trace = _trace_of((x, y))
    if trace is None:
        return np.power(x, y)
    if not isinstance(y, Tracer) and np.ndim(y) == 0 and _info(y)[0] != "bool":
        v = np.asarray(y).item()
        base = _convert(x, result_type(x, y))
        if isinstance(v, int | float) and float(v).is_integer() and builtins.abs(v) <= 256:
            return _integer_pow(base, int(v))
        if v in (0.5, -0.5):
            return sqrt(base) if v == 0.5 else rsqrt(base)
    return _binary("pow", "power", x, y, np.power, inexact=True)


def _integer_pow(x: Any, n: int) -> Any:
    if n == 0:
        return ones_like(x)
    if n < 0:
        return divide(1.0, _integer_pow(x, -n))
    result = None
    base = x
    while n:
        if n & 1:
            result = base if result is None else multiply(result, base)
        n >>= 1
        if n:
            base = multiply(base, base)
    return result


def astype(x: ArrayLike, dtype: Any) -> Any:
    name = _dtype_name(dtype)
    if not isinstance(x, Tracer):
        return np.asarray(x).astype(name)
    x.check_alive()
    if is_complex(x.aval.dtype) and not is_complex(name):
        x = real(x)  # an explicit cast keeps the real part, as NumPy does
    return _convert(x, name)


# --- reductions ------------------------------------------------------------------------------


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


# --- shapes ------------------------------------------------------------------------------------


def shape(x: ArrayLike) -> tuple[int, ...]:
    return _shape(x)


def ndim(x: ArrayLike) -> int:
    return len(_shape(x))


def reshape(x: ArrayLike, newshape: int | Sequence[int], *more: int, order: str = "C") -> Any:
    """Row-major reshape; one entry may be -1. ``x.reshape(2, 3)`` also works."""
    if order != "C":
        raise NotImplementedError("tnp.reshape supports order='C' (row-major) only")
    if more:
        newshape = (newshape, *more)  # type: ignore[assignment]
    dims = [int(newshape)] if isinstance(newshape, int | np.integer) else [int(d) for d in newshape]
    if not isinstance(x, Tracer):
        return np.reshape(x, dims)
    x.check_alive()
    if dims.count(-1) > 1:
        raise ValueError("tnp.reshape: at most one dimension can be -1")
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        if known == 0 or x.size % known:
            raise ValueError(f"tnp.reshape: cannot reshape an array of shape {x.shape} "
                             f"into {tuple(dims)}")
        dims[dims.index(-1)] = x.size // known
    shape_ = tuple(dims)
    if math.prod(shape_) != x.size:
        raise ValueError(f"tnp.reshape: cannot reshape an array of shape {x.shape} (size {x.size}) "
                         f"into shape {shape_}")
    return x if shape_ == x.shape else x.trace.emit("reshape", [x], {"shape": shape_})


def ravel(x: ArrayLike) -> Any:
    return reshape(x, -1)


flatten = ravel


def transpose(x: ArrayLike, axes: Sequence[int] | None = None, *more: int) -> Any:
    """Permute axes (reverse them by default). ``x.transpose(1, 0)`` also works."""
    if more:
        axes = (axes, *more)  # type: ignore[assignment]
    if not isinstance(x, Tracer):
        return np.transpose(x, axes)
    x.check_alive()
    perm = tuple(range(x.ndim))[::-1] if axes is None else tuple(
        _norm_axis(int(a), x.ndim, "transpose") for a in axes)
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"tnp.transpose: axes {axes} are not a permutation of range({x.ndim})")
    return x if perm == tuple(range(x.ndim)) else x.trace.emit("transpose", [x], {"perm": perm})


def swapaxes(x: ArrayLike, axis1: int, axis2: int) -> Any:
    if not isinstance(x, Tracer):
        return np.swapaxes(x, axis1, axis2)
    perm = list(range(x.ndim))
    a, b = _norm_axis(axis1, x.ndim, "swapaxes"), _norm_axis(axis2, x.ndim, "swapaxes")
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


def expand_dims(x: ArrayLike, axis: int) -> Any:
    if not isinstance(x, Tracer):
        return np.expand_dims(x, axis)
    axis = _norm_axis(axis, x.ndim + 1, "expand_dims")
    return reshape(x, x.shape[:axis] + (1,) + x.shape[axis:])


def squeeze(x: ArrayLike, axis: int | Sequence[int] | None = None) -> Any:
    if not isinstance(x, Tracer):
        return np.squeeze(x, axis)
    axes = tuple(i for i, d in enumerate(x.shape) if d == 1) if axis is None else _norm_axes(
        axis, x.ndim, "squeeze")
    if any(x.shape[a] != 1 for a in axes):
        raise ValueError(f"tnp.squeeze: cannot squeeze axes {axes} of shape {x.shape}")
    return reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


def broadcast_to(x: ArrayLike, shape: Sequence[int]) -> Any:
    if not isinstance(x, Tracer):
        return np.broadcast_to(x, shape)
    x.check_alive()
    shape_ = tuple(int(d) for d in shape)
    if broadcast_shapes(x.shape, shape_, what="broadcast_to") != shape_:
        raise ValueError(f"tnp.broadcast_to: cannot broadcast shape {x.shape} to {shape_}")
    return _broadcast_to(x, shape_)


def concatenate(arrays: Sequence[ArrayLike], axis: int = 0) -> Any:
    arrays = list(arrays)
    trace = _trace_of(arrays)
    if trace is None:
        return np.concatenate(arrays, axis=axis)
    ranks = {len(_shape(a)) for a in arrays}
    if len(ranks) != 1 or 0 in ranks:
        raise ValueError("tnp.concatenate: arrays must have the same rank >= 1, got shapes "
                         + " ".join(str(_shape(a)) for a in arrays))
    axis = _norm_axis(axis, ranks.pop(), "concatenate")
    dtype = result_type(*arrays)
    parts = [_prep(trace, a, dtype) for a in arrays]
    if len(parts) == 1:
        return parts[0]
    for p in parts[1:]:
        if p.shape[:axis] + p.shape[axis + 1:] != parts[0].shape[:axis] + parts[0].shape[axis + 1:]:
            raise ValueError(f"tnp.concatenate: shapes {parts[0].shape} and {p.shape} differ "
                             f"outside axis {axis}")
    return trace.emit("concatenate", parts, {"axis": axis})


def stack(arrays: Sequence[ArrayLike], axis: int = 0) -> Any:
    arrays = list(arrays)
    if _trace_of(arrays) is None:
        return np.stack(arrays, axis=axis)
    shapes = {_shape(a) for a in arrays}
    if len(shapes) != 1:
        raise ValueError(f"tnp.stack: all arrays must have the same shape, got {sorted(shapes)}")
    nd = len(shapes.pop())
    axis = _norm_axis(axis, nd + 1, "stack")
    trace = _trace_of(arrays)
    assert trace is not None
    return concatenate([expand_dims(_tracer(trace, a), axis) for a in arrays], axis=axis)


def zeros_like(x: ArrayLike, dtype: Any = None) -> Any:
    return full_like(x, 0, dtype)


def ones_like(x: ArrayLike, dtype: Any = None) -> Any:
    return full_like(x, 1, dtype)


def full_like(x: ArrayLike, fill_value: Any, dtype: Any = None) -> Any:
    """A constant array shaped like ``x`` (no dependence on x's value)."""
    if not isinstance(x, Tracer):
        return np.full_like(x, fill_value, dtype=dtype)
    x.check_alive()
    name = _dtype_name(dtype) if dtype is not None else x.aval.dtype
    return x.trace.constant(np.full(x.shape, fill_value, dtype=name))


def asarray(x: ArrayLike, dtype: Any = None) -> Any:
    if isinstance(x, Tracer):
        return x if dtype is None else astype(x, dtype)
    return np.asarray(x, dtype=dtype)


array = asarray
zeros, ones, full, eye = np.zeros, np.ones, np.full, np.eye
arange, linspace = np.arange, np.linspace


# --- indexing ------------------------------------------------------------------------------------


def getitem(x: ArrayLike, index: Any) -> Any:
    """Basic indexing: integers, slices with positive steps, None and Ellipsis."""
    if not isinstance(x, Tracer):
        return np.asarray(x)[index]
    x.check_alive()
    items = index if isinstance(index, tuple) else (index,)
    for it in items:
        if not (it is None or it is Ellipsis or isinstance(it, slice)
                or (isinstance(it, int | np.integer) and not isinstance(it, bool | np.bool_))):
            raise TypeError(f"tidu.numpy supports basic indexing only (integers, slices, None, "
                            f"...), got {type(it).__name__}; select with tnp.where or a one-hot "
                            "product instead")
    if builtins.sum(it is Ellipsis for it in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = builtins.sum(1 for it in items if it is not None and it is not Ellipsis)
    if used > x.ndim:
        raise IndexError(f"too many indices for array: array is {x.ndim}-dimensional, "
                         f"but {used} were indexed")
    fill = [slice(None)] * (x.ndim - used)
    if Ellipsis in items:
        k = items.index(Ellipsis)
        items = items[:k] + tuple(fill) + items[k + 1:]
    else:
        items = items + tuple(fill)
    start, limit, strides, out_shape = [], [], [], []
    axis = 0
    for it in items:
        if it is None:
            out_shape.append(1)
            continue
        d = x.shape[axis]
        if isinstance(it, slice):
            s, e_, st = it.indices(d)
            if st < 0:
                raise NotImplementedError("negative slice steps are not supported by tidu.numpy "
                                          "(there is no reverse primitive)")
            n = len(range(s, e_, st))
            start.append(s if n else 0)
            limit.append(s + (n - 1) * st + 1 if n else 0)
            strides.append(st)
            out_shape.append(n)
        else:
            i = int(it)
            if not -d <= i < d:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {d}")
            i %= d
            start.append(i)
            limit.append(i + 1)
            strides.append(1)
        axis += 1
    out = x
    if (tuple(start), tuple(limit), tuple(strides)) != ((0,) * x.ndim, x.shape, (1,) * x.ndim):
        out = x.trace.emit("slice", [x], {"start": tuple(start), "limit": tuple(limit),
                                          "strides": tuple(strides)})
    return reshape(out, tuple(out_shape))


# --- contractions ---------------------------------------------------------------------


def _dot_general(a: Tracer, b: Tracer, lc: Sequence[int], rc: Sequence[int],
                 lb: Sequence[int] = (), rb: Sequence[int] = ()) -> Tracer:
    return a.trace.emit("dot_general", [a, b], {
        "lhs_contract": tuple(lc), "rhs_contract": tuple(rc),
        "lhs_batch": tuple(lb), "rhs_batch": tuple(rb)})


def _pair(x: Any, y: Any, what: str) -> tuple[Tracer, Tracer] | None:
    trace = _trace_of((x, y))
    if trace is None:
        return None
    dtype = result_type(x, y)
    if dtype == "bool":
        dtype = "int64"
    return _prep(trace, x, dtype), _prep(trace, y, dtype)


def _check_contract(a: Tracer, i: int, b: Tracer, j: int, what: str) -> None:
    if a.shape[i] != b.shape[j]:
        raise ValueError(f"tnp.{what}: shapes {a.shape} and {b.shape} are not aligned: "
                         f"axis {i} ({a.shape[i]}) != axis {j} ({b.shape[j]})")


def matmul(x: ArrayLike, y: ArrayLike) -> Any:
    """NumPy matmul: 1-D operands are vectors, leading axes are broadcast batch axes."""
    pair = _pair(x, y, "matmul")
    if pair is None:
        return np.matmul(x, y)
    a, b = pair
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("tnp.matmul: operands must have at least one axis; use * for scalars")
    if b.ndim == 1:
        _check_contract(a, a.ndim - 1, b, 0, "matmul")
        return _dot_general(a, b, [a.ndim - 1], [0])
    if a.ndim == 1:
        _check_contract(a, 0, b, b.ndim - 2, "matmul")
        return _dot_general(a, b, [0], [b.ndim - 2])
    _check_contract(a, a.ndim - 1, b, b.ndim - 2, "matmul")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], what="matmul")
    a = _broadcast_to(a, batch + a.shape[-2:])
    b = _broadcast_to(b, batch + b.shape[-2:])
    nb = len(batch)
    return _dot_general(a, b, [nb + 1], [nb], range(nb), range(nb))


def dot(x: ArrayLike, y: ArrayLike) -> Any:
    """NumPy dot: sum over the last axis of x and the second-to-last (or only) axis of y."""
    pair = _pair(x, y, "dot")
    if pair is None:
        return np.dot(x, y)
    a, b = pair
    if a.ndim == 0 or b.ndim == 0:
        return multiply(a, b)
    j = 0 if b.ndim == 1 else b.ndim - 2
    _check_contract(a, a.ndim - 1, b, j, "dot")
    return _dot_general(a, b, [a.ndim - 1], [j])


def inner(x: ArrayLike, y: ArrayLike) -> Any:
    pair = _pair(x, y, "inner")
    if pair is None:
        return np.inner(x, y)
    a, b = pair
    if a.ndim == 0 or b.ndim == 0:
        return multiply(a, b)
    _check_contract(a, a.ndim - 1, b, b.ndim - 1, "inner")
    return _dot_general(a, b, [a.ndim - 1], [b.ndim - 1])


def vdot(x: ArrayLike, y: ArrayLike) -> Any:
    """sum(conj(x) * y) over the flattened arrays."""
    if _trace_of((x, y)) is None:
        return np.vdot(x, y)
    return inner(ravel(conj(x)), ravel(y))


def outer(x: ArrayLike, y: ArrayLike) -> Any:
    if _trace_of((x, y)) is None:
        return np.outer(x, y)
    return multiply(reshape(ravel(x), (-1, 1)), reshape(ravel(y), (1, -1)))


def trace(x: ArrayLike) -> Any:
    """Sum of the diagonal of a square matrix."""
    if not isinstance(x, Tracer):
        return np.trace(x)
    return einsum("ii", x)


def einsum(subscripts: str, *operands: ArrayLike) -> Any:
    """Einstein summation: pairwise ``dot_general`` contractions left to right, repeated
    labels in one operand (diagonals, traces) by a product with the identity, and labels
    used by one operand only summed first. ``...`` broadcasts as in NumPy."""
    tr = _trace_of(operands)
    if tr is None:
        return np.einsum(subscripts, *operands)
    dtype = result_type(*operands)
    ops = [_prep(tr, o, "int64" if dtype == "bool" else dtype) for o in operands]
    terms, out = _einsum.parse(subscripts, [o.ndim for o in ops])
    sizes: dict[str, int] = {}
    for o, t in zip(ops, terms, strict=True):
        for c, d in zip(t, o.shape, strict=True):
            if sizes.get(c, 1) not in (1, d) and d != 1:
                raise ValueError(f"tnp.einsum: label {c!r} has sizes {sizes[c]} and {d} in "
                                 f"{subscripts!r}")
            sizes[c] = builtins.max(sizes.get(c, 1), d)
    work = []
    for k, (o, t) in enumerate(zip(ops, terms, strict=True)):
        o = _broadcast_to(o, tuple(sizes[c] for c in t)) if o.shape != tuple(sizes[c] for c in t) \
            else o
        o, t = _einsum_diagonals(o, t)
        others = set(out).union(*(terms[j] for j in range(len(terms)) if j != k))
        o, t = _sum_labels(o, t, [c for c in t if c not in others])
        work.append((o, t))
    cur, ct = work[0]
    for k in range(1, len(work)):
        other, ot = work[k]
        later = set(out).union(*(t for _, t in work[k + 1:]))
        shared = [c for c in ct if c in ot]
        batch = [c for c in shared if c in later]
        contract = [c for c in shared if c not in later]
        cur = _dot_general(cur, other, [ct.index(c) for c in contract],
                           [ot.index(c) for c in contract], [ct.index(c) for c in batch],
                           [ot.index(c) for c in batch])
        ct = "".join(batch) + "".join(c for c in ct if c not in ot) + "".join(
            c for c in ot if c not in shared)
    cur, ct = _sum_labels(cur, ct, [c for c in ct if c not in out])
    return transpose(cur, [ct.index(c) for c in out])


def _einsum_diagonals(o: Tracer, t: str) -> tuple[Tracer, str]:
    """Reduce repeated labels of one operand: multiply by the identity, sum one axis."""
    while len(set(t)) != len(t):
        c = next(c for c in t if t.count(c) > 1)
        p = t.index(c)
        q = t.index(c, p + 1)
        n = o.shape[p]
        eye_ = o.trace.constant(np.eye(n, dtype=o.aval.dtype))
        mask = o.trace.emit("broadcast_in_dim", [eye_], {"shape": o.shape, "dims": (p, q)})
        o = o.trace.emit("reduce_sum", [multiply(o, mask)], {"axes": (q,)})
        t = t[:q] + t[q + 1:]
    return o, t


def _sum_labels(o: Tracer, t: str, labels: Sequence[str]) -> tuple[Tracer, str]:
    if not labels:
        return o, t
    axes = tuple(sorted(t.index(c) for c in labels))
    return o.trace.emit("reduce_sum", [o], {"axes": axes}), "".join(c for c in t if c not in labels)


# --- tracer operators and methods ----------------------------------------------------


def _install() -> None:
    def binary(fn: Any, reflected: bool = False) -> Any:
        return (lambda self, other: fn(other, self)) if reflected else (
            lambda self, other: fn(self, other))

    for name, fn in {"add": add, "sub": subtract, "mul": multiply, "truediv": divide,
                     "pow": power, "matmul": matmul}.items():
        setattr(Tracer, f"__{name}__", binary(fn))
        setattr(Tracer, f"__r{name}__", binary(fn, reflected=True))
    for name, fn in {"lt": less, "le": less_equal, "gt": greater, "ge": greater_equal,
                     "eq": equal, "ne": not_equal}.items():
        setattr(Tracer, f"__{name}__", binary(fn))
    Tracer.__array_ufunc__ = _array_ufunc
    Tracer.__neg__ = negative
    Tracer.__pos__ = positive
    Tracer.__abs__ = abs
    Tracer.__getitem__ = getitem
    Tracer.T = property(transpose)
    Tracer.mT = property(lambda self: swapaxes(self, -1, -2))
    Tracer.real = property(real)
    Tracer.imag = property(imag)
    for name, fn in {"conj": conj, "conjugate": conj, "reshape": reshape, "transpose": transpose,
                     "astype": astype, "dot": dot, "ravel": ravel, "flatten": ravel,
                     "squeeze": squeeze, "swapaxes": swapaxes, "clip": clip}.items():
        setattr(Tracer, name, fn)
    for fn in (sum, mean, prod, max, min):
        setattr(Tracer, fn.__name__, _reduction_method(fn))


def _array_ufunc(self: Tracer, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """``np.exp(tracer)``, ``ndarray + tracer``: the tidu.numpy function of that name."""
    fn = globals().get(ufunc.__name__)
    if method != "__call__" or kwargs or not callable(fn):
        return NotImplemented
    return fn(*inputs)


def _reduction_method(fn: Any) -> Any:
    """``x.sum(...)`` etc., also as called by ``np.sum(x)`` (dtype=, out=)."""

    def method(self: Tracer, axis: Any = None, dtype: Any = None, out: Any = None,
               keepdims: bool = False, **kwargs: Any) -> Any:
        if out is not None or kwargs:
            extra = ", ".join(["out"] * (out is not None) + list(kwargs))
            raise TypeError(f"{fn.__name__}: {extra} is not supported on traced arrays")
        result = fn(self, axis=axis, keepdims=keepdims)
        return result if dtype is None else astype(result, dtype)

    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


_install()

__all__ = [n for n in dir() if not n.startswith("_") and n not in (
    "annotations", "builtins", "math", "np", "Any", "Sequence", "Trace", "TraceError",
    "is_complex", "is_inexact", "real_dtype")]
