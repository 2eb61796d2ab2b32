"""tidu.random: counter-based pseudo-random numbers with explicit keys, in JAX's design.

A key is a ``uint32`` array of shape ``(2,)`` (``key(seed)``, ``PRNGKey(seed)``); every
draw is a pure function of its key and its shape, and ``split`` / ``fold_in`` make new
keys. The generator is Threefry-2x32 with 20 rounds (Salmon, Moraes, Dror and Shaw,
"Parallel random numbers: as easy as 1, 2, 3", SC 2011): a keyed bijection of two 32-bit
words, here of a counter. It is written with the uint32 operations of tidu.numpy
(``+``, ``^``, ``<<``, ``>>``, ``|``), so the same code runs on NumPy arrays (an eager
call) and on traced values, whose primitives every back end (NumPy, XLA) computes
exactly: the same key gives the same bits everywhere. Floats are made from the bits
exactly, and the maps after that (``normal``'s ``log``, ``cos`` and ``sqrt``, ``gumbel``'s
logs, ``uniform``'s bounds) are computed with tidu.portable, whose every rounding is the
same on every back end (no fused multiply-add changes a product, no library ``log``
differs): every draw is the same number on NumPy and XLA.

The streams are tidu's own (they do not reproduce ``jax.random``'s numbers): a key
``(k0, k1)`` draws ``n`` words as the two output words of Threefry applied to the
counters ``(0, i)``, ``i < ceil(n / 2)`` (first words, then second words, the first
``n`` kept); ``split(key, num)`` is Threefry of ``(1, i)``, ``i < num``, and
``fold_in(key, data)`` Threefry of ``(2, data)``.

Draws carry no tangent, but they are ordinary values afterwards: ``normal(key) * sigma +
mu`` differentiates in ``sigma`` and ``mu`` (the reparameterization trick), and
``uniform(key, minval=a, maxval=b)`` in ``a`` and ``b``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

import tidu.numpy as tnp
from tidu import portable
from tidu.core.keys import is_float, is_integer
from tidu.trace.tracing import Tracer
from tidu.transforms.custom import custom_jvp

__all__ = ["PRNGKey", "bernoulli", "categorical", "choice", "fold_in", "gumbel", "key", "key_data", "normal",
           "permutation", "randint", "random_bits", "split", "threefry_2x32", "uniform"]

_MASK = 0xFFFFFFFF
# Threefry-2x32's rotation distances (Salmon et al. 2011, table 4; Random123's R_32x2) and
# the key schedule's parity constant (Threefish's C240 for 32-bit words)
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA
_U32 = np.dtype(np.uint32)
# mantissa bits (with the implicit one) of each float dtype: a draw keeps that many bits
_BITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


# --- Threefry-2x32 ------------------------------------------------------------------------


def _rotl(x: Any, r: int) -> Any:
    return (x << r) | (x >> (32 - r))


def threefry_2x32(key: Any, x0: Any, x1: Any) -> tuple[Any, Any]:
    """Threefry-2x32 (20 rounds) of the counter words ``(x0, x1)`` (uint32 arrays of one
    shape, NumPy or traced) under ``key``: two uint32 arrays of that shape."""
    k = _check_key(key, "threefry_2x32")
    k0, k1 = k[0:1], k[1:2]  # 1-D slices: NumPy arrays (never scalars) wrap silently
    ks = (k0, k1, k0 ^ k1 ^ np.uint32(_PARITY))
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for s in range(1, 6):  # 5 x 4 rounds, the key injected after each 4
        for r in _ROTATIONS[(s - 1) % 2]:
            x0 = x0 + x1
            x1 = _rotl(x1, r) ^ x0
        x0 = x0 + ks[s % 3]
        x1 = x1 + ks[(s + 1) % 3] + np.uint32(s)
    return x0, x1


def _counters(hi: int, lo: Any) -> tuple[Any, Any]:
    lo = _as_u32(lo)
    return tnp.zeros_like(lo) + np.uint32(hi), lo


def _as_u32(x: Any) -> Any:
    if isinstance(x, Tracer):
        return tnp.astype(x, _U32)
    return np.asarray(np.asarray(x).astype(np.uint64) & _MASK, dtype=_U32)


# --- keys ----------------------------------------------------------------------------------


def key(seed: Any) -> Any:
    """The key of an integer ``seed`` in [-2**63, 2**64) (a negative one as its 64-bit two's
    complement): ``[seed >> 32, seed & 0xFFFFFFFF]`` as uint32 (the layout of
    ``jax.random.PRNGKey``); a traced integer seed gives a traced key."""
    if isinstance(seed, bool | float | complex):
        raise TypeError(f"tidu.random.key: seed must be an integer, got {type(seed).__name__} {seed!r}")
    if isinstance(seed, int | np.integer):
        if not -(2**63) <= int(seed) < 2**64:  # (masked, it would give the key of another seed)
            raise ValueError(f"tidu.random.key: seed {int(seed)} does not fit in 64 bits; give a seed in "
                             "[-2**63, 2**64)")
        s = int(seed) & 0xFFFFFFFFFFFFFFFF
        return np.array([s >> 32, s & _MASK], dtype=_U32)
    if isinstance(seed, Tracer):
        if seed.shape != () or not is_integer(seed.aval.dtype):
            raise TypeError(f"tidu.random.key: seed must be one integer, got a traced {seed.aval}")
        s = tnp.astype(seed, np.int64)
        return tnp.stack([tnp.astype(s >> 32, _U32), tnp.astype(s & _MASK, _U32)])
    arr = np.asarray(seed)
    if arr.shape != () or not is_integer(arr.dtype.name):
        raise TypeError(f"tidu.random.key: seed must be one integer, got {arr.dtype.name}{list(arr.shape)}")
    return key(int(arr))


PRNGKey = key


def key_data(k: Any) -> Any:
    """The key's uint32 words (keys are their words already)."""
    return _check_key(k, "key_data")


