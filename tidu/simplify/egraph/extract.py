"""Extraction of one DAG from a frozen egglog e-graph, in Python.

egglog's own extractors print terms as trees (exponential on shared DAGs) or recurse per
level, so the e-node per e-class is chosen here. Up to ``DAG_MAX_CLASSES`` classes,
``choose_dag`` minimizes the DAG cost greedily from each class's first derivation.
Past that, a Knuth/Dijkstra worklist (``_choose``) takes tree costs, refined by local
moves (``dagrefine``): an e-node becomes a candidate once every operand class is
settled, and a class is settled by its cheapest candidate. The cost is ``(size,
height)`` where size is a float tree size (it saturates to inf on deep shared DAGs instead of overflowing) and height
breaks the ties size can no longer see; both strictly grow from operands to result, so
rewrite cycles (``x * 1`` in the class of ``x``) are never chosen. Remaining ties are
broken by the node's label (op name, type, attribute codes), then by the ids of its
operand classes in the order classes were settled. Nothing depends on hashing or memory
addresses, and egglog runs single-threaded on facts loaded in graph order, so the same
input graph always gives the same output listing.

The chosen DAG is emitted iteratively (graphs may be 10^5 deep) as a new
``MaterializedGraph``, hash-consed again and with constant operands folded.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import attrgetter, contains, itemgetter, not_
from typing import Any

import numpy as np

from tidu.core.graph import MaterializedGraph, MNode
from tidu.core.keys import NO_ATTRS, Attrs, Aval, Literal
from tidu.ops.catalog import INTERNAL
from tidu.ops.control import CONTROL_OPS
from tidu.simplify.egraph.dagrefine import refine_dag, several_enodes

# Sharing-aware refinement runs on e-graphs up to this many e-nodes: it shrinks
# higher-order derivative graphs by several percent, but at 10^5 e-nodes it would cost
# ~0.5-0.9 s for nothing on the graphs measured (bench/materialize.py).
REFINE_MAX_NODES = 30_000

# Up to this many e-classes, extraction minimizes DAG cost directly (sets of classes as
# bitsets); past it, tree costs refined by local moves (dagrefine).
DAG_MAX_CLASSES = 6_000

# Fold only results (and operands) this small: a splat of a huge shape stays a splat.
FOLD_MAX = 1024
FOLD_OPERAND_MAX = 1 << 16

Evaluate = Callable[[str, list[np.ndarray], Attrs], Any]




def fold_node(node: MNode, operands: list[MNode], evaluate: Evaluate | None) -> MNode | None:
    """A ``constant`` node equal to ``node`` when all its operands are small constants."""
    if evaluate is None or not operands or node.aval.size > FOLD_MAX or node.op in CONTROL_OPS \
            or node.op in INTERNAL:
        return None  # (a loop is not run at build time: it may be long; a body's marks stay)
    for o in operands:
        if o.op != "constant" or o.aval.size > FOLD_OPERAND_MAX:
            return None
    args = [o.attrs["value"].array for o in operands]
    try:
        with np.errstate(all="ignore"):  # inf/nan results are what run time gives too
            out = evaluate(node.op, args, node.attrs)  # type: ignore[arg-type]
    except (ArithmeticError, ValueError):  # left to run time, which reports it there
        return None
    arr = np.asarray(out)
    if arr.shape != node.aval.shape or arr.dtype.name != node.aval.dtype:
        arr = np.asarray(arr, dtype=node.aval.dtype).reshape(node.aval.shape)
    return MNode("constant", Attrs(value=Literal(arr)), (), node.aval)


@dataclass
class Tables:
    """What ingest encoded as strings and indices, to decode extracted terms."""

    nodes: list[MNode]  # the loaded graph's nodes (after folding): Inp names them by index
    # sign bits assumed of input nodes (by graph id): tidu.simplify.egraph.signs, from ``assume``
    input_signs: dict[int, int] = field(default_factory=dict)
    avals: dict[str, Aval] = field(default_factory=dict)  # type string -> aval
    attr_values: dict[str, Any] = field(default_factory=dict)  # attr code -> value
    literals: list[MNode] = field(default_factory=list)  # Lit index -> constant node
    # (type, re, im) of a loaded splat -> its constant node (reused as is)
    splats: dict[tuple[str, float, float], MNode] = field(default_factory=dict)
    # egglog constructor name -> (primitive name, arity, attribute names)
    constructors: dict[str, tuple[str, int, tuple[str, ...]]] = field(default_factory=dict)


def splat_scalar(aval: Aval, re: float, im: float) -> Any:
    """The scalar of ``aval``'s dtype that ``Const(ty, re, im)`` stands for."""
    if aval.dtype.startswith("complex"):
        return np.array(complex(re, im), dtype=aval.dtype)
    if aval.dtype == "bool":
        return np.array(re != 0.0)
    if aval.dtype.startswith(("int", "uint")):
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
        self.folded = False  # folding at emission can leave dead operand constants
        self.fold_s = 0.0
        # whether two classes were given one node (equal leaves): only then can two
        # classes' ops have equal operands, so only then must ops be hash-consed
        self.merged = False

    def add(self, node: MNode, ident: tuple) -> int:
        """The id of ``node``, identified by ``ident`` (cheaper to hash than the node)."""
        i = self.index.get(ident)
        if i is None:
            i = len(self.nodes)
            self.nodes.append(node)
            self.is_const.append(node.op == "constant")
            self.index[ident] = i
        else:
            self.merged = True
        return i

    def constant(self, lit: Literal, aval: Aval) -> int:
        return self.add(MNode("constant", Attrs(value=lit), (), aval), ("C", lit))

    def loaded_constant(self, node: MNode) -> int:
        """A constant node of the loaded graph, reused as is."""
        return self.add(node, ("C", node.attrs["value"]))

    def op(self, label: tuple, kids: tuple[int, ...]) -> int:
        """The node of an op label over emitted operands (called once per emitted op)."""
        prim = label[1]
        ident = (prim, label[3], kids)
        i = self.index.get(ident)
        if i is not None:  # not folded before, so not now either: same operands
            self.merged = True
            return i
        node = MNode(prim, label[5], kids, _aval(label))
        if self.evaluate is not None and kids:
            is_const = self.is_const
            if all([is_const[k] for k in kids]):
                t0 = time.perf_counter()
                folded = fold_node(node, [self.nodes[k] for k in kids], self.evaluate)
                self.fold_s += time.perf_counter() - t0
                if folded is not None:
                    self.folded = True
                    return self.constant(folded.attrs["value"], folded.aval)
        i = self.index[ident] = len(self.nodes)
        self.nodes.append(node)
        self.is_const.append(prim == "constant")
        return i

    def const(self, ty: str, re: float, im: float) -> int:
        aval = self.t.avals[ty]
        node = self.t.splats.get((ty, re, im))
        if node is not None:
            return self.loaded_constant(node)
        scalar = splat_scalar(aval, re, im)
        if aval.size <= FOLD_MAX:
            return self.constant(Literal.filled(scalar, aval.shape, aval.dtype), aval)
        # keep a large splat a splat: a scalar broadcast at run time
        s = self.constant(Literal(scalar), Aval((), aval.dtype))
        attrs = Attrs(shape=aval.shape, dims=())
        return self.add(MNode("broadcast_in_dim", attrs, (s,), aval), ("B", attrs, s))

    def graph(self, inputs: list[int], outputs: list[int]) -> MaterializedGraph:
        """The emitted graph, without the operand nodes that only folded ops used."""
        stats = {"fold_s": self.fold_s, "folded": self.folded}
        if not self.folded:
            return MaterializedGraph(self.nodes, inputs, outputs, stats)
        live = bytearray(len(self.nodes))
        for i in inputs + outputs:
            live[i] = 1
        for i in range(len(self.nodes) - 1, -1, -1):  # operands come before their users
            if live[i]:
                for j in self.nodes[i].inputs:
                    live[j] = 1
        new: list[int] = [-1] * len(self.nodes)
        nodes: list[MNode] = []
        for i, n in enumerate(self.nodes):
            if live[i]:
                new[i] = len(nodes)
                if n.inputs:
                    n = MNode(n.op, n.attrs, tuple(new[j] for j in n.inputs), n.aval, n.input)
                nodes.append(n)
        return MaterializedGraph(nodes, [new[i] for i in inputs], [new[o] for o in outputs], stats)


