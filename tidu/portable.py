"""Float64 arithmetic that rounds the same way on every back end, for ``tidu.random``.

The NumPy back end rounds every multiply and every add; XLA (and a C compiler) may fuse a
multiply feeding an add into one fused multiply-add, which rounds once, and computes
``log`` and ``cos`` with algorithms of its own. A draw computed with them differs in its
last bits between back ends. Here every product is made exact before it is added: each
factor is split into a high part of 26 significant bits (its low mantissa bits masked
off through a bitcast) and the rest, so each partial product has at most 53 bits and a
fused multiply-add of it rounds exactly as a multiply then an add does. ``log`` and
``cos(2 pi u)`` are written with those products, exact scalings by powers of two,
correctly rounded adds and divisions, and Taylor series, so their results are the same
bits everywhere (within 2 ulp of the correctly rounded value; tests/test_random.py).

The functions take and return float64 values (arrays or tracers) and carry no
derivative rule of their own: their callers use them on values that carry no tangent
(uniform bits), or give them one (``tidu.random.uniform``'s bounds)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import tidu.numpy as tnp
from tidu.lax import bitcast_convert_type

# sign, exponent and the top 25 stored mantissa bits: 26 significant bits
_HIGH_MASK = np.uint64(0xFFFF_FFFF_F800_0000)
_MANTISSA = np.uint64((1 << 52) - 1)
_ONE_EXPONENT = np.uint64(1023 << 52)


def split(x: Any) -> tuple[Any, Any]:
    """``(hi, lo)`` with ``hi + lo == x`` exactly, ``hi`` of 26 significant bits and ``lo``
    of at most 27."""
    hi = bitcast_convert_type(bitcast_convert_type(x, np.uint64) & _HIGH_MASK, np.float64)
    return hi, x - hi


def mul(a: Any, b: Any) -> Any:
    """``a * b`` (within one ulp) from three exact partial products; ``b`` may be
    already split (``split(b)``)."""
    ah, al = split(a)
    bh, bl = b if isinstance(b, tuple) else split(b)
    return ah * bh + (ah * bl + al * bh)


def _polynomial(x: Any, coefficients: list[float]) -> Any:
    """``sum(c_k x^k)`` by Horner's rule with exact products."""
    parts = split(x)
    acc = tnp.zeros_like(x) + coefficients[-1]
    for c in reversed(coefficients[:-1]):
        acc = mul(acc, parts) + c
    return acc


_LN2_HI, _LN2_LO = split(math.log(2))
# log(1+f) = 2 atanh(s), s = f / (2 + f): R(z) = sum 2 z^k / (2k + 1), k >= 1, z = s^2 <= 0.0295
_ATANH_TAIL = [2 / (2 * k + 1) for k in range(1, 12)]


def log(x: Any) -> Any:
    """The natural logarithm of positive normal float64 values."""
    bits = bitcast_convert_type(x, np.uint64)
    exponent = tnp.astype(bits >> np.uint64(52), np.float64) - 1023.0
    m = bitcast_convert_type((bits & _MANTISSA) | _ONE_EXPONENT, np.float64)  # in [1, 2)
    big = m > math.sqrt(2)
    m = tnp.where(big, m * 0.5, m)  # in [sqrt(2)/2, sqrt(2)]
    exponent = tnp.where(big, exponent + 1.0, exponent)
    f = m - 1.0  # exact (Sterbenz)
    s = f / (2.0 + f)
    z = mul(s, s)
    tail = mul(z, _polynomial(z, _ATANH_TAIL))  # 2 atanh(s) / s - 2, so log(m) = 2s + s * tail
    half_f2 = mul(f, f) * 0.5
    # log(1+f) = f - f^2/2 + s (f^2/2 + tail): the exact identity 2s = f - s f
    log_m = f - (half_f2 - mul(s, half_f2 + tail))
    return exponent * _LN2_HI + (log_m + mul(exponent, _LN2_LO))


_TWO_PI_HI, _TWO_PI_LO = split(2 * math.pi)
_COS = [(-1) ** k / math.factorial(2 * k) for k in range(1, 11)]  # cos t = 1 + t^2 P(t^2)
_SIN = [(-1) ** k / math.factorial(2 * k + 1) for k in range(1, 11)]  # sin t = t + t^3 Q(t^2)


def cos_2pi(u: Any) -> Any:
    """``cos(2 pi u)`` for float64 ``u`` in [0, 1]."""
    quarter = tnp.floor(u * 4.0 + 0.5)  # the nearest multiple of 1/4: exact
    r = u - quarter * 0.25  # in [-1/8, 1/8], exact
    t = mul(r, _TWO_PI_HI) + mul(r, _TWO_PI_LO)  # 2 pi r, in [-pi/4, pi/4]
    t2 = mul(t, t)
    cos_t = 1.0 + mul(t2, _polynomial(t2, _COS))
    sin_t = t + mul(mul(t, t2), _polynomial(t2, _SIN))
    k = tnp.astype(quarter, np.int64) % 4  # cos(t + k pi / 2)
    return tnp.where(k == 0, cos_t, tnp.where(k == 1, -sin_t, tnp.where(k == 2, -cos_t, sin_t)))


__all__ = ["cos_2pi", "log", "mul", "split"]
