"""Eager (NumPy, SciPy) and traced results agree, and agree with SciPy/NumPy, at the edge
points of tidu.scipy.stats, tidu.numpy.linalg / tidu.scipy.linalg, tidu.numpy.fft and tidu.random where
they used to differ; and the derivatives there are right (against JAX, finite
differences or the density itself) and the same in forward and reverse mode.

tests/test_eager_vs_traced.py pins tidu.numpy's, tidu.nn's and tidu.scipy.special's edge
cases; this file the rest. Fixed here:
- stats: nan for invalid parameters (scale or shape <= 0, p outside [0, 1], non-integer
  n, mu < 0, q outside [0, 1]) and for nan arguments (SciPy's; the discrete pmfs were
  -inf, beta(1, 1).logpdf 0); expon.ppf and cauchy.ppf outside [0, 1]; cauchy.ppf in the
  tails (tan(pi (q - 1/2)) kept 16 digits: -1.6e16 at q = 0); cauchy.cdf/logcdf/logsf in
  the tails (0.5 + arctan(y) / pi cancelled: logcdf(-1e20) was -inf); float32 data kept
  float32 by gamma, beta, t, binom (their shape parameters made float64);
  multivariate_normal with a scalar cov; t.logpdf with df = inf (nan; SciPy: the normal);
- stats derivatives: CDFs outside the support were nan in forward mode (0 in reverse),
  at its edge the one-sided derivative from inside (expon.cdf gave 1/2, the gamma and
  beta CDFs nan for a shape 1); laplace.cdf'(loc) was 0 (the density is 1 / (2 scale));
  the x-derivative of gammainc, gammaincc and betainc at x = 0 (x = 1) for a = 1 (b = 1)
  was 0 * log(0) = nan (rules/special.rules);
- linalg: eager solve, inv, tensorsolve, tensorinv and matrix_power(n < 0) of a singular
  matrix raised where traced gave nan; eager solve_triangular raised on a zero diagonal
  and on nan entries (so cho_solve, lu_solve and multivariate_normal of a singular cov
  raised); the NumPy kernel of triangular_solve solved by a pivoted LU (a nan entry did
  not reach the entries that depend on it, where substitution, LAPACK's trtrs and XLA,
  gives nan); lstsq of a zero matrix was nan (NumPy: 0); matrix_rank raised eagerly on
  nan entries and traced on vectors; matrix_power(a, 3) multiplied in another order than
  NumPy's (other nan and inf); lu and lu_factor of an empty matrix failed;
- random: categorical and choice drew float64 noise eagerly for float32 logits and p,
  float32 traced (other draws);
- fft: real float32 input went to NumPy uncast eagerly (its ifft and irfft of real
  float32 values round otherwise than traced, of complex64); float16 input gave complex128
  and float64 traced (NumPy: complex64, and float16 from irfft and hfft over one axis).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
scipy_stats = pytest.importorskip("scipy.stats")
scipy_linalg = pytest.importorskip("scipy.linalg")
jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jax.scipy.stats as jst  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402
import tidu.random as tr  # noqa: E402
import tidu.scipy.linalg as tsl  # noqa: E402
from tidu.scipy import special as tss  # noqa: E402
from tidu.scipy import stats  # noqa: E402

nan, inf = np.nan, np.inf
A = np.array
LA = tnp.linalg
lsl = tsl.solve_triangular


def _quiet(f: Callable[..., Any], *args: Any) -> Any:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return f(*args)


def _leaves(v: Any) -> list[np.ndarray]:
    return [np.asarray(x) for x in v] if isinstance(v, tuple | list) else [np.asarray(v)]


def _same(eager: Any, traced: Any, what: str) -> None:
    """Equal bit for bit: dtype, shape, values (nan where nan)."""
    es, ts = _leaves(eager), _leaves(traced)
    assert len(es) == len(ts), what
    for e, t in zip(es, ts, strict=True):
        assert t.dtype == e.dtype, f"{what}: traced dtype {t.dtype}, eager {e.dtype}"
        assert t.shape == e.shape, f"{what}: traced shape {t.shape}, eager {e.shape}"
        np.testing.assert_array_equal(t, e, err_msg=what)


def _close(got: Any, want: Any, what: str, rtol: float = 1e-12, atol: float = 1e-300) -> None:
    """Values as the reference's: nan and infinities where it has them, the rest to rtol."""
    for g, w in zip(_leaves(got), _leaves(want), strict=True):
        assert g.shape == w.shape, f"{what}: shape {g.shape}, reference {w.shape}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=what)


