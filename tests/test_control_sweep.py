"""A third sweep of tidu.lax's control flow against jax.lax (x64), over combinations the
earlier files (tests/test_control.py, tests/test_outside_control.py,
tests/test_outside_control_more.py) leave out: vmap with the batch on one operand at a time
(predicate or index only, carry only, xs only, closed-over constants only) with in_axes and
out_axes other than 0, vmap of grad and grad of vmap; Hessians in every mode, jacfwd of
jacrev and jvp of vjp through reverse scans, scans in scans, conds in scans and
checkpointed scans under vmap; pytree carries with None leaves, zero-length scans, xs=None,
unroll; int, bool and complex carries beside float ones; custom_root whose solver closes
over traced values; eager against tidu.jit; and the errors for bad input (one line, where
JAX raises too)."""

from __future__ import annotations

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp
from tidu import lax

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

TIDU = {"m": tnp, "L": lax, "grad": tidu.grad, "jacfwd": tidu.jacfwd, "jacrev": tidu.jacrev, "vmap": tidu.vmap,
        "jit": tidu.jit, "jvp": tidu.jvp, "vjp": tidu.vjp, "hessian": tidu.hessian}
JAX = {"m": jnp, "L": jax.lax, "grad": jax.grad, "jacfwd": jax.jacfwd, "jacrev": jax.jacrev, "vmap": jax.vmap,
       "jit": jax.jit, "jvp": jax.jvp, "vjp": jax.vjp, "hessian": jax.hessian}
MODES = ("FoF", "FoR", "RoF", "RoR")
rng = np.random.default_rng(0)


def same(got, want, tol=1e-11):
    """Equal pytrees (JAX's flattening): shapes and dtypes, integers exactly, floats to tol."""
    la, lb = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(la) == len(lb), (len(la), len(lb))
    for u, v in zip(la, lb, strict=True):
        u, v = np.asarray(u), np.asarray(v)
        assert (u.shape, u.dtype) == (v.shape, v.dtype)
        if v.dtype.kind in "biu":
            np.testing.assert_array_equal(u, v)
        else:
            np.testing.assert_allclose(u, v, rtol=tol, atol=tol)


def check(mk, *args, tol=1e-11):
    """``mk(t)`` builds the function from the namespace ``t`` (tidu's or JAX's)."""
    same(mk(TIDU)(*args), mk(JAX)(*args), tol)


# --- vmap with the batch on one operand at a time -------------------------------------------


def _cond(t):
    m, L = t["m"], t["L"]
    return lambda p, x, w: L.cond(p > 0, lambda a, b: m.sin(a) * b, lambda a, b: a ** 2 - b, x, w)


def _switch(t):
    m, L = t["m"], t["L"]
    return lambda i, x, w: L.switch(i, [lambda a, b: m.sin(a) * b, lambda a, b: a ** 2 - b,
                                        lambda a, b: m.exp(a) + b[0]], x, w)


def _scan(t, reverse):
    m, L = t["m"], t["L"]

    def f(c0, xs, w):
        def step(c, x):
            c2 = m.tanh(c * w[0] + x) + w[1] * c
            return c2, c2 * x
        return L.scan(step, c0, xs, reverse=reverse)
    return f


X34 = rng.normal(size=(3, 4))
BRANCH_AXES = [(0, None, None), (None, 0, None), (None, None, 0), (0, 0, 0)]


@pytest.mark.parametrize("in_axes", BRANCH_AXES)
@pytest.mark.parametrize("which", ["cond", "switch"])
def test_vmap_of_branches_batched_on_one_operand_and_its_derivatives(which, in_axes):
    make = _cond if which == "cond" else _switch
    first = np.array([0.3, -0.5, 1.2]) if which == "cond" else np.array([2, 0, 1], np.int32)
    args = [first if in_axes[0] == 0 else first[1], X34 if in_axes[1] == 0 else X34[0],
            X34 if in_axes[2] == 0 else X34[1]]
    check(lambda t: t["vmap"](make(t), in_axes=in_axes), *args)
    check(lambda t: t["vmap"](t["jacrev"](make(t), argnums=(1, 2)), in_axes=in_axes), *args)
    check(lambda t: t["grad"](lambda x, w: t["m"].sum(t["vmap"](make(t), in_axes=in_axes)(args[0], x, w) ** 2),
                              argnums=(0, 1)), *args[1:])


