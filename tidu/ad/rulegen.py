"""Straight-line Python generated from rule templates (the fast engine of the rule DSL).

``instantiate`` runs a template as a tree of closures against an ``Env`` rebound per op.
For the common rules (``cos(x) * dx``, ``ct * conj(y)``) this module instead writes,
once per primitive (and per active mask for transposes), one Python function whose
body emits the rule's ops directly: no closure call per node, no environment, and the
intermediate values kept in local variables instead of ``Val`` objects. An elementwise
op on operands of one aval is added with that aval (``add_known``: no inference), and
a fixed operand by its key (no ``External`` made). The source is generated here from
parsed rule templates only (never from user text) and compiled once; what is compiled
is a maker, called once per pass to bind the pass's builder (its source is on the
maker's ``__source__``).

It does what ``instantiate`` does, in the same order, so graphs and errors are the same:
a node it does not spell out (attributes, splats, complex or lone literals, identity
rules other than ``real``) runs through the compiled closures, and a symbolic zero
operand through ``instantiate.op_builder``, both with an ``Env`` made on the spot.
A rule it cannot express at all (reading avals, reading an unbound name, a literal
result) raises ``Unsupported`` and the caller keeps the closures for that primitive.
``tests/test_rulegen.py`` checks both engines build the same fragments.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tidu.ad.instantiate import (
    _COMPLEX,
    ADRuleError,
    Env,
    Val,
    Zero,
    _const_only,
    _identity_rules,
    _real_identity_only,
    compiled,
    op_builder,
    template_reads,
)
from tidu.core.keys import NO_ATTRS, PRIMARY, Linearized
from tidu.ops.catalog import Catalog, OpError, Primitive
from tidu.ops.dsl.ast import Call, Expr, Num, Splat, Var
from tidu.trace.fragments import External, TapeRef

ENABLED = True  # False: every rule runs through the closures (for comparing the two engines)


class Unsupported(Exception):
    """A rule this module does not generate code for: the caller keeps the closures."""


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


_BASE_NAMESPACE = {
    "Val": Val, "Zero": Zero, "External": External, "TapeRef": TapeRef, "Env": Env,
    "ADRuleError": ADRuleError, "OpError": OpError, "NO_ATTRS": NO_ATTRS, "np": np,
    "_COMPLEX": _COMPLEX, "_new": object.__new__, "_NO_AVALS": {},
}
_BOTH = Linearized([True, True])  # linearize.accumulate's role
_R1 = (PRIMARY, Linearized([True]))
_R2 = ((PRIMARY, Linearized([False, True])), (Linearized([True, False]), Linearized([True, True])))


class _Writer:
    """The source of one generated function, and the constants it refers to."""

    def __init__(self, cat: Catalog, kind: str) -> None:
        self.cat = cat
        self.kind = kind  # "fragment", "tape" (a linearize.LinearTape) or "other" builders
        self.lines: list[str] = []
        from tidu.ad.linearize import _INEXACT, accumulate  # linearize imports this module

        self.ns: dict[str, Any] = dict(_BASE_NAMESPACE, _R1=_R1, _R2=_R2, accumulate=accumulate, _INEXACT=_INEXACT)
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
        if kind != "other" and prim.decl.type_rule == "elementwise" and not prim.attrs and not prim.variadic:
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
        else:
            self.line(general, f"{a} = b.aval({r})")

    def accumulate(self, depth: int, total: str, part: str, target: str) -> None:
        """Code setting ``target`` to ``linearize.accumulate(b, total, part)``, spelt out when
        both are values of one aval (``add`` elementwise): added with that aval."""
        prim = self.cat.get("add")
        if self.kind == "other" or prim is None or prim.decl.type_rule != "elementwise" or prim.attrs:
            self.line(depth, f"{target} = accumulate(b, {total}, {part})")
            return
        ta, r, v = self.fresh("a"), self.fresh("r"), self.fresh("v")
        dtypes, name, both = self.const(prim.dtypes), self.const(prim.name), self.const(_BOTH)
        self.line(depth, f"{ta} = {total}.aval")
        self.line(depth, f"if type({total}) is not Zero and type({part}) is not Zero "
                         f"and ({part}.aval is {ta} or {part}.aval == {ta}) and {ta}.dtype in {dtypes}:")
        self.line(depth + 1, f"{r} = known({name}, [{total}.ref, {part}.ref], {both}, {ta})")
        self.line(depth + 1, f"{v} = _new(Val)")
        self.line(depth + 1, f"{v}.ref = {r}")
        self.line(depth + 1, f"{v}.linear = True")
        self.line(depth + 1, f"{v}.aval = {ta}")
        self.line(depth + 1, f"{target} = {v}")
        self.line(depth, "else:")
        self.line(depth + 1, f"{target} = accumulate(b, {total}, {part})")

    def function(self, name: str, inner: str, params: str = "b") -> Callable:
        """The maker ``make(b, ...)`` of the generated function ``inner``: it binds the
        builder's methods once (per pass), then gives the function itself."""
        lines = [f"def make({params}):", "    add_op = b.add_op"]
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
        code = compile(source, f"<tidu.ad.rulegen {name}>", "exec")
        scope: dict[str, Any] = {}
        exec(code, self.ns, scope)  # noqa: S102 (source generated above from parsed rules)
        make = scope["make"]
        make.__source__ = source  # for reading what was generated
        return make