# --- tidu.scipy.stats: values, eager = traced = SciPy -------------------------------------------

X = A([-inf, -2.0, -1.0, -0.0, 0.0, 0.5, 1.0, 2.0, inf, nan])
Q = A([-0.1, 0.0, 1e-300, 1e-10, 0.3, 0.5, 0.8, 1.0 - 1e-10, 1.0, 1.1, nan])
K = A([-inf, -1.0, -0.0, 0.0, 0.5, 1.0, 3.0, 10.0, 11.0, nan])
# (id, tidu function, SciPy function, argument, the other parameters)
STATS: list[tuple[str, Any, Any, np.ndarray, tuple[Any, ...]]] = []
for _name, _fns, _x, _params in [
    ("norm", ("logpdf", "cdf", "logcdf", "sf", "logsf"), X, [(0.0, 0.0), (0.5, -1.0), (0.5, 2.0)]),
    ("norm", ("ppf", "isf"), Q, [(0.0, 1.0), (0.0, -1.0)]),
    ("gamma", ("logpdf", "cdf", "logcdf", "sf", "logsf"), X, [(1.0,), (0.5,), (2.5, 0.0, 0.0), (0.0,), (-1.0,)]),
    ("chi2", ("logpdf", "cdf", "logcdf", "sf", "logsf"), X, [(2.0,), (-1.0,), (3.0, 0.0, -1.0)]),
    ("beta", ("logpdf", "cdf", "logcdf", "sf", "logsf"), X, [(1.0, 1.0), (0.5, 0.5), (2.0, 3.0, 0.0, -1.0),
                                                             (0.0, 3.0), (2.0, -1.0)]),
    ("t", ("logpdf",), X, [(4.5,), (0.0,), (3.0, 0.0, 0.0), (inf,)]),
    ("expon", ("logpdf", "cdf", "logcdf", "sf", "logsf"), np.concatenate([X, [1e-20, 40.0, 800.0]]),
     [(0.0, 1.0), (0.0, -1.0)]),
    ("expon", ("ppf",), Q, [(0.0, 1.0), (0.0, 0.0)]),
    ("cauchy", ("logpdf", "cdf", "logcdf", "sf", "logsf"), np.concatenate([X, [-1e20, -1e10, 1e10, 1e20]]),
     [(0.0, 1.0), (0.0, -1.0)]),
    ("cauchy", ("ppf", "isf"), Q, [(0.0, 1.0), (1.0, -2.0)]),
    ("logistic", ("logpdf", "cdf", "sf"), X, [(0.0, 1.0), (0.0, 0.0)]),
    ("logistic", ("ppf", "isf"), Q, [(0.0, 1.0), (0.0, -1.0)]),
    ("laplace", ("logpdf", "cdf"), X, [(0.0, 1.0), (0.0, -1.0)]),
    ("poisson", ("logpmf", "cdf"), K, [(2.5,), (0.0,), (-1.0,)]),
    ("bernoulli", ("logpmf",), K, [(0.3,), (0.0,), (1.0,), (1.5,), (-0.1,)]),
    ("bernoulli", ("cdf",), K, [(0.3,), (1.5,)]),
    ("binom", ("logpmf",), K, [(10.0, 0.3), (10.0, 0.0), (10.0, 1.0), (10.0, 1.5), (-1.0, 0.3), (2.5, 0.3)]),
]:
    for _fn in _fns:
        for _p in _params:
            STATS.append((f"{_name}.{_fn}{_p}", getattr(getattr(stats, _name), _fn),
                          getattr(getattr(scipy_stats, _name), _fn), _x, _p))


