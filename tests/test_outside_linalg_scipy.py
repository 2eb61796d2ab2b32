"""An outside tester's checks of tidu.numpy.linalg, tidu.scipy.linalg, tidu.scipy.special
and tidu.scipy.stats against JAX (x64), NumPy and SciPy: second derivatives in reverse
mode through eigenvectors and singular vectors, boolean and empty matrices, batched
tolerances, SciPy's signatures and conventions in tidu.scipy.linalg (qr's mode='full',
eigh's eigvals_only, solve's assume_a, check_finite), nan propagation and derivatives at
0 of special functions, and log CDFs near 1.

Tests marked ``xfail(strict=True)`` fail today; each reason says what is wrong."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest
import scipy.linalg as sl
import scipy.special as ss
import scipy.stats as sst

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jax.scipy.linalg as jsl  # noqa: E402
from oracle_util import same as _same  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402
import tidu.scipy.linalg as tsl  # noqa: E402
from tidu.scipy import special as tsp  # noqa: E402
from tidu.scipy import stats as tst  # noqa: E402

RNG = np.random.default_rng(20261130)


def _both(fn, *args):
    """fn eagerly and under tidu.jit."""
    return fn(*args), tidu.jit(fn)(*args)


# --- reverse-over-reverse (and reverse-over-forward) Hessians through vectors ---------------

A3 = RNG.normal(size=(3, 3))
TALL = RNG.normal(size=(4, 3))


def _eigh_projector(m, x):
    v = m.linalg.eigh(x)[1][:, 0:1]
    return m.sum(v * v.T * x)


def _svd_reconstruction(m, x):
    u, _, vh = m.linalg.svd(x, full_matrices=False)
    return m.sum(m.sin(u @ vh))


def _lstsq_norm(m, x):
    return m.sum(m.linalg.lstsq(x, m.arange(4.0))[0] ** 2)


HESSIAN_CASES = {
    "eigh_projector": (_eigh_projector, A3 + A3.T),
    "svd_u_vh": (_svd_reconstruction, TALL),
    "svd_u_vh_wide": (_svd_reconstruction, TALL.T.copy()),
    "lstsq": (_lstsq_norm, TALL),
}


@pytest.mark.parametrize("mode", ["RoR", "RoF"])
@pytest.mark.parametrize("case", sorted(HESSIAN_CASES))
def test_hessian_reverse_through_vectors(case, mode):
    # the vectors' rules divided by w_j - w_i (s_j^2 - s_i^2) on the diagonal too, where
    # the triangles select the 1/0 away; reverse mode over them met 0 * inf there: every
    # entry of the Hessian was nan (FoF and FoR were right)
    fn, x = HESSIAN_CASES[case]
    want = jax.hessian(lambda v: fn(jnp, v))(x)
    _same(tidu.hessian(lambda v: fn(tnp, v), mode=mode)(x), want, rtol=1e-7, atol=1e-10)


def test_eig_vectors_hessian_reverse_modes_agree():
    # jax refuses eigenvector derivatives of general matrices; tidu's four modes must agree
    def f(x):
        w, v = tnp.linalg.eig(x)
        return tnp.sum(tnp.real(w) ** 3) + tnp.sum(tnp.abs(v[0]) ** 2 * tnp.arange(3.0))

    fof = tidu.hessian(f, mode="FoF")(A3)
    assert np.all(np.isfinite(fof))
    for mode in ("RoR", "RoF", "FoR"):
        _same(tidu.hessian(f, mode=mode)(A3), fof, rtol=1e-8, atol=1e-10)


# --- tidu.numpy.linalg ---------------------------------------------------------------------

BOOL = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0]], bool)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 64])
def test_matrix_power_bool_stays_bool(n):
    # traced, a boolean matrix was converted to float64 (path counts 2., 1., ... instead of
    # NumPy's and JAX's boolean product)
    want = np.linalg.matrix_power(BOOL, n)
    for got in _both(lambda a: tnp.linalg.matrix_power(a, n), BOOL):
        _same(got, want)
    stack = np.array([[[0, 1], [0, 0]], [[1, 1], [0, 1]]], bool)
    _same(tidu.jit(lambda a: tnp.linalg.matrix_power(a, n))(stack), np.linalg.matrix_power(stack, n))


@pytest.mark.parametrize("shape, dtype", [((0, 0), np.float64), ((2, 0, 0), np.float32)])
def test_eig_of_empty_matrices(shape, dtype):
    # raised "attempt to get argmax of an empty sequence", eagerly and traced
    a = np.zeros(shape, dtype)
    w_want, v_want = jnp.linalg.eig(a)
    for w in _both(tnp.linalg.eigvals, a):
        _same(w, w_want)
    for w, v in _both(tnp.linalg.eig, a):
        _same(w, w_want)
        _same(v, v_want)


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 3)])
def test_cond_of_empty_matrices_raises_traced_too(shape):
    # eagerly NumPy's LinAlgError; traced it returned inf
    a = np.zeros(shape)
    with pytest.raises(np.linalg.LinAlgError, match="empty"):
        tnp.linalg.cond(a)
    with pytest.raises(np.linalg.LinAlgError, match="empty"):
        tidu.jit(tnp.linalg.cond)(a)


@pytest.mark.parametrize("ord", [2, -2, "nuc"])
def test_svd_norms_of_nan_matrices_eager_as_traced(ord):
    # eagerly NumPy's "SVD did not converge" LinAlgError; traced (and JAX) nan per matrix
    stack = np.stack([np.array([[1.0, np.nan], [0.0, 1.0]]), np.eye(2), np.array([[np.inf, 0.0], [0.0, 1.0]])])
    want = jnp.linalg.norm(stack, ord, axis=(1, 2), keepdims=True)
    for got in _both(lambda a: tnp.linalg.norm(a, ord, axis=(1, 2), keepdims=True), stack):
        _same(got, want)
    for got in _both(lambda a: tnp.linalg.matrix_norm(a[0], ord=ord), stack):
        _same(got, jnp.linalg.matrix_norm(stack[0], ord=ord))


STACK = RNG.normal(size=(2, 3, 3))
WIDE_STACK = RNG.normal(size=(2, 3, 4))


@pytest.mark.parametrize("kw", [{"rtol": np.array([0.1, 0.9])}, {"tol": np.array([0.1, 2.0])}, {"tol": 1.0}])
def test_matrix_rank_per_matrix_tolerances_traced(kw):
    # traced: "tnp.greater: operands could not be broadcast together with shapes (2, 3) (2,)"
    want = np.linalg.matrix_rank(STACK, **kw)
    for got in _both(lambda a: tnp.linalg.matrix_rank(a, **kw), STACK):
        _same(got, want)


def test_pinv_per_matrix_rtol_traced():
    # traced: "TypeError: only 0-dimensional arrays can be converted to Python scalars"
    rtol = np.array([0.1, 0.9])
    want = np.linalg.pinv(WIDE_STACK, rtol=rtol)
    for got in _both(lambda a: tnp.linalg.pinv(a, rtol=rtol), WIDE_STACK):
        _same(got, want)
    grad = tidu.grad(lambda a: tnp.sum(tnp.linalg.pinv(a, rtol=rtol) ** 2))(WIDE_STACK)
    _same(grad, jax.grad(lambda a: jnp.sum(jnp.linalg.pinv(a, rtol=jnp.asarray(rtol)) ** 2))(WIDE_STACK))
    with pytest.raises(ValueError, match="must broadcast to a's batch axes"):
        tidu.jit(lambda a: tnp.linalg.pinv(a, np.array([[0.1], [0.9]])))(WIDE_STACK)


@pytest.mark.parametrize("offset, dtype", [(1, None), (-1, None), (0, np.float32), (1, np.float64)])
def test_trace_offset_and_dtype_traced(offset, dtype):
    # traced: NotImplementedError "offset and dtype are not supported on traced arrays"
    for x in (WIDE_STACK, np.arange(24).reshape(2, 3, 4)):
        want = jnp.linalg.trace(x, offset=offset, dtype=dtype)
        for got in _both(lambda a: tnp.linalg.trace(a, offset=offset, dtype=dtype), x):
            _same(got, want)
    grad = tidu.grad(lambda a: tnp.sum(tnp.linalg.trace(a, offset=offset) ** 2))(WIDE_STACK)
    _same(grad, jax.grad(lambda a: jnp.sum(jnp.linalg.trace(a, offset=offset) ** 2))(WIDE_STACK))


# --- tidu.scipy.linalg: SciPy's signatures and conventions -----------------------------------

SPD = A3 @ A3.T + 3 * np.eye(3)
VEC = RNG.normal(size=3)


def test_scipy_qr_default_mode_is_full():
    # tidu.scipy.linalg.qr was numpy's (mode='reduced'): a tall matrix's Q was (4, 3) and R
    # (3, 3) where SciPy's and JAX's default gives Q (4, 4), R (4, 3)
    q, r = tsl.qr(TALL)
    q_want, r_want = sl.qr(TALL)
    assert q.shape == q_want.shape and r.shape == r_want.shape
    _same(q @ r, TALL)
    _same(q.T @ q, np.eye(4), atol=1e-12)
    _same(np.abs(r), np.abs(r_want))
    (r_only,) = tsl.qr(TALL, mode="r")
    for (got,) in _both(lambda a: tsl.qr(a, mode="r"), TALL):
        _same(np.abs(got), np.abs(jsl.qr(TALL, mode="r")[0]))
    _same(r_only, r)
    for got in _both(lambda a: tsl.qr(a, mode="economic")[1], TALL):
        _same(np.abs(got), np.abs(jsl.qr(TALL, mode="economic")[1]))
    wide = TALL.T.copy()
    for q, r in _both(tsl.qr, wide):
        _same(q @ r, wide)
    with pytest.raises(NotImplementedError, match="mode='economic'"):
        tidu.jit(tsl.qr)(TALL)
    with pytest.raises(ValueError, match="mode='raw'"):
        tsl.qr(TALL, mode="raw")


def test_scipy_eigh_signature():
    # TypeError: eigh() got an unexpected keyword argument 'eigvals_only' (and 'lower')
    for got in _both(lambda a: tsl.eigh(a, eigvals_only=True), SPD):
        _same(got, jsl.eigh(SPD, eigvals_only=True))
    for w, v in _both(lambda a: tsl.eigh(a, lower=False), SPD):
        _same(w, jsl.eigh(SPD, lower=False)[0])
        _same(v @ np.diag(w) @ v.T, SPD)
    with pytest.raises(NotImplementedError, match="generalized"):
        tsl.eigh(SPD, SPD)


@pytest.mark.parametrize("kw", [{"assume_a": "pos"}, {"assume_a": "pos", "lower": True}, {"assume_a": "sym"},
                                {"assume_a": "her"}, {"lower": True}, {"check_finite": False}])
def test_scipy_solve_keywords(kw):
    # TypeError: solve() got an unexpected keyword argument 'assume_a' (NumPy's solve)
    for b in (VEC, RNG.normal(size=(3, 2))):
        want = jsl.solve(SPD, b, **kw)
        for got in _both(lambda a, y: tsl.solve(a, y, **kw), SPD, b):
            _same(got, want)
    g = tidu.grad(lambda a: tnp.sum(tsl.solve(a, VEC, **kw) ** 2))(SPD)
    g_want = jax.grad(lambda a: jnp.sum(jsl.solve(a, VEC, **kw) ** 2))(SPD)
    # assume_a='pos' factors one triangle in JAX, the Hermitian part in tidu: symmetrize
    _same((g + g.T) / 2, (g_want + g_want.T) / 2, rtol=1e-8)


def test_scipy_solve_transposed():
    for got in _both(lambda a, y: tsl.solve(a, y, transposed=True), A3, VEC):
        _same(got, sl.solve(A3, VEC, transposed=True))
    with pytest.raises(ValueError, match="assume_a"):
        tsl.solve(A3, VEC, assume_a="banana")


CHECK_FINITE_CASES = {
    "det": (lambda a: tsl.det(a, check_finite=False), lambda a: jsl.det(a, check_finite=False)),
    "inv": (lambda a: tsl.inv(a, overwrite_a=True, check_finite=False), lambda a: jsl.inv(a, check_finite=False)),
    "svd": (lambda a: tsl.svd(a, compute_uv=False, check_finite=False),
            lambda a: jsl.svd(a, compute_uv=False, check_finite=False)),
    "cholesky": (lambda a: tsl.cholesky(a, lower=True, check_finite=False),
                 lambda a: jsl.cholesky(a, lower=True, check_finite=False)),
    "cho_factor": (lambda a: tsl.cho_factor(a, check_finite=False)[0],
                   lambda a: jnp.triu(jsl.cho_factor(a, check_finite=False)[0])),
    "cho_solve": (lambda a: tsl.cho_solve(tsl.cho_factor(a, lower=True), VEC, check_finite=False),
                  lambda a: jsl.cho_solve(jsl.cho_factor(a, lower=True), VEC, check_finite=False)),
    "solve_triangular": (lambda a: tsl.solve_triangular(a, VEC, lower=True, overwrite_b=False, check_finite=False),
                         lambda a: jsl.solve_triangular(a, VEC, lower=True, overwrite_b=False,
                                                        check_finite=False)),
}


@pytest.mark.parametrize("case", sorted(CHECK_FINITE_CASES))
def test_scipy_check_finite_accepted(case):
    # TypeError: ... got an unexpected keyword argument 'check_finite'
    ours, theirs = CHECK_FINITE_CASES[case]
    for got in _both(ours, SPD):
        _same(got, theirs(SPD))


def test_scipy_pinv_signature():
    # TypeError: pinv() got an unexpected keyword argument 'atol' (NumPy's pinv)
    w = WIDE_STACK[0]
    for got in _both(lambda a: tsl.pinv(a, rtol=0.5), w):
        _same(got, sl.pinv(w, rtol=0.5))
    for p, rank in _both(lambda a: tsl.pinv(a, return_rank=True), w):
        p_want, rank_want = sl.pinv(w, return_rank=True)
        _same(p, p_want)
        assert int(rank) == int(rank_want)
    _same(tsl.pinv(w, atol=1.0), sl.pinv(w, atol=1.0))
    with pytest.raises(NotImplementedError, match="atol"):
        tidu.jit(lambda a: tsl.pinv(a, atol=1.0))(w)


# --- tidu.scipy.special ------------------------------------------------------------------------


@pytest.mark.parametrize("fn", ["xlogy", "xlog1py", "rel_entr", "kl_div"])
def test_special_nan_propagates(fn):
    # xlogy(0, nan) and xlog1py(0, nan) were 0, rel_entr and kl_div with a nan argument inf;
    # SciPy and JAX give nan
    x = np.array([0.0, -0.0, 1.0, np.nan, np.nan, 0.0, 2.0, 0.0])
    y = np.array([np.nan, np.nan, np.nan, 1.0, np.nan, 1.0, 3.0, 0.0])
    want = getattr(ss, fn)(x, y)
    for got in _both(getattr(tsp, fn), x, y):
        _same(got, want, rtol=1e-14, atol=0)


def test_entr_of_nan_is_nan():
    # entr(nan) was -inf
    x = np.array([np.nan, -1.0, 0.0, 0.5])
    for got in _both(tsp.entr, x):
        _same(got, ss.entr(x), rtol=1e-14, atol=0)


def _bessel_derivative(order, k, t):
    mpmath = pytest.importorskip("mpmath")
    return float(mpmath.diff(lambda z: mpmath.besseli(order, z), t, k))


BESSEL_X = np.array([-3.5, -0.6, -0.5, -0.2, 0.0, 1e-8, 0.3, 0.5, 1.0, 5.5])


@pytest.mark.parametrize("name, order", [("i0", 0), ("i1", 1)])
def test_bessel_i_derivatives_at_and_near_zero(name, order):
    # d i0 / dx at 0 was 1 (the derivative of exp(|x|) at 0 plus i0e's, whose kinks cancel;
    # I0'(0) = I1(0) = 0; JAX: 0), and i1'' at 0 was 1 (I1''(0) = 0)
    fn = getattr(tsp, name)
    _same(fn(BESSEL_X), getattr(ss, name)(BESSEL_X), rtol=1e-13, atol=0)
    d = fn
    for k in (1, 2, 3):
        d = tidu.grad(d)
        want = np.array([_bessel_derivative(order, k, t) for t in BESSEL_X])
        _same(tidu.vmap(d)(BESSEL_X), want, rtol=1e-12, atol=1e-14)
    jax_fn = getattr(jax.scipy.special, name)
    _same(tidu.vmap(tidu.grad(fn))(BESSEL_X), jax.vmap(jax.grad(jax_fn))(BESSEL_X), rtol=1e-12, atol=1e-14)
    _same(tidu.jit(tidu.vmap(tidu.grad(tidu.grad(fn))))(BESSEL_X),
          [_bessel_derivative(order, 2, t) for t in BESSEL_X], rtol=1e-12, atol=1e-14)


# --- tidu.scipy.stats ------------------------------------------------------------------------


LOG_CDF_CASES = [
    ("gamma", "logcdf", (2.5,), np.array([0.3, 2.0, 40.0])),
    ("gamma", "logcdf", (0.5,), np.array([0.3, 40.0])),
    ("chi2", "logcdf", (2.0,), np.array([1.0, 40.0])),
    ("beta", "logcdf", (2.0, 3.0), np.array([0.3, 0.999, 1 - 1e-12])),
    ("beta", "logsf", (2.0, 3.0), np.array([1e-12, 0.001, 0.5])),
]


@pytest.mark.parametrize("dist, fn, args, x", LOG_CDF_CASES)
def test_log_cdf_near_one_keeps_digits(dist, fn, args, x):
    # log(cdf) near 1 kept only the digits of 1: gamma.logcdf(40, 0.5) was 0 (SciPy
    # -3.7e-19), beta.logcdf(1 - 1e-12, 2, 3) was 0 (SciPy -4.0e-36)
    ours, theirs = getattr(getattr(tst, dist), fn), getattr(getattr(sst, dist), fn)
    want = theirs(x, *args)
    for got in _both(lambda v: ours(v, *args), x):
        _same(got, want, rtol=1e-10, atol=0)
    # the derivative: the density over the CDF (minus, over the survival function)
    d = getattr(sst, dist)
    g_want = d.pdf(x, *args) / d.cdf(x, *args) if fn == "logcdf" else -d.pdf(x, *args) / d.sf(x, *args)
    _same(tidu.vmap(tidu.grad(lambda v: ours(v, *args)))(x), g_want, rtol=1e-9, atol=0)