class _Nodes:
    """The e-nodes of a frozen e-graph as parallel arrays over dense ids: class, operand
    classes, weight and label of each. Rows are read a relation at a time with C-level
    maps (``row.inputs`` makes a new list per call: it is read once per row)."""

    def __init__(self, eg: Any, tables: Tables) -> None:
        self.eg = eg
        self.tables = tables
        funcs = eg.freeze().functions
        self.strings: dict[Any, str] = {}
        # egglog class Value -> dense class id, in order of first sight (a row's class
        # before its operands'): the ids, and so the ties of the choice, follow row order
        cls: dict[Any, int] = {}
        self.cls = cls
        setdefault = cls.setdefault
        node_cls: list[int] = []
        kids: list[tuple[int, ...]] = []
        labels: list[tuple] = []
        self.input_cls: dict[int, int] = {}
        for name, (prim, arity, attrs) in sorted(tables.constructors.items()):
            fn = funcs.get(name)
            rows = fn.rows if fn is not None else ()  # no rule subsumes: every row counts
            if not rows:
                continue
            ins = list(map(_INPUTS, rows))
            # the hot loop of extraction: one per arity. A row's class gets its dense
            # id before its operands' (ids in order of first sight).
            if arity == 2:
                ids = [(setdefault(out, len(cls)), (setdefault(i[1], len(cls)), setdefault(i[2], len(cls))))
                       for out, i in zip(map(_OUTPUT, rows), ins, strict=True)]
                node_cls += map(_AT0, ids)
                kids += map(_AT1, ids)
            elif arity == 1:
                ids = [(setdefault(out, len(cls)), (setdefault(i[1], len(cls)),))
                       for out, i in zip(map(_OUTPUT, rows), ins, strict=True)]
                node_cls += map(_AT0, ids)
                kids += map(_AT1, ids)
            else:
                for out, i in zip(map(_OUTPUT, rows), ins, strict=True):
                    node_cls.append(setdefault(out, len(cls)))
                    kids.append(tuple([setdefault(v, len(cls)) for v in i[1 : 1 + arity]]))
            # labels, one per (type, attribute values): most rows share theirs with many
            if attrs:
                at_labels = _AttrLabels(self, prim, name)
                labels += map(at_labels.__getitem__, map(itemgetter(0, *range(1 + arity, 1 + arity + len(attrs))), ins))
            else:
                types = list(map(_AT0, ins))
                if types.count(types[0]) == len(types):  # the common case: one type (== is cheaper than hash)
                    labels += [self.op_label(prim, name, types[0])] * len(types)
                else:
                    labels += [self.op_label(prim, name, ty) for ty in types]
        self.weight = [1.0] * len(node_cls)
        to_i64, to_f64 = eg.value_to_i64, eg.value_to_f64
        for name, weight in (("Inp", 0.0), ("Const", 1.0), ("Lit", 1.0)):
            fn = funcs.get(name)
            for row in fn.rows if fn is not None else ():
                ins = row.inputs
                c = setdefault(row.output, len(cls))
                if name == "Const":
                    lab = ("const", self.s(ins[0]), to_f64(ins[1]), to_f64(ins[2]))
                else:
                    lab = (name.lower(), self.s(ins[0]), to_i64(ins[1]))
                    if name == "Inp":
                        self.input_cls[lab[2]] = c
                labels.append(lab)
                node_cls.append(c)
                kids.append(())
                self.weight.append(weight)
        self.node_cls, self.kids, self.labels = node_cls, kids, labels
        self.out_cls = {to_i64(r.inputs[0]): self.cls[r.inputs[1]] for r in funcs["Out"].rows}

    def s(self, v: Any) -> str:
        r = self.strings.get(v)
        if r is None:
            r = self.strings[v] = self.eg.value_to_string(v)
        return r

    def op_label(self, prim: str, name: str, ty: Any) -> tuple:
        """The label of an e-node of constructor ``name`` (no attributes) and type
        Value ``ty``: made once per process for each (constructor, type string) (an
        aval is a value; a type string of an e-node is one the build wrote)."""
        key = (name, self.s(ty))
        lab = _OP_LABELS.get(key)
        if lab is None:
            lab = _TypeLabels(self, prim, name).label(key[1], ())
            if lab[6] is not None:  # decodable: the same in every build
                if len(_OP_LABELS) >= 512:  # a build meets few types: small, and bounded
                    _OP_LABELS.clear()
                _OP_LABELS[key] = lab
        return lab


