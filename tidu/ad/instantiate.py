"""Applying rule templates: the one engine of the rule DSL, templates as generated Python.

Every template (``out * dx``, ``ct * conj(y)``, ``reduce_sum(ct)[axes=...]``) runs as
straight-line Python generated from it once per catalog, by ``_Rule`` below, for every
kind of node: operands, literals, attributes, splats, identities and symbolic zeros. It
is generated in three shapes, all from the same ``_Rule``:

- ``jvp_function``: one step of ``linearize`` for a primitive (not variadic, no guarded
  rules), with its rules' names bound to the pass's values in local variables;
- ``transpose_function``: one step of a transpose sweep for a primitive at one active
  mask (``linear_transpose``'s, or the fused ``vjp``'s tape);
- ``template_function``: one template against an ``Env`` (``instantiate``): variadic ops,
  guarded rules, rewrites' right-hand sides, and every op when ``SPECIALIZED`` is False.

An op whose operands are not symbolic zeros is spelt out: emitted with its role
(``Linearized(mask)`` when an operand is linear, else ``Primary``); an elementwise op on
operands of one aval is added with that aval (``add_known``: no inference), a fixed
operand by its key. What depends on the values at run time goes through the small
run-time part below, the same for all three shapes: an op with a symbolic zero operand
(``apply_op``: zero when all its linear operands are, else its own shallow zero
rewrites, ``x + 0 -> x``, whose right-hand sides are generated code too, else the zero
built as a constant), identities guarded by avals (``op(x) -> x``), literals whose aval
is decided by their siblings (``_resolve_literals``). The source is generated from
parsed rule templates only (never from user text); each generated function's source is
on its maker's ``__source__``. ``tests/test_rule_engine.py`` checks the per-primitive steps
build what the per-template functions build.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tidu.ad.values import (
    INEXACT,
    ADRuleError,
    Env,
    Unfusable,
    Val,
    Value,
    Zero,
    accumulate,
    missing_transpose_rule,
)
from tidu.core.keys import NO_ATTRS, PRIMARY, Attrs, Aval, Linearized, Literal, is_complex
from tidu.ops.catalog import Catalog, OpError, Primitive, catalog, infer_avals
from tidu.ops.dsl.ast import AConst, AFn, AName, AttrExpr, ATuple, Call, Expr, Num, Splat, Var
from tidu.ops.dsl.attrfns import ATTR_FUNCTIONS, AVAL_FUNCTIONS
from tidu.ops.dsl.guards import GUARDS, is_identity
from tidu.ops.dsl.guards import identity as identity_guard
from tidu.ops.templates import (
    MAX_TEMPLATES,
    const_only,
    identity_rules,
    real_identity_only,
    template_reads,
    zero_rules,
)
from tidu.trace.fragments import External, FragmentBuilder, TapeRef

# False: the AD passes apply every op's rules through ``template_function`` instead of
# the per-primitive steps (tests compare the two).
SPECIALIZED = True

_COMPLEX = ("complex64", "complex128")
# Type rules whose operands all share one aval: a literal takes a sibling's aval.
_SAME_AVAL_RULES = {"elementwise", "compare", "make_complex"}


@dataclass(frozen=True, slots=True)
class _Lit:
    """A template's literal before its aval is known."""

    value: complex | float | int


Generated = Callable[[Env, "Aval | None"], "Value | _Lit"]


# --- the run-time part -------------------------------------------------------------


def instantiate(template: Expr, env: Env, expected: Aval) -> Value:
    """Apply ``template`` into ``env.builder``; the result must have aval ``expected``."""
    return run(template_function(template), env, expected)


def run(fn: Generated, env: Env, expected: Aval) -> Value:
    """``instantiate`` for a template's function (``template_function(template, cat)``)."""
    result = fn(env, expected)
    if type(result) is _Lit:
        return _literal_result(env, result.value, expected)
    if result.aval is not expected and result.aval != expected:
        raise env.fail(f"template gives {result.aval}, expected {expected}")
    return result


def _literal_result(env: Env, value: complex | float | int, expected: Aval) -> Value:
    """A template that is a literal: a symbolic zero, or the constant of ``expected``."""
    if value == 0:
        return Zero(expected)
    return Val(_constant(env, value, expected), False, expected)


def _constant(env: Env, value: complex | float | int, aval: Aval) -> Any:
    if isinstance(value, complex) and not is_complex(aval.dtype):
        raise env.fail(f"complex literal {value} in a {aval.dtype} context")
    if not aval.shape:  # a number as is (builders cache the small constants of numbers)
        return env.builder.constant(value, aval.dtype)
    return env.builder.constant(Literal.filled(value, aval.shape, aval.dtype))


def _raise(err: Exception) -> Any:
    """``raise`` as an expression (inside generated expressions)."""
    raise err


def _emit(env: Env, name: str, refs: list, attrs: Attrs, role: Any, linear: bool) -> Value:
    """``name(refs)`` added to the environment's builder, as a value."""
    builder = env.builder
    try:
        (ref,) = builder.add_op(name, refs, attrs, role)
    except OpError as err:
        raise env.fail(str(err)) from None
    if type(builder) is FragmentBuilder:  # the usual builder: its key's aval, read in place
        aval = builder.keys[ref.id].aval
    elif type(ref) is TapeRef:
        aval = ref.aval
    else:
        aval = builder.aval(ref)
    return Val(ref, linear, aval)


