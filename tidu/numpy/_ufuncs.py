"""tidu.numpy elementwise functions beyond the arithmetic core: rounding and modular
arithmetic (the ``floor``, ``ceil``, ``rint`` and ``rem`` primitives), inverse
trigonometric and hyperbolic functions, angles, logarithms of sums, floating-point
predicates and logic.

Most are compositions of primitives, written so that their derivatives (which tidu
takes through the composition) are right everywhere the function is smooth: a branch
chosen with ``where`` never sees arguments at which the other branch is undefined
("double where"), so no nan leaks into a gradient.
"""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

from tidu.core.keys import is_complex, is_inexact, is_integer
from tidu.numpy._core import ArrayLike, _convert, _prep, _shape, _trace_of, broadcast_shapes, numpy_fallback
from tidu.numpy._dtypes import _info, result_type
from tidu.numpy._elementwise import (
    _BF16,
    _bf16_scalars,
    _binary,
    _unary,
    abs,
    add,
    cos,
    divide,
    equal,
    exp,
    greater,
    greater_equal,
    imag,
    less,
    less_equal,
    log,
    log1p,
    maximum,
    minimum,
    multiply,
    negative,
    not_equal,
    power,
    real,
    sin,
    sqrt,
    subtract,
    where,
)
from tidu.numpy._filled import full_like
from tidu.ops.reference import float_to_int
from tidu.trace.derivatives import with_jvp
from tidu.trace.evaluator import run_traced
from tidu.trace.tracing import Tracer

# --- helpers ----------------------------------------------------------------------------


def _dtype(x: Any) -> str:
    return _info(x)[0]


def _is_int(x: Any) -> bool:
    return _dtype(x) == "bool" or is_integer(_dtype(x))


def _float(x: Any) -> Any:
    """``x`` with an inexact dtype (integers and bools become float64)."""
    if isinstance(x, Tracer) and not is_inexact(x.aval.dtype):
        return _convert(x, "float64")
    return x


def _complex(re: Any, im: Any) -> Tracer:
    """re + i im (both real, traced or not) as the ``complex`` primitive."""
    trace = _trace_of((re, im))
    assert trace is not None
    dtype = result_type(re, im)
    if not is_inexact(dtype):
        dtype = "float64"
    shape = broadcast_shapes(_shape(re), _shape(im), what="complex")
    return trace.emit("complex", [_prep(trace, re, dtype, shape), _prep(trace, im, dtype, shape)])


# --- rounding ---------------------------------------------------------------------------


def _real_only(name: str, *values: ArrayLike) -> None:
    """A one-line TypeError for a complex operand of a real function (NumPy's and JAX's)."""
    if is_complex(dtype := result_type(*values)):
        raise TypeError(f"tnp.{name} is not defined for complex values ({dtype})")


def _rounding(op: str, x: Any) -> Any:
    if _is_int(x):
        return x
    if is_complex(x.aval.dtype):
        return _complex(_rounding(op, real(x)), _rounding(op, imag(x)))
    return x.trace.emit(op, [x])


@numpy_fallback(np.floor)
def floor(x: ArrayLike) -> Any:
    """Largest integer <= x, elementwise (no derivative: piecewise constant)."""
    _real_only("floor", x)
    return _rounding("floor", x)


@numpy_fallback(np.ceil)
def ceil(x: ArrayLike) -> Any:
    """Smallest integer >= x, elementwise (no derivative: piecewise constant)."""
    _real_only("ceil", x)
    return _rounding("ceil", x)


@numpy_fallback(np.rint)
def rint(x: ArrayLike) -> Any:
    """Nearest integer, ties to even (no derivative: piecewise constant); a float for
    integers, as NumPy and JAX (floor, ceil and trunc keep their dtype)."""
    if _is_int(x):
        return _float(x)
    return _rounding("rint", x)


@numpy_fallback(np.trunc)
def trunc(x: ArrayLike) -> Any:
    """Round toward zero (no derivative: piecewise constant)."""
    _real_only("trunc", x)
    if _is_int(x):
        return x
    return where(less(x, 0), ceil(x), floor(x))


fix = trunc


def _int_of_float(v: Any, dtype: str) -> Any:
    """Integer-valued float64 ``v`` (NumPy arrays or tracers) in integer ``dtype``, wrapping
    around as integer arithmetic does (through int64, uint64 for uint64, saturating only
    past those: XLA's conversion). NumPy's own cast of a float64 out of a narrower type's
    range is the platform's (x86 wraps 8- and 16-bit results and gives -2**31 for int32)."""
    wide = "uint64" if dtype == "uint64" else "int64"
    if isinstance(v, Tracer):
        return _convert(_convert(v, wide), dtype)
    return float_to_int(v, wide).astype(dtype)


def _np_round(x: Any, decimals: int = 0) -> Any:
    """NumPy's round, but integers to negative decimals wrapped to their dtype on every
    platform (``_int_of_float``), as traced tidu rounds them."""
    a = np.asarray(x)
    if a.dtype.kind not in "iu" or decimals >= 0:
        return np.round(x, decimals)
    scale = 10.0 ** -decimals
    with np.errstate(invalid="ignore", over="ignore"):
        out = _int_of_float(np.rint(a.astype(np.float64) / scale) * scale, a.dtype.name)
    return out[()] if out.ndim == 0 else out


@numpy_fallback(_np_round)
def round(x: ArrayLike, decimals: int = 0) -> Any:  # noqa: A001 (numpy name)
    """Round to ``decimals`` decimals, ties to even, NumPy's steps in x's dtype: x * 10**d
    rounded, / 10**d (to negative decimals: x / 10**-d rounded, * 10**-d). Integers to a
    multiple of 10**-decimals through float64 (exact below 2**53), the result wrapped
    around to their own dtype (int8 127 to -1 decimals is -126, as NumPy); bools as floats
    (NumPy's float16, float64 here as for sin of bools; NumPy refuses decimals other than 0)."""
    if _dtype(x) == "bool":
        if decimals != 0:
            raise TypeError(f"tnp.round: bools round to 0 decimals only (NumPy cannot cast the scaled values "
                            f"back to bool), got decimals={decimals}; convert them with astype first")
        return rint(x)
    if _is_int(x):
        if decimals >= 0:
            return x
        scale = 10.0 ** -decimals
        return _int_of_float(multiply(rint(divide(_float(x), scale)), scale), x.aval.dtype)
    if decimals == 0:
        return rint(x)
    if decimals < 0:
        scale = 10.0 ** -decimals
        return multiply(rint(divide(x, scale)), scale)
    scale = 10.0 ** decimals
    return divide(rint(multiply(x, scale)), scale)


around = round


# --- modular arithmetic -----------------------------------------------------------------


def _modular(name: str, x: Any, y: Any) -> tuple[Any, Any, str]:
    """Operands as floats of the common dtype (integers go through float64, exact below
    2**53)."""
    dtype = result_type(x, y)
    if is_complex(dtype):
        raise TypeError(f"tnp.{name} is not defined for complex values ({dtype})")
    work = dtype if is_inexact(dtype) else "float64"
    trace = _trace_of((x, y))
    shape = broadcast_shapes(_shape(x), _shape(y), what=name)
    return _prep(trace, x, work, shape), _prep(trace, y, work, shape), dtype


