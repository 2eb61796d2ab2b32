"""An outside tester's sweep of tidu.lax's control flow against jax.lax (x64): cond, switch,
scan, fori_loop, while_loop, map and custom_root under grad, jvp, vjp, jacfwd/jacrev,
hessian, vmap, nesting, closures, integer/boolean/float32 carries, pytrees, zero-length
scans, XLA and to_jax. The cases of tests/test_control.py and tests/test_outside_dynamic.py
are not repeated here. Tests marked xfail(strict=True) show bugs found by this sweep."""

from __future__ import annotations

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp
from tidu import lax

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from oracle_util import close_trees  # noqa: E402

X = np.array([0.3, -0.7, 1.1, 0.4])
X32 = X.astype(np.float32)


close = close_trees


def same_dtypes(a, b):
    assert [np.asarray(u).dtype for u in jax.tree.leaves(a)] == [np.asarray(v).dtype for v in jax.tree.leaves(b)]


def sg(m):
    return tidu.stop_gradient if m is tnp else jax.lax.stop_gradient


# --- programs written once for tidu (tnp, lax) and for JAX (jnp, jax.lax) --------------------


def _cond_in_scan(m, L):
    def f(x):
        def step(c, xi):
            c2 = L.cond(c > 0.0, lambda a, b: m.sin(a) * b, lambda a, b: a * a - b, c, xi)
            return c2, c2 * xi
        c, ys = L.scan(step, x[0], x)
        return c + m.sum(ys)
    return f


def _switch_on_a_counter_in_scan(m, L):
    def f(x):
        def step(c, xi):
            i, v = c
            v = L.switch(i % 3, [lambda a: a + xi, lambda a: a * xi, lambda a: m.sin(a)], v)
            return (i + 1, v), v
        (_, v), ys = L.scan(step, (0, x[1]), x)
        return v + m.sum(ys ** 2)
    return f


def _scan_in_scan_closing_over_the_outer_carry(m, L):
    def f(x):
        def outer(c, xi):
            def inner(d, xj):
                return d * m.cos(xj * c) + xi, d * c
            d, ys = L.scan(inner, c, x)
            return d * 0.5, m.sum(ys)
        c, ys = L.scan(outer, x[2], x[::-1])
        return c + m.sum(ys)
    return f


def _dict_xs_dict_ys_reverse(m, L):
    def f(x):
        def step(c, xs):
            a, b = c
            return (a * m.cos(xs["u"]) + b, b * 0.9 + xs["v"][0] * a), {"p": a * xs["v"][1], "q": (m.sin(b),)}
        xs = {"u": x, "v": m.stack([x ** 2, m.exp(-x)], axis=1)}
        (a, b), ys = L.scan(step, (x[0], 0.5), xs, reverse=True)
        return a + b * m.sum(ys["p"]) + m.sum(ys["q"][0] ** 2)
    return f


def _none_xs_unrolled_reverse(m, L):
    def f(x):
        c, ys = L.scan(lambda c, _: (c * m.tanh(x) + 0.1, m.sum(c)), x, None, length=10, reverse=True, unroll=3)
        return m.sum(c) + m.sum(ys * m.arange(10.0))
    return f


def _zero_length_none_xs(m, L):
    def f(x):
        c, ys = L.scan(lambda c, _: (c * m.sin(c), (c, m.sum(c))), x, None, length=0)
        return m.sum(c) + m.sum(ys[0]) + m.sum(ys[1])
    return f


def _empty_fori(m, L):
    return lambda x: m.sum(L.fori_loop(5, 2, lambda i, v: v * m.sin(v), x))


def _map_of_pytrees(m, L):
    def f(x):
        out = L.map(lambda t: {"a": m.sin(t[0]) * t[1], "b": (t[0] * t[1][0],)}, (x, m.stack([x, x ** 2], axis=1)))
        return m.sum(out["a"]) + m.sum(out["b"][0])
    return f


