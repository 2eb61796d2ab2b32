"""tidu.scipy.special (the primitives of rules/special.rules, and the compositions) and
tidu.nn.gelu(approximate=False) against jax.scipy.special: values, first and second
derivatives on a grid inside each domain, float32 and float64, eager and traced,
StableHLO run by XLA, and the C back end."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import mpmath
import numpy as np
import pytest
import scipy.special
import sympy

os.environ.setdefault("JAX_PLATFORMS", "cpu")
jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jax.scipy.special as jss  # noqa: E402
from tidu.lowering import c_build  # noqa: E402
from vmap_util import assert_default_applies_every_rule  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402
from tidu.scipy import special as tss  # noqa: E402

# name -> (the grid inside its domain, jax's function); two-operand functions get a
# second grid shifted into the second operand's domain
GRID = np.linspace(-2.5, 2.5, 10)  # 0 is not on it: see xlogy
UNIT = np.linspace(0.05, 0.95, 10)
POSITIVE = np.linspace(0.2, 3.0, 10)
OFF_POLES = np.linspace(-2.7, 3.3, 10)  # no integer on it: the poles of the gamma family
WIDE = np.linspace(-12.5, 12.5, 10)
UNARY: dict[str, tuple[np.ndarray, Callable[..., Any]]] = {
    "erf": (GRID, jss.erf),
    "erfc": (GRID, jss.erfc),
    "ndtr": (GRID, jss.ndtr),
    "expit": (GRID, jss.expit),
    "logit": (UNIT, jss.logit),
    "entr": (POSITIVE, jss.entr),
    "erfinv": (2 * UNIT - 1, jss.erfinv),
    "erfcinv": (2 * UNIT, jss.erfcinv),
    "ndtri": (UNIT, jss.ndtri),
    "log_ndtr": (WIDE, jss.log_ndtr),
    "gammaln": (OFF_POLES, jss.gammaln),
    "digamma": (OFF_POLES, jss.digamma),
    "gamma": (OFF_POLES, jss.gamma),
    "gammasgn": (OFF_POLES, jss.gammasgn),
    "loggamma": (POSITIVE, jss.loggamma),
    "factorial": (POSITIVE, jss.factorial),
    "i0e": (WIDE, jss.i0e),
    "i1e": (WIDE, jss.i1e),
    "i0": (WIDE, jss.i0),
    "i1": (WIDE, jss.i1),
    "erfcx": (np.linspace(-7.5, 4.0, 10), jss.erfcx),  # float32: overflow below -9.4, cancellation in f'' above
    "exp1": (POSITIVE, jss.exp1),
    "expi": (GRID, jss.expi),
    "sici": (WIDE, jss.sici),
    "fresnel": (WIDE / 4, jss.fresnel),
    "dawsn": (WIDE, jss.dawsn),
}
BINARY: dict[str, tuple[np.ndarray, np.ndarray, Callable[..., Any]]] = {
    # off x = 0, where JAX's custom derivative in x is log(y) and tidu's the branch's, 0
    "xlogy": (GRID, POSITIVE[::-1], jss.xlogy),
    "xlog1py": (GRID, UNIT - 0.5, jss.xlog1py),
    "rel_entr": (POSITIVE, POSITIVE[::-1], jss.rel_entr),
    "kl_div": (POSITIVE, POSITIVE[::-1], jss.kl_div),
    "beta": (POSITIVE, POSITIVE[::-1], jss.beta),
    "betaln": (POSITIVE, POSITIVE[::-1], jss.betaln),
    "poch": (POSITIVE, UNIT - 0.5, jss.poch),
    "comb": (3 * POSITIVE, 0.5 * POSITIVE[::-1], jss.comb),
    "boxcox": (POSITIVE, GRID / 2, jss.boxcox),
    "boxcox1p": (UNIT - 0.5, GRID / 2, jss.boxcox1p),
    "zeta": (POSITIVE + 1.5, POSITIVE[::-1], jss.zeta),
    "polygamma": (np.arange(10) % 4, POSITIVE, jss.polygamma),
    "gammainc": (POSITIVE + 0.5, POSITIVE[::-1] * 2, jss.gammainc),
    "gammaincc": (POSITIVE + 0.5, POSITIVE[::-1] * 2, jss.gammaincc),
    "expn": (np.arange(10) % 5, POSITIVE * 1.5, jss.expn),
    "owens_t": (GRID, np.linspace(-3.1, 2.9, 10), jss.owens_t),  # a < 0, |a| < 1 and a > 1
}
# the operands a function is differentiated in (all by default): zeta is differentiable
# in q only (tidu refuses s, naming it), the incomplete gamma functions in x only,
# polygamma's n is an integer
# the operands differentiated (second derivatives in the first): JAX has no second derivative of gammainc in a
DIFFERENTIABLE = {"zeta": (1, 0), "polygamma": (1,), "gammainc": (1, 0), "gammaincc": (1, 0), "betainc": (2,),
                  "expn": (1,)}
INTEGER_OPERANDS = {"polygamma": (0,), "expn": (0,)}
TOL = {"float64": dict(rtol=1e-12, atol=1e-14), "float32": dict(rtol=2e-5, atol=1e-6)}
# log_ndtr's float32 second derivative in the lower tail: tidu's is within 4e-5 of the
# exact value (mpmath), jax.scipy.special's within 2e-4 (its asymptotic series from -10)
LOOSER = {("log_ndtr", "float32"): dict(rtol=3e-4, atol=1e-6)}


def _erfcx_second(x: np.ndarray) -> np.ndarray:
    """erfcx'' = 2 f + 2x f' with f' = 2x f - 2/sqrt(pi) (jax.hessian of jss.erfcx fails:
    "select cases must have the same shapes")."""
    f = scipy.special.erfcx(x.astype("float64"))
    return np.diag(2 * f + 2 * x * (2 * x * f - 2 / np.sqrt(np.pi))).astype(x.dtype)


def _dawsn_second(x: np.ndarray) -> np.ndarray:
    """Dawson's F'' from mpmath (sqrt(pi)/2 exp(-x^2) erfi(x)): JAX's, -2F - 2x F' of its
    rule, loses digits in the tails (float32 at 12.5: 5e-3 off)."""
    f = lambda v: mpmath.sqrt(mpmath.pi) / 2 * mpmath.exp(-v * v) * mpmath.erfi(v)  # noqa: E731
    with mpmath.workdps(30):
        return np.diag([float(mpmath.diff(f, mpmath.mpf(float(v)), 2)) for v in x]).astype(x.dtype)


SECOND_DERIVATIVE = {"erfcx": _erfcx_second, "dawsn": _dawsn_second}

# the inputs of the functions with a test of their own below
SOFTMAX_X = np.array([[1.0, 2.0, 0.5], [0.1, -1.0, 3.0]])
MULTIGAMMALN_A = np.array([2.0, 3.5])
BETAINC_ABX = (POSITIVE + 0.3, POSITIVE[::-1] * 2, UNIT)
HYP1F1_ABX = (POSITIVE * 2, POSITIVE[::-1] + 0.5, GRID * 4)
# (tests/test_hyp2f1.py has hyp2f1's own tests; these are the batched ones' inputs)
HYP2F1_ABCX = (OFF_POLES, POSITIVE[::-1] + 0.5, POSITIVE + 0.7, GRID * 0.35)
BESSEL_Z = np.array([0.0, 1e-8, 0.5, 3.0, -2.0, 10.0, 20.0])  # JAX's derivatives are nan at the first two
SPENCE_Z = np.array([0.0, 0.3, 0.9, 1.0, 1.0 + 1e-4, 1.7, 2.0, 5.5, 40.0])


def _spence_derivatives(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """spence' = log z / (1 - z) and spence'' = ((1 - z) / z + log z) / (1 - z)^2, -1 and 1/2 at 1."""
    w = z - 1
    first = np.where(w == 0, -1.0, np.log(z) / np.where(w == 0, 1.0, -w))
    second = np.where(w == 0, 0.5, (np.log(z) - w / z) / np.where(w == 0, 1.0, w * w))
    return first, second