def _back(v: Any, dtype: str, divisor: Any = None) -> Any:
    """``v`` in ``dtype``; for integers, 0 where ``divisor`` is 0 (NumPy's integer
    division by zero: not the float's inf or nan, whose conversion is no number)."""
    if v.aval.dtype == dtype:
        return v
    if divisor is not None and not is_inexact(dtype):
        v = where(equal(divisor, 0), 0.0, v)
    return _convert(v, dtype)


def _integer_modular(x: Any, y: Any) -> tuple[Any, Any] | None:
    """Integer operands in their common integer dtype, for ``rem`` on integers (exact at
    every magnitude), or None; booleans as int8, NumPy's dtype for them (True // True is
    int8 1: the bool result traced was eager's int8 no more)."""
    dtype = result_type(x, y)
    if dtype == "bool":
        dtype = "int8"
    elif not is_integer(dtype):
        return None
    trace = _trace_of((x, y))
    shape = broadcast_shapes(_shape(x), _shape(y), what="remainder")
    return _prep(trace, x, dtype, shape), _prep(trace, y, dtype, shape)


@numpy_fallback(_bf16_scalars(np.fmod), "x", "y")
def fmod(x: ArrayLike, y: ArrayLike) -> Any:
    """C's fmod: x - trunc(x / y) * y, computed exactly; the sign of x."""
    ints = _integer_modular(x, y)
    if ints is not None:  # (0 where y is 0, as NumPy's)
        return ints[0].trace.emit("rem", list(ints))
    a, b, dtype = _modular("fmod", x, y)
    return _back(a.trace.emit("rem", [a, b]), dtype, b)


@numpy_fallback(_bf16_scalars(np.remainder), "x", "y")
def remainder(x: ArrayLike, y: ArrayLike) -> Any:
    """x - floor(x / y) * y, computed exactly; the sign of y (Python's %)."""
    ints = _integer_modular(x, y)  # (integers: in their dtype, 0 where y is 0, as NumPy's)
    a, b, dtype = (*ints, None) if ints is not None else _modular("remainder", x, y)
    r = a.trace.emit("rem", [a, b])
    if not b.aval.dtype.startswith("uint"):
        wrong_sign = logical_and(not_equal(r, 0), not_equal(less(r, 0), less(b, 0)))
        r = where(wrong_sign, add(r, b), r)
    return r if dtype is None else _back(r, dtype, b)


mod = remainder


@numpy_fallback(_bf16_scalars(np.floor_divide), "x", "y")
def floor_divide(x: ArrayLike, y: ArrayLike) -> Any:
    """floor(x / y), rounded as NumPy does: (x - fmod(x, y)) / y, corrected by one where
    the remainder's sign differs from y's. No derivative (piecewise constant). Integers
    are divided exactly at every magnitude (``_integer_floor_divide``)."""
    ints = _integer_modular(x, y)
    if ints is not None:
        return _integer_floor_divide(*ints)
    a, b, dtype = _modular("floor_divide", x, y)
    r = a.trace.emit("rem", [a, b])
    q = divide(subtract(a, r), b)
    wrong_sign = logical_and(not_equal(r, 0), not_equal(less(r, 0), less(b, 0)))
    q = where(wrong_sign, subtract(q, 1.0), q)
    fq = floor(q)
    q = where(greater(subtract(q, fq), 0.5), add(fq, 1.0), fq)
    q = where(equal(q, 0), where(signbit(divide(a, b)), -0.0, 0.0), q)  # NumPy: copysign(0, a / b)
    # x // 0 is x / 0 (+-inf, nan): constant too, no derivative (a / b's was +-inf and nan)
    by_zero = divide(a, b)
    q = where(equal(b, 0), by_zero.trace.emit("stop_gradient", [by_zero]), q)
    return _back(q, dtype, b)


def _integer_floor_divide(a: Any, b: Any) -> Any:
    """floor(a / b) of integers in their dtype, exact where float64 is not (past 2**53):
    a - fmod(a, b) is a multiple of b, so its quotient q0 through float64 is off by a few
    units at most; the rest, (a - fmod(a, b)) - q0 * b in the integers (exact: wrapping
    cancels), is a small multiple of b whose quotient float64 gives exactly. 0 where b is
    0, as NumPy's (and INT_MIN // -1 wraps to INT_MIN, as NumPy's)."""
    dtype = a.aval.dtype
    r = a.trace.emit("rem", [a, b])  # exact, the sign of a (0 where b is 0)
    exact = subtract(a, r)
    bf = _convert(b, "float64")
    q0 = _convert(_rounding("rint", divide(_convert(exact, "float64"), bf)), dtype)
    rest = subtract(exact, multiply(q0, b))
    # unsigned: q0 may be one too many, the rest is then "negative", wrapped: read and add it
    # as the signed integer of that width (a negative float converts to 0 in an unsigned type)
    signed = dtype[1:] if dtype.startswith("uint") else dtype
    fix = _convert(_rounding("rint", divide(_convert(_convert(rest, signed), "float64"), bf)), signed)
    q = add(q0, _convert(fix, dtype))
    if not dtype.startswith("uint"):  # floor, not trunc: one less where r and b differ in sign
        q = where(logical_and(not_equal(r, 0), not_equal(less(r, 0), less(b, 0))), subtract(q, 1), q)
    return where(equal(b, 0), 0, q)


@numpy_fallback(_bf16_scalars(np.divmod), "x", "y")
def divmod(x: ArrayLike, y: ArrayLike) -> tuple[Any, Any]:  # noqa: A001 (numpy name)
    """(floor_divide(x, y), remainder(x, y))."""
    return floor_divide(x, y), remainder(x, y)


@numpy_fallback(np.modf)
def modf(x: ArrayLike) -> tuple[Any, Any]:
    """(fractional part, integral part), both with the sign of x (also a zero fractional
    part, and the fractional part of +-inf: +-0.0, as NumPy); derivative 1 and 0."""
    x = _float(x)
    i = trunc(x)
    # x - trunc(x) is +0.0 at integers: for negative x take -((-x) - (-trunc(x))), -0.0 there
    frac = where(signbit(x), negative(subtract(negative(x), negative(i))), subtract(x, i))
    return where(isinf(x), where(less(x, 0), -0.0, full_like(x, 0.0)), frac), i


# --- inverse trigonometric and hyperbolic functions -------------------------------------


@numpy_fallback(_bf16_scalars(np.arctan2), "y", "x")
def arctan2(y: ArrayLike, x: ArrayLike) -> Any:
    """The angle of the point (x, y), in [-pi, pi]: the primitive ``atan2`` (real inputs)."""
    dtype = result_type(y, x)
    if is_complex(dtype):
        raise TypeError("tnp.arctan2 is not defined for complex values")
    if dtype in ("float16", "bfloat16"):  # no complex dtype pairs with them: in float32, rounded once
        trace = _trace_of((y, x))
        assert trace is not None  # numpy_fallback computed the concrete case
        shape = broadcast_shapes(_shape(y), _shape(x), what="arctan2")
        return _convert(arctan2(_prep(trace, y, "float32", shape), _prep(trace, x, "float32", shape)), dtype)
    return _binary("atan2", "arctan2", y, x, inexact=True, real_only=True)


