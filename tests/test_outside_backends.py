"""An outside tester's checks of the back ends (NumPy, StableHLO on XLA, C, ``to_jax``)
against JAX (x64): integer and bitwise ops with wraparound and shifts past the width,
dynamic indices out of range, empty, rank-0 and rank-8 shapes, float-to-integer
conversion of nan, inf and out-of-range values, sums and products of 2-byte floats,
determinism of the StableHLO text and saved programs.

Tests marked ``xfail(strict=True)`` fail today; each reason says what is wrong (the fix
lies outside the back ends; a proposed diff is in the report)."""

from __future__ import annotations

import io
import os
import warnings

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import ml_dtypes
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from jax import lax as jlax  # noqa: E402
from tidu.lowering import c_build  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402
from tidu import lax as tlax  # noqa: E402

HAVE_CC = c_build.compiler_or_none() is not None


@pytest.fixture(scope="module", autouse=True)
def cache_dir(tmp_path_factory: pytest.TempPathFactory):
    """Compiled C goes to a fresh folder, not the user's cache."""
    folder = tmp_path_factory.mktemp("tidu_c_cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIDU_CACHE_DIR", str(folder))
        yield folder


def _same(got, want, rtol=1e-12, atol=1e-14, exact=False):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if exact or want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.complex128), want.astype(np.complex128), rtol=rtol, atol=atol,
                                   equal_nan=True)


def _backends(fn, args, backends=("numpy", "xla", "c", "to_jax")):
    """Results of ``fn(tnp, tlax, *args)`` per back end (a list of outputs each)."""
    program = tidu.make_graph(lambda *a: fn(tnp, tlax, *a))(*args).program
    out = {}
    for b in backends:
        if b == "c" and not HAVE_CC:
            continue
        if b == "to_jax":
            out[b] = [np.asarray(v) for v in jax.tree_util.tree_leaves(
                jax.jit(tidu.to_jax(lambda *a: fn(tnp, tlax, *a)))(*args))]
        else:
            out[b] = program.run(list(args), backend=b)
    return out


def _oracle(fn, args):
    return [np.asarray(v) for v in jax.tree_util.tree_leaves(jax.jit(lambda *a: fn(jnp, jlax, *a))(*args))]


def _check_all(fn, args, backends=("numpy", "xla", "c", "to_jax"), **tol):
    want = _oracle(fn, args)
    for b, got in _backends(fn, args, backends).items():
        assert len(got) == len(want), b
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            try:
                _same(g, w, **tol)
            except AssertionError as e:
                raise AssertionError(f"backend {b}, output {i}: {e}") from None


# --- regression guards: what agrees today ---------------------------------------------------

def _int_ops(m, l, a, b, s):
    return (a + b, a - b, a * b, a & b, a | b, a ^ b, ~a, -a, m.maximum(a, b), m.minimum(a, b),
            a < b, a == b, m.where(a > b, a, b), l.shift_left(a, s), l.shift_right_logical(a, s),
            l.shift_right_arithmetic(a, s), m.sum(a), m.max(a), m.cumsum(a).astype(a.dtype), m.sort(a),
            m.argsort(a, stable=True), m.abs(a), a.astype(np.int8), a.astype(np.uint32), a.astype(np.float64))


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "uint32"])
def test_integer_wraparound_and_shifts_past_the_width_agree_on_every_back_end(dtype):
    info = np.iinfo(dtype)
    if info.min < 0:
        a = np.array([0, 1, -1, 7, -7, info.max, info.min, info.max - 1, 3, -3], dtype)
        s = np.array([0, 1, 3, info.bits - 1, info.bits, info.bits + 3, -1, 2, 70, 5], dtype)
    else:
        a = np.array([0, 1, 2, 7, 100, info.max, info.max - 1, 3, 5, 9], dtype)
        s = np.array([0, 1, 3, info.bits - 1, info.bits, info.bits + 3, info.max, 2, 70, 5], dtype)
    _check_all(_int_ops, (a, np.roll(a, 3), s))


def _index_ops(m, l, a, i, s, t):
    at = np.array([0, -1, 2, -3, 1])
    return (m.take(a[0], i, mode="clip"), m.take(a[0], i, mode="wrap"), a[s], a[:, t], a[:, i[:4]], a[s, t],
            l.dynamic_slice(a, (s, t), (2, 3)), l.dynamic_slice(a, (-s, -t), (2, 2)),
            l.dynamic_update_slice(a, m.ones((2, 2)), (s, t)), l.dynamic_index_in_dim(a, t, axis=1, keepdims=False),
            a.at[0, at[:4]].set(100.0), a[0].at[at].add(10.0), a[0].at[at[:4]].min(-50.0))


@pytest.mark.parametrize("s,t", [(-2, 7), (1, -1), (5, -9)])
def test_negative_and_out_of_range_dynamic_indices_agree_on_every_back_end(s, t):
    a = np.arange(12.0).reshape(3, 4) - 5.5
    i = np.array([0, -1, 2, -3, 5, -7, 1], np.int32)
    _check_all(_index_ops, (a, i, np.array(s, np.int32), np.array(t, np.int32)))


def _shape_ops(m, l, a):
    return (m.sum(a, axis=0), m.prod(a, axis=-1), a * 2.0 + 1.0, m.exp(a).T, a.reshape(-1),
            a.T @ a if a.ndim == 2 else m.sin(a) * a[::-1],
            m.cumsum(a, axis=0), m.concatenate([a, a], axis=0), m.pad(a, 1))


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (), (2, 1, 3, 1, 2, 1, 2, 1)])
def test_empty_rank0_and_rank8_shapes_agree_on_every_back_end(shape):
    a = (np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) * 0.1 - 0.3)
    if a.ndim == 0:
        _check_all(lambda m, l, x: (m.exp(x), x * x + 1, m.broadcast_to(x, (2, 3)) * 1.0, x.reshape(1, 1)), (a,))
    else:
        _check_all(_shape_ops, (a,))