_OP_LABELS: dict[tuple[str, str], tuple] = {}  # (constructor, type string) -> label, no attributes


# An op's label is ("op", prim, type, attribute codes, constructor, attrs, aval, whether
# prim is "constant"): what tie-breaking compares, then what emission needs (equal
# first five mean equal rest); an input's ("inp", type, index), a constant's ("const",
# type, re, im) or ("lit", type, index). Labels are compared, so the op name comes first.
class _TypeLabels(dict):
    """Type Value -> label, for a constructor without attributes (made on first use)."""

    def __init__(self, nodes: _Nodes, prim: str, name: str) -> None:
        super().__init__()
        self.nodes, self.prim, self.name = nodes, prim, name

    def __missing__(self, ty: Any) -> tuple:
        lab = self[ty] = self.label(self.nodes.s(ty), ())
        return lab

    def label(self, ty: str, codes: tuple[str, ...]) -> tuple:
        t = self.nodes.tables
        try:
            values = [t.attr_values[c] for c in codes]
            attrs = Attrs(dict(zip(t.constructors[self.name][2], values, strict=True))) if codes else NO_ATTRS
        except KeyError:  # not decodable: an error if emitted (_aval), not before
            attrs = None
        aval = t.avals.get(ty) if attrs is not None else None  # None: _aval says why
        return ("op", self.prim, ty, codes, self.name, attrs, aval, self.prim == "constant")


