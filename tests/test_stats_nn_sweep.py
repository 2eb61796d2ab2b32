"""Edge cases of tidu.scipy.stats, tidu.nn and tidu.random found by a sweep against JAX
(x64), SciPy and mpmath: far tails of the log densities, derivatives at the edge of the
support, nan propagation of the relu family, the left tails of gelu and squareplus,
empty softmax axes, and the shapes and statistics of tidu.random's draws."""

from __future__ import annotations

import os
from typing import Any

import ml_dtypes
import mpmath as mp
import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jax.scipy.stats as jst  # noqa: E402

import tidu  # noqa: E402
import tidu.nn as tnn  # noqa: E402
import tidu.numpy as tnp  # noqa: E402
import tidu.random as tr  # noqa: E402
from tidu.scipy import stats  # noqa: E402

mp.mp.dps = 40


def _mp_array(f: Any, xs: Any) -> np.ndarray:
    """``f`` at each of ``xs`` in mpmath with 1300 digits (the formulas below cancel up to
    600 digits at the extremes)."""
    with mp.workdps(1300):
        return np.array([float(f(mp.mpf(float(x)))) for x in np.ravel(xs)])


# --- tidu.scipy.stats ------------------------------------------------------------------------


def test_cauchy_logpdf_is_finite_in_the_far_tails() -> None:
    # log1p(y^2) overflowed for |y| > 1e154: -inf where the value is about -1382.7
    x = np.array([-1e300, -1e200, -1e155, -3.0, 0.5, 1e155, 1e300])
    want = _mp_array(lambda v: -mp.log(mp.pi) - mp.log(2) - mp.log1p(((v - 0.3) / 2) ** 2), x)
    np.testing.assert_allclose(stats.cauchy.logpdf(x, 0.3, 2.0), want, rtol=1e-14)
    np.testing.assert_allclose(tidu.jit(lambda v: stats.cauchy.logpdf(v, 0.3, 2.0))(x), want, rtol=1e-14)


def _t_logpdf(v: Any, df: float) -> Any:
    nu = mp.mpf(df)
    return (mp.loggamma((nu + 1) / 2) - mp.loggamma(nu / 2) - mp.log(nu * mp.pi) / 2
            - (nu + 1) / 2 * mp.log1p(v * v / nu))


