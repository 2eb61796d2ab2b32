"""A frozen e-graph as plain Python data: e-classes, e-nodes, and the keys that name them.

egglog can only be told about an e-class through a term in it, so every class a Python
pass wants to refer to needs a key: ``(Key i)`` is in the class. Loaded nodes have
their graph id as key; ``KeyRing`` hands out fresh ids for new terms and gives a class
without a key one, by writing one of its e-nodes as a term row (the e-node exists
already, so loading the row only attaches the key).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tidu.simplify.egraph.extract import Tables


@dataclass(slots=True)
class ENode:
    kind: str  # "op", "inp", "const" or "lit"
    prim: str | None  # the primitive of an op
    cons: str | None  # its egglog constructor
    ty: str
    kids: tuple[int, ...]  # operand classes
    attrs: tuple[str, ...]  # attribute codes of an op
    value: Any  # (re, im) of a const, the index of an inp or lit


class FrozenGraph:
    """Classes are dense ids; ``nodes[k]`` lives in class ``cls_of[k]``."""

    def __init__(self, eg: Any, tables: Tables) -> None:
        funcs = eg.freeze().functions
        strings: dict[Any, str] = {}

        def s(v: Any) -> str:
            r = strings.get(v)
            if r is None:
                r = strings[v] = eg.value_to_string(v)
            return r

        cls: dict[Any, int] = {}
        self.nodes: list[ENode] = []
        self.cls_of: list[int] = []
        setdefault = cls.setdefault
        for name, (prim, arity, attrs) in sorted(tables.constructors.items()):
            fn = funcs.get(name)
            for row in fn.rows if fn is not None else ():
                ins = row.inputs
                kids = tuple([setdefault(v, len(cls)) for v in ins[1 : 1 + arity]])
                codes = tuple([s(v) for v in ins[1 + arity : 1 + arity + len(attrs)]]) if attrs else ()
                self.nodes.append(ENode("op", prim, name, s(ins[0]), kids, codes, None))
                self.cls_of.append(setdefault(row.output, len(cls)))
        to_f64, to_i64 = eg.value_to_f64, eg.value_to_i64
        for name in ("Inp", "Const", "Lit"):
            fn = funcs.get(name)
            for row in fn.rows if fn is not None else ():
                ins = row.inputs
                if name == "Const":
                    value: Any = (to_f64(ins[1]), to_f64(ins[2]))
                else:
                    value = to_i64(ins[1])
                self.nodes.append(ENode(name.lower(), None, None, s(ins[0]), (), (), value))
                self.cls_of.append(setdefault(row.output, len(cls)))
        self.n_classes = len(cls)
        self.key_of: dict[int, int] = {}  # class -> a key in it (the smallest)
        for row in funcs["Key"].rows:
            c = cls.get(row.output)
            if c is not None:
                k = to_i64(row.inputs[0])
                if k < self.key_of.get(c, k + 1):
                    self.key_of[c] = k
        self.out_cls = {to_i64(r.inputs[0]): cls[r.inputs[1]] for r in funcs["Out"].rows}
        self.members: list[list[int]] = [[] for _ in range(self.n_classes)]
        for k, c in enumerate(self.cls_of):
            self.members[c].append(k)

    def settle_order(self) -> tuple[list[int], list[int]]:
        """A bottom-up order of the classes (Kahn's algorithm over e-nodes, in row order)
        and, per class, the e-node that settled it: the first whose operands were all
        settled. Self-loops (``x * 1`` in the class of ``x``) never settle a class."""
        n = len(self.nodes)
        pending = [0] * n
        users: list[list[int]] = [[] for _ in range(self.n_classes)]
        ready: list[int] = []
        for k, node in enumerate(self.nodes):
            kids = set(node.kids)
            if self.cls_of[k] in kids:
                pending[k] = -1
                continue
            pending[k] = len(kids)
            for c in kids:
                users[c].append(k)
            if not kids:
                ready.append(k)
        settled_by = [-1] * self.n_classes
        order: list[int] = []
        i = 0
        while i < len(ready):
            k = ready[i]
            i += 1
            c = self.cls_of[k]
            if settled_by[c] >= 0:
                continue
            settled_by[c] = k
            order.append(c)
            for u in users[c]:
                pending[u] -= 1
                if pending[u] == 0:
                    ready.append(u)
        return order, settled_by


class KeyRing:
    """Fresh key ids and term rows for a load round (``rows`` as in ``Ingest``)."""

    def __init__(self, first_free: int) -> None:
        self.next = first_free
        self.written: set[tuple] = set()  # what earlier rounds wrote (normalize)
        self.rows: dict[str, list[str]] = {}
        self.schema: dict[str, tuple[list[str], str]] = {}

    def fresh(self) -> int:
        k = self.next
        self.next += 1
        return k

    def add_rows(self, rel: str, sorts: list[str], action: str) -> list[str]:
        rows = self.rows.get(rel)
        if rows is None:
            rows = self.rows[rel] = []
            self.schema[rel] = (sorts, action)
        return rows

    def reset(self) -> None:
        self.rows, self.schema = {}, {}


__all__ = ["ENode", "FrozenGraph", "KeyRing"]
