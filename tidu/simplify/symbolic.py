"""Symbolic differentiation inside the e-graph, from the rule DSL's JVP templates.

The JVP templates of the scalar (elementwise, attribute-free) primitives compile to
egglog rewrites ``D(v, op(x, y)) -> T[dx := D(v, x), dy := D(v, y), out := op(x, y)]``,
next to the catalog's simplification rewrites. A term's derivative is then found by
rewriting ``D(v, term)`` to saturation (bounded) and extracting the cheapest term;
two derivative terms are proven equal when they land in one e-class.

Symbols stand for finite real numbers here (as in SymPy's default algebra): guards
``real``/``finite`` hold for variables, so ``0 * x -> 0`` may fire. Use it to explore
and prove; evaluation graphs are simplified by ``materialize_merge`` instead, which
keeps IEEE semantics.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType

import numpy as np

from tidu.core.graph import MaterializedGraph
from tidu.core.keys import Attrs, Aval
from tidu.ops.catalog import Primitive, catalog
from tidu.ops.dsl.ast import Call, Expr, Num, Rewrite, Var, walk
from tidu.ops.reference import evaluate
from tidu.ops.templates import jvp_rules
from tidu.simplify.egraph.worker import run_with_big_stack
from tidu.simplify.vetting import require_vetted

_PREFIX = "E_"


def _scalar_prims() -> list[Primitive]:
    return [p for p in catalog().values()
            if p.decl.type_rule == "elementwise" and not p.attrs and not p.variadic]


def _num(v: complex | float | int) -> str:
    if isinstance(v, complex):
        raise ValueError("complex literals are not supported in the symbolic engine")
    return f"(Num {float(v)!r})"


def _term(e: Expr, env: Mapping[str, str], ok_ops: set[str]) -> str:
    if isinstance(e, Num):
        return _num(e.value)
    if isinstance(e, Var):
        return env[e.name]
    if _is_point_case(e):  # the generic branch: symbols are not pinned to a single point
        return _term(e.args[2], env, ok_ops)
    if not isinstance(e, Call) or e.fn not in ok_ops or e.attrs:
        raise _Unsupported(e)
    return f"({_PREFIX}{e.fn} " + " ".join(_term(a, env, ok_ops) for a in e.args) + ")"


def _is_point_case(e: Expr) -> bool:
    """``select(compare(a, b)[direction="EQ"], special, generic)``: a template's value at
    one isolated point (``pow``'s y-tangent at x = 0). Symbols range over the reals, as
    in SymPy, so only the generic branch has a term form here."""
    if not (isinstance(e, Call) and e.fn == "select" and len(e.args) == 3):
        return False
    pred = e.args[0]
    return (isinstance(pred, Call) and pred.fn == "compare"
            and any(k == "direction" and getattr(v, "value", None) == "EQ" for k, v in pred.attrs))


class _Unsupported(Exception):
    pass


def _jvp_rule(p: Primitive, ok_ops: set[str]) -> str | None:
    """The D rule of ``p``: its JVP as the AD engine reads it (``jvp_rules``: one rule of
    the whole op, or the sum of the operands' parts), the tangents as D terms."""
    ops = list(p.operands)
    lhs = f"({_PREFIX}{p.name} " + " ".join(ops) + ")"
    env = {o: o for o in ops} | {"d" + o: f"(D v {o})" for o in ops} | {"out": lhs}
    real = dict.fromkeys(ops, Aval((), "float64"))  # variables are real here
    _, rules = jvp_rules(p, real)
    if any(rule is None for _, rule in rules):
        return None
    try:
        parts = [_term(rule.template, env, ok_ops) for _, rule in rules if rule.template is not None]
    except _Unsupported:
        return None
    rhs = parts[0] if parts else "(Num 0.0)"
    for part in parts[1:]:
        rhs = f"({_PREFIX}add {rhs} {part})"
    return f"(rewrite (D v {lhs}) {rhs} :ruleset deriv)"


def _rewrite_rule(rw: Rewrite, ok_ops: set[str]) -> str | None:
    names = {n.name for n in walk(rw.lhs) if isinstance(n, Var)}
    env = {n: n for n in names}
    if any(g.name not in ("real", "finite") for g in rw.guards):
        return None  # only guards that symbols (finite reals) always satisfy
    try:
        lhs, rhs = _term(rw.lhs, env, ok_ops), _term(rw.rhs, env, ok_ops)
        if rw.merge:  # only where the replacement exists already: the two classes are one
            return f"(rule ((= __l {lhs}) (= __r {rhs})) ((union __l __r)) :ruleset simp)"
        return f"(rewrite {lhs} {rhs} :ruleset simp)"
    except _Unsupported:
        return None


@dataclass(frozen=True)
class RuleProgram:
    text: str
    differentiable: tuple[str, ...]  # primitives with a D rule
    skipped: tuple[str, ...]  # scalar primitives whose JVP uses non-scalar ops


def rule_program() -> RuleProgram:
    """The egglog program: datatype, D rules from JVP templates, simplification rules
    (of the active catalog)."""
    require_vetted(catalog())
    return _rule_program(catalog().serial)


@lru_cache(maxsize=4)
def _rule_program(serial: int) -> RuleProgram:
    prims = _scalar_prims()
    ok = {p.name for p in prims}
    ctors = " ".join(f"({_PREFIX}{p.name} {' '.join('T' for _ in p.operands)})" for p in prims)
    lines = [
        f"(datatype T (Var String) (Num f64) (D String T :cost 100000) {ctors})",
        "(ruleset deriv) (ruleset simp) (ruleset algebra)",
        "(rewrite (D v (Var v)) (Num 1.0) :ruleset deriv)",
        "(rule ((= e (D v (Var w))) (!= v w)) ((union e (Num 0.0))) :ruleset deriv)",
        "(rewrite (D v (Num c)) (Num 0.0) :ruleset deriv)",
    ]
    done, skipped = [], []
    for p in prims:
        r = _jvp_rule(p, ok)
        (done if r else skipped).append(p.name)
        if r:
            lines.append(r)
    for rw in catalog().all_rewrites():
        if rw.by_normalizer:  # laws the e-graph applies by normal forms: here "algebra" below
            continue
        r = _rewrite_rule(rw, ok)
        if r:
            lines.append(r)
    # Constant folding and the ring axioms needed to compare derivative forms.
    lines += [
        f"(rewrite ({_PREFIX}add (Num a) (Num b)) (Num (+ a b)) :ruleset simp)",
        f"(rewrite ({_PREFIX}mul (Num a) (Num b)) (Num (* a b)) :ruleset simp)",
        f"(rewrite ({_PREFIX}sub (Num a) (Num b)) (Num (- a b)) :ruleset simp)",
        f"(rewrite ({_PREFIX}neg (Num a)) (Num (neg a)) :ruleset simp)",
        f"(rewrite ({_PREFIX}add a b) ({_PREFIX}add b a) :ruleset algebra)",
        f"(rewrite ({_PREFIX}mul a b) ({_PREFIX}mul b a) :ruleset algebra)",
        f"(rewrite ({_PREFIX}add ({_PREFIX}add a b) c) ({_PREFIX}add a ({_PREFIX}add b c)) :ruleset algebra)",
        f"(rewrite ({_PREFIX}mul ({_PREFIX}mul a b) c) ({_PREFIX}mul a ({_PREFIX}mul b c)) :ruleset algebra)",
        f"(rewrite ({_PREFIX}sub a b) ({_PREFIX}add a ({_PREFIX}neg b)) :ruleset algebra)",
        f"(rewrite ({_PREFIX}neg a) ({_PREFIX}mul (Num -1.0) a) :ruleset algebra)",
        f"(birewrite ({_PREFIX}mul a ({_PREFIX}add b c)) ({_PREFIX}add ({_PREFIX}mul a b) ({_PREFIX}mul a c))"
        " :ruleset algebra)",
        f"(rewrite ({_PREFIX}add a a) ({_PREFIX}mul (Num 2.0) a) :ruleset algebra)",
        f"(rewrite ({_PREFIX}div a b) ({_PREFIX}mul a ({_PREFIX}div (Num 1.0) b)) :ruleset algebra)",
    ]
    return RuleProgram("\n".join(lines), tuple(done), tuple(skipped))


# --- terms --------------------------------------------------------------------------


MAX_TERM_CHARS = 1_000_000  # of one term written out


def graph_term(graph: MaterializedGraph, output: int = 0, values: Mapping[str, float] | None = None) -> str:
    """The egglog term of one output of a scalar graph. Inputs become ``(Var name)``
    unless ``values`` gives them a number (e.g. tangent seeds set to 1)."""
    values = values or {}
    ok = {p.name for p in _scalar_prims()}
    text: dict[int, str] = {}
    for i, n in enumerate(graph.nodes):
        if n.aval.shape != ():
            raise ValueError(f"the symbolic engine handles scalar graphs; node %{i} is {n.aval}")
        if n.op is None:
            name = str(n.input)
            text[i] = _num(values[name]) if name in values else f'(Var "{name}")'
        elif n.op == "constant":
            text[i] = _num(n.attrs["value"].array.item())
        elif n.op in ok:
            size = sum(len(text[j]) for j in n.inputs)
            if size > MAX_TERM_CHARS:  # a shared DAG written as a tree grows exponentially
                raise ValueError(f"the term of node %{i} written out is over {MAX_TERM_CHARS:,} characters: "
                                 "the symbolic engine writes trees, and this graph shares too much; "
                                 "use materialize_merge (which keeps the sharing) instead")
            text[i] = f"({_PREFIX}{n.op} " + " ".join(text[j] for j in n.inputs) + ")"
        else:
            raise ValueError(f"the symbolic engine has no scalar form for {n.op}")
    return text[graph.outputs[output]]


def _bindings() -> ModuleType:
    """egglog's bindings, imported at the first symbolic derivative or proof (egglog's
    package is a large part of `import tidu`)."""
    from egglog import bindings

    return bindings


def _steps(n: int) -> str:
    # Bounded steps, not `saturate`: nested saturate never returned in egglog 14 here.
    return f"(run-schedule (repeat {n} (run deriv) (run simp)))"


def derivative(term: str, var: str, *, steps: int = 40) -> str:
    """The derivative of ``term`` with respect to ``(Var var)``, as an extracted term."""
    prog = rule_program().text + f'\n(let $t (D "{var}" {term}))\n{_steps(steps)}\n(extract $t)'
    out = run_with_big_stack(lambda: _bindings().EGraph().parse_and_run_program(prog))
    text = str(out[-1]).strip()
    if "(D " in text:
        raise ValueError(f"no derivative rule applies inside {text}")
    return text


def prove_expressions_equal(a: str, b: str, *, steps: int = 40, rounds: int = 3, seconds: float = 5.0) -> bool:
    """True when ``a`` and ``b`` (terms, possibly containing D) meet in one e-class.
    Derivative and simplification rules run first; then up to ``rounds`` rounds of ring
    axioms (commutativity, associativity, distributivity), checking after each and
    stopping early past ``seconds``. False means "not proven", not "different"."""

    def work() -> bool:
        eg = _bindings().EGraph()
        eg.parse_and_run_program(f"{rule_program().text}\n(let $a {a})\n(let $b {b})\n{_steps(steps)}")
        deadline = time.perf_counter() + seconds
        for r in range(rounds + 1):
            try:
                eg.parse_and_run_program("(check (= $a $b))")
                return True
            except _bindings().EggSmolError as e:
                if "Check failed" not in str(e):
                    raise
            if r == rounds or time.perf_counter() > deadline:
                return False
            eg.parse_and_run_program("(run-schedule (run algebra) (repeat 2 (run simp)))")
        return False

    return run_with_big_stack(work)


# --- evaluating extracted terms ------------------------------------------------------

_TOKEN = re.compile(r'\(|\)|"[^"]*"|[^\s()]+')


def evaluate_term(term: str, values: Mapping[str, float]) -> float:
    """Evaluate an extracted term with float64 semantics (for checks)."""
    stack: list[list] = [[]]
    for tok in _TOKEN.findall(term):
        if tok == "(":
            stack.append([])
        elif tok == ")":
            node = stack.pop()
            head, args = node[0], node[1:]
            if head == "Var":
                val = np.float64(values[args[0]])
            elif head == "Num":
                val = np.float64(args[0])
            else:
                val = evaluate(head[len(_PREFIX):], [np.asarray(a) for a in args], Attrs())
            stack[-1].append(val)
        elif tok.startswith('"'):
            stack[-1].append(tok[1:-1])
        elif tok in ("Var", "Num") or tok.startswith(_PREFIX):
            stack[-1].append(tok)
        else:
            stack[-1].append(float(tok) if tok not in ("inf", "-inf", "NaN") else math.nan)
    return float(stack[0][0])
