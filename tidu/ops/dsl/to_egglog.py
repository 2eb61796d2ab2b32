"""Compile the catalog's rewrites into egglog rules.

Term encoding (one sort ``T``):

- ``(op_NAME ty child... attr...)`` for a primitive application: ``ty`` is the String
  ``str(aval)``, each declared attribute a String naming its value (decoded through a
  Python table). Variadic primitives get one constructor per arity: ``op_concatenate_3``.
- ``(Inp ty i)`` an input, ``(Const ty re im)`` a splat constant whose value is exact in
  f64, ``(Lit ty i)`` any other constant (index into a Python table), ``(Key i)`` only to
  union the ids of the loaded graph with their terms.

A rewrite ``LHS -> RHS when g(v)`` becomes one flattened egglog ``rule``: every pattern
node is bound to a variable, pattern literals match ``Const`` of any type with that
value, and the action unions the root with the replacement. Replacement nodes inherit
the root's attribute variables; their types are inferred statically by unifying type
variables through the type rules that tie operand and result types (elementwise,
select, ...). Guards become relations filled in Python when the graph is loaded:
``g_NAME`` over one class for a guard on a pattern variable (a property of the value),
``gs_NAME_N`` over the root and its N operand classes for a guard on ``self`` (a property
of one e-node, so the fact must name the operands it was established for).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tidu.ops.catalog import Catalog, Primitive
from tidu.ops.dsl.ast import Call, Expr, Loc, Num, Rewrite, RuleSyntaxError, Splat, Var

SORT = "T"
RULESET = "simplify"  # the exact rewrites
# The ruleset of each rewrite semantics; "real" runs both (exact rewrites are real ones).
# A rule whose replacement is a pattern variable only merges classes; the others add
# e-nodes and go to the "_grow" ruleset of their semantics, which runs under match
# limits once the e-graph is large (tidu.simplify.egraph.saturate).
RULESETS = {"exact": RULESET, "real": "simplify_real"}
GROW = "_grow"

# Operand positions whose type equals the result type (-1) or each other, per type rule.
# "all" ties every operand to the result.
_TIED: dict[str, tuple[tuple[int, ...], ...] | str] = {
    "elementwise": "all",
    "select": ((-1, 1, 2),),
    "compare": ((0, 1),),
    "make_complex": ((0, 1),),
}


def constructor(prim: Primitive, arity: int) -> str:
    """The egglog constructor name of ``prim`` applied to ``arity`` operands."""
    return f"op_{prim.name}_{arity}" if prim.variadic else f"op_{prim.name}"


def f64_literal(v: float) -> str:
    """An egglog f64 literal for a finite float (repr round-trips exactly)."""
    s = repr(float(v))
    return s if any(c in s for c in ".e") else s + ".0"


def _re_im(value: complex | float | int) -> tuple[float, float]:
    c = complex(value)
    return (c.real, c.imag)


def const_term(ty: str, value: complex | float | int) -> str:
    """``(Const ty re im)``: a splat constant of type ``ty`` (a variable here)."""
    re, im = _re_im(value)
    return f"(Const {ty} {f64_literal(re)} {f64_literal(im)})"


def app(name: str, ty: str, args: list[str], attrs: list[str]) -> str:
    return f"({' '.join([name, ty, *args, *attrs])})"


@dataclass
class CompiledRules:
    """The rule text and what loading a graph must provide for it."""

    rules: list[str]
    # the ruleset of each rule (parallel to ``rules``)
    rulesets: list[str] = field(default_factory=list)
    # (primitive name, arity) of every constructor a rule mentions
    constructors: set[tuple[str, int]] = field(default_factory=set)
    # guard on a pattern variable: guard name -> {(parent op, operand position)} where the
    # variable occurs; facts are only needed for operands at those sites.
    class_guards: dict[str, set[tuple[str, int]]] = field(default_factory=dict)
    # guard on self: (guard name, root op, arity) -> relation name
    node_guards: dict[tuple[str, str, int], str] = field(default_factory=dict)
    # per ruleset: the most e-nodes one match of each of its rules can add, summed (to
    # bound how much one iteration can grow the e-graph under a match limit)
    growth: dict[str, int] = field(default_factory=dict)
    # per rule name: the most e-nodes one match can add (0 for a rule that only merges)
    rule_growth: dict[str, int] = field(default_factory=dict)
    # per rule (parallel to ``rules``): the (primitive, arity) constructors its pattern
    # needs present (a merge rule's replacement included), and those its replacement makes
    rule_needs: list[frozenset[tuple[str, int]]] = field(default_factory=list)
    rule_makes: list[frozenset[tuple[str, int]]] = field(default_factory=list)
    # ... and the splat constants, as (re, im), its pattern needs and its replacement makes
    rule_needs_constants: list[frozenset[tuple[float, float]]] = field(default_factory=list)
    rule_makes_constants: list[frozenset[tuple[float, float]]] = field(default_factory=list)

    def declarations(self, cat: Catalog, arities: set[tuple[str, int]],
                     only: set[tuple[str, int]] | None = None) -> str:
        """Sort, constructor and guard-relation declarations; ``arities`` adds the
        variadic (op, arity) pairs a graph uses; ``only``: the op constructors to declare
        (default: one per non-variadic primitive, and ``arities``)."""
        lines = [
            f"(sort {SORT})",
            f"(constructor Key (i64) {SORT})",
            f"(constructor Inp (String i64) {SORT})",
            f"(constructor Const (String f64 f64) {SORT})",
            f"(constructor Lit (String i64) {SORT})",
            f"(relation Out (i64 {SORT}))",  # output position -> class, for extraction
        ]
        # constants are Const/Lit terms, never op_constant
        if only is not None:
            wanted = set(only)
        else:
            wanted = {(p.name, len(p.operands)) for p in cat.values()
                      if not p.variadic and p.name != "constant"}
            wanted |= {(op, n) for op, n in self.constructors | arities if cat[op].variadic}
        for op, n in sorted(wanted):
            prim = cat[op]
            args = " ".join(["String"] + [SORT] * n + ["String"] * len(prim.attrs))
            lines.append(f"(constructor {constructor(prim, n)} ({args}) {SORT})")
        for g in sorted(self.class_guards):
            lines.append(f"(relation g_{g} ({SORT}))")
        for rel, n in sorted({(rel, n) for (_, _, n), rel in self.node_guards.items()}):
            lines.append(f"(relation {rel} ({' '.join([SORT] * (n + 1))}))")
        lines.extend(f"(ruleset {rs}{g})" for rs in RULESETS.values() for g in ("", GROW))
        return "\n".join(lines)


class _Types:
    """Union-find over type variable names; ``bound`` are the ones egglog binds."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}
        self.bound: list[str] = []

    def find(self, t: str) -> str:
        root = t
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while t != root:
            self.parent[t], t = root, self.parent[t]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra

    def tie(self, prim: Primitive, result: str, operands: list[str]) -> None:
        groups = _TIED.get(prim.decl.type_rule, ())
        if groups == "all":
            groups = ((-1, *range(len(operands))),)
        for group in groups:
            ts = [result if i == -1 else operands[i] for i in group if i < len(operands)]
            for t in ts[1:]:
                self.union(ts[0], t)

    def bound_name(self, t: str) -> str | None:
        root = self.find(t)
        for b in self.bound:  # first bound variable of the class: deterministic text
            if self.find(b) == root:
                return b
        return None


