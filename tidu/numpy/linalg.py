"""tidu.numpy.linalg: NumPy's linear algebra for tidu values (``tnp.linalg.solve`` ...).

A few primitives carry rules of their own (``rules/linalg.rules``): ``triangle``,
``cholesky``, ``triangular_solve``, ``solve``, ``logabsdet``, ``detsign``, ``eigvalsh``,
``eigh_vectors``, ``eigvals``, ``eig_vectors``, ``qr_q``, ``qr_r``, ``svdvals``, ``svd_u``,
``svd_vh`` and ``pinv``.
Everything else is composed from them and the other primitives in Python, so it is
differentiated, simplified and lowered like any tidu program; ``det`` from 4 x 4 up is a
``custom_jvp`` function of them, so that its derivatives hold at singular matrices.
Matrices are the last two axes; leading axes are batch axes (broadcast between operands
as NumPy does). Called with NumPy values (no tracer), the functions return NumPy's
results. Degenerate inputs give nan or inf as JAX does (docs/linalg.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np

from tidu.core.keys import HALF_DTYPES, is_complex, is_inexact
from tidu.numpy._contractions import cross as _cross
from tidu.numpy._contractions import matmul
from tidu.numpy._contractions import outer as _outer
from tidu.numpy._contractions import tensordot as _tensordot
from tidu.numpy._contractions import vecdot as _vecdot
from tidu.numpy._core import (
    ArrayLike,
    _broadcast_to,
    _convert,
    _prep,
    _shape,
    _trace_of,
    broadcast_shapes,
    numpy_fallback,
)
from tidu.numpy._dtypes import _info, result_type
from tidu.numpy._elementwise import abs as _abs
from tidu.numpy._elementwise import add, conj, exp, imag, multiply, power, real, sqrt, where
from tidu.numpy._matrices import diagonal as _diagonal
from tidu.numpy._reductions import any as _any
from tidu.numpy._reductions import max as _max
from tidu.numpy._reductions import min as _min
from tidu.numpy._reductions import prod as _prod
from tidu.numpy._reductions import sum as _sum
from tidu.numpy._shapes import concatenate, reshape, swapaxes
from tidu.numpy._shapes import transpose as _transpose
from tidu.numpy._ufuncs import isnan, logical_and, logical_not
from tidu.ops import reference
from tidu.trace.derivatives import with_jvp
from tidu.trace.tracing import Tracer

__all__ = [
    "cholesky", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv", "lstsq",
    "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "multi_dot", "norm", "outer", "pinv", "qr",
    "slogdet", "solve", "solve_triangular", "svd", "svdvals", "tensordot", "tensorinv", "tensorsolve", "trace",
    "triangular_solve", "vecdot", "vector_norm",
]


# --- helpers ----------------------------------------------------------------------------


def _inexact(dtype: str) -> str:
    return dtype if dtype in ("float32", "float64", "complex64", "complex128") else "float64"


def _matrices(what: str, *xs: ArrayLike) -> list[Tracer]:
    """The operands (one of them traced) as tracers of one inexact dtype."""
    trace = _trace_of(xs)
    assert trace is not None
    dtype = _inexact(result_type(*xs))
    return [_prep(trace, x, dtype) for x in xs]


def _square(a: Tracer | np.ndarray, what: str) -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"tnp.linalg.{what}: expected a (stack of) square matrices (..., n, n), "
                         f"got shape {a.shape}")


def _np_matrices(what: str, a: Any, square: bool = False) -> np.ndarray:
    """a as a NumPy array, checked as the traced call checks it (the same one-line error):
    the eager calls that compute tidu's definition would otherwise fail deep inside, or
    (svd, pinv: LAPACK's error becomes nan) return nan for a vector."""
    x = np.asarray(a)
    if square:
        _square(x, what)
    elif x.ndim < 2:
        raise ValueError(f"tnp.linalg.{what}: expected matrices (..., m, n), got shape {x.shape}")
    return x


def _mT(x: Tracer) -> Tracer:
    perm = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    return x.trace.emit("transpose", [x], {"perm": perm})


def _mH(x: Tracer) -> Tracer:
    return conj(_mT(x))


def _mm(x: Tracer, y: Tracer) -> Tracer:
    n = x.ndim
    return x.trace.emit("dot_general", [x, y], {
        "lhs_contract": (n - 1,), "rhs_contract": (n - 2,),
        "lhs_batch": tuple(range(n - 2)), "rhs_batch": tuple(range(n - 2))})


def _triangle(x: Tracer, lower: bool, strict: bool = False) -> Tracer:
    return x.trace.emit("triangle", [x], {"lower": lower, "strict": strict})


def _batched(a: Tracer, b: Tracer) -> tuple[Tracer, Tracer]:
    """a (..., n, n) and b (..., n, k) broadcast to common batch axes."""
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], what="linalg")
    return _broadcast_to(a, batch + a.shape[-2:]), _broadcast_to(b, batch + b.shape[-2:])


def _result(numpy_type: type, *parts: Any) -> Any:
    """parts as NumPy's named tuple (QRResult, SlogdetResult, EighResult, SVDResult; NumPy
    >= 2), a plain tuple with older NumPy."""
    return tuple(parts) if numpy_type is tuple else numpy_type(*parts)


# NumPy's result types, found by calling it once (they are not public names)
_QR, _SLOGDET, _EIGH, _SVD, _EIG = (type(r) for r in (np.linalg.qr(np.eye(1)), np.linalg.slogdet(np.eye(1)),
                                                     np.linalg.eigh(np.eye(1)), np.linalg.svd(np.eye(1)),
                                                     np.linalg.eig(np.eye(1))))


def _eye(like: Tracer, n: int) -> Tracer:
    return _prep(like.trace, np.eye(n, dtype=like.aval.dtype), like.aval.dtype,
                 like.shape[:-2] + (n, n))


# --- factorizations and solves ------------------------------------------------------------


def _np_cholesky(a: Any, upper: bool = False) -> Any:
    # tidu's definition, not NumPy's (which reads one triangle and raises where the matrix
    # is not positive definite): the factor of the Hermitian part, nan where it is not
    # positive definite, the same as the traced cholesky (docs/linalg.md)
    out = reference.cholesky(_np_matrices("cholesky", a, square=True))
    return np.conjugate(np.swapaxes(out, -1, -2)) if upper else out

@numpy_fallback(_np_cholesky)
def cholesky(a: ArrayLike, upper: bool = False) -> Any:
    """Cholesky factor L (lower, ``a = L L^H``) of each Hermitian positive definite matrix;
    ``upper=True`` gives ``L^H``. Like JAX, the Hermitian part ``(a + a^H) / 2`` is
    factored, and a matrix that is not positive definite gives nan."""
    (x,) = _matrices("cholesky", a)
    _square(x, "cholesky")
    out = x.trace.emit("cholesky", [x])
    return _mH(out) if upper else out


def _scipy_triangular_solve(a: Any, b: Any, left_side: bool = False, lower: bool = False,
                            transpose_a: bool = False, conjugate_a: bool = False,
                            unit_diagonal: bool = False) -> Any:
    # the traced primitive's kernel: substitution, nan for an exactly singular matrix (no
    # LinAlgError), nan and inf entries unchecked (no ValueError), as traced
    a_, b_ = np.asarray(a), np.asarray(b)
    dtype = _inexact(np.result_type(a_, b_).name)
    a_, b_ = a_.astype(dtype, copy=False), b_.astype(dtype, copy=False)
    if conjugate_a:
        a_ = np.conjugate(a_)
    trans = 1 if transpose_a else 0
    if left_side:
        return reference.triangular_solve(a_, b_, lower, unit_diagonal, trans=trans)
    xt = reference.triangular_solve(a_, np.swapaxes(b_, -1, -2), lower, unit_diagonal, trans=1 - trans)
    return np.swapaxes(xt, -1, -2)