def _inexact_pair(name: str, x: Any, y: Any) -> tuple[Tracer, Tracer]:
    """``x`` and ``y`` as tracers of their common dtype (JAX's promotion, so a Python number
    takes the other operand's dtype), inexact (integers and bools: float64), broadcast
    together; complex values refused. (Made one at a time, a Python number would come back
    from an eager tnp call as a float64 NumPy scalar, no longer weakly typed.)"""
    trace = _trace_of((x, y))
    assert trace is not None  # numpy_fallback computed the concrete case
    dtype = result_type(x, y)
    if is_complex(dtype):
        raise TypeError(f"tnp.{name} is not defined for complex values ({dtype})")
    if not is_inexact(dtype):
        dtype = "float64"
    shape = broadcast_shapes(_shape(x), _shape(y), what=name)
    return _prep(trace, x, dtype, shape), _prep(trace, y, dtype, shape)


def _float_like(x: Any) -> Any:
    """``_float`` for tracers and constants alike (Python numbers stay weakly typed)."""
    if isinstance(x, Tracer):
        return _float(x)
    if not _is_int(x):
        return x
    return float(x) if isinstance(x, int | bool) else np.asarray(x, dtype="float64")


# --- complex inverse trigonometric functions ---------------------------------------------
# Kahan's formulas ("Branch cuts for complex elementary functions", 1987), C99's and
# NumPy's values: each part a real function of the real and imaginary parts, with no
# complex 1 - z (whose imaginary part 0 - 0 would lose the sign of a zero, which picks the
# side of a branch cut), no z^2 (which overflows past 1e154 and cancels in i z + sqrt(1 -
# z^2) at large |z|) and no complex product by a real constant (whose 0 * inf makes a nan
# at the infinities of arctanh(+-1)). Past |x|, |y| = 2^27 (complex64: 2^12) the leading
# terms of the expansions at infinity are exact to the dtype and cannot overflow: they
# give the values there, infinities included (a where whose branches each see only the
# arguments they are taken at, so no nan reaches a derivative).


def _parts(z: Tracer) -> tuple[Tracer, Tracer]:
    return real(z), imag(z)


def _times_i(z: Tracer) -> Tracer:
    """i z, exactly (signed zeros kept)."""
    return _complex(negative(imag(z)), real(z))


def _times_minus_i(z: Tracer) -> Tracer:
    """-i z, exactly (signed zeros kept)."""
    return _complex(imag(z), negative(real(z)))


def _split_large(z: Tracer) -> tuple[Tracer, tuple[Tracer, Tracer], tuple[Tracer, Tracer]]:
    """(large, (x, y) where not large else 0, (x, y) where large else (2 big, 0)) for z = x +
    iy, large where max(|x|, |y|) > big = 2^27 (complex64: 2^12)."""
    x, y = _parts(z)
    big = 2.0**27 if z.aval.dtype == "complex128" else 2.0**12
    large = greater(maximum(abs(x), abs(y)), big)
    return large, (where(large, 0.0, x), where(large, 0.0, y)), (where(large, x, 2 * big), where(large, y, 0.0))


def _log_2_abs(x: Tracer, y: Tracer) -> Tracer:
    """log(2 |x + iy|)."""
    return add(log(hypot(x, y)), math.log(2.0))


def _sqrt_parts(x: Tracer, y: Tracer) -> tuple[Tracer, Tracer]:
    """The parts of the principal sqrt(x + iy), from real operations: t = sqrt((|x| + |z|) /
    2) and y / 2t, the sign of the imaginary part y's, -0.0 included, on every back end
    (XLA's complex sqrt(-4 - 0j) is 2j, C99's and NumPy's -2j)."""
    t = sqrt(multiply(add(abs(x), hypot(x, y)), 0.5))
    two_t = where(equal(t, 0.0), 1.0, multiply(t, 2.0))  # (t = 0 at z = 0 only: y / 1 is y)
    right = greater_equal(x, 0.0)
    return where(right, t, divide(abs(y), two_t)), where(right, divide(y, two_t), copysign(t, y))


def _kahan_sqrts(x: Tracer, y: Tracer) -> tuple[tuple[Tracer, Tracer], tuple[Tracer, Tracer]]:
    """The parts of sqrt(1 - z) and sqrt(1 + z), z = x + iy, the imaginary part of 1 - z
    being -y (signed zeros kept: 1 - (3 + 0j) is -2 - 0j, below the cut of sqrt)."""
    return _sqrt_parts(subtract(1.0, x), negative(y)), _sqrt_parts(add(1.0, x), y)


def _complex_arcsin(z: Tracer) -> Tracer:
    """atan2(Re z, Re(sqrt(1 - z) sqrt(1 + z))) + i asinh(Im(conj(sqrt(1 - z)) sqrt(1 + z)));
    at large z atan2(x, |y|) + i sign(y) log(2 |z|)."""
    large, (x, y), (xl, yl) = _split_large(z)
    (a, b), (c, d) = _kahan_sqrts(x, y)
    re = arctan2(x, subtract(multiply(a, c), multiply(b, d)))
    im = arcsinh(subtract(multiply(a, d), multiply(b, c)))
    return _complex(where(large, arctan2(xl, abs(yl)), re), where(large, copysign(_log_2_abs(xl, yl), yl), im))


def _complex_arctanh(z: Tracer) -> Tracer:
    """log1p(4a / ((1 - a)^2 + y^2)) / 4 with x's sign, a = |x|, + (i/2) atan2(2y, (1 - x)(1 +
    x) - y^2), z = x + iy: the halves of log(1 + z) - log(1 - z), no digits lost near 0 or
    near -1 (the odd symmetry); at large z 1/z + i sign(y) pi/2 (arctanh(1/z) = 1/z there)."""
    large, (x, y), (xl, yl) = _split_large(z)
    neg = signbit(x)
    a = where(neg, negative(x), x)
    one_minus = subtract(1.0, a)
    r = multiply(log1p(divide(multiply(4.0, a), add(multiply(one_minus, one_minus), multiply(y, y)))), 0.25)
    re = where(neg, negative(r), r)
    im = multiply(arctan2(multiply(2.0, y), subtract(multiply(subtract(1.0, x), add(1.0, x)), multiply(y, y))), 0.5)
    # 1/z = (x - iy) / |z|^2, scaled by m = max(|x|, |y|) (0 with the parts' signs at inf)
    m = maximum(abs(xl), abs(yl))
    inf = equal(m, np.inf)
    m = where(inf, 1.0, m)
    u, v = divide(where(inf, 1.0, xl), m), divide(where(inf, 0.0, yl), m)
    q = add(multiply(u, u), multiply(v, v))
    re_l = where(inf, copysign(0.0, xl), divide(divide(u, q), m))
    im_l = add(copysign(math.pi / 2, yl), where(inf, copysign(0.0, negative(yl)), negative(divide(divide(v, q), m))))
    return _complex(where(large, re_l, re), where(large, im_l, im))