def _args(name: str, dtype: str) -> list[np.ndarray]:
    if name in UNARY:
        return [UNARY[name][0].astype(dtype)]
    x, y, _ = BINARY[name]
    ints = INTEGER_OPERANDS.get(name, ())
    return [a.astype("int64" if i in ints else dtype) for i, a in enumerate((x, y))]


def _pair(name: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """tidu's and jax's function, summed to a scalar (for grad and hessian)."""
    mine = getattr(tss, name)
    theirs = UNARY[name][1] if name in UNARY else BINARY[name][2]
    return (lambda *a: _total(tnp, mine(*a))), (lambda *a: _total(jnp, theirs(*a)))


def _total(m: Any, out: Any) -> Any:
    """A scalar of every result (weighted, so each of several results counts)."""
    if isinstance(out, tuple):
        return sum((k + 1) * m.sum(o) for k, o in enumerate(out))
    return m.sum(out)


def _close(got: Any, want: Any, dtype: str, name: str = "") -> None:
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), **LOOSER.get((name, dtype), TOL[dtype]))


def check(name: str, dtype: str) -> None:
    args = _args(name, dtype)
    fn = getattr(tss, name)
    want = jax.jit(UNARY[name][1] if name in UNARY else BINARY[name][2])(*args)
    eager = fn(*args)
    assert np.asarray(eager).dtype == dtype  # float32 stays float32
    _close(eager, want, dtype)
    _close(tidu.jit(fn)(*args), want, dtype)
    mine, theirs = _pair(name)
    argnums = DIFFERENTIABLE.get(name, tuple(range(len(args))))
    for a, b in zip(tidu.grad(mine, argnums=argnums)(*args), jax.jit(jax.grad(theirs, argnums=argnums))(*args),
                    strict=True):
        _close(a, b, dtype)
    # second derivatives in the first differentiable operand (diagonal for an elementwise sum)
    i = argnums[0]

    def at(f: Callable[..., Any]) -> Callable[..., Any]:
        return lambda v: f(*args[:i], v, *args[i + 1:])

    second = SECOND_DERIVATIVE[name](*args) if name in SECOND_DERIVATIVE else jax.jit(jax.hessian(at(theirs)))(args[i])
    _close(tidu.hessian(at(mine))(args[i]), second, dtype, name)


def test_erf_derivatives_in_closed_form() -> None:
    """The fast check: erf' = 2/sqrt(pi) exp(-x^2), erf'' = -2x erf', erfc' = -erf', eager and traced."""
    x = GRID
    d1 = 2 / np.sqrt(np.pi) * np.exp(-x * x)
    np.testing.assert_allclose(tss.erf(x), scipy.special.erf(x), rtol=1e-15)
    np.testing.assert_allclose(tidu.jit(tss.erfc)(x), scipy.special.erfc(x), rtol=1e-15)
    np.testing.assert_allclose(tidu.grad(lambda v: tnp.sum(tss.erf(v)))(x), d1, rtol=1e-14)
    np.testing.assert_allclose(tidu.grad(lambda v: tnp.sum(tss.erfc(v)))(x), -d1, rtol=1e-14)
    np.testing.assert_allclose(tidu.hessian(lambda v: tnp.sum(tss.erf(v)))(x), np.diag(-2 * x * d1), rtol=1e-14)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", [*UNARY, *BINARY])
def test_values_and_derivatives(name: str, dtype: str) -> None:
    check(name, dtype)


def test_ints_scalars_and_domain_edges_as_scipy() -> None:
    np.testing.assert_allclose(tss.erf(np.arange(-2, 3)), scipy.special.erf(np.arange(-2.0, 3.0)), rtol=1e-15)
    assert float(tss.erfc(0.5)) == pytest.approx(scipy.special.erfc(0.5), rel=1e-15)
    np.testing.assert_array_equal(tss.xlogy(np.array([0.0, 0.0]), np.array([0.0, -1.0])), [0.0, 0.0])
    edges = np.array([0.0, 1.0, 1.0, 0.0, -1.0]), np.array([1.0, 0.0, -1.0, -1.0, 1.0])
    for name in ("entr", "rel_entr", "kl_div"):
        args = edges[:1] if name == "entr" else edges
        np.testing.assert_array_equal(getattr(tss, name)(*args), getattr(scipy.special, name)(*args), err_msg=name)
    x = SOFTMAX_X
    np.testing.assert_allclose(tss.softmax(x), scipy.special.softmax(x), rtol=1e-14)  # (all of x, as SciPy)
    np.testing.assert_allclose(tss.softmax(x, axis=-1), scipy.special.softmax(x, axis=-1), rtol=1e-14)
    np.testing.assert_allclose(tss.log_softmax(x, axis=0), scipy.special.log_softmax(x, axis=0), rtol=1e-14)
    np.testing.assert_allclose(tss.logsumexp(x), scipy.special.logsumexp(x), rtol=1e-14)


@pytest.mark.parametrize("name, args", [
    ("xlogy", (0.0, 2.0)), ("xlogy", (0.0, 0.5)), ("xlogy", (1.0, 0.0)), ("xlog1py", (0.0, 1.0)),
    ("xlog1py", (0.0, -0.5)), ("entr", (0.0,)), ("logit", (0.0,)), ("logit", (1.0,)), ("logit", (1e-300,))])
def test_derivatives_at_domain_edges_as_jax(name: str, args: tuple[float, ...]) -> None:
    """At x = 0, d/dx xlogy(x, y) is log(y) (x log(y) is smooth in x), entr' is +inf and
    logit' is inf at 0 and 1: in forward and reverse mode alike, as JAX gives them; the
    values are SciPy's, zeros with their sign."""
    f, want = getattr(tss, name), jax.grad(getattr(jss, name), tuple(range(len(args))))(*args)
    want = [float(w) for w in want]
    nums = tuple(range(len(args)))
    forward = [float(g) for g in tidu.jacfwd(f, argnums=nums)(*args)]
    reverse = [float(g[0]) for g in tidu.grad(lambda *v: tnp.sum(f(*v)), argnums=nums)(*[np.array([a]) for a in args])]
    np.testing.assert_array_equal(forward, want)
    np.testing.assert_array_equal(reverse, want)
    value, scipy_value = tidu.jit(f)(*args), getattr(scipy.special, name)(*args)
    assert value == scipy_value and np.signbit(value) == np.signbit(scipy_value)


def test_relative_entropy_derivatives_at_zero_are_x_log_xs() -> None:
    """d/dx rel_entr(x, y) and kl_div at x = +0 < y are -inf, as entr's is +inf (x log(x/y)
    has derivative log(x / y) + 1); JAX gives 0. The mixed second derivative is -1/y, the
    values and their zeros' signs SciPy's, in both modes."""
    for name in ("rel_entr", "kl_div"):
        f = getattr(tss, name)
        forward = [float(g) for g in tidu.jacfwd(f, argnums=(0, 1))(0.0, 2.0)]
        reverse = [float(g[0]) for g in tidu.grad(lambda x, y, f=f: tnp.sum(f(x, y)), argnums=(0, 1))(
            np.array([0.0]), np.array([2.0]))]
        want = [-np.inf, 0.0 if name == "rel_entr" else 1.0]
        assert forward == want and reverse == want, (name, forward, reverse)
        assert tidu.hessian(lambda v, f=f: f(v[0], v[1]))(np.array([0.0, 2.0]))[1, 0] == -0.5
        for args in ((0.0, 2.0), (0.0, 0.5), (0.0, 0.0), (-0.0, 2.0), (1.0, 2.0)):
            got, want_v = tidu.jit(f)(*args), getattr(scipy.special, name)(*args)
            assert got == want_v and np.signbit(got) == np.signbit(want_v), (name, args)


