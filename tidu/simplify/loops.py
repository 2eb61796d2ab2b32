"""Loops on a materialized graph: scans that run the same steps become one, and what a
scan's body computes from its constants alone is computed once, before the loop.

Fusion: reverse mode through a ``scan`` adds a second forward scan over the same operands, which
stacks the carries the reverse steps read (tidu.transforms.control); the primal scan
computes the same carries for its own results. Two scans with the same operands, length
and direction whose bodies update the carries with the same terms (their keys are the
same objects: keys are hash-consed) are one loop: this pass gives both groups of siblings
one body with the carries and every y of each, so the back ends run the steps once. The
values are the same: the merged body computes each result as before.

In a program's graph (and its bodies), independent scans are fused too: two scans of the
same length and direction where neither reads a result of the other run as one loop over
the operands of both, the carries that start at the same value and are updated by the
same terms (an optimistic fixpoint) being one carry. ``jacfwd`` by two arguments makes a
tangent scan for each, both carrying the primal trajectory: one loop computes it once
per step. A merge that would keep a value alive longer (a stacked result while the
other loop runs: reverse mode's residuals) is not made.

While loops: two in a program's graph, neither reading the other's results, are one
loop where they provably run the same steps: their carries unified as above, their
conditions the same term over the unified parameters (jvp's tangent loop carries the
primal loop's carries, under the same condition).

Dead results: a stacked result nobody reads is not computed, and a carry that no read
result depends on (through any number of steps) is dropped with its operand, as are the
constants and xs that no kept result reads.

Hoisting: a term of a scan body that reads only the body's constant parameters (and
constants) is the same at every step; the outermost such terms the rest of the body
reads become new constant parameters, computed once before the loop from the scan's
constant operands. The same terms, evaluated once instead of n times.

Unrolling (tidu.simplify.unroll): last, in a program's graph and in its bodies (innermost
first), a short scan is written out step by step where the e-graph makes its steps
cheaper than the loop.
"""

from __future__ import annotations

import contextlib
import contextvars
import heapq
from collections.abc import Callable, Iterator
from operator import itemgetter
from typing import Any

import numpy as np

from tidu.core.body import Body
from tidu.core.graph import MaterializedGraph, MNode
from tidu.core.keys import NO_ATTRS, PRIMARY, Attrs, Derived, Input, Named, ValueKey
from tidu.ops import control
from tidu.ops.catalog import INTERNAL
from tidu.simplify.unroll import unroll_cheaper


def body_terms(body: Body) -> tuple[list[ValueKey], list[ValueKey]]:
    """``body``'s parameters and results as keys (the same terms for the same work)."""
    return body.terms()


def _append_terms(roots: list[ValueKey], index: dict[ValueKey, int], nodes: list[MNode]) -> None:
    """Append to ``nodes`` the terms ``roots`` need that ``index`` (term -> node) lacks,
    operands first, in a deterministic order."""
    stack: list[tuple[ValueKey, bool]] = [(k, False) for k in reversed(roots)]
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


def graph_of(params: list[ValueKey], results: list[ValueKey]) -> MaterializedGraph:
    """The graph computing ``results`` from ``params``, each term once (nothing else)."""
    index = {p: i for i, p in enumerate(params)}
    nodes = [MNode(None, NO_ATTRS, (), p.aval, p.input) for p in params]
    _append_terms(results, index, nodes)
    return MaterializedGraph(nodes, list(range(len(params))), [index[r] for r in results])


def canonical_inputs(graph: MaterializedGraph) -> MaterializedGraph:
    """``graph`` with its inputs named by position (in0, in1, ...), as every body's are: a
    body's identity is its structure, not the names a trace gave its parameters."""
    nodes = list(graph.nodes)
    for k, i in enumerate(graph.inputs):
        n = nodes[i]
        nodes[i] = MNode(None, n.attrs, (), n.aval, Named(f"in{k}"))
    return MaterializedGraph(nodes, list(graph.inputs), list(graph.outputs), graph.stats)


def _fuse_same_steps(graph: MaterializedGraph) -> MaterializedGraph:
    """``graph`` with the scans over the same operands whose bodies update the carries
    with the same terms merged (the same graph when none are)."""
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


def _substituted(roots: list[ValueKey], subst: dict[ValueKey, ValueKey]) -> list[ValueKey]:
    """``roots`` rebuilt with each parameter replaced as ``subst`` says (every leaf that
    is not a constant must be in it), operands first."""
    memo = dict(subst)
    stack: list[tuple[ValueKey, bool]] = [(k, False) for k in reversed(roots)]
    while stack:
        k, ready = stack.pop()
        if k in memo:
            continue
        if ready:
            memo[k] = Derived(k.op, k.attrs, tuple(memo[i] for i in k.inputs), PRIMARY, 0, k.aval)  # type: ignore[arg-type]
        else:
            stack.append((k, True))
            stack.extend((i, False) for i in reversed(k.inputs) if i not in memo)
    return [memo[r] for r in roots]


