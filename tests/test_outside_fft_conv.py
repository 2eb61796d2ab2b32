"""An outside tester's checks of the FFTs, the convolutions, the cumulative (windowed)
reductions, dynamic_slice / dynamic_update_slice at out-of-range starts and ``x.at[...]``
updates at negative, out-of-range, repeated and boolean indices, against JAX (x64) as the
oracle: values eagerly and under ``tidu.jit``, ``jvp``, ``grad``, a Hessian through them
and ``vmap``, also in float32 and (FFT, convolution) complex.

tidu's ``grad`` of a real function of complex inputs is the conjugate of JAX's
(docs/transforms.md, "Complex numbers"): those are compared conjugated.

The sweep found (fixed, each pinned here): ``lax.cummax``/``lax.cummin`` shared the
derivative at ties in a Hillis-Steele order (JAX: the order of its associative scan);
``x.at[idx].min/max`` with repeated indices shared ties pairwise (JAX: equally among all
tied entries); ``x.at[i]`` ignored ``mode=`` (clip, fill), and with a mode constant index
arrays out of range still raised (without one they do, by design: docs/numpy.md).
"""

from __future__ import annotations

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp
from tidu import lax

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from oracle_util import same  # noqa: E402

RNG = np.random.default_rng(20240611)
XR = RNG.normal(size=(3, 5))
XC = XR + 1j * RNG.normal(size=(3, 5))
XR6 = RNG.normal(size=(2, 6))
XC6 = XR6 + 1j * RNG.normal(size=(2, 6))


def close(got, want, tol=1e-9):
    same(got, want, rtol=tol, atol=tol)


def some_slow(values, fast, several=False):
    """``values`` as pytest params, all but those in ``fast`` marked slow (``several``: each
    value a tuple of several arguments)."""
    return [v if v in fast else pytest.param(*(v if several else (v,)), marks=pytest.mark.slow) for v in values]


def weights(shape):
    return np.arange(1, int(np.prod(shape)) + 1, dtype=float).reshape(shape) * 0.1 + 0.2


# --- FFT ---------------------------------------------------------------------------------

FFTS = {
    "fft n=8 ortho": (lambda m, x: m.fft.fft(x, n=8, norm="ortho"), "c"),
    "fft n=3 (crop)": (lambda m, x: m.fft.fft(x, n=3), "c"),
    "ifft axis0 n=4 forward": (lambda m, x: m.fft.ifft(x, n=4, axis=0, norm="forward"), "c"),
    "rfft odd": (lambda m, x: m.fft.rfft(x), "r"),
    "rfft n=8 pad": (lambda m, x: m.fft.rfft(x, n=8, norm="ortho"), "r"),
    "rfft n=4 crop axis0": (lambda m, x: m.fft.rfft(x, n=4, axis=0), "r"),
    "irfft default": (lambda m, x: m.fft.irfft(x), "c"),
    "irfft n=9 odd": (lambda m, x: m.fft.irfft(x, n=9, norm="forward"), "c"),
    "irfft n=4 crop": (lambda m, x: m.fft.irfft(x, n=4, norm="ortho"), "c"),
    "hfft n=7": (lambda m, x: m.fft.hfft(x, n=7), "c"),
    "hfft default ortho": (lambda m, x: m.fft.hfft(x, norm="ortho"), "c"),
    "ihfft n=6": (lambda m, x: m.fft.ihfft(x, n=6), "r"),
    "fft2 s=(4,7)": (lambda m, x: m.fft.fft2(x, s=(4, 7)), "c"),
    "fftn axes=(1,0) s=(2,3)": (lambda m, x: m.fft.fftn(x, s=(2, 3), axes=(1, 0), norm="ortho"), "c"),
    "ifftn of real": (lambda m, x: m.fft.ifftn(x), "r"),
    "rfftn": (lambda m, x: m.fft.rfftn(x, norm="forward"), "r"),
    "rfftn axes=(1,0) s=(4,7)": (lambda m, x: m.fft.rfftn(x, s=(4, 7), axes=(1, 0)), "r"),
    "irfftn s=(2,3)": (lambda m, x: m.fft.irfftn(x, s=(2, 3)), "c"),
    "irfft2 s=(4,7)": (lambda m, x: m.fft.irfft2(x, s=(4, 7), norm="ortho"), "c"),
}


def _fft_input(kind, even=False):
    if kind == "c":
        return XC6 if even else XC
    return XR6 if even else XR


def _fft_loss(m, fn, x):
    y = fn(m, x)
    w = weights(y.shape)
    if "complex" in str(y.dtype):
        return m.sum(m.abs(y * w) ** 2) + m.sum(m.real(y) ** 3 * w)
    return m.sum(m.sin(y) * w)


