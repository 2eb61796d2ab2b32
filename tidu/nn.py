"""Neural-network functions, as ``jax.nn``: activations, softmax, normalization, one-hot.

Each is a composition of ``tidu.numpy`` functions (no primitive of its own), written in
the numerically stable form JAX uses, so values and derivatives agree with ``jax.nn``
(tests/test_nn.py). At the kinks of piecewise functions the derivative is JAX's: the
one-sided value of the branch that holds at the kink (``relu'(0) = 0``).

``gelu(approximate=False)`` is written with the primitive ``erf`` (rules/special.rules).

Not here: ``dot_product_attention`` and the quantized ``scaled_matmul`` /
``scaled_dot_general``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import tidu.numpy as tnp
from tidu.transforms.custom import stop_gradient

ArrayLike = Any
Axis = int | tuple[int, ...] | None


tanh = tnp.tanh
_erf = tnp.op("erf")  # the primitive of rules/special.rules


def identity(x: ArrayLike) -> Any:
    return tnp.asarray(x)


def relu(x: ArrayLike) -> Any:
    """max(x, 0); its derivative at 0 is 0, as JAX's."""
    x = tnp.asarray(x)
    return tnp.where(x > 0, x, tnp.zeros_like(x))


def relu6(x: ArrayLike) -> Any:
    """min(max(x, 0), 6); derivative 0 at 0 and at 6, as JAX's."""
    x = tnp.asarray(x)
    return tnp.where(x > 0, tnp.where(x < 6, x, tnp.full_like(x, 6)), tnp.zeros_like(x))


def sigmoid(x: ArrayLike) -> Any:
    """1 / (1 + exp(-x)): for x >= 0 as written, below as e / (1 + e) with e = exp(x), so
    the exponential never overflows and tiny values keep their digits ((1 + tanh(x / 2))
    / 2 rounded everything below -37 to 0, derivatives too)."""
    x = tnp.asarray(x)
    nonneg = x >= 0
    e = tnp.exp(tnp.where(nonneg, -x, x))  # exp(-|x|), with the derivative of each side at 0
    return tnp.where(nonneg, 1.0, e) / (1 + e)


def softplus(x: ArrayLike) -> Any:
    """log(1 + exp(x)) without overflow."""
    return tnp.logaddexp(tnp.asarray(x), 0.0)


def log_sigmoid(x: ArrayLike) -> Any:
    return -softplus(-tnp.asarray(x))


def silu(x: ArrayLike) -> Any:
    """x * sigmoid(x) (also ``swish``)."""
    x = tnp.asarray(x)
    return x * sigmoid(x)


swish = silu


def soft_sign(x: ArrayLike) -> Any:
    x = tnp.asarray(x)
    return x / (tnp.abs(x) + 1)


def elu(x: ArrayLike, alpha: ArrayLike = 1.0) -> Any:
    """x above 0, alpha (exp(x) - 1) below (exp of the negative part only: no overflow)."""
    x = tnp.asarray(x)
    negative = tnp.where(x > 0, tnp.zeros_like(x), x)
    return tnp.where(x > 0, x, alpha * tnp.expm1(negative))


def celu(x: ArrayLike, alpha: ArrayLike = 1.0) -> Any:
    """max(x, 0) + alpha min(exp(x / alpha) - 1, 0)."""
    x = tnp.asarray(x)
    return tnp.where(x > 0, x, alpha * tnp.expm1(tnp.where(x > 0, tnp.zeros_like(x), x) / alpha))


def selu(x: ArrayLike) -> Any:
    """scale * elu(x, alpha) with the self-normalizing constants."""
    alpha = 1.6732632423543772848170429916717
    scale = 1.0507009873554804934193349852946
    return scale * elu(x, alpha)


def leaky_relu(x: ArrayLike, negative_slope: ArrayLike = 1e-2) -> Any:
    x = tnp.asarray(x)
    return tnp.where(x >= 0, x, negative_slope * x)


def hard_tanh(x: ArrayLike) -> Any:
    x = tnp.asarray(x)
    return tnp.where(x > 1, tnp.ones_like(x), tnp.where(x < -1, -tnp.ones_like(x), x))


