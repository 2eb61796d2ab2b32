"""Structured control flow (``tidu.lax``): ``cond``, ``switch``, ``scan``, ``fori_loop``,
``while_loop`` and ``map``, with JAX's signatures and meaning.

Inside a transform, each function a construct applies (a branch, a loop body, a loop
condition) is traced once into a ``Body`` (tidu.core.body): its own trace, simplified by
``materialize_merge`` into a closed graph. Values of the enclosing computation that a
body uses are *captured*: they become extra parameters of the body and operands of the
op, so a body never refers outside itself and identical bodies are one attribute value.
The op itself is one of tidu.ops.control's (``scan``, ``cond``, ``while``), one node per
result. Nothing is unrolled: the graph of a 10^4-step loop is the graph of one step.

On concrete values (no transform active) a construct is staged like ``tidu.jit`` and run:
the same program, checks and errors as inside a transform. A predicate or index known
while tracing (a Python bool or int) takes its branch only, as a Python ``if`` would.

Their derivatives and batching rules are here, one section per op, registered with the
catalog at the end of the module (as tidu.transforms.custom does for its ops):

- JVP: the same op over the JVP of its bodies (a scan of the body's JVP, a cond of the
  branches' JVPs, a while loop of the body's JVP); the tangents of the results are the
  new op's tangent results.
- Transpose: a linear ``cond`` transposes into a ``cond`` of the transposed branches; a
  linear ``scan`` into a reverse ``scan`` of the transposed body, whose residuals (the
  primal carry before each step) a forward scan stacks first (the body's other values
  are recomputed in each reverse step). A ``while`` loop has no static trip count and
  is not transposable: reverse mode through it is refused, as in JAX.
- Batching: the op over the batched bodies, a loop's carries batched only where a batched
  value reaches them; a batched ``cond`` selector evaluates every branch and selects, a
  batched ``while`` condition batches every carry and runs until every example is done.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tidu import numpy as tnp
from tidu.ad.batching import Value as BatchValue
from tidu.ad.batching import broadcast_batch
from tidu.ad.instantiate import Val, Zero
from tidu.ad.values import zero_slice_update
from tidu.core.body import Body
from tidu.core.keys import Attrs, Aval, Input, Named, ValueKey, aval_of, is_complex, is_inexact
from tidu.core.pytree import TreeDef, flatten, leaf_paths, unflatten
from tidu.ops import control as ops
from tidu.ops.catalog import InternalPrimitive, OpError, catalog, register_internal
from tidu.simplify.loops import body_terms, canonical_inputs, graph_of, tracing_body
from tidu.simplify.materialize import materialize_merge
from tidu.simplify.semantics import current_semantics
from tidu.trace.fragments import ValRef
from tidu.trace.tracing import Trace, TraceError, Tracer, current_trace
from tidu.transforms import staging
from tidu.transforms.api import jit, jvp, vjp, vmap
from tidu.transforms.custom import _RuleTrace, custom_jvp, stop_gradient
from tidu.transforms.schedules import Policy, Revolve, Schedule, plan_of, segment_of
from tidu.transforms.staging import function_name
from tidu.transforms.transformed import on_clear

# --- tracing bodies -------------------------------------------------------------------------


class _BodyTrace(Trace):
    """The trace of a body: a tracer of an enclosing trace used here becomes a parameter
    (a capture), shared with the bodies traced with the same ``captures``."""

    def __init__(self, parent: Trace | None, label: str, captures: dict[ValueKey, tuple[ValueKey, Tracer]]) -> None:
        super().__init__(parent, label)
        self.captures = captures  # outer key -> (the capture's input key, the outer tracer)

    closed = True

    def lift(self, x: Any) -> ValRef:
        if isinstance(x, Tracer) and x.trace is not self and x.trace.is_ancestor_of(self):
            x.check_alive()
            if self.parent is not None and x.trace is not self.parent:
                x = self.parent.capture(x) if self.parent.closed else x  # through enclosing bodies
            outer = x.key
            entry = self.captures.get(outer)
            if entry is None:
                key = Input(Named(f"capture{len(self.captures)}@{self.number}"), x.aval)
                entry = self.captures[outer] = (key, x)
            return self.builder.input(entry[0].input, x.aval)
        return super().lift(x)

    def capture(self, x: Tracer) -> Tracer:
        return Tracer(self, self.lift(x), x.aval, x.weak)


def _trace_bodies(label: str, fns: Sequence[Callable[..., Any]], args_trees: Sequence[Any],
                  where: str, weak: Sequence[bool] = ()) -> tuple[list[Body], list[Tracer], list[TreeDef],
                                                                   list[list[Aval]]]:
    """Trace each ``fns[i](*args_trees[i])`` (leaves: avals) into a Body. The bodies share
    their captures: each takes ``(captures..., its own parameters...)``. Returns the
    bodies, the captured tracers (the op's first operands), and each body's output tree
    and output avals. ``weak``: the parameters (by leaf position) that are weakly typed
    (a loop's Python-scalar initial values, as JAX's carries are while first traced)."""
    outer = current_trace()
    captures: dict[ValueKey, tuple[ValueKey, Tracer]] = {}
    traced = []
    for fn, args in zip(fns, args_trees, strict=True):
        leaves, tree = flatten(args)
        bt = _BodyTrace(outer, label, captures)
        with bt:
            params = [bt.new_input(f"p{i}", a, i < len(weak) and weak[i]) for i, a in enumerate(leaves)]
            param_keys = [p.key for p in params]  # (before the body runs: y[i] = v rebinds its tracer y)
            try:
                out = fn(*unflatten(tree, params))
            except (TypeError, AttributeError) as e:
                if (hint := staging.foreign_library_hint(e, fn)) is not None:
                    raise hint from e
                raise
            out_leaves, out_tree = flatten(out)
            out_keys = []
            for leaf, path in zip(out_leaves, leaf_paths(out), strict=True):
                staging.check_leaf(leaf, f"{where}: output{path} of {function_name(fn)}")
                out_keys.append(bt.key(leaf))
        traced.append((bt, param_keys, out_keys, out_tree))
    capture_keys = [k for k, _ in captures.values()]
    bodies, trees, avals = [], [], []
    for bt, param_keys, out_keys, out_tree in traced:
        view = bt.view()
        try:
            with tracing_body():
                graph = materialize_merge(view, out_keys, inputs=[*capture_keys, *param_keys],
                                          simplify=staging.SIMPLIFY, keep_marks=True)
        except ValueError as e:
            raise TraceError(f"{where}: a transform inside the body uses a value of an enclosing "
                             f"computation ({e}); pass that value to the body as an argument") from None
        bodies.append(Body(canonical_inputs(graph), label))
        trees.append(out_tree)
        avals.append([k.aval for k in out_keys])
    return bodies, [t for _, t in captures.values()], trees, avals


def call_body(body: Body, args: Sequence[Any], only: Sequence[int] | None = None) -> list[Any]:
    """``body`` applied to ``args`` in the current trace (its nodes emitted again); with
    ``only``, those results alone (``Body.apply``)."""
    trace = current_trace()
    assert trace is not None
    return body.apply(args, trace.emit, only)


def _emit(op: str, operands: Sequence[Any], attrs: dict[str, Any]) -> list[Tracer]:
    """Every result of a control-flow op (one node per result)."""
    trace = current_trace()
    assert trace is not None
    shared = Attrs(attrs)
    n = len(ops.result_avals(op, ops.with_index(shared, 0)))
    return [trace.emit(op, operands, ops.with_index(shared, k)) for k in range(n)]


def _is_traced(*trees: Any) -> bool:
    if current_trace() is not None:
        return True
    return any(isinstance(leaf, Tracer) for t in trees for leaf in flatten(t)[0])


def _avals(tree: Any, where: str) -> tuple[list[Aval], TreeDef, list[Any]]:
    leaves, td = flatten(tree)
    out = []
    for leaf, path in zip(leaves, leaf_paths(tree), strict=True):
        staging.check_leaf(leaf, f"{where}{path}")
        out.append(leaf.aval if isinstance(leaf, Tracer) else aval_of(leaf))
    return out, td, leaves


def _selector_aval(x: Any, where: str) -> Aval:
    """The aval of a predicate or index; ``where`` says what it must be (a value that is
    no array at all, None or a string, is refused in those terms)."""
    if isinstance(x, Tracer):
        return x.aval
    try:
        return aval_of(x)
    except (TypeError, ValueError):
        raise TypeError(f"{where}, got {type(x).__name__} {x!r:.40}") from None


def _describe(avals: Sequence[Aval]) -> str:
    return "(" + ", ".join(str(a) for a in avals) + ")"


# --- cond and switch --------------------------------------------------------------------------

_NO_OPERAND = object()  # (cond's operand= not given)


def switch(index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
    """``branches[clip(index, 0, len(branches) - 1)](*operands)``, as ``jax.lax.switch``.
    Every branch is traced; all must return the same structure, shapes and dtypes."""
    branches = list(branches) if isinstance(branches, Sequence) else []
    if not branches or not all(callable(b) for b in branches):
        raise TypeError("switch: branches must be a non-empty sequence of functions")
    aval = _selector_aval(index, "switch: index must be an integer scalar")
    if aval.shape != () or np.dtype(aval.dtype).kind not in "iub":  # any integer dtype, as JAX's
        raise TypeError(f"switch: index must be an integer scalar, got {aval}")
    if not isinstance(index, Tracer):  # a known index: its branch only (as Python would), in any context
        # a NumPy integer converted to int32 first, as a traced one is (and JAX's is)
        i = int(index) if type(index) in (int, bool) else int(np.asarray(index).astype(np.int32))
        return _known_branch(branches[min(max(i, 0), len(branches) - 1)], operands)
    return _cond(index, branches, operands, "switch")


def _known_branch(branch: Callable[..., Any], operands: tuple) -> Any:
    """The branch a known predicate or index picks, on ``operands``: called on them inside
    a trace, staged like ``tidu.jit`` and run on concrete ones (traced values, as in every
    construct: ``x.at[...]`` and JAX's dtype promotion, not NumPy's)."""
    if _is_traced(operands):
        return branch(*operands)
    return jit(branch)(*operands)


def cond(pred: Any, true_fun: Callable[..., Any], false_fun: Callable[..., Any], *operands: Any,
         operand: Any = _NO_OPERAND) -> Any:
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, as
    ``jax.lax.cond``. ``pred`` is a boolean scalar; both branches are traced and must
    return the same structure, shapes and dtypes. ``operand=x`` is JAX's older form of one
    operand."""
    if not callable(true_fun) or not callable(false_fun):
        raise TypeError("cond: true_fun and false_fun must be functions")
    if operand is not _NO_OPERAND:
        if operands:
            raise TypeError("cond: give the operands positionally or as operand=, not both")
        operands = (operand,)
    aval = _selector_aval(pred, "cond: pred must be a boolean scalar")
    if aval.shape != () or np.dtype(aval.dtype).kind not in "iub":
        raise TypeError(f"cond: pred must be a boolean scalar, got {aval}; compare explicitly "
                        "(e.g. x > 0) or use tidu.lax.switch for an integer index")
    if not isinstance(pred, Tracer):  # a known predicate: its branch only, in any context
        return _known_branch(true_fun if bool(pred) else false_fun, operands)
    if aval.dtype != "bool":  # an integer predicate means pred != 0, as in JAX
        pred = tnp.not_equal(pred, 0)
    return _cond(pred, [false_fun, true_fun], operands, "cond")


def _cond(index: Any, branches: list[Callable[..., Any]], operands: tuple, where: str) -> Any:
    if not isinstance(index, Tracer) and current_trace() is None:
        raise TraceError(f"{where}: internal: no trace")
    in_avals, in_tree, in_leaves = _avals(operands, f"{where}: operand ")
    params = unflatten(in_tree, in_avals)
    weak = [staging.is_weak(leaf) for leaf in in_leaves]  # a Python scalar operand stays weakly typed, as in JAX
    bodies, captured, trees, outs = _trace_bodies(where, branches, [params] * len(branches), where, weak)
    names = ["false_fun", "true_fun"] if where == "cond" else [f"branch {i}" for i in range(len(branches))]
    for i, (t, a) in enumerate(zip(trees, outs, strict=True)):
        if t != trees[0] or a != outs[0]:
            raise TypeError(f"{where}: {names[i]} returns {t} {_describe(a)} but {names[0]} returns {trees[0]} "
                            f"{_describe(outs[0])}; the branches must return the same structure, shapes and dtypes")
    trace = current_trace()
    assert trace is not None
    selector = index if isinstance(index, Tracer) else trace.constant(np.asarray(index))
    if selector.aval.dtype != "int32":
        selector = tnp.asarray(selector).astype("int32")
    results = _emit("cond", [selector, *captured, *in_leaves], {"branches": tuple(bodies)})
    return unflatten(trees[0], results)


# --- scan, fori_loop, map ---------------------------------------------------------------------


def scan(f: Callable[..., Any], init: Any, xs: Any = None, length: int | None = None,
         reverse: bool = False, unroll: int | bool = 1, *, checkpoint: Policy = None) -> tuple[Any, Any]:
    """``jax.lax.scan``: ``carry, y = f(carry, x)`` for each slice ``x`` of ``xs`` along
    axis 0 (from the end when ``reverse``); returns the final carry and the ``y`` stacked.
    ``length`` is required when ``xs`` is None. ``unroll``: steps per iteration of the
    loop (True: all of them, the loop is unrolled into the graph), as in JAX.

    ``checkpoint`` chooses what reverse mode stores: None (every step's carry), an int k
    (the carry every k steps; the steps in between are run again in the reverse pass),
    "sqrt" (k = the square root of the number of steps: about 2 sqrt(n) carries stored
    instead of n, for one more forward sweep), a tuple of segment lengths (k1, k2, ...),
    each dividing the segments of the level above (nested levels: about n/k1 + k1/k2 + ...
    carries stored, one more forward sweep per level), or ``MemoryBudget(carries)``
    (the fewest levels whose stored carries fit the budget). Values are the same under
    every policy."""
    if not callable(f):
        raise TypeError(f"scan: f must be a function, got {type(f).__name__}")
    x_leaves, x_tree = flatten(xs)
    lengths = {int(np.shape(x)[0]) for x in x_leaves if np.ndim(x) > 0}
    if any(np.ndim(x) == 0 for x in x_leaves):
        raise TypeError("scan: every leaf of xs needs a leading axis to scan over; got a scalar")
    if length is not None:
        if isinstance(length, Tracer):
            raise TypeError(f"scan: length must be a Python int (the number of steps is static), got a traced "
                            f"value ({length.aval}); pass it outside the transformed arguments (a closure or "
                            "functools.partial), or use while_loop")
        if not isinstance(length, int | np.integer) or length < 0:
            raise TypeError(f"scan: length must be a non-negative int, got {length!r}")
        lengths.add(int(length))
    if len(lengths) > 1:
        raise ValueError(f"scan: the leading axes of xs (and length) differ: {sorted(lengths)}")
    if not lengths:
        raise ValueError("scan: length is required when xs is None or has no leaves")
    (n,) = lengths
    plan = plan_of(checkpoint, n)
    k, inner = (None, None) if plan is not None or isinstance(checkpoint, Revolve) else segment_of(checkpoint, n)
    if not _is_traced(init, xs):  # concrete values: the same program, staged and run
        return jit(lambda c, x: scan(f, c, x, n, reverse, checkpoint=checkpoint))(init, xs)
    if plan is not None:
        return _scheduled(f, init, x_leaves, x_tree, plan, bool(reverse))
    if k is not None:
        return _segmented(f, init, xs, x_leaves, x_tree, n, k, bool(reverse), inner=inner)
    per = _unrolled(unroll, n)
    if per > 1:
        return _segmented(f, init, xs, x_leaves, x_tree, n, per, bool(reverse), inline=True)
    c_avals, c_tree, c_leaves = _avals(init, "scan: init")
    xs_avals = [x.aval if isinstance(x, Tracer) else aval_of(x) for x in x_leaves]
    slice_avals = [Aval(a.shape[1:], a.dtype) for a in xs_avals]
    params = (unflatten(c_tree, c_avals), unflatten(x_tree, slice_avals))
    c_weak = [staging.is_weak(leaf) for leaf in c_leaves]
    (body,), captured, (out_tree,), (out_avals,) = _trace_bodies("scan", [f], [params], "scan", c_weak)
    carry_tree, y_tree = _split_pair(out_tree, "scan", f)
    nk = len(c_avals)
    if carry_tree == c_tree and (promoted := _promoted(c_leaves, c_weak, c_avals, out_avals[:nk])) is not None:
        return scan(f, unflatten(c_tree, promoted), xs, length, reverse, unroll, checkpoint=checkpoint)
    if carry_tree != c_tree or list(out_avals[:nk]) != c_avals:
        raise TypeError(f"scan: the body {function_name(f)} changes the carry: init is {c_tree} "
                        f"{_describe(c_avals)}, the body returns {carry_tree} {_describe(out_avals[:nk])}; "
                        "the carry must keep its structure, shapes and dtypes")
    attrs = {"body": body, "n_consts": len(captured), "n_carry": nk, "length": n, "reverse": int(bool(reverse))}
    results = _emit("scan", [*captured, *c_leaves, *x_leaves], attrs)
    return unflatten(c_tree, results[:nk]), unflatten(y_tree, results[nk:])


def _promoted(leaves: list[Any], weak: list[bool], avals: list[Aval], outs: Sequence[Aval]) -> list[Any] | None:
    """JAX's rule for a loop's weakly typed initial values (Python scalars): where the body
    returns the value with another dtype of its shape, one the weak value converts to
    (``result_type(weak, out) == out``: ``0.0`` to float32, ``0`` to int32 or a float), the
    initial value takes that dtype, and the body is traced again. None where none does."""
    new, changed = list(leaves), False
    for i, (leaf, w, a, o) in enumerate(zip(leaves, weak, avals, outs, strict=True)):
        if w and a != o and a.shape == o.shape and tnp.result_type(leaf, np.zeros((), o.dtype)) == o.dtype:
            new[i] = leaf.astype(o.dtype) if isinstance(leaf, Tracer) else np.asarray(leaf, dtype=o.dtype)
            changed = True
    return new if changed else None


def _unrolled(unroll: int | bool, n: int) -> int:
    """Steps per loop iteration for ``unroll`` (JAX's meaning)."""
    if isinstance(unroll, bool):
        return n if unroll else 1
    if not isinstance(unroll, int | np.integer) or unroll < 1:
        raise TypeError(f"scan: unroll must be a positive int or a bool, got {unroll!r}")
    return min(int(unroll), n)


def _steps(f: Callable[..., Any], carry: Any, xs: Any, x_leaves: list[Any], x_tree: TreeDef, k: int) -> tuple[Any, Any]:
    """``k`` steps of ``f`` written out in the current trace (xs: k slices each), ys stacked."""
    ys = []
    for i in range(k):
        out = f(carry, unflatten(x_tree, [x[i] for x in x_leaves]) if x_leaves else None)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError(f"scan: {function_name(f)} must return a pair (carry, y), got {type(out).__name__}")
        carry, y = out
        ys.append(y)
    y_tree = flatten(ys[0])[1]
    stacked = [tnp.stack([flatten(y)[0][j] for y in ys]) for j in range(len(flatten(ys[0])[0]))]
    return carry, unflatten(y_tree, stacked)


def _segmented(f: Callable[..., Any], init: Any, xs: Any, x_leaves: list[Any], x_tree: TreeDef, n: int, k: int,
               reverse: bool, inline: bool = False, inner: Policy = None) -> tuple[Any, Any]:
    """A scan of n steps as a scan over n // k segments of k steps each (and the remaining
    steps after it). With ``inline`` a segment is its k steps written out (``unroll``);
    else a scan of k steps: reverse mode through the outer scan then stores one carry per
    segment and runs each segment again when it transposes it (``checkpoint``)."""
    if reverse:  # the same steps in the same order over the reversed slices
        flipped = unflatten(x_tree, [tnp.flip(x, 0) for x in x_leaves])
        carry, ys = _segmented(f, init, flipped, flatten(flipped)[0], x_tree, n, k, False, inline, inner)
        return carry, unflatten(flatten(ys)[1], [tnp.flip(y, 0) for y in flatten(ys)[0]])
    m = n // k
    main = unflatten(x_tree, [tnp.reshape(x[:m * k], (m, k, *np.shape(x)[1:])) for x in x_leaves])
    rest = unflatten(x_tree, [x[m * k:] for x in x_leaves])

    def segment(carry: Any, x: Any) -> tuple[Any, Any]:
        if inline:
            return _steps(f, carry, x, flatten(x)[0] if x_leaves else [], x_tree, k)
        return scan(f, carry, x if x_leaves else None, length=k, checkpoint=inner)

    if inline and m == 1 and m * k == n:  # fully unrolled: no loop at all
        return segment(init, unflatten(x_tree, [x for x in x_leaves]) if x_leaves else None)
    carry, ys = scan(segment, init, main if x_leaves else None, length=m)
    y_leaves, y_tree = flatten(ys)
    y_leaves = [tnp.reshape(y, (m * k, *np.shape(y)[2:])) for y in y_leaves]
    if m * k < n:
        tail_xs = rest if x_leaves else None
        if inline:
            carry, tail = _steps(f, carry, tail_xs, flatten(tail_xs)[0] if x_leaves else [], x_tree, n - m * k)
        else:
            carry, tail = scan(f, carry, tail_xs, length=n - m * k, checkpoint=inner)
        y_leaves = [tnp.concatenate([y, t], axis=0) for y, t in zip(y_leaves, flatten(tail)[0], strict=True)]
    return carry, unflatten(y_tree, y_leaves)


def _scheduled(f: Callable[..., Any], init: Any, x_leaves: list[Any], x_tree: TreeDef, plan: Schedule,
               reverse: bool) -> tuple[Any, Any]:
    """A scan of ``plan.steps`` steps as the loops of ``plan`` (``Schedule``): a block of
    stored steps is a scan of them; a block of segments a scan over the segments, each
    running its own schedule, so that reverse mode through it stores one carry per
    segment and runs each segment again when it reaches it."""
    n = plan.steps
    if reverse:  # the same steps in the same order over the reversed slices
        flipped = [tnp.flip(x, 0) for x in x_leaves]
        carry, ys = _scheduled(f, init, flipped, x_tree, plan, False)
        return carry, unflatten(flatten(ys)[1], [tnp.flip(y, 0) for y in flatten(ys)[0]])
    carry, start, parts = init, 0, []
    for count, segment in plan.blocks:
        size = count * (1 if segment is None else segment.steps)
        chunk = x_leaves if size == n else [x[start:start + size] for x in x_leaves]
        if segment is None:
            carry, ys = scan(f, carry, unflatten(x_tree, chunk) if x_leaves else None, length=count)
        else:
            k = segment.steps
            grouped = [tnp.reshape(x, (count, k, *np.shape(x)[1:])) for x in chunk]

            def run(c: Any, x: Any, segment: Schedule = segment) -> tuple[Any, Any]:
                return _scheduled(f, c, flatten(x)[0] if x_leaves else [], x_tree, segment, False)

            carry, ys = scan(run, carry, unflatten(x_tree, grouped) if x_leaves else None, length=count)
            y_leaves, y_tree = flatten(ys)
            ys = unflatten(y_tree, [tnp.reshape(y, (size, *np.shape(y)[2:])) for y in y_leaves])
        parts.append(ys)
        start += size
    if len(parts) == 1:
        return carry, parts[0]
    y_tree = flatten(parts[0])[1]
    stacked = zip(*(flatten(p)[0] for p in parts), strict=True)
    return carry, unflatten(y_tree, [tnp.concatenate(list(ys), axis=0) for ys in stacked])


def _split_pair(tree: TreeDef, where: str, f: Callable[..., Any]) -> tuple[TreeDef, TreeDef]:
    """The trees of (carry, y) in the tree of a body's pair output."""
    if tree.kind not in ("tuple", "list") or len(tree.children) != 2:  # [carry, y] too, as JAX
        raise TypeError(f"{where}: {function_name(f)} must return a pair (carry, y), got {tree}")
    return tree.children[0], tree.children[1]


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any, Any], Any], init_val: Any, *,
              unroll: int | bool | None = None) -> Any:
    """``jax.lax.fori_loop``: ``val = body_fun(i, val)`` for ``i`` in ``range(lower, upper)``.
    With Python int bounds it is a ``scan`` (reverse mode works); with traced bounds a
    ``while_loop`` (forward mode only)."""
    if not callable(body_fun):
        raise TypeError("fori_loop: body_fun must be a function")
    static = not isinstance(lower, Tracer) and not isinstance(upper, Tracer)
    if static:
        lo, hi = np.asarray(lower), np.asarray(upper)
        if lo.shape != () or hi.shape != () or lo.dtype.kind not in "iu" or hi.dtype.kind not in "iu":
            raise TypeError(f"fori_loop: lower and upper must be integer scalars, got {lower!r}, {upper!r}")
        if not _is_traced(init_val):
            return jit(lambda v: fori_loop(lower, upper, body_fun, v, unroll=unroll))(init_val)

        @functools.wraps(body_fun)  # (errors about the carry name body_fun)
        def step(carry: Any, _: Any) -> tuple[Any, None]:
            i, val = carry
            return (i + 1, _fori_checked(body_fun, i, val)), None

        # the counter is a Python int, weakly typed, as JAX's (int32 + i is int32)
        (_, val), _ = scan(step, (int(lo), init_val), None, length=max(int(hi) - int(lo), 0),
                           unroll=1 if unroll is None else unroll)
        return val
    if unroll is not None and unroll is not False and unroll != 1:
        raise ValueError("fori_loop: unroll needs bounds known while tracing (Python or NumPy ints), as in JAX")

    def keep_going(carry: Any) -> Any:
        return carry[0] < carry[1]

    @functools.wraps(body_fun)  # (errors about the loop value name body_fun)
    def advance(carry: Any) -> Any:
        i, hi, val = carry
        return i + 1, hi, _fori_checked(body_fun, i, val)

    trace = current_trace()
    assert trace is not None  # a bound is traced
    lo_t = lower if isinstance(lower, Tracer) else trace.constant(np.asarray(lower))
    hi_t = upper if isinstance(upper, Tracer) else trace.constant(np.asarray(upper))
    for b, name in ((lo_t, "lower"), (hi_t, "upper")):
        if b.aval.shape != () or np.dtype(b.aval.dtype).kind not in "iu":  # any integer dtype, as JAX's
            raise TypeError(f"fori_loop: {name} must be an integer scalar, got {b.aval}")
    if lo_t.aval.dtype != hi_t.aval.dtype:  # a Python int takes the other bound's dtype, as in JAX
        if staging.is_weak(lower) and not staging.is_weak(upper):
            lo_t = lo_t.astype(hi_t.aval.dtype)
        else:
            hi_t = hi_t.astype(lo_t.aval.dtype)
    return while_loop(keep_going, advance, (lo_t, hi_t, init_val))[2]


