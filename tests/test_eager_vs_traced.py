"""Traced tidu.numpy results equal the eager ones (NumPy's own) bit for bit, in value,
dtype and shape, at the edge cases where they used to differ: empty reductions, infinite
and nan operands, integer overflow of sums, ddof >= N, signed zeros, exponents beyond the
float range. And the derivatives of the functions changed for that stay right (against
central finite differences at ordinary points, reverse mode against forward mode).

tests/test_eager_traced.py sweeps every public name on ordinary random values; this file
pins the special points, one case each."""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tidu
import tidu.nn as tnn
import tidu.numpy as tnp

nan, inf = np.nan, np.inf
A = np.array


def _same(eager: Any, traced: Any, what: str) -> None:
    """Equal bit for bit: dtype, shape, values (nan where nan) and the sign of zeros."""
    if isinstance(eager, tuple | list):
        assert isinstance(traced, tuple | list) and len(traced) == len(eager), what
        for k, (e, t) in enumerate(zip(eager, traced, strict=True)):
            _same(e, t, f"{what}[{k}]")
        return
    e, t = np.asarray(eager), np.asarray(traced)
    assert t.dtype == e.dtype, f"{what}: traced dtype {t.dtype}, eager {e.dtype}"
    assert t.shape == e.shape, f"{what}: traced shape {t.shape}, eager {e.shape}"
    if e.dtype.kind == "c":  # part by part (NumPy's comparison of complex infinities is not)
        np.testing.assert_array_equal(t.real, e.real, err_msg=f"{what}: real part")
        np.testing.assert_array_equal(t.imag, e.imag, err_msg=f"{what}: imaginary part")
    else:
        np.testing.assert_array_equal(t, e, err_msg=what)
    if e.dtype.kind in "fc":
        for part in (np.real, np.imag):
            number = ~np.isnan(part(e))  # a nan's sign bit means nothing
            np.testing.assert_array_equal(np.signbit(part(t))[number], np.signbit(part(e))[number],
                                          err_msg=f"{what}: signs of zeros")


i32, u8, i8, f32 = np.int32, np.uint8, np.int8, np.float32

