"""JAX-like transforms: grad, value_and_grad, jvp, vjp, jacfwd, jacrev, hessian, hvp, jit.

A transform applied inside a trace is symbolic (``tidu.transforms.nested``). Applied to concrete
values, it stages itself on a top-level trace (``tidu.transforms.staging``), compiles the program
once per function, transform, parameters and input avals/structure (the trace cache
below), and evaluates it with NumPy. jacfwd and jacrev on concrete values compile one
JVP (VJP) program and evaluate it per basis vector.

Complex convention (design.md section 3): the transpose is the adjoint, so ``grad``,
``vjp`` and ``jacrev`` are the conjugates of JAX's; ``jvp`` and ``jacfwd`` agree with JAX.
"""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tidu.core.gcpause import paused_gc
from tidu.core.keys import DTYPES, Aval, aval_of
from tidu.core.pytree import TreeDef, flatten, unflatten
from tidu.lowering.compile import Program
from tidu.ops.catalog import catalog
from tidu.simplify.semantics import current_semantics
from tidu.trace.tracing import current_trace
from tidu.transforms.nested import (
    check_argnums_type,
    grad_nested,
    jacfwd_nested,
    jacrev_nested,
    jvp_core,
    normalize_argnums,
    vjp_core,
    vmap_nested,
)
from tidu.transforms.staging import Stage, arg_names, check_leaf, concrete_leaves, function_name, is_weak

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
_LOCK = threading.Lock()  # guards _CACHE and _STATS; builds run outside it


def trace_cache_info() -> TraceCacheInfo:
    """Hits and misses of the compiled-program cache; ``traces`` counts top-level tracings."""
    return TraceCacheInfo(_STATS["hits"], _STATS["misses"], _STATS["traces"], len(_CACHE))


def clear_trace_cache() -> None:
    """Forget every traced function (the next call of each traces again)."""
    with _LOCK:
        _CACHE.clear()
        for k in _STATS:
            _STATS[k] = 0


def _cached(key: Hashable, build: Callable[[], Any]) -> Any:
    # programs differ by rewrite semantics and by catalog (what the ops are and mean)
    key = (key, current_semantics(), catalog().serial)
    with _LOCK:
        entry = _CACHE.get(key)
        if entry is not None:
            _STATS["hits"] += 1
            _CACHE.move_to_end(key)
            return entry
        _STATS["misses"] += 1
    entry = build()  # two threads may build the same entry at once: both equal, one kept
    with _LOCK:
        entry = _CACHE.setdefault(key, entry)
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return entry


def new_stage(label: str) -> Stage:
    """A top-level trace (counted in ``trace_cache_info().traces``)."""
    with _LOCK:
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
    return fn if isinstance(fn, Transformed | _Keywords) else _Identity(fn)


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
        if kwargs:  # passed through to fun, not differentiated (as in JAX): extra arguments
            names = tuple(sorted(kwargs))
            return self._with_keywords(len(args), names)(*args, *[kwargs[k] for k in names])
        if current_trace() is not None:
            return self._nested(*args)
        return self._concrete(self, *args)

    def _with_keywords(self, n: int, names: tuple[str, ...]) -> Transformed:
        """This transform of ``fun`` called with ``n`` positional arguments and then the
        keyword arguments ``names`` as further positional ones (vmap maps them on axis 0)."""
        if self._remake is None:
            raise TypeError(f"{self.__name__} takes positional arguments only, got keyword(s) {', '.join(names)}")
        if self.kind in ("grad", "value_and_grad", "jacfwd", "jacrev"):
            normalize_argnums(self.params[0], n, self.kind)  # argnums count positional arguments only
        return self._remake(_Keywords(self._base or self.fun, n, names))

    # how to apply this transform to another function, and to which (hessian: the user's)
    _remake: Callable[[Callable[..., Any]], Transformed] | None = None
    _base: Callable[..., Any] | None = None

    def _ident(self) -> tuple:
        ident = self.__dict__.get("_ident_memo")
        if ident is None:  # fixed at creation: computed once (every cached call hashes it)
            ident = self.__dict__["_ident_memo"] = (self.kind, _fn_key(self.fun), self.params)
        return ident

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, Transformed) and self._ident() == other._ident())

    def __hash__(self) -> int:
        h = self.__dict__.get("_hash_memo")
        if h is None:
            h = self.__dict__["_hash_memo"] = hash(self._ident())
        return h

    def __repr__(self) -> str:
        return f"<tidu {self.__name__}>"


