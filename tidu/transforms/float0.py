"""float0 values in transforms: the tangents and cotangents of integer and boolean values.

A float0 array has a shape and no values, so it is never traced: it stays a NumPy
array. Where a pytree of a transform's results or arguments holds one, ``hide`` makes it
part of the structure (a childless ``Float0`` node that rebuilds the array when the tree
is unflattened), so programs neither take nor give it and the trace cache keys on its
shape.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tidu.core.keys import is_inexact
from tidu.core.pytree import TreeDef, flatten, register_node, unflatten
from tidu.dtypes import float0, is_float0


class Float0:
    """A float0 array's place in a pytree's structure (its shape); unflattened, the array."""

    __slots__ = ("shape",)

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape


register_node(Float0, lambda z: ((), z.shape), lambda shape, _: zeros(shape))


def zeros(shape: tuple[int, ...]) -> np.ndarray:
    """The float0 array of ``shape``."""
    return np.zeros(shape, float0)


def hide(tree: Any) -> Any:
    """``tree`` with its float0 array leaves made ``Float0`` nodes (itself when it has none)."""
    leaves, td = flatten(tree)
    if not any(is_float0(x) for x in leaves):
        return tree
    return unflatten(td, [Float0(tuple(np.shape(x))) if is_float0(x) else x for x in leaves])


def _has_nodes(td: TreeDef) -> bool:
    return (td.kind == "node" and td.meta[0] is Float0) or any(_has_nodes(c) for c in td.children)


def cotangent_leaves(what: str, ct: Any, out_tree: TreeDef) -> list[Any]:
    """The leaves of the cotangent ``ct`` of outputs of structure ``out_tree``, without
    those where the outputs were float0 arrays (``Float0`` nodes of ``out_tree``: their
    cotangents are float0 arrays of the same shape, not read); ValueError where the
    structures differ, or a shape."""
    leaves, td = flatten(ct)
    if td == out_tree:
        return leaves
    if _has_nodes(out_tree):
        mark = object()
        expanded = flatten(unflatten(out_tree, [mark] * out_tree.num_leaves))[0]
        if flatten(unflatten(out_tree, [0] * out_tree.num_leaves))[1] == td:
            kept = []
            for leaf, want in zip(leaves, expanded, strict=True):
                if want is mark:
                    kept.append(leaf)
                elif tuple(np.shape(leaf)) != want.shape:  # (not read: any dtype, as JAX)
                    raise ValueError(f"{what}: the cotangent of a float0 output of shape {want.shape} has shape "
                                     f"{np.shape(leaf)}; pass np.zeros({want.shape}, tidu.dtypes.float0)")
            return kept
    raise ValueError(f"{what}: cotangent structure {td} does not match the output structure {out_tree}")


def has_tangents(dtype: Any) -> bool:
    """Whether values of ``dtype`` have tangents of their own dtype (float and complex);
    integers and booleans have float0 ones."""
    return is_inexact(str(dtype))


def check_float0_tangent(what: str, where: str, tangent: Any, dtype: Any, shape: tuple[int, ...]) -> bool:
    """Check ``tangent`` against its primal's ``dtype`` and ``shape`` (JAX's rule: float0
    for integer and boolean primals, never for others); True when it is a float0 one
    (which no program reads)."""
    integer = not has_tangents(dtype)
    if is_float0(tangent) != integer:
        got = "float0" if is_float0(tangent) else str(getattr(tangent, "dtype", type(tangent).__name__))
        fix = (f"pass np.zeros({shape}, tidu.dtypes.float0)" if integer else
               f"pass a {dtype} value (float0 tangents are for integer and boolean primals)")
        raise TypeError(f"{what}: {where} has dtype {got}, its primal has dtype {dtype}, whose tangent must be "
                        f"{'float0' if integer else dtype}; {fix}")
    if not integer and _dtype_kind(tangent) in "iub":  # as JAX: a float primal's tangent is never an integer
        got = str(getattr(tangent, "dtype", "")) or f"a Python {type(tangent).__name__}"
        raise TypeError(f"{what}: {where} is {got}, its primal has dtype {dtype}, whose tangent must be "
                        f"{dtype} too; pass a {dtype} value (1.0, not 1)")
    if integer and tuple(np.shape(tangent)) != tuple(shape):
        raise ValueError(f"{what}: {where} has shape {np.shape(tangent)}, its primal has {tuple(shape)}")
    return integer


def _dtype_kind(value: Any) -> str:
    """The NumPy dtype kind of a tangent (an array, a tracer or a Python number)."""
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        if isinstance(value, bool | int | float | complex):
            return "b" if isinstance(value, bool) else np.result_type(value).kind
        return "?"
    try:
        return np.dtype(str(dtype)).kind
    except TypeError:
        return "?"


__all__ = ["Float0", "check_float0_tangent", "cotangent_leaves", "has_tangents", "hide", "zeros"]