# (id, f, *arrays): f(*arrays) eagerly (NumPy) and under tidu.jit, all arrays traced
CASES: list[tuple[Any, ...]] = [
    # 1. all / any over nothing
    ("all-empty", tnp.all, np.zeros(0)),
    ("any-empty", tnp.any, np.zeros(0)),
    ("all-empty-axis", lambda x: tnp.all(x, axis=0), np.zeros((0, 3))),
    ("any-empty-axis", lambda x: tnp.any(x, axis=0), np.zeros((0, 3))),
    ("all-bool", lambda x: tnp.all(x, axis=1), A([[True, False], [True, True]])),
    # 2. isclose / allclose with infinities
    ("isclose-inf", tnp.isclose, A([-inf, inf, inf, 1.0, nan, inf]), A([inf, -inf, inf, inf, nan, 1.0])),
    ("isclose-inf-tol", lambda a, b: tnp.isclose(a, b, rtol=1.0, atol=1.0, equal_nan=True),
     A([-inf, inf, nan, 1.0]), A([inf, inf, nan, inf])),
    ("allclose-inf", tnp.allclose, A([-inf]), A([inf])),
    ("allclose-inf-same", tnp.allclose, A([inf, 1.0]), A([inf, 1.0])),
    # 3. sums and products of bools and narrow integers accumulate in int64 / uint64
    ("sum-i32", tnp.sum, A([2**31 - 1, 1], i32)),
    ("sum-u8", tnp.sum, A([200, 100], u8)),
    ("sum-bool", lambda x: tnp.sum(x, axis=0), A([[True, True], [True, False]])),
    ("sum-i64", tnp.sum, A([2**62, 2**62])),
    ("sum-dtype", lambda x: tnp.sum(x, dtype=np.int8), A([100, 100], i32)),
    ("sum-method-dtype", lambda x: x.sum(dtype=np.int16), A([200, 100], u8)),
    ("prod-i8", tnp.prod, A([100, 100, 100], i8)),
    ("prod-u8", lambda x: tnp.prod(x, axis=1), A([[200, 2], [3, 4]], u8)),
    ("cumsum-i8", tnp.cumsum, A([100, 100], i8)),
    ("cumsum-dtype", lambda x: tnp.cumsum(x, dtype=np.int8), A([100, 100], i32)),
    ("cumprod-i32", tnp.cumprod, A([2**20, 2**20], i32)),
    ("nancumsum-u8", tnp.nancumsum, A([200, 100], u8)),
    ("nancumprod-i8", tnp.nancumprod, A([100, 100], i8)),
    ("cumulative_sum-i8", lambda x: tnp.cumulative_sum(x, include_initial=True), A([100, 100], i8)),
    ("cumulative_prod-i8", tnp.cumulative_prod, A([100, 100], i8)),
    ("trace-i32", tnp.trace, A([[2**31 - 1, 0], [0, 2**31 - 1]], i32)),
    ("count_nonzero", lambda x: tnp.count_nonzero(x, axis=0), A([[1, 0], [2, 0]], i8)),
    # 4. means of integers are computed in floats
    ("mean-i32", tnp.mean, A([2**31 - 1, 2**31 - 1], i32)),
    ("mean-u8", tnp.mean, A([200, 100], u8)),
    ("mean-i64", tnp.mean, A([2**62, 2**62])),
    ("average-i32", tnp.average, A([2**31 - 1, 2**31 - 1], i32)),
    ("average-weights-i32", lambda a, w: tnp.average(a, weights=w), A([2**31 - 1, 2**31 - 1], i32), A([1.0, 3.0])),
    ("nanmean-i32", tnp.nanmean, A([2**31 - 1, 2**31 - 1], i32)),
    # 5. nan-ignoring reductions of integers and bools
    ("nanmin-u8", tnp.nanmin, A([200, 3], u8)),
    ("nanmax-u8", tnp.nanmax, A([200, 3], u8)),
    ("nanmin-i8", tnp.nanmin, A([-128, 5, 127], i8)),
    ("nanmax-i32", lambda x: tnp.nanmax(x, axis=0), A([[1, 3], [-2**31, 2**31 - 1]], i32)),
    ("nanmin-i64-big", tnp.nanmin, A([2**62 + 1, 2**62])),
    ("nanmin-bool", tnp.nanmin, A([True, False])),
    ("nanmax-bool", tnp.nanmax, A([True, False])),
    ("nansum-u8", tnp.nansum, A([200, 100], u8)),
    ("nansum-bool", tnp.nansum, A([True, True])),
    ("nanprod-i8", tnp.nanprod, A([100, 100], i8)),
    ("min-u8", tnp.min, A([0, 5], u8)),
    ("min-i8", tnp.min, A([-128, 5], i8)),
    ("argmin-i8", tnp.argmin, A([5, -128, 3], i8)),
    ("argmin-u8", tnp.argmin, A([5, 0, 3], u8)),
    ("ptp-i8", tnp.ptp, A([-100, 5, 20], i8)),
    ("max-bool", tnp.max, A([True, False])),
    ("min-bool", lambda x: tnp.min(x, axis=0), A([[True, False], [True, True]])),
    ("cummax-bool", tnp.cummax, A([False, True, False])),
    ("cummin-bool", tnp.cummin, A([True, False, True])),
    # 6. var / std / nanvar with ddof >= N
    ("var-ddof-over", lambda x: tnp.var(x, ddof=3), A([1.0, 2.0])),
    ("var-ddof-n", lambda x: tnp.var(x, ddof=2), A([1.0, 2.0])),
    ("var-ddof-n-equal", lambda x: tnp.var(x, ddof=2), A([1.0, 1.0])),
    ("std-ddof-over", lambda x: tnp.std(x, ddof=3), A([1.0, 2.0])),
    ("std-ddof-1-single", lambda x: tnp.std(x, ddof=1), A([1.0])),
    ("nanvar-ddof-n", lambda x: tnp.nanvar(x, ddof=2), A([1.0, nan, 3.0])),
    ("nanvar-ddof-over", lambda x: tnp.nanvar(x, ddof=3, axis=1), A([[1.0, nan, 3.0], [1.0, 2.0, 4.0]])),
    ("nanstd-ddof-n", lambda x: tnp.nanstd(x, ddof=2), A([1.0, nan, 3.0])),
    ("nanvar-all-nan", lambda x: tnp.nanvar(x, axis=0), A([[nan, 1.0], [nan, 2.0]])),
    # 7. correlate 'same' with the first array shorter
    ("correlate-same-short", lambda a, v: tnp.correlate(a, v, mode="same"), A([1.0, 2.0]), A([1.0, 2.0, 3.0, 4.0])),
    ("correlate-same-short3", lambda a, v: tnp.correlate(a, v, mode="same"), A([1.0, 2.0, 5.0]),
     A([1.0, 2.0, 3.0, 4.0, 7.0])),
    ("correlate-same-complex", lambda a, v: tnp.correlate(a, v, mode="same"), A([1j, 2.0]), A([1.0, 2j, 3.0])),
    ("correlate-same-long", lambda a, v: tnp.correlate(a, v, mode="same"), A([1.0, 2.0, 3.0, 4.0]), A([1.0, 2.0])),
    ("correlate-full-short", lambda a, v: tnp.correlate(a, v, mode="full"), A([1.0, 2.0]), A([1.0, 2.0, 3.0])),
    # 8. nanmedian (and median) with infinities
    ("nanmedian-inf", tnp.nanmedian, A([inf, 1.0, inf])),
    ("nanmedian-inf-nan", tnp.nanmedian, A([inf, nan, 1.0, inf])),
    ("nanmedian-inf-even", tnp.nanmedian, A([1.0, inf])),
    ("median-inf", tnp.median, A([inf, 1.0, inf])),
    ("median-inf-even", tnp.median, A([1.0, inf])),
    ("median-f32", lambda x: tnp.median(x, axis=0), A([[1.0, 2.0], [3.0, 5.0]], f32)),
    # 9. modf of infinities and negative integers
    ("modf", tnp.modf, A([inf, -inf, -0.0, 0.0, -1.0, 2.0, -2.5, 2.5, nan])),
    ("modf-f32", tnp.modf, A([-3.0, 1.25, -inf], f32)),
    # 10. sort_complex keeps infinities and has NumPy's dtype
    ("sort_complex-inf", tnp.sort_complex, A([inf, 1.0, nan, -inf])),
    ("sort_complex-f32", tnp.sort_complex, A([2.0, 1.0], f32)),
    ("sort_complex-u8", tnp.sort_complex, A([3, 1], u8)),
    ("sort_complex-i32", tnp.sort_complex, A([3, 1], i32)),
    # 11. angle of -0.0 and nan
    ("angle", tnp.angle, A([-0.0, 0.0, nan, -1.0, 2.0, -inf])),
    ("angle-deg", lambda x: tnp.angle(x, deg=True), A([-0.0, 1.0, nan])),
    ("angle-f32", tnp.angle, A([-0.0, 1.0], f32)),
    # 12. piecewise: 0 where no condition holds, also for nan
    ("piecewise-nan", lambda x: tnp.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v * v]),
     A([nan, -1.0, 2.0])),
    ("piecewise-inf", lambda x: tnp.piecewise(x, [x < 0], [-1.0]), A([inf, -2.0, nan])),
    # 13. interp: nan in fp at a knot, one knot and x = nan
    ("interp-nan-fp-knot", lambda x: tnp.interp(x, A([0.0, 1.0]), A([1.0, nan])), A([0.0, -0.0, 0.5, 1.0])),
    ("interp-one-knot-nan", lambda x: tnp.interp(x, A([1.0]), A([3.0])), A([nan, 0.0, 1.0, 2.0])),
    ("interp-inf-fp", lambda x: tnp.interp(x, A([0.0, 1.0, 1.0, 2.0, 3.0]), A([0.0, 1.0, 5.0, inf, inf])),
     A([0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, nan, inf, -inf])),
    ("interp-all", tnp.interp, A([0.25, 1.0, 1.5, 2.0, -1.0, 7.0]), A([0.0, 1.0, 2.0]), A([3.0, -1.0, 2.0])),
    ("interp-f32", tnp.interp, A([0.3, 1.7], f32), A([0.0, 1.0, 2.0], f32), A([3.0, -1.0, 2.0], f32)),
    ("interp-complex", lambda x: tnp.interp(x, A([0.0, 1.0, 2.0]), A([1j, 2.0, inf])), A([0.0, 0.5, 1.5, 2.0])),
    ("interp-period", lambda x, xp, fp: tnp.interp(x, xp, fp, period=360),
     A([-180.0, -170.0, -185.0, 185.0, -10.0, -5.0, 0.0, 365.0]), A([190.0, -190.0, 350.0, -350.0]),
     A([5.0, 10.0, 3.0, 4.0])),
    ("interp-period-negative", lambda x: tnp.interp(x, A([0.0, 1.0, 2.5]), A([1.0, -1.0, 2.0]), period=-3.0),
     A([-0.5, 0.25, 1.75, 2.9, 3.2])),
    # 14. ldexp beyond the exponent range, and subnormal results
    ("ldexp-zero-big", tnp.ldexp, A([0.0, -0.0, 7.0, -7.0, nan]), A([1100] * 5, i32)),
    ("ldexp-small", tnp.ldexp, A([1.0, 1.5, 1.75, 1e300, 3.0, 1.0]),
     A([-1074, -1075, -1075, -2000, -1100, -1022], i32)),
    ("ldexp-huge", tnp.ldexp, A([5e-324, 1.0, 1e-300, 0.0]), A([2100, 2**31 - 1, 2000, -2**31], i32)),
    ("ldexp-f32", tnp.ldexp, A([7.0, 1e-45, 3.0, 0.0], f32), A([2, 200, -150, 300], i32)),
    ("ldexp-const-exp", lambda x: tnp.ldexp(x, A([1100, -1100, 3])), A([0.0, 1e300, 0.5])),
    # 15. median of nothing, softmax of a scalar
    ("median-empty", tnp.median, np.zeros(0)),
    ("median-empty-axis", lambda x: tnp.median(x, axis=0), np.zeros((0, 3))),
    ("nanmedian-empty", tnp.nanmedian, np.zeros(0)),
    ("softmax-0d", tnn.softmax, A(1.5)),
    ("log_softmax-0d", tnn.log_softmax, A(1.5)),
    # 16. signed zeros
    ("cumsum-zeros", tnp.cumsum, A([-0.0, 0.0, -0.0])),
    ("cumsum-neg-zeros", tnp.cumsum, A([-0.0, -0.0, -0.0])),
    ("nancumsum-zeros", tnp.nancumsum, A([-0.0, nan, 0.0])),
    ("cumulative_sum-zeros", tnp.cumulative_sum, A([-0.0, 0.0])),
    ("cumulative_sum-initial-inf", lambda x: tnp.cumulative_sum(x, include_initial=True), A([inf, 1.0])),
    ("cummax-zeros", tnp.cummax, A([0.0, -0.0, 0.0])),
    ("cummin-zeros", tnp.cummin, A([-0.0, 0.0, -0.0])),
    ("floor_divide-zeros", tnp.floor_divide, A([-0.0, 0.0, -0.0, 0.0, 0.5, -0.5, 3.0]),
     A([1.0, -1.0, -1.0, 1.0, -1.0, 1.0, 0.0])),
    # 17. integer division by zero is 0 (NumPy's), not the float's inf converted
    *[(f"{name}-int-by-zero-{dt}", fn, A([5, -5, 0, 7, 100], dt), A([0, 0, 0, 2, 3], dt))
      for name, fn in (("floor_divide", tnp.floor_divide), ("remainder", tnp.remainder), ("fmod", tnp.fmod),
                       ("divmod", tnp.divmod)) for dt in (np.int64, i32, i8)],
    ("divmod-uint-by-zero", tnp.divmod, A([5, 0, 7], u8), A([0, 0, 2], u8)),
    # integer quotients past 2**53 are exact (they went through float64), INT_MIN // -1 wraps
    *[(f"{name}-int64-large", fn, A([2**62 + 1, -(2**60) - 3, 2**53 + 1, -(2**63), -(2**63), 2**63 - 1, -7, 9],
                                    np.int64),
       A([3, 7, 2, -1, 2**62 + 5, -(2**62) - 1, 2, -4], np.int64))
      for name, fn in (("floor_divide", tnp.floor_divide), ("divmod", tnp.divmod))],
    ("floor_divide-uint64-large", tnp.floor_divide, A([2**64 - 1, 2**63 + 7, 5], np.uint64),
     A([3, 2**62 + 1, 0], np.uint64)),
    # 18. rounding integers: rint gives floats, round to tens and hundreds stays integer (ties to even)
    ("rint-int", tnp.rint, A([15, -35, 7], i32)),
    ("round-int-tens", lambda x: tnp.round(x, -1), A([15, 25, -35, 7, 0], i32)),
    ("round-int-hundreds", lambda x: tnp.around(x, -2), A([150, 250, -50, 49], np.int64)),
    # 19. integer matrix powers stay integer; bools sort as bools
    ("matrix_power-int", lambda m: tnp.linalg.matrix_power(m, 5), A([[1, 2], [3, 4]], i32)),
    ("matrix_power-int-0", lambda m: tnp.linalg.matrix_power(m, 0), A([[1, 2], [3, 4]], np.int64)),
    ("sort-bool", tnp.sort, A([True, False, True, False])),
    # 20. complex log2 and log10 of 0: the parts divided apart (a complex division made the imaginary part nan)
    ("log2-complex", tnp.log2, A([0j, complex(0.0, -0.0), complex(inf, 1.0)])),
    ("log10-complex", tnp.log10, A([0j, complex(0.0, -0.0), complex(-inf, 0.0)])),
    ("log10-complex64", tnp.log10, A([0j, complex(0.0, -0.0)], np.complex64)),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_traced_equals_eager(case: tuple[Any, ...]) -> None:
    name, f, *args = case
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        eager = f(*args)
        traced = tidu.jit(f)(*args)
    _same(eager, traced, name)


