"""jit's static arguments are told apart by type as jax.jit's (1, 1.0 and True are equal
and hash alike, but a function may branch on the type: one program each), and vmap's
in_axes / out_axes may be registered classes (dataclasses) as pytree prefixes, as JAX's."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tidu

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)
X = np.array([0.5, 1.0, 2.0, 3.0])


def branchy(a, c):
    return a * c if isinstance(c, float) else a + c


@pytest.mark.parametrize("order", [(2.0, 2, True), (True, 2, 2.0), (2, 2.0, True)])
def test_static_values_of_other_types_are_other_programs(order) -> None:
    by_num, by_name = tidu.jit(branchy, static_argnums=1), tidu.jit(branchy, static_argnames="c")
    want = jax.jit(branchy, static_argnums=1)
    for c in order:
        np.testing.assert_array_equal(by_num(X, c), want(X, c))
        np.testing.assert_array_equal(by_name(X, c=c), want(X, c))


@dataclasses.dataclass
class Layer:
    w: object
    b: object


tidu.tree_util.register_dataclass(Layer, data_fields=["w", "b"], meta_fields=[])
jax.tree_util.register_dataclass(Layer, data_fields=["w", "b"], meta_fields=[])


def test_vmap_axes_may_be_a_registered_dataclass() -> None:
    arg = Layer(np.arange(6.0).reshape(2, 3), np.arange(3.0))
    got = tidu.vmap(lambda l: l.w * l.b, in_axes=(Layer(0, None),))(arg)
    want = jax.vmap(lambda l: l.w * l.b, in_axes=(Layer(0, None),))(arg)
    np.testing.assert_array_equal(got, want)
    out = tidu.vmap(lambda a: Layer(a, a * 2), out_axes=Layer(0, 1))(np.arange(6.0).reshape(2, 3))
    ref = jax.vmap(lambda a: Layer(a, a * 2), out_axes=Layer(0, 1))(jnp.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(out.w, ref.w)
    np.testing.assert_array_equal(out.b, ref.b)
    g = tidu.grad(lambda w: tidu.numpy.sum(tidu.vmap(lambda l: l.w * l.b, in_axes=(Layer(1, None),))(
        Layer(w, np.arange(3.0)))))(np.ones((3, 2)))
    np.testing.assert_array_equal(g, np.broadcast_to(np.arange(3.0)[:, None], (3, 2)))
    with pytest.raises(ValueError, match="does not match the structure"):
        tidu.vmap(lambda l: l.w * l.b, in_axes=(Layer(0, (0, 1)),))(arg)


def test_a_complex_tangent_or_cotangent_for_a_real_value_is_a_clear_error() -> None:
    x = np.array([1.0, 2.0])
    with pytest.raises(TypeError, match=r"tangent 0 \(of argument x\) is complex"):
        tidu.jvp(tidu.numpy.sin, (x,), (np.array([1j, 0]),))
    with pytest.raises(TypeError, match="cotangent 0 is complex"):
        tidu.vjp(tidu.numpy.sin, x)[1](np.array([1j, 0]))
    # a complex value takes complex tangents and cotangents
    np.testing.assert_allclose(tidu.jvp(tidu.numpy.sin, (x + 0j,), (np.array([1j, 0]),))[1], [1j * np.cos(1.0), 0])
    np.testing.assert_allclose(tidu.vjp(tidu.numpy.sin, x + 0j)[1](np.array([1j, 0]))[0], [1j * np.cos(1.0), 0])