class _Keywords:
    """``fun`` taking its keyword arguments ``names`` as positional arguments after the
    first ``n``; equal to any other such wrapper of the same function (trace cache)."""

    def __init__(self, fun: Callable[..., Any], n: int, names: tuple[str, ...]) -> None:
        self.fun, self.n, self.names = fun, n, names
        self.__name__ = function_name(fun)
        pos = arg_names(fun, n)
        self.__signature__ = inspect.Signature(
            [inspect.Parameter(p, inspect.Parameter.POSITIONAL_ONLY) for p in (*pos, *names)])

    def __call__(self, *args: Any) -> Any:
        return self.fun(*args[: self.n], **dict(zip(self.names, args[self.n :], strict=True)))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, _Keywords) and _fn_key(other.fun) == _fn_key(self.fun)
                and (other.n, other.names) == (self.n, self.names))

    def __hash__(self) -> int:
        return hash((_fn_key(self.fun), self.n, self.names))


@dataclass
class _Entry:
    """What a cached concrete call needs: its program(s) and output structure."""

    programs: list[Program]
    out_tree: TreeDef
    out_avals: list[Aval] = field(default_factory=list)
    diff: list[int] = field(default_factory=list)  # primal leaves differentiated (jacobians)


_ARRAY_TUPLE: dict[int, TreeDef] = {}  # the structure of n array arguments
_AVALS: dict[tuple, Aval] = {}  # (shape, dtype) -> Aval, to skip building one per call
_NUMERIC = frozenset(DTYPES)  # tidu's dtypes: any other goes the checked way, for its error


def _concrete_args(fn: Any, args: Sequence[Any]) -> tuple[list[np.ndarray], Hashable]:
    """The argument leaves as arrays, and the cache signature of the call: structure,
    avals and which leaves are (weakly typed) Python scalars."""
    if all(type(a) is np.ndarray and a.dtype.name in _NUMERIC for a in args):  # the common call: arrays
        n = len(args)
        treedef = _ARRAY_TUPLE.get(n)
        if treedef is None:
            treedef = _ARRAY_TUPLE.setdefault(n, flatten(tuple(args))[1])
        avals = []
        for a in args:
            spec = (a.shape, a.dtype.name)
            aval = _AVALS.get(spec)
            if aval is None:
                aval = aval_of(a)
                if len(_AVALS) < 4096:
                    _AVALS[spec] = aval
            avals.append(aval)
        return list(args), (treedef, tuple(avals), (False,) * n)
    names = arg_names(fn, len(args))
    arrays: list[np.ndarray] = []
    for arg, name in zip(args, names, strict=True):
        arrays.extend(concrete_leaves(arg, f"argument {name}")[0])
    leaves, treedef = flatten(tuple(args))
    return arrays, (treedef, tuple(aval_of(a) for a in arrays), tuple(map(is_weak, leaves)))


def _staged_call(tf: Transformed, *args: Any) -> Any:
    arrays, sig = _concrete_args(tf, args)
    return staged_eval(tf, args, arrays, sig)


def staged_eval(tf: Transformed, args: tuple, arrays: list[np.ndarray], sig: Hashable) -> Any:
    """``tf`` on ``args`` (their leaves ``arrays`` and cache signature ``sig``, from
    ``_concrete_args``): traced and compiled once per signature, then evaluated."""

    @paused_gc()  # the trace through the program (see tidu.core.gcpause: no collector pass meanwhile)
    def build() -> _Entry:
        with new_stage(tf.kind) as st:
            ins = [st.add_inputs(a, n) for a, n in zip(args, arg_names(tf, len(args)), strict=True)]
            out_leaves, out_tree = flatten(tf._nested(*ins))
            keys = st.keys(out_leaves)
            del ins, out_leaves  # tracers: the traced values are freed once collected
        return _Entry([st.program(keys, last=True)], out_tree)

    entry = _cached((tf, sig), build)
    return unflatten(entry.out_tree, entry.programs[0].eval(arrays))


