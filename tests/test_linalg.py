"""tidu.numpy.linalg against JAX: values, first derivatives (jvp and grad) and second
derivatives (jvp of grad), real and complex, single and batched matrices. Inputs are
well-conditioned (SPD for cholesky, distinct eigenvalues for eigh)."""

import functools

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
from vmap_util import assert_default_applies_every_rule

import tidu
import tidu.numpy as tnp

jax.config.update("jax_enable_x64", True)

N = 3


def _rand(rng, shape, dtype):
    x = rng.normal(size=shape)
    if dtype == "complex128":
        x = x + 1j * rng.normal(size=shape)
    return x.astype(dtype)


def make(kind, shape, dtype, rng):
    """A well-conditioned input of ``shape`` (..., n, n) or (..., m, n)."""
    x = _rand(rng, shape, dtype)
    n = shape[-1]
    if kind == "general":
        return x + 2 * n * np.eye(*shape[-2:])
    if kind == "spd":
        return x @ np.conj(np.swapaxes(x, -1, -2)) + n * np.eye(n)
    if kind == "distinct":  # Hermitian with eigenvalues 1, 3, 5, ... and a random basis
        q, _ = np.linalg.qr(x)
        w = (1.0 + 2.0 * np.arange(n)).astype(x.real.dtype)
        return (q * w[..., None, :]) @ np.conj(np.swapaxes(q, -1, -2))
    return x  # "any"


def mH(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2))


