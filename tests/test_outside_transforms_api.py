"""An outside tester's comparison of tidu's transform API with JAX's (float64, CPU):
pytree primals and outputs, has_aux on jvp/vjp/linearize, the closures that
vjp/linearize/linear_transpose return called inside other transforms, vmap's axes,
jit's static arguments, custom rules, checkpoint, eval_shape and tidu.tree_util.

Values, output structures and dtypes are compared with JAX's; for complex inputs tidu's
reverse-mode results are the conjugates of JAX's (docs/transforms.md#complex-numbers).
"""

from __future__ import annotations

import collections
import functools
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
import tidu.tree_util as ttu  # noqa: E402

B = np.array([0.3, -0.7, 1.1])
M = np.arange(6.0).reshape(2, 3) / 5 - 0.4
NT = collections.namedtuple("NT", "y x")  # fields not in sorted order
OD = collections.OrderedDict


def same(got, want, rtol=1e-12, conj=False):
    """Same pytree structure (as JAX reads it), shapes, dtypes and values."""
    gl, gt = jtu.tree_flatten(got)
    wl, wt = jtu.tree_flatten(want)
    assert gt == wt, (gt, wt)
    for g, w in zip(gl, wl, strict=True):
        w = np.conj(np.asarray(w)) if conj else np.asarray(w)
        assert np.shape(g) == w.shape, (np.shape(g), w.shape)
        assert np.asarray(g).dtype == w.dtype, (np.asarray(g).dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-14)


# --- jvp / vjp / linearize with pytrees -----------------------------------------------------


def test_jvp_with_unsorted_dict_namedtuple_and_none_leaves():
    def f(m):
        return lambda p, n: ({"z": p["b"] * 2.0, "a": m.sin(p["a"]) * n.x}, NT(n.y * n.x, None))

    p = {"b": 1.5, "a": B}
    n = NT(np.ones(3), 2.0)
    tp = {"b": 1.0, "a": np.array([1.0, 0.0, -1.0])}
    tn = NT(np.full(3, 0.5), 1.0)
    same(tidu.jvp(f(tnp), (p, n), (tp, tn)), jax.jvp(f(jnp), (p, n), (tp, tn)))


def test_vjp_pytree_primals_and_outputs_with_none():
    def f(m):
        return lambda p: ({"z": m.sum(p["a"] ** 2) * p["b"], "a": None}, [m.cos(p["a"])])

    p = {"b": 1.5, "a": B}
    ct = ({"z": 2.0, "a": None}, [np.array([1.0, 2.0, 3.0])])
    out, pb = tidu.vjp(f(tnp), p)
    j_out, j_pb = jax.vjp(f(jnp), p)
    assert jtu.tree_structure(out) == jtu.tree_structure(j_out)
    same(pb(ct), j_pb(ct))


@pytest.mark.parametrize("which", ["jvp", "vjp", "linearize"])
def test_has_aux_matches_jax(which):
    def f(m):
        return lambda x: (m.sin(x) * 2, {"n": m.sum(x ** 2), "k": (x[0],)})

    t = np.array([1.0, 0.5, -2.0])
    if which == "jvp":
        same(tidu.jvp(f(tnp), (B,), (t,), has_aux=True), jax.jvp(f(jnp), (B,), (t,), has_aux=True))
        return
    tfun, jfun = getattr(tidu, which), getattr(jax, which)
    out, lin, aux = tfun(f(tnp), B, has_aux=True)
    j_out, j_lin, j_aux = jfun(f(jnp), B, has_aux=True)
    same((out, lin(t), aux), (j_out, j_lin(t), j_aux))


def test_has_aux_inside_other_transforms():
    def f(m):
        return lambda x: (m.sin(x) * 2, {"n": m.sum(x ** 2)})

    def g(lib, m):
        def inner(x):
            out, pb, aux = lib.vjp(f(m), x, has_aux=True)
            _, t, aux2 = lib.jvp(f(m), (x,), (x,), has_aux=True)
            return m.sum(pb(out)[0] * t) + aux["n"] * aux2["n"]
        return inner

    same(tidu.grad(g(tidu, tnp))(B), jax.grad(g(jax, jnp))(B))
    same(tidu.vmap(g(tidu, tnp))(M), jax.vmap(g(jax, jnp))(M))