def _fori_checked(body_fun: Callable[[Any, Any], Any], i: Any, val: Any) -> Any:
    """``body_fun(i, val)``, refused in fori_loop's own terms where it changes the structure
    or shapes of ``val`` (not in those of the scan or while_loop it runs as, whose carry
    holds the counter too). A weakly typed initial value (or result) is left to the loop,
    as it may take the body's dtype."""
    out = body_fun(i, val)
    (v_leaves, v_tree), (o_leaves, o_tree) = flatten(val), flatten(out)
    if v_tree != o_tree or [np.shape(v) for v in v_leaves] != [np.shape(o) for o in o_leaves] or any(
            not staging.is_weak(v) and not staging.is_weak(o) and isinstance(o, Tracer | np.ndarray | np.generic)
            and np.dtype((o.aval if isinstance(o, Tracer) else aval_of(o)).dtype) != np.dtype(v.aval.dtype)
            for v, o in zip(v_leaves, o_leaves, strict=True)):
        for o, path in zip(o_leaves, leaf_paths(out), strict=True):
            staging.check_leaf(o, f"fori_loop: output{path} of {function_name(body_fun)}")
        got = _describe([o.aval if isinstance(o, Tracer) else aval_of(o) for o in o_leaves])
        raise TypeError(f"fori_loop: body_fun {function_name(body_fun)} changes the loop value: init_val is {v_tree} "
                        f"{_describe([v.aval for v in v_leaves])}, the body returns {o_tree} {got}; it must keep "
                        "its structure, shapes and dtypes")
    return out