# --- derivatives of the functions changed above ---------------------------------------------


def _fd_grad(g: Callable[[np.ndarray], float], x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    out = np.zeros_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = h
        out.flat[k] = (g(x + e) - g(x - e)) / (2 * h)
    return out


def _scalar(f: Callable[..., Any]) -> Callable[[Any], Any]:
    """sum(w * f(x)) with fixed weights (real and imaginary parts of complex results)."""
    def g(x: Any) -> Any:
        out = f(x)
        outs = out if isinstance(out, tuple) else (out,)
        total = 0.0
        for k, o in enumerate(outs):
            w = np.arange(1.0, 1.0 + o.size).reshape(o.shape) * (0.5 + k)
            total = total + tnp.sum(tnp.real(o) * w) + tnp.sum(tnp.imag(o) * w * 0.25)
        return total
    return g


X = A([0.3, -1.2, 2.1, 0.7, -0.4])
DERIVATIVES: list[tuple[str, Callable[..., Any], np.ndarray]] = [
    ("sum", tnp.sum, X),
    ("prod", tnp.prod, X),
    ("mean", tnp.mean, X),
    ("average", lambda x: tnp.average(x, weights=A([1.0, 2.0, 3.0, 4.0, 5.0])), X),
    ("var-ddof1", lambda x: tnp.var(x, ddof=1), X),
    ("std-ddof1", lambda x: tnp.std(x, ddof=1), X),
    ("nanvar-ddof1", lambda x: tnp.nanvar(x, ddof=1), X),
    ("nanstd", tnp.nanstd, X),
    ("nansum", tnp.nansum, X),
    ("nanprod", tnp.nanprod, X),
    ("nanmean", tnp.nanmean, X),
    ("nanmax", tnp.nanmax, X),
    ("nanmin", tnp.nanmin, X),
    ("min", tnp.min, X),
    ("cumsum", tnp.cumsum, X),
    ("cumprod", tnp.cumprod, X),
    ("nancumsum", tnp.nancumsum, X),
    ("cumulative_sum-initial", lambda x: tnp.cumulative_sum(x, include_initial=True), X),
    ("cummax", tnp.cummax, X),
    ("cummin", tnp.cummin, X),
    ("correlate-same-short", lambda x: tnp.correlate(x[:2], x, mode="same"), X),
    ("correlate-same-long", lambda x: tnp.correlate(x, x[:2], mode="same"), X),
    ("median", tnp.median, X),
    ("median-even", tnp.median, X[:4]),
    ("nanmedian", tnp.nanmedian, X),
    ("nanmedian-even", tnp.nanmedian, X[:4]),
    ("quantile", lambda x: tnp.quantile(x, 0.3), X),
    ("sort_complex", tnp.sort_complex, X),
    ("modf", tnp.modf, X),
    ("angle", tnp.angle, X),
    ("piecewise", lambda x: tnp.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v * v]), X),
    ("interp-x", lambda x: tnp.interp(x, A([-1.0, 0.0, 1.0, 2.5]), A([1.0, -2.0, 0.5, 3.0])), X),
    ("interp-xp", lambda x: tnp.interp(A([-0.5, 0.5, 1.0]), tnp.sort(x), A([1.0, -2.0, 0.5, 3.0, 1.0])), X),
    ("interp-fp", lambda x: tnp.interp(A([-0.5, 0.5, 1.0, 3.0]), A([-1.0, 0.0, 0.8, 1.0, 2.5]), x), X),
    ("interp-period-x", lambda x: tnp.interp(x, A([0.0, 1.0, 2.5]), A([1.0, -1.0, 2.0]), period=3.0), X),
    ("interp-period-fp", lambda x: tnp.interp(A([-0.5, 0.25, 1.75, 2.9]), A([0.3, 1.0, 2.5, 4.0, 2.0]), x,
                                               period=3.0), X),
    ("ldexp", lambda x: tnp.ldexp(x, A([3, -2, -1060, 10, 0])), X),
    ("softmax", tnn.softmax, X),
    ("log_softmax", tnn.log_softmax, X),
]


