"""Whether a loaded graph gives the exact rewrites anything to do, decided in Python.

An e-graph made of a graph's nodes, with every class holding one e-node, changes only if
the left-hand side of some rewrite matches somewhere in it: no match in the first
iteration, nothing to apply, saturation ends as it starts, and extraction gives the
graph back (hash-consed). Large gradients are often like that (the 1000-op chain's has
no match left once negation.push has moved its negations and dropped its products by
one), and for them loading, saturating and
reading back the e-graph (~70% of ``materialize_merge``) would be work for nothing. So
``simplify_graph`` first asks ``could_rewrite``: it matches every exact rewrite's
left-hand side against the graph's nodes, as egglog would on the first iteration, with
the guards taken as true (so it may answer yes where egglog finds nothing, never the
reverse); only on a yes is the e-graph built.

The e-graph's classes are mirrored by hash-consing: a constant's class is its splat
value and type (``Const``) or its literal (``Lit``), an op's is its op, type, attributes
and operand classes, as egglog's terms are; ``unchanged`` then emits the graph
extraction would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..dsl.ast import Call, Expr, Num, Var
from ..graph import MaterializedGraph, MNode
from ..keys import NO_ATTRS
from ..primitives import Catalog

# pattern: ("var", name) | ("num", re, im) | ("call", op, (pattern, ...))
Pattern = tuple


@dataclass(frozen=True)
class OpPatterns:
    """The patterns rooted at one op, and what a node's operands must show for one of
    them to match (a cheap test before the patterns are matched): a constant among
    ``values``, an op among ``ops``, or two operands in one class (``repeated``), unless
    some pattern asks nothing of them (``always``)."""

    patterns: tuple[Pattern, ...]
    always: bool
    ops: frozenset[str]
    values: frozenset[tuple[float, float]]
    repeated: bool


_INDEX: dict[int, tuple[Catalog, dict[str, OpPatterns] | None]] = {}


def _pattern(e: Expr) -> Pattern:
    if isinstance(e, Var):
        return ("var", e.name)
    if isinstance(e, Num):
        v = complex(e.value)
        return ("num", v.real, v.imag)
    if isinstance(e, Call):
        return ("call", e.fn, tuple(_pattern(a) for a in e.args))
    raise TypeError(f"unexpected pattern {e!r}")  # Splat: not in exact rewrites (checked)


def _by_op(patterns: list[Pattern]) -> OpPatterns:
    always, repeated = False, False
    ops: set[str] = set()
    values: set[tuple[float, float]] = set()
    for p in patterns:
        kids = p[2]
        names = [q[1] for q in kids if q[0] == "var"]
        if len(names) == len(kids) and len(set(names)) == len(names):
            always = True  # op(x, y, ...): anything matches (guards aside)
        repeated = repeated or len(set(names)) < len(names)
        ops.update(q[1] for q in kids if q[0] == "call")
        values.update((q[1], q[2]) for q in kids if q[0] == "num")
    return OpPatterns(tuple(patterns), always, frozenset(ops), frozenset(values), repeated)


def exact_patterns(cat: Catalog) -> dict[str, OpPatterns] | None:
    """Left-hand sides of the exact rewrites egglog runs, by root op (cached per catalog);
    None when one of them is not a plain pattern this module can match."""
    hit = _INDEX.get(id(cat))
    if hit is None or hit[0] is not cat:
        by_op: dict[str, list[Pattern]] = {}
        index: dict[str, OpPatterns] | None
        try:
            for rw in cat.all_rewrites():
                if rw.semantics != "exact" or rw.by_normalizer:
                    continue
                if not isinstance(rw.lhs, Call) or rw.lhs.attrs:
                    raise TypeError(rw.lhs)
                by_op.setdefault(rw.lhs.fn, []).append(_pattern(rw.lhs))
            index = {op: _by_op(ps) for op, ps in by_op.items()}
        except TypeError:
            index = None
        hit = _INDEX[id(cat)] = (cat, index)
    return hit[1]


def classes(nodes: list[MNode], splat_of: dict[int, tuple[float, float]]) -> list[int]:
    """The e-class of each node in the e-graph loaded from ``nodes`` before any rewrite
    (operands come before their users): egglog's terms are op, type, operand classes and
    attributes; a constant's is its splat value and type, or its literal."""
    index: dict[tuple, int] = {}
    setdefault = index.setdefault
    cls: list[int] = []
    add = cls.append
    avals: dict[int, int] = {}  # id(aval) -> a number per distinct aval (hashing one calls Python)
    by_value: dict[Any, int] = {}
    last, code = None, 0
    for i, n in enumerate(nodes):
        op, attrs, ins, aval, _ = n
        if aval is not last:  # runs of nodes share one aval object
            last = aval
            code = avals.get(id(aval))  # type: ignore[assignment]
            if code is None:
                code = avals[id(aval)] = by_value.setdefault(aval, len(by_value))
        if op is None:
            ident: tuple = ("I", i)
        elif op == "constant":
            f = splat_of.get(i)
            ident = ("C", code, f) if f is not None else ("L", code, attrs["value"])
        elif len(ins) == 2:
            ident = (op, code, None if attrs is NO_ATTRS else attrs, cls[ins[0]], cls[ins[1]])
        else:
            ident = (op, code, None if attrs is NO_ATTRS else attrs, *[cls[k] for k in ins])
        add(setdefault(ident, len(index)))
    return cls


