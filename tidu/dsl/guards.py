"""Guards of rewrite rules (``rewrite x * 0 -> 0 when finite(x)``).

A guard is a predicate on one matched value, decided from static facts only: its aval,
its op and attributes, and the value of a constant. The e-graph learns these facts
when the graph is loaded; values that rewrites create later have no facts, so a guard
on them is false and the rule does not fire (conservative, never unsound).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..keys import ValueKey, is_complex

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
    if v.aval.dtype in ("bool", "int32", "int64"):
        return True
    if v.op == "constant":
        return bool(np.all(np.isfinite(v.attrs["value"].array)))
    return False


@guard
def identity(v: ValueKey) -> bool:
    """The op returns its only operand unchanged (same aval, no reordering)."""
    if v.op is None or not v.inputs or v.inputs[0].aval != v.aval:
        return False
    a = v.attrs
    match v.op:
        case "broadcast_in_dim":
            return tuple(a["dims"]) == tuple(range(v.aval.ndim))
        case "reshape" | "convert":
            return True
        case "transpose":
            return tuple(a["perm"]) == tuple(range(v.aval.ndim))
        case "reduce_sum" | "reduce_max" | "reduce_prod":
            return tuple(a["axes"]) == ()
        case "slice":
            return all(s == 1 for s in a["strides"]) and all(x == 0 for x in a["start"])
        case "pad":
            return not any(a["low"]) and not any(a["high"]) and not any(a["interior"])
    return False