# name, tidu function, JAX function, input kind. Eigenvectors and singular vectors enter
# through |v|^2, which does not depend on their phases.
CASES = [
    ("cholesky", tnp.linalg.cholesky, jnp.linalg.cholesky, "spd"),
    ("cholesky_upper", lambda a: tnp.linalg.cholesky(a, upper=True),
     lambda a: jnp.linalg.cholesky(a, upper=True), "spd"),
    ("solve_triangular_lower", lambda a: tnp.linalg.solve_triangular(a, a[..., :2] * 0.5 + 1, lower=True),
     lambda a: jsl.solve_triangular(a, a[..., :2] * 0.5 + 1, lower=True), "general"),
    ("solve_triangular_T_unit", lambda a: tnp.linalg.solve_triangular(a, a[..., :1], trans=1, unit_diagonal=True),
     lambda a: jsl.solve_triangular(a, a[..., :1], trans=1, unit_diagonal=True), "general"),
    ("solve_triangular_vector", lambda a: tnp.linalg.solve_triangular(
        tnp.reshape(a, (-1, N, N))[0], tnp.reshape(a, (-1, N, N))[-1, 0], lower=True),
     lambda a: jsl.solve_triangular(jnp.reshape(a, (-1, N, N))[0], jnp.reshape(a, (-1, N, N))[-1, 0], lower=True),
     "general"),
    ("solve_triangular_C", lambda a: tnp.linalg.solve_triangular(a, a[..., 1:], trans="C", lower=True),
     lambda a: jsl.solve_triangular(a, a[..., 1:], trans="C", lower=True), "general"),
    ("triangular_solve_right", lambda a: tnp.linalg.triangular_solve(a, a[..., :2, :] + 1, lower=True),
     lambda a: jax.lax.linalg.triangular_solve(a, a[..., :2, :] + 1, lower=True), "general"),
    ("triangular_solve_left_conj", lambda a: tnp.linalg.triangular_solve(
        a, a[..., :2] * 2, left_side=True, transpose_a=True, conjugate_a=True),
     lambda a: jax.lax.linalg.triangular_solve(a, a[..., :2] * 2, left_side=True, transpose_a=True,
                                               conjugate_a=True), "general"),
    ("solve_broadcast", lambda a: tnp.linalg.solve(a, tnp.cos(tnp.reshape(a, (-1, N, N))[0, :, :2])),
     lambda a: jnp.linalg.solve(a, jnp.cos(jnp.reshape(a, (-1, N, N))[0, :, :2])), "general"),
    ("solve_vector", lambda a: tnp.linalg.solve(a, np.arange(N) + 1.0),
     lambda a: jnp.linalg.solve(a, jnp.arange(N) + 1.0), "general"),
    ("solve", lambda a: tnp.linalg.solve(a, tnp.sin(a[..., :2])),
     lambda a: jnp.linalg.solve(a, jnp.sin(a[..., :2])), "general"),
    ("inv", tnp.linalg.inv, jnp.linalg.inv, "general"),
    ("det", tnp.linalg.det, jnp.linalg.det, "general"),
    ("slogdet_sign", lambda a: tnp.linalg.slogdet(a)[0], lambda a: jnp.linalg.slogdet(a)[0], "general"),
    ("slogdet_log", lambda a: tnp.linalg.slogdet(a)[1], lambda a: jnp.linalg.slogdet(a)[1], "general"),
    ("eigvalsh", tnp.linalg.eigvalsh, jnp.linalg.eigvalsh, "distinct"),
    ("eigh_values", lambda a: tnp.linalg.eigh(a)[0], lambda a: jnp.linalg.eigh(a)[0], "distinct"),
    ("eigh_vectors", lambda a: tnp.real(tnp.linalg.eigh(a)[1] * tnp.conj(tnp.linalg.eigh(a)[1])),
     lambda a: jnp.real(jnp.linalg.eigh(a)[1] * jnp.conj(jnp.linalg.eigh(a)[1])), "distinct"),
    ("qr_q", lambda a: tnp.linalg.qr(a)[0], lambda a: jnp.linalg.qr(a)[0], "general"),
    ("qr_r", lambda a: tnp.linalg.qr(a)[1], lambda a: jnp.linalg.qr(a)[1], "general"),
    ("qr_tall_q", lambda a: tnp.linalg.qr(a[..., :2])[0], lambda a: jnp.linalg.qr(a[..., :2])[0], "general"),
    ("qr_tall_r", lambda a: tnp.linalg.qr(a[..., :2], mode="r"), lambda a: jnp.linalg.qr(a[..., :2], mode="r"),
     "general"),
    ("qr_wide_r", lambda a: tnp.linalg.qr(a[..., :2, :])[1], lambda a: jnp.linalg.qr(a[..., :2, :])[1], "general"),
    ("svdvals", tnp.linalg.svdvals, lambda a: jnp.linalg.svd(a, compute_uv=False), "general"),
    ("svd_s_wide", lambda a: tnp.linalg.svd(a[..., :2, :], full_matrices=False)[1],
     lambda a: jnp.linalg.svd(a[..., :2, :], full_matrices=False)[1], "general"),
    ("svd_u", lambda a: tnp.real(tnp.linalg.svd(a)[0] * tnp.conj(tnp.linalg.svd(a)[0])),
     lambda a: jnp.real(jnp.linalg.svd(a)[0] * jnp.conj(jnp.linalg.svd(a)[0])), "general"),
    ("svd_vh_tall", lambda a: (lambda v: tnp.real(v * tnp.conj(v)))(tnp.linalg.svd(a[..., :2], False)[2]),
     lambda a: (lambda v: jnp.real(v * jnp.conj(v)))(jnp.linalg.svd(a[..., :2], False)[2]), "general"),
    # U Vh (the polar factor) does not depend on the phases either
    ("svd_polar_wide", lambda a: (lambda r: r[0] @ r[2])(tnp.linalg.svd(a[..., :2, :], False)),
     lambda a: (lambda r: r[0] @ r[2])(jnp.linalg.svd(a[..., :2, :], False)), "general"),
    ("pinv", tnp.linalg.pinv, jnp.linalg.pinv, "general"),
    ("pinv_wide", lambda a: tnp.linalg.pinv(a[..., :2, :]), lambda a: jnp.linalg.pinv(a[..., :2, :]), "general"),
    ("trace", tnp.linalg.trace, jnp.linalg.trace, "any"),
    ("matrix_power_3", lambda a: tnp.linalg.matrix_power(a, 3), lambda a: jnp.linalg.matrix_power(a, 3), "any"),
    ("matrix_power_-2", lambda a: tnp.linalg.matrix_power(a, -2),
     lambda a: jnp.linalg.matrix_power(a, -2), "general"),
    ("matrix_power_0", lambda a: tnp.linalg.matrix_power(a, 0) * a, lambda a: jnp.linalg.matrix_power(a, 0) * a,
     "any"),
]
for _ord in (None, 1, -1, 2, -2, np.inf, -np.inf, 3, 0.5):
    CASES.append((f"norm_vector_{_ord}", lambda a, o=_ord: tnp.linalg.norm(a, o, axis=-1),
                  lambda a, o=_ord: jnp.linalg.norm(a, o, axis=-1), "any"))
for _ord in (None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf):
    CASES.append((f"norm_matrix_{_ord}", lambda a, o=_ord: tnp.linalg.norm(a, o, axis=(-2, -1)),
                  lambda a, o=_ord: jnp.linalg.norm(a, o, axis=(-2, -1)), "general"))

SHAPES = [(N, N), (2, N, N)]
DTYPES = ["float64", "complex128"]
PARAMS = [pytest.param(c, s, d, id=f"{c[0]}-{'x'.join(map(str, s))}-{d}")
          for c in CASES for s in SHAPES for d in DTYPES]
# Derivatives of single matrices: the batched ones above cover the same rules (slow step).
# The default run differentiates a core set, batched; the slow step runs every case on
# single and batched matrices.
CORE = {"cholesky", "solve_triangular_lower", "triangular_solve_right", "solve", "solve_vector", "inv", "det",
        "slogdet_log", "eigvalsh", "eigh_vectors", "qr_q", "qr_wide_r", "svdvals", "svd_u", "svd_polar_wide",
        "pinv", "trace", "matrix_power_-2", "norm_vector_1", "norm_matrix_nuc", "norm_matrix_inf"}
