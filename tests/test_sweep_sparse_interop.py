"""Outside sweep of sparse derivatives and of JAX interop: sparse Jacobians and Hessians of
generated functions against JAX (values, and a pattern that holds every nonzero), at
points where partials vanish or tie, in float32, with non-finite entries; bad input as
one-line errors; tidu.to_jax under JAX's transforms, with keyword and Python-number
arguments and control flow; Program.run on XLA with wrong inputs."""

from __future__ import annotations

import functools

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402
from tidu import lax as tlax  # noqa: E402

LAX = {tnp: tlax, jnp: jax.lax}

# scalar functions of 8 variables, written once for tidu.numpy and jax.numpy
SCALAR = {
    "stencil": lambda m, x: m.sum((x[1:] - x[:-1] ** 2) ** 2) + m.sum(m.sin(x[::2])),
    "where": lambda m, x: m.sum(m.where(x > 0.5, x[::-1] * x, x ** 3)),
    "maximum": lambda m, x: m.sum(m.maximum(x[1:], x[:-1]) ** 2),
    "abs": lambda m, x: m.sum(m.abs(x[1:] * x[:-1] - 0.5) ** 3),
    "const_index": lambda m, x: x[m.array([0, 3, 3])] @ x[m.array([1, 2, 4])] + x[5] ** 4,
    "traced_index": lambda m, x: m.sum(x[m.argmax(x[:3])] * x[3:]),
    "dynamic_slice": lambda m, x: m.sum(LAX[m].dynamic_slice(x, (m.argmin(x[:4]),), (3,)) ** 2 * x[5]),
    "at_add": lambda m, x: m.sum(x.at[m.array([1, 1, 3])].add(x[:3] ** 2) ** 2),
    "prod_max": lambda m, x: m.prod(x[:3]) + m.max(x[:4] * x[4:8]) + m.min(x ** 2),
    "cumsum_sort": lambda m, x: m.sum(m.cumsum(x) ** 2) + m.sum(m.sort(x)[:3] ** 2 * m.arange(3)),
    "matrix": lambda m, x: m.sum(m.sin(x.reshape(2, -1).T @ x.reshape(2, -1))),
    "scan": lambda m, x: (lambda c, ys: c + m.sum(ys ** 2))(
        *LAX[m].scan(lambda c, xi: (c * xi + xi ** 2, c), x[0], x[1:])),
    "fori": lambda m, x: LAX[m].fori_loop(0, 3, lambda i, c: c * x[i] + x[i + 4] ** 2, x[7]),
    "cond": lambda m, x: LAX[m].cond(x[0] > 0.5, lambda y: m.sum(y[:4] ** 2 * y[4:]),
                                     lambda y: m.sum(y[1:] * y[:-1]), x),
}

POINTS = {
    "random": np.random.default_rng(0).uniform(0.1, 0.9, 8),
    "zeros": np.zeros(8),
    "ties": np.full(8, 0.5),
}


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("name", SCALAR)
def test_sparse_hessian_of_generated_functions_equals_jax(name, point):
    f = SCALAR[name]
    x = POINTS[point]
    want = np.asarray(jax.hessian(lambda v: f(jnp, v))(x))
    got = tidu.hessian(lambda v: f(tnp, v), sparse=True)(x)
    pattern = tidu.hessian_sparsity(lambda v: f(tnp, v))(x).toarray()
    np.testing.assert_allclose(got.toarray(), want, atol=1e-10)
    assert not ((want != 0) & ~pattern).any()  # the pattern holds every nonzero
    stored = np.zeros_like(pattern)
    stored[got.tocoo().row, got.tocoo().col] = True
    assert (stored == pattern).all()  # exactly the pattern's entries are stored


