"""tidu's transforms against JAX's (float64, CPU) on a catalog of functions.

Every function is written once over a NumPy-like module ``m`` and run as
``fn(tnp)`` under tidu and ``fn(jnp)`` under JAX. Complex convention: tidu's grad,
vjp and jacrev are the adjoint (conjugate of JAX's); jvp and jacfwd agree with JAX.
"""

from __future__ import annotations

import functools
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402

RTOL, ATOL = 1e-10, 1e-12
rng = np.random.default_rng(0)


def close(got, want, rtol=RTOL, atol=ATOL):
    """Pytrees of equal structure and values."""
    g_leaves, g_tree = jax.tree_util.tree_flatten(got)
    w_leaves, w_tree = jax.tree_util.tree_flatten(want)
    assert g_tree == w_tree, f"structure {g_tree} != {w_tree}"
    for g, w in zip(g_leaves, w_leaves, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"shape {g.shape} != {w.shape}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def conj_tree(t):
    return jax.tree_util.tree_map(lambda a: np.conj(np.asarray(a)), t)


def vec(n, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, n)


# --- the catalog: name -> (function of the module, arguments) ---------------------------------

A34 = rng.normal(size=(3, 4))
C3 = np.array([0.5, -1.5, 2.0])

SCALAR_FUNCTIONS = {
    "poly": (lambda m: lambda x: x**3 - 2 * x + 1 / (1 + x**2), (0.7,)),
    "exp_ax": (lambda m: lambda x: m.exp(2.0 * x), (1.0,)),
    "sum_exp_ax": (
        lambda m: lambda x, a: m.sum(m.exp(a * x)),
        (np.array([1.0, 2.0]), np.array([2.0, 3.0])),
    ),
    "log1p_expm1": (lambda m: lambda x: m.sum(m.log1p(x**2) + m.expm1(-x)), (vec(4),)),
    "tanh_sqrt": (lambda m: lambda x: m.sum(m.tanh(x) * m.sqrt(x**2 + 1)), (vec(5),)),
    "broadcast_row": (lambda m: lambda A, v: m.sum(m.sin(A + v) * v), (A34, vec(4))),
    "broadcast_outer": (
        lambda m: lambda x, y: m.sum((x[:, None] - y[None, :]) ** 2 * x[:, None]),
        (vec(3), vec(4)),
    ),
    "reduce_axes": (
        lambda m: (
            lambda A: (
                m.sum(m.max(A, axis=1) ** 2)
                + m.sum(m.mean(A, axis=0) ** 3)
                + m.sum(m.sum(A, axis=1, keepdims=True) * A)
            )
        ),
        (A34,),
    ),
    "prod": (
        lambda m: lambda x: m.prod(x) + m.sum(m.prod(x.reshape(2, 2), axis=0)),
        (vec(4, 0.5, 2.0),),
    ),
    "mlp": (lambda m: lambda W, x, b: m.sum(m.tanh(W @ x + b)), (A34, vec(4), vec(3))),
    "quadratic": (
        lambda m: lambda x, A: x @ A @ x + m.dot(x, x),
        (vec(4), rng.normal(size=(4, 4))),
    ),
    "einsum_batch": (
        lambda m: lambda A, B: m.sum(m.sin(m.einsum("bij,bjk->bik", A, B))),
        (rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 4, 2))),
    ),
    "einsum_trace": (
        lambda m: (
            lambda A: (
                m.einsum("ii", A) ** 2
                + m.einsum("ij,ij->", A, A)
                + m.sum(m.einsum("ii->i", A) * m.einsum("ij->j", A))
            )
        ),
        (rng.normal(size=(3, 3)),),
    ),
    "einsum_ellipsis": (
        lambda m: lambda A, x: m.sum(m.einsum("...ij,j->...i", A, x) ** 2),
        (rng.normal(size=(2, 3, 4)), vec(4)),
    ),
    "slicing": (
        lambda m: lambda x: m.sum(x[1:] * x[:-1]) + x[0] ** 2 + m.sum(x[::2]) * x[-1],
        (vec(6),),
    ),
    "rosenbrock": (
        lambda m: lambda x: m.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2),
        (vec(5, -1.5, 1.5),),
    ),
    "concatenate": (
        lambda m: lambda x, w: m.sum(m.concatenate([m.sin(x), x**2, m.cos(x[:2])]) * w),
        (vec(3), vec(8)),
    ),
    "stack_transpose": (
        lambda m: lambda x, y: m.sum((m.stack([x, 2 * x, x * y]).T @ y[:3]) ** 2),
        (vec(4), vec(4)),
    ),
    "where_maximum": (
        lambda m: (
            lambda x: m.sum(m.where(x > 0, x**2, -x) + m.maximum(x, 0.1) + m.minimum(x, -0.2) * x)
        ),
        (np.array([-0.9, -0.4, 0.3, 0.8, 1.7]),),
    ),
    "divide_pow": (
        lambda m: lambda x, y: m.sum(x / (1 + y**2) + x**y + x**0.5),
        (vec(4, 0.5, 2.0), vec(4)),
    ),
    "logsumexp": (lambda m: lambda x: m.log(m.sum(m.exp(x - m.max(x)))) + m.max(x), (vec(5),)),
    "reshape_matmul": (lambda m: lambda x, y: m.sum(m.reshape(x, (2, 3)) @ y), (vec(6), vec(3))),
    "variance": (lambda m: lambda x: m.mean((x - m.mean(x)) ** 2), (vec(6),)),
    "abs_sign": (
        lambda m: lambda x: m.sum(m.abs(x) * m.sign(x) * x + m.abs(x) ** 3),
        (np.array([-1.2, 0.4, 2.0]),),
    ),
    "norm_matrix": (
        lambda m: lambda A: m.sqrt(m.sum(A.T @ A)) + m.sum(A[1, :] * A[:, 2].sum()),
        (A34,),
    ),
    "float_int_mix": (
        lambda m: lambda x, n: m.sum(x * n) + m.sum(x[1:] ** 2 * n[0]),
        (vec(3), np.array([1, 2, 3])),
    ),
}

