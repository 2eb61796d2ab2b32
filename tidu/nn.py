"""Neural-network functions, as ``jax.nn``: activations, softmax, normalization, one-hot.

Each is a composition of ``tidu.numpy`` functions, written in the numerically stable
form JAX uses, so values and derivatives agree with ``jax.nn`` (tests/test_nn.py).
``sigmoid`` of real floats is the primitive ``logistic`` (rules/transcendental.rules), and
``softplus`` (so ``log_sigmoid``) carries its derivative rule, ``sigmoid(x) dx``. At the
kinks of piecewise functions the derivative is JAX's: the one-sided value of the branch
that holds at the kink (``relu'(0) = 0``).

``gelu(approximate=False)`` is written with the primitive ``erfc`` (rules/special.rules).

Called eagerly on a bfloat16 NumPy array (with Python numbers, bools, integers or other
bfloat16 arrays beside it), a function computes in float32 and rounds its result to
bfloat16 once, as XLA does: NumPy's own operators would give float32 for ``x * 0.5``
(ml_dtypes promotes a Python float with bfloat16 so), where JAX and traced tidu keep
bfloat16.

``dot_product_attention`` is JAX's XLA implementation written out: logits in at least
float32, the softmax in float32 (also for float64 inputs, as JAX's), grouped-query heads.

Not here: the quantized ``scaled_matmul`` / ``scaled_dot_general``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

import tidu.numpy as tnp
from tidu.core.pytree import flatten, unflatten
from tidu.trace.derivatives import with_jvp
from tidu.trace.tracing import Tracer
from tidu.transforms.custom import stop_gradient

ArrayLike = Any
Axis = int | tuple[int, ...] | None


_erfc = tnp.op("erfc")  # the primitive of rules/special.rules
_BF16 = np.dtype(ml_dtypes.bfloat16)


def keeps_bfloat16(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` called eagerly on a bfloat16 NumPy array: computed in float32 and its float32
    results rounded to bfloat16, the dtype JAX gives (see the module's docstring; also
    used by tidu.scipy's functions, not part of the jax.nn-like API: not in ``__all__``). Other
    arguments that would make JAX's result wider (a float32 or float64 array, a NumPy float
    scalar) leave the call as it is, and so does any traced argument."""

    @functools.wraps(fn)
    def wrapped(x: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(x, "dtype", None) != _BF16 or isinstance(x, Tracer) or not all(
                _leaves_bfloat16(v) for v in flatten((args, kwargs))[0]):
            return fn(x, *args, **kwargs)
        leaves, td = flatten(fn(np.asarray(x, np.float32), *args, **kwargs))
        return unflatten(td, [np.asarray(v).astype(_BF16) if getattr(v, "dtype", None) == np.float32 else v
                              for v in leaves])

    return wrapped


def _leaves_bfloat16(v: Any) -> bool:
    """Whether ``v`` beside a bfloat16 array leaves JAX's result bfloat16."""
    if v is None or type(v) in (bool, int, float, str):
        return True
    if isinstance(v, Tracer):
        return False
    dtype = getattr(v, "dtype", None)
    return dtype is not None and (dtype == _BF16 or np.dtype(dtype).kind in "biu")


tanh = tnp.tanh


def identity(x: ArrayLike) -> Any:
    return tnp.asarray(x)


@keeps_bfloat16
def relu(x: ArrayLike) -> Any:
    """max(x, 0); its derivative at 0 is 0, as JAX's, and nan stays nan (derivative 0,
    as JAX's). A bool ``x`` gives int64, as JAX's (``maximum(x, 0)``
    with a weakly typed 0)."""
    x = tnp.asarray(x)
    if np.dtype(x.dtype) == np.bool_:
        x = tnp.astype(x, tnp.result_type(x, 0))
    # nan: its value, with JAX's derivative there, 0
    return tnp.where(x > 0, x, tnp.where(x <= 0, tnp.zeros_like(x), stop_gradient(x)))


def _floats(x: Any) -> Any:
    """An integer or bool ``x`` as the floats JAX's arithmetic with a Python float gives
    (float64), so that comparisons with negative bounds need no negative unsigned integer."""
    return tnp.astype(x, tnp.result_type(x, 1.0)) if np.dtype(x.dtype).kind in "biu" else x


@keeps_bfloat16
def relu6(x: ArrayLike) -> Any:
    """min(max(x, 0), 6); derivative 0 at 0 and at 6, as JAX's; nan stays nan. An integer
    or bool ``x`` gives floats, as JAX's (its bound is the Python float 6.0)."""
    x = tnp.asarray(x)
    if np.dtype(x.dtype).kind in "biu":
        x = tnp.astype(x, tnp.result_type(x, 6.0))
    # nan: its value, with JAX's derivative there, 0
    inside = tnp.where(x < 6, x, tnp.full_like(x, 6))
    return tnp.where(x > 0, inside, tnp.where(x <= 0, tnp.zeros_like(x), stop_gradient(x)))


@keeps_bfloat16
def sigmoid(x: ArrayLike) -> Any:
    """1 / (1 + exp(-x)): of real floats the primitive ``logistic`` (rules/transcendental.rules:
    SciPy's expit, stablehlo.logistic); of complex values 1 / (1 + exp(-x)) for x >= 0 as
    written, below as e / (1 + e) with e = exp(x), so the exponential never overflows and
    tiny values keep their digits ((1 + tanh(x / 2)) / 2 rounded everything below -37 to 0,
    derivatives too)."""
    x = tnp.asarray(x)
    if np.dtype(x.dtype).kind in "biu":
        x = tnp.astype(x, tnp.result_type(x, 1.0))
    if np.dtype(x.dtype).kind == "f":
        return tnp.op("logistic")(x)
    nonneg = x >= 0
    e = tnp.exp(tnp.where(nonneg, -x, x))  # exp(-|x|), with the derivative of each side at 0
    return tnp.where(nonneg, 1.0, e) / (1 + e)


def _softplus_value(x: Any) -> Any:
    """logaddexp(x, 0) as tidu.numpy traces it (NumPy's form), op for op."""
    return tnp.add(tnp.maximum(x, 0.0), tnp.log1p(tnp.exp(tnp.negative(tnp.abs(x)))))


def _softplus_jvp(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, Any]:
    # logaddexp's rule has a second term, sigmoid(-x) times the tangent of its constant 0,
    # which the exact rewrites cannot drop (0 * nan is nan): the gradient kept 10 ops for 1
    return None, tnp.multiply(tangents[0], sigmoid(primals[0]))


_softplus = with_jvp(_softplus_value, _softplus_jvp, elementwise=True)


@keeps_bfloat16
def softplus(x: ArrayLike) -> Any:
    """log(1 + exp(x)) without overflow: logaddexp(x, 0), its values; traced, real floats
    carry the rule sigmoid(x) dx (one op)."""
    x = tnp.asarray(x)
    if isinstance(x, Tracer) and np.dtype(x.dtype).kind == "f":
        return _softplus(x)
    return tnp.logaddexp(x, 0.0)


@keeps_bfloat16
def log_sigmoid(x: ArrayLike) -> Any:
    return -softplus(-tnp.asarray(x))


@keeps_bfloat16
def silu(x: ArrayLike) -> Any:
    """x * sigmoid(x) (also ``swish``)."""
    x = tnp.asarray(x)
    return x * sigmoid(x)


swish = silu


@keeps_bfloat16
def soft_sign(x: ArrayLike) -> Any:
    """x / (|x| + 1): for |x| > 1 as sign(x) (1 - 1 / (|x| + 1)), whose derivative is
    1 / (|x| + 1)^2 as computed (the quotient rule's difference of two nearly equal terms
    kept no digits for large |x|: 0 at 1e10 in float32), each branch at a safe point
    where not taken."""
    x = tnp.asarray(x)
    if np.dtype(x.dtype).kind in "biu":  # no derivative: JAX's quotient, promoted as it promotes
        return x / (tnp.abs(x) + 1)
    a = tnp.abs(x)
    big = a > 1
    far = tnp.where(big, a, 2.0)
    near = tnp.where(big, 0.0, x)
    return tnp.where(big, tnp.sign(x) * (1 - 1 / (far + 1)), near / (tnp.abs(near) + 1))


@keeps_bfloat16
def elu(x: ArrayLike, alpha: ArrayLike = 1.0) -> Any:
    """x above 0, alpha (exp(x) - 1) below (exp of the negative part only: no overflow)."""
    x = tnp.asarray(x)
    negative = tnp.where(x > 0, tnp.zeros_like(x), x)
    return tnp.where(x > 0, x, alpha * tnp.expm1(negative))


@keeps_bfloat16
def celu(x: ArrayLike, alpha: ArrayLike = 1.0) -> Any:
    """max(x, 0) + alpha min(exp(x / alpha) - 1, 0)."""
    x = tnp.asarray(x)
    return tnp.where(x > 0, x, alpha * tnp.expm1(tnp.where(x > 0, tnp.zeros_like(x), x) / alpha))


@keeps_bfloat16
def selu(x: ArrayLike) -> Any:
    """scale * elu(x, alpha) with the self-normalizing constants."""
    alpha = 1.6732632423543772848170429916717
    scale = 1.0507009873554804934193349852946
    return scale * elu(x, alpha)


@keeps_bfloat16
def leaky_relu(x: ArrayLike, negative_slope: ArrayLike = 1e-2) -> Any:
    x = tnp.asarray(x)
    return tnp.where(x >= 0, x, negative_slope * x)


@keeps_bfloat16
def hard_tanh(x: ArrayLike) -> Any:
    """x clipped to [-1, 1]. Unsigned integers are only clipped above (JAX's comparison
    with -1 wraps it around to the dtype's maximum, giving 255 for a uint8 0); bools give
    int64, as JAX's (there is no -1 of bools)."""
    x = tnp.asarray(x)
    if np.dtype(x.dtype) == np.bool_:
        x = tnp.astype(x, tnp.result_type(x, 1))
    if np.dtype(x.dtype).kind == "u":
        return tnp.where(x > 1, tnp.ones_like(x), x)
    return tnp.where(x > 1, tnp.ones_like(x), tnp.where(x < -1, -tnp.ones_like(x), x))


@keeps_bfloat16
def hard_sigmoid(x: ArrayLike) -> Any:
    """relu6(x + 3) / 6."""
    return relu6(tnp.asarray(x) + 3.0) / 6.0


@keeps_bfloat16
def hard_silu(x: ArrayLike) -> Any:
    """x * hard_sigmoid(x) (also ``hard_swish``): x from 3 on, 0 up to -3 (derivatives 1
    and 0 there, as JAX's, also at +-inf: not inf * 0), x (x + 3) / 6 between. Integers
    and bools give floats, as JAX's."""
    x = _floats(tnp.asarray(x))
    outside = (x >= 3) | (x <= -3)
    xm = tnp.where(outside, tnp.zeros_like(x), x)  # the middle piece on inputs it is finite at
    return tnp.where(x >= 3, x, tnp.where(x <= -3, tnp.zeros_like(x), xm * ((xm + 3.0) / 6.0)))


hard_swish = hard_silu


@keeps_bfloat16
def mish(x: ArrayLike) -> Any:
    """x * tanh(softplus(x))."""
    x = tnp.asarray(x)
    return x * tnp.tanh(softplus(x))


@keeps_bfloat16
def squareplus(x: ArrayLike, b: ArrayLike = 4) -> Any:
    """(x + sqrt(x^2 + b)) / 2: for x < 0 as b / (2 (sqrt(x^2 + b) - x)), the same number
    without the cancellation that made the left tail and its derivative 0 (or of the
    wrong sign); sqrt(x^2 + b) as |x| sqrt(1 + b / x^2) for |x| > 1, so x^2 cannot
    overflow. Complex values: (x + sqrt(x^2 + b)) / 2 as written (JAX's; no sign to branch on)."""
    x = tnp.asarray(x)
    if np.dtype(x.dtype).kind == "c":
        return (x + tnp.sqrt(x * x + b)) / 2
    a = tnp.abs(x)
    big = a > 1
    safe = tnp.where(big, a, 1.0)  # (each branch at a point where it is finite)
    root = tnp.where(big, safe * tnp.sqrt(1 + b / (safe * safe)), tnp.sqrt(tnp.where(big, 0.0, x) ** 2 + b))
    negative = x < 0
    return tnp.where(negative, b / (2 * (root - tnp.where(negative, x, -1.0))), (x + root) / 2)


@keeps_bfloat16
def sparse_plus(x: ArrayLike) -> Any:
    """0 below -1, (x + 1)^2 / 4 on [-1, 1], x above 1 (floats for integers and bools, as JAX's)."""
    x = _floats(tnp.asarray(x))
    xm = tnp.where((x <= -1) | (x >= 1), tnp.zeros_like(x), x)  # (no inf * 0 at +-inf in reverse mode)
    return tnp.where(x <= -1, tnp.zeros_like(x), tnp.where(x >= 1, x, (xm + 1) ** 2 / 4))


@keeps_bfloat16
def sparse_sigmoid(x: ArrayLike) -> Any:
    """The derivative of sparse_plus: 0 below -1, (x + 1) / 2 on [-1, 1], 1 above 1,
    written as JAX writes it, ``clip(x + 1, 0, 2) / 2``, so that its derivative at -1 and
    1 is JAX's too: 1/4, half the slope inside (clip's maximum and minimum share the
    derivative at their ties)."""
    x = tnp.asarray(x)
    return 0.5 * tnp.clip(x + 1.0, 0.0, 2.0)


@keeps_bfloat16
def log1mexp(x: ArrayLike) -> Any:
    """log(1 - exp(-x)) for x > 0, accurate at both ends (Maechler's switch at log 2)."""
    x = tnp.asarray(x)
    far = x > math.log(2)
    # each branch at a harmless point where it is not used: its derivative's inf at 0
    # would reach the result as 0 * inf (double where)
    return tnp.where(far, tnp.log1p(-tnp.exp(-tnp.where(far, x, 1.0))),
                     tnp.log(-tnp.expm1(-tnp.where(far, 0.5, x))))


@keeps_bfloat16
def gelu(x: ArrayLike, approximate: bool = True) -> Any:
    """The Gaussian error linear unit x * Phi(x): in its tanh approximation (JAX's default),
    or exactly with ``approximate=False``. Each is written without the cancellation of
    ``1 + tanh(z)`` and ``1 + erf(z)`` in the left tail: the approximation as
    x sigmoid(2 z) (= x (1 + tanh z) / 2), the exact form as x erfc(-x / sqrt(2)) / 2."""
    x = tnp.asarray(x)
    if not approximate:
        return 0.5 * x * _erfc(-x * math.sqrt(0.5))
    c = math.sqrt(2 / math.pi)
    return x * sigmoid(2 * c * (x + 0.044715 * x ** 3))


@keeps_bfloat16
def glu(x: ArrayLike, axis: int = -1) -> Any:
    """The gated linear unit: the first half of ``axis`` times sigmoid of the second."""
    x = tnp.asarray(x)
    if not isinstance(axis, int | np.integer):
        raise TypeError(f"tidu.nn.glu: axis must be an int, got {axis!r}")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"tidu.nn.glu: axis {axis} is out of range for an input of shape {tuple(x.shape)}")
    size = x.shape[axis]
    if size % 2:
        raise ValueError(f"tidu.nn.glu: axis {axis} has odd size {size}; it must split in two halves")
    a, b = tnp.split(x, 2, axis=axis)
    return a * sigmoid(b)


