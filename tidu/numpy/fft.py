"""tidu.numpy.fft: the discrete Fourier transforms of ``jax.numpy.fft`` (and ``numpy.fft``)
for tidu values (``tnp.fft.fft``, ``tnp.fft.rfftn``, ...).

Four primitives carry rules of their own (``rules/fft.rules``): ``fft``, ``ifft``, ``rfft``
and ``irfft``, each over 1 to 3 trailing axes with numpy's ``norm``. Everything else is
composed here from them and the other primitives: the lengths ``n``/``s`` (zero padding or
cropping), the axes (moved to the end and back), more than three axes (several
transforms; the norm splits over them), ``hfft``/``ihfft`` (conjugates and the dual norm),
the frequencies and the shifts. Called with NumPy values (no tracer), the functions return
NumPy's results; traced, the same values (docs/numpy.md#fft).

Arguments are checked the same way in both cases: ``n`` and ``s`` are positive integers,
``axis``/``axes`` in range and not repeated, ``norm`` one of "backward", "ortho", "forward"
or None; anything else is a one-line error naming the argument.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from tidu.core.keys import is_complex
from tidu.numpy._core import ArrayLike, _prep, _shape, _trace_of, numpy_fallback
from tidu.numpy._dtypes import _dtype_name, _info
from tidu.numpy._elementwise import conj, divide, multiply
from tidu.numpy._shapes import roll
from tidu.trace.tracing import Tracer

__all__ = [
    "fft", "fft2", "fftfreq", "fftn", "fftshift", "hfft", "ifft", "ifft2", "ifftn", "ifftshift", "ihfft", "irfft",
    "irfft2", "irfftn", "rfft", "rfft2", "rfftfreq", "rfftn",
]

_NORMS = ("backward", "ortho", "forward")
_AT_ONCE = 3  # stablehlo.fft (and so each primitive) transforms at most three axes
_SWAPPED = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


# --- arguments ----------------------------------------------------------------------------


def _norm(norm: str | None, what: str) -> str:
    if norm is None:
        return "backward"
    if not isinstance(norm, str) or norm not in _NORMS:
        raise ValueError(f'tnp.fft.{what}: norm must be "backward", "ortho", "forward" or None, got {norm!r}')
    return norm


def _length(n: Any, what: str, name: str = "n") -> int:
    """A transform length: a positive integer."""
    try:
        value = operator.index(n)
    except TypeError:
        raise TypeError(f"tnp.fft.{what}: {name} must be a positive integer, got {n!r}") from None
    if isinstance(n, bool | np.bool_) or value < 1:
        raise ValueError(f"tnp.fft.{what}: {name} must be a positive integer, got {n!r}")
    return value


def _axis(axis: Any, ndim: int, what: str, name: str = "axis") -> int:
    try:
        value = operator.index(axis)
    except TypeError:
        raise TypeError(f"tnp.fft.{what}: {name} must be an integer, got {axis!r}") from None
    if not -ndim <= value < ndim:
        raise ValueError(f"tnp.fft.{what}: {name} {axis} is out of bounds for an array of rank {ndim}")
    return value % ndim


def _plan(shape: tuple[int, ...], s: Sequence[int] | None, axes: Sequence[int] | None, what: str,
          half_last: bool = False) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(axes, lengths) as numpy.fft reads ``s`` and ``axes``: every axis when both are None,
    the last len(s) axes when only ``s`` is given; the lengths are ``s`` or the sizes along
    the axes (``half_last``: the last one 2 (m - 1) for a half spectrum of m entries)."""
    ndim = len(shape)
    if s is not None and (isinstance(s, int | np.integer) or not isinstance(s, Sequence | np.ndarray)):
        raise TypeError(f"tnp.fft.{what}: s must be a sequence of positive integers, got {s!r}")
    if axes is not None and (isinstance(axes, int | np.integer) or not isinstance(axes, Sequence | np.ndarray)):
        raise TypeError(f"tnp.fft.{what}: axes must be a sequence of integers, got {axes!r}")
    if axes is None:
        count = ndim if s is None else len(s)
        if count > ndim:
            raise ValueError(f"tnp.fft.{what}: s has {count} lengths but the array has rank {ndim}")
        axes = range(ndim - count, ndim)
    out_axes = tuple(_axis(a, ndim, what, "axes entry") for a in axes)
    if len(set(out_axes)) != len(out_axes):
        raise ValueError(f"tnp.fft.{what}: axes {tuple(axes)} repeats an axis")
    if s is None:
        lengths = [shape[a] for a in out_axes]
        if half_last and out_axes:
            lengths[-1] = 2 * (lengths[-1] - 1)
            if lengths[-1] < 1:
                raise ValueError(f"tnp.fft.{what}: a half spectrum of 1 entry along axis {out_axes[-1]} gives no "
                                 "default output length; give n (or s)")
        return out_axes, tuple(lengths)
    if len(s) != len(out_axes):
        raise ValueError(f"tnp.fft.{what}: s has {len(s)} lengths for {len(out_axes)} axes; give one per axis")
    return out_axes, tuple(_length(n, what, "s entry") for n in s)