def test_vmap_of_a_cond_with_other_axes_and_nested():
    check(lambda t: t["vmap"](_cond(t), in_axes=(0, 1, None), out_axes=1),
          np.array([0.3, -0.2, 0.1, -1.0]), X34, X34[0, :3])
    check(lambda t: t["vmap"](t["vmap"](_cond(t), in_axes=(0, 0, None)), in_axes=(None, 1, 0), out_axes=1),
          np.array([0.3, -0.5, 1.2]), X34[:, :3], np.ones(3))


SCAN_AXES = [(0, None, None), (None, 0, None), (None, None, 0), (0, 1, 1)]


@pytest.mark.parametrize("in_axes", SCAN_AXES)
@pytest.mark.parametrize("reverse", [False, True])
def test_vmap_of_a_scan_batched_on_carry_xs_or_constants(reverse, in_axes):
    xs = rng.normal(size=(3, 5))
    args = [np.array([0.3, -0.5, 1.2]) if in_axes[0] == 0 else 0.2,
            {0: xs, 1: xs.T.copy(), None: xs[0]}[in_axes[1]],
            {0: X34[:, :2], 1: X34[:2, :3].copy(), None: X34[0, :2]}[in_axes[2]]]

    def scalar(t):
        return lambda *a: t["m"].sum(_scan(t, reverse)(*a)[1]) + _scan(t, reverse)(*a)[0]

    check(lambda t: t["vmap"](_scan(t, reverse), in_axes=in_axes, out_axes=(0, 1)), *args)
    check(lambda t: t["vmap"](t["grad"](scalar(t), argnums=(0, 1, 2)), in_axes=in_axes), *args)
    check(lambda t: t["jacrev"](lambda *a: t["vmap"](_scan(t, reverse), in_axes=in_axes)(*a)[1],
                                argnums=(0, 1, 2)), *args)


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0)])
def test_vmap_of_a_while_loop_batched_on_its_value_or_its_bound_forward_mode(in_axes):
    def make(t):
        m, L = t["m"], t["L"]
        return lambda x, lim: L.while_loop(lambda c: c[1] < lim, lambda c: (c[0] * 1.5 + m.sin(c[0]), c[1] + 1),
                                           (x, 0))
    args = [np.array([0.3, -0.5, 1.2]) if in_axes[0] == 0 else 0.4, np.array([1, 3, 0]) if in_axes[1] == 0 else 2]
    check(lambda t: t["vmap"](make(t), in_axes=in_axes), *args)
    check(lambda t: t["vmap"](t["jacfwd"](t["jacfwd"](lambda x, n: make(t)(x, n)[0])), in_axes=in_axes), *args)


@pytest.mark.parametrize("in_axes", [(0, None, None), (None, 0, None), (None, None, 0)])
def test_vmap_of_a_fori_loop_with_traced_bounds_batched_one_at_a_time(in_axes):
    def make(t):
        return lambda lo, hi, x: t["L"].fori_loop(lo, hi, lambda i, v: v * 0.9 + t["m"].sin(v * i), x)
    args = [np.array([0, 1, 3]) if in_axes[0] == 0 else 1, np.array([3, 4, 2]) if in_axes[1] == 0 else 4,
            np.array([0.3, -0.5, 1.2]) if in_axes[2] == 0 else 0.7]
    check(lambda t: t["vmap"](make(t), in_axes=in_axes), *args)
    check(lambda t: t["vmap"](t["jacfwd"](make(t), argnums=2), in_axes=in_axes), *args)