COMPLEX_FUNCTIONS = {
    "abs2": (lambda m: lambda z: m.sum(m.abs(z) ** 2), (np.array([1 + 2j, 0.5 - 1j]),)),
    "holo_real": (
        lambda m: lambda z: m.real(m.sum(z * z * (2 + 1j))) + m.imag(m.sum(m.exp(z))),
        (np.array([0.3 + 0.1j, -0.5 + 0.7j]),),
    ),
    "conj_mix": (
        lambda m: lambda z, x: m.sum(m.real(z * m.conj(z) * x)) + m.sum(m.abs(z * x + 1j)),
        (np.array([1 - 1j, 0.2 + 0.4j]), vec(2)),
    ),
    "complex_matmul": (
        lambda m: lambda z, A: m.sum(m.abs(A @ z) ** 2),
        (np.array([1 + 1j, 2 - 0.5j, -1j]), rng.normal(size=(2, 3)) + 0.5j),
    ),
}

VECTOR_FUNCTIONS = {
    "sin_scale": (lambda m: lambda x: m.sin(x) * x[0], (vec(3),)),
    "matvec": (lambda m: lambda W, x: m.tanh(W @ x), (A34, vec(4))),
    "outer": (lambda m: lambda x, y: m.einsum("i,j->ij", m.exp(x), y), (vec(2), vec(3))),
    "concat_out": (lambda m: lambda x: m.concatenate([x**2, m.sum(x, keepdims=True)]), (vec(3),)),
    "broadcast_out": (lambda m: lambda x, y: m.exp(x[:, None] * y), (vec(2), vec(3))),
    "holomorphic": (lambda m: lambda z: m.exp(z) * z, (np.array([0.3 + 0.2j, -0.1 + 1j]),)),
}


def both(entry):
    make, args = entry
    return make(tnp), make(jnp), args


def diff_argnums(args):
    return tuple(i for i, a in enumerate(args) if np.asarray(a).dtype.kind in "fc")


@pytest.mark.parametrize("name", sorted(SCALAR_FUNCTIONS))
def test_value_and_grad(name):
    f, jf, args = both(SCALAR_FUNCTIONS[name])
    nums = diff_argnums(args)
    val, g = tidu.value_and_grad(f, argnums=nums)(*args)
    jval, jg = jax.jit(jax.value_and_grad(jf, argnums=nums))(*args)  # one XLA compile, not one per op
    close(val, jval)
    close(g, jg)