class _AttrLabels(_TypeLabels):
    """(type, attribute Values...) -> label, for a constructor with attributes."""

    def __missing__(self, key: tuple) -> tuple:
        s = self.nodes.s
        lab = self[key] = self.label(s(key[0]), tuple([s(v) for v in key[1:]]))
        return lab


def _aval(label: tuple) -> Aval:
    """The aval of an op label, with the error of what could not be decoded."""
    if label[5] is None:
        raise KeyError(f"extraction: unknown attribute codes {label[3]!r} of an e-node {label[4]}")
    if label[6] is None:
        raise KeyError(f"extraction: unknown type {label[2]!r} of an e-node {label[4]}")
    return label[6]


_OUTPUT, _INPUTS = attrgetter("output"), attrgetter("inputs")
_AT0, _AT1 = itemgetter(0), itemgetter(1)


def extract(
    eg: Any,
    tables: Tables,
    inputs: list[int],
    outputs: list[int],
    evaluate: Evaluate | None,
) -> MaterializedGraph:
    """The best DAG for the output classes (relation ``Out(position, class)``); the input
    nodes (graph ids ``inputs``) are kept, in order, even when unused."""
    nodes = _Nodes(eg, tables)
    last = dict(zip(nodes.node_cls, range(len(nodes.node_cls)), strict=True))  # class -> its last e-node
    groups = several_enodes(nodes.node_cls, last)
    best = _forced(len(nodes.cls), nodes.node_cls, nodes.kids, groups, last)
    roots = [nodes.out_cls[pos] for pos in range(len(outputs))]
    if best is not None:  # every class has one e-node: the DAG passes cannot change it
        pass
    elif len(nodes.cls) <= DAG_MAX_CLASSES:
        # greedy DAG extraction from each class's first derivation (see choose_dag)
        best = [-1] * len(nodes.cls)
        seed = choose_dag(best, nodes.node_cls, nodes.kids, nodes.weight, roots, seed=True)
        if best != seed and (dag_cost(seed, nodes.kids, nodes.weight, roots)
                             < dag_cost(best, nodes.kids, nodes.weight, roots)):
            best[:] = seed  # greedy moves can lose sharing: keep the better
    else:
        best, _, order = _choose(len(nodes.cls), nodes.node_cls, nodes.labels.__getitem__, nodes.kids,
                                 nodes.weight, groups)
        if len(nodes.node_cls) <= REFINE_MAX_NODES:
            refine_dag(best, nodes.node_cls, nodes.kids, nodes.weight, roots, groups=groups, order=order)
    em = _emit(nodes, best, tables, inputs, len(outputs), evaluate, dedup=False)
    if em.merged:  # two classes share a node: emitted again, hash-consing every op
        em = _emit(nodes, best, tables, inputs, len(outputs), evaluate, dedup=True)
    graph = em.graph(em.new_inputs, em.new_outputs)
    graph.stats["egraph_nodes"] = len(nodes.node_cls)  # what (print-size) counts
    return graph


