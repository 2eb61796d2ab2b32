"""Instantiating rule templates into a builder (the Python engine of the rule DSL).

A template (``out * dx``, ``ct * conj(y)``) is evaluated bottom-up against an
environment that binds its names to values. Values are ``Val`` (a ref in the builder,
tagged linear when it carries tangent or cotangent flow) or ``Zero`` (a symbolic zero
with a known aval: never built through arithmetic). Emitted ops get the role
``Linearized(mask)`` when any operand is linear (mask = which), else ``Primary``.

Zeros are propagated without building anything: an op all of whose linear operands are
zero is zero; otherwise the op's own shallow zero-rewrites (``x + 0 -> x``,
``0 - x -> -x``) apply; only then is a zero materialized as a constant.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .dsl.ast import AConst, AFn, AName, AttrExpr, ATuple, Call, Expr, Num, Rewrite, Splat, Var, walk
from .dsl.attrfns import ATTR_FUNCTIONS, AVAL_FUNCTIONS
from .dsl.guards import GUARDS
from .fragments import ValRef
from .keys import NO_ATTRS, PRIMARY, Attrs, Aval, Linearized, Role, ValueKey, is_complex
from .primitives import OpError, Primitive, catalog, infer_avals


class Builder(Protocol):
    """What the AD passes emit into (a FragmentBuilder, or an eager evaluator)."""

    def add_op(self, op: str, operands: Sequence[ValRef], attrs: Attrs | None = None,
               role: Role = PRIMARY) -> list[Any]: ...

    def constant(self, value: Any, dtype: str | None = None) -> Any: ...

    def input(self, key: Any, aval: Aval) -> Any: ...

    def aval(self, ref: Any) -> Aval: ...


class ADRuleError(Exception):
    """A JVP or transpose rule is missing or failed for an op."""

    def __init__(self, op: str, rule: str, key: ValueKey | None, message: str) -> None:
        where = f" at {key!r}" if key is not None else ""
        super().__init__(f"{op}: {rule}: {message}{where}")
        self.op, self.rule, self.key = op, rule, key


@dataclass(frozen=True, slots=True)
class Val:
    ref: Any
    linear: bool
    aval: Aval


@dataclass(frozen=True, slots=True)
class Zero:
    aval: Aval


@dataclass(frozen=True, slots=True)
class _Lit:
    value: complex | float | int


Value = Val | Zero


@dataclass
class Env:
    """Bindings for one template instantiation."""

    builder: Builder
    names: Mapping[str, Value | list[Value]]
    attrs: Attrs
    avals: Mapping[str, Aval | list[Aval]]
    index: int | None = None
    rule: str = ""
    prim: str = ""
    key: ValueKey | None = None

    def fail(self, message: str) -> ADRuleError:
        return ADRuleError(self.prim, self.rule, self.key, message)


# Type rules whose operands all share one aval: a literal takes a sibling's aval.
_SAME_AVAL_RULES = {"elementwise", "compare", "make_complex"}


def instantiate(template: Expr, env: Env, expected: Aval) -> Value:
    """Evaluate ``template`` into ``env.builder``; the result must have aval ``expected``."""
    result = _eval(template, env, expected)
    if isinstance(result, _Lit):
        if result.value == 0:
            return Zero(expected)
        return Val(_constant(env, result.value, expected), False, expected)
    if result.aval != expected:
        raise env.fail(f"template gives {result.aval}, expected {expected}")
    return result


def _constant(env: Env, value: complex | float | int, aval: Aval) -> Any:
    if isinstance(value, complex) and not is_complex(aval.dtype):
        raise env.fail(f"complex literal {value} in a {aval.dtype} context")
    return env.builder.constant(np.full(aval.shape, value, dtype=aval.dtype))


def _eval(e: Expr, env: Env, expected: Aval | None) -> Value | _Lit:
    if isinstance(e, Num):
        return _Lit(e.value)
    if isinstance(e, Var):
        v = env.names.get(e.name)
        if v is None or isinstance(v, list):
            raise env.fail(f"{e.name!r} is not available here (an active operand cannot be used "
                           "as an ordinary operand of a transpose)")
        return v
    if isinstance(e, Splat):
        raise env.fail(f"{e.name}... can only appear as call arguments")
    return _call(e, env, expected)


_CONST_ONLY: dict[int, tuple[Call, bool]] = {}  # id(call) -> (call, only numbers and calls in it)


def _const_only(a: Call) -> bool:
    """Whether a template sub-call holds numbers and calls only (``sqrt(pi)``), cached
    per template node (the entry keeps the node alive, so its id is not reused)."""
    hit = _CONST_ONLY.get(id(a))
    if hit is None or hit[0] is not a:
        if len(_CONST_ONLY) > 100_000:
            _CONST_ONLY.clear()
        hit = _CONST_ONLY[id(a)] = (a, all(isinstance(n, Num | Call) for n in walk(a)))
    return hit[1]


def _args(call: Call, env: Env, same_aval: bool, expected: Aval | None) -> list[Value | _Lit]:
    """The evaluated arguments. With ``same_aval`` (the operands share one aval), a call of
    constants only (``sqrt(pi)``) takes the aval of a sibling, else ``expected``."""
    out: list[Any] = []
    deferred: list[int] = []
    names = env.names
    for a in call.args:
        t = type(a)
        if t is Var:  # the common case, inlined from _eval
            v = names.get(a.name)
            if v is None or type(v) is list:
                raise env.fail(f"{a.name!r} is not available here (an active operand cannot be used "
                               "as an ordinary operand of a transpose)")
            out.append(v)
        elif t is Splat:
            vals = names.get(a.name)
            if not isinstance(vals, list):
                raise env.fail(f"{a.name} is not a variadic operand")
            out.extend(vals)
        elif same_aval and t is Call and _const_only(a):
            deferred.append(len(out))
            out.append(a)
        else:
            out.append(_eval(a, env, None))
    if deferred:
        sibling = next((v.aval for i, v in enumerate(out) if i not in deferred and not isinstance(v, _Lit)),
                       expected)
        for i in deferred:
            out[i] = _eval(out[i], env, sibling)
    return out


def _call(call: Call, env: Env, expected: Aval | None) -> Value | _Lit:
    prim = catalog()[call.fn]
    type_rule = prim.decl.type_rule
    args = _args(call, env, type_rule in ("elementwise", "compare"), expected if type_rule == "elementwise" else None)
    attrs = _attrs(call, prim, env)
    _resolve_literals(prim, args, env, expected, call)
    vals: list[Value] = args  # type: ignore[assignment]  (no literals left)
    zero_linear = False  # a linear operand is a symbolic zero
    all_zero = True  # every linear operand is
    for a in vals:
        if type(a) is Zero:
            zero_linear = True
        elif a.linear:
            all_zero = False
    if zero_linear:
        if all_zero:
            try:
                (aval,) = prim.infer([a.aval for a in vals], attrs)
            except OpError as err:
                raise env.fail(str(err)) from None
            return Zero(aval)
        simplified = _zero_rewrite(prim, vals, env)
        if simplified is not None:
            return simplified
        vals = [Val(_constant(env, 0, a.aval), False, a.aval) if isinstance(a, Zero) else a for a in vals]
    if _identity_rules(prim):
        same = _static_identity(prim, vals, attrs)
        if same is not None:
            return same
    mask = [a.linear for a in vals]  # type: ignore[union-attr]
    any_linear = True in mask
    role = Linearized(mask) if any_linear else PRIMARY
    try:
        (ref,) = env.builder.add_op(prim.name, [a.ref for a in vals], attrs, role)  # type: ignore[union-attr]
    except OpError as err:
        raise env.fail(str(err)) from None
    return Val(ref, any_linear, env.builder.aval(ref))


def _resolve_literals(prim: Primitive, args: list, env: Env, expected: Aval | None, call: Call) -> None:
    lits = [i for i, a in enumerate(args) if isinstance(a, _Lit)]
    if not lits:
        return
    rule = prim.decl.type_rule
    sibling: Aval | None = None
    if rule in _SAME_AVAL_RULES or (rule == "select"):
        candidates = range(1, len(args)) if rule == "select" else range(len(args))
        sibling = next((args[i].aval for i in candidates if not isinstance(args[i], _Lit)), None)
        if sibling is None and expected is not None and rule in ("elementwise", "select"):
            sibling = expected
    for i in lits:
        if rule == "pad" and i == 1 and not isinstance(args[0], _Lit):
            aval = Aval((), args[0].aval.dtype)
        elif sibling is not None and not (rule == "select" and i == 0):
            aval = sibling
        else:
            raise env.fail(f"cannot infer the aval of literal {args[i].value} in {call.fn}(...) at {call.loc}")
        # A literal is a fixed constant, never a symbolic zero: only tangents are Zero.
        args[i] = Val(_constant(env, args[i].value, aval), False, aval)


def _zero_rewrite(prim: Primitive, vals: list[Value], env: Env) -> Value | None:
    """Apply a shallow, unguarded rewrite ``op(.., 0, ..) -> rhs`` of this primitive."""
    for rw in _zero_rules(prim):
        lhs = rw.lhs
        binding: dict[str, Value] = {}
        ok = len(lhs.args) == len(vals)
        for pat, v in zip(lhs.args, vals, strict=False):
            if not ok:
                break
            if isinstance(pat, Num):
                ok = isinstance(v, Zero)
            else:
                ok = not isinstance(v, Zero)
                binding[pat.name] = v
        if ok:
            sub = Env(env.builder, binding, env.attrs, env.avals, env.index, env.rule, env.prim, env.key)
            out = _eval(rw.rhs, sub, None)
            if not isinstance(out, _Lit):
                return out
    return None


@dataclass(frozen=True, slots=True)
class _Probe:
    """What a guard reads of a value, for an op not built yet."""

    op: str
    attrs: Attrs
    inputs: tuple
    aval: Aval


_STATIC_GUARDS = {"real", "identity"}
# Derived rule lists are kept on the Primitive object itself (its ``__dict__``), not by
# name: catalogs (``use_catalog``) may declare the same name differently. A plain
# attribute look-up: this runs once per op an AD pass emits.


def _identity_rules(prim: Primitive) -> list[tuple[Rewrite, list[str], int]]:
    """This primitive's rewrites ``op(a, b, ..) -> a`` whose guards depend on avals only:
    they are applied before building, so such ops are never emitted."""
    rules = prim.__dict__.get("_identity_rules")
    if rules is None:
        rules = []
        for rw in prim.rewrites:
            lhs = rw.lhs
            if (isinstance(lhs, Call) and lhs.fn == prim.name and isinstance(rw.rhs, Var)
                    and all(isinstance(a, Var) for a in lhs.args)
                    and len({a.name for a in lhs.args}) == len(lhs.args)
                    and all(g.name in _STATIC_GUARDS for g in rw.guards)):
                names = [a.name for a in lhs.args]
                rules.append((rw, names, names.index(rw.rhs.name)))
        prim.__dict__["_identity_rules"] = rules
    return rules


def _static_identity(prim: Primitive, vals: list[Value], attrs: Attrs) -> Value | None:
    for rw, names, keep in _identity_rules(prim):
        bound = dict(zip(names, vals, strict=True))
        ok = True
        for g in rw.guards:
            if g.args[0] == "self":
                (aval,) = infer_avals(prim.name, tuple(v.aval for v in vals), attrs)
                subject = _Probe(prim.name, attrs, tuple(vals), aval)
            else:
                subject = bound[g.args[0]]
            ok = GUARDS[g.name](subject)
            if not ok:
                break
        if ok:
            return vals[keep]
    return None


def _zero_rules(prim: Primitive) -> list[Rewrite]:
    rules = prim.__dict__.get("_zero_rules")  # as _identity_rules
    if rules is None:
        rules = [
            rw for rw in prim.rewrites
            if isinstance(rw.lhs, Call) and rw.lhs.fn == prim.name and not rw.guards
            and all(isinstance(a, Var) or (isinstance(a, Num) and a.value == 0) for a in rw.lhs.args)
            and any(isinstance(a, Num) for a in rw.lhs.args)
        ]
        prim.__dict__["_zero_rules"] = rules
    return rules


# --- attributes --------------------------------------------------------------------


def _attrs(call: Call, prim: Primitive, env: Env) -> Attrs:
    if not prim.attrs:
        return NO_ATTRS
    if not call.attrs and set(prim.attrs) == set(env.attrs.keys()):
        return env.attrs  # every attribute inherited: the rule's own attrs object
    given = dict(call.attrs)
    values = {}
    for name in prim.attrs:
        if name in given:
            values[name] = eval_attr(given[name], env)
        else:
            values[name] = env.attrs[name]
    return Attrs(values)


def eval_attr(a: AttrExpr, env: Env) -> Any:
    if isinstance(a, AConst):
        return a.value
    if isinstance(a, AName):
        if a.name == "i" and env.index is not None:
            return env.index
        return env.attrs[a.name]
    if isinstance(a, ATuple):
        return tuple(eval_attr(x, env) for x in a.items)
    if isinstance(a, AFn):
        fn = ATTR_FUNCTIONS[a.fn]
        if a.fn in AVAL_FUNCTIONS:
            name = a.args[0].name  # type: ignore[union-attr]
            if name not in env.avals:
                raise env.fail(f"no aval for {name!r}")
            return fn(env.avals[name])
        return fn(*(eval_attr(x, env) for x in a.args))
    raise TypeError(a)

