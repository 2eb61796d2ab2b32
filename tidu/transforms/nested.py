"""Transforms inside a trace: the symbolic core of every tidu transform.

Applied inside a trace (the "parent"), a transform opens a child trace, traces the
function on FRESH inputs of the child, and runs the AD passes (linearize,
linear_transpose) on the child's resolved view. The child's inputs, and the tangent or
cotangent seeds of the passes, are then bound to values of the parent with input
aliases (``{inner input key: parent value key}``); the parent records the new fragments
and aliases (for its own resolve, linearize and materialize), and the results are
parent tracers referring to the new keys. Pass ids come from the top-level trace, so
the same call builds the same keys every time.

Jacobians built here are one JVP (jacfwd) or one transpose (jacrev) per differentiated
leaf or output, batched over the identity (tidu.ad.batching): their graph does not grow
with the number of elements. A leaf or output of one element is not batched: the
pass's own keys are the block. ``grad`` of a single real scalar is one JVP.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import numpy as np

from tidu import numpy as tnp
from tidu.ad.batching import batch, batch_tape, broadcast_batch, move_axis
from tidu.ad.linearize import LinearizedGraph, linearize, linearize_tape
from tidu.ad.transpose import linear_transpose, transpose_onto_tape, vjp
from tidu.ad.values import ADRuleError, Unfusable
from tidu.core.gcpause import paused_gc
from tidu.core.keys import Aval, InputKey, Literal, ValueKey, is_complex, is_float, is_inexact
from tidu.core.pytree import TreeDef, dict_keys, flatten, flatten_up_to, leaf_paths, unflatten
from tidu.dtypes import is_float0
from tidu.ops.catalog import OpError
from tidu.trace.resolve import resolve
from tidu.trace.tracing import Trace, TraceError, Tracer, current_trace
from tidu.transforms.float0 import check_float0_tangent, has_tangents, hide
from tidu.transforms.float0 import zeros as float0_zeros
from tidu.transforms.staging import arg_names, check_leaf, foreign_library_hint, function_name, is_weak

# --- argnums --------------------------------------------------------------------------------


class ForwardRefused(TypeError):
    """Forward-mode differentiation met a custom_vjp function (which has no JVP): its JVP
    rule (tidu.transforms.custom) raises this, and the nested forward-mode gradient falls
    back to reverse mode."""


def check_argnums_type(argnums: Any, what: str) -> None:
    ok = isinstance(argnums, int) and not isinstance(argnums, bool)
    if isinstance(argnums, tuple | list):
        ok = bool(argnums) and all(isinstance(a, int) and not isinstance(a, bool) for a in argnums)
    if not ok:
        raise TypeError(f"tidu.{what}: argnums must be an int or a non-empty tuple of ints, "
                        f"got {argnums!r}")


def normalize_argnums(argnums: int | Sequence[int], n: int, what: str) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    out = []
    for a in nums:
        if not -n <= a < n:
            raise ValueError(f"tidu.{what}: argnums={argnums!r} is out of range for a call with "
                             f"{n} positional argument(s)")
        out.append(a % n)
    if len(set(out)) != len(out):
        raise ValueError(f"tidu.{what}: argnums={argnums!r} repeats an argument")
    return tuple(out)


# --- one level of tracing ---------------------------------------------------------------------


@dataclass
class Level:
    """A function traced in a child trace of ``parent`` (finished)."""

    kind: str
    parent: Trace
    trace: Trace
    in_keys: list[ValueKey]  # the child's input keys, every leaf of every argument
    arg_trees: list[TreeDef]
    arg_leaves: list[range]  # leaf indices of each argument
    argnums: tuple[int, ...]
    single: bool  # argnums was an int
    diff: list[int]  # leaf indices differentiated, in argnums order
    out_keys: list[ValueKey]
    out_tree: TreeDef
    bind: dict[InputKey, ValueKey]
    aux: Any = None
    # leaf indices of the argnums arguments that are integers or booleans, not
    # differentiated: float0 tangents (jvp, vjp, linearize; allow_int)
    skip: list[int] = field(default_factory=list)

    @property
    def diff_keys(self) -> list[ValueKey]:
        return [self.in_keys[i] for i in self.diff]

    @property
    def wrt(self) -> list[int]:
        """Leaf indices of the argnums arguments, differentiated or not, in argnums order."""
        return [i for a in self.argnums for i in self.arg_leaves[a]]

    def pass_id(self) -> int:
        return self.parent.next_pass_id()

    def commit(self, fragments: Sequence[Any] = (), aliases: dict | None = None) -> None:
        """Record the child's fragment and ``fragments`` in the parent, with the aliases
        binding the child's inputs (and ``aliases``)."""
        merged = {**self.trace.aliases, **self.bind, **(aliases or {})}
        self.parent.record([self.trace.finish(), *fragments], merged)

    def value(self, key: ValueKey | None, aval: Aval, trace: Trace | None = None) -> Tracer:
        """A tracer of the parent (or ``trace``) for ``key``; zeros when it is None."""
        t = trace or self.parent
        if key is None:
            return t.constant(Literal.filled(0, aval.shape, aval.dtype))
        return t.external(key)

    def per_argnum(self, diff_values: Sequence[Any], fill: Callable[[int], Any] | None = None) -> Any:
        """Values for the differentiated leaves, as pytrees shaped like the arguments; the
        skipped (integer) leaves get ``fill(leaf index)``, by default float0 zeros."""
        by_leaf = dict(zip(self.diff, diff_values, strict=True))
        for i in self.skip:
            by_leaf[i] = fill(i) if fill is not None else float0_zeros(self.in_keys[i].aval.shape)
        trees = [unflatten(self.arg_trees[a], [by_leaf[i] for i in self.arg_leaves[a]])
                 for a in self.argnums]
        return trees[0] if self.single else tuple(trees)


_FLOAT0_KINDS = ("jvp", "vjp", "linearize")  # transforms of every argument: integers get float0 tangents
_ALLOW_INT = ("grad", "value_and_grad", "jacrev")  # allow_int=True, as JAX's


