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

Most moves lose, and trying one (and undoing it) walks what it frees and adds twice.
With non-negative integral weights (e-graph weights are 0 and 1) a move's gain is first
computed without making it: what it adds is walked once, what it frees is released and
acquired again while what the move would reach is held. A dominator tree of the choice
bounds what a move can free, so that first walk stops once the move adds more: it is
built when the moves tried without it have walked about as much as it costs (again
after moves were made). The same moves are made as by trying each. ``budget`` counts
classes visited. A node with an operand class that has no finite choice is never chosen.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from operator import ne

LCA_STEPS = 64  # steps a common-dominator search may take before it keeps its guess
TREE_AFTER = 0.5  # classes walked without a dominator tree, per class, before one is built


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
    groups: dict[int, list[int]] | None = None,
    order: list[int] | None = None,
) -> float:
    """Improve ``best`` (class -> chosen e-node, -1 for none) in place; returns the DAG
    weight saved. ``budget`` bounds the classes visited, so huge graphs stay fast.
    ``groups`` is ``several_enodes(node_cls)`` and ``order`` a topological numbering of
    the choice (operands below their users), when the caller has them."""
    choices: dict[int, list[int]] = {}
    for c, ks in (several_enodes(node_cls) if groups is None else groups).items():
        valid = []
        for k in ks:  # no self-loop, no operand without a finite choice
            kids = node_kids[k]
            if kids and (c in kids or min([best[x] for x in kids]) < 0):
                continue
            valid.append(k)
        if len(valid) > 1:
            choices[c] = valid
    if not choices:
        return 0.0
    if order is None:
        order = _topological_numbers(best, node_kids)
    ref = [0] * len(best)
    for r in roots:
        _acquire(r, ref, best, node_kids)
    saved, work = 0.0, 0
    # Most moves lose, and trying one (and undoing it) walks what it frees and adds
    # twice. So a move's gain is first computed without making it, exactly for
    # non-negative integral weights (e-graph weights are 0 and 1): what it adds is
    # walked once, what it frees is released and acquired again with what the move
    # would reach held; a dominator tree stops the first walk early when the move can
    # free less than it adds.
    exact = all(w >= 0 and float(w).is_integer() for w in set(node_weight))
    idom: list[int] | None = None  # a dominator tree of the choice, valid until a move is made
    below: list[float] = []  # per class, the weight of its subtree there
    # the tree costs about a walk over the choice: it is built once the moves tried
    # without it have visited half as many classes (since the last move made)
    refresh, stale_from = int(len(best) * TREE_AFTER), 0
    seen = [0] * len(best)
    stamp = 0
    inf = float("inf")
    for _ in range(rounds):
        improved = False
        for c in sorted(choices, key=order.__getitem__):
            if ref[c] == 0:
                continue
            for alt in choices[c]:
                cur = best[c]
                if alt == cur:
                    continue
                if exact:
                    if idom is None and work - stale_from >= refresh:
                        dom = _dominators(best, node_kids, node_weight, roots, ref, order)
                        if dom is not None:
                            idom, below = dom
                        else:
                            stale_from = budget  # no tree for this choice
                    # The move frees at most c's subtree (c itself stays), less the
                    # subtrees of c's children that alt still reaches; it adds alt and
                    # the dead classes alt reaches. It cannot win once what it adds
                    # reaches ``slack``: counting stops there.
                    slack = below[c] - node_weight[alt] if idom is not None else inf
                    if slack <= 0:
                        continue
                    stamp += 1
                    added = 0.0
                    held = []  # live classes the move reaches: they stay
                    stack = list(node_kids[alt])
                    while stack:
                        x = stack.pop()
                        if seen[x] == stamp:
                            continue
                        seen[x] = stamp
                        if ref[x]:  # live: it stays, and so does its subtree
                            held.append(x)
                            if idom is not None and idom[x] == c:
                                slack -= below[x]
                                if added >= slack:
                                    break
                            continue
                        k = best[x]
                        added += node_weight[k]
                        work += 1
                        if added >= slack:
                            break
                        stack.extend(node_kids[k])
                    if added >= slack:
                        continue
                    for x in held:
                        ref[x] += 1
                    freed: list[int] = []
                    for k in node_kids[cur]:
                        _release(k, ref, best, node_kids, freed)
                    for k in node_kids[cur]:
                        _acquire(k, ref, best, node_kids)
                    for x in held:
                        ref[x] -= 1
                    work += 2 * len(freed)
                    if node_weight[alt] - node_weight[cur] + added - sum([node_weight[best[x]] for x in freed]) >= 0:
                        continue
                    if work > budget:
                        return saved
                later = [k for k in node_kids[alt] if order[k] > order[c]]
                if later and (renumberings <= 0 or _reaches(later, c, order, best, node_kids)):
                    continue
                delta, visited = _switch(c, alt, ref, best, node_kids, node_weight)
                work += 2 * visited
                if delta < 0:
                    saved -= delta
                    improved = True
                    idom, stale_from = None, work
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


def several_enodes(node_cls: Sequence[int], last: dict[int, int] | None = None) -> dict[int, list[int]]:
    """The classes with more than one e-node, each with its e-nodes in order; C-level
    passes over the e-nodes (most classes of large e-graphs have one). ``last`` maps
    each class to its last e-node, when the caller has it."""
    n = len(node_cls)
    if last is None:
        last = dict(zip(node_cls, range(n), strict=True))
    groups: dict[int, list[int]] = {}
    if len(last) == n:
        return groups
    for k in compress(range(n), map(ne, map(last.__getitem__, node_cls), range(n))):
        groups.setdefault(node_cls[k], []).append(k)
    for c, ks in groups.items():
        ks.append(last[c])
    return groups


def _dominators(best: list[int], kids: Sequence[tuple[int, ...]], weight: Sequence[float],
                roots: Sequence[int], ref: list[int], order: list[int]) -> tuple[list[int], list[float]] | None:
    """A dominator tree of the chosen DAG (a class dominates those every path from the
    roots to which passes through it) as a parent per class (the roots' is ``len(best)``),
    and the weight of every class's subtree. All a move at a class can free lies in its
    subtree. Immediate dominators come from one pass, users before operands (an operand's
    is the common dominator of its users); a search for that common dominator that runs
    long keeps the current guess, a class that reaches the operand and is dominated by
    all its dominators: subtrees then hold more, never less. None when a live class has
    no choice."""
    n = len(best)
    live = [c for c in range(n) if ref[c]]
    if any(best[c] < 0 for c in live):
        return None
    live.sort(key=order.__getitem__, reverse=True)  # users first
    top = n  # a virtual root above the roots
    idom = [-1] * (n + 1)
    depth = [0] * (n + 1)
    idom[top] = top
    for r in roots:
        idom[r] = top
    for x in live:
        depth[x] = dx = depth[idom[x]] + 1
        for k in kids[best[x]]:
            a = idom[k]
            if a < 0:
                idom[k] = x
            elif a != x and a != top:
                kb = best[k]
                if not kids[kb] and not weight[kb]:  # a leaf weighing nothing: any parent does
                    continue
                b, steps = x, 0
                da, db = depth[a], dx
                while a != b and steps < LCA_STEPS:
                    if da >= db:
                        a = idom[a]
                        da = depth[a]
                    else:
                        b = idom[b]
                        db = depth[b]
                    steps += 1
                if a == b:
                    idom[k] = a
    below = [0.0] * (n + 1)
    for x in reversed(live):  # operands first
        below[x] += weight[best[x]]
        below[idom[x]] += below[x]
    return idom, below


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
