"""K-th derivatives of elementary functions in their differential ring.

A function built from +, -, *, /, powers with constant exponents, exp, log, sin, cos and
tanh is a polynomial in a few *atoms*: its inputs, and one atom per transcendental value
(``exp(P)``, ``log(P)``, ``sin(P)``/``cos(P)``, ``tanh(P)``) or power of a polynomial
that is not a monomial (``(x^2 + 1)^(1/2)``, ``1/(1 + exp(-x))``). The derivative of
every atom is again a polynomial in atoms (``tanh' = P'(1 - tanh^2)``,
``d b^e = e b^(e-1) b'``), so the K-th derivative is a polynomial too, found exactly by
differentiating K times, term by term, with rational coefficients. This is how a
computer algebra system differentiates; what keeps the polynomial small is that it is
reduced by the relations between atoms after every step:

- ``cos(P)^2 -> 1 - sin(P)^2``;
- for an atom ``B = b^e`` of a polynomial ``b = c m + rest`` (``m`` its leading
  monomial): ``m B^e -> (B^(e+1) - rest B^e) / c`` where ``e < 0``, and ``B^e ->
  b B^(e-1)`` where ``e >= 1``. For the logistic ``1/(1 + exp(-x))`` every derivative is
  then a polynomial in the logistic alone; for ``(x + 2)^2.5`` the K-th derivative is one
  term;
- ``exp(q P) = exp(P)^q``: exponentials of multiples of one argument are powers of one
  atom, so ``exp(x) exp(-x)`` is 1.

The result is written as a multivariate Horner scheme (common factors taken out, the
atom with the fewest distinct powers split first) in tidu operations, so the e-graph,
the printers and every back end see an ordinary graph. Functions outside this class
(``abs``, ``select``, special functions, complex values, arrays) raise
``NotElementary``; ``tidu diff`` then uses Taylor mode (``tidu.jet``).
"""

from __future__ import annotations

import inspect
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from tidu import numpy as tnp
from tidu.core.graph import MaterializedGraph
from tidu.core.keys import Literal
from tidu.ops.graph_sympy import INLINE_OPS, compact, ops_at_most
from tidu.transforms.inspection import make_graph

Monomial = tuple[tuple[int, Fraction], ...]  # (atom, exponent) pairs, by atom
Poly = dict[Monomial, Fraction]

ONE: Monomial = ()
# A reduction that has not finished after this many rewrites of one term is a bug in the
# relations (they always lower a term); the caller falls back to Taylor mode.
MAX_REWRITES = 100_000
# Positive integer powers of a polynomial up to this exponent are multiplied out; above
# it the power is an atom of its own.
EXPAND_POWER = 4
# A derivative whose polynomial passes this many terms is given up (``NotElementary``):
# past it Taylor mode is the smaller and the quicker.
MAX_TERMS = 20_000


class NotElementary(ValueError):
    """The function is not a polynomial in exp, log, sin, cos, tanh, asin, acos, atan and
    powers of its inputs (the message names the operation)."""


@dataclass
class Atom:
    kind: str  # "input", "exp", "log", "sin", "cos", "tanh", "asin", "acos", "atan", "power" (of base), "const"
    arg: Poly | None = None  # the argument (exp, log, sin, cos, tanh, asin, acos, atan) or base (power)
    index: int = -1  # the input's position
    derivative: Poly = field(default_factory=dict)  # d atom / d x
    lead: tuple[Monomial, Fraction] | None = None  # power: the base's leading term
    rest: Poly | None = None  # power: the base less its leading term


def _key(p: Poly) -> tuple:
    return tuple(sorted(p.items()))


def _mono_mul(a: Monomial, b: Monomial) -> Monomial:
    if not a:
        return b
    if not b:
        return a
    out = dict(a)
    for k, e in b:
        s = out.get(k, 0) + e
        if s:
            out[k] = s
        else:
            del out[k]
    return tuple(sorted(out.items()))


