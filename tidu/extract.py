"""Extraction of one DAG from a frozen egglog e-graph, in Python.

egglog's own extractors print terms as trees (exponential on shared DAGs) or recurse per
level, so the best e-node per e-class is chosen here with a Knuth/Dijkstra worklist:
an e-node becomes a candidate once every operand class is settled, and a class is
settled by its cheapest candidate. The cost is ``(size, height)`` where size is a float
tree size (it saturates to inf on deep shared DAGs instead of overflowing) and height
breaks the ties size can no longer see; both strictly grow from operands to result, so
rewrite cycles (``x * 1`` in the class of ``x``) are never chosen. Remaining ties are
broken by the node's label (op name, type, attributes), then by the canonical ids of its
operand classes: the smallest graph id unioned into the class, or, for classes that
rewrites created, the order in which they were settled. So the same input graph always
gives the same output.

The chosen DAG is emitted iteratively (graphs may be 10^5 deep) as a new
``MaterializedGraph``, hash-consed again and with constant operands folded.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .graph import MaterializedGraph, MNode
from .keys import Attrs, Aval, Literal

# Fold only results (and operands) this small: a splat of a huge shape stays a splat.
FOLD_MAX = 1024
FOLD_OPERAND_MAX = 1 << 16

Evaluate = Callable[[str, list[np.ndarray], Attrs], Any]


def _evaluator() -> Evaluate | None:
    try:
        from .semantics import evaluate
    except ImportError:  # reference semantics not available: nothing is folded
        return None
    return evaluate


def fold_node(node: MNode, operands: list[MNode], evaluate: Evaluate | None) -> MNode | None:
    """A ``constant`` node equal to ``node`` when all its operands are small constants."""
    if evaluate is None or not operands or node.aval.size > FOLD_MAX:
        return None
    for o in operands:
        if o.op != "constant" or o.aval.size > FOLD_OPERAND_MAX:
            return None
    args = [o.attrs["value"].array for o in operands]
    with np.errstate(all="ignore"):  # inf/nan results are what run time would give too
        out = evaluate(node.op, args, node.attrs)  # type: ignore[arg-type]
    if isinstance(out, list | tuple):
        out = out[0]
    arr = np.asarray(out)
    if arr.shape != node.aval.shape or arr.dtype.name != node.aval.dtype:
        arr = np.asarray(arr, dtype=node.aval.dtype).reshape(node.aval.shape)
    return MNode("constant", Attrs(value=Literal(arr)), (), node.aval)


@dataclass
class Tables:
    """What ingest encoded as strings and indices, to decode extracted terms."""

    nodes: list[MNode]  # the (pre-folded) input graph's nodes: Inp indexes them
    avals: dict[str, Aval] = field(default_factory=dict)  # type string -> aval
    attr_values: dict[str, Any] = field(default_factory=dict)  # attr code -> value
    literals: list[Literal] = field(default_factory=list)  # Lit index -> literal
    splats: dict[tuple[str, float, float], Literal] = field(default_factory=dict)
    # egglog constructor name -> (primitive name, arity, attribute names)
    constructors: dict[str, tuple[str, int, tuple[str, ...]]] = field(default_factory=dict)


def splat_scalar(aval: Aval, re: float, im: float) -> Any:
    """The scalar of ``aval``'s dtype that ``Const(ty, re, im)`` stands for."""
    if aval.dtype.startswith("complex"):
        return np.array(complex(re, im), dtype=aval.dtype)
    if aval.dtype == "bool":
        return np.array(re != 0.0)
    if aval.dtype.startswith("int"):
        return np.array(int(re), dtype=aval.dtype)
    return np.array(re, dtype=aval.dtype)


