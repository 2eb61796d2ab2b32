"""``jax.lax``'s array operations with its signatures and meaning (re-exported by tidu.lax;
docs/lax.md): elementwise arithmetic, shapes, contractions, reductions, cumulative
operations, sorting and ``associative_scan``.

One concept: jax.lax is the strict layer under jax.numpy, and so is this module under
tidu.numpy. The operands of an n-ary operation have one dtype (a Python scalar is int64,
float64 or complex128, never promoted) and one rank (scalars and axes of size 1
broadcast); axes are given explicitly, mostly as non-negative numbers; integer ``div`` and
``rem`` truncate toward zero as in C; ``round`` rounds half away from zero. Each function
checks that, then computes with tidu.numpy functions, so it runs eagerly on NumPy values
and, on traced ones, is differentiated, batched, simplified and lowered like any other
program, with no primitive of its own. Bad input gets a one-line error naming the
function and the argument."""

from __future__ import annotations

import builtins
import enum
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import tidu.numpy as tnp
import tidu.scipy.special as tsp
from tidu.core.pytree import flatten, unflatten
from tidu.numpy import ArrayLike
from tidu.trace.tracing import Tracer
from tidu.transforms.custom import custom_jvp, stop_gradient

# --- checks ----------------------------------------------------------------------------------

_KIND_NAMES = {"b": "bool", "i": "signed integer", "u": "unsigned integer", "f": "float", "c": "complex"}
_NUMBER = "iufc"
_INEXACT = "fc"


def _aval(x: Any) -> tuple[tuple[int, ...], str]:
    """Shape and dtype name, of a tracer or of what NumPy makes of ``x`` (a Python int is
    int64, a float float64, as JAX's with 64-bit types)."""
    if isinstance(x, Tracer):
        return x.shape, x.aval.dtype
    a = np.asarray(x)
    return a.shape, a.dtype.name


def _shape(x: Any) -> tuple[int, ...]:
    return _aval(x)[0]


def _dtype(x: Any) -> str:
    return _aval(x)[1]


def _kind(dtype: str) -> str:
    """NumPy's kind letter of a dtype name, "f" for bfloat16 (ml_dtypes' is "V")."""
    return "f" if dtype == "bfloat16" else np.dtype(dtype).kind


def _kinds(fn: str, kinds: str, operands: dict[str, Any], jax_kinds: str = "") -> None:
    """A one-line TypeError naming the first operand whose dtype is not of ``kinds``;
    ``jax_kinds``: further kinds jax.lax takes and tidu does not."""
    for name, x in operands.items():
        dtype = _dtype(x)
        kind = _kind(dtype)
        if kind in kinds:
            continue
        allowed = " or ".join(_KIND_NAMES[k] for k in kinds)
        more = [_KIND_NAMES[k] for k in jax_kinds if k not in kinds]
        note = f" (jax.lax.{fn} also takes {' and '.join(more)}, tidu does not)" if more and kind in jax_kinds else ""
        raise TypeError(f"{fn}: {name} has dtype {dtype}; {fn} takes {allowed} values{note}")


def _one_dtype(fn: str, operands: dict[str, Any]) -> str:
    """The operands' one dtype; a TypeError when they have several (jax.lax does not promote)."""
    dtypes = {name: _dtype(x) for name, x in operands.items()}
    if len(set(dtypes.values())) > 1:
        listed = ", ".join(f"{name} {d}" for name, d in dtypes.items())
        raise TypeError(f"{fn}: the operands have dtypes {listed}; jax.lax does not promote, give them one dtype "
                        "(lax.convert_element_type; a Python float is float64, an int int64)")
    return next(iter(dtypes.values()))


def _broadcast(fn: str, operands: dict[str, Any]) -> tuple[int, ...]:
    """jax.lax's broadcasting: scalars go with anything; the other operands have one rank
    and, along each axis, one size or 1."""
    shapes = {name: _shape(x) for name, x in operands.items()}
    ranked = {name: s for name, s in shapes.items() if s}
    listed = ", ".join(f"{name} {s}" for name, s in shapes.items())
    if len({len(s) for s in ranked.values()}) > 1:
        raise TypeError(f"{fn}: the operands have shapes {listed}; jax.lax broadcasts scalars and axes of size 1, "
                        "not ranks (add axes with lax.expand_dims or lax.broadcast_in_dim)")
    out: list[int] = []
    for sizes in zip(*ranked.values(), strict=True):
        big = set(sizes) - {1}
        if len(big) > 1:
            raise TypeError(f"{fn}: the operands have shapes {listed}, which do not broadcast (an axis has one size "
                            "or 1 in every operand)")
        out.append(big.pop() if big else 1)
    return tuple(out)


def _elementwise(fn: str, kinds: str, impl: Callable[..., Any], jax_kinds: str = "", **operands: Any) -> Any:
    """``impl`` of the operands, after jax.lax's checks: dtype kinds, one dtype, broadcasting."""
    _kinds(fn, kinds, operands, jax_kinds)
    if len(operands) > 1:
        _one_dtype(fn, operands)
        _broadcast(fn, operands)
    return impl(*operands.values())


def _dtype_name(fn: str, arg: str, dtype: Any) -> str:
    try:
        return np.dtype(dtype).name
    except TypeError:
        raise TypeError(f"{fn}: {arg} must be a dtype, got {dtype!r}") from None


def _int(fn: str, arg: str, v: Any) -> int:
    if isinstance(v, Tracer | bool | np.bool_) or not isinstance(v, int | np.integer):
        raise TypeError(f"{fn}: {arg} must be a Python int, got {v!r}")
    return int(v)


def _ints(fn: str, arg: str, vs: Any) -> tuple[int, ...]:
    """A sequence of constant ints (a NumPy 1-D array too)."""
    if isinstance(vs, Tracer) or not isinstance(vs, Sequence | np.ndarray) or np.ndim(vs) != 1:
        raise TypeError(f"{fn}: {arg} must be a sequence of ints, got {vs!r}")
    return tuple(_int(fn, f"{arg}[{i}]", v) for i, v in enumerate(vs))


def _axis(fn: str, arg: str, axis: Any, ndim: int, negative: bool = False) -> int:
    """An axis in [0, ndim), or in [-ndim, ndim) with ``negative`` (as jax.lax, which takes
    negative axes in some functions only)."""
    a = _int(fn, arg, axis)
    low = -ndim if negative else 0
    if not low <= a < ndim:
        span = f"[{low}, {ndim})" if ndim else "none: the operand is a scalar"
        raise ValueError(f"{fn}: {arg} {a} is out of range for an operand with {ndim} axes (valid: {span})")
    return a % ndim


def _axes(fn: str, arg: str, axes: Any, ndim: int, negative: bool = False) -> tuple[int, ...]:
    out = tuple(_axis(fn, arg, a, ndim, negative) for a in _ints(fn, arg, axes))
    if len(set(out)) != len(out):
        raise ValueError(f"{fn}: {arg} {tuple(axes)} repeats an axis")
    return out


def _index(x: Any, idx: tuple[Any, ...]) -> Any:
    """``x[idx]`` of a tracer, or a new NumPy array."""
    return x[idx] if isinstance(x, Tracer) else np.asarray(x)[idx].copy()


def _along(x: Any, axis: int, start: int, stop: int) -> Any:
    idx: list[Any] = [builtins.slice(None)] * len(_shape(x))
    idx[axis] = builtins.slice(start, stop)
    return _index(x, tuple(idx))


# --- elementwise -------------------------------------------------------------------------------


class RoundingMethod(enum.IntEnum):
    """How ``round`` breaks ties (``jax.lax.RoundingMethod``)."""
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def abs(x: ArrayLike) -> Any:  # noqa: A001 (jax.lax's name)
    """``|x|``; complex ``x`` gives its modulus, a float. The derivative at 0 is 0
    (tidu.numpy's; JAX takes 1)."""
    return _elementwise("abs", "ifc", tnp.abs, x=x)


def acos(x: ArrayLike) -> Any:
    """Inverse cosine."""
    return _elementwise("acos", _INEXACT, tnp.arccos, x=x)


def acosh(x: ArrayLike) -> Any:
    """Inverse hyperbolic cosine."""
    return _elementwise("acosh", _INEXACT, tnp.arccosh, x=x)


def add(x: ArrayLike, y: ArrayLike) -> Any:
    """``x + y``."""
    return _elementwise("add", _NUMBER, tnp.add, x=x, y=y)


def asin(x: ArrayLike) -> Any:
    """Inverse sine."""
    return _elementwise("asin", _INEXACT, tnp.arcsin, x=x)


def asinh(x: ArrayLike) -> Any:
    """Inverse hyperbolic sine."""
    return _elementwise("asinh", _INEXACT, tnp.arcsinh, x=x)


def atan(x: ArrayLike) -> Any:
    """Inverse tangent."""
    return _elementwise("atan", _INEXACT, tnp.arctan, x=x)


def atan2(x: ArrayLike, y: ArrayLike) -> Any:
    """The angle of the point ``(y, x)``: ``atan(x / y)`` in the right quadrant (real values)."""
    return _elementwise("atan2", "f", tnp.arctan2, "c", x=x, y=y)


def atanh(x: ArrayLike) -> Any:
    """Inverse hyperbolic tangent."""
    return _elementwise("atanh", _INEXACT, tnp.arctanh, x=x)


def bitwise_and(x: ArrayLike, y: ArrayLike) -> Any:
    """``x & y`` bit by bit (logical on bools)."""
    return _elementwise("bitwise_and", "biu", tnp.bitwise_and, x=x, y=y)


def bitwise_not(x: ArrayLike) -> Any:
    """``~x`` bit by bit (logical on bools)."""
    return _elementwise("bitwise_not", "biu", tnp.bitwise_not, x=x)


def bitwise_or(x: ArrayLike, y: ArrayLike) -> Any:
    """``x | y`` bit by bit (logical on bools)."""
    return _elementwise("bitwise_or", "biu", tnp.bitwise_or, x=x, y=y)