VECTOR = {
    "stencil2d": lambda m, x: x[1:, 1:] * x[:-1, :-1] - m.sin(x[1:, :-1]),
    "colmax": lambda m, x: m.max(x, axis=0) * x[0],
    "where": lambda m, x: m.where(x > 0.5, x.T, x ** 2),
    "scan_rows": lambda m, x: LAX[m].scan(lambda c, r: (c + r, c * r), x[0], x[1:])[1],
    "sort_rows": lambda m, x: m.sort(x, axis=1) * x[:, :1],
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", ["jacfwd", "jacrev"])
@pytest.mark.parametrize("name", VECTOR)
def test_sparse_jacobians_of_2d_functions_equal_jax(name, kind, dtype):
    f = VECTOR[name]
    for x in (np.random.default_rng(2).uniform(0.1, 0.9, (3, 3)), np.full((3, 3), 0.5)):
        want = np.asarray(jax.jacfwd(lambda v: f(jnp, v))(x)).reshape(-1, 9)
        got = getattr(tidu, kind)(lambda v: f(tnp, v), sparse=True)(x.astype(dtype))
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got.toarray(), want, atol=tol, rtol=tol)


def test_sparse_hessian_keeps_nan_to_its_entries():
    # x ** y at a negative base: nan in the entries of that base and exponent; the dense
    # Hessian spreads it over their rows (0 * nan), the sparse one keeps structural zeros
    x = np.array([-0.5, 0.3, 0.4, -0.2, 0.5, 0.6, 0.7, 1.5])
    got = tidu.hessian(lambda v: tnp.sum(v[:4] ** v[4:]), sparse=True)(x).toarray()
    want = np.asarray(jax.hessian(lambda v: jnp.sum(v[:4] ** v[4:]))(x))
    nan = np.zeros((8, 8), bool)
    for i in (0, 3):
        nan[np.ix_([i, i + 4], [i, i + 4])] = True
    assert (np.isnan(got) == nan).all()
    np.testing.assert_allclose(got[~np.isnan(want)], want[~np.isnan(want)], atol=1e-12)
    assert (got[~nan & np.isnan(want)] == 0).all()


def test_sparse_derivative_of_a_container_argument_is_a_one_line_error():
    # was: "tidu.jvp: tangents have structure (*,), primals have ({'a': *},)"
    with pytest.raises(TypeError, match=r"^tidu.hessian\(sparse=True\): argument d must be one float or complex "
                                        r"array for a sparse derivative, got dict"):
        tidu.hessian(lambda d: tnp.sum(d["a"] ** 2), sparse=True)({"a": np.ones(3)})
    with pytest.raises(TypeError, match=r"argument v must be one float .* got tuple"):
        tidu.jacfwd(lambda v: v[0] * 2, sparse=True)((np.ones(3),))


@pytest.mark.parametrize("kind", ["jacfwd", "jacrev"])
def test_sparse_jacobian_of_an_integer_output_is_a_one_line_error(kind):
    # was (jacfwd): "B must be a numeric array, got dtype [('float0', 'V')]"
    with pytest.raises(TypeError, match=rf"^tidu.{kind}\(sparse=True\): <lambda> returns dtype int64; only float "
                                        "and complex outputs have derivatives"):
        getattr(tidu, kind)(lambda v: (v > 0).astype(np.int64), sparse=True)(np.ones(3))


@pytest.mark.parametrize("kind", ["jacfwd", "jacrev"])
def test_sparse_jacobian_inside_jax_jit_names_to_jax(kind):
    # was JAX's three-line TracerArrayConversionError
    with pytest.raises(TypeError, match=r"^argument v is a JAX tracer: .*tidu.to_jax"):
        jax.jit(getattr(tidu, kind)(lambda v: v ** 3, sparse=True))(np.ones(3))


def test_sparse_derivative_bad_uses_are_one_line_errors():
    x = np.linspace(0.1, 0.9, 4)
    cases = [
        (lambda: tidu.hessian(lambda a, b: tnp.sum(a * b), argnums=(0, 1), sparse=True)(x, x), "an int argnums"),
        (lambda: tidu.jit(lambda v: tidu.hessian(lambda y: tnp.sum(y ** 3), sparse=True)(v))(x),
         "cannot be used inside another transform"),
        (lambda: tidu.vmap(tidu.jacfwd(lambda y: y ** 3, sparse=True))(np.ones((2, 3))),
         "cannot be used inside another transform"),
        (lambda: tidu.hessian(lambda y: tnp.sum(tnp.abs(y) ** 2), sparse=True)(x + 1j), "holomorphic=True"),
        (lambda: tidu.hessian(lambda y: y ** 2, sparse=True)(x), "must return one float or complex scalar"),
        (lambda: tidu.jacfwd(lambda y: (y, y), sparse=True)(x), "returning one array, got 2 output leaves"),
        (lambda: tidu.hessian(lambda y: tnp.sum(y ** 2), sparse=True)(np.arange(3)), "got dtype int64"),
    ]
    for call, message in cases:
        with pytest.raises((TypeError, ValueError), match=message) as info:
            call()
        assert "\n" not in str(info.value)


