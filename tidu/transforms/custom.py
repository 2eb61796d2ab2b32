"""User-defined derivatives and differentiation barriers, as in JAX: ``custom_jvp``,
``custom_vjp``, ``stop_gradient`` and ``checkpoint``.

A custom function called inside a trace records its primal computation as ordinary
ops, then one *mark* per output leaf: an internal op (tidu.ops.catalog.INTERNAL) whose
value is that output and whose operands also name the call's arguments,
``custom_jvp_call(out, *args)``. The AD passes see the mark and use the user's rule
instead of differentiating the body: linearize traces the JVP rule into its fragment
(``custom_jvp``), or adds a linear ``custom_vjp_lin(residuals, tangents)`` op whose
transpose traces ``bwd`` (``custom_vjp``). Higher orders differentiate what the rules
built, as JAX does. ``materialize_merge`` replaces every mark by its value before
simplification, so programs and both lowerings never see one.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import operator
import threading
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from tidu import numpy as tnp
from tidu.ad.batching import Value as BatchValue
from tidu.ad.batching import broadcast_batch
from tidu.ad.instantiate import Val, Zero
from tidu.core.keys import (
    PRIMARY,
    Attrs,
    Aval,
    Cotangent,
    InputKey,
    Linearized,
    Literal,
    Tangent,
    ValueKey,
    aval_of,
    is_inexact,
)
from tidu.core.pytree import TreeDef, flatten, tree_map, unflatten
from tidu.ops.catalog import InternalPrimitive, register_internal
from tidu.trace.derivatives import set_custom_jvp
from tidu.trace.fragments import External, FragmentBuilder, constant_attrs
from tidu.trace.tracing import PASS_FRAGMENTS, Trace, TraceError, Tracer, current_trace
from tidu.transforms.nested import ForwardRefused, open_level, out_values, vmap_nested

# --- the registry of custom calls -------------------------------------------------------------


@dataclass(frozen=True)
class _Call:
    """One custom function with the values of its non-differentiable arguments: what a
    mark's ``rule`` attribute names."""

    fn: Any  # the custom_jvp or custom_vjp object
    static: tuple[tuple[int, Any], ...]  # (position, value) of the nondiff_argnums
    n_args: int  # positional arguments of a call
    in_tree: TreeDef  # of the differentiable arguments (a tuple)
    out_tree: TreeDef
    out_avals: tuple[Aval, ...]  # of the output leaves
    arg_leaves: tuple[int, ...]  # leaves of each differentiable argument
    res_tree: TreeDef | None = None  # custom_vjp: of fwd's residuals

    def full_args(self, dyn: Sequence[Any]) -> list[Any]:
        """All positional arguments, static ones in their places."""
        it, static = iter(dyn), dict(self.static)
        return [static[i] if i in static else next(it) for i in range(self.n_args)]


_CALLS: dict[str, _Call] = {}
_IN_FWD: ContextVar[frozenset[int]] = ContextVar("tidu_custom_vjp_fwd", default=frozenset())
_IDS: dict[tuple, str] = {}
_COUNT = itertools.count(1)
_LOCK = threading.Lock()


def _register(call: _Call) -> str:
    ident = (id(call.fn), call.static, call.n_args, call.in_tree, call.out_tree, call.out_avals, call.res_tree)
    with _LOCK:
        rid = _IDS.get(ident)
        if rid is None:
            rid = _IDS[ident] = f"{call.fn.__name__}#{next(_COUNT)}"
            _CALLS[rid] = call
    return rid


# --- tracing a rule into an AD pass ---------------------------------------------------------------


class _ActiveBuilder:
    """Emits into an AD pass's builder, giving an op the role ``Linearized(mask)`` when
    one of its operands derives from the tangents (cotangents), as the passes' own rule
    templates do, so the ops a user rule builds can be transposed."""

    def __init__(self, b: Any, active: set[ValueKey]) -> None:
        self.b, self.active = b, active

    def add_op(self, op: str, operands: Sequence[Any], attrs: Any = None, role: Any = PRIMARY) -> list[Any]:
        mask = [self.b.key_of(r) in self.active for r in operands]
        if any(mask):
            role = Linearized(mask)
        refs = self.b.add_op(op, operands, attrs, role)
        if any(mask):
            self.active.update(self.b.key_of(r) for r in refs)
        return refs

    def constant(self, value: Any, dtype: str | None = None) -> Any:
        return self.add_op("constant", (), constant_attrs(value, dtype))[0]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.b, name)


