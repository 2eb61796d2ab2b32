"""N-dimensional convolutions, as ``jax.lax``'s: ``conv_general_dilated``, ``conv``,
``conv_with_general_padding`` and ``conv_dimension_numbers`` (re-exported by ``tidu.lax``;
docs/convolution.md).

One primitive carries the rules (``conv`` in rules/conv.rules): StableHLO's convolution
in one layout, lhs (N, C, *spatial), rhs (O, I, *window), result (N, O, *spatial). Here the
arguments are checked and normalized to it: dimension numbers become transposes of the
operands and of the result, a padding name ('SAME', 'VALID', 'SAME_LOWER') becomes
explicit (low, high) pairs, absent dilations become ones. Called with NumPy values (no
tracer), the functions compute the result with the primitive's NumPy kernel; traced, the
same values, differentiable in both operands and batched by ``tidu.vmap``.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

import tidu.numpy as tnp
from tidu.numpy import ArrayLike

__all__ = ["ConvDimensionNumbers", "conv", "conv_dimension_numbers", "conv_general_dilated",
           "conv_with_general_padding"]

_PAD_NAMES = ("SAME", "VALID", "SAME_LOWER")


class ConvDimensionNumbers(NamedTuple):
    """Axis numbers, as ``jax.lax.ConvDimensionNumbers``: ``lhs_spec`` (batch, feature,
    *spatial), ``rhs_spec`` (output feature, input feature, *spatial), ``out_spec`` (batch,
    feature, *spatial); spatial axis i of the three goes with ``window_strides[i]``,
    ``padding[i]`` and the dilations' entry i."""

    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


DimensionNumbers = ConvDimensionNumbers | tuple[str, str, str] | Sequence[Sequence[int]] | None


def _int(value: Any, what: str, name: str) -> int:
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"{what}: {name} must be integers, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what}: {name} must be integers, got {value!r}") from None


def _ints(values: Any, n: int, what: str, name: str, positive: bool = True) -> tuple[int, ...]:
    """``values`` as n integers (positive ones unless told otherwise)."""
    if values is None:
        return (1,) * n
    if isinstance(values, str) or not isinstance(values, Sequence | np.ndarray):
        raise TypeError(f"{what}: {name} must be a sequence of {n} integers (one per spatial axis), "
                        f"got {values!r}")
    out = tuple(_int(v, what, name) for v in values)
    if len(out) != n:
        raise ValueError(f"{what}: {name} must have {n} entries (one per spatial axis), got {len(out)}")
    if positive and any(v < 1 for v in out):
        raise ValueError(f"{what}: {name} must be positive, got {out}")
    return out


def _count(value: Any, what: str, name: str) -> int:
    count = _int(value, what, name)
    if count < 1:
        raise ValueError(f"{what}: {name} must be a positive integer, got {value!r}")
    return count


def _string_spec(spec: Any, letters: str, rank: int, what: str, which: str) -> str:
    if not isinstance(spec, str) or len(spec) != rank or len(set(spec)) != rank \
            or any(c not in spec for c in letters):
        raise ValueError(f"{what}: dimension_numbers' {which} spec must be a string of {rank} distinct "
                         f"letters with {' and '.join(letters)} (as 'NCHW', 'OIHW'), got {spec!r}")
    return spec