@pytest.mark.parametrize("policy", [2, "sqrt", (4, 2), lax.Revolve(4)], ids=str)
def test_checkpointed_reverse_scans_under_vmap_and_jacrev(policy):
    xs = rng.normal(size=(3, 6)) * 0.5

    def make(t):
        m, L = t["m"], t["L"]
        kw = {"checkpoint": policy} if t is TIDU else {}

        def f(c0, xs, w):
            c, ys = L.scan(lambda c, x: (m.sin(c * w) + x * c, (c * x, c)), c0, xs, reverse=True, **kw)
            return c + m.sum(ys[0]) * m.sum(ys[1])
        return f
    args = [np.array([0.1, 0.2, 0.3]), xs.T.copy(), np.array([1.0, 0.5, 1.5])]
    check(lambda t: t["jacrev"](t["vmap"](make(t), in_axes=(0, 1, 0)), argnums=(0, 1, 2)), *args)
    check(lambda t: t["vmap"](t["hessian"](make(t), argnums=(0, 2)), in_axes=(None, 0, None)), 0.2, xs, 0.7)


# --- higher order -----------------------------------------------------------------------------


def _reverse_scan(t):
    m, L = t["m"], t["L"]

    def f(x):
        def step(c, xi):
            c2 = m.sin(c * xi) + c ** 2 * 0.3
            return c2, c2 * xi + m.cos(c)
        c, ys = L.scan(step, x[0], x, reverse=True)
        return c + m.sum(ys ** 2)
    return f


def _scan_in_scan(t):
    m, L = t["m"], t["L"]

    def f(x):
        def outer(c, xi):
            inner = L.scan(lambda d, y: (d * m.cos(y) + c * 0.2, d * y), c, x * xi)
            return inner[0] + m.sum(inner[1]) * 0.1, inner[1][1]
        c, ys = L.scan(outer, x[1], x[:3], reverse=True)
        return c * m.sum(ys)
    return f


def _switch_in_reverse_scan(t):
    m, L = t["m"], t["L"]

    def f(x):
        def step(c, i):
            c2 = L.switch(i, [lambda u: m.sin(u) * x[0], lambda u: u ** 3 + x[1], lambda u: m.exp(-u * u)], c)
            return c2, c2 * c
        c, ys = L.scan(step, x[2], np.array([0, 2, 1, 1, 0, 2]), reverse=True)
        return c + m.sum(ys)
    return f


def _unrolled_reverse_scan(t):
    m, L = t["m"], t["L"]

    def f(x):
        c, ys = L.scan(lambda c, xi: (m.sin(c) * xi + c, c * xi), x[0], m.concatenate([x, x]), unroll=3, reverse=True)
        return c * m.sum(ys)
    return f


SECOND = {"reverse scan": _reverse_scan, "scan in scan": _scan_in_scan,
          "switch in reverse scan": _switch_in_reverse_scan, "unroll=3 reverse scan": _unrolled_reverse_scan}
X4 = rng.normal(size=4) * 0.5


@pytest.mark.parametrize("name", list(SECOND))
def test_hessians_jacfwd_of_jacrev_and_jvp_of_vjp(name):
    make = SECOND[name]
    want = jax.hessian(make(JAX))(X4)
    for mode in MODES:
        same(tidu.hessian(make(TIDU), mode=mode)(X4), want, 1e-10)
    check(lambda t: t["jacfwd"](t["jacrev"](make(t))), X4, tol=1e-10)

    def jvp_of_vjp(t):
        def pulled(x):
            out, pullback = t["vjp"](make(t), x)
            return pullback(out * 0 + 1.0)[0]
        return lambda x: t["jvp"](pulled, (x,), (0.7 * np.ones(4),))
    check(jvp_of_vjp, X4, tol=1e-10)


def test_fori_loop_with_traced_bounds_to_second_order_forward():
    def make(t):
        return lambda x, n: t["m"].sum(t["L"].fori_loop(0, n, lambda i, v: t["m"].sin(v) * x + v * i * 0.1, x))
    same(tidu.jit(lambda x, n: tidu.hessian(make(TIDU), mode="FoF")(x, n))(X4, 3),
         jax.jit(lambda x, n: jax.jacfwd(jax.jacfwd(make(JAX)))(x, n))(X4, 3))