def open_level(kind: str, fn: Callable[..., Any], args: Sequence[Any],
               argnums: int | Sequence[int], has_aux: bool = False, allow_int: bool = False) -> Level:
    """Trace ``fn(*args)`` in a child trace of the current trace. Integer and boolean
    leaves of the argnums arguments are not differentiated (``Level.skip``) for jvp, vjp
    and linearize and with ``allow_int``; elsewhere they are an error."""
    parent = current_trace()
    if parent is None:
        raise TraceError(f"internal: {kind} traced without an enclosing trace")
    if not callable(fn):
        raise TypeError(f"tidu.{kind} takes a function, got {type(fn).__name__}")
    nums = normalize_argnums(argnums, len(args), kind)
    names = arg_names(fn, len(args))
    trace = Trace(parent, kind)
    in_keys: list[ValueKey] = []
    bind: dict[InputKey, ValueKey] = {}
    trees, ranges, in_args = [], [], []
    leaf_of_arg: dict[int, list[int]] = {}
    skip: list[int] = []
    try:
        for a, (arg, name) in enumerate(zip(args, names, strict=True)):
            leaves, td = flatten(arg)
            start, tracers = len(in_keys), []
            for leaf, path in zip(leaves, leaf_paths(arg), strict=True):
                where = f"argument {name}{path} of {kind}({function_name(fn)})"
                check_leaf(leaf, where)
                outer = parent.key(leaf)
                if a in nums and not is_inexact(outer.aval.dtype):
                    if kind in _FLOAT0_KINDS or allow_int:  # as JAX: a float0 tangent, not differentiated
                        skip.append(len(in_keys))
                    else:
                        hint = ("leave the argument out of argnums, or pass allow_int=True (its gradient is "
                                "then float0 zeros, as JAX's)" if kind in _ALLOW_INT else
                                "bind it instead (functools.partial, or a closure), as JAX's takes float and "
                                "complex arguments only" if kind == "linear_transpose" else
                                "leave the argument out of argnums (tidu.jvp takes integer arguments, with "
                                "float0 tangents)" if kind == "jacfwd" else "leave the argument out of argnums")
                        raise TypeError(
                            f"{kind} cannot differentiate with respect to {where}: its dtype is "
                            f"{outer.aval.dtype}. Pass a float or complex value (3.0, not 3) or {hint}")
                t = trace.new_input(name + path, outer.aval, is_weak(leaf))
                bind[t.key.input] = outer
                leaf_of_arg.setdefault(a, []).append(len(in_keys))
                in_keys.append(t.key)
                tracers.append(t)
            trees.append(td)
            ranges.append(range(start, len(in_keys)))
            in_args.append(unflatten(td, tracers))
        with trace:
            try:
                out = fn(*in_args)
            except (TypeError, AttributeError) as e:
                if (hint := foreign_library_hint(e, fn)) is not None:
                    raise hint from e
                if isinstance(e, AttributeError):
                    raise
                lists = [n for a, n in zip(args, names, strict=True) if isinstance(a, list)]
                if not lists:
                    raise
                raise TypeError(f"{e} (in {function_name(fn)} under {kind}: argument {lists[0]} is a Python list, "
                                "which is a pytree of separate values, as in JAX; pass np.array(...) for one "
                                "array)") from e
        aux = None
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError(f"{kind}(has_aux=True): {function_name(fn)} must return a pair "
                                f"(output, aux), got {type(out).__name__}")
            out, aux = out
        out = hide(out)  # float0 outputs (no values): part of the structure, their tangents float0
        out_leaves, out_tree = flatten(out)
        out_keys = []
        for leaf, path in zip(out_leaves, leaf_paths(out), strict=True):
            check_leaf(leaf, f"output{path} of {function_name(fn)} under {kind}")
            out_keys.append(trace.key(leaf))
        if aux is not None:
            aux_leaves, aux_tree = flatten(aux)
            aux = unflatten(aux_tree, [parent.external(trace.key(x)) if isinstance(x, Tracer)
                                       else x for x in aux_leaves])
    finally:
        trace.finish()
    skipped = set(skip)
    diff = [i for a in nums for i in leaf_of_arg.get(a, []) if i not in skipped]
    return Level(kind, parent, trace, in_keys, trees, ranges, nums, isinstance(argnums, int),
                 diff, out_keys, out_tree, bind, aux, skip)


def out_values(lvl: Level) -> Any:
    return unflatten(lvl.out_tree, [lvl.parent.external(k) for k in lvl.out_keys])


# --- grad ------------------------------------------------------------------------------------


@paused_gc()  # tracing and AD build ~10^5 objects, no cycles (tidu.core.gcpause)
def grad_nested(fn: Callable[..., Any], argnums: Any, has_aux: bool, with_value: bool,
                args: Sequence[Any], allow_int: bool = False, holomorphic: bool = False) -> Any:
    kind = "value_and_grad" if with_value else "grad"
    lvl = open_level(kind, fn, args, argnums, has_aux, allow_int)
    if holomorphic:  # JAX's dtype rules: complex arguments to differentiate, a complex output
        for k in lvl.diff_keys:
            if not is_complex(k.aval.dtype):
                raise TypeError(f"{kind}(holomorphic=True) requires complex arguments to differentiate, got "
                                f"{k.aval.dtype}; pass a complex value (np.asarray(x, complex)) or drop "
                                "holomorphic=True")
    if len(lvl.out_keys) != 1 or lvl.out_keys[0].aval.shape != ():
        got = ", ".join(str(k.aval.shape) for k in lvl.out_keys) or "nothing"
        raise TypeError(f"{kind} requires {function_name(fn)} to return a scalar (shape ()), got "
                        f"{got}. Use tidu.jacrev or tidu.vjp for non-scalar outputs, or reduce "
                        "the output (tnp.sum)")
    (out,) = lvl.out_keys
    if holomorphic and not is_complex(out.aval.dtype):
        raise TypeError(f"{kind}(holomorphic=True) requires a complex output, got {out.aval.dtype} from "
                        f"{function_name(fn)}; return a complex value or drop holomorphic=True")
    if not holomorphic and not is_float(out.aval.dtype):
        raise TypeError(f"{kind} requires a real floating-point output, got {out.aval.dtype}. "
                        "For a holomorphic function pass holomorphic=True; otherwise use tidu.vjp, or "
                        "differentiate tnp.real/tnp.abs of it")
    if not lvl.diff:  # allow_int, integer arguments only: float0 gradients
        lvl.commit()
        grads = []
    else:
        grads = _forward_grad(lvl, out)
    if grads is None:
        grads = _reverse_grad(lvl, out)
        if holomorphic:  # reverse mode gives adjoints, conj(f'(z)); JAX's holomorphic grad is f'(z)
            grads = [tnp.conj(g) for g in grads]
    g = lvl.per_argnum(grads)
    value = (out_values(lvl), lvl.aux) if has_aux else out_values(lvl)
    if with_value:
        return value, g
    return (g, lvl.aux) if has_aux else g


