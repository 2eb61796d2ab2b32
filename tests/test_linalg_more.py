"""tidu.scipy.linalg's matrix exponential (expm, expm_frechet) and LU factorization (lu,
lu_factor, lu_solve), tnp.linalg's general eigenproblem (eig, eigvals) and tnp.roots: values against
SciPy/NumPy, first derivatives (jvp, grad) and a second
derivative (jvp of grad) against JAX (float64/complex128, CPU), eager and traced alike,
batched (leading axes and tidu.vmap), the primitives run in XLA, clear errors."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest
import scipy.linalg as sl
from vmap_util import assert_default_applies_every_rule

import tidu
import tidu.numpy as tnp
import tidu.scipy.linalg as tsl

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jax.scipy.linalg as jsl  # noqa: E402

DTYPES = ["float64", "complex128"]
SHAPES = [(3, 3), (2, 3, 3)]


def _rand(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, scale: float = 1.0) -> np.ndarray:
    x = rng.normal(size=shape) * scale
    if dtype.startswith("complex"):
        x = x + 1j * rng.normal(size=shape) * scale
    return x.astype(dtype)


def close(x, y, tol=1e-10):
    x, y = np.asarray(x), np.asarray(y)
    assert x.shape == y.shape, (x.shape, y.shape)
    np.testing.assert_allclose(x, y, rtol=tol, atol=tol * (1 + np.max(np.abs(y), initial=0)))


def _per_matrix(fn, *xs):
    """fn applied to each matrix of a batch (SciPy's functions that take one matrix)."""
    lead = xs[0].shape[:-2]
    if not lead:
        return fn(*xs)
    flat = [x.reshape((-1,) + x.shape[-2:]) for x in xs]
    outs = [fn(*parts) for parts in zip(*flat, strict=True)]
    return np.stack(outs).reshape(lead + np.shape(outs[0]))


def check_derivatives(f, g, a, rng, tol=1e-9):
    """tidu's jvp, grad (of sum Re(conj(w) f)) and jvp of grad against JAX's (g; one jit,
    one XLA compilation). tidu's gradient with respect to complex values is the conjugate
    of JAX's."""
    dtype = a.dtype.name
    t = _rand(rng, a.shape, dtype)
    out = jax.eval_shape(g, a)
    w = _rand(rng, out.shape, "complex128" if np.dtype(out.dtype).kind == "c" else "float64")
    loss_t = lambda x: tnp.sum(tnp.real(tnp.conj(w) * f(x)))  # noqa: E731
    loss_j = lambda x: jnp.sum(jnp.real(jnp.conj(w) * g(x)))  # noqa: E731
    (value_j, tangent_j), grad_j, hv_j = jax.jit(lambda a: (jax.jvp(g, (a,), (t,)), jax.grad(loss_j)(a),
                                                            jax.jvp(jax.grad(loss_j), (a,), (t,))[1]))(a)
    value, tangent = tidu.jvp(f, (a,), (t,))
    close(value, value_j, tol)
    close(tangent, tangent_j, tol)
    close(tidu.grad(loss_t)(a), np.conj(grad_j), tol)
    close(tidu.jvp(tidu.grad(loss_t), (a,), (t,))[1], np.conj(hv_j), 10 * tol)


def run_in_xla(f, *args):
    from tidu.lowering.xla import run_xla

    program = tidu.make_graph(f)(*args).program
    return run_xla(program, list(args))


# --- expm ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_expm_values_eager_traced_vmap(shape, dtype):
    rng = np.random.default_rng(0)
    a = _rand(rng, shape, dtype)
    want = sl.expm(a)
    close(tsl.expm(a), want, 1e-14)  # eager: SciPy's
    close(tidu.jit(tsl.expm)(a), want, 1e-14)
    close(tidu.vmap(tsl.expm)(a[None])[0], want, 1e-14)
    assert tidu.jit(tsl.expm)(a).dtype == a.dtype


# JAX's derivatives of expm take seconds to compile: one case in the default run
DERIVATIVE_CASES = [pytest.param(s, d, id=f"{'x'.join(map(str, s))}-{d}",
                                 marks=() if (s, d) == ((2, 3, 3), "complex128") else pytest.mark.slow)
                    for s in SHAPES for d in DTYPES]


@pytest.mark.parametrize("shape,dtype", DERIVATIVE_CASES)
def test_expm_derivatives_against_jax(shape, dtype):
    rng = np.random.default_rng(1)
    check_derivatives(tsl.expm, jsl.expm, _rand(rng, shape, dtype), rng)


def test_expm_frechet_against_scipy_and_jax():
    rng = np.random.default_rng(2)
    for dtype in DTYPES:
        a, e = _rand(rng, (3, 3), dtype), _rand(rng, (3, 3), dtype)
        want_x, want_l = sl.expm_frechet(a, e)
        for fn in (tsl.expm_frechet, tidu.jit(tsl.expm_frechet)):
            x, lf = fn(a, e)
            close(x, want_x, 1e-13)
            close(lf, want_l, 1e-13)
        close(tidu.jit(lambda a, e: tsl.expm_frechet(a, e, compute_expm=False))(a, e), want_l, 1e-13)
        # batched (SciPy's takes one matrix), eager and traced
        ab, eb = _rand(rng, (2, 3, 3), dtype), _rand(rng, (2, 3, 3), dtype)
        want = _per_matrix(lambda x, y: sl.expm_frechet(x, y, compute_expm=False), ab, eb)
        close(tsl.expm_frechet(ab, eb, compute_expm=False), want, 1e-13)
        close(tidu.jit(lambda x, y: tsl.expm_frechet(x, y, compute_expm=False))(ab, eb), want, 1e-13)


@pytest.mark.slow
def test_expm_frechet_derivatives_against_jax():
    """In A and in E, against JAX's expm_frechet (real matrices)."""
    rng = np.random.default_rng(6)
    a, e = _rand(rng, (3, 3), "float64"), _rand(rng, (3, 3), "float64")
    check_derivatives(lambda x: tsl.expm_frechet(x, e, compute_expm=False),
                      lambda x: jsl.expm_frechet(x, e, compute_expm=False), a, rng)
    check_derivatives(lambda y: tsl.expm_frechet(a, y, compute_expm=False),
                      lambda y: jsl.expm_frechet(a, y, compute_expm=False), e, rng)


def test_expm_frechet_is_the_jvp_and_its_adjoint():
    """jvp(expm) = L(A, E); vjp(expm)(C) = L(A^H, C) (the Frechet derivative's adjoint)."""
    rng = np.random.default_rng(3)
    a, e, c = (_rand(rng, (2, 3, 3), "complex128") for _ in range(3))
    close(tidu.jvp(tsl.expm, (a,), (e,))[1], tsl.expm_frechet(a, e, compute_expm=False), 1e-12)
    _, pull = tidu.vjp(tsl.expm, a)
    close(pull(c)[0], tsl.expm_frechet(np.conj(np.swapaxes(a, -1, -2)), c, compute_expm=False), 1e-12)


def test_expm_large_small_and_degenerate():
    rng = np.random.default_rng(4)
    big = _rand(rng, (3, 3), "float64", 20.0)  # norm ~ 60: several squarings
    batch = np.stack([big, 1e-3 * big, np.zeros((3, 3))])  # each matrix its own squaring count
    close(tidu.jit(tsl.expm)(batch), sl.expm(batch), 1e-12)
    close(run_in_xla(tsl.expm, batch)[0], sl.expm(batch), 1e-12)
    nilpotent = np.triu(rng.normal(size=(4, 4)), 1)
    close(run_in_xla(tsl.expm, nilpotent)[0], sl.expm(nilpotent), 1e-13)
    out = run_in_xla(tsl.expm, np.array([[np.nan, 0.0], [0.0, 1.0]]))[0]
    assert np.isnan(out).any()


def test_expm_errors_name_the_argument():
    for fn in (tsl.expm, tidu.jit(tsl.expm)):
        with pytest.raises(ValueError, match="expm: A must be a square matrix"):
            fn(np.ones((3, 4)))
        with pytest.raises(ValueError, match="expm: A must be a square matrix"):
            fn(np.ones(3))
    with pytest.raises(ValueError, match="expm_frechet: E must be a square matrix"):
        tsl.expm_frechet(np.eye(3), np.ones((3, 2)))
    with pytest.raises(ValueError, match="expm_frechet: E must have A's matrix size"):
        tidu.jit(tsl.expm_frechet)(np.eye(3), np.eye(2))
    with pytest.raises(ValueError, match="method='pade'"):
        tsl.expm_frechet(np.eye(3), np.eye(3), method="pade")


# --- LU -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES + [(2, 1, 4, 4)], ids=lambda s: "x".join(map(str, s)))
def test_lu_values_eager_traced_vmap(shape, dtype):
    rng = np.random.default_rng(10)
    a = _rand(rng, shape, dtype)
    want = [_per_matrix(lambda x, k=k: sl.lu(x)[k], a) for k in range(3)]
    want_factor = [_per_matrix(lambda x, k=k: sl.lu_factor(x)[k], a) for k in range(2)]
    for fn in (tsl.lu, tidu.jit(tsl.lu), lambda x: tidu.vmap(tsl.lu)(x[None])):
        got = fn(a)
        for g, w in zip(got, want, strict=True):
            close(np.reshape(g, w.shape), w, 1e-13)
    for fn in (tsl.lu_factor, tidu.jit(tsl.lu_factor)):
        lu_, piv = fn(a)
        close(lu_, want_factor[0], 1e-13)
        assert piv.dtype == np.int32
        np.testing.assert_array_equal(piv, want_factor[1])
    pl, u = tidu.jit(lambda x: tsl.lu(x, permute_l=True))(a)
    close(pl, want[0] @ want[1], 1e-13)
    close(pl @ u, a, 1e-12)


@pytest.mark.parametrize("trans", [0, 1, 2, "T"])
def test_lu_solve_against_scipy(trans):
    rng = np.random.default_rng(11)
    mode = {"T": 1}.get(trans, trans)  # SciPy's lu_solve takes the numbers
    for dtype in DTYPES:
        a = _rand(rng, (4, 4), dtype)
        for b in (_rand(rng, (4, 2), dtype), _rand(rng, (4,), dtype)):
            want = sl.lu_solve(sl.lu_factor(a), b, trans=mode)
            close(tsl.lu_solve(tsl.lu_factor(a), b, trans=trans), want, 1e-12)
            close(tidu.jit(lambda a, b: tsl.lu_solve(tsl.lu_factor(a), b, trans=trans))(a, b), want, 1e-12)
            close(tsl.lu_solve(sl.lu_factor(a), b, trans=mode), want, 1e-12)  # SciPy's factors
    # batched factors, broadcast right-hand sides; vectors (..., n) as in jax.scipy.linalg
    a, b = _rand(rng, (2, 3, 3), "complex128"), _rand(rng, (1, 3, 2), "complex128")
    want = np.stack([sl.lu_solve(sl.lu_factor(x), b[0], trans=mode) for x in a])
    close(tidu.jit(lambda a, b: tsl.lu_solve(tsl.lu_factor(a), b, trans=trans))(a, b), want, 1e-12)
    v = _rand(rng, (2, 3), "complex128")
    want = np.stack([sl.lu_solve(sl.lu_factor(x), y, trans=mode) for x, y in zip(a, v, strict=True)])
    close(tidu.jit(lambda a, v: tsl.lu_solve(tsl.lu_factor(a), v, trans=trans))(a, v), want, 1e-12)
    close(tidu.vmap(lambda a, v: tsl.lu_solve(tsl.lu_factor(a), v, trans=trans))(a, v), want, 1e-12)


# tidu function, JAX function: the factors enter through smooth functions (p is piecewise constant)
LU_CASES = {
    "l_u": (lambda x: (lambda r: r[1] * 2.0 + r[2])(tsl.lu(x)), lambda x: (lambda r: r[1] * 2.0 + r[2])(jsl.lu(x))),
    "permute_l": (lambda x: tsl.lu(x, permute_l=True)[0], lambda x: jsl.lu(x, permute_l=True)[0]),
    "lu_factor": (lambda x: tsl.lu_factor(x)[0], lambda x: jsl.lu_factor(x)[0]),
    **{f"lu_solve_{t}": (lambda x, t=t: tsl.lu_solve(tsl.lu_factor(x), x[..., :2] * 0.5 + 1.0, trans=t),
                         lambda x, t=t: jsl.lu_solve(jsl.lu_factor(x), x[..., :2] * 0.5 + 1.0, trans=t))
       for t in (0, 1, 2)},
}
_LU_FAST = {("l_u", (2, 3, 3), "complex128")}  # JAX compiles for seconds: one case by default
LU_DERIVATIVE_CASES = [pytest.param(c, s, d, id=f"{c}-{'x'.join(map(str, s))}-{d}",
                                    marks=() if (c, s, d) in _LU_FAST else pytest.mark.slow)
                       for c in LU_CASES for s in SHAPES for d in DTYPES]


@pytest.mark.parametrize("case,shape,dtype", LU_DERIVATIVE_CASES)
def test_lu_derivatives_against_jax(case, shape, dtype):
    rng = np.random.default_rng(12)
    f, g = LU_CASES[case]
    a = _rand(rng, shape, dtype)  # random: rows are interchanged
    assert not np.all(tsl.lu_factor(a)[1] == np.arange(shape[-1]))
    check_derivatives(f, g, a, rng)


def test_lu_gradient_program_runs_in_xla():
    rng = np.random.default_rng(13)
    a, b = _rand(rng, (2, 3, 3), "complex128"), _rand(rng, (2, 3, 2), "complex128")

    def f(x):
        p, low, up = tsl.lu(x)
        return (tnp.sum(tnp.abs(tsl.lu_solve(tsl.lu_factor(x), b, trans=2)) ** 2)
                + tnp.sum(tnp.real(p @ low * tnp.conj(up))))

    g = tidu.grad(f)
    close(run_in_xla(g, a)[0], g(a), 1e-12)
    close(run_in_xla(tsl.lu, a)[0], tsl.lu(a)[0], 0)


@pytest.mark.filterwarnings("ignore::scipy.linalg.LinAlgWarning")
def test_lu_singular_and_rectangular():
    singular = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    want = sl.lu_factor(singular)
    for fn in (tsl.lu_factor, tidu.jit(tsl.lu_factor)):
        lu_, piv = fn(singular)
        close(lu_, want[0], 1e-14)
        np.testing.assert_array_equal(piv, want[1])
    close(run_in_xla(lambda x: tsl.lu_factor(x)[0], singular)[0], want[0], 1e-14)
    assert not np.all(np.isfinite(tidu.jit(lambda x: tsl.lu_solve(tsl.lu_factor(x), np.ones(3)))(singular)))



@pytest.mark.parametrize("shape", [(4, 2), (2, 4)] + [pytest.param(s, marks=pytest.mark.slow)
                                                       for s in ((2, 5, 3), (2, 3, 5))],
                         ids=lambda s: "x".join(map(str, s)))
def test_lu_rectangular(shape):
    """(m, n) matrices: p (m, m), l (m, k), u (k, n), k = min(m, n); pivots (k,)."""
    rng = np.random.default_rng(14)
    a = _rand(rng, shape, "complex128")
    want = [_per_matrix(lambda x, i=i: sl.lu(x)[i], a) for i in range(3)]
    for fn in (tsl.lu, tidu.jit(tsl.lu)):
        for g, w in zip(fn(a), want, strict=True):
            close(g, w, 1e-13)
    for g, w in zip(tidu.jit(tsl.lu_factor)(a), [_per_matrix(lambda x, i=i: sl.lu_factor(x)[i], a)
                                                for i in range(2)], strict=True):
        close(g, w, 1e-13)
    for g, w in zip(run_in_xla(tsl.lu, a), want, strict=True):
        close(g, w, 1e-13)
    t = _rand(rng, shape, "complex128")
    for k in (1, 2):  # l, u
        close(tidu.jvp(lambda x, k=k: tsl.lu(x)[k], (a,), (t,))[1],
              jax.jit(jax.jvp, static_argnums=0)(lambda x, k=k: jsl.lu(x)[k], (a,), (t,))[1], 1e-10)


def test_lu_errors_name_the_argument():
    a = np.eye(3)
    with pytest.raises(ValueError, match="lu_solve: trans=3"):
        tsl.lu_solve(tsl.lu_factor(a), np.ones(3), trans=3)
    with pytest.raises(ValueError, match="lu_solve: trans='X'"):
        tidu.jit(lambda a: tsl.lu_solve(tsl.lu_factor(a), np.ones(3), trans="X"))(a)
    with pytest.raises(TypeError, match="takes \\(lu, piv\\)"):
        tsl.lu_solve(a, np.ones(3))
    with pytest.raises(ValueError, match="lu_solve: piv must be integers"):
        tsl.lu_solve((a, np.zeros(3)), np.ones(3))
    with pytest.raises(ValueError, match="lu_solve: b must be"):
        tidu.jit(lambda a: tsl.lu_solve(tsl.lu_factor(a), np.ones(4)))(a)
    with pytest.raises(ValueError, match="lu_solve: lu must be a square matrix"):
        tsl.lu_solve((np.ones((3, 2)), np.zeros(3, np.int32)), np.ones(3))
    with pytest.raises(ValueError, match="lu_factor: a must be a matrix"):
        tsl.lu_factor(np.ones(3))


# --- eig, eigvals ---------------------------------------------------------------------------


def _sorted_order(w):
    """The permutation sorting eigenvalues by real part, then imaginary part (tidu's order)."""
    w = np.asarray(w)
    return np.lexsort((w.imag, w.real), axis=-1)


def _tidus_gauge(a):
    """The permutation putting JAX's eigenvalues at a (LAPACK's order) in tidu's order, and
    the phases taking its vectors to tidu's gauge."""
    w, v = jax.lax.linalg.eig(a, compute_left_eigenvectors=False, enable_eigvec_derivs=True)
    order = _sorted_order(w)
    v = np.take_along_axis(np.asarray(v), order[..., None, :], axis=-1)
    top = np.take_along_axis(v, np.argmax(np.abs(v), axis=-2)[..., None, :], axis=-2)
    phase = np.conj(top) / np.abs(top)  # +-1 for real matrices; 1 for complex ones (geev's gauge)
    return order, phase


def _eig_values_in(x, order):
    return jnp.take_along_axis(jax.lax.linalg.eig(x, compute_left_eigenvectors=False,
                                                  enable_eigvec_derivs=True)[0], order, axis=-1)


def _eig_vectors_in(x, order, phase):
    vx = jax.lax.linalg.eig(x, compute_left_eigenvectors=False, enable_eigvec_derivs=True)[1]
    return jnp.take_along_axis(vx, order[..., None, :], axis=-1) * phase


def _jax_eig_in_tidus_gauge(a):
    """JAX's eigenvalues and vectors (LAPACK's order and phases) as functions of x near a
    in tidu's order and gauge: the permutation and the real vectors' signs are locally
    constant, so they are read off at a."""
    order, phase = _tidus_gauge(a)
    return (lambda x: _eig_values_in(x, order)), (lambda x: _eig_vectors_in(x, order, phase))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES + [(2, 1, 4, 4)], ids=lambda s: "x".join(map(str, s)))