def _check_key(k: Any, what: str) -> Any:
    if isinstance(k, Tracer):
        dtype, shape = k.aval.dtype, k.shape
    else:
        if isinstance(k, int | float | complex | bool):
            raise TypeError(f"tidu.random.{what}: key must be a key (uint32[2], from tidu.random.key(seed)), "
                            f"got the {type(k).__name__} {k!r}")
        try:
            k = np.asarray(k)
        except TypeError:  # a typed JAX key (jax.random.key): no NumPy array of its own
            raise TypeError(f"tidu.random.{what}: key must be a uint32 array of shape (2,) from tidu.random.key; "
                            f"got a typed key {type(k).__name__}: pass jax.random.key_data(key) or use "
                            "jax.random.PRNGKey") from None
        dtype, shape = k.dtype.name, k.shape
    if dtype != "uint32" or shape != (2,):
        raise TypeError(f"tidu.random.{what}: key must be a uint32 array of shape (2,) from tidu.random.key or "
                        f"split, got {dtype}{list(shape)}")
    return k


def split(k: Any, num: int | Sequence[int] = 2) -> Any:
    """``num`` new keys from ``k``: a uint32 array of shape ``(num, 2)``; a tuple ``num``
    (as JAX's) gives an array of keys of that shape, ``(*num, 2)``, the keys of
    ``split(k, prod(num))`` in order."""
    _check_key(k, "split")
    shape = None if isinstance(num, int | np.integer) else _shape(num, "split", "num")
    num = _count(num, "split", "num") if shape is None else math.prod(shape)
    y0, y1 = threefry_2x32(k, *_counters(1, np.arange(num, dtype=_U32)))
    keys = tnp.stack([y0, y1], axis=1)
    return keys if shape is None else tnp.reshape(keys, (*shape, 2))


def fold_in(k: Any, data: Any) -> Any:
    """A new key from ``k`` and an integer ``data`` (its low 32 bits; may be traced)."""
    _check_key(k, "fold_in")
    if isinstance(data, Tracer):
        if data.shape != () or not is_integer(data.aval.dtype):
            raise TypeError(f"tidu.random.fold_in: data must be one integer, got a traced {data.aval}")
        lo = tnp.reshape(data, (1,))
    else:
        arr = np.asarray(data)
        if arr.shape != () or not (is_integer(arr.dtype.name) or isinstance(data, int)) or isinstance(data, bool):
            raise TypeError(f"tidu.random.fold_in: data must be one integer, got {data!r:.60}")
        lo = np.array([int(data) & _MASK], dtype=_U32)
    y0, y1 = threefry_2x32(k, *_counters(2, lo))
    return tnp.concatenate([y0, y1])


# --- bits and floats -------------------------------------------------------------------------