class _RuleCompiler:
    def __init__(self, cat: Catalog, rw: Rewrite, out: CompiledRules) -> None:
        self.cat, self.rw, self.out = cat, rw, out
        self.types = _Types()
        self.facts: list[str] = []
        self.n = 0
        self.var_sites: dict[str, list[tuple[str, int]]] = {}
        self.root_args: list[str] = []  # the root's operand terms (for guards on self)
        self.needs: set[tuple[str, int]] = set()  # constructors the pattern matches
        self.makes: set[tuple[str, int]] = set()  # constructors the replacement writes
        self.needs_constants: set[tuple[float, float]] = set()  # (re, im) of its constants
        self.makes_constants: set[tuple[float, float]] = set()

    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def prim(self, call: Call) -> Primitive:
        if any(isinstance(a, Splat) for a in call.args):
            raise RuleSyntaxError(call.loc, "variadic splats (xs...) are not supported in rewrites")
        return self.cat[call.fn]

    # --- pattern ---
    def pattern(self, e: Expr, root: bool) -> tuple[str, str]:
        """Bind ``e`` in the query; returns (its egglog term, its type variable)."""
        if isinstance(e, Var):
            return "v_" + e.name, "T_" + e.name
        if isinstance(e, Num):
            node, ty = self.fresh("_n"), self.fresh("_t")
            self.needs_constants.add(_re_im(e.value))
            self.types.bound.append(ty)
            self.facts.append(f"(= {node} {const_term(ty, e.value)})")
            return node, ty
        if isinstance(e, Splat):
            raise RuleSyntaxError(e.loc, "variadic splats (xs...) are not supported in rewrites")
        prim = self.prim(e)
        node, ty = ("_root", "_t0") if root else (self.fresh("_n"), self.fresh("_t"))
        self.types.bound.append(ty)
        args, tys = [], []
        for i, a in enumerate(e.args):
            term, t = self.pattern(a, False)
            if isinstance(a, Var):
                self.var_sites.setdefault(a.name, []).append((e.fn, i))
            args.append(term)
            tys.append(t)
        self.types.tie(prim, ty, tys)
        self.needs.add((prim.name, len(args)))
        attrs = [f"_a_{a}" if root else self.fresh("_w") for a in prim.attrs]
        self.facts.append(f"(= {node} {app(constructor(prim, len(args)), ty, args, attrs)})")
        if root:
            self.root_args = args
        return node, ty

    # --- replacement ---
    def assign(self, e: Expr, types: dict[int, str]) -> str:
        """First pass over the replacement: a type variable per node, tied by type rules."""
        if isinstance(e, Var):
            return "T_" + e.name
        if isinstance(e, Splat):
            raise RuleSyntaxError(e.loc, "variadic splats (xs...) are not supported in rewrites")
        t = self.fresh("_r")
        types[id(e)] = t
        if isinstance(e, Call):
            self.types.tie(self.prim(e), t, [self.assign(a, types) for a in e.args])
        return t

    def render(self, e: Expr, types: dict[int, str]) -> str:
        """Second pass: the replacement's egglog term, every type a bound variable."""
        if isinstance(e, Var):
            return "v_" + e.name
        ty = self.types.bound_name(types[id(e)])
        if ty is None:
            what = repr(e.value) if isinstance(e, Num) else e.fn  # type: ignore[union-attr]
            raise RuleSyntaxError(
                e.loc, f"cannot infer the type of {what} in this replacement: tie it to the "
                "pattern root or to an operand of an elementwise op")
        if isinstance(e, Num):
            self.makes_constants.add(_re_im(e.value))
            return const_term(ty, e.value)
        assert isinstance(e, Call)
        prim = self.prim(e)
        args = [self.render(a, types) for a in e.args]
        self.out.constructors.add((prim.name, len(args)))
        self.makes.add((prim.name, len(args)))
        # replacement ops inherit the root's attributes (the catalog checks they exist)
        return app(constructor(prim, len(args)), ty, args, [f"_a_{a}" for a in prim.attrs])

    def compile(self) -> str:
        rw = self.rw
        if not isinstance(rw.lhs, Call):
            raise RuleSyntaxError(rw.loc, "a rewrite's pattern must start with an op")
        root_prim = self.prim(rw.lhs)
        self.pattern(rw.lhs, True)
        self.out.constructors.add((root_prim.name, len(rw.lhs.args)))
        types: dict[int, str] = {}
        self.types.union("_t0", self.assign(rw.rhs, types))
        rhs = self.render(rw.rhs, types)
        for g in rw.guards:
            for a in g.args:
                if a == "self":
                    n = len(self.root_args)
                    rel = f"gs_{g.name}_{n}"
                    self.out.node_guards[(g.name, root_prim.name, n)] = rel
                    self.facts.append(f"({rel} _root {' '.join(self.root_args)})")
                else:
                    sites = self.var_sites.get(a)
                    if not sites:
                        raise RuleSyntaxError(g.loc, f"guard argument {a!r} is not a pattern "
                                              "variable")
                    self.out.class_guards.setdefault(g.name, set()).update(sites)
                    self.facts.append(f"(g_{g.name} v_{a})")
        if rw.merge and rhs.startswith("("):  # the replacement is matched, not made,
            # in another class (x * x is its own swap: no match)
            self.facts += [f"(= _merged {rhs})", "(!= _root _merged)"]
            rhs = "_merged"
            self.needs |= self.makes
            self.needs_constants |= self.makes_constants
            self.makes, self.makes_constants = set(), set()
        grows = rhs.count("(")
        ruleset = RULESETS[rw.semantics] + (GROW if grows else "")
        self.out.growth[ruleset] = self.out.growth.get(ruleset, 0) + grows
        self.out.rulesets.append(ruleset)
        self.out.rule_needs.append(frozenset(self.needs))
        self.out.rule_makes.append(frozenset(self.makes))
        self.out.rule_needs_constants.append(frozenset(self.needs_constants))
        self.out.rule_makes_constants.append(frozenset(self.makes_constants))
        name = rule_name(rw.loc)
        self.out.rule_growth[name] = grows
        return (f"(rule ({' '.join(self.facts)}) ((union _root {rhs})) "
                f":ruleset {ruleset} :name \"{name}\")")


def rule_name(loc: Loc) -> str:
    return f"{loc.file}:{loc.line}:{loc.col}".replace('"', "'")


def compile_rewrites(cat: Catalog, rewrites: list[Rewrite] | None = None) -> CompiledRules:
    """egglog rules for ``rewrites`` (default: every rewrite of ``cat``); raises
    ``RuleSyntaxError`` at the rule's location when one cannot be compiled."""
    out = CompiledRules([])
    for rw in cat.all_rewrites() if rewrites is None else rewrites:
        if rw.by_normalizer:  # applied by tidu.simplify.egraph.normalize
            continue
        out.rules.append(_RuleCompiler(cat, rw, out).compile())
    return out


_CACHE: dict[int, tuple[Catalog, CompiledRules]] = {}


def compiled_rules(cat: Catalog) -> CompiledRules:
    """``compile_rewrites(cat)``, cached per catalog object."""
    hit = _CACHE.get(id(cat))
    if hit is None or hit[0] is not cat:
        hit = (cat, compile_rewrites(cat))
        _CACHE[id(cat)] = hit
    return hit[1]


__all__ = ["GROW", "RULESET", "RULESETS", "CompiledRules", "compile_rewrites", "compiled_rules", "constructor",
           "f64_literal"]
