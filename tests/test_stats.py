"""tidu.scipy.stats against jax.scipy.stats: every function's values (inside and outside
the support), and the gradient of a weighted sum in the data and in the location and
scale (and in the shape parameters of the densities, and of the gamma and chi2 CDFs), eagerly and
traced."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jax.scipy.stats as jst  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402
from tidu.scipy import stats  # noqa: E402

RNG = np.random.default_rng(17)
X = np.array([-1.5, -0.2, 0.3, 0.8, 2.5])
POS = np.array([0.05, 0.4, 1.0, 2.5, 7.0])
UNIT = np.array([0.02, 0.25, 0.5, 0.75, 0.97])
K = np.array([0.0, 1.0, 2.0, 5.0, 9.0])
# (distribution, function, arguments, positions differentiated)
CASES: list[tuple[str, str, tuple, tuple[int, ...]]] = [
    *[("norm", f, (X, 0.3, 1.7), (0, 1, 2)) for f in ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")],
    *[("norm", f, (UNIT, 0.3, 1.7), (0, 1, 2)) for f in ("ppf", "isf")],
    *[("gamma", f, (POS, 2.5, 0.0, 1.5), (0, 1, 3)) for f in ("logpdf", "pdf")],
    *[("gamma", f, (np.concatenate([[-1.0], POS]), 2.5, 0.0, 1.5), (0, 1, 3))
      for f in ("cdf", "logcdf", "sf", "logsf")],
    *[("chi2", f, (POS, 3.0), (0, 1)) for f in ("logpdf", "pdf")],
    *[("chi2", f, (POS, 3.0), (0, 1)) for f in ("cdf", "logcdf", "sf", "logsf")],
    *[("beta", f, (UNIT, 2.0, 3.5), (0, 1, 2)) for f in ("logpdf", "pdf")],
    *[("beta", f, (np.concatenate([[-0.5, 1.5], UNIT]), 2.0, 3.5), (0,)) for f in ("cdf", "logcdf", "sf", "logsf")],
    *[("t", f, (X, 4.5, 0.2, 1.3), (0, 1, 2, 3)) for f in ("logpdf", "pdf")],
    *[("expon", f, (np.concatenate([[-1.0], POS]), 0.0, 2.0), (0, 2))
      for f in ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")],
    ("expon", "ppf", (UNIT, 0.5, 2.0), (0, 1, 2)),
    *[("cauchy", f, (X, 0.1, 0.7), (0, 1, 2)) for f in ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")],
    # not at q = 0.5, where JAX's cauchy.ppf has derivative 0 in q (tidu's: pi scale)
    *[("cauchy", f, (UNIT + np.array([0, 0, 0.1, 0, 0]), 0.1, 0.7), (0, 1, 2)) for f in ("ppf", "isf")],
    *[("logistic", f, (X, 0.1, 0.7), (0, 1, 2)) for f in ("logpdf", "pdf", "cdf", "sf")],
    *[("logistic", f, (UNIT, 0.1, 0.7), (0, 1, 2)) for f in ("ppf", "isf")],
    *[("laplace", f, (X, 0.1, 0.7), (0, 1, 2)) for f in ("logpdf", "pdf", "cdf")],
    *[("poisson", f, (np.concatenate([[-1.0, 1.5], K]), 3.2), (1,)) for f in ("logpmf", "pmf")],
    ("poisson", "cdf", (np.concatenate([[-1.0, 1.5], K]), 3.2), ()),
    *[("bernoulli", f, (np.array([0.0, 1.0, 2.0, -1.0]), 0.3), (1,)) for f in ("logpmf", "pmf")],
    ("bernoulli", "cdf", (np.array([-0.5, 0.0, 0.5, 1.0, 2.0]), 0.3), (1,)),
    # integer k only: JAX's binom.logpmf is finite at k = 1.5, SciPy's and tidu's -inf
    *[("binom", f, (np.concatenate([[-1.0, 12.0], K]), 10.0, 0.35), (2,)) for f in ("logpmf", "pmf")],
]


def _ids() -> list[str]:
    return [f"{d}.{f}" + ("" if i == 0 else f"-{i}") for i, (d, f, _, _) in enumerate(CASES)]


def _params() -> list[Any]:
    """The functions the others are built from in the default run; pdf, pmf, logcdf,
    logsf and isf (exp, log or a sign change of those) in the slow one."""
    return [pytest.param(i, id=name, marks=[pytest.mark.slow] if CASES[i][1] in ("pdf", "pmf", "logcdf", "logsf", "isf")
                         else []) for i, name in enumerate(_ids())]


@pytest.mark.parametrize("case", _params())
def test_against_jax(case: int) -> None:
    dist, fn, args, diff = CASES[case]
    mine, theirs = getattr(getattr(stats, dist), fn), getattr(getattr(jst, dist), fn)
    if not diff:
        want = np.asarray(jax.jit(theirs)(*args))  # one XLA compilation, not one per op
        np.testing.assert_allclose(mine(*args), want, rtol=1e-11, atol=1e-14)
        np.testing.assert_allclose(tidu.jit(mine)(*args), want, rtol=1e-11, atol=1e-14)
        return
    w = RNG.normal(size=jax.eval_shape(theirs, *args).shape)

    def loss(m: Any, f: Any) -> Any:
        def g(*d: Any) -> Any:
            full = list(args)
            for i, v in zip(diff, d, strict=True):
                full[i] = v
            out = f(*full)
            return m.sum(m.where(m.isfinite(out), w * out, 0.0))
        return g

    primals = tuple(np.asarray(args[i], dtype=float) for i in diff)
    # the value and the gradient in one XLA compilation
    want, ref = jax.jit(lambda a, p: (theirs(*a), jax.grad(loss(jnp, theirs), argnums=tuple(range(len(diff))))(*p)))(
        args, primals)
    want = np.asarray(want)
    np.testing.assert_allclose(mine(*args), want, rtol=1e-11, atol=1e-14)
    np.testing.assert_allclose(tidu.jit(mine)(*args), want, rtol=1e-11, atol=1e-14)
    got = tidu.grad(loss(tnp, mine), argnums=tuple(range(len(diff))))(*primals)
    for a, b in zip(got, ref, strict=True):
        # outside the support JAX's derivative is nan in places (gamma.sf at x < 0), tidu's 0
        b = np.asarray(b)
        np.testing.assert_allclose(np.where(np.isfinite(b), a, b), b, rtol=1e-9, atol=1e-12)
        assert np.isfinite(a).all()


def test_binom_and_poisson_are_zero_off_the_integers() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    np.testing.assert_array_equal(stats.binom.logpmf(np.array([1.5, 2.0]), 10.0, 0.35),
                                  scipy_stats.binom.logpmf(np.array([1.5, 2.0]), 10, 0.35))
    np.testing.assert_allclose(stats.poisson.pmf(np.array([1.5, 2.0]), 3.2),
                               scipy_stats.poisson.pmf(np.array([1.5, 2.0]), 3.2), rtol=1e-13)


def test_multivariate_normal() -> None:
    a = RNG.normal(size=(3, 3))
    cov = a @ a.T + 3 * np.eye(3)
    mean = np.array([0.3, -0.2, 1.0])
    x = RNG.normal(size=(4, 3))
    want = jax.jit(jst.multivariate_normal.logpdf)(x, mean, cov)
    np.testing.assert_allclose(stats.multivariate_normal.logpdf(x, mean, cov), want, rtol=1e-12)
    np.testing.assert_allclose(tidu.jit(stats.multivariate_normal.pdf)(x, mean, cov),
                               jax.jit(jst.multivariate_normal.pdf)(x, mean, cov), rtol=1e-12)
    g = tidu.grad(lambda m, c: tnp.sum(stats.multivariate_normal.logpdf(x, m, c)), argnums=(0, 1))(mean, cov)
    ref = jax.jit(jax.grad(lambda m, c: jnp.sum(jst.multivariate_normal.logpdf(x, m, c)), argnums=(0, 1)))(mean, cov)
    np.testing.assert_allclose(g[0], ref[0], rtol=1e-10)
    # JAX differentiates through its Cholesky factor (the lower triangle): compare symmetrized
    np.testing.assert_allclose(g[1] + g[1].T, ref[1] + ref[1].T, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="cov must be a"):
        stats.multivariate_normal.logpdf(x, mean, np.eye(2))