def _merge_scans(loops: list[tuple[Attrs, tuple[int, ...]]]) -> tuple[Attrs, tuple[int, ...], list[dict[int, int]]]:
    """One scan doing the work of ``loops`` (each: shared attributes, operands; the same
    length and direction): its shared attributes, its operands, and for each loop where
    each of its results went.

    A constant or x operand that is the same node is one parameter. Carries with the same
    initial operand are one carry where their update terms are equal once the parameters
    are unified: an optimistic fixpoint (assume the carries of each initial operand equal,
    rebuild every update over the unified parameters, split the carries whose updates
    differ, again until nothing splits). What remains are equal at every step, by
    induction. The work the bodies share (a primal trajectory under several tangents)
    is then the same terms, computed once per step."""
    terms = [body_terms(shared["body"]) for shared, _ in loops]
    consts: dict[int, ValueKey] = {}  # operand node -> its parameter
    xs: dict[int, ValueKey] = {}
    inits: list[int] = []  # the initial operand of each carry, over the loops in order
    carries: list[tuple[int, int]] = []  # (loop, carry)
    for m, ((shared, ins), (params, _)) in enumerate(zip(loops, terms, strict=True)):
        nc, nk = shared["n_consts"], shared["n_carry"]
        for p, node in zip(params[:nc], ins[:nc], strict=True):
            consts.setdefault(node, Input(Named(f"c{len(consts)}"), p.aval))
        for p, node in zip(params[nc + nk:], ins[nc + nk:], strict=True):
            xs.setdefault(node, Input(Named(f"x{len(xs)}"), p.aval))
        carries += [(m, k) for k in range(nk)]
        inits += ins[nc:nc + nk]
    first: dict[object, int] = {}
    cls = [first.setdefault(node, len(first)) for node in inits]  # classes by first occurrence
    while True:
        carry_params = {}
        for (m, k), c in zip(carries, cls, strict=True):
            carry_params.setdefault(c, Input(Named(f"k{c}"), terms[m][0][loops[m][0]["n_consts"] + k].aval))
        outs = []
        for (shared, ins), (params, results) in zip(loops, terms, strict=True):
            nc, nk = shared["n_consts"], shared["n_carry"]
            subst = {p: consts[node] for p, node in zip(params[:nc], ins[:nc], strict=True)}
            subst.update((p, xs[node]) for p, node in zip(params[nc + nk:], ins[nc + nk:], strict=True))
            outs.append((subst, results))
        for (m, k), c in zip(carries, cls, strict=True):
            outs[m][0][terms[m][0][loops[m][0]["n_consts"] + k]] = carry_params[c]
        rebuilt = [_substituted(results, subst) for subst, results in outs]
        split: dict[tuple, int] = {}
        new = [split.setdefault((c, rebuilt[m][k]), len(split)) for (m, k), c in zip(carries, cls, strict=True)]
        if len(split) == len(carry_params):
            break
        cls = new
    n_classes = len(carry_params)
    updates: list[ValueKey | None] = [None] * n_classes
    class_inits = [0] * n_classes
    for (m, k), c, node in zip(carries, cls, inits, strict=True):
        updates[c], class_inits[c] = rebuilt[m][k], node
    ys: dict[ValueKey, int] = {}  # a stacked result computed by several loops is one
    where: list[dict[int, int]] = []
    q = 0
    for (shared, _), results in zip(loops, rebuilt, strict=True):
        nk = shared["n_carry"]
        place = {k: cls[q + k] for k in range(nk)}
        place.update((nk + j, n_classes + ys.setdefault(y, len(ys))) for j, y in enumerate(results[nk:]))
        where.append(place)
        q += nk
    body = Body(canonical_inputs(graph_of([*consts.values(), *(carry_params[c] for c in range(n_classes)),
                                           *xs.values()], [*updates, *ys])), "scan")  # type: ignore[list-item]
    merged = Attrs({**dict(loops[0][0].items()), "body": body, "n_consts": len(consts), "n_carry": n_classes})
    return merged, (*consts, *class_inits, *xs), where


def _reordered(graph: MaterializedGraph, replaced: dict[int, MNode], alias: dict[int, int],
               together: set[int]) -> MaterializedGraph:
    """``graph`` with the nodes ``replaced``, each node of ``alias`` replaced by the node it
    names (and gone), in a topological order that keeps the given one where it can: a node
    runs as early as the given order lets it once its operands have run, the nodes of
    ``together`` (the siblings of one loop) one after the other, at the first of them."""
    nodes = graph.nodes
    content = [replaced.get(i, n) for i, n in enumerate(nodes)]
    content = [n._replace(inputs=tuple(alias.get(j, j) for j in n.inputs)) if alias and n.inputs else n
               for n in content]
    start = min(together)
    waiting = [0] * len(nodes)
    readers: list[list[int]] = [[] for _ in nodes]
    heap: list[tuple[int, int]] = []
    for i, n in enumerate(content):
        if i in alias:
            continue
        operands = set(n.inputs)
        waiting[i] = len(operands)
        for j in operands:
            readers[j].append(i)
        if not operands:
            heap.append((start if i in together else i, i))
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        _, i = heapq.heappop(heap)
        order.append(i)
        for r in readers[i]:
            waiting[r] -= 1
            if not waiting[r]:
                heapq.heappush(heap, (start if r in together else r, r))
    index = {i: q for q, i in enumerate(order)}
    index.update((i, index[j]) for i, j in alias.items())
    out = [content[i]._replace(inputs=tuple(index[j] for j in content[i].inputs)) if content[i].inputs
           else content[i] for i in order]
    return MaterializedGraph(out, [index[i] for i in graph.inputs], [index[o] for o in graph.outputs], graph.stats)


