"""Structured control flow, as ``jax.lax``: ``cond``, ``switch``, ``scan``, ``fori_loop``,
``while_loop``, ``map`` and ``custom_root`` (tidu.transforms.control; docs/control-flow.md)."""

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

__all__ = ["ReverseModeRefused", "cond", "custom_root", "fori_loop", "map", "scan", "switch", "while_loop"]
