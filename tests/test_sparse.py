"""Sparse Jacobians and Hessians: patterns read from the graph, compressed evaluation
through a coloring, against dense tidu results and JAX."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import tidu
import tidu.numpy as tnp

jax.config.update("jax_enable_x64", True)


def rosen(x, xp=tnp):
    return xp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def chain_energy(x, xp=tnp):  # a 1-D finite-difference energy: tridiagonal Hessian
    return xp.sum(xp.cosh(x[1:] - x[:-1])) + xp.sum(x ** 4) / 4


def arrowhead(x, xp=tnp):
    return x[0] * xp.sum(xp.sin(x[1:]) ** 2) + xp.sum(x ** 3)


def tridiagonal(n):
    return (np.abs(np.subtract.outer(np.arange(n), np.arange(n))) <= 1)


X = np.linspace(-1.2, 0.9, 9)


def test_hessian_sparsity_is_read_from_the_graph():
    p = tidu.hessian_sparsity(rosen)(X)
    assert isinstance(p, sp.csr_array) and p.dtype == bool and p.shape == (9, 9)
    np.testing.assert_array_equal(p.toarray(), tridiagonal(9))
    arrow = tidu.hessian_sparsity(arrowhead)(X).toarray()
    want = np.eye(9, dtype=bool)
    want[0, :] = want[:, 0] = True
    np.testing.assert_array_equal(arrow, want)


@pytest.mark.parametrize("fn, xfn", [
    (lambda x: tnp.sin(x[1:]) * x[:-1], lambda x: jnp.sin(x[1:]) * x[:-1]),
    (lambda x: tnp.concatenate([x[::-1][:3], tnp.exp(x[2:5])]),
     lambda x: jnp.concatenate([x[::-1][:3], jnp.exp(x[2:5])])),
    (lambda x: tnp.sum(tnp.reshape(x, (3, 3)) ** 2, axis=0), lambda x: jnp.sum(jnp.reshape(x, (3, 3)) ** 2, axis=0)),
    (lambda x: tnp.reshape(x, (3, 3)).T.ravel() * 2.0, lambda x: jnp.reshape(x, (3, 3)).T.ravel() * 2.0),
    (lambda x: tnp.where(x > 0, x ** 2, x) + x[0], lambda x: jnp.where(x > 0, x ** 2, x) + x[0]),
    (lambda x: tnp.pad(x[2:], 1) + tnp.maximum(x, 2 * x), lambda x: jnp.pad(x[2:], 1) + jnp.maximum(x, 2 * x)),
])
def test_jacobian_sparsity_matches_the_true_pattern(fn, xfn):
    p = tidu.jacobian_sparsity(fn)(X).toarray()
    jac = np.asarray(jax.jit(jax.jacfwd(xfn))(X)).reshape(p.shape)
    # a superset, and here exact: no entry of these Jacobians cancels
    assert not np.any((jac != 0) & ~p)
    np.testing.assert_array_equal(p, jac != 0)


A = np.arange(1.0, 13.0).reshape(3, 4) / 10  # no zero entry: the true Jacobians have no cancelled zeros


@pytest.mark.parametrize("fn, xfn, n", [
    (lambda x: tnp.tanh(A @ x[:4]) * x[8], lambda x: jnp.tanh(A @ x[:4]) * x[8], 9),
    (lambda x: tidu.vmap(lambda r: tnp.tanh(A @ r))(tnp.reshape(x, (5, 4))).ravel(),
     lambda x: jax.vmap(lambda r: jnp.tanh(A @ r))(jnp.reshape(x, (5, 4))).ravel(), 20),
    (lambda x: (tnp.reshape(x[:6], (2, 3)) @ tnp.reshape(x[6:12], (3, 2))).ravel(),
     lambda x: (jnp.reshape(x[:6], (2, 3)) @ jnp.reshape(x[6:12], (3, 2))).ravel(), 12),
    (lambda x: tnp.einsum("bij,bj->bi", tnp.reshape(x[:12], (2, 2, 3)), tnp.reshape(x[12:], (2, 3))).ravel(),
     lambda x: jnp.einsum("bij,bj->bi", jnp.reshape(x[:12], (2, 2, 3)), jnp.reshape(x[12:], (2, 3))).ravel(), 18),
    (lambda x: tnp.outer(x[:3], x[3:]).ravel(), lambda x: jnp.outer(x[:3], x[3:]).ravel(), 5),
], ids=["matvec", "vmapped matvec: block diagonal", "matmul", "batched einsum", "outer"])
def test_products_give_exact_patterns(fn, xfn, n):
    x = np.linspace(0.5, 1.5, n)
    p = tidu.jacobian_sparsity(fn)(x).toarray()
    jac = np.asarray(jax.jit(jax.jacfwd(xfn))(x))
    np.testing.assert_array_equal(p, jac != 0)
    np.testing.assert_allclose(tidu.jacfwd(fn, sparse=True)(x).toarray(), jac, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("fn", [rosen, chain_energy, arrowhead], ids=["rosenbrock", "chain", "arrowhead"])
def test_sparse_hessian_equals_dense_and_jax(fn):
    h = tidu.hessian(fn, sparse=True)(X)
    assert isinstance(h, sp.csr_array) and h.shape == (9, 9)
    dense = tidu.hessian(fn)(X)
    np.testing.assert_allclose(h.toarray(), dense, rtol=1e-12, atol=1e-12)
    ref = np.asarray(jax.jit(jax.hessian(lambda x: fn(x, jnp)))(X))
    np.testing.assert_allclose(h.toarray(), ref, rtol=1e-12, atol=1e-12)
    assert h.nnz == tidu.hessian_sparsity(fn)(X).nnz


def test_sparse_hessian_at_large_n_uses_few_colors():
    from tidu.transforms.coloring import star_coloring

    x = np.linspace(-1, 1, 2000)
    pattern = tidu.hessian_sparsity(rosen)(x)
    assert pattern.nnz == 3 * 2000 - 2 and star_coloring(pattern).max() + 1 == 3
    h = tidu.hessian(rosen, sparse=True)(x)
    ref = np.asarray(jax.jit(jax.hessian(lambda x: rosen(x, jnp)))(x))
    np.testing.assert_allclose(h.toarray(), ref, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("kind", ["jacfwd", "jacrev"])
def test_sparse_jacobians_equal_jax(kind):
    def f(x):
        return tnp.sin(x[1:]) * x[:-1] + tnp.exp(x[1:]) * 0.5

    j = getattr(tidu, kind)(f, sparse=True)(X)
    assert isinstance(j, sp.csr_array) and j.shape == (8, 9)
    ref = np.asarray(jax.jit(jax.jacfwd(lambda x: jnp.sin(x[1:]) * x[:-1] + jnp.exp(x[1:]) * 0.5))(X))
    np.testing.assert_allclose(j.toarray(), ref, rtol=1e-13, atol=1e-14)


def test_other_arguments_and_argnums():
    def f(a, x):
        return tnp.sum(a * x[1:] * x[:-1])

    a = np.linspace(1, 2, 8)
    h = tidu.hessian(f, argnums=1, sparse=True)(a, X)
    ref = np.asarray(jax.jit(jax.hessian(lambda a, x: jnp.sum(a * x[1:] * x[:-1]), argnums=1))(a, X))
    np.testing.assert_allclose(h.toarray(), ref, rtol=1e-13)
    # a new value of the other argument, same shapes: the compiled plan is reused, values change
    h2 = tidu.hessian(f, argnums=1, sparse=True)(2 * a, X)
    np.testing.assert_allclose(h2.toarray(), 2 * ref, rtol=1e-13)


def test_bad_uses_are_clear_errors():
    with pytest.raises(TypeError, match="one argument to differentiate"):
        tidu.hessian(rosen, argnums=(0,), sparse=True)(X)
    with pytest.raises(TypeError, match="float or complex array"):
        tidu.hessian(lambda x: tnp.sum(x), sparse=True)(np.arange(3))
    with pytest.raises(TypeError, match="cannot be used inside another transform"):
        tidu.grad(lambda x: tidu.hessian(rosen, sparse=True)(x).sum())(X)
    with pytest.raises(TypeError, match="one array"):
        tidu.jacfwd(lambda x: (x, x), sparse=True)(X)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7), st.sampled_from(["mul", "sin", "sq"])),
                min_size=1, max_size=6))
def test_random_sums_of_pair_terms(terms):
    """f = sum of terms in pairs of elements: the pattern holds every true nonzero of the
    Hessian and the sparse values equal JAX's."""
    def f(x, xp=tnp):
        total = xp.sum(x ** 2) * 0.5
        for i, j, kind in terms:
            total = total + (x[i] * x[j] if kind == "mul" else xp.sin(x[i] + 2 * x[j]) if kind == "sin"
                             else (x[i] - x[j]) ** 2 * x[i])
        return total

    x = np.linspace(0.3, 1.1, 8)
    ref = np.asarray(jax.jit(jax.hessian(lambda x: f(x, jnp)))(x))
    pattern = tidu.hessian_sparsity(f)(x).toarray()
    assert not np.any((np.abs(ref) > 1e-14) & ~pattern)
    h = tidu.hessian(f, sparse=True)(x)
    np.testing.assert_allclose(h.toarray(), ref, rtol=1e-12, atol=1e-12)