def _mono_pow(a: Monomial, p: Fraction) -> Monomial:
    return tuple((k, e * p) for k, e in a) if p else ONE


def _degree(m: Monomial) -> Fraction:
    return sum((e for _, e in m), Fraction(0))


class Ring:
    """The atoms of one function and polynomial arithmetic reduced by their relations."""

    def __init__(self, variables: int, wrt: int) -> None:
        self.atoms: list[Atom] = []
        self.by_key: dict[tuple, int] = {}
        self.inputs = [self._new(Atom("input", index=i, derivative={ONE: Fraction(int(i == wrt))} if i == wrt
                                      else {}), ("input", i)) for i in range(variables)]
        self.cos_of: dict[int, int] = {}  # cos atom -> its sin atom

    def _new(self, atom: Atom, key: tuple) -> int:
        self.by_key[key] = len(self.atoms)
        self.atoms.append(atom)
        return len(self.atoms) - 1

    # --- polynomials -------------------------------------------------------------------

    @staticmethod
    def const(c: Fraction | int) -> Poly:
        return {ONE: Fraction(c)} if c else {}

    @staticmethod
    def atom_poly(a: int, e: Fraction = Fraction(1)) -> Poly:
        return {((a, e),): Fraction(1)}

    def add(self, p: Poly, q: Poly, scale: Fraction = Fraction(1)) -> Poly:
        out = dict(p)
        for m, c in q.items():
            s = out.get(m, 0) + scale * c
            if s:
                out[m] = s
            else:
                out.pop(m, None)
        return out

    def mul(self, p: Poly, q: Poly) -> Poly:
        out: Poly = {}
        for m1, c1 in p.items():
            for m2, c2 in q.items():
                self._accumulate(out, _mono_mul(m1, m2), c1 * c2)
        return out

    def scale(self, p: Poly, c: Fraction) -> Poly:
        return {m: v * c for m, v in p.items()} if c else {}

    def _accumulate(self, out: Poly, m: Monomial, c: Fraction) -> None:
        """``out += c m``, ``m`` reduced by the relations first."""
        work = [(m, c)]
        rewrites = 0
        while work:
            m, c = work.pop()
            step = self._rewrite(m)
            if step is None:
                s = out.get(m, 0) + c
                if s:
                    out[m] = s
                else:
                    del out[m]
                continue
            rewrites += 1
            if rewrites > MAX_REWRITES:
                raise NotElementary("the relations between the atoms did not terminate")
            work.extend((m2, c * c2) for m2, c2 in step)

    def _rewrite(self, m: Monomial) -> list[tuple[Monomial, Fraction]] | None:
        """One relation applied to ``m``: the terms it equals, or None where none applies."""
        exps = dict(m)
        for a, e in m:
            atom = self.atoms[a]
            if atom.kind == "cos" and e >= 2 and e.denominator == 1:
                s = self.cos_of[a]
                base = _mono_mul(m, ((a, Fraction(-2)),))
                return [(base, Fraction(1)), (_mono_mul(base, ((s, Fraction(2)),)), Fraction(-1))]
            if atom.kind != "power":
                continue
            if e >= 1:  # b^e = b * b^(e-1)
                lower = _mono_mul(m, ((a, Fraction(-1)),))
                return [(_mono_mul(lower, bm), bc) for bm, bc in atom.arg.items()]  # type: ignore[union-attr]
            if e < 0 and atom.lead is not None:
                lm, lc = atom.lead
                if all(exps.get(k, 0) >= le for k, le in lm):  # m = lm * b^e * q
                    q = _mono_mul(m, _mono_pow(lm, Fraction(-1)))
                    up = _mono_mul(q, ((a, Fraction(1)),))
                    out = [(up, 1 / lc)]
                    out += [(_mono_mul(q, rm), -rc / lc) for rm, rc in atom.rest.items()]  # type: ignore[union-attr]
                    return out
        return None

    def reduce(self, p: Poly) -> Poly:
        out: Poly = {}
        for m, c in p.items():
            self._accumulate(out, m, c)
        return out

    # --- atoms -------------------------------------------------------------------------

    def transcendental(self, kind: str, arg: Poly) -> Poly:
        """``kind(arg)`` as a polynomial: exp, log, sin, cos, tanh, asin, acos, atan."""
        if kind == "exp":
            return self._exp(arg)
        if kind in ("sin", "cos"):
            key = _key(arg)
            if ("sin", key) not in self.by_key:
                d = self.differentiate(arg)
                s = self._new(Atom("sin", arg), ("sin", key))
                c = self._new(Atom("cos", arg), ("cos", key))
                self.cos_of[c] = s
                self.atoms[s].derivative = self.mul(d, self.atom_poly(c))
                self.atoms[c].derivative = self.scale(self.mul(d, self.atom_poly(s)), Fraction(-1))
            return self.atom_poly(self.by_key[(kind, key)])
        key = (kind, _key(arg))
        if key in self.by_key:
            return self.atom_poly(self.by_key[key])
        d = self.differentiate(arg)
        if kind == "tanh":
            a = self._new(Atom("tanh", arg), key)
            sech2 = self.add(self.const(1), self.atom_poly(a, Fraction(2)), Fraction(-1))
            self.atoms[a].derivative = self.mul(d, sech2)
            return self.atom_poly(a)
        if kind == "log":
            inverse = self.power(arg, Fraction(-1))
            a = self._new(Atom("log", arg), key)
            self.atoms[a].derivative = self.mul(d, inverse)
            return self.atom_poly(a)
        if kind == "atan":  # atan(u)' = u' / (1 + u^2)
            inverse = self.power(self.add(self.const(1), self.mul(arg, arg)), Fraction(-1))
            a = self._new(Atom("atan", arg), key)
            self.atoms[a].derivative = self.mul(d, inverse)
            return self.atom_poly(a)
        if kind in ("asin", "acos"):  # asin(u)' = u' / sqrt(1 - u^2), acos(u)' its negative
            root = self.power(self.add(self.const(1), self.mul(arg, arg), Fraction(-1)), Fraction(-1, 2))
            a = self._new(Atom(kind, arg), key)
            self.atoms[a].derivative = self.scale(self.mul(d, root), Fraction(1 if kind == "asin" else -1))
            return self.atom_poly(a)
        raise NotElementary(f"no rule for {kind}")

    def _exp(self, arg: Poly) -> Poly:
        """exp(q P) = exp(q0 P)^(q/q0): exponentials of multiples of one argument are powers
        of one atom, the exponential of the first such argument met (the constant term
        split off as a factor exp(c) of its own)."""
        if not arg:
            return self.const(1)
        const = arg.get(ONE)
        if const is not None and len(arg) > 1:
            rest = {m: c for m, c in arg.items() if m != ONE}
            return self.mul(self._exp({ONE: const}), self._exp(rest))
        lead = min(arg)  # deterministic: the least monomial in tuple order
        q = arg[lead]
        key = ("exp", _key({m: c / q for m, c in arg.items()}))
        if key not in self.by_key:
            a = self._new(Atom("exp", arg), key)
            self.atoms[a].derivative = self.mul(self.differentiate(arg), self.atom_poly(a))
        a = self.by_key[key]
        return self.atom_poly(a, q / self.atoms[a].arg[lead])  # type: ignore[index]

    def power(self, base: Poly, p: Fraction) -> Poly:
        """``base ** p`` for a constant ``p``."""
        if p == 0:
            return self.const(1)
        if not base:
            if p < 0:
                raise NotElementary("a negative power of zero")
            return {}
        if len(base) == 1:
            ((m, c),) = base.items()
            cp = _rational_power(c, p)
            if cp is not None:
                return self.reduce({_mono_pow(m, p): cp})
        if p.denominator == 1 and 0 < p <= EXPAND_POWER:
            out = self.const(1)
            for _ in range(int(p)):
                out = self.mul(out, base)
            return out
        key = ("power", _key(base))
        if key not in self.by_key:
            a = self._new(Atom("power", base), key)
            atom = self.atoms[a]
            nonconst = [m for m in base if m != ONE]
            lead = max(nonconst, key=lambda m: (_degree(m), m)) if nonconst else None
            if lead is not None and all(e > 0 and e.denominator == 1 for _, e in lead):
                atom.lead = (lead, base[lead])
                atom.rest = {m: c for m, c in base.items() if m != lead}
            atom.derivative = self.differentiate(base)  # of b itself: d b^e = e b^(e-1) b'
        return self.reduce(self.atom_poly(self.by_key[key], p))

    # --- differentiation -----------------------------------------------------------------

    def differentiate(self, p: Poly) -> Poly:
        """d p / d x: ``d m = sum over its atoms a^e of e (m / a) a'``."""
        out: Poly = {}
        for m, c in p.items():
            for a, e in m:
                d = self.atoms[a].derivative
                if not d:
                    continue
                rest = _mono_mul(m, ((a, Fraction(-1)),))
                for dm, dc in d.items():
                    self._accumulate(out, _mono_mul(rest, dm), c * e * dc)
        return out


