"""linearize (JVP): a resolved view becomes a new linear fragment.

The reachable logical DAG is walked in topological order; each op's JVP rule from
``rules/`` is instantiated once. The new fragment holds only tangent work: primal
values are ``External(key)`` references. Tangents that do not depend on the ``wrt``
inputs stay symbolic zeros and build nothing. Ops of any role are differentiated:
that is how higher order works (resolve the previous fragments, linearize again).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tidu.ad import instantiate as engine
from tidu.ad.instantiate import instantiate, jvp_function
from tidu.ad.values import INEXACT, ADRuleError, Builder, Env, Unfusable, Val, Value, Zero, accumulate
from tidu.core.gcpause import paused_gc
from tidu.core.keys import (
    NO_ATTRS,
    PRIMARY,
    Attrs,
    Aval,
    DiffPassId,
    InputKey,
    Literal,
    Role,
    ValueKey,
    input_key,
    is_inexact,
)
from tidu.core.resources import GRAPH_VALUE_COUNT, charge
from tidu.ops.catalog import Catalog, InternalPrimitive, OpError, Primitive, catalog, infer_avals
from tidu.ops.templates import jvp_rules, template_reads
from tidu.trace.fragments import External, Fragment, FragmentBuilder, Local, TapeRef, ValRef
from tidu.trace.resolve import ResolvedView
from tidu.trace.tracing import reading

_pass_ids = itertools.count(1)


def fresh_pass_id() -> DiffPassId:
    return next(_pass_ids)


@dataclass
class LinearizedGraph:
    """A linear map as a fragment: ``tangent_inputs`` (key, ref) in, ``tangent_outputs``
    (ref, or None where the output does not depend on the inputs) out."""

    fragment: Fragment | None
    tangent_inputs: list[tuple[InputKey, ValRef]]
    tangent_outputs: list[ValRef | None]
    pass_id: DiffPassId

    def key(self, ref: ValRef) -> ValueKey:
        if isinstance(ref, External):
            return ref.key
        assert self.fragment is not None
        return self.fragment.keys[ref.id]

    @property
    def input_keys(self) -> list[ValueKey]:
        """The Input value keys of the tangent (or cotangent) inputs."""
        return [self.key(r) for _, r in self.tangent_inputs]

    @property
    def output_keys(self) -> list[ValueKey | None]:
        return [None if r is None else self.key(r) for r in self.tangent_outputs]


def _wrt_inputs(order: list[ValueKey], wrt: Iterable) -> list[tuple[InputKey, ValueKey | None]]:
    by_key = {k.input: k for k in order if k.input is not None}
    out = []
    for w in wrt:
        if isinstance(w, ValueKey):
            if w.input is None:
                raise TypeError(f"wrt takes input keys, got the derived value {w!r}")
            out.append((w.input, w))
        else:
            k = input_key(w)
            out.append((k, by_key.get(k)))
    return out


@paused_gc()
def linearize(
    view: ResolvedView,
    outputs: Sequence[ValueKey],
    wrt: Sequence[InputKey | str | ValueKey],
    *,
    pass_id: DiffPassId | None = None,
    aliases: Mapping[InputKey | str, ValueKey] | None = None,
    unit_seed: bool = False,
    known: Mapping[ValueKey, ValueKey] | None = None,
    export: dict[ValueKey, ValueKey] | None = None,
) -> LinearizedGraph:
    """JVP of ``outputs`` with respect to the inputs ``wrt`` (names, InputKeys, or
    Input value keys). ``aliases`` makes an input stand for an existing value, so it
    inherits that value's tangent (checkpointing, shared sub-graphs). ``unit_seed``: the
    tangent of each ``wrt`` input is the constant one (no tangent inputs): the
    derivative along it, whose keys are those of any other pass seeded so (nested
    forward-mode gradients share them instead of making them again). ``known``: values'
    tangents another pass made along the same seeds, used instead of made again;
    ``export``: filled with this pass's (value: key of its tangent, where not zero)."""
    if not isinstance(view, ResolvedView):
        raise TypeError(f"linearize takes a ResolvedView (tidu.resolve(...)), got {type(view).__name__}")
    if aliases:
        view = view.with_aliases(aliases)
    pass_id = fresh_pass_id() if pass_id is None else pass_id
    b = FragmentBuilder(f"L{pass_id}")
    with reading(view.fragments):
        tangent_inputs, tangent_outputs = _forward(view, list(outputs), wrt, pass_id, b, unit_seed, known, export)
    for ref in tangent_outputs:
        if ref is not None:
            b.output(ref)
    return LinearizedGraph(b.build(parents=view.fragments), tangent_inputs, tangent_outputs, pass_id)


