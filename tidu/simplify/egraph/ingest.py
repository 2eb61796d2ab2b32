"""Loading a graph into the e-graph: fact rows per input relation.

Constants are folded in Python on the way (small results only). The graph is written as
tab-separated rows, one input relation per constructor (decision 3: bulk ingest, linear
in the graph). Guard facts (``when finite(x)``...) are decided in Python here and loaded
the same way, only where a rule could use them.
"""

from __future__ import annotations

import math
import time
from itertools import chain, compress
from operator import itemgetter
from typing import Any

from tidu.core.graph import MaterializedGraph, MNode
from tidu.core.keys import NO_ATTRS, Aval, Literal, is_complex
from tidu.ops.catalog import Catalog
from tidu.ops.dsl.guards import GUARDS
from tidu.ops.dsl.to_egglog import CompiledRules, compile_rewrites, constructor
from tidu.simplify.dag import Collected
from tidu.simplify.egraph.extract import Evaluate, Tables, fold_node
from tidu.simplify.egraph.session import Schema, term_schema
from tidu.simplify.egraph.signs import GUARD_BITS, NONZERO, constant_bits, op_bits

# guards whose answer for a value that is not a constant depends on its aval alone
# (tidu.ops.dsl.guards): decided once per distinct aval
AVAL_GUARDS = frozenset({"real", "finite"})
SMALL_CONSTANT = 64  # elements: sign facts of constants this small are found in Python
SPLAT_PRESERVING = frozenset({"broadcast_in_dim", "reshape", "transpose"})  # of a splat: a splat
COMMUTATIVE = frozenset({"add", "mul"})  # y*x loads as the x*y met first (_encode)


def splat_f64(lit: Literal) -> tuple[float, float] | None:
    """(re, im) when ``lit`` is a splat (bitwise) whose value is exact in f64 and safe to
    compare in egglog: finite, and no negative zero (egglog equates -0.0 with 0.0)."""
    v = lit.splat()  # known since the literal was made (None for an empty one)
    if v is None:
        return None
    # float32/64, complex64/128, bool and ints up to 2^53 are exact as f64 pairs
    if isinstance(v, complex):
        re, im = v.real, v.imag
    elif isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**53:
        return None
    else:
        re, im = float(v), 0.0
    for x in (re, im):
        if not math.isfinite(x) or (x == 0.0 and math.copysign(1.0, x) < 0):
            return None
    return re, im


_EXACT_GUARDS: dict[int, tuple[Catalog, dict[str, set[tuple[str, int]]]]] = {}
_ConstructorTable = dict[str, tuple[str, int, tuple[str, ...]]]
_RULE_CONSTRUCTORS: dict[tuple[int, int], tuple[Catalog, CompiledRules, _ConstructorTable]] = {}


def _typed(v: Any) -> tuple[Any, Any]:
    """An attribute value as a dict key that tells ``True`` from ``1`` and ``1`` from
    ``1.0`` (equal in Python, so one code would stand for both: a concatenate's axis 1
    came back from extraction as True), tuples element by element; the value itself last."""
    if type(v) is tuple:
        return (tuple(_typed(x)[0] for x in v), v)
    return (type(v), v)


def _rule_constructors(cat: Catalog, rules: CompiledRules) -> _ConstructorTable:
    """Constructor name -> (primitive, arity, attribute names) of what ``rules`` can write
    (cached per catalog and rules)."""
    hit = _RULE_CONSTRUCTORS.get((id(cat), id(rules)))
    if hit is None or hit[0] is not cat or hit[1] is not rules:
        table = {constructor(cat[op], n): (op, n, cat[op].attrs) for op, n in sorted(rules.constructors)}
        hit = _RULE_CONSTRUCTORS[(id(cat), id(rules))] = (cat, rules, table)
    return hit[2]


