"""tidu.scipy.special: dtypes of mixed arguments and derivatives at the edges of the
domains, against jax.scipy.special (x64), SciPy, finite differences and mpmath.

Fixed here:
- xlogy, xlog1py, rel_entr, kl_div, beta, betaln, poch, comb, boxcox and boxcox1p of a
  float32 array and a Python float gave float64 (each argument was made an array alone, the
  Python float a float64 one); now float32, eager and traced, as JAX's (and SciPy's ufuncs);
- d/dx xlogy(x, y) at x = 0 was log(1) = 0 where log(y) is not finite: now log(y) (-inf at
  y = 0, inf at y = inf, nan below 0), as JAX's; xlog1py likewise at y = -1;
- boxcox'(0) and boxcox1p'(-1) were exp(lmbda log x) / x = 0 * inf = nan: now the limit
  of x^(lmbda - 1) (inf for lmbda < 1, 1 at 1, 0 above);
- the second and higher derivatives in x of gammainc, gammaincc at x = 0 and betainc at
  x = 0 and 1 were nan (the density's derivative kernel has no value there): now the
  one-sided limits (JAX gives the second ones for a shape below 1).
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
mpmath = pytest.importorskip("mpmath")
scipy_special = pytest.importorskip("scipy.special")
jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.scipy.special as jss  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402
from tidu.scipy import special as tss  # noqa: E402

inf, nan = np.inf, np.nan


def _quiet(f: Callable[..., Any], *args: Any) -> Any:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return f(*args)


def _nth(f: Callable[[Any], Any], n: int) -> Callable[[Any], Any]:
    for _ in range(n):
        f = tidu.grad(f)
    return f


def _same(got: Any, want: Any, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want, err_msg=what)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=what)


# --- dtypes: a Python float is weakly typed -----------------------------------------------------

F32 = np.array([0.0, 0.5, 2.0, 3.25], np.float32)
# (name, tidu's function of the array, JAX's or None, SciPy's or None)
MIXED: list[tuple[str, Callable[[Any], Any], Callable[[Any], Any] | None, Callable[[Any], Any] | None]] = [
    ("xlogy(a, 2.0)", lambda v: tss.xlogy(v, 2.0), lambda v: jss.xlogy(v, 2.0),
     lambda v: scipy_special.xlogy(v, np.float32(2.0))),
    ("xlogy(2.0, a)", lambda v: tss.xlogy(2.0, v), lambda v: jss.xlogy(2.0, v),
     lambda v: scipy_special.xlogy(np.float32(2.0), v)),
    ("xlog1py(a, 2.0)", lambda v: tss.xlog1py(v, 2.0), lambda v: jss.xlog1py(v, 2.0),
     lambda v: scipy_special.xlog1py(v, np.float32(2.0))),
    ("rel_entr(a, 2.0)", lambda v: tss.rel_entr(v, 2.0), lambda v: jss.rel_entr(v, 2.0),
     lambda v: scipy_special.rel_entr(v, np.float32(2.0))),
    ("rel_entr(2.0, a)", lambda v: tss.rel_entr(2.0, v), lambda v: jss.rel_entr(2.0, v),
     lambda v: scipy_special.rel_entr(np.float32(2.0), v)),
    ("kl_div(a, 2.0)", lambda v: tss.kl_div(v, 2.0), lambda v: jss.kl_div(v, 2.0),
     lambda v: scipy_special.kl_div(v, np.float32(2.0))),
    ("beta(a, 2.0)", lambda v: tss.beta(v + 1, 2.0), lambda v: jss.beta(v + 1, 2.0),
     lambda v: scipy_special.beta(v + 1, np.float32(2.0))),
    ("betaln(2.0, a)", lambda v: tss.betaln(2.0, v + 1), lambda v: jss.betaln(2.0, v + 1),
     lambda v: scipy_special.betaln(np.float32(2.0), v + 1)),
    ("poch(2.0, a)", lambda v: tss.poch(2.0, v), lambda v: jss.poch(2.0, v),
     lambda v: scipy_special.poch(np.float32(2.0), v)),
    ("poch(a, 2.0)", lambda v: tss.poch(v + 1, 2.0), lambda v: jss.poch(v + 1, 2.0),
     lambda v: scipy_special.poch(v + 1, np.float32(2.0))),
    ("boxcox(a, 0.5)", lambda v: tss.boxcox(v + 1, 0.5), lambda v: jss.boxcox(v + 1, 0.5),
     lambda v: scipy_special.boxcox(v + 1, np.float32(0.5))),
    ("boxcox(2.0, a)", lambda v: tss.boxcox(2.0, v), lambda v: jss.boxcox(2.0, v),
     lambda v: scipy_special.boxcox(np.float32(2.0), v)),
    ("boxcox1p(a, 0.5)", lambda v: tss.boxcox1p(v, 0.5), lambda v: jss.boxcox1p(v, 0.5),
     lambda v: scipy_special.boxcox1p(v, np.float32(0.5))),
    ("comb(a, 1.0)", lambda v: tss.comb(v + 2, 1.0), None, None),  # (SciPy's comb: float64 always)
    ("gammainc(a, 2.0)", lambda v: tss.gammainc(v + 1, 2.0), lambda v: jss.gammainc(v + 1, 2.0),
     lambda v: scipy_special.gammainc(v + 1, np.float32(2.0))),
    ("betainc(2.0, 3.0, a)", lambda v: tss.betainc(2.0, 3.0, v / 4), lambda v: jss.betainc(2.0, 3.0, v / 4),
     lambda v: scipy_special.betainc(np.float32(2.0), np.float32(3.0), v / 4)),
]


@pytest.mark.parametrize("case", MIXED, ids=[c[0] for c in MIXED])
def test_float32_with_a_python_float_stays_float32(case: tuple[Any, ...]) -> None:
    """Eager and traced: float32, the same numbers bit for bit, JAX's dtype, and SciPy's
    values to float32 rounding."""
    what, f, jf, sf = case
    eager, traced = _quiet(f, F32), _quiet(tidu.jit(f), F32)
    assert np.asarray(eager).dtype == np.float32, what
    _same(eager, traced, what)
    if jf is not None:
        assert np.asarray(jf(F32)).dtype == np.float32, what
    if sf is not None:
        want = _quiet(sf, F32)
        assert want.dtype == np.float32, what
        np.testing.assert_allclose(eager, want, rtol=2e-6, atol=0, err_msg=what)


def test_mixed_dtypes_promote_together_as_jax() -> None:
    """ints alone go to float64; an int32 array with a float32 one gives float32 (JAX's
    promote_args_inexact; SciPy: float64); bfloat16 with a Python float stays bfloat16."""
    i32 = np.array([1, 2], np.int32)
    assert tss.xlogy(i32, 2.0).dtype == np.float64
    assert tss.xlogy(2, 3).dtype == np.float64
    assert tss.xlogy(i32, F32[1:3]).dtype == np.float32 == jss.xlogy(i32, F32[1:3]).dtype
    assert tss.beta(F32[1:3], i32).dtype == np.float32 == jss.beta(F32[1:3], i32).dtype
    bf16 = F32[1:3].astype(tnp.bfloat16)
    for f in (lambda v: tss.xlogy(v, 2.0), lambda v: tss.beta(v, 2.0), lambda v: tss.kl_div(v, 2.0)):
        assert f(bf16).dtype == tnp.bfloat16
        assert tidu.jit(f)(bf16).dtype == tnp.bfloat16


# --- xlogy and xlog1py at x = 0 -----------------------------------------------------------------

XLOGY_AT_ZERO = [0.0, -0.0, 2.0, 0.5, inf, -1.0, -inf, nan]


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
@pytest.mark.parametrize("y", XLOGY_AT_ZERO)
def test_xlogy_derivative_in_x_at_zero_is_the_log(name: str, y: float) -> None:
    """d/dx at x = 0 is log(y) (log1p(y)), as JAX's: -inf at y = 0 (xlogy(1e-9, 0) is
    -inf), inf at y = inf, nan below 0; forward and reverse mode alike. d/dy there is 0
    (xlogy(0, y) is 0 for every y; JAX: nan at y = 0 and 0 * log(nan)), and every higher
    derivative in x is 0 (x log(y) is linear in x). The values stay SciPy's."""
    f, jf, sf = getattr(tss, name), getattr(jss, name), getattr(scipy_special, name)
    if name == "xlog1py":
        y = y - 1.0
    want_x = float(jax.grad(jf)(0.0, y))
    forward = [float(g) for g in _quiet(tidu.jacfwd(f, argnums=(0, 1)), 0.0, y)]
    reverse = [float(g[0]) for g in _quiet(tidu.grad(lambda u, v: tnp.sum(f(u, v)), argnums=(0, 1)),
                                           np.array([0.0]), np.array([y]))]
    want_y = nan if np.isnan(y) else 0.0
    np.testing.assert_allclose(forward, [want_x, want_y], rtol=1e-15)
    np.testing.assert_allclose(reverse, [want_x, want_y], rtol=1e-15)
    assert float(_quiet(_nth(lambda u: f(u, y), 2), 0.0)) == 0.0
    for v in (_quiet(f, 0.0, y), _quiet(tidu.jit(f), 0.0, y)):
        _same(v, sf(0.0, y), f"{name}(0, {y})")


