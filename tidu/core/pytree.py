"""Pytrees: nested tuples, lists and dicts (and None) of leaves, as in JAX, and the
classes registered with ``register_pytree_node`` / ``register_dataclass`` (tidu.tree_util).

``flatten(tree)`` gives the leaves in a fixed order (dict keys sorted) and a hashable
``TreeDef``; ``unflatten(treedef, leaves)`` rebuilds the structure. ``leaf_paths``
names every leaf by its path (``['w']``, ``[0]``), for readable input names.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class TreeDef:
    """The structure of a pytree: ``kind`` is leaf, none, tuple, list, dict, odict (an
    ``OrderedDict``: keys in insertion order, as JAX), ddict (a ``defaultdict``: sorted
    keys and its ``default_factory``), namedtuple or node (a registered class); ``meta``
    holds dict keys, ``(default_factory, keys)``, the namedtuple class, or the registered
    class with its auxiliary data."""

    kind: str
    children: tuple[TreeDef, ...] = ()
    meta: Any = None

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    @property
    def num_nodes(self) -> int:
        """Nodes of the tree, leaves and None included (``jax.tree_util``'s count)."""
        return 1 + sum(c.num_nodes for c in self.children)

    def unflatten(self, leaves: Sequence[Any]) -> Any:
        """The pytree of this structure with these leaves (``tree_unflatten(self, leaves)``)."""
        return unflatten(self, list(leaves))

    def __str__(self) -> str:
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        inner = ", ".join(map(str, self.children))
        if self.kind in ("dict", "odict", "ddict"):
            keys = self.meta[1] if self.kind == "ddict" else self.meta
            inner = "{" + ", ".join(f"{k!r}: {c}" for k, c in zip(keys, self.children, strict=True)) + "}"
            return {"dict": inner, "odict": f"OrderedDict({inner})", "ddict": f"defaultdict({inner})"}[self.kind]
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
        found = node[0](tree)
        if not (isinstance(found, tuple | list) and len(found) == 2 and hasattr(found[0], "__iter__")):
            raise TypeError(f"the flatten function registered for {type(tree).__name__} must return (children, "
                            f"aux_data), children a list or tuple; it returned {type(found).__name__}")
        children, aux = found
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
        if type(tree) is OrderedDict:  # insertion order, as JAX
            keys = tuple(tree)
            return "odict", keys, [(f"[{k!r}]", tree[k]) for k in keys]
        try:
            keys = tuple(sorted(tree))
        except TypeError:
            raise TypeError(f"dict keys must be sortable in a pytree, got {list(tree)}") from None
        if type(tree) is defaultdict:
            return "ddict", (tree.default_factory, keys), [(f"[{k!r}]", tree[k]) for k in keys]
        return "dict", keys, [(f"[{k!r}]", tree[k]) for k in keys]
    return None


def dict_keys(tree: dict) -> tuple[Any, ...]:
    """The keys of a dict node in the order of its leaves (sorted; an OrderedDict's in
    insertion order)."""
    found = _children(tree)
    assert found is not None and found[0] in ("dict", "odict", "ddict")
    return found[1][1] if found[0] == "ddict" else found[1]


def flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list[Any], TreeDef]:
    """Leaves in order and the structure. ``is_leaf``, as in JAX: a subtree for which it
    returns true is a leaf (``None`` too)."""
    leaves: list[Any] = []
    if is_leaf is None:
        return leaves, _flatten(tree, leaves)
    return leaves, _flatten_until(tree, leaves, is_leaf)


def _flatten(tree: Any, leaves: list[Any]) -> TreeDef:
    found = _children(tree)
    if found is None:
        leaves.append(tree)
        return LEAF
    kind, meta, items = found
    return TreeDef(kind, tuple(_flatten(c, leaves) for _, c in items), meta)


def _flatten_until(tree: Any, leaves: list[Any], is_leaf: Callable[[Any], bool]) -> TreeDef:
    found = None if is_leaf(tree) else _children(tree)
    if found is None:
        leaves.append(tree)
        return LEAF
    kind, meta, items = found
    return TreeDef(kind, tuple(_flatten_until(c, leaves, is_leaf) for _, c in items), meta)


def flatten_up_to(treedef: TreeDef, tree: Any) -> list[Any]:
    """The subtrees of ``tree`` at the leaves of ``treedef``, a prefix of its structure
    (as JAX's ``tree_map`` reads its further trees); ValueError where they differ."""
    out: list[Any] = []

    def walk(td: TreeDef, node: Any) -> None:
        if td.kind == "leaf":
            out.append(node)
            return
        found = _children(node)
        kind, meta, items = found if found is not None else ("leaf", None, [])
        if kind != td.kind or meta != td.meta or len(items) != len(td.children):
            raise ValueError(f"pytree structures differ: {td} is not a prefix of {flatten(node)[1]}")
        for c, (_, child) in zip(td.children, items, strict=True):
            walk(c, child)

    walk(treedef, tree)
    return out


def unflatten(treedef: TreeDef, leaves: Sequence[Any]) -> Any:
    """Rebuild a pytree of structure ``treedef`` from ``leaves``."""
    if not isinstance(treedef, TreeDef):
        raise TypeError(f"tree_unflatten takes a structure (a TreeDef, from tree_flatten or tree_structure) and "
                        f"then the leaves, got {type(treedef).__name__} first: write tree_unflatten(treedef, leaves)")
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
    if td.kind == "odict":
        return OrderedDict(zip(td.meta, kids, strict=True))
    if td.kind == "ddict":
        return defaultdict(td.meta[0], zip(td.meta[1], kids, strict=True))
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


def tree_map(fn: Callable[..., Any], tree: Any, *rest: Any, is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """Apply ``fn`` leaf by leaf, as JAX's: each of ``rest`` has the structure of ``tree``
    or one it is a prefix of (``fn`` then gets the subtree at each leaf of ``tree``)."""
    leaves, td = flatten(tree, is_leaf)
    others = [flatten_up_to(td, r) for r in rest]
    return unflatten(td, [fn(*xs) for xs in zip(leaves, *others, strict=True)])


__all__ = ["LEAF", "TreeDef", "dict_keys", "flatten", "flatten_up_to", "leaf_paths", "register_node", "tree_map",
           "unflatten"]