def map(f: Callable[[Any], Any], xs: Any, *, batch_size: int | None = None) -> Any:  # noqa: A001 (jax.lax.map)
    """``jax.lax.map``: ``f`` applied to each slice of ``xs`` along axis 0, stacked. With
    ``batch_size``, ``f`` is vmapped over batches of that many slices, a scan over the
    batches, the rest (fewer than a batch) vmapped after them, as JAX's."""
    if not callable(f):
        raise TypeError("map: f must be a function")
    leaves = flatten(xs)[0]  # (its errors name map's xs, not the scan it becomes)
    if not leaves:
        raise ValueError(f"map: xs must hold arrays to map over, got {xs!r}")
    if any(np.ndim(x) == 0 for x in leaves):
        raise TypeError("map: every leaf of xs needs a leading axis to map over; got a scalar")
    if len({int(np.shape(x)[0]) for x in leaves}) > 1:
        raise ValueError(f"map: the leading axes of xs differ: {[int(np.shape(x)[0]) for x in leaves]}")
    if batch_size is not None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer) or batch_size < 0:
            raise TypeError(f"map: batch_size must be a non-negative int, got {batch_size!r}")
        leaves, tree = flatten(xs)
        n = {int(np.shape(x)[0]) for x in leaves if np.ndim(x) > 0}
        if len(n) == 1 and batch_size > 0 and n != {0}:  # (no slices: the scan below, as without batch_size)
            (n,) = n
            m, size = divmod(n, int(batch_size)) if batch_size < n else (0, n)
            parts = []
            if m:
                main = unflatten(tree, [tnp.reshape(x[:m * batch_size], (m, batch_size, *np.shape(x)[1:]))
                                        for x in leaves])
                ys = scan(lambda carry, x: ((), vmap(f)(x)), (), main)[1]
                y_leaves, y_tree = flatten(ys)
                parts.append(unflatten(y_tree, [tnp.reshape(y, (m * batch_size, *np.shape(y)[2:])) for y in y_leaves]))
            rest = n - m * batch_size
            if rest:
                parts.append(vmap(f)(unflatten(tree, [x[m * batch_size:] for x in leaves])))
            if len(parts) == 1:
                return parts[0]
            y_tree = flatten(parts[0])[1]
            return unflatten(y_tree, [tnp.concatenate(list(p), axis=0)
                                      for p in zip(*(flatten(q)[0] for q in parts), strict=True)])
        if batch_size == 0:
            return vmap(f)(xs)
    return scan(lambda carry, x: ((), f(x)), (), xs)[1]


# --- while_loop -----------------------------------------------------------------------------


def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init_val: Any) -> Any:
    """``jax.lax.while_loop``: ``while cond_fun(val): val = body_fun(val)``. Forward-mode
    differentiable (jvp, jacfwd); reverse mode is refused, as in JAX, since the number of
    steps is not known before running (use ``scan`` or ``fori_loop`` with int bounds)."""
    if not callable(cond_fun) or not callable(body_fun):
        raise TypeError("while_loop: cond_fun and body_fun must be functions")
    if not _is_traced(init_val):
        return jit(lambda v: while_loop(cond_fun, body_fun, v))(init_val)
    avals, tree, leaves = _avals(init_val, "while_loop: init_val")
    params = unflatten(tree, avals)
    weak = [staging.is_weak(leaf) for leaf in leaves]
    if any(weak):  # the body's dtypes first: a weakly typed initial value may take another (JAX's rule)
        (_,), _, (b_tree,), (b_avals,) = _trace_bodies("while_body", [body_fun], [(params,)], "while_loop", weak)
        if b_tree == tree and (promoted := _promoted(leaves, weak, avals, b_avals)) is not None:
            return while_loop(cond_fun, body_fun, unflatten(tree, promoted))
    (cond_body,), cond_captured, (c_tree,), (c_avals,) = _trace_bodies("while_cond", [cond_fun], [(params,)],
                                                                     "while_loop")
    if c_avals != [Aval((), "bool")]:
        raise TypeError(f"while_loop: cond_fun {function_name(cond_fun)} must return a boolean scalar, "
                        f"got {_describe(c_avals)}")
    (body,), body_captured, (b_tree,), (b_avals,) = _trace_bodies("while_body", [body_fun], [(params,)],
                                                                 "while_loop")
    if b_tree != tree or b_avals != avals:
        raise TypeError(f"while_loop: body_fun {function_name(body_fun)} changes the loop value: init_val is "
                        f"{tree} {_describe(avals)}, the body returns {b_tree} {_describe(b_avals)}")
    results = _emit("while", [*cond_captured, *body_captured, *leaves],
                    {"cond_body": cond_body, "body": body, "n_cond_consts": len(cond_captured),
                     "n_body_consts": len(body_captured)})
    return unflatten(tree, results)


# --- custom_root ---------------------------------------------------------------------------


def custom_root(f: Callable[[Any], Any], initial_guess: Any, solve: Callable[[Callable[[Any], Any], Any], Any],
                tangent_solve: Callable[[Callable[[Any], Any], Any], Any], has_aux: bool = False) -> Any:
    """``jax.lax.custom_root``: the root ``x`` of ``f`` that ``solve(f, initial_guess)``
    finds, differentiated implicitly: with respect to the values ``f`` closes over, the
    derivative of the root solves ``f_x dx = -f_theta dtheta``, which
    ``tangent_solve(g, y)`` does for the linear map ``g`` (the JVP of ``f`` in ``x`` at
    the root). The solver itself (a Newton ``while_loop``, say) is never differentiated,
    so reverse mode works through it. With ``has_aux``, ``solve`` returns ``(root, aux)``
    and so does this; ``aux`` is not differentiated (as ``stop_gradient``)."""
    for name, fn in (("f", f), ("solve", solve), ("tangent_solve", tangent_solve)):
        if not callable(fn):
            raise TypeError(f"custom_root: {name} must be a function, got {type(fn).__name__}")
    if not _is_traced(initial_guess):
        return jit(lambda g: custom_root(f, g, solve, tangent_solve, has_aux))(initial_guess)
    avals, tree, _ = _avals(initial_guess, "custom_root: initial_guess")
    (body,), captured, (out_tree,), (out_avals,) = _trace_bodies(
        "custom_root", [f], [(unflatten(tree, avals),)], "custom_root")
    if out_tree != tree or out_avals != avals:
        raise TypeError(f"custom_root: f {function_name(f)} must return a value like its argument: "
                        f"{tree} {_describe(avals)}, got {out_tree} {_describe(out_avals)}")

    n_theta, n_x, n_out = len(captured), len(avals), len(out_avals)
    everything = (n_theta + n_x,)

    def residual(x: Any, thetas: Sequence[Any]) -> Any:
        return unflatten(tree, call_body(body, [*thetas, *flatten(x)[0]]))

    def tangent(which: range, x: Any, thetas: Sequence[Any], dirs: Sequence[Any]) -> list[Any]:
        """The JVP of f along ``dirs`` for the parameters ``which``, made of ops in the
        current trace (a rule sees its tangents flow through them)."""
        jb = _jvp_body(body, tuple(i for i in which if is_inexact(body.in_avals[i].dtype)), tuple(range(n_out)),
                       "custom_root", everything, (n_out,))
        live = [d for i, d in zip(which, dirs, strict=True) if is_inexact(body.in_avals[i].dtype)]
        return call_body(jb, [*thetas, *flatten(x)[0], *live])[n_out:]

    def solve_fn(*args: Any) -> Any:
        out = solve(lambda x: residual(x, args[:n_theta]), unflatten(tree, list(args[n_theta:])))
        if has_aux and not (isinstance(out, tuple | list) and len(out) == 2):
            raise TypeError(f"custom_root(has_aux=True): solve {function_name(solve)} must return a pair "
                            f"(root, aux), got {type(out).__name__}")
        leaves, x_tree = flatten(out[0] if has_aux else out)
        for leaf, path in zip(leaves, leaf_paths(out[0] if has_aux else out), strict=False):
            staging.check_leaf(leaf, f"custom_root: the root{path} solve {function_name(solve)} returns")
        # a Python scalar takes the initial guess's dtype (it is weakly typed, as in JAX)
        leaves = [tnp.asarray(v, dtype=a.dtype) if staging.is_weak(v) and x_tree == tree else v
                  for v, a in zip(leaves, avals if x_tree == tree else leaves, strict=False)]
        got = [v.aval if isinstance(v, Tracer) else aval_of(v) for v in leaves]
        if x_tree != tree or got != avals:
            raise TypeError(f"custom_root: solve {function_name(solve)} must return a root like initial_guess: "
                            f"{tree} {_describe(avals)}, got {x_tree} {_describe(got)}")
        root = unflatten(tree, leaves)
        return (root, out[1]) if has_aux else root

    # solve is traced into a body of its own: the initial guess and the values it closes over
    # (traced by an enclosing transform, or a loop's carry) are explicit arguments of the
    # custom_jvp call, whose rule gives them no derivative (the solver is never differentiated)
    guess_leaves = flatten(initial_guess)[0]
    (solve_body,), solve_captured, (s_tree,), _ = _trace_bodies(
        "custom_root_solve", [solve_fn], [(*[t.aval for t in captured], *avals)], "custom_root")
    n_solve = len(solve_captured)

    def solved(args: Sequence[Any]) -> Any:
        thetas, rest = args[:n_theta], args[n_theta:]
        return unflatten(s_tree, call_body(solve_body, [*rest[:n_solve], *thetas, *rest[n_solve:]]))

    @custom_jvp
    def root(*args: Any) -> Any:
        return solved(args)[0] if has_aux else solved(args)

    @root.defjvp
    def root_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
        x = root(*primals)
        thetas = primals[:n_theta]
        df = tangent(range(n_theta), x, thetas, tangents[:n_theta])

        def f_x(v: Any) -> Any:
            return unflatten(tree, tangent(range(n_theta, n_theta + n_x), x, thetas, flatten(v)[0]))

        dx = tangent_solve(f_x, unflatten(tree, [-t for t in df]))
        leaves, dx_tree = flatten(dx)
        got = [aval_of(v) if not isinstance(v, Tracer) else v.aval for v in leaves]
        if dx_tree != tree or [a.shape for a in got] != [a.shape for a in avals]:
            raise TypeError(f"custom_root: tangent_solve {function_name(tangent_solve)} must return a value "
                            f"like initial_guess: {tree} {_describe(avals)}, got {dx_tree} {_describe(got)}")
        return x, dx

    args = (*captured, *solve_captured, *guess_leaves)
    if has_aux:  # the same solve called again: the same terms, one loop once simplified
        return root(*args), stop_gradient(solved(args)[1])
    return root(*args)


