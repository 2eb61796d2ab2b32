"""tnp.linalg.lstsq's derivatives at repeated singular values (identity, orthonormal
columns, a repeated pair) and pinv(hermitian=True) traced, against finite differences of
NumPy's np.linalg.lstsq / np.linalg.pinv and against exact formulas. lstsq was built on the
SVD's vectors, whose derivative is inf or nan (or wrong) where singular values repeat; it
is pinv(a) @ b now. pinv(a, hermitian=True) ignored hermitian when traced (NumPy reads
the lower triangle)."""

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp

B3 = np.array([0.3, 1.9, 0.4])
REPEATED = np.array([[6.0, 1, 0], [1, 6, 0], [0, 0, 7]])  # singular values 7, 7, 5
ORTHONORMAL = np.array([[1.0, 0], [0, 1], [0, 0]])  # tall, singular values 1, 1
H = 1e-6


def _fd(f, a, h=H):
    """Central differences of f (real values) at the real a, one per element of a:
    shape a.shape + f's shape."""
    g = np.zeros(a.shape + np.shape(f(a)))
    for idx in np.ndindex(a.shape):
        e = np.zeros_like(a)
        e[idx] = h
        g[idx] = (np.asarray(f(a + e)) - np.asarray(f(a - e))) / (2 * h)
    return g


def _fd_dir(f, a, t, h=H):
    return (np.asarray(f(a + h * t)) - np.asarray(f(a - h * t))) / (2 * h)


def _np_x(b, rcond=None):
    return lambda a: np.linalg.lstsq(a, b, rcond=rcond)[0]


def _close(got, want, rtol=1e-6, atol=1e-8):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


def _sum_x(b):
    return lambda a: tnp.sum(tnp.linalg.lstsq(a, b)[0])


# --- the repros ------------------------------------------------------------------------------


@pytest.mark.parametrize("a", [np.eye(3), REPEATED], ids=["identity", "repeated"])
def test_lstsq_gradient_at_repeated_singular_values_square(a):
    f = _sum_x(B3)
    # exact: x = a^-1 b, d sum(x) / da = -(a^-T 1) x^T
    x = np.linalg.solve(a, B3)
    want = -np.outer(np.linalg.solve(a.T, np.ones(3)), x)
    fd = _fd(lambda m: np.sum(np.linalg.lstsq(m, B3)[0]), a)
    _close(fd, want, rtol=1e-6)
    for how in (tidu.grad, tidu.jacfwd, tidu.jacrev):
        got = how(f)(a)
        assert np.all(np.isfinite(got)), how
        _close(got, want, rtol=1e-10, atol=1e-12)
    if a is REPEATED:
        _close(tidu.grad(f)(a)[:, 2], np.full(3, -0.4 / 49), rtol=1e-12)
    else:
        _close(tidu.grad(f)(a), np.tile(-B3, (3, 1)), rtol=1e-12)