def _one(n: int | None, axis: int, ndim: int, what: str) -> tuple[tuple[int, ...] | None, tuple[int, ...]]:
    """(s, axes) of a one-axis transform, checked."""
    if ndim < 1:
        raise ValueError(f"tnp.fft.{what}: expected an array of rank >= 1, got a scalar")
    return (None if n is None else (_length(n, what),)), (_axis(axis, ndim, what),)


def _need_axes(axes: Sequence[int], what: str) -> None:
    if not axes:
        raise ValueError(f"tnp.fft.{what}: needs at least one axis to transform, got axes=()")


# --- traced: resizing, moving axes, the primitives ------------------------------------------


def _complex_name(dtype: str) -> str:
    """The complex dtype a transform of ``dtype`` values computes in (NumPy's: float16
    in single precision, integers and bools in double)."""
    return "complex64" if dtype in ("float16", "float32", "complex64") else "complex128"


def _complex_of(a: ArrayLike) -> Tracer:
    trace = _trace_of([a])
    assert trace is not None
    return _prep(trace, a, _complex_name(_info(a)[0]))


def _real_of(a: ArrayLike, what: str) -> Tracer:
    trace = _trace_of([a])
    assert trace is not None
    dtype = _info(a)[0]
    if is_complex(dtype):
        raise TypeError(f"tnp.fft.{what}: a must be real, got {dtype} values (use fft for complex values)")
    return _prep(trace, a, "float32" if dtype in ("float16", "float32") else "float64")


def _resize(x: Tracer, axis: int, n: int) -> Tracer:
    """``x`` cropped to its first ``n`` entries along ``axis``, or zero-padded at the end."""
    size = x.shape[axis]
    if n == size:
        return x
    rank = x.ndim
    if n < size:
        limit = tuple(n if i == axis else d for i, d in enumerate(x.shape))
        return x.trace.emit("slice", [x], {"start": (0,) * rank, "limit": limit, "strides": (1,) * rank})
    zero = _prep(x.trace, np.zeros((), x.aval.dtype), x.aval.dtype)
    high = tuple(n - size if i == axis else 0 for i in range(rank))
    return x.trace.emit("pad", [x, zero], {"low": (0,) * rank, "high": high, "interior": (0,) * rank})


def _transform(x: Tracer, op: str, axes: tuple[int, ...], lengths: tuple[int, ...], norm: str) -> Tracer:
    """The primitive ``op`` over ``axes`` (at most three; the last one is rfft's halved axis):
    moved to the end in that order, transformed, moved back."""
    rank = x.ndim
    perm = tuple(i for i in range(rank) if i not in axes) + axes
    moved = perm != tuple(range(rank))
    y = x.trace.emit("transpose", [x], {"perm": perm}) if moved else x
    y = y.trace.emit(op, [y], {"fft_lengths": lengths, "norm": norm})
    if not moved:
        return y
    inverse = tuple(perm.index(i) for i in range(rank))
    return y.trace.emit("transpose", [y], {"perm": inverse})


