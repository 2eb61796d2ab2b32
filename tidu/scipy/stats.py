"""Probability distributions, as ``jax.scipy.stats``: densities, log densities, CDFs and
their complements and inverses, as compositions of ``tidu.numpy`` and
``tidu.scipy.special`` (so every transform and back end has them, and they differentiate in
the data and in the parameters, shape parameters of the CDFs included).

Each distribution is a namespace of functions, ``from tidu.scipy.stats import norm;
norm.logpdf(x, loc, scale)``, with JAX's signatures and support conventions: outside the
support a log density is -inf and a CDF 0 or 1. A distribution's ``pdf``/``pmf`` is exp of
its log density and its ``logcdf``/``logsf`` the log of its ``cdf``/``sf`` unless written
otherwise (norm's use log_ndtr).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import tidu.numpy as tnp
from tidu.numpy import linalg
from tidu.scipy import special

ArrayLike = Any


def _exp_of(name: str) -> classmethod:
    """A distribution's function exp(its ``name``): pdf from logpdf, pmf from logpmf."""
    return classmethod(lambda cls, *args, **kwargs: tnp.exp(getattr(cls, name)(*args, **kwargs)))


def _log_of(name: str) -> classmethod:
    """A distribution's function log(its ``name``): logcdf from cdf, logsf from sf."""
    return classmethod(lambda cls, *args, **kwargs: tnp.log(getattr(cls, name)(*args, **kwargs)))


def _float(*xs: ArrayLike) -> list[Any]:
    """The arguments as arrays of one floating dtype (ints go to float64, as JAX's x64)."""
    arrays = [tnp.asarray(x) for x in xs]
    dtype = tnp.result_type(*arrays)
    if not np.issubdtype(np.dtype(str(dtype)), np.inexact):
        dtype = "float64"
    return [tnp.asarray(a, dtype=dtype) for a in arrays]


