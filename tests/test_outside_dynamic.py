"""An outside tester's checks of indexing at traced integer scalars (the primitives
``dynamic_slice`` / ``dynamic_update_slice``), their batching, sparsity and Taylor rules,
the slice-wise accumulation of cotangents in reverse mode and the residuals a scan's
reverse pass stores, ported-from-JAX style: every value is compared with JAX (x64) or an
independent oracle, on the NumPy back end and, where stated, on XLA and C.

The bugs it found first (fixed since) keep their tests here."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp
from tidu import lax

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402


def close(a, b, tol=1e-10):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def AT(m, x):
    """x.at for JAX, tnp.at(x) for tidu (which also works eagerly on NumPy arrays)."""
    return tnp.at(x) if m is tnp else x.at


def pair(make):
    return make(tnp, lax), make(jnp, jax.lax)


V = np.linspace(0.3, 1.7, 6)
A = np.arange(12.0).reshape(3, 4) / 5 + 0.1


# --- x.at[i] at traced indices, every index range, every back end -----------------------------

AT_OPS = {
    "set": lambda x, i: x.at[i].set(-7.0),
    "add": lambda x, i: x.at[i].add(7.0),
    "multiply": lambda x, i: x.at[i].multiply(3.0),
    "min": lambda x, i: x.at[i].min(0.5),
    "set col": lambda x, i: x.at[:, i].set(-7.0),
    "set [i, 1]": lambda x, i: x.at[i, 1].set(-7.0),
    "set [1, i]": lambda x, i: x.at[1, i].set(-7.0),
}


@pytest.mark.parametrize("name", list(AT_OPS))
@pytest.mark.parametrize("i", [0, 2, -1, -3, 3, 9, -12])
def test_at_updates_against_jax_on_every_back_end(name, i):
    """Indices in range, counted once from the end, past the end, and far below -2n (all
    of which JAX updates correctly or drops)."""
    fn = AT_OPS[name]
    ii = np.int64(i)
    want = np.asarray(jax.jit(fn)(jnp.asarray(A), ii))
    np.testing.assert_array_equal(tidu.jit(fn)(A, ii), want)
    program = tidu.make_graph(fn)(A, ii).program
    np.testing.assert_array_equal(program.run([A, ii], backend="xla")[0], want)
    np.testing.assert_array_equal(program.run([A, ii], backend="c")[0], want)


@pytest.mark.parametrize("name", list(AT_OPS))
def test_at_update_between_minus_2n_and_minus_n_updates_nothing(name):
    fn = AT_OPS[name]
    for i in (-4, -5, -6):  # axis 0 has 3 entries, axis 1 has 4
        ii = np.int64(i)
        np.testing.assert_array_equal(tidu.jit(fn)(A, ii), jax.jit(fn)(jnp.asarray(A), ii))


def test_at_update_batched_over_the_index_between_minus_2n_and_minus_n():
    f = lambda x, i: x.at[i].add(1.0)  # noqa: E731
    idx = np.array([0, -3, -4, 5])
    close(tidu.vmap(f, in_axes=(None, 0))(A, idx), jax.vmap(f, in_axes=(None, 0))(jnp.asarray(A), idx))


def test_at_update_gradients_at_in_range_and_dropped_indices():
    def make(m, L):
        def f(x, i):
            y = x.at[i].set(m.sin(x[i - 1]) * x[1]).at[:, i].multiply(x[0, 0])
            return m.sum(y ** 2 * m.arange(1.0, 13.0).reshape(3, 4))
        return f
    f, fj = pair(make)
    for i in (0, 2, -1, -3, 3, 11, -13):
        ii = np.int64(i)
        close(tidu.grad(f)(A, ii), jax.grad(fj)(A, ii))
        close(tidu.hessian(f, mode="RoR")(A, ii), jax.hessian(fj)(A, ii))


# --- index dtypes ----------------------------------------------------------------------------

READ_WRITE = {
    "x[i]": (lambda L, x, i: x[i]),
    "x[:, i]": (lambda L, x, i: x[:, i]),
    "x[i, i]": (lambda L, x, i: x[i, i]),
    "x[i][1:]": (lambda L, x, i: x[i][1:]),
    "dynamic_slice": (lambda L, x, i: L.dynamic_slice(x, (i, i), (2, 2))),
    "dynamic_update_slice": (lambda L, x, i: L.dynamic_update_slice(x, -x[:2, :3], (i, i))),
    "dynamic_update_index_in_dim": (lambda L, x, i: L.dynamic_update_index_in_dim(x, x[0] * 2.0, i, 0)),
    "x.at[i].add": (lambda L, x, i: x.at[i].add(7.0)),
}


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.int8])
@pytest.mark.parametrize("name", list(READ_WRITE))
def test_index_dtypes_on_every_back_end(dtype, name):
    op = READ_WRITE[name]
    fn = lambda x, i: op(lax, x, i)  # noqa: E731
    fj = lambda x, i: op(jax.lax, x, i)  # noqa: E731
    values = (0, 2, 5, 100) + ((-1, -3) if np.issubdtype(dtype, np.signedinteger) else ())
    program = None
    for v in values:
        ii = dtype(v)
        want = np.asarray(jax.jit(fj)(jnp.asarray(A), ii))
        got = tidu.jit(fn)(A, ii)
        np.testing.assert_array_equal(got, want)
        program = program or tidu.make_graph(fn)(A, ii).program
        np.testing.assert_array_equal(program.run([A, ii], backend="xla")[0], want)
        np.testing.assert_array_equal(program.run([A, ii], backend="c")[0], want)


def test_uint8_index_into_a_long_axis():
    x = np.arange(300.0)
    i = np.uint8(250)
    assert tidu.jit(lambda x, i: x[i])(x, i) == 250.0
    close(tidu.jit(lambda x, i: lax.dynamic_slice(x, (i,), (100,)))(x, i), x[200:])


def test_uint8_index_into_a_long_axis_eagerly():
    x = np.arange(300.0)
    close(lax.dynamic_slice(x, (np.uint8(250),), (100,)), jax.lax.dynamic_slice(jnp.asarray(x), (np.uint8(250),),
                                                                                 (100,)))


# --- array dtypes and zero-size axes ---------------------------------------------------------


def test_integer_and_boolean_carries_read_and_written_at_the_counter():
    def make(m, L):
        def f(b, v):
            b, v = m.asarray(b), m.asarray(v)

            def body(i, c):
                bb, vv, cnt = c
                bb = bb.at[i].set(m.logical_not(bb[i - 1]))
                vv = vv.at[i].add(vv[i - 1] * 2)
                return bb, vv, cnt + m.where(bb[i], vv[i], 0).astype(m.int64)
            return L.fori_loop(1, 5, body, (b, v, np.int64(0)))
        return f
    f, fj = pair(make)
    b, v = np.array([True, False, True, False, False]), np.array([3, 254, 5, 7, 1], np.uint8)
    want = jax.jit(fj)(b, v)
    program = tidu.make_graph(f)(b, v).program
    for got in (tidu.jit(f)(b, v), program.run([b, v], backend="xla")):
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
            assert np.asarray(g).dtype == w.dtype


def test_float32_loop_gradient_keeps_float32():
    def make(m, L):
        def f(x):
            x = m.asarray(x)

            def body(i, y):
                return AT(m, y)[i].set(m.sin(y[i - 1]) * x[i] + y[i])
            return m.sum(L.fori_loop(1, 6, body, x * np.float32(0.5)) ** 2)
        return f
    f, fj = pair(make)
    x = V.astype(np.float32)
    g, want = tidu.grad(f)(x), jax.grad(fj)(x)
    assert g.dtype == np.float32
    close(g, want, 1e-5)
    out = tidu.make_graph(tidu.grad(f))(x).program.run([x], backend="xla")[0]
    assert out.dtype == np.float32
    close(out, want, 1e-5)


def test_complex_carry_gradient_is_the_conjugate_of_jax():
    """tidu's gradient of a real function of complex inputs is the conjugate of JAX's
    (checked on a function without indexing too)."""
    def make(m, L):
        def f(x):
            x = m.asarray(x)

            def body(i, y):
                return AT(m, y)[i].set(y[i - 1] * x[i] + m.conj(y[-i]) * 0.3)
            y = L.fori_loop(1, 6, body, x)
            return m.sum(m.real(y * m.conj(y))) + m.real(x[2] * x[3])
        return f
    f, fj = pair(make)
    c = V * (1 + 0.5j)
    want = np.conj(jax.grad(fj)(c))
    close(tidu.grad(lambda x: tnp.sum(tnp.real(x * tnp.conj(x)) * tnp.real(x)))(c),
          np.conj(jax.grad(lambda x: jnp.sum(jnp.real(x * jnp.conj(x)) * jnp.real(x)))(c)))
    close(tidu.grad(f)(c), want)
    close(tidu.make_graph(tidu.grad(f))(c).program.run([c], backend="xla")[0], want)
    t = np.cos(c)
    close(tidu.jvp(f, (c,), (t,))[1], jax.jvp(fj, (c,), (t,))[1])


ZERO_SIZE = {
    "x[i] of (3, 0)": (lambda L, x, i: x[i], np.zeros((3, 0))),
    "x[:, i] of (0, 3)": (lambda L, x, i: x[:, i], np.zeros((0, 3))),
    "size-0 slice": (lambda L, x, i: L.dynamic_slice(x, (i, i), (0, 1)), np.ones((3, 3))),
    "size-0 update": (lambda L, x, i: L.dynamic_update_slice(x, x[:0, :2], (i, i)), np.ones((3, 3)) * 2.0),
    "slice of (3, 0)": (lambda L, x, i: L.dynamic_slice(x, (i, i), (2, 0)), np.zeros((3, 0))),
    "at[i] of (3, 0)": (lambda L, x, i: x.at[i].set(1.0), np.zeros((3, 0))),
    "at[:, i] of (0, 3)": (lambda L, x, i: x.at[:, i].set(1.0), np.zeros((0, 3))),
}


@pytest.mark.parametrize("name", list(ZERO_SIZE))
def test_zero_size_axes(name):
    op, x = ZERO_SIZE[name]
    f = lambda x, i: op(lax, x, i)  # noqa: E731
    fj = lambda x, i: op(jax.lax, x, i)  # noqa: E731
    i = np.int64(1)
    want = np.asarray(jax.jit(fj)(jnp.asarray(x), i))
    got = tidu.jit(f)(x, i)
    assert got.shape == want.shape
    close(got, want)
    program = tidu.make_graph(f)(x, i).program
    for backend in ("xla", "c"):
        close(program.run([x, i], backend=backend)[0], want)
    loss = lambda x, i: tnp.sum(f(x, i) ** 2)  # noqa: E731
    gwant = jax.grad(lambda x, i: jnp.sum(fj(x, i) ** 2))(x, i)
    close(tidu.grad(loss)(x, i), gwant)
    for backend in ("xla", "c"):
        close(tidu.make_graph(tidu.grad(loss))(x, i).program.run([x, i], backend=backend)[0], gwant)
    idx = np.array([0, 1, 5, -1])
    close(tidu.vmap(f, in_axes=(None, 0))(x, idx), jax.vmap(fj, in_axes=(None, 0))(jnp.asarray(x), idx))


# --- several reads of one array: the slice-wise accumulation of cotangents ------------------

MULTI_READS = {
    "reads at i, j and whole": lambda m, L, x, i, j: (m.sin(x[i, j]) * x[j % 3].sum() + m.sum(x ** 2) * x[i][1]
                                                      + x[:, j].prod()),
    "one read twice": lambda m, L, x, i, j: x[i, j] * x[i, j] + m.sum(m.cos(x[i]) * x[i]),
    "overlapping slices": lambda m, L, x, i, j: (m.sum(m.sin(L.dynamic_slice(x, (i, j), (2, 2))))
                                                 * x[i - 1, j - 1] + m.sum(L.dynamic_slice(x, (i, i), (3, 1)))),
    "written then read": lambda m, L, x, i, j: m.sum(AT(m, x)[i].set(x[j % 3] ** 2)[i - 1] * x[i]),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MULTI_READS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_several_reads_of_one_array(name, dtype):
    body = MULTI_READS[name]
    f = lambda x, i, j: body(tnp, lax, x, i, j)  # noqa: E731
    fj = lambda x, i, j: body(jnp, jax.lax, jnp.asarray(x), i, j)  # noqa: E731
    x = A.astype(dtype)
    tol = 1e-10 if dtype == np.float64 else 1e-4
    program = None
    for i, j in ((0, 1), (2, 3), (-1, 7), (5, -6)):
        ii, jj = np.int64(i), np.int64(j)
        want = jax.grad(fj)(x, ii, jj)
        got = tidu.grad(f)(x, ii, jj)
        assert got.dtype == want.dtype
        close(got, want, tol)
        program = program or tidu.make_graph(tidu.grad(f))(x, ii, jj).program
        close(program.run([x, ii, jj], backend="xla")[0], want, tol)
        close(program.run([x, ii, jj], backend="c")[0], want, tol)
        if dtype == np.float64 and i in (0, 5):
            H = jax.hessian(fj)(x, ii, jj)
            for mode in ("FoR", "RoR"):
                close(tidu.hessian(f, mode=mode)(x, ii, jj), H)


@pytest.mark.slow
def test_indices_from_argmax_and_argmin_eager_and_traced():
    def make(m, L):
        def f(x):
            x = m.asarray(x)
            i = m.argmax(m.sin(3 * x))
            j = m.argmin(x)
            return x[i] * x[j] + m.sum(AT(m, x)[i].set(x[j] ** 3) ** 2) + m.sum(m.take(x, j - 1, mode="clip"))
        return f
    f, fj = pair(make)
    close(f(V), fj(V))  # eager: NumPy in, no transform
    close(tidu.jit(f)(V), fj(V))
    close(tidu.grad(f)(V), jax.grad(fj)(V))
    close(tidu.jacfwd(tidu.grad(f))(V), jax.hessian(fj)(V))
    program = tidu.make_graph(tidu.grad(f))(V).program
    for backend in ("xla", "c"):
        close(program.run([V], backend=backend)[0], jax.grad(fj)(V))


# --- loops -----------------------------------------------------------------------------------


def _read_write_same_carry(m, L):
    """Several reads of the carried array and of a closed-over one, two writes, in a step."""
    def f(x):
        x = m.asarray(x)

        def body(i, y):
            a = y[i] * y[i - 1] + x[i] * x[(i + 2) % 6]
            return AT(m, AT(m, y)[i].add(m.sin(a)))[i - 2].multiply(1.1)
        return m.sum(L.fori_loop(0, 6, body, x * 1.0) ** 2)
    return f


def _reverse_scan(m, L):
    """A reverse scan writing its carried array at a carried (decreasing) index."""
    def f(x):
        x = m.asarray(x)

        def step(c, xi):
            k, y = c
            y = AT(m, y)[k].set(m.cos(y[k + 1]) * xi)
            return (k - 1, y), y[k] * xi
        (_, y), ys = L.scan(step, (np.int64(4), x), x[:5], reverse=True)
        return m.sum(y ** 2) + m.sum(ys)
    return f


def _scan_in_scan(m, L):
    def f(x):
        x = m.asarray(x)

        def outer(c, i):
            def inner(d, j):
                return d + x[i] * x[j] * c[j], None
            s, _ = L.scan(inner, 0.0, m.arange(6))
            return AT(m, c)[i].set(s * 0.1), s
        c, ss = L.scan(outer, x, m.arange(6))
        return m.sum(c) + m.sum(ss ** 2)
    return f


def _argmax_of_the_carry(m, L):
    def f(x):
        x = m.asarray(x)

        def body(i, c):
            y, s = c
            j = m.argmax(m.sin(3.0 * y + i))
            k = m.argmin(y[1:]) + 1
            v = y[j] * y[k] + x[i % 6]
            y = AT(m, y)[j].set(m.cos(v))
            y = AT(m, y)[k - 1].add(v * s)
            return y, s * 0.9 + y[j]
        y, s = L.fori_loop(0, 7, body, (x, 0.5))
        return m.sum(y ** 3) + s
    return f


def _cond_and_switch_in_scan(m, L):
    def f(x):
        x = m.asarray(x)

        def body(y, i):
            y = L.cond(y[i] > 0.8, lambda y: AT(m, y)[i].set(m.sin(y[i - 1]) * x[i]),
                       lambda y: AT(m, y)[i + 1].multiply(y[i] + x[-i]), y)
            j = L.switch(i % 3, [lambda: i, lambda: i + 2, lambda: np.int64(0)])
            return y, y[j] * x[j]
        y, ys = L.scan(body, x, m.arange(6))
        return m.sum(y ** 2) + m.sum(ys)
    return f


LOOPS = {f.__name__: f for f in (_read_write_same_carry, _reverse_scan, _scan_in_scan, _argmax_of_the_carry,
                                  _cond_and_switch_in_scan)}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LOOPS))
def test_loops_against_jax_in_every_mode(name):
    f, fj = pair(LOOPS[name])
    close(tidu.jit(f)(V), fj(V))
    g = jax.grad(fj)(V)
    close(tidu.grad(f)(V), g)
    close(tidu.jit(tidu.grad(f))(V), g)
    close(tidu.jacrev(f)(V), g)
    close(tidu.jacfwd(f)(V), g)
    H = jax.hessian(fj)(V)
    for mode in ("FoF", "FoR", "RoF", "RoR"):
        close(tidu.hessian(f, mode=mode)(V), H)
    program = tidu.make_graph(tidu.grad(f))(V).program
    close(program.run([V], backend="xla")[0], g)
    batch = np.stack([V, V[::-1], 0.5 * V])
    close(tidu.vmap(tidu.grad(f))(batch), jax.vmap(jax.grad(fj))(batch))


def _indexed_by_an_argument(m, L):
    def f(x, k):
        x = m.asarray(x)

        def body(i, c):
            y, s = c
            j = (i + k) % 6
            y = AT(m, y)[j].set(m.sin(y[j - 1]) + x[k])
            return y, s + y[k] * x[j]
        y, s = L.fori_loop(0, 4, body, (x * 1.0, 0.0))
        return m.sum(y ** 2) + s + L.dynamic_slice(y, (k,), (2,))[1]
    return f


@pytest.mark.slow
def test_vmap_over_the_index_of_a_loop():
    f, fj = pair(_indexed_by_an_argument)
    ks = np.array([0, 3, 5, -1, 7, -8])
    xs = np.stack([V, V * 2, V[::-1], -V, V + 1, V ** 2])
    close(tidu.vmap(f, in_axes=(None, 0))(V, ks), jax.vmap(fj, in_axes=(None, 0))(V, ks))
    close(tidu.vmap(tidu.grad(f))(xs, ks), jax.vmap(jax.grad(fj))(xs, ks))
    close(tidu.jit(tidu.vmap(tidu.grad(f)))(xs, ks), jax.vmap(jax.grad(fj))(xs, ks))
    close(tidu.vmap(tidu.vmap(f, in_axes=(None, 0)), in_axes=(0, None))(xs, ks),
          jax.vmap(jax.vmap(fj, in_axes=(None, 0)), in_axes=(0, None))(xs, ks))
    close(tidu.jacrev(lambda x: tidu.vmap(f, in_axes=(None, 0))(x, ks))(V),
          jax.jacrev(lambda x: jax.vmap(fj, in_axes=(None, 0))(x, ks))(V))
    program = tidu.make_graph(tidu.vmap(tidu.grad(f)))(xs, ks).program
    close(program.run([xs, ks], backend="xla")[0], jax.vmap(jax.grad(fj))(xs, ks))
    for k in (-1, 9):
        kk = np.int64(k)
        close(tidu.hessian(f, mode="RoF")(V, kk), jax.hessian(fj)(V, kk))


@pytest.mark.slow
def test_grad_of_grad_through_a_scan_vmapped_and_jitted():
    def make(m, L):
        def f(x):
            x = m.asarray(x)

            def body(c, i):
                return c + x[i] * m.sin(c * x[i - 1]), c * x[i]
            c, ys = L.scan(body, 0.3, m.arange(6))
            return c + m.sum(ys ** 2)
        return f
    f, fj = pair(make)
    gg = lambda x: tnp.sum(tidu.grad(f)(x) ** 2)  # noqa: E731
    ggj = lambda x: jnp.sum(jax.grad(fj)(x) ** 2)  # noqa: E731
    batch = np.stack([V, V[::-1], V * 0.5])
    close(tidu.grad(gg)(V), jax.grad(ggj)(V))
    close(tidu.vmap(tidu.grad(gg))(batch), jax.vmap(jax.grad(ggj))(batch))
    close(tidu.jit(tidu.vmap(tidu.grad(gg)))(batch), jax.vmap(jax.grad(ggj))(batch))
    close(tidu.make_graph(tidu.grad(gg))(V).program.run([V], backend="xla")[0], jax.grad(ggj)(V))


def _scan_with_length(length, reverse, checkpoint=None):
    def make(m, L):
        def f(x, w):
            x, w = m.asarray(x), m.asarray(w)

            def step(c, xs):
                k, y, acc = c
                wi, r = xs
                a = x[k] * y[k - 1] + x[(k + 3) % 6] * wi[k % 3] + y[-k] * x[k]
                y = AT(m, y)[k].add(m.sin(a) * r)
                y = AT(m, y)[k + 1].multiply(m.cos(y[k]))
                return (k + 1, y, acc + x[k] * a), a * y[k]
            kw = {"checkpoint": checkpoint} if m is tnp and checkpoint is not None else {}
            (_, y, acc), ys = L.scan(step, (np.int64(0), x * 0.5, 0.0), (w[:length], m.arange(length) * 0.1 + 1.0),
                                     reverse=reverse, **kw)
            return m.sum(y ** 2) + acc + m.sum(ys * m.arange(1.0, length + 1))
        return f
    return make


W = np.linspace(-0.5, 0.8, 12).reshape(4, 3)


@pytest.mark.parametrize(("length", "reverse", "checkpoint"), [
    (0, False, None), (1, False, None), (1, True, None), (4, False, None), (4, True, None),
    (4, False, "sqrt"), (4, True, 2), (4, False, (2, 1)),
])
@pytest.mark.slow
def test_scans_of_every_length_direction_and_checkpoint(length, reverse, checkpoint):
    f, fj = pair(_scan_with_length(length, reverse, checkpoint))
    close(tidu.jit(f)(V, W), fj(V, W))
    for argnum in (0, 1):
        close(tidu.grad(f, argnum)(V, W), jax.grad(fj, argnum)(V, W))
    close(tidu.hessian(f, mode="RoR" if reverse else "FoR")(V, W), jax.hessian(fj)(V, W))
    if length and checkpoint is None:
        close(tidu.make_graph(tidu.grad(f))(V, W).program.run([V, W], backend="xla")[0], jax.grad(fj)(V, W))


def _recurrence(checkpoint):
    """The residual cut's case: y[i] from y[i - 1] and y[i - 2]; the reverse steps read a
    few entries of the carried array."""
    def make(m, L):
        def f(a):
            a = m.asarray(a)

            def body(c, i):
                y, s = c
                v = m.sin(y[i - 1]) * a[0] + y[i - 2] * a[1] + s * 0.01
                y = AT(m, y)[i].set(v)
                return (y, s + v * y[0]), v ** 2
            kw = {"checkpoint": checkpoint} if m is tnp and checkpoint is not None else {}
            (y, s), vs = L.scan(body, (m.zeros(12) + a[2], a[0] * 1.0), m.arange(2, 12), **kw)
            return m.sum(y ** 2) + s + m.sum(m.cos(vs))
        return f
    return make


@pytest.mark.slow
@pytest.mark.parametrize("checkpoint", [None, "sqrt", 2, (4, 2), lax.Revolve(5)])
def test_recurrence_on_a_carried_array_with_checkpoints(checkpoint):
    f, fj = pair(_recurrence(checkpoint))
    a = np.array([0.7, 0.3, 0.2])
    g = jax.grad(fj)(a)
    close(tidu.grad(f)(a), g)
    close(tidu.jacrev(f)(a), g)
    close(tidu.hessian(f, mode="RoR")(a), jax.hessian(fj)(a))


@pytest.mark.parametrize("checkpoint", [None, "sqrt", 2])
def test_recurrence_with_checkpoints_on_xla(checkpoint):
    f, fj = pair(_recurrence(checkpoint))
    a = np.array([0.7, 0.3, 0.2])
    close(tidu.make_graph(tidu.grad(f))(a).program.run([a], backend="xla")[0], jax.grad(fj)(a))


def _counter_and_xs(checkpoint, counter):
    def f(a):
        if counter:
            step = lambda c, xi: ((c[0] + 1, c[1] + 0.1 * tnp.sin(c[1] * xi)), None)  # noqa: E731
            return tnp.sum(lax.scan(step, (0, a), tnp.arange(9.0), checkpoint=checkpoint)[0][1] ** 2)
        step = lambda c, xi: (c + 0.1 * tnp.sin(c * xi), None)  # noqa: E731
        return tnp.sum(lax.scan(step, a, tnp.arange(9.0), checkpoint=checkpoint)[0] ** 2)
    return f


@pytest.mark.parametrize(("checkpoint", "counter"), [("sqrt", True), ((4, 2), False)])
def test_checkpointed_scan_over_xs_on_xla(checkpoint, counter):
    f = _counter_and_xs(checkpoint, counter)
    a = np.array([0.7, 0.3])
    close(tidu.make_graph(tidu.grad(f))(a).program.run([a], backend="xla")[0], tidu.grad(f)(a))


@pytest.mark.parametrize(("checkpoint", "counter"), [("sqrt", False), (3, True), ((4, 2), True)])
def test_checkpointed_scan_over_xs_numpy_against_unchecked(checkpoint, counter):
    a = np.array([0.7, 0.3])
    close(tidu.grad(_counter_and_xs(checkpoint, counter))(a), tidu.grad(_counter_and_xs(None, counter))(a))


def test_scan_of_length_zero_over_xs_on_xla():
    def f(a, w):
        return tnp.sum(lax.scan(lambda c, wi: (c * wi, c), a, w)[0])
    a, w = np.array([0.7, 0.3]), np.zeros((0, 2))
    close(tidu.make_graph(f)(a, w).program.run([a, w], backend="xla")[0], np.sum(a))


@pytest.mark.slow
def test_fori_loop_with_traced_bounds_forward_mode():
    def make(m, L):
        def f(x, n):
            x = m.asarray(x)

            def body(i, y):
                return AT(m, y)[i].set(m.sin(y[i - 1]) * x[i] + y[-i])
            return m.sum(L.fori_loop(1, n, body, x) ** 2)
        return f
    f, fj = pair(make)
    for n in (0, 1, 6, 9):
        nn = np.int64(n)
        close(tidu.jit(f)(V, nn), fj(V, nn))
        close(tidu.jacfwd(f)(V, nn), jax.jacfwd(fj)(V, nn))
        close(tidu.hessian(f, mode="FoF")(V, nn), jax.hessian(fj)(V, nn))
    ns = np.array([0, 3, 6, 2])
    close(tidu.vmap(tidu.jacfwd(f), in_axes=(None, 0))(V, ns), jax.vmap(jax.jacfwd(fj), in_axes=(None, 0))(V, ns))
    t = np.cos(V)
    program = tidu.make_graph(lambda x, n: tidu.jvp(lambda x: f(x, n), (x,), (t,))[1])(V, np.int64(5)).program
    close(program.run([V, np.int64(5)], backend="xla")[0], jax.jvp(lambda x: fj(x, 5), (V,), (t,))[1])


# --- batched starts --------------------------------------------------------------------------

BATCHED = {
    "dynamic_slice_in_dim axis 1": lambda L, x, i: L.dynamic_slice_in_dim(x, i, 3, axis=1),
    "dynamic_slice 2-d": lambda L, x, i: L.dynamic_slice(x, (i, 2 - i), (2, 3)),
    "dynamic_update_slice_in_dim": lambda L, x, i: L.dynamic_update_slice_in_dim(x, x[:, :2] * -1.0, i, axis=1),
    "dynamic_update_slice 2-d": lambda L, x, i: L.dynamic_update_slice(x, x[:3, :2] * -1.0, (i, i + 1)),
    "dynamic_index_in_dim": lambda L, x, i: L.dynamic_index_in_dim(x, i, 1, keepdims=True),
    "x[i, -i]": lambda L, x, i: x[i, -i],
}


@pytest.mark.parametrize("name", list(BATCHED))
def test_batched_starts_and_arrays(name):
    op = BATCHED[name]
    f = lambda x, i: op(lax, tnp.asarray(x), i)  # noqa: E731
    fj = lambda x, i: op(jax.lax, jnp.asarray(x), i)  # noqa: E731
    x = np.arange(20.0).reshape(4, 5) / 3 + 0.1
    idx = np.array([-3, -1, 0, 2, 3, 4, 9], np.int32)
    xs = np.stack([x * (k + 1) - k for k in range(len(idx))])
    close(tidu.vmap(f, in_axes=(None, 0))(x, idx), jax.vmap(fj, in_axes=(None, 0))(x, idx))
    close(tidu.vmap(f, in_axes=(2, 0), out_axes=-1)(np.moveaxis(xs, 0, 2), idx),
          jax.vmap(fj, in_axes=(2, 0), out_axes=-1)(np.moveaxis(xs, 0, 2), idx))

    def loss(m, g):
        return lambda x, i: m.sum(m.sin(g(x, i)) * m.arange(1.0, g(x, i).size + 1).reshape(g(x, i).shape))
    want = jax.vmap(jax.grad(loss(jnp, fj)))(xs, idx)
    close(tidu.vmap(tidu.grad(loss(tnp, f)))(xs, idx), want)
    program = tidu.make_graph(tidu.vmap(tidu.grad(loss(tnp, f))))(xs, idx).program
    close(program.run([xs, idx], backend="xla")[0], want)
    close(program.run([xs, idx], backend="c")[0], want)


# --- sparsity and the sparse Hessian path ----------------------------------------------------

N = 130
VN = np.cos(np.arange(N) * 0.37) + 0.1 * np.arange(N) / N


def _pairs_in_a_loop(m, L):
    def f(x):
        x = m.asarray(x)
        return L.fori_loop(0, N, lambda i, acc: acc + m.sin(x[i] * x[(i * 7 + 3) % N]), 0.0)
    return f


def _recurrence_long(m, L):
    def f(x):
        x = m.asarray(x)
        return m.sum(L.fori_loop(1, N, lambda i, y: AT(m, y)[i].set(y[i - 1] * y[i] + x[N - 1 - i]), x) ** 2) * 1e-3
    return f


def _argmax_read(m, L):
    return lambda x: x[m.argmax(x)] ** 3 * x[m.argmax(x) - 1] + m.sum(x ** 2) * 0.01


@pytest.mark.parametrize("make", [_pairs_in_a_loop, _recurrence_long, _argmax_read])
def test_hessian_of_a_long_vector_and_its_sparsity(make):
    """The default Hessian of 130 inputs reads the sparsity pattern first: a pattern that
    misses a nonzero would give a wrong Hessian."""
    f, fj = pair(make)
    H = np.asarray(jax.hessian(fj)(VN))
    close(tidu.hessian(f)(VN), H, 1e-9)
    pattern = tidu.hessian_sparsity(f)(VN)
    pattern = pattern.toarray() if hasattr(pattern, "toarray") else np.asarray(pattern)
    assert (pattern.astype(bool) | (H == 0)).all()


# --- Taylor mode -----------------------------------------------------------------------------


def _derivatives_along(g, order):
    ds = [g]
    for _ in range(order):
        ds.append(lambda t, d=ds[-1]: jax.jvp(d, (t,), (1.0,))[1])
    return [np.asarray(d(0.0)) for d in ds]


JETS = {
    "dynamic_slice at argmax - 1": lambda m, L: (lambda x: m.sum(m.exp(L.dynamic_slice(x, (m.argmax(x) - 1,),
                                                                                          (3,))))),
    "dynamic_update_slice past the end": lambda m, L: (lambda x: m.sum(m.sin(L.dynamic_update_slice(
        x, x[:2] ** 2, (m.argmin(x) + 4,))))),
    "at[:, j].multiply": lambda m, L: (lambda x: m.sum(m.tanh(AT(m, x.reshape(2, 3))[:, m.argmax(x) % 3].multiply(
        x[1])) * x.reshape(2, 3)[1, m.argmax(x) % 3])),
}


@pytest.mark.parametrize("name", list(JETS))
def test_jet_through_dynamic_slices(name):
    f, fj = pair(JETS[name])
    series = [np.cos(np.arange(6.0)), np.sin(V), V * 0.3]
    path = lambda t: jnp.asarray(V) + sum(s * t ** (k + 1) / math.factorial(k + 1)  # noqa: E731
                                          for k, s in enumerate(series))
    want = _derivatives_along(lambda t: fj(path(t)), 3)
    y, ys = tidu.jet(f, (V,), (series,))
    close(y, want[0])
    for got, w in zip(ys, want[1:], strict=True):
        close(got, w, 1e-8)
    close(tidu.jit(lambda x: tidu.jet(f, (x,), (series,))[1][-1])(V), want[-1], 1e-8)


def test_jet_through_a_loop_reading_at_its_counter():
    def make(m, L):
        return lambda x: m.sum(L.fori_loop(1, 5, lambda i, y: AT(m, y)[i].set(m.sin(y[i - 1]) * y[i]), x) ** 2)
    f, fj = pair(make)
    d = np.cos(np.arange(6.0))
    want = _derivatives_along(lambda t: fj(jnp.asarray(V) + t * d), 2)
    y, ys = tidu.jet(f, (V,), ([d, np.zeros(6)],))
    close(y, want[0])
    close(ys[0], want[1], 1e-8)
    close(ys[1], want[2], 1e-8)


# --- eager (NumPy in, no transform) against traced ---------------------------------------------


@pytest.mark.parametrize("start", [(0, 0), (1, 2), (-1, 3), (5, -7), (np.int32(2), np.int32(-1)),
                                   (np.uint8(1), np.uint8(9))])
def test_eager_lax_dynamic_slices_equal_traced_and_jax(start):
    x = A
    u = -np.ones((2, 3))
    for fn, fj in (
        (lambda x, s0, s1: lax.dynamic_slice(x, (s0, s1), (2, 3)),
         lambda x, s0, s1: jax.lax.dynamic_slice(x, (s0, s1), (2, 3))),
        (lambda x, s0, s1: lax.dynamic_update_slice(x, u, (s0, s1)),
         lambda x, s0, s1: jax.lax.dynamic_update_slice(x, u, (s0, s1))),
        (lambda x, s0, s1: lax.dynamic_slice_in_dim(x, s1, 2, axis=1),
         lambda x, s0, s1: jax.lax.dynamic_slice_in_dim(x, s1, 2, axis=1)),
        (lambda x, s0, s1: lax.dynamic_update_index_in_dim(x, x[0] * 3, s0, 0),
         lambda x, s0, s1: jax.lax.dynamic_update_index_in_dim(x, x[0] * 3, s0, 0)),
        (lambda x, s0, s1: tnp.at(x)[s0 % 3, s1 % 4].add(5.0),
         lambda x, s0, s1: x.at[s0 % 3, s1 % 4].add(5.0)),
    ):
        s0, s1 = start
        s0 = np.int64(s0) if isinstance(s0, int) else s0
        s1 = np.int64(s1) if isinstance(s1, int) else s1
        want = np.asarray(jax.jit(fj)(jnp.asarray(x), s0, s1))
        eager = fn(x, s0, s1)
        assert isinstance(eager, np.ndarray)
        np.testing.assert_array_equal(eager, want)
        np.testing.assert_array_equal(tidu.jit(fn)(x, s0, s1), want)


# --- reads along both axes of a closed-over array in a scan; unroll; lax.map ----------------


def _both_axes(unroll):
    def make(m, L):
        def f(x):
            x = m.asarray(x)

            def step(c, i):
                # cotangents on axis 0 and axis 1 of x in one step: two updates of slices of zeros
                e = x[i % 3, i]
                s = L.dynamic_slice(x, (i % 2, i), (2, 1))
                return c + m.sum(m.sin(x[i % 3]) * c) + m.sum(x[:, i] ** 2) * e + m.sum(s) * e, c * e
            c, ys = L.scan(step, 0.1, m.arange(4), unroll=unroll)
            return c + m.sum(ys)
        return f
    return make


def _mapped(m, L):
    def f(x):
        x = m.asarray(x)
        return m.sum(L.map(lambda i: x[i] * x[i - 1, i] + x[:, i].sum(), m.arange(3)) ** 2)
    return f


X34 = np.linspace(0.2, 1.5, 12).reshape(3, 4)


@pytest.mark.slow
@pytest.mark.parametrize("make", [_both_axes(1), _both_axes(2), _both_axes(True), _mapped])
def test_reads_along_both_axes_unrolled_and_mapped(make):
    f, fj = pair(make)
    close(tidu.jit(f)(X34), fj(X34))
    g = jax.grad(fj)(X34)
    close(tidu.grad(f)(X34), g)
    close(tidu.hessian(f, mode="RoR")(X34), jax.hessian(fj)(X34))
    close(tidu.make_graph(tidu.grad(f))(X34).program.run([X34], backend="xla")[0], g)


@pytest.mark.slow
def test_vmap_over_an_index_read_in_a_scan_then_reverse_mode():
    """A batched start inside a scan (one-hot selections) under grad, jacrev, RoR."""
    def make(m, L):
        def f(x, k):
            x = m.asarray(x)

            def step(c, i):
                j = (i + k) % 4
                return c + m.sum(m.sin(x[:, j]) * c) + x[k % 3, j] * x[i % 3, k], c
            c, ys = L.scan(step, 0.1, m.arange(5))
            return c + m.sum(ys ** 2)
        return f
    f, fj = pair(make)
    ks = np.array([0, 2, -1, 7, -5])
    want = jax.vmap(jax.grad(fj), in_axes=(None, 0))(X34, ks)
    close(tidu.vmap(tidu.grad(f), in_axes=(None, 0))(X34, ks), want)
    close(tidu.jacrev(lambda x: tidu.vmap(f, in_axes=(None, 0))(x, ks))(X34),
          jax.jacrev(lambda x: jax.vmap(fj, in_axes=(None, 0))(x, ks))(X34))
    close(tidu.vmap(tidu.hessian(f, mode="RoR"), in_axes=(None, 0))(X34, ks),
          jax.vmap(jax.hessian(fj), in_axes=(None, 0))(X34, ks))
    program = tidu.make_graph(tidu.vmap(tidu.grad(f), in_axes=(None, 0)))(X34, ks).program
    close(program.run([X34, ks], backend="xla")[0], want)


def test_item_assignment_into_a_copy_in_a_loop_body():
    def g(x):
        def body(i, y):
            z = y * 1.0
            z[i] = tnp.sin(z[i - 1]) * 2.0
            return z
        return tnp.sum(lax.fori_loop(1, 4, body, x * 1.0) ** 2)
    gj = lambda x: jnp.sum(jax.lax.fori_loop(1, 4, lambda i, y: y.at[i].set(jnp.sin(y[i - 1]) * 2.0), x * 1.0) ** 2)  # noqa: E731
    v = np.linspace(0.1, 1.0, 5)
    close(tidu.jit(g)(v), gj(v))
    close(tidu.grad(g)(v), jax.grad(gj)(v))


def test_item_assignment_into_the_loop_parameter():
    def g(x):
        def body(i, y):
            y[i] = tnp.sin(y[i - 1]) * 2.0
            return y
        return tnp.sum(lax.fori_loop(1, 4, body, x * 1.0) ** 2)
    gj = lambda x: jnp.sum(jax.lax.fori_loop(1, 4, lambda i, y: y.at[i].set(jnp.sin(y[i - 1]) * 2.0), x * 1.0) ** 2)  # noqa: E731
    v = np.linspace(0.1, 1.0, 5)
    close(tidu.jit(g)(v), gj(v))