def apply_op(prim: Primitive) -> Callable[[Env, list, Attrs], Value]:
    """``prim`` applied to evaluated operands (no literals left) as the generated code
    does it for operands that may be symbolic zeros, splats and identities guarded by
    avals: zeros, identities, then built. Kept on the Primitive object itself."""
    build = prim.__dict__.get("_apply_op")
    if build is not None:
        return build
    name = prim.name
    identity = bool(identity_rules(prim))
    real_identity = real_identity_only(prim)

    def build(env: Env, vals: list, attrs: Attrs) -> Value:
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
    prim.__dict__["_apply_op"] = build
    return build


def _sibling(vals: list, deferred: tuple[int, ...], expected: Aval | None) -> Aval | None:
    """The aval a call of constants only (``sqrt(pi)``) takes among operands of one aval:
    the first evaluated sibling's, else the expected one."""
    return next((v.aval for i, v in enumerate(vals) if i not in deferred and type(v) is not _Lit), expected)


def _resolve_literals(prim: Primitive, args: list, env: Env, expected: Aval | None, call: Call) -> None:
    """The literals among ``args`` made constants of the aval their type rule gives."""
    lits = [i for i, a in enumerate(args) if type(a) is _Lit]
    if not lits:
        return
    rule = prim.decl.type_rule
    sibling: Aval | None = None
    if rule in _SAME_AVAL_RULES or (rule == "select"):
        candidates = range(1, len(args)) if rule == "select" else range(len(args))
        sibling = next((args[i].aval for i in candidates if type(args[i]) is not _Lit), None)
        if sibling is None and expected is not None and rule in ("elementwise", "select"):
            sibling = expected
    for i in lits:
        if rule == "pad" and i == 1 and type(args[0]) is not _Lit:
            aval = Aval((), args[0].aval.dtype)
        elif rule == "dynamic_update_slice" and i == 0 and expected is not None:  # the result's aval
            aval = expected
        elif sibling is not None and not (rule == "select" and i == 0):
            aval = sibling
        else:
            raise env.fail(f"cannot infer the aval of literal {args[i].value} in {call.fn}(...) at {call.loc}")
        # A literal is a fixed constant, never a symbolic zero: only tangents are Zero.
        args[i] = Val(_constant(env, args[i].value, aval), False, aval)


def _zero_rewrite(prim: Primitive, vals: list[Value], env: Env) -> Value | None:
    """Apply a shallow, unguarded rewrite ``op(.., 0, ..) -> rhs`` of this primitive."""
    for rw in zero_rules(prim):
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
            out = template_function(rw.rhs)(sub, None)
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


def _static_identity(prim: Primitive, vals: list[Value], attrs: Attrs) -> Value | None:
    for rw, names, keep in identity_rules(prim):
        bound = dict(zip(names, vals, strict=True))
        ok = True
        for g in rw.guards:
            if g.args[0] == "self":
                (aval,) = infer_avals(prim.name, tuple(v.aval for v in vals), attrs)
                if GUARDS[g.name] is identity_guard:  # (the rules of reshape, broadcast...): no probe made
                    ok = is_identity(prim.name, attrs, vals[0].aval, aval)
                    if not ok:
                        break
                    continue
                subject = _Probe(prim.name, attrs, tuple(vals), aval)
            else:
                subject = bound[g.args[0]]
            ok = GUARDS[g.name](subject)
            if not ok:
                break
        if ok:
            return vals[keep]
    return None


# --- generating code -----------------------------------------------------------------


@dataclass
class _V:
    """A value while generating: Python expressions for its ref, aval and linearity, and
    for a Value object (``obj``; None: made from the three when asked). ``maybe_zero``:
    the object may be a ``Zero`` (then ``ref``/``linear`` are only read after a check)."""

    ref: str
    aval: str
    linear: str  # "False", "True" or an expression
    obj: str | None
    maybe_zero: bool = False
    key: str | None = None  # what add_known may take instead of ``ref``: its key, when known


def _object_value(name: str) -> _V:
    """A runtime Value object held in local ``name`` that may be a symbolic zero."""
    return _V(f"{name}.ref", f"{name}.aval", f"{name}.linear", name, True)


def _fixed_value(key: str) -> _V:
    """A fixed (primal) value defined elsewhere, by its key held in local ``key``."""
    return _V(f"External({key})", f"{key}.aval", "False", f"Val(External({key}), False, {key}.aval)", False, key)


def _nonzero_value(name: str) -> _V:
    """A runtime Val held in local ``name``, known not to be a symbolic zero."""
    return _V(f"{name}.ref", f"{name}.aval", f"{name}.linear", name)


# what follows a ``raise`` in the generated code (never run)
_UNREACHABLE = _V("None", "None", "False", "None")

