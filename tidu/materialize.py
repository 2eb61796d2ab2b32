"""materialize_merge: flatten a resolved view into one DAG, simplified by the e-graph.

1. collect: walk the logical DAG from the outputs (iteratively), substitute input
   aliases, and hash-cons nodes by evaluation identity (op, attrs, operands): values
   that differ only by role are one node here, as are same-key values of different
   fragments.
2. with ``simplify=True``: load that DAG into egglog in bulk, run the simplification
   rules from ``rules/`` under explicit bounds, and extract one DAG (``tidu.egraph``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from .gcpause import paused_gc
from .graph import MaterializedGraph, MNode
from .keys import InputKey, ValueKey, input_key
from .primitives import INTERNAL
from .progress import phase
from .resolve import ResolvedView


@dataclass(frozen=True)
class Limits:
    """Bounds for the e-graph rewrite phase; hitting one stops it and keeps the best so far
    (``graph.stats["stop_reason"]`` names it). The e-node budget is proportional to the
    loaded graph: ``growth`` times its e-nodes, at least ``min_nodes``, at most ``nodes``;
    it holds inside an iteration too (tidu.egraph.saturate)."""

    iterations: int = 12
    nodes: int = 2_000_000
    seconds: float = 10.0
    growth: float = 8.0
    min_nodes: int = 20_000
    match_limit: int = 100_000  # matches one rule may apply in one iteration

    def node_budget(self, loaded: int) -> int:
        return int(min(self.nodes, max(self.min_nodes, self.growth * loaded)))


DEFAULT_LIMITS = Limits()

SEMANTICS = ("exact", "real")
# The rewrite semantics materialize_merge uses when not told (per thread and context).
_SEMANTICS: ContextVar[str] = ContextVar("tidu_rewrite_semantics", default="exact")


def current_semantics() -> str:
    """The rewrite semantics in effect: "exact" unless ``rewrite_semantics`` says so."""
    return _SEMANTICS.get()


@contextmanager
def rewrite_semantics(name: str) -> Iterator[None]:
    """Simplify with ``name`` ("exact" or "real") inside a ``with`` block: every graph
    built there (``tidu.grad``, ``tidu.jit``, ``make_graph``...) unless one says
    otherwise. Transformed functions are cached per semantics."""
    if name not in SEMANTICS:
        raise ValueError(f"unknown rewrite semantics {name!r}; known: {', '.join(SEMANTICS)}")
    token = _SEMANTICS.set(name)
    try:
        yield
    finally:
        _SEMANTICS.reset(token)


def collect(
    view: ResolvedView,
    outputs: Sequence[ValueKey],
    inputs: Iterable[ValueKey | InputKey | str] | None = None,
) -> MaterializedGraph:
    """The plain hash-consed DAG reachable from ``outputs`` (no rewriting)."""
    outputs = list(outputs)
    for o in outputs:
        if not isinstance(o, ValueKey):
            raise TypeError(f"outputs must be ValueKeys, got {type(o).__name__}")
    order = view.topo_order(outputs)
    nodes: list[MNode] = []
    node_of: dict[ValueKey, int] = {}
    hashcons: dict[tuple, int] = {}
    input_nodes: dict[InputKey, int] = {}

    def add(node: MNode, ident: tuple) -> int:
        i = hashcons.get(ident)
        if i is None:
            i = len(nodes)
            nodes.append(node)
            hashcons[ident] = i
        return i

    if inputs is not None:
        inputs = list(inputs)
        declared = [k.input if isinstance(k, ValueKey) else input_key(k) for k in inputs]
        if any(isinstance(k, ValueKey) and k.input is None for k in inputs):
            raise TypeError("inputs= takes input keys or Input(...) value keys, not derived values")
        free = {k.input: k for k in order if k.input is not None and view.alias_of(k) is None}
        missing = [str(k) for k in free if k not in set(declared)]
        if missing:
            raise ValueError(f"the outputs depend on input(s) {', '.join(missing)} not listed in inputs=")
    stripped = False
    setdefault = hashcons.setdefault
    for key in order:
        if key.input is None:  # the hot path, inlined: ~10^5 values
            internal = INTERNAL.get(key.op)
            if internal is not None:  # stop_gradient, custom calls: their value is an operand's
                node_of[key] = node_of[key.inputs[internal.strip(key)]]
                stripped = True
                continue
            ins = key.inputs
            if len(ins) == 2:
                args: tuple[int, ...] = (node_of[ins[0]], node_of[ins[1]])
            elif len(ins) == 1:
                args = (node_of[ins[0]],)
            else:
                args = tuple([node_of[k] for k in ins])
            op, attrs = key.op, key.attrs
            n = len(nodes)
            i = setdefault((op, attrs, args, key.slot), n)  # one hash of the identity
            if i == n:
                nodes.append(MNode(op, attrs, args, key.aval))
        else:
            target = view.alias_of(key)
            if target is not None:
                node_of[key] = node_of[target]
                continue
            i = add(MNode(None, key.attrs, (), key.aval, key.input), ("I", key.input, key.aval))
            input_nodes.setdefault(key.input, i)
        node_of[key] = i
    if inputs is not None:
        input_list = []
        for k, given in zip(declared, inputs, strict=True):
            if k not in input_nodes:
                if not isinstance(given, ValueKey):
                    raise ValueError(f"input {k} is not used by the outputs, so its aval is unknown; "
                                     "pass its Input(...) value key instead of its name")
                input_nodes[k] = add(MNode(None, given.attrs, (), given.aval, k), ("I", k, given.aval))
            input_list.append(input_nodes[k])
    else:
        input_list = list(input_nodes.values())
    outs = [node_of[o] for o in outputs]
    if stripped:  # the operands only a custom call's mark used are dead now
        nodes, input_list, outs = _live(nodes, input_list, outs)
    return MaterializedGraph(nodes, input_list, outs)


def _live(nodes: list[MNode], inputs: list[int], outputs: list[int]) -> tuple[list[MNode], list[int], list[int]]:
    """The nodes reachable from ``outputs`` (and every input), renumbered in order."""
    live = [False] * len(nodes)
    for i in [*inputs, *outputs]:
        live[i] = True
    for i in range(len(nodes) - 1, -1, -1):  # operands come before their users
        if live[i]:
            for a in nodes[i].inputs:
                live[a] = True
    new = [-1] * len(nodes)
    kept: list[MNode] = []
    for i, node in enumerate(nodes):
        if live[i]:
            new[i] = len(kept)
            kept.append(node if not node.inputs else MNode(node.op, node.attrs, tuple(new[a] for a in node.inputs),
                                                           node.aval, node.input))
    return kept, [new[i] for i in inputs], [new[o] for o in outputs]


def materialize_merge(
    view: ResolvedView,
    outputs: Sequence[ValueKey],
    *,
    inputs: Iterable[ValueKey | InputKey | str] | None = None,
    simplify: bool = True,
    semantics: str | None = None,
    assume: dict[str, str] | None = None,
    limits: Limits = DEFAULT_LIMITS,
    consume: bool = False,
) -> MaterializedGraph:
    """One concrete DAG for ``outputs``. Inputs are ordered as ``inputs`` when given,
    else by first appearance. ``semantics`` chooses the rewrites: ``"exact"`` (the
    default: IEEE-exact only) or ``"real"`` (also those valid for finite real and complex
    numbers, see docs/egraph.md); None means ``current_semantics()``. ``assume`` maps
    input names to "positive", "nonneg" or "nonzero" (for real rewrites' domain guards).
    ``graph.stats`` holds phase timings and counts. ``consume``: the caller hands over
    ``view`` and the list ``outputs`` (emptied here): both are let go once the graph is
    collected, before the e-graph phase."""
    t0 = time.perf_counter()
    with paused_gc():
        phase("collecting the graph")
        graph = collect(view, outputs, inputs)
        del view  # with consume, the traced values are freed here (the caller holds none)
        if consume and isinstance(outputs, list):
            outputs.clear()
        stats = {"collect_s": time.perf_counter() - t0, "nodes_before": len(graph.nodes),
                 "ops_before": graph.op_count}
        if simplify:
            from .egraph import simplify_graph

            graph, estats = simplify_graph(graph, limits, semantics=semantics or current_semantics(),
                                           assume=assume)
            stats.update(estats)
    stats["nodes_after"] = len(graph.nodes)
    stats["ops_after"] = graph.op_count
    stats["total_s"] = time.perf_counter() - t0
    graph.stats = stats
    return graph
