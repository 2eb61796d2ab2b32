"""Comparisons of tidu's results with an oracle's (JAX, NumPy, SciPy) for the outside
testers' files."""

from __future__ import annotations

import numpy as np


def same(got, want, rtol=1e-9, atol=1e-12, dtype=True):
    """Equal shapes (and dtypes unless ``dtype`` is False); integers and bools exactly,
    floats and complex numbers to ``rtol``/``atol``, nan where the oracle has nan."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if dtype:
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.complex128), want.astype(np.complex128), rtol=rtol, atol=atol,
                                   equal_nan=True)
