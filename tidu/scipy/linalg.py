"""``scipy.linalg`` on tidu values, as ``jax.scipy.linalg``: Cholesky factor-and-solve,
triangular solves, and the functions NumPy also has (``solve``, ``inv``, ``det``,
``pinv``, ``svd``, ``svdvals``, ``qr``, ``eigh``: ``tidu.numpy.linalg``'s), the matrix exponential
``expm`` with its Frechet derivative ``expm_frechet``, and the LU factorization ``lu``,
``lu_factor``, ``lu_solve`` (primitives of their own, docs/linalg.md). Composed
from tidu's linear algebra primitives, so differentiated, simplified and lowered like any
program.
Called with NumPy values, the functions compute SciPy's (or NumPy's) results.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tidu.numpy as tnp
from tidu.numpy import ArrayLike, op
from tidu.numpy import linalg as nla
from tidu.numpy.linalg import det, eigh, inv, pinv, qr, solve, solve_triangular, svd, svdvals


def cholesky(a: ArrayLike, lower: bool = False) -> Any:
    """``scipy.linalg.cholesky``: the upper factor U (``a = U^H U``) by default, as SciPy,
    the lower one with ``lower=True``; of the Hermitian part, nan where it is not
    positive definite (``tidu.numpy.linalg.cholesky``)."""
    return nla.cholesky(a, upper=not lower)


def cho_factor(a: ArrayLike, lower: bool = False) -> tuple[Any, bool]:
    """``(c, lower)`` for ``cho_solve``: c the Cholesky factor (upper unless ``lower``),
    zero in its other triangle (SciPy leaves what was there). The factor is the Hermitian
    part's, so derivatives with respect to ``a`` are symmetric: JAX's ``cho_factor`` reads
    one triangle, and its gradient, symmetrized, is tidu's."""
    if not isinstance(lower, bool | np.bool_):
        raise TypeError(f"tidu.scipy.linalg.cho_factor: lower must be a bool, got {type(lower).__name__}")
    return cholesky(a, lower=bool(lower)), bool(lower)


def cho_solve(c_and_lower: tuple[ArrayLike, bool], b: ArrayLike) -> Any:
    """x with ``a x = b`` from ``cho_factor(a)``: two triangular solves (b a vector (n,)
    or matrices (..., n, k))."""
    try:
        c, lower = c_and_lower
    except (TypeError, ValueError):
        raise TypeError("tidu.scipy.linalg.cho_solve takes (c, lower) as cho_factor returns it, "
                        f"got {type(c_and_lower).__name__}") from None
    if lower:  # L L^H x = b
        return solve_triangular(c, solve_triangular(c, b, lower=True), trans=2, lower=True)
    # U^H U x = b
    return solve_triangular(c, solve_triangular(c, b, trans=2, lower=False), lower=False)


# --- the matrix exponential ------------------------------------------------------------------


def _inexact(x: ArrayLike) -> Any:
    """x as an array (NumPy's, or a tracer) of a float or complex dtype (ints to float64)."""
    dtype = tnp.result_type(x, 1.0)
    return tnp.asarray(x, dtype=dtype)


def _check_square(fn: str, name: str, x: ArrayLike) -> tuple[int, ...]:
    shape = tuple(tnp.shape(x))
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"tidu.scipy.linalg.{fn}: {name} must be a square matrix or a stack of them (..., n, n), "
                         f"got shape {shape}")
    return shape


_expm = op("expm")
_expm_frechet = op("expm_frechet")


def expm(A: ArrayLike, *, upper_triangular: bool = False, max_squarings: int = 16) -> Any:  # noqa: N803
    """``scipy.linalg.expm``: the matrix exponential of each square matrix (leading axes
    batch), real or complex; on NumPy values SciPy's. Traced: scaling and squaring with a
    Pade approximant (degree 13 in double precision, 7 in single; Higham 2005), as many
    squarings as the 1-norm needs; its derivative is the Frechet derivative
    (``expm_frechet``). ``upper_triangular`` and ``max_squarings`` are jax.scipy.linalg's
    hints and are not read."""
    _check_square("expm", "A", A)
    return _expm(_inexact(A))


