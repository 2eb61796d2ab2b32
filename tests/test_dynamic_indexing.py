"""Indexing at traced integers (a loop counter, an argmax): ``x[i]``, ``x[i, j]``,
``x[:, i]``, ``x.at[i].set(v)`` and ``tidu.lax.dynamic_slice`` / ``dynamic_update_slice``
and their one-axis forms, against JAX: values at in-range, negative and out-of-range
indices (clamped when read, dropped when written, as JAX's), derivatives, vmap, loops,
StableHLO run in XLA, and the errors bad indices get."""

from __future__ import annotations

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp
from tidu import lax

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

A = np.arange(12.0).reshape(3, 4) / 7 + 0.25
V = np.linspace(0.5, 2.0, 5)
INDICES = [0, 2, -1, -3, 5, -9]  # in range, negative, out of range both ways


def close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-14)


# (name, function of (m, L, x, i, j)); m is tnp or jnp, L tidu.lax or jax.lax
READS = {
    "x[i]": lambda m, L, x, i, j: x[i],
    "x[i, j]": lambda m, L, x, i, j: x[i, j],
    "x[:, i]": lambda m, L, x, i, j: x[:, i],
    "x[i, 1:]": lambda m, L, x, i, j: x[i, 1:],
    "x[..., j]": lambda m, L, x, i, j: x[..., j],
    "x[None, i, ::-1]": lambda m, L, x, i, j: x[None, i, ::-1],
    "x[i][j]": lambda m, L, x, i, j: x[i][j],
    "x[i + 1 - j]": lambda m, L, x, i, j: x[i + 1 - j],
    "dynamic_slice": lambda m, L, x, i, j: L.dynamic_slice(x, (i, j), (2, 3)),
    "dynamic_slice static": lambda m, L, x, i, j: L.dynamic_slice(x, (1, j), (2, 2)),
    "dynamic_slice_in_dim": lambda m, L, x, i, j: L.dynamic_slice_in_dim(x, j, 2, axis=1),
    "dynamic_index_in_dim": lambda m, L, x, i, j: L.dynamic_index_in_dim(x, i, 0, keepdims=False),
}

WRITES = {
    "set": lambda m, L, x, i, j: x.at[i].set(m.sin(x[0]) * 2.0),
    "set [i, j]": lambda m, L, x, i, j: x.at[i, j].set(x[0, 0] ** 2),
    "set [:, j]": lambda m, L, x, i, j: x.at[:, j].set(m.arange(3.0)),
    "set [i, 1:3]": lambda m, L, x, i, j: x.at[i, 1:3].set(x[1, :2] * 3.0),
    "add": lambda m, L, x, i, j: x.at[i].add(x[2] * x[1]),
    "multiply": lambda m, L, x, i, j: x.at[j, i].multiply(x[1, 1]),
    "divide": lambda m, L, x, i, j: x.at[i].divide(x[0] + 2.0),
    "min": lambda m, L, x, i, j: x.at[:, j].min(0.6),
    "max": lambda m, L, x, i, j: x.at[i].max(x[1]),
    "power": lambda m, L, x, i, j: x.at[i, j].power(2.0),
    "dynamic_update_slice": lambda m, L, x, i, j: L.dynamic_update_slice(x, m.cos(x[:2, :2]), (i, j)),
    "dynamic_update_slice static": lambda m, L, x, i, j: L.dynamic_update_slice(x, m.cos(x[:2, :2]), (1, j)),
    "dynamic_update_slice_in_dim": lambda m, L, x, i, j: L.dynamic_update_slice_in_dim(x, x[:, :2] * 2.0, j, 1),
    "dynamic_update_index_in_dim": lambda m, L, x, i, j: L.dynamic_update_index_in_dim(x, m.exp(x[0]), i, 0),
}


def pair(fn):
    def mine(x, i, j):
        return fn(tnp, lax, x, i, j)

    def theirs(x, i, j):
        return fn(jnp, jax.lax, jnp.asarray(x), i, j)
    return mine, theirs


