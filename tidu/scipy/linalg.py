"""``scipy.linalg`` on tidu values, as ``jax.scipy.linalg``: Cholesky factor-and-solve,
triangular solves, and the functions NumPy also has (``solve``, ``inv``, ``det``,
``pinv``, ``svd``, ``svdvals``, ``qr``, ``eigh``: ``tidu.numpy.linalg``'s computations with
SciPy's signatures and conventions: ``qr``'s default ``mode='full'``, ``eigh``'s
``eigvals_only``, ``solve``'s ``assume_a``; ``overwrite_*`` and ``check_finite`` are
accepted and not read), the matrix exponential
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
from tidu.trace.tracing import Tracer

# SciPy's arguments that only say how SciPy may use memory or check its input
# (overwrite_a, overwrite_b, check_finite, lwork, debug, lapack_driver, turbo) are accepted
# by every function here and not read: tidu never writes its inputs, and nan or inf
# entries give nan or inf results (docs/linalg.md) rather than SciPy's ValueError.


def det(a: ArrayLike, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """``scipy.linalg.det``: the determinant of each square matrix (``tnp.linalg.det``)."""
    return nla.det(a)


def inv(a: ArrayLike, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """``scipy.linalg.inv``: the inverse of each square matrix (``tnp.linalg.inv``; nan for a
    singular one)."""
    return nla.inv(a)


def svd(a: ArrayLike, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd") -> Any:
    """``scipy.linalg.svd``: ``(U, s, Vh)`` (a tuple), or ``s`` without ``compute_uv``; tidu's
    gauge for the vectors (``tnp.linalg.svd``)."""
    if lapack_driver not in ("gesdd", "gesvd"):
        raise ValueError(f"tidu.scipy.linalg.svd: lapack_driver={lapack_driver!r}; use 'gesdd' or 'gesvd'")
    out = nla.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return tuple(out) if compute_uv else out


def svdvals(a: ArrayLike, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """``scipy.linalg.svdvals``: the singular values of each matrix, descending."""
    return nla.svdvals(a)


def eigh(a: ArrayLike, b: ArrayLike | None = None, lower: bool = True, eigvals_only: bool = False,
         overwrite_a: bool = False, overwrite_b: bool = False, turbo: bool = True, eigvals: Any = None,
         type: int = 1, check_finite: bool = True, subset_by_index: Any = None,  # noqa: A002 (SciPy's name)
         subset_by_value: Any = None, driver: Any = None) -> Any:
    """``scipy.linalg.eigh`` (the standard problem): ``(w, v)``, or ``w`` with
    ``eigvals_only``, of the Hermitian part of each matrix (``tnp.linalg.eigh``; ``lower``,
    the triangle SciPy reads, is not read). The generalized problem (``b``) and subsets of
    the eigenvalues are not supported, as in JAX."""
    if b is not None:
        raise NotImplementedError("tidu.scipy.linalg.eigh: the generalized problem (b) is not supported; "
                                  "for b positive definite, use eigh of inv(L) a inv(L)^H with L = cholesky(b)")
    if eigvals is not None or subset_by_index is not None or subset_by_value is not None or type != 1:
        raise NotImplementedError("tidu.scipy.linalg.eigh: eigvals, subset_by_index, subset_by_value and type "
                                  "are not supported; take a slice of the full result")
    if eigvals_only:
        return nla.eigvalsh(a)
    return tuple(nla.eigh(a))


_QR_MODES = {"full": "complete", "economic": "reduced", "r": "r"}


def qr(a: ArrayLike, overwrite_a: bool = False, lwork: Any = None, mode: str = "full", pivoting: bool = False,
       check_finite: bool = True) -> tuple[Any, ...]:
    """``scipy.linalg.qr``: ``(Q, R)`` of each (..., m, n) matrix; ``mode='full'`` (SciPy's
    default: Q (m, m), R (m, n)), ``'economic'`` (Q (m, k), R (k, n), k = min(m, n)) or
    ``'r'`` (``(R,)``, R (m, n)). Householder, as ``tnp.linalg.qr``. Traced, ``'full'`` of a
    tall matrix (m > n) is not supported (Q's extra columns have no derivative); use
    ``'economic'``. ``pivoting`` and ``mode='raw'`` are not supported."""
    if pivoting:
        raise NotImplementedError("tidu.scipy.linalg.qr: pivoting=True is not supported (the column order "
                                  "jumps, so it has no derivative)")
    if mode not in _QR_MODES:
        raise ValueError(f"tidu.scipy.linalg.qr: mode={mode!r}; use 'full', 'economic' or 'r' ('raw' is not "
                         "supported)")
    shape = tuple(tnp.shape(a))
    if len(shape) < 2:
        raise ValueError(f"tidu.scipy.linalg.qr: expected a matrix or a stack of them (..., m, n), got shape {shape}")
    m, n = shape[-2:]
    if mode == "r":
        r = nla.qr(a, mode="r")
        if m > n:  # the full R: the reduced one above m - n rows of zeros
            r = tnp.concatenate([r, tnp.zeros(shape[:-2] + (m - n, n), dtype=tnp.result_type(r))], axis=-2)
        return (r,)
    try:
        q, r = nla.qr(a, mode=_QR_MODES[mode])
    except NotImplementedError:
        raise NotImplementedError("tidu.scipy.linalg.qr: mode='full' of a tall matrix (m > n) is not supported on "
                                  "traced arrays (Q's extra columns have no derivative); pass mode='economic'") \
            from None
    return q, r


_ASSUME_A = {None: "gen", "gen": "gen", "general": "gen", "sym": "sym", "symmetric": "sym", "her": "her",
             "hermitian": "her", "pos": "pos", "positive definite": "pos"}


def solve(a: ArrayLike, b: ArrayLike, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          debug: bool = False, check_finite: bool = True, assume_a: str | None = "gen",
          transposed: bool = False) -> Any:
    """``scipy.linalg.solve``: x with ``a x = b`` (``a^T x = b`` when ``transposed``); b a
    vector (n,) when 1-D, else matrices (..., n, k), as ``tnp.linalg.solve``. ``assume_a``:
    ``'gen'`` (LU), ``'sym'`` and ``'her'`` (the same solve; tidu reads the whole matrix, so
    ``lower`` is not read), ``'pos'`` (Cholesky, of the Hermitian part as ``cho_factor``)."""
    kind = _ASSUME_A.get(assume_a) if isinstance(assume_a, str | None) else None
    if kind is None:
        raise ValueError(f"tidu.scipy.linalg.solve: assume_a={assume_a!r}; use 'gen', 'sym', 'her' or 'pos'")
    if transposed:
        if np.issubdtype(np.dtype(tnp.result_type(a)), np.complexfloating):
            raise NotImplementedError("tidu.scipy.linalg.solve: transposed=True of a complex matrix is not "
                                      "supported (as SciPy); pass a.T")
        a = tnp.swapaxes(a, -1, -2)
    if kind == "pos":
        return cho_solve(cho_factor(a, lower=bool(lower)), b)
    return nla.solve(a, b)


def solve_triangular(a: ArrayLike, b: ArrayLike, trans: int | str = 0, lower: bool = False,
                     unit_diagonal: bool = False, overwrite_b: bool = False, debug: Any = None,
                     check_finite: bool = True) -> Any:
    """``scipy.linalg.solve_triangular``: x with ``op(a) x = b``, op = identity (``trans=0``
    or ``'N'``), transpose (1, ``'T'``) or conjugate transpose (2, ``'C'``) of a's ``lower``
    (else upper) triangle; b a vector (n,) when 1-D, else matrices (..., n, k). A 0 on the
    diagonal gives nan for that matrix (SciPy raises)."""
    return nla.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal)


def pinv(a: ArrayLike, *, atol: Any = None, rtol: Any = None, return_rank: bool = False,
         check_finite: bool = True) -> Any:
    """``scipy.linalg.pinv``: the pseudo-inverse, singular values up to ``atol + rtol * (the
    largest)`` counted as 0 (default rtol ``max(m, n) * eps``, as SciPy), with the rank
    when ``return_rank``. Traced, ``atol`` must be 0 or None (a cut-off that is not relative
    to the largest singular value is not supported)."""
    for name, v in (("atol", atol), ("rtol", rtol)):
        if v is not None and not isinstance(v, Tracer) and np.any(np.asarray(v) < 0):
            raise ValueError(f"tidu.scipy.linalg.pinv: {name} must be >= 0, got {v!r}")
    if atol is not None and np.any(np.asarray(atol) != 0):
        if isinstance(a, Tracer):
            raise NotImplementedError("tidu.scipy.linalg.pinv: atol is not supported on traced arrays; give the "
                                      "cut-off relative to the largest singular value with rtol")
        import scipy.linalg

        return scipy.linalg.pinv(a, atol=atol, rtol=rtol, return_rank=return_rank, check_finite=False)
    out = nla.pinv(a, rtol=rtol)
    return (out, nla.matrix_rank(a, rtol=rtol)) if return_rank else out


def cholesky(a: ArrayLike, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """``scipy.linalg.cholesky``: the upper factor U (``a = U^H U``) by default, as SciPy,
    the lower one with ``lower=True``; of the Hermitian part, nan where it is not
    positive definite (``tidu.numpy.linalg.cholesky``)."""
    return nla.cholesky(a, upper=not lower)


def cho_factor(a: ArrayLike, lower: bool = False, overwrite_a: bool = False,
               check_finite: bool = True) -> tuple[Any, bool]:
    """``(c, lower)`` for ``cho_solve``: c the Cholesky factor (upper unless ``lower``),
    zero in its other triangle (SciPy leaves what was there). The factor is the Hermitian
    part's, so derivatives with respect to ``a`` are symmetric: JAX's ``cho_factor`` reads
    one triangle, and its gradient, symmetrized, is tidu's."""
    if not isinstance(lower, bool | np.bool_):
        raise TypeError(f"tidu.scipy.linalg.cho_factor: lower must be a bool, got {type(lower).__name__}")
    return cholesky(a, lower=bool(lower)), bool(lower)


def cho_solve(c_and_lower: tuple[ArrayLike, bool], b: ArrayLike, overwrite_b: bool = False,
              check_finite: bool = True) -> Any:
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