def test_eig_values_eager_traced_vmap(shape, dtype):
    rng = np.random.default_rng(20)
    a = _rand(rng, shape, dtype)
    values, vectors = _jax_eig_in_tidus_gauge(a)
    want_w, want_v = np.asarray(values(a)), np.asarray(vectors(a))
    # NumPy's eigenvalues, sorted
    np_w = np.linalg.eigvals(a).astype(complex)
    close(np.take_along_axis(np_w, _sorted_order(np_w), axis=-1), want_w, 1e-12)
    for fn in (tnp.linalg.eig, tidu.jit(tnp.linalg.eig), lambda x: tidu.vmap(tnp.linalg.eig)(x[None])):
        w, v = fn(a)
        close(np.reshape(w, want_w.shape), want_w, 1e-12)
        close(np.reshape(v, want_v.shape), want_v, 1e-10)
    for fn in (tnp.linalg.eigvals, tidu.jit(tnp.linalg.eigvals)):
        close(fn(a), want_w, 1e-12)
    w, v = tidu.jit(tnp.linalg.eig)(a)
    assert type(w) is type(tnp.linalg.eig(a)[0]) and w.dtype == np.complex128 and v.dtype == np.complex128
    assert type(tnp.linalg.eig(a)) is type(tidu.jit(tnp.linalg.eig)(a)) is type(np.linalg.eig(np.eye(2)))
    close(a @ v, v * w[..., None, :], 1e-12)
    close(np.linalg.norm(v, axis=-2), np.ones(w.shape), 1e-13)


