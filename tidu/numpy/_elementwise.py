"""tidu.numpy elementwise functions: arithmetic, comparisons, unary math, complex parts,
``where`` and ``power``, with NumPy broadcasting and dtype promotion made explicit."""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from tidu.core.keys import Attrs, is_complex, is_inexact
from tidu.numpy._core import ArrayLike, _convert, _number, _prep, _shape, _trace_of, broadcast_shapes, numpy_fallback
from tidu.numpy._dtypes import _info, result_type
from tidu.numpy._filled import ones_like, zeros_like
from tidu.trace.tracing import Tracer

# the dtypes of Python scalars: two weak operands of one of them keep it
_WEAK_DEFAULTS = frozenset(("bool", "int64", "float64", "complex128"))
_INEXACT = frozenset(("float32", "float64", "complex64", "complex128"))


_BF16 = np.dtype("bfloat16")


def _bf16_scalars(np_fn: Any) -> Any:
    """NumPy's ``np_fn(x, y)``, a Python number against a bfloat16 array made bfloat16
    first, as JAX and traced tidu do (ml_dtypes' bfloat16 promotes it to float32)."""

    def fn(x: Any, y: Any) -> Any:
        if type(x) in (int, float) and getattr(y, "dtype", None) == _BF16:
            x = np.asarray(x, _BF16)
        elif type(y) in (int, float) and getattr(x, "dtype", None) == _BF16:
            y = np.asarray(y, _BF16)
        return np_fn(x, y)

    fn.__name__ = np_fn.__name__
    return fn


def _bf16_scalar_args(np_fn: Any) -> Any:
    """NumPy's ``np_fn(*args)`` with every Python number made bfloat16 where a bfloat16
    array is among the arguments (``where``, ``clip``: see _bf16_scalars)."""

    def fn(*args: Any, **kwargs: Any) -> Any:
        if any(getattr(a, "dtype", None) == _BF16 for a in (*args, *kwargs.values())):
            args = tuple(np.asarray(a, _BF16) if type(a) in (int, float) else a for a in args)
            kwargs = {k: np.asarray(a, _BF16) if type(a) in (int, float) else a for k, a in kwargs.items()}
        return np_fn(*args, **kwargs)

    fn.__name__ = np_fn.__name__
    return fn


def _binary(op: str, name: str, x: Any, y: Any, *, inexact: bool = False, real_only: bool = False) -> Any:
    if type(x) is Tracer and type(y) is Tracer and x.trace is y.trace and (x.aval is y.aval or x.aval == y.aval):
        # the common case in brief: one trace, one aval, so no promotion, conversion or
        # broadcast (what the general path below would find)
        dtype = x.aval.dtype
        both_weak = x.weak and y.weak
        if ((not both_weak or dtype in _WEAK_DEFAULTS) and (not inexact or is_inexact(dtype))
                and not (real_only and is_complex(dtype))):
            x.check_alive()
            return x.trace.emit(op, [x, y], weak=both_weak)
    elif type(y) is Tracer and (type(x) is float or type(x) is int):
        # a Python number and an inexact tracer (``0.5 * y``): the number takes the
        # tracer's dtype and shape, as the general path below makes it
        if _number_ok(y, real_only):
            return y.trace.emit(op, [_number(y, x), y], weak=y.weak)
    elif type(x) is Tracer and (type(y) is float or type(y) is int) and _number_ok(x, real_only):
        return x.trace.emit(op, [x, _number(x, y)], weak=x.weak)
    trace = _trace_of((x, y))
    assert trace is not None  # numpy_fallback computed the concrete case
    dtype = result_type(x, y)
    if inexact and not is_inexact(dtype):
        dtype = "float64"
    if real_only and is_complex(dtype):
        raise TypeError(f"tnp.{name} is not defined for complex values ({dtype})")
    shape = broadcast_shapes(_shape(x), _shape(y), what=name)
    weak = _info(x)[1] and _info(y)[1]
    return trace.emit(op, [_prep(trace, x, dtype, shape), _prep(trace, y, dtype, shape)],
                      weak=weak)


