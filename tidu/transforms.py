"""JAX-like transforms: grad, value_and_grad, jvp, vjp, jacfwd, jacrev, hessian, hvp.

Every transform is built on resolve -> linearize -> linear_transpose. Applied inside a
trace (nesting), it traces the function on fresh inputs of a child trace, runs the AD
passes, and binds the child's inputs (and tangent or cotangent seeds) to values of the
enclosing trace with input aliases; the enclosing trace records the new fragments and
aliases, and the results are tracers referring to the new keys. Applied to concrete
values, it stages itself on a top-level trace (``tidu.staging``), compiles the program
once per function, transform and input avals/structure, and evaluates it with NumPy.

jacfwd and jacrev on concrete values compile one JVP (VJP) program and evaluate it per
basis vector; nested in another transform they build the Jacobian symbolically (one
JVP/VJP per basis element, stacked).

Complex convention (design.md section 3): the transpose is the adjoint, so ``grad`` and
``jacrev`` are the conjugates of JAX's; ``jvp`` and ``jacfwd`` agree with JAX.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import numpy as tnp
from .compile import Program
from .keys import Aval, InputKey, ValueKey, aval_of, is_float, is_inexact
from .linearize import LinearizedGraph, linearize
from .pytree import TreeDef, flatten, leaf_paths, unflatten
from .staging import Stage, arg_names, check_leaf, concrete_leaves, function_name, is_weak
from .tracing import Trace, TraceError, Tracer, current_trace
from .transpose import linear_transpose

# --- the trace cache -----------------------------------------------------------------------


@dataclass(frozen=True)
class TraceCacheInfo:
    hits: int
    misses: int
    traces: int
    size: int


_CACHE: OrderedDict[Hashable, Any] = OrderedDict()
_CACHE_SIZE = 256
_STATS = {"hits": 0, "misses": 0, "traces": 0}


def trace_cache_info() -> TraceCacheInfo:
    """Hits and misses of the compiled-program cache; ``traces`` counts top-level tracings."""
    return TraceCacheInfo(_STATS["hits"], _STATS["misses"], _STATS["traces"], len(_CACHE))


def clear_trace_cache() -> None:
    _CACHE.clear()
    for k in _STATS:
        _STATS[k] = 0


def _cached(key: Hashable, build: Callable[[], Any]) -> Any:
    entry = _CACHE.get(key)
    if entry is not None:
        _STATS["hits"] += 1
        _CACHE.move_to_end(key)
        return entry
    _STATS["misses"] += 1
    entry = build()
    _CACHE[key] = entry
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return entry


def new_stage(label: str) -> Stage:
    """A top-level trace (counted in ``trace_cache_info().traces``)."""
    _STATS["traces"] += 1
    return Stage(label)


class _Identity:
    """Hashes and compares a function by identity (the cache keeps it alive)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.obj is self.obj


def _fn_key(fn: Any) -> Hashable:
    return fn if isinstance(fn, Transformed) else _Identity(fn)


# --- argnums --------------------------------------------------------------------------------


def _check_argnums_type(argnums: Any, what: str) -> None:
    ok = isinstance(argnums, int) and not isinstance(argnums, bool)
    if isinstance(argnums, tuple | list):
        ok = bool(argnums) and all(isinstance(a, int) and not isinstance(a, bool) for a in argnums)
    if not ok:
        raise TypeError(f"tidu.{what}: argnums must be an int or a non-empty tuple of ints, "
                        f"got {argnums!r}")


def _argnums(argnums: int | Sequence[int], n: int, what: str) -> tuple[int, ...]:
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
class _Level:
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

    @property
    def diff_keys(self) -> list[ValueKey]:
        return [self.in_keys[i] for i in self.diff]

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
            return t.constant(np.zeros(aval.shape, aval.dtype))
        return t.external(key)

    def per_argnum(self, diff_values: Sequence[Any]) -> Any:
        """Values for the differentiated leaves, as pytrees shaped like the arguments."""
        by_leaf = dict(zip(self.diff, diff_values, strict=True))
        trees = [unflatten(self.arg_trees[a], [by_leaf[i] for i in self.arg_leaves[a]])
                 for a in self.argnums]
        return trees[0] if self.single else tuple(trees)