def test_xlogy_edge_derivatives_vectorized_and_mixed_with_interior_points() -> None:
    """A vector holding edge and interior points: the gradient is log(y) entry by entry,
    in jit, vmap and reverse mode; interior points keep the product's derivatives (the
    Hessian at (0, 2) is [[0, 1/2], [1/2, 0]])."""
    x = np.array([0.0, 0.0, 1.5, -2.0, 0.0, 0.0])
    y = np.array([0.0, 2.0, 2.5, 1e-3, inf, -1.0])
    with np.errstate(all="ignore"):
        want = np.log(y)
    got = tidu.jit(tidu.grad(lambda u: tnp.sum(tss.xlogy(u, y))))(x)
    np.testing.assert_array_equal(got, want)
    mapped = _quiet(tidu.vmap(tidu.grad(tss.xlogy)), x, y)
    np.testing.assert_array_equal(mapped, want)
    np.testing.assert_allclose(tidu.hessian(lambda v: tss.xlogy(v[0], v[1]))(np.array([0.0, 2.0])),
                               [[0.0, 0.5], [0.5, 0.0]], rtol=1e-15)
    gy = tidu.grad(lambda v: tnp.sum(tss.xlogy(x[1:4], v)))(y[1:4])
    np.testing.assert_allclose(gy, x[1:4] / y[1:4], rtol=1e-15)


