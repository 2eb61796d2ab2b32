"""Transformed functions and their trace cache: a ``Transformed`` is what every tidu
transform returns. Inside a trace it is symbolic (``tidu.transforms.nested``); on concrete
values it stages itself on a top-level trace (``tidu.transforms.staging``), compiles the
program once per function, transform, parameters and input avals/structure (the trace
cache), and evaluates it with NumPy."""


from __future__ import annotations

import functools
import inspect
import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tidu.core.gcpause import paused_gc
from tidu.core.keys import DTYPES, Aval, aval_of
from tidu.core.pytree import LEAF, TreeDef, flatten, unflatten
from tidu.dtypes import is_float0
from tidu.lowering.compile import Program
from tidu.lowering.numpy import ready_call
from tidu.ops.catalog import catalog
from tidu.simplify.semantics import current_semantics
from tidu.trace.tracing import current_trace
from tidu.transforms.float0 import hide
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
# Hits of the fast path (see _remember) are counted by next() on this counter (atomic
# under the GIL: no lock per call); readers and clears take a value of it too (under the lock) and
# count those steps apart: fast hits since the last clear = value - _counted.
_FAST_HITS = itertools.count()
_counted = 0


def _fast_hits() -> int:
    """Hits of the fast path since the last clear (the caller holds _LOCK)."""
    global _counted
    hits = next(_FAST_HITS) - _counted
    _counted += hits + 1
    _STATS["hits"] += hits  # folded into the count kept under the lock
    return hits


def trace_cache_info() -> TraceCacheInfo:
    """Hits and misses of the compiled-program cache; ``traces`` counts top-level tracings."""
    with _LOCK:
        _fast_hits()
        return TraceCacheInfo(_STATS["hits"], _STATS["misses"], _STATS["traces"], len(_CACHE))


_ON_CLEAR: list[Callable[[], None]] = []


def on_clear(forget: Callable[[], None]) -> None:
    """Call ``forget`` with ``clear_trace_cache`` (caches of what tracing derives)."""
    _ON_CLEAR.append(forget)


def clear_trace_cache() -> None:
    """Forget every traced function (the next call of each traces again)."""
    global _generation
    with _LOCK:
        _fast_hits()  # (cleared with the rest)
        _CACHE.clear()
        for k in _STATS:
            _STATS[k] = 0
        _generation += 1  # every Transformed's table of fast calls is stale
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


# --- the fast path of cached calls ------------------------------------------------------------
# A call whose arguments are ndarrays of exactly the input avals of a program it ran before
# goes from ``Transformed.__call__`` straight to the program's generated function
# (``tidu.lowering.numpy.ready_call``): no flattening, avals, trace-cache key or
# ``bind_inputs``. Each Transformed keeps a table from the current semantics, catalog
# serial and the arguments' (type, dtype, shape) (what its program depends on) to that
# call and the output structure. ``clear_trace_cache`` makes every table stale by
# advancing the generation; a stale table is replaced at its next entry.

_generation = 0
_FAST_SIZE = 32  # entries per Transformed (one per distinct argument signature)


def _remember(tf: Transformed, args: tuple, program: Program, out_tree: TreeDef, generation: int) -> None:
    """Enter the call of ``tf`` on ``args`` in its table of fast calls, if ``args`` are
    exactly ``program``'s input arrays (and the trace cache was not cleared since
    ``generation``, when ``program`` was looked up)."""
    call = ready_call(program)
    if call is None:  # not compiled yet (a large program)
        return
    try:
        types = [(type(a), a.dtype, a.shape) for a in args]
    except AttributeError:
        return
    if types != call.input_types:  # Python scalars, pytrees, inputs bind_inputs converts
        return
    key = (current_semantics(), catalog().serial, *types)
    with _LOCK:
        if generation != _generation:
            return
        if tf._fast_generation != generation or len(tf._fast) >= _FAST_SIZE:
            tf._fast, tf._fast_generation = {}, generation
        tf._fast[key] = (call, _rebuild(out_tree))


# How a fast call makes its result from the program's outputs: None for the one output
# itself, else a function of the list of outputs
Rebuild = Callable[[list[np.ndarray]], Any] | None


