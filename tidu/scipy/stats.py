"""Probability distributions, as ``jax.scipy.stats``: densities, log densities, CDFs and
their complements and inverses, as compositions of ``tidu.numpy`` and
``tidu.scipy.special`` (so every transform and back end has them, and they differentiate in
the data and in the parameters, shape parameters of the CDFs included).

Each distribution is a namespace of functions, ``from tidu.scipy.stats import norm;
norm.logpdf(x, loc, scale)``, with JAX's signatures and support conventions: outside the
support a log density is -inf and a CDF 0 or 1; invalid parameters (a scale or shape <= 0,
a probability outside [0, 1]) and nan arguments give nan, as SciPy. A distribution's
``pdf``/``pmf`` is exp of its log density (the same values; gamma's, chi2's and beta's take
their derivatives at a zero of the density at the edge from a power: ``_pdf_of_parts``);
``logcdf``/``logsf`` are the log of ``cdf``/``sf`` computed so that they stay accurate in
the tails where written so (norm's use log_ndtr).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

import tidu.numpy as tnp
from tidu.nn import keeps_bfloat16
from tidu.numpy import linalg
from tidu.scipy import special
from tidu.transforms.custom import custom_jvp, stop_gradient

ArrayLike = Any


def _exp_of(name: str) -> classmethod:
    """A distribution's function exp(its ``name``): pdf from logpdf, pmf from logpmf."""
    return classmethod(lambda cls, *args, **kwargs: tnp.exp(getattr(cls, name)(*args, **kwargs)))


def _pdf_of_parts(cls: Any, *args: Any, **kwargs: Any) -> Any:
    """A density with a zero of power order at an edge of the support (gamma at y = 0 for
    a > 1, beta also at y = 1 for b > 1): there exp(logpdf) is exp(-inf) times an infinite
    derivative (nan), so the class's ``_pdf_part`` gives the density there as a power of the
    distance to the edge (``at_zero=True``, 0 elsewhere) and its log density elsewhere
    (-inf there). Their sum is exp(logpdf) bit for bit, each half rounded as logpdf is."""
    return cls._pdf_part(*args, at_zero=True, **kwargs) + tnp.exp(cls._pdf_part(*args, at_zero=False, **kwargs))


def _power_at_edge(zero: Any, d: Any, e: Any, log_rest: Any, scale: Any) -> Any:
    """power(d, e) * exp(log_rest) / scale where ``zero`` (d = 0, e > 0: the value is 0 and
    the derivatives the power's one-sided limits), 0 elsewhere; each is computed at a safe
    point where not taken (a 0 cotangent times an infinite derivative is nan). exp(log_rest)
    is capped at the largest float: the value stays 0 (0 times inf was nan) and so do the
    derivatives that are 0 (beta with a and b in the hundreds: 1 / B(a, b) overflows). The
    division by scale comes last: its tangent (d(num) - out d(scale)) / scale has no 0 * inf
    for a tiny scale where that of exp(log_rest - log(scale)) had; a subnormal scale is
    taken as the smallest normal one (1 / scale was inf: its cotangent times 0, nan)."""
    info = tnp.finfo(str(d.dtype))
    big = info.max
    log_rest = tnp.where(zero, log_rest, 0.0)
    over = log_rest > math.log(big) - 1
    rest = tnp.where(over, big, tnp.exp(tnp.where(over, 0.0, log_rest)))
    power = tnp.power(tnp.where(zero, d, 1.0), tnp.where(zero, e, 1.0))
    return tnp.where(zero, power * rest / tnp.maximum(tnp.where(zero, scale, 1.0), info.tiny), 0.0)


def _float(*xs: ArrayLike) -> list[Any]:
    """The arguments as arrays of one floating dtype (ints go to float64, as JAX's x64; bfloat16 stays,
    Python numbers take the arrays' dtype, so float32 data stays float32)."""
    arrays = [x if isinstance(x, int | float) else tnp.asarray(x) for x in xs]
    dtype = tnp.result_type(*arrays)
    if not np.issubdtype(np.dtype(str(dtype)), np.inexact) and str(dtype) != "bfloat16":
        dtype = "float64"
    return [tnp.asarray(a, dtype=dtype) for a in arrays]