def _count(n: Any, what: str, arg: str) -> int:
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"tidu.random.{what}: {arg} must be an int, got {n!r:.60}") from None
    if n < 0:
        raise ValueError(f"tidu.random.{what}: {arg} must be >= 0, got {n}")
    return n


def _shape(shape: Any, what: str, arg: str = "shape") -> tuple[int, ...]:
    if isinstance(shape, int | np.integer):
        shape = (shape,)
    try:
        out = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"tidu.random.{what}: {arg} must be a tuple of ints, got {shape!r:.60}") from None
    if any(d < 0 for d in out):
        raise ValueError(f"tidu.random.{what}: {arg} {out} has a negative size")
    return out


def _words(k: Any, n: int) -> Any:
    """``n`` uint32 words (a 1-D array) of key ``k``."""
    m = (n + 1) // 2
    y0, y1 = threefry_2x32(k, *_counters(0, np.arange(m, dtype=_U32)))
    words = tnp.concatenate([y0, y1])
    return words[:n] if 2 * m != n else words


def random_bits(k: Any, shape: Sequence[int] = (), bit_width: int = 32) -> Any:
    """Uniformly random unsigned integers of ``bit_width`` bits (8, 16, 32 or 64)."""
    _check_key(k, "random_bits")
    shape = _shape(shape, "random_bits")
    if bit_width not in (8, 16, 32, 64):
        raise ValueError(f"tidu.random.random_bits: bit_width must be 8, 16, 32 or 64, got {bit_width!r}")
    n = math.prod(shape)
    if bit_width == 64:
        w = _words(k, 2 * n)
        hi, lo = tnp.astype(w[:n], np.uint64), tnp.astype(w[n:], np.uint64)
        return tnp.reshape((hi << 32) | lo, shape)
    w = _words(k, n)
    if bit_width < 32:
        w = tnp.astype(w >> (32 - bit_width), f"uint{bit_width}")
    return tnp.reshape(w, shape)


def _float_dtype(dtype: Any, what: str) -> str:
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = str(dtype)
    if not is_float(name):
        raise TypeError(f"tidu.random.{what}: dtype must be a float dtype (float16, bfloat16, float32, float64), "
                        f"got {name}")
    return name


def _unit(k: Any, n: int, dtype: str) -> Any:
    """``n`` floats of ``dtype`` in [0, 1), multiples of 2**-p (p the dtype's mantissa
    bits): integers converted exactly and scaled by a power of two, so every back end
    computes the same values."""
    p = _BITS[dtype]
    if p <= 32:
        ints = _words(k, n) >> (32 - p)
        return tnp.astype(ints, dtype) * np.asarray(2.0 ** -p, dtype)
    w = _words(k, 2 * n)
    hi = tnp.astype(w[:n] >> 5, np.float64)  # 27 bits
    lo = tnp.astype(w[n:] >> 6, np.float64)  # 26 bits
    return (hi * 2.0 ** 26 + lo) * 2.0 ** -53


def uniform(k: Any, shape: Sequence[int] = (), dtype: Any = np.float64, minval: Any = 0.0,
            maxval: Any = 1.0) -> Any:
    """Floats uniform in [minval, maxval) (``maxval`` itself only by rounding), of
    ``shape`` and ``dtype``; ``minval`` and ``maxval`` broadcast to ``shape`` and may be
    traced (the draw is differentiable in them)."""
    _check_key(k, "uniform")
    shape = _shape(shape, "uniform")
    dtype = _float_dtype(dtype, "uniform")
    u = tnp.reshape(_unit(k, math.prod(shape), dtype), shape)
    if _is_number(minval, 0.0) and _is_number(maxval, 1.0):
        return u
    _fits(shape, "uniform", minval=minval, maxval=maxval)
    lo, hi = _cast(minval, dtype), _cast(maxval, dtype)
    out = _affine(tnp.astype(lo, np.float64), tnp.astype(hi, np.float64), tnp.astype(u, np.float64))
    return tnp.maximum(lo, tnp.astype(out, dtype))


@custom_jvp
def _affine(lo: Any, hi: Any, u: Any) -> Any:
    """``lo + u (hi - lo)`` in float64 with an exact product (the same bits on every
    back end; tidu.portable), differentiable in ``lo`` and ``hi``; where finite bounds are
    so far apart that ``hi - lo`` overflows, ``lo (1 - u) + hi u``, which cannot (it was
    nan: ``uniform(k, s, minval=-1e308, maxval=1e308)``)."""
    with np.errstate(over="ignore", invalid="ignore"):  # (eagerly: the branch not taken may be inf or nan)
        span = hi - lo
        wide = tnp.isinf(span) & tnp.isfinite(lo) & tnp.isfinite(hi)
        return tnp.where(wide, portable.mul(1.0 - u, lo) + portable.mul(u, hi), lo + portable.mul(u, span))


