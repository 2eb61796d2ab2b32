"""Attribute functions usable inside rule templates: ``[axes=complement(axes, rank(x))]``.

They compute static attributes (shapes, axes, permutations) from other attributes and
from operand avals; they never see tensor values. The table is fixed: a rule file can
name these and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ATTR_FUNCTIONS: dict[str, Callable[..., Any]] = {}
# Functions of operand avals take the aval (not a value) for their first argument.
AVAL_FUNCTIONS = {"shape", "rank", "dtype", "shapes"}


def attr_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    ATTR_FUNCTIONS[fn.__name__] = fn
    return fn


@attr_function
def shape(aval) -> tuple[int, ...]:
    return aval.shape


@attr_function
def rank(aval) -> int:
    return aval.ndim


@attr_function
def dtype(aval) -> str:
    return aval.dtype


@attr_function
def shapes(avals) -> tuple[tuple[int, ...], ...]:
    return tuple(a.shape for a in avals)


@attr_function
def complement(axes, n) -> tuple[int, ...]:
    """The axes in range(n) not in ``axes``, in increasing order."""
    return tuple(i for i in range(n) if i not in set(axes))


@attr_function
def all_axes(n) -> tuple[int, ...]:
    return tuple(range(n))


@attr_function
def inverse_perm(perm) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


@attr_function
def ones(n) -> tuple[int, ...]:
    return (1,) * n


@attr_function
def minus_one(values) -> tuple[int, ...]:
    return tuple(v - 1 for v in values)


@attr_function
def plus_one(values) -> tuple[int, ...]:
    return tuple(v + 1 for v in values)


@attr_function
def broadcast_sum_axes(operand_shape, shape, dims) -> tuple[int, ...]:
    """Result axes that broadcast_in_dim created or expanded: the transpose sums them."""
    kept = {d for i, d in enumerate(dims) if operand_shape[i] == shape[d]}
    return tuple(i for i in range(len(shape)) if i not in kept)


@attr_function
def slice_pad_high(operand_shape, start, limit, strides) -> tuple[int, ...]:
    """High padding that puts a slice's cotangent back at its place in the operand."""
    high = []
    for d, s, l, st in zip(operand_shape, start, limit, strides, strict=True):
        n = max(0, -(-(l - s) // st))
        used = s + (n - 1) * st + 1 if n else s
        high.append(d - used)
    return tuple(high)


@attr_function
def pad_slice_limit(padded_shape, high) -> tuple[int, ...]:
    return tuple(d - h for d, h in zip(padded_shape, high, strict=True))


@attr_function
def concat_start(i, axis, operand_shapes) -> tuple[int, ...]:
    offset = sum(s[axis] for s in operand_shapes[:i])
    return tuple(offset if a == axis else 0 for a in range(len(operand_shapes[i])))


@attr_function
def concat_limit(i, axis, operand_shapes) -> tuple[int, ...]:
    offset = sum(s[axis] for s in operand_shapes[: i + 1])
    own = operand_shapes[i]
    return tuple(offset if a == axis else own[a] for a in range(len(own)))


# --- dot_general transposes ---------------------------------------------------
# out = dot_general(lhs, rhs) has axes (batch, lhs free, rhs free). The cotangent of
# operand k is dot_general(ct, conj(other)) contracting ct's "other free" axes with the
# other operand's free axes, batched on the batch axes, then permuted into operand k's
# layout.


def _free(rank_, contract, batch) -> list[int]:
    return [i for i in range(rank_) if i not in contract and i not in batch]


@attr_function
def dot_ct_contract(k, lc, rc, lb, rb, lrank, rrank) -> tuple[int, ...]:
    nb, nlf = len(lb), len(_free(lrank, lc, lb))
    nrf = len(_free(rrank, rc, rb))
    if k == 0:  # contract ct's rhs-free axes
        return tuple(range(nb + nlf, nb + nlf + nrf))
    return tuple(range(nb, nb + nlf))  # contract ct's lhs-free axes


@attr_function
def dot_free_axes(contract, batch, rank_) -> tuple[int, ...]:
    return tuple(_free(rank_, contract, batch))


@attr_function
def dot_ct_batch(batch) -> tuple[int, ...]:
    return tuple(range(len(batch)))


@attr_function
def dot_transpose_perm(k, lc, rc, lb, rb, lrank, rrank) -> tuple[int, ...]:
    """Permutation taking dot_general(ct, other)'s axes into operand k's layout."""
    mine_c, other_c, mine_b = (lc, rc, lb) if k == 0 else (rc, lc, rb)
    mine_rank = lrank if k == 0 else rrank
    other_rank = rrank if k == 0 else lrank
    other_b = rb if k == 0 else lb
    # Result axes: batch (in batch order), my free axes (increasing), then the other's
    # remaining axes = its contracted axes in increasing order of its own index.
    src: list[int] = list(mine_b) + _free(mine_rank, mine_c, mine_b)
    pair = dict(zip(other_c, mine_c, strict=True))
    src += [pair[j] for j in range(other_rank) if j in pair and j not in other_b]
    perm = [0] * mine_rank
    for pos, axis in enumerate(src):
        perm[axis] = pos
    return tuple(perm)


# --- linear algebra (rules/linalg.rules) -------------------------------------------
# Matrices are the last two axes of a rank-n value; the leading n - 2 axes are batch axes.


@attr_function
def mT(n) -> tuple[int, ...]:
    """The permutation that swaps the last two axes (matrix transpose) of rank n."""
    return tuple(range(n - 2)) + (n - 1, n - 2)


@attr_function
def mm_lhs(n) -> tuple[int, ...]:
    """dot_general's lhs_contract for a batched matrix product of rank-n operands."""
    return (n - 1,)


@attr_function
def mm_rhs(n) -> tuple[int, ...]:
    """dot_general's rhs_contract for a batched matrix product of rank-n operands."""
    return (n - 2,)


@attr_function
def mm_batch(n) -> tuple[int, ...]:
    """The batch axes of a batched matrix product of rank-n operands."""
    return tuple(range(n - 2))


@attr_function
def matrix_axes(n) -> tuple[int, ...]:
    """The last two axes of rank n (a reduction over each matrix)."""
    return (n - 2, n - 1)


@attr_function
def last_axis(n) -> tuple[int, ...]:
    return (n - 1,)


@attr_function
def row_dims(n) -> tuple[int, ...]:
    """broadcast_in_dim dims putting a (..., k) vector along each row of (..., k, k):
    element (i, j) is v[j]."""
    return tuple(range(n - 2)) + (n - 1,)


@attr_function
def col_dims(n) -> tuple[int, ...]:
    """broadcast_in_dim dims putting a (..., k) vector down each column: element (i, j) is v[i]."""
    return tuple(range(n - 2)) + (n - 2,)


@attr_function
def increment(n) -> int:
    """n + 1: the next order of a derivative held in an attribute."""
    return int(n) + 1


@attr_function
def flip(b) -> bool:
    """Logical not of a boolean attribute (lower -> upper)."""
    return not b


@attr_function
def dim(shape, axis) -> int:
    """The size of axis ``axis`` of ``shape``."""
    return int(shape[axis])


@attr_function
def zeros(n) -> tuple[int, ...]:
    return (0,) * n


@attr_function
def first_row_limit(shape) -> tuple[int, ...]:
    """slice limits keeping the first row of each matrix: (..., 1, n)."""
    return tuple(shape[:-2]) + (1, shape[-1])


@attr_function
def min_square(shape) -> tuple[int, ...]:
    """(..., k, k) with k = min(m, n) for matrices of shape (..., m, n)."""
    k = min(shape[-2:])
    return tuple(shape[:-2]) + (k, k)


@attr_function
def u_shape(shape) -> tuple[int, ...]:
    """The shape (..., m, k) of the left singular vectors of (..., m, n) matrices."""
    return tuple(shape[:-2]) + (shape[-2], min(shape[-2:]))


@attr_function
def v_shape(shape) -> tuple[int, ...]:
    """The shape (..., n, k) of the right singular vectors (as columns) of (..., m, n) matrices."""
    return tuple(shape[:-2]) + (shape[-1], min(shape[-2:]))


# block matrices [[a, e], [0, a]] of square (..., n, n) matrices (expm_frechet's derivative)


@attr_function
def row_axis(n) -> int:
    """The row axis (n - 2) of the matrices of a rank-n value."""
    return n - 2


@attr_function
def col_axis(n) -> int:
    """The column axis (n - 1) of the matrices of a rank-n value."""
    return n - 1


@attr_function
def right_half(shape) -> tuple[int, ...]:
    """pad's low (or high) padding that puts (..., m, n) matrices into the right (left)
    half of (..., m, 2n) ones; also the start of a slice keeping the right half."""
    return (0,) * (len(shape) - 1) + (shape[-1],)


@attr_function
def top_right_limit(shape) -> tuple[int, ...]:
    """slice limits keeping the top-right (..., m, n) block of (..., 2m, 2n) matrices
    (start: right_half(shape))."""
    return tuple(shape[:-2]) + (shape[-2], 2 * shape[-1])


# LU of (..., m, n) matrices, k = min(m, n) (rules/linalg.rules: lu)


def _lu_sizes(shape) -> tuple[int, int, int, int]:
    m, n = shape[-2:]
    return len(shape), m, n, min(m, n)


@attr_function
def lu_l_limit(shape) -> tuple[int, ...]:
    """slice limits keeping the first k columns (..., m, k) of the packed factors."""
    return tuple(shape[:-1]) + (_lu_sizes(shape)[3],)


@attr_function
def lu_l_pad(shape) -> tuple[int, ...]:
    """pad's high padding taking (..., m, k) to (..., m, m)."""
    r, m, _, k = _lu_sizes(shape)
    return (0,) * (r - 1) + (m - k,)


@attr_function
def lu_u_limit(shape) -> tuple[int, ...]:
    """slice limits keeping the first k rows (..., k, n) of the packed factors."""
    return tuple(shape[:-2]) + (_lu_sizes(shape)[3], shape[-1])


@attr_function
def lu_u_pad(shape) -> tuple[int, ...]:
    """pad's high padding taking (..., k, n) to (..., n, n)."""
    r, _, n, k = _lu_sizes(shape)
    return (0,) * (r - 2) + (n - k, 0)


@attr_function
def lu_pivot_zeros(shape) -> tuple[int, ...]:
    """Zeros for the (..., k) pivots of (..., m, n) matrices."""
    return (0,) * (len(shape) - 1)


@attr_function
def lu_pivot_ones(shape) -> tuple[int, ...]:
    """Ones for the (..., k) pivots of (..., m, n) matrices."""
    return (1,) * (len(shape) - 1)


@attr_function
def lu_pivot_pad(shape) -> tuple[int, ...]:
    """pad's high padding taking the (..., k) pivots to (..., m) (the rows past k: no swap)."""
    r, m, _, k = _lu_sizes(shape)
    return (0,) * (r - 2) + (m - k,)


@attr_function
def lu_pivot_none(shape) -> tuple[int, ...]:
    """slice limits keeping none of the (..., k) pivots: (..., 0)."""
    return tuple(shape[:-2]) + (0,)


@attr_function
def lu_eye_pad(shape) -> tuple[int, ...]:
    """pad's high padding taking (..., 0) pivots to (..., n - k) (an identity's)."""
    r, _, n, k = _lu_sizes(shape)
    return (0,) * (r - 2) + (n - k,)


@attr_function
def lu_eye_low(shape) -> tuple[int, ...]:
    """pad's low padding putting an (n - k) x (n - k) block at the bottom right of n x n."""
    r, _, _, k = _lu_sizes(shape)
    return (0,) * (r - 2) + (k, k)


@attr_function
def column_sum_axes(n) -> tuple[int, ...]:
    """The row axis (n - 2,) as reduction axes: a sum down each column of a rank-n value."""
    return (n - 2,)


@attr_function
def complex_of(dtype) -> str:
    """The complex dtype of a float or complex dtype's precision."""
    return {"float32": "complex64", "float64": "complex128"}.get(dtype, dtype)


# --- discrete Fourier transforms (rules/fft.rules) ---------------------------------------


@attr_function
def fft_dual_norm(norm) -> str:
    """The norm whose inverse transform is the adjoint of a transform with ``norm``: the
    scale 1/N moves to the other side (backward <-> forward), ortho stays."""
    return {"backward": "forward", "forward": "backward", "ortho": "ortho"}[norm]


@attr_function
def hermitian_edges(fft_lengths, n) -> tuple[int, ...]:
    """slice strides (rank n) keeping, on the last axis of a half spectrum (the
    fft_lengths[-1] // 2 + 1 non-negative frequencies), the entries whose mirror image is
    not in it: index 0, and the last one when the length is even (the Nyquist frequency)."""
    length = fft_lengths[-1]
    half = length // 2 + 1
    return (1,) * (n - 1) + (max(half - 1, 1) if length % 2 == 0 else half,)


# --- convolution (rules/conv.rules) -------------------------------------------------------
# Layout (N, C, *spatial) for the lhs, (O, I, *window) for the rhs, (N / B, O, *out) for the
# result. The transposes are convolutions again; these compute their attributes and the
# shapes that regroup the window and the batch.


def _dilated(n, d) -> int:
    return (n - 1) * d + 1 if n > 0 else 0


@attr_function
def conv_spatial(n) -> tuple[int, ...]:
    """The spatial axes 2 .. n - 1."""
    return tuple(range(2, n))


@attr_function
def conv_swap01(n) -> tuple[int, ...]:
    """The permutation swapping axes 0 and 1 (batch and feature)."""
    return (1, 0) + tuple(range(2, n))


@attr_function
def conv_groups(feature_group_count, batch_group_count) -> int:
    """The groups of a convolution's lhs transpose: every group of the forward, either kind."""
    return feature_group_count * batch_group_count


@attr_function
def conv_kernel_split(rhs_shape, feature_group_count, batch_group_count) -> tuple[int, ...]:
    """The window (O, I, *k) with its outputs split into (groups, O / groups); unchanged
    without groups."""
    q = feature_group_count * batch_group_count
    if q == 1:
        return tuple(rhs_shape)
    return (q, rhs_shape[0] // q) + tuple(rhs_shape[1:])


@attr_function
def conv_kernel_swap(n, feature_group_count, batch_group_count) -> tuple[int, ...]:
    """The permutation swapping the output and input features of a window of rank n (split
    into groups when there are some, conv_kernel_split)."""
    if feature_group_count * batch_group_count == 1:
        return (1, 0) + tuple(range(2, n))
    return (0, 2, 1) + tuple(range(3, n + 1))


@attr_function
def conv_kernel_merged(rhs_shape, feature_group_count, batch_group_count) -> tuple[int, ...]:
    """The window of the lhs transpose: (groups * I, O / groups, *k)."""
    q = feature_group_count * batch_group_count
    return (q * rhs_shape[1], rhs_shape[0] // q) + tuple(rhs_shape[2:])


@attr_function
def conv_batch_unfold(lhs_shape, batch_group_count) -> tuple[int, ...]:
    """The lhs transpose's result (N / B, B * C, *x) split as (N / B, B, C, *x); unchanged
    (N, C, *x) without batch groups."""
    b = batch_group_count
    if b == 1:
        return tuple(lhs_shape)
    return (lhs_shape[0] // b, b) + tuple(lhs_shape[1:])


@attr_function
def conv_batch_unfold_perm(n, batch_group_count) -> tuple[int, ...]:
    """Moves the batch groups in front of the batch (identity without batch groups)."""
    if batch_group_count == 1:
        return tuple(range(n))
    return (1, 0) + tuple(range(2, n + 1))


@attr_function
def conv_lhs_t_padding(lhs_shape, rhs_shape, ct_shape, window_strides, padding, lhs_dilation,
                       rhs_dilation) -> tuple[tuple[int, int], ...]:
    """Padding of the dilated cotangent in the lhs transpose: tap k' of the flipped window
    over output x reads cotangent position x * lhs_dilation + lo - k * rhs_dilation, and the
    result has the lhs's spatial sizes."""
    out = []
    for i, (lo, _) in enumerate(padding):
        k = _dilated(rhs_shape[i + 2], rhs_dilation[i])
        low = k - 1 - lo
        needed = _dilated(lhs_shape[i + 2], lhs_dilation[i]) + k - 1
        out.append((low, needed - low - _dilated(ct_shape[i + 2], window_strides[i])))
    return tuple(out)


@attr_function
def conv_rhs_t_padding(lhs_shape, rhs_shape, ct_shape, window_strides, padding, lhs_dilation,
                       rhs_dilation) -> tuple[tuple[int, int], ...]:
    """Padding of the lhs in the rhs transpose: the same low padding, the high one cut to
    what the last tap read (the result has the window's spatial sizes)."""
    out = []
    for i, (lo, _) in enumerate(padding):
        needed = _dilated(rhs_shape[i + 2], rhs_dilation[i]) + _dilated(ct_shape[i + 2], window_strides[i]) - 1
        out.append((lo, needed - lo - _dilated(lhs_shape[i + 2], lhs_dilation[i])))
    return tuple(out)