def _open(kind: str, fn: Callable[..., Any], args: Sequence[Any], argnums: int | Sequence[int],
          has_aux: bool = False) -> _Level:
    """Trace ``fn(*args)`` in a child trace of the current trace."""
    parent = current_trace()
    if parent is None:
        raise TraceError(f"internal: {kind} traced without an enclosing trace")
    if not callable(fn):
        raise TypeError(f"tidu.{kind} takes a function, got {type(fn).__name__}")
    nums = _argnums(argnums, len(args), kind)
    names = arg_names(fn, len(args))
    trace = Trace(parent, kind)
    in_keys: list[ValueKey] = []
    bind: dict[InputKey, ValueKey] = {}
    trees, ranges, in_args = [], [], []
    leaf_of_arg: dict[int, list[int]] = {}
    try:
        for a, (arg, name) in enumerate(zip(args, names, strict=True)):
            leaves, td = flatten(arg)
            start, tracers = len(in_keys), []
            for leaf, path in zip(leaves, leaf_paths(arg), strict=True):
                where = f"argument {name}{path} of {kind}({function_name(fn)})"
                check_leaf(leaf, where)
                outer = parent.key(leaf)
                if a in nums and not is_inexact(outer.aval.dtype):
                    raise TypeError(
                        f"{kind} cannot differentiate with respect to {where}: its dtype is "
                        f"{outer.aval.dtype}. Pass a float or complex value (3.0, not 3) or "
                        "leave the argument out of argnums")
                t = trace.new_input(name + path, outer.aval, is_weak(leaf))
                bind[t.key.input] = outer
                leaf_of_arg.setdefault(a, []).append(len(in_keys))
                in_keys.append(t.key)
                tracers.append(t)
            trees.append(td)
            ranges.append(range(start, len(in_keys)))
            in_args.append(unflatten(td, tracers))
        with trace:
            out = fn(*in_args)
        aux = None
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError(f"{kind}(has_aux=True): {function_name(fn)} must return a pair "
                                f"(output, aux), got {type(out).__name__}")
            out, aux = out
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
    diff = [i for a in nums for i in leaf_of_arg.get(a, [])]
    return _Level(kind, parent, trace, in_keys, trees, ranges, nums, isinstance(argnums, int),
                  diff, out_keys, out_tree, bind, aux)


def _out_values(lvl: _Level) -> Any:
    return unflatten(lvl.out_tree, [lvl.parent.external(k) for k in lvl.out_keys])


# --- grad ------------------------------------------------------------------------------------


def _grad_nested(fn: Callable[..., Any], argnums: Any, has_aux: bool, with_value: bool,
                 args: Sequence[Any]) -> Any:
    kind = "value_and_grad" if with_value else "grad"
    lvl = _open(kind, fn, args, argnums, has_aux)
    if len(lvl.out_keys) != 1 or lvl.out_keys[0].aval.shape != ():
        got = ", ".join(str(k.aval.shape) for k in lvl.out_keys) or "nothing"
        raise TypeError(f"{kind} requires {function_name(fn)} to return a scalar (shape ()), got "
                        f"{got}. Use tidu.jacrev or tidu.vjp for non-scalar outputs, or reduce "
                        "the output (tnp.sum)")
    (out,) = lvl.out_keys
    if not is_float(out.aval.dtype):
        raise TypeError(f"{kind} requires a real floating-point output, got {out.aval.dtype}. "
                        "For complex outputs use tidu.vjp, or differentiate tnp.real/tnp.abs of it")
    lin = linearize(lvl.trace.view(), [out], lvl.diff_keys, pass_id=lvl.pass_id())
    tr = linear_transpose(lin, pass_id=lvl.pass_id())
    one = lvl.parent.constant(np.ones((), out.aval.dtype))
    lvl.commit([lin.fragment, tr.fragment], {k: one.key for k, _ in tr.tangent_inputs})
    grads = [lvl.value(k, key.aval) for k, key in zip(tr.output_keys, lvl.diff_keys, strict=True)]
    g = lvl.per_argnum(grads)
    value = (_out_values(lvl), lvl.aux) if has_aux else _out_values(lvl)
    if with_value:
        return value, g
    return (g, lvl.aux) if has_aux else g


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


