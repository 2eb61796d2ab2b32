"""Transformed functions and their trace cache: a ``Transformed`` is what every tidu
transform returns. Inside a trace it is symbolic (``tidu.transforms.nested``); on concrete
values it stages itself on a top-level trace (``tidu.transforms.staging``), compiles the
program once per function, transform, parameters and input avals/structure (the trace
cache), and evaluates it with NumPy."""


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
    normalize_argnums,
)
from tidu.transforms.staging import Stage, arg_names, concrete_leaves, foreign_library_hint, function_name, is_weak

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


_ON_CLEAR: list[Callable[[], None]] = []


def on_clear(forget: Callable[[], None]) -> None:
    """Call ``forget`` with ``clear_trace_cache`` (caches of what tracing derives)."""
    _ON_CLEAR.append(forget)


def clear_trace_cache() -> None:
    """Forget every traced function (the next call of each traces again)."""
    with _LOCK:
        _CACHE.clear()
        for k in _STATS:
            _STATS[k] = 0
    for forget in _ON_CLEAR:
        forget()


def cached(key: Hashable, build: Callable[[], Any]) -> Any:
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


def fn_key(fn: Any) -> Hashable:
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
        self._concrete = concrete or staged_call
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
            ident = self.__dict__["_ident_memo"] = (self.kind, fn_key(self.fun), self.params)
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
        return (isinstance(other, _Keywords) and fn_key(other.fun) == fn_key(self.fun)
                and (other.n, other.names) == (self.n, self.names))

    def __hash__(self) -> int:
        return hash((fn_key(self.fun), self.n, self.names))


@dataclass
class Entry:
    """What a cached concrete call needs: its program(s) and output structure."""

    programs: list[Program]
    out_tree: TreeDef
    out_avals: list[Aval] = field(default_factory=list)
    diff: list[int] = field(default_factory=list)  # primal leaves differentiated (jacobians)


_ARRAY_TUPLE: dict[int, TreeDef] = {}  # the structure of n array arguments
_AVALS: dict[tuple, Aval] = {}  # (shape, dtype) -> Aval, to skip building one per call
_NUMERIC = frozenset(DTYPES)  # tidu's dtypes: any other goes the checked way, for its error


def concrete_args(fn: Any, args: Sequence[Any]) -> tuple[list[np.ndarray], Hashable]:
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


def staged_call(tf: Transformed, *args: Any) -> Any:
    arrays, sig = concrete_args(tf, args)
    return staged_eval(tf, args, arrays, sig)


def staged_eval(tf: Transformed, args: tuple, arrays: list[np.ndarray], sig: Hashable) -> Any:
    """``tf`` on ``args`` (their leaves ``arrays`` and cache signature ``sig``, from
    ``concrete_args``): traced and compiled once per signature, then evaluated."""

    @paused_gc()  # the trace through the program (see tidu.core.gcpause: no collector pass meanwhile)
    def build() -> Entry:
        with new_stage(tf.kind) as st:
            ins = [st.add_inputs(a, n) for a, n in zip(args, arg_names(tf, len(args)), strict=True)]
            try:
                out = tf._nested(*ins)
            except (TypeError, AttributeError) as e:  # jit's function is called here directly
                if (hint := foreign_library_hint(e, tf.fun)) is None:
                    raise
                raise hint from e
            out_leaves, out_tree = flatten(out)
            keys = st.keys(out_leaves)
            del ins, out_leaves  # tracers: the traced values are freed once collected
        return Entry([st.program(keys, last=True)], out_tree)

    entry = cached((tf, sig), build)
    return unflatten(entry.out_tree, entry.programs[0].eval(arrays))
