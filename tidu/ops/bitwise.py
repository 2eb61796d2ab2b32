"""NumPy kernels of the shifts that NumPy has no ufunc for (``rules/bitwise.rules``):
StableHLO's semantics, the shift amount read as unsigned of the operands' width."""

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
