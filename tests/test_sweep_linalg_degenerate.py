"""An outside sweep of tidu.numpy.linalg and tidu.scipy.linalg at degenerate inputs,
against NumPy and JAX (x64): matrices with no rows or no columns (svd, svdvals, eigh,
matrix_rank, lstsq, the nuclear norm: eager, traced, lowered to XLA and differentiated),
the empty diagonal matrix of ``tnp.diag``, and bad shapes given eagerly (the traced call's
one-line error, not nan or a deep traceback); XLA's SVD of a matrix with a nan, and an
e-graph that read an attribute 1 as True."""

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

la = tnp.linalg


def _every_way(fn, x):
    """fn(x) eagerly, under tidu.jit and lowered to XLA, each as a tuple of arrays."""
    as_tuple = lambda r: tuple(np.asarray(a) for a in (r if isinstance(r, tuple) else (r,)))  # noqa: E731
    program = tidu.make_graph(fn)(x).program
    return {"eager": as_tuple(fn(x)), "jit": as_tuple(tidu.jit(fn)(x)),
            "xla": tuple(np.asarray(a) for a in program.run([x], backend="xla"))}


EMPTY = [(0, 0), (0, 3), (3, 0), (2, 0, 0), (2, 0, 3), (2, 3, 0)]


@pytest.mark.parametrize("shape", EMPTY)
@pytest.mark.parametrize("name", ["svd", "svdvals", "eigh", "matrix_rank", "nuc"])
def test_factorizations_of_empty_matrices(name, shape):
    # svd and eigh of a matrix with no columns failed under XLA (a slice of V's first row)
    # and in their derivative; svdvals' derivative, the traced matrix_rank and the
    # nuclear norm's derivative failed too
    if name == "eigh" and shape[-1] != shape[-2]:
        pytest.skip("eigh takes square matrices")
    x = np.zeros(shape)
    tidu_fn, numpy_fn = {
        "svd": (lambda a: tuple(la.svd(a, full_matrices=False)),
                lambda a: tuple(np.linalg.svd(a, full_matrices=False))),
        "svdvals": (la.svdvals, lambda a: np.linalg.svd(a, compute_uv=False)),
        "eigh": (lambda a: tuple(la.eigh(a)), lambda a: tuple(np.linalg.eigh(a))),
        "matrix_rank": (la.matrix_rank, np.linalg.matrix_rank),
        "nuc": (lambda a: la.norm(a, "nuc", axis=(-2, -1)), lambda a: np.linalg.norm(a, "nuc", axis=(-2, -1))),
    }[name]
    want = numpy_fn(x)
    want = want if isinstance(want, tuple) else (want,)
    for way, got in _every_way(tidu_fn, x).items():
        assert [g.shape for g in got] == [np.shape(w) for w in want], way
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
    if name != "matrix_rank":
        loss = lambda a: sum(tnp.sum(p) for p in (lambda r: r if isinstance(r, tuple) else (r,))(tidu_fn(a)))  # noqa: E731
        grad = tidu.grad(loss)
        assert np.asarray(grad(x)).shape == shape
        (g_xla,) = tidu.make_graph(grad)(x).program.run([x], backend="xla")
        assert np.asarray(g_xla).shape == shape


@pytest.mark.parametrize("shape", [(0, 3), (3, 0)])
@pytest.mark.parametrize("k", [None, 2])
def test_lstsq_of_empty_matrices_is_jaxs(shape, k):
    # an IndexError (the largest singular value s[0] of none), eagerly and traced
    a = np.zeros(shape)
    b = np.ones(shape[:1] + ((k,) if k else ()))
    want = jnp.linalg.lstsq(jnp.asarray(a), jnp.asarray(b))
    for way, got in _every_way(lambda a_: la.lstsq(a_, b), a).items():
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape, way
            np.testing.assert_allclose(g, np.asarray(w), rtol=1e-15)
    grad = tidu.grad(lambda a_: tnp.sum(la.lstsq(a_, b)[0]) + tnp.sum(la.lstsq(a_, b)[1]))(a)
    np.testing.assert_array_equal(grad, np.zeros(shape))


