"""``polyfit``: least-squares polynomial fitting, as jax.numpy.polyfit (NumPy's
algorithm: the Vandermonde matrix with its columns scaled to unit norm, solved by
``linalg.lstsq``), so the coefficients differentiate in x, y and the weights. NumPy values
go to NumPy's polyfit."""

from __future__ import annotations

from typing import Any

import numpy as np

from tidu.numpy import linalg
from tidu.numpy._casting import asarray
from tidu.numpy._contractions import matmul
from tidu.numpy._core import ArrayLike, numpy_fallback
from tidu.numpy._elementwise import divide, multiply, sqrt
from tidu.numpy._polynomials import vander
from tidu.numpy._reductions import sum as _sum


@numpy_fallback(np.polyfit, "x", "y", "w")
def polyfit(x: ArrayLike, y: ArrayLike, deg: int, rcond: float | None = None, full: bool = False,
            w: ArrayLike | None = None, cov: bool | str = False) -> Any:
    """Coefficients (highest power first) of the degree-``deg`` polynomial fitting y(x) in
    the least-squares sense; y may be 2-D (one fit per column). ``full`` also returns
    (residuals, rank, singular values, rcond); ``cov`` the coefficients' covariance matrix
    (scaled by the residual variance, or ``cov="unscaled"``)."""
    if isinstance(deg, bool) or not isinstance(deg, (int, np.integer)) or deg < 0:
        raise ValueError(f"tnp.polyfit: deg must be a non-negative int, got {deg!r}")
    x, y = asarray(x), asarray(y)
    if not np.issubdtype(np.dtype(str(x.dtype)), np.inexact):
        x = asarray(x, dtype=np.float64)
    if x.ndim != 1 or x.shape[0] == 0:
        raise ValueError(f"tnp.polyfit: x must be a non-empty 1-D array, got shape {tuple(x.shape)}")
    if y.ndim not in (1, 2) or y.shape[0] != x.shape[0]:
        raise ValueError(f"tnp.polyfit: y must be 1-D or 2-D with x's length {x.shape[0]} along axis 0, "
                         f"got shape {tuple(y.shape)}")
    order = int(deg) + 1
    if rcond is None:
        rcond = x.shape[0] * float(np.finfo(np.dtype(str(x.dtype))).eps)
    lhs, rhs = vander(x, order), y
    if w is not None:
        w = asarray(w)
        if w.ndim != 1 or w.shape[0] != x.shape[0]:
            raise ValueError(f"tnp.polyfit: w must be 1-D with x's length {x.shape[0]}, got shape {tuple(w.shape)}")
        lhs = multiply(lhs, w[:, None])
        rhs = multiply(rhs, w if rhs.ndim == 1 else w[:, None])
    scale = sqrt(_sum(multiply(lhs, lhs), axis=0))
    lhs = divide(lhs, scale)
    c, resids, rank, s = linalg.lstsq(lhs, rhs, rcond)
    c = divide(c, scale if c.ndim == 1 else scale[:, None])
    if full:
        return c, resids, rank, s, asarray(rcond)
    if not cov:
        return c
    base = divide(linalg.inv(matmul(lhs.T, lhs)), multiply(scale[:, None], scale[None, :]))
    if cov == "unscaled":
        factor: Any = 1.0
    else:
        if x.shape[0] <= order:
            raise ValueError("tnp.polyfit: the number of data points must exceed deg + 1 to scale the covariance "
                             "matrix; pass cov='unscaled'")
        factor = divide(resids, x.shape[0] - order)
    return c, (multiply(base, factor) if y.ndim == 1 else multiply(base[:, :, None], factor))
