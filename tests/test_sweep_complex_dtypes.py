"""Complex values and low-precision and integer dtypes through the transforms and back
ends, against independent oracles: NumPy (C99's complex functions, signed zeros and all),
JAX with 64-bit types, and the closed forms of the derivatives."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)

INVERSE = ["arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh"]


def _same_bits_up_to_rounding(got: np.ndarray, want: np.ndarray, rtol: float) -> None:
    """Values within rtol, nan where nan, and the sign of every zero part the same."""
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0, equal_nan=True)
    for part in (np.real, np.imag):
        g, w = part(got), part(want)
        zero = (g == 0) & (w == 0)
        assert np.array_equal(np.signbit(g[zero]), np.signbit(w[zero]))


# points on and next to the branch cuts (both signs of zero) and the branch points
_RE = [-3.0, -2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, 3.0]
_IM = [-2.0, -1.0, -0.0, 0.0, 1.0, 2.0]
CUTS = np.array([complex(a, b) for a in _RE for b in _IM])


@pytest.mark.parametrize("name", INVERSE)
def test_complex_inverse_functions_on_branch_cuts_are_numpys(name: str) -> None:
    # (the traced arcsin(3 + 0j) was pi/2 - 1.76j, NumPy's and JAX's pi/2 + 1.76j; arccosh(-2
    # - 0j) had a negative real part; arctanh(1 + 0j) and arctan(1j) had nan parts; arcsinh(-2j)
    # was -1.32 - 1.57j, NumPy's 1.32 - 1.57j)
    with np.errstate(all="ignore"):
        want = getattr(np, name)(CUTS)
    _same_bits_up_to_rounding(np.asarray(tidu.jit(getattr(tnp, name))(CUTS)), want, 1e-15)


@pytest.mark.parametrize("name", INVERSE)
@pytest.mark.parametrize("dtype", ["complex128", "complex64"])
def test_complex_inverse_functions_are_accurate_at_every_scale(name: str, dtype: str) -> None:
    # (arcsin(1e8 + 0j) was nan + inf j, arcsin(1e200 + 1e200j) nan - inf j, arcsinh(1e-9 +
    # 1e-9j) 8e-8 off in its real part, arctan near i 1e-13 off)
    rng = np.random.default_rng(0)
    hi = 300 if dtype == "complex128" else 30
    z = (10.0 ** rng.uniform(-hi, hi, 2000) * np.exp(1j * rng.uniform(-np.pi, np.pi, 2000))).astype(dtype)
    z = np.concatenate([z, np.array([1e-9 + 1e-9j, -0.0245 + 1.0322j, -1.01 + 1e-3j, 1e8, -1e8, 1e8j], dtype)])
    want = getattr(np, name)(z)
    got = np.asarray(tidu.jit(getattr(tnp, name))(z))
    assert got.dtype == dtype
    eps = np.finfo(want.real.dtype).eps
    assert (np.abs(got - want) / np.abs(want)).max() < 4 * eps


@pytest.mark.parametrize("name", INVERSE)
def test_complex_inverse_functions_at_infinities_are_c99s_limits_or_nan(name: str) -> None:
    # (arctan(inf + 0j) must not be a finite wrong value; C99's pi/2 here)
    parts = [np.inf, -np.inf, 0.0, -0.0, 1.0, -5.0]
    z = np.array([complex(a, b) for a in parts for b in parts if np.isinf(a) or np.isinf(b)])
    with np.errstate(all="ignore"):
        want = getattr(np, name)(z)
    got = np.asarray(tidu.jit(getattr(tnp, name))(z))
    np.testing.assert_allclose(got, want, rtol=1e-15)


def test_complex_inverse_functions_xla_and_c_agree_with_numpy() -> None:
    z = np.concatenate([CUTS, [1e10 + 3j, -1e10 - 0j, 0.3 + 0.4j]])
    program = tidu.make_graph(lambda z: tuple(getattr(tnp, n)(z) for n in INVERSE))(z).program
    c, xla = program.run([z], backend="c"), program.run([z], backend="xla")
    # (XLA's complex sqrt ignores the sign of a zero imaginary part, sqrt(-4 - 0j) is 2j
    # there: the functions compute their square roots from real parts, and agree)
    for name, got_c, got_xla in zip(INVERSE, c, xla, strict=True):
        with np.errstate(all="ignore"):
            want = getattr(np, name)(z)
        _same_bits_up_to_rounding(np.asarray(got_c).reshape(z.shape), want, 1e-14)
        _same_bits_up_to_rounding(np.asarray(got_xla).reshape(z.shape), want, 1e-14)


@pytest.mark.parametrize("name", INVERSE)
def test_complex_inverse_derivatives_are_jaxs(name: str) -> None:
    rng = np.random.default_rng(1)
    z = 10.0 ** rng.uniform(-4, 10, 60) * np.exp(1j * rng.uniform(-np.pi, np.pi, 60))
    z = np.concatenate([z, [1e9 + 1e3j, -1e9 - 5j, 3e8j, 0.3 + 0.2j, -1.01 + 1e-3j, 1e-3 + 1.01j]])
    f, g = getattr(tnp, name), getattr(jnp, name)
    d = np.asarray(tidu.vmap(tidu.grad(f, holomorphic=True))(z))
    np.testing.assert_allclose(d, jax.vmap(jax.grad(g, holomorphic=True))(z), rtol=1e-14)
    # a real function of them: the gradient is the conjugate of JAX's (docs: complex numbers)
    got = tidu.grad(lambda z: tnp.sum(tnp.abs(f(z)) ** 2))(z)
    want = np.conj(jax.grad(lambda z: jnp.sum(jnp.abs(g(z)) ** 2))(z))
    np.testing.assert_allclose(got, want, rtol=1e-13)


@pytest.mark.slow
@pytest.mark.parametrize("name", INVERSE)
def test_complex_inverse_second_derivatives_are_jaxs(name: str) -> None:
    rng = np.random.default_rng(2)
    z = np.concatenate([10.0 ** rng.uniform(-4, 10, 20) * np.exp(1j * rng.uniform(-np.pi, np.pi, 20)), [3e8j]])
    f, g = getattr(tnp, name), getattr(jnp, name)
    dd = np.asarray(tidu.vmap(tidu.hessian(f, holomorphic=True))(z))
    np.testing.assert_allclose(dd, jax.vmap(jax.hessian(g, holomorphic=True))(z), rtol=1e-9)


def test_eager_complex_inverse_functions_are_numpys() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in INVERSE:
            with np.errstate(all="ignore"):
                _same_bits_up_to_rounding(np.asarray(getattr(tnp, name)(CUTS)), getattr(np, name)(CUTS), 0)


def _correctly_rounded(got: np.ndarray, exact: np.ndarray, dtype: str) -> bool:
    """Whether ``got`` is ``exact`` rounded to ``dtype``, or its other neighbour where
    ``exact`` is within a thousandth of a unit of the last place of the tie."""
    cr, got = exact.astype(dtype).astype(np.float64), got.astype(np.float64)
    off = got != cr
    tie = np.abs(exact[off] - (got[off] + cr[off]) / 2) <= 1e-3 * np.abs(got[off] - cr[off])
    return bool(np.all(tie))


@pytest.mark.parametrize("name", ["log2", "log10"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_log2_and_log10_are_rounded_once(name: str, dtype: str) -> None:
    # (log(x) / ln 2 rounded twice was up to 1.8 units of the last place off, in an eighth
    # of the float16 values; NumPy's loops compute in float32 and round once)
    x = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(dtype)
    x = x[np.isfinite(x.astype(np.float32)) & (x.astype(np.float32) > 0)]
    exact = getattr(np, name)(x.astype(np.float64))
    assert _correctly_rounded(np.asarray(tidu.jit(getattr(tnp, name))(x)), exact, dtype)
    assert _correctly_rounded(np.asarray(getattr(tnp, name)(x)), exact, dtype)  # eager: NumPy's (bfloat16: tidu's)
    normal = x.astype(np.float32) >= np.finfo(np.float32 if dtype == "bfloat16" else dtype).tiny
    program = tidu.make_graph(getattr(tnp, name))(x[normal]).program  # (XLA flushes subnormals to 0)
    got = np.asarray(program.run([x[normal]], backend="xla")).reshape(-1)
    assert _correctly_rounded(got, exact[normal], dtype)
    v = x[(x.astype(np.float32) > 0.5) & (x.astype(np.float32) < 4)]
    g = tidu.grad(lambda v: tnp.sum(getattr(tnp, name)(v)))(v)
    assert g.dtype == dtype
    want_g = jax.grad(lambda v: jnp.sum(getattr(jnp, name)(v)))(v.astype(np.float64))
    np.testing.assert_allclose(g.astype(np.float64), want_g, rtol=2.0**-7)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_integer_powers_with_negative_exponents_are_the_integer_part(dtype: str) -> None:
    # (docs/numpy.md: the integer part of the power, where NumPy raises and JAX's squaring
    # wraps around: 3 ** -2 is 57 in JAX's int8)
    x = np.array([2, 3, -1, 1, -1, 0, -2, 1, -1], dtype)
    y = np.array([-1, -2, -3, -5, -4, 2, -3, -128, -127], dtype)
    want = [int(1 / a**-b) if a not in (0,) and b < 0 else a**b for a, b in zip(x.tolist(), y.tolist(), strict=True)]
    got = tidu.jit(tnp.power)(x, y)
    assert got.dtype == dtype and got.tolist() == want


@pytest.mark.parametrize("name", ["arcsinh", "arccosh", "arctanh"])
def test_float16_inverse_hyperbolic_functions_are_rounded_once(name: str) -> None:
    # (their compositions in float16 were up to 1.7 units of the last place off, eager
    # NumPy's float32 loop 0.5: the traced value now is the eager one)
    x = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    with np.errstate(all="ignore"):
        x = x[np.isfinite(getattr(np, name)(x.astype(np.float64)))]
        want = getattr(np, name)(x.astype(np.float32)).astype(np.float16)
    assert np.array_equal(np.asarray(tidu.jit(getattr(tnp, name))(x)), want)
    v = np.array([0.3, 0.7, 1.5, 300.0, 1000.0], np.float16)
    v = v[np.abs(v) < 1] if name == "arctanh" else v[v > 1] if name == "arccosh" else v
    g = tidu.vmap(tidu.grad(getattr(tnp, name)))(v)
    assert g.dtype == np.float16
    np.testing.assert_allclose(g.astype(np.float64), jax.vmap(jax.grad(getattr(jnp, name)))(v.astype(np.float64)),
                               rtol=2.0**-10)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_xla_complex_sqrt_keeps_the_sign_of_a_zero_imaginary_part(dtype) -> None:
    # XLA's own complex sqrt gave sqrt(-4 - 0j) = 2j (the other side of the cut); the
    # lowering takes the imaginary part's sign from z's, as C99's csqrt, NumPy and the C
    # back end
    z = np.array([-4 - 0j, -4 + 0j, complex(-0.0, -0.0), 1 - 2j, -3 + 4j, -3 - 4j, complex(-np.inf, -0.0)], dtype)
    program = tidu.make_graph(lambda z: (tnp.sqrt(z), 1 / tnp.sqrt(z), z ** 0.5))(z).program
    with np.errstate(all="ignore"):
        wants = (np.sqrt(z), 1 / np.sqrt(z), z ** 0.5)
    for got, want in zip(program.run([z], backend="xla"), wants, strict=True):
        got = np.asarray(got)
        finite = np.isfinite(want)
        np.testing.assert_allclose(got[finite], want[finite], rtol=1e-6 if dtype == np.complex64 else 1e-15)
        assert (np.signbit(got.imag) == np.signbit(want.imag))[finite].all()