# --- boxcox and boxcox1p at x = 0 (x = -1) ------------------------------------------------------


@pytest.mark.parametrize("lmbda, want", [(0.5, inf), (0.25, inf), (-1.0, inf), (0.0, inf), (1.0, 1.0),
                                         (1.5, 0.0), (2.0, 0.0)])
def test_boxcox_derivative_at_zero_is_the_limit(lmbda: float, want: float) -> None:
    """d/dx (x^lmbda - 1) / lmbda = x^(lmbda - 1): at x = 0 its limit from the right (JAX:
    nan), in both modes, for boxcox at 0 and boxcox1p at -1; the values SciPy's."""
    for f, sf, at in ((tss.boxcox, scipy_special.boxcox, 0.0), (tss.boxcox1p, scipy_special.boxcox1p, -1.0)):
        forward = float(_quiet(tidu.grad(lambda v, f=f: f(v, lmbda)), at))
        reverse = float(_quiet(tidu.grad(lambda v, f=f: tnp.sum(f(v, lmbda))), np.array([at]))[0])
        assert forward == reverse == want, (f.__name__, lmbda, forward, reverse)
        for v in (_quiet(f, at, lmbda), _quiet(tidu.jit(f), at, lmbda)):
            _same(v, sf(at, lmbda), f"{f.__name__}({at}, {lmbda})")


def test_boxcox_edge_against_finite_differences_and_mpmath() -> None:
    """The one-sided difference quotient at 0 grows as h^(lmbda - 1) (2e6 at h = 1e-12 for
    lmbda = 1/2); the second derivative is (lmbda - 1) x^(lmbda - 2)'s limit (-inf), and in
    lmbda boxcox(0, lmbda) = -1 / lmbda has derivative 1 / lmbda^2."""
    h = 1e-12
    quotient = (scipy_special.boxcox(h, 0.5) - scipy_special.boxcox(0.0, 0.5)) / h
    assert quotient == pytest.approx(2e6, rel=1e-3)
    assert float(tidu.grad(tidu.grad(lambda v: tss.boxcox(v, 0.5)))(0.0)) == -inf
    assert float(tidu.grad(lambda m: tss.boxcox(0.0, m))(0.5)) == pytest.approx(4.0, rel=1e-15)
    with mpmath.workdps(30):
        d = mpmath.diff(lambda t: (t ** mpmath.mpf(0.5) - 1) / mpmath.mpf(0.5), mpmath.mpf("1e-20"))
    assert d > 1e9


@pytest.mark.parametrize("lmbda", [0.5, -1.0, 0.0, 1e-9, 2.0])
def test_boxcox_interior_derivatives_as_jax(lmbda: float) -> None:
    x = np.array([1e-5, 0.3, 1.0, 2.5, 7.0])
    for f, jf, shift in ((tss.boxcox, jss.boxcox, 0.0), (tss.boxcox1p, jss.boxcox1p, -0.5)):
        v = x + shift
        got = tidu.grad(lambda u, f=f: tnp.sum(f(u, lmbda)))(v)
        want = jax.grad(lambda u, jf=jf: jf(u, lmbda).sum())(v)
        np.testing.assert_allclose(got, want, rtol=1e-9, err_msg=f.__name__)
        second = [float(_nth(lambda u, f=f: f(u, lmbda), 2)(p)) for p in v]
        want2 = [float(jax.grad(jax.grad(lambda u, jf=jf: jf(u, lmbda)))(p)) for p in v]
        np.testing.assert_allclose(second, want2, rtol=1e-7, err_msg=f.__name__)