@pytest.mark.parametrize("even", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["odd", "even"])
@pytest.mark.parametrize("name", list(FFTS))
def test_fft_values_jit_jvp_grad_vmap(name, even):
    fn, kind = FFTS[name]
    x = _fft_input(kind, even)
    want = fn(jnp, jnp.asarray(x))
    close(fn(tnp, x), want)
    close(tidu.jit(lambda x: fn(tnp, x))(x), want)
    t = np.cos(np.arange(x.size).reshape(x.shape)) * (1 + 0.5j if kind == "c" else 1)
    close(tidu.jvp(lambda x: fn(tnp, x), (x,), (t,))[1], jax.jvp(lambda x: fn(jnp, x), (x,), (t,))[1])
    g = tidu.grad(lambda x: _fft_loss(tnp, fn, x))(x)
    gj = jax.grad(lambda x: _fft_loss(jnp, fn, x))(x)
    close(np.conj(g) if kind == "c" else g, gj)
    xs = np.stack([x, 2 * x, -x])
    close(tidu.vmap(lambda x: fn(tnp, x))(xs), jax.vmap(lambda x: fn(jnp, x))(xs))


@pytest.mark.parametrize("name", some_slow([n for n, (_, k) in FFTS.items() if k == "r"], ["rfft n=4 crop axis0"]))
def test_fft_hessian_of_real_input(name):
    fn, _ = FFTS[name]
    close(tidu.hessian(lambda x: _fft_loss(tnp, fn, x))(XR), jax.hessian(lambda x: _fft_loss(jnp, fn, x))(XR), 1e-8)


def test_fft_hessian_through_a_round_trip_with_padding_and_hfft():
    x = np.array([0.3, -1.2, 0.7, 2.0, -0.4])

    def f(m, x):
        spec = m.fft.rfft(x ** 2, n=8) * m.arange(5)
        return m.sum(m.fft.irfft(spec, n=8) ** 2) + m.sum(m.abs(m.fft.hfft(x ** 2 + 1j * x, n=7)) ** 3)
    want = jax.hessian(lambda x: f(jnp, x))(x)
    close(tidu.hessian(lambda x: f(tnp, x))(x), want, 1e-8)
    close(tidu.jit(tidu.hessian(lambda x: f(tnp, x)))(x), want, 1e-8)


def test_fft_over_four_axes_splits_the_transform():
    x = RNG.normal(size=(2, 3, 2, 4))
    cases = [lambda m, x: m.fft.fftn(x, norm="ortho"), lambda m, x: m.fft.rfftn(x, s=(3, 2, 3, 5), norm="forward"),
             lambda m, x: m.fft.irfftn(x, s=(2, 3, 2, 5)), lambda m, x: m.fft.ifftn(x, axes=(3, 0, 2, 1))]
    for fn in cases:
        close(tidu.jit(lambda x, fn=fn: fn(tnp, x))(x), fn(jnp, x))
        loss = lambda m, x, fn=fn: m.sum(m.real(fn(m, x)) ** 3 + m.imag(fn(m, x)))  # noqa: E731
        close(tidu.grad(lambda x, loss=loss: loss(tnp, x))(x), jax.grad(lambda x, loss=loss: loss(jnp, x))(x))


@pytest.mark.parametrize("name", ["rfft n=8 pad", "fft2 s=(4,7)", "irfft default", "hfft n=7"])
def test_fft_float32(name):
    fn, kind = FFTS[name]
    x = _fft_input(kind).astype(np.complex64 if kind == "c" else np.float32)
    want = fn(jnp, jnp.asarray(x))
    same(fn(tnp, x), want, rtol=2e-5, atol=2e-5)
    same(tidu.jit(lambda x: fn(tnp, x))(x), want, rtol=2e-5, atol=2e-5)
    g = tidu.grad(lambda x: _fft_loss(tnp, fn, x))(x)
    gj = jax.grad(lambda x: _fft_loss(jnp, fn, x))(x)
    same(np.conj(g) if kind == "c" else g, gj, rtol=2e-4, atol=2e-4)


def test_irfft_reads_only_the_real_part_of_the_edges():
    """irfft's derivative in the imaginary parts of the edge bins is 0 (JAX's too)."""
    z = np.array([1.0 + 2j, 0.5 - 1j, 2.0 + 3j, -1.0 + 0.5j])  # n = 6: bins 0 and 3 are edges
    f = lambda m, z: m.sum(m.fft.irfft(z) * m.arange(1.0, 7.0))  # noqa: E731
    g = tidu.grad(lambda z: f(tnp, z))(z)
    close(np.conj(g), jax.grad(lambda z: f(jnp, z))(z))
    assert g[0].imag == 0 and g[3].imag == 0
    close(tidu.grad(lambda x: tnp.sum(tnp.fft.irfft(x, n=1) ** 2))(np.array([2.0, 3.0])),
          jax.grad(lambda x: jnp.sum(jnp.fft.irfft(x, n=1) ** 2))(np.array([2.0, 3.0])))


@pytest.mark.parametrize("n", [1, 5, 6])
def test_fftfreq_values_and_derivative_in_d(n):
    for d in (1.0, 0.25):
        close(tnp.fft.fftfreq(n, d), jnp.fft.fftfreq(n, d))
        close(tnp.fft.rfftfreq(n, d), jnp.fft.rfftfreq(n, d))
        close(tidu.jit(lambda d: tnp.fft.fftfreq(n, d))(d), jnp.fft.fftfreq(n, d))
    same(tnp.fft.fftfreq(n, 0.1, dtype=np.float32), jnp.fft.fftfreq(n, 0.1, dtype=np.float32), rtol=1e-6)
    close(tidu.grad(lambda d: tnp.sum(tnp.fft.fftfreq(n, d) ** 2))(0.3),
          jax.grad(lambda d: jnp.sum(jnp.fft.fftfreq(n, d) ** 2))(0.3))