def _rational_power(c: Fraction, p: Fraction) -> Fraction | None:
    """``c ** p`` when it is rational (integer p, or a perfect power), else None."""
    if p.denominator == 1:
        return c ** int(p)
    if c < 0:
        return None
    root = []
    for part in (c.numerator, c.denominator):
        r = round(part ** (1 / p.denominator))
        if r ** p.denominator != part:
            return None
        root.append(r)
    return Fraction(root[0], root[1]) ** p.numerator


def _gcd(values: list[Fraction]) -> Fraction:
    """The greatest common divisor of rationals (gcd of numerators over lcm of denominators)."""
    num, den = 0, 1
    for v in values:
        num = math.gcd(num, v.numerator)
        den = den * v.denominator // math.gcd(den, v.denominator)
    return Fraction(num, den)


# --- a traced graph as a polynomial ------------------------------------------------------

_REAL = ("float16", "bfloat16", "float32", "float64")


def _node_poly(ring: Ring, n: Any, args: list[Poly]) -> Poly:
    op = n.op
    if op == "constant":
        value = np.asarray(n.attrs["value"].array if isinstance(n.attrs["value"], Literal) else n.attrs["value"])
        v = float(value) if value.shape == () and value.dtype.kind in "fiub" else math.nan
        if not math.isfinite(v):
            raise NotElementary(f"the constant {value!r} is not a finite real number")
        simple = Fraction(v).limit_denominator(10**6)  # 1/3 for float64's 0.333..., as to_sympy reads it
        return ring.const(simple if float(simple) == v else Fraction(v))
    if op == "convert":
        return args[0]
    if op == "add":
        return ring.add(args[0], args[1])
    if op == "sub":
        return ring.add(args[0], args[1], Fraction(-1))
    if op == "neg":
        return ring.scale(args[0], Fraction(-1))
    if op == "mul":
        return ring.mul(args[0], args[1])
    if op == "div":
        return ring.mul(args[0], ring.power(args[1], Fraction(-1)))
    if op == "pow":
        exponent = args[1]
        if not exponent or set(exponent) == {ONE}:
            return ring.power(args[0], exponent.get(ONE, Fraction(0)))
        return ring.transcendental("exp", ring.mul(exponent, ring.transcendental("log", args[0])))
    if op in ("exp", "log", "sin", "cos", "tanh", "asin", "acos", "atan"):
        return ring.transcendental(op, args[0])
    if op == "expm1":
        return ring.add(ring.transcendental("exp", args[0]), ring.const(-1))
    if op == "log1p":
        return ring.transcendental("log", ring.add(args[0], ring.const(1)))
    if op in ("sinh", "cosh"):  # (exp(x) -+ exp(-x)) / 2, exactly, in the ring
        grow = ring.transcendental("exp", args[0])
        decay = ring.transcendental("exp", ring.scale(args[0], Fraction(-1)))
        return ring.scale(ring.add(grow, decay, Fraction(-1 if op == "sinh" else 1)), Fraction(1, 2))
    if op == "tan":  # sin(x) / cos(x)
        return ring.mul(ring.transcendental("sin", args[0]),
                        ring.power(ring.transcendental("cos", args[0]), Fraction(-1)))
    if op == "logistic":  # 1 / (1 + exp(-x)): its derivatives are polynomials in it
        decay = ring.transcendental("exp", ring.scale(args[0], Fraction(-1)))
        return ring.power(ring.add(decay, ring.const(1)), Fraction(-1))
    if op == "sqrt":
        return ring.power(args[0], Fraction(1, 2))
    if op == "rsqrt":
        return ring.power(args[0], Fraction(-1, 2))
    raise NotElementary(f"{op} is not one of the elementary operations (+ - * / pow exp log sin cos tan tanh "
                        "sinh cosh sqrt log1p expm1 asin acos atan logistic)")


