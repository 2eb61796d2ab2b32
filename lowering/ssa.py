"""The SSA form the back ends read: ``Instruction`` and the data of a compiled program
(``SSAProgram``). ``tidu.lowering.compile`` makes them; ``Program`` (there) adds the calls
of the back ends, which read only this module, so none of them imports the compiler.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np

from tidu.core.body import Body
from tidu.core.graph import MaterializedGraph
from tidu.core.keys import Attrs, Aval, InputKey
from tidu.ops.catalog import Catalog
from tidu.ops.needs import catalog_for, catalog_needs


class Instruction(NamedTuple):
    """One SSA step: ``outputs = op[attrs](inputs)`` over slot numbers. A named tuple:
    programs have ~10^4 of them and a tuple is made in half the time of a frozen
    dataclass."""

    op: str
    attrs: Attrs
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


_MISSING = object()


class InputError(ValueError):
    """Program inputs are missing, unknown, or of the wrong shape or dtype."""


@dataclass(eq=False)
class SSAProgram:
    """A compiled program's SSA data: instructions over slots, which slots are the inputs
    (with their keys) and the outputs, and every slot's aval."""

    instructions: list[Instruction]
    input_slots: list[int]
    output_slots: list[int]
    slot_avals: list[Aval]
    input_keys: list[InputKey]
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)
    # the catalog it was compiled under: what its ops mean (rule-defined ones run its kernels)
    catalog: Catalog | None = field(default=None, repr=False)

    @property
    def n_slots(self) -> int:
        return len(self.slot_avals)

    def __reduce__(self) -> tuple:
        # the SSA data only: the caches (generated source, XLA calls) are made again on
        # first use, and the catalog is recorded by what it needs (tidu.ops.needs), not pickled
        needs = catalog_needs(self.catalog, program_ops(self))
        return restore_program, (type(self), self.instructions, self.input_slots, self.output_slots,
                                 self.slot_avals, self.input_keys, needs)

    def listing(self) -> str:
        pairs = zip(self.input_slots, self.input_keys, strict=True)
        lines = ["inputs: " + ", ".join(f"s{s}={k}:{self.slot_avals[s]}" for s, k in pairs)]
        for ins in self.instructions:
            outs = ", ".join(f"s{o}" for o in ins.outputs)
            args = ", ".join(f"s{i}" for i in ins.inputs)
            attrs = f" [{ins.attrs}]" if ins.attrs else ""
            lines.append(f"{outs} = {ins.op}({args}){attrs}")
        lines.append("outputs: " + ", ".join(f"s{s}" for s in self.output_slots))
        return "\n".join(lines)

    __str__ = listing

    def __repr__(self) -> str:
        ins = ", ".join(f"{k}:{self.slot_avals[s]}" for s, k in zip(self.input_slots, self.input_keys, strict=True))
        outs = ", ".join(str(self.slot_avals[s]) for s in self.output_slots)
        return f"<Program: {len(self.instructions)} instructions; inputs ({ins}) -> outputs ({outs})>"

    @property
    def exact_types(self) -> list[tuple[type, np.dtype, tuple[int, ...]]]:
        """(np.ndarray, dtype, shape) per input: what a list of exactly the program's input
        arrays reads as (one list comparison: the cheapest check in CPython)."""
        types = self._cache.get("exact_types")
        if types is None:
            types = self._cache["exact_types"] = [
                (np.ndarray, np.dtype(self.slot_avals[s].dtype), self.slot_avals[s].shape) for s in self.input_slots]
        return types

    def ready_inputs(self, inputs: Mapping[InputKey | str, Any] | Sequence[Any]) -> Sequence[np.ndarray]:
        """``inputs`` themselves when they are a list or tuple of exactly the input arrays,
        else ``bind_inputs(inputs)`` (which converts them or says what is wrong)."""
        if type(inputs) in (list, tuple):
            try:
                if [(type(v), v.dtype, v.shape) for v in inputs] == self.exact_types:  # type: ignore[union-attr]
                    return inputs  # type: ignore[return-value]
            except AttributeError:  # not all arrays
                pass
        return self.bind_inputs(inputs)

    def bind_inputs(self, inputs: Mapping[InputKey | str, Any] | Sequence[Any]) -> list[np.ndarray]:
        """Arrays for the input slots, in order, checked against the input avals."""
        if isinstance(inputs, Mapping):
            position = self._cache.get("input_position")
            if position is None:  # by key and by printed name
                position = {k: i for i, k in enumerate(self.input_keys)}
                position.update({str(k): i for i, k in enumerate(self.input_keys)})
                self._cache["input_position"] = position
            values = [_MISSING] * len(self.input_keys)
            unknown = []
            for k, v in inputs.items():
                i = position.get(k)
                if i is None:
                    unknown.append(str(k))
                else:
                    values[i] = v
            if unknown:
                raise InputError(
                    f"unknown input(s) {', '.join(unknown)}; this program takes "
                    f"{', '.join(map(str, self.input_keys)) or 'no inputs'}"
                )
            missing = [str(k) for k, v in zip(self.input_keys, values, strict=True) if v is _MISSING]
            if missing:
                raise InputError(f"missing input(s) {', '.join(missing)}")
        else:
            values = list(inputs)
            if len(values) != len(self.input_keys):
                raise InputError(
                    f"expected {len(self.input_keys)} input(s) "
                    f"({', '.join(map(str, self.input_keys))}), got {len(values)}"
                )
        expected = self._cache.get("input_types")
        if expected is None:  # (shape, np.dtype) per input: dtype.name is slow to read per call
            expected = self._cache["input_types"] = [
                (self.slot_avals[s].shape, np.dtype(self.slot_avals[s].dtype)) for s in self.input_slots]
        arrays = []
        for k, v, (shape, dtype) in zip(self.input_keys, values, expected, strict=True):
            arr = np.asarray(v)
            if arr.shape != shape:
                raise InputError(f"input {k}: expected shape {shape}, got {arr.shape}")
            if arr.dtype != dtype:
                if not np.can_cast(arr.dtype, dtype, casting="same_kind"):
                    raise InputError(f"input {k}: expected dtype {dtype.name}, got {arr.dtype.name}")
                arr = arr.astype(dtype)
            arrays.append(arr)
        return arrays


