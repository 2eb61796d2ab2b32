"""An outside tester's checks of sparse Jacobians and Hessians, their sparsity patterns and
colorings, the Hessian modes, and Taylor mode (``tidu.jet``, ``tidu.series``) against JAX
(x64), ``jax.experimental.jet`` and dense tidu: structured functions (banded, arrowhead,
block diagonal, gathers and scatters, ``lax.map``/``scan``/``cond``/``fori_loop``), empty
arguments and outputs, complex scalar outputs, float32 Hessians on the coloring route, and
``maximum``/``minimum`` at ties.

Tests marked ``xfail(strict=True)`` fail today; each reason says what is wrong."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest
import scipy.sparse as sp

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from jax import lax as jlax  # noqa: E402
from jax.experimental.jet import jet as jax_jet  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402
from tidu import lax as tlax  # noqa: E402
from tidu.transforms.coloring import column_coloring, compressed_recovery, seed_matrix, star_coloring  # noqa: E402

RNG = np.random.default_rng(20261201)
MODES = ("FoF", "FoR", "RoF", "RoR")


def _close(got, want, rtol=1e-9, atol=1e-11):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


# --- structured scalar functions: (tidu, jax) -------------------------------------------------

def _structured(np_, L):
    def banded(x):
        return np_.sum(np_.sin(x[1:] * x[:-1])) + np_.sum((x[2:] - x[:-2]) ** 2)

    def arrowhead(x):
        return np_.sum(x[0] * x ** 2) + np_.sum(np_.exp(x))

    def block(x):
        return np_.sum(np_.sum(x.reshape(3, 4), axis=1) ** 3)

    def gather(x):
        idx = np.array([3, 1, 1, 0, 5])
        return np_.sum(x[idx] * x[idx[::-1]])

    def reductions(x):
        return np_.max(x) ** 2 + np_.prod(x[:3]) + np_.sum(x) ** 2

    def scan(x):
        c, ys = L.scan(lambda c, xi: (c * xi + np_.sin(xi), c * xi), x[0], x[1:])
        return c + np_.sum(ys ** 2)

    def cond(x):
        return L.cond(x[0] > 0, lambda v: np_.sum(v[:3] ** 2 * v[1:4]), lambda v: np_.sum(v ** 3), x)

    def constant_branch(x):
        return np_.sum(np_.where(x > 0.5, x ** 2, 3.0)) + x[1] * x[2]

    def rows_map(x):
        return np_.sum(L.map(lambda r: np_.sum(np_.sin(r) * r[0]), x.reshape(3, 4)) ** 2)

    return dict(banded=banded, arrowhead=arrowhead, block=block, gather=gather, reductions=reductions,
                scan=scan, cond=cond, constant_branch=constant_branch, rows_map=rows_map)


T_FUNS, J_FUNS = _structured(tnp, tlax), _structured(jnp, jlax)
X12 = RNG.uniform(0.2, 1.0, 12)


@pytest.mark.parametrize("name", sorted(T_FUNS))
def test_sparse_hessian_and_modes_match_jax(name):
    want = np.asarray(jax.hessian(J_FUNS[name])(X12))
    hs = tidu.hessian(T_FUNS[name], sparse=True)(X12)
    assert isinstance(hs, sp.csr_array)
    _close(hs.toarray(), want)
    for mode in MODES:
        _close(tidu.hessian(T_FUNS[name], mode=mode)(X12), want)
    pattern = tidu.hessian_sparsity(T_FUNS[name])(X12).toarray()
    assert pattern[np.abs(want) > 0].all()  # a superset of the true pattern
    jac = np.asarray(jax.jacobian(jax.grad(J_FUNS[name]))(X12))
    _close(tidu.jacfwd(tidu.grad(T_FUNS[name]), sparse=True)(X12).toarray(), jac)
    _close(tidu.jacrev(tidu.grad(T_FUNS[name]), sparse=True)(X12).toarray(), jac)


# --- sparsity patterns through scan / map: no denser than the structure -----------------------

def test_map_over_rows_jacobian_pattern_is_block_diagonal():
    # lax.map(f, rows) is block diagonal; the stacked ys of a scan took the union of every
    # x slice's rows, so the pattern (and the sparse Hessian's colors) was dense
    pat = tidu.jacobian_sparsity(lambda v: tlax.map(lambda r: r * r[0], v.reshape(3, 4)).ravel())(X12)
    want = np.asarray(jax.jacfwd(lambda v: jlax.map(lambda r: r * r[0], v.reshape(3, 4)).ravel())(X12)) != 0
    np.testing.assert_array_equal(pat.toarray(), want)  # row i of a block: r_i and r_0
    h = tidu.hessian_sparsity(T_FUNS["rows_map"])(X12).toarray()
    np.testing.assert_array_equal(h, np.kron(np.eye(3), np.ones((4, 4))).astype(bool))


def test_scan_ys_of_own_slice_pattern_is_diagonal():
    def ft(v):
        return tlax.scan(lambda c, a: (c, a ** 2 + c), 1.0, v)[1]

    def fj(v):
        return jlax.scan(lambda c, a: (c, a ** 2 + c), 1.0, v)[1]

    pat = tidu.jacobian_sparsity(ft)(X12).toarray()
    np.testing.assert_array_equal(pat, np.eye(12, dtype=bool))
    want = np.asarray(jax.jacfwd(fj)(X12))
    _close(tidu.jacfwd(ft, sparse=True)(X12).toarray(), want)
    _close(tidu.jacrev(ft, sparse=True)(X12).toarray(), want)


def test_reverse_scan_and_two_xs_sparse_hessian():
    def rt(v):
        ys = tlax.scan(lambda c, ab: (c * 1.1, tnp.exp(ab[0]) * ab[1][::-1] + c), 0.5,
                       (v[:12].reshape(4, 3), v[12:].reshape(4, 3)), reverse=True)[1]
        return tnp.sum(tnp.tanh(ys))

    def rj(v):
        ys = jlax.scan(lambda c, ab: (c * 1.1, jnp.exp(ab[0]) * ab[1][::-1] + c), 0.5,
                       (v[:12].reshape(4, 3), v[12:].reshape(4, 3)), reverse=True)[1]
        return jnp.sum(jnp.tanh(ys))

    x = RNG.uniform(0.2, 1.0, 24)
    want = np.asarray(jax.hessian(rj)(x))
    _close(tidu.hessian(rt, sparse=True)(x).toarray(), want)
    pattern = tidu.hessian_sparsity(rt)(x).toarray()
    assert pattern[np.abs(want) > 0].all()
    assert pattern.sum() == (np.abs(want) > 0).sum()  # the structure, not more


# --- empty arguments and outputs --------------------------------------------------------------

def test_sparse_derivatives_of_empty_arrays():
    # the seeds were reshaped with -1 over zero elements: "cannot reshape array of size 0"
    e = np.zeros(0)
    assert tidu.hessian(lambda s: tnp.sum(s ** 3), sparse=True)(e).shape == (0, 0)
    assert tidu.jacfwd(lambda s: s ** 3, sparse=True)(e).shape == (0, 0)
    assert tidu.jacrev(lambda s: s ** 3, sparse=True)(e).shape == (0, 0)
    # an empty output: (output size, argument size), from jacrev as from jacfwd
    assert tidu.jacfwd(lambda s: s[:0] * 2, sparse=True)(np.ones(3)).shape == (0, 3)
    assert tidu.jacrev(lambda s: s[:0] * 2, sparse=True)(np.ones(3)).shape == (0, 3)
    for mode in MODES:
        _close(tidu.hessian(lambda s: tnp.sum(s ** 3), mode=mode)(np.zeros((2, 0))), np.zeros((2, 0, 2, 0)))


# --- complex scalar outputs and float32 on the coloring route ---------------------------------

def test_hessian_of_complex_output_large_argument():
    # the dense FoR Hessian goes through colors from 128 elements: it called tidu.grad,
    # which refuses complex outputs, so n = 200 raised where n = 3 worked
    def f(x):
        return tnp.sum(x[1:] ** 2 * x[:-1]) * (1 + 1j)

    for n in (3, 200):
        x = np.linspace(0.3, 1.1, n)
        want = tidu.hessian(f, mode="FoF")(x).real
        _close(tidu.hessian(f)(x), want)
        _close(tidu.hessian(f, sparse=True)(x).toarray(), want)


def test_sparse_hessian_of_holomorphic_function_equals_dense():
    z = np.array([0.3 + 0.2j, -0.5 + 1.1j, 0.7 - 0.4j])

    def f(z):
        return tnp.sum(z ** 3) + z[0] * z[1]

    _close(tidu.hessian(f, holomorphic=True, sparse=True)(z).toarray(), tidu.hessian(f, holomorphic=True)(z))


def test_hessian_of_real_function_of_complex_argument_is_refused_dense_and_sparse():
    # (its modes disagreed; JAX refuses it too: the real and imaginary parts as real arguments)
    z = np.array([0.3 + 0.2j, -0.5 + 1.1j, 0.7 - 0.4j])

    def f(z):
        return tnp.sum(tnp.abs(z) ** 2 * tnp.real(z[::-1])) + tnp.real(z[0] * z[1])

    for sparse in (False, True):
        with pytest.raises(TypeError, match="argument z is complex"):
            tidu.hessian(f, sparse=sparse)(z)

    def g(x, y):
        return f(x + 1j * y)

    h = np.asarray(jax.hessian(lambda x, y: jnp.sum(jnp.abs(x + 1j * y) ** 2 * jnp.real((x + 1j * y)[::-1]))
                               + jnp.real((x + 1j * y)[0] * (x + 1j * y)[1]), argnums=(0, 1))(z.real, z.imag))
    got = tidu.hessian(g, argnums=(0, 1))(z.real, z.imag)
    for i in range(2):
        for j in range(2):
            _close(got[i][j], h[i][j])


def test_hessian_modes_agree_on_holomorphic_function():
    # (without holomorphic=True FoF gave f''(z) and the reverse modes its conjugate: refused now)
    z = np.array([0.3 + 0.2j, -0.5 + 1.1j, 0.7 - 0.4j])
    want = np.asarray(jax.hessian(lambda z: jnp.sum(z ** 3) + z[0] * z[1], holomorphic=True)(z))
    for mode in MODES:
        _close(tidu.hessian(lambda z: tnp.sum(z ** 3) + z[0] * z[1], holomorphic=True, mode=mode)(z), want)
        with pytest.raises(TypeError, match="argument z is complex.*holomorphic=True"):
            tidu.hessian(lambda z: tnp.sum(z ** 3) + z[0] * z[1], mode=mode)(z)
    with pytest.raises(TypeError, match="argument z is complex"):
        tidu.hessian(lambda z: tnp.sum(z ** 3), sparse=True)(z)


def test_sparse_hessian_scalar_output_error_is_one_line():
    for g in (lambda x: x ** 2, lambda x: (tnp.sum(x), tnp.sum(x))):
        with pytest.raises(TypeError, match=r"must return one float or complex scalar"):
            tidu.hessian(g, sparse=True)(np.ones(3))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_dense_hessian_keeps_dtype_on_the_coloring_route(dtype):
    # from 128 elements the FoR Hessian is decompressed from colors: it came back float64
    def f(v):
        return tnp.sum(v[1:] * v[:-1] ** 2)

    x = np.linspace(0.3, 1.2, 200).astype(dtype)
    h = tidu.hessian(f)(x)
    assert h.dtype == tidu.hessian(f)(x[:10]).dtype == tidu.hessian(f, mode="FoF")(x).dtype == dtype
    _close(h.astype(np.float64), tidu.hessian(f, mode="FoF")(x).astype(np.float64), rtol=1e-2, atol=1e-2)


def test_large_banded_hessian_dense_route_matches_jax():
    def ft(x):
        return tnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2) + tnp.sum(x[0] * x)

    def fj(x):
        return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2) + jnp.sum(x[0] * x)

    x = np.linspace(0.5, 1.5, 160)
    want = np.asarray(jax.hessian(fj)(x))
    _close(tidu.hessian(ft)(x), want)
    _close(tidu.hessian(ft, sparse=True)(x).toarray(), want)


# --- colorings --------------------------------------------------------------------------------

def test_colorings_are_valid_on_random_patterns():
    rng = np.random.default_rng(7)
    for _ in range(60):
        m, n = (int(v) for v in rng.integers(1, 25, 2))
        p = rng.random((m, n)) < rng.uniform(0, 0.4)
        c = column_coloring(p)
        for r in range(m):
            cols = np.flatnonzero(p[r])
            assert len(set(c[cols])) == cols.size
        j = p * rng.normal(size=p.shape)
        _close(compressed_recovery(p, c, symmetric=False).csr(j @ seed_matrix(c)).toarray(), j)
        s = rng.random((n, n)) < rng.uniform(0, 0.4)
        s = s | s.T
        c = star_coloring(s)
        adj = s & ~np.eye(n, dtype=bool)
        assert not np.any(adj & (c[:, None] == c[None, :]))
        for v in range(n):  # no path on four vertices with two colors
            for w in np.flatnonzero(adj[v]):
                for x in np.flatnonzero(adj[w]):
                    if x != v:
                        for y in np.flatnonzero(adj[x]):
                            if y not in (v, w):
                                assert len({c[v], c[w], c[x], c[y]}) >= 3
        h = rng.normal(size=(n, n))
        h = (h + h.T) * s
        _close(compressed_recovery(s, c, symmetric=True).csr(h @ seed_matrix(c)).toarray(), h)


# --- Taylor mode ------------------------------------------------------------------------------

def _jet_close(ft, fj, x0, series):
    y0, ys = tidu.jet(ft, (x0,), (series,))
    w0, ws = jax_jet(fj, (x0,), (series,))
    _close(y0, w0)
    assert len(ys) == len(ws)
    for a, b in zip(ys, ws, strict=True):
        _close(a, b, rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("name", ["comp", "tanh_erf", "logistic", "div_pow", "matmul", "reduce"])
def test_jet_order5_matches_jax(name):
    import jax.scipy.special as jsp

    from tidu.scipy import special as tsp
    funs = {
        "comp": (lambda v: tnp.exp(tnp.sin(v)) * tnp.log(1 + v ** 2) / tnp.sqrt(v),
                 lambda v: jnp.exp(jnp.sin(v)) * jnp.log(1 + v ** 2) / jnp.sqrt(v)),
        "tanh_erf": (lambda v: tnp.tanh(tsp.erf(v) * v) ** 1.5, lambda v: jnp.tanh(jsp.erf(v) * v) ** 1.5),
        "logistic": (tidu.nn.sigmoid, jax.nn.sigmoid),
        "div_pow": (lambda v: v ** v / (1 + tnp.abs(v - 2.0)), lambda v: v ** v / (1 + jnp.abs(v - 2.0))),
        "matmul": (lambda v: tnp.tanh(v.reshape(2, 2) @ v.reshape(2, 2)).ravel(),
                   lambda v: jnp.tanh(v.reshape(2, 2) @ v.reshape(2, 2)).ravel()),
        "reduce": (lambda v: tnp.sum(tnp.exp(v) * v) * tnp.max(v), lambda v: jnp.sum(jnp.exp(v) * v) * jnp.max(v)),
    }
    x = np.array([0.3, 0.7, 1.3, 0.9])
    _jet_close(*funs[name], x, [RNG.normal(size=4) for _ in range(5)])


@pytest.mark.parametrize("which", ["maximum", "minimum", "clip", "maximum_vv"])
def test_jet_extremum_at_a_tie_is_the_mean(which):
    # at a tie the series followed the second operand (all zero for maximum(x, 0.5)), while
    # tidu.jvp, jax.jvp and jax.experimental.jet take the mean of the two
    funs = {"maximum": (lambda v: tnp.maximum(v, 0.5), lambda v: jnp.maximum(v, 0.5)),
            "minimum": (lambda v: tnp.minimum(v, 0.5), lambda v: jnp.minimum(v, 0.5)),
            "clip": (lambda v: tnp.clip(v, 0.0, 0.5), lambda v: jnp.clip(v, 0.0, 0.5)),
            "maximum_vv": (lambda v: tnp.maximum(v, v[::-1]), lambda v: jnp.maximum(v, v[::-1]))}
    ft, fj = funs[which]
    x = np.array([0.5, 0.5, 0.0, 0.5])
    series = [np.array([1.0, 2.0, 1.0, -1.0]), np.array([0.5, -3.0, 1.0, 2.0]), np.array([0.1, 0.2, 0.3, 0.4])]
    _jet_close(ft, fj, x, series)
    _close(tidu.jet(ft, (x,), (series[:1],))[1][0], tidu.jvp(ft, (x,), (series[0],))[1])


def test_series_prints_linear_term_about_a_point_whole():
    # 1 + x/2 - 1/2 - (x - 1)**2/8 ...: c1*(x - a) was distributed
    assert str(tidu.series(tnp.sqrt, 1.0, 2)) == "1 + (x - 1)/2 - (x - 1)**2/8 + O((x - 1)**3)"
    assert str(tidu.series(lambda x: x ** 3, -1.0, 3)) == "-1 + 3*(x + 1) - 3*(x + 1)**2 + (x + 1)**3 + O((x + 1)**4)"
    assert str(tidu.series(lambda x: tnp.abs(x - 1), 2.0, 1)) == "1 + (x - 2) + O((x - 2)**2)"


def test_series_of_erf_is_exact():
    from tidu.scipy import special as tsp
    # 2/sqrt(pi) came out as 112837916709551/100000000000000, neither exact nor the float
    assert str(tidu.series(tsp.erf, 0.0, 3)) == "2*x/sqrt(pi) - 2*x**3/(3*sqrt(pi)) + O(x**4)"


def test_series_bad_input_errors_are_clear():
    with pytest.raises(ValueError, match="x0 must be finite"):
        tidu.series(tnp.exp, float("nan"), 2)
    with pytest.raises(TypeError, match="must return a real scalar"):
        tidu.series(lambda x: tnp.stack([x, x]), 0.0, 2)
    with pytest.raises(TypeError, match="must return a real scalar"):
        tidu.series(lambda x: tnp.exp(1j * x), 0.0, 2)