def _forward_grad(lvl: Level, out: ValueKey) -> list[Tracer] | None:
    """The gradient by one JVP, when the function has a single real scalar input (of the
    output's dtype) to differentiate: one forward sweep with tangent 1, no transpose,
    the same derivative. Choosing the mode by the dimensions is what CasADi does too;
    here it makes grad(grad(f)) of a scalar function forward-over-forward (half the
    passes of reverse-over-reverse, a fifth fewer ops on the 1000-op chain). None
    when it does not apply, or when the function calls a custom_vjp function (which
    has no JVP): then the gradient is taken in reverse mode."""
    keys = lvl.diff_keys
    if len(keys) != 1 or keys[0].aval.shape != () or keys[0].aval.dtype != out.aval.dtype:
        return None
    key = keys[0]
    view = lvl.trace.view()
    bound = lvl.bind[key.input]  # the enclosing trace's value the input stands for
    export: dict[ValueKey, ValueKey] | None = {} if _shares_tangents(lvl, view) else None
    try:
        lin = linearize(view, [out], [key], pass_id=lvl.pass_id(), unit_seed=True,
                        known=lvl.trace.forward_tangents.get(key), export=export)
    except ForwardRefused:
        return None
    if "custom_vjp_lin" in map(_OP, lin.fragment.keys):  # a custom_vjp's tangent: reverse only
        return None
    if export:
        lvl.parent.forward_tangents.setdefault(bound, {}).update(export)
    lvl.commit([lin.fragment])
    return [lvl.value(lin.output_keys[0], key.aval)]


def _shares_tangents(lvl: Level, view: Any) -> bool:
    """Whether a gradient of the enclosing trace along the value this level's input
    stands for could reuse this level's tangents: the enclosing trace is a gradient's,
    this level has that one input, and its function used no value of an enclosing
    trace (at any depth), so every value it traced depends on its input alone."""
    if lvl.parent.label not in ("grad", "value_and_grad") or len(lvl.in_keys) != 1:
        return False
    enclosing = set()
    t: Trace | None = lvl.parent
    while t is not None:
        enclosing.add(t.builder.name)
        t = t.parent
    return not any(f.name in enclosing for f in view.fragments)


_OP = attrgetter("op")


def _reverse_grad(lvl: Level, out: ValueKey) -> list[Tracer]:
    """The gradient by one VJP (linearize and transpose, fused where they can be)."""
    lin_pass = lvl.pass_id()
    lin_fragment, tr = vjp(lvl.trace.view(), [out], lvl.diff_keys, lin_pass_id=lin_pass, pass_id=lvl.pass_id())
    one = lvl.parent.constant(np.ones((), out.aval.dtype))
    lvl.commit([lin_fragment, tr.fragment], {k: one.key for k, _ in tr.tangent_inputs})
    return [lvl.value(k, key.aval) for k, key in zip(tr.output_keys, lvl.diff_keys, strict=True)]


# --- jvp and vjp cores ---------------------------------------------------------------------------


def _tangent_key(trace: Trace, t: Any, primal: ValueKey, where: str) -> ValueKey:
    aval = primal.aval
    check_leaf(t, where)
    if isinstance(t, Tracer):
        if t.aval.shape != aval.shape:
            raise ValueError(f"{where} has shape {t.aval.shape}, the primal has {aval.shape}")
        if t.aval.dtype != aval.dtype:
            t = tnp.astype(t, aval.dtype)
        return trace.key(t)
    arr = np.asarray(t)
    if arr.shape != aval.shape:
        raise ValueError(f"{where} has shape {arr.shape}, the primal has {aval.shape}")
    if not np.can_cast(arr.dtype, aval.dtype, casting="same_kind"):
        raise TypeError(f"{where} has dtype {arr.dtype.name}, the primal has {aval.dtype}")
    return trace.constant(arr.astype(aval.dtype)).key


