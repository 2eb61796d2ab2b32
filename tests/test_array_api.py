"""The array API standard on traced values (tidu.numpy.array_api): a subset of the
standard's functions called with its own signatures under tidu.jit, against NumPy
(whose namespace implements the standard since 2.0), item assignment on traced values,
and SciPy's array-API code (SCIPY_ARRAY_API=1, in a subprocess: SciPy reads it at
import) traced and differentiated."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp
from tidu.numpy import array_api as xp

RNG = np.random.default_rng(7)
X = RNG.uniform(0.2, 0.9, (3, 4))
Y = RNG.uniform(0.2, 0.9, (3, 4))

UNARY = ["abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "conj", "cos", "cosh", "exp", "expm1",
         "floor", "imag", "isfinite", "isinf", "isnan", "log", "log1p", "log2", "log10", "logical_not", "negative",
         "positive", "real", "reciprocal", "round", "sign", "signbit", "sin", "sinh", "sqrt", "square", "tan", "tanh",
         "trunc"]
BINARY = ["add", "atan2", "copysign", "divide", "equal", "floor_divide", "greater", "greater_equal", "hypot", "less",
          "less_equal", "logaddexp", "logical_and", "logical_or", "logical_xor", "maximum", "minimum", "multiply",
          "not_equal", "pow", "remainder", "subtract"]
# the standard's calls (keyword-only and positional-only arguments as it spells them)
CALLS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "sum": lambda m, x, y: m.sum(x, axis=0, dtype=m.float64, keepdims=True),
    "prod": lambda m, x, y: m.prod(x, axis=(0, 1)),
    "mean": lambda m, x, y: m.mean(x, axis=1, keepdims=True),
    "max": lambda m, x, y: m.max(x, axis=0),
    "min": lambda m, x, y: m.min(x, axis=1, keepdims=True),
    "std": lambda m, x, y: m.std(x, axis=0, correction=1),
    "var": lambda m, x, y: m.var(x, correction=0.5, keepdims=True),
    "cumulative_sum": lambda m, x, y: m.cumulative_sum(x, axis=1, include_initial=True),
    "cumulative_prod": lambda m, x, y: m.cumulative_prod(x, axis=0),
    "argmax": lambda m, x, y: m.argmax(x, axis=1),
    "argmin": lambda m, x, y: m.argmin(x, axis=0, keepdims=True),
    "sort": lambda m, x, y: m.sort(x, axis=1, descending=True),
    "argsort": lambda m, x, y: m.argsort(x, axis=0, stable=True),
    "where": lambda m, x, y: m.where(x > y, x, y),
    "clip": lambda m, x, y: m.clip(x, min=0.3, max=0.7),
    "all": lambda m, x, y: m.all(x > 0.5, axis=1),
    "any": lambda m, x, y: m.any(x > 0.8),
    "diff": lambda m, x, y: m.diff(x, axis=1, n=2),
    "matmul": lambda m, x, y: m.matmul(x, m.matrix_transpose(y)),
    "tensordot": lambda m, x, y: m.tensordot(x, y, axes=2),
    "vecdot": lambda m, x, y: m.vecdot(x, y, axis=0),
    "astype": lambda m, x, y: m.astype(x, m.float32),
    "reshape": lambda m, x, y: m.reshape(x, (2, -1)),
    "permute_dims": lambda m, x, y: m.permute_dims(m.expand_dims(x, axis=0), (2, 0, 1)),
    "squeeze": lambda m, x, y: m.squeeze(m.expand_dims(x, axis=1), axis=1),
    "concat": lambda m, x, y: m.concat([x, y], axis=1),
    "stack": lambda m, x, y: m.stack((x, y), axis=-1),
    "unstack": lambda m, x, y: m.unstack(x, axis=1),
    "flip": lambda m, x, y: m.flip(x, axis=0),
    "roll": lambda m, x, y: m.roll(x, 2, axis=1),
    "moveaxis": lambda m, x, y: m.moveaxis(x, 0, -1),
    "repeat": lambda m, x, y: m.repeat(x, 2, axis=0),
    "tile": lambda m, x, y: m.tile(x, (2, 1)),
    "broadcast_to": lambda m, x, y: m.broadcast_to(x[:1], (3, 4)),
    "broadcast_arrays": lambda m, x, y: m.broadcast_arrays(x, y[0]),
    "take": lambda m, x, y: m.take(x, m.asarray([2, 0]), axis=1),
    "take_along_axis": lambda m, x, y: m.take_along_axis(x, m.argsort(y, axis=1), axis=1),
    "tril": lambda m, x, y: m.tril(x, k=1),
    "triu": lambda m, x, y: m.triu(x),
    "meshgrid": lambda m, x, y: m.meshgrid(x[0], y[:, 0], indexing="ij"),
    "zeros_like": lambda m, x, y: m.zeros_like(x, dtype=m.float32) + x,
    "full_like": lambda m, x, y: m.full_like(x, 2.0) * x,
    "new arrays": lambda m, x, y: (m.zeros((3, 4)) + m.ones((3, 4)) + m.eye(3, 4, k=1) + m.full((3, 4), 0.5)
                                   + m.arange(4, dtype=m.float64) + m.linspace(0.0, 1.0, 4)) * x,
    "linalg": lambda m, x, y: m.linalg.inv(m.matmul(x, m.matrix_transpose(x)) + m.eye(3)),
    "fft": lambda m, x, y: m.fft.rfft(x, axis=1),
}


def _same(got: Any, want: Any) -> None:
    got, want = (got, want) if isinstance(want, tuple | list) else ((got,), (want,))
    for a, b in zip(got, want, strict=True):
        b = np.asarray(b)
        assert np.asarray(a).dtype == b.dtype
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", UNARY)
def test_unary_elementwise(name: str) -> None:
    x = X + 1.0 if name == "acosh" else X
    _same(tidu.jit(getattr(xp, name))(x), getattr(np, name)(x))


@pytest.mark.parametrize("name", BINARY)
def test_binary_elementwise(name: str) -> None:
    _same(tidu.jit(getattr(xp, name))(X, Y), getattr(np, name)(X, Y))


@pytest.mark.parametrize("name", list(CALLS))
def test_functions_with_the_standard_signatures(name: str) -> None:
    call = CALLS[name]
    _same(tidu.jit(lambda x, y: call(xp, x, y))(X, Y), call(np, X, Y))


def test_namespace_dtypes_and_inspection() -> None:
    def f(x: Any) -> Any:
        assert x.__array_namespace__() is xp and x.__array_namespace__(api_version="2023.12") is xp
        assert x.device == "cpu" and x.to_device("cpu") is x
        assert xp.isdtype(x.dtype, "real floating") and xp.isdtype(x.dtype, ("integral", "real floating"))
        assert not xp.isdtype(x.dtype, "complex floating") and xp.isdtype(x.dtype, xp.float64)
        assert xp.result_type(x, xp.float32) == xp.float64 and xp.finfo(x).eps == np.finfo(float).eps
        return x.mT
    tidu.jit(f)(X)
    assert xp.__array_api_version__ == "2023.12"
    info = xp.__array_namespace_info__()
    assert info.devices() == ["cpu"] and set(info.dtypes(kind="real floating")) == {"float32", "float64"}
    with pytest.raises(ValueError, match="2023.12"):
        tidu.jit(lambda x: x.__array_namespace__(api_version="2099.01"))(X)
    with pytest.raises(ValueError, match="one device"):
        tidu.jit(lambda x: xp.asarray(x, device="gpu"))(X)
    with pytest.raises(ValueError, match="unknown kind"):
        xp.isdtype(xp.float64, "floating")


def test_item_assignment_on_traced_values() -> None:
    """x[i] = v rebinds this object to x.at[i].set(v); what was computed from x before,
    and an asarray(copy=True) taken before, keep their values; a traced mask is a where."""
    def f(x: Any, y: Any) -> Any:
        before = x * 1.0
        kept = xp.asarray(x, copy=True)
        x[0] = y[1]
        x[1:, 2] = 0.5
        x[x > 0.6] = -1.0
        z = xp.zeros((4,))
        z[1:3] = y[0, :2]
        return x, before, kept, z

    want_x = X.copy()
    want_x[0] = Y[1]
    want_x[1:, 2] = 0.5
    want_x[want_x > 0.6] = -1.0
    want_z = np.zeros(4)
    want_z[1:3] = Y[0, :2]
    _same(tidu.jit(f)(X.copy(), Y), (want_x, X, X, want_z))
    # the assignment's derivative: the overwritten entries have none
    g = tidu.grad(lambda x: tnp.sum(_assigned(x) ** 2))(X)
    want = 2 * X
    want[0] = 0.0
    np.testing.assert_allclose(g, want)


def _assigned(x: Any) -> Any:
    x = xp.asarray(x, copy=True)
    x[0] = 0.0
    return x


SCIPY = textwrap.dedent("""
    import numpy as np, scipy.optimize as so, scipy.special as ss, scipy.stats as st
    import tidu, tidu.numpy as tnp
    x = np.array([1.2, 0.8, 1.5, 0.3, -0.4]); p = np.array([0.3, -0.2, 0.5, 1.0, 0.1])
    close = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)
    close(tidu.grad(so.rosen)(x), so.rosen_der(x))
    close(tidu.hessian(so.rosen)(x), so.rosen_hess(x))
    # rosen_der assigns into a new array: JAX cannot trace it, tidu can
    close(tidu.grad(lambda v: tnp.sum(so.rosen_der(v) ** 2))(x), 2 * so.rosen_hess(x) @ so.rosen_der(x))
    close(tidu.jit(so.rosen_hess_prod)(x, p), so.rosen_hess(x) @ p)
    close(tidu.grad(ss.logsumexp)(x), ss.softmax(x))
    close(tidu.grad(lambda v: tnp.sum(ss.log_softmax(v) * p))(x), p - ss.softmax(x) * p.sum())
    z = lambda v: tnp.sum(st.zscore(v) ** 3)
    h = 1e-6
    fd = [(float(z(x + h * e)) - float(z(x - h * e))) / (2 * h) for e in np.eye(5)]
    close(float(tidu.jit(z)(x)), np.sum(st.zscore(x) ** 3))
    np.testing.assert_allclose(tidu.grad(z)(x), fd, rtol=1e-6)
    print("scipy ok")
""")


def test_scipy_array_api_code_traces_and_differentiates() -> None:
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    run = subprocess.run([sys.executable, "-c", SCIPY], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0 and "scipy ok" in run.stdout, run.stderr[-3000:]