def bitwise_xor(x: ArrayLike, y: ArrayLike) -> Any:
    """``x ^ y`` bit by bit (logical on bools)."""
    return _elementwise("bitwise_xor", "biu", tnp.bitwise_xor, x=x, y=y)


def cbrt(x: ArrayLike, *, accuracy: Any = None) -> Any:
    """Real cube root."""
    return _elementwise("cbrt", "f", tnp.cbrt, x=x)


def ceil(x: ArrayLike) -> Any:
    """Smallest integer not below ``x`` (a float)."""
    return _elementwise("ceil", "f", tnp.ceil, x=x)


def clamp(min: ArrayLike, x: ArrayLike, max: ArrayLike) -> Any:  # noqa: A002 (jax.lax's names)
    """``min(max(x, min), max)``: ``x`` clipped to ``[min, max]`` (``min`` and ``max`` of
    ``x``'s shape, or scalars; nan if any of the three is nan, as XLA's). As JAX's, the
    derivative is ``x``'s strictly inside the interval, ``min``'s below it, ``max``'s above
    it, and 0 at its ends and at a nan ``x``; where the interval is empty (``min > max``)
    the result is ``max`` whatever ``x`` is, and so is its derivative (JAX's is 0 there
    for ``x < max``)."""
    operands = {"min": min, "x": x, "max": max}
    _kinds("clamp", "biuf", operands, "c")
    _one_dtype("clamp", operands)
    shape = _shape(x)
    for name in ("min", "max"):
        if _shape(operands[name]) not in ((), shape):
            raise TypeError(f"clamp: {name} has shape {_shape(operands[name])}; it must be a scalar or have x's "
                            f"shape {shape}")
    low = tnp.where(tnp.less(x, min), min, x)  # (a nan bound compares false: its nan is put in below)
    out = tnp.where(tnp.greater(low, max), max, low)
    # each operand's derivative where the result is that operand (JAX's conditions; max's
    # below min too, where the interval is empty), none elsewhere: at the ends, at a nan x
    inside = tnp.logical_and(tnp.greater(x, min), tnp.less(x, max))
    below = tnp.logical_and(tnp.greater(min, x), tnp.less(min, max))
    out = tnp.where(inside, x, tnp.where(below, min, tnp.where(tnp.less(max, low), max, stop_gradient(out))))
    if _kind(_dtype(x)) == "f":
        nan_bound = tnp.logical_or(tnp.isnan(min), tnp.isnan(max))
        out = tnp.where(nan_bound, tnp.add(out, np.asarray(np.nan, _dtype(x))), out)
    return out


def complex(x: ArrayLike, y: ArrayLike) -> Any:  # noqa: A001 (jax.lax's name)
    """``x + i y`` from real and imaginary parts of one float dtype (inf parts stay inf)."""
    return _elementwise("complex", "f", tnp.op("complex"), x=x, y=y)


def _as_complex(x: Any) -> Any:
    dtype = _dtype(x)
    if _kind(dtype) == "c":
        return x
    return tnp.astype(x, "complex64" if np.dtype(dtype).itemsize <= 4 else "complex128")


def conj(x: ArrayLike) -> Any:
    """Complex conjugate; a real ``x`` gives a complex result (as JAX)."""
    return _elementwise("conj", _INEXACT, lambda v: tnp.conj(_as_complex(v)), x=x)


def cos(x: ArrayLike, *, accuracy: Any = None) -> Any:
    """Cosine."""
    return _elementwise("cos", _INEXACT, tnp.cos, x=x)


def cosh(x: ArrayLike) -> Any:
    """Hyperbolic cosine."""
    return _elementwise("cosh", _INEXACT, tnp.cosh, x=x)


def digamma(x: ArrayLike) -> Any:
    """The digamma function, the derivative of ``lgamma``."""
    return _elementwise("digamma", "f", tsp.digamma, x=x)


def _int_div(x: Any, y: Any) -> tuple[Any, Any]:
    """C's integer quotient and remainder (toward zero; the remainder has x's sign), and
    XLA's values at y = 0: quotient -1 (all bits set), remainder x."""
    zero = tnp.equal(y, 0)
    with np.errstate(all="ignore"):
        safe = tnp.where(zero, np.ones((), _dtype(y)), y)
        r = tnp.fmod(x, safe)
        q = tnp.floor_divide(tnp.subtract(x, r), safe)
    ones = np.array(-1).astype(_dtype(x))
    return tnp.where(zero, ones, q), tnp.where(zero, x, r)


def div(x: ArrayLike, y: ArrayLike) -> Any:
    """``x / y``; integers are divided as in C, toward zero (``-7 / 2`` is -3, not NumPy's
    -4), and ``x / 0`` is -1 (all bits set), as XLA's."""
    def impl(a: Any, b: Any) -> Any:
        if _kind(_dtype(a)) in "iu":
            return _int_div(a, b)[0]
        with np.errstate(all="ignore"):
            return tnp.divide(a, b)
    return _elementwise("div", _NUMBER, impl, x=x, y=y)


def eq(x: ArrayLike, y: ArrayLike) -> Any:
    """``x == y``."""
    return _elementwise("eq", "biufc", tnp.equal, x=x, y=y)


def erf(x: ArrayLike) -> Any:
    """The error function."""
    return _elementwise("erf", "f", tsp.erf, x=x)


def erf_inv(x: ArrayLike) -> Any:
    """The inverse error function (inf at 1)."""
    return _elementwise("erf_inv", "f", tsp.erfinv, x=x)


def erfc(x: ArrayLike, *, accuracy: Any = None) -> Any:
    """The complementary error function, ``1 - erf(x)``."""
    return _elementwise("erfc", "f", tsp.erfc, x=x)


def exp(x: ArrayLike, *, accuracy: Any = None) -> Any:
    """``e ** x``."""
    return _elementwise("exp", _INEXACT, tnp.exp, x=x)


def exp2(x: ArrayLike, *, accuracy: Any = None) -> Any:
    """``2 ** x``."""
    return _elementwise("exp2", _INEXACT, tnp.exp2, x=x)


def expm1(x: ArrayLike, *, accuracy: Any = None) -> Any:
    """``e ** x - 1``, accurate near 0."""
    return _elementwise("expm1", _INEXACT, tnp.expm1, x=x)


def floor(x: ArrayLike) -> Any:
    """Largest integer not above ``x`` (a float)."""
    return _elementwise("floor", "f", tnp.floor, x=x)


def ge(x: ArrayLike, y: ArrayLike) -> Any:
    """``x >= y``."""
    return _elementwise("ge", "biuf", tnp.greater_equal, x=x, y=y)


def gt(x: ArrayLike, y: ArrayLike) -> Any:
    """``x > y``."""
    return _elementwise("gt", "biuf", tnp.greater, x=x, y=y)


def imag(x: ArrayLike) -> Any:
    """Imaginary part of a complex ``x``."""
    return _elementwise("imag", "c", tnp.imag, x=x)


def integer_pow(x: ArrayLike, y: int) -> Any:
    """``x ** y`` for a constant Python int ``y``, by repeated squaring (so the derivative
    is exact everywhere, ``y * x ** (y - 1)``, 0 at ``y = 0``); a negative ``y`` gives the
    reciprocal, for inexact ``x`` only."""
    n = _int("integer_pow", "y", y)
    _kinds("integer_pow", _NUMBER, {"x": x})
    if n < 0 and _kind(_dtype(x)) in "iu":
        raise TypeError(f"integer_pow: an integer x ({_dtype(x)}) cannot be raised to a negative power ({n})")
    if n == 0:
        return tnp.ones_like(x)
    acc, base, k = None, x, builtins.abs(n)
    while k:
        if k & 1:
            acc = base if acc is None else tnp.multiply(acc, base)
        k >>= 1
        if k:
            base = tnp.multiply(base, base)
    if n < 0:
        with np.errstate(all="ignore"):
            return tnp.reciprocal(acc)
    return acc


def is_finite(x: ArrayLike) -> Any:
    """Whether ``x`` is neither infinite nor nan."""
    return _elementwise("is_finite", "f", tnp.isfinite, x=x)


def le(x: ArrayLike, y: ArrayLike) -> Any:
    """``x <= y``."""
    return _elementwise("le", "biuf", tnp.less_equal, x=x, y=y)


def lgamma(x: ArrayLike) -> Any:
    """``log |Gamma(x)|``."""
    return _elementwise("lgamma", "f", tsp.gammaln, x=x)


def log(x: ArrayLike, *, accuracy: Any = None) -> Any:
    """Natural logarithm."""
    return _elementwise("log", _INEXACT, tnp.log, x=x)


def log1p(x: ArrayLike, *, accuracy: Any = None) -> Any:
    """``log(1 + x)``, accurate near 0."""
    return _elementwise("log1p", _INEXACT, tnp.log1p, x=x)


def log2(x: ArrayLike, *, accuracy: Any = None) -> Any:
    """Base-2 logarithm."""
    return _elementwise("log2", _INEXACT, tnp.log2, x=x)


def _logistic(v: Any) -> Any:
    if _kind(_dtype(v)) == "c":
        return tnp.reciprocal(tnp.add(1, tnp.exp(tnp.negative(v))))
    return tsp.expit(v)


def logistic(x: ArrayLike, *, accuracy: Any = None) -> Any:
    """``1 / (1 + e ** -x)``."""
    return _elementwise("logistic", _INEXACT, _logistic, x=x)


def lt(x: ArrayLike, y: ArrayLike) -> Any:
    """``x < y``."""
    return _elementwise("lt", "biuf", tnp.less, x=x, y=y)


def _bool_or(numeric: Callable[..., Any], logical: Callable[..., Any]) -> Callable[..., Any]:
    def impl(a: Any, b: Any) -> Any:
        return logical(a, b) if _dtype(a) == "bool" else numeric(a, b)
    return impl