@keeps_bfloat16
def logsumexp(a: ArrayLike, axis: Axis = None, b: ArrayLike | None = None, keepdims: bool = False,
              return_sign: bool = False, where: ArrayLike | None = None) -> Any:
    """log(sum(b exp(a))) over ``axis`` (``tnp.logsumexp``); with ``where``, over the
    elements it selects only (the others contribute nothing, and get no derivative)."""
    if where is not None:
        a = tnp.where(where, a, -np.inf)
        if b is not None:
            b = tnp.where(where, b, 0)
    return tnp.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign)


def _count(x: Any, axis: Axis, where: ArrayLike | None, keepdims: bool) -> Any:
    """How many elements a reduction over ``axis`` takes (with ``where``, selects)."""
    if where is None:
        return x.size if axis is None else math.prod(x.shape[a] for a in ((axis,) if isinstance(axis, int)
                                                                           else axis))
    mask = tnp.broadcast_to(tnp.asarray(where, dtype=bool), tuple(x.shape))
    return tnp.sum(mask, axis=axis, keepdims=keepdims)


@keeps_bfloat16
def logmeanexp(x: ArrayLike, axis: Axis = None, where: ArrayLike | None = None, keepdims: bool = False) -> Any:
    """log(mean(exp(x))) without overflow (with ``where``, of the elements it selects)."""
    x = tnp.asarray(x)
    lse = logsumexp(x, axis=axis, keepdims=keepdims, where=where)  # (first: its error for a bad axis)
    count = _count(x, axis, where, keepdims)
    if where is None:
        return lse - math.log(count)
    return lse - tnp.log(tnp.astype(count, tnp.result_type(lse)))


