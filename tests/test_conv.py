"""tidu.lax.conv_general_dilated (the primitive conv of rules/conv.rules) against
jax.lax.conv_general_dilated: values (1-D to 3-D, strides, padding names and pairs, lhs
and rhs dilation, feature and batch groups, dimension numbers, float64 and complex128),
first derivatives in both operands (grad, jvp, vjp) and hessians, under tidu.vmap, eager
(NumPy values) and traced alike; the primitive and whole programs run in XLA from their
StableHLO; bad arguments get one-line errors naming them."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from typing import Any

import numpy as np
import pytest

import tidu
import tidu.lax as tlax

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)

RTOL, ATOL = 1e-12, 1e-12


def draw(shape: tuple[int, ...], dtype: str = "float64", seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape)
    if dtype.startswith("complex"):
        x = x + 1j * rng.normal(size=shape)
    return x.astype(dtype)


def close(got: Any, want: Any, rtol: float = RTOL, atol: float = ATOL) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


# (lhs shape, rhs shape, keyword arguments of conv_general_dilated)
CASES: list[tuple[tuple[int, ...], tuple[int, ...], dict[str, Any]]] = [
    ((2, 3, 9), (4, 3, 3), {"window_strides": (1,), "padding": "VALID"}),
    ((2, 3, 9), (4, 3, 3), {"window_strides": (2,), "padding": "SAME", "rhs_dilation": (2,)}),
    ((1, 2, 8), (3, 2, 4), {"window_strides": (3,), "padding": "SAME_LOWER"}),
    ((2, 2, 7), (2, 2, 3), {"window_strides": (2,), "padding": [(2, -1)], "lhs_dilation": (3,),
                            "rhs_dilation": (2,)}),
    ((2, 7, 6, 3), (3, 2, 3, 2), {"window_strides": (2, 1), "padding": "same", "rhs_dilation": (1, 2),
                                  "dimension_numbers": ("NHWC", "HWIO", "NHWC")}),
    ((2, 7, 6, 3), (3, 2, 3, 2), {"window_strides": (2, 1), "padding": [(1, 0), (0, 2)], "lhs_dilation": (2, 1),
                                  "dimension_numbers": ("NWHC", "HWIO", "NCWH")}),
    ((3, 4, 6, 5), (6, 2, 2, 3), {"window_strides": (1, 2), "padding": "VALID", "feature_group_count": 2,
                                  "dimension_numbers": ("NCHW", "OIHW", "NHWC")}),
    ((2, 4, 5, 5), (4, 1, 3, 3), {"window_strides": (1, 1), "padding": "SAME", "feature_group_count": 4}),
    ((6, 4, 6), (9, 4, 2), {"window_strides": (1,), "padding": "SAME", "rhs_dilation": (2,),
                            "batch_group_count": 3}),
    ((4, 2, 5, 4), (4, 2, 2, 2), {"window_strides": (2, 1), "padding": [(1, 1), (0, 1)], "lhs_dilation": (1, 2),
                                  "batch_group_count": 2,  # JAX's own ConvDimensionNumbers
                                  "dimension_numbers": jax.lax.ConvDimensionNumbers((0, 1, 2, 3), (0, 1, 2, 3),
                                                                                    (0, 1, 3, 2))}),
    ((2, 2, 5, 4, 3), (3, 2, 2, 2, 2), {"window_strides": (1, 2, 1), "padding": [(1, 1), (0, 0), (2, -1)],
                                        "lhs_dilation": (1, 1, 2), "rhs_dilation": (2, 1, 1),
                                        "dimension_numbers": ("NCDHW", "OIDHW", "NDHWC")}),
    ((1, 3, 4, 3, 4), (2, 3, 2, 2, 3), {"window_strides": (1, 1, 2), "padding": "SAME"}),
]
IDS = [f"{len(ls) - 2}d-{i}" for i, (ls, _, _) in enumerate(CASES)]


def _conv(module: Any, kw: dict[str, Any]) -> Any:
    return lambda x, w: module.conv_general_dilated(x, w, **kw)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize(("lhs_shape", "rhs_shape", "kw"), CASES, ids=IDS)
def test_values_match_jax(lhs_shape, rhs_shape, kw, dtype):
    """Eager (NumPy values in, NumPy values out) and traced both equal JAX's."""
    x, w = draw(lhs_shape, dtype, 1), draw(rhs_shape, dtype, 2)
    want = _conv(jax.lax, kw)(x, w)
    eager = _conv(tlax, kw)(x, w)
    assert isinstance(eager, np.ndarray) and eager.dtype == want.dtype
    close(eager, want)
    close(tidu.jit(_conv(tlax, kw))(x, w), want)


