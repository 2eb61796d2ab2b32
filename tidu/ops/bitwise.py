"""NumPy kernels of ``rules/bitwise.rules`` that NumPy has no ufunc for: the shifts
(StableHLO's semantics, the shift amount read as unsigned of the operands' width) and
the bitcast."""

from __future__ import annotations

import numpy as np


def shift_right_logical(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x >> y`` with zeros shifted in; 0 where ``y`` (unsigned) is the width or more."""
    x, y = np.asarray(x), np.asarray(y)
    unsigned = np.dtype(f"u{x.dtype.itemsize}")
    return np.right_shift(x.view(unsigned), y.view(unsigned)).view(x.dtype)


def shift_right_arithmetic(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x >> y`` with copies of the sign bit shifted in; all sign bits where ``y``
    (unsigned) is the width or more."""
    x, y = np.asarray(x), np.asarray(y)
    signed = np.dtype(f"i{x.dtype.itemsize}")
    unsigned = np.dtype(f"u{x.dtype.itemsize}")
    shift = np.minimum(y.view(unsigned), 8 * x.dtype.itemsize - 1).astype(signed)
    return np.right_shift(x.view(signed), shift).view(x.dtype)


def bitcast_convert(x: np.ndarray, dtype: str) -> np.ndarray:
    """The bits of ``x`` read as ``dtype`` (of the same width)."""
    x = np.asarray(x)
    return np.ascontiguousarray(x).view(np.dtype(dtype)).reshape(x.shape)  # (ascontiguousarray makes 0-d 1-d)