@pytest.mark.parametrize("case", STATS, ids=[c[0] for c in STATS])
def test_stats_edges_eager_traced_scipy(case: tuple[str, Any, Any, np.ndarray, tuple[Any, ...]]) -> None:
    name, f, ref, x, params = case
    eager = _quiet(f, x, *params)
    traced = _quiet(tidu.jit(lambda v: f(v, *params)), x)
    _same(eager, traced, name)
    _close(eager, _quiet(ref, x, *params), name, rtol=1e-13)


def test_stats_dtypes_follow_the_data() -> None:
    """float32 data stays float32 (Python numbers are weak, as JAX's); ints give float64."""
    x32 = A([0.2, 0.5, 1.5], np.float32)
    for f in (lambda v: stats.gamma.logpdf(v, 2.0), lambda v: stats.beta.cdf(v, 2.0, 3.0),
              lambda v: stats.t.logpdf(v, 3.0), lambda v: stats.binom.logpmf(v, 5, 0.3),
              lambda v: stats.norm.ppf(v / 2), lambda v: stats.cauchy.logsf(v)):
        assert _quiet(f, x32).dtype == np.float32
        assert _quiet(tidu.jit(f), x32).dtype == np.float32
        assert _quiet(f, A([0, 1, 2])).dtype == np.float64


def test_multivariate_normal_scalar_cov_and_singular_cov() -> None:
    x = A([[0.5, 1.0], [-0.3, 2.0]])
    mvn, ref = stats.multivariate_normal, scipy_stats.multivariate_normal
    for args in ((0.5, 0.0, 2.0), (x[:, 0], 0.3, 2.0), (x, A([0.1, -0.2]), 1.5)):
        want = ref.logpdf(*args)
        _close(mvn.logpdf(*args), want, f"{args}", rtol=1e-13)
        _close(tidu.jit(mvn.logpdf)(*args), want, f"{args}", rtol=1e-13)
    np.testing.assert_allclose(mvn.logpdf(x, A([0.0, 0.0]), 2.0, allow_singular=False),
                               ref.logpdf(x, A([0.0, 0.0]), 2.0), rtol=1e-13)
    singular = A([[1.0, 1.0], [1.0, 1.0]])  # SciPy raises; tidu: nan, eagerly too (was a ValueError)
    _same(_quiet(mvn.logpdf, x, A([0.0, 0.0]), singular), _quiet(tidu.jit(mvn.logpdf), x, A([0.0, 0.0]), singular),
          "singular")
    assert np.isnan(_quiet(mvn.logpdf, x, A([0.0, 0.0]), singular)).all()


# --- stats derivatives at the edges ---------------------------------------------------------------


def _both_modes(f: Callable[[Any], Any], x: float) -> tuple[float, float]:
    """(forward-mode, reverse-mode) derivative of a scalar function at x."""
    forward = float(tidu.grad(f)(x))  # one scalar input: forward mode
    reverse = float(tidu.grad(lambda v: tnp.sum(f(v[0])))(A([x]))[0])
    return forward, reverse


