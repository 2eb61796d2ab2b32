"""tidu.nn against jax.nn: values, gradients and (for a few) Hessians, traced and eager,
away from the kinks, plus JAX's derivative at the kinks of relu-like functions."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from vmap_util import assert_default_applies_every_rule  # noqa: E402

import tidu  # noqa: E402
import tidu.nn as tnn  # noqa: E402
import tidu.numpy as tnp  # noqa: E402

ELEMENTWISE = ["celu", "elu", "gelu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh", "identity",
               "leaky_relu", "log_sigmoid", "mish", "relu", "relu6", "selu", "sigmoid", "silu", "soft_sign",
               "softplus", "sparse_plus", "sparse_sigmoid", "squareplus", "swish", "tanh"]
# points away from every kink (0, +-1, +-3, 6) and into the saturated tails
X = np.array([-40.0, -7.3, -2.2, -0.7, -0.2, 0.3, 0.9, 1.6, 4.4, 8.1, 35.0])
# the keyword arguments tried too (the slow step)
KEYWORDS = [("elu", {"alpha": 0.5}), ("celu", {"alpha": 2.0}), ("leaky_relu", {"negative_slope": 0.2})]
SOFTMAX_FAMILY = ("softmax", "log_softmax", "logsumexp", "logmeanexp", "standardize")
SOFTMAX_AXES = [-1, 0, (0, 1)]
_rng = np.random.default_rng(0)
SOFTMAX_X, SOFTMAX_W = _rng.normal(size=(3, 4)) * 5, _rng.normal(size=(3, 4))
GLU_X = np.linspace(-2.0, 2.0, 12).reshape(3, 4)
LABELS = np.array([[0, 2], [3, 1]])
# dot_product_attention's operands
_ATT = np.random.default_rng(3)
ATT_Q, ATT_K, ATT_V = _ATT.normal(size=(2, 3, 4, 5)), _ATT.normal(size=(2, 4, 2, 5)), _ATT.normal(size=(2, 4, 2, 5))


@pytest.mark.parametrize("names", [pytest.param(("sigmoid", "softplus", "gelu", "silu"), id="common"),
                                   pytest.param(tuple(ELEMENTWISE), id="all", marks=pytest.mark.slow)])
def test_elementwise_activations_match_jax(names: tuple[str, ...]) -> None:
    """Several in one program (one trace): values, eager and traced, and each one's
    derivative (the diagonal of the Jacobian of the stacked values)."""
    cases = [(name, {}) for name in names]
    if len(names) == len(ELEMENTWISE):
        cases += KEYWORDS

    def stacked(lib, xp):
        return lambda v: xp.stack([getattr(lib, n)(v, **kw) for n, kw in cases] + [lib.log1mexp(xp.abs(v) + 1e-3)])

    t, j = stacked(tnn, tnp), stacked(jax.nn, jnp)
    want = j(X)
    np.testing.assert_allclose(t(X), want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(tidu.jit(t)(X), want, rtol=1e-12, atol=1e-14)
    got_d = np.diagonal(tidu.jacfwd(t)(X), axis1=1, axis2=2)
    want_d = np.diagonal(jax.jit(jax.jacfwd(j))(X), axis1=1, axis2=2)
    for k, (name, _) in enumerate([*cases, ("log1mexp", {})]):
        np.testing.assert_allclose(got_d[k], want_d[k], rtol=1e-10, atol=1e-12, err_msg=name)


def test_derivatives_at_the_kinks_are_jaxs() -> None:
    kinks = np.array([0.0, -1.0, 1.0, -3.0, 3.0, 6.0])
    for name in ("relu", "relu6", "hard_tanh", "hard_sigmoid", "leaky_relu", "sparse_plus"):
        got = tidu.grad(lambda v, n=name: tnp.sum(getattr(tnn, n)(v)))(kinks)
        want = jax.jit(jax.grad(lambda v, n=name: jnp.sum(getattr(jax.nn, n)(v))))(kinks)
        np.testing.assert_allclose(got, want, err_msg=name)


@pytest.mark.slow  # several programs per axis: CI's slow step
@pytest.mark.parametrize("axis", SOFTMAX_AXES)
def test_softmax_family_and_standardize(axis) -> None:
    x, w = SOFTMAX_X, SOFTMAX_W
    for name in SOFTMAX_FAMILY:
        def t(v, n=name):
            return tnp.sum(getattr(tnn, n)(v, axis=axis) * w) if n != "logsumexp" and n != "logmeanexp" \
                else tnp.sum(getattr(tnn, n)(v, axis=axis))

        def j(v, n=name):
            return jnp.sum(getattr(jax.nn, n)(v, axis=axis) * w) if n != "logsumexp" and n != "logmeanexp" \
                else jnp.sum(getattr(jax.nn, n)(v, axis=axis))

        np.testing.assert_allclose(tidu.jit(t)(x), j(x), rtol=1e-12, err_msg=name)
        np.testing.assert_allclose(tidu.grad(t)(x), jax.jit(jax.grad(j))(x), rtol=1e-9, atol=1e-12, err_msg=name)
    h = tidu.hessian(lambda v: tnp.sum(tnn.log_softmax(v, axis=axis) * w))(x)
    np.testing.assert_allclose(h, jax.jit(jax.hessian(lambda v: jnp.sum(jax.nn.log_softmax(v, axis=axis) * w)))(x),
                               rtol=1e-9, atol=1e-12)


def test_glu_and_one_hot() -> None:
    x = GLU_X
    np.testing.assert_allclose(tidu.jit(tnn.glu)(x), jax.nn.glu(x), rtol=1e-13)
    np.testing.assert_allclose(tidu.jit(lambda v: tnn.glu(v, axis=0))(x[:2]), jax.nn.glu(x[:2], axis=0), rtol=1e-13)
    labels = LABELS
    for axis in (-1, 0, 1):
        np.testing.assert_array_equal(tnn.one_hot(labels, 4, axis=axis), jax.nn.one_hot(labels, 4, axis=axis))
    assert tnn.one_hot(np.array([1, 5]), 3).tolist() == [[0, 1, 0], [0, 0, 0]]
    with pytest.raises(ValueError, match="odd size"):
        tnn.glu(np.ones(3))


def test_exact_gelu_through_erf() -> None:
    x = np.linspace(-3.0, 3.0, 13)
    np.testing.assert_allclose(tnn.gelu(x, approximate=False), jax.nn.gelu(x, approximate=False), rtol=1e-14)
    got = tidu.grad(lambda v: tnp.sum(tnn.gelu(v, approximate=False)))(x)
    want = jax.jit(jax.grad(lambda v: jnp.sum(jax.nn.gelu(v, approximate=False))))(x)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


# --- batched: tidu.vmap against jax.vmap ------------------------------------------------------


def _one(lib, name, kw):
    return lambda v: getattr(lib, name)(v, **kw)


def _axis_id(axis) -> str:
    return "x".join(map(str, axis)) if isinstance(axis, tuple) else str(axis)


# case id -> (tidu's function, jax's, the input it is mapped over, differentiable); the
# inputs of the tests above: X (the elementwise functions, a scalar example each when
# mapped over axis 0), SOFTMAX_X, GLU_X, LABELS
BATCHED = {
    **{name: (_one(tnn, name, {}), _one(jax.nn, name, {}), X, True) for name in ELEMENTWISE},
    **{f"{name}-{'-'.join(f'{k}={v}' for k, v in kw.items())}": (_one(tnn, name, kw), _one(jax.nn, name, kw), X, True)
       for name, kw in KEYWORDS},
    "gelu-exact": (_one(tnn, "gelu", {"approximate": False}), _one(jax.nn, "gelu", {"approximate": False}), X, True),
    "log1mexp": (tnn.log1mexp, jax.nn.log1mexp, np.abs(X) + 1e-3, True),
    **{f"{name}@{_axis_id(axis)}": (_one(tnn, name, {"axis": axis}), _one(jax.nn, name, {"axis": axis}), SOFTMAX_X,
                                    True) for name in SOFTMAX_FAMILY for axis in SOFTMAX_AXES},
    "glu": (tnn.glu, jax.nn.glu, GLU_X, True),
    "one_hot": (_one(tnn, "one_hot", {"num_classes": 4}), _one(jax.nn, "one_hot", {"num_classes": 4}), LABELS, False),
    "dot_product_attention": (lambda q: tnn.dot_product_attention(q, ATT_K[0], ATT_V[0], is_causal=True),
                              lambda q: jax.nn.dot_product_attention(q, ATT_K[0], ATT_V[0], is_causal=True),
                              ATT_Q[0], True),
}
FLOAT32_INSIDE = {"dot_product_attention"}  # a float32 softmax (as JAX's): equal up to float32 rounding


def batched_pairs(case: str, axis: int, jit: bool = False) -> list:
    """tidu.vmap of the function and of the gradient of a weighted sum of it, and jax.vmap
    of JAX's, as (what, tidu's, JAX's, the input): a 1-D input mapped over axis 0 gives
    scalar examples; otherwise the input and its reverse (along every axis) are stacked
    along ``axis``, the axis mapped."""
    fn_t, fn_j, x, differentiable = BATCHED[case]
    xs = x if x.ndim == 1 and axis == 0 else np.stack([x, np.flip(x)], axis=axis)
    vmap = (lambda f: tidu.jit(tidu.vmap(f, in_axes=axis))) if jit else (lambda f: tidu.vmap(f, in_axes=axis))
    pairs = [("value", vmap(fn_t), jax.vmap(fn_j, in_axes=axis), xs)]
    if not differentiable:
        return pairs
    w = np.random.default_rng(1).normal(size=jax.eval_shape(fn_j, np.take(xs, 0, axis=axis)).shape)
    return [*pairs, ("gradient", vmap(tidu.grad(lambda u: tnp.sum(w * fn_t(u)))),
                     jax.vmap(jax.grad(lambda u: jnp.sum(w * fn_j(u))), in_axes=axis), xs)]


def check_batched(case: str, axis: int, jit: bool = False) -> None:
    """batched_pairs: tidu's results against JAX's (in one jit), with the tolerances above."""
    pairs = batched_pairs(case, axis, jit)
    wants = jax.jit(lambda x: [j(x) for _, _, j, _ in pairs])(pairs[0][3])
    for (what, fn, _, x), want in zip(pairs, wants, strict=True):
        got = fn(x)
        assert np.shape(got) == np.shape(want), f"{case} {what}"
        if what == "value" and not BATCHED[case][3]:
            np.testing.assert_array_equal(got, want, err_msg=case)
        else:
            tol = dict(rtol=1e-12, atol=1e-14) if what == "value" else dict(rtol=1e-9, atol=1e-12)
            if case in FLOAT32_INSIDE:
                tol = dict(rtol=0, atol=1e-6 * max(1.0, float(np.max(np.abs(want)))))
            np.testing.assert_allclose(got, want, **tol, err_msg=f"{case} {what}")


# The default run: these cases (of _batched_params' ids): cases that together apply every
# batching rule, with every pattern of batched and unbatched operands, that the whole sweep
# applies (tests/vmap_util.py; test_the_default_batched_cases_apply_every_batching_rule, in
# the slow step, keeps it so). The slow step: every case mapped over axis 0, the last axis
# (under tidu.jit) and, for the matrices, axis 1 (under tidu.jit).
BATCHED_DEFAULT = ["relu-axis0", "gelu-axis-1", "softmax@-1-axis0", "log_softmax@0x1-axis1", "one_hot-axis0",
                   "standardize@0-axis-1", "log_sigmoid-axis0", "glu-axis0", "logsumexp@0-axis0",
                   "dot_product_attention-axis0"]


def _batched_params() -> list:
    out = []
    for case, (_, _, x, _) in BATCHED.items():
        for axis in (0, -1, 1) if x.ndim > 1 else (0, -1):
            pid = f"{case}-axis{axis}"
            out.append(pytest.param(case, axis, id=pid, marks=[] if pid in BATCHED_DEFAULT else [pytest.mark.slow]))
    return out


@pytest.mark.parametrize(("case", "axis"), _batched_params())
def test_vmap_against_jax(case: str, axis: int) -> None:
    check_batched(case, axis, jit=axis != 0)


def test_every_covered_function_is_compared_batched() -> None:
    names = {re.split("[-@]", c)[0] for c in BATCHED}
    covered = {n for n in dir(jax.nn) if not n.startswith("_") and hasattr(tnn, n) and callable(getattr(tnn, n))}
    assert covered <= names, sorted(covered - names)


@pytest.mark.slow
def test_the_default_batched_cases_apply_every_batching_rule() -> None:
    """Every batching rule, with every pattern of batched operands, that tidu.vmap applies
    in the whole sweep is applied by a case of BATCHED_DEFAULT (tidu's side only: traces)."""
    assert_default_applies_every_rule(_batched_params(), BATCHED_DEFAULT,
                                      lambda p: [fn(x) for _, fn, _, x in batched_pairs(*p.values)])


def test_sigmoid_and_exponential_tails_keep_their_digits():
    """sigmoid(-40) is 4.2e-18, not 0 ((1 + tanh(x / 2)) / 2 rounded it away), and so are
    its derivative and silu's; elu's derivative below -37 is exp(x) (expm1's derivative
    written as expm1 + 1 rounded it to 0)."""
    import mpmath

    x = np.array([-40.0, -700.0, 0.0, 3.0, 40.0])
    exact = np.array([float(1 / (1 + mpmath.exp(-mpmath.mpf(v)))) for v in x])
    slope = np.array([float(mpmath.exp(-mpmath.mpf(abs(v))) / (1 + mpmath.exp(-mpmath.mpf(abs(v)))) ** 2)
                      for v in x])
    np.testing.assert_allclose(tidu.jit(tnn.sigmoid)(x), exact, rtol=1e-15)
    np.testing.assert_allclose(tidu.grad(lambda v: tnp.sum(tnn.sigmoid(v)))(x), slope, rtol=1e-14)
    np.testing.assert_allclose(tidu.jit(tnn.silu)(x), x * exact, rtol=1e-15)
    np.testing.assert_allclose(tidu.grad(lambda v: tnp.sum(tnn.elu(v)))(x[:2]), np.exp(x[:2]), rtol=1e-15)
    assert tidu.grad(lambda v: tnp.sum(tnn.log1mexp(v)))(np.array([0.0]))[0] == np.inf


ATTENTION = {  # keyword arguments; the query has 4 heads, key and value 2 (grouped-query attention)
    "plain": {},
    "bias": {"bias": _ATT.normal(size=(2, 1, 3, 4))},
    "bias-per-head": {"bias": _ATT.normal(size=(1, 4, 3, 4))},
    "mask": {"mask": _ATT.random((2, 4, 3, 4)) > 0.3},
    "causal": {"is_causal": True, "scale": 0.3},
    "window": {"local_window_size": (0, 2)},
    "lengths": {"query_seq_lengths": np.array([2, 3], np.int32), "key_value_seq_lengths": np.array([4, 1], np.int32)},
    "everything": {"is_causal": True, "local_window_size": 1, "mask": _ATT.random((2, 4, 3, 4)) > 0.2,
                   "bias": _ATT.normal(size=(2, 4, 3, 4)), "query_seq_lengths": np.array([3, 1], np.int32)},
}


def _close32(got, want, scale=1.0) -> None:
    """JAX takes the softmax in float32 (tidu too): equal up to float32 rounding."""
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=0,
                               atol=4e-7 * scale)