def _loss(module: Any, np_: Any, kw: dict[str, Any]) -> Any:
    def loss(x: Any, w: Any) -> Any:
        y = module.conv_general_dilated(x, w, **kw)
        return np_.sum(np_.sin(np_.real(y)) + np_.abs(y) ** 2)
    return loss


FAST = (3, 9)  # 1-D and 2-D with groups and dilation; the other cases' derivatives run with -m slow
SLOW_CASES = [pytest.param(*c, id=i, marks=() if n in FAST else pytest.mark.slow)
              for n, (c, i) in enumerate(zip(CASES, IDS, strict=True))]


@pytest.mark.parametrize(("lhs_shape", "rhs_shape", "kw"), SLOW_CASES)
def test_gradients_match_jax(lhs_shape, rhs_shape, kw):
    """grad of a real loss in both operands, a jvp and a vjp (complex operands), and the
    same gradient eagerly (NumPy values)."""
    import tidu.numpy as tnp

    x, w = draw(lhs_shape, seed=3), draw(rhs_shape, seed=4)
    got = tidu.grad(_loss(tlax, tnp, kw), argnums=(0, 1))(x, w)
    want = jax.jit(jax.grad(_loss(jax.lax, jnp, kw), argnums=(0, 1)))(x, w)
    for g, r in zip(got, want, strict=True):
        close(g, r)
    xc, wc = draw(lhs_shape, "complex128", 5), draw(rhs_shape, "complex128", 6)
    tx, tw = draw(lhs_shape, "complex128", 7), draw(rhs_shape, "complex128", 8)
    f, fj = _conv(tlax, kw), _conv(jax.lax, kw)
    y, dy = tidu.jvp(f, (xc, wc), (tx, tw))
    yj, dyj = jax.jit(jax.jvp, static_argnums=0)(fj, (xc, wc), (tx, tw))
    close(y, yj)
    close(dy, dyj)
    out, pull = tidu.vjp(f, xc, wc)
    outj, pullj = jax.vjp(fj, xc, wc)
    ct = draw(np.shape(outj), "complex128", 9)
    # tidu's cotangents are for <a, b> = Re sum conj(a) b; JAX's for the bilinear pairing
    for g, r in zip(pull(ct), pullj(np.conj(ct)), strict=True):
        close(g, np.conj(r))


