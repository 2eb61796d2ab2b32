"""Pytrees: nested tuples, lists and dicts (and None) of leaves, as in JAX.

``flatten(tree)`` gives the leaves in a fixed order (dict keys sorted) and a hashable
``TreeDef``; ``unflatten(treedef, leaves)`` rebuilds the structure. ``leaf_paths``
names every leaf by its path (``['w']``, ``[0]``), for readable input names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class TreeDef:
    """The structure of a pytree: ``kind`` is leaf, none, tuple, list, dict or
    namedtuple; ``meta`` holds dict keys or the namedtuple class."""

    kind: str
    children: tuple[TreeDef, ...] = ()
    meta: Any = None

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    def __str__(self) -> str:
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        inner = ", ".join(map(str, self.children))
        if self.kind == "dict":
            inner = ", ".join(f"{k!r}: {c}" for k, c in zip(self.meta, self.children, strict=True))
            return "{" + inner + "}"
        if self.kind == "list":
            return "[" + inner + "]"
        if self.kind == "namedtuple":
            return f"{self.meta.__name__}({inner})"
        return "(" + inner + ("," if len(self.children) == 1 else "") + ")"


LEAF = TreeDef("leaf")


def _children(tree: Any) -> tuple[str, Any, list[tuple[str, Any]]] | None:
    """(kind, meta, [(path step, child)]) for a container, None for a leaf."""
    if tree is None:
        return "none", None, []
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return "namedtuple", type(tree), [(f".{f}", getattr(tree, f)) for f in tree._fields]
    if isinstance(tree, tuple):
        return "tuple", None, [(f"[{i}]", c) for i, c in enumerate(tree)]
    if isinstance(tree, list):
        return "list", None, [(f"[{i}]", c) for i, c in enumerate(tree)]
    if isinstance(tree, dict):
        try:
            keys = tuple(sorted(tree))
        except TypeError:
            raise TypeError(f"dict keys must be sortable in a pytree, got {list(tree)}") from None
        return "dict", keys, [(f"[{k!r}]", tree[k]) for k in keys]
    return None


def flatten(tree: Any) -> tuple[list[Any], TreeDef]:
    """Leaves in order and the structure."""
    leaves: list[Any] = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree: Any, leaves: list[Any]) -> TreeDef:
    found = _children(tree)
    if found is None:
        leaves.append(tree)
        return LEAF
    kind, meta, items = found
    return TreeDef(kind, tuple(_flatten(c, leaves) for _, c in items), meta)


def unflatten(treedef: TreeDef, leaves: Sequence[Any]) -> Any:
    """Rebuild a pytree of structure ``treedef`` from ``leaves``."""
    if len(leaves) != treedef.num_leaves:
        raise ValueError(f"structure {treedef} has {treedef.num_leaves} leaves, got {len(leaves)}")
    it = iter(leaves)
    return _unflatten(treedef, it)


def _unflatten(td: TreeDef, it: Iterator[Any]) -> Any:
    if td.kind == "leaf":
        return next(it)
    if td.kind == "none":
        return None
    kids = [_unflatten(c, it) for c in td.children]
    if td.kind == "tuple":
        return tuple(kids)
    if td.kind == "list":
        return kids
    if td.kind == "dict":
        return dict(zip(td.meta, kids, strict=True))
    return td.meta(*kids)


def leaf_paths(tree: Any) -> list[str]:
    """The path of every leaf, in ``flatten`` order ("" for a bare leaf)."""
    out: list[str] = []
    stack: list[tuple[str, Any]] = [("", tree)]
    while stack:
        path, node = stack.pop()
        found = _children(node)
        if found is None:
            out.append(path)
            continue
        stack.extend((path + step, c) for step, c in reversed(found[2]))
    return out


def tree_map(fn: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """Apply ``fn`` leaf by leaf; ``rest`` must have the same structure as ``tree``."""
    leaves, td = flatten(tree)
    others = []
    for r in rest:
        lv, td2 = flatten(r)
        if td2 != td:
            raise ValueError(f"pytree structures differ: {td} and {td2}")
        others.append(lv)
    return unflatten(td, [fn(*xs) for xs in zip(leaves, *others, strict=True)])


__all__ = ["LEAF", "TreeDef", "flatten", "leaf_paths", "tree_map", "unflatten"]