def _number_ok(t: Tracer, real_only: bool) -> bool:
    """A Python number combines with 0-d tracer ``t`` in ``t``'s dtype, as is (``_binary``)."""
    dtype = t.aval.dtype
    if dtype in _INEXACT and not (real_only and is_complex(dtype)):
        t.check_alive()
        return True
    return False


def _unary(op: str, x: Tracer, *, inexact: bool = True) -> Any:
    if x.trace.active and (not inexact or x.aval.dtype in _INEXACT):
        return x.trace.emit(op, [x], weak=x.weak and op != "abs")  # the common case: nothing to convert
    x.check_alive()
    trace = x.trace
    dtype = x.aval.dtype
    if inexact and not is_inexact(dtype):
        dtype = "float64"
    return trace.emit(op, [_convert(x, dtype)], weak=x.weak and op != "abs")


@numpy_fallback(_bf16_scalars(np.add), "x", "y")
def add(x: ArrayLike, y: ArrayLike) -> Any:
    if _booleans(x, y):  # the primitive has no bool dtype: logical or, as NumPy and JAX
        return _binary("bitwise_or", "add", x, y)
    return _binary("add", "add", x, y)


@numpy_fallback(_bf16_scalars(np.subtract), "x", "y")
def subtract(x: ArrayLike, y: ArrayLike) -> Any:
    if _booleans(x, y):  # NumPy and JAX refuse it too
        raise TypeError("tnp.subtract: boolean subtract (the - operator) is not supported; "
                        "use tnp.logical_xor or the ^ operator")
    return _binary("sub", "subtract", x, y)


@numpy_fallback(_bf16_scalars(np.multiply), "x", "y")
def multiply(x: ArrayLike, y: ArrayLike) -> Any:
    if _booleans(x, y):  # logical and, as NumPy and JAX
        return _binary("bitwise_and", "multiply", x, y)
    return _binary("mul", "multiply", x, y)


@numpy_fallback(_bf16_scalars(np.divide), "x", "y")
def divide(x: ArrayLike, y: ArrayLike) -> Any:
    return _binary("div", "divide", x, y, inexact=True)


true_divide = divide


def _booleans(x: Any, y: Any) -> bool:
    """Both operands boolean (read off the avals: maximum and minimum sit on hot paths)."""
    def boolean(v: Any) -> bool:
        return v.aval.dtype == "bool" if isinstance(v, Tracer) else np.asarray(v).dtype == np.bool_

    return boolean(x) and boolean(y)


@numpy_fallback(_bf16_scalars(np.maximum), "x", "y")
def maximum(x: ArrayLike, y: ArrayLike) -> Any:
    if _booleans(x, y):  # the primitive has no bool dtype: logical or is the maximum
        return _binary("bitwise_or", "maximum", x, y)
    if is_complex(result_type(x, y)):
        return _complex_extreme("GE", x, y)
    return _binary("maximum", "maximum", x, y, real_only=True)


@numpy_fallback(_bf16_scalars(np.minimum), "x", "y")
def minimum(x: ArrayLike, y: ArrayLike) -> Any:
    if _booleans(x, y):  # logical and is the minimum of booleans
        return _binary("bitwise_and", "minimum", x, y)
    if is_complex(result_type(x, y)):
        return _complex_extreme("LE", x, y)
    return _binary("minimum", "minimum", x, y, real_only=True)


def _compare(direction: str, name: str, np_fn: Any) -> Any:
    attrs = Attrs(direction=direction)  # (made once: comparisons are among the commonest ops)

    def fn(x: ArrayLike, y: ArrayLike) -> Any:
        trace = _trace_of((x, y))
        assert trace is not None
        dtype = result_type(x, y)
        shape = broadcast_shapes(_shape(x), _shape(y), what=name)
        a, b = _prep(trace, x, dtype, shape), _prep(trace, y, dtype, shape)
        if is_complex(dtype) and direction not in ("EQ", "NE"):
            return _lexicographic(direction, a, b)
        return trace.emit("compare", [a, b], attrs)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise x {direction} y (a bool array)."
    return numpy_fallback(_bf16_scalars(np_fn), "x", "y")(fn)


