"""Budgets of the e-graph rewrite phase (``EGraphLimits``): iterations, e-nodes, seconds.

Not to be confused with ``tidu.core.resources`` (how many graph values one transform call
may build)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EGraphLimits:
    """Bounds for the e-graph rewrite phase; hitting one stops it and keeps the best so far
    (``graph.stats["stop_reason"]`` names it). The e-node budget is proportional to the
    loaded graph: ``growth`` times its e-nodes, at least ``min_nodes``, at most ``nodes``;
    it holds inside an iteration too (tidu.simplify.egraph.saturate)."""

    iterations: int = 12
    nodes: int = 2_000_000
    seconds: float = 10.0
    growth: float = 8.0
    min_nodes: int = 20_000
    match_limit: int = 100_000  # matches one rule may apply in one iteration

    def node_budget(self, loaded: int) -> int:
        return int(min(self.nodes, max(self.min_nodes, self.growth * loaded)))


DEFAULT_LIMITS = EGraphLimits()

# The name of releases before 0.2 (tidu.Limits); kept one release.
Limits = EGraphLimits