def _standard(x: ArrayLike, loc: ArrayLike, scale: ArrayLike, *shapes: ArrayLike) -> tuple[Any, ...]:
    """(y, scale, ok, *shapes): y = (x - loc) / scale, and ok where the arguments are valid
    as SciPy reads them (scale > 0, y not nan; the caller adds the shape parameters'). For
    densities finite at y = 0 (a body that may be infinite there: ``_split_at_loc``); y
    keeps its derivative in scale at x = loc, 0 there, whose own derivative in x, -1 /
    scale^2, the mixed second derivatives need (a constant scale at loc made them 0)."""
    x, loc, scale, *rest = _float(x, loc, scale, *shapes)
    y = (x - loc) / scale
    return (y, scale, (scale > 0) & ~tnp.isnan(y), *rest)


def _split_at_loc(body: Any, x: ArrayLike, loc: ArrayLike, scale: ArrayLike, *shapes: ArrayLike) -> tuple[Any, ...]:
    """(body(y, scale, *shapes), ok, *shapes) for y = (x - loc) / scale, ok as ``_standard``'s,
    for a body whose derivative in y may be infinite or undefined at y = 0 (a gamma's CDF
    with a < 1, a log CDF). At x = loc, y is 0 for every scale: there the body runs on y
    with a constant scale (no derivative in scale at all, at every order), elsewhere on y,
    each at the safe point y = 1/2 where not taken. A select of y itself came too late for
    forward mode: y's tangent in scale, an explicit 0 at loc, times the body's infinite
    derivative was nan (reverse mode selected the cotangent before the product)."""
    x, loc, scale, *rest = _float(x, loc, scale, *shapes)
    edge = x == loc
    y = (x - loc) / scale
    at_loc = body(tnp.where(edge, (x - loc) / stop_gradient(scale), 0.5), scale, *rest)
    value = tnp.where(edge, at_loc, body(tnp.where(edge, 0.5, y), scale, *rest))
    return (value, (scale > 0) & ~tnp.isnan(y), *rest)


def _log_at_zero(zero: Any, t: Any) -> Any:
    """log(t) where ``zero`` (t = 0 there: -inf), 0 elsewhere: the log of a probability that
    is 0 at the edge of the support (t = y for a CDF at y = 0, t = 1 - y for beta's sf at
    y = 1), with the one-sided derivative from inside, infinite (log F ~ a log y; the log
    of F gave F' / F = 0 / 0 for a > 1), and none in the shape parameters (the value is
    -inf for every shape)."""
    return tnp.log(tnp.where(zero, t, 1.0))


def _valid(value: Any, *conditions: Any) -> Any:
    """``value`` where every condition holds, nan elsewhere: SciPy's result for invalid
    parameters (a scale or shape <= 0, a probability outside [0, 1]) and nan arguments."""
    ok = conditions[0]
    for c in conditions[1:]:
        ok = ok & c
    return tnp.where(ok, value, np.nan)


def _unit_interval(q: Any) -> Any:
    return (q >= 0) & (q <= 1)


class norm:
    """The normal distribution N(loc, scale^2)."""

    @staticmethod
    def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, scale, ok = _standard(x, loc, scale)
        return _valid(-0.5 * y * y - tnp.log(scale) - 0.5 * math.log(2 * math.pi), ok)

    pdf = _exp_of("logpdf")

    @staticmethod
    def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, _, ok = _standard(x, loc, scale)
        return _valid(special.ndtr(y), ok)

    @staticmethod
    def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, _, ok = _standard(x, loc, scale)
        return _valid(special.log_ndtr(y), ok)

    @staticmethod
    def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, _, ok = _standard(x, loc, scale)
        return _valid(special.ndtr(-y), ok)

    @staticmethod
    def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, _, ok = _standard(x, loc, scale)
        return _valid(special.log_ndtr(-y), ok)

    @staticmethod
    def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        q, loc, scale = _float(q, loc, scale)
        return _valid(loc + scale * special.ndtri(q), scale > 0, _unit_interval(q))

    @staticmethod
    def isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        q, loc, scale = _float(q, loc, scale)
        return _valid(loc - scale * special.ndtri(q), scale > 0, _unit_interval(q))


