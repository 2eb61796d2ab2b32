"""SciPy's API on tidu values, as ``jax.scipy``: ``tidu.scipy.special``,
``tidu.scipy.linalg``."""

from tidu.scipy import linalg, special

__all__ = ["linalg", "special"]