@pytest.mark.parametrize("df", [0.7, 4.5, 59.0, 61.0, 1e6, 1e12, 1e300])
def test_t_logpdf_for_large_df_and_far_x(df: float) -> None:
    # gammaln((df + 1) / 2) - gammaln(df / 2) lost its digits for large df (df = 1e300:
    # -346 at x = 0 where the value is -0.919); y^2 / df overflowed for x = 1e200
    x = np.array([-1e200, -50.0, -2.0, 0.0, 1e-3, 1.0, 30.0, 1e160])
    want = _mp_array(lambda v: _t_logpdf(v, df), x)
    np.testing.assert_allclose(stats.t.logpdf(x, df), want, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(tidu.jit(lambda v: stats.t.logpdf(v, df))(x), want, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("df", [4.5, 59.0, 61.0, 1e4])
def test_t_logpdf_derivative_in_df_across_the_series_switch(df: float) -> None:
    x = np.array([-3.0, 0.0, 0.4, 2.0])
    got = tidu.grad(lambda d: tnp.sum(stats.t.logpdf(x, d)))(np.float64(df))
    with mp.workdps(60):
        want = sum(float(mp.diff(lambda d, v=v: _t_logpdf(mp.mpf(float(v)), d), mp.mpf(df))) for v in x)
    np.testing.assert_allclose(got, want, rtol=1e-9)


def test_log_sf_and_cdf_derivatives_at_the_edge_are_the_one_sided_limits() -> None:
    # where the probability is 1 at the edge (log1p branch), the derivative of the other
    # branch (infinite there) met a 0 cotangent: nan. Oracle: JAX where it is right, and
    # -density / sf -> -inf (a < 1 at 0) otherwise
    g = tidu.grad(lambda v: tnp.sum(stats.gamma.logsf(v, 0.5)))(np.array([0.0, 0.5]))
    ref = jax.grad(lambda v: jnp.sum(jst.gamma.logsf(v, 0.5)))(jnp.array([0.0, 0.5]))
    np.testing.assert_allclose(g, ref, rtol=1e-12)
    assert g[0] == -np.inf
    # beta's cdf is 1 at x = 1; its log's derivative there is the density, inf for b < 1
    assert tidu.grad(lambda v: tnp.sum(stats.beta.logcdf(v, 2.0, 0.5)))(np.array([1.0]))[0] == np.inf
    # and -inf for the log sf at 0 with a < 1 (JAX: 0)
    assert tidu.grad(lambda v: tnp.sum(stats.beta.logsf(v, 0.5, 2.0)))(np.array([0.0]))[0] == -np.inf


def test_cdf_derivative_in_scale_at_loc_is_zero_in_reverse_mode() -> None:
    # F(loc) is the same for every scale; the density at loc is infinite for a < 1 and
    # was multiplied by the 0 of d(x - loc) / scale / dscale: nan
    x = np.array([1.0, 1.5])
    for f in (lambda s: stats.gamma.cdf(x, 0.5, 1.0, s), lambda s: stats.beta.cdf(x, 0.5, 0.5, 1.0, s),
              lambda s: stats.beta.sf(x, 0.5, 0.5, 1.0, s)):
        g = tidu.grad(lambda s, f=f: tnp.sum(f(s)))(np.array([2.0, 2.0]))
        assert g[0] == 0
        assert np.isfinite(g[1])


def test_cdf_derivative_in_a_scalar_scale_at_loc_is_zero() -> None:
    # forward mode (a scalar scale): y's tangent in scale, an explicit 0 at loc, times the
    # infinite density there was nan
    assert tidu.grad(lambda s: stats.gamma.cdf(1.0, 0.5, 1.0, s))(2.0) == 0
    x = np.array([1.0, 1.5])
    want = jax.jacfwd(lambda s: jst.gamma.cdf(jnp.asarray(x), 0.5, 1.0, s))(jnp.array([2.0, 2.0]))
    for jac in (tidu.jacfwd, tidu.jacrev):
        got = jac(lambda s: stats.gamma.cdf(x, 0.5, 1.0, s))(np.array([2.0, 2.0]))
        np.testing.assert_array_equal(got[0], [0.0, 0.0])  # (JAX's jacfwd: nan at loc)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    assert tidu.hessian(lambda s: stats.gamma.cdf(1.0, 0.5, 1.0, s))(2.0) == 0
    assert tidu.hessian(lambda s: stats.beta.logcdf(1.0, 0.5, 2.0, 1.0, s))(2.0) == 0
    got = tidu.jacfwd(lambda v, s: stats.gamma.cdf(v, 0.5, 1.0, s), argnums=(0, 1))(1.0, 2.0)
    assert got[0] == np.inf and got[1] == 0


def test_gamma_log_cdf_derivative_at_zero_is_the_one_sided_limit() -> None:
    # log F(x) ~ a log x - log Gamma(a + 1) as x -> 0+: d/dx -> +inf for every a (mpmath below);
    # the log of F gave F' / F = 0 / 0 = nan for a > 1. JAX gives 0 (its where outside the support)
    for a in (0.5, 1.0, 2.5, 40.0):
        with mp.workdps(60):
            d = mp.diff(lambda v, a=a: mp.log(mp.gammainc(a, 0, v, regularized=True)), mp.mpf("1e-40"),
                        h=mp.mpf("1e-52"), direction=1)
            assert d > 1e39 * a * 0.99
        assert tidu.grad(lambda v, a=a: tnp.sum(stats.gamma.logcdf(v, a)))(np.array([0.0]))[0] == np.inf
        assert tidu.grad(lambda v, a=a: stats.gamma.logcdf(v, a))(0.0) == np.inf
        assert tidu.grad(lambda v, a=a: stats.gamma.logcdf(0.0, v))(a) == 0  # (-inf for every a)


# (distribution, shape parameters, method, edge: "lower" at x = loc, "upper" at x = loc + scale)
_EDGE_CASES = [
    *[("gamma", (a,), m, "lower") for a in (0.5, 1.0, 2.5) for m in ("cdf", "sf", "logcdf", "logsf", "logpdf")],
    *[("chi2", (df,), m, "lower") for df in (1.0, 5.0) for m in ("cdf", "sf", "logcdf", "logsf", "logpdf")],
    *[("beta", ab, m, "lower") for ab in ((0.5, 2.0), (2.0, 0.5), (2.0, 2.0))
      for m in ("cdf", "sf", "logcdf", "logsf", "logpdf")],
    *[("beta", ab, m, "upper") for ab in ((2.0, 0.5), (0.5, 2.0), (2.0, 2.0)) for m in ("logcdf", "logsf")],
    ("expon", (), "logcdf", "lower"),
]
_LOC, _SCALE = 1.0, 2.0


def _mp_standard(dist: str, shapes: tuple, method: str) -> Any:
    """The standardized function of y in mpmath (chi2: a gamma with a = df / 2 of y / 2)."""
    if dist == "expon":
        dist, shapes = "gamma", (1.0,)
    if dist == "chi2":
        f = _mp_standard("gamma", (shapes[0] / 2,), method)
        return lambda y: f(y / 2) - (mp.log(2) if method == "logpdf" else 0)
    a = mp.mpf(shapes[0])
    if dist == "gamma":
        cdf, sf = (lambda y: mp.gammainc(a, 0, y, regularized=True)), (lambda y: mp.gammainc(a, y, regularized=True))
        logpdf = lambda y: (a - 1) * mp.log(y) - y - mp.loggamma(a)  # noqa: E731
    else:
        b = mp.mpf(shapes[1])
        cdf = lambda y: mp.betainc(a, b, 0, y, regularized=True)  # noqa: E731
        sf = lambda y: mp.betainc(a, b, y, 1, regularized=True)  # noqa: E731
        logpdf = lambda y: (a - 1) * mp.log(y) + (b - 1) * mp.log1p(-y) - mp.log(mp.beta(a, b))  # noqa: E731
    return {"cdf": cdf, "sf": sf, "logcdf": lambda y: mp.log(cdf(y)), "logsf": lambda y: mp.log(sf(y)),
            "logpdf": logpdf}[method]


def _one_sided(d: Any) -> float:
    """A derivative from mpmath 1e-40 inside the edge as its one-sided limit: +-inf where huge,
    0 where tiny (the limits of powers y^p with |p| >= 1/2 and of a / y: 1e-40^p is 1e20 or 1e-20)."""
    return float(mp.sign(d) * mp.inf) if abs(d) > 1e12 else (0.0 if abs(d) < 1e-12 else float(d))


@pytest.mark.parametrize("dist,shapes,method,edge", _EDGE_CASES,
                         ids=[f"{d}{list(s)}-{m}-{e}" for d, s, m, e in _EDGE_CASES])
def test_derivatives_at_the_edge_of_the_support_in_both_modes(dist: str, shapes: tuple, method: str,
                                                              edge: str) -> None:
    # the derivative in x (and loc) is the one-sided one from inside; in scale at x = loc, where
    # y = 0 for every scale, y is constant: 0 for the CDFs and their logs, -1 / scale for the log
    # density (its -log(scale)). Forward mode gave nan where the density or the log's derivative
    # is infinite at loc (y's explicit 0 tangent in scale times it), and both modes nan for a log
    # CDF at a probability of 0 (F' / F = 0 / 0)
    f = getattr(getattr(stats, dist), method)
    x = _LOC if edge == "lower" else _LOC + _SCALE
    g = _mp_standard(dist, shapes, method)
    with mp.workdps(80):
        y0 = mp.mpf("1e-40") if edge == "lower" else 1 - mp.mpf("1e-40")
        dy = mp.diff(g, y0, h=mp.mpf("1e-55"), direction=1 if edge == "lower" else -1)
    want_x = _one_sided(dy / _SCALE)
    # (x = loc + scale: y = (x - loc) / scale moves with scale, d/dscale = -dy / scale)
    want_s = (-1 / _SCALE if method == "logpdf" else 0.0) if edge == "lower" else _one_sided(-dy / _SCALE)
    for i, want in ((0, want_x), (len(shapes) + 2, want_s)):
        args = [x, *shapes, _LOC, _SCALE]

        def at(v: Any, i: int = i, args: list = args) -> Any:
            return f(*args[:i], v, *args[i + 1:])

        forward = tidu.grad(at)(np.float64(args[i]))
        reverse = tidu.grad(lambda v, at=at: tnp.sum(at(v)))(np.array([args[i]]))[0]
        for mode, got in (("forward", forward), ("reverse", reverse)):
            what = f"d/d{'x' if i == 0 else 'scale'} of {dist}{shapes}.{method} at {edge} edge, {mode}"
            if np.isinf(want):
                assert got == want, what
            else:
                np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-15, err_msg=what)


def _mp_density(dist: str, x: Any, loc: Any, scale: Any, *shapes: Any) -> Any:
    """gamma's, chi2's or beta's density at x in mpmath (0 outside the support)."""
    if dist == "chi2":
        return _mp_density("gamma", x, loc, 2 * scale, shapes[0] / 2)
    y = (x - loc) / scale
    if dist == "gamma":
        (a,) = shapes
        return mp.power(y, a - 1) * mp.exp(-y) / mp.gamma(a) / scale if y >= 0 else mp.mpf(0)
    a, b = shapes
    return mp.power(y, a - 1) * mp.power(1 - y, b - 1) / mp.beta(a, b) / scale if 0 <= y <= 1 else mp.mpf(0)


def _mp_one_sided(f: Any, point: list[float], i: int, direction: int) -> float:
    """The derivative of ``f`` in its i-th argument at ``point`` from the side ``direction``:
    the difference quotient with steps 1e-40 and 1e-45 (60 digits), inf where it grows as
    the step shrinks (the power y^(a - 1) with 1 < a < 2), 0 where it vanishes with it."""
    with mp.workdps(60):
        q = []
        for h in (mp.mpf("1e-40"), mp.mpf("1e-45")):
            moved = [mp.mpf(v) for v in point]
            moved[i] += direction * h
            q.append((f(*moved) - f(*(mp.mpf(v) for v in point))) / (direction * h))
        if abs(q[1]) > 1e10 and abs(q[1]) > 100 * abs(q[0]):
            return float(mp.sign(q[1]) * mp.inf)
        return float(q[1]) if abs(q[1]) > mp.mpf("1e-15") else 0.0


# (dist, shapes, edge) for pdf = exp(logpdf) at the edge of the support where the density is
# 0 (gamma and chi2 at y = 0 with a > 1, beta at y = 0 with a > 1 and at y = 1 with b > 1):
# its derivative was exp(-inf) times an infinite derivative of logpdf, nan
_PDF_EDGES = [("gamma", (a,), 0) for a in (1.5, 2.0, 2.5, 3.0)] + \
             [("chi2", (df,), 0) for df in (3.0, 4.0, 5.0, 6.0)] + \
             [("beta", (a, 1.7), 0) for a in (1.5, 2.0, 2.5, 3.0)] + \
             [("beta", (2.2, b), 1) for b in (1.5, 2.0, 2.5, 3.0)]


@pytest.mark.parametrize("dist,shapes,edge", _PDF_EDGES)
def test_pdf_derivative_at_the_edge_where_the_density_is_zero(dist: str, shapes: tuple, edge: int) -> None:
    # oracle: mpmath's one-sided derivatives from inside the support in x, loc, scale and
    # the shapes (at y = 0 the density is 0 for every scale and shape: derivative 0), at
    # the edge and 1e-3 inside it; forward mode on scalars, reverse mode on arrays
    loc, scale = 0.25, 2.0
    xs = [loc + edge * scale, loc + (edge + (1e-3 if edge == 0 else -1e-3)) * scale]
    inward = 1 if edge == 0 else -1  # the direction of x into the support

    def f(x: Any, loc: Any, scale: Any, *shapes: Any) -> Any:
        return getattr(stats, dist).pdf(x, *shapes, loc, scale)

    def g(x: Any, loc: Any, scale: Any, *shapes: Any) -> Any:
        return _mp_density(dist, x, loc, scale, *shapes)

    n = 3 + len(shapes)
    want = np.array([[_mp_one_sided(g, [x, loc, scale, *shapes], i, [inward, -inward, 1][i] if i < 3 else 1)
                      for i in range(n)] for x in xs])
    with mp.workdps(30):
        near = [float(mp.diff(g, (xs[1], loc, scale, *shapes), tuple(int(i == j) for j in range(n))))
                for i in range(n)]
    np.testing.assert_allclose(want[1], near, rtol=1e-10)
    forward = np.array([tidu.jacfwd(f, argnums=tuple(range(n)))(x, loc, scale, *shapes) for x in xs])
    args = [np.array(xs), *(np.full(2, v) for v in (loc, scale, *shapes))]
    reverse = np.array(tidu.grad(lambda *v: tnp.sum(f(*v)), argnums=tuple(range(n)))(*args)).T
    for got in (forward, reverse):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(f(*args), [0.0, f(xs[1], loc, scale, *shapes)])


@pytest.mark.parametrize("dist,shapes,edge", _PDF_EDGES[::2])
def test_pdf_hessian_near_the_edge_where_the_density_is_zero(dist: str, shapes: tuple, edge: int) -> None:
    # second order 1e-3 inside the edge, in x, loc, scale and the shapes; oracle: mpmath
    loc, scale = 0.25, 2.0
    point = [loc + (1e-3 if edge == 0 else 1 - 1e-3) * scale, loc, scale, *shapes]
    n = len(point)

    def f(v: Any) -> Any:
        return getattr(stats, dist).pdf(v[0], *(v[i] for i in range(3, n)), v[1], v[2])

    with mp.workdps(30):
        want = [[float(mp.diff(lambda *v: _mp_density(dist, *v), point,
                               tuple(int(i == k) + int(j == k) for k in range(n)))) for j in range(n)]
                for i in range(n)]
    np.testing.assert_allclose(tidu.hessian(f)(np.array(point)), want, rtol=1e-8)


@pytest.mark.xfail(strict=True, reason="pow's jvp in x, y * pow(x, y - 1), is 1 * (0 * pow(0, -1)) = nan at its "
                                        "second order for x = 0, y = 1 (rules/arithmetic.rules; JAX selects 0 at "
                                        "y = 0): pdf'' at the edge for gamma a = 2, beta a = 2")
def test_pdf_second_derivative_at_the_edge_for_a_linear_power() -> None:
    # oracle: gamma a = 2 is y e^-y, second derivative -2 at 0; beta(2, 2) is 6 y (1 - y): -12
    assert tidu.grad(tidu.grad(lambda v: stats.gamma.pdf(v, 2.0)))(0.0) == -2.0
    assert tidu.grad(tidu.grad(lambda v: stats.beta.pdf(v, 2.0, 2.0)))(0.0) == -12.0


def test_cauchy_log_cdf_derivative_vanishes_at_infinity() -> None:
    x = np.array([-np.inf, -1e10, -1e8, -2.0])
    g = tidu.grad(lambda v: tnp.sum(stats.cauchy.logcdf(v)))(x)
    want = [0.0, *_mp_array(lambda v: mp.diff(lambda u: mp.log(mp.mpf(1) / 2 + mp.atan(u) / mp.pi), v), x[1:])]
    np.testing.assert_allclose(g, want, rtol=1e-12)
    g = tidu.grad(lambda v: tnp.sum(stats.cauchy.logsf(v)))(-x)
    np.testing.assert_allclose(g, -np.array(want), rtol=1e-12)
    np.testing.assert_allclose(stats.cauchy.logcdf(x[1:]),
                               _mp_array(lambda v: mp.log(mp.mpf(1) / 2 + mp.atan(v) / mp.pi), x[1:]), rtol=1e-14)


def test_bernoulli_logpmf_derivative_at_certain_p() -> None:
    # log(p) and log1p(-p) both computed at p = 0 and 1: the one not taken had an infinite
    # derivative, met by a 0 cotangent: nan (JAX: nan too). Oracle: d/dp log(1 - p) = -1 / (1 - p)
    # and d/dp log(p) = 1 / p
    k = np.array([0.0, 1.0, 0.0, 1.0])
    p = np.array([0.0, 1.0, 0.25, 0.25])
    g = tidu.grad(lambda q: tnp.sum(stats.bernoulli.logpmf(k, q)))(p)
    np.testing.assert_allclose(g, [-1.0, 1.0, -1 / 0.75, 4.0], rtol=1e-14)
    np.testing.assert_allclose(stats.bernoulli.logpmf(k, p), [0.0, 0.0, np.log(0.75), np.log(0.25)], rtol=1e-14)


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
@pytest.mark.parametrize("dist,method,params", [("t", "logpdf", (3.0,)), ("cauchy", "logpdf", ()),
                                                ("norm", "logpdf", ()), ("gamma", "logpdf", (2.0,)),
                                                ("logistic", "logpdf", ())])
def test_traced_half_precision_keeps_its_dtype_as_jax(dtype: Any, dist: str, method: str, params: tuple) -> None:
    # a constant scale was folded by NumPy: bfloat16 scalar - Python float = float32
    x = np.array([-3.0, 0.0, 0.5, 2.0], dtype)
    f, g = getattr(getattr(stats, dist), method), getattr(getattr(jst, dist), method)
    want = np.asarray(g(jnp.asarray(x), *params))
    for got in (f(x, *params), tidu.jit(lambda v: f(v, *params))(x)):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=2e-2)