def polynomial(graph: MaterializedGraph, wrt: int) -> tuple[Ring, Poly]:
    """The ring of ``graph``'s atoms (differentiating by input ``wrt``) and its one output
    as a polynomial in them."""
    if len(graph.outputs) != 1:
        raise NotElementary(f"the function has {len(graph.outputs)} outputs, not one")
    ring = Ring(len(graph.inputs), wrt)
    vals: list[Poly] = [{}] * len(graph.nodes)
    for pos, i in enumerate(graph.inputs):
        vals[i] = ring.atom_poly(ring.inputs[pos])
    for i, n in enumerate(graph.nodes):
        if n.aval.shape != () or n.aval.dtype not in _REAL + ("bool",) * (n.op == "constant"):
            raise NotElementary(f"a value of type {n.aval} (only real scalars are elementary)")
        if n.op is not None:
            vals[i] = _node_poly(ring, n, [vals[j] for j in n.inputs])
    return ring, vals[graph.outputs[0]]


# --- a polynomial as tidu operations -----------------------------------------------------


class _TiduAlgebra:
    """Values as tidu operations (traced or eager)."""

    @staticmethod
    def const(c: Fraction) -> Any:
        return float(c)

    @staticmethod
    def func(kind: str, v: Any) -> Any:
        return getattr(tnp, kind)(v)

    @staticmethod
    def pow(v: Any, r: Fraction) -> Any:
        return v ** float(r)