def test_lstsq_gradient_tall_orthonormal_columns():
    f = _sum_x(B3)
    # FD of NumPy's lstsq is the oracle; at a = [I; 0], x = a^T b moves with a's third
    # row as d sum(x) / da[2, j] = b[2] (and with the top block as -b^T, as for the identity)
    want = _fd(lambda m: np.sum(np.linalg.lstsq(m, B3)[0]), ORTHONORMAL)
    _close(want[2], [0.4, 0.4], rtol=1e-6)
    _close(want[:2], [[-0.3, -1.9], [-0.3, -1.9]], rtol=1e-6)
    for how in (tidu.grad, tidu.jacfwd, tidu.jacrev):
        got = how(f)(ORTHONORMAL)
        assert np.all(np.isfinite(got)), how
        _close(got, want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("a", [np.eye(3), REPEATED, ORTHONORMAL, np.eye(3)[:2]],
                         ids=["identity", "repeated", "tall", "wide"])
def test_lstsq_jacobian_of_x_matches_numpy_fd(a):
    b = np.array([0.3, 1.9, 0.4, -1.1])[: a.shape[0]]
    want = _fd(_np_x(b), a)  # (m, n, n)
    want = np.moveaxis(want, (0, 1), (1, 2))  # (n, m, n): x's index first, as jacfwd
    jf = tidu.jacfwd(lambda m: tnp.linalg.lstsq(m, b)[0])(a)
    jr = tidu.jacrev(lambda m: tnp.linalg.lstsq(m, b)[0])(a)
    _close(jf, want, rtol=1e-6, atol=1e-8)
    _close(jr, jf, rtol=1e-12, atol=1e-14)


# --- values: NumPy's, eager and traced ---------------------------------------------------------


def _cases():
    rng = np.random.default_rng(20240611)
    sq = rng.normal(size=(3, 3)) + 3 * np.eye(3)
    tall = rng.normal(size=(5, 3))
    wide = rng.normal(size=(3, 5))
    cplx = rng.normal(size=(4, 3)) + 1j * rng.normal(size=(4, 3))
    return {
        "square": (sq, rng.normal(size=3)),
        "tall": (tall, rng.normal(size=5)),
        "wide": (wide, rng.normal(size=3)),
        "tall-matrix-b": (tall, rng.normal(size=(5, 2))),
        "wide-matrix-b": (wide, rng.normal(size=(3, 2))),
        "complex-tall": (cplx, rng.normal(size=4) + 1j * rng.normal(size=4)),
        "complex-wide": (cplx.T.copy(), rng.normal(size=(3, 2)) + 1j * rng.normal(size=(3, 2))),
        "identity": (np.eye(3), B3),
        "repeated": (REPEATED, B3),
        "orthonormal": (ORTHONORMAL, B3),
    }


CASES = _cases()


def _resid(a, b, x):
    r = (b if b.ndim == 2 else b[:, None]) - a @ (x if x.ndim == 2 else x[:, None])
    return np.sum(np.abs(r) ** 2, axis=0)


@pytest.mark.parametrize("case", list(CASES))
def test_lstsq_values_are_numpys(case):
    a, b = CASES[case]
    x, resid, rank, s = np.linalg.lstsq(a, b)
    for got in (tnp.linalg.lstsq(a, b), tidu.jit(lambda m, v: tnp.linalg.lstsq(m, v))(a, b)):
        _close(got[0], x, rtol=1e-12, atol=1e-13)
        _close(got[1], _resid(a, b, x), rtol=1e-10, atol=1e-12)  # always, per column (JAX's)
        if resid.size:  # NumPy's, where it gives one
            _close(got[1], resid, rtol=1e-10, atol=1e-12)
        assert int(got[2]) == rank
        _close(got[3], s, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("case", list(CASES))
def test_lstsq_derivatives_match_numpy_fd(case):
    a, b = CASES[case]
    rng = np.random.default_rng(5)
    t = rng.normal(size=a.shape) + (1j * rng.normal(size=a.shape) if np.iscomplexobj(a) else 0)
    want = _fd_dir(_np_x(b), a, t)
    fun = lambda m: tnp.linalg.lstsq(m, b)[0]  # noqa: E731
    _close(tidu.jvp(fun, (a,), (t,))[1], want, rtol=1e-6, atol=1e-8)
    # the VJP: grad of Re <w, x> (tidu's gradient of a real function of complex a is
    # d/dRe a + i d/dIm a), against the same directional derivative
    w = rng.normal(size=want.shape) + (1j * rng.normal(size=want.shape) if np.iscomplexobj(want) else 0)
    g = tidu.grad(lambda m: tnp.sum(tnp.real(tnp.conj(w) * fun(m))))(a)
    _close(np.sum(np.real(np.conj(g) * t)), np.sum(np.real(np.conj(w) * want)), rtol=1e-6, atol=1e-8)
    # and the residuals' derivative (a function of x)
    want_r = _fd_dir(lambda m: _resid(m, b, np.linalg.lstsq(m, b)[0]), a, t)
    _close(tidu.jvp(lambda m: tnp.linalg.lstsq(m, b)[1], (a,), (t,))[1], want_r, rtol=1e-6, atol=1e-8)


def test_lstsq_derivative_with_respect_to_b():
    for a in (REPEATED, ORTHONORMAL, CASES["wide"][0]):
        b = B3 if a.shape[0] == 3 else B3[: a.shape[0]]
        _close(tidu.jacfwd(lambda v, a=a: tnp.linalg.lstsq(a, v)[0])(b), np.linalg.pinv(a), rtol=1e-12, atol=1e-14)


# --- second order ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["identity", "repeated", "orthonormal", "tall", "wide"])
def test_lstsq_hessian_matches_fd_of_gradient(case):
    a, b = CASES[case]
    f = lambda m: tnp.sum(tnp.linalg.lstsq(m, b)[0] ** 2) + tnp.sum(tnp.linalg.lstsq(m, b)[1])  # noqa: E731
    g = tidu.grad(f)
    # the gradient itself against NumPy's
    np_f = lambda m: np.sum(np.linalg.lstsq(m, b)[0] ** 2) + np.sum(_resid(m, b, np.linalg.lstsq(m, b)[0]))  # noqa: E731
    _close(g(a), _fd(np_f, a), rtol=1e-6, atol=1e-7)
    hess = tidu.hessian(f)(a)
    assert np.all(np.isfinite(hess))
    want = np.moveaxis(_fd(g, a), (0, 1), (2, 3))  # d grad[i, j] / d a[k, l] at [i, j, k, l]
    _close(hess, want, rtol=1e-6, atol=1e-7)
    _close(hess, np.transpose(hess, (2, 3, 0, 1)), rtol=1e-10, atol=1e-12)  # symmetric
    _close(tidu.jacfwd(tidu.jacrev(f))(a), hess, rtol=1e-10, atol=1e-12)


def test_lstsq_hessian_square_exact():
    # f(a) = sum(x), x = a^-1 b: grad = -(a^-T 1) x^T, with its own exact derivative
    a = REPEATED
    hess = tidu.hessian(_sum_x(B3))(a)
    ai = np.linalg.inv(a)
    u, x = ai.T @ np.ones(3), ai @ B3
    # d grad[i, j] / d a[k, l] = (a^-T)_{ik} ... : d(-u x^T) with du = -a^-T da^T u, dx = -a^-1 da x
    want = np.zeros((3, 3, 3, 3))
    for k, l in np.ndindex(3, 3):
        da = np.zeros((3, 3))
        da[k, l] = 1
        du, dx = -ai.T @ da.T @ u, -ai @ da @ x
        want[:, :, k, l] = -(np.outer(du, x) + np.outer(u, dx))
    _close(hess, want, rtol=1e-10, atol=1e-12)


# --- batched, XLA, rcond --------------------------------------------------------------------------


def test_lstsq_vmap_with_repeated_singular_values():
    stack = np.stack([np.eye(3), REPEATED, CASES["square"][0]])
    f = _sum_x(B3)
    got = tidu.vmap(tidu.grad(f))(stack)
    for a, g in zip(stack, got, strict=True):
        _close(g, -np.outer(np.linalg.solve(a.T, np.ones(3)), np.linalg.solve(a, B3)), rtol=1e-10, atol=1e-12)
    xs = tidu.vmap(lambda m: tnp.linalg.lstsq(m, B3)[0])(stack)
    _close(xs, [np.linalg.lstsq(m, B3)[0] for m in stack], rtol=1e-12, atol=1e-13)


def test_lstsq_xla():
    pytest.importorskip("jax")
    for case in ("repeated", "orthonormal", "complex-tall", "wide-matrix-b"):
        a, b = CASES[case]
        got = tidu.jit(lambda m, v: tnp.linalg.lstsq(m, v), device="cpu")(a, b)
        want = np.linalg.lstsq(a, b)
        _close(got[0], want[0], rtol=1e-12, atol=1e-13)
        assert int(got[2]) == want[2]
    g = tidu.jit(tidu.grad(_sum_x(B3)), device="cpu")(REPEATED)
    _close(g[:, 2], np.full(3, -0.4 / 49), rtol=1e-12)
    _close(tidu.jit(tidu.hessian(_sum_x(B3)), device="cpu")(np.eye(3)), tidu.hessian(_sum_x(B3))(np.eye(3)),
           rtol=1e-12, atol=1e-14)


def test_lstsq_rcond_as_numpy():
    a = np.array([[1.0, 2], [2, 4], [0, 0]])  # rank 1
    full = np.array([[1.0, 2], [3, 4], [0, 1]])
    for m, rcond in ((a, None), (a, -1), (a, 0.0), (full, 0.5), (full, 1.0), (full, 2.0), (full, 1e-3)):
        want = np.linalg.lstsq(m, B3, rcond=rcond)
        for got in (tnp.linalg.lstsq(m, B3, rcond=rcond),
                    tidu.jit(lambda x, v, rcond=rcond: tnp.linalg.lstsq(x, v, rcond=rcond))(m, B3)):
            _close(got[0], want[0], rtol=1e-12, atol=1e-13)
            assert int(got[2]) == want[2], rcond
    # rcond 0.5 at a rank-1 a (rank locally constant, the dropped singular value 0):
    # the derivative is pinv's
    m = np.array([[1.0, 2], [3, 6], [-1, -2]])
    t = np.random.default_rng(3).normal(size=m.shape)
    got = tidu.jvp(lambda x: tnp.linalg.lstsq(x, B3, rcond=0.5)[0], (m,), (t,))[1]
    _close(got, _fd_dir(_np_x(B3, 0.5), m, t), rtol=1e-6, atol=1e-8)


# --- pinv(hermitian=True) ----------------------------------------------------------------------

HB = np.array([[2.0, 0.5], [1.5, 2.0]])
HC = np.array([[2.0 + 0.3j, 0.5 - 1j, 0.2j], [1.5 + 0.2j, -2.0 - 0.4j, 0.1], [0.3 - 0.7j, 1.0 + 1j, 3.0 + 5j]])


def _pinv_h(m):
    return tnp.linalg.pinv(m, hermitian=True)


def test_pinv_hermitian_repro():
    want = np.linalg.pinv(HB, hermitian=True)
    _close(want, [[8 / 7, -6 / 7], [-6 / 7, 8 / 7]], rtol=1e-12)
    for got in (_pinv_h(HB), tidu.jit(_pinv_h)(HB)):
        _close(got, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("a", [HB, HC, np.random.default_rng(8).normal(size=(2, 4, 4)),
                               np.array([[1.0, 5], [2, 1]])], ids=["real", "complex", "batched", "indefinite"])
def test_pinv_hermitian_traced_is_numpys(a):
    want = np.linalg.pinv(a, hermitian=True)
    _close(tidu.jit(_pinv_h)(a), want, rtol=1e-12, atol=1e-13)
    _close(tidu.jit(lambda m: tnp.linalg.pinv(m, rtol=1e-3, hermitian=True))(a),
           np.linalg.pinv(a, rtol=1e-3, hermitian=True), rtol=1e-12, atol=1e-13)
    if a.ndim == 3:  # one cut-off per matrix
        rtol = np.array([1e-3, 0.6])
        _close(tidu.jit(lambda m: tnp.linalg.pinv(m, rtol=rtol, hermitian=True))(a),
               np.linalg.pinv(a, rtol=rtol, hermitian=True), rtol=1e-12, atol=1e-13)


def test_pinv_hermitian_derivatives_are_the_eager_functions():
    weights = np.array([[1.0, 2], [3, 4]])
    f = lambda m: tnp.sum(_pinv_h(m) * weights)  # noqa: E731
    want = _fd(lambda m: np.sum(np.linalg.pinv(m, hermitian=True) * weights), HB)
    assert want[0, 1] == 0
    for how in (tidu.grad, tidu.jacfwd, tidu.jacrev):
        _close(how(f)(HB), want, rtol=1e-6, atol=1e-9)
    assert tidu.grad(f)(HB)[0, 1] == 0
    # complex: jvp along a complex direction, upper-triangle directions give 0
    rng = np.random.default_rng(9)
    t = rng.normal(size=HC.shape) + 1j * rng.normal(size=HC.shape)
    _close(tidu.jvp(_pinv_h, (HC,), (t,))[1], _fd_dir(lambda m: np.linalg.pinv(m, hermitian=True), HC, t),
           rtol=1e-6, atol=1e-8)
    up = np.triu(t, 1) + 1j * np.diag(rng.normal(size=3))  # strictly upper, and imaginary diagonal: not read
    np.testing.assert_array_equal(tidu.jvp(_pinv_h, (HC,), (up,))[1], 0)
    # the VJP: gradient of a real function, d/dRe + i d/dIm
    w = rng.normal(size=HC.shape) + 1j * rng.normal(size=HC.shape)
    g = tidu.grad(lambda m: tnp.sum(tnp.real(tnp.conj(w) * _pinv_h(m))))(HC)
    want_dir = _fd_dir(lambda m: np.sum(np.real(np.conj(w) * np.linalg.pinv(m, hermitian=True))), HC, t)
    _close(np.sum(np.real(np.conj(g) * t)), want_dir, rtol=1e-6, atol=1e-8)
    assert np.all(np.triu(g, 1) == 0) and np.all(np.imag(np.diag(g)) == 0)


def test_pinv_hermitian_hessian_and_xla():
    weights = np.array([[1.0, 2], [3, 4]])
    f = lambda m: tnp.sum(_pinv_h(m) ** 2 * weights)  # noqa: E731
    hess = tidu.hessian(f)(HB)
    _close(hess, np.moveaxis(_fd(tidu.grad(f), HB), (0, 1), (2, 3)), rtol=1e-6, atol=1e-8)
    pytest.importorskip("jax")
    _close(tidu.jit(_pinv_h, device="cpu")(HC), np.linalg.pinv(HC, hermitian=True), rtol=1e-12, atol=1e-13)
    _close(tidu.jit(tidu.grad(f), device="cpu")(HB), tidu.grad(f)(HB), rtol=1e-12, atol=1e-14)


def test_pinv_hermitian_needs_square_matrices():
    with pytest.raises(ValueError, match="square"):
        tidu.jit(_pinv_h)(np.ones((2, 3)))
