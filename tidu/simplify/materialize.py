"""materialize_merge: flatten a resolved view into one DAG, simplified by the e-graph.

1. collect: walk the logical DAG from the outputs (iteratively), substitute input
   aliases, and hash-cons nodes by evaluation identity (op, attrs, operands): values
   that differ only by role are one node here, as are same-key values of different
   fragments. The walk leaves the DAG as its hash-cons keys (``Collected``): the
   e-graph phase makes each node it keeps once, after pushing negations.
2. with ``simplify=True``: load that DAG into egglog in bulk, run the simplification
   rules from ``rules/`` under explicit bounds, and extract one DAG (``tidu.simplify.egraph``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from tidu.core.gcpause import paused_gc
from tidu.core.graph import MaterializedGraph
from tidu.core.keys import InputKey, ValueKey
from tidu.core.progress import phase
from tidu.simplify.budget import DEFAULT_LIMITS, EGraphLimits
from tidu.simplify.dag import collect_dag
from tidu.simplify.egraph import simplify_graph
from tidu.simplify.loops import optimize_loops, strip_marks
from tidu.simplify.semantics import current_semantics
from tidu.trace.resolve import ResolvedView


def materialize_merge(
    view: ResolvedView,
    outputs: Sequence[ValueKey],
    *,
    inputs: Iterable[ValueKey | InputKey | str] | None = None,
    simplify: bool = True,
    semantics: str | None = None,
    assume: dict[str, str] | None = None,
    limits: EGraphLimits = DEFAULT_LIMITS,
    consume: bool = False,
    keep_marks: bool = False,
) -> MaterializedGraph:
    """One concrete DAG for ``outputs``. Inputs are ordered as ``inputs`` when given,
    else by first appearance. ``semantics`` chooses the rewrites: ``"exact"`` (the
    default: IEEE-exact only) or ``"real"`` (also those valid for finite real and complex
    numbers, see docs/egraph.md); None means ``current_semantics()``. ``assume`` maps
    input names to "positive", "nonneg" or "nonzero" (for real rewrites' domain guards).
    ``graph.stats`` holds phase timings and counts. ``consume``: the caller hands over
    ``view`` and the list ``outputs`` (emptied here): both are let go once the graph is
    collected, before the e-graph phase. ``keep_marks``: ``stop_gradient`` and the
    custom calls stay in the graph (a control-flow body's: it is differentiated after it
    is made); else they go, from the graph and from its bodies."""
    t0 = time.perf_counter()
    with paused_gc():
        phase("collecting the graph")
        dag = collect_dag(view, outputs, inputs, keep_marks=keep_marks)
        del view  # with consume, the traced values are freed here (the caller holds none)
        if consume and isinstance(outputs, list):
            outputs.clear()
        stats = {"collect_s": time.perf_counter() - t0, "nodes_before": len(dag), "ops_before": dag.n_ops}
        if simplify:
            graph, estats = simplify_graph(dag, limits, semantics=semantics or current_semantics(),
                                           assume=assume)
            stats.update(estats)
        else:
            graph = dag.graph()
    if not keep_marks:
        graph = strip_marks(graph)  # (the bodies' marks: kept while they were traced)
    graph = optimize_loops(graph, (semantics or current_semantics()) if simplify else None)
    stats["nodes_after"] = len(graph.nodes)
    stats["ops_after"] = graph.op_count
    stats["total_s"] = time.perf_counter() - t0
    graph.stats = stats
    return graph
