"""tnp.linalg.det from 4 x 4 up at singular matrices: first and second derivatives in
every mode, vmapped, complex, float32 and on XLA, against the exact minors of integer
matrices (the adjugate and the (n-2)-minors, by cofactor expansion in integers), and
against JAX (x64) at regular ones (docs/linalg.md: det's derivative is the adjugate,
computed so that it holds at singular matrices too)."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp

RNG = np.random.default_rng(20261201)


def _laplace(m: list[list[complex]]) -> complex:
    """The determinant by cofactor expansion along the first row: exact for the small
    integer (Gaussian integer) entries used here, every partial sum an integer below 2^53."""
    if not m:
        return 1
    return sum((-1) ** j * m[0][j] * _laplace([row[:j] + row[j + 1:] for row in m[1:]]) for j in range(len(m)))


def _minor(a: np.ndarray, rows: tuple[int, ...], cols: tuple[int, ...]) -> complex:
    keep_r = [r for r in range(len(a)) if r not in rows]
    keep_c = [c for c in range(len(a)) if c not in cols]
    return _laplace([[a[r, c].item() for c in keep_c] for r in keep_r])


def _exact(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(d det / da, d2 det / da da) at the integer (or Gaussian integer) matrix a,
    exactly: the signed (n-1)-minors (the transposed adjugate) and the signed
    (n-2)-minors."""
    n = len(a)
    dtype = complex if np.iscomplexobj(a) else float
    grad = np.array([[(-1) ** (i + j) * _minor(a, (i,), (j,)) for j in range(n)] for i in range(n)], dtype)
    hess = np.zeros((n,) * 4, dtype)
    for i, j, k, l in np.ndindex(n, n, n, n):
        if i != k and j != l:
            sign = (-1) ** (i + j + k + l) * (1 if (i < k) == (j < l) else -1)
            hess[i, j, k, l] = sign * _minor(a, (i, k), (j, l))
    return grad, hess


def _integers(n: int, complex_: bool = False) -> np.ndarray:
    x = RNG.integers(-3, 4, size=(n, n)).astype(float)
    if complex_:
        x = x + 1j * RNG.integers(-3, 4, size=(n, n))
    return x


def _rank_deficient(n: int, kind: str, complex_: bool = False) -> np.ndarray:
    """An integer matrix, singular in exact arithmetic (and in floating point)."""
    x = _integers(n, complex_)
    if kind == "dependent":  # rank n - 1
        x[:, 2] = x[:, 0] - 2 * x[:, 1]
    elif kind == "two-dependent":  # rank n - 2
        x[:, 2] = x[:, 0] - 2 * x[:, 1]
        x[:, 3] = 3 * x[:, 1] + x[:, 0]
    elif kind == "zero-column":
        x[:, 1] = 0
    elif kind == "equal-rows":
        x[3] = x[0]
    return x


SINGULAR = [(4, "dependent"), (4, "two-dependent"), (4, "zero-column"), (5, "dependent"), (5, "equal-rows"),
            (5, "two-dependent")]
SINGULAR_IDS = [f"{n}x{n}-{kind}" for n, kind in SINGULAR]


def _tol(a: np.ndarray, power: int) -> float:
    return 1e-12 * (1 + np.max(np.abs(a))) ** power


@pytest.mark.parametrize("n,kind", SINGULAR, ids=SINGULAR_IDS)
def test_gradient_and_hessian_in_every_mode(n, kind):
    a = _rank_deficient(n, kind)
    grad, hess = _exact(a)
    det = tnp.linalg.det
    np.testing.assert_allclose(tidu.grad(det)(a), grad, atol=_tol(a, n - 1))
    for jac in (tidu.jacfwd, tidu.jacrev):
        np.testing.assert_allclose(jac(det)(a), grad, atol=_tol(a, n - 1))
    e = RNG.normal(size=a.shape)
    np.testing.assert_allclose(tidu.jvp(det, (a,), (e,))[1], np.sum(grad * e), atol=_tol(a, n - 1) * n * n)
    _, vjp = tidu.vjp(det, a)
    np.testing.assert_allclose(vjp(1.5)[0], 1.5 * grad, atol=_tol(a, n - 1))
    for mode in ("FoR", "RoR", "FoF", "RoF"):
        np.testing.assert_allclose(tidu.hessian(det, mode=mode)(a), hess, atol=_tol(a, n - 2), err_msg=mode)
    assert tidu.jit(det)(a) == pytest.approx(np.linalg.det(a), abs=_tol(a, n))


@pytest.mark.parametrize("n,kind", [(4, "dependent"), (5, "two-dependent"), (4, "zero-column")],
                         ids=["4x4-dependent", "5x5-two-dependent", "4x4-zero-column"])
