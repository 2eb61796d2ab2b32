"""Body: a closed function (a loop body, a branch) as an op attribute.

A control-flow op (``scan``, ``cond``, ``while``: tidu.ops.control) carries the functions
it applies as attributes. A ``Body`` is one such function traced once and simplified:
a ``MaterializedGraph`` whose inputs are its parameters, in order, and whose outputs are
its results. It is compared and hashed by the graph's structure, so identical bodies
are one attribute value and the op's key stays structural; it prints as a name made
from a checksum of its listing, the same in every process (listings are deterministic).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from typing import Any

from tidu.core.graph import MaterializedGraph
from tidu.core.keys import PRIMARY, Attrs, Aval, Derived, Input, ValueKey


class Body:
    """A traced function: ``graph``'s inputs are the parameters, its outputs the results."""

    __slots__ = ("graph", "in_avals", "out_avals", "label", "_name", "_signature", "_hash", "_keys")

    def __init__(self, graph: MaterializedGraph, label: str = "body") -> None:
        self.graph = graph
        self.in_avals: tuple[Aval, ...] = tuple(graph.nodes[i].aval for i in graph.inputs)
        self.out_avals: tuple[Aval, ...] = tuple(graph.nodes[o].aval for o in graph.outputs)
        self._signature = graph.signature()
        self._hash = hash(self._signature)
        self.label = label  # what the name starts with (``scan``, ``branch``, ...)
        self._name: str | None = None
        self._keys: list[ValueKey] | None = None

    @property
    def name(self) -> str:
        """``label_<checksum of the listing>``, made when first asked for: most bodies a
        build makes (traced, fused, stripped of dead carries) are never printed."""
        if self._name is None:
            self._name = f"{self.label}_{zlib.crc32(self.graph.listing(bodies=False).encode()) & 0xFFFFFFFF:08x}"
        return self._name

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple:
        # made again from the graph (the hash differs between processes); the name is a
        # checksum of the listing, so the label gives the same name back
        return Body, (self.graph, self.label)

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, Body) and self._hash == other._hash
                                 and self._signature == other._signature)

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def apply(self, args: Sequence[Any], step: Callable[[str, list[Any], Attrs], Any],
              only: Sequence[int] | None = None) -> list[Any]:
        """The results for parameters ``args``, node by node: ``step(op, operands, attrs)``
        gives a node's value (a kernel run on arrays, or an op emitted into a trace). With
        ``only`` (result positions), those results alone (None for the others), computing
        only the nodes they read."""
        graph = self.graph
        nodes = graph.nodes
        env: list[Any] = [None] * len(nodes)
        for i, a in zip(graph.inputs, args, strict=True):
            env[i] = a
        needed = [only is None] * len(nodes)
        if only is not None:
            stack = [graph.outputs[k] for k in only]
            while stack:
                i = stack.pop()
                if not needed[i]:
                    needed[i] = True
                    stack.extend(nodes[i].inputs)
        for i, n in enumerate(nodes):
            if needed[i] and n.op is not None:
                env[i] = step(n.op, [env[j] for j in n.inputs], n.attrs)
        chosen = range(len(graph.outputs)) if only is None else set(only)
        return [env[o] if k in chosen else None for k, o in enumerate(graph.outputs)]

    def terms(self) -> tuple[list[ValueKey], list[ValueKey]]:
        """The parameters and results as keys (the same terms for the same work), made once:
        the loop passes read them several times per body (fusion, dead results, hoisting)."""
        keys = self.node_terms()
        graph = self.graph
        return [keys[i] for i in graph.inputs], [keys[o] for o in graph.outputs]

    def node_terms(self) -> list[ValueKey]:
        """Every node's term, in the graph's order (operands first); made once (not to be
        changed by the caller)."""
        if self._keys is None:
            keys: list[ValueKey] = []
            append = keys.append
            for node in self.graph.nodes:
                if node.op is None:
                    append(Input(node.input, node.aval))  # type: ignore[arg-type]
                else:
                    ins = node.inputs
                    operands = (keys[ins[0]],) if len(ins) == 1 else tuple([keys[j] for j in ins])
                    append(Derived(node.op, node.attrs, operands, PRIMARY, 0, node.aval))
            self._keys = keys
        return self._keys

    @property
    def op_count(self) -> int:
        return self.graph.op_count

    def listing(self) -> str:
        """``name = { ... }``, then the bodies it applies (``MaterializedGraph.listing``)."""
        return f"{self.name} = " + self.graph.listing()


__all__ = ["Body"]