def _scalar_axis(x: Any, axis: Axis) -> Axis:
    """For a 0-d ``x``, axis 0 or -1 means no axis (the whole scalar), as NumPy's
    reductions take it: softmax of a scalar is 1, log_softmax 0 (eager and traced alike)."""
    return None if np.ndim(x) == 0 and isinstance(axis, int | np.integer) and axis in (0, -1) else axis


def _masked(x: Any, axis: Axis, where: ArrayLike | None) -> tuple[Any, Any]:
    """``x`` with the elements ``where`` leaves out set to -inf, and its (constant)
    maximum along ``axis`` over the others."""
    if where is None:
        # an empty x: its (empty) result, as JAX's (a maximum of no elements has no value)
        empty = {"initial": -np.inf} if math.prod(x.shape) == 0 else {}
        return x, stop_gradient(tnp.max(x, axis=axis, keepdims=True, **empty))
    x_max = tnp.max(x, axis=axis, keepdims=True, where=where, initial=-np.inf)
    return tnp.where(where, x, -np.inf), stop_gradient(x_max)


@keeps_bfloat16
def softmax(x: ArrayLike, axis: Axis = -1, where: ArrayLike | None = None) -> Any:
    """exp(x) / sum(exp(x)) along ``axis``, shifted by the (constant) maximum. With
    ``where``, over the elements it selects; the others are 0, as JAX's."""
    x = tnp.asarray(x)
    axis = _scalar_axis(x, axis)
    x_safe, x_max = _masked(x, axis, where)
    unnormalized = tnp.exp(x_safe - x_max)
    result = unnormalized / tnp.sum(unnormalized, axis=axis, keepdims=True, where=where)
    return result if where is None else tnp.where(where, result, 0)


