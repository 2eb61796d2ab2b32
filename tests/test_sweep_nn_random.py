"""An outside sweep of tidu.nn and tidu.random against jax.nn / jax.random and SciPy: bad
arguments that gave a misleading or library-internal error (or a silent key collision),
bools in ``hard_tanh``, and ``logsumexp`` with ``b = 0`` terms."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special

import tidu
import tidu.nn as tnn
import tidu.numpy as tnp
import tidu.random as tr

jax.config.update("jax_enable_x64", True)
warnings.filterwarnings("ignore", message=".*scatter inputs have incompatible types.*")

KEY = tr.key(0)


def test_permutation_of_a_negative_length_names_permutation() -> None:
    # (it said "tidu.random.choice: shape (-1,) has a negative size")
    with pytest.raises(ValueError, match=r"^tidu\.random\.permutation: x = -1 is a negative length"):
        tr.permutation(KEY, -1)
    assert tr.permutation(KEY, 0).shape == (0,)


def test_categorical_shape_that_does_not_hold_the_batch_is_its_own_one_line_error() -> None:
    # (it was tnp.broadcast_shapes' message, naming no function and no argument)
    with pytest.raises(ValueError, match=r"^tidu\.random\.categorical: shape \(2,\) does not hold the batch "
                                         r"shape \(3,\)"):
        tr.categorical(KEY, np.zeros((3, 4)), shape=(2,))
    assert tr.categorical(KEY, np.zeros((3, 4)), shape=(2, 3)).shape == (2, 3)


def test_categorical_of_no_categories_is_a_one_line_error() -> None:
    # (it was NumPy's "attempt to get argmax of an empty sequence"; JAX's is the same)
    with pytest.raises(ValueError, match=r"^tidu\.random\.categorical: logits of shape \(3, 0\) have no categories"):
        tr.categorical(KEY, np.zeros((3, 0)))
    with pytest.raises(ValueError, match="no categories along axis 0"):
        tidu.jit(lambda lg: tr.categorical(KEY, lg, axis=0))(np.zeros((0, 2)))


@pytest.mark.parametrize("seed", [2**64, 2**70, -(2**63) - 1])
def test_key_of_a_seed_beyond_64_bits_is_an_error(seed: int) -> None:
    # 2**64 gave the key of 0, 2**70 too (masked to 64 bits): two seeds, one stream;
    # JAX's PRNGKey raises (OverflowError) for these too
    with pytest.raises(OverflowError):
        jax.random.PRNGKey(seed)
    with pytest.raises(ValueError, match=r"^tidu\.random\.key: seed .* does not fit in 64 bits"):
        tr.key(seed)


def test_key_keeps_the_64_bit_seeds() -> None:
    np.testing.assert_array_equal(tr.key(-1), jax.random.PRNGKey(-1))
    np.testing.assert_array_equal(tr.key(-(2**63)), jax.random.PRNGKey(-(2**63)))
    np.testing.assert_array_equal(tr.key(2**63 - 1), jax.random.PRNGKey(2**63 - 1))
    np.testing.assert_array_equal(tr.key(np.uint64(2**64 - 1)), [2**32 - 1, 2**32 - 1])


@pytest.mark.parametrize("axis", [2, -3])
def test_glu_axis_out_of_range_is_a_one_line_error(axis: int) -> None:
    # (it was "IndexError: tuple index out of range", as JAX's)
    with pytest.raises(ValueError, match=rf"^tidu\.nn\.glu: axis {axis} is out of range for an input of shape"):
        tnn.glu(np.ones((2, 4)), axis=axis)
    with pytest.raises(ValueError, match=r"tidu\.nn\.glu: axis -1 is out of range for an input of shape \(\)"):
        tnn.glu(np.float64(1.0))
    np.testing.assert_allclose(tnn.glu(np.ones((2, 4)), axis=-2), jax.nn.glu(jnp.ones((2, 4)), axis=-2))


def test_hard_tanh_of_bools_as_jax() -> None:
    # (NumPy's "boolean negative is not supported" eagerly, "neg does not accept dtype bool" traced)
    x = np.array([True, False, True])
    want = np.asarray(jax.nn.hard_tanh(x))
    for got in (tnn.hard_tanh(x), tidu.jit(tnn.hard_tanh)(x)):
        got = np.asarray(got)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("far", [1000.0, np.inf, np.nan])
def test_traced_logsumexp_drops_terms_whose_b_is_zero(far: float) -> None:
    # a term with b = 0 adds nothing: eagerly (SciPy) and in JAX the value is 1; traced it
    # was -inf (1000: exp(1 - 1000) underflowed) or nan, its gradient nan
    x, b = np.array([far, 1.0]), np.array([0.0, 1.0])
    assert scipy.special.logsumexp(x, b=b) == 1.0 == float(jax.nn.logsumexp(x, b=b))
    assert float(tnn.logsumexp(x, b=b)) == 1.0
    assert float(tidu.jit(lambda v: tnn.logsumexp(v, b=b))(x)) == 1.0
    np.testing.assert_array_equal(tidu.grad(lambda v: tnn.logsumexp(v, b=b))(x), [0.0, 1.0])


def test_logsumexp_derivative_in_a_zero_b_is_exact() -> None:
    # d/db_i log(sum b e^a) = e^a_i / s also at b_i = 0 (JAX's masking gives 0 there): keep it
    x, b = np.array([0.5, 1.0]), np.array([0.0, 1.0])
    np.testing.assert_allclose(tidu.grad(lambda w: tnn.logsumexp(x, b=w))(b), np.exp(x - 1.0), rtol=1e-14)
    np.testing.assert_allclose(tidu.grad(lambda w: tnp.sum(tnn.logsumexp(x, b=w)))(b), np.exp(x - 1.0),
                               rtol=1e-14)


def test_one_hot_of_a_bool_num_classes_is_tidus_one_line_error() -> None:
    # (it was NumPy's "TypeError: an integer is required")
    with pytest.raises(TypeError, match=r"^tidu\.nn\.one_hot: num_classes must be a non-negative int, got True"):
        tnn.one_hot(np.array([0, 1]), True)


def test_uniform_between_bounds_whose_difference_overflows() -> None:
    # maxval - minval = inf: the draws were all nan (JAX's are all inf); exact oracle:
    # minval (1 - u) + maxval u in rational arithmetic, u the same key's unit draw
    from fractions import Fraction

    big = float(np.finfo(np.float64).max)
    u = tr.uniform(KEY, (200,))
    for lo in (-big, -big / 2):
        got = tr.uniform(KEY, (200,), minval=lo, maxval=big)
        want = np.array([float(Fraction(lo) * (1 - Fraction(float(v))) + Fraction(big) * Fraction(float(v)))
                         for v in u])
        assert np.isfinite(got).all() and (got >= lo).all() and (got < big).all()
        np.testing.assert_allclose(got, want, rtol=0, atol=4e-16 * big)
        f = tidu.jit(lambda k, lo=lo: tr.uniform(k, (200,), minval=lo, maxval=big), device="cpu")
        np.testing.assert_array_equal(f(KEY), got)  # XLA's draws are the same bits
    d_lo = tidu.grad(lambda a: tnp.sum(tr.uniform(KEY, (200,), minval=a, maxval=big)))(-big)
    np.testing.assert_allclose(d_lo, np.sum(1 - u), rtol=1e-14)


@pytest.mark.parametrize("p", [[-1.0, 1.0, 1.0], [np.nan, 1.0, 1.0], [np.inf, 1.0, 1.0], [0.0, 0.0, 0.0]])
def test_choice_with_weights_that_are_no_probabilities_is_a_one_line_error(p: list) -> None:
    # p = [-1, 1, 1] drew only the element of weight -1 ([0, 0]: log(-1) is nan, argmax's
    # pick); NumPy's Generator.choice refuses these weights too
    with pytest.raises(ValueError):
        np.random.default_rng(0).choice(3, 2, p=np.array(p))
    with pytest.raises(ValueError, match=r"^tidu\.random\.choice: p must be finite, non-negative weights"):
        tr.choice(KEY, 3, (2,), p=np.array(p))


def test_choice_weights_need_not_be_normalized() -> None:
    # (weights, as the Gumbel-max draw sees them: zero-weight elements are never drawn)
    draws = tr.choice(KEY, 3, (400,), p=np.array([2.0, 0.0, 1.0]))
    assert set(np.unique(draws).tolist()) == {0, 2}
    np.testing.assert_array_equal(tr.choice(KEY, 3, (400,), p=np.array([2.0, 0.0, 1.0]) / 3), draws)


@pytest.mark.parametrize(("lo", "hi", "support"), [(0, 2.9, [0, 1]), (-0.5, 2.7, [0, 1]), (-2.5, -0.5, [-2, -1])])
def test_randint_truncates_float_bounds_as_jax(lo: float, hi: float, support: list) -> None:
    # randint(k, s, 0, 2.9) drew 0 with probability 0.35 and 1 with 0.65 (floor(u * 2.9)
    # in 0, 1, 1.9, truncated); JAX truncates the bounds to integers: [0, 2) uniformly
    jdraws = np.asarray(jax.random.randint(jax.random.PRNGKey(0), (1000,), lo, hi))
    assert sorted(np.unique(jdraws).tolist()) == support
    for draws in (tr.randint(KEY, (20000,), lo, hi), tidu.jit(lambda k: tr.randint(k, (20000,), lo, hi))(KEY)):
        values, counts = np.unique(np.asarray(draws), return_counts=True)
        assert values.tolist() == support
        np.testing.assert_allclose(counts / 20000, 0.5, atol=0.02)  # (0.35 / 0.65 before)


def test_nn_axis_arguments_of_the_wrong_kind_are_one_line_errors() -> None:
    # (they were "tuple indices must be integers or slices, not float", "'<' not supported
    # between instances of 'NoneType' and 'int'" and "IndexError: tuple index out of range")
    with pytest.raises(TypeError, match=r"^tidu\.nn\.glu: axis must be an int, got 1\.0"):
        tnn.glu(np.ones((2, 4)), axis=1.0)
    with pytest.raises(TypeError, match=r"^tidu\.nn\.one_hot: axis must be an int, got None"):
        tnn.one_hot(np.array([1]), 3, axis=None)
    with pytest.raises(ValueError, match="axis 4 is out of bounds"):  # (NumPy's AxisError is a ValueError)
        tnn.logmeanexp(np.ones((2, 3)), axis=4)
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(tnn.logmeanexp(x, axis=1), jax.nn.logmeanexp(x, axis=1), rtol=1e-14)