@paused_gc()  # tracing and AD build ~10^5 objects, no cycles (tidu.core.gcpause)
def jvp_core(kind: str, fn: Callable[..., Any], args: Sequence[Any], argnums: Any,
             tangents: Sequence[Any], has_aux: bool = False) -> tuple[Level, list[Tracer], list[Tracer]]:
    """Outputs and output tangents of ``fn`` for tangent leaves of the argnums leaves
    (``has_aux``: ``fn`` returns ``(output, aux)``, aux kept on the level)."""
    lvl = open_level(kind, fn, args, argnums, has_aux)
    wrt = lvl.wrt
    if len(tangents) != len(wrt):
        raise ValueError(f"{kind}: {len(tangents)} tangent leaves for {len(wrt)} primals")
    diff_tangents = []
    for i, t in zip(wrt, tangents, strict=True):
        key = lvl.in_keys[i]
        # as JAX: integer and boolean primals take float0 tangents (not read), the others never
        name = str(key.input).split("@")[0]  # (the level's suffix: x@2 is the user's x)
        if not check_float0_tangent(f"tidu.{kind}", f"the tangent of argument {name}", t, key.aval.dtype,
                                    key.aval.shape):
            diff_tangents.append(t)
    if not lvl.diff:  # integer arguments only: nothing to differentiate
        lvl.commit()
        out_tangents: list[ValueKey | None] = [None] * len(lvl.out_keys)
    else:
        lin = linearize(lvl.trace.view(), lvl.out_keys, lvl.diff_keys, pass_id=lvl.pass_id())
        aliases = {}
        for n, ((_, ref), t, key) in enumerate(zip(lin.tangent_inputs, diff_tangents, lvl.diff_keys,
                                                   strict=True)):
            aliases[lin.key(ref).input] = _tangent_key(lvl.parent, t, key, f"{kind} tangent {n}")
        lvl.commit([lin.fragment], aliases)
        out_tangents = list(lin.output_keys)
    outs = [lvl.parent.external(k) for k in lvl.out_keys]
    # integer and boolean outputs have float0 tangents (NumPy arrays, never traced)
    touts = [lvl.value(k, o.aval) if has_tangents(o.aval.dtype) else float0_zeros(o.aval.shape)
             for k, o in zip(out_tangents, lvl.out_keys, strict=True)]
    return lvl, outs, touts


class Pullback:
    """Transposes a linearized function on demand (one transpose pass per call)."""

    def __init__(self, lvl: Level, lin: LinearizedGraph | None) -> None:
        self.lvl, self.lin = lvl, lin  # lin None: nothing differentiated (integer arguments only)

    def keys(self, cts: Sequence[Any],
             only: int | None = None) -> tuple[Trace, list[ValueKey | None]]:
        """Cotangent keys of the differentiated leaves for output cotangents ``cts``
        (one per output leaf; with ``only``, a single cotangent for output ``only``)."""
        q = current_trace()
        if q is None or not self.lvl.parent.is_ancestor_of(q) or not self.lvl.parent.active:
            raise TraceError("the pullback of a vjp taken inside a transform must be called "
                             "inside that same transform")
        if q is not self.lvl.parent:
            q.uses_outer = True
        out_keys = self.lvl.out_keys
        for o, ct in ([(only, cts[0])] if only is not None else enumerate(cts)):
            # as JAX, the cotangent of an integer or boolean output (float0) is not read: its shape is checked
            if not has_tangents(out_keys[o].aval.dtype):
                if not is_float0(ct):
                    check_leaf(ct, f"the cotangent of output {o}")
                shape = ct.aval.shape if isinstance(ct, Tracer) else tuple(np.shape(ct))
                if shape != out_keys[o].aval.shape:
                    raise ValueError(f"vjp pullback: the cotangent of output {o} has shape {shape}, the output "
                                     f"has {out_keys[o].aval.shape}")
            elif is_float0(ct):
                raise TypeError(f"vjp pullback: the cotangent of output {o} is float0, the output has dtype "
                                f"{out_keys[o].aval.dtype}; pass a {out_keys[o].aval.dtype} value")
        if self.lin is None:
            return q, []
        outs = self.lin.tangent_outputs
        if only is not None:
            outs = [r if i == only else None for i, r in enumerate(outs)]
        masked = LinearizedGraph(self.lin.fragment, self.lin.tangent_inputs, outs, self.lin.pass_id)
        tr = linear_transpose(masked, pass_id=q.next_pass_id())
        aliases = {}
        for seed, _ in tr.tangent_inputs:
            ct = cts[0] if only is not None else cts[seed.index]
            out = out_keys[seed.index]
            aliases[seed] = (_tangent_key(q, ct, out, f"cotangent of output {seed.index}")
                             if has_tangents(out.aval.dtype) else
                             q.constant(Literal.filled(0, out.aval.shape, out.aval.dtype)).key)
        q.record([tr.fragment], aliases)
        return q, tr.output_keys

    def __call__(self, cts: Sequence[Any], only: int | None = None) -> list[Tracer]:
        q, keys = self.keys(cts, only)
        return [self.lvl.value(k, d.aval, q) for k, d in zip(keys, self.lvl.diff_keys, strict=True)]


@paused_gc()  # tracing and AD build ~10^5 objects, no cycles (tidu.core.gcpause)
def vjp_core(kind: str, fn: Callable[..., Any], args: Sequence[Any],
             argnums: Any, has_aux: bool = False) -> tuple[Level, list[Tracer], Pullback]:
    lvl = open_level(kind, fn, args, argnums, has_aux)
    if not lvl.diff:  # integer arguments only: float0 cotangents
        lvl.commit()
        return lvl, [lvl.parent.external(k) for k in lvl.out_keys], Pullback(lvl, None)
    lin = linearize(lvl.trace.view(), lvl.out_keys, lvl.diff_keys, pass_id=lvl.pass_id())
    lvl.commit([lin.fragment])
    return lvl, [lvl.parent.external(k) for k in lvl.out_keys], Pullback(lvl, lin)


# --- symbolic Jacobians ------------------------------------------------------------------------


def basis(aval: Aval, j: int) -> np.ndarray:
    e = np.zeros(aval.size, aval.dtype)
    e[j] = 1
    return e.reshape(aval.shape)


def _stack(parts: list[Tracer], axis: int, shape: tuple[int, ...]) -> Tracer:
    """Stack same-shaped tracers along a new ``axis`` and reshape to ``shape``."""
    if len(parts) == 1:
        return tnp.reshape(parts[0], shape)
    grown = [tnp.expand_dims(p, axis) for p in parts]
    return tnp.reshape(tnp.concatenate(grown, axis=axis), shape)


def _jacobian_tree(lvl: Level, blocks: dict[tuple[int, int], Any]) -> Any:
    """Nest blocks[(output leaf, diff position)] like JAX: output structure outside,
    argument structure inside. Integer leaves (allow_int) get zero blocks of their dtype,
    as JAX's jacrev."""
    def zero_block(o: int) -> Callable[[int], Any]:
        def fill(i: int) -> Tracer:
            aval = lvl.in_keys[i].aval
            return lvl.parent.constant(Literal.filled(0, lvl.out_keys[o].aval.shape + aval.shape, aval.dtype))
        return fill

    per_out = [lvl.per_argnum([blocks[o, d] for d in range(len(lvl.diff))], zero_block(o))
               for o in range(len(lvl.out_keys))]
    return unflatten(lvl.out_tree, per_out)


