"""What a batched program batches, to choose the default-run cases of the tests that
compare tidu.vmap with jax.vmap: each test's default cases apply every batching rule,
with every pattern of batched and unbatched operands, that its whole sweep (the slow
step) applies, and a slow test checks it. A broken branch of a rule fails the default
run; each primitive's own batching (vmap against a loop) is checked in the default run
by tidu check-rules (tests/test_checkrules.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import groupby
from typing import Any

from tidu.ad import batching
from tidu.ops.catalog import InternalPrimitive, catalog
from tidu.transforms.transformed import clear_trace_cache


@contextmanager
def batching_rules() -> Iterator[set[str]]:
    """The batching rules tidu.vmap applies inside the block, each with the operands it
    finds batched, as a set of "[rule] pattern": the rule by the primitive's type
    (rules/*.rules; an internal primitive's own rule by its name); the pattern 1 for a
    batched operand, 0 for one that is not, runs of the same written once ("10": batched
    operands, then unbatched ones). The trace cache is cleared first: every program is
    traced anew."""
    seen: set[str] = set()
    original = batching.rule_for

    def recording(op: str) -> batching.Rule:
        rule = original(op)
        prim = catalog().get_primitive(op)
        kind = op if isinstance(prim, InternalPrimitive) else prim.decl.type_rule

        def recorded(trace, key, ins, size):  # noqa: ANN001, ANN202
            seen.add(f"[{kind}] {''.join(k for k, _ in groupby('1' if b else '0' for _, b in ins))}")
            return rule(trace, key, ins, size)
        return recorded

    clear_trace_cache()
    batching.rule_for = recording
    try:
        yield seen
    finally:
        batching.rule_for = original


def uncovered(rules: dict[str, set[str]], default: list[str]) -> dict[str, list[str]]:
    """{rule and pattern: the cases applying it} for those that ``rules`` (case -> what
    batching_rules recorded for it) has and no case of ``default`` applies."""
    covered = set().union(*(rules[c] for c in default if c in rules))
    missing: dict[str, list[str]] = {}
    for case, seen in rules.items():
        for r in sorted(seen - covered):
            missing.setdefault(r, []).append(case)
    return missing


def assert_default_applies_every_rule(params: list, default: list[str], run: Callable[[Any], None]) -> None:
    """The slow check of each vmap test file: every batching rule, with every pattern of
    batched operands, that ``run(param)`` applies over all of ``params`` (pytest params,
    by id) is applied by a case of ``default`` (tidu's side only: traces)."""
    rules = {}
    for p in params:
        with batching_rules() as seen:
            run(p)
        rules[p.id] = seen
    assert set(default) <= set(rules), sorted(set(default) - set(rules))
    missing = uncovered(rules, default)
    assert not missing, f"not applied by the default cases: {missing}"


def greedy_cover(rules: dict[str, set[str]], first: list[str] | None = None) -> list[str]:
    """Cases that together apply everything ``rules`` records: ``first``, then each time
    the case adding most (to choose a default set)."""
    chosen = list(first or [])
    left = set().union(*rules.values()) - set().union(*(rules[c] for c in chosen))
    while left:
        best = max(rules, key=lambda c: len(rules[c] & left))
        chosen.append(best)
        left -= rules[best]
    return chosen