def _tri_solve(a: Tracer, b: Tracer, lower: bool, unit_diagonal: bool) -> Tracer:
    return a.trace.emit("triangular_solve", [a, b], {"lower": lower, "unit_diagonal": unit_diagonal})


@numpy_fallback(_scipy_triangular_solve, "a", "b")
def triangular_solve(a: ArrayLike, b: ArrayLike, left_side: bool = False, lower: bool = False,
                     transpose_a: bool = False, conjugate_a: bool = False,
                     unit_diagonal: bool = False) -> Any:
    """``jax.lax.linalg.triangular_solve``: X with ``op(a) X = b`` (``left_side``) or
    ``X op(a) = b``, where op transposes and/or conjugates the lower (upper) triangle of
    a; the other triangle is not read."""
    t, rhs = _matrices("triangular_solve", a, b)
    _square(t, "triangular_solve")
    if conjugate_a:
        t = conj(t)
    if not left_side:  # X op(a) = b  <=>  op(a)^T X^T = b^T
        transpose_a = not transpose_a
        rhs = _mT(rhs)
    if transpose_a:
        t, lower = _mT(t), not lower
    t, rhs = _batched(t, rhs)
    out = _tri_solve(t, rhs, lower, unit_diagonal)
    return out if left_side else _mT(out)


def _trans_mode(trans: int | str) -> int:
    mode = {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}.get(trans)
    if mode is None:
        raise ValueError(f"tnp.linalg.solve_triangular: trans={trans!r}; use 0, 1, 2 or 'N', 'T', 'C'")
    return mode


def _scipy_solve_triangular(a: Any, b: Any, trans: int | str = 0, lower: bool = False,
                            unit_diagonal: bool = False) -> Any:
    # SciPy's solve_triangular as traced: nan for an exactly singular matrix (SciPy raises
    # LinAlgError), nan and inf entries unchecked (SciPy's check_finite raises ValueError)
    mode = _trans_mode(trans)
    a_, b_ = np.asarray(a), np.asarray(b)
    dtype = _inexact(np.result_type(a_, b_).name)
    vector = b_.ndim == 1
    rhs = b_[:, None] if vector else b_
    out = reference.triangular_solve(a_.astype(dtype, copy=False), rhs.astype(dtype, copy=False), lower,
                                     unit_diagonal, trans=mode)
    return out[..., 0] if vector else out


@numpy_fallback(_scipy_solve_triangular, "a", "b")
def solve_triangular(a: ArrayLike, b: ArrayLike, trans: int | str = 0, lower: bool = False,
                     unit_diagonal: bool = False) -> Any:
    """``scipy.linalg.solve_triangular`` (as ``jax.scipy.linalg.solve_triangular``): x with
    ``op(a) x = b``, op = identity (``trans=0`` or ``'N'``), transpose (1, ``'T'``) or
    conjugate transpose (2, ``'C'``); b is a vector (n,) when 1-D, else matrices (..., n, k)."""
    mode = _trans_mode(trans)
    vector = len(_shape(b)) == 1  # as NumPy 2's solve (JAX deprecates batched 1-D right-hand sides)
    a_, b_ = _matrices("solve_triangular", a, b)  # type: ignore[misc]
    if vector:
        b_ = b_.trace.emit("reshape", [b_], {"shape": b_.shape + (1,)})
    out = triangular_solve(a_, b_, left_side=True, lower=lower, transpose_a=mode > 0,
                           conjugate_a=mode == 2, unit_diagonal=unit_diagonal)
    return out.trace.emit("reshape", [out], {"shape": out.shape[:-1]}) if vector else out


def _np_solve(a: Any, b: Any) -> Any:
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError as err:
        if "singular" not in str(err).lower():
            raise
    # nan for each exactly singular matrix of the stack, as traced (reference.solve)
    a_, b_ = np.asarray(a), np.asarray(b)
    dtype = np.result_type(a_, b_, np.float16)
    dtype = dtype if dtype.kind in "fc" else np.dtype(np.float64)
    rhs = b_[:, None] if b_.ndim == 1 else b_
    batch = np.broadcast_shapes(a_.shape[:-2], rhs.shape[:-2])
    out = reference.solve(np.broadcast_to(a_, batch + a_.shape[-2:]).astype(dtype),
                          np.broadcast_to(rhs, batch + rhs.shape[-2:]).astype(dtype))
    return out[..., 0] if b_.ndim == 1 else out


@numpy_fallback(_np_solve, "a", "b")
def solve(a: ArrayLike, b: ArrayLike) -> Any:
    """x with ``a x = b`` (NumPy 2: b is a vector (n,) only when 1-D, otherwise matrices
    (..., n, k)); LU with partial pivoting. A singular matrix gives inf or nan."""
    x, rhs = _matrices("solve", a, b)
    _square(x, "solve")
    vector = rhs.ndim == 1
    if vector:
        rhs = rhs.trace.emit("reshape", [rhs], {"shape": rhs.shape + (1,)})
    if rhs.shape[-2] != x.shape[-1]:
        raise ValueError(f"tnp.linalg.solve: a {x.shape} and b {rhs.shape[:-1] if vector else rhs.shape} "
                         "do not fit (b needs the matrix size on its first matrix axis)")
    x, rhs = _batched(x, rhs)
    out = x.trace.emit("solve", [x, rhs])
    return out.trace.emit("reshape", [out], {"shape": out.shape[:-1]}) if vector else out


def _np_inv(a: Any) -> Any:
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError as err:
        if "singular" not in str(err).lower():
            raise
    a_ = np.asarray(a)
    return _np_solve(a_, np.broadcast_to(np.eye(a_.shape[-1], dtype=a_.dtype), a_.shape))


@numpy_fallback(_np_inv)
def inv(a: ArrayLike) -> Any:
    """Inverse of each square matrix, as ``solve(a, I)``; a singular matrix gives inf or nan."""
    (x,) = _matrices("inv", a)
    _square(x, "inv")
    return x.trace.emit("solve", [x, _eye(x, x.shape[-1])])


def _np_tensorinv(a: Any, ind: int = 2) -> Any:
    shape = np.shape(a)
    _tensor_check_ind(shape, ind)
    n = math.prod(shape[:ind])
    return _np_inv(np.reshape(a, (n, n))).reshape(shape[ind:] + shape[:ind])


def _tensor_check_ind(shape: tuple[int, ...], ind: int) -> None:
    if not isinstance(ind, int | np.integer) or ind <= 0:
        raise ValueError(f"tnp.linalg.tensorinv: ind must be a positive integer, got {ind!r}")
    if math.prod(shape[:ind]) != math.prod(shape[ind:]):
        raise ValueError(f"tnp.linalg.tensorinv: a's first ind={ind} axes {tuple(shape[:ind])} and the rest "
                         f"{tuple(shape[ind:])} must have equal products")


@numpy_fallback(_np_tensorinv)
def tensorinv(a: ArrayLike, ind: int = 2) -> Any:
    """``numpy.linalg.tensorinv``: the inverse of a as a linear map from its axes ind: to
    its first ind axes (``inv`` of a reshaped to a square matrix), of shape
    ``a.shape[ind:] + a.shape[:ind]``."""
    (x,) = _matrices("tensorinv", a)
    _tensor_check_ind(x.shape, ind)
    rows, cols = x.shape[:ind], x.shape[ind:]
    n = math.prod(rows)
    out = inv(reshape(x, (n, n)))
    return reshape(out, cols + rows)


