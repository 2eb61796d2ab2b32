"""Negations pushed outward in one pass, before the e-graph sees a graph.

The sign rules of arithmetic.rules (``(-x) * y -> -(x * y)``, ``x + (-y) -> x - y``,
``(-x) - y -> -(x + y)``...) move a negation one level per saturation iteration, and on
a large e-graph each iteration runs under a match limit (``saturate.GUARD_FROM``): a rule
with more matches than the limit waits. The gradient of the 1000-op chain needed 12
iterations over a 5k-node e-graph and stopped at the iteration budget. This pass applies
the same identities (exact in IEEE and in modular integer arithmetic: negation commutes
with rounding; only a zero's sign may change, as with the rules) bottom-up in linear
time. Each value becomes a sign and a negation-free base: ``neg`` flips the sign,
``mul`` and ``div`` multiply the signs of their operands, ``add`` and ``sub`` pick
``add`` or ``sub`` (operands swapped if need be) so that only an all-negative sum keeps
a sign; any other op takes its operands with a ``neg`` written where their sign is
negative.

The pass applies a few more of the exact rules' identities that AD output keeps
hitting: a product by a constant one is its other operand and one by minus one its
negation (``x * 1 -> x``, ``x * -1 -> -x``, ``x / 1``, ``x / -1``); ``y * x`` met after
``x * y`` is that node (``y + x`` too); and a doubling may be written ``2 * x`` (``x + x
-> 2 * x`` and ``x * 2 -> x + x`` are rules; ``2 * x`` is the form none rewrites; see
below). The seed of a gradient (``1 * ct``) then leaves no ``mul`` behind, and the
chain's gradient, grad(grad) and Hessian give the rules nothing to match: the e-graph
is not built for them (tidu.simplify.egraph.prematch). Where it is, it starts where the rules
would have ended (the chain's gradient saturated in 2 iterations instead of stopping at
12).

Every graph is replaced by its pushed form (``push``; kept only if it has no more ops,
or, past ``DOUBLING_FROM`` nodes, at most 1/``PUSH_SLACK`` more). Pushing can write more
negations than it removes (a negative value read by ops that cannot take its sign), and a
graph left with its negations goes to the e-graph, whose sign rules then run over every
node: some Hessians of bench/program_family.py's trig programs were a few ops smaller
before pushing, and their builds went through many e-graph iterations at several times
the cost; their pushed forms give the rules nothing to match, with a few ops more than
the e-graph's extraction (docs/benchmarks.md).
Small graphs used to keep their nodes and get the pushed forms alongside, as unions, for
extraction to pick per use; since commuted sums merge (``rewrite merge:``) and
extraction starts from first derivations, replacing them gives fewer ops in all on
bench/simplify.py (real Hessians 593 against 618, Lennard-Jones' 30 against 50; exact
Hessians 1159 against 1145, real gradients 433 against 434, a few functions 1 to 9 ops
more) on a third of the e-nodes: the fixed-cost Hessian's e-graph has 28, not 84, and
its e-graph phase costs 1.2 ms instead of 1.9. Doublings become ``2 * x`` where that
matters (``push(doubling=True)``): on large graphs, past ``DOUBLING_FROM`` nodes (no
rule rewrites the form, so the e-graph may not be needed at all), and in the real
semantics (its normal forms collect it: kept as ``x + x``, bench/simplify.py's real
gradients have 450 ops, not 433). An exact small graph keeps ``x + x``, and its
``x * 2`` becomes ``x + x`` as extraction would write it: as many ops, one node fewer,
and nothing left for ``x * 2 -> x + x`` to match (a user's ``2 * x`` sent a small
Hessian to the e-graph for that rule alone).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import compress, repeat
from operator import eq, itemgetter

from tidu.core.graph import MaterializedGraph
from tidu.core.keys import NO_ATTRS, Attrs, Aval, Literal
from tidu.ops.catalog import Catalog
from tidu.ops.dsl.ast import Call, Var
from tidu.ops.dsl.guards import is_identity
from tidu.simplify.dag import Collected
from tidu.simplify.egraph.ingest import COMMUTATIVE, splat_f64

_PRODUCTS = frozenset(("mul", "div"))
# one-operand ops whose identity form structure.rules rewrites to the operand (``identity``)
_STRUCTURAL = frozenset(("convert", "broadcast_in_dim", "reshape", "transpose", "reverse", "reduce_sum", "reduce_max",
                         "reduce_prod", "slice"))
DOUBLING_FROM = 512  # nodes: an exact graph this large gets its doublings as 2 * x
PUSH_SLACK = 64  # a graph this large takes its pushed form with up to 1/PUSH_SLACK more ops


def push_negations(graph: MaterializedGraph) -> MaterializedGraph:
    """``graph`` with its negations moved outward (see the module docstring), or
    ``graph`` itself when it has no ``neg`` or the pushed graph is not smaller."""
    dag = push(Collected.of(graph))
    return graph if dag.keep is None else dag.graph()


def push(dag: Collected, doubling: bool = True, zeros: bool = False,
         symmetric: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())) -> Collected:
    """``push_negations`` on a Collected DAG, in place: the pushed nodes are appended and
    ``keep`` and ``outputs`` say which nodes the pushed graph has. Left as it was when it
    has no ``neg`` or the pushed graph is not smaller. ``doubling``: write ``x + x`` and
    ``x * 2`` as ``2 * x``. ``zeros``: ``x + 0``, ``0 + x`` and ``x - 0`` are ``x``, ``0 - x``
    is ``-x`` (for the exact semantics: the real normal forms collect sums themselves).
    ``symmetric``: the odd and the even one-operand ops (``symmetric_ops``), which take a
    negative operand's base, their value negative (odd) or not (even)."""
    unit = _units(dag, doubling, zeros)
    if not dag.has_neg and not any(unit) and _STRUCTURAL.isdisjoint(map(itemgetter(0), dag.idents)):
        return dag
    n = len(dag)
    signed = _push(dag, dag.outputs, unit, doubling, symmetric)
    outputs = [signed[o] for o in dag.outputs]
    keep, n_ops = _keep(dag, outputs)
    if n_ops <= dag.n_ops + (dag.n_ops // PUSH_SLACK if n >= DOUBLING_FROM else 0):
        dag.keep, dag.outputs = keep, outputs
        dag.commuted_merged = True  # _push met every add and mul
    else:
        for ident in dag.idents[n:]:
            del dag.cons[ident]
        del dag.idents[n:], dag.avals[n:]
    return dag


def symmetric_ops(cat: Catalog, semantics: str) -> tuple[frozenset[str], frozenset[str]]:
    """The odd and the even one-operand ops of ``cat`` under ``semantics``: those with an
    unguarded rewrite ``f(-x) -> -f(x)`` (``tanh``, ``sin``, ``erf`` in the real semantics:
    IEEE leaves their symmetry to the math library) or ``f(-x) -> f(x)`` (``abs`` in both,
    ``cos`` in the real semantics). Made once per catalog and semantics."""
    key = (id(cat), semantics)
    hit = _SYMMETRIC.get(key)
    if hit is None or hit[0] is not cat:
        odd: set[str] = set()
        even: set[str] = set()
        for rw in cat.all_rewrites():
            if (semantics == "exact" and rw.semantics != "exact") or rw.guards:
                continue
            lhs, rhs = rw.lhs, rw.rhs
            if not (isinstance(lhs, Call) and not lhs.attrs and len(lhs.args) == 1
                    and isinstance(neg := lhs.args[0], Call) and neg.fn == "neg" and len(neg.args) == 1
                    and isinstance(x := neg.args[0], Var)):
                continue
            if _applied(rhs, lhs.fn, x.name):
                even.add(lhs.fn)
            elif isinstance(rhs, Call) and rhs.fn == "neg" and len(rhs.args) == 1 and _applied(rhs.args[0], lhs.fn,
                                                                                               x.name):
                odd.add(lhs.fn)
        hit = _SYMMETRIC[key] = (cat, (frozenset(odd), frozenset(even)))
    return hit[1]


def _applied(e: object, fn: str, var: str) -> bool:
    """Whether rule expression ``e`` is ``fn(var)`` (no attributes)."""
    return (isinstance(e, Call) and e.fn == fn and not e.attrs and len(e.args) == 1
            and isinstance(e.args[0], Var) and e.args[0].name == var)


_SYMMETRIC: dict[tuple[int, str], tuple[Catalog, tuple[frozenset[str], frozenset[str]]]] = {}


def _push(dag: Collected, signed_of: Iterable[int], unit: bytearray, doubling: bool,
          symmetric: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())) -> dict[int, int]:
    """Push the negations of ``dag``: its pushed nodes are appended to it (hash-consed
    with its own), and for each node of ``signed_of`` the index of its pushed form
    (``neg`` of a base, or a base) is returned. A node whose operands are their own
    pushed forms is its own (most nodes: no look-up for them). The ``neg`` nodes of the
    pushed forms come last, in the order of the first node (by index) that needs each."""
    idents, avals, cons = dag.idents, dag.avals, dag.cons
    n = len(idents)
    negative = [False] * n  # the value is -base
    base = list(range(n))  # index of its negation-free base
    moved = bytearray(n)  # negative, or base is another node
    setdefault = cons.setdefault

    def node(ident: tuple, aval: object) -> int:
        j = setdefault(ident, len(idents))  # one hash of the identity
        if j == len(idents):
            idents.append(ident)
            avals.append(aval)
        return j

    def signed(k: int) -> int:
        b = base[k]
        return node(("neg", NO_ATTRS, (b,), 0), avals[b]) if negative[k] else b

    odd, even = symmetric
    twos_of: dict[Aval, int | None] = {}
    commuted: dict[tuple, int] = {}  # (op, attrs, lower, higher, slot) -> the add or mul met first

    def two_of(aval: Aval) -> int | None:
        """The node of the constant 2 of ``aval`` (inexact avals only), made once."""
        if aval not in twos_of:
            ok = aval.dtype.startswith(("float", "complex"))  # a splat: one element, any size
            twos_of[aval] = node(("constant", Attrs(value=Literal.filled(2, aval.shape, aval.dtype)),
                                  (), 0), aval) if ok else None
        return twos_of[aval]

    for i, (op, attrs, ins, slot) in enumerate(idents[:n]):
        if op is None or not ins:  # an input or a constant: kept as it is
            continue
        if op == "neg":
            x = ins[0]
            negative[i], base[i] = not negative[x], base[x]
            moved[i] = 1
            continue
        if len(ins) == 2:
            x, y = ins
            ux, uy = unit[x], unit[y]
            if not (moved[x] or moved[y] or ((0 < ux < 4 or 0 < uy < 4) and op in _PRODUCTS)
                    or ((ux == 4 or uy == 4) and (op == "add" or op == "sub"))
                    or ((ux == 5 or uy == 5) and op == "mul")
                    or (doubling and x == y and op == "add")):
                if op in COMMUTATIVE:  # y*x after x*y is x*y (as ingest loads it)
                    a = None if attrs is NO_ATTRS else attrs
                    first = commuted.setdefault((op, a, y, x, slot) if y < x else (op, a, x, y, slot), i)
                    if first != i:
                        base[i], moved[i] = first, 1
                continue
        elif len(ins) == 1 and op in _STRUCTURAL:
            # an identity (reshape to its operand's shape, ...) is its operand, and a
            # reshape of a reshape one reshape: structure.rules' exact rewrites
            x = ins[0]
            if not slot and avals[x].shape == avals[i].shape and is_identity(op, attrs, avals[x], avals[i]):
                negative[i], base[i], moved[i] = negative[x], base[x], 1
                continue
            inner = base[x]
            if op != "reshape" or slot or idents[inner][0] != "reshape":
                if not moved[x]:
                    continue
            else:
                y = idents[inner][2][0]  # a pushed form: its operands are
                negative[i] = negative[x]
                if avals[y] == avals[i]:
                    negative[i] = negative[i] is not (idents[y][0] == "neg")
                    base[i] = idents[y][2][0] if idents[y][0] == "neg" else y
                else:
                    base[i] = node((op, attrs, (y,), 0), avals[i])
                moved[i] = 1
                continue
        elif not any([moved[k] for k in ins]):
            continue
        moved[i] = 1
        if len(ins) == 1 and (op in odd or op in even):  # f(-x) is -f(x) (odd) or f(x) (even)
            x = ins[0]
            negative[i] = negative[x] and op in odd
            base[i] = node((op, attrs, (base[x],), slot), avals[i])
        elif op == "mul" and (unit[y] == 5 or unit[x] == 5) and avals[other := x if unit[y] == 5 else y] == avals[i] \
                and idents[other][0] != "constant":
            # without ``doubling``, x * 2 is x + x (the rule ``x * 2 -> x + x``; extraction
            # keeps the sum, which needs no constant; a product of constants folds)
            negative[i] = negative[other]
            base[i] = node(("add", NO_ATTRS, (base[other], base[other]), slot), avals[i])
        elif op in _PRODUCTS:
            # x * 1, 1 * x, x / 1 are x; with -1 they are -x (the rules' identities);
            # x * 2 is 2 * x, the form of doubling no exact rule rewrites
            one = y if 0 < unit[y] < 4 else x if 0 < unit[x] < 4 and op == "mul" else -1
            other = x if one == y else y
            if one >= 0 and avals[other] == avals[i] and (unit[one] != 3 or op == "mul"):
                if unit[one] == 3:
                    negative[i] = negative[other]
                    base[i] = node((op, attrs, (one, base[other]), slot), avals[i])
                else:
                    negative[i], base[i] = negative[other] is not (unit[one] == 2), base[other]
            else:
                negative[i] = negative[x] is not negative[y]
                base[i] = node((op, attrs, (base[x], base[y]), slot), avals[i])
        elif (op == "add" or op == "sub") and unit[y] == 4 and avals[x] == avals[i]:
            negative[i], base[i] = negative[x], base[x]  # x + 0 and x - 0 are x (the rules)
        elif (op == "add" or op == "sub") and unit[x] == 4 and avals[y] == avals[i]:
            # 0 + y is y, 0 - y is -y (the rules: only a zero's sign may change)
            negative[i], base[i] = negative[y] is not (op == "sub"), base[y]
        elif op == "add" or op == "sub":
            nx, ny = negative[x], negative[y] is (op == "add")  # ny: y enters with a minus
            bx, by = base[x], base[y]
            two = two_of(avals[i]) if doubling and bx == by and nx is ny else None
            if two is not None:  # x + x is 2 * x (a rule of arithmetic.rules); -x - x, x - (-x) too
                negative[i] = nx
                base[i] = node(("mul", NO_ATTRS, (two, bx), slot), avals[i])
            elif not nx:  # bx + by or bx - by
                base[i] = node(("sub" if ny else "add", attrs, (bx, by), slot), avals[i])
            elif ny:  # -bx - by = -(bx + by)
                negative[i] = True
                base[i] = node(("add", attrs, (bx, by), slot), avals[i])
            else:  # -bx + by = by - bx
                base[i] = node(("sub", attrs, (by, bx), slot), avals[i])
        else:
            base[i] = node((op, attrs, tuple([signed(k) for k in ins]), slot), avals[i])
        b = base[i]
        bop, battrs, bins, bslot = idents[b]
        if bop in COMMUTATIVE and len(bins) == 2:
            a = None if battrs is NO_ATTRS else battrs
            u, v = bins
            base[i] = commuted.setdefault((bop, a, v, u, bslot) if v < u else (bop, a, u, v, bslot), b)
        if not negative[i] and base[i] == i:
            moved[i] = 0
    wanted = {base[i] for i in signed_of if negative[i]}
    for i in range(n):
        if negative[i] and base[i] in wanted:
            signed(i)
    return {i: signed(i) for i in signed_of}


