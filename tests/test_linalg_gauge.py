"""Gauge-dependent outputs and degenerate inputs of tidu's linear algebra against JAX
(x64), finite differences and exact minors: derivatives of gauge-invariant functions of
eigenvectors and singular vectors, singular vectors at a zero singular value, the
determinant at singular matrices, and tidu's documented gauge of the primal vectors."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402

RNG = np.random.default_rng(20261130)


def _orthogonal(n: int, rng: np.random.Generator = RNG) -> np.ndarray:
    return np.linalg.qr(rng.normal(size=(n, n)))[0]


def _with_singular_values(m: int, n: int, s: list[float], rng: np.random.Generator = RNG) -> np.ndarray:
    """U diag(s) V^T of shape (m, n) with random orthogonal U and V."""
    d = np.zeros((m, n))
    d[range(len(s)), range(len(s))] = s
    return _orthogonal(m, rng) @ d @ _orthogonal(n, rng).T


def _fd_grad(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


# --- singular vectors at a zero singular value -----------------------------------------

# (m, n) matrices with distinct singular values, the last 0 (rounded: about 1e-16): the
# vectors of a square matrix, U of a wide one and V of a tall one stay differentiable
# (the singular value is simple), and sum(w * U**2) does not depend on the phases
ZERO_SV = [((4, 4), 0), ((4, 4), 2), ((3, 5), 0), ((5, 3), 2)]


@pytest.mark.parametrize("shape,which", ZERO_SV, ids=["square-U", "square-Vh", "wide-U", "tall-Vh"])
def test_singular_vectors_at_a_zero_singular_value(shape, which):
    """The projector terms (I - U U^H) dx V / s vanish for a square U (and V); computed
    anyway, rounding times 1 / s (s about 1e-16) made the derivative wrong by O(1)."""
    m, n = shape
    k = min(m, n)
    x = _with_singular_values(m, n, [3.0, 2.0, 1.0, 0.0][-k:] if k == 4 else [3.0, 2.0, 0.0])
    w = RNG.normal(size=(m, k) if which == 0 else (k, n))

    def loss(lib):
        return lambda a: lib.sum(w * lib.linalg.svd(a, full_matrices=False)[which] ** 2)

    want = np.asarray(jax.grad(loss(jnp))(x))
    np.testing.assert_allclose(_fd_grad(lambda a: float(loss(jnp)(a)), x), want, atol=1e-7)
    np.testing.assert_allclose(tidu.grad(loss(tnp))(x), want, atol=1e-10)
    if shape == (4, 4):
        np.testing.assert_allclose(tidu.hessian(loss(tnp))(x), jax.hessian(loss(jnp))(x), atol=1e-9)


def test_svd_reconstruction_at_a_zero_singular_value_is_exact():
    """U diag(s) V^H is x: its derivative at a rank-deficient square matrix is the
    identity map, and U V^H's is JAX's (both differentiate the same formula)."""
    # a draw of its own: at s = 0 the signs of u_4 and v_4 are independent, so U V^H is
    # not a function of x and LAPACK's rounding picks it (tidu's and JAX's differ for
    # about a quarter of the draws); this one (checked below) picks the same as JAX
    rng = np.random.default_rng(0)
    x = _with_singular_values(4, 4, [3.0, 2.0, 1.0, 0.0], rng)
    w = rng.normal(size=(4, 4))

    def polar(lib):
        return lambda a: lib.sum(w * (lambda u, s, vh: u @ vh)(*lib.linalg.svd(a)))

    def recon(lib):
        return lambda a: lib.sum(w * (lambda u, s, vh: (u * s) @ vh)(*lib.linalg.svd(a)))

    np.testing.assert_allclose(tidu.grad(recon(tnp))(x), w, atol=1e-12)
    np.testing.assert_allclose(tidu.jit(polar(tnp))(x), polar(jnp)(x), atol=1e-12)  # the same U V^H
    np.testing.assert_allclose(tidu.grad(polar(tnp))(x), jax.grad(polar(jnp))(x), atol=1e-10)
    np.testing.assert_allclose(tidu.hessian(polar(tnp))(x), jax.hessian(polar(jnp))(x), atol=1e-9)


# --- the determinant at singular matrices -------------------------------------------------


def _adjugate_t(x: np.ndarray) -> np.ndarray:
    """d det / dx: the signed (n-1)-minors (the transposed adjugate)."""
    n = len(x)
    return np.array([[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(x, i, 0), j, 1)) for j in range(n)]
                     for i in range(n)])


def _det_hessian(x: np.ndarray) -> np.ndarray:
    """d2 det / dx_ij dx_kl: the signed (n-2)-minors."""
    n = len(x)
    h = np.zeros((n,) * 4)
    for i, j, k, l in np.ndindex(n, n, n, n):
        if i != k and j != l:
            rows = [r for r in range(n) if r not in (i, k)]
            cols = [c for c in range(n) if c not in (j, l)]
            sign = (-1) ** (i + j + k + l) * (1 if (i < k) == (j < l) else -1)
            h[i, j, k, l] = sign * np.linalg.det(x[np.ix_(rows, cols)])
    return h


def _low_rank(n: int, r: int) -> np.ndarray:
    return RNG.normal(size=(n, r)) @ RNG.normal(size=(r, n))


def _zero_column(n: int, col: int) -> np.ndarray:
    x = RNG.normal(size=(n, n))
    x[:, col] = 0
    return x


def _dependent_column(n: int, col: int) -> np.ndarray:
    x = RNG.normal(size=(n, n))
    x[:, col] = x[:, 0] - 2 * x[:, 1]
    return x


SINGULAR = {
    "4x4-rank3": _low_rank(4, 3),
    "4x4-rank2": _low_rank(4, 2),
    "5x5-rank4": _low_rank(5, 4),
    "5x5-rank2": _low_rank(5, 2),
    "5x5-zero-first-column": _zero_column(5, 0),
    "5x5-zero-middle-column": _zero_column(5, 2),
    "6x6-dependent-third-column": _dependent_column(6, 2),
    "batched": np.stack([_low_rank(4, 3), RNG.normal(size=(4, 4))]),
}


@pytest.mark.parametrize("name", list(SINGULAR))
def test_det_derivatives_at_singular_matrices(name):
    """The exact derivatives of det at singular matrices: the adjugate and the
    (n-2)-minors (JAX's gradient is wrong for a zero first or middle column). From 4 x 4
    they are no longer those of sign * exp(log|det|), which are nan at an exactly singular
    matrix and wrong by O(1) at a rounded one (tests/test_det_singular.py has more)."""
    x = SINGULAR[name]
    mats = x if x.ndim == 3 else x[None]
    f = lambda a: tnp.sum(tnp.linalg.det(a))  # noqa: E731
    grad = np.reshape(tidu.grad(f)(x), mats.shape)
    for g, a in zip(grad, mats, strict=True):
        np.testing.assert_allclose(g, _adjugate_t(a), atol=1e-12 * (1 + np.max(np.abs(a)) ** 3))
    if x.ndim == 2:
        want = _det_hessian(x)
        for mode in ("FoR", "RoR", "FoF", "RoF"):
            np.testing.assert_allclose(tidu.hessian(f, mode=mode)(x), want, atol=1e-11 * (1 + np.max(np.abs(x)) ** 2),
                                       err_msg=mode)
    np.testing.assert_allclose(tidu.jit(f)(x), np.sum(np.linalg.det(x)), atol=1e-12)


# --- gauge-invariant functions of the vectors, against JAX and finite differences ------


def _herm(lib, a, b):
    x = a + 1j * b
    return (x + lib.conj(lib.swapaxes(x, -1, -2))) / 2


W3 = RNG.normal(size=(3, 3)) + 1j * RNG.normal(size=(3, 3))

INVARIANT = {
    # the projector onto the first eigenvector of a complex Hermitian matrix
    "eigh-projector": lambda lib, a, b: lib.sum(lib.real(W3 * (lambda v: v[..., :, :1] @ lib.conj(
        lib.swapaxes(v[..., :, :1], -1, -2)))(lib.linalg.eigh(_herm(lib, a, b))[1]))),
    "eigh-abs2": lambda lib, a, b: lib.sum(lib.real(W3) * lib.abs(lib.linalg.eigh(_herm(lib, a, b))[1]) ** 2),
    "svd-polar": lambda lib, a, b: lib.sum(lib.real(W3 * (lambda u, s, vh: u @ vh)(*lib.linalg.svd(a + 1j * b)))),
    "svd-u-abs2": lambda lib, a, b: lib.sum(lib.real(W3) * lib.abs(lib.linalg.svd(a + 1j * b)[0]) ** 2),
    "svd-tall-projector": lambda lib, a, b: lib.sum(lib.real(W3[:, :2] * (lambda u: u @ lib.conj(
        lib.swapaxes(u, -1, -2)))(lib.linalg.svd((a + 1j * b)[..., :, :2], full_matrices=False)[0])[..., :, :2])),
    "qr-projector": lambda lib, a, b: lib.sum(lib.real(W3 * (lambda q: q @ lib.conj(lib.swapaxes(q, -1, -2)))(
        lib.linalg.qr((a + 1j * b)[..., :, :2])[0]))),
    "norm-2-and-nuc": lambda lib, a, b: lib.sum(lib.linalg.norm(a + 1j * b, 2, axis=(-2, -1))
                                                + lib.linalg.norm(a - 1j * b, "nuc", axis=(-2, -1))),
}


@pytest.mark.parametrize("name", list(INVARIANT))
@pytest.mark.parametrize("batched", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["single", "batched"])
def test_gauge_invariant_functions_of_complex_vectors(name, batched):
    """Gradients (in the real and imaginary parts) and Hessians of functions that do not
    depend on the vectors' phases: JAX's, and the finite differences of JAX's values."""
    shape = (2, 3, 3) if batched else (3, 3)
    a, b = RNG.normal(size=shape), RNG.normal(size=shape)
    f = INVARIANT[name]
    ft, fj = (lambda a, b: f(tnp, a, b)), (lambda a, b: f(jnp, a, b))
    got = tidu.grad(ft, argnums=(0, 1))(a, b)
    want = jax.grad(fj, argnums=(0, 1))(a, b)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, atol=1e-10)
    np.testing.assert_allclose(got[0], _fd_grad(lambda x: float(fj(x, b)), a), atol=1e-6)
    if not batched:
        np.testing.assert_allclose(tidu.hessian(ft)(a, b), jax.hessian(fj)(a, b), atol=1e-9)