def _tensorsolve_shapes(a_shape: tuple[int, ...], b_shape: tuple[int, ...], axes: Any) -> tuple[Any, ...]:
    """(the permutation of a, the unknowns' shape) of tensorsolve, checked."""
    nd = len(a_shape)
    perm = tuple(range(nd))
    if axes is not None:
        moved = [int(ax) % nd for ax in axes]
        perm = tuple(i for i in range(nd) if i not in moved) + tuple(moved)
    shape = tuple(a_shape[i] for i in perm)
    x_shape = shape[len(b_shape):]
    if len(b_shape) > nd or shape[:len(b_shape)] != tuple(b_shape) or math.prod(x_shape) != math.prod(b_shape):
        raise ValueError(f"tnp.linalg.tensorsolve: a {tuple(a_shape)} (axes={axes!r}) does not fit b "
                         f"{tuple(b_shape)}: a's leading axes must be b's, the rest of equal product")
    return perm, x_shape


def _np_tensorsolve(a: Any, b: Any, axes: Any = None) -> Any:
    perm, x_shape = _tensorsolve_shapes(np.shape(a), np.shape(b), axes)
    n = math.prod(x_shape)
    return _np_solve(np.reshape(np.transpose(a, perm), (n, n)), np.reshape(b, (n,))).reshape(x_shape)


@numpy_fallback(_np_tensorsolve, "a", "b")
def tensorsolve(a: ArrayLike, b: ArrayLike, axes: Any = None) -> Any:
    """``numpy.linalg.tensorsolve``: x with ``tensordot(a, x, x.ndim) = b``, x of shape
    ``a.shape[b.ndim:]`` (after moving ``axes`` of a to the end); a ``solve`` of a reshaped
    to a square matrix."""
    x, rhs = _matrices("tensorsolve", a, b)
    perm, x_shape = _tensorsolve_shapes(x.shape, rhs.shape, axes)
    if perm != tuple(range(x.ndim)):
        x = x.trace.emit("transpose", [x], {"perm": perm})
    n = math.prod(x_shape)
    out = solve(reshape(x, (n, n)), reshape(rhs, (n,)))
    return reshape(out, x_shape)


# --- determinants -------------------------------------------------------------------------


@numpy_fallback(np.linalg.slogdet)
def slogdet(a: ArrayLike) -> tuple[Any, Any]:
    """(sign, logabsdet) of each square matrix (NumPy's named tuple): sign is +-1 (real)
    or on the unit circle (complex); a singular matrix gives (0, -inf)."""
    (x,) = _matrices("slogdet", a)
    _square(x, "slogdet")
    return _result(_SLOGDET, x.trace.emit("detsign", [x]), x.trace.emit("logabsdet", [x]))


# Up to this size the determinant is traced as its cofactor expansion: a polynomial in the
# entries, so its derivatives of every order exist everywhere, at singular matrices too.
# Larger ones are a function with a derivative of its own (_det) whose value is sign *
# exp(log|det|) (NumPy's formula) and whose JVP is the adjugate's: sign * exp(log|det|)
# differentiated as written is nan at singular matrices (sign and exp(log|det|) are 0,
# d log|det| is infinite), and wrong by O(1) at rounded ones. Not the 3 x 3 expansion: its
# 2 x 2 minors cancel on ill-conditioned matrices (det(I + u v^T) with u, v ~ 1e4 was 10 %
# off), where LU's value and the QR adjugate are accurate.
EXPANDED_DET_MAX = 2


@numpy_fallback(np.linalg.det)
def det(a: ArrayLike) -> Any:
    """Determinant of each square matrix: up to 2 x 2 its cofactor expansion, larger ones
    ``sign * exp(log|det|)`` (slogdet) with the adjugate as derivative; exact first and
    second derivatives at singular matrices too."""
    (x,) = _matrices("det", a)
    _square(x, "det")
    n = x.shape[-1]
    if n == 0:
        sign, logabs = slogdet(x)
        return multiply(sign, exp(logabs))
    if n > EXPANDED_DET_MAX:
        return _det(x)
    if n == 1:
        return x[..., 0, 0]
    return x[..., 0, 0] * x[..., 1, 1] - x[..., 0, 1] * x[..., 1, 0]


def _det_value(x: Tracer) -> Any:
    sign, logabs = slogdet(x)
    return multiply(sign, exp(logabs))


def _diag_matrix(d: Tracer) -> Tracer:
    """Matrices (..., n, n) with diagonals d (..., n)."""
    n = d.shape[-1]
    return where(np.eye(n, dtype=bool), d[..., None, :], np.zeros((), d.aval.dtype))


def _adjugate(x: Tracer) -> Tracer:
    """adj(x) = det(x) x^-1, from x = Q R (Q of Householder's QR, R = Q^H x): adj(x) =
    det(Q) det(R) R^-1 Q^H. The determinant and the inverse of the same triangular R keep
    it accurate at (rounded) singular matrices, where det(x) is about 0 and x^-1 huge: it
    is the adjugate of Q R, x up to rounding. An exact 0 on R's diagonal (a zero column)
    becomes eps * max|R|, a change of x of the size of that rounding, so R^-1 stays
    finite."""
    n = x.shape[-1]
    dtype = x.aval.dtype
    q = x.trace.emit("qr_q", [x])
    r = _triangle(_mm(_mH(q), x), False)
    info = np.finfo(dtype)
    scale = _max(_abs(r), axis=(-2, -1), keepdims=True)
    # (the smallest normal number for a zero matrix: R^-1 stays finite, det(R) is 0)
    delta = _convert(where(scale > 0, scale * float(info.eps), float(info.tiny)), dtype)
    r = where(logical_and(np.eye(n, dtype=bool), r == 0), delta, r)
    # solve of a triangular matrix is back substitution in both lowerings: LU with partial
    # pivoting and Householder QR of a triangular matrix do no arithmetic
    inv = x.trace.emit("solve", [r, _mH(q)])
    det_r = _prod(_diagonal(r, axis1=-2, axis2=-1), axis=-1)
    return multiply(multiply(x.trace.emit("detsign", [q]), det_r)[..., None, None], inv)


def _adjugate_tangent(x: Tracer, dx: Tracer) -> Tracer:
    """d adj(x) in the direction dx, through an SVD x = U S V^H: adj(x) = det(U)
    conj(det(V)) V adj(S) U^H, so with F = U^H dx V, d adj(x) = det(U) conj(det(V))
    V d adj(S)[F] U^H, and d adj(S)[F] has diagonal entries sum_{k != i} F_kk
    prod_{l != i, k} s_l and off-diagonal ones -F_ij prod_{l != i, j} s_l (first-order
    cofactors of S + F). Exact for any SVD, at repeated and zero singular values too
    (there the vectors are not unique but the formula does not depend on the choice)."""
    n = x.shape[-1]
    dtype = x.aval.dtype
    u = x.trace.emit("svd_u", [x])
    s = x.trace.emit("svdvals", [x])
    vh = x.trace.emit("svd_vh", [x])
    c = multiply(x.trace.emit("detsign", [u]), x.trace.emit("detsign", [vh]))
    f = _mm(_mm(_mH(u), dx), _mH(vh))
    # p[..., i, k] = prod of s_l over l not in {i, k}, 0 on the diagonal
    i, k, l = np.ogrid[:n, :n, :n]
    left_out = (l == i) | (l == k)
    p = _prod(where(left_out, np.ones((), s.aval.dtype), s[..., None, None, :]), axis=-1)
    p = _convert(where(np.eye(n, dtype=bool), np.zeros((), p.aval.dtype), p), dtype)
    fd = _diagonal(f, axis1=-2, axis2=-1)
    da = add(_diag_matrix(_mm(p, fd[..., None])[..., 0]), -multiply(f, p))
    return multiply(c[..., None, None], _mm(_mm(_mH(vh), da), _mH(u)))