class multivariate_normal:
    """The multivariate normal distribution N(mean, cov); x's last axis is the variable.
    A scalar ``cov`` is ``cov`` times the identity; a scalar ``mean`` with a scalar
    ``cov`` is the univariate normal, elementwise in x (as JAX and SciPy)."""

    @staticmethod
    def logpdf(x: ArrayLike, mean: ArrayLike, cov: ArrayLike, allow_singular: bool | None = None) -> Any:
        if allow_singular:
            raise NotImplementedError("multivariate_normal.logpdf: allow_singular is not supported (as in JAX)")
        x, mean, cov = _float(x, mean, cov)
        if str(x.dtype) in ("float16", "bfloat16"):  # (the Cholesky factor in float32, the result in x's dtype)
            return tnp.astype(multivariate_normal.logpdf(*(tnp.astype(a, np.float32) for a in (x, mean, cov))),
                              x.dtype)
        if np.ndim(cov) == 0:
            d = 1 if np.ndim(mean) == 0 else np.shape(mean)[-1]
            y = x - mean
            sq = y * y if np.ndim(mean) == 0 else tnp.sum(y * y, axis=-1)
            return _valid(-0.5 * sq / cov - 0.5 * d * (math.log(2 * math.pi) + tnp.log(cov)), cov > 0)
        d = np.shape(x)[-1] if np.ndim(x) else 1
        if np.ndim(cov) != 2 or np.shape(cov) != (d, d):
            raise ValueError(f"multivariate_normal.logpdf: cov must be a ({d}, {d}) matrix for x's last axis of "
                             f"size {d}, got shape {np.shape(cov)}")
        factor = linalg.cholesky(cov)
        centred = tnp.reshape(x - mean, (-1, d)).T
        z = linalg.solve_triangular(factor, centred, lower=True)
        out = (-0.5 * tnp.sum(z * z, axis=0) - tnp.sum(tnp.log(tnp.diagonal(factor)))
               - 0.5 * d * math.log(2 * math.pi))
        return tnp.reshape(out, np.shape(x - mean)[:-1])

    pdf = _exp_of("logpdf")


# Functions with a constant stretch (a CDF outside the support) compute their formula at a
# safe point inside it there and select the constant after: a tangent of 0 times the
# formula's derivative at the edge (infinite, or 0 / 0 through a log) was nan in forward
# mode where reverse mode gave 0. At the edge of the support itself the derivative is the
# one-sided one from inside (the density there).


def _gamma_log_density(y: Any, scale: Any, a: Any) -> Any:
    outside = y < 0
    inside = tnp.where(outside, 1.0, y)
    value = special.xlogy(a - 1, inside) - inside - special.gammaln(a) - tnp.log(scale)
    return tnp.where(outside, -np.inf, value)


class gamma:
    """The gamma distribution with shape ``a``."""

    @staticmethod
    def logpdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        value, ok, a = _split_at_loc(_gamma_log_density, x, loc, scale, a)
        return _valid(value, ok, a > 0)

    pdf = classmethod(_pdf_of_parts)

    @staticmethod
    def _pdf_part(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1, *,
                  at_zero: bool) -> Any:
        """``_pdf_of_parts``'s halves: at y = 0 with a > 1 the density y^(a - 1) e^-y / Gamma(a)
        / scale, and the log density elsewhere (a <= 1 included, whose values stay exp(logpdf))."""
        def body(y: Any, scale: Any, a: Any) -> Any:
            zero = (y == 0) & (a > 1) & (scale > 0)  # (an invalid scale: exp(logpdf), nan)
            if at_zero:
                return _power_at_edge(zero, y, a - 1, -y - special.gammaln(tnp.where(zero, a, 2.0)), scale)
            safe = tnp.where(zero, 0.5, y), tnp.where(zero, 1.0, scale)  # (-log(scale) with a tiny scale)
            return tnp.where(zero, -np.inf, _gamma_log_density(*safe, a))

        value, ok, a = _split_at_loc(body, x, loc, scale, a)
        return value if at_zero else _valid(value, ok, a > 0)

    @staticmethod
    def _cdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike, scale: ArrayLike, upper: bool, log: bool) -> Any:
        def body(y: Any, scale: Any, a: Any) -> Any:
            outside = y < 0
            zero = (y == 0) & (log and not upper)  # (the log CDF at 0: _log_at_zero)
            inside = tnp.where(outside | zero, 1.0, y)
            value = (special.gammaincc if upper else special.gammainc)(a, inside)
            edge = (0.0 if log else 1.0) if upper else (-np.inf if log else 0.0)
            if log:  # near 1, log1p of minus the complement (log(value) kept only the digits of 1)
                prob, comp = (special.gammaincc, special.gammainc) if upper else (special.gammainc, special.gammaincc)
                value = _log_prob(value, lambda z: prob(a, z), lambda z: comp(a, z), inside, 1.0)
                value = tnp.where(zero, _log_at_zero(zero, y), value)
            return tnp.where(outside, edge, value)

        value, ok, a = _split_at_loc(body, x, loc, scale, a)
        return _valid(value, ok, a > 0)

    @staticmethod
    def cdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return gamma._cdf(x, a, loc, scale, upper=False, log=False)

    @staticmethod
    def logcdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return gamma._cdf(x, a, loc, scale, upper=False, log=True)

    @staticmethod
    def sf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return gamma._cdf(x, a, loc, scale, upper=True, log=False)

    @staticmethod
    def logsf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return gamma._cdf(x, a, loc, scale, upper=True, log=True)