def jit(fun: Callable[..., Any]) -> Transformed:
    """``fun`` traced once per input avals/structure, compiled and run with NumPy (no
    differentiation); inside another transform it is just ``fun``."""
    tf = Transformed("jit", fun, (), fun)
    tf._remake = jit
    return tf


def grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0,
         has_aux: bool = False) -> Transformed:
    """The gradient of a scalar real function with respect to the arguments ``argnums``
    (the conjugate of JAX's for complex arguments: grad(sum(|z|^2)) = 2z)."""
    check_argnums_type(argnums, "grad")
    tf = Transformed("grad", fun, (_freeze(argnums), has_aux),
                     lambda *args: grad_nested(fun, argnums, has_aux, False, args))
    tf._remake = lambda f: grad(f, argnums, has_aux)
    return tf


def value_and_grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0,
                   has_aux: bool = False) -> Transformed:
    """(fun(*args), grad(fun)(*args)) in one pass."""
    check_argnums_type(argnums, "value_and_grad")
    tf = Transformed("value_and_grad", fun, (_freeze(argnums), has_aux),
                     lambda *args: grad_nested(fun, argnums, has_aux, True, args))
    tf._remake = lambda f: value_and_grad(f, argnums, has_aux)
    return tf


def jacfwd(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, sparse: bool = False) -> Any:
    """The Jacobian by forward mode: one JVP batched over the identity of each input
    (tidu.vmap's machinery), so the program does not grow with the input's size.
    ``sparse=True``: a ``scipy.sparse`` CSR array from one JVP batched over the colors of
    its sparsity pattern (tidu.transforms.sparse_ad)."""
    check_argnums_type(argnums, "jacfwd")
    if sparse:
        return _sparse(fun, argnums, "jacfwd")
    tf = Transformed("jacfwd", fun, (_freeze(argnums),), lambda *args: jacfwd_nested(fun, argnums, args))
    tf._remake = lambda f: jacfwd(f, argnums)
    return tf


def jacrev(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, sparse: bool = False) -> Any:
    """The Jacobian by reverse mode: one VJP batched over the identity of each output
    (rows are tidu gradients, the conjugate of JAX's for complex inputs). ``sparse=True``:
    a CSR array from one VJP batched over the colors of the pattern's rows."""
    check_argnums_type(argnums, "jacrev")
    if sparse:
        return _sparse(fun, argnums, "jacrev")
    tf = Transformed("jacrev", fun, (_freeze(argnums),), lambda *args: jacrev_nested(fun, argnums, args))
    tf._remake = lambda f: jacrev(f, argnums)
    return tf


def vmap(fun: Callable[..., Any], in_axes: Any = 0, out_axes: Any = 0) -> Transformed:
    """``fun`` mapped over an axis of its arguments, as in JAX: ``in_axes`` (an int, None,
    or a tuple/pytree prefix of the arguments of them) says which axis of each argument
    holds the examples (None: not mapped), ``out_axes`` where the examples go in the
    outputs. Computed as one batched graph (tidu.ad.batching), not a loop."""
    tf = Transformed("vmap", fun, (_freeze_axes(in_axes), _freeze_axes(out_axes)),
                     lambda *args: vmap_nested(fun, in_axes, out_axes, args))
    # keyword arguments are mapped over axis 0, as in JAX
    tf._remake = lambda f: vmap(f, (*in_axes, *[0] * len(f.names)) if isinstance(in_axes, tuple | list)
                                else in_axes, out_axes)
    return tf


def _freeze_axes(axes: Any) -> Any:
    """A hashable form of an axes specification (for the trace cache)."""
    if isinstance(axes, list | tuple):
        return tuple(_freeze_axes(a) for a in axes)
    if isinstance(axes, dict):
        return tuple(sorted((k, _freeze_axes(v)) for k, v in axes.items()))
    return axes


HESSIAN_MODES = {"FoF": (jacfwd, jacfwd), "FoR": (jacfwd, jacrev), "RoF": (jacrev, jacfwd),
                 "RoR": (jacrev, jacrev)}