# --- gammainc, gammaincc, betainc at the ends --------------------------------------------------


def _falling(a: float, n: int) -> float:
    return math.prod(a - j for j in range(n))


def _gamma_limit(a: float, n: int) -> float:
    """The n-th derivative of P(a, x) at x = 0 from the right: of x^a / Gamma(a + 1) for a
    non-integer a (its other terms add smaller infinities or 0), and for an integer a the
    coefficient of x^n, times n!, of 1 - exp(-x) sum_(j < a) x^j / j!."""
    if a != math.floor(a):
        return math.copysign(inf, _falling(a, n)) if a < n else 0.0
    k = int(a)
    return 0.0 if n < k else math.comb(n - 1, k - 1) * (-1.0) ** (n - k)


def _is_limit_or_nan(got: float, want: float) -> bool:
    """Right, or nan for an integer shape past its order (pow's derivative 0 * x^-1): never a
    wrong number."""
    return bool(np.isnan(got)) or got == pytest.approx(want, rel=1e-13, abs=1e-300)


@pytest.mark.parametrize("a", [0.3, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.5])
def test_incomplete_gamma_derivatives_at_zero_are_the_limits(a: float) -> None:
    """Orders 1 to 4 at x = 0: the limits from the right (P's; Q's are their negatives), in
    forward mode and reverse over forward; exactly so for a non-integer shape, and for an
    integer one up to order a."""
    for n in (1, 2, 3, 4):
        want = _gamma_limit(a, n)
        p = float(_nth(lambda x: tss.gammainc(a, x), n)(0.0))
        q = float(_nth(lambda x: tss.gammaincc(a, x), n)(0.0))
        if a != math.floor(a) or n <= a:
            assert p == pytest.approx(want, rel=1e-13, abs=1e-300), (a, n, p, want)
            assert -q == pytest.approx(want, rel=1e-13, abs=1e-300), (a, n, q, want)
        else:
            assert _is_limit_or_nan(p, want) and _is_limit_or_nan(-q, want), (a, n, p, q, want)
    rev = tidu.grad(lambda v: tnp.sum(tidu.grad(lambda u: tss.gammaincc(a, u))(v[0])))(np.array([0.0]))[0]
    assert float(rev) == -_gamma_limit(a, 2) or (a == 1.0 and np.isnan(rev)), (a, rev)


def test_incomplete_gamma_second_derivative_as_jax_and_mpmath() -> None:
    """gammaincc(0.5, x)'' at 0 is inf (JAX's), gammainc's -inf; mpmath's second derivative
    at 1e-12 and 1e-24 is of that sign and grows as x^-1.5."""
    assert float(tidu.grad(tidu.grad(lambda x: tss.gammaincc(0.5, x)))(0.0)) == inf
    assert float(jax.grad(jax.grad(lambda x: jss.gammaincc(0.5, x)))(0.0)) == inf
    assert float(tidu.grad(tidu.grad(lambda x: tss.gammainc(0.5, x)))(0.0)) == -inf
    with mpmath.workdps(40):
        near = [mpmath.diff(lambda t: mpmath.gammainc(0.5, t, mpmath.inf, regularized=True), mpmath.mpf(e), 2)
                for e in ("1e-12", "1e-24")]
    assert near[0] > 1e17 and near[1] > 1e35


def _beta_limit(a: float, b: float, n: int) -> float:
    """The n-th derivative of I_x(a, b) at x = 0 from the right, for a non-integer a: of
    x^a / (a B(a, b))."""
    return math.copysign(inf, _falling(a, n)) if a < n else 0.0


@pytest.mark.parametrize("a, b", [(0.5, 3.0), (0.5, 0.5), (0.3, 1.5), (1.5, 0.5), (2.5, 0.7), (3.5, 2.0)])
def test_incomplete_beta_derivatives_at_the_ends_are_the_limits(a: float, b: float) -> None:
    """At x = 0 the limits from the right of orders 1 to 4, at x = 1 from the left (through
    I_x(a, b) = 1 - I_(1-x)(b, a): the n-th derivative there is (-1)^(n + 1) times the one
    of I(b, a) at 0)."""
    for n in (1, 2, 3, 4):
        low = float(_nth(lambda x: tss.betainc(a, b, x), n)(0.0))
        assert low == _beta_limit(a, b, n), (a, b, n, low)
        high = float(_nth(lambda x: tss.betainc(b, a, x), n)(1.0))
        assert high == (-1.0) ** (n + 1) * _beta_limit(a, b, n), (b, a, n, high)


