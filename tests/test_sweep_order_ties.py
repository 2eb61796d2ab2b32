"""Order-dependent functions at ties and other non-smooth points, as a user porting JAX code
meets them: values eagerly (NumPy arrays in) and under tidu.jit, first derivatives in both
modes, second derivatives, and tidu.vmap, against JAX with x64 (jnp.max shares a tie's
derivative equally, maximum(x, x) gives one half each, sort gives each tied element its own
position's cotangent, median and quantile follow from sort), and against finite differences
or NumPy where tidu answers differently from JAX on purpose (each such test says why)."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import ml_dtypes
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from jax import lax as jlax  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402
from tidu import lax as tlax  # noqa: E402

T, J = (tnp, tlax), (jnp, jlax)
TIES = np.array([3.0, 1.0, 3.0, 2.0, 1.0, 3.0])
TIES2 = np.array([[2.0, 2.0, 1.0], [0.0, 5.0, 5.0]])
NANS = np.array([3.0, np.nan, 3.0, 1.0, 1.0])
ZEROS = np.array([0.0, -0.0, 1.0, -1.0])
HALVES = np.array([0.5, 1.5, -0.5, 2.0, -2.5, 0.0])
XP, FP = np.array([0.0, 1.0, 2.0, 4.0]), np.array([1.0, 3.0, 2.0, 0.0])
KNOTS = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0])
METHODS = ["linear", "lower", "higher", "nearest", "midpoint", "inverted_cdf"]


def first(r):
    return r[0] if isinstance(r, tuple | list) else r


def close(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, JAX's {want.shape}"
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14, equal_nan=True, err_msg=what)


# (name, f(m, v) with m = (numpy module, lax module), the point): f's first output is real
CASES = [
    ("sort", lambda m, v: m[0].sort(v), TIES),
    ("sort descending", lambda m, v: m[0].sort(v, descending=True), TIES),
    ("sort axis 0", lambda m, v: m[0].sort(v, axis=0), TIES2),
    ("sort axis None", lambda m, v: m[0].sort(v, axis=None), TIES2),
    ("sort nan and zeros", lambda m, v: m[0].sort(v), np.array([np.nan, 1.0, -0.0, 0.0, -np.inf, 1.0, np.nan])),
    ("take_along_axis argsort", lambda m, v: m[0].take_along_axis(v, m[0].argsort(v), axis=-1), TIES),
    *[(f"partition kth={k}", lambda m, v, k=k: m[0].partition(v, k), TIES) for k in (0, 2, 3, 5)],
    ("median even count, tie in the middle", lambda m, v: m[0].median(v), np.array([1.0, 2.0, 2.0, 3.0])),
    ("median odd count, three tied", lambda m, v: m[0].median(v), np.array([2.0, 1.0, 2.0, 2.0, 3.0])),
    ("median axis 0", lambda m, v: m[0].median(v, axis=0), TIES2),
    ("nanmedian ties", lambda m, v: m[0].nanmedian(v), np.array([2.0, np.nan, 2.0, 1.0])),
    ("nanmedian all-nan row", lambda m, v: m[0].nanmedian(v, axis=1), np.array([[np.nan, np.nan], [1.0, 1.0]])),
    # nearest at a position halfway between two statistics is left out: tidu rounds it to the
    # even one as NumPy (see test_nearest_quantile_halfway_is_numpys)
    *[(f"quantile {meth} q={q}", lambda m, v, meth=meth, q=q: m[0].quantile(v, q, method=meth), TIES)
      for meth in METHODS for q in (0.0, 0.25, 0.5, 0.6, 1.0) if not (meth == "nearest" and q == 0.5)],
    *[(f"percentile {meth}", lambda m, v, meth=meth: m[0].percentile(v, np.array([0.0, 20.0, 60.0, 100.0]),
                                                                       method=meth), TIES) for meth in METHODS],
    *[(f"nanquantile {meth} q={q}", lambda m, v, meth=meth, q=q: m[0].nanquantile(v, q, method=meth), NANS)
      for meth in METHODS for q in (0.0, 0.25, 0.6, 1.0)],
    *[(f"{name} ties", lambda m, v, name=name: getattr(m[0], name)(v), TIES)
      for name in ("max", "min", "amax", "amin", "ptp")],
    *[(f"{name} axis 1", lambda m, v, name=name: getattr(m[0], name)(v, axis=1), TIES2)
      for name in ("max", "min", "ptp")],
    ("max all tied", lambda m, v: m[0].max(v), np.array([2.0, 2.0, 2.0])),
    ("max initial equal to the maximum", lambda m, v: m[0].max(v, initial=3.0), TIES),
    ("min where", lambda m, v: m[0].min(v, where=np.array([True, False, True, True, False, False]), initial=9.0),
     TIES),
    ("max with nan", lambda m, v: m[0].max(v), NANS),
    ("nanmax ties beside nan", lambda m, v: m[0].nanmax(v), NANS),
    ("nanmin ties beside nan", lambda m, v: m[0].nanmin(v), NANS),
    ("nanmax all-nan row", lambda m, v: m[0].nanmax(v, axis=1), np.array([[np.nan, np.nan], [1.0, 1.0]])),
    *[(f"{name}(x, x)", lambda m, v, name=name: getattr(m[0], name)(v, v), TIES)
      for name in ("maximum", "minimum", "fmax", "fmin")],
    *[(f"{name}(x, reversed x)", lambda m, v, name=name: getattr(m[0], name)(v, v[::-1]), TIES)
      for name in ("maximum", "minimum", "fmax", "fmin")],
    *[(f"{name}(x, 3.0)", lambda m, v, name=name: getattr(m[0], name)(v, 3.0), TIES)
      for name in ("maximum", "minimum", "fmax", "fmin")],
    *[(f"{name} with nan", lambda m, v, name=name: getattr(m[0], name)(v, v[::-1]), np.array([np.nan, 1.0, 2.0, 0.5]))
      for name in ("maximum", "minimum", "fmax", "fmin")],
    ("clip at its bounds", lambda m, v: m[0].clip(v, 1.0, 3.0), TIES),
    ("clip lower bound above upper", lambda m, v: m[0].clip(v, 3.0, 1.0), np.array([0.0, 1.0, 2.0, 3.0, 4.0])),
    ("clip traced bounds tied with x", lambda m, v: m[0].clip(v[::-1], v, 3.0), np.array([0.0, 1.0, 1.0, 3.0])),
    ("clip nan", lambda m, v: m[0].clip(v, 0.5, 1.0), NANS),
    ("abs at 0 and -0", lambda m, v: m[0].abs(v), ZEROS),
    ("sign(x) * x at 0", lambda m, v: m[0].sign(v) * v, ZEROS),
    *[(f"{name} at halves", lambda m, v, name=name: getattr(m[0], name)(v), HALVES)
      for name in ("round", "floor", "ceil", "trunc", "rint")],
    *[(f"lax.{name} reverse={rev}", lambda m, v, name=name, rev=rev: getattr(m[1], name)(v, axis=0, reverse=rev), TIES)
      for name in ("cummax", "cummin", "cumlogsumexp", "cumsum", "cumprod") for rev in (False, True)],
    *[(f"lax.{name} axis 1 reverse", lambda m, v, name=name: getattr(m[1], name)(v, axis=1, reverse=True), TIES2)
      for name in ("cummax", "cummin")],
    ("lax.cummax nan and -inf", lambda m, v: m[1].cummax(v), np.array([-np.inf, -np.inf, 1.0, np.nan, 2.0])),
    *[(f"lax.top_k k={k}", lambda m, v, k=k: m[1].top_k(v, k), TIES) for k in (1, 2, 3, 6)],
    ("lax.top_k rows", lambda m, v: m[1].top_k(v, 2), TIES2),
    ("lax.top_k nan", lambda m, v: m[1].top_k(v, 3), np.array([1.0, np.nan, 3.0, 3.0])),
    ("lax.sort two operands, one key", lambda m, v: m[1].sort((np.array([2.0, 1.0, 2.0, 1.0, 2.0]), v),
                                                              num_keys=1)[1], np.array([0.5, 0.7, 0.1, 0.9, 0.3])),
    ("lax.sort keys tied in the first key", lambda m, v: m[1].sort((v, np.array([1.0, 1.0, 0.0, 0.0, 1.0])),
                                                                   num_keys=2)[0], np.array([2.0, 1.0, 2.0, 1.0, 2.0])),
    ("lax.sort three operands, two keys", lambda m, v: m[1].sort(
        (np.array([2.0, 1.0, 2.0, 1.0, 2.0]), np.array([1.0, 1.0, 0.0, 0.0, 1.0]), v), num_keys=2)[2],
     np.array([0.5, 0.7, 0.1, 0.9, 0.3])),
    ("lax.sort_key_val tied keys", lambda m, v: m[1].sort_key_val(v, v * 10.0)[1], np.array([2.0, 1.0, 2.0, 1.0])),
    ("lax.reduce_max ties", lambda m, v: m[1].reduce_max(v, (0,)), TIES),
    ("lax.reduce_min ties", lambda m, v: m[1].reduce_min(v, (0,)), TIES),
    ("lax.max(x, reversed x)", lambda m, v: m[1].max(v, v[::-1]), TIES),
    ("lax.clamp at its ends", lambda m, v: m[1].clamp(1.0, v, 3.0), TIES),
    ("lax.clamp nan x", lambda m, v: m[1].clamp(0.5, v, 1.0), NANS),
    ("interp in x, at the knots and outside", lambda m, v: m[0].interp(v, XP, FP), KNOTS),
    ("interp in fp", lambda m, v: m[0].interp(KNOTS, XP, v), FP),
    ("interp in xp", lambda m, v: m[0].interp(KNOTS, v, FP), XP),
    ("interp left and right", lambda m, v: m[0].interp(v, XP, FP, left=-5.0, right=7.0), KNOTS),
    ("interp period", lambda m, v: m[0].interp(v, XP, FP, period=4.0), KNOTS),
    ("interp repeated knot, in x", lambda m, v: m[0].interp(v, np.array([0.0, 1.0, 1.0, 2.0]), FP), KNOTS),
    ("interp repeated knot, in xp", lambda m, v: m[0].interp(KNOTS, v, FP), np.array([0.0, 1.0, 1.0, 2.0])),
    ("unique size, ties", lambda m, v: m[0].unique(v, size=3, fill_value=0.0), np.array([3.0, 1.0, 3.0, 2.0, 1.0])),
    ("histogram weights, values on edges", lambda m, v: m[0].histogram(
        np.array([0.0, 1.0, 2.0, 2.0, 3.0, 4.0]), bins=4, weights=v)[0], np.full(6, 1.5)),
    ("histogram edges from min and max", lambda m, v: m[0].histogram(v, bins=4)[1], np.array([0.0, 1.0, 4.0, 4.0])),
]
IDS = [c[0] for c in CASES]


def weights(shape):
    return np.linspace(0.3, 1.7, int(np.prod(shape))).reshape(shape)


def scalar(m, f, w):
    return lambda v: m[0].sum(first(f(m, v)) * w)


@pytest.mark.parametrize("name, f, x", CASES, ids=IDS)
def test_values_and_derivatives_at_ties_are_jaxs(name, f, x):
    want = f(J, jnp.asarray(x))
    for where, got in (("eager", f(T, x)), ("tidu.jit", tidu.jit(lambda v: f(T, v))(x))):
        if isinstance(want, tuple | list):
            for i, (g, w) in enumerate(zip(got, want, strict=True)):
                close(g, w, f"{name}: {where} value [{i}]")
        else:
            close(got, want, f"{name}: {where} value")
    w = weights(np.shape(first(want)))
    g_want = jax.grad(scalar(J, f, w))(jnp.asarray(x))
    close(tidu.grad(scalar(T, f, w))(x), g_want, f"{name}: grad")
    close(tidu.jit(tidu.grad(scalar(T, f, w)))(x), g_want, f"{name}: jit(grad)")
    t = np.linspace(-1.0, 1.3, x.size).reshape(x.shape)
    close(tidu.jvp(scalar(T, f, w), (x,), (t,))[1], jax.jvp(scalar(J, f, w), (jnp.asarray(x),), (jnp.asarray(t),))[1],
          f"{name}: jvp")


SECOND = [
    ("sort of squares", lambda m, v: m[0].sort(v * v), np.array([1.0, -1.0, 2.0, 0.5])),
    ("median of squares, tie", lambda m, v: m[0].median(v * v), np.array([1.0, -1.0, 2.0])),
    ("median of cubes, even count", lambda m, v: m[0].median(v ** 3), np.array([1.0, 2.0, 2.0, -3.0])),
    ("quantile of squares", lambda m, v: m[0].quantile(v * v, 0.3), np.array([1.0, -1.0, 2.0, 0.5])),
    ("nanmedian of squares", lambda m, v: m[0].nanmedian(v * v), np.array([1.0, np.nan, -1.0, 0.5])),
    ("max of squares, tie", lambda m, v: m[0].max(v * v), np.array([1.0, -1.0, 0.5])),
    ("ptp of squares, ties", lambda m, v: m[0].ptp(v * v), np.array([1.0, -1.0, 2.0, -2.0])),
    ("nanmax of squares", lambda m, v: m[0].nanmax(v * v), np.array([1.0, np.nan, -1.0, 0.5])),
    ("maximum(x^2, x)", lambda m, v: m[0].maximum(v * v, v), np.array([1.0, 0.0, 2.0, -1.0])),
    ("minimum(x^2, x)", lambda m, v: m[0].minimum(v * v, v), np.array([1.0, 0.0, 2.0, -1.0])),
    ("clip of squares at its bounds", lambda m, v: m[0].clip(v * v, 1.0, 4.0), np.array([1.0, -1.0, 2.0, 0.5, 3.0])),
    ("abs of cubes at 0", lambda m, v: m[0].abs(v ** 3), ZEROS),
    ("lax.top_k of squares", lambda m, v: m[1].top_k(v * v, 2)[0], np.array([2.0, 2.0, -2.0, 1.0])),
    ("lax.cummax of squares", lambda m, v: m[1].cummax(v * v), np.array([2.0, 2.0, -2.0, 1.0])),
    ("lax.cumlogsumexp", lambda m, v: m[1].cumlogsumexp(v * v, reverse=True), np.array([2.0, 2.0, -2.0, 1.0])),
    ("interp of squares", lambda m, v: m[0].interp(v * v, XP, FP), np.array([0.5, 1.0, 1.5, 2.0])),
    ("floor times x", lambda m, v: m[0].floor(v) * v * v, HALVES),
]


@pytest.mark.parametrize("name, f, x", SECOND, ids=[c[0] for c in SECOND])
def test_second_derivatives_at_ties_are_jaxs(name, f, x):
    w = weights(np.shape(f(J, jnp.asarray(x))))
    want = jax.hessian(scalar(J, f, w))(jnp.asarray(x))
    for mode in ("FoF", "RoR"):
        close(tidu.hessian(scalar(T, f, w), mode=mode)(x), want, f"{name}: hessian {mode}")


BATCHED = [
    ("sort", lambda m, v: m[0].sort(v)),
    ("median", lambda m, v: m[0].median(v)),
    ("nanmedian", lambda m, v: m[0].nanmedian(v)),
    ("quantile midpoint", lambda m, v: m[0].quantile(v, np.array([0.2, 0.5]), method="midpoint")),
    ("nanquantile higher", lambda m, v: m[0].nanquantile(v, 0.7, method="higher")),
    ("partition", lambda m, v: m[0].partition(v, 2)),
    ("max", lambda m, v: m[0].max(v)),
    ("ptp", lambda m, v: m[0].ptp(v)),
    ("nanmax", lambda m, v: m[0].nanmax(v)),
    ("maximum", lambda m, v: m[0].maximum(v, v[::-1])),
    ("clip traced bound", lambda m, v: m[0].clip(v, v[0], 2.0)),
    ("lax.cummax reverse", lambda m, v: m[1].cummax(v, reverse=True)),
    ("lax.cumlogsumexp", lambda m, v: m[1].cumlogsumexp(v)),
    ("lax.top_k", lambda m, v: m[1].top_k(v, 2)[0]),
    ("lax.sort two operands", lambda m, v: m[1].sort((m[0].floor(v), v), num_keys=1)[1]),
    ("interp", lambda m, v: m[0].interp(v, np.array([0.0, 1.0, 3.0]), np.array([1.0, -1.0, 2.0]))),
]
ROWS = np.array([[3.0, 1.0, 3.0, 2.0], [1.0, 1.0, np.nan, 0.0], [-0.0, 0.0, 0.0, -0.0]])


@pytest.mark.parametrize("in_axes", [0, 1])
@pytest.mark.parametrize("name, f", BATCHED, ids=[c[0] for c in BATCHED])
def test_vmap_at_ties_is_jaxs(name, f, in_axes):
    xb = ROWS if in_axes == 0 else ROWS.T.copy()
    want = jax.vmap(lambda v: f(J, v), in_axes=in_axes)(jnp.asarray(xb))
    close(tidu.vmap(lambda v: f(T, v), in_axes=in_axes)(xb), want, f"{name}: vmap")
    close(tidu.jit(tidu.vmap(lambda v: f(T, v), in_axes=in_axes))(xb), want, f"{name}: jit(vmap)")
    if not np.isnan(xb).any() or name in ("nanmedian", "nanmax"):
        def g(m):
            return lambda v: m[0].sum(f(m, v) * weights(np.shape(want)[1:]))
        gw = jax.vmap(jax.grad(g(J)), in_axes=in_axes, out_axes=in_axes)(jnp.asarray(xb))
        close(tidu.vmap(tidu.grad(g(T)), in_axes=in_axes, out_axes=in_axes)(xb), gw, f"{name}: vmap(grad)")


INDEXES = [  # (name, f, x, NumPy's dtype where it is not JAX's int32)
    ("argsort stable", lambda m, v: m[0].argsort(v), TIES, None),
    ("argsort descending stable", lambda m, v: m[0].argsort(v, descending=True), TIES, None),
    ("argsort nan and zeros", lambda m, v: m[0].argsort(v), np.array([np.nan, 1.0, -0.0, 0.0, -np.inf, 1.0]), None),
    ("lexsort ties", lambda m, v: m[0].lexsort((v, m[0].floor(v / 2))), TIES, None),
    ("lexsort rows", lambda m, v: m[0].lexsort(v), TIES2, None),
    *[(f"argpartition kth={k}", lambda m, v, k=k: m[0].argpartition(v, k), TIES, "int64") for k in (0, 2, 5)],
    *[(name, lambda m, v, name=name: getattr(m[0], name)(v), TIES, None) for name in ("argmax", "argmin")],
    *[(f"{name} nan", lambda m, v, name=name: getattr(m[0], name)(v), np.array([1.0, np.nan, 3.0, np.nan]), None)
      for name in ("argmax", "argmin", "nanargmax", "nanargmin")],
    ("argmax zeros", lambda m, v: m[0].argmax(v), np.array([-0.0, 0.0, -0.0]), None),
    ("lax.argmax ties", lambda m, v: m[1].argmax(v, 0, np.int32), TIES, None),
    ("lax.argmin ties", lambda m, v: m[1].argmin(v, 0, np.int64), TIES, None),
    ("lax.top_k indices", lambda m, v: m[1].top_k(v, 4)[1], TIES, None),
    *[(f"searchsorted {side} on ties", lambda m, v, side=side: m[0].searchsorted(np.array([1.0, 2.0, 2.0, 3.0]), v,
                                                                                 side=side),
       np.array([0.0, 1.0, 2.0, 2.5, 3.0, 4.0, np.nan]), "int64") for side in ("left", "right")],
    *[(f"digitize right={right} on edges", lambda m, v, right=right: m[0].digitize(v, np.array([1.0, 2.0, 2.0, 3.0]),
                                                                                    right=right),
       np.array([0.0, 1.0, 2.0, 2.5, 3.0, 4.0, np.nan]), "int64") for right in (False, True)],
    ("digitize decreasing bins", lambda m, v: m[0].digitize(v, np.array([3.0, 2.0, 2.0, 1.0])),
     np.array([0.0, 1.0, 2.0, 2.5, 3.0, 4.0]), "int64"),
    ("histogram counts on edges", lambda m, v: m[0].histogram(v, bins=4, range=(1.0, 2.0))[0],
     np.array([0.0, 1.0, 2.0, 2.0, 3.0, 1.25, 1.5]), "int64"),
    ("histogram counts, given edges", lambda m, v: m[0].histogram(v, bins=np.array([0.0, 1.0, 2.0, 4.0]))[0],
     np.array([0.0, 1.0, 2.0, 2.0, 3.0, 4.0, 2.5]), "int64"),
    ("unique size, nan and zeros", lambda m, v: m[0].unique(v, size=4), np.array([3.0, np.nan, 1.0, -0.0, 0.0, np.nan]),
     None),
    ("unique inverse", lambda m, v: m[0].unique(v, return_inverse=True, size=8)[1], TIES, None),
    ("unique counts", lambda m, v: m[0].unique(v, return_counts=True, size=5, fill_value=0.0)[1], TIES, None),
]


@pytest.mark.parametrize("name, f, x, dtype", INDEXES, ids=[c[0] for c in INDEXES])
def test_indices_and_counts_at_ties_are_jaxs(name, f, x, dtype):
    want = np.asarray(f(J, jnp.asarray(x)))
    for where, got in (("eager", f(T, x)), ("tidu.jit", tidu.jit(lambda v: f(T, v))(x))):
        np.testing.assert_array_equal(got, want, err_msg=f"{name}: {where}")
        if dtype is not None:  # NumPy's dtype (documented), where JAX's is int32 or a float
            assert np.asarray(got).dtype == dtype, f"{name}: {where} dtype {np.asarray(got).dtype}"
    xb = np.stack([x, x[::-1], x * 2.0]) if x.ndim == 1 else None
    if xb is not None and "unique" not in name and "histogram" not in name:
        np.testing.assert_array_equal(tidu.vmap(lambda v: f(T, v))(xb), jax.vmap(lambda v: f(J, v))(jnp.asarray(xb)),
                                      err_msg=f"{name}: vmap")


def test_nearest_quantile_halfway_is_numpys():
    """quantile(method="nearest") rounds a position halfway between two order statistics to
    the even one, as NumPy (documented; JAX's quantile does the same at 2.5, its nanquantile
    takes the lower one at 1.5)."""
    for a, q in ((TIES, 0.5), (NANS, 0.5), (TIES, 0.3)):
        for name in ("quantile", "nanquantile"):
            if name == "quantile" and np.isnan(a).any():
                continue
            want = getattr(np, name)(a, q, method="nearest")
            assert getattr(tnp, name)(a, q, method="nearest") == want
            assert tidu.jit(lambda v, n=name, q=q: getattr(tnp, n)(v, q, method="nearest"))(a) == want


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "int16"])
@pytest.mark.parametrize("name", ["quantile", "nanquantile", "percentile", "nanpercentile"])
def test_one_statistic_quantiles_of_integers_keep_the_dtype_traced(name, dtype):
    """lower, higher, nearest and inverted_cdf pick one order statistic: of integers it is an
    integer of their dtype (NumPy's, which the eager call returns); traced gave float64
    (inverted_cdf: NotImplementedError; JAX's fails on integers)."""
    a = np.array([[3, 1, 3, 2, 1, 3], [7, 7, 0, 5, 5, 1]], dtype=dtype)
    q = np.array([0.0, 0.3, 0.5, 1.0]) * (100.0 if "percentile" in name else 1.0)
    for method in ("lower", "higher", "nearest", "inverted_cdf", "linear", "midpoint"):
        for kw in ({}, {"axis": 1}, {"axis": 0, "keepdims": True}):
            want = getattr(np, name)(a, q, method=method, **kw)
            for where, got in (("eager", getattr(tnp, name)(a, q, method=method, **kw)),
                               ("tidu.jit", tidu.jit(lambda v, m=method, k=kw: getattr(tnp, name)(
                                   v, q, method=m, **k))(a))):
                assert got.dtype == want.dtype, f"{name} {method} {kw} {where}: {got.dtype}, NumPy's {want.dtype}"
                np.testing.assert_array_equal(got, want, err_msg=f"{name} {method} {kw} {where}")


def test_one_statistic_quantile_of_large_integers_is_exact():
    a = np.array([2**62 + 1, 2**62 + 3, 5], dtype=np.int64)  # not representable in float64
    for method in ("lower", "higher", "nearest", "inverted_cdf"):
        want = np.quantile(a, 0.75, method=method)
        assert tidu.jit(lambda v, m=method: tnp.quantile(v, 0.75, method=m))(a) == want


def test_tnp_cummax_shares_ties_as_lax_cummax():
    """tnp.cummax (a tidu extra: NumPy and jax.numpy have none) shares the derivative at
    ties as jax.lax.cummax and tidu.lax.cummax do; it shared it by another scan order."""
    for name in ("cummax", "cummin"):
        for x in (np.array([3.0, 1.0, 3.0, 2.0, 3.0, 3.0, 0.5]), np.array([2.0, 2.0, 2.0, 2.0]),
                  np.array([[1.0, 2.0, 2.0], [2.0, 1.0, 2.0]])):
            s = x if name == "cummax" else -x
            for axis in range(x.ndim):
                w = weights(x.shape)
                want = jax.grad(lambda v, n=name, a=axis, w=w: jnp.sum(getattr(jlax, n)(v, axis=a) * w))(
                    jnp.asarray(s))
                got = tidu.grad(lambda v, n=name, a=axis, w=w: tnp.sum(getattr(tnp, n)(v, axis=a) * w))(s)
                close(got, want, f"tnp.{name} axis={axis} grad at {s}")
                close(tidu.jit(lambda v, n=name, a=axis: getattr(tnp, n)(v, axis=a))(s),
                      getattr(np, "maximum" if name == "cummax" else "minimum").accumulate(s, axis=axis),
                      f"tnp.{name} value")


def test_tnp_cummax_signed_zeros_are_numpys_accumulate():
    z = np.array([0.0, -0.0, 0.0, -0.0, -0.0, 1.0, -0.0])
    for name, ufunc in (("cummax", np.maximum), ("cummin", np.minimum)):
        want = ufunc.accumulate(z)
        for got in (getattr(tnp, name)(z), tidu.jit(getattr(tnp, name))(z)):
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=name)


@pytest.mark.parametrize("lo, hi", [(np.nan, 2.0), (1.0, np.nan), (2.0, 2.0)])
def test_lax_clamp_with_nan_or_equal_bounds_is_jaxs(lo, hi):
    """lax.clamp with a nan bound is nan (XLA's clamp; tidu gave x), and its derivative at
    a nan x is 0 (tidu gave 1), as JAX's."""
    x = np.array([0.0, 1.0, 2.0, 3.0, 4.0, np.nan])
    close(tlax.clamp(lo, x, hi), jlax.clamp(lo, x, hi), "eager value")
    close(tidu.jit(lambda v: tlax.clamp(lo, v, hi))(x), jlax.clamp(lo, x, hi), "traced value")
    for xv in x:
        got = tidu.grad(lambda a, b, c: tlax.clamp(a, b, c), argnums=(0, 1, 2))(lo, xv, hi)
        want = jax.grad(lambda a, b, c: jlax.clamp(a, b, c), argnums=(0, 1, 2))(lo, xv, hi)
        close(np.array(got), np.array(want), f"clamp({lo}, {xv}, {hi}) grad")


def test_lax_clamp_on_an_empty_interval_is_max_and_so_is_its_derivative():
    """min > max: clamp is max whatever x is (XLA's min(max(x, lo), hi)), so d/dmax is 1;
    JAX's rule gives 0 where x <= max (it tests x > max). Checked by central differences."""
    h = 1e-6
    for xv in (0.0, 1.0, 2.0, 3.0, 4.0):
        got = tidu.grad(lambda a, b, c: tlax.clamp(a, b, c), argnums=(0, 1, 2))(3.0, xv, 1.0)
        fd = [(np.asarray(jlax.clamp(*[p + h * (i == k) for i, p in enumerate((3.0, xv, 1.0))]))
               - np.asarray(jlax.clamp(*[p - h * (i == k) for i, p in enumerate((3.0, xv, 1.0))]))) / (2 * h)
              for k in range(3)]
        np.testing.assert_allclose(np.array(got), np.array(fd), atol=1e-8, err_msg=f"clamp(3, {xv}, 1) grad")


def test_lax_cumlogsumexp_at_infinities_has_the_limits_derivative():
    """At entries -inf (or after +inf) JAX's cumlogsumexp gives nan or a meaningless number;
    tidu's is the limit: logaddexp(a, b)'s weights e^a / (e^a + e^b) and e^b / (...), one
    half each where a = b = -inf, 0 for a finite entry beside inf."""
    w = np.array([0.3, 0.7, 1.1, 1.7])
    g = tidu.grad(lambda v: tnp.sum(tlax.cumlogsumexp(v) * w))(np.array([-np.inf, -np.inf, 1.0, 1.0]))
    # out0 = x0, out1 = logaddexp(x0, x1) (1/2 each), out2 and out3 give x0, x1 weight 0
    close(g, [0.3 + 0.7 / 2, 0.7 / 2, 1.1 + 1.7 / 2, 1.7 / 2], "cumlogsumexp at -inf")
    g = tidu.grad(lambda v: tnp.sum(tlax.cumlogsumexp(v) * w[:3]))(np.array([1.0, np.inf, 1.0]))
    close(g, [0.3, 0.7 + 1.1, 0.0], "cumlogsumexp beside inf")
    assert np.isnan(jax.grad(lambda v: jnp.sum(jlax.cumlogsumexp(v) * w))(jnp.array([-np.inf, -np.inf, 1.0, 1.0]))[0])


def test_nanargmax_of_an_all_nan_slice_eager_is_numpys_error_traced_is_jaxs():
    """Documented: eagerly NumPy's ValueError, traced -1 as JAX (a traced value cannot
    raise)."""
    x = np.array([[np.nan, np.nan], [1.0, np.nan]])
    for name in ("nanargmax", "nanargmin"):
        with pytest.raises(ValueError, match="All-NaN slice"):
            getattr(tnp, name)(x, axis=1)
        np.testing.assert_array_equal(tidu.jit(lambda v, n=name: getattr(tnp, n)(v, axis=1))(x),
                                      getattr(jnp, name)(x, axis=1))


def test_argsort_of_a_0d_array_is_numpys_traced_too():
    x = np.array(3.0)
    want = np.argsort(x)
    for got in (tnp.argsort(x), tidu.jit(tnp.argsort)(x)):
        np.testing.assert_array_equal(got, want)
        assert got.shape == want.shape and got.dtype == want.dtype


BAD = [
    ("interp, xp and fp of different lengths",
     lambda v: tnp.interp(v, np.array([0.0, 1.0]), np.array([1.0, 2.0, 3.0])), r"xp and fp|fp and xp"),
    ("interp, 2-D xp", lambda v: tnp.interp(v, np.ones((2, 2)), np.ones((2, 2))), r"1-D|too deep"),
    ("interp, no knots", lambda v: tnp.interp(v, np.array([]), np.array([])), r"empty"),
    ("histogram, range backwards", lambda v: tnp.histogram(v, bins=2, range=(3.0, 1.0)), r"max|min"),
    ("histogram, range not finite", lambda v: tnp.histogram(v, bins=2, range=(0.0, np.inf)), r"finite"),
    ("histogram, edges not increasing", lambda v: tnp.histogram(v, bins=np.array([3.0, 1.0, 2.0])),
     r"monotonically"),
    ("digitize, bins not monotonic", lambda v: tnp.digitize(v, np.array([1.0, 3.0, 2.0])), r"monotonically"),
]


@pytest.mark.parametrize("name, f, match", BAD, ids=[c[0] for c in BAD])
def test_bad_arguments_are_one_line_errors_eager_and_traced_as_numpy(name, f, match):
    """NumPy refuses these eagerly; traced, tidu gave a broadcasting or indexing error from
    inside (interp) or a result (histogram, digitize)."""
    x = np.array([3.0, 1.0, 3.0, 2.0])
    with pytest.raises(ValueError, match=match):
        f(x)
    with pytest.raises(ValueError, match=match) as info:
        tidu.jit(f)(x)
    assert "\n" not in str(info.value) and ("tnp." in str(info.value)), str(info.value)


@pytest.mark.parametrize("name", ["quantile", "nanquantile", "percentile", "nanpercentile"])
def test_float32_quantiles_take_numpys_dtype_and_bits_from_q(name):
    """NumPy interpolates float32 values with q's weights: a Python float q keeps float32, a
    float64 array (or list, or NumPy float64) gives float64 (percentile: integer arrays
    too, as q / 100); traced gave float32 always. nanquantile's positions are float64 as
    NumPy's (they were float32: an ulp off)."""
    a = np.random.default_rng(0).normal(size=(3, 7)).astype(np.float32)
    a[1, 2] = np.nan
    scale = 100.0 if "percentile" in name else 1.0
    qs = [0.3 * scale, 0.37 * scale, np.array([0.1, 0.37, 1.0]) * scale, [0.0, 0.77 * scale], np.array([0, 1])]
    for q in qs:
        for method in ("linear", "midpoint", "lower"):
            for axis in (None, 1):
                if name in ("quantile", "percentile") and axis is None:
                    continue  # (a nan in the row: nan)
                want = getattr(np, name)(a, q, axis=axis, method=method)
                for where, got in (("eager", getattr(tnp, name)(a, q, axis=axis, method=method)),
                                   ("tidu.jit", tidu.jit(lambda v, q=q, m=method, ax=axis: getattr(tnp, name)(
                                       v, q, axis=ax, method=m))(a))):
                    what = f"{name}(q={q!r}, method={method}, axis={axis}) {where}"
                    assert got.dtype == want.dtype, f"{what}: {got.dtype}, NumPy's {want.dtype}"
                    np.testing.assert_array_equal(got, want, err_msg=what)


def test_interp_at_a_nan_x_has_derivative_zero():
    """Documented: the value is nan, the derivative in x 0 (JAX's is a slope), and the nan x
    adds nothing to the derivatives in fp and xp (JAX's come out nan: a nan slope term
    times a zero cotangent; tidu's did too); at the other points JAX's."""
    x = np.array([np.nan, 0.5, 1.0, 5.0])
    g = tidu.grad(lambda v: tnp.sum(tnp.interp(v, XP, FP)))(x)
    want = np.asarray(jax.grad(lambda v: jnp.sum(jnp.interp(v, XP, FP)))(x))
    close(g[1:], want[1:], "interp grad away from nan")
    assert g[0] == 0.0
    for arg in (1, 2):  # d/dxp and d/dfp: the points that are not nan alone
        def f(m, *a):
            return m.sum(m.interp(*a) * np.array([1.0, 2.0, 3.0, 4.0]))
        got = tidu.grad(lambda *a: f(tnp, *a), argnums=arg)(x, XP, FP)
        alone = jax.grad(lambda *a: f(jnp, *a), argnums=arg)(np.where(np.isnan(x), 0.0, x), XP, FP)
        at_zero = jax.grad(lambda *a: jnp.interp(*a), argnums=arg)(0.0, XP, FP)
        close(got, np.asarray(alone) - np.asarray(at_zero), f"interp d/d{'xp' if arg == 1 else 'fp'} beside a nan x")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_lax_cumlogsumexp_in_half_precision_rounds_once_eager_as_traced(dtype):
    """float16 and bfloat16 run in float32 and round each result once (the float64 value
    rounded once), eagerly as traced; bfloat16's eager and traced values differed (each
    step rounded by a different logaddexp), JAX's round every step."""
    x = np.array([3.0, 1.0, 3.0, 2.0, 1.0, 3.0, -np.inf, 0.5]).astype(dtype)
    want = np.logaddexp.accumulate(x.astype(np.float64)).astype(dtype)
    for got in (tlax.cumlogsumexp(x), tidu.jit(tlax.cumlogsumexp)(x),
                tidu.jit(lambda v: tlax.cumlogsumexp(v, reverse=True))(x[::-1].copy())[::-1]):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def test_logaddexp_in_half_precision_eager_is_traced():
    for dtype in (np.float16, ml_dtypes.bfloat16):
        a = np.linspace(-3, 3, 41).astype(dtype)
        b = np.linspace(2, -1, 41).astype(dtype)
        np.testing.assert_array_equal(tnp.logaddexp(a, b).astype(np.float64),
                                      tidu.jit(tnp.logaddexp)(a, b).astype(np.float64))