def hessian(fun: Callable[..., Any], argnums: int | Sequence[int] = 0,
            mode: str = "FoR", sparse: bool = False) -> Any:
    """Second derivatives: ``mode`` is outer-o-inner, F(orward) or R(everse):
    "FoF" jacfwd(jacfwd), "FoR" jacfwd(jacrev) (default), "RoF", "RoR". ``sparse=True``:
    a ``scipy.sparse`` CSR array from Hessian-vector products (forward over reverse)
    batched over a star coloring of its sparsity pattern (tidu.transforms.sparse_ad)."""
    if mode not in HESSIAN_MODES:
        raise ValueError(f"tidu.hessian: mode must be one of {', '.join(HESSIAN_MODES)}, "
                         f"got {mode!r}")
    if sparse:
        return _sparse(fun, argnums, "hessian")
    outer, inner = HESSIAN_MODES[mode]
    tf = outer(inner(fun, argnums), argnums)
    if mode == "FoR":  # concrete calls: a sparse Hessian is evaluated through a coloring
        from tidu.transforms.sparse_ad import dense_hessian_call  # on top of this module

        tf._concrete = dense_hessian_call(fun, argnums)
    tf._remake, tf._base = (lambda f: hessian(f, argnums, mode)), fun
    return tf


def _sparse(fun: Callable[..., Any], argnums: Any, kind: str) -> Callable[..., Any]:
    """The sparse form of a derivative: concrete arguments only (its result is a SciPy
    array, which no transform can trace)."""
    from tidu.transforms.sparse_ad import sparse_derivative  # on top of this module

    if not callable(fun):
        raise TypeError(f"tidu.{kind} takes a function, got {type(fun).__name__}")
    dense = sparse_derivative(fun, argnums, kind)

    def call(*args: Any) -> Any:
        if current_trace() is not None:
            raise TypeError(f"tidu.{kind}(..., sparse=True) returns a scipy.sparse array and cannot be used "
                            f"inside another transform; use tidu.{kind}(...) (dense) there")
        return dense(*args)

    call.__name__ = call.__qualname__ = f"{kind}({function_name(fun)}, sparse=True)"
    return call


def _freeze(argnums: Any) -> Any:
    return tuple(argnums) if isinstance(argnums, list) else argnums


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
        lvl, outs, touts = jvp_core("jvp", fun, primals, tuple(range(len(primals))),
                                     flatten(tangents)[0])
        return unflatten(lvl.out_tree, outs), unflatten(lvl.out_tree, touts)
    arrays, sig = _concrete_args(fun, primals)
    t_arrays = flatten(tangents)[0]
    for i, (p, t) in enumerate(zip(arrays, t_arrays, strict=True)):
        check_leaf(t, f"tangent {i}")
        if np.shape(t) != p.shape:
            raise ValueError(f"tidu.jvp: tangent {i} has shape {np.shape(t)}, its primal has "
                             f"{p.shape}")

    @paused_gc()  # the trace through the program (see tidu.core.gcpause: no collector pass meanwhile)
    def build() -> _Entry:
        names = arg_names(fun, len(primals))
        with new_stage("jvp") as st:
            ins = [st.add_inputs(a, n) for a, n in zip(primals, names, strict=True)]
            tins = [st.add_inputs(a, n + ".dot") for a, n in zip(primals, names, strict=True)]
            lvl, outs, touts = jvp_core("jvp", fun, ins, tuple(range(len(ins))),
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
        lvl, outs, pb = vjp_core("vjp", fun, primals, argnums)

        def pullback_nested(ct: Any) -> tuple:
            leaves, td = flatten(ct)
            if td != lvl.out_tree:
                raise ValueError(f"vjp pullback: cotangent structure {td} does not match the "
                                 f"output structure {lvl.out_tree}")
            return lvl.per_argnum(pb(leaves))

        return unflatten(lvl.out_tree, outs), pullback_nested
    arrays, sig = _concrete_args(fun, primals)

    @paused_gc()  # the trace through the program (see tidu.core.gcpause: no collector pass meanwhile)
    def build() -> _Entry:
        names = arg_names(fun, len(primals))
        with new_stage("vjp") as st:
            ins = [st.add_inputs(a, n) for a, n in zip(primals, names, strict=True)]
            lvl, outs, pb = vjp_core("vjp", fun, ins, argnums)
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