def _with_aux(lvl: Level, jacobian: Any, has_aux: bool) -> Any:
    """``(jacobian, aux)`` with ``has_aux`` (JAX's result), else the Jacobian."""
    return (jacobian, lvl.aux) if has_aux else jacobian


def _inputs_env(lvl: Level) -> dict[ValueKey, tuple[Tracer, bool]]:
    """The child's inputs as the parent values they are bound to (unbatched)."""
    return {k: (lvl.parent.external(lvl.bind[k.input]), False) for k in lvl.in_keys}


def _basis(trace: Trace, aval: Aval) -> Tracer:
    """The identity as a batch of ``aval.size`` one-hot values of ``aval``."""
    return trace.constant(Literal.identity(aval.size, (aval.size, *aval.shape), aval.dtype))


def _seed(trace: Trace, aval: Aval) -> tuple[Tracer, bool]:
    """The identity over ``aval``: a batch of its one-hot values, or, for a single
    element, the unbatched one (no batch axis to carry around)."""
    if aval.size == 1:
        return trace.constant(Literal.filled(1, aval.shape, aval.dtype)), False
    return _basis(trace, aval), True


def _block(trace: Trace, v: tuple[Tracer, bool], size: int, batch_first: bool,
           shape: tuple[int, ...], out_ndim: int) -> Tracer:
    """A Jacobian block from a batched result: the batch axis first (``jacrev``) or last
    of the output axes (``jacfwd``), reshaped to ``shape``."""

    t = v[0]
    if v[1] or size > 1:
        t = broadcast_batch(trace, v, size)
        if not batch_first:
            t = move_axis(trace, t, 0, out_ndim)
    return tnp.reshape(t, shape) if t.aval.shape != shape else t


@paused_gc()  # tracing and AD build ~10^5 objects, no cycles (tidu.core.gcpause)
def jacfwd_nested(fn: Callable[..., Any], argnums: Any, args: Sequence[Any], has_aux: bool = False) -> Any:
    """One JVP per differentiated leaf, batched over the leaf's identity
    (tidu.ad.batching): the graph does not grow with the number of elements. A leaf of one
    element needs no batch: its JVP's keys are used as they are (``_Unbatched``). Several
    larger leaves of few elements in all share one JVP (``_jacfwd_joint``). ``has_aux``:
    ``fn`` returns ``(output, aux)``, the result is ``(jacobian, aux)``."""

    lvl = open_level("jacfwd", fn, args, argnums, has_aux)
    view = lvl.trace.view()
    parent, blocks = lvl.parent, {}
    # leaves of one element are seeded with a one (no batch: the graph a user reads);
    # several larger leaves of few elements in all share one batched JVP
    joint = [d for d, key in enumerate(lvl.diff_keys) if key.aval.size > 1]
    if len(joint) < 2 or sum(lvl.diff_keys[d].aval.size for d in joint) ** 2 > JOINT_BASIS_MAX:
        joint = []
    else:
        _jacfwd_joint(lvl, view, joint, blocks)
    single = _Unbatched(lvl)
    for d, key in enumerate(lvl.diff_keys):
        if d in joint:
            continue
        if key.aval.size == 1:  # seeded with the constant one (as grad's forward mode)
            try:
                lin = linearize(view, lvl.out_keys, [key], pass_id=lvl.pass_id(), unit_seed=True)
                seeds: list[ValueKey] = []
            except ForwardRefused:  # a custom rule reads a closed-over value: it needs to see the seed
                lin = linearize(view, lvl.out_keys, [key], pass_id=lvl.pass_id())
                seeds = lin.input_keys
            single.add([lin.fragment], seeds, key.aval)
            for o, (out, k) in enumerate(zip(lvl.out_keys, lin.output_keys, strict=True)):
                blocks[o, d] = (k, out.aval.shape + key.aval.shape, out.aval.dtype)
            continue
        tangents = _batched_jvp(lvl, view, [key], [_seed(parent, key.aval)], key.aval.size)
        for o, (out, v) in enumerate(zip(lvl.out_keys, tangents, strict=True)):
            shape = out.aval.shape + key.aval.shape
            if v is None:
                blocks[o, d] = parent.constant(Literal.filled(0, shape, out.aval.dtype))
            else:
                blocks[o, d] = _block(parent, v, key.aval.size, False, shape, out.aval.ndim)
    single.commit(blocks)
    return _with_aux(lvl, _jacobian_tree(lvl, blocks), has_aux)


# Leaves of more than one element but few in all (parameters and a state, say) are
# differentiated by one JVP batched over all their elements (JAX's basis): one pass, and
# ops over the whole batch, instead of one of each per leaf. Up to this many elements in
# the basis (its constants are dense: a row per element of all the leaves, a column per
# element of one).
JOINT_BASIS_MAX = 4096


def _jacfwd_joint(lvl: Level, view: Any, joint: list[int], blocks: dict) -> None:
    """``jacfwd_nested``'s blocks for the leaves ``joint`` by one JVP, each leaf's tangent
    seeded with its rows of the identity over all their elements."""
    keys, parent = lvl.diff_keys, lvl.parent
    total = sum(keys[d].aval.size for d in joint)
    rows: dict[int, int] = {}  # the leaf's first row of the basis
    seeds = []
    for d in joint:
        aval = keys[d].aval
        rows[d] = sum(keys[e].aval.size for e in rows)
        basis = np.eye(total, aval.size, k=-rows[d], dtype=aval.dtype).reshape(total, *aval.shape)
        seeds.append((parent.constant(basis), True))
    tangents = _batched_jvp(lvl, view, [keys[d] for d in joint], seeds, total)
    for o, (out, v) in enumerate(zip(lvl.out_keys, tangents, strict=True)):
        for d in joint:
            key = keys[d]
            shape = out.aval.shape + key.aval.shape
            if v is None:
                blocks[o, d] = parent.constant(Literal.filled(0, shape, out.aval.dtype))
                continue
            t = broadcast_batch(parent, v, total)
            size = key.aval.size
            t = parent.emit("slice", [t], {"start": (rows[d],) + (0,) * out.aval.ndim,
                                          "limit": (rows[d] + size, *out.aval.shape),
                                          "strides": (1,) * (out.aval.ndim + 1)})
            blocks[o, d] = _block(parent, (t, True), size, False, shape, out.aval.ndim)