@_affine.defjvp
def _affine_jvp(primals: tuple[Any, Any, Any], tangents: tuple[Any, Any, Any]) -> tuple[Any, Any]:
    lo, hi, u = primals
    d_lo, d_hi, _ = tangents
    return _affine(lo, hi, u), d_lo * (1.0 - u) + d_hi * u


def _broadcasts_to(v_shape: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Whether a value of ``v_shape`` broadcasts to ``shape`` without widening it."""
    try:
        return tnp.broadcast_shapes(v_shape, shape) == shape
    except ValueError:
        return False


def _fits(shape: tuple[int, ...], what: str, hint: str = "", **bounds: Any) -> None:
    """A one-line error where a bound does not broadcast to the draw's ``shape`` (the
    result has ``shape``, as JAX's: a wider bound would widen it); ``hint`` says how to
    fix it (by default: reshape the bound)."""
    for name, v in bounds.items():
        v_shape = tuple(v.shape) if isinstance(v, Tracer) else np.shape(v)
        if not _broadcasts_to(v_shape, shape):
            raise ValueError(f"tidu.random.{what}: {name} of shape {v_shape} does not broadcast to shape {shape}; "
                             f"{hint or f'give {name} a shape that broadcasts to it'}")


def _is_number(v: Any, x: float) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v == x


def _cast(v: Any, dtype: str) -> Any:
    if isinstance(v, Tracer):
        return tnp.astype(v, dtype) if v.aval.dtype != dtype else v
    return np.asarray(v, dtype=dtype)


def _fine(dtype: str) -> str:
    """The dtype whose uniform draws feed ``normal`` and ``gumbel`` of ``dtype``: float32
    for the half-precision dtypes, whose 8 or 11 bits of uniform left the tails out
    (a bfloat16 normal no further than 3.3 from 0, a Gumbel's mean off by 0.02); the
    result is rounded to ``dtype`` once."""
    return "float32" if _BITS[dtype] < _BITS["float32"] else dtype


def normal(k: Any, shape: Sequence[int] = (), dtype: Any = np.float64) -> Any:
    """Standard normal floats (Box-Muller: ``sqrt(-2 log(1 - u)) cos(2 pi v)`` of two
    uniform draws of ``dtype``'s precision (float32's for float16 and bfloat16), computed
    in float64 with tidu.portable's ``log`` and ``cos`` and rounded to ``dtype``)."""
    _check_key(k, "normal")
    shape = _shape(shape, "normal")
    dtype = _float_dtype(dtype, "normal")
    n = math.prod(shape)
    u = tnp.astype(_unit(k, 2 * n, _fine(dtype)), np.float64)
    radius = tnp.sqrt(-2.0 * portable.log(1.0 - u[:n]))  # 1 - u is exact and positive
    z = radius * portable.cos_2pi(u[n:])
    return tnp.reshape(tnp.astype(z, dtype), shape)


def gumbel(k: Any, shape: Sequence[int] = (), dtype: Any = np.float64) -> Any:
    """Standard Gumbel floats, ``-log(-log(u))`` with u uniform in (0, 1)."""
    _check_key(k, "gumbel")
    shape = _shape(shape, "gumbel")
    dtype = _float_dtype(dtype, "gumbel")
    fine = _fine(dtype)
    u = tnp.astype(_unit(k, math.prod(shape), fine), np.float64)
    u = tnp.maximum(u, 2.0 ** -_BITS[fine] / 2)  # u = 0 draws half a step instead
    return tnp.reshape(tnp.astype(-portable.log(-portable.log(u)), dtype), shape)


def bernoulli(k: Any, p: Any = 0.5, shape: Sequence[int] | None = None) -> Any:
    """Bools, true with probability ``p`` (broadcast to ``shape``; ``p``'s shape by default)."""
    _check_key(k, "bernoulli")
    p_shape = tuple(p.shape) if isinstance(p, Tracer) else np.shape(p)
    shape = p_shape if shape is None else _shape(shape, "bernoulli")
    _fits(shape, "bernoulli", "give a shape that p's broadcasts to, or leave shape out (p's shape)", p=p)
    return tnp.less(uniform(k, shape), p)


def categorical(k: Any, logits: Any, axis: int = -1, shape: Sequence[int] | None = None) -> Any:
    """Category indices (int64) drawn with probabilities ``softmax(logits)`` along
    ``axis`` (the Gumbel-max method); ``shape`` is the result's (the batch shape of
    ``logits`` by default, which must broadcast to it)."""
    _check_key(k, "categorical")
    lg = logits if isinstance(logits, Tracer) else np.asarray(logits)
    if not isinstance(lg, Tracer) and not is_float(lg.dtype.name):
        lg = lg.astype(np.float64)  # (a float dtype is kept, as traced: the noise has its precision)
    if lg.ndim == 0:
        raise ValueError("tidu.random.categorical: logits must have at least one axis (the categories)")
    ax = axis % lg.ndim if -lg.ndim <= axis < lg.ndim else None
    if ax is None:
        raise ValueError(f"tidu.random.categorical: axis {axis} is out of bounds for logits of rank {lg.ndim}")
    if lg.shape[ax] == 0:
        raise ValueError(f"tidu.random.categorical: logits of shape {tuple(lg.shape)} have no categories along "
                         f"axis {axis}; give at least one")
    lg = tnp.moveaxis(lg, ax, -1)
    batch = tuple(lg.shape[:-1])
    shape = batch if shape is None else _shape(shape, "categorical")
    if not _broadcasts_to(batch, shape):
        raise ValueError(f"tidu.random.categorical: shape {shape} does not hold the batch shape {batch} of logits "
                         "(logits' shape without axis must broadcast to it)")
    dtype = lg.aval.dtype if isinstance(lg, Tracer) else lg.dtype.name
    noise = gumbel(k, (*shape, lg.shape[-1]), dtype if is_float(dtype) else np.float64)
    return tnp.argmax(lg + noise, axis=-1)


def randint(k: Any, shape: Sequence[int], minval: Any, maxval: Any, dtype: Any = np.int64) -> Any:
    """Integers uniform in [minval, maxval) (broadcast to ``shape``): ``minval +
    floor(u (maxval - minval))`` with a 53-bit uniform u, so spans up to 2**53 (the
    bias is at most span / 2**53). As JAX's, the bounds are clipped to the dtype's range
    first, ``maxval`` to one past its largest value (``randint(k, s, -5, 300, uint8)``
    draws from 0 to 255), float bounds are truncated to integers (toward 0), and
    ``maxval <= minval`` gives ``minval``; ``dtype=None`` is int64."""
    _check_key(k, "randint")
    shape = _shape(shape, "randint")
    name = np.dtype(np.int64 if dtype is None else dtype).name
    if not is_integer(name):
        raise TypeError(f"tidu.random.randint: dtype must be an integer dtype, got {name}")
    _fits(shape, "randint", minval=minval, maxval=maxval)
    info = np.iinfo(name)
    top = float(info.max)  # the largest float64 that converts to the dtype: below 2**63 for int64
    top = top if int(top) <= info.max else float(np.nextafter(top, 0.0))
    # float bounds are truncated to integers first, as JAX's (a bound of 2.9 drew 1 twice as
    # often as 0: floor(u * 2.9) in 0, 1, 1.9)
    lo = tnp.clip(tnp.trunc(_cast(minval, "float64")), float(info.min), top)
    hi = tnp.clip(tnp.trunc(_cast(maxval, "float64")), float(info.min), float(info.max) + 1.0)
    span = tnp.maximum(hi - lo, 1.0)
    u = tnp.reshape(_unit(k, math.prod(shape), "float64"), shape)
    r = tnp.minimum(tnp.floor(u * span), span - 1.0)
    return tnp.astype(tnp.minimum(lo + r, top), name)


def _concrete_int(x: Any) -> int | None:
    """``x`` as a Python int where it is one integer known now (an int, a NumPy integer or
    a 0-d integer array), else None."""
    if isinstance(x, bool | Tracer):
        return None
    if isinstance(x, int | np.integer):
        return int(x)
    if isinstance(x, np.ndarray) and x.ndim == 0 and is_integer(x.dtype.name):
        return int(x)
    return None


def _array_axis(values: Any, axis: Any, what: str) -> int:
    try:
        ax = operator.index(axis)
    except TypeError:
        raise TypeError(f"tidu.random.{what}: axis must be an int, got {axis!r:.60}") from None
    if not -values.ndim <= ax < values.ndim:
        raise ValueError(f"tidu.random.{what}: axis {ax} is out of bounds for an array of rank {values.ndim}")
    return ax % values.ndim


def permutation(k: Any, x: Any, axis: int = 0, independent: bool = False) -> Any:
    """A random permutation of ``range(x)`` (an int) or of ``x`` along ``axis``; with
    ``independent=True`` every slice along ``axis`` is shuffled by a permutation of its
    own (as JAX's)."""
    _check_key(k, "permutation")
    n = _concrete_int(x)
    if n is not None:
        if n < 0:
            raise ValueError(f"tidu.random.permutation: x = {n} is a negative length; give an int >= 0 or an array")
        return choice(k, n, (n,), replace=False)
    values = x if isinstance(x, Tracer) else (np.asarray(x) if hasattr(x, "shape") else None)
    if values is None or values.ndim == 0:
        raise TypeError(f"tidu.random.permutation: x must be an int or an array with an axis, got {x!r:.60}")
    ax = _array_axis(values, axis, "permutation")
    if not independent:
        return choice(k, values, (values.shape[ax],), replace=False, axis=ax)
    order = tnp.argsort(gumbel(k, tuple(values.shape)), axis=ax)
    return tnp.take_along_axis(values, order, axis=ax)


def choice(k: Any, a: Any, shape: Sequence[int] = (), replace: bool = True, p: Any = None,
           axis: int = 0) -> Any:
    """Elements of ``a`` (an array's slices along ``axis``, or ``range(a)`` for an int) drawn
    with probabilities proportional to the weights ``p`` (uniform by default; a ``p`` known
    now must be finite, non-negative and not all 0), with or without replacement (then by
    the Gumbel top-k method: the first ``prod(shape)`` of a Gumbel-perturbed order). For
    an array the result has shape ``a.shape[:axis] + shape + a.shape[axis + 1:]``."""
    _check_key(k, "choice")
    shape = _shape(shape, "choice")
    ax = 0
    if (n_int := _concrete_int(a)) is not None:
        n, values = n_int, None
    else:
        values = a if isinstance(a, Tracer) else np.asarray(a)
        if values.ndim == 0:
            raise ValueError("tidu.random.choice: a must be an int or an array with at least one axis")
        ax = _array_axis(values, axis, "choice")
        n = values.shape[ax]
    size = math.prod(shape)
    if n <= 0 and size:
        raise ValueError(f"tidu.random.choice: a has no elements to choose from (n = {n}) for a draw of shape "
                         f"{shape}; give a non-empty a or an empty shape")
    if p is not None and not isinstance(p, Tracer):
        p = np.asarray(p)
        p = p if is_float(p.dtype.name) else p.astype(np.float64)  # a float dtype is kept, as traced
    if p is not None and tuple(np.shape(p) if not isinstance(p, Tracer) else p.shape) != (n,):
        raise ValueError(f"tidu.random.choice: p must have shape ({n},), got {np.shape(p)}")
    if p is not None and not isinstance(p, Tracer) and size:
        # (a negative or nan weight was drawn first, silently: log gives nan, the largest in argmax)
        w = p.astype(np.float64)
        if not (np.isfinite(w).all() and (w >= 0).all() and w.sum() > 0):
            raise ValueError(f"tidu.random.choice: p must be finite, non-negative weights, not all 0, got {p!r:.80}")
    logp = np.zeros(n) if p is None else tnp.log(p)
    if not size:  # nothing drawn (an empty a included), as JAX's: the empty result
        idx = tnp.zeros(shape, dtype=np.int64)
    elif replace:
        idx = categorical(k, logp, shape=shape)
    else:
        if size > n:
            raise ValueError(f"tidu.random.choice: cannot take {size} elements of {n} without replacement; "
                             "use replace=True or a smaller shape")
        order = tnp.argsort(-(logp + gumbel(k, (n,))))
        idx = tnp.reshape(order[:size], shape)
    if values is None:
        return idx
    flat = tnp.reshape(idx, (size,))
    picked = tnp.take(values, flat, axis=ax)
    return tnp.reshape(picked, tuple(values.shape[:ax]) + shape + tuple(values.shape[ax + 1:]))