class _RuleTrace:
    """A trace whose ops go into an AD pass's builder ``b``: a user rule runs in it. The
    rule may read the values of the traces the pass differentiates (a closure over an
    argument of a grad outside argnums: tidu.trace.tracing.read_finished), not one the pass
    differentiates (``_check_read``)."""

    def __init__(self, b: Any, label: str, name: str | None = None) -> None:
        self.outer = current_trace()  # (the rule's trace moves under the trace whose values it reads)
        self.trace = Trace(self.outer, label)
        self.trace.keeps_fragments = False
        self.reads = PASS_FRAGMENTS.get()  # the pass's view: what a transform in the rule resolves against
        self.trace.fragments = list(self.reads)
        self.trace.reads = self.reads
        self.trace.check_read = self._check_read
        self.name = name or label
        self.checked: set[ValueKey] = set()
        self.builder = self.trace.builder = _ActiveBuilder(b, set())  # type: ignore[assignment]

    def _seeds(self) -> frozenset[InputKey] | None:
        """The inputs the pass differentiates: the tangent inputs of a linearize pass (its
        builder's), or, in a transpose (cotangent inputs), those of the linear fragment it
        transposes; None in a forward pass seeded with a constant one (grad of a scalar),
        which has neither."""
        b = self.builder.b
        if not isinstance(b, FragmentBuilder):
            raise TraceError(f"the rule of {self.name} reads a value it closes over, which is not supported "
                             f"here ({type(b).__name__}): pass that value to it as an argument")
        ins = [b.keys[i].input for i in b.inputs]
        if any(isinstance(k, Cotangent) for k in ins):
            ins = [self.reads[0].keys[i].input for i in self.reads[0].inputs] if self.reads else []
        elif not any(isinstance(k, Tangent) for k in ins):
            return None
        return frozenset(k.of for k in ins if isinstance(k, Tangent))

    def _bindings(self) -> tuple[dict[InputKey, ValueKey], Callable[[ValueKey], bool]]:
        """The input aliases of the finished traces the rule reads (its pass's view's), and
        whether an input they leave free is a value all the same: one of the trace the pass
        differentiates (the outermost of them, whose inputs are bound when it is recorded)
        or of a trace enclosing it; not one example of a vmap's mapped argument."""
        aliases: dict[InputKey, ValueKey] = {}
        t, level = self.trace.parent, None
        while t is not None and not t.active:
            aliases.update(t.aliases)
            t, level = t.parent, t
        own = level.finish().index if level is not None else {}

        def bound(k: ValueKey) -> bool:
            if k in own:
                return True
            u = t
            while u is not None:
                if k in u.builder.index:
                    return True
                u = u.parent
            return False
        return aliases, bound

    def _check_read(self, key: ValueKey) -> None:
        """Refuse, as JAX does, a rule reading a value of the differentiated function (one
        it closes over, not an argument) that the pass differentiates: the rule says nothing
        about that value's derivative, which would silently be dropped."""
        if key in self.checked:
            return
        seeds = self._seeds()
        if seeds is None:  # which value is seeded is not known here: the caller takes a seeded pass
            raise ForwardRefused(f"internal: the rule of {self.name} read a value it closes over in a forward "
                                 "pass seeded with a constant one")
        (aliases, bound), seen, stack = self._bindings(), {key}, [key]
        while stack:
            k = stack.pop()
            if k.input is not None:
                if k.input in seeds:
                    raise TypeError(f"{self.name} is differentiated with respect to a value its rule closes "
                                    "over (a value of the function being differentiated, not an argument of "
                                    f"{self.name}): the rule covers only its arguments: pass that value to it "
                                    "as an argument")
                target = aliases.get(k.input)
                if target is None and not bound(k):
                    raise TraceError(f"the rule of {self.name} reads a value it closes over that is not a value "
                                     f"where the rule runs (it depends on {k.input}, one example of a vmap's "
                                     "mapped argument, say): pass that value to it as an argument")
                deps: tuple[ValueKey, ...] = (target,) if target is not None else ()
            else:
                deps = k.inputs
            for d in deps:
                if d not in seen:
                    seen.add(d)
                    stack.append(d)
        self.checked.add(key)

    def primal(self, key: ValueKey) -> Tracer:
        return self.trace.external(key)

    def linear(self, v: Any, aval: Aval) -> Tracer:
        """A tracer for a tangent (cotangent) value of the pass; zeros for a symbolic zero."""
        if isinstance(v, Val):
            if v.linear:
                self.builder.active.add(self.builder.b.key_of(v.ref))
            return Tracer(self.trace, v.ref, v.aval)
        return self.zeros(aval)

    def zeros(self, aval: Aval) -> Tracer:
        with self.trace:
            return tnp.zeros(aval.shape, aval.dtype)

    def result(self, leaf: Any, aval: Aval, what: str) -> Any:
        """A value of the pass for what a rule returned: Zero when it does not derive from
        the tangents (cotangents) it was given."""
        if leaf is None:
            return Zero(aval)
        if not isinstance(leaf, Tracer):
            arr = np.asarray(leaf)
            if arr.shape != aval.shape:
                raise ValueError(f"{what} has shape {arr.shape}, expected {aval.shape}")
            return Zero(aval)  # a constant: linear in the tangents only when it is zero
        if leaf.aval.shape != aval.shape:
            raise ValueError(f"{what} has shape {leaf.aval.shape}, expected {aval.shape}")
        with self.trace:  # (a value the rule closes over is read in it: read_finished)
            ref = self.trace.lift(leaf)
        if leaf.aval.dtype != aval.dtype:
            ref = self.builder.add_op("convert", [ref], {"dtype": aval.dtype})[0]
        if self.builder.b.key_of(ref) not in self.builder.active:
            return Zero(aval)
        return Val(ref, True, aval)

    def close(self) -> None:
        """End the rule's trace. What transforms in the rule recorded (their fragments, and
        the aliases binding their inputs: a jacfwd in a custom_jvp rule) goes to the
        enclosing trace, whose view reads the pass's output and so their values."""
        self.trace.active = False
        own = self.trace.fragments[len(self.reads):]
        parent = self.outer
        if (own or self.trace.aliases) and parent is not None and parent.active:
            parent.record(own, self.trace.aliases)