@pytest.mark.parametrize("case", DERIVATIVES, ids=[c[0] for c in DERIVATIVES])
def test_derivatives(case: tuple[str, Callable[..., Any], np.ndarray]) -> None:
    name, f, x = case
    g = _scalar(f)
    rev = tidu.grad(g)(x)
    fwd = tidu.jacfwd(g)(x)
    fd = _fd_grad(lambda v: float(g(v)), x)
    np.testing.assert_allclose(rev, fwd, rtol=1e-12, atol=1e-12, err_msg=f"{name}: grad vs jacfwd")
    np.testing.assert_allclose(rev, fd, rtol=1e-6, atol=1e-6, err_msg=f"{name}: grad vs finite differences")


# reverse mode gives what forward mode gives at the edges of a domain, where a derivative is
# infinite (a product whose other factor is 0 used to send inf * 0 = nan back) or a branch not
# taken is infinite there (sqrt at 0, inf - inf)
EDGES: list[tuple[str, Callable[..., Any], float, float]] = [
    ("arcsin(1)", tnp.arcsin, 1.0, inf), ("arcsin(-1)", tnp.arcsin, -1.0, inf),
    ("arccos(1)", tnp.arccos, 1.0, -inf), ("arccos(-1)", tnp.arccos, -1.0, -inf),
    ("arccosh(1)", tnp.arccosh, 1.0, inf), ("arccosh(1e308)", tnp.arccosh, 1e308, 1e-308),
    ("hypot(0, 0)", lambda x: tnp.hypot(x, 0.0), 0.0, 0.0),
    ("hypot(inf, 1)", lambda x: tnp.hypot(x, 1.0), inf, 0.0), ("hypot(1, inf)", lambda x: tnp.hypot(x, inf), 1.0, 0.0),
    ("hard_swish(inf)", tnn.hard_swish, inf, 1.0), ("hard_swish(-inf)", tnn.hard_swish, -inf, 0.0),
    ("sparse_plus(inf)", tnn.sparse_plus, inf, 1.0), ("sparse_plus(-inf)", tnn.sparse_plus, -inf, 0.0),
]