def _log_prob(p: Any, prob: Any, complement: Any, z: Any, safe: float) -> Any:
    """log(p) for the probability p = ``prob(z)``, as log1p(-q) with q = ``complement(z)``
    (1 - p computed directly) where p > 1/2: there log(p) would keep only the digits of 1.
    Each branch is computed again at ``safe`` (a point inside the support) where not taken:
    the derivative of p at the edge of the support is infinite where it is 1 (a gamma's
    sf at 0 with a < 1), and a 0 cotangent through the branch not taken times it was nan."""
    near_one = p > 0.5
    q = complement(tnp.where(near_one, z, safe))
    return tnp.where(near_one, tnp.log1p(-q), tnp.log(prob(tnp.where(near_one, safe, z))))


class chi2:
    """The chi-squared distribution with ``df`` degrees of freedom: gamma(df/2, scale 2 scale)."""

    @staticmethod
    def logpdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return gamma.logpdf(*_as_gamma(x, df, loc, scale))

    @staticmethod
    def cdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return gamma.cdf(*_as_gamma(x, df, loc, scale))

    @staticmethod
    def logcdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return gamma.logcdf(*_as_gamma(x, df, loc, scale))

    @staticmethod
    def sf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return gamma.sf(*_as_gamma(x, df, loc, scale))

    @staticmethod
    def logsf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return gamma.logsf(*_as_gamma(x, df, loc, scale))

    pdf = classmethod(_pdf_of_parts)

    @staticmethod
    def _pdf_part(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1, *,
                  at_zero: bool) -> Any:
        return gamma._pdf_part(*_as_gamma(x, df, loc, scale), at_zero=at_zero)