REVERSIBLE = {
    "cond in scan": _cond_in_scan,
    "switch on a counter in scan": _switch_on_a_counter_in_scan,
    "scan in scan": _scan_in_scan_closing_over_the_outer_carry,
    "dict xs and ys, reverse": _dict_xs_dict_ys_reverse,
    "None xs, unroll=3, reverse": _none_xs_unrolled_reverse,
    "zero-length scan": _zero_length_none_xs,
    "empty fori_loop": _empty_fori,
    "map of pytrees": _map_of_pytrees,
}
HEAVY = {"scan in scan", "dict xs and ys, reverse", "cond in scan"}


def _params(names):
    return [pytest.param(n, marks=pytest.mark.slow) if n in HEAVY else n for n in names]


@pytest.mark.parametrize("name", _params(REVERSIBLE))
def test_values_and_first_derivatives_against_jax(name):
    f, fj = REVERSIBLE[name](tnp, lax), REVERSIBLE[name](jnp, jax.lax)
    close(f(X), fj(X))
    close(tidu.grad(f)(X), jax.grad(fj)(X))
    close(tidu.jvp(f, (X,), (X[::-1],)), jax.jvp(fj, (X,), (X[::-1],)))
    close(tidu.jacrev(f)(X), jax.jacfwd(fj)(X))
    xb = np.stack([X, 0.5 * X + 0.1, 1.3 * X - 0.2])
    close(tidu.vmap(tidu.grad(f))(xb), jax.vmap(jax.grad(fj))(xb))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cond in scan", "switch on a counter in scan", "map of pytrees"])
def test_hessians_in_every_mode_against_jax(name):
    f, fj = REVERSIBLE[name](tnp, lax), REVERSIBLE[name](jnp, jax.lax)
    want = jax.hessian(fj)(X)
    for mode in ("FoF", "FoR", "RoF", "RoR"):
        close(tidu.hessian(f, mode=mode)(X), want)


@pytest.mark.parametrize("name", ["cond in scan", "map of pytrees"])
def test_gradient_on_xla_and_through_to_jax(name):
    f, fj = REVERSIBLE[name](tnp, lax), REVERSIBLE[name](jnp, jax.lax)
    program = tidu.make_graph(tidu.grad(f))(X).program
    close(program.run([X], backend="xla")[0], jax.grad(fj)(X))
    close(jax.jit(tidu.to_jax(tidu.grad(f)))(X), jax.grad(fj)(X))


def test_while_loop_in_a_cond_forward_mode_and_vmap():
    def mk(m, L):
        def f(x):
            def taken(v):
                return L.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, m.sin(c[1]) + v), (0, v))[1]
            return m.sum(L.cond(m.sum(x) > 0.5, taken, lambda v: v ** 3, x))
        return f

    f, fj = mk(tnp, lax), mk(jnp, jax.lax)
    close(tidu.jit(f)(X), fj(X))
    close(tidu.jacfwd(f)(X), jax.jacfwd(fj)(X))
    close(tidu.hessian(f, mode="FoF")(X), jax.jacfwd(jax.jacfwd(fj))(X))
    xb = np.stack([X, -X, 0.1 * X])  # the predicate differs between the examples
    close(tidu.vmap(f)(xb), jax.vmap(fj)(xb))


def test_fori_loop_with_batched_traced_bounds():
    def mk(m, L):
        return lambda x, lo, hi: L.fori_loop(lo, hi, lambda i, v: m.sin(v) + x * i, x)

    f, fj = mk(tnp, lax), mk(jnp, jax.lax)
    lo, hi = np.array([5, -2, 0, 2]), np.array([1, 3, 0, 6])
    close(tidu.vmap(f)(X, lo, hi), jax.vmap(fj)(X, lo, hi))
    close(tidu.vmap(tidu.jacfwd(f))(X, lo, hi), jax.vmap(jax.jacfwd(fj))(X, lo, hi))
    close(tidu.hessian(f, mode="FoF")(0.3, 0, np.int64(4)), jax.jacfwd(jax.jacfwd(fj))(0.3, 0, np.int64(4)))