def _det_jvp(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, Any]:
    """d det = sum(adj(x)^T * dx) (Jacobi's formula, holomorphic for complex x)."""
    (x,), (dx,) = primals, tangents
    return _det(x), _sum(multiply(_mT(_adj(x)), dx), axis=(-2, -1))


def _adj_jvp(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, Any]:
    """adj's value is _adjugate, its JVP _adjugate_tangent, so the Hessian of det is exact
    at singular matrices too (its third derivative goes through the SVD's vectors, which
    have none at repeated singular values)."""
    (x,), (dx,) = primals, tangents
    return _adj(x), _adjugate_tangent(x, dx)


# det from 4 x 4 up and its adjugate, with their own derivatives (tidu.trace.derivatives)
_det = with_jvp(_det_value, _det_jvp)
_adj = with_jvp(_adjugate, _adj_jvp)


@numpy_fallback("linalg.trace", accumulates=True)
def trace(x: ArrayLike, offset: int = 0, dtype: Any = None) -> Any:
    """``numpy.linalg.trace``: the sum of each matrix's diagonal ``offset`` (the last two
    axes), summed in ``dtype`` when given."""
    if x.ndim < 2:
        raise ValueError(f"tnp.linalg.trace: expected rank >= 2, got shape {x.shape}")
    if offset != 0:
        return _sum(_diagonal(x, offset=offset, axis1=-2, axis2=-1), axis=-1, dtype=dtype)
    d = _triangle(_triangle(x, True), False)
    return _sum(d, axis=(-2, -1), dtype=dtype)


# --- Hermitian eigenproblem ------------------------------------------------------------


# Eager calls compute tidu's definitions (docs/linalg.md), not NumPy's: the Hermitian part
# rather than NumPy's UPLO triangle, eigenvectors in tidu's phase gauge.
@numpy_fallback(lambda a, UPLO="L": reference.eigvalsh(_np_matrices("eigvalsh", a, square=True)))
def eigvalsh(a: ArrayLike, UPLO: str = "L") -> Any:  # noqa: N803 (NumPy's name)
    """Ascending eigenvalues of each Hermitian matrix, of its Hermitian part
    ``(a + a^H) / 2`` (as JAX; eager and traced alike). ``UPLO`` is accepted for NumPy
    compatibility and not read: for a Hermitian matrix every triangle gives the same."""
    (x,) = _matrices("eigvalsh", a)
    _square(x, "eigvalsh")
    return x.trace.emit("eigvalsh", [x])


@numpy_fallback(lambda a, UPLO="L": _result(_EIGH, *reference.eigh(_np_matrices("eigh", a, square=True))))
def eigh(a: ArrayLike, UPLO: str = "L") -> tuple[Any, Any]:  # noqa: N803
    """(eigenvalues ascending, eigenvectors as columns; NumPy's named tuple) of each
    Hermitian matrix, of its Hermitian part as ``eigvalsh`` (``UPLO`` is not read). Each
    eigenvector's first component is real and >= 0 (eager and traced alike). The
    derivative of the eigenvectors is nan/inf where two eigenvalues are equal (it does
    not exist there), as in JAX."""
    (x,) = _matrices("eigh", a)
    _square(x, "eigh")
    if x.shape[-1] == 0:  # no eigenvalues (the vectors' rule and lowering read a first row)
        return _result(_EIGH, _zeros(x, x.shape[:-1], real=True), _zeros(x, x.shape))
    return _result(_EIGH, x.trace.emit("eigvalsh", [x]), x.trace.emit("eigh_vectors", [x]))


# --- general (non-Hermitian) eigenproblem -----------------------------------------------------


def _square_a(what: str, shape: tuple[int, ...]) -> None:
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"tnp.linalg.{what}: a must be a square matrix or a stack of them (..., n, n), "
                         f"got shape {tuple(shape)}")


def _complex_dtype(dtype: str) -> str:
    return "complex64" if dtype in ("float32", "complex64") else "complex128"


def _np_eig(what: str, a: Any) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(a)
    _square_a(what, a.shape)
    a = a.astype(_inexact(a.dtype.name))
    if a.shape[-1] == 0:  # no eigenvalues (LAPACK's gauge search would look at no component)
        dtype = _complex_dtype(a.dtype.name)
        return np.zeros(a.shape[:-1], dtype), np.zeros(a.shape, dtype)
    return reference.eig(a)


def _empty_eig(x: Tracer, vectors: bool) -> Tracer:
    """eigvals (or eig's vectors) of 0 x 0 matrices: empty complex arrays."""
    dtype = _complex_dtype(x.aval.dtype)
    return _prep(x.trace, np.zeros((), dtype), dtype, x.shape if vectors else x.shape[:-1])


@numpy_fallback(lambda a: _np_eig("eigvals", a)[0])
def eigvals(a: ArrayLike) -> Any:
    """Eigenvalues of each square matrix, complex (as JAX, also for real matrices), sorted
    by real part, then imaginary part (eager and traced alike; NumPy and JAX keep LAPACK's
    order, which jumps). dw_i = (V^-1 da V)_ii; repeated eigenvalues have no derivative."""
    (x,) = _matrices("eigvals", a)
    _square_a("eigvals", x.shape)
    if x.shape[-1] == 0:
        return _empty_eig(x, False)
    return x.trace.emit("eigvals", [x])


@numpy_fallback(lambda a: _result(_EIG, *_np_eig("eig", a)))
def eig(a: ArrayLike) -> tuple[Any, Any]:
    """(eigenvalues, right eigenvectors as columns; NumPy's named tuple) of each square
    matrix, complex, in ``eigvals``'s order. Each eigenvector has unit 2-norm and its
    largest-magnitude component real and positive (LAPACK geev's gauge, as JAX documents
    it; geev leaves a sign for real matrices, fixed the same way). The eigenvectors'
    derivative needs distinct eigenvalues (inf or nan otherwise) and no tie for the
    largest component."""
    (x,) = _matrices("eig", a)
    _square_a("eig", x.shape)
    if x.shape[-1] == 0:
        return _result(_EIG, _empty_eig(x, False), _empty_eig(x, True))
    return _result(_EIG, x.trace.emit("eigvals", [x]), x.trace.emit("eig_vectors", [x]))


# --- QR ------------------------------------------------------------------------------------


@numpy_fallback(np.linalg.qr)
def qr(a: ArrayLike, mode: str = "reduced") -> Any:
    """QR decomposition ``a = Q R`` (Householder, as LAPACK: R has a real diagonal).
    ``mode``: ``'reduced'`` (Q (..., m, k), R (..., k, n), k = min(m, n)), ``'complete'``
    (the same when m <= n), ``'r'`` (R only). Derivatives need the leading k columns of a
    to be linearly independent."""
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"tnp.linalg.qr: mode={mode!r}; use 'reduced', 'complete' or 'r'")
    (x,) = _matrices("qr", a)
    if x.ndim < 2:
        raise ValueError(f"tnp.linalg.qr: expected matrices (..., m, n), got shape {x.shape}")
    m, n = x.shape[-2:]
    if mode == "complete" and m > n:
        raise NotImplementedError("tnp.linalg.qr: mode='complete' of a tall matrix (m > n) is not supported on "
                                  "traced arrays; use mode='reduced'")
    head = x if m >= n else x[..., :, :m]
    q, r = x.trace.emit("qr_q", [head]), x.trace.emit("qr_r", [head])
    if m < n:  # a = Q [R1, Q^H a2]
        r = concatenate([r, _mm(_mH(q), x[..., :, m:])], axis=-1)
    return r if mode == "r" else _result(_QR, q, r)