class _SympyAlgebra:
    """Values as SymPy expressions with exact rational coefficients."""

    @staticmethod
    def const(c: Fraction) -> Any:
        import sympy

        return sympy.Rational(c.numerator, c.denominator)

    @staticmethod
    def func(kind: str, v: Any) -> Any:
        import sympy

        return getattr(sympy, kind)(v)

    @staticmethod
    def pow(v: Any, r: Fraction) -> Any:
        import sympy

        return v ** sympy.Rational(r.numerator, r.denominator)


class _Emitter:
    """Writes polynomials of ``ring`` as values of ``algebra`` on ``args`` (Horner schemes).

    Each power of an atom and each polynomial is written once (memoized by key); ``uses``
    counts how often each is asked for, and a key in ``names`` is written as a new symbol
    (``name(key, value)``) the first time it is asked for: a shared value printed once."""

    def __init__(self, ring: Ring, args: Sequence[Any], algebra: Any = _TiduAlgebra,
                 names: set[tuple] | None = None, name: Callable[[Any], Any] | None = None) -> None:
        self.ring = ring
        self.args = args
        self.alg = algebra
        self.memo: dict[tuple, Any] = {}
        self.uses: dict[tuple, int] = {}
        self.names = names or set()
        self.name = name

    def _memo(self, key: tuple, make: Callable[[], Any]) -> Any:
        self.uses[key] = self.uses.get(key, 0) + 1
        if key not in self.memo:
            value = make()
            self.memo[key] = self.name(value) if key in self.names and self.name else value
        return self.memo[key]

    def power(self, a: int, r: Fraction) -> Any:
        """The value of atom ``a`` to the power ``r``."""
        return self._memo(("power", a, r), lambda: self._power(a, r))

    def _power(self, a: int, r: Fraction) -> Any:
        atom = self.ring.atoms[a]
        if atom.kind == "exp":  # exp(P0)^r = exp(r P0)
            return self.alg.func("exp", self.poly(self.ring.scale(atom.arg, r)))  # type: ignore[arg-type]
        if r != 1:
            base = self.power(a, Fraction(1))
            if r == -1:
                return self.alg.const(Fraction(1)) / base
            if r == 2:
                return base * base
            if r == Fraction(1, 2):
                return self.alg.func("sqrt", base)
            return self.alg.pow(base, r)
        if atom.kind == "input":
            return self.args[atom.index]
        if atom.kind == "power":
            return self.poly(atom.arg)  # type: ignore[arg-type]
        return self.alg.func(atom.kind, self.poly(atom.arg))  # type: ignore[arg-type]

    def monomial(self, m: Monomial) -> Any:
        value = None
        for a, e in m:
            v = self.power(a, e)
            value = v if value is None else value * v
        return value

    def signed(self, p: Poly) -> tuple[bool, Any]:
        """(negative, value of +-p): ``p`` or, where every coefficient is negative, ``-p``."""
        if p and all(c < 0 for c in p.values()):
            return True, self.poly({m: -c for m, c in p.items()})
        return False, self.poly(p)

    def poly(self, p: Poly) -> Any:
        return self._memo(("poly", _key(p)), lambda: self._poly(p))

    def _poly(self, p: Poly) -> Any:
        if not p:
            return self.alg.const(Fraction(0))
        if len(p) == 1:
            ((m, c),) = p.items()
            if not m:
                return self.alg.const(c)
            v = self.monomial(m)
            return v if c == 1 else -v if c == -1 else v * self.alg.const(c)
        # a common monomial factor: the least power of an atom every term has to a positive
        # power, the greatest of one every term has to a negative power
        atoms = sorted({a for m in p for a, _ in m})
        exps = {a: [dict(m).get(a, Fraction(0)) for m in p] for a in atoms}
        content = tuple((a, min(es) if es[0] > 0 else max(es)) for a, es in exps.items()
                        if all(e > 0 for e in es) or all(e < 0 for e in es))
        if content:
            inner = {_mono_mul(m, _mono_pow(content, Fraction(-1))): c for m, c in p.items()}
            return self.monomial(content) * self.poly(inner)
        # a common rational factor
        g = _gcd(list(p.values()))
        if g != 1:
            return self.poly({m: c / g for m, c in p.items()}) * self.alg.const(g)
        # a power of 1 - tanh(P)^2 (the derivative of tanh is full of them)
        for a in atoms:
            if self.ring.atoms[a].kind == "tanh":
                k, q = _divide_sech2(p, a)
                if k:
                    return self._sech2(a, k) * self.poly(q)
        # Horner in the atom with the fewest distinct powers: in it for its positive powers,
        # in its inverse for its negative ones
        a = min(atoms, key=lambda b: (len(set(exps[b])), max(exps[b]), b))
        groups: dict[Fraction, Poly] = {}
        for m, c in p.items():
            e = dict(m).get(a, Fraction(0))
            groups.setdefault(e, {})[tuple((b, f) for b, f in m if b != a)] = c
        parts = []
        for sign in (1, -1):
            powers = sorted((sign * e for e in groups if sign * e > 0), reverse=True)
            if powers:
                acc = self.poly(groups[sign * powers[0]])
                for hi, lo in zip(powers, powers[1:], strict=False):
                    acc = self._add(acc * self.power(a, sign * (hi - lo)), groups[sign * lo])
                parts.append(acc * self.power(a, sign * powers[-1]))
        acc = parts[0]
        for part in parts[1:]:
            acc = acc + part
        return self._add(acc, groups[Fraction(0)]) if Fraction(0) in groups else acc

    def _sech2(self, a: int, k: int) -> Any:
        """(1 - a^2)^k for the tanh atom ``a``."""
        def make() -> Any:
            if k == 1:
                return self.alg.const(Fraction(1)) - self.power(a, Fraction(2))
            one = self._sech2(a, 1)
            return one * one if k == 2 else self.alg.pow(one, Fraction(k))
        return self._memo(("sech2", a, k), make)

    def _add(self, acc: Any, p: Poly) -> Any:
        negative, value = self.signed(p)
        return acc - value if negative else acc + value