# In the default run each core case is differentiated in one dtype (alternating real and
# complex down the list); the slow step runs both.
_DEFAULT_DTYPE = {name: DTYPES[i % 2] for i, name in enumerate(c[0] for c in CASES if c[0] in CORE)}
SLOW_ON_SINGLE = [pytest.param(*p.values, id=p.id, marks=pytest.mark.slow)
                  if p.values[1] == (N, N) or _DEFAULT_DTYPE.get(p.values[0][0]) != p.values[2] else p
                  for p in PARAMS]


def real_loss(f, w, lib):
    """A real scalar of f(a): sum Re(conj(w) f(a)) (w matches f's output)."""
    return lambda a: lib.sum(lib.real(lib.conj(w) * f(a)))


def setup(case, shape, dtype, seed=0):
    name, f, g, kind = case
    rng = np.random.default_rng(seed)
    a = make(kind, shape, dtype, rng)
    out = np.asarray(g(a))
    w = _rand(rng, out.shape, out.dtype.name)
    t = _rand(rng, shape, dtype)
    if kind in ("spd", "distinct"):  # stay in the domain: Hermitian tangents
        t = t + np.conj(np.swapaxes(t, -1, -2))
    return f, g, a, w, t


def close(x, y, tol=1e-9):
    x, y = np.asarray(x), np.asarray(y)
    assert x.shape == y.shape, (x.shape, y.shape)
    np.testing.assert_allclose(x, y, rtol=tol, atol=tol * (1 + np.max(np.abs(y), initial=0)))


@pytest.mark.parametrize("case,shape,dtype", SLOW_ON_SINGLE)
def test_value_and_jvp(case, shape, dtype):
    f, g, a, w, t = setup(case, shape, dtype)
    # JAX's references in one jit: one XLA compilation instead of one per op
    value_jax, jt_jax = jax.jit(lambda a: jax.jvp(g, (a,), (t,)))(a)
    close(tidu.jit(f)(a), value_jax)
    _, jt = tidu.jvp(f, (a,), (t,))
    close(jt, jt_jax)


@pytest.mark.parametrize("case,shape,dtype", SLOW_ON_SINGLE)
def test_grad_and_second_derivative(case, shape, dtype):
    f, g, a, w, t = setup(case, shape, dtype, seed=1)
    lt, lj = real_loss(f, w, tnp), real_loss(g, w, jnp)
    g_jax, hv_jax = jax.jit(lambda a: (jax.grad(lj)(a), jax.jvp(jax.grad(lj), (a,), (t,))[1]))(a)
    # tidu's complex gradient is df/dx + i df/dy; JAX's is its conjugate.
    close(tidu.grad(lt)(a), np.conj(g_jax))
    _, hv = tidu.jvp(tidu.grad(lt), (a,), (t,))
    close(hv, np.conj(hv_jax), 1e-7)


# --- StableHLO: every linear algebra primitive runs in XLA and matches NumPy ------------

XLA_UNARY = [("triangle", {"lower": True, "strict": False}), ("triangle", {"lower": False, "strict": True}),
             ("cholesky", {}), ("logabsdet", {}), ("detsign", {}), ("eigvalsh", {}), ("eigh_vectors", {})]
XLA_BINARY = [("solve", {}), ("triangular_solve", {"lower": True, "unit_diagonal": False}),
              ("triangular_solve", {"lower": False, "unit_diagonal": True})]


@pytest.mark.parametrize("dtype", [pytest.param("float32", marks=pytest.mark.slow), "float64",
                                   pytest.param("complex64", marks=pytest.mark.slow), "complex128"])
@pytest.mark.parametrize("shape", [pytest.param((N, N), marks=pytest.mark.slow), (2, N, N)],
                         ids=lambda s: "x".join(map(str, s)))
def test_primitives_run_in_xla(shape, dtype):
    from xla_util import check, op

    from tidu.core.keys import Aval

    rng = np.random.default_rng(3)
    x = (make("spd", shape, "complex128" if "complex" in dtype else "float64", rng)).astype(dtype)
    b = _rand(rng, shape[:-1] + (2,), "complex128" if "complex" in dtype else "float64").astype(dtype)
    a, bv = Aval(shape, dtype), Aval(b.shape, dtype)
    for name, attrs in XLA_UNARY:
        check(lambda bld, x, name=name, attrs=attrs: [op(bld, name, x, **attrs)], [a], [x])
    tall = np.concatenate([x, b], axis=-1)[..., :2, :].swapaxes(-1, -2).copy()  # (..., 3 + 2, 2)
    wide = np.conj(tall.swapaxes(-1, -2)).copy()
    for name in ("qr_q", "qr_r"):
        check(lambda bld, x, name=name: [op(bld, name, x)], [a], [x])
        check(lambda bld, x, name=name: [op(bld, name, x)], [Aval(tall.shape, dtype)], [tall])
    for name, attrs in (("svdvals", {}), ("svd_u", {}), ("svd_vh", {}), ("pinv", {"rtol": 1e-6})):
        for arr in (x, tall, wide):
            check(lambda bld, x, name=name, attrs=attrs: [op(bld, name, x, **attrs)], [Aval(arr.shape, dtype)], [arr])
    for name, attrs in XLA_BINARY:
        check(lambda bld, x, y, name=name, attrs=attrs: [op(bld, name, x, y, **attrs)], [a, bv], [x, b])


