"""Special functions, as ``jax.scipy.special``: the primitives ``erf`` and ``erfc``
(rules/special.rules) and compositions of ``tidu.numpy`` functions.

Each works on NumPy values (eagerly) and under every transform; values and derivatives
agree with ``jax.scipy.special`` (tests/test_special.py). Where a function is defined
piecewise (``xlogy`` at x = 0, ``entr`` at 0, ``rel_entr`` and ``kl_div`` on the edges of
their domain) the value is SciPy's and the derivative is the one of the branch that
holds there: JAX's custom derivative rules at those points are not reproduced.

Not here: ``gammaln``/``lgamma`` and ``digamma``. Their derivatives form the chain
digamma, trigamma, polygamma(2, x), ... that only a ``polygamma`` primitive closes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import tidu.numpy as tnp
from tidu import nn
from tidu.numpy import op

ArrayLike = Any

# the primitives of rules/special.rules (ints promote to float64, as in tidu.numpy)
_erf = op("erf")
_erfc = op("erfc")

softmax = nn.softmax
log_softmax = nn.log_softmax
logsumexp = nn.logsumexp


def erf(x: ArrayLike) -> Any:
    """The error function, 2/sqrt(pi) times the integral of exp(-t^2) from 0 to x."""
    return _erf(x)


def erfc(x: ArrayLike) -> Any:
    """1 - erf(x), accurate where erf(x) is near 1."""
    return _erfc(x)


def ndtr(x: ArrayLike) -> Any:
    """The standard normal CDF, erfc(-x / sqrt(2)) / 2 (erfc: no cancellation in either tail)."""
    return 0.5 * _erfc(-tnp.asarray(x) / math.sqrt(2))


def expit(x: ArrayLike) -> Any:
    """The logistic sigmoid 1 / (1 + exp(-x)) (``tidu.nn.sigmoid``: no overflow)."""
    return nn.sigmoid(x)


def logit(x: ArrayLike) -> Any:
    """log(x / (1 - x)), the inverse of expit."""
    x = _inexact(x)
    return tnp.log(x / (1 - x))


def xlogy(x: ArrayLike, y: ArrayLike) -> Any:
    """x * log(y), 0 where x = 0 (even where log(y) is -inf or nan)."""
    x, y = _inexact(x), _inexact(y)
    zero = x == 0
    # log of 1 where x = 0: the unused branch stays finite, so its derivative is not nan
    return tnp.where(zero, 0.0, x * tnp.log(tnp.where(zero, 1.0, y)))


def xlog1py(x: ArrayLike, y: ArrayLike) -> Any:
    """x * log1p(y), 0 where x = 0."""
    x, y = _inexact(x), _inexact(y)
    zero = x == 0
    return tnp.where(zero, 0.0, x * tnp.log1p(tnp.where(zero, 0.0, y)))


def entr(x: ArrayLike) -> Any:
    """-x log(x) for x > 0, 0 at 0, -inf below."""
    x = _inexact(x)
    positive = x > 0
    inside = -x * tnp.log(tnp.where(positive, x, 1.0))
    return tnp.where(positive, inside, tnp.where(x == 0, tnp.zeros_like(x), tnp.full_like(x, -np.inf)))


def rel_entr(x: ArrayLike, y: ArrayLike) -> Any:
    """x log(x / y) for x, y > 0; 0 where x = 0 and y >= 0; inf elsewhere."""
    x, y = _inexact(x), _inexact(y)
    both, safe_x, safe_y = _both_positive(x, y)
    inside = safe_x * tnp.log(safe_x / safe_y)
    edge = tnp.where((x == 0) & (y >= 0), tnp.zeros_like(inside), tnp.full_like(inside, np.inf))
    return tnp.where(both, inside, edge)


def kl_div(x: ArrayLike, y: ArrayLike) -> Any:
    """x log(x / y) - x + y for x, y > 0; y where x = 0 and y >= 0; inf elsewhere."""
    x, y = _inexact(x), _inexact(y)
    both, safe_x, safe_y = _both_positive(x, y)
    inside = safe_x * tnp.log(safe_x / safe_y) - safe_x + safe_y
    return tnp.where(both, inside, tnp.where((x == 0) & (y >= 0), y, tnp.full_like(inside, np.inf)))


def _both_positive(x: Any, y: Any) -> tuple[Any, Any, Any]:
    """Where x > 0 and y > 0, and x, y with 1 elsewhere (so the unused branch's logarithm
    and its derivative stay finite)."""
    both = (x > 0) & (y > 0)
    return both, tnp.where(both, x, 1.0), tnp.where(both, y, 1.0)


def _inexact(x: ArrayLike) -> Any:
    """``x`` as an array of a floating dtype (ints and bools go to float64, as SciPy's)."""
    x = tnp.asarray(x)
    return x if np.issubdtype(x.dtype, np.inexact) else tnp.asarray(x, dtype=np.float64)


__all__ = ["entr", "erf", "erfc", "expit", "kl_div", "log_softmax", "logit", "logsumexp", "ndtr", "rel_entr",
           "softmax", "xlog1py", "xlogy"]