_ITEMSIZE: dict[str, int] = {}


def _bytes(node: MNode) -> int:
    size = _ITEMSIZE.get(node.aval.dtype)
    if size is None:
        size = _ITEMSIZE[node.aval.dtype] = np.dtype(node.aval.dtype).itemsize
    return node.aval.size * size


def _peak_bytes(graph: MaterializedGraph) -> int:
    """The most bytes of values alive at once when the nodes run in order (the NumPy back
    end's order): a value lives from its node to its last reader (an output to the end); a
    loop runs at its first sibling, and its results live at least until its last sibling
    takes its result. Constants are not counted (they are the program's, always there)."""
    nodes = graph.nodes
    end = list(range(len(nodes)))
    for i, n in enumerate(nodes):
        for j in n.inputs:
            end[j] = i
    for o in graph.outputs:
        end[o] = len(nodes)
    begin = list(range(len(nodes)))
    for members in _siblings(graph, "scan").values():
        first, last = members[0], members[-1]
        for i in members:
            begin[i], end[i] = first, max(end[i], last)
    delta = [0] * (len(nodes) + 2)
    for i, n in enumerate(nodes):
        if n.op != "constant":
            size = _bytes(n)
            delta[begin[i]] += size
            delta[end[i] + 1] -= size
    peak = live = 0
    for d in delta:
        live += d
        peak = max(peak, live)
    return peak


def _fuse_independent(graph: MaterializedGraph) -> MaterializedGraph:
    """``graph`` with scans of the same length and direction merged where neither reads a
    result of the other (directly or through other nodes) and the merge keeps no value
    alive longer than it did, beyond the carries of the two loops (each at once): a
    stacked result (the residuals of reverse mode, say) is not kept while the other loop
    runs, nor an operand until it does. One pair at a time, until none merges."""
    def merge(a: tuple[Attrs, tuple[int, ...]], b: tuple[Attrs, tuple[int, ...]]) -> Any:
        if (a[0]["length"], a[0]["reverse"]) != (b[0]["length"], b[0]["reverse"]):
            return None
        return _merge_scans([a, b])

    return _fuse_pairs(graph, "scan", merge, lambda s, ops: ops[s["n_consts"]:s["n_consts"] + s["n_carry"]])


def _fuse_pairs(graph: MaterializedGraph, op: str, merge: Callable[..., Any],
                carries: Callable[[Attrs, tuple[int, ...]], tuple[int, ...]]) -> MaterializedGraph:
    """``graph`` with loops of ``op`` merged a pair at a time where neither reads a result
    of the other and the merge keeps no value alive longer than it did, beyond the two
    loops' carries (``carries(shared, operands)``); ``merge(a, b)`` gives the merged
    loop's attributes, operands and each loop's result map, or None. Until none merges."""
    while True:
        loops = _siblings(graph, op)
        keys = list(loops)
        if len(keys) < 2:
            return graph
        bit = {i: 1 << q for q, members in enumerate(loops.values()) for i in members}
        reads = [0] * len(graph.nodes)  # the loops each node reads, by bit
        for i, n in enumerate(graph.nodes):
            r = 0
            for j in n.inputs:
                r |= reads[j] | bit.get(j, 0)
            reads[i] = r
        deps = [reads[members[0]] for members in loops.values()]
        peak = None
        fused = None
        pairs = [(a, b) for b in range(len(keys)) for a in range(b)]
        for a, b in pairs:
            if deps[a] >> b & 1 or deps[b] >> a & 1:
                continue
            got = merge(keys[a], keys[b])
            if got is None:
                continue
            merged, ins, where = got
            replaced: dict[int, MNode] = {}
            alias: dict[int, int] = {}
            taken: dict[int, int] = {}  # result -> its node
            side = {i: 0 for i in loops[keys[a]]} | {i: 1 for i in loops[keys[b]]}
            for i in sorted(side):
                k = where[side[i]][graph.nodes[i].attrs["index"]]
                if k in taken:
                    alias[i] = taken[k]
                else:
                    taken[k] = i
                    replaced[i] = MNode(op, control.with_index(merged, k), ins, graph.nodes[i].aval, None)
            candidate = _reordered(graph, replaced, alias, set(replaced))
            if peak is None:
                peak = _peak_bytes(graph)
            state = sum(_bytes(graph.nodes[i]) for s, operands in (keys[a], keys[b]) for i in carries(s, operands))
            if _peak_bytes(candidate) <= peak + state:
                fused = candidate
                break
        if fused is None:
            return graph
        graph = fused


