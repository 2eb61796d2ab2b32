"""Whether a graph gives the exact rewrites anything to do, decided in Python.

An e-graph made of a graph's nodes, with every class holding one e-node, changes only if
the left-hand side of some rewrite matches somewhere in it: no match in the first
iteration, nothing to apply, saturation ends as it starts, and extraction gives the
graph back (hash-consed). Large gradients are often like that (the 1000-op chain's has
no match left once negation.push has moved its negations and dropped its products by
one), and for them loading, saturating and reading back the e-graph (~70% of
``materialize_merge``) would be work for nothing. So ``simplify_graph`` first tries
``shortcut``: it mirrors the e-graph's classes by hash-consing the collected DAG as
egglog's terms are (op, type, attributes and operand classes, the operands of ``add``
and ``mul`` as ingest orders them; a constant by its splat value and type or its
literal) and matches every exact rewrite's left-hand side against them, as egglog would
on the first iteration, with the guards taken as true (so it may answer "a match" where egglog finds
none, never the reverse). Only when nothing matches is the graph emitted here, without
egglog; anything it does not mirror (ops over constants only, which ingest folds;
multi-output slots) sends the graph to the e-graph.

The emitted graph is the one extraction would give: small graphs list their nodes as
extraction does (inputs, then post-order from each output); past ``DFS_MAX`` nodes they
keep the collected order (a topological order of the traced program: the same nodes,
~2 ms less on the chain's gradient).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import eq, itemgetter
from typing import Any

from tidu.core.graph import MaterializedGraph, MNode
from tidu.core.keys import NO_ATTRS, Aval, is_complex
from tidu.ops.catalog import INTERNAL, Catalog
from tidu.ops.control import CONTROL_OPS
from tidu.ops.dsl.ast import Call, Expr, Num, Var
from tidu.ops.dsl.guards import is_finite, is_identity
from tidu.simplify.dag import Collected
from tidu.simplify.egraph.extract import FOLD_MAX, FOLD_OPERAND_MAX
from tidu.simplify.egraph.ingest import COMMUTATIVE, SPLAT_PRESERVING, splat_f64

DFS_MAX = 512  # nodes: past this, the collected order is kept (see above)
# guards decided here from a loaded node (its op, attributes, aval, constant value), as the
# e-graph decides them when the graph loads (tidu.ops.dsl.guards); others are taken as true
DECIDED = frozenset(("identity", "real", "finite"))

# pattern: ("var", name) | ("num", re, im) | ("call", op, (pattern, ...))
Pattern = tuple


@dataclass(frozen=True)
class OpPatterns:
    """The patterns rooted at one op, and what a node's operands must show for one of
    them to match (a cheap test before the patterns are matched): a constant among
    ``values``, an op among ``ops``, or two operands in one class (``repeated``), unless
    some pattern asks nothing of them (``always``)."""

    patterns: tuple[Pattern, ...]
    # per pattern, its guards of ``DECIDED`` as (name, operand name or "self"): decided on
    # the loaded nodes as egglog decides them
    guards: tuple[tuple[tuple[str, str], ...], ...]
    # per pattern, its operands' names when they are distinct variables (op(x, y): it
    # matches every node of its op, and only its guards decide), else None
    flat: tuple[tuple[str, ...] | None, ...]
    # per pattern, what its operands must be: (position, op or None, constant value, the
    # constant value of that op's one operand when the pattern names it, as in
    # ``x * broadcast_in_dim(1)``, else None)
    shallow: tuple[tuple[tuple[int, str | None, tuple[float, float] | None, tuple[float, float] | None], ...], ...]
    always: bool
    ops: frozenset[str]
    values: frozenset[tuple[float, float]]
    repeated: bool
    # the patterns to try at a node, by what one of its operands is: (position, its op or
    # its constant's value) -> the patterns whose first operand test asks that (a pattern
    # fails unless it holds); ``unkeyed``: the patterns that test no operand alone. A node
    # of a common op with a named operand (``2 * x``) then tries a pattern or two, not all.
    keyed: dict[tuple, tuple[int, ...]] = field(compare=False)
    unkeyed: tuple[int, ...]


_INDEX: dict[tuple[int, bool], tuple[Catalog, dict[str, OpPatterns] | None]] = {}


def _pattern(e: Expr) -> Pattern:
    if isinstance(e, Var):
        return ("var", e.name)
    if isinstance(e, Num):
        v = complex(e.value)
        return ("num", v.real, v.imag)
    if isinstance(e, Call):
        return ("call", e.fn, tuple(_pattern(a) for a in e.args))
    raise TypeError(f"unexpected pattern {e!r}")  # Splat: not in exact rewrites (checked)


def _by_op(guarded: list[tuple[Pattern, tuple[tuple[str, str], ...]]]) -> OpPatterns:
    patterns = [p for p, _ in guarded]
    always, repeated = False, False
    ops: set[str] = set()
    values: set[tuple[float, float]] = set()
    for p in patterns:
        kids = p[2]
        names = [q[1] for q in kids if q[0] == "var"]
        if len(names) == len(kids) and len(set(names)) == len(names):
            always = True  # op(x, y, ...): anything matches (guards aside)
        repeated = repeated or len(set(names)) < len(names)
        ops.update(q[1] for q in kids if q[0] == "call")
        values.update((q[1], q[2]) for q in kids if q[0] == "num")
    shallow = tuple(tuple((i, q[1], None, _only_constant(q)) if q[0] == "call" else (i, None, (q[1], q[2]), None)
                          for i, q in enumerate(p[2]) if q[0] != "var") for p in patterns)
    flat = tuple(tuple(q[1] for q in p[2]) if all(q[0] == "var" for q in p[2])
                 and len({q[1] for q in p[2]}) == len(p[2]) else None for p in patterns)
    keyed: dict[tuple, tuple[int, ...]] = {}
    for n, reqs in enumerate(shallow):
        if reqs:
            pos, want_op, want_value, _ = reqs[0]
            key = (pos, want_op if want_op is not None else want_value)
            keyed[key] = (*keyed.get(key, ()), n)
    unkeyed = tuple(n for n, reqs in enumerate(shallow) if not reqs)
    return OpPatterns(tuple(patterns), tuple(g for _, g in guarded), flat, shallow, always, frozenset(ops),
                      frozenset(values), repeated, keyed, unkeyed)


def _only_constant(q: Pattern) -> tuple[float, float] | None:
    """The value of ``op(number)``'s number, else None."""
    kids = q[2]
    return (kids[0][1], kids[0][2]) if len(kids) == 1 and kids[0][0] == "num" else None


