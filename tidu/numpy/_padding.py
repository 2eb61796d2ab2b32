"""``tnp.pad``: every NumPy mode on traced arrays. "constant" and "empty" are the ``pad``
primitive; the other modes are built from slices, flips, reductions and concatenation,
one axis after the other on the array padded so far (NumPy's order, which decides the
corners)."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from tidu.core.keys import is_inexact
from tidu.numpy._casting import astype
from tidu.numpy._core import ArrayLike, _prep, numpy_fallback
from tidu.numpy._elementwise import add, multiply, subtract
from tidu.numpy._reductions import max, mean, min
from tidu.numpy._shapes import concatenate, flip, repeat
from tidu.numpy._sorting import median
from tidu.numpy._ufuncs import floor, round
from tidu.trace.tracing import Tracer

_KEYWORDS = {"constant": {"constant_values"}, "empty": set(), "edge": set(), "wrap": set(),
             "reflect": {"reflect_type"}, "symmetric": {"reflect_type"}, "linear_ramp": {"end_values"},
             "maximum": {"stat_length"}, "minimum": {"stat_length"}, "mean": {"stat_length"},
             "median": {"stat_length"}}
_STATS = {"maximum": max, "minimum": min, "mean": mean, "median": median}


def _np_pad(x: Any, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> Any:
    return np.pad(x, pad_width, mode=mode, **kwargs)


@numpy_fallback(_np_pad)
def pad(x: ArrayLike, pad_width: Any, mode: str = "constant", **kwargs: Any) -> Any:
    """Pad the edges, with NumPy's modes and keywords: "constant" (``constant_values``),
    "edge", "reflect" and "symmetric" (``reflect_type`` "even" or "odd"), "wrap",
    "linear_ramp" (``end_values``), "maximum", "minimum", "mean" and "median"
    (``stat_length``), and "empty" (zeros here)."""
    if callable(mode):
        raise NotImplementedError("tnp.pad: a function as mode is not supported on traced arrays; "
                                  "use one of " + ", ".join(_KEYWORDS))
    if mode not in _KEYWORDS:
        raise ValueError(f"tnp.pad: mode {mode!r} is not known; the modes are " + ", ".join(_KEYWORDS))
    if unknown := set(kwargs) - _KEYWORDS[mode]:
        raise ValueError(f"tnp.pad: mode {mode!r} takes no keyword {', '.join(sorted(unknown))} "
                         f"(it takes {', '.join(sorted(_KEYWORDS[mode])) or 'none'})")
    widths = _pairs(pad_width, x.ndim, "pad_width", int)
    if any(w < 0 for pair in widths for w in pair):
        raise ValueError(f"tnp.pad: pad widths must be >= 0, got {pad_width}")
    if mode in ("constant", "empty"):
        return _constant(x, widths, kwargs.get("constant_values", 0))
    for a, (lo, hi) in enumerate(widths):
        if x.shape[a] == 0 and (lo or hi):
            raise ValueError(f"tnp.pad: axis {a} is empty: only modes 'constant' and 'empty' can pad it")
    if mode == "linear_ramp":
        ends = _pairs(kwargs.get("end_values", 0), x.ndim, "end_values", None)
        for a in range(x.ndim):
            x = _ramp(x, a, widths[a], ends[a])
        return x
    if mode in _STATS:
        lengths = _pairs(kwargs.get("stat_length"), x.ndim, "stat_length", int)
        for a in range(x.ndim):
            x = _stat(x, a, widths[a], lengths[a], mode)
        return x
    odd = _reflect_type(kwargs.get("reflect_type", "even"))
    for a in range(x.ndim):
        x = _wrapped(x, a, widths[a]) if mode == "wrap" else _repeated(x, a, widths[a], mode, odd)
    return x


def _pairs(value: Any, ndim: int, name: str, kind: Any) -> list[list[Any]]:
    """NumPy's ``((before, after),) * ndim`` from a scalar, a pair or one pair per axis."""
    if value is None:
        return [[None, None] for _ in range(ndim)]
    try:
        arr = np.broadcast_to(np.asarray(value, dtype=object), (ndim, 2))
    except ValueError:
        raise ValueError(f"tnp.pad: {name} {value!r} does not give a (before, after) pair for each of "
                         f"the {ndim} axes") from None
    if kind is int:
        if not all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in arr.flat):
            raise TypeError(f"tnp.pad: {name} must hold integers, got {value!r}")
        return [[int(v) for v in row] for row in arr]
    return [list(row) for row in arr]


def _reflect_type(reflect_type: Any) -> bool:
    if reflect_type not in ("even", "odd"):
        raise ValueError(f"tnp.pad: reflect_type must be 'even' or 'odd', got {reflect_type!r}")
    return reflect_type == "odd"


def _constant(x: Tracer, widths: list[list[int]], constant_values: Any) -> Any:
    if np.ndim(constant_values) != 0 and not isinstance(constant_values, Tracer):
        values = np.broadcast_to(np.asarray(constant_values), (x.ndim, 2))
        for a in range(x.ndim):  # one axis and side at a time, each with its own value
            for side in (0, 1):
                w = [[0, 0] for _ in range(x.ndim)]
                w[a][side] = widths[a][side]
                x = _constant(x, w, values[a][side].item())
        return x
    value = _prep(x.trace, constant_values, x.aval.dtype)
    if value.ndim:
        raise ValueError("tnp.pad: a traced constant_values must be a scalar")
    return x.trace.emit("pad", [x, value], {"low": tuple(w[0] for w in widths),
                                            "high": tuple(w[1] for w in widths),
                                            "interior": (0,) * x.ndim})


