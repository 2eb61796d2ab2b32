"""Equality saturation under budgets that hold inside an iteration too.

An iteration of egglog applies every match of every rule: one iteration of an
associativity/commutativity rule set can multiply the e-graph (a 20-term sum went from
3k to 51k e-nodes in one step, and on to gigabytes). So once the e-graph is past
``GUARD_FROM`` e-nodes, or an iteration more than doubled it, each iteration runs under a
fresh back-off scheduler whose match limit is what the remaining node budget allows: a
rule with more matches than that is skipped for the iteration (egglog's back-off bans
it), so one iteration adds at most ``match limit x (e-nodes a match can add, summed over
the rules)`` e-nodes and the e-graph stays within its budget. That bound assumes every
rule may fire; when an iteration bans a rule and changes nothing, the e-graph is the
same, so the next search finds exactly the matches this one reported (banned rules'
included): the next iteration's limit is then the largest under which the rules that
stay under it, all applied, fit the budget and at most double the e-graph (the
sign-pushing rule with 715 matches on the gradient of a 1000-op chain no longer stops
the run; a run that is blowing up still stops: letting it go on made the real Hessian
of Lennard-Jones 6x slower). Below that size iterations
run plainly: creating a scheduler costs ~1.5 ms, more than a small build's whole
rewrite phase. Between iterations the iteration count, the e-node count and the time
are checked. Whatever stops the run, the e-graph holds only proven equalities, and
extraction takes the best of it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from tidu.simplify.egraph.session import Session, size_of

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
    size: int | None = 0  # None: not counted (``saturate(count=False)``)
    matches: dict[str, int] = field(default_factory=dict)  # per rule name (file:line:col)


def saturate(session: Session, rulesets: tuple[str, str, int], budget: Budget, size: int,
             outcome: Outcome | None = None, count: bool = True) -> Outcome:
    """Run the rulesets until nothing changes or ``budget`` is spent. ``rulesets`` is
    (merging, growing, growth): rules that only merge classes add no e-node and always
    run plainly; ``growth`` is the most e-nodes one match of each growing rule can add,
    summed over them. ``count=False``: the caller counts the e-nodes at the end itself
    (extraction reads them all): ``outcome.size`` is then None unless already known."""
    merging, ruleset, growth = rulesets
    out = outcome or Outcome(size=size)
    start = time.perf_counter()
    done = 0
    guarded = size > GUARD_FROM
    known: int | None = None  # a match limit computed from known match counts
    growth_of = session.rules.rule_growth
    # Below the guard an iteration asks egglog for the e-graph's size (~20 µs) only when
    # the matches it applied could have taken it past the guard or doubled it; ``size``
    # is otherwise an upper bound, and ``floor`` the last size egglog reported.
    exact, floor = True, size
    while True:
        if done >= budget.iterations:
            out.stop_reason = "iterations"
            break
        room = budget.nodes - size
        limit = min(budget.match_limit, room // max(1, growth)) if known is None else known
        known = None
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
            # the growing rules, then the merging ones on what they made: the orders of a
            # sum the sign rules make are merged in the same iteration (the 40-node
            # Hessian of bench/simplify.py saturates in 3 instead of 4; faster than both
            # rulesets in one run, too: 0.61 against 0.79 ms)
            res = session.run(f"(run {ruleset} 1)\n(run {merging} 1)")
            report, merged = res[0].report, res[1].report
        done += 1
        matched = [*merged.num_matches_per_rule.items(), *report.num_matches_per_rule.items()]
        grown = 0  # e-nodes the matches can have added, at most
        for name, n in matched:
            if n:
                out.matches[name] = out.matches.get(name, 0) + n
                grown += n * growth_of.get(name, growth)
        skipped = guarded and not report.can_stop  # the back-off banned a rule over the limit
        before = size
        if guarded:
            size, exact = size_of(res), True
        elif size + grown <= GUARD_FROM and grown <= floor:
            size, exact = size + grown, False  # cannot be past the guard, nor have doubled
        else:
            size, exact = session.size(), True
        if exact:
            floor = size
        guarded = guarded or size > GUARD_FROM or size > 2 * before
        if not report.updated and not merged.updated:
            if skipped:  # unchanged: the next search finds exactly what this one found
                known = _known_limit(_found(report), growth_of, max(growth, 1),
                                     min(room, size), budget.match_limit)
                if known > limit:
                    continue
            out.stop_reason = "nodes" if skipped else "saturated"
            break
    out.iterations += done
    out.size = size if exact else session.size() if count else None
    return out


def _found(report: Any) -> dict[str, int]:
    """Matches each rule found in a guarded run, applied or not (the back-off bans a rule
    over the limit: its matches are found, counted, and dropped)."""
    found: dict[str, int] = {}
    for it in report.iterations:
        for name, runs in it.rule_set_report.rule_reports.items():
            n = max((r.num_matches for r in runs), default=0)
            if n > found.get(name, 0):
                found[name] = n
    return found


def _known_limit(found: dict[str, int], growth_of: dict[str, int], default: int, room: int, cap: int) -> int:
    """The largest match limit under which the rules of ``found`` that stay under it add
    at most ``room`` e-nodes (a rule over the limit is banned and adds none)."""
    total, limit = 0, 0
    counts = sorted(set(found.values()))
    for m in counts:
        if m > cap:
            break
        total += sum(m * growth_of.get(name, default) for name, n in found.items() if n == m)
        if total > room:
            break
        limit = m
    return limit


__all__ = ["Budget", "Outcome", "saturate"]
