"""SciPy's API on tidu values, as ``jax.scipy``: ``tidu.scipy.special``,
``tidu.scipy.linalg``, ``tidu.scipy.signal``, ``tidu.scipy.stats``."""

from tidu.scipy import linalg, signal, special, stats

__all__ = ["linalg", "signal", "special", "stats"]