@pytest.mark.parametrize("name", sorted(COMPLEX_FUNCTIONS))
def test_complex_grad_is_conjugate_of_jax(name):
    f, jf, args = both(COMPLEX_FUNCTIONS[name])
    nums = diff_argnums(args)
    close(tidu.grad(f, argnums=nums)(*args), conj_tree(jax.jit(jax.grad(jf, argnums=nums))(*args)))


def test_golden_complex_gradient():
    g = tidu.grad(lambda z: tnp.sum(tnp.abs(z) ** 2))(np.array([1 + 2j]))
    close(g, np.array([2 + 4j]))


@pytest.mark.parametrize(
    "name", sorted(SCALAR_FUNCTIONS) + sorted(VECTOR_FUNCTIONS) + sorted(COMPLEX_FUNCTIONS)
)
def test_jvp(name):
    table = {**SCALAR_FUNCTIONS, **VECTOR_FUNCTIONS, **COMPLEX_FUNCTIONS}
    f, jf, args = both(table[name])
    nums = diff_argnums(args)
    tangents = [np.asarray(rng.normal(size=np.shape(a)), dtype=np.asarray(a).dtype) for a in args]

    def fixed(m_f):
        def g(*diff):
            full = list(args)
            for i, v in zip(nums, diff, strict=True):
                full[i] = v
            return m_f(*full)

        return g

    primals = tuple(args[i] for i in nums)
    tans = tuple(tangents[i] for i in nums)
    out, tout = tidu.jvp(fixed(f), primals, tans)
    jout, jtout = jax.jit(jax.jvp, static_argnums=0)(fixed(jf), primals, tans)
    close(out, jout)
    close(tout, jtout)


@pytest.mark.parametrize("name", sorted(VECTOR_FUNCTIONS) + sorted(COMPLEX_FUNCTIONS))
def test_vjp(name):
    table = {**VECTOR_FUNCTIONS, **COMPLEX_FUNCTIONS}
    f, jf, args = both(table[name])
    out, pullback = tidu.vjp(f, *args)
    jout = jax.jit(jf)(*args)
    close(out, jout)
    ct = np.asarray(rng.normal(size=np.shape(jout)), dtype=np.asarray(jout).dtype)
    if np.iscomplexobj(ct):
        ct = ct + 1j * rng.normal(size=ct.shape)
    # tidu's pullback is the adjoint: conj(JAX's pullback of conj(ct))
    jpullback = jax.jit(lambda a, c: jax.vjp(jf, *a)[1](c))
    close(pullback(ct), conj_tree(jpullback(args, np.conj(ct))))


@pytest.mark.parametrize("name", sorted(VECTOR_FUNCTIONS) + ["mlp", "rosenbrock", "einsum_batch"])
@pytest.mark.parametrize("which", ["jacfwd", "jacrev"])
def test_jacobians(name, which):
    f, jf, args = both({**VECTOR_FUNCTIONS, **SCALAR_FUNCTIONS}[name])
    nums = diff_argnums(args)
    holo = np.iscomplexobj(args[0])
    jax_jac = jax.jit(getattr(jax, which)(jf, argnums=nums, holomorphic=holo))(*args)
    if which == "jacrev" and holo:
        jax_jac = conj_tree(jax_jac)
    close(getattr(tidu, which)(f, argnums=nums)(*args), jax_jac)


@pytest.mark.parametrize("big", [False, True])
def test_jacfwd_of_several_leaves(big):
    """jacfwd by several leaves: those of more than one element but few in all share one
    JVP batched over all of them (nested.JOINT_BASIS_MAX), each leaf's block its rows; past
    that, one JVP per leaf. Leaves of one element (seeded apart), of none, pytrees and a
    float32 leaf beside float64 ones: JAX's Jacobians either way."""
    def make(m):
        def f(a, tree, c, empty):
            return m.sin(a * tree["v"]) * m.sum(tree["w"] ** 2) + c * m.exp(a) + m.sum(empty)
        return f

    n = 80 if big else 3  # 84 elements in the leaves of more than one: one JVP per leaf
    args = (np.float64(0.3), {"v": vec(n), "w": vec((2, 2)).astype(np.float32)}, np.float64(0.4), np.zeros(0))
    got = tidu.jacfwd(make(tnp), argnums=(0, 1, 2, 3))(*args)
    want = jax.jit(jax.jacfwd(make(jnp), argnums=(0, 1, 2, 3)))(*args)
    # the float32 sum's last bit (~1e-7 of terms up to ~8, summed in another order than
    # XLA's) shows where the float64 terms around it cancel: absolute, not relative
    close(got, want, rtol=1e-6, atol=2e-6)


