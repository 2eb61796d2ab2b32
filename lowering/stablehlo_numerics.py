"""StableHLO algorithms for the special functions that no StableHLO or CHLO op computes
(``i0e``, ``ndtri``): each is a short sequence of elementwise ops, written through a small
builder so the algorithm reads as arithmetic. Accuracy (against SciPy's kernels, which the
NumPy back end runs) is a few ulp in float64; tests/test_special.py runs them in XLA.
"""

from __future__ import annotations

import math
from collections.abc import Callable

Name = str


class Elementwise:
    """Elementwise ops of one tensor type ``t`` (and its predicate type ``p``), each
    written by ``emit(op_text, suffix)``, which returns the value's SSA name. Numbers are
    splat constants, made once each. The op marked ``final`` is the instruction's own
    value (suffix "")."""

    def __init__(self, emit: Callable[[str, str], Name], t: str, p: str, literal: Callable[[float], str]) -> None:
        self._emit, self.t, self.p, self._literal = emit, t, p, literal
        self._count = 0
        self._constants: dict[str, Name] = {}

    def _op(self, text: str, final: bool) -> Name:
        if final:
            return self._emit(text, "")
        self._count += 1
        return self._emit(text, f"n{self._count}")

    def c(self, value: float) -> Name:
        literal = self._literal(value)
        if literal not in self._constants:
            self._constants[literal] = self._op(f"stablehlo.constant dense<{literal}> : {self.t}", False)
        return self._constants[literal]

    def _v(self, x: Name | float) -> Name:
        return x if isinstance(x, str) else self.c(x)

    def binary(self, op: str, x: Name | float, y: Name | float, final: bool = False) -> Name:
        return self._op(f"stablehlo.{op} {self._v(x)}, {self._v(y)} : {self.t}", final)

    def add(self, x: Name | float, y: Name | float, final: bool = False) -> Name:
        return self.binary("add", x, y, final)

    def sub(self, x: Name | float, y: Name | float, final: bool = False) -> Name:
        return self.binary("subtract", x, y, final)

    def mul(self, x: Name | float, y: Name | float, final: bool = False) -> Name:
        return self.binary("multiply", x, y, final)

    def div(self, x: Name | float, y: Name | float, final: bool = False) -> Name:
        return self.binary("divide", x, y, final)

    def minimum(self, x: Name | float, y: Name | float) -> Name:
        return self.binary("minimum", x, y)

    def maximum(self, x: Name | float, y: Name | float) -> Name:
        return self.binary("maximum", x, y)

    def unary(self, op: str, x: Name, final: bool = False) -> Name:
        return self._op(f"stablehlo.{op} {x} : {self.t}", final)

    def chlo(self, op: str, x: Name) -> Name:
        return self._op(f'"chlo.{op}"({x}) : ({self.t}) -> {self.t}', False)

    def less(self, x: Name | float, y: Name | float) -> Name:
        return self._op(f"stablehlo.compare LT, {self._v(x)}, {self._v(y)}, FLOAT : ({self.t}, {self.t}) -> "
                        f"{self.p}", False)

    def equal(self, x: Name | float, y: Name | float) -> Name:
        return self._op(f"stablehlo.compare EQ, {self._v(x)}, {self._v(y)}, FLOAT : ({self.t}, {self.t}) -> "
                        f"{self.p}", False)

    def select(self, pred: Name, x: Name | float, y: Name | float, final: bool = False) -> Name:
        return self._op(f"stablehlo.select {pred}, {self._v(x)}, {self._v(y)} : {self.p}, {self.t}", final)


def i0e(b: Elementwise, x: Name) -> Name:
    """exp(-|x|) I0(x): the power series sum (x^2/4)^k / (k!)^2 times exp(-|x|) up to
    |x| = 20 (positive terms: no cancellation), above it the asymptotic expansion
    (2 pi |x|)^-1/2 sum ((2k-1)!!)^2 / (k! (8|x|)^k), whose terms are still falling
    where it is cut."""
    cut = 20.0
    ax = b.unary("abs", x)
    small_x = b.minimum(ax, cut)
    u = b.mul(b.mul(small_x, small_x), 0.25)
    term, total = u, b.add(u, 1.0)
    for k in range(2, 40):
        term = b.mul(term, b.mul(u, 1.0 / (k * k)))
        total = b.add(total, term)
    small = b.mul(total, b.unary("exponential", b.unary("negate", small_x)))
    large_x = b.maximum(ax, cut)
    inv = b.div(1.0, b.mul(large_x, 8.0))
    term, total = None, None
    for k in range(1, 20):
        factor = b.mul(inv, (2 * k - 1) ** 2 / k)
        term = factor if term is None else b.mul(term, factor)
        total = b.add(term, 1.0) if total is None else b.add(total, term)
    assert total is not None
    large = b.div(total, b.unary("sqrt", b.mul(large_x, 2 * math.pi)))
    return b.select(b.less(ax, cut), small, large, final=True)


def ndtri(b: Elementwise, p: Name) -> Name:
    """The inverse normal CDF. Inside |p - 1/2| <= 0.425, sqrt(2) erfinv(2p - 1) (2p - 1
    is exact there or nearly). In the tails, with q = min(p, 1 - p): Abramowitz and
    Stegun's 26.2.23 start (error < 4.5e-4), then three Newton steps on
    log ndtr(z) = log q, with ndtr(z) = erfc(-z / sqrt 2) / 2, accurate for z < 0 down
    to the smallest q. q = 0 gives -inf (log 0), p outside [0, 1] nan (sqrt, log of a
    negative number)."""
    central = b.mul(b.chlo("erf_inv", b.sub(b.mul(p, 2.0), 1.0)), math.sqrt(2))
    q = b.minimum(p, b.sub(1.0, p))
    log_q = b.unary("log", q)
    t = b.unary("sqrt", b.mul(log_q, -2.0))
    t2 = b.mul(t, t)
    num = b.add(b.add(b.mul(t, 0.802853), 2.515517), b.mul(t2, 0.010328))
    den = b.add(b.add(b.add(b.mul(t, 1.432788), 1.0), b.mul(t2, 0.189269)), b.mul(b.mul(t2, t), 0.001308))
    z = b.select(b.equal(q, 0.0), -math.inf, b.sub(b.div(num, den), t))  # q = 0: inf / inf is nan
    for _ in range(3):
        cdf = b.mul(b.chlo("erfc", b.mul(z, -1 / math.sqrt(2))), 0.5)
        density = b.mul(b.unary("exponential", b.mul(b.mul(z, z), -0.5)), 1 / math.sqrt(2 * math.pi))
        step = b.div(b.mul(b.sub(b.unary("log", cdf), log_q), cdf), density)
        # a converged z (or -inf at q = 0) stays: 0 * inf is nan otherwise
        z = b.sub(z, b.select(b.less(b.unary("abs", step), math.inf), step, 0.0))
    tail = b.select(b.less(p, 0.5), z, b.unary("negate", z))
    inside = b.less(b.unary("abs", b.sub(p, 0.5)), 0.425)
    return b.select(inside, central, tail, final=True)