def max(x: ArrayLike, y: ArrayLike) -> Any:  # noqa: A001 (jax.lax's name)
    """Elementwise maximum (nan if either is nan; on bools, or); at ties the derivative is
    shared, half to each."""
    return _elementwise("max", "biuf", _bool_or(tnp.maximum, tnp.logical_or), "c", x=x, y=y)


def min(x: ArrayLike, y: ArrayLike) -> Any:  # noqa: A001 (jax.lax's name)
    """Elementwise minimum (nan if either is nan; on bools, and); at ties the derivative is
    shared, half to each."""
    return _elementwise("min", "biuf", _bool_or(tnp.minimum, tnp.logical_and), "c", x=x, y=y)


def mul(x: ArrayLike, y: ArrayLike, *, out_dtype: Any = None) -> Any:
    """``x * y``; with ``out_dtype``, of both converted to it first (as JAX's)."""
    if out_dtype is not None:
        _elementwise("mul", _NUMBER, lambda a, b: None, x=x, y=y)
        dtype = _dtype_name("mul", "out_dtype", out_dtype)
        x, y = convert_element_type(x, dtype), convert_element_type(y, dtype)
    return _elementwise("mul", _NUMBER, tnp.multiply, x=x, y=y)


def ne(x: ArrayLike, y: ArrayLike) -> Any:
    """``x != y``."""
    return _elementwise("ne", "biufc", tnp.not_equal, x=x, y=y)


def neg(x: ArrayLike) -> Any:
    """``-x`` (unsigned integers wrap around)."""
    return _elementwise("neg", _NUMBER, tnp.negative, x=x)


def _float_bits(dtype: str) -> str:
    return f"int{8 * np.dtype(dtype).itemsize}"


def _nextafter_value(x1: Any, x2: Any) -> Any:
    """NumPy's value, bit for bit (tnp.nextafter: tests on the bits, right also where a back
    end reads subnormal operands as 0); the derivative is ``_nextafter``'s."""
    return tnp.nextafter(x1, x2)


@custom_jvp
def _nextafter(x1: Any, x2: Any) -> Any:
    return _nextafter_value(x1, x2)


@_nextafter.defjvp
def _nextafter_jvp(primals: tuple[Any, Any], tangents: tuple[Any, Any]) -> tuple[Any, Any]:
    return _nextafter(*primals), tangents[0]  # JAX's: the derivative of x1, 1


def nextafter(x1: ArrayLike, x2: ArrayLike) -> Any:
    """The float next to ``x1`` in the direction of ``x2`` (``x2`` when they are equal);
    its derivative is 1 in ``x1`` and 0 in ``x2``, as JAX's."""
    def impl(a: Any, b: Any) -> Any:
        if not isinstance(a, Tracer) and not isinstance(b, Tracer):
            return _nextafter_value(a, b)
        return _nextafter(a, b)
    return _elementwise("nextafter", "f", impl, x1=x1, x2=x2)


def pow(x: ArrayLike, y: ArrayLike) -> Any:  # noqa: A001 (jax.lax's name)
    """``x ** y`` for inexact ``x`` and an integer ``y`` or one of ``x``'s dtype."""
    operands = {"x": x, "y": y}
    _kinds("pow", _INEXACT, {"x": x})
    _kinds("pow", _NUMBER, {"y": y})
    if _kind(_dtype(y)) in _INEXACT:
        _one_dtype("pow", operands)
    _broadcast("pow", operands)
    return tnp.power(x, y)


def real(x: ArrayLike) -> Any:
    """Real part of a complex ``x``."""
    return _elementwise("real", "c", tnp.real, x=x)


def reciprocal(x: ArrayLike) -> Any:
    """``1 / x``."""
    def impl(v: Any) -> Any:
        with np.errstate(all="ignore"):
            return tnp.reciprocal(v)
    return _elementwise("reciprocal", _INEXACT, impl, x=x)


def rem(x: ArrayLike, y: ArrayLike) -> Any:
    """C's remainder ``x - div(x, y) * y``, with the sign of ``x`` (NumPy's ``%`` takes
    ``y``'s); for integers ``rem(x, 0)`` is ``x``, as XLA's."""
    def impl(a: Any, b: Any) -> Any:
        if _kind(_dtype(a)) in "iu":
            return _int_div(a, b)[1]
        with np.errstate(all="ignore"):
            return tnp.fmod(a, b)
    return _elementwise("rem", "iuf", impl, x=x, y=y)


def _round_away(v: Any) -> Any:
    t = tnp.trunc(v)
    half = tnp.greater_equal(tnp.abs(tnp.subtract(v, t)), 0.5)  # v - trunc(v) is exact
    return tnp.where(half, tnp.add(t, tnp.sign(v)), t)


def round(x: ArrayLike, rounding_method: RoundingMethod | int = RoundingMethod.AWAY_FROM_ZERO) -> Any:  # noqa: A001
    """The nearest integer (a float); ties away from zero by default (2.5 gives 3, unlike
    NumPy), to even with ``RoundingMethod.TO_NEAREST_EVEN`` (or JAX's enum, or 1)."""
    try:
        method = RoundingMethod(int(rounding_method))
    except (TypeError, ValueError):
        raise ValueError(f"round: rounding_method must be a RoundingMethod (0: AWAY_FROM_ZERO, 1: TO_NEAREST_EVEN), "
                         f"got {rounding_method!r}") from None
    impl = tnp.rint if method is RoundingMethod.TO_NEAREST_EVEN else _round_away
    return _elementwise("round", "f", impl, x=x)


def rsqrt(x: ArrayLike, *, accuracy: Any = None) -> Any:
    """``1 / sqrt(x)``."""
    return _elementwise("rsqrt", _INEXACT, tnp.rsqrt, x=x)


def select(pred: ArrayLike, on_true: ArrayLike, on_false: ArrayLike) -> Any:
    """``on_true`` where ``pred`` holds, else ``on_false`` (``select_n(pred, on_false,
    on_true)``): the cases have one shape and dtype, ``pred`` is a bool scalar or has their
    shape."""
    return _select_n("select", pred, (on_false, on_true), ("on_false", "on_true"))


def select_n(which: ArrayLike, *cases: ArrayLike) -> Any:
    """``cases[which]`` elementwise: ``which`` is bool (two cases at most) or integer, a
    scalar or of the cases' shape; the cases have one shape and dtype. An integer out of
    range picks the first case (below) or the last (above)."""
    return _select_n("select_n", which, cases, tuple(f"cases[{i}]" for i in range(len(cases))))


def _select_n(fn: str, which: Any, cases: Sequence[Any], names: Sequence[str]) -> Any:
    if not cases:
        raise ValueError(f"{fn}: give at least one case")
    named = dict(zip(names, cases, strict=True))
    arg = "pred" if fn == "select" else "which"
    _kinds(fn, "biu", {arg: which})
    _one_dtype(fn, named)
    shapes = {_shape(c) for c in cases}
    if len(shapes) > 1:
        raise TypeError(f"{fn}: the cases have shapes {', '.join(str(_shape(c)) for c in cases)}; they must have "
                        "one shape (broadcast them with lax.broadcast_in_dim)")
    shape = shapes.pop()
    if _shape(which) not in ((), shape):
        raise TypeError(f"{fn}: {arg} has shape {_shape(which)}; it must be a scalar or have the cases' shape {shape}")
    if _dtype(which) == "bool":
        if len(cases) > 2:
            raise TypeError(f"{fn}: a bool {arg} selects between two cases, got {len(cases)}")
        return cases[0] if len(cases) == 1 else tnp.where(which, cases[1], cases[0])

    def pick(lo: int, hi: int) -> Any:  # cases[lo:hi] by a binary search on which
        if hi - lo == 1:
            return cases[lo]
        mid = (lo + hi) // 2
        return tnp.where(tnp.less(which, mid), pick(lo, mid), pick(mid, hi))

    return pick(0, len(cases))


def shift_left(x: ArrayLike, y: ArrayLike) -> Any:
    """``x << y``; a shift by the bit width or more, or a negative one, gives 0."""
    return _elementwise("shift_left", "iu", tnp.op("shift_left"), x=x, y=y)


def shift_right_arithmetic(x: ArrayLike, y: ArrayLike) -> Any:
    """``x >> y`` copying the sign bit in; a shift by the width or more, or a negative
    one, gives 0 or -1."""
    return _elementwise("shift_right_arithmetic", "iu", tnp.op("shift_right_arithmetic"), x=x, y=y)


def shift_right_logical(x: ArrayLike, y: ArrayLike) -> Any:
    """``x >> y`` shifting zeros in, for signed integers too; a shift by the width or more,
    or a negative one, gives 0."""
    return _elementwise("shift_right_logical", "iu", tnp.op("shift_right_logical"), x=x, y=y)


def _as_unsigned(v: Any) -> Any:
    """An integer's bits as the unsigned integer of its width (itself if unsigned)."""
    dtype = _dtype(v)
    return v if dtype.startswith("u") else tnp.op("bitcast_convert")(v, dtype=f"u{dtype}")


def _from_unsigned(u: Any, dtype: str) -> Any:
    return u if dtype.startswith("u") else tnp.op("bitcast_convert")(u, dtype=dtype)