def test_complex_singular_matrices(n, kind):
    """det is holomorphic: its JVP is sum(adj(a)^T * da), the JVP of that the Hessian's
    bilinear form, and the gradient of Re det is conj(adj(a)^T) (tidu's convention)."""
    a = _rank_deficient(n, kind, complex_=True)
    grad, hess = _exact(a)
    det = tnp.linalg.det
    e1 = RNG.normal(size=a.shape) + 1j * RNG.normal(size=a.shape)
    e2 = RNG.normal(size=a.shape) + 1j * RNG.normal(size=a.shape)
    tol = _tol(a, n - 1) * n * n
    np.testing.assert_allclose(tidu.jvp(det, (a,), (e1,))[1], np.sum(grad * e1), atol=tol)
    second = tidu.jvp(lambda x: tidu.jvp(det, (x,), (e1,))[1], (a,), (e2,))[1]
    np.testing.assert_allclose(second, np.einsum("ijkl,ij,kl->", hess, e1, e2), atol=tol * n * n)
    np.testing.assert_allclose(tidu.grad(lambda x: tnp.real(det(x)))(a), np.conj(grad), atol=_tol(a, n - 1))
    _, vjp = tidu.vjp(det, a)
    ct = 0.5 - 2j
    np.testing.assert_allclose(vjp(ct)[0], ct * np.conj(grad), atol=_tol(a, n - 1) * 3)


def test_vmap_of_gradient_and_hessian():
    xs = np.stack([_rank_deficient(4, kind) for kind in ("dependent", "two-dependent", "zero-column")]
                  + [_integers(4)])
    exact = [_exact(x) for x in xs]
    det = tnp.linalg.det
    grads = tidu.vmap(tidu.grad(det))(xs)
    hessians = tidu.vmap(tidu.hessian(det, mode="RoR"))(xs)
    moved = tidu.vmap(tidu.grad(det), in_axes=2)(np.moveaxis(xs, 0, 2))
    for k, (grad, hess) in enumerate(exact):
        np.testing.assert_allclose(grads[k], grad, atol=_tol(xs, 3))
        np.testing.assert_allclose(moved[k], grad, atol=_tol(xs, 3))
        np.testing.assert_allclose(hessians[k], hess, atol=_tol(xs, 2))
    # a batch inside one call: the determinants of a stack
    batched = tidu.hessian(lambda a: tnp.sum(det(a)), mode="FoR")(xs)
    for k, (_, hess) in enumerate(exact):
        np.testing.assert_allclose(batched[k, :, :, k], hess, atol=_tol(xs, 2))


def test_special_matrices():
    """The zero matrix (adjugate and Hessian 0 from 4 x 4), the identity, all ones
    (rank 1) and a badly scaled diagonal, exactly."""
    det = tnp.linalg.det
    for a in (np.zeros((4, 4)), np.eye(5), np.ones((4, 4))):
        grad, hess = _exact(a)
        np.testing.assert_allclose(tidu.grad(det)(a), grad, atol=1e-14)
        np.testing.assert_allclose(tidu.hessian(det)(a), hess, atol=1e-14)
    scaled = np.diag([1e20, 1.0, 3.0, 1e-20])
    scaled[0, 1] = 5.0
    want = np.linalg.det(scaled) * np.linalg.inv(scaled).T
    np.testing.assert_allclose(tidu.grad(det)(scaled), want, rtol=1e-14, atol=0)


def test_float32_singular_matrix():
    a = _rank_deficient(5, "dependent").astype(np.float32)
    grad, hess = _exact(a.astype(np.float64))
    g = tidu.grad(tnp.linalg.det)(a)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, grad, atol=1e-5 * np.max(np.abs(grad)))
    np.testing.assert_allclose(tidu.hessian(tnp.linalg.det)(a), hess, atol=1e-5 * np.max(np.abs(hess)))


@pytest.mark.parametrize("n", [4, 7])
def test_regular_matrices_match_jax(n):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    a = RNG.normal(size=(n, n))
    np.testing.assert_allclose(tidu.grad(tnp.linalg.det)(a), jax.grad(jnp.linalg.det)(a), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tidu.hessian(tnp.linalg.det)(a), jax.hessian(jnp.linalg.det)(a), atol=1e-11)
    c = a + 1j * RNG.normal(size=(n, n))
    got = tidu.grad(lambda x: tnp.real(tnp.linalg.det(x)))(c)
    np.testing.assert_allclose(got, np.conj(jax.grad(lambda x: jnp.real(jnp.linalg.det(x)))(c)), atol=1e-11)


@pytest.mark.parametrize("n,kind", [(4, "dependent"), (5, "two-dependent"), (5, "zero-column")],
                         ids=["4x4-dependent", "5x5-two-dependent", "5x5-zero-column"])
def test_xla_runs_the_derivatives(n, kind):
    """The lowered StableHLO (QR, solve and SVD) gives the exact derivatives on XLA too."""
    pytest.importorskip("jax")
    a = _rank_deficient(n, kind)
    grad, hess = _exact(a)
    for fn, want, power in ((tnp.linalg.det, np.linalg.det(a), n), (tidu.grad(tnp.linalg.det), grad, n - 1),
                            (tidu.hessian(tnp.linalg.det, mode="FoR"), hess, n - 2),
                            (tidu.hessian(tnp.linalg.det, mode="RoR"), hess, n - 2)):
        program = tidu.make_graph(fn)(a).program
        (got,) = program.run([a], backend="xla")
        np.testing.assert_allclose(got, want, atol=_tol(a, power))
