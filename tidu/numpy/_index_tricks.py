"""tidu.numpy index constructors and window functions, as jax.numpy's: ``indices``,
``fromfunction``, ``tril_indices``/``triu_indices`` (and ``_from``), ``diag_indices`` (and
``_from``), ``mask_indices``, ``ix_``, ``mgrid``, ``ogrid``, ``r_``, ``c_``, ``s_``,
``index_exp``, ``unravel_index``, ``ravel_multi_index``, ``hamming``, ``hanning``,
``blackman``, ``bartlett``, ``kaiser``.

Their results depend on shapes only, so they are NumPy arrays (constants), also when the
shape is a traced array's: they index traced arrays as any constant index does. The
exceptions take traced values: ``ix_`` and ``r_``/``c_`` of traced arrays, ``unravel_index``
and ``ravel_multi_index`` of traced indices (jax.numpy's out-of-range rules: clipped, or
the ``mode``), ``kaiser`` of a traced ``beta``, and ``fromfunction`` of a function that
closes over a traced value."""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tidu.numpy._casting import asarray, astype
from tidu.numpy._core import ArrayLike, _shape, _trace_of
from tidu.numpy._dtypes import result_type
from tidu.numpy._elementwise import clip, multiply, where
from tidu.numpy._shapes import concatenate, reshape, transpose
from tidu.numpy._ufuncs import floor_divide, i0, remainder
from tidu.trace.tracing import Tracer

euler_gamma = float(np.euler_gamma)
s_ = np.s_
index_exp = np.index_exp
mgrid = np.mgrid
ogrid = np.ogrid


# --- index arrays of shapes --------------------------------------------------------------


def _dims(name: str, shape: Any) -> tuple[int, ...]:
    if isinstance(shape, Tracer) or builtins.any(isinstance(d, Tracer) for d in np.atleast_1d(
            np.asarray(shape, dtype=object)).ravel()):
        raise TypeError(f"tnp.{name}: a shape is made of Python ints (x.shape), not traced values")
    try:
        return tuple(operator.index(d) for d in (shape if isinstance(shape, Sequence | np.ndarray) else (shape,)))
    except TypeError:
        raise TypeError(f"tnp.{name}: the shape must be ints, got {shape!r:.60}") from None


def indices(dimensions: Sequence[int], dtype: Any = int, sparse: bool = False) -> Any:
    """An array (or with ``sparse``, a tuple of broadcastable arrays) of the grid's
    indices, as NumPy's: a constant."""
    return np.indices(_dims("indices", dimensions), dtype=dtype, sparse=sparse)


def fromfunction(function: Callable[..., Any], shape: Sequence[int], *, dtype: Any = float, **kwargs: Any) -> Any:
    """``function`` called once on the index arrays (``indices(shape, dtype)``), as NumPy:
    a function that closes over a traced value gives a traced result."""
    return function(*np.indices(_dims("fromfunction", shape), dtype=dtype), **kwargs)


def _int(name: str, what: str, v: Any) -> int:
    if isinstance(v, Tracer):
        raise TypeError(f"tnp.{name}: {what} must be a Python int (it fixes the result's shape), got a traced value")
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"tnp.{name}: {what} must be an int, got {v!r:.60}") from None


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices of the lower triangle of an (n, m) matrix (diagonal ``k``)."""
    return np.tril_indices(_int("tril_indices", "n", n), _int("tril_indices", "k", k),
                           None if m is None else _int("tril_indices", "m", m))


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices of the upper triangle of an (n, m) matrix (diagonal ``k``)."""
    return np.triu_indices(_int("triu_indices", "n", n), _int("triu_indices", "k", k),
                           None if m is None else _int("triu_indices", "m", m))


def _matrix_shape(name: str, arr: Any) -> tuple[int, int]:
    shape = _shape(arr)
    if len(shape) != 2:
        raise ValueError(f"tnp.{name}: the input must be 2-D, got shape {tuple(shape)}")
    return shape[0], shape[1]


