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


def close_trees(a, b, tol=1e-10):
    """Two pytrees (JAX's flattening) with equal structure, shapes and values to ``tol``."""
    import jax

    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(la) == len(lb)
    for u, v in zip(la, lb, strict=True):
        u, v = np.asarray(u), np.asarray(v)
        assert u.shape == v.shape, (u.shape, v.shape)
        np.testing.assert_allclose(u, v, rtol=tol, atol=tol)
