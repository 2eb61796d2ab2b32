"""tidu.scipy.special.sph_harm_y against scipy.special.sph_harm_y and
jax.scipy.special.sph_harm_y (x64): values for every degree n <= 8 and order |m| <= n at
polar angles across [0, pi], the poles included; derivatives in theta and phi (grad of
the real and imaginary parts, jvp, hessian) against JAX's inside (0, pi) and against
finite differences of SciPy's values at and near the poles, where JAX's are nan or inf;
vmap against jax.vmap; float32; n_max as JAX's; the refusals."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.special

os.environ.setdefault("JAX_PLATFORMS", "cpu")
jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jax.scipy.special as jss  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402
from tidu.scipy import special as tss  # noqa: E402

N_MAX = 8
# every (n, m) with n <= 8 and |m| <= n, as columns
DEGREES = np.array([n for n in range(N_MAX + 1) for _ in range(-n, n + 1)])
ORDERS = np.array([m for n in range(N_MAX + 1) for m in range(-n, n + 1)])
POLES = np.array([0.0, np.pi])
NEAR_POLES = np.array([1e-12, 1e-6, 1e-3, np.pi - 1e-3, np.pi - 1e-6, np.pi - 1e-12])
THETA = np.concatenate([POLES, NEAR_POLES, np.linspace(0.0, np.pi, 31)])
PHI = np.linspace(0.0, 2 * np.pi, THETA.size) + 0.1
INSIDE = np.linspace(0.05, np.pi - 0.05, 9)  # where JAX's derivatives are finite
INSIDE_PHI = np.linspace(0.3, 6.0, INSIDE.size)


def _scipy(n: Any, m: Any, theta: Any, phi: Any) -> np.ndarray:
    return scipy.special.sph_harm_y(n, m, np.asarray(theta, np.float64), np.asarray(phi, np.float64))


def _jax(n: int, m: int) -> Callable[[Any, Any], Any]:
    """JAX's Y_n^m of 1-D theta and phi of one length (its n and m are 1-D, one per point)."""
    return lambda t, p: jss.sph_harm_y(jnp.full(t.shape, n), jnp.full(t.shape, m), t, p, n_max=n)


def test_values_against_scipy_for_every_degree_and_order() -> None:
    got = tss.sph_harm_y(DEGREES[:, None], ORDERS[:, None], THETA, PHI)
    assert got.dtype == np.complex128 and got.shape == (DEGREES.size, THETA.size)
    np.testing.assert_allclose(got, _scipy(DEGREES[:, None], ORDERS[:, None], THETA, PHI), rtol=1e-13, atol=2e-15)
    traced = tidu.jit(lambda t, p: tss.sph_harm_y(DEGREES[:, None], ORDERS[:, None], t, p))(THETA, PHI)
    np.testing.assert_allclose(traced, got, rtol=1e-14, atol=1e-16)
    # at the poles only m = 0 is not 0: sqrt((2n + 1) / (4 pi)) (+-1)^n
    at_poles = tss.sph_harm_y(DEGREES[:, None], ORDERS[:, None], POLES, 0.7)
    want = np.where(ORDERS[:, None] == 0, np.sqrt((2 * DEGREES[:, None] + 1) / (4 * np.pi))
                    * np.array([1.0, -1.0]) ** DEGREES[:, None], 0.0)
    np.testing.assert_allclose(at_poles, want, atol=1e-15)