# (id, f, x, the derivative from the density or the formula)
EDGES: list[tuple[str, Callable[[Any], Any], float, float]] = [
    # the one-sided derivative from inside at the edge of the support: the density there
    ("gamma.cdf a=1 at 0", lambda x: stats.gamma.cdf(x, 1.0, 0.0, 2.0), 0.0, 0.5),
    ("gamma.sf a=1 at 0", lambda x: stats.gamma.sf(x, 1.0), 0.0, -1.0),
    ("gamma.cdf a=2.5 at 0", lambda x: stats.gamma.cdf(x, 2.5), 0.0, 0.0),
    ("gamma.cdf a=0.5 at 0", lambda x: stats.gamma.cdf(x, 0.5), 0.0, inf),
    ("chi2.cdf df=2 at 0", lambda x: stats.chi2.cdf(x, 2.0), 0.0, 0.5),
    ("beta.cdf (1,1) at 0", lambda x: stats.beta.cdf(x, 1.0, 1.0), 0.0, 1.0),
    ("beta.cdf (1,1) at 1", lambda x: stats.beta.cdf(x, 1.0, 1.0), 1.0, 1.0),
    ("beta.cdf (1,3) at 0", lambda x: stats.beta.cdf(x, 1.0, 3.0), 0.0, 3.0),
    ("beta.cdf (2,1) at 1", lambda x: stats.beta.cdf(x, 2.0, 1.0), 1.0, 2.0),
    ("beta.sf (1,3) at 0", lambda x: stats.beta.sf(x, 1.0, 3.0), 0.0, -3.0),
    ("beta.sf (2,1) at 1", lambda x: stats.beta.sf(x, 2.0, 1.0), 1.0, -2.0),
    ("expon.cdf at loc", lambda x: stats.expon.cdf(x, 1.0, 2.0), 1.0, 0.5),
    ("expon.sf at loc", lambda x: stats.expon.sf(x, 1.0, 2.0), 1.0, -0.5),
    ("expon.logsf at loc", lambda x: stats.expon.logsf(x, 1.0, 2.0), 1.0, -0.5),
    ("expon.logcdf at loc", lambda x: stats.expon.logcdf(x), 0.0, inf),
    ("laplace.cdf at loc", lambda x: stats.laplace.cdf(x, 0.5, 2.0), 0.5, 0.25),
    # outside the support: constant, 0 in both modes (forward mode gave nan)
    *[(f"{d}.{fn} outside", lambda x, d=d, fn=fn, p=p: getattr(getattr(stats, d), fn)(x, *p), -2.0, 0.0)
      for d, p in (("gamma", (1.0,)), ("gamma", (0.5,)), ("chi2", (2.0,)), ("beta", (1.0, 1.0)), ("beta", (2.0, 3.0)))
      for fn in ("cdf", "logcdf", "sf", "logsf")],
    *[(f"beta.{fn} above", lambda x, fn=fn: getattr(stats.beta, fn)(x, 1.0, 2.0), 2.0, 0.0)
      for fn in ("cdf", "logcdf", "sf")],
    *[(f"expon.{fn} outside", lambda x, fn=fn: getattr(stats.expon, fn)(x), -2.0, 0.0)
      for fn in ("cdf", "logcdf", "sf", "logsf")],
    # cauchy.ppf' = pi scale (1 + p^2); infinite at q = 0 and 1 (reverse mode gave nan)
    ("cauchy.ppf at 1/2", lambda q: stats.cauchy.ppf(q, 0.0, 2.0), 0.5, 2 * np.pi),
    ("cauchy.ppf at 0", stats.cauchy.ppf, 0.0, inf),
    ("cauchy.ppf at 1", stats.cauchy.ppf, 1.0, inf),
    ("cauchy.isf at 0", stats.cauchy.isf, 0.0, -inf),
    # the incomplete gamma and beta functions at x = 0 (1) with a shape 1
    ("gammainc(1, x) at 0", lambda x: tss.gammainc(1.0, x), 0.0, 1.0),
    ("gammaincc(1, x) at 0", lambda x: tss.gammaincc(1.0, x), 0.0, -1.0),
    ("betainc(1, 3, x) at 0", lambda x: tss.betainc(1.0, 3.0, x), 0.0, 3.0),
    ("betainc(2, 1, x) at 1", lambda x: tss.betainc(2.0, 1.0, x), 1.0, 2.0),
    ("betainc(1, 1, x) at 1", lambda x: tss.betainc(1.0, 1.0, x), 1.0, 1.0),
    ("poisson.cdf(0, mu) at mu = 0", lambda m: stats.poisson.cdf(0.0, m), 0.0, -1.0),
]


@pytest.mark.parametrize("case", EDGES, ids=[c[0] for c in EDGES])
def test_stats_derivatives_at_the_edges(case: tuple[str, Callable[[Any], Any], float, float]) -> None:
    name, f, x, want = case
    forward, reverse = _quiet(_both_modes, f, x)
    assert forward == reverse, f"{name}: forward {forward}, reverse {reverse}"
    np.testing.assert_allclose(forward, want, rtol=1e-14, atol=0, err_msg=name)


