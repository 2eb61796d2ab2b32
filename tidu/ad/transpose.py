"""linear_transpose (VJP): reverse the active flow of a linear fragment.

The linear fragment's ops are visited in reverse order; each ``Linearized`` op's
transpose rule from ``rules/`` gives the cotangent contribution of each active
operand. Contributions to the same value are bucketed by its global key and summed
with the primitive set's ``add`` (ordinary ``Linearized([a, a])`` nodes, so later
passes differentiate them like any other op). Cotangent seeds are new inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tidu.ad import instantiate as engine
from tidu.ad.instantiate import instantiate, transpose_function
from tidu.ad.linearize import LinearizedGraph, LinearTape, fresh_pass_id, linearize, linearize_tape
from tidu.ad.values import (
    ADRuleError,
    Builder,
    Env,
    Unfusable,
    Val,
    Value,
    Zero,
    accumulate,
    missing_transpose_rule,
)
from tidu.core.gcpause import paused_gc
from tidu.core.keys import Attrs, Aval, Cotangent, DiffPassId, InputKey, ValueKey
from tidu.ops.catalog import Catalog, InternalPrimitive, OpError, Primitive, catalog
from tidu.ops.control import CONTROL_OPS, sibling_keys
from tidu.ops.templates import template_reads
from tidu.trace.fragments import External, Fragment, FragmentBuilder, TapeRef, ValRef
from tidu.trace.resolve import ResolvedView
from tidu.trace.tracing import reading


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

    with reading([frag]):  # (what a user rule reads: tidu.trace.tracing.PASS_FRAGMENTS)
        cat = catalog()
        keys = frag.keys
        prims: dict[str, Primitive | InternalPrimitive] = {}  # by op name, for this pass
        bound: dict[str, dict] = {}  # by op name: its generated steps by active mask, bound to b
        kind = "fragment" if type(b) is FragmentBuilder else "other"  # what generated code reads of b
        for out_key in reversed(keys):  # the ops, last first, by their (first) output's key
            mask = out_key.role.active_mask
            if mask is None or out_key.slot:
                continue  # inputs, fixed (primal) work inside the linear fragment, later outputs
            if out_key.op in CONTROL_OPS:  # one result per node: all of them at once, at the first
                _transpose_control(out_key, ct, b, cat)
                continue
            ct_out = ct.get(out_key)
            if ct_out is None or type(ct_out) is Zero:
                continue
            prim = prims.get(out_key.op)
            if prim is None:
                prim = prims[out_key.op] = cat.get_primitive(out_key.op)
                bound[out_key.op] = {}
            if _generated(prim):
                fns = bound[out_key.op]
                fn = fns.get(mask)
                if fn is None:
                    fn = fns[mask] = _maker(cat, prim, mask, kind)(b)
                fn(ct_out, out_key, ct)  # the op's transpose step (instantiate.transpose_function)
                continue
            in_keys = list(out_key.inputs)
            if type(prim) is InternalPrimitive:  # custom_vjp: its bwd gives every operand's part
                if prim.transpose is None:
                    raise ADRuleError(prim.name, "transpose", out_key, "this op is not linear")
                for i, part in enumerate(prim.transpose(out_key, in_keys, mask, ct_out, b)):
                    if mask[i]:
                        ct[in_keys[i]] = _add(b, ct.get(in_keys[i]), part)
                continue
            for i, active in enumerate(mask):
                if active:
                    part = _transpose_part(prim, out_key, in_keys, mask, i, ct_out, b)
                    ct[in_keys[i]] = _add(b, ct.get(in_keys[i]), part)

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
    with reading([lin_frag]):
        seeds, outs = _sweep(tape, tangent_inputs, tangent_outputs, pass_id, b, "fragment")
    for r in outs:
        if r is not None:
            b.output(r)
    return LinearizedGraph(b.build(parents=[lin_frag]), seeds, outs, pass_id)


def transpose_onto_tape(lin_frag: Fragment, tape: LinearTape, tangent_inputs: list[TapeRef],
                        tangent_outputs: list[TapeRef | None],
                        pass_id: DiffPassId) -> tuple[Fragment, LinearTape, list[TapeRef], list[TapeRef | None]]:
    """The transpose of the linear map on ``tape`` kept on a tape of its own, as
    ``linearize_tape`` keeps a linear map (for a caller that batches it:
    ``tidu.ad.batching.batch_tape``): the fragment of its primary ops, the tape, its
    cotangent seeds (one per tangent output that is not None) and its outputs (one per
    tangent input, None where zero). What the tapes cannot hold raises ``Unfusable``."""
    if not engine.SPECIALIZED:
        raise Unfusable("rules applied one by one")  # (their Env writes into a fragment)
    b = LinearTape(FragmentBuilder(f"T{pass_id}"))
    with reading([lin_frag]):
        seeds, outs = _sweep(tape, tangent_inputs, tangent_outputs, pass_id, b, "tape")
    if any(r is not None and type(r) is not TapeRef for r in outs):
        raise Unfusable("a cotangent that is not linear")
    return b.fb.build(parents=[lin_frag]), b, [r for _, r in seeds], outs  # type: ignore[misc]


def _sweep(tape: LinearTape, tangent_inputs: list[TapeRef], tangent_outputs: list[TapeRef | None],
           pass_id: DiffPassId, b: FragmentBuilder | LinearTape,
           into: str) -> tuple[list[tuple[InputKey, ValRef]], list[ValRef | None]]:
    """The reverse sweep over ``tape`` into ``b`` (of kind ``into``): the cotangent seeds
    (key, ref) and the cotangents of the tangent inputs (None where zero)."""
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
    bound: dict[str, dict] = {}  # by op name: its generated steps by active mask, bound to b
    for j in range(len(ops) - 1, -1, -1):
        ct_out = ct[j]
        if ct_out is None or type(ct_out) is Zero:
            continue
        op = ops[j]
        if op is None:
            continue  # a tangent input
        mask = masks[j]
        fns = bound.get(op)
        if fns is None:
            prim = cat.get_primitive(op)
            if type(prim) is InternalPrimitive or prim.variadic:
                raise Unfusable(op)  # internal and variadic ops: their rules read the operands' keys
            if not engine.SPECIALIZED:
                _tape_parts(prim, j, ct_out, args_of[j], attrs_of[j], mask, ct, tape_avals, b)
                continue
            fns = bound[op] = {}
        fn = fns.get(mask)
        if fn is None:
            fn = fns[mask] = _maker(cat, cat.get_primitive(op), mask, None, into)(b)
        fn(ct_out, args_of[j], attrs_of[j], ct, tape_avals)  # the op's transpose step

    outs: list[ValRef | None] = []
    for ref in tangent_inputs:
        c = ct[ref.id]
        outs.append(c.ref if isinstance(c, Val) else None)
    return seeds, outs


def _tape_parts(prim: Primitive, j: int, ct_out: Value, args: tuple, attrs: Attrs, mask: tuple[bool, ...],
                ct: list[Value | None], tape_avals: list[Aval], b: Builder) -> None:
    """The generated step of tape node ``j`` (``instantiate.transpose_function``), its rules
    applied one by one instead (``instantiate``; with ``instantiate.SPECIALIZED`` off)."""
    for i, active in enumerate(mask):
        if not active:
            continue
        a = args[i]
        name = prim.operands[i]
        rule = prim.transpose.get(name)
        if type(a) is not int or rule is None:
            raise Unfusable(prim.name)  # an active fixed value, or no rule: the separate passes say which
        if rule.template is None:
            part: Value = Zero(tape_avals[a])
        else:
            names: dict = {"ct": ct_out}
            for nm, k, act in zip(prim.operands, args, mask, strict=True):
                if not act:  # an active operand is not usable as an ordinary operand
                    names[nm] = Val(External(k), False, k.aval)
            avals: dict = _NO_AVALS
            if template_reads(rule.template)[1]:
                avals = {"ct": tape_avals[j], "out": tape_avals[j]}
                avals.update(zip(prim.operands, [tape_avals[k] if type(k) is int else k.aval for k in args],
                                 strict=True))
            env = Env(b, names, attrs, avals, None, "transpose " + name, prim.name, None)
            part = instantiate(rule.template, env, tape_avals[a])
        prev = ct[a]
        ct[a] = part if prev is None else accumulate(b, prev, part)


def _add(b: Builder, total: Value | None, part: Value) -> Value:
    """A cotangent so far (None: none yet) plus a contribution."""
    if total is None:
        return part
    return accumulate(b, total, part)


def _transpose_control(out_key: ValueKey, ct: dict, b: Any, cat: Catalog) -> None:
    """A control-flow op (tidu.ops.control) transposed at its result 0: it was made with
    its siblings, first, so every use of every result is transposed already."""
    if out_key.attrs["index"] != 0:
        return
    siblings = sibling_keys(out_key)
    cts = [ct.get(k) for k in siblings]
    if all(c is None or type(c) is Zero for c in cts):
        return
    prim = cat.get_primitive(out_key.op)
    mask = out_key.role.active_mask
    in_keys = list(out_key.inputs)
    for i, part in enumerate(prim.transpose(siblings, in_keys, mask, cts, b)):
        if mask[i]:
            ct[in_keys[i]] = _add(b, ct.get(in_keys[i]), part)


def _generated(prim: Primitive | InternalPrimitive) -> bool:
    """Whether ``prim`` is transposed by generated steps (``instantiate.transpose_function``),
    not by its rules one by one (``_transpose_part``) or its callback."""
    return type(prim) is not InternalPrimitive and not prim.variadic and engine.SPECIALIZED


def _maker(cat: Catalog, prim: Primitive, mask: tuple[bool, ...], keyed: str | None,
           into: str = "fragment") -> Callable:
    """The maker of ``prim``'s generated transpose step at ``mask``, for the tape (``keyed``
    None; into a builder of kind ``into``) or for ``linear_transpose`` with builders of
    kind ``keyed``; kept on the Primitive object itself with the catalog it is made against."""
    hit = prim.__dict__.get("_transpose_generated")
    if hit is None or hit[0] is not cat:
        hit = prim.__dict__["_transpose_generated"] = (cat, {})
    makers = hit[1]
    make = makers.get((keyed, mask, into))
    if make is None:
        make = makers[keyed, mask, into] = transpose_function(cat, prim, mask, keyed, into)
    return make


def _transpose_part(prim: Primitive, out_key: ValueKey, in_keys: list[ValueKey], mask: tuple[bool, ...],
                    i: int, ct_out: Val, b: Builder) -> Value:
    """Operand ``i``'s part of the cotangent of an op whose rules are applied one by one
    (``instantiate``): variadic ops (the last declared operand stands for the rest, bound
    as lists), and every op when ``instantiate.SPECIALIZED`` is False."""
    name = prim.operand_name(i)
    rule = prim.transpose.get(name)
    if rule is None:
        raise missing_transpose_rule(prim, name, out_key)
    if rule.template is None:
        return Zero(in_keys[i].aval)
    names: dict = {"ct": ct_out}
    if not prim.variadic:
        for nm, k, active in zip(prim.operands, in_keys, mask, strict=True):
            if not active:  # an active operand is not usable as an ordinary operand
                names[nm] = Val(External(k), False, k.aval)
        avals: dict = _NO_AVALS
        if template_reads(rule.template)[1]:
            avals = {"ct": out_key.aval, "out": out_key.aval}
            avals.update(zip(prim.operands, [k.aval for k in in_keys], strict=True))
        env = Env(b, names, out_key.attrs, avals, None, "transpose " + name, prim.name, out_key)
        return instantiate(rule.template, env, in_keys[i].aval)
    avals = {"ct": out_key.aval, "out": out_key.aval}
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


__all__ = ["linear_transpose", "transpose_onto_tape", "vjp"]