def _jvp_core(kind: str, fn: Callable[..., Any], args: Sequence[Any], argnums: Any,
              tangents: Sequence[Any]) -> tuple[_Level, list[Tracer], list[Tracer]]:
    """Outputs and output tangents of ``fn`` for tangent leaves of the argnums leaves."""
    lvl = _open(kind, fn, args, argnums)
    if len(tangents) != len(lvl.diff):
        raise ValueError(f"{kind}: {len(tangents)} tangent leaves for {len(lvl.diff)} primals")
    lin = linearize(lvl.trace.view(), lvl.out_keys, lvl.diff_keys, pass_id=lvl.pass_id())
    aliases = {}
    for n, ((_, ref), t, key) in enumerate(zip(lin.tangent_inputs, tangents, lvl.diff_keys,
                                               strict=True)):
        aliases[lin.key(ref).input] = _tangent_key(lvl.parent, t, key, f"{kind} tangent {n}")
    lvl.commit([lin.fragment], aliases)
    outs = [lvl.parent.external(k) for k in lvl.out_keys]
    touts = [lvl.value(k, o.aval) for k, o in zip(lin.output_keys, lvl.out_keys, strict=True)]
    return lvl, outs, touts


class _Pullback:
    """Transposes a linearized function on demand (one transpose pass per call)."""

    def __init__(self, lvl: _Level, lin: LinearizedGraph) -> None:
        self.lvl, self.lin = lvl, lin

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
        outs = self.lin.tangent_outputs
        if only is not None:
            outs = [r if i == only else None for i, r in enumerate(outs)]
        masked = LinearizedGraph(self.lin.fragment, self.lin.tangent_inputs, outs, self.lin.pass_id)
        tr = linear_transpose(masked, pass_id=q.next_pass_id())
        aliases = {}
        for seed, _ in tr.tangent_inputs:
            ct = cts[0] if only is not None else cts[seed.index]
            aliases[seed] = _tangent_key(q, ct, self.lvl.out_keys[seed.index],
                                         f"cotangent of output {seed.index}")
        q.record([tr.fragment], aliases)
        return q, tr.output_keys

    def __call__(self, cts: Sequence[Any], only: int | None = None) -> list[Tracer]:
        q, keys = self.keys(cts, only)
        return [self.lvl.value(k, d.aval, q) for k, d in zip(keys, self.lvl.diff_keys, strict=True)]


def _vjp_core(kind: str, fn: Callable[..., Any], args: Sequence[Any],
              argnums: Any) -> tuple[_Level, list[Tracer], _Pullback]:
    lvl = _open(kind, fn, args, argnums)
    lin = linearize(lvl.trace.view(), lvl.out_keys, lvl.diff_keys, pass_id=lvl.pass_id())
    lvl.commit([lin.fragment])
    return lvl, [lvl.parent.external(k) for k in lvl.out_keys], _Pullback(lvl, lin)


# --- symbolic Jacobians ------------------------------------------------------------------------


def _basis(aval: Aval, j: int) -> np.ndarray:
    e = np.zeros(aval.size, aval.dtype)
    e[j] = 1
    return e.reshape(aval.shape)


def _stack(parts: list[Tracer], axis: int, shape: tuple[int, ...]) -> Tracer:
    """Stack same-shaped tracers along a new ``axis`` and reshape to ``shape``."""
    if len(parts) == 1:
        return tnp.reshape(parts[0], shape)
    grown = [tnp.expand_dims(p, axis) for p in parts]
    return tnp.reshape(tnp.concatenate(grown, axis=axis), shape)


def _jacobian_tree(lvl: _Level, blocks: dict[tuple[int, int], Any]) -> Any:
    """Nest blocks[(output leaf, diff position)] like JAX: output structure outside,
    argument structure inside."""
    per_out = [lvl.per_argnum([blocks[o, d] for d in range(len(lvl.diff))])
               for o in range(len(lvl.out_keys))]
    return unflatten(lvl.out_tree, per_out)


def _jacfwd_nested(fn: Callable[..., Any], argnums: Any, args: Sequence[Any]) -> Any:
    lvl = _open("jacfwd", fn, args, argnums)
    view = lvl.trace.view()
    frags, aliases = [], {}
    cols: dict[tuple[int, int], list[ValueKey | None]] = {}
    for d, key in enumerate(lvl.diff_keys):
        for j in range(key.aval.size):
            lin = linearize(view, lvl.out_keys, [key], pass_id=lvl.pass_id())
            ((_, ref),) = lin.tangent_inputs
            aliases[lin.key(ref).input] = lvl.parent.constant(_basis(key.aval, j)).key
            frags.append(lin.fragment)
            for o, k in enumerate(lin.output_keys):
                cols.setdefault((o, d), []).append(k)
            if all(k is None for k in lin.output_keys):
                break  # no output depends on this leaf
    lvl.commit(frags, aliases)
    blocks = {}
    for d, key in enumerate(lvl.diff_keys):
        for o, out in enumerate(lvl.out_keys):
            shape = out.aval.shape + key.aval.shape
            keys = cols.get((o, d), [])
            if all(k is None for k in keys):
                blocks[o, d] = lvl.parent.constant(np.zeros(shape, out.aval.dtype))
            else:
                parts = [lvl.value(k, out.aval) for k in keys]
                blocks[o, d] = _stack(parts, out.aval.ndim, shape)
    return _jacobian_tree(lvl, blocks)