def _standard(x: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> tuple[Any, Any]:
    x, loc, scale = _float(x, loc, scale)
    return (x - loc) / scale, scale


class norm:
    """The normal distribution N(loc, scale^2)."""

    @staticmethod
    def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, scale = _standard(x, loc, scale)
        return -0.5 * y * y - tnp.log(scale) - 0.5 * math.log(2 * math.pi)

    pdf = _exp_of("logpdf")

    @staticmethod
    def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return special.ndtr(_standard(x, loc, scale)[0])

    @staticmethod
    def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return special.log_ndtr(_standard(x, loc, scale)[0])

    @staticmethod
    def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return special.ndtr(-_standard(x, loc, scale)[0])

    @staticmethod
    def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return special.log_ndtr(-_standard(x, loc, scale)[0])

    @staticmethod
    def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        q, loc, scale = _float(q, loc, scale)
        return loc + scale * special.ndtri(q)

    @staticmethod
    def isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        q, loc, scale = _float(q, loc, scale)
        return loc - scale * special.ndtri(q)


class multivariate_normal:
    """The multivariate normal distribution N(mean, cov); x's last axis is the variable."""

    @staticmethod
    def logpdf(x: ArrayLike, mean: ArrayLike, cov: ArrayLike, allow_singular: None = None) -> Any:
        if allow_singular is not None:
            raise NotImplementedError("multivariate_normal.logpdf: allow_singular is not supported (as in JAX)")
        x, mean, cov = _float(x, mean, cov)
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


def _positive_support(y: Any, value: Any) -> Any:
    return tnp.where(y < 0, -np.inf, value)


class gamma:
    """The gamma distribution with shape ``a``."""

    @staticmethod
    def logpdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, scale = _standard(x, loc, scale)
        (a,) = _float(a)
        inside = tnp.where(y < 0, 1.0, y)
        return _positive_support(y, special.xlogy(a - 1, inside) - inside - special.gammaln(a) - tnp.log(scale))

    pdf = _exp_of("logpdf")

    @staticmethod
    def cdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, _ = _standard(x, loc, scale)
        return special.gammainc(a, tnp.maximum(y, 0.0))

    logcdf = _log_of("cdf")

    @staticmethod
    def sf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, _ = _standard(x, loc, scale)
        return special.gammaincc(a, tnp.maximum(y, 0.0))

    logsf = _log_of("sf")


class chi2:
    """The chi-squared distribution with ``df`` degrees of freedom: gamma(df/2, scale 2 scale)."""

    @staticmethod
    def logpdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return gamma.logpdf(*_as_gamma(x, df, loc, scale))

    @staticmethod
    def cdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return gamma.cdf(*_as_gamma(x, df, loc, scale))

    @staticmethod
    def sf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return gamma.sf(*_as_gamma(x, df, loc, scale))

    pdf = _exp_of("logpdf")
    logcdf = _log_of("cdf")
    logsf = _log_of("sf")


def _as_gamma(x: ArrayLike, df: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> list[Any]:
    """chi2's arguments as gamma's: (x, df / 2, loc, 2 scale)."""
    x, df, loc, scale = _float(x, df, loc, scale)
    return [x, df / 2, loc, 2 * scale]


class beta:
    """The beta distribution with shapes ``a`` and ``b`` on [loc, loc + scale]."""

    @staticmethod
    def logpdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, scale = _standard(x, loc, scale)
        a, b = _float(a, b)
        outside = (y < 0) | (y > 1)
        inside = tnp.where(outside, 0.5, y)
        value = special.xlogy(a - 1, inside) + special.xlog1py(b - 1, -inside) - special.betaln(a, b) - tnp.log(scale)
        return tnp.where(outside, -np.inf, value)

    pdf = _exp_of("logpdf")

    @staticmethod
    def cdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, _ = _standard(x, loc, scale)
        return special.betainc(a, b, tnp.clip(y, 0.0, 1.0))

    logcdf = _log_of("cdf")

    @staticmethod
    def sf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, _ = _standard(x, loc, scale)
        return special.betainc(b, a, 1.0 - tnp.clip(y, 0.0, 1.0))

    logsf = _log_of("sf")


class t:
    """Student's t distribution with ``df`` degrees of freedom."""

    @staticmethod
    def logpdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, scale = _standard(x, loc, scale)
        (df,) = _float(df)
        return (special.gammaln((df + 1) / 2) - special.gammaln(df / 2) - 0.5 * tnp.log(df * math.pi)
                - tnp.log(scale) - (df + 1) / 2 * tnp.log1p(y * y / df))

    pdf = _exp_of("logpdf")


class expon:
    """The exponential distribution with rate 1 / scale."""

    @staticmethod
    def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, scale = _standard(x, loc, scale)
        return _positive_support(y, -y - tnp.log(scale))

    pdf = _exp_of("logpdf")

    @staticmethod
    def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, _ = _standard(x, loc, scale)
        return -tnp.expm1(-tnp.maximum(y, 0.0))

    logcdf = _log_of("cdf")

    @staticmethod
    def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return tnp.exp(expon.logsf(x, loc, scale))

    @staticmethod
    def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, _ = _standard(x, loc, scale)
        return -tnp.maximum(y, 0.0)

    @staticmethod
    def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        q, loc, scale = _float(q, loc, scale)
        return loc - scale * tnp.log1p(-q)


class cauchy:
    """The Cauchy distribution."""

    @staticmethod
    def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, scale = _standard(x, loc, scale)
        return -math.log(math.pi) - tnp.log(scale) - tnp.log1p(y * y)

    pdf = _exp_of("logpdf")

    @staticmethod
    def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return 0.5 + tnp.arctan(_standard(x, loc, scale)[0]) / math.pi

    logcdf = _log_of("cdf")

    @staticmethod
    def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return 0.5 - tnp.arctan(_standard(x, loc, scale)[0]) / math.pi

    logsf = _log_of("sf")

    @staticmethod
    def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        q, loc, scale = _float(q, loc, scale)
        return loc + scale * tnp.tan(math.pi * (q - 0.5))

    @staticmethod
    def isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        q, loc, scale = _float(q, loc, scale)
        return loc - scale * tnp.tan(math.pi * (q - 0.5))


class logistic:
    """The logistic distribution."""

    @staticmethod
    def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, scale = _standard(x, loc, scale)
        a = tnp.abs(y)
        return -a - 2 * tnp.log1p(tnp.exp(-a)) - tnp.log(scale)

    pdf = _exp_of("logpdf")

    @staticmethod
    def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return special.expit(_standard(x, loc, scale)[0])

    @staticmethod
    def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        return special.expit(-_standard(x, loc, scale)[0])

    @staticmethod
    def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        q, loc, scale = _float(q, loc, scale)
        return loc + scale * special.logit(q)

    @staticmethod
    def isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        q, loc, scale = _float(q, loc, scale)
        return loc - scale * special.logit(q)


class laplace:
    """The Laplace (double exponential) distribution."""

    @staticmethod
    def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, scale = _standard(x, loc, scale)
        return -tnp.abs(y) - tnp.log(2 * scale)

    pdf = _exp_of("logpdf")

    @staticmethod
    def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
        y, _ = _standard(x, loc, scale)
        half = 0.5 * tnp.exp(-tnp.abs(y))
        return tnp.where(y < 0, half, 1.0 - half)


class poisson:
    """The Poisson distribution with mean ``mu`` (k an integer; -inf / 0 elsewhere)."""

    @staticmethod
    def logpmf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Any:
        k, mu, loc = _float(k, mu, loc)
        j = k - loc
        outside = (j < 0) | (j != tnp.floor(j))
        inside = tnp.where(outside, 0.0, j)
        return tnp.where(outside, -np.inf, special.xlogy(inside, mu) - special.gammaln(inside + 1) - mu)

    pmf = _exp_of("logpmf")

    @staticmethod
    def cdf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Any:
        k, mu, loc = _float(k, mu, loc)
        j = tnp.floor(k - loc)
        return tnp.where(j < 0, 0.0, special.gammaincc(tnp.maximum(j, 0.0) + 1, mu))


class bernoulli:
    """The Bernoulli distribution with success probability ``p``."""

    @staticmethod
    def logpmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Any:
        k, p, loc = _float(k, p, loc)
        j = k - loc
        return tnp.where(j == 1, tnp.log(p), tnp.where(j == 0, tnp.log1p(-p), -np.inf))

    pmf = _exp_of("logpmf")

    @staticmethod
    def cdf(k: ArrayLike, p: ArrayLike) -> Any:
        k, p = _float(k, p)
        return tnp.where(k < 0, 0.0, tnp.where(k < 1, 1 - p, 1.0))


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
        return tnp.where(outside, -np.inf, value)

    pmf = _exp_of("logpmf")


__all__ = ["bernoulli", "beta", "binom", "cauchy", "chi2", "expon", "gamma", "laplace", "logistic",
           "multivariate_normal", "norm", "poisson", "t"]
