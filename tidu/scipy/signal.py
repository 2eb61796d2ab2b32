"""``scipy.signal``'s direct convolutions on tidu values, as ``jax.scipy.signal``:
``convolve``, ``correlate`` (N-D, modes 'full', 'same', 'valid'), ``convolve2d`` and
``correlate2d``. Each is one ``conv`` primitive (tidu.lax.conv_general_dilated, rules/conv.rules)
of the two arrays as one batch and one feature: differentiable in both, batched by
``tidu.vmap``, lowered to ``stablehlo.convolution``. Called with NumPy values, the same
kernel computes the result eagerly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tidu.numpy as tnp
from tidu.convolution import conv_general_dilated
from tidu.numpy import ArrayLike

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d"]

_MODES = ("full", "same", "valid")


def _check(in1: ArrayLike, in2: ArrayLike, mode: str, method: str, what: str) -> tuple[Any, Any]:
    if mode not in _MODES:
        raise ValueError(f"tidu.scipy.signal.{what}: mode must be 'full', 'same' or 'valid', got {mode!r}")
    if method not in ("auto", "direct", "fft"):
        raise ValueError(f"tidu.scipy.signal.{what}: method must be 'auto', 'direct' or 'fft', got {method!r}")
    a, b = tnp.asarray(in1), tnp.asarray(in2)
    if a.ndim != b.ndim:
        raise ValueError(f"tidu.scipy.signal.{what}: in1 and in2 must have the same number of dimensions, "
                         f"got {a.ndim} and {b.ndim}")
    if a.ndim == 0:
        raise ValueError(f"tidu.scipy.signal.{what}: in1 and in2 must have at least one dimension")
    if 0 in tnp.shape(a) or 0 in tnp.shape(b):
        raise ValueError(f"tidu.scipy.signal.{what}: in1 and in2 must not be empty")
    dtype = tnp.result_type(a, b)
    if not np.issubdtype(np.dtype(dtype), np.inexact):
        dtype = "float64" if dtype != "bool" else "float32"
    return (a if a.dtype == dtype else tnp.astype(a, dtype)), (b if b.dtype == dtype else tnp.astype(b, dtype))


def _correlation(a: Any, window: Any, mode: str, what: str, late: bool = False) -> Any:
    """The correlation sum_k a[y + k - low] window[k] over the outputs that ``mode`` keeps of
    the full one (window fixed: already flipped and conjugated as the caller needs); 'same'
    starts (k - 1) // 2 into the full result, k // 2 when ``late`` (scipy's correlate2d)."""
    sa, sw = tnp.shape(a), tnp.shape(window)
    if mode == "full":
        pads = [(k - 1, k - 1) for k in sw]
    elif mode == "same":  # scipy's centred slice of the full result, in1's shape
        pads = [(k - 1 - k // 2, k // 2) if late else (k - 1 - (k - 1) // 2, (k - 1) // 2) for k in sw]
    else:
        if not (all(n >= k for n, k in zip(sa, sw, strict=True)) or all(k >= n for n, k in zip(sa, sw, strict=True))):
            raise ValueError(f"tidu.scipy.signal.{what}: for 'valid' mode, one of in1 and in2 must be at least as "
                             f"large as the other in every dimension, got shapes {sa} and {sw}")
        pads = [(max(k - n, 0), max(k - n, 0)) for n, k in zip(sa, sw, strict=True)]
    lhs = tnp.reshape(a, (1, 1, *sa))
    rhs = tnp.reshape(window, (1, 1, *sw))
    out = conv_general_dilated(lhs, rhs, (1,) * len(sa), pads)
    return tnp.reshape(out, tnp.shape(out)[2:])


def convolve(in1: ArrayLike, in2: ArrayLike, mode: str = "full", method: str = "auto",
             precision: Any = None) -> Any:
    """``scipy.signal.convolve`` (``jax.scipy.signal.convolve``): the N-D convolution of two
    arrays of one rank; 'same' has in1's shape (centred in the full result), 'valid' needs
    one array at least as large as the other along every axis. Every ``method`` computes
    directly; ``precision`` is accepted and ignored."""
    a, b = _check(in1, in2, mode, method, "convolve")
    return _correlation(a, tnp.flip(b), mode, "convolve")


def correlate(in1: ArrayLike, in2: ArrayLike, mode: str = "full", method: str = "auto",
              precision: Any = None) -> Any:
    """``scipy.signal.correlate``: sum_n in1[n + k] conj(in2[n]) over the lags ``mode`` keeps
    (as ``convolve`` with in2 flipped and conjugated)."""
    a, b = _check(in1, in2, mode, method, "correlate")
    return _correlation(a, tnp.conj(b), mode, "correlate")


def _2d(in1: ArrayLike, in2: ArrayLike, boundary: str, fillvalue: Any, what: str) -> None:
    if tnp.ndim(in1) != 2 or tnp.ndim(in2) != 2:
        raise ValueError(f"tidu.scipy.signal.{what}: in1 and in2 must be 2-D, got {tnp.ndim(in1)}-D and "
                         f"{tnp.ndim(in2)}-D")
    if boundary != "fill" or fillvalue != 0:
        raise NotImplementedError(f"tidu.scipy.signal.{what}: only boundary='fill' with fillvalue=0 is "
                                  f"implemented, got boundary={boundary!r}, fillvalue={fillvalue!r}")


def convolve2d(in1: ArrayLike, in2: ArrayLike, mode: str = "full", boundary: str = "fill", fillvalue: Any = 0,
               precision: Any = None) -> Any:
    """``scipy.signal.convolve2d`` with zero fill at the boundary (as JAX's)."""
    _2d(in1, in2, boundary, fillvalue, "convolve2d")
    return convolve(in1, in2, mode)


def correlate2d(in1: ArrayLike, in2: ArrayLike, mode: str = "full", boundary: str = "fill", fillvalue: Any = 0,
                precision: Any = None) -> Any:
    """``scipy.signal.correlate2d`` with zero fill at the boundary (as JAX's); its 'same'
    is centred as SciPy's correlate2d, one step later than ``correlate``'s for windows of
    even length."""
    _2d(in1, in2, boundary, fillvalue, "correlate2d")
    a, b = _check(in1, in2, mode, "auto", "correlate2d")
    return _correlation(a, tnp.conj(b), mode, "correlate2d", late=True)
