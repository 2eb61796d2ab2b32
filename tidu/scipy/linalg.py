"""``scipy.linalg`` on tidu values, as ``jax.scipy.linalg``: Cholesky factor-and-solve,
triangular solves, and the functions NumPy also has (``solve``, ``inv``, ``det``,
``pinv``, ``svd``, ``qr``, ``eigh``: ``tidu.numpy.linalg``'s). Composed from tidu's
linear algebra primitives, so differentiated, simplified and lowered like any program.
Called with NumPy values, the functions compute SciPy's (or NumPy's) results.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tidu.numpy import ArrayLike
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


__all__ = ["cho_factor", "cho_solve", "cholesky", "det", "eigh", "inv", "pinv", "qr", "solve", "solve_triangular",
           "svd"]