@pytest.mark.parametrize("axes", [None, 0, (1,), (0, 2), -1])
@pytest.mark.parametrize("fname", ["fftshift", "ifftshift"])
def test_fftshift(fname, axes):
    y = RNG.normal(size=(5, 4, 3))
    f = lambda m, x: getattr(m.fft, fname)(x, axes=axes)  # noqa: E731
    close(f(tnp, y), f(jnp, y))
    close(tidu.jit(lambda x: f(tnp, x))(y), f(jnp, y))
    w = weights(y.shape)
    close(tidu.grad(lambda x: tnp.sum(f(tnp, x) * w))(y), jax.grad(lambda x: jnp.sum(f(jnp, x) * w))(y))


# --- convolution -------------------------------------------------------------------------

# (lhs shape, rhs shape, strides, padding, lhs_dilation, rhs_dilation, dimension_numbers, fg, bg)
CONVS = {
    "valid": ((2, 3, 7), (4, 3, 3), (1,), "VALID", None, None, None, 1, 1),
    "same stride2": ((2, 3, 7), (4, 3, 3), (2,), "SAME", None, None, None, 1, 1),
    "same_lower stride3": ((2, 3, 8), (4, 3, 2), (3,), "SAME_LOWER", None, None, None, 1, 1),
    "lhs dilation": ((2, 3, 7), (4, 3, 3), (2,), ((2, 1),), (2,), None, None, 1, 1),
    "negative pad rhs dilation": ((2, 3, 7), (4, 3, 3), (1,), ((-1, 2),), None, (2,), None, 1, 1),
    "both dilations crop": ((2, 3, 7), (4, 3, 3), (2,), ((0, -2),), (3,), (2,), None, 1, 1),
    "feature groups": ((2, 4, 7), (6, 2, 3), (1,), ((1, 1),), None, None, None, 2, 1),
    "depthwise": ((2, 6, 7), (6, 1, 3), (2,), "SAME", None, (2,), None, 6, 1),
    "batch groups": ((4, 3, 7), (6, 3, 3), (1,), ((1, 0),), None, None, None, 1, 2),
    "batch groups lhs dil": ((6, 2, 7), (6, 2, 2), (2,), ((0, 1),), (2,), None, None, 1, 3),
    "2d same rhs dil": ((2, 3, 6, 5), (4, 3, 3, 2), (1, 2), "SAME", None, (2, 1), None, 1, 1),
    "2d all": ((2, 3, 6, 5), (4, 3, 3, 2), (2, 1), ((1, 2), (0, 1)), (1, 2), (2, 1), None, 1, 1),
    "NHWC HWIO": ((2, 6, 5, 3), (3, 2, 3, 4), (1, 1), ((1, 1), (2, 1)), None, None, ("NHWC", "HWIO", "NHWC"), 1, 1),
    "NHWC groups NCHW out": ((2, 6, 5, 6), (3, 3, 2, 3), (2, 1), "SAME", None, (1, 2), ("NHWC", "HWIO", "NCHW"), 3,
                             1),
    "NWHC batch groups": ((4, 5, 6, 3), (2, 3, 3, 4), (1, 1), ((0, 0), (1, 0)), (2, 1), None,
                          ("NWHC", "HWIO", "NHWC"), 1, 2),
    "IOHW": ((3, 2, 5, 4), (2, 2, 2, 3), (2, 2), "SAME", None, None, ("NCHW", "IOHW", "NHWC"), 1, 1),
    "CNW out groups": ((2, 4, 9), (4, 2, 3), (3,), ((2, 3),), (2,), (3,), ("NCW", "OIW", "CNW"), 2, 1),
    "CNW lhs batch groups": ((4, 2, 5), (4, 2, 3), (1,), "SAME", None, None, ("CNW", "IOW", "NCW"), 1, 2),
    "3d": ((2, 3, 4, 4, 3), (2, 3, 2, 2, 2), (1, 2, 1), "VALID", None, None, None, 1, 1),
    "window longer than input same": ((1, 1, 5), (1, 1, 7), (1,), "SAME", None, None, None, 1, 1),
}


def _conv(name):
    ls, rs, st, pad, ld, rd, dn, fg, bg = CONVS[name]

    def f(L, x, w):
        return L.conv_general_dilated(x, w, st, pad, lhs_dilation=ld, rhs_dilation=rd, dimension_numbers=dn,
                                      feature_group_count=fg, batch_group_count=bg)
    rng = np.random.default_rng(abs(hash(name)) % 2 ** 32)
    return f, rng.normal(size=ls), rng.normal(size=rs), rng