_BASE_NAMESPACE = {
    "Val": Val, "Zero": Zero, "External": External, "TapeRef": TapeRef, "Env": Env, "Attrs": Attrs,
    "FragmentBuilder": FragmentBuilder, "ADRuleError": ADRuleError, "OpError": OpError, "NO_ATTRS": NO_ATTRS,
    "np": np, "_filled": Literal.filled, "_COMPLEX": _COMPLEX, "_new": object.__new__, "_NO_AVALS": {}, "_NO_NAMES": {},
    "_raise": _raise, "_sibling": _sibling, "_resolve_literals": _resolve_literals,
    "_literal_result": _literal_result, "accumulate": accumulate, "Unfusable": Unfusable,
    "missing_transpose_rule": missing_transpose_rule, "PRIMARY_": PRIMARY,
}
_BOTH = Linearized([True, True])  # accumulate's role
_R1 = (PRIMARY, Linearized([True]))
_R2 = ((PRIMARY, Linearized([False, True])), (Linearized([True, False]), Linearized([True, True])))


class _Writer:
    """The source of one generated function, and the constants it refers to."""

    def __init__(self, cat: Catalog, kind: str) -> None:
        self.cat = cat
        # the builders the code emits into: "fragment" (a FragmentBuilder), "tape" (a
        # linearize.LinearTape), "other"; "env": the Env's builder, any of these
        self.kind = kind
        self.lines: list[str] = []
        self.ns: dict[str, Any] = dict(_BASE_NAMESPACE, _R1=_R1, _R2=_R2)
        self.count = 0

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}_{self.count}"

    def const(self, value: Any) -> str:
        name = self.fresh("K_")
        self.ns[name] = value
        return name

    def line(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def add(self, depth: int, prim: Primitive, refs: list[str], keyed: list[str], avals: list[str], role: str,
            static: bool | None, r: str, a: str, error: str) -> None:
        """Code adding ``prim(refs)`` with ``role`` to ``b`` (``static``: whether the op is
        linear, None when only known at run time): its ref in local ``r``, its aval in
        ``a``. An elementwise op on operands of one aval has that aval: added with it
        (``add_known``, no inference; operands ``keyed``, keys where known), else through
        ``add_op``."""
        name = self.const(prim.name)
        kind = self.kind
        general = depth
        if kind in ("fragment", "tape") and prim.decl.type_rule == "elementwise" and not prim.attrs \
                and not prim.variadic:
            held = []
            for x in avals:
                if x.isidentifier():
                    held.append(x)
                else:
                    held.append(self.fresh("a"))
                    self.line(depth, f"{held[-1]} = {x}")
            dtypes = self.const(prim.dtypes)
            same = " and ".join(f"({x} is {held[0]} or {x} == {held[0]})" for x in held[1:])
            self.line(depth, f"if {same + ' and ' if same else ''}{held[0]}.dtype in {dtypes}:")
            known = "fb_known" if kind == "tape" and static is False else "known"
            self.line(depth + 1, f"{r} = {known}({name}, [{', '.join(keyed)}], {role}, {held[0]})")
            self.line(depth + 1, f"{a} = {held[0]}")
            self.line(depth, "else:")
            general = depth + 1
        add = "fb_add_op" if kind == "tape" and static is False else "add_op"  # what LinearTape forwards to
        self.line(general, "try:")
        self.line(general + 1, f"({r},) = {add}({name}, [{', '.join(refs)}], NO_ATTRS, {role})")
        self.line(general, "except OpError as err:")
        self.line(general + 1, f"raise {error} from None")
        if kind == "fragment":
            self.line(general, f"{a} = keys[{r}.id].aval")
        elif kind == "tape":
            if static is True:
                self.line(general, f"{a} = {r}.aval")
            elif static is False:
                self.line(general, f"{a} = fb_keys[{r}.id].aval")
            else:
                self.line(general, f"{a} = {r}.aval if type({r}) is TapeRef else fb_keys[{r}.id].aval")
        elif kind == "env":
            self.line(general, f"{a} = keys[{r}.id].aval if keys is not None else {r}.aval "
                               f"if type({r}) is TapeRef else b.aval({r})")
        else:
            self.line(general, f"{a} = b.aval({r})")

    def accumulate(self, depth: int, total: str, part: str, target: str) -> None:
        """Code setting ``target`` to ``accumulate(b, total, part)``, spelt out when both
        are values of one aval (``add`` elementwise): added with that aval."""
        prim = self.cat.get("add")
        if self.kind not in ("fragment", "tape") or prim is None or prim.decl.type_rule != "elementwise" \
                or prim.attrs:
            self.line(depth, f"{target} = accumulate(b, {total}, {part})")
            return
        ta, r, v = self.fresh("a"), self.fresh("r"), self.fresh("v")
        dtypes, name, both = self.const(prim.dtypes), self.const(prim.name), self.const(_BOTH)
        self.line(depth, f"{ta} = {total}.aval")
        # (in a fragment, not where one of them updates a slice of zeros: accumulate adds it
        # into the slice)
        plain = "" if self.kind != "fragment" else (f" and b.key_of({total}.ref).op != 'dynamic_update_slice' "
                                                    f"and b.key_of({part}.ref).op != 'dynamic_update_slice'")
        self.line(depth, f"if type({total}) is not Zero and type({part}) is not Zero "
                         f"and ({part}.aval is {ta} or {part}.aval == {ta}) and {ta}.dtype in {dtypes}{plain}:")
        self.line(depth + 1, f"{r} = known({name}, [{total}.ref, {part}.ref], {both}, {ta})")
        self.line(depth + 1, f"{v} = _new(Val)")
        self.line(depth + 1, f"{v}.ref = {r}")
        self.line(depth + 1, f"{v}.linear = True")
        self.line(depth + 1, f"{v}.aval = {ta}")
        self.line(depth + 1, f"{target} = {v}")
        self.line(depth, "else:")
        self.line(depth + 1, f"{target} = accumulate(b, {total}, {part})")

    def function(self, name: str, inner: str, params: str = "b") -> Callable:
        """The maker ``make(params)`` of the generated function ``inner``: it binds the
        builder's methods once (per pass), then gives the function itself ("env" code
        reads its builder from its Env: ``make()``)."""
        lines = [f"def make({params}):"]
        if self.kind != "env":
            lines.append("    add_op = b.add_op")
        if self.kind == "fragment":
            lines += ["    keys = b.keys", "    known = b.add_known"]
        elif self.kind == "tape":
            lines += ["    fb_add_op = b.fb.add_op", "    fb_keys = b.fb.keys", "    known = b.add_known",
                      "    fb_known = b.fb.add_known"]
        if params == "b, tangent":
            lines.append("    get = tangent.get")
        lines += ["    " + line for line in self.lines]
        lines.append(f"    return {inner}")
        source = "\n".join(lines) + "\n"
        code = compile(source, f"<tidu.ad.instantiate {name}>", "exec")
        scope: dict[str, Any] = {}
        exec(code, self.ns, scope)  # noqa: S102 (source generated above from parsed rules)
        make = scope["make"]
        make.__source__ = source  # for reading what was generated
        return make


@dataclass
class _Context:
    """Python expressions for what a rule reads besides its names: the Env for the
    run-time part (made only where that is taken), the fields an error names, the rule's
    op attributes, the avals of names (by name; a str: a mapping read at run time), the
    names read at run time (None: only ``bindings``), the variadic part's index."""

    env: str
    prim: str
    label: str
    key: str
    attrs: str
    avals: dict[str, str] | str
    names: str | None = None
    index: str | None = None


class _Rule:
    """Writes the code of one template: ``bindings`` are the names bound to values (others
    are looked up in ``ctx.names`` at run time, or fail there)."""

    def __init__(self, w: _Writer, bindings: dict[str, _V], ctx: _Context) -> None:
        self.w = w
        self.bindings = dict(bindings)
        self.ctx = ctx
        self.maybe_zero = True  # whether the result of ``root`` may be a symbolic zero

    def error(self, message: str) -> str:
        c = self.ctx
        return f"ADRuleError({c.prim}, {c.label}, {c.key}, {message})"

    def fail(self, depth: int, message: str) -> _V:
        """Code raising the rule's error ``message`` (a constant string) here."""
        self.w.line(depth, f"raise {self.error(repr(message))}")
        return _UNREACHABLE

    def obj(self, v: _V, depth: int) -> str:
        """An expression of ``v`` as a Value object (a local, made here if needed)."""
        if v.obj is not None:
            return v.obj
        name = self.w.fresh("v")
        w = self.w
        w.line(depth, f"{name} = _new(Val)")
        w.line(depth, f"{name}.ref = {v.ref}")
        w.line(depth, f"{name}.linear = {v.linear}")
        w.line(depth, f"{name}.aval = {v.aval}")
        return name

    def value(self, e: Expr, depth: int, expected: str) -> _V:
        """Code evaluating ``e`` at indentation ``depth``; ``expected`` is the expression of
        the aval it should have ("None" below the root: only literals and calls of
        constants read it)."""
        t = type(e)
        if t is Var:
            return self._name(e.name, depth)
        if t is Splat:
            return self.fail(depth, f"{e.name}... can only appear as call arguments")
        if t is not Call:
            raise TypeError(f"a literal is evaluated by its call: {e!r}")
        prim = self.w.cat[e.fn]
        if self._inline(e, prim):
            return self._call(e, prim, depth)
        return self._general(e, prim, depth, expected)

    def _name(self, name: str, depth: int) -> _V:
        v = self.bindings.get(name)
        if v is not None:
            return _V(v.ref, v.aval, v.linear, v.obj, v.maybe_zero, v.key)
        message = (f"{name!r} is not available here (an active operand cannot be used "
                   "as an ordinary operand of a transpose)")
        if self.ctx.names is None:
            return self.fail(depth, message)
        n = self.w.fresh("n")
        self.w.line(depth, f"{n} = {self.ctx.names}.get({name!r})")
        self.w.line(depth, f"if {n} is None or type({n}) is list:")
        self.fail(depth + 1, message)
        v = self.bindings[name] = _object_value(n)  # looked up once: the code is straight-line here
        return v

    def _inline(self, call: Call, prim: Primitive) -> bool:
        """Whether ``call`` is spelt out: one or two operands, no attributes, no splat,
        no identity rule but ``real``, and literals only beside a non-literal operand
        of an elementwise op."""
        args = call.args
        if prim.attrs or prim.variadic or not 1 <= len(args) <= 2 or len(prim.operands) != len(args):
            return False
        if any(type(a) is Splat for a in args):
            return False
        if identity_rules(prim) and not real_identity_only(prim):
            return False
        rule = prim.decl.type_rule
        if rule in ("elementwise", "compare") and any(type(a) is Call and const_only(a) for a in args):
            return False
        literals = [a for a in args if type(a) is Num]
        if literals:
            if rule != "elementwise" or len(literals) == len(args):
                return False
            if any(isinstance(a.value, complex) for a in literals):
                return False
        return True

    def _general(self, call: Call, prim: Primitive, depth: int, expected: str) -> _V:
        """Any other call: its operands in a list (splats spread, literals kept as such,
        calls of constants evaluated last with a sibling's aval), its attributes, then
        the run-time part (literals, zeros, identities) and the op."""
        w = self.w
        rule = prim.decl.type_rule
        same = rule in ("elementwise", "compare")
        branches = rule == "select"  # a select's branches share one aval (its predicate has its own)
        vs = w.fresh("vs")
        w.line(depth, f"{vs} = []")
        deferred: list[tuple[Call, str]] = []
        for position, a in enumerate(call.args):
            ta = type(a)
            if ta is Splat:
                message = f"{a.name} is not a variadic operand"
                if self.ctx.names is None:
                    self.fail(depth, message)
                    continue
                s = w.fresh("s")
                w.line(depth, f"{s} = {self.ctx.names}.get({a.name!r})")
                w.line(depth, f"if type({s}) is not list:")
                self.fail(depth + 1, message)
                w.line(depth, f"{vs}.extend({s})")
            elif (same or (branches and position > 0)) and ta is Call and const_only(a):
                ix = w.fresh("ix")
                w.line(depth, f"{ix} = len({vs})")
                w.line(depth, f"{vs}.append(None)")
                deferred.append((a, ix))
            elif ta is Num:
                w.line(depth, f"{vs}.append({w.const(_Lit(a.value))})")
            else:
                v = self.value(a, depth, "None")
                w.line(depth, f"{vs}.append({self.obj(v, depth)})")
        if deferred:
            sibling = w.fresh("a")
            positions = ("0, " if branches else "") + "".join(f"{ix}, " for _, ix in deferred)
            w.line(depth, f"{sibling} = _sibling({vs}, ({positions}), "
                          f"{expected if rule in ('elementwise', 'select') else 'None'})")
            for a, ix in deferred:
                v = self.value(a, depth, sibling)
                w.line(depth, f"{vs}[{ix}] = {self.obj(v, depth)}")
        attrs = self._attrs(call, prim, depth)
        if any(type(a) is Num for a in call.args):
            w.line(depth, f"_resolve_literals({w.const(prim)}, {vs}, {self.ctx.env}, {expected}, {w.const(call)})")
        out = w.fresh("v")
        w.line(depth, f"{out} = {w.const(apply_op(prim))}({self.ctx.env}, {vs}, {attrs})")
        return _object_value(out)

    def _attrs(self, call: Call, prim: Primitive, depth: int) -> str:
        """An expression of the attributes of ``call``'s op: those it gives, evaluated;
        the rest inherited from the rule's op (the rule's own attrs object when it gives
        none and the two ops declare the same ones)."""
        if not prim.attrs:
            return "NO_ATTRS"
        w, own = self.w, self.ctx.attrs
        given = dict(call.attrs)
        at = w.fresh("at")
        if not given:
            inherited = ", ".join(f"{n!r}: {own}[{n!r}]" for n in prim.attrs)
            w.line(depth, f"{at} = {own} if {w.const(set(prim.attrs))} == set({own}.keys()) "
                          f"else Attrs({{{inherited}}})")
        else:
            items = ", ".join(f"{n!r}: {self._attr(given[n]) if n in given else f'{own}[{n!r}]'}"
                              for n in prim.attrs)
            w.line(depth, f"{at} = Attrs({{{items}}})")
        return at

    def _attr(self, a: AttrExpr) -> str:
        """An expression of one attribute expression's value."""
        w, ctx = self.w, self.ctx
        if isinstance(a, AConst):
            return w.const(a.value)
        if isinstance(a, AName):
            if a.name == "i" and ctx.index is not None:
                return f"({ctx.index} if {ctx.index} is not None else {ctx.attrs}['i'])"
            return f"{ctx.attrs}[{a.name!r}]"
        if isinstance(a, ATuple):
            return "(" + "".join(f"{self._attr(x)}, " for x in a.items) + ")"
        if isinstance(a, AFn):
            fn = w.const(ATTR_FUNCTIONS[a.fn])
            if a.fn not in AVAL_FUNCTIONS:
                return f"{fn}({', '.join(self._attr(x) for x in a.args)})"
            name = a.args[0].name  # type: ignore[union-attr]
            missing = f"_raise({self.error(repr(f'no aval for {name!r}'))})"
            if isinstance(ctx.avals, dict):
                return f"{fn}({ctx.avals[name]})" if name in ctx.avals else missing
            return f"({fn}({ctx.avals}[{name!r}]) if {name!r} in {ctx.avals} else {missing})"
        raise TypeError(a)

    def _call(self, call: Call, prim: Primitive, depth: int) -> _V:
        w = self.w
        vals: list[_V | None] = [None if type(a) is Num else self.value(a, depth, "None") for a in call.args]
        if any(v is None for v in vals):  # literals take their sibling's aval
            sibling = next(v for v in vals if v is not None)
            av = w.fresh("a")
            w.line(depth, f"{av} = {sibling.aval}")
            for i, a in enumerate(call.args):
                if type(a) is Num:
                    c = w.fresh("r")
                    lit = w.const(a.value)
                    w.line(depth, f"{c} = b.constant({lit}, {av}.dtype) if not {av}.shape "
                                  f"else b.constant(_filled({lit}, {av}.shape, {av}.dtype))")
                    vals[i] = _V(c, av, "False", None)
        operands: list[_V] = vals  # type: ignore[assignment]
        maybe = [v for v in operands if v.maybe_zero]
        if not maybe:
            return self._build(prim, operands, depth)
        # a symbolic zero operand: the run-time apply_op; else the op spelt out
        out = w.fresh("v")
        build = w.const(apply_op(prim))
        w.line(depth, "if " + " or ".join(f"type({v.obj}) is Zero" for v in maybe) + ":")
        objs = ", ".join(self.obj(v, depth + 1) for v in operands)
        w.line(depth + 1, f"{out} = {build}({self.ctx.env}, [{objs}], NO_ATTRS)")
        w.line(depth, "else:")
        fast = self._build(prim, operands, depth + 1)
        w.line(depth + 1, f"{out} = {self.obj(fast, depth + 1)}")
        return _object_value(out)

    def _build(self, prim: Primitive, operands: list[_V], depth: int) -> _V:
        """The op on operands that are not symbolic zeros: a ``real`` identity, or emitted."""
        w = self.w
        lins = []
        for v in operands:
            if v.linear in ("False", "True") or v.linear.isidentifier():
                lins.append(v.linear)
            else:
                lin = w.fresh("l")
                w.line(depth, f"{lin} = {v.linear}")
                lins.append(lin)
        r, a = w.fresh("r"), w.fresh("a")
        if real_identity_only(prim):  # op(x) -> x when x is real
            (v,) = operands
            lin_out = lins[0]  # the operand's, whichever branch is taken
            w.line(depth, f"if {v.aval}.dtype not in _COMPLEX:")
            if v.key is not None:  # a value known by its key: its ref only made if asked
                k = w.fresh("k")
                w.line(depth + 1, f"{r}, {k}, {a} = None, {v.key}, {v.aval}")
                w.line(depth, "else:")
                self._emit(prim, operands, lins, r, a, depth + 1)
                w.line(depth + 1, f"{k} = {r}")
                return _V(f"({r} if {r} is not None else External({k}))", a, lin_out, None, False, k)
            w.line(depth + 1, f"{r}, {a} = {v.ref}, {v.aval}")
            w.line(depth, "else:")
            self._emit(prim, operands, lins, r, a, depth + 1)
        else:
            lin_out = self._emit(prim, operands, lins, r, a, depth)
        return _V(r, a, lin_out, None)

    def _emit(self, prim: Primitive, operands: list[_V], lins: list[str], r: str, a: str, depth: int) -> str:
        """Code adding the op to ``b``: its ref in local ``r``, its aval in ``a``; returns
        the expression of its linearity."""
        w = self.w
        dynamic = [x for x in lins if x not in ("False", "True")]
        if len(lins) == 1:
            role = f"_R1[{lins[0]}]"
            linear = lins[0]
        else:
            role = f"_R2[{lins[0]}][{lins[1]}]"
            linear = " or ".join(x for x in lins if x != "False") or "False"
            if "True" in lins:
                linear = "True"
        if not dynamic:
            mask = [x == "True" for x in lins]
            role = "PRIMARY_" if not any(mask) else w.const(Linearized(mask))
        static = None if dynamic else ("True" in lins)  # whether the op is linear, when known
        w.add(depth, prim, [v.ref for v in operands], [v.key or v.ref for v in operands], [v.aval for v in operands],
              role, static, r, a, self.error("str(err)"))
        if linear not in ("False", "True") and not linear.isidentifier():
            lin_out = w.fresh("l")
            w.line(depth, f"{lin_out} = {linear}")
            linear = lin_out
        return linear

    def root(self, template: Expr, depth: int, expected: str) -> str:
        """Code for the whole template as ``run`` does it: its result checked against the
        aval in local ``expected``; returns the result's object expression."""
        if type(template) is Num:
            out = self.w.fresh("v")
            self.w.line(depth, f"{out} = _literal_result({self.ctx.env}, {self.w.const(template.value)}, {expected})")
            return out
        v = self.value(template, depth, expected)
        out = self.obj(v, depth)
        self.maybe_zero = v.maybe_zero
        self.w.line(depth, f"if {v.aval} is not {expected} and {v.aval} != {expected}:")
        message = f'f"template gives {{{v.aval}}}, expected {{{expected}}}"'
        self.w.line(depth + 1, f"raise {self.error(message)}")
        return out


def template_function(template: Expr, cat: Catalog | None = None) -> Generated:
    """``template`` as a generated function ``fn(env, expected)`` against ``cat`` (default:
    the active catalog), reading its names from ``env``; a literal template gives its
    literal as is (``run`` makes it a value). Memoized on the catalog (the entry keeps the
    template alive, so its id is not reused)."""
    if cat is None:
        cat = catalog()
    hit = cat.templates.get(id(template))
    if hit is None or hit[0] is not template:
        if len(cat.templates) >= MAX_TEMPLATES:
            cat.templates.clear()
        hit = cat.templates[id(template)] = (template, _template_function(template, cat))
    return hit[1]


def _template_function(template: Expr, cat: Catalog) -> Generated:
    w = _Writer(cat, "env")
    w.line(0, "def fn(env, expected):")
    w.line(1, "b = env.builder")
    w.line(1, "add_op = b.add_op")
    w.line(1, "keys = b.keys if type(b) is FragmentBuilder else None")
    w.line(1, "names = env.names")
    if type(template) is Num:
        w.line(1, f"return {w.const(_Lit(template.value))}")
    else:
        ctx = _Context("env", "env.prim", "env.rule", "env.key", "env.attrs", "env.avals", "names", "env.index")
        rule = _Rule(w, {}, ctx)
        v = rule.value(template, 1, "expected")
        w.line(1, f"return {rule.obj(v, 1)}")
    return w.function("template", "fn", "")()


def _env(w: _Writer, attrs: str, avals: dict[str, str] | None, prim: str, label: str, key: str) -> str:
    """The expression of an Env for the run-time part, made where that is taken."""
    mapping = "_NO_AVALS" if avals is None else "{" + ", ".join(f"{n!r}: {x}" for n, x in avals.items()) + "}"
    return f"Env(b, _NO_NAMES, {attrs}, {mapping}, None, {label}, {prim}, {key})"


def jvp_function(cat: Catalog, prim: Primitive, kind: str) -> Callable:
    """One step of ``linearize`` for an op ``prim`` as one generated function: the maker
    ``make(b, tangent)`` of ``jvp(key)``, which reads the operands' tangents in ``tangent``
    and stores the op's there unless it is zero, emitting into builder ``b`` of ``kind``.
    ``prim`` is not variadic and has no guarded rules."""
    w = _Writer(cat, kind)
    ops = prim.operands
    w.line(0, "def jvp(key):")
    if not ops:  # no operand, no tangent
        w.line(1, "return")
        return w.function(f"jvp_{prim.name}", "jvp", "b, tangent")
    whole = prim.jvp.get(None)
    rules = [whole] if whole is not None else [prim.jvp.get(n) for n in ops]
    reads: set[str] = set()  # the tangents read where they may be symbolic zeros
    reads_avals = False  # any rule of the op reads avals: every rule's Env has them
    for j, r in enumerate(rules):
        if r is not None and r.template is not None:
            names, avals = template_reads(r.template)
            reads_avals = reads_avals or avals
            # a part's own tangent is not zero; nor is a one-operand op's (it has flow)
            reads |= names - {"d" + ops[j]} if whole is None or len(ops) == 1 else names
    k = [f"i{j}" for j in range(len(ops))]
    t = [f"t{j}" for j in range(len(ops))]
    w.line(1, f"{', '.join(k)}, = key.inputs")
    for j in range(len(ops)):
        w.line(1, f"{t[j]} = get({k[j]})")
    w.line(1, f"if {' and '.join(f'{x} is None' for x in t)}:")  # tangents are stored only where not zero
    w.line(2, "return")
    w.line(1, "aval = key.aval")
    w.line(1, "if aval.dtype not in _INEXACT:")
    w.line(2, "return")
    w.ns["_INEXACT"] = INEXACT
    base: dict[str, _V] = {n: _fixed_value(k[j]) for j, n in enumerate(ops)}
    base["out"] = _fixed_value("key")
    if whole is not None and len(ops) == 1:
        base["d" + ops[0]] = _nonzero_value(t[0])
    for j, n in enumerate(ops):
        if "d" + n in reads:  # a tangent that may be a symbolic zero
            w.line(1, f"z{j} = {t[j]} if {t[j]} is not None else Zero({k[j]}.aval)")
            base["d" + n] = _object_value(f"z{j}")
    prim_name = w.const(prim.name)
    avals_of = {"out": "key.aval", **{n: f"{k[j]}.aval" for j, n in enumerate(ops)}}

    def context(label: str) -> _Context:
        lab = w.const(label)
        env = _env(w, "key.attrs", avals_of if reads_avals else None, prim_name, lab, "key")
        return _Context(env, prim_name, lab, "key", "key.attrs", avals_of)

    if whole is not None:
        if whole.template is not None:
            rule = _Rule(w, base, context("jvp"))
            result = rule.root(whole.template, 1, "aval")
            if rule.maybe_zero:
                w.line(1, f"if type({result}) is not Zero:")
                w.line(2, f"tangent[key] = {result}")
            else:
                w.line(1, f"tangent[key] = {result}")
        w.line(1, "return")
        return w.function(f"jvp_{prim.name}", "jvp", "b, tangent")
    w.line(1, "total = None")
    for j, (n, r) in enumerate(zip(ops, rules, strict=True)):
        label = "jvp " + n
        if r is not None and r.template is None:
            continue
        w.line(1, f"if {t[j]} is not None and type({t[j]}) is not Zero:")
        if r is None:
            msg = repr(f"no JVP rule for operand {n!r}; add 'jvp {n}: ...' to its rule file")
            w.line(2, f"raise ADRuleError({prim_name}, {w.const(label)}, key, {msg})")
            continue
        bindings = dict(base, **{"d" + n: _nonzero_value(t[j])})
        rule = _Rule(w, bindings, context(label))
        part = rule.root(r.template, 2, "aval")
        d = 2
        if rule.maybe_zero:
            w.line(2, f"if type({part}) is not Zero:")
            d = 3
        w.line(d, "if total is None:")
        w.line(d + 1, f"total = {part}")
        w.line(d, "else:")
        w.accumulate(d + 1, "total", part, "total")
    w.line(1, "if total is not None:")
    w.line(2, "tangent[key] = total")
    return w.function(f"jvp_{prim.name}", "jvp", "b, tangent")


def transpose_function(cat: Catalog, prim: Primitive, mask: tuple[bool, ...], keyed: str | None = None,
                       into: str = "fragment") -> Callable:
    """One step of a transpose sweep for an op ``prim`` (not variadic) with active operands
    ``mask`` as one generated function, which adds each active operand's part to ``ct``.
    ``keyed`` None: the fused ``vjp``'s step on a tape, the maker ``make(b)`` (a
    FragmentBuilder, or with ``into="tape"`` a LinearTape of the transposed map) of
    ``transpose(ct_out, args, attrs, ct, tape_avals)`` (``ct`` a list by node); an error
    or what the tape cannot hold raises ``Unfusable``. Else ``linear_transpose``'s step
    for builders of kind ``keyed``: the maker of ``transpose(ct_out, out_key, ct)`` (``ct``
    a dict by key)."""
    w = _Writer(cat, keyed or into)
    w.ns["_prim"] = prim
    ops = prim.operands
    a = [f"a{j}" for j in range(len(ops))]
    if keyed is None:
        w.line(0, "def transpose(ct_out, args, attrs, ct, tape_avals):")
        w.line(1, f"{', '.join(a)}, = args")
        attrs, key = "attrs", "None"
        avals_of = {"ct": "ct_out.aval", "out": "ct_out.aval",
                    **{n: f"(tape_avals[{a[j]}] if type({a[j]}) is int else {a[j]}.aval)" for j, n in enumerate(ops)}}
    else:
        w.line(0, "def transpose(ct_out, out_key, ct):")
        w.line(1, f"{', '.join(a)}, = out_key.inputs")
        attrs, key = "out_key.attrs", "out_key"
        avals_of = {"ct": "out_key.aval", "out": "out_key.aval", **{n: f"{a[j]}.aval" for j, n in enumerate(ops)}}
    base: dict[str, _V] = {"ct": _nonzero_value("ct_out")}
    for j, n in enumerate(ops):
        if not mask[j]:  # an active operand is not usable as an ordinary operand
            base[n] = _fixed_value(a[j])
    op = w.const(prim.name)
    for j, n in enumerate(ops):
        if not mask[j]:
            continue
        label = "transpose " + n
        r = prim.transpose.get(n)
        if keyed is None:
            w.line(1, f"if type({a[j]}) is not int:")
            w.line(2, f"raise Unfusable({op})")
        if r is None:
            missing = f"missing_transpose_rule(_prim, {n!r}, out_key)"
            w.line(1, f"raise Unfusable({op})" if keyed is None else f"raise {missing}")
            break
        expected = f"tape_avals[{a[j]}]" if keyed is None else f"{a[j]}.aval"
        if r.template is None:
            part = f"Zero({expected})"
        else:
            lab = w.const(label)
            reads_avals = template_reads(r.template)[1]
            env = _env(w, attrs, avals_of if reads_avals else None, op, lab, key)
            rule = _Rule(w, base, _Context(env, op, lab, key, attrs, avals_of))
            w.line(1, f"e{j} = {expected}")
            part = rule.root(r.template, 1, f"e{j}")
        w.line(1, f"prev = ct[{a[j]}]" if keyed is None else f"prev = ct.get({a[j]})")
        w.line(1, "if prev is None:")
        w.line(2, f"ct[{a[j]}] = {part}")
        w.line(1, "else:")
        w.accumulate(2, "prev", part, f"ct[{a[j]}]")
    return w.function(f"transpose_{prim.name}", "transpose")


__all__ = ["SPECIALIZED", "Generated", "apply_op", "instantiate", "jvp_function", "run", "template_function",
           "transpose_function"]