def _as_gamma(x: ArrayLike, df: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> list[Any]:
    """chi2's arguments as gamma's: (x, df / 2, loc, 2 scale)."""
    x, df, loc, scale = _float(x, df, loc, scale)
    return [x, df / 2, loc, 2 * scale]


def _beta_log_density(y: Any, scale: Any, a: Any, b: Any) -> Any:
    outside = (y < 0) | (y > 1)
    inside = tnp.where(outside, 0.5, y)
    value = (special.xlogy(a - 1, inside) + special.xlog1py(b - 1, -inside) - special.betaln(a, b)
             - tnp.log(scale))
    return tnp.where(outside, -np.inf, value)


class beta:
    """The beta distribution with shapes ``a`` and ``b`` on [loc, loc + scale]."""

    @staticmethod
    def logpdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        value, ok, a, b = _split_at_loc(_beta_log_density, x, loc, scale, a, b)
        return _valid(value, ok, a > 0, b > 0)

    pdf = classmethod(_pdf_of_parts)

    @staticmethod
    def _pdf_part(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1, *,
                  at_zero: bool) -> Any:
        """``_pdf_of_parts``'s halves: at y = 0 with a > 1 the density y^(a - 1) (1 - y)^(b - 1)
        / B(a, b) / scale, at y = 1 with b > 1 (1 - y)^(b - 1) y^(a - 1) / B(a, b) / scale, and
        the log density elsewhere."""
        def body(y: Any, scale: Any, a: Any, b: Any) -> Any:
            low, high = (y == 0) & (a > 1) & (scale > 0), (y == 1) & (b > 1) & (scale > 0)
            edge = low | high
            a_, b_ = tnp.where(edge, a, 2.0), tnp.where(edge, b, 2.0)
            y_low, y_high = tnp.where(low, y, 0.5), tnp.where(high, y, 0.5)
            log_rest = (tnp.where(low, special.xlog1py(b_ - 1, -y_low), special.xlogy(a_ - 1, y_high))
                        - special.betaln(a_, b_))
            # where that is nan (b = inf at y = 0), so is the log density: exp of it, as before
            zero = edge & ~tnp.isnan(log_rest)
            if at_zero:
                return _power_at_edge(zero, tnp.where(low, y_low, 1.0 - y_high), tnp.where(low, a_, b_) - 1,
                                      log_rest, scale)
            safe = tnp.where(zero, 0.5, y), tnp.where(zero, 1.0, scale)  # (-log(scale) with a tiny scale)
            return tnp.where(zero, -np.inf, _beta_log_density(*safe, a, b))

        value, ok, a, b = _split_at_loc(body, x, loc, scale, a, b)
        return value if at_zero else _valid(value, ok, a > 0, b > 0)

    @staticmethod
    def _cdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike, scale: ArrayLike, upper: bool,
             log: bool) -> Any:
        def body(y: Any, scale: Any, a: Any, b: Any) -> Any:
            below, above = y < 0, y > 1
            # the log of a probability 0 at the edge (the CDF at 0, the sf at 1): _log_at_zero
            zero = ((y == 1) if upper else (y == 0)) & log
            inside = tnp.where(below | above | zero, 0.5, y)
            value = special.betainc(b, a, 1.0 - inside) if upper else special.betainc(a, b, inside)
            low, high = (1.0, 0.0) if upper else (0.0, 1.0)
            if log:
                def lower(z: Any) -> Any:
                    return special.betainc(a, b, z)

                def upper_tail(z: Any) -> Any:
                    return special.betainc(b, a, 1.0 - z)

                prob, comp = (upper_tail, lower) if upper else (lower, upper_tail)
                low, high = math.log(low) if low else -np.inf, math.log(high) if high else -np.inf
                value = _log_prob(value, prob, comp, inside, 0.5)
                value = tnp.where(zero, _log_at_zero(zero, 1.0 - y if upper else y), value)
            return tnp.where(below, low, tnp.where(above, high, value))

        value, ok, a, b = _split_at_loc(body, x, loc, scale, a, b)
        return _valid(value, ok, a > 0, b > 0)

    @staticmethod
    def cdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return beta._cdf(x, a, b, loc, scale, upper=False, log=False)

    @staticmethod
    def logcdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return beta._cdf(x, a, b, loc, scale, upper=False, log=True)

    @staticmethod
    def sf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return beta._cdf(x, a, b, loc, scale, upper=True, log=False)

    @staticmethod
    def logsf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return beta._cdf(x, a, b, loc, scale, upper=True, log=True)


class t:
    """Student's t distribution with ``df`` degrees of freedom."""

    @staticmethod
    def logpdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        # df = inf is the normal distribution (SciPy's; the formula gives inf - inf there)
        y, scale, ok, df = _standard(x, loc, scale, df)
        normal = tnp.isinf(df)
        nu = tnp.where(normal, 1.0, df)
        value = (_half_gamma_ratio(nu / 2) - 0.5 * math.log(2 * math.pi)
                 - (nu + 1) / 2 * _log1p_square(y / tnp.sqrt(nu)))
        value = tnp.where(normal, -0.5 * y * y - 0.5 * math.log(2 * math.pi), value) - tnp.log(scale)
        return _valid(value, ok, df > 0)

    pdf = _exp_of("logpdf")