# --- custom_jvp -------------------------------------------------------------------------------------


class custom_jvp:  # noqa: N801 (named as in JAX)
    """A function with a user-defined JVP rule, as ``jax.custom_jvp``::

        @tidu.custom_jvp
        def f(x):
            return tnp.log1p(tnp.exp(x))

        @f.defjvp
        def f_jvp(primals, tangents):
            (x,), (dx,) = primals, tangents
            return f(x), dx * tnp.exp(x) / (1 + tnp.exp(x))

    The rule returns ``(primal_out, tangent_out)``; the tangent must be linear in the
    tangents (so that reverse mode can transpose it). Every transform uses the rule, at
    every order (the second derivative is the derivative of the rule). Arguments listed
    in ``nondiff_argnums`` are static Python values (hashable), passed first to the rule.
    A call binds its arguments to ``fun``'s signature, as JAX's does: keyword arguments
    become positional and defaults are filled in, so the rule (and ``nondiff_argnums``)
    sees every argument positionally; a keyword-only parameter cannot be passed.
    """

    # tidu's own functions (tidu.trace.derivatives.with_jvp) may promise that each result
    # element depends on the same element of each argument only, so that sparsity patterns
    # through their calls stay elementwise (a user's rule may mix elements: all of them)
    elementwise = False

    def __init__(self, fun: Callable[..., Any], nondiff_argnums: Sequence[int] = ()) -> None:
        if not callable(fun):
            raise TypeError(f"tidu.custom_jvp takes a function, got {type(fun).__name__}")
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.jvp: Callable[..., Any] | None = None
        self.__name__ = getattr(fun, "__name__", "custom_jvp")
        functools.update_wrapper(self, fun)
        self._signature = _signature(fun)
        self._arity = -1 if self._signature is None else _plain_arity(self._signature)

    def defjvp(self, jvp: Callable[..., Any]) -> Callable[..., Any]:
        """Set the JVP rule ``jvp(*nondiff_args, primals, tangents) -> (out, tangent_out)``."""
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps: Callable[..., Any] | None) -> None:
        """Set the JVP rule from one function per positional argument, as JAX's
        ``defjvps``: ``jvps[i](tangent_i, primal_out, *primals)`` is the tangent output's
        part from argument ``i`` (None: that argument contributes none); the parts are
        summed. Not with ``nondiff_argnums``."""
        name = self.__name__
        if self.nondiff_argnums:
            raise TypeError(f"custom_jvp function {name}: defjvps cannot be used with nondiff_argnums "
                            "(as in JAX): use defjvp")

        def jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
            if len(jvps) > len(primals):
                raise TypeError(f"custom_jvp function {name}: defjvps was given {len(jvps)} functions, "
                                f"for a call with {len(primals)} arguments")
            out = self(*primals)
            parts = [j(t, out, *primals) for t, j in zip(tangents, jvps, strict=False) if j is not None]
            if not parts:
                return out, tree_map(tnp.zeros_like, out)
            return out, tree_map(lambda *xs: functools.reduce(operator.add, xs), parts[0], *parts[1:])

        self.defjvp(jvp)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.jvp is None:
            raise TypeError(f"custom_jvp function {self.__name__} has no JVP rule: define one with "
                            f"@{self.__name__}.defjvp")
        args = _resolve(self, "custom_jvp", args, kwargs)
        trace = current_trace()
        if trace is None:
            return self.fun(*args)
        static, dyn = _split(self, args)
        out = self.fun(*args)
        return _mark(self, "custom_jvp_call", trace, static, len(args), dyn, out, [])