def _emit(nodes: _Nodes, best: list[int], tables: Tables, inputs: list[int], n_out: int,
          evaluate: Evaluate | None, dedup: bool) -> _Emitter:
    """The chosen DAG, emitted in post-order from the outputs (first operand first).
    Without ``dedup``, ops are not hash-consed: distinct classes have distinct operand
    classes (the e-graph is congruence-closed), so their ops can only coincide once two
    classes were given one node; the emitter then says ``merged`` and the caller emits
    again with ``dedup``."""
    node_kids = nodes.kids
    em = _Emitter(tables, evaluate)
    new_of = [-1] * len(nodes.cls)
    em.new_inputs = new_inputs = []
    for i in inputs:
        j = em.add(tables.nodes[i], ("I", i))
        new_inputs.append(j)
        c = nodes.input_cls.get(i)
        if c is not None and new_of[c] < 0:
            new_of[c] = j
    em.merged = False  # the same input listed twice is not a merge of classes
    em.new_outputs = new_outputs = []
    labels, emit_op = nodes.labels, em.op
    index, out_nodes, is_const = em.index, em.nodes, em.is_const
    new = tuple.__new__  # MNode's fields by position, without its Python-level __new__
    fold = evaluate is not None
    expanded = bytearray(len(nodes.cls))  # its operands are on the stack above it
    for pos in range(n_out):
        root = nodes.out_cls[pos]
        stack = [root]
        push = stack.append
        while stack:  # iterative post-order over the chosen nodes
            c = stack.pop()
            if new_of[c] >= 0:
                continue
            k = best[c]
            kids = node_kids[k]
            if not expanded[c]:
                if k < 0:
                    raise RuntimeError(f"output {pos}: its e-class has no finite extraction")
                if len(kids) == 2:  # operands still to emit go on top, the first on top
                    a, b = kids
                    if new_of[a] < 0 or new_of[b] < 0:
                        expanded[c] = 1
                        push(c)
                        if new_of[b] < 0:
                            push(b)
                        if new_of[a] < 0:
                            push(a)
                        continue
                else:
                    todo = [kid for kid in kids if new_of[kid] < 0]
                    if todo:
                        expanded[c] = 1
                        push(c)
                        stack.extend(reversed(todo))
                        continue
            lab = labels[k]
            kind = lab[0]
            if kind == "op":  # em.op, inlined for the common case: no folding
                if len(kids) == 2:
                    a, b = new_of[kids[0]], new_of[kids[1]]
                    if a < 0 or b < 0:  # a cycle (only a forced choice can have one)
                        raise RuntimeError(f"output {pos}: its e-class has no finite extraction")
                    new_kids: tuple[int, ...] = (a, b)
                    foldable = fold and is_const[a] and is_const[b]
                else:
                    new_kids = tuple([new_of[kid] for kid in kids])
                    if -1 in new_kids:
                        raise RuntimeError(f"output {pos}: its e-class has no finite extraction")
                    foldable = fold and bool(new_kids) and all([is_const[x] for x in new_kids])
                if foldable:
                    i = emit_op(lab, new_kids)
                    if em.merged and not dedup:
                        return em
                elif dedup:
                    ident = (lab[1], lab[3], new_kids)
                    i = index.get(ident)
                    if i is None:
                        i = index[ident] = len(out_nodes)
                        out_nodes.append(new(MNode, (lab[1], lab[5], new_kids, lab[6] or _aval(lab), None)))
                        is_const.append(lab[7])
                else:
                    i = len(out_nodes)
                    out_nodes.append(new(MNode, (lab[1], lab[5], new_kids, lab[6] or _aval(lab), None)))
                    is_const.append(lab[7])
                new_of[c] = i
            else:
                if kind == "inp":
                    new_of[c] = em.add(tables.nodes[lab[2]], ("I", lab[2]))
                elif kind == "const":
                    new_of[c] = em.const(lab[1], lab[2], lab[3])
                else:
                    new_of[c] = em.loaded_constant(tables.literals[lab[2]])
                if em.merged and not dedup:
                    return em
        new_outputs.append(new_of[root])
    return em