def _ones_per_bit(u: Any) -> Any:
    """The number of 1 bits of unsigned ``u``, in its dtype: the bit counts of pairs, nibbles,
    bytes, then the bytes' counts added by shifts (SWAR; integer ops only, so every back end
    runs it)."""
    dtype = _dtype(u)
    width = 8 * np.dtype(dtype).itemsize

    def pattern(byte: int) -> Any:
        return np.array(int.from_bytes(bytes([byte]) * (width // 8), "little"), dtype)

    u = tnp.subtract(u, tnp.bitwise_and(tnp.right_shift(u, np.array(1, dtype)), pattern(0x55)))
    u = tnp.add(tnp.bitwise_and(u, pattern(0x33)),
                tnp.bitwise_and(tnp.right_shift(u, np.array(2, dtype)), pattern(0x33)))
    u = tnp.bitwise_and(tnp.add(u, tnp.right_shift(u, np.array(4, dtype))), pattern(0x0F))
    shift = 8
    while shift < width:  # each byte holds its count (<= 8): add them into the lowest byte
        u = tnp.add(u, tnp.right_shift(u, np.array(shift, dtype)))
        shift *= 2
    return tnp.bitwise_and(u, np.array(0x7F, dtype))


def _population_count(v: Any) -> Any:
    return _from_unsigned(_ones_per_bit(_as_unsigned(v)), _dtype(v))


def population_count(x: ArrayLike) -> Any:
    """The number of 1 bits of each integer (of its two's complement for negative ones:
    -1 has them all), in ``x``'s dtype; shifts, ands and adds, no primitive of its own."""
    return _elementwise("population_count", "iu", _population_count, x=x)


def _clz(v: Any) -> Any:
    dtype = _dtype(v)
    u = _as_unsigned(v)
    udtype = _dtype(u)
    width = 8 * np.dtype(udtype).itemsize
    shift = 1
    while shift < width:  # every bit below the highest 1 set: the count of 1s tells its place
        u = tnp.bitwise_or(u, tnp.right_shift(u, np.array(shift, udtype)))
        shift *= 2
    return _from_unsigned(tnp.subtract(np.array(width, udtype), _ones_per_bit(u)), dtype)


def clz(x: ArrayLike) -> Any:
    """The number of leading 0 bits of each integer (its width for 0, 0 for negative ones), in
    ``x``'s dtype; shifts, ors and adds, no primitive of its own."""
    return _elementwise("clz", "iu", _clz, x=x)


def _sign(v: Any) -> Any:
    s = tnp.sign(v)
    if _kind(_dtype(v)) == "f":  # -0.0 keeps its sign, as JAX's
        return tnp.where(tnp.equal(v, 0), stop_gradient(v), s)
    return s


def sign(x: ArrayLike) -> Any:
    """-1, 0 or 1 (nan for nan, -0.0 for -0.0; ``x / |x|`` for complex ``x``)."""
    return _elementwise("sign", _NUMBER, _sign, x=x)


def sin(x: ArrayLike, *, accuracy: Any = None) -> Any:
    """Sine."""
    return _elementwise("sin", _INEXACT, tnp.sin, x=x)


def sinh(x: ArrayLike) -> Any:
    """Hyperbolic sine."""
    return _elementwise("sinh", _INEXACT, tnp.sinh, x=x)


def sqrt(x: ArrayLike, *, accuracy: Any = None) -> Any:
    """Square root."""
    return _elementwise("sqrt", _INEXACT, tnp.sqrt, x=x)


def square(x: ArrayLike) -> Any:
    """``x * x``."""
    return _elementwise("square", _NUMBER, tnp.square, x=x)


def sub(x: ArrayLike, y: ArrayLike) -> Any:
    """``x - y``."""
    return _elementwise("sub", _NUMBER, tnp.subtract, x=x, y=y)


def tan(x: ArrayLike, *, accuracy: Any = None) -> Any:
    """Tangent."""
    return _elementwise("tan", _INEXACT, tnp.tan, x=x)


def tanh(x: ArrayLike, *, accuracy: Any = None) -> Any:
    """Hyperbolic tangent."""
    return _elementwise("tanh", _INEXACT, tnp.tanh, x=x)


# --- shapes ----------------------------------------------------------------------------------


def _shape_arg(fn: str, arg: str, shape: Any) -> tuple[int, ...]:
    dims = _ints(fn, arg, (shape,) if isinstance(shape, int | np.integer) else shape)
    if any(d < 0 for d in dims):
        raise ValueError(f"{fn}: {arg} {dims} has a negative size")
    return dims


def broadcast(operand: ArrayLike, sizes: Sequence[int]) -> Any:
    """``operand`` repeated along new leading axes of ``sizes``: shape ``(*sizes,
    *operand.shape)``."""
    dims = _shape_arg("broadcast", "sizes", sizes)
    return tnp.broadcast_to(operand, dims + _shape(operand))


def broadcast_in_dim(operand: ArrayLike, shape: Sequence[int], broadcast_dimensions: Sequence[int]) -> Any:
    """``operand`` broadcast to ``shape``, its axis ``i`` becoming axis
    ``broadcast_dimensions[i]`` of the result (its size there, or 1)."""
    fn = "broadcast_in_dim"
    out = _shape_arg(fn, "shape", shape)
    src = _shape(operand)
    dims = _axes(fn, "broadcast_dimensions", broadcast_dimensions, len(out))
    if len(dims) != len(src):
        raise TypeError(f"{fn}: broadcast_dimensions has {len(dims)} entries, the operand has {len(src)} axes (shape "
                        f"{src})")
    for i, (d, n) in enumerate(zip(dims, src, strict=True)):
        if n not in (1, out[d]):
            raise TypeError(f"{fn}: operand axis {i} has size {n}, result axis {d} size {out[d]}; the operand's size "
                            "must be 1 or the result's")
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    x = operand if order == list(range(len(dims))) else tnp.transpose(operand, order)
    placed = [1] * len(out)
    for i in order:
        placed[dims[i]] = src[i]
    return tnp.broadcast_to(tnp.reshape(x, tuple(placed)), out)


def broadcast_to_rank(x: ArrayLike, rank: int) -> Any:
    """``x`` with leading axes of size 1 up to ``rank`` axes (unchanged if it has as many)."""
    r = _int("broadcast_to_rank", "rank", rank)
    shape = _shape(x)
    if r <= len(shape):
        return x
    return tnp.reshape(x, (1,) * (r - len(shape)) + shape)


def collapse(operand: ArrayLike, start_dimension: int, stop_dimension: int | None = None) -> Any:
    """``operand`` with axes ``start_dimension`` to ``stop_dimension`` (exclusive; the end
    by default; negative ones count from it) merged into one."""
    fn = "collapse"
    shape = _shape(operand)
    n = len(shape)
    start = _int(fn, "start_dimension", start_dimension)
    stop = n if stop_dimension is None else _int(fn, "stop_dimension", stop_dimension)
    start, stop = (start + n if start < 0 else start), (stop + n if stop < 0 else stop)
    if not 0 <= start <= stop <= n:
        raise ValueError(f"{fn}: axes [{start_dimension}:{stop_dimension}] are no range of the operand's {n} axes "
                         f"(shape {shape})")
    return tnp.reshape(operand, shape[:start] + (math.prod(shape[start:stop]),) + shape[stop:])


def concatenate(operands: Sequence[ArrayLike], dimension: int) -> Any:
    """The operands joined along axis ``dimension``: one dtype and rank, the same sizes
    along the other axes."""
    fn = "concatenate"
    if isinstance(operands, Tracer | np.ndarray) or not isinstance(operands, Sequence) or not operands:
        raise TypeError(f"{fn}: operands must be a non-empty sequence of arrays, got {type(operands).__name__}")
    named = {f"operands[{i}]": x for i, x in enumerate(operands)}
    _one_dtype(fn, named)
    shapes = [_shape(x) for x in operands]
    axis = _axis(fn, "dimension", dimension, len(shapes[0]))
    for s in shapes:
        if len(s) != len(shapes[0]) or s[:axis] + s[axis + 1:] != shapes[0][:axis] + shapes[0][axis + 1:]:
            raise TypeError(f"{fn}: operands of shapes {', '.join(map(str, shapes))} cannot be joined along axis "
                            f"{axis}: they need one rank and the same sizes along the other axes")
    return tnp.concatenate(list(operands), axis=axis)


def convert_element_type(operand: ArrayLike, new_dtype: Any) -> Any:
    """``operand`` as ``new_dtype``: floats to integers toward zero, complex to real by the
    real part, integers wrap around; differentiable between inexact dtypes."""
    dtype = _dtype_name("convert_element_type", "new_dtype", new_dtype)
    if _dtype(operand) == dtype:
        return operand
    with np.errstate(all="ignore"):
        return tnp.astype(operand, dtype)


def expand_dims(array: ArrayLike, dimensions: Sequence[int]) -> Any:
    """``array`` with axes of size 1 inserted at ``dimensions``, positions in the result
    (negative ones count from its end)."""
    shape = _shape(array)
    rank = len(shape) + len(_ints("expand_dims", "dimensions", dimensions))
    new = set(_axes("expand_dims", "dimensions", dimensions, rank, negative=True))
    sizes = iter(shape)
    return tnp.reshape(array, tuple(1 if i in new else next(sizes) for i in range(rank)))


def full(shape: Sequence[int], fill_value: ArrayLike, dtype: Any = None) -> Any:
    """An array of ``shape`` filled with the scalar ``fill_value`` (in ``dtype``, by
    default its own)."""
    dims = _shape_arg("full", "shape", shape)
    if _shape(fill_value) != ():
        raise TypeError(f"full: fill_value must be a scalar, got shape {_shape(fill_value)}")
    name = _dtype(fill_value) if dtype is None else _dtype_name("full", "dtype", dtype)
    return tnp.broadcast_to(convert_element_type(fill_value, name), dims)


def full_like(x: ArrayLike, fill_value: ArrayLike, dtype: Any = None, shape: Sequence[int] | None = None) -> Any:
    """An array of ``x``'s shape and dtype (or ``shape``, ``dtype``) filled with
    ``fill_value``."""
    name = _dtype(x) if dtype is None else _dtype_name("full_like", "dtype", dtype)
    return full(_shape(x) if shape is None else shape, fill_value, name)


def iota(dtype: Any, size: int) -> Any:
    """``0, 1, ..., size - 1`` in ``dtype``."""
    n = _int("iota", "size", size)
    if n < 0:
        raise ValueError(f"iota: size must be >= 0, got {n}")
    return np.arange(n, dtype=_dtype_name("iota", "dtype", dtype))


def broadcasted_iota(dtype: Any, shape: Sequence[int], dimension: int) -> Any:
    """An array of ``shape`` whose entries count along axis ``dimension``."""
    dims = _shape_arg("broadcasted_iota", "shape", shape)
    axis = _axis("broadcasted_iota", "dimension", dimension, len(dims))
    line = np.arange(dims[axis], dtype=_dtype_name("broadcasted_iota", "dtype", dtype))
    return np.broadcast_to(line.reshape([-1 if i == axis else 1 for i in range(len(dims))]), dims).copy()


def pad(operand: ArrayLike, padding_value: ArrayLike, padding_config: Sequence[tuple[int, int, int]]) -> Any:
    """``operand`` with ``padding_value`` (a scalar of its dtype) added per axis by
    ``(low, high, interior)``: ``low`` before, ``high`` after, ``interior`` between
    neighbours; a negative ``low`` or ``high`` crops that many entries instead.
    Differentiable in both the operand and the padding value."""
    fn = "pad"
    shape = _shape(operand)
    if isinstance(padding_config, Tracer) or not isinstance(padding_config, Sequence | np.ndarray):
        raise TypeError(f"{fn}: padding_config must be a sequence of (low, high, interior), one per axis")
    config = [_ints(fn, f"padding_config[{i}]", c) for i, c in enumerate(padding_config)]
    if len(config) != len(shape):
        raise ValueError(f"{fn}: padding_config has {len(config)} entries, the operand has {len(shape)} axes "
                         f"(shape {shape})")
    if _shape(padding_value) != ():
        raise TypeError(f"{fn}: padding_value must be a scalar, got shape {_shape(padding_value)}")
    _one_dtype(fn, {"operand": operand, "padding_value": padding_value})
    for i, (c, n) in enumerate(zip(config, shape, strict=True)):
        if len(c) != 3:
            raise ValueError(f"{fn}: padding_config[{i}] is {c}; give (low, high, interior)")
        low, high, interior = c
        if interior < 0:
            raise ValueError(f"{fn}: padding_config[{i}] has interior {interior}; it must be >= 0")
        if low + high + n + builtins.max(n - 1, 0) * interior < 0:
            raise ValueError(f"{fn}: padding_config[{i}] {c} crops axis {i} (size {n}) below size 0")
    grow = [tuple(builtins.max(v, 0) for v in c) for c in config]
    out = operand
    if any(g != (0, 0, 0) for g in grow):
        out = tnp.op("pad")(operand, padding_value, low=tuple(g[0] for g in grow), high=tuple(g[1] for g in grow),
                            interior=tuple(g[2] for g in grow))
    if any(c[0] < 0 or c[1] < 0 for c in config):
        sizes = _shape(out)
        out = _index(out, tuple(builtins.slice(builtins.max(-c[0], 0), n - builtins.max(-c[1], 0))
                                for c, n in zip(config, sizes, strict=True)))
    return out


def reshape(operand: ArrayLike, new_sizes: Sequence[int], dimensions: Sequence[int] | None = None) -> Any:
    """``operand``'s entries in row-major order (after transposing by ``dimensions``, if
    given) as an array of shape ``new_sizes`` (no -1: every size is given)."""
    fn = "reshape"
    shape = _shape(operand)
    sizes = _shape_arg(fn, "new_sizes", new_sizes)
    if math.prod(sizes) != math.prod(shape):
        raise TypeError(f"{fn}: new_sizes {sizes} has {math.prod(sizes)} entries, the operand (shape {shape}) "
                        f"{math.prod(shape)}")
    x = operand if dimensions is None else transpose(operand, dimensions)
    return x if sizes == shape and dimensions is None else tnp.reshape(x, sizes)


def rev(operand: ArrayLike, dimensions: Sequence[int]) -> Any:
    """``operand`` reversed along the axes ``dimensions``."""
    axes = _axes("rev", "dimensions", dimensions, len(_shape(operand)))
    return tnp.flip(operand, axes) if axes else operand


def slice(operand: ArrayLike, start_indices: Sequence[int], limit_indices: Sequence[int],  # noqa: A001
          strides: Sequence[int] | None = None) -> Any:
    """``operand[start:limit:stride, ...]`` with constant bounds within the operand
    (``0 <= start <= limit <= size``) and strides >= 1 (``dynamic_slice`` takes traced
    starts)."""
    fn = "slice"
    shape = _shape(operand)
    starts = _ints(fn, "start_indices", start_indices)
    limits = _ints(fn, "limit_indices", limit_indices)
    steps = (1,) * len(shape) if strides is None else _ints(fn, "strides", strides)
    for arg, v in (("start_indices", starts), ("limit_indices", limits), ("strides", steps)):
        if len(v) != len(shape):
            raise TypeError(f"{fn}: {arg} has {len(v)} entries, the operand has {len(shape)} axes (shape {shape})")
    for i, (s, e, k, n) in enumerate(zip(starts, limits, steps, shape, strict=True)):
        if not 0 <= s <= e <= n:
            raise TypeError(f"{fn}: axis {i} (size {n}) cannot be sliced from {s} to {e}; it needs 0 <= start <= "
                            "limit <= size")
        if k < 1:
            raise TypeError(f"{fn}: strides[{i}] is {k}; strides must be >= 1")
    return _index(operand, tuple(builtins.slice(s, e, k) for s, e, k in zip(starts, limits, steps, strict=True)))


def slice_in_dim(operand: ArrayLike, start_index: int | None, limit_index: int | None, stride: int = 1,
                 axis: int = 0) -> Any:
    """``slice`` along one axis; ``None`` means the start (end), and negative indices count
    from the end."""
    shape = _shape(operand)
    ax = _axis("slice_in_dim", "axis", axis, len(shape), negative=True)
    n = shape[ax]
    bounds = []
    for arg, v, default in (("start_index", start_index, 0), ("limit_index", limit_index, n)):
        v = default if v is None else _int("slice_in_dim", arg, v)
        bounds.append(v + n if v < 0 else v)
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[ax], limits[ax], strides[ax] = bounds[0], bounds[1], stride
    return slice(operand, starts, limits, strides)


def index_in_dim(operand: ArrayLike, index: int, axis: int = 0, keepdims: bool = True) -> Any:
    """The entry at constant ``index`` along ``axis`` (negative counts from the end), kept
    as an axis of size 1 with ``keepdims``."""
    shape = _shape(operand)
    ax = _axis("index_in_dim", "axis", axis, len(shape), negative=True)
    i = _int("index_in_dim", "index", index)
    if not -shape[ax] <= i < shape[ax]:
        raise IndexError(f"index_in_dim: index {i} is out of range for axis {ax} of size {shape[ax]}")
    i %= shape[ax]
    out = slice_in_dim(operand, i, i + 1, 1, ax)
    return out if keepdims else tnp.squeeze(out, ax)


def split(operand: ArrayLike, sizes: Sequence[int], axis: int = 0) -> list[Any]:
    """``operand`` cut along ``axis`` (negative counts from the end) into pieces of
    ``sizes``, which add up to the axis's size."""
    shape = _shape(operand)
    ax = _axis("split", "axis", axis, len(shape), negative=True)
    counts = _ints("split", "sizes", sizes)
    if builtins.min(counts, default=0) < 0 or sum(counts) != shape[ax]:
        raise ValueError(f"split: sizes {counts} must be >= 0 and add up to the size of axis {ax}, {shape[ax]} (the "
                         f"operand's shape is {shape})")
    starts = np.cumsum((0, *counts))
    return [_along(operand, ax, int(a), int(b)) for a, b in zip(starts[:-1], starts[1:], strict=True)]


def squeeze(array: ArrayLike, dimensions: Sequence[int]) -> Any:
    """``array`` without the axes ``dimensions`` (negative ones count from the end), each of
    size 1."""
    shape = _shape(array)
    axes = _axes("squeeze", "dimensions", dimensions, len(shape), negative=True)
    for a in axes:
        if shape[a] != 1:
            raise ValueError(f"squeeze: axis {a} has size {shape[a]} (shape {shape}); only axes of size 1 can go")
    return tnp.reshape(array, tuple(n for i, n in enumerate(shape) if i not in axes)) if axes else array


def tile(operand: ArrayLike, reps: Sequence[int]) -> Any:
    """``operand`` repeated ``reps[i]`` times along each axis ``i`` (one rep per axis)."""
    shape = _shape(operand)
    counts = _ints("tile", "reps", reps)
    if len(counts) != len(shape) or builtins.min(counts, default=0) < 0:
        raise TypeError(f"tile: reps {counts} must give one count >= 0 per axis of the operand (shape {shape})")
    return tnp.tile(operand, counts)


def transpose(operand: ArrayLike, permutation: Sequence[int]) -> Any:
    """``operand`` with its axes permuted: axis ``i`` of the result is axis
    ``permutation[i]`` of the operand."""
    shape = _shape(operand)
    perm = _ints("transpose", "permutation", permutation)
    if sorted(perm) != list(range(len(shape))):
        raise TypeError(f"transpose: permutation {perm} is not a permutation of the operand's axes 0..{len(shape) - 1}")
    return operand if perm == tuple(range(len(shape))) else tnp.transpose(operand, perm)


# --- contractions ------------------------------------------------------------------------------


def _contraction_dtype(fn: str, lhs: Any, rhs: Any, preferred_element_type: Any) -> tuple[Any, Any]:
    # bools contract to bools (or of ands), as JAX's
    _kinds(fn, "b" + _NUMBER, {"lhs": lhs, "rhs": rhs})
    if preferred_element_type is None:
        return lhs, rhs
    dtype = _dtype_name(fn, "preferred_element_type", preferred_element_type)
    return convert_element_type(lhs, dtype), convert_element_type(rhs, dtype)


def dot_general(lhs: ArrayLike, rhs: ArrayLike, dimension_numbers: Any, precision: Any = None,
                preferred_element_type: Any = None) -> Any:
    """The general tensor contraction: ``dimension_numbers`` is ``((lhs_contracting,
    rhs_contracting), (lhs_batch, rhs_batch))``, axis lists paired in order; the result's
    axes are the batch axes, then ``lhs``'s free axes, then ``rhs``'s, as JAX's. Mixed
    dtypes are promoted (as JAX's); ``preferred_element_type`` converts both operands
    first; ``precision`` is accepted and ignored (tidu computes at the operands' dtype)."""
    fn = "dot_general"
    lhs, rhs = _contraction_dtype(fn, lhs, rhs, preferred_element_type)
    ls, rs = _shape(lhs), _shape(rhs)
    try:
        (lc, rc), (lb, rb) = dimension_numbers
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: dimension_numbers must be ((lhs_contracting, rhs_contracting), (lhs_batch, "
                        f"rhs_batch)), got {dimension_numbers!r}") from None

    def axes(arg: str, v: Any, ndim: int) -> tuple[int, ...]:
        return _axes(fn, arg, (v,) if isinstance(v, int | np.integer) else v, ndim)

    lc, lb = axes("lhs_contracting", lc, len(ls)), axes("lhs_batch", lb, len(ls))
    rc, rb = axes("rhs_contracting", rc, len(rs)), axes("rhs_batch", rb, len(rs))
    for what, a, b in (("contracting", lc, rc), ("batch", lb, rb)):
        if len(a) != len(b):
            raise TypeError(f"{fn}: lhs has {len(a)} {what} axes, rhs {len(b)}")
        if [ls[i] for i in a] != [rs[i] for i in b]:
            raise TypeError(f"{fn}: the {what} axes have sizes {[ls[i] for i in a]} in lhs (shape {ls}) and "
                            f"{[rs[i] for i in b]} in rhs (shape {rs}); paired axes need one size")
    for side, c, b in (("lhs", lc, lb), ("rhs", rc, rb)):
        if set(c) & set(b):
            raise TypeError(f"{fn}: {side} axes {sorted(set(c) & set(b))} are both contracting and batch axes")
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    lsub = [next(letters) for _ in ls]
    rsub = [next(letters) for _ in rs]
    for i, j in zip(lc + lb, rc + rb, strict=True):
        rsub[j] = lsub[i]
    out = [lsub[i] for i in lb]
    out += [lsub[i] for i in range(len(ls)) if i not in lc + lb]
    out += [rsub[j] for j in range(len(rs)) if j not in rc + rb]
    return tnp.einsum(f"{''.join(lsub)},{''.join(rsub)}->{''.join(out)}", lhs, rhs)


def dot(lhs: ArrayLike, rhs: ArrayLike, *, dimension_numbers: Any = None, precision: Any = None,
        preferred_element_type: Any = None) -> Any:
    """Vector-vector, matrix-vector, vector-matrix or matrix-matrix product (``lhs``'s last
    axis with ``rhs``'s first); with ``dimension_numbers``, ``dot_general``."""
    if dimension_numbers is not None:
        return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type)
    ls, rs = _shape(lhs), _shape(rhs)
    if len(ls) not in (1, 2) or len(rs) not in (1, 2) or ls[-1] != rs[0]:
        raise TypeError(f"dot: lhs of shape {ls} and rhs of shape {rs} are no vector or matrix product (1 or 2 axes "
                        "each, lhs's last size rhs's first); use dot_general")
    return dot_general(lhs, rhs, (((len(ls) - 1,), (0,)), ((), ())), precision, preferred_element_type)


def batch_matmul(lhs: ArrayLike, rhs: ArrayLike, precision: Any = None) -> Any:
    """Matrix products over leading batch axes: ``(..., m, k) @ (..., k, n)``, the batch
    sizes equal (no broadcasting)."""
    ls, rs = _shape(lhs), _shape(rhs)
    if len(ls) != len(rs) or len(ls) < 2:
        raise TypeError(f"batch_matmul: lhs of shape {ls} and rhs of shape {rs} need one rank, at least 2")
    batch = tuple(range(len(ls) - 2))
    return dot_general(lhs, rhs, (((len(ls) - 1,), (len(ls) - 2,)), (batch, batch)), precision)


# --- reductions ------------------------------------------------------------------------------


def reduce_sum(operand: ArrayLike, axes: Sequence[int]) -> Any:
    """Sum over ``axes``, in the operand's dtype (integers wrap around)."""
    _kinds("reduce_sum", _NUMBER, {"operand": operand})
    ax = _axes("reduce_sum", "axes", axes, len(_shape(operand)))
    return tnp.sum(operand, axis=ax, dtype=_dtype(operand)) if ax else operand


def reduce_prod(operand: ArrayLike, axes: Sequence[int]) -> Any:
    """Product over ``axes``, in the operand's dtype."""
    _kinds("reduce_prod", _NUMBER, {"operand": operand})
    ax = _axes("reduce_prod", "axes", axes, len(_shape(operand)))
    return tnp.prod(operand, axis=ax, dtype=_dtype(operand)) if ax else operand


def _identity(dtype: str, highest: bool) -> Any:
    kind = _kind(dtype)
    if kind == "b":
        return np.array(highest)
    if kind == "f":
        return np.array(np.inf if highest else -np.inf, dtype)
    info = np.iinfo(dtype)
    return np.array(info.max if highest else info.min, dtype)


def _extreme(fn: str, operand: Any, axes: Any, maximum: bool) -> Any:
    _kinds(fn, "biuf", {"operand": operand}, "c")
    shape = _shape(operand)
    ax = _axes(fn, "axes", axes, len(shape))
    if not ax:
        return operand
    if any(shape[a] == 0 for a in ax):  # an empty reduction: the identity
        kept = tuple(n for i, n in enumerate(shape) if i not in ax)
        return np.full(kept, _identity(_dtype(operand), not maximum))
    return (tnp.max if maximum else tnp.min)(operand, axis=ax)


def reduce_max(operand: ArrayLike, axes: Sequence[int]) -> Any:
    """Maximum over ``axes`` (nan if one is nan; -inf or the dtype's least over no entries);
    at ties the derivative is shared equally."""
    return _extreme("reduce_max", operand, axes, True)


def reduce_min(operand: ArrayLike, axes: Sequence[int]) -> Any:
    """Minimum over ``axes`` (nan if one is nan; inf or the dtype's greatest over no
    entries); at ties the derivative is shared equally."""
    return _extreme("reduce_min", operand, axes, False)


def _fold(fn: str, operand: Any, axes: Any, op: Callable[[Any, Any], Any], empty: int) -> Any:
    """``op`` over ``axes`` pairwise (log2(n) rounds of halving), ``empty`` where there are
    no entries (-1: all bits set)."""
    _kinds(fn, "biu", {"operand": operand})
    shape, dtype = _aval(operand)
    ax = _axes(fn, "axes", axes, len(shape))
    if any(shape[a] == 0 for a in ax):
        kept = tuple(n for i, n in enumerate(shape) if i not in ax)
        return np.full(kept, np.array(bool(empty) if dtype == "bool" else empty).astype(dtype))
    x = operand
    for a in sorted(ax, reverse=True):
        n = shape[a]
        while n > 1:
            h = n // 2
            y = op(_along(x, a, 0, h), _along(x, a, h, 2 * h))
            x = tnp.concatenate([y, _along(x, a, 2 * h, n)], axis=a) if n % 2 else y
            n -= h
        x = tnp.squeeze(x, a)
    return x


def reduce_and(operand: ArrayLike, axes: Sequence[int]) -> Any:
    """Bitwise and over ``axes`` (logical on bools; all bits set over no entries)."""
    return _fold("reduce_and", operand, axes, tnp.bitwise_and, -1)


def reduce_or(operand: ArrayLike, axes: Sequence[int]) -> Any:
    """Bitwise or over ``axes`` (logical on bools; 0 over no entries)."""
    return _fold("reduce_or", operand, axes, tnp.bitwise_or, 0)


def reduce_xor(operand: ArrayLike, axes: Sequence[int]) -> Any:
    """Bitwise exclusive or over ``axes`` (on bools: whether an odd number hold)."""
    return _fold("reduce_xor", operand, axes, tnp.bitwise_xor, 0)


def _arg(fn: str, operand: Any, axis: int, index_dtype: Any) -> Any:
    _kinds(fn, "biuf", {"operand": operand})
    ax = _axis(fn, "axis", axis, len(_shape(operand)))
    dtype = _dtype_name(fn, "index_dtype", index_dtype)
    if _kind(dtype) not in "iu":
        raise TypeError(f"{fn}: index_dtype must be an integer dtype, got {dtype}")
    return tnp.astype((tnp.argmax if fn == "argmax" else tnp.argmin)(operand, axis=ax), dtype)


def argmax(operand: ArrayLike, axis: int, index_dtype: Any) -> Any:
    """Index of the first maximum along ``axis`` (of the first nan, if any), as
    ``index_dtype``."""
    return _arg("argmax", operand, axis, index_dtype)


def argmin(operand: ArrayLike, axis: int, index_dtype: Any) -> Any:
    """Index of the first minimum along ``axis`` (of the first nan, if any), as
    ``index_dtype``."""
    return _arg("argmin", operand, axis, index_dtype)


# --- cumulative ------------------------------------------------------------------------------


def _prefix(leaves: list[Any], axis: int, combine: Callable[[list[Any], list[Any]], list[Any]]) -> list[Any]:
    """Inclusive prefix combination along ``axis`` (Hillis and Steele: log2(n) rounds, each
    combining every entry with the partial result ``k`` places before it; the first ``k``
    entries are done). ``combine(earlier, later)`` takes and gives lists of arrays."""
    n = _shape(leaves[0])[axis]
    k = 1
    while k < n:
        done = [_along(v, axis, 0, k) for v in leaves]
        new = combine([_along(v, axis, 0, n - k) for v in leaves], [_along(v, axis, k, n) for v in leaves])
        leaves = [tnp.concatenate([d, v], axis=axis) for d, v in zip(done, new, strict=True)]
        k *= 2
    return leaves


def _cumulative(fn: str, operand: Any, axis: int, reverse: bool, kinds: str, jax_kinds: str,
                scan: Callable[[Any, int], Any]) -> Any:
    _kinds(fn, kinds, {"operand": operand}, jax_kinds)
    ax = _axis(fn, "axis", axis, len(_shape(operand)))
    x = tnp.flip(operand, ax) if reverse else operand
    out = scan(x, ax)
    return tnp.flip(out, ax) if reverse else out


def cumsum(operand: ArrayLike, axis: int = 0, reverse: bool = False) -> Any:
    """Running sums along ``axis`` (from the end with ``reverse``), in the operand's dtype."""
    return _cumulative("cumsum", operand, axis, reverse, _NUMBER, "",
                       lambda x, a: tnp.cumsum(x, axis=a, dtype=_dtype(x)))


def cumprod(operand: ArrayLike, axis: int = 0, reverse: bool = False) -> Any:
    """Running products along ``axis`` (from the end with ``reverse``), in the operand's
    dtype; exact derivatives also where factors are 0."""
    return _cumulative("cumprod", operand, axis, reverse, _NUMBER, "",
                       lambda x, a: tnp.cumprod(x, axis=a, dtype=_dtype(x)))


def cummax(operand: ArrayLike, axis: int = 0, reverse: bool = False) -> Any:
    """Running maximum along ``axis`` (from the end with ``reverse``); at ties the
    derivative is shared as JAX's (``tnp.cummax`` combines in the order of its
    associative scan)."""
    return _cumulative("cummax", operand, axis, reverse, "iuf", "c", lambda x, a: tnp.cummax(x, axis=a))


def cummin(operand: ArrayLike, axis: int = 0, reverse: bool = False) -> Any:
    """Running minimum along ``axis`` (from the end with ``reverse``); at ties the
    derivative is shared as JAX's."""
    return _cumulative("cummin", operand, axis, reverse, "iuf", "c", lambda x, a: tnp.cummin(x, axis=a))


def cumlogsumexp(operand: ArrayLike, axis: int = 0, reverse: bool = False) -> Any:
    """Running ``log(sum(exp(...)))`` along ``axis`` (from the end with ``reverse``),
    combined pairwise with ``logaddexp``, so it neither overflows nor underflows. Its
    derivative is logaddexp's weights, so at infinite entries it is their limit (one half
    each for two -inf, 0 for a finite entry beside inf), where JAX's is nan or arbitrary.
    float16 and bfloat16 run in float32, each result rounded once (JAX's rounds every
    step: an ulp or two off after a few)."""
    def scan(x: Any, a: int) -> Any:
        dtype = _dtype(x)
        if dtype in ("float16", "bfloat16"):  # in float32, each result rounded once (eager as traced)
            return tnp.astype(scan(tnp.astype(x, "float32"), a), dtype)
        return _prefix([x], a, lambda earlier, later: [tnp.logaddexp(earlier[0], later[0])])[0]
    return _cumulative("cumlogsumexp", operand, axis, reverse, "f", "c", scan)


def associative_scan(fn: Callable[[Any, Any], Any], elems: Any, reverse: bool = False, axis: int = 0) -> Any:
    """Inclusive scan of the associative ``fn`` over the pytree ``elems`` along ``axis``:
    entry ``i`` of the result is ``fn`` applied to entries ``0..i`` (``i..n-1`` with
    ``reverse``, still earlier-first in the flipped order, as JAX's). ``fn(a, b)`` takes
    and gives pytrees of ``elems``'s structure, and must work on slices of any length
    along ``axis`` (it is called on log2(n) slices, ``a`` the earlier entries)."""
    leaves, tree = flatten(elems)
    if not leaves:
        return elems
    shapes = [_shape(v) for v in leaves]
    ndim = builtins.min(len(s) for s in shapes)
    if ndim == 0:
        raise TypeError("associative_scan: elems must be arrays with at least one axis, got a scalar leaf")
    ax = _axis("associative_scan", "axis", axis, ndim, negative=True)
    lengths = {s[ax] for s in shapes}
    if len(lengths) > 1:
        raise ValueError(f"associative_scan: the leaves of elems have shapes {', '.join(map(str, shapes))}; they "
                         f"need one length along axis {ax}")
    if reverse:
        leaves = [tnp.flip(v, ax) for v in leaves]

    def combine(earlier: list[Any], later: list[Any]) -> list[Any]:
        out, out_tree = flatten(fn(unflatten(tree, earlier), unflatten(tree, later)))
        if out_tree != tree:
            raise TypeError("associative_scan: fn must return a pytree of elems's structure")
        want = [_shape(v) for v in earlier]
        if [_shape(v) for v in out] != want:
            raise TypeError(f"associative_scan: fn returned shapes {[_shape(v) for v in out]} for operands of shapes "
                            f"{want}; it must work elementwise along the scanned axis")
        return out

    out = _prefix(leaves, ax, combine)
    if reverse:
        out = [tnp.flip(v, ax) for v in out]
    return unflatten(tree, out)


# --- sorting ---------------------------------------------------------------------------------


def _order_keys(x: Any, canonical: bool) -> list[Any]:
    """Integer keys whose order is the total order of ``x``: -nan < -inf < ... < -0.0 < 0.0
    < ... < inf < nan for floats (the bits, with those of negative numbers flipped), real
    then imaginary part for complex. ``canonical``: -0.0 made 0.0 and every nan a positive
    nan first (sort's order: zeros tie, every nan last)."""
    kind = _kind(_dtype(x))
    if kind == "b":
        return [tnp.astype(x, "int8")]
    if kind in "iu":
        return [x]
    if kind == "c":
        return _order_keys(tnp.real(x), canonical) + _order_keys(tnp.imag(x), canonical)
    dtype = _dtype(x)
    if canonical:
        x = tnp.where(tnp.equal(x, 0), np.zeros((), dtype), x)
        x = tnp.where(tnp.isnan(x), np.array(np.nan, dtype), x)
    ints = _float_bits(dtype)
    bits = tnp.op("bitcast_convert")(x, dtype=ints)
    flip = np.array(np.iinfo(ints).max, ints)
    return [tnp.where(tnp.less(bits, 0), tnp.bitwise_xor(bits, flip), bits)]


def _sorted(keys: list[Any], values: list[Any], k: int) -> list[Any]:
    """The first ``k`` of ``values`` (last axis) in the ascending order of ``keys``, ties in
    index order. Eagerly a NumPy lexsort; traced, each entry's rank is the number of entries
    before it (all pairwise comparisons), and output r sums the entry of rank r with zeros."""
    n = _shape(values[0])[-1]
    if not any(isinstance(v, Tracer) for v in keys + values):
        perm = np.lexsort([np.asarray(v) for v in reversed(keys)], axis=-1)[..., :k]
        return [np.take_along_axis(np.asarray(v), perm, axis=-1) for v in values]
    earlier = np.tri(n, n, -1, dtype=bool)  # [i, j]: j < i
    before: Any = earlier
    for key in reversed(keys):
        ki, kj = tnp.expand_dims(key, -1), tnp.expand_dims(key, -2)
        before = tnp.logical_or(tnp.less(kj, ki), tnp.logical_and(tnp.equal(kj, ki), before))
    rank = tnp.sum(before, axis=-1, dtype="int64")
    hit = tnp.equal(tnp.expand_dims(rank, -2), np.arange(k).reshape(k, 1))  # [..., r, i]
    out = []
    for v in values:
        dtype = _dtype(v)
        vi = tnp.expand_dims(v, -2)
        if dtype == "bool":
            out.append(tnp.any(tnp.logical_and(hit, vi), axis=-1))
            continue
        if _kind(dtype) not in _INEXACT:
            out.append(tnp.sum(tnp.where(hit, vi, np.zeros((), dtype)), axis=-1, dtype=dtype))
            continue
        out.append(_halving_sum(tnp.where(hit, vi, np.negative(np.zeros((), dtype)))))
    return out


def _halving_sum(terms: Any) -> Any:
    """The sum along the last axis of terms that are all -0.0 but one, exact and with that
    one's bits (-0.0 too, which a reduction's +0.0 start would make 0.0): log2(n) halving
    steps, padded with -0.0 (x + -0.0 is x)."""
    neg_zero = np.negative(np.zeros((), _dtype(terms)))
    n = _shape(terms)[-1]
    while n > 1:
        if n % 2:
            pad = tnp.broadcast_to(neg_zero, (*_shape(terms)[:-1], 1))
            terms = tnp.concatenate([terms, pad], axis=-1)
            n += 1
        terms = tnp.add(terms[..., : n // 2], terms[..., n // 2:])
        n //= 2
    if n == 0:
        return tnp.broadcast_to(neg_zero, _shape(terms)[:-1])
    return tnp.reshape(terms, _shape(terms)[:-1])


def sort(operand: ArrayLike | Sequence[ArrayLike], dimension: int = -1, is_stable: bool = True,
         num_keys: int = 1) -> Any:
    """``operand`` sorted along ``dimension``; or, for a sequence of arrays of one shape,
    all of them reordered by the lexicographic order of the first ``num_keys`` (a tuple).
    Ascending, with -0.0 and 0.0 equal and nan last; complex by real, then imaginary part;
    always stable (``is_stable`` is accepted). Traced, a sort costs n^2 comparisons per
    sorted row: rows of up to a few thousand entries."""
    fn = "sort"
    single = not isinstance(operand, list | tuple)
    operands = [operand] if single else list(operand)
    if not operands:
        raise TypeError(f"{fn}: operand must be an array or a non-empty sequence of arrays")
    shapes = [_shape(x) for x in operands]
    if len(set(shapes)) > 1:
        raise TypeError(f"{fn}: the operands have shapes {', '.join(map(str, shapes))}; they must have one shape")
    nk = _int(fn, "num_keys", num_keys)
    if not 1 <= nk <= len(operands):
        raise ValueError(f"{fn}: num_keys is {nk}; it must be between 1 and the number of operands, {len(operands)}")
    ax = _axis(fn, "dimension", dimension, len(shapes[0]), negative=True)
    moved = [tnp.moveaxis(x, ax, -1) for x in operands]
    keys = [k for x in moved[:nk] for k in _order_keys(x, canonical=True)]
    out = [tnp.moveaxis(v, -1, ax) for v in _sorted(keys, moved, shapes[0][ax])]
    return out[0] if single else tuple(out)


def sort_key_val(keys: ArrayLike, values: ArrayLike, dimension: int = -1, is_stable: bool = True) -> tuple[Any, Any]:
    """``keys`` sorted along ``dimension`` and ``values`` reordered with them."""
    k, v = sort((keys, values), dimension, is_stable, 1)
    return k, v


def top_k(operand: ArrayLike, k: int, *, axis: int = -1, is_stable: bool = True) -> tuple[Any, Any]:
    """The ``k`` largest entries along ``axis``, largest first, and their indices (int32):
    in the total order (nan above inf, 0.0 above -0.0), the lower index first among
    equal entries."""
    fn = "top_k"
    _kinds(fn, "biuf", {"operand": operand})
    shape = _shape(operand)
    ax = _axis(fn, "axis", axis, len(shape), negative=True)
    n = shape[ax]
    kk = _int(fn, "k", k)
    if not 0 <= kk <= n:
        raise ValueError(f"{fn}: k is {kk}; it must be between 0 and the size along axis {ax}, {n}")
    x = tnp.moveaxis(operand, ax, -1)
    keys = [tnp.bitwise_not(key) for key in _order_keys(x, canonical=False)]  # descending
    index = np.broadcast_to(np.arange(n, dtype=np.int32), _shape(x))
    values, indices = _sorted(keys, [x, index], kk)
    return tnp.moveaxis(values, -1, ax), tnp.moveaxis(indices, -1, ax)


__all__ = [
    "RoundingMethod", "abs", "acos", "acosh", "add", "argmax", "argmin", "asin", "asinh", "associative_scan", "atan",
    "atan2", "atanh", "batch_matmul", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "broadcast",
    "broadcast_in_dim", "broadcast_to_rank", "broadcasted_iota", "cbrt", "ceil", "clamp", "clz", "collapse",
    "complex", "concatenate", "conj", "convert_element_type", "cos", "cosh", "cumlogsumexp", "cummax", "cummin",
    "cumprod", "cumsum", "digamma", "div", "dot", "dot_general", "eq", "erf", "erf_inv", "erfc", "exp", "exp2",
    "expand_dims", "expm1", "floor", "full", "full_like", "ge", "gt", "imag", "index_in_dim", "integer_pow", "iota",
    "is_finite", "le", "lgamma", "log", "log1p", "log2", "logistic", "lt", "max", "min", "mul", "ne", "neg",
    "nextafter", "pad", "population_count", "pow", "real", "reciprocal", "reduce_and", "reduce_max", "reduce_min",
    "reduce_or", "reduce_prod", "reduce_sum", "reduce_xor", "rem", "reshape", "rev", "round", "rsqrt", "select",
    "select_n", "shift_left", "shift_right_arithmetic", "shift_right_logical", "sign", "sin", "sinh", "slice",
    "slice_in_dim", "sort", "sort_key_val", "split", "sqrt", "square", "squeeze", "stop_gradient", "sub", "tan",
    "tanh", "tile", "top_k", "transpose",
]


# --- special functions (tidu.scipy.special's), barriers, precision, shapes -------------------


def igamma(a: ArrayLike, x: ArrayLike) -> Any:
    """The regularized lower incomplete gamma function P(a, x) (``tsp.gammainc``)."""
    return _elementwise("igamma", "f", tsp.gammainc, a=a, x=x)


def igammac(a: ArrayLike, x: ArrayLike) -> Any:
    """The regularized upper incomplete gamma function Q(a, x) (``tsp.gammaincc``)."""
    return _elementwise("igammac", "f", tsp.gammaincc, a=a, x=x)


def betainc(a: ArrayLike, b: ArrayLike, x: ArrayLike) -> Any:
    """The regularized incomplete beta function I_x(a, b) (``tsp.betainc``)."""
    return _elementwise("betainc", "f", tsp.betainc, a=a, b=b, x=x)


def polygamma(m: ArrayLike, x: ArrayLike) -> Any:
    """The ``m``-th derivative of digamma (``tsp.polygamma``); ``m`` has ``x``'s float dtype,
    as in jax.lax, and carries no derivative; nan where it is not a non-negative integer
    (as JAX's and SciPy's), eagerly and traced alike."""
    def impl(m: Any, x: Any) -> Any:
        m = stop_gradient(m)
        whole = tnp.logical_and(tnp.equal(m, tnp.round(m)), tnp.greater_equal(m, 0))
        value = tsp.polygamma(tnp.astype(tnp.where(whole, m, 0), "int64"), x)
        return tnp.where(whole, value, tnp.asarray(np.nan, tnp.result_type(value)))
    return _elementwise("polygamma", "f", impl, m=m, x=x)


def zeta(x: ArrayLike, q: ArrayLike) -> Any:
    """The Hurwitz zeta function, the sum over k >= 0 of (k + q)^-x (``tsp.zeta``)."""
    return _elementwise("zeta", "f", tsp.zeta, x=x, q=q)


def bessel_i0e(x: ArrayLike) -> Any:
    """exp(-|x|) I0(x) (``tsp.i0e``)."""
    return _elementwise("bessel_i0e", "f", tsp.i0e, x=x)


def bessel_i1e(x: ArrayLike) -> Any:
    """exp(-|x|) I1(x) (``tsp.i1e``)."""
    return _elementwise("bessel_i1e", "f", tsp.i1e, x=x)


def optimization_barrier(operand: Any, /) -> Any:
    """``operand`` (any pytree) as it is: tidu's graphs have no scheduling to hold back."""
    return operand


def _float_format(dtype: str) -> tuple[int, int]:
    """(exponent bits, mantissa bits) of a float dtype."""
    if dtype == "bfloat16":
        return 8, 7
    info = np.finfo(dtype)
    return 8 * info.dtype.itemsize - 1 - info.nmant, info.nmant


def _reduce_precision_value(x: Any, exponent_bits: int, mantissa_bits: int) -> Any:
    """XLA's ReducePrecision on the bits: round the mantissa to nearest even, then
    overflow to a signed inf and flush what is below the smallest normal to a signed 0;
    nan stays nan."""
    dtype = _dtype(x)
    src_exp, src_mant = _float_format(dtype)
    nbits = 1 + src_exp + src_mant
    uint = f"uint{nbits}"

    def c(v: int) -> Any:
        return np.array(v, uint)

    bits = tnp.op("bitcast_convert")(x, dtype=uint)
    if mantissa_bits < src_mant:
        shift = src_mant - mantissa_bits
        last = 1 << shift
        odd = tnp.right_shift(tnp.bitwise_and(bits, c(last)), c(shift))
        bits = tnp.bitwise_and(tnp.add(tnp.add(bits, odd), c((last >> 1) - 1)), c(~(last - 1) % (1 << nbits)))
    if exponent_bits < src_exp:
        sign = c(1 << (nbits - 1))
        exp_mask = ((1 << src_exp) - 1) << src_mant
        bias, reduced = (1 << (src_exp - 1)) - 1, (1 << (exponent_bits - 1)) - 1
        exponent = tnp.bitwise_and(bits, c(exp_mask))
        signed_zero = tnp.bitwise_and(bits, sign)
        signed_inf = tnp.bitwise_or(signed_zero, c(exp_mask))
        bits = tnp.where(tnp.greater(exponent, c((bias + reduced) << src_mant)), signed_inf,
                         tnp.where(tnp.less_equal(exponent, c((bias - reduced) << src_mant)), signed_zero, bits))
    out = tnp.op("bitcast_convert")(bits, dtype=dtype)
    return tnp.where(tnp.isnan(x), x, out)


def _reduce_precision_fn(x: Any, exponent_bits: int, mantissa_bits: int) -> Any:
    return _reduce_precision_value(x, exponent_bits, mantissa_bits)


_reduce_precision = custom_jvp(_reduce_precision_fn, nondiff_argnums=(1, 2))


@_reduce_precision.defjvp
def _reduce_precision_jvp(exponent_bits: int, mantissa_bits: int, primals: tuple[Any], tangents: tuple[Any]) -> Any:
    return _reduce_precision(primals[0], exponent_bits, mantissa_bits), tangents[0]  # derivative 1, as JAX's


def reduce_precision(operand: ArrayLike, exponent_bits: int, mantissa_bits: int) -> Any:
    """``operand`` rounded to the float format with ``exponent_bits`` and ``mantissa_bits``
    (as XLA's: to nearest even, overflow to inf, below the least normal to 0), in its own
    dtype; the derivative is 1."""
    fn = "reduce_precision"
    _kinds(fn, "f", {"operand": operand})
    e, m = _int(fn, "exponent_bits", exponent_bits), _int(fn, "mantissa_bits", mantissa_bits)
    if e < 1 or m < 0:
        raise ValueError(f"{fn}: exponent_bits is {e} and mantissa_bits {m}; they must be >= 1 and >= 0")
    src_exp, src_mant = _float_format(_dtype(operand))
    if e >= src_exp and m >= src_mant:
        return operand
    if not isinstance(operand, Tracer):
        return np.asarray(_reduce_precision_value(np.asarray(operand), e, m))
    return _reduce_precision(operand, e, m)


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The shape that ``shapes`` broadcast to (NumPy's rules: ranks aligned at the end,
    sizes equal or 1)."""
    dims = [_shape_arg("broadcast_shapes", f"shapes[{i}]", s) for i, s in enumerate(shapes)]
    try:
        return tuple(int(n) for n in np.broadcast_shapes(*dims))
    except ValueError:
        raise ValueError(f"broadcast_shapes: the shapes {', '.join(map(str, dims))} do not broadcast (aligned at the "
                         "end, each axis has one size or 1)") from None


__all__ += ["betainc", "bessel_i0e", "bessel_i1e", "broadcast_shapes", "igamma", "igammac", "optimization_barrier",
            "polygamma", "reduce_precision", "zeta"]