def test_has_aux_needs_a_pair_and_a_bool():
    with pytest.raises(TypeError, match=r"must return a pair \(output, aux\)"):
        tidu.vjp(lambda x: x, B, has_aux=True)
    with pytest.raises(TypeError, match="has_aux must be True or False"):
        tidu.jvp(lambda x: (x, x), (B,), (B,), has_aux=1)


def test_linearize_applied_to_several_tangents():
    def f(m):
        return lambda a, b: {"p": a * b, "q": m.sin(a)}

    _, f_jvp = tidu.linearize(f(tnp), B, 2.0)
    _, j_jvp = jax.linearize(f(jnp), B, 2.0)
    for ta, tb in ((np.ones(3), 0.0), (np.zeros(3), 1.0), (B, -3.0)):
        same(f_jvp(ta, tb), j_jvp(ta, tb))


def test_closures_of_toplevel_transforms_work_inside_other_transforms():
    # linearize's f_jvp, vjp's pullback and linear_transpose's f_t, made on concrete
    # values, then called under vmap, grad and jit (a TraceError before)
    _, f_jvp = tidu.linearize(tnp.sin, B)
    _, j_jvp = jax.linearize(jnp.sin, B)
    same(tidu.vmap(f_jvp)(np.eye(3)), jax.vmap(j_jvp)(np.eye(3)))
    same(tidu.jit(f_jvp)(B), jax.jit(j_jvp)(B))
    same(tidu.vmap(f_jvp, in_axes=1)(np.eye(3)[:, :2]), jax.vmap(j_jvp, in_axes=1)(np.eye(3)[:, :2]))

    _, pb = tidu.vjp(lambda x: tnp.sin(x) * x, B)
    _, j_pb = jax.vjp(lambda x: jnp.sin(x) * x, B)
    same(tidu.vmap(pb)(np.eye(3)), jax.vmap(j_pb)(np.eye(3)))
    same(tidu.grad(lambda c: tnp.sum(pb(c)[0] ** 2))(B), jax.grad(lambda c: jnp.sum(j_pb(c)[0] ** 2))(B))

    f_t = tidu.linear_transpose(lambda q: 2.0 * q[::-1], B)
    j_t = jax.linear_transpose(lambda q: 2.0 * q[::-1], B)
    same(tidu.vmap(f_t)(np.eye(3)), jax.vmap(j_t)(np.eye(3)))


def test_linear_transpose_pytrees_and_shape_dtype_structs():
    def f(d):
        return {"s": d["a"] * 2.0 + d["b"][0], "t": (d["b"][1] * 3.0,)}

    primals = {"a": B, "b": (B, 1.0)}
    ct = {"s": np.array([1.0, 2.0, 3.0]), "t": (5.0,)}
    same(tidu.linear_transpose(f, primals)(ct), jax.linear_transpose(f, primals)(ct))
    # primals given by shape and dtype only, tidu's or JAX's ShapeDtypeStruct
    for sds in (tidu.ShapeDtypeStruct, jax.ShapeDtypeStruct):
        got = tidu.linear_transpose(lambda a, c: a * 2 + c[0], sds((3,), np.float32), (sds((3,), np.float32),))
        want = jax.linear_transpose(lambda a, c: a * 2 + c[0], jax.ShapeDtypeStruct((3,), np.float32),
                                    (jax.ShapeDtypeStruct((3,), np.float32),))
        c = B.astype(np.float32)
        same(got(c), want(c), rtol=1e-6)


def test_linear_transpose_of_a_nonlinear_function_is_a_clear_error():
    with pytest.raises(TypeError, match="is not linear in its arguments"):
        tidu.linear_transpose(lambda a: a * a, B)(B)


def test_jvp_of_an_integer_argument_needs_a_float0_tangent_as_jax():
    # an integer tangent (0) for an integer primal: JAX and tidu refuse it, naming the argument
    with pytest.raises(TypeError, match="float0"):
        jax.jvp(lambda a, n: a * n, (B, 3), (B, 0))
    with pytest.raises(TypeError, match=r"tangent of argument n has dtype int.*must be float0.*tidu.dtypes.float0"):
        tidu.jvp(lambda a, n: a * n, (B, 3), (B, 0))
    # binding it gives JAX's values too
    same(tidu.jvp(functools.partial(lambda n, a: a * n, 3), (B,), (B,)),
         jax.jvp(functools.partial(lambda n, a: a * n, 3), (B,), (B,)))


