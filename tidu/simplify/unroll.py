"""Short scans unrolled where the e-graph makes the unrolled steps cheaper than the loop.

A ``scan`` of at most ``MAX_LENGTH`` steps whose body has no loop or branch of its own,
and whose unrolled steps are few (``MAX_UNROLLED_OPS``: length x the body's ops), is
written out step by step (each x slice a ``slice`` and a ``reshape``, the stacked ys a
``concatenate``), with the operands that are constants in the graph as constants, and
simplified by the e-graph, as materialize_merge simplifies every graph. Whichever is
cheaper stays: the unrolled steps by their ops (constants and inputs free, as
extraction counts them), the loop by its body's ops plus ``ITERATION_COST`` times its
length. Ties keep the loop. Typical wins: a loop over constant xs (each step folds
them), a counter carry (``fori_loop``: each step's index is a constant), a body whose
steps cancel (a swap, a negation, twice).

Long loops are never unrolled: the graph of a scan of more than ``MAX_LENGTH`` steps is
the graph of one step, whatever the number of steps.

tidu.simplify.loops.optimize_loops calls ``unroll_cheaper`` on a program's graph and on
its bodies, innermost first, once the graph is final (no longer to be differentiated).
"""

from __future__ import annotations

from tidu.core.body import Body
from tidu.core.graph import MaterializedGraph, MNode
from tidu.core.keys import NO_ATTRS, Attrs, Aval, Named
from tidu.ops import control
from tidu.simplify.egraph import simplify_graph

MAX_LENGTH = 8  # the longest scan unrolled
MAX_UNROLLED_OPS = 64  # length x body ops, at most: the unrolled graph stays small
# What one step of a loop costs beyond its body's ops (the back ends run a loop step by
# step: its carries handed over, its x sliced and its y stored), in ops
ITERATION_COST = 1.0


def graph_cost(graph: MaterializedGraph) -> float:
    """The ops of ``graph``, as extraction counts them (inputs and constants free), a
    loop's body counted per step: a scan's ``length`` x (its body + ``ITERATION_COST``),
    a while loop's condition and body once (its trip count is not static), a ``cond``'s
    dearest branch. The siblings of a construct (one node per result) are one."""
    total = 0.0
    seen: set[tuple] = set()
    for n in graph.nodes:
        op = n.op
        if op is None or op == "constant":
            continue
        if op not in control.CONTROL_OPS:
            total += 1.0
            continue
        key = (op, control.without_index(n.attrs), n.inputs)
        if key in seen:
            continue
        seen.add(key)
        if op == "scan":
            total += n.attrs["length"] * (graph_cost(n.attrs["body"].graph) + ITERATION_COST)
        elif op == "while":
            total += graph_cost(n.attrs["cond_body"].graph) + graph_cost(n.attrs["body"].graph) + ITERATION_COST
        else:
            total += 1.0 + max(graph_cost(b.graph) for b in n.attrs["branches"])
    return total


def _candidate(shared: Attrs) -> bool:
    """Whether a scan is short enough to try unrolled, with a body of plain ops."""
    body: Body = shared["body"]
    length = shared["length"]
    if not 1 <= length <= MAX_LENGTH:
        return False
    ops = [n.op for n in body.graph.nodes]
    if any(op in control.CONTROL_OPS for op in ops):
        return False
    return length * (len(ops) - ops.count(None) - ops.count("constant")) <= MAX_UNROLLED_OPS


class _Builder:
    """A graph made node by node, hash-consed (the steps repeat the body's constants)."""

    def __init__(self) -> None:
        self.nodes: list[MNode] = []
        self.inputs: list[int] = []
        self.cons: dict[tuple, int] = {}

    def input(self, aval: Aval) -> int:
        self.inputs.append(len(self.nodes))
        self.nodes.append(MNode(None, NO_ATTRS, (), aval, Named(f"u{len(self.inputs) - 1}")))
        return len(self.nodes) - 1

    def op(self, op: str, attrs: Attrs, inputs: tuple[int, ...], aval: Aval) -> int:
        key = (op, attrs, inputs)
        got = self.cons.get(key)
        if got is None:
            got = self.cons[key] = len(self.nodes)
            self.nodes.append(MNode(op, attrs, inputs, aval, None))
        return got