@pytest.mark.parametrize("case", list(ATTENTION))
def test_dot_product_attention_matches_jax(case: str) -> None:
    kw = ATTENTION[case]
    want = jax.nn.dot_product_attention(ATT_Q, ATT_K, ATT_V, **kw)
    _close32(tnn.dot_product_attention(ATT_Q, ATT_K, ATT_V, **kw), want)
    _close32(tidu.jit(lambda q, k, v: tnn.dot_product_attention(q, k, v, **kw))(ATT_Q, ATT_K, ATT_V), want)
    loss = lambda lib, xp: lambda q, k, v: xp.sum(xp.sin(lib.dot_product_attention(q, k, v, **kw)))  # noqa: E731
    got = tidu.grad(loss(tnn, tnp), argnums=(0, 1, 2))(ATT_Q, ATT_K, ATT_V)
    grads = jax.grad(loss(jax.nn, jnp), argnums=(0, 1, 2))(ATT_Q, ATT_K, ATT_V)
    for g, w in zip(got, grads, strict=True):
        _close32(g, w, 2.0)


def test_dot_product_attention_residual_3d_vmap_and_hessian() -> None:
    q, k, v = ATT_Q[0], ATT_K[0], ATT_V[0]
    want, want_lse = jax.nn.dot_product_attention(q, k, v, return_residual=True)
    got, lse = tnn.dot_product_attention(q, k, v, return_residual=True)
    assert np.shape(got) == want.shape and np.shape(lse) == want_lse.shape == (3, 4)
    _close32(got, want)
    _close32(lse, want_lse, 4.0)
    # the residual has no derivative (JAX's stop_gradient)
    g = tidu.grad(lambda q: tnp.sum(tnn.dot_product_attention(q, k, v, return_residual=True)[1]))(q)
    assert not np.any(g)
    batched = tidu.vmap(lambda q: tnn.dot_product_attention(q, k, v, is_causal=True))(ATT_Q)
    _close32(batched, jax.vmap(lambda q: jax.nn.dot_product_attention(q, k, v, is_causal=True))(ATT_Q))
    h = tidu.hessian(lambda q: tnp.sum(tnn.dot_product_attention(q, k, v) ** 3))(q)
    hw = jax.hessian(lambda q: jnp.sum(jax.nn.dot_product_attention(q, k, v) ** 3))(q)
    np.testing.assert_allclose(h, hw, rtol=0, atol=1e-5 * np.max(np.abs(hw)))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_dot_product_attention_low_precision(dtype: str) -> None:
    import ml_dtypes

    d = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    args = [a.astype(d) for a in (ATT_Q, ATT_K, ATT_V)]
    want = np.asarray(jax.nn.dot_product_attention(*args, is_causal=True))
    for got in (tnn.dot_product_attention(*args, is_causal=True),
                tidu.jit(lambda *a: tnn.dot_product_attention(*a, is_causal=True))(*args)):
        assert np.asarray(got).dtype == d
        np.testing.assert_allclose(np.asarray(got, np.float64), want.astype(np.float64), rtol=0,
                                   atol=2 * float(ml_dtypes.finfo(d).eps))