EIG_CASES = ["eigvals", "eig_vectors", "abs2_vectors"]
_EIG_FAST = {("eig_vectors", (2, 3, 3), "complex128")}  # JAX compiles for seconds: one case by default
EIG_DERIVATIVE_CASES = [pytest.param(c, s, d, id=f"{c}-{'x'.join(map(str, s))}-{d}",
                                     marks=() if (c, s, d) in _EIG_FAST else pytest.mark.slow)
                        for c in EIG_CASES for s in SHAPES for d in DTYPES]


@pytest.mark.parametrize("case,shape,dtype", EIG_DERIVATIVE_CASES)
def test_eig_derivatives_against_jax(case, shape, dtype):
    rng = np.random.default_rng(21)
    a = _rand(rng, shape, dtype)
    values, vectors = _jax_eig_in_tidus_gauge(a)
    f, g = _eig_case(case, values, vectors)
    check_derivatives(f, g, a, rng, tol=1e-8)


def _eig_case(case, values, vectors):
    """tidu's function of EIG_CASES and JAX's (of JAX's eigenvalues and vectors in tidu's gauge)."""
    return {"eigvals": (tnp.linalg.eigvals, values),
            "eig_vectors": (lambda x: tnp.linalg.eig(x)[1], vectors),
            "abs2_vectors": (lambda x: tnp.abs(tnp.linalg.eig(x)[1]) ** 2, lambda x: jnp.abs(vectors(x)) ** 2)}[case]