def test_integer_and_boolean_carries():
    def mk(m, L):
        def f(x):
            def step(c, xi):
                k, flag, acc = c
                flag = m.logical_xor(flag, xi > 0)
                return (k + 2, flag, acc + m.where(flag, xi, -xi) * k), (flag, k)
            return L.scan(step, (np.int32(1), x > 0.5, m.zeros_like(x)), m.stack([x, -x, 2 * x]))
        return f

    f, fj = mk(tnp, lax), mk(jnp, jax.lax)
    got, want = tidu.jit(f)(X), jax.jit(fj)(X)
    close(got, want)
    same_dtypes(got, want)
    loss, loss_j = (lambda x: tnp.sum(f(x)[0][2] ** 2)), (lambda x: jnp.sum(fj(x)[0][2] ** 2))
    close(tidu.grad(loss)(X), jax.grad(loss_j)(X))


# --- bugs ---------------------------------------------------------------------------------


def _stop_gradient_in_scan(m, L):
    def f(x):
        c, ys = L.scan(lambda c, xi: (c * sg(m)(c) + m.sin(xi * sg(m)(c)), sg(m)(c) * xi), 0.5, x)
        return c + m.sum(ys)
    return f


def _stop_gradient_in_cond(m, L):
    return lambda x: m.sum(L.cond(x[0] > 0, lambda v: v * sg(m)(v), lambda v: sg(m)(v) ** 3, x))


def _stop_gradient_in_while(m, L):
    return lambda x: m.sum(L.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * sg(m)(c[1]) + x), (0, x))[1])


def _clamp_in_scan(m, L):
    # lax.clamp's derivative is 0 at the ends of the interval: a stop_gradient inside
    def f(x):
        c, ys = L.scan(lambda c, xi: (c + L.clamp(0.0, xi, 1.0), L.clamp(0.0, xi, 1.0) ** 2), 0.0, x)
        return c + m.sum(ys)
    return f




@pytest.mark.parametrize("name", ["scan", "cond"])
def test_stop_gradient_inside_a_body_reverse_and_forward(name):
    mk = {"scan": _stop_gradient_in_scan, "cond": _stop_gradient_in_cond}[name]
    f, fj = mk(tnp, lax), mk(jnp, jax.lax)
    close(tidu.jit(f)(X), fj(X))
    close(tidu.grad(f)(X), jax.grad(fj)(X))
    close(tidu.jacfwd(f)(X), jax.jacfwd(fj)(X))


def test_stop_gradient_inside_a_while_body_forward_mode():
    f, fj = _stop_gradient_in_while(tnp, lax), _stop_gradient_in_while(jnp, jax.lax)
    close(tidu.jacfwd(f)(X), jax.jacfwd(fj)(X))


def test_lax_clamp_derivative_at_its_ends_inside_a_scan():
    x = np.array([0.0, 1.0, 0.5, 2.0])
    f, fj = _clamp_in_scan(tnp, lax), _clamp_in_scan(jnp, jax.lax)
    close(tidu.grad(f)(x), jax.grad(fj)(x))  # JAX: [0, 0, 2, 0]


def _scaled_sin_of(custom_jvp, m):
    """sin with a custom JVP 10 * t (tidu's or JAX's)."""
    @custom_jvp
    def f(v):
        return m.sin(v)

    @f.defjvp
    def f_jvp(primals, tangents):
        return f(primals[0]), 10.0 * tangents[0]
    return f


def _tripled_of(custom_vjp, m):
    """sin with a custom VJP 3 * g (tidu's or JAX's)."""
    f = custom_vjp(lambda v: m.sin(v))
    f.defvjp(lambda v: (m.sin(v), None), lambda _, g: (3.0 * g,))
    return f


_scaled_sin, _scaled_sin_j = _scaled_sin_of(tidu.custom_jvp, tnp), _scaled_sin_of(jax.custom_jvp, jnp)
_tripled, _tripled_j = _tripled_of(tidu.custom_vjp, tnp), _tripled_of(jax.custom_vjp, jnp)


def _custom_in_scan(fn):
    def mk(m, L):
        def f(x):
            c, ys = L.scan(lambda c, xi: (fn[m is jnp](c * xi), c), 0.5, x)
            return c + m.sum(ys)
        return f
    return mk


