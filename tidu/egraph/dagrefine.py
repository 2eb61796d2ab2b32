"""Sharing-aware refinement of an e-graph extraction.

Tree costs (what a Knuth-style extractor minimizes) count a shared operand once per
use, so they cannot see that ``sub(acc, m)`` is cheaper than ``add(acc, neg(m))`` only
when ``neg(m)`` has no other user. This pass starts from such a choice and lowers the
*DAG* size, the total weight of distinct e-nodes reachable from the roots, by local
moves: switch one class to another of its e-nodes when that strictly lowers the DAG
size. Reference counts make each move's cost exact (freed and newly needed sub-DAGs
included). A move must keep the choice acyclic: with a topological numbering of the
current choice, an operand numbered below the class cannot reach it, and only operands
numbered above it are searched (among classes numbered above it). Classes are visited
in a fixed order: the result is deterministic.

A move whose new operands are numbered above the class breaks the numbering, which is
then recomputed (linear in the choice). Those renumberings are capped
(``renumberings``), after which such moves are skipped: the pass stays near linear
(grad(grad) of a 1000-op chain used to renumber 258 times).
"""

from __future__ import annotations

from collections.abc import Sequence


def refine_dag(
    best: list[int],
    node_cls: Sequence[int],
    node_kids: Sequence[tuple[int, ...]],
    node_weight: Sequence[float],
    roots: Sequence[int],
    *,
    rounds: int = 2,
    budget: int = 2_000_000,
    renumberings: int = 4,
) -> float:
    """Improve ``best`` (class -> chosen e-node, -1 for none) in place; returns the DAG
    weight saved. ``budget`` bounds the classes visited, so huge graphs stay fast."""
    choices: dict[int, list[int]] = {}
    for k, c in enumerate(node_cls):
        if c not in node_kids[k]:
            choices.setdefault(c, []).append(k)
    choices = {c: ks for c, ks in choices.items() if len(ks) > 1}
    if not choices:
        return 0.0
    order = _topological_numbers(best, node_kids)
    ref = [0] * len(best)
    for r in roots:
        _acquire(r, ref, best, node_kids)
    saved, work = 0.0, 0
    for _ in range(rounds):
        improved = False
        for c in sorted(choices, key=order.__getitem__):
            if ref[c] == 0:
                continue
            for alt in choices[c]:
                if alt == best[c]:
                    continue
                later = [k for k in node_kids[alt] if order[k] > order[c]]
                if later and (renumberings <= 0 or _reaches(later, c, order, best, node_kids)):
                    continue
                cur = best[c]
                delta, visited = _switch(c, alt, ref, best, node_kids, node_weight)
                work += 2 * visited
                if delta < 0:
                    saved -= delta
                    improved = True
                    if later:
                        order = _topological_numbers(best, node_kids)
                        work += len(order)
                        renumberings -= 1
                else:
                    _switch(c, cur, ref, best, node_kids, node_weight)  # undo
                if work > budget:
                    return saved
        if not improved:
            break
    return saved


def _topological_numbers(best: list[int], kids: Sequence[tuple[int, ...]]) -> list[int]:
    """A number per class, larger than its chosen node's operands' (post-order)."""
    order = [-1] * len(best)
    n = 0
    for start in range(len(best)):
        if order[start] >= 0 or best[start] < 0:
            continue
        stack = [(start, iter(kids[best[start]]))]
        order[start] = -2  # on the stack
        while stack:
            c, it = stack[-1]
            for k in it:
                if order[k] == -1 and best[k] >= 0:
                    order[k] = -2
                    stack.append((k, iter(kids[best[k]])))
                    break
            else:
                stack.pop()
                order[c] = n
                n += 1
    return order


def _reaches(starts: list[int], target: int, order: list[int], best: list[int],
             kids: Sequence[tuple[int, ...]]) -> bool:
    """Whether ``target`` is reachable from ``starts`` through chosen nodes; classes
    numbered below ``target`` cannot reach it and are not searched."""
    floor = order[target]
    seen: set[int] = set()
    stack = list(starts)
    while stack:
        x = stack.pop()
        if x == target:
            return True
        if x in seen or order[x] < floor or best[x] < 0:
            continue
        seen.add(x)
        stack.extend(kids[best[x]])
    return False


def _acquire(c: int, ref: list[int], best: list[int], kids: Sequence[tuple[int, ...]],
             added: list[int] | None = None) -> None:
    stack = [c]
    while stack:
        x = stack.pop()
        ref[x] += 1
        if ref[x] == 1:
            if added is not None:
                added.append(x)
            stack.extend(kids[best[x]])


def _release(c: int, ref: list[int], best: list[int], kids: Sequence[tuple[int, ...]],
             freed: list[int] | None = None) -> None:
    stack = [c]
    while stack:
        x = stack.pop()
        ref[x] -= 1
        if ref[x] == 0:
            if freed is not None:
                freed.append(x)
            stack.extend(kids[best[x]])


def _switch(c: int, alt: int, ref: list[int], best: list[int], kids: Sequence[tuple[int, ...]],
            weight: Sequence[float]) -> tuple[float, int]:
    """Make class ``c`` use ``alt``: acquire the new operands first, so shared ones are
    not freed and re-added, then release the old ones. Returns the change in DAG
    weight and the number of classes visited. Switching back undoes it exactly."""
    old = best[c]
    added: list[int] = []
    freed: list[int] = []
    for k in kids[alt]:
        _acquire(k, ref, best, kids, added)
    for k in kids[old]:
        _release(k, ref, best, kids, freed)
    best[c] = alt
    # A class absent before cannot be freed, so `added` and `freed` are disjoint.
    delta = weight[alt] - weight[old] + sum(weight[best[x]] for x in added) - sum(weight[best[x]] for x in freed)
    return delta, len(added) + len(freed)