def _merge_whiles(loops: list[tuple[Attrs, tuple[int, ...]]]) -> tuple[Attrs, tuple[int, ...],
                                                                       list[dict[int, int]]] | None:
    """One while loop doing the work of ``loops`` (each: shared attributes, operands), or
    None where their trip counts are not provably the same. Constants that are the same
    node are one parameter; carries are unified as ``_merge_scans`` unifies a scan's (the
    same initial operand, the same update terms once the parameters are unified: equal at
    every step, by induction); then the conditions, over the unified parameters, must be
    the same term: each loop stops at the same step as the others."""
    cond_terms = [body_terms(shared["cond_body"]) for shared, _ in loops]
    body_terms_ = [body_terms(shared["body"]) for shared, _ in loops]
    cond_consts: dict[int, ValueKey] = {}
    body_consts: dict[int, ValueKey] = {}
    inits: list[int] = []
    carries: list[tuple[int, int]] = []  # (loop, carry)
    for m, ((shared, ins), (c_params, _), (b_params, _)) in enumerate(zip(loops, cond_terms, body_terms_,
                                                                           strict=True)):
        ncc, nbc = shared["n_cond_consts"], shared["n_body_consts"]
        for p, node in zip(c_params[:ncc], ins[:ncc], strict=True):
            cond_consts.setdefault(node, Input(Named(f"c{len(cond_consts)}"), p.aval))
        for p, node in zip(b_params[:nbc], ins[ncc:ncc + nbc], strict=True):
            body_consts.setdefault(node, Input(Named(f"b{len(body_consts)}"), p.aval))
        carries += [(m, k) for k in range(len(b_params) - nbc)]
        inits += ins[ncc + nbc:]
    first: dict[object, int] = {}
    cls = [first.setdefault(node, len(first)) for node in inits]

    def substitutions(carry_params: dict[int, ValueKey], classes: list[int]) -> list[tuple[dict, dict]]:
        """For each loop, its condition's and its body's parameters -> the unified ones."""
        out = []
        for (shared, ins), (c_params, _), (b_params, _) in zip(loops, cond_terms, body_terms_, strict=True):
            ncc, nbc = shared["n_cond_consts"], shared["n_body_consts"]
            out.append(({p: cond_consts[node] for p, node in zip(c_params[:ncc], ins[:ncc], strict=True)},
                        {p: body_consts[node] for p, node in zip(b_params[:nbc], ins[ncc:ncc + nbc], strict=True)}))
        for (m, k), c in zip(carries, classes, strict=True):
            ncc, nbc = loops[m][0]["n_cond_consts"], loops[m][0]["n_body_consts"]
            out[m][0][cond_terms[m][0][ncc + k]] = carry_params[c]
            out[m][1][body_terms_[m][0][nbc + k]] = carry_params[c]
        return out

    while True:  # the optimistic fixpoint: split the carries whose updates differ
        carry_params: dict[int, ValueKey] = {}
        for (m, k), c in zip(carries, cls, strict=True):
            nbc = loops[m][0]["n_body_consts"]
            carry_params.setdefault(c, Input(Named(f"k{c}"), body_terms_[m][0][nbc + k].aval))
        subst = substitutions(carry_params, cls)
        rebuilt = [_substituted(results, s[1]) for (_, results), s in zip(body_terms_, subst, strict=True)]
        split: dict[tuple, int] = {}
        new = [split.setdefault((c, rebuilt[m][k]), len(split)) for (m, k), c in zip(carries, cls, strict=True)]
        if len(split) == len(carry_params):
            break
        cls = new
    conds = {tuple(_substituted(results, s[0])) for (_, results), s in zip(cond_terms, subst, strict=True)}
    if len(conds) != 1:  # (the same condition on the same carries: the same trip count)
        return None
    n_classes = len(carry_params)
    updates: list[ValueKey | None] = [None] * n_classes
    class_inits = [0] * n_classes
    for (m, k), c, node in zip(carries, cls, inits, strict=True):
        updates[c], class_inits[c] = rebuilt[m][k], node
    params = [carry_params[c] for c in range(n_classes)]
    (cond,) = conds
    shared0 = loops[0][0]
    merged = Attrs({**dict(shared0.items()),
                    "cond_body": Body(canonical_inputs(graph_of([*cond_consts.values(), *params], list(cond))),
                                      shared0["cond_body"].label),
                    "body": Body(canonical_inputs(graph_of([*body_consts.values(), *params], updates)),  # type: ignore[arg-type]
                                 shared0["body"].label),
                    "n_cond_consts": len(cond_consts), "n_body_consts": len(body_consts)})
    where: list[dict[int, int]] = []
    q = 0
    for shared, ins in loops:
        nk = len(ins) - shared["n_cond_consts"] - shared["n_body_consts"]
        where.append({k: cls[q + k] for k in range(nk)})
        q += nk
    return merged, (*cond_consts, *body_consts, *class_inits), where