def expm_frechet(A: ArrayLike, E: ArrayLike, *, method: str | None = None,  # noqa: N803
                 compute_expm: bool = True) -> Any:
    """``scipy.linalg.expm_frechet``: ``(expm(A), L)`` with L the Frechet derivative of expm
    at A in the direction E (``L`` alone without ``compute_expm``); leading axes batch.
    L is computed as the top-right block of ``expm([[A, E], [0, A]])``; ``method`` (SciPy's
    'SPS' or 'blockEnlarge') is accepted and not read."""
    _check_square("expm_frechet", "A", A)
    _check_square("expm_frechet", "E", E)
    if tnp.shape(A)[-1] != tnp.shape(E)[-1]:
        raise ValueError(f"tidu.scipy.linalg.expm_frechet: E must have A's matrix size, got shapes "
                         f"{tuple(tnp.shape(A))} and {tuple(tnp.shape(E))}")
    if method not in (None, "SPS", "blockEnlarge"):
        raise ValueError(f"tidu.scipy.linalg.expm_frechet: method={method!r}; use None, 'SPS' or 'blockEnlarge'")
    a, e = _inexact(A), _inexact(E)
    dtype = tnp.result_type(a, e)
    batch = tnp.broadcast_shapes(tnp.shape(a)[:-2], tnp.shape(e)[:-2])
    a = tnp.broadcast_to(tnp.asarray(a, dtype=dtype), batch + tnp.shape(a)[-2:])
    e = tnp.broadcast_to(tnp.asarray(e, dtype=dtype), batch + tnp.shape(e)[-2:])
    frechet = _expm_frechet(a, e)
    return (_expm(a), frechet) if compute_expm else frechet


# --- LU ---------------------------------------------------------------------------------------

_lu = op("lu")
_lu_pivots = op("lu_pivots")
_permutation_matrix = op("permutation_matrix")


def _lu_matrices(fn: str, a: ArrayLike) -> Any:
    shape = tuple(tnp.shape(a))
    if len(shape) < 2:
        raise ValueError(f"tidu.scipy.linalg.{fn}: a must be a matrix or a stack of them (..., m, n), "
                         f"got shape {shape}")
    return _inexact(a)


def lu(a: ArrayLike, permute_l: bool = False, overwrite_a: bool = False,
       check_finite: bool = True) -> tuple[Any, ...]:
    """``scipy.linalg.lu``: ``(p, l, u)`` with ``a = p @ l @ u`` (LU with partial pivoting,
    LAPACK's getrf; leading axes batch), or ``(p @ l, u)`` with ``permute_l``. For (m, n)
    matrices and k = min(m, n): ``p`` an m x m permutation matrix of a's dtype, ``l`` unit
    lower trapezoidal (m, k), ``u`` upper trapezoidal (k, n). Derivatives (of l and u; p is
    piecewise constant) need u's diagonal nonzero. ``overwrite_a`` and ``check_finite`` are
    not read."""
    x = _lu_matrices("lu", a)
    m, n = tnp.shape(x)[-2:]
    k = min(m, n)
    packed, piv = _lu(x), _lu_pivots(x)
    dtype = tnp.result_type(x)
    low = tnp.tril(packed[..., :, :k], -1) + np.eye(m, k, dtype=dtype)
    up = tnp.triu(packed[..., :k, :])
    rest = np.full(tuple(tnp.shape(piv))[:-1] + (m - k,), -1, np.int32)  # rows past k: no swap
    p = tnp.swapaxes(tnp.asarray(_permutation_matrix(tnp.concatenate([piv, rest], axis=-1)), dtype=dtype), -1, -2)
    return (tnp.matmul(p, low), up) if permute_l else (p, low, up)


def lu_factor(a: ArrayLike, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Any, Any]:
    """``scipy.linalg.lu_factor``: ``(lu, piv)``, the packed factors of (..., m, n) matrices
    (L below the diagonal, its unit diagonal not stored, U on and above it) and LAPACK's
    0-based row interchanges (int32, (..., min(m, n)): row k was swapped with row
    ``piv[k]``, in turn); leading axes batch. ``lu_solve`` takes square ones.
    ``overwrite_a`` and ``check_finite`` are not read."""
    x = _lu_matrices("lu_factor", a)
    return _lu(x), _lu_pivots(x)