def test_custom_jvp_inside_a_scan_body():
    mk = _custom_in_scan((_scaled_sin, _scaled_sin_j))
    f, fj = mk(tnp, lax), mk(jnp, jax.lax)
    close(tidu.grad(f)(X), jax.grad(fj)(X))
    close(tidu.jacfwd(f)(X), jax.jacfwd(fj)(X))


def test_custom_jvp_inside_a_cond_branch():
    def mk(m, L):
        fn = _scaled_sin_j if m is jnp else _scaled_sin
        return lambda x: m.sum(L.cond(x[0] > 0, fn, lambda v: v, x))
    f, fj = mk(tnp, lax), mk(jnp, jax.lax)
    close(tidu.grad(f)(X), jax.grad(fj)(X))  # JAX: 10 everywhere


def test_custom_vjp_inside_a_scan_body():
    mk = _custom_in_scan((_tripled, _tripled_j))
    f, fj = mk(tnp, lax), mk(jnp, jax.lax)
    close(tidu.grad(f)(X), jax.grad(fj)(X))


def test_gradient_of_a_vmapped_cond_ignores_the_branch_not_taken():
    def mk(m, L):
        return lambda x: L.cond(x > 0, lambda v: m.sqrt(v), lambda v: v * v, x)

    f, fj = mk(tnp, lax), mk(jnp, jax.lax)
    xs = np.array([4.0, -1.0, 0.25, -9.0])
    close(tidu.vmap(tidu.grad(f))(xs), jax.vmap(jax.grad(fj))(xs))  # (grad inside: fine)
    close(tidu.grad(lambda x: tnp.sum(tidu.vmap(f)(x)))(xs), jax.grad(lambda x: jnp.sum(jax.vmap(fj)(x)))(xs))




@pytest.mark.parametrize("kind", ["fori_loop", "scan", "while_loop"])
def test_a_weakly_typed_float_init_takes_the_float32_of_the_body(kind):
    def mk(m, L):
        if kind == "fori_loop":
            return lambda x: L.fori_loop(0, 4, lambda i, s: s + x[i], 0.0)
        if kind == "scan":
            return lambda x: L.scan(lambda c, xi: (c + xi, c), 0.0, x)
        return lambda x: L.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, c[1] + x[c[0]]), (0, 0.0))

    f, fj = mk(tnp, lax), mk(jnp, jax.lax)
    got, want = tidu.jit(f)(X32), jax.jit(fj)(X32)
    same_dtypes(got, want)  # JAX: float32
    close(got, want, tol=1e-6)


def test_a_weakly_typed_int_init_with_a_float_body():
    f = lambda x: lax.scan(lambda c, xi: (c + xi, None), 0, x)[0]  # noqa: E731
    fj = lambda x: jax.lax.scan(lambda c, xi: (c + xi, None), 0, x)[0]  # noqa: E731
    got, want = tidu.jit(f)(X32), jax.jit(fj)(X32)
    same_dtypes(got, want)
    close(got, want, tol=1e-6)




@pytest.mark.parametrize("bounds", ["python ints", "0 and int32", "traced int32 upper"])
def test_fori_loop_counter_with_an_int32_accumulator(bounds):
    def mk(m, L):
        if bounds == "python ints":
            return lambda n: L.fori_loop(0, 4, lambda i, a: a + i, np.int32(0))
        if bounds == "0 and int32":
            return lambda n: L.fori_loop(0, np.int32(4), lambda i, a: a + i, np.int32(0))
        return lambda n: L.fori_loop(0, n, lambda i, a: a + i, np.int32(0))

    f, fj = mk(tnp, lax), mk(jnp, jax.lax)
    got, want = tidu.jit(f)(np.int32(4)), jax.jit(fj)(np.int32(4))
    same_dtypes(got, want)
    assert int(got) == int(want) == 6