# --- tidu.nn --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["relu", "relu6", "hard_sigmoid"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, ml_dtypes.bfloat16])
def test_relu_family_keeps_nan_as_jax(name: str, dtype: Any) -> None:
    x = np.array([np.nan, -1.0, 0.0, 3.0, 6.0, 7.0], dtype)
    f, g = getattr(tnn, name), getattr(jax.nn, name)
    want = np.asarray(g(x))
    for got in (f(x), tidu.jit(f)(x)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64))
    dx = tidu.vmap(tidu.grad(f))(x)
    np.testing.assert_array_equal(np.asarray(dx, np.float64),
                                  np.asarray(jax.vmap(jax.grad(g))(jnp.asarray(x)), np.float64))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_soft_sign_derivative_keeps_its_digits(dtype: Any) -> None:
    # the quotient rule's 1 / (|x| + 1) - |x| / (|x| + 1)^2 cancelled: float32 gave 0 at
    # 1e10 (1e-20), float64 lost 6 digits there
    x = np.array([-1e10, -1e4, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 1e4, 1e10], dtype)
    want = 1 / (np.abs(x.astype(np.float64)) + 1) ** 2
    rtol = 1e-14 if dtype == np.float64 else 1e-6
    np.testing.assert_allclose(tidu.vmap(tidu.grad(tnn.soft_sign))(x), want, rtol=rtol)
    np.testing.assert_allclose(tnn.soft_sign(x), jax.nn.soft_sign(x), rtol=rtol)
    np.testing.assert_allclose(tidu.jit(tnn.soft_sign)(x), jax.nn.soft_sign(x), rtol=rtol)