@pytest.mark.parametrize(("kw", "message"), [
    ({"implementation": "cudnn"}, "implementation='cudnn' is not available"),
    ({"mask": np.ones((2, 4, 3, 4))}, "mask must have dtype bool"),
    ({"bias": np.ones((2, 3, 3, 4))}, "bias has 3 heads"),
    ({"query_seq_lengths": np.array([1, 2])}, "query_seq_lengths must have dtype int32"),
])
def test_dot_product_attention_bad_input(kw, message) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        tnn.dot_product_attention(ATT_Q, ATT_K, ATT_V, **kw)
    with pytest.raises(ValueError, match="query's 4 heads must be a multiple"):
        tnn.dot_product_attention(ATT_Q, ATT_K[:, :, :1].repeat(3, 2), ATT_V[:, :, :1].repeat(3, 2))


def test_softplus_family_derivatives_one_weight_per_operand():
    """softplus, log_sigmoid and logaddexp differentiate as d out = w_x dx + w_y dy with
    w = sigmoid(+-(x - y)) (tidu/numpy/_ufuncs.py _logaddexp_jvp): an infinite tangent gives
    an infinite derivative (the sum of opposite terms of the branches' own derivatives was
    inf - inf = nan), in float32 and under vmap too; first and second derivatives within a
    few ulps of mpmath's, 1/2 each at ties and equal infinities, and the values unchanged."""
    import mpmath
    for dt in ("float64", "float32"):
        one, inf = np.asarray(1.0, dt), np.asarray(np.inf, dt)
        for f, fj in ((tnn.softplus, jax.nn.softplus), (tnn.log_sigmoid, jax.nn.log_sigmoid)):
            got = tidu.jvp(f, (one,), (inf,))[1]
            assert np.asarray(got).dtype == dt
            np.testing.assert_array_equal(got, jax.jvp(fj, (one,), (inf,))[1])
    xs = np.array([0.5, -2.0, 3.0])
    got = tidu.vmap(lambda x: tidu.jvp(tnn.softplus, (x,), (np.inf,))[1])(xs)
    np.testing.assert_array_equal(got, [np.inf] * 3)
    x = np.array([-30.0, -3.0, -0.5, 0.0, 0.25, 1.0, 2.0, 30.0, 1e10, -1e10])
    y = np.array([0.0, 2.0, -0.5, 0.0, 1e-300, -1.0, 2.0, -5.0, 1e10 + 4, 1e300])
    g = tidu.vmap(tidu.grad(lambda a, b: tnp.logaddexp(a, b), argnums=(0, 1)))(x, y)
    h = tidu.vmap(tidu.grad(tidu.grad(lambda a, b: tnp.logaddexp(a, b)), argnums=(0, 1)))(x, y)
    mpmath.mp.prec = 200
    for i in range(len(x)):
        s = 1 / (1 + mpmath.exp(mpmath.mpf(y[i]) - mpmath.mpf(x[i])))
        for got_v, want in ((g[0][i], s), (g[1][i], 1 - s), (h[0][i], s * (1 - s)), (h[1][i], -s * (1 - s))):
            assert abs(float(got_v) - float(want)) <= 4e-16 * abs(float(want)) + 1e-300, (x[i], y[i], got_v, want)
    for a in (3.0, np.inf, -np.inf):
        ga = tidu.grad(lambda p, q: tnp.logaddexp(p, q), argnums=(0, 1))(a, a)
        np.testing.assert_array_equal(ga, (0.5, 0.5))
    pts = np.array([-np.inf, -1e308, -40.0, -1.0, 0.0, 1e-300, 2.0, 745.0, 1.7976931348623157e308, np.inf, np.nan])
    px, py = (v.ravel() for v in np.meshgrid(pts, pts))
    np.testing.assert_allclose(tidu.jit(lambda a, b: tnp.logaddexp(a, b))(px, py), jnp.logaddexp(px, py), rtol=4e-16)


def test_logsumexp_gradient_is_the_softmax():
    # the max shift is held constant (as JAX's): the gradient is the softmax, with no term
    # for the shift (mathematically 0: 16 ops of the max's tie weights before)
    w = np.array([0.5, -1.0, 2.0, 0.3, 1.5])
    x = np.array([0.3, -0.7, 1.1, 0.2, -1.5])

    def f(v):
        return tnn.logsumexp(v * w)

    graph = tidu.make_graph(tidu.grad(f))(x).graph
    assert graph.op_count <= 18, graph.op_count
    p = np.exp(x * w - np.log(np.sum(np.exp(x * w))))
    np.testing.assert_allclose(tidu.grad(f)(x), p * w, rtol=1e-15)
    np.testing.assert_allclose(tidu.hessian(f)(x), np.outer(w, w) * (np.diag(p) - np.outer(p, p)), rtol=1e-13,
                               atol=1e-16)
