"""Outside-user sweep: transforms composed as a JAX user writes them, against JAX (x64)
and exact oracles: tangent dtypes in jvp/linearize, jax.jit's keyword arguments,
to_jax's weakly typed Python numbers, elementary_derivative of tan and the logistic."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

X = np.array([1.0, 2.0])


# --- jvp / linearize: a float primal's tangent is never an integer (JAX's TypeError) ---

@pytest.mark.parametrize("tangent", [np.array([1, 2]), np.array([True, False]), np.array([1, 2], np.int8)])
def test_jvp_refuses_integer_and_bool_tangents_for_float_primals(tangent):
    with pytest.raises(TypeError):
        jax.jvp(jnp.sin, (X,), (tangent,))
    with pytest.raises(TypeError, match=r"^tidu\.jvp: the tangent of argument x is (int8|int64|bool), its primal "
                                        r"has dtype float64.*pass a float64 value"):
        tidu.jvp(tnp.sin, (X,), (tangent,))


def test_jvp_refuses_a_python_int_tangent_for_a_python_float_primal():
    with pytest.raises(TypeError):
        jax.jvp(jnp.sin, (1.0,), (1,))
    with pytest.raises(TypeError, match=r"the tangent of argument x is a Python int.*\(1\.0, not 1\)"):
        tidu.jvp(tnp.sin, (1.0,), (1,))
    with pytest.raises(TypeError, match="is a Python bool"):
        tidu.jvp(lambda a, b: a * b, (1.0, 2.0), (1.0, True))
    # floats stay accepted, and the value is right
    assert np.isclose(tidu.jvp(tnp.sin, (1.0,), (1.0,))[1], math.cos(1.0))


def test_jvp_inside_a_transform_refuses_integer_tangents():
    with pytest.raises(TypeError):
        jax.grad(lambda y: jax.jvp(jnp.sin, (y,), (1,))[1])(1.0)
    with pytest.raises(TypeError, match=r"tidu\.jvp: the tangent of argument x is a Python int"):  # (not x@2)
        tidu.grad(lambda y: tidu.jvp(tnp.sin, (y,), (1,))[1])(1.0)
    # with a float tangent: d/dy cos(y) = -sin(y)
    assert np.isclose(tidu.grad(lambda y: tidu.jvp(tnp.sin, (y,), (1.0,))[1])(1.0), -math.sin(1.0))


def test_linearize_refuses_integer_tangents():
    with pytest.raises(ValueError):
        jax.linearize(jnp.sin, X)[1](np.array([1, 2]))
    f_jvp = tidu.linearize(tnp.sin, X)[1]
    with pytest.raises(TypeError, match=r"^tidu\.linearize: the tangent of argument x is int64"):
        f_jvp(np.array([1, 2]))
    np.testing.assert_allclose(f_jvp(np.array([1.0, 2.0])), np.cos(X) * [1.0, 2.0])


def test_integer_primals_still_take_float0_tangents():
    f0 = tidu.dtypes.float0
    out, t = tidu.jvp(lambda a, n: a * n, (2.0, 3), (1.0, np.zeros((), f0)))
    assert (out, t) == (6.0, 3.0)


# --- jit: jax.jit's donate_argnums / donate_argnames / keep_unused / inline ------------

def test_jit_takes_jax_donation_arguments():
    x = np.array([0.2, 0.5])
    for kw in ({"donate_argnums": 0}, {"donate_argnums": (0,)}, {"donate_argnames": "a"},
               {"keep_unused": True}, {"inline": True}):
        want = jax.jit(lambda a: a * 2, **kw)(x)
        got = tidu.jit(lambda a: a * 2, **kw)(x)
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype
    np.testing.assert_array_equal(x, [0.2, 0.5])  # not overwritten
    got = tidu.jit(lambda a, n: a ** n, static_argnums=1, donate_argnums=0)(x, 3)
    np.testing.assert_allclose(got, x ** 3)


def test_jit_donation_arguments_are_checked():
    with pytest.raises(TypeError, match="donate_argnums must be an int"):
        tidu.jit(lambda a: a, donate_argnums="a")
    with pytest.raises(ValueError, match="both static and donated"):
        tidu.jit(lambda a, b: a, static_argnums=1, donate_argnums=1)
    with pytest.raises(TypeError, match="keep_unused must be True or False"):
        tidu.jit(lambda a: a, keep_unused=1)


# --- to_jax: Python numbers are weakly typed, as in JAX and tidu.jit ---------------------

def _mul(a, b):
    return a * b


X32 = np.array([0.2, 0.5, 1.1], np.float32)


@pytest.mark.parametrize("b", [2.0, 2, 2j])
def test_to_jax_keeps_python_numbers_weakly_typed(b):
    want = jax.jit(_mul)(X32, b)
    for got in (tidu.to_jax(_mul)(X32, b), jax.jit(tidu.to_jax(_mul))(X32, b), tidu.jit(_mul)(X32, b)):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_to_jax_weak_numbers_under_vmap_and_strong_numpy_scalars():
    want = jax.vmap(_mul, in_axes=(0, None))(X32, 2.0)
    got = jax.vmap(tidu.to_jax(_mul), in_axes=(0, None))(X32, 2.0)
    assert got.dtype == want.dtype == np.float32
    got = jax.jit(tidu.to_jax(_mul))(X32, jnp.asarray(2.0))  # a weak JAX scalar
    assert got.dtype == np.float32
    # NumPy scalars and bools are strongly typed
    assert tidu.to_jax(_mul)(X32, np.float64(2.0)).dtype == jax.jit(_mul)(X32, np.float64(2.0)).dtype
    assert tidu.to_jax(_mul)(X32, True).dtype == np.float32
    # a weak scalar alone is float64 (x64)
    assert tidu.to_jax(lambda b: b * 2)(2.0).dtype == np.float64


def test_to_jax_gradient_of_a_weak_argument_is_computed_in_float32():
    g = lambda a, b: tnp.sum(a * b)  # noqa: E731
    want = jax.jit(jax.grad(lambda a, b: jnp.sum(a * b), argnums=1))(X32, 2.0)
    got = jax.jit(tidu.to_jax(tidu.grad(g, argnums=1)))(X32, 2.0)
    assert np.asarray(got) == np.asarray(want)  # the float32 sum, exactly


# --- elementary_derivative: tan and the logistic (tidu.nn.sigmoid) -----------------------

def _tan_derivatives(x0: float, n: int) -> list[float]:
    """tan's derivatives at x0 from its Taylor series: t' = 1 + t^2, by exact recurrence."""
    # coefficients of tan(x0 + h) = sum a_k h^k: a' = 1 + a^2 term by term
    a = [math.tan(x0)]
    for k in range(n):
        sq = sum(a[i] * a[k - i] for i in range(k + 1))
        a.append(((1.0 if k == 0 else 0.0) + sq) / (k + 1))
    return [a[k] * math.factorial(k) for k in range(n + 1)]


def test_elementary_derivative_of_tan():
    want = _tan_derivatives(0.5, 6)
    for k in (1, 3, 6):
        d = tidu.elementary_derivative(tnp.tan, k)
        assert np.isclose(d(0.5), want[k], rtol=1e-10)
    # the chain rule through tan: d/dx tan(x^2) = 2x (1 + tan(x^2)^2)
    d = tidu.elementary_derivative(lambda x: tnp.tan(x * x), 1)
    assert np.isclose(d(0.7), 1.4 * (1 + math.tan(0.49) ** 2), rtol=1e-12)


def test_elementary_derivative_of_the_logistic_primitive():
    def s(x):
        return 1 / (1 + math.exp(-x))

    x0 = 0.3
    v = s(x0)
    # s' = s(1-s), s'' = s(1-s)(1-2s), s''' = s(1-s)(1-6s+6s^2)
    want = {1: v * (1 - v), 2: v * (1 - v) * (1 - 2 * v), 3: v * (1 - v) * (1 - 6 * v + 6 * v * v)}
    for k, w in want.items():
        assert np.isclose(tidu.elementary_derivative(tidu.nn.sigmoid, k)(x0), w, rtol=1e-12)
    # the same polynomial as the written-out logistic
    a = tidu.elementary_derivative(tidu.nn.sigmoid, 4)
    b = tidu.elementary_derivative(lambda x: 1 / (1 + tnp.exp(-x)), 4)
    assert a.terms == b.terms and np.isclose(a(x0), b(x0), rtol=1e-12)


# --- vjp / linear_transpose: a float output's cotangent is never an integer (as JAX) -----

def test_pullback_refuses_integer_and_bool_cotangents_for_float_outputs():
    with pytest.raises(ValueError):
        jax.vjp(jnp.sin, 1.0)[1](1)
    pullback = tidu.vjp(tnp.sin, X)[1]
    with pytest.raises(TypeError, match=r"^vjp pullback: cotangent 0 is int64, the output has dtype float64"):
        pullback(np.array([1, 2]))
    with pytest.raises(TypeError, match=r"cotangent 0 is int64.*\(1\.0, not 1\)"):
        tidu.vjp(tnp.sin, 1.0)[1](1)
    with pytest.raises(TypeError):
        jax.linear_transpose(lambda a: 2 * a, 1.0)(True)
    with pytest.raises(TypeError, match=r"^tidu\.linear_transpose: cotangent 0 is bool"):
        tidu.linear_transpose(lambda a: 2 * a, 1.0)(True)
    # float cotangents, and an integer output's float0 (or any) cotangent, stay accepted
    np.testing.assert_allclose(pullback(np.array([1.0, 2.0]))[0], np.cos(X) * [1.0, 2.0])
    (ct,) = tidu.vjp(lambda a: (a, 3), 1.0)[1]((2.0, np.zeros((), tidu.float0)))
    assert ct == 2.0