def test_derivatives_at_removable_branch_points() -> None:
    """boxcox at lmbda = 0, bessel_jn at z = 0 and poch at m = 0 are branches of their own,
    and they carry the derivatives of the function there (a constant branch gave 0):
    d/dlmbda boxcox(x, 0) = log(x)^2 / 2, d2 = log(x)^3 / 3; J_1'(0) = 1/2, J_0''(0) = -1/2,
    J_2''(0) = 1/4; d/dm poch(z, 0) = digamma(z); in forward and reverse mode."""
    for x in (2.0, 0.5):
        lx = np.log(x)
        for f in (lambda lam, x=x: tss.boxcox(x, lam), lambda lam, x=x: tss.boxcox1p(x - 1.0, lam)):
            np.testing.assert_allclose(tidu.grad(f)(0.0), lx ** 2 / 2, rtol=1e-14)
            np.testing.assert_allclose(tidu.grad(lambda v, f=f: tnp.sum(f(v)))(np.array([0.0])), [lx ** 2 / 2],
                                       rtol=1e-14)
            np.testing.assert_allclose(tidu.grad(tidu.grad(f))(0.0), lx ** 3 / 3, rtol=1e-14)
    jn = lambda z: tss.bessel_jn(z, v=3)  # noqa: E731
    np.testing.assert_allclose(tidu.jacfwd(jn)(0.0), [0.0, 0.5, 0.0, 0.0], atol=1e-15)
    np.testing.assert_allclose(tidu.jacfwd(tidu.jacfwd(jn))(0.0), [-0.5, 0.0, 0.25, 0.0], atol=1e-15)
    np.testing.assert_allclose(tidu.grad(lambda z: tnp.sum(tss.bessel_jn(z, v=1)[1]))(np.array([0.0])), [0.5])
    np.testing.assert_array_equal(jn(0.0), [1.0, 0.0, 0.0, 0.0])
    for z in (0.5, 2.0, -1.5):  # d/dm poch(z, 0) = digamma(z), d/dz 0
        want = [0.0, scipy.special.digamma(z)]
        np.testing.assert_allclose([float(g) for g in tidu.jacfwd(tss.poch, argnums=(0, 1))(z, 0.0)], want, rtol=1e-13)
        rev = tidu.grad(lambda a, b: tnp.sum(tss.poch(a, b)), argnums=(0, 1))(np.array([z]), np.array([0.0]))
        np.testing.assert_allclose([float(g[0]) for g in rev], want, rtol=1e-13)
    np.testing.assert_array_equal(tss.poch(np.array([0.0, -1.0, np.inf, np.nan, 0.5]), 0.0), np.ones(5))


def test_tails_and_edges_as_scipy() -> None:
    """Where jax.scipy.special is less accurate than SciPy (log_ndtr above 6, ndtri near 0)
    or differs at an edge (zeta without q, poch's removable poles), tidu is checked against SciPy."""
    x = np.array([-40.0, -25.0, -19.0, -5.0, 0.0, 5.5, 7.0, 9.0, 40.0])
    np.testing.assert_allclose(tss.log_ndtr(x), scipy.special.log_ndtr(x), rtol=1e-13)
    np.testing.assert_allclose(tidu.jit(tss.log_ndtr)(x), scipy.special.log_ndtr(x), rtol=1e-13)
    # d/dx log ndtr = pdf / ndtr, finite in both tails
    dx = tidu.grad(lambda v: tnp.sum(tss.log_ndtr(v)))(x)
    want = np.exp(-0.5 * x * x - scipy.special.log_ndtr(x)) / np.sqrt(2 * np.pi)
    np.testing.assert_allclose(dx, want, rtol=1e-7)
    p = np.array([0.0, 1e-300, 1e-10, 0.3, 0.5, 1 - 1e-12, 1.0, 1.5, np.nan])
    np.testing.assert_array_equal(tss.ndtri(p), scipy.special.ndtri(p))
    np.testing.assert_allclose(tss.erfcinv(np.array([1e-300, 1e-10, 0.3, 1.5])),
                               scipy.special.erfcinv(np.array([1e-300, 1e-10, 0.3, 1.5])), rtol=1e-14)
    np.testing.assert_allclose(tss.zeta(np.array([2.0, 3.5])), scipy.special.zeta([2.0, 3.5]), rtol=1e-15)
    poles = np.array([-3.0, -2.0, -0.0, 0.0, -0.5, np.inf, -np.inf, np.nan])
    np.testing.assert_array_equal(tss.gammasgn(poles), scipy.special.gammasgn(poles))
    np.testing.assert_array_equal(tss.gamma(poles), scipy.special.gamma(poles))
    np.testing.assert_allclose(tss.multigammaln(MULTIGAMMALN_A, 3),
                               [scipy.special.multigammaln(a, 3) for a in MULTIGAMMALN_A], rtol=1e-14)
    g = tidu.grad(lambda a: tss.multigammaln(a, 4))(3.0)
    assert g == pytest.approx(float(jax.jit(jax.grad(lambda a: jss.multigammaln(a, 4)))(3.0)), rel=1e-13)
    exact = [-0.5 if k == 1 else float(sympy.bernoulli(k)) for k in range(31)]  # B_1's sign: SymPy's is +1/2
    np.testing.assert_array_equal(tss.bernoulli(30), exact)
    np.testing.assert_allclose(tss.comb(np.array([5.0, 5.0, 2.0]), np.array([2.0, 7.0, -1.0]), repetition=True),
                               scipy.special.comb(np.array([5.0, 5.0, 2.0]), np.array([2.0, 7.0, -1.0]),
                                                  repetition=True), rtol=1e-13)


def test_third_derivatives_of_the_gamma_family() -> None:
    """The third derivative of gammaln is polygamma(2, x) = -2 zeta(3, x): the chain
    digamma -> zeta(2, x) -> zeta(3, x) closes, at every order."""
    x = np.linspace(0.3, 4.0, 7)
    d3 = tidu.vmap(tidu.grad(tidu.grad(tidu.grad(tss.gammaln))))(x)
    np.testing.assert_allclose(d3, scipy.special.polygamma(2, x), rtol=1e-12)
    d4 = tidu.vmap(tidu.grad(tidu.grad(tidu.grad(lambda v: tss.polygamma(1, v)))))(x)
    np.testing.assert_allclose(d4, scipy.special.polygamma(4, x), rtol=1e-12)


def _partial(f: Callable[..., Any], *orders: int) -> Callable[..., Any]:
    """f's partial derivative, ``orders[k]`` times in its operand k (by nested grads)."""
    for argnum, order in enumerate(orders):
        for _ in range(order):
            f = tidu.grad(f, argnums=argnum)
    return f


def _check_both_back_ends(f: Callable[..., Any], args: tuple[np.ndarray, ...], want: np.ndarray,
                          rtol: float) -> None:
    """vmap(f) at ``args`` equals ``want`` on the NumPy back end and in XLA."""
    np.testing.assert_allclose(tidu.vmap(f)(*args), want, rtol=rtol)
    program = tidu.make_graph(tidu.vmap(f))(*args).program
    np.testing.assert_allclose(program.run(list(args), backend="xla")[0], want, rtol=rtol)


def _mp_gammainc(order_a: int, order_x: int, a: float, x: float) -> float:
    mpmath.mp.dps = 60
    return float(mpmath.diff(lambda s, t: mpmath.gammainc(s, 0, t, regularized=True), (a, x), (order_a, order_x)))