HESSIAN_CASES = [
    "poly",
    "sum_exp_ax",
    "tanh_sqrt",
    "broadcast_row",
    "mlp",
    "rosenbrock",
    "concatenate",
    "logsumexp",
    "einsum_trace",
    "slicing",
    "prod",
]


@functools.cache
def jax_hessian(name):
    """JAX's Hessian of a case, computed once for the four modes that are checked against it."""
    _, jf, args = both(SCALAR_FUNCTIONS[name])
    return jax.jit(jax.hessian(jf))(*args)


@pytest.mark.parametrize("name", HESSIAN_CASES)
@pytest.mark.parametrize("mode", ["FoF", "FoR", "RoF", "RoR"])
def test_hessian_modes(name, mode):
    f, _, args = both(SCALAR_FUNCTIONS[name])
    close(tidu.hessian(f, mode=mode)(*args), jax_hessian(name), rtol=1e-9)


@pytest.mark.parametrize("mode", ["FoF", "FoR", "RoF", "RoR"])
def test_hessian_several_argnums(mode):
    f, jf, args = both(SCALAR_FUNCTIONS["mlp"])
    close(
        tidu.hessian(f, argnums=(0, 2), mode=mode)(*args),
        jax.jit(jax.hessian(jf, argnums=(0, 2)))(*args),
        rtol=1e-9,
    )


@pytest.mark.parametrize("mode", ["FoF", "FoR", "RoF", "RoR"])
def test_hessian_golden_exp(mode):
    a, x = 2.0, 1.0
    h = tidu.hessian(lambda x: tnp.exp(a * x), mode=mode)(x)
    close(h, a**2 * np.exp(a * x))
    close(tidu.hessian(lambda x: x * x, mode=mode)(3.0), 2.0)


def test_third_order():
    def f(m):
        return lambda x: m.sin(x) * x**2 + m.exp(-x)

    g3 = tidu.grad(tidu.grad(tidu.grad(f(tnp))))(0.7)
    close(g3, jax.jit(jax.grad(jax.grad(jax.grad(f(jnp)))))(0.7))
    close(tidu.grad(tidu.grad(tidu.grad(lambda x: tnp.exp(2.0 * x))))(1.0), 8 * np.exp(2.0))


def test_third_order_tensor():
    f, jf, args = both(VECTOR_FUNCTIONS["sin_scale"])
    close(
        tidu.jacrev(tidu.jacfwd(tidu.jacrev(f)))(*args),
        jax.jit(jax.jacrev(jax.jacfwd(jax.jacrev(jf))))(*args),
    )


@pytest.mark.parametrize("name", ["mlp", "rosenbrock", "quadratic"])
def test_hvp(name):
    f, jf, args = both(SCALAR_FUNCTIONS[name])
    v = rng.normal(size=np.shape(args[0]))
    want = jax.jit(jax.jvp, static_argnums=0)(lambda x: jax.grad(jf)(x, *args[1:]), (args[0],), (v,))[1]
    close(tidu.hvp(lambda x: f(x, *args[1:]), (args[0],), (v,)), want)


# --- pytrees ---------------------------------------------------


def loss(m):
    def f(params, batch):
        h = m.tanh(params["w"] @ batch[0] + params["b"])
        return m.sum((h - batch[1]) ** 2) + 0.1 * m.sum(params["w"] ** 2)

    return f


PARAMS = {"w": A34, "b": vec(3)}
BATCH = (vec(4), vec(3))


def test_grad_of_dict_and_tuple_args():
    close(tidu.grad(loss(tnp))(PARAMS, BATCH), jax.jit(jax.grad(loss(jnp)))(PARAMS, BATCH))
    close(
        tidu.grad(loss(tnp), argnums=(0, 1))(PARAMS, BATCH),
        jax.jit(jax.grad(loss(jnp), argnums=(0, 1)))(PARAMS, BATCH),
    )