def exact_patterns(cat: Catalog, doubling: bool = True) -> dict[str, OpPatterns] | None:
    """Left-hand sides of the exact rewrites egglog runs, by root op (cached per catalog);
    None when one of them is not a plain pattern this module can match. Without
    ``doubling``, less ``x + x -> 2 * x`` (see ``is_doubling``)."""
    hit = _INDEX.get((id(cat), doubling))
    if hit is None or hit[0] is not cat:
        by_op: dict[str, list[tuple[Pattern, tuple[tuple[str, str], ...]]]] = {}
        index: dict[str, OpPatterns] | None
        try:
            for rw in cat.all_rewrites():
                if rw.semantics != "exact" or rw.by_normalizer or loaded_as_one(rw) or (
                        not doubling and is_doubling(rw)):
                    continue
                if not isinstance(rw.lhs, Call) or rw.lhs.attrs:
                    raise TypeError(rw.lhs)
                static = tuple((g.name, g.args[0]) for g in rw.guards if g.name in DECIDED and len(g.args) == 1)
                by_op.setdefault(rw.lhs.fn, []).append((_pattern(rw.lhs), static))
            index = {op: _by_op(ps) for op, ps in by_op.items()}
        except TypeError:
            index = None
        hit = _INDEX[(id(cat), doubling)] = (cat, index)
    return hit[1]