@pytest.mark.parametrize(("order_a", "order_x"), [(1, 0), (2, 0), (3, 0), (1, 1), (2, 1), (1, 2)])
def test_incomplete_gamma_derivatives_in_the_shape_to_any_order(order_a: int, order_x: int) -> None:
    """gammainc's partial derivatives in a (series and continued fraction on Taylor series)
    and mixed ones (the gamma density's) against mpmath, on both sides of x = a + 1 and at
    large a; gammaincc's are their negatives."""
    a = np.array([0.05, 0.7, 1.0, 2.5, 3.0, 9.0, 40.0, 40.0])
    x = np.array([0.3, 2.5, 1.0, 1.0, 6.0, 8.5, 35.0, 52.0])

    want = np.array([_mp_gammainc(order_a, order_x, ai, xi) for ai, xi in zip(a, x, strict=True)])
    np.testing.assert_allclose(tidu.vmap(_partial(tss.gammainc, order_a, order_x))(a, x), want, rtol=1e-11,
                               atol=1e-300)
    np.testing.assert_allclose(tidu.vmap(_partial(tss.gammaincc, order_a, order_x))(a, x), -want, rtol=1e-11,
                               atol=1e-300)


@pytest.mark.parametrize(("order_s", "order_q"), [(1, 0), (2, 0), (3, 0), (1, 1), (2, 1), (1, 2)])
def test_hurwitz_zeta_derivatives_in_s_to_any_order(order_s: int, order_q: int) -> None:
    """zeta's partial derivatives in s (and mixed ones) against mpmath, near the pole at
    s = 1, at small and large q, on the NumPy back end and on XLA."""
    s = np.array([1.02, 1.5, 2.0, 3.3, 7.0, 25.0])
    q = np.array([0.05, 1.0, 2.5, 0.7, 12.0, 300.0])
    mpmath.mp.dps = 60
    want = np.array([float(mpmath.diff(mpmath.zeta, (si, qi), (order_s, order_q)))
                     for si, qi in zip(s, q, strict=True)])
    _check_both_back_ends(_partial(tss.zeta, order_s, order_q), (s, q), want, rtol=1e-11)


@pytest.mark.parametrize(("order_a", "order_b", "order_x"), [(1, 0, 0), (0, 1, 0), (1, 1, 0), (2, 0, 0), (0, 2, 1),
                                                            (2, 1, 0), (1, 0, 1)])
def test_incomplete_beta_derivatives_in_the_shapes_to_any_order(order_a: int, order_b: int, order_x: int) -> None:
    """betainc's partial derivatives in a and b (JAX has none) and mixed ones against
    mpmath, on both sides of x = (a + 1) / (a + b + 2) (the fraction of I or of 1 - I),
    on the NumPy back end and on XLA."""
    a = np.array([0.3, 2.5, 2.5, 8.0, 1.0, 40.0])
    b = np.array([0.5, 1.7, 1.7, 3.0, 12.0, 20.0])
    x = np.array([0.02, 0.3, 0.8, 0.5, 0.97, 0.66])
    mpmath.mp.dps = 40

    def exact(ai: float, bi: float, xi: float) -> float:
        return float(mpmath.diff(lambda p, q, t: mpmath.betainc(p, q, 0, t, regularized=True), (ai, bi, xi),
                                 (order_a, order_b, order_x)))

    want = np.array([exact(*v) for v in zip(a, b, x, strict=True)])
    _check_both_back_ends(_partial(tss.betainc, order_a, order_b, order_x), (a, b, x), want, rtol=1e-10)


def test_beta_cdf_gradient_in_its_shapes_matches_finite_differences() -> None:
    from tidu.scipy import stats

    x, a, b = 0.35, 2.2, 3.1
    got = tidu.grad(lambda a, b: stats.beta.cdf(x, a, b), argnums=(0, 1))(a, b)
    h = 1e-6
    want = [(scipy.special.betainc(a + h, b, x) - scipy.special.betainc(a - h, b, x)) / (2 * h),
            (scipy.special.betainc(a, b + h, x) - scipy.special.betainc(a, b - h, x)) / (2 * h)]
    np.testing.assert_allclose(got, want, rtol=1e-7)


@pytest.mark.parametrize(("order_a", "order_b", "order_x"), [(1, 0, 0), (0, 1, 0), (2, 0, 0), (1, 1, 0), (0, 2, 1),
                                                            (1, 0, 2)])
def test_kummer_derivatives_in_its_parameters_to_any_order(order_a: int, order_b: int, order_x: int) -> None:
    """hyp1f1's partial derivatives in a and b (JAX: the first) and mixed ones against
    mpmath, for x of both signs (Kummer's transformation below 0) and negative a, on the
    NumPy back end and on XLA."""
    a = np.array([1.5, -1.5, 0.3, 8.0, 2.5, 1.0])
    b = np.array([2.5, 3.0, 0.5, 12.0, 1.0, 3.0])
    x = np.array([0.7, -3.0, 15.0, -20.0, 2.0, -0.5])
    mpmath.mp.dps = 40
    want = np.array([float(mpmath.diff(mpmath.hyp1f1, (ai, bi, xi), (order_a, order_b, order_x)))
                     for ai, bi, xi in zip(a, b, x, strict=True)])
    _check_both_back_ends(_partial(tss.hyp1f1, order_a, order_b, order_x), (a, b, x), want, rtol=1e-10)


def test_incomplete_gamma_shape_hessians_in_every_mode_and_on_xla() -> None:
    ax = np.array([2.5, 1.7])
    want = np.array([[_mp_gammainc(2, 0, *ax), _mp_gammainc(1, 1, *ax)],
                     [_mp_gammainc(1, 1, *ax), _mp_gammainc(0, 2, *ax)]])

    def f(v: Any) -> Any:
        return tss.gammainc(v[0], v[1])

    for mode in ("FoF", "FoR", "RoF", "RoR"):
        np.testing.assert_allclose(tidu.hessian(f, mode=mode)(ax), want, rtol=1e-11)
    program = tidu.make_graph(tidu.hessian(f))(ax).program
    assert "stablehlo.while" in program.to_stablehlo()
    np.testing.assert_allclose(program.run([ax], backend="xla")[0], want, rtol=1e-11)
    for dtype in ("float32", "float64"):  # the XLA loops against the NumPy kernels, a wide range of a and x
        large = 300.0 if dtype == "float64" else 40.0  # float32's exponent a log x - lgamma(a + 1) loses digits
        a = np.array([0.0, 1e-3, 0.5, 2.0, 7.5, 30.0, large, 2.0, 0.0, 2.0, -1.0], dtype)
        x = np.array([0.5, 4.0, 0.2, 9.0, 3.0, 29.0, large + 10, 0.0, 3.0, np.inf, 1.0], dtype)
        g = tidu.grad(lambda a, x: tnp.sum(tss.gammainc(a, x)), argnums=(0, 1))
        grads = tidu.make_graph(g)(a, x).program
        for got, want_ in zip(grads.run([a, x], backend="xla"), grads.eval([a, x]), strict=True):
            np.testing.assert_allclose(got, want_, **TOL[dtype])


def test_incomplete_gamma_shape_derivatives_at_the_edges() -> None:
    """-E1(x) at a = 0 (the limit from above), 0 where P is constant (x = 0, x = inf),
    nan outside the domain, as P."""
    d = tidu.vmap(tidu.grad(tss.gammainc))
    a = np.array([0.0, 0.0, 2.0, 2.0, -1.0, 2.0])
    x = np.array([0.5, 3.0, 0.0, np.inf, 1.0, -1.0])
    np.testing.assert_allclose(d(a, x), [-scipy.special.exp1(0.5), -scipy.special.exp1(3.0), 0.0, 0.0, np.nan,
                                         np.nan], rtol=1e-13)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(TypeError, match="polygamma: n must be of an integer dtype"):
        tss.polygamma(1.0, 2.0)
    with pytest.raises(TypeError, match="multigammaln: d"):
        tss.multigammaln(2.0, 1.5)
    with pytest.raises(TypeError, match="bernoulli: n"):
        tss.bernoulli(-1)
    with pytest.raises(ValueError, match="factorial: exact=True"):
        tss.factorial(3, exact=True)
    with pytest.raises(ValueError, match="log_ndtr: series_order"):
        tss.log_ndtr(1.0, series_order=-1)