@numpy_fallback(np.arctan)
def arctan(x: ArrayLike) -> Any:
    """Inverse tangent; complex: -i arctanh(i x) (Kahan's, as C99 and NumPy)."""
    x = _float(x)
    if is_complex(x.aval.dtype):
        return _times_minus_i(_complex_arctanh(_times_i(x)))
    return _unary("atan", x)


@numpy_fallback(np.arcsin)
def arcsin(x: ArrayLike) -> Any:
    """Inverse sine; complex: Kahan's formula from sqrt(1 - x) and sqrt(1 + x) (C99's and
    NumPy's values, on the branch cuts too)."""
    x = _float(x)
    if is_complex(x.aval.dtype):
        return _complex_arcsin(x)
    return _unary("asin", x)


def _cos_of_arcsin(x: Any) -> Any:
    """sqrt(1 - x^2) as sqrt(1 - x) sqrt(1 + x): at x = +-1 one factor is 0 and its
    derivative inf, the other finite and not 0, so reverse mode gives the inf forward
    mode gives (sqrt((1 - x)(1 + x)) would send inf times the other's 0: nan)."""
    return multiply(sqrt(subtract(1.0, x)), sqrt(add(1.0, x)))


@numpy_fallback(np.arccos)
def arccos(x: ArrayLike) -> Any:
    """Inverse cosine; complex: Kahan's 2 atan2(Re sqrt(1 - x), Re sqrt(1 + x)) +
    i asinh(Im(conj(sqrt(1 + x)) sqrt(1 - x))) (C99's and NumPy's values), at large x
    atan2(|Im x|, Re x) - i sign(Im x) log(2 |x|)."""
    x = _float(x)
    if is_complex(x.aval.dtype):
        large, (re, im), (xl, yl) = _split_large(x)
        (a, b), (c, d) = _kahan_sqrts(re, im)
        return _complex(where(large, arctan2(abs(yl), xl), multiply(arctan2(a, c), 2.0)),
                        where(large, copysign(_log_2_abs(xl, yl), negative(yl)),
                              arcsinh(subtract(multiply(c, b), multiply(d, a)))))
    return _unary("acos", x)


@numpy_fallback(np.arcsinh)
def arcsinh(x: ArrayLike) -> Any:
    """Inverse hyperbolic sine: float32 and float64 the primitive asinh, float16 it in
    float32 (rounded once); bfloat16 (whose x^2 overflows past 2^64 in float32, which would
    make the primitive's derivative 0) odd symmetry around log1p(a + a^2/(1 + sqrt(1 +
    a^2))) (accurate at both ends); complex: -i arcsin(i x) (Kahan's, as C99 and NumPy)."""
    x = _float(x)
    if is_complex(x.aval.dtype):
        return _times_minus_i(_complex_arcsin(_times_i(x)))
    if x.aval.dtype in ("float32", "float64"):
        return _unary("asinh", x)
    if x.aval.dtype == "float16":  # in float32, rounded once, as NumPy's loop (no overflow there)
        return _convert(_unary("asinh", _convert(x, "float32")), "float16")
    pos = logical_not(signbit(x))  # x >= +0, and nan: -0.0 keeps its sign
    a = where(pos, x, negative(x))
    # a^2 would overflow long before asinh does: log(2a) (float16's a^2 overflows past 255;
    # the threshold, beyond which log(2a) is exact to the dtype, is itself finite there)
    big = greater(a, 2.0**7 if x.aval.dtype == "float16" else 2.0**28)
    small_a = where(big, 1.0, a)
    r = log1p(add(small_a, divide(multiply(small_a, small_a),
                                  add(1.0, sqrt(add(1.0, multiply(small_a, small_a)))))))
    r = where(big, add(log(where(big, a, 1.0)), math.log(2.0)), r)
    return where(pos, r, negative(r))


@numpy_fallback(np.arccosh)
def arccosh(x: ArrayLike) -> Any:
    """Inverse hyperbolic cosine: float32 and float64 the primitive acosh, float16 it in
    float32 (rounded once); bfloat16 below 2 log1p(t + sqrt(t) sqrt(2 + t)) with t = x - 1
    (exact: no digits lost near 1, where 1 - 1/x cancels), from 2 on log(x) +
    log1p(sqrt(1 - 1/x) sqrt(1 + 1/x)) (no overflow); complex: Kahan's asinh(Re(conj(sqrt(x -
    1)) sqrt(x + 1))) + 2i atan2(Im sqrt(x - 1), Re sqrt(x + 1)) (C99's and NumPy's values), at
    large x log(2 x)."""
    x = _float(x)
    if is_complex(x.aval.dtype):
        large, (re, im), (xl, yl) = _split_large(x)
        (a, b), (c, d) = (_sqrt_parts(v, im) for v in (subtract(re, 1.0), add(re, 1.0)))
        return _complex(where(large, _log_2_abs(xl, yl), arcsinh(add(multiply(a, c), multiply(b, d)))),
                        where(large, arctan2(yl, xl), multiply(arctan2(b, c), 2.0)))
    if x.aval.dtype in ("float32", "float64"):
        return _unary("acosh", x)
    if x.aval.dtype == "float16":  # in float32, rounded once, as NumPy's loop (no overflow there)
        return _convert(_unary("acosh", _convert(x, "float32")), "float16")
    near = less(x, 2.0)
    t = subtract(where(near, x, 1.5), 1.0)  # (each branch on inputs it is finite at: no 0 * inf in reverse mode)
    small = log1p(add(t, multiply(sqrt(t), sqrt(add(t, 2.0)))))
    far = where(near, 2.0, x)
    return where(near, small, add(log(far), log1p(_cos_of_arcsin(divide(1.0, far)))))


@numpy_fallback(np.arctanh)
def arctanh(x: ArrayLike) -> Any:
    """Inverse hyperbolic tangent; real float32 and float64 the primitive atanh, float16 it
    in float32 (rounded once), bfloat16 (log1p(x) - log1p(-x)) / 2; complex: Kahan's formula (C99's and NumPy's
    values)."""
    x = _float(x)
    if x.aval.dtype in ("float32", "float64"):
        return _unary("atanh", x)
    if x.aval.dtype == "float16":  # in float32, rounded once, as NumPy's loop (no overflow there)
        return _convert(_unary("atanh", _convert(x, "float32")), "float16")
    if is_complex(x.aval.dtype):
        return _complex_arctanh(x)
    return multiply(subtract(log1p(x), log1p(negative(x))), 0.5)


