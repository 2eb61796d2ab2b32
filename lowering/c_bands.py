"""Band storage for the C back end: scratch values computed on a few lines only.

A split loop (``c_regions``) computes its values on the lines ``i_p - i_q == k`` only.
In a full row-major array those points are scattered, one or two per row: a cache line
each, and a page each once rows are long. A scratch value of such a loop is stored as
bands instead: one vector per line, the line's points in order, indexed like the array
with axis ``q`` left out (``i_q`` is ``i_p - k`` there). Entries whose ``i_q`` would be
out of range are never written nor read.

The split loop runs only where its run-time check passed; otherwise the dense loop
writes the full array. So a band-stored value has both layouts, and ``flag`` (the
check) says which one holds:

- a split loop whose proof used the value includes ``flag`` in its own check, and reads
  the band of its line directly (``at``);
- any other reader chooses at run time (``read``): the band of the line the point is
  on, the constant off the lines, or the full array where the check failed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tidu.lowering.c_index import lin, strides
from tidu.lowering.c_regions import line_range, lines_loop


@dataclass(frozen=True)
class Band:
    name: str  # the bands: one vector of ``size`` elements per offset, one after another
    full: str  # the full array, written by the dense loop
    shape: tuple[int, ...]
    p: int
    q: int
    offsets: tuple[int, ...]  # sorted
    outside: str  # C literal: the value off the lines
    flag: str  # C condition: the split loop ran (the bands hold the value)

    @property
    def size(self) -> int:
        return math.prod(self.shape) // self.shape[self.q]

    def at(self, axes: Sequence[str], k: int) -> str:
        """The band element at the array index ``axes``, which is on line ``k``."""
        rest = [a for d, a in enumerate(axes) if d != self.q]
        sizes = [n for d, n in enumerate(self.shape) if d != self.q]
        return f"{self.name}[{lin(list(zip(strides(sizes), rest, strict=True)), self.offsets.index(k) * self.size)}]"

    def read(self, axes: Sequence[str], offset: str) -> str:
        """The element at ``axes`` (flat ``offset`` in the full array), on any line or off them."""
        line = f"({axes[self.p]}) - ({axes[self.q]})"
        expr = self.outside
        for k in reversed(self.offsets):
            expr = f"({line} == {k} ? {self.at(axes, k)} : {expr})"
        return f"({self.flag} ? {expr} : {self.full}[{offset}])"

    def all_finite(self, var: str, outside_finite: bool) -> list[str]:
        """Statements setting ``var`` (declared, 1) to 0 unless every element is finite."""
        names = tuple(f"i{d}" for d in range(len(self.shape)))
        lines = [f"    if ({self.flag}) {{"]
        on = 0
        for k in self.offsets:
            lo, hi = line_range(k, self.shape[self.p], self.shape[self.q])
            on += max(0, hi - lo) * self.size // self.shape[self.p]

        def check(k: int, indent: str) -> list[str]:
            x = self.at(names, k)
            return [f"{indent}{var} &= {x} - {x} == 0;"]
        lines += lines_loop(self.shape, self.p, self.q, self.offsets, 2, check)
        if not outside_finite and on < math.prod(self.shape):  # some point off the lines
            lines.append(f"        {var} = 0;")
        x = f"{self.full}[i]"
        lines += ["    } else {",
                  f"        for (int64_t i = 0; i < {math.prod(self.shape)}; i++) {var} &= {x} - {x} == 0;",
                  "    }"]
        return lines


__all__ = ["Band"]