def _fuse_whiles(graph: MaterializedGraph) -> MaterializedGraph:
    """``graph`` with the while loops that provably run the same steps merged
    (``_merge_whiles``: jvp's tangent loop carries the primal loop's carries) where
    neither reads a result of the other and the merge keeps no value alive longer than it
    did, beyond the carries of the two loops (as ``_fuse_independent`` for scans). One
    pair at a time, until none merges."""
    return _fuse_pairs(graph, "while", lambda a, b: _merge_whiles([a, b]),
                       lambda s, ops: ops[s["n_cond_consts"] + s["n_body_consts"]:])


# False while a body is traced (tidu.transforms.control): its graph is not final. It is
# differentiated, batched and called in other bodies, and the passes there (a body's dead
# carries here, its linear carries in transposition) see a nested scan's results as
# reading all its operands: one loop for independent scans would tie a primal result to
# the tangents and carries it does not read. Independent scans are fused in the program's
# graph, and in its bodies then (fuse_scans).
_FINAL = contextvars.ContextVar("tidu_final_graph", default=True)


@contextlib.contextmanager
def tracing_body() -> Iterator[None]:
    """The graphs materialized meanwhile are bodies: independent scans stay apart there."""
    token = _FINAL.set(False)
    try:
        yield
    finally:
        _FINAL.reset(token)


def fuse_scans(graph: MaterializedGraph) -> MaterializedGraph:
    """``graph`` with the scans that can run as one loop merged (the same graph when none
    can): those over the same operands whose bodies update the carries with the same terms,
    in place; in a program's graph (not a body being traced), also independent scans of
    the same length and direction (``_fuse_independent``), and so in its bodies."""
    graph = _fuse_same_steps(graph)
    if not _FINAL.get():
        return graph
    return _fuse_independent(_fused_bodies(graph, {}))


def _with_bodies(graph: MaterializedGraph, rewrite: Callable[[Body], Body]) -> MaterializedGraph:
    """``graph`` with each body of its loops and branches replaced by ``rewrite(body)``
    (the same graph when none changes)."""
    nodes = list(graph.nodes)
    changed = False
    for i, n in enumerate(nodes):
        if n.op not in control.CONTROL_OPS:
            continue
        new = {}
        for name, value in n.attrs.items():
            if isinstance(value, Body):
                new[name] = rewrite(value)
            elif isinstance(value, tuple) and value and isinstance(value[0], Body):
                new[name] = tuple(rewrite(b) for b in value)
        if any(new[k] is not n.attrs[k] and new[k] != n.attrs[k] for k in new):
            nodes[i] = n._replace(attrs=Attrs({**dict(n.attrs.items()), **new}))
            changed = True
    if not changed:
        return graph
    return MaterializedGraph(nodes, list(graph.inputs), list(graph.outputs), graph.stats)


def _fused_bodies(graph: MaterializedGraph, done: dict[Body, Body]) -> MaterializedGraph:
    """``graph`` with the independent scans inside its loops' and branches' bodies fused
    (at every depth); ``done``: the bodies seen, and what they became."""
    return _with_bodies(graph, lambda body: _fused_body(body, done))


def _rewritten(body: Body, done: dict[Body, Body], rewrite: Callable[[MaterializedGraph], MaterializedGraph]) -> Body:
    """``body`` with its graph rewritten by ``rewrite``, once per body (``done``: the bodies
    seen, and what they became: a body shared by several loops is rewritten the same way)."""
    got = done.get(body)
    if got is None:
        graph = rewrite(body.graph)
        got = done[body] = body if graph is body.graph else Body(graph, body.label)
    return got


def _fused_body(body: Body, done: dict[Body, Body]) -> Body:
    def fuse(graph: MaterializedGraph) -> MaterializedGraph:
        graph = _fused_bodies(graph, done)
        if "scan" in map(_OP, graph.nodes):
            while True:
                fused = _live(drop_dead_results(_fuse_independent(_fuse_same_steps(graph))))
                if fused is graph:
                    break
                graph = fused
        return graph

    return _rewritten(body, done, fuse)


def _unrolled_loops(graph: MaterializedGraph, semantics: str, done: dict[Body, Body]) -> MaterializedGraph:
    """``graph`` with its short scans unrolled where that is cheaper (``unroll_cheaper``),
    those of its bodies first, at every depth: an inner loop unrolled makes its body
    cheaper, and may leave the loop around it a body of plain ops, itself a candidate.
    ``done``: the bodies seen, and what they became (a body shared by several loops is
    rewritten once, the same way)."""
    rewritten = _with_bodies(graph, lambda body: _rewritten(body, done, lambda g: _unrolled_loops(g, semantics, done)))
    if rewritten is not graph:  # a body's steps written out: terms of them may be invariant
        # in the loop around them, and results or carries dead
        graph = _loop_passes(rewritten)
    if "scan" not in map(_OP, graph.nodes):
        return graph
    unrolled = unroll_cheaper(graph, semantics)
    return graph if unrolled is graph else _live(unrolled)  # the operands only a loop read may be dead now