def test_gradient_program_runs_in_xla():
    """A whole derivative program (grad of a function using every primitive) on XLA."""
    rng = np.random.default_rng(4)
    a = make("distinct", (2, N, N), "complex128", rng)

    def f(x):
        s, logabs = tnp.linalg.slogdet(x)
        v = tnp.linalg.eigh(x)[1]
        return (tnp.sum(tnp.real(tnp.linalg.cholesky(x + 3 * np.eye(N)))) + tnp.sum(logabs)
                + tnp.sum(tnp.real(s[:, None, None] * tnp.linalg.inv(x))) + tnp.sum(tnp.real(v * tnp.conj(v)) ** 2))

    g = tidu.grad(f)
    want = np.conj(jax.jit(jax.grad(lambda x: jnp.sum(jnp.real(jnp.linalg.cholesky(x + 3 * jnp.eye(N))))
                            + jnp.sum(jnp.linalg.slogdet(x)[1])
                            + jnp.sum(jnp.real(jnp.linalg.slogdet(x)[0][..., None, None] * jnp.linalg.inv(x)))
                            + jnp.sum(jnp.real(jnp.linalg.eigh(x)[1] * jnp.conj(jnp.linalg.eigh(x)[1])) ** 2)))(a))
    close(g(a), want)
    from tidu.lowering.xla import run_xla

    program = tidu.make_graph(g)(a).program
    close(run_xla(program, [a])[0], want)


# --- phases: the vectors tidu returns are differentiable functions ---------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("which", ["eigh", "svd_u", "svd_vh"])
def test_vector_jvp_is_the_derivative_of_the_returned_vectors(which, dtype):
    """jvp of the eigenvectors / singular vectors = central differences of the very vectors
    tnp.linalg returns (their phases are fixed: first component of V real and >= 0)."""
    rng = np.random.default_rng(7)
    kind = "distinct" if which == "eigh" else "general"
    a = make(kind, (2, 4, 3) if which != "eigh" else (2, N, N), dtype, rng)
    t = _rand(rng, a.shape, dtype)
    if which == "eigh":
        t = t + np.conj(np.swapaxes(t, -1, -2))
    f = {"eigh": lambda x: tnp.linalg.eigh(x)[1], "svd_u": lambda x: tnp.linalg.svd(x, False)[0],
         "svd_vh": lambda x: tnp.linalg.svd(x, False)[2]}[which]
    v = tidu.jit(f)(a)
    first = v[..., 0, :] if which != "svd_vh" else v[..., :, 0]
    if which != "svd_u":
        assert np.all(np.abs(np.imag(first)) < 1e-12) and np.all(np.real(first) >= 0)
    h = 1e-6
    fd = (tidu.jit(f)(a + h * t) - tidu.jit(f)(a - h * t)) / (2 * h)
    close(tidu.jvp(f, (a,), (t,))[1], fd, 1e-6)


# --- degenerate inputs: documented nan/inf, never an exception -------------------------


@pytest.mark.parametrize("entries", [
    [[1.0, 2.0], [2.0, 4.0]],  # rank 1 of 2
    [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]],  # rank 2 of 3
    [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]],  # rank 1 of 3: the adjugate is 0
    [[0.0, 2.0 + 1.0j], [0.0, 1.0 - 3.0j]],  # complex, singular
], ids=["2x2-rank1", "3x3-rank2", "3x3-rank1", "2x2-complex"])
def test_det_derivatives_at_singular_matrices_are_the_polynomials(entries):
    """At a singular matrix det's gradient and Hessian are the polynomial's (SymPy), not
    nan: exactly up to 2 x 2 (its cofactor expansion), to rounding from 3 x 3 (the
    adjugate's rule); the gradient is JAX's (cofactors) too."""
    import sympy as sp

    a = np.array(entries)
    n = a.shape[0]
    syms = sp.symbols(f"a0:{n * n}")
    poly = sp.Matrix(n, n, syms).det()
    at = dict(zip(syms, a.ravel().tolist(), strict=True))
    if np.iscomplexobj(a):  # holomorphic: the JVP along each entry is d det / d a_ij
        f = lambda v: tnp.linalg.det(tnp.reshape(v, (n, n)))  # noqa: E731
        jac = tidu.jacfwd(f)(a.ravel())
        want = np.array([complex(sp.diff(poly, s).subs(at)) for s in syms])
        np.testing.assert_array_equal(jac, want)
        return
    f = lambda v: tnp.linalg.det(tnp.reshape(v, (n, n)))  # noqa: E731
    grad = tidu.grad(f)(a.ravel())
    same = np.testing.assert_array_equal if n == 2 else functools.partial(np.testing.assert_allclose, rtol=0,
                                                                            atol=1e-13)
    same(grad, np.array([float(sp.diff(poly, s).subs(at)) for s in syms]))
    # JAX's cofactors come from an LU factorization: equal up to rounding
    np.testing.assert_allclose(grad, jax.grad(lambda v: jnp.linalg.det(v.reshape(n, n)))(a.ravel()), atol=1e-12)
    hess = np.array(sp.hessian(poly, syms).subs(at), dtype=float)
    for mode in ("FoR", "RoR", "FoF", "RoF"):
        same(tidu.hessian(f, mode=mode)(a.ravel()), hess)