def _rebuild(out_tree: TreeDef) -> Rebuild:
    if out_tree is LEAF:
        return None
    if out_tree.kind == "tuple" and all(c is LEAF for c in out_tree.children):
        return tuple
    return functools.partial(unflatten, out_tree)


def evaluate(program: Program, arrays: Sequence[Any]) -> list[np.ndarray]:
    """``program.eval(arrays)``, straight to its generated function (no ``bind_inputs``)
    when ``arrays`` are ndarrays of exactly its input dtypes and shapes."""
    call = ready_call(program)
    if call is not None:
        try:
            if [(type(a), a.dtype, a.shape) for a in arrays] == call.input_types:
                return call(*arrays)
        except AttributeError:  # not all arrays: bind_inputs converts them or says what is wrong
            pass
    return program.eval(arrays)


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
        self._fast: dict[tuple, tuple[Callable[..., list[np.ndarray]], Rebuild]] = {}  # see _remember
        self._fast_generation = _generation
        self._arg_names: dict[int, list[str]] = {}  # per number of arguments (concrete_args)
        self._keywords: dict[tuple[int, tuple[str, ...]], Transformed] = {}  # see _with_keywords
        self.__wrapped__ = fun
        self.__name__ = f"{kind}({function_name(fun)})"
        self.__doc__ = getattr(fun, "__doc__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:  # passed through to fun, not differentiated (as in JAX): extra arguments
            names = tuple(sorted(kwargs))
            return self._with_keywords(len(args), names)(*args, *[kwargs[k] for k in names])
        if current_trace() is not None:
            return self._nested(*args)
        if self._fast_generation == _generation:  # the fast path (see _remember)
            try:
                fast = self._fast.get((current_semantics(), catalog().serial,
                                       *[(type(a), a.dtype, a.shape) for a in args]))
            except (AttributeError, TypeError):  # not arrays: the general path
                fast = None
            if fast is not None:
                next(_FAST_HITS)  # a hit (see _fast_hits)
                call, rebuild = fast
                outs = call(*args)
                return outs[0] if rebuild is None else rebuild(outs)
        return self._concrete(self, *args)

    def _with_keywords(self, n: int, names: tuple[str, ...]) -> Transformed:
        """This transform of ``fun`` called with ``n`` positional arguments and then the
        keyword arguments ``names`` as further positional ones (vmap maps them on axis 0)."""
        if self._remake is None:
            raise TypeError(f"{self.__name__} takes positional arguments only, got keyword(s) {', '.join(names)}")
        tf = self._keywords.get((n, names))
        if tf is None:  # kept: its table of fast calls serves the next call with these keywords
            if self.kind in ("grad", "value_and_grad", "jacfwd", "jacrev"):
                normalize_argnums(self.params[0], n, self.kind)  # argnums count positional arguments only
            tf = self._remake(_Keywords(self._base or self.fun, n, names))
            if len(self._keywords) < 64:
                self._keywords[(n, names)] = tf
        return tf

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
    aux_tree: TreeDef | None = None  # has_aux (jvp, vjp, linearize): the aux's structure, its leaves last
    second_tree: TreeDef | None = None  # vjp, linearize: the structure of the second program's results


_ARRAY_TUPLE: dict[int, TreeDef] = {}  # the structure of n array arguments
_AVALS: dict[tuple, Aval] = {}  # (shape, np.dtype) -> Aval, to skip building one per call
_NUMERIC = frozenset(DTYPES)  # tidu's dtypes: any other goes the checked way, for its error
_FLOAT = Aval((), "float64")  # a Python float argument
NUMERIC_DTYPES = frozenset(map(np.dtype, DTYPES))  # the same, native byte order (dtype.name is slow)


# the cache signature of a call's arguments: their structure, avals, and which leaves are
# Python scalars (weakly typed)
Signature = tuple[TreeDef, tuple[Aval, ...], tuple[bool, ...]]


def _array_aval(a: np.ndarray) -> Aval | None:
    """The aval of an ndarray, from the (shape, dtype) cache (dtype.name is slow to read:
    only for a new spec); None for a dtype tidu does not handle (the checked way says so)."""
    spec = (a.shape, a.dtype)
    aval = _AVALS.get(spec)
    if aval is None:
        if a.dtype.name not in _NUMERIC:
            return None
        aval = aval_of(a)
        if len(_AVALS) < 4096:
            _AVALS[spec] = aval
    return aval


def concrete_args(fn: Any, args: Sequence[Any]) -> tuple[list[np.ndarray], Signature]:
    """The argument leaves as arrays, and the cache signature of the call: structure,
    avals and which leaves are (weakly typed) Python scalars."""
    if all(type(a) is np.ndarray for a in args):  # the common call: arrays
        avals = []
        for a in args:
            aval = _array_aval(a)
            if aval is None:
                break
            avals.append(aval)
        else:
            n = len(args)
            treedef = _ARRAY_TUPLE.get(n)
            if treedef is None:
                treedef = _ARRAY_TUPLE.setdefault(n, flatten(tuple(args))[1])
            return list(args), (treedef, tuple(avals), (False,) * n)
    leaves, treedef = flatten(tuple(args))
    arrays, avals, weak = [], [], []  # pytrees of arrays and floats, checked without their paths
    for leaf in leaves:
        kind = type(leaf)
        if kind is np.ndarray:
            aval = _array_aval(leaf)
            if aval is None:
                break
            arrays.append(leaf)
            weak.append(False)
        elif kind is float:
            aval = _FLOAT
            arrays.append(np.asarray(leaf))
            weak.append(True)
        else:
            break
        avals.append(aval)
    else:
        return arrays, (treedef, tuple(avals), tuple(weak))
    # anything else: each leaf converted and checked (an error names its path); float0
    # leaves (tangents of integers, no values) are part of the structure, not inputs
    if any(is_float0(x) for x in leaves):
        args = hide(tuple(args))
        leaves, treedef = flatten(args)
    names = _arg_names(fn, len(args))
    arrays = []
    for arg, name in zip(args, names, strict=True):
        arrays.extend(concrete_leaves(arg, f"argument {name}")[0])
    return arrays, (treedef, tuple(aval_of(a) for a in arrays), tuple(map(is_weak, leaves)))


def _arg_names(fn: Any, n: int) -> list[str]:
    """``arg_names(fn, n)``, kept on a Transformed per ``n`` (inspect.signature, which a
    Transformed needs, is slower than the rest of a scalar call's checks)."""
    if not isinstance(fn, Transformed):
        return arg_names(fn, n)
    names = fn._arg_names.get(n)
    if names is None:
        names = fn._arg_names[n] = arg_names(fn, n)
    return names


def staged_call(tf: Transformed, *args: Any) -> Any:
    arrays, sig = concrete_args(tf, args)
    return staged_eval(tf, args, arrays, sig)


def staged_eval(tf: Transformed, args: tuple, arrays: list[np.ndarray], sig: Signature) -> Any:
    """``tf`` on ``args`` (their leaves ``arrays`` and cache signature ``sig``, from
    ``concrete_args``): traced and compiled once per signature, then evaluated."""
    generation = _generation
    entry = staged_entry(tf, args, sig)
    outs = evaluate(entry.programs[0], arrays)
    _remember(tf, args, entry.programs[0], entry.out_tree, generation)
    return unflatten(entry.out_tree, outs)


def staged_entry(tf: Transformed, args: tuple, sig: Signature) -> Entry:
    """The compiled program of ``tf`` for calls of signature ``sig`` (``args``' avals and
    structure): traced and compiled on the first such call, then from the trace cache."""

    def build() -> Entry:
        # the trace through the program (see tidu.core.gcpause: no collector pass meanwhile)
        with paused_gc():
            with new_stage(tf.kind) as st:
                ins = [st.add_inputs(a, n) for a, n in zip(args, _arg_names(tf, len(args)), strict=True)]
                try:
                    out = tf._nested(*ins)
                except (TypeError, AttributeError) as e:  # jit's function is called here directly
                    if (hint := foreign_library_hint(e, tf.fun)) is None:
                        raise
                    raise hint from e
                out_leaves, out_tree = flatten(hide(out))  # float0 results: the structure
                keys = st.keys(out_leaves)
                del ins, out_leaves  # tracers: the traced values are freed once collected
            return Entry([st.program(keys, last=True)], out_tree)

    return cached((tf, sig), build)
