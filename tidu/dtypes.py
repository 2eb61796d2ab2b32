"""Dtypes of tidu's transforms, as ``jax.dtypes``.

``float0`` is the dtype of the tangents and cotangents of integer and boolean values,
which have none: JAX's (``np.dtype([('float0', 'V')])``, one equal to the other), a
structured NumPy dtype of zero bytes per element, so an array of it carries a shape and
no values. Build one with ``np.zeros(shape, tidu.dtypes.float0)``: what ``tidu.jvp``
takes as the tangent of an integer argument, and what ``tidu.jvp``, ``tidu.vjp``,
``tidu.linearize`` and ``grad(..., allow_int=True)`` give for integer values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

float0: np.dtype = np.dtype([("float0", "V")])


def is_float0(value: Any) -> bool:
    """Whether ``value`` is an array (NumPy's, or one with a ``dtype``, JAX's) of dtype
    ``float0``."""
    dtype = getattr(value, "dtype", None)
    return isinstance(dtype, np.dtype) and dtype == float0


__all__ = ["float0", "is_float0"]