def test_det_of_larger_singular_matrices_has_the_adjugate_as_derivative():
    """From 4 x 4 det's derivative is the adjugate (docs/linalg.md), at singular matrices
    too: all ones has rank 1, so its adjugate and its Hessian (the 2 x 2 minors) are 0."""
    a = np.ones((4, 4))
    assert tidu.jit(tnp.linalg.det)(a) == 0
    np.testing.assert_allclose(tidu.grad(tnp.linalg.det)(a), np.zeros((4, 4)), atol=1e-14)
    np.testing.assert_allclose(tidu.hessian(tnp.linalg.det)(a), np.zeros((4,) * 4), atol=1e-14)


def test_singular_and_indefinite_inputs_give_documented_values():
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    sign, logabs = tidu.jit(tnp.linalg.slogdet)(singular)
    assert sign == 0 and logabs == -np.inf
    assert tidu.jit(tnp.linalg.det)(singular) == 0
    x = tidu.jit(lambda a: tnp.linalg.solve(a, np.ones(2)))(singular)
    assert not np.all(np.isfinite(x))
    indefinite = np.array([[1.0, 2.0], [2.0, 1.0]])
    for chol in (tnp.linalg.cholesky, tidu.jit(tnp.linalg.cholesky)):  # eager and traced: JAX's
        c = chol(indefinite)
        assert np.all(np.isnan(c[np.tril_indices(2)])) and np.all(c[np.triu_indices(2, 1)] == 0)
        np.testing.assert_array_equal(c, jnp.linalg.cholesky(indefinite))
    from tidu.lowering.xla import run_xla

    batch = np.stack([indefinite, 2 * np.eye(2)])  # per matrix: one nan factor, one fine
    program = tidu.make_graph(tnp.linalg.cholesky)(batch).program
    np.testing.assert_allclose(run_xla(program, [batch])[0], tnp.linalg.cholesky(batch), rtol=1e-15, equal_nan=True)
    g = tidu.grad(lambda a: tnp.linalg.slogdet(a)[1])(singular)
    assert not np.all(np.isfinite(g))


def test_svd_of_a_matrix_with_nan_is_nan_per_matrix():
    """LAPACK's SVD does not converge on a nan or inf entry (NumPy raises): eager calls
    and traced programs give nan for that matrix, as JAX does, and the others' values."""
    batch = np.array([[[1.0, np.nan], [0.0, 1.0]], [[2.0, 1.0], [1.0, 3.0]], [[np.inf, 0.0], [0.0, 1.0]]])
    fine = batch[1]
    for fn, want in ((lambda a: tnp.linalg.svd(a, compute_uv=False), np.linalg.svd(fine, compute_uv=False)),
                     (lambda a: tnp.linalg.svd(a)[1], np.linalg.svd(fine)[1]),
                     (tnp.linalg.pinv, np.linalg.pinv(fine))):
        for got in (tidu.jit(fn)(batch), fn(batch)):
            assert np.all(np.isnan(got[0])) and np.all(np.isnan(got[2]))
            np.testing.assert_allclose(got[1], want, rtol=1e-14)
    assert np.all(np.isnan(tidu.jit(lambda a: tnp.linalg.svd(a)[0])(batch[0])))
    # cond: NumPy's convention, nan only for a nan entry (inf for an infinite one, or a singular matrix)
    batch = np.concatenate([batch, np.zeros((1, 2, 2))])
    for p in (None, -2, 1, "fro"):
        np.testing.assert_array_equal(tidu.jit(lambda a, p=p: tnp.linalg.cond(a, p))(batch),
                                      np.linalg.cond(batch, p))


@pytest.mark.parametrize("shape", [(0,), (0, 0), (0, 3), (3, 0)])
@pytest.mark.parametrize("ord", [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf, 0, 3])
def test_norms_of_empty_arrays_as_numpy(shape, ord):
    """Over no elements a largest size is 0 (a maximum's -inf before) and a smallest one
    is NumPy's ValueError."""
    x = np.zeros(shape)
    if (len(shape) == 1) == isinstance(ord, str):
        return  # a matrix norm of a vector, or the reverse: an error either way
    try:
        with np.errstate(divide="ignore"):  # (ord -1: NumPy's 1 / 0)
            want = np.linalg.norm(x, ord)
    except ValueError:
        with pytest.raises(ValueError, match="empty array"):
            tidu.jit(lambda a: tnp.linalg.norm(a, ord))(x)
        return
    got = tidu.jit(lambda a: tnp.linalg.norm(a, ord))(x)
    np.testing.assert_array_equal(got, want)


