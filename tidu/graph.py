"""MaterializedGraph: one concrete DAG, the compile-time object.

Produced by ``materialize_merge``. Nodes are in one topological order; each node is an
input (by ``InputKey``) or a single-output primitive application over earlier nodes.
Roles are gone here: a materialized graph is only evaluated, never transposed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields

from .keys import Attrs, Aval, InputKey


@dataclass(frozen=True, slots=True)
class MNode:
    op: str | None  # None for an input
    attrs: Attrs
    inputs: tuple[int, ...]
    aval: Aval
    input: InputKey | None = None


def _slot_init() -> Callable[..., None]:
    """MNode's __init__, writing the slots directly: the generated __init__ of a frozen
    dataclass assigns each field through object.__setattr__, which takes twice as long,
    and graphs are built 10^5 nodes at a time. Same signature, same frozen instances."""
    set_op, set_attrs, set_inputs, set_aval, set_input = (
        MNode.__dict__[f.name].__set__ for f in fields(MNode))

    def __init__(self: MNode, op: str | None, attrs: Attrs, inputs: tuple[int, ...],
                 aval: Aval, input: InputKey | None = None) -> None:
        set_op(self, op)
        set_attrs(self, attrs)
        set_inputs(self, inputs)
        set_aval(self, aval)
        set_input(self, input)

    return __init__


MNode.__init__ = _slot_init()  # type: ignore[method-assign]


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

    def listing(self) -> str:
        """A jaxpr-like listing: one line per node, deterministic."""
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
        return "\n".join(lines)

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