@pytest.mark.parametrize("name", [*READS, *WRITES])
def test_values_and_gradients_equal_jax_at_every_index(name):
    mine, theirs = pair({**READS, **WRITES}[name])
    f = tidu.jit(mine)
    g = tidu.jit(tidu.grad(lambda x, i, j: tnp.sum(tnp.sin(mine(x, i, j)))))
    gj = jax.jit(jax.grad(lambda x, i, j: jnp.sum(jnp.sin(theirs(x, i, j)))))
    for i in INDICES:
        for j in (1, -1, 7):
            ii, jj = np.int64(i), np.int64(j)
            close(f(A, ii, jj), jax.jit(theirs)(A, ii, jj))
            close(g(A, ii, jj), gj(A, ii, jj))


@pytest.mark.parametrize("name", ["x[i, j]", "dynamic_slice", "set [i, 1:3]", "dynamic_update_slice"])
def test_forward_mode_and_vmap_over_the_index(name):
    mine, theirs = pair({**READS, **WRITES}[name])
    t = 0.1 * np.cos(A)
    got = tidu.jvp(lambda x: mine(x, np.int64(1), np.int64(2)), (A,), (t,))
    want = jax.jvp(lambda x: theirs(x, np.int64(1), np.int64(2)), (A,), (t,))
    close(got[0], want[0])
    close(got[1], want[1])
    idx = np.array([0, 2, -1, 4])
    close(tidu.vmap(mine, in_axes=(None, 0, None))(A, idx, np.int64(1)),
          jax.vmap(theirs, in_axes=(None, 0, None))(A, idx, np.int64(1)))
    close(tidu.vmap(mine, in_axes=(0, 0, 0))(np.stack([A, 2 * A, A + 1, -A]), idx, idx[::-1]),
          jax.vmap(theirs, in_axes=(0, 0, 0))(jnp.stack([A, 2 * A, A + 1, -A]), idx, idx[::-1]))


def _recurrence(m, L):
    """A loop that reads and writes its carry at the loop counter."""
    def f(v):
        def body(k, y):
            y = y.at[k].set(y[k - 1] * m.sin(v[k]) + v[k] ** 2)
            return L.dynamic_update_slice(y, L.dynamic_slice(y, (k - 1,), (2,)) * 0.5, (k,))
        return m.sum(L.fori_loop(1, 5, body, v) ** 2)
    return f


def _window_sum(m, L):
    """A scan whose step reads a window of a closed-over array at the carried offset."""
    def f(v):
        def step(c, _):
            k, acc = c
            return (k + 1, acc + m.prod(L.dynamic_slice_in_dim(v, k, 3))), acc
        (_, acc), accs = L.scan(step, (np.int64(0), 0.0), None, length=4)
        return acc + m.sum(m.tanh(accs))
    return f


@pytest.mark.parametrize("make", [_recurrence, _window_sum])
def test_loops_indexed_by_their_counter(make):
    f, fj = make(tnp, lax), make(jnp, jax.lax)
    close(tidu.jit(f)(V), jax.jit(fj)(V))
    close(tidu.grad(f)(V), jax.grad(fj)(V))
    close(tidu.hessian(f)(V), jax.hessian(fj)(V))
    close(tidu.jacfwd(tidu.grad(f))(V), jax.hessian(fj)(V))
    batch = np.stack([V, V[::-1], 0.5 * V])
    close(tidu.vmap(tidu.grad(f))(batch), jax.vmap(jax.grad(fj))(batch))
    program = tidu.make_graph(tidu.grad(f))(V).program
    assert "stablehlo.while" in program.to_stablehlo()
    close(program.run([V], backend="xla")[0], jax.grad(fj)(V))


def test_infinities_and_nan_are_read_exactly_and_do_not_spread():
    x = np.array([0.5, np.inf, np.nan, -np.inf, 1.5])
    for i in range(5):
        np.testing.assert_equal(tidu.jit(lambda x, i: x[i])(x, np.int64(i)), x[i])
    got = tidu.jit(lambda x, i: lax.dynamic_update_slice(x, x[:2], (i,)))(x, np.int64(3))
    np.testing.assert_equal(got, np.array([0.5, np.inf, np.nan, 0.5, np.inf]))


