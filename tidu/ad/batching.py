"""Batching: a pass over a resolved view that computes many examples at once.

Given a view (a function traced once on one example) and, for each of its inputs, a value
of an enclosing trace that is either *batched* (a leading axis of ``size`` examples) or
not, ``batch`` re-emits every op of the view in that trace, batched where one of its
operands is: the batched value has the examples on axis 0. It is the pass behind
``tidu.vmap`` and behind Jacobians and Hessians as one batched JVP or VJP over a basis
(``tidu.jacfwd``, ``tidu.jacrev``): the graph does not grow with the number of examples.

A primitive's batching rule is derived from its type rule (``type`` in rules/*.rules),
with attribute rewriting (docs/transforms.md, "How batching works"):

- elementwise ops (``elementwise``, ``compare``, ``select``, ``convert``, ``to_real``,
  ``abs``, ``make_complex``): unbatched operands are broadcast to the batch, the op is
  applied as is;
- ``broadcast_in_dim``, ``reshape``, ``transpose``, ``reduce``, ``slice``, ``pad``,
  ``concatenate``: the batch axis is prepended to shapes and index lists, axes shift by 1;
- ``dot_general``: the batch axis is a batch dimension of both operands when both are
  batched, else a free dimension of the batched one, moved back to axis 0.

Ops whose operands are all unbatched are re-emitted unbatched (structural keys make them
the very values of the view where they already exist). A primitive whose type has no rule
is refused with an error naming it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from itertools import compress
from typing import Any

import numpy as np

from tidu.ad.linearize import LinearTape
from tidu.core.keys import NO_ATTRS, PRIMARY, Attrs, Aval, ValueKey, is_inexact
from tidu.ops.catalog import InternalPrimitive, catalog
from tidu.trace.fragments import FragmentBuilder
from tidu.trace.resolve import ResolvedView
from tidu.trace.tracing import Trace, Tracer


class BatchingError(TypeError):
    """A primitive has no batching rule."""


Value = tuple[Tracer, bool]  # a value of the enclosing trace, and whether it is batched
Rule = Callable[[Trace, ValueKey, list[Value], int], Tracer]


def broadcast_batch(trace: Trace, v: Value, size: int) -> Tracer:
    """``v`` with the batch axis: an unbatched value repeated ``size`` times on axis 0."""
    t, batched = v
    if batched:
        return t
    return trace.emit("broadcast_in_dim", [t], _batch_broadcast(size, t.aval.shape))


@functools.lru_cache(maxsize=1024)
def _batch_broadcast(size: int, shape: tuple[int, ...]) -> Attrs:
    """The attributes of ``broadcast_batch``'s op (made once per shape: a pass broadcasts
    many values of a few shapes)."""
    return Attrs(shape=(size, *shape), dims=tuple(range(1, len(shape) + 1)))


def move_axis(trace: Trace, t: Tracer, src: int, dst: int) -> Tracer:
    """``t`` with axis ``src`` moved to position ``dst``."""
    if src == dst:
        return t
    perm = [a for a in range(t.aval.ndim) if a != src]
    perm.insert(dst, src)
    return trace.emit("transpose", [t], {"perm": tuple(perm)})


def _elementwise(trace: Trace, key: ValueKey, ins: list[Value], size: int) -> Tracer:
    return trace.emit(key.op, [broadcast_batch(trace, v, size) for v in ins], key.attrs)  # type: ignore[arg-type]


def _shifted(trace: Trace, key: ValueKey, x: Tracer, **attrs: Any) -> Tracer:
    return trace.emit(key.op, [x], {**dict(key.attrs), **attrs})  # type: ignore[arg-type]


def _broadcast_in_dim(trace: Trace, key: ValueKey, ins: list[Value], size: int) -> Tracer:
    a = key.attrs
    return _shifted(trace, key, ins[0][0], shape=(size, *a["shape"]), dims=(0, *[d + 1 for d in a["dims"]]))


def _reshape(trace: Trace, key: ValueKey, ins: list[Value], size: int) -> Tracer:
    return _shifted(trace, key, ins[0][0], shape=(size, *key.attrs["shape"]))


def _transpose(trace: Trace, key: ValueKey, ins: list[Value], size: int) -> Tracer:
    return _shifted(trace, key, ins[0][0], perm=(0, *[p + 1 for p in key.attrs["perm"]]))


def _reverse(trace: Trace, key: ValueKey, ins: list[Value], size: int) -> Tracer:
    return _shifted(trace, key, ins[0][0], dims=tuple(d + 1 for d in key.attrs["dims"]))


def _reduce(trace: Trace, key: ValueKey, ins: list[Value], size: int) -> Tracer:
    return _shifted(trace, key, ins[0][0], axes=tuple(a + 1 for a in key.attrs["axes"]))


def _slice(trace: Trace, key: ValueKey, ins: list[Value], size: int) -> Tracer:
    a = key.attrs
    return _shifted(trace, key, ins[0][0], start=(0, *a["start"]), limit=(size, *a["limit"]),
                    strides=(1, *a["strides"]))


def _dynamic_slice(trace: Trace, key: ValueKey, ins: list[Value], size: int) -> Tracer:
    (x, _), (start, start_batched) = ins
    x = broadcast_batch(trace, ins[0], size)
    axis, k = key.attrs["axis"] + 1, key.attrs["size"]
    if not start_batched:
        return trace.emit("dynamic_slice", [x, start], {"axis": axis, "size": k})
    # one start per example: a one-hot selection, entry j of example b taken from
    # position start_b + j (rank 5: batch, axes before, j, position, axes after)
    n = x.aval.shape[axis]
    hit = _one_hot(trace, _clamped_start(trace, start, n - k), k, n, subtract=False)  # (B, k, n)
    shape = x.aval.shape
    wide = (*shape[:axis], k, n, *shape[axis + 1:])
    xs = trace.emit("broadcast_in_dim", [x], {"shape": wide, "dims": (*range(axis), axis + 1,
                                                                       *range(axis + 2, len(wide)))})
    hits = trace.emit("broadcast_in_dim", [hit], {"shape": wide, "dims": (0, axis, axis + 1)})
    return _sum_selected(trace, hits, xs, axis + 1)


def _dynamic_update_slice(trace: Trace, key: ValueKey, ins: list[Value], size: int) -> Tracer:
    x, update = broadcast_batch(trace, ins[0], size), broadcast_batch(trace, ins[1], size)
    (start, start_batched) = ins[2]
    axis = key.attrs["axis"] + 1
    if not start_batched:
        return trace.emit("dynamic_update_slice", [x, update, start], {"axis": axis})
    # one start per example: position q of example b takes update entry q - start_b where
    # that is in range (rank 5: batch, axes before, q, j, axes after), else keeps x
    n, k = x.aval.shape[axis], update.aval.shape[axis]
    hit = _one_hot(trace, _clamped_start(trace, start, n - k), n, k, subtract=True)  # (B, n, k)
    shape = update.aval.shape
    wide = (*shape[:axis], n, k, *shape[axis + 1:])
    us = trace.emit("broadcast_in_dim", [update], {"shape": wide, "dims": (*range(axis), axis + 1,
                                                                           *range(axis + 2, len(wide)))})
    hits = trace.emit("broadcast_in_dim", [hit], {"shape": wide, "dims": (0, axis, axis + 1)})
    spread = _sum_selected(trace, hits, us, axis + 1)
    inside = trace.emit("reduce_max", [trace.emit("convert", [hit], {"dtype": "int8"})], {"axes": (2,)})
    inside = trace.emit("compare", [inside, trace.emit("broadcast_in_dim", [trace.constant(0, "int8")],
                                                       {"shape": inside.aval.shape, "dims": ()})],
                        {"direction": "NE"})
    inside = trace.emit("broadcast_in_dim", [inside], {"shape": x.aval.shape, "dims": (0, axis)})
    return trace.emit("select", [inside, spread, x], {})


def _clamped_start(trace: Trace, start: Tracer, most: int) -> Tracer:
    """Batched starts clamped into [0, most], as the primitives clamp them."""
    dtype = start.aval.dtype
    low = trace.emit("maximum", [start, trace.emit("broadcast_in_dim", [trace.constant(0, dtype)],
                                                   {"shape": start.aval.shape, "dims": ()})], {})
    return trace.emit("minimum", [low, trace.emit("broadcast_in_dim", [trace.constant(most, dtype)],
                                                  {"shape": start.aval.shape, "dims": ()})], {})


def _one_hot(trace: Trace, start: Tracer, rows: int, cols: int, subtract: bool) -> Tracer:
    """(B, rows, cols) booleans: ``start_b + r == c`` (``r - start_b == c`` with ``subtract``)."""
    dtype = start.aval.dtype
    b = start.aval.shape[0]
    s = trace.emit("broadcast_in_dim", [start], {"shape": (b, rows, cols), "dims": (0,)})
    r = trace.emit("broadcast_in_dim", [trace.constant(np.arange(rows, dtype=dtype), dtype)],
                   {"shape": (b, rows, cols), "dims": (1,)})
    c = trace.emit("broadcast_in_dim", [trace.constant(np.arange(cols, dtype=dtype), dtype)],
                   {"shape": (b, rows, cols), "dims": (2,)})
    at = trace.emit("sub" if subtract else "add", [r, s] if subtract else [s, r], {})
    return trace.emit("compare", [at, c], {"direction": "EQ"})


def _sum_selected(trace: Trace, hits: Tracer, values: Tracer, axis: int) -> Tracer:
    """The sum over ``axis`` of ``values`` where ``hits`` (one hit at most per sum): the
    picked value itself. Floats are added in halving steps with -0.0 elsewhere, so a picked
    -0.0 stays -0.0 (a reduction starts from +0.0, and -0.0 + 0.0 is 0.0), as an unbatched
    dynamic slice reads it."""
    dtype = values.aval.dtype
    if dtype == "bool":  # (booleans have no sum: through int8)
        values = trace.emit("convert", [values], {"dtype": "int8"})
    n = values.aval.shape[axis]
    inexact = is_inexact(dtype)
    filler = np.negative(np.zeros((), dtype)) if inexact else np.zeros((), values.aval.dtype)
    zero = trace.emit("broadcast_in_dim", [trace.constant(filler, values.aval.dtype)],
                      {"shape": values.aval.shape, "dims": ()})
    terms = trace.emit("select", [hits, values, zero], {})
    if not inexact or n == 0:
        out = trace.emit("reduce_sum", [terms], {"axes": (axis,)})
        return trace.emit("convert", [out], {"dtype": "bool"}) if dtype == "bool" else out
    rank = terms.aval.ndim
    while n > 1:
        if n % 2:  # one more -0.0 along the axis
            n += 1
            terms = trace.emit("pad", [terms, trace.constant(filler, dtype)],
                               {"low": (0,) * rank, "high": tuple(int(a == axis) for a in range(rank)),
                                "interior": (0,) * rank})
        shape = terms.aval.shape
        halves = [trace.emit("slice", [terms], {
            "start": tuple(lo if a == axis else 0 for a in range(rank)),
            "limit": tuple(hi if a == axis else d for a, d in enumerate(shape)),
            "strides": (1,) * rank}) for lo, hi in ((0, n // 2), (n // 2, n))]
        terms = trace.emit("add", halves, {})
        n //= 2
    shape = terms.aval.shape
    return trace.emit("reshape", [terms], {"shape": shape[:axis] + shape[axis + 1:]})


def _pad(trace: Trace, key: ValueKey, ins: list[Value], size: int) -> Tracer:
    (x, _), (value, value_batched) = ins
    x = broadcast_batch(trace, ins[0], size)
    a = key.attrs
    attrs = {"low": (0, *a["low"]), "high": (0, *a["high"]), "interior": (0, *a["interior"])}
    if not value_batched:
        return trace.emit("pad", [x, value], attrs)
    # one padding value per example: pad with 0, then put each example's value where a
    # padded mask of the operand's positions is false
    dtype = x.aval.dtype
    padded = trace.emit("pad", [x, trace.constant(0, dtype)], attrs)
    ones = trace.emit("broadcast_in_dim", [trace.constant(True, "bool")], {"shape": x.aval.shape, "dims": ()})
    inside = trace.emit("pad", [ones, trace.constant(False, "bool")], attrs)
    fill = trace.emit("broadcast_in_dim", [value], {"shape": padded.aval.shape, "dims": (0,)})
    return trace.emit("select", [inside, padded, fill], {})


def _concatenate(trace: Trace, key: ValueKey, ins: list[Value], size: int) -> Tracer:
    return trace.emit("concatenate", [broadcast_batch(trace, v, size) for v in ins],
                      {"axis": key.attrs["axis"] + 1})


def _dot_general(trace: Trace, key: ValueKey, ins: list[Value], size: int) -> Tracer:
    (lhs, lb), (rhs, rb) = ins
    a = key.attrs
    lc, rc, lbat, rbat = (tuple(a[k]) for k in ("lhs_contract", "rhs_contract", "lhs_batch", "rhs_batch"))
    shift = lambda axes, on: tuple(x + 1 for x in axes) if on else axes  # noqa: E731
    attrs = {"lhs_contract": shift(lc, lb), "rhs_contract": shift(rc, rb)}
    if lb and rb:  # the examples are one more batch dimension, first: already on axis 0
        attrs |= {"lhs_batch": (0, *shift(lbat, True)), "rhs_batch": (0, *shift(rbat, True))}
        return trace.emit("dot_general", [lhs, rhs], attrs)
    attrs |= {"lhs_batch": shift(lbat, lb), "rhs_batch": shift(rbat, rb)}
    out = trace.emit("dot_general", [lhs, rhs], attrs)
    # the examples are a free dimension: result axes are batch, lhs free, rhs free
    if lb:
        at = len(lbat)  # axis 0 is the first free axis of the lhs
    else:
        lhs_free = lhs.aval.ndim - len(lc) - len(lbat)
        at = len(rbat) + lhs_free  # axis 0 is the first free axis of the rhs
    return move_axis(trace, out, at, 0)


def _conv(trace: Trace, key: ValueKey, ins: list[Value], size: int) -> Tracer:
    """Convolution (rules/conv.rules): examples of the lhs alone join its batch (after the
    batch groups, which stay in front); examples of the window (the lhs broadcast to them
    when it is not batched) become more groups, feature groups or, when the convolution
    has batch groups, batch groups."""
    (lhs, lb), (rhs, rb) = ins
    attrs = dict(key.attrs)
    g, b, v = attrs["feature_group_count"], attrs["batch_group_count"], size

    def reshape(t: Tracer, shape: tuple[int, ...]) -> Tracer:
        return t if t.aval.shape == shape else trace.emit("reshape", [t], {"shape": shape})

    def swap01(t: Tracer) -> Tracer:
        return trace.emit("transpose", [t], {"perm": (1, 0) + tuple(range(2, t.aval.ndim))})

    def conv(x: Tracer, w: Tracer, **groups: int) -> Tracer:
        return trace.emit("conv", [x, w], {**attrs, **groups})

    if not rb:  # lhs (V, N, C, *x)
        n, c, *sp = lhs.aval.shape[1:]
        if b == 1:
            out = conv(reshape(lhs, (v * n, c, *sp)), rhs)
            return reshape(out, (v, n) + out.aval.shape[1:])
        # (V, B, N / B, ..) -> (B, V, N / B, ..): each batch group keeps its examples together
        x = swap01(reshape(lhs, (v, b, n // b, c, *sp)))
        out = conv(reshape(x, (n * v, c, *sp)), rhs)
        return reshape(out, (v, n // b) + out.aval.shape[1:])
    x = broadcast_batch(trace, ins[0], size)  # (V, N, C, *x)
    n, c, *sp = x.aval.shape[1:]
    o, *kernel = rhs.aval.shape[1:]
    w = reshape(rhs, (v * o, *kernel))
    if b == 1:  # example e's features are the group(s) e G .. e G + G - 1
        out = conv(reshape(swap01(x), (n, v * c, *sp)), w, feature_group_count=v * g)
    else:  # example e's batch is the batch groups e B .. e B + B - 1
        out = conv(reshape(x, (v * n, c, *sp)), w, batch_group_count=v * b)
    nb, _, *y = out.aval.shape
    return swap01(reshape(out, (nb, v, o, *y)))


def _stacked(trace: Trace, key: ValueKey, ins: list[Value], size: int) -> Tracer:
    """Linear algebra on stacks of matrices: the last axes are the matrices, every leading
    axis is a batch (operands share them), so the examples become one more leading axis."""
    return trace.emit(key.op, [broadcast_batch(trace, v, size) for v in ins], key.attrs)


# type rules of rules/linalg.rules ((..., m, n) operands with shared leading batch axes) and
# rules/fft.rules
STACKED_TYPES = ("matrix", "square", "linear_solve", "log_determinant", "determinant", "eigenvalues",
                 "qr_q", "qr_r", "svdvals", "svd_u", "svd_vh", "pinv", "frechet", "lu", "lu_pivots",
                 "permutation_matrix",
                 "eigvals", "eig_vectors",
                 # rules/fft.rules: transforms of the trailing axes, leading axes batch
                 "fft", "rfft", "irfft")

RULES: dict[str, Rule] = {
    **dict.fromkeys(STACKED_TYPES, _stacked),
    **dict.fromkeys(("elementwise", "compare", "select", "convert", "bitcast", "to_real", "abs", "make_complex"),
                    _elementwise),
    "broadcast_in_dim": _broadcast_in_dim,
    "reshape": _reshape,
    "transpose": _transpose,
    "reduce": _reduce,
    "reverse": _reverse,
    "slice": _slice,
    "dynamic_slice": _dynamic_slice,
    "dynamic_update_slice": _dynamic_update_slice,
    "pad": _pad,
    "concatenate": _concatenate,
    "dot_general": _dot_general,
    "conv": _conv,
}


def rule_for(op: str) -> Rule:
    prim = catalog().get_primitive(op)
    if isinstance(prim, InternalPrimitive):
        return prim.batch
    rule = RULES.get(prim.decl.type_rule)
    if rule is None:
        raise BatchingError(f"vmap: primitive {op} (type {prim.decl.type_rule}) has no batching rule; "
                            f"known types: {', '.join(sorted(RULES))}")
    return rule


def batch(trace: Trace, view: ResolvedView, outputs: Sequence[ValueKey], env: dict[ValueKey, Value],
          size: int, shared: bool = False, own: Mapping[ValueKey, int] | None = None) -> list[Value]:
    """The outputs of ``view`` computed in ``trace`` for a batch of ``size`` examples.
    ``env`` gives values of ``trace`` for the view's inputs (batched or not); an input
    it does not list is a value of an enclosing trace, used as is. ``shared``: ``trace``
    has recorded the view's fragments, with aliases binding its unbatched inputs to the
    values ``env`` gives them, so a value no batched input reaches is used by its key
    (resolve finds it there) instead of being emitted again. ``own`` (with ``shared``):
    the values of the AD pass whose batched inputs ``env`` seeds (its fragment's index):
    no value outside it depends on them, so the walk does not enter the rest of the view
    (the primal computation it differentiates)."""
    if own is not None and shared:
        order = _pass_order(outputs, own, env)
        for key in [*order, *outputs]:  # the walk's leaves: values no batched input reaches
            for k in key.inputs if key in own else (key,):
                if k not in env and k not in own:
                    env[k] = (trace.external(k), False)
    else:
        order = view.topo_order(outputs)
    rules: dict[str, Rule] = {}  # rule_for, once per op of this pass
    emit = trace.emit
    elementwise = _Elementwise(trace, size)
    for key in order:
        if key in env:
            continue
        if key.input is not None:
            target = view.alias_of(key)
            env[key] = env[target] if target is not None else (trace.external(key), False)
            continue
        ins = [env[k] for k in key.inputs]
        if not any([b for _, b in ins]):
            if shared:
                env[key] = (trace.external(key), False)
            else:
                env[key] = (emit(key.op, [t for t, _ in ins], key.attrs), False)  # type: ignore[arg-type]
        else:
            rule = rules.get(key.op)  # type: ignore[arg-type]
            if rule is None:
                rule = rules[key.op] = rule_for(key.op)  # type: ignore[index,arg-type]
            if rule is _elementwise:  # _elementwise, with the broadcasts made once
                operands = []
                for k, (t, batched) in zip(key.inputs, ins, strict=True):
                    operands.append(t if batched else elementwise.broadcast(k, t))
                env[key] = (elementwise(key.op, key.attrs, operands, key.aval), True)  # type: ignore[arg-type]
                continue
            env[key] = (rule(trace, key, ins, size), True)
    return [env[o] for o in outputs]


class _Elementwise:
    """An elementwise op of a pass emitted over the batch: ``(op, attrs, operands, aval)``,
    ``aval`` the op's unbatched result. On operands of that shape with the batch axis
    (unbatched ones broadcast already) and without attributes, its result is that shape in
    its dtype: the builder takes it with that aval, no inference. Anything else, and a
    builder that gives ops roles of its own (a custom rule's), goes through ``emit``."""

    __slots__ = ("add_known", "avals", "broadcasts", "size", "trace")

    def __init__(self, trace: Trace, size: int) -> None:
        self.trace, self.size = trace, size
        self.add_known = trace.builder.add_known if type(trace.builder) is FragmentBuilder else None
        self.avals: dict[Aval, Aval] = {}  # an unbatched aval -> its batched one
        self.broadcasts: dict[ValueKey, Tracer] = {}

    def broadcast(self, key: ValueKey, t: Tracer | None = None) -> Tracer:
        """Unbatched operand ``t`` (the value of ``key``; None: ``key`` as recorded by the
        trace) repeated over the batch, made once per pass (hash-consed anyway; emitting
        it again for each use costs as much)."""
        wide = self.broadcasts.get(key)
        if wide is None:
            trace = self.trace
            t = trace.external(key) if t is None else t
            if self.add_known is not None and t.trace is trace:  # broadcast_batch's op, its aval known
                aval = self.avals.get(t.aval)
                if aval is None:
                    aval = self.avals[t.aval] = Aval((self.size, *t.aval.shape), t.aval.dtype)
                attrs = _batch_broadcast(self.size, t.aval.shape)
                wide = Tracer(trace, self.add_known("broadcast_in_dim", [t.ref], PRIMARY, aval, attrs), aval)
            else:
                wide = broadcast_batch(trace, (t, False), self.size)
            self.broadcasts[key] = wide
        return wide

    def __call__(self, op: str, attrs: Attrs, operands: list[Tracer], aval: Aval) -> Tracer:
        wide = self.avals.get(aval)
        if wide is None:
            wide = self.avals[aval] = Aval((self.size, *aval.shape), aval.dtype)
        trace, shape = self.trace, wide.shape
        if self.add_known is not None and attrs is NO_ATTRS and all(
                [t.trace is trace and t.aval.shape == shape for t in operands]):
            return Tracer(trace, self.add_known(op, [t.ref for t in operands], PRIMARY, wide), wide)
        return trace.emit(op, operands, attrs)


class _Record:
    """A tape record as the batching rules read a key: its op and attributes."""

    __slots__ = ("attrs", "op")

    def __init__(self, op: str, attrs: Attrs) -> None:
        self.op, self.attrs = op, attrs


def batch_tape(trace: Trace, tape: LinearTape, seeds: Mapping[int, Tracer], outputs: Sequence[int],
               size: int) -> dict[int, Tracer]:
    """``batch`` of a linearize pass whose linear ops are on ``tape`` (``linearize_tape``): its
    records ``outputs`` computed in ``trace`` for a batch of ``size``, the tangent inputs
    being the batched values ``seeds`` gives (by record). Every other record reads a record,
    so it is batched; its fixed operands (values of the pass's fragment or of the view it
    differentiates, which ``trace`` has recorded) are used by key, unbatched. The records
    are in order, each after its operands; those the outputs do not reach are not made.
    The same ops as ``batch`` of the interned pass, without interning the unbatched ones."""
    ops, attrs_of, args_of = tape.ops, tape.attrs, tape.args
    live = bytearray(len(ops))
    for j in outputs:
        live[j] = 1
    for j in range(len(ops) - 1, -1, -1):
        if live[j]:
            for a in args_of[j]:
                if type(a) is int:
                    live[a] = 1
    env: dict[int, Tracer] = dict(seeds)
    fixed: dict[ValueKey, Value] = {}  # the unbatched operands, by key
    rules: dict[str, Rule] = {}
    elementwise = _Elementwise(trace, size)
    for j in compress(range(len(ops)), live):
        if j in env:
            continue
        op = ops[j]
        if op is None:
            raise ValueError(f"batch_tape: tangent input {j} of the tape has no seed")
        rule = rules.get(op)
        if rule is None:
            rule = rules[op] = rule_for(op)
        attrs = attrs_of[j]
        if rule is _elementwise:
            operands = [env[a] if type(a) is int else elementwise.broadcast(a) for a in args_of[j]]
            env[j] = elementwise(op, attrs, operands, tape.avals[j])
            continue
        ins: list[Value] = []
        for a in args_of[j]:
            if type(a) is int:
                ins.append((env[a], True))
            else:
                v = fixed.get(a)
                if v is None:
                    v = fixed[a] = (trace.external(a), False)
                ins.append(v)
        env[j] = rule(trace, _Record(op, attrs), ins, size)  # type: ignore[arg-type]
    return {j: env[j] for j in outputs}


def _pass_order(outputs: Sequence[ValueKey], own: Mapping[ValueKey, int], env: dict[ValueKey, Value]) -> list[ValueKey]:
    """The values of ``own`` the outputs reach through values of ``own``, each after its
    operands (an iterative post-order walk, as ``ResolvedView.topo_order``)."""
    order: list[ValueKey] = []
    done: dict[ValueKey, bool] = {}
    for root in outputs:
        if root in done or root in env or root not in own:
            continue
        stack = [(root, iter(root.inputs))]
        done[root] = False
        while stack:
            key, deps = stack[-1]
            for dep in deps:
                if dep in done or dep in env or dep not in own:
                    continue
                done[dep] = False
                stack.append((dep, iter(dep.inputs)))
                break
            else:
                stack.pop()
                done[key] = True
                order.append(key)
    return order


__all__ = ["RULES", "BatchingError", "batch", "batch_tape", "broadcast_batch", "move_axis", "rule_for"]
