"""Negations pushed outward in one pass, before the e-graph sees a large graph.

The sign rules of arithmetic.rules (``(-x) * y -> -(x * y)``, ``x + (-y) -> x - y``,
``(-x) - y -> -(x + y)``...) move a negation one level per saturation iteration, and on
a large e-graph each iteration runs under a match limit (``saturate.GUARD_FROM``): a rule
with more matches than the limit waits. The gradient of the 1000-op chain needed 12
iterations over a 5k-node e-graph and stopped at the iteration budget. This pass applies
the same identities (exact in IEEE and in modular integer arithmetic: negation commutes
with rounding; only a zero's sign may change, as with the rules) bottom-up in linear time. Each value becomes a
sign and a negation-free base: ``neg`` flips the sign, ``mul`` and ``div`` multiply the
signs of their operands, ``add`` and ``sub`` pick ``add`` or ``sub`` (operands swapped
if need be) so that only an all-negative sum keeps a sign; any other op takes its
operands with a ``neg`` written where their sign is negative. The e-graph then starts
where the rules would have ended and saturates in 2 iterations: chain gradient 2856 ops
either way, grad(grad) 6996 either way, Hessian 7139 against 7279, in a third to a half
of the time.

It runs on graphs of ``PUSH_FROM`` nodes or more only. The pass keeps one form of each
value where the e-graph keeps both (``-(a*b)`` and ``(-a)*b``) and lets extraction pick
per use; on small graphs the rules reach their fixpoint within a few plain iterations and
that choice is worth more (on the functions of bench/simplify.py the pass gave some
graphs more ops, some fewer). The pushed graph is kept only if it has no more ops than
the input.
"""

from __future__ import annotations

from ..graph import MaterializedGraph, MNode
from ..keys import NO_ATTRS

PUSH_FROM = 2048  # nodes: smaller graphs go to the e-graph as they are (see above)
_PRODUCTS = frozenset(("mul", "div"))


def push_negations(graph: MaterializedGraph) -> MaterializedGraph:
    """``graph`` with its negations moved outward (see the module docstring), or
    ``graph`` itself when it is small, has no ``neg`` or the pushed graph is not smaller."""
    nodes = graph.nodes
    if len(nodes) < PUSH_FROM or not any(n.op == "neg" for n in nodes):
        return graph
    out: list[tuple] = []  # (op, attrs, operands, aval) of the new nodes; MNodes made for live ones only
    cons: dict[tuple, int] = {}
    negative = [False] * len(nodes)  # the value is -base
    base = [0] * len(nodes)  # index in ``out`` of its negation-free base

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
            base[i] = len(out)
            out.append((None, n, (), n.aval))
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
        else:
            base[i] = node(op, n.attrs, tuple([signed(k) for k in ins]), n.aval)
    outputs = [signed(o) for o in graph.outputs]
    pushed = _live(out, [base[i] for i in graph.inputs], outputs)
    return pushed if pushed.op_count <= graph.op_count else graph


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


__all__ = ["push_negations"]
