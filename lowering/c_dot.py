"""``dot_general`` in C: blocked loops, and contractions with a sparse constant operand.

``out[b, p, q] = sum_k lhs[b, p, k] * rhs[b, k, q]`` (batch, lhs free, rhs free axes, in
that order). Two ways of writing it:

- **Dense.** A row of output elements along the last rhs free axis (``MAX_ROW`` at
  most, wider rows ``TILE`` at a time) is accumulated in that many scalar variables, one
  statement each, so the sums stay in registers (a local array is kept in memory, and
  each step then waits on a store); without free rhs axes each output element is one
  scalar accumulator. Every sum runs over ``k`` in index order, as before.
- **Sparse constant operand.** Where one operand is a constant (through views and pads)
  with few nonzeros (a one-hot basis: the seed of a Jacobian or Hessian, a slice of an
  identity), only its nonzeros are visited: the output is set to zero and each nonzero
  ``v`` at ``(b, k, q)`` adds ``other[b, p, k] * v`` for every ``p``. That drops the
  products ``other * 0``, which are zeros only where ``other`` is finite (``inf * 0`` is
  nan): the sparse loop runs under a run-time check that every element of the other
  operand is finite (free for a finite constant), else the dense loop runs. The
  result is the dense loop's up to the order of the additions and the sign of a zero.

A ``dot_general`` without contracting axes (an outer product) is not written here: it
is one multiplication per element, read lazily by whoever reads it (``c_source``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from tidu.lowering.c_index import Index, lin, strides

from tidu.core.keys import is_float

MAX_ROW = 10  # output rows up to this wide are accumulated whole; wider ones TILE at a time
TILE = 8
SPARSE_FRACTION = 8  # an operand is sparse with at most 1/8 of its elements nonzero ...
SPARSE_MAX = 1 << 16  # ... and at most this many (their coordinates are static arrays)


def emit(e: Any, ins: Any) -> None:
    """Write ``ins`` (a dot_general with contracting axes) for emitter ``e`` (c_source)."""
    lhs, rhs = ins.inputs
    out = ins.outputs[0]
    la, ra, oa = e.avals[lhs], e.avals[rhs], e.avals[out]
    a = ins.attrs
    lc, rc, lb, rb = a["lhs_contract"], a["rhs_contract"], a["lhs_batch"], a["rhs_batch"]
    lfree = [d for d in range(la.ndim) if d not in lc and d not in lb]
    rfree = [d for d in range(ra.ndim) if d not in rc and d not in rb]
    b = [f"b{k}" for k in range(len(lb))]
    p = [f"p{k}" for k in range(len(lfree))]
    q = [f"q{k}" for k in range(len(rfree))]
    k_ = [f"k{k}" for k in range(len(lc))]

    def dims(ndim: int, batch: Sequence[int], contract: Sequence[int], free: list[int],
             fvars: list[str]) -> tuple[str, ...]:
        return tuple(b[batch.index(d)] if d in batch else k_[contract.index(d)] if d in contract
                     else fvars[free.index(d)] for d in range(ndim))

    ldims = dims(la.ndim, lb, lc, lfree, p)
    rdims = dims(ra.ndim, rb, rc, rfree, q)
    sizes = {**dict(zip(b, [la.shape[d] for d in lb], strict=True)),
             **dict(zip(p, [la.shape[d] for d in lfree], strict=True)),
             **dict(zip(q, [ra.shape[d] for d in rfree], strict=True)),
             **dict(zip(k_, [la.shape[d] for d in lc], strict=True))}
    t = e.c_type(oa.dtype)
    e.lines.append(f"    /* s{out} = dot_general(s{lhs}, s{rhs}) */")
    if oa.ndim == 0:
        e.lines.append(f"    {t} s{out} = 0;")
        target = f"s{out}"
    else:
        target = f"{e.alloc(out)}[{lin(list(zip(strides(oa.shape), b + p + q, strict=True)))}]"
    dense = _dense(e, lhs, rhs, ldims, rdims, b + p, q, k_, sizes, target, oa, t)
    sparse = None
    if is_float(oa.dtype) and oa.ndim:
        for s_slot, o_slot, s_dims, o_dims, s_first in ((rhs, lhs, rdims, ldims, False),
                                                         (lhs, rhs, ldims, rdims, True)):
            sparse = _sparse(e, out, s_slot, o_slot, s_dims, o_dims, s_first, sizes, target, oa, t)
            if sparse is not None:
                break
    if sparse is None:
        e.lines.extend(dense)
    else:
        flag, lines = sparse
        if flag == "1":
            e.lines.extend(lines)
        else:
            e.lines.append(f"    if ({flag}) {{")
            e.lines.extend("    " + ln for ln in lines)
            e.lines.append("    } else {")
            e.lines.extend("    " + ln for ln in dense)
            e.lines.append("    }")
    if oa.ndim == 0:
        e.scalar_ref(out, f"s{out}")
    e.release(ins)


class _Lines:
    """Statements at a growing nesting depth."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 1

    def add(self, text: str) -> None:
        self.lines.append(f"{'    ' * self.depth}{text}")

    def loops(self, names: Sequence[str], sizes: dict[str, int]) -> None:
        for n in names:
            self.add(f"for (int64_t {n} = 0; {n} < {sizes[n]}; {n}++) {{")
            self.depth += 1

    def end(self, count: int) -> None:
        for _ in range(count):
            self.depth -= 1
            self.add("}")


