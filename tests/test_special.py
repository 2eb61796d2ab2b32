"""tidu.scipy.special (the primitives erf and erfc of rules/special.rules, and the
compositions) and tidu.nn.gelu(approximate=False) against jax.scipy.special: values,
first and second derivatives on a grid inside each domain, float32 and float64, eager
and traced, StableHLO run by XLA, and the C back end."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.special

os.environ.setdefault("JAX_PLATFORMS", "cpu")
jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jax.scipy.special as jss  # noqa: E402
from tidu.lowering import c_build  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402
from tidu.scipy import special as tss  # noqa: E402

# name -> (the grid inside its domain, jax's function); two-operand functions get a
# second grid shifted into the second operand's domain
GRID = np.linspace(-2.5, 2.5, 10)  # 0 is not on it: see xlogy
UNIT = np.linspace(0.05, 0.95, 10)
POSITIVE = np.linspace(0.2, 3.0, 10)
UNARY: dict[str, tuple[np.ndarray, Callable[..., Any]]] = {
    "erf": (GRID, jss.erf),
    "erfc": (GRID, jss.erfc),
    "ndtr": (GRID, jss.ndtr),
    "expit": (GRID, jss.expit),
    "logit": (UNIT, jss.logit),
    "entr": (POSITIVE, jss.entr),
}
BINARY: dict[str, tuple[np.ndarray, np.ndarray, Callable[..., Any]]] = {
    # off x = 0, where JAX's custom derivative in x is log(y) and tidu's the branch's, 0
    "xlogy": (GRID, POSITIVE[::-1], jss.xlogy),
    "xlog1py": (GRID, UNIT - 0.5, jss.xlog1py),
    "rel_entr": (POSITIVE, POSITIVE[::-1], jss.rel_entr),
    "kl_div": (POSITIVE, POSITIVE[::-1], jss.kl_div),
}
TOL = {"float64": dict(rtol=1e-12, atol=1e-14), "float32": dict(rtol=2e-5, atol=1e-6)}


def _args(name: str, dtype: str) -> list[np.ndarray]:
    if name in UNARY:
        return [UNARY[name][0].astype(dtype)]
    x, y, _ = BINARY[name]
    return [x.astype(dtype), y.astype(dtype)]


def _pair(name: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """tidu's and jax's function, summed to a scalar (for grad and hessian)."""
    mine = getattr(tss, name)
    theirs = UNARY[name][1] if name in UNARY else BINARY[name][2]
    return (lambda *a: tnp.sum(mine(*a))), (lambda *a: jnp.sum(theirs(*a)))


def _close(got: Any, want: Any, dtype: str) -> None:
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), **TOL[dtype])


def check(name: str, dtype: str) -> None:
    args = _args(name, dtype)
    fn = getattr(tss, name)
    want = (UNARY[name][1] if name in UNARY else BINARY[name][2])(*args)
    eager = fn(*args)
    assert np.asarray(eager).dtype == dtype  # float32 stays float32
    _close(eager, want, dtype)
    _close(tidu.jit(fn)(*args), want, dtype)
    mine, theirs = _pair(name)
    argnums = tuple(range(len(args)))
    for a, b in zip(tidu.grad(mine, argnums=argnums)(*args), jax.grad(theirs, argnums=argnums)(*args), strict=True):
        _close(a, b, dtype)
    # second derivatives in the first operand (the Hessian of an elementwise sum is diagonal)
    h_mine = tidu.hessian(lambda x: mine(x, *args[1:]))(args[0])
    h_theirs = jax.hessian(lambda x: theirs(x, *args[1:]))(args[0])
    _close(h_mine, h_theirs, dtype)


def test_erf_derivatives_in_closed_form() -> None:
    """The fast check: erf' = 2/sqrt(pi) exp(-x^2), erf'' = -2x erf', erfc' = -erf', eager and traced."""
    x = GRID
    d1 = 2 / np.sqrt(np.pi) * np.exp(-x * x)
    np.testing.assert_allclose(tss.erf(x), scipy.special.erf(x), rtol=1e-15)
    np.testing.assert_allclose(tidu.jit(tss.erfc)(x), scipy.special.erfc(x), rtol=1e-15)
    np.testing.assert_allclose(tidu.grad(lambda v: tnp.sum(tss.erf(v)))(x), d1, rtol=1e-14)
    np.testing.assert_allclose(tidu.grad(lambda v: tnp.sum(tss.erfc(v)))(x), -d1, rtol=1e-14)
    np.testing.assert_allclose(tidu.hessian(lambda v: tnp.sum(tss.erf(v)))(x), np.diag(-2 * x * d1), rtol=1e-14)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", [*UNARY, *BINARY])
def test_values_and_derivatives(name: str, dtype: str) -> None:
    check(name, dtype)


def test_ints_scalars_and_domain_edges_as_scipy() -> None:
    np.testing.assert_allclose(tss.erf(np.arange(-2, 3)), scipy.special.erf(np.arange(-2.0, 3.0)), rtol=1e-15)
    assert float(tss.erfc(0.5)) == pytest.approx(scipy.special.erfc(0.5), rel=1e-15)
    np.testing.assert_array_equal(tss.xlogy(np.array([0.0, 0.0]), np.array([0.0, -1.0])), [0.0, 0.0])
    edges = np.array([0.0, 1.0, 1.0, 0.0, -1.0]), np.array([1.0, 0.0, -1.0, -1.0, 1.0])
    for name in ("entr", "rel_entr", "kl_div"):
        args = edges[:1] if name == "entr" else edges
        np.testing.assert_array_equal(getattr(tss, name)(*args), getattr(scipy.special, name)(*args), err_msg=name)
    x = np.array([[1.0, 2.0, 0.5], [0.1, -1.0, 3.0]])
    np.testing.assert_allclose(tss.softmax(x), scipy.special.softmax(x, axis=-1), rtol=1e-14)
    np.testing.assert_allclose(tss.log_softmax(x, axis=0), scipy.special.log_softmax(x, axis=0), rtol=1e-14)
    np.testing.assert_allclose(tss.logsumexp(x), scipy.special.logsumexp(x), rtol=1e-14)


def test_erf_has_no_complex_dtype() -> None:
    with pytest.raises(Exception, match="erf"):
        tss.erf(np.array([1.0 + 1j]))


def _composite(x: Any) -> Any:
    """erf and erfc with their derivatives in one program."""
    return tnp.sum(tss.erf(x) * x + tss.erfc(0.5 * x) + tss.ndtr(x) ** 2)


@pytest.mark.parametrize(("dtype", "hessian"), [
    ("float64", False), pytest.param("float32", False, marks=pytest.mark.slow),
    *(pytest.param(d, True, marks=pytest.mark.slow) for d in ("float32", "float64"))])
def test_stablehlo_runs_in_xla(dtype: str, hessian: bool) -> None:
    pytest.importorskip("jaxlib")
    x = GRID.astype(dtype)
    for fn in (tidu.hessian(_composite) if hessian else tidu.value_and_grad(_composite),):
        view = tidu.make_graph(fn)(x)
        text = view.to_stablehlo()
        # the derivatives of erf and erfc are exps: only the value needs the chlo ops
        assert fn.kind != "value_and_grad" or ('"chlo.erf"(' in text and '"chlo.erfc"(' in text)
        got = view.program.run([x], backend="xla")
        want = view.program.run([x])
        for a, b in zip(got, want, strict=True):
            _close(a, b, dtype)


@pytest.mark.skipif(c_build.compiler_or_none() is None, reason="no C compiler")
def test_c_back_end(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDU_CACHE_DIR", str(tmp_path))
    x32, x64 = GRID.astype("float32"), GRID
    program = tidu.make_graph(tidu.value_and_grad(_composite))(x64).program
    source = program.to_c()
    assert "erf(" in source and "erfc(" in source
    for a, b in zip(program.run([x64], backend="c"), program.eval([x64]), strict=True):
        _close(a, b, "float64")
    program = tidu.make_graph(tidu.value_and_grad(_composite))(x32).program
    assert "erff(" in program.to_c()
    for a, b in zip(program.run([x32], backend="c"), program.eval([x32]), strict=True):
        _close(a, b, "float32")