def _batched_jvp(lvl: Level, view: Any, wrt: list[ValueKey], seeds: list[tuple[Tracer, bool]],
                 size: int) -> list[tuple[Tracer, bool] | None]:
    """The tangents of the level's outputs along ``wrt``, each seeded with the batch of
    ``size`` ``seeds`` gives, in the parent (None where zero). One JVP whose linear ops go
    on a tape, emitted batched from there (``batch_tape``); the pass's fragment (its
    primary ops) joins the parent, so its values are used as they are, not copied. Where
    the tape cannot take the pass (an op only the separate passes handle), the JVP is
    interned and batched (``batch``), the same ops either way."""
    parent, pass_id = lvl.parent, lvl.pass_id()
    if size:
        try:
            frag, tape, tangent_inputs, tangent_outputs = linearize_tape(view, lvl.out_keys, wrt, pass_id)
        except (Unfusable, ADRuleError, OpError):
            frag = None  # (the separate passes handle it, or give the error's message)
        if frag is not None:
            lvl.commit([frag])
            made = batch_tape(parent, tape, {r.id: s[0] for r, s in zip(tangent_inputs, seeds, strict=True)},
                              [r.id for r in tangent_outputs if r is not None], size)
            return [None if r is None else (made[r.id], True) for r in tangent_outputs]
    lin = linearize(view, lvl.out_keys, wrt, pass_id=pass_id)
    env = _inputs_env(lvl)
    for (_, ref), seed in zip(lin.tangent_inputs, seeds, strict=True):
        env[lin.key(ref)] = seed
    present = [k for k in lin.output_keys if k is not None]
    lin_view = resolve([lin.fragment], aliases=lvl.trace.aliases)
    # the pass's fragment joins the parent, so its unbatched values are used as they
    # are (batch(shared=True)), not copied op by op
    lvl.commit([lin.fragment])
    vals = iter(batch(parent, lin_view, present, env, size, shared=True, own=lin.fragment.index) if size else [])
    return [next(vals) if k is not None and size else None for k in lin.output_keys]


class _Unbatched:
    """The Jacobian blocks of a one-element seed (a JVP along a leaf of one element, or a
    VJP of an output of one element): the pass's fragment joins the parent as it is, its
    seed bound to a constant one, instead of being replayed through tidu.ad.batching (which
    would copy it op by op, for a batch axis of one). Same keys as ``jvp``/``grad``."""

    def __init__(self, lvl: Level) -> None:
        self.lvl = lvl
        self.fragments: list[Any] = []
        self.aliases: dict[InputKey, ValueKey] = {}

    def add(self, fragments: Sequence[Any], seeds: Sequence[ValueKey], aval: Aval) -> None:
        """Record ``fragments``, their ``seeds`` (input keys) bound to a constant one."""
        self.fragments += [f for f in fragments if all(f is not g for g in self.fragments)]
        if seeds:
            one = self.lvl.parent.constant(Literal.filled(1, aval.shape, aval.dtype))
            for seed in seeds:
                self.aliases[seed.input] = one.key

    def commit(self, blocks: dict[tuple[int, int], Any]) -> None:
        """Record the fragments, and make tracers of the pending blocks, given as
        (key or None, block shape, dtype)."""
        if not self.fragments:
            return
        self.lvl.commit(self.fragments, self.aliases)
        parent = self.lvl.parent
        for od, b in blocks.items():
            if type(b) is tuple:
                k, shape, dtype = b
                if k is None:
                    blocks[od] = parent.constant(Literal.filled(0, shape, dtype))
                else:
                    t = parent.external(k)
                    blocks[od] = tnp.reshape(t, shape) if t.aval.shape != shape else t


def _jacrev_on_tapes(lvl: Level, blocks: dict) -> bool:
    """``jacrev_nested``'s blocks where every output has several elements: one linearize
    and its transpose for each output kept on tapes (no interned linear value), each
    transpose emitted batched over its output's identity (``batch_tape``). False, with
    nothing recorded, where a tape cannot take a pass (the interned passes handle it)."""
    try:
        frag, tape, tangent_inputs, tangent_outputs = linearize_tape(lvl.trace.view(), lvl.out_keys,
                                                                     lvl.diff_keys, lvl.pass_id())
        transposes = [transpose_onto_tape(frag, tape, tangent_inputs,
                                          [r if i == o else None for i, r in enumerate(tangent_outputs)],
                                          lvl.pass_id())
                      for o in range(len(lvl.out_keys))]
    except (Unfusable, ADRuleError, OpError):
        return False
    parent = lvl.parent
    lvl.commit([t[0] for t in transposes])  # (the linearize's fragment is their parent)
    for o, (out, (_, tr, seeds, outs)) in enumerate(zip(lvl.out_keys, transposes, strict=True)):
        size = out.aval.size
        made = batch_tape(parent, tr, {seeds[0].id: _seed(parent, out.aval)[0]},
                          [r.id for r in outs if r is not None], size) if seeds else {}
        for d, (key, r) in enumerate(zip(lvl.diff_keys, outs, strict=True)):
            shape = out.aval.shape + key.aval.shape
            if r is None or not seeds:
                blocks[o, d] = parent.constant(Literal.filled(0, shape, key.aval.dtype))
            else:
                blocks[o, d] = _block(parent, (made[r.id], True), size, True, shape, 0)
    return True