def test_values_against_jax() -> None:
    # JAX pairs the i-th n, m, theta and phi: one point each
    n = np.repeat(DEGREES, THETA.size)
    m = np.repeat(ORDERS, THETA.size)
    theta, phi = np.tile(THETA, DEGREES.size), np.tile(PHI, DEGREES.size)
    want = np.asarray(jss.sph_harm_y(n, m, theta, phi, n_max=N_MAX))
    # within 1e-3 of a pole JAX's sin(theta) (from cos(theta)) loses digits: 4e-5 relative
    # at 1e-6 (SciPy's and tidu's agree to rounding there: above)
    near = np.minimum(theta, np.pi - theta) < 2e-3
    for got in (tss.sph_harm_y(n, m, theta, phi), tss.sph_harm_y(n, m, theta, phi, n_max=N_MAX)):
        np.testing.assert_allclose(got[~near], want[~near], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(got[near], want[near], rtol=1e-4, atol=1e-9)


def test_float32_keeps_complex64() -> None:
    theta, phi = THETA.astype(np.float32), PHI.astype(np.float32)
    want = _scipy(DEGREES[:, None], ORDERS[:, None], theta, phi)
    for fn in (tss.sph_harm_y, tidu.jit(lambda n, m, t, p: tss.sph_harm_y(n, m, t, p, n_max=N_MAX))):
        got = fn(DEGREES[:, None], ORDERS[:, None], theta, phi)
        assert got.dtype == np.complex64  # (SciPy's too; JAX's is complex128)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=3e-6)
    assert scipy.special.sph_harm_y(2, 1, np.float32(0.3), np.float32(0.5)).dtype == np.complex64


# every (n, m) at every point inside (0, pi), as JAX's 1-D arrays: row k of the (K, P) grid
# is (DEGREES[k], ORDERS[k]) at INSIDE, INSIDE_PHI
WEIGHTS = np.random.default_rng(5).uniform(0.5, 1.5, (2, DEGREES.size, INSIDE.size))


def _weighted(ns: Any, t: Any, p: Any) -> Any:
    """The sum of weighted real and imaginary parts of Y_n^m(t, p) over every (n, m) and
    point (``ns``: tidu's numpy, or jax.numpy: JAX's on the flattened grid)."""
    if ns is tnp:
        y = tss.sph_harm_y(DEGREES[:, None], ORDERS[:, None], t, p)
    else:
        k = DEGREES.size
        y = jss.sph_harm_y(np.repeat(DEGREES, t.size), np.repeat(ORDERS, t.size), jnp.tile(t, k), jnp.tile(p, k),
                           n_max=N_MAX).reshape(k, t.size)
    return ns.sum(WEIGHTS[0] * ns.real(y)) + ns.sum(WEIGHTS[1] * ns.imag(y))


def test_gradient_and_hessian_inside_against_jax() -> None:
    got = tidu.grad(lambda t, p: _weighted(tnp, t, p), argnums=(0, 1))(INSIDE, INSIDE_PHI)
    want = jax.grad(lambda t, p: _weighted(jnp, t, p), argnums=(0, 1))(INSIDE, INSIDE_PHI)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-12)
    got_h = tidu.hessian(lambda t, p: _weighted(tnp, t, p), argnums=(0, 1))(INSIDE, INSIDE_PHI)
    want_h = jax.hessian(lambda t, p: _weighted(jnp, t, p), argnums=(0, 1))(INSIDE, INSIDE_PHI)
    for gr, wr in zip(got_h, want_h, strict=True):
        for g, w in zip(gr, wr, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-11)


def test_derivatives_of_each_harmonic_against_jax() -> None:
    """d/dtheta and d/dphi of every Y_n^m (both parts: forward mode, complex tangents), and
    reverse mode of each part alone."""
    k, size = DEGREES.size, INSIDE.size
    ones = np.ones(size)
    for tangents in ((ones, 0 * ones), (0 * ones, ones)):
        _, got = tidu.jvp(lambda t, p: tss.sph_harm_y(DEGREES[:, None], ORDERS[:, None], t, p),
                          (INSIDE, INSIDE_PHI), tangents)
        _, want = jax.jvp(lambda t, p: jss.sph_harm_y(np.repeat(DEGREES, size), np.repeat(ORDERS, size),
                                                      jnp.tile(t, k), jnp.tile(p, k), n_max=N_MAX),
                          (INSIDE, INSIDE_PHI), tangents)
        np.testing.assert_allclose(got, np.asarray(want).reshape(k, size), rtol=1e-11, atol=1e-12)
        for part in (tnp.real, tnp.imag):
            # row r of the Jacobian of the part: the gradient of its sum over row r's points
            # (n and m mapped: traced, so n_max is given)
            rows = tidu.vmap(lambda r, part=part, tangents=tangents: tidu.grad(
                lambda t, p: tnp.sum(part(tss.sph_harm_y(tnp.take(DEGREES, r), tnp.take(ORDERS, r), t, p,
                                                         n_max=N_MAX))),
                argnums=0 if tangents[0][0] else 1)(INSIDE, INSIDE_PHI))(np.arange(k))
            np.testing.assert_allclose(rows, np.asarray(part(got)), rtol=1e-12, atol=1e-13)


