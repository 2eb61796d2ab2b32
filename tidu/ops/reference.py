"""The reference meaning of every primitive, in NumPy (StableHLO/JAX semantics).

``impl_of(op)(args, attrs)`` computes one primitive of the active catalog and always
returns an ``np.ndarray`` of the declared dtype (0-d for scalars), with NumPy
floating-point warnings silenced (nan and inf are ordinary values). The kernel is the
one the primitive's rule block names (its ``numpy`` clause, tidu.ops.kernels): a NumPy
function, its meaning read as NumPy code, or one of the structural kernels below.

Results keep the operand dtype: a float32 computation stays float32. Implementations turn
rank-0 operands into NumPy scalars before calling a kernel; the NumPy lowering
(``tidu.lowering.numpy``) carries rank-0 values the same way and inlines the elementwise
kernels as the very same expressions, so the two agree bit for bit.
"""

from __future__ import annotations

import functools
import math
import operator
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.special

from tidu.core.body import Body
from tidu.core.keys import Attrs, Literal, aval_of, complex_dtype
from tidu.ops import control
from tidu.ops.catalog import Catalog, Primitive, catalog
from tidu.ops.kernels import exact_kernel, kernel
from tidu.ops.type_rules import conv_out_size

Array = Any  # an np.ndarray, or a NumPy scalar for rank 0


# --- elementwise kernels that depend on the dtype ---------------------------------------
# (the other elementwise primitives run the NumPy function their ``numpy`` clause names, or
# their meaning: tidu.ops.kernels.exact_kernel)


def conj(x: Array) -> Array:
    return np.conjugate(x) if x.dtype.kind == "c" else x


def real(x: Array) -> Array:
    return x.real if x.dtype.kind == "c" else x


def complex_(re: Array, im: Array) -> np.ndarray:
    """re + i·im without arithmetic (so inf and nan parts stay where they are)."""
    out = np.empty(np.shape(re), dtype=complex_dtype(re.dtype.name))
    out.real = re
    out.imag = im
    return out


COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "EQ": operator.eq, "NE": operator.ne, "LT": operator.lt,
    "LE": operator.le, "GT": operator.gt, "GE": operator.ge,
}
COMPARISON_SYMBOLS = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


def compare(x: Array, y: Array, direction: str) -> Array:
    return COMPARISONS[direction](x, y)


def select(pred: Array, on_true: Array, on_false: Array) -> Array:
    if pred.ndim == 0:
        return on_true if pred else on_false
    return np.where(pred, on_true, on_false)


# --- structural -----------------------------------------------------------------


def constant(value: Literal) -> np.ndarray:
    return value.array


def convert(x: Array, dtype: str) -> Array:
    """Change of dtype; complex to a real dtype keeps the real part; floats to integers
    truncate toward zero and saturate, nan giving 0 (XLA's, JAX's; ``float_to_int``)."""
    if x.dtype.kind == "c" and np.dtype(dtype).kind != "c":
        x = x.real
    if np.dtype(dtype).kind in "iu" and (x.dtype.kind == "f" or x.dtype.name == "bfloat16"):
        return float_to_int(x, dtype)
    return x.astype(dtype)


def float_to_int(x: Array, dtype: Any) -> Array:
    """Floats as integers of ``dtype`` as XLA converts them: truncated toward zero, values
    past the range the nearest end of it, nan 0 (NumPy's astype leaves those to the
    platform: nan to int32 is -2147483648 on x86)."""
    info = np.iinfo(dtype)
    scalar = not isinstance(x, np.ndarray)  # (a NumPy scalar in, one out, as astype gives)
    x = np.asarray(x)
    wide = x.astype(np.float64) if x.dtype.itemsize < 4 else x  # (the ends of int16 and up exceed float16)
    lo, hi = wide.dtype.type(info.min), wide.dtype.type(info.max)  # hi may round up past the range
    low, high, nan = wide <= lo, wide >= hi, np.isnan(wide)
    with np.errstate(invalid="ignore"):
        out = np.where(low | high | nan, 0, wide).astype(dtype)
    if low.any() or high.any():
        out = np.where(low, info.min, np.where(high, info.max, out)).astype(dtype)
    return out[()] if scalar and out.ndim == 0 else out


def broadcast_in_dim(x: Array, shape: tuple[int, ...], dims: tuple[int, ...]) -> np.ndarray:
    """Operand axis i becomes result axis dims[i] (of size 1 or shape[dims[i]])."""
    return np.broadcast_to(np.reshape(x, _expanded(np.shape(x), shape, dims)), shape)


@functools.lru_cache(maxsize=4096)
def _expanded(xshape: tuple[int, ...], shape: tuple[int, ...], dims: tuple[int, ...]) -> tuple[int, ...]:
    expanded = [1] * len(shape)
    for i, d in enumerate(dims):
        expanded[d] = xshape[i]
    return tuple(expanded)


def reshape(x: Array, shape: tuple[int, ...]) -> np.ndarray:
    return np.reshape(x, shape)


def reverse(x: Array, dims: tuple[int, ...]) -> np.ndarray:
    return np.flip(x, dims)


def transpose(x: Array, perm: tuple[int, ...]) -> np.ndarray:
    return np.transpose(x, perm)


def reduce_sum(x: Array, axes: tuple[int, ...]) -> Array:
    if axes and x.dtype in _HALF:  # 2-byte floats accumulate in float32 (JAX's, XLA's)
        return np.asarray(np.sum(x, axis=axes, dtype=np.float32)).astype(x.dtype)
    return np.sum(x, axis=axes, dtype=x.dtype) if axes else x


def reduce_prod(x: Array, axes: tuple[int, ...]) -> Array:
    if axes and x.dtype in _HALF:
        return np.asarray(np.prod(x, axis=axes, dtype=np.float32)).astype(x.dtype)
    return np.prod(x, axis=axes, dtype=x.dtype) if axes else x


def reduce_max(x: Array, axes: tuple[int, ...]) -> Array:
    if not axes:
        return x
    lowest = -np.inf if x.dtype.kind == "f" or x.dtype == _HALF[1] else np.iinfo(x.dtype).min
    return np.max(x, axis=axes, initial=lowest)  # the max over nothing is -inf


@functools.lru_cache(maxsize=4096)
def dot_plan(lshape: tuple[int, ...], rshape: tuple[int, ...], lhs_contract: tuple[int, ...],
             rhs_contract: tuple[int, ...], lhs_batch: tuple[int, ...], rhs_batch: tuple[int, ...],
             ) -> tuple[list[int], list[int], tuple[int, int, int], tuple[int, int, int], tuple[int, ...]]:
    """``dot_general``'s transposes and reshapes for these shapes and dimension numbers:
    (lhs axes order, rhs axes order, their 3-d shapes (batch, free, contracted) and
    (batch, contracted, free), the result's shape). Made once: a loop body calls the same
    product every step."""
    lfree = [i for i in range(len(lshape)) if i not in lhs_contract and i not in lhs_batch]
    rfree = [i for i in range(len(rshape)) if i not in rhs_contract and i not in rhs_batch]
    batch = [lshape[i] for i in lhs_batch]
    lfree_shape = [lshape[i] for i in lfree]
    rfree_shape = [rshape[i] for i in rfree]
    k = math.prod(lshape[i] for i in lhs_contract)
    nb, m, n = math.prod(batch), math.prod(lfree_shape), math.prod(rfree_shape)
    return ([*lhs_batch, *lfree, *lhs_contract], [*rhs_batch, *rhs_contract, *rfree], (nb, m, k), (nb, k, n),
            (*batch, *lfree_shape, *rfree_shape))


def dot_general(
    lhs: Array, rhs: Array, lhs_contract: tuple[int, ...], rhs_contract: tuple[int, ...],
    lhs_batch: tuple[int, ...], rhs_batch: tuple[int, ...],
) -> np.ndarray:
    """Contract lhs_contract with rhs_contract, batched over the batch axes; result axes
    are batch, lhs free, rhs free (StableHLO order). Computed as one batched matmul."""
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    pa, pb, sa, sb, shape = dot_plan(lhs.shape, rhs.shape, tuple(lhs_contract), tuple(rhs_contract),
                                     tuple(lhs_batch), tuple(rhs_batch))
    a = lhs.transpose(pa).reshape(sa)
    b = rhs.transpose(pb).reshape(sb)
    if not lhs_contract:  # an outer product: one multiplication per element, no sum (matmul with k = 1 is slow)
        return np.multiply(a, b).reshape(shape)
    out = np.matmul(a, b)  # (ml_dtypes' bfloat16 matmul accumulates and returns float32: rounded once)
    return (out if out.dtype == a.dtype else out.astype(a.dtype)).reshape(shape)


def slice_(
    x: Array, start: tuple[int, ...], limit: tuple[int, ...], strides: tuple[int, ...]
) -> Array:
    return x[tuple(slice(s, e, st) for s, e, st in zip(start, limit, strides, strict=True))]