class _Emitter:
    """Builds the output graph node by node, hash-consing and folding constants."""

    def __init__(self, tables: Tables, evaluate: Evaluate | None) -> None:
        self.t = tables
        self.evaluate = evaluate
        self.nodes: list[MNode] = []
        self.index: dict[tuple, int] = {}
        self.is_const: list[bool] = []
        self.attrs_cache: dict[tuple, Attrs] = {}

    def add(self, node: MNode, ident: tuple) -> int:
        """The id of ``node``, identified by ``ident`` (cheaper to hash than the node)."""
        i = self.index.get(ident)
        if i is None:
            i = len(self.nodes)
            self.nodes.append(node)
            self.is_const.append(node.op == "constant")
            self.index[ident] = i
        return i

    def constant(self, lit: Literal, aval: Aval) -> int:
        return self.add(MNode("constant", Attrs(value=lit), (), aval), ("C", lit))

    def op(self, label: tuple, kids: list[int]) -> int:
        _, prim, ty, codes, cons = label
        key = (cons, codes)
        attrs = self.attrs_cache.get(key)
        if attrs is None:
            values = (self.t.attr_values[c] for c in codes)
            attrs = Attrs(dict(zip(self.t.constructors[cons][2], values, strict=True)))
            self.attrs_cache[key] = attrs
        node = MNode(prim, attrs, tuple(kids), self.t.avals[ty])
        if self.evaluate is not None and all([self.is_const[k] for k in kids]):
            folded = fold_node(node, [self.nodes[k] for k in kids], self.evaluate)
            if folded is not None:
                return self.constant(folded.attrs["value"], folded.aval)
        return self.add(node, (prim, codes, node.inputs))

    def const(self, ty: str, re: float, im: float) -> int:
        aval = self.t.avals[ty]
        lit = self.t.splats.get((ty, re, im))
        if lit is not None:
            return self.constant(lit, aval)
        scalar = splat_scalar(aval, re, im)
        if aval.size <= FOLD_MAX:
            return self.constant(Literal(np.full(aval.shape, scalar, dtype=aval.dtype)), aval)
        # keep a large splat a splat: a scalar broadcast at run time
        s = self.constant(Literal(scalar), Aval((), aval.dtype))
        attrs = Attrs(shape=aval.shape, dims=())
        return self.add(MNode("broadcast_in_dim", attrs, (s,), aval), ("B", attrs, s))


def extract(
    eg: Any,
    tables: Tables,
    inputs: list[int],
    outputs: list[int],
    evaluate: Evaluate | None,
) -> MaterializedGraph:
    """The best DAG for the output classes (relation ``Out(position, class)``); the input
    nodes (graph ids ``inputs``) are kept, in order, even when unused."""
    funcs = eg.freeze().functions
    strings: dict[Any, str] = {}
    to_str, to_i64, to_f64 = eg.value_to_string, eg.value_to_i64, eg.value_to_f64
    cls: dict[Any, int] = {}  # egglog class Value -> dense class id
    node_cls: list[int] = []
    # ("op", prim, ty, attr codes, constructor) / ("inp", ty, i) / ("const", ty, re, im)
    # / ("lit", ty, i): compared for tie-breaking, so op name first
    node_label: list[tuple] = []
    node_kids: list[tuple[int, ...]] = []
    node_weight: list[float] = []

    def s(v: Any) -> str:
        r = strings.get(v)
        if r is None:
            r = strings[v] = to_str(v)
        return r

    for name, (prim, arity, attr_names) in sorted(tables.constructors.items()):
        fn = funcs.get(name)
        if fn is None or not fn.rows:
            continue
        end = 1 + arity + len(attr_names)
        labels: dict[tuple, tuple] = {}  # share label tuples between equal nodes
        for row in fn.rows:
            if row.subsumed:
                continue
            ins = row.inputs
            node_cls.append(cls.setdefault(row.output, len(cls)))
            node_kids.append(tuple([cls.setdefault(v, len(cls)) for v in ins[1 : 1 + arity]]))
            key = (ins[0], *ins[1 + arity : end])
            lab = labels.get(key)
            if lab is None:
                lab = labels[key] = ("op", prim, s(ins[0]), tuple(map(s, ins[1 + arity : end])), name)
            node_label.append(lab)
        node_weight.extend([1.0] * (len(node_cls) - len(node_weight)))
    input_cls: dict[int, int] = {}
    for name, weight in (("Inp", 0.0), ("Const", 1.0), ("Lit", 1.0)):
        fn = funcs.get(name)
        for row in fn.rows if fn is not None else ():
            ins = row.inputs
            c = cls.setdefault(row.output, len(cls))
            node_cls.append(c)
            node_kids.append(())
            if name == "Const":
                node_label.append(("const", s(ins[0]), to_f64(ins[1]), to_f64(ins[2])))
            else:
                node_label.append((name.lower(), s(ins[0]), to_i64(ins[1])))
                if name == "Inp":
                    input_cls[node_label[-1][2]] = c
            node_weight.append(weight)
    out_cls = {to_i64(r.inputs[0]): cls[r.inputs[1]] for r in funcs["Out"].rows}

    best = _choose(len(cls), node_cls, node_label, node_kids, node_weight)

    em = _Emitter(tables, evaluate)
    new_of: dict[int, int] = {}
    new_inputs = []
    for i in inputs:
        j = em.add(tables.nodes[i], ("I", i))
        new_inputs.append(j)
        if i in input_cls:
            new_of.setdefault(input_cls[i], j)
    new_outputs = []
    for pos in range(len(outputs)):
        root = out_cls[pos]
        stack = [root]
        while stack:  # iterative post-order over the chosen nodes
            c = stack[-1]
            if c in new_of:
                stack.pop()
                continue
            k = best[c]
            if k < 0:
                raise RuntimeError(f"output {pos}: its e-class has no finite extraction")
            kids = node_kids[k]
            todo = [kid for kid in kids if kid not in new_of]
            if todo:
                stack.extend(reversed(todo))
                continue
            stack.pop()
            lab = node_label[k]
            kind = lab[0]
            if kind == "op":
                new_of[c] = em.op(lab, [new_of[kid] for kid in kids])
            elif kind == "inp":
                new_of[c] = em.add(tables.nodes[lab[2]], ("I", lab[2]))
            elif kind == "const":
                new_of[c] = em.const(lab[1], lab[2], lab[3])
            else:
                lit = tables.literals[lab[2]]
                new_of[c] = em.constant(lit, tables.avals[lab[1]])
        new_outputs.append(new_of[root])
    return MaterializedGraph(em.nodes, new_inputs, new_outputs)