def tril_indices_from(arr: ArrayLike, k: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``tril_indices`` of a 2-D array's shape (the array may be traced)."""
    n, m = _matrix_shape("tril_indices_from", arr)
    return tril_indices(n, k, m)


def triu_indices_from(arr: ArrayLike, k: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``triu_indices`` of a 2-D array's shape (the array may be traced)."""
    n, m = _matrix_shape("triu_indices_from", arr)
    return triu_indices(n, k, m)


def diag_indices(n: int, ndim: int = 2) -> tuple[np.ndarray, ...]:
    """The indices of the main diagonal of an n x ... x n array of rank ``ndim``."""
    return np.diag_indices(_int("diag_indices", "n", n), _int("diag_indices", "ndim", ndim))


def diag_indices_from(arr: ArrayLike) -> tuple[np.ndarray, ...]:
    """``diag_indices`` of an array whose sides are all equal (the array may be traced)."""
    shape = _shape(arr)
    if len(shape) < 2:
        raise ValueError(f"tnp.diag_indices_from: the input must be at least 2-D, got shape {tuple(shape)}")
    if len(set(shape)) != 1:
        raise ValueError(f"tnp.diag_indices_from: all sides of the input must be equal, got shape {tuple(shape)}")
    return np.diag_indices(shape[0], len(shape))


def mask_indices(n: int, mask_func: Callable[..., Any], k: int = 0, *, size: int | None = None) -> Any:
    """The indices where ``mask_func(ones((n, n)), k)`` (``tnp.triu``, ``tnp.tril``, ...) is
    nonzero, as NumPy's; ``size`` (jax.numpy's) must then equal their number."""
    a = np.asarray(mask_func(np.ones((_int("mask_indices", "n", n), n), int), k))
    out = np.nonzero(a != 0)
    if size is not None and size != out[0].size:
        raise ValueError(f"tnp.mask_indices: size={size} but the mask has {out[0].size} entries")
    return out


def ix_(*args: ArrayLike) -> tuple[Any, ...]:
    """An open mesh of 1-D index arrays (each reshaped to run along its own axis), as NumPy's;
    traced integer arrays are reshaped (a traced bool array would need its nonzero
    indices, whose number depends on the values)."""
    if not builtins.any(isinstance(a, Tracer) for a in args):
        return np.ix_(*args)
    _trace_of(args)
    n = len(args)
    out = []
    for i, a in enumerate(args):
        shape = _shape(a)
        if len(shape) != 1:
            raise ValueError(f"tnp.ix_: argument {i} must be 1-D, got shape {tuple(shape)}")
        if isinstance(a, Tracer) and a.aval.dtype == "bool":
            raise TypeError(f"tnp.ix_: argument {i} is a traced bool array (its indices depend on the values); "
                            "pass integer indices")
        a = np.asarray(a) if not isinstance(a, Tracer) else a
        if not isinstance(a, Tracer) and a.dtype == bool:
            (a,) = np.nonzero(a)
        new = [1] * n
        new[i] = shape[0] if not isinstance(a, np.ndarray) else a.shape[0]
        out.append(reshape(a, tuple(new)) if isinstance(a, Tracer) else a.reshape(new))
    return tuple(out)


# --- r_ and c_ ---------------------------------------------------------------------------


class _AxisConcatenator:
    """``r_[...]`` / ``c_[...]``: NumPy's, with traced items concatenated by tidu (slices
    become ranges, a leading string ``"axis,ndmin,trans1d"`` directs as in NumPy)."""

    def __init__(self, name: str, axis: int, ndmin: int, trans1d: int, numpy_obj: Any) -> None:
        self._name, self._defaults, self._np = name, (axis, ndmin, trans1d), numpy_obj

    def __getitem__(self, key: Any) -> Any:
        items = key if isinstance(key, tuple) else (key,)
        if not builtins.any(isinstance(v, Tracer) for v in items):
            return self._np[key]
        _trace_of(items)
        axis, ndmin, trans1d = self._defaults
        objs: list[Any] = []
        for k, item in enumerate(items):
            if isinstance(item, str):
                if k != 0:
                    raise ValueError(f"tnp.{self._name}: a string directive must be the first item")
                if item in ("r", "c"):
                    raise ValueError(f"tnp.{self._name}: the matrix directives 'r' and 'c' are not supported")
                try:
                    parts = [int(p) for p in item.split(",")]
                except ValueError:
                    raise ValueError(f"tnp.{self._name}: unknown directive {item!r}; write 'axis[,ndmin[,trans1d]]'"
                                     ) from None
                if len(parts) > 3:
                    raise ValueError(f"tnp.{self._name}: unknown directive {item!r}; write 'axis[,ndmin[,trans1d]]'")
                axis, ndmin, trans1d = (*parts, *self._defaults[len(parts):])
                continue
            if isinstance(item, slice):
                new = np.r_[item]
                if ndmin > 1:
                    new = np.array(new, ndmin=ndmin)
                    if trans1d != -1:
                        new = new.swapaxes(-1, trans1d)
                objs.append(new)
                continue
            item_ndim = len(_shape(item))
            if isinstance(item, Tracer):
                new = reshape(item, (1,) * (ndmin - item_ndim) + item.shape) if item_ndim < ndmin else item
            else:
                new = item if type(item) in (int, float, complex, bool) and ndmin == 0 else \
                    np.array(item, ndmin=builtins.max(ndmin, 1 if np.ndim(item) == 0 else 0))
                if np.ndim(item) == 0 and item_ndim < ndmin:
                    item_ndim = 0
            if trans1d != -1 and item_ndim < ndmin:
                k2, k1 = ndmin - item_ndim, trans1d
                if k1 < 0:
                    k1 += k2 + 1
                order = list(range(ndmin))
                new = transpose(new, order[:k1] + order[k2:] + order[k1:k2])
            elif isinstance(item, Tracer) and new.ndim == 0:
                new = reshape(new, (1,))
            objs.append(new)
        # Python numbers are weakly typed (np.r_[float32 array, 1.0] is float32)
        dtype = result_type(*[i for i in items if not isinstance(i, str | slice)])
        return concatenate([astype(asarray(o), dtype) for o in objs], axis=axis)

    def __len__(self) -> int:
        return 0


r_ = _AxisConcatenator("r_", 0, 1, -1, np.r_)
c_ = _AxisConcatenator("c_", -1, 2, 0, np.c_)


# --- flat and multi-dimensional indices ----------------------------------------------------


def unravel_index(indices: ArrayLike, shape: Sequence[int]) -> tuple[Any, ...]:
    """The coordinates in an array of ``shape`` of the flat ``indices``. Constant indices
    out of range are NumPy's ValueError; traced ones are clipped, as jax.numpy's (an index
    below -size to the first element, at or past size to the last; -size..-1 count from
    the end)."""
    dims = _dims("unravel_index", shape)
    if not isinstance(indices, Tracer):
        return np.unravel_index(indices, dims)
    if not indices.aval.dtype.startswith(("int", "uint")):
        raise TypeError(f"tnp.unravel_index: the indices must be integers, got {indices.aval.dtype}")
    rest: Any = indices
    out: list[Any] = [None] * len(dims)
    for i in reversed(range(len(dims))):
        rest, out[i] = floor_divide(rest, dims[i]), remainder(rest, dims[i])
    if not dims:
        return ()
    above = rest > 0
    below = rest < -1 if not indices.aval.dtype.startswith("uint") else np.zeros((), bool)
    return tuple(where(above, d - 1, where(below, 0, o)) for d, o in zip(dims, out, strict=True))


def ravel_multi_index(multi_index: Sequence[ArrayLike], dims: Sequence[int], mode: str = "raise",
                      order: str = "C") -> Any:
    """The flat indices of coordinates in an array of shape ``dims``. Constant coordinates:
    NumPy's (``mode`` one mode, or one per axis). Traced ones: jax.numpy's, which needs
    ``mode="wrap"`` or ``"clip"`` (``"raise"`` cannot check traced values)."""
    dims_ = _dims("ravel_multi_index", dims)
    if not builtins.any(isinstance(i, Tracer) for i in multi_index):
        return np.ravel_multi_index(multi_index, dims_, mode=mode, order=order)
    if len(multi_index) != len(dims_):
        raise ValueError(f"tnp.ravel_multi_index: {len(multi_index)} index arrays for {len(dims_)} dims")
    if mode == "raise":
        raise TypeError("tnp.ravel_multi_index: mode='raise' cannot check traced indices; pass mode='wrap' or "
                        "mode='clip' (jax.numpy's rule under jit)")
    if order not in ("C", "F"):
        raise ValueError(f"tnp.ravel_multi_index: order must be 'C' or 'F', got {order!r}")
    modes = [mode] * len(dims_) if isinstance(mode, str) else list(mode)
    dtype = result_type(0, *multi_index)  # (int64, or the indices' own integer type, as jax.numpy's)
    if not dtype.startswith(("int", "uint")):
        raise TypeError("tnp.ravel_multi_index: the indices must be integers")
    strides = np.cumprod((1, *dims_[:-1])) if order == "F" else np.cumprod((1, *dims_[1:][::-1]))[::-1]
    result: Any = np.zeros((), dtype)
    for i, d, s, md in zip(multi_index, dims_, strides, modes, strict=True):
        if md == "clip":
            i = clip(i, 0, d - 1)
        elif md == "wrap":
            i = remainder(i, d)
        else:
            raise ValueError(f"tnp.ravel_multi_index: mode must be 'wrap' or 'clip' for traced indices, got {md!r}")
        result = result + multiply(astype(asarray(i), dtype), int(s))
    return result


# --- window functions ----------------------------------------------------------------------


def _window_length(name: str, M: Any) -> int:
    return _int(name, "M", M)


def hamming(M: int) -> np.ndarray:
    """NumPy's Hamming window of ``M`` points (float64)."""
    return np.hamming(_window_length("hamming", M))


def hanning(M: int) -> np.ndarray:
    """NumPy's Hann window of ``M`` points (float64)."""
    return np.hanning(_window_length("hanning", M))


def blackman(M: int) -> np.ndarray:
    """NumPy's Blackman window of ``M`` points (float64)."""
    return np.blackman(_window_length("blackman", M))


def bartlett(M: int) -> np.ndarray:
    """NumPy's Bartlett (triangular) window of ``M`` points (float64)."""
    return np.bartlett(_window_length("bartlett", M))


def kaiser(M: int, beta: ArrayLike) -> Any:
    """The Kaiser window of ``M`` points, ``i0(beta * sqrt(1 - (2n/(M-1) - 1)**2)) / i0(beta)``:
    NumPy's for a constant ``beta``; a traced ``beta`` is differentiated through ``i0``."""
    m = _window_length("kaiser", M)
    if not isinstance(beta, Tracer):
        return np.kaiser(m, beta)
    dtype = result_type("float64", beta)
    if m < 1:
        return astype(asarray(beta), dtype)[None][:0]
    if m == 1:
        return astype(asarray(beta), dtype)[None] * 0 + 1
    n = np.arange(m)
    alpha = (m - 1) / 2.0
    ratio = np.sqrt(np.maximum(1 - ((n - alpha) / alpha) ** 2, 0.0))
    b = astype(asarray(beta), dtype)
    return i0(b * ratio) / i0(b)