@pytest.mark.parametrize("k", [-2, -1, 1, 3])
def test_diag_of_an_empty_vector_off_the_main_diagonal(k):
    # the traced diag padded the empty vector to the wrong length (a reshape error)
    v = np.zeros(0)
    want = np.diag(v, k)
    for way, (got,) in _every_way(lambda x: tnp.diag(x, k), v).items():
        assert got.shape == want.shape == (abs(k), abs(k)), way
        np.testing.assert_array_equal(got, want)
    (got,) = _every_way(lambda x: tnp.diagflat(x, k), v)["jit"]
    np.testing.assert_array_equal(got, np.diagflat(v, k))


BAD_SHAPES = [
    ("svd", lambda a: la.svd(a), np.ones(3)),  # eagerly nan arrays (3, 3), no error
    ("pinv", lambda a: la.pinv(a), np.ones(3)),  # eagerly nan arrays (3, 3), no error
    ("svdvals", lambda a: la.svdvals(a), np.float64(1.0)),
    ("eigh", lambda a: la.eigh(a), np.ones((3, 2))),  # a broadcasting error deep in the eager kernel
    ("eigvalsh", lambda a: la.eigvalsh(a), np.ones(3)),
    ("cholesky", lambda a: la.cholesky(a), np.ones((3, 2))),
    ("lstsq", lambda a: la.lstsq(a, np.ones(3)), np.ones((2, 3, 3))),  # "too many values to unpack"
]


@pytest.mark.parametrize(("name", "fn", "x"), BAD_SHAPES, ids=[c[0] for c in BAD_SHAPES])
def test_bad_shapes_raise_the_traced_error_eagerly_too(name, fn, x):
    with pytest.raises(ValueError, match=f"tnp.linalg.{name}: expected") as traced:
        tidu.jit(fn)(x)
    with pytest.raises(ValueError, match=f"tnp.linalg.{name}: expected") as eager:
        fn(x)
    assert str(eager.value) == str(traced.value)


# --- found here in other stages (the StableHLO lowering, the e-graph) and fixed there ---------


@pytest.mark.parametrize("name", ["svdvals", "pinv", "norm2", "svd"])
def test_xla_svd_of_a_matrix_with_a_nan_is_nan(name):
    # XLA's gesdd leaves a failed matrix's outputs uninitialized (4.6e-310, 9e45, ...):
    # the lowering reads LAPACK's info and gives nan there, as NumPy's evaluation and JAX
    fn = {"svdvals": la.svdvals, "pinv": la.pinv, "norm2": lambda a: la.norm(a, 2, axis=(-2, -1)),
          "svd": lambda a: la.svd(a)[0] * la.svd(a)[2]}[name]
    x = np.stack([2 * np.eye(3), np.array([[1.0, np.nan, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 3.0]])])
    (got,) = tidu.make_graph(fn)(x).program.run([x], backend="xla")
    want = np.asarray(fn(x))
    assert np.isnan(want[1]).all()
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)


def test_reverse_over_reverse_of_qr_of_a_complex_wide_matrix():
    # the e-graph interned attribute values in a dict keyed by value, where True == 1: a
    # concatenate's axis=1 came back from extraction as axis=True, which NumPy refuses
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 5)) + 1j * rng.normal(size=(3, 5))
    t = rng.normal(size=(3, 5)) + 1j * rng.normal(size=(3, 5))

    def f(y):
        return tnp.sum(tnp.abs(la.qr(y)[1]) ** 2)

    g = tidu.grad(f)
    want = tidu.jvp(g, (x,), (t,))[1]  # forward over reverse: the Hessian times t
    got = tidu.grad(lambda y: tnp.real(tnp.sum(tnp.conj(g(y)) * t)))(x)  # reverse over reverse
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-10, atol=1e-10)