def _half_gamma_ratio(h: Any) -> Any:
    """gammaln(h + 1/2) - gammaln(h) - log(h) / 2, which tends to 0 as h grows: from h = 30
    on by its asymptotic series (the difference of the two gammaln, each about h log h,
    kept none of its digits for large h), below as written; each at a safe point where
    not taken."""
    big = h >= 30
    hs = tnp.where(big, 1.0, h)
    direct = special.gammaln(hs + 0.5) - special.gammaln(hs) - 0.5 * tnp.log(hs)
    w = 1.0 / tnp.where(big, h, 30.0)
    w2 = w * w
    series = w * (-1 / 8 + w2 * (1 / 192 + w2 * (-1 / 640 + w2 * (17 / 14336 - w2 * (31 / 18432)))))
    return tnp.where(big, series, direct)


def _log1p_square(r: Any) -> Any:
    """log(1 + r^2) without overflow of r^2: as 2 log|r| + log1p(1 / r^2) for |r| > 1 (finite
    up to the largest floats), each branch at a safe point where not taken."""
    a = tnp.abs(r)
    big = a > 1
    small = tnp.where(big, 0.0, r)
    large = tnp.where(big, a, 2.0)
    return tnp.where(big, 2 * tnp.log(large) + tnp.log1p(1 / (large * large)), tnp.log1p(small * small))


_LN2 = math.log(2.0)


def _log1mexp(y: Any) -> Any:
    """log(1 - exp(-y)) for y >= 0, accurate at both ends (log(-expm1(-y)) up to log 2,
    log1p(-exp(-y)) above), each branch computed at a safe point where not taken."""
    big = y > _LN2
    small_branch = tnp.log(-tnp.expm1(-tnp.where(big, _LN2, y)))
    big_branch = tnp.log1p(-tnp.exp(-tnp.where(big, y, 1.0)))
    return tnp.where(big, big_branch, small_branch)


class expon:
    """The exponential distribution with rate 1 / scale."""

    @staticmethod
    def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, scale, ok = _standard(x, loc, scale)
        return _valid(tnp.where(y < 0, -np.inf, -y - tnp.log(scale)), ok)

    pdf = _exp_of("logpdf")

    @staticmethod
    def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, _, ok = _standard(x, loc, scale)
        return _valid(-tnp.expm1(-tnp.where(y < 0, 0.0, y)), ok)

    @staticmethod
    def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        def body(y: Any, _: Any) -> Any:
            outside = y < 0
            return tnp.where(outside, -np.inf, _log1mexp(tnp.where(outside, 1.0, y)))

        value, ok = _split_at_loc(body, x, loc, scale)
        return _valid(value, ok)

    @staticmethod
    def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return tnp.exp(expon.logsf(x, loc, scale))

    @staticmethod
    def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, _, ok = _standard(x, loc, scale)
        return _valid(-tnp.where(y < 0, 0.0, y), ok)

    @staticmethod
    def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        q, loc, scale = _float(q, loc, scale)
        return _valid(loc - scale * tnp.log1p(-q), scale > 0, _unit_interval(q))


@custom_jvp
def _cauchy_quantile(q: Any) -> Any:
    """tan(pi (q - 1/2)) for q in [0, 1]: that formula in the middle, -cot(pi q) and
    cot(pi (1 - q)) in the tails (their arguments near 0, accurate: -inf at q = 0 and
    inf at q = 1), each computed at a safe point where not taken. Its derivative is
    pi (1 + p^2) of the value p (inf at q = 0 and 1 in both modes: through tan = sin / cos,
    reverse mode gave inf * 0 there)."""
    middle = tnp.abs(q - 0.5) <= 0.25
    upper = q > 0.5
    # tan as sin / cos, each NumPy's eagerly and traced (tnp.tan traced is sin / cos)
    z = math.pi * (tnp.where(middle, q, 0.5) - 0.5)
    centre = tnp.sin(z) / tnp.cos(z)
    w = math.pi * tnp.where(middle, 0.25, tnp.where(upper, 1.0 - q, q))
    tail = tnp.where(upper, tnp.cos(w), -tnp.cos(w)) / tnp.sin(w)  # (no float64 sign: q's dtype)
    return tnp.where(middle, centre, tail)


@_cauchy_quantile.defjvp
def _cauchy_quantile_jvp(primals: tuple[Any], tangents: tuple[Any]) -> tuple[Any, Any]:
    (q,), (dq,) = primals, tangents
    p = _cauchy_quantile(q)
    return p, math.pi * (1.0 + p * p) * dq


