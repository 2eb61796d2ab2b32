"""Normal forms of the field operations: the commutative part of the ``real`` semantics.

Rewriting with commutativity, associativity and distributivity one rule at a time
makes an e-graph explode (every bracketing and order of a sum is a new e-node). In the
``real`` semantics tidu applies these laws the way computer algebra does, by
normalizing: every e-class gets a normal form, a Laurent polynomial over *atoms* (the
classes of everything that is not ``add sub neg mul div`` or ``pow`` by a small integer
constant), with float or complex coefficients:

- classes with the same normal form are equal and are merged (``x*y - y*x`` is 0, the
  symmetric entries of a Hessian become one node, like terms are collected);
- a class whose normal form is cheaper than what it holds gets that form, written
  compactly (common factors pulled out, Horner-like grouping, subtraction for negative
  terms) as new e-nodes in the class; extraction then chooses.

A normalization round works on the frozen e-graph and returns fact rows (unions and
new terms) that the next load puts back into egglog, whose rewrites (exp/log laws,
trigonometric identities...) then see the new forms. The laws it applies are written
in rules/arithmetic.rules as ``rewrite real normalizer:`` lines, which check-rules
samples like any other rule. Products of sums are expanded only while small
(``EXPAND_MAX`` terms), division by a sum keeps the sum as an atom (``(a+b)/(a+b)`` is
still 1: a sum divided by a multiple of itself cancels), and normal forms past
``MAX_TERMS`` terms stay atoms: normalization stays linear in the e-graph.
"""

from __future__ import annotations

import sys
from fractions import Fraction
from typing import Any

from tidu.ops.dsl.to_egglog import f64_literal
from tidu.simplify.egraph.frozen import ENode, FrozenGraph, KeyRing
from tidu.simplify.egraph.session import UNION_ROWS, term_schema
from tidu.simplify.egraph.signs import GUARD_BITS, constant_bits, op_bits


class QC:
    """An exact complex rational: the coefficients of complex normal forms."""

    __slots__ = ("im", "re")

    def __init__(self, re: Fraction, im: Fraction) -> None:
        self.re, self.im = re, im

    @staticmethod
    def of(v: Any) -> QC:
        return v if isinstance(v, QC) else QC(Fraction(v), Fraction(0))

    def __add__(self, o: Any) -> QC:
        o = QC.of(o)
        return QC(self.re + o.re, self.im + o.im)

    __radd__ = __add__

    def __sub__(self, o: Any) -> QC:
        o = QC.of(o)
        return QC(self.re - o.re, self.im - o.im)

    def __neg__(self) -> QC:
        return QC(-self.re, -self.im)

    def __mul__(self, o: Any) -> QC:
        o = QC.of(o)
        return QC(self.re * o.re - self.im * o.im, self.re * o.im + self.im * o.re)

    __rmul__ = __mul__

    def __truediv__(self, o: Any) -> QC:
        o = QC.of(o)
        d = o.re * o.re + o.im * o.im
        return QC((self.re * o.re + self.im * o.im) / d, (self.im * o.re - self.re * o.im) / d)

    def __rtruediv__(self, o: Any) -> QC:
        return QC.of(o) / self

    def __pow__(self, n: int) -> QC:
        r = QC(Fraction(1), Fraction(0))
        for _ in range(abs(n)):
            r = r * self
        return 1 / r if n < 0 else r

    def __eq__(self, o: object) -> bool:
        if isinstance(o, QC):
            return self.re == o.re and self.im == o.im
        return self.im == 0 and self.re == o

    def __hash__(self) -> int:
        return hash((self.re, self.im))

    def __bool__(self) -> bool:
        return bool(self.re or self.im)

    def __complex__(self) -> complex:
        return complex(float(self.re), float(self.im))


ONE = 1  # coefficients are ints while they can be (much faster than Fraction), else exact


def _exact(x: float) -> int | Fraction:
    f = Fraction(x)
    return f.numerator if f.denominator == 1 else f


def _div(a: Any, b: Any) -> Any:
    """a / b exactly (ints divide into a Fraction, never a float; into an int when they
    divide evenly: Fraction arithmetic is several times slower than int arithmetic)."""
    if type(a) is int and type(b) is int:
        q, r = divmod(a, b)
        return q if r == 0 else Fraction(a, b)
    q = a / b
    return q.numerator if type(q) is Fraction and q.denominator == 1 else q


def _ipow(v: Any, n: int) -> Any:
    return Fraction(v) ** n if isinstance(v, int) and n < 0 else v**n
