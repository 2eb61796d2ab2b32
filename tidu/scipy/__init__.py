"""SciPy's API on tidu values, as ``jax.scipy``: ``tidu.scipy.special``."""

from tidu.scipy import special

__all__ = ["special"]