def test_map_takes_batch_size():
    x = np.linspace(0.1, 1.0, 7)
    f = lambda x: lax.map(lambda v: tnp.sin(v) * v, x, batch_size=3)  # noqa: E731
    close(tidu.jit(f)(x), jax.lax.map(lambda v: jnp.sin(v) * v, x, batch_size=3))
    close(tidu.grad(lambda x: tnp.sum(f(x)))(x), jax.grad(lambda x: jnp.sum(jax.lax.map(
        lambda v: jnp.sin(v) * v, x, batch_size=3)))(x))


def test_fori_loop_takes_unroll():
    f = lambda x: lax.fori_loop(0, 5, lambda i, v: tnp.sin(v) * i, x, unroll=2)  # noqa: E731
    fj = lambda x: jax.lax.fori_loop(0, 5, lambda i, v: jnp.sin(v) * i, x, unroll=2)  # noqa: E731
    close(tidu.jit(f)(X), fj(X))
    close(tidu.jacrev(f)(X), jax.jacrev(fj)(X))


def test_checkpoint_passes_keyword_arguments():
    f = lambda x: tidu.checkpoint(lambda a, *, s: tnp.sum(tnp.sin(a) * s))(x, s=2.0)  # noqa: E731
    fj = lambda x: jax.checkpoint(lambda a, *, s: jnp.sum(jnp.sin(a) * s))(x, s=2.0)  # noqa: E731
    close(tidu.grad(f)(X), jax.grad(fj)(X))


def test_checkpoint_takes_jax_options():
    def f(x):
        g = tidu.checkpoint(lambda a, n: tnp.sum(a ** n), static_argnums=(1,), prevent_cse=True, policy=None)
        return g(x, 3)

    fj = lambda x: jax.checkpoint(lambda a, n: jnp.sum(a ** n), static_argnums=(1,))(x, 3)  # noqa: E731
    close(tidu.grad(f)(X), jax.grad(fj)(X))


@pytest.mark.parametrize("where", ["scalar", "map"])
def test_bitcast_and_nextafter_of_scalars_in_a_map(where):
    x = np.linspace(0.1, 1.0, 10)
    if where == "scalar":
        got = tidu.jit(lambda v: lax.bitcast_convert_type(v, np.int64))(0.1)
        assert got.shape == () and int(got) == int(np.float64(0.1).view(np.int64))
        return
    f = lambda v: lax.map(lambda a: lax.nextafter(a, np.float64(10.0)), v)  # noqa: E731
    close(tidu.jit(f)(x), jax.lax.map(lambda a: jax.lax.nextafter(a, np.float64(10.0)), x), tol=0)


def test_checkpoint_of_a_step_with_an_integer_argument_in_a_scan():
    def mk(m, L, ckpt):
        def f(x):
            step = ckpt(lambda c, k: c * m.sin(c + k) + x[k])
            return L.scan(lambda c, k: (step(c, k), c), x[0], m.arange(4))[0]
        return f

    f, fj = mk(tnp, lax, tidu.checkpoint), mk(jnp, jax.lax, jax.checkpoint)
    close(tidu.grad(f)(X), jax.grad(fj)(X))


def _newton_root(m, L, grad):
    def f(t):
        def newton(g, x0):
            return L.while_loop(lambda c: c[0] < 20, lambda c: (c[0] + 1, c[1] - g(c[1]) / grad(g)(c[1])), (0, x0))[1]
        return L.custom_root(lambda v: v ** 3 + t * v - 2.0, 1.0, newton, lambda g, y: y / g(1.0)) ** 2
    return f


def test_custom_root_under_vmap_with_grad_inside():
    f, fj = _newton_root(tnp, lax, tidu.grad), _newton_root(jnp, jax.lax, jax.grad)
    ts = np.array([0.3, 0.7, 1.1, 0.4])
    close(tidu.vmap(f)(ts), jax.vmap(fj)(ts))
    close(tidu.vmap(tidu.grad(f))(ts), jax.vmap(jax.grad(fj))(ts))
    close(tidu.hessian(f)(0.7), jax.hessian(fj)(0.7))


def test_gradient_of_a_vmapped_custom_root():
    f, fj = _newton_root(tnp, lax, tidu.grad), _newton_root(jnp, jax.lax, jax.grad)
    ts = np.array([0.3, 0.7, 1.1, 0.4])
    close(tidu.grad(lambda t: tnp.sum(tidu.vmap(f)(t)))(ts), jax.grad(lambda t: jnp.sum(jax.vmap(fj)(t)))(ts))


