"""Index arithmetic of the C back end: where a loop reads an element of a row-major array.

Loops name their indices (``i0``, ``i1``, ... or one flat ``i``); a read maps them to an
offset into the array it reads, through views (reshape, transpose, slice, ...), as C
integer expressions. Kept apart from the emitter so the modules that write special loops
(``c_dot``, ``c_regions``) share it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass


class NeedNest(Exception):
    """A read needs the loop's per-axis indices: the loop is written as a nest."""


@dataclass(frozen=True)
class Index:
    """Where to read: per-axis index expressions (``dims``) and/or the row-major flat
    index (``flat``) in an array of ``shape``; ``nest``: per-axis indices may be derived
    from the flat one (in a single flat loop they are not: the loop becomes a nest)."""

    shape: tuple[int, ...]
    dims: tuple[str, ...] | None
    flat: str | None
    nest: bool

    def axes(self) -> tuple[str, ...]:
        if self.dims is not None:
            return self.dims
        if not self.nest:
            raise NeedNest
        assert self.flat is not None
        out, stride = [], 1
        for d in reversed(range(len(self.shape))):
            n = self.shape[d]
            q = self.flat if stride == 1 else f"({self.flat}) / {stride}"
            out.append("0" if n == 1 else f"({q})" if d == 0 else f"({q}) % {n}")  # (the first axis: < its size)
            stride *= n
        return tuple(reversed(out))

    def offset(self) -> str:
        if self.flat is not None:
            return self.flat
        return lin(list(zip(strides(self.shape), self.dims or (), strict=True)))

    def key(self) -> tuple:
        return (self.dims, self.flat)


NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")


def atomic(expr: str) -> bool:
    """A name, a number, or one bracketed expression: needs no brackets of its own."""
    if NAME.fullmatch(expr):
        return True
    if not expr.startswith("("):
        return False
    depth = 0
    for n, ch in enumerate(expr):
        depth += (ch == "(") - (ch == ")")
        if depth == 0:
            return n == len(expr) - 1
    return False


def reshaped(dims: Sequence[str], shape: Sequence[int], to: Sequence[int]) -> tuple[str, ...]:
    """Per-axis indices into ``to`` of the element at ``dims`` in ``shape`` (same row-major
    order), group by group of axes whose sizes multiply to the same number, so that a
    merge of axes is a sum and only a split divides."""
    if 0 in to:  # an empty array: never read (a pad's inside of size 0), any index does
        return ("0",) * len(to)
    src = [(d, n) for d, n in zip(dims, shape, strict=True) if n != 1]
    dst = [k for k, n in enumerate(to) if n != 1]
    out = ["0"] * len(to)
    i = j = 0
    while i < len(src) and j < len(dst):
        a, b, pa, pb = i + 1, j + 1, src[i][1], to[dst[j]]
        while pa != pb:
            if pa < pb:
                pa *= src[a][1]
                a += 1
            else:
                pb *= to[dst[b]]
                b += 1
        flat = lin(list(zip(strides([n for _, n in src[i:a]]), [d for d, _ in src[i:a]], strict=True)))
        sizes = [to[k] for k in dst[j:b]]
        for k, stride, n in zip(dst[j:b], strides(sizes), sizes, strict=True):
            q = flat if stride == 1 else f"({flat}) / {stride}"
            out[k] = q if k == dst[j] and stride == 1 else f"({q})" if k == dst[j] else f"({q}) % {n}"
        i, j = a, b
    return tuple(out)


def strides(shape: Sequence[int]) -> list[int]:
    out, stride = [], 1
    for n in reversed(shape):
        out.append(stride)
        stride *= n
    return list(reversed(out))


def lin(terms: Sequence[tuple[int, str]], const: int = 0) -> str:
    """``const + sum(coef * expr)`` as C, dropping zeros and unit factors."""
    parts = []
    for coef, expr in terms:
        if coef == 0 or expr == "0":
            continue
        if expr.lstrip("-").isdigit():
            const += coef * int(expr)
            continue
        if not atomic(expr):
            expr = f"({expr})"
        parts.append(expr if coef == 1 else f"{coef} * {expr}")
    if const or not parts:
        parts.append(str(const))
    text = " + ".join(parts)
    return text.replace("+ -", "- ")


__all__ = ["NAME", "Index", "NeedNest", "atomic", "lin", "reshaped", "strides"]