def test_erf_has_no_complex_dtype() -> None:
    with pytest.raises(Exception, match="erf"):
        tss.erf(np.array([1.0 + 1j]))


def _composite(x: Any) -> Any:
    """erf and erfc with their derivatives in one program."""
    return tnp.sum(tss.erf(x) * x + tss.erfc(0.5 * x) + tss.ndtr(x) ** 2)


def _si(x: Any) -> Any:
    return tss.sici(x)[0]


def _ci(x: Any) -> Any:
    return tss.sici(x)[1]


def _fresnel_s(x: Any) -> Any:
    return tss.fresnel(x)[0]


def _fresnel_c(x: Any) -> Any:
    return tss.fresnel(x)[1]


def _gamma_bessel(x: Any) -> Any:
    """The primitives whose StableHLO is CHLO (lgamma, digamma, zeta, erfinv, i1e) or an
    algorithm of tidu's own (i0e, ndtri), with their derivatives."""
    u = tss.expit(x)
    return tnp.sum(tss.gammaln(x + 3.0) * tss.digamma(x + 3.5) + tss.polygamma(2, x + 3.0)
                   + tss.erfinv(0.9 * tnp.tanh(x)) + tss.i0e(3 * x) * tss.i1e(x) + tss.ndtri(u) * u)


@pytest.mark.parametrize("dtype", ["float64", pytest.param("float32", marks=pytest.mark.slow)])
def test_special_stablehlo_runs_in_xla(dtype: str) -> None:
    pytest.importorskip("jaxlib")
    x = GRID.astype(dtype)
    view = tidu.make_graph(tidu.value_and_grad(_gamma_bessel))(x)
    text = view.to_stablehlo()
    for op in ("chlo.lgamma", "chlo.digamma", "chlo.zeta", "chlo.erf_inv", "chlo.bessel_i1e"):
        assert f'"{op}"(' in text, op
    for a, b in zip(view.program.run([x], backend="xla"), view.program.run([x]), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12 if dtype == "float64" else 1e-4)  # a float32 sum


@pytest.mark.parametrize("dtype", ["float64", pytest.param("float32", marks=pytest.mark.slow)])
def test_numerical_algorithms_in_xla(dtype: str) -> None:
    """The StableHLO algorithms (tidu.lowering.stablehlo_numerics) against SciPy over the
    whole range, special values included (XLA flushes subnormals: they are left out)."""
    pytest.importorskip("jaxlib")
    tiny = np.finfo(dtype).tiny
    lowest = -300 if dtype == "float64" else -30
    p = np.concatenate([[0.0, 1.0, 1.5, -0.1, np.nan], np.logspace(lowest, -1, 60), np.linspace(0.01, 0.99, 49),
                        1 - np.logspace(-15 if dtype == "float64" else -7, -1, 20)]).astype(dtype)
    x = np.concatenate([[0.0, -0.0, np.inf, -np.inf, np.nan], np.linspace(-60, 60, 241),
                        np.logspace(-8, 3, 50)]).astype(dtype)
    tol = 4e-15 if dtype == "float64" else 2e-6
    # expi's series near 40 sums 120 positive terms: a few dozen ulp of rounding
    looser = {"expi": 2e-14 if dtype == "float64" else 2e-6,  # and the Fresnel integrals' fraction near 1.6
              "_fresnel_s": 2e-14 if dtype == "float64" else 2e-6, "_fresnel_c": 2e-14 if dtype == "float64" else 2e-6}
    positive = np.concatenate([[0.0, np.inf, -1.0, np.nan], np.logspace(-8, 2.8, 120)]).astype(dtype)
    signed = np.concatenate([positive, -positive[4:]]).astype(dtype)
    near_one = np.concatenate([positive, 1 + np.logspace(-9, -1, 9), 1 - np.logspace(-9, -1, 9)]).astype(dtype)
    # up to 100: beyond, SciPy's fresnel rounds the phase pi x^2 / 2 (tidu's is reduced exactly)
    signed_100 = np.concatenate([signed[:4], np.linspace(-100, 100, 801)]).astype(dtype)
    for fn, arg, ref in ((tss.ndtri, p, scipy.special.ndtri), (tss.i0e, x, scipy.special.i0e),
                         (tss.i0, x, scipy.special.i0),
                         (tss.erfcx, x, scipy.special.erfcx), (tss.exp1, positive, scipy.special.exp1),
                         (tss.expi, signed, scipy.special.expi), (_si, signed, lambda v: scipy.special.sici(v)[0]),
                         (_ci, signed, lambda v: scipy.special.sici(v)[1]),
                         (tss.spence, near_one, scipy.special.spence),
                         (_fresnel_s, signed_100, lambda v: scipy.special.fresnel(v)[0]),
                         (_fresnel_c, signed_100, lambda v: scipy.special.fresnel(v)[1])):
        got = tidu.make_graph(fn)(arg).program.run([arg], backend="xla")[0]
        want = ref(arg).astype(dtype)
        finite = np.isfinite(want)
        np.testing.assert_array_equal(got[~finite], want[~finite])
        # Ci's zeros: absolute accuracy there (atol), as SciPy's
        atol = 4e-15 if fn is _ci and dtype == "float64" else 2e-7 if fn is _ci else tiny
        np.testing.assert_allclose(got[finite], want[finite], rtol=looser.get(fn.__name__, tol), atol=atol)


@pytest.mark.parametrize(("dtype", "hessian"), [
    ("float64", False), pytest.param("float32", False, marks=pytest.mark.slow),
    *(pytest.param(d, True, marks=pytest.mark.slow) for d in ("float32", "float64"))])
def test_stablehlo_runs_in_xla(dtype: str, hessian: bool) -> None:
    pytest.importorskip("jaxlib")
    x = GRID.astype(dtype)
    for fn in (tidu.hessian(_composite) if hessian else tidu.value_and_grad(_composite),):
        view = tidu.make_graph(fn)(x)
        text = view.to_stablehlo()
        # the derivatives of erf and erfc are exps: only the value needs the chlo ops
        assert fn.kind != "value_and_grad" or ('"chlo.erf"(' in text and '"chlo.erfc"(' in text)
        got = view.program.run([x], backend="xla")
        want = view.program.run([x])
        for a, b in zip(got, want, strict=True):
            _close(a, b, dtype)