def program_ops(program: SSAProgram) -> set[str]:
    """Every op ``program`` applies, those of its control-flow bodies included."""
    return instruction_ops(program.instructions)


def instruction_ops(instructions: Sequence[Instruction]) -> set[str]:
    ops = {ins.op for ins in instructions}
    bodies: dict[str, Body] = {}
    for ins in instructions:
        for _, value in ins.attrs.items():
            for v in value if isinstance(value, tuple) else (value,):
                if isinstance(v, Body):
                    bodies[v.name] = v
                    bodies.update((b.name, b) for b in v.graph.bodies())  # nested ones
    for b in bodies.values():
        ops.update(n.op for n in b.graph.nodes if n.op is not None)
    return ops


def restore_program[P: SSAProgram](cls: type[P], instructions: list[Instruction], input_slots: list[int],
                                   output_slots: list[int], slot_avals: list[Aval], input_keys: list[InputKey],
                                   needs: list[dict[str, Any]]) -> P:
    """An unpickled program, under the catalog it needs (``tidu.ops.needs.catalog_for``)."""
    cat = catalog_for(needs, instruction_ops(instructions), "unpickling a tidu Program")
    return cls(instructions, input_slots, output_slots, slot_avals, input_keys, catalog=cat)


def from_graph[P: SSAProgram](graph: MaterializedGraph, cat: Catalog | None,
                               cls: type[P] = SSAProgram) -> P:  # type: ignore[assignment]
    """The SSA program (an instance of ``cls``) of ``graph``: slot i is node i where the
    inputs come first (what extraction gives), else slots are renumbered."""
    nodes = graph.nodes
    n_in = len(graph.inputs)
    # extraction lists the inputs first, in order: then slot i is node i and every
    # node's operand tuple is already its instruction's
    if graph.inputs == list(range(n_in)) and all(nodes[i].op is None for i in graph.inputs):
        return _build_in_place(graph, cat, n_in, cls)
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
    return cls(instructions, [slot_of[i] for i in graph.inputs], [slot_of[o] for o in graph.outputs],
               avals, graph.input_keys, catalog=cat)


def _build_in_place[P: SSAProgram](graph: MaterializedGraph, cat: Catalog | None, n_in: int, cls: type[P]) -> P:
    """``from_graph`` when slot numbers are node numbers (inputs are nodes 0..n_in-1): each
    instruction is its node's ``(op, attrs, inputs)`` (a node is a named tuple) plus
    ``((i,),)``, made without a Python call per node (``tuple.__new__`` is what a named
    tuple's constructor calls)."""
    nodes = graph.nodes
    body = nodes[n_in:]
    ops = list(map(_OP, body))
    if None in ops:
        raise ValueError(f"graph node {n_in + ops.index(None)} is an input missing from graph.inputs")
    # (op, attrs, inputs, (i,)) per node, zipped from the nodes' fields (one tuple made per node)
    fields = zip(map(_OP, body), map(_ATTRS, body), map(_INPUTS, body), zip(range(n_in, len(nodes))), strict=True)
    instructions = list(map(tuple.__new__, repeat(Instruction), fields))
    return cls(instructions, list(graph.inputs), list(graph.outputs), list(map(_AVAL, nodes)),
               graph.input_keys, catalog=cat)


# a node's fields by position (MNode is a named tuple)
_OP, _ATTRS, _INPUTS, _AVAL = itemgetter(0), itemgetter(1), itemgetter(2), itemgetter(3)


__all__ = ["InputError", "Instruction", "SSAProgram", "from_graph", "instruction_ops", "program_ops", "restore_program"]
