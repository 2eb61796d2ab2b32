"""transpose.vjp (the fused reverse pass of grad) against the separate passes it stands
for: linear_transpose(linearize(...)) must give the very same transposed fragment (keys
are hash-consed, so equal structure is the same key object), and whatever the fused
pass cannot do (Python-callback derivatives, variadic linear ops, rule errors) must
reach the separate passes, with their results and error messages."""

import numpy as np
import pytest
from adutil import F64, build, op

import tidu
import tidu.numpy as tnp
from tidu import Aval
from tidu.ad.transpose import vjp
from tidu.ad.values import Unfusable
from tidu.ops.catalog import builtin_rule_files, load_catalog, use_catalog
from tidu.transforms import nested

V3 = Aval((3,), "float64")


def _separate(view, outs, wrt, p1, p2):
    lin = tidu.passes.linearize(view, outs, wrt, pass_id=p1)
    return lin.fragment, tidu.passes.linear_transpose(lin, pass_id=p2)


def _chain(b, x, y):
    z = x
    for i in range(30):
        z = [op(b, "sin", z), op(b, "mul", z, x), op(b, "mul", z, y), op(b, "exp", z),
             op(b, "tanh", z), op(b, "cos", z), op(b, "add", z, x), op(b, "sub", x, z)][i % 8]
    return z


def _shared(b, x, y):
    # two primal ops with one tangent structure (sub(0, x) and neg(x) both give -dx):
    # their cotangents must be summed before the shared linear op is transposed once
    zero = b.constant(np.float64(0.0))
    u = op(b, "sub", zero, x)
    v = op(b, "neg", x)
    w = op(b, "mul", u, y)
    return op(b, "add", op(b, "add", w, v), op(b, "mul", x, x))


def _vector(b, x, y):
    s = op(b, "reduce_sum", op(b, "mul", x, op(b, "sin", y)), axes=(0,))
    return op(b, "mul", s, op(b, "reduce_sum", op(b, "exp", x), axes=(0,)))


@pytest.mark.parametrize("body,aval", [(_chain, F64), (_shared, F64), (_vector, V3)])
@pytest.mark.parametrize("wrt", [["x"], ["y", "x"], ["x", "x"]])
def test_fused_transpose_is_the_separate_one(body, aval, wrt):
    f, out = build({"x": aval, "y": aval}, body)
    view = tidu.resolve(f)
    lin_sep, tr_sep = _separate(view, [out], wrt, 101, 102)
    lin_fused, tr_fused = vjp(view, [out], wrt, lin_pass_id=101, pass_id=102)
    assert tr_fused.fragment.keys == tr_sep.fragment.keys  # same keys, same order
    assert tr_fused.output_keys == tr_sep.output_keys
    assert [k for k, _ in tr_fused.tangent_inputs] == [k for k, _ in tr_sep.tangent_inputs]
    # the fused linear fragment keeps the primary work, and only that
    primary = [k for k in lin_sep.keys if k.input is None and not k.role.is_linear]
    assert lin_fused.keys == primary


def _f1(x, xp):
    return xp.sum(xp.sin(x) * x + xp.concatenate([x, xp.exp(x)])[:3] * 0.5)


def _f2(x, xp):
    return xp.sum(xp.tanh(xp.cos(x) * x) / (1.0 + x * x))


@pytest.mark.parametrize("fn", [_f1, _f2])
def test_grad_through_the_fused_pass_matches_jax(fn):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    x = np.array([0.3, -0.7, 1.1])
    got = tidu.grad(lambda v: fn(v, tnp))(x)
    want = jax.jit(jax.grad(lambda v: fn(v, jnp)))(jnp.asarray(x))
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12, atol=1e-12)


def test_custom_vjp_goes_through_the_separate_passes():
    @tidu.custom_vjp
    def f(x):
        return tnp.sin(x)

    def f_fwd(x):
        return tnp.sin(x), tnp.cos(x)

    def f_bwd(c, g):
        return (3.0 * c * g,)  # deliberately not the true derivative: the rule must be used

    f.defvjp(f_fwd, f_bwd)
    x = 0.4
    assert tidu.grad(lambda v: f(v) * v)(x) == pytest.approx(3.0 * np.cos(x) * x + np.sin(x), rel=1e-12)


def test_errors_are_the_separate_passes_errors():
    # a primitive without a transpose rule for y: the fused pass must raise the same error
    text = """
primitive half_mul(x, y)
    type       elementwise
    dtypes     inexact
    meaning    x * y
    jvp x:     half_mul(dx, y)
    jvp y:     half_mul(x, dy)
    transpose x: ct * conj(y)
"""
    cat = load_catalog(builtin_rule_files() + [("custom.rules", text)])
    with use_catalog(cat):
        f, y = build({"x": F64, "y": F64}, lambda b, x, yy: op(b, "half_mul", op(b, "sin", x), yy))
        view = tidu.resolve(f)
        with pytest.raises(tidu.ADRuleError) as sep:
            _separate(view, [y], ["x", "y"], 201, 202)
        with pytest.raises(tidu.ADRuleError) as fused:
            vjp(view, [y], ["x", "y"], lin_pass_id=201, pass_id=202)
        assert str(fused.value) == str(sep.value)
        assert "half_mul: transpose y: no transpose rule" in str(fused.value)
        # with y fixed, the missing rule is never needed
        _, tr = vjp(view, [y], ["x"], lin_pass_id=203, pass_id=204)
        assert tr.output_keys == _separate(view, [y], ["x"], 203, 204)[1].output_keys


def _jacobians():
    def vector(x):
        return tnp.tanh(x) * tnp.sum(x * x) - tnp.cumsum(tnp.sin(x))

    def two_outputs(x):
        return tnp.exp(-x) * x[0], tnp.stack([tnp.sum(x ** 3), x[1] * x[2]])

    def gradient(x):
        return tidu.grad(lambda v: tnp.sum(tnp.tanh(v) * tnp.roll(v, 1)) + tnp.prod(tnp.cos(v)))(x)

    return [vector, two_outputs, gradient]


@pytest.mark.parametrize("fn", _jacobians(), ids=lambda f: f.__name__)
@pytest.mark.parametrize("transform", ["jacfwd", "jacrev"])
def test_jacobians_on_tapes_are_the_interned_passes_graphs(fn, transform, monkeypatch):
    """jacfwd keeps its JVP, jacrev (outputs of several elements) its linearize and
    transposes on tapes, and batches them from there: the very graph of the interned
    passes batched (tidu.ad.batching.batch), with its values."""
    x = np.array([0.3, -0.7, 1.1, 0.4])
    jac = getattr(tidu, transform)
    taped = tidu.make_graph(jac(fn))(x).graph

    def refuse(*args, **kwargs):
        raise Unfusable("interned passes")

    monkeypatch.setattr(nested, "linearize_tape", refuse)
    interned = tidu.make_graph(jac(fn))(x).graph
    assert taped.listing() == interned.listing()
    want = tidu.compile(interned).run([x])
    for a, b in zip(tidu.compile(taped).run([x]), want, strict=True):
        np.testing.assert_array_equal(a, b)