@pytest.mark.parametrize("name", some_slow(list(CONVS), [n for i, n in enumerate(CONVS) if i % 2]))
def test_conv_values_jit_jvp_grad_vmap(name):
    f, x, w, rng = _conv(name)
    want = f(jax.lax, jnp.asarray(x), jnp.asarray(w))
    close(f(lax, x, w), want)
    close(tidu.jit(lambda x, w: f(lax, x, w))(x, w), want)
    ww = rng.normal(size=want.shape)
    loss = lambda m, L, x, w: m.sum(m.sin(f(L, x, w)) * ww)  # noqa: E731
    gt = tidu.grad(lambda x, w: loss(tnp, lax, x, w), argnums=(0, 1))(x, w)
    gj = jax.grad(lambda x, w: loss(jnp, jax.lax, x, w), argnums=(0, 1))(x, w)
    close(gt[0], gj[0])
    close(gt[1], gj[1])
    tx, tw = rng.normal(size=x.shape), rng.normal(size=w.shape)
    close(tidu.jvp(lambda x, w: f(lax, x, w), (x, w), (tx, tw))[1],
          jax.jvp(lambda x, w: f(jax.lax, x, w), (x, w), (tx, tw))[1])
    ws = np.stack([w, 3 * w, -w])
    xs = np.stack([x, 2 * x, 0.5 * x], 1)
    close(tidu.vmap(lambda x, w: f(lax, x, w), in_axes=(1, 0))(xs, ws),
          jax.vmap(lambda x, w: f(jax.lax, x, w), in_axes=(1, 0))(xs, ws))
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    same(tidu.jit(lambda x, w: f(lax, x, w))(x32, w32), f(jax.lax, x32, w32), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", some_slow(["lhs dilation", "both dilations crop", "batch groups lhs dil",
                                            "feature groups", "NHWC groups NCHW out", "window longer than input same"],
                                           ["both dilations crop"]))
def test_conv_hessian_in_each_operand(name):
    f, x, w, rng = _conv(name)
    ww = rng.normal(size=np.shape(f(jax.lax, x, w)))
    loss = lambda m, L, x, w: m.sum(m.sin(f(L, x, w)) * ww)  # noqa: E731
    close(tidu.hessian(lambda x: loss(tnp, lax, x, w))(x), jax.hessian(lambda x: loss(jnp, jax.lax, x, w))(x), 1e-8)
    close(tidu.hessian(lambda w: loss(tnp, lax, x, w))(w), jax.hessian(lambda w: loss(jnp, jax.lax, x, w))(w), 1e-8)


@pytest.mark.parametrize("name", ["same stride2", "both dilations crop", "feature groups", "batch groups lhs dil",
                                  "NHWC HWIO"])
def test_conv_complex_values_and_gradients(name):
    f, x, w, rng = _conv(name)
    xc, wc = x + 1j * rng.normal(size=x.shape), w + 1j * rng.normal(size=w.shape)
    close(f(lax, xc, wc), f(jax.lax, xc, wc))
    ww = rng.normal(size=np.shape(f(jax.lax, x, w)))
    loss = lambda m, L, x, w: m.sum(m.abs(f(L, x, w) * ww) ** 2)  # noqa: E731
    gt = tidu.grad(lambda x, w: loss(tnp, lax, x, w), argnums=(0, 1))(xc, wc)
    gj = jax.grad(lambda x, w: loss(jnp, jax.lax, x, w), argnums=(0, 1))(xc, wc)
    close(np.conj(gt[0]), gj[0])
    close(np.conj(gt[1]), gj[1])


def test_conv_with_an_empty_output():
    x, w = np.ones((1, 1, 5)), np.ones((1, 1, 7))
    want = jax.lax.conv_general_dilated(x, w, (1,), "VALID")
    close(lax.conv_general_dilated(x, w, (1,), "VALID"), want)
    close(tidu.jit(lambda x, w: lax.conv_general_dilated(x, w, (1,), "VALID"))(x, w), want)


@pytest.mark.parametrize("n,m", some_slow([(5, 3), (3, 5), (4, 4), (6, 1), (1, 4), (2, 5)], [(3, 5), (6, 1)],
                                           several=True))
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("fname", ["convolve", "correlate"])
def test_convolve_correlate(fname, mode, n, m):
    a, v = RNG.normal(size=n), RNG.normal(size=m)
    f = lambda M, a, v: getattr(M, fname)(a, v, mode=mode)  # noqa: E731
    want = f(jnp, a, v)
    close(f(tnp, a, v), want)
    close(tidu.jit(lambda a, v: f(tnp, a, v))(a, v), want)
    ww = weights(want.shape)
    loss = lambda M, a, v: M.sum(M.sin(f(M, a, v)) * ww)  # noqa: E731
    gt = tidu.grad(lambda a, v: loss(tnp, a, v), argnums=(0, 1))(a, v)
    gj = jax.grad(lambda a, v: loss(jnp, a, v), argnums=(0, 1))(a, v)
    close(gt[0], gj[0])
    close(gt[1], gj[1])
    close(tidu.hessian(lambda a: loss(tnp, a, v))(a), jax.hessian(lambda a: loss(jnp, a, v))(a))
    A, V = np.stack([a, 2 * a, a - 1]), np.stack([v, -v, v + 1])
    close(tidu.vmap(lambda a, v: f(tnp, a, v))(A, V), jax.vmap(lambda a, v: f(jnp, a, v))(A, V))
    same(tidu.jit(lambda a, v: f(tnp, a, v))(a.astype(np.float32), v.astype(np.float32)),
         f(jnp, a.astype(np.float32), v.astype(np.float32)), rtol=1e-5, atol=1e-5)
    # complex: correlate conjugates v
    ac, vc = a + 1j * a[::-1], v - 0.5j * v
    close(f(tnp, ac, vc), f(jnp, ac, vc))
    closs = lambda M, a, v: M.sum(M.abs(f(M, a, v) * ww) ** 2)  # noqa: E731
    gt = tidu.grad(lambda a, v: closs(tnp, a, v), argnums=(0, 1))(ac, vc)
    gj = jax.grad(lambda a, v: closs(jnp, a, v), argnums=(0, 1))(ac, vc)
    close(np.conj(gt[0]), gj[0])
    close(np.conj(gt[1]), gj[1])