# --- the primal gauge -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "complex128", "float32"])
def test_primal_vectors_are_jaxs_up_to_the_documented_phases(dtype):
    """tidu's eigenvectors and singular vectors are JAX's (LAPACK's) times unit phases,
    chosen so that each eigenvector's (each row of Vh's) first component is real and >= 0
    (docs/linalg.md, gauge-dependent outputs): the same subspaces, another gauge."""
    tol = 1e-10 if dtype != "float32" else 1e-4
    x = RNG.normal(size=(2, 4, 4))
    if dtype == "complex128":
        x = x + 1j * RNG.normal(size=x.shape)
    x = x.astype(dtype)
    h = (x + np.conj(np.swapaxes(x, -1, -2))) / 2
    # (tidu's vectors, JAX's, the input, the axis a vector runs along)
    cases = ((lambda a: tnp.linalg.eigh(a)[1], lambda a: jnp.linalg.eigh(a)[1], h, -2),  # columns
             (lambda a: tnp.linalg.svd(a)[2], lambda a: jnp.linalg.svd(a)[2], x, -1))  # rows of Vh
    for fn, ref_fn, arg, axis in cases:
        ref = np.asarray(ref_fn(arg))
        for got in (np.asarray(fn(arg)), np.asarray(tidu.jit(fn)(arg))):
            head = np.take(got, 0, axis=axis)  # each vector's first component
            assert np.all(head.real >= 0) and np.allclose(head.imag, 0, atol=tol)
            # got = ref * phase, vector by vector: |<ref_j, got_j>| = 1
            np.testing.assert_allclose(np.abs(np.sum(np.conj(ref) * got, axis=axis)), 1, atol=tol)