@pytest.mark.parametrize("case", EDGES, ids=[c[0] for c in EDGES])
def test_reverse_mode_at_domain_edges_is_forward_modes(case: tuple[str, Callable[..., Any], float, float]) -> None:
    _, f, x, want = case
    forward = tidu.grad(f)(x)  # one scalar input: forward mode
    reverse = tidu.grad(lambda v: tnp.sum(f(v)))(A([x]))[0]
    assert forward == want and reverse == want, (forward, reverse)


def test_arccosh_near_one_keeps_its_digits() -> None:
    """Within 4 ulp of NumPy's near 1, where 1 - 1/x cancelled (33 million ulp at 1 + 7e-9),
    and NumPy's values at its edges."""
    x = np.concatenate([1 + np.geomspace(1e-16, 1.0, 400), np.geomspace(2.0, 1e300, 100),
                        A([1.0, 2.0, inf, nan, 0.5, -1.0])])
    with np.errstate(invalid="ignore"):
        want = np.arccosh(x)
    got = tidu.jit(tnp.arccosh)(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = np.isfinite(want)
    np.testing.assert_array_equal(got[~ok], want[~ok])
    g, w = got[ok], want[ok]
    assert np.all((g == w) | (np.abs(g - w) <= 4 * np.spacing(np.abs(w))))


def test_arccosh_derivative_near_one_keeps_its_digits() -> None:
    """1 / sqrt(x^2 - 1) at x = 1 + 1e-7 to rounding (it lost half its digits with 1 - 1/x)."""
    x = 1 + 1e-7
    want = 1 / np.sqrt((x - 1) * (x + 1))
    np.testing.assert_allclose(tidu.grad(tnp.arccosh)(x), want, rtol=1e-14)
    np.testing.assert_allclose(tidu.grad(lambda v: tnp.sum(tnp.arccosh(v)))(A([x]))[0], want, rtol=1e-14)


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "nearest", "midpoint"])
def test_quantile_methods_as_numpy(method: str) -> None:
    """NumPy's (and JAX's) quantile methods traced: values to rounding (the three that pick
    one order statistic exactly), along an axis and with several q, percentile too, and
    the gradient against finite differences."""
    rng = np.random.default_rng(3)
    for n in (1, 2, 5, 8):
        x = rng.normal(size=(3, n))
        for q in (0.0, 0.1, 0.25, 0.5, 0.9, 1.0, A([0.3, 0.5])):
            got = tidu.jit(lambda v, q=q: tnp.quantile(v, q, axis=1, method=method))(x)
            want = np.quantile(x, q, axis=1, method=method)
            if method in ("lower", "higher", "nearest"):
                np.testing.assert_array_equal(got, want)
            else:
                np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)
            pct = tidu.jit(lambda v, q=q: tnp.percentile(v, np.asarray(q) * 100, axis=1, method=method))(x)
            np.testing.assert_allclose(pct, np.percentile(x, np.asarray(q) * 100, axis=1, method=method), rtol=1e-14)
    x = rng.normal(size=6)
    g = tidu.grad(lambda v: tnp.quantile(v, 0.3, method=method))(x)
    np.testing.assert_allclose(g, _fd_grad(lambda v: float(np.quantile(v, 0.3, method=method)), x), atol=1e-8)


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient_with_coordinates_and_second_order_edges(edge_order: int) -> None:
    """np.gradient's edge_order=2 and uneven coordinates traced, as NumPy's formulas, also
    with the coordinates traced (through NumPy's own np.gradient on a tracer: no endless
    hand-back between NumPy and tidu), and their derivatives against finite differences."""
    rng = np.random.default_rng(5)
    f = rng.normal(size=(5, 6))
    xs, ys = np.cumsum(rng.uniform(0.2, 1.0, 5)), np.cumsum(rng.uniform(0.2, 1.0, 6))
    for args in ((), (0.5,), (0.5, 2.0), (xs, ys), (xs, 0.3)):
        got = tidu.jit(lambda v, args=args: tnp.gradient(v, *args, edge_order=edge_order))(f)
        for g, w in zip(got, np.gradient(f, *args, edge_order=edge_order), strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-13)
    v, c = rng.normal(size=7), np.cumsum(rng.uniform(0.2, 1.0, 7))
    np.testing.assert_allclose(tidu.jit(lambda a, c: np.gradient(a, c, edge_order=edge_order))(v, c),
                               np.gradient(v, c, edge_order=edge_order), rtol=1e-13, atol=1e-13)
    w = np.arange(7.0)
    for k, arg in enumerate((v, c)):
        def loss(t, k=k):
            a, b = (t, c) if k == 0 else (v, t)
            return tnp.sum(tnp.gradient(a, b, edge_order=edge_order) * w)
        want = _fd_grad(lambda t, k=k: float(np.sum(np.gradient(*((t, c) if k == 0 else (v, t)),
                                                                 edge_order=edge_order) * w)), arg)
        np.testing.assert_allclose(tidu.grad(loss)(arg), want, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="edge_order=2 needs at least 3"):
        tidu.jit(lambda v: tnp.gradient(v, edge_order=2))(np.ones(2))