# --- custom_linear_solve --------------------------------------------------------------------
# The solution is marked, one ``linear_solve`` op per leaf: ``linear_solve(x_i, *b, *thetas,
# *x)``, whose value is its first operand (materialize_merge strips it). Its JVP solves again
# for the tangent, its transpose solves the transposed system: the solver is never
# differentiated, as in JAX.


@dataclasses.dataclass(frozen=True)
class _Solve:
    """One linear system: ``matvec`` (a body taking the values it closes over, then x) and
    ``solve`` (a body taking the values the solvers close over, those of matvec, then the
    right-hand side; its first results are x); ``transposed`` names the transposed system."""

    matvec: Body
    solve: Body
    n_x: int
    n_theta: int
    n_caps: int
    transposed: str | None  # None: no transpose_solve (and not symmetric)
    name: str


_SOLVES: dict[str, _Solve] = {}
_SOLVE_IDS = itertools.count()
# one id per system (its bodies and counts): calling the same solve again names the same
# system, and the registry grows with the distinct systems a process makes, not its calls
_SYSTEMS: dict[tuple, str] = {}
_SOLVES_LOCK = threading.Lock()


def _solve_marked(rid: str, thetas: Sequence[Any], rhs: Sequence[Any], caps: Sequence[Any]) -> list[Any]:
    """The leaves of the solution of system ``rid`` for ``rhs``, each marked so that its
    derivatives solve again."""
    spec = _SOLVES[rid]
    xs = call_body(spec.solve, [*caps, *thetas, *rhs])[:spec.n_x]
    return [current_trace().emit("linear_solve", [x, *rhs, *thetas, *xs, *caps], {"rule": rid, "index": i})
            for i, x in enumerate(xs)]


def custom_linear_solve(matvec: Callable[[Any], Any], b: Any, solve: Callable[[Callable[[Any], Any], Any], Any],
                        transpose_solve: Callable[[Callable[[Any], Any], Any], Any] | None = None,
                        symmetric: bool = False, has_aux: bool = False) -> Any:
    """``jax.lax.custom_linear_solve``: ``x = solve(matvec, b)`` for the linear map
    ``matvec`` (x -> A x), differentiated through the linear system and not through the
    solver: the tangent solves ``A dx = db - dA x`` with ``solve`` again, and reverse mode
    solves the transposed system with ``transpose_solve(vecmat, ct)`` (``vecmat`` is
    y -> A^T y), or with ``solve`` when ``symmetric``. The values ``matvec`` closes over
    are differentiated (through ``matvec`` only); those the solvers close over are not.
    With ``has_aux``, ``solve`` and ``transpose_solve`` return ``(x, aux)`` and so does
    this (``solve``'s aux); ``aux`` is not differentiated. ``vmap`` maps the system and
    its solvers over the examples."""
    for name, fn in (("matvec", matvec), ("solve", solve)):
        if not callable(fn):
            raise TypeError(f"custom_linear_solve: {name} must be a function, got {type(fn).__name__}")
    if transpose_solve is not None and not callable(transpose_solve):
        raise TypeError(f"custom_linear_solve: transpose_solve must be a function or None, got "
                        f"{type(transpose_solve).__name__}")
    if not _is_traced(b):
        return jit(lambda bb: custom_linear_solve(matvec, bb, solve, transpose_solve, symmetric, has_aux))(b)
    avals, tree, _ = _avals(b, "custom_linear_solve: b")
    (body,), thetas, (out_tree,), (out_avals,) = _trace_bodies(
        "custom_linear_solve", [matvec], [(unflatten(tree, avals),)], "custom_linear_solve")
    if out_tree != tree or out_avals != avals:
        raise TypeError(f"custom_linear_solve: matvec {function_name(matvec)} must return a value like b: "
                        f"{tree} {_describe(avals)}, got {out_tree} {_describe(out_avals)}")
    n_theta, n_x = len(thetas), len(avals)

    def mv(ths: Sequence[Any]) -> Callable[[Any], Any]:
        return lambda x: unflatten(tree, call_body(body, [*ths, *flatten(x)[0]]))

    def vecmat(*args: Any) -> Any:  # y -> A^H y (the adjoint; A^T y for real values)
        ths, y = args[:n_theta], args[n_theta:]
        zeros = [tnp.zeros(a.shape, a.dtype) for a in avals]
        return vjp(lambda *x: tuple(call_body(body, [*ths, *x])), *zeros)[1](tuple(y))

    def solver(fn: Callable[..., Any], what: str, linear: Callable[..., Any], aux: bool,
               conjugate: bool = False) -> Callable[..., Any]:
        # conjugate: ``fn`` solves with A^T (JAX's transpose_solve, or solve when symmetric: A = A^T) and
        # reverse mode needs the adjoint's solution A^-H r = conj(A^-T conj(r)), A^T y = conj(A^H conj(y))
        def run(*args: Any) -> Any:
            lin, rhs = linear(args[:n_theta]), unflatten(tree, list(args[n_theta:]))
            if conjugate:
                lin, rhs = (lambda y, adjoint=lin: _conj(adjoint(_conj(y)))), _conj(rhs)
            out = fn(lin, rhs)
            if aux and not (isinstance(out, tuple | list) and len(out) == 2):
                raise TypeError(f"custom_linear_solve(has_aux=True): {what} must return a pair (x, aux), got "
                                f"{type(out).__name__}")
            x = out[0] if aux else out
            leaves, x_tree = flatten(x)
            got = [v.aval if isinstance(v, Tracer) else aval_of(v) for v in leaves]
            if x_tree != tree or got != avals:
                raise TypeError(f"custom_linear_solve: {what} must return a value like b: {tree} "
                                f"{_describe(avals)}, got {x_tree} {_describe(got)}")
            if conjugate:
                return (_conj(x), out[1]) if aux else _conj(x)
            return out
        return run

    fns = [solver(solve, f"solve {function_name(solve)}", mv, has_aux)]
    # complex values: the cotangent solves the adjoint system (tidu's cotangents are adjoints), which
    # JAX's transpose_solve (and solve, for a symmetric A) solve conjugated
    complex_system = any(is_complex(a.dtype) for a in avals)
    t_solve, t_name = (solve, "solve") if symmetric else (transpose_solve, "transpose_solve")
    if t_solve is not None and (complex_system or not symmetric):
        def vm(ths: Sequence[Any]) -> Callable[[Any], Any]:
            return lambda y: unflatten(tree, list(call_body(vbody, [*ths, *flatten(y)[0]])))
        fns.append(solver(t_solve, f"{t_name} {function_name(t_solve)}", vm, has_aux, complex_system))
        (vbody,), v_caps, _, _ = _trace_bodies("custom_linear_solve", [vecmat],
                                               [(*[t.aval for t in thetas], *avals)], "custom_linear_solve")
        if v_caps:
            raise TypeError("custom_linear_solve: internal: the transpose of matvec reads a value of its own")
    params = (*[t.aval for t in thetas], *avals)
    bodies, caps, (s_tree, *_), _ = _trace_bodies("custom_linear_solve", fns, [params] * len(fns),
                                                  "custom_linear_solve")
    names = (f"solve {function_name(solve)}", f"{t_name} {function_name(t_solve)}" if len(bodies) == 2 else None)
    system = (body, tuple(bodies), vbody if len(bodies) == 2 else None, n_x, n_theta, len(caps), symmetric, names)
    with _SOLVES_LOCK:
        rid = _SYSTEMS.get(system)
        if rid is None:
            rid = f"linear_solve#{next(_SOLVE_IDS)}"
            tid = rid if symmetric else None
            if len(bodies) == 2:
                tid = f"linear_solve#{next(_SOLVE_IDS)}"
                _SOLVES[tid] = _Solve(vbody, bodies[1], n_x, n_theta, len(caps), rid, names[1])
            _SOLVES[rid] = _Solve(body, bodies[0], n_x, n_theta, len(caps), tid, names[0])
            _SYSTEMS[system] = rid
    x = unflatten(tree, _solve_marked(rid, thetas, flatten(b)[0], caps))
    if has_aux:  # the same solve called again: the same terms, one solve once simplified
        aux = unflatten(s_tree, call_body(bodies[0], [*caps, *thetas, *flatten(b)[0]]))[1]
        return x, stop_gradient(aux)
    return x


def _conj(tree: Any) -> Any:
    """``tree`` with its complex leaves conjugated (its real ones as they are)."""
    leaves, td = flatten(tree)
    return unflatten(td, [tnp.conj(v) if is_complex((v.aval if isinstance(v, Tracer) else aval_of(v)).dtype) else v
                          for v in leaves])


def _linear_solve_parts(key: ValueKey) -> tuple[_Solve, list[list[ValueKey]]]:
    """The system of a ``linear_solve`` mark and its operands: rhs, thetas, x, captures."""
    spec = _SOLVES[key.attrs["rule"]]
    sizes = (spec.n_x, spec.n_theta, spec.n_x, spec.n_caps)
    groups, at = [], 1
    for n in sizes:
        groups.append(list(key.inputs[at:at + n]))
        at += n
    return spec, groups


def _linear_solve_jvp(key: ValueKey, tangents: list[Any], b: Any) -> Any:
    spec, (r_keys, th_keys, x_keys, cap_keys) = _linear_solve_parts(key)
    n_x = spec.n_x
    dr = tangents[1:1 + n_x]
    dth = tangents[1 + n_x:1 + n_x + spec.n_theta]
    if all(not isinstance(t, Val) for t in (*dr, *dth)):
        return Zero(key.aval)
    rt = _RuleTrace(b, "custom_linear_solve")
    try:
        thetas = [rt.primal(k) for k in th_keys]
        rhs = [rt.linear(t, k.aval) for k, t in zip(r_keys, dr, strict=True)]
        live = [i for i, t in enumerate(dth) if isinstance(t, Val) and is_inexact(th_keys[i].aval.dtype)]
        with rt.trace:
            if live:  # d(A^-1 r) = A^-1 (dr - dA x)
                xs = [rt.primal(k) for k in x_keys]
                jb = _jvp_body(spec.matvec, tuple(live), tuple(range(n_x)), "custom_linear_solve",
                               (spec.n_theta + n_x,), (n_x,))
                dirs = [rt.linear(dth[i], th_keys[i].aval) for i in live]
                dax = call_body(jb, [*thetas, *xs, *dirs])[n_x:]
                rhs = [r - d for r, d in zip(rhs, dax, strict=True)]
            out = _solve_marked(key.attrs["rule"], thetas, rhs, [rt.primal(k) for k in cap_keys])
        return rt.result(out[key.attrs["index"]], key.aval, f"the tangent of custom_linear_solve's {spec.name}")
    finally:
        rt.close()