def _groups(axes: tuple[int, ...]) -> list[slice]:
    """Slices of ``axes`` into runs of at most three, the last run ending at the end."""
    out, stop = [], len(axes)
    while stop > 0:
        out.append(slice(max(0, stop - _AT_ONCE), stop))
        stop -= _AT_ONCE
    return out[::-1]


def _c2c(a: ArrayLike, axes: tuple[int, ...], lengths: tuple[int, ...], norm: str, op: str) -> Tracer:
    x = _complex_of(a)
    for axis, n in zip(axes, lengths, strict=True):
        x = _resize(x, axis, n)
    for part in _groups(axes):
        x = _transform(x, op, axes[part], lengths[part], norm)
    return x


def _r2c(a: ArrayLike, axes: tuple[int, ...], lengths: tuple[int, ...], norm: str, what: str) -> Tracer:
    x = _real_of(a, what)
    for axis, n in zip(axes, lengths, strict=True):
        x = _resize(x, axis, n)
    parts = _groups(axes)
    x = _transform(x, "rfft", axes[parts[-1]], lengths[parts[-1]], norm)  # the real axes first
    for part in parts[:-1]:
        x = _transform(x, "fft", axes[part], lengths[part], norm)
    return x


def _c2r(a: ArrayLike, axes: tuple[int, ...], lengths: tuple[int, ...], norm: str,
         conjugate: bool = False) -> Tracer:
    x = _complex_of(a)
    if conjugate:
        x = conj(x)
    half = lengths[:-1] + (lengths[-1] // 2 + 1,)
    for axis, n in zip(axes, half, strict=True):
        x = _resize(x, axis, n)
    parts = _groups(axes)
    for part in parts[:-1]:
        x = _transform(x, "ifft", axes[part], lengths[part], norm)
    out = _transform(x, "irfft", axes[parts[-1]], lengths[parts[-1]], norm)  # the real result last
    if _info(a)[0] == "float16" and len(axes) == 1:  # NumPy's real result of float16 values over one axis
        out = out.trace.emit("convert", [out], {"dtype": "float16"})
    return out


# --- NumPy for concrete operands: the same checks, then numpy.fft ---------------------------


def _np_c2c(inverse: bool, what: str) -> Any:
    def call(a: Any, s: Any = None, axes: Any = None, norm: str | None = None) -> Any:
        # complex first, as traced (NumPy's transform of real float32 values rounds otherwise)
        arr = np.asarray(a)
        arr = arr.astype(_complex_name(arr.dtype.name), copy=False)
        ax, lengths = _plan(arr.shape, s, axes, what)
        fn = np.fft.ifftn if inverse else np.fft.fftn
        return fn(arr, s=lengths, axes=ax, norm=_norm(norm, what)) if ax else arr
    return call


def _np_r2c(a: Any, s: Any, axes: Any, norm: Any, what: str) -> Any:
    arr = np.asarray(a)
    if np.iscomplexobj(arr):
        raise TypeError(f"tnp.fft.{what}: a must be real, got {arr.dtype} values (use fft for complex values)")
    ax, lengths = _plan(arr.shape, s, axes, what)
    _need_axes(ax, what)
    if arr.dtype == np.float16:  # in single precision first, as traced
        arr = arr.astype(np.float32)
    return np.fft.rfftn(arr, s=lengths, axes=ax, norm=_norm(norm, what))


def _np_c2r(a: Any, s: Any, axes: Any, norm: Any, what: str, conjugate: bool = False) -> Any:
    arr = np.asarray(a)
    source = arr.dtype
    arr = arr.astype(_complex_name(arr.dtype.name), copy=False)  # complex first, as traced
    if conjugate:
        arr = np.conjugate(arr)
    ax, lengths = _plan(arr.shape, s, axes, what, half_last=True)
    _need_axes(ax, what)
    out = np.fft.irfftn(arr, s=lengths, axes=ax, norm=_norm(norm, what))
    return out.astype(np.float16) if source == np.float16 and len(ax) == 1 else out


# --- one axis ---------------------------------------------------------------------------------


def _np_fft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    s, axes = _one(n, axis, np.ndim(a), "fft")
    return _np_c2c(False, "fft")(a, s, axes, norm)


@numpy_fallback(_np_fft)
def fft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The discrete Fourier transform along ``axis``, ``n`` points (cropped or zero-padded)."""
    s, axes = _one(n, axis, len(_shape(a)), "fft")
    ax, lengths = _plan(_shape(a), s, axes, "fft")
    return _c2c(a, ax, lengths, _norm(norm, "fft"), "fft")


def _np_ifft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    s, axes = _one(n, axis, np.ndim(a), "ifft")
    return _np_c2c(True, "ifft")(a, s, axes, norm)


@numpy_fallback(_np_ifft)
def ifft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The inverse discrete Fourier transform along ``axis``."""
    s, axes = _one(n, axis, len(_shape(a)), "ifft")
    ax, lengths = _plan(_shape(a), s, axes, "ifft")
    return _c2c(a, ax, lengths, _norm(norm, "ifft"), "ifft")


def _np_rfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    s, axes = _one(n, axis, np.ndim(a), "rfft")
    return _np_r2c(a, s, axes, norm, "rfft")


@numpy_fallback(_np_rfft)
def rfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The transform of real values along ``axis``: its ``n // 2 + 1`` non-negative frequencies."""
    s, axes = _one(n, axis, len(_shape(a)), "rfft")
    ax, lengths = _plan(_shape(a), s, axes, "rfft")
    return _r2c(a, ax, lengths, _norm(norm, "rfft"), "rfft")


def _np_irfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    s, axes = _one(n, axis, np.ndim(a), "irfft")
    return _np_c2r(a, s, axes, norm, "irfft")


@numpy_fallback(_np_irfft)
def irfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The inverse of ``rfft``: ``n`` real values (default ``2 (m - 1)``) from a half spectrum
    of m entries, read as Hermitian."""
    s, axes = _one(n, axis, len(_shape(a)), "irfft")
    ax, lengths = _plan(_shape(a), s, axes, "irfft", half_last=True)
    return _c2r(a, ax, lengths, _norm(norm, "irfft"))


def _np_hfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    s, axes = _one(n, axis, np.ndim(a), "hfft")
    return _np_c2r(a, s, axes, _SWAPPED[_norm(norm, "hfft")], "hfft", conjugate=True)


@numpy_fallback(_np_hfft)
def hfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The transform of a Hermitian signal given by its first half: ``n`` real values
    (default ``2 (m - 1)``); ``irfft`` of the conjugate with the dual norm."""
    s, axes = _one(n, axis, len(_shape(a)), "hfft")
    ax, lengths = _plan(_shape(a), s, axes, "hfft", half_last=True)
    return _c2r(a, ax, lengths, _SWAPPED[_norm(norm, "hfft")], conjugate=True)


def _np_ihfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    s, axes = _one(n, axis, np.ndim(a), "ihfft")
    return np.conjugate(_np_r2c(a, s, axes, _SWAPPED[_norm(norm, "ihfft")], "ihfft"))


@numpy_fallback(_np_ihfft)
def ihfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The inverse of ``hfft``: the first ``n // 2 + 1`` entries of the inverse transform of
    real values."""
    s, axes = _one(n, axis, len(_shape(a)), "ihfft")
    ax, lengths = _plan(_shape(a), s, axes, "ihfft")
    return conj(_r2c(a, ax, lengths, _SWAPPED[_norm(norm, "ihfft")], "ihfft"))


# --- several axes -----------------------------------------------------------------------------


def _np_fftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
             norm: str | None = None) -> Any:
    return _np_c2c(False, "fftn")(a, s, axes, norm)


@numpy_fallback(_np_fftn)
def fftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: str | None = None) -> Any:
    """The discrete Fourier transform over ``axes`` (every axis by default; the last len(s)
    when only ``s`` is given), with lengths ``s``."""
    ax, lengths = _plan(_shape(a), s, axes, "fftn")
    return _c2c(a, ax, lengths, _norm(norm, "fftn"), "fft")


def _np_ifftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
              norm: str | None = None) -> Any:
    return _np_c2c(True, "ifftn")(a, s, axes, norm)


@numpy_fallback(_np_ifftn)
def ifftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Any:
    """The inverse discrete Fourier transform over ``axes``."""
    ax, lengths = _plan(_shape(a), s, axes, "ifftn")
    return _c2c(a, ax, lengths, _norm(norm, "ifftn"), "ifft")


def _np_rfftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
              norm: str | None = None) -> Any:
    return _np_r2c(a, s, axes, norm, "rfftn")


@numpy_fallback(_np_rfftn)
def rfftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Any:
    """The transform of real values over ``axes``, the last of them cut to its non-negative
    frequencies."""
    ax, lengths = _plan(_shape(a), s, axes, "rfftn")
    _need_axes(ax, "rfftn")
    return _r2c(a, ax, lengths, _norm(norm, "rfftn"), "rfftn")


def _np_irfftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
               norm: str | None = None) -> Any:
    return _np_c2r(a, s, axes, norm, "irfftn")


@numpy_fallback(_np_irfftn)
def irfftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: str | None = None) -> Any:
    """The inverse of ``rfftn``: real values of lengths ``s`` (the last by default
    ``2 (m - 1)``)."""
    ax, lengths = _plan(_shape(a), s, axes, "irfftn", half_last=True)
    _need_axes(ax, "irfftn")
    return _c2r(a, ax, lengths, _norm(norm, "irfftn"))


def _np_fft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    return _np_c2c(False, "fft2")(a, s, axes, norm)


@numpy_fallback(_np_fft2)
def fft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
         norm: str | None = None) -> Any:
    """``fftn`` over the last two axes."""
    ax, lengths = _plan(_shape(a), s, axes, "fft2")
    return _c2c(a, ax, lengths, _norm(norm, "fft2"), "fft")


def _np_ifft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    return _np_c2c(True, "ifft2")(a, s, axes, norm)


@numpy_fallback(_np_ifft2)
def ifft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: str | None = None) -> Any:
    """``ifftn`` over the last two axes."""
    ax, lengths = _plan(_shape(a), s, axes, "ifft2")
    return _c2c(a, ax, lengths, _norm(norm, "ifft2"), "ifft")


def _np_rfft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    return _np_r2c(a, s, axes, norm, "rfft2")


@numpy_fallback(_np_rfft2)
def rfft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: str | None = None) -> Any:
    """``rfftn`` over the last two axes."""
    ax, lengths = _plan(_shape(a), s, axes, "rfft2")
    _need_axes(ax, "rfft2")
    return _r2c(a, ax, lengths, _norm(norm, "rfft2"), "rfft2")


def _np_irfft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
               norm: str | None = None) -> Any:
    return _np_c2r(a, s, axes, norm, "irfft2")


@numpy_fallback(_np_irfft2)
def irfft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
           norm: str | None = None) -> Any:
    """``irfftn`` over the last two axes."""
    ax, lengths = _plan(_shape(a), s, axes, "irfft2", half_last=True)
    _need_axes(ax, "irfft2")
    return _c2r(a, ax, lengths, _norm(norm, "irfft2"))


# --- frequencies and shifts -----------------------------------------------------------------


def _freq_dtype(dtype: Any, what: str) -> str:
    name = "float64" if dtype is None else _dtype_name(dtype)
    if name not in ("float32", "float64"):
        raise TypeError(f"tnp.fft.{what}: dtype must be a float dtype, got {dtype!r}")
    return name


def _frequencies(n: int, half: bool) -> np.ndarray:
    """The integer frequencies 0, 1, ..., then (not ``half``) -(n // 2), ..., -1."""
    ks = np.arange(n // 2 + 1) if half else np.concatenate([np.arange((n - 1) // 2 + 1), np.arange(-(n // 2), 0)])
    return ks.astype(np.float64)


def _freq(n: Any, d: ArrayLike, dtype: Any, half: bool, what: str) -> Any:
    n = _length(n, what)
    out_dtype = _freq_dtype(dtype, what)
    ks = _frequencies(n, half)
    if isinstance(d, Tracer) or _trace_of([d]) is not None:
        trace = _trace_of([d])
        assert trace is not None
        step = divide(1.0, multiply(_prep(trace, d, out_dtype), float(n)))
        return multiply(_prep(trace, ks.astype(out_dtype), out_dtype), step)
    if np.ndim(d) != 0:
        raise ValueError(f"tnp.fft.{what}: d must be a scalar, got shape {np.shape(d)}")
    return (ks * (1.0 / (n * d))).astype(out_dtype)


def _np_fftfreq(n: int, d: Any = 1.0, *, dtype: Any = None) -> Any:
    return _freq(n, d, dtype, False, "fftfreq")


@numpy_fallback(_np_fftfreq, "d")
def fftfreq(n: int, d: ArrayLike = 1.0, *, dtype: Any = None) -> Any:
    """The frequencies of ``fft``'s ``n`` outputs, for sample spacing ``d``: ``[0, 1, ...,
    -(n // 2), ..., -1] / (n d)``."""
    return _freq(n, d, dtype, False, "fftfreq")


def _np_rfftfreq(n: int, d: Any = 1.0, *, dtype: Any = None) -> Any:
    return _freq(n, d, dtype, True, "rfftfreq")


@numpy_fallback(_np_rfftfreq, "d")
def rfftfreq(n: int, d: ArrayLike = 1.0, *, dtype: Any = None) -> Any:
    """The frequencies of ``rfft``'s ``n // 2 + 1`` outputs: ``[0, 1, ..., n // 2] / (n d)``."""
    return _freq(n, d, dtype, True, "rfftfreq")


def _shifts(shape: tuple[int, ...], axes: int | Sequence[int] | None, inverse: bool,
            what: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    ndim = len(shape)
    if axes is None:
        ax = tuple(range(ndim))
    elif isinstance(axes, int | np.integer):
        ax = (_axis(axes, ndim, what, "axes"),)
    else:
        ax = tuple(_axis(a, ndim, what, "axes entry") for a in axes)
    return tuple((-(shape[a] // 2) if inverse else shape[a] // 2) for a in ax), ax


def _np_fftshift(x: Any, axes: int | Sequence[int] | None = None) -> Any:
    arr = np.asarray(x)
    shifts, ax = _shifts(arr.shape, axes, False, "fftshift")
    return np.roll(arr, shifts, ax) if ax else arr


@numpy_fallback(_np_fftshift)
def fftshift(x: ArrayLike, axes: int | Sequence[int] | None = None) -> Any:
    """The zero frequency moved to the center: a roll by ``n // 2`` along ``axes`` (every axis
    by default)."""
    shifts, ax = _shifts(_shape(x), axes, False, "fftshift")
    return roll(x, shifts, ax) if ax else x


def _np_ifftshift(x: Any, axes: int | Sequence[int] | None = None) -> Any:
    arr = np.asarray(x)
    shifts, ax = _shifts(arr.shape, axes, True, "ifftshift")
    return np.roll(arr, shifts, ax) if ax else arr


@numpy_fallback(_np_ifftshift)
def ifftshift(x: ArrayLike, axes: int | Sequence[int] | None = None) -> Any:
    """The inverse of ``fftshift``: a roll by ``-(n // 2)`` along ``axes``."""
    shifts, ax = _shifts(_shape(x), axes, True, "ifftshift")
    return roll(x, shifts, ax) if ax else x