class LinearTape:
    """The builder of a linearize pass whose linear map is only transposed (``vjp``): primary
    ops go to the fragment builder ``fb`` (the transpose reads them), linear ops are kept
    as plain records, hash-consed locally, never interned as keys. A record's operands
    are its node numbers (linear operands) or value keys (fixed ones)."""

    __slots__ = ("fb", "ops", "attrs", "args", "masks", "avals", "refs", "index")

    def __init__(self, fb: FragmentBuilder) -> None:
        self.fb = fb
        self.ops: list[str | None] = []  # None: a tangent input
        self.attrs: list[Attrs] = []
        self.args: list[tuple[int | ValueKey, ...]] = []
        self.masks: list[tuple[bool, ...]] = []
        self.avals: list[Aval] = []
        self.refs: list[TapeRef] = []
        self.index: dict[tuple, int] = {}

    def _new(self, op: str | None, attrs: Attrs, args: tuple, mask: tuple, aval: Aval, ident: tuple) -> TapeRef:
        i = len(self.ops)
        self.ops.append(op)
        self.attrs.append(attrs)
        self.args.append(args)
        self.masks.append(mask)
        self.avals.append(aval)
        ref = TapeRef(i, aval)
        self.refs.append(ref)
        self.index[ident] = i
        return ref

    def input(self, key: InputKey, aval: Aval) -> TapeRef:
        i = self.index.get(("I", key, aval))
        if i is not None:
            return self.refs[i]
        return self._new(None, NO_ATTRS, (), (), aval, ("I", key, aval))

    def add_op(self, op: str, operands: Sequence[ValRef | TapeRef], attrs: Attrs | None = None,
               role: Role = PRIMARY) -> list:
        mask = role.active_mask
        if mask is None:
            return self.fb.add_op(op, operands, attrs, role)
        if type(attrs) is not Attrs:
            attrs = Attrs(attrs) if attrs else NO_ATTRS
        keys = self.fb.keys
        avals = self.avals
        args: list = []
        in_avals: list = []
        for r in operands:
            t = type(r)
            if t is TapeRef:
                args.append(r.id)
                in_avals.append(avals[r.id])
            else:
                k = keys[r.id] if t is Local else r.key
                args.append(k)
                in_avals.append(k.aval)
        if len(mask) != len(args):
            raise OpError(f"{op}: active mask {role} has {len(mask)} entries for {len(args)} operands")
        out = infer_avals(op, tuple(in_avals), attrs)
        if len(out) != 1:
            raise Unfusable(op)
        ident = (op, attrs._items, tuple(args), mask)
        i = self.index.get(ident)
        if i is not None:
            return [self.refs[i]]
        # self._new, inlined (once per linear op)
        i = self.index[ident] = len(self.ops)
        self.ops.append(op)
        self.attrs.append(attrs)
        self.args.append(ident[2])
        self.masks.append(mask)
        aval = out[0]
        self.avals.append(aval)
        ref = _new_ref(TapeRef)  # TapeRef(i, aval) without the Python-level __init__
        ref.id = i
        ref.aval = aval
        self.refs.append(ref)
        if GRAPH_VALUE_COUNT.get() is not None:
            charge()  # a value as much as an interned one (tidu.resource_limits)
        return [ref]

    def add_known(self, op: str, operands: Sequence[ValRef | TapeRef], role: Role, aval: Aval) -> ValRef | TapeRef:
        """``add_op(op, operands, NO_ATTRS, role)[0]`` for a one-output op whose aval the
        caller already knows; operands may be keys (``FragmentBuilder.add_known``)."""
        mask = role.active_mask
        if mask is None:
            return self.fb.add_known(op, operands, role, aval)  # type: ignore[arg-type]
        keys = self.fb.keys
        args = tuple([r.id if type(r) is TapeRef else r if type(r) is ValueKey else keys[r.id] if type(r) is Local
                      else r.key for r in operands])
        ident = (op, (), args, mask)
        i = self.index.get(ident)
        if i is not None:
            return self.refs[i]
        i = self.index[ident] = len(self.ops)
        self.ops.append(op)
        self.attrs.append(NO_ATTRS)
        self.args.append(args)
        self.masks.append(mask)
        self.avals.append(aval)
        ref = _new_ref(TapeRef)
        ref.id = i
        ref.aval = aval
        self.refs.append(ref)
        if GRAPH_VALUE_COUNT.get() is not None:
            charge()
        return ref

    def constant(self, value: Any, dtype: str | None = None) -> ValRef:
        return self.fb.constant(value, dtype)

    def aval(self, ref: ValRef | TapeRef) -> Aval:
        return ref.aval if type(ref) is TapeRef else self.fb.aval(ref)

    def key_of(self, ref: ValRef | TapeRef) -> ValueKey:
        if type(ref) is TapeRef:
            raise Unfusable("key_of")
        return self.fb.key_of(ref)


