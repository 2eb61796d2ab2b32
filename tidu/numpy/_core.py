"""tidu.numpy core: shapes and axes (NumPy broadcasting), the tracing helpers every
function uses (the trace of the operands, implicit ``convert`` and ``broadcast_in_dim``,
operands as tracers: ``_prep``), and ``numpy_fallback``, which sends calls with no traced
operand to NumPy."""

from __future__ import annotations

import builtins
import functools
import inspect
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from tidu.core.keys import DTYPES, HALF_DTYPES, Literal, is_complex
from tidu.numpy._dtypes import _info
from tidu.trace.evaluator import run_traced
from tidu.trace.tracing import Trace, TraceError, Tracer

ArrayLike = Any
_F = TypeVar("_F", bound=Callable[..., Any])
_CONST_INLINE = 4096  # constants up to this size are stored whole, not broadcast


# --- shapes ----------------------------------------------------------------------------


def _shape(x: Any) -> tuple[int, ...]:
    return x.shape if isinstance(x, Tracer) else np.shape(x)


def broadcast_shapes(*shapes: tuple[int, ...], what: str = "") -> tuple[int, ...]:
    """NumPy broadcasting of shapes, with an error that names every shape."""
    ndim = builtins.max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-ndim, 0):
        sizes = {s[i] for s in shapes if len(s) >= -i} - {1}
        if len(sizes) > 1:
            where = f"tnp.{what}: " if what else ""
            raise ValueError(f"{where}operands could not be broadcast together with shapes "
                             f"{' '.join(str(tuple(s)) for s in shapes)}; make them compatible "
                             "(equal sizes, or 1, aligned from the right) with reshape or "
                             "x[:, None]")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _axis_index(axis: Any, what: str, takes: str = "an int") -> int:
    """``axis`` as an int: an int or NumPy integer (as NumPy takes it), else a TypeError
    that names the function (a float, str or bool axis is no axis, as in NumPy)."""
    if not isinstance(axis, bool | np.bool_ | Tracer):
        try:
            return operator.index(axis)
        except TypeError:
            pass
    got = "a traced value (an axis is a constant)" if isinstance(axis, Tracer) else \
        f"{axis!r:.60} ({type(axis).__name__})"
    raise TypeError(f"tnp.{what}: axis must be {takes}, got {got}")


def _norm_axis(axis: int, ndim: int, what: str) -> int:
    axis = _axis_index(axis, what)
    if not -ndim <= axis < ndim:
        raise ValueError(f"tnp.{what}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim


def _norm_axes(axis: int | Sequence[int] | None, ndim: int, what: str) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, str | bytes | float | complex | bool | np.bool_ | Tracer) or not hasattr(axis, "__iter__") \
            or np.ndim(axis) == 0:
        axes: tuple[Any, ...] = (axis,)
    else:
        axes = tuple(axis)
    out = tuple(_norm_axis(_axis_index(a, what, "an int or a tuple of ints"), ndim, what) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"tnp.{what}: repeated axis in {axis}")
    return tuple(sorted(out))


# --- tracing helpers ---------------------------------------------------------------------


def _trace_of(xs: Sequence[Any]) -> Trace | None:
    """The innermost trace among the tracers in ``xs`` (None when all are concrete)."""
    best: Trace | None = None
    for x in xs:
        if isinstance(x, Tracer):
            x.check_alive()
            if best is None or x.trace.depth > best.depth:
                best = x.trace
    if best is not None:
        for x in xs:
            if isinstance(x, Tracer) and not x.trace.is_ancestor_of(best):
                raise TraceError("values of two unrelated traces are combined; a traced value "
                                 "escaped the transform that made it")
    return best


def _convert(t: Tracer, dtype: str) -> Tracer:
    if t.aval.dtype == dtype:
        return t
    if is_complex(t.aval.dtype) and not is_complex(dtype):
        raise TypeError(f"cannot convert {t.aval.dtype} to {dtype} implicitly; use tnp.real")
    return t.trace.emit("convert", [t], {"dtype": dtype})