# --- cumulative reductions (tidu.lax has no reduce_window: docs/lax.md) ---------------------

CUM_X = {
    "random": RNG.normal(size=(3, 5)),
    "ties": np.array([[1.0, 3, 3, 2, 3], [2, 2, 2, 2, 2], [0, -1, 0, -1, 5]]),
}


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("op", ["cumsum", "cumprod", "cumlogsumexp", "cummax", "cummin"])
def test_lax_cumulative_values_and_vmap(op, axis, reverse):
    f = lambda L, x: getattr(L, op)(x, axis=axis, reverse=reverse)  # noqa: E731
    for x in (*CUM_X.values(), np.array([[1.0, np.inf, 3, -np.inf, 4], [-np.inf, -np.inf, 1, 2, 0]])):
        want = f(jax.lax, x)
        close(f(lax, x), want)
        close(tidu.jit(lambda x: f(lax, x))(x), want)
        x32 = x.astype(np.float32)
        same(tidu.jit(lambda x: f(lax, x))(x32), f(jax.lax, x32), rtol=1e-5, atol=1e-5)
    x = CUM_X["random"]
    xs = np.stack([x, -x, 2 * x], 1)
    close(tidu.vmap(lambda x: f(lax, x), in_axes=1)(xs), jax.vmap(lambda x: f(jax.lax, x), in_axes=1)(xs))


def _cum_derivatives(op, axis, reverse, x):
    f = lambda L, x: getattr(L, op)(x, axis=axis, reverse=reverse)  # noqa: E731
    w = weights(x.shape)
    loss = lambda m, L, x: m.sum(f(L, x) ** 2 * w)  # noqa: E731
    close(tidu.grad(lambda x: loss(tnp, lax, x))(x), jax.grad(lambda x: loss(jnp, jax.lax, x))(x))
    t = np.cos(np.arange(x.size)).reshape(x.shape)
    close(tidu.jvp(lambda x: f(lax, x), (x,), (t,))[1], jax.jvp(lambda x: f(jax.lax, x), (x,), (t,))[1])
    close(tidu.hessian(lambda x: loss(tnp, lax, x))(x), jax.hessian(lambda x: loss(jnp, jax.lax, x))(x), 1e-8)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("op", ["cumsum", "cumprod", "cumlogsumexp", "cummax", "cummin"])
def test_lax_cumulative_derivatives(op, axis, reverse):
    _cum_derivatives(op, axis, reverse, CUM_X["random"])
    if op not in ("cummax", "cummin") or axis == 0:  # (axis 0 of "ties" has ties only in a few columns)
        _cum_derivatives(op, axis, reverse, CUM_X["ties"])


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_lax_cummax_cummin_derivatives_at_ties_as_jax(op, reverse):
    _cum_derivatives(op, 1, reverse, CUM_X["ties"])


def test_lax_cummax_jacobian_of_equal_entries():
    x = np.full(3, 2.0)
    close(tidu.jacfwd(lax.cummax)(x), jax.jacfwd(jax.lax.cummax)(x))


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_tnp_cumsum_cumprod(op, axis):
    x = CUM_X["random"]
    f = lambda M, x: getattr(M, op)(x, axis=axis)  # noqa: E731
    close(f(tnp, x), f(jnp, x))
    close(tidu.jit(lambda x: f(tnp, x))(x), f(jnp, x))
    loss = lambda M, x: M.sum(M.sin(f(M, x)))  # noqa: E731
    close(tidu.grad(lambda x: loss(tnp, x))(x), jax.grad(lambda x: loss(jnp, x))(x))
    close(tidu.hessian(lambda x: loss(tnp, x))(x), jax.hessian(lambda x: loss(jnp, x))(x), 1e-8)


@pytest.mark.parametrize("x", [[2.0, 0.0, 3.0, 0.0, 4.0], [0.0, 2.0, 3.0], [1.0, 2.0, 0.0]])
def test_cumprod_derivatives_through_zeros(x):
    x = np.array(x)
    f = lambda M, L, x: M.sum(L.cumprod(x) * M.arange(1.0, x.size + 1))  # noqa: E731
    close(tidu.grad(lambda x: f(tnp, tnp, x))(x), jax.grad(lambda x: f(jnp, jnp, x))(x))
    close(tidu.hessian(lambda x: f(tnp, tnp, x))(x), jax.hessian(lambda x: f(jnp, jnp, x))(x))
    g = lambda M, L, x: M.sum(L.cumprod(x, reverse=True) * M.arange(1.0, x.size + 1))  # noqa: E731
    close(tidu.grad(lambda x: g(tnp, lax, x))(x), jax.grad(lambda x: g(jnp, jax.lax, x))(x))