def _lexicographic(direction: str, a: Tracer, b: Tracer) -> Tracer:
    """Complex a < b (<=, >, >=) as NumPy and JAX order them: by real part, then by
    imaginary part; False where a part is nan."""
    trace = a.trace
    ar, ai, br, bi = real(a), imag(a), real(b), imag(b)
    strict = "LT" if direction in ("LT", "LE") else "GT"
    first = trace.emit("compare", [ar, br], {"direction": strict})
    tie = trace.emit("compare", [ar, br], {"direction": "EQ"})
    second = trace.emit("compare", [ai, bi], {"direction": direction})
    return trace.emit("bitwise_or", [first, trace.emit("bitwise_and", [tie, second])])


def _complex_extreme(direction: str, x: Any, y: Any) -> Tracer:
    """maximum (minimum) of complex values in that order; nan where either holds one
    (NumPy's: the nan operand; JAX's)."""
    trace = _trace_of((x, y))
    dtype = result_type(x, y)
    shape = broadcast_shapes(_shape(x), _shape(y), what="maximum" if direction == "GE" else "minimum")
    a, b = _prep(trace, x, dtype, shape), _prep(trace, y, dtype, shape)

    def nan(v: Tracer) -> Tracer:
        return trace.emit("bitwise_or", [trace.emit("compare", [real(v), real(v)], {"direction": "NE"}),
                                         trace.emit("compare", [imag(v), imag(v)], {"direction": "NE"})])

    take_a = trace.emit("bitwise_or", [_lexicographic(direction, a, b), nan(a)])
    return trace.emit("select", [take_a, a, b])


less = _compare("LT", "less", np.less)
less_equal = _compare("LE", "less_equal", np.less_equal)
greater = _compare("GT", "greater", np.greater)
greater_equal = _compare("GE", "greater_equal", np.greater_equal)
equal = _compare("EQ", "equal", np.equal)
not_equal = _compare("NE", "not_equal", np.not_equal)


@numpy_fallback(np.negative)
def negative(x: ArrayLike) -> Any:
    return _unary("neg", x, inexact=False)


@numpy_fallback(np.positive)
def positive(x: ArrayLike) -> Any:
    return x


@numpy_fallback(np.exp)
def exp(x: ArrayLike) -> Any:
    return _unary("exp", x)


@numpy_fallback(np.log)
def log(x: ArrayLike) -> Any:
    return _unary("log", x)


@numpy_fallback(np.expm1)
def expm1(x: ArrayLike) -> Any:
    return _unary("expm1", x)


@numpy_fallback(np.log1p)
def log1p(x: ArrayLike) -> Any:
    return _unary("log1p", x)


@numpy_fallback(np.sin)
def sin(x: ArrayLike) -> Any:
    return _unary("sin", x)


@numpy_fallback(np.cos)
def cos(x: ArrayLike) -> Any:
    return _unary("cos", x)


@numpy_fallback(np.tanh)
def tanh(x: ArrayLike) -> Any:
    return _unary("tanh", x)


@numpy_fallback(np.sqrt)
def sqrt(x: ArrayLike) -> Any:
    return _unary("sqrt", x)


@numpy_fallback(lambda x: _bf16_scalars(np.divide)(1.0, np.sqrt(x)))
def rsqrt(x: ArrayLike) -> Any:
    """1 / sqrt(x)."""
    return _unary("rsqrt", x)


@numpy_fallback(np.sign)
def sign(x: ArrayLike) -> Any:
    return _unary("sign", x, inexact=False)


@numpy_fallback(np.abs)
def abs(x: ArrayLike) -> Any:  # noqa: A001 (numpy name)
    """|x|; the modulus (a real array) for complex x."""
    if x.aval.dtype == "bool":  # NumPy's and JAX's: the value itself
        return x
    return _unary("abs", x, inexact=False)


absolute = abs


@numpy_fallback(np.tan)
def tan(x: ArrayLike) -> Any:
    """The primitive ``tan`` (rules/transcendental.rules): NumPy's values, where sin / cos
    is 1 ulp off at a third of points."""
    return _unary("tan", x)


