"""``roots``: the zeros of a polynomial, as the eigenvalues of its companion matrix
(``linalg.eigvals``), as ``jax.numpy.roots``."""

from __future__ import annotations

from typing import Any

import numpy as np

from tidu.numpy._casting import astype
from tidu.numpy._contractions import matmul
from tidu.numpy._core import ArrayLike, _shape
from tidu.numpy._dtypes import result_type
from tidu.numpy._elementwise import abs as _abs
from tidu.numpy._elementwise import add, divide, equal, greater_equal, multiply, negative, subtract, where
from tidu.numpy._reductions import max as _max
from tidu.numpy._reductions import sum as _sum
from tidu.numpy._scans import cumprod
from tidu.numpy._shapes import concatenate, reshape
from tidu.numpy.linalg import eigvals
from tidu.trace.tracing import Tracer


def roots(p: ArrayLike, *, strip_zeros: bool = True) -> Any:
    """``jax.numpy.roots``: the roots of the polynomial with coefficients ``p`` (1-D, the
    highest power first), complex, sorted by real part, then imaginary part (the order of
    ``tnp.linalg.eigvals``; NumPy and JAX keep LAPACK's). ``strip_zeros=True`` drops
    leading zero coefficients, which needs concrete values (NumPy's, or constants); under
    a transform pass ``strip_zeros=False``: each leading zero then gives a nan root at the
    end, as in JAX. Differentiable in ``p`` where the roots are simple."""
    shape = tuple(_shape(p))
    if len(shape) > 1:
        raise ValueError(f"tnp.roots: p must be 1-D (the coefficients, highest power first), got shape {shape}")
    if strip_zeros:
        if isinstance(p, Tracer):
            raise ValueError("tnp.roots: strip_zeros=True drops leading zeros, which needs concrete coefficients; "
                             "pass strip_zeros=False under a transform (leading zeros then give nan roots)")
        arr = np.atleast_1d(np.asarray(p))
        nonzero = np.flatnonzero(arr)
        p = arr[nonzero[0]:] if nonzero.size else arr[:0]
    dtype = result_type(p, 1.0)
    n = int(np.prod(_shape(p), dtype=int)) if len(_shape(p)) else 1
    complex_dtype = np.result_type(dtype, np.complex64)
    if n < 2:
        return np.zeros((0,), complex_dtype)
    p = reshape(p, (n,)) if isinstance(p, Tracer) else np.asarray(p, dtype=dtype).reshape(n)
    m = n - 1
    # k leading zeros: the polynomial shifted left by k (its last k coefficients 0), whose
    # companion matrix is block triangular: the true roots and k zero eigenvalues in a
    # nilpotent block, made distinct values past every root (Cauchy's bound) and then nan
    k = _sum(cumprod(where(equal(p, 0), 1.0, 0.0)))
    shift = np.arange(n)[None, :] - np.arange(n)[:, None]  # j - i: row i of the shift picks p[i + k]
    q = matmul(astype(where(equal(shift, k), 1.0, 0.0), dtype), p)
    lead = q[0]
    coeffs = negative(divide(q[1:], where(equal(lead, 0), 1.0, lead)))
    fake = greater_equal(np.arange(m), subtract(m, k))  # the last k eigenvalues
    bound = add(multiply(_max(_abs(coeffs)), 2.0), 2.0)
    diag = astype(where(fake, add(bound, np.arange(m, dtype=np.float64)), 0.0), dtype)
    companion = concatenate([reshape(coeffs, (1, m)), np.eye(m - 1, m, dtype=dtype)], axis=0)
    companion = add(companion, multiply(np.eye(m, dtype=dtype), reshape(diag, (1, m))))
    return where(fake, np.array(complex(np.nan, np.nan), complex_dtype), eigvals(companion))

__all__ = ["roots"]