# --- dynamic_slice / dynamic_update_slice ---------------------------------------------------

DX = RNG.normal(size=(4, 5, 3))
STARTS = [(1, 2, 1), (-1, -2, 0), (3, 4, 2), (10, -10, 7), (-100, 100, -1), (-5, -6, -4)]
SIZES = [(2, 3, 2), (4, 5, 3), (1, 1, 1)]


@pytest.mark.parametrize("sizes", some_slow(SIZES, [SIZES[0], SIZES[2]]))
@pytest.mark.parametrize("starts", STARTS)
def test_dynamic_slice_clamps_as_jax(starts, sizes):
    st = [np.int64(s) for s in starts]
    f = lambda L, x, s: L.dynamic_slice(x, s, sizes)  # noqa: E731
    want = f(jax.lax, DX, starts)
    close(f(lax, DX, starts), want)
    close(tidu.jit(lambda x, s: f(lax, x, s))(DX, st), want)
    close(tidu.jit(lambda x, s: f(lax, x, s))(DX, np.array(starts)), want)
    w = weights(want.shape)
    loss = lambda m, L, x, s: m.sum(m.sin(f(L, x, s)) * w)  # noqa: E731
    close(tidu.grad(lambda x, s: loss(tnp, lax, x, s))(DX, st), jax.grad(lambda x, s: loss(jnp, jax.lax, x, s))(DX, st))
    S = np.array([starts, [s + 1 for s in starts], [-s for s in starts]])
    close(tidu.vmap(lambda s: f(lax, DX, s))(S), jax.vmap(lambda s: f(jax.lax, DX, s))(S))


@pytest.mark.parametrize("sizes", some_slow(SIZES, [SIZES[0]]))
@pytest.mark.parametrize("starts", STARTS)
def test_dynamic_update_slice_clamps_as_jax(starts, sizes):
    st = [np.int64(s) for s in starts]
    u = np.cos(np.arange(np.prod(sizes))).reshape(sizes)
    g = lambda L, x, u, s: L.dynamic_update_slice(x, u, s)  # noqa: E731
    want = g(jax.lax, DX, u, starts)
    close(g(lax, DX, u, starts), want)
    close(tidu.jit(lambda x, u, s: g(lax, x, u, s))(DX, u, st), want)
    w = weights(DX.shape)
    loss = lambda m, L, x, u, s: m.sum(m.sin(g(L, x, u, s)) * w + g(L, x * x, u * u, s))  # noqa: E731
    gt = tidu.grad(lambda x, u: loss(tnp, lax, x, u, st), argnums=(0, 1))(DX, u)
    gj = jax.grad(lambda x, u: loss(jnp, jax.lax, x, u, st), argnums=(0, 1))(DX, u)
    close(gt[0], gj[0])
    close(gt[1], gj[1])
    close(tidu.hessian(lambda u: loss(tnp, lax, DX, u, st))(u), jax.hessian(lambda u: loss(jnp, jax.lax, DX, u, st))(u))
    S = np.array([starts, [-s for s in starts]])
    U = np.stack([u, 2 * u])
    close(tidu.vmap(lambda u, s: g(lax, DX, u, s))(U, S), jax.vmap(lambda u, s: g(jax.lax, DX, u, s))(U, S))
    x32, u32 = DX.astype(np.float32), u.astype(np.float32)
    same(tidu.jit(lambda x, u, s: g(lax, x, u, s))(x32, u32, st), g(jax.lax, x32, u32, starts))


@pytest.mark.parametrize("i", [-7, -4, -1, 0, 2, 3, 9])
def test_dynamic_in_dim_forms(i):
    ii = np.int64(i)
    close(tidu.jit(lambda x, i: lax.dynamic_slice_in_dim(x, i, 2, axis=1))(DX, ii),
          jax.lax.dynamic_slice_in_dim(DX, ii, 2, axis=1))
    close(tidu.jit(lambda x, i: lax.dynamic_index_in_dim(x, i, axis=2, keepdims=False))(DX, ii),
          jax.lax.dynamic_index_in_dim(DX, ii, axis=2, keepdims=False))
    close(tidu.jit(lambda x, i: lax.dynamic_update_slice_in_dim(x, x[:, :2] * 0, i, axis=1))(DX, ii),
          jax.lax.dynamic_update_slice_in_dim(DX, DX[:, :2] * 0, ii, axis=1))
    close(tidu.jit(lambda x, i: lax.dynamic_update_index_in_dim(x, x[0] * 3, i, axis=0))(DX, ii),
          jax.lax.dynamic_update_index_in_dim(DX, DX[0] * 3, ii, axis=0))
    close(tidu.grad(lambda x, i: tnp.sum(lax.dynamic_index_in_dim(x, i, axis=2) ** 3))(DX, ii),
          jax.grad(lambda x, i: jnp.sum(jax.lax.dynamic_index_in_dim(x, i, axis=2) ** 3))(DX, ii))