def hard_sigmoid(x: ArrayLike) -> Any:
    """relu6(x + 3) / 6."""
    return relu6(tnp.asarray(x) + 3.0) / 6.0


def hard_silu(x: ArrayLike) -> Any:
    """x * hard_sigmoid(x) (also ``hard_swish``): x from 3 on, 0 up to -3 (derivatives 1
    and 0 there, as JAX's, also at +-inf: not inf * 0), x (x + 3) / 6 between."""
    x = tnp.asarray(x)
    outside = (x >= 3) | (x <= -3)
    xm = tnp.where(outside, tnp.zeros_like(x), x)  # the middle piece on inputs it is finite at
    return tnp.where(x >= 3, x, tnp.where(x <= -3, tnp.zeros_like(x), xm * ((xm + 3.0) / 6.0)))


hard_swish = hard_silu


def mish(x: ArrayLike) -> Any:
    """x * tanh(softplus(x))."""
    x = tnp.asarray(x)
    return x * tnp.tanh(softplus(x))


def squareplus(x: ArrayLike, b: ArrayLike = 4) -> Any:
    """(x + sqrt(x^2 + b)) / 2."""
    x = tnp.asarray(x)
    return (x + tnp.sqrt(x * x + b)) / 2


def sparse_plus(x: ArrayLike) -> Any:
    """0 below -1, (x + 1)^2 / 4 on [-1, 1], x above 1."""
    x = tnp.asarray(x)
    xm = tnp.where((x <= -1) | (x >= 1), tnp.zeros_like(x), x)  # (no inf * 0 at +-inf in reverse mode)
    return tnp.where(x <= -1, tnp.zeros_like(x), tnp.where(x >= 1, x, (xm + 1) ** 2 / 4))


def sparse_sigmoid(x: ArrayLike) -> Any:
    """The derivative of sparse_plus: 0 below -1, (x + 1) / 2 on [-1, 1], 1 above 1."""
    x = tnp.asarray(x)
    return tnp.where(x <= -1, tnp.zeros_like(x), tnp.where(x >= 1, tnp.ones_like(x), (x + 1) / 2))


def log1mexp(x: ArrayLike) -> Any:
    """log(1 - exp(-x)) for x > 0, accurate at both ends (Maechler's switch at log 2)."""
    x = tnp.asarray(x)
    far = x > math.log(2)
    # each branch at a harmless point where it is not used: its derivative's inf at 0
    # would reach the result as 0 * inf (double where)
    return tnp.where(far, tnp.log1p(-tnp.exp(-tnp.where(far, x, 1.0))),
                     tnp.log(-tnp.expm1(-tnp.where(far, 0.5, x))))


def gelu(x: ArrayLike, approximate: bool = True) -> Any:
    """The Gaussian error linear unit x * Phi(x): in its tanh approximation (JAX's default),
    or exactly, x * (1 + erf(x / sqrt(2))) / 2, with ``approximate=False``."""
    x = tnp.asarray(x)
    if not approximate:
        return 0.5 * x * (1 + _erf(x * math.sqrt(0.5)))
    c = math.sqrt(2 / math.pi)
    return 0.5 * x * (1 + tnp.tanh(c * (x + 0.044715 * x ** 3)))


def glu(x: ArrayLike, axis: int = -1) -> Any:
    """The gated linear unit: the first half of ``axis`` times sigmoid of the second."""
    x = tnp.asarray(x)
    size = x.shape[axis]
    if size % 2:
        raise ValueError(f"tidu.nn.glu: axis {axis} has odd size {size}; it must split in two halves")
    a, b = tnp.split(x, 2, axis=axis)
    return a * sigmoid(b)


def logsumexp(a: ArrayLike, axis: Axis = None, b: ArrayLike | None = None, keepdims: bool = False,
              return_sign: bool = False) -> Any:
    return tnp.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign)