Mono = tuple[tuple[int, int], ...]  # ((atom class, exponent), ...) sorted by class
Poly = dict[Mono, Any]  # monomial -> nonzero coefficient

ARITH = frozenset({"add", "sub", "neg", "mul", "div", "pow"})
MAX_TERMS = 40
EXPAND_MAX = 16  # terms a product of sums may expand to
WORK_PER_CLASS = 16  # monomial products a round may spend per e-class, then sums stay atoms
MAX_POW = 4  # integer powers of a sum expanded up to this
FULL_SLACK = 2  # ops a fully expanded form may have beyond the class's own
FORMS_PER_ROUND = 64  # forms a round writes, plus one per two e-classes (the best first)
OUTPUT_FORMS_WORK = 200_000  # outputs x e-classes up to which outputs are offered their whole form


MAX_EXACT = 2**53  # integers up to this are exact in float64


def _fits(v: Any) -> bool:
    """Whether float64 holds the exact coefficient ``v`` to rounding: finite, and normal
    unless exact (a subnormal keeps few digits; one under it rounds to 0)."""
    if type(v) is int and -MAX_EXACT <= v <= MAX_EXACT:
        return True
    if type(v) is QC:
        return _fits(v.re) and _fits(v.im)
    try:
        f = float(v)
    except OverflowError:
        return False
    return abs(f) >= sys.float_info.min or f == v


def _writable(p: Poly) -> bool:
    """Whether ``p`` can be written back as float64 constants that mean it: coefficients
    that fit, and exponents exact in float64 (a rounded odd one would be even). A step
    that makes one that is not (``2 * 1e308``, ``x**(3**34)``) is not taken: the class
    stays an atom, and the e-graph keeps the nodes it had."""
    for m, v in p.items():
        if not _fits(v):
            return False
        for _, e in m:
            if not -MAX_EXACT <= e <= MAX_EXACT:
                return False
    return True


def _mono_mul(a: Mono, b: Mono) -> Mono:
    if not a:
        return b
    if not b:
        return a
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i][0] == b[j][0]:
            e = a[i][1] + b[j][1]
            if e:
                out.append((a[i][0], e))
            i += 1
            j += 1
        elif a[i][0] < b[j][0]:
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    out.extend(a[i:])
    out.extend(b[j:])
    return tuple(out)


class _OutOfWork(Exception):
    """A round spent its expansion budget: products of sums stay atoms from here on."""


_work = 0  # monomial products left in this round (the normalizer runs on one thread)


def _add(p: Poly, q: Poly, scale: Any = 1) -> Poly:
    r = dict(p)
    for m, v in q.items():
        s = r.get(m, 0) + scale * v
        if s == 0:
            r.pop(m, None)
        else:
            r[m] = s
    return r


def _mul(p: Poly, q: Poly) -> Poly:
    global _work
    _work -= len(p) * len(q)
    if _work < 0 and len(p) > 1 and len(q) > 1:
        raise _OutOfWork
    r: Poly = {}
    for m1, v1 in p.items():
        for m2, v2 in q.items():
            m = _mono_mul(m1, m2)
            s = r.get(m, 0) + v1 * v2
            if s == 0:
                r.pop(m, None)
            else:
                r[m] = s
    return r


def _scale(p: Poly, k: Any) -> Poly:
    return {m: v * k for m, v in p.items()} if k != 0 else {}


def _atom(c: int) -> Poly:
    return {((c, 1),): ONE}


def _key(p: Poly) -> tuple:
    return tuple(sorted(p.items()))  # by monomial: they are distinct, values never compared


def _ratio(p: Poly, q: Poly) -> Any | None:
    """c with p == c*q exactly, if there is one."""
    if len(p) != len(q) or not q:
        return None
    m0 = next(iter(q))
    if m0 not in p:
        return None
    c = _div(p[m0], q[m0])
    for m, v in q.items():
        if p.get(m) != c * v:
            return None
    return c


def _int_const(p: Poly) -> int | None:
    if len(p) == 1 and () in p:
        v = p[()]
        if isinstance(v, int | Fraction) and v.denominator == 1 and abs(v) <= MAX_POW:
            return int(v)
    return None if p else 0


def _field_type(ty: str) -> bool:
    return ty.startswith(("f", "c"))  # float and complex avals (f64[], c128[2,3], ...)