def test_eig_vector_jvp_is_the_derivative_of_the_returned_vectors():
    """jvp of the eigenvectors = central differences of the very vectors tnp.linalg.eig
    returns, eager (the gauge is a function of the matrix)."""
    rng = np.random.default_rng(22)
    for dtype in DTYPES:
        a, t = _rand(rng, (2, 4, 4), dtype), _rand(rng, (2, 4, 4), dtype)
        h = 1e-6
        fd = (tnp.linalg.eig(a + h * t)[1] - tnp.linalg.eig(a - h * t)[1]) / (2 * h)
        close(tidu.jvp(lambda x: tnp.linalg.eig(x)[1], (a,), (t,))[1], fd, 1e-6)


def test_eig_gradient_program_runs_in_xla_and_degenerate_inputs():
    rng = np.random.default_rng(23)
    a = _rand(rng, (2, 3, 3), "float64")

    def f(x):
        w, v = tnp.linalg.eig(x)
        return tnp.sum(tnp.real(w * w)) + tnp.sum(tnp.abs(v[..., 0, :]) ** 2)

    g = tidu.grad(f)
    close(run_in_xla(g, a)[0], g(a), 1e-11)
    # repeated eigenvalues: the values are fine, the vectors have no derivative
    rep = np.diag([1.0, 1.0, 2.0]) + np.triu(np.ones((3, 3)), 2)
    t = rng.normal(size=(3, 3))
    assert np.all(np.isfinite(tidu.jvp(tnp.linalg.eigvals, (rep,), (np.diag([1.0, 2.0, 3.0]),))[1]))
    assert not np.all(np.isfinite(tidu.jvp(lambda x: tnp.linalg.eig(x)[1], (rep,), (t,))[1]))