def _squareplus(v: Any) -> Any:
    return (v + mp.sqrt(v * v + 4)) / 2


def test_squareplus_left_tail_and_overflow() -> None:
    # x + sqrt(x^2 + 4) cancelled: 0 at x = -1e10 (value 1e-10), derivative of the wrong
    # sign; x^2 overflowed at 1e300
    x = np.array([-1e300, -1e10, -800.0, -40.0, -1.0, 0.0, 0.5, 3.0, 1e10, 1e300])
    want = _mp_array(_squareplus, x)
    dwant = _mp_array(lambda v: mp.diff(_squareplus, v), x)
    np.testing.assert_allclose(tnn.squareplus(x), want, rtol=1e-14)
    np.testing.assert_allclose(tidu.jit(tnn.squareplus)(x), want, rtol=1e-14)
    np.testing.assert_allclose(tidu.vmap(tidu.grad(tnn.squareplus))(x), dwant, rtol=1e-13)
    x32 = x[1:-1].astype(np.float32)
    np.testing.assert_allclose(tnn.squareplus(x32), want[1:-1], rtol=1e-6)
    assert tnn.squareplus(x32).dtype == np.float32


def _gelu_tanh(v: Any) -> Any:
    return v * (1 + mp.tanh(mp.sqrt(2 / mp.pi) * (v + mp.mpf("0.044715") * v ** 3))) / 2


