"""tidu.lax.reduce_window and reduce (tidu.lax_windows) against jax.lax: values for add,
mul, max and min (jax.lax's, tidu.lax's and NumPy-style functions, other computations and
pytrees folded) with 'VALID', 'SAME' and explicit padding, strides and dilations of any
rank; gradients, JVPs, Hessians and vmap; the XLA back end; the graph's size; the
derivative at a tie of max (shared, JAX's goes to one entry: the totals agree); errors."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp
from tidu import lax

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

RNG = np.random.default_rng(7)

# (shape, window_dimensions, window_strides, padding, base_dilation, window_dilation)
CASES = [
    ((7,), (3,), (1,), "VALID", None, None),
    ((7,), (3,), (2,), "SAME", None, None),
    ((6,), (4,), (1,), "SAME_LOWER", None, None),
    ((8,), (2,), (2,), [(1, 2)], (2,), None),
    ((9,), (3,), (2,), "SAME", None, (2,)),
    ((5, 6), (2, 3), (1, 2), "SAME", (1, 2), (2, 1)),
    ((4, 5, 6), (2, 2, 3), (2, 1, 2), [(0, 1), (-1, 1), (2, 0)], None, None),
    ((2, 6, 6, 3), (1, 3, 3, 1), (1, 2, 2, 1), "SAME", None, None),
]
IDS = [f"{len(c[0])}d-{i}" for i, c in enumerate(CASES)]
INPUTS = [RNG.normal(size=c[0]) for c in CASES]

# (tidu computation, jax computation, init)
MONOIDS = {
    "add": (lax.add, jax.lax.add, 0.0),
    "max": (lax.max, jax.lax.max, -np.inf),
    "min": (lax.min, jax.lax.min, np.inf),
    "mul": (lax.mul, jax.lax.mul, 1.0),
    "add_init": (lax.add, jax.lax.add, 1.5),
    "max_init": (lax.max, jax.lax.max, 0.3),
    "tnp_maximum": (tnp.maximum, jax.lax.max, -np.inf),
    "tnp_multiply": (tnp.multiply, jax.lax.mul, 1.0),
    "jax_add": (jax.lax.add, jax.lax.add, 0.0),
    "operator_add": (operator.add, jax.lax.add, 0.0),
    "lambda_min": (lambda a, b: tnp.minimum(a, b), jax.lax.min, np.inf),  # folded, not recognized
}


def close(a, b, rtol=1e-12):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-13)


def windowed(L, comp, init, case):
    _, w, s, p, bd, wd = case
    return lambda x: L.reduce_window(x, init, comp, w, s, p, bd, wd)


@pytest.mark.parametrize("name", list(MONOIDS))
@pytest.mark.parametrize("i", range(len(CASES)), ids=IDS)
def test_values_eager_and_traced_equal_jax(name, i):
    comp, jcomp, init = MONOIDS[name]
    case, x = CASES[i], INPUTS[i]
    want = windowed(jax.lax, jcomp, init, case)(x)
    close(windowed(lax, comp, init, case)(x), want)
    if name in ("add", "max_init", "mul", "lambda_min"):
        close(tidu.jit(windowed(lax, comp, init, case))(x), want)


def _jax_jacobian(f, x):
    """Columns by jax.jvp: JAX's reverse mode (and jacfwd) of reduce_window fails for
    mul, window dilation of max and init values other than the identity."""
    cols = [jax.jvp(f, (x,), (e.reshape(x.shape),))[1] for e in np.eye(x.size)]
    return np.stack(cols, axis=-1).reshape(np.shape(cols[0]) + x.shape)


@pytest.mark.parametrize("name", ["add", "max", "min", "mul", "add_init", "max_init", "lambda_min"])
@pytest.mark.parametrize("i", [1, 3, 4, 5], ids=[IDS[i] for i in (1, 3, 4, 5)])
def test_jacobians_equal_jax_jvps(name, i):
    comp, jcomp, init = MONOIDS[name]
    case, x = CASES[i], INPUTS[i]
    want = _jax_jacobian(windowed(jax.lax, jcomp, init, case), x)
    close(tidu.jacrev(windowed(lax, comp, init, case))(x), want)
    close(tidu.jacfwd(windowed(lax, comp, init, case))(x), want)


def _pool(L, N):
    def f(y):
        m = L.reduce_window(y, -np.inf, L.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
        a = L.reduce_window(y, 0.0, L.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0
        return N.sum(N.tanh(m) ** 2) + N.sum(N.sin(a) * a)
    return f


def test_max_and_avg_pool_gradient_xla_and_vjp_equal_jax():
    y = INPUTS[7]
    want = jax.grad(_pool(jax.lax, jnp))(y)
    close(tidu.grad(_pool(lax, tnp))(y), want)
    program = tidu.make_graph(tidu.grad(_pool(lax, tnp)))(y).program
    close(program.run([y], backend="xla")[0], want, 1e-11)
    close(tidu.jit(tidu.grad(_pool(lax, tnp)), device="cpu")(y), want, 1e-11)
    ct = RNG.normal(size=(2, 3, 3, 3))
    pool = lambda L: lambda y: L.reduce_window(y, -np.inf, L.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")  # noqa: E731
    close(tidu.vjp(pool(lax), y)[1](ct)[0], jax.vjp(pool(jax.lax), y)[1](ct)[0])
    t = RNG.normal(size=y.shape)
    close(tidu.jvp(pool(lax), (y,), (t,))[1], jax.jvp(pool(jax.lax), (y,), (t,))[1])


def test_hessian_and_vmap_equal_jax():
    def f(L, N):
        def products(z):  # JAX cannot differentiate a windowed product in reverse mode: written out
            if L is lax:
                return L.reduce_window(z, 1.0, L.mul, (2,), (2,), [(1, 0)])
            return jnp.prod(jnp.concatenate([jnp.ones(1), z])[:6].reshape(3, 2), axis=1)
        return lambda z: (N.sum(N.sin(L.reduce_window(z * z, 0.0, L.add, (3,), (1,), "SAME")))
                          + N.sum(L.reduce_window(N.exp(z), -np.inf, L.max, (2,), (1,), "VALID") ** 3)
                          + N.sum(products(z) ** 2))
    z = np.array([0.3, -1.1, 0.8, 1.7, -0.4, 0.2])
    close(tidu.hessian(f(lax, tnp))(z), jax.hessian(f(jax.lax, jnp))(z), 1e-10)
    g = lambda L: lambda z: L.reduce_window(z, 0.0, L.add, (2,), (1,), [(1, 0)])  # noqa: E731
    zz = RNG.normal(size=(4, 6))
    close(tidu.vmap(g(lax))(zz), jax.vmap(g(jax.lax))(zz))
    close(tidu.vmap(tidu.grad(lambda z: tnp.sum(g(lax)(z) ** 2)))(zz),
          jax.vmap(jax.grad(lambda z: jnp.sum(g(jax.lax)(z) ** 2)))(zz))


def test_graph_size_does_not_grow_with_the_output():
    def pool(y):
        return tnp.sum(lax.reduce_window(y, -np.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"))
    sizes = {n: len(tidu.make_graph(tidu.grad(pool))(np.ones((2, n, n, 3))).program.instructions) for n in (8, 64)}
    assert sizes[8] == sizes[64] < 80, sizes


def test_tie_of_max_shares_the_derivative_and_totals_agree_with_jax():
    # windows [pad, 1, 3], [1, 3, 3], [3, 3, 2], [3, 2, 0], [2, 0, pad]: two windows hold a tie
    x = np.array([1.0, 3.0, 3.0, 2.0, 0.0])
    pool = lambda L: lambda x: L.reduce_window(x, -np.inf, L.max, (3,), (1,), [(1, 1)])  # noqa: E731
    got = tidu.grad(lambda x: tnp.sum(pool(lax)(x)))(x)
    want = jax.grad(lambda x: jnp.sum(pool(jax.lax)(x)))(x)
    close(want, np.array([0.0, 3.0, 1.0, 1.0, 0.0]))  # JAX gives each tie to its first entry
    close(got, np.array([0.0, 2.0, 2.0, 1.0, 0.0]))  # tidu shares it
    close(got.sum(), want.sum())
    img = np.ones((4, 4))  # every window a tie
    pool2 = lambda L: lambda x: L.reduce_window(x, -np.inf, L.max, (2, 2), (2, 2), "VALID")  # noqa: E731
    got = tidu.grad(lambda x: tnp.sum(pool2(lax)(x)))(img)
    close(got, np.full((4, 4), 0.25))
    close(got.sum(), jax.grad(lambda x: jnp.sum(pool2(jax.lax)(x)))(img).sum())


def test_integer_bool_and_float32_operands():
    i = np.array([[3, -7, 2, 9], [0, 5, -1, 4]], np.int32)
    for comp, init in ((jax.lax.add, np.int32(0)), (jax.lax.max, np.int32(np.iinfo(np.int32).min)),
                       (jax.lax.min, np.int32(2)), (jax.lax.mul, np.int32(1))):
        want = jax.lax.reduce_window(i, init, comp, (2, 2), (1, 1), "SAME")
        close(lax.reduce_window(i, init, comp, (2, 2), (1, 1), "SAME"), want)
    b = np.array([True, False, False, True, False])
    for comp, init in ((jax.lax.max, False), (jax.lax.min, True)):
        close(lax.reduce_window(b, init, comp, (2,), (1,), "SAME"), jax.lax.reduce_window(b, init, comp, (2,), (1,),
                                                                                           "SAME"))
    f32 = RNG.normal(size=(5,)).astype(np.float32)  # a Python float init is weakly typed, as in JAX
    close(lax.reduce_window(f32, -np.inf, lax.max, (2,), (1,), "VALID"),
          np.asarray(jax.lax.reduce_window(f32, -np.inf, jax.lax.max, (2,), (1,), "VALID")))


def test_pytree_operands_and_an_empty_output():
    x, y = INPUTS[0], INPUTS[0] ** 2

    def both(L):
        return lambda x, y: L.reduce_window((x, y), (0.0, -np.inf), lambda a, b: (a[0] + b[0], L.max(a[1], b[1])),
                                            (3,), (2,), "SAME")
    close(lax.reduce_window(x, 0.0, lax.add, (8,), (1,), "VALID"),
          jax.lax.reduce_window(x, 0.0, jax.lax.add, (8,), (1,), "VALID"))
    for g, w in zip(both(lax)(x, y), both(jax.lax)(x, y), strict=True):
        close(g, w)


def test_traced_init_value_is_differentiated():
    x = np.array([1.0, 3.0, 2.0])
    f = lambda c: tnp.sum(lax.reduce_window(x, c, lax.max, (2,), (1,), "VALID"))  # noqa: E731
    close(tidu.grad(f)(2.5), np.float64(0.0))  # max(2.5, [3, 3]): the init is no window's max
    close(tidu.grad(f)(3.5), np.float64(2.0))
    close(tidu.grad(lambda c: tnp.sum(lax.reduce_window(x, c, lax.add, (2,), (1,), "SAME")))(0.0), np.float64(3.0))


@pytest.mark.parametrize("name", ["add", "max", "min", "mul"])
def test_reduce_equals_jax(name):
    comp, jcomp, init = MONOIDS[name]
    x = INPUTS[6]
    for dims in ((0,), (2, 1), (0, 1, 2), ()):
        close(lax.reduce(x, init, comp, dims), jax.lax.reduce(x, init, jcomp, dims))
    f = lambda L: lambda x: L.reduce(x, init, comp if L is lax else jcomp, (1,))  # noqa: E731
    close(tidu.jacrev(f(lax))(x[0]), jax.jacfwd(f(jax.lax))(x[0]))
    got = lax.reduce((x, x[0]), (init, init), comp, (1,))
    close(got[1], jax.lax.reduce(x[0], init, jcomp, (1,)))
    close(lax.reduce(x, 2.0, lax.add, (0,)), x.sum(0) + 2.0)


@pytest.mark.parametrize("call, message", [
    (lambda: lax.reduce(np.ones(3), 0.0, lambda a, b: a + b, (0,)), "computation '<lambda>' is not supported"),
    (lambda: lax.reduce_window(np.ones(3), 0.0, lax.add, (2, 2), (1,), "VALID"), "window_dimensions has 2 entries"),
    (lambda: lax.reduce_window(np.ones(3), 0.0, lax.add, (2,), (1,), "FULL"), "padding 'FULL' is not"),
    (lambda: lax.reduce_window(np.ones(3), 0.0, lax.add, (0,), (1,), "VALID"), "window_dimensions[0] is 0"),
    (lambda: lax.reduce_window(np.ones(3), np.float32(0), lax.add, (2,), (1,), "VALID"), "init_value has dtype"),
    (lambda: lax.reduce_window(np.ones(3), 0.0, lax.add, (2,), (1,), [(1, 1), (0, 0)]), "padding must be"),
    (lambda: lax.reduce_window(np.ones(3), 0.0, lax.add, (2,), (1,), [(-3, -1)]), "crops axis 0"),
    (lambda: lax.reduce_window(np.ones(3, int), 0.5, lax.add, (2,), (1,), "VALID"), "Python float"),
    (lambda: tidu.jit(lambda x: lax.reduce_window(x, -np.inf, jnp.logaddexp, (2,), (1,), "VALID"))(np.ones(3)),
     "called a JAX function on a tidu traced value"),
])
def test_bad_arguments_get_one_line_errors(call, message):
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    assert message in str(info.value) and "\n" not in str(info.value)


# --- special functions, optimization_barrier, reduce_precision, broadcast_shapes, conv_transpose --

A, X = np.array([0.5, 1.5, 3.0]), np.array([0.7, 2.0, 1.1])
B, U = np.array([2.0, 0.8, 1.3]), np.array([0.2, 0.6, 0.9])


@pytest.mark.parametrize("name, args, argnums", [
    ("igamma", (A, X), (0, 1)), ("igammac", (A, X), (0, 1)), ("betainc", (A, B, U), (2,)),
    ("polygamma", (np.array([0.0, 1.0, 3.0]), X), (1,)), ("zeta", (B + 1.5, X), ()),
    ("bessel_i0e", (X - 1.0,), (0,)), ("bessel_i1e", (X - 1.0,), (0,)),
])
def test_special_functions_equal_jax(name, args, argnums):
    f, fj = getattr(lax, name), getattr(jax.lax, name)
    close(f(*args), fj(*args), 1e-11)
    for k in argnums:
        close(tidu.grad(lambda *z: tnp.sum(f(*z)), argnums=k)(*args),
              jax.grad(lambda *z: jnp.sum(fj(*z)), argnums=k)(*args), 1e-8)


def test_zeta_derivative_in_q_and_special_function_errors():
    s, q = B + 1.5, X  # JAX has no derivative of zeta: d/dq zeta(s, q) = -s zeta(s + 1, q)
    close(tidu.grad(lambda q: tnp.sum(lax.zeta(s, q)))(q), -s * np.asarray(jax.lax.zeta(s + 1, q)), 1e-10)
    with pytest.raises(TypeError, match="igamma: the operands have dtypes a float64, x float32"):
        lax.igamma(A, X.astype(np.float32))
    m = np.array([0.5, -1.0, 2.0])  # nan where m is not a non-negative integer, as JAX's
    want = np.asarray(jax.lax.polygamma(m, np.full(3, 1.5)))
    close(lax.polygamma(m, np.full(3, 1.5)), want)
    close(tidu.jit(lax.polygamma)(m, np.full(3, 1.5)), want)


def test_optimization_barrier_is_the_identity_on_pytrees():
    tree = (A, {"b": X})
    assert lax.optimization_barrier(tree)[1]["b"] is X
    close(tidu.grad(lambda x: tnp.sum(lax.optimization_barrier((x * 2.0, x))[0]))(X), np.full(3, 2.0))


SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 1 / 3, np.pi, 65504.0, 65520.0, 7e4, -7e4, 1e-5, 6.1e-5, 6.2e-5, 5.96e-8,
                    1e-8, np.inf, -np.inf, np.nan, 1e300, -1e-300, 2.0 ** -126, 3.4e38, 3.5e38, 1.00048828125,
                    1.000244140625, 1.000732421875])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_reduce_precision_equals_jax_bit_for_bit(dtype):
    x = SPECIAL.astype(dtype) if dtype == "float64" else np.where(np.abs(SPECIAL) > 3e38, np.inf, SPECIAL).astype(dtype)
    for e, m in ((5, 10), (8, 7), (8, 23), (11, 52), (4, 3), (2, 1), (8, 0), (1, 3)):
        want = np.asarray(jax.lax.reduce_precision(jnp.asarray(x), e, m))
        for got in (lax.reduce_precision(x, e, m), tidu.jit(lambda x, e=e, m=m: lax.reduce_precision(x, e, m))(x)):
            got = np.asarray(got)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            ok = ~np.isnan(want)
            np.testing.assert_array_equal(got[ok].view(f"u{got.itemsize}"), want[ok].view(f"u{want.itemsize}"))
    program = tidu.make_graph(lambda x: lax.reduce_precision(x, 5, 10))(x).program
    np.testing.assert_array_equal(program.run([x], backend="xla")[0], np.asarray(jax.lax.reduce_precision(x, 5, 10)))


def test_reduce_precision_has_derivative_one():
    x = np.array([0.3, 1.7, -2.2, 1e4])
    close(tidu.grad(lambda x: tnp.sum(tnp.sin(lax.reduce_precision(x, 5, 10))))(x),
          np.cos(np.asarray(jax.lax.reduce_precision(x, 5, 10))))
    close(tidu.jvp(lambda x: lax.reduce_precision(x, 8, 7), (x,), (np.ones(4),))[1], np.ones(4))


def test_broadcast_shapes():
    assert lax.broadcast_shapes((2, 1), (3,)) == jax.lax.broadcast_shapes((2, 1), (3,)) == (2, 3)
    assert lax.broadcast_shapes((4, 1, 5), (1, 3, 1), ()) == (4, 3, 5)
    with pytest.raises(ValueError, match=r"broadcast_shapes: the shapes \(2,\), \(3,\) do not broadcast"):
        lax.broadcast_shapes((2,), (3,))


@pytest.mark.parametrize("lshape, rshape, strides, padding, rhs_dilation, dn, transpose_kernel, consistent", [
    ((2, 5, 3), (3, 3, 4), (2,), "SAME", None, None, False, False),
    ((2, 5, 3), (3, 4, 3), (2,), "VALID", (2,), None, True, False),
    ((1, 4, 5, 2), (3, 2, 3, 2), (2, 1), "SAME", None, None, True, False),
    ((1, 4, 5, 2), (3, 2, 2, 3), (2, 3), [(1, 2), (0, 1)], (1, 2), None, False, False),
    ((1, 4, 5, 2), (3, 2, 2, 3), (2, 3), [(1, 2), (0, 1)], None, None, False, True),
    ((1, 2, 4, 5), (3, 2, 2, 3), (2, 2), "SAME", None, ("NCHW", "OIHW", "NCHW"), False, False),
])
def test_conv_transpose_values_and_gradients_equal_jax(lshape, rshape, strides, padding, rhs_dilation, dn,
                                                       transpose_kernel, consistent):
    lhs, rhs = RNG.normal(size=lshape), RNG.normal(size=rshape)

    def f(L, N):
        return lambda l, r: N.sum(N.sin(L.conv_transpose(l, r, strides, padding, rhs_dilation, dn, transpose_kernel,
                                                          use_consistent_padding=consistent)))
    close(lax.conv_transpose(lhs, rhs, strides, padding, rhs_dilation, dn, transpose_kernel,
                             use_consistent_padding=consistent),
          jax.lax.conv_transpose(lhs, rhs, strides, padding, rhs_dilation, dn, transpose_kernel,
                                 use_consistent_padding=consistent), 1e-11)
    for got, want in zip(tidu.grad(f(lax, tnp), argnums=(0, 1))(lhs, rhs),
                         jax.grad(f(jax.lax, jnp), argnums=(0, 1))(lhs, rhs), strict=True):
        close(got, want, 1e-10)


@pytest.mark.parametrize("name", ["reduce_max", "reduce_min"])
def test_empty_reductions_of_bools_are_the_identity_as_jax(name):
    """reduce_max over an empty axis of bools gave True (and reduce_min False), not JAX's
    identities False and True."""
    x = np.zeros((0, 2), bool)
    want = np.asarray(getattr(jax.lax, name)(x, (0,)))
    np.testing.assert_array_equal(getattr(lax, name)(x, (0,)), want)
    np.testing.assert_array_equal(tidu.jit(lambda a: getattr(lax, name)(a, (0,)))(x), want)