def test_eig_errors_name_the_argument():
    for fn in (tnp.linalg.eig, tnp.linalg.eigvals, tidu.jit(tnp.linalg.eig), tidu.jit(tnp.linalg.eigvals)):
        with pytest.raises(ValueError, match="linalg.eig(vals)?: a must be a square matrix"):
            fn(np.ones((2, 3)))


# --- roots ----------------------------------------------------------------------------------


def _jax_roots_sorted(p):
    """JAX's roots of p (no leading zeros) as a function near p, in tidu's order: the
    eigenvalues of the companion matrix with enable_eigvec_derivs (jnp.roots has no second
    derivative), permuted by the locally constant sorting permutation."""
    def companion_roots(c):
        n = c.shape[0] - 1
        a = jnp.concatenate([(-c[1:] / c[0])[None, :], jnp.eye(n - 1, n, dtype=c.dtype)], axis=0)
        return jax.lax.linalg.eig(a, compute_left_eigenvectors=False, enable_eigvec_derivs=True)[0]

    order = _sorted_order(companion_roots(jnp.asarray(p)))
    return lambda c: companion_roots(c)[order]


@pytest.mark.parametrize("dtype", DTYPES)
def test_roots_values_and_leading_zeros(dtype):
    rng = np.random.default_rng(30)
    p = _rand(rng, (6,), dtype)
    want = np.sort_complex(np.roots(p).astype(complex))
    for got in (tnp.roots(p), tidu.jit(lambda p: tnp.roots(p, strip_zeros=False))(p),
                tnp.roots(p, strip_zeros=False)):
        close(got, want, 1e-11)
    close(np.sort_complex(np.asarray(jnp.roots(p))), want, 1e-11)
    # leading zeros: stripped (NumPy values), else a nan root each at the end (as JAX)
    z = np.concatenate([np.zeros(2, dtype), p[:4]])
    close(tnp.roots(z), np.sort_complex(np.roots(p[:4]).astype(complex)), 1e-11)
    got = tidu.jit(lambda p: tnp.roots(p, strip_zeros=False))(z)
    want = np.asarray(jnp.roots(z, strip_zeros=False))
    assert np.isnan(got[-2:]).all() and np.isnan(want[-2:]).all()
    close(got[:-2], np.sort_complex(want[:-2]), 1e-11)
    assert np.isnan(tidu.jit(lambda p: tnp.roots(p, strip_zeros=False))(np.zeros(3))).all()
    assert tnp.roots(np.array([2.0])).shape == (0,) and tnp.roots(np.zeros(4)).shape == (0,)
    # batched under vmap (strip_zeros=False), and in XLA
    ps = _rand(rng, (3, 5), dtype)
    want = np.stack([np.sort_complex(np.roots(q).astype(complex)) for q in ps])
    close(tidu.vmap(lambda q: tnp.roots(q, strip_zeros=False))(ps), want, 1e-11)
    close(run_in_xla(lambda q: tnp.roots(q, strip_zeros=False), ps[0])[0], want[0], 1e-11)