def _hoisted(body: Body, nc: int, label: str = "scan") -> tuple[Body, list[ValueKey]] | None:
    """``body`` with its loop-invariant terms as parameters after its ``nc`` constants,
    and those terms (over the body's own parameters); None when there are none."""
    params, outs = body_terms(body)
    consts = set(params[:nc])
    invariant: dict[ValueKey, bool] = {}
    order: list[ValueKey] = []
    stack: list[tuple[ValueKey, bool]] = [(k, False) for k in outs]
    while stack:  # post-order over the terms the results read
        k, ready = stack.pop()
        if k in invariant:
            continue
        if k.input is not None:
            invariant[k] = k in consts
        elif ready:
            invariant[k] = all(invariant[i] for i in k.inputs)
            order.append(k)
        else:
            stack.append((k, True))
            stack.extend((i, False) for i in k.inputs if i not in invariant)
    # the outermost invariant terms that a varying term or a result reads (not constants:
    # those cost nothing per step)
    wanted = {i for k in order if not invariant[k] for i in k.inputs} | set(outs)
    frontier = [k for k in order if invariant[k] and k in wanted and k.op != "constant"]
    if not frontier:
        return None
    new = {k: Input(Named(f"hoisted{j}"), k.aval) for j, k in enumerate(frontier)}
    rebuilt: dict[ValueKey, ValueKey] = dict(new)

    def term(k: ValueKey) -> ValueKey:
        got = rebuilt.get(k)
        if got is None:
            if k.input is not None:
                got = k
            else:
                got = Derived(k.op, k.attrs, tuple(term(i) for i in k.inputs), PRIMARY, 0, k.aval)
            rebuilt[k] = got
        return got

    for k in order:  # operands first: no deep recursion
        term(k)
    graph = graph_of([*params[:nc], *new.values(), *params[nc:]], [term(k) for k in outs])
    return Body(canonical_inputs(graph), label), frontier


# Where a loop's invariant terms go: (its body attribute, the attribute counting the
# body's constants, how many operands come before those constants).
_HOISTABLE = {"scan": ("body", "n_consts", lambda shared: 0),
              "while": ("body", "n_body_consts", lambda shared: shared["n_cond_consts"])}


def hoist_invariants(graph: MaterializedGraph) -> MaterializedGraph:
    """``graph`` with the loop-invariant terms of every scan's and while loop's body
    computed before the loop."""
    plans: dict[tuple, tuple[Body, list[ValueKey], list[ValueKey]]] = {}
    for n in graph.nodes:
        where = _HOISTABLE.get(n.op)  # type: ignore[arg-type]
        if where is None:
            continue
        shared = control.without_index(n.attrs)
        key = (n.op, shared, n.inputs)
        if key in plans:
            continue
        body_attr, count_attr, _ = where
        body = shared[body_attr]
        got = _hoisted(body, shared[count_attr], body.label)
        if got is not None:
            plans[key] = (got[0], got[1], body_terms(body)[0][:shared[count_attr]])
    if not plans:
        return graph
    nodes: list[MNode] = []
    index: dict[int, int] = {}
    done: dict[tuple, list[int]] = {}
    for i, n in enumerate(graph.nodes):
        ins = tuple(index[j] for j in n.inputs)
        if n.op in _HOISTABLE and (key := (n.op, control.without_index(n.attrs), n.inputs)) in plans:
            body, frontier, const_params = plans[key]
            body_attr, count_attr, before = _HOISTABLE[n.op]
            start = before(key[1])
            if key not in done:  # the invariant terms, once, before the first sibling
                at = {p: ins[start + k] for k, p in enumerate(const_params)}
                _append_terms(frontier, at, nodes)
                done[key] = [at[k] for k in frontier]
            nc = key[1][count_attr]
            shared = Attrs({**dict(key[1].items()), body_attr: body, count_attr: nc + len(frontier)})
            ins = (*ins[:start + nc], *done[key], *ins[start + nc:])
            n = MNode(n.op, control.with_index(shared, n.attrs["index"]), ins, n.aval, None)
        elif ins != n.inputs:
            n = n._replace(inputs=ins)
        index[i] = len(nodes)
        nodes.append(n)
    return MaterializedGraph(nodes, [index[i] for i in graph.inputs], [index[o] for o in graph.outputs], graph.stats)


def _reads(results: list[ValueKey], params: list[ValueKey]) -> set[int]:
    """The positions of the ``params`` that ``results`` read."""
    seen: set[ValueKey] = set()
    stack = list(results)
    while stack:
        k = stack.pop()
        if k in seen:
            continue
        seen.add(k)
        stack.extend(k.inputs)
    return {p for p, k in enumerate(params) if k in seen}


def _siblings(graph: MaterializedGraph, op: str) -> dict[tuple, list[int]]:
    """The nodes of each ``op`` loop (one per result), by (shared attributes, operands)."""
    groups: dict[tuple, list[int]] = {}
    for i, n in enumerate(graph.nodes):
        if n.op == op:
            groups.setdefault((control.without_index(n.attrs), n.inputs), []).append(i)
    return groups