def test_integer_primals_with_float0_tangents_as_jax():
    float0 = jax.dtypes.float0
    assert tidu.dtypes.float0 == float0 and tidu.float0 == float0
    want = jax.jvp(lambda a, n: a * n, (B, 3), (np.ones(3), np.zeros((), float0)))
    got = tidu.jvp(lambda a, n: a * n, (B, 3), (np.ones(3), np.zeros((), float0)))
    same(got, want)
    # vjp: the integer argument's cotangent is float0 zeros of its shape
    (g_a, g_n), (w_a, w_n) = tidu.vjp(lambda a, n: a * n, B, 3)[1](B), jax.vjp(lambda a, n: a * n, B, 3)[1](B)
    same(g_a, w_a)
    assert g_n.dtype == w_n.dtype == float0 and g_n.shape == w_n.shape == ()


# --- grad / value_and_grad --------------------------------------------------------------------


def test_grad_output_kinds():
    same(tidu.grad(lambda a: 3.0)(1.0), jax.grad(lambda a: 3.0)(1.0))  # a constant Python float
    same(tidu.grad(lambda a: tnp.sum(a) * np.ones(()))(B), jax.grad(lambda a: jnp.sum(a) * jnp.ones(()))(B))
    with pytest.raises(TypeError, match=r"return a scalar \(shape \(\)\), got \(1,\)"):
        tidu.grad(lambda a: a * tnp.ones(1))(1.0)
    with pytest.raises(TypeError):
        jax.grad(lambda a: a * jnp.ones(1))(1.0)


def test_grad_argnums_structure_and_value_and_grad_aux():
    def f(m):
        return lambda x, y: m.sum(x * y[0]) * y[1]

    y = (B[::-1].copy(), 2.0)
    for argnums in ((1,), (1, 0), [0, 1], -1):
        same(tidu.grad(f(tnp), argnums=argnums)(B, y), jax.grad(f(jnp), argnums=argnums)(B, y))

    def g(m):
        return lambda x: (m.sum(x ** 2), (x, {"k": x * 2, "none": None}))

    same(tidu.value_and_grad(g(tnp), has_aux=True)(B), jax.value_and_grad(g(jnp), has_aux=True)(B))
    same(tidu.grad(g(tnp), has_aux=True)(B), jax.grad(g(jnp), has_aux=True)(B))


def test_grad_dtypes_follow_the_argument():
    x32 = B.astype(np.float32)
    same(tidu.grad(lambda a: tnp.sum(a * B))(x32), jax.grad(lambda a: jnp.sum(a * B))(x32), rtol=1e-6)
    same(tidu.grad(lambda a: tnp.sum(tnp.astype(a, np.float32)))(B),
         jax.grad(lambda a: jnp.sum(a.astype(np.float32)))(B))


def test_complex_gradient_is_the_conjugate_of_jax():
    z = np.array([1 + 1j, 2j, -0.5 + 0.3j])
    same(tidu.grad(lambda z: tnp.sum(tnp.abs(z * z)))(z), jax.grad(lambda z: jnp.sum(jnp.abs(z * z)))(z), conj=True)
    same(tidu.vjp(lambda z: z * (2 + 1j), z)[1](np.ones(3, complex)),
         jax.vjp(lambda z: z * (2 + 1j), z)[1](np.ones(3, complex)), conj=True)


def test_hessian_with_stop_gradient():
    def f(m, sg):
        return lambda x: m.sum(x ** 3) + m.sum(sg(x ** 2) * x) + m.sum(x ** 2 * sg(m.sin(x)))

    same(tidu.hessian(f(tnp, tidu.stop_gradient))(B), jax.hessian(f(jnp, jax.lax.stop_gradient))(B))


