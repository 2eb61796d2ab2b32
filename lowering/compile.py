"""compile: a MaterializedGraph becomes an SSA ``Program`` (each slot written once).

Programs are cached by graph structure: compiling a structurally equal graph returns
the same ``Program`` object (``cache_info()`` shows hits and misses).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import add, itemgetter
from typing import Any

import numpy as np
from tidu.lowering.numpy import numpy_source, run_numpy
from tidu.lowering.ssa import InputError, Instruction, SSAProgram
from tidu.lowering.stablehlo import to_stablehlo
from tidu.lowering.xla import checked_call

from tidu.core.gcpause import paused_gc
from tidu.core.graph import MaterializedGraph
from tidu.core.keys import Aval, InputKey
from tidu.ops.catalog import Catalog, catalog


class Program(SSAProgram):
    """A compiled program (``SSAProgram``'s data) and its back ends: ``eval``/``run`` on
    NumPy or XLA, ``to_numpy_source``, ``to_stablehlo``."""

    def eval(self, inputs: Mapping[InputKey | str, Any] | Sequence[Any]) -> list[np.ndarray]:
        """Run with NumPy (generated source); inputs by key, by name, or in order."""
        return run_numpy(self, self.bind_inputs(inputs))

    def run(self, inputs: Mapping[InputKey | str, Any] | Sequence[Any], backend: str = "numpy") -> list[np.ndarray]:
        """Run on ``backend``: "numpy" (default) or "xla" (StableHLO through jaxlib)."""
        if backend == "numpy":
            return self.eval(inputs)
        if backend == "xla":
            call = self._cache.get("xla_call")
            if call is None:  # jax itself is imported on first use: it is an optional extra
                call = self._cache["xla_call"] = checked_call(self)
            return call(inputs)
        raise ValueError(f"unknown backend {backend!r}; use 'numpy' or 'xla'")

    def to_numpy_source(self) -> str:
        return numpy_source(self)

    def to_stablehlo(self) -> str:
        return to_stablehlo(self)


def _build(graph: MaterializedGraph, cat: Catalog) -> Program:
    nodes = graph.nodes
    n_in = len(graph.inputs)
    # extraction lists the inputs first, in order: then slot i is node i and every
    # node's operand tuple is already its instruction's
    if graph.inputs == list(range(n_in)) and all(nodes[i].op is None for i in graph.inputs):
        return _build_in_place(graph, cat, n_in)
    slot_of: dict[int, int] = {}
    avals: list[Aval] = []
    for i in graph.inputs:
        slot_of[i] = len(avals)
        avals.append(nodes[i].aval)
    instructions = []
    for i, nd in enumerate(nodes):
        if nd.op is None:
            if i not in slot_of:
                raise ValueError(f"graph node {i} is an input missing from graph.inputs")
            continue
        slot_of[i] = len(avals)
        avals.append(nd.aval)
        instructions.append(Instruction(nd.op, nd.attrs, tuple([slot_of[j] for j in nd.inputs]), (slot_of[i],)))
    return Program(instructions, [slot_of[i] for i in graph.inputs], [slot_of[o] for o in graph.outputs],
                   avals, graph.input_keys, catalog=cat)


def _build_in_place(graph: MaterializedGraph, cat: Catalog, n_in: int) -> Program:
    """``_build`` when slot numbers are node numbers (inputs are nodes 0..n_in-1): each
    instruction is its node's ``(op, attrs, inputs)`` (a node is a named tuple) plus
    ``((i,),)``, made without a Python call per node (``tuple.__new__`` is what a named
    tuple's constructor calls)."""
    nodes = graph.nodes
    body = nodes[n_in:]
    ops = list(map(_OP, body))
    if None in ops:
        raise ValueError(f"graph node {n_in + ops.index(None)} is an input missing from graph.inputs")
    outs = zip(zip(range(n_in, len(nodes))))  # ((i,),) per node
    instructions = list(map(tuple.__new__, repeat(Instruction), map(add, map(_OP_ATTRS_INPUTS, body), outs)))
    return Program(instructions, list(graph.inputs), list(graph.outputs), list(map(_AVAL, nodes)),
                   graph.input_keys, catalog=cat)


# a node's fields by position (MNode is a named tuple)
_OP, _AVAL, _OP_ATTRS_INPUTS = itemgetter(0), itemgetter(3), itemgetter(slice(0, 3))


def _signature(graph: MaterializedGraph) -> tuple:
    """What ``MaterializedGraph.signature`` says, made in C: nodes are named tuples of
    exactly those fields."""
    return tuple(graph.nodes), tuple(graph.inputs), tuple(graph.outputs)


class _Key:
    """A cache key hashed once: a graph signature is a tuple of ~10^4 tuples, and a dict
    would hash it again on every lookup and insertion."""

    __slots__ = ("hash", "value")

    def __init__(self, value: tuple) -> None:
        self.value = value
        self.hash = hash(value)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and self.hash == other.hash and self.value == other.value


class _Cache:
    def __init__(self, maxsize: int = 512) -> None:
        self.maxsize = maxsize
        self.entries: OrderedDict[_Key, Program] = OrderedDict()
        self.hits = 0
        self.misses = 0
        self.lock = threading.Lock()  # callers on several threads; _build runs outside it

    def get(self, graph: MaterializedGraph) -> Program:
        cat = catalog()
        sig = _Key((cat.serial, _signature(graph)))  # an op's meaning depends on the catalog
        with self.lock:
            prog = self.entries.get(sig)
            if prog is not None:
                self.hits += 1
                self.entries.move_to_end(sig)
                return prog
            self.misses += 1
        prog = _build(graph, cat)
        with self.lock:
            prog = self.entries.setdefault(sig, prog)
            if len(self.entries) > self.maxsize:
                self.entries.popitem(last=False)
        return prog


_CACHE = _Cache()


@dataclass(frozen=True)
class CacheInfo:
    hits: int
    misses: int
    size: int


def compile(graph: MaterializedGraph, *, cache: bool = True) -> Program:  # noqa: A001 (tidu.compile)
    """SSA program for ``graph``; the same structure (under the same active catalog)
    returns the same cached Program."""
    if not isinstance(graph, MaterializedGraph):
        raise TypeError(f"compile takes a MaterializedGraph (from materialize_merge), got {type(graph).__name__}")
    with paused_gc():  # ~10^4 instructions and tuples: no collector passes meanwhile
        return _CACHE.get(graph) if cache else _build(graph, catalog())


def cache_info() -> CacheInfo:
    """Hits, misses and size of the compile cache (programs by graph structure)."""
    return CacheInfo(_CACHE.hits, _CACHE.misses, len(_CACHE.entries))


def clear_cache() -> None:
    """Forget every compiled program (the next call of each compiles again)."""
    with _CACHE.lock:
        _CACHE.entries.clear()
        _CACHE.hits = _CACHE.misses = 0


__all__ = ["Instruction", "InputError", "Program", "compile", "cache_info", "clear_cache"]