# --- custom_root whose solver closes over traced values ---------------------------------------
# (solve is traced into a body of its own: its captures and the initial guess are explicit
# arguments of the custom_jvp call that get no derivative)


def _root_in_scan(t):
    m, L = t["m"], t["L"]

    def f(x):
        def step(c, xi):
            def solve(g, y0):  # closes over the carry c
                return L.fori_loop(0, 30, lambda i, y: y - g(y) / (3 * y ** 2 + c), y0)
            r = L.custom_root(lambda y: y ** 3 + c * y - xi, 1.0, solve, lambda g, b: b / g(1.0))
            return c + 0.1 * r, r
        c, ys = L.scan(step, 1.0 + x[0] ** 2, 2.0 + x)
        return c + m.sum(ys ** 2)
    return f


def _root_from_traced_guess(t):
    L = t["L"]

    def f(x):
        solve = lambda g, y0: L.fori_loop(0, 30, lambda i, y: y - g(y) / (3 * y ** 2 + x[0]), y0)  # noqa: E731
        return L.custom_root(lambda y: y ** 3 + x[0] * y - x[1], x[1] * 0.5, solve, lambda g, b: b / g(1.0))
    return f


def test_custom_root_in_a_scan_its_value_and_vmap():
    check(_root_in_scan, X4, tol=1e-9)
    check(lambda t: t["vmap"](_root_from_traced_guess(t)), np.array([[1.1, 2.0], [0.5, 1.0]]), tol=1e-9)


def test_custom_root_whose_solver_closes_over_a_scan_carry_second_order():
    check(lambda t: t["grad"](_root_in_scan(t)), X4, tol=1e-9)
    want = jax.hessian(_root_in_scan(JAX))(X4)
    for mode in MODES:
        same(tidu.hessian(_root_in_scan(TIDU), mode=mode)(X4), want, 1e-9)


def test_custom_root_from_a_traced_initial_guess():
    x = np.array([1.1, 2.0])
    check(lambda t: t["grad"](_root_from_traced_guess(t)), x, tol=1e-9)
    check(lambda t: t["jacfwd"](t["jacrev"](_root_from_traced_guess(t))), x, tol=1e-9)


# --- pytrees, lengths, unroll, integer, boolean and complex carries ---------------------------


def _pytree_scan(t, n, reverse, unroll):
    m, L = t["m"], t["L"]

    def f(x):
        init = {"a": x[0], "b": (x[1:3], None), "k": 0, "flag": True}

        def step(c, xi):
            a = m.sin(c["a"]) * xi["u"] + c["b"][0][0]
            b = c["b"][0] * m.cos(xi["u"]) + a
            return ({"a": a, "b": (b, None), "k": c["k"] + 1, "flag": m.logical_not(c["flag"])},
                    (a * c["k"], None, c["flag"]))
        return L.scan(step, init, {"u": x[:n]}, reverse=reverse, unroll=unroll)
    return f


@pytest.mark.parametrize("unroll", [1, 3, True])
@pytest.mark.parametrize("n", [0, 4])
@pytest.mark.parametrize("reverse", [False, True])
def test_pytree_carries_with_none_int_and_bool_leaves(reverse, n, unroll):
    def floats(t):
        return lambda x: (lambda c, ys: (c["a"], c["b"][0], ys[0]))(*_pytree_scan(t, n, reverse, unroll)(x))
    check(lambda t: _pytree_scan(t, n, reverse, unroll), X4)
    check(lambda t: t["jit"](_pytree_scan(t, n, reverse, unroll)), X4)
    check(lambda t: t["jacrev"](floats(t)), X4)
    check(lambda t: t["vmap"](_pytree_scan(t, n, reverse, unroll)), rng.normal(size=(2, 4)))