@pytest.mark.parametrize("dtype", [pytest.param("float64", marks=pytest.mark.slow), "complex128"])
def test_roots_derivatives_against_jax(dtype):
    rng = np.random.default_rng(31)
    p = _rand(rng, (5,), dtype)
    check_derivatives(lambda c: tnp.roots(c, strip_zeros=False), _jax_roots_sorted(p), p, rng, tol=1e-8)


def test_roots_errors():
    with pytest.raises(ValueError, match="roots: p must be 1-D"):
        tnp.roots(np.ones((2, 3)))
    with pytest.raises(ValueError, match="strip_zeros=False under a transform"):
        tidu.jit(tnp.roots)(np.ones(3))


TENSORSOLVE_SHAPES = (2, 3, 6), (2, 3)  # a, b; tensorinv's a: (6, 2, 3), ind=1


def test_tensorinv_tensorsolve_against_numpy_and_jax():
    """jax.numpy builds them on LU (inv, solve); tidu on its solve."""
    rng = np.random.default_rng(33)
    for dtype in DTYPES:
        a, b = _rand(rng, TENSORSOLVE_SHAPES[0], dtype), _rand(rng, TENSORSOLVE_SHAPES[1], dtype)
        for fn in (tnp.linalg.tensorsolve, tidu.jit(tnp.linalg.tensorsolve)):
            close(fn(a, b), np.linalg.tensorsolve(a, b), 1e-12)
        moved = np.moveaxis(a, 2, 0)
        close(tidu.jit(lambda a, b: tnp.linalg.tensorsolve(a, b, axes=(0,)))(moved, b),
              np.linalg.tensorsolve(moved, b, axes=(0,)), 1e-12)
        for fn in (tnp.linalg.tensorinv, tidu.jit(lambda a: tnp.linalg.tensorinv(a, ind=1))):
            close(fn(a.reshape(6, 2, 3), ind=1) if fn is tnp.linalg.tensorinv else fn(a.reshape(6, 2, 3)),
                  np.linalg.tensorinv(a.reshape(6, 2, 3), ind=1), 1e-12)
    a, b = _rand(rng, TENSORSOLVE_SHAPES[0], "float64"), _rand(rng, TENSORSOLVE_SHAPES[1], "float64")
    g = tidu.grad(lambda x: tnp.sum(tnp.sin(tnp.linalg.tensorsolve(x, b))))(a)
    close(g, jax.jit(jax.grad(lambda x: jnp.sum(jnp.sin(jnp.linalg.tensorsolve(x, b)))))(a), 1e-10)
    with pytest.raises(ValueError, match="tensorinv: a's first ind=2 axes"):
        tnp.linalg.tensorinv(np.ones((2, 3)))
    with pytest.raises(ValueError, match="tensorsolve: a \\(2, 3, 4\\)"):
        tidu.jit(tnp.linalg.tensorsolve)(np.ones((2, 3, 4)), np.ones((2, 3)))