# --- singular value decomposition ---------------------------------------------------------


@numpy_fallback(lambda x: reference.svdvals(_np_matrices("svdvals", x)))
def svdvals(x: ArrayLike) -> Any:
    """Singular values (..., min(m, n)), descending."""
    ops = _matrices("svdvals", x)
    (t,) = ops
    if t.ndim < 2:
        raise ValueError(f"tnp.linalg.svdvals: expected matrices (..., m, n), got shape {t.shape}")
    if 0 in t.shape[-2:]:
        return _zeros(t, t.shape[:-2] + (0,), real=True)
    return t.trace.emit("svdvals", [t])


def _zeros(x: Tracer, shape: tuple[int, ...], real: bool = False) -> Tracer:
    """A constant of zeros of x's dtype (its real counterpart when ``real``): the factors of
    matrices with no rows or no columns, which have no entries to compute (the primitives'
    rules and lowerings read a first row or a largest singular value)."""
    dtype = np.finfo(x.aval.dtype).dtype.name if real else x.aval.dtype
    return _prep(x.trace, np.zeros((), dtype), dtype, shape)


def _np_svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False) -> Any:
    # tidu's gauge (reference.svd), as the traced svd; hermitian is a hint NumPy uses to
    # pick an algorithm, whose vectors would be in another gauge: not read
    x = _np_matrices("svd", a)
    if not compute_uv:
        return reference.svdvals(x)
    return _result(_SVD, *_np_gauged_svd(x, full_matrices))


