"""Negations pushed outward in one pass, before the e-graph sees a graph.

The sign rules of arithmetic.rules (``(-x) * y -> -(x * y)``, ``x + (-y) -> x - y``,
``(-x) - y -> -(x + y)``...) move a negation one level per saturation iteration, and on
a large e-graph each iteration runs under a match limit (``saturate.GUARD_FROM``): a rule
with more matches than the limit waits. The gradient of the 1000-op chain needed 12
iterations over a 5k-node e-graph and stopped at the iteration budget. This pass applies
the same identities (exact in IEEE and in modular integer arithmetic: negation commutes
with rounding; only a zero's sign may change, as with the rules) bottom-up in linear
time. Each value becomes a sign and a negation-free base: ``neg`` flips the sign, ``mul`` and ``div`` multiply the
signs of their operands, ``add`` and ``sub`` pick ``add`` or ``sub`` (operands swapped
if need be) so that only an all-negative sum keeps a sign; any other op takes its
operands with a ``neg`` written where their sign is negative. The e-graph then starts
where the rules would have ended and saturates in 2 iterations: chain gradient 2856 ops
either way, grad(grad) 6996 either way, Hessian 7139 against 7279, in a third to a half
of the time.

Graphs of ``PUSH_FROM`` nodes or more are replaced by their pushed form
(``push_negations``; kept only if it has no more ops). Smaller ones keep their nodes and
get the pushed forms alongside, as unions (``with_pushed_forms``): the e-graph then holds
both ``-(a*b)`` and ``(-a)*b`` and extraction picks per use. Replacing them changed the
op counts of bench/simplify.py's functions both ways (one form is not the best for every
use); alongside, none got more ops, three fewer (Lennard-Jones' real Hessian 62 -> 53),
and the fixed-cost Hessian of bench/simplify.py saturates in 7 iterations instead of
stopping at the budget of 12.
"""

from __future__ import annotations

from ..graph import MaterializedGraph, MNode
from ..keys import NO_ATTRS

PUSH_FROM = 2048  # nodes: smaller graphs get the pushed forms alongside their own (see above)
_PRODUCTS = frozenset(("mul", "div"))


def push_negations(graph: MaterializedGraph) -> MaterializedGraph:
    """``graph`` with its negations moved outward (see the module docstring), or
    ``graph`` itself when it has no ``neg`` or the pushed graph is not smaller."""
    if not any(n.op == "neg" for n in graph.nodes):
        return graph
    out, signed = _pushed(graph)
    pushed = _live(out, list(graph.inputs), [signed[o] for o in graph.outputs])
    return pushed if pushed.op_count <= graph.op_count else graph


def with_pushed_forms(graph: MaterializedGraph) -> tuple[MaterializedGraph, list[tuple[int, int]]]:
    """``graph`` with the pushed form of each value added after its nodes, and the pairs
    (node, its pushed form) that differ: loaded as unions, they give the e-graph both
    forms at once, and extraction picks per use."""
    if not any(n.op == "neg" for n in graph.nodes):
        return graph, []
    out, signed = _pushed(graph)
    nodes = list(graph.nodes)
    nodes += [MNode(op, attrs, ins, aval) for op, attrs, ins, aval in out[len(nodes):]]
    pairs = [(i, j) for i, j in enumerate(signed) if i != j]
    return MaterializedGraph(nodes, list(graph.inputs), list(graph.outputs)), pairs


def _pushed(graph: MaterializedGraph) -> tuple[list[tuple], list[int]]:
    """The new nodes, after the graph's own ones, as (op, attrs, operands, aval), and for
    each node of the graph the index of its pushed form (``neg`` of a base, or a base)."""
    nodes = graph.nodes
    # inputs keep their MNode in the attrs place (they carry the input's key)
    out: list[tuple] = [(n.op, n.attrs if n.op is not None else n, n.inputs, n.aval) for n in nodes]
    cons: dict[tuple, int] = {(n.op, n.attrs, n.inputs): i for i, n in enumerate(nodes) if n.op is not None}
    negative = [False] * len(nodes)  # the value is -base
    base = list(range(len(nodes)))  # index in ``out`` of its negation-free base

    def node(op: str, attrs: object, ins: tuple[int, ...], aval: object) -> int:
        ident = (op, attrs, ins)
        j = cons.get(ident)
        if j is None:
            j = cons[ident] = len(out)
            out.append((op, attrs, ins, aval))
        return j

    def signed(k: int) -> int:
        b = base[k]
        return node("neg", NO_ATTRS, (b,), out[b][3]) if negative[k] else b

    for i, n in enumerate(nodes):
        op = n.op
        if op is None:  # an input: kept as it is
            continue
        ins = n.inputs
        if op == "neg":
            x = ins[0]
            negative[i], base[i] = not negative[x], base[x]
        elif op in _PRODUCTS:
            x, y = ins
            negative[i] = negative[x] is not negative[y]
            base[i] = node(op, n.attrs, (base[x], base[y]), n.aval)
        elif op == "add" or op == "sub":
            x, y = ins
            nx, ny = negative[x], negative[y] is (op == "add")  # ny: y enters with a minus
            bx, by = base[x], base[y]
            if not nx:  # bx + by or bx - by
                base[i] = node("sub" if ny else "add", n.attrs, (bx, by), n.aval)
            elif ny:  # -bx - by = -(bx + by)
                negative[i] = True
                base[i] = node("add", n.attrs, (bx, by), n.aval)
            else:  # -bx + by = by - bx
                base[i] = node("sub", n.attrs, (by, bx), n.aval)
        elif ins:
            base[i] = node(op, n.attrs, tuple([signed(k) for k in ins]), n.aval)
    return out, [signed(i) for i in range(len(nodes))]


def _live(out: list[tuple], inputs: list[int], outputs: list[int]) -> MaterializedGraph:
    """The nodes the outputs reach (and the inputs), renumbered in order."""
    live = [False] * len(out)
    for j in outputs:
        live[j] = True
    for j in range(len(out) - 1, -1, -1):
        if live[j]:
            for k in out[j][2]:
                live[k] = True
    for j in inputs:
        live[j] = True
    index = [0] * len(out)
    kept: list[MNode] = []
    for j, (op, attrs, ins, aval) in enumerate(out):
        if live[j]:
            index[j] = len(kept)
            kept.append(attrs if op is None else MNode(op, attrs, tuple([index[k] for k in ins]), aval))
    return MaterializedGraph(kept, [index[j] for j in inputs], [index[j] for j in outputs])


__all__ = ["PUSH_FROM", "push_negations", "with_pushed_forms"]