def _linear_solve_transpose(out_key: ValueKey, in_keys: list[ValueKey], mask: Sequence[bool], ct: Any,
                            b: Any) -> list[Any]:
    spec, (r_keys, th_keys, x_keys, cap_keys) = _linear_solve_parts(out_key)
    n_x = spec.n_x
    if any(mask[1 + n_x:1 + n_x + spec.n_theta]):
        raise TypeError("custom_linear_solve: internal: the solution is not linear in the values matvec "
                        "closes over")
    if spec.transposed is None:
        raise TypeError("custom_linear_solve: reverse-mode differentiation needs transpose_solve (or "
                        "symmetric=True when matvec is symmetric); pass transpose_solve=...")
    parts: list[Any] = [Zero(k.aval) for k in in_keys]
    if not any(mask[1:1 + n_x]):
        return parts
    rt = _RuleTrace(b, "custom_linear_solve")
    try:
        thetas = [rt.primal(k) for k in th_keys]
        i = out_key.attrs["index"]
        cts = [rt.linear(ct, out_key.aval) if j == i else rt.zeros(k.aval) for j, k in enumerate(r_keys)]
        with rt.trace:
            got = _solve_marked(spec.transposed, thetas, cts, [rt.primal(k) for k in cap_keys])
        for j, (k, leaf) in enumerate(zip(r_keys, got, strict=True)):
            if mask[1 + j]:
                parts[1 + j] = rt.result(leaf, k.aval, f"the cotangent of custom_linear_solve's {spec.name}")
        return parts
    finally:
        rt.close()


def _linear_solve_batch(trace: Trace, key: ValueKey, ins: list[BatchValue], size: int) -> Tracer:
    # the mark again on batched operands, for the system mapped over the examples
    rid = _batched_solve(key.attrs["rule"], size)
    return trace.emit("linear_solve", [broadcast_batch(trace, v, size) for v in ins],
                      {"rule": rid, "index": key.attrs["index"]})


def _batched_solve(rid: str, size: int) -> str:
    """The id of system ``rid`` mapped over ``size`` examples (every operand batched on
    axis 0): its bodies are the original ones under ``vmap``."""
    bid = f"{rid}@{size}"
    if bid in _SOLVES:
        return bid
    spec = _SOLVES[rid]

    def mapped(body: Body, n_out: int) -> Body:
        avals = [Aval((size, *a.shape), a.dtype) for a in body.in_avals]
        (got,), caps, _, _ = _trace_bodies("custom_linear_solve", [
            lambda *args: tuple(vmap(lambda *a: tuple(call_body(body, list(a))[:n_out]))(*args))], [avals],
            "custom_linear_solve")
        if caps:
            raise TypeError("custom_linear_solve: internal: a batched body reads a value of its own")
        return got

    made = _Solve(mapped(spec.matvec, spec.n_x), mapped(spec.solve, spec.n_x), spec.n_x, spec.n_theta,
                  spec.n_caps, None, spec.name)
    _SOLVES[bid] = made  # (before its transpose, which names it back)
    if spec.transposed is not None:
        tid = bid if spec.transposed == rid else _batched_solve(spec.transposed, size)
        _SOLVES[bid] = dataclasses.replace(made, transposed=tid)
    return bid


def _linear_solve_strip(key: Any) -> int:
    return 0


# --- bodies derived from bodies -------------------------------------------------------------
# The JVP, transpose, residual and batched versions of a body are traced once per body
# (bodies compare by structure), rewrite semantics and catalog (what simplified them), and
# forgotten with the trace cache (tidu.clear_trace_cache).

_DERIVED: dict[tuple, Body] = {}


def _context() -> tuple[str, int]:
    return current_semantics(), catalog().serial


def _derived(kind: str, memo: Callable[..., tuple]) -> Callable[[Callable[..., Body]], Callable[..., Body]]:
    """Make a body once per ``memo(*args)``, rewrite semantics and catalog."""
    def wrap(build: Callable[..., Body]) -> Callable[..., Body]:
        @functools.wraps(build)
        def cached(*args: Any) -> Body:
            key = (kind, memo(*args), *_context())
            got = _DERIVED.get(key)
            if got is None:
                got = _DERIVED[key] = build(*args)
            return got
        return cached
    return wrap


def _forget_derived() -> None:
    _DERIVED.clear()
    _JVP_OF.clear()


on_clear(_forget_derived)


# --- JVP --------------------------------------------------------------------------------------


@_derived("jvp", lambda body, t_in, t_out, label, groups, out_groups: (body, t_in, t_out, groups, out_groups))
def _jvp_body(body: Body, tangent_in: tuple[int, ...], tangent_out: tuple[int, ...], label: str,
              groups: tuple[int, ...], out_groups: tuple[int, ...]) -> Body:
    """The JVP of ``body`` as a body. Its parameters are, group by group (``groups``: the
    sizes of the parameter groups, e.g. consts, carries, xs), the group's primal parameters
    followed by the tangents of those in ``tangent_in``; its results likewise over
    ``out_groups``, with the tangents of the results in ``tangent_out``."""
    in_avals, out_avals = body.in_avals, body.out_avals
    layout = _interleave(in_avals, tangent_in, groups)
    out_layout = _interleave(out_avals, tangent_out, out_groups)

    def fn(*flat: Any) -> list[Any]:
        primals: list[Any] = [None] * len(in_avals)
        tangents: dict[int, Any] = {}
        for v, (i, is_tangent) in zip(flat, layout, strict=True):
            if is_tangent:
                tangents[i] = v
            else:
                primals[i] = v
        order = sorted(tangents)

        def f(*active: Any) -> list[Any]:
            args = list(primals)
            for i, v in zip(order, active, strict=True):
                args[i] = v
            return call_body(body, args)

        if order:
            outs, touts = jvp(f, tuple(primals[i] for i in order), tuple(tangents[i] for i in order))
        else:
            outs, touts = f(), [None] * len(out_avals)
        result = []
        for i, is_tangent in out_layout:
            if not is_tangent:
                result.append(outs[i])
            elif touts[i] is None:
                result.append(tnp.zeros(out_avals[i].shape, out_avals[i].dtype))
            else:
                result.append(touts[i])
        return result

    avals = [in_avals[i] for i, _ in layout]
    (made,), captured, _, _ = _trace_bodies(label, [fn], [avals], f"the JVP of {label}")
    if captured:
        raise AssertionError("a JVP body captured a value")
    _JVP_OF[made] = (body, tuple(p for p, (_, t) in enumerate(layout) if not t))  # its primal parameters
    return made


# a JVP body -> (the body it differentiates, its parameters that are that body's, in order)
_JVP_OF: dict[Body, tuple[Body, tuple[int, ...]]] = {}


def _interleave(avals: Sequence[Aval], tangents: Sequence[int], groups: Sequence[int]) -> list[tuple[int, bool]]:
    """The layout (index, is a tangent) of a body's parameters with tangents: per group,
    its primals, then the tangents of its members listed in ``tangents``."""
    out, start, chosen = [], 0, set(tangents)
    for size in groups:
        members = range(start, start + size)
        out += [(i, False) for i in members]
        out += [(i, True) for i in members if i in chosen]
        start += size
    assert start == len(avals)
    return out


def _jvp_rule(key: ValueKey, tangents: list[Any], b: Any) -> Any:
    """The tangent of one result of a control-flow op: the op over the JVP of its bodies
    (every sibling's tangent comes from the same new op)."""
    live = [isinstance(t, Val) for t in tangents]
    if not any(live):
        return Zero(key.aval)
    op, attrs = key.op, key.attrs
    avals = [k.aval for k in key.inputs]
    rt = _RuleTrace(b, f"jvp of {op}")
    try:
        primal = [rt.primal(k) for k in key.inputs]

        def tangent(i: int) -> Tracer:  # (in rt.trace: RuleTrace.linear would enter it again for zeros)
            t = tangents[i]
            return rt.linear(t, avals[i]) if isinstance(t, Val) else tnp.zeros(avals[i].shape, avals[i].dtype)

        with rt.trace:
            if op == "scan":
                new_ops, new_attrs, out_of = _scan_jvp(attrs, avals, live, primal, tangent)
            elif op == "cond":
                new_ops, new_attrs, out_of = _cond_jvp(attrs, avals, live, primal, tangent)
            else:
                new_ops, new_attrs, out_of = _while_jvp(attrs, avals, live, primal, tangent)
            results = _emit(op, new_ops, new_attrs)
        k = out_of.get(attrs["index"])
        if k is None:
            return Zero(key.aval)
        return rt.result(results[k], key.aval, f"the tangent of {op}")
    finally:
        rt.close()


def _scan_jvp(attrs: Attrs, avals: list[Aval], live: list[bool], primal: list[Tracer],
              tangent: Callable[[int], Tracer]) -> tuple[list[Any], dict[str, Any], dict[int, int]]:
    body: Body = attrs["body"]
    nc, nk = attrs["n_consts"], attrs["n_carry"]
    nx = len(avals) - nc - nk
    ny = len(body.out_avals) - nk
    # tangents where one was given, and on every carry a tangent reaches in some step (a
    # fixpoint: a carry whose tangent starts at zero may become nonzero later)
    moving = [live[i] and is_inexact(a.dtype) for i, a in enumerate(avals)]
    while True:
        reached = _depends(body, {i for i, m in enumerate(moving) if m})
        grown = [nc + j for j in range(nk) if j in reached and not moving[nc + j]
                 and is_inexact(avals[nc + j].dtype)]
        if not grown:
            break
        for i in grown:
            moving[i] = True
    t_consts = [i for i in range(nc) if moving[i]]
    t_carry = [nc + i for i in range(nk) if moving[nc + i]]
    t_xs = [nc + nk + i for i in range(nx) if moving[nc + nk + i]]
    t_out_carry = [i - nc for i in t_carry]
    t_ys = [nk + j for j in range(ny) if nk + j in reached and is_inexact(body.out_avals[nk + j].dtype)]
    jb = _jvp_body(body, (*t_consts, *t_carry, *t_xs), (*t_out_carry, *t_ys), "scan", (nc, nk, nx), (nk, ny))
    operands = [*primal[:nc], *(tangent(i) for i in t_consts),
                *primal[nc:nc + nk], *(tangent(i) for i in t_carry),
                *primal[nc + nk:], *(tangent(i) for i in t_xs)]
    new_attrs = {"body": jb, "n_consts": nc + len(t_consts), "n_carry": nk + len(t_carry),
                 "length": attrs["length"], "reverse": attrs["reverse"]}
    # results of the new scan: carries, carry tangents, ys, y tangents
    out_of = {i: nk + p for p, i in enumerate(t_out_carry)}
    base = nk + len(t_out_carry) + ny
    out_of.update({i: base + p for p, i in enumerate(t_ys)})
    return operands, new_attrs, out_of


def _cond_jvp(attrs: Attrs, avals: list[Aval], live: list[bool], primal: list[Tracer],
              tangent: Callable[[int], Tracer]) -> tuple[list[Any], dict[str, Any], dict[int, int]]:
    branches: tuple[Body, ...] = attrs["branches"]
    n_in = len(avals) - 1
    t_in = [i for i in range(n_in) if live[1 + i] and is_inexact(avals[1 + i].dtype)]
    outs = branches[0].out_avals
    t_out = [i for i in range(len(outs)) if is_inexact(outs[i].dtype)]
    new = tuple(_jvp_body(b, tuple(t_in), tuple(t_out), "cond", (n_in,), (len(outs),)) for b in branches)
    operands = [primal[0], *primal[1:], *(tangent(1 + i) for i in t_in)]
    return operands, {"branches": new}, {i: len(outs) + p for p, i in enumerate(t_out)}