@numpy_fallback(_bf16_scalars(np.hypot), "x", "y")
def hypot(x: ArrayLike, y: ArrayLike) -> Any:
    """sqrt(x^2 + y^2) without overflow: m sqrt((x/m)^2 + (y/m)^2), m = max(|x|, |y|); of
    float16 and bfloat16 in float32, rounded once (NumPy's half-precision loops)."""
    a, b = _inexact_pair("hypot", x, y)
    if a.aval.dtype in ("float16", "bfloat16"):
        return _convert(hypot(_convert(a, "float32"), _convert(b, "float32")), a.aval.dtype)
    ax, ay = abs(a), abs(b)
    m = maximum(ax, ay)
    zero = equal(m, 0)
    inf = logical_or(equal(ax, np.inf), equal(ay, np.inf))  # inf even beside a nan (IEEE, C's hypot)
    off = logical_or(zero, inf)  # the quotient branch is not taken
    safe = where(off, 1.0, m)
    # where it is not taken it runs on 1 and 0: its derivatives there are finite, so reverse
    # mode sends back 0 as forward mode does (at the origin sqrt(0)'s inf, at an infinite
    # operand inf / 1, would make 0 * inf a nan)
    u, v = divide(where(off, 1.0, ax), safe), divide(where(off, 0.0, ay), safe)
    r = multiply(safe, sqrt(add(multiply(u, u), multiply(v, v))))
    return where(inf, np.inf, where(zero, 0.0, r))


@numpy_fallback(np.deg2rad)
def deg2rad(x: ArrayLike) -> Any:
    """Degrees to radians: x * pi / 180."""
    return multiply(_float(x), math.pi / 180)


@numpy_fallback(np.rad2deg)
def rad2deg(x: ArrayLike) -> Any:
    """Radians to degrees: x * 180 / pi."""
    return multiply(_float(x), 180 / math.pi)


radians, degrees = deg2rad, rad2deg


@numpy_fallback(np.angle)
def angle(z: ArrayLike, deg: bool = False) -> Any:
    """The argument of z: arctan2(imag(z), real(z)); for real z, as NumPy's arctan2(0, z),
    pi where z has its sign bit set (also -0.0), 0 elsewhere and nan at nan; in degrees if ``deg``."""
    z = _float(z)
    if is_complex(z.aval.dtype):
        a = arctan2(imag(z), real(z))
    else:
        a = where(isnan(z), np.nan, where(signbit(z), math.pi, full_like(z, 0.0)))
    return rad2deg(a) if deg else a


# --- exponentials and logarithms of sums -------------------------------------------------


@numpy_fallback(np.exp2)
def exp2(x: ArrayLike) -> Any:
    """2 ** x (exact at integers)."""
    return power(2.0, _float(x))


def _logaddexp(x: Any, y: Any, ln_base: float) -> Any:
    """log_b(b**x + b**y) (``ln_base`` = ln b): of real values ``_real_logaddexp`` with the
    derivative rule ``_logaddexp_jvp`` (tidu.trace.derivatives)."""
    joint = result_type(x, y)  # (an integer beside a float takes its dtype: int8 with float16 is float16)
    x, y = _float_like(x), _float_like(y)
    if is_complex(_dtype(x)) or is_complex(_dtype(y)):
        return _complex_logaddexp(x, y, ln_base)
    trace = _trace_of((x, y))
    if trace is None:
        return _real_logaddexp(x, y, ln_base)
    # both as tracers of the one dtype: the rule sees its arguments as tracers, and a weak
    # Python number would come to it as a float64 constant
    dtype = joint if is_inexact(joint) else result_type(x, y)
    x, y = _prep(trace, x, dtype), _prep(trace, y, dtype)
    return (_logaddexp_e_rule if ln_base == 1.0 else _logaddexp_2_rule)(x, y)


def _real_logaddexp(x: Any, y: Any, ln_base: float) -> Any:
    """log_b(b**x + b**y) of real values, as NumPy computes it: max(x, y) + log1p(b**-|x -
    y|) / ln b, which cannot overflow, with x - y taken as 0 where x == y (at equal
    infinities it is nan). Only the value: the derivatives are ``_logaddexp_jvp``'s, so the
    form need not be smooth at the tie (abs and max have their kinks there). Of float16 and
    bfloat16 in float32, rounded once, as NumPy's (eager and traced values agree)."""
    dtype = _dtype(x)
    if dtype in ("float16", "bfloat16"):
        return _convert(_real_logaddexp(_convert(x, "float32"), _convert(y, "float32"), ln_base), dtype)
    t = where(equal(x, y), 0.0, subtract(x, y))
    if ln_base != 1.0:
        t = multiply(t, ln_base)
    tail = log1p(exp(negative(abs(t))))
    return add(maximum(x, y), tail if ln_base == 1.0 else divide(tail, ln_base))


def _logaddexp_weights(x: Any, y: Any, ln_base: float) -> tuple[Any, Any]:
    """The derivatives of log_b(b**x + b**y) in x and y: sigmoid(t) and sigmoid(-t), t = (x -
    y) ln b, each in [0, 1] (so a tangent is multiplied by one weight, never added to a term
    of opposite sign: an infinite tangent gives an infinite derivative, as JAX's exp(x -
    out)), by the primitive ``logistic`` (no overflow, smooth: the second derivative at the
    tie is 1/4); 1/2 each at a tie and at equal infinities (t = 0 there). Of float16
    and bfloat16 in float32, rounded once (three roundings in bfloat16 made the second
    derivative's error 1.4 ulp)."""
    dtype = x.aval.dtype
    if dtype in ("float16", "bfloat16"):
        wx, wy = _logaddexp_weights(_convert(x, "float32"), _convert(y, "float32"), ln_base)
        return _convert(wx, dtype), _convert(wy, dtype)
    t = subtract(x, y)
    t = where(logical_and(equal(x, y), equal(abs(x), np.inf)), 0.0, t)  # (x - y is nan at equal infinities)
    if ln_base != 1.0:
        t = multiply(t, ln_base)
    return _unary("logistic", t), _unary("logistic", negative(t))


def _logaddexp_jvp(ln_base: float) -> Any:
    def rule(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, Any]:
        (x, y), (dx, dy) = primals, tangents
        wx, wy = _logaddexp_weights(x, y, ln_base)
        # no primal: tidu's custom_jvp takes only the tangent of a rule (the value is the
        # call's own, tidu/transforms/custom.py _custom_jvp_rule); tracing the value again
        # in every rule call slowed building derivative graphs
        return None, add(multiply(dx, wx), multiply(dy, wy))
    return rule


def _real_logaddexp_e(x: Any, y: Any) -> Any:
    return _real_logaddexp(x, y, 1.0)


def _real_logaddexp_2(x: Any, y: Any) -> Any:
    return _real_logaddexp(x, y, math.log(2.0))


# real logaddexp and logaddexp2 with their own derivatives (tidu.trace.derivatives)
_logaddexp_e_rule = with_jvp(_real_logaddexp_e, _logaddexp_jvp(1.0), elementwise=True)
_logaddexp_2_rule = with_jvp(_real_logaddexp_2, _logaddexp_jvp(math.log(2.0)), elementwise=True)


