"""Outside-user sweep of tidu.scipy.special, tnp.fft and the convolutions: regressions
for what the sweep found, checked against SciPy and JAX (x64)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special

import tidu
import tidu.nn
import tidu.numpy as tnp
import tidu.scipy.special as tss

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jax.scipy.special as jss  # noqa: E402

Z = np.array([[1 + 1j, 2j], [0.5 + 0j, -1j]])


@pytest.mark.parametrize("kwargs", [{}, {"axis": 0, "keepdims": True}, {"axis": 1}])
def test_logsumexp_return_sign_complex_traced_as_eager(kwargs):
    """Complex logsumexp with return_sign=True: eagerly SciPy's (log |sum|, phase), traced
    a TypeError; now the same pair in every mode."""
    want = scipy.special.logsumexp(Z, return_sign=True, **kwargs)

    fs = [lambda z: tss.logsumexp(z, return_sign=True, **kwargs),
          lambda z: tnp.logsumexp(z, return_sign=True, **kwargs),
          lambda z: tidu.nn.logsumexp(z, return_sign=True, **kwargs)]
    for got in [g for f in fs for g in (f(Z), tidu.jit(f)(Z))]:
        np.testing.assert_allclose(got[0], want[0], rtol=1e-14)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-14)
        assert np.isrealobj(np.asarray(got[0])) and np.iscomplexobj(np.asarray(got[1]))


def test_logsumexp_return_sign_complex_b_and_derivative():
    a, b = np.array([1.0, 2.0]), np.array([1 + 1j, -2j])
    got = tidu.jit(lambda b: tss.logsumexp(a, b=b, return_sign=True))(b)
    want = jss.logsumexp(a, b=b, return_sign=True)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-14)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-14)

    def loss(lse, xnp):
        def f(z):
            value, sign = lse(z, axis=0, return_sign=True)
            return xnp.sum(xnp.real(sign)) + xnp.sum(value)
        return f

    got = tidu.grad(loss(tss.logsumexp, tnp))(Z)
    want = np.conj(jax.grad(loss(jss.logsumexp, jnp))(Z))  # tidu's cotangents are JAX's conjugates
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_logsumexp_return_sign_complex64_keeps_precision():
    z = Z.astype(np.complex64)
    value, sign = tidu.jit(lambda z: tss.logsumexp(z, return_sign=True))(z)
    assert value.dtype == np.float32 and sign.dtype == np.complex64


def test_poch_at_poles_of_gamma_z_is_scipys():
    """poch(z, m) where Gamma(z) has a pole was nan (JAX's too): SciPy gives 0 where Gamma(z + m)
    is finite, the rising factorial z (z + 1) ... where z + m is a pole too, inf where only
    z + m is one."""
    z = np.array([-1.0, -3.0, -2.0, -4.0, -1.0, -2.0, -2.5, -200.0, 0.0, 1.3])
    m = np.array([2.0, 2.0, -1.0, 3.0, 0.5, 5.0, 1.5, 0.5, 0.0, 2.2])
    want = scipy.special.poch(z, m)
    for got in (tss.poch(z, m), tidu.jit(tss.poch)(z, m)):
        np.testing.assert_allclose(got, want, rtol=1e-13)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_poch_z_derivatives_at_poles_of_gamma_z():
    """d/dz poch(z, m) there is the polynomial's (z + m = pole) or Gamma(z + m) (1/Gamma)'(z)."""
    z = np.array([-1.0, -3.0, -1.0, -2.0, -200.0])
    m = np.array([2.0, 2.0, 0.5, -1.0, 0.5])
    # mpmath: diff(lambda t: rf(t, m), z), once and twice
    d1 = np.array([-1.0, -5.0, 3.544907701811032, -0.1111111111111111, 44.4566060503181])
    d2 = np.array([2.0, 2.0, -2.738755711800145, -0.07407407407407407, -0.22200517733205824])
    np.testing.assert_allclose(tidu.vmap(tidu.grad(tss.poch))(z, m), d1, rtol=1e-9)
    np.testing.assert_allclose(tidu.vmap(tidu.grad(tidu.grad(tss.poch)))(z, m), d2, rtol=1e-8)
    # m = 2 at z = -1: d/dm d/dz = -Gamma(m - 1) digamma(m - 1) = -digamma(1)
    h = tidu.hessian(lambda v: tss.poch(v[0], v[1]))(np.array([-1.0, 2.0]))
    np.testing.assert_allclose(h[0, 1], np.euler_gamma, rtol=1e-12)
    # off the poles, as JAX's
    x, mm = np.linspace(0.3, 3, 4), np.linspace(-0.7, 2.1, 4)
    np.testing.assert_allclose(tidu.vmap(tidu.grad(tss.poch))(x, mm), jax.vmap(jax.grad(jss.poch))(x, mm), rtol=1e-12)
    np.testing.assert_allclose(tidu.vmap(tidu.grad(tss.poch, argnums=1))(x, mm),
                               jax.vmap(jax.grad(jss.poch, argnums=1))(x, mm), rtol=1e-12)


@pytest.mark.parametrize("shape", [(2, 2), ()])
def test_correlate_refuses_inputs_that_are_not_1d_traced_as_numpy(shape):
    """Traced, a 2-D input was flattened and correlated silently ([0.8 0.8 0.8] for a 2x2
    of ones); NumPy refuses it, and a 0-D one."""
    a = np.ones(shape)
    with pytest.raises(ValueError):
        np.correlate(a, [0.3, 0.5])
    with pytest.raises(ValueError, match=r"tnp.correlate: both inputs must be 1-D, got one of shape"):
        tidu.jit(lambda x: tnp.correlate(x, np.array([0.3, 0.5])))(a)
