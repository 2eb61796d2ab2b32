"""Pytree utilities, as ``jax.tree_util``: registering your own classes and dataclasses
as pytree nodes, so transforms take and return them, and mapping over pytrees."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

from tidu.core.pytree import TreeDef, flatten, register_node, tree_map, unflatten


def register_pytree_node(nodetype: type, flatten_func: Callable[[Any], tuple[Sequence[Any], Any]],
                         unflatten_func: Callable[[Any, Sequence[Any]], Any]) -> None:
    """Make ``nodetype`` a pytree node: ``flatten_func(obj) -> (children, aux_data)`` and
    ``unflatten_func(aux_data, children) -> obj``; ``aux_data`` (static, not traced) must
    be hashable."""
    register_node(nodetype, flatten_func, lambda aux, kids: unflatten_func(aux, list(kids)))


def register_dataclass[T: type](nodetype: T, data_fields: Sequence[str] | None = None,
                       meta_fields: Sequence[str] | None = None) -> T:
    """Make the dataclass ``nodetype`` a pytree node: ``data_fields`` are its children
    (by default every field not in ``meta_fields``), ``meta_fields`` static data
    (hashable). Returns the class, so it also works as a decorator."""
    if not dataclasses.is_dataclass(nodetype):
        raise TypeError(f"register_dataclass takes a dataclass, got {nodetype!r}")
    names = [f.name for f in dataclasses.fields(nodetype)]
    meta = tuple(meta_fields or ())
    data = tuple(data_fields) if data_fields is not None else tuple(n for n in names if n not in meta)
    unknown = [n for n in (*data, *meta) if n not in names]
    if unknown:
        raise ValueError(f"register_dataclass: {nodetype.__name__} has no field(s) {', '.join(unknown)}")
    missing = [n for n in names if n not in data and n not in meta]
    if missing:
        raise ValueError(f"register_dataclass: field(s) {', '.join(missing)} of {nodetype.__name__} are "
                         "neither data_fields nor meta_fields")

    def flatten_fn(obj: Any) -> tuple[list[Any], tuple]:
        return [getattr(obj, n) for n in data], tuple(getattr(obj, n) for n in meta)

    def unflatten_fn(aux: tuple, kids: Sequence[Any]) -> Any:
        return nodetype(**dict(zip(data, kids, strict=True)), **dict(zip(meta, aux, strict=True)))

    register_node(nodetype, flatten_fn, unflatten_fn, data)
    return nodetype


IsLeaf = Callable[[Any], bool] | None


def tree_flatten(tree: Any, is_leaf: IsLeaf = None) -> tuple[list[Any], TreeDef]:
    """The leaves of ``tree`` in order, and its structure (``is_leaf``: subtrees to take
    as leaves, as in JAX)."""
    return flatten(tree, is_leaf)


def tree_unflatten(treedef: TreeDef, leaves: Sequence[Any]) -> Any:
    """The pytree of structure ``treedef`` with these leaves."""
    if not isinstance(treedef, TreeDef):  # (before list(leaves): swapped arguments, a TreeDef there)
        return unflatten(treedef, leaves)  # the error that says how to call it
    return unflatten(treedef, list(leaves))


def tree_leaves(tree: Any, is_leaf: IsLeaf = None) -> list[Any]:
    """The leaves of ``tree`` in order."""
    return flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: IsLeaf = None) -> TreeDef:
    """The structure of ``tree``."""
    return flatten(tree, is_leaf)[1]


_NO_INITIAL = object()


def tree_reduce(function: Callable[[Any, Any], Any], tree: Any, initializer: Any = _NO_INITIAL,
                is_leaf: IsLeaf = None) -> Any:
    """``functools.reduce`` over the leaves of ``tree``, as ``jax.tree_util.tree_reduce``."""
    leaves = flatten(tree, is_leaf)[0]
    if initializer is _NO_INITIAL:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_all(tree: Any, *, is_leaf: IsLeaf = None) -> bool:
    """Whether every leaf of ``tree`` is true, as ``jax.tree_util.tree_all``."""
    return all(flatten(tree, is_leaf)[0])


__all__ = ["register_dataclass", "register_pytree_node", "tree_all", "tree_flatten", "tree_leaves", "tree_map",
           "tree_reduce", "tree_structure", "tree_unflatten"]