def choose_dag(
    best: list[int],
    node_cls: list[int],
    node_kids: list[tuple[int, ...]],
    node_weight: list[float],
    roots: list[int],  # noqa: ARG001 (every class is costed: alternatives reach new ones)
    seed: bool = False,
) -> list[int] | None:
    """Improve ``best`` to minimize the DAG cost: the weight of the distinct classes a
    choice reaches, shared operands counted once. Each class holds the set of classes its
    chosen node reaches as a bitset; a node's set is its class plus its operands' sets,
    and a class switches to the node whose set weighs least (greedy DAG extraction). A
    node whose operands' sets contain its own class would close a cycle and is never
    chosen. Rounds repeat until no class improves (at most four); ties keep the earlier
    choice, so the result is deterministic.

    ``seed``: ``best`` starts as each class's first derivation, the e-node that settled
    it in a Kahn pass over the e-nodes in row order (returned, to compare with), instead
    of the caller's choice. Seeded so rather than from the smallest trees (``_choose``),
    the greedy moves give bench/simplify.py's exact graphs the same ops, and its real
    Hessians 593 against 600 (real gradients 433 against 432); and ``_choose``'s
    priority queue is not needed."""
    n_cls = len(best)
    leaf_w = [1.0] * n_cls  # a class's weight: its cheapest node's own weight
    for k, c in enumerate(node_cls):
        if not node_kids[k] and node_weight[k] < leaf_w[c]:
            leaf_w[c] = node_weight[k]
    # Bit positions: classes that weigh nothing (inputs) first, then those that weigh
    # 1e-3 (constants, ties only), then those that cost an op. A set's weight is then
    # two popcounts of short low masks and one of the set itself.
    free = [c for c, w in enumerate(leaf_w) if w <= 0.0]
    light = [c for c, w in enumerate(leaf_w) if 0.0 < w < 1.0]
    heavy = [c for c, w in enumerate(leaf_w) if w >= 1.0]
    pos = [0] * n_cls
    for p, c in enumerate(free + light + heavy):
        pos[c] = p
    n_free, n_light = len(free), len(light)
    low = (1 << (n_free + n_light)) - 1
    light_mask = (1 << n_light) - 1
    inf = float("inf")
    sets: list[int] = [0] * n_cls  # 0: no finite choice yet
    # the weight of each class's set; None: not computed yet (only a class's own later
    # rounds compare with it)
    cost: list[float | None] = [inf] * n_cls
    by_cls: list[list[int]] = [[] for _ in range(n_cls)]
    for k, c in enumerate(node_cls):
        by_cls[c].append(k)
    order, users, settled_by = _settle_order(n_cls, node_cls, node_kids, by_cls)
    first = None
    if seed:
        best[:] = settled_by
        first = list(settled_by)

    def weigh(m: int) -> float:
        return (m.bit_count() - (m & low).bit_count()) + 1e-3 * ((m >> n_free) & light_mask).bit_count()

    # After the first round only classes whose operands' sets changed since their last
    # visit are visited again (``dirty``): visiting one whose operands' sets are all
    # unchanged changes nothing (weights are whole ops plus 1e-3 per constant, so the
    # 1e-9 tolerances never decide between distinct weights).
    dirty: bytearray | None = None

    def touch(c: int) -> None:
        """Class ``c``'s set changed: its users' classes are visited again."""
        for u in users[c]:
            dirty[node_cls[u]] = 1  # type: ignore[index]

    for rnd in range(4):
        # In the first round a set holds only classes visited before it, so no operand's
        # set can hold the class being visited: the cycle test starts with round 2.
        check = rnd > 0
        changed = False
        for c in order:
            if dirty is not None:
                if not dirty[c]:
                    continue
                dirty[c] = 0
            bit = 1 << pos[c]
            ks = by_cls[c]
            if len(ks) == 1:  # the common case: one e-node, chosen whenever it can be
                k = ks[0]
                m = 0
                for kid in node_kids[k]:
                    sk = sets[kid]
                    if not sk:
                        break
                    m |= sk
                else:
                    if check and m & bit:
                        continue
                    m |= bit
                    old = cost[c]
                    if old == inf:  # its first finite choice: taken (weights compare later)
                        if dirty is not None:
                            touch(c)
                        best[c], cost[c], sets[c] = k, None, m
                        continue
                    if old is None:
                        old = cost[c] = weigh(sets[c])
                    w = weigh(m)
                    if w < old - 1e-9 or (k == best[c] and w <= old + 1e-9):
                        if k != best[c]:
                            changed = True
                        if dirty is not None and m != sets[c]:
                            touch(c)
                        best[c], cost[c], sets[c] = k, w, m
                continue
            cur = best[c]
            for k in ks:
                m = bit
                ok = True
                for kid in node_kids[k]:
                    sk = sets[kid]
                    if not sk or (check and sk & bit):
                        ok = False
                        break
                    m |= sk
                if not ok:
                    continue
                w = weigh(m)
                old = cost[c]
                if old is None:
                    old = cost[c] = weigh(sets[c])
                if w < old - 1e-9 or (k == cur and w <= old + 1e-9):
                    if k != best[c] and old != inf:
                        changed = True
                    if dirty is not None and m != sets[c]:
                        touch(c)
                    best[c], cost[c], sets[c] = k, w, m
        if not changed:
            break
        if dirty is None:  # after the first round: the classes that saw an operand before its visit
            rank = [-1] * n_cls
            for i, c in enumerate(order):
                rank[c] = i
            dirty = bytearray(n_cls)
            for k, kids in enumerate(node_kids):
                r = rank[node_cls[k]]
                for kid in kids:
                    if rank[kid] > r:
                        dirty[node_cls[k]] = 1
    return first


def dag_cost(best: list[int], kids: list[tuple[int, ...]], weight: list[float], roots: list[int]) -> float:
    """Ops of the DAG a choice reaches from the roots (shared nodes once)."""
    seen: set[int] = set()
    stack = list(roots)
    total = 0.0
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        k = best[c]
        if k < 0:
            return float("inf")
        total += 1.0 if weight[k] >= 1.0 and kids[k] else 1e-3
        stack.extend(kids[k])
    return total