def _cauchy_log_cdf(y: Any) -> Any:
    """log(cdf(y)): log of the CDF up to the median, log1p(-sf) above it (the log of a CDF
    near 1 kept only the digits of 1 - sf), and -log(-pi y) below -1e8 (the CDF is
    1 / (-pi y) there to double precision; its derivative -1 / y is 0 at -inf, where the
    log of the arctangent gave 0 / 0), each computed at a safe point where not taken."""
    low = y <= 0
    far = y < -1e8
    one = tnp.ones_like(y)
    below = tnp.log(tnp.arctan2(one, -tnp.where(low & ~far, y, 0.0)) / math.pi)
    tail = -math.log(math.pi) - tnp.log(-tnp.where(far, y, -1e9))
    above = tnp.log1p(-tnp.arctan2(one, tnp.where(low, 0.0, y)) / math.pi)
    return tnp.where(far, tail, tnp.where(low, below, above))


class cauchy:
    """The Cauchy distribution."""

    @staticmethod
    def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, scale, ok = _standard(x, loc, scale)
        return _valid(-math.log(math.pi) - tnp.log(scale) - _log1p_square(y), ok)

    pdf = _exp_of("logpdf")

    @staticmethod
    def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        # arctan2(1, -y) / pi = 1/2 + arctan(y) / pi without its cancellation as y -> -inf
        y, _, ok = _standard(x, loc, scale)
        return _valid(tnp.arctan2(tnp.ones_like(y), -y) / math.pi, ok)

    @staticmethod
    def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, _, ok = _standard(x, loc, scale)
        return _valid(_cauchy_log_cdf(y), ok)

    @staticmethod
    def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, _, ok = _standard(x, loc, scale)
        return _valid(tnp.arctan2(tnp.ones_like(y), y) / math.pi, ok)

    @staticmethod
    def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, _, ok = _standard(x, loc, scale)
        return _valid(_cauchy_log_cdf(-y), ok)

    @staticmethod
    def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        q, loc, scale = _float(q, loc, scale)
        return _valid(loc + scale * _cauchy_quantile(q), scale > 0, _unit_interval(q))

    @staticmethod
    def isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        q, loc, scale = _float(q, loc, scale)
        return _valid(loc - scale * _cauchy_quantile(q), scale > 0, _unit_interval(q))


class logistic:
    """The logistic distribution."""

    @staticmethod
    def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, scale, ok = _standard(x, loc, scale)
        a = tnp.abs(y)
        return _valid(-a - 2 * tnp.log1p(tnp.exp(-a)) - tnp.log(scale), ok)

    pdf = _exp_of("logpdf")

    @staticmethod
    def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, _, ok = _standard(x, loc, scale)
        return _valid(special.expit(y), ok)

    @staticmethod
    def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, _, ok = _standard(x, loc, scale)
        return _valid(special.expit(-y), ok)

    @staticmethod
    def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        q, loc, scale = _float(q, loc, scale)
        return _valid(loc + scale * special.logit(q), scale > 0, _unit_interval(q))

    @staticmethod
    def isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        q, loc, scale = _float(q, loc, scale)
        return _valid(loc - scale * special.logit(q), scale > 0, _unit_interval(q))


class laplace:
    """The Laplace (double exponential) distribution."""

    @staticmethod
    def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, scale, ok = _standard(x, loc, scale)
        return _valid(-tnp.abs(y) - tnp.log(2 * scale), ok)

    pdf = _exp_of("logpdf")

    @staticmethod
    def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        # each side's formula at a safe point on the other side: the derivative at loc is
        # the density there, 1 / (2 scale) (exp(-|y|) made it 0)
        y, _, ok = _standard(x, loc, scale)
        below = y < 0
        left = 0.5 * tnp.exp(tnp.where(below, y, 0.0))
        right = 1.0 - 0.5 * tnp.exp(-tnp.where(below, 0.0, y))
        return _valid(tnp.where(below, left, right), ok)


# The discrete distributions: -inf (log) off the integers of the support, nan for a nan k
# and for invalid parameters, as SciPy.


