"""Mixing up JAX and tidu gets an error that says which to use: a tidu transform called
inside jax.jit, and jax.numpy called inside a tidu transform."""

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


def f(x):
    return tnp.sum(tnp.sin(x))


def test_a_tidu_transform_inside_jax_jit_points_to_to_jax():
    with pytest.raises(TypeError, match=r"argument x is a JAX tracer.*tidu\.to_jax\(tidu\.grad\(f\)\)"):
        jax.jit(tidu.grad(f))(np.ones(3, np.float32))
    np.testing.assert_allclose(jax.jit(tidu.to_jax(tidu.grad(f)))(np.ones(3)), np.cos(np.ones(3)), rtol=1e-6)


@pytest.mark.parametrize("transform", [tidu.grad, tidu.jit, lambda g: tidu.vmap(tidu.grad(g))],
                         ids=["grad", "jit", "vmap(grad)"])
def test_jax_numpy_inside_a_tidu_transform_points_to_tidu_numpy(transform):
    def uses_jnp(x):
        return jnp.sum(jnp.sin(x))

    with pytest.raises(TypeError, match=r"uses_jnp called a JAX function.*use tidu\.numpy"):
        transform(uses_jnp)(np.ones(3))