def _divide_sech2(p: Poly, a: int) -> tuple[int, Poly]:
    """(k, q) with p = (1 - a^2)^k q, k as large as it goes (0 where a's powers in p are not
    all non-negative integers)."""
    by_power: dict[int, Poly] = {}
    for m, c in p.items():
        rest, e = [], Fraction(0)
        for b, f in m:
            if b == a:
                e = f
            else:
                rest.append((b, f))
        if e < 0 or e.denominator != 1:
            return 0, p
        by_power.setdefault(int(e), {})[tuple(rest)] = c
    k = 0
    while by_power and max(by_power) >= 2:
        top = max(by_power)
        q: dict[int, Poly] = {}
        for e in range(top + 1):  # p_e = q_e - q_(e-2)
            acc = dict(by_power.get(e, {}))
            for m, c in q.get(e - 2, {}).items():
                s = acc.get(m, 0) + c
                if s:
                    acc[m] = s
                else:
                    acc.pop(m, None)
            q[e] = acc
        if q[top] or q[top - 1]:  # a remainder: (1 - a^2) does not divide
            break
        by_power = {e: v for e, v in q.items() if v and e <= top - 2}
        k += 1
    if not k:
        return 0, p
    out: Poly = {}
    for e, v in by_power.items():
        for m, c in v.items():
            out[_mono_mul(m, ((a, Fraction(e)),)) if e else m] = c
    return k, out


