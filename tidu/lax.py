"""Structured control flow, as ``jax.lax``: ``cond``, ``switch``, ``scan``, ``fori_loop``,
``while_loop``, ``map`` and ``custom_root`` (tidu.transforms.control; docs/control-flow.md), and
``MemoryBudget``, a checkpoint policy for ``scan``."""

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

__all__ = ["MemoryBudget", "ReverseModeRefused", "cond", "custom_root", "fori_loop", "map", "scan", "switch",
           "while_loop"]