_new_ref = object.__new__


def linearize_tape(view: ResolvedView, outputs: Sequence[ValueKey], wrt: Sequence[InputKey | str | ValueKey],
                   pass_id: DiffPassId) -> tuple[Fragment, LinearTape, list[TapeRef], list[TapeRef | None]]:
    """``linearize`` whose linear ops go on a ``LinearTape`` (for ``transpose.vjp``): the
    fragment of its primary ops, the tape, the tangent inputs and outputs on it."""
    fb = FragmentBuilder(f"L{pass_id}")
    tape = LinearTape(fb)
    with reading(view.fragments):
        tangent_inputs, tangent_outputs = _forward(view, list(outputs), wrt, pass_id, tape)
    for ref in tangent_outputs:
        if ref is not None and type(ref) is not TapeRef:
            raise Unfusable("a tangent output that is not linear")
    return fb.build(parents=view.fragments), tape, [r for _, r in tangent_inputs], tangent_outputs  # type: ignore


def _forward(view: ResolvedView, outputs: list[ValueKey], wrt: Sequence[InputKey | str | ValueKey],
             pass_id: DiffPassId, b: FragmentBuilder | LinearTape, unit_seed: bool = False,
             known: Mapping[ValueKey, ValueKey] | None = None,
             export: dict[ValueKey, ValueKey] | None = None) -> tuple[list[tuple[InputKey, ValRef]],
                                                                    list[ValRef | None]]:
    """The JVP sweep into ``b``: the tangent inputs (key, ref) and the outputs' tangents
    (``unit_seed``: no tangent inputs, each seeded with a constant one; ``known`` and
    ``export``: see ``linearize``)."""
    order = view.topo_order(outputs)
    tangent: dict[ValueKey, Value] = {}
    for k, t in (known or {}).items():
        tangent[k] = Val(External(t), True, t.aval)
    tangent_inputs: list[tuple[InputKey, ValRef]] = []
    for ikey, vkey in _wrt_inputs(order, wrt):
        if vkey is None:
            raise ValueError(
                f"{ikey} is not an input of these outputs, so its aval is unknown; "
                "pass its Input(...) value key to differentiate with respect to it anyway"
            )
        if not is_inexact(vkey.aval.dtype):
            raise TypeError(f"cannot differentiate with respect to {ikey} of dtype {vkey.aval.dtype}")
        if unit_seed:
            ref = b.constant(Literal.filled(1, vkey.aval.shape, vkey.aval.dtype))
        else:
            ref = b.input(ikey.tangent_of(pass_id), vkey.aval)
            tangent_inputs.append((ikey, ref))
        tangent[vkey] = Val(ref, True, vkey.aval)

    fused = type(b) is LinearTape
    # the values whose tangents the outputs' read: a custom function's body is not among
    # them (its rule gives the output's tangent from its arguments'), so it is not
    # linearized, only told apart as moving with the seeds or not (``_MOVES``)
    need = _needed(order, outputs, view) if export is None and not fused and _has_marks(order) else None
    cat = catalog()
    # what the generated steps read of ``b``
    kind = "tape" if fused else "fragment" if type(b) is FragmentBuilder else "other"
    get = tangent.get
    prims: dict[str, Primitive | InternalPrimitive] = {}  # by op name, for this pass: the ops not generated
    generated: dict[str, Callable] = {}  # by op name: its JVP step as generated code, bound to b
    for key in order:
        if key.input is not None:
            target = view.alias_of(key)
            if target is not None and key not in tangent and target in tangent:
                tangent[key] = tangent[target]
            continue
        if known and key in known:
            continue
        if need is not None and key not in need:
            if key.aval.dtype in INEXACT and any([k in tangent for k in key.inputs]):
                tangent[key] = _MOVES  # (what a custom function's closure check reads)
            continue
        fn = generated.get(key.op)
        if fn is not None:  # the op's JVP step (instantiate.jvp_function), whole
            fn(key)
            continue
        # tangents are stored only where they are not zero: None means no flow
        ins = [get(k) for k in key.inputs]
        if ins.count(None) == len(ins) or key.aval.dtype not in INEXACT:
            continue
        prim = prims.get(key.op)
        if prim is None:
            prim = cat.get_primitive(key.op)
            make = _jvp_maker(cat, prim, kind)
            if make is not None:
                generated[key.op] = fn = make(b, tangent)
                fn(key)
                continue
            prims[key.op] = prim
        if type(prim) is InternalPrimitive:
            if key.op == "stop_gradient":
                continue  # (its tangent is zero: nothing goes on the tape)
            if fused:
                raise Unfusable(key.op)
            # stop_gradient and custom_jvp/custom_vjp calls carry their JVP as a Python callback
            result = prim.jvp(key, ins, b)
        else:
            result = _jvp(prim, key, ins, b)
        if type(result) is not Zero:
            tangent[key] = result

    tangent_outputs: list[ValRef | None] = []
    for o in outputs:
        t = tangent.get(o)
        tangent_outputs.append(t.ref if isinstance(t, Val) else None)
    if export is not None and type(b) is FragmentBuilder:
        key_of = b.key_of
        for k, t in tangent.items():
            if k.input is None and type(t) is Val:
                export[k] = key_of(t.ref)
    return tangent_inputs, tangent_outputs


