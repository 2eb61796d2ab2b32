"""The e-graph phase of materialize_merge: fold, load, saturate under budgets, extract.

1. ``constfold``: constants as ingest would load them (ops of small constants folded,
   splat broadcasts made splats, equal splats one node);
   ``negation``: negations are pushed outward in one pass (the sign rules' fixpoint),
   in place of the graph's nodes.
   ``ingest``: constants are folded in Python (small results only); the graph becomes
   fact rows, one input relation per constructor, plus guard facts.
2. ``session``: one persistent egglog e-graph per catalog holds the declarations and the
   compiled rewrites; a build loads its rows inside ``(push)``/``(pop)``.
3. ``saturate``: the rewrites of the chosen semantics run under node, match, iteration
   and time budgets that also hold inside an iteration.
4. ``extract``: the best DAG is chosen in Python over ``EGraph.freeze()``, folding again.

Every egglog call runs on one worker thread with a 1 GB stack (``worker``): egglog's
native code recurses once per DAG level, and the worker serializes concurrent builds.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from tidu.core.gcpause import paused_gc
from tidu.core.graph import MaterializedGraph
from tidu.core.progress import phase
from tidu.ops.catalog import Catalog, catalog
from tidu.ops.dsl.parse import SEMANTICS
from tidu.ops.dsl.to_egglog import GROW, RULESET, RULESETS, CompiledRules
from tidu.ops.reference import evaluate as reference_evaluate
from tidu.simplify.budget import DEFAULT_LIMITS, EGraphLimits
from tidu.simplify.dag import Collected
from tidu.simplify.egraph.constfold import fold_constants
from tidu.simplify.egraph.extract import Evaluate, extract
from tidu.simplify.egraph.frozen import FrozenGraph, KeyRing
from tidu.simplify.egraph.ingest import Ingest, splat_f64
from tidu.simplify.egraph.negation import DOUBLING_FROM, push, symmetric_ops
from tidu.simplify.egraph.normalize import ARITH, normalize_round
from tidu.simplify.egraph.prematch import DFS_MAX, shortcut
from tidu.simplify.egraph.saturate import Budget, saturate
from tidu.simplify.egraph.session import Session, session_for
from tidu.simplify.egraph.signs import ALL, NONNEG, NONZERO
from tidu.simplify.egraph.worker import run_on_worker, run_with_big_stack
from tidu.simplify.vetting import require_vetted

ASSUMPTIONS = {"positive": ALL, "nonneg": NONNEG, "nonzero": NONZERO}
COMBINED = "simplify_all"  # exact and real rewrites together
NORMALIZE_ROUNDS = 2  # real semantics: saturate, normalize, saturate again... at most this often
# real semantics: iterations of each saturation between normalization rounds. The sign
# rules' re-associations ((-x) - y -> -(x + y)) are work the normal forms do anyway:
# short rounds find fewer ops on bench/simplify.py in less time (real Hessians: 620 ops
# with rounds of 3 iterations, 632 with 6, 627 with 12; before the merge rules 648 with
# 3 and 663 with 12). A last saturation that stops on this budget goes on up to
# ``EGraphLimits.iterations``.
ROUND_ITERATIONS = 3
# further rounds when extraction folded constants the rewrites could use (at most)
REFOLD_ROUNDS = 2
EMIT_PER_CLASS = 2  # rows a normalization round may write per e-class, at most
ARITH_ARITIES = frozenset((op, 1 if op == "neg" else 2) for op in ARITH)  # what normalization writes


def _rulesets(session: Session, semantics: str) -> tuple[str, str, int]:
    """The rulesets to run for ``semantics`` (merging, growing) and the growth per match
    of the growing one."""
    rules: CompiledRules = session.rules
    if semantics == "exact":
        return RULESET, RULESET + GROW, rules.growth.get(RULESET + GROW, 0)
    if COMBINED not in session.relations:  # declared once, after the rules
        for g in ("", GROW):
            session.declare_program(f"(unstable-combined-ruleset {COMBINED}{g} "
                                    f"{' '.join(rs + g for rs in RULESETS.values())})")
        session.relations.add(COMBINED)
    return COMBINED, COMBINED + GROW, sum(v for k, v in rules.growth.items() if k.endswith(GROW))


def simplify_graph(
    graph: MaterializedGraph | Collected,
    limits: EGraphLimits = DEFAULT_LIMITS,
    *,
    fold: bool = True,
    cat: Catalog | None = None,
    semantics: str = "exact",
    assume: dict[str, str] | None = None,
) -> tuple[MaterializedGraph, dict[str, Any]]:
    """Simplify ``graph`` with the catalog's rewrites of ``semantics`` ("exact" or "real")
    and constant folding; returns the extracted graph and stats: ``ingest_s``,
    ``rewrite_s``, ``extract_s`` and ``fold_s`` (folding, before ingest and during
    extraction, counted apart), ``iterations``, ``stop_reason`` ("saturated" or the
    budget that stopped it: "iterations", "nodes", "seconds"), ``egraph_nodes`` (e-nodes
    when rewriting stopped), ``node_budget`` and ``rule_matches`` (matches per rule, by
    ``file:line:col``); ``rounds`` and ``refold_s`` where extraction folded constants and
    more rounds ran on its graph (``REFOLD_ROUNDS``). ``fold=False`` disables constant
    folding; ``cat`` replaces the built-in catalog (and its rewrites). ``assume`` maps
    input names to what is known of them ("positive", "nonneg" or "nonzero"), for the
    domain guards of real rewrites.
    ``graph`` may be collect's DAG before its nodes are made (``materialize.Collected``,
    used up here). An exact build that gives the rules nothing to match is not loaded
    into egglog at all (``tidu.simplify.egraph.prematch``): its stats say ``iterations`` 0."""
    if semantics not in SEMANTICS:
        raise ValueError(f"unknown rewrite semantics {semantics!r}; known: {', '.join(SEMANTICS)}")
    bits = assumption_bits(assume)
    cat = cat or catalog()
    require_vetted(cat)
    evaluate = reference_evaluate if fold else None
    result, stats = _simplify_round(graph, limits, cat, evaluate, semantics, bits)
    # Extraction folds the ops whose operands it gives constants (tanh of a class that
    # became 0), after the rewrites ran: what reads such a constant (0 * sin(x), 0 - y) is
    # only simplified by another round, on the graph extracted.
    refold = stats.pop("refold", False)
    for _ in range(REFOLD_ROUNDS):
        if not refold:
            break
        again, more = _simplify_round(result, limits, cat, evaluate, semantics, bits)
        refold = more.pop("refold", False)
        stats["refold_s"] = stats.get("refold_s", 0.0) + sum(more[k] for k in ("ingest_s", "rewrite_s", "extract_s"))
        if again.op_count >= result.op_count:
            break
        stats["rounds"] = stats.get("rounds", 1) + 1
        for k in ("ingest_s", "rewrite_s", "extract_s", "fold_s", "iterations"):
            stats[k] += more[k]
        result = again
    return result, stats


def _simplify_round(
    graph: MaterializedGraph | Collected, limits: EGraphLimits, cat: Catalog, evaluate: Evaluate | None,
    semantics: str, bits: dict[str, int],
) -> tuple[MaterializedGraph, dict[str, Any]]:
    """One pass of ``simplify_graph``: fold, push negations, then the shortcut or the
    e-graph. ``stats["refold"]``: extraction folded constants the rewrites did not see."""
    with paused_gc():
        t0 = time.perf_counter()
        # what the sign rules would reach, in one pass (tidu.simplify.egraph.negation)
        dag = graph if isinstance(graph, Collected) else Collected.of(graph)
        if evaluate is not None:  # what ingest would fold, folded for the passes before it
            dag = fold_constants(dag, evaluate)
        doubling = semantics == "real" or len(dag) >= DOUBLING_FROM
        dag = push(dag, doubling=doubling, zeros=semantics == "exact", symmetric=symmetric_ops(cat, semantics))
        if semantics == "exact":
            # nothing for the rules to match: the graph the e-graph would give, without it
            # (no egglog call, so not on its thread either)
            size = len(dag) if dag.keep is None else dag.keep.count(1)  # the graph's nodes
            short = shortcut(dag, cat, dfs=not isinstance(graph, Collected) or size <= DFS_MAX, doubling=doubling)
            if short is not None:
                stats = dict(ingest_s=time.perf_counter() - t0, rewrite_s=0.0, extract_s=0.0, fold_s=0.0,
                             semantics=semantics, iterations=0, stop_reason="saturated",
                             egraph_nodes=len(short.nodes), node_budget=limits.node_budget(len(dag)),
                             normalize={"rounds": 0, "unions": 0, "emitted": 0}, rule_matches={})
                return short, stats
        pushed = dag.graph()  # (made before the e-graph phase, which uses the DAG up)
        simplified, stats = run_on_worker(lambda: _simplify(dag, t0, limits, cat, evaluate, semantics, bits))
        # Extraction minimizes DAG cost greedily, and rewrites that trade one form for
        # another (distributing, the real normal forms) can leave it a choice that shares
        # less: the graph it gives may have more ops than the one it was given, which holds
        # the same values under both semantics. The smaller of the two is kept.
        stats["ops_loaded"] = pushed.op_count
        stats["kept_input"] = pushed.op_count < simplified.op_count
        if stats["kept_input"]:
            stats["refold"] = False
        return (pushed if stats["kept_input"] else simplified), stats


def assumption_bits(assume: dict[str, str] | None) -> dict[str, int]:
    """``{"x": "positive"}`` as sign bits, with a clear error for anything else."""
    out: dict[str, int] = {}
    for name, what in (assume or {}).items():
        if what not in ASSUMPTIONS:
            raise ValueError(f"assume: {name}={what!r} is not an assumption tidu knows; "
                             f"use one of {', '.join(ASSUMPTIONS)}")
        out[str(name)] = ASSUMPTIONS[what]
    return out


def _simplify(
    dag: Collected, t0: float, limits: EGraphLimits, cat: Catalog,
    evaluate: Evaluate | None, semantics: str, assume: dict[str, int],
) -> tuple[MaterializedGraph, dict[str, Any]]:
    """The e-graph phase of ``simplify_graph`` (on the egglog thread): ``dag`` after the
    negation pass."""
    session = session_for(cat, semantics)
    rulesets = _rulesets(session, semantics)
    ing = Ingest(dag, cat, session.rules, evaluate, assume, semantics=semantics)
    session.declare(ing.schema, ing.used)
    real = semantics == "real"
    if not real:
        session.install_rules(ing.used, set(ing.splat_of.values()))
    else:
        session.install_rules(ing.used | ARITH_ARITIES, None)
        session.declare_all_terms(ARITH)
        for prim, n in ARITH_ARITIES:  # the normal forms' ops must be visible to extraction
            ing.tables.constructors.setdefault(f"op_{prim}", (prim, n, ()))
    norm_stats: dict[str, int] = {"rounds": 0, "unions": 0, "emitted": 0}
    with session.scope():
        phase(f"e-graph ({semantics}): saturating")
        size = session.load(ing.rows)
        t2 = time.perf_counter()
        nodes = limits.node_budget(size)
        budget = Budget(limits.iterations, nodes, limits.seconds, limits.match_limit)
        if real:
            budget = replace(budget, iterations=min(limits.iterations, ROUND_ITERATIONS))
        outcome = saturate(session, rulesets, budget, size, count=real)  # exact: extraction counts
        if real:
            ring = KeyRing(len(ing.tables.nodes))
            for _ in range(NORMALIZE_ROUNDS):
                if outcome.size >= nodes or time.perf_counter() - t2 >= limits.seconds:
                    break
                phase(f"e-graph ({semantics}): normalizing")
                ring.reset()
                fg = FrozenGraph(session.eg, ing.tables)
                room = min(nodes - outcome.size, EMIT_PER_CLASS * fg.n_classes + 64)
                st = normalize_round(fg, ring, room, set(session.rules.class_guards), ing.tables.input_signs)
                norm_stats["rounds"] += 1
                norm_stats["unions"] += st["unions"]
                norm_stats["emitted"] += st["emitted"]
                if not any(ring.rows.values()):
                    break  # nothing new to say: the e-graph is as normal as it gets
                before = outcome.size
                size = session.load(ring.rows, ring.schema)
                if size == before and not st["unions"] and not st["facts"]:
                    break
                outcome = saturate(session, rulesets, budget, size, outcome)
            if outcome.stop_reason == "iterations" and budget.iterations < limits.iterations:
                budget = replace(budget, iterations=limits.iterations - budget.iterations)
                outcome = saturate(session, rulesets, budget, outcome.size, outcome)
        t3 = time.perf_counter()
        phase(f"e-graph ({semantics}): extracting")
        result = extract(session.eg, ing.tables, ing.inputs, ing.outputs, evaluate)
        t4 = time.perf_counter()
    fold_s = ing.fold_s + result.stats.pop("fold_s", 0.0)
    refold = result.stats.pop("folded", False)
    counted = result.stats.pop("egraph_nodes")
    if outcome.size is None:
        outcome.size = counted
    stats = dict(ingest_s=t2 - t0 - ing.fold_s, rewrite_s=t3 - t2, extract_s=t4 - t3 - (fold_s - ing.fold_s),
                 fold_s=fold_s, semantics=semantics, iterations=outcome.iterations,
                 stop_reason=outcome.stop_reason, egraph_nodes=outcome.size, node_budget=nodes,
                 normalize=norm_stats,
                 rule_matches={k: v for k, v in sorted(outcome.matches.items()) if v}, refold=refold)
    return result, stats


__all__ = ["SEMANTICS", "run_on_worker", "run_with_big_stack", "simplify_graph", "splat_f64"]