@numpy_fallback(np.sinh)
def sinh(x: ArrayLike) -> Any:
    """The primitive ``sinh`` (rules/transcendental.rules): (e^x - e^-x) / 2 would cancel
    near 0."""
    return _unary("sinh", x)


@numpy_fallback(np.cosh)
def cosh(x: ArrayLike) -> Any:
    """The primitive ``cosh``: its derivative is ``sinh``, which does not cancel near 0."""
    return _unary("cosh", x)


@numpy_fallback(np.log2)
def log2(x: ArrayLike) -> Any:
    return _log_base(x, math.log(2.0))


@numpy_fallback(np.log10)
def log10(x: ArrayLike) -> Any:
    return _log_base(x, math.log(10.0))


def _log_base(x: ArrayLike, ln_base: float) -> Any:
    """log(x) / ln_base; a complex log's parts divided apart (as NumPy): a complex division
    by ln_base + 0j would make log(0)'s imaginary part -inf * 0, a nan. Of float16 and
    bfloat16 in float32, rounded once, as NumPy's loops (rounded twice, log2 was off by up
    to 1.8 units of the last place in an eighth of the float16 values)."""
    if isinstance(x, Tracer) and x.aval.dtype in ("float16", "bfloat16"):
        return _convert(_log_base(_convert(x, "float32"), ln_base), x.aval.dtype)
    v = log(x)
    if isinstance(v, Tracer) and is_complex(v.aval.dtype):
        return v.trace.emit("complex", [divide(real(v), ln_base), divide(imag(v), ln_base)])
    return divide(v, ln_base)


@numpy_fallback(np.square)
def square(x: ArrayLike) -> Any:
    if isinstance(x, Tracer) and x.aval.dtype == "bool":  # NumPy squares booleans as int8
        x = _convert(x, "int8")
    return multiply(x, x)


@numpy_fallback(np.reciprocal)
def reciprocal(x: ArrayLike) -> Any:
    return divide(1.0, x)


def _np_clip(x: Any, a_min: Any = None, a_max: Any = None) -> Any:
    if getattr(x, "dtype", None) != _BF16:
        return np.clip(x, a_min, a_max)
    # ml_dtypes' bfloat16 has no clip loop of its own (np.clip gives float32): its maximum and minimum
    x = x if a_min is None else np.maximum(x, a_min)
    return x if a_max is None else np.minimum(x, a_max)


@numpy_fallback(_bf16_scalar_args(_np_clip), "x", "a_min", "a_max")
def clip(x: ArrayLike, a_min: ArrayLike | None = None, a_max: ArrayLike | None = None) -> Any:
    dtype = _info(x)[0]
    if dtype.startswith(("int", "uint")):  # a Python int bound beyond the dtype's range clips to it, as NumPy's
        lo, hi = int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)
        a_min, a_max = (builtins.min(builtins.max(b, lo), hi) if type(b) is int else b for b in (a_min, a_max))
    if a_min is not None:
        x = maximum(x, a_min)
    if a_max is not None:
        x = minimum(x, a_max)
    return x


@numpy_fallback(np.conj)
def conj(x: ArrayLike) -> Any:
    """Complex conjugate (the identity on real values)."""
    if not is_complex(x.aval.dtype):
        x.check_alive()
        return x
    return _unary("conj", x, inexact=False)


conjugate = conj


@numpy_fallback(np.real)
def real(x: ArrayLike) -> Any:
    if not is_complex(x.aval.dtype):
        x.check_alive()
        return x
    return _unary("real", x, inexact=False)


@numpy_fallback(np.imag)
def imag(x: ArrayLike) -> Any:
    if not is_complex(x.aval.dtype):
        return zeros_like(x)
    return _unary("imag", x, inexact=False)


