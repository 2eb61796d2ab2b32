"""The e-graph phase of materialize_merge: fold, ingest, rewrite under bounds, extract.

1. Constants are folded in Python (small results only).
2. The graph is written as tab-separated fact files, one input relation per
   constructor, and loaded with egglog's ``(input ...)`` plus one load rule per relation
   that unions ``(Key id)`` with the term: bulk ingest, linear in the graph (decision 3).
   Guard facts (``when finite(x)``...) are decided in Python here and loaded the same way.
3. The compiled rewrites run one iteration at a time until nothing changes or a bound
   of ``Limits`` is hit; the e-graph as it stands is then extracted.
4. Extraction is Python over ``EGraph.freeze()`` (``tidu.extract``), folding again.

egglog's native code recurses once per DAG level, so every egglog call runs in a
thread with a 1 GB stack.
"""

from __future__ import annotations

import math
import os
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from egglog.bindings import EGraph

from .dsl.guards import GUARDS
from .dsl.to_egglog import CompiledRules, compiled_rules, constructor
from .extract import Evaluate, Tables, extract, fold_node, reference_evaluate
from .graph import MaterializedGraph, MNode
from .keys import Aval, Literal
from .materialize import DEFAULT_LIMITS, Limits, paused_gc
from .primitives import Catalog, catalog

STACK_SIZE = 1 << 30


def run_with_big_stack[R](fn: Callable[[], R]) -> R:
    """Run ``fn`` in a fresh thread with a 1 GB stack (native recursion per DAG level)."""
    result: list[Any] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(fn())
        except BaseException as e:  # re-raised in the caller's thread
            error.append(e)

    old = threading.stack_size(STACK_SIZE)
    try:
        t = threading.Thread(target=target, name="tidu-egglog")
    finally:
        threading.stack_size(old)  # only this thread gets the big stack
    t.start()
    t.join()
    if error:
        raise error[0]
    return result[0]


def splat_f64(lit: Literal) -> tuple[float, float] | None:
    """(re, im) when ``lit`` is a splat (bitwise) whose value is exact in f64 and safe to
    compare in egglog: finite, and no negative zero (egglog equates -0.0 with 0.0)."""
    arr = lit.array
    size = arr.size
    if size == 0:
        return None
    if size <= 4096:
        raw, n = arr.tobytes(), arr.itemsize
        if size > 1 and raw != raw[:n] * size:
            return None
        v = arr.item(0)
    else:
        v = lit.splat()
        if v is None:
            return None
    # float32/64, complex64/128, bool and ints up to 2^53 are exact as f64 pairs
    if isinstance(v, complex):
        re, im = v.real, v.imag
    elif isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**53:
        return None
    else:
        re, im = float(v), 0.0
    for x in (re, im):
        if not math.isfinite(x) or (x == 0.0 and math.copysign(1.0, x) < 0):
            return None
    return re, im


class _GuardView:
    """What a guard predicate reads of a value: a ValueKey look-alike over MNodes."""

    __slots__ = ("node", "nodes")

    def __init__(self, node: MNode, nodes: list[MNode]) -> None:
        self.node, self.nodes = node, nodes

    @property
    def op(self) -> str | None:
        return self.node.op

    @property
    def attrs(self) -> Any:
        return self.node.attrs

    @property
    def aval(self) -> Any:
        return self.node.aval

    @property
    def inputs(self) -> tuple[MNode, ...]:
        return tuple(self.nodes[j] for j in self.node.inputs)