def _fd(g: Callable[[float], float], x: float, h: float = 1e-6) -> float:
    return (g(x + h) - g(x - h)) / (2 * h)


@pytest.mark.parametrize("x", [-3.0, -0.4, 0.4, 3.0])
def test_laplace_cdf_derivative_is_the_density(x: float) -> None:
    got = tidu.grad(lambda v: stats.laplace.cdf(v, 0.2, 1.5))(x)
    np.testing.assert_allclose(got, scipy_stats.laplace.pdf(x, 0.2, 1.5), rtol=1e-13)
    np.testing.assert_allclose(got, _fd(lambda v: scipy_stats.laplace.cdf(v, 0.2, 1.5), x), rtol=1e-7)


def test_changed_formulas_differentiate_as_jax() -> None:
    """cauchy's cdf, logcdf, logsf and ppf, expon's logcdf and cdf: gradients in the data and
    the parameters against jax.scipy.stats at interior points (both tails)."""
    x = A([-1e3, -3.0, -0.2, 0.7, 4.0, 1e3])
    q = A([1e-9, 0.1, 0.3, 0.6, 0.8, 1 - 1e-9])
    w = np.linspace(0.5, 2.0, 6)
    for fn, pts in (("cdf", x), ("logcdf", x), ("sf", x), ("logsf", x), ("ppf", q), ("isf", q)):
        mine, theirs = getattr(stats.cauchy, fn), getattr(jst.cauchy, fn)
        got = tidu.grad(lambda v, l, s, f=mine: tnp.sum(w * f(v, l, s)), argnums=(0, 1, 2))(pts, 0.3, 1.7)
        ref = jax.grad(lambda v, l, s, f=theirs: jnp.sum(w * f(v, l, s)), argnums=(0, 1, 2))(pts, 0.3, 1.7)
        for g, r in zip(got, ref, strict=True):
            np.testing.assert_allclose(g, r, rtol=1e-9, err_msg=f"cauchy.{fn}")
    pos = A([1e-8, 0.1, 0.5, 0.69, 0.7, 3.0, 30.0])
    for fn in ("logcdf", "cdf", "logsf"):
        mine, theirs = getattr(stats.expon, fn), getattr(jst.expon, fn)
        got = tidu.grad(lambda v, s, f=mine: tnp.sum(f(v, 0.0, s)), argnums=(0, 1))(pos, 1.0)
        ref = jax.grad(lambda v, s, f=theirs: jnp.sum(f(v, 0.0, s)), argnums=(0, 1))(pos, 1.0)
        for g, r in zip(got, ref, strict=True):
            np.testing.assert_allclose(g, r, rtol=1e-9, err_msg=f"expon.{fn}")


def test_incomplete_gamma_and_beta_second_derivatives_inside() -> None:
    """The edge fix of their x-derivative leaves the mixed second derivatives alone: the
    Hessian in (a, x) at a = 1 (and b = 1) against central differences of the gradient."""
    def fd_hessian(f: Callable[[Any], Any], p: np.ndarray, h: float = 1e-5) -> np.ndarray:
        g = tidu.grad(f)
        return np.stack([(np.asarray(g(p + h * e)) - np.asarray(g(p - h * e))) / (2 * h) for e in np.eye(p.size)])

    for f, p in ((lambda v: tss.gammainc(v[0], v[1]), A([1.0, 0.7])),
                 (lambda v: tss.gammaincc(v[0], v[1]), A([1.0, 2.5])),
                 (lambda v: tss.betainc(v[0], v[1], v[2]), A([1.0, 1.0, 0.4]))):
        np.testing.assert_allclose(tidu.hessian(f)(p), fd_hessian(f, p), rtol=1e-6, atol=1e-8)


# --- linear algebra ---------------------------------------------------------------------------------

