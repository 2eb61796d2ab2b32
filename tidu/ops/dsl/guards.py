"""Guards of rewrite rules (``rewrite x * 0 -> 0 when finite(x)``).

A guard is a predicate on one matched value, decided from static facts only: its aval,
its op and attributes, and the value of a constant. The e-graph learns these facts
when the graph is loaded; values that rewrites create later have no facts, so a guard
on them is false and the rule does not fire (conservative, never unsound).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tidu.core.keys import Aval, ValueKey, is_complex, is_integer

GUARDS: dict[str, Callable[[ValueKey], bool]] = {}


def guard(fn: Callable[[ValueKey], bool]) -> Callable[[ValueKey], bool]:
    GUARDS[fn.__name__] = fn
    return fn


@guard
def real(v: ValueKey) -> bool:
    """The value has a real (non-complex) dtype."""
    return not is_complex(v.aval.dtype)


@guard
def finite(v: ValueKey) -> bool:
    """The value cannot be inf or nan: an integer or boolean dtype, or a finite constant."""
    return is_finite(v.op, v.attrs, v.aval)


def is_finite(op: str | None, attrs: Any, aval: Aval) -> bool:
    """``finite``'s test on an op, its attributes and its aval."""
    if aval.dtype == "bool" or is_integer(aval.dtype):
        return True
    if op != "constant":
        return False
    value = attrs["value"]
    if value.identity_size is not None:  # zeros and ones, not made to be read
        return True
    one = value.splat()  # a splat is one value: not a scan of its (maybe huge) broadcast view
    return bool(np.all(np.isfinite(value.array if one is None else one)))


@guard
def identity(v: ValueKey) -> bool:
    """The op returns its only operand unchanged (same aval, no reordering)."""
    if v.op is None or not v.inputs:
        return False
    return is_identity(v.op, v.attrs, v.inputs[0].aval, v.aval)


def is_identity(op: str, attrs: Any, operand: Aval, aval: Aval) -> bool:
    """``identity``'s test on an op, its attributes, its first operand's aval and its own."""
    if operand != aval:
        return False
    match op:
        case "broadcast_in_dim":
            return tuple(attrs["dims"]) == tuple(range(aval.ndim))
        case "reshape" | "convert":
            return True
        case "transpose":
            return tuple(attrs["perm"]) == tuple(range(aval.ndim))
        case "reduce_sum" | "reduce_max" | "reduce_prod":
            return tuple(attrs["axes"]) == ()
        case "reverse":
            return all(aval.shape[d] <= 1 for d in attrs["dims"])
        case "slice":
            return all(s == 1 for s in attrs["strides"]) and all(x == 0 for x in attrs["start"])
        case "dynamic_slice":  # the whole axis: the start clamps to 0
            return True
        case "pad":
            return not any(attrs["low"]) and not any(attrs["high"]) and not any(attrs["interior"])
    return False


# Sign facts, for the domain guards of real rewrites (``exp(log(x)) -> x when
# positive(x)``). Decided from the graph around the value, a few levels deep; the e-graph
# phase also derives them for values that rewrites create (tidu/egraph/normalize.py).
_SIGN_DEPTH = 6


def _const_sign(v: ValueKey) -> tuple[bool, bool, bool] | None:
    """(positive, nonneg, nonzero) of a real constant (all elements), else None."""
    if v.op != "constant" or is_complex(v.aval.dtype):
        return None
    arr = v.attrs["value"].array
    if arr.size == 0 or not np.all(np.isfinite(arr)):
        return None
    return bool(np.all(arr > 0)), bool(np.all(arr >= 0)), bool(np.all(arr != 0))


def sign_facts(v: ValueKey, depth: int = _SIGN_DEPTH) -> tuple[bool, bool, bool]:
    """(positive, nonneg, nonzero): what can be proven of a real value's sign."""
    no = (False, False, False)
    if depth <= 0 or is_complex(v.aval.dtype) or v.aval.dtype == "bool":
        return no
    c = _const_sign(v)
    if c is not None:
        return c
    ins = v.inputs
    op = v.op
    if op == "exp":
        return True, True, True
    if op in ("sqrt", "abs"):
        return False, True, False
    if op == "mul" and len(ins) == 2 and ins[0] == ins[1]:
        return False, True, False
    if op == "broadcast_in_dim" or op == "reshape" or op == "transpose":
        return sign_facts(ins[0], depth - 1)
    if op in ("add", "mul", "div", "pow", "rsqrt", "reduce_sum", "reduce_prod", "maximum"):
        facts = [sign_facts(x, depth - 1) for x in ins]
        if op == "add":
            pos = any(f[0] for f in facts) and all(f[1] for f in facts)
            return pos, all(f[1] for f in facts), pos
        if op in ("mul", "div"):
            pos = all(f[0] for f in facts)
            return pos, all(f[1] for f in facts), all(f[2] for f in facts)
        if op == "pow":
            return facts[0][0], facts[0][0], facts[0][0]
        if op == "rsqrt":
            return facts[0][0], facts[0][0], facts[0][0]
        if op == "reduce_sum":
            return facts[0][0] and v.aval.size > 0, facts[0][1], facts[0][0]
        if op == "reduce_prod":
            return facts[0]
        if op == "maximum":
            pos = any(f[0] for f in facts)
            return pos, any(f[1] for f in facts), pos
    return no


@guard
def positive(v: ValueKey) -> bool:
    """The value is real and > 0: a positive constant, an exponential of a real value,
    or built from such by +, *, /, pow, sqrt (as far as the graph shows)."""
    return sign_facts(v)[0]


@guard
def nonneg(v: ValueKey) -> bool:
    """The value is real and >= 0: also squares, sqrt and abs."""
    return sign_facts(v)[1]


@guard
def nonzero(v: ValueKey) -> bool:
    """The value is real and != 0."""
    return sign_facts(v)[2]
