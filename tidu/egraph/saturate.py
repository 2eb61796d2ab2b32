"""Equality saturation under budgets that hold inside an iteration too.

An iteration of egglog applies every match of every rule: one iteration of an
associativity/commutativity rule set can multiply the e-graph (a 20-term sum went from
3k to 51k e-nodes in one step, and on to gigabytes). So once the e-graph is past
``GUARD_FROM`` e-nodes, or an iteration more than doubled it, each iteration runs under a
fresh back-off scheduler whose match limit is what the remaining node budget allows: a
rule with more matches than that is skipped for the iteration (egglog's back-off bans
it), so one iteration adds at most ``match limit x (e-nodes a match can add, summed over
the rules)`` e-nodes and the e-graph stays within its budget. Below that size iterations
run plainly: creating a scheduler costs ~1.5 ms, more than a small build's whole
rewrite phase. Between iterations the iteration count, the e-node count and the time
are checked. Whatever stops the run, the e-graph holds only proven equalities, and
extraction takes the best of it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .session import Session, size_of

GUARD_FROM = 4096  # e-nodes from which every iteration runs under a match limit


@dataclass(frozen=True)
class Budget:
    """What one saturation run may spend."""

    iterations: int
    nodes: int  # e-nodes the e-graph may reach
    seconds: float
    match_limit: int  # matches a rule may apply in one iteration, at most


@dataclass
class Outcome:
    iterations: int = 0
    stop_reason: str = "saturated"  # or the budget that stopped it
    size: int = 0
    matches: dict[str, int] = field(default_factory=dict)  # per rule name (file:line:col)


def saturate(session: Session, rulesets: tuple[str, str, int], budget: Budget, size: int,
             outcome: Outcome | None = None) -> Outcome:
    """Run the rulesets until nothing changes or ``budget`` is spent. ``rulesets`` is
    (merging, growing, growth): rules that only merge classes add no e-node and always
    run plainly; ``growth`` is the most e-nodes one match of each growing rule can add,
    summed over them."""
    merging, ruleset, growth = rulesets
    out = outcome or Outcome(size=size)
    start = time.perf_counter()
    done = 0
    guarded = size > GUARD_FROM
    while True:
        if done >= budget.iterations:
            out.stop_reason = "iterations"
            break
        room = budget.nodes - size
        limit = min(budget.match_limit, room // max(1, growth))
        if limit < 1:
            out.stop_reason = "nodes"
            break
        if time.perf_counter() - start >= budget.seconds:
            out.stop_reason = "seconds"
            break
        if guarded:
            grow = (f"(run-schedule (let-scheduler bo (back-off :match-limit {limit} "
                    f":ban-length 1)) (run-with bo {ruleset}))")
            res = session.run(f"(run {merging} 1)\n{grow}\n(print-size)")  # one call: ~0.1 ms each
            merged, report = res[0].report, res[1].report
        else:
            res = session.run(f"(run {session.both(merging, ruleset)} 1)\n(print-size)")
            merged = report = res[0].report
        done += 1
        both = [*merged.num_matches_per_rule.items()]
        if report is not merged:
            both += report.num_matches_per_rule.items()
        for name, n in both:
            if n:
                out.matches[name] = out.matches.get(name, 0) + n
        skipped = guarded and not report.can_stop  # the back-off banned a rule over the limit
        before, size = size, size_of(res)
        guarded = guarded or size > GUARD_FROM or size > 2 * before
        if not report.updated and not merged.updated:
            out.stop_reason = "nodes" if skipped else "saturated"
            break
    out.iterations += done
    out.size = size
    return out


__all__ = ["Budget", "Outcome", "saturate"]
