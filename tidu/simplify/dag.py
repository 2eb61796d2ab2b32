"""collect: the logical DAG reachable from some outputs, hash-consed by evaluation identity,
as one ``Collected`` (the first step of ``materialize_merge``; the e-graph reads it)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import compress
from operator import itemgetter

from tidu.core.graph import MaterializedGraph, MNode
from tidu.core.keys import NO_ATTRS, Aval, InputKey, ValueKey, input_key
from tidu.ops.catalog import INTERNAL
from tidu.trace.resolve import ResolvedView


class Collected:
    """The hash-consed DAG as collect's walk leaves it, before any ``MNode`` is made: the
    negation pass reads and extends it, and ingest (or ``graph``) makes each node it
    keeps once (graphs have ~10^4-10^5 nodes, and every pass over them costs ~1 µs a node).

    Node ``i`` is ``idents[i]``, its hash-cons key ``(op, attrs, operands, slot)``, an
    input's ``(None, InputKey, (), aval)``, with aval ``avals[i]``; ``cons`` maps each key
    to its index (dict order is node order). ``keep`` marks the nodes the DAG has (None:
    all of them), renumbered in order when nodes are made. ``n_ops`` counts the nodes
    that are ops other than constants, ``has_neg`` says whether one is a ``neg``.
    ``commuted_merged``: no kept ``add`` or ``mul`` has the operands of another swapped
    (the negation pass merged them: ``tidu.simplify.egraph.negation``)."""

    __slots__ = ("avals", "commuted_merged", "cons", "has_neg", "idents", "inputs", "keep", "n_ops", "outputs")

    def __init__(self, cons: dict[tuple, int], avals: list[Aval], inputs: list[int], outputs: list[int],
                 idents: list[tuple] | None = None) -> None:
        self.cons, self.avals, self.inputs, self.outputs = cons, avals, inputs, outputs
        self.idents: list[tuple] = list(cons) if idents is None else idents
        self.keep: bytearray | None = None
        self.commuted_merged = False
        ops = list(map(itemgetter(0), self.idents))  # counted in C
        self.n_ops = len(ops) - ops.count(None) - ops.count("constant")
        self.has_neg = "neg" in ops

    def __len__(self) -> int:
        return len(self.idents)

    @classmethod
    def of(cls, graph: MaterializedGraph) -> Collected:
        """``graph``'s nodes as a Collected (identities without slots: an MNode has none).
        A graph that is not hash-consed keeps its duplicates; ``cons`` has the last."""
        idents = [(n.op, n.attrs, n.inputs, 0) if n.op is not None else (None, n.input, (), n.aval)
                  for n in graph.nodes]
        cons = {ident: i for i, ident in enumerate(idents)}
        return cls(cons, [n.aval for n in graph.nodes], list(graph.inputs), list(graph.outputs), idents)

    def graph(self) -> MaterializedGraph:
        """The DAG made of MNodes (the kept nodes, renumbered in order)."""
        idents, avals, keep = self.idents, self.avals, self.keep
        new = tuple.__new__
        if keep is None:
            nodes = [new(MNode, (op, attrs, ins, aval, None)) if op is not None
                     else MNode(None, NO_ATTRS, (), aval, attrs)
                     for (op, attrs, ins, _), aval in zip(idents, avals, strict=True)]
            return MaterializedGraph(nodes, list(self.inputs), list(self.outputs))
        index = [0] * len(idents)
        nodes = []
        add = nodes.append
        for j in compress(range(len(idents)), keep):
            op, attrs, ins, _ = idents[j]
            index[j] = len(nodes)
            if op is None:
                add(MNode(None, NO_ATTRS, (), avals[j], attrs))
            else:
                add(new(MNode, (op, attrs, tuple([index[k] for k in ins]), avals[j], None)))
        return MaterializedGraph(nodes, [index[i] for i in self.inputs], [index[o] for o in self.outputs])


def collect(
    view: ResolvedView,
    outputs: Sequence[ValueKey],
    inputs: Iterable[ValueKey | InputKey | str] | None = None,
) -> MaterializedGraph:
    """The plain hash-consed DAG reachable from ``outputs`` (no rewriting)."""
    return collect_dag(view, outputs, inputs).graph()


def collect_dag(
    view: ResolvedView,
    outputs: Sequence[ValueKey],
    inputs: Iterable[ValueKey | InputKey | str] | None = None,
    keep_marks: bool = False,
) -> Collected:
    """``collect``'s DAG before its nodes are made (see ``Collected``). ``keep_marks``:
    ``stop_gradient`` and the custom calls stay (a control-flow body, differentiated
    after it is made, needs them; ``strip_marks`` removes them from a program's bodies)."""
    outputs = list(outputs)
    for o in outputs:
        if not isinstance(o, ValueKey):
            raise TypeError(f"outputs must be ValueKeys, got {type(o).__name__}")
    order = view.topo_order(outputs)
    avals: list[Aval] = []
    node_of: dict[ValueKey, int] = {}
    hashcons: dict[tuple, int] = {}
    input_nodes: dict[InputKey, int] = {}

    def add_input(k: InputKey, aval: Aval) -> int:
        i = hashcons.setdefault((None, k, (), aval), len(avals))
        if i == len(avals):
            avals.append(aval)
        return i

    if inputs is not None:
        inputs = list(inputs)
        declared = [k.input if isinstance(k, ValueKey) else input_key(k) for k in inputs]
        if any(isinstance(k, ValueKey) and k.input is None for k in inputs):
            raise TypeError("inputs= takes input keys or Input(...) value keys, not derived values")
        free = {k.input: k for k in order if k.input is not None and view.alias_of(k) is None}
        missing = [str(k) for k in free if k not in set(declared)]
        if missing:
            raise ValueError(f"the outputs depend on input(s) {', '.join(missing)} not listed in inputs=")
    stripped = False
    setdefault = hashcons.setdefault
    add_aval = avals.append
    for key in order:
        if key.input is None:  # the hot path, inlined: ~10^5 values
            internal = INTERNAL.get(key.op)
            if internal is not None and internal.strip is not None and not keep_marks:
                # stop_gradient, custom calls: their value is an operand's (control-flow ops stay)
                node_of[key] = node_of[key.inputs[internal.strip(key)]]
                stripped = True
                continue
            ins = key.inputs
            if len(ins) == 2:
                args: tuple[int, ...] = (node_of[ins[0]], node_of[ins[1]])
            elif len(ins) == 1:
                args = (node_of[ins[0]],)
            else:
                args = tuple([node_of[k] for k in ins])
            n = len(avals)
            i = setdefault((key.op, key.attrs, args, key.slot), n)  # one hash of the identity
            if i == n:
                add_aval(key.aval)
        else:
            target = view.alias_of(key)
            if target is not None:
                node_of[key] = node_of[target]
                continue
            i = add_input(key.input, key.aval)
            input_nodes.setdefault(key.input, i)
        node_of[key] = i
    if inputs is not None:
        input_list = []
        for k, given in zip(declared, inputs, strict=True):
            if k not in input_nodes:
                if not isinstance(given, ValueKey):
                    raise ValueError(f"input {k} is not used by the outputs, so its aval is unknown; "
                                     "pass its Input(...) value key instead of its name")
                input_nodes[k] = add_input(k, given.aval)
            input_list.append(input_nodes[k])
    else:
        input_list = list(input_nodes.values())
    outs = [node_of[o] for o in outputs]
    dag = Collected(hashcons, avals, input_list, outs)
    if stripped:  # the operands only a custom call's mark used are dead now
        dag = _live(dag)
    return dag


def _live(dag: Collected) -> Collected:
    """The nodes reachable from the outputs (and every input), renumbered in order."""
    idents = dag.idents
    live = bytearray(len(idents))
    for i in [*dag.inputs, *dag.outputs]:
        live[i] = 1
    for i in range(len(idents) - 1, -1, -1):  # operands come before their users
        if live[i]:
            for a in idents[i][2]:
                live[a] = 1
    new = [-1] * len(idents)
    cons: dict[tuple, int] = {}
    avals: list[Aval] = []
    for i, (op, attrs, ins, slot) in enumerate(idents):
        if live[i]:
            new[i] = len(avals)
            cons[(op, attrs, tuple([new[a] for a in ins]), slot)] = len(avals)
            avals.append(dag.avals[i])
    return Collected(cons, avals, [new[i] for i in dag.inputs], [new[o] for o in dag.outputs])