def _complex_logaddexp(x: Any, y: Any, ln_base: float) -> Any:
    """The principal log_b(b**x + b**y) of complex values (JAX's): m + log1p(b**(o - m)) / ln b
    with m the operand of the larger real part (|b**(o - m)| <= 1: no overflow), its
    imaginary part (times ln b) brought into (-pi, pi]. (The real form's |x - y| is the
    modulus here, which gave wrong values.)"""
    first = greater_equal(real(x), real(y))
    m, o = where(first, x, y), where(first, y, x)
    v = add(m, divide(log1p(exp(multiply(subtract(o, m), ln_base))), ln_base))
    im = multiply(imag(v), ln_base)
    return _complex(real(v), divide(arctan2(sin(im), cos(im)), ln_base))


def _logaddexp_e(x: Any, y: Any) -> Any:
    return _logaddexp(x, y, 1.0)


def _half(x: Any, y: Any) -> bool:
    return np.result_type(x, y).name in ("float16", "bfloat16")


def _np_logaddexp(x: Any, y: Any) -> Any:
    """NumPy's logaddexp; of complex values (which NumPy's lacks) tidu's own, traced, as a
    traced call computes it, and of float16 and bfloat16 too (in float32, rounded once, as
    NumPy's, whose float32 loop can round to the other side of a half-precision tie)."""
    if np.iscomplexobj(x) or np.iscomplexobj(y) or _half(x, y):
        return run_traced(_logaddexp_e, (x, y), {})
    return _bf16_scalars(np.logaddexp)(x, y)


@numpy_fallback(_np_logaddexp, "x", "y")
def logaddexp(x: ArrayLike, y: ArrayLike) -> Any:
    """log(exp(x) + exp(y)) without overflow, with the right derivatives also at x == y;
    complex values too (as JAX's; eagerly as well, where NumPy has none)."""
    return _logaddexp(x, y, 1.0)


def _logaddexp_2(x: Any, y: Any) -> Any:
    return _logaddexp(x, y, math.log(2.0))


def _np_logaddexp2(x: Any, y: Any) -> Any:
    if np.iscomplexobj(x) or np.iscomplexobj(y) or _half(x, y):  # (as logaddexp's)
        return run_traced(_logaddexp_2, (x, y), {})
    return _bf16_scalars(np.logaddexp2)(x, y)


@numpy_fallback(_np_logaddexp2, "x", "y")
def logaddexp2(x: ArrayLike, y: ArrayLike) -> Any:
    """log2(2**x + 2**y) without overflow, with the right derivatives also at x == y."""
    return _logaddexp(x, y, math.log(2.0))


@numpy_fallback(np.cbrt)
def cbrt(x: ArrayLike) -> Any:
    """Real cube root (-0.0 keeps its sign): the primitive ``cbrt``, so traced values are
    NumPy's own (sign(x) |x|^(1/3) was up to 105 ulp off them, 1/3 not being a double).
    float16 and bfloat16 in float32, rounded once, as NumPy computes them."""
    x = _float(x)
    if is_complex(x.aval.dtype):
        raise TypeError("tnp.cbrt is not defined for complex values")
    if x.aval.dtype in ("float16", "bfloat16"):
        return _unary("cbrt", x.astype(np.float32)).astype(x.aval.dtype)
    return _unary("cbrt", x)


@numpy_fallback(np.i0)
def i0(x: ArrayLike) -> Any:
    """The modified Bessel function of the first kind of order 0 (the primitive ``i0`` of
    rules/special.rules: its derivative I1 is right at 0 too); real values only, as
    jax.numpy.i0."""
    x = _float(x)
    if is_complex(x.aval.dtype):
        raise TypeError("tnp.i0 is not defined for complex values")
    return x.trace.emit("i0", [x], {})


def _np_sinc(x: Any) -> Any:
    """NumPy's sinc, 0 at +-inf as JAX's and traced tidu's (NumPy's is nan there)."""
    x = np.asarray(x)
    with np.errstate(invalid="ignore"):
        out = np.sinc(x)
        infinite = np.isinf(x.real) & np.isfinite(x.imag) if np.iscomplexobj(x) else np.isinf(x)
    if infinite.any():
        out = np.where(infinite, np.zeros((), out.dtype), out)[()]
    return out


@numpy_fallback(_np_sinc, accumulates=True)
def sinc(x: ArrayLike) -> Any:
    """sin(pi x) / (pi x), 1 at 0 and 0 at +-inf (jax.numpy's; NumPy's is nan there, tidu's
    eager result too is 0); for |pi x| < 1 its Taylor polynomial (to (pi x)^22, within an ulp
    there), so every derivative is right there too: the n-th derivative of sin(p) / p
    cancels terms of size n! / p^(n+1), and with the polynomial only up to |p| < 0.01 the
    third and fourth derivatives at |p| = 0.01 were off by 3e-7 and 1e-6."""
    x = _float(x)
    infinite = _infinite_real_part(x)  # sinc -> 0 there, as JAX's (sin(inf) / inf would be nan)
    x = where(infinite, 0.5, x)  # a finite stand-in: no nan reaches the derivative
    px = multiply(x, math.pi)
    small = less(abs(px), 1.0)
    safe = where(small, 1.0, px)
    # the series runs on 0 where it is not taken: p^22 overflows past |x| ~ 1e14, and reverse
    # mode's 0 * inf there was a nan gradient and Hessian
    p2 = where(small, multiply(px, px), 0.0)
    taylor = _SINC_SERIES[-1]
    for c in reversed(_SINC_SERIES[:-1]):  # sum over k <= 11 of (-p^2)^k / (2k + 1)!, by Horner
        taylor = add(c, multiply(p2, taylor))
    return where(infinite, 0.0, where(small, taylor, divide(sin(safe), safe)))


_SINC_SERIES = [(-1.0) ** k / math.factorial(2 * k + 1) for k in range(12)]


def _infinite_real_part(x: Tracer) -> Tracer:
    """Where sinc's limit 0 applies: x = +-inf (a complex x: an infinite real part and a
    finite imaginary one, as JAX's)."""
    if not is_complex(x.aval.dtype):
        return isinf(x)
    return logical_and(isinf(real(x)), isfinite(imag(x)))


@numpy_fallback(np.float_power, "x", "y")
def float_power(x: ArrayLike, y: ArrayLike) -> Any:
    """x ** y in float64 (complex128 for complex operands)."""
    dtype = "complex128" if is_complex(result_type(x, y)) else "float64"
    trace = _trace_of((x, y))
    return power(_prep(trace, x, dtype), _prep(trace, y, dtype))


@numpy_fallback(np.fabs)
def fabs(x: ArrayLike) -> Any:
    """|x| for real x, as a float."""
    _real_only("fabs", x)
    return abs(_float(x))


@numpy_fallback(_bf16_scalars(np.copysign), "x", "y")
def copysign(x: ArrayLike, y: ArrayLike) -> Any:
    """|x| with the sign of y (the sign bit: -0.0 counts as negative), in the two
    operands' common dtype."""
    a, b = _inexact_pair("copysign", x, y)
    ax = abs(a)
    return where(signbit(b), negative(ax), ax)


@numpy_fallback(np.signbit)
def signbit(x: ArrayLike) -> Any:
    """Whether the sign bit is set: x < 0, or x is -0.0 or a negative nan (read off the
    bits, as NumPy)."""
    _real_only("signbit", x)
    if _is_int(x):
        return less(x, 0)
    return less(_bits_of(_float(x)), 0)