def test_pytree_outputs_jacobians_and_vjp():
    def f(m):
        return lambda p: {"a": m.sin(p[0]) * p[1], "s": (m.sum(p[0] ** 2), p[1] * 2.0)}

    p = (vec(3), 0.5)
    for which in ("jacfwd", "jacrev"):
        close(getattr(tidu, which)(f(tnp))(p), jax.jit(getattr(jax, which)(f(jnp)))(p))
    out, pb = tidu.vjp(f(tnp), p)
    close(out, jax.jit(f(jnp))(p))
    ct = {"a": vec(3), "s": (1.5, -2.0)}
    close(pb(ct), jax.jit(lambda p, c: jax.vjp(f(jnp), p)[1](c))(p, ct))
    tangent = (vec(3), 0.25)
    close(tidu.jvp(f(tnp), (p,), (tangent,)), jax.jit(jax.jvp, static_argnums=0)(f(jnp), (p,), (tangent,)))


def test_cotangents_of_shared_leaves_add():
    def f(m):
        return lambda x: (m.sin(x), x * 3.0, {"k": m.sum(x)})

    x = vec(3)
    _, pb = tidu.vjp(f(tnp), x)
    _, jpb = jax.vjp(f(jnp), x)
    ct = (vec(3), vec(3), {"k": 2.0})
    close(pb(ct), jpb(ct))


def test_has_aux():
    def f(m):
        return lambda x: (m.sum(x**2), {"norm": m.sqrt(m.sum(x**2))})

    x = vec(3)
    close(tidu.grad(f(tnp), has_aux=True)(x), jax.jit(jax.grad(f(jnp), has_aux=True))(x))
    close(tidu.value_and_grad(f(tnp), has_aux=True)(x), jax.jit(jax.value_and_grad(f(jnp), has_aux=True))(x))


# --- nesting ---------------------------------------------------


def test_closure_over_outer_tracer():
    def f(m, g):
        return lambda x: g(lambda y: m.sin(x * y) * y**2)(x * 2.0)

    close(tidu.grad(f(tnp, tidu.grad))(0.3), jax.jit(jax.grad(f(jnp, jax.grad)))(0.3))


def test_nested_jacobian_and_vjp_inside_grad():
    def f(m, jac, vjp):
        def g(x):
            j = jac(lambda v: m.sin(v) * v[0])(x)
            _, pb = vjp(lambda v: m.exp(v) * v[1], x)
            return m.sum(j * j) + m.sum(pb(x)[0])

        return g

    x = vec(3)
    for jt in ("jacfwd", "jacrev"):
        close(
            tidu.grad(f(tnp, getattr(tidu, jt), tidu.vjp))(x),
            jax.jit(jax.grad(f(jnp, getattr(jax, jt), jax.vjp)))(x),
        )


def test_nested_jvp_inside_jacrev():
    def f(m, jvp):
        return lambda x: jvp(lambda v: m.sin(v) ** 2, (x,), (m.cos(x),))[1]

    x = vec(3)
    close(tidu.jacrev(f(tnp, tidu.jvp))(x), jax.jit(jax.jacrev(f(jnp, jax.jvp)))(x))


def test_same_inner_transform_twice_with_different_arguments():
    def f(m, grad):
        g = grad(lambda y: m.sin(y) * y)
        return lambda x: g(x) * g(2.0 * x) + g(x)

    close(tidu.grad(f(tnp, tidu.grad))(0.4), jax.jit(jax.grad(f(jnp, jax.grad)))(0.4))


def test_golden_values():
    close(tidu.value_and_grad(lambda x: x + x)(3.0), (6.0, 2.0))
    close(tidu.grad(lambda x, y: x * y)(2.0, 3.0), 3.0)
    close(
        tidu.grad(lambda x: tnp.sum(tnp.exp(np.array([2.0, 3.0]) * x)))(np.array([1.0, 2.0])),
        np.array([2 * np.exp(2.0), 3 * np.exp(6.0)]),
    )
    close(tidu.hessian(lambda x: (x + x) * x, mode="RoR")(3.0), 4.0)
    close(tidu.grad(lambda x: (x + x) * x)(3.0), 12.0)