def unrolled(graph: MaterializedGraph, shared: Attrs, ins: tuple[int, ...],
             indices: list[int]) -> tuple[MaterializedGraph, list[int]]:
    """The steps of the scan (``shared``, operands ``ins`` in ``graph``) written out, as a
    graph of its own computing its results ``indices``; and the node of ``graph`` each
    of that graph's inputs stands for. The operands that are constants in ``graph`` are
    constants there (so that the e-graph folds them)."""
    body: Body = shared["body"]
    nc, nk, length = shared["n_consts"], shared["n_carry"], shared["length"]
    b = _Builder()
    outer: list[int] = []  # the operand each input stands for
    at: dict[int, int] = {}  # operand node -> its node here
    for j in ins:
        if j not in at:
            n = graph.nodes[j]
            if n.op == "constant":
                at[j] = b.op("constant", n.attrs, (), n.aval)
            else:
                at[j] = b.input(n.aval)
                outer.append(j)
    operands = [at[j] for j in ins]
    consts, carry, xs = operands[:nc], operands[nc:nc + nk], operands[nc + nk:]
    bg = body.graph
    ys: list[list[int]] = [[] for _ in range(len(bg.outputs) - nk)]  # by step, in slice order
    steps = range(length - 1, -1, -1) if shared["reverse"] else range(length)
    for t in steps:
        sliced = []
        for x in xs:
            aval = b.nodes[x].aval
            rank = len(aval.shape)
            part = b.op("slice", Attrs(start=(t,) + (0,) * (rank - 1), limit=(t + 1, *aval.shape[1:]),
                                       strides=(1,) * rank), (x,), Aval((1, *aval.shape[1:]), aval.dtype))
            sliced.append(b.op("reshape", Attrs(shape=aval.shape[1:]), (part,), Aval(aval.shape[1:], aval.dtype)))
        env: list[int] = [0] * len(bg.nodes)
        for i, v in zip(bg.inputs, [*consts, *carry, *sliced], strict=True):
            env[i] = v
        for i, n in enumerate(bg.nodes):
            if n.op is not None:
                env[i] = b.op(n.op, n.attrs, tuple(env[k] for k in n.inputs), n.aval)
        results = [env[o] for o in bg.outputs]
        carry = results[:nk]
        for q, y in enumerate(results[nk:]):
            ys[q].append(y)
    if shared["reverse"]:
        ys = [list(reversed(per)) for per in ys]
    outputs = []
    for k in indices:
        if k < nk:
            outputs.append(carry[k])
            continue
        parts = []
        for y in ys[k - nk]:
            aval = b.nodes[y].aval
            parts.append(b.op("reshape", Attrs(shape=(1, *aval.shape)), (y,), Aval((1, *aval.shape), aval.dtype)))
        if len(parts) == 1:
            outputs.append(parts[0])
        else:
            aval = b.nodes[parts[0]].aval
            outputs.append(b.op("concatenate", Attrs(axis=0), tuple(parts),
                                Aval((length, *aval.shape[1:]), aval.dtype)))
    return MaterializedGraph(b.nodes, b.inputs, outputs), outer


def unroll_cheaper(graph: MaterializedGraph, semantics: str) -> MaterializedGraph:
    """``graph`` with each short scan written out step by step where, simplified with
    the rewrites of ``semantics``, that costs fewer ops than the loop (``graph_cost``);
    the same graph when none does. Loops are tried in graph order, each on its own, so
    the same graph gives the same choices."""
    groups: dict[tuple, list[int]] = {}
    for i, n in enumerate(graph.nodes):
        if n.op == "scan":
            groups.setdefault((control.without_index(n.attrs), n.inputs), []).append(i)
    plans: dict[int, tuple[MaterializedGraph, list[int], list[int]]] = {}  # first sibling -> plan
    for (shared, ins), members in groups.items():
        if not _candidate(shared):
            continue
        indices = sorted({graph.nodes[i].attrs["index"] for i in members})
        sub, outer = unrolled(graph, shared, ins, indices)
        simplified, _ = simplify_graph(sub, semantics=semantics)
        loop = shared["length"] * (graph_cost(shared["body"].graph) + ITERATION_COST)
        if graph_cost(simplified) < loop:
            plans[members[0]] = (simplified, outer, members)
    if not plans:
        return graph
    nodes: list[MNode] = []
    index: dict[int, int] = {}
    cons: dict[tuple, int] = {}

    def add(n: MNode) -> int:
        if n.op is None:
            nodes.append(n)
            return len(nodes) - 1
        key = (n.op, n.attrs, n.inputs)
        got = cons.get(key)
        if got is None:
            got = cons[key] = len(nodes)
            nodes.append(n)
        return got

    for i, n in enumerate(graph.nodes):
        plan = plans.get(i)
        if plan is not None:  # the steps, where the loop ran (its operands are before it)
            sub, outer, members = plan
            names = {Named(f"u{q}"): index[j] for q, j in enumerate(outer)}
            here: list[int] = []
            for s in sub.nodes:
                if s.op is None:
                    here.append(names[s.input])  # type: ignore[index]
                else:
                    here.append(add(MNode(s.op, s.attrs, tuple(here[k] for k in s.inputs), s.aval, None)))
            position = {k: q for q, k in enumerate(sorted({graph.nodes[m].attrs["index"] for m in members}))}
            for m in members:
                index[m] = here[sub.outputs[position[graph.nodes[m].attrs["index"]]]]
        if i in index:  # a sibling of an unrolled loop
            continue
        index[i] = add(n._replace(inputs=tuple(index[j] for j in n.inputs)) if n.inputs else n)
    return MaterializedGraph(nodes, [index[i] for i in graph.inputs], [index[o] for o in graph.outputs], graph.stats)


__all__ = ["ITERATION_COST", "MAX_LENGTH", "MAX_UNROLLED_OPS", "graph_cost", "unroll_cheaper", "unrolled"]