def test_integer_and_boolean_arrays_keep_their_dtype():
    ints = np.arange(6, dtype=np.int8)
    flags = np.array([True, False, True])
    assert tidu.jit(lambda x, i: x[i])(ints, np.int64(4)).dtype == np.int8
    assert tidu.jit(lambda x, i: x[i])(flags, np.int64(1)).dtype == np.bool_
    np.testing.assert_array_equal(tidu.jit(lambda x, i: x.at[i].add(3))(ints, np.int64(2)), [0, 1, 5, 3, 4, 5])
    np.testing.assert_array_equal(tidu.jit(lambda x, i: x.at[i].set(True))(flags, np.int64(1)), [True] * 3)


def test_take_modes_with_traced_indices():
    idx = np.array([-7, -1, 2, 6])
    for mode in ("clip", "wrap"):
        close(tidu.jit(lambda x, k, mode=mode: tnp.take(x, k, mode=mode))(V, idx), np.take(V, idx, mode=mode))
    # no mode: JAX's fill value out of range, for an index array and a scalar, for every dtype
    for x in (V, np.arange(5), np.arange(5, dtype=np.uint8), V > 1.0):
        for k in (idx, np.int64(6), np.int64(-1)):
            want = np.asarray(jnp.take(jnp.asarray(x), k))
            np.testing.assert_array_equal(tidu.jit(lambda x, k: tnp.take(x, k))(x, k), want)


def test_concrete_operands_and_starts_are_computed_by_numpy():
    out = lax.dynamic_slice(A, (-1, 3), (2, 2))
    assert isinstance(out, np.ndarray)
    close(out, jax.lax.dynamic_slice(A, (-1, 3), (2, 2)))
    close(lax.dynamic_update_slice(A, np.ones((2, 2)), (5, -1)), jax.lax.dynamic_update_slice(A, jnp.ones((2, 2)),
                                                                                              (5, -1)))
    close(lax.dynamic_index_in_dim(V, -1), jax.lax.dynamic_index_in_dim(V, -1))
    close(tidu.jit(lambda k: lax.dynamic_slice(A, (k, k), (1, 2)))(np.int64(1)), A[1:2, 1:3])


@pytest.mark.parametrize(("fn", "error", "match"), [
    (lambda x, i: x[x > 1.0], TypeError, "traced boolean mask gives a shape"),
    (lambda x, i: x[i * 1.0], TypeError, "indexing with one of dtype float64"),
    (lambda x, i: x[i, np.ones(A.shape[1], bool)], TypeError, "beside a constant index of dtype bool"),
    (lambda x, i: x[tnp.stack([i, i]), tnp.stack([i, i, i])], IndexError, "could not be broadcast together"),
    (lambda x, i: x[i, i, i], IndexError, "too many indices"),
    (lambda x, i: x.at[tnp.stack([i, i])].power(2.0), TypeError, "power with a traced index array"),
    (lambda x, i: x.at[tnp.stack([i, i]), 1:].add(1.0), TypeError, "beside a partial slice"),
    (lambda x, i: x.at[i].set(np.ones(5)), ValueError, "do not fit"),
    (lambda x, i: lax.dynamic_slice(x, (i,), (2, 2)), TypeError, "start_indices has 1 entries, the operand has 2"),
    (lambda x, i: lax.dynamic_slice(x, (i, i), (4, 2)), TypeError, r"slice size 0 must be a constant int in \[0, 3\]"),
    (lambda x, i: lax.dynamic_slice(x, (i, 0.5), (1, 2)), TypeError, "start index 1 must be an integer scalar"),
    (lambda x, i: lax.dynamic_update_slice(x, np.ones((2, 2), np.float32), (i, i)), TypeError,
     "update has dtype float32, the operand float64"),
    (lambda x, i: lax.dynamic_update_slice(x, x, (i, i, i)), TypeError, "start_indices has 3 entries"),
    (lambda x, i: lax.dynamic_update_slice(x, x[0], (i,)), TypeError, "does not fit in the operand"),
    (lambda x, i: lax.dynamic_slice_in_dim(x, i, 1, axis=2), ValueError, "axis 2 is out of range"),
])
def test_bad_indices_get_a_clear_error(fn, error, match):
    with pytest.raises(error, match=match):
        tidu.jit(fn)(A, np.int64(1))