def test_jvp_against_jax() -> None:
    dt, dp = np.linspace(-1.0, 1.0, INSIDE.size), np.linspace(0.5, 2.0, INSIDE.size)
    for n, m in ((0, 0), (1, -1), (3, 2), (5, -4), (8, 8), (8, -3)):
        y, dy = tidu.jvp(lambda t, p, n=n, m=m: tss.sph_harm_y(n, m, t, p), (INSIDE, INSIDE_PHI), (dt, dp))
        jy, jdy = jax.jvp(_jax(n, m), (INSIDE, INSIDE_PHI), (dt, dp))
        np.testing.assert_allclose(y, jy, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(dy, jdy, rtol=1e-11, atol=1e-12, err_msg=f"n={n} m={m}")


def _fd_theta(n: int, m: int, theta: np.ndarray, phi: float, order: int) -> np.ndarray:
    """The first or second derivative in theta of SciPy's Y_n^m by finite differences
    (SciPy's own values: an oracle independent of tidu's recurrence): one-sided into
    [0, pi] at the poles (the one-sided limits: Y is a polynomial in sin and cos of theta,
    whose derivatives there are these limits), central elsewhere."""
    h = 1e-3
    k = np.arange(5)
    out = []
    for t in theta:
        if t in (0.0, np.pi):
            sgn = 1.0 if t == 0.0 else -1.0
            f = _scipy(n, m, t + sgn * h * k, phi)
            # 5-point one-sided formulas, error O(h^4) and O(h^3)
            if order == 1:
                d = sgn * (-25 * f[0] + 48 * f[1] - 36 * f[2] + 16 * f[3] - 3 * f[4]) / (12 * h)
            else:
                d = (35 * f[0] - 104 * f[1] + 114 * f[2] - 56 * f[3] + 11 * f[4]) / (12 * h * h)
        else:
            f = _scipy(n, m, t + h * (k - 2), phi)
            if order == 1:
                d = (f[0] - 8 * f[1] + 8 * f[3] - f[4]) / (12 * h)
            else:
                d = (-f[0] + 16 * f[1] - 30 * f[2] + 16 * f[3] - f[4]) / (12 * h * h)
        out.append(d)
    return np.array(out)


POLE_POINTS = np.array([0.0, 2e-3, 0.01, np.pi - 0.01, np.pi - 2e-3, np.pi])


@pytest.mark.parametrize("n", range(N_MAX + 1))
def test_derivatives_at_and_near_the_poles_against_finite_differences(n: int) -> None:
    phi = 0.9
    for m in range(-n, n + 1):
        d1 = _fd_theta(n, m, POLE_POINTS, phi, 1)
        d2 = _fd_theta(n, m, POLE_POINTS, phi, 2)
        scale = max(1.0, float(np.max(np.abs(d2))))
        for part, np_part in ((tnp.real, np.real), (tnp.imag, np.imag)):
            def f(t: Any, part: Any = part, m: int = m) -> Any:
                return tnp.sum(part(tss.sph_harm_y(n, m, t, phi)))
            g = tidu.grad(f)(POLE_POINTS)
            np.testing.assert_allclose(g, np_part(d1), atol=2e-7 * scale, err_msg=f"n={n} m={m}")
            fwd = tidu.jvp(lambda t, part=part, m=m: part(tss.sph_harm_y(n, m, t, phi)), (POLE_POINTS,),
                           (np.ones(POLE_POINTS.size),))[1]
            np.testing.assert_allclose(fwd, g, rtol=1e-13, atol=1e-14)
            for mode in ("FoR", "RoR"):
                h = np.diag(tidu.hessian(f, mode=mode)(POLE_POINTS))
                np.testing.assert_allclose(h, np_part(d2), atol=2e-4 * scale, err_msg=f"n={n} m={m} {mode}")
        # in phi: dY/dphi = i m Y, 0 at the poles for m != 0 (Y is 0 there)
        gp = tidu.grad(lambda p, m=m: tnp.sum(tnp.imag(tss.sph_harm_y(n, m, POLE_POINTS, p))))(np.full(6, phi))
        np.testing.assert_allclose(gp, m * np.real(_scipy(n, m, POLE_POINTS, phi)), atol=1e-13)


def test_exact_derivatives_at_the_poles() -> None:
    """Closed forms: Y_1^1 = -sqrt(3 / (8 pi)) sin(theta) e^(i phi), dY/dtheta = -sqrt(3 /
    (8 pi)) e^(i phi) at theta = 0 (JAX's: nan); Y_1^0 = sqrt(3 / (4 pi)) cos(theta) has
    derivative 0 and second derivative -sqrt(3 / (4 pi)) at 0 and +sqrt(3 / (4 pi)) at pi;
    Y_2^2 = sqrt(15 / (32 pi)) sin^2(theta) e^(2 i phi): second derivative 2 sqrt(15 / (32
    pi)) cos(2 phi) in the real part at both poles."""
    phi = 0.4
    g = tidu.grad(lambda t: tnp.real(tss.sph_harm_y(1, 1, t, phi)))(0.0)
    assert np.isclose(g, -np.sqrt(3 / (8 * np.pi)) * np.cos(phi), rtol=1e-15, atol=0)
    assert np.isnan(jax.grad(lambda t: jnp.real(_jax(1, 1)(t, jnp.array([phi])))[0])(jnp.array([0.0])))[0]
    y10 = lambda t: tnp.real(tss.sph_harm_y(1, 0, t, phi))  # noqa: E731
    assert tidu.grad(y10)(0.0) == 0.0 or abs(tidu.grad(y10)(0.0)) < 1e-16
    np.testing.assert_allclose([tidu.grad(tidu.grad(y10))(t) for t in (0.0, np.pi)],
                               [-np.sqrt(3 / (4 * np.pi)), np.sqrt(3 / (4 * np.pi))], rtol=1e-15)
    y22 = lambda t: tnp.real(tss.sph_harm_y(2, 2, t, phi))  # noqa: E731
    want = 2 * np.sqrt(15 / (32 * np.pi)) * np.cos(2 * phi)
    np.testing.assert_allclose([tidu.grad(tidu.grad(y22))(t) for t in (0.0, np.pi)], [want, want], rtol=1e-14)
    # no nan anywhere in the third derivatives at the poles either
    for n in range(N_MAX + 1):
        for m in range(-n, n + 1):
            d3 = tidu.grad(tidu.grad(tidu.grad(lambda t, n=n, m=m: tnp.real(tss.sph_harm_y(n, m, t, phi)))))
            assert all(np.isfinite(d3(t)) for t in POLES), (n, m)


def test_vmap_against_jax_vmap() -> None:
    n = np.array([0, 1, 3, 5, 8, 8, 2])
    m = np.array([0, -1, 2, -5, 7, -8, 0])
    theta = np.array([0.0, 0.4, 1.3, 2.0, 2.9, np.pi, 1e-4])
    phi = np.linspace(0.1, 6.0, 7)

    def jfn(a: Any, b: Any, t: Any, p: Any) -> Any:  # one point: JAX's takes 1-D arrays
        return jss.sph_harm_y(a[None], b[None], t[None], p[None], n_max=N_MAX)[0]

    want = jax.vmap(jfn)(n, m, theta, phi)
    got = tidu.vmap(lambda a, b, t, p: tss.sph_harm_y(a, b, t, p, n_max=N_MAX))(n, m, theta, phi)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    jitted = tidu.jit(tidu.vmap(lambda a, b, t, p: tss.sph_harm_y(a, b, t, p, n_max=N_MAX)))(n, m, theta, phi)
    np.testing.assert_allclose(jitted, want, rtol=1e-12, atol=1e-14)
    # theta and phi mapped, n and m not; gradients of the real part, inside (0, pi)
    inner = theta[1:5]
    got_g = tidu.vmap(tidu.grad(lambda t, p: tnp.real(tss.sph_harm_y(5, -3, t, p)), argnums=(0, 1)))(inner, phi[1:5])
    want_g = jax.vmap(jax.grad(lambda t, p: jnp.real(jfn(jnp.array(5), jnp.array(-3), t, p)), argnums=(0, 1)))(
        inner, phi[1:5])
    for g, w in zip(got_g, want_g, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-13)
    # mapped n without n_max: its largest degree is unknown, as in JAX
    with pytest.raises(TypeError, match="pass n_max"):
        tidu.vmap(lambda a: tss.sph_harm_y(a, 0, 0.3, 0.2))(n)


def test_n_max_clips_degrees_as_jax() -> None:
    n, m = np.array([10, 3, 6]), np.array([2, -1, 6])
    theta, phi = np.array([0.7, 1.1, 2.0]), np.array([0.2, 3.0, 5.0])
    want = jss.sph_harm_y(n, m, theta, phi, n_max=6)
    got = tss.sph_harm_y(n, m, theta, phi, n_max=6)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got[0], _scipy(6, 2, 0.7, 0.2), rtol=1e-13)