def _signature(fun: Callable[..., Any]) -> inspect.Signature | None:
    """The signature a custom function's calls bind to; None where there is none to bind
    to: a ``functools.partial`` (opaque, as in JAX) or a callable ``inspect`` cannot read."""
    if isinstance(fun, functools.partial):
        return None
    try:
        return inspect.signature(fun)
    except (TypeError, ValueError):
        return None


def _resolve(fn: Any, kind: str, args: tuple, kwargs: dict[str, Any]) -> tuple:
    """A call's arguments bound to ``fn``'s signature, all positional with the defaults
    filled in (JAX's ``resolve_kwargs``): what the function, its rules and
    ``nondiff_argnums`` see."""
    sig = fn._signature
    if sig is None:
        if kwargs:
            raise TypeError(f"{kind} function {fn.__name__} takes no keyword arguments (its signature is not "
                            f"known: pass {', '.join(kwargs)} positionally)")
        return args
    if not kwargs and len(args) == fn._arity:  # every parameter given by position: nothing to bind
        return args

    def label() -> str:
        return f"{kind} function {fn.__name__}{' '.join(str(sig).split())}"  # (one line: a default's repr may not be)

    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{label()}: the call does not fit its signature: {e}") from None
    bound.apply_defaults()
    passed = [k for k in bound.kwargs if k in kwargs]
    if passed:
        raise TypeError(f"{label()}: {', '.join(passed)} cannot be passed by keyword: a keyword-only parameter (or "
                        "**kwargs) does not reach its rules, which take every argument positionally (as in JAX); "
                        "make it a positional parameter")
    return bound.args


def _plain_arity(sig: inspect.Signature) -> int:
    """How many positional parameters ``sig`` has, where that is all it takes positionally
    (no ``*args``), else -1."""
    kinds = [p.kind for p in sig.parameters.values()]
    if inspect.Parameter.VAR_POSITIONAL in kinds:
        return -1
    return sum(k in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD) for k in kinds)


def _split(fn: Any, args: Sequence[Any]) -> tuple[tuple[tuple[int, Any], ...], list[Any]]:
    n = len(args)
    for a in fn.nondiff_argnums:
        if not -n <= a < n:
            raise TypeError(f"{fn.__name__}: nondiff_argnums {a} is out of range for a call with {n} arguments")
    nd = {a % n for a in fn.nondiff_argnums}
    static = tuple((i, args[i]) for i in sorted(nd))
    for i, v in static:
        if isinstance(v, Tracer):
            raise TypeError(f"{fn.__name__}: argument {i} is in nondiff_argnums but is a traced value; "
                            "nondiff_argnums are for static Python values (pass arrays as ordinary arguments "
                            "and give them a zero tangent in the rule)")
        try:
            hash(v)
        except TypeError:
            raise TypeError(f"{fn.__name__}: argument {i} is in nondiff_argnums, so it must be hashable, "
                            f"got {type(v).__name__}") from None
    return static, [a for i, a in enumerate(args) if i not in nd]


def _mark(fn: Any, op: str, trace: Trace, static: tuple, n_args: int, dyn: list[Any], out: Any,
          residuals: list[Any], res_tree: TreeDef | None = None) -> Any:
    """``out`` with each inexact leaf replaced by a mark naming the call's arguments."""
    arg_leaves, in_tree = flatten(tuple(dyn))
    counts = tuple(len(flatten(a)[0]) for a in dyn)
    out_leaves, out_tree = flatten(out)
    out_leaves = [v if isinstance(v, Tracer) else trace.constant(v) for v in out_leaves]
    rid = _register(_Call(fn, static, n_args, in_tree, out_tree, tuple(v.aval for v in out_leaves), counts,
                          res_tree))
    arg_tracers = [trace.constant(a) if not isinstance(a, Tracer) else a for a in arg_leaves]
    marked = []
    for i, leaf in enumerate(out_leaves):
        if not is_inexact(leaf.aval.dtype):
            marked.append(leaf)
            continue
        attrs: dict[str, Any] = {"rule": rid, "index": i}
        operands = [leaf, *arg_tracers]
        if op == "custom_vjp_call":
            attrs["nargs"] = len(arg_tracers)
            operands += residuals
        marked.append(trace.emit(op, operands, attrs))
    return unflatten(out_tree, marked)