def conv_dimension_numbers(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                           dimension_numbers: DimensionNumbers) -> ConvDimensionNumbers:
    """``dimension_numbers`` as axis numbers: None is (N, C, *spatial) for lhs and result
    and (O, I, *spatial) for rhs; strings ('NCHW', 'OIHW', 'NCHW') name the axes, spatial
    axes ordered as in the rhs string; a ``ConvDimensionNumbers`` (or three sequences of
    axes) is checked and returned."""
    what = "tidu.lax.conv_general_dilated"
    rank = len(lhs_shape)
    if len(rhs_shape) != rank:
        raise ValueError(f"{what}: lhs and rhs must have the same rank, got shapes {tuple(lhs_shape)} and "
                         f"{tuple(rhs_shape)}")
    if rank < 3:
        raise ValueError(f"{what}: lhs and rhs need a batch, a feature and at least one spatial axis "
                         f"(rank >= 3), got rank {rank}")
    if dimension_numbers is None:
        default = tuple(range(rank))
        return ConvDimensionNumbers(default, default, default)
    if not isinstance(dimension_numbers, Sequence) or len(dimension_numbers) != 3:
        raise TypeError(f"{what}: dimension_numbers must be None, a ConvDimensionNumbers or three specs "
                        f"(lhs, rhs, out), got {dimension_numbers!r}")
    lhs, rhs, out = dimension_numbers
    if all(isinstance(s, str) for s in dimension_numbers):
        lhs = _string_spec(lhs, "NC", rank, what, "lhs")
        rhs = _string_spec(rhs, "OI", rank, what, "rhs")
        out = _string_spec(out, "NC", rank, what, "out")
        spatial = [c for c in rhs if c not in "OI"]
        for spec, which in ((lhs, "lhs"), (out, "out")):
            if sorted(c for c in spec if c not in "NC") != sorted(spatial):
                raise ValueError(f"{what}: dimension_numbers' {which} spec {spec!r} must name the same spatial "
                                 f"axes as the rhs spec {rhs!r}")
        return ConvDimensionNumbers(tuple(lhs.index(c) for c in "NC" + "".join(spatial)),
                                    tuple(rhs.index(c) for c in "OI" + "".join(spatial)),
                                    tuple(out.index(c) for c in "NC" + "".join(spatial)))
    specs = []
    for spec, which in ((lhs, "lhs"), (rhs, "rhs"), (out, "out")):
        if isinstance(spec, str) or not isinstance(spec, Sequence | np.ndarray):
            raise TypeError(f"{what}: dimension_numbers must be three strings or three sequences of axes, "
                            f"got {dimension_numbers!r}")
        axes = tuple(_int(a, what, f"dimension_numbers' {which} spec") for a in spec)
        if sorted(axes) != list(range(rank)):
            raise ValueError(f"{what}: dimension_numbers' {which} spec {axes} must be a permutation of the "
                             f"{rank} axes")
        specs.append(axes)
    return ConvDimensionNumbers(*specs)


