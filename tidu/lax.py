"""Structured control flow, as ``jax.lax``: ``cond``, ``switch``, ``scan``, ``fori_loop``,
``while_loop``, ``map`` and ``custom_root`` (tidu.transforms.control; docs/control-flow.md),
``MemoryBudget`` and ``Revolve``, checkpoint policies for ``scan`` (their plans: ``Schedule``),
the slices at traced offsets ``dynamic_slice``, ``dynamic_update_slice`` and their one-axis
forms (tidu.dynamic_slicing), the N-D convolutions ``conv_general_dilated``, ``conv``,
``conv_with_general_padding`` (tidu.convolution; docs/convolution.md), and
``bitcast_convert_type``."""

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
from tidu.trace.tracing import Tracer
from tidu.transforms.control import (
    ReverseModeRefused,
    cond,
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


__all__ = ["ConvDimensionNumbers", "MemoryBudget", "ReverseModeRefused", "Revolve", "Schedule",
           "bitcast_convert_type", "cond", "conv", "conv_dimension_numbers", "conv_general_dilated",
           "conv_with_general_padding", "custom_root", "dynamic_index_in_dim", "dynamic_slice",
           "dynamic_slice_in_dim", "dynamic_update_index_in_dim", "dynamic_update_slice",
           "dynamic_update_slice_in_dim", "fori_loop", "map", "scan", "switch", "while_loop"]