def _while_jvp(attrs: Attrs, avals: list[Aval], live: list[bool], primal: list[Tracer],
               tangent: Callable[[int], Tracer]) -> tuple[list[Any], dict[str, Any], dict[int, int]]:
    cond_body: Body = attrs["cond_body"]
    body: Body = attrs["body"]
    ncc, nbc = attrs["n_cond_consts"], attrs["n_body_consts"]
    nk = len(avals) - ncc - nbc
    t_consts = [i for i in range(nbc) if live[ncc + i] and is_inexact(avals[ncc + i].dtype)]
    t_carry = [nbc + i for i in range(nk) if is_inexact(avals[ncc + nbc + i].dtype)]
    jb = _jvp_body(body, (*t_consts, *t_carry), tuple(i - nbc for i in t_carry), "while_body", (nbc, nk), (nk,))
    # the condition reads the primal carries only: it takes the tangents as parameters it ignores
    jc = _padded(cond_body, [avals[ncc + i] for i in t_carry])
    operands = [*primal[:ncc], *primal[ncc:ncc + nbc], *(tangent(ncc + i) for i in t_consts),
                *primal[ncc + nbc:], *(tangent(ncc + i) for i in t_carry)]
    new_attrs = {"cond_body": jc, "body": jb, "n_cond_consts": ncc, "n_body_consts": nbc + len(t_consts)}
    return operands, new_attrs, {i - nbc: nk + p for p, i in enumerate(t_carry)}


@_derived("padded", lambda cond_body, extra: (cond_body, tuple(extra)))
def _padded(cond_body: Body, extra: list[Aval]) -> Body:
    """``cond_body`` taking ``extra`` parameters after its own (ignored)."""
    n = len(cond_body.in_avals)

    def fn(*args: Any) -> list[Any]:
        return call_body(cond_body, args[:n])

    (made,), _, _, _ = _trace_bodies("while_cond", [fn], [[*cond_body.in_avals, *extra]], "while_loop")
    return made


# --- transpose ----------------------------------------------------------------------------------


class ReverseModeRefused(TypeError):
    """Reverse-mode differentiation through a while loop (no static trip count)."""


_WHILE_REVERSE = ("reverse-mode differentiation (grad, vjp, jacrev, or a Hessian other than mode=\"FoF\") "
                  "does not work through tidu.lax.while_loop or a fori_loop with traced bounds, as in JAX: "
                  "the number of steps is not known in advance. Use tidu.lax.scan or fori_loop with int "
                  "bounds, or forward mode (jvp, jacfwd, hessian(..., mode=\"FoF\"))")


def _transpose_rule(siblings: list[ValueKey], in_keys: list[ValueKey], mask: Sequence[bool], cts: list[Any],
                    b: Any) -> list[Any]:
    """The cotangents of a linear control-flow op's operands, given its results'
    cotangents (None or Zero where a result has none)."""
    op, attrs = siblings[0].op, siblings[0].attrs
    if op == "while":
        raise ReverseModeRefused(_WHILE_REVERSE)
    avals = [k.aval for k in in_keys]
    rt = _RuleTrace(b, f"transpose of {op}")
    try:
        with rt.trace:
            primal = [rt.primal(k) if not m else None for k, m in zip(in_keys, mask, strict=True)]
            # (in rt.trace: RuleTrace.linear would enter it again for a zero)
            given = {j: rt.linear(c, k.aval) for j, (c, k) in enumerate(zip(cts, siblings, strict=True))
                     if isinstance(c, Val)}
            if op == "cond":
                parts = _cond_transpose(attrs, avals, list(mask), primal, given)
            else:
                parts = _scan_transpose(attrs, avals, list(mask), primal, given)
        return [rt.result(p, a, f"a cotangent of {op}") if m and p is not None else Zero(a)
                for p, a, m in zip(parts, avals, mask, strict=True)]
    finally:
        rt.close()


@_derived("transpose", lambda *args: args)
def _cond_transpose_body(body: Body, active: tuple[int, ...], fixed: tuple[int, ...], outs: tuple[int, ...]) -> Body:
    """A branch transposed in its ``active`` parameters: ``(fixed params..., cotangents of
    the results outs...) -> (cotangents of the active params...)``."""
    in_avals = body.in_avals

    def fn(*args: Any) -> list[Any]:
        fixed_vals = dict(zip(fixed, args[:len(fixed)], strict=True))
        gs = list(args[len(fixed):])

        def f(*act: Any) -> list[Any]:
            full = [fixed_vals.get(i) for i in range(len(in_avals))]
            for i, v in zip(active, act, strict=True):
                full[i] = v
            out = call_body(body, full)
            return [out[k] for k in outs]

        zeros = tuple(tnp.zeros(in_avals[i].shape, in_avals[i].dtype) for i in active)
        _, pullback = vjp(f, *zeros)
        return [c if c is not None else tnp.zeros(in_avals[i].shape, in_avals[i].dtype)
                for c, i in zip(pullback(gs), active, strict=True)]

    params = [in_avals[i] for i in fixed] + [body.out_avals[k] for k in outs]
    (made,), _, _, _ = _trace_bodies("cond", [fn], [params], "the transpose of cond")
    return made


def _cond_transpose(attrs: Attrs, avals: list[Aval], mask: list[bool], primal: list[Any],
                    given: dict[int, Tracer]) -> list[Any]:
    branches: tuple[Body, ...] = attrs["branches"]
    if mask[0]:
        raise OpError("cond: the selector cannot be a linear operand")
    n_in = len(avals) - 1
    active = tuple(i for i in range(n_in) if mask[1 + i])
    fixed = tuple(i for i in range(n_in) if not mask[1 + i])
    outs = tuple(sorted(given))
    new = tuple(_cond_transpose_body(b, active, fixed, outs) for b in branches)
    res = _emit("cond", [primal[0], *(primal[1 + i] for i in fixed), *(given[k] for k in outs)],
                {"branches": new})
    parts: list[Any] = [None] * len(avals)
    for i, r in zip(active, res, strict=True):
        parts[1 + i] = r
    return parts


def _scan_transpose(attrs: Attrs, avals: list[Aval], operand_mask: list[bool], primal: list[Any],
                    given: dict[int, Tracer]) -> list[Any]:
    body: Body = attrs["body"]
    nc, nk, length, rev = attrs["n_consts"], attrs["n_carry"], attrs["length"], attrs["reverse"]
    nx = len(avals) - nc - nk
    mask = _linear_carries(body, operand_mask, nc, nk)
    consts_a = [i for i in range(nc) if mask[i]]
    carry_a = [nc + i for i in range(nk) if mask[nc + i]]
    xs_a = [nc + nk + i for i in range(nx) if mask[nc + nk + i]]
    consts_f = [i for i in range(nc) if not mask[i]]
    carry_f = [nc + i for i in range(nk) if not mask[nc + i]]
    xs_f = [nc + nk + i for i in range(nx) if not mask[nc + nk + i]]
    ys_ct = tuple(k for k in sorted(given) if k >= nk)  # the ys with a cotangent
    # the fixed carries entering each step: a forward scan of the body's fixed part
    # the reverse scan: carries (cotangents of the active carries, sums of the active
    # consts' cotangents); xs (residual carries, fixed xs, the ys' cotangents)
    tb = _scan_transpose_body(body, tuple(mask), nc, nk, ys_ct)
    # the fixed carries the reverse steps read (a linear carry's own earlier values are
    # fixed carries of a second pass, often not read by its transpose): only those are stored
    first = len(consts_f) + len(carry_a) + len(consts_a)
    unread = _unread(tb, range(first, first + len(carry_f)))
    keep = [i for p, i in enumerate(carry_f) if first + p not in unread]
    if unread:
        tb = _drop_params(tb, unread, "scan")
    cut = None
    if keep:  # the reverse steps may read values in place of (some of) the carries, or store
        # the products and functions they would run again beside them
        step = _ReverseStep.of(tb, len(consts_f), first, len(keep), len(xs_f))
        cut = _residual_cut(step) or _costly_cut(step)
    if cut is not None:  # values the reverse steps read in place of (some of) the carries: store those
        r_body, tb = cut
        stacked = _residual_values(body, attrs, mask, primal, consts_f, carry_f, xs_f, keep, r_body)
    else:
        stacked = _residual_carries(body, attrs, mask, primal, consts_f, carry_f, xs_f, keep) if keep else []
    if cut is None and keep and (origin := _JVP_OF.get(body)) is not None \
            and origin[1] == (*consts_f, *carry_f, *xs_f):
        # the fixed part is the differentiated body itself: stack with its very terms, so that
        # the primal scan over the same operands and this one are one loop (simplify.loops)
        stacked = _stacking_scan(origin[0], attrs, primal, consts_f, carry_f, xs_f, keep)
    ct_carry0 = [given[i - nc] if (i - nc) in given else tnp.zeros(avals[i].shape, avals[i].dtype)
                 for i in carry_a]
    acc0 = [tnp.zeros(avals[i].shape, avals[i].dtype) for i in consts_a]
    res = _emit("scan", [*(primal[i] for i in consts_f), *ct_carry0, *acc0, *stacked, *(primal[i] for i in xs_f),
                         *(given[k] for k in ys_ct)],
                {"body": tb, "n_consts": len(consts_f), "n_carry": len(carry_a) + len(consts_a),
                 "length": length, "reverse": 1 - rev})
    parts: list[Any] = [None] * len(avals)
    for p, i in enumerate(carry_a):
        parts[i] = res[p] if operand_mask[i] else None
    for p, i in enumerate(consts_a):
        parts[i] = res[len(carry_a) + p]
    for p, i in enumerate(xs_a):
        parts[i] = res[len(carry_a) + len(consts_a) + p]
    return parts


@dataclasses.dataclass(frozen=True)
class _ReverseStep:
    """A reverse step's parameters and results as terms, its terms in order (operands
    first), and the values it computes from its stored carries (parameters ``first`` to
    ``first + nkept``) with the fixed consts (the first ``nc``), the fixed xs (the ``nx``
    after the carries) and constants alone."""

    params: list[ValueKey]
    outs: list[ValueKey]
    order: list[ValueKey]
    carried: set[ValueKey]
    nc: int
    first: int
    nkept: int
    nx: int

    @staticmethod
    def of(tb: Body, nc: int, first: int, nkept: int, nx: int) -> _ReverseStep:
        params, outs = body_terms(tb)
        free = {*params[:nc], *params[first + nkept:first + nkept + nx]}  # the reverse steps have them
        order = tb.node_terms()
        carried: set[ValueKey] = set(params[first:first + nkept])
        fixed: dict[ValueKey, bool] = {}
        for k in order:
            if k in carried:
                fixed[k] = True
            elif k.op is None:
                fixed[k] = k in free
            elif k.op in ops.CONTROL_OPS:  # (a nested loop's bodies: computed in the reverse steps)
                fixed[k] = False
            else:
                fixed[k] = all(fixed[i] for i in k.inputs)
                if fixed[k] and any(i in carried for i in k.inputs):
                    carried.add(k)
        return _ReverseStep(params, outs, order, carried, nc, first, nkept, nx)

    @property
    def stored(self) -> list[ValueKey]:
        return self.params[self.first:self.first + self.nkept]

    def split(self, values: list[ValueKey]) -> tuple[Body, Body]:
        """``(r, tb')``: ``r`` computes ``values`` from (the fixed consts, the stored
        carries, the fixed xs); ``tb'`` is the step taking them in place of the carries."""
        params, first, end = self.params, self.first, self.first + self.nkept
        r = graph_of([*params[:self.nc], *params[first:end], *params[end:end + self.nx]], values)
        rest = graph_of([*params[:first], *values, *params[end:]], self.outs)
        return Body(canonical_inputs(r), "scan"), Body(canonical_inputs(rest), "scan")


def _residual_cut(step: _ReverseStep) -> tuple[Body, Body] | None:
    """Where a reverse step reads its stored carries only through values smaller than them
    (``x[i]`` of a carried array, say), those values (``_ReverseStep.split``). None where
    the carries are as small (they are stored as they are)."""
    carried = step.carried
    cut: list[ValueKey] = []  # the carried values something else reads
    for k in step.order:
        if k.op is not None and k not in carried:
            cut.extend(i for i in k.inputs if i in carried and i not in cut)
    cut.extend(o for o in step.outs if o in carried and o not in cut)
    if sum(k.aval.size for k in cut) >= sum(p.aval.size for p in step.stored):
        return None
    return step.split(cut)


