"""Structured control flow, as ``jax.lax``: ``cond``, ``switch``, ``scan``, ``fori_loop``,
``while_loop``, ``map``, ``custom_root`` and ``custom_linear_solve`` (tidu.transforms.control; docs/control-flow.md),
``MemoryBudget`` and ``Revolve``, checkpoint policies for ``scan`` (their plans: ``Schedule``),
the slices at traced offsets ``dynamic_slice``, ``dynamic_update_slice`` and their one-axis
forms (tidu.dynamic_slicing), the N-D convolutions ``conv_general_dilated``, ``conv``,
``conv_with_general_padding`` (tidu.convolution; docs/convolution.md),
``bitcast_convert_type``, and jax.lax's array operations: ``add``, ``select``, ``clamp``,
``pad``, ``dot_general``, ``reduce_sum``, ``cumsum``, ``sort``, ``associative_scan``, ...
(tidu.lax_ops; docs/lax.md), ``reduce_window`` (pooling), ``reduce`` and ``conv_transpose``
(tidu.lax_windows)."""

from typing import Any

import numpy as np

import tidu.numpy as tnp
from tidu.convolution import (
    ConvDimensionNumbers,
    conv,
    conv_dimension_numbers,
    conv_general_dilated,
    conv_with_general_padding,
)
from tidu.core.keys import is_float, is_integer
from tidu.dynamic_slicing import (
    dynamic_index_in_dim,
    dynamic_slice,
    dynamic_slice_in_dim,
    dynamic_update_index_in_dim,
    dynamic_update_slice,
    dynamic_update_slice_in_dim,
)
from tidu.lax_ops import (
    RoundingMethod,
    abs,
    acos,
    acosh,
    add,
    argmax,
    argmin,
    asin,
    asinh,
    associative_scan,
    atan,
    atan2,
    atanh,
    batch_matmul,
    bessel_i0e,
    bessel_i1e,
    betainc,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    broadcast,
    broadcast_in_dim,
    broadcast_shapes,
    broadcast_to_rank,
    broadcasted_iota,
    cbrt,
    ceil,
    clamp,
    clz,
    collapse,
    complex,
    concatenate,
    conj,
    convert_element_type,
    cos,
    cosh,
    cumlogsumexp,
    cummax,
    cummin,
    cumprod,
    cumsum,
    digamma,
    div,
    dot,
    dot_general,
    eq,
    erf,
    erf_inv,
    erfc,
    exp,
    exp2,
    expand_dims,
    expm1,
    floor,
    full,
    full_like,
    ge,
    gt,
    igamma,
    igammac,
    imag,
    index_in_dim,
    integer_pow,
    iota,
    is_finite,
    le,
    lgamma,
    log,
    log1p,
    log2,
    logistic,
    lt,
    max,
    min,
    mul,
    ne,
    neg,
    nextafter,
    optimization_barrier,
    pad,
    polygamma,
    population_count,
    pow,
    real,
    reciprocal,
    reduce_and,
    reduce_max,
    reduce_min,
    reduce_or,
    reduce_precision,
    reduce_prod,
    reduce_sum,
    reduce_xor,
    rem,
    reshape,
    rev,
    round,
    rsqrt,
    select,
    select_n,
    shift_left,
    shift_right_arithmetic,
    shift_right_logical,
    sign,
    sin,
    sinh,
    slice,
    slice_in_dim,
    sort,
    sort_key_val,
    split,
    sqrt,
    square,
    squeeze,
    stop_gradient,
    sub,
    tan,
    tanh,
    tile,
    top_k,
    transpose,
    zeta,
)
from tidu.lax_windows import conv_transpose, reduce, reduce_window
from tidu.trace.tracing import Tracer
from tidu.transforms.control import (
    ReverseModeRefused,
    cond,
    custom_linear_solve,
    custom_root,
    fori_loop,
    map,
    scan,
    switch,
    while_loop,
)
from tidu.transforms.schedules import MemoryBudget, Revolve, Schedule


def bitcast_convert_type(operand: Any, new_dtype: Any) -> Any:
    """``operand``'s bits read as ``new_dtype``, an integer or float dtype of the same
    width (``jax.lax.bitcast_convert_type``; the primitive ``bitcast_convert``): float64
    to uint64 gives the IEEE encoding. The result carries no derivative."""
    dtype = np.dtype(operand.aval.dtype if isinstance(operand, Tracer) else np.asarray(operand).dtype)
    try:
        name = np.dtype(new_dtype).name
    except TypeError:
        raise TypeError(f"bitcast_convert_type: new_dtype must be a dtype, got {new_dtype!r}") from None
    for what, d in (("operand", dtype.name), ("new_dtype", name)):
        if not (is_integer(d) or is_float(d)):
            raise TypeError(f"bitcast_convert_type: {what} must have an integer or float dtype, got {d}")
    if np.dtype(name).itemsize != dtype.itemsize:
        raise TypeError(f"bitcast_convert_type: new_dtype {name} has {8 * np.dtype(name).itemsize} bits, the "
                        f"operand's {dtype.name} {8 * dtype.itemsize}; tidu bitcasts between dtypes of one width "
                        "only")
    if name == dtype.name:
        return operand
    return tnp.op("bitcast_convert")(operand, dtype=name)


__all__ = ["ConvDimensionNumbers", "MemoryBudget", "ReverseModeRefused", "Revolve", "RoundingMethod", "Schedule", "abs",
           "acos", "acosh", "add", "argmax", "argmin", "asin", "asinh", "associative_scan", "atan", "atan2", "atanh",
           "batch_matmul", "bessel_i0e", "bessel_i1e", "betainc", "bitcast_convert_type", "bitwise_and", "bitwise_not",
           "bitwise_or", "bitwise_xor", "broadcast", "broadcast_in_dim", "broadcast_shapes", "broadcast_to_rank",
           "broadcasted_iota", "cbrt", "ceil", "clamp", "clz", "collapse", "complex", "concatenate", "cond", "conj",
           "conv", "conv_dimension_numbers", "conv_general_dilated", "conv_transpose", "conv_with_general_padding",
           "convert_element_type", "cos", "cosh", "cumlogsumexp", "cummax", "cummin", "cumprod", "cumsum",
           "custom_linear_solve", "custom_root", "digamma", "div", "dot", "dot_general", "dynamic_index_in_dim",
           "dynamic_slice", "dynamic_slice_in_dim", "dynamic_update_index_in_dim", "dynamic_update_slice",
           "dynamic_update_slice_in_dim", "eq", "erf", "erf_inv", "erfc", "exp", "exp2", "expand_dims", "expm1",
           "floor", "fori_loop", "full", "full_like", "ge", "gt", "igamma", "igammac", "imag", "index_in_dim",
           "integer_pow", "iota", "is_finite", "le", "lgamma", "log", "log1p", "log2", "logistic", "lt", "map", "max",
           "min", "mul", "ne", "neg", "nextafter", "optimization_barrier", "pad", "polygamma", "population_count",
           "pow", "real", "reciprocal", "reduce", "reduce_and", "reduce_max", "reduce_min", "reduce_or",
           "reduce_precision", "reduce_prod", "reduce_sum", "reduce_window", "reduce_xor", "rem", "reshape", "rev",
           "round", "rsqrt", "scan", "select", "select_n", "shift_left", "shift_right_arithmetic",
           "shift_right_logical", "sign", "sin", "sinh", "slice", "slice_in_dim", "sort", "sort_key_val", "split",
           "sqrt", "square", "squeeze", "stop_gradient", "sub", "switch", "tan", "tanh", "tile", "top_k", "transpose",
           "while_loop", "zeta"]