def is_doubling(rw: Any) -> bool:
    """Whether ``rw`` is ``x + x -> 2 * x`` (either order of the product). With its converse
    ``x * 2 -> x + x`` (a rule too) it only puts ``2 * x`` beside a loaded ``x + x``, which
    costs a constant more: extraction keeps ``x + x``, the form the negation pass leaves
    in small exact graphs (``negation.DOUBLING_FROM``). Matched there, it has nothing to
    change, so the shortcut is not refused for it."""
    lhs, rhs = rw.lhs, rw.rhs
    if not (isinstance(lhs, Call) and lhs.fn == "add" and not lhs.attrs and len(lhs.args) == 2
            and all(isinstance(a, Var) for a in lhs.args) and lhs.args[0].name == lhs.args[1].name):
        return False
    x = lhs.args[0].name
    return (isinstance(rhs, Call) and rhs.fn == "mul" and not rhs.attrs and len(rhs.args) == 2
            and sorted(type(a).__name__ for a in rhs.args) == ["Num", "Var"]
            and any(isinstance(a, Var) and a.name == x for a in rhs.args)
            and any(isinstance(a, Num) and complex(a.value) == 2 for a in rhs.args))


def loaded_as_one(rw: Any) -> bool:
    """Whether ``rw`` is a ``merge`` rewrite swapping the operands of ``add`` or ``mul``
    (``x + y -> y + x``): ingest loads both orders as one term, so on a loaded graph it
    has nothing to merge (it merges what other rewrites create). Any other merge rewrite
    counts as matching wherever its left-hand side does (never a false "no match")."""
    lhs, rhs = rw.lhs, rw.rhs
    return (rw.merge and isinstance(lhs, Call) and isinstance(rhs, Call) and lhs.fn == rhs.fn
            and lhs.fn in COMMUTATIVE and len(lhs.args) == 2 and not lhs.attrs and not rhs.attrs
            and all(isinstance(a, Var) for a in lhs.args)
            and [a.name for a in rhs.args if isinstance(a, Var)] == [a.name for a in reversed(lhs.args)])