def _components(n: int, edges: list[tuple[int, int]]) -> list[int]:
    """Strongly connected component ids of a directed graph (iterative Tarjan)."""
    succ: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        succ[a].append(b)
    index = [-1] * n
    low = [0] * n
    comp = [-1] * n
    on_stack = bytearray(n)
    stack: list[int] = []
    counter = n_comp = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        work = [(root, 0)]
        while work:
            v, i = work[-1]
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack[v] = 1
            if i < len(succ[v]):
                work[-1] = (v, i + 1)
                w = succ[v][i]
                if index[w] < 0:
                    work.append((w, 0))
                elif on_stack[w]:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on_stack[w] = 0
                    comp[w] = n_comp
                    if w == v:
                        break
                n_comp += 1
    return comp


def _settle_order(n_cls: int, node_cls: list[int], node_kids: list[tuple[int, ...]],
                  by_cls: list[list[int]]) -> tuple[list[int], list[list[int]], list[int]]:
    """Every class, each after the operands of at least one of its nodes (Kahn's
    algorithm over e-nodes): the order in which costs can first become finite; per
    class, the e-nodes using it; and the e-node that settled each class (-1: none)."""
    users: list[list[int]] = [[] for _ in range(n_cls)]
    pending = [0] * len(node_cls)
    ready: list[int] = []
    for k, kids in enumerate(node_kids):  # each e-node waits for its distinct operands
        if len(kids) == 2:
            a, b = kids
            users[a].append(k)
            if a == b:
                pending[k] = 1
            else:
                pending[k] = 2
                users[b].append(k)
        elif len(kids) == 1:
            pending[k] = 1
            users[kids[0]].append(k)
        elif not kids:
            ready.append(k)
        else:
            distinct = set(kids)
            pending[k] = len(distinct)
            for c in distinct:
                users[c].append(k)
    settled_by = [-1] * n_cls
    order: list[int] = []
    for k in ready:  # grows while it is read: Kahn's queue
        c = node_cls[k]
        if settled_by[c] >= 0:
            continue
        settled_by[c] = k
        order.append(c)
        for u in users[c]:
            left = pending[u] - 1
            pending[u] = left
            if not left:
                ready.append(u)
    return order, users, settled_by


def _forced(n_cls: int, node_cls: list[int], node_kids: list[tuple[int, ...]],
            groups: dict[int, list[int]], last: dict[int, int]) -> list[int] | None:
    """The choice when no class has a choice: each class's one e-node not counting
    self-loops (``x * 1`` in the class of ``x``), -1 for a class of self-loops only;
    None when some class has two e-nodes to choose from. ``groups`` are the classes
    with several e-nodes (``several_enodes``), ``last`` each class's last e-node.
    What ``_choose`` returns then, except for classes above a cycle of such e-nodes (no
    finite extraction), which keep their e-node here: emission finds the cycle and
    reports it. Done with C-level passes: most e-graphs of large gradients give most
    classes one e-node."""
    forced = {}
    for c, ks in groups.items():  # all but one must be self-loops
        real = [k for k in ks if c not in node_kids[k]]
        if len(real) > 1:
            return None
        forced[c] = real[0] if real else -1
    best = list(map(last.get, range(n_cls), repeat(-1)))
    for c, k in forced.items():
        best[c] = k
    for k in compress(range(len(node_cls)), map(contains, node_kids, node_cls)):  # self-loops
        if best[node_cls[k]] == k:  # the only e-node of its class
            best[node_cls[k]] = -1
    return best