def _transposed_per_output(lvl: Level, lin: LinearizedGraph) -> Iterator[LinearizedGraph]:
    """``lin`` transposed for each of its outputs in turn (the others' cotangents zero)."""
    for o in range(len(lin.tangent_outputs)):
        outs = [r if i == o else None for i, r in enumerate(lin.tangent_outputs)]
        yield linear_transpose(LinearizedGraph(lin.fragment, lin.tangent_inputs, outs, lin.pass_id),
                               pass_id=lvl.pass_id())


@paused_gc()  # tracing and AD build ~10^5 objects, no cycles (tidu.core.gcpause)
def jacrev_nested(fn: Callable[..., Any], argnums: Any, args: Sequence[Any], has_aux: bool = False,
                  allow_int: bool = False) -> Any:
    """One VJP per output, batched over the output's identity (tidu.ad.batching): the
    graph does not grow with the number of elements. An output of one element needs no
    batch (``_Unbatched``). ``has_aux``: ``fn`` returns ``(output, aux)``, the result is
    ``(jacobian, aux)``. ``allow_int``: integer arguments get zero blocks, as JAX's."""

    lvl = open_level("jacrev", fn, args, argnums, has_aux, allow_int)
    for o, out in enumerate(lvl.out_keys):
        if not is_inexact(out.aval.dtype):
            raise TypeError(f"jacrev: output {o} of {function_name(fn)} has dtype "
                            f"{out.aval.dtype}; only float and complex outputs have cotangents")
    parent, blocks = lvl.parent, {}
    if not lvl.diff:  # allow_int, integer arguments only
        lvl.commit()
        return _with_aux(lvl, _jacobian_tree(lvl, blocks), has_aux)
    if all(out.aval.size > 1 for out in lvl.out_keys) and _jacrev_on_tapes(lvl, blocks):
        return _with_aux(lvl, _jacobian_tree(lvl, blocks), has_aux)
    single = _Unbatched(lvl)
    if len(lvl.out_keys) == 1:  # one VJP, its linear map kept on a tape (as grad's)
        lin_pass = lvl.pass_id()
        lin_fragment, tr = vjp(lvl.trace.view(), lvl.out_keys, lvl.diff_keys, lin_pass_id=lin_pass,
                               pass_id=lvl.pass_id())
        transposed = iter([tr])
    else:  # one linearize, transposed once per output
        lin = linearize(lvl.trace.view(), lvl.out_keys, lvl.diff_keys, pass_id=lvl.pass_id())
        lin_fragment = lin.fragment
        transposed = _transposed_per_output(lvl, lin)
    for o, out in enumerate(lvl.out_keys):
        tr = next(transposed)
        if out.aval.size == 1:
            single.add([lin_fragment, tr.fragment], [tr.key(ref) for _, ref in tr.tangent_inputs], out.aval)
            for d, (key, k) in enumerate(zip(lvl.diff_keys, tr.output_keys, strict=True)):
                blocks[o, d] = (k, out.aval.shape + key.aval.shape, key.aval.dtype)
            continue
        env = _inputs_env(lvl)
        for _, ref in tr.tangent_inputs:
            env[tr.key(ref)] = _seed(parent, out.aval)
        present = [k for k in tr.output_keys if k is not None]
        tr_view = resolve([tr.fragment], aliases=lvl.trace.aliases)
        run = out.aval.size and tr.tangent_inputs
        if run:  # as in jacfwd_nested: unbatched values used as they are
            lvl.commit([tr.fragment])
        vals = iter(batch(parent, tr_view, present, env, out.aval.size, shared=True, own=tr.fragment.index)
                    if run else [])
        for d, (key, k) in enumerate(zip(lvl.diff_keys, tr.output_keys, strict=True)):
            shape = out.aval.shape + key.aval.shape
            v = next(vals) if k is not None and run else None
            if v is None:
                blocks[o, d] = parent.constant(Literal.filled(0, shape, key.aval.dtype))
            else:
                blocks[o, d] = _block(parent, v, out.aval.size, True, shape, 0)
    single.commit(blocks)
    return _with_aux(lvl, _jacobian_tree(lvl, blocks), has_aux)


__all__ = [
    "Level", "Pullback", "basis", "check_argnums_type", "grad_nested", "jacfwd_nested",
    "jacrev_nested", "jvp_core", "normalize_argnums", "open_level", "vjp_core", "vmap_nested",
]


# --- vmap and batched Jacobians ----------------------------------------------------------------


def _axes_tree(axes: Any, tree: Any, what: str) -> list[int | None]:
    """``axes`` (an int, None, or a pytree prefix of ``tree`` as in JAX) per leaf of ``tree``."""
    leaves, td = flatten(tree)
    if axes is None or isinstance(axes, int):
        return [axes] * len(leaves)
    if isinstance(axes, list):
        axes = tuple(axes)
    if isinstance(tree, tuple | list) and isinstance(axes, tuple):
        if len(axes) != len(tree):
            raise ValueError(f"vmap: {what} has {len(axes)} entries for {len(tree)} values")
        return [a for sub, ax in zip(tree, axes, strict=True) for a in _axes_tree(ax, sub, what)]
    if isinstance(tree, dict) and isinstance(axes, dict):
        if set(axes) != set(tree):
            raise ValueError(f"vmap: {what} has keys {sorted(axes)}, the values {sorted(tree)}")
        return [a for k in dict_keys(tree) for a in _axes_tree(axes[k], tree[k], what)]  # the leaves' order
    # any other pytree node (a registered class or dataclass) as a prefix of the values,
    # its leaves ints or None
    ax_leaves, ax_tree = flatten(axes, is_leaf=lambda a: a is None)
    if ax_tree.kind != "leaf" and all(a is None or isinstance(a, int) for a in ax_leaves):
        try:
            subtrees = flatten_up_to(ax_tree, tree)
        except ValueError:
            subtrees = None
        if subtrees is not None:
            return [a for a, sub in zip(ax_leaves, subtrees, strict=True) for _ in flatten(sub)[0]]
    raise ValueError(f"vmap: {what} {axes!r} does not match the structure of the values ({td})")


