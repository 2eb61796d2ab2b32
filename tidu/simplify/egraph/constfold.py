"""Constants as the e-graph loads them, on the collected DAG, before the negation pass
and prematch.

Ingest folds an op whose operands are all small constants (``extract.fold_node``) and
loads a splat constant as its value and type, so two splats of one value are one term.
AD leaves both behind: ops of constants (the gradient's seed 1 broadcast, reshaped, or
multiplied by a constant factor of the function) and equal constants made apart. The first
kept graphs from the shortcut past egglog (``prematch`` does not mirror what ingest
folds) and hid identities from the negation pass (``broadcast(1) * x`` is ``x`` once the
broadcast is a constant one); with the second, ``a * c + a * c'`` is ``x + x`` only in
the e-graph, where the doubling rules then run. Doing both first, with the same kernels
and size limits, gives the passes before the e-graph the nodes it would load.
"""

from __future__ import annotations

from tidu.core.graph import MNode
from tidu.core.keys import Attrs, Literal
from tidu.simplify.dag import Collected
from tidu.simplify.egraph.extract import Evaluate, fold_node
from tidu.simplify.egraph.ingest import SPLAT_PRESERVING, splat_f64


def fold_constants(dag: Collected, evaluate: Evaluate | None) -> Collected:
    """``dag`` with each op of small constants replaced by the constant it computes
    (``evaluate``: None folds nothing), equal constants made one node, and every node whose
    operands became one another's made one node too (in place; ``keep`` then marks the
    nodes the outputs still reach). Unchanged when there is nothing to do."""
    idents, avals, cons = dag.idents, dag.avals, dag.cons
    n = len(idents)
    is_const = bytearray(n)
    remap: list[int] | None = None  # node -> the node it is (once some node is another)
    moved = bytearray(n)  # remap[i] != i
    later: dict[int, int] = {}  # a later node -> the earlier node made equal to it
    terms: dict[tuple, int] = {}  # (aval, splat value or literal) -> the first constant of it
    folded = False
    for i, (op, attrs, ins, slot) in enumerate(idents):
        if op == "constant":
            value = attrs["value"]
        elif not ins:  # an input
            continue
        else:
            if remap is not None:
                if (moved[ins[0]] or moved[ins[1]]) if len(ins) == 2 else any([moved[k] for k in ins]):
                    ident = (op, attrs, tuple([remap[k] for k in ins]), slot)
                    j = cons.get(ident)
                    if j is not None and idents[j] == ident:
                        if j < i:  # congruent with an earlier node: that node
                            remap[i], moved[i], is_const[i] = j, 1, is_const[j]
                            continue
                        later[j] = i
                    cons[ident] = i
                    idents[i] = ident
                    ins = ident[2]
                elif later and i in later:  # an earlier node was made equal to this one
                    j = remap[later.pop(i)]  # (which may have become another since: a folded constant)
                    remap[i], moved[i], is_const[i] = j, 1, is_const[j]
                    continue
            if op == "select" and len(ins) == 3 and not slot:
                # select(p, x, x) is x (a rule), and so is select(true, x, y) (false: y), a
                # predicate of constants made one (``x == 0 and |0| == inf``): then the ops
                # that read it may fold
                p, a, b = ins
                to = a if a == b else -1
                if to < 0 and is_const[p] and (v := idents[p][1]["value"].splat()) is not None:
                    to = a if v else b
                if to >= 0 and avals[to] == avals[i]:
                    if remap is None:
                        remap = list(range(n))
                    remap[i], moved[i], is_const[i] = to, 1, is_const[to]
                    if cons.get(idents[i]) == i:  # (the node of its identity is the one it is)
                        cons[idents[i]] = to
                    continue
            if evaluate is None or slot or not is_const[ins[0]] or not all([is_const[k] for k in ins]):
                continue
            operand = idents[ins[0]][1]["value"]
            if op in SPLAT_PRESERVING and operand.splat() is not None:
                # a splat broadcast, reshaped or transposed is the splat of its shape, at any
                # size (one element stored; ingest gives its class that Const too)
                aval = avals[i]
                value = Literal.filled(operand.splat(), aval.shape, aval.dtype)
                const_attrs = Attrs(value=value)
            else:
                node = MNode(op, attrs, ins, avals[i], None)
                const = fold_node(node, [MNode("constant", idents[k][1], (), avals[k], None) for k in ins], evaluate)
                if const is None:
                    continue
                value, const_attrs = const.attrs["value"], const.attrs
            idents[i] = ident = ("constant", const_attrs, (), 0)
            cons.setdefault(ident, i)
            folded = True
        is_const[i] = 1
        f = splat_f64(value)
        # one term in the e-graph (a splat by its value and aval, another constant by its
        # literal): one node here, the first, which its identity then names, so that the
        # passes after this one meet no second node of the term (prematch would refuse it)
        first = terms.setdefault((avals[i], f if f is not None else value), i)
        if first != i:
            if remap is None:
                remap = list(range(n))
            remap[i], moved[i] = first, 1
            if cons.get(idents[i]) == i:
                cons[idents[i]] = first
    if remap is None and not folded:
        return dag
    if remap is not None:
        dag.outputs = [remap[o] for o in dag.outputs]
    live = bytearray(n)
    for i in [*dag.inputs, *dag.outputs]:
        live[i] = 1
    for i in range(n - 1, -1, -1):  # operands come before their users
        if live[i]:
            for k in idents[i][2]:
                live[k] = 1
    dag.keep = live
    ops = [idents[i][0] for i in range(n) if live[i]]
    dag.n_ops = len(ops) - ops.count(None) - ops.count("constant")
    dag.has_neg = "neg" in ops
    return dag


__all__ = ["fold_constants"]
