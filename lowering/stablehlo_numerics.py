"""StableHLO algorithms for the special functions that no StableHLO or CHLO op computes
(``i0``, ``i0e``, ``ndtri``, ``erfcx``, ``exp1``, ``expi``, ``sine_integral``,
``cosine_integral``): each is a short sequence of elementwise ops, written through a
small builder so the algorithm reads as arithmetic. Accuracy (against SciPy's kernels,
which the NumPy back end runs) is a few ulp in float64; tests/test_special.py runs them
in XLA.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import ml_dtypes

Name = str


class Elementwise:
    """Elementwise ops of one tensor type ``t`` (and its predicate type ``p``), each
    written by ``emit(op_text, suffix)``, which returns the value's SSA name. Numbers are
    splat constants, made once each. The op marked ``final`` is the instruction's own
    value (suffix "")."""

    def __init__(self, emit: Callable[[str, str], Name], t: str, p: str, literal: Callable[[float], str],
                 dtype: str = "float64", rank: int = 0, tag: str = "%t_") -> None:
        self._emit, self.t, self.p, self._literal, self.dtype = emit, t, p, literal, dtype
        self.rank = rank  # of the tensors (loops reduce over every axis)
        self.tag = tag  # a prefix no other SSA name of the function has (loops name their regions' values with it)
        self._count = 0
        self._constants: dict[str, Name] = {}
        self.wide_lgamma = False  # lgamma of 2- and 4-byte floats in float64 (not on TPUs: no float64 there)

    def _op(self, text: str, final: bool) -> Name:
        if final:
            return self._emit(text, "")
        self._count += 1
        return self._emit(text, f"n{self._count}")

    def _op_multi(self, text: str, results: int) -> list[Name]:
        """An op of several results (``text`` may span lines, as an op with regions does)."""
        self._count += 1
        name = self._emit(text, f"n{self._count}:{results}")
        base = name.rsplit(":", 1)[0]
        return [f"{base}#{k}" for k in range(results)]

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

    def either(self, p: Name, q: Name) -> Name:
        """The elementwise or of two predicates."""
        return self._op(f"stablehlo.or {p}, {q} : {self.p}", False)

    def both(self, p: Name, q: Name) -> Name:
        """The elementwise and of two predicates."""
        return self._op(f"stablehlo.and {p}, {q} : {self.p}", False)

    def negation(self, p: Name) -> Name:
        """The elementwise not of a predicate."""
        return self._op(f"stablehlo.not {p} : {self.p}", False)

    def minimum(self, x: Name | float, y: Name | float) -> Name:
        return self.binary("minimum", x, y)

    def maximum(self, x: Name | float, y: Name | float) -> Name:
        return self.binary("maximum", x, y)

    def unary(self, op: str, x: Name, final: bool = False) -> Name:
        return self._op(f"stablehlo.{op} {x} : {self.t}", final)

    def chlo(self, op: str, x: Name) -> Name:
        if op == "lgamma" and self.wide_lgamma and self.dtype in ("float16", "bfloat16", "float32"):
            # XLA's float32 lgamma loses most digits next to its roots 1 and 2: in float64
            wide = self.t[:self.t.rindex("x") + 1 if "x" in self.t else len("tensor<")] + "f64>"
            x64 = self._op(f"stablehlo.convert {x} : ({self.t}) -> {wide}", False)
            value = self._op(f'"chlo.lgamma"({x64}) : ({wide}) -> {wide}', False)
            return self._op(f"stablehlo.convert {value} : ({wide}) -> {self.t}", False)
        return self._op(f'"chlo.{op}"({x}) : ({self.t}) -> {self.t}', False)

    def chlo2(self, op: str, x: Name, y: Name) -> Name:
        return self._op(f'"chlo.{op}"({x}, {y}) : ({self.t}, {self.t}) -> {self.t}', False)

    def less(self, x: Name | float, y: Name | float) -> Name:
        return self._op(f"stablehlo.compare LT, {self._v(x)}, {self._v(y)}, FLOAT : ({self.t}, {self.t}) -> "
                        f"{self.p}", False)

    def equal(self, x: Name | float, y: Name | float) -> Name:
        return self._op(f"stablehlo.compare EQ, {self._v(x)}, {self._v(y)}, FLOAT : ({self.t}, {self.t}) -> "
                        f"{self.p}", False)

    def select(self, pred: Name, x: Name | float, y: Name | float, final: bool = False) -> Name:
        return self._op(f"stablehlo.select {pred}, {self._v(x)}, {self._v(y)} : {self.p}, {self.t}", final)


def i0(b: Elementwise, x: Name) -> Name:
    """I0(x) = exp(|x|) i0e(x) (nan at +-inf, inf * 0, as SciPy's and JAX's)."""
    return b.mul(b.unary("exponential", b.unary("abs", x)), i0e(b, x, final=False), final=True)


def i0e(b: Elementwise, x: Name, final: bool = True) -> Name:
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
    # sqrt(x) sqrt(2 pi), not sqrt(2 pi x): 2 pi x overflows near the largest float
    large = b.div(total, b.mul(b.unary("sqrt", large_x), math.sqrt(2 * math.pi)))
    return b.select(b.less(ax, cut), small, large, final=final)


def ndtri(b: Elementwise, p: Name) -> Name:
    """The inverse normal CDF. Inside |p - 1/2| <= 0.425, sqrt(2) erfinv(2p - 1) (2p - 1
    is exact there or nearly). In the tails, with q = min(p, 1 - p): Abramowitz and
    Stegun's 26.2.23 start (error < 4.5e-4), then three Newton steps on
    log ndtr(z) = log q, with ndtr(z) = erfcx(t) exp(-t^2) / 2 at t = -z / sqrt 2: the
    logarithm and the step's ndtr / density = erfcx(t) sqrt(pi / 2) are taken without
    forming ndtr, which underflows near the smallest q (erfc there lost digits). q = 0
    gives -inf (log 0), p outside [0, 1] nan (sqrt, log of a negative number)."""
    central = b.mul(b.chlo("erf_inv", b.sub(b.mul(p, 2.0), 1.0)), math.sqrt(2))
    q = b.minimum(p, b.sub(1.0, p))
    log_q = b.unary("log", q)
    t = b.unary("sqrt", b.mul(log_q, -2.0))
    t2 = b.mul(t, t)
    num = b.add(b.add(b.mul(t, 0.802853), 2.515517), b.mul(t2, 0.010328))
    den = b.add(b.add(b.add(b.mul(t, 1.432788), 1.0), b.mul(t2, 0.189269)), b.mul(b.mul(t2, t), 0.001308))
    z = b.select(b.equal(q, 0.0), -math.inf, b.sub(b.div(num, den), t))  # q = 0: inf / inf is nan
    for _ in range(3):
        t_ = b.mul(z, -1 / math.sqrt(2))
        scaled = erfcx(b, t_, final=False)
        log_cdf = b.sub(b.unary("log", b.mul(scaled, 0.5)), b.mul(t_, t_))
        step = b.mul(b.sub(log_cdf, log_q), b.mul(scaled, math.sqrt(math.pi / 2)))
        # a converged z (or -inf at q = 0) stays: 0 * inf is nan otherwise
        z = b.sub(z, b.select(b.less(b.unary("abs", step), math.inf), step, 0.0))
    tail = b.select(b.less(p, 0.5), z, b.unary("negate", z))
    inside = b.less(b.unary("abs", b.sub(p, 0.5)), 0.425)
    return b.select(inside, central, tail, final=True)


def _exp_of_square(b: Elementwise, x: Name, split: float) -> Name:
    """exp(x^2) without the rounding of x^2 (which exp would magnify by x^2): x^2 = hi + lo
    exactly (Dekker's product; ``split`` is 2^27 + 1 in float64, 2^12 + 1 in float32), and
    exp(x^2) = exp(hi) (1 + lo)."""
    hi = b.mul(x, x)
    c = b.mul(x, split)
    xh = b.sub(c, b.sub(c, x))
    xl = b.sub(x, xh)
    lo = b.add(b.add(b.sub(b.mul(xh, xh), hi), b.mul(b.mul(xh, xl), 2.0)), b.mul(xl, xl))
    return b.mul(b.unary("exponential", hi), b.add(lo, 1.0))  # inf stays inf (inf * lo could be nan)


def erfcx(b: Elementwise, x: Name, final: bool = True) -> Name:
    """exp(x^2) erfc(x): the product below x = 8 (exp(x^2) exact to rounding, see
    _exp_of_square; it overflows to inf below about -26, as the function does), above it
    the asymptotic series 1 / (x sqrt(pi)) sum (-1)^k (2k-1)!! / (2x^2)^k, 25 terms."""
    cut = 8.0
    small_x = b.minimum(x, cut)
    split = 2.0 ** 27 + 1 if b.dtype == "float64" else 2.0 ** 12 + 1
    small = b.mul(_exp_of_square(b, small_x, split), b.chlo("erfc", small_x))
    large_x = b.maximum(x, cut)
    inv = b.div(1.0, b.mul(b.mul(large_x, large_x), 2.0))
    term, total = None, None
    for k in range(1, 25):
        factor = b.mul(inv, -(2 * k - 1))
        term = factor if term is None else b.mul(term, factor)
        total = b.add(term, 1.0) if total is None else b.add(total, term)
    assert total is not None
    large = b.div(total, b.mul(large_x, math.sqrt(math.pi)))
    value = b.select(b.less(x, cut), small, large)
    # far below 0 (x = -inf included, where the split is nan) the value has overflowed
    return b.select(b.less(x, -30.0 if b.dtype == "float64" else -12.0), math.inf, value, final=final)


EULER_GAMMA = 0.57721566490153286061


def _e1_positive(b: Elementwise, x: Name) -> Name:
    """E1(x) for x > 0: the power series -gamma - log x - sum (-x)^k / (k k!) up to x = 1
    (alternating: beyond, its cancellation costs digits), above it the continued fraction
    exp(-x) / (x + 1 - 1/(x + 3 - 4/(x + 5 - ...))) evaluated from 80 levels down."""
    cut = 1.0
    small_x = b.minimum(x, cut)
    term, total = None, None
    for k in range(1, 40):
        factor = b.mul(small_x, -1.0 / k)
        term = factor if term is None else b.mul(term, factor)
        part = b.mul(term, 1.0 / k)
        total = part if total is None else b.add(total, part)
    assert total is not None
    small = b.sub(b.sub(-EULER_GAMMA, b.unary("log", small_x)), total)
    large_x = b.maximum(x, cut)
    depth = 80
    t = b.add(large_x, 2.0 * depth + 1)
    for k in range(depth, 0, -1):
        t = b.sub(b.add(large_x, 2.0 * k - 1), b.div(float(k * k), t))
    large = b.div(b.unary("exponential", b.unary("negate", large_x)), t)
    return b.select(b.less(cut, x), large, small)


def exp1(b: Elementwise, x: Name) -> Name:
    """The exponential integral E1(x) for real x: inf at 0, nan below (SciPy's)."""
    value = _e1_positive(b, b.maximum(x, 0.0))
    return b.select(b.less(x, 0.0), math.nan, value, final=True)


def expi(b: Elementwise, x: Name) -> Name:
    """The exponential integral Ei(x): -E1(-x) below 0; above, the series gamma + log x +
    sum x^k / (k k!) up to x = 40 (positive terms, 120 of them), then the asymptotic
    expansion exp(x) / x sum k! / x^k (40 terms, still falling where cut)."""
    cut = 40.0
    negative = b.unary("negate", _e1_positive(b, b.maximum(b.unary("negate", x), 0.0)))
    small_x = b.minimum(b.maximum(x, 0.0), cut)
    term, total = None, None
    for k in range(1, 120):
        factor = b.mul(small_x, 1.0 / k)
        term = factor if term is None else b.mul(term, factor)
        part = b.mul(term, 1.0 / k)
        total = part if total is None else b.add(total, part)
    assert total is not None
    small = b.add(b.add(b.unary("log", small_x), EULER_GAMMA), total)
    large_x = b.maximum(x, cut)
    inv = b.div(1.0, large_x)
    term, series = None, None
    for k in range(1, 40):
        factor = b.mul(inv, float(k))
        term = factor if term is None else b.mul(term, factor)
        series = b.add(term, 1.0) if series is None else b.add(series, term)
    assert series is not None
    large = b.mul(b.div(b.unary("exponential", large_x), large_x), series)
    positive = b.select(b.less(x, cut), small, large)
    positive = b.select(b.equal(x, math.inf), math.inf, positive)  # exp(x) / x is inf / inf there
    return b.select(b.less(x, 0.0), negative, positive, final=True)


def _sine_cosine_integrals(b: Elementwise, x: Name) -> tuple[Name, Name]:
    """(Si(x), Ci(x)) for x >= 0: power series up to x = 4 (25 terms); above it from
    E1(ix) = -Ci(x) + i (Si(x) - pi/2), E1's continued fraction (60 levels, evaluated from
    the bottom up in complex arithmetic written out in real and imaginary parts)."""
    cut = 4.0
    small_x = b.minimum(x, cut)
    square = b.mul(small_x, small_x)
    term, si = small_x, small_x
    for k in range(1, 25):
        term = b.mul(term, b.mul(square, -1.0 / ((2 * k) * (2 * k + 1))))
        si = b.add(si, b.mul(term, 1.0 / (2 * k + 1)))
    term, ci = None, None
    for k in range(1, 25):
        factor = b.mul(square, -1.0 / ((2 * k - 1) * (2 * k)))
        term = factor if term is None else b.mul(term, factor)
        part = b.mul(term, 1.0 / (2 * k))
        ci = part if ci is None else b.add(ci, part)
    assert ci is not None
    ci = b.add(b.add(b.unary("log", small_x), EULER_GAMMA), ci)
    large_x = b.maximum(x, cut)
    depth = 60
    tr, ti = b.c(2.0 * depth + 1), large_x
    for k in range(depth, 0, -1):
        inv = b.div(float(k * k), b.add(b.mul(tr, tr), b.mul(ti, ti)))
        tr, ti = b.sub(2.0 * k - 1, b.mul(tr, inv)), b.add(large_x, b.mul(ti, inv))
    d = b.add(b.mul(tr, tr), b.mul(ti, ti))
    cos, sin = b.unary("cosine", large_x), b.unary("sine", large_x)
    ci_large = b.div(b.sub(b.mul(sin, ti), b.mul(cos, tr)), d)
    si_large = b.sub(math.pi / 2, b.div(b.add(b.mul(cos, ti), b.mul(sin, tr)), d))
    inside = b.less(x, cut)
    return b.select(inside, si, si_large), b.select(inside, ci, ci_large)


def sine_integral(b: Elementwise, x: Name) -> Name:
    """Si(x), the integral of sin(t)/t from 0 to x: odd; pi/2 at inf."""
    ax = b.unary("abs", x)
    si, _ = _sine_cosine_integrals(b, ax)
    si = b.select(b.equal(ax, math.inf), math.pi / 2, si)
    return b.select(b.less(x, 0.0), b.unary("negate", si), si, final=True)


def cosine_integral(b: Elementwise, x: Name) -> Name:
    """Ci(x) = gamma + log x + the integral of (cos t - 1)/t from 0 to x, and Ci(|x|) for
    x < 0 (SciPy's real part): -inf at 0, 0 at inf, nan at -inf."""
    ax = b.unary("abs", x)
    _, ci = _sine_cosine_integrals(b, ax)
    ci = b.select(b.equal(x, math.inf), 0.0, ci)
    return b.select(b.equal(x, -math.inf), math.nan, ci, final=True)


def _loop(b: Elementwise, carries: list[Name], body: Callable[[Elementwise, list[Name]], tuple[list[Name], Name]],
          max_steps: int) -> list[Name]:
    """A ``stablehlo.while`` over elementwise ``carries`` (all of type ``b.t``): ``body``
    maps the carries to (new carries, the error of each element); the loop stops when
    every error is at most the dtype's epsilon, or after ``max_steps`` steps. An element
    whose error is at most epsilon keeps its carries from then on."""
    b._count += 1
    w = f"{b.tag}L{b._count}_"
    names = [f"{w}c{k}" for k in range(len(carries))] + [f"{w}i", f"{w}err"]
    it, scalar_p = "tensor<i64>", "tensor<i1>"
    types = [b.t] * len(carries) + [it, b.t]
    head = "^bb0(" + ", ".join(f"{n}: {t}" for n, t in zip(names, types, strict=True)) + "):"
    eps = float(ml_dtypes.finfo(b.dtype).eps)  # NumPy's finfo has no bfloat16
    cond = [head,
            f"  {w}n = stablehlo.constant dense<{max_steps}> : {it}",
            f"  {w}more = stablehlo.compare LT, {w}i, {w}n, SIGNED : ({it}, {it}) -> {scalar_p}",
            f"  {w}eps = stablehlo.constant dense<{b._literal(eps)}> : {b.t}",
            f"  {w}open = stablehlo.compare GT, {w}err, {w}eps, FLOAT : ({b.t}, {b.t}) -> {b.p}",
            f"  {w}false = stablehlo.constant dense<false> : {scalar_p}",
            f"  {w}any = stablehlo.reduce({w}open init: {w}false) applies stablehlo.or across dimensions = "
            f"[{', '.join(str(d) for d in range(b.rank))}] : ({b.p}, {scalar_p}) -> {scalar_p}",
            f"  {w}go = stablehlo.and {w}more, {w}any : {scalar_p}",
            f'  "stablehlo.return"({w}go) : ({scalar_p}) -> ()']
    lines: list[str] = []
    inner = Elementwise(lambda text, suffix: _region_emit(lines, w, text, suffix), b.t, b.p, b._literal, b.dtype,
                        rank=b.rank, tag=w)
    inner.wide_lgamma = b.wide_lgamma
    new, err = body(inner, names[:len(carries)])
    # an element that has converged keeps its carries: the steps the loop takes for the
    # other elements would move it (a continued fraction's product drifts by rounding),
    # so each element's value does not depend on the rest of the array
    freeze = [f"  {w}beps = stablehlo.constant dense<{b._literal(eps)}> : {b.t}",
              f"  {w}done = stablehlo.compare LE, {w}err, {w}beps, FLOAT : ({b.t}, {b.t}) -> {b.p}"]
    kept = []
    for k, value in enumerate([*new, err]):
        old = names[k] if k < len(new) else f"{w}err"
        freeze.append(f"  {w}keep{k} = stablehlo.select {w}done, {old}, {value} : {b.p}, {b.t}")
        kept.append(f"{w}keep{k}")
    body_lines = [head, *("  " + line for line in lines), *freeze,
                  f"  {w}one = stablehlo.constant dense<1> : {it}",
                  f"  {w}next = stablehlo.add {w}i, {w}one : {it}",
                  '  "stablehlo.return"(' + ", ".join([*kept[:-1], f"{w}next", kept[-1]]) + ") : ("
                  + ", ".join(types) + ") -> ()"]
    zero = b._op(f"stablehlo.constant dense<0> : {it}", False)
    start_err = b.c(math.inf)
    text = "\n".join([f'"stablehlo.while"({", ".join([*carries, zero, start_err])}) ({{',
                      *("      " + line for line in cond), "    }, {",
                      *("      " + line for line in body_lines),
                      "    }) : (" + ", ".join(types) + ") -> (" + ", ".join(types) + ")"])
    return b._op_multi(text, len(types))[:len(carries)]


def _region_emit(lines: list[str], prefix: str, text: str, suffix: str) -> Name:
    name = f"{prefix}{suffix or 'v'}"
    lines.append(f"{name} = {text}")
    return name


def _incomplete_gamma(b: Elementwise, a: Name, x: Name) -> tuple[Name, Name]:
    """(P(a, x), Q(a, x)), the regularized incomplete gamma functions: below x = a + 1 the
    series P = x^a e^-x / Gamma(a + 1) sum x^n / ((a + 1) ... (a + n)), above it Legendre's
    continued fraction for Q (modified Lentz), each a loop until every element it serves
    has converged (at most 5000 steps: enough for a up to about 10^5)."""
    tiny = 1e-300 if b.dtype == "float64" else 1e-30
    log_x = b.unary("log", x)
    use_series = b.less(x, b.add(a, 1.0))

    def series_step(s: Elementwise, c: list[Name]) -> tuple[list[Name], Name]:
        term, total, n = c
        n = s.add(n, 1.0)
        term = s.mul(term, s.div(x, s.add(a, n)))
        total = s.add(total, term)
        err = s.select(use_series, s.div(s.unary("abs", term), s.unary("abs", total)), 0.0)
        return [term, total, n], err

    one, zero = b.c(1.0), b.c(0.0)
    _, total, _ = _loop(b, [one, one, zero], series_step, 5000)
    p_series = b.mul(b.unary("exponential", b.sub(b.sub(b.mul(a, log_x), x),
                                                  b.chlo("lgamma", b.add(a, 1.0)))), total)

    def fraction_step(s: Elementwise, c: list[Name]) -> tuple[list[Name], Name]:
        den, cc, d, h, i = c
        i = s.add(i, 1.0)
        an = s.mul(s.unary("negate", i), s.sub(i, a))
        den = s.add(den, 2.0)
        d = s.add(s.mul(an, d), den)
        d = s.select(s.less(s.unary("abs", d), tiny), tiny, d)
        cc = s.add(den, s.div(an, cc))
        cc = s.select(s.less(s.unary("abs", cc), tiny), tiny, cc)
        d = s.div(1.0, d)
        delta = s.mul(d, cc)
        h = s.mul(h, delta)
        err = s.select(use_series, 0.0, s.unary("abs", s.sub(delta, 1.0)))
        return [den, cc, d, h, i], err

    den0 = b.sub(b.add(x, 1.0), a)
    d0 = b.div(1.0, b.select(b.equal(den0, 0.0), tiny, den0))
    _, _, _, h, _ = _loop(b, [den0, b.c(1 / tiny), d0, d0, zero], fraction_step, 5000)
    q_fraction = b.mul(b.unary("exponential", b.sub(b.sub(b.mul(a, log_x), x), b.chlo("lgamma", a))), h)
    p = b.select(use_series, p_series, b.sub(1.0, q_fraction))
    q = b.select(use_series, b.sub(1.0, p_series), q_fraction)
    # x = inf: P = 1 (the fraction is inf / inf there); a < 0 or x < 0: nan, as SciPy
    at_inf = b.equal(x, math.inf)
    p, q = b.select(at_inf, 1.0, p), b.select(at_inf, 0.0, q)
    return p, q


def _outside(b: Elementwise, a: Name, x: Name) -> Name:
    """a < 0 or x < 0."""
    return b.less(b.minimum(a, x), 0.0)


def gammainc(b: Elementwise, a: Name, x: Name) -> Name:
    """The regularized lower incomplete gamma function P(a, x); nan for a < 0 or x < 0."""
    p, _ = _incomplete_gamma(b, a, x)
    return b.select(_outside(b, a, x), math.nan, p, final=True)


def gammaincc(b: Elementwise, a: Name, x: Name) -> Name:
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    _, q = _incomplete_gamma(b, a, x)
    return b.select(_outside(b, a, x), math.nan, q, final=True)


def _relative(s: Elementwise, change: Name, total: Name) -> Name:
    """|change| / |total| as a loop's error, 0 where the change is 0 (a series coefficient
    that is 0 so far, whose 0 / 0 would be a nan that ends the loop)."""
    return s.select(s.equal(change, 0.0), 0.0, s.div(s.unary("abs", change), s.unary("abs", total)))


# truncated Taylor series in a shape parameter: lists of names, coefficient k at k


def _series_mul(s: Elementwise, p: list[Name], q: list[Name]) -> list[Name]:
    out = []
    for k in range(len(p)):
        acc = s.mul(p[0], q[k])
        for i in range(1, k + 1):
            acc = s.add(acc, s.mul(p[i], q[k - i]))
        out.append(acc)
    return out


def _series_recip(s: Elementwise, p: list[Name]) -> list[Name]:
    out = [s.div(1.0, p[0])]
    for k in range(1, len(p)):
        acc = s.mul(p[1], out[k - 1])
        for i in range(2, k + 1):
            acc = s.add(acc, s.mul(p[i], out[k - i]))
        out.append(s.unary("negate", s.div(acc, p[0])))
    return out


def _series_exp(s: Elementwise, p: list[Name]) -> list[Name]:
    out = [s.unary("exponential", p[0])]
    for k in range(1, len(p)):
        acc = s.mul(s.mul(p[1], out[k - 1]), 1.0 / k)
        for i in range(2, k + 1):
            acc = s.add(acc, s.mul(s.mul(p[i], out[k - i]), i / k))
        out.append(acc)
    return out


def _shape_exponent(b: Elementwise, a: Name, x: Name, log_x: Name, order: int) -> list[Name]:
    """The series of (a + e) log x - x - lgamma(a + 1 + e) in e (the coefficient k >= 2 is
    -polygamma(k - 1, a + 1) / k! = (-1)^(k+1) zeta(k, a + 1) / k)."""
    a1 = b.add(a, 1.0)
    out = [b.sub(b.sub(b.mul(a, log_x), x), b.chlo("lgamma", a1))]
    if order >= 1:
        out.append(b.sub(log_x, b.chlo("digamma", a1)))
    for k in range(2, order + 1):
        out.append(b.mul(b.chlo2("zeta", b.c(float(k)), a1), (-1.0) ** (k + 1) / k))
    return out


def _times_a(b: Elementwise, p: list[Name], a: Name) -> list[Name]:
    """p times (a + e)."""
    return [b.mul(p[0], a), *(b.add(b.mul(p[k], a), p[k - 1]) for k in range(1, len(p)))]


def gammainc_da(b: Elementwise, a: Name, x: Name, order: int) -> Name:
    """d^order P(a, x) / da^order: gammainc's series (below x = a + 1) and continued
    fraction (above) on truncated Taylor series in a, two stablehlo.while loops that stop
    when every coefficient has converged (tidu.ops.reference.gammainc_da, the same
    algorithm). 0 where P is constant in a (x = 0, x = inf, a = inf), nan for a < 0 or
    x < 0, for P(0, 0) and P(inf, inf)."""
    tiny = 1e-300 if b.dtype == "float64" else 1e-30
    n_c = order + 1
    log_x = b.unary("log", x)
    use_series = b.less(x, b.add(a, 1.0))
    zero = b.c(0.0)

    def settled(s: Elementwise, step: list[Name], total: list[Name]) -> Name:
        err = zero
        for t, tot in zip(step, total, strict=True):
            err = s.maximum(err, _relative(s, t, tot))
        return err

    def series_step(s: Elementwise, c: list[Name]) -> tuple[list[Name], Name]:
        term, total, n = c[:n_c], c[n_c:2 * n_c], c[-1]
        n = s.add(n, 1.0)
        inv = s.div(1.0, s.add(a, n))
        factor, power = [], s.mul(x, inv)
        for k in range(n_c):  # x / (a + n + e) = x sum_k (-e)^k / (a + n)^(k+1)
            factor.append(power if k % 2 == 0 else s.unary("negate", power))
            power = s.mul(power, inv)
        term = _series_mul(s, term, factor)
        total = [s.add(t, u) for t, u in zip(total, term, strict=True)]
        return [*term, *total, n], s.select(use_series, settled(s, term, total), 0.0)

    one = b.c(1.0)
    start = [one] + [zero] * order
    carried = _loop(b, [*start, *start, zero], series_step, 5000)
    p_series = _series_mul(b, _series_exp(b, _shape_exponent(b, a, x, log_x, order)), carried[n_c:2 * n_c])

    def clamp(s: Elementwise, p: list[Name]) -> list[Name]:
        small = s.less(s.unary("abs", p[0]), tiny)
        return [s.select(small, tiny, p[0]), *(s.select(small, 0.0, q) for q in p[1:])]

    def fraction_step(s: Elementwise, c: list[Name]) -> tuple[list[Name], Name]:
        den0, d, cc, h, i = c[0], c[1:1 + n_c], c[1 + n_c:1 + 2 * n_c], c[1 + 2 * n_c:1 + 3 * n_c], c[-1]
        i = s.add(i, 1.0)
        den0 = s.add(den0, 2.0)
        den = [den0, *([s.c(-1.0)] if order else []), *([zero] * (order - 1))]
        an = [s.mul(s.unary("negate", i), s.sub(i, a)), *([i] if order else []), *([zero] * (order - 1))]
        d = _series_recip(s, clamp(s, [s.add(u, v) for u, v in zip(_series_mul(s, an, d), den, strict=True)]))
        cc = clamp(s, [s.add(u, v) for u, v in zip(den, _series_mul(s, an, _series_recip(s, cc)), strict=True)])
        h_new = _series_mul(s, h, _series_mul(s, d, cc))
        err = settled(s, [s.sub(u, v) for u, v in zip(h_new, h, strict=True)], h_new)
        return [den0, *d, *cc, *h_new, i], s.select(use_series, 0.0, err)

    den0 = b.sub(b.add(x, 1.0), a)
    d0 = _series_recip(b, clamp(b, [den0, *([b.c(-1.0)] if order else []), *([zero] * (order - 1))]))
    carried = _loop(b, [den0, *d0, b.c(1 / tiny), *([zero] * order), *d0, zero], fraction_step, 5000)
    h = carried[1 + 2 * n_c:1 + 3 * n_c]
    q_fraction = _series_mul(b, _times_a(b, _series_exp(b, _shape_exponent(b, a, x, log_x, order)), a), h)
    scale = float(math.factorial(order))
    value = b.select(use_series, b.mul(p_series[order], scale), b.mul(q_fraction[order], -scale))
    constant = b.either(b.either(b.equal(x, math.inf), b.equal(a, math.inf)), b.equal(x, 0.0))
    value = b.select(constant, 0.0, value)
    both_inf = b.equal(b.minimum(a, x), math.inf)
    undefined = b.either(b.either(_outside(b, a, x), b.equal(b.add(a, x), 0.0)), both_inf)  # P(0, 0), P(inf, inf)
    return b.select(undefined, math.nan, value, final=True)


def gamma_density_d(b: Elementwise, a: Name, x: Name, order_a: int, order_x: int) -> Name:
    """d^(order_a + order_x) f / da^order_a dx^order_x of the gamma density f = x^(a-1)
    e^-x / Gamma(a) (tidu.ops.reference.gamma_density_d, the same sums on truncated Taylor
    series in a): 0 at x = inf, a = inf and at x = 0 for a > order_x + 1; nan for a < 0
    or x < 0."""
    log_x = b.unary("log", x)
    exponent = _shape_exponent(b, a, x, log_x, order_a)
    exponent[0] = b.sub(exponent[0], log_x)
    density = _times_a(b, _series_exp(b, exponent), a)
    zero = b.c(0.0)
    total: list[Name] | None = None
    falling: list[Name] = [b.c(1.0)] + [zero] * order_a
    inv_x = b.div(1.0, x)
    power = b.c(1.0)
    for j in range(order_x + 1):
        if j:
            falling = _times_a(b, falling, b.sub(a, float(j)))
            power = b.mul(power, inv_x)
        weight = b.mul(power, math.comb(order_x, j) * (-1.0) ** (order_x - j))
        part = [b.mul(weight, f) for f in falling]
        total = part if total is None else [b.add(t, u) for t, u in zip(total, part, strict=True)]
    assert total is not None
    value = b.mul(_series_mul(b, density, total)[order_a], float(math.factorial(order_a)))
    if order_a == order_x == 0:
        at_zero = b.select(b.less(a, 1.0), math.inf, b.select(b.equal(a, 1.0), 1.0, 0.0))
    else:
        at_zero = b.select(b.less(float(order_x + 1), a), 0.0, math.nan)
    value = b.select(b.equal(x, 0.0), at_zero, value)
    value = b.select(b.either(b.equal(x, math.inf), b.equal(a, math.inf)), 0.0, value)
    return b.select(_outside(b, a, x), math.nan, value, final=True)


_BERNOULLI_EVEN = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798,
                   -174611 / 330, 854513 / 138, -236364091 / 2730)  # B_2 ... B_24
_ZETA_TERMS = 12


def zeta_d(b: Elementwise, s: Name, q: Name, order_s: int, order_q: int) -> Name:
    """d^(order_s + order_q) zeta(s, q) / ds^order_s dq^order_q for s > 1, q > 0 (nan
    elsewhere): (-1)^m s (s+1) ... (s+m-1) times zeta(s + m + e, q)'s Taylor series in e
    by the Euler-Maclaurin formula (tidu.ops.reference.zeta_d, the same sums); straight
    line, no loop."""
    n_c = order_s + 1
    zero = b.c(0.0)
    sigma = b.add(s, float(order_q)) if order_q else s

    def power(w: Name, exponent: Name) -> list[Name]:
        log_w = b.unary("log", w)
        out = [b.unary("exponential", b.mul(exponent, log_w))]
        for k in range(1, n_c):
            out.append(b.mul(out[-1], b.mul(log_w, -1.0 / k)))
        return out

    def add(p: list[Name], r: list[Name]) -> list[Name]:
        return [b.add(u, v) for u, v in zip(p, r, strict=True)]

    minus_sigma = b.unary("negate", sigma)
    total = power(q, minus_sigma)
    for n in range(1, _ZETA_TERMS):
        total = add(total, power(b.add(q, float(n)), minus_sigma))
    w = b.add(q, float(_ZETA_TERMS))
    inv = b.div(1.0, b.sub(sigma, 1.0))
    pole, c = [], inv
    for k in range(n_c):  # 1 / (sigma - 1 + e)
        pole.append(c if k % 2 == 0 else b.unary("negate", c))
        c = b.mul(c, inv)
    total = add(total, _series_mul(b, power(w, b.sub(1.0, sigma)), pole))
    total = add(total, [b.mul(t, 0.5) for t in power(w, minus_sigma)])
    rising = _times_a(b, [b.c(1.0)] + [zero] * order_s, sigma)
    factorial = 1.0
    for j, bernoulli in enumerate(_BERNOULLI_EVEN, start=1):
        factorial *= (2 * j - 1) * (2 * j)
        part = _series_mul(b, rising, power(w, b.sub(minus_sigma, float(2 * j - 1))))
        total = add(total, [b.mul(t, bernoulli / factorial) for t in part])
        if j < len(_BERNOULLI_EVEN):
            rising = _times_a(b, _times_a(b, rising, b.add(sigma, float(2 * j - 1))), b.add(sigma, float(2 * j)))
    factor = [b.c((-1.0) ** order_q)] + [zero] * order_s
    for i in range(order_q):
        factor = _times_a(b, factor, b.add(s, float(i)) if i else s)
    value = b.mul(_series_mul(b, factor, total)[order_s], float(math.factorial(order_s)))
    inside = b.less(b.maximum(b.sub(1.0, s), b.unary("negate", q)), 0.0)  # s > 1 and q > 0
    return b.select(inside, value, math.nan, final=True)


def _beta_branch(b: Elementwise, a: Name, bb: Name, x: Name) -> tuple[Name, Name, Name, Name, Name, Name]:
    """Which side of the beta continued fraction serves x: (direct, p, q, y, log y,
    log(1 - y)), with (p, q, y) = (a, b, x) where x < (a + 1) / (a + b + 2), else
    (b, a, 1 - x) for 1 - I_(1-x)(b, a)."""
    direct = b.less(x, b.div(b.add(a, 1.0), b.add(b.add(a, bb), 2.0)))
    log_x, log_1mx = b.unary("log", x), b.unary("log_plus_one", b.unary("negate", x))
    return (direct, b.select(direct, a, bb), b.select(direct, bb, a), b.select(direct, x, b.sub(1.0, x)),
            b.select(direct, log_x, log_1mx), b.select(direct, log_1mx, log_x))


def betainc(b: Elementwise, a: Name, bb: Name, x: Name) -> Name:
    """The regularized incomplete beta function I_x(a, b): the continued fraction of
    x^a (1 - x)^b / (a B(a, b)) (modified Lentz, a stablehlo.while until every element
    converged, at most 5000 steps) where x < (a + 1) / (a + b + 2), else 1 - I_{1-x}(b, a);
    0 at x = 0, 1 at x = 1, nan outside [0, 1] or for a, b < 0, and SciPy's 1 and 0 for
    a = 0 and b = 0."""
    tiny = 1e-300 if b.dtype == "float64" else 1e-30
    direct, p, q, y, log_y, log_1my = _beta_branch(b, a, bb, x)
    pq = b.add(p, q)

    def guard(s: Elementwise, v: Name) -> Name:
        return s.select(s.less(s.unary("abs", v), tiny), tiny, v)

    def step(s: Elementwise, c: list[Name]) -> tuple[list[Name], Name]:
        cc, d, h, m = c
        m = s.add(m, 1.0)
        m2 = s.mul(m, 2.0)
        even = s.div(s.mul(s.mul(m, s.sub(q, m)), y), s.mul(s.add(s.sub(p, 1.0), m2), s.add(p, m2)))
        d = s.div(1.0, guard(s, s.add(s.mul(even, d), 1.0)))
        cc = guard(s, s.add(s.div(even, cc), 1.0))
        h = s.mul(h, s.mul(d, cc))
        odd = s.unary("negate", s.div(s.mul(s.mul(s.add(p, m), s.add(pq, m)), y),
                                      s.mul(s.add(p, m2), s.add(s.add(p, 1.0), m2))))
        d = s.div(1.0, guard(s, s.add(s.mul(odd, d), 1.0)))
        cc = guard(s, s.add(s.div(odd, cc), 1.0))
        delta = s.mul(d, cc)
        return [cc, d, s.mul(h, delta), m], s.unary("abs", s.sub(delta, 1.0))

    d0 = b.div(1.0, guard(b, b.sub(1.0, b.div(b.mul(pq, y), b.add(p, 1.0)))))
    _, _, h, _ = _loop(b, [b.c(1.0), d0, d0, b.c(0.0)], step, 5000)
    log_beta = b.sub(b.add(b.chlo("lgamma", p), b.chlo("lgamma", q)), b.chlo("lgamma", pq))
    front = b.div(b.unary("exponential", b.sub(b.add(b.mul(p, log_y), b.mul(q, log_1my)), log_beta)), p)
    part = b.mul(front, h)
    value = b.select(direct, part, b.sub(1.0, part))
    value = b.select(b.equal(x, 0.0), 0.0, b.select(b.equal(x, 1.0), 1.0, value))
    value = b.select(b.equal(a, 0.0), 1.0, b.select(b.equal(bb, 0.0), 0.0, value))
    bad = b.either(b.less(b.minimum(a, bb), 0.0), b.either(b.less(x, 0.0), b.less(1.0, x)))
    return b.select(bad, math.nan, value, final=True)


# truncated Taylor series in two shape parameters: row-major lists, coefficient [i][j] at i * n_q + j


class _Bivariate:
    """Series arithmetic of (order_p + 1) x (order_q + 1) coefficients on one builder."""

    def __init__(self, s: Elementwise, n_p: int, n_q: int) -> None:
        self.s, self.n_p, self.n_q = s, n_p, n_q

    def const(self, v: Name | float) -> list[Name]:
        zero = self.s.c(0.0)
        return [self.s._v(v)] + [zero] * (self.n_p * self.n_q - 1)

    def var(self, v: Name, which: int) -> list[Name]:
        out = self.const(v)
        if which == 0 and self.n_p > 1:
            out[self.n_q] = self.s.c(1.0)
        if which == 1 and self.n_q > 1:
            out[1] = self.s.c(1.0)
        return out

    def add(self, p: list[Name], q: list[Name]) -> list[Name]:
        return [self.s.add(u, v) for u, v in zip(p, q, strict=True)]

    def scale(self, p: list[Name], c: Name | float) -> list[Name]:
        return [self.s.mul(u, c) for u in p]

    def mul(self, p: list[Name], q: list[Name]) -> list[Name]:
        s, n_q, out = self.s, self.n_q, []
        for i in range(self.n_p):
            for j in range(n_q):
                acc = None
                for k in range(i + 1):
                    for m in range(j + 1):
                        term = s.mul(p[k * n_q + m], q[(i - k) * n_q + j - m])
                        acc = term if acc is None else s.add(acc, term)
                out.append(acc)
        return out

    def recip(self, p: list[Name]) -> list[Name]:
        s, n_q = self.s, self.n_q
        out: list[Name] = [s.div(1.0, p[0])] + [""] * (self.n_p * n_q - 1)
        for i in range(self.n_p):
            for j in range(n_q):
                if i or j:
                    acc = None
                    for k in range(i + 1):
                        for m in range(j + 1):
                            if k or m:
                                term = s.mul(p[k * n_q + m], out[(i - k) * n_q + j - m])
                                acc = term if acc is None else s.add(acc, term)
                    out[i * n_q + j] = s.unary("negate", s.div(acc, p[0]))
        return out

    def exp(self, p: list[Name]) -> list[Name]:
        s, n_q = self.s, self.n_q
        out: list[Name] = [s.unary("exponential", p[0])] + [""] * (self.n_p * n_q - 1)
        for j in range(1, n_q):
            acc = None
            for m in range(1, j + 1):
                term = s.mul(s.mul(p[m], out[j - m]), m / j)
                acc = term if acc is None else s.add(acc, term)
            out[j] = acc
        for i in range(1, self.n_p):
            for j in range(n_q):
                acc = None
                for k in range(1, i + 1):
                    for m in range(j + 1):
                        term = s.mul(s.mul(p[k * n_q + m], out[(i - k) * n_q + j - m]), k / i)
                        acc = term if acc is None else s.add(acc, term)
                out[i * n_q + j] = acc
        return out

    def clamp(self, p: list[Name], tiny: float) -> list[Name]:
        small = self.s.less(self.s.unary("abs", p[0]), tiny)
        return [self.s.select(small, tiny, p[0]), *(self.s.select(small, 0.0, q) for q in p[1:])]


def _lgamma_coefficients(b: Elementwise, z: Name, n: int) -> list[Name]:
    """lgamma(z + e)'s Taylor coefficients (the k-th, k >= 2: (-1)^k zeta(k, z) / k)."""
    out = [b.chlo("lgamma", z)]
    if n > 1:
        out.append(b.chlo("digamma", z))
    for k in range(2, n):
        out.append(b.mul(b.chlo2("zeta", b.c(float(k)), z), (-1.0) ** k / k))
    return out


def _bivariate_lbeta(v: _Bivariate, p: Name, q: Name) -> list[Name]:
    """log B(p + e, q + d) as a bivariate series."""
    b, n_p, n_q = v.s, v.n_p, v.n_q
    out = v.const(0.0)
    for i, c in enumerate(_lgamma_coefficients(b, p, n_p)):
        out[i * n_q] = b.add(out[i * n_q], c)
    for j, c in enumerate(_lgamma_coefficients(b, q, n_q)):
        out[j] = b.add(out[j], c)
    both = _lgamma_coefficients(b, b.add(p, q), n_p + n_q - 1)
    for i in range(n_p):
        for j in range(n_q):
            weight = math.factorial(i + j) / (math.factorial(i) * math.factorial(j))
            out[i * n_q + j] = b.sub(out[i * n_q + j], b.mul(both[i + j], weight))
    return out


def betainc_d(b: Elementwise, a: Name, bb: Name, x: Name, order_a: int, order_b: int) -> Name:
    """d^(order_a + order_b) I_x(a, b) / da^order_a db^order_b: betainc's continued
    fraction (modified Lentz, below x = (a + 1) / (a + b + 2), else on 1 - I_(1-x)(b, a))
    on truncated Taylor series in a and b, a stablehlo.while until every coefficient has
    settled (tidu.ops.reference.betainc_d, the same algorithm). The swapped branch's series
    has its variables exchanged, so both orders are run and the branch picks its
    coefficient. 0 at x = 0 and x = 1, nan outside a, b > 0, 0 <= x <= 1."""
    tiny = 1e-300 if b.dtype == "float64" else 1e-30
    direct, p, q, y, log_y, log_1my = _beta_branch(b, a, bb, x)
    # the series variable of p is a's in the direct branch, b's in the swapped one: run the
    # fraction with (order_p, order_q) = (max, max) so both branches find their coefficient
    n = max(order_a, order_b) + 1
    v = _Bivariate(b, n, n)
    size = n * n

    def step(s: Elementwise, c: list[Name]) -> tuple[list[Name], Name]:
        w = _Bivariate(s, n, n)
        d, cc, h, k = c[:size], c[size:2 * size], c[2 * size:3 * size], c[-1]
        k = s.add(k, 1.0)
        m2 = s.mul(k, 2.0)
        pe, qe, ye, one = w.var(p, 0), w.var(q, 1), w.const(y), w.const(1.0)
        even = w.mul(w.scale(w.mul(w.add(qe, w.const(s.unary("negate", k))), ye), k),
                     w.recip(w.mul(w.add(pe, w.const(s.sub(m2, 1.0))), w.add(pe, w.const(m2)))))
        d = w.recip(w.clamp(w.add(one, w.mul(even, d)), tiny))
        cc = w.clamp(w.add(one, w.mul(even, w.recip(cc))), tiny)
        h = w.mul(h, w.mul(d, cc))
        odd = w.scale(w.mul(w.mul(w.mul(w.add(pe, w.const(k)), w.add(w.add(pe, qe), w.const(k))), ye),
                            w.recip(w.mul(w.add(pe, w.const(m2)), w.add(pe, w.const(s.add(m2, 1.0)))))), -1.0)
        d = w.recip(w.clamp(w.add(one, w.mul(odd, d)), tiny))
        cc = w.clamp(w.add(one, w.mul(odd, w.recip(cc))), tiny)
        h_new = w.mul(h, w.mul(d, cc))
        err = s.c(0.0)
        for u, old in zip(h_new, c[2 * size:3 * size], strict=True):
            err = s.maximum(err, _relative(s, s.sub(u, old), u))
        return [*d, *cc, *h_new, k], err

    pe, qe, ye, one = v.var(p, 0), v.var(q, 1), v.const(y), v.const(1.0)
    d0 = v.recip(v.clamp(v.add(one, v.scale(v.mul(v.mul(v.add(pe, qe), ye), v.recip(v.add(pe, one))), -1.0)), tiny))
    carried = _loop(b, [*d0, *one, *d0, b.c(0.0)], step, 5000)
    h = carried[2 * size:3 * size]
    exponent = v.scale(_bivariate_lbeta(v, p, q), -1.0)
    exponent[0] = b.add(exponent[0], b.add(b.mul(p, log_y), b.mul(q, log_1my)))
    if n > 1:
        exponent[n] = b.add(exponent[n], log_y)
        exponent[1] = b.add(exponent[1], log_1my)
    part = v.mul(v.mul(v.exp(exponent), v.recip(pe)), h)
    scale = float(math.factorial(order_a) * math.factorial(order_b))
    mine = b.mul(part[order_a * n + order_b], scale)
    theirs = b.mul(part[order_b * n + order_a], -scale)  # the swapped branch: 1 - I, variables exchanged
    if order_a + order_b == 0:
        theirs = b.sub(1.0, part[0])
    value = b.select(direct, mine, theirs)
    value = b.select(b.either(b.equal(x, 0.0), b.equal(x, 1.0)), 0.0 if order_a + order_b else math.nan, value)
    bad = b.either(b.less(b.minimum(a, bb), 0.0), b.either(b.less(x, 0.0), b.less(1.0, x)))
    bad = b.either(bad, b.either(b.equal(a, 0.0), b.equal(bb, 0.0)))
    return b.select(bad, math.nan, value, final=True)


def beta_density_d(b: Elementwise, a: Name, bb: Name, x: Name, order_a: int, order_b: int, order_x: int) -> Name:
    """The partial derivatives of the beta density x^(a-1) (1-x)^(b-1) / B(a, b) in a, b and
    x (tidu.ops.reference.beta_density_d, the same sums), for a, b > 0 and 0 < x < 1 (nan
    elsewhere)."""
    n_a, n_b = order_a + 1, order_b + 1
    v = _Bivariate(b, n_a, n_b)
    log_x = b.unary("log", x)
    log_1mx = b.unary("log_plus_one", b.unary("negate", x))
    exponent = v.scale(_bivariate_lbeta(v, a, bb), -1.0)
    exponent[0] = b.add(exponent[0], b.add(b.mul(b.sub(a, 1.0), log_x), b.mul(b.sub(bb, 1.0), log_1mx)))
    if n_a > 1:
        exponent[n_b] = b.add(exponent[n_b], log_x)
    if n_b > 1:
        exponent[1] = b.add(exponent[1], log_1mx)
    density = v.exp(exponent)
    inv_x, inv_1mx = b.div(1.0, x), b.div(1.0, b.sub(1.0, x))
    total = v.const(0.0)
    for j in range(order_x + 1):
        fa = [b.c(1.0)] + [b.c(0.0)] * order_a
        for i in range(1, j + 1):
            fa = _times_a(b, fa, b.sub(a, float(i)))
        fb = [b.c(1.0)] + [b.c(0.0)] * order_b
        for i in range(1, order_x - j + 1):
            fb = _times_a(b, fb, b.sub(bb, float(i)))
        weight = b.c(math.comb(order_x, j) * (-1.0) ** (order_x - j))
        for _ in range(j):
            weight = b.mul(weight, inv_x)
        for _ in range(order_x - j):
            weight = b.mul(weight, inv_1mx)
        total = v.add(total, [b.mul(weight, b.mul(fa[i], fb[k])) for i in range(n_a) for k in range(n_b)])
    value = b.mul(v.mul(density, total)[order_a * n_b + order_b],
                  float(math.factorial(order_a) * math.factorial(order_b)))
    inside = b.less(b.maximum(b.maximum(b.unary("negate", a), b.unary("negate", bb)),
                              b.maximum(b.unary("negate", x), b.sub(x, 1.0))), 0.0)
    value = b.select(inside, value, math.nan)
    # the ends of [0, 1] (tidu.ops.reference.beta_density_d): 0, inf, or the limit there
    positive = b.less(b.maximum(b.unary("negate", a), b.unary("negate", bb)), 0.0)
    for end, near, far, order_near, order_far in ((0.0, a, bb, order_a, order_b), (1.0, bb, a, order_b, order_a)):
        at = b.both(positive, b.equal(x, end))
        edge: Name | float = math.nan
        if order_x == 0 and order_near == 0:
            limit: Name | float = far if order_far == 0 else (1.0 if order_far == 1 else 0.0)
            below = math.inf if order_far == 0 else math.nan  # an infinite density has no derivative
            edge = b.select(b.less(near, 1.0), below, b.select(b.equal(near, 1.0), limit, math.nan))
        edge = b.select(b.less(float(order_x + 1), near), 0.0, edge)
        value = b.select(at, edge, value, final=end == 1.0)
    return value


def hyp1f1_d(b: Elementwise, a: Name, c: Name, x: Name, order_a: int, order_b: int, order_x: int) -> Name:
    """The partial derivatives of Kummer's M(a, c, x) (SciPy's hyp1f1(a, b, x)) in a, c and
    x: (a)_n / (c)_n M(a + n, c + n, x) for n = order_x, its series (through Kummer's
    transformation for x < 0) on truncated Taylor series in a and c, a stablehlo.while
    until every coefficient converged (tidu.ops.reference.hyp1f1_d, the same algorithm);
    nan at c = 0, -1, -2, ..."""
    n_a, n_c = order_a + 1, order_b + 1
    size = n_a * n_c
    v = _Bivariate(b, n_a, n_c)
    negative = b.less(x, 0.0)
    a_n, c_n = b.add(a, float(order_x)), b.add(c, float(order_x))
    # p = c - a for x < 0, else a: as a series, the constant and both first coefficients selected
    p0 = b.select(negative, b.sub(c_n, a_n), a_n)
    y = b.unary("abs", x)

    def p_series(s: Elementwise) -> list[Name]:
        out = [p0] + [s.c(0.0)] * (size - 1)
        if n_a > 1:
            out[n_c] = s.select(negative, -1.0, 1.0)
        if n_c > 1:
            out[1] = s.select(negative, 1.0, 0.0)
        return out

    def step(s: Elementwise, carry: list[Name]) -> tuple[list[Name], Name]:
        w = _Bivariate(s, n_a, n_c)
        term, total, k = carry[:size], carry[size:2 * size], carry[-1]
        ratio = w.mul(w.add(p_series(s), w.const(k)), w.recip(w.add(w.var(c_n, 1), w.const(k))))
        factor = s.div(y, s.add(k, 1.0))
        term = w.scale(w.mul(term, ratio), factor)
        total = w.add(total, term)
        err = s.c(0.0)
        for t, u in zip(term, total, strict=True):
            err = s.maximum(err, _relative(s, t, u))
        return [*term, *total, s.add(k, 1.0)], err

    one = v.const(1.0)
    carried = _loop(b, [*one, *one, b.c(0.0)], step, 5000)
    total = carried[size:2 * size]
    exp_x = b.unary("exponential", x)
    total = [b.select(negative, b.mul(exp_x, t), t) for t in total]
    rising = v.const(1.0)
    for i in range(order_x):
        rising = v.mul(rising, v.mul(v.var(b.add(a, float(i)), 0), v.recip(v.var(b.add(c, float(i)), 1))))
    value = b.mul(v.mul(rising, total)[order_a * n_c + order_b],
                  float(math.factorial(order_a) * math.factorial(order_b)))
    pole = _nonpositive_integer(b, c)
    return b.select(pole, math.nan, value, final=True)


def expn(b: Elementwise, n: Name, x: Name) -> Name:
    """The generalized exponential integral E_n(x) (n an integer, given as a float): for
    x > 1 the continued fraction exp(-x) / (x + n - n/(x + n + 2 - 2(n + 1)/(...))) by
    modified Lentz, for x <= 1 the power series, whose term k = n - 1 holds digamma(n) -
    log x; each a stablehlo.while until every element it serves converged. E_0 = e^-x / x,
    E_n(0) = 1/(n - 1) (inf for n <= 1); nan for n < 0 or x < 0."""
    tiny = 1e-300 if b.dtype == "float64" else 1e-30
    use_fraction = b.less(1.0, x)
    nm1 = b.sub(n, 1.0)

    def fraction_step(s: Elementwise, c: list[Name]) -> tuple[list[Name], Name]:
        den, cc, d, h, i = c
        i = s.add(i, 1.0)
        an = s.unary("negate", s.mul(i, s.add(nm1, i)))
        den = s.add(den, 2.0)
        d = s.div(1.0, s.add(s.mul(an, d), den))
        cc = s.add(den, s.div(an, cc))
        delta = s.mul(cc, d)
        err = s.select(use_fraction, s.unary("abs", s.sub(delta, 1.0)), 0.0)
        return [den, cc, d, s.mul(h, delta), i], err

    den0 = b.add(x, n)
    d0 = b.div(1.0, b.select(b.equal(den0, 0.0), tiny, den0))
    _, _, _, h, _ = _loop(b, [den0, b.c(1 / tiny), d0, d0, b.c(0.0)], fraction_step, 5000)
    fraction = b.mul(h, b.unary("exponential", b.unary("negate", x)))
    log_x = b.unary("log", x)
    special = b.sub(b.chlo("digamma", b.maximum(n, 1.0)), log_x)  # psi(n) - log x, the term k = n - 1

    def series_step(s: Elementwise, c: list[Name]) -> tuple[list[Name], Name]:
        total, fact, i = c
        i = s.add(i, 1.0)
        fact = s.mul(fact, s.div(s.unary("negate", x), i))
        term = s.select(s.equal(i, nm1), s.mul(fact, special), s.div(s.unary("negate", fact), s.sub(i, nm1)))
        total = s.add(total, term)
        err = s.select(use_fraction, 0.0, s.div(s.unary("abs", term), s.unary("abs", total)))
        return [total, fact, i], err

    first = b.select(b.equal(nm1, 0.0), b.sub(b.unary("negate", log_x), EULER_GAMMA), b.div(1.0, nm1))
    series, _, _ = _loop(b, [first, b.c(1.0), b.c(0.0)], series_step, 5000)
    value = b.select(use_fraction, fraction, series)
    zeroth = b.div(b.unary("exponential", b.unary("negate", x)), x)
    value = b.select(b.equal(n, 0.0), zeroth, value)
    at_zero = b.select(b.less(1.0, n), b.div(1.0, nm1), math.inf)
    value = b.select(b.equal(x, 0.0), at_zero, value)
    value = b.select(b.equal(x, math.inf), 0.0, value)
    return b.select(b.less(b.minimum(n, x), 0.0), math.nan, value, final=True)


def _dilog_series(b: Elementwise, y: Name) -> Name:
    """Li2(y) = sum y^k / k^2 for |y| <= 1/2 (56 terms: 2^-56 < eps / 4)."""
    term, total = y, y
    for k in range(2, 57):
        term = b.mul(term, y)
        total = b.add(total, b.mul(term, 1.0 / (k * k)))
    return total


def _dilog_small(b: Elementwise, y: Name) -> Name:
    """Li2(y) for -1 <= y <= 1/2: the series, or below -1/2 Landen's identity
    Li2(y) = -Li2(y / (y - 1)) - log(1 - y)^2 / 2 (y / (y - 1) in (1/3, 1/2])."""
    inner = b.select(b.less(y, -0.5), b.div(y, b.sub(y, 1.0)), y)
    series = _dilog_series(b, inner)
    log1my = b.unary("log_plus_one", b.unary("negate", y))
    landen = b.sub(b.unary("negate", series), b.mul(b.mul(log1my, log1my), 0.5))
    return b.select(b.less(y, -0.5), landen, series)


def spence(b: Elementwise, z: Name) -> Name:
    """SciPy's spence(z) = Li2(1 - z), the integral of log(t) / (1 - t) from 1 to z, for
    z >= 0: below 1/2 by Euler's reflection pi^2/6 - log(z) log(1 - z) - Li2(z), up to 2 as
    Li2(1 - z) directly (Landen below 1 - z = -1/2), above by the inversion
    -pi^2/6 - log(z - 1)^2 / 2 - Li2(1 / (1 - z)); pi^2/6 at 0, nan below 0 and at inf."""
    pi2_6 = math.pi ** 2 / 6
    low_z = b.minimum(z, 0.5)
    reflection = b.sub(b.sub(pi2_6, b.mul(b.unary("log", low_z), b.unary("log_plus_one", b.unary("negate", low_z)))),
                       _dilog_series(b, low_z))
    mid = _dilog_small(b, b.sub(1.0, b.minimum(b.maximum(z, 0.5), 2.0)))
    high_z = b.maximum(z, 2.0)
    log_zm1 = b.unary("log", b.sub(high_z, 1.0))
    inversion = b.sub(b.sub(-pi2_6, b.mul(b.mul(log_zm1, log_zm1), 0.5)),
                      _dilog_small(b, b.div(1.0, b.sub(1.0, high_z))))
    value = b.select(b.less(z, 0.5), reflection, b.select(b.less(z, 2.0), mid, inversion))
    value = b.select(b.equal(z, 0.0), pi2_6, value)
    bad = b.either(b.less(z, 0.0), b.equal(z, math.inf))  # SciPy's nan at inf too
    return b.select(bad, math.nan, value, final=True)


def _fresnel(b: Elementwise, x: Name) -> tuple[Name, Name]:
    """(S(x), C(x)) for x >= 0: power series up to 1.6 (30 terms each); above it
    C + iS = (1 + i)/2 erf(z), z = (1 - i) sqrt(pi)/2 x, with erfc(z) = exp(-z^2)/sqrt(pi)
    K(z) and K Laplace's continued fraction 1/(z + (1/2)/(z + 1/(z + (3/2)/...))) (60 levels,
    complex arithmetic in real and imaginary parts). exp(-z^2) = exp(i pi x^2 / 2), its phase
    reduced exactly: x^2 split into hi + lo (Dekker), hi taken modulo 4."""
    cut = 1.6
    small_x = b.minimum(x, cut)
    t = b.mul(b.mul(small_x, small_x), math.pi / 2)
    t2 = b.unary("negate", b.mul(t, t))
    term_c, term_s = small_x, b.mul(small_x, t)
    c_sum, s_sum = small_x, b.mul(term_s, 1.0 / 3)
    for k in range(1, 30):
        term_c = b.mul(term_c, b.mul(t2, 1.0 / ((2 * k - 1) * (2 * k))))
        term_s = b.mul(term_s, b.mul(t2, 1.0 / ((2 * k) * (2 * k + 1))))
        c_sum = b.add(c_sum, b.mul(term_c, 1.0 / (4 * k + 1)))
        s_sum = b.add(s_sum, b.mul(term_s, 1.0 / (4 * k + 3)))
    large_x = b.maximum(x, cut)
    zr = b.mul(large_x, math.sqrt(math.pi) / 2)
    zi = b.unary("negate", zr)
    tr, ti = zr, zi
    for k in range(60, 0, -1):  # t = z + (k/2) / t
        inv = b.div(k / 2, b.add(b.mul(tr, tr), b.mul(ti, ti)))
        tr, ti = b.add(zr, b.mul(tr, inv)), b.sub(zi, b.mul(ti, inv))
    d = b.add(b.mul(tr, tr), b.mul(ti, ti))
    kr, ki = b.div(tr, d), b.unary("negate", b.div(ti, d))  # K = 1 / t
    split = 2.0 ** 27 + 1 if b.dtype == "float64" else 2.0 ** 12 + 1
    hi = b.mul(large_x, large_x)
    c = b.mul(large_x, split)
    xh = b.sub(c, b.sub(c, large_x))
    xl = b.sub(large_x, xh)
    lo = b.add(b.add(b.sub(b.mul(xh, xh), hi), b.mul(b.mul(xh, xl), 2.0)), b.mul(xl, xl))
    phase = b.mul(b.add(b.binary("remainder", hi, 4.0), lo), math.pi / 2)
    er, ei = b.unary("cosine", phase), b.unary("sine", phase)
    scale = 1 / math.sqrt(math.pi)
    fr = b.mul(b.sub(b.mul(er, kr), b.mul(ei, ki)), scale)  # erfc(z)
    fi = b.mul(b.add(b.mul(er, ki), b.mul(ei, kr)), scale)
    c_large = b.mul(b.add(b.sub(1.0, fr), fi), 0.5)
    s_large = b.mul(b.sub(b.sub(1.0, fr), fi), 0.5)
    inside = b.less(x, cut)
    return b.select(inside, s_sum, s_large), b.select(inside, c_sum, c_large)


def _odd(b: Elementwise, x: Name, value: Name, at_inf: float) -> Name:
    ax = b.unary("abs", x)
    # float32 (and narrower): from 2**60 on, where x^2 and the continued fraction's squares
    # overflow (nan past 1.9e19), the integral is its limit to float32's precision (1 /
    # (pi x) < 3e-19); float64 overflows only where SciPy's own fresnel is nan
    far = b.equal(ax, math.inf) if b.dtype == "float64" else b.less(2.0**60, ax)
    value = b.select(far, at_inf, value)
    return b.select(b.less(x, 0.0), b.unary("negate", value), value, final=True)


def fresnel_s(b: Elementwise, x: Name) -> Name:
    """The Fresnel integral S(x), the integral of sin(pi t^2 / 2) from 0 to x: odd, 1/2 at inf."""
    s, _ = _fresnel(b, b.unary("abs", x))
    return _odd(b, x, s, 0.5)


def fresnel_c(b: Elementwise, x: Name) -> Name:
    """The Fresnel integral C(x), the integral of cos(pi t^2 / 2) from 0 to x: odd, 1/2 at inf."""
    _, c = _fresnel(b, b.unary("abs", x))
    return _odd(b, x, c, 0.5)


def hyp1f1(b: Elementwise, a: Name, c: Name, x: Name) -> Name:
    """Kummer's confluent hypergeometric function M(a, c, x) (SciPy's hyp1f1(a, b, x)): the
    series sum (a)_k / (c)_k x^k / k!, for x < 0 through Kummer's transformation
    M(a, c, x) = e^x M(c - a, c, -x) (positive terms where c > a > 0), a stablehlo.while
    until every element converged (at most 5000 steps)."""
    negative = b.less(x, 0.0)
    p = b.select(negative, b.sub(c, a), a)
    y = b.unary("abs", x)

    def step(s: Elementwise, carry: list[Name]) -> tuple[list[Name], Name]:
        term, total, k = carry
        term = s.mul(term, s.div(s.mul(s.add(p, k), y), s.mul(s.add(c, k), s.add(k, 1.0))))
        total = s.add(total, term)
        return [term, total, s.add(k, 1.0)], s.div(s.unary("abs", term), s.unary("abs", total))

    one = b.c(1.0)
    _, total, _ = _loop(b, [one, one, b.c(0.0)], step, 5000)
    return b.select(negative, b.mul(b.unary("exponential", x), total), total, final=True)


def _gamma_sign(b: Elementwise, z: Name) -> Name:
    """The sign of Gamma(z): -1 where z < 0 and floor(z) is odd, else 1."""
    odd = b.both(b.less(z, 0.0), b.less(0.5, b.unary("abs", b.binary("remainder", b.unary("floor", z), 2.0))))
    return b.select(odd, -1.0, 1.0)


def _gamma_ratio(b: Elementwise, up: tuple[Name, Name], down: tuple[Name, Name]) -> Name:
    """Gamma(up[0]) Gamma(up[1]) / (Gamma(down[0]) Gamma(down[1])) through lgamma (0 where a
    denominator's argument is a pole)."""
    log = b.sub(b.add(b.chlo("lgamma", up[0]), b.chlo("lgamma", up[1])),
                b.add(b.chlo("lgamma", down[0]), b.chlo("lgamma", down[1])))
    sign = b.mul(b.mul(_gamma_sign(b, up[0]), _gamma_sign(b, up[1])),
                 b.mul(_gamma_sign(b, down[0]), _gamma_sign(b, down[1])))
    return b.mul(sign, b.unary("exponential", log))


def _nonpositive_integer(b: Elementwise, z: Name) -> Name:
    """Where z is 0, -1, -2, ... (the poles of Gamma)."""
    return b.both(b.less(z, 0.5), b.equal(z, b.unary("floor", z)))


def hyp2f1(b: Elementwise, a: Name, bb: Name, c: Name, x: Name) -> Name:
    """The Gauss hypergeometric function 2F1(a, b; c; x) (SciPy's hyp2f1) for real x <= 1:
    the series sum (a)_k (b)_k / (c)_k x^k / k!, a stablehlo.while until every element
    converged. Below x = 0 first Pfaff's transformation 2F1(a, b; c; x) =
    (1 - x)^-a 2F1(a, c - b; c; x / (x - 1)) (a the smaller of a and b; the series in
    x itself alternates there and cancels), then where the
    argument z is above 0.9 and d = c - a - b is 0.01 or more from an integer, the
    connection to 1 - z: Gamma(c) Gamma(d) / (Gamma(c - a) Gamma(c - b)) 2F1(a, b; 1 - d;
    1 - z) + (1 - z)^d Gamma(c) Gamma(-d) / (Gamma(a) Gamma(b)) 2F1(c - a, c - b; 1 + d;
    1 - z). Where a or b is 0, -1, -2, ... the series is a polynomial, summed as it is for
    any x. At x = 1 Gauss's sum (inf for d <= 0); inf for x > 1 (no polynomial) and where c
    is 0, -1, -2, ... (unless a polynomial ends first); 1 at x = 0."""
    neg_a, neg_b = _nonpositive_integer(b, a), _nonpositive_integer(b, bb)
    poly = b.either(neg_a, neg_b)
    # the polynomial's degree is -m, m the larger of a and b that is 0, -1, -2, ...
    m = b.maximum(b.select(neg_a, a, -math.inf), b.select(neg_b, bb, -math.inf))
    pole = b.both(_nonpositive_integer(b, c), b.less(m, c))
    one_minus_x = b.sub(1.0, x)
    pfaff = b.both(b.less(x, 0.0), b.negation(poly))
    lo, hi = b.minimum(a, bb), b.maximum(a, bb)
    p = b.select(pfaff, lo, a)
    q = b.select(pfaff, b.sub(c, hi), bb)
    z = b.select(pfaff, b.div(x, b.sub(x, 1.0)), x)
    w = b.select(pfaff, b.div(1.0, one_minus_x), one_minus_x)  # 1 - z without cancellation
    d = b.sub(b.sub(c, p), q)
    near_integer = b.less(b.unary("abs", b.sub(d, b.unary("round_nearest_even", d))), 0.01)
    connect = b.both(b.both(b.less(0.9, z), b.negation(near_integer)), b.negation(poly))
    # the first series: 2F1(p, q; c; z), or where connected 2F1(p, q; 1 - d; 1 - z); the
    # second 2F1(c - p, c - q; 1 + d; 1 - z) where connected (else its argument 0: 1)
    r1 = b.select(connect, b.sub(1.0, d), c)
    y1 = b.select(connect, w, z)
    p2, q2, r2 = b.sub(c, p), b.sub(c, q), b.add(d, 1.0)
    y2 = b.select(connect, w, 0.0)

    def term_step(s: Elementwise, term: Name, k: Name, u: Name, v: Name, r: Name, y: Name) -> Name:
        top = s.mul(s.mul(s.add(u, k), s.add(v, k)), y)
        # 0, not 0 / 0: a polynomial whose c is a pole past its end, and the second series
        # where it is not used (its 1 + d may be a pole there)
        return s.select(s.equal(top, 0.0), 0.0, s.mul(term, s.div(top, s.mul(s.add(r, k), s.add(k, 1.0)))))

    def step(s: Elementwise, carry: list[Name]) -> tuple[list[Name], Name]:
        t1, s1, t2, s2, k = carry
        t1, t2 = term_step(s, t1, k, p, q, r1, y1), term_step(s, t2, k, p2, q2, r2, y2)
        s1, s2 = s.add(s1, t1), s.add(s2, t2)
        return [t1, s1, t2, s2, s.add(k, 1.0)], s.maximum(_relative(s, t1, s1), _relative(s, t2, s2))

    one = b.c(1.0)
    _, s1, _, s2, _ = _loop(b, [one, one, one, one, b.c(0.0)], step, 20000)
    g1 = _gamma_ratio(b, (c, d), (b.sub(c, p), b.sub(c, q)))
    g2 = _gamma_ratio(b, (c, b.unary("negate", d)), (p, q))
    connected = b.add(b.mul(g1, s1), b.mul(b.mul(b.binary("power", w, d), g2), s2))
    value = b.select(connect, connected, s1)
    value = b.select(pfaff, b.mul(b.binary("power", one_minus_x, b.unary("negate", p)), value), value)
    # x = 1: Gauss's sum where c - a - b > 0, else inf; x > 1: inf (a polynomial is summed)
    d0 = b.sub(b.sub(c, a), bb)
    gauss = b.select(b.less(0.0, d0), _gamma_ratio(b, (c, d0), (b.sub(c, a), b.sub(c, bb))), math.inf)
    value = b.select(b.both(b.equal(x, 1.0), b.negation(poly)), gauss, value)
    value = b.select(b.both(b.less(1.0, x), b.negation(poly)), math.inf, value)
    value = b.select(pole, math.inf, value)
    return b.select(b.equal(x, 0.0), 1.0, value, final=True)


# truncated Taylor series in three shape parameters (a, b, c): lists of names, the
# coefficient of e_a^i e_b^j e_c^k at (i n_b + j) n_c + k, multiplied and divided by series
# of degree one, v + sum s_i e_i (tidu.ops.reference's _trivariate_times and _over)


def _trivariate_indices(shape: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    return [(i, j, k) for i in range(shape[0]) for j in range(shape[1]) for k in range(shape[2])]


def _trivariate_flat(shape: tuple[int, int, int], index: tuple[int, int, int]) -> int:
    return (index[0] * shape[1] + index[1]) * shape[2] + index[2]


def _trivariate_times(s: Elementwise, shape: tuple[int, int, int], p: list[Name], v: Name,
                      slopes: tuple[Name | float, Name | float, Name | float]) -> list[Name]:
    out = []
    for index in _trivariate_indices(shape):
        acc = s.mul(p[_trivariate_flat(shape, index)], v)
        for axis, slope in enumerate(slopes):
            if index[axis] and slope != 0.0:
                prev = list(index)
                prev[axis] -= 1
                acc = s.add(acc, s.mul(p[_trivariate_flat(shape, (prev[0], prev[1], prev[2]))], slope))
        out.append(acc)
    return out


def _trivariate_over(s: Elementwise, shape: tuple[int, int, int], p: list[Name], v: Name,
                     slopes: tuple[Name | float, Name | float, Name | float]) -> list[Name]:
    out: list[Name] = []
    for index in _trivariate_indices(shape):  # lexicographic: each I - e_i is already out
        acc = p[_trivariate_flat(shape, index)]
        for axis, slope in enumerate(slopes):
            if index[axis] and slope != 0.0:
                prev = list(index)
                prev[axis] -= 1
                acc = s.sub(acc, s.mul(out[_trivariate_flat(shape, (prev[0], prev[1], prev[2]))], slope))
        out.append(s.div(acc, v))
    return out


def hyp2f1_d(b: Elementwise, a: Name, bb: Name, c: Name, x: Name, order_a: int, order_b: int, order_c: int,
             order_x: int) -> Name:
    """The partial derivatives of 2F1(a, b; c; x) in a, b, c and x, for x < 1:
    (a)_n (b)_n / (c)_n 2F1(a + n, b + n; c + n; x) for n = order_x, its series (for x < 0
    through Pfaff's transformation (1 - x)^-a 2F1(a, c - b; c; x / (x - 1))) on truncated
    Taylor series in a, b and c, a stablehlo.while until every coefficient converged
    (tidu.ops.reference.hyp2f1_d, the same algorithm); nan for x >= 1 and at c = 0, -1,
    -2, ..."""
    shape = (order_a + 1, order_b + 1, order_c + 1)
    size = shape[0] * shape[1] * shape[2]
    zero = b.c(0.0)
    term = [b.c(1.0)] + [zero] * (size - 1)
    for i in range(order_x):  # the x-derivatives' factor (a)_n (b)_n / (c)_n
        term = _trivariate_times(b, shape, term, b.add(a, float(i)), (1.0, 0.0, 0.0))
        term = _trivariate_times(b, shape, term, b.add(bb, float(i)), (0.0, 1.0, 0.0))
        term = _trivariate_over(b, shape, term, b.add(c, float(i)), (0.0, 0.0, 1.0))
    an, bn, cn = (b.add(v, float(order_x)) for v in (a, bb, c))
    negative = b.less(x, 0.0)
    z = b.select(negative, b.div(x, b.sub(x, 1.0)), x)
    q = b.select(negative, b.sub(cn, bn), bn)

    def step(s: Elementwise, carry: list[Name]) -> tuple[list[Name], Name]:
        t, total, k = carry[:size], carry[size:2 * size], carry[-1]
        q_slopes = (0.0, s.select(negative, -1.0, 1.0), s.select(negative, 1.0, 0.0))
        t = _trivariate_times(s, shape, t, s.add(an, k), (1.0, 0.0, 0.0))
        t = _trivariate_times(s, shape, t, s.add(q, k), q_slopes)
        t = _trivariate_over(s, shape, t, s.add(cn, k), (0.0, 0.0, 1.0))
        factor = s.div(z, s.add(k, 1.0))
        t = [s.mul(u, factor) for u in t]
        total = [s.add(u, v) for u, v in zip(total, t, strict=True)]
        err = s.c(0.0)
        for u, v in zip(t, total, strict=True):
            err = s.maximum(err, _relative(s, u, v))
        return [*t, *total, s.add(k, 1.0)], err

    carried = _loop(b, [*term, *term, zero], step, 20000)
    total = carried[size:2 * size]
    # Pfaff's factor (1 - x)^-(a + e) = (1 - x)^-a exp(-e log(1 - x)), a series in e alone
    minus_log = b.unary("negate", b.unary("log_plus_one", b.unary("negate", x)))
    power, value = b.c(1.0), None
    for i in range(order_a + 1):
        coefficient = b.select(negative, b.mul(power, 1.0 / math.factorial(i)), 1.0 if i == 0 else 0.0)
        part = b.mul(coefficient, total[_trivariate_flat(shape, (order_a - i, order_b, order_c))])
        value = part if value is None else b.add(value, part)
        power = b.mul(power, minus_log)
    assert value is not None
    value = b.mul(value, b.select(negative, b.unary("exponential", b.mul(an, minus_log)), 1.0))
    value = b.mul(value, float(math.factorial(order_a) * math.factorial(order_b) * math.factorial(order_c)))
    bad = b.either(b.negation(b.less(x, 1.0)), _nonpositive_integer(b, c))
    return b.select(bad, math.nan, value, final=True)