RNG = np.random.default_rng(11)
M3 = RNG.normal(size=(3, 3))
SING = A([[1.0, 2.0], [2.0, 4.0]])
ZERO_DIAG = A([[0.0, 1.0], [0.0, 2.0]])  # upper triangular, a 0 on the diagonal
NAN_CORNER = np.tril(M3 + 3 * np.eye(3))
NAN_CORNER[0, 0] = nan
BATCH = np.stack([M3, np.zeros((3, 3))])  # one regular matrix, one singular
B3 = A([1.0, 2.0, 3.0])

# (id, f, args): eager = traced bit for bit
LINALG: list[tuple[str, Callable[..., Any], tuple[Any, ...]]] = [
    ("solve-singular", LA.solve, (SING, A([1.0, 1.0]))),
    ("solve-singular-matrix-b", LA.solve, (SING, np.ones((2, 3)))),
    ("solve-batch-one-singular", LA.solve, (BATCH, np.ones((2, 3, 1)))),
    ("inv-singular", LA.inv, (SING,)),
    ("inv-batch-one-singular", LA.inv, (BATCH,)),
    ("inv-int-singular", LA.inv, (A([[1, 2], [2, 4]]),)),
    ("tensorinv-singular", lambda a: LA.tensorinv(a, ind=1), (SING,)),
    ("tensorsolve-singular", LA.tensorsolve, (SING, A([1.0, 1.0]))),
    ("matrix_power-negative-singular", lambda a: LA.matrix_power(a, -2), (SING,)),
    ("matrix_power-3-inf", lambda a: LA.matrix_power(a, 3), (np.where(np.eye(3) == 1, inf, M3),)),
    ("solve_triangular-zero-diagonal", tsl.solve_triangular, (ZERO_DIAG, A([1.0, 1.0]))),
    ("solve_triangular-zero-diagonal-trans", lambda a, b: lsl(a, b, trans=1), (ZERO_DIAG, A([1.0, 1.0]))),
    ("solve_triangular-nan-entry", lambda a, b: lsl(a, b, lower=True), (NAN_CORNER, B3)),
    ("solve_triangular-nan-entry-trans", lambda a, b: lsl(a, b, lower=True, trans=2), (NAN_CORNER, B3)),
    ("solve_triangular-nan-unit-diagonal", lambda a, b: lsl(a, b, lower=True, unit_diagonal=True), (NAN_CORNER, B3)),
    ("solve_triangular-batch-vector", lambda a, b: lsl(a, b, lower=True), (np.stack([NAN_CORNER, np.eye(3)]), B3)),
    ("triangular_solve-right-zero-diagonal", lambda a, b: LA.triangular_solve(a, b, lower=False),
     (ZERO_DIAG, np.ones((3, 2)))),
    ("cho_solve-not-positive-definite", lambda a, b: tsl.cho_solve(tsl.cho_factor(a), b), (SING, A([1.0, 1.0]))),
    ("lu_solve-singular", lambda a, b: tsl.lu_solve(tsl.lu_factor(a), b), (np.zeros((2, 2)), A([1.0, 1.0]))),
    ("lu_solve-nan", lambda a, b: tsl.lu_solve(tsl.lu_factor(a), b, trans=1), (NAN_CORNER, B3)),
    ("lstsq-zero", LA.lstsq, (np.zeros((3, 2)), B3)),
    ("matrix_rank-nan", LA.matrix_rank, (NAN_CORNER,)),
    ("matrix_rank-vector", LA.matrix_rank, (B3,)),
    ("matrix_rank-zero-vector", LA.matrix_rank, (np.zeros(3),)),
    ("lu-empty", tsl.lu, (np.zeros((0, 0)),)),
    ("lu_factor-empty-batch", tsl.lu_factor, (np.zeros((2, 0, 0)),)),
    ("lu-empty-batch", tsl.lu, (np.zeros((0, 2, 2)),)),
]


@pytest.mark.parametrize("case", LINALG, ids=[c[0] for c in LINALG])
def test_linalg_eager_equals_traced(case: tuple[str, Callable[..., Any], tuple[Any, ...]]) -> None:
    name, f, args = case
    eager = _quiet(f, *args)  # nothing raises (docs/linalg.md)
    traced = _quiet(tidu.jit(f), *args)
    _same(eager, traced, name)