@pytest.mark.parametrize("unroll", [1, 2, True])
@pytest.mark.parametrize("n", [0, 1, 5])
def test_xs_none_with_length(n, unroll):
    def make(t, reverse=False):
        m, L = t["m"], t["L"]
        return lambda x: L.scan(lambda c, _: ((c[0] * 0.9 + m.sin(c[1]), c[1] + 0.1, c[2] + 1), (c[0], c[2])),
                                (x, x * 2, np.int32(0)), None, length=n, unroll=unroll, reverse=reverse)
    check(make, 0.3)
    check(lambda t: t["grad"](lambda x: t["m"].sum(make(t, True)(x)[1][0]) + make(t)(x)[0][0]), 0.3)
    check(lambda t: t["vmap"](make(t)), np.array([0.3, 0.4]))


def test_integer_and_boolean_carries_beside_a_float_one():
    def make(t):
        m, L = t["m"], t["L"]

        def f(x):
            def step(c, xi):
                return (c[0] + (xi > 0).astype(np.int32), m.logical_xor(c[1], xi > 0), c[2] * xi + c[0]), c[0] * xi
            (k, b, v), ys = L.scan(step, (np.int32(0), False, 1.0), x)
            return v + m.sum(ys), k, b
        return f
    check(make, X4)
    check(lambda t: t["hessian"](lambda x: make(t)(x)[0]), X4)
    check(lambda t: t["vmap"](t["grad"](lambda x: make(t)(x)[0])), rng.normal(size=(3, 4)))


@pytest.mark.parametrize("reverse", [False, True])
def test_complex_carries_to_second_order(reverse):
    def make(t):
        m, L = t["m"], t["L"]

        def f(x):
            step = lambda z, xi: (z * m.exp(1j * xi) + 0.1 * z ** 2, m.real(z * m.conj(z)) + m.imag(z))  # noqa: E731
            c, ys = L.scan(step, x[0] + 1j * x[1], x, reverse=reverse)
            return m.abs(c) ** 2 + m.sum(ys)
        return f
    check(lambda t: t["grad"](make(t)), X4)
    want = jax.hessian(make(JAX))(X4)
    for mode in MODES:
        same(tidu.hessian(make(TIDU), mode=mode)(X4), want, 1e-10)
    check(lambda t: t["vmap"](t["grad"](make(t))), rng.normal(size=(2, 4)))


def test_holomorphic_jacobians_through_a_scan():
    def make(t):
        return lambda z: t["L"].scan(lambda c, zi: (t["m"].sin(c) * zi + c, c * zi), z[0], z)[0]
    z = X4 + 1j * X4[::-1]
    check(lambda t: t["jacfwd"](make(t), holomorphic=True), z)
    check(lambda t: t["jacrev"](make(t), holomorphic=True), z)


# --- eager against jit ------------------------------------------------------------------------

EAGER = {
    "reverse scan": lambda m, L: lambda x: L.scan(lambda c, xi: (m.sin(c) * xi + c, c * xi), x[0], x, reverse=True),
    "unroll=2": lambda m, L: lambda x: L.scan(lambda c, xi: (m.sin(c) * xi + c, c * xi), x[0], x, unroll=2),
    "pytree carry": lambda m, L: lambda x: L.scan(lambda c, xi: ({"a": c["a"] * xi, "k": c["k"] + 1}, None),
                                                  {"a": x[0], "k": 0}, x),
    "zero-length": lambda m, L: lambda x: L.scan(lambda c, xi: (c * xi, c), x[0], x[:0]),
    "switch": lambda m, L: lambda x: L.switch(2, [lambda u: u, lambda u: -u, lambda u: m.exp(u)], x),
    "while": lambda m, L: lambda x: L.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, m.sin(c[1]) + c[1]), (0, x)),
    "fori unroll": lambda m, L: lambda x: L.fori_loop(0, 4, lambda i, v: v * 0.5 + i, x, unroll=3),
    "map batch_size": lambda m, L: lambda x: L.map(lambda r: m.sin(r) * 2, x, batch_size=2),
    "custom_root": lambda m, L: lambda x: L.custom_root(
        lambda y: y ** 3 - x, x * 0 + 1.0, lambda f, y0: L.fori_loop(0, 40, lambda i, y: y - f(y) / (3 * y ** 2), y0),
        lambda g, b: b / g(1.0)),
    "complex carry": lambda m, L: lambda x: L.scan(lambda c, xi: (c * m.exp(1j * xi), m.real(c)), 1.0 + 0j, x),
    "int carry": lambda m, L: lambda x: L.scan(lambda c, xi: (c + (xi > 0).astype(np.int32), c), np.int32(0), x),
}


