"""Sums, products, contractions and statistics of float16 and bfloat16 arrays: eager calls
give the traced calls' values (NumPy accumulates in half precision, tidu in float32 as
XLA), and both give JAX's where JAX rounds once."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tidu
import tidu.numpy as tnp

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

HALF = [ml_dtypes.bfloat16, np.float16]


def _data(dtype: type) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"x": (0.35 + 0.01 * rng.standard_normal(3000)).astype(dtype),
            "m": (0.35 + 0.01 * rng.standard_normal((40, 50))).astype(dtype),
            "y": np.full(60, 1.01, dtype=dtype)}


# name -> (function of a NumPy-like module and the data, the data it reads)
CASES = {
    "sum": lambda L, d: L.sum(d["x"]),
    "prod": lambda L, d: L.prod(d["y"]),
    "mean": lambda L, d: L.mean(d["x"]),
    "mean axis": lambda L, d: L.mean(d["m"], axis=1),
    "var": lambda L, d: L.var(d["x"]),
    "std": lambda L, d: L.std(d["m"], axis=0),
    "nanvar": lambda L, d: L.nanvar(d["x"]),
    "average": lambda L, d: L.average(d["x"]),
    "nansum": lambda L, d: L.nansum(d["x"]),
    "dot": lambda L, d: L.dot(d["x"], d["x"]),
    "matmul": lambda L, d: L.matmul(d["m"], d["m"].T),
    "einsum": lambda L, d: L.einsum("ij,ij->i", d["m"], d["m"]),
    "tensordot": lambda L, d: L.tensordot(d["m"], d["m"], axes=2),
    "trace": lambda L, d: L.trace(d["m"][:, :40]),
    "norm": lambda L, d: L.linalg.norm(d["x"]),
    "norm fro": lambda L, d: L.linalg.norm(d["m"], "fro"),
}


@pytest.mark.parametrize("dtype", HALF, ids=["bfloat16", "float16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_eager_equals_traced_equals_jax(name: str, dtype: type) -> None:
    fn, data = CASES[name], _data(dtype)
    eager = fn(tnp, data)
    traced = tidu.jit(lambda d: fn(tnp, d))(data)
    want = np.asarray(fn(jnp, data))
    assert np.asarray(eager).dtype == np.asarray(traced).dtype == want.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(np.asarray(eager), np.asarray(traced))
    np.testing.assert_array_equal(np.asarray(eager).astype(np.float32), want.astype(np.float32))


def test_numpy_alone_would_be_wrong() -> None:
    # what the eager call was before: NumPy's bfloat16 sum stops growing at 128 (ulp 1 > 0.35)
    x = np.full(5000, 0.35, dtype=ml_dtypes.bfloat16)
    assert float(np.sum(x)) == 128.0
    got = tnp.sum(x)
    assert float(got) == float(np.float32(x.astype(np.float32).sum()).astype(ml_dtypes.bfloat16))
    assert abs(float(tnp.mean(x)) - 0.35) < 2e-3


@pytest.mark.parametrize("dtype", HALF, ids=["bfloat16", "float16"])
def test_scans_accumulate_in_float32(dtype: type) -> None:
    # JAX's cumsum is an associative scan (its last element rounds differently); tidu adds
    # in float32 and rounds each prefix once
    x = _data(dtype)["x"]
    want = np.cumsum(x.astype(np.float32)).astype(dtype)
    for got in (tnp.cumsum(x), tidu.jit(tnp.cumsum)(x)):
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, want)
    y = _data(dtype)["y"]
    np.testing.assert_array_equal(tnp.cumprod(y), np.cumprod(y.astype(np.float32)).astype(dtype))


def test_eager_results_are_numpy_scalars_and_cached() -> None:
    x = _data(ml_dtypes.bfloat16)["x"]
    got = tnp.sum(x)
    assert isinstance(got, np.generic) and got.dtype == ml_dtypes.bfloat16
    assert tnp.sum(x, axis=0).dtype == ml_dtypes.bfloat16
    before = tidu.trace_cache_info().traces
    for _ in range(3):
        tnp.sum(x)
    assert tidu.trace_cache_info().traces == before  # one trace per signature and fixed arguments


def test_mixed_precision_follows_promotion() -> None:
    a = np.ones(3, dtype=np.float16)
    b = np.ones(3, dtype=np.float32)
    got = tnp.dot(a, b)
    assert got.dtype == np.float32 and float(got) == 3.0
    assert tnp.sum(a, dtype=np.float32).dtype == np.float32