class _Classes:
    """The e-classes of the e-graph a Collected DAG loads as, one e-node each: per class
    its op (None: an input), operand classes, splat value (constants) and a node of it."""

    def __init__(self, dag: Collected) -> None:
        self.ok = False  # whether the DAG is one this mirror is exact for
        idents, avals = dag.idents, dag.avals
        kept = compress(range(len(idents)), dag.keep) if dag.keep is not None else range(len(idents))
        index: dict[tuple, int] = {}
        setdefault = index.setdefault
        cls = [-1] * len(idents)
        self.op: list[str | None] = []
        self.kids: list[tuple[int, ...]] = []
        self.node: list[int] = []  # a node of the class (the first)
        self.splat: dict[int, tuple[float, float]] = {}
        is_const = bytearray()
        codes: dict[int, int] = {}  # id(aval) -> a number per distinct aval (hashing one calls Python)
        by_value: dict[Any, int] = {}
        last, code = None, 0
        commuted: dict[tuple[str, int, int], tuple[int, int]] = {}  # (op, lower, higher) -> operands
        cls_op, cls_kids, cls_node, splat = self.op, self.kids, self.node, self.splat
        add_op, add_kids, add_node, add_const = cls_op.append, cls_kids.append, cls_node.append, is_const.append
        for j in kept:  # the hot loop: once per node
            op, attrs, ins, slot = idents[j]  # an input's: (None, its key, (), aval)
            aval = avals[j]
            if aval is not last:  # runs of nodes share one aval object
                last = aval
                code = codes.get(id(aval))  # type: ignore[assignment]
                if code is None:
                    code = codes[id(aval)] = by_value.setdefault(aval, len(by_value))
            if len(ins) == 2:  # most nodes
                if slot:
                    return  # a multi-output op's value: not mirrored
                if op in COMMUTATIVE:  # as ingest writes the row: the orientation met first
                    x, y = ins
                    ins = commuted.setdefault((op, y, x) if y < x else (op, x, y), ins)
                a, b = cls[ins[0]], cls[ins[1]]
                if is_const[a] and is_const[b] and _loads_otherwise(op, aval, (avals[ins[0]], avals[ins[1]])):
                    return  # ingest folds it
                at = None if attrs is NO_ATTRS else attrs
                # y*x whose operands are x*y's classes (distinct nodes): the merge rule
                # (x * y -> y * x) makes them one class in the e-graph
                c = index.get((op, code, at, b, a), -1) if op in COMMUTATIVE and a != b else -1
                if c < 0:
                    c = setdefault((op, code, at, a, b), len(cls_node))
                if c == len(cls_node):
                    add_op(op)
                    add_kids((a, b))
                    add_node(j)
                    add_const(0)
                cls[j] = c
                continue
            f = None
            if op is None:
                ident: tuple = ("I", j)
                kids: tuple[int, ...] = ()
            elif not ins and op == "constant":  # (a loop of no operands is an op, not a constant)
                f = splat_f64(attrs["value"])
                ident = ("C", code, f) if f is not None else ("L", code, attrs["value"])
                kids = ()
            else:
                if slot:
                    return
                kids = tuple([cls[k] for k in ins])
                if all([is_const[k] for k in kids]) and _loads_otherwise(op, aval, [avals[k] for k in ins],
                                                                        bool(kids) and kids[0] in splat):
                    return  # ingest folds it
                ident = (op, code, None if attrs is NO_ATTRS else attrs, *kids)
            c = setdefault(ident, len(cls_node))
            if c == len(cls_node):
                add_op(op)
                add_kids(kids)
                add_node(j)
                add_const(op is not None and not ins)
                if f is not None:
                    splat[c] = f
            cls[j] = c
        self.cls = cls
        self.ok = True

    def could_rewrite(self, patterns: dict[str, OpPatterns], dag: Collected) -> bool:
        """Whether some pattern matches at some class (static guards decided, others
        taken as true)."""
        idents, avals, node = dag.idents, dag.avals, self.node
        return could_rewrite(self.op, self.kids, self.splat, patterns,
                             fact=lambda name, c: _fact(idents, avals, node[c], name))

    def emit(self, dag: Collected, dfs: bool) -> MaterializedGraph:
        """The graph: the inputs first, then the classes in post-order from each output
        (``dfs``, as extraction emits them) or in the collected order."""
        idents, avals, cls = dag.idents, dag.avals, self.cls
        cls_kids, cls_node = self.kids, self.node
        out: list[MNode] = []
        new_of = [-1] * len(cls_node)
        new = tuple.__new__  # MNode's fields by position (as extraction makes them)

        def make(c: int) -> None:
            j = cls_node[c]
            op, attrs, _, _ = idents[j]
            new_of[c] = len(out)
            if op is None:
                out.append(MNode(None, NO_ATTRS, (), avals[j], attrs))
            else:
                out.append(new(MNode, (op, attrs, tuple([new_of[k] for k in cls_kids[c]]), avals[j], None)))

        new_inputs = []
        for i in dag.inputs:
            c = cls[i]
            if new_of[c] < 0:
                make(c)
            new_inputs.append(new_of[c])
        if not dfs:  # the classes were made in a topological order: emitted in it
            append = out.append
            for c, ks in enumerate(cls_kids):
                if new_of[c] >= 0:
                    continue
                j = cls_node[c]
                new_of[c] = len(out)
                if len(ks) == 2:
                    append(new(MNode, (idents[j][0], idents[j][1], (new_of[ks[0]], new_of[ks[1]]), avals[j], None)))
                else:
                    make(c)
            return MaterializedGraph(out, new_inputs, [new_of[cls[o]] for o in dag.outputs], {})
        _post_order([cls[o] for o in dag.outputs], cls_kids, new_of, make)
        return MaterializedGraph(out, new_inputs, [new_of[cls[o]] for o in dag.outputs], {})


def _post_order(roots: list[int], kids: list[tuple[int, ...]], new_of: list[int], make: Callable[[int], None]) -> None:
    """``make(c)`` for each class (node) the roots reach that ``new_of`` has not (``make``
    sets it), operands first, as extraction lists them: an iterative post-order walk
    (graphs may be deep), the roots in order."""
    expanded = bytearray(len(new_of))  # its operands are on the stack above it
    for root in roots:
        stack = [root]
        push = stack.append
        while stack:
            c = stack.pop()
            if new_of[c] >= 0:
                continue
            if not expanded[c]:
                todo = [k for k in kids[c] if new_of[k] < 0]
                if todo:
                    expanded[c] = 1
                    push(c)
                    stack.extend(reversed(todo))
                    continue
            make(c)


