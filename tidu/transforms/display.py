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


def expand(replacements: list[tuple[Any, Any]], exprs: list[Any]) -> list[Any]:
    """The trees of ``exprs``: every name of ``replacements`` (``sympy.cse``'s form)
    replaced by what it stands for (which can be exponentially larger)."""
    full: dict[Any, Any] = {}
    for s, e in replacements:
        full[s] = e.xreplace(full)
    return [e.xreplace(full) for e in exprs]


def aligned_latex(replacements: list[tuple[Any, Any]], rows: list[tuple[str, Any]]) -> str:
    """LaTeX of named subexpressions then labelled results: one ``aligned`` block
    (``x_{0} &= ...``), or the single result alone when nothing is named."""
    import sympy

    if not replacements and len(rows) == 1:
        return sympy.latex(rows[0][1])
    lines = [rf"{sympy.latex(s)} &= {sympy.latex(e)}" for s, e in replacements]
    lines += [rf"{label} &= {sympy.latex(e)}" for label, e in rows]
    return r"\begin{aligned}" + r" \\ ".join(lines) + r"\end{aligned}"


class Formula:
    """A graph's outputs as SymPy, shared subexpressions named as ``sympy.cse`` names
    them (so the text is never larger than the graph): ``str`` is the ``x0 = ...`` lines
    then the outputs, a notebook shows LaTeX (an ``aligned`` block), ``.replacements``
    and ``.outputs`` are the named form, ``.exprs`` the outputs written out in full."""

    def __init__(self, replacements: list[tuple[Any, Any]], outputs: list[Any]) -> None:
        self.replacements = replacements
        self.outputs = outputs

    @classmethod
    def of(cls, graph: MaterializedGraph, symbols: Any = None) -> Formula:
        if graph.op_count > MAX_LATEX_OPS:
            raise DisplayError(f"the graph has {graph.op_count} ops; formulas are made for at most "
                               f"{MAX_LATEX_OPS} (tidu.transforms.display.MAX_LATEX_OPS): read its listing instead")
        return cls(*to_sympy(graph, symbols, cse=True))

    @property
    def exprs(self) -> list[Any]:
        return expand(self.replacements, self.outputs)

    def to_latex(self) -> str:
        """One expression as is; named subexpressions and several outputs as an
        ``aligned`` block (``x_{0} &= ...``, ``out_i = ...``)."""
        if len(self.outputs) == 1:
            rows = [(r"\mathrm{out}", self.outputs[0])]
        else:
            rows = [(rf"\mathrm{{out}}_{{{i}}}", e) for i, e in enumerate(self.outputs)]
        return aligned_latex(self.replacements, rows)

    def _repr_latex_(self) -> str:
        return f"$${self.to_latex()}$$"

    def __str__(self) -> str:
        lines = [f"{s} = {e}" for s, e in self.replacements]
        if len(self.outputs) == 1 and not lines:
            return str(self.outputs[0])
        return "\n".join(lines + [str(e) for e in self.outputs])

    def __repr__(self) -> str:
        return f"Formula({self})"


__all__ = ["MAX_LATEX_OPS", "MAX_SVG_NODES", "DisplayError", "Formula", "aligned_latex", "dot_available", "expand",
           "notebook_svg", "svg"]