def _padding(padding: Any, in_sizes: Sequence[int], windows: Sequence[int], strides: Sequence[int],
             what: str) -> tuple[tuple[int, int], ...]:
    n = len(in_sizes)
    if isinstance(padding, str):
        name = padding.upper()
        if name not in _PAD_NAMES:
            raise ValueError(f"{what}: padding must be 'SAME', 'VALID', 'SAME_LOWER' or (low, high) pairs, "
                             f"got {padding!r}")
        if name == "VALID":
            return ((0, 0),) * n
        pads = []
        for size, window, stride in zip(in_sizes, windows, strides, strict=True):
            out = -(-size // stride)
            total = max((out - 1) * stride + window - size, 0)
            low = total // 2 if name == "SAME" else total - total // 2
            pads.append((low, total - low))
        return tuple(pads)
    if not isinstance(padding, Sequence | np.ndarray) or len(padding) != n:
        raise ValueError(f"{what}: padding must be 'SAME', 'VALID', 'SAME_LOWER' or {n} (low, high) pairs "
                         f"(one per spatial axis), got {padding!r}")
    pairs = []
    for pair in padding:
        if isinstance(pair, str) or not isinstance(pair, Sequence | np.ndarray) or len(pair) != 2:
            raise ValueError(f"{what}: padding must be {n} (low, high) pairs of integers, got {padding!r}")
        pairs.append((_int(pair[0], what, "padding"), _int(pair[1], what, "padding")))
    return tuple(pairs)


def _operands(lhs: ArrayLike, rhs: ArrayLike, preferred_element_type: Any, what: str) -> tuple[Any, Any]:
    """Both operands as arrays (or tracers) of one numeric dtype: their common one, or
    ``preferred_element_type``."""
    x, w = tnp.asarray(lhs), tnp.asarray(rhs)
    if preferred_element_type is not None:
        dtype = np.dtype(preferred_element_type).name
        for v, name in ((x, "lhs"), (w, "rhs")):
            if np.issubdtype(np.dtype(v.dtype), np.complexfloating) and not dtype.startswith("complex"):
                raise TypeError(f"{what}: preferred_element_type={dtype} cannot hold the complex {name}")
    else:
        dtype = tnp.result_type(x, w)
    if dtype == "bool":
        raise TypeError(f"{what}: lhs and rhs must be numbers, got bool")
    x = x if x.dtype == dtype else tnp.astype(x, dtype)
    w = w if w.dtype == dtype else tnp.astype(w, dtype)
    return x, w


def conv_general_dilated(lhs: ArrayLike, rhs: ArrayLike, window_strides: Sequence[int],
                         padding: str | Sequence[tuple[int, int]],
                         lhs_dilation: Sequence[int] | None = None, rhs_dilation: Sequence[int] | None = None,
                         dimension_numbers: DimensionNumbers = None, feature_group_count: int = 1,
                         batch_group_count: int = 1, precision: Any = None,
                         preferred_element_type: Any = None) -> Any:
    """``jax.lax.conv_general_dilated``: the correlation (no window flip) of ``lhs`` with
    the window ``rhs`` over the spatial axes, with strides, padding ('SAME', 'VALID',
    'SAME_LOWER' or (low, high) pairs; negative crops), dilations of either operand,
    feature and batch groups, and axes laid out as ``dimension_numbers`` says.
    ``precision`` is accepted and ignored (kernels compute in the operands' dtype)."""
    what = "tidu.lax.conv_general_dilated"
    del precision
    x, w = _operands(lhs, rhs, preferred_element_type, what)
    dn = conv_dimension_numbers(tnp.shape(x), tnp.shape(w), dimension_numbers)
    n = x.ndim - 2
    strides = _ints(window_strides, n, what, "window_strides")
    ld = _ints(lhs_dilation, n, what, "lhs_dilation")
    rd = _ints(rhs_dilation, n, what, "rhs_dilation")
    fg = _count(feature_group_count, what, "feature_group_count")
    bg = _count(batch_group_count, what, "batch_group_count")
    x = x if dn.lhs_spec == tuple(range(n + 2)) else tnp.transpose(x, dn.lhs_spec)
    w = w if dn.rhs_spec == tuple(range(n + 2)) else tnp.transpose(w, dn.rhs_spec)
    (batch, feat, *sizes), (out_feat, in_feat, *window) = tnp.shape(x), tnp.shape(w)
    if fg > 1 and bg > 1:
        raise ValueError(f"{what}: feature_group_count ({fg}) and batch_group_count ({bg}) cannot both exceed 1")
    if feat % fg or feat // fg != in_feat:
        raise ValueError(f"{what}: the lhs has {feat} features, which must be feature_group_count ({fg}) "
                         f"times the rhs input features ({in_feat})")
    if out_feat % (fg * bg):
        name = "feature_group_count" if fg > 1 else "batch_group_count"
        raise ValueError(f"{what}: the rhs output features ({out_feat}) must be a multiple of {name} "
                         f"({fg * bg})")
    if batch % bg:
        raise ValueError(f"{what}: the lhs batch ({batch}) must be a multiple of batch_group_count ({bg})")
    if isinstance(padding, str) and any(d != 1 for d in ld):
        raise ValueError(f"{what}: padding {padding!r} with lhs_dilation {ld}: a padding name is not defined "
                         "for a dilated lhs (a transposed convolution); give (low, high) pairs")
    spans = [(k - 1) * d + 1 if k else 0 for k, d in zip(window, rd, strict=True)]
    pads = _padding(padding, sizes, spans, strides, what)
    out = tnp.op("conv")(x, w, window_strides=strides, padding=pads, lhs_dilation=ld, rhs_dilation=rd,
                         feature_group_count=fg, batch_group_count=bg)
    if dn.out_spec == tuple(range(n + 2)):
        return out
    return tnp.transpose(out, tuple(int(i) for i in np.argsort(dn.out_spec)))


def conv(lhs: ArrayLike, rhs: ArrayLike, window_strides: Sequence[int], padding: str | Sequence[tuple[int, int]],
         precision: Any = None, preferred_element_type: Any = None) -> Any:
    """``jax.lax.conv``: ``conv_general_dilated`` without dilation, lhs (N, C, *spatial),
    rhs (O, I, *window)."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs: ArrayLike, rhs: ArrayLike, window_strides: Sequence[int],
                              padding: str | Sequence[tuple[int, int]], lhs_dilation: Sequence[int] | None,
                              rhs_dilation: Sequence[int] | None, precision: Any = None,
                              preferred_element_type: Any = None) -> Any:
    """``jax.lax.conv_with_general_padding``: ``conv_general_dilated`` in the default
    layout, lhs (N, C, *spatial), rhs (O, I, *window)."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                precision=precision, preferred_element_type=preferred_element_type)