class _Ingest:
    """Fact rows per input relation, and the tables to decode extracted terms. Ops over
    small constants are folded on the way (``fold_s``)."""

    def __init__(self, graph: MaterializedGraph, cat: Catalog, rules: CompiledRules,
                 evaluate: Evaluate | None) -> None:
        self.cat, self.rules, self.evaluate = cat, rules, evaluate
        self.fold_s = 0.0
        self.nodes = list(graph.nodes)  # folded nodes replace their originals
        self.tables = Tables(self.nodes)
        self.rows: dict[str, list[str]] = {}
        # relation -> (column sorts, load action over columns c0, c1, ...)
        self.schema: dict[str, tuple[list[str], str]] = {}
        self.used: set[tuple[str, int]] = set()  # (op, arity) in the graph
        self._encode()
        self._guards()
        out = self._rows("Out", ["i64", "i64"], "(Out c0 (Key c1))")  # position -> class
        out.extend(f"{pos}\t{o}" for pos, o in enumerate(graph.outputs))

    def _rows(self, rel: str, sorts: list[str] | None = None, action: str = "") -> list[str]:
        """The fact rows of input relation ``rel``, declared on first use."""
        rows = self.rows.get(rel)
        if rows is None:
            assert sorts is not None
            rows = self.rows[rel] = []
            self.schema[rel] = (sorts, action)
        return rows

    def _term_rows(self, name: str, arity: int, n_attrs: int) -> list[str]:
        """Rows of a term relation: graph id, type, operand ids, attribute codes."""
        cols = [f"c{j}" for j in range(2 + arity + n_attrs)]
        kids = [f"(Key {c})" for c in cols[2 : 2 + arity]]
        term = " ".join([name, "c1", *kids, *cols[2 + arity :]])
        sorts = ["i64", "String"] + ["i64"] * arity + ["String"] * n_attrs
        return self._rows(name, sorts, f"(union (Key c0) ({term}))")

    def _constant(self, i: int, ty: str, node: MNode, lits: dict[Literal, int]) -> None:
        lit = node.attrs["value"]
        f = splat_f64(lit)
        if f is not None:
            self.tables.splats.setdefault((ty, f[0], f[1]), node)
            rows = self._rows("Const", ["i64", "String", "f64", "f64"],
                              "(union (Key c0) (Const c1 c2 c3))")
            rows.append(f"{i}\t{ty}\t{f[0]!r}\t{f[1]!r}")
            return
        j = lits.get(lit)
        if j is None:
            j = lits[lit] = len(self.tables.literals)
            self.tables.literals.append(node)
        rows = self._rows("Lit", ["i64", "String", "i64"], "(union (Key c0) (Lit c1 c2))")
        rows.append(f"{i}\t{ty}\t{j}")

    def _encode(self) -> None:
        t, nodes, evaluate = self.tables, self.nodes, self.evaluate
        tys: dict[int, str] = {}  # id(aval) -> type string (avals live as long as nodes)
        ty_of: dict[Aval, str] = {}  # aval -> type string: str() only once per distinct aval
        codes: dict[Any, str] = {}  # attribute value -> code
        node_codes: dict[tuple[str, Any], tuple[str, ...]] = {}
        lits: dict[Literal, int] = {}
        rels: dict[tuple[str, int], tuple[list[str], tuple[str, ...]]] = {}
        inputs = self._rows("Inp", ["i64", "String", "i64"], "(union (Key c0) (Inp c1 c2))")
        is_const = bytearray(len(nodes))
        for i, n in enumerate(nodes):
            ty = tys.get(id(n.aval))
            if ty is None:
                ty = ty_of.get(n.aval)
                if ty is None:
                    ty = ty_of[n.aval] = str(n.aval)
                    t.avals.setdefault(ty, n.aval)
                tys[id(n.aval)] = ty
            op = n.op
            if op is None:
                inputs.append(f"{i}\t{ty}\t{i}")  # Inp names the input by its graph id
                continue
            ins = n.inputs
            if (op != "constant" and evaluate is not None and ins and is_const[ins[0]]
                    and all([is_const[j] for j in ins])):
                t0 = time.perf_counter()
                folded = fold_node(n, [nodes[j] for j in ins], evaluate)
                self.fold_s += time.perf_counter() - t0
                if folded is not None:
                    nodes[i] = n = folded
                    op = "constant"
            if op == "constant":
                is_const[i] = 1
                self._constant(i, ty, n, lits)
                continue
            rel = rels.get((op, len(ins)))
            if rel is None:
                prim = self.cat[op]
                name = constructor(prim, len(ins))
                t.constructors[name] = (prim.name, len(ins), prim.attrs)
                self.used.add((prim.name, len(ins)))
                rel = rels[(op, len(ins))] = (self._term_rows(name, len(ins), len(prim.attrs)),
                                              prim.attrs)
            rows, attr_names = rel
            if attr_names:
                c = node_codes.get((op, n.attrs))
                if c is None:
                    c = tuple(codes.setdefault(n.attrs[a], f"a{len(codes)}") for a in attr_names)
                    node_codes[(op, n.attrs)] = c
                rows.append("\t".join((str(i), ty, *map(str, ins), *c)))
            elif len(ins) == 2:  # the common cases, formatted directly
                rows.append(f"{i}\t{ty}\t{ins[0]}\t{ins[1]}")
            elif len(ins) == 1:
                rows.append(f"{i}\t{ty}\t{ins[0]}")
            else:
                rows.append("\t".join((str(i), ty, *map(str, ins))))
        t.attr_values.update({c: v for v, c in codes.items()})
        for op, n in self.rules.constructors:
            prim = self.cat[op]
            t.constructors.setdefault(constructor(prim, n), (op, n, prim.attrs))

    def _guards(self) -> None:
        """Guard facts for the loaded values, only where a rule could use them: a guard
        on a pattern variable for operands at the positions where the variable occurs,
        a guard on ``self`` for nodes of the pattern's root op."""
        nodes = self.nodes
        sites: dict[str, list[tuple[str, int]]] = {}  # op -> (guard, operand position)
        for g, where in self.rules.class_guards.items():
            for op, pos in where:
                sites.setdefault(op, []).append((g, pos))
        for g, op, arity in self.rules.node_guards:
            sites.setdefault(op, []).append((g, -1 - arity))  # negative: on self
        decided: set[tuple[str, int]] = set()
        for i, n in enumerate(nodes):
            todo = sites.get(n.op)  # type: ignore[arg-type]
            if todo is None:
                continue
            for g, pos in todo:
                if pos < 0:  # the fact names the node's class and its operands' classes
                    arity = -1 - pos
                    if len(n.inputs) == arity and GUARDS[g](_GuardView(n, nodes)):  # type: ignore[arg-type]
                        rel = self.rules.node_guards[(g, n.op, arity)]  # type: ignore[index]
                        kids = " ".join(f"(Key c{j})" for j in range(arity + 1))
                        rows = self._rows(rel, ["i64"] * (arity + 1), f"({rel} {kids})")
                        rows.append("\t".join(map(str, (i, *n.inputs))))
                    continue
                if pos >= len(n.inputs) or (g, n.inputs[pos]) in decided:
                    continue
                j = n.inputs[pos]
                decided.add((g, j))
                if GUARDS[g](_GuardView(nodes[j], nodes)):  # type: ignore[arg-type]
                    self._rows("g_" + g, ["i64"], f"(g_{g} (Key c0))").append(str(j))

    def program(self, directory: str) -> str:
        """Declarations, input relations and load rules; writes the fact files."""
        decl = [self.rules.declarations(self.cat, self.used), "(ruleset load)"]
        for rel in sorted(self.rows):
            if not self.rows[rel]:
                continue  # egglog rejects an empty fact file
            with open(os.path.join(directory, rel + ".tsv"), "w", encoding="utf-8") as f:
                f.write("\n".join(self.rows[rel]))
                f.write("\n")
            sorts, action = self.schema[rel]
            cols = " ".join(f"c{j}" for j in range(len(sorts)))
            decl.append(f"(relation in_{rel} ({' '.join(sorts)}))")
            decl.append(f'(input in_{rel} "{rel}.tsv")')
            decl.append(f"(rule ((in_{rel} {cols})) ({action}) :ruleset load)")
        decl.append("(run load 1)")
        return "\n".join(decl)


