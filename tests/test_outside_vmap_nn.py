"""An outside tester's checks of tidu.vmap, tidu.nn, tidu.lax (outside control flow) and
tidu.random against JAX (x64): in_axes/out_axes in every form, vmap composed with the
derivative transforms, lax ops batched with mapped and unmapped operands, nn functions at
their kinks and with ``where=``, eager bfloat16, and jax.random's API where tidu.random
has the same functions (shapes, dtypes, bounds, errors; the streams are tidu's own).

Tests marked ``xfail(strict=True)`` fail today; each reason says what is wrong."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import ml_dtypes
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jax.random as jr  # noqa: E402
from jax import lax as jlax  # noqa: E402
from oracle_util import same as _same  # noqa: E402

import tidu  # noqa: E402
import tidu.nn as tnn  # noqa: E402
import tidu.numpy as tnp  # noqa: E402
import tidu.random as tr  # noqa: E402
from tidu import lax as tlax  # noqa: E402

RNG = np.random.default_rng(20261201)
BF16 = np.dtype(ml_dtypes.bfloat16)


def _same_tree(got, want, **kw):
    gl, wl = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(gl) == len(wl)
    for g, w in zip(gl, wl, strict=True):
        _same(g, w, **kw)


# --- vmap: axes, pytrees, composition (regression guards: these agree with JAX) ------------

X34 = RNG.normal(size=(3, 4))


def test_in_axes_out_axes_and_pytrees_as_jax():
    cases = [
        (lambda a, b: a * b, dict(in_axes=(-1, 0)), (X34, X34.T)),
        (lambda a: (a, a.sum()), dict(out_axes=(1, 0)), (X34,)),
        (lambda a, b: (a + b, b * 2), dict(in_axes=(0, None), out_axes=(0, None)), (X34, X34[0])),
        (lambda d: d["a"] + d["b"], dict(in_axes=({"a": 0, "b": None},)), ({"a": X34, "b": X34[0]},)),
        (lambda t: t[0] * t[1], dict(in_axes=((0, 1),)), ((X34, X34.T),)),
        (lambda a: {"y": a, "z": a.sum()}, dict(out_axes={"y": 1, "z": 0}), (X34,)),
        (lambda a: 3.0, {}, (X34,)),
    ]
    for f, kw, args in cases:
        _same_tree(tidu.vmap(f, **kw)(*args), jax.vmap(f, **kw)(*args))


def test_nested_vmap_and_vmap_of_derivatives_as_jax():
    x = RNG.normal(size=(2, 3, 4))
    _same(tidu.vmap(tidu.vmap(lambda a: tnp.sum(a ** 2), in_axes=1), in_axes=1)(x),
          jax.vmap(jax.vmap(lambda a: jnp.sum(a ** 2), in_axes=1), in_axes=1)(x))
    _same(tidu.vmap(tidu.hessian(lambda r: tnp.prod(tnp.sin(r))))(X34),
          jax.vmap(jax.hessian(lambda r: jnp.prod(jnp.sin(r))))(X34))
    _same(tidu.jacrev(tidu.vmap(lambda r: tnp.sin(r) * r[0]))(X34),
          jax.jacrev(jax.vmap(lambda r: jnp.sin(r) * r[0]))(X34))
    _same(tidu.vmap(tidu.jacrev(lambda r: tnp.cumsum(r ** 2)), in_axes=1)(X34),
          jax.vmap(jax.jacrev(lambda r: jnp.cumsum(r ** 2)), in_axes=1)(X34))


def test_vmap_errors_are_one_line_and_name_the_argument():
    for call, words in [
        (lambda: tidu.vmap(lambda a: a, in_axes=2)(X34), r"in_axes 2 is out of range for argument\[0\]"),
        (lambda: tidu.vmap(lambda a, b: a + b)(X34, X34.T), "different sizes"),
        (lambda: tidu.vmap(lambda a: a, out_axes=None)(X34), "out_axes is None"),
        (lambda: tidu.vmap(lambda a: a, in_axes=None)(X34), "at least one argument must be mapped"),
    ]:
        with pytest.raises(ValueError, match=words) as info:
            call()
        assert "\n" not in str(info.value)


def test_vmap_axis_size_as_jax():
    f = lambda a: a * 2  # noqa: E731
    _same(tidu.vmap(f, in_axes=None, axis_size=3)(np.ones(2)), jax.vmap(f, in_axes=None, axis_size=3)(np.ones(2)))
    g = lambda a, b: a * b  # noqa: E731
    _same(tidu.vmap(g, in_axes=(0, None), axis_size=3)(np.arange(3.0), 2.0),
          jax.vmap(g, in_axes=(0, None), axis_size=3)(np.arange(3.0), 2.0))
    with pytest.raises(ValueError, match="axis_size is 4"):
        tidu.vmap(g, in_axes=(0, None), axis_size=4)(np.arange(3.0), 2.0)
    with pytest.raises(TypeError, match="axis_size must be a non-negative int"):
        tidu.vmap(f, axis_size=-1)


def test_unmapped_python_int_stays_static_as_jax():
    """An unmapped Python int passes into the function as it is (a[:n]), at top level (one
    transform per value) and nested in a trace, as jax.vmap passes unmapped arguments."""
    f = lambda a, n: a[:n]  # noqa: E731
    _same(tidu.vmap(f, in_axes=(0, None))(X34, 2), jax.vmap(f, in_axes=(0, None))(X34, 2))
    _same(tidu.vmap(f, in_axes=(0, None))(X34, 3), jax.vmap(f, in_axes=(0, None))(X34, 3))
    _same(tidu.jit(lambda x: tidu.vmap(f, in_axes=(0, None))(x, 2))(X34), jax.vmap(f, in_axes=(0, None))(X34, 2))
    _same(tidu.grad(lambda x: tnp.sum(tidu.vmap(f, in_axes=(0, None))(x, 2) ** 2))(X34),
          jax.grad(lambda x: jnp.sum(jax.vmap(f, in_axes=(0, None))(x, 2) ** 2))(X34))


# --- lax ops under vmap, with mapped and unmapped operands ---------------------------------

A, B = RNG.normal(size=(3, 4)), RNG.normal(size=(4, 3))


def _stack3(x, axis):
    return np.moveaxis(np.stack([x, 0.5 * x + 0.1, -x]), 0, axis)


MIXED = {
    "dot_general_batch": (lambda L: lambda x, y: L.dot_general(x, y, (((1,), (0,)), ((0,), (1,)))), (A, B)),
    "sort_key_val": (lambda L: lambda x, y: L.sort_key_val(x, y.T, dimension=1), (A, B)),
    "select_n": (lambda L: lambda x, y: L.select_n((x > 0).astype(np.int32) + (y.T > 0).astype(np.int32),
                                                   x, -x, x * y.T), (A, B)),
    "clamp_bounds": (lambda L: lambda lo, x: L.clamp(lo, x, 0.5), (np.array(-0.2), A)),
    "pad_value": (lambda L: lambda x, v: L.pad(x, v, [(1, 0, 1), (0, 2, 0)]), (A, np.array(0.5))),
    "dynamic_update_slice": (lambda L: lambda x, u: L.dynamic_update_slice(x, u, (1, 2)), (A, B[:2, :2])),
    "cummax_rev": (lambda L: lambda x, y: L.cummax(x * y.T, axis=1, reverse=True), (A, B)),
    "top_k": (lambda L: lambda x, y: L.top_k(x + y.T, 2)[0], (A, B)),
    "conv": (lambda L: lambda x, w: L.conv_general_dilated(x[None, None], w[None, None], (1, 2), "SAME"),
             (A, B[:2, :2])),
}


@pytest.mark.parametrize("name", sorted(MIXED))
@pytest.mark.parametrize("axes", [(0, None), (None, 0), (1, -1)], ids=["first", "second", "both"])
def test_lax_ops_with_mapped_and_unmapped_operands_as_jax(name, axes):
    mk, args = MIXED[name]
    axes = tuple(ax if ax is None or ax < a.ndim + 1 else -1 for a, ax in zip(args, axes, strict=True))
    bargs = [a if ax is None else _stack3(a, ax) for a, ax in zip(args, axes, strict=True)]
    _same(tidu.vmap(mk(tlax), axes)(*bargs), jax.vmap(mk(jlax), axes)(*bargs))


def test_vmap_of_gradients_of_lax_ops_at_ties_as_jax():
    t = np.array([[1.0, 3.0, 3.0, 2.0], [0.0, 0.0, -1.0, 0.0]])
    for f in (lambda L, a: L.cummax(a, axis=0), lambda L, a: L.top_k(a, 3)[0] * np.arange(3.0),
              lambda L, a: L.clamp(0.0, a, 2.0), lambda L, a: L.cumprod(a, axis=0), lambda L, a: L.rem(a, 1.0)):
        gt = tidu.vmap(tidu.grad(lambda a, f=f: tnp.sum(f(tlax, a) ** 2)))
        gj = jax.vmap(jax.grad(lambda a, f=f: jnp.sum(f(jlax, a) ** 2)))
        _same(gt(t), gj(t))


# --- tidu.nn: kinks, where=, dtypes ----------------------------------------------------------


def test_sparse_sigmoid_derivative_at_its_kinks_is_jaxs():
    # JAX writes it 0.5 * clip(x + 1, 0, 2): the derivative at -1 and 1 is 1/4 (clip's ties); tidu had 0
    k = np.array([-1.0, 1.0, 0.0, -2.0, 2.0])
    _same(tidu.vmap(tidu.grad(tnn.sparse_sigmoid))(k), jax.vmap(jax.grad(jax.nn.sparse_sigmoid))(k))
    _same(tidu.jit(tidu.vmap(tidu.grad(tnn.sparse_sigmoid)))(k), jax.vmap(jax.grad(jax.nn.sparse_sigmoid))(k))
    _same(tnn.sparse_sigmoid(k), jax.nn.sparse_sigmoid(k))


def test_derivatives_of_relu_like_functions_at_their_kinks_are_jaxs():
    k = np.array([-3.0, -1.0, 0.0, 1.0, 3.0, 6.0])
    for name in ("relu", "relu6", "hard_tanh", "hard_sigmoid", "hard_silu", "sparse_plus", "leaky_relu", "elu",
                 "celu", "selu"):
        got = tidu.vmap(tidu.grad(getattr(tnn, name)))(k)
        want = jax.vmap(jax.grad(getattr(jax.nn, name)))(k)
        _same(got, want, rtol=1e-12, atol=1e-14)


MASK = np.array([[True, False, True, True], [False, False, False, False], [True, False, False, False]])
SX = RNG.normal(size=(3, 4)) * 3
W = RNG.normal(size=(3, 4))


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "standardize"])
@pytest.mark.parametrize("axis", [-1, 0])
def test_where_keyword_as_jax(name, axis):
    # tidu raised NotImplementedError for where= (JAX masks the elements left out)
    ft = lambda a, m: getattr(tnn, name)(a, axis=axis, where=m)  # noqa: E731
    fj = lambda a, m: getattr(jax.nn, name)(a, axis=axis, where=m)  # noqa: E731
    _same(ft(SX, MASK), fj(SX, MASK))
    _same(tidu.jit(ft)(SX, MASK), fj(SX, MASK))
    _same(tidu.vmap(ft)(SX, MASK), jax.vmap(fj)(SX, MASK))
    gt = lambda a: tnp.sum(tnp.where(MASK, ft(a, MASK), 0.0) * W)  # noqa: E731
    gj = lambda a: jnp.sum(jnp.where(MASK, fj(a, MASK), 0.0) * W)  # noqa: E731
    _same(tidu.grad(gt)(SX), jax.grad(gj)(SX))


def test_logsumexp_and_logmeanexp_where_as_jax():
    for axis in (None, 1):
        _same(tnn.logsumexp(SX, axis=axis, b=np.abs(W), where=MASK),
              jax.nn.logsumexp(SX, axis=axis, b=np.abs(W), where=MASK))
        _same(tidu.jit(lambda a, axis=axis: tnn.logmeanexp(a, axis=axis, where=MASK))(SX),
              jax.nn.logmeanexp(SX, axis=axis, where=MASK))
    m = MASK.copy()
    m[1, 0] = True  # no empty row: finite gradients
    _same(tidu.grad(lambda a: tnp.sum(tnn.logsumexp(a, axis=1, where=m)))(SX),
          jax.grad(lambda a: jnp.sum(jax.nn.logsumexp(a, axis=1, where=m)))(SX))


def test_standardize_clips_a_rounded_negative_variance_as_jax():
    # E[x^2] - E[x]^2 of three equal 1e6-sized values rounds to -2.4e-4: sqrt(var + 1e-5) was nan
    x = np.full((1, 3), 1000000.1020408163)
    _same(tnn.standardize(x), jax.nn.standardize(x), atol=1e-6)
    _same(tidu.jit(tnn.standardize)(x), jax.nn.standardize(x), atol=1e-6)
    for algorithm in ("fast", "stable"):
        _same(tidu.grad(lambda a, al=algorithm: tnp.sum(tnn.standardize(a, algorithm=al) ** 3))(SX),
              jax.grad(lambda a, al=algorithm: jnp.sum(jax.nn.standardize(a, algorithm=al) ** 3))(SX))


ELEMENTWISE = ["relu", "relu6", "sigmoid", "softplus", "log_sigmoid", "silu", "elu", "celu", "selu", "leaky_relu",
               "hard_sigmoid", "hard_silu", "mish", "gelu", "sparse_plus", "sparse_sigmoid", "softmax",
               "log_softmax", "standardize", "glu", "logsumexp"]


def test_eager_bfloat16_keeps_its_dtype_as_jax_and_traced():
    # eagerly NumPy with ml_dtypes made float32 (x * 0.5) or float64 (np.where(c, 1.0, x)) of a bfloat16 array
    x = np.array([[-2.0, -1.0, 0.0, 0.5], [1.0, 3.0, -3.0, 6.0]], BF16)
    for name in ELEMENTWISE:
        want = getattr(jax.nn, name)(x)
        traced = name in ("sigmoid", "elu", "gelu", "softmax", "standardize")  # (traced: bfloat16 already)
        for got in (getattr(tnn, name)(x), *([tidu.jit(getattr(tnn, name))(x)] if traced else [])):
            assert np.asarray(got).dtype == BF16, name
            _same(got, want, rtol=2e-2, atol=2e-2)
    got = tnn.elu(x, alpha=np.float32(0.5))  # a float32 operand makes it float32, as JAX's
    assert got.dtype == jax.nn.elu(x, alpha=np.float32(0.5)).dtype == np.float32


def test_relu6_of_integers_is_float_as_jax():
    x = np.array([-3, 0, 4, 9])
    _same(tnn.relu6(x), jax.nn.relu6(x))
    _same(tidu.jit(tnn.relu6)(x), jax.nn.relu6(x))


# --- tidu.random: jax.random's API ---------------------------------------------------------

KEY, JKEY = tr.key(0), jr.PRNGKey(0)


def test_split_takes_a_shape_as_jax():
    keys = tr.split(KEY, (2, 3))
    assert keys.shape == jr.split(JKEY, (2, 3)).shape == (2, 3, 2)
    np.testing.assert_array_equal(keys.reshape(6, 2), tr.split(KEY, 6))
    np.testing.assert_array_equal(tidu.jit(lambda k: tr.split(k, (2, 3)))(KEY), keys)


def test_randint_clips_its_bounds_to_the_dtype_as_jax():
    # the bounds were not clipped: uint8 draws in [-5, 300) wrapped around (251..255, 256 -> 0)
    for lo, hi, dtype in [(-5, 3, np.uint8), (0, 300, np.uint8), (-1000, 1000, np.int8)]:
        got = tr.randint(KEY, (4000,), lo, hi, dtype)
        want = jr.randint(JKEY, (4000,), lo, hi, dtype)
        assert got.dtype == want.dtype
        info = np.iinfo(dtype)
        assert max(lo, info.min) <= got.min() and got.max() <= min(hi - 1, info.max)
        assert set(np.unique(got)) == set(np.unique(np.asarray(want)))  # every value of the range is drawn
        np.testing.assert_array_equal(tidu.jit(lambda k, lo=lo, hi=hi, dtype=dtype: tr.randint(k, (4000,), lo, hi,
                                                                                               dtype))(KEY), got)
    assert tr.randint(KEY, (3,), 0, 5, dtype=None).dtype == jr.randint(JKEY, (3,), 0, 5, dtype=None).dtype


def test_choice_and_permutation_take_an_axis_as_jax():
    x = np.arange(24.0).reshape(2, 3, 4)
    for axis in (0, 1, -1):
        assert tr.choice(KEY, x, (5,), axis=axis).shape == jr.choice(JKEY, x, (5,), axis=axis).shape
        for independent in (False, True):
            got = tr.permutation(KEY, x, axis=axis, independent=independent)
            want = jr.permutation(JKEY, x, axis=axis, independent=independent)
            assert got.shape == want.shape
            np.testing.assert_array_equal(np.sort(got, axis=axis), x)
            if axis == 1:
                traced = tidu.jit(lambda k, a, independent=independent: tr.permutation(
                    k, a, axis=1, independent=independent))(KEY, x)
                np.testing.assert_array_equal(traced, got)
    np.testing.assert_array_equal(tr.permutation(KEY, np.array(5)), tr.permutation(KEY, 5))


def test_draws_under_vmap_over_keys_equal_the_loop():
    keys = tr.split(KEY, 3)
    for f in (lambda k: tr.normal(k, (3,), np.float32), lambda k: tr.randint(k, (4,), -5, 300, np.uint8),
              lambda k: tr.permutation(k, np.arange(6.0).reshape(3, 2), axis=1, independent=True)):
        np.testing.assert_array_equal(tidu.vmap(f)(keys), np.stack([f(k) for k in keys]))


def test_random_errors_name_the_function_and_the_fix():
    with pytest.raises(ValueError, match=r"tidu\.random\.bernoulli: p of shape \(2,\) does not broadcast"):
        tr.bernoulli(KEY, np.array([0.1, 0.9]), (3,))
    with pytest.raises(TypeError, match=r"tidu\.random\.normal: .*jax\.random\.key_data"):
        tr.normal(jr.key(0), (2,))
    with pytest.raises(ValueError, match=r"tidu\.random\.permutation: axis 3 is out of bounds"):
        tr.permutation(KEY, np.ones((2, 2)), axis=3)