def test_complex_arguments():
    """A holomorphic function of complex z: its sparse Hessian (f''(z), holomorphic=True)
    equals the dense one; a real function of z has none (refused, dense and sparse alike);
    Jacobians of complex maps are read column by column."""
    def f(z):
        return tnp.sum((z[1:] * z[:-1]) ** 2) + tnp.sum(z ** 3)

    z = np.linspace(0.3, 1.2, 6) + 1j * np.linspace(-0.5, 0.4, 6)
    dense = tidu.hessian(f, holomorphic=True)(z)
    np.testing.assert_allclose(tidu.hessian(f, holomorphic=True, sparse=True)(z).toarray(), dense,
                               rtol=1e-13, atol=1e-13)
    with pytest.raises(TypeError, match="holomorphic=True"):
        tidu.hessian(lambda z: tnp.sum(tnp.abs(z) ** 2), sparse=True)(z)

    def g(z):
        return z[1:] * tnp.conj(z[:-1])
    for kind in ("jacfwd", "jacrev"):
        np.testing.assert_allclose(getattr(tidu, kind)(g, sparse=True)(z).toarray(), getattr(tidu, kind)(g)(z),
                                   rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("fn", [rosen, lambda x, xp=tnp: xp.sum(xp.sin(x)) ** 2 + xp.sum(x ** 4)],
                         ids=["sparse: through the coloring", "dense: stopped early, batched basis"])
def test_dense_hessian_of_many_variables(fn):
    x = np.linspace(-0.9, 1.1, 300)
    ref = np.asarray(jax.jit(jax.hessian(lambda x: fn(x, jnp)))(x))
    np.testing.assert_allclose(tidu.hessian(fn)(x), ref, rtol=1e-12, atol=1e-9)


def test_patterns_through_tidus_elementwise_rules_stay_elementwise():
    """logaddexp (so softplus, log_sigmoid) carries a derivative rule of its own (a
    custom_jvp call): its patterns were dense (every output on every input); declared
    elementwise, they are the true ones, and the sparse Hessian equals the dense one."""
    import tidu.nn as tnn

    x = np.linspace(0.1, 1.3, 7)
    for fn in (lambda v: tnp.logaddexp(v[1:], v[:-1]), lambda v: tnn.softplus(v[1:] * v[:-1]),
               lambda v: tnn.log_sigmoid(v) * 2.0, lambda v: tnp.logaddexp2(v, 0.5)):
        pattern = tidu.jacobian_sparsity(fn)(x).toarray()
        np.testing.assert_array_equal(pattern, tidu.jacfwd(fn)(x) != 0)
    f = lambda v: tnp.sum(tnn.softplus(v[1:] - v[:-1] ** 2))  # noqa: E731
    np.testing.assert_array_equal(tidu.hessian_sparsity(f)(x).toarray(), tidu.hessian(f)(x) != 0)
