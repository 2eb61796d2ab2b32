"""Region analysis for the C back end: where a fused loop's values are known constants.

Dense derivatives carry masks: the seed of a Hessian is an identity, and a Hessian
column is that identity scaled, shifted, padded and summed. Computed element by
element, an n x n Hessian that is nonzero on three diagonals costs O(n^2). Here a value
over a loop of rank >= 2 may be known to be ``Lines(p, q, offsets, outside)``: equal to
the constant ``outside`` wherever ``i_p - i_q`` is not one of ``offsets``. The emitter
then runs the loop over those lines only (O(n) points, all lines in one loop:
``lines_loop``) and writes ``outside`` elsewhere in an output; a scratch value is kept
as bands, one vector per line (``c_bands``).

IEEE arithmetic decides what is known. ``x * 0`` is a zero only when ``x`` is finite
(``inf * 0`` is nan), and its sign is that of ``x``; ``0 + (+-0)`` is ``+0``. So an
abstract value off the lines is one of:

- ``Known(v)``: exactly ``v`` (bits included);
- ``ZERO``: +0 or -0, which one unknown;
- ``Finite(slots)``: any finite number, provided the arrays ``slots`` hold only finite
  numbers (a run-time check the split loop is conditioned on);
- ``UNKNOWN``.

Only ``Known`` values are written without being computed; the others are steps of the
proof (``0 * x`` is ``ZERO`` given ``x`` finite; ``0 - ZERO`` is ``Known(+0)``). The
facts about constants, views and pads are read off their structure (``fact`` in
``c_source``); those of a loop's values are derived here, op by op (``combine``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from tidu.lowering.c_index import lin

MAX_LINES = 8  # a value on more lines than this is treated as dense


@dataclass(frozen=True)
class Known:
    value: np.generic

    def same(self, other: object) -> bool:
        return isinstance(other, Known) and self.value.tobytes() == other.value.tobytes()


@dataclass(frozen=True)
class Zero:
    pass


@dataclass(frozen=True)
class Finite:
    slots: frozenset[int]


@dataclass(frozen=True)
class Unknown:
    pass


Abstract = Known | Zero | Finite | Unknown
ZERO, UNKNOWN = Zero(), Unknown()


@dataclass(frozen=True)
class Lines:
    """Equal to ``outside`` (with ``guards`` finite) off the lines ``i_p - i_q in offsets``.

    ``base``: the loop value this is a view of (None: a constant); its line k is line
    ``to_base[0] * k + to_base[1]`` of ``base`` (views shift and flip lines)."""

    p: int
    q: int
    offsets: frozenset[int]
    outside: np.generic
    guards: frozenset[int] = frozenset()
    base: int | None = None
    to_base: tuple[int, int] = (1, 0)

    def base_line(self, k: int) -> int:
        return self.to_base[0] * k + self.to_base[1]

    def moved(self, p: int, q: int, shift: int) -> Lines:
        """The fact of a view whose axes ``p, q`` read this one's at ``i + shift_p`` and
        ``i + shift_q`` (``shift = shift_p - shift_q``): its lines are ``k - shift``."""
        sign = 1
        if p > q:  # kept as p < q: the line i_q - i_p == k is i_p - i_q == -k
            p, q, sign = q, p, -1
        s, c = self.to_base
        return Lines(p, q, frozenset(sign * (k - shift) for k in self.offsets), self.outside, self.guards,
                     self.base, (s * sign, c + s * shift))


@dataclass(frozen=True)
class Value:
    """A loop value in the analysis: its lines (None: dense) and its value off them."""

    lines: frozenset[int] | None
    outside: Abstract
    guards: frozenset[int] = frozenset()  # what ``outside`` assumes finite


def _is(a: Abstract, v: float) -> bool:
    """``a`` is Known exactly ``v`` (+0.0 is not -0.0)."""
    return isinstance(a, Known) and bool(a.value == v) and np.signbit(a.value) == np.signbit(v)


def _finite_known(a: Abstract) -> bool:
    return isinstance(a, Known) and bool(np.isfinite(a.value))


def _negate(a: Abstract) -> Abstract:
    return Known(-a.value) if isinstance(a, Known) else a


def _add(a: Abstract, b: Abstract) -> tuple[Abstract, frozenset[int]]:
    """``a + b`` and the finiteness it assumes beyond what a and b carry."""
    if isinstance(a, Known) and isinstance(b, Known):
        return Known(a.value + b.value), frozenset()
    for x, y in ((a, b), (b, a)):
        if isinstance(x, Known) and isinstance(y, Zero):
            # +0 + (+-0) is +0; c + (+-0) is c for any c other than a zero (inf and nan too)
            if _is(x, 0.0) or not bool(x.value == 0):
                return x, frozenset()
            return ZERO, frozenset()
    if isinstance(a, Zero) and isinstance(b, Zero):
        return ZERO, frozenset()
    return UNKNOWN, frozenset()


def _mul(a: Abstract, b: Abstract) -> tuple[Abstract, frozenset[int]]:
    if isinstance(a, Known) and isinstance(b, Known):
        return Known(a.value * b.value), frozenset()
    for x, y in ((a, b), (b, a)):
        zero = isinstance(x, Zero) or (isinstance(x, Known) and bool(x.value == 0))
        if zero and isinstance(y, Finite):
            return ZERO, y.slots
        if zero and _finite_known(y):
            return ZERO, frozenset()
        if isinstance(x, Zero) and isinstance(y, Zero):
            return ZERO, frozenset()
    return UNKNOWN, frozenset()


def _div(a: Abstract, b: Abstract) -> tuple[Abstract, frozenset[int]]:
    if isinstance(a, Known) and isinstance(b, Known):
        with np.errstate(all="ignore"):
            return Known(a.value / b.value), frozenset()
    zero = isinstance(a, Zero) or (isinstance(a, Known) and bool(a.value == 0))
    if zero and _finite_known(b) and not bool(b.value == 0):
        return ZERO, frozenset()
    return UNKNOWN, frozenset()


def combine(op: str, args: list[Value], out_dtype: np.dtype) -> Value:
    """The abstract result of elementwise ``op`` (add, sub, mul, div, neg, select) on
    ``args`` at points off every argument's lines; any other op is dense."""
    lines: set[int] = set()
    for a in args:
        if a.lines is not None:
            lines |= a.lines
    guards = frozenset().union(*(a.guards for a in args))
    if not lines or len(lines) > MAX_LINES:
        return Value(None, UNKNOWN)
    outs = [a.outside for a in args]
    extra: frozenset[int] = frozenset()
    with np.errstate(all="ignore"):
        if op == "neg" and len(outs) == 1:
            result: Abstract = _negate(outs[0])
        elif op == "add":
            result, extra = _add(outs[0], outs[1])
        elif op == "sub":  # x - y is x + (-y), signed zeros included
            result, extra = _add(outs[0], _negate(outs[1]))
        elif op == "mul":
            result, extra = _mul(outs[0], outs[1])
        elif op == "div":
            result, extra = _div(outs[0], outs[1])
        elif op == "select" and isinstance(outs[0], Known):
            chosen = args[1] if bool(outs[0].value) else args[2]
            return Value(frozenset(lines), chosen.outside, guards)
        elif op == "select" and isinstance(outs[1], Known) and outs[1].same(outs[2]):
            result = outs[1]
        else:
            result = UNKNOWN
    if isinstance(result, Known):
        result = Known(np.asarray(result.value).astype(out_dtype)[()])
    if isinstance(result, Unknown):
        return Value(None, UNKNOWN)
    return Value(frozenset(lines), result, guards | extra)