def _dynamic_start(start: Array, n: int, size: int) -> int:
    """A dynamic slice's start clamped so the slice fits (StableHLO's dynamic_slice)."""
    return min(max(int(start), 0), n - size)


def dynamic_slice(x: Array, start: Array, axis: int, size: int) -> np.ndarray:
    x = np.asarray(x)
    s = _dynamic_start(start, x.shape[axis], size)
    return x[(slice(None),) * axis + (slice(s, s + size),)]


def dynamic_update_slice(x: Array, update: Array, start: Array, axis: int) -> np.ndarray:
    out = np.array(x)  # a copy: the operand is never written
    size = np.shape(update)[axis]
    s = _dynamic_start(start, out.shape[axis], size)
    out[(slice(None),) * axis + (slice(s, s + size),)] = update
    return out


def pad(
    x: Array, value: Array, low: tuple[int, ...], high: tuple[int, ...], interior: tuple[int, ...]
) -> np.ndarray:
    """Edge padding low/high (negative crops) and interior padding between elements."""
    return pad_to(x, value, *pad_plan(x.shape if type(x) is np.ndarray else np.shape(x), low, high, interior))


def broadcast_filled(x: Array, shape: tuple[int, ...]) -> np.ndarray:
    """``np.broadcast_to(x, shape)``'s values in a new array: generated NumPy source makes
    small broadcasts so, as np.broadcast_to costs more than copying a few thousand numbers."""
    out = np.empty(shape, dtype=x.dtype)
    out[...] = x
    return out


def pad_to(x: Array, value: Array, full: tuple[int, ...], inside: tuple[slice, ...],
           crop: tuple[slice, ...] | None) -> np.ndarray:
    """``pad`` by its plan (``pad_plan``): generated NumPy source makes the plan when it is
    written (small pads are common in gradients, and cost more to plan than to fill)."""
    out = np.empty(full, dtype=x.dtype)
    out.fill(value)  # what np.full does, without its Python-level copyto
    out[inside] = x
    return out if crop is None else out[crop]


@functools.lru_cache(maxsize=4096)
def pad_plan(xshape: tuple[int, ...], low: tuple[int, ...], high: tuple[int, ...],
             interior: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[slice, ...], tuple[slice, ...] | None]:
    """(padded shape before cropping, where x goes, the crop or None): fixed per geometry."""
    inner = [d + max(0, d - 1) * i for d, i in zip(xshape, interior, strict=True)]
    full = tuple(max(0, lo) + n + max(0, hi) for lo, n, hi in zip(low, inner, high, strict=True))
    inside = tuple(slice(max(0, lo), max(0, lo) + n, i + 1) for lo, n, i in zip(low, inner, interior, strict=True))
    crop = None if min((*low, *high), default=0) >= 0 else tuple(
        slice(max(0, -lo), f - max(0, -hi)) for lo, hi, f in zip(low, high, full, strict=True))
    return full, inside, crop


def concatenate(*xs: Array, axis: int) -> np.ndarray:
    return np.concatenate(xs, axis=axis)


# --- linear algebra (rules/linalg.rules) ------------------------------------------------
# Matrices are the last two axes. Degenerate inputs give nan (never an exception), as in
# JAX: a matrix that is not positive definite, or a singular one where NumPy raises.


def _mH(x: Array) -> np.ndarray:
    return np.conjugate(np.swapaxes(x, -1, -2))


def _hermitian_part(x: Array) -> np.ndarray:
    return (x + _mH(x)) / 2


def triangle(x: Array, lower: bool, strict: bool) -> np.ndarray:
    """The lower (upper) triangle of each matrix, without the diagonal when strict; 0 elsewhere."""
    n, m = x.shape[-2:]
    i, j = np.arange(n)[:, None], np.arange(m)[None, :]
    keep = (j < i if strict else j <= i) if lower else (j > i if strict else j >= i)
    return np.where(keep, x, np.zeros((), x.dtype))


def cholesky(x: Array) -> np.ndarray:
    """Lower Cholesky factor of the Hermitian part of x; where that is not positive
    definite, nan in the lower triangle and 0 above it (as JAX and the StableHLO lowering)."""
    s = _hermitian_part(x)
    try:
        return np.linalg.cholesky(s)
    except np.linalg.LinAlgError:
        return triangle(or_nan(np.linalg.cholesky, s), lower=True, strict=False)