class Normalizer:
    """One normalization round over a frozen e-graph."""

    def __init__(self, fg: FrozenGraph, ring: KeyRing, max_new: int) -> None:
        self.fg, self.ring, self.max_new = fg, ring, max_new
        self.written = ring.written  # (class key, normal form) pairs written in earlier rounds
        self.nf: list[Poly | None] = [None] * fg.n_classes
        self.nf_key: list[tuple | None] = [None] * fg.n_classes
        self.ty: list[str] = [""] * fg.n_classes
        self.settled_by: list[int] = []
        self.consts: dict[tuple[str, Any], int] = {}
        self.emitted = 0
        self.unions = 0
        self.written_costs: dict[tuple, int] = {}  # normal form key -> written_cost
        # the e-graph's own e-nodes by (constructor, type, operand classes) and constants by
        # (type, value), and the class of each key handed out: a term the writer would
        # write and the e-graph holds already is not written again (a third of them were)
        self.existing: dict[tuple, int] = {}
        for k, node in enumerate(fg.nodes):
            if node.kind == "op" and not node.attrs:
                self.existing.setdefault((node.cons, node.ty, node.kids), fg.cls_of[k])
            elif node.kind == "const":
                self.existing.setdefault(("const", node.ty, node.value), fg.cls_of[k])
        self.cls_of_key: dict[int, int] = {k: c for c, k in fg.key_of.items()}

    # --- normal forms ---
    def node_nf(self, node: ENode, c: int, nf: list[Poly | None]) -> Poly | None:
        """The normal form of one e-node over the operands' forms ``nf``, or None when
        it is not a field operation (or the round's expansion budget is spent)."""
        try:
            return self._node_nf(node, c, nf)
        except _OutOfWork:
            return None

    def _node_nf(self, node: ENode, c: int, nf: list[Poly | None]) -> Poly | None:
        if not _field_type(node.ty):
            return None
        if node.kind == "const":
            re, im = node.value
            v: Any = QC(Fraction(re), Fraction(im)) if node.ty.startswith("c") else _exact(re)
            return {(): v} if v != 0 else {}
        if node.kind != "op" or node.prim not in ARITH or node.attrs:
            return None
        k = node.kids
        p = nf[k[0]]
        q = nf[k[1]] if len(k) > 1 else None
        if p is None or (len(k) > 1 and q is None):
            return None
        match node.prim:
            case "add":
                r = self._together(_add(p, q))
            case "sub":
                r = self._together(_add(p, q, -1))
            case "neg":
                r = _scale(p, -1)
            case "mul":
                r = self._product(p, q, k[0], k[1])
            case "div":
                r = self._quotient(p, q, k[1])
            case "pow":
                n = _int_const(q)
                if n is None:
                    return None
                r = self._power(p, n, k[0])
            case _:
                return None
        return r if r is not None and len(r) <= MAX_TERMS and _writable(r) else None

    def _together(self, p: Poly) -> Poly:
        """``p`` over a common denominator when that makes the numerator smaller:
        ``v/q - v*s/q**2`` with ``q = k + s`` is ``v*k/q**2`` (the numerator times the
        denominators' sums, expanded, cancels)."""
        if len(p) < 2 or _work < 0:
            return p
        den: dict[int, int] = {}
        for m in p:
            for a, e in m:
                if e < 0 and self.nf[a] is not None and len(self.nf[a]) > 1:
                    den[a] = max(den.get(a, 0), -e)
        if not den or sum(den.values()) > MAX_POW:
            return p
        num = p
        for a, k in den.items():
            num = _mul(num, {((a, k),): ONE})
        expanded: Poly = {}
        for m, v in num.items():  # the denominators' atoms, now with exponents >= 0, expanded
            term: Poly = {tuple((a, e) for a, e in m if a not in den): v}
            for a, e in m:
                if a in den:
                    for _ in range(e):
                        term = _mul(term, self.nf[a])  # type: ignore[arg-type]
                        if len(term) > EXPAND_MAX or _work < 0:
                            return p
            expanded = _add(expanded, term)
            if len(expanded) > EXPAND_MAX:
                return p
        if len(expanded) >= len(p):
            return p
        return _mul(expanded, {tuple(sorted((a, -k) for a, k in den.items())): ONE})

    def _product(self, p: Poly, q: Poly, a: int, b: int) -> Poly:
        for x, y, yc in ((p, q, b), (q, p, a)):  # a sum times its reciprocal cancels
            if len(x) == 1 and len(y) > 1:
                ((m, _),) = x.items()
                for atom, e in m:
                    if e < 0 and self.nf_key[atom] == self.nf_key[yc]:
                        return _mul(x, {((atom, 1),): ONE})
        if len(p) * len(q) > EXPAND_MAX:
            if len(p) > 1:
                p = _atom(a)
            if len(q) > 1:
                q = _atom(b)
        return _mul(p, q)

    def _quotient(self, p: Poly, q: Poly, b: int) -> Poly | None:
        if not q:
            return None  # division by zero: leave it to run time
        if len(q) > 1:
            c = _ratio(p, q)
            if c is not None:
                return {(): c}
            q = self.factored[b]  # a product of sums divides as one: (k+s)**2, not k*k + ...
        if len(q) == 1:
            ((m, v),) = q.items()
            return _mul(p, {tuple((x, -e) for x, e in m): _div(1, v)})
        return _mul(p, {((b, -1),): ONE})

    def _factored(self, node: ENode, c: int, nf: Poly) -> Poly:
        """``c`` as a product of powers of atoms with sums kept whole, where it is one."""
        if len(nf) <= 1:
            return nf
        f = self.factored
        k = node.kids
        if node.kind == "op" and node.prim in ("mul", "div", "neg", "pow") and all(f[x] is not None for x in k):
            a = f[k[0]]
            if node.prim == "neg" and len(a) == 1:
                return _scale(a, -1)
            b = f[k[1]] if len(k) > 1 else None
            if node.prim == "mul" and len(a) == 1 and len(b) == 1:
                return _mul(a, b)
            if node.prim == "div" and len(a) == 1 and len(b) == 1 and next(iter(b.values())):
                ((m, v),) = b.items()
                return _mul(a, {tuple((x, -e) for x, e in m): _div(1, v)})
            if node.prim == "pow" and len(a) == 1:
                n = _int_const(self.nf[k[1]])  # type: ignore[arg-type]
                if n:
                    ((m, v),) = a.items()
                    return {tuple((x, e * n) for x, e in m): _ipow(v, n)}
        return _atom(c)

    def _power(self, p: Poly, n: int, a: int) -> Poly | None:
        if n == 0:
            return None  # pow(x, 0) is 1 only where x is not 0 or nan: leave it to rules
        if len(p) == 1:
            ((m, v),) = p.items()
            if v == 0:
                return None
            return {tuple((x, e * n) for x, e in m): _ipow(v, n)}
        if n < 0 or len(p) ** n > EXPAND_MAX:
            return {((a, n),): ONE}
        r: Poly = {(): ONE}
        for _ in range(n):
            r = _mul(r, p)
        return r

    def compute(self) -> list[int]:
        """Normal forms of every class, bottom-up; returns the settle order. The work of
        expanding products is bounded by WORK_PER_CLASS per class.

        Two flavours: ``nf`` expands through everything (within the size limits) and
        decides which classes are equal; ``shallow`` keeps a sum that has several users
        as an atom, so that writing it back does not copy a shared sum into each user
        (``2*r*(1 - t*t)`` with ``r`` used elsewhere stays a product of ``r``)."""
        global _work
        fg = self.fg
        _work = WORK_PER_CLASS * fg.n_classes + 1000
        order, self.settled_by = fg.settle_order()
        # users through the settling e-nodes only: an alternative form of a class (what
        # the e-graph proved equal) is not a second user of its operands
        users: list[set[int]] = [set() for _ in range(fg.n_classes)]
        for c in order:
            for kid in fg.nodes[self.settled_by[c]].kids:
                users[kid].add(c)
        for c in fg.out_cls.values():
            users[c].add(-1)
        self.shared = [len(u) > 1 for u in users]
        self.shallow: list[Poly | None] = [None] * fg.n_classes
        self.factored: list[Poly | None] = [None] * fg.n_classes
        shallow_in: list[Poly | None] = [None] * fg.n_classes  # as operands see them
        by_key: dict[tuple, int] = {}
        pairs: list[tuple[int, int]] = []
        for c in order:
            node = fg.nodes[self.settled_by[c]]
            self.ty[c] = node.ty
            if not _field_type(node.ty):
                continue
            nf = self.node_nf(node, c, self.nf)
            if nf is None:
                nf = _atom(c)
            self.nf[c] = nf
            self.factored[c] = self._factored(node, c, nf)
            sh = self.node_nf(node, c, shallow_in)
            if sh is None:
                sh = _atom(c)
            self.shallow[c] = sh
            shallow_in[c] = _atom(c) if self.shared[c] and len(sh) > 1 else sh
            key = (node.ty, _key(nf))
            self.nf_key[c] = key
            first = by_key.setdefault(key, c)
            if first != c:
                pairs.append((first, c))
        self.pairs = pairs
        return order

    # --- writing back ---
    def atom_op(self, c: int) -> str:
        node = self.fg.nodes[self.settled_by[c]]
        return node.prim or node.kind

    def key(self, c: int) -> int:
        """A key in class ``c``: its own, or a fresh one attached through its settling
        e-node (whose operands settled earlier)."""
        k = self.fg.key_of.get(c)
        if k is not None:
            return k
        stack = [c]
        while stack:
            x = stack[-1]
            if x in self.fg.key_of:
                stack.pop()
                continue
            node = self.fg.nodes[self.settled_by[x]]
            todo = [kid for kid in node.kids if kid not in self.fg.key_of]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            k = self.fg.key_of[x] = self._write(node, [self.fg.key_of[kid] for kid in node.kids])
            self.cls_of_key[k] = x
        return self.fg.key_of[c]

    def _write(self, node: ENode, kid_keys: list[int], into: int | None = None) -> int:
        """A term row for ``node`` over keyed operands; returns its key (``into``: an
        existing key whose class the term joins)."""
        k = self.ring.fresh() if into is None else into
        self.emitted += 1
        if node.kind == "const":
            rows = self.ring.add_rows("Const", ["i64", "String", "f64", "f64"], "(union (Key c0) (Const c1 c2 c3))")
            rows.append(f"{k}\t{node.ty}\t{f64_literal(node.value[0])}\t{f64_literal(node.value[1])}")
        elif node.kind == "inp":
            rows = self.ring.add_rows("Inp", ["i64", "String", "i64"], "(union (Key c0) (Inp c1 c2))")
            rows.append(f"{k}\t{node.ty}\t{node.value}")
        elif node.kind == "lit":
            rows = self.ring.add_rows("Lit", ["i64", "String", "i64"], "(union (Key c0) (Lit c1 c2))")
            rows.append(f"{k}\t{node.ty}\t{node.value}")
        else:
            assert node.cons is not None
            rows = self.ring.add_rows(node.cons, *term_schema(node.cons, len(kid_keys), len(node.attrs)))
            rows.append("\t".join(map(str, (k, node.ty, *kid_keys, *node.attrs))))
        return k

    def _op(self, prim: str, ty: str, kids: list[int], into: int | None = None) -> int:
        """``_write`` of an attribute-less op, spelt out (a round writes thousands)."""
        ring = self.ring
        cons = "op_" + prim
        known = self.cls_of_key
        classes = tuple([known.get(kid, -1) for kid in kids])
        if -1 not in classes:
            c = self.existing.get((cons, ty, classes))
            if c is not None and (into is None or known.get(into) == c):
                self.emitted += 1  # counted as written: the round's budget decisions stay the same
                return self.key(c) if into is None else into
        if into is None:
            k = ring.next
            ring.next = k + 1
        else:
            k = into
        self.emitted += 1
        rows = ring.rows.get(cons)
        if rows is None:
            rows = ring.add_rows(cons, *term_schema(cons, len(kids), 0))
        rows.append("\t".join([str(k), ty, *map(str, kids)]))
        return k

    def _const(self, ty: str, v: Any) -> int:
        k = self.consts.get((ty, v))
        if k is None:
            c = complex(v)
            value = (c.real, c.imag)
            cls = self.existing.get(("const", ty, value))
            if cls is not None:
                self.emitted += 1
                k = self.key(cls)
            else:
                k = self._write(ENode("const", None, None, ty, (), (), value), [])
            self.consts[(ty, v)] = k
        return k

    def write_back(self, own: list[float], tree: list[float]) -> None:
        """Union rows for classes with equal normal forms, and compact forms: the shallow
        normal form where it is cheaper than what the class holds of its own (``own``),
        the full one where it is cheaper than the class's whole tree (``tree``).
        Extraction, which counts shared operands once, then chooses."""
        eq = self.ring.add_rows("Eq", *UNION_ROWS)
        for a, b in self.pairs:
            eq.append(f"{self.key(a)}\t{self.key(b)}")
            self.unions += 1
        candidates: list[tuple[float, int, int, Poly]] = []
        for c in range(self.fg.n_classes):
            # the full form expands shared sums into this class: only when barely bigger
            # than what the class holds of its own (it can still gain by collecting
            # constants across terms); the shallow form keeps sharing
            for flavour, (nf, worth) in enumerate(((self.shallow[c], tree[c]), (self.nf[c], own[c] + FULL_SLACK))):
                if nf is None:
                    continue
                if len(nf) == 1 and next(iter(nf.items())) == (((c, 1),), ONE):
                    continue  # an atom: nothing to say
                if flavour and nf == self.shallow[c]:
                    continue
                cost = _cost(nf)
                if cost >= worth:  # the plain sum is no better: the Horner-grouped one may be
                    if not 3 <= len(nf) <= 12 or _min_ops(nf) > worth:
                        continue
                    key = _key(nf)
                    cost = self.written_costs.get(key, -1)
                    if cost < 0:
                        cost = self.written_costs[key] = written_cost(self, self.ty[c], nf)
                    if cost > worth:
                        continue
                candidates.append((worth - cost, c, flavour, nf))
        candidates.extend(self._output_forms())
        # the forms that save most first, as many as a round may write
        candidates.sort(key=lambda t: (-t[0], t[1], t[2]))
        for _, c, _, nf in candidates[: FORMS_PER_ROUND + self.fg.n_classes // 2]:
            if self.emitted >= self.max_new:
                break
            done = (self.key(c), self.ty[c], _key(nf))
            if done in self.written:  # the class holds this form since an earlier round
                continue
            self.written.add(done)
            _Writer(self, self.ty[c]).sum(_terms(nf), self.key(c))


    def _reach(self, roots: list[int]) -> set[int]:
        """The op classes the settling e-nodes of ``roots`` reach (them included)."""
        seen: set[int] = set()
        stack = list(roots)
        while stack:
            c = stack.pop()
            if c in seen:
                continue
            seen.add(c)
            stack.extend(self.fg.nodes[self.settled_by[c]].kids)
        return {c for c in seen if self.fg.nodes[self.settled_by[c]].kind == "op"}

    def _output_forms(self) -> list[tuple[float, int, int, Poly]]:
        """The full normal form of an output, where it with the atoms it needs costs fewer
        ops than everything the output reaches now (ops the other outputs reach are free
        to both). The per-class test of ``write_back``
        (against what the class holds of its own) keeps a shared sum from being copied into
        each of its users; an output has no user, and when its operands are shared (the
        pushed negation forms share them) that test never lets its whole form in."""
        out: list[tuple[float, int, int, Poly]] = []
        outs = sorted(set(self.fg.out_cls.values()))
        if not self.settled_by or len(outs) * self.fg.n_classes > OUTPUT_FORMS_WORK:
            return out
        reach = {o: self._reach([o]) for o in outs if self.settled_by[o] >= 0}
        users: dict[int, int] = {}  # op class -> outputs reaching it
        for r in reach.values():
            for k in r:
                users[k] = users.get(k, 0) + 1
        for c in outs:
            nf = self.nf[c]
            if nf is None or c not in reach or (len(nf) == 1 and next(iter(nf.items())) == (((c, 1),), ONE)):
                continue
            atoms = sorted({a for m in nf for a, _ in m})
            if any(self.settled_by[a] < 0 for a in atoms):
                continue
            cost = _cost(nf)
            if 3 <= len(nf) <= 12:
                key = _key(nf)
                wc = self.written_costs.get(key, -1)
                if wc < 0:
                    wc = self.written_costs[key] = written_cost(self, self.ty[c], nf)
                cost = min(cost, wc)
            # ops the other outputs need anyway cost this one nothing
            mine = reach[c]
            now = sum(1 for k in mine if users[k] == 1)
            total = cost + sum(1 for k in self._reach(atoms) if users.get(k, 0) == (k in mine))
            if total < now:
                out.append((float(now - total), c, 1, nf))
        return out


def _terms(p: Poly) -> list[tuple[Mono, Any]]:
    return sorted(p.items())  # by monomial (distinct)


def _cost(p: Poly) -> float:
    """Ops of the plainly written sum of products (an upper bound of the compact form;
    constants cost nothing, as in an op count)."""
    ops = len(p) - 1
    for m, v in p.items():
        if m:
            ops += len(m) - 1
            for _, e in m:
                e = -e if e < 0 else e
                ops += e - 1 if e <= 2 else 1
            if v != 1 and v != -1:
                ops += 1
    return ops


def _min_ops(p: Poly) -> int:
    """A lower bound of the ops of any way of writing ``p``: its terms need one add or
    sub each but the first, and every atom is a leaf of a tree of binary ops."""
    return max(len(p), len({a for m in p for a, _ in m})) - 1


def _negative(v: Any) -> bool:
    t = type(v)  # not isinstance: Fraction is an ABC-registered number, slow to test
    return (t is int or t is Fraction) and v < 0


class _Writer:
    """Writes a normal form compactly as terms over keyed atoms."""

    def __init__(self, norm: Normalizer, ty: str) -> None:
        self.n, self.ty = norm, ty

    def op(self, prim: str, *kids: int, into: int | None = None) -> int:
        return self.n._op(prim, self.ty, list(kids), into)

    def const(self, v: Any) -> int:
        return self.n._const(self.ty, v)

    def atom(self, a: int) -> int:
        return self.n.key(a)

    def eq(self, a: int, b: int) -> None:
        known = self.n.cls_of_key
        if a in known and known[a] == known.get(b):
            return  # one class already
        self.n.ring.add_rows("Eq", *UNION_ROWS).append(f"{a}\t{b}")


    def sum(self, terms: list[tuple[Mono, Any]], into: int | None = None) -> int:
        if len(terms) == 1 and terms[0][0] and _negative(terms[0][1]) and terms[0][1] != -1:
            (m, v), = terms  # c * m with c < 0: one product, not a negated one
            return self.op("mul", self.const(v), self._mono(m), into=into)
        ref, negated = self._sum(terms)
        if negated:
            return self.op("neg", ref, into=into)
        if into is not None:  # join the class: through a neutral union
            self.eq(into, ref)
        return ref

    def _sum(self, terms: list[tuple[Mono, Any]]) -> tuple[int, bool]:
        """(ref, negated): the terms' sum is ``-ref`` when ``negated``."""
        if not terms:
            return self.const(Fraction(0)), False
        if len(terms) == 1:
            return self._term(*terms[0])
        common = _common_factor([m for m, _ in terms])
        if common:
            inner = [(_mono_mul(m, tuple((a, -e) for a, e in common)), v) for m, v in terms]
            ref, neg = self._sum(inner)
            return self.op("mul", self._mono(common), ref), neg
        if all(_negative(v) for _, v in terms):
            ref, neg = self._sum([(m, -v) for m, v in terms])
            return ref, not neg
        counts: dict[int, int] = {}
        for m, _ in terms:
            for a, e in m:
                if e > 0:
                    counts[a] = counts.get(a, 0) + 1
        best = max(sorted(counts), key=lambda a: counts[a], default=None)
        if best is not None and counts[best] >= 2 and counts[best] < len(terms):
            with_a = [(m, v) for m, v in terms if any(a == best and e > 0 for a, e in m)]
            rest = [(m, v) for m, v in terms if not any(a == best and e > 0 for a, e in m)]
            return self._combine(self._sum(with_a), self._sum(rest))
        pos = [t for t in terms if not _negative(t[1])]
        neg = [(m, -v) for m, v in terms if _negative(v)]
        acc = None
        for m, v in pos:
            r, _ = self._term(m, v)
            acc = r if acc is None else self.op("add", acc, r)
        for m, v in neg:
            r, _ = self._term(m, v)
            acc = self.op("neg", r) if acc is None else self.op("sub", acc, r)
        assert acc is not None
        return acc, False

    def _combine(self, a: tuple[int, bool], b: tuple[int, bool]) -> tuple[int, bool]:
        (ra, na), (rb, nb) = a, b
        if not na and not nb:
            return self.op("add", ra, rb), False
        if not na and nb:
            return self.op("sub", ra, rb), False
        if na and not nb:
            return self.op("sub", rb, ra), False
        return self.op("add", ra, rb), True

    def _term(self, m: Mono, v: Any) -> tuple[int, bool]:
        neg = _negative(v)
        mag = -v if neg else v
        if not m:
            return self.const(mag), neg
        ref = self._mono(m)
        if mag != 1:
            ref = self.op("mul", self.const(mag), ref)
        return ref, neg

    def _mono(self, m: Mono) -> int:
        num = [(a, e) for a, e in m if e > 0]
        den = [(a, -e) for a, e in m if e < 0]
        top = self._product(num) if num else None
        if not den:
            assert top is not None
            return top
        bottom = self._product(den)
        return self.op("div", top if top is not None else self.const(ONE), bottom)

    def _product(self, factors: list[tuple[int, int]]) -> int:
        """Factors in a canonical order, by the op of each atom first (cos before sin),
        so that rewrites over products of functions (cos(a)*cos(b) - sin(a)*sin(b)) see
        one order of operands."""
        acc = None
        for a, e in sorted(factors, key=lambda f: (self.n.atom_op(f[0]), f[0])):
            x = self.atom(a)
            if e == 1:
                f = x
            elif e == 2:
                f = self.op("mul", x, x)
            else:
                f = self.op("pow", x, self.const(Fraction(e)))
            acc = f if acc is None else self.op("mul", acc, f)
        assert acc is not None
        return acc


class _Counter(_Writer):
    """The same writing, counting the ops it would write instead (distinct ones)."""

    def __init__(self, norm: Normalizer, ty: str) -> None:
        super().__init__(norm, ty)
        self.ops: dict[tuple, int] = {}

    def op(self, prim: str, *kids: int, into: int | None = None) -> int:
        return self.ops.setdefault((prim, kids), -1 - len(self.ops))

    def const(self, v: Any) -> int:
        return -1_000_000 - hash(v) % 1_000_000

    def atom(self, a: int) -> int:
        return a

    def eq(self, a: int, b: int) -> None:
        pass


def written_cost(norm: Normalizer, ty: str, nf: Poly) -> int:
    """Ops of ``nf`` as ``_Writer`` writes it (Horner-like grouping included)."""
    counter = _Counter(norm, ty)
    counter.sum(_terms(nf), None)
    return len(counter.ops)


def _common_factor(monos: list[Mono]) -> Mono:
    """The largest monomial dividing every one of ``monos`` (exponents of one sign)."""
    first = dict(monos[0])
    for m in monos[1:]:
        d = dict(m)
        for a in list(first):
            e, f = first[a], d.get(a, 0)
            if e > 0 and f > 0:
                first[a] = min(e, f)
            elif e < 0 and f < 0:
                first[a] = max(e, f)
            else:
                del first[a]
        if not first:
            return ()
    return tuple(sorted(first.items()))


def sign_facts(fg: FrozenGraph, order: list[int], assumed: dict[int, int]) -> list[int]:
    """Per class, the sign bits (tidu.simplify.egraph.signs) proven by any of its e-nodes (real
    types only); ``assumed``: bits of input nodes by graph id."""
    facts = [0] * fg.n_classes
    for _ in range(2):  # a second pass sees facts of classes settled later (cycles)
        for c in order:
            f = facts[c]
            for k in fg.members[c]:
                node = fg.nodes[k]
                if node.kind == "inp":
                    f |= assumed.get(node.value, 0)
                    continue
                if node.ty.startswith(("c", "b")) or node.kind == "lit":
                    continue
                f |= constant_bits(node.value[0]) if node.kind == "const" else op_bits(node.prim, node.kids, facts)
            facts[c] = f
    return facts


def own_sizes(fg: FrozenGraph, order: list[int], settled_by: list[int], shared: list[bool]) -> list[float]:
    """A size per class: the ops of its settling e-node's tree that it does not share
    (operands with other users count 0; inputs and constants 0)."""
    size = [0.0] * fg.n_classes
    for c in order:
        node = fg.nodes[settled_by[c]]
        if node.kind == "op":
            size[c] = 1.0 + sum(0.0 if shared[k] else size[k] for k in node.kids)
    return size


def normalize_round(fg: FrozenGraph, ring: KeyRing, max_new: int, guards: set[str],
                    assumed: dict[int, int] | None = None) -> dict[str, int]:
    """Normal forms of ``fg``'s classes; writes union and term rows into ``ring``, and
    the facts of the sign ``guards`` (``positive``...) the rules use."""
    norm = Normalizer(fg, ring, max_new)
    order = norm.compute()
    norm.write_back(own_sizes(fg, order, norm.settled_by, norm.shared),
                    own_sizes(fg, order, norm.settled_by, [False] * fg.n_classes))
    wanted = [(g, bit) for g, bit in GUARD_BITS.items() if g in guards]
    facts = 0
    if wanted:
        signs = sign_facts(fg, order, assumed or {})
        for g, bit in wanted:
            rows = ring.add_rows("g_" + g, ["i64"], f"(g_{g} (Key c0))")
            for c in order:
                if signs[c] & bit:
                    k = norm.key(c)
                    if (g, k) not in ring.written:  # facts are forever: write each once
                        ring.written.add((g, k))
                        rows.append(str(k))
                        facts += 1
    return {"unions": norm.unions, "emitted": norm.emitted, "facts": facts}


__all__ = ["MAX_TERMS", "Normalizer", "normalize_round"]