def _np_gauged_svd(a: np.ndarray, full_matrices: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """reference.svd (tidu's gauge); NumPy's for matrices with no rows or no columns, which
    have no singular vectors to gauge (reference.svd reads V's first row)."""
    if 0 in a.shape[-2:]:
        return tuple(np.linalg.svd(a, full_matrices=full_matrices))  # type: ignore[return-value]
    return reference.svd(a, full_matrices)


@numpy_fallback(_np_svd)
def svd(a: ArrayLike, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False) -> Any:
    """(U, S, Vh) with ``a = U diag(S) Vh`` (NumPy's named tuple), S descending. Each right
    singular vector (row of Vh) is scaled so that its first component is real and >= 0
    (U's column follows), eager and traced alike, which makes the vectors differentiable
    functions of a (NumPy and JAX keep LAPACK's phases). ``full_matrices=True`` is the
    reduced SVD for square matrices; traced, others need ``full_matrices=False``.
    ``hermitian`` is not read. Derivatives of U and Vh need distinct nonzero singular values."""
    if not compute_uv:
        return svdvals(a)
    (t,) = _matrices("svd", a)  # type: ignore[misc]
    if t.ndim < 2:
        raise ValueError(f"tnp.linalg.svd: expected matrices (..., m, n), got shape {t.shape}")
    if full_matrices and t.shape[-1] != t.shape[-2]:
        raise NotImplementedError(f"tnp.linalg.svd: full_matrices=True of a non-square {t.shape[-2:]} matrix "
                                  "is not supported on traced arrays (its extra vectors have no derivative); "
                                  "pass full_matrices=False")
    m, n = t.shape[-2:]
    if not min(m, n):  # no singular values: U (..., m, 0), Vh (..., 0, n)
        batch = t.shape[:-2]
        return _result(_SVD, _zeros(t, batch + (m, 0)), _zeros(t, batch + (0,), real=True), _zeros(t, batch + (0, n)))
    return _result(_SVD, t.trace.emit("svd_u", [t]), t.trace.emit("svdvals", [t]), t.trace.emit("svd_vh", [t]))


def _hermitian_from_lower(t: Tracer) -> Tracer:
    """The Hermitian matrix that each matrix's lower triangle defines, as LAPACK's eigh
    (UPLO='L') reads it: the strict lower triangle, its conjugate transpose above the
    diagonal, and the diagonal's real part. (T + T^H + L + L^H) / 2 with T the lower
    triangle and L the strict one: exact (a halving of doubled values)."""
    low, strict = _triangle(t, lower=True), _triangle(t, lower=True, strict=True)
    return multiply(add(add(low, _mH(low)), add(strict, _mH(strict))), 0.5)


def _np_pinv(a: Any, rcond: float | None = None, hermitian: bool = False, *, rtol: float | None = None) -> Any:
    kw = {"rtol": rtol} if rtol is not None else {}
    if rcond is not None:
        kw["rcond"] = rcond
    x = _np_matrices("pinv (hermitian=True)", a, square=True) if hermitian else _np_matrices("pinv", a)
    # nan for a matrix with a nan or inf (LAPACK does not converge), as traced and as JAX
    return reference.or_nan(lambda m: np.linalg.pinv(m, hermitian=hermitian, **kw), x)


@numpy_fallback(_np_pinv)
def pinv(a: ArrayLike, rcond: float | None = None, hermitian: bool = False, *, rtol: float | None = None) -> Any:
    """Moore-Penrose pseudo-inverse: singular values <= rtol * (the largest) count as 0;
    the default rtol is NumPy's, max(m, n) * eps. Differentiable where the rank does not
    change (the derivative ignores the cut-off singular values, as JAX's), repeated
    singular values included. ``hermitian=True`` (square matrices): NumPy's, which reads
    the lower triangle only (eigh's UPLO='L', the diagonal's real part): the pseudo-inverse
    of the Hermitian matrix that triangle defines, so the upper triangle has no derivative."""
    (t,) = _matrices("pinv", a)  # type: ignore[misc]
    if t.ndim < 2:
        raise ValueError(f"tnp.linalg.pinv: expected matrices (..., m, n), got shape {t.shape}")
    if hermitian:
        _square(t, "pinv (hermitian=True)")
        t = _hermitian_from_lower(t)
    cut = rtol if rtol is not None else rcond
    if cut is None:
        cut = max(t.shape[-2:]) * float(np.finfo(t.aval.dtype).eps)
    if isinstance(cut, Tracer):
        raise TypeError("tnp.linalg.pinv: rtol (rcond) must be a number or a NumPy array, not a traced value "
                        "(the cut-off decides the rank, which has no derivative)")
    cut = np.asarray(cut, dtype=np.float64)
    if cut.ndim == 0:
        return t.trace.emit("pinv", [t], {"rtol": float(cut)})
    # one cut-off per matrix (NumPy's rcond[..., None, None]): each matrix of the batch alone
    batch = t.shape[:-2]
    if broadcast_shapes(batch, cut.shape, what="tnp.linalg.pinv (a's batch axes and rtol)") != batch:
        raise ValueError(f"tnp.linalg.pinv: rtol (rcond) of shape {cut.shape} must broadcast to a's batch axes "
                         f"{batch} (one cut-off per matrix; NumPy's rule)")
    cut = np.broadcast_to(cut, batch)
    flat = reshape(t, (-1,) + t.shape[-2:])
    parts = [t.trace.emit("pinv", [flat[k:k + 1]], {"rtol": float(c)}) for k, c in enumerate(cut.reshape(-1))]
    out = concatenate(parts, axis=0)
    return reshape(out, batch + out.shape[-2:])


# --- powers and norms ------------------------------------------------------------------


def _np_matrix_power(a: Any, n: int) -> Any:
    try:
        return np.linalg.matrix_power(a, n)
    except np.linalg.LinAlgError as err:
        if "singular" not in str(err).lower() or not isinstance(n, int | np.integer):
            raise
    return np.linalg.matrix_power(_np_inv(a), -n)  # n < 0 of a singular matrix: nan, as traced


@numpy_fallback(_np_matrix_power)
def matrix_power(a: ArrayLike, n: int) -> Any:
    """a raised to the integer power n by repeated squaring (n < 0: of ``inv(a)``); an
    integer matrix to a power n >= 0 stays integer, as NumPy's, and a float16 or bfloat16
    one keeps its dtype (computed in float32)."""
    if not isinstance(n, int | np.integer):
        raise TypeError(f"tnp.linalg.matrix_power: the exponent must be an integer, got {n!r}")
    dtype = result_type(a)
    if dtype in HALF_DTYPES:
        return _convert(matrix_power(_prep(_trace_of((a,)), a, "float32"), n), dtype)
    if n >= 0 and dtype == "bool":  # NumPy's (and JAX's) boolean product: any(a_ik and b_kj)
        x = _prep(_trace_of((a,)), a, "bool")
        _square(x, "matrix_power")
        if n == 0:
            return _eye(x, x.shape[-1])
        return _power_by_squaring(x, n, _bool_mm)
    if n >= 0 and not is_inexact(dtype):
        x = _prep(_trace_of((a,)), a, dtype)
    else:
        (x,) = _matrices("matrix_power", a)
    _square(x, "matrix_power")
    if n == 0:
        return _eye(x, x.shape[-1])
    if n < 0:
        x, n = inv(x), -n
    return _power_by_squaring(x, n, _mm)


def _bool_mm(x: Tracer, y: Tracer) -> Tracer:
    """The boolean matrix product (any over k of x_ik and y_kj), as NumPy's matmul of bools:
    the integer product's nonzero entries (each factor 0 or 1, so no overflow)."""
    as_int = [t.trace.emit("convert", [t], {"dtype": "int64"}) for t in (x, y)]
    counts = _mm(*as_int)
    return x.trace.emit("compare", [counts, _prep(x.trace, 0, "int64", counts.shape)], {"direction": "NE"})


def _power_by_squaring(x: Tracer, n: int, mm: Any) -> Tracer:
    if n == 3:  # NumPy's order, (a a) a (the same value, but not the same rounding, nan and inf)
        return mm(mm(x, x), x)
    result = None
    while True:
        if n & 1:
            result = x if result is None else mm(result, x)
        n >>= 1
        if not n:
            return result
        x = mm(x, x)


def _abs2(x: Tracer) -> Tracer:
    """|x|^2 as re^2 + im^2 (smooth, unlike abs)."""
    if not is_complex(x.aval.dtype):
        return multiply(x, x)
    re, im = real(x), imag(x)
    return add(multiply(re, re), multiply(im, im))


def _extreme(pick: Any, a: Tracer, axis: Any, keepdims: bool, ord: Any) -> Any:
    """The largest (``_max``) or smallest (``_min``) of sizes ``a`` (>= 0) over ``axis``;
    over no elements, 0 for the largest and NumPy's error for the smallest."""
    axes = tuple(range(a.ndim)) if axis is None else (axis,) if isinstance(axis, int) else axis
    if all(a.shape[i] for i in axes):
        return pick(a, axis=axis, keepdims=keepdims)
    if pick is _min:
        raise ValueError(f"tnp.linalg.norm: ord={ord!r} of an empty array has no value (a minimum of no "
                         "elements; NumPy raises too)")
    shape = tuple(1 if i in axes else d for i, d in enumerate(a.shape)) if keepdims else \
        tuple(d for i, d in enumerate(a.shape) if i not in axes)
    return _prep(a.trace, 0, a.aval.dtype, shape)


def _vector_norm(x: Tracer, ord: Any, axis: tuple[int, ...], keepdims: bool) -> Any:
    if ord is None or ord == 2:
        return sqrt(_sum(_abs2(x), axis=axis, keepdims=keepdims))
    a = _abs(x)
    if ord == np.inf:  # (JAX's initial 0: at x = 0 the 0 takes half the derivative, as there)
        return _max(a, axis=axis, keepdims=keepdims, initial=0)
    if ord == -np.inf:
        return _extreme(_min, a, axis, keepdims, ord)
    if ord == 0:
        nz = x.trace.emit("convert", [x.trace.emit("compare", [a, _prep(x.trace, 0, a.aval.dtype, a.shape)],
                                                   {"direction": "NE"})], {"dtype": a.aval.dtype})
        return _sum(nz, axis=axis, keepdims=keepdims)
    if ord == 1:
        return _sum(a, axis=axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"tnp.linalg.norm: ord={ord!r} is a matrix norm; give two axes")
    return power(_sum(power(a, float(ord)), axis=axis, keepdims=keepdims), 1.0 / float(ord))


def _move_last(x: Tracer, r: int, c: int) -> Tracer:
    """x with axes r, c moved to the end (in that order)."""
    perm = tuple(i for i in range(x.ndim) if i not in (r, c)) + (r, c)
    return x.trace.emit("transpose", [x], {"perm": perm}) if perm != tuple(range(x.ndim)) else x


def _singular_values(m: Tracer) -> Tracer:
    return svdvals(m)


def _matrix_norm(x: Tracer, ord: Any, axis: tuple[int, int], keepdims: bool) -> Any:
    r, c = axis
    if ord is None or ord == "fro":
        return _vector_norm(x, None, axis, keepdims)
    if ord in (1, -1, np.inf, -np.inf):
        col_axis, row_axis = (r, c) if ord in (1, -1) else (c, r)
        sums = _sum(_abs(x), axis=col_axis, keepdims=True)
        out = _extreme(_max if ord in (1, np.inf) else _min, sums, row_axis, True, ord)
        return out if keepdims else x.trace.emit("reshape", [out], {
            "shape": tuple(d for i, d in enumerate(out.shape) if i not in (r, c))})
    if ord in (2, -2, "nuc"):
        s = _singular_values(_move_last(x, r, c))
        out = _extreme(_max if ord == 2 else _min, s, s.ndim - 1, False, ord) if ord != "nuc" else _sum(s, axis=-1)
        if keepdims:
            shape = tuple(1 if i in (r, c) else d for i, d in enumerate(x.shape))
            out = out.trace.emit("reshape", [out], {"shape": shape})
        return out
    raise ValueError(f"tnp.linalg.norm: invalid matrix norm ord={ord!r}; use None, 'fro', 'nuc', "
                     "1, -1, 2, -2, inf or -inf")


def _np_norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    try:
        return np.linalg.norm(x, ord, axis, keepdims)
    except np.linalg.LinAlgError:  # the 2, -2 or nuclear norm of a matrix with a nan or inf entry
        pass
    # as traced (and as JAX): those matrices' singular values are nan, so their norm is nan
    a = np.asarray(x)
    axes = (0, 1) if axis is None else tuple(int(i) % a.ndim for i in axis)
    moved = np.moveaxis(a, axes, (-2, -1))
    s = reference.or_nan(reference.svdvals, moved.astype(_inexact(moved.dtype.name)))
    out = {2: np.max, -2: np.min, "nuc": np.sum}[ord](s, axis=-1)
    return np.expand_dims(out, axes) if keepdims else out


@numpy_fallback(_np_norm, accumulates=True)
def norm(x: ArrayLike, ord: Any = None, axis: int | Sequence[int] | None = None,
         keepdims: bool = False) -> Any:
    """``numpy.linalg.norm``: vector norms (1-D, or one ``axis``) of every ``ord``
    (None/2, 1, inf, -inf, 0, any p) and matrix norms (2-D, or two axes): None/'fro',
    'nuc', 1, -1, 2, -2, inf, -inf. The 2, -2 and nuclear norms use ``svdvals``. A float16
    or bfloat16 norm is computed in float32 and rounded once (as the reductions)."""
    given = _info(x)[0]
    dtype = "float32" if given in HALF_DTYPES else _inexact(given)
    (t,) = [_prep(_trace_of((x,)), x, dtype)]  # type: ignore[arg-type]
    out = _norm(t, ord, axis, keepdims)
    return _convert(out, given) if given in HALF_DTYPES else out


def _norm(t: Tracer, ord: Any, axis: int | Sequence[int] | None, keepdims: bool) -> Any:
    if axis is None:
        if ord is None:
            return _vector_norm(t, None, tuple(range(t.ndim)), keepdims)
        if t.ndim == 1:
            return _vector_norm(t, ord, (0,), keepdims)
        if t.ndim == 2:
            return _matrix_norm(t, ord, (0, 1), keepdims)
        raise ValueError(f"tnp.linalg.norm: ord={ord!r} needs a 1-D or 2-D array or an axis, "
                         f"got shape {t.shape}")
    axes = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    axes = tuple(int(a) % t.ndim for a in axes)
    if len(axes) == 1:
        return _vector_norm(t, ord, axes, keepdims)
    if len(axes) == 2 and axes[0] != axes[1]:
        return _matrix_norm(t, ord, (axes[0], axes[1]), keepdims)
    raise ValueError(f"tnp.linalg.norm: axis={axis!r} must be one axis or two distinct axes")



# --- condition number and rank -------------------------------------------------------------


@numpy_fallback(np.linalg.cond)
def cond(x: ArrayLike, p: Any = None) -> Any:
    """``numpy.linalg.cond``: the condition number of each matrix in norm ``p``; None, 2
    and -2 from the singular values (largest over smallest, or the reverse; any shape),
    'fro', 'nuc', 1, -1, inf, -inf as ``norm(x, p) * norm(inv(x), p)`` (square matrices).
    As in NumPy, a nan result is inf unless the matrix has a nan entry (a singular
    matrix, or an infinite entry, gives inf)."""
    (t,) = _matrices("cond", x)
    if t.ndim < 2:
        raise ValueError(f"tnp.linalg.cond: expected matrices (..., m, n), got shape {t.shape}")
    if 0 in t.shape[-2:]:  # NumPy's error (eagerly the same)
        raise np.linalg.LinAlgError(f"tnp.linalg.cond is not defined on empty arrays (matrices of shape "
                                    f"{t.shape[-2:]})")
    if p is None or p == 2 or p == -2:
        s = svdvals(t)
        hi, lo = _max(s, axis=-1), _min(s, axis=-1)
        r = hi / lo if p != -2 else lo / hi
    else:
        _square(t, "cond")
        axes = (t.ndim - 2, t.ndim - 1)
        r = multiply(norm(t, p, axis=axes), norm(inv(t), p, axis=axes))
    has_nan = _any(isnan(t), axis=(-2, -1))
    return where(logical_and(isnan(r), logical_not(has_nan)), np.inf, r)


def _np_matrix_rank(M: Any, rtol: Any = None, *, tol: Any = None) -> Any:  # noqa: N803 (NumPy's name)
    try:
        return np.linalg.matrix_rank(M, tol=tol, rtol=rtol)
    except np.linalg.LinAlgError:  # a nan or inf entry: tidu's singular values (nan), as traced
        pass
    m = np.asarray(M)
    s = reference.or_nan(lambda x: reference.svdvals(x), m.astype(_inexact(m.dtype.name)))
    if tol is None:
        rel = max(m.shape[-2:]) * np.finfo(s.dtype).eps if rtol is None else np.asarray(rtol)[..., None]
        tol = np.max(s, axis=-1, keepdims=True) * rel
    else:
        tol = np.asarray(tol)[..., None]
    return np.count_nonzero(s > tol, axis=-1)


@numpy_fallback(_np_matrix_rank, "M")
def matrix_rank(M: ArrayLike, rtol: Any = None, *, tol: Any = None) -> Any:  # noqa: N803 (NumPy's name)
    """The rank of each matrix (an integer, not differentiable): the number of singular
    values above ``tol`` (absolute), else above ``rtol`` times the largest (default:
    max(m, n) times the dtype's machine epsilon), as ``jax.numpy.linalg.matrix_rank``."""
    (t,) = _matrices("matrix_rank", M)
    if t.ndim < 2:  # NumPy's (and JAX's): 1 unless every element is 0
        return _sum(_any(t != 0), dtype=np.int64)
    s = svdvals(t)
    if not s.shape[-1]:  # an empty matrix: rank 0 (NumPy's)
        return _sum(s > 0, axis=-1)
    if tol is None:
        rel = max(t.shape[-2:]) * np.finfo(s.dtype).eps if rtol is None else _per_matrix(rtol)
        tol = multiply(_max(s, axis=-1, keepdims=True), rel)
    else:
        tol = _per_matrix(tol)
    return _sum(s > tol, axis=-1)


def _per_matrix(v: Any) -> Any:
    """A tolerance given per matrix (a scalar, or the batch axes' shape) with an axis added
    to broadcast against the singular values (..., k), as NumPy's ``rtol[..., None]``."""
    return v if not _shape(v) else reshape(v, tuple(_shape(v)) + (1,))


# --- least squares ---------------------------------------------------------------------------


def _lstsq_rcond(rcond: Any, m: int, n: int, dtype: Any, xp: Any) -> Any:
    """The cut-off ratio lstsq applies: max(m, n) * eps by default (NumPy's and JAX's);
    a given one as LAPACK's gelsd reads it (NumPy's lstsq): <= 0 or >= 1 means the
    unit roundoff eps / 2 (NumPy's ``rcond=-1``, "machine precision")."""
    eps = float(np.finfo(dtype).eps)
    if rcond is None:
        return eps * max(m, n)
    return xp.where((rcond <= 0) | (rcond >= 1), eps / 2, rcond)


def _lstsq_parts(a: Any, b: Any, rcond: Any, svd_of: Any, xp: Any) -> tuple[Any, Any, Any, Any]:
    """``lstsq``'s (x, resid, rank, s) from the SVD, written once for NumPy values (the eager
    call) and tidu values (a traced ``rcond`` only: x's derivative then needs distinct
    singular values, the vectors'; ``lstsq`` otherwise goes through ``pinv``)."""
    m, n = _shape(a)
    vector = len(_shape(b)) == 1
    rhs = xp.reshape(b, (m, 1)) if vector else b
    u, s, vh = svd_of(a)
    rc = _lstsq_rcond(rcond, m, n, s.dtype, xp)
    keep = s > rc * _largest(s)  # gelsd's (NumPy's): <= counts as 0, so a zero matrix gives x = 0
    s_inv = xp.where(keep, 1.0 / xp.where(keep, s, 1.0), 0.0)
    x = xp.matmul(xp.conj(xp.swapaxes(vh, -1, -2)), s_inv[:, None] * xp.matmul(xp.conj(xp.swapaxes(u, -1, -2)), rhs))
    return _lstsq_finish(a, rhs, x, keep, s, vector, xp)


def _lstsq_finish(a: Any, rhs: Any, x: Any, keep: Any, s: Any, vector: bool, xp: Any) -> tuple[Any, Any, Any, Any]:
    """(x, resid, rank, s) from the solution x (n, k) of the right-hand sides rhs (m, k)."""
    r = rhs - xp.matmul(a, x)
    resid = xp.sum(xp.real(r * xp.conj(r)), axis=0)
    return (xp.reshape(x, (_shape(a)[1],)) if vector else x), resid, xp.sum(keep), s


def _np_lstsq(a: Any, b: Any, rcond: Any = None, *, numpy_resid: bool = False) -> Any:
    if numpy_resid:
        return np.linalg.lstsq(a, b, rcond=rcond)
    dtype = np.result_type(a, b)
    dtype = dtype if dtype.kind in "fc" else np.dtype(np.float64)
    a, b = np.asarray(a, dtype), np.asarray(b, dtype)
    _lstsq_check(a.shape, b.shape)
    return _lstsq_parts(a, b, rcond, _np_gauged_svd, np)


def _lstsq_check(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> None:
    if len(a_shape) != 2 or len(b_shape) not in (1, 2) or b_shape[0] != a_shape[0]:
        raise ValueError(f"tnp.linalg.lstsq: expected a (m, n) and b (m,) or (m, k), got {a_shape} and {b_shape}")


@numpy_fallback(_np_lstsq, "a", "b")
def lstsq(a: ArrayLike, b: ArrayLike, rcond: Any = None, *, numpy_resid: bool = False) -> tuple[Any, Any, Any, Any]:
    """``jax.numpy.linalg.lstsq``: (x, resid, rank, s) for the 2-D ``a`` (m, n) and b (m,)
    or (m, k): x the minimum-norm least-squares solution (singular values up to ``rcond``
    times the largest dropped, as NumPy's gelsd; default max(m, n) * eps: a zero matrix
    gives x = 0 and rank 0, JAX's nan; ``rcond`` <= 0 or >= 1 is gelsd's eps / 2), resid
    the sum of squared residuals per column (shape (k,), or (1,) for a vector b: always,
    as JAX), rank and the singular values. Eager and traced alike; ``numpy_resid=True``
    (NumPy's resid, empty where the rank is deficient or m <= n) only on NumPy values.
    Traced, x is ``pinv(a, rtol=rcond) @ b``: its derivative is pinv's, right wherever
    the rank is locally constant, repeated singular values included."""
    if numpy_resid:
        raise NotImplementedError("tnp.linalg.lstsq: numpy_resid=True gives a result whose shape depends on the "
                                  "rank, which a traced call cannot know; use the default (resid always)")
    a_, b_ = _matrices("lstsq", a, b)
    _lstsq_check(a_.shape, b_.shape)
    if isinstance(rcond, Tracer):  # the cut-off must be a number for pinv: the SVD's formula
        return _lstsq_parts(a_, b_, rcond, lambda t: svd(t, full_matrices=False), _TRACED)
    m, n = a_.shape
    rc = float(_lstsq_rcond(None if rcond is None else float(np.asarray(rcond)), m, n, a_.aval.dtype, np))
    vector = b_.ndim == 1
    rhs = reshape(b_, (m, 1)) if vector else b_
    # the minimum-norm solution is pinv(a) b with the same cut-off (singular values
    # <= rc * the largest count as 0): pinv's JVP needs no singular vectors, so x's
    # derivatives (of every order) hold where SVD's vectors have none (repeated singular values)
    x = _mm(pinv(a_, rtol=rc), rhs)
    s = svdvals(a_)
    return _lstsq_finish(a_, rhs, x, s > rc * _largest(s), s, vector, _TRACED)


def _largest(s: Any) -> Any:
    """The largest of the singular values s (descending), 0 for an empty matrix (none:
    x = 0 and rank 0, as NumPy's and JAX's lstsq)."""
    return s[0] if _shape(s)[0] else 0.0


# --- the array API standard's linalg extension (as jax.numpy.linalg) ------------------


def cross(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1) -> Any:
    """The cross product of 3-vectors along ``axis`` (the standard's: size 3 only)."""
    for name, v in (("x1", x1), ("x2", x2)):
        shape = _shape(v)
        if not shape or shape[axis] != 3:
            raise ValueError(f"tnp.linalg.cross: {name} must have size 3 along axis {axis}, got shape {shape}")
    return _cross(x1, x2, axis=axis)


def diagonal(x: ArrayLike, /, *, offset: int = 0) -> Any:
    """The diagonals of the matrices in the last two axes."""
    return _diagonal(x, offset=offset, axis1=-2, axis2=-1)


def matrix_norm(x: ArrayLike, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:
    """``norm`` of the matrices in the last two axes."""
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def vector_norm(x: ArrayLike, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False,
                ord: Any = 2) -> Any:
    """The vector ``ord``-norm over ``axis`` (every element when None, as one vector)."""
    if axis is None:
        flat = reshape(x, (-1,))
        out = norm(flat, ord=ord)
        return reshape(out, (1,) * len(_shape(x))) if keepdims else out
    if isinstance(axis, tuple) and len(axis) != 1:
        shape = _shape(x)
        axes = tuple(a % len(shape) for a in axis)
        rest = [a for a in range(len(shape)) if a not in axes]
        moved = _transpose(x, (*rest, *axes))
        flat = reshape(moved, (*[shape[a] for a in rest], -1))
        out = norm(flat, ord=ord, axis=-1)
        if keepdims:
            out = reshape(out, tuple(1 if a in axes else shape[a] for a in range(len(shape))))
        return out
    return norm(x, ord=ord, axis=axis if isinstance(axis, int) else axis[0], keepdims=keepdims)


def matrix_transpose(x: ArrayLike, /) -> Any:
    """The matrices in the last two axes transposed."""
    return swapaxes(x, -1, -2)


def multi_dot(arrays: Sequence[ArrayLike], *, precision: Any = None) -> Any:
    """The product of the matrices in order (the first may be a vector, as may the last),
    evaluated in the order of fewest multiplications (the matrix-chain order)."""
    if len(arrays) < 2:
        raise ValueError(f"tnp.linalg.multi_dot: expected at least two arrays, got {len(arrays)}")
    mats = list(arrays)
    first_vector, last_vector = len(_shape(mats[0])) == 1, len(_shape(mats[-1])) == 1
    if first_vector:
        mats[0] = reshape(mats[0], (1, -1))
    if last_vector:
        mats[-1] = reshape(mats[-1], (-1, 1))
    dims = [_shape(m)[0] for m in mats] + [_shape(mats[-1])[1]]
    n = len(mats)
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j], split[i][j] = min((cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1], k)
                                          for k in range(i, j))

    def product(i: int, j: int) -> Any:
        return mats[i] if i == j else matmul(product(i, split[i][j]), product(split[i][j] + 1, j))

    out = product(0, n - 1)
    if first_vector:
        out = out[0]
    if last_vector:
        out = out[..., 0]
    return out


def outer(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    """The outer product of two vectors."""
    if len(_shape(x1)) != 1 or len(_shape(x2)) != 1:
        raise ValueError(f"tnp.linalg.outer: x1 and x2 must be 1-D, got shapes {_shape(x1)} and {_shape(x2)}")
    return _outer(x1, x2)


def tensordot(x1: ArrayLike, x2: ArrayLike, /, *, axes: Any = 2, precision: Any = None,
              preferred_element_type: Any = None) -> Any:
    return _tensordot(x1, x2, axes=axes)


def vecdot(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1, precision: Any = None,
           preferred_element_type: Any = None) -> Any:
    """sum(conj(x1) * x2) along ``axis`` (broadcast batch axes)."""
    return _vecdot(x1, x2, axis=axis)


# what _lstsq_parts calls, for tidu values (NumPy's module for NumPy values)
_TRACED = SimpleNamespace(reshape=reshape, where=where, matmul=matmul, conj=conj, swapaxes=swapaxes, real=real,
                          sum=_sum)