@pytest.mark.parametrize("dtype,values", [(np.int32, (-1, -100, 3, 100)), (np.int8, (-1, -100, 3, 100)),
                                          (np.uint8, (0, 3, 200, 255)), (np.uint32, (0, 3, 200, 255))])
def test_dynamic_slice_start_dtypes(dtype, values):
    for v in values:
        s = dtype(v)
        want = jax.lax.dynamic_slice(DX, (s, s, s), (2, 2, 2))
        close(tidu.jit(lambda x, s: lax.dynamic_slice(x, (s, s, s), (2, 2, 2)))(DX, s), want)
        close(lax.dynamic_slice(DX, (s, s, s), (2, 2, 2)), want)
        close(tidu.jit(lambda x, s: lax.dynamic_update_slice(x, x[:2, :2, :2] * 0, (s, s, s)))(DX, s),
              jax.lax.dynamic_update_slice(DX, DX[:2, :2, :2] * 0, (s, s, s)))


# --- x.at[...] ---------------------------------------------------------------------------

AX = RNG.normal(size=(5, 3))
AT_INDEX = {
    "negative": -2,
    "repeated": np.array([1, 3, 1, 1]),
    "negative repeated": np.array([-1, 4, 0, -5]),
    "bool": np.array([True, False, True, True, False]),
    "pairs repeated": (np.array([0, 2, 0]), np.array([1, 1, 1])),
    "slice": slice(1, None, 2),
    "array and slice": (np.array([4, 4]), slice(None)),
    "negative pair": (-1, -3),
}
AT_OPS = ["set", "add", "multiply", "min", "max", "get"]


def _at(op, idx):
    return lambda A, v: A[idx].get() if op == "get" else getattr(A[idx], op)(v)


@pytest.mark.parametrize("op", AT_OPS)
@pytest.mark.parametrize("iname", some_slow(list(AT_INDEX), ["negative repeated", "bool", "pairs repeated"]))
def test_at_values_and_derivatives(iname, op):
    _check_at(iname, op, hessian=iname == "negative repeated")


@pytest.mark.slow
@pytest.mark.parametrize("op", AT_OPS)
@pytest.mark.parametrize("iname", list(AT_INDEX))
def test_at_hessians(iname, op):
    _check_at(iname, op, hessian=True)


def _check_at(iname, op, hessian):
    idx = AT_INDEX[iname]
    f = _at(op, idx)
    v = np.cos(np.arange(np.asarray(AX[idx]).size)).reshape(np.shape(AX[idx])) + 0.1
    fj = lambda x, v: f(jnp.asarray(x).at, v)  # noqa: E731
    ft = lambda x, v: f(x.at, v)  # noqa: E731
    want = fj(AX, v)
    close(f(tnp.at(AX), v), want)
    close(tidu.jit(ft)(AX, v), want)
    X, V = np.stack([AX, 2 * AX]), np.stack([v, -v])
    close(tidu.vmap(ft)(X, V), jax.vmap(fj)(X, V))
    x32, v32 = AX.astype(np.float32), v.astype(np.float32)
    same(tidu.jit(ft)(x32, v32), fj(x32, v32), rtol=1e-6, atol=1e-6)
    if op == "multiply" and iname not in ("negative", "slice", "negative pair"):
        return  # JAX differentiates a multiplying scatter only at indices it knows are unique
    w = weights(want.shape)
    loss = lambda m, g, x, v: m.sum(m.sin(g(x, v)) * w)  # noqa: E731
    gt = tidu.grad(lambda x, v: loss(tnp, ft, x, v), argnums=(0, 1))(AX, v)
    gj = jax.grad(lambda x, v: loss(jnp, fj, x, v), argnums=(0, 1))(AX, v)
    close(gt[0], gj[0])
    close(gt[1], gj[1])
    t, tv = np.sin(np.arange(AX.size)).reshape(AX.shape), np.ones_like(v)
    close(tidu.jvp(ft, (AX, v), (t, tv))[1], jax.jvp(fj, (AX, v), (t, tv))[1])
    if not hessian:
        return
    ht = tidu.hessian(lambda x, v: loss(tnp, ft, x, v), argnums=(0, 1))(AX, v)
    hj = jax.hessian(lambda x, v: loss(jnp, fj, x, v), argnums=(0, 1))(AX, v)
    for a in range(2):
        for b in range(2):
            close(ht[a][b], hj[a][b])


@pytest.mark.parametrize("op", ["min", "max"])
def test_at_min_max_ties_with_the_old_value_and_distinct_indices(op):
    """A tie between the old value and one update per element: 1/2 each, as JAX's."""
    x = np.array([1.0, 2.0, 3.0, 4.0])
    for idx, v in ((np.array([2, 2, 0]), np.array([3.0, 1.0, 1.0])), (np.array([1, 1]), np.array([5.0, -5.0])),
                   (np.array([3, 0]), np.array([4.0, 1.0]))):
        fj = lambda x, v: jnp.sum(getattr(jnp.asarray(x).at[idx], op)(v) * jnp.arange(1.0, 5.0))  # noqa: E731, B023
        ft = lambda x, v: tnp.sum(getattr(x.at[idx], op)(v) * tnp.arange(1.0, 5.0))  # noqa: E731, B023
        close(tidu.jit(ft)(x, v), fj(x, v))
        gt, gj = tidu.grad(ft, argnums=(0, 1))(x, v), jax.grad(fj, argnums=(0, 1))(x, v)
        close(gt[0], gj[0])
        close(gt[1], gj[1])