@paused_gc()  # tracing and AD build ~10^5 objects, no cycles (tidu.core.gcpause)
def vmap_nested(fn: Callable[..., Any], in_axes: Any, out_axes: Any, args: Sequence[Any],
                axis_size: int | None = None) -> Any:
    """``fn`` mapped over axis ``in_axes`` of its arguments, inside a trace (``axis_size``
    examples where no argument is mapped)."""

    parent = current_trace()
    if parent is None:
        raise TraceError("internal: vmap traced without an enclosing trace")
    if not callable(fn):
        raise TypeError(f"tidu.vmap takes a function, got {type(fn).__name__}")
    args = tuple(args)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if isinstance(in_axes, tuple) and len(in_axes) != len(args):
        raise ValueError(f"vmap: in_axes has {len(in_axes)} entries for {len(args)} positional "
                         "arguments")
    axes = _axes_tree(in_axes, args, "in_axes")
    names = arg_names(fn, len(args))
    leaves, _ = flatten(args)
    paths = leaf_paths(args)
    size = axis_size
    for leaf, ax, path in zip(leaves, axes, paths, strict=True):
        if not is_float0(leaf):  # (a float0 array, a tangent of integers, is passed through)
            check_leaf(leaf, f"vmap argument{path}")
        if ax is None:
            continue
        shape = tuple(np.shape(leaf)) if is_float0(leaf) else parent.key(leaf).aval.shape
        if not -len(shape) <= ax < len(shape):
            raise ValueError(f"vmap: in_axes {ax} is out of range for argument{path} of shape {shape}")
        n = shape[ax % len(shape)]
        if size is not None and n != size:
            raise ValueError(f"vmap: mapped axes have different sizes ({size} and {n} at "
                             f"argument{path})" if size != axis_size else
                             f"vmap: axis_size is {axis_size}, argument{path} has {n} examples")
        size = n
    if size is None:
        raise ValueError("vmap: at least one argument must be mapped (in_axes are all None), or give "
                         "axis_size")
    trace = Trace(parent, "vmap")
    env: dict[ValueKey, tuple[Tracer, bool]] = {}
    in_args, k = [], 0
    for arg, name in zip(args, names, strict=True):
        arg_leaves, td = flatten(arg)
        tracers = []
        for leaf, path in zip(arg_leaves, leaf_paths(arg), strict=True):
            ax = axes[k]
            k += 1
            if ax is None and type(leaf) in (int, bool):  # unmapped Python ints pass as they are (JAX's)
                tracers.append(leaf)
                continue
            if is_float0(leaf):  # no values: one example is the array without the mapped axis
                shape = tuple(np.shape(leaf))
                tracers.append(float0_zeros(shape if ax is None else shape[:ax % len(shape)] +
                                            shape[ax % len(shape) + 1:]))
                continue
            outer = parent.lift(leaf)
            outer_t = leaf if isinstance(leaf, Tracer) and leaf.trace is parent else \
                Tracer(parent, outer, parent.key(leaf).aval, is_weak(leaf))
            aval = outer_t.aval
            if ax is not None:
                ax %= aval.ndim
                outer_t = move_axis(parent, outer_t, ax, 0)
                aval = Aval(aval.shape[:ax] + aval.shape[ax + 1:], aval.dtype)
            t = trace.new_input(name + path, aval, is_weak(leaf))
            env[t.key] = (outer_t, ax is not None)
            tracers.append(t)
        in_args.append(unflatten(td, tracers))
    try:
        with trace:
            try:
                out = fn(*in_args)
            except (TypeError, AttributeError) as e:
                if (hint := foreign_library_hint(e, fn)) is None:
                    raise
                raise hint from e
        out_leaves, out_tree = flatten(out)
        out_keys = []
        float0_outs = {}  # output index -> shape of one example's float0 array (not traced)
        for o, (leaf, path) in enumerate(zip(out_leaves, leaf_paths(out), strict=True)):
            if is_float0(leaf):
                float0_outs[o] = tuple(np.shape(leaf))
                continue
            check_leaf(leaf, f"output{path} of {function_name(fn)} under vmap")
            out_keys.append(trace.key(leaf))
    finally:
        trace.finish()
    # the traced fragment joins the parent, its unmapped inputs bound to their values, so
    # what depends on no mapped argument is used as it is (batch(shared=True)), not copied
    shared = parent.keeps_fragments
    if shared:
        unmapped = {k.input: t.key for k, (t, mapped) in env.items() if not mapped}
        parent.record([trace.finish()], {**trace.aliases, **unmapped})
    values = batch(parent, trace.view(), out_keys, env, size, shared=shared)
    n_out = len(out_keys) + len(float0_outs)
    o_axes = _axes_tree(out_axes, unflatten(out_tree, list(range(n_out))), "out_axes")
    results = []
    vals = iter(values)
    for o, ax in enumerate(o_axes):
        if o in float0_outs:  # the batch of float0 arrays: the axis of the examples added
            shape = float0_outs[o]
            if ax is not None and not -len(shape) - 1 <= ax <= len(shape):
                raise ValueError(f"vmap: out_axes {ax} is out of range for an output of rank {len(shape)}")
            at = ax % (len(shape) + 1) if ax is not None else None
            results.append(float0_zeros(shape if at is None else shape[:at] + (size,) + shape[at:]))
            continue
        v = next(vals)
        t = v[0]
        if ax is None:
            if v[1]:
                raise ValueError("vmap: out_axes is None for an output that depends on the mapped "
                                 "arguments")
            results.append(t)
            continue
        t = broadcast_batch(parent, v, size)
        nd = t.aval.ndim
        if not -nd <= ax < nd:
            raise ValueError(f"vmap: out_axes {ax} is out of range for an output of rank {nd - 1}")
        results.append(move_axis(parent, t, 0, ax % nd))
    return unflatten(out_tree, results)