def test_interp_gradient_with_repeated_knots() -> None:
    """x beyond the repeated last knots: the untaken interior branch divides by a zero-width
    interval; its divisor is 1 there, so the gradient is 0 (JAX's), not nan."""
    fp = A([0.0, 1.0, 2.0])

    def f(xp: Any) -> Any:
        return tnp.interp(1.5, xp, fp)

    for xp in (A([0.0, 1.0, 1.0]), A([1.0, 1.0, 1.0])):
        np.testing.assert_array_equal(tidu.grad(f)(xp), np.zeros(3))
        np.testing.assert_array_equal(tidu.jacfwd(f)(xp), np.zeros(3))
    # between two knots, the first of them repeated: the ordinary slope's derivatives
    xp = A([0.0, 0.0, 2.0])
    np.testing.assert_allclose(tidu.grad(lambda xp: tnp.interp(1.5, xp, fp))(xp), [0.0, -0.125, -0.375])


def test_var_gradient_is_finite_below_the_degrees_of_freedom() -> None:
    """nanvar's divisor is 1 where N - ddof <= 0 (the value there is nan regardless), so the
    other elements' gradients stay finite."""
    x = A([[1.0, nan, 3.0], [1.0, 2.0, 4.0]])

    def g(x: Any) -> Any:
        return tnp.nanvar(x, ddof=2, axis=1)[1]

    grad = tidu.grad(g)(x)
    np.testing.assert_array_equal(grad[0], np.zeros(3))
    np.testing.assert_allclose(grad[1], _fd_grad(lambda v: float(np.nanvar(v, ddof=2)), x[1]), rtol=1e-6)


