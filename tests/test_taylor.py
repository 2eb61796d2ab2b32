"""tidu.series and tidu series against sympy.series; tidu.derivative against nested
jax.jacfwd (issue 28)."""

from __future__ import annotations

import numpy as np
import pytest
import sympy

import tidu
import tidu.numpy as tnp
from tidu.cli.main import main

X = sympy.Symbol("x", real=True)

# (tidu function, SymPy expression, point): the benchmark's univariate functions
FUNCTIONS = {
    "exp*sin*tanh": (lambda x: tnp.exp(x) * tnp.sin(x) * tnp.tanh(x), sympy.exp(X) * sympy.sin(X) * sympy.tanh(X)),
    "rational": (lambda x: (x ** 2 + 1.0) / (x ** 3 + 2.0 * x + 3.0), (X ** 2 + 1) / (X ** 3 + 2 * X + 3)),
    "nested trig": (lambda x: tnp.sin(tnp.cos(x) + x), sympy.sin(sympy.cos(X) + X)),
    "logistic": (lambda x: 1.0 / (1.0 + tnp.exp(-x)), 1 / (1 + sympy.exp(-X))),
    "gaussian": (lambda x: tnp.exp(-x * x / 2.0), sympy.exp(-X ** 2 / 2)),
    "log1p*sqrt": (lambda x: tnp.log1p(x * x) * tnp.sqrt(x + 2.0), sympy.log(1 + X ** 2) * sympy.sqrt(X + 2)),
    "power": (lambda x: (x + 2.0) ** 2.5, (X + 2) ** sympy.Rational(5, 2)),
}


def check_series(name, x0, order):
    f, expr = FUNCTIONS[name]
    s = tidu.series(f, x0, order)
    a = sympy.nsimplify(x0)
    ref = sympy.series(expr, X, a, order + 1).removeO()
    h = sympy.Symbol("h")
    coeffs = sympy.Poly(sympy.expand(ref.subs(X, h + a)), h).all_coeffs()[::-1]
    coeffs += [0] * (order + 1 - len(coeffs))
    np.testing.assert_allclose(s.coefficients, [float(c) for c in coeffs], rtol=1e-10, atol=1e-12)
    return s, ref


@pytest.mark.parametrize("name", ["exp*sin*tanh", "logistic"])
def test_series_agrees_with_sympy(name):
    s, ref = check_series(name, 0, 6)
    assert sympy.expand(s.polynomial(X) - ref) == 0  # exact: rationals at 0


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize("x0", [0, 0.5])
def test_series_agrees_with_sympy_every_function(name, x0):
    check_series(name, x0, 8)


def test_cli_series_prints_sympys_polynomial(capsys):
    assert main(["series", "exp(x)*sin(x)", "--wrt", "x", "--order", "6"]) == 0
    out = capsys.readouterr().out.splitlines()
    expected = sympy.series(sympy.exp(X) * sympy.sin(X), X, 0, 7)
    assert out[1] == f"  = {expected}"
    assert out[3:5] == ["  c0 = 0", "  c1 = 1"]


def test_series_bad_input():
    with pytest.raises(ValueError, match="order"):
        tidu.series(tnp.sin, 0.0, -1)
    assert main(["series", "exp(x)", "--wrt", "x", "--about", "y"]) == 2


def test_third_derivative_tensor_agrees_with_nested_jacfwd():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def f(v, np_=tnp):
        return np_.sin(v[0] * v[1]) * np_.exp(v[2]) + v[3] ** 3 * v[4] + np_.tanh(v[0] * v[4])

    x = np.array([0.3, 0.5, 0.7, 1.1, 1.3])
    t = tidu.derivative(f, order=3)(x)
    ref = np.asarray(jax.jit(jax.jacfwd(jax.jacfwd(jax.jacfwd(lambda v: f(v, jnp)))))(x))
    assert t.shape == (5, 5, 5)
    np.testing.assert_allclose(t, ref, rtol=1e-12, atol=1e-12)
    u = tidu.derivative(f, order=3, unique=True)(x)
    idx = tidu.transforms.taylor.unique_indices(5, 3)
    assert u.shape == (35,) and len(idx) == 35
    np.testing.assert_allclose(u, [ref[i] for i in idx], rtol=1e-12, atol=1e-12)