class _Rule:
    """Writes the code of one template: ``bindings`` are the names it may read,
    ``env`` the expression of an ``Env`` for the general path (made only when taken),
    ``fail`` the expression of an ``ADRuleError`` for a message in local ``msg``."""

    def __init__(self, w: _Writer, bindings: dict[str, _V], env: str, prim: str, label: str, key: str) -> None:
        self.w = w
        self.bindings = bindings
        self.env = env
        self.prim, self.label, self.key = w.const(prim), w.const(label), key
        self.maybe_zero = True  # whether the result of ``root`` may be a symbolic zero

    def error(self, message: str) -> str:
        return f"ADRuleError({self.prim}, {self.label}, {self.key}, {message})"

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
        """Code evaluating ``e`` at indentation ``depth``; ``expected`` is the aval
        expression its closure would be given ("None" below the root)."""
        if type(e) is Var:
            v = self.bindings.get(e.name)
            if v is None:
                raise Unsupported(f"{e.name} is not bound")
            return _V(v.ref, v.aval, v.linear, v.obj, v.maybe_zero, v.key)
        if type(e) is not Call:
            raise Unsupported(type(e).__name__)
        prim = self.w.cat.get(e.fn)
        if prim is None or not self._inline(e, prim):
            return self._general(e, depth, expected)
        return self._call(e, prim, depth)

    def _inline(self, call: Call, prim: Primitive) -> bool:
        """Whether ``call`` is spelt out: one or two operands, no attributes, no splat,
        no identity rule but ``real``, and literals only beside a non-literal operand
        of an elementwise op."""
        args = call.args
        if prim.attrs or prim.variadic or not 1 <= len(args) <= 2 or len(prim.operands) != len(args):
            return False
        if any(type(a) is Splat for a in args):
            return False
        if _identity_rules(prim) and not _real_identity_only(prim):
            return False
        rule = prim.decl.type_rule
        if rule in ("elementwise", "compare") and any(type(a) is Call and _const_only(a) for a in args):
            return False
        literals = [a for a in args if type(a) is Num]
        if literals:
            if rule != "elementwise" or len(literals) == len(args):
                return False
            if any(isinstance(a.value, complex) for a in literals):
                return False
        return True

    def _general(self, e: Expr, depth: int, expected: str) -> _V:
        """``e`` through its compiled closure (the general path)."""
        name = self.w.fresh("v")
        fn = self.w.const(compiled(e, self.w.cat))
        self.w.line(depth, f"{name} = {fn}({self.env}, {expected})")
        return _object_value(name)

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
                                  f"else b.constant(np.full({av}.shape, {lit}, dtype={av}.dtype))")
                    vals[i] = _V(c, av, "False", None)
        operands: list[_V] = vals  # type: ignore[assignment]
        maybe = [v for v in operands if v.maybe_zero]
        if not maybe:
            return self._build(prim, operands, depth)
        # a symbolic zero operand: the general op_builder; else the op spelt out
        out = w.fresh("v")
        build = w.const(op_builder(prim))
        w.line(depth, "if " + " or ".join(f"type({v.obj}) is Zero" for v in maybe) + ":")
        objs = ", ".join(self.obj(v, depth + 1) for v in operands)
        w.line(depth + 1, f"{out} = {build}({self.env}, [{objs}], NO_ATTRS)")
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
        if _real_identity_only(prim):  # op(x) -> x when x is real
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
            w.ns["PRIMARY_"] = PRIMARY
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
            raise Unsupported("a literal result")
        v = self.value(template, depth, expected)
        out = self.obj(v, depth)
        self.maybe_zero = v.maybe_zero
        self.w.line(depth, f"if {v.aval} is not {expected} and {v.aval} != {expected}:")
        message = f'f"template gives {{{v.aval}}}, expected {{{expected}}}"'
        self.w.line(depth + 1, f"raise {self.error(message)}")
        return out


def _env(names: dict[str, str], attrs: str, prim: str, label: str, key: str) -> str:
    items = ", ".join(f"{n!r}: {o}" for n, o in names.items())
    return f"Env(b, {{{items}}}, {attrs}, _NO_AVALS, None, {label}, {prim}, {key})"