@pytest.mark.skipif(c_build.compiler_or_none() is None, reason="no C compiler")
def test_c_back_end(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDU_CACHE_DIR", str(tmp_path))
    x32, x64 = GRID.astype("float32"), GRID
    program = tidu.make_graph(tidu.value_and_grad(_composite))(x64).program
    source = program.to_c()
    assert "erf(" in source and "erfc(" in source
    for a, b in zip(program.run([x64], backend="c"), program.eval([x64]), strict=True):
        _close(a, b, "float64")
    program = tidu.make_graph(tidu.value_and_grad(_composite))(x32).program
    assert "erff(" in program.to_c()
    for a, b in zip(program.run([x32], backend="c"), program.eval([x32]), strict=True):
        _close(a, b, "float32")


@pytest.mark.parametrize("dtype", ["float64", pytest.param("float32", marks=pytest.mark.slow)])
def test_incomplete_gamma_loops_in_xla(dtype: str) -> None:
    """P(a, x) and Q(a, x) in XLA (a stablehlo.while per branch, until every element has
    converged) against SciPy: a from 0.05 to 3000 (float64; float32 to 50, where the
    prefactor's exponent a log x - x keeps float32 to 1e-5), x around a, and the edges."""
    pytest.importorskip("jaxlib")
    rng = np.random.default_rng(5)
    top = 3000 if dtype == "float64" else 50
    a = np.exp(rng.uniform(np.log(0.05), np.log(top), 400))
    x = a * np.exp(rng.normal(0.0, 0.7, 400))
    a = np.concatenate([a, [0.0, 1.0, -1.0, 1.0, 1.0, 2.0, np.nan]]).astype(dtype)
    x = np.concatenate([x, [1.0, 0.0, 1.0, -1.0, np.inf, np.nan, 1.0]]).astype(dtype)
    tol = 2e-11 if dtype == "float64" else 1e-4  # the prefactor's cancellation, as JAX's
    for fn, ref in ((tss.gammainc, scipy.special.gammainc), (tss.gammaincc, scipy.special.gammaincc)):
        got = tidu.make_graph(fn)(a, x).program.run([a, x], backend="xla")[0]
        want = ref(a, x).astype(dtype)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        keep = np.isfinite(want) & (want > np.finfo(dtype).tiny * 1e10)
        np.testing.assert_allclose(got[keep], want[keep], rtol=tol, atol=0)


def test_incomplete_beta() -> None:
    """betainc against jax.scipy.special (values, grad and hessian in x) and, in XLA, its
    continued-fraction loop against SciPy over a wide range, edges included."""
    a, b, x = BETAINC_ABX
    np.testing.assert_allclose(tss.betainc(a, b, x), jss.betainc(a, b, x), rtol=1e-12)
    np.testing.assert_allclose(tidu.jit(tss.betainc)(a, b, x), jss.betainc(a, b, x), rtol=1e-12)
    g = tidu.grad(lambda v: tnp.sum(tss.betainc(a, b, v)))(x)
    np.testing.assert_allclose(g, jax.jit(jax.grad(lambda v: jnp.sum(jss.betainc(a, b, v))))(x), rtol=1e-10)
    h = tidu.hessian(lambda v: tnp.sum(tss.betainc(a, b, v)))(x)
    np.testing.assert_allclose(h, jax.jit(jax.hessian(lambda v: jnp.sum(jss.betainc(a, b, v))))(x),
                               rtol=1e-9, atol=1e-12)
    pytest.importorskip("jaxlib")
    rng = np.random.default_rng(11)
    a = np.concatenate([np.exp(rng.uniform(np.log(0.05), np.log(500), 300)), [0.0, 1.0, -1.0, 2.0, 2.0, 2.0]])
    b = np.concatenate([np.exp(rng.uniform(np.log(0.05), np.log(500), 300)), [1.0, 0.0, 1.0, 3.0, 3.0, 3.0]])
    x = np.concatenate([rng.uniform(0.0, 1.0, 300), [0.5, 0.5, 0.5, 0.0, 1.0, 1.5]])
    got = tidu.make_graph(tss.betainc)(a, b, x).program.run([a, b, x], backend="xla")[0]
    want = scipy.special.betainc(a, b, x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    keep = np.isfinite(want) & (want > 1e-290)
    np.testing.assert_allclose(got[keep], want[keep], rtol=1e-11, atol=1e-300)


@pytest.mark.parametrize("dtype", ["float64", pytest.param("float32", marks=pytest.mark.slow)])
def test_expn_loops_in_xla(dtype: str) -> None:
    """E_n(x) in XLA (series below x = 1, continued fraction above) against SciPy for n up
    to 30 and x from 1e-6 to 600, with the edges (n = 0, x = 0, x = inf, n < 0, x < 0)."""
    pytest.importorskip("jaxlib")
    rng = np.random.default_rng(13)
    n = np.concatenate([rng.integers(0, 31, 400), [0, 1, 2, 5, -1, 2, 3]]).astype(dtype)
    x = np.concatenate([np.exp(rng.uniform(np.log(1e-6), np.log(600), 400)), [1.0, 0.0, 0.0, np.inf, 1.0, -1.0,
                                                                             np.nan]]).astype(dtype)
    got = tidu.make_graph(tss.expn)(n, x).program.run([n, x], backend="xla")[0]
    want = scipy.special.expn(n.astype(np.int64), x.astype(np.float64)).astype(dtype)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    keep = np.isfinite(want) & (want > np.finfo(dtype).tiny * 1e6)
    np.testing.assert_allclose(got[keep], want[keep], rtol=2e-13 if dtype == "float64" else 2e-5)
    np.testing.assert_array_equal(got[~np.isfinite(want)], want[~np.isfinite(want)])


def test_bessel_jn() -> None:
    """bessel_jn against SciPy's jv (values, z = 0 included: JAX's is nan there) and
    jax.scipy.special.bessel_jn (gradient and Hessian of a weighted sum of the orders), in
    float64 and float32, eagerly, traced and in XLA."""
    z = BESSEL_Z
    want = np.array([scipy.special.jv(k, z) for k in range(5)])
    np.testing.assert_allclose(tss.bessel_jn(z, v=4), want, atol=2e-15)
    np.testing.assert_allclose(tidu.jit(lambda v: tss.bessel_jn(v, v=4))(z), want, atol=2e-15)
    z32 = z.astype("float32")
    assert tss.bessel_jn(z32, v=2).dtype == np.float32
    np.testing.assert_allclose(tss.bessel_jn(z32, v=2), want[:3], atol=2e-6)
    nonzero = z[2:]  # JAX: nan at z = 0 and at 1e-8
    w = np.arange(1.0, 6.0)[:, None]
    g = tidu.grad(lambda v: tnp.sum(w * tss.bessel_jn(v, v=4)))(nonzero)
    np.testing.assert_allclose(g, jax.jit(jax.grad(lambda v: jnp.sum(w * jss.bessel_jn(v, v=4))))(nonzero), atol=1e-13)
    h = tidu.hessian(lambda v: tnp.sum(w * tss.bessel_jn(v, v=4)))(nonzero)
    np.testing.assert_allclose(h, jax.jit(jax.hessian(lambda v: jnp.sum(w * jss.bessel_jn(v, v=4))))(nonzero),
                               atol=1e-12)
    pytest.importorskip("jaxlib")
    program = tidu.make_graph(lambda v: tss.bessel_jn(v, v=4))(z).program
    np.testing.assert_allclose(program.run([z], backend="xla")[0], want, atol=2e-15)
    with pytest.raises(TypeError, match="bessel_jn: v must be"):
        tss.bessel_jn(z, v=1.5)


def test_spence() -> None:
    """spence's values against SciPy and jax.scipy.special.spence; its derivatives against
    the closed forms log z / (1 - z) and ((1 - z) / z + log z) / (1 - z)^2 (JAX's
    derivative of spence is 0 at z = 1 and nan near it), z = 1 included (the Taylor branch)."""
    z = SPENCE_Z
    np.testing.assert_allclose(tss.spence(z), scipy.special.spence(z), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(tidu.jit(tss.spence)(z), jss.spence(z), rtol=1e-12, atol=1e-14)
    inner = z[1:]
    first, second = _spence_derivatives(inner)
    np.testing.assert_allclose(tidu.grad(lambda v: tnp.sum(tss.spence(v)))(inner), first, rtol=1e-12)
    h = tidu.hessian(lambda v: tnp.sum(tss.spence(v)))(inner)
    np.testing.assert_allclose(np.diag(h), second, rtol=1e-9, atol=1e-12)


def test_hyp1f1() -> None:
    """hyp1f1 against jax.scipy.special (values; gradients in a, b and x; the Hessian in x,
    which JAX also gives as (a/b) M(a + 1, b + 1, x)) and, in XLA, its series loop
    (Kummer's transformation for x < 0) against SciPy over a, b in (0.1, 10) and x in
    (-30, 30)."""
    a, b, x = HYP1F1_ABX
    np.testing.assert_allclose(tss.hyp1f1(a, b, x), jss.hyp1f1(a, b, x), rtol=1e-12)
    g = tidu.grad(lambda v: tnp.sum(tss.hyp1f1(a, b, v)))(x)
    np.testing.assert_allclose(g, jax.jit(jax.grad(lambda v: jnp.sum(jss.hyp1f1(a, b, v))))(x), rtol=1e-10)
    h = tidu.hessian(lambda v: tnp.sum(tss.hyp1f1(a, b, v)))(x)
    np.testing.assert_allclose(h, jax.jit(jax.hessian(lambda v: jnp.sum(jss.hyp1f1(a, b, v))))(x),
                               rtol=1e-9, atol=1e-12)
    ga, gb = tidu.grad(lambda p, q: tnp.sum(tss.hyp1f1(p, q, x)), argnums=(0, 1))(a, b)
    ja, jb = jax.jit(jax.grad(lambda p, q: jnp.sum(jss.hyp1f1(p, q, x)), argnums=(0, 1)))(a, b)
    np.testing.assert_allclose(ga, ja, rtol=1e-9)
    np.testing.assert_allclose(gb, jb, rtol=1e-9)
    pytest.importorskip("jaxlib")
    rng = np.random.default_rng(19)
    a, b, x = rng.uniform(0.1, 10, 300), rng.uniform(0.1, 10, 300), rng.uniform(-30, 30, 300)
    got = tidu.make_graph(tss.hyp1f1)(a, b, x).program.run([a, b, x], backend="xla")[0]
    np.testing.assert_allclose(got, scipy.special.hyp1f1(a, b, x), rtol=1e-11)


# --- batched: tidu.vmap against jax.vmap ------------------------------------------------------

# sph_harm_y (tests/test_sph_harm.py) as real results of theta and phi of one shape: the
# real and imaginary parts of Y_5^-3 and the real part of Y_3^2 (JAX's takes 1-D arrays)
SPH_THETA_PHI = (np.linspace(0.2, 2.9, 10), np.linspace(0.3, 6.0, 10))


def _sph_harm_parts(t: Any, p: Any) -> tuple[Any, Any, Any]:
    y, z = tss.sph_harm_y(5, -3, t, p), tss.sph_harm_y(3, 2, t, p)
    return tnp.real(y), tnp.imag(y), tnp.real(z)


def _jax_sph_harm_parts(t: Any, p: Any) -> tuple[Any, Any, Any]:
    t1, p1 = jnp.ravel(t), jnp.ravel(p)
    y = jss.sph_harm_y(jnp.full(t1.shape, 5), jnp.full(t1.shape, -3), t1, p1, n_max=5).reshape(jnp.shape(t))
    z = jss.sph_harm_y(jnp.full(t1.shape, 3), jnp.full(t1.shape, 2), t1, p1, n_max=3).reshape(jnp.shape(t))
    return jnp.real(y), jnp.imag(y), jnp.real(z)


# the functions with a test of their own (above), on that test's inputs: name -> (tidu's
# function, jax's, the arguments, the operands differentiated)
OWN_TEST: dict[str, tuple[Callable[..., Any], Callable[..., Any], tuple[np.ndarray, ...], tuple[int, ...]]] = {
    "betainc": (tss.betainc, jss.betainc, BETAINC_ABX, (2,)),
    "hyp1f1": (tss.hyp1f1, jss.hyp1f1, HYP1F1_ABX, (2, 0, 1)),
    "hyp2f1": (tss.hyp2f1, jss.hyp2f1, HYP2F1_ABCX, (3, 0, 1, 2)),
    "bessel_jn": (lambda z: tss.bessel_jn(z, v=4), lambda z: jss.bessel_jn(z, v=4), (BESSEL_Z[2:],), (0,)),
    "multigammaln": (lambda a: tss.multigammaln(a, 3), lambda a: jss.multigammaln(a, 3), (MULTIGAMMALN_A,), (0,)),
    "spence": (tss.spence, jss.spence, (SPENCE_Z[1:],), (0,)),  # no log(0) in the derivative
    "softmax": (tss.softmax, jss.softmax, (SOFTMAX_X,), (0,)),
    "log_softmax": (tss.log_softmax, jss.log_softmax, (SOFTMAX_X,), (0,)),
    "logsumexp": (tss.logsumexp, jss.logsumexp, (SOFTMAX_X,), (0,)),
    "sph_harm_y": (_sph_harm_parts, _jax_sph_harm_parts, SPH_THETA_PHI, (0, 1)),
}
# not compared batched, and why
NOT_BATCHED = {"bernoulli": "its argument n (a Python int) is the length of the result: jax.vmap cannot map it"}
# where the batched gradient is compared with something else than JAX's, and why
BATCHED_GRADIENT_REFERENCE = {
    "spence": ("JAX's derivative is 0 at z = 1 and nan for 1 < z <= 2: the closed form",
               lambda z: _spence_derivatives(z)[0]),
}
# float32 results compared with JAX's float64 ones, and why
FLOAT32_AGAINST_FLOAT64 = {"bessel_jn": "JAX's float32 values and derivatives are nan below |z| = 10",
                           "hyp1f1": "JAX's float32 derivatives in a and b are 5e-5 off its float64 ones; tidu's "
                                     "5e-7 (computed in float64, rounded)"}


def _batched_case(name: str, dtype: str) -> tuple[Callable[..., Any], Callable[..., Any], list[np.ndarray],
                                                   tuple[int, ...]]:
    if name in OWN_TEST:
        mine, theirs, args, argnums = OWN_TEST[name]
        return mine, theirs, [a.astype(dtype) for a in args], argnums
    args = _args(name, dtype)
    theirs = UNARY[name][1] if name in UNARY else BINARY[name][2]
    return getattr(tss, name), theirs, args, DIFFERENTIABLE.get(name, tuple(range(len(args))))


def batched_pairs(name: str, dtype: str, axis: int = 0, jit: bool = False, one_mapped: bool = False) -> list[
        tuple[str, Callable[..., Any], Callable[..., Any], list[np.ndarray], list[np.ndarray]]]:
    """tidu.vmap of the function and of its gradient, and jax.vmap of JAX's, as (what,
    tidu's, JAX's, tidu's arguments, JAX's arguments): axis 0 maps over the points of the
    grids (scalars; the rows of a matrix argument), axis 1 over the columns of (2, n)
    matrices, the grids forwards and backwards (of a matrix argument: its columns);
    ``one_mapped``: only the first differentiated operand is mapped, the others are not
    (each its first example)."""
    mine, theirs, args, argnums = _batched_case(name, dtype)
    if axis == 1:
        args = [a if a.ndim == 2 else np.stack([a, a[::-1]]) for a in args]
    in_axes = tuple(None if one_mapped and k != argnums[0] else axis for k in range(len(args)))
    args = [a if ax is not None else np.take(a, 0, axis=axis) for a, ax in zip(args, in_axes, strict=True)]

    def vmap(f: Callable[..., Any]) -> Callable[..., Any]:
        return tidu.jit(tidu.vmap(f, in_axes=in_axes)) if jit else tidu.vmap(f, in_axes=in_axes)

    argnums = tuple(i for i in argnums if in_axes[i] is not None)  # the mapped differentiable operands
    t_total, j_total = (lambda *a: _total(tnp, mine(*a))), (lambda *a: _total(jnp, theirs(*a)))
    wide = dtype == "float32" and name in FLOAT32_AGAINST_FLOAT64
    jax_args = [a.astype("float64") if wide and a.dtype == dtype else a for a in args]
    return [("value", vmap(mine), jax.vmap(theirs, in_axes=in_axes), args, jax_args),
            ("gradient", vmap(tidu.grad(t_total, argnums=argnums)),
             jax.vmap(jax.grad(j_total, argnums=argnums), in_axes=in_axes), args, jax_args)]


def check_batched(name: str, dtype: str, axis: int = 0, jit: bool = False, one_mapped: bool = False) -> None:
    """batched_pairs: tidu's results against JAX's (in one jit: one XLA compilation)."""
    pairs = batched_pairs(name, dtype, axis, jit, one_mapped)
    wants = jax.jit(lambda *a: [j(*x) for (_, _, j, _, _), x in zip(pairs, a, strict=True)])(*[p[4] for p in pairs])
    if name in BATCHED_GRADIENT_REFERENCE:  # elementwise: the mapped axis moves to the front
        wants[1] = (np.moveaxis(BATCHED_GRADIENT_REFERENCE[name][1](*pairs[1][3]), axis, 0),)
    for (what, fn, _, args, _), want in zip(pairs, wants, strict=True):
        got = fn(*args)
        for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want), strict=True):
            assert np.shape(g) == np.shape(w), f"{name} {what}"
            _close(g, w, dtype, name if what == "gradient" else "")


BATCHED = [*UNARY, *BINARY, *OWN_TEST]
# The default run: these cases (of _batched_params' ids): cases that together apply every
# batching rule, with every pattern of batched and unbatched operands, that the whole sweep
# applies (tests/vmap_util.py; test_the_default_batched_cases_apply_every_batching_rule, in
# the slow step, keeps it so), and the functions JAX computes by a loop (gammainc, betainc).
# The slow step: every function in float64 and float32, mapped over axis 0, over axis 1
# under tidu.jit, and over axis 0 with only the first differentiated operand mapped.
BATCHED_DEFAULT = [
    "erf-float64-axis0", "rel_entr-float64-axis0-one", "gammaln-float32-axis1", "softmax-float64-axis1",
    "xlogy-float32-axis0-one",
    "poch-float32-axis0-one", "comb-float64-axis0-one", "bessel_jn-float64-axis0", "gammainc-float64-axis0-one",
    "betainc-float64-axis0", "boxcox-float64-axis0-one", "sph_harm_y-float64-axis0", "owens_t-float64-axis0-one",
]


def _batched_params() -> list[Any]:
    out = []
    for name in BATCHED:
        for dtype in ("float64", "float32"):
            for axis, one_mapped in ((0, False), (1, False), (0, True)):
                pid = f"{name}-{dtype}-axis{axis}{'-one' if one_mapped else ''}"
                out.append(pytest.param(name, dtype, axis, one_mapped, id=pid,
                                        marks=[] if pid in BATCHED_DEFAULT else [pytest.mark.slow]))
    return out


def test_every_covered_function_is_compared_batched() -> None:
    covered = [n for n in dir(jss) if not n.startswith("_") and hasattr(tss, n)
               and callable(getattr(jss, n))]
    assert set(covered) <= set(BATCHED) | set(NOT_BATCHED), sorted(set(covered) - set(BATCHED) - set(NOT_BATCHED))


@pytest.mark.parametrize(("name", "dtype", "axis", "one_mapped"), _batched_params())
def test_vmap_against_jax(name: str, dtype: str, axis: int, one_mapped: bool) -> None:
    check_batched(name, dtype, axis, jit=axis != 0, one_mapped=one_mapped)


@pytest.mark.slow
def test_the_default_batched_cases_apply_every_batching_rule() -> None:
    """Every batching rule, with every pattern of batched operands, that tidu.vmap applies
    in the whole sweep is applied by a case of BATCHED_DEFAULT (tidu's side only: traces)."""
    def run(p: Any) -> None:
        for _, fn, _, args, _ in batched_pairs(*p.values[:3], False, p.values[3]):
            fn(*args)

    assert_default_applies_every_rule(_batched_params(), BATCHED_DEFAULT, run)


def test_bessel_i1_and_sine_integral_derivatives_at_zero_agree_in_both_modes():
    """i1e'(0) = i1'(0) = 1/2 and Si'(0) = 1 in forward and in reverse mode (the rules'
    selects once gave reverse mode 0 * nan at 0), and their second derivatives there."""
    x = np.array([0.0, -0.0, 0.5, -2.0])
    cases = {"i1e": (tss.i1e, [0.5, 0.5]), "i1": (tss.i1, [0.5, 0.5]), "Si": (lambda v: tss.sici(v)[0], [1.0, 1.0])}
    for name, (f, at_zero) in cases.items():
        forward = tidu.jvp(f, (x,), (np.ones(4),))[1]
        total = lambda v, f=f: tnp.sum(f(v))  # noqa: E731
        reverse = tidu.grad(total)(x)
        np.testing.assert_array_equal(reverse[:2], at_zero, err_msg=name)
        np.testing.assert_allclose(reverse, forward, rtol=1e-14, err_msg=name)
        for mode in ("FoR", "RoR"):
            assert np.all(np.isfinite(tidu.hessian(total, mode=mode)(x))), (name, mode)


def test_loggamma_is_scipys_on_the_whole_real_line():
    x = np.array([0.0, -0.0, -1.0, -0.5, 1e-300, 2.5])
    np.testing.assert_array_equal(tidu.jit(tss.loggamma)(x), scipy.special.loggamma(x))


def test_spence_derivative_near_one_is_right_to_rounding():
    """Near z = 1 the rule's derivative is the Taylor polynomial of log(z) / (1 - z) in
    w = z - 1 (to w^4): within the branch (|w| < 0.001) it is right to a few ulp, which
    finite differences cannot resolve (a wrong w^4 coefficient is off by 4e-13 there)."""
    import mpmath

    w = np.array([-9.9e-4, -3e-4, -1e-6, 1e-6, 2.5e-4, 9.9e-4])
    z = 1.0 + w
    # the primitive's rule (tidu.scipy.special.spence takes a series of its own within 0.1 of 1)
    got = tidu.jvp(tnp.op("spence"), (z,), (np.ones_like(z),))[1]
    want = np.array([float(mpmath.log(mpmath.mpf(v)) / (1 - mpmath.mpf(v))) for v in z])
    np.testing.assert_allclose(got, want, rtol=4e-16, atol=0)


# i1e's derivative against mpmath on both sides of |x| = 1/2, where its rule changes form:
# each term of the series below 1/2 moves it there by more than I1E_TOL (see
# tests/test_mutation.py::test_numeric_equivalence_arguments_hold)
I1E_POINTS = np.array([0.2, 0.4, 0.45, 0.49, -0.49, 0.7, 0.9])
I1E_TOL = 4e-15


def i1e_derivative_exact(x: np.ndarray) -> np.ndarray:
    import mpmath
    with mpmath.workdps(30):
        return np.array([float(mpmath.diff(lambda z: mpmath.besseli(1, z) * mpmath.exp(-abs(z)), v, 1)) for v in x])


def test_i1e_derivative_is_right_to_rounding() -> None:
    pytest.importorskip("mpmath")
    got = tidu.jvp(tss.i1e, (I1E_POINTS,), (np.ones_like(I1E_POINTS),))[1]
    np.testing.assert_allclose(got, i1e_derivative_exact(I1E_POINTS), rtol=I1E_TOL, atol=0)


def test_i1e_derivatives_near_zero_keep_their_digits() -> None:
    """i1e's derivative divides by x; below |x| = 1/2 its rule uses I0's and I1(x)/x's
    series, so the second and third derivatives near 0 lose nothing (the third at 1e-8
    was 0.5, not 1.875), and at 0 the second is the one from the right, -1."""
    mpmath = pytest.importorskip("mpmath")

    def want(x: float, k: int) -> float:
        return float(mpmath.diff(lambda z: mpmath.besseli(1, z) * mpmath.exp(-abs(z)), x, k))

    d = tss.i1e
    for k in (1, 2, 3):
        d = tidu.grad(d)
        for x in (1e-8, 1e-6, 1e-4, 1e-2, 0.3, 0.5, -0.7, 2.0):
            np.testing.assert_allclose(d(x), want(x, k), rtol=1e-13, atol=1e-15)
    assert tidu.grad(tss.i1e)(0.0) == 0.5 and tidu.grad(tidu.grad(tss.i1e))(0.0) == -1.0