def _egraph_size(outputs: list[Any]) -> int:
    """E-nodes in the term tables (Key, relations and guards excluded)."""
    for out in outputs:
        sizes = getattr(out, "sizes", None)
        if sizes is not None:
            return sum(n for name, n in sizes
                       if name.startswith("op_") or name in ("Inp", "Const", "Lit"))
    return 0


def _rewrite(
    eg: EGraph, limits: Limits, nodes: int, matches: dict[str, int]
) -> tuple[int, str, int]:
    """Run the ruleset one iteration at a time under ``limits``; returns (iterations,
    stop reason, e-graph size) and adds each rule's matches (by ``file:line:col``) to
    ``matches``."""
    start = time.perf_counter()
    done = 0
    while True:
        if done >= limits.iterations:
            return done, "iterations", nodes
        if nodes >= limits.nodes:
            return done, "nodes", nodes
        if time.perf_counter() - start >= limits.seconds:
            return done, "seconds", nodes
        out = eg.parse_and_run_program("(run simplify 1)\n(print-size)")
        done += 1
        nodes = _egraph_size(out)
        report = out[0].report
        for name, n in report.num_matches_per_rule.items():
            matches[name] = matches.get(name, 0) + n
        if not report.updated:
            return done, "saturated", nodes


def simplify_graph(
    graph: MaterializedGraph,
    limits: Limits = DEFAULT_LIMITS,
    *,
    fold: bool = True,
    cat: Catalog | None = None,
) -> tuple[MaterializedGraph, dict[str, Any]]:
    """Simplify ``graph`` with the catalog's rewrites and constant folding; returns the
    extracted graph and stats: ``ingest_s``, ``rewrite_s``, ``extract_s`` and ``fold_s``
    (folding, before ingest and during extraction, counted apart), ``iterations``,
    ``stop_reason`` ("saturated" or the bound that stopped it: "iterations", "nodes",
    "seconds"), ``egraph_nodes`` (e-nodes when rewriting stopped) and ``rule_matches``
    (matches per rule, by ``file:line:col``). ``fold=False`` disables constant folding;
    ``cat`` replaces the built-in catalog (and its rewrites)."""
    cat = cat or catalog()
    rules = compiled_rules(cat)
    evaluate = reference_evaluate() if fold else None
    with paused_gc():
        return run_with_big_stack(lambda: _simplify(graph, limits, cat, rules, evaluate))


