"""Checkpoint schedules for reverse mode through ``scan`` (``tidu.lax``): which carries
the forward pass stores and which steps the reverse pass runs again.

A policy is None (store every carry), an int k or ``"sqrt"`` (the carry every k steps;
each segment run again when the reverse pass reaches it), a tuple of nested segment
lengths, ``MemoryBudget(carries)`` (the fewest nested levels that fit, or the binomial
schedule where that runs fewer steps again) or ``Revolve(slots)`` (a binomial schedule,
Griewank and Walther's Revolve, made of loops). ``segment_of`` reads the nested policies
(the segment length, the policy inside a segment); ``plan_of`` gives a ``Schedule``
(blocks of stored steps and of equal segments, each reversed by its own schedule) for
the binomial ones. tidu.transforms.control builds the loops."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class MemoryBudget:
    """A checkpoint policy for ``scan``: store at most about ``carries`` carries in reverse
    mode, with as few steps run again as that allows: nested levels of equal segments
    (``levels``), or the binomial schedule of ``Revolve(carries)`` where that runs fewer
    steps again (``schedule``)."""

    carries: int

    def __post_init__(self) -> None:
        if not isinstance(self.carries, int | np.integer) or isinstance(self.carries, bool) or self.carries < 2:
            raise TypeError(f"MemoryBudget: carries must be an int >= 2, got {self.carries!r}")

    def levels(self, n: int) -> tuple[int, ...]:
        """Segment lengths, outermost first: the fewest levels L whose L * ceil(n^(1/L))
        stored carries fit the budget (L = 1: store every carry); () when n fits."""
        if n <= self.carries:
            return ()
        for depth in range(2, max(2, n.bit_length()) + 1):
            fan = math.ceil(n ** (1 / depth) - 1e-9)
            while fan ** depth < n:
                fan += 1
            if depth * fan <= self.carries or fan <= 2:
                return tuple(fan ** (depth - 1 - i) for i in range(depth - 1))
        return (2,)

    def schedule(self, n: int) -> Schedule:
        """The schedule ``scan`` runs for n steps: the nested levels, or the binomial
        schedule of ``Revolve(carries)`` where that runs fewer steps again (or where the
        levels store more than ``carries``: too small a budget for n steps)."""
        nested = _nested(n, self.levels(n))
        if not nested.recomputed:
            return nested
        try:
            binomial = Revolve(int(self.carries)).schedule(n)
        except ValueError:
            return nested
        return binomial if binomial.recomputed < nested.recomputed or nested.peak > self.carries else nested


@dataclass(frozen=True)
class Revolve:
    """A checkpoint policy for ``scan``: reverse mode storing at most ``slots`` carries at
    once and running as few steps again as that allows, by a binomial schedule (Griewank
    and Walther's Revolve): the segments reversed last, early in the scan, have the
    carries the segments reversed before them gave back, so the segment lengths follow
    the binomial recursion instead of being equal. ``schedule(n)`` is the plan.

    The schedule is made of loops (a block of equal segments is one loop, a kind of
    segment is one body), so the graph does not grow with the number of steps. Where
    steps^2 x slots <= 2^20 it is the optimum of such schedules (dynamic programming);
    beyond, each schedule has at most four blocks, laid out by the binomial recursion
    (docs/control-flow.md has the figures)."""

    slots: int

    def __post_init__(self) -> None:
        if not isinstance(self.slots, int | np.integer) or isinstance(self.slots, bool):
            raise TypeError(f"Revolve: slots must be an int (the carries stored at once), got {self.slots!r}")
        if self.slots < 1:
            raise ValueError(f"Revolve: slots must be >= 1 (the carries stored at once), got {self.slots!r}")

    def schedule(self, n: int) -> Schedule:
        """The schedule of n steps (``Schedule``: its blocks, ``recomputed``, ``peak``)."""
        slots = int(self.slots)
        if n <= slots:
            return _stored(n)
        got = _optimal(n, slots) if n * n * min(n, slots) <= _EXACT_WORK else _binomial(n, slots)
        if got is None:
            raise ValueError(f"Revolve: slots={slots} cannot reverse {n} steps (a schedule of these loops "
                             f"reverses at most 2^(slots - 1) = {2 ** (slots - 1)}); give it more slots")
        return got


Policy = int | str | tuple | MemoryBudget | Revolve | None


def segment_of(checkpoint: Policy, n: int) -> tuple[int | None, Policy]:
    """(the segment length of a checkpoint policy, the policy inside a segment); None:
    store every carry."""
    if checkpoint is None:
        return None, None
    if isinstance(checkpoint, MemoryBudget):
        checkpoint = checkpoint.levels(n) or None
        if checkpoint is None:
            return None, None
    inner: Policy = None
    if checkpoint == "sqrt":
        k = max(1, round(n ** 0.5))
    elif isinstance(checkpoint, int | np.integer) and not isinstance(checkpoint, bool) and checkpoint >= 1:
        k = int(checkpoint)
    elif (isinstance(checkpoint, tuple) and checkpoint
          and all(isinstance(v, int | np.integer) and not isinstance(v, bool) and v >= 1 for v in checkpoint)):
        levels = _fitting(tuple(int(v) for v in checkpoint), n)
        k, inner = levels[0], (levels[1:] or None)
    else:
        raise TypeError("scan: checkpoint must be None, a positive int, 'sqrt', a tuple of positive segment lengths, "
                        f"MemoryBudget(carries) or Revolve(slots), got {checkpoint!r}")
    return (k, inner) if 1 < k < n else (None, None)


def plan_of(checkpoint: Policy, n: int) -> Schedule | None:
    """The schedule of a ``Revolve`` policy, or of a ``MemoryBudget`` that chose the
    binomial one; None for the other policies (``segment_of``) and for storing every carry."""
    if isinstance(checkpoint, Revolve):
        plan = checkpoint.schedule(n)
    elif isinstance(checkpoint, MemoryBudget):
        plan = checkpoint.schedule(n)
        if plan == _nested(n, checkpoint.levels(n)):
            return None
    else:
        return None
    return plan if plan.recomputed else None


@dataclass(frozen=True)
class Schedule:
    """How reverse mode goes through the steps of a ``scan``: what a checkpoint policy's
    ``schedule(n)`` plans. ``blocks``, in order, one loop each: ``(count, None)`` is
    ``count`` steps whose carries the forward sweep stores; ``(count, segment)`` is
    ``count`` segments of ``segment.steps`` steps each, of which the forward sweep stores
    the first carries and which run again, by ``segment`` (a Schedule of their own), when
    the reverse pass reaches them. The last block is reversed first, and each block's
    stored carries go when it has been reversed.

    ``steps``: the steps covered. ``recomputed``: forward steps run again in reverse mode
    (beyond the one forward sweep; a segment runs all its steps again, its last one
    included). ``peak``: the most carries stored at once (a segment's first carry counts
    once in the block that stores it and again in the segment's own schedule). ``loops``:
    the loops the schedule writes into the graph, each kind of segment once (what the
    graph's size grows with; not the number of steps)."""

    blocks: tuple[tuple[int, Schedule | None], ...]
    steps: int = field(init=False, compare=False)
    recomputed: int = field(init=False, compare=False)
    peak: int = field(init=False, compare=False)
    loops: int = field(init=False, compare=False, repr=False)
    _inside: frozenset[Schedule] = field(init=False, compare=False, repr=False)  # the kinds of segment, all levels
    _hash: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        steps = recomputed = peak = stored = 0
        inside: set[Schedule] = set()
        for count, segment in self.blocks:
            stored += count
            if segment is None:
                steps += count
                peak = max(peak, stored)
            else:
                steps += count * segment.steps
                recomputed += count * (segment.steps + segment.recomputed)
                peak = max(peak, stored + segment.peak)
                inside |= segment._inside | {segment}
        for name, value in (("steps", steps), ("recomputed", recomputed), ("peak", peak),
                            ("loops", len(self.blocks) + sum(len(k.blocks) for k in inside)),
                            ("_inside", frozenset(inside)), ("_hash", hash(self.blocks))):
            object.__setattr__(self, name, value)

    def __hash__(self) -> int:  # (made once: schedules nest, and share their segments)
        return self._hash

    def __str__(self) -> str:
        """Blocks left to right: ``k`` for k stored steps, ``[...]`` for a segment (its own
        schedule inside), ``m*[...]`` for m such segments."""
        return " ".join(str(count) if segment is None else f"{count}*[{segment}]" if count > 1 else f"[{segment}]"
                        for count, segment in self.blocks)


def _stored(n: int) -> Schedule:
    """Every carry of n steps stored (no step runs again)."""
    return Schedule(((n, None),) if n else ())


def _merged(elements: Sequence[Schedule | None]) -> Schedule:
    """The schedule of ``elements`` in order (None: one stored step), runs of equal ones as
    one block."""
    blocks: list[tuple[int, Schedule | None]] = []
    for e in elements:
        if blocks and blocks[-1][1] == e:
            blocks[-1] = (blocks[-1][0] + 1, e)
        else:
            blocks.append((1, e))
    return Schedule(tuple(blocks))


def _fitting(levels: tuple[int, ...], n: int) -> tuple[int, ...]:
    """``levels`` for n steps: without the leading segment lengths of n steps or more (but
    the last). The rest of a level's steps after its segments (fewer than a segment) is
    reversed by the levels below, and the next level may be as long as that rest (the
    levels for 30 carries at 10^4 steps, 5^5, 5^4, ..., 5, leave 625 steps after three
    segments of 3125): that rest then takes the level after it, not every carry stored."""
    while len(levels) > 1 and levels[0] >= n:
        levels = levels[1:]
    return levels


@functools.lru_cache(maxsize=256)
def _nested(n: int, levels: tuple[int, ...]) -> Schedule:
    """The schedule of nested segment lengths (what ``checkpoint=levels`` runs): n // k
    segments of k steps, each by the levels below, then the rest by those levels."""
    levels = _fitting(levels, n)
    if not levels or not 1 < levels[0] < n:
        return _stored(n)
    k, m = levels[0], n // levels[0]
    rest = _nested(n - m * k, levels[1:]).blocks
    return Schedule(((m, _nested(k, levels[1:])), *rest))


# Up to this much work (steps^2 x slots) the schedule is the optimum, found by dynamic
# programming over every schedule of this design; beyond, the binomial layout below.
_EXACT_WORK = 1 << 20


@functools.lru_cache(maxsize=64)
def _optimal(n: int, slots: int) -> Schedule | None:
    """The schedule of n steps storing at most ``slots`` carries that runs the fewest steps
    again (None: none does). cost[mu][L], the fewest steps run again for L steps in a
    segment's (or the whole scan's) schedule with mu carries to store: its first element
    is a stored step (the rest has mu - 1) or a segment of l >= 2 steps (stored start: its
    l steps run again and its own schedule has mu - 1; the rest too)."""
    top = min(slots, n)
    inf = np.iinfo(np.int64).max // 4
    cost = np.full(n + 1, inf, np.int64)
    cost[0] = 0
    costs, firsts = [cost], [np.zeros(0, np.int64)]
    for mu in range(1, top + 1):
        prev = costs[-1]
        segment = np.arange(n + 1, dtype=np.int64) + prev  # a segment of l steps: l again, and its own
        segment[:2] = inf
        cost = np.full(n + 1, inf, np.int64)
        cost[0] = 0
        cost[1:] = prev[:-1]  # a stored step first
        first = np.zeros(n + 1, np.int64)  # 0: a stored step; l: a segment of l steps
        for length in range(mu + 1, n + 1):  # (up to mu steps: every one stored)
            options = segment[2:length + 1] + prev[length - 2::-1]
            best = int(np.argmin(options))
            if options[best] < cost[length]:
                cost[length], first[length] = options[best], best + 2
        costs.append(np.minimum(cost, inf))
        firsts.append(first)
    if costs[top][n] >= inf:
        return None
    made: dict[tuple[int, int], Schedule] = {}

    def plan(length: int, mu: int) -> Schedule:
        got = made.get((length, mu))
        if got is None:
            elements: list[Schedule | None] = []
            left, room = length, mu
            while left > room:
                size = int(firsts[room][left])
                if size:
                    elements.append(plan(size, room - 1))
                    left -= size
                else:
                    elements.append(None)
                    left -= 1
                room -= 1
            elements += [None] * left
            got = made[(length, mu)] = _merged(elements)
        return got

    return plan(n, top)


# The binomial layout: at most this many blocks of equal segments per schedule (the graph
# holds each kind of segment once: more blocks, closer to the optimum, more loops).
_BLOCKS = 4


def _grid(mu: int) -> list[int]:
    """The numbers of stored segment starts a layout of mu carries tries (all of them up
    to 48 carries; beyond, 48 spread out, denser at the start)."""
    if mu <= 49:
        return list(range(1, mu))
    return sorted({*range(1, 17), *(1 + round((mu - 2) * (i / 32) ** 1.5) for i in range(1, 33))})


@functools.lru_cache(maxsize=1 << 14)
def _capacity(mu: int, depth: int) -> int:
    """The most steps a schedule of at most ``_BLOCKS`` blocks of segments (and stored
    steps after them) covers with mu carries, with segments nested ``depth`` deep."""
    if mu <= 0:
        return 0
    if depth == 0:
        return mu
    return max([mu, *(total for total, _ in _layouts(mu, depth))])


@functools.lru_cache(maxsize=1 << 14)
def _layouts(mu: int, depth: int) -> tuple[tuple[int, tuple[tuple[int, int], ...]], ...]:
    """For q = 1, 2, ... ``_BLOCKS`` blocks: the layout covering the most steps, (steps,
    ((segments, carries for each segment's own schedule), ...)), the carries left over
    storing steps at the end. The blocks follow the binomial recursion: a segment reversed
    later (earlier in the scan) has more carries, those of the segments reversed before it
    having been given back; a block's segments all have what its last one has (one loop)."""
    grid = np.array(_grid(mu), dtype=np.int64)  # stored segment starts at the end of a block
    if not len(grid):
        return ()
    each = np.array([_capacity(mu - int(m), depth - 1) for m in grid], dtype=np.int64)
    best = grid * each  # one block: grid[j] segments of each[j] steps
    before: list[np.ndarray] = []  # per further block: where the best block before it ends
    found = []
    for q in range(1, _BLOCKS + 1):
        if q > 1:
            gain = best[:, None] + (grid[None, :] - grid[:, None]) * each[None, :]
            options = np.where(grid[:, None] < grid[None, :], gain, -1)
            before.append(np.argmax(options, axis=0))
            best = np.max(options, axis=0)
        totals = best + (mu - grid)
        j = int(np.argmax(totals))
        if best[j] < 0:
            break
        ends = [j]
        for back in reversed(before):
            ends.append(int(back[ends[-1]]))
        blocks, start = [], 0
        for e in reversed(ends):
            blocks.append((int(grid[e]) - start, mu - int(grid[e])))
            start = int(grid[e])
        found.append((int(totals[j]), tuple(blocks)))
    return tuple(found)


def _filled(n: int, mu: int, layout: tuple[tuple[int, int], ...]) -> Schedule | None:
    """n steps in ``layout``: the stored steps at the end first (they run once), then the
    segments level by level (all of them as stored steps, then one level of segments
    inside, ...: each level runs its steps once more). In the block the steps run out in,
    the segments take a step more from the stored steps at the end where there are enough
    (one kind of segment), else the block splits in two, its segments one step apart."""
    left = n - min(n, mu - sum(m for m, _ in layout))
    tail = n - left
    lengths = [0] * len(layout)
    split = None
    for level in range(2 * mu + 2):
        for b, (m, room) in enumerate(layout):
            more = _capacity(room, level) - lengths[b]
            if more <= 0 or not left:
                continue
            if left >= m * more:
                lengths[b] += more
                left -= m * more
            else:
                split, left = (b, *divmod(left, m)), 0
        if not left:
            break
    if left:
        return None
    if split is not None and split[2] and tail >= layout[split[0]][0] - split[2]:
        b, extra, over = split
        tail -= layout[b][0] - over
        split = (b, extra + 1, 0)
    blocks: list[tuple[int, Schedule | None]] = []
    for b, ((m, room), length) in enumerate(zip(layout, lengths, strict=True)):
        parts = [(m, length)]
        if split is not None and split[0] == b:
            _, extra, over = split
            parts = [(m - over, length + extra), (over, length + extra + 1)]
        for count, size in parts:
            if count and size:
                segment = _binomial(size, room, False)
                if segment is None:
                    return None
                blocks.append((count, segment))
    if tail:
        blocks.append((tail, None))
    return Schedule(tuple(blocks))


@functools.lru_cache(maxsize=4096)
def _binomial(n: int, mu: int, top: bool = True) -> Schedule | None:
    """A schedule of n steps storing at most mu carries, of ``_BLOCKS`` blocks at most (in
    each segment's schedule too), in the layout of the fewest levels that covers n steps
    (None: none does). The whole scan's schedule tries 1, 2, ... ``_BLOCKS`` blocks and
    keeps the one that runs the fewest steps again; a segment's takes the most blocks
    (trying every count at every level would cost exponentially many schedules)."""
    if n <= mu:
        return _stored(n)
    depth = 1
    while _capacity(mu, depth) < n:
        if depth > 2 * mu:
            return None
        depth += 1
    best = None
    for _, layout in _layouts(mu, depth) if top else _layouts(mu, depth)[-1:]:
        got = _filled(n, mu, layout)
        if got is not None and (best is None or got.recomputed < best.recomputed):
            best = got
    return best


__all__ = ["MemoryBudget", "Policy", "Revolve", "Schedule", "plan_of", "segment_of"]