def exact_class_guards(cat: Catalog) -> dict[str, set[tuple[str, int]]]:
    """The guard sites (``CompiledRules.class_guards``) of the exact rewrites alone: what
    an exact session's rules can ask (cached per catalog). The real rewrites' guards
    (``real(x)`` at every operand of a product, ``positive``...) are most of a graph's
    guard facts."""
    hit = _EXACT_GUARDS.get(id(cat))
    if hit is None or hit[0] is not cat:
        exact = [rw for rw in cat.all_rewrites() if rw.semantics == "exact"]
        hit = _EXACT_GUARDS[id(cat)] = (cat, compile_rewrites(cat, exact).class_guards)
    return hit[1]


class _GuardView:
    """What a guard predicate reads of a value: a ValueKey look-alike over MNodes."""

    __slots__ = ("node", "nodes")

    def __init__(self, node: MNode, nodes: list[MNode]) -> None:
        self.node, self.nodes = node, nodes

    @property
    def op(self) -> str | None:
        return self.node.op

    @property
    def attrs(self) -> Any:
        return self.node.attrs

    @property
    def aval(self) -> Any:
        return self.node.aval

    @property
    def inputs(self) -> tuple[_GuardView, ...]:
        return tuple(_GuardView(self.nodes[j], self.nodes) for j in self.node.inputs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _GuardView) and other.node is self.node

    def __hash__(self) -> int:
        return id(self.node)