# --- the trace cache ---------------------------------------------------


def test_second_call_reuses_the_program_without_tracing():
    calls = []

    def f(x, y):
        calls.append(1)
        return tnp.sum(tnp.sin(x) * y)

    x, y = vec(3), vec(3)
    g = tidu.grad(f, argnums=(0, 1))
    first = g(x, y)
    before, n_calls = tidu.trace_cache_info(), len(calls)
    second = tidu.grad(f, argnums=(0, 1))(x + 1.0, y)  # a new wrapper, same function
    after = tidu.trace_cache_info()
    assert len(calls) == n_calls
    assert after.traces == before.traces and after.hits == before.hits + 1
    close(second, jax.jit(jax.grad(lambda x, y: jnp.sum(jnp.sin(x) * y), argnums=(0, 1)))(x + 1.0, y))
    assert not np.allclose(first[0], second[0])
    tidu.grad(f, argnums=(0, 1))(vec(4), vec(4))  # new shapes: traced again
    assert tidu.trace_cache_info().misses == after.misses + 1
    tidu.grad(f, argnums=(0, 1))(x.astype(np.float32), y)  # new dtype: traced again
    assert tidu.trace_cache_info().misses == after.misses + 2
    tidu.grad(f, argnums=0)(x, y)  # other argnums: traced again
    assert tidu.trace_cache_info().misses == after.misses + 3


def test_cached_calls_take_the_fast_path_and_it_is_invalidated(tmp_path):
    """Repeated calls on exact arrays skip the trace cache's key (Transformed's table of
    fast calls) but still count hits, give fresh outputs, and give way to a new program
    when the semantics or the catalog change or the cache is cleared."""
    calls = []

    def f(x):
        calls.append(1)
        return tnp.sum(tnp.sin(x) * x) + x[0] * x[1]

    x, g = vec(4), tidu.grad(f)
    want = g(x)
    info = tidu.trace_cache_info()
    for _ in range(3):
        got = g(x)
    assert tidu.trace_cache_info().hits == info.hits + 3 and len(calls) == 1
    assert np.array_equal(got, want) and got is not want and got.flags.writeable
    got[:] = 0.0  # outputs are the caller's: the next call is unaffected
    assert np.array_equal(g(x), want)
    with tidu.rewrite_semantics("real"):
        g(x)
    assert tidu.trace_cache_info().misses == info.misses + 1
    rules = tmp_path / "twice.rules"
    rules.write_text("primitive twice(x)\n    type elementwise\n    dtypes float\n    meaning 2 * x\n"
                     "    numpy meaning\n    jvp: 2 * dx\n")
    with tidu.use_rules(str(rules)):
        g(x)
    assert tidu.trace_cache_info().misses == info.misses + 2 and len(calls) == 3
    tidu.clear_trace_cache()
    assert np.array_equal(g(x), want) and len(calls) == 4
    assert tidu.trace_cache_info().misses == 1 and tidu.trace_cache_info().hits == 0
    # other arguments take the general path: converted, traced again, or a clear error
    assert np.array_equal(g(x.astype(">f8")), want) and len(calls) == 4
    close(tidu.grad(lambda a, b: tnp.sin(a) * b)(0.5, 2.0), 2.0 * np.cos(0.5))
    with pytest.raises(TypeError, match="argument x: unsupported dtype str"):
        g(np.array(["a", "b", "c", "d"]))
    assert g(vec(5)).shape == (5,) and len(calls) == 5


@pytest.mark.parametrize(
    "make",
    [
        lambda f: tidu.jacfwd(f),
        lambda f: tidu.jacrev(f),
        lambda f: tidu.hessian(f, mode="RoF"),
        lambda f: tidu.jacfwd(tidu.jacrev(f)),
    ],
)
def test_cache_reuse_for_every_transform(make):
    calls = []

    def f(x):
        calls.append(1)
        return tnp.sin(x) * x[0]

    x = vec(3)
    make(f)(x)
    n, info = len(calls), tidu.trace_cache_info()
    make(f)(x * 2)
    assert len(calls) == n and tidu.trace_cache_info().traces == info.traces