def _bits_of(x: Tracer) -> Tracer:
    """The bits of float ``x`` as the signed integer of its width (no tangent)."""
    return x.trace.emit("bitcast_convert", [x], {"dtype": f"int{8 * np.dtype(x.aval.dtype).itemsize}"})


def _float_of(bits: Tracer, dtype: str) -> Tracer:
    return bits.trace.emit("bitcast_convert", [bits], {"dtype": dtype})


@numpy_fallback(_bf16_scalars(np.nextafter), "x1", "x2")
def nextafter(x1: ArrayLike, x2: ArrayLike) -> Any:
    """The float next to ``x1`` in the direction of ``x2`` (``x2`` where they are equal, nan
    where either is nan), bit for bit as NumPy, subnormals and signed zeros included: the
    bits of ``x1`` plus or minus 1, the smallest subnormal off 0. Every test reads the bits
    (``bitcast_convert``) as integers, since back ends that treat subnormal operands as 0
    (XLA on CPU) would compare floats wrongly. Integers and bools become float64. The
    derivative is jax.numpy's, 1 in ``x1`` and 0 in ``x2``, except where ``x1`` is inf or
    nan or the result is subnormal: 0 there (such back ends would flush the value that
    carries it)."""
    trace = _trace_of((x1, x2))
    assert trace is not None  # numpy_fallback computed the concrete case
    _real_only("nextafter", x1, x2)
    dtype = result_type(x1, x2)
    if not is_inexact(dtype):
        dtype = "float64"
    shape = broadcast_shapes(_shape(x1), _shape(x2), what="nextafter")
    a, b = _prep(trace, x1, dtype, shape), _prep(trace, x2, dtype, shape)
    ints = f"int{8 * np.dtype(dtype).itemsize}"
    info = ml_dtypes.finfo(dtype)

    def const(v: Any) -> Tracer:
        return _prep(trace, np.asarray(v).astype(ints), ints, shape)

    def bits_of(v: Any) -> Tracer:
        return _bits_of(v) if isinstance(v, Tracer) else const(np.asarray(v, dtype).view(ints))

    magnitude_mask = const(np.iinfo(ints).max)  # every bit but the sign

    def magnitude(bits: Tracer) -> Tracer:
        return trace.emit("bitwise_and", [bits, magnitude_mask])

    def key(bits: Tracer) -> Tracer:  # an integer in the order of the floats (-0.0 just below 0.0)
        return where(less(bits, 0), trace.emit("bitwise_xor", [bits, magnitude_mask]), bits)

    inf_bits = bits_of(np.inf)
    ba, bb = _bits_of(a), _bits_of(b)
    ma, mb = magnitude(ba), magnitude(bb)
    ka, kb = key(ba), key(bb)
    a_copy, b_copy = _float_of(ba, dtype), _float_of(bb, dtype)  # the values, without tangents
    a_zero = equal(ma, 0)
    away_from_zero = equal(greater(kb, ka), greater(ba, 0))
    one = const(1)
    out_bits = where(away_from_zero, add(ba, one), subtract(ba, one))
    from_zero = where(greater(kb, 0), one, const(np.iinfo(ints).min + 1))  # +-the smallest subnormal
    out = _float_of(where(a_zero, from_zero, out_bits), dtype)
    out = where(logical_or(equal(ka, kb), logical_and(a_zero, equal(mb, 0))), b_copy, out)
    any_nan = logical_or(greater(ma, inf_bits), greater(mb, inf_bits))
    out = where(any_nan, add(a_copy, b_copy), out)  # NumPy's x1 + x2: the nan
    # the tangent of x1 (JAX's), carried by out - (x1 - x1), which is out wherever that is exact
    carried = subtract(out, subtract(a_copy, a))
    m_out = magnitude(_bits_of(out))
    subnormal = logical_and(greater(m_out, 0), less(m_out, bits_of(info.smallest_normal)))
    return where(logical_and(less(ma, inf_bits), logical_not(subnormal)), carried, out)


@numpy_fallback(_bf16_scalars(np.heaviside), "x", "h0")
def heaviside(x: ArrayLike, h0: ArrayLike) -> Any:
    """0 for x < 0, h0 at 0, 1 for x > 0, nan at nan, in the two operands' common dtype."""
    a, h = _inexact_pair("heaviside", x, h0)
    return where(less(a, 0), 0.0, where(equal(a, 0), h, where(greater(a, 0), 1.0, a)))


def _tie_to_y(np_fn: Any) -> Any:
    """NumPy's ``fmax`` or ``fmin``, with y's value where x == y. The two differ only at a
    tie of 0.0 and -0.0, where NumPy's choice depends on the loop that runs (the arrays'
    length, stride and dtype decide, even within one array: float64 arrays of length 1
    give x, of length 64 y); traced tidu and JAX give y there."""

    def fn(x: Any, y: Any) -> Any:
        out = np_fn(x, y)
        with np.errstate(invalid="ignore"):
            tie = np.equal(x, y)
        if not np.any(tie):
            return out
        fixed = np.where(tie, np.asarray(y, dtype=np.asarray(out).dtype), out)
        return fixed[()] if fixed.ndim == 0 else fixed

    fn.__name__ = np_fn.__name__
    return fn


@numpy_fallback(_bf16_scalars(_tie_to_y(np.fmax)), "x", "y")
def fmax(x: ArrayLike, y: ArrayLike) -> Any:
    """Elementwise maximum that ignores nan (nan only where both are nan; complex values in
    NumPy's lexicographic order, nan in either part a nan). At a tie the value (so of 0.0
    and -0.0 the second operand, eagerly too: ``_tie_to_y``) and the derivative are y's, as
    JAX's."""
    return where(logical_or(isnan(y), greater(x, y)), x, y)


@numpy_fallback(_bf16_scalars(_tie_to_y(np.fmin)), "x", "y")
def fmin(x: ArrayLike, y: ArrayLike) -> Any:
    """Elementwise minimum that ignores nan (nan only where both are nan; complex values as
    ``fmax``). At a tie the value and the derivative are y's, as JAX's (``fmax``)."""
    return where(logical_or(isnan(y), less(x, y)), x, y)


def _np_ldexp(x: Any, i: Any) -> Any:
    """NumPy's ldexp; of bfloat16 values with int32 exponents (ml_dtypes' loop: with int64
    ones NumPy gives float32), clipped to int32's range (past +-300 every result is 0 or
    inf already)."""
    if np.asarray(x).dtype == _BF16 and np.asarray(i).dtype.kind in "iu":
        i = np.clip(i, -(2**31), 2**31 - 1).astype(np.int32)
    return np.ldexp(x, i)