@pytest.mark.parametrize("bounds", ["static", "traced"])
def test_fori_loop_carry_errors_name_the_body_function(bounds):
    def shrinking_body(i, v):
        return v[:2]

    if bounds == "static":
        call = tidu.jit(lambda x: lax.fori_loop(0, 3, shrinking_body, x))
    else:
        call = tidu.jit(lambda x, n: lax.fori_loop(0, n, shrinking_body, x))
    with pytest.raises(TypeError, match="shrinking_body") as info:
        call(X) if bounds == "static" else call(X, 3)
    assert "\n" not in str(info.value) and "f64[2]" in str(info.value)


def test_gradient_of_a_vmapped_switch_and_of_a_closed_over_weight():
    def mk(m, L):
        def f(x):
            branches = [lambda v: m.sum(m.log(v)), lambda v: m.sum(v), lambda v: m.sum(m.sqrt(-v))]
            return L.switch(m.argmax(x), branches, x)
        return f

    f, fj = mk(tnp, lax), mk(jnp, jax.lax)
    xb = np.array([[2.0, 1.0, 0.5], [-1.0, 3.0, -2.0], [-3.0, -2.0, -1.0]])
    close(tidu.vmap(f)(xb), jax.vmap(fj)(xb))
    close(tidu.grad(lambda x: tnp.sum(tidu.vmap(f)(x)))(xb), jax.grad(lambda x: jnp.sum(jax.vmap(fj)(x)))(xb))

    def g(w, xs):
        return tnp.sum(tidu.vmap(lambda x: lax.cond(x > 0, lambda v: tnp.sqrt(v * w), lambda v: v * v * w, x))(xs))

    def gj(w, xs):
        return jnp.sum(jax.vmap(lambda x: jax.lax.cond(x > 0, lambda v: jnp.sqrt(v * w), lambda v: v * v * w, x))(xs))

    xs = np.array([4.0, -1.0, 0.25, -9.0])
    close(tidu.grad(g, argnums=(0, 1))(2.0, xs), jax.grad(gj, argnums=(0, 1))(2.0, xs))


def _marks_in_a_nested_scan(m, L):
    def f(x):
        def outer(c, xi):
            d, _ = L.scan(lambda d, xj: (d * sg(m)(d) + m.sin(xj * c) + L.clamp(-0.5, xj, 0.5), None), c, x)
            return d * 0.3, d
        c, ys = L.scan(outer, 0.2, x)
        return c + m.sum(ys)
    return f


@pytest.mark.slow
def test_stop_gradient_and_clamp_in_a_nested_scan_every_mode_and_xla():
    f, fj = _marks_in_a_nested_scan(tnp, lax), _marks_in_a_nested_scan(jnp, jax.lax)
    close(tidu.grad(f)(X), jax.grad(fj)(X))
    close(tidu.jacfwd(f)(X), jax.jacfwd(fj)(X))
    close(tidu.hessian(f, mode="RoR")(X), jax.hessian(fj)(X))
    close(tidu.make_graph(tidu.grad(f))(X).program.run([X], backend="xla")[0], jax.grad(fj)(X))


def test_gradient_of_a_vmapped_scan_with_a_batched_cond_in_its_body():
    def mk(m, L):
        def f(x):
            step = lambda c, xi: (c + L.cond(xi > 0, lambda v: m.sqrt(v), lambda v: v * v, xi * c), None)  # noqa: E731
            return L.scan(step, 1.0, x)[0]
        return f

    f, fj = mk(tnp, lax), mk(jnp, jax.lax)
    xb = np.array([[4.0, -1.0, 0.25], [-9.0, 2.0, 1.0]])
    close(tidu.vmap(f)(xb), jax.vmap(fj)(xb))
    close(tidu.grad(lambda x: tnp.sum(tidu.vmap(f)(x)))(xb), jax.grad(lambda x: jnp.sum(jax.vmap(fj)(x)))(xb))
