"""Special functions, as ``jax.scipy.special``: the primitives of rules/special.rules
(``erf``, ``erfc``, ``erfinv``, ``ndtri``, ``erfcx``, ``lgamma``, ``digamma``, the Hurwitz
``zeta``, ``i0e``, ``i1e``, ``exp1``, ``expi``, ``sine_integral``, ``cosine_integral``,
``gammainc``, ``gammaincc``, ``betainc``, ``expn``, ``spence``, ``fresnel_s``, ``fresnel_c``,
``hyp1f1``, ``hyp2f1``) and compositions of them and of ``tidu.numpy``
functions.

Each works on NumPy values (eagerly) and under every transform; values and derivatives
agree with ``jax.scipy.special`` (tests/test_special.py). Where a function is defined
piecewise (``xlogy`` at x = 0, ``entr`` at 0, ``rel_entr`` and ``kl_div`` on the edges of
their domain) the value is SciPy's and the derivative the function's own there, which
is JAX's (d/dx ``xlogy`` at x = 0 is log(y)) except where JAX's custom rule is not
(``rel_entr`` at x = 0, -inf; JAX: 0). At the ends of a domain, derivatives are the
one-sided limits (``boxcox`` at 0, the incomplete gamma and beta functions at every
order: tests/test_special_edges.py). Mixed arguments promote together, Python numbers
weakly typed, as JAX's (``_inexact_all``). Where a
primitive's derivative rule cancels (``erfcx`` above 3.5, ``i0e`` and ``i1e`` above |x| = 20,
``spence`` near 1, ``log_ndtr`` below -5), the function is written there with a form whose
derivatives keep their digits (a continued fraction, an asymptotic or a Taylor series): every
order up to the fourth stays within 1e-10 of mpmath (tests/test_special_tails.py).

The gamma family is closed under differentiation: ``gammaln' = digamma``, ``digamma' =
zeta(2, x)`` and ``zeta(s, q)`` differentiates in ``q`` to ``-s zeta(s + 1, q)``, so
``polygamma(n, x)`` has every derivative in ``x``; ``zeta`` differentiates in ``s`` too, for
s > 1 and q > 0 (the primitive ``zeta_d``, nan elsewhere).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import ml_dtypes
import numpy as np

import tidu.numpy as tnp
from tidu import nn
from tidu.core.pytree import flatten, unflatten
from tidu.numpy import op
from tidu.trace.derivatives import with_jvp
from tidu.trace.tracing import Tracer
from tidu.transforms.custom import stop_gradient

ArrayLike = Any
_BF16 = np.dtype(ml_dtypes.bfloat16)

# the primitives of rules/special.rules (ints promote to float64, as in tidu.numpy)
_erf = op("erf")
_erfc = op("erfc")
_erfinv = op("erfinv")
_lgamma = op("lgamma")
_digamma = op("digamma")
_zeta = op("zeta")
_ndtri = op("ndtri")
_i0e = op("i0e")
_erfcx = op("erfcx")
_exp1 = op("exp1")
_expi = op("expi")
_si = op("sine_integral")
_ci = op("cosine_integral")
_gammainc = op("gammainc")
_gammaincc = op("gammaincc")
_betainc = op("betainc")
_expn = op("expn")
_spence = op("spence")
_fresnel_s = op("fresnel_s")
_fresnel_c = op("fresnel_c")
_hyp1f1 = op("hyp1f1")
_hyp2f1 = op("hyp2f1")
_i1e = op("i1e")
_complex = op("complex")



def softmax(x: ArrayLike, axis: int | tuple[int, ...] | None = None) -> Any:
    """exp(x) / sum(exp(x)) over ``axis``, by default over all of ``x`` (SciPy's and
    jax.scipy.special's default; ``tidu.nn.softmax``'s is the last axis)."""
    return nn.softmax(x, axis=axis)


def log_softmax(x: ArrayLike, axis: int | tuple[int, ...] | None = None) -> Any:
    """x - logsumexp(x) over ``axis``, by default over all of ``x`` (as SciPy's and JAX's)."""
    return nn.log_softmax(x, axis=axis)

def logsumexp(a: ArrayLike, axis: int | tuple[int, ...] | None = None, b: ArrayLike | None = None,
              keepdims: bool = False, return_sign: bool = False, where: ArrayLike | None = None) -> Any:
    """log(sum(b exp(a))) over ``axis`` (``tidu.nn.logsumexp``). With ``return_sign`` and a
    complex ``a`` or ``b``, (log |sum|, sum / |sum|), as SciPy's and JAX's."""
    return nn.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign, where=where)


def erf(x: ArrayLike) -> Any:
    """The error function, 2/sqrt(pi) times the integral of exp(-t^2) from 0 to x."""
    return _erf(x)


def erfc(x: ArrayLike) -> Any:
    """1 - erf(x), accurate where erf(x) is near 1."""
    return _erfc(x)


def ndtr(x: ArrayLike) -> Any:
    """The standard normal CDF, erfc(-x / sqrt(2)) / 2 (erfc: no cancellation in either tail)."""
    return 0.5 * _erfc(-tnp.asarray(x) / math.sqrt(2))


def expit(x: ArrayLike) -> Any:
    """The logistic sigmoid 1 / (1 + exp(-x)) (``tidu.nn.sigmoid``: no overflow)."""
    return nn.sigmoid(_inexact(x))


def logit(x: ArrayLike) -> Any:
    """log(x / (1 - x)), the inverse of expit; written log(x) - log1p(-x), whose derivative
    1/x + 1/(1 - x) is inf at 0 and 1 in both modes (the quotient's is inf/inf there)."""
    x = _inexact(x)
    return tnp.log(x) - tnp.log1p(-x)


def xlogy(x: ArrayLike, y: ArrayLike) -> Any:
    """x * log(y), 0 where x = 0 (even where log(y) is -inf or complex); nan where y is
    nan, as SciPy's and JAX's. d/dx is log(y) everywhere, x = 0 included (x log(y) is
    linear in x: -inf at y = 0, as JAX's); d/dy is x / y, 0 where x = 0 (xlogy(0, y) is 0
    for every y; JAX: nan at y = 0)."""
    x, y = _inexact_all(x, y)
    zero = x == 0
    # where x = 0 and log(y) is not finite, log(1): 0 and finite derivatives (a nan y stays:
    # 0 * log(nan) is nan), and d/dx log(y) from _slope_at (-inf at y = 0, inf at y = inf, nan
    # below 0). Elsewhere the product itself, so d/dx is log(y) at x = 0 too: the value of one
    # select, the derivative of the sum (0 + r is +0 where x = 0, as SciPy's; r + -0 is r
    # elsewhere; nan + anything is nan)
    bad = zero & ~((y > 0) & (y < np.inf)) & ~tnp.isnan(y)
    r = x * tnp.log(tnp.where(bad, 1.0, y))
    return _zero_where(zero, r) + _slope_at(bad, x, y, 0.0)


def _zero_where(zero: Any, r: Any) -> Any:
    """+0 where ``zero`` (nan where r is nan), else ``r``; the derivative is ``r``'s everywhere."""
    return tnp.where(zero, 0.0, r) + tnp.where(zero, r, -0.0)


def _slope_at(at: Any, x: Any, y: Any, edge: float) -> Any:
    """-0.0 (adds nothing to a value), whose derivative in x is, where ``at`` (x = 0 and
    log(y - edge + 1) not finite), the slope log of that: -inf where y = edge, inf where y
    is inf, nan below ``edge`` (xlogy's and xlog1py's d/dx there, JAX's), and 0 elsewhere;
    constant in y and of derivative 0 at every higher order in x (x log(y) is linear in x)."""
    slope = tnp.where(at, tnp.where(y == edge, -np.inf, tnp.where(y == np.inf, np.inf, np.nan)), 0.0)
    return _linear_zero(tnp.where(at, x, 0.0), stop_gradient(slope))  # (both of the broadcast shape)


def _linear_zero_value(x: Any, slope: Any) -> Any:
    return tnp.full_like(x, -0.0)


def _linear_zero_jvp(primals: tuple[Any, Any], tangents: tuple[Any, Any]) -> tuple[None, Any]:
    (_, slope), (dx, _) = primals, tangents
    return None, dx * slope


# -0.0 with the derivative slope * dx in x and none in slope (a custom rule: no composition
# has the value 0 and an infinite slope, at x = 0, whose higher derivatives are 0); slope is
# passed through stop_gradient, so a derivative in y alone never meets 0 * inf here
_linear_zero = with_jvp(_linear_zero_value, _linear_zero_jvp, elementwise=True)


def xlog1py(x: ArrayLike, y: ArrayLike) -> Any:
    """x * log1p(y), 0 where x = 0; nan where y is nan (as SciPy's and JAX's). d/dx is
    log1p(y) everywhere, x = 0 included (-inf at y = -1, as JAX's); d/dy is x / (1 + y),
    0 where x = 0."""
    x, y = _inexact_all(x, y)
    zero = x == 0
    bad = zero & ~((y > -1) & (y < np.inf)) & ~tnp.isnan(y)
    r = x * tnp.log1p(tnp.where(bad, 0.0, y))  # (as xlogy)
    return _zero_where(zero, r) + _slope_at(bad, x, y, -1.0)


def entr(x: ArrayLike) -> Any:
    """-x log(x) for x > 0, 0 at 0, -inf below, nan at nan."""
    x = _inexact(x)
    positive = x > 0
    inside = -x * tnp.log(tnp.where(positive, x, 1.0))
    # at +0, sqrt(x): the value 0 and, at every order, the infinity the derivatives of
    # -x log(x) tend to from the right (+inf, -inf, +inf...), as JAX gives (at -0, whose
    # square root is -0 with derivative -inf, the constant 0)
    plus0 = (x == 0) & ~tnp.signbit(x)
    at0 = tnp.where(plus0, tnp.sqrt(tnp.where(plus0, x, 0.0)), tnp.zeros_like(x))
    below = tnp.where(tnp.isnan(x), x, tnp.full_like(x, -np.inf))
    return tnp.where(positive, inside, tnp.where(x == 0, at0, below))


def rel_entr(x: ArrayLike, y: ArrayLike) -> Any:
    """x log(x / y) for x, y > 0; 0 where x = 0 and y >= 0; nan where x or y is nan; inf
    elsewhere."""
    x, y = _inexact_all(x, y)
    both, safe_x, safe_y = _both_positive(x, y)
    inside = _x_log_ratio(safe_x, safe_y)
    edge = tnp.where((x == 0) & (y >= 0), tnp.zeros_like(inside), _inf_or_nan(x, y, inside))
    # + 0 at x = +0 < y with the derivatives x log(x / y) tends to (-inf, +inf, ...), as entr's
    return tnp.where(both, inside, edge) + _from_right_at_zero(x, y)


def _x_log_ratio_value(x: Any, y: Any) -> Any:
    return x * tnp.log(x / y)


def _x_log_ratio_jvp(primals: tuple[Any, Any], tangents: tuple[Any, Any]) -> tuple[None, Any]:
    (x, y), (dx, dy) = primals, tangents
    ratio = x / y
    return None, (tnp.log(ratio) + 1.0) * dx - ratio * dy


# x log(x / y) for x, y > 0 with its derivative written out, (log(x / y) + 1) dx - (x / y) dy:
# as a composition, d/dx holds x * (1 / (x / y)) / y, which XLA reassociates into x * y / x
# (inf / inf: nan at x = y = 1e200)
_x_log_ratio = with_jvp(_x_log_ratio_value, _x_log_ratio_jvp, elementwise=True)


def _inf_or_nan(x: Any, y: Any, like: Any) -> Any:
    """inf, nan where x or y is nan (SciPy's rel_entr and kl_div off their domain)."""
    return tnp.where(tnp.isnan(x) | tnp.isnan(y), tnp.full_like(like, np.nan), tnp.full_like(like, np.inf))


def _from_right_at_zero(x: Any, y: Any) -> Any:
    """-sqrt(x) - x log(y) where x is +0 and y > 0, else -0.0: adds nothing to a value (0 +
    -0.0 is +0, v + -0.0 is v), and there has the derivatives of x log(x / y) from the right:
    in x infinite at every order (-inf, +inf, -inf...; x log x's, the sign of entr's
    flipped), across x and y -1/y."""
    at = (x == 0) & ~tnp.signbit(x) & (y > 0) & (y < np.inf)
    xa, ya = tnp.where(at, x, 0.0), tnp.where(at, y, 1.0)
    return tnp.where(at, -tnp.sqrt(xa) - xa * tnp.log(ya), -0.0)


def kl_div(x: ArrayLike, y: ArrayLike) -> Any:
    """x log(x / y) - x + y for x, y > 0; y where x = 0 and y >= 0; nan where x or y is nan;
    inf elsewhere."""
    x, y = _inexact_all(x, y)
    both, safe_x, safe_y = _both_positive(x, y)
    inside = _x_log_ratio(safe_x, safe_y) - safe_x + safe_y
    edge = tnp.where((x == 0) & (y >= 0), y, _inf_or_nan(x, y, inside))
    return tnp.where(both, inside, edge) + _from_right_at_zero(x, y)  # (as rel_entr's)


def erfinv(x: ArrayLike) -> Any:
    """The inverse of erf on (-1, 1): -inf and inf at -1 and 1, nan outside."""
    return _erfinv(x)


def gammaln(x: ArrayLike) -> Any:
    """log |Gamma(x)|; inf at the poles 0, -1, -2, ... (SciPy's gammaln)."""
    return _lgamma(x)


def digamma(x: ArrayLike) -> Any:
    """psi(x) = Gamma'(x) / Gamma(x); nan at the poles."""
    return _digamma(x)


def zeta(x: ArrayLike, q: ArrayLike | None = None) -> Any:
    """The Hurwitz zeta function, the sum over k >= 0 of (k + q)^-x; Riemann's (q = 1)
    without ``q``, as SciPy (jax.scipy.special requires q). Differentiable in q."""
    return _zeta(x, 1.0 if q is None else q)


def polygamma(n: ArrayLike, x: ArrayLike) -> Any:
    """The n-th derivative of digamma, (-1)^(n+1) n! zeta(n + 1, x) for n >= 1 and
    digamma for n = 0; ``n`` must be of an integer dtype, as in JAX."""
    n_dtype = np.asarray(n).dtype if not hasattr(n, "dtype") else np.dtype(str(n.dtype))
    if not np.issubdtype(n_dtype, np.integer):
        raise TypeError(f"polygamma: n must be of an integer dtype, got {n_dtype}; pass e.g. np.int64(n)")
    x = _inexact(x)
    n = tnp.asarray(n)
    order = tnp.asarray(n, dtype=x.dtype)
    sign = tnp.asarray(tnp.where(n % 2 == 1, 1.0, -1.0), dtype=x.dtype)
    higher = sign * tnp.exp(_lgamma(order + 1)) * _zeta(order + 1, x)
    return tnp.where(n == 0, _digamma(x), higher)


def gammasgn(x: ArrayLike) -> Any:
    """The sign of Gamma(x): 1 for x > 0 (and at +0), -1 at -0, alternating between the
    poles of the negative axis, nan at the poles and at -inf."""
    x = _inexact(x)
    below = tnp.floor(x)
    negative = tnp.where(tnp.remainder(tnp.where(tnp.isfinite(below), below, 0.0), 2) == 0, 1.0, -1.0)
    at_zero = tnp.where(tnp.signbit(x), -1.0, 1.0)
    pole = (x < 0) & ((below == x) | tnp.isinf(x))
    sign = tnp.where(x > 0, 1.0, tnp.where(x == 0, at_zero, negative))
    return tnp.asarray(tnp.where(pole | tnp.isnan(x), np.nan, sign), dtype=x.dtype)


def gamma(x: ArrayLike) -> Any:
    """The gamma function, gammasgn(x) exp(gammaln(x))."""
    x = _inexact(x)
    return gammasgn(x) * tnp.exp(_lgamma(x))


def loggamma(x: ArrayLike) -> Any:
    """log Gamma(x) for real x > 0, inf at 0 (the pole), nan below (the principal branch
    of SciPy's loggamma on the reals)."""
    x = _inexact(x)
    positive = x > 0
    return tnp.where(x == 0, np.inf, tnp.where(positive, _lgamma(tnp.where(positive, x, 1.0)), np.nan))


def betaln(a: ArrayLike, b: ArrayLike) -> Any:
    """log |B(a, b)| = gammaln(a) + gammaln(b) - gammaln(a + b). Where the larger argument
    and the sum are >= 10, gammaln(large) - gammaln(large + small) cancels (betaln(1e10, 3)
    was off by 9e-8): there Stirling's form of that difference, -(large - 1/2) log1p(small /
    large) - small log(large + small) + small plus the corrections ``_stirling_rest``, and
    when both are >= 10 Stirling's form of the whole, each term of the result's size."""
    a, b = _inexact_all(a, b)
    # (a select, not maximum/minimum: at a = b their derivatives split, which the
    # formulas below, not symmetric in their arguments, would mix)
    first = a >= b
    big, small = tnp.where(first, a, b), tnp.where(first, b, a)
    one_large = (big >= 10.0) & (big + small >= 10.0)
    both_large = small >= 10.0
    # each branch evaluated where it is valid only, so no branch's nan reaches a derivative
    bl = tnp.where(one_large, big, 10.0)
    sl = tnp.where(one_large, small, 1.0)
    total = bl + sl
    # Stirling: gammaln(x) = (x - 1/2) log x - x + log(2 pi) / 2 + rest(x)
    difference = (-(bl - 0.5) * tnp.log1p(sl / bl) - sl * tnp.log(total) + sl
                  + _stirling_rest(bl) - _stirling_rest(total))
    sb = tnp.where(both_large, sl, 10.0)
    whole = (0.5 * math.log(2 * math.pi) - 0.5 * tnp.log(total) - (bl - 0.5) * tnp.log1p(sl / bl)
             + (sb - 0.5) * tnp.log(sb / total) + _stirling_rest(bl) + _stirling_rest(sb) - _stirling_rest(total))
    plain = _lgamma(a) + _lgamma(b) - _lgamma(a + b)
    return tnp.where(both_large, whole, tnp.where(one_large, _lgamma(sl) + difference, plain))


def _stirling_rest(x: Any) -> Any:
    """gammaln(x) - ((x - 1/2) log x - x + log(2 pi) / 2), its asymptotic series in 1/x to
    the 1/x^13 term (B_2k / (2k (2k - 1) x^(2k - 1))): off by 3e-17 at x = 10, less above."""
    t = 1 / x
    t2 = t * t
    poly = _STIRLING[-1]
    for c in reversed(_STIRLING[:-1]):
        poly = c + t2 * poly
    return t * poly


_STIRLING = [1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156]


def rounds_bfloat16_once(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` on bfloat16 values, traced as well as eagerly: computed in float32 and its
    float32 results rounded to bfloat16 once, as ``tidu.nn.keeps_bfloat16`` does eagerly and
    XLA's fused elementwise code does; traced, rounding each step gave other values than the
    eager call where a step cancels (beta near a pole: 8 ulps off) or rounds a non-integer to
    an integer (poisson's k - loc). The arguments must all be bfloat16, ints or Python
    numbers; any other call is left as it is (not part of the jax.scipy-like API: not in
    ``__all__``)."""

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        leaves, td = flatten((args, kwargs))
        dtypes = [None if type(v) in (bool, int, float) else getattr(v, "dtype", None) for v in leaves]
        if _BF16 not in dtypes or not all(
                d is None or d == _BF16 or np.dtype(d).kind in "biu" for d in dtypes):
            return fn(*args, **kwargs)
        wide = [tnp.astype(v, np.float32) if d == _BF16 else v for v, d in zip(leaves, dtypes, strict=True)]
        cargs, ckwargs = unflatten(td, wide)
        outs, otd = flatten(fn(*cargs, **ckwargs))
        return unflatten(otd, [tnp.astype(v, _BF16) if getattr(v, "dtype", None) == np.float32 else v
                               for v in outs])

    return wrapped


@rounds_bfloat16_once
def beta(a: ArrayLike, b: ArrayLike) -> Any:
    """The beta function Gamma(a) Gamma(b) / Gamma(a + b)."""
    a, b = _inexact_all(a, b)
    return gammasgn(a) * gammasgn(b) * gammasgn(a + b) * tnp.exp(betaln(a, b))


def factorial(n: ArrayLike, exact: bool = False) -> Any:
    """Gamma(n + 1), 0 for n < 0; ``exact=True`` is not supported (as in JAX)."""
    if exact:
        raise ValueError("factorial: exact=True is not supported (integer results have no derivative); "
                         "use math.factorial for exact integers")
    n = _inexact(n)
    return tnp.where(n < 0, 0.0, gamma(n + 1))


def poch(z: ArrayLike, m: ArrayLike) -> Any:
    """The Pochhammer symbol (rising factorial) Gamma(z + m) / Gamma(z); 1 where m = 0, and
    SciPy's limits where Gamma(z) has a pole (poch(-3, 2) = 6, poch(-1, 2) = 0)."""
    z, m = _inexact_all(z, m)
    # at m = 0 the ratio itself is 1 exactly (and d/dm is digamma(z)), except at a pole or an
    # infinity of Gamma(z), where inf - inf is nan: there 1, the ratio run on z = 1 unused
    bad = (m == 0) & ~tnp.isfinite(_lgamma(z))
    # Gamma(z) at a pole (z = 0, -1, ...), as SciPy: 0 where Gamma(z + m) is finite, and where z + m
    # is a pole too (m an integer) the limit (-1)^m Gamma(1 - z) / Gamma(1 - z - m), z(z + 1)...
    # (z + m - 1) for m > 0; +inf where only z + m is a pole. Each is written so that d/dz is right
    zp, sp = _nonpositive_integer(z) & ~bad, _nonpositive_integer(z + m) & ~bad
    zero, both, pole = zp & ~sp, zp & sp, sp & ~zp
    usual = ~(zero | both | pole | bad)
    zu, mu = tnp.where(usual, z, 1.0), tnp.where(usual, m, 1.0)
    ratio = gammasgn(zu + mu) * gammasgn(zu) * tnp.exp(_lgamma(zu + mu) - _lgamma(zu))
    # 1 / Gamma(z) = sin(pi z) Gamma(1 - z) / pi, its sine taken at z - round(z): 0 at the pole exactly
    z0, m0 = tnp.where(zero, z, -1.0), tnp.where(zero, m, 2.0)
    k = stop_gradient(tnp.round(z0))
    sine = (1.0 - 2.0 * tnp.remainder(k, 2.0)) * tnp.sin(math.pi * (z0 - k))  # ((-1)^k: dtype kept)
    vanishing = gammasgn(z0 + m0) * tnp.exp(_lgamma(z0 + m0) + _lgamma(1 - z0)) * sine / math.pi
    zb, mb = tnp.where(both, z, 0.0), tnp.where(both, m, 0.0)
    sign = stop_gradient(1.0 - 2.0 * tnp.remainder(mb, 2.0))
    reflected = sign * tnp.exp(_lgamma(1 - zb) - _lgamma(1 - zb - mb))
    vanishing = _zero_where(zero, tnp.where(tnp.isfinite(vanishing), vanishing, 0.0))  # (+0; 0 times an overflow)
    value = tnp.where(bad, 1.0, tnp.where(usual, ratio, tnp.where(pole, np.inf, tnp.where(both, reflected,
                                                                                          vanishing))))
    # d/dm is nan where the value jumps (0 off the integers m) and at the pole, so is d/dz there,
    # at every order (the slopes are nan times the variable)
    jump_m = tnp.where(both | pole, np.nan * m, 0.0)
    jump_z = tnp.where(pole, np.nan * z, 0.0)
    return value + _linear_zero(tnp.where(both | pole, m, 0.0), jump_m) + _linear_zero(tnp.where(pole, z, 0.0), jump_z)


def _nonpositive_integer(x: Any) -> Any:
    return (x <= 0) & (tnp.floor(x) == x)


def multigammaln(a: ArrayLike, d: int) -> Any:
    """The log of the multivariate gamma function of dimension ``d`` (a Python int):
    d(d-1)/4 log(pi) + the sum over j < d of gammaln(a - j/2)."""
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise TypeError(f"multigammaln: d must be a positive Python int, got {d!r}")
    a = _inexact(a)
    total = _lgamma(a)
    for j in range(1, int(d)):
        total = total + _lgamma(a - 0.5 * j)
    return total + d * (d - 1) / 4 * math.log(math.pi)


def comb(N: ArrayLike, k: ArrayLike, *, exact: bool = False, repetition: bool = False) -> Any:
    """The binomial coefficient Gamma(N + 1) / (Gamma(k + 1) Gamma(N - k + 1)), 0 outside
    0 <= k <= N; with ``repetition``, comb(N + k - 1, k)."""
    if exact:
        raise ValueError("comb: exact=True is not supported (integer results have no derivative); "
                         "use math.comb for exact integers")
    N, k = _inexact_all(N, k)
    if repetition:
        N = N + k - 1
    inside = tnp.logical_and(tnp.logical_and(k >= 0, k <= N), N >= 0)
    N, k = tnp.where(inside, N, 1.0), tnp.where(inside, k, 1.0)  # finite outside: no nan in derivatives
    value = tnp.exp(_lgamma(N + 1) - _lgamma(k + 1) - _lgamma(N - k + 1))
    return tnp.where(inside, value, 0.0)


def boxcox(x: ArrayLike, lmbda: ArrayLike) -> Any:
    """The Box-Cox transform (x^lmbda - 1) / lmbda, log(x) at lmbda = 0. At x = 0 its
    derivative in x is x^(lmbda - 1)'s limit from the right (inf for lmbda < 1; JAX: nan)."""
    x, lmbda = _inexact_all(x, lmbda)
    return _boxcox(x, lmbda, tnp.log, x, 1.0)


def boxcox1p(x: ArrayLike, lmbda: ArrayLike) -> Any:
    """boxcox(1 + x, lmbda), accurate for small x (at x = -1 as boxcox at 0)."""
    x, lmbda = _inexact_all(x, lmbda)
    return _boxcox(x, lmbda, tnp.log1p, 1.0 + x, 0.0)


def _boxcox(x: Any, lmbda: Any, log: Callable[[Any], Any], base: Any, one: float) -> Any:
    """(base^lmbda - 1) / lmbda with log(x) = log(base) (log or log1p) and log(one) = 0."""
    # at base = 0 with lmbda != 0, (base^lmbda - 1) / lmbda: the quotient's value (-1 / lmbda,
    # -inf for lmbda < 0), and in x base^(lmbda - 1)'s limit from the right (inf for
    # lmbda < 1, 1 at 1, 0 above; the quotient's exp(lmbda log x) / x was 0 * inf = nan) and
    # 1 / lmbda^2 in lmbda. Elsewhere that power runs on base = lmbda = 1 and the logarithm
    # on ``one`` there (finite derivatives on the branch not taken)
    edge = (base == 0) & (lmbda != 0)
    log_x = log(tnp.where(edge, one, x))
    finite = tnp.isfinite(log_x)
    fl = tnp.where(finite, log_x, 0.0)
    # where |lmbda L| < 1/2 (lmbda = 0 included), expm1(lmbda L) / lmbda as its series
    # L (1 + t/2 + t^2/6 + ...), t = lmbda L, to t^16 (within an ulp there): the value, and
    # every derivative in lmbda and x (L^2/2, L^3/3, ... at lmbda = 0). The quotient's
    # derivatives in lmbda cancel terms of size L^n / lmbda: at lmbda = 1e-8 the second
    # was 0.33 instead of 0.26 and the third -2e7 (x = 2.5). The powers of L are taken
    # where L is finite (log 0 = -inf: L itself there, not 0 * inf)
    near = ~edge & ((lmbda == 0) | (finite & (tnp.abs(lmbda * fl) < 0.5)))
    t = tnp.where(near, lmbda, 0.0) * fl
    poly = _EXPM1_OVER_X[-1]
    for c in reversed(_EXPM1_OVER_X[:-1]):
        poly = c + t * poly
    series = tnp.where(finite, fl * poly, log_x)
    safe = tnp.where(near, 1.0, lmbda)  # the unused branch's 0/0 stays out of the derivative
    edge_lmbda = tnp.where(edge, lmbda, 1.0)
    at_zero = (tnp.power(tnp.where(edge, base, 1.0), edge_lmbda) - 1.0) / edge_lmbda
    return tnp.where(near, series, tnp.where(edge, at_zero, tnp.expm1(safe * log_x) / safe))


_EXPM1_OVER_X = [1.0 / math.factorial(k + 1) for k in range(17)]  # expm1(t) / t = sum of t^k / (k + 1)!


def ndtri(p: ArrayLike) -> Any:
    """The inverse of ndtr: -inf at 0, inf at 1, nan outside [0, 1]."""
    return _ndtri(p)


def erfcinv(x: ArrayLike) -> Any:
    """The inverse of erfc on (0, 2): -ndtri(x / 2) / sqrt(2), accurate for small x."""
    return -_ndtri(0.5 * _inexact(x)) / math.sqrt(2)


def log_ndtr(x: ArrayLike, series_order: int = 3) -> Any:
    """log(ndtr(x)) without underflow or cancellation: log1p(-ndtr(-x)) above 0,
    log(ndtr(x)) down to -5, and below -x^2/2 - log(2 sqrt(pi)) - log(y + K(y)) with
    y = -x / sqrt(2) and K Laplace's continued fraction for erfc (erfc(y) = exp(-y^2) /
    (sqrt(pi) (y + K(y)))): right to rounding down to -inf, and so are its derivatives (those
    of log(ndtr(x)) there cancel terms of size x^2: the fourth at -30 was off by 6e-5; an
    asymptotic series' by 3e-7 at -38). ``series_order`` (an int in [0, 30], as JAX's) is
    checked and otherwise unused: no series is needed. More accurate than
    jax.scipy.special's in both tails (as SciPy's)."""
    if isinstance(series_order, bool) or not isinstance(series_order, (int, np.integer)) or \
            not 0 <= series_order <= 30:
        raise ValueError(f"log_ndtr: series_order must be an int in [0, 30], got {series_order!r}")
    x = _inexact(x)
    high, low = x > 0, x < -5.0
    # each branch evaluated where it is valid only, so no branch's nan reaches a derivative
    upper_x = tnp.where(high, x, 0.0)
    middle_x = tnp.where(high | low, 0.0, x)
    lower_x = tnp.where(low, x, -5.0)
    upper_value = tnp.log1p(-ndtr(-upper_x))
    middle_value = tnp.log(ndtr(middle_x))
    y = lower_x * -math.sqrt(0.5)
    lower_value = -0.5 * lower_x * lower_x - math.log(2 * math.sqrt(math.pi)) - tnp.log(y + _erfc_fraction(y))
    return tnp.where(high, upper_value, tnp.where(low, lower_value, middle_value))


def _erfc_fraction(y: Any) -> Any:
    """K(y) = 1/2 / (y + 1 / (y + 3/2 / (y + ...))), the k-th numerator k/2, to k = 30:
    sqrt(pi) exp(y^2) erfc(y) = 1 / (y + K(y)), converged to an ulp for y >= 3.5, and so are
    its derivatives (erfcx's and log_ndtr's tails are written with it)."""
    k = 15.0 / y
    for n in range(29, 0, -1):
        k = (n / 2) / (y + k)
    return k


def bernoulli(n: int) -> np.ndarray:
    """The Bernoulli numbers B_0 ... B_n (B_1 = -1/2), as float64; ``n`` a Python int."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise TypeError(f"bernoulli: n must be a non-negative Python int, got {n!r}")
    numbers: list[Fraction] = []
    for m in range(int(n) + 1):  # sum over k <= m of C(m + 1, k) B_k = 0, exactly
        numbers.append(Fraction(1) if m == 0 else
                       -sum((math.comb(m + 1, k) * numbers[k] for k in range(m)), Fraction(0)) / (m + 1))
    return np.array([float(b) for b in numbers])


def erfcx(x: ArrayLike) -> Any:
    """exp(x^2) erfc(x), the scaled complementary error function (no underflow for large x).
    Above x = 3.5 it is 1 / (sqrt(pi) (x + K(x))), K Laplace's continued fraction
    (``_erfc_fraction``; within a few ulp of the primitive there), whose derivatives keep
    their digits: the primitive's rule erfcx' = 2 x erfcx - 2/sqrt(pi) cancels there, a
    factor ~2x^2 more at each order (the fourth derivative at x = 26 was off by 2e-5, at
    1000 by 1e7, relative)."""
    x = _inexact(x)
    big = x > 3.5
    xs = tnp.where(big, x, 3.5)  # both branches finite everywhere: no nan in reverse mode
    large = (1 / math.sqrt(math.pi)) / (xs + _erfc_fraction(xs))  # (sqrt(pi) x overflows near the largest x)
    return tnp.where(big, large, _erfcx(tnp.where(big, 0.0, x)))


def dawsn(x: ArrayLike) -> Any:
    """Dawson's integral F(x) = exp(-x^2) times the integral of exp(t^2) from 0 to x, for
    real x, within 1e-15 of the exact value (relative) in float64. Up to |x| = 7 (5 in the
    narrower dtypes) ``_dawsn_value`` with the rule F' = 1 - 2 x F; above, the asymptotic
    series F ~ the sum over n of (2n - 1)!! / (2^(n+1) x^(2n+1)), converged to rounding
    there, whose derivatives keep their digits (the rule's cancel: 2 x F tends to 1, and F''
    = -2 F - 2 x F' ~ 1 / x^3 of terms ~ 1 / x: at x = 10^4 it was 200 % off). Every order up
    to the fourth is within 2e-9 of mpmath (tests/test_roots_dawsn_owens.py)."""
    x = _inexact(x)
    if np.issubdtype(np.dtype(str(x.dtype)), np.complexfloating):
        raise TypeError("tidu.scipy.special.dawsn: x must be real (complex x is not supported, as in JAX)")
    edge, terms = (7.0, 22) if str(x.dtype) == "float64" else (5.0, 12)
    big = tnp.abs(x) > edge
    t = 1 / tnp.where(big, x, edge)  # each branch runs on a value inside its range elsewhere
    s = 0.5 * t * t
    # the sum over n <= terms of (2n - 1)!! s^n, nested: 1 + s (1 + 3 s (1 + 5 s (...))), whose
    # factors fit every dtype (float16's largest is 65504; 15!! is not); its last term is
    # below 1e-17 of the sum from x = 7 on (float64), 1e-8 from 5 on
    poly = 1.0
    for n in range(terms, 0, -1):
        poly = 1.0 + (2 * n - 1) * s * poly
    return tnp.where(big, 0.5 * t * poly, _dawsn(tnp.where(big, 0.0, x)))


def _dawsn_value(x: Any) -> Any:
    """F(x) for |x| <= 7. Below |x| = 0.5 the Taylor series, the sum over n of (-2)^n
    x^(2n+1) / (2n+1)!! (14 terms: an ulp); above, Rybicki's sampling-theorem sum F(x) ~
    (1/sqrt(pi)) times the sum over odd n of exp(-(x - n h)^2) / n, whose error is of order
    exp(-(pi / (2h))^2): with h = 1/4 below 1e-16, the 26 odd n nearest x / h enough (the
    others' exp(-(x - n h)^2) < 1e-17). Each branch runs on a value inside its range
    elsewhere."""
    small = tnp.abs(x) < 0.5
    xt = tnp.where(small, x, 0.0)
    q = -2.0 * xt * xt
    poly = _DAWSN_SERIES[-1]
    for c in reversed(_DAWSN_SERIES[:-1]):
        poly = c + q * poly
    xr = tnp.where(small, 1.0, x)
    # n = n0 + k with n0 the even multiple nearest x / h and odd k, |k| <= 25: x - n h = xp - k h
    n0 = 2.0 * tnp.round(xr * (0.5 / _RYBICKI_H))
    xp = xr - n0 * _RYBICKI_H  # exact: h is a power of 2, n0 h near x
    ryb = 0.0
    for k in range(-25, 26, 2):
        d = xp - k * _RYBICKI_H
        ryb = ryb + tnp.exp(-d * d) / (n0 + k)
    return tnp.where(small, xt * poly, ryb * (1 / math.sqrt(math.pi)))  # (x * poly: -0.0 at -0.0)


_DAWSN_SERIES = [1 / math.prod(range(1, 2 * n + 2, 2)) for n in range(14)]  # 1 / (2n+1)!!
_RYBICKI_H = 0.25


def _dawsn_jvp(primals: tuple[Any], tangents: tuple[Any]) -> tuple[None, Any]:
    (x,), (dx,) = primals, tangents
    return None, (1.0 - 2.0 * x * _dawsn(x)) * dx


_dawsn = with_jvp(_dawsn_value, _dawsn_jvp, elementwise=True)


@rounds_bfloat16_once  # (each step rounded to bfloat16, traced values were 0.8 % off the eager ones)
def owens_t(h: ArrayLike, a: ArrayLike) -> Any:
    """Owen's T function, T(h, a) = 1/(2 pi) times the integral of exp(-h^2 (1 + x^2) / 2) /
    (1 + x^2) from 0 to a, for real h and a (even in h, odd in a). Its derivatives are
    dT/dh = -exp(-h^2 / 2) erf(a h / sqrt(2)) / (2 sqrt(2 pi)) and dT/da = exp(-h^2 (1 +
    a^2) / 2) / (2 pi (1 + a^2)) (its rule, so every order is right). Within 1e-13 of the
    exact value (relative) in float64 (tests/test_roots_dawsn_owens.py, against SciPy and
    mpmath)."""
    h, a = _inexact_all(h, a)
    if np.issubdtype(np.dtype(str(h.dtype)), np.complexfloating):
        raise TypeError("tidu.scipy.special.owens_t: h and a must be real (complex ones are not supported, as in JAX)")
    return _owens_t(h, a)


def _owens_t_value(h: Any, a: Any) -> Any:
    """For 0 <= a <= 1 the integral by Gauss-Legendre quadrature (``_owens_t_small_a``); for
    a > 1 with g = a h: T(h, a) = (Q(h) + Q(g)) / 2 - Q(h) Q(g) - T(g, 1/a), Q the upper
    normal tail (from T(h, a) + T(a h, 1/a) = (Phi(h) + Phi(a h)) / 2 - Phi(h) Phi(a h) for
    h >= 0, a > 0), no term above twice the result (T(h, a) >= T(h, 1) = Q(h) (1 - Q(h)) / 2):
    no cancellation; the sign of a outside."""
    # T and Q underflow to 0 from |h| = 40 on: h capped at 100, so a h and h^2 do not overflow
    h, a = tnp.broadcast_arrays(tnp.minimum(tnp.abs(h), 100.0), a)
    b = tnp.abs(a)
    below = b <= 1
    inside = _owens_t_small_a(h, tnp.where(below, b, 1.0))
    big = tnp.where(below, 2.0, b)
    g = tnp.where(h > 0, big, 0.0) * h  # (a = inf at h = 0: 0, not nan)
    qh, qg = 0.5 * _erfc(h * math.sqrt(0.5)), 0.5 * _erfc(g * math.sqrt(0.5))
    # T(g, 1/a) underflows to 0 from g = 40 on: g capped there, so a = inf gives T(g, 0) = 0, not inf * 0
    outside = 0.5 * (qh + qg) - qh * qg - _owens_t_small_a(tnp.minimum(g, 100.0), 1 / big)
    t = tnp.where(below, inside, outside)
    return tnp.where(a < 0, -t, t)


def _owens_t_small_a(h: Any, a: Any) -> Any:
    """T(h, a) for h >= 0 and 0 <= a <= 1: exp(-h^2 / 2) / (2 pi) times the integral of
    exp(-h^2 x^2 / 2) / (1 + x^2) over [0, c], c = min(a, 9 / h) (beyond, the integrand is
    below exp(-40) of its start), by 24-point Gauss-Legendre: the integrand's poles at +-i lie
    far enough from [0, 1], and exp(-s^2 / 2) over s = h x in [0, 9] is a low degree
    polynomial to rounding; within 4e-14 (relative) of mpmath over h in [0, 40]."""
    c = tnp.where(h > 0, tnp.minimum(a, 9.0 / tnp.where(h > 0, h, 1.0)), a)
    nodes = tnp.asarray(_GAUSS_NODES, dtype=h.dtype)
    weights = tnp.asarray(_GAUSS_WEIGHTS, dtype=h.dtype)
    x = tnp.expand_dims(c, -1) * nodes
    hx = tnp.expand_dims(h, -1) * x  # (h x, at most 9)
    integral = c * tnp.sum(weights * tnp.exp(-0.5 * hx * hx) / (1.0 + x * x), axis=-1)
    return tnp.exp(-0.5 * h * h) * (1 / (2 * math.pi)) * integral


# Gauss-Legendre on [0, 1]: nodes (1 + u) / 2, weights w / 2
_LEGENDRE_U, _LEGENDRE_W = np.polynomial.legendre.leggauss(24)
_GAUSS_NODES, _GAUSS_WEIGHTS = (1 + _LEGENDRE_U) / 2, _LEGENDRE_W / 2


def _owens_t_jvp(primals: tuple[Any, Any], tangents: tuple[Any, Any]) -> tuple[None, Any]:
    (h, a), (dh, da) = primals, tangents
    half_h2 = 0.5 * h * h
    d_h = tnp.exp(-half_h2) * _erf(a * h * math.sqrt(0.5)) * (-0.5 / math.sqrt(2 * math.pi))
    one_a2 = 1.0 + a * a
    d_a = tnp.exp(-half_h2 * one_a2) / one_a2 * (1 / (2 * math.pi))
    return None, d_h * dh + d_a * da


_owens_t = with_jvp(_owens_t_value, _owens_t_jvp, elementwise=True)


def exp1(x: ArrayLike) -> Any:
    """The exponential integral E1(x) = the integral of exp(-t)/t from x to inf; nan for x < 0."""
    return _exp1(x)


def expi(x: ArrayLike) -> Any:
    """The exponential integral Ei(x), the principal value of the integral of exp(t)/t up to x."""
    return _expi(x)

def sici(x: ArrayLike) -> tuple[Any, Any]:
    """(Si(x), Ci(x)): the sine integral, the integral of sin(t)/t from 0 to x, and the
    cosine integral gamma + log|x| + the integral of (cos t - 1)/t from 0 to |x| (for x < 0
    SciPy's real part, Ci(|x|))."""
    x = _inexact(x)
    # below |x| = 1, Si as its series, the sum over k of (-1)^k x^(2k+1) / ((2k+1) (2k+1)!)
    # to k = 10 (within an ulp there): every derivative keeps its digits. The rule's
    # Si' = sin(x) / x loses them to cancellation near 0 (the third derivative at 1e-8 was
    # -1, not -1/3; the fourth 2e8, not 2e-9; at 0 the third was 0)
    small = tnp.abs(x) < 1
    xs = tnp.where(small, x, 0.0)
    q = xs * xs
    poly = _SI_SERIES[-1]
    for c in reversed(_SI_SERIES[:-1]):
        poly = c + q * poly
    return tnp.where(small, xs * poly, _si(x)), _ci(x)


_SI_SERIES = [(-1.0) ** k / ((2 * k + 1) * math.factorial(2 * k + 1)) for k in range(11)]

def gammainc(a: ArrayLike, x: ArrayLike) -> Any:
    """The regularized lower incomplete gamma function P(a, x); nan for a < 0 or x < 0.
    Differentiable in a and x to any order; at x = 0 (``_incomplete_gamma``) every
    derivative in x is its limit from the right."""
    a, x = _inexact_all(a, x)
    return _incomplete_gamma(_gammainc, a, x, upper=False)


def gammaincc(a: ArrayLike, x: ArrayLike) -> Any:
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x) (as ``gammainc``)."""
    a, x = _inexact_all(a, x)
    return _incomplete_gamma(_gammaincc, a, x, upper=True)


def _incomplete_gamma(prim: Callable[..., Any], a: Any, x: Any, upper: bool) -> Any:
    """``prim(a, x)``, and at x = 0 (a > 0 finite) P = x^a / Gamma(a + 1) (Q = 1 - that),
    the leading term of P's series x^a / Gamma(a) sum_k (-x)^k / (k! (a + k)): the same
    value, 0 (1), and in x the n-th derivative's limit from the right, a (a - 1) ... (a - n + 1)
    x^(a - n) / Gamma(a + 1) at x = 0: infinite of that sign for a < n, 0 above (the other
    terms would add only smaller infinities, or 0), and for an integer a right to the order
    a, nan beyond it (there the other terms count; pow's rule gives 0 * x^-1 = nan, never a
    wrong number: tests/test_special_edges.py checks this). The primitive's rule takes the
    density's derivatives there (rules/special.rules, gamma_density_d), whose kernel has no
    value at x = 0 past the first (nan; 0 for a > n only): the second derivative of
    gammaincc(0.5, x) at 0 was nan, JAX's is inf. In a P(a, 0) is constant (0), so is this
    term. The primitive runs on x = 1 there, the term on x = a = 1 elsewhere (finite
    derivatives on the branch not taken)."""
    at = (x == 0) & (a > 0) & (a < np.inf)
    a_at = tnp.where(at, a, 1.0)
    lead = tnp.power(tnp.where(at, x, 1.0), a_at) * tnp.exp(-_lgamma(a_at + 1.0))
    edge = 1.0 - lead if upper else 0.0 + lead  # (+0 at x = -0 too)
    return tnp.where(at, edge, prim(a, tnp.where(at, 1.0, x)))


def betainc(a: ArrayLike, b: ArrayLike, x: ArrayLike) -> Any:
    """The regularized incomplete beta function I_x(a, b); differentiable in a, b and x
    to any order (JAX: in x only). At x = 0 and x = 1 every derivative in x is its
    one-sided limit from inside: at 0 as ``gammainc``'s, the leading term of its series
    x^a / (a B(a, b)) sum_k (1 - b)_k x^k a / (k! (a + k)), and at 1 through I_x(a, b) =
    1 - I_(1-x)(b, a) (the second derivative of betainc(0.5, 3.0, x) at 0 was nan, JAX's is
    -inf)."""
    a, b, x = _inexact_all(a, b, x)
    shapes = (a > 0) & (a < np.inf) & (b > 0) & (b < np.inf)
    low, high = shapes & (x == 0), shapes & (x == 1)
    at = low | high
    # the shape at that end (s), the other (o), the distance from it (t); 1 elsewhere
    s = tnp.where(low, a, tnp.where(high, b, 1.0))
    o = tnp.where(low, b, tnp.where(high, a, 1.0))
    t = tnp.where(low, x, tnp.where(high, 1.0 - x, 1.0))
    lead = tnp.power(t, s) * tnp.exp(_lgamma(s + o) - _lgamma(s + 1.0) - _lgamma(o))  # t^s / (s B(a, b))
    return tnp.where(at, tnp.where(low, 0.0 + lead, 1.0 - lead), _betainc(a, b, tnp.where(at, 0.5, x)))


def expn(n: ArrayLike, x: ArrayLike) -> Any:
    """The generalized exponential integral E_n(x), the integral of exp(-x t) / t^n from 1
    to inf, for integers n >= 0 (nan for other n, and for x < 0); differentiable in x."""
    x = _inexact(x)
    return _expn(tnp.asarray(n, dtype=x.dtype), x)

def bessel_jn(z: ArrayLike, *, v: int, n_iter: int = 50) -> Any:
    """J_0(z), ..., J_v(z), the Bessel functions of the first kind of integer order at real
    z, stacked along a new first axis (as jax.scipy.special.bessel_jn): Miller's backward
    recurrence J_(k-1) = (2k / z) J_k - J_(k+1) from order ``n_iter`` down, rescaled as it
    grows, normalized by J_0 + 2 (J_2 + J_4 + ...) = 1. Accurate while ``n_iter`` exceeds
    |z| comfortably (the 50 default: |z| up to about 25); 1, 0, ... at z = 0."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
        raise TypeError(f"bessel_jn: v must be a non-negative Python int, got {v!r}")
    if isinstance(n_iter, bool) or not isinstance(n_iter, (int, np.integer)) or n_iter <= v:
        raise TypeError(f"bessel_jn: n_iter must be an int greater than v, got {n_iter!r}")
    z = _inexact(z)
    if np.issubdtype(np.dtype(str(z.dtype)), np.complexfloating):
        raise TypeError("bessel_jn: z must be real (complex z is not supported, as in JAX)")
    at_zero = z == 0
    safe = tnp.where(at_zero, 1.0, z)
    f_next, f = tnp.zeros_like(safe), tnp.full_like(safe, 1e-30)
    total = tnp.zeros_like(safe)
    big = float(ml_dtypes.finfo(np.dtype(str(z.dtype))).max) ** 0.25  # one step's growth (2k / z) stays finite
    kept: dict[int, Any] = {}
    for k in range(int(n_iter), 0, -1):
        if k % 2 == 0:
            total = total + 2 * f
        if k <= v:
            kept[k] = f
        f_next, f = f, (2.0 * k / safe) * f - f_next
        scale = tnp.where(tnp.abs(f) > big, 1 / big, 1.0)  # no overflow for small z
        f, f_next, total = f * scale, f_next * scale, total * scale
        kept = {j: w * scale for j, w in kept.items()}
    kept[0] = f
    total = total + f
    # at z = 0, J_k's series sum_m (-1)^m (z/2)^(2m+k) / (m! (m+k)!) to m = 2: the values 1,
    # 0, 0... and the derivatives (J_1'(0) = 1/2, J_0''(0) = -1/2, ...) to the fourth order
    half = tnp.where(at_zero, z, 0.0) / 2
    orders = [tnp.where(at_zero, _jn_series(half, k), kept[k] / total) for k in range(int(v) + 1)]
    return tnp.asarray(tnp.stack(orders), dtype=z.dtype)


def _jn_series(half: Any, k: int) -> Any:
    """sum over m <= 2 of (-1)^m half^(2m+k) / (m! (m+k)!), half = z / 2 (powers by products)."""
    power = tnp.ones_like(half)
    for _ in range(k):
        power = power * half
    sq = half * half
    return power * (1 / math.factorial(k) - sq * (1 / math.factorial(k + 1) - sq / (2 * math.factorial(k + 2))))


def spence(z: ArrayLike) -> Any:
    """SciPy's spence(z) = Li2(1 - z), the integral of log(t) / (1 - t) from 1 to z (the
    dilogarithm), for real z >= 0 (nan below). Within 0.1 of z = 1 its Taylor series in
    w = z - 1, the sum over k <= 24 of (-w)^k / k^2 (within an ulp there, and so are its
    first derivatives), the primitive run on z = 2 there: the rule's other branch,
    log z / (1 - z), is 0/0 at 1 (reverse mode of its derivative sent 0 * nan into every
    second derivative through z = 1), and its derivatives lose digits as 1 / w^3 near 1
    (the fourth derivative at z = 1.0011 was off by 2e-8; the rule's own polynomial below
    |w| = 0.001 stops at w^4, so the fourth at 1.0005 was off by 2e-6)."""
    z = _inexact(z)
    near = tnp.abs(z - 1.0) < 0.1
    w = tnp.where(near, z, 1.0) - 1.0
    poly = _SPENCE_SERIES[-1]
    for c in reversed(_SPENCE_SERIES[:-1]):
        poly = c + w * poly
    # (+0 at 1, as SciPy's: w * poly there is -0)
    return _zero_where(z == 1, tnp.where(near, w * poly, _spence(tnp.where(near, 2.0, z))))


_SPENCE_SERIES = [(-1.0) ** k / k ** 2 for k in range(1, 25)]  # Li2(-w) = sum over k of (-w)^k / k^2

def fresnel(x: ArrayLike) -> tuple[Any, Any]:
    """(S(x), C(x)), the Fresnel integrals of sin(pi t^2 / 2) and cos(pi t^2 / 2) from 0 to x
    (SciPy's order)."""
    x = _inexact(x)
    return _fresnel_s(x), _fresnel_c(x)

def hyp1f1(a: ArrayLike, b: ArrayLike, x: ArrayLike) -> Any:
    """Kummer's confluent hypergeometric function M(a, b, x) = 1F1(a; b; x);
    differentiable in x, and in a and b to any order (``hyp1f1_d``)."""
    return _hyp1f1(a, b, x)


def hyp2f1(a: ArrayLike, b: ArrayLike, c: ArrayLike, x: ArrayLike) -> Any:
    """The Gauss hypergeometric function 2F1(a, b; c; x), SciPy's values for real x (inf
    for x > 1 unless a or b is 0, -1, -2, ...); differentiable in x, and in a, b and c to
    any order for x < 1 (``hyp2f1_d``; nan from x = 1 on)."""
    return _hyp2f1(a, b, c, x)


def i0e(x: ArrayLike) -> Any:
    """exp(-|x|) I0(x), the exponentially scaled modified Bessel function of order 0.
    Above |x| = 20 it is its asymptotic series (``_scaled_bessel_tail``; within an ulp or two
    of the primitive there), whose derivatives keep their digits: the rules' i0e' = i1e -
    sign(x) i0e and i1e' = i0e - i1e (sign(x) + 1/x) cancel there, a factor ~2|x| more at
    each order (the fourth derivative at x = 1000 was off by 4e-5)."""
    x = _inexact(x)
    big, tail = _scaled_bessel_tail(x, 0)
    return tnp.where(big, tail, _i0e(tnp.where(big, 0.0, x)))


def i1e(x: ArrayLike) -> Any:
    """exp(-|x|) I1(x), the exponentially scaled modified Bessel function of order 1; above
    |x| = 20 its asymptotic series (as ``i0e``)."""
    x = _inexact(x)
    big, tail = _scaled_bessel_tail(x, 1)
    return tnp.where(big, tnp.where(x < 0, -tail, tail), _i1e(tnp.where(big, 0.0, x)))  # (odd)


def _scaled_bessel_tail(x: Any, nu: int) -> tuple[Any, Any]:
    """Where |x| > 20, and there exp(-|x|) I_nu(|x|) as its asymptotic series, the sum over
    k < 40 of c_k / |x|^k over sqrt(2 pi |x|): converged to an ulp in float64, and so are its
    first four derivatives (12 terms in the narrower dtypes, whose later c_k overflow
    float16). The other branch runs on 0, this one on 20 there."""
    ax = tnp.abs(x)
    big = ax > 20
    xs = tnp.where(big, ax, 20.0)
    t = 1 / xs
    series = _BESSEL_TAIL[nu] if str(x.dtype) == "float64" else _BESSEL_TAIL[nu][:12]
    poly = series[-1]
    for c in reversed(series[:-1]):
        poly = c + t * poly
    return big, poly / (math.sqrt(2 * math.pi) * tnp.sqrt(xs))  # (2 pi x overflows near the largest x)


def _bessel_tail_series(nu: int, n: int = 40) -> list[float]:
    """c_k = prod over j <= k of -(4 nu^2 - (2j - 1)^2) / (8 j): I_nu(x) exp(-x) sqrt(2 pi x)
    ~ the sum of c_k / x^k (Abramowitz and Stegun 9.7.1)."""
    c = [1.0]
    for j in range(1, n):
        c.append(c[-1] * -(4 * nu * nu - (2 * j - 1) ** 2) / (8 * j))
    return c


_BESSEL_TAIL = (_bessel_tail_series(0), _bessel_tail_series(1))


def i0(x: ArrayLike) -> Any:
    """The modified Bessel function of the first kind of order 0 (``tnp.i0``: the
    primitive ``i0``, whose derivative I1 is 0 at 0)."""
    x = _inexact(x)
    if np.issubdtype(np.dtype(str(x.dtype)), np.complexfloating):
        raise TypeError("tidu.scipy.special.i0: x must be real (complex x is not supported, as in JAX)")
    return tnp.i0(x)


def i1(x: ArrayLike) -> Any:
    """The modified Bessel function of the first kind of order 1, exp(|x|) i1e(x). Its
    derivatives are right at 0 too: every kink convention of the factors there is the
    derivative from the right (abs'(0) = 1; i1e's rule), so they are those of the smooth
    product."""
    x = _inexact(x)
    if np.issubdtype(np.dtype(str(x.dtype)), np.complexfloating):
        raise TypeError("tidu.scipy.special.i1: x must be real (complex x is not supported, as in JAX)")
    return tnp.exp(tnp.abs(x)) * _i1e(x)


def sph_harm_y(n: ArrayLike, m: ArrayLike, theta: ArrayLike, phi: ArrayLike, diff_n: int | None = None,
               n_max: int | None = None) -> Any:
    """The spherical harmonic Y_n^m(theta, phi) = N P_n^|m|(cos theta) exp(i m phi) of degree
    ``n`` and order ``m`` (integers, |m| <= n), polar angle ``theta`` and azimuth ``phi``,
    orthonormal on the sphere with the Condon-Shortley phase, Y_n^-m = (-1)^m conj(Y_n^m) (as
    SciPy's and JAX's sph_harm_y); 0 where n < 0 or |m| > n (SciPy's). The arguments broadcast
    together (JAX's takes 1-D arrays only); the result is complex64 for float32 angles (as
    SciPy's; JAX's is complex128), complex128 for float64 and integer ones; float16 and
    bfloat16 angles are refused (as JAX refuses them).

    Computed from normalized associated Legendre functions in sin(theta) and cos(theta), both
    as given, never sqrt(1 - cos^2): the diagonal P_k^k = -sqrt((2k + 1) / (2k)) sin(theta)
    P_(k-1)^(k-1) from P_0^0 = 1 / sqrt(4 pi), then the degrees up by P_l^m = a cos(theta)
    P_(l-1)^m - b P_(l-2)^m, a = sqrt((4l^2 - 1) / (l^2 - m^2)), b = sqrt((2l + 1) ((l - 1)^2 -
    m^2) / ((2l - 3) (l^2 - m^2))). Only products and sums of sin and cos: every derivative in
    theta and phi is finite, at the poles too (JAX's are nan or inf at and near them).

    ``n_max`` bounds the degrees (degrees above it are taken as ``n_max``, as JAX's); without
    it ``n`` must be concrete (not traced: under ``jit`` or ``vmap`` pass ``n_max``), as
    JAX's. ``diff_n`` other than None or 0 (SciPy's derivatives) is not supported, as in JAX."""
    if diff_n not in (None, 0):
        raise NotImplementedError(f"tidu.scipy.special.sph_harm_y: diff_n={diff_n!r} is not supported (as in JAX); "
                                  "differentiate with tidu.grad or tidu.jvp instead")
    for name, v in (("n", n), ("m", m)):
        dtype = np.dtype(str(v.dtype if hasattr(v, "dtype") else np.asarray(v).dtype))
        if dtype.kind not in "iu":
            raise TypeError(f"tidu.scipy.special.sph_harm_y: {name} must be integers, got dtype {dtype}")
    if n_max is None:
        if isinstance(n, Tracer):
            raise TypeError("tidu.scipy.special.sph_harm_y: n is traced, so its largest degree is unknown; "
                            "pass n_max=<a Python int> (as JAX requires)")
        n_max = int(np.max(np.asarray(n), initial=0))
    if isinstance(n_max, bool) or not isinstance(n_max, (int, np.integer)) or n_max < 0:
        raise TypeError(f"tidu.scipy.special.sph_harm_y: n_max must be a non-negative Python int, got {n_max!r}")
    theta, phi = _inexact_all(theta, phi)
    dtype = np.dtype(str(theta.dtype))
    if np.issubdtype(dtype, np.complexfloating):
        raise TypeError("tidu.scipy.special.sph_harm_y: theta and phi must be real (SciPy's must too)")
    if dtype not in (np.float32, np.float64):  # (as JAX's; their parts would not keep the dtype)
        raise TypeError(f"tidu.scipy.special.sph_harm_y: {dtype} angles have no complex dtype; cast theta and phi "
                        "to float32 or float64")
    n, m, theta, phi = tnp.broadcast_arrays(tnp.asarray(n), tnp.asarray(m), theta, phi)
    order = tnp.abs(m)
    degree = tnp.minimum(n, int(n_max))
    valid = (n >= 0) & (order <= degree)
    order_f = tnp.astype(order, dtype)
    s, c = tnp.sin(theta), tnp.cos(theta)
    p = tnp.full_like(theta, 1 / math.sqrt(4 * math.pi))
    for k in range(1, int(n_max) + 1):  # the diagonal, up to k = |m|
        p = tnp.where(k <= order, (-math.sqrt((2 * k + 1) / (2 * k))) * s * p, p)
    prev = tnp.zeros_like(p)
    for deg in range(1, int(n_max) + 1):  # degrees |m| + 1 ... n
        step = (deg > order) & (deg <= degree)
        # (a safe denominator where the step is not taken: 1)
        den = tnp.where(step, deg * deg - order_f * order_f, 1.0)
        a = tnp.sqrt((4 * deg * deg - 1) / den)
        # (at deg = 1, 2 deg - 3 is -1 and b is 0: only m = 0 steps there)
        b = tnp.sqrt(tnp.maximum((deg - 1) ** 2 - order_f * order_f, 0.0) * (2 * deg + 1) / abs(2 * deg - 3) / den)
        nxt = a * c * p - b * prev
        prev, p = tnp.where(step, p, prev), tnp.where(step, nxt, p)
    # m < 0: Y_n^m = (-1)^m conj(Y_n^|m|) = (-1)^m P_n^|m| exp(i m phi)
    sign = tnp.where((m < 0) & (order % 2 == 1), -1.0, 1.0)
    p = tnp.where(valid, p * tnp.astype(sign, dtype), 0.0)
    angle = tnp.astype(m, dtype) * phi
    return _complex(p * tnp.cos(angle), p * tnp.sin(angle))


def _both_positive(x: Any, y: Any) -> tuple[Any, Any, Any]:
    """Where x > 0 and y > 0, and x, y with 1 elsewhere (so the unused branch's logarithm
    and its derivative stay finite)."""
    both = (x > 0) & (y > 0)
    return both, tnp.where(both, x, 1.0), tnp.where(both, y, 1.0)


def _inexact_all(*xs: ArrayLike) -> tuple[Any, ...]:
    """The arguments as arrays of one floating dtype, promoted together as JAX's
    ``promote_args_inexact``: Python numbers are weakly typed (float32 data with 2.0 stays
    float32, as SciPy's ufuncs give too), ints and bools alone go to float64, an integer
    array with a float32 one gives float32 (SciPy: float64), bfloat16 stays bfloat16.
    (Each converted alone, a Python float was a float64 array, and so was the result.)"""
    values = [x if type(x) in (bool, int, float, complex) else tnp.asarray(x) for x in xs]
    dtype = np.dtype(tnp.result_type(*values))
    if not (np.issubdtype(dtype, np.inexact) or dtype == _BF16):
        dtype = np.dtype(np.float64)
    return tuple(tnp.asarray(v, dtype=dtype) for v in values)


def _inexact(x: ArrayLike) -> Any:
    """``x`` as an array of a floating dtype (ints and bools go to float64, as SciPy's;
    bfloat16, which NumPy does not count as inexact, stays bfloat16, as JAX's)."""
    x = tnp.asarray(x)
    if np.issubdtype(x.dtype, np.inexact) or np.dtype(x.dtype) == _BF16:
        return x
    return tnp.asarray(x, dtype=np.float64)


__all__ = ["bernoulli", "bessel_jn", "beta", "betainc", "betaln", "boxcox", "boxcox1p", "comb", "dawsn",
           "digamma", "entr", "erf", "erfc", "erfcinv", "erfcx", "erfinv", "exp1", "expi", "expit", "expn",
           "factorial", "fresnel", "gamma", "gammainc", "gammaincc", "gammaln", "gammasgn", "hyp1f1", "hyp2f1",
           "i0", "i0e", "i1", "i1e", "kl_div", "log_ndtr", "log_softmax", "loggamma", "logit", "logsumexp",
           "multigammaln", "ndtr", "ndtri", "owens_t", "poch", "polygamma", "rel_entr", "sici", "softmax",
           "sph_harm_y", "spence", "xlog1py", "xlogy", "zeta"]


def _keep_bfloat16_eagerly() -> None:
    """Each function called eagerly on a bfloat16 array computes in float32 and rounds its
    results to bfloat16 once, as XLA does and as ``tidu.nn``'s functions (NumPy with
    ml_dtypes would give float32 for ``x * 0.5``, or float64 through a float64 constant;
    traced, tidu keeps bfloat16 as JAX does)."""
    for name in __all__:
        fn = globals()[name]
        if name != "bernoulli" and not hasattr(fn, "__wrapped__"):
            globals()[name] = nn.keeps_bfloat16(fn)


_keep_bfloat16_eagerly()