def logmeanexp(x: ArrayLike, axis: Axis = None, where: ArrayLike | None = None, keepdims: bool = False) -> Any:
    """log(mean(exp(x))) without overflow."""
    if where is not None:
        raise NotImplementedError("tidu.nn.logmeanexp: where= is not supported; select the elements first")
    x = tnp.asarray(x)
    count = x.size if axis is None else math.prod(x.shape[a] for a in ((axis,) if isinstance(axis, int) else axis))
    return tnp.logsumexp(x, axis=axis, keepdims=keepdims) - math.log(count)


def _no_where(where: ArrayLike | None, name: str) -> None:
    if where is not None:
        raise NotImplementedError(f"tidu.nn.{name}: where= is not supported; mask the input instead "
                                  "(e.g. with -inf for softmax)")


def _scalar_axis(x: Any, axis: Axis) -> Axis:
    """For a 0-d ``x``, axis 0 or -1 means no axis (the whole scalar), as NumPy's
    reductions take it: softmax of a scalar is 1, log_softmax 0 (eager and traced alike)."""
    return None if np.ndim(x) == 0 and isinstance(axis, int | np.integer) and axis in (0, -1) else axis


def softmax(x: ArrayLike, axis: Axis = -1, where: ArrayLike | None = None) -> Any:
    """exp(x) / sum(exp(x)) along ``axis``, shifted by the (constant) maximum."""
    _no_where(where, "softmax")
    x = tnp.asarray(x)
    axis = _scalar_axis(x, axis)
    unnormalized = tnp.exp(x - stop_gradient(tnp.max(x, axis=axis, keepdims=True)))
    return unnormalized / tnp.sum(unnormalized, axis=axis, keepdims=True)


def log_softmax(x: ArrayLike, axis: Axis = -1, where: ArrayLike | None = None) -> Any:
    """x - logsumexp(x) along ``axis``."""
    _no_where(where, "log_softmax")
    x = tnp.asarray(x)
    axis = _scalar_axis(x, axis)
    shifted = x - stop_gradient(tnp.max(x, axis=axis, keepdims=True))
    return shifted - tnp.log(tnp.sum(tnp.exp(shifted), axis=axis, keepdims=True))


def standardize(x: ArrayLike, axis: Axis = -1, mean: ArrayLike | None = None, variance: ArrayLike | None = None,
                epsilon: ArrayLike = 1e-5, where: ArrayLike | None = None) -> Any:
    """(x - mean) / sqrt(variance + epsilon) along ``axis`` (mean and variance computed
    when not given; the variance as E[x^2] - E[x]^2, as JAX)."""
    _no_where(where, "standardize")
    x = tnp.asarray(x)
    if mean is None:
        mean = tnp.mean(x, axis=axis, keepdims=True)
    if variance is None:
        variance = tnp.mean(x * x, axis=axis, keepdims=True) - mean * mean
    return (x - mean) / tnp.sqrt(variance + epsilon)


def one_hot(x: ArrayLike, num_classes: int, *, dtype: Any = None, axis: int = -1) -> Any:
    """1 where the class index in ``x`` equals the position along a new axis ``axis`` of
    size ``num_classes``, else 0 (indices outside the range give all zeros)."""
    if not isinstance(num_classes, int | np.integer) or num_classes < 0:
        raise TypeError(f"tidu.nn.one_hot: num_classes must be a non-negative int, got {num_classes!r}")
    x = tnp.asarray(x)
    ndim = x.ndim + 1
    ax = axis + ndim if axis < 0 else axis
    if not 0 <= ax < ndim:
        raise ValueError(f"tidu.nn.one_hot: axis {axis} is out of range for a result of {ndim} dimensions")
    classes = np.arange(num_classes).reshape([num_classes if i == ax else 1 for i in range(ndim)])
    hot = tnp.expand_dims(x, ax) == classes
    return tnp.asarray(hot, dtype=dtype if dtype is not None else np.float64)


__all__ = ["celu", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh", "identity",
           "leaky_relu", "log1mexp", "log_sigmoid", "log_softmax", "logmeanexp", "logsumexp", "mish", "one_hot",
           "relu", "relu6", "selu", "sigmoid", "silu", "soft_sign", "softmax", "softplus", "sparse_plus",
           "sparse_sigmoid", "squareplus", "standardize", "swish", "tanh"]