def test_a_numpy_array_indexed_by_a_traced_integer_names_the_way_out():
    with pytest.raises(tidu.TraceError, match=r"tnp\.take\(x, i, axis\) or tidu\.lax\.dynamic_slice"):
        tidu.jit(lambda i: A[i])(np.int64(1))


# --- dynamic_slice and dynamic_update_slice as primitives ------------------------------------


N = 64


def _reads_at_the_counter(m, L):
    """A loop that reads a closed-over array at its counter and the next index."""
    def f(x):
        def body(i, acc):
            return acc + m.sin(x[i]) * x[(i + 1) % N]
        return L.fori_loop(0, N, body, 0.0)
    return f


def test_a_read_at_the_counter_costs_its_slice_in_both_directions():
    """x[i] in a loop body is a dynamic_slice, and its cotangent is added into the
    gradient's slice (a dynamic_update_slice of the carried sum), not as an array of zeros
    with one entry: no whole-array op runs per step, forward or reverse."""
    f, fj = _reads_at_the_counter(tnp, lax), _reads_at_the_counter(jnp, jax.lax)
    x = np.linspace(0.1, 2.0, N)
    program = tidu.make_graph(tidu.grad(f))(x).program
    text = program.to_stablehlo()
    assert "stablehlo.dynamic_slice" in text and "stablehlo.dynamic_update_slice" in text
    whole = f"tensor<{N}xf64>"
    per_step = [line for line in text.splitlines()
                if whole in line.split(":")[-1] and any(op in line for op in ("stablehlo.add", "stablehlo.select",
                                                                           "stablehlo.multiply"))]
    assert not per_step, per_step
    close(program.run([x], backend="xla")[0], jax.grad(fj)(x))
    close(tidu.grad(f)(x), jax.grad(fj)(x))
    close(tidu.hessian(f)(x), jax.hessian(fj)(x))


def test_sparsity_through_reads_and_writes_at_the_counter():
    """A read at a traced start may come from anywhere along its axis, so the pattern is
    a superset there; the other axes keep their structure: summing the rows x[i] of a
    matrix and writing them into rows y[i], column j depends on column j alone (JAX's
    dense Jacobian has the same pattern)."""
    def make(m, L):
        def f(x):
            def body(i, c):
                acc, y = c
                return acc + m.sin(x[i]), y.at[i].set(x[i] ** 2)
            acc, y = L.fori_loop(0, 4, body, (m.zeros(3), m.zeros((4, 3))))
            return m.concatenate([acc, y.ravel()])
        return f
    x = np.linspace(0.3, 1.7, 12).reshape(4, 3)
    pattern = tidu.jacobian_sparsity(make(tnp, lax))(x).toarray()
    want = np.asarray(jax.jacobian(make(jnp, jax.lax))(x)).reshape(15, 12) != 0
    assert want[:3].tolist() == pattern[:3].tolist()  # the sum: exact
    assert (pattern >= want).all()  # the rows written at i: any row, each column its own
    columns = np.arange(12) % 3
    np.testing.assert_array_equal(pattern[3:], columns[None, :] == (np.arange(12) % 3)[:, None])
    close(tidu.jacfwd(make(tnp, lax))(x), jax.jacobian(make(jnp, jax.lax))(x))