def test_linalg_singular_results_are_nan_per_matrix() -> None:
    """An exactly singular matrix gives nan (NumPy raises), the others of a batch NumPy's."""
    got = _quiet(LA.inv, BATCH)
    np.testing.assert_allclose(got[0], np.linalg.inv(M3), rtol=1e-13)
    assert np.isnan(got[1]).all()
    assert np.isnan(_quiet(LA.solve, SING, A([1.0, 1.0]))).all()
    assert np.isnan(_quiet(lsl, ZERO_DIAG, A([1.0, 1.0]))).all()


def test_triangular_solves_substitute_as_lapack() -> None:
    """A nan entry reaches the entries that depend on it, and only those: LAPACK's trtrs
    (SciPy without its finiteness check) as the oracle, eager and traced."""
    for kw in ({"lower": True}, {"lower": True, "trans": 1}, {"lower": True, "unit_diagonal": True},
               {"lower": False, "trans": 2}):
        a = NAN_CORNER if kw["lower"] else NAN_CORNER.T.copy()
        want = scipy_linalg.solve_triangular(a, B3, check_finite=False, **kw)
        got_eager = _quiet(lambda x, y, kw=kw: lsl(x, y, **kw), a, B3)
        got_traced = _quiet(tidu.jit(lambda x, y, kw=kw: lsl(x, y, **kw)), a, B3)
        for got in (got_eager, got_traced):
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=str(kw))
            np.testing.assert_allclose(got, want, rtol=1e-14, err_msg=str(kw))


def test_lstsq_zero_matrix_and_rank_as_numpy() -> None:
    for a in (np.zeros((3, 2)), np.zeros((2, 3))):
        x, _, rank, s = LA.lstsq(a, B3[: a.shape[0]])
        want = np.linalg.lstsq(a, B3[: a.shape[0]])
        np.testing.assert_array_equal(x, want[0])
        assert int(rank) == want[2]
        xt, _, rank_t, _ = tidu.jit(LA.lstsq)(a, B3[: a.shape[0]])
        np.testing.assert_array_equal(xt, want[0])
        assert int(rank_t) == want[2]
    # the ordinary solution, and its gradient, are unchanged
    a = RNG.normal(size=(4, 2))
    np.testing.assert_allclose(LA.lstsq(a, np.arange(4.0))[0], np.linalg.lstsq(a, np.arange(4.0))[0], rtol=1e-12)
    assert int(LA.matrix_rank(B3)) == np.linalg.matrix_rank(B3)
    assert int(tidu.jit(LA.matrix_rank)(np.zeros(3))) == np.linalg.matrix_rank(np.zeros(3))


def test_matrix_power_three_in_numpys_order() -> None:
    a = np.where(np.eye(3) == 1, inf, M3)
    with np.errstate(all="ignore"):
        want = np.linalg.matrix_power(a, 3)
    np.testing.assert_array_equal(_quiet(tidu.jit(lambda m: LA.matrix_power(m, 3)), a), want)
    np.testing.assert_array_equal(_quiet(LA.matrix_power, a, 3), want)


def test_empty_lu_as_scipy() -> None:
    for got in (tsl.lu(np.zeros((0, 0))), tidu.jit(tsl.lu)(np.zeros((0, 0)))):
        for g, w in zip(got, scipy_linalg.lu(np.zeros((0, 0))), strict=True):
            assert np.asarray(g).shape == w.shape
    lu, piv = tidu.jit(tsl.lu_factor)(np.zeros((0, 0)))
    want_lu, want_piv = scipy_linalg.lu_factor(np.zeros((0, 0)))
    assert lu.shape == want_lu.shape and piv.shape == want_piv.shape and piv.dtype == want_piv.dtype