@numpy_fallback(_bf16_scalar_args(np.where), "condition", "x", "y")
def where(condition: ArrayLike, x: ArrayLike, y: ArrayLike) -> Any:
    """Elementwise ``x`` where ``condition`` else ``y`` (broadcast together)."""
    trace = _trace_of((condition, x, y))
    assert trace is not None
    shape = broadcast_shapes(_shape(condition), _shape(x), _shape(y), what="where")
    if _info(condition)[0] != "bool":
        condition = not_equal(condition, 0)
    dtype = result_type(x, y)
    return trace.emit("select", [_prep(trace, condition, "bool", shape),
                                 _prep(trace, x, dtype, shape), _prep(trace, y, dtype, shape)])


@numpy_fallback(_bf16_scalars(np.power), "x", "y")
def power(x: ArrayLike, y: ArrayLike) -> Any:
    """x ** y. A constant integer exponent becomes repeated multiplication, down to -1 for a
    real float x (and to -256 for others); 0.5 becomes sqrt (NumPy's power takes that path
    too: (-0.0) ** 0.5 is -0.0), and -0.5 rsqrt for complex x; anything else is the ``pow``
    primitive. x ** -n and x ** -0.5 of a real float are pow, NumPy's own values (1 / x ** n
    and 1 / sqrt(x) are an ulp off it at a third of points, and -inf at -0.0), and
    derivatives of pow, JAX's: those of 1 / x ** n were 0 * inf = nan at 0 and +-inf."""
    if not isinstance(y, Tracer) and np.ndim(y) == 0 and _info(y)[0] != "bool":
        v = np.asarray(y).item()
        dtype = result_type(x, y)
        base = _convert(x, dtype)
        real_float = is_inexact(dtype) and not is_complex(dtype)
        if isinstance(v, int | float) and float(v).is_integer() and builtins.abs(v) <= 256:
            if v >= -1 or not real_float:
                return _integer_pow(base, int(v))
        elif v == 0.5 or (v == -0.5 and not real_float):
            return sqrt(base) if v == 0.5 else rsqrt(base)
    dtype = result_type(x, y)
    if not is_inexact(dtype):  # (booleans as int8, NumPy's dtype for them)
        return _integer_power(x, y, "int8" if dtype == "bool" else dtype)
    return _binary("pow", "power", x, y, inexact=True)


def _integer_power(x: Any, y: Any, dtype: str) -> Tracer:
    """x ** y for integers x and y (a traced or array exponent) in their dtype, as NumPy and
    JAX: repeated squaring over the exponent's bits (wrapping around as integer arithmetic
    does). A negative exponent gives the integer part of the power: 1 for x = 1, -1 or 1 for
    x = -1 (by parity), else 0 (NumPy raises; JAX's squaring wraps around, 3 ** -2 is 57 in
    int8)."""
    trace = _trace_of((x, y))
    assert trace is not None  # numpy_fallback computed the concrete case
    shape = broadcast_shapes(_shape(x), _shape(y), what="power")
    base, e = _prep(trace, x, dtype, shape), _prep(trace, y, dtype, shape)

    def const(v: int) -> Tracer:
        return _prep(trace, np.asarray(v, dtype), dtype, shape)

    one = const(1)
    acc = one
    for k in range(np.iinfo(dtype).bits):  # bit k of the exponent (its two's complement for y < 0)
        bit = trace.emit("bitwise_and", [trace.emit("shift_right_logical", [e, const(k)]), one])
        acc = where(not_equal(bit, 0), multiply(acc, base), acc)
        base = multiply(base, base)
    if np.iinfo(dtype).min == 0:
        return acc
    odd = not_equal(trace.emit("bitwise_and", [e, one]), 0)
    x_ = _prep(trace, x, dtype, shape)
    negative_power = where(equal(x_, 1), one, where(equal(x_, -1), where(odd, const(-1), one), const(0)))
    return where(less(e, 0), negative_power, acc)


def _integer_pow(x: Any, n: int) -> Any:
    if n == 0:
        return ones_like(x)
    if n < 0:
        return divide(1.0, _integer_pow(x, -n))
    result = None
    base = x
    while n:
        if n & 1:
            result = base if result is None else multiply(result, base)
        n >>= 1
        if n:
            base = multiply(base, base)
    return result
