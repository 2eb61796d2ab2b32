"""Regression tests for issue 30's tidu.numpy items, each against an independent oracle
(JAX, NumPy, finite differences)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


@pytest.fixture(autouse=True, scope="module")
def _x64():
    with jax.enable_x64(True):
        yield


# --- logaddexp / logaddexp2 at the tie -------------------------------------------------------

LAE = [(tnp.logaddexp, jnp.logaddexp, np.logaddexp), (tnp.logaddexp2, jnp.logaddexp2, np.logaddexp2)]
POINTS = [(0.4, 0.4), (-1.0, -1.0), (100.0, 100.0), (0.4, 0.9), (0.4, 1.84), (3.0, -2.0), (1e3, -1e3)]


@functools.cache
def _jax_derivatives(jf):
    """JAX's gradient and Hessian of jf(v[0], v[1]), jitted once for every point (one XLA
    compilation each, not one each a point)."""
    def g(v):
        return jf(v[0], v[1])

    return jax.jit(jax.grad(g)), jax.jit(jax.hessian(g))


@pytest.mark.parametrize("fns", LAE, ids=["logaddexp", "logaddexp2"])
@pytest.mark.parametrize("point", POINTS)
def test_logaddexp_derivatives_at_and_off_the_tie(fns, point):
    tf, jf, nf = fns
    v = np.array(point)

    def f(v):
        return tf(v[0], v[1])

    grad_j, hessian_j = _jax_derivatives(jf)
    assert np.allclose(tidu.jit(f)(v), nf(*point), rtol=1e-15, atol=0)
    np.testing.assert_allclose(tidu.grad(f)(v), grad_j(v), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(tidu.hessian(f)(v), hessian_j(v), rtol=1e-13, atol=1e-15)


def test_logaddexp_jvp_at_the_tie_matches_finite_differences():
    # the issue's case: a JVP at (0.4, 0.4) was -0.7876 where finite differences give -0.7542
    def f(x, y):
        return tnp.logaddexp(x, y) * tnp.sin(x) - tnp.logaddexp2(y, x)

    x, y, dx, dy = 0.4, 0.4, 0.3, -1.1
    _, t = tidu.jvp(f, (x, y), (dx, dy))
    h = 1e-6
    fd = (f(x + h * dx, y + h * dy) - f(x - h * dx, y - h * dy)) / (2 * h)
    assert abs(t - fd) < 1e-8


def test_logaddexp_infinities_and_nan_traced_as_numpy():
    x = np.array([np.inf, -np.inf, np.nan, np.inf, 1.0, -np.inf])
    y = np.array([np.inf, -np.inf, 1.0, 1.0, -np.inf, 2.0])
    with np.errstate(invalid="ignore"):
        for tf, _, nf in LAE:
            np.testing.assert_array_equal(tidu.jit(tf)(x, y), nf(x, y))


# --- std over a single element ---------------------------------------------------------------


@pytest.mark.parametrize("fn", ["std", "nanstd"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_std_over_one_element_has_derivative_zero(fn, dtype):
    x = (np.array([[1.0, 2.0, 3.0]]) * (1 + 0.5j if dtype is np.complex128 else 1)).astype(dtype)

    def f(x):
        return tnp.sum(getattr(tnp, fn)(x, axis=0))

    assert tidu.jit(f)(x) == 0.0 == getattr(np, fn)(x, axis=0).sum()
    if dtype is np.float64:
        np.testing.assert_array_equal(tidu.grad(f)(x), np.zeros_like(x))
    else:
        _, t = tidu.jvp(f, (x,), (np.ones_like(x),))
        assert t == 0.0
    # keepdims and a single-element whole array
    np.testing.assert_array_equal(tidu.grad(lambda x: tnp.std(x[:1, :1], keepdims=True)[0, 0])(x.real),
                                  np.zeros(x.shape))


def test_std_elsewhere_matches_jax():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4))
    for kw in [{}, {"axis": 0}, {"axis": 1, "ddof": 1}, {"axis": (0, 1), "ddof": 2}]:
        def f(x, kw=kw):
            return tnp.sum(tnp.std(x, **kw) ** 2 + tnp.std(x, **kw))

        def g(x, kw=kw):
            return jnp.sum(jnp.std(x, **kw) ** 2 + jnp.std(x, **kw))

        np.testing.assert_allclose(tidu.grad(f)(x), jax.jit(jax.grad(g))(x), rtol=1e-12)
    # ddof >= N over one element: nan as NumPy
    with np.errstate(invalid="ignore", divide="ignore"), pytest.warns(RuntimeWarning):
        assert np.isnan(tidu.jit(lambda x: tnp.std(x, axis=0, ddof=1))(x[:1])).all()
        assert np.isnan(np.std(x[:1], axis=0, ddof=1)).all()


def test_std_of_equal_values_has_nan_derivative_as_jax():
    # std(c + t v) = |t| std(v): no derivative at t = 0; documented choice: nan, as JAX
    x = np.full(3, 2.0)
    assert np.isnan(tidu.grad(tnp.std)(x)).all()
    assert np.isnan(jax.jit(jax.grad(jnp.std))(x)).all()


# --- gradient, polyadd/polysub, full_like ----------------------------------------------------


def test_gradient_returns_a_tuple_as_numpy():
    a = np.arange(12.0).reshape(3, 4) ** 2
    for fn in (tnp.gradient, tidu.jit(tnp.gradient)):
        out = fn(a)
        assert type(out) is type(np.gradient(a)) is tuple
        for o, r in zip(out, np.gradient(a), strict=True):
            np.testing.assert_allclose(o, r)


@pytest.mark.parametrize(("shape", "other"), [((3, 4), (3, 4)), ((3, 4), (3, 1)), ((3, 3), (2,)),
                                             ((3,), (5,)), ((3, 3), ())])
@pytest.mark.parametrize("name", ["polyadd", "polysub"])
def test_polyadd_keeps_the_other_axes(name, shape, other):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=shape), rng.normal(size=other)
    tf, nf = getattr(tnp, name), getattr(np, name)
    for x, y in [(a, b), (b, a)]:
        expected = nf(x, y)
        np.testing.assert_array_equal(tf(x, y), expected)
        got = tidu.jit(lambda x, y: tf(x, y))(x, y)
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-15)
        w = rng.normal(size=expected.shape)
        got = tidu.grad(lambda x, y, w=w: tnp.sum(tf(x, y) * w), argnums=(0, 1))(x, y)
        ref = [_linear_gradient(lambda x_, y=y, w=w: np.sum(nf(x_, y) * w), x),
               _linear_gradient(lambda y_, x=x, w=w: np.sum(nf(x, y_) * w), y)]
        for g, r in zip(got, ref, strict=True):
            np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-12)


def _linear_gradient(f, x):
    """The gradient of a linear function by unit steps (exact up to rounding)."""
    x = np.asarray(x, dtype=float)
    out = np.empty(x.shape)
    for i in np.ndindex(x.shape):
        e = np.zeros(x.shape)
        e[i] = 1.0
        out[i] = f(x + e) - f(x)
    return out


def test_full_like_with_a_traced_fill_value():
    x = np.arange(3.0)
    np.testing.assert_array_equal(tidu.jit(lambda x: tnp.full_like(x, x[1] * 2))(x), np.full_like(x, 2.0))
    assert tidu.grad(lambda v: tnp.sum(tnp.full_like(x, v) * x))(1.0) == 3.0
    assert tidu.grad(lambda v: tnp.sum(tnp.full_like(np.zeros(4, int), v, dtype=float)))(2.0) == 4.0
    out = tidu.jit(lambda v: tnp.full_like(np.zeros((2, 2), np.float32), v))(np.float64(3.0))
    assert out.dtype == np.float32 and (out == 3).all()


# --- einsum: sublist form, zero-size axes ----------------------------------------------------

_RNG = np.random.default_rng(3)
_A, _B, _C = _RNG.normal(size=(2, 3)), _RNG.normal(size=(3, 4)), _RNG.normal(size=(3, 3))
EINSUM_SUBLISTS = [
    (_A, [0, 1], [1, 0]),
    (_A, [0, 1], _B, [1, 2]),
    (_A, [0, 1], _B, [1, 2], [2, 0]),
    (_C, [0, 0]),
    (_C, [Ellipsis, 1], [1, Ellipsis]),
    (_A, [30, 1], _B, [1, 40], [40]),
]


@pytest.mark.parametrize("args", EINSUM_SUBLISTS, ids=range(len(EINSUM_SUBLISTS)))
def test_einsum_sublist_form(args):
    positions = [i for i in range(0, len(args) - len(args) % 2, 2)]

    def call(lib, *ops):
        full = list(args)
        for p, o in zip(positions, ops, strict=True):
            full[p] = o
        return lib.einsum(*full)

    ops = [args[p] for p in positions]
    expected = np.einsum(*args)
    np.testing.assert_allclose(tnp.einsum(*args), expected, rtol=1e-14)
    np.testing.assert_allclose(tidu.jit(lambda *o: call(tnp, *o))(*ops), expected, rtol=1e-14)
    w = _RNG.normal(size=np.shape(expected))
    argnums = tuple(range(len(ops)))
    got = tidu.grad(lambda *o: tnp.sum(call(tnp, *o) * w), argnums=argnums)(*ops)
    ref = jax.jit(jax.grad(lambda *o: jnp.sum(call(jnp, *o) * w), argnums=argnums))(*ops)
    for g, r in zip(got, ref, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-13)


@pytest.mark.parametrize(("spec", "shapes"), [("ij,jk->ik", [(2, 3), (3, 0)]), ("ij,jk->ik", [(2, 0), (0, 3)]),
                                              ("ij->", [(0, 3)]), ("ii->i", [(0, 0)]), ("ij,j->i", [(2, 0), (1,)]),
                                              ("ij,j->i", [(0, 3), (3,)])])
def test_einsum_zero_size_axes(spec, shapes):
    ops = [_RNG.normal(size=s) for s in shapes]
    expected = np.einsum(spec, *ops)
    got = tidu.jit(lambda *o: tnp.einsum(spec, *o))(*ops)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected)
    w = _RNG.normal(size=expected.shape)
    argnums = tuple(range(len(ops)))
    grads = tidu.grad(lambda *o: tnp.sum(tnp.einsum(spec, *o) * w), argnums=argnums)(*ops)
    refs = jax.jit(jax.grad(lambda *o: jnp.sum(jnp.einsum(spec, *o) * w), argnums=argnums))(*ops)
    for g, r, o in zip(grads, refs, ops, strict=True):
        assert np.shape(g) == o.shape
        np.testing.assert_allclose(g, r, atol=1e-14)


# --- tnp.at: functional updates eagerly and traced -------------------------------------------

AT_METHODS = ["set", "add", "subtract", "multiply", "divide", "power", "min", "max", "get"]


@pytest.mark.parametrize("index", [(slice(None), 0), ([0, 0, 1], [1, 1, 2]), "mask", 1,
                                   (Ellipsis, slice(None, None, -2))], ids=["slice", "repeated", "mask", "int", "step"])
@pytest.mark.parametrize("method", AT_METHODS)
def test_at_function_eager_equals_traced_equals_jax(method, index):
    x = np.arange(1.0, 7.0).reshape(2, 3)
    if isinstance(index, str):
        index = x > 2.5
    values = () if method == "get" else (1.5,)

    def f(x):
        return getattr(tnp.at(x)[index], method)(*values)

    eager = f(x)
    assert isinstance(eager, np.ndarray) and eager.dtype == x.dtype
    np.testing.assert_allclose(eager, tidu.jit(f)(x), rtol=1e-15)
    np.testing.assert_allclose(eager, tidu.jit(lambda x: getattr(x.at[index], method)(*values))(x), rtol=1e-15)
    np.testing.assert_allclose(eager, getattr(jnp.asarray(x).at[index], method)(*values), rtol=1e-15)
    np.testing.assert_array_equal(x, np.arange(1.0, 7.0).reshape(2, 3))  # x itself is unchanged


def test_at_function_with_traced_values_into_a_numpy_array():
    v = np.array([1.0, 2.0, 3.0])
    g = tidu.grad(lambda v: tnp.sum(tnp.at(np.zeros(3))[[0, 0, 2]].add(v) ** 2))(v)
    r = jax.jit(jax.grad(lambda v: jnp.sum(jnp.zeros(3).at[jnp.array([0, 0, 2])].add(v) ** 2)))(v)
    np.testing.assert_allclose(g, r)
    out = tidu.jit(lambda v: tnp.at(np.zeros(3, np.float32))[1].set(v))(2.0)
    assert out.dtype == np.float32 and out.tolist() == [0.0, 2.0, 0.0]


@pytest.mark.parametrize("transform", [tidu.jit, tidu.grad, tidu.vmap])
def test_at_on_a_numpy_array_points_to_tnp_at(transform):
    with pytest.raises(AttributeError, match=r"tnp\.at\(x\)\[index\]"):
        transform(lambda v: tnp.sum(np.zeros(3).at[0].set(v)))(np.ones(2) if transform is tidu.vmap else 1.0)