@pytest.mark.parametrize("op", ["min", "max"])
def test_at_min_max_repeated_index_ties_as_jax(op):
    x, idx, v = np.array([1.0, 2.0, 3.0, 4.0]), np.array([1, 1]), np.array([2.0, 2.0])
    fj = lambda x, v: jnp.sum(getattr(jnp.asarray(x).at[idx], op)(v) * jnp.arange(1.0, 5.0))  # noqa: E731
    ft = lambda x, v: tnp.sum(getattr(x.at[idx], op)(v) * tnp.arange(1.0, 5.0))  # noqa: E731
    gt, gj = tidu.grad(ft, argnums=(0, 1))(x, v), jax.grad(fj, argnums=(0, 1))(x, v)
    close(gt[0], gj[0])
    close(gt[1], gj[1])


@pytest.mark.parametrize("i", [7, -7, 2, -2])
@pytest.mark.parametrize("op", ["set", "add", "min", "get"])
def test_at_traced_scalar_index_default_and_drop_modes(op, i):
    """A traced index out of range: updates drop (JAX's default), plain reads clamp."""
    x = np.arange(5.0)
    modes = [None, "promise_in_bounds"] + (["drop"] if op != "get" else ["clip"])
    for mode in modes:
        kw = {} if mode is None else {"mode": mode}
        f = lambda x, i: x.at[i].get(**kw) if op == "get" else getattr(x.at[i], op)(-1.0, **kw)  # noqa: E731, B023
        close(tidu.jit(f)(x, np.int64(i)), jax.jit(f)(jnp.asarray(x), np.int64(i)))


@pytest.mark.parametrize("case", ["set clip", "add clip", "get fill", "get drop"])
def test_at_traced_scalar_index_clip_and_fill_modes(case):
    op, mode = case.split()
    x = np.arange(5.0)
    f = lambda x, i: x.at[i].get(mode=mode) if op == "get" else getattr(x.at[i], op)(-1.0, mode=mode)  # noqa: E731
    close(tidu.jit(f)(x, np.int64(7)), jax.jit(f)(jnp.asarray(x), np.int64(7)))


def test_at_constant_index_array_out_of_range_drops_with_a_mode():
    """A constant index out of range is an IndexError by default (docs/numpy.md: JAX's silent
    drop hides the bug that wrote it); with a mode, JAX's values."""
    x, idx, v = np.arange(5.0), np.array([0, 9, -9, 2]), np.array([0.5, 1.5, 2.5, 3.5])
    with pytest.raises(IndexError, match="mode='drop'"):
        tidu.jit(lambda x, v: x.at[idx].set(v))(x, v)
    with pytest.raises(IndexError):
        tnp.at(x)[idx].set(v)
    for mode in ("drop", "fill", "promise_in_bounds", "clip"):
        close(tidu.jit(lambda x, v: x.at[idx].set(v, mode=mode))(x, v),  # noqa: B023
              jnp.asarray(x).at[idx].set(v, mode=mode))


def test_at_modes_eagerly_as_traced_and_jax():
    """tnp.at of a NumPy array with a mode: as traced and as JAX (NumPy alone would raise
    or ignore the mode)."""
    x, idx, v = np.arange(5.0), np.array([0, 9, -9, 2]), np.array([0.5, 1.5, 2.5, 3.5])
    close(tnp.at(x)[idx].set(v, mode="drop"), jnp.asarray(x).at[idx].set(v, mode="drop"))
    close(tnp.at(x)[idx].add(v, mode="clip"), jnp.asarray(x).at[idx].add(v, mode="clip"))
    close(tnp.at(x)[idx].get(mode="fill", fill_value=-1.0), jnp.asarray(x).at[idx].get(mode="fill", fill_value=-1.0))
    close(tnp.at(x)[7].get(mode="fill"), jnp.asarray(x).at[7].get(mode="fill"))
    m = np.arange(12.0).reshape(3, 4)
    close(tidu.jit(lambda m: m.at[np.array([1, 5]), 1:].get(mode="fill"))(m),
          jnp.asarray(m).at[np.array([1, 5]), 1:].get(mode="fill"))
    close(tidu.grad(lambda x: tnp.sum(x.at[np.array([0, 7])].set(2.0 * x[1], mode="clip") ** 2))(x),
          jax.grad(lambda x: jnp.sum(x.at[np.array([0, 7])].set(2.0 * x[1], mode="clip") ** 2))(x))


def test_at_bad_options_are_clear_errors():
    x = np.arange(5.0)
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        tnp.at(x)[1].set(2.0, modee="clip")
    with pytest.raises(ValueError, match="mode must be one of"):
        tidu.jit(lambda x: x.at[1].set(2.0, mode="wrap"))(x)
    with pytest.raises(TypeError, match="fill_value is for reads"):
        tidu.jit(lambda x: x.at[1].set(2.0, fill_value=0.0))(x)
