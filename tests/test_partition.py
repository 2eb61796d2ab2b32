"""tnp.partition and tnp.argpartition against jax.numpy's (64-bit types): values bit for bit
(jax.numpy's layout: the kth + 1 smallest ascending, then the rest descending; argpartition's
rest in index order), derivatives at ties (top_k's: ties go to the lower index), vmap, and
the partition property where JAX has no answer (a sequence of kth, complex values, axis=None),
eagerly and under tidu.jit."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import ml_dtypes
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402

RNG = np.random.default_rng(7)
INPUTS = [
    np.array([np.nan, 1.0, 2.0, -np.inf, np.inf, 0.0, -0.0, 1.0]),
    np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, 0.0]),
    RNG.integers(-2, 3, size=(3, 7)).astype(float),
    RNG.normal(size=(4, 5)),
    RNG.integers(-2, 3, size=(3, 6)),
    RNG.integers(-2, 3, size=(2, 5)).astype(np.int32),
    np.array([True, False, True, False]),
    np.array([np.nan, 1.0, -0.0, 0.0, 2.0, np.inf]).astype(np.float16),
    np.array([np.nan, 1.0, -0.0, 0.0, 2.0, -np.inf]).astype(ml_dtypes.bfloat16),
]


def bits(v):
    v = np.asarray(v)
    return v.view(f"uint{8 * v.dtype.itemsize}") if v.dtype.kind in "fV" else v


@pytest.mark.parametrize("name", ["partition", "argpartition"])
@pytest.mark.parametrize("i", range(len(INPUTS)))
def test_partition_is_jax_bit_for_bit(name, i):
    x = INPUTS[i]
    for ax in sorted({-1, 0}):
        n = x.shape[ax]
        for k in sorted({0, 1, n // 2, -2, -1}):
            want = np.asarray(getattr(jnp, name)(x, k, axis=ax))
            eager = getattr(tnp, name)(x, k, axis=ax)
            traced = tidu.jit(lambda v, k=k, ax=ax: getattr(tnp, name)(v, k, axis=ax))(x)
            for where, got in (("eager", eager), ("traced", traced)):
                assert got.dtype == (np.int64 if name == "argpartition" else x.dtype), where
                np.testing.assert_array_equal(bits(got), bits(want.astype(got.dtype)),
                                              err_msg=f"{name} {where} kth={k} axis={ax} of {x}")


@pytest.mark.parametrize("x", [np.array([1.0, 1.0, 1.0, 2.0, 0.0, 1.0]), np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0]),
                               RNG.integers(-1, 2, size=(3, 5)).astype(float), RNG.normal(size=(4, 5))])
def test_partition_derivatives_are_jaxs_at_ties(x):
    """JAX's two top_k calls each route a tie to its lower index, so an element tied across
    kth can be picked twice (and its twin not at all): the gradient shows it."""
    w = RNG.normal(size=x.shape)
    for ax in range(x.ndim):
        for k in sorted({0, 1, x.shape[ax] // 2, x.shape[ax] - 2}):
            want = jax.grad(lambda v, k=k, ax=ax: jnp.sum(w * jnp.partition(v, k, axis=ax)))(x)
            got = tidu.grad(lambda v, k=k, ax=ax: tnp.sum(w * tnp.partition(v, k, axis=ax)))(x)
            np.testing.assert_allclose(got, want, rtol=1e-14, atol=0, err_msg=f"kth={k} axis={ax}")
    t = RNG.normal(size=x.shape)
    want = jax.jvp(lambda v: jnp.partition(v, 1, axis=-1), (x,), (t,))[1]
    got = tidu.jvp(lambda v: tnp.partition(v, 1, axis=-1), (x,), (t,))[1]
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)


def test_partition_under_vmap_is_jaxs():
    x = RNG.integers(-2, 3, size=(3, 6)).astype(float)
    for name in ("partition", "argpartition"):
        for in_axes in (0, 1):
            got = tidu.vmap(lambda v, name=name: getattr(tnp, name)(v, 2), in_axes=in_axes)(x)
            want = jax.vmap(lambda v, name=name: getattr(jnp, name)(v, 2), in_axes=in_axes)(x)
            np.testing.assert_array_equal(got, want)


def _assert_partitioned(got, x, ks):
    """The partition property against NumPy's sort: got[k] is the k-th smallest, nothing
    before it larger, nothing after it smaller, and got is a permutation of x."""
    s = np.sort(x)
    for k in ks:
        np.testing.assert_array_equal(got[k], s[k])
        assert not np.any(got[:k] > s[k]) and not np.any(got[k + 1:] < s[k])
    np.testing.assert_array_equal(np.sort(got), s)


def test_partition_takes_a_sequence_of_kth_as_numpy():
    x = RNG.normal(size=9)
    for kth in ([1, 5], (6, 0, 3), np.array([-1, 2])):
        ks = [k % 9 for k in np.atleast_1d(kth)]
        eager, idx = tnp.partition(x, kth), tnp.argpartition(x, kth)
        _assert_partitioned(eager, x, ks)
        _assert_partitioned(x[idx], x, ks)
        np.testing.assert_array_equal(np.sort(idx), np.arange(len(x)))
        np.testing.assert_array_equal(tidu.jit(lambda v, kth=kth: tnp.partition(v, kth))(x), eager)
        np.testing.assert_array_equal(tidu.jit(lambda v, kth=kth: tnp.argpartition(v, kth))(x), idx)


def test_partition_orders_complex_values_as_sort():
    """jax.numpy refuses complex values; tidu orders them as its sort (NumPy's order, nan
    parts last), eagerly and traced alike."""
    z = np.array([1 + 1j, complex(np.nan, 0), 1 + 0j, complex(0, np.nan), 1 + 1j, -2 + 5j, 1 - 1j])
    s = np.sort(z)
    for k in range(len(z)):
        eager = tnp.partition(z, k)
        traced = tidu.jit(lambda v, k=k: tnp.partition(v, k))(z)
        np.testing.assert_array_equal(eager, traced)
        np.testing.assert_array_equal(eager[k], s[k])
        np.testing.assert_array_equal(np.sort(eager), s)
        idx = tnp.argpartition(z, k)
        np.testing.assert_array_equal(idx, tidu.jit(lambda v, k=k: tnp.argpartition(v, k))(z))
        np.testing.assert_array_equal(z[idx][:k + 1], eager[:k + 1])  # (the rest: in index order)
        np.testing.assert_array_equal(np.sort(z[idx]), s)


def test_partition_axis_none_flattens_as_numpy():
    x = RNG.normal(size=(3, 4))
    want = np.asarray(jnp.partition(x.ravel(), 5))
    np.testing.assert_array_equal(tnp.partition(x, 5, axis=None), want)
    np.testing.assert_array_equal(tidu.jit(lambda v: tnp.partition(v, 5, axis=None))(x), want)
    np.testing.assert_array_equal(tidu.jit(lambda v: tnp.argpartition(v, 5, axis=None))(x),
                                  jnp.argpartition(x.ravel(), 5))


@pytest.mark.parametrize("call, match", [
    (lambda x: tnp.partition(x, 8), "kth 8 is out of bounds for an axis of size 8"),
    (lambda x: tnp.argpartition(x, -9), "kth -9 is out of bounds"),
    (lambda x: tnp.partition(x, 1.5), "kth must be an int"),
    (lambda x: tnp.partition(x, []), "kth must be an int or a non-empty sequence"),
    (lambda x: tnp.partition(x[0], 0), "0-d array has no axis"),
    (lambda x: tnp.partition(x, 0, axis=1), "axis 1 is out of bounds"),
])
def test_partition_errors_say_what_and_where(call, match):
    x = np.arange(8.0)
    with pytest.raises((TypeError, ValueError), match=match):
        call(x)
    with pytest.raises((TypeError, ValueError), match=match):
        tidu.jit(call)(x)


def test_partition_refuses_a_traced_kth():
    with pytest.raises(TypeError, match="kth must be a constant int"):
        tidu.jit(lambda v, k: tnp.partition(v, k))(np.arange(4.0), 1)