@pytest.mark.parametrize("approximate", [True, False])
def test_gelu_left_tail_keeps_its_digits(approximate: bool) -> None:
    # 1 + tanh(z) and 1 + erf(z) cancelled: float32 gelu(-6) was -0, float64 lost 5 digits
    x = np.array([-30.0, -10.0, -6.0, -3.0, -0.5, 0.0, 1.0, 4.0])
    ref = _gelu_tanh if approximate else (lambda v: v * mp.ncdf(v))
    want = _mp_array(ref, x)
    dwant = _mp_array(lambda v: mp.diff(ref, v), x)
    f = lambda v: tnn.gelu(v, approximate=approximate)  # noqa: E731
    np.testing.assert_allclose(f(x), want, rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(tidu.jit(f)(x), want, rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(tidu.vmap(tidu.grad(f))(x), dwant, rtol=1e-12, atol=1e-300)
    x32 = x[1:].astype(np.float32)  # (gelu(-30) is below float32's range)
    np.testing.assert_allclose(f(x32), want[1:], rtol=2e-6)
    np.testing.assert_allclose(tidu.jit(f)(x32), want[1:], rtol=2e-6)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_of_an_empty_axis_is_empty_as_jax(name: str) -> None:
    for x, axis in ((np.zeros((2, 0)), -1), (np.zeros((0, 3)), 0), (np.zeros((0, 3)), -1)):
        want = np.asarray(getattr(jax.nn, name)(x, axis=axis))
        traced = tidu.jit(lambda v, axis=axis: getattr(tnn, name)(v, axis=axis))(x)
        for got in (getattr(tnn, name)(x, axis=axis), traced):
            assert got.shape == want.shape and got.dtype == want.dtype


# --- tidu.random -------------------------------------------------------------------------------


def test_bounds_that_do_not_broadcast_to_shape_are_one_line_errors() -> None:
    k = tr.key(0)
    # JAX rejects both; tidu gave a (2, 3) draw for shape (3,)
    with pytest.raises(ValueError, match="uniform: minval of shape \\(2, 3\\) does not broadcast to shape \\(3,\\)"):
        tr.uniform(k, (3,), minval=np.zeros((2, 3)))
    with pytest.raises(ValueError, match="uniform: maxval of shape \\(4,\\)"):
        tr.uniform(k, (3,), maxval=np.ones(4))
    with pytest.raises(ValueError, match="randint: minval of shape \\(4,\\)"):
        tr.randint(k, (3,), np.zeros(4, int), 5)
    assert tr.uniform(k, (2, 3), minval=np.zeros(3), maxval=np.full((2, 1), 2.0)).shape == (2, 3)
    assert tr.randint(k, (2, 3), np.zeros(3, int), np.array([1, 5, 10])).shape == (2, 3)


def test_empty_choice_and_permutation_as_jax() -> None:
    k, jk = tr.key(0), jax.random.PRNGKey(0)
    for got, want in ((tr.choice(k, 0, (0,)), jax.random.choice(jk, 0, (0,))),
                      (tr.permutation(k, 0), jax.random.permutation(jk, 0)),
                      (tr.permutation(k, np.zeros((0, 2))), jax.random.permutation(jk, jnp.zeros((0, 2)))),
                      (tidu.jit(lambda kk: tr.permutation(kk, 0))(k), jax.random.permutation(jk, 0))):
        assert np.shape(got) == np.shape(want)
    with pytest.raises(ValueError, match="no elements to choose from"):
        tr.choice(k, 0, (2,))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_half_precision_normal_and_gumbel_moments(dtype: Any) -> None:
    # draws from uniforms of 8 (bfloat16) or 11 bits left out the tails: a bfloat16 Gumbel's
    # mean was 0.560 (0.5772...), no bfloat16 normal beyond 3.33
    n = 200_000
    k = tr.key(3)
    g = np.asarray(tr.gumbel(k, (n,), dtype), np.float64)
    assert abs(g.mean() - np.euler_gamma) < 5 * np.sqrt(np.pi ** 2 / 6 / n)
    assert abs(g.var() - np.pi ** 2 / 6) < 0.05
    z = np.asarray(tr.normal(k, (n,), dtype), np.float64)
    assert abs(z.mean()) < 5 / np.sqrt(n) and abs(z.var() - 1) < 0.02
    # P(|z| > 3.5) = 4.65e-4: about 93 of the draws
    assert 50 < np.sum(np.abs(z) > 3.5) < 140
    for fn in (tr.normal, tr.gumbel):
        eager = fn(k, (64,), dtype)
        assert eager.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(tidu.jit(lambda kk, fn=fn: fn(kk, (64,), dtype))(k), eager)


# --- bfloat16: traced computes in float32 and rounds once, as eagerly ---------------------------


def _bf16_of_mp(v: Any) -> Any:
    return np.array(float(v), np.float64).astype(ml_dtypes.bfloat16)


def test_bfloat16_beta_near_a_pole_traced_as_eagerly() -> None:
    # rounding each step traced gave -115.5 (8 ulps off; eagerly -111.5, computed in float32)
    from tidu.scipy import special
    a = np.array([-0.00909424, 0.5, 3.0, -2.5], ml_dtypes.bfloat16)
    b = np.array([-0.410156, 0.75, 2.5, 0.3], ml_dtypes.bfloat16)
    with mp.workdps(40):
        want = np.array([_bf16_of_mp(mp.beta(mp.mpf(float(u)), mp.mpf(float(v)))) for u, v in zip(a, b, strict=True)])
    for got in (special.beta(a, b), tidu.jit(special.beta)(a, b)):
        assert got.dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(np.asarray(got, np.float64), want.astype(np.float64))


def test_bfloat16_poisson_logpmf_traced_as_eagerly() -> None:
    # k - loc = 5 + 1.9921875 is not an integer (-inf), but rounded to bfloat16 it is 7: traced
    # gave -13.5 (as JAX, which rounds there too), eagerly -inf
    k = np.array([5.0, 5.0, 3.0], ml_dtypes.bfloat16)
    mu = np.array([0.53125, 0.53125, 2.5], ml_dtypes.bfloat16)
    loc = np.array([-1.9921875, -2.0, 0.0], ml_dtypes.bfloat16)
    with mp.workdps(40):
        def logpmf(j: float, m: float) -> Any:
            return j * mp.log(m) - mp.loggamma(j + 1) - m
        want = np.array([-np.inf, float(_bf16_of_mp(logpmf(7, 0.53125))), float(_bf16_of_mp(logpmf(3, 2.5)))])
    for got in (stats.poisson.logpmf(k, mu, loc), tidu.jit(stats.poisson.logpmf)(k, mu, loc)):
        assert got.dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(np.asarray(got, np.float64), want)


@pytest.mark.parametrize("name", ["norm", "logistic", "cauchy", "laplace", "t"])
@pytest.mark.parametrize("method", ["cdf", "sf", "logpdf", "logcdf"])
def test_mixed_second_derivatives_at_loc_are_jaxs(name: str, method: str) -> None:
    """At x = loc, d/dx of a CDF is pdf(0) / scale, whose derivative in scale is -pdf(0) /
    scale^2 (norm: -0.0997 at scale 2): y was taken with a constant scale at loc, which made
    the mixed entry of the Hessian 0. Densities finite at 0: JAX's Hessian is right."""
    extra = (3.0,) if name == "t" else ()
    if not hasattr(getattr(jst, name), method):
        pytest.skip(f"jax.scipy.stats.{name} has no {method}")

    def f(lib):
        return lambda v: getattr(getattr(lib, name), method)(v[0], *extra, 0.5, v[1])

    v = np.array([0.5, 2.0])  # x = loc
    with jax.enable_x64(True):
        want = np.asarray(jax.hessian(f(jst))(v))
    np.testing.assert_allclose(tidu.hessian(f(stats))(v), want, rtol=1e-12, atol=1e-15)
