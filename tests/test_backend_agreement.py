"""Values the NumPy and XLA back ends must agree on for normal inputs and results: ldexp
applies only normal powers of two (XLA on CPU reads a subnormal factor as 0: 1e300 *
2**-1050 came out 0 and inf * 2**-1100 nan), and rel_entr's and kl_div's derivatives are
written out (as a composition XLA reassociated x / (x / y) / y into x * y / x: nan at
x = y = 1e200)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tidu
import tidu.numpy as tnp
from tidu.scipy import special

pytest.importorskip("jax")


def _same(a, b) -> bool:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_ldexp_agrees_on_every_back_end(dtype) -> None:
    info = ml_dtypes.finfo(dtype)
    values = [1e308, 1e300, 3e38, 6e4, 1.5, -3.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 1e-10, 7.0]
    with np.errstate(all="ignore"):
        x = np.array(values, np.float64).astype(dtype)
    exps = np.array([-1023, -1050, -1100, -2000, -2099, -2100, -3000, -1074, -1075, -200, -149, -150, -126,
                     -24, -10, 0, 5, 15, 127, 128, 300, 1023, 1024, 2000, 3000], np.int32)
    xs, ns = (a.ravel() for a in np.meshgrid(x, exps))
    xs = xs.astype(dtype)
    with np.errstate(all="ignore"):
        want = np.ldexp(xs.astype(np.float32) if dtype == "bfloat16" else xs, ns).astype(dtype)
        eager = tnp.ldexp(xs, ns)
    program = tidu.make_graph(tnp.ldexp)(xs, ns).program
    assert _same(eager, want)
    assert _same(program.eval([xs, ns])[0], want)
    # XLA on CPU flushes subnormal inputs and results (docs/lowering.md): the others agree
    normal = (np.abs(want.astype(np.float64)) >= info.tiny) & (np.abs(xs.astype(np.float64)) >= info.tiny)
    normal |= np.isnan(want.astype(np.float64)) | (xs.astype(np.float64) == 0)
    got = np.asarray(program.run([xs, ns], backend="xla")[0])
    assert _same(got[normal], want[normal])
    fixed = tidu.make_graph(lambda v: tnp.ldexp(v, -1100))(x).program  # a constant exponent
    with np.errstate(all="ignore"):
        want_fixed = np.ldexp(x.astype(np.float32) if dtype == "bfloat16" else x, -1100).astype(dtype)
    assert _same(fixed.eval([x])[0], want_fixed)
    ok = np.abs(want_fixed.astype(np.float64)) >= info.tiny
    ok |= np.isnan(want_fixed.astype(np.float64)) | (x.astype(np.float64) == 0)
    assert _same(np.asarray(fixed.run([x], backend="xla")[0])[ok], want_fixed[ok])


@pytest.mark.parametrize("name", ["rel_entr", "kl_div"])
def test_relative_entropy_gradients_agree_on_every_back_end(name) -> None:
    fn = getattr(special, name)
    x, y = np.array([1e200, 1.0, 0.3, 2.0, 1e-200]), np.array([1e200, 1.0, 0.7, 0.5, 1e-200])
    g = tidu.grad(lambda x, y: tnp.sum(fn(x, y)), argnums=(0, 1))
    program = tidu.make_graph(g)(x, y).program
    want = (np.log(x / y) + 1.0 - (name == "kl_div"), -x / y + (name == "kl_div"))
    for got in (program.eval([x, y]), program.run([x, y], backend="xla")):
        np.testing.assert_allclose(got[0], want[0], rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-14, atol=1e-15)
    # second derivatives: the rule's own, against finite differences of the gradient
    v0 = np.array([0.3, 2.0, 0.7, 0.5])
    loss = tidu.grad(lambda v: tnp.sum(fn(v[:2], v[2:])))
    h = tidu.hessian(lambda v: tnp.sum(fn(v[:2], v[2:])))(v0)
    fd = np.array([(loss(v0 + 1e-6 * e) - loss(v0 - 1e-6 * e)) / 2e-6 for e in np.eye(4)])
    np.testing.assert_allclose(h, fd, atol=1e-8)


def test_fresnel_of_large_float32_values_is_its_limit_on_xla() -> None:
    """x^2 and the continued fraction's squares overflowed float32 past 1.9e19: nan on XLA."""
    x = np.array([1e19, 1.9e19, 1e20, 1e30, -1e20, 3e38, 0.5, 3.0, -2.0, np.inf, np.nan], np.float32)
    program = tidu.make_graph(special.fresnel)(x).program
    for got, want in zip(program.run([x], backend="xla"), program.eval([x]), strict=True):
        np.testing.assert_allclose(got, want, rtol=2e-6)
        assert got.dtype == np.float32
