"""SciPy's API on tidu values, as ``jax.scipy``: ``tidu.scipy.special``,
``tidu.scipy.linalg``, ``tidu.scipy.signal``."""

from tidu.scipy import linalg, signal, special

__all__ = ["linalg", "signal", "special"]