def _dense(e: Any, lhs: int, rhs: int, ldims: tuple[str, ...], rdims: tuple[str, ...], outer: list[str],
           q: list[str], k_: list[str], sizes: dict[str, int], target: str, oa: Any, t: str) -> list[str]:
    out = _Lines()
    out.loops(outer, sizes)
    if not q:  # one sum per output element: a scalar accumulator
        acc = "acc" if oa.ndim else target
        if oa.ndim:
            out.add(f"{t} acc = 0;")
        out.loops(k_, sizes)
        x = e.read_plain(lhs, Index(e.avals[lhs].shape, ldims, None, True))
        y = e.read_plain(rhs, Index(e.avals[rhs].shape, rdims, None, True))
        out.add(f"{acc} += {x} * {y};")
        out.end(len(k_))
        if oa.ndim:
            out.add(f"{target} = acc;")
        out.end(len(outer))
        return out.lines
    # a row along the last rhs free axis, TILE elements at a time, in scalar accumulators
    # (written out, so they live in registers: an array would go through memory)
    last, width = q[-1], sizes[q[-1]]
    out.loops(q[:-1], sizes)
    full, rest = divmod(width, TILE) if width > MAX_ROW else (1, 0) if width else (0, 0)
    tile = TILE if width > MAX_ROW else width
    if full > 1:
        out.add(f"for (int64_t {last}t = 0; {last}t < {full * tile}; {last}t += {tile}) {{")
        out.depth += 1
    _row(e, out, lhs, rhs, ldims, rdims, k_, sizes, target, t, last, f"{last}t" if full > 1 else "0", tile)
    if full > 1:
        out.end(1)
    if rest:
        _row(e, out, lhs, rhs, ldims, rdims, k_, sizes, target, t, last, str(full * tile), rest)
    out.end(len(q) - 1 + len(outer))
    return out.lines


def _row(e: Any, out: _Lines, lhs: int, rhs: int, ldims: tuple[str, ...], rdims: tuple[str, ...], k_: list[str],
         sizes: dict[str, int], target: str, t: str, last: str, start: str, width: int) -> None:
    """``width`` output elements from ``start`` along ``last``: one accumulator each."""
    cols = [lin([(1, start)], j) for j in range(width)]
    out.add(" ".join(f"{t} acc{j} = 0;" for j in range(width)))
    out.loops(k_, sizes)
    x = e.read_plain(lhs, Index(e.avals[lhs].shape, ldims, None, True))
    out.add(f"const {t} a = {x};")
    for j, col in enumerate(cols):
        rd = tuple(col if d == last else d for d in rdims)
        out.add(f"acc{j} += a * {e.read_plain(rhs, Index(e.avals[rhs].shape, rd, None, True))};")
    out.end(len(k_))
    for j, col in enumerate(cols):
        out.add(f"{_at(target, last, col)} = acc{j};")


def _at(target: str, var: str, expr: str) -> str:
    """``target`` with the index variable ``var`` replaced by ``expr``."""
    return re.sub(rf"\b{var}\b", f"({expr})", target)


def _sparse(e: Any, out: int, s_slot: int, o_slot: int, s_dims: tuple[str, ...], o_dims: tuple[str, ...],
            s_first: bool, sizes: dict[str, int], target: str, oa: Any, t: str) -> tuple[str, list[str]] | None:
    """The loop over the nonzeros of constant operand ``s_slot`` and the C condition it
    needs (``o_slot`` finite), or None where that operand is not a sparse constant."""
    value = e.constant_value(s_slot)
    if value is None or value.dtype.kind != "f" or not is_float(e.avals[o_slot].dtype):
        return None
    nz = np.flatnonzero(value.reshape(-1))
    if nz.size * SPARSE_FRACTION > value.size or nz.size > SPARSE_MAX:
        return None
    flag = e.finite_flag(o_slot)
    if flag is None or flag == "0":
        return None
    coords = np.unravel_index(nz, value.shape)
    values = value.reshape(-1)[nz]
    lines = _Lines()
    lines.add(f"for (int64_t i = 0; i < {math.prod(oa.shape)}; i++) s{out}[i] = 0;")
    if nz.size == 0:
        return flag, lines.lines
    names = []
    for axis, var in enumerate(s_dims):
        name = f"d{out}_{axis}"
        e.static_array(name, "int32_t", [str(int(c)) for c in coords[axis]])
        names.append((var, name))
    bits = np.ascontiguousarray(values).view(np.uint8).reshape(values.size, -1)
    if bool(np.all(bits == bits[:1])):
        v = e.float_literal(values[0], value.dtype.name)
    else:
        e.static_array(f"d{out}_v", e.c_type(value.dtype.name),
                       [e.float_literal(x, value.dtype.name) for x in values.tolist()])
        v = f"d{out}_v[n]"
    lines.add(f"for (int64_t n = 0; n < {nz.size}; n++) {{")
    lines.depth += 1
    for var, name in names:
        lines.add(f"const int64_t {var} = {name}[n];")
    lines.add(f"const {t} v = {v};")
    free = [d for d in o_dims if d not in s_dims]
    lines.loops(free, sizes)
    x = e.read_plain(o_slot, Index(e.avals[o_slot].shape, o_dims, None, True))
    lines.add(f"{target} += {'v * ' + x if s_first else x + ' * v'};")
    lines.end(len(free) + 1)
    return flag, lines.lines


__all__ = ["MAX_ROW", "SPARSE_FRACTION", "SPARSE_MAX", "TILE", "emit"]