def _choose(
    n_cls: int,
    node_cls: list[int],
    node_label: list[tuple],
    node_kids: list[tuple[int, ...]],
    node_weight: list[float],
) -> list[int]:
    """Best e-node per class (-1 if none is finite), by (size, height, label, operands).

    A class with a single e-node has no choice: it is settled as soon as its operands
    are (a plain stack). Only classes with alternatives go through the priority queue;
    settling forced classes early only makes candidates ready sooner, and any
    candidate that becomes ready later costs more than what the queue pops now, so the
    choice is the one Knuth's algorithm makes.
    """
    n = len(node_cls)
    parents: list[list[int]] = [[] for _ in range(n_cls)]
    count = [0] * n_cls
    pending = [0] * n
    for k in range(n):
        count[node_cls[k]] += 1
        kids = node_kids[k]
        if len(kids) > 1:
            kids = set(kids)
        pending[k] = len(kids)
        for c in kids:
            parents[c].append(k)
    best = [-1] * n_cls
    size = [0.0] * n_cls
    height = [0] * n_cls
    canon = [0] * n_cls  # settle order: canonical operand ids for tie-breaking
    forced: list[tuple[int, float, int]] = []
    heap: list[tuple] = []
    for k in range(n):
        if pending[k] == 0:
            if count[node_cls[k]] == 1:
                forced.append((k, node_weight[k], 0))
            else:
                heap.append((node_weight[k], 0, node_label[k], (), k))
    forced.reverse()
    heapq.heapify(heap)
    pop, push = heapq.heappop, heapq.heappush
    settled = 0
    while True:
        if forced:
            k, cost, h = forced.pop()
        elif heap:
            cost, h, _, _, k = pop(heap)
            if best[node_cls[k]] >= 0:
                continue
        else:
            break
        c = node_cls[k]
        best[c], size[c], height[c], canon[c] = k, cost, h, settled
        settled += 1
        for p in parents[c]:
            pending[p] -= 1
            if pending[p] == 0:
                pc = node_cls[p]
                if best[pc] >= 0:
                    continue
                kids = node_kids[p]
                if len(kids) == 1:
                    cost, h = node_weight[p] + size[c], height[c] + 1
                else:
                    distinct = set(kids)
                    cost = node_weight[p] + sum([size[x] for x in distinct])
                    h = 1 + max([height[x] for x in distinct])
                if count[pc] == 1:
                    forced.append((p, cost, h))
                else:
                    push(heap, (cost, h, node_label[p], tuple([canon[x] for x in kids]), p))
    return best


__all__ = ["FOLD_MAX", "Tables", "extract", "fold_node"]