def _first_aval(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    if not avals:
        raise TypeError("a custom call mark needs its output as first operand")
    return [avals[0]]


def _custom_jvp_rule(key: ValueKey, tangents: list[Any], b: Any) -> Any:
    call = _CALLS[key.attrs["rule"]]
    args = key.inputs[1:]
    dts = tangents[1:]
    if all(t is None or isinstance(t, Zero) for t in dts):
        _check_closure(call.fn, "custom_jvp", tangents[0])
        return Zero(key.aval)
    rt = _RuleTrace(b, "custom_jvp", f"custom_jvp function {call.fn.__name__}")
    try:
        primals = [rt.primal(k) for k in args]
        tans = [rt.linear(t, k.aval) if is_inexact(k.aval.dtype) else rt.zeros(k.aval)
                for k, t in zip(args, dts, strict=True)]
        with rt.trace:
            t_leaves = _rule_tangents(call, primals, tans)
        i = key.attrs["index"]
        return rt.result(t_leaves[i], key.aval, f"the tangent output {i} of {call.fn.__name__}'s JVP rule")
    finally:
        rt.close()


def _rule_tangents(call: _Call, primals: Sequence[Any], tangents: Sequence[Any]) -> list[Any]:
    """The tangent output leaves of ``call``'s JVP rule at the argument leaves ``primals``
    with tangents ``tangents`` (checked: a pair, the tangent shaped as the output)."""
    p_tree, t_tree = unflatten(call.in_tree, list(primals)), unflatten(call.in_tree, list(tangents))
    got = call.fn.jvp(*[v for _, v in call.static], tuple(p_tree), tuple(t_tree))
    name = call.fn.__name__
    if not (isinstance(got, tuple | list) and len(got) == 2):
        raise TypeError(f"the JVP rule of {name} must return a pair (primal_out, tangent_out), "
                        f"got {type(got).__name__}")
    t_leaves, t_td = flatten(got[1])
    if t_td != call.out_tree:
        raise TypeError(f"the JVP rule of {name} returned a tangent of structure {t_td}; "
                        f"{name} returns {call.out_tree}")
    return t_leaves


def jvp_tangent(attrs: Attrs) -> Callable[[Sequence[Any], Sequence[Any]], Any]:
    """The tangent output that the JVP rule of the ``custom_jvp_call`` mark with attributes
    ``attrs`` gives, as a function of the call's argument leaves and their tangents (the
    derivative of f(x(t)) along a path is this tangent at (x(t), x'(t)): Taylor mode,
    tidu.transforms.jet, propagates series through a custom function by it)."""
    call, i = _CALLS[attrs["rule"]], attrs["index"]

    def tangent(primals: Sequence[Any], tangents: Sequence[Any]) -> Any:
        return _rule_tangents(call, primals, tangents)[i]

    return tangent


def elementwise_call(key: ValueKey) -> bool:
    """Whether ``key`` is a ``custom_jvp_call`` of a function declared elementwise (its
    derivative's sparsity is its arguments', element by element)."""
    call = _CALLS.get(key.attrs["rule"]) if key.op == "custom_jvp_call" else None
    return call is not None and call.fn.elementwise


def _check_closure(fn: Any, kind: str, own: Any) -> None:
    """Refuse, as JAX does, a custom function whose output moves with a differentiated
    value it closes over while its arguments do not: its rule says nothing about that
    value, so its derivative would silently be dropped."""
    if isinstance(own, Val):
        raise TypeError(f"{kind} function {fn.__name__} is differentiated with respect to a value it closes "
                        "over (a traced value of an enclosing function); its rule covers only its arguments: "
                        "pass that value to it as an argument")


class _Batched:
    """A custom function over examples on axis 0 of every argument and residual: its
    rules are the user's mapped over them (JAX's batching of custom_jvp_call and
    custom_vjp_call), so a rule need not be elementwise."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.__name__ = fn.__name__

    def jvp(self, *args: Any) -> Any:
        *nondiff, primals, tangents = args
        return vmap_nested(lambda p, t: self.fn.jvp(*nondiff, p, t), 0, 0, (primals, tangents))

    def bwd(self, *args: Any) -> Any:
        *nondiff, res, g = args
        return vmap_nested(lambda r, c: self.fn.bwd(*nondiff, r, c), 0, 0, (res, g))


_BATCHED: dict[int, _Batched] = {}


def _batched(fn: Any) -> _Batched:
    with _LOCK:
        got = _BATCHED.get(id(fn))
        if got is None or got.fn is not fn:
            got = _BATCHED[id(fn)] = _Batched(fn)
    return got


def _batched_rule(rule: str, size: int) -> str:
    """The rule id of call ``rule`` mapped over ``size`` examples."""
    call = _CALLS[rule]
    return _register(_Call(_batched(call.fn), call.static, call.n_args, call.in_tree, call.out_tree,
                           tuple(Aval((size, *a.shape), a.dtype) for a in call.out_avals), call.arg_leaves,
                           call.res_tree))


def _batch_mark(trace: Trace, key: ValueKey, ins: list[BatchValue], size: int) -> Tracer:
    attrs = dict(key.attrs.items())
    if "rule" in attrs:  # (stop_gradient has none)
        attrs["rule"] = _batched_rule(attrs["rule"], size)
    return trace.emit(key.op, [broadcast_batch(trace, v, size) for v in ins], attrs)


def _strip_mark(key: ValueKey) -> int:
    return 0


# --- custom_vjp -------------------------------------------------------------------------------------


class custom_vjp:  # noqa: N801 (named as in JAX)
    """A function with a user-defined reverse-mode rule, as ``jax.custom_vjp``::

        @tidu.custom_vjp
        def f(x):
            return tnp.sin(x)

        def f_fwd(x):
            return f(x), tnp.cos(x)          # output, residuals

        def f_bwd(cos_x, g):
            return (g * cos_x,)              # one cotangent per argument

        f.defvjp(f_fwd, f_bwd)

    ``bwd`` is linear in the output cotangent ``g`` and returns a tuple with one
    cotangent (or None for zero) per argument. tidu's cotangents are adjoints: for
    complex values they are the conjugates of JAX's. Reverse mode over reverse mode
    works (``hessian(..., mode="RoR")``); forward mode (jvp, jacfwd, the FoF, FoR and
    RoF Hessians) is refused, as in JAX. A call binds its arguments to ``fun``'s signature
    (keyword arguments positional, defaults filled in), so ``fwd`` gets them all
    positionally, as in JAX.
    """

    def __init__(self, fun: Callable[..., Any], nondiff_argnums: Sequence[int] = ()) -> None:
        if not callable(fun):
            raise TypeError(f"tidu.custom_vjp takes a function, got {type(fun).__name__}")
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd: Callable[..., Any] | None = None
        self.bwd: Callable[..., Any] | None = None
        self.__name__ = getattr(fun, "__name__", "custom_vjp")
        functools.update_wrapper(self, fun)
        self._signature = _signature(fun)
        self._arity = -1 if self._signature is None else _plain_arity(self._signature)

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any]) -> None:
        """Set ``fwd(*args) -> (out, residuals)`` and ``bwd(*nondiff_args, residuals, g)
        -> tuple of cotangents``."""
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.fwd is None or self.bwd is None:
            raise TypeError(f"custom_vjp function {self.__name__} has no rule: define one with "
                            f"{self.__name__}.defvjp(fwd, bwd)")
        args = _resolve(self, "custom_vjp", args, kwargs)
        trace = current_trace()
        if trace is None or id(self) in _IN_FWD.get():  # fwd calling f computes the primal
            return self.fun(*args)
        static, dyn = _split(self, args)
        token = _IN_FWD.set(_IN_FWD.get() | {id(self)})
        try:
            got = self.fwd(*args)
        finally:
            _IN_FWD.reset(token)
        if not (isinstance(got, tuple | list) and len(got) == 2):
            raise TypeError(f"the fwd of {self.__name__} must return a pair (output, residuals), "
                            f"got {type(got).__name__}")
        out, res = got
        res_leaves, res_tree = flatten(res)
        res_tracers = [r if isinstance(r, Tracer) else trace.constant(r) for r in res_leaves]
        return _mark(self, "custom_vjp_call", trace, static, len(args), dyn, out, res_tracers, res_tree)


def _custom_vjp_rule(key: ValueKey, tangents: list[Any], b: Any) -> Any:
    n = key.attrs["nargs"]
    args, res = key.inputs[1 : 1 + n], key.inputs[1 + n :]
    dts = tangents[1 : 1 + n]
    if all(t is None or isinstance(t, Zero) for t in dts):
        _check_closure(_CALLS[key.attrs["rule"]].fn, "custom_vjp", tangents[0])
        return Zero(key.aval)
    refs, mask = [External(k) for k in res], [False] * len(res)
    for k, t in zip(args, dts, strict=True):
        if isinstance(t, Val):
            refs.append(t.ref)
            mask.append(t.linear)
        else:  # a zero tangent: a zero constant, not active
            zero = b.add_op("constant", (), Attrs(value=Literal(0, k.aval.dtype)))[0]
            refs.append(b.add_op("broadcast_in_dim", [zero], {"shape": k.aval.shape, "dims": ()})[0])
            mask.append(False)
    attrs = {"rule": key.attrs["rule"], "index": key.attrs["index"], "nres": len(res),
             "shape": key.aval.shape, "dtype": key.aval.dtype}
    (ref,) = b.add_op("custom_vjp_lin", refs, attrs, Linearized(mask))
    return Val(ref, True, key.aval)


def _lin_aval(avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    return [Aval(tuple(attrs["shape"]), attrs["dtype"])]


def _transpose_lin(out_key: ValueKey, in_keys: list[ValueKey], mask: Sequence[bool], ct: Any, b: Any) -> list[Any]:
    call = _CALLS[out_key.attrs["rule"]]
    nres, i = out_key.attrs["nres"], out_key.attrs["index"]
    name = call.fn.__name__
    rt = _RuleTrace(b, "custom_vjp", f"custom_vjp function {name}")
    try:
        res = unflatten(call.res_tree, [rt.primal(k) for k in in_keys[:nres]])
        # the other outputs' cotangents are zero: bwd is linear in g and the passes sum the parts
        g_leaves = [rt.linear(ct, out_key.aval) if j == i else rt.zeros(a) for j, a in enumerate(call.out_avals)]
        nondiff = [v for _, v in call.static]
        with rt.trace:
            got = call.fn.bwd(*nondiff, res, unflatten(call.out_tree, g_leaves))
        if not isinstance(got, tuple | list) or len(got) != len(call.arg_leaves):
            raise TypeError(f"the bwd of {name} must return a tuple with one cotangent per argument "
                            f"({len(call.arg_leaves)}), got "
                            f"{len(got) if isinstance(got, tuple | list) else type(got).__name__}")
        leaves: list[Any] = []
        for a, (entry, count) in enumerate(zip(got, call.arg_leaves, strict=True)):
            if entry is None:
                leaves.extend([None] * count)
                continue
            flat = flatten(entry)[0]
            if len(flat) != count:
                raise TypeError(f"the bwd of {name} returned {len(flat)} leaves for argument {a}, "
                                f"which has {count}")
            leaves.extend(flat)
        parts: list[Any] = [Zero(k.aval) for k in in_keys[:nres]]
        for j, (k, leaf) in enumerate(zip(in_keys[nres:], leaves, strict=True)):
            ok = mask[nres + j]
            parts.append(rt.result(leaf, k.aval, f"cotangent {j} returned by the bwd of {name}") if ok
                         else Zero(k.aval))
        return parts
    finally:
        rt.close()


def _batch_lin(trace: Trace, key: ValueKey, ins: list[BatchValue], size: int) -> Tracer:
    attrs = {**dict(key.attrs), "shape": (size, *key.attrs["shape"]), "rule": _batched_rule(key.attrs["rule"], size)}
    return trace.emit(key.op, [broadcast_batch(trace, v, size) for v in ins], attrs)


def _lin_jvp(key: ValueKey, tangents: list[Any], b: Any) -> Any:
    """The tangent of a custom_vjp's linear map: the same map of its operands' tangents
    (it is linear in them), where the residuals have none. A loop's or a branch's
    transpose linearizes its linear body again (tidu.transforms.control: ``vjp`` of the
    body's JVP) and meets it so. Residuals that move are forward mode proper: refused."""
    nres = key.attrs["nres"]
    if any(isinstance(t, Val) for t in tangents[:nres]):
        raise ForwardRefused(_FORWARD_REFUSED)
    dts = tangents[nres:]
    if not any(isinstance(t, Val) for t in dts):
        return Zero(key.aval)
    refs, mask = [External(k) for k in key.inputs[:nres]], [False] * nres
    for k, t in zip(key.inputs[nres:], dts, strict=True):
        if isinstance(t, Val):
            refs.append(t.ref)
            mask.append(t.linear)
        else:
            refs.append(b.constant(Literal.filled(0, k.aval.shape, k.aval.dtype)))
            mask.append(False)
    (ref,) = b.add_op("custom_vjp_lin", refs, dict(key.attrs.items()), Linearized(mask))
    return Val(ref, True, key.aval)


def _strip_lin(key: ValueKey) -> int:
    raise ForwardRefused(_FORWARD_REFUSED)


_FORWARD_REFUSED = ("forward-mode differentiation (jvp, jacfwd, or a Hessian other than mode=\"RoR\") of a "
                    "custom_vjp function is not supported, as in JAX: use grad/vjp/jacrev or "
                    "hessian(..., mode=\"RoR\"), or define the function with tidu.custom_jvp")


# --- stop_gradient ------------------------------------------------------------------------------------


def stop_gradient(x: Any) -> Any:
    """``x`` as a constant for differentiation: its value, with a zero derivative at every
    order (as ``jax.lax.stop_gradient``). Works on pytrees."""
    trace = current_trace()
    if trace is None:
        return x
    leaves, td = flatten(x)
    out = [trace.emit("stop_gradient", [v]) if isinstance(v, Tracer) else v for v in leaves]
    return unflatten(td, out)


def _zero_jvp(key: ValueKey, tangents: list[Any], b: Any) -> Any:
    return Zero(key.aval)


# --- checkpoint -----------------------------------------------------------------------------------------


def checkpoint(fun: Callable[..., Any] | None = None, *, prevent_cse: bool = True, policy: Any = None,
               static_argnums: int | Sequence[int] = ()) -> Any:
    """``fun`` traced as a nested level bound to its caller's values by input aliases
    (the seeds' design): values and derivatives are ``fun``'s, as with ``jax.checkpoint``.
    tidu builds whole programs, so there is no saved-residual memory to trade for
    recomputation: after ``materialize_merge`` the recomputed values are the same nodes
    as the original ones (the e-graph merges them). JAX's options are accepted:
    ``static_argnums`` are passed as they are (Python values), ``prevent_cse`` and
    ``policy`` (None or a function, e.g. from ``tidu.checkpoint_policies``) change
    nothing here. Keyword arguments are passed to ``fun``; arguments
    that are not float or complex (a step index, a mask) are inputs, not differentiated."""
    if fun is None:  # @checkpoint(static_argnums=...)
        return functools.partial(checkpoint, prevent_cse=prevent_cse, policy=policy, static_argnums=static_argnums)
    if not callable(fun):
        raise TypeError(f"tidu.checkpoint takes a function, got {type(fun).__name__}")
    if policy is not None and not callable(policy):
        raise TypeError(f"tidu.checkpoint: policy must be None or a function such as "
                        f"tidu.checkpoint_policies.dots_saveable, got {type(policy).__name__} {policy!r}")
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

    @functools.wraps(fun)
    def checkpointed(*args: Any, **kwargs: Any) -> Any:
        if current_trace() is None:
            return fun(*args, **kwargs)
        fixed = {a % len(args) for a in static} if args else set()
        dyn = [a for a in range(len(args)) if a not in fixed]

        def inner(*values: Any) -> Any:
            full = list(args)
            for a, v in zip(dyn, values[:len(dyn)], strict=True):
                full[a] = v
            return fun(*full, **values[len(dyn)])

        operands = (*(args[a] for a in dyn), kwargs)
        nums = tuple(p for p, a in enumerate(dyn) if _inexact_leaves(args[a]))
        lvl = open_level("checkpoint", functools.wraps(fun)(inner), operands, nums)
        lvl.commit()
        return out_values(lvl)

    return checkpointed


def _inexact_leaves(tree: Any) -> bool:
    """Whether ``tree`` has leaves and all are float or complex (a checkpointed argument
    to differentiate; an int or bool one, a step index or a mask, is an input)."""
    leaves = flatten(tree)[0]
    return bool(leaves) and all(is_inexact((x.aval if isinstance(x, Tracer) else aval_of(x)).dtype) for x in leaves)


remat = checkpoint

register_internal(InternalPrimitive("stop_gradient", (), _first_aval, jvp=_zero_jvp, batch=_batch_mark,
                                    strip=_strip_mark))
register_internal(InternalPrimitive("custom_jvp_call", ("index", "rule"), _first_aval, jvp=_custom_jvp_rule,
                                    batch=_batch_mark, strip=_strip_mark))
register_internal(InternalPrimitive("custom_vjp_call", ("index", "nargs", "rule"), _first_aval,
                                    jvp=_custom_vjp_rule, batch=_batch_mark, strip=_strip_mark))
register_internal(InternalPrimitive("custom_vjp_lin", ("dtype", "index", "nres", "rule", "shape"), _lin_aval,
                                    jvp=_lin_jvp, batch=_batch_lin, transpose=_transpose_lin, strip=_strip_lin))

set_custom_jvp(custom_jvp)  # for the functions of lower stages with rules of their own (tidu.numpy.linalg.det)

__all__ = ["checkpoint", "custom_jvp", "custom_vjp", "elementwise_call", "jvp_tangent", "remat", "stop_gradient"]