@numpy_fallback(_np_ldexp, "x", "i")
def ldexp(x: ArrayLike, i: ArrayLike) -> Any:
    """x * 2**i, rounded once, as NumPy. The power of two is applied as up to three
    factors that are normal powers of two of the dtype (none is inf, 0 or subnormal: XLA
    on CPU reads a subnormal factor as 0), and every product but the last is exact
    wherever the result is not 0: so 0 * 2**1100 is 0, not 0 * inf, and results near the
    subnormals are rounded once. Derivative 2**i in x."""
    if _dtype(i) != "bool" and not is_integer(_dtype(i)):
        raise TypeError(f"tnp.ldexp: the exponent must be integers, got {_dtype(i)}")
    x = _float_like(x)
    dtype = _dtype(x)
    info = ml_dtypes.finfo(dtype)  # NumPy's finfo does not know bfloat16
    top, low, sub = info.maxexp - 1, -info.minexp, info.nmant - info.minexp  # 2**top, 2**-low, 2**-sub
    for e in _ldexp_exponents(i, top, low, sub):
        x = multiply(x, exp2(_convert(e, dtype)) if isinstance(e, Tracer) else np.ldexp(np.ones((), dtype), e))
    return x


def _ldexp_exponents(i: Any, top: int, low: int, sub: int) -> list[Any]:
    """Exponents e1, e2, e3 with e1 + e2 + e3 = i (clipped to +-(top + sub + 2), beyond
    which the result is 0 or inf for every x), each in [-low, top] (normal powers of two),
    applied in that order. Upward e1, e2 <= top. Downward the last factors are 2**-low, as
    many as needed (two at most), the rest first: a product before the last that is not
    exact is below 2**-low, so that the result, 2**-low times smaller, rounds to 0 anyway.
    Constant exponents that are all 0 are left out."""
    bound = top + sub + 2
    if isinstance(i, Tracer):
        ic = maximum(minimum(_convert(i, "int64"), bound), -bound)
        last = where(less(ic, -low), -low, 0)  # downward: the last factor, and the one before it
        before = where(less(ic, -2 * low), -low, 0)
        e1 = where(greater(ic, 0), minimum(ic, top), subtract(subtract(ic, last), before))
        e2 = where(greater(ic, top), minimum(subtract(ic, top), top), before)
        return [e1, e2, where(greater(ic, 0), subtract(subtract(ic, e1), e2), last)]
    ic = np.clip(np.asarray(i, dtype=np.int64), -bound, bound)
    last = np.where(ic < -low, -low, 0)
    before = np.where(ic < -2 * low, -low, 0)
    e1 = np.where(ic > 0, np.minimum(ic, top), ic - last - before)
    e2 = np.where(ic > top, np.minimum(ic - top, top), before)
    e3 = np.where(ic > 0, ic - e1 - e2, last)
    return [e.astype(np.int32) for e in (e1, e2, e3) if np.any(e != 0)]


# --- floating-point predicates ----------------------------------------------------------


@numpy_fallback(np.isnan)
def isnan(x: ArrayLike) -> Any:
    """Whether x is nan (for complex: either part)."""
    return not_equal(x, x)


@numpy_fallback(np.isfinite)
def isfinite(x: ArrayLike) -> Any:
    """Whether x is neither infinite nor nan (for complex: both parts)."""
    if _is_int(x):
        return equal(x, x)
    if is_complex(x.aval.dtype):
        return logical_and(isfinite(real(x)), isfinite(imag(x)))
    return equal(subtract(x, x), 0)  # inf - inf and nan - nan are nan


@numpy_fallback(np.isinf)
def isinf(x: ArrayLike) -> Any:
    """Whether x is +inf or -inf (for complex: either part)."""
    if _is_int(x):
        return not_equal(x, x)
    if is_complex(x.aval.dtype):
        return logical_or(isinf(real(x)), isinf(imag(x)))
    return equal(abs(x), np.inf)


@numpy_fallback(np.isposinf)
def isposinf(x: ArrayLike) -> Any:
    """Whether x is +inf."""
    return equal(x, np.inf)


@numpy_fallback(np.isneginf)
def isneginf(x: ArrayLike) -> Any:
    """Whether x is -inf."""
    return equal(x, -np.inf)


def _np_nan_to_num(x: Any, copy: bool = True, nan: float = 0.0, posinf: float | None = None,
                   neginf: float | None = None) -> Any:
    """NumPy's nan_to_num; of bfloat16 values (which NumPy does not take for floats: it
    returns them unchanged) tidu's own, traced, as a traced call computes it."""
    if np.asarray(x).dtype == _BF16:
        return run_traced(nan_to_num.__wrapped__, (x,),  # type: ignore[attr-defined]
                          {"nan": nan, "posinf": posinf, "neginf": neginf})
    return np.nan_to_num(x, copy=copy, nan=nan, posinf=posinf, neginf=neginf)


@numpy_fallback(_np_nan_to_num)
def nan_to_num(x: ArrayLike, copy: bool = True, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Any:
    """nan -> ``nan``, +inf -> ``posinf``, -inf -> ``neginf`` (default: the dtype's largest
    finite values); elsewhere x (and its derivative)."""
    if _is_int(x):
        return x
    if is_complex(x.aval.dtype):
        return _complex(nan_to_num(real(x), nan=nan, posinf=posinf, neginf=neginf),
                        nan_to_num(imag(x), nan=nan, posinf=posinf, neginf=neginf))
    big = float(ml_dtypes.finfo(x.aval.dtype).max)  # (NumPy's finfo does not know bfloat16)
    posinf = big if posinf is None else posinf
    neginf = -big if neginf is None else neginf
    return where(isnan(x), nan, where(equal(x, np.inf), posinf, where(equal(x, -np.inf), neginf, x)))


@numpy_fallback(np.isclose, "a", "b")
def isclose(a: ArrayLike, b: ArrayLike, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Any:
    """|a - b| <= atol + rtol |b| where b is finite, or a == b (NumPy's formula: infinities
    are close only to themselves, nan to nothing unless ``equal_nan``)."""
    a, b = _float_like(a), _float_like(b)
    within = less_equal(abs(subtract(a, b)), add(atol, multiply(rtol, abs(b))))
    close = logical_or(logical_and(within, isfinite(b)), equal(a, b))
    if equal_nan:
        close = logical_or(close, logical_and(isnan(a), isnan(b)))
    return close


# --- logic -----------------------------------------------------------------------------


def _as_bool(x: Any) -> Any:
    if isinstance(x, Tracer):
        return x if x.aval.dtype == "bool" else not_equal(x, 0)
    return np.asarray(x).astype(bool)


@numpy_fallback(np.logical_not)
def logical_not(x: ArrayLike) -> Any:
    """Elementwise not (nonzero is true)."""
    return equal(_as_bool(x), False)


@numpy_fallback(np.logical_and, "x", "y")
def logical_and(x: ArrayLike, y: ArrayLike) -> Any:
    """Elementwise and (nonzero is true)."""
    return where(_as_bool(x), _as_bool(y), False)


@numpy_fallback(np.logical_or, "x", "y")
def logical_or(x: ArrayLike, y: ArrayLike) -> Any:
    """Elementwise or (nonzero is true)."""
    return where(_as_bool(x), True, _as_bool(y))


@numpy_fallback(np.logical_xor, "x", "y")
def logical_xor(x: ArrayLike, y: ArrayLike) -> Any:
    """Elementwise exclusive or (nonzero is true)."""
    return not_equal(_as_bool(x), _as_bool(y))