def test_taylor_series_through_dynamic_slices():
    """tidu.jet through x[i] and x.at[i].set at a traced i (linear in the array, the start
    fixed) along a line x + t v: its coefficients are the derivatives in t, which JAX
    gives by nested jvp."""
    def make(m):
        def f(x):
            i = m.argmax(x)  # a traced integer
            at = tnp.at(x) if m is tnp else x.at  # (jet may call f on NumPy arrays)
            return m.sum(m.sin(at[i].set(x[i] ** 2)))
        return f
    x, v = np.array([0.2, 1.3, 0.7]), np.array([1.0, 0.5, -0.25])
    y, ys = tidu.jet(make(tnp), (x,), ([v, np.zeros(3), np.zeros(3)],))
    g = lambda t: make(jnp)(jnp.asarray(x) + t * v)  # noqa: E731
    derivatives = [g]
    for _ in range(3):
        derivatives.append(lambda t, d=derivatives[-1]: jax.jvp(d, (t,), (1.0,))[1])
    close(y, g(0.0))
    for got, d in zip(ys, derivatives[1:], strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(d(0.0)), rtol=1e-10, atol=1e-12)


def test_batched_starts_select_per_example():
    """vmap over the start (a dynamic_slice and an update per example, one-hot selections
    once batched) and over the array with a shared start, against JAX, with gradients."""
    def make(m, L):
        def f(x, i):
            y = L.dynamic_update_slice_in_dim(x, m.cos(L.dynamic_slice_in_dim(x, i + 1, 2, axis=1)), i, axis=1)
            return m.sum(y * y[::-1])
        return f
    idx = np.array([0, 3, -2, 9])
    for axes, args in (((None, 0), (A, idx)), ((0, None), (np.stack([A, A + 1]), np.int64(1))),
                       ((0, 0), (np.stack([A, -A, A * 2, A + 3]), idx))):
        close(tidu.vmap(make(tnp, lax), in_axes=axes)(*args), jax.vmap(make(jnp, jax.lax), in_axes=axes)(*args))
        close(tidu.vmap(tidu.grad(make(tnp, lax)), in_axes=axes)(*args),
              jax.vmap(jax.grad(make(jnp, jax.lax)), in_axes=axes)(*args))


@pytest.mark.parametrize("name", [*READS, *WRITES])
def test_the_c_back_end_slices_at_traced_starts(name):
    """dynamic_slice and dynamic_update_slice in C (clamped starts, a copy then the update),
    against the NumPy back end, at every index, value and gradient."""
    mine, _ = pair({**READS, **WRITES}[name])
    for fn in (mine, tidu.grad(lambda x, i, j: tnp.sum(tnp.sin(mine(x, i, j))))):
        for i, j in ((0, 1), (-1, -1), (5, 7), (-9, 2)):
            args = [A, np.int64(i), np.int32(j)]
            program = tidu.make_graph(fn)(*args).program
            np.testing.assert_array_equal(program.run(args, backend="c")[0], program.run(args)[0])


def test_reverse_mode_stores_what_the_steps_read_not_the_carried_array():
    """A recurrence writing y[i] from y[i - 1] into a carried array: the reverse steps read
    the carry through a few scalars per step, so those are stored, not the array at every
    step (n^2 numbers); values against JAX, the peak memory of a gradient call measured."""
    import tracemalloc

    n = 1500

    def make(m, L):
        def f(a):
            def body(i, y):
                return y.at[i].set(m.sin(y[i - 1]) * a[1] + a[0])
            return m.sum(L.fori_loop(1, n, body, m.zeros(n) + a[0]) ** 2)
        return f
    a = np.array([0.3, 0.9])
    g = tidu.grad(make(tnp, lax))
    close(g(a), jax.grad(make(jnp, jax.lax))(a))
    tracemalloc.start()
    try:
        g(a)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < n * n * 8 / 10, f"{peak / 1e6:.1f} MB: the carried array is stored at every step"
    close(tidu.make_graph(tidu.grad(make(tnp, lax)))(a).program.run([a], backend="xla")[0],
          jax.grad(make(jnp, jax.lax))(a))