def test_scipy_svdvals_and_eig_of_non_finite_matrices():
    rng = np.random.default_rng(32)
    a = _rand(rng, (2, 4, 3), "complex128")
    close(tidu.jit(tsl.svdvals)(a), sl.svdvals(a), 1e-13)
    bad = np.stack([np.array([[np.nan, 1.0], [1.0, 0.0]]), np.array([[2.0, 1.0], [1.0, 0.0]])])
    for w, v in (tnp.linalg.eig(bad), run_in_xla(tnp.linalg.eig, bad)):  # nan per matrix, no LAPACK error
        assert np.isnan(w[0]).all() and np.isnan(v[0]).all()
        close(w[1], np.sort(np.linalg.eigvalsh(bad[1])).astype(complex), 1e-13)


# --- the primitives in XLA -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [pytest.param(d, marks=pytest.mark.slow) for d in ("float32", "float64", "complex64")]
                         + ["complex128"])
def test_primitives_run_in_xla(dtype):
    from xla_util import check, op

    from tidu.core.keys import Aval

    rng = np.random.default_rng(5)
    for shape in [(3, 3), (2, 4, 4)] if dtype != "complex128" else [(2, 4, 4)]:  # the default run: batched
        x = _rand(rng, shape, dtype, 2.0)
        e = _rand(rng, shape, dtype)
        a = Aval(shape, dtype)
        check(lambda b, x: [op(b, "expm", x)], [a], [x])
        check(lambda b, x, y: [op(b, "expm_frechet", x, y)], [a, a], [x, e])
        check(lambda b, x: [op(b, "lu", x), op(b, "lu_pivots", x),
                            op(b, "permutation_matrix", op(b, "lu_pivots", x))], [a], [x])
        wide = x[..., :2, :]
        check(lambda b, x: [op(b, "lu", x), op(b, "lu_pivots", x)], [Aval(wide.shape, dtype)], [wide])
        tall = np.swapaxes(wide, -1, -2).copy()
        check(lambda b, x: [op(b, "lu", x), op(b, "lu_pivots", x)], [Aval(tall.shape, dtype)], [tall])
        check(lambda b, x: [op(b, "eigvals", x), op(b, "eig_vectors", x)], [a], [x])
    pivots = np.array([[2, 1, 3, 3], [-1, 3, 7, 3]], np.int32)  # out of [0, n): no swap
    check(lambda b, p: [op(b, "permutation_matrix", p)], [Aval(pivots.shape, "int32")], [pivots])


# --- batched: tidu.vmap against jax.vmap ------------------------------------------------------


def _vmap(f, in_axes, jit):
    return tidu.jit(tidu.vmap(f, in_axes=in_axes)) if jit else tidu.vmap(f, in_axes=in_axes)


