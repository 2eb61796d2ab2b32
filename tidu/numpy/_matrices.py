"""tidu.numpy diagonals and triangles (``diagonal``, ``trace``, ``diag``, ``tril``, ``triu``)
and the constant matrices of NumPy (``identity``, ``tri``, ``empty``). Diagonals are read
with a strided slice of the flattened matrix and written with an interior ``pad``: exact,
also for inf and nan entries."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from tidu.numpy._core import ArrayLike, _norm_axis, numpy_fallback
from tidu.numpy._elementwise import where
from tidu.numpy._filled import zeros_like
from tidu.numpy._reductions import sum
from tidu.numpy._shapes import moveaxis, ravel, reshape


@numpy_fallback(np.diagonal)
def diagonal(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    """The diagonal ``offset`` (above the main one if > 0) of the matrices in axes
    ``axis1``, ``axis2``; it becomes the last axis."""
    a1, a2 = _norm_axis(axis1, a.ndim, "diagonal"), _norm_axis(axis2, a.ndim, "diagonal")
    if a1 == a2:
        raise ValueError("tnp.diagonal: axis1 and axis2 must differ")
    m = moveaxis(a, (a1, a2), (-2, -1))
    n_rows, n_cols = m.shape[-2:]
    lead = m.shape[:-2]
    r0, c0 = (0, offset) if offset >= 0 else (-offset, 0)
    length = builtins.max(0, builtins.min(n_rows - r0, n_cols - c0))
    if length == 0:
        return m[..., :0, 0]
    m = m[..., r0:r0 + length, c0:c0 + length]
    flat = reshape(m, (*lead, length * length))
    return flat[..., ::length + 1]


@numpy_fallback(np.trace, accumulates=True)
def trace(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None,
          out: None = None) -> Any:
    """Sum of the diagonal ``offset`` (of the matrices in axes ``axis1``, ``axis2``), in
    ``dtype`` as ``sum``'s (NumPy's signature; ``out=`` is refused, as by the reductions)."""
    if out is not None:
        raise TypeError("tnp.trace: out= is not supported (arrays are immutable); use the result")
    return sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


@numpy_fallback(np.diag)
def diag(v: ArrayLike, k: int = 0) -> Any:
    """For a 1-D ``v``: the square matrix with ``v`` on diagonal ``k``; for a 2-D ``v``: its
    diagonal ``k``."""
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ValueError(f"tnp.diag: input must be 1-D or 2-D, got shape {v.shape}")
    n = v.shape[0]
    size = n + builtins.abs(k)
    start = builtins.max(-k, 0) * size + builtins.max(k, 0)
    used = start + (n - 1) * (size + 1) + 1 if n else start  # (no entries: the |k| x |k| zero matrix)
    zero = v.trace.constant(np.zeros((), v.aval.dtype))
    flat = v.trace.emit("pad", [v, zero], {"low": (start,), "high": (size * size - used,),
                                           "interior": (size,)})
    return reshape(flat, (size, size))


@numpy_fallback(np.diagflat)
def diagflat(v: ArrayLike, k: int = 0) -> Any:
    """The flattened input on diagonal ``k`` of a square matrix."""
    return diag(ravel(v), k)


def _triangle(m: Any, mask: np.ndarray) -> Any:
    return where(mask, m, zeros_like(m))


@numpy_fallback(np.tril)
def tril(m: ArrayLike, k: int = 0) -> Any:
    """The lower triangle (on and below diagonal ``k``) of the last two axes; zeros above."""
    if m.ndim < 2:
        raise ValueError("tnp.tril: input must have at least two axes")
    return _triangle(m, np.tri(*m.shape[-2:], k=k, dtype=bool))


@numpy_fallback(np.triu)
def triu(m: ArrayLike, k: int = 0) -> Any:
    """The upper triangle (on and above diagonal ``k``) of the last two axes; zeros below."""
    if m.ndim < 2:
        raise ValueError("tnp.triu: input must have at least two axes")
    return _triangle(m, ~np.tri(*m.shape[-2:], k=k - 1, dtype=bool))


def identity(n: int, dtype: Any = None) -> np.ndarray:
    """The n x n identity matrix (a NumPy constant)."""
    return np.identity(n, dtype=dtype)


def tri(n: int, m: int | None = None, k: int = 0, dtype: Any = float) -> np.ndarray:
    """Ones on and below diagonal ``k`` (a NumPy constant)."""
    return np.tri(n, m, k, dtype=dtype)


def empty(shape: Any, dtype: Any = float) -> np.ndarray:
    """A new array; unlike NumPy's its entries are zeros (as in JAX), so results never
    depend on uninitialized memory."""
    return np.zeros(shape, dtype=dtype)


def empty_like(x: ArrayLike, dtype: Any = None) -> Any:
    """``zeros_like`` (as in JAX: no uninitialized memory)."""
    return zeros_like(x, dtype)