def drop_dead_results(graph: MaterializedGraph) -> MaterializedGraph:
    """``graph`` with every scan computing only the results it has nodes for, and the
    carries those need."""
    nodes = list(graph.nodes)
    changed = False
    for (shared, ins), members in _siblings(graph, "scan").items():
        body: Body = shared["body"]
        nc, nk = shared["n_consts"], shared["n_carry"]
        params, outs = body_terms(body)
        used = {nodes[i].attrs["index"] for i in members}
        carries = {j for j in range(nk) if j in used}
        while True:  # the carries the wanted results read, at any step
            read = _reads([outs[j] for j in sorted(carries)] + [outs[k] for k in sorted(used) if k >= nk], params)
            grown = carries | {p - nc for p in read if nc <= p < nc + nk}
            if grown == carries:
                break
            carries = grown
        ys = [k for k in range(nk, len(outs)) if k in used]
        # constants and xs the kept results never read are dropped too: the transpose of a
        # scan linear in its xs reads the cotangents only (linear_transpose checks that no
        # primal is read), and an operand dropped is not held alive for the loop
        consts = [p for p in range(nc) if p in read]
        xs = [p for p in range(nc + nk, len(params)) if p in read]
        if params and not (consts or carries or xs):  # one operand stays: an op with none is
            # taken for a constant by the e-graph's ingestion
            if nc:
                consts = [0]
            elif len(params) > nc + nk:
                xs = [nc + nk]
            else:
                continue
        if len(carries) == nk and len(ys) == len(outs) - nk and len(consts) == nc and len(xs) == len(params) - nc - nk:
            continue
        kept_carries = sorted(carries)
        keep_params = [*consts, *(nc + j for j in kept_carries), *xs]
        new_body = Body(canonical_inputs(graph_of([params[p] for p in keep_params],
                                                   [*(outs[j] for j in kept_carries), *(outs[k] for k in ys)])),
                        "scan")
        new_shared = Attrs({**dict(shared.items()), "body": new_body, "n_carry": len(kept_carries),
                            "n_consts": len(consts)})
        new_ins = tuple(ins[p] for p in keep_params)
        position = {j: q for q, j in enumerate(kept_carries)} | {k: len(kept_carries) + q for q, k in enumerate(ys)}
        for i in members:
            n = nodes[i]
            nodes[i] = MNode("scan", control.with_index(new_shared, position[n.attrs["index"]]), new_ins, n.aval, None)
        changed = True
    if not changed:
        return graph
    return MaterializedGraph(nodes, list(graph.inputs), list(graph.outputs), graph.stats)


def drop_dead_carries(graph: MaterializedGraph) -> MaterializedGraph:
    """``graph`` with every while loop carrying only what its wanted results and its
    condition read, at any step."""
    nodes = list(graph.nodes)
    changed = False
    for (shared, ins), members in _siblings(graph, "while").items():
        cond, body = shared["cond_body"], shared["body"]
        ncc, nbc = shared["n_cond_consts"], shared["n_body_consts"]
        c_params, c_outs = body_terms(cond)
        b_params, b_outs = body_terms(body)
        nk = len(b_outs)
        carries = {nodes[i].attrs["index"] for i in members}
        carries |= {p - ncc for p in _reads(c_outs, c_params) if p >= ncc}
        while True:  # and the carries those read, at any step
            grown = carries | {p - nbc for p in _reads([b_outs[j] for j in sorted(carries)], b_params) if p >= nbc}
            if grown == carries:
                break
            carries = grown
        if len(carries) == nk:
            continue
        kept = sorted(carries)
        new_cond = Body(canonical_inputs(graph_of([*c_params[:ncc], *(c_params[ncc + j] for j in kept)], c_outs)),
                        cond.label)
        new_body = Body(canonical_inputs(graph_of([*b_params[:nbc], *(b_params[nbc + j] for j in kept)],
                                                  [b_outs[j] for j in kept])), body.label)
        new_shared = Attrs({**dict(shared.items()), "cond_body": new_cond, "body": new_body})
        new_ins = (*ins[:ncc + nbc], *(ins[ncc + nbc + j] for j in kept))
        position = {j: q for q, j in enumerate(kept)}
        for i in members:
            n = nodes[i]
            nodes[i] = MNode("while", control.with_index(new_shared, position[n.attrs["index"]]), new_ins, n.aval,
                             None)
        changed = True
    if not changed:
        return graph
    return MaterializedGraph(nodes, list(graph.inputs), list(graph.outputs), graph.stats)