def test_repeated_eigenvalues_eigenvector_derivative_is_not_finite():
    a = np.diag([1.0, 1.0, 2.0])
    t = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    w, dw = tidu.jvp(tnp.linalg.eigvalsh, (a,), (t,))
    close(dw, jax.jit(jax.jvp, static_argnums=0)(jnp.linalg.eigvalsh, (a,), (t,))[1])  # eigenvalues: fine
    _, dv = tidu.jvp(lambda x: tnp.linalg.eigh(x)[1], (a,), (t,))
    assert not np.all(np.isfinite(dv))


# --- gauge: eager and traced return the same vectors; derivatives against finite ----------
# --- differences of the eager functions (issue 30) ---------------------------------------

SVD_SHAPES = [(3, 3), (2, 4), (4, 2), (2, 3, 3), (2, 2, 4), (2, 4, 2)]


def _svd_parts(x):
    u, s, vh = tnp.linalg.svd(x, full_matrices=False)
    return u, s, vh


# gauge-invariant functions of the SVD (real outputs, complex where the product is)
SVD_INVARIANT = {
    "abs2_u": lambda x: (lambda u: tnp.real(u * tnp.conj(u)))(_svd_parts(x)[0]),
    "abs2_vh": lambda x: (lambda v: tnp.real(v * tnp.conj(v)))(_svd_parts(x)[2]),
    "reconstruction": lambda x: (lambda r: (r[0] * r[1][..., None, :]) @ r[2])(_svd_parts(x)),
    "projector_u": lambda x: (lambda u: u @ tnp.conj(tnp.swapaxes(u, -1, -2)))(_svd_parts(x)[0]),
    "projector_v": lambda x: (lambda v: tnp.conj(tnp.swapaxes(v, -1, -2)) @ v)(_svd_parts(x)[2]),
    "singular_values": lambda x: _svd_parts(x)[1],
    "polar": lambda x: (lambda r: r[0] @ r[2])(_svd_parts(x)),
}
# the raw, gauge-dependent outputs, in tidu's gauge (the same eagerly and traced)
SVD_RAW = {"u": lambda x: _svd_parts(x)[0], "vh": lambda x: _svd_parts(x)[2]}


def _check_against_eager_fd(f, a, t, rng, tol=1e-6):
    """jvp(f) and the VJP (grad of Re <w, f>) against central differences of the eager f."""
    h = 1e-6
    fd = (f(a + h * t) - f(a - h * t)) / (2 * h)  # NumPy arrays in: eager tidu.numpy
    close(tidu.jvp(f, (a,), (t,))[1], fd, tol)
    w = _rand(rng, fd.shape, "complex128" if np.iscomplexobj(fd) else "float64")
    g = tidu.grad(lambda x: tnp.sum(tnp.real(tnp.conj(w) * f(x))))(a)
    # tidu's gradient of a real function of complex x is df/dRe x + i df/dIm x
    np.testing.assert_allclose(np.sum(np.real(np.conj(g) * t)), np.sum(np.real(np.conj(w) * fd)),
                               rtol=tol, atol=tol * (1 + np.max(np.abs(fd))))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SVD_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_svd_derivatives_of_gauge_invariant_functions(shape, dtype):
    rng = np.random.default_rng(11)
    a, t = _rand(rng, shape, dtype), _rand(rng, shape, dtype)
    for f in SVD_INVARIANT.values():
        _check_against_eager_fd(f, a, t, rng)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SVD_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_svd_vectors_vjp_matches_eager_finite_differences(shape, dtype):
    """The issue-30 check: VJP of U and Vh against finite differences of the eager svd
    (which returned LAPACK's phases, not the ones the derivative is of)."""
    rng = np.random.default_rng(12)
    a, t = _rand(rng, shape, dtype), _rand(rng, shape, dtype)
    for f in SVD_RAW.values():
        close(f(a), tidu.jit(f)(a), 1e-12)
        _check_against_eager_fd(f, a, t, rng)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 3)], ids=lambda s: "x".join(map(str, s)))