def test_expand_dims_with_several_axes_and_extrema_of_booleans() -> None:
    """Traced expand_dims took one axis only (a tuple failed deep inside), and traced
    maximum/minimum refused booleans, which NumPy takes (logical or / and)."""
    x = np.ones((2, 3))
    for axis in ((0, 3), (-1, 0), (1, 2), 2):
        assert tidu.jit(lambda v, axis=axis: tnp.expand_dims(v, axis))(x).shape == np.expand_dims(x, axis).shape
    p, q = np.array([True, False, True, False]), np.array([True, True, False, False])
    for fn in (tnp.maximum, tnp.minimum):
        got = tidu.jit(fn)(p, q)
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, fn(p, q))


def test_integer_quotients_past_2_53_on_every_backend() -> None:
    """floor_divide and lax.div of int64 past 2**53 (once through float64, off by up to
    hundreds) equal NumPy's and C's truncation on the NumPy, XLA and C back ends."""
    from tidu.lowering import c_build

    from tidu import lax

    a = A([2**62 + 1, -(2**60) - 3, 2**53 + 1, -(2**63), 2**63 - 1, -7, 9, 5], np.int64)
    b = A([3, 7, 2, 2**62 + 5, -(2**62) - 1, 2, -4, 0], np.int64)
    with np.errstate(all="ignore"):
        floor = np.floor_divide(a, b)
    trunc = np.array([0 if y == 0 else abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
                      for x, y in zip(a.tolist(), b.tolist(), strict=True)], np.int64)
    trunc[b == 0] = -1  # XLA's x / 0 (lax.div's documented value)
    backends = ["numpy"]
    if importlib.util.find_spec("jax") is not None:
        backends.append("xla")
    if c_build.compiler_or_none() is not None:
        backends.append("c")
    for f, want in ((tnp.floor_divide, floor), (lax.div, trunc)):
        program = tidu.make_graph(f)(a, b).program
        for backend in backends:
            got = program.run([a, b], backend=backend)[0]
            np.testing.assert_array_equal(got, want, err_msg=f"{f.__name__} on {backend}")