def test_broadcasting_and_out_of_range_orders_as_scipy() -> None:
    n, m = np.array([[2], [3]]), np.array([1, -2, 4])
    theta, phi = 0.8, np.array([0.1, 0.2, 0.3])
    got = tss.sph_harm_y(n, m, theta, phi)
    want = _scipy(n, m, theta, phi)
    assert got.shape == want.shape == (2, 3)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-16)
    assert got[0, 2] == 0 and got[1, 2] == 0  # |m| > n: 0, SciPy's
    assert tss.sph_harm_y(-1, 0, 0.3, 0.5) == _scipy(-1, 0, 0.3, 0.5) == 0
    assert np.isclose(tss.sph_harm_y(2, 1, 0.3, 0.5), _scipy(2, 1, 0.3, 0.5), rtol=1e-14)


def test_refusals() -> None:
    with pytest.raises(TypeError, match="n must be integers"):
        tss.sph_harm_y(2.0, 1, 0.3, 0.5)
    with pytest.raises(TypeError, match="m must be integers"):
        tss.sph_harm_y(2, np.array([1.0]), 0.3, 0.5)
    with pytest.raises(TypeError, match="theta and phi must be real"):
        tss.sph_harm_y(2, 1, 0.3 + 1j, 0.5)
    with pytest.raises(NotImplementedError, match="diff_n=1 is not supported"):
        tss.sph_harm_y(2, 1, 0.3, 0.5, diff_n=1)
    with pytest.raises(TypeError, match="n_max must be"):
        tss.sph_harm_y(2, 1, 0.3, 0.5, n_max=-1)
    with pytest.raises(TypeError, match="pass n_max"):
        tidu.jit(lambda a: tss.sph_harm_y(a, 1, 0.3, 0.5))(np.array(2))
    # n concrete under jit (a constant): its largest degree is known
    assert np.isclose(tidu.jit(lambda t: tss.sph_harm_y(2, 1, t, 0.5))(0.3), _scipy(2, 1, 0.3, 0.5), rtol=1e-14)
