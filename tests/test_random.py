"""tidu.random (issue 31, item 5): Threefry-2x32 against Random123's known answers, keys
in jax.random's layout, the same draws eagerly (NumPy), traced on the NumPy back end and
in XLA, statistical sanity, gradients through reparameterized samples, errors."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest
from tidu.lowering import c_build

import tidu
import tidu.numpy as tnp
import tidu.random as tr
from tidu import portable

U32 = np.uint32

# Random123's kat_vectors for threefry2x32_20: (key, counter, result)
KAT = [((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
       ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
       ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0))]


@pytest.mark.parametrize("k,ctr,want", KAT)
def test_threefry_known_answers_eager_and_traced(k, ctr, want):
    key = np.array(k, U32)
    x0, x1 = np.array([ctr[0]], U32), np.array([ctr[1]], U32)
    got = tr.threefry_2x32(key, x0, x1)
    assert [int(v[0]) for v in got] == list(want)
    traced = tidu.jit(tr.threefry_2x32)(key, x0, x1)
    assert [int(np.asarray(v)[0]) for v in traced] == list(want)


def test_keys_have_jaxs_layout():
    jax = pytest.importorskip("jax")
    for seed in (0, 42, 2**32 + 7, 2**40 + 5):
        with jax.enable_x64(True):
            want = np.asarray(jax.random.key_data(jax.random.PRNGKey(seed)))
        np.testing.assert_array_equal(tr.key(seed), want)
        assert tr.PRNGKey(seed).dtype == U32
    np.testing.assert_array_equal(tidu.jit(tr.key)(np.int64(2**40 + 5)), tr.key(2**40 + 5))


def _draws(k):
    """Several draws of one key, as one function (one program per back end)."""
    k1, k2, k3 = tr.split(k, 3)
    return {
        "bits": tr.random_bits(k1, (7,)),
        "bits64": tr.random_bits(k1, (2, 3), 64),
        "bits8": tr.random_bits(k2, (5,), 8),
        "uniform": tr.uniform(k1, (3, 4)),
        "uniform32": tr.uniform(k2, (5,), np.float32, -1.0, 2.0),
        "uniform_bf16": tr.uniform(k3, (4,), "bfloat16"),
        "normal": tr.normal(k2, (2, 3)),
        "normal32": tr.normal(k3, (5,), np.float32),
        "normal16": tr.normal(k1, (3,), np.float16),
        "gumbel": tr.gumbel(k3, (2, 2)),
        "uniform64": tr.uniform(k3, (6,), np.float64, -3.0, 0.5),
        "bernoulli": tr.bernoulli(k3, np.array([0.1, 0.5, 0.9])),
        "randint": tr.randint(k1, (6,), -3, 11),
        "categorical": tr.categorical(k2, np.log(np.array([[0.2, 0.3, 0.5], [0.7, 0.2, 0.1]])), shape=(4, 2)),
        "choice": tr.choice(k3, 9, (4,), replace=False),
        "permutation": tr.permutation(k1, np.arange(10.0)),
        "split": tr.split(k, 4),
        "fold_in": tr.fold_in(k, 12345),
    }


KEYS = [tr.key(0), tr.key(1), tr.key(2**33 + 9), tr.fold_in(tr.key(5), 3)]


def _same(got, want, name):
    """Every draw is the same number on every back end, to the last bit (floats too: the
    maps after the bits are tidu.portable's)."""
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, name
    np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("i", range(len(KEYS)))
def test_eager_equals_traced_numpy(i):
    k = KEYS[i]
    eager = _draws(k)
    traced = tidu.jit(_draws)(k)
    for name, want in eager.items():
        assert isinstance(want, np.ndarray), name  # eager draws are NumPy's
        _same(traced[name], want, name)


def _few_draws(k):
    """One draw of each kind of map (bits, exact floats, tidu.portable's log/cos, the
    bounded affine map): what the default run compiles for XLA."""
    k1, k2 = tr.split(k)
    return {"bits": tr.random_bits(k1, (5,)), "normal": tr.normal(k2, (4,)),
            "uniform": tr.uniform(k1, (3,), np.float32, -1.0, 2.0), "randint": tr.randint(k2, (3,), 0, 7)}


# every draw of _draws in one XLA program (the slow step): its compilation takes half a minute
@pytest.mark.parametrize("draws", [_few_draws, pytest.param(_draws, marks=pytest.mark.slow)],
                         ids=["few", "every"])
def test_xla_equals_numpy(draws):
    pytest.importorskip("jax")
    on_xla = tidu.jit(draws, device="cpu")
    for k in KEYS[:2]:  # one compilation, two keys
        eager = draws(k)
        got = on_xla(k)
        for name, want in eager.items():
            _same(got[name], want, name)


@pytest.mark.slow
def test_xla_equals_numpy_for_more_keys_and_shapes():
    pytest.importorskip("jax")
    for shape in [(1,), (2, 5), (33,)]:
        f = tidu.jit(lambda k, shape=shape: (tr.uniform(k, shape), tr.normal(k, shape, np.float32),
                                             tr.random_bits(k, shape), tr.gumbel(k, shape)), device="cpu")
        for k in KEYS:
            want = (tr.uniform(k, shape), tr.normal(k, shape, np.float32), tr.random_bits(k, shape),
                    tr.gumbel(k, shape))
            for g, w, name in zip(f(k), want, ("uniform", "normal", "bits", "gumbel"), strict=True):
                _same(g, w, name)


def test_traced_keys_inside_a_transform():
    k = tr.key(3)
    f = tidu.jit(lambda k, d: tr.uniform(tr.fold_in(k, d), (3,)))
    np.testing.assert_array_equal(f(k, np.int32(7)), tr.uniform(tr.fold_in(k, 7), (3,)))
    assert not np.array_equal(f(k, np.int32(7)), f(k, np.int32(8)))


def test_split_and_fold_in_make_distinct_keys():
    keys = np.concatenate([tr.split(tr.key(0), 50), tr.split(tr.key(1), 50),
                           np.stack([tr.fold_in(tr.key(0), d) for d in range(50)])])
    assert len({tuple(k) for k in keys.tolist()}) == 150
    assert not np.array_equal(tr.split(tr.key(0))[0], tr.key(0))


# --- statistics (a few standard errors) ---------------------------------------------------


def test_uniform_and_normal_moments():
    n = 20000
    u = tr.uniform(tr.key(11), (n,))
    assert u.min() >= 0.0 and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 4 * np.sqrt(1 / 12 / n)
    assert abs(u.var() - 1 / 12) < 4 * np.sqrt(1 / 180 / n)
    z = tr.normal(tr.key(12), (n,))
    assert abs(z.mean()) < 4 / np.sqrt(n)
    assert abs(z.var() - 1) < 4 * np.sqrt(2 / n)
    assert abs(np.mean(z ** 3)) < 4 * np.sqrt(15 / n)  # symmetric
    for dtype in ("float32", "float16", "bfloat16"):
        v = tr.uniform(tr.key(13), (4000,), dtype).astype(np.float64)
        assert v.min() >= 0 and v.max() < 1 and abs(v.mean() - 0.5) < 0.02, dtype
    w = tr.uniform(tr.key(14), (n,), minval=-2.0, maxval=3.0)
    assert w.min() >= -2 and w.max() < 3 and abs(w.mean() - 0.5) < 4 * 5 * np.sqrt(1 / 12 / n)


def test_discrete_frequencies():
    n = 20000
    b = tr.bernoulli(tr.key(21), 0.3, (n,))
    assert abs(b.mean() - 0.3) < 4 * np.sqrt(0.21 / n)
    r = tr.randint(tr.key(22), (n,), 2, 7)
    assert r.min() == 2 and r.max() == 6
    counts = np.bincount(r - 2, minlength=5) / n
    assert np.all(np.abs(counts - 0.2) < 4 * np.sqrt(0.16 / n))
    p = np.array([0.1, 0.2, 0.3, 0.4])
    c = tr.categorical(tr.key(23), np.log(p), shape=(n,))
    freq = np.bincount(c, minlength=4) / n
    assert np.all(np.abs(freq - p) < 4 * np.sqrt(p * (1 - p) / n))
    picks = tr.choice(tr.key(24), 10, (5,), replace=False)
    assert len(set(picks.tolist())) == 5 and picks.min() >= 0 and picks.max() < 10
    # the 2000 permutations in one batched call (one by one, each is ~90 eager ops: 3.4 s);
    # the same draws as one by one
    first = np.asarray(tidu.vmap(lambda i: tr.permutation(tr.fold_in(tr.key(25), i), 4)[0])(np.arange(2000)))
    assert [int(tr.permutation(tr.fold_in(tr.key(25), i), 4)[0]) for i in (0, 1, 1999)] == first[[0, 1, 1999]].tolist()
    assert np.all(np.abs(np.bincount(first, minlength=4) / 2000 - 0.25) < 4 * np.sqrt(0.1875 / 2000))
    weighted = tr.choice(tr.key(26), np.array([10.0, 20.0, 30.0]), (n,), p=np.array([0.5, 0.25, 0.25]))
    assert abs(np.mean(weighted == 10.0) - 0.5) < 4 * np.sqrt(0.25 / n)


# --- gradients ----------------------------------------------------------------------------


def test_gradient_through_a_reparameterized_sample():
    k = tr.key(31)
    z = tr.normal(k, (500,))

    def loss(sigma, mu):
        x = tr.normal(k, (500,)) * sigma + mu
        return tnp.mean(x ** 2)

    gs, gm = tidu.grad(loss, argnums=(0, 1))(1.5, -0.25)
    np.testing.assert_allclose(gs, np.mean(2 * (z * 1.5 - 0.25) * z), rtol=1e-12)
    np.testing.assert_allclose(gm, np.mean(2 * (z * 1.5 - 0.25)), rtol=1e-12)
    # the key traced too (inside jit): integers carry no tangent, sigma does
    traced = tidu.grad(lambda s, k: tnp.sum(tidu.jit(lambda s, k: tr.normal(k, (4,)) * s)(s, k)))(2.0, k)
    np.testing.assert_allclose(traced, np.sum(tr.normal(k, (4,))), rtol=1e-12)
    # uniform in its bounds
    u = tr.uniform(k, (6,))
    ga, gb = tidu.grad(lambda a, b: tnp.sum(tr.uniform(k, (6,), minval=a, maxval=b)), argnums=(0, 1))(-1.0, 2.0)
    np.testing.assert_allclose([ga, gb], [np.sum(1 - u), np.sum(u)], rtol=1e-12)


# --- errors -------------------------------------------------------------------------------


def test_errors_name_the_argument():
    with pytest.raises(TypeError, match=r"tidu.random.uniform: key must be a uint32 array.*float64\[2\]"):
        tr.uniform(np.array([0.0, 1.0]))
    with pytest.raises(TypeError, match="tidu.random.normal: key must be a key.*int 3"):
        tr.normal(3)
    with pytest.raises(TypeError, match=r"key must be a uint32 array.*uint32\[2, 2\]"):
        tr.normal(tr.split(tr.key(0)))
    with pytest.raises(TypeError, match="tidu.random.uniform: dtype must be a float dtype.*int32"):
        tr.uniform(tr.key(0), (2,), np.int32)
    with pytest.raises(TypeError, match="tidu.random.randint: dtype must be an integer dtype"):
        tr.randint(tr.key(0), (2,), 0, 3, np.float64)
    with pytest.raises(TypeError, match="tidu.random.key: seed must be an integer"):
        tr.key(1.5)
    with pytest.raises(ValueError, match="tidu.random.choice: cannot take 5 elements of 3"):
        tr.choice(tr.key(0), 3, (5,), replace=False)
    with pytest.raises(TypeError, match="tidu.random.uniform: shape must be a tuple of ints"):
        tr.uniform(tr.key(0), (2.5,))
    with pytest.raises(TypeError, match=r"key must be a uint32 array.*float32\[2\]"):
        tidu.jit(lambda k: tr.normal(k))(np.zeros(2, np.float32))


def test_portable_log_and_cos_are_accurate():
    """tidu.portable's log and cos(2 pi u) within 2 ulp of the exact values (mpmath at 200
    bits), on the range the draws use and beyond."""
    mpmath = pytest.importorskip("mpmath")
    rng = np.random.default_rng(7)
    u = np.concatenate([rng.integers(0, 2**53, 300) * 2.0**-53, [0.0, 0.125, 0.25, 0.5, 0.75, 1 - 2.0**-53]])
    x = np.concatenate([1.0 - u[u < 1] + 2.0**-54, np.exp(rng.uniform(-700, 700, 100)), [2.0**-1022, 1.0, 2.0]])
    with mpmath.workprec(200):
        want_log = np.array([float(mpmath.log(mpmath.mpf(float(v)))) for v in x])
        want_cos = np.array([float(mpmath.cos(2 * mpmath.pi * mpmath.mpf(float(v)))) for v in u])
    want_cos[np.abs(want_cos) < 1e-50] = 0.0  # cos(pi / 2) is 0: mpmath's is pi's rounding error
    for got, want in ((portable.log(x), want_log), (portable.cos_2pi(u), want_cos)):
        ulps = np.abs(got - want) / np.spacing(np.maximum(np.abs(want), 2.0**-1022))
        assert ulps.max() <= 2, ulps.max()


def test_portable_functions_round_alike_on_xla():
    """The reason tidu.portable exists: XLA fuses a multiply feeding an add (one rounding),
    NumPy does not; the exact products make both give the same bits."""
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(3)
    a, b, c = rng.random((3, 20000))
    fused = np.asarray(jax.jit(lambda a, b, c: a * b + c)(a, b, c))
    assert np.any(fused != a * b + c)  # the fusion this guards against happens here
    f = tidu.jit(lambda a, b, c: (portable.mul(a, b) + c, portable.log(a), portable.cos_2pi(b)), device="cpu")
    for got, want in zip(f(a, b, c), (portable.mul(a, b) + c, portable.log(a), portable.cos_2pi(b)), strict=True):
        np.testing.assert_array_equal(got, want)


def test_draws_through_to_jax_are_the_same():
    jax = pytest.importorskip("jax")
    k = KEYS[2]
    f = tidu.to_jax(lambda k: (tr.normal(k, (4,)), tr.gumbel(k, (3,)), tr.uniform(k, (3,), minval=-1.0, maxval=4.0)))
    for got, want in zip(jax.jit(f)(k), (tr.normal(k, (4,)), tr.gumbel(k, (3,)),
                                         tr.uniform(k, (3,), minval=-1.0, maxval=4.0)), strict=True):
        np.testing.assert_array_equal(np.asarray(got), want)


def test_draws_in_the_c_back_end_are_the_same():
    pytest.importorskip("cffi")
    if c_build.compiler_or_none() is None:
        pytest.skip("no C compiler")
    k = KEYS[1]
    program = tidu.make_graph(lambda k: (tr.normal(k, (6,)), tr.gumbel(k, (4,)),
                                         tr.uniform(k, (3,), minval=-2.0, maxval=3.0)))(k).program
    for got, want in zip(program.run([k], backend="c"), program.eval([k]), strict=True):
        np.testing.assert_array_equal(got, want)