def could_rewrite(cls_op: list[str | None], cls_kids: list[tuple[int, ...]], splat: dict[int, tuple[float, float]],
                  patterns: dict[str, OpPatterns], live: list[int] | None = None,
                  fact: Callable[[str, int], bool] | None = None) -> bool:
    """Whether some pattern matches at some class, given per class its op (None: an input),
    operand classes and (constants) splat value. ``fact(guard, class)`` decides the
    guards of ``DECIDED``; other guards, and all without ``fact``, are
    taken as true. ``live``: the classes to look at (default all)."""
    # the classes some pattern names as an operand (an op, or a constant's value): an
    # op whose operands are none of these can only match a pattern of variables
    kid_ops, of_constants = _kid_ops(patterns)
    kid_values = frozenset().union(*(at.values for at in patterns.values()))
    named = bytearray(len(cls_op))
    for c in compress(range(len(cls_op)), map(kid_ops.__contains__, cls_op)):
        values = of_constants.get(cls_op[c])  # type: ignore[arg-type]
        if values is None or (len(cls_kids[c]) == 1 and splat.get(cls_kids[c][0]) in values):
            named[c] = 1
    for c, f in splat.items():
        if f in kid_values:
            named[c] = 1
    get = patterns.get
    for c in range(len(cls_op)) if live is None else live:
        at = get(cls_op[c])  # type: ignore[arg-type]
        if at is None:
            continue
        kids = cls_kids[c]
        if not at.always:
            if len(kids) == 2:
                a, b = kids
                if not (named[a] or named[b] or (at.repeated and a == b)):
                    continue
            elif not (any([named[k] for k in kids]) or (at.repeated and len(set(kids)) < len(kids))):
                continue
        tried = at.unkeyed
        keyed = at.keyed
        for pos, k in enumerate(kids):
            hit = keyed.get((pos, cls_op[k]))
            if hit is not None:
                tried += hit
            f = splat.get(k)
            if f is not None and (hit := keyed.get((pos, f))) is not None:
                tried += hit
        for n in tried:
            p, reqs, guards, flat = at.patterns[n], at.shallow[n], at.guards[n], at.flat[n]
            if flat is not None:  # op(x, y, ...): its guards alone decide
                if len(flat) != len(kids):
                    continue
                if fact is None or not guards:
                    return True
                for name, arg in guards:  # (a loop, not all() of a generator: every node of the op gets here)
                    if not fact(name, c if arg == "self" else kids[flat.index(arg)]):
                        break
                else:
                    return True
                continue
            for pos, want_op, want_value, inner in reqs:  # its operands first, then the pattern
                k = kids[pos] if pos < len(kids) else -1
                if k < 0 or (cls_op[k] != want_op if want_op is not None else splat.get(k) != want_value):
                    break
                if inner is not None and (len(cls_kids[k]) != 1 or splat.get(cls_kids[k][0]) != inner):
                    break
            else:
                env: dict[str, int] = {}
                if _match(p, c, env, cls_op, cls_kids, splat) and (
                        fact is None or all(fact(name, c if arg == "self" else env[arg]) for name, arg in guards)):
                    return True
    return False


_KID_OPS: dict[int, tuple[dict[str, OpPatterns], frozenset[str], dict[str, frozenset]]] = {}


def _kid_ops(patterns: dict[str, OpPatterns]) -> tuple[frozenset[str], dict[str, frozenset]]:
    """The ops patterns name as an operand, and those named only applied to a number
    (``broadcast_in_dim(1)``) with the numbers: such a node matters only with one of them."""
    hit = _KID_OPS.get(id(patterns))
    if hit is None or hit[0] is not patterns:
        ops: set[str] = set()
        other: set[str] = set()
        numbers: dict[str, set] = {}
        for at in patterns.values():
            for p in at.patterns:
                for q in p[2]:
                    if q[0] != "call":
                        continue
                    ops.add(q[1])
                    value = _only_constant(q)
                    if value is None:
                        other.add(q[1])
                    else:
                        numbers.setdefault(q[1], set()).add(value)
        hit = _KID_OPS[id(patterns)] = (patterns, frozenset(ops),
                                        {op: frozenset(v) for op, v in numbers.items() if op not in other})
    return hit[1], hit[2]