def f(x):
    return tnp.sum(tnp.sin(x) ** 2 * x)


def f_jax(x):
    return jnp.sum(jnp.sin(x) ** 2 * x)


def test_to_jax_takes_keyword_arguments():
    # was: "<lambda>() got an unexpected keyword argument 'y'" from to_jax's own wrapper
    h = tidu.to_jax(lambda a, y=1.0, *, z=3.0: a * y + z)
    x = jnp.linspace(0.1, 1.0, 5)
    np.testing.assert_allclose(h(x, y=2.0), 2 * x + 3)
    np.testing.assert_allclose(h(x, 2.0, z=1.0), 2 * x + 1)
    np.testing.assert_allclose(jax.jit(h)(x, y=x), x * x + 3)
    np.testing.assert_allclose(jax.vmap(lambda a: h(a, y=a))(jnp.ones((2, 5))), np.full((2, 5), 4.0))
    g = tidu.to_jax(tidu.grad(lambda a, s: tnp.sum(tnp.sin(a)) * s))
    np.testing.assert_allclose(g(x, s=2.0), 2 * np.cos(np.asarray(x)))


def test_to_jax_python_int_needed_static_says_to_bind_it():
    x = jnp.linspace(0.1, 1.0, 5)
    with pytest.raises(tidu.TraceError, match=r"^tidu.to_jax\(<lambda>\): .*the Python int n = 2 .*"
                                              r"functools.partial"):
        jax.jit(tidu.to_jax(lambda a, n: a[:n] * 2), static_argnums=1)(x, 2)
    with pytest.raises(tidu.TraceError, match=r"the Python int d\[.n.\] = 2"):
        tidu.to_jax(lambda a, d: a[:d["n"]])(x, {"n": 2})
    bound = jax.jit(tidu.to_jax(functools.partial(lambda a, n: a[:n] * 2, n=2)))
    np.testing.assert_allclose(bound(x), 2 * x[:2])


def test_to_jax_of_derivatives_under_jit_and_vmap_equals_jax():
    x = jnp.linspace(0.1, 1.0, 5)
    xs = jnp.stack([x, 2 * x], axis=1)
    np.testing.assert_allclose(jax.jit(tidu.to_jax(tidu.hessian(f)))(x), jax.hessian(f_jax)(x), atol=1e-13)
    g = tidu.to_jax(tidu.grad(f))
    np.testing.assert_allclose(jax.vmap(g, in_axes=1, out_axes=1)(xs),
                               jax.vmap(jax.grad(f_jax), in_axes=1, out_axes=1)(xs), atol=1e-13)
    np.testing.assert_allclose(g(x.astype(jnp.float32)), jax.grad(f_jax)(x.astype(jnp.float32)), rtol=1e-6)
    assert g(x.astype(jnp.float32)).dtype == jnp.float32
    both = tidu.to_jax(lambda a, b: (a * 2, tnp.sum(b)))
    out = jax.vmap(both, in_axes=(0, None))(jnp.ones((3, 2)), jnp.arange(4.0))
    assert out[0].shape == (3, 2) and out[1].shape == (3,)
    np.testing.assert_allclose(out[1], 6.0)
    # JAX's own transforms of a to_jax function: refused in one line
    for transform in (lambda h: jax.hessian(h)(x), lambda h: jax.jvp(h, (x,), (x,)),
                      lambda h: jax.linearize(h, x), lambda h: jax.vjp(h, x)[1](1.0)):
        with pytest.raises(TypeError, match=r"^jax cannot differentiate to_jax\(f\)") as info:
            transform(tidu.to_jax(f))
        assert "\n" not in str(info.value)


def control(m):
    def fn(x):
        y = LAX[m].fori_loop(0, 3, lambda i, c: c * 1.1 + x[i], x[3])
        z = LAX[m].while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 0.9 + c[0]), (0, y))[1]
        w = LAX[m].cond(z > 1.0, lambda v: m.sum(v ** 2), lambda v: m.sum(v), x)
        c, ys = LAX[m].scan(lambda c, xi: (c * xi, c + xi), z, x)
        return w + c + m.sum(ys)
    return fn