def could_rewrite(nodes: list[MNode], cls: list[int], splat_of: dict[int, tuple[float, float]],
                  patterns: dict[str, OpPatterns]) -> bool:
    """Whether some pattern matches at some node (guards taken as true)."""
    first: dict[int, int] = {}  # one node per class: a class's op and operands are its first node's
    for i, c in enumerate(cls):
        first.setdefault(c, i)

    def match(p: Pattern, i: int, env: dict[str, int]) -> bool:
        kind = p[0]
        if kind == "var":
            c = cls[i]
            return env.setdefault(p[1], c) == c
        if kind == "num":
            return splat_of.get(i) == (p[1], p[2])
        n = nodes[i]
        if n.op != p[1] or len(n.inputs) != len(p[2]):
            return False
        return all(match(q, first[cls[k]], env) for q, k in zip(p[2], n.inputs, strict=True))

    get = patterns.get
    for i, n in enumerate(nodes):
        at = get(n.op)  # type: ignore[arg-type]
        if at is None:
            continue
        ins = n.inputs
        if not at.always:
            ops, values = at.ops, at.values
            for k in ins:
                if nodes[k].op in ops or (values and splat_of.get(k) in values):
                    break
            else:
                if not (at.repeated and len({cls[k] for k in ins}) < len(ins)):
                    continue
        if first[cls[i]] == i and any(match(p, i, {}) for p in at.patterns):
            return True
    return False


def unchanged(nodes: list[MNode], cls: list[int], inputs: list[int], outputs: list[int]) -> MaterializedGraph:
    """The graph extraction gives from an e-graph no rewrite changed: the inputs first,
    then each output's nodes in post-order (first operand first), one node per class,
    as ``extract._emit`` emits them."""
    n_cls = max(cls, default=-1) + 1
    first = [-1] * n_cls  # class -> its first node
    for i, c in enumerate(cls):
        if first[c] < 0:
            first[c] = i
    kids = [tuple([cls[k] for k in nodes[i].inputs]) for i in first]  # operand classes per class
    out: list[MNode] = []
    new_of = [-1] * n_cls
    new_inputs = []
    for i in inputs:
        c = cls[i]
        if new_of[c] < 0:
            new_of[c] = len(out)
            out.append(nodes[i])
        new_inputs.append(new_of[c])
    new = tuple.__new__  # MNode's fields by position (as extraction makes them)
    expanded = bytearray(n_cls)  # its operands are on the stack above it
    new_outputs = []
    for o in outputs:
        stack = [cls[o]]
        push = stack.append
        while stack:  # iterative post-order: graphs may be 10^5 deep
            c = stack.pop()
            if new_of[c] >= 0:
                continue
            ks = kids[c]
            if not expanded[c]:
                todo = [k for k in ks if new_of[k] < 0]
                if todo:
                    expanded[c] = 1
                    push(c)
                    stack.extend(reversed(todo))
                    continue
            n = nodes[first[c]]
            new_of[c] = len(out)
            out.append(new(MNode, (n.op, n.attrs, tuple([new_of[k] for k in ks]), n.aval, None)) if ks else n)
        new_outputs.append(new_of[cls[o]])
    return MaterializedGraph(out, new_inputs, new_outputs, {"fold_s": 0.0})