class poisson:
    """The Poisson distribution with mean ``mu`` (k an integer; -inf / 0 elsewhere)."""

    @staticmethod
    @special.rounds_bfloat16_once  # (bfloat16 rounded k - loc = 6.99 to 7)
    def logpmf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Any:
        k, mu, loc = _float(k, mu, loc)
        j = k - loc
        outside = (j < 0) | (j != tnp.floor(j))
        inside = tnp.where(outside, 0.0, j)
        value = tnp.where(outside, -np.inf, special.xlogy(inside, mu) - special.gammaln(inside + 1) - mu)
        return _valid(value, mu >= 0, ~tnp.isnan(j))

    pmf = _exp_of("logpmf")

    @staticmethod
    def cdf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Any:
        k, mu, loc = _float(k, mu, loc)
        j = tnp.floor(k - loc)
        value = tnp.where(j < 0, 0.0, special.gammaincc(tnp.where(j < 0, 0.0, j) + 1, mu))
        return _valid(value, mu >= 0, ~tnp.isnan(j))


class bernoulli:
    """The Bernoulli distribution with success probability ``p``."""

    @staticmethod
    def logpmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Any:
        k, p, loc = _float(k, p, loc)
        j = k - loc
        # each log at a safe p where not taken: log(p)'s infinite derivative at p = 0 met a 0
        # cotangent at k = 0 (nan where the derivative is -1 / (1 - p))
        one, zero = j == 1, j == 0
        value = tnp.where(one, tnp.log(tnp.where(one, p, 0.5)),
                          tnp.where(zero, tnp.log1p(-tnp.where(zero, p, 0.5)), -np.inf))
        return _valid(value, _unit_interval(p), ~tnp.isnan(j))

    pmf = _exp_of("logpmf")

    @staticmethod
    def cdf(k: ArrayLike, p: ArrayLike) -> Any:
        k, p = _float(k, p)
        return _valid(tnp.where(k < 0, 0.0, tnp.where(k < 1, 1 - p, 1.0)), _unit_interval(p), ~tnp.isnan(k))


class binom:
    """The binomial distribution of ``n`` trials with success probability ``p``."""

    @staticmethod
    def logpmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Any:
        k, n, p, loc = _float(k, n, p, loc)
        j = k - loc
        outside = (j < 0) | (j > n) | (j != tnp.floor(j))
        inside = tnp.where(outside, 0.0, j)
        value = (special.gammaln(n + 1) - special.gammaln(inside + 1) - special.gammaln(n - inside + 1)
                 + special.xlogy(inside, p) + special.xlog1py(n - inside, -p))
        valid_n = (n >= 0) & (n == tnp.floor(n))
        return _valid(tnp.where(outside, -np.inf, value), valid_n, _unit_interval(p), ~tnp.isnan(j))

    pmf = _exp_of("logpmf")


__all__ = ["bernoulli", "beta", "binom", "cauchy", "chi2", "expon", "gamma", "laplace", "logistic",
           "multivariate_normal", "norm", "poisson", "t"]


def _keeps_half_dtype(fn: Any) -> Any:
    """``fn`` whose float32 result is rounded to float16 or bfloat16 where that is the
    arguments' common dtype: traced, a constant bfloat16 ``scale`` is folded by NumPy, whose
    bfloat16 scalar with a Python float gives float32 (``-log(pi) - log(scale)``), where
    JAX keeps bfloat16."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        arrays = [a for a in (*args, *kwargs.values()) if hasattr(a, "dtype")]
        if not arrays or str(getattr(out, "dtype", "")) != "float32":
            return out
        want = str(tnp.result_type(*arrays))
        return tnp.astype(out, want) if want in ("bfloat16", "float16") else out

    return functools.wraps(fn)(wrapped)


def _keep_bfloat16_eagerly() -> None:
    """Each distribution's functions called eagerly on a bfloat16 ``x`` compute in float32
    and round their results to bfloat16 once, as XLA does (NumPy with ml_dtypes gives
    float32 for ``x * 0.5``; traced, tidu keeps bfloat16 as JAX does)."""
    for name in __all__:
        cls = globals()[name]
        for attr, value in list(vars(cls).items()):
            if isinstance(value, staticmethod):
                setattr(cls, attr, staticmethod(keeps_bfloat16(_keeps_half_dtype(value.__func__))))


_keep_bfloat16_eagerly()