class Ingest:
    """Fact rows per input relation, and the tables to decode extracted terms. Ops over
    small constants are folded on the way (``fold_s``)."""

    def __init__(self, graph: MaterializedGraph | Collected, cat: Catalog, rules: CompiledRules,
                 evaluate: Evaluate | None, assume: dict[str, int] | None = None,
                 semantics: str | None = None) -> None:
        self.cat, self.rules, self.evaluate = cat, rules, evaluate
        # guard facts only for the guards the rules of ``semantics`` ask (None: all rules)
        self.class_guards = rules.class_guards if semantics != "exact" else exact_class_guards(cat)
        self.fold_s = 0.0
        self.assume = assume or {}
        self.nodes: list[MNode] = []  # the loaded graph's nodes (folded ones replace their originals)
        self.tables = Tables(self.nodes)
        self.inputs: list[int] = []  # the loaded graph's inputs and outputs (node indices)
        self.outputs: list[int] = []
        self.rows: dict[str, list[str]] = {}
        # relation -> (column sorts, load action over columns c0, c1, ...)
        self.schema: Schema = {}
        self.used: set[tuple[str, int]] = set()  # (op, arity) in the graph
        self.splat_of: dict[int, tuple[float, float]] = {}  # node -> (re, im) of the splat it is
        # op with guard sites -> its nodes, in order (filled by _encode)
        self.guarded: dict[str, list[int]] = {op: [] for where in self.class_guards.values() for op, _ in where}
        self.guarded.update((op, []) for _, op, _ in self.rules.node_guards)
        self._encode(graph if isinstance(graph, Collected) else Collected.of(graph))
        self._guards()
        out = self._rows("Out", ["i64", "i64"], "(Out c0 (Key c1))")  # position -> class
        out.extend(f"{pos}\t{o}" for pos, o in enumerate(self.outputs))

    def _rows(self, rel: str, sorts: list[str] | None = None, action: str = "") -> list[str]:
        """The fact rows of input relation ``rel``, declared on first use."""
        rows = self.rows.get(rel)
        if rows is None:
            assert sorts is not None
            rows = self.rows[rel] = []
            self.schema[rel] = (sorts, action)
        return rows

    def _term_rows(self, name: str, arity: int, n_attrs: int) -> list[str]:
        return self._rows(name, *term_schema(name, arity, n_attrs))

    def _constant(self, i: int, ty: str, node: MNode, lits: dict[Literal, int]) -> None:
        lit = node.attrs["value"]
        f = splat_f64(lit)
        if f is not None:
            self.splat_of[i] = f
            self.tables.splats.setdefault((ty, f[0], f[1]), node)
            rows = self._rows("Const", ["i64", "String", "f64", "f64"],
                              "(union (Key c0) (Const c1 c2 c3))")
            rows.append(f"{i}\t{ty}\t{f[0]!r}\t{f[1]!r}")
            return
        j = lits.get(lit)
        if j is None:
            j = lits[lit] = len(self.tables.literals)
            self.tables.literals.append(node)
        rows = self._rows("Lit", ["i64", "String", "i64"], "(union (Key c0) (Lit c1 c2))")
        rows.append(f"{i}\t{ty}\t{j}")

    def _encode(self, dag: Collected) -> None:
        """Make the kept nodes of ``dag`` (renumbered in order) and their fact rows, in one
        pass: a graph's nodes are made here, once."""
        t, nodes, evaluate, assume = self.tables, self.nodes, self.evaluate, self.assume
        idents, avals, keep = dag.idents, dag.avals, dag.keep
        index = [0] * len(idents)  # new index of each kept node of dag
        add, new = nodes.append, tuple.__new__
        tys: dict[int, str] = {}  # id(aval) -> type string (avals live as long as nodes)
        ty_of: dict[Aval, str] = {}  # aval -> type string: str() only once per distinct aval
        codes: dict[Any, str] = {}  # attribute value, typed (_typed) -> code
        node_codes: dict[tuple[str, Any], tuple[str, ...]] = {}
        lits: dict[Literal, int] = {}
        commuted: dict[tuple[str, int, int], tuple[int, int]] = {}  # (op, lower, higher) -> operands
        rels: dict[tuple[str, int], tuple[list[str], tuple[str, ...]]] = {}
        inputs = self._rows("Inp", ["i64", "String", "i64"], "(union (Key c0) (Inp c1 c2))")
        self.is_const = is_const = bytearray(len(idents))
        # op -> (arity, rows, attribute names, its node list for the guards or None, whether
        # it keeps a splat a splat), last seen
        by_op: dict[str, tuple[int, list[str], tuple[str, ...], list[int] | None, bool]] = {}
        guarded, splat_of = self.guarded, self.splat_of
        last_aval, ty = None, ""
        for j in compress(range(len(idents)), keep) if keep is not None else range(len(idents)):
            op, attrs, ins, _ = idents[j]  # the hot loop: once per node
            aval = avals[j]
            i = index[j] = len(nodes)
            if op is None:  # an input
                add(MNode(None, NO_ATTRS, (), aval, attrs))
                name = str(attrs)
                if name in assume and not is_complex(aval.dtype):  # what is assumed of it, by name
                    t.input_signs[i] = assume[name]
            else:
                if len(ins) == 2:
                    ins = (index[ins[0]], index[ins[1]])
                    if op in COMMUTATIVE:
                        # add and mul commute (exactly, in IEEE arithmetic too): y*x loads as
                        # the x*y met first, so the two are one term; the order a graph
                        # was written in stays (rules such as x * 2 -> x + x are one-sided)
                        a, b = ins
                        ins = commuted.setdefault((op, b, a) if b < a else (op, a, b), ins)
                elif ins:
                    ins = tuple([index[k] for k in ins])
                add(new(MNode, (op, attrs, ins, aval, None)))
            if aval is not last_aval:  # runs of nodes share one aval object
                last_aval = aval
                ty = tys.get(id(aval))  # type: ignore[assignment]
                if ty is None:
                    ty = ty_of.get(aval)  # type: ignore[assignment]
                    if ty is None:
                        ty = ty_of[aval] = str(aval)
                        t.avals.setdefault(ty, aval)
                    tys[id(aval)] = ty
            if op is None:
                inputs.append(f"{i}\t{ty}\t{i}")  # Inp names the input by its graph id
                continue
            if not ins or is_const[ins[0]]:  # constants, and ops that may fold
                n = nodes[i]
                if op != "constant" and ins and evaluate is not None and all([is_const[j] for j in ins]):
                    t0 = time.perf_counter()
                    folded = fold_node(n, [nodes[j] for j in ins], evaluate)
                    self.fold_s += time.perf_counter() - t0
                    if folded is not None:
                        nodes[i] = n = folded
                        op = "constant"
                if op == "constant":
                    is_const[i] = 1
                    self._constant(i, ty, n, lits)
                    continue
            known = by_op.get(op)
            if known is not None and known[0] == len(ins):
                _, rows, attr_names, at, keeps_splat = known
            else:
                rel = rels.get((op, len(ins)))
                if rel is None:
                    prim = self.cat.get_primitive(op)  # control-flow ops too (tidu.ops.control)
                    name = constructor(prim, len(ins))
                    t.constructors[name] = (prim.name, len(ins), prim.attrs)
                    self.used.add((prim.name, len(ins)))
                    rel = rels[(op, len(ins))] = (self._term_rows(name, len(ins), len(prim.attrs)),
                                                  prim.attrs)
                rows, attr_names = rel
                at, keeps_splat = guarded.get(op), op in SPLAT_PRESERVING
                by_op[op] = (len(ins), rows, attr_names, at, keeps_splat)
            if keeps_splat and ins[0] in splat_of:
                # a splat broadcast (reshaped, transposed) is the splat of the new shape: its
                # class gets that Const too, so rules on constants (x * 1 -> x) see it
                f = splat_of[i] = splat_of[ins[0]]
                self._rows("Const", ["i64", "String", "f64", "f64"],
                           "(union (Key c0) (Const c1 c2 c3))").append(f"{i}\t{ty}\t{f[0]!r}\t{f[1]!r}")
            if at is not None:
                at.append(i)
            if attr_names:
                c = node_codes.get((op, attrs))
                if c is None:
                    c = tuple(codes.setdefault(_typed(attrs[a]), f"a{len(codes)}") for a in attr_names)
                    node_codes[(op, attrs)] = c
                rows.append("\t".join((str(i), ty, *map(str, ins), *c)))
            elif len(ins) == 2:  # the common cases, formatted directly
                rows.append(f"{i}\t{ty}\t{ins[0]}\t{ins[1]}")
            elif len(ins) == 1:
                rows.append(f"{i}\t{ty}\t{ins[0]}")
            else:
                rows.append("\t".join((str(i), ty, *map(str, ins))))
        t.attr_values.update({c: v for (_, v), c in codes.items()})
        for name, row in _rule_constructors(self.cat, self.rules).items():
            t.constructors.setdefault(name, row)
        self.inputs = [index[j] for j in dag.inputs]
        self.outputs = [index[j] for j in dag.outputs]

    def _signs(self) -> list[int]:
        """Sign bits of every node, bottom-up (operands come first)."""
        bits = [0] * len(self.nodes)
        for i, n in enumerate(self.nodes):
            if n.op is None:
                bits[i] = self.tables.input_signs.get(i, 0)
                continue
            if is_complex(n.aval.dtype) or n.aval.dtype == "bool":
                continue
            if n.op == "constant":
                arr = n.attrs["value"].array if n.aval.size <= SMALL_CONSTANT else None
                if arr is not None and arr.size > 0:  # in Python floats: numpy calls cost more here
                    vals = arr.ravel().tolist()
                    if all([math.isfinite(v) for v in vals]):
                        bits[i] = constant_bits(float(min(vals))) & constant_bits(float(max(vals))) & (
                            NONZERO if 0 not in vals else ~NONZERO)
                elif (found := n.attrs["value"].finite_range()) is not None:
                    lo, hi, zero = found
                    bits[i] = constant_bits(lo) & constant_bits(hi) & (NONZERO if not zero else ~NONZERO)
            else:
                bits[i] = op_bits(n.op, n.inputs, bits)
        return bits

    def _guards(self) -> None:
        """Guard facts for the loaded values, only where a rule could use them: a guard
        on a pattern variable for operands at the positions where the variable occurs,
        a guard on ``self`` for nodes of the pattern's root op. Rows come in node order,
        and for one node in the order of its sites."""
        nodes = self.nodes
        class_guards = self.class_guards
        node_guards = self.rules.node_guards
        by_op = self.guarded
        if not by_op:
            return
        if "constant" in by_op:  # _encode records the nodes of ops, not of constants
            by_op["constant"] = [i for i, n in enumerate(nodes) if n.op == "constant"]
        is_const = self.is_const
        signs = self._signs() if any(g in GUARD_BITS for g in class_guards) else None
        for g, where in class_guards.items():
            positions: dict[str, list[int]] = {}  # op -> operand positions, in site order
            for op, pos in sorted(where):  # a set: sorted, so rows never depend on str hashing
                positions.setdefault(op, []).append(pos)
            ops = [op for op in positions if by_op[op]]
            if not ops:
                continue
            if len(ops) == 1:
                op = ops[0]
                at = by_op[op]
                pos_ = positions[op]
                operands = list(map(itemgetter(2), map(nodes.__getitem__, at)))
                if pos_ == list(range(len(pos_))) and set(map(len, operands)) == {len(pos_)}:
                    asked = list(chain.from_iterable(operands))  # every operand, in order (a product's)
                elif len(pos_) == 1 and pos_[0] == 0:
                    asked = [ins[0] for ins in operands if ins]
                else:
                    asked = [ins[p] for ins in operands for p in pos_ if p < len(ins)]
            else:
                at = sorted(i for op in ops for i in by_op[op])
                asked = [ins[p] for n in [nodes[i] for i in at] for ins in (n.inputs,)
                         for p in positions[n.op] if p < len(ins)]  # type: ignore[index]
            if g in AVAL_GUARDS:
                check = GUARDS[g]
                # decided once per aval (of a stand-in input) except for constants: when no
                # aval makes it hold, the few constants asked about are all there is to check
                yes = {aval for aval in self.tables.avals.values()
                       if check(_GuardView(MNode(None, NO_ATTRS, (), aval, None), nodes))}  # type: ignore[arg-type]
                if not yes:
                    constants = dict.fromkeys(compress(asked, map(is_const.__getitem__, asked)))
                    holds = [j for j in constants if check(_GuardView(nodes[j], nodes))]  # type: ignore[arg-type]
                else:
                    holds = [j for j in dict.fromkeys(asked)
                             if (check(_GuardView(nodes[j], nodes)) if is_const[j]  # type: ignore[arg-type]
                                 else nodes[j].aval in yes)]
                if holds:
                    self._rows("g_" + g, ["i64"], f"(g_{g} (Key c0))").extend(map(str, holds))
                continue
            asked = list(dict.fromkeys(asked))  # each value once, first ask first
            bit = GUARD_BITS.get(g, 0) if signs is not None else 0
            if bit:
                holds = [j for j in asked if signs[j] & bit]  # type: ignore[index]
            else:
                check = GUARDS[g]
                holds = [j for j in asked if check(_GuardView(nodes[j], nodes))]  # type: ignore[arg-type]
            if holds:
                self._rows("g_" + g, ["i64"], f"(g_{g} (Key c0))").extend(map(str, holds))
        self_sites: dict[str, list[tuple[str, int]]] = {}  # op -> (guard, arity) on self
        for g, op, arity in node_guards:
            self_sites.setdefault(op, []).append((g, arity))
        for i in sorted(i for op in self_sites for i in by_op[op]):
            n = nodes[i]
            for g, arity in self_sites[n.op]:  # type: ignore[index]
                # the fact names the node's class and its operands' classes
                if len(n.inputs) == arity and GUARDS[g](_GuardView(n, nodes)):  # type: ignore[arg-type]
                    rel = node_guards[(g, n.op, arity)]  # type: ignore[index]
                    kids = " ".join(f"(Key c{j})" for j in range(arity + 1))
                    self._rows(rel, ["i64"] * (arity + 1), f"({rel} {kids})").append(
                        "\t".join(map(str, (i, *n.inputs))))


__all__ = ["Ingest", "exact_class_guards", "splat_f64"]