def _broadcast_to(t: Tracer, shape: tuple[int, ...]) -> Tracer:
    if t.shape == shape:
        return t
    dims = tuple(range(len(shape) - t.ndim, len(shape)))
    return t.trace.emit("broadcast_in_dim", [t], {"shape": shape, "dims": dims})


def _prep(trace: Trace, x: Any, dtype: str, shape: tuple[int, ...] | None = None) -> Tracer:
    """``x`` as a tracer of ``trace`` with ``dtype`` (and broadcast to ``shape``)."""
    if isinstance(x, Tracer):
        t = x if x.trace is trace else Tracer(trace, trace.lift(x), x.aval, x.weak)
        t = _convert(t, dtype)
        return t if shape is None else _broadcast_to(t, shape)
    arr = np.asarray(x, dtype=dtype)
    if shape is not None and arr.shape != shape and math.prod(shape) <= _CONST_INLINE:
        arr = np.broadcast_to(arr, shape).copy()
    t = trace.constant(arr)
    return t if shape is None else _broadcast_to(t, shape)


def _number(t: Tracer, value: int | float) -> Tracer:
    """The Python number ``value`` as ``_prep`` makes it for an operand of ``t``'s dtype and
    shape (0-d, whole up to ``_CONST_INLINE`` elements, else broadcast), without making
    the array: the same constant (a splat literal is hashed by its one value)."""
    aval, trace = t.aval, t.trace
    if not aval.shape:
        return trace.constant(value, aval.dtype)
    if aval.size <= _CONST_INLINE:
        return trace.constant(Literal.filled(value, aval.shape, aval.dtype))
    return _broadcast_to(trace.constant(value, aval.dtype), aval.shape)


def _tracer(trace: Trace, x: Any) -> Tracer:
    return _prep(trace, x, _info(x)[0])


def _float64(x: Any) -> Any:
    """Integer and bool arrays (in nested lists and tuples too) as float64."""
    if isinstance(x, list | tuple):
        return type(x)(_float64(v) for v in x)
    if isinstance(x, np.ndarray | np.generic) and x.dtype.kind in "biu":
        return x.astype(np.float64)
    return float(x) if isinstance(x, bool) else x  # (np.sin(True) is float16)


def _leaves(x: Any) -> list[Any]:
    """The items of nested lists and tuples (``x`` itself when it is neither)."""
    if isinstance(x, list | tuple):
        return [v for item in x for v in _leaves(item)]
    return [x]


# --- NumPy for concrete operands ---------------------------------------------------------

# NumPy sums and multiplies float16 and bfloat16 arrays in that precision (bfloat16's
# 8 bits: 5000 values of 0.35 sum to 128, the mean of a bfloat16 array is wrong in the
# second digit); tidu's implementations accumulate in float32, as XLA and JAX do. An
# accumulating function called eagerly on such an operand runs tidu's implementation,
# traced and compiled as under ``tidu.jit`` (tidu.trace.evaluator), so that eager and
# traced calls agree.
_HALF = frozenset(np.dtype(d) for d in HALF_DTYPES)
# NumPy computes on bfloat16 only through ml_dtypes' ufunc loops; its functions written in
# Python (np.sinc, np.i0, np.gradient, np.unwrap, np.polyval) mix bfloat16 with float64
# values or convert it to float, and return float32 or float64 where traced tidu and JAX
# keep bfloat16: such an eager call runs tidu's implementation instead (docs/numpy.md,
# "Dtypes and promotion")
_BF16 = np.dtype("bfloat16")
_DTYPE_NAMES = frozenset(DTYPES)