@pytest.mark.parametrize("name", list(EAGER))
def test_eager_equals_jit_bit_for_bit_and_jax(name):
    x = rng.normal(size=5)
    f = EAGER[name](tnp, lax)
    eager, jitted = f(x), tidu.jit(f)(x)
    assert jax.tree.structure(eager) == jax.tree.structure(jitted)
    for a, b in zip(jax.tree.leaves(eager), jax.tree.leaves(jitted), strict=True):
        assert np.asarray(a).dtype == np.asarray(b).dtype and np.array_equal(a, b, equal_nan=True)
    same(eager, EAGER[name](jnp, jax.lax)(x))


# --- bad input: one line naming the argument, where JAX raises too ---------------------------

BAD = {
    "branch shapes": (lambda m, L: lambda x: L.cond(x[0] > 0, lambda u: u, lambda u: u[:2], x),
                      r"cond: true_fun returns .*f64\[4\].* but false_fun returns .*f64\[2\]"),
    "branch dtypes": (lambda m, L: lambda x: L.switch((x[0] > 0).astype(np.int32), [lambda u: u, lambda u: -u,
                                                                                   lambda u: u.astype(np.float32)], x),
                      r"switch: branch 2 returns .*f32\[4\].* but branch 0"),
    "branch trees": (lambda m, L: lambda x: L.cond(x[0] > 0, lambda u: (u, u), lambda u: [u, u], x),
                     "cond: true_fun returns .* but false_fun returns"),
    "vector predicate": (lambda m, L: lambda x: L.cond(x > 0, lambda u: u, lambda u: -u, x),
                         r"cond: pred must be a boolean scalar, got i1\[4\]"),
    "vector index": (lambda m, L: lambda x: L.switch((x > 0).astype(np.int32), [lambda u: u, lambda u: -u], x),
                     r"switch: index must be an integer scalar, got i32\[4\]"),
    "scan carry shape": (lambda m, L: lambda x: L.scan(lambda c, xi: (c[:1] * xi, xi), x[:2], x),
                         r"scan: the body .* changes the carry: init is .*f64\[2\].*returns .*f64\[1\]"),
    "scan carry dtype": (lambda m, L: lambda x: L.scan(lambda c, xi: (c.astype(np.float32), xi), x[:2], x),
                         r"scan: the body .* changes the carry: .*f32\[2\]"),
    "while carry dtype": (lambda m, L: lambda x: L.while_loop(lambda c: c[0] < 3,
                                                              lambda c: (c[0] + 1, c[1].astype(np.float32)), (0, x)),
                          r"while_loop: body_fun .* changes the loop value: .*f32\[4\]"),
    "while vector condition": (lambda m, L: lambda x: L.while_loop(lambda c: c > 0, lambda c: c - 1, x),
                               r"while_loop: cond_fun .* must return a boolean scalar, got \(i1\[4\]\)"),
    "fori carry shape": (lambda m, L: lambda x: L.fori_loop(0, 3, lambda i, v: v[:2], x),
                         r"fori_loop: body_fun .* changes the loop value: init_val is \* \(f64\[4\]\)"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_is_one_line_naming_the_argument_where_jax_raises(name):
    make, message = BAD[name]
    x = X4
    with pytest.raises(TypeError):
        jax.jit(make(jnp, jax.lax))(x)
    # eagerly, a concrete predicate or index takes its branch only (docs/control-flow.md): not checked
    eager = () if name.startswith("branch") else (make(tnp, lax),)
    for run in (tidu.jit(make(tnp, lax)), *eager):
        with pytest.raises(TypeError, match=message) as info:
            run(x)
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("traced_bounds", [False, True])
def test_a_fori_loop_body_changing_the_dtype_is_refused_as_fori_loops(traced_bounds):
    def f(x, n):
        return lax.fori_loop(0, n if traced_bounds else 3, lambda i, v: v.astype(np.float32), x)
    with pytest.raises(TypeError):
        jax.jit(lambda x, n: jax.lax.fori_loop(0, n if traced_bounds else 3, lambda i, v: v.astype(np.float32), x))(
            X4, 3)
    with pytest.raises(TypeError, match=r"fori_loop: body_fun <lambda> changes the loop value: init_val is \* "
                                        r"\(f64\[4\]\), the body returns \* \(f32\[4\]\)"):
        tidu.jit(f)(X4, 3)


@pytest.mark.parametrize("transform", ["grad", "jacrev", "vmap of grad"])
def test_reverse_mode_through_a_while_loop_with_a_static_trip_count_is_refused_as_in_jax(transform):
    def make(t):
        return lambda x: t["m"].sum(t["L"].while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2.0), (0, x))[1])

    def wrap(t):
        if transform == "vmap of grad":
            return t["vmap"](t["grad"](make(t)))
        return t[transform](make(t))
    x = np.array([[1.0, 2.0]]) if transform == "vmap of grad" else np.array([1.0, 2.0])
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        wrap(JAX)(x)
    with pytest.raises(lax.ReverseModeRefused, match="does not work through tidu.lax.while_loop") as info:
        wrap(TIDU)(x)
    assert "\n" not in str(info.value)