def _trans(fn: str, trans: int | str) -> int:
    mode = {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}.get(trans) if isinstance(trans, int | str) else None
    if mode is None:
        raise ValueError(f"tidu.scipy.linalg.{fn}: trans={trans!r}; use 0, 1, 2 or 'N', 'T', 'C'")
    return mode


def lu_solve(lu_and_piv: tuple[ArrayLike, ArrayLike], b: ArrayLike, trans: int | str = 0,
             overwrite_b: bool = False, check_finite: bool = True) -> Any:
    """``scipy.linalg.lu_solve``: x with ``a x = b`` (``trans=0`` or ``'N'``), ``a^T x = b``
    (1, ``'T'``) or ``a^H x = b`` (2, ``'C'``) from ``lu_factor(a)``; b is vectors (..., n)
    when it has one axis fewer than lu (as jax.scipy.linalg), else matrices (..., n, k).
    Differentiable in lu and b. ``overwrite_b`` and ``check_finite`` are not read."""
    mode = _trans("lu_solve", trans)
    try:
        lu_, piv = lu_and_piv
    except (TypeError, ValueError):
        raise TypeError("tidu.scipy.linalg.lu_solve takes (lu, piv) as lu_factor returns it, "
                        f"got {type(lu_and_piv).__name__}") from None
    shape, piv_shape, b_shape = tuple(tnp.shape(lu_)), tuple(tnp.shape(piv)), tuple(tnp.shape(b))
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"tidu.scipy.linalg.lu_solve: lu must be a square matrix or a stack of them (..., n, n), "
                         f"got shape {shape}")
    if piv_shape != shape[:-1] or not np.issubdtype(np.dtype(tnp.result_type(piv)), np.integer):
        raise ValueError(f"tidu.scipy.linalg.lu_solve: piv must be integers of shape {shape[:-1]} (lu's without "
                         f"its last axis), got {tnp.result_type(piv)} {piv_shape}")
    n = shape[-1]
    vector = len(b_shape) == len(shape) - 1
    if len(b_shape) < 1 or b_shape[-1 if vector else -2] != n:
        raise ValueError(f"tidu.scipy.linalg.lu_solve: b must be (..., {n}) or (..., {n}, k) for lu {shape}, "
                         f"got shape {b_shape}")
    dtype = tnp.result_type(lu_, b, 1.0)
    lu_, rhs = tnp.asarray(lu_, dtype=dtype), tnp.asarray(b, dtype=dtype)
    if vector:
        rhs = rhs[..., None]
    p = tnp.asarray(_permutation_matrix(piv), dtype=dtype)  # p a = l u
    batch = tnp.broadcast_shapes(shape[:-2], tuple(tnp.shape(rhs))[:-2])
    lu_ = tnp.broadcast_to(lu_, batch + shape[-2:])
    rhs = tnp.broadcast_to(rhs, batch + tuple(tnp.shape(rhs))[-2:])
    if mode == 0:  # x = u^-1 l^-1 p b
        y = solve_triangular(lu_, tnp.matmul(p, rhs), lower=True, unit_diagonal=True)
        x = solve_triangular(lu_, y, lower=False)
    else:  # a^T = u^T l^T p: x = p^T l^-T u^-T b (conjugated for 'C')
        y = solve_triangular(lu_, rhs, trans=mode, lower=False)
        x = tnp.matmul(tnp.swapaxes(p, -1, -2), solve_triangular(lu_, y, trans=mode, lower=True, unit_diagonal=True))
    return x[..., 0] if vector else x


__all__ = ["cho_factor", "cho_solve", "cholesky", "det", "eigh", "expm", "expm_frechet", "inv", "lu", "lu_factor",
           "lu_solve", "pinv", "qr", "solve", "solve_triangular", "svd", "svdvals"]
