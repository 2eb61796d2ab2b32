"""``scipy.linalg`` on tidu values, as ``jax.scipy.linalg``: Cholesky factor-and-solve,
triangular solves, and the functions NumPy also has (``solve``, ``inv``, ``det``,
``pinv``, ``svd``, ``qr``, ``eigh``: ``tidu.numpy.linalg``'s), and the matrix exponential
``expm`` with its Frechet derivative ``expm_frechet`` (primitives of their own). Composed
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
from tidu.numpy.linalg import det, eigh, inv, pinv, qr, solve, solve_triangular, svd


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


__all__ = ["cho_factor", "cho_solve", "cholesky", "det", "eigh", "expm", "expm_frechet", "inv", "pinv", "qr",
           "solve", "solve_triangular", "svd"]