# --- an empty batch -----------------------------------------------------------------------------

EMPTY = {
    "scan with an unbatched carry": lambda t: t["vmap"](
        lambda xs: t["L"].scan(lambda c, x: ((c[0] + 1, c[1] * x), c[0]), (0, 1.0), xs)),
    "while_loop with an unbatched predicate": lambda t: t["vmap"](
        lambda x: t["L"].while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2), (0, x))),
    "jacfwd of a while_loop": lambda t: t["vmap"](t["jacfwd"](
        lambda x: t["L"].while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2), (0, x))[1])),
    "grad of a scan": lambda t: t["vmap"](t["grad"](
        lambda x: t["L"].scan(lambda c, xi: ((c[0] + 1, c[1] * xi), c[0]), (0, 1.0), x)[0][1])),
}


@pytest.mark.parametrize("name", list(EMPTY))
def test_vmap_over_an_empty_batch(name):
    check(EMPTY[name], np.zeros((0, 3)))


def test_vmap_over_an_empty_batch_with_batched_carries():
    check(lambda t: t["vmap"](lambda xs: t["L"].scan(lambda c, x: (c * x, c), 1.0, xs)), np.zeros((0, 3)))
    check(lambda t: t["vmap"](lambda x: t["L"].while_loop(lambda c: c[1][0] < 3.0, lambda c: (c[0] + 1, c[1] * 2),
                                                          (0, x))), np.zeros((0, 3)))
    check(lambda t: t["vmap"](lambda p, x: t["L"].cond(p > 0, lambda u: u, lambda u: -u, x)), np.zeros(0),
          np.zeros((0, 3)))


# --- linear_transpose through loops -------------------------------------------------------------

TRANSPOSED = {
    "scan linear in xs": lambda t: lambda v: t["L"].scan(lambda c, x: (c * 0.5 + x, c * 2.0), 0.0, v),
    "reverse scan": lambda t: lambda v: t["L"].scan(lambda c, x: (c * 0.5 + x, c * 2.0), 0.0, v, reverse=True),
    "fori_loop reading v[i]": lambda t: lambda v: t["L"].fori_loop(0, 4, lambda i, c: c * 0.5 + v[i], 0.0),
}


