"""tidu.numpy covariance and correlation matrices (``cov``, ``corrcoef``): products of the
centred (and weighted) variables, built on the reductions, ``matmul`` and ``diagonal``."""

from __future__ import annotations

from typing import Any

import numpy as np

from tidu.core.keys import is_complex
from tidu.numpy._casting import asarray
from tidu.numpy._contractions import matmul
from tidu.numpy._core import ArrayLike, _shape, numpy_fallback
from tidu.numpy._elementwise import clip, divide, imag, less_equal, multiply, real, sqrt, subtract, where
from tidu.numpy._matrices import diagonal
from tidu.numpy._reductions import _inexact, mean, sum
from tidu.numpy._shapes import atleast_2d, concatenate, reshape, squeeze, transpose
from tidu.numpy._ufuncs import _complex
from tidu.trace.tracing import Tracer


@numpy_fallback(np.cov, "m", "y", "fweights", "aweights", accumulates=True)
def cov(m: ArrayLike, y: ArrayLike | None = None, rowvar: bool = True, bias: bool = False,
        ddof: int | None = None, fweights: ArrayLike | None = None, aweights: ArrayLike | None = None) -> Any:
    """Covariance matrix of the variables in the rows (columns if not ``rowvar``) of m (and y)."""
    x = atleast_2d(m if isinstance(m, Tracer) else np.asarray(m, dtype=float))
    if not rowvar and _shape(x)[0] != 1:
        x = transpose(x)
    if y is not None:
        yy = atleast_2d(y if isinstance(y, Tracer) else np.asarray(y, dtype=float))
        if not rowvar and _shape(yy)[0] != 1:
            yy = transpose(yy)
        x = concatenate([x, yy], axis=0)
    x = _inexact(asarray(x)) if isinstance(x, Tracer) else x
    n = _shape(x)[1]
    w = None
    if fweights is not None:
        w = fweights
    if aweights is not None:
        w = aweights if w is None else multiply(w, aweights)
    if w is None:
        avg = mean(x, axis=1, keepdims=True)
        wsum = float(n)
        fact = n - (0 if bias else 1) if ddof is None else n - ddof
    else:
        wsum = sum(w)
        avg = divide(sum(multiply(x, w), axis=1, keepdims=True), wsum)
        d = 0 if bias else 1
        if ddof is not None:
            d = ddof
        fact = wsum if d == 0 else (subtract(wsum, d) if aweights is None else subtract(
            wsum, divide(multiply(d, sum(multiply(w, aweights))), wsum)))
    # NumPy divides by max(fact, 0): inf (or nan) where ddof leaves no degrees of freedom
    fact = max(fact, 0) if isinstance(fact, int) else where(less_equal(fact, 0), 0.0, fact)
    xc = subtract(x, avg)
    xw = xc if w is None else multiply(xc, w)
    c = divide(matmul(xw, transpose(xc).conj()), fact)
    return squeeze(c) if _shape(c) == (1, 1) else c


@numpy_fallback(np.corrcoef, "x", "y", accumulates=True)
def corrcoef(x: ArrayLike, y: ArrayLike | None = None, rowvar: bool = True) -> Any:
    """Pearson correlation coefficients: cov / outer(std, std), clipped to [-1, 1] as NumPy."""
    c = cov(x, y, rowvar)
    if len(_shape(c)) == 0:
        return divide(c, c)
    d = real(diagonal(c))
    s = sqrt(d)
    c = divide(divide(c, reshape(s, (-1, 1))), reshape(s, (1, -1)))
    if is_complex(c.aval.dtype):
        return _complex(clip(real(c), -1, 1), clip(imag(c), -1, 1))
    return clip(c, -1, 1)
