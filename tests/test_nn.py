"""tidu.nn against jax.nn: values, gradients and (for a few) Hessians, traced and eager,
away from the kinks, plus JAX's derivative at the kinks of relu-like functions."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import tidu  # noqa: E402
import tidu.nn as tnn  # noqa: E402
import tidu.numpy as tnp  # noqa: E402

ELEMENTWISE = ["celu", "elu", "gelu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh", "identity",
               "leaky_relu", "log_sigmoid", "mish", "relu", "relu6", "selu", "sigmoid", "silu", "soft_sign",
               "softplus", "sparse_plus", "sparse_sigmoid", "squareplus", "swish", "tanh"]
# points away from every kink (0, +-1, +-3, 6) and into the saturated tails
X = np.array([-40.0, -7.3, -2.2, -0.7, -0.2, 0.3, 0.9, 1.6, 4.4, 8.1, 35.0])


@pytest.mark.parametrize("names", [pytest.param(("sigmoid", "softplus", "gelu", "silu"), id="common"),
                                   pytest.param(tuple(ELEMENTWISE), id="all", marks=pytest.mark.slow)])
def test_elementwise_activations_match_jax(names: tuple[str, ...]) -> None:
    """Several in one program (one trace): values, eager and traced, and each one's
    derivative (the diagonal of the Jacobian of the stacked values)."""
    cases = [(name, {}) for name in names]
    if len(names) == len(ELEMENTWISE):
        cases += [("elu", {"alpha": 0.5}), ("celu", {"alpha": 2.0}), ("leaky_relu", {"negative_slope": 0.2})]

    def stacked(lib, xp):
        return lambda v: xp.stack([getattr(lib, n)(v, **kw) for n, kw in cases] + [lib.log1mexp(xp.abs(v) + 1e-3)])

    t, j = stacked(tnn, tnp), stacked(jax.nn, jnp)
    want = j(X)
    np.testing.assert_allclose(t(X), want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(tidu.jit(t)(X), want, rtol=1e-12, atol=1e-14)
    got_d = np.diagonal(tidu.jacfwd(t)(X), axis1=1, axis2=2)
    want_d = np.diagonal(jax.jacfwd(j)(X), axis1=1, axis2=2)
    for k, (name, _) in enumerate([*cases, ("log1mexp", {})]):
        np.testing.assert_allclose(got_d[k], want_d[k], rtol=1e-10, atol=1e-12, err_msg=name)


def test_derivatives_at_the_kinks_are_jaxs() -> None:
    kinks = np.array([0.0, -1.0, 1.0, -3.0, 3.0, 6.0])
    for name in ("relu", "relu6", "hard_tanh", "hard_sigmoid", "leaky_relu", "sparse_plus"):
        got = tidu.grad(lambda v, n=name: tnp.sum(getattr(tnn, n)(v)))(kinks)
        want = jax.grad(lambda v, n=name: jnp.sum(getattr(jax.nn, n)(v)))(kinks)
        np.testing.assert_allclose(got, want, err_msg=name)


@pytest.mark.slow  # several programs per axis: CI's slow step
@pytest.mark.parametrize("axis", [-1, 0, (0, 1)])
def test_softmax_family_and_standardize(axis) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4)) * 5
    w = rng.normal(size=(3, 4))
    for name in ("softmax", "log_softmax", "logsumexp", "logmeanexp", "standardize"):
        def t(v, n=name):
            return tnp.sum(getattr(tnn, n)(v, axis=axis) * w) if n != "logsumexp" and n != "logmeanexp" \
                else tnp.sum(getattr(tnn, n)(v, axis=axis))

        def j(v, n=name):
            return jnp.sum(getattr(jax.nn, n)(v, axis=axis) * w) if n != "logsumexp" and n != "logmeanexp" \
                else jnp.sum(getattr(jax.nn, n)(v, axis=axis))

        np.testing.assert_allclose(tidu.jit(t)(x), j(x), rtol=1e-12, err_msg=name)
        np.testing.assert_allclose(tidu.grad(t)(x), jax.grad(j)(x), rtol=1e-9, atol=1e-12, err_msg=name)
    h = tidu.hessian(lambda v: tnp.sum(tnn.log_softmax(v, axis=axis) * w))(x)
    np.testing.assert_allclose(h, jax.hessian(lambda v: jnp.sum(jax.nn.log_softmax(v, axis=axis) * w))(x),
                               rtol=1e-9, atol=1e-12)


def test_glu_and_one_hot() -> None:
    x = np.linspace(-2.0, 2.0, 12).reshape(3, 4)
    np.testing.assert_allclose(tidu.jit(tnn.glu)(x), jax.nn.glu(x), rtol=1e-13)
    np.testing.assert_allclose(tidu.jit(lambda v: tnn.glu(v, axis=0))(x[:2]), jax.nn.glu(x[:2], axis=0), rtol=1e-13)
    labels = np.array([[0, 2], [3, 1]])
    for axis in (-1, 0, 1):
        np.testing.assert_array_equal(tnn.one_hot(labels, 4, axis=axis), jax.nn.one_hot(labels, 4, axis=axis))
    assert tnn.one_hot(np.array([1, 5]), 3).tolist() == [[0, 1, 0], [0, 0, 0]]
    with pytest.raises(ValueError, match="odd size"):
        tnn.glu(np.ones(3))


def test_exact_gelu_through_erf() -> None:
    x = np.linspace(-3.0, 3.0, 13)
    np.testing.assert_allclose(tnn.gelu(x, approximate=False), jax.nn.gelu(x, approximate=False), rtol=1e-14)
    got = tidu.grad(lambda v: tnp.sum(tnn.gelu(v, approximate=False)))(x)
    want = jax.grad(lambda v: jnp.sum(jax.nn.gelu(v, approximate=False)))(x)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
