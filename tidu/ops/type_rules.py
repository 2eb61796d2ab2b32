"""Type rules: the output avals of a primitive from its operand avals and attributes.

A primitive's declaration in ``rules/`` names one of these rules (``type elementwise``).
Each rule checks its operands and raises ``TypeRuleError`` with a message that says
what is wrong; the caller adds which op and where.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tidu.core.keys import Attrs, Aval, complex_dtype, is_complex, is_float, is_inexact, is_integer, real_dtype


class TypeRuleError(TypeError):
    """Operands or attributes do not fit a primitive's type rule."""


TypeRule = Callable[[Sequence[Aval], Attrs], list[Aval]]
TYPE_RULES: dict[str, TypeRule] = {}

DTYPE_CLASSES: dict[str, frozenset[str]] = {
    "bool": frozenset({"bool"}),
    "int": frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}),
    "float": frozenset({"float16", "bfloat16", "float32", "float64"}),
    "complex": frozenset({"complex64", "complex128"}),
}
DTYPE_CLASSES["real"] = DTYPE_CLASSES["int"] | DTYPE_CLASSES["float"]
DTYPE_CLASSES["inexact"] = DTYPE_CLASSES["float"] | DTYPE_CLASSES["complex"]
DTYPE_CLASSES["number"] = DTYPE_CLASSES["real"] | DTYPE_CLASSES["complex"]
DTYPE_CLASSES["any"] = DTYPE_CLASSES["number"] | DTYPE_CLASSES["bool"]


def type_rule(name: str) -> Callable[[TypeRule], TypeRule]:
    def register(fn: TypeRule) -> TypeRule:
        TYPE_RULES[name] = fn
        return fn

    return register


def _same(avals: Sequence[Aval], what: str = "operands") -> Aval:
    first = avals[0]
    for a in avals[1:]:
        if a != first:
            raise TypeRuleError(
                f"{what} must have the same shape and dtype (no implicit broadcasting), "
                f"got {', '.join(map(str, avals))}; insert broadcast_in_dim or convert"
            )
    return first


def _axes(attrs: Attrs, ndim: int, name: str = "axes") -> tuple[int, ...]:
    axes = tuple(attrs[name])
    if len(set(axes)) != len(axes) or any(not 0 <= a < ndim for a in axes):
        raise TypeRuleError(f"{name}={axes} must be distinct axes in [0, {ndim})")
    return axes