@pytest.mark.parametrize("name", list(TRANSPOSED))
def test_linear_transpose_of_a_scan_linear_in_its_xs(name):
    # the transposed scan read the primal xs as an operand its body never used, so
    # linear_transpose took the function for nonlinear (tidu.simplify.loops drops such operands)
    f, fj = TRANSPOSED[name](TIDU), TRANSPOSED[name](JAX)
    ct = jax.tree.map(np.asarray, fj(jnp.arange(1.0, 5.0)))
    same(tidu.linear_transpose(f, np.zeros(4))(ct), jax.linear_transpose(fj, np.zeros(4))(ct))


def test_a_scan_with_no_operands():
    check(lambda t: lambda: t["L"].scan(lambda c, _: (c, 1.0), (), None, length=3))


def test_a_vmapped_read_at_traced_indices_keeps_negative_zero():
    x = np.array([1.0, -0.0, np.inf, 3.0, np.nan])
    idx = np.array([1, 0, 3, 1], np.int32)
    got = tidu.vmap(lambda v, i: v[i], in_axes=(None, 0))(x, idx)
    want = jax.vmap(lambda v, i: v[i], in_axes=(None, 0))(jnp.asarray(x), idx)
    same(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_vmapped_dynamic_slices_at_batched_starts_keep_every_bit():
    """The batched one-hot selection adds -0.0 elsewhere (halving), so reads and updates of
    -0.0 keep their sign, on NumPy and on XLA, and the derivatives are JAX's."""
    x = np.array([[1.0, -0.0, np.inf, 3.0, np.nan, -2.5, -0.0]] * 4)
    starts = np.array([1, 0, 4, 6], np.int32)  # (the last one clamped)
    upd = np.array([-0.0, 2.0, -0.0])

    def program(lib, lax_):
        return lambda v, s: (lax_.dynamic_slice_in_dim(v, s, 3),
                             lax_.dynamic_update_slice_in_dim(v, upd, s, 0))

    want = jax.vmap(program(jnp, jax.lax))(jnp.asarray(x), starts)
    f = tidu.vmap(program(tnp, tidu.lax))
    got = f(x, starts)
    same(got, want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.signbit(g), np.signbit(w))
    graph = tidu.make_graph(f)(x, starts)
    for g, w in zip(graph.program.run([x, starts], backend="xla"), want, strict=True):
        np.testing.assert_array_equal(np.signbit(g), np.signbit(w))
        np.testing.assert_array_equal(g, w)
    xs = np.arange(28.0).reshape(4, 7) / 7

    def loss(lib, lax_):
        return lambda v: lib.sum(lib.sin(jax.tree.leaves(jax.vmap(program(lib, lax_))(v, starts))[0] if lib is jnp
                                         else tidu.vmap(program(lib, lax_))(v, starts)[0]) * np.arange(3.0))

    same(tidu.grad(loss(tnp, tidu.lax))(xs), jax.grad(loss(jnp, jax.lax))(xs))


def test_custom_linear_solve_registers_each_system_once():
    """The registry of linear systems grew by one entry (two bodies) per call: a process
    solving in a loop held every call's bodies."""
    from tidu.transforms import control

    a = np.array([[3.0, 1.0], [1.0, 2.0]])

    def loss(b, theta):
        x = tidu.lax.custom_linear_solve(lambda v: theta * (a @ v), b, lambda mv, r: tnp.linalg.solve(theta * a, r),
                                         transpose_solve=lambda vm, r: tnp.linalg.solve(theta * a.T, r))
        return tnp.sum(x ** 2)

    grads = [tidu.grad(loss, argnums=(0, 1))(np.array([1.0, 2.0]), 1.0 + k) for k in range(2)]
    size = len(control._SOLVES)
    for k in range(2, 6):
        grads.append(tidu.grad(loss, argnums=(0, 1))(np.array([1.0, 2.0]), 1.0 + k))
    assert len(control._SOLVES) == size
    for k, g in enumerate(grads):
        want = jax.grad(lambda b, t: jnp.sum(jnp.linalg.solve(t * a, b) ** 2), argnums=(0, 1))(
            jnp.array([1.0, 2.0]), 1.0 + k)
        same(g, want)
