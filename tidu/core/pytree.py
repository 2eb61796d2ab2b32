"""Pytrees: nested tuples, lists and dicts (and None) of leaves, as in JAX, and the
classes registered with ``register_pytree_node`` / ``register_dataclass`` (tidu.tree_util).

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
    """The structure of a pytree: ``kind`` is leaf, none, tuple, list, dict, namedtuple
    or node (a registered class); ``meta`` holds dict keys, the namedtuple class, or the
    registered class with its auxiliary data."""

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
        if self.kind == "node":
            return f"{self.meta[0].__name__}({inner})"
        return "(" + inner + ("," if len(self.children) == 1 else "") + ")"


LEAF = TreeDef("leaf")

# registered classes: class -> (flatten: obj -> (children, aux), unflatten: (aux, children) -> obj, names)
_NODES: dict[type, tuple[Callable[[Any], tuple[Sequence[Any], Any]], Callable[[Any, Sequence[Any]], Any],
                         tuple[str, ...] | None]] = {}


def register_node(cls: type, flatten_fn: Callable[[Any], tuple[Sequence[Any], Any]],
                  unflatten_fn: Callable[[Any, Sequence[Any]], Any], names: Sequence[str] | None = None) -> None:
    """Make instances of ``cls`` pytree nodes (``names``: the children's names, for paths)."""
    if not isinstance(cls, type):
        raise TypeError(f"register_pytree_node takes a class, got {cls!r}")
    if cls in (tuple, list, dict, type(None)):
        raise ValueError(f"{cls.__name__} is a pytree node already")
    _NODES[cls] = (flatten_fn, unflatten_fn, tuple(names) if names is not None else None)


def _children(tree: Any) -> tuple[str, Any, list[tuple[str, Any]]] | None:
    """(kind, meta, [(path step, child)]) for a container, None for a leaf."""
    if tree is None:
        return "none", None, []
    node = _NODES.get(type(tree))
    if node is not None:
        children, aux = node[0](tree)
        children = list(children)
        try:
            hash(aux)
        except TypeError:
            raise TypeError(f"the auxiliary data of a {type(tree).__name__} pytree node must be hashable, "
                            f"got {type(aux).__name__}") from None
        names = node[2] or [f"[{i}]" for i in range(len(children))]
        steps = [f".{n}" if node[2] else n for n in names]
        return "node", (type(tree), aux), list(zip(steps, children, strict=True))
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
    if td.kind == "node":
        cls, aux = td.meta
        return _NODES[cls][1](aux, kids)
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


__all__ = ["LEAF", "TreeDef", "flatten", "leaf_paths", "register_node", "tree_map", "unflatten"]
