"""Reading rule templates: what a template reads of its environment, and which of a
primitive's rewrites apply while a template is applied (identities and zero rewrites).

The AD engine (``tidu.ad.instantiate``) turns templates into generated code from these
readings; the symbolic engine (``tidu.simplify.symbolic``) reads the JVP rules the same
way (``jvp_rules``). Derived rule lists are kept on the Primitive object itself (its
``__dict__``), not by name: catalogs (``use_catalog``) may declare the same name
differently.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidu.ops.catalog import Primitive
from tidu.ops.dsl.ast import AFn, ATuple, Call, Expr, Num, OperandRule, Rewrite, Splat, Var, walk
from tidu.ops.dsl.attrfns import AVAL_FUNCTIONS

MAX_TEMPLATES = 100_000  # memo entries (per catalog, or here); past it a memo starts again

_READS: dict[int, tuple[Expr, tuple[frozenset[str], bool]]] = {}


def template_reads(template: Expr) -> tuple[frozenset[str], bool]:
    """What applying ``template`` reads of its environment: the names, and whether avals
    (attribute functions such as ``shape(x)``). Memoized by the template's id (the entry
    keeps the template alive, so its id is not reused)."""
    hit = _READS.get(id(template))
    if hit is None or hit[0] is not template:
        if len(_READS) >= MAX_TEMPLATES:
            _READS.clear()
        names = set()
        avals = False
        for n in walk(template):
            if isinstance(n, Var | Splat):
                names.add(n.name)
            elif isinstance(n, Call):
                stack = [a for _, a in n.attrs]
                while stack:
                    a = stack.pop()
                    if isinstance(a, AFn):
                        avals = avals or a.fn in AVAL_FUNCTIONS
                        stack.extend(a.args)
                    elif isinstance(a, ATuple):
                        stack.extend(a.items)
        hit = _READS[id(template)] = (template, (frozenset(names), avals))
    return hit[1]


def const_only(a: Call) -> bool:
    """A call of numbers and calls only (``sqrt(pi)``), or a select of two numbers or
    such selects (``select(p, 1, -1)``, ``select(p, 1, select(q, 0.5, 0))``: a weight of
    the primal): as an operand of an op whose operands share one aval, it takes its aval
    from a sibling."""
    if a.fn == "select" and len(a.args) == 3:
        return all(type(n) is Num or (type(n) is Call and n.fn == "select" and const_only(n)) for n in a.args[1:])
    return all(isinstance(n, Num | Call) for n in walk(a))


STATIC_GUARDS = frozenset({"real", "identity"})  # guards decided by avals and attributes only


def identity_rules(prim: Primitive) -> list[tuple[Rewrite, list[str], int]]:
    """This primitive's rewrites ``op(a, b, ..) -> a`` whose guards depend on avals only,
    with the operands' names and the position of the one kept: they are applied before
    building, so such ops are never emitted."""
    rules = prim.__dict__.get("_identity_rules")
    if rules is None:
        rules = []
        for rw in prim.rewrites:
            lhs = rw.lhs
            if (isinstance(lhs, Call) and lhs.fn == prim.name and isinstance(rw.rhs, Var)
                    and all(isinstance(a, Var) for a in lhs.args)
                    and len({a.name for a in lhs.args}) == len(lhs.args)
                    and all(g.name in STATIC_GUARDS for g in rw.guards)):
                names = [a.name for a in lhs.args]
                rules.append((rw, names, names.index(rw.rhs.name)))
        prim.__dict__["_identity_rules"] = rules
    return rules


def real_identity_only(prim: Primitive) -> bool:
    """Whether the primitive's one identity rule is ``op(x) -> x when real(x)`` (conj,
    real): decided by x's dtype."""
    hit = prim.__dict__.get("_real_identity_only")
    if hit is None:
        hit = prim.__dict__["_real_identity_only"] = [
            (len(names), keep, [(g.name, g.args) for g in rw.guards]) for rw, names, keep in identity_rules(prim)
        ] == [(1, 0, [("real", (prim.operands[0],))])]
    return hit


def zero_rules(prim: Primitive) -> list[Rewrite]:
    """This primitive's shallow, unguarded rewrites ``op(.., 0, ..) -> rhs``: how an op
    with a symbolic zero operand simplifies before a zero is built."""
    rules = prim.__dict__.get("_zero_rules")
    if rules is None:
        rules = [
            rw for rw in prim.rewrites
            if isinstance(rw.lhs, Call) and rw.lhs.fn == prim.name and not rw.guards
            and all(isinstance(a, Var) or (isinstance(a, Num) and a.value == 0) for a in rw.lhs.args)
            and any(isinstance(a, Num) for a in rw.lhs.args)
        ]
        prim.__dict__["_zero_rules"] = rules
    return rules


def jvp_rules(prim: Primitive, avals: Mapping[str, Any]) -> tuple[bool, list[tuple[str | None, OperandRule | None]]]:
    """How a primitive's JVP reads: ``(True, [(None, rule)])`` for one rule of the whole
    op, else ``(False, [(operand, rule), ...])`` whose parts are summed (rule None: the
    operand has none; a rule whose template is None: ``zero``). ``avals`` (of the
    operands, by name) choose among guarded rules. A variadic op's last operand stands
    for the rest."""
    whole = prim.jvp_rule(None, avals)
    if whole is not None:
        return True, [(None, whole)]
    return False, [(o, prim.jvp_rule(o, avals)) for o in prim.operands]


__all__ = ["MAX_TEMPLATES", "STATIC_GUARDS", "const_only", "identity_rules", "jvp_rules", "real_identity_only",
           "template_reads", "zero_rules"]