def _costly_cut(step: _ReverseStep) -> tuple[Body, Body] | None:
    """The costly values a reverse step would compute again from its stored carries
    (matrix products, tanh, exp, sin, ...: every op not in ``_RECOMPUTED``), stored beside
    the carries as JAX stores a step's residuals, where the step computes a matrix product
    (a ``dot_general`` that contracts; the values at most ``RESIDUALS_PER_CARRY`` times the
    carries' elements) or those values are a few numbers (at most ``SMALL_RESIDUALS``
    elements): the step then takes them and the carries it still reads
    (``_ReverseStep.split``), and runs again only arithmetic and data movement. None
    otherwise: large elementwise steps are run again, so that memory grows with the
    carries alone."""
    stored = step.stored
    costly = [k for k in step.order if k in step.carried and k.op is not None and k not in stored
              and (_contracts(k) or k.op not in _RECOMPUTED)]
    if not costly:
        return None
    params, first = step.params, step.first
    trial = graph_of([*params[:first], *stored, *costly, *params[first + step.nkept:]], step.outs)
    read = {j for n in trial.nodes if n.op is not None for j in n.inputs} | set(trial.outputs)
    roots = [k for p, k in enumerate([*stored, *costly]) if trial.inputs[first + p] in read]
    values = [k for k in roots if k not in stored]
    size = sum(k.aval.size for k in values)
    if not values or size > max(SMALL_RESIDUALS, RESIDUALS_PER_CARRY * sum(p.aval.size for p in stored)) or (
            size > SMALL_RESIDUALS and not any(_contracts(k) for k in costly)):
        return None
    return step.split(roots)


SMALL_RESIDUALS = 64  # elements per step: costly values stored without a product in the step
RESIDUALS_PER_CARRY = 64  # and with one, at most this many times the carries' elements


def _contracts(k: ValueKey) -> bool:
    return k.op == "dot_general" and bool(k.attrs["lhs_contract"])


# what a reverse step runs again from the values _costly_cut stores: arithmetic and data
# movement (a product without contraction is a broadcast multiply)
_RECOMPUTED = frozenset({
    "add", "sub", "mul", "neg", "div", "abs", "sign", "conj", "real", "imag", "complex", "compare", "maximum",
    "minimum", "select", "broadcast_in_dim", "concatenate", "constant", "convert", "dot_general", "dynamic_slice",
    "dynamic_update_slice", "pad", "reduce_max", "reduce_sum", "reshape", "reverse", "slice", "transpose", "floor",
    "ceil", "rint"})


def _residual_values(body: Body, attrs: Attrs, mask: list[bool], primal: list[Any], consts_f: list[int],
                     carry_f: list[int], xs_f: list[int], keep: list[int], r_body: Body) -> list[Tracer]:
    """``r_body``'s values at each step (of the fixed consts, the carries ``keep`` entering
    the step and its fixed xs), stacked by a scan of the body's fixed part."""
    vb = _residual_value_body(body, tuple(mask), attrs["n_consts"], tuple(consts_f), tuple(carry_f), tuple(xs_f),
                              tuple(keep), r_body)
    res = _emit("scan", [*(primal[i] for i in consts_f), *(primal[i] for i in carry_f),
                         *(primal[i] for i in xs_f)],
                {"body": vb, "n_consts": len(consts_f), "n_carry": len(carry_f), "length": attrs["length"],
                 "reverse": attrs["reverse"]})
    return res[len(carry_f):]


@_derived("residual values", lambda body, mask, nc, consts_f, carry_f, xs_f, keep, r_body: (body, mask, keep, r_body))
def _residual_value_body(body: Body, mask: tuple[bool, ...], nc: int, consts_f: tuple[int, ...],
                         carry_f: tuple[int, ...], xs_f: tuple[int, ...], keep: tuple[int, ...], r_body: Body) -> Body:
    rb = _residual_body(body, mask, nc, consts_f, carry_f, xs_f, keep)
    n_cf, n_k = len(consts_f), len(carry_f)

    def fn(*args: Any) -> list[Any]:
        out = call_body(rb, list(args))
        values = call_body(r_body, [*args[:n_cf], *out[n_k:], *args[n_cf + n_k:]])
        return [*out[:n_k], *values]

    (made,), _, _, _ = _trace_bodies("scan", [fn], [list(rb.in_avals)], "the residuals of scan")
    return made


def _linear_carries(body: Body, mask: list[bool], nc: int, nk: int) -> list[bool]:
    """``mask`` with every carry that the body makes linear marked active too: a carry
    starting at a zero constant (a tangent that was zero at the start) is linear from
    the first step on when its new value reads the linear operands (a fixpoint)."""
    mask = list(mask)
    while True:
        linear = _depends(body, {i for i in range(len(body.in_avals)) if mask[i]})
        grown = [nc + j for j in range(nk) if j in linear and not mask[nc + j]]
        if not grown:
            return mask
        for i in grown:
            mask[i] = True


def _depends(body: Body, inputs: set[int]) -> set[int]:
    """The results of ``body`` that read any of the parameters ``inputs`` (by position).
    Through a nested scan, only the results that read them at some step: one loop may
    compute results that read a parameter (a tangent) and results that do not (the
    primal values; simplify.loops fuses independent scans), and a result taken for linear
    in a parameter it does not read would be transposed as if it were."""
    graph = body.graph
    hit = [False] * len(graph.nodes)
    for p, i in enumerate(graph.inputs):
        hit[i] = p in inputs
    loops: dict[tuple, set[int]] = {}  # a nested scan's results that read them
    for i, n in enumerate(graph.nodes):
        if n.op == "scan":
            key = (ops.without_index(n.attrs), n.inputs)
            reached = loops.get(key)
            if reached is None:
                reached = loops[key] = _scan_reads(n.attrs, {p for p, j in enumerate(n.inputs) if hit[j]})
            hit[i] = n.attrs["index"] in reached
        elif n.op is not None:
            hit[i] = any(hit[j] for j in n.inputs)
    return {k for k, o in enumerate(graph.outputs) if hit[o]}


def _scan_reads(attrs: Attrs, operands: set[int]) -> set[int]:
    """The results of a scan with attributes ``attrs`` that read any of its ``operands``
    (by position) at some step: a fixpoint over the carries they reach."""
    if not operands:
        return set()
    body, nc, nk = attrs["body"], attrs["n_consts"], attrs["n_carry"]
    if attrs["length"] == 0:  # the carries are the operands; the ys are empty
        return {j for j in range(nk) if nc + j in operands}
    moving = set(operands)
    while True:
        reached = _depends(body, moving)
        grown = {nc + j for j in reached if j < nk} - moving
        if not grown:
            return reached
        moving |= grown


def _unread(body: Body, params: Sequence[int]) -> set[int]:
    """The parameters (positions among ``params``) that no node and no result of ``body`` reads."""
    graph = body.graph
    read = {j for n in graph.nodes if n.op is not None for j in n.inputs} | set(graph.outputs)
    return {p for p in params if graph.inputs[p] not in read}


def _drop_params(body: Body, drop: set[int], label: str) -> Body:
    """``body`` without the parameters at positions ``drop`` (which nothing reads)."""
    params, outs = body_terms(body)
    return Body(canonical_inputs(graph_of([p for i, p in enumerate(params) if i not in drop], outs)), label)


def _stacking_scan(primal_body: Body, attrs: Attrs, primal: list[Any], consts_f: list[int], carry_f: list[int],
                   xs_f: list[int], keep: list[int]) -> list[Tracer]:
    """The carries ``keep`` entering each step, stacked by a scan of ``primal_body`` with
    those carries as extra results (its terms unchanged: no new simplification)."""
    nc = len(consts_f)
    params, outs = body_terms(primal_body)
    nk = len(carry_f)
    kept = [params[nc + carry_f.index(i)] for i in keep]
    rb = Body(graph_of(params, [*outs[:nk], *outs[nk:], *kept]), "scan")
    ny = len(outs) - nk
    res = _emit("scan", [*(primal[i] for i in consts_f), *(primal[i] for i in carry_f), *(primal[i] for i in xs_f)],
                {"body": rb, "n_consts": nc, "n_carry": nk, "length": attrs["length"], "reverse": attrs["reverse"]})
    return res[nk + ny:]


def _residual_carries(body: Body, attrs: Attrs, mask: list[bool], primal: list[Any],
                      consts_f: list[int], carry_f: list[int], xs_f: list[int], keep: list[int]) -> list[Tracer]:
    """The fixed (primal) carries ``keep`` (of ``carry_f``) entering each step, stacked: a
    scan of the body's fixed part (the linear parameters are zeros there, and the fixed
    results do not read them)."""
    rb = _residual_body(body, tuple(mask), attrs["n_consts"], tuple(consts_f), tuple(carry_f), tuple(xs_f),
                        tuple(keep))
    res = _emit("scan", [*(primal[i] for i in consts_f), *(primal[i] for i in carry_f),
                         *(primal[i] for i in xs_f)],
                {"body": rb, "n_consts": len(consts_f), "n_carry": len(carry_f), "length": attrs["length"],
                 "reverse": attrs["reverse"]})
    return res[len(carry_f):]


@_derived("residuals", lambda body, mask, nc, consts_f, carry_f, xs_f, keep: (body, mask, keep))
def _residual_body(body: Body, mask: tuple[bool, ...], nc: int, consts_f: tuple[int, ...], carry_f: tuple[int, ...],
                   xs_f: tuple[int, ...], keep: tuple[int, ...]) -> Body:
    in_avals = body.in_avals

    def fn(*args: Any) -> list[Any]:
        consts = args[:len(consts_f)]
        carry = args[len(consts_f):len(consts_f) + len(carry_f)]
        xs = args[len(consts_f) + len(carry_f):]
        full: list[Any] = [None] * len(in_avals)
        for i, v in zip(consts_f, consts, strict=True):
            full[i] = v
        for i, v in zip(carry_f, carry, strict=True):
            full[i] = v
        for i, v in zip(xs_f, xs, strict=True):
            full[i] = v
        for i in range(len(full)):
            if full[i] is None:
                full[i] = tnp.zeros(in_avals[i].shape, in_avals[i].dtype)
        out = call_body(body, full)
        return [*(out[i - nc] for i in carry_f), *(v for i, v in zip(carry_f, carry, strict=True) if i in keep)]

    params = [in_avals[i] for i in (*consts_f, *carry_f, *xs_f)]
    (made,), _, _, _ = _trace_bodies("scan", [fn], [params], "the residuals of scan")
    return made


@_derived("scan transpose", lambda *args: args)
def _scan_transpose_body(body: Body, mask: tuple[bool, ...], nc: int, nk: int, ys_ct: tuple[int, ...]) -> Body:
    """One reverse step of a linear scan's transpose: ``(fixed consts, cotangents of the
    active carries, sums of the active consts' cotangents, fixed carries, fixed x, the
    cotangents of the results ys_ct) -> (the active carries' cotangents before the step,
    the updated sums, the active x's cotangents)``."""
    in_avals, out_avals = body.in_avals, body.out_avals
    n = len(in_avals)
    consts_f = [i for i in range(nc) if not mask[i]]
    consts_a = [i for i in range(nc) if mask[i]]
    carry_f = [nc + i for i in range(nk) if not mask[nc + i]]
    carry_a = [nc + i for i in range(nk) if mask[nc + i]]
    xs_f = [i for i in range(nc + nk, n) if not mask[i]]
    xs_a = [i for i in range(nc + nk, n) if mask[i]]
    active = [*consts_a, *carry_a, *xs_a]

    def fn(*args: Any) -> list[Any]:
        it = iter(args)
        fixed = {i: next(it) for i in consts_f}
        ct_c = [next(it) for _ in carry_a]
        acc = [next(it) for _ in consts_a]
        fixed.update({i: next(it) for i in carry_f})
        fixed.update({i: next(it) for i in xs_f})
        gys = [next(it) for _ in ys_ct]

        def f(*act: Any) -> list[Any]:
            full = [fixed.get(i) for i in range(n)]
            for i, v in zip(active, act, strict=True):
                full[i] = v
            out = call_body(body, full)
            # the linear results: the active carries' new values, and the ys with a cotangent
            return [*(out[i - nc] for i in carry_a), *(out[k] for k in ys_ct)]

        zeros = tuple(tnp.zeros(in_avals[i].shape, in_avals[i].dtype) for i in active)
        _, pullback = vjp(f, *zeros)
        cts = [c if c is not None else tnp.zeros(in_avals[i].shape, in_avals[i].dtype)
               for c, i in zip(pullback([*ct_c, *gys]), active, strict=True)]
        c_consts = cts[:len(consts_a)]
        c_carry = cts[len(consts_a):len(consts_a) + len(carry_a)]
        c_xs = cts[len(consts_a) + len(carry_a):]
        return [*c_carry, *(_add_into(a, c) for a, c in zip(acc, c_consts, strict=True)), *c_xs]

    params = [*(in_avals[i] for i in consts_f), *(in_avals[i] for i in carry_a), *(in_avals[i] for i in consts_a),
              *(in_avals[i] for i in carry_f), *(in_avals[i] for i in xs_f), *(out_avals[k] for k in ys_ct)]
    (made,), _, _, _ = _trace_bodies("scan", [fn], [params], "the transpose of scan")
    return made