def _fact(idents: list[tuple], avals: list[Any], j: int, name: str) -> bool:
    """Static guard ``name`` on node ``j``, as the e-graph learns it when the graph loads."""
    op, attrs, ins, _ = idents[j]
    if name == "identity":  # (an operand of another shape, as most broadcasts have: no call)
        return (op is not None and bool(ins) and avals[ins[0]].shape == avals[j].shape
                and is_identity(op, attrs, avals[ins[0]], avals[j]))
    if name == "real":
        return not is_complex(avals[j].dtype)
    if name == "finite":
        return is_finite(op, attrs, avals[j])
    return True


def _match(p: Pattern, c: int, env: dict[str, int], ops: list[str | None], kids: list[tuple[int, ...]],
           splat: dict[int, tuple[float, float]]) -> bool:
    """Whether pattern ``p`` matches at class ``c`` (variables bound in ``env``). A
    module function: a nested one calling itself would be a reference cycle holding the
    classes until the garbage collector runs."""
    kind = p[0]
    if kind == "var":
        return env.setdefault(p[1], c) == c
    if kind == "num":
        return splat.get(c) == (p[1], p[2])
    at = kids[c]
    if ops[c] != p[1] or len(at) != len(p[2]):
        return False
    return all(_match(q, k, env, ops, kids, splat) for q, k in zip(p[2], at, strict=True))


def shortcut(dag: Collected, cat: Catalog, dfs: bool, doubling: bool = True) -> MaterializedGraph | None:
    """The graph the exact e-graph would give ``dag`` when no exact rewrite can match in
    it, else None (the e-graph is needed). ``dfs``: list the nodes as extraction does
    (else in the collected order; only for a DAG whose nodes the outputs all reach).
    ``doubling``: whether the negation pass wrote doublings as ``2 * x`` (else ``x + x``
    is left as it is: ``is_doubling``)."""
    patterns = exact_patterns(cat, doubling)
    if patterns is None:
        return None
    if dag.commuted_merged:
        fast = _pushed_shortcut(dag, patterns, doubling, dfs)
        if fast is not _NOT_MIRRORED:
            return fast
    classes = _Classes(dag)
    if not classes.ok or classes.could_rewrite(patterns, dag) or (
            not doubling and _doubling_merges(classes.op, classes.kids, classes.splat, range(len(classes.op)))):
        return None
    return classes.emit(dag, dfs)


def _doubling_merges(ops: list[str | None], kids: list[tuple[int, ...]], splat: dict[int, tuple[float, float]],
                     live: Any) -> bool:
    """Whether some ``x + x`` has a ``2 * x`` (or ``x * 2``) beside it: then the doubling
    rule makes the two one class (the e-graph's CSE), which is a change; or doubles a
    splat constant (one too large for constfold): ``2 * c``, which the rules of constants
    may fold (``2 * 1`` is ``2``)."""
    doubled = {kids[c][0] for c in live if ops[c] == "add" and len(kids[c]) == 2 and kids[c][0] == kids[c][1]}
    if not doubled:
        return False
    if any(c in splat for c in doubled):
        return True
    twos = {c for c, f in splat.items() if f == (2.0, 0.0)}
    if not twos:
        return False
    for c in live:
        if ops[c] == "mul" and len(kids[c]) == 2:
            a, b = kids[c]
            if (a in twos and b in doubled) or (b in twos and a in doubled):
                return True
    return False


_NOT_MIRRORED = object()