def _bf16_widened(values: list[Any], args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> bool:
    """Whether NumPy's result ``out`` of a call whose operands (``values``) are bfloat16
    arrays and Python numbers is a float32 or float64 array: NumPy had no bfloat16 loop and
    widened, where tidu keeps bfloat16. A call that asks for a dtype (an argument that is
    one) is left as NumPy answers it."""
    if not builtins.all(getattr(v, "dtype", None) is _BF16 or type(v) in (bool, int, float) or v is None
                        for v in values):
        return False
    first = out[0] if isinstance(out, tuple | list) and out else out
    if getattr(first, "dtype", None) not in (np.float32, np.float64):
        return False
    return not builtins.any(isinstance(a, np.dtype) or (isinstance(a, type) and issubclass(a, np.generic))
                            or (isinstance(a, str) and a in _DTYPE_NAMES) for a in (*args, *kwargs.values()))


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def numpy_fallback(numpy_fn: Callable[..., Any] | str, *operands: str,
                   nested: bool = False, accumulates: bool = False) -> Callable[[_F], _F]:
    """The one switch between NumPy and tracing: the decorated function (tidu's
    implementation) runs when one of its ``operands`` (parameter names; the first parameter
    by default) is traced, and ``numpy_fn`` computes the result when none is. ``nested``:
    the operands may be (nested) lists and tuples, traced when an item is.

    ``numpy_fn`` is called with the call's arguments as bound to the decorated function's
    signature, defaults filled in: parameters without a default (and ``*args``) positionally,
    the others by keyword. NumPy's own function fits that when its parameter names do;
    otherwise ``numpy_fn`` is a small adapter with the decorated function's signature. A
    name (``"linalg.trace"``) is looked up in ``numpy`` at the call, for functions newer
    than the oldest NumPy supported.
    Every function of tidu.numpy that has a NumPy counterpart reaches it here, so a check
    that the eager, traced and NumPy results agree belongs in ``dispatch``; the counterpart
    is the wrapper's ``numpy`` attribute, the implementation its ``__wrapped__``.

    ``accumulates``: the function sums or multiplies many elements (a reduction, a scan, a
    contraction, a statistic), or NumPy rounds its steps in half precision (``sinc``). On a
    float16 or bfloat16 operand it runs tidu's own implementation, not NumPy's (see
    ``_HALF`` below): eager results are the traced ones."""

    def decorate(impl: _F) -> _F:
        sig = inspect.signature(impl)
        params = tuple(sig.parameters.values())
        # where each operand is found: (position in *args or None, name, is it *args)
        spots = []
        for name in operands or (params[0].name,):
            p = sig.parameters[name]
            star = p.kind is inspect.Parameter.VAR_POSITIONAL
            pos = params.index(p) if star or p.kind in _POSITIONAL else None
            spots.append((pos, name, star))
        # the common calls, decided without binding: one operand, passed first; all
        # parameters plain (positional or keyword), passed positionally
        first_only = spots == [(0, params[0].name, False)] and not nested
        plain = all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params)
        n_required = sum(p.default is p.empty for p in params)

        def call_numpy(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            try:
                return call_numpy_unchecked(args, kwargs)
            except AttributeError as e:  # NumPy's message for an operand it cannot take ('int' has no 'arctan2')
                kinds = ", ".join(type(a).__name__ for a in args)
                raise TypeError(f"tnp.{impl.__name__}: an argument is not an array NumPy can take (got {kinds}): "
                                f"{e}") from None
            except TraceError:  # a list of tracers reached NumPy (an operand that is not ``nested``)
                if builtins.any(isinstance(v, Tracer) for a in (*args, *kwargs.values())
                                if isinstance(a, list | tuple) for v in _leaves(a)):
                    raise TypeError(f"tnp.{impl.__name__}: an argument is a list or tuple holding traced values; "
                                    "make it one array first: tnp.stack([...]) or tnp.asarray([...])") from None
                raise

        def call_numpy_unchecked(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            fn = operator.attrgetter(numpy_fn)(np) if isinstance(numpy_fn, str) else numpy_fn
            if plain and not kwargs and n_required <= len(args) <= len(params):
                return fn(*args[:n_required], **{p.name: args[i] if i < len(args) else p.default
                                                 for i, p in enumerate(params) if i >= n_required})
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError:
                return impl(*args, **kwargs)  # a call that does not fit: Python's own message
            bound.apply_defaults()
            pos: list[Any] = []
            kw: dict[str, Any] = {}
            for p in params:
                value = bound.arguments[p.name]
                if p.kind is inspect.Parameter.VAR_POSITIONAL:
                    pos.extend(value)
                elif p.kind is inspect.Parameter.VAR_KEYWORD:
                    kw.update(value)
                elif p.kind in _POSITIONAL and p.default is p.empty:
                    pos.append(value)
                else:
                    kw[p.name] = value
            return fn(*pos, **kw)

        def call_numpy_wide(args: tuple[Any, ...], kwargs: dict[str, Any], values: list[Any]) -> Any:
            """NumPy's result, or tidu's where NumPy's dtype is not tidu's (``values``: the
            operands, nested ones spread)."""
            out = call_numpy(args, kwargs)
            if builtins.any(getattr(v, "dtype", None) is _BF16 for v in values) and \
                    _bf16_widened(_leaves(values), args, kwargs, out):
                # NumPy widened bfloat16 (no loop of its own): tidu's implementation, traced
                # and compiled once per signature, gives what a traced call gives
                return run_traced(impl, args, kwargs)
            first = out[0] if isinstance(out, tuple) and out else out  # (modf, frexp: a tuple)
            dtype = getattr(first, "dtype", None)
            if dtype is None or dtype.kind != "f" or dtype.itemsize >= 8 or "dtype" in kwargs:
                return out
            # NumPy gives float16 (float32) for bools and 8-bit (16-bit) integers where tidu
            # computes in float64: the call again on float64 operands, if they were all integers
            given = [v for v in _leaves(operand_values(args, kwargs)) if isinstance(v, np.ndarray | np.generic | bool)]
            if not given or not builtins.all(np.asarray(v).dtype.kind in "biu" for v in given):
                return out
            return call_numpy(*_widened_operands(args, kwargs))

        def operand_values(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
            """The call's ``operands`` (those of ``*args`` spread), as passed."""
            values: list[Any] = []
            for pos, name, star in spots:
                if star:
                    values.extend(args[pos:])
                elif pos is not None and pos < len(args):
                    values.append(args[pos])
                elif name in kwargs:
                    values.append(kwargs[name])
            return values

        def _widened_operands(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
            args, kwargs = list(args), dict(kwargs)
            for pos, name, star in spots:
                if star:
                    args[pos:] = [_float64(v) for v in args[pos:]]
                elif pos is not None and pos < len(args):
                    args[pos] = _float64(args[pos])
                elif name in kwargs:
                    kwargs[name] = _float64(kwargs[name])
            return tuple(args), kwargs

        @functools.wraps(impl)
        def dispatch(*args: Any, **kwargs: Any) -> Any:
            if first_only and args:
                x = args[0]
                if isinstance(x, Tracer):
                    x.check_alive()  # all that _trace_of checks for one tracer
                    return impl(*args, **kwargs)
                if accumulates and getattr(x, "dtype", None) in _HALF:
                    return run_traced(impl, args, kwargs)
                return call_numpy_wide(args, kwargs, [x])
            values = operand_values(args, kwargs)
            if nested:
                values = _leaves(values)
            if _trace_of(values) is None:
                if accumulates and builtins.any(getattr(v, "dtype", None) in _HALF for v in values):
                    return run_traced(impl, args, kwargs)
                return call_numpy_wide(args, kwargs, values)
            return impl(*args, **kwargs)

        dispatch.numpy = numpy_fn  # type: ignore[attr-defined]
        return dispatch  # type: ignore[return-value]

    return decorate
