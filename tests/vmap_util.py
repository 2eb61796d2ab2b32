"""The primitives a batched program batches: the tests that compare tidu.vmap with
jax.vmap choose their default-run cases so that these cover every primitive that the
whole table batches (the slow step checks it), and a broken batching rule fails the
default run."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tidu.ad import batching
from tidu.transforms.transformed import clear_trace_cache


@contextmanager
def batched_primitives() -> Iterator[set[str]]:
    """The primitives whose batching rule tidu.vmap applies inside the block, each with the
    operands it finds batched ("mul 10": the first batched, the second not), as a set (the
    trace cache is cleared first, so every program is traced anew)."""
    seen: set[str] = set()
    original = batching.rule_for

    def recording(op: str) -> batching.Rule:
        rule = original(op)

        def recorded(trace, key, ins, size):  # noqa: ANN001, ANN202
            seen.add(f"{op} {''.join('1' if b else '0' for _, b in ins)}")
            return rule(trace, key, ins, size)
        return recorded

    clear_trace_cache()
    batching.rule_for = recording
    try:
        yield seen
    finally:
        batching.rule_for = original


def uncovered(ops: dict[str, set[str]], default: list[str]) -> dict[str, list[str]]:
    """{primitive: the cases batching it} for the primitives that ``ops`` (case -> the
    primitives it batches) has and no case of ``default`` batches."""
    covered = set().union(*(ops[c] for c in default if c in ops))
    missing: dict[str, list[str]] = {}
    for case, prims in ops.items():
        for p in sorted(prims - covered):
            missing.setdefault(p, []).append(case)
    return missing


def greedy_cover(ops: dict[str, set[str]], first: list[str] = ()) -> list[str]:  # type: ignore[assignment]
    """Cases that together batch every primitive of ``ops``: ``first``, then the case
    adding most (a helper to choose a default set)."""
    chosen = list(first)
    left = set().union(*ops.values()) - set().union(*(ops[c] for c in chosen))
    while left:
        best = max(ops, key=lambda c: len(ops[c] & left))
        chosen.append(best)
        left -= ops[best]
    return chosen