def test_cache_reuse_for_jvp_and_vjp():
    calls = []

    def f(p):
        calls.append(1)
        return {"y": tnp.exp(p["x"]) * p["s"]}

    p = {"x": vec(3), "s": 2.0}
    tidu.jvp(f, (p,), (p,))
    out, pb = tidu.vjp(f, p)
    pb({"y": np.ones(3)})
    n = len(calls)
    tidu.jvp(f, (p,), (p,))
    out, pb = tidu.vjp(f, p)
    close(pb({"y": np.ones(3)}), ({"x": np.exp(p["x"]) * 2.0, "s": np.sum(np.exp(p["x"]))},))
    assert len(calls) == n


def test_same_call_gives_identical_stablehlo():
    f = tidu.hessian(SCALAR_FUNCTIONS["mlp"][0](tnp), mode="FoR")
    args = SCALAR_FUNCTIONS["mlp"][1]
    a = tidu.to_stablehlo(f, *args)
    b = tidu.to_stablehlo(f, *args)
    assert a == b and "func.func public @main" in a


def test_pullback_called_inside_an_inner_transform():
    def f(m, vjp, grad):
        def g(x):
            out, pb = vjp(m.sin, x * x)
            return m.sum(grad(lambda y: m.sum(pb(y * x)[0] * y))(x) * out)

        return g

    x = np.array([0.3, 0.5])
    close(tidu.grad(f(tnp, tidu.vjp, tidu.grad))(x), jax.jit(jax.grad(f(jnp, jax.vjp, jax.grad)))(x))
    close(tidu.jit(f(tnp, tidu.vjp, tidu.grad))(x), f(jnp, jax.vjp, jax.grad)(x))


def test_closure_over_outer_tracer_in_jacobians():
    def f(m, jac):
        return lambda x: m.sum(jac(lambda y: m.sin(x * y) * x[0])(x * 0.5) ** 2)

    x = vec(3)
    for which in ("jacfwd", "jacrev"):
        close(tidu.grad(f(tnp, getattr(tidu, which)))(x), jax.jit(jax.grad(f(jnp, getattr(jax, which))))(x))


ONE_SCALAR = ["poly", "exp_ax"]


@pytest.mark.parametrize("name", ONE_SCALAR)
def test_grad_of_one_real_scalar_is_one_jvp(name):
    """With a single real scalar to differentiate, grad is taken in forward mode: its
    graph is the JVP's with tangent 1 (no transpose), its values JAX's reverse mode's."""
    f, jf, args = both(SCALAR_FUNCTIONS[name])

    def by_jvp(x):
        return tidu.jvp(f, (x,), (1.0,))[1]

    graph = tidu.make_graph(tidu.grad(f))(*args).graph
    assert graph.nodes == tidu.make_graph(by_jvp)(*args).graph.nodes
    close(tidu.grad(f)(*args), jax.jit(jax.grad(jf))(*args))
    close(tidu.grad(tidu.grad(f))(*args), jax.jit(jax.grad(jax.grad(jf)))(*args))
    close(tidu.jacrev(f)(*args), jax.jit(jax.grad(jf))(*args))  # reverse mode, explicitly


def test_grad_of_one_scalar_falls_back_to_reverse_mode():
    """Forward mode does not apply to a custom_vjp function (no JVP) nor to an argument
    of another dtype than the output's: grad then transposes, with JAX's values."""
    @tidu.custom_vjp
    def clip_grad(x):
        return x

    clip_grad.defvjp(lambda x: (x, None), lambda _, g: (tnp.clip(g, -1.0, 1.0),))

    @jax.custom_vjp
    def jclip_grad(x):
        return x

    jclip_grad.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -1.0, 1.0),))
    for x in (0.3, 2.0):
        close(tidu.grad(lambda x: 5.0 * clip_grad(x * x))(x), jax.jit(jax.grad(lambda x: 5.0 * jclip_grad(x * x)))(x))
        close(tidu.grad(tidu.grad(lambda x: 5.0 * clip_grad(x * x)))(x),
              jax.jit(jax.grad(jax.grad(lambda x: 5.0 * jclip_grad(x * x))))(x))
    x32 = np.float32(0.7)
    g = tidu.grad(lambda x: tnp.sin(tnp.astype(x, "float64")) * 2.0)(x32)
    assert g.dtype == np.float32
    close(g, np.float32(2.0 * np.cos(0.7)), rtol=1e-6)