def _choose(
    n_cls: int,
    node_cls: list[int],
    label: Callable[[int], tuple],
    node_kids: list[tuple[int, ...]],
    node_weight: list[float],
    groups: dict[int, list[int]] | None = None,
) -> tuple[list[int], bool, list[int]]:
    """Best e-node per class (-1 if none is finite), by (size, height, label, operands),
    whether any class has a choice (more than one e-node, self-loops not counted), and
    the order classes were settled in (a topological numbering of the choice).
    ``groups`` is ``several_enodes(node_cls)`` when the caller has it.

    A class with a single e-node (not counting self-loops) has no choice: it is settled
    as soon as its operands are (a plain stack). Only classes with alternatives go
    through the priority queue; settling forced classes early only makes candidates
    ready sooner, and any candidate that becomes ready later costs strictly more than
    what the queue pops now (an op weighs 1), so the choice is the one Knuth's algorithm
    makes. Each queued class keeps its best ready candidate: a candidate is queued only
    when it improves on it, and labels are compared only when two of them tie.
    """
    n = len(node_cls)
    if groups is None:
        groups = several_enodes(node_cls)
    multi = bytearray(n_cls)  # classes with a choice: two e-nodes that are not self-loops
    for c, ks in groups.items():
        if sum([c not in node_kids[k] for k in ks]) > 1:
            multi[c] = 1
    parents: list[list[int]] = [[] for _ in range(n_cls)]
    distinct: list[tuple[int, ...]] = node_kids[:]  # operand classes, each once
    pending = list(map(len, node_kids))  # operands not settled yet
    # This loop and the one below run once per e-node: binary ops, the common case,
    # are spelt out (no set(), sum() or max() per node), which about halves their cost.
    for k, kids in enumerate(node_kids):
        if len(kids) == 2:
            a, b = kids
            parents[a].append(k)
            if a != b:
                parents[b].append(k)
            else:
                distinct[k] = (a,)
                pending[k] = 1
        elif len(kids) == 1:
            parents[kids[0]].append(k)
        elif kids:
            kids = distinct[k] = tuple(set(kids))
            pending[k] = len(kids)
            for x in kids:
                parents[x].append(k)
    # a self-loop (x * 1 in the class of x) is never chosen: it never becomes ready
    # (settling its operands only makes its count more negative)
    for k in compress(range(n), map(contains, node_kids, node_cls)):
        pending[k] = -1
    best = [-1] * n_cls
    if not any(multi):  # no choice anywhere: a class takes its e-node once it can
        ready = list(compress(range(n), map(not_, pending)))
        for k in ready:  # grows while it is read
            c = node_cls[k]
            best[c] = k
            for p in parents[c]:
                left = pending[p] - 1
                pending[p] = left
                if not left:
                    ready.append(p)
        return best, False, []
    size = [0.0] * n_cls
    height = [0] * n_cls
    canon = [0] * n_cls  # settle order: operand ids for tie-breaking
    cand = [-1] * n_cls  # best ready candidate of a queued class
    cand_cost = [0.0] * n_cls
    cand_h = [0] * n_cls
    forced: list[int] = []  # ready e-nodes of classes without a choice (costed when popped)
    heap: list[tuple[float, int, int]] = []
    push, pop = heapq.heappush, heapq.heappop

    def tie_wins(k: int, old: int) -> bool:
        """Whether ``k`` beats ``old`` at equal cost: by label, then operand settle order.
        Equal labels are mostly one shared tuple, so ``is`` usually decides at once."""
        a, b = label(k), label(old)
        if a is not b and a != b:
            return a < b
        return [canon[x] for x in node_kids[k]] < [canon[x] for x in node_kids[old]]

    def cost_of(k: int) -> tuple[float, int]:
        """(size, height) of a ready e-node with other than one or two operands."""
        kids = distinct[k]
        if not kids:
            return node_weight[k], 0
        return node_weight[k] + sum([size[x] for x in kids]), 1 + max([height[x] for x in kids])

    def offer(k: int, cost: float, h: int) -> None:
        """Candidate ``k`` of a class with alternatives."""
        c = node_cls[k]
        old = cand[c]
        if old < 0 or cost < cand_cost[c] or (cost == cand_cost[c] and h < cand_h[c]):
            cand[c], cand_cost[c], cand_h[c] = k, cost, h
            push(heap, (cost, h, c))
        elif cost == cand_cost[c] and h == cand_h[c] and tie_wins(k, old):
            cand[c] = k

    for k in compress(range(n), map(not_, pending)):  # the leaves (pending 0)
        if multi[node_cls[k]]:
            offer(k, node_weight[k], 0)
        else:
            forced.append(k)
    forced.reverse()
    settled = 0
    while True:
        if forced:
            k = forced.pop()
            c = node_cls[k]
            kids = distinct[k]
            if len(kids) == 2:
                a, b = kids
                cost = node_weight[k] + (size[a] + size[b])
                h = 1 + (height[a] if height[a] > height[b] else height[b])
            elif len(kids) == 1:
                a = kids[0]
                cost, h = node_weight[k] + size[a], height[a] + 1
            else:
                cost, h = cost_of(k)
        elif heap:
            cost, h, c = pop(heap)
            if best[c] >= 0:
                continue
            k = cand[c]
        else:
            break
        best[c], size[c], height[c], canon[c] = k, cost, h, settled
        settled += 1
        for p in parents[c]:
            left = pending[p] - 1
            pending[p] = left
            if left:
                continue
            pc = node_cls[p]
            if not multi[pc]:  # its one e-node: it settles the class when popped
                forced.append(p)
                continue
            if best[pc] >= 0:
                continue
            kids = distinct[p]
            if len(kids) == 1:
                p_cost, p_h = node_weight[p] + cost, h + 1
            elif len(kids) == 2:
                a, b = kids
                p_cost = node_weight[p] + (size[a] + size[b])
                p_h = 1 + (height[a] if height[a] > height[b] else height[b])
            else:
                p_cost, p_h = cost_of(p)
            offer(p, p_cost, p_h)
    return best, True, canon


__all__ = ["FOLD_MAX", "Tables", "extract", "fold_node"]