def _add_into(acc: Any, part: Any) -> Any:
    """``acc + part`` for a reverse step's cotangent ``part`` of a loop constant: where part
    sums updates of slices of zeros (the cotangents of reads at the loop counter,
    ``x[i]``), each is added into its slice of ``acc`` (a dynamic_update_slice of acc: the
    step costs its slices, not the array, and XLA updates acc in place)."""
    if not isinstance(part, Tracer) or not isinstance(acc, Tracer):
        return acc + part
    terms, stack = [], [part.key]
    while stack:  # the terms of part's sum
        k = stack.pop()
        if k.op == "add" and k.aval == acc.aval:
            stack.extend(reversed(k.inputs))
        else:
            terms.append(k)
    updates = [zero_slice_update(k) for k in terms]
    if all(u is None for u in updates):
        return acc + part
    trace, out = part.trace, acc
    for k, found in zip(terms, updates, strict=True):
        if found is None:
            out = out + trace.external(k)
            continue
        update, start, axis = found
        u, s = trace.external(update), trace.external(start)
        read = tnp.op("dynamic_slice")(out, s, axis=axis, size=update.aval.shape[axis])
        out = tnp.op("dynamic_update_slice")(out, read + u, s, axis=axis)
    return out


# --- batching ------------------------------------------------------------------------------------


@_derived("batched", lambda body, batched, size, label, out_batched: (body, batched, size, out_batched))
def _batched_body(body: Body, batched: tuple[bool, ...], size: int, label: str,
                  out_batched: tuple[bool, ...]) -> Body:
    """``body`` over a batch of ``size`` examples: the parameters flagged in ``batched``
    have the examples on axis 0, and so do the results flagged in ``out_batched``; the
    others do not depend on the examples and are returned once."""
    in_avals = body.in_avals

    def fn(*args: Any) -> list[Any]:
        axes = [0 if b else None for b in batched]
        outs = vmap(lambda *a: call_body(body, a), in_axes=axes, axis_size=size)(*args)
        if not all(out_batched):  # those results read no batched parameter: the body's own terms
            # (vmap's, one example of a broadcast, would differ by the batch size: the scans
            # of a jacfwd by each argument would not share their primal carry, simplify.loops)
            outs = list(outs)
            # (any example will do, as those results read none; an empty batch has none: zeros)
            plain = call_body(body, [(a[0] if size else tnp.zeros(a.aval.shape[1:], a.aval.dtype)) if b else a
                                     for a, b in zip(args, batched, strict=True)],
                              [k for k, b in enumerate(out_batched) if not b])  # (only those: the rest is vmap's)
            for k, b in enumerate(out_batched):
                if not b:
                    outs[k] = plain[k]
        result = []
        for o, a, b in zip(outs, body.out_avals, out_batched, strict=True):
            if b:
                o = o if np.ndim(o) == len(a.shape) + 1 else tnp.broadcast_to(o, (size, *a.shape))
            result.append(o)
        return result

    params = [Aval((size, *a.shape), a.dtype) if b else a for a, b in zip(in_avals, batched, strict=True)]
    (made,), _, _, _ = _trace_bodies(label, [fn], [params], f"vmap of {label}")
    return made


def _batched_carries(body: Body, batched: list[bool], nc: int, nk: int) -> list[bool]:
    """Which parameters of a scan's body are batched: the batched operands, and the carries
    a batched value reaches in some step (a fixpoint, as for linear carries)."""
    flags = list(batched)
    while True:
        reached = _depends(body, {i for i, b in enumerate(flags) if b})
        grown = [nc + j for j in range(nk) if j in reached and not flags[nc + j]]
        if not grown:
            return flags
        for i in grown:
            flags[i] = True


def _batch_rule(trace: Trace, key: ValueKey, ins: list[BatchValue], size: int) -> Tracer:
    if current_trace() is trace:
        return _batch(trace, key, ins, size)
    with trace:  # (a trace entered twice would leave itself on the stack when exited)
        return _batch(trace, key, ins, size)


def _batch(trace: Trace, key: ValueKey, ins: list[BatchValue], size: int) -> Tracer:
    op, attrs = key.op, key.attrs
    index = attrs["index"]
    if op == "scan":
        nc, nk = attrs["n_consts"], attrs["n_carry"]
        body: Body = attrs["body"]
        # a carry is batched when it starts batched or the body makes it so (a fixpoint)
        flags = _batched_carries(body, [b for _, b in ins], nc, nk)
        operands = [t for t, _ in ins[:nc]]
        operands += [broadcast_batch(trace, v, size) if flags[nc + j] else v[0] for j, v in enumerate(ins[nc:nc + nk])]
        operands += [tnp.moveaxis(t, 0, 1) if b else t for t, b in ins[nc + nk:]]
        ny = len(body.out_avals) - nk
        bb = _batched_body(body, tuple(flags), size, "scan", (*flags[nc:nc + nk], *[True] * ny))
        res = _emit("scan", operands, {"body": bb, "n_consts": nc, "n_carry": nk, "length": attrs["length"],
                                       "reverse": attrs["reverse"]})
        out = res[index]
        if index >= nk:
            return tnp.moveaxis(out, 1, 0)
        return out if flags[nc + index] else broadcast_batch(trace, (out, False), size)
    if op == "cond":
        branches: tuple[Body, ...] = attrs["branches"]
        sel, sel_batched = ins[0]
        flags = tuple(b for _, b in ins[1:])
        bbs = tuple(_batched_body(b, flags, size, "cond", (True,) * len(b.out_avals)) for b in branches)
        if not sel_batched:
            return _emit("cond", [sel, *(t for t, _ in ins[1:])], {"branches": bbs})[index]
        # a selector per example: every branch runs, each example takes its own. As JAX's
        # rule, a branch reads its float operands through stop_gradient in the examples that
        # take another branch, so that no derivative of a branch not taken (nan, inf: sqrt
        # of a negative number) reaches them; those operands are then batched
        chosen = tnp.clip(sel, 0, len(bbs) - 1)
        inexact = [is_inexact(a.dtype) for a in branches[0].in_avals]
        full = tuple(b or f for b, f in zip(flags, inexact, strict=True))
        if full != flags:
            bbs = tuple(_batched_body(b, full, size, "cond", (True,) * len(b.out_avals)) for b in branches)
        operands = [broadcast_batch(trace, v, size) if f and not v[1] else v[0]
                    for v, f in zip(ins[1:], full, strict=True)]
        outs = []
        for j, b in enumerate(bbs):
            taken = chosen == j
            guarded = [tnp.where(tnp.reshape(taken, (size,) + (1,) * (np.ndim(t) - 1)), t, stop_gradient(t))
                       if f else t for t, f in zip(operands, inexact, strict=True)]
            outs.append(call_body(b, guarded)[index])
        result = outs[0]
        shape = (size,) + (1,) * (outs[0].ndim - 1)
        for j in range(1, len(outs)):
            result = tnp.where(tnp.reshape(chosen == j, shape), outs[j], result)
        return result
    return _batch_while(trace, attrs, ins, size)


def _while_batching(attrs: Attrs, batched: list[bool]) -> tuple[list[bool], bool]:
    """Which carries of a while loop with operands flagged ``batched`` are batched, and
    whether its predicate is: as JAX's rule, a carry is batched when it starts batched or
    the body makes it so (a fixpoint), the predicate when the condition reads a batched
    constant or carry. A batched predicate batches every carry (each example stops at its
    own step, ``_masked_while``)."""
    ncc, nbc = attrs["n_cond_consts"], attrs["n_body_consts"]
    nk = len(batched) - ncc - nbc
    carries = _batched_carries(attrs["body"], batched[ncc:], nbc, nk)[nbc:]
    cond_reads = {i for i, b in enumerate([*batched[:ncc], *carries]) if b}
    if _depends(attrs["cond_body"], cond_reads):
        return [True] * nk, True
    return carries, False


def _batch_while(trace: Trace, attrs: Attrs, ins: list[BatchValue], size: int) -> Tracer:
    """A while loop over a batch: the loop over the batched bodies, the unbatched carries
    computed once (under an unbatched predicate: jacfwd's tangent loop then carries the
    primal loop's own carries, and simplify.loops fuses the two); a batched predicate runs
    until every example is done (``_masked_while``)."""
    ncc, nbc, index = attrs["n_cond_consts"], attrs["n_body_consts"], attrs["index"]
    carry_b, pred_b = _while_batching(attrs, [b for _, b in ins])
    bc = _batched_body(attrs["cond_body"], (*(b for _, b in ins[:ncc]), *carry_b), size, "while_cond", (pred_b,))
    bb = _batched_body(attrs["body"], (*(b for _, b in ins[ncc:ncc + nbc]), *carry_b), size, "while_body",
                       tuple(carry_b))
    cond_consts = [t for t, _ in ins[:ncc]]
    body_consts = [t for t, _ in ins[ncc:ncc + nbc]]
    carries = [broadcast_batch(trace, v, size) if b else v[0] for v, b in zip(ins[ncc + nbc:], carry_b, strict=True)]
    if pred_b:
        out = _masked_while(bc, bb, cond_consts, body_consts, carries, size)[index]
    else:
        out = _emit("while", [*cond_consts, *body_consts, *carries],
                    {"cond_body": bc, "body": bb, "n_cond_consts": ncc, "n_body_consts": nbc})[index]
    return out if carry_b[index] else broadcast_batch(trace, (out, False), size)


def _masked_while(bc: Body, bb: Body, cond_consts: list[Any], body_consts: list[Any], carries: list[Any],
                  size: int) -> tuple:
    """The batched loop of a batched predicate ``bc`` (every carry batched): it runs while
    any example runs, and an example whose condition failed keeps its carries."""
    def any_running(*c: Any) -> Any:
        return tnp.any(call_body(bc, [*cond_consts, *c])[0])

    def step(*c: Any) -> tuple:
        running = call_body(bc, [*cond_consts, *c])[0]
        new = call_body(bb, [*body_consts, *c])
        return tuple(tnp.where(tnp.reshape(running, (size,) + (1,) * (n.ndim - 1)), n, old)
                     for n, old in zip(new, c, strict=True))

    return while_loop(lambda c: any_running(*c), lambda c: step(*c), tuple(carries))


# --- registration ---------------------------------------------------------------------------------


def _infer(op: str) -> Callable[[Sequence[Aval], Attrs], list[Aval]]:
    def infer(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
        return ops.infer(op, avals, attrs)

    return infer


for _op in sorted(ops.CONTROL_OPS):
    register_internal(InternalPrimitive(_op, ops.ATTRS[_op], _infer(_op), jvp=_jvp_rule, batch=_batch_rule,
                                        transpose=_transpose_rule, strip=None))
register_internal(InternalPrimitive("linear_solve", ("index", "rule"), lambda avals, attrs: [avals[0]],
                                    jvp=_linear_solve_jvp, batch=_linear_solve_batch,
                                    transpose=_linear_solve_transpose, strip=_linear_solve_strip))

__all__ = ["ReverseModeRefused", "call_body", "cond", "custom_linear_solve", "custom_root", "fori_loop",
           "map", "scan", "switch", "while_loop"]