def test_incomplete_beta_second_derivative_as_jax_and_mpmath() -> None:
    """betainc(0.5, 3, x)'' at 0 is -inf, as JAX's and mpmath's limit (-4.7e14 at 1e-10);
    at integer shapes the values up to order a are the polynomial's (betainc(2, 2.5, x)'' at
    0 is 1 / B(2, 2.5) = 8.75) and the first derivative at a = 1 is b (as before)."""
    assert float(tidu.grad(tidu.grad(lambda x: tss.betainc(0.5, 3.0, x)))(0.0)) == -inf
    assert float(jax.grad(jax.grad(lambda x: jss.betainc(0.5, 3.0, x)))(0.0)) == -inf
    with mpmath.workdps(40):
        near = mpmath.diff(lambda t: mpmath.betainc(0.5, 3.0, 0, t, regularized=True), mpmath.mpf("1e-10"), 2)
    assert near < -1e14
    assert float(tidu.grad(tidu.grad(lambda x: tss.betainc(2.0, 2.5, x)))(0.0)) == pytest.approx(8.75, rel=1e-14)
    assert float(tidu.grad(lambda x: tss.betainc(1.0, 3.0, x))(0.0)) == pytest.approx(3.0, rel=1e-15)
    assert float(tidu.grad(lambda x: tss.betainc(2.0, 1.0, x))(1.0)) == pytest.approx(2.0, rel=1e-15)


def test_incomplete_functions_at_the_ends_keep_values_and_shape_derivatives() -> None:
    """The values at the ends are SciPy's bit for bit (signs of zeros included), eager and
    traced, float32 and float64, for edge and interior points together; the derivative in
    the shape at x = 0 is 0 (P(a, 0) = 0 for every a); a vmap over shapes gives each one's
    limit."""
    a = np.array([0.5, 1.0, 2.5, 0.0, -1.0, inf, nan, 3.0, 0.5, 700.0])
    x = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.7, -0.0, 0.0])
    b = np.array([3.0, 1.0, 0.5, 2.0, 1.0, 1.0, 1.0, 2.0, 0.5, 2.0])
    for dt in (np.float64, np.float32):
        av, bv, xv = a.astype(dt), b.astype(dt), x.astype(dt)
        for name in ("gammainc", "gammaincc"):
            f, sf = getattr(tss, name), getattr(scipy_special, name)
            for got in (_quiet(f, av, xv), _quiet(tidu.jit(f), av, xv)):
                _same(got, _quiet(sf, av, xv), name)
        for xe in (xv, 1.0 - xv):
            for got in (_quiet(tss.betainc, av, bv, xe), _quiet(tidu.jit(tss.betainc), av, bv, xe)):
                _same(got, _quiet(scipy_special.betainc, av, bv, xe), "betainc")
    for a0 in (0.5, 1.0, 2.5):
        assert float(tidu.grad(lambda s: tss.gammainc(s, 0.0))(a0)) == 0.0
        assert float(tidu.grad(lambda s: tss.betainc(s, 2.0, 0.0))(a0)) == 0.0
    second = tidu.vmap(tidu.grad(tidu.grad(lambda x, s: tss.gammaincc(s, x))))(
        np.array([0.0, 0.0, 1.0]), np.array([0.5, 1.5, 0.5]))
    want = [inf, -inf, float(jax.grad(jax.grad(lambda x: jss.gammaincc(0.5, x)))(1.0))]
    np.testing.assert_allclose(second, want, rtol=1e-12)


@pytest.mark.parametrize("name", ["gammainc", "gammaincc", "betainc"])
def test_incomplete_functions_inside_as_jax(name: str) -> None:
    """Inside the domain the first and second derivatives in x are JAX's (the primitive's
    rule, untouched)."""
    f, jf = getattr(tss, name), getattr(jss, name)
    shapes = (0.5, 3.0) if name == "betainc" else (0.5,)
    for x in (1e-3, 0.3, 0.9):
        got = [float(_nth(lambda v: f(*shapes, v), n)(x)) for n in (1, 2)]
        want = [float(jax.grad(lambda v: jf(*shapes, v))(x)),
                float(jax.grad(jax.grad(lambda v: jf(*shapes, v)))(x))]
        np.testing.assert_allclose(got, want, rtol=1e-9, err_msg=f"{name} at {x}")