# the tangent of a value no output's tangent reads, which moves with the seeds: never built
_MOVES = Val(None, True, None)
# internal ops whose tangent does not read every operand's: (op, the operands it reads)
_MARKS: dict[str, Callable[[ValueKey], tuple[ValueKey, ...]]] = {
    "stop_gradient": lambda key: (),
    "custom_jvp_call": lambda key: key.inputs[1:],  # (its arguments, not its body's output)
    "custom_vjp_call": lambda key: key.inputs[1:1 + key.attrs["nargs"]],  # (nor its residuals)
}


def _has_marks(order: list[ValueKey]) -> bool:
    marks = _MARKS
    return any([key.op in marks for key in order])


def _needed(order: list[ValueKey], outputs: list[ValueKey], view: ResolvedView) -> set[ValueKey]:
    """The values (of ``order``, operands before users) whose tangents the tangents of
    ``outputs`` are made of."""
    need = set(outputs)
    marks = _MARKS
    for key in reversed(order):
        if key not in need:
            continue
        if key.input is not None:
            target = view.alias_of(key)
            if target is not None:
                need.add(target)
            continue
        reads = marks.get(key.op)
        need.update(key.inputs if reads is None else reads(key))
    return need


def _reads(prim: Primitive) -> tuple[frozenset[str], bool]:
    """What the JVP rules of ``prim`` read: the names (only those are bound), and whether
    operand avals (guarded rules, attribute functions). Kept on the Primitive object itself
    (as instantiate's derived rule lists)."""
    reads = prim.__dict__.get("_jvp_reads")
    if reads is None:
        rules = [*prim.jvp.values(), *(r for rs in prim.jvp_when.values() for r in rs)]
        names: set[str] = set()
        avals = bool(prim.jvp_when)
        for r in rules:
            if r.template is not None:
                n, a = template_reads(r.template)
                names |= n
                avals = avals or a
        reads = prim.__dict__["_jvp_reads"] = (frozenset(names), avals)
    return reads