def line_range(k: int, n_p: int, n_q: int) -> tuple[int, int]:
    """The ``i_p`` for which ``i_q = i_p - k`` is in range."""
    return max(0, k), min(n_p, n_q + k)


def lines_loop(shape: tuple[int, ...], p: int, q: int, offsets: Sequence[int], depth: int,
               body: Callable[[int, str], list[str]]) -> list[str]:
    """One loop nest over the points of the lines ``i_p - i_q == k`` of ``shape``
    (indices ``i0``, ``i1``, ...), indented ``depth`` levels. The points of all lines at
    one ``i_p`` are visited together: they are neighbours in memory (a row and its
    transpose's column), where line after line would sweep the arrays once per line.
    Each line is a block declaring ``i_q`` and holding ``body(k, indent)``, guarded
    where its range of ``i_p`` is narrower than the loop's."""
    ranges = {k: line_range(k, shape[p], shape[q]) for k in offsets}
    ranges = {k: r for k, r in ranges.items() if r[0] < r[1]}
    if not ranges:
        return []
    lo, hi = min(r[0] for r in ranges.values()), max(r[1] for r in ranges.values())
    head, start = [], depth
    for d, n in enumerate(shape):
        if d != q:
            head.append(f"{'    ' * depth}for (int64_t i{d} = {lo if d == p else 0}; i{d} < {hi if d == p else n}; "
                        f"i{d}++) {{")
            depth += 1
    lines, indent = [], "    " * depth
    for k, (a, b) in ranges.items():
        cond = " && ".join([f"i{p} >= {a}"] * (a > lo) + [f"i{p} < {b}"] * (b < hi))
        lines += [f"{indent}{f'if ({cond}) ' if cond else ''}{{  /* i{p} - i{q} == {k} */",
                  f"{indent}    const int64_t i{q} = {lin([(1, f'i{p}')], -k)};",
                  *body(k, indent + "    "), f"{indent}}}"]
    return head + lines + [f"{'    ' * d}}}" for d in reversed(range(start, depth))]


__all__ = ["MAX_LINES", "UNKNOWN", "ZERO", "Abstract", "Finite", "Known", "Lines", "Unknown", "Value", "Zero",
           "combine", "line_range", "lines_loop"]