def strip_marks(graph: MaterializedGraph, done: dict[Body, Body] | None = None) -> MaterializedGraph:
    """``graph`` without ``stop_gradient`` and the custom calls in the bodies of its loops
    and branches, at every depth (kept there while they were traced, as they are
    differentiated after; materialize_merge strips a program's own): what a program runs.
    ``graph`` itself when no body has one."""
    ops = set(map(_OP, graph.nodes))
    marks = {op for op in ops if op is not None and op not in control.CONTROL_OPS and op in INTERNAL}
    if not marks and not ops & control.CONTROL_OPS:
        return graph
    done = {} if done is None else done

    def body(b: Body) -> Body:
        if b not in done:
            g = strip_marks(b.graph, done)
            done[b] = b if g is b.graph else Body(g, b.label)
        return done[b]

    nodes = list(graph.nodes)
    remap = list(range(len(nodes)))
    changed = False
    for i, n in enumerate(nodes):
        if n.op in marks and INTERNAL[n.op].strip is not None:
            remap[i] = remap[n.inputs[INTERNAL[n.op].strip(n)]]  # (the mark's value is that operand's)
            changed = True
            continue
        ins = tuple([remap[j] for j in n.inputs]) if changed else n.inputs
        new = {}
        if n.op in control.CONTROL_OPS:
            for name, value in n.attrs.items():
                if isinstance(value, Body):
                    new[name] = body(value)
                elif isinstance(value, tuple) and value and isinstance(value[0], Body):
                    new[name] = tuple(body(b) for b in value)
            new = {k: v for k, v in new.items() if v is not n.attrs[k] and v != n.attrs[k]}
        if ins != n.inputs or new:
            nodes[i] = n._replace(inputs=ins, attrs=Attrs({**dict(n.attrs.items()), **new}) if new else n.attrs)
            changed = True
    if not changed:
        return graph
    return _live(MaterializedGraph(nodes, list(graph.inputs), [remap[o] for o in graph.outputs], graph.stats))


def _live(graph: MaterializedGraph) -> MaterializedGraph:
    """``graph`` without the nodes that no output reads (the inputs stay)."""
    live = [False] * len(graph.nodes)
    stack = list(graph.outputs)
    while stack:
        i = stack.pop()
        if not live[i]:
            live[i] = True
            stack.extend(graph.nodes[i].inputs)
    for i in graph.inputs:
        live[i] = True
    if all(live):
        return graph
    index: dict[int, int] = {}
    nodes: list[MNode] = []
    for i, n in enumerate(graph.nodes):
        if live[i]:
            index[i] = len(nodes)
            nodes.append(n._replace(inputs=tuple(index[j] for j in n.inputs)) if n.inputs else n)
    return MaterializedGraph(nodes, [index[i] for i in graph.inputs], [index[o] for o in graph.outputs], graph.stats)


def executions(graph: MaterializedGraph, op: str) -> int:
    """How many times ``op`` runs when ``graph`` is evaluated: a scan runs its body
    ``length`` times (its siblings, one node per result, are one loop); a while loop's
    body, whose trip count is not static, is not counted."""
    total, loops = 0, set()
    for node in graph.nodes:
        if node.op == op:
            total += 1
        elif node.op == "scan":
            shared = control.without_index(node.attrs)
            if (shared, node.inputs) not in loops:
                loops.add((shared, node.inputs))
                total += node.attrs["length"] * executions(node.attrs["body"].graph, op)
    return total


_OP = itemgetter(0)


def optimize_loops(graph: MaterializedGraph, semantics: str | None = None) -> MaterializedGraph:
    """Fusion (of scans; of while loops in a program's graph), dead results and carries,
    hoisting, in that order, then short scans unrolled where that is cheaper, in a
    program's graph and its bodies (``tidu.simplify.unroll``: simplified with the
    rewrites of ``semantics``; None, as for a graph not simplified: none unrolled);
    ``graph`` itself when it has no loop or branch (found at C speed: this runs on every
    graph materialize_merge makes)."""
    if not ("scan" in map(_OP, graph.nodes) or "while" in map(_OP, graph.nodes) or "cond" in map(_OP, graph.nodes)):
        return graph
    graph = _loop_passes(graph)
    if semantics is not None and _FINAL.get():
        # in a program's graph only (and so in its bodies, once they are final): a body
        # being traced is differentiated, transposed and batched after, and a checkpoint
        # schedule's segments are loops there
        graph = _unrolled_loops(graph, semantics, {})
    return graph


def _loop_passes(graph: MaterializedGraph) -> MaterializedGraph:
    """``optimize_loops`` before unrolling: fusion, dead results and carries, hoisting."""
    has_scan, has_while = "scan" in map(_OP, graph.nodes), "while" in map(_OP, graph.nodes)
    while has_scan:  # until nothing changes: a carry dropped from one loop may have been
        # the only read of another loop's result (which can then go too), and a loop with
        # fewer carries may run the same steps as another (and fuse with it)
        done = _live(drop_dead_results(fuse_scans(graph)))
        if done is graph:
            break
        graph = done
    if has_while:
        if _FINAL.get():  # (as independent scans: in a program's graph, not a body being traced)
            graph = _live(_fuse_whiles(graph))
        graph = drop_dead_carries(graph)
    return hoist_invariants(graph)


__all__ = ["body_terms", "canonical_inputs", "drop_dead_carries", "drop_dead_results", "executions", "fuse_scans",
           "graph_of", "hoist_invariants", "optimize_loops", "strip_marks", "tracing_body"]
