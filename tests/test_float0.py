"""Integer and boolean arguments in tidu's AD transforms, compared with JAX (float64,
CPU): float0 tangents and cotangents (``tidu.dtypes.float0``) in jvp, vjp and
linearize, ``allow_int`` in grad, value_and_grad and jacrev, and all of them in pytrees,
with has_aux, under vmap and inside jit. Every case runs both libraries on the same
inputs and compares structure, shapes, dtypes and values."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jax.tree_util as jtu  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402

F0 = jax.dtypes.float0
X = np.array([0.3, -0.7, 1.1])
N = np.array([2, -1, 3])
MASK = np.array([True, False, True])


def z0(shape=()):
    return np.zeros(shape, F0)


def same(got, want, rtol=1e-12):
    """Same pytree structure (as JAX reads it), shapes, dtypes and values (float0 leaves
    have no values: their dtype and shape)."""
    gl, gt = jtu.tree_flatten(got)
    wl, wt = jtu.tree_flatten(want)
    assert gt == wt, (gt, wt)
    for g, w in zip(gl, wl, strict=True):
        w = np.asarray(w)
        g = np.asarray(g)
        assert g.shape == w.shape, (g.shape, w.shape)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        if w.dtype != F0:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-14)


def both(check):
    """``check(transforms, numpy)`` for tidu's and for JAX's: (tidu result, JAX result)."""
    return check(tidu, tnp), check(jax, jnp)


def test_float0_is_jaxs_dtype():
    assert tidu.dtypes.float0 == F0 == np.dtype([("float0", "V")])
    assert tidu.float0 is tidu.dtypes.float0
    assert np.zeros((2, 3), tidu.dtypes.float0).nbytes == 0
    assert tidu.dtypes.is_float0(np.zeros(2, F0)) and not tidu.dtypes.is_float0(np.zeros(2))


# --- jvp --------------------------------------------------------------------------------


def test_jvp_integer_and_boolean_primals():
    def run(t, m):
        def f(a, n, b):
            return m.where(b, a * n, a ** 2)
        return t.jvp(f, (X, N, MASK), (np.ones(3), z0(3), z0(3)))

    same(*both(run))
    # scalars, and a Python int primal
    same(tidu.jvp(lambda a, n: a * n, (2.0, 3), (1.0, z0())), jax.jvp(lambda a, n: a * n, (2.0, 3), (1.0, z0())))


def test_jvp_integer_outputs_have_float0_tangents():
    def run(t, m):
        def f(a, n):
            return a * 2.0, n * 2, a > 0, m.round(a).astype(np.int32)
        return t.jvp(f, (X, N), (np.ones(3), z0(3)))

    same(*both(run))


def test_jvp_of_integers_only():
    same(tidu.jvp(lambda n: n * 2, (N,), (z0(3),)), jax.jvp(lambda n: n * 2, (N,), (z0(3),)))


def test_jvp_mixed_pytree_and_has_aux():
    def run(t, m):
        def f(p):
            return {"y": m.sin(p["a"]) * p["n"][0], "k": p["n"][1] + 1}, (p["n"][0], p["a"] * 2.0)
        p = {"a": X, "n": (N, 4)}
        tp = {"a": np.full(3, 0.5), "n": (z0(3), z0())}
        return t.jvp(f, (p,), (tp,), has_aux=True)

    same(*both(run))


@pytest.mark.parametrize("primal, tangent, error", [
    (3, 0, TypeError),  # an integer tangent for an integer primal
    (3, 1.0, TypeError),  # a float one
    (3.0, z0(), TypeError),  # float0 for a float primal
    (N, z0(2), ValueError),  # float0 of another shape
])
def test_jvp_wrong_tangent_for_an_integer_primal_as_jax(primal, tangent, error):
    with pytest.raises(error):
        jax.jvp(lambda a, n: a * n, (2.0, primal), (1.0, tangent))
    with pytest.raises(error, match=r"tangent of argument n|has shape"):
        tidu.jvp(lambda a, n: a * n, (2.0, primal), (1.0, tangent))


# --- vjp --------------------------------------------------------------------------------


def test_vjp_cotangents_of_integer_inputs_are_float0():
    def run(t, m):
        out, pb = t.vjp(lambda a, n, b: m.where(b, a * n, -a), X, N, MASK)
        return out, pb(np.array([1.0, 2.0, 3.0]))

    same(*both(run))
    # a scalar Python int
    same(tidu.vjp(lambda a, n: a * n, 2.0, 3)[1](1.0), jax.vjp(lambda a, n: a * n, 2.0, 3)[1](1.0))


def test_vjp_integer_outputs_take_float0_cotangents():
    def run(t, m):
        out, pb = t.vjp(lambda a, n: (a * n, n * 2, a > 0), X, N)
        return out, pb((np.ones(3), z0(3), z0(3)))

    same(*both(run))


def test_vjp_of_integers_only_and_mixed_pytrees_with_aux():
    same(tidu.vjp(lambda n: n * 2, N)[1](z0(3)), jax.vjp(lambda n: n * 2, N)[1](z0(3)))

    def run(t, m):
        def f(d):
            return m.sum(d["a"] * d["n"][0]) + d["n"][1], {"count": d["n"][1] * 2}
        out, pb, aux = t.vjp(f, {"a": X, "n": (N, True)}, has_aux=True)
        return out, pb(1.5), aux

    same(*both(run))


def test_vjp_float0_cotangent_for_a_float_output_is_an_error():
    _, pb = tidu.vjp(lambda a, n: a * n, X, N)
    with pytest.raises(TypeError, match="float0"):
        pb(z0(3))


# --- linearize ------------------------------------------------------------------------------


def test_linearize_integer_primals():
    def run(t, m):
        out, f_jvp = t.linearize(lambda a, n: (m.sin(a) * n, n + 1), X, N)
        return out, f_jvp(np.array([1.0, 0.5, -1.0]), z0(3))

    same(*both(run))
    _, f_jvp = tidu.linearize(lambda a, n: a * n, X, N)
    with pytest.raises(TypeError, match="tangent of argument n"):
        f_jvp(np.ones(3), np.zeros(3, np.int64))


def test_linearize_has_aux():
    def run(t, m):
        out, f_jvp, aux = t.linearize(lambda a, n: (a * n, n), 2.0, 3, has_aux=True)
        return out, f_jvp(1.0, z0()), aux

    same(*both(run))


# --- allow_int --------------------------------------------------------------------------------


def test_grad_allow_int():
    def f(a, n):
        return a * a * n

    for argnums in ((0, 1), 1):
        same(tidu.grad(f, argnums=argnums, allow_int=True)(2.0, 3),
             jax.grad(f, argnums=argnums, allow_int=True)(2.0, 3))
    # booleans and pytrees
    same(tidu.grad(lambda d: tnp.sum(tnp.where(d["b"], d["a"], 0.0)), allow_int=True)({"a": X, "b": MASK}),
         jax.grad(lambda d: jnp.sum(jnp.where(d["b"], d["a"], 0.0)), allow_int=True)({"a": X, "b": MASK}))
    # without allow_int both refuse, and say how
    with pytest.raises(TypeError, match="allow_int"):
        jax.grad(f, argnums=1)(2.0, 3)
    with pytest.raises(TypeError, match="allow_int=True"):
        tidu.grad(f, argnums=1)(2.0, 3)


def test_value_and_grad_allow_int_has_aux():
    def run(t, m):
        return t.value_and_grad(lambda a, n: (a * n, n), argnums=(0, 1), has_aux=True, allow_int=True)(2.0, 3)

    same(*both(run))


def test_jacrev_allow_int_gives_zero_blocks_of_the_arguments_dtype():
    def run(t, m):
        return t.jacrev(lambda a, n: m.sin(a) * n, argnums=(0, 1), allow_int=True)(X, N)

    same(*both(run))
    with pytest.raises(TypeError):
        jax.jacrev(lambda a, n: a * n, argnums=1)(X, N)
    with pytest.raises(TypeError, match="allow_int"):
        tidu.jacrev(lambda a, n: a * n, argnums=1)(X, N)
    # jacfwd has no allow_int in JAX: an integer argument is refused by both
    with pytest.raises(TypeError):
        jax.jacfwd(lambda a, n: a * n, argnums=1)(X, N)
    with pytest.raises(TypeError, match="float0"):
        tidu.jacfwd(lambda a, n: a * n, argnums=1)(X, N)


# --- inside jit, under vmap, nested -------------------------------------------------------------


def test_inside_jit():
    def run(t, m):
        def g(a, n, tn):
            out, tout = t.jvp(lambda x, k: (x * k, k * 2), (a, n), (1.0, tn))
            _, pb = t.vjp(lambda x, k: x * k, a, n)
            return out, tout, pb(1.0)
        return t.jit(g)(2.0, 3, z0())

    same(*both(run))


def test_under_vmap():
    def run(t, m):
        pulled = t.vmap(lambda a, n: t.vjp(lambda x, k: x * k, a, n)[1](1.0))(X, N)
        # float0 tangents mapped in, float0 tangents mapped out on another axis
        pushed = t.vmap(lambda a, n, tn: t.jvp(lambda x, k: (x * k, k), (a, n), (1.0, tn)),
                        out_axes=0)(X, N, z0(3))
        rows = t.vmap(lambda n: t.jvp(lambda k: k + 1, (n,), (z0(2),)), out_axes=1)(np.arange(6).reshape(3, 2))
        return pulled, pushed, rows

    same(*both(run))


def test_pullback_and_f_jvp_called_under_vmap_and_jit():
    def run(t, m):
        _, pb = t.vjp(lambda a, n: a * n, X, N)
        _, f_jvp = t.linearize(lambda a, n: m.sin(a) * n, X, N)
        return t.vmap(pb)(np.eye(3)), t.jit(f_jvp)(np.ones(3), z0(3))

    same(*both(run))


def test_grad_through_a_jvp_with_an_integer_argument():
    def run(t, m):
        def g(x):
            return t.jvp(lambda a, n: a * a * n, (x, 3), (1.0, z0()))[1]
        return t.grad(g)(2.0), t.jit(t.grad(g))(0.5)

    same(*both(run))


def test_transforms_of_functions_returning_float0():
    """A pullback's float0 cotangent as an output of a function that jvp, vjp, linearize,
    jacfwd and jit transform (JAX's float0 in, float0 out)."""
    def run(t, m):
        def inner(x):
            return t.vjp(lambda a, n: a * a * n, x, 3)[1](1.0)  # (float, float0)
        return (t.jvp(inner, (2.0,), (1.0,)),
                t.vjp(inner, 2.0)[1]((1.0, z0())),
                t.vjp(inner, 2.0)[1]((1.0, 0.0)),  # (not read: JAX takes any dtype there)
                t.linearize(inner, 2.0)[1](1.0),
                t.jacfwd(inner)(2.0),
                t.jit(inner)(2.0))

    same(*both(run))


def test_graphs_and_shapes_of_functions_with_float0_results():
    def pulled(t):
        return lambda x, n: t.vjp(lambda a, k: a * k, x, n)[1](1.0)

    got = tidu.eval_shape(pulled(tidu), 2.0, 3)
    want = jax.eval_shape(pulled(jax), 2.0, 3)
    assert [(s.shape, np.dtype(s.dtype)) for s in got] == [(s.shape, np.dtype(s.dtype)) for s in want]
    # the graph has the float output only (float0 has no values)
    graph = tidu.make_graph(pulled(tidu))(2.0, 3)
    assert np.asarray(graph.program.eval([2.0, 3])[0]) == jax.vjp(lambda a, k: a * k, 2.0, 3)[1](1.0)[0]


def test_custom_rules_and_loops_with_integer_arguments():
    def run(t, m):
        @t.custom_jvp
        def scaled(x, n):
            return x * n

        @scaled.defjvp
        def scaled_jvp(primals, tangents):
            (x, n), (tx, _) = primals, tangents
            return scaled(x, n), tx * n

        @t.custom_vjp
        def twice(x, n):
            return x * n * 2.0

        twice.defvjp(lambda x, n: (x * n * 2.0, n), lambda n, g: (g * n * 2.0, None))

        def loop(x, n):
            return t.lax.fori_loop(0, 3, lambda i, c: c * x + n, x)

        return (t.jvp(scaled, (2.0, 3), (1.0, z0())), t.vjp(scaled, 2.0, 3)[1](1.0),
                t.vjp(twice, 2.0, 3)[1](1.0), t.grad(twice, (0, 1), allow_int=True)(2.0, 3),
                t.vjp(loop, 2.0, 3)[1](1.0))

    same(*both(run))


def test_allow_int_and_float0_under_vmap_and_jit():
    def run(t, m):
        def f(a, n):
            return m.sin(a) * n
        return (t.vmap(t.grad(f, (0, 1), allow_int=True))(X, N),
                t.jit(t.vmap(t.jacrev(lambda a, n: a * n, (0, 1), allow_int=True)))(np.ones((2, 3)),
                                                                                      np.ones((2, 3), int)),
                t.jit(lambda a, n: t.linearize(f, a, n)[1](np.ones(3), z0(3)))(X, N),
                t.vmap(lambda a, tn: t.jvp(f, (a, N), (np.ones(3), tn))[1], in_axes=(0, None))(np.ones((2, 3)), z0(3)),
                t.vmap(lambda n: t.vjp(lambda k: k * 2, n)[1](z0()))(N))

    same(*both(run))


def test_allow_int_must_be_a_bool():
    with pytest.raises(TypeError, match="allow_int must be True or False"):
        tidu.grad(lambda a: a, allow_int="yes")
    with pytest.raises(TypeError, match="allow_int must be True or False"):
        tidu.jacrev(lambda a: a, allow_int=None)