def test_triangular_solve_derivatives_unchanged() -> None:
    """solve_triangular and cho_solve through the new kernel: gradients against JAX."""
    t = np.tril(M3) + 3 * np.eye(3)
    s = M3 @ M3.T + np.eye(3)
    w = A([0.5, -1.0, 2.0])
    for lower, trans in ((True, 0), (False, 1), (True, 2)):
        a = t if lower else t.T.copy()
        kw = {"lower": lower, "trans": trans}
        got = tidu.grad(lambda m, b, kw=kw: tnp.sum(w * lsl(m, b, **kw)), argnums=(0, 1))(a, B3)
        ref = jax.grad(lambda m, b, kw=kw: jnp.sum(w * jax.scipy.linalg.solve_triangular(m, b, **kw)),
                       argnums=(0, 1))(a, B3)
        for g, r in zip(got, ref, strict=True):
            np.testing.assert_allclose(np.tril(g) if lower else np.triu(g) if g.ndim == 2 else g,
                                       np.tril(r) if lower else np.triu(r) if r.ndim == 2 else r, rtol=1e-11)
    got = tidu.grad(lambda b: tnp.sum(w * tsl.cho_solve(tsl.cho_factor(s), b)))(B3)
    ref = jax.grad(lambda b: jnp.sum(w * jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(s), b)))(B3)
    np.testing.assert_allclose(got, ref, rtol=1e-11)


# --- tidu.random: float32 logits and probabilities --------------------------------------------------


def test_categorical_and_choice_keep_the_float_dtype_eagerly() -> None:
    """The same key draws the same indices eagerly, traced and under vmap (float32 logits
    drew float64 noise eagerly, float32 traced)."""
    key = tr.key(7)
    keys = tr.split(key, 3)
    logits32 = np.log(A([0.2, 0.3, 0.5], np.float32))
    p32 = A([0.1, 0.2, 0.3, 0.4], np.float32)
    draws: list[tuple[Callable[..., Any], Any]] = [
        (lambda k, lg: tr.categorical(k, lg, shape=(16,)), logits32),
        (lambda k, lg: tr.categorical(k, lg, shape=(16,)), logits32.astype(np.float64)),
        (lambda k, lg: tr.categorical(k, lg, shape=(16,)), A([1, 2, 0])),
        (lambda k, p: tr.choice(k, 4, (16,), p=p), p32),
        (lambda k, p: tr.choice(k, 4, (3,), replace=False, p=p), p32),
    ]
    for f, arg in draws:
        eager = f(key, arg)
        _same(eager, tidu.jit(f)(key, arg), "jit")
        _same(tidu.jit(lambda k, f=f, arg=arg: f(k, arg))(key), eager, "jit, arg constant")
        _same(tidu.vmap(lambda k, f=f, arg=arg: f(k, arg))(keys), np.stack([f(k, arg) for k in keys]), "vmap")


# --- tidu.numpy.fft: real float32 and float16 input -------------------------------------------------

FFTS = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn",
        "irfftn")


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_fft_of_narrow_real_values(dtype: type) -> None:
    """Eager = traced bit for bit (real float32 values went to NumPy uncast, whose ifft and
    irfft of them round otherwise than of complex64), with NumPy's dtypes (float16 gave
    complex128 and float64 traced) and values to the precision."""
    x = np.random.default_rng(3).normal(size=(3, 4)).astype(dtype)
    for fn in FFTS:
        for kw in ({}, {"axes": (0,)} if fn[-1] in "2n" else {"axis": 0}, {"norm": "ortho"}):
            if fn[-1] == "2" and "axes" in kw:
                continue
            a = x if fn[-1] in "2n" or "axis" in kw else x[0]
            f = getattr(tnp.fft, fn)
            eager = f(a, **kw)
            _same(eager, tidu.jit(lambda v, f=f, kw=kw: f(v, **kw))(a), f"{fn} {kw}")
            want = getattr(np.fft, fn)(a, **kw)
            assert eager.dtype == want.dtype, f"{fn} {kw}: {eager.dtype}, NumPy {want.dtype}"
            np.testing.assert_allclose(eager, want, rtol=2e-3 if dtype == np.float16 else 1e-5, atol=1e-5,
                                       err_msg=f"{fn} {kw}")