@keeps_bfloat16
def log_softmax(x: ArrayLike, axis: Axis = -1, where: ArrayLike | None = None) -> Any:
    """x - logsumexp(x) along ``axis``. With ``where``, over the elements it selects; the
    others are -inf, as JAX's."""
    x = tnp.asarray(x)
    axis = _scalar_axis(x, axis)
    x_safe, x_max = _masked(x, axis, where)
    shifted = x_safe - x_max
    result = shifted - tnp.log(tnp.sum(tnp.exp(shifted), axis=axis, keepdims=True, where=where))
    return result if where is None else tnp.where(where, result, -np.inf)


@keeps_bfloat16
def standardize(x: ArrayLike, axis: Axis = -1, mean: ArrayLike | None = None, variance: ArrayLike | None = None,
                epsilon: ArrayLike = 1e-5, where: ArrayLike | None = None, *, algorithm: str = "fast") -> Any:
    """(x - mean) / sqrt(variance + epsilon) along ``axis``, mean and variance computed
    (over the elements ``where`` selects) when not given, as JAX: ``algorithm="fast"``
    takes the variance as E[x^2] - E[x]^2 clipped at 0 (rounding can make it negative),
    ``"stable"`` as E[(x - mean)^2]."""
    if algorithm not in ("fast", "stable"):
        raise ValueError(f"tidu.nn.standardize: algorithm must be 'fast' or 'stable', got {algorithm!r}")
    x = tnp.asarray(x)
    if mean is None:
        mean = tnp.mean(x, axis=axis, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = tnp.mean(tnp.square(x - mean), axis=axis, keepdims=True, where=where)
        else:
            variance = tnp.clip(tnp.mean(x * x, axis=axis, keepdims=True, where=where) - mean * mean, 0)
    return (x - mean) / tnp.sqrt(variance + epsilon)


def _attention_4d(t: Any) -> Any:
    """``t`` with leading axes of one added up to four (a batch of one, a head of one)."""
    t = tnp.asarray(t)
    return tnp.reshape(t, (1,) * (4 - t.ndim) + tuple(t.shape)) if t.ndim < 4 else t


def _attention_check(t: Any, shape: tuple[int, ...], dtype: Any, name: str) -> None:
    """JAX's checks of an operand of ``dot_product_attention``: ``shape`` (-1: any size)."""
    if t.ndim != len(shape):
        raise ValueError(f"tidu.nn.dot_product_attention: {name} must have {len(shape)} dimensions, "
                         f"got shape {tuple(t.shape)}")
    if dtype is not None and np.dtype(t.dtype) != np.dtype(dtype):
        raise ValueError(f"tidu.nn.dot_product_attention: {name} must have dtype {np.dtype(dtype)}, got {t.dtype}")
    if any(want not in (-1, got) for want, got in zip(shape, t.shape, strict=True)):
        raise ValueError(f"tidu.nn.dot_product_attention: {name} must have shape "
                         f"{tuple('any' if w == -1 else w for w in shape)}, got {tuple(t.shape)}")


def _grouped(t: Any, k: int, g: int, name: str) -> Any:
    """A (B, N, T, S) bias or mask as (B, K, G, T, S): N heads as K key heads of G query heads."""
    b, n, tt, s = t.shape
    if n == 1:
        return tnp.reshape(t, (b, 1, 1, tt, s))
    if n != k * g:
        raise ValueError(f"tidu.nn.dot_product_attention: {name} has {n} heads; it must have 1 or "
                         f"the query's {k * g}")
    return tnp.reshape(t, (b, k, g, tt, s))


def dot_product_attention(query: ArrayLike, key: ArrayLike, value: ArrayLike, bias: ArrayLike | None = None,
                          mask: ArrayLike | None = None, *, scale: float | None = None, is_causal: bool = False,
                          query_seq_lengths: ArrayLike | None = None,
                          key_value_seq_lengths: ArrayLike | None = None,
                          local_window_size: int | tuple[int, int] | None = None,
                          implementation: str | None = None, return_residual: bool = False) -> Any:
    """softmax(scale q k^T + bias, masked) v per head, as ``jax.nn.dot_product_attention``
    with ``implementation="xla"``: query (B, T, N, H) or (T, N, H), key and value (B, S, K, H)
    or (S, K, H) with N a multiple of K (grouped-query attention); ``bias`` and the boolean
    ``mask`` (True: attend) broadcast to (B, N, T, S); ``is_causal``, the sequence lengths
    (int32, shape (B,)) and ``local_window_size`` (left, right) mask more. The logits are
    computed in at least float32 and the softmax in float32, as JAX's; masked logits are
    -0.7 times the largest float32 (a row with nothing to attend to averages all of v);
    query positions past ``query_seq_lengths`` give zeros. ``return_residual``: also the
    logsumexp of the logits, shape (B, T, N) or (T, N), without derivative."""
    if implementation not in (None, "xla"):
        raise ValueError(f"tidu.nn.dot_product_attention: implementation={implementation!r} is not available; "
                         "tidu computes attention as JAX's 'xla' implementation (use None or 'xla')")
    out_shape = tuple(tnp.shape(query))
    q, k, v = _attention_4d(query), _attention_4d(key), _attention_4d(value)
    bias = None if bias is None else _attention_4d(bias)
    mask = None if mask is None else _attention_4d(mask)
    batch, s_len, kv_heads, h = k.shape
    _attention_check(v, (batch, s_len, kv_heads, h), k.dtype, "value")
    _attention_check(q, (batch, -1, -1, h), k.dtype, "query")
    if mask is not None:
        _attention_check(mask, (-1, -1, -1, -1), np.bool_, "mask")
    if bias is not None:
        _attention_check(bias, (-1, -1, -1, -1), None, "bias")
    lengths = []
    for name, seq in (("query_seq_lengths", query_seq_lengths), ("key_value_seq_lengths", key_value_seq_lengths)):
        if seq is not None:
            seq = tnp.asarray(seq)
            _attention_check(seq, (batch,), np.int32, name)
        lengths.append(seq)
    q_len, kv_len = lengths
    t_len, n_heads = q.shape[1], q.shape[2]
    if kv_heads == 0 or n_heads % kv_heads:
        raise ValueError(f"tidu.nn.dot_product_attention: the query's {n_heads} heads must be a multiple of the "
                         f"key's and value's {kv_heads}")
    if isinstance(local_window_size, int | np.integer):
        local_window_size = (int(local_window_size), int(local_window_size))
    g = n_heads // kv_heads
    scale = 1.0 / math.sqrt(h) if scale is None else scale
    logits_dtype = tnp.result_type(q.dtype, np.float32)
    q5 = tnp.reshape(q, (batch, t_len, kv_heads, g, h))
    logits = tnp.einsum("btkgh,bskh->bkgts", tnp.astype(q5, logits_dtype), tnp.astype(k, logits_dtype))
    logits = logits * tnp.asarray(scale, dtype=logits_dtype)
    if bias is not None:
        logits = tnp.astype(logits + _grouped(bias, kv_heads, g, "bias"), logits_dtype)
    keep = None if mask is None else _grouped(mask, kv_heads, g, "mask")
    rows, cols = np.arange(t_len)[:, None], np.arange(s_len)[None, :]
    static = np.ones((t_len, s_len), dtype=bool)
    if is_causal:
        static &= rows >= cols
    if local_window_size is not None:
        left, right = local_window_size
        static &= (rows <= cols + left) & (rows >= cols - right)
    if is_causal or local_window_size is not None:
        keep = static if keep is None else tnp.logical_and(keep, static)
    if q_len is not None or kv_len is not None:
        padded = True
        if q_len is not None:
            padded = tnp.arange(t_len)[None, :, None] < q_len[:, None, None]
        if kv_len is not None:
            padded = tnp.logical_and(padded, tnp.arange(s_len)[None, None, :] < kv_len[:, None, None])
        padded = tnp.reshape(tnp.broadcast_to(padded, (batch, t_len, s_len)), (batch, 1, 1, t_len, s_len))
        keep = padded if keep is None else tnp.logical_and(keep, padded)
    if keep is not None:
        large_negative = -0.7 * min(float(np.finfo(logits_dtype).max), float(np.finfo(np.float32).max))
        logits = tnp.where(keep, logits, tnp.asarray(large_negative, dtype=logits_dtype))
    logits = tnp.astype(logits, np.float32)
    probs = tnp.astype(softmax(logits, axis=-1), k.dtype)
    encoded = tnp.reshape(tnp.einsum("bkgts,bskh->btkgh", probs, v), (batch, t_len, n_heads, h))
    if q_len is not None:
        encoded = encoded * tnp.astype(tnp.arange(t_len)[None, :, None, None] < q_len[:, None, None, None],
                                       encoded.dtype)
    encoded = tnp.reshape(encoded, out_shape)
    if not return_residual:
        return encoded
    lse = tnp.astype(tnp.logsumexp(logits, axis=-1), k.dtype)  # (B, K, G, T)
    lse = tnp.reshape(tnp.transpose(lse, (0, 3, 1, 2)), out_shape[:-1])
    return encoded, stop_gradient(lse)


def one_hot(x: ArrayLike, num_classes: int, *, dtype: Any = None, axis: int = -1) -> Any:
    """1 where the class index in ``x`` equals the position along a new axis ``axis`` of
    size ``num_classes``, else 0 (indices outside the range give all zeros)."""
    if not isinstance(num_classes, int | np.integer) or isinstance(num_classes, bool | np.bool_) or num_classes < 0:
        raise TypeError(f"tidu.nn.one_hot: num_classes must be a non-negative int, got {num_classes!r}")
    x = tnp.asarray(x)
    ndim = x.ndim + 1
    if not isinstance(axis, int | np.integer):
        raise TypeError(f"tidu.nn.one_hot: axis must be an int, got {axis!r}")
    ax = axis + ndim if axis < 0 else axis
    if not 0 <= ax < ndim:
        raise ValueError(f"tidu.nn.one_hot: axis {axis} is out of range for a result of {ndim} dimensions")
    classes = np.arange(num_classes).reshape([num_classes if i == ax else 1 for i in range(ndim)])
    hot = tnp.expand_dims(x, ax) == classes
    return tnp.asarray(hot, dtype=dtype if dtype is not None else np.float64)


__all__ = ["celu", "dot_product_attention", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu", "hard_swish",
           "hard_tanh", "identity", "leaky_relu", "log1mexp", "log_sigmoid", "log_softmax", "logmeanexp", "logsumexp",
           "mish", "one_hot", "relu", "relu6", "selu", "sigmoid", "silu", "soft_sign", "softmax", "softplus",
           "sparse_plus", "sparse_sigmoid", "squareplus", "standardize", "swish", "tanh"]