def _eig_pairs(case, dtype, axis, jit):
    """EIG_CASES (JAX's order and phases read off at each matrix and mapped with it):
    values and the gradient of sum Re(conj(w) f)."""
    rng = np.random.default_rng(24)
    a = _rand(rng, (2, 3, 3), dtype)  # two matrices; mapped along ``axis``
    order, phase = _tidus_gauge(a)
    f, _ = _eig_case(case, None, None)
    g = {"eigvals": lambda x, o, p: _eig_values_in(x, o), "eig_vectors": _eig_vectors_in,
         "abs2_vectors": lambda x, o, p: jnp.abs(_eig_vectors_in(x, o, p)) ** 2}[case]
    w = _rand(rng, jax.eval_shape(g, a[0], order[0], phase[0]).shape, "complex128")
    lt = lambda x: tnp.sum(tnp.real(tnp.conj(w) * f(x)))  # noqa: E731
    lj = lambda x, o, p: jnp.sum(jnp.real(jnp.conj(w) * g(x, o, p)))  # noqa: E731
    xs, axes = np.moveaxis(a, 0, axis), (axis, 0, 0)
    return [("value", _vmap(f, axis, jit), jax.vmap(g, in_axes=axes), [xs], [xs, order, phase], 1e-10),
            # tidu's complex gradient: the conjugate of JAX's
            ("gradient", _vmap(tidu.grad(lt), axis, jit), lambda *x: jnp.conj(jax.vmap(jax.grad(lj), in_axes=axes)(*x)),
             [xs], [xs, order, phase], 1e-8)]


def _tensor_pairs(name, dtype, axis, jit):
    """tensorsolve(a, b) and tensorinv(a, ind=1), two examples along ``axis``: values, and
    (float64, as above) the gradient of sum sin."""
    rng = np.random.default_rng(34)
    shapes = TENSORSOLVE_SHAPES if name == "tensorsolve" else ((6, 2, 3),)
    xs = [np.stack([_rand(rng, s, dtype) for _ in range(2)], axis=axis) for s in shapes]
    f, g = ((tnp.linalg.tensorsolve, jnp.linalg.tensorsolve) if name == "tensorsolve" else
            (lambda x: tnp.linalg.tensorinv(x, ind=1), lambda x: jnp.linalg.tensorinv(x, ind=1)))
    pairs = [("value", _vmap(f, axis, jit), jax.vmap(g, in_axes=axis), xs, xs, 1e-12)]
    if dtype == "float64":
        pairs.append(("gradient", _vmap(tidu.grad(lambda *x: tnp.sum(tnp.sin(f(*x)))), axis, jit),
                      jax.vmap(jax.grad(lambda *x: jnp.sum(jnp.sin(g(*x)))), in_axes=axis), xs, xs, 1e-10))
    return pairs


BATCHED = {**{"eigvals" if c == "eigvals" else f"eig-{c}": (_eig_pairs, c) for c in EIG_CASES},
           **{name: (_tensor_pairs, name) for name in ("tensorsolve", "tensorinv")}}


def batched_pairs(case, dtype, axis=0, jit=False):
    """The case under tidu.vmap and jax.vmap, as (what, tidu's, JAX's, tidu's arguments,
    JAX's arguments, tolerance)."""
    fn, name = BATCHED[case]
    return fn(name, dtype, axis, jit)


def check_batched(case, dtype, axis=0, jit=False):
    pairs = batched_pairs(case, dtype, axis, jit)
    wants = jax.jit(lambda *a: [p[2](*x) for p, x in zip(pairs, a, strict=True)])(*[p[4] for p in pairs])
    for (_, fn, _, xs, _, tol), want in zip(pairs, wants, strict=True):
        close(fn(*xs), want, tol)


# The default run: these cases (of _batched_params' ids): cases that together apply every
# batching rule, with every pattern of batched and unbatched operands, that the whole sweep
# applies (tests/vmap_util.py; test_the_default_batched_cases_apply_every_batching_rule, in
# the slow step, keeps it so). The slow step: every case, real and complex, mapped over
# axis 0 and over the last axis (under tidu.jit).
BATCHED_DEFAULT = ["eig-eig_vectors-complex128-axis0", "tensorsolve-float64-axis-1", "eigvals-float64-axis0",
                   "tensorinv-float64-axis0"]


def _batched_params():
    return [pytest.param(c, d, a, id=f"{c}-{d}-axis{a}",
                         marks=[] if f"{c}-{d}-axis{a}" in BATCHED_DEFAULT else [pytest.mark.slow])
            for c in BATCHED for d in DTYPES for a in (0, -1)]


@pytest.mark.parametrize("case,dtype,axis", _batched_params())
def test_vmap_against_jax(case, dtype, axis):
    check_batched(case, dtype, axis, jit=axis != 0)


@pytest.mark.slow
def test_the_default_batched_cases_apply_every_batching_rule():
    """Every batching rule, with every pattern of batched operands, that tidu.vmap applies
    in the whole sweep is applied by a case of BATCHED_DEFAULT (tidu's side only: traces)."""
    assert_default_applies_every_rule(_batched_params(), BATCHED_DEFAULT,
                                      lambda p: [fn(*xs) for _, fn, _, xs, _, _ in batched_pairs(*p.values)])
