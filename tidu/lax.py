"""Structured control flow, as ``jax.lax``: ``cond``, ``switch``, ``scan``, ``fori_loop``,
``while_loop``, ``map`` and ``custom_root`` (tidu.transforms.control; docs/control-flow.md),
``MemoryBudget``, a checkpoint policy for ``scan``, and the N-D convolutions
``conv_general_dilated``, ``conv``, ``conv_with_general_padding`` (tidu.convolution;
docs/convolution.md)."""

from tidu.convolution import (
    ConvDimensionNumbers,
    conv,
    conv_dimension_numbers,
    conv_general_dilated,
    conv_with_general_padding,
)
from tidu.transforms.control import (
    MemoryBudget,
    ReverseModeRefused,
    cond,
    custom_root,
    fori_loop,
    map,
    scan,
    switch,
    while_loop,
)

__all__ = ["ConvDimensionNumbers", "MemoryBudget", "ReverseModeRefused", "cond", "conv", "conv_dimension_numbers",
           "conv_general_dilated", "conv_with_general_padding", "custom_root", "fori_loop", "map", "scan", "switch",
           "while_loop"]
