"""Instantiating rule templates into a builder (the Python engine of the rule DSL).

A template (``out * dx``, ``ct * conj(y)``) is evaluated bottom-up against an
environment that binds its names to values; it is compiled once per catalog into
closures (``compiled``), and ``template_reads`` tells which names it reads. Values are ``Val`` (a ref in the builder,
tagged linear when it carries tangent or cotangent flow) or ``Zero`` (a symbolic zero
with a known aval: never built through arithmetic). Emitted ops get the role
``Linearized(mask)`` when any operand is linear (mask = which), else ``Primary``.

Zeros are propagated without building anything: an op all of whose linear operands are
zero is zero; otherwise the op's own shallow zero-rewrites (``x + 0 -> x``,
``0 - x -> -x``) apply; only then is a zero materialized as a constant.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from tidu.core.keys import NO_ATTRS, PRIMARY, Attrs, Aval, Linearized, Role, ValueKey, is_complex
from tidu.ops.catalog import Catalog, OpError, Primitive, catalog, infer_avals
from tidu.ops.dsl.ast import AConst, AFn, AName, AttrExpr, ATuple, Call, Expr, Num, Rewrite, Splat, Var, walk
from tidu.ops.dsl.attrfns import ATTR_FUNCTIONS, AVAL_FUNCTIONS
from tidu.ops.dsl.guards import GUARDS
from tidu.trace.fragments import FragmentBuilder, TapeRef, ValRef


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


# Val and Zero are made several times per emitted op: plain (not frozen) slotted classes,
# whose construction costs half that of frozen ones; nothing assigns to their fields.
@dataclass(slots=True, unsafe_hash=True)
class Val:
    ref: Any
    linear: bool
    aval: Aval


@dataclass(slots=True, unsafe_hash=True)
class Zero:
    aval: Aval


@dataclass(frozen=True, slots=True)
class _Lit:
    value: complex | float | int


Value = Val | Zero


@dataclass(slots=True)
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


_COMPLEX = ("complex64", "complex128")
# Type rules whose operands all share one aval: a literal takes a sibling's aval.
_SAME_AVAL_RULES = {"elementwise", "compare", "make_complex"}


def instantiate(template: Expr, env: Env, expected: Aval) -> Value:
    """Evaluate ``template`` into ``env.builder``; the result must have aval ``expected``."""
    return run(compiled(template), env, expected)


def run(fn: Compiled, env: Env, expected: Aval) -> Value:
    """``instantiate`` for a template already compiled (``compiled(template, cat)``)."""
    result = fn(env, expected)
    if type(result) is _Lit:
        if result.value == 0:
            return Zero(expected)
        return Val(_constant(env, result.value, expected), False, expected)
    if result.aval is not expected and result.aval != expected:
        raise env.fail(f"template gives {result.aval}, expected {expected}")
    return result


def _constant(env: Env, value: complex | float | int, aval: Aval) -> Any:
    if isinstance(value, complex) and not is_complex(aval.dtype):
        raise env.fail(f"complex literal {value} in a {aval.dtype} context")
    if not aval.shape:  # a number as is (builders cache the small constants of numbers)
        return env.builder.constant(value, aval.dtype)
    return env.builder.constant(np.full(aval.shape, value, dtype=aval.dtype))


# --- compiling templates ---------------------------------------------------------
#
# A template is compiled once per catalog into a tree of closures, one per node, each
# ``(env, expected) -> Value | _Lit``: what the node does is decided when it is compiled
# (its primitive, how its arguments are evaluated, whether literals or identity rules can
# apply), so an instantiation only runs the work that depends on the bindings.

Compiled = Callable[[Env, "Aval | None"], "Value | _Lit"]
MAX_COMPILED = 100_000  # compiled templates per catalog; past it the memo starts again


def compiled(template: Expr, cat: Catalog | None = None) -> Compiled:
    """``template`` compiled against ``cat`` (default: the active catalog); memoized on the
    catalog (the entry keeps the template alive, so its id is not reused)."""
    if cat is None:
        cat = catalog()
    hit = cat.templates.get(id(template))
    if hit is None or hit[0] is not template:
        if len(cat.templates) >= MAX_COMPILED:
            cat.templates.clear()
        hit = cat.templates[id(template)] = (template, _compile(template, cat))
    return hit[1]


_READS: dict[int, tuple[Expr, tuple[frozenset[str], bool]]] = {}


def template_reads(template: Expr) -> tuple[frozenset[str], bool]:
    """What instantiating ``template`` reads of its environment: the names, and whether
    ``Env.avals`` (attribute functions such as ``shape(x)``). Memoized by the template's
    id (the entry keeps the template alive, so its id is not reused)."""
    hit = _READS.get(id(template))
    if hit is None or hit[0] is not template:
        if len(_READS) >= MAX_COMPILED:
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


def _named(env: Env, name: str) -> Value:
    """The value bound to ``name``, or a clear error (a list is a variadic operand's)."""
    v = env.names.get(name)
    if v is None or type(v) is list:
        raise env.fail(f"{name!r} is not available here (an active operand cannot be used "
                       "as an ordinary operand of a transpose)")
    return v  # type: ignore[return-value]


def _emit(env: Env, name: str, refs: list, attrs: Attrs, role: Role, linear: bool) -> Value:
    """``name(refs)`` added to the environment's builder, as a value."""
    builder = env.builder
    try:
        (ref,) = builder.add_op(name, refs, attrs, role)
    except OpError as err:
        raise env.fail(str(err)) from None
    v = _new_value(Val)  # Val(ref, linear, aval) without the Python-level __init__ (once per op)
    v.ref = ref
    v.linear = linear
    if type(builder) is FragmentBuilder:  # the usual builder: its key's aval, read in place
        v.aval = builder.keys[ref.id].aval
    elif type(ref) is TapeRef:
        v.aval = ref.aval
    else:
        v.aval = builder.aval(ref)
    return v


_new_value = object.__new__


def _compile(e: Expr, cat: Catalog) -> Compiled:
    if isinstance(e, Num):
        lit = _Lit(e.value)
        return lambda env, expected: lit
    if isinstance(e, Var):
        name = e.name

        def var(env: Env, expected: Aval | None) -> Value:
            return _named(env, name)
        return var
    if isinstance(e, Splat):
        message = f"{e.name}... can only appear as call arguments"

        def splat(env: Env, expected: Aval | None) -> Value:
            raise env.fail(message)
        return splat
    return _compile_call(e, cat)


def _compile_args(call: Call, cat: Catalog, same_aval: bool) -> Callable[[Env, Aval | None], list]:
    """The evaluation of ``call``'s arguments. With ``same_aval`` (the operands share one
    aval), a call of constants only (``sqrt(pi)``) takes the aval of a sibling, else the
    expected one."""
    plan: list[tuple[str, Any]] = []
    for a in call.args:
        if type(a) is Splat:
            plan.append(("splat", a.name))
        elif same_aval and type(a) is Call and _const_only(a):
            plan.append(("defer", _compile(a, cat)))
        else:
            plan.append(("eval", _compile(a, cat)))
    if all(kind == "eval" for kind, _ in plan):
        # no splat, nothing deferred: a name is looked up in place, anything else evaluated
        simple = tuple((a.name if type(a) is Var else None, fn) for a, (_, fn) in zip(call.args, plan, strict=True))

        def simple_args(env: Env, expected: Aval | None) -> list:
            return [fn(env, None) if name is None else _named(env, name) for name, fn in simple]
        return simple_args

    def args(env: Env, expected: Aval | None) -> list:
        out: list[Any] = []
        deferred: list[int] = []
        for kind, what in plan:
            if kind == "eval":
                out.append(what(env, None))
            elif kind == "splat":
                vals = env.names.get(what)
                if not isinstance(vals, list):
                    raise env.fail(f"{what} is not a variadic operand")
                out.extend(vals)
            else:
                deferred.append(len(out))
                out.append(what)
        if deferred:
            sibling = next((v.aval for i, v in enumerate(out) if i not in deferred and not isinstance(v, _Lit)),
                           expected)
            for i in deferred:
                out[i] = out[i](env, sibling)
        return out
    return args


def _compile_call(call: Call, cat: Catalog) -> Compiled:
    prim = cat[call.fn]
    name = prim.name
    type_rule = prim.decl.type_rule
    args_of = _compile_args(call, cat, type_rule in ("elementwise", "compare"))
    pass_expected = type_rule == "elementwise"
    attrs_of = _compile_attrs(call, prim)
    has_literals = any(isinstance(a, Num) for a in call.args)
    identity = bool(_identity_rules(prim))
    real_identity = _real_identity_only(prim)
    build = op_builder(prim)

    plain = (attrs_of is None and not has_literals and (real_identity or not identity)
             and len(call.args) in (1, 2) and not any(type(a) is Splat for a in call.args)
             and not (type_rule in ("elementwise", "compare")
                      and any(type(a) is Call and _const_only(a) for a in call.args)))
    if plain:
        return _plain_call(call, cat, name, real_identity, build)

    def call_fn(env: Env, expected: Aval | None) -> Value | _Lit:
        vals = args_of(env, expected if pass_expected else None)
        attrs = NO_ATTRS if attrs_of is None else attrs_of(env)
        if has_literals:
            _resolve_literals(prim, vals, env, expected, call)
        return build(env, vals, attrs)
    return call_fn


def _real_identity_only(prim: Primitive) -> bool:
    """Whether the primitive's one identity rule is ``op(x) -> x when real(x)`` (conj,
    real): decided by x's dtype."""
    return [(len(names), keep, [(g.name, g.args) for g in rw.guards])
            for rw, names, keep in _identity_rules(prim)] == [(1, 0, [("real", (prim.operands[0],))])]


def op_builder(prim: Primitive) -> Callable[[Env, list, Attrs], Value]:
    """``prim`` applied to evaluated operands (no literals left): zeros, identities, then
    built. Kept on the Primitive object itself (as ``_identity_rules``)."""
    build = prim.__dict__.get("_op_builder")
    if build is not None:
        return build
    name = prim.name
    identity = bool(_identity_rules(prim))
    real_identity = _real_identity_only(prim)

    def build(env: Env, vals: list, attrs: Attrs) -> Value:
        """The op on evaluated operands (no literals left): zeros, identities, then built."""
        zero_linear = False  # a linear operand is a symbolic zero
        all_zero = True  # every linear operand is
        any_linear = False
        mask = []
        for a in vals:
            if type(a) is Zero:
                zero_linear = True
                mask.append(False)
            elif a.linear:
                all_zero = False
                any_linear = True
                mask.append(True)
            else:
                mask.append(False)
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
            vals = [Val(_constant(env, 0, a.aval), False, a.aval) if type(a) is Zero else a for a in vals]
        if real_identity:
            if len(vals) == 1 and vals[0].aval.dtype not in _COMPLEX:
                return vals[0]
        elif identity:
            same = _static_identity(prim, vals, attrs)
            if same is not None:
                return same
        role = Linearized(mask) if any_linear else PRIMARY
        return _emit(env, name, [a.ref for a in vals], attrs, role, any_linear)
    prim.__dict__["_op_builder"] = build
    return build


def _const_only(a: Call) -> bool:
    """A call of numbers and calls only (``sqrt(pi)``): it takes its aval from a sibling."""
    return all(isinstance(n, Num | Call) for n in walk(a))


_FF = (False, False)


def _plain_call(call: Call, cat: Catalog, name: str, real_identity: bool,
                build: Callable[[Env, list, Attrs], Value]) -> Compiled:
    """A call of one or two operands, without attributes, literals or identity rules
    other than ``real`` ones (most calls of most rules), compiled without building lists:
    the general ``build`` only runs when an operand is a symbolic zero."""
    getters = [(a.name, None) if type(a) is Var else (None, _compile(a, cat)) for a in call.args]

    if len(getters) == 1:
        ((n0, f0),) = getters
        role_of = (PRIMARY, Linearized([True]))

        def unary(env: Env, expected: Aval | None) -> Value:
            if n0 is None:
                a = f0(env, None)  # type: ignore[misc]
            else:  # _named, inlined
                a = env.names.get(n0)
                if a is None or type(a) is list:
                    a = _named(env, n0)
            if type(a) is Zero:
                return build(env, [a], NO_ATTRS)
            if real_identity and a.aval.dtype not in _COMPLEX:
                return a
            return _emit(env, name, [a.ref], NO_ATTRS, role_of[a.linear], a.linear)
        return unary

    (n0, f0), (n1, f1) = getters
    roles = {_FF: PRIMARY, (True, False): Linearized([True, False]), (False, True): Linearized([False, True]),
             (True, True): Linearized([True, True])}

    def binary(env: Env, expected: Aval | None) -> Value:
        names = env.names  # _named, inlined
        if n0 is None:
            a = f0(env, None)  # type: ignore[misc]
        else:
            a = names.get(n0)
            if a is None or type(a) is list:
                a = _named(env, n0)
        if n1 is None:
            b = f1(env, None)  # type: ignore[misc]
        else:
            b = names.get(n1)
            if b is None or type(b) is list:
                b = _named(env, n1)
        if type(a) is Zero or type(b) is Zero:
            return build(env, [a, b], NO_ATTRS)
        mask = (a.linear, b.linear)
        return _emit(env, name, [a.ref, b.ref], NO_ATTRS, roles[mask], mask != _FF)
    return binary


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
            out = compiled(rw.rhs)(sub, None)
            if type(out) is not _Lit:
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


def _compile_attrs(call: Call, prim: Primitive) -> Callable[[Env], Attrs] | None:
    """The attributes of ``call``'s op: those it gives, evaluated; the rest inherited from
    the rule's op (``env.attrs``). None for an op without attributes."""
    if not prim.attrs:
        return None
    declared = set(prim.attrs)
    given = dict(call.attrs)

    def attrs(env: Env) -> Attrs:
        if not given and declared == set(env.attrs.keys()):
            return env.attrs  # every attribute inherited: the rule's own attrs object
        values = {}
        for name in prim.attrs:
            if name in given:
                values[name] = eval_attr(given[name], env)
            else:
                values[name] = env.attrs[name]
        return Attrs(values)
    return attrs


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