@type_rule("elementwise")
def _elementwise(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    return [_same(avals)]


@type_rule("compare")
def _compare(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    a = _same(avals)
    if attrs["direction"] not in ("EQ", "NE", "LT", "LE", "GT", "GE"):
        raise TypeRuleError(f"direction={attrs['direction']!r} must be one of EQ NE LT LE GT GE")
    if is_complex(a.dtype) and attrs["direction"] not in ("EQ", "NE"):
        raise TypeRuleError("complex values can only be compared with EQ or NE")
    return [a.with_dtype("bool")]


@type_rule("select")
def _select(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    pred, on_true, on_false = avals
    out = _same([on_true, on_false], "the two branches")
    if pred.dtype != "bool" or pred.shape != out.shape:
        raise TypeRuleError(f"predicate must be bool of shape {out.shape}, got {pred}")
    return [out]


@type_rule("to_real")
def _to_real(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    (a,) = avals
    return [a.with_dtype(real_dtype(a.dtype))]


@type_rule("abs")
def _abs(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    (a,) = avals
    return [a.with_dtype(real_dtype(a.dtype))]


@type_rule("make_complex")
def _make_complex(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    a = _same(avals)
    if not is_float(a.dtype):
        raise TypeRuleError(f"complex takes two float operands, got {a}")
    return [a.with_dtype(complex_dtype(a.dtype))]


@type_rule("convert")
def _convert(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    (a,) = avals
    # Complex to real keeps the real part: that is the adjoint of the real-to-complex
    # embedding, so convert's transpose is convert back.
    return [a.with_dtype(attrs["dtype"])]


@type_rule("bitcast")
def _bitcast(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    (a,) = avals
    dtype = attrs["dtype"]
    if dtype not in DTYPE_CLASSES["real"]:
        raise TypeRuleError(f"dtype={dtype} must be an integer or float dtype")
    if dtype == a.dtype:  # the JVP rule (zero: bits carry no tangent) would be wrong for x itself
        raise TypeRuleError(f"x is already {dtype}: a bitcast to its own dtype is x itself")
    if np.dtype(dtype).itemsize != np.dtype(a.dtype).itemsize:
        raise TypeRuleError(f"cannot read the {8 * np.dtype(a.dtype).itemsize}-bit {a.dtype} as {dtype} of "
                            f"{8 * np.dtype(dtype).itemsize} bits: a bitcast keeps the width")
    return [a.with_dtype(dtype)]


@type_rule("constant")
def _constant(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    if avals:
        raise TypeRuleError("constant takes no operands")
    return [attrs["value"].aval]


@type_rule("broadcast_in_dim")
def _broadcast_in_dim(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    (a,) = avals
    shape, dims = tuple(attrs["shape"]), tuple(attrs["dims"])
    if len(dims) != a.ndim:
        raise TypeRuleError(f"dims={dims} must name one output axis per operand axis ({a.ndim})")
    if list(dims) != sorted(set(dims)) or any(not 0 <= d < len(shape) for d in dims):
        raise TypeRuleError(f"dims={dims} must be increasing axes of the result shape {shape}")
    for i, d in enumerate(dims):
        if a.shape[i] not in (1, shape[d]):
            raise TypeRuleError(f"operand axis {i} of size {a.shape[i]} cannot broadcast to {shape[d]}")
    return [a.with_shape(shape)]


@type_rule("reshape")
def _reshape(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    (a,) = avals
    out = a.with_shape(tuple(attrs["shape"]))
    if out.size != a.size:
        raise TypeRuleError(f"cannot reshape {a} ({a.size} elements) to shape {out.shape}")
    return [out]


@type_rule("transpose")
def _transpose(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    (a,) = avals
    perm = tuple(attrs["perm"])
    if sorted(perm) != list(range(a.ndim)):
        raise TypeRuleError(f"perm={perm} must be a permutation of range({a.ndim})")
    return [a.with_shape(tuple(a.shape[p] for p in perm))]


@type_rule("reverse")
def _reverse(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    (a,) = avals
    _axes(attrs, a.ndim, "dims")
    return [a]


@type_rule("reduce")
def _reduce(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    (a,) = avals
    axes = _axes(attrs, a.ndim)
    return [a.with_shape(tuple(d for i, d in enumerate(a.shape) if i not in axes))]


@type_rule("dot_general")
def _dot_general(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    lhs, rhs = avals
    if lhs.dtype != rhs.dtype:
        raise TypeRuleError(f"dot_general operands must share a dtype, got {lhs} and {rhs}")
    lc, rc = tuple(attrs["lhs_contract"]), tuple(attrs["rhs_contract"])
    lb, rb = tuple(attrs["lhs_batch"]), tuple(attrs["rhs_batch"])
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise TypeRuleError("contracting and batch dimension lists must pair up")
    for name, dims, nd in (("lhs", lc + lb, lhs.ndim), ("rhs", rc + rb, rhs.ndim)):
        if len(set(dims)) != len(dims) or any(not 0 <= d < nd for d in dims):
            raise TypeRuleError(f"{name} batch/contracting axes {dims} invalid for rank {nd}")
    for i, j in zip(lc + lb, rc + rb, strict=True):
        if lhs.shape[i] != rhs.shape[j]:
            raise TypeRuleError(f"lhs axis {i} ({lhs.shape[i]}) does not match rhs axis {j} ({rhs.shape[j]})")
    batch = tuple(lhs.shape[i] for i in lb)
    lfree = tuple(d for i, d in enumerate(lhs.shape) if i not in lc + lb)
    rfree = tuple(d for i, d in enumerate(rhs.shape) if i not in rc + rb)
    return [lhs.with_shape(batch + lfree + rfree)]


@type_rule("slice")
def _slice(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    (a,) = avals
    start, limit, strides = tuple(attrs["start"]), tuple(attrs["limit"]), tuple(attrs["strides"])
    if not len(start) == len(limit) == len(strides) == a.ndim:
        raise TypeRuleError(f"start/limit/strides need one entry per axis ({a.ndim})")
    shape = []
    for s, l, st, d in zip(start, limit, strides, a.shape, strict=True):
        if not (0 <= s <= l <= d) or st < 1:
            raise TypeRuleError(f"slice [{s}:{l}:{st}] out of range for axis of size {d}")
        shape.append(max(0, -(-(l - s) // st)))
    return [a.with_shape(tuple(shape))]


def _dynamic_axis(x: Aval, start: Aval, axis: Any) -> None:
    if not is_integer(start.dtype) or start.shape != ():
        raise TypeRuleError(f"the start must be an integer scalar, got {start}")
    if not isinstance(axis, int) or not 0 <= axis < x.ndim:
        raise TypeRuleError(f"axis {axis!r} out of range for rank {x.ndim}")


@type_rule("dynamic_slice")
def _dynamic_slice(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    x, start = avals
    axis, size = attrs["axis"], attrs["size"]
    _dynamic_axis(x, start, axis)
    if not isinstance(size, int) or not 0 <= size <= x.shape[axis]:
        raise TypeRuleError(f"size {size!r} out of range for axis {axis} of size {x.shape[axis]}")
    return [x.with_shape(x.shape[:axis] + (size,) + x.shape[axis + 1:])]


@type_rule("dynamic_update_slice")
def _dynamic_update_slice(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    x, update, start = avals
    axis = attrs["axis"]
    _dynamic_axis(x, start, axis)
    if update.dtype != x.dtype or update.ndim != x.ndim:
        raise TypeRuleError(f"update {update} must have the operand's dtype and rank ({x})")
    if any(u != d for a, (u, d) in enumerate(zip(update.shape, x.shape, strict=True)) if a != axis) \
            or update.shape[axis] > x.shape[axis]:
        raise TypeRuleError(f"update {update} must match the operand {x} but along axis {axis}, where it fits")
    return [x]


@type_rule("pad")
def _pad(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    a, value = avals
    if value.shape != () or value.dtype != a.dtype:
        raise TypeRuleError(f"padding value must be a scalar of dtype {a.dtype}, got {value}")
    lo, hi, inner = tuple(attrs["low"]), tuple(attrs["high"]), tuple(attrs["interior"])
    if not len(lo) == len(hi) == len(inner) == a.ndim or any(i < 0 for i in inner):
        raise TypeRuleError(f"low/high/interior need one entry per axis ({a.ndim}), interior >= 0")
    shape = tuple(
        lo_ + hi_ + d + max(0, d - 1) * i for d, lo_, hi_, i in zip(a.shape, lo, hi, inner, strict=True)
    )
    if any(s < 0 for s in shape):
        raise TypeRuleError(f"padding gives a negative size {shape}")
    return [a.with_shape(shape)]


@type_rule("concatenate")
def _concatenate(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    if not avals:
        raise TypeRuleError("concatenate needs at least one operand")
    axis, first = attrs["axis"], avals[0]
    if not 0 <= axis < first.ndim:
        raise TypeRuleError(f"axis={axis} out of range for rank {first.ndim}")
    for a in avals[1:]:
        if a.dtype != first.dtype or a.ndim != first.ndim or any(
            a.shape[i] != first.shape[i] for i in range(a.ndim) if i != axis
        ):
            raise TypeRuleError(f"cannot concatenate {first} with {a} along axis {axis}")
    size = sum(a.shape[axis] for a in avals)
    return [first.with_shape(first.shape[:axis] + (size,) + first.shape[axis + 1 :])]


# --- linear algebra (rules/linalg.rules): matrices are the last two axes, leading axes batch ---


def _square(a: Aval, what: str = "operand") -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise TypeRuleError(f"{what} must be a stack of square matrices (..., n, n), got {a}")
    if not is_inexact(a.dtype):
        raise TypeRuleError(f"{what} must be float or complex, got {a.dtype}")


@type_rule("matrix")
def _matrix(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    """A stack of matrices to one of the same aval (triangle: any shape of rank >= 2)."""
    (a,) = avals
    if a.ndim < 2:
        raise TypeRuleError(f"operand must have rank >= 2 (..., m, n), got {a}")
    return [a]


@type_rule("square")
def _square_rule(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    (a,) = avals
    _square(a)
    return [a]


@type_rule("linear_solve")
def _linear_solve(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    """a (..., n, n) and b (..., n, k) with the same batch axes and dtype; result as b."""
    a, b = avals
    _square(a, "the matrix")
    if b.dtype != a.dtype or b.ndim != a.ndim or b.shape[:-2] != a.shape[:-2] or b.shape[-2] != a.shape[-1]:
        raise TypeRuleError(f"right-hand side must be (..., {a.shape[-1]}, k) with the matrix's batch axes "
                            f"and dtype, got matrix {a} and right-hand side {b}")
    return [b]


@type_rule("eigenvalues")
def _eigenvalues(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    """(..., n, n) to real (..., n)."""
    (a,) = avals
    _square(a)
    return [Aval(a.shape[:-1], real_dtype(a.dtype))]


@type_rule("determinant")
def _determinant(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    """(..., n, n) to (...,) of the same dtype."""
    (a,) = avals
    _square(a)
    return [Aval(a.shape[:-2], a.dtype)]


@type_rule("log_determinant")
def _log_determinant(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    """(..., n, n) to real (...,)."""
    (a,) = avals
    _square(a)
    return [Aval(a.shape[:-2], real_dtype(a.dtype))]


def _tall(a: Aval) -> None:
    if a.ndim < 2 or a.shape[-2] < a.shape[-1] or not is_inexact(a.dtype):
        raise TypeRuleError(f"operand must be float or complex matrices (..., m, n) with m >= n, got {a}")


@type_rule("qr_q")
def _qr_q(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    """(..., m, n), m >= n, to Q (..., m, n)."""
    (a,) = avals
    _tall(a)
    return [a]


@type_rule("qr_r")
def _qr_r(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    """(..., m, n), m >= n, to R (..., n, n)."""
    (a,) = avals
    _tall(a)
    return [a.with_shape(a.shape[:-2] + (a.shape[-1], a.shape[-1]))]


def _matrices_of(a: Aval) -> int:
    if a.ndim < 2 or not is_inexact(a.dtype):
        raise TypeRuleError(f"operand must be float or complex matrices (..., m, n), got {a}")
    return min(a.shape[-2:])


@type_rule("svdvals")
def _svdvals(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    """(..., m, n) to real (..., min(m, n))."""
    (a,) = avals
    k = _matrices_of(a)
    return [Aval(a.shape[:-2] + (k,), real_dtype(a.dtype))]


@type_rule("svd_u")
def _svd_u(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    """(..., m, n) to (..., m, min(m, n))."""
    (a,) = avals
    return [a.with_shape(a.shape[:-1] + (_matrices_of(a),))]


@type_rule("svd_vh")
def _svd_vh(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    """(..., m, n) to (..., min(m, n), n)."""
    (a,) = avals
    return [a.with_shape(a.shape[:-2] + (_matrices_of(a), a.shape[-1]))]


@type_rule("pinv")
def _pinv(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    """(..., m, n) to (..., n, m); rtol >= 0."""
    (a,) = avals
    _matrices_of(a)
    if not attrs["rtol"] >= 0:
        raise TypeRuleError(f"rtol={attrs['rtol']!r} must be >= 0")
    return [a.with_shape(a.shape[:-2] + (a.shape[-1], a.shape[-2]))]


@type_rule("frechet")
def _frechet(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    """Two stacks of square matrices of one aval (a and the direction e) to that aval."""
    a, e = avals
    _square(a, "the matrix")
    if e != a:
        raise TypeRuleError(f"the direction must have the matrix's aval {a}, got {e}")
    return [a]


@type_rule("lu")
def _lu(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    """(..., m, n) float or complex matrices to the same aval (the packed factors)."""
    (a,) = avals
    if a.ndim < 2 or not is_inexact(a.dtype):
        raise TypeRuleError(f"operand must be float or complex matrices (..., m, n), got {a}")
    return [a]


@type_rule("lu_pivots")
def _lu_pivots(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    """(..., m, n) to int32 (..., min(m, n))."""
    (a,) = _lu(avals, attrs)
    return [Aval(a.shape[:-2] + (min(a.shape[-2:]),), "int32")]


@type_rule("permutation_matrix")
def _permutation_matrix(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    """Integer pivots (..., n) to an int32 (..., n, n) permutation matrix."""
    (p,) = avals
    if p.ndim < 1 or p.dtype not in DTYPE_CLASSES["int"]:
        raise TypeRuleError(f"pivots must be integers of rank >= 1 (..., n), got {p}")
    return [Aval(p.shape + p.shape[-1:], "int32")]


@type_rule("eigvals")
def _eigvals(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    """(..., n, n) to complex (..., n)."""
    (a,) = avals
    _square(a)
    return [Aval(a.shape[:-1], _complex_of(a.dtype))]


def _complex_of(dtype: str) -> str:
    return dtype if is_complex(dtype) else complex_dtype(dtype)


@type_rule("eig_vectors")
def _eig_vectors(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    """(..., n, n) to complex (..., n, n)."""
    (a,) = avals
    _square(a)
    return [a.with_dtype(_complex_of(a.dtype))]


# --- discrete Fourier transforms (rules/fft.rules): over the trailing axes, leading axes batch ---

FFT_NORMS = ("backward", "ortho", "forward")


def _fft_lengths(a: Aval, attrs: Attrs) -> tuple[int, ...]:
    lengths = tuple(attrs["fft_lengths"])
    if not 1 <= len(lengths) <= 3 or any(not isinstance(n, int) or n < 1 for n in lengths):
        raise TypeRuleError(f"fft_lengths={lengths} must be 1 to 3 positive integers (the trailing axes)")
    if a.ndim < len(lengths):
        raise TypeRuleError(f"operand {a} has fewer axes than fft_lengths={lengths}")
    if attrs["norm"] not in FFT_NORMS:
        raise TypeRuleError(f"norm={attrs['norm']!r} must be one of {', '.join(FFT_NORMS)}")
    return lengths


@type_rule("fft")
def _fft(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    """Complex (..., *fft_lengths) to the same aval."""
    (a,) = avals
    lengths = _fft_lengths(a, attrs)
    if not is_complex(a.dtype) or a.shape[a.ndim - len(lengths):] != lengths:
        raise TypeRuleError(f"operand must be complex (..., {', '.join(map(str, lengths))}), got {a}")
    return [a]


@type_rule("rfft")
def _rfft(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    """Real (..., *fft_lengths) to complex (..., n // 2 + 1) on the last axis."""
    (a,) = avals
    lengths = _fft_lengths(a, attrs)
    if not is_float(a.dtype) or a.shape[a.ndim - len(lengths):] != lengths:
        raise TypeRuleError(f"operand must be float (..., {', '.join(map(str, lengths))}), got {a}")
    return [Aval(a.shape[:-1] + (lengths[-1] // 2 + 1,), complex_dtype(a.dtype))]


@type_rule("irfft")
def _irfft(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    """Complex (..., n // 2 + 1) on the last axis to real (..., *fft_lengths)."""
    (a,) = avals
    lengths = _fft_lengths(a, attrs)
    half = lengths[:-1] + (lengths[-1] // 2 + 1,)
    if not is_complex(a.dtype) or a.shape[a.ndim - len(lengths):] != half:
        raise TypeRuleError(f"operand must be complex (..., {', '.join(map(str, half))}) for "
                            f"fft_lengths={lengths}, got {a}")
    return [Aval(a.shape[:-1] + (lengths[-1],), real_dtype(a.dtype))]


# --- convolution (rules/conv.rules): lhs (N, C, *x), rhs (O, I, *k), result (N / B, O, *y) ---


def _positive_ints(attrs: Attrs, name: str, n: int) -> tuple[int, ...]:
    values = tuple(attrs[name])
    if len(values) != n or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
        raise TypeRuleError(f"{name}={values} must be {n} positive integers (one per spatial axis)")
    return values


def conv_out_size(size: int, window: int, stride: int, low: int, high: int, lhs_dilation: int,
                  rhs_dilation: int) -> int:
    """The length of a convolution's result along one spatial axis."""
    padded = ((size - 1) * lhs_dilation + 1 if size else 0) + low + high
    span = (window - 1) * rhs_dilation + 1 if window else 0
    return (padded - span) // stride + 1 if padded >= span else 0


@type_rule("conv")
def _conv(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    lhs, rhs = avals
    if lhs.dtype != rhs.dtype:
        raise TypeRuleError(f"conv operands must share a dtype, got {lhs} and {rhs}")
    if lhs.ndim < 3 or rhs.ndim != lhs.ndim:
        raise TypeRuleError(f"conv operands must be (N, C, *spatial) and (O, I, *window) of one rank >= 3, "
                            f"got {lhs} and {rhs}")
    n = lhs.ndim - 2
    strides = _positive_ints(attrs, "window_strides", n)
    lhs_dilation = _positive_ints(attrs, "lhs_dilation", n)
    rhs_dilation = _positive_ints(attrs, "rhs_dilation", n)
    padding = tuple(tuple(p) for p in attrs["padding"])
    if len(padding) != n or any(len(p) != 2 or any(isinstance(v, bool) or not isinstance(v, int) for v in p)
                                for p in padding):
        raise TypeRuleError(f"padding={padding} must be {n} (low, high) pairs of integers")
    groups = []
    for name in ("feature_group_count", "batch_group_count"):
        g = attrs[name]
        if isinstance(g, bool) or not isinstance(g, int) or g < 1:
            raise TypeRuleError(f"{name}={g!r} must be a positive integer")
        groups.append(g)
    fg, bg = groups
    if fg > 1 and bg > 1:
        raise TypeRuleError(f"feature_group_count={fg} and batch_group_count={bg} cannot both exceed 1")
    if lhs.shape[1] != fg * rhs.shape[1]:
        raise TypeRuleError(f"lhs features ({lhs.shape[1]}) must be feature_group_count ({fg}) times the "
                            f"rhs input features ({rhs.shape[1]})")
    if rhs.shape[0] % (fg * bg):
        raise TypeRuleError(f"rhs output features ({rhs.shape[0]}) must be a multiple of the group count "
                            f"({fg * bg})")
    if lhs.shape[0] % bg:
        raise TypeRuleError(f"lhs batch ({lhs.shape[0]}) must be a multiple of batch_group_count ({bg})")
    out = tuple(conv_out_size(lhs.shape[i + 2], rhs.shape[i + 2], strides[i], *padding[i], lhs_dilation[i],
                              rhs_dilation[i]) for i in range(n))
    return [lhs.with_shape((lhs.shape[0] // bg, rhs.shape[0]) + out)]


def check_dtypes(avals: Sequence[Aval], allowed: frozenset[str]) -> None:
    for a in avals:
        if a.dtype not in allowed:
            raise TypeRuleError(f"dtype {a.dtype} not supported (expects {', '.join(sorted(allowed))})")


__all__ = ["TYPE_RULES", "DTYPE_CLASSES", "TypeRuleError", "check_dtypes", "is_inexact"]