def _jacrev_nested(fn: Callable[..., Any], argnums: Any, args: Sequence[Any]) -> Any:
    lvl, _, pullback = _vjp_core("jacrev", fn, args, argnums)
    parent, blocks = lvl.parent, {}
    for o, out in enumerate(lvl.out_keys):
        if not is_inexact(out.aval.dtype):
            raise TypeError(f"jacrev: output {o} of {function_name(fn)} has dtype "
                            f"{out.aval.dtype}; only float and complex outputs have cotangents")
        rows: list[list[ValueKey | None]] = [[] for _ in lvl.diff]
        for j in range(out.aval.size):
            _, keys = pullback.keys([parent.constant(_basis(out.aval, j))], only=o)
            for d, k in enumerate(keys):
                rows[d].append(k)
        for d, key in enumerate(lvl.diff_keys):
            shape = out.aval.shape + key.aval.shape
            if all(k is None for k in rows[d]) or out.aval.size == 0:
                blocks[o, d] = parent.constant(np.zeros(shape, key.aval.dtype))
            else:
                blocks[o, d] = _stack([lvl.value(k, key.aval) for k in rows[d]], 0, shape)
    return _jacobian_tree(lvl, blocks)


# --- transformed functions ----------------------------------------------------------------------


class Transformed:
    """A transformed function. Equal (and hashing equal) to any other application of the
    same transform with the same parameters to the same function, so re-creating it,
    e.g. ``tidu.grad(f)`` in a loop, reuses the compiled program."""

    def __init__(self, kind: str, fun: Callable[..., Any], params: tuple,
                 nested: Callable[..., Any], concrete: Callable[..., Any] | None = None) -> None:
        if not callable(fun):
            raise TypeError(f"tidu.{kind} takes a function, got {type(fun).__name__}")
        self.kind, self.fun, self.params = kind, fun, params
        self._nested = nested
        self._concrete = concrete or _staged_call
        self.__wrapped__ = fun
        self.__name__ = f"{kind}({function_name(fun)})"
        self.__doc__ = getattr(fun, "__doc__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise TypeError(f"{self.__name__} takes positional arguments only, got keyword(s) "
                            f"{', '.join(kwargs)}; bind them first with functools.partial or a "
                            "lambda")
        if current_trace() is not None:
            return self._nested(*args)
        return self._concrete(self, *args)

    def _ident(self) -> tuple:
        return (self.kind, _fn_key(self.fun), self.params)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Transformed) and self._ident() == other._ident()

    def __hash__(self) -> int:
        return hash(self._ident())

    def __repr__(self) -> str:
        return f"<tidu {self.__name__}>"


@dataclass
class _Entry:
    """What a cached concrete call needs: its program(s) and output structure."""

    programs: list[Program]
    out_tree: TreeDef
    out_avals: list[Aval] = field(default_factory=list)
    diff: list[int] = field(default_factory=list)  # primal leaves differentiated (jacobians)


def _concrete_args(fn: Any, args: Sequence[Any]) -> tuple[list[np.ndarray], Hashable]:
    """The argument leaves as arrays, and the cache signature of the call: structure,
    avals and which leaves are (weakly typed) Python scalars."""
    names = arg_names(fn, len(args))
    arrays: list[np.ndarray] = []
    for arg, name in zip(args, names, strict=True):
        arrays.extend(concrete_leaves(arg, f"argument {name}")[0])
    leaves, treedef = flatten(tuple(args))
    return arrays, (treedef, tuple(aval_of(a) for a in arrays), tuple(map(is_weak, leaves)))


