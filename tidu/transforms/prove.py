"""Proofs of equality in the e-graph: ``tidu.prove_equal(f, g, *args)``.

Both functions are traced over the same inputs and their outputs loaded into one
e-graph, which is saturated with the ``real`` rules (the field of real and complex
numbers, divisors assumed nonzero, domain guards respected) and normalized. Two
outputs are proved equal when they end in one e-class: every union the e-graph makes
is an instance of a rule, so a proof is never wrong within the real semantics. Normal
forms compute with exact rational coefficients, and constant folding (float
arithmetic) is off, so ``0.1 * 3`` is not confused with ``0.3``. Not proved means only
that these rules, within the bounds, did not find a proof.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tidu.core.gcpause import paused_gc
from tidu.core.graph import MaterializedGraph
from tidu.core.pytree import flatten
from tidu.simplify.budget import DEFAULT_LIMITS, EGraphLimits
from tidu.simplify.dag import collect
from tidu.simplify.egraph import simplify_graph
from tidu.transforms.staging import Stage, arg_names


@dataclass
class Proof:
    """Per output leaf: whether ``f``'s and ``g``'s values were proved equal."""

    proved: list[bool]
    reason: str = ""  # why nothing could be compared (outputs of other structure, shape...)
    stats: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.proved) and all(self.proved) and not self.reason

    def __str__(self) -> str:
        if self.reason:
            return f"not proved: {self.reason}"
        if bool(self):
            return "proved" if len(self.proved) == 1 else f"proved (all {len(self.proved)} outputs)"
        if len(self.proved) == 1:
            return "not proved"
        bad = [str(i) for i, p in enumerate(self.proved) if not p]
        return f"not proved (output{'s' if len(bad) > 1 else ''} {', '.join(bad)})"


def prove_pairs(graph: MaterializedGraph, pairs: list[tuple[int, int]],
                limits: EGraphLimits = DEFAULT_LIMITS, assume: dict[str, str] | None = None,
                ) -> tuple[list[bool], dict[str, Any]]:
    """For pairs (i, j) of output positions of ``graph``: proved equal or not."""
    out, stats = simplify_graph(graph, limits, fold=False, semantics="real", assume=assume)
    return [out.outputs[i] == out.outputs[j] for i, j in pairs], stats


def prove_equal(f: Callable[..., Any], g: Callable[..., Any], *args: Any,
                limits: EGraphLimits = DEFAULT_LIMITS, assume: dict[str, str] | None = None) -> Proof:
    """Whether ``f(*args)`` and ``g(*args)`` are equal for every value of the arguments
    (only their shapes and dtypes matter; pytrees allowed), proved by the e-graph with
    the ``real`` rules. ``assume`` states what is known of arguments by name
    ({"x": "positive"}: for domain-guarded laws such as ``exp(log(x)) = x``).
    ``bool(proof)`` is True when every output leaf is proved."""
    for name, fn in (("f", f), ("g", g)):
        if not callable(fn):
            raise TypeError(f"tidu.prove_equal: {name} must be a function, got {type(fn).__name__}")
    with Stage("prove_equal") as st:
        names = arg_names(f, len(args))
        ins = [st.add_inputs(a, n) for a, n in zip(args, names, strict=True)]
        fa, ta = flatten(f(*ins))
        gb, tb = flatten(g(*ins))
        if ta != tb:
            return Proof([], f"the outputs differ in structure ({ta} vs {tb})")
        a = st.keys(fa, "f's output")
        b = st.keys(gb, "g's output")
    known = [str(k.input) for k in st.inputs]
    unknown = [name for name in (assume or {}) if name not in known]
    if unknown:  # (a misspelt name would leave its law unproved, silently)
        raise ValueError(f"tidu.prove_equal: assume names {', '.join(map(repr, unknown))}, which "
                         f"{'is' if len(unknown) == 1 else 'are'} not an argument; the arguments are "
                         f"{', '.join(known)}")
    for i, (ka, kb) in enumerate(zip(a, b, strict=True)):
        if ka.aval != kb.aval:
            return Proof([], f"output {i}: {ka.aval} vs {kb.aval}")
    with paused_gc():
        graph = collect(st.trace.view(), a + b, st.inputs)
    proved, stats = prove_pairs(graph, [(i, len(a) + i) for i in range(len(a))], limits, assume)
    return Proof(proved, stats=stats)


__all__ = ["Proof", "prove_equal", "prove_pairs"]
