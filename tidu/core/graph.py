"""MaterializedGraph: one concrete DAG, the compile-time object.

Produced by ``materialize_merge``. Nodes are in one topological order; each node is an
input (by ``InputKey``) or a single-output primitive application over earlier nodes.
Roles are gone here: a materialized graph is only evaluated, never transposed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

from tidu.core.keys import Attrs, Aval, InputKey


class MNode(NamedTuple):
    """One node: an input (``op`` None, ``input`` its key) or ``op[attrs](inputs)``, the
    operands by node index. A named tuple: graphs are made 10^4-10^5 nodes at a time, and
    ``tuple.__new__(MNode, (op, attrs, inputs, aval, None))`` (what the hot loops call)
    costs a third of a slotted dataclass's construction."""

    op: str | None  # None for an input
    attrs: Attrs
    inputs: tuple[int, ...]
    aval: Aval
    input: InputKey | None = None


@dataclass
class MaterializedGraph:
    nodes: list[MNode]
    inputs: list[int]  # node indices of the inputs, in the graph's input order
    outputs: list[int]  # node indices of the outputs
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def input_keys(self) -> list[InputKey]:
        return [self.nodes[i].input for i in self.inputs]  # type: ignore[misc]

    @property
    def op_count(self) -> int:
        ops = [n.op for n in self.nodes]  # counted in C: graphs have ~10^5 nodes
        return len(ops) - ops.count(None) - ops.count("constant")

    def op_histogram(self) -> Counter[str]:
        return Counter(n.op for n in self.nodes if n.op is not None)

    def signature(self) -> tuple:
        """Structural identity used as the compilation cache key."""
        return (
            tuple((n.op, n.attrs, n.inputs, n.aval, n.input) for n in self.nodes),
            tuple(self.inputs),
            tuple(self.outputs),
        )

    def listing(self, bodies: bool = True) -> str:
        """A jaxpr-like listing: one line per node, deterministic. The functions that
        control-flow ops apply (their ``Body`` attributes) follow as blocks of their own,
        each once, named as the ops name them (``bodies=False``: this graph's block only)."""
        names = {}
        lines = []
        ins = []
        for i in self.inputs:
            n = self.nodes[i]
            names[i] = f"%{i}"
            ins.append(f"%{i}:{n.aval} = {n.input}")
        lines.append("{ inputs " + ", ".join(ins))
        for i, n in enumerate(self.nodes):
            if n.op is None:
                continue
            names[i] = f"%{i}"
            args = " ".join(names[j] for j in n.inputs)
            attrs = f"[{n.attrs}]" if n.attrs else ""
            lines.append(f"  %{i}:{n.aval} = {n.op}{attrs} {args}".rstrip())
        lines.append("  return " + ", ".join(names[o] for o in self.outputs) + " }")
        if bodies:
            for body in self.bodies():
                lines.append(f"{body.name} = " + body.graph.listing(bodies=False))
        return "\n".join(lines)

    def bodies(self) -> list:
        """Every ``Body`` the graph's ops apply, nested ones included, each once, in the
        order they are first met."""
        found: dict[tuple, object] = {}  # by the body (hashed by its structure) and its label

        def visit(graph: MaterializedGraph) -> None:
            for n in graph.nodes:
                for _, value in n.attrs.items():
                    for v in value if isinstance(value, tuple) else (value,):
                        inner = getattr(v, "graph", None)
                        if isinstance(inner, MaterializedGraph) and (v, v.label) not in found:
                            found[v, v.label] = v
                            visit(inner)

        visit(self)
        return list(found.values())

    __str__ = listing

    def __repr__(self) -> str:
        ins = ", ".join(f"{self.nodes[i].input}:{self.nodes[i].aval}" for i in self.inputs)
        outs = ", ".join(str(self.nodes[o].aval) for o in self.outputs)
        return f"<MaterializedGraph: {self.op_count} ops; inputs ({ins}) -> outputs ({outs})>"

    def to_dot(self) -> str:
        """Graphviz source for the graph (inputs as boxes, outputs double-circled)."""
        out = ["digraph tidu {", "  rankdir=TB; node [fontname=monospace];"]
        outputs = set(self.outputs)
        for i, n in enumerate(self.nodes):
            if n.op is None:
                label, shape = f"{n.input}\\n{n.aval}", "box"
            else:
                attrs = f"\\n{n.attrs}" if n.attrs else ""
                label, shape = f"{n.op}{attrs}\\n{n.aval}", "ellipse"
            if i in outputs:
                shape = "doublecircle"
            label = label.replace('"', '\\"')
            out.append(f'  n{i} [label="{label}", shape={shape}];')
            for j in n.inputs:
                out.append(f"  n{j} -> n{i};")
        out.append("}")
        return "\n".join(out)