def test_one_element_jacobian_blocks_are_not_batched():
    """A leaf (jacfwd) or output (jacrev) of one element is seeded with a constant one,
    without a batch axis: the graph is the JVP's or the VJP's itself, and blocks of other
    sizes beside it are still batched, all with JAX's values."""
    f, jf, args = both(SCALAR_FUNCTIONS["poly"])
    fwd = tidu.make_graph(tidu.jacfwd(f))(*args).graph
    assert fwd.nodes == tidu.make_graph(lambda x: tidu.jvp(f, (x,), (1.0,))[1])(*args).graph.nodes
    rev = tidu.make_graph(tidu.jacrev(f))(*args).graph
    assert rev.nodes == tidu.make_graph(lambda x: tidu.vjp(f, x)[1](1.0)[0])(*args).graph.nodes
    from tidu.ad import batching

    def no_batch(*args, **kwargs):
        raise AssertionError("a one-element block went through tidu.ad.batching")

    with pytest.MonkeyPatch.context() as mp:  # built afresh, without a batch
        mp.setattr(batching, "batch", no_batch)
        tidu.clear_trace_cache()
        close(tidu.jacfwd(f)(*args), jax.jit(jax.jacfwd(jf))(*args))
        close(tidu.jacrev(f)(*args), jax.jit(jax.jacrev(jf))(*args))
    a, b = np.array([2.0]), np.array([1.0, -3.0])

    def mixed(m):
        return lambda a, b: (m.sum(m.sin(a * b)), a * m.exp(b), m.reshape(a * a, ()))

    for which, jwhich in ((tidu.jacfwd, jax.jacfwd), (tidu.jacrev, jax.jacrev)):
        close(which(mixed(tnp), argnums=(0, 1))(a, b), jax.jit(jwhich(mixed(jnp), argnums=(0, 1)))(a, b))


def test_nested_grads_of_a_scalar_share_their_values():
    """Forward-mode gradients seeded with the constant one: n nested grads build a graph
    that grows about quadratically, not geometrically, and give the closed form."""
    g = lambda x: tnp.sin(x) * tnp.exp(x)  # noqa: E731
    for n in range(1, 29):
        g = tidu.grad(g)
        if n in (12, 28):  # the 12th built 27,677 values before levels shared them, now 846
            with tidu.resource_limits(graph_values=1_000 if n == 12 else 20_000):
                got = g(0.3)
            want = 2 ** (n / 2) * np.exp(0.3) * np.sin(0.3 + n * np.pi / 4)
            close(got, want, rtol=1e-9)


_F2 = lambda m: lambda z, w: m.sin(z * w) * m.exp(z) + z ** 3 / (1.0 + w * w)  # noqa: E731
NESTED_GRADS = {
    "plain": lambda g, m: g(g(lambda x: _F2(m)(x, 0.7))),
    "closure": lambda g, m: g(lambda x: g(lambda z: _F2(m)(z, x))(x)),
    "other argument": lambda g, m: g(lambda x: g(_F2(m), argnums=0)(x, x * x)),
    "bound elsewhere": lambda g, m: g(lambda x: g(lambda z: _F2(m)(z, 0.3))(x * x)),
    "three levels, the innermost closing over the outermost":
        lambda g, m: g(lambda x: g(lambda y: g(lambda z: _F2(m)(z, x * y))(y))(x)),
}


@pytest.mark.parametrize("name", sorted(NESTED_GRADS))
def test_nested_forward_grads_reuse_inner_tangents_only_where_exact(name, monkeypatch):
    """An inner forward-mode gradient's tangents are reused by the gradient around it only
    when its values depend on the outer gradient's input alone: closures over outer
    values, other arguments, and inputs bound to other values are differentiated anew.
    Each case against JAX; the graph is the one built without sharing."""
    from tidu.transforms import nested

    make = NESTED_GRADS[name]
    close(make(tidu.grad, tnp)(0.4), jax.jit(make(jax.grad, jnp))(0.4))
    shared = tidu.make_graph(make(tidu.grad, tnp))(0.4).graph.listing()
    monkeypatch.setattr(nested, "_shares_tangents", lambda lvl, view: False)
    assert tidu.make_graph(make(tidu.grad, tnp))(0.4).graph.listing() == shared
