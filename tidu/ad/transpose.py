"""linear_transpose (VJP): reverse the active flow of a linear fragment.

The linear fragment's ops are visited in reverse order; each ``Linearized`` op's
transpose rule from ``rules/`` gives the cotangent contribution of each active
operand. Contributions to the same value are bucketed by its global key and summed
with the primitive set's ``add`` (ordinary ``Linearized([a, a])`` nodes, so later
passes differentiate them like any other op). Cotangent seeds are new inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from tidu.ad import rulegen
from tidu.ad.instantiate import (
    ADRuleError,
    Builder,
    Compiled,
    Env,
    Val,
    Value,
    Zero,
    compiled,
    instantiate,
    run,
    template_reads,
)
from tidu.ad.linearize import (
    LinearizedGraph,
    LinearTape,
    Unfusable,
    accumulate,
    fresh_pass_id,
    linearize,
    linearize_tape,
)
from tidu.ad.rulegen import Unsupported, transpose_function
from tidu.core.gcpause import paused_gc
from tidu.core.keys import NO_ATTRS, Cotangent, DiffPassId, InputKey, ValueKey
from tidu.ops.catalog import Catalog, InternalPrimitive, OpError, Primitive, catalog
from tidu.ops.dsl.ast import OperandRule
from tidu.trace.fragments import External, Fragment, FragmentBuilder, TapeRef, ValRef
from tidu.trace.resolve import ResolvedView


@paused_gc()
def linear_transpose(
    linear: LinearizedGraph,
    *,
    builder: Builder | None = None,
    pass_id: DiffPassId | None = None,
) -> LinearizedGraph:
    """The transposed map: cotangent seeds (one per non-None tangent output) in,
    cotangents of the original tangent inputs out (None where nothing flows back).

    With ``builder`` the sweep emits into the caller's builder (for example an eager
    evaluator); the result's ``fragment`` is then None and its refs are the builder's.
    """
    if not isinstance(linear, LinearizedGraph) or linear.fragment is None:
        raise TypeError("linear_transpose takes the LinearizedGraph returned by linearize")
    frag = linear.fragment
    pass_id = fresh_pass_id() if pass_id is None else pass_id
    own = builder is None
    b = FragmentBuilder(f"T{pass_id}") if own else builder
    ct: dict[ValueKey, Value] = {}
    seeds: list[tuple[InputKey, ValRef]] = []
    for i, ref in enumerate(linear.tangent_outputs):
        if ref is None:
            continue
        key = linear.key(ref)
        seed_key = Cotangent(pass_id, i)
        seed = b.input(seed_key, key.aval)
        seeds.append((seed_key, seed))
        ct[key] = _add(b, ct.get(key), Val(seed, True, key.aval))

    cat = catalog()
    keys = frag.keys
    plans: dict[str, list[_Rule] | Primitive | InternalPrimitive] = {}  # by op name, for this pass
    bound: dict[str, dict] = {}  # by op name: its generated steps by active mask, bound to b
    kind = "fragment" if type(b) is FragmentBuilder else "other"  # what generated code reads of b
    for out_key in reversed(keys):  # the ops, last first, by their (first) output's key
        mask = out_key.role.active_mask
        if mask is None or out_key.slot:
            continue  # inputs, fixed (primal) work inside the linear fragment, later outputs
        ct_out = ct.get(out_key)
        if ct_out is None or type(ct_out) is Zero:
            continue
        plan = plans.get(out_key.op)
        if plan is None:
            plan = plans[out_key.op] = _plan_for(cat, out_key.op)  # type: ignore[index]
            bound[out_key.op] = {}
        if type(plan) is list:
            fns = bound[out_key.op]
            fn = fns.get(mask, _MISSING)
            if fn is _MISSING:
                make = _generate(cat, plan[0].prim, mask, kind)
                fn = fns[mask] = None if make is None else make(b)
            if fn is not None:  # the rules as generated code (rulegen)
                fn(ct_out, out_key, ct)
                continue
        in_keys = list(out_key.inputs)
        if type(plan) is not list:
            prim = plan  # type: ignore[assignment]
            if type(prim) is InternalPrimitive:  # custom_vjp: its bwd gives every operand's part
                if prim.transpose is None:
                    raise ADRuleError(prim.name, "transpose", out_key, "this op is not linear")
                for i, part in enumerate(prim.transpose(out_key, in_keys, mask, ct_out, b)):
                    if mask[i]:
                        ct[in_keys[i]] = _add(b, ct.get(in_keys[i]), part)
            else:  # variadic
                for i, active in enumerate(mask):
                    if active:
                        part = _transpose_variadic(prim, out_key, in_keys, mask, i, ct_out, b)
                        ct[in_keys[i]] = _add(b, ct.get(in_keys[i]), part)
            continue
        for i, active in enumerate(mask):
            if not active:
                continue
            prim, name, rule, label, reads, reads_avals, fn, _ = plan[i]
            in_key = in_keys[i]
            if fn is None:
                if rule is None:
                    raise _missing(prim, name, out_key)
                part = Zero(in_key.aval)
            else:
                names: dict = {"ct": ct_out}
                for nm, k, act in zip(prim.operands, in_keys, mask, strict=True):
                    if not act and nm in reads:  # an active operand is not usable
                        names[nm] = Val(External(k), False, k.aval)
                avals = _NO_AVALS
                if reads_avals:
                    avals = {"ct": out_key.aval, "out": out_key.aval}
                    avals.update(zip(prim.operands, [k.aval for k in in_keys], strict=True))
                part = run(fn, Env(b, names, out_key.attrs, avals, None, label, prim.name, out_key), in_key.aval)
            ct[in_key] = _add(b, ct.get(in_key), part)

    outs: list[ValRef | None] = []
    for _, ref in linear.tangent_inputs:
        c = ct.get(linear.key(ref))
        outs.append(c.ref if isinstance(c, Val) else None)
    if own:
        for r in outs:
            if r is not None:
                b.output(r)
        return LinearizedGraph(b.build(parents=[frag]), seeds, outs, pass_id)
    return LinearizedGraph(None, seeds, outs, pass_id)


def vjp(view: ResolvedView, outputs: Sequence[ValueKey], wrt: Sequence[InputKey | str | ValueKey], *,
        lin_pass_id: DiffPassId, pass_id: DiffPassId) -> tuple[Fragment, LinearizedGraph]:
    """``linear_transpose(linearize(view, outputs, wrt))`` for a caller that only keeps the
    transposed map: the same transposed fragment, and a linearized fragment that holds
    the primary work of the JVP only (what the transpose reads). The linear ops are kept
    on a ``LinearTape`` instead of being interned, then transposed from there."""
    with paused_gc():
        try:
            lin_frag, tape, tin, tout = linearize_tape(view, outputs, wrt, lin_pass_id)
            return lin_frag, _transpose_tape(lin_frag, tape, tin, tout, pass_id)
        except (Unfusable, ADRuleError, OpError):
            pass  # what only the separate passes handle, or an error: they give its message
    lin = linearize(view, outputs, wrt, pass_id=lin_pass_id)
    assert lin.fragment is not None
    return lin.fragment, linear_transpose(lin, pass_id=pass_id)


def _transpose_tape(lin_frag: Fragment, tape: LinearTape, tangent_inputs: list[TapeRef],
                    tangent_outputs: list[TapeRef | None], pass_id: DiffPassId) -> LinearizedGraph:
    """``linear_transpose`` of the linear map on ``tape`` (``vjp``)."""
    b = FragmentBuilder(f"T{pass_id}")
    tape_avals = tape.avals
    ct: list[Value | None] = [None] * len(tape.ops)
    seeds: list[tuple[InputKey, ValRef]] = []
    for i, ref in enumerate(tangent_outputs):
        if ref is None:
            continue
        aval = tape_avals[ref.id]
        seed_key = Cotangent(pass_id, i)
        seed = b.input(seed_key, aval)
        seeds.append((seed_key, seed))
        ct[ref.id] = _add(b, ct[ref.id], Val(seed, True, aval))

    cat = catalog()
    ops, attrs_of, args_of, masks = tape.ops, tape.attrs, tape.args, tape.masks
    plans: dict[str, list[_Rule] | Primitive | InternalPrimitive] = {}  # by op name, for this pass
    bound: dict[str, dict] = {}  # by op name: its generated functions by active mask, bound to b
    env = Env(b, {}, NO_ATTRS, _NO_AVALS)  # rebound per rule instantiated
    for j in range(len(ops) - 1, -1, -1):
        ct_out = ct[j]
        if ct_out is None or type(ct_out) is Zero:
            continue
        op = ops[j]
        if op is None:
            continue  # a tangent input
        args, mask = args_of[j], masks[j]
        fns = bound.get(op)
        if fns is None:
            plan = plans[op] = _plan_for(cat, op)
            if type(plan) is not list:
                raise Unfusable(op)  # internal and variadic ops: their rules read the operands' keys
            fns = bound[op] = {}
        fn = fns.get(mask, _MISSING)
        if fn is _MISSING:
            make = _generate(cat, plans[op][0].prim, mask)  # type: ignore[index]
            fn = fns[mask] = None if make is None else make(b)
        if fn is not None:  # the rules as generated code (rulegen)
            fn(ct_out, args, attrs_of[j], ct, tape_avals)
            continue
        plan = plans[op]
        env.attrs = attrs_of[j]
        for i, active in enumerate(mask):
            if not active:
                continue
            prim, name, rule, label, reads, reads_avals, fn, read_at = plan[i]
            a = args[i]
            if type(a) is not int:
                raise Unfusable(op)  # an active fixed value: not from a rule
            if fn is None:
                if rule is None:
                    raise Unfusable(op)  # the separate passes name the missing rule
                part: Value = Zero(tape_avals[a])
            else:
                names: dict = {"ct": ct_out}
                for at, nm in read_at:
                    if not mask[at]:  # an active operand is not usable
                        k = args[at]
                        names[nm] = Val(External(k), False, k.aval)
                if reads_avals:
                    out_aval = tape_avals[j]
                    avals = {"ct": out_aval, "out": out_aval}
                    avals.update(zip(prim.operands, [tape_avals[k] if type(k) is int else k.aval for k in args],
                                     strict=True))
                    env.avals = avals
                else:
                    env.avals = _NO_AVALS
                env.names, env.rule, env.prim = names, label, prim.name
                part = run(fn, env, tape_avals[a])
            prev = ct[a]
            ct[a] = part if prev is None else accumulate(b, prev, part)

    outs: list[ValRef | None] = []
    for ref in tangent_inputs:
        c = ct[ref.id]
        outs.append(c.ref if isinstance(c, Val) else None)
    for r in outs:
        if r is not None:
            b.output(r)
    return LinearizedGraph(b.build(parents=[lin_frag]), seeds, outs, pass_id)


def _add(b: Builder, total: Value | None, part: Value) -> Value:
    """A cotangent so far (None: none yet) plus a contribution."""
    if total is None:
        return part
    return accumulate(b, total, part)


class _Rule(NamedTuple):
    """One operand's transpose rule, prepared once: what its template reads (names, and
    whether avals) and the template compiled (None: no rule, or ``zero``)."""

    prim: Primitive
    name: str
    rule: OperandRule | None
    label: str
    names: frozenset[str]
    avals: bool
    fn: Compiled | None
    read_at: tuple[tuple[int, str], ...]  # the operands the template reads: (position, name)


def _plan_for(cat: Catalog, op: str) -> list[_Rule] | Primitive | InternalPrimitive:
    """How ``op`` is transposed: its operands' prepared rules (kept on the Primitive object
    itself, with the catalog they are compiled against), or the primitive itself for
    internal and variadic ops."""
    prim = cat.get_primitive(op)
    if type(prim) is InternalPrimitive or prim.variadic:
        return prim
    plan = prim.__dict__.get("_transpose_plan")
    if plan is not None and plan[0] is cat:
        return plan[1]
    rules = []
    for name in prim.operands:
        rule = prim.transpose.get(name)
        if rule is None or rule.template is None:
            rules.append(_Rule(prim, name, rule, "transpose " + name, frozenset(), False, None, ()))
        else:
            names, avals = template_reads(rule.template)
            read_at = tuple((at, nm) for at, nm in enumerate(prim.operands) if nm in names)
            rules.append(_Rule(prim, name, rule, "transpose " + name, names, avals, compiled(rule.template, cat),
                               read_at))
    prim.__dict__["_transpose_plan"] = (cat, rules)
    return rules


_MISSING = object()


def _generate(cat: Catalog, prim: Primitive, mask: tuple[bool, ...], keyed: str | None = None) -> Callable | None:
    """The maker of ``prim``'s generated transpose at ``mask`` (None: the rules need the
    closures), for the tape or, ``keyed``, for ``linear_transpose`` with builders of that
    kind (``rulegen.transpose_function``); kept on the Primitive object itself with the
    catalog it is made against."""
    if not rulegen.ENABLED:
        return None
    hit = prim.__dict__.get("_transpose_generated")
    if hit is None or hit[0] is not cat:
        hit = prim.__dict__["_transpose_generated"] = (cat, {})
    makers = hit[1]
    if (keyed, mask) not in makers:
        try:
            makers[keyed, mask] = transpose_function(cat, prim, mask, keyed)
        except Unsupported:
            makers[keyed, mask] = None
    return makers[keyed, mask]


def _missing(prim: Primitive, name: str, out_key: ValueKey) -> ADRuleError:
    return ADRuleError(prim.name, f"transpose {name}", out_key,
                       f"no transpose rule for operand {name!r} (is the op linear in it?); "
                       f"add 'transpose {name}: ...' to its rule file")


def _transpose_variadic(prim: Primitive, out_key: ValueKey, in_keys: list[ValueKey], mask: tuple[bool, ...],
                        i: int, ct_out: Val, b: Builder) -> Value:
    """Operand ``i``'s part of the cotangent of a variadic op (the last declared operand
    stands for the rest, bound as lists)."""
    name = prim.operand_name(i)
    rule = prim.transpose.get(name)
    if rule is None:
        raise _missing(prim, name, out_key)
    if rule.template is None:
        return Zero(in_keys[i].aval)
    names: dict = {"ct": ct_out}
    avals: dict = {"ct": out_key.aval, "out": out_key.aval}
    n_fixed = len(prim.operands) - 1
    for j, k in enumerate(in_keys):
        nm = prim.operand_name(j)
        fixed = Val(External(k), False, k.aval)
        if j >= n_fixed:
            avals.setdefault(nm, []).append(k.aval)
            names.setdefault(nm, []).append(fixed)
        else:
            avals[nm] = k.aval
            if not mask[j]:
                names[nm] = fixed  # active operands are not usable as ordinary operands
    env = Env(b, names, out_key.attrs, avals, i - n_fixed, "transpose " + name, prim.name, out_key)
    return instantiate(rule.template, env, in_keys[i].aval)


_NO_AVALS: dict = {}  # for rules that read no avals (never written to)


__all__ = ["linear_transpose", "vjp"]
