"""tidu.linearize and tidu.linear_transpose: JAX's transforms of functions, checked
against JAX (float64, CPU) and against the adjoint identity; the fragment-level passes
of those names live in tidu.passes."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402

rng = np.random.default_rng(7)


def energy(m):
    def f(p):
        return {"e": m.sum(m.sin(p["x"]) * p["y"] ** 2), "v": m.exp(-p["x"]) * p["y"][0]}
    return f


def test_linearize_matches_jax_on_pytrees():
    p = {"x": rng.normal(size=3), "y": rng.normal(size=3)}
    out, f_jvp = tidu.linearize(energy(tnp), p)
    j_out, j_jvp = jax.linearize(energy(jnp), p)
    for k in ("e", "v"):
        np.testing.assert_allclose(out[k], j_out[k], rtol=1e-13)
    for _ in range(3):  # the same linear map, called again
        t = {"x": rng.normal(size=3), "y": rng.normal(size=3)}
        got, want = f_jvp(t), j_jvp(t)
        for k in ("e", "v"):
            np.testing.assert_allclose(got[k], want[k], rtol=1e-12, atol=1e-14)


def test_linearize_several_arguments_and_errors():
    def f(x, y):
        return tnp.tanh(x) @ y

    x, y = rng.normal(size=(2, 3)), rng.normal(size=3)
    out, f_jvp = tidu.linearize(f, x, y)
    tx, ty = rng.normal(size=(2, 3)), rng.normal(size=3)
    _, want = jax.jit(jax.jvp, static_argnums=0)(lambda a, b: jnp.tanh(a) @ b, (x, y), (tx, ty))
    np.testing.assert_allclose(f_jvp(tx, ty), want, rtol=1e-12)
    with pytest.raises(ValueError, match="tangents structured like the primals"):
        f_jvp(tx)
    with pytest.raises(ValueError, match=r"tangent 1 has shape \(4,\), its primal has \(3,\)"):
        f_jvp(tx, np.zeros(4))
    with pytest.raises(TypeError, match="at least one primal"):
        tidu.linearize(f)


def test_linear_transpose_matches_jax():
    a = rng.normal(size=(4, 3))

    def lin(m):
        return lambda x, y: (m.matmul(a, x) + 2.0 * y[::-1], m.sum(x) * 3.0)

    x, y = np.zeros(3), np.zeros(4)
    f_t = tidu.linear_transpose(lin(tnp), x, y)
    j_t = jax.linear_transpose(lin(jnp), x, y)
    ct = (rng.normal(size=4), np.float64(0.7))
    got, want = f_t(ct), j_t(ct)
    assert isinstance(got, tuple) and len(got) == 2
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-13)
    # an affine function: its constant offset dropped, as JAX drops it
    (g,) = tidu.linear_transpose(lambda v: 3.0 * v + 1.0, np.zeros(2))(np.array([1.0, 2.0]))
    np.testing.assert_allclose(g, [3.0, 6.0])


def test_linear_transpose_refuses_nonlinear_functions():
    with pytest.raises(TypeError, match="not linear in its arguments.*tidu.vjp"):
        tidu.linear_transpose(lambda v: v * v, np.zeros(3))
    with pytest.raises(TypeError, match="not linear"):
        tidu.linear_transpose(lambda v: tnp.sin(v), np.zeros(3))
    f_t = tidu.linear_transpose(lambda v: 2.0 * v, np.zeros(3))
    with pytest.raises(ValueError, match="cotangent 0 has shape"):
        f_t(np.zeros(2))


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**6))
def test_adjoint_identity_complex(seed):
    """<f(x), y> = <x, f_t(y)> for a random complex linear map (Re of the conjugated
    inner product: f_t is the adjoint)."""
    r = np.random.default_rng(seed)
    a = r.normal(size=(3, 2)) + 1j * r.normal(size=(3, 2))
    b = r.normal(size=3) + 1j * r.normal(size=3)

    def f(x):
        return a @ x + b * tnp.sum(x) + 1j * tnp.conj(x[::-1]).sum()

    x = r.normal(size=2) + 1j * r.normal(size=2)
    y = r.normal(size=3) + 1j * r.normal(size=3)
    (xt,) = tidu.linear_transpose(f, np.zeros(2, complex))(y)
    fx = tidu.jit(f)(x)
    np.testing.assert_allclose(np.real(np.vdot(fx, y)), np.real(np.vdot(x, xt)), rtol=1e-10, atol=1e-12)


def test_nested_in_grad_matches_jax():
    """grad of x -> f_jvp(v) where f is linearized at x: a Hessian-vector product."""
    v = rng.normal(size=3)

    def g(m, lin):
        def inner(x):
            return lin(lambda z: m.sum(m.sin(z) * z), x)[1](v)
        return inner

    x = rng.normal(size=3)
    got = tidu.grad(g(tnp, tidu.linearize))(x)
    want = jax.jit(jax.grad(g(jnp, jax.linearize)))(x)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_the_fragment_passes_are_in_tidu_passes():
    from tidu.passes import FragmentBuilder, linear_transpose, linearize, resolve

    b = FragmentBuilder("f")
    x = b.input("x", tidu.Aval((), "float64"))
    (y,) = b.add_op("sin", [x])
    b.output(y)
    lin = linearize(resolve(b.build()), [b.key_of(y)], ["x"])
    assert linear_transpose(lin).fragment.ops
    with pytest.raises(TypeError, match=r"tidu.passes.linearize"):
        tidu.linearize(resolve(b.build()), [b.key_of(y)], ["x"])
    with pytest.raises(TypeError, match=r"tidu.passes.linear_transpose"):
        tidu.linear_transpose(lin)