@pytest.mark.parametrize("case", [3, pytest.param(9, marks=pytest.mark.slow)], ids=[IDS[i] for i in (3, 9)])
def test_hessians_match_jax(case):
    lhs_shape, rhs_shape, kw = CASES[case]
    x, w = draw(lhs_shape, seed=10) * 0.5, draw(rhs_shape, seed=11) * 0.5

    def loss(m: Any, np_: Any) -> Any:
        def f(v: Any) -> Any:
            a, b = v[:x.size].reshape(x.shape), v[x.size:].reshape(w.shape)
            y = m.conv_general_dilated(a, b, **kw)
            return np_.sum(np_.tanh(y) * y)
        return f

    import tidu.numpy as tnp

    v = np.concatenate([x.ravel(), w.ravel()])
    close(tidu.hessian(loss(tlax, tnp))(v), jax.jit(jax.hessian(loss(jax.lax, jnp)))(v), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("which", ["lhs", "rhs", "both"])
@pytest.mark.parametrize("case", [1, 5, 6, 9], ids=[IDS[i] for i in (1, 5, 6, 9)])
def test_vmap_matches_jax(case, which):
    """Examples of the lhs, of the window or of both (the groups of each kind kept)."""
    lhs_shape, rhs_shape, kw = CASES[case]
    x = draw((3, *lhs_shape) if which != "rhs" else lhs_shape, seed=12)
    w = draw((3, *rhs_shape) if which != "lhs" else rhs_shape, seed=13)
    axes = (0 if which != "rhs" else None, 0 if which != "lhs" else None)
    close(tidu.vmap(_conv(tlax, kw), in_axes=axes)(x, w), jax.jit(jax.vmap(_conv(jax.lax, kw), in_axes=axes))(x, w))


def test_vmap_of_gradient():
    lhs_shape, rhs_shape, kw = CASES[6]
    import tidu.numpy as tnp

    x, w = draw((2, *lhs_shape), seed=14), draw(rhs_shape, seed=15)
    got = tidu.vmap(tidu.grad(_loss(tlax, tnp, kw), argnums=1), in_axes=(0, None))(x, w)
    want = jax.jit(jax.vmap(jax.grad(_loss(jax.lax, jnp, kw), argnums=1), in_axes=(0, None)))(x, w)
    close(got, want)


def test_conv_and_general_padding_match_jax():
    x, w = draw((2, 3, 6, 5), seed=16), draw((4, 3, 3, 2), seed=17)
    close(tlax.conv(x, w, (1, 2), "SAME"), jax.lax.conv(x, w, (1, 2), "SAME"))
    close(tlax.conv_with_general_padding(x, w, (2, 1), [(1, 2), (0, 1)], (1, 2), (2, 1)),
          jax.lax.conv_with_general_padding(x, w, (2, 1), [(1, 2), (0, 1)], (1, 2), (2, 1)))
    dn = tlax.conv_dimension_numbers(x.shape, w.shape, ("NHWC", "OIHW", "NCHW"))
    assert tuple(map(tuple, dn)) == tuple(map(tuple, jax.lax.conv_dimension_numbers(x.shape, w.shape,
                                                                                  ("NHWC", "OIHW", "NCHW"))))
    # integers promote as the operands' common dtype; preferred_element_type converts first
    xi, wi = np.arange(24).reshape(1, 2, 12), np.ones((1, 2, 3), dtype=np.int64)
    close(tlax.conv(xi, wi, (1,), "VALID"), jax.lax.conv(xi, wi, (1,), "VALID"))
    got = tlax.conv(xi, wi, (1,), "VALID", preferred_element_type=np.float64)
    assert got.dtype == np.float64
    close(got, jax.lax.conv(xi, wi, (1,), "VALID", preferred_element_type=np.float64))


def test_primitive_runs_in_xla():
    """stablehlo.convolution compiled and run by XLA equals the NumPy kernel: groups of
    both kinds, negative padding, dilations, three spatial axes, float32 too."""
    from xla_util import check, op

    from tidu.core.keys import Aval

    for lhs, rhs, attrs, dtype in [
        ((2, 4, 7, 6), (6, 2, 3, 2), {"window_strides": (2, 3), "padding": ((1, 2), (2, -1)), "lhs_dilation": (2, 1),
                                      "rhs_dilation": (1, 2), "feature_group_count": 2, "batch_group_count": 1},
         "float64"),
        ((6, 4, 7), (6, 4, 3), {"window_strides": (2,), "padding": ((-1, 3),), "lhs_dilation": (3,),
                                "rhs_dilation": (2,), "feature_group_count": 1, "batch_group_count": 3}, "complex128"),
        ((1, 2, 4, 3, 5), (2, 2, 2, 2, 3), {"window_strides": (1, 1, 2), "padding": ((1, 0), (0, 1), (1, 1)),
                                            "lhs_dilation": (1, 1, 1), "rhs_dilation": (1, 1, 1),
                                            "feature_group_count": 1, "batch_group_count": 1}, "float32"),
    ]:
        arrays = [draw(lhs, dtype, 18), draw(rhs, dtype, 19)]
        program = check(lambda b, u, v, a=attrs: [op(b, "conv", u, v, **a)], [Aval(lhs, dtype), Aval(rhs, dtype)],
                        arrays)
        text = program.to_stablehlo()
        assert "stablehlo.convolution(%s0, %s1)" in text
        assert text == program.to_stablehlo()  # deterministic


def test_programs_run_in_xla():
    """A value, its gradient (both transposes) and a vmapped gradient: StableHLO run by XLA
    equals NumPy's values, and JAX's."""
    from tidu.lowering.xla import run_xla

    import tidu.numpy as tnp

    kw = {"window_strides": (2, 1), "padding": "SAME", "rhs_dilation": (1, 2), "feature_group_count": 2}
    w = draw((4, 1, 3, 2), seed=21)

    def f(x: Any) -> Any:
        return tnp.sum(tnp.tanh(tlax.conv_general_dilated(x, w, **kw)))

    def fj(x: Any) -> Any:
        return jnp.sum(jnp.tanh(jax.lax.conv_general_dilated(x, w, **kw)))

    x, xs = draw((2, 2, 5, 4), seed=22), draw((2, 2, 2, 5, 4), seed=23)
    for fn, args, want in [(f, (x,), fj(x)), (tidu.grad(f), (x,), jax.jit(jax.grad(fj))(x)),
                           (tidu.vmap(tidu.grad(f)), (xs,), jax.jit(jax.vmap(jax.grad(fj)))(xs))]:
        program = tidu.make_graph(fn)(*args).program
        numpy_values = program.eval(list(args))
        for got, ref in zip(run_xla(program, list(args)), numpy_values, strict=True):
            close(got, ref)
        close(numpy_values[0], want)
        assert "stablehlo.convolution" in program.to_stablehlo()


@pytest.mark.parametrize(("kw", "error", "message"), [
    ({"window_strides": (1, 1)}, ValueError, "window_strides must have 1 entries"),
    ({"window_strides": (1.5,)}, TypeError, "window_strides must be integers"),
    ({"window_strides": (0,)}, ValueError, "window_strides must be positive"),
    ({"padding": "FULL"}, ValueError, "padding must be 'SAME', 'VALID', 'SAME_LOWER'"),
    ({"padding": [(1, 2, 3)]}, ValueError, "padding must be 1 .low, high. pairs"),
    ({"lhs_dilation": (2,), "padding": "SAME"}, ValueError, "padding 'SAME' with lhs_dilation"),
    ({"rhs_dilation": (1, 2)}, ValueError, "rhs_dilation must have 1 entries"),
    ({"feature_group_count": 2}, ValueError, "lhs has 4 features, which must be feature_group_count"),
    ({"feature_group_count": 0}, ValueError, "feature_group_count must be a positive integer"),
    ({"batch_group_count": 3}, ValueError, "lhs batch .2. must be a multiple of batch_group_count"),
    ({"dimension_numbers": ("NCH", "OIW", "NCH")}, ValueError, "lhs spec 'NCH' must name the same spatial"),
    ({"dimension_numbers": ("NCH", "OIH")}, TypeError, "dimension_numbers must be None"),
])
def test_bad_arguments_are_named(kw, error, message):
    x, w = draw((2, 4, 6)), draw((3, 4, 2))
    args = {"window_strides": (1,), "padding": "VALID", **kw}
    with pytest.raises(error, match=message):
        tlax.conv_general_dilated(x, w, **args)
    import tidu.numpy as tnp

    with pytest.raises(error, match=message):  # traced: the same checks
        tidu.jit(lambda a: tnp.sum(tlax.conv_general_dilated(a, w, **args)))(x)


def test_bad_shapes_are_named():
    with pytest.raises(ValueError, match="rank >= 3"):
        tlax.conv(draw((2, 4)), draw((3, 4)), (), "VALID")
    with pytest.raises(ValueError, match="lhs and rhs must have the same rank"):
        tlax.conv(draw((2, 4, 5)), draw((3, 4, 2, 2)), (1,), "VALID")
    with pytest.raises(ValueError, match="lhs has 4 features, which must be feature_group_count .1. times the rhs "
                                         "input features .3."):
        tlax.conv(draw((2, 4, 5)), draw((3, 3, 2)), (1,), "VALID")


@pytest.mark.slow
@pytest.mark.parametrize(("lhs_shape", "rhs_shape", "kw"), CASES, ids=IDS)
def test_hessians_and_vmap_everywhere(lhs_shape, rhs_shape, kw):
    """Every case: the hessian in both operands together, and vmap of the gradient over
    examples of both operands."""
    import tidu.numpy as tnp

    x, w = draw(lhs_shape, seed=30) * 0.5, draw(rhs_shape, seed=31) * 0.5

    def loss(m: Any, np_: Any) -> Any:
        def f(v: Any) -> Any:
            a, b = v[:x.size].reshape(x.shape), v[x.size:].reshape(w.shape)
            return np_.sum(np_.tanh(m.conv_general_dilated(a, b, **kw)) ** 2)
        return f

    v = np.concatenate([x.ravel(), w.ravel()])
    close(tidu.hessian(loss(tlax, tnp))(v), jax.jit(jax.hessian(loss(jax.lax, jnp)))(v), rtol=1e-10, atol=1e-10)
    xs, ws = draw((2, *lhs_shape), seed=32), draw((2, *rhs_shape), seed=33)
    got = tidu.vmap(tidu.grad(_loss(tlax, tnp, kw), argnums=(0, 1)))(xs, ws)
    want = jax.jit(jax.vmap(jax.grad(_loss(jax.lax, jnp, kw), argnums=(0, 1))))(xs, ws)
    for g, r in zip(got, want, strict=True):
        close(g, r)


# --- tidu.scipy.signal and tidu.numpy.convolve/correlate ---------------------------------

SIGNAL_SHAPES = [((7,), (3,)), ((3,), (7,)), ((5, 4), (2, 3)), ((2, 3), (5, 4)), ((4, 3, 5), (2, 2, 3))]


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize(("shape1", "shape2"), SIGNAL_SHAPES)
def test_signal_matches_jax(shape1, shape2, dtype):
    """convolve and correlate, every mode, eager and traced, against jax.scipy.signal."""
    import jax.scipy.signal as jsig

    import tidu.scipy.signal as tsig

    a, b = draw(shape1, dtype, 40), draw(shape2, dtype, 41)
    for name in ("convolve", "correlate"):
        for mode in ("full", "same", "valid"):
            want = getattr(jsig, name)(a, b, mode=mode)
            close(getattr(tsig, name)(a, b, mode=mode), want)
            close(tidu.jit(lambda x, y, n=name, m=mode: getattr(tsig, n)(x, y, mode=m))(a, b), want)
    if len(shape1) == 2:
        for name in ("convolve2d", "correlate2d"):
            close(getattr(tsig, name)(a, b, mode="same"), getattr(jsig, name)(a, b, mode="same"))


def test_signal_gradients_and_vmap_match_jax():
    import jax.scipy.signal as jsig

    import tidu.numpy as tnp
    import tidu.scipy.signal as tsig

    a, b = draw((6, 5), seed=42), draw((3, 2), seed=43)

    def loss(sig: Any, np_: Any) -> Any:
        return lambda x, y: np_.sum(np_.sin(sig.correlate(x, y, mode="same")) * sig.convolve(x, y)[1:-1, :5])

    for g, r in zip(tidu.grad(loss(tsig, tnp), argnums=(0, 1))(a, b),
                    jax.jit(jax.grad(loss(jsig, jnp), argnums=(0, 1)))(a, b), strict=True):
        close(g, r)
    xs = draw((3, 6, 5), seed=44)
    close(tidu.vmap(lambda x: tsig.convolve(x, b, mode="valid"))(xs),
          jax.jit(jax.vmap(lambda x: jsig.convolve(x, b, mode="valid")))(xs))


def test_signal_errors_are_named():
    import tidu.scipy.signal as tsig

    with pytest.raises(ValueError, match="mode must be 'full', 'same' or 'valid'"):
        tsig.convolve(np.ones(3), np.ones(2), mode="circular")
    with pytest.raises(ValueError, match="same number of dimensions"):
        tsig.correlate(np.ones(3), np.ones((2, 2)))
    with pytest.raises(ValueError, match="at least as large as the other in every dimension"):
        tsig.convolve(np.ones((3, 2)), np.ones((2, 3)), mode="valid")
    with pytest.raises(ValueError, match="must be 2-D"):
        tsig.convolve2d(np.ones(3), np.ones(2))
    with pytest.raises(NotImplementedError, match="boundary='fill'"):
        tsig.correlate2d(np.ones((3, 3)), np.ones((2, 2)), boundary="wrap")


@pytest.mark.parametrize("name", ["convolve", "correlate"])
def test_numpy_convolve_modes_match_jax(name):
    """tidu.numpy's 1-D convolve and correlate (not built on conv) in every mode, either
    input longer."""
    import tidu.numpy as tnp

    for n, m in [(7, 3), (3, 7), (4, 4), (1, 3)]:
        a, b = draw((n,), "complex128", 45), draw((m,), "complex128", 46)
        for mode in ("full", "same", "valid"):
            want = getattr(jnp, name)(a, b, mode=mode)
            close(getattr(tnp, name)(a, b, mode=mode), want)
            close(tidu.jit(lambda x, y, md=mode: getattr(tnp, name)(x, y, mode=md))(a, b), want)