# --- vmap -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", [
    "nested_dict_in_axes", "negative_axes", "out_axes_per_leaf", "out_axes_none", "python_scalar_out",
    "axis_size_all_none", "nested_different_axes", "out_axes_dict", "ordered_dict_in_axes",
])
def test_vmap_axes_match_jax(case):
    def both(make, *args):
        same(make(tidu.vmap, tnp)(*args), make(jax.vmap, jnp)(*args))

    if case == "nested_dict_in_axes":
        both(lambda vm, m: vm(lambda d: d["u"] * d["v"], in_axes=({"u": 1, "v": None},)), {"u": M.T.copy(), "v": B})
    elif case == "negative_axes":
        both(lambda vm, m: vm(lambda u: m.sum(u) * u, in_axes=-1, out_axes=-1), M)
    elif case == "out_axes_per_leaf":
        both(lambda vm, m: vm(lambda u: (u, m.sum(u)), out_axes=(1, 0)), M)
    elif case == "out_axes_none":
        both(lambda vm, m: vm(lambda u, c: (u * 2, c * 3), in_axes=(0, None), out_axes=(0, None)), M, B)
    elif case == "python_scalar_out":
        both(lambda vm, m: vm(lambda u: (3.0, u)), M)
    elif case == "axis_size_all_none":
        both(lambda vm, m: vm(lambda u, c: u * c, in_axes=(None, None), axis_size=4), B, 2.0)
    elif case == "nested_different_axes":
        both(lambda vm, m: vm(vm(lambda u, c: u * c, in_axes=(0, None)), in_axes=(1, 0)), M, B)
    elif case == "out_axes_dict":
        both(lambda vm, m: vm(lambda u: {"z": u, "a": u[0]}, out_axes={"z": 1, "a": 0}), M)
    else:
        both(lambda vm, m: vm(lambda d: d["b"] * d["a"], in_axes=(OD([("b", None), ("a", 0)]),)),
             OD([("b", B), ("a", M)]))


def test_vmap_of_grad_of_vmap():
    def f(vm, g, m):
        def loss(w, xs):
            return m.sum(vm(lambda r: m.sin(r * w))(xs))
        return vm(g(loss), in_axes=(0, None))

    same(f(tidu.vmap, tidu.grad, tnp)(B, M), f(jax.vmap, jax.grad, jnp)(B, M))


def test_vmap_of_hvp_jvp_vjp():
    same(tidu.vmap(lambda v: tidu.hvp(lambda q: tnp.sum(q ** 3), (B,), (v,)))(np.eye(3)),
         jax.vmap(lambda v: jax.jvp(jax.grad(lambda q: jnp.sum(q ** 3)), (B,), (v,))[1])(np.eye(3)))
    same(tidu.vmap(lambda v: tidu.vjp(tnp.sin, B)[1](v))(np.eye(3)),
         jax.vmap(lambda v: jax.vjp(jnp.sin, B)[1](v))(np.eye(3)))


# --- jit static arguments ---------------------------------------------------------------------


def _repeat(m):
    def f(x, n, *, scale=1.0, mode="a"):
        y = x * scale
        for _ in range(n):
            y = m.sin(y)
        return y if mode == "a" else -y
    return f


@pytest.mark.parametrize("how", ["argnames_by_position", "argnums_by_name", "argnames_by_name", "both"])
def test_jit_static_arguments_by_position_or_name(how):
    opts, call = {
        "argnames_by_position": ({"static_argnames": "n"}, lambda f: f(B, 2)),
        "argnums_by_name": ({"static_argnums": 1}, lambda f: f(B, n=2)),
        "argnames_by_name": ({"static_argnames": ("n",)}, lambda f: f(B, n=3, scale=2.0)),
        "both": ({"static_argnums": 1, "static_argnames": "mode"}, lambda f: f(B, 2, scale=3.0, mode="b")),
    }[how]
    same(call(tidu.jit(_repeat(tnp), **opts)), call(jax.jit(_repeat(jnp), **opts)))


def test_jit_static_argnums_with_a_default_value():
    def f(m):
        def g(x, n=2):
            for _ in range(n):
                x = m.sin(x)
            return x
        return g

    same(tidu.jit(f(tnp), static_argnums=1)(B), jax.jit(f(jnp), static_argnums=1)(B))
    same(tidu.jit(f(tnp), static_argnums=1)(B, 3), jax.jit(f(jnp), static_argnums=1)(B, 3))


# --- custom_jvp, custom_vjp, checkpoint ---------------------------------------------------------


def _custom_jvp_pair(m, cj):
    @functools.partial(cj, nondiff_argnums=(0,))
    def f(k, x, y):
        return m.sin(x) * k + y

    @f.defjvp
    def f_jvp(k, primals, tangents):
        (x, y), (dx, dy) = primals, tangents
        return f(k, x, y), m.cos(x) * k * dx * 2.0 + dy  # (not the true derivative: the rule is used)

    @cj
    def g(x, y):
        return x * y

    @g.defjvp
    def g_jvp(primals, tangents):  # ignores dy: a symbolic zero for y
        (x, y), (dx, _) = primals, tangents
        return g(x, y), dx * y

    return f, g