def _pushed_shortcut(dag: Collected, patterns: dict[str, OpPatterns], doubling: bool = True,
                     dfs: bool = False) -> Any:
    """``shortcut`` of a DAG the negation pass has pushed (``push``, which also merged the
    commuted adds and products): then each kept node is an e-class of its own, unless two
    constants are one term (equal splat value and aval), so the classes need not be made;
    the patterns are matched on the nodes, and the kept nodes are the graph (inputs
    first), in the collected order or (``dfs``) as ``_Classes.emit`` lists them.
    ``_NOT_MIRRORED`` when two constants are one term, or a node is one ``_Classes``
    would not mirror."""
    idents, avals, keep = dag.idents, dag.avals, dag.keep
    assert keep is not None
    n = len(idents)
    live = list(compress(range(n), keep))  # the nodes of the graph (the others are matched by nothing)
    ops = list(map(_OP, idents))
    kids = list(map(_INS, idents))
    splat: dict[int, tuple[float, float]] = {}
    seen: set[tuple] = set()
    is_const = bytearray(n)
    for j in compress(live, map(eq, repeat("constant"), map(ops.__getitem__, live))):
        value = idents[j][1]["value"]
        f = splat_f64(value)
        term = (avals[j], f) if f is not None else (avals[j], value)
        if term in seen:
            return _NOT_MIRRORED
        seen.add(term)
        is_const[j] = 1
        if f is not None:
            splat[j] = f
    if dfs and any(map(_not_mirrored, repeat(dag), repeat(is_const), live)):
        return _NOT_MIRRORED  # (in the collected order, checked as the nodes are emitted)
    if could_rewrite(ops, kids, splat, patterns, live, lambda name, j: _fact(idents, avals, j, name)) or (
            not doubling and _doubling_merges(ops, kids, splat, live)):
        return None
    out: list[MNode] = []
    new_of = [-1] * n
    for i in dag.inputs:
        if new_of[i] < 0:
            new_of[i] = len(out)
            out.append(MNode(None, NO_ATTRS, (), avals[i], idents[i][1]))
    new = tuple.__new__
    append = out.append

    def make(j: int) -> None:
        op, attrs, ins, _ = idents[j]
        new_of[j] = len(out)
        if len(ins) == 2:
            append(new(MNode, (op, attrs, (new_of[ins[0]], new_of[ins[1]]), avals[j], None)))
        elif op is None:
            append(MNode(None, NO_ATTRS, (), avals[j], attrs))
        else:
            append(new(MNode, (op, attrs, tuple([new_of[k] for k in ins]), avals[j], None)))

    if not dfs:
        for j in live:
            if new_of[j] >= 0:
                continue
            op, attrs, ins, slot = idents[j]
            new_of[j] = len(out)
            if len(ins) == 2:
                a, b = ins
                if slot or (is_const[a] and is_const[b] and _loads_otherwise(op, avals[j], (avals[a], avals[b]))):
                    return _NOT_MIRRORED
                append(new(MNode, (op, attrs, (new_of[a], new_of[b]), avals[j], None)))
            elif ins and _not_mirrored(dag, is_const, j):
                return _NOT_MIRRORED
            else:
                make(j)
        return MaterializedGraph(out, [new_of[i] for i in dag.inputs], [new_of[o] for o in dag.outputs], {})
    _post_order(dag.outputs, kids, new_of, make)  # as _Classes.emit, a node being its class
    return MaterializedGraph(out, [new_of[i] for i in dag.inputs], [new_of[o] for o in dag.outputs], {})


def _not_mirrored(dag: Collected, is_const: bytearray, j: int) -> bool:
    """Whether node ``j`` is one ``_Classes`` would not mirror: a multi-output op's value,
    or an op of constants that ingest folds."""
    op, _, ins, slot = dag.idents[j]
    if not ins:
        return False
    if slot:
        return True
    return all([is_const[k] for k in ins]) and _loads_otherwise(
        op, dag.avals[j], [dag.avals[k] for k in ins], splat_f64(dag.idents[ins[0]][1]["value"]) is not None)


def _loads_otherwise(op: str, aval: Aval, operands: Sequence[Aval], splat: bool = False) -> bool:
    """Whether ingest may load an op of constants as something else than that op: folded
    (within ``extract.fold_node``'s limits; ``constfold`` has folded what it could, but
    its kernel may have refused), or, for a broadcast, reshape or transpose of a splat
    (``splat``: the first operand is one, as ingest sees it), with a ``Const`` in its
    class. Past the limits it loads the op as it is, as mirrored here: a forward-over-
    forward Hessian's identity matrix broadcast to n x n x n, say."""
    return (op in SPLAT_PRESERVING and splat) or (
        aval.size <= FOLD_MAX and op not in CONTROL_OPS and op not in INTERNAL
        and all(a.size <= FOLD_OPERAND_MAX for a in operands))


_OP, _INS = itemgetter(0), itemgetter(2)


__all__ = ["DFS_MAX", "OpPatterns", "exact_patterns", "shortcut"]