_NO_AVALS: dict = {}  # for rules that read no avals (never written to)


def _jvp_maker(cat: Catalog, prim: Primitive | InternalPrimitive, kind: str) -> Callable | None:
    """The maker of ``prim``'s JVP step as generated code for builders of ``kind``
    (``instantiate.jvp_function``), kept on the Primitive object itself with the catalog it
    is made against; None for the ops whose rules are applied one by one (internal and
    variadic ops, guarded rules)."""
    if type(prim) is InternalPrimitive or prim.variadic or prim.jvp_when or not engine.SPECIALIZED:
        return None
    hit = prim.__dict__.get("_jvp_generated")
    if hit is None or hit[0] is not cat:
        hit = prim.__dict__["_jvp_generated"] = (cat, {})
    makers = hit[1]
    make = makers.get(kind)
    if make is None:
        make = makers[kind] = jvp_function(cat, prim, kind)
    return make


def _jvp(prim: Primitive, key: ValueKey, tangents: list[Value | None], b: Builder) -> Value:
    """The JVP of one op whose rules are applied one by one (``instantiate``): variadic
    ops (the last declared operand stands for the rest, bound as lists), guarded rules,
    and every op when ``instantiate.SPECIALIZED`` is False."""
    used, reads_avals = _reads(prim)
    names: dict = {}
    if prim.variadic:
        avals: dict = {"out": key.aval}
        for i, k in enumerate(key.inputs):
            name = prim.operand_name(i)
            t = tangents[i] if tangents[i] is not None else Zero(k.aval)
            if i >= len(prim.operands) - 1:
                names.setdefault(name, []).append(Val(External(k), False, k.aval))
                names.setdefault("d" + name, []).append(t)
                avals.setdefault(name, []).append(k.aval)
            else:
                names[name] = Val(External(k), False, k.aval)
                names["d" + name] = t
                avals[name] = k.aval
    else:
        avals = {"out": key.aval} if reads_avals else _NO_AVALS
        for name, k, t in zip(prim.operands, key.inputs, tangents, strict=True):
            a = k.aval
            if reads_avals:
                avals[name] = a
            if name in used:
                names[name] = Val(External(k), False, a)
            names["d" + name] = t if t is not None else Zero(a)
    if "out" in used:
        names["out"] = Val(External(key), False, key.aval)

    whole, rules = jvp_rules(prim, avals)
    if whole:
        rule = rules[0][1]
        if rule is None or rule.template is None:
            return Zero(key.aval)
        env = Env(b, names, key.attrs, avals, None, "jvp", prim.name, key)
        return instantiate(rule.template, env, key.aval)

    rule_of = dict(rules)
    total: Value = Zero(key.aval)
    for i, t in enumerate(tangents):
        if t is None or type(t) is Zero:
            continue
        name = prim.operand_name(i)
        rule = rule_of[name]
        if rule is None:
            raise ADRuleError(prim.name, f"jvp {name}", key,
                              f"no JVP rule for operand {name!r}; add 'jvp {name}: ...' to its rule file")
        if rule.template is None:
            continue
        index = i - (len(prim.operands) - 1) if prim.variadic else None
        env = Env(b, names, key.attrs, avals, index, f"jvp {name}", prim.name, key)
        part = instantiate(rule.template, env, key.aval)
        total = accumulate(b, total, part)
    return total


__all__ = ["LinearTape", "LinearizedGraph", "fresh_pass_id", "linearize", "linearize_tape"]