def test_program_text_is_deterministic_and_saved_programs_run_the_same(tmp_path):
    def f(x, k, z):
        return (tnp.sum(tnp.sin(x) * x), k << 3, k >> 40, z * tnp.conj(z), np.nan * x, -0.0 * x,
                tnp.where(x > 0, np.inf, -np.inf), x.astype(np.int32))

    args = (np.array([0.1, -0.0, np.nan, 2.0]), np.array([1, -2, 3, 2 ** 40], np.int64),
            np.array([1 + 1j, np.nan + 0j], np.complex64))
    p = tidu.make_graph(f)(*args).program
    tidu.clear_cache()
    q = tidu.make_graph(f)(*args).program
    assert p is not q and p.to_stablehlo() == q.to_stablehlo()
    if HAVE_CC:
        assert p.to_c() == q.to_c()
    path = tmp_path / "p.tidu"
    p.save(path)
    loaded = tidu.load_program(path)
    assert loaded.to_stablehlo() == p.to_stablehlo()
    a, b = io.BytesIO(), io.BytesIO()
    p.save(a)
    loaded.save(b)
    assert a.getvalue() == b.getvalue()
    for backend in ("numpy", "xla"):
        for g, w in zip(loaded.run(list(args), backend=backend), p.run(list(args), backend=backend), strict=True):
            assert g.dtype == w.dtype and g.tobytes() == w.tobytes()


# --- float to integer conversion: nan, infinities, values past the range --------------------

F2I = np.array([0.5, -1.5, 2.7, -0.0, np.nan, np.inf, -np.inf, 3e9, -3e9, 1e20, 300.0, -129.0, 255.9, 65536.5])
INTS = ["int8", "int16", "int32", "int64", "uint8", "uint32", "uint64"]


def _to_ints(m, l, x):
    return tuple(x.astype(d) for d in INTS)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_float_to_integer_conversion_saturates_as_jax_on_xla_and_c(dtype):
    # C: a float past the integer's range cast in C is undefined behaviour; it gave
    # 0 for 3e9 -> uint32 (JAX: 3000000000 ... 4294967295 for inf, 0 for nan and -3e9)
    _check_all(_to_ints, (F2I.astype(dtype),), backends=("xla", "c", "to_jax"))


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler")
def test_c_float_to_integer_conversion_is_a_defined_helper():
    text = tidu.to_c(lambda x: x.astype(np.int32), np.ones(3))
    assert "tidu_float64_to_int32(" in text


def test_float_to_integer_conversion_saturates_as_jax_on_numpy_and_eagerly():
    # NumPy's astype leaves these to the platform (nan -> int32 was -2147483648, JAX 0;
    # inf -> int8 was 0, JAX 127): the NumPy back end and eager calls saturate as XLA
    _check_all(_to_ints, (F2I,), backends=("numpy",))
    for d in INTS:
        want = np.asarray(jnp.asarray(F2I).astype(d))
        np.testing.assert_array_equal(tnp.astype(F2I, d), want)
        np.testing.assert_array_equal(tnp.asarray(F2I, dtype=d), want)
        np.testing.assert_array_equal(tidu.jit(lambda x: x[4].astype(d))(F2I), want[4])  # noqa: B023 (rank 0)


# --- 2-byte floats: sums and products accumulate in float32 (JAX's) -------------------------

HALF_X = (np.ones(5000) * 0.1 + np.arange(5000) * 1e-4)


def _half_reductions(m, l, x):
    return m.sum(x), m.sum(x.reshape(50, 100), axis=1), m.prod(x[:60] * 0 + 1.01)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_half_precision_sums_and_products_on_xla_are_jax_bit_for_bit(dtype):
    # XLA multiplied bfloat16 in bfloat16: prod of 60 x 1.01 was 1.4297, JAX 1.4766
    _check_all(_half_reductions, (HALF_X.astype(dtype),), backends=("xla", "to_jax"), exact=True)


def test_half_precision_sum_lowers_through_float32():
    text = tidu.to_stablehlo(lambda x: tnp.sum(x), HALF_X.astype(ml_dtypes.bfloat16))
    assert "stablehlo.convert" in text and "applies stablehlo.add" in text and "tensor<f32>" in text
    # other dtypes keep one reduce in their own type (unchanged text)
    text = tidu.to_stablehlo(lambda x: tnp.sum(x), HALF_X)
    assert "stablehlo.convert" not in text


def test_half_precision_sums_on_numpy_as_jax():
    x = HALF_X.astype(ml_dtypes.bfloat16)
    _check_all(_half_reductions, (x,), backends=("numpy",), rtol=1e-2, atol=1e-2)


# --- front-end issues every back end shows --------------------------------------------------

def test_complex_to_bool_is_nonzero_in_either_part():
    z = np.array([0j, 1j, 1 + 0j, -0.0 + 0j], np.complex128)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _check_all(lambda m, l, a: (a.astype(bool),), (z,), backends=("numpy", "xla"))


def test_uint64_division_is_exact():
    """(2**64-1) // 2 was 0 on every back end: the rest after the float64 quotient is
    negative there, and wrapped as an unsigned value (JAX 9223372036854775807)."""
    a = np.array([2 ** 64 - 1, 2 ** 63 + 5, 7, 2 ** 64 - 1, 2 ** 64 - 3, 2 ** 63], np.uint64)
    b = np.array([2, 3, 2, 1, 2 ** 64 - 1, 2 ** 63 - 1], np.uint64)
    _check_all(lambda m, l, x, y: (x // y, l.div(x, y)), (a, b), backends=("numpy", "xla"))