def test_eigh_and_qr_derivatives_of_gauge_invariant_functions(shape, dtype):
    rng = np.random.default_rng(13)
    a, t = _rand(rng, shape, dtype), _rand(rng, shape, dtype)  # not Hermitian: the Hermitian part counts
    fns = [lambda x: tnp.linalg.eigvalsh(x),
           lambda x: (lambda v: tnp.real(v * tnp.conj(v)))(tnp.linalg.eigh(x)[1]),
           lambda x: (lambda v: v[..., :, :1] @ tnp.conj(tnp.swapaxes(v[..., :, :1], -1, -2)))(tnp.linalg.eigh(x)[1]),
           lambda x: tnp.linalg.eigh(x)[1],  # raw vectors, in tidu's gauge
           lambda x: (lambda q: q[..., :, :2] @ tnp.conj(tnp.swapaxes(q[..., :, :2], -1, -2)))(tnp.linalg.qr(x)[0]),
           lambda x: tnp.linalg.qr(x)[0]]
    for f in fns:
        _check_against_eager_fd(f, a, t, rng)


def test_eager_equals_traced_for_one_sided_numpy_definitions():
    """eigh/eigvalsh of the Hermitian part (not NumPy's UPLO triangle), cholesky of the
    Hermitian part and nan where not positive definite, svd in tidu's phase gauge."""
    rng = np.random.default_rng(14)
    a = rng.normal(size=(3, 3))
    sym = (a + a.T) / 2
    for f, want in [(tnp.linalg.eigvalsh, np.linalg.eigvalsh(sym)),
                    (lambda x: tnp.linalg.eigvalsh(x, UPLO="U"), np.linalg.eigvalsh(sym)),
                    (lambda x: tnp.linalg.eigh(x)[0], np.linalg.eigvalsh(sym))]:
        close(f(a), want, 1e-12)
        close(tidu.jit(f)(a), want, 1e-12)
    c = np.array([[2.0, 1.0], [0.0, 2.0]])
    want = np.linalg.cholesky((c + c.T) / 2)
    close(tnp.linalg.cholesky(c), want)
    close(tidu.jit(tnp.linalg.cholesky)(c), want)
    close(tnp.linalg.cholesky(c, upper=True), want.T)
    for x in (a, a + 1j * rng.normal(size=(3, 3)), rng.normal(size=(2, 4, 3))):
        for f in (lambda y: tnp.linalg.svd(y, full_matrices=False), tnp.linalg.eigh, tnp.linalg.qr):
            if f is tnp.linalg.eigh and x.shape[-1] != x.shape[-2]:
                continue
            eager, traced = f(x), tidu.jit(f)(x)
            assert type(eager) is type(traced)
            for e, t in zip(eager, traced, strict=True):
                close(e, t, 1e-12)
    # full_matrices=True eagerly (non-square: NumPy's complement): the leading vectors in the gauge
    tall = rng.normal(size=(4, 2))
    u, s, vh = tnp.linalg.svd(tall)
    assert u.shape == (4, 4) and np.all(vh[:, 0] >= 0)
    close(u[:, :2], tidu.jit(lambda y: tnp.linalg.svd(y, full_matrices=False)[0])(tall), 1e-12)


def test_pinv_under_transforms():
    """issue 30: pinv failed under a transform (tidu.numpy.linalg had no _dot)."""
    rng = np.random.default_rng(15)
    for a in (rng.normal(size=(3, 4)), rng.normal(size=(2, 4, 3)) + 1j * rng.normal(size=(2, 4, 3))):
        f = tnp.linalg.pinv
        close(tidu.jit(f)(a), np.linalg.pinv(a))
        close(tidu.jit(lambda x: tnp.linalg.pinv(x, hermitian=False, rtol=1e-8))(a), np.linalg.pinv(a, rtol=1e-8))
        close(tidu.vmap(f)(a[None])[0], np.linalg.pinv(a))
        _check_against_eager_fd(f, a, _rand(rng, a.shape, a.dtype.name), rng)
    spd = make("spd", (3, 3), "float64", rng)
    g = tidu.grad(lambda x: tnp.sum(tnp.linalg.pinv(x, hermitian=True) ** 2))(spd)
    # hermitian=True reads the lower triangle (NumPy's eigh): the upper one has no derivative
    want = jax.jit(jax.grad(lambda x: jnp.sum(jnp.linalg.pinv(jnp.tril(x) + jnp.tril(x, -1).T) ** 2)))(spd)
    close(g, want)


# --- batched: tidu.vmap against jax.vmap ------------------------------------------------------

BATCH = 2


def batched_pairs(case, dtype, axis=0, jit=False):
    """tidu.vmap of the case's function and of the gradient of its real loss, and jax.vmap
    of JAX's, as (what, tidu's, JAX's, the input): BATCH matrices of the case's kind
    stacked along ``axis`` (-1: the last)."""
    name, f, g, kind = case
    rng = np.random.default_rng(11)
    a = np.moveaxis(make(kind, (BATCH, N, N), dtype, rng), 0, axis)
    out = jax.eval_shape(g, np.take(a, 0, axis=axis))
    w = _rand(rng, out.shape, out.dtype.name)
    lt, lj = real_loss(f, w, tnp), real_loss(g, w, jnp)

    def vmap(h):
        return tidu.jit(tidu.vmap(h, in_axes=axis)) if jit else tidu.vmap(h, in_axes=axis)

    return [("value", vmap(f), jax.vmap(g, in_axes=axis), a),
            ("gradient", vmap(tidu.grad(lt)), jax.vmap(jax.grad(lj), in_axes=axis), a)]