def test_custom_jvp_nondiff_argnums_and_ignored_tangents():
    tf, tg = _custom_jvp_pair(tnp, tidu.custom_jvp)
    jf, jg = _custom_jvp_pair(jnp, jax.custom_jvp)
    same(tidu.grad(lambda x, y: tnp.sum(tf(3.0, x, y) * tg(x, y)), argnums=(0, 1))(B, M[0]),
         jax.grad(lambda x, y: jnp.sum(jf(3.0, x, y) * jg(x, y)), argnums=(0, 1))(B, M[0]))
    same(tidu.jvp(lambda x: tf(2.0, x, x), (B,), (M[1],)), jax.jvp(lambda x: jf(2.0, x, x), (B,), (M[1],)))
    same(tidu.vmap(lambda x: tg(x, x))(M), jax.vmap(lambda x: jg(x, x))(M))
    same(tidu.hessian(lambda x: tnp.sum(tg(x, x)))(B), jax.hessian(lambda x: jnp.sum(jg(x, x)))(B))


def _custom_vjp_fn(m, cv):
    @functools.partial(cv, nondiff_argnums=(1,))
    def f(x, k):
        return {"s": m.sin(x) * k, "c": m.cos(x)}

    def fwd(x, k):
        return f(x, k), {"cos": m.cos(x), "pair": (m.sin(x), None)}

    def bwd(k, res, g):
        return (g["s"] * res["cos"] * k - g["c"] * res["pair"][0],)

    f.defvjp(fwd, bwd)
    return f


def test_custom_vjp_pytree_residuals_and_nondiff_argnums():
    tf, jf = _custom_vjp_fn(tnp, tidu.custom_vjp), _custom_vjp_fn(jnp, jax.custom_vjp)

    def loss(f, m):
        return lambda x: m.sum(f(x, 2.0)["s"]) + m.sum(f(x, 2.0)["c"] ** 2)

    same(tidu.grad(loss(tf, tnp))(B), jax.grad(loss(jf, jnp))(B))
    ct = {"s": np.ones(3), "c": B}
    same(tidu.vjp(lambda x: tf(x, 3.0), B)[1](ct), jax.vjp(lambda x: jf(x, 3.0), B)[1](ct))
    same(tidu.vmap(tidu.grad(loss(tf, tnp)))(M), jax.vmap(jax.grad(loss(jf, jnp)))(M))


def test_checkpoint_static_argnums_and_pytrees():
    def chain(m):
        def f(x, n):
            for _ in range(n):
                x = m.sin(x)
            return {"a": x * 2, "b": (m.sum(x),)}
        return f

    same(tidu.grad(lambda x: tidu.checkpoint(chain(tnp), static_argnums=(1,))(x, 3)["b"][0])(B),
         jax.grad(lambda x: jax.checkpoint(chain(jnp), static_argnums=(1,))(x, 3)["b"][0])(B))
    same(tidu.hessian(lambda x: tnp.sum(tidu.remat(lambda y: y ** 3)(x)))(B),
         jax.hessian(lambda x: jnp.sum(jax.remat(lambda y: y ** 3)(x)))(B))


# --- eval_shape -------------------------------------------------------------------------------------


def _shapes(tree):
    return jtu.tree_map(lambda s: (tuple(s.shape), np.dtype(s.dtype)), tree)


def test_eval_shape_pytrees_and_keyword_arguments():
    def f(d, *, scale):
        return {"z": d["a"] @ d["m"] * scale, "a": (d["a"].astype(np.float32), None)}

    args = {"m": np.ones((3, 2)), "a": B}
    got = tidu.eval_shape(f, args, scale=np.float32(2.0))
    want = jax.eval_shape(f, args, scale=np.float32(2.0))
    assert _shapes(got) == _shapes(want)
    got = tidu.eval_shape(lambda x, n=1: x * n, jax.ShapeDtypeStruct((4,), np.float32),
                          n=tidu.ShapeDtypeStruct((2, 1), np.float32))
    assert _shapes(got) == ((2, 4), np.dtype(np.float32))
    s = tidu.ShapeDtypeStruct((2, 3), np.float32)
    j = jax.ShapeDtypeStruct((2, 3), np.float32)
    assert (s.ndim, s.size) == (j.ndim, j.size) == (2, 6)


# --- tree_util -----------------------------------------------------------------------------------------


TREE = {"b": [1, (2, None)], "a": {"y": 3, "x": np.ones(2)}, "c": None}