def _simplify(
    graph: MaterializedGraph, limits: Limits, cat: Catalog, rules: CompiledRules,
    evaluate: Evaluate | None,
) -> tuple[MaterializedGraph, dict[str, Any]]:
    stats: dict[str, Any] = {}
    t0 = time.perf_counter()
    ing = _Ingest(graph, cat, rules, evaluate)
    with tempfile.TemporaryDirectory(prefix="tidu-egraph-") as d:
        program = ing.program(d)
        eg = EGraph(fact_directory=d)
        out = eg.parse_and_run_program(program + "\n" + "\n".join(rules.rules) + "\n(print-size)")
    t2 = time.perf_counter()
    stats.update(ingest_s=t2 - t0 - ing.fold_s)
    matches: dict[str, int] = {}
    iters, reason, size = _rewrite(eg, limits, _egraph_size(out), matches)
    t3 = time.perf_counter()
    result = extract(eg, ing.tables, graph.inputs, graph.outputs, evaluate)
    t4 = time.perf_counter()
    fold_s = ing.fold_s + result.stats.pop("fold_s", 0.0)
    stats.update(rewrite_s=t3 - t2, extract_s=t4 - t3 - (fold_s - ing.fold_s), fold_s=fold_s,
                 iterations=iters, stop_reason=reason, egraph_nodes=size,
                 rule_matches={k: v for k, v in sorted(matches.items()) if v})
    return result, stats


__all__ = ["run_with_big_stack", "simplify_graph", "splat_f64"]