def check_batched(case, dtype, axis=0, jit=False):
    pairs = batched_pairs(case, dtype, axis, jit)
    wants = jax.jit(lambda a: [j(a) for _, _, j, _ in pairs])(pairs[0][3])
    close(pairs[0][1](pairs[0][3]), wants[0])
    close(pairs[1][1](pairs[1][3]), np.conj(wants[1]))  # tidu's complex gradient: the conjugate of JAX's


# The default run: these cases (of _batched_params' ids): cases that together apply every
# batching rule, with every pattern of batched and unbatched operands, that the whole sweep
# applies (tests/vmap_util.py; test_the_default_batched_cases_apply_every_batching_rule, in
# the slow step, keeps it so). The slow step: every case, real and complex, mapped over
# axis 0 and over the last axis (under tidu.jit).
BATCHED_DEFAULT = ["cholesky-float64-axis0", "solve-complex128-axis-1", "eigh_vectors-float64-axis0",
                   "svd_u-complex128-axis0", "slogdet_log-float64-axis-1", "slogdet_sign-float64-axis0",
                   "qr_wide_r-float64-axis0",
                   "norm_vector_inf-float64-axis0", "pinv-float64-axis0", "norm_vector_None-complex128-axis0",
                   "det-float64-axis0"]


def _batched_params():
    return [pytest.param(c, d, a, id=f"{c[0]}-{d}-axis{a}",
                         marks=[] if f"{c[0]}-{d}-axis{a}" in BATCHED_DEFAULT else [pytest.mark.slow])
            for c in CASES for d in DTYPES for a in (0, -1)]


@pytest.mark.parametrize("case,dtype,axis", _batched_params())
def test_vmap_against_jax(case, dtype, axis):
    check_batched(case, dtype, axis, jit=axis != 0)


def test_every_covered_linalg_function_is_compared_batched():
    """Each function of jax.numpy.linalg that tidu.numpy.linalg has names a batched case
    (its name, or its name and a suffix): here, in tests/test_linalg_extras.py or in
    tests/test_linalg_more.py."""
    import test_linalg_extras
    import test_linalg_more

    public = [n for n in dir(jnp.linalg) if not n.startswith("_") and callable(getattr(jnp.linalg, n))
              and not isinstance(getattr(jnp.linalg, n), type) and hasattr(tnp.linalg, n)]
    cases = [c[0] for c in CASES] + list(test_linalg_extras.BATCHED) + list(test_linalg_more.BATCHED)
    named = {n for n in public for c in cases if c == n or c.startswith((f"{n}_", f"{n}-"))}
    assert set(public) == named, sorted(set(public) - named)


@pytest.mark.slow
def test_the_default_batched_cases_apply_every_batching_rule():
    """Every batching rule, with every pattern of batched operands, that tidu.vmap applies
    in the whole sweep is applied by a case of BATCHED_DEFAULT (tidu's side only: traces)."""
    assert_default_applies_every_rule(_batched_params(), BATCHED_DEFAULT,
                                      lambda p: [fn(a) for _, fn, _, a in batched_pairs(*p.values)])


@pytest.mark.parametrize("which", ["eigh", "svd_u", "svd_vh"])
def test_vector_derivatives_where_a_first_component_is_zero_agree_in_both_modes(which):
    """A (block-)diagonal matrix has eigen- and singular vectors whose first component is
    0, where the phase-fixing term's select picks 0. Reverse mode used to get 0 * inf there
    through the select (every entry of the gradient nan); both modes agree now."""
    a = np.diag([1.0, 2.0, 3.5])
    a[1, 2] = a[2, 1] = 0.3
    weights = np.arange(9.0).reshape(3, 3) / 7 + 0.1
    part = {"eigh": lambda m: tnp.linalg.eigh(m)[1], "svd_u": lambda m: tnp.linalg.svd(m)[0],
            "svd_vh": lambda m: tnp.linalg.svd(m)[2]}[which]
    f = lambda m: tnp.sum(part(m) * weights)  # noqa: E731
    reverse = tidu.grad(f)(a)
    assert np.all(np.isfinite(reverse))
    np.testing.assert_allclose(reverse, tidu.jacfwd(f)(a), rtol=1e-12, atol=1e-14)
    # the vectors' signs jump at such a matrix (their phase is fixed by the first
    # component), so the finite differences are those of the squared components
    g = lambda m: tnp.sum(part(m) ** 2 * weights)  # noqa: E731
    h = 1e-6
    fd = np.array([(tidu.jit(g)(a + h * e) - tidu.jit(g)(a - h * e)) / (2 * h)
                   for e in np.eye(9).reshape(9, 3, 3)]).reshape(3, 3)
    np.testing.assert_allclose(tidu.grad(g)(a), fd, atol=1e-6)