def test_tree_util_is_leaf():
    def is_none(v):
        return v is None

    def is_tuple(v):
        return isinstance(v, tuple)

    same(ttu.tree_map(is_none, TREE, is_leaf=is_none), jtu.tree_map(is_none, TREE, is_leaf=is_none))
    assert ttu.tree_leaves(TREE, is_leaf=is_tuple)[-1] == (2, None) == jtu.tree_leaves(TREE, is_leaf=is_tuple)[-1]
    leaves, td = ttu.tree_flatten(TREE, is_leaf=lambda v: isinstance(v, list))
    j_leaves, j_td = jtu.tree_flatten(TREE, is_leaf=lambda v: isinstance(v, list))
    assert len(leaves) == len(j_leaves) == 3 and leaves[2] == j_leaves[2] == [1, (2, None)]
    assert td.num_leaves == j_td.num_leaves and td.num_nodes == j_td.num_nodes
    n = jtu.tree_structure(TREE, is_leaf=is_tuple).num_leaves
    assert ttu.tree_structure(TREE, is_leaf=is_tuple).num_leaves == n == 4


def test_tree_util_leaves_order_structure_and_unflatten():
    assert [type(v) for v in ttu.tree_leaves(TREE)] == [type(v) for v in jtu.tree_leaves(TREE)]
    td, j_td = ttu.tree_structure(TREE), jtu.tree_structure(TREE)
    assert (td.num_leaves, td.num_nodes) == (j_td.num_leaves, j_td.num_nodes) == (4, 10)
    assert td.unflatten(range(4)) == j_td.unflatten(range(4))
    assert ttu.tree_structure({"a": 1, "b": 2}) == ttu.tree_structure({"b": 5, "a": 6})
    assert ttu.tree_structure([1]) != ttu.tree_structure((1,))
    assert ttu.tree_reduce(lambda u, v: u + v, (1, [2, 3])) == jtu.tree_reduce(lambda u, v: u + v, (1, [2, 3])) == 6
    assert ttu.tree_reduce(lambda u, v: u + v, [], 7) == 7
    assert ttu.tree_all([True, (1, None)]) and not ttu.tree_all([True, (0,)])


def test_tree_map_with_a_prefix_structure():
    assert ttu.tree_map(lambda u, v: (u, v), (1, 2), (10, [20, 30])) == \
        jtu.tree_map(lambda u, v: (u, v), (1, 2), (10, [20, 30]))
    with pytest.raises(ValueError, match="pytree structures differ"):
        ttu.tree_map(lambda u, v: (u, v), (1, [2]), (10, 20))


def test_ordered_dict_and_defaultdict_as_jax():
    od = OD([("b", 1), ("a", 2)])
    assert ttu.tree_leaves(od) == jtu.tree_leaves(od) == [1, 2]  # insertion order
    mapped = ttu.tree_map(lambda v: v * 10, od)
    assert type(mapped) is OD and list(mapped.items()) == [("b", 10), ("a", 20)]
    assert ttu.tree_structure(od) != ttu.tree_structure(OD([("a", 1), ("b", 2)]))
    dd = collections.defaultdict(list, {"b": 1, "a": 2})
    got, want = ttu.tree_map(lambda v: v * 2, dd), jtu.tree_map(lambda v: v * 2, dd)
    assert type(got) is type(want) and got.default_factory is list and dict(got) == dict(want)
    # transforms keep the structure, as JAX's
    p = OD([("b", 2.0), ("a", B)])
    same(tidu.grad(lambda d: d["b"] * tnp.sum(d["a"] ** 2))(p), jax.grad(lambda d: d["b"] * jnp.sum(d["a"] ** 2))(p))
    same(tidu.jit(lambda x: OD([("z", x), ("a", 2 * x)]))(B), jax.jit(lambda x: OD([("z", x), ("a", 2 * x)]))(B))


def test_registered_node_in_transforms():
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    for reg in (ttu.register_pytree_node, jtu.register_pytree_node):
        reg(Pair, lambda p: ((p.a, p.b), "aux"), lambda aux, ch: Pair(*ch))
    g = tidu.grad(lambda p: tnp.sum(p.a * p.b))(Pair(B, 2.0))
    j = jax.grad(lambda p: jnp.sum(p.a * p.b))(Pair(B, 2.0))
    assert isinstance(g, Pair)
    same((g.a, g.b), (j.a, j.b))
    assert ttu.tree_leaves([Pair(1, (2, 3)), 4]) == jtu.tree_leaves([Pair(1, (2, 3)), 4])
