"""Pictures and formulas of graphs for notebooks: SVG through Graphviz, LaTeX through SymPy.

Both are optional extras. SVG needs the ``graphviz`` Python package and Graphviz's ``dot``
program; without them (or for graphs too big to draw legibly) a notebook shows the text
listing instead. LaTeX needs only SymPy, which tidu depends on.
"""

from __future__ import annotations

import shutil
from typing import Any

from tidu.core.graph import MaterializedGraph
from tidu.ops.graph_sympy import to_sympy

# Graphs above these sizes are shown as listings: a drawing of thousands of nodes is
# unreadable and slow to lay out, a formula of thousands of ops likewise.
MAX_SVG_NODES = 400
MAX_LATEX_OPS = 300


class DisplayError(RuntimeError):
    """A picture or formula cannot be made (a missing program, a graph too big)."""


def dot_available() -> bool:
    """Whether Graphviz can lay out graphs here: the ``graphviz`` package and ``dot``."""
    try:
        import graphviz  # noqa: F401
    except ImportError:
        return False
    return shutil.which("dot") is not None


def svg(graph: MaterializedGraph) -> str:
    """The graph drawn by Graphviz, as SVG text; ``DisplayError`` says what is missing."""
    try:
        import graphviz
    except ImportError:
        raise DisplayError("drawing a graph needs the graphviz package: pip install graphviz "
                           "(and Graphviz's dot program); str(view) is the text listing") from None
    if shutil.which("dot") is None:
        raise DisplayError("drawing a graph needs Graphviz's dot program on PATH (apt-get install "
                           "graphviz, brew install graphviz or conda install graphviz); "
                           "str(view) is the text listing")
    return graphviz.Source(graph.to_dot()).pipe(format="svg", encoding="utf-8")


def notebook_svg(graph: MaterializedGraph) -> str | None:
    """SVG for a notebook, or None (the notebook then shows the listing) when Graphviz is
    missing or the graph has more than ``MAX_SVG_NODES`` nodes."""
    if len(graph.nodes) > MAX_SVG_NODES or not dot_available():
        return None
    return svg(graph)


class Formula:
    """A graph's outputs as SymPy expressions: ``str`` is SymPy's text, a notebook shows
    LaTeX, ``.exprs`` are the expressions themselves."""

    def __init__(self, exprs: list[Any]) -> None:
        self.exprs = exprs

    @classmethod
    def of(cls, graph: MaterializedGraph, symbols: Any = None) -> Formula:
        if graph.op_count > MAX_LATEX_OPS:
            raise DisplayError(f"the graph has {graph.op_count} ops; formulas are made for at most "
                               f"{MAX_LATEX_OPS} (tidu.transforms.display.MAX_LATEX_OPS): read its listing instead")
        return cls(to_sympy(graph, symbols))

    def to_latex(self) -> str:
        """One expression as is; several as an ``aligned`` block, ``out_i = ...``."""
        import sympy

        if len(self.exprs) == 1:
            return sympy.latex(self.exprs[0])
        rows = [rf"\mathrm{{out}}_{{{i}}} &= {sympy.latex(e)}" for i, e in enumerate(self.exprs)]
        return r"\begin{aligned}" + r" \\ ".join(rows) + r"\end{aligned}"

    def _repr_latex_(self) -> str:
        return f"$${self.to_latex()}$$"

    def __str__(self) -> str:
        return "\n".join(map(str, self.exprs)) if len(self.exprs) != 1 else str(self.exprs[0])

    def __repr__(self) -> str:
        return f"Formula({self})"


__all__ = ["MAX_LATEX_OPS", "MAX_SVG_NODES", "DisplayError", "Formula", "dot_available", "notebook_svg", "svg"]