def _units(dag: Collected, doubling: bool, zeros: bool = False) -> bytearray:
    """1 at each constant that is 1 everywhere, 2 at each that is -1, at each that is 2
    3 with ``doubling`` (``2 * x``) and 5 without (``x + x``), and with ``zeros`` 4 at each
    that is 0 (as the rules' ``Const`` patterns see them: ``ingest.splat_f64``; -0 too,
    as for them). Products use 1-3 and 5, sums 4."""
    idents = dag.idents
    unit = bytearray(len(idents))
    for i in compress(range(len(idents)), map(eq, repeat("constant"), map(itemgetter(0), idents))):
        f = splat_f64(idents[i][1]["value"])
        if f == (1.0, 0.0):
            unit[i] = 1
        elif f == (-1.0, 0.0):
            unit[i] = 2
        elif f == (2.0, 0.0):
            unit[i] = 3 if doubling else 5
        elif zeros and f == (0.0, 0.0):
            unit[i] = 4
    return unit


def _keep(dag: Collected, outputs: list[int]) -> tuple[bytearray, int]:
    """The nodes the outputs reach (and the inputs), and how many of them are ops other
    than constants."""
    idents = dag.idents
    live = bytearray(len(idents))
    for j in outputs:
        live[j] = 1
    for j in range(len(idents) - 1, -1, -1):
        if live[j]:
            for k in idents[j][2]:
                live[k] = 1
    for j in dag.inputs:
        live[j] = 1
    ops = list(compress(map(itemgetter(0), idents), live))  # counted in C
    return live, len(ops) - ops.count(None) - ops.count("constant")


__all__ = ["DOUBLING_FROM", "push", "push_negations", "symmetric_ops"]