def test_to_jax_of_control_flow_equals_jax():
    x = jnp.linspace(0.1, 1.0, 5)
    xb = jnp.stack([x, x * 0.3, x * 3])
    np.testing.assert_allclose(jax.jit(tidu.to_jax(control(tnp)))(x), control(jnp)(x), rtol=1e-13)
    np.testing.assert_allclose(jax.vmap(tidu.to_jax(control(tnp)))(xb), jax.vmap(control(jnp))(xb), rtol=1e-13)
    np.testing.assert_allclose(jax.jit(jax.vmap(tidu.to_jax(tidu.jacfwd(control(tnp)))))(xb),
                               jax.vmap(jax.jacfwd(control(jnp)))(xb), rtol=1e-12)


def test_jit_on_the_cpu_device_and_program_run_on_xla_with_wrong_inputs():
    x = np.linspace(0.1, 1.0, 4)
    np.testing.assert_allclose(tidu.jit(tidu.grad(f), device="cpu")(x), jax.grad(f_jax)(x), atol=1e-14)
    assert tidu.jit(f, device="cpu")(x.astype(np.float32)).dtype == np.float32
    with pytest.raises(ValueError, match=r"device='cpu:3': JAX has 1 cpu device"):
        tidu.jit(f, device="cpu:3")(x)
    program = tidu.make_graph(tidu.value_and_grad(lambda a, s: tnp.sum(tnp.sin(a) * s)))(x, 2.0).program
    for _ in range(2):  # repeated, and with other dtypes that convert within their kind
        for inputs in ([x, 2.0], [x.astype(np.float32), np.float64(2.0)], [np.arange(4), 2]):
            value, grad = program.run(inputs, backend="xla")
            a = np.asarray(inputs[0], float)
            np.testing.assert_allclose(value, 2 * np.sin(a).sum(), rtol=1e-6)
            np.testing.assert_allclose(grad, 2 * np.cos(a), rtol=1e-6)
    for inputs, message in (([x + 0j, 2.0], "input a: expected dtype float64, got complex128"),
                            ([np.ones(5), 2.0], r"input a: expected shape \(4,\), got \(5,\)"),
                            ([x, np.ones(3)], r"input s: expected shape \(\), got \(3,\)"),
                            ([x], r"expected 2 input\(s\) \(a, s\), got 1")):
        with pytest.raises(tidu.InputError, match=message):
            program.run(inputs, backend="xla")


def test_sparsity_patterns_take_keyword_arguments():
    # was: "pattern() got an unexpected keyword argument 's'"
    x = np.linspace(0.1, 1.0, 5)

    def g(v, s=1.0):
        return tnp.sum(v[1:] ** 3 * v[:-1] * s)

    pattern = tidu.hessian_sparsity(g)(x, s=2.0).toarray()
    want = np.asarray(jax.hessian(lambda v: jnp.sum(v[1:] ** 3 * v[:-1] * 2.0))(x)) != 0
    assert (pattern == want).all()
    jac = tidu.jacobian_sparsity(lambda a, v, s=1.0: v[::-1] * s * a, argnums=-1)(x, x, s=2.0).toarray()
    assert (jac == np.eye(5, dtype=bool)[::-1]).all()


def test_sparse_jacobians_and_hessians_pass_keyword_arguments_through():
    # (the sparse call took positional arguments only)
    def f(x, s=1.0):
        return tnp.sum(x ** 3) * s
    np.testing.assert_array_equal(tidu.hessian(f, sparse=True)(np.ones(3), s=2.0).toarray(), 12.0 * np.eye(3))
    np.testing.assert_array_equal(tidu.jacfwd(lambda x, s=1.0: x ** 2 * s, sparse=True)(np.ones(3), s=3.0).toarray(),
                                  6.0 * np.eye(3))


def test_a_sparse_hessian_inside_jax_jit_names_the_jax_tracer():
    # (np.asarray of the JAX tracer raised JAX's three-line error first)
    with pytest.raises(TypeError, match="argument x is a JAX tracer"):
        jax.jit(tidu.hessian(lambda x: tnp.sum(x ** 3), sparse=True))(np.ones(3))