def _staged_call(tf: Transformed, *args: Any) -> Any:
    arrays, sig = _concrete_args(tf, args)

    def build() -> _Entry:
        with new_stage(tf.kind) as st:
            ins = [st.add_inputs(a, n) for a, n in zip(args, arg_names(tf, len(args)), strict=True)]
            out_leaves, out_tree = flatten(tf._nested(*ins))
            keys = st.keys(out_leaves)
        return _Entry([st.program(keys)], out_tree)

    entry = _cached((tf, sig), build)
    return unflatten(entry.out_tree, entry.programs[0].eval(arrays))


def jit(fun: Callable[..., Any]) -> Transformed:
    """``fun`` traced once per input avals/structure, compiled and run with NumPy (no
    differentiation); inside another transform it is just ``fun``."""
    return Transformed("jit", fun, (), fun)


def grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0,
         has_aux: bool = False) -> Transformed:
    """The gradient of a scalar real function with respect to the arguments ``argnums``
    (the conjugate of JAX's for complex arguments: grad(sum(|z|^2)) = 2z)."""
    _check_argnums_type(argnums, "grad")
    return Transformed("grad", fun, (_freeze(argnums), has_aux),
                       lambda *args: _grad_nested(fun, argnums, has_aux, False, args))


def value_and_grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0,
                   has_aux: bool = False) -> Transformed:
    """(fun(*args), grad(fun)(*args)) in one pass."""
    _check_argnums_type(argnums, "value_and_grad")
    return Transformed("value_and_grad", fun, (_freeze(argnums), has_aux),
                       lambda *args: _grad_nested(fun, argnums, has_aux, True, args))


def jacfwd(fun: Callable[..., Any], argnums: int | Sequence[int] = 0) -> Transformed:
    """The Jacobian by forward mode: one JVP per input element."""
    _check_argnums_type(argnums, "jacfwd")
    tf = Transformed("jacfwd", fun, (_freeze(argnums),),
                     lambda *args: _jacfwd_nested(fun, argnums, args), _jac_concrete)
    return tf


def jacrev(fun: Callable[..., Any], argnums: int | Sequence[int] = 0) -> Transformed:
    """The Jacobian by reverse mode: one VJP per output element (rows are tidu gradients,
    the conjugate of JAX's for complex inputs)."""
    _check_argnums_type(argnums, "jacrev")
    return Transformed("jacrev", fun, (_freeze(argnums),),
                       lambda *args: _jacrev_nested(fun, argnums, args), _jac_concrete)


HESSIAN_MODES = {"FoF": (jacfwd, jacfwd), "FoR": (jacfwd, jacrev), "RoF": (jacrev, jacfwd),
                 "RoR": (jacrev, jacrev)}


def hessian(fun: Callable[..., Any], argnums: int | Sequence[int] = 0,
            mode: str = "FoR") -> Transformed:
    """Second derivatives: ``mode`` is outer-o-inner, F(orward) or R(everse):
    "FoF" jacfwd(jacfwd), "FoR" jacfwd(jacrev) (default), "RoF", "RoR"."""
    if mode not in HESSIAN_MODES:
        raise ValueError(f"tidu.hessian: mode must be one of {', '.join(HESSIAN_MODES)}, "
                         f"got {mode!r}")
    outer, inner = HESSIAN_MODES[mode]
    return outer(inner(fun, argnums), argnums)


def _freeze(argnums: Any) -> Any:
    return tuple(argnums) if isinstance(argnums, list) else argnums


# --- concrete Jacobians: one compiled JVP/VJP program, evaluated per basis vector ---------------


def _jac_concrete(tf: Transformed, *args: Any) -> Any:
    arrays, sig = _concrete_args(tf, args)
    (argnums,) = tf.params
    fwd = tf.kind == "jacfwd"
    entry = _cached((tf, sig), lambda: _jac_program(tf.fun, argnums, args, fwd))
    prog, outs = entry.programs[0], entry.out_avals
    ins = [aval_of(arrays[i]) for i in entry.diff]
    blocks: dict[tuple[int, int], np.ndarray] = {}
    if fwd:
        for d, aval in enumerate(ins):
            cols: list[list[np.ndarray]] = [[] for _ in outs]
            for j in range(aval.size):
                tangents = [np.zeros(a.shape, a.dtype) for a in ins]
                tangents[d] = _basis(aval, j)
                for o, v in enumerate(prog.eval(arrays + tangents)):
                    cols[o].append(v)
            for o, out in enumerate(outs):
                blocks[o, d] = _np_stack(cols[o], -1, out.shape + aval.shape, out.dtype)
    else:
        for o, out in enumerate(outs):
            rows: list[list[np.ndarray]] = [[] for _ in ins]
            for j in range(out.size):
                cts = [np.zeros(a.shape, a.dtype) for a in outs]
                cts[o] = _basis(out, j)
                for d, v in enumerate(prog.eval(arrays + cts)):
                    rows[d].append(v)
            for d, aval in enumerate(ins):
                blocks[o, d] = _np_stack(rows[d], 0, out.shape + aval.shape, aval.dtype)
    nums = _argnums(argnums, len(args), tf.kind)
    per_out = []
    for o in range(len(outs)):
        d, trees = 0, []
        for a in nums:
            td = flatten(args[a])[1]
            trees.append(unflatten(td, [blocks[o, d + i] for i in range(td.num_leaves)]))
            d += td.num_leaves
        per_out.append(trees[0] if isinstance(argnums, int) else tuple(trees))
    return unflatten(entry.out_tree, per_out)


