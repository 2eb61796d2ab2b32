"""Loop fusion on a materialized graph: scans that run the same steps become one.

Reverse mode through a ``scan`` adds a second forward scan over the same operands, which
stacks the carries the reverse steps read (tidu.transforms.control); the primal scan
computes the same carries for its own results. Two scans with the same operands, length
and direction whose bodies update the carries with the same terms (their keys are the
same objects: keys are hash-consed) are one loop: this pass gives both groups of siblings
one body with the carries and every y of each, so the back ends run the steps once. The
values are the same: the merged body computes each result as before.
"""

from __future__ import annotations

from tidu.core.body import Body
from tidu.core.graph import MaterializedGraph, MNode
from tidu.core.keys import NO_ATTRS, PRIMARY, Attrs, Derived, Input, ValueKey
from tidu.ops import control


def body_terms(body: Body) -> tuple[list[ValueKey], list[ValueKey]]:
    """``body``'s parameters and results as keys (the same terms for the same work)."""
    graph = body.graph
    keys: list[ValueKey] = []
    for node in graph.nodes:
        if node.op is None:
            keys.append(Input(node.input, node.aval))  # type: ignore[arg-type]
        else:
            keys.append(Derived(node.op, node.attrs, tuple(keys[j] for j in node.inputs), PRIMARY, 0, node.aval))
    return [keys[i] for i in graph.inputs], [keys[o] for o in graph.outputs]


def graph_of(params: list[ValueKey], results: list[ValueKey]) -> MaterializedGraph:
    """The graph computing ``results`` from ``params``, each term once (nothing else)."""
    index: dict[ValueKey, int] = {}
    nodes: list[MNode] = []
    for p in params:
        index[p] = len(nodes)
        nodes.append(MNode(None, NO_ATTRS, (), p.aval, p.input))
    stack: list[tuple[ValueKey, bool]] = [(k, False) for k in reversed(results)]
    while stack:
        k, ready = stack.pop()
        if k in index:
            continue
        if ready:
            index[k] = len(nodes)
            nodes.append(MNode(k.op, k.attrs, tuple(index[i] for i in k.inputs), k.aval, None))
        else:
            stack.append((k, True))
            stack.extend((i, False) for i in reversed(k.inputs) if i not in index)
    return MaterializedGraph(nodes, list(range(len(params))), [index[r] for r in results])


def fuse_scans(graph: MaterializedGraph) -> MaterializedGraph:
    """``graph`` with the scans that run the same steps merged (the same graph when none do)."""
    groups: dict[tuple, list[int]] = {}  # the siblings of each scan, by what they share
    for i, n in enumerate(graph.nodes):
        if n.op == "scan":
            groups.setdefault((control.without_index(n.attrs), n.inputs), []).append(i)
    if len(groups) < 2:
        return graph
    by_loop: dict[tuple, list[tuple]] = {}  # scans over the same operands, length and direction
    for shared, ins in groups:
        loop = (ins, shared["length"], shared["reverse"], shared["n_consts"], shared["n_carry"])
        by_loop.setdefault(loop, []).append((shared, ins))
    nodes = list(graph.nodes)
    changed = False
    for members in by_loop.values():
        if len(members) < 2:
            continue
        nk = members[0][0]["n_carry"]
        terms = {m: body_terms(m[0]["body"]) for m in members}
        params, outs = terms[members[0]]
        mergeable = [m for m in members if terms[m][1][:nk] == outs[:nk] and terms[m][0] == params]
        if len(mergeable) < 2:
            continue
        results, offset = list(outs[:nk]), {}
        for m in mergeable:
            offset[m] = len(results) - nk  # past the carries, where this scan's ys start
            results += terms[m][1][nk:]
        merged = Body(graph_of(params, results), "scan")
        shared = Attrs({**dict(mergeable[0][0].items()), "body": merged})
        for m in mergeable:
            for i in groups[m]:
                n = nodes[i]
                k = n.attrs["index"]
                nodes[i] = MNode(n.op, control.with_index(shared, k if k < nk else k + offset[m]), n.inputs, n.aval,
                                 None)
        changed = True
    if not changed:
        return graph
    return MaterializedGraph(nodes, list(graph.inputs), list(graph.outputs), graph.stats)


__all__ = ["body_terms", "fuse_scans", "graph_of"]