def _take(x: Tracer, a: int, start: int, stop: int) -> Tracer:
    idx = [slice(None)] * x.ndim
    idx[a] = slice(start, stop)
    return x[tuple(idx)]


def _joined(x: Tracer, a: int, low: Any, high: Any) -> Tracer:
    return concatenate([p for p in (low, x, high) if p is not None], axis=a)


def _as_dtype(v: Tracer, dtype: str) -> Tracer:
    """A float statistic or ramp in the array's dtype: NumPy rounds to integers (ramps:
    ``linspace``'s floor) and casts."""
    return v if v.aval.dtype == dtype else astype(v, dtype)


def _wrapped(x: Tracer, a: int, width: list[int]) -> Tracer:
    """wrap along axis ``a``: entry i of the result is entry (i - low) mod n of ``x``, a
    slice of ``x`` repeated."""
    lo, hi = width
    n = x.shape[a]
    if not lo and not hi:
        return x
    before = -(-lo // n)
    copies = before + 1 + -(-hi // n)
    start = before * n - lo
    return _take(concatenate([x] * copies, axis=a), a, start, start + lo + n + hi)


def _repeated(x: Tracer, a: int, width: list[int], mode: str, odd: bool) -> Tracer:
    """edge, reflect, symmetric along axis ``a``: widths beyond the axis repeat the
    pattern over the array padded so far, as NumPy."""
    lo, hi = width
    while lo or hi:
        n = x.shape[a]
        room = {"edge": builtins.max(lo, hi), "symmetric": n}.get(mode, n - 1)
        if room <= 0:
            raise ValueError(f"tnp.pad: cannot {mode}-pad an axis of size {n}")
        take_lo, take_hi = builtins.min(lo, room), builtins.min(hi, room)
        x = _joined(x, a, _edge_block(x, a, take_lo, mode, odd, low=True),
                    _edge_block(x, a, take_hi, mode, odd, low=False))
        lo, hi = lo - take_lo, hi - take_hi
    return x


def _edge_block(x: Tracer, a: int, k: int, mode: str, odd: bool, low: bool) -> Any:
    if k == 0:
        return None
    n = x.shape[a]
    if mode == "edge":
        return repeat(_take(x, a, 0, 1) if low else _take(x, a, n - 1, n), k, axis=a)
    skip = 1 if mode == "reflect" else 0
    block = flip(_take(x, a, skip, skip + k) if low else _take(x, a, n - skip - k, n - skip), a)
    if not odd:
        return block
    edge = _take(x, a, 0, 1) if low else _take(x, a, n - 1, n)  # odd: the block mirrored through the edge
    return subtract(multiply(edge, 2), block)


def _stat(x: Tracer, a: int, width: list[int], length: list[Any], mode: str) -> Tracer:
    """maximum, minimum, mean, median of the first (last) ``length`` entries along ``a``
    (all by default), repeated over the low (high) pad."""
    n = x.shape[a]
    blocks = []
    for side, (w, ln) in enumerate(zip(width, length, strict=True)):
        if w == 0:
            blocks.append(None)
            continue
        ln = n if ln is None else builtins.min(ln, n)
        if ln <= 0:
            raise ValueError(f"tnp.pad: {mode} over stat_length {ln} of an axis of size {n} has no value")
        region = _take(x, a, 0, ln) if side == 0 else _take(x, a, n - ln, n)
        value = _STATS[mode](region, axis=a, keepdims=True)
        if mode in ("mean", "median") and not is_inexact(x.aval.dtype):
            value = round(value)  # NumPy rounds a statistic of integers (half to even)
        blocks.append(repeat(_as_dtype(value, x.aval.dtype), w, axis=a))
    return _joined(x, a, blocks[0], blocks[1])


def _ramp(x: Tracer, a: int, width: list[int], ends: list[Any]) -> Tracer:
    """From each end value to the edge (not reaching it) over the pad, as NumPy's
    ``linspace(end, edge, width, endpoint=False)``."""
    n = x.shape[a]
    dtype = x.aval.dtype
    blocks = []
    for side, (w, end) in enumerate(zip(width, ends, strict=True)):
        if w == 0:
            blocks.append(None)
            continue
        edge = _take(x, a, 0, 1) if side == 0 else _take(x, a, n - 1, n)
        shape = [1] * x.ndim
        shape[a] = w
        frac = (np.arange(w, dtype=np.float64) / w).reshape(shape)
        if side == 1:
            frac = np.flip(frac, a)
        fdtype = dtype if is_inexact(dtype) else "float64"
        start = _prep(x.trace, end, fdtype)
        ramp = add(start, multiply(subtract(_as_dtype(edge, fdtype), start), frac.astype(fdtype)))
        if not is_inexact(dtype):
            ramp = floor(ramp)  # linspace's integer dtype rounds down
        blocks.append(_as_dtype(ramp, dtype))
    return _joined(x, a, blocks[0], blocks[1])


__all__ = ["pad"]
