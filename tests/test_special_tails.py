"""Derivatives of tidu.scipy.special's functions to the fourth order in their tails, against
mpmath at 40 digits: where a derivative rule subtracts terms that are nearly equal there
(erfcx' = 2x erfcx - 2/sqrt(pi) for large x, log(ndtr(x))'s derivatives for x << 0, spence'
= log z / (1 - z) near z = 1, i0e' = i1e - sign(x) i0e for large |x|), the functions take
their values and derivatives from a form that keeps its digits there (a continued fraction,
a Taylor or an asymptotic series)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sc

import tidu
import tidu.scipy.special as ts

mp = pytest.importorskip("mpmath")

RTOL = 1e-10  # the target: every order up to 4 right to 1e-10 wherever it is representable


def nth(f, n: int):
    for _ in range(n):
        f = tidu.grad(f)
    return f


def exact(mf, x: float, n: int) -> float:
    with mp.workdps(40):
        return float(mp.diff(mf, mp.mpf(x), n))


def check_orders(f, mf, points, what: str, rtol: float = RTOL) -> None:
    ds = [nth(f, n) for n in range(1, 5)]
    for x in points:
        for n, d in enumerate(ds, 1):
            want = exact(mf, x, n)
            got = float(d(np.float64(x)))
            assert abs(got - want) <= rtol * abs(want), f"{what} order {n} at {x}: got {got!r}, want {want!r}"


def _erfcx_mp(t):
    return mp.exp(t * t) * mp.erfc(t)


def test_erfcx_derivatives_to_the_fourth_order() -> None:
    # above 3.5 the rule's form lost a factor ~2x^2 per order: the fourth derivative at 26
    # was off by 2.4e-5, at 1000 by 1e7 (relative), the second at 1e5 by 1.6e4
    check_orders(ts.erfcx, _erfcx_mp, [-26.0, -3.0, 0.5, 2.0, 3.4, 3.5, 3.5000001, 5.0, 7.0, 26.0, 1e3, 1e5],
                 "erfcx")


def test_erfcx_taylor_mode_in_the_tail() -> None:
    x = 26.0
    _, terms = tidu.jet(ts.erfcx, (np.float64(x),), ([1.0, 0.0, 0.0, 0.0],))
    for n, t in enumerate(terms, 1):
        want = exact(_erfcx_mp, x, n)
        assert abs(float(t) - want) <= RTOL * abs(want), (n, float(t), want)


def test_erfcx_values_stay_scipys() -> None:
    # above 3.5 the value is the continued fraction's: within a few ulp of SciPy's
    x = np.array([-3.0, 0.5, 3.5, 3.5000001, 3.6, 5.5, 26.0, 1e3, 1e10, 1e300, np.inf, -np.inf, np.nan])
    want = sc.erfcx(x)
    np.testing.assert_allclose(np.asarray(ts.erfcx(x)), want, rtol=1e-15, atol=0)
    np.testing.assert_allclose(np.asarray(tidu.jit(ts.erfcx)(x)), want, rtol=1e-15, atol=0)
    np.testing.assert_allclose(np.asarray(ts.erfcx(np.float32(30.0))), sc.erfcx(30.0), rtol=1e-6)


def test_erfcx_derivatives_vanish_at_infinity() -> None:
    # the rule's 2 x out - 2/sqrt(pi) is inf * 0 there: nan
    d = ts.erfcx
    for _ in range(4):
        d = tidu.grad(d)
        assert float(d(np.inf)) == 0.0 and float(d(1e300)) == 0.0


def _log_ndtr_mp(t):
    return mp.log(mp.ncdf(t)) if t < 0 else mp.log1p(-mp.ncdf(-t))


def test_log_ndtr_derivatives_to_the_fourth_order() -> None:
    # log(ndtr(x)) from -37 to -5: the fourth derivative at -30 was off by 6e-5 (2e-6 at -20);
    # the asymptotic series below -37 by 3e-7 at -38
    check_orders(ts.log_ndtr, _log_ndtr_mp,
                 [-1e4, -1e3, -100.0, -38.0, -37.0, -36.9, -30.0, -20.0, -10.0, -5.0001, -4.9, -1.0, 0.5, 5.0, 20.0],
                 "log_ndtr")


def test_log_ndtr_values_in_both_tails() -> None:
    # (the lower tail and the middle: the upper one, log1p(-ndtr(-x)), is as it was)
    x = np.array([-1e10, -1e3, -38.0, -37.0, -20.0, -5.0001, -5.0, -4.9, -1.0, 0.0])
    with mp.workdps(40):
        want = np.array([float(_log_ndtr_mp(mp.mpf(v))) for v in x])
    np.testing.assert_allclose(np.asarray(ts.log_ndtr(x)), want, rtol=4e-16, atol=0)
    np.testing.assert_allclose(np.asarray(ts.log_ndtr(np.float32(-20.0))), sc.log_ndtr(np.float32(-20.0)), rtol=1e-6)
    assert np.asarray(ts.log_ndtr(-np.inf)) == -np.inf and np.isnan(ts.log_ndtr(np.nan))


def _spence_mp(z):
    return mp.polylog(2, 1 - z)


def test_spence_derivatives_to_the_fourth_order_near_one() -> None:
    # the rule's polynomial below |z - 1| = 0.001 stops at w^4 (the fourth derivative at
    # 1.0005 was off by 1.7e-6) and log z / (1 - z)'s derivatives lose digits as 1 / w^3
    # beyond it (1.6e-8 at 1.0011, 7e-7 at 0.999)
    check_orders(ts.spence, _spence_mp, [0.5, 0.8999, 0.9001, 0.99, 0.999, 0.9995, 1.0, 1.0005, 1.0011, 1.01,
                                          1.0999, 1.1001, 2.0], "spence")


def test_spence_values_near_one() -> None:
    z = 1.0 + np.array([-0.0999, -0.01, -1e-5, -1e-12, 0.0, 1e-12, 1e-5, 0.01, 0.0999, 0.1])
    with mp.workdps(40):
        want = np.array([float(_spence_mp(mp.mpf(v))) for v in z])
    got = np.asarray(ts.spence(z))
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)
    assert got[4] == 0.0 and not np.signbit(got[4])


@pytest.mark.parametrize("nu", [0, 1])
def test_scaled_bessel_derivatives_to_the_fourth_order(nu: int) -> None:
    # i0e' = i1e - sign(x) i0e and i1e' = i0e - i1e (sign(x) + 1/x) cancel for large |x|: the
    # fourth derivative at 1000 was off by 4e-5, at 1e6 by 5e7 (relative)
    f = ts.i0e if nu == 0 else ts.i1e
    check_orders(f, lambda t: mp.besseli(nu, t) * mp.exp(-abs(t)),
                 [0.3, 5.0, 19.99, 20.01, 50.0, 1e3, 1e6, -25.0, -1e3], f"i{nu}e")


def test_scaled_bessel_values_stay_scipys() -> None:
    # above |x| = 20 the value is the asymptotic series': within a few ulp of SciPy's
    x = np.array([-1e3, -20.5, 0.0, 5.0, 20.0, 20.0000001, 25.0, 50.0, 1e10, 1e300, np.inf, -np.inf, np.nan])
    for f, g in ((ts.i0e, sc.i0e), (ts.i1e, sc.i1e)):
        np.testing.assert_allclose(np.asarray(f(x)), g(x), rtol=1e-15, atol=0)
        np.testing.assert_allclose(np.asarray(tidu.jit(f)(x)), g(x), rtol=1e-15, atol=0)
        for dt in (np.float32, np.float16):  # (fewer terms there: the later ones overflow float16)
            np.testing.assert_allclose(np.asarray(f(np.array([-30.0, 25.0], dtype=dt)), dtype=np.float64),
                                       g(np.array([-30.0, 25.0])), rtol=2 * float(np.finfo(dt).eps))


def test_scaled_bessel_taylor_mode_in_the_tail() -> None:
    x = 1000.0
    _, terms = tidu.jet(ts.i1e, (np.float64(x),), ([1.0, 0.0, 0.0, 0.0],))
    for n, t in enumerate(terms, 1):
        want = exact(lambda v: mp.besseli(1, v) * mp.exp(-v), x, n)
        assert abs(float(t) - want) <= RTOL * abs(want), (n, float(t), want)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_tails_at_the_largest_floats(dtype: str) -> None:
    # the tail forms divide by sqrt(pi) (x + K) and sqrt(2 pi) sqrt(x): sqrt(pi) x and 2 pi x
    # overflow there (0 instead of a subnormal erfcx, i0e 0 instead of 1/sqrt(2 pi x))
    big = float(np.finfo(dtype).max)
    x = np.array([big, big / 3, 1e30], dtype)
    for f, g in ((ts.erfcx, sc.erfcx), (ts.i0e, sc.i0e), (ts.i1e, sc.i1e)):
        want = g(x.astype(np.float64)).astype(dtype)
        np.testing.assert_allclose(np.asarray(f(x)), want, rtol=4 * float(np.finfo(dtype).eps), atol=0)
        np.testing.assert_allclose(np.asarray(f(-x)), g(-x.astype(np.float64)).astype(dtype),
                                   rtol=4 * float(np.finfo(dtype).eps), atol=0)


@pytest.mark.parametrize("a,b", [(1e10, 3.0), (3.0, 1e10), (25.0, 0.5), (1e5, 1e5), (30.0, 40.0), (50.0, -3.5),
                                 (19.9, 0.1), (12.0, 11.0), (1e15, 2e15), (2.0, 3.0), (0.5, 0.5)])
def test_betaln_keeps_its_digits_for_large_arguments(a, b):
    # gammaln(a) - gammaln(a + b) cancels for a large a: betaln(1e10, 3) was off by 9e-8;
    # Stirling's form of the difference (or of the whole) keeps the digits, also of the
    # first and second derivatives (digamma and trigamma differences)
    with mp.workdps(50):
        A, B = mp.mpf(a), mp.mpf(b)
        want = float(mp.log(abs(mp.beta(A, B))))
        da, db = (float(mp.digamma(x) - mp.digamma(A + B)) for x in (A, B))
        daa = float(mp.psi(1, A) - mp.psi(1, A + B))
        dab = float(-mp.psi(1, A + B))
    assert abs(float(ts.betaln(a, b)) - want) <= 4e-16 * abs(want)
    assert abs(float(tidu.jit(ts.betaln)(a, b)) - want) <= 4e-16 * abs(want)
    ga, gb = tidu.grad(ts.betaln, argnums=(0, 1))(np.float64(a), np.float64(b))
    np.testing.assert_allclose([ga, gb], [da, db], rtol=1e-12)
    h = tidu.hessian(ts.betaln, argnums=(0, 1))(np.float64(a), np.float64(b))
    np.testing.assert_allclose([h[0][0], h[0][1]], [daa, dab], rtol=1e-9, atol=1e-300)
