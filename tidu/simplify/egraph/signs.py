"""Sign facts of values: what the domain guards of real rewrites ask
(``exp(log(x)) -> x when positive(x)``). One bottom-up pass over a graph's nodes (or an
e-graph's classes, where any e-node of a class may prove a fact) with one rule per op;
``tidu.ops.dsl.guards`` states the same facts for single values."""

from __future__ import annotations

from collections.abc import Sequence

POSITIVE, NONNEG, NONZERO = 1, 2, 4
ALL = POSITIVE | NONNEG | NONZERO
GUARD_BITS = {"positive": POSITIVE, "nonneg": NONNEG, "nonzero": NONZERO}


def constant_bits(value: float) -> int:
    return ALL if value > 0 else NONNEG if value == 0 else NONZERO if value == value else 0


def op_bits(op: str | None, kids: Sequence[int], bits: Sequence[int]) -> int:
    """The facts an op proves of its real result from its operands' facts (``bits``
    indexed by the operands' ids ``kids``)."""
    match op:
        case "exp":
            return ALL
        case "sqrt" | "abs":
            return NONNEG
        case "mul" if kids[0] == kids[1]:
            return NONNEG | (bits[kids[0]] & NONZERO)
        case "mul" | "div":
            a, b = bits[kids[0]], bits[kids[1]]
            return (a & b & ALL) | (NONZERO if a & b & NONZERO else 0)
        case "add":
            a, b = bits[kids[0]], bits[kids[1]]
            if a & NONNEG and b & NONNEG:
                return ALL if (a | b) & POSITIVE else NONNEG
        case "pow" | "rsqrt":
            return ALL if bits[kids[0]] & POSITIVE else 0
        case "broadcast_in_dim" | "reshape" | "transpose":
            return bits[kids[0]]
    return 0


__all__ = ["ALL", "GUARD_BITS", "NONNEG", "NONZERO", "POSITIVE", "constant_bits", "op_bits"]