def jvp_function(cat: Catalog, prim: Primitive, kind: str) -> Callable:
    """One step of ``linearize._forward`` for an op ``prim`` as one generated function:
    the maker ``make(b, tangent)`` of ``jvp(key)``, which reads the operands' tangents in
    ``tangent`` and stores the op's there unless it is zero, emitting into builder ``b``
    of ``kind`` (raises Unsupported). ``prim`` is not variadic and has no guarded rules."""
    w = _Writer(cat, kind)
    ops = prim.operands
    if not ops:
        raise Unsupported("no operands")
    whole = prim.jvp.get(None)
    rules = [whole] if whole is not None else [prim.jvp.get(n) for n in ops]
    reads: set[str] = set()  # the tangents read where they may be symbolic zeros
    for j, r in enumerate(rules):
        if r is not None and r.template is not None:
            names, avals = template_reads(r.template)
            if avals:
                raise Unsupported("reads avals")
            # a part's own tangent is not zero; nor is a one-operand op's (it has flow)
            reads |= names - {"d" + ops[j]} if whole is None or len(ops) == 1 else names
    w.line(0, "def jvp(key):")
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
    base: dict[str, _V] = {n: _fixed_value(k[j]) for j, n in enumerate(ops)}
    base["out"] = _fixed_value("key")
    if whole is not None and len(ops) == 1:
        base["d" + ops[0]] = _nonzero_value(t[0])
    for j, n in enumerate(ops):
        if "d" + n in reads:  # a tangent that may be a symbolic zero
            w.line(1, f"z{j} = {t[j]} if {t[j]} is not None else Zero({k[j]}.aval)")
            base["d" + n] = _object_value(f"z{j}")
    prim_name = w.const(prim.name)

    def rule_env(bindings: dict[str, _V], template: Expr, label: str) -> str:
        names, _ = template_reads(template)
        objs = {n: bindings[n].obj for n in sorted(names) if n in bindings}
        return _env(objs, "key.attrs", prim_name, w.const(label), "key")  # type: ignore[arg-type]

    if whole is not None:
        if whole.template is not None:
            rule = _Rule(w, base, rule_env(base, whole.template, "jvp"), prim.name, "jvp", "key")
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
        rule = _Rule(w, bindings, rule_env(bindings, r.template, label), prim.name, label, "key")
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


def transpose_function(cat: Catalog, prim: Primitive, mask: tuple[bool, ...], keyed: str | None = None) -> Callable:
    """One step of a transpose sweep for an op ``prim`` with active operands ``mask`` as one
    generated function, which adds each active operand's part to ``ct`` (raises
    Unsupported). ``keyed`` None: ``transpose._transpose_tape``'s step, the maker
    ``make(b)`` (a FragmentBuilder) of ``transpose(ct_out, args, attrs, ct, tape_avals)``
    (``ct`` a list by node). Else ``linear_transpose``'s step for builders of kind
    ``keyed``: the maker of ``transpose(ct_out, out_key, ct)`` (``ct`` a dict by key)."""
    from tidu.ad.linearize import Unfusable
    from tidu.ad.transpose import _missing  # transpose imports this module

    w = _Writer(cat, keyed or "fragment")
    w.ns["Unfusable"], w.ns["_missing"], w.ns["_prim"] = Unfusable, _missing, prim
    ops = prim.operands
    a = [f"a{j}" for j in range(len(ops))]
    if keyed is None:
        w.line(0, "def transpose(ct_out, args, attrs, ct, tape_avals):")
        w.line(1, f"{', '.join(a)}, = args")
        attrs, key = "attrs", "None"
    else:
        w.line(0, "def transpose(ct_out, out_key, ct):")
        w.line(1, f"{', '.join(a)}, = out_key.inputs")
        attrs, key = "out_key.attrs", "out_key"
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
            w.line(1, f"raise Unfusable({op})" if keyed is None else f"raise _missing(_prim, {n!r}, out_key)")
            break
        expected = f"tape_avals[{a[j]}]" if keyed is None else f"{a[j]}.aval"
        if r.template is None:
            part = f"Zero({expected})"
        else:
            names, avals = template_reads(r.template)
            if avals or any(nm not in base for nm in names):
                raise Unsupported("reads avals or an active operand")
            env = _env({nm: base[nm].obj for nm in sorted(names)}, attrs, op, w.const(label), key)  # type: ignore[misc]
            rule = _Rule(w, base, env, prim.name, label, key)
            w.line(1, f"e{j} = {expected}")
            part = rule.root(r.template, 1, f"e{j}")
        w.line(1, f"prev = ct[{a[j]}]" if keyed is None else f"prev = ct.get({a[j]})")
        w.line(1, "if prev is None:")
        w.line(2, f"ct[{a[j]}] = {part}")
        w.line(1, "else:")
        w.accumulate(2, "prev", part, f"ct[{a[j]}]")
    return w.function(f"transpose_{prim.name}", "transpose")


__all__ = ["Unsupported", "jvp_function", "transpose_function"]
