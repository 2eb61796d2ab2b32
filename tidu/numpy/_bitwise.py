"""tidu.numpy bitwise operations on integers: ``bitwise_and/or/xor/not``, ``invert``,
``left_shift``, ``right_shift`` (and the array API's ``bitwise_*`` names), the primitives
of ``rules/bitwise.rules``. On bools they are the logical operations. Operands are
promoted as elementwise arithmetic (JAX's lattice); integers carry no tangent."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tidu.core.keys import is_integer, is_unsigned
from tidu.numpy._core import ArrayLike, _prep, _shape, _trace_of, broadcast_shapes, numpy_fallback
from tidu.numpy._dtypes import _info, result_type
from tidu.numpy._ufuncs import logical_and, logical_not, logical_or, logical_xor
from tidu.trace.tracing import Tracer


def _check(name: str, **operands: Any) -> None:
    """A one-line error naming the first operand that is not an integer or bool."""
    for arg, v in operands.items():
        dtype = _info(v)[0]
        if dtype != "bool" and not is_integer(dtype):
            raise TypeError(f"tnp.{name}: {arg} has dtype {dtype}; bitwise operations take integer or bool "
                            "values")


def _checked(name: str, np_fn: Callable[..., Any], *, bools: bool = True) -> Callable[..., Any]:
    """NumPy's function for concrete operands, after the same dtype check as traced ones."""

    def fn(*args: Any) -> Any:
        _check(name, **dict(zip(("x", "y"), args, strict=False)))
        if not bools and any(_info(a)[0] == "bool" for a in args):
            raise TypeError(f"tnp.{name}: shifts take integer values, not bools")
        return np_fn(*args)

    return fn


def _binary(op: str, name: str, x: Any, y: Any) -> Tracer:
    trace = _trace_of((x, y))
    assert trace is not None  # numpy_fallback computed the concrete case
    _check(name, x=x, y=y)
    dtype = result_type(x, y)
    if not is_integer(dtype):
        raise TypeError(f"tnp.{name}: x ({_info(x)[0]}) and y ({_info(y)[0]}) promote to {dtype}, "
                        "which has no bits to operate on; cast them to one integer dtype")
    shape = broadcast_shapes(_shape(x), _shape(y), what=name)
    weak = _info(x)[1] and _info(y)[1]
    return trace.emit(op, [_prep(trace, x, dtype, shape), _prep(trace, y, dtype, shape)], weak=weak)


def _logical_or_bitwise(op: str, name: str, logical: Callable[..., Any]) -> Callable[..., Any]:
    def fn(x: ArrayLike, y: ArrayLike) -> Any:
        _check(name, x=x, y=y)
        if result_type(x, y) == "bool":
            return logical(x, y)
        return _binary(op, name, x, y)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``x {dict(bitwise_and='&', bitwise_or='|', bitwise_xor='^')[op]} y`` of " \
                 "integers, bit by bit (logical on bools)."
    return numpy_fallback(_checked(name, getattr(np, name)), "x", "y")(fn)


bitwise_and = _logical_or_bitwise("bitwise_and", "bitwise_and", logical_and)
bitwise_or = _logical_or_bitwise("bitwise_or", "bitwise_or", logical_or)
bitwise_xor = _logical_or_bitwise("bitwise_xor", "bitwise_xor", logical_xor)


@numpy_fallback(_checked("invert", np.invert))
def invert(x: ArrayLike) -> Any:
    """``~x``: every bit of an integer flipped (logical not on bools)."""
    _check("invert", x=x)
    if x.aval.dtype == "bool":
        return logical_not(x)
    return x.trace.emit("bitwise_not", [x], weak=x.weak)


bitwise_not = bitwise_invert = invert


@numpy_fallback(_checked("left_shift", np.left_shift, bools=False), "x", "y")
def left_shift(x: ArrayLike, y: ArrayLike) -> Any:
    """``x << y`` of integers; a shift by the bit width or more (or a negative one) gives 0."""
    return _binary("shift_left", "left_shift", x, y)


@numpy_fallback(_checked("right_shift", np.right_shift, bools=False), "x", "y")
def right_shift(x: ArrayLike, y: ArrayLike) -> Any:
    """``x >> y`` of integers: arithmetic (the sign copied in) for signed dtypes, logical
    (zeros shifted in) for unsigned ones, as NumPy; a shift by the width or more (or a
    negative one) gives 0 (or -1 for a negative signed x)."""
    dtype = result_type(x, y)
    op = "shift_right_logical" if is_unsigned(dtype) else "shift_right_arithmetic"
    return _binary(op, "right_shift", x, y)


bitwise_left_shift, bitwise_right_shift = left_shift, right_shift