def _np_stack(parts: list[np.ndarray], axis: int, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if not parts:
        return np.zeros(shape, dtype)
    return np.stack(parts, axis=axis).reshape(shape)


def _jac_program(fun: Callable[..., Any], argnums: Any, args: Sequence[Any], fwd: bool) -> _Entry:
    """The JVP program (primals, tangents of the argnums leaves) -> output tangents, or the
    VJP program (primals, output cotangents) -> cotangents of the argnums leaves."""
    kind = "jacfwd" if fwd else "jacrev"
    names = arg_names(fun, len(args))
    with new_stage(kind) as st:
        ins = [st.add_inputs(a, n) for a, n in zip(args, names, strict=True)]
        if fwd:
            probe = _argnum_leaves(args, _argnums(argnums, len(args), kind), names)
            tangents = [st.add_inputs(aval_of(leaf), f"{name}.dot") for leaf, name in probe]
            lvl, _, touts = _jvp_core(kind, fun, ins, argnums, tangents)
            keys = st.keys(touts)
        else:
            lvl, _, pullback = _vjp_core(kind, fun, ins, argnums)
            for o, k in enumerate(lvl.out_keys):
                if not is_inexact(k.aval.dtype):
                    raise TypeError(f"jacrev: output {o} of {function_name(fun)} has dtype "
                                    f"{k.aval.dtype}; only float and complex outputs have "
                                    "cotangents")
            cts = [st.add_inputs(k.aval, f"out{o}.ct") for o, k in enumerate(lvl.out_keys)]
            keys = st.keys(pullback(cts))
    return _Entry([st.program(keys)], lvl.out_tree, [k.aval for k in lvl.out_keys], lvl.diff)


def _argnum_leaves(args: Sequence[Any], nums: tuple[int, ...],
                   names: list[str]) -> list[tuple[Any, str]]:
    """(leaf, input name) of every leaf of the arguments ``nums``, in argnums order."""
    out = []
    for a in nums:
        leaves = flatten(args[a])[0]
        paths = leaf_paths(args[a])
        out.extend((leaf, names[a] + p) for leaf, p in zip(leaves, paths, strict=True))
    return out


# --- jvp, vjp, hvp --------------------------------------------------------------------------


def _check_primals(what: str, primals: Any, tangents: Any = None) -> None:
    for name, v in (("primals", primals), ("tangents", tangents)):
        if v is not None and not isinstance(v, tuple | list):
            raise TypeError(f"tidu.{what}: {name} must be a tuple or list of arguments, got "
                            f"{type(v).__name__}; write {what}(f, (x,), (t,)) for one argument")
    if tangents is not None:
        pt, tt = flatten(tuple(primals))[1], flatten(tuple(tangents))[1]
        if pt != tt:
            raise ValueError(f"tidu.{what}: tangents have structure {tt}, primals have {pt}")


def jvp(fun: Callable[..., Any], primals: Sequence[Any],
        tangents: Sequence[Any]) -> tuple[Any, Any]:
    """(fun(*primals), the directional derivative along ``tangents``)."""
    _check_primals("jvp", primals, tangents)
    primals, tangents = tuple(primals), tuple(tangents)
    if current_trace() is not None:
        lvl, outs, touts = _jvp_core("jvp", fun, primals, tuple(range(len(primals))),
                                     flatten(tangents)[0])
        return unflatten(lvl.out_tree, outs), unflatten(lvl.out_tree, touts)
    arrays, sig = _concrete_args(fun, primals)
    t_arrays = flatten(tangents)[0]
    for i, (p, t) in enumerate(zip(arrays, t_arrays, strict=True)):
        check_leaf(t, f"tangent {i}")
        if np.shape(t) != p.shape:
            raise ValueError(f"tidu.jvp: tangent {i} has shape {np.shape(t)}, its primal has "
                             f"{p.shape}")

    def build() -> _Entry:
        names = arg_names(fun, len(primals))
        with new_stage("jvp") as st:
            ins = [st.add_inputs(a, n) for a, n in zip(primals, names, strict=True)]
            tins = [st.add_inputs(a, n + ".dot") for a, n in zip(primals, names, strict=True)]
            lvl, outs, touts = _jvp_core("jvp", fun, ins, tuple(range(len(ins))),
                                         flatten(tuple(tins))[0])
            keys = st.keys(outs + touts)
        return _Entry([st.program(keys)], lvl.out_tree)

    entry = _cached(("jvp", _fn_key(fun), sig), build)
    values = entry.programs[0].eval(arrays + [np.asarray(t) for t in t_arrays])
    n = len(values) // 2
    return unflatten(entry.out_tree, values[:n]), unflatten(entry.out_tree, values[n:])


def vjp(fun: Callable[..., Any], *primals: Any) -> tuple[Any, Callable[[Any], tuple]]:
    """(fun(*primals), pullback): ``pullback(ct)`` gives one cotangent per primal (the
    adjoint: conjugate of JAX's for complex values)."""
    argnums = tuple(range(len(primals)))
    if not primals:
        raise TypeError("tidu.vjp needs at least one primal argument")
    if current_trace() is not None:
        lvl, outs, pb = _vjp_core("vjp", fun, primals, argnums)

        def pullback_nested(ct: Any) -> tuple:
            leaves, td = flatten(ct)
            if td != lvl.out_tree:
                raise ValueError(f"vjp pullback: cotangent structure {td} does not match the "
                                 f"output structure {lvl.out_tree}")
            return lvl.per_argnum(pb(leaves))

        return unflatten(lvl.out_tree, outs), pullback_nested
    arrays, sig = _concrete_args(fun, primals)

    def build() -> _Entry:
        names = arg_names(fun, len(primals))
        with new_stage("vjp") as st:
            ins = [st.add_inputs(a, n) for a, n in zip(primals, names, strict=True)]
            lvl, outs, pb = _vjp_core("vjp", fun, ins, argnums)
            primal_inputs = list(st.inputs)
            cts = [st.add_inputs(k.aval, f"out{i}.ct") for i, k in enumerate(lvl.out_keys)]
            out_keys, grad_keys = st.keys(outs), st.keys(pb(cts))
        return _Entry([st.program(out_keys, primal_inputs), st.program(grad_keys)],
                      lvl.out_tree, [k.aval for k in lvl.out_keys])

    entry = _cached(("vjp", _fn_key(fun), sig), build)
    out_tree = entry.out_tree
    outs = entry.programs[0].eval(arrays)

    def pullback(ct: Any) -> tuple:
        leaves, td = flatten(ct)
        if td != out_tree:
            raise ValueError(f"vjp pullback: cotangent structure {td} does not match the output "
                             f"structure {out_tree}")
        for i, (c, a) in enumerate(zip(leaves, entry.out_avals, strict=True)):
            check_leaf(c, f"cotangent {i}")
            if np.shape(c) != a.shape:
                raise ValueError(f"vjp pullback: cotangent {i} has shape {np.shape(c)}, the "
                                 f"output has {a.shape}")
        grads = entry.programs[1].eval(arrays + [np.asarray(c) for c in leaves])
        return unflatten(flatten(tuple(primals))[1], grads)

    return unflatten(out_tree, outs), pullback


def hvp(fun: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]) -> Any:
    """Hessian-vector product (forward over reverse): jvp(grad(fun), primals, tangents)[1]."""
    _check_primals("hvp", primals, tangents)
    argnums = 0 if len(primals) == 1 else tuple(range(len(primals)))
    return jvp(grad(fun, argnums), tuple(primals), tuple(tangents))[1]


__all__ = [
    "HESSIAN_MODES", "TraceCacheInfo", "Transformed", "clear_trace_cache", "grad", "hessian",
    "hvp", "jacfwd", "jacrev", "jit", "jvp", "new_stage", "trace_cache_info", "value_and_grad",
    "vjp",
]
