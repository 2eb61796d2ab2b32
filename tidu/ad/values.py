"""What the AD passes and the rule engine exchange: values, the environment of a rule,
errors, and the sum of two linear values.

A value is ``Val`` (a ref in the builder, tagged linear when it carries tangent or
cotangent flow) or ``Zero`` (a symbolic zero with a known aval: never built through
arithmetic). ``Env`` binds the names a template reads for one application of a rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tidu.core.keys import DTYPES, NO_ATTRS, PRIMARY, Attrs, Aval, Linearized, Role, ValueKey, is_inexact
from tidu.ops.catalog import Primitive
from tidu.trace.fragments import FragmentBuilder, ValRef


class Builder(Protocol):
    """What the AD passes emit into (a FragmentBuilder, or an eager evaluator)."""

    def add_op(self, op: str, operands: Sequence[ValRef], attrs: Attrs | None = None,
               role: Role = PRIMARY) -> list[Any]: ...

    def constant(self, value: Any, dtype: str | None = None) -> Any: ...

    def input(self, key: Any, aval: Aval) -> Any: ...

    def aval(self, ref: Any) -> Aval: ...


class ADRuleError(Exception):
    """A JVP or transpose rule is missing or failed for an op."""

    def __init__(self, op: str, rule: str, key: ValueKey | None, message: str) -> None:
        where = f" at {key!r}" if key is not None else ""
        super().__init__(f"{op}: {rule}: {message}{where}")
        self.op, self.rule, self.key = op, rule, key


class Unfusable(Exception):
    """Raised inside a fused VJP (``transpose.vjp``) for what only the separate passes do
    (ops with Python-callback derivatives, variadic or multi-output linear ops, and every
    error, whose message names a linear value's key): the caller runs those instead."""


# Val and Zero are made several times per emitted op: plain (not frozen) slotted classes,
# whose construction costs half that of frozen ones; nothing assigns to their fields.
@dataclass(slots=True, unsafe_hash=True)
class Val:
    ref: Any
    linear: bool
    aval: Aval


@dataclass(slots=True, unsafe_hash=True)
class Zero:
    aval: Aval


Value = Val | Zero


@dataclass(slots=True)
class Env:
    """Bindings for one application of a rule template: the names it reads (a variadic
    operand's as a list), the rule's op attributes, the avals attribute functions read
    (``shape(x)``), the index of a variadic operand's part, and what errors name."""

    builder: Builder
    names: Mapping[str, Value | list[Value]]
    attrs: Attrs
    avals: Mapping[str, Aval | list[Aval]]
    index: int | None = None
    rule: str = ""
    prim: str = ""
    key: ValueKey | None = None

    def fail(self, message: str) -> ADRuleError:
        return ADRuleError(self.prim, self.rule, self.key, message)


INEXACT = frozenset(d for d in DTYPES if is_inexact(d))  # differentiable dtypes, looked up per op

_BOTH = Linearized([True, True])


def accumulate(b: Builder, total: Value, part: Value) -> Value:
    """total + part with the primitive set's add (an ordinary linear node). Where one of
    them alone updates a slice of zeros (the cotangent of a read ``x[i]``), its update is
    added into that slice of the other instead: a slice's cost, not the array's."""
    if type(part) is Zero:
        return total
    if type(total) is Zero:
        return part
    if type(b) is FragmentBuilder:
        in_total, in_part = zero_slice_update(b.key_of(total.ref)), zero_slice_update(b.key_of(part.ref))
        # (two of them stay a sum: a scan's transpose adds each into the carried sum, control.py)
        if in_part is not None and in_total is None:
            return _added_into_slice(b, total, *in_part)
        if in_total is not None and in_part is None:
            return _added_into_slice(b, part, *in_total)
    (ref,) = b.add_op("add", [total.ref, part.ref], NO_ATTRS, _BOTH)
    return Val(ref, True, total.aval)


_SLICE_READ = Linearized([True, False])
_SLICE_WRITE = Linearized([True, True, False])


def zero_slice_update(key: ValueKey) -> tuple[ValueKey, ValueKey, int] | None:
    """(update, start, axis) where ``key`` is a dynamic_update_slice of a constant array of
    zeros, else None."""
    if key.op != "dynamic_update_slice":
        return None
    base = key.inputs[0]
    if base.op != "constant" or base.attrs["value"].splat() != 0:
        return None
    return key.inputs[1], key.inputs[2], key.attrs["axis"]


def _added_into_slice(b: FragmentBuilder, base: Val, update: ValueKey, start: ValueKey, axis: int) -> Val:
    """``base`` with ``update`` added into its slice at ``start`` along ``axis``."""
    u, s = b.ref_of(update), b.ref_of(start)
    (read,) = b.add_op("dynamic_slice", [base.ref, s], Attrs(axis=axis, size=update.aval.shape[axis]), _SLICE_READ)
    (summed,) = b.add_op("add", [read, u], NO_ATTRS, _BOTH)
    (ref,) = b.add_op("dynamic_update_slice", [base.ref, summed, s], Attrs(axis=axis), _SLICE_WRITE)
    return Val(ref, True, base.aval)


def missing_transpose_rule(prim: Primitive, name: str, out_key: ValueKey) -> ADRuleError:
    """The error for an active operand ``name`` of ``prim`` without a transpose rule."""
    return ADRuleError(prim.name, f"transpose {name}", out_key,
                       f"no transpose rule for operand {name!r} (is the op linear in it?); "
                       f"add 'transpose {name}: ...' to its rule file")


__all__ = ["ADRuleError", "Builder", "Env", "INEXACT", "Unfusable", "Val", "Value", "Zero", "accumulate",
           "missing_transpose_rule"]