def triangular_solve(a: Array, b: Array, lower: bool, unit_diagonal: bool, trans: int = 0) -> np.ndarray:
    """X with op(T) X = b (b a stack of matrices), T the lower (upper) triangle of a (its
    diagonal read as ones if ``unit_diagonal``), op per ``trans`` (0: T, 1: T^T, 2: T^H):
    substitution (LAPACK's trtrs through SciPy, as XLA's triangular solve), so a nan or
    inf entry reaches exactly the entries of X that depend on it (an LU solve of T
    pivoted around it); nan for each matrix with a 0 on the diagonal it reads (exactly
    singular: LAPACK refuses it)."""
    import scipy.linalg

    a, b = np.asarray(a), np.asarray(b)
    dtype = np.result_type(a, b)

    def solve_one(t: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        return scipy.linalg.solve_triangular(t, rhs, trans=trans, lower=lower, unit_diagonal=unit_diagonal,
                                             check_finite=False)

    try:
        return np.asarray(solve_one(a, b), dtype)
    except np.linalg.LinAlgError:
        pass
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    count = math.prod(batch)
    flat_a = np.broadcast_to(a, batch + a.shape[-2:]).reshape((count,) + a.shape[-2:])
    flat_b = np.broadcast_to(b, batch + b.shape[-2:]).reshape((count,) + b.shape[-2:])
    out = np.empty((count,) + b.shape[-2:], dtype)
    for k in range(count):
        try:
            out[k] = solve_one(flat_a[k], flat_b[k])
        except np.linalg.LinAlgError:
            out[k] = np.nan
    return out.reshape(batch + b.shape[-2:])


def solve(a: Array, b: Array) -> np.ndarray:
    """X with a X = b (b is a stack of matrices); nan where a is exactly singular."""
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        out = np.empty(np.broadcast_shapes(a.shape, b.shape[:-1] + a.shape[-1:])[:-1] + b.shape[-1:], b.dtype)
        flat_a = a.reshape((-1,) + a.shape[-2:])
        flat_b = b.reshape((-1,) + b.shape[-2:])
        flat_out = out.reshape(flat_b.shape)
        for k in range(flat_a.shape[0]):
            try:
                flat_out[k] = np.linalg.solve(flat_a[k], flat_b[k])
            except np.linalg.LinAlgError:
                flat_out[k] = np.nan
        return out


def logabsdet(x: Array) -> np.ndarray:
    return np.linalg.slogdet(x)[1]


def detsign(x: Array) -> np.ndarray:
    return np.linalg.slogdet(x)[0]


def eigvalsh(x: Array) -> np.ndarray:
    """Ascending eigenvalues of the Hermitian part of x."""
    return np.linalg.eigvalsh(_hermitian_part(x))


def eigh(x: Array) -> tuple[np.ndarray, np.ndarray]:
    """(ascending eigenvalues, eigenvectors as columns) of the Hermitian part of x, each
    eigenvector scaled so that its first component is real and >= 0 (tidu's gauge: the
    same in eager calls, traced programs and the StableHLO lowering; docs/linalg.md)."""
    w, v = np.linalg.eigh(_hermitian_part(x))
    first = v[..., :1, :]
    size = np.abs(first)
    phase = np.where(size == 0, np.ones((), v.dtype), np.conjugate(first) / np.where(size == 0, 1, size))
    return w, v * phase


def eigh_vectors(x: Array) -> np.ndarray:
    """Eigenvectors (columns, ascending eigenvalues) of the Hermitian part of x, each
    scaled so that its first component is real and >= 0."""
    return eigh(x)[1]


def qr_q(x: Array) -> np.ndarray:
    """Q of the reduced QR decomposition (m >= n)."""
    return np.linalg.qr(x, mode="reduced")[0]


def qr_r(x: Array) -> np.ndarray:
    """R of the reduced QR decomposition (m >= n)."""
    return np.linalg.qr(x, mode="reduced")[1]


def or_nan(fn: Callable[[np.ndarray], Any], x: np.ndarray) -> Any:
    """``fn(x)`` (an array or a tuple of them, each with x's leading batch axes); where
    LAPACK fails on a matrix (not positive definite, or a nan or inf entry: NumPy raises
    LinAlgError), nan for that matrix's results, as JAX gives."""
    try:
        return fn(x)
    except np.linalg.LinAlgError:
        pass
    probe = fn(np.eye(*x.shape[-2:], dtype=x.dtype))  # the results' shapes and dtypes
    single = not isinstance(probe, tuple)
    flat = x.reshape((-1,) + x.shape[-2:])
    outs = [np.full((len(flat),) + p.shape, np.nan, p.dtype) for p in ((probe,) if single else probe)]
    for k, m in enumerate(flat):
        try:
            got = fn(m)
        except np.linalg.LinAlgError:
            continue  # (left nan)
        for o, g in zip(outs, (got,) if single else got, strict=True):
            o[k] = g
    outs = [o.reshape(x.shape[:-2] + o.shape[1:]) for o in outs]
    return outs[0] if single else tuple(outs)


def svd(x: Array, full_matrices: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SVD (U, S, Vh) with each right singular vector's first component real and >= 0 and
    U's matching column scaled alike (tidu's gauge; docs/linalg.md). ``full_matrices``:
    NumPy's complete U and Vh, whose vectors past min(m, n) keep LAPACK's choice (they
    are any orthonormal basis of the complement). nan for a matrix with a nan or inf."""
    u, s, vh = or_nan(lambda m: np.linalg.svd(m, full_matrices=full_matrices), np.asarray(x))
    k = s.shape[-1]
    first = vh[..., :k, :1]  # V's first row, conjugated
    size = np.abs(first)
    phase = np.where(size == 0, np.ones((), vh.dtype), first / np.where(size == 0, 1, size))
    u, vh = u.copy(), vh.copy()
    u[..., :, :k] *= np.swapaxes(phase, -1, -2)
    vh[..., :k, :] *= np.conjugate(phase)
    return u, s, vh


def svdvals(x: Array) -> np.ndarray:
    return or_nan(lambda m: np.linalg.svd(m, compute_uv=False), np.asarray(x))


def svd_u(x: Array) -> np.ndarray:
    return svd(x)[0]


def svd_vh(x: Array) -> np.ndarray:
    return svd(x)[2]


def pinv(x: Array, rtol: float) -> np.ndarray:
    """Pseudo-inverse; singular values <= rtol * the largest count as 0."""
    return or_nan(lambda m: np.linalg.pinv(m, rtol=rtol), np.asarray(x))


def expm(x: Array) -> np.ndarray:
    """The matrix exponential of each matrix (SciPy's scaling and squaring)."""
    import scipy.linalg

    return np.asarray(scipy.linalg.expm(x), dtype=x.dtype)


def _one_norms(x: Array) -> np.ndarray:
    """The 1-norm (largest column sum of |x|) of each matrix."""
    return np.max(np.sum(np.abs(x), axis=-2), axis=-1, initial=0.0)


def _frechet_block(a: Array, e: Array) -> np.ndarray:
    """[[a, e], [0, a]] for each pair of (..., n, n) matrices."""
    return np.concatenate([np.concatenate([a, e], axis=-1), np.concatenate([np.zeros_like(a), a], axis=-1)],
                          axis=-2)


def expm_frechet(a: Array, e: Array) -> np.ndarray:
    """The Frechet derivative L(a, e) of expm at a in the direction e: the top-right block of
    expm([[a, e], [0, a]]), with e scaled to 1-norm 1 first (L is linear in e; a large e
    would only add squarings)."""
    n = a.shape[-1]
    size = _one_norms(e)[..., None, None]
    scale = np.where(size > 0, size, 1).astype(a.real.dtype)
    return np.asarray(expm(_frechet_block(a, e / scale))[..., :n, n:] * scale, dtype=a.dtype)


def _lu_factors(x: Array) -> tuple[np.ndarray, np.ndarray]:
    """(packed LU, 0-based pivots) of each matrix: LAPACK's getrf through SciPy (a singular
    matrix gives a zero on U's diagonal, as getrf; nan and inf go through)."""
    import scipy.linalg

    flat = x.reshape((math.prod(x.shape[:-2]),) + x.shape[-2:])  # (-1 is ambiguous for an empty matrix)
    lus, pivs = np.empty_like(flat), np.empty((flat.shape[0], min(x.shape[-2:])), np.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LinAlgWarning: exactly singular
        for k in range(flat.shape[0] if flat.size else 0):
            lus[k], pivs[k] = scipy.linalg.lu_factor(flat[k], check_finite=False)
    return lus.reshape(x.shape), pivs.reshape(x.shape[:-2] + pivs.shape[-1:])


def lu(x: Array) -> np.ndarray:
    """The packed LU factors of each (m, n) matrix (L below the diagonal, U on and above it)."""
    return _lu_factors(x)[0]


def lu_pivots(x: Array) -> np.ndarray:
    """The 0-based row interchanges of each matrix's LU factorization."""
    return _lu_factors(x)[1]


def permutation_matrix(pivots: Array) -> np.ndarray:
    """The int32 permutation matrices of row interchanges (k <-> pivots[k], in turn; a pivot
    outside [0, n) swaps nothing)."""
    pivots = np.asarray(pivots)
    n = pivots.shape[-1]
    if n == 0 or pivots.size == 0:
        return np.zeros(pivots.shape + (n,), np.int32)
    flat = pivots.reshape((-1, n))
    perm = np.tile(np.arange(n), (flat.shape[0], 1))
    for b in range(flat.shape[0]):
        for k in range(n):
            j = int(flat[b, k])
            if 0 <= j < n:
                perm[b, [k, j]] = perm[b, [j, k]]
    out = (perm[:, :, None] == np.arange(n)[None, None, :]).astype(np.int32)
    return out.reshape(pivots.shape + (n,))


def _complex_of(x: Array) -> np.dtype:
    return np.result_type(x.dtype, np.complex64)


def eig(x: Array) -> tuple[np.ndarray, np.ndarray]:
    """(eigenvalues, right eigenvectors as columns), complex, of each general matrix: the
    eigenvalues sorted by real part, then imaginary part (LAPACK's order jumps, e.g. near
    triangular matrices, and differs between LAPACK builds), each eigenvector of unit
    2-norm with its (first) largest-magnitude component real and positive (geev's gauge
    for complex matrices; for real ones geev leaves a sign, fixed here the same way)."""
    import scipy.linalg

    finite = np.all(np.isfinite(x), axis=(-2, -1))[..., None]  # LAPACK refuses inf and nan: nan out
    w, v = scipy.linalg.eig(np.where(finite[..., None], x, 0), check_finite=False)
    nan = np.array(complex(np.nan, np.nan), _complex_of(x))
    w = np.where(finite, np.asarray(w, dtype=_complex_of(x)), nan)
    v = np.where(finite[..., None], np.asarray(v, dtype=_complex_of(x)), nan)
    order = np.lexsort((w.imag, w.real), axis=-1)
    w = np.take_along_axis(w, order, axis=-1)
    v = np.take_along_axis(v, order[..., None, :], axis=-1)
    k = np.argmax(np.abs(v), axis=-2)[..., None, :]
    top = np.take_along_axis(v, k, axis=-2)
    size = np.abs(top)
    with np.errstate(invalid="ignore"):
        return w, v * np.where(size == 0, 1, np.conj(top) / np.where(size == 0, 1, size))


def eigvals(x: Array) -> np.ndarray:
    """Eigenvalues of each general matrix (complex; the order of ``eig``)."""
    return eig(x)[0]


def eig_vectors(x: Array) -> np.ndarray:
    """Right eigenvectors of each general matrix (complex columns; the gauge of ``eig``)."""
    return eig(x)[1]


# --- special functions with a StableHLO lowering of their own ---------------------------
# (SciPy's kernels here; no StableHLO or CHLO op computes them, so tidu.lowering.stablehlo
# writes an algorithm for each, keyed by these functions)


def bessel_i0(x: Array) -> Array:
    """I0(x), the modified Bessel function of the first kind of order 0 (nan at +-inf, as
    SciPy's, NumPy's and JAX's)."""
    return scipy.special.i0(x)


def bessel_i0e(x: Array) -> Array:
    """exp(-|x|) I0(x), the exponentially scaled modified Bessel function of order 0."""
    return scipy.special.i0e(x)


def ndtri(p: Array) -> Array:
    """The inverse of the standard normal CDF."""
    return scipy.special.ndtri(p)


def erfcx(x: Array) -> Array:
    """The scaled complementary error function exp(x^2) erfc(x)."""
    return scipy.special.erfcx(x)


def exp1(x: Array) -> Array:
    """The exponential integral E1(x), the integral of exp(-t)/t from x to inf (x > 0)."""
    return scipy.special.exp1(x)


def expi(x: Array) -> Array:
    """The exponential integral Ei(x), the principal value of the integral of exp(t)/t up to x."""
    return scipy.special.expi(x)


def sine_integral(x: Array) -> Array:
    """Si(x), the integral of sin(t)/t from 0 to x."""
    return scipy.special.sici(x)[0]


def cosine_integral(x: Array) -> Array:
    """Ci(x), gamma + log|x| + the integral of (cos t - 1)/t from 0 to |x| (real part)."""
    return scipy.special.sici(x)[1]


def gammainc(a: Array, x: Array) -> Array:
    """The regularized lower incomplete gamma function P(a, x)."""
    return scipy.special.gammainc(a, x)


def gammaincc(a: Array, x: Array) -> Array:
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    return scipy.special.gammaincc(a, x)


def gammainc_da(a: Array, x: Array, order: int) -> Array:
    """d^order P(a, x) / da^order, the derivatives of the regularized lower incomplete gamma
    function in its shape a (those of Q are their negatives): gammainc's series (below
    x = a + 1) and continued fraction (above) run on truncated Taylor series in a, so that
    every derivative up to ``order`` converges with the value. 0 where P is constant in a
    (x = 0, x = inf, a = inf), the limit from above at a = 0 (-E1(x) for order 1), nan
    for a < 0 or x < 0 and wherever P is nan."""
    dtype = np.result_type(np.asarray(a), np.asarray(x), np.float32)
    a64, x64 = (np.asarray(v, np.float64) for v in np.broadcast_arrays(a, x))
    out = np.full(a64.shape, np.nan)
    inner = (a64 >= 0) & (x64 > 0) & np.isfinite(x64) & np.isfinite(a64)
    # P is constant there: 0 at x = 0 and a = inf, 1 at x = inf (SciPy's P(0, 0) is nan)
    out[((a64 > 0) & (x64 == 0)) | ((a64 >= 0) & (x64 == np.inf) & (a64 < np.inf))
        | ((a64 == np.inf) & (x64 >= 0) & (x64 < np.inf))] = 0.0
    if order == 0:
        out = np.where(np.isnan(out) & ~inner, out, scipy.special.gammainc(a64, x64))
    else:
        series = inner & (x64 < a64 + 1)
        fraction = inner & ~series
        with np.errstate(all="ignore"):
            out[series] = _factorial_coefficient(_gammainc_series(a64[series], x64[series], order), order)
            out[fraction] = -_factorial_coefficient(_gammaincc_fraction(a64[fraction], x64[fraction], order), order)
    return out.astype(dtype, copy=False) if out.ndim else dtype.type(out)


def gamma_density_d(a: Array, x: Array, order_a: int, order_x: int) -> Array:
    """The partial derivative d^(order_a + order_x) f / da^order_a dx^order_x of the gamma
    density f = x^(a-1) e^-x / Gamma(a), P(a, x)'s derivative in x: f's x-derivatives
    are e^-x sum_j C(n, j) (-1)^(n-j) (a-1)(a-2)...(a-j) x^(a-1-j) / Gamma(a), each
    differentiated in a on truncated Taylor series. 0 where f is constant in a and x
    (x = inf, a = inf, and x = 0 for a > order_x + 1); nan for a < 0 or x < 0."""
    dtype = np.result_type(np.asarray(a), np.asarray(x), np.float32)
    a64, x64 = (np.asarray(v, np.float64) for v in np.broadcast_arrays(a, x))
    out = np.full(a64.shape, np.nan)
    inner = (a64 >= 0) & (x64 > 0) & np.isfinite(x64) & np.isfinite(a64)
    out[((a64 >= 0) & (x64 == np.inf)) | ((a64 == np.inf) & (x64 >= 0)) | ((a64 > order_x + 1) & (x64 == 0))] = 0.0
    if order_a == order_x == 0:
        out[(a64 == 1) & (x64 == 0)] = 1.0
        out[(a64 >= 0) & (a64 < 1) & (x64 == 0)] = np.inf
    with np.errstate(all="ignore"):
        ai, xi = a64[inner], x64[inner]
        exponent = _lgamma_shifted_series(ai, xi, order_a)
        exponent[0] -= np.log(xi)  # x^(a-1)
        density = _times_a(_series_exp(exponent), ai)  # exp(...) a / Gamma(a + 1) = 1 / Gamma(a)
        total = np.zeros_like(density)
        falling = np.zeros_like(density)  # (a-1)(a-2)...(a-j) as a series, j = 0 first
        falling[0] = 1.0
        for j in range(order_x + 1):
            if j:
                falling = _times_a(falling, ai - j)
            total += math.comb(order_x, j) * (-1.0) ** (order_x - j) * xi ** -j * falling
        out[inner] = _factorial_coefficient(_series_mul(density, total), order_a)
    return out.astype(dtype, copy=False) if out.ndim else dtype.type(out)


# B_2, B_4, ..., B_24: the Bernoulli numbers of zeta_d's Euler-Maclaurin correction
_BERNOULLI_EVEN = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798,
                   -174611 / 330, 854513 / 138, -236364091 / 2730)
_ZETA_TERMS = 12  # terms summed before the Euler-Maclaurin tail


def zeta_d(s: Array, q: Array, order_s: int, order_q: int) -> Array:
    """The partial derivative d^(order_s + order_q) zeta(s, q) / ds^order_s dq^order_q of
    the Hurwitz zeta function, for s > 1 and q > 0 (nan elsewhere): the q-derivatives are
    (-1)^m s (s+1) ... (s+m-1) zeta(s + m, q), and zeta's Taylor series in s comes from
    the Euler-Maclaurin formula (12 terms, then the integral and 12 Bernoulli corrections)
    on truncated Taylor series."""
    dtype = np.result_type(np.asarray(s), np.asarray(q), np.float32)
    s64, q64 = (np.asarray(v, np.float64) for v in np.broadcast_arrays(s, q))
    out = np.full(s64.shape, np.nan)
    inner = (s64 > 1) & (q64 > 0) & np.isfinite(s64) & np.isfinite(q64)
    with np.errstate(all="ignore"):
        si, qi = s64[inner], q64[inner]
        rising = np.zeros((order_s + 1, si.size))
        rising[0] = (-1.0) ** order_q
        for i in range(order_q):
            rising = _times_a(rising, si + i)
        out[inner] = _factorial_coefficient(_series_mul(rising, _zeta_series(si + order_q, qi, order_s)), order_s)
    return out.astype(dtype, copy=False) if out.ndim else dtype.type(out)


def _zeta_series(s: np.ndarray, q: np.ndarray, order: int) -> np.ndarray:
    """The Taylor series of zeta(s + e, q) in e, each power w^-(s+e) = w^-s exp(-e log w)."""
    def power(w: np.ndarray, exponent: np.ndarray) -> np.ndarray:  # w^exponent exp(-e log w)
        log_w = np.log(w)
        out = np.empty((order + 1, w.size))
        out[0] = np.exp(exponent * log_w)
        for k in range(1, order + 1):
            out[k] = out[k - 1] * -log_w / k
        return out

    total = np.zeros((order + 1, s.size))
    for n in range(_ZETA_TERMS):
        total += power(q + n, -s)
    w = q + _ZETA_TERMS
    pole = np.stack([(-1.0) ** k / (s - 1) ** (k + 1) for k in range(order + 1)])  # 1 / (s - 1 + e)
    total += _series_mul(power(w, 1 - s), pole) + 0.5 * power(w, -s)
    rising = np.zeros((order + 1, s.size))  # s (s+1) ... (s+2j-2), as a series
    rising[0] = 1.0
    rising = _times_a(rising, s)
    factorial = 1.0
    for j, b in enumerate(_BERNOULLI_EVEN, start=1):
        factorial *= (2 * j - 1) * (2 * j)
        total += b / factorial * _series_mul(rising, power(w, -s - 2 * j + 1))
        rising = _times_a(_times_a(rising, s + 2 * j - 1), s + 2 * j)
    return total


# truncated Taylor series in a: arrays of shape (order + 1, elements), coefficient k first


def _series_mul(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    out = np.zeros_like(p)
    for k in range(p.shape[0]):
        out[k] = sum(p[i] * q[k - i] for i in range(k + 1))
    return out


def _series_recip(p: np.ndarray) -> np.ndarray:
    out = np.zeros_like(p)
    out[0] = 1 / p[0]
    for k in range(1, p.shape[0]):
        out[k] = -sum(p[i] * out[k - i] for i in range(1, k + 1)) / p[0]
    return out


def _series_exp(p: np.ndarray) -> np.ndarray:
    out = np.zeros_like(p)
    out[0] = np.exp(p[0])
    for k in range(1, p.shape[0]):
        out[k] = sum(i * p[i] * out[k - i] for i in range(1, k + 1)) / k
    return out


def _times_a(p: np.ndarray, a: np.ndarray) -> np.ndarray:
    """p times (a + e), the series of a itself."""
    out = p * a
    out[1:] += p[:-1]
    return out


def _factorial_coefficient(p: np.ndarray, order: int) -> np.ndarray:
    return p[order] * math.factorial(order)


def _lgamma_shifted_series(a: np.ndarray, x: np.ndarray, order: int) -> np.ndarray:
    """The series of (a + e) log x - x - lgamma(a + 1 + e): the common exponent of P's
    series, of Q's fraction (with 1/Gamma(a) = a / Gamma(a + 1), finite at a = 0) and of
    the density."""
    out = np.zeros((order + 1, a.size))
    out[0] = a * np.log(x) - x - scipy.special.gammaln(a + 1)
    if order >= 1:
        out[1] = np.log(x) - scipy.special.psi(a + 1)
    for k in range(2, order + 1):
        out[k] = -scipy.special.polygamma(k - 1, a + 1) / math.factorial(k)
    return out


def _gammainc_series(a: np.ndarray, x: np.ndarray, order: int) -> np.ndarray:
    """P's series in a below x = a + 1: exp(a log x - x) / Gamma(a + 1) times the sum of
    t_0 = 1, t_n = t_(n-1) x / (a + n); the k-th coefficient of every t_n has the sign
    (-1)^k, so the sums do not cancel and each stops at a relative epsilon."""
    eps = np.finfo(np.float64).eps
    term = np.zeros((order + 1, a.size))
    term[0] = 1.0
    total = term.copy()
    open_ = np.arange(a.size)
    for n in range(1, 5001):
        if not open_.size:
            break
        c = a[open_] + n
        step = np.stack([x[open_] * (-1.0) ** k / c ** (k + 1) for k in range(order + 1)])
        t = _series_mul(term[:, open_], step)
        term[:, open_] = t
        total[:, open_] += t
        done = np.all(np.abs(t) <= eps * np.abs(total[:, open_]), axis=0)
        open_ = open_[~done]
    return _series_mul(_series_exp(_lgamma_shifted_series(a, x, order)), total)


def _gammaincc_fraction(a: np.ndarray, x: np.ndarray, order: int) -> np.ndarray:
    """Q's continued fraction in a at and above x = a + 1: exp(a log x - x) a / Gamma(a + 1)
    times Legendre's fraction h, evaluated by modified Lentz with every quantity a truncated
    series (a_i = -i (i - a - e), b_i = x + 2i + 1 - a - e); stops when every coefficient of
    h has settled to a relative epsilon."""
    tiny, eps = 1e-300, np.finfo(np.float64).eps
    m = a.size

    def constant(v: np.ndarray) -> np.ndarray:
        out = np.zeros((order + 1, v.size))
        out[0] = v
        return out

    def clamp(p: np.ndarray) -> np.ndarray:
        small = np.abs(p[0]) < tiny
        p[:, small] = 0.0
        p[0, small] = tiny
        return p

    den = constant(x + 1 - a)
    if order >= 1:
        den[1] = -1.0
    d = _series_recip(clamp(den.copy()))
    c = constant(np.full(m, 1 / tiny))
    h = d.copy()
    open_ = np.arange(m)
    for i in range(1, 5001):
        if not open_.size:
            break
        an = constant(-i * (i - a[open_]))
        if order >= 1:
            an[1] = i
        den[0, open_] += 2
        dk = _series_mul(an, d[:, open_]) + den[:, open_]
        ck = den[:, open_] + _series_mul(an, _series_recip(c[:, open_]))
        dk = _series_recip(clamp(dk))
        ck = clamp(ck)
        h_new = _series_mul(h[:, open_], _series_mul(dk, ck))
        done = np.all(np.abs(h_new - h[:, open_]) <= eps * np.abs(h_new), axis=0)
        d[:, open_], c[:, open_], h[:, open_] = dk, ck, h_new
        open_ = open_[~done]
    return _series_mul(_times_a(_series_exp(_lgamma_shifted_series(a, x, order)), a), h)


def betainc(a: Array, b: Array, x: Array) -> Array:
    """The regularized incomplete beta function I_x(a, b)."""
    return scipy.special.betainc(a, b, x)


def betainc_d(a: Array, b: Array, x: Array, order_a: int, order_b: int) -> Array:
    """The partial derivative d^(order_a + order_b) I_x(a, b) / da^order_a db^order_b of
    the regularized incomplete beta function, for a, b > 0 and 0 < x < 1: betainc's
    continued fraction (modified Lentz; below x = (a + 1) / (a + b + 2), else on
    1 - I_(1-x)(b, a)) run on truncated Taylor series in both a and b. 0 at x = 0 and
    x = 1 (I is constant in a and b there), nan elsewhere."""
    dtype = np.result_type(np.asarray(a), np.asarray(b), np.asarray(x), np.float32)
    a64, b64, x64 = (np.asarray(v, np.float64) for v in np.broadcast_arrays(a, b, x))
    out = np.full(a64.shape, np.nan)
    positive = (a64 > 0) & (b64 > 0) & np.isfinite(a64) & np.isfinite(b64)
    out[positive & ((x64 == 0) | (x64 == 1))] = 0.0 if order_a + order_b else np.nan
    inner = positive & (x64 > 0) & (x64 < 1)
    direct = inner & (x64 < (a64 + 1) / (a64 + b64 + 2))
    swapped = inner & ~direct
    with np.errstate(all="ignore"):
        out[direct] = _betainc_fraction(a64[direct], b64[direct], x64[direct], order_a, order_b)[order_a, order_b]
        # I_x(a, b) = 1 - I_(1-x)(b, a): the series of the swapped fraction, its axes swapped back
        part = _betainc_fraction(b64[swapped], a64[swapped], 1 - x64[swapped], order_b, order_a)
        out[swapped] = -part[order_b, order_a] if order_a + order_b else 1 - part[0, 0]
        out[inner] *= math.factorial(order_a) * math.factorial(order_b)
    return out.astype(dtype, copy=False) if out.ndim else dtype.type(out)


def beta_density_d(a: Array, b: Array, x: Array, order_a: int, order_b: int, order_x: int) -> Array:
    """The partial derivative of the beta density f = x^(a-1) (1-x)^(b-1) / B(a, b),
    order_a times in a, order_b in b and order_x in x, for a, b > 0 and 0 < x < 1 (nan
    elsewhere): f's x-derivatives by Leibniz's rule on the two powers, each falling
    factorial in a and b a truncated Taylor series. At the ends of [0, 1] the density itself
    is 0 (a > 1 at x = 0, b > 1 at x = 1; and every derivative where a, or b, exceeds
    order_x + 1), inf (a < 1, b < 1), or the limit b (a = 1, x = 0) and a (b = 1, x = 1),
    with their derivatives in the other shape (1, then 0); other derivatives there are
    nan."""
    dtype = np.result_type(np.asarray(a), np.asarray(b), np.asarray(x), np.float32)
    a64, b64, x64 = (np.asarray(v, np.float64) for v in np.broadcast_arrays(a, b, x))
    out = np.full(a64.shape, np.nan)
    positive = (a64 > 0) & (b64 > 0) & np.isfinite(a64) & np.isfinite(b64)
    for end, near, far, order_near, order_far in ((0.0, a64, b64, order_a, order_b), (1.0, b64, a64, order_b, order_a)):
        at = positive & (x64 == end)
        out[at & (near > order_x + 1)] = 0.0
        if order_x == order_near == order_far == 0:
            out[at & (near < 1)] = np.inf
        if order_x == order_near == 0:
            out[at & (near == 1)] = (far[at & (near == 1)], 1.0)[order_far] if order_far < 2 else 0.0
    inner = positive & (x64 > 0) & (x64 < 1)
    with np.errstate(all="ignore"):
        ai, bi, xi = a64[inner], b64[inner], x64[inner]
        n_a, n_b = order_a + 1, order_b + 1
        log_x, log_1mx = np.log(xi), np.log1p(-xi)
        exponent = -_bivariate_lbeta(ai, bi, n_a, n_b)
        exponent[0, 0] += (ai - 1) * log_x + (bi - 1) * log_1mx
        if n_a > 1:
            exponent[1, 0] += log_x
        if n_b > 1:
            exponent[0, 1] += log_1mx
        density = _bivariate_exp(exponent)
        total = np.zeros_like(density)
        for j in range(order_x + 1):
            fa = _falling_series(ai, j, n_a)  # (a-1)(a-2)...(a-j)
            fb = _falling_series(bi, order_x - j, n_b)  # (b-1)...(b-(n-j))
            weight = math.comb(order_x, j) * (-1.0) ** (order_x - j) * xi ** -j * (1 - xi) ** -(order_x - j)
            total += weight * fa[:, None] * fb[None, :]
        out[inner] = (_bivariate_mul(density, total)[order_a, order_b]
                      * math.factorial(order_a) * math.factorial(order_b))
    return out.astype(dtype, copy=False) if out.ndim else dtype.type(out)


def hyp1f1_d(a: Array, b: Array, x: Array, order_a: int, order_b: int, order_x: int) -> Array:
    """The partial derivative of Kummer's M(a, b, x), order_a times in a, order_b in b and
    order_x in x: d^n M / dx^n = (a)_n / (b)_n M(a + n, b + n, x), and its series
    sum (a)_k / (b)_k x^k / k! (for x < 0 through Kummer's transformation
    M(a, b, x) = e^x M(b - a, b, -x), positive terms where b > a > 0) on truncated Taylor
    series in a and b. nan where b is 0 or a negative integer (M's poles)."""
    dtype = np.result_type(np.asarray(a), np.asarray(b), np.asarray(x), np.float32)
    a64, b64, x64 = (np.asarray(v, np.float64) for v in np.broadcast_arrays(a, b, x))
    out = np.full(a64.shape, np.nan)
    inner = np.isfinite(a64) & np.isfinite(b64) & np.isfinite(x64) & ~((b64 <= 0) & (b64 == np.floor(b64)))
    with np.errstate(all="ignore"):
        ai, bi, xi = a64[inner], b64[inner], x64[inner]
        n_a, n_b, m = order_a + 1, order_b + 1, ai.size
        ae, be = _bivariate_var(ai + order_x, 0, n_a, n_b), _bivariate_var(bi + order_x, 1, n_a, n_b)
        negative = xi < 0
        p = np.where(negative, be - ae, ae)  # b - a or a
        y = np.abs(xi)
        eps = np.finfo(np.float64).eps
        term = np.zeros((n_a, n_b, m))
        term[0, 0] = 1.0
        total = term.copy()
        open_ = np.arange(m)
        for k in range(5000):
            if not open_.size:
                break
            shift = np.zeros((n_a, n_b, open_.size))
            shift[0, 0] = k
            ratio = _bivariate_mul(p[:, :, open_] + shift, _bivariate_recip(be[:, :, open_] + shift))
            t = _bivariate_mul(term[:, :, open_], ratio) * (y[open_] / (k + 1))
            term[:, :, open_] = t
            total[:, :, open_] += t
            done = np.all(np.abs(t) <= eps * np.abs(total[:, :, open_]), axis=(0, 1))
            open_ = open_[~done]
        total[:, :, negative] *= np.exp(xi[negative])
        # the x-derivatives' factor (a)_n / (b)_n
        rising = np.zeros((n_a, n_b, m))
        rising[0, 0] = 1.0
        for i in range(order_x):
            rising = _bivariate_mul(rising, _bivariate_mul(_bivariate_var(ai + i, 0, n_a, n_b),
                                                           _bivariate_recip(_bivariate_var(bi + i, 1, n_a, n_b))))
        out[inner] = (_bivariate_mul(rising, total)[order_a, order_b]
                      * math.factorial(order_a) * math.factorial(order_b))
    return out.astype(dtype, copy=False) if out.ndim else dtype.type(out)


# truncated Taylor series in two shape parameters: arrays (order_p + 1, order_q + 1, elements)


def _bivariate_var(v: np.ndarray, which: int, n_p: int, n_q: int) -> np.ndarray:
    """The series of the variable itself: v + e (``which`` 0) or v + d (``which`` 1)."""
    out = np.zeros((n_p, n_q, v.size))
    out[0, 0] = v
    if which == 0 and n_p > 1:
        out[1, 0] = 1.0
    if which == 1 and n_q > 1:
        out[0, 1] = 1.0
    return out


def _bivariate_mul(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    n_p, n_q = p.shape[:2]
    out = np.zeros(np.broadcast_shapes(p.shape, q.shape))
    for i in range(n_p):
        for j in range(n_q):
            for k in range(i + 1):
                for m in range(j + 1):
                    out[i, j] += p[k, m] * q[i - k, j - m]
    return out


def _bivariate_recip(p: np.ndarray) -> np.ndarray:
    n_p, n_q = p.shape[:2]
    out = np.zeros_like(p)
    out[0, 0] = 1 / p[0, 0]
    for i in range(n_p):
        for j in range(n_q):
            if i or j:
                acc = sum(p[k, m] * out[i - k, j - m] for k in range(i + 1) for m in range(j + 1) if k or m)
                out[i, j] = -acc / p[0, 0]
    return out


def _bivariate_exp(p: np.ndarray) -> np.ndarray:
    """exp of a series: E' = E p' along the first variable, and along the second on row 0."""
    n_p, n_q = p.shape[:2]
    out = np.zeros_like(p)
    out[0, 0] = np.exp(p[0, 0])
    for j in range(1, n_q):
        out[0, j] = sum(m * p[0, m] * out[0, j - m] for m in range(1, j + 1)) / j
    for i in range(1, n_p):
        for j in range(n_q):
            out[i, j] = sum(k * p[k, m] * out[i - k, j - m] for k in range(1, i + 1) for m in range(j + 1)) / i
    return out


def _lgamma_coefficients(z: np.ndarray, n: int) -> list[np.ndarray]:
    """lgamma(z + e)'s Taylor coefficients: lgamma, digamma, then polygamma(k-1, z) / k!."""
    out = [scipy.special.gammaln(z)]
    if n > 1:
        out.append(scipy.special.psi(z))
    out += [scipy.special.polygamma(k - 1, z) / math.factorial(k) for k in range(2, n)]
    return out


def _bivariate_lbeta(p: np.ndarray, q: np.ndarray, n_p: int, n_q: int) -> np.ndarray:
    """log B(p + e, q + d) = lgamma(p + e) + lgamma(q + d) - lgamma(p + q + e + d) as a
    bivariate series (the last one's coefficient [i, j] is lgamma^(i+j)(p+q) / (i! j!))."""
    out = np.zeros((n_p, n_q, p.size))
    for i, c in enumerate(_lgamma_coefficients(p, n_p)):
        out[i, 0] += c
    for j, c in enumerate(_lgamma_coefficients(q, n_q)):
        out[0, j] += c
    both = _lgamma_coefficients(p + q, n_p + n_q - 1)
    for i in range(n_p):
        for j in range(n_q):
            out[i, j] -= both[i + j] * math.factorial(i + j) / (math.factorial(i) * math.factorial(j))
    return out


def _falling_series(z: np.ndarray, count: int, n: int) -> np.ndarray:
    """(z - 1)(z - 2)...(z - count) as a series in e (z -> z + e), shape (n, elements)."""
    out = np.zeros((n, z.size))
    out[0] = 1.0
    for i in range(1, count + 1):
        out = _times_a(out, z - i)
    return out


def _betainc_fraction(p: np.ndarray, q: np.ndarray, y: np.ndarray, order_p: int, order_q: int) -> np.ndarray:
    """y^p (1-y)^q / (p B(p, q)) times betainc's continued fraction (modified Lentz), as a
    bivariate series in p and q; each step stops when every coefficient has settled."""
    tiny, eps = 1e-300, np.finfo(np.float64).eps
    n_p, n_q, m = order_p + 1, order_q + 1, p.size

    def const(v: np.ndarray | float, size: int) -> np.ndarray:
        out = np.zeros((n_p, n_q, size))
        out[0, 0] = v
        return out

    def clamp(v: np.ndarray) -> np.ndarray:
        small = np.abs(v[0, 0]) < tiny
        v[:, :, small] = 0.0
        v[0, 0, small] = tiny
        return v

    pe, qe, ye = _bivariate_var(p, 0, n_p, n_q), _bivariate_var(q, 1, n_p, n_q), const(y, m)
    one = const(1.0, m)
    d = _bivariate_recip(clamp(one - _bivariate_mul(_bivariate_mul(pe + qe, ye), _bivariate_recip(pe + one))))
    c, h = one.copy(), d.copy()
    open_ = np.arange(m)
    for step in range(1, 5001):
        if not open_.size:
            break
        k = open_.size
        pk, qk, yk, onek = pe[:, :, open_], qe[:, :, open_], ye[:, :, open_], one[:, :, :k]
        dk, ck, hk = d[:, :, open_], c[:, :, open_], h[:, :, open_]
        m2 = 2.0 * step
        even = _bivariate_mul(_bivariate_mul(step * (qk - const(float(step), k)), yk),
                              _bivariate_recip(_bivariate_mul(pk + const(m2 - 1, k), pk + const(m2, k))))
        dk = _bivariate_recip(clamp(onek + _bivariate_mul(even, dk)))
        ck = clamp(onek + _bivariate_mul(even, _bivariate_recip(ck)))
        hk = _bivariate_mul(hk, _bivariate_mul(dk, ck))
        shifted = const(float(step), k)
        odd = -_bivariate_mul(_bivariate_mul(_bivariate_mul(pk + shifted, pk + qk + shifted), yk),
                              _bivariate_recip(_bivariate_mul(pk + const(m2, k), pk + const(m2 + 1, k))))
        dk = _bivariate_recip(clamp(onek + _bivariate_mul(odd, dk)))
        ck = clamp(onek + _bivariate_mul(odd, _bivariate_recip(ck)))
        h_new = _bivariate_mul(hk, _bivariate_mul(dk, ck))
        done = np.all(np.abs(h_new - hk) <= eps * np.abs(h_new), axis=(0, 1)) & np.all(
            np.abs(hk - h[:, :, open_]) <= eps * np.abs(hk), axis=(0, 1))
        d[:, :, open_], c[:, :, open_], h[:, :, open_] = dk, ck, h_new
        open_ = open_[~done]
    # the front: exp(p log y + q log(1-y) - log B(p, q)) / p
    exponent = -_bivariate_lbeta(p, q, n_p, n_q)
    exponent[0, 0] += p * np.log(y) + q * np.log1p(-y)
    if n_p > 1:
        exponent[1, 0] += np.log(y)
    if n_q > 1:
        exponent[0, 1] += np.log1p(-y)
    return _bivariate_mul(_bivariate_mul(_bivariate_exp(exponent), _bivariate_recip(pe)), h)


def spence(z: Array) -> Array:
    """SciPy's spence(z) = Li2(1 - z), for z >= 0."""
    return scipy.special.spence(z)


def fresnel_s(x: Array) -> Array:
    """The Fresnel integral S(x)."""
    return scipy.special.fresnel(x)[0]


def fresnel_c(x: Array) -> Array:
    """The Fresnel integral C(x)."""
    return scipy.special.fresnel(x)[1]


def hyp1f1(a: Array, b: Array, x: Array) -> Array:
    """Kummer's confluent hypergeometric function M(a, b, x)."""
    return scipy.special.hyp1f1(a, b, x)


def hyp2f1(a: Array, b: Array, c: Array, x: Array) -> Array:
    """The Gauss hypergeometric function 2F1(a, b; c; x)."""
    return scipy.special.hyp2f1(a, b, c, x)


def hyp2f1_d(a: Array, b: Array, c: Array, x: Array, order_a: int, order_b: int, order_c: int,
             order_x: int) -> Array:
    """The partial derivative of 2F1(a, b; c; x), order_a times in a, order_b in b, order_c
    in c and order_x in x, for x < 1: d^n F / dx^n = (a)_n (b)_n / (c)_n F(a + n, b + n;
    c + n; x), and F's series sum (a)_k (b)_k / (c)_k x^k / k! (for x < 0 through Pfaff's
    transformation F(a, b; c; x) = (1 - x)^-a F(a, c - b; c; x / (x - 1))) on truncated
    Taylor series in a, b and c. nan for x >= 1 and where c is 0 or a negative integer."""
    dtype = np.result_type(np.asarray(a), np.asarray(b), np.asarray(c), np.asarray(x), np.float32)
    a64, b64, c64, x64 = (np.asarray(v, np.float64) for v in np.broadcast_arrays(a, b, c, x))
    out = np.full(a64.shape, np.nan)
    inner = (np.isfinite(a64) & np.isfinite(b64) & np.isfinite(c64) & np.isfinite(x64) & (x64 < 1)
             & ~((c64 <= 0) & (c64 == np.floor(c64))))
    shape = (order_a + 1, order_b + 1, order_c + 1)
    with np.errstate(all="ignore"):
        ai, bi, ci, xi = (v[inner] + (order_x if v is not x64 else 0) for v in (a64, b64, c64, x64))
        m = ai.size
        ones, zeros = np.ones(m), np.zeros(m)
        # the x-derivatives' factor (a)_n (b)_n / (c)_n, at the unshifted parameters
        term = np.zeros((*shape, m))
        term[0, 0, 0] = 1.0
        for i in range(order_x):
            term = _trivariate_times(term, ai - order_x + i, (ones, zeros, zeros))
            term = _trivariate_times(term, bi - order_x + i, (zeros, ones, zeros))
            term = _trivariate_over(term, ci - order_x + i, (zeros, zeros, ones))
        negative = xi < 0
        z = np.where(negative, xi / (xi - 1), xi)
        # q = c - b (slopes -1 in b, 1 in c) after Pfaff's transformation, else b
        q = np.where(negative, ci - bi, bi)
        q_slopes = (zeros, np.where(negative, -1.0, 1.0), np.where(negative, 1.0, 0.0))
        total = term.copy()
        eps = np.finfo(np.float64).eps
        open_ = np.arange(m)
        for k in range(20000):
            if not open_.size:
                break
            o = open_
            t = _trivariate_times(term[..., o], ai[o] + k, (ones[o], zeros[o], zeros[o]))
            t = _trivariate_times(t, q[o] + k, tuple(v[o] for v in q_slopes))
            t = _trivariate_over(t, ci[o] + k, (zeros[o], zeros[o], ones[o])) * (z[o] / (k + 1))
            term[..., o] = t
            total[..., o] += t
            done = np.all(np.abs(t) <= eps * np.abs(total[..., o]), axis=(0, 1, 2))
            open_ = o[~done]
        # Pfaff's factor (1 - x)^-(a + e) = (1 - x)^-a exp(-e log(1 - x)), a series in e alone
        log_1mx = np.log1p(-xi)
        front = np.zeros((*shape, m))
        for i in range(shape[0]):
            front[i, 0, 0] = np.where(negative, (-log_1mx) ** i / math.factorial(i), float(i == 0))
        front *= np.where(negative, np.exp(-ai * log_1mx), 1.0)
        value = sum(front[i, 0, 0] * total[order_a - i, order_b, order_c] for i in range(order_a + 1))
        out[inner] = value * math.factorial(order_a) * math.factorial(order_b) * math.factorial(order_c)
    return out.astype(dtype, copy=False) if out.ndim else dtype.type(out)


# truncated Taylor series in three shape parameters: arrays (order_a + 1, order_b + 1,
# order_c + 1, elements), multiplied and divided by series of degree one, v + sum s_i e_i


def _trivariate_times(p: np.ndarray, v: np.ndarray, slopes: tuple[np.ndarray, ...]) -> np.ndarray:
    out = p * v
    for axis, s in enumerate(slopes):
        if p.shape[axis] > 1:
            head = [slice(None)] * p.ndim
            tail = [slice(None)] * p.ndim
            head[axis], tail[axis] = slice(1, None), slice(None, -1)
            out[tuple(head)] += s * p[tuple(tail)]
    return out


def _trivariate_over(p: np.ndarray, v: np.ndarray, slopes: tuple[np.ndarray, ...]) -> np.ndarray:
    """p / (v + sum s_i e_i): coefficient I = (p_I - sum s_i out_(I - e_i)) / v, in
    lexicographic order (each I - e_i comes before I)."""
    out = np.zeros_like(p)
    for index in np.ndindex(p.shape[:3]):
        acc = p[index].copy()
        for axis, s in enumerate(slopes):
            if index[axis]:
                prev = list(index)
                prev[axis] -= 1
                acc -= s * out[tuple(prev)]
        out[index] = acc / v
    return out


def expn(n: Array, x: Array) -> Array:
    """The generalized exponential integral E_n(x) (n integer-valued, nan otherwise)."""
    whole = np.asarray(n) == np.floor(n)
    with np.errstate(invalid="ignore"):
        out = scipy.special.expn(np.where(whole, n, -1).astype(np.int64), x)
    return np.asarray(out, dtype=np.result_type(n, x))


# --- discrete Fourier transforms (rules/fft.rules) ---------------------------------------
# Over the trailing len(fft_lengths) axes (leading axes are batch axes), numpy.fft's with
# its norm; the result keeps the operand's precision (complex64 from float32).


def _trailing(x: Array, fft_lengths: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(range(np.ndim(x) - len(fft_lengths), np.ndim(x)))


def fft(x: Array, fft_lengths: tuple[int, ...], norm: str) -> np.ndarray:
    """The discrete Fourier transform (exponent -2 pi i jk / n) of the trailing axes."""
    return np.fft.fftn(x, s=fft_lengths, axes=_trailing(x, fft_lengths), norm=norm).astype(x.dtype, copy=False)


def ifft(x: Array, fft_lengths: tuple[int, ...], norm: str) -> np.ndarray:
    """The inverse discrete Fourier transform (exponent +2 pi i jk / n) of the trailing axes."""
    return np.fft.ifftn(x, s=fft_lengths, axes=_trailing(x, fft_lengths), norm=norm).astype(x.dtype, copy=False)


def rfft(x: Array, fft_lengths: tuple[int, ...], norm: str) -> np.ndarray:
    """The transform of real values: the last axis keeps its fft_lengths[-1] // 2 + 1
    non-negative frequencies."""
    out = np.fft.rfftn(x, s=fft_lengths, axes=_trailing(x, fft_lengths), norm=norm)
    return out.astype(np.result_type(x.dtype, np.complex64), copy=False)


def irfft(x: Array, fft_lengths: tuple[int, ...], norm: str) -> np.ndarray:
    """The real inverse of ``rfft``: the half spectrum taken as Hermitian (the imaginary
    parts of its entries with no mirror image in it are not read); the result's trailing
    axes are fft_lengths."""
    out = np.fft.irfftn(x, s=fft_lengths, axes=_trailing(x, fft_lengths), norm=norm)
    return out.astype(np.finfo(x.dtype).dtype, copy=False)


# --- convolution (rules/conv.rules) -----------------------------------------------------
# lhs (N, C, *x), rhs (O, I, *k), result (N / B, O, *y): the lhs dilated and padded into one
# new array, a strided view of its windows, and one matrix product per group (im2col).


def conv(lhs: Array, rhs: Array, window_strides: tuple[int, ...], padding: tuple[tuple[int, int], ...],
         lhs_dilation: tuple[int, ...], rhs_dilation: tuple[int, ...], feature_group_count: int,
         batch_group_count: int) -> np.ndarray:
    """StableHLO's convolution with dimension numbers [b, f, 0, ..]x[o, i, 0, ..]->[b, f, 0, ..]:
    a correlation of the dilated, padded lhs with the dilated window (negative padding crops)."""
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    dtype = np.result_type(lhs.dtype, rhs.dtype)
    g, b = feature_group_count, batch_group_count
    n_batch, n_feat = lhs.shape[:2]
    n_out, n_in = rhs.shape[:2]
    spatial = range(lhs.ndim - 2)
    out_sizes = tuple(conv_out_size(lhs.shape[i + 2], rhs.shape[i + 2], window_strides[i], *padding[i],
                                    lhs_dilation[i], rhs_dilation[i]) for i in spatial)
    out_shape = (n_batch // b, n_out) + out_sizes
    if 0 in out_shape or 0 in lhs.shape or 0 in rhs.shape:
        return np.zeros(out_shape, dtype)
    # the dilated, padded lhs: element x lands at x * lhs_dilation + low, when inside
    padded_sizes, dst, src = [], [], []
    for i in spatial:
        size, dil, (low, high) = lhs.shape[i + 2], lhs_dilation[i], padding[i]
        total = (size - 1) * dil + 1 + low + high
        first = max(0, -(low // dil))  # the first x with x * dil + low >= 0: ceil(-low / dil)
        last = min(size, -(-(total - low) // dil))  # one past the last x with x * dil + low < total
        padded_sizes.append(max(total, 0))
        if last <= first:
            return np.zeros(out_shape, dtype)
        dst.append(slice(first * dil + low, (last - 1) * dil + low + 1, dil))
        src.append(slice(first, last))
    if all(p == (0, 0) for p in padding) and all(d == 1 for d in lhs_dilation):
        padded = lhs.astype(dtype, copy=False)
    else:
        padded = np.zeros((n_batch, n_feat) + tuple(padded_sizes), dtype)
        padded[(slice(None), slice(None), *dst)] = lhs[(slice(None), slice(None), *src)]
    # windows: (N, C, *y, *k), tap k of output y at y * stride + k * rhs_dilation
    spans = tuple((rhs.shape[i + 2] - 1) * rhs_dilation[i] + 1 for i in spatial)
    view = np.lib.stride_tricks.sliding_window_view(padded, spans, axis=tuple(i + 2 for i in spatial))
    view = view[(slice(None), slice(None), *(slice(None, (y - 1) * s + 1, s) for y, s in
                                             zip(out_sizes, window_strides, strict=True)),
                 *(slice(None, None, d) for d in rhs_dilation))]
    nsp = len(out_sizes)
    q = g * b
    nb, ig, oq = n_batch // b, n_feat // g, n_out // q
    window, taps = math.prod(out_sizes), math.prod(rhs.shape[2:])
    # (B, Nb, G, Ig, *y, *k) -> (B, G, Nb, *y, Ig, *k) -> (Q, Nb * y, Ig * k)
    cols = view.reshape((b, nb, g, ig) + view.shape[2:])
    perm = (0, 2, 1) + tuple(range(4, 4 + nsp)) + (3,) + tuple(range(4 + nsp, 4 + 2 * nsp))
    cols = cols.transpose(perm).reshape(q, nb * window, ig * taps)
    kernel = rhs.astype(dtype, copy=False).reshape(q, oq, n_in * taps).transpose(0, 2, 1)
    prod = np.matmul(cols, kernel)  # (Q, Nb * y, Oq)
    # (B, G, Nb, *y, Oq) -> (Nb, B, G, Oq, *y) -> (Nb, O, *y)
    prod = prod.reshape((b, g, nb) + out_sizes + (oq,))
    prod = prod.transpose((2, 0, 1, 3 + nsp) + tuple(range(3, 3 + nsp)))
    return np.ascontiguousarray(prod.reshape(out_shape))


# --- evaluation -------------------------------------------------------------------------

Impl = Callable[[Sequence[np.ndarray], Attrs], np.ndarray]


def _impl(kernel: Callable[..., Any]) -> Impl:
    def impl(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        # Rank 0 is computed on NumPy scalars, as in the generated code: NumPy's scalar
        # and 0-d array paths may round complex products differently.
        args = [np.asarray(a)[()] if np.ndim(a) == 0 else a for a in args]
        with np.errstate(all="ignore"):
            return np.asarray(kernel(*args, **dict(attrs.items())))

    impl.__name__ = impl.__qualname__ = f"impl_{kernel.__name__}"
    impl.__doc__ = kernel.__doc__
    return impl


def impl_of(op: str, cat: Catalog | None = None) -> Impl:
    """``op``'s implementation in ``cat`` (default: the active catalog), made once per
    primitive: a built-in primitive's kernel as its rule block names it
    (``tidu.ops.kernels.exact_kernel``), else the kernel made from a user's rule."""
    prim = (cat if cat is not None else catalog()).get(op)
    if prim is None and op in control.CONTROL_OPS:
        return functools.partial(_control_result, op, cat)
    if prim is None:
        raise KeyError(f"no NumPy semantics for primitive {op!r}: it is not in the catalog")
    impl = prim.impl
    if impl is None:
        impl = prim.impl = _half_cast(prim, _impl(exact_kernel(prim, cat if cat is not None else catalog())
                                                  if prim.builtin else kernel(prim)))
    return impl


_HALF = (np.dtype(np.float16), np.dtype("bfloat16"))


def _half_cast(prim: Primitive, impl: Impl) -> Impl:
    """``impl``, its result made the declared dtype where an operand is float16 or
    bfloat16 (SciPy and ml_dtypes compute some of their functions in float32)."""

    def cast(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        out = impl(args, attrs)
        for a in args:  # the common case (no 2-byte operand) costs one attribute read per operand
            dtype = getattr(a, "dtype", None)
            if dtype is not None and dtype.itemsize == 2 and dtype in _HALF:
                aval = prim.infer([aval_of(v) for v in args], attrs)[0]
                if out.dtype.name != aval.dtype:
                    out = out.astype(aval.dtype)
                break
        return out

    cast.__name__, cast.__qualname__, cast.__doc__ = impl.__name__, impl.__qualname__, impl.__doc__
    return cast


def run_body(body: Body, args: Sequence[Any], cat: Catalog | None = None) -> list[np.ndarray]:
    """``body`` applied to ``args``, node by node with these kernels."""
    return [np.asarray(v) for v in body.apply(args, lambda op, operands, attrs: impl_of(op, cat)(operands, attrs))]


def run_control(op: str, args: Sequence[Any], attrs: Attrs, cat: Catalog | None = None) -> list[np.ndarray]:
    """Every result of a control-flow op (tidu.ops.control), as the siblings list them."""
    args = [np.asarray(a) for a in args]
    if op == "cond":
        branches = attrs["branches"]
        chosen = branches[min(max(int(args[0]), 0), len(branches) - 1)]
        return run_body(chosen, args[1:], cat)
    if op == "while":
        ncc, nbc = attrs["n_cond_consts"], attrs["n_body_consts"]
        cond_consts, body_consts, carry = args[:ncc], args[ncc:ncc + nbc], args[ncc + nbc:]
        while bool(run_body(attrs["cond_body"], [*cond_consts, *carry], cat)[0]):
            carry = run_body(attrs["body"], [*body_consts, *carry], cat)
        return list(carry)
    body: Body = attrs["body"]
    nc, nk, length = attrs["n_consts"], attrs["n_carry"], attrs["length"]
    consts, carry, xs = args[:nc], args[nc:nc + nk], args[nc + nk:]
    y_avals = control.result_avals(op, attrs)[nk:]
    ys = [np.empty(a.shape, a.dtype) for a in y_avals]
    for i in (range(length - 1, -1, -1) if attrs["reverse"] else range(length)):
        out = run_body(body, [*consts, *carry, *(x[i] for x in xs)], cat)
        carry = out[:nk]
        for y, v in zip(ys, out[nk:], strict=True):
            y[i] = v
    return [*carry, *ys]


def _control_result(op: str, cat: Catalog | None, args: Sequence[Any], attrs: Attrs) -> np.ndarray:
    return run_control(op, args, attrs, cat)[attrs["index"]]


def kernel_of(op: str, cat: Catalog | None = None) -> Callable[..., Any]:
    """``op``'s kernel ``fn(*operands, **attrs)`` in ``cat`` (default: the active catalog)."""
    use = cat if cat is not None else catalog()
    prim = use.get(op)
    if prim is None:
        raise KeyError(f"no NumPy semantics for primitive {op!r}: it is not in the catalog")
    return exact_kernel(prim, use) if prim.builtin else kernel(prim)


def evaluate(op: str, args: Sequence[np.ndarray], attrs: Attrs, cat: Catalog | None = None) -> np.ndarray:
    """The value of ``op(*args)[attrs]`` as an ndarray of the declared dtype."""
    return impl_of(op, cat)(args, attrs)


__all__ = ["COMPARISON_SYMBOLS", "evaluate", "impl_of", "kernel_of", "or_nan", "run_body", "run_control"]
