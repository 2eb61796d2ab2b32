"""compile: a MaterializedGraph becomes an SSA ``Program`` (each slot written once).

Programs are cached by graph structure: compiling a structurally equal graph returns
the same ``Program`` object (``cache_info()`` shows hits and misses).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tidu.lowering.numpy import clear_bodies, numpy_source, run_numpy
from tidu.lowering.saving import PathLike, save_program
from tidu.lowering.ssa import InputError, Instruction, SSAProgram, from_graph

from tidu.core.gcpause import paused_gc
from tidu.core.graph import MaterializedGraph
from tidu.core.keys import InputKey
from tidu.ops.catalog import Catalog, catalog


class Program(SSAProgram):
    """A compiled program (``SSAProgram``'s data) and its back ends: ``eval``/``run`` on
    NumPy or XLA, ``to_numpy_source``, ``to_stablehlo``."""

    def eval(self, inputs: Mapping[InputKey | str, Any] | Sequence[Any]) -> list[np.ndarray]:
        """Run with NumPy (generated source); inputs by key, by name, or in order."""
        self._check_container(inputs, "eval")
        return run_numpy(self, self.bind_inputs(inputs))

    def run(self, inputs: Mapping[InputKey | str, Any] | Sequence[Any], backend: str = "numpy",
            device: Any = None) -> list[np.ndarray]:
        """Run on ``backend``: "numpy" (default), "c" (compiled C) or "xla" (StableHLO through JAX, on
        ``device``: the CPU by default, or "gpu", "gpu:1", "tpu", a ``jax.Device``)."""
        self._check_container(inputs, "run")
        if backend == "numpy":
            if device is not None and device != "cpu":
                raise ValueError(f"backend='numpy' runs on the CPU; for device={device!r} use backend='xla'")
            return self.eval(inputs)
        if backend == "xla":
            key = "xla_call" if device is None else ("xla_call", device)
            call = self._cache.get(key)
            if call is None:  # jax itself is imported on first use: it is an optional extra
                from tidu.lowering.xla import checked_call  # (the back ends other than NumPy: on first use)

                call = self._cache[key] = checked_call(self, device)
            return call(inputs)
        if backend == "c":  # compiled C (tidu.lowering.c_build): on the CPU only
            if device is not None and device != "cpu":
                raise ValueError(f"backend='c' runs on the CPU; for device={device!r} use backend='xla'")
            call = self._cache.get("c_call")
            if call is None:
                from tidu.lowering.c_build import c_call

                call = self._cache["c_call"] = c_call(self)
            return call(inputs)
        raise ValueError(f"unknown backend {backend!r}; use 'numpy', 'xla' or 'c'")

    def _check_container(self, inputs: Any, what: str) -> None:
        """``inputs`` a mapping or a sequence of the inputs, else an ``InputError`` that shows the
        call: a bare array (its rows would be read as the inputs), a number, None or a str."""
        if type(inputs) in (list, tuple) or isinstance(inputs, Mapping):
            return
        n = len(self.input_keys)
        bare = (inputs is None or isinstance(inputs, str | bytes | int | float | complex | np.generic)
                or (isinstance(inputs, np.ndarray) and (inputs.ndim == 0 or len(inputs) != n))
                or not hasattr(inputs, "__iter__"))
        if bare:
            names = ", ".join(map(str, self.input_keys))
            raise InputError(f"Program.{what} takes its {n} input(s) ({names or 'none'}) as a list in order or a dict "
                             f"by name, got {type(inputs).__name__}; write program.{what}([{names}])")

    def to_numpy_source(self, standalone: bool = False) -> str:
        """The NumPy source ``eval`` runs; ``standalone``: a module that runs without tidu."""
        return numpy_source(self, standalone)

    def to_stablehlo(self, platform: str = "cpu") -> str:
        """The StableHLO module for ``platform`` ("cpu", "cuda", "rocm", "tpu")."""
        from tidu.lowering.stablehlo import to_stablehlo

        return to_stablehlo(self, platform)

    def to_c(self) -> str:
        """One self-contained C99 file computing the program (docs/lowering.md#c)."""
        source = self._cache.get("c_source")
        if source is None:
            from tidu.lowering.c_source import to_c

            source = self._cache["c_source"] = to_c(self)
        return source

    def save(self, path: PathLike) -> None:
        """Write the program to ``path`` as a program file (docs/lowering.md#saving-programs);
        ``tidu.load_program`` reads it back."""
        save_program(self, path)


def _build(graph: MaterializedGraph, cat: Catalog) -> Program:
    return from_graph(graph, cat, Program)


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
    """Forget every compiled program and loop body (the next call of each compiles again)."""
    with _CACHE.lock:
        _CACHE.entries.clear()
        _CACHE.hits = _CACHE.misses = 0
    clear_bodies()


__all__ = ["Instruction", "InputError", "Program", "compile", "cache_info", "clear_cache"]
