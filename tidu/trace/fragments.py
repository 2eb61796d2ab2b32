"""Fragments: the unit that build, linearize and linear_transpose produce.

A fragment owns local values (inputs and op outputs); an op's operands are
``Local(id)`` (this fragment) or ``External(key)`` (a value defined elsewhere, found
through the fragment's parents by ``resolve``). Every local value also has its global
``ValueKey``: adding the same structure twice gives the same local id.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from tidu.core.keys import NO_ATTRS, PRIMARY, Attrs, Aval, Derived, Input, InputKey, Literal, Role, ValueKey, input_key
from tidu.core.resources import GRAPH_VALUE_COUNT, charge
from tidu.ops.catalog import OpError, infer_avals


@dataclass(frozen=True, slots=True)
class Local:
    id: int

    def __repr__(self) -> str:
        return f"%{self.id}"


@dataclass(slots=True, unsafe_hash=True)  # not frozen: made per operand use, half the cost; never assigned
class External:
    key: ValueKey

    def __repr__(self) -> str:
        return f"ext({self.key!r})"


class TapeRef:
    """A linear value of a ``linearize.LinearTape`` (its node number and aval): a value a
    fused reverse pass records without interning it."""

    __slots__ = ("id", "aval")

    def __init__(self, i: int, aval: Aval) -> None:
        self.id = i
        self.aval = aval

    def __repr__(self) -> str:
        return f"tape%{self.id}"


ValRef = Local | External

# ``Local(i)`` for every i asked so far: refs are immutable values, so one object per id
# serves every fragment (making one costs more than an op's key look-up)
_LOCALS: list[Local] = []
_LOCALS_LOCK = threading.Lock()


def local_ref(i: int) -> Local:
    """``Local(i)``, shared."""
    try:
        return _LOCALS[i]
    except IndexError:
        with _LOCALS_LOCK:  # grown under the lock: list positions must stay their ids
            _LOCALS.extend(Local(j) for j in range(len(_LOCALS), 2 * i + 64))
        return _LOCALS[i]


class OpNode(NamedTuple):
    """One op of a fragment (a named tuple: immutable and cheap to make)."""

    op: str
    attrs: Attrs
    inputs: tuple[ValRef, ...]
    outputs: tuple[int, ...]
    role: Role


_fragment_ids = itertools.count(1)


def ops_of(keys: list[ValueKey], index: dict[ValueKey, int]) -> list[OpNode]:
    """The ops that define ``keys`` (a fragment's values, in order; ``index`` their ids): one
    node per op, its outputs the op's consecutive slot keys, an operand ``Local(id)`` when
    the fragment holds it and ``External(key)`` otherwise. Keys carry their op's
    structure, so a fragment keeps its keys only and makes its ops when asked."""
    ops: list[OpNode] = []
    n = len(keys)
    i = 0
    while i < n:
        key = keys[i]
        if key.input is not None:
            i += 1
            continue
        j = i + 1
        while j < n and keys[j].slot and keys[j].inputs is key.inputs and keys[j].op == key.op:
            j += 1
        inputs = tuple(local_ref(index[k]) if k in index else External(k) for k in key.inputs)
        ops.append(OpNode(key.op, key.attrs, inputs, tuple(range(i, j)), key.role))
        i = j
    return ops


_fragment_ids = itertools.count(1)


class Fragment:
    """Immutable result of a ``FragmentBuilder``. ``keys[id]`` is local value ``id``'s key;
    ``ops`` (made when first read) the ops that define them."""

    __slots__ = ("name", "keys", "_ops", "inputs", "outputs", "parents", "index")

    def __init__(
        self,
        name: str,
        keys: list[ValueKey],
        ops: list[OpNode] | None,
        inputs: list[int],
        outputs: list[ValueKey],
        parents: tuple[Fragment, ...],
        index: dict[ValueKey, int] | None = None,
    ) -> None:
        self.name = name
        self.keys = keys
        self._ops = ops
        self.inputs = inputs
        self.outputs = outputs
        self.parents = parents
        self.index = index if index is not None else {k: i for i, k in enumerate(keys)}

    @property
    def ops(self) -> list[OpNode]:
        """The ops of this fragment, in order (``ops_of``)."""
        if self._ops is None:
            self._ops = ops_of(self.keys, self.index)
        return self._ops

    def key(self, ref: ValRef) -> ValueKey:
        return self.keys[ref.id] if isinstance(ref, Local) else ref.key

    def defines(self, key: ValueKey) -> bool:
        return key in self.index

    def __repr__(self) -> str:
        return f"<Fragment {self.name}: {len(self.keys)} values, {len(self.ops)} ops, {len(self.parents)} parents>"

    def listing(self) -> str:
        """A readable listing of the local nodes (external refs shown by their key)."""
        lines = [f"fragment {self.name}"]
        for i in self.inputs:
            lines.append(f"  %{i} = input {self.keys[i].input} : {self.keys[i].aval}")
        for node in self.ops:
            outs = ", ".join(f"%{o}" for o in node.outputs)
            args = ", ".join(map(repr, node.inputs))
            attrs = f" [{node.attrs}]" if node.attrs else ""
            role = "" if not node.role.is_linear else f"   {node.role}"
            avals = ", ".join(str(self.keys[o].aval) for o in node.outputs)
            lines.append(f"  {outs} = {node.op}({args}){attrs} : {avals}{role}")
        shown = [f"%{self.index[k]}" if k in self.index else repr(k) for k in self.outputs]
        lines.append("  outputs: " + ", ".join(shown))
        return "\n".join(lines)


# The attributes of small constants, by (dtype, shape, bits): the AD rules' literals and
# the tracer's Python scalars are the same few values over and over, and making their
# Literal and Attrs costs several times an op's key.
_CONSTANTS: dict[tuple, Attrs] = {}
MAX_CONSTANTS = 4096
_CACHED_KINDS = frozenset("biufc")


# the attributes of Python numbers by (value, type, dtype): the rules' literals, read
# without making an array (a float zero's key has its sign too, 0.0 == -0.0; nans are left
# out, nan != nan)
_NUMBERS: dict[tuple, Attrs] = {}


def _number_key(value: float | int, dtype: str) -> tuple:
    if type(value) is float and value == 0:
        return (value, float, dtype, math.copysign(1.0, value))
    return (value, type(value), dtype)


def constant_attrs(value: Any, dtype: str | None = None) -> Attrs:
    """``Attrs(value=Literal(value, dtype))``, shared for small constants."""
    if dtype is not None and (type(value) is float or type(value) is int):
        ident = _number_key(value, dtype)
        attrs = _NUMBERS.get(ident)
        if attrs is not None:
            return attrs
        attrs = constant_attrs(np.asarray(value, dtype=dtype))
        if value == value:
            if len(_NUMBERS) >= MAX_CONSTANTS:
                _NUMBERS.clear()
            _NUMBERS[ident] = attrs
        return attrs
    if isinstance(value, Literal):
        return Attrs(value=value)
    arr = np.asarray(value, dtype=dtype)
    if arr.size > 16 or arr.dtype.kind not in _CACHED_KINDS:
        return Attrs(value=Literal(arr))
    ident = (arr.dtype, arr.shape, arr.tobytes())
    attrs = _CONSTANTS.get(ident)
    if attrs is None:
        if len(_CONSTANTS) >= MAX_CONSTANTS:
            _CONSTANTS.clear()
        attrs = _CONSTANTS[ident] = Attrs(value=Literal(arr))
    return attrs


class FragmentBuilder:
    """Builds a fragment. Also the builder protocol the AD passes emit into:
    ``input``, ``add_op``, ``constant``, ``aval``, ``key_of``."""

    def __init__(self, name: str | None = None) -> None:
        self.name = name or f"F{next(_fragment_ids)}"
        self.keys: list[ValueKey] = []
        self.inputs: list[int] = []
        self.outputs: list[ValueKey] = []
        self.index: dict[ValueKey, int] = {}
        # constants of Python numbers already added, by (value, type, dtype), and of literals,
        # by the literal: the rules' literals (the 1 of tanh's derivative...), met again for
        # every op a pass differentiates
        self.numbers: dict[tuple | Literal, ValRef] = {}

    @property
    def ops(self) -> list[OpNode]:
        """The ops added so far, in order (``ops_of``)."""
        return ops_of(self.keys, self.index)

    def _local(self, key: ValueKey) -> Local:
        i = self.index.get(key)
        if i is None:
            i = len(self.keys)
            self.keys.append(key)
            self.index[key] = i
        return local_ref(i)

    def key_of(self, ref: ValRef) -> ValueKey:
        if isinstance(ref, Local):
            return self.keys[ref.id]
        if isinstance(ref, External):
            return ref.key
        raise TypeError(f"expected Local or External, got {type(ref).__name__}")

    def aval(self, ref: ValRef) -> Aval:
        return self.key_of(ref).aval

    def ref_of(self, key: ValueKey) -> ValRef:
        """A ref to the value ``key``: local where this builder holds it, else external."""
        i = self.index.get(key)
        return External(key) if i is None else local_ref(i)

    def input(self, key: InputKey | str, aval: Aval) -> Local:
        k = Input(input_key(key), aval)
        if k in self.index:
            return local_ref(self.index[k])
        ref = self._local(k)
        self.inputs.append(ref.id)
        return ref

    def add_op(
        self,
        op: str,
        operands: Sequence[ValRef],
        attrs: Attrs | dict[str, Any] | None = None,
        role: Role = PRIMARY,
    ) -> list[ValRef]:
        """Add ``op(operands)``; returns refs to its outputs (existing ones if the same
        structure was added before)."""
        if type(attrs) is not Attrs:
            attrs = Attrs(attrs) if attrs else NO_ATTRS
        keys = self.keys
        try:  # the hot path of tracing and of every AD pass; one and two operands spelt out
            if len(operands) == 2:
                r0, r1 = operands
                k0 = keys[r0.id] if type(r0) is Local else r0.key
                k1 = keys[r1.id] if type(r1) is Local else r1.key
                in_keys = (k0, k1)
                in_avals = (k0.aval, k1.aval)
            elif len(operands) == 1:
                r0 = operands[0]
                k0 = keys[r0.id] if type(r0) is Local else r0.key
                in_keys = (k0,)
                in_avals = (k0.aval,)
            else:
                in_keys = tuple([keys[r.id] if type(r) is Local else r.key for r in operands])
                in_avals = tuple([k.aval for k in in_keys])
        except AttributeError:
            in_keys = tuple([self.key_of(r) for r in operands])  # raises a clear TypeError
            in_avals = tuple([k.aval for k in in_keys])
        mask = role.active_mask
        if mask is not None and len(mask) != len(in_keys):
            raise OpError(f"{op}: active mask {role} has {len(mask)} entries for {len(in_keys)} operands")
        avals = infer_avals(op, in_avals, attrs)
        if len(avals) == 1:  # the common case, spelt out
            key = Derived(op, attrs, in_keys, role, 0, avals[0])
            i = self.index.get(key)
            if i is None:  # a new value (its op is read off the keys: ops_of)
                i = len(keys)
                keys.append(key)
                self.index[key] = i
                if GRAPH_VALUE_COUNT.get() is not None:  # under a limit (tidu.resource_limits)
                    charge()
            try:
                return [_LOCALS[i]]
            except IndexError:
                return [local_ref(i)]
        out_keys = [Derived(op, attrs, in_keys, role, s, a) for s, a in enumerate(avals)]
        if out_keys[0] in self.index:
            return [local_ref(self.index[k]) for k in out_keys]
        refs = [self._local(k) for k in out_keys]
        charge()
        return refs

    def add_known(self, op: str, operands: Sequence[ValRef], role: Role, aval: Aval,
                  attrs: Attrs = NO_ATTRS) -> Local:
        """``add_op(op, operands, attrs, role)[0]`` for a one-output op whose aval the
        caller already knows, as inference would give it (generated rules, whose ops are
        elementwise on operands of one aval: ``tidu.ad.instantiate``; the batching pass's
        broadcasts). An operand may also be given by its key (no ``External`` made for it)."""
        keys = self.keys
        in_keys = tuple([keys[r.id] if type(r) is Local else r if type(r) is ValueKey else r.key for r in operands])
        key = Derived(op, attrs, in_keys, role, 0, aval)
        i = self.index.get(key)
        if i is None:
            i = len(keys)
            keys.append(key)
            self.index[key] = i
            if GRAPH_VALUE_COUNT.get() is not None:
                charge()
        try:
            return _LOCALS[i]
        except IndexError:
            return local_ref(i)

    def constant(self, value: Any, dtype: str | None = None) -> ValRef:
        if dtype is not None and (type(value) is float or type(value) is int) and value == value:
            ident = _number_key(value, dtype)  # (nans left out: nan != nan)
            ref = self.numbers.get(ident)
            if ref is None:
                ref = self.numbers[ident] = self.add_op("constant", (), constant_attrs(value, dtype))[0]
            return ref
        if type(value) is Literal and dtype is None:  # the rules' splats of a shape (Literal.filled, shared)
            ref = self.numbers.get(value)  # (its key is the literal's: equal literals, one value)
            if ref is None:
                ref = self.numbers[value] = self.add_op("constant", (), constant_attrs(value))[0]
            return ref
        return self.add_op("constant", (), constant_attrs(value, dtype))[0]

    def output(self, ref: ValRef) -> ValueKey:
        """Mark a value as an output; it may be defined elsewhere (then kept by key)."""
        key = self.key_of(ref)
        self.outputs.append(key)
        return key

    def build(self, parents: Sequence[Fragment] = ()) -> Fragment:
        return Fragment(self.name, list(self.keys), None, list(self.inputs),
                        list(self.outputs), tuple(parents), dict(self.index))