def _products(graph: MaterializedGraph, wrt: int) -> int:
    """How many products and quotients of two values that both depend on input ``wrt``
    (a square is not counted)."""
    depends = [False] * len(graph.nodes)
    depends[graph.inputs[wrt]] = True
    count = 0
    for i, n in enumerate(graph.nodes):
        if n.op is None:
            continue
        depends[i] = any(depends[j] for j in n.inputs)
        if n.op in ("mul", "div") and n.inputs[0] != n.inputs[1] and all(depends[j] for j in n.inputs):
            count += 1
    return count


class ElementaryDerivative:
    """The ``order``-th derivative of ``f`` by its argument ``argnum``, found exactly in the
    differential ring of ``f``'s atoms (see the module's docstring) and written as a Horner
    scheme when called: a function of ``f``'s arguments.

    ``f`` takes real scalars and is built from + - * /, constant powers, exp, log, sin,
    cos and tanh (and what tidu.numpy writes with them: sqrt, log1p, expm1, sinh, tan,
    ...); otherwise ``NotElementary`` says which operation is not. The differentiation is
    done here, once. ``terms``: the terms of the derivative's polynomial; ``products``:
    how many products of two values that depend on the argument ``f`` has (each makes the
    polynomial grow with the square of the order where Taylor mode grows linearly)."""

    def __init__(self, f: Callable[..., Any], order: int, argnum: int = 0,
                 max_terms: int | Callable[[int], int] = MAX_TERMS) -> None:
        if not callable(f):
            raise TypeError(f"elementary_derivative takes a function, got {type(f).__name__}")
        if not isinstance(order, int) or order < 0:
            raise ValueError(f"elementary_derivative: order must be a non-negative integer, got {order!r}")
        params = [p for p in inspect.signature(f).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
        name = getattr(f, "__name__", "f")
        if not 0 <= argnum < len(params):
            raise ValueError(f"elementary_derivative: argnum {argnum} is not one of {name}'s "
                             f"{len(params)} positional argument(s)")
        graph = make_graph(f, simplify=False)(*[np.float64(1.0)] * len(params)).graph
        self.ring, p = polynomial(graph, argnum)
        self.products = _products(graph, argnum)
        if callable(max_terms):
            max_terms = max_terms(self.products)
        for k in range(order):
            p = self.ring.differentiate(p)
            if len(p) > max_terms:
                raise NotElementary(f"the derivative of order {k + 1} has {len(p)} terms, more than "
                                    f"max_terms={max_terms}")
        self.polynomial = p
        self.order, self.argnum, self.arity = order, argnum, len(params)
        self.terms = len(p)
        self.__name__ = f"d{order}_{name}"
        self.__signature__ = inspect.Signature(params)

    def __call__(self, *args: Any) -> Any:
        if len(args) != self.arity:
            raise TypeError(f"{self.__name__} takes {self.arity} argument(s), got {len(args)}")
        value = _Emitter(self.ring, args).poly(self.polynomial)
        if isinstance(value, float):  # a constant derivative, shaped as the argument
            return tnp.zeros_like(args[self.argnum]) + value
        return value

    def to_sympy(self, symbols: Sequence[Any]) -> tuple[list[tuple[Any, Any]], Any]:
        """The derivative as SymPy with exact rational coefficients, in ``sympy.cse``'s form
        ``(replacements, expression)``: the Horner scheme the call writes, each value it uses
        more than once (unless as short as ``tanh(x)``) named ``x0``, ``x1``, ... (names
        the ``symbols`` do not have), each sum written the shorter of that way and
        distributed (``tidu.ops.graph_sympy.compact``)."""
        import sympy

        first = _Emitter(self.ring, symbols, _SympyAlgebra)
        first.poly(self.polynomial)
        shared = {k for k, n in first.uses.items() if n > 1 and not ops_at_most(first.memo[k], INLINE_OPS)}
        taken = {str(s) for s in symbols}
        fresh = (f"x{k}" for k in itertools.count() if f"x{k}" not in taken)
        replacements: list[tuple[Any, Any]] = []

        def name(value: Any) -> Any:
            symbol = sympy.Symbol(next(fresh), real=True)
            replacements.append((symbol, compact(value)))
            return symbol

        expr = _Emitter(self.ring, symbols, _SympyAlgebra, shared, name).poly(self.polynomial)
        return replacements, compact(expr)


def elementary_derivative(f: Callable[..., Any], order: int, argnum: int = 0,
                          max_terms: int | Callable[[int], int] = MAX_TERMS) -> ElementaryDerivative:
    """The ``order``-th derivative of ``f`` by argument ``argnum`` in ``f``'s differential
    ring: an ``ElementaryDerivative`` (a function of ``f``'s arguments; ``.to_sympy(symbols)``
    its exact form). ``NotElementary`` where ``f`` is not elementary or the polynomial
    passes ``max_terms`` terms (or ``max_terms(products)``, of ``f``'s count of products of
    two values that depend on the argument)."""
    return ElementaryDerivative(f, order, argnum, max_terms)


__all__ = ["MAX_TERMS", "ElementaryDerivative", "NotElementary", "elementary_derivative", "polynomial"]
