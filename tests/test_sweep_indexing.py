"""An outside sweep of indexing, gather and scatter against JAX (x64): basic and advanced
indexing, ``x.at[...]`` with repeated indices and modes, traced indices, ``take``,
``choose``, ``lax.dynamic_slice``, under grad, hessian and vmap.

The bugs it found (fixed) keep their tests here:

- ``x[1, :, idx]`` with a traced index array: NumPy and JAX count the integer as an
  advanced index, so where a slice or None separates it from the array the array's axes
  go first (shape (2, 2, 4)); tidu put them in place ((4, 2, 2)), a silent transpose.
- ``tnp.choose(i, choices, mode="wrap" | "clip")`` with a traced ``i`` ignored the mode
  (an index out of range picked the last choice).
- ``x.at[1.0].set(v)`` traced took the float index as the integer 1 (NumPy, JAX and
  tidu's eager ``tnp.at`` refuse it).
- ``tnp.at(x)[0].set(v)`` with ``v`` of shape (1, n): NumPy's assignment drops the leading
  axis of size 1 (eager), the traced update failed with a deep broadcasting error.
- ``x[i, j]`` with two traced index arrays, or a traced one beside a constant one, was
  refused; NumPy's broadcasting of the indices now (``x[tnp.ix_(i, j)]`` too), and
  ``x.at[idx].add/set/...`` at traced index arrays (JAX's scatters) as well.
- ``tnp.piecewise(x, conds, [lambda v: v * a, ...])`` with a constant ``x`` and ``a`` traced:
  NumPy's piecewise was called and failed on the traced value (a TraceError).
- ``lax.dynamic_slice(x, (-1, 0), ..., allow_negative_indices=False)``: JAX refuses the
  constant negative start; tidu clamped it silently to 0.
"""

from __future__ import annotations

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp
from tidu import lax

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

X3 = np.arange(60.0).reshape(3, 4, 5) / 7 + 0.1
J = np.array([[0, -1], [2, -3]])


def close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-12)


# --- a traced index array beside constant integers ---------------------------------------------

MIXED = {
    "1,:,j": lambda a, j: a[1, :, j],
    "-1,...,j": lambda a, j: a[-1, ..., j],
    "None,1,:,j": lambda a, j: a[None, 1, :, j],
    "1,None,j": lambda a, j: a[1, None, j],
    "2,...,j,None": lambda a, j: a[2, ..., j, None],
    "None,j,None,1": lambda a, j: a[None, j, None, 1],
    "1,j,None": lambda a, j: a[1, j, None],  # adjacent: the array's axes stay in place
    ":,1,j": lambda a, j: a[:, 1, j],
    "j,:,1": lambda a, j: a[j, :, 1],
}


@pytest.mark.parametrize("name", list(MIXED))
def test_traced_index_array_beside_integers_has_numpys_shape(name):
    f = MIXED[name]
    want = np.asarray(jax.jit(f)(jnp.asarray(X3), jnp.asarray(J)))
    assert f(X3, J).shape == want.shape  # NumPy agrees with JAX
    got = tidu.jit(f)(X3, J)
    assert got.shape == want.shape
    close(got, want)
    w = np.random.default_rng(0).normal(size=want.shape)
    close(tidu.grad(lambda a, j: tnp.sum(f(a, j) ** 2 * w))(X3, J),
          jax.grad(lambda a, j: jnp.sum(f(a, j) ** 2 * w))(X3, J))
    jj = np.stack([J, J[::-1]])
    close(tidu.vmap(f, in_axes=(None, 0))(X3, jj), jax.vmap(f, in_axes=(None, 0))(jnp.asarray(X3), jj))


# --- choose with a traced index ----------------------------------------------------------------

@pytest.mark.parametrize("mode", ["wrap", "clip"])
def test_choose_with_a_traced_index_follows_its_mode(mode):
    a, b = np.arange(4.0) + 1, -np.arange(4.0) - 1
    i = np.array([0, 3, -1, 2, 5])
    aa, bb = np.r_[a, 9.0], np.r_[b, -9.0]
    want = jax.jit(lambda i: jnp.choose(i, [aa, bb], mode=mode))(i)
    close(tidu.jit(lambda i: tnp.choose(i, [aa, bb], mode=mode))(i), want)
    close(tnp.choose(i, [aa, bb], mode=mode), want)  # eager: NumPy
    g = tidu.grad(lambda p, q, i: tnp.sum(tnp.choose(i, [p, q], mode=mode) ** 2), argnums=(0, 1))(aa, bb, i)
    gj = jax.grad(lambda p, q, i: jnp.sum(jnp.choose(i, [p, q], mode=mode) ** 2), argnums=(0, 1))(aa, bb, i)
    close(g[0], gj[0])
    close(g[1], gj[1])


def test_choose_with_a_traced_index_out_of_range_reads_the_fill_value():
    a, b = np.arange(4.0), -np.arange(4.0)
    close(tidu.jit(lambda i: tnp.choose(i, [a, b]))(np.array([0, 1, 2, -1])), [0.0, -1.0, np.nan, np.nan])
    got = tidu.jit(lambda i: tnp.choose(i, [a.astype(np.int64), b.astype(np.int64)]))(np.array([1, 5, 0, 1]))
    np.testing.assert_array_equal(got, [0, np.iinfo(np.int64).min, 2, -3])
    with pytest.raises(ValueError, match="mode"):
        tidu.jit(lambda i: tnp.choose(i, [a, b], mode="fill"))(np.array([0, 1, 0, 1]))
    with pytest.raises(TypeError, match="integers"):
        tidu.jit(lambda x: tnp.choose(x, [a, b]))(np.array([0.0, 1.0, 0.0, 1.0]))


# --- x.at[...] -----------------------------------------------------------------------------------

@pytest.mark.parametrize("index", [1.0, (0, 2.0), np.array([0.5])], ids=["float", "pair", "array"])
@pytest.mark.parametrize("mode", [None, "drop", "fill"])
def test_at_refuses_float_indices_traced_as_eagerly(index, mode):
    y = np.arange(12.0).reshape(3, 4)
    with pytest.raises(IndexError):
        tidu.jit(lambda a: a.at[index].set(-1.0, mode=mode))(y)
    with pytest.raises(IndexError):
        tidu.jit(lambda a: a.at[index].get(mode="fill"))(y)


@pytest.mark.parametrize("index, shape", [(0, (1, 4)), (np.array([0, 2]), (1, 2, 4)), (slice(0, 2), (1, 1, 2, 4)),
                                          (slice(None), (1, 3, 4))])
def test_at_values_with_leading_axes_of_size_one_as_numpy_assigns(index, shape):
    y = np.arange(12.0).reshape(3, 4)
    v = np.arange(np.prod(shape), dtype=float).reshape(shape) + 0.5
    want = y.copy()
    want[index] = v
    close(tnp.at(y)[index].set(v), want)
    close(tidu.jit(lambda a, w: a.at[index].set(w))(y, v), want)
    g = tidu.grad(lambda w: tnp.sum(tnp.at(y)[index].set(w) ** 2))(v)
    close(g, 2 * v)


def test_at_values_that_do_not_fit_name_the_shapes():
    y = np.arange(12.0).reshape(3, 4)
    for index, v in [(0, np.ones(3)), ((slice(None), 0), np.ones((3, 1))), (slice(None), np.ones((2, 3, 4)))]:
        with pytest.raises(ValueError, match=r"values of shape .* do not fit the elements of shape"):
            tidu.jit(lambda a, w, index=index: a.at[index].set(w))(y, v)


OPS = ["set", "add", "subtract", "min", "max"]
REPEATS = [(np.array([1, 1, 3]), np.array([0.5, 2.0, 7.0])), (np.array([0, 0, 0]), np.array([1.0, 1.0, 1.0])),
           (np.array([1, 1]), np.array([2.0, 2.0])), (np.array([[0, 1], [1, 0]]), np.array([[2.0, 2.0], [2.0, 1.0]]))]


@pytest.mark.slow
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("case", range(len(REPEATS)))
def test_at_repeated_indices_and_ties_against_jax(op, case):
    """Values, gradients and Hessians (set keeps the last value; min and max share the
    derivative among the old value and all tied updates, as JAX's scatter_max)."""
    idx, v = REPEATS[case]
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    w = np.arange(1.0, 6.0)

    def f(m):
        return lambda a, b: m.sum(getattr(a.at[idx], op)(b) ** 2 * w)
    close(tidu.jit(lambda a, b: getattr(a.at[idx], op)(b))(x, v), getattr(jnp.asarray(x).at[idx], op)(v))
    g, gj = tidu.grad(f(tnp), argnums=(0, 1))(x, v), jax.grad(f(jnp), argnums=(0, 1))(x, v)
    close(g[0], gj[0])
    close(g[1], gj[1])
    h, hj = tidu.hessian(f(tnp), argnums=(0, 1))(x, v), jax.hessian(f(jnp), argnums=(0, 1))(x, v)
    for p in range(2):
        for q in range(2):
            close(h[p][q], hj[p][q])


@pytest.mark.parametrize("op", ["multiply", "divide"])
def test_at_repeated_multiply_against_sequential_updates(op):
    """JAX has no gradient of scatter_mul at repeated indices: the oracle applies the
    updates one by one."""
    idx, v = np.array([1, 1, 3, 1]), np.array([0.5, 2.0, 7.0, 1.5])
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])

    def seq(a, b):
        a = jnp.asarray(a)
        for i, bb in zip(idx, b, strict=True):
            a = getattr(a.at[i], op)(bb)
        return jnp.sum(a ** 2 * jnp.arange(1.0, 6.0))

    def f(a, b):
        return tnp.sum(getattr(a.at[idx], op)(b) ** 2 * np.arange(1.0, 6.0))
    close(tidu.jit(f)(x, v), seq(x, v))
    g, gj = tidu.grad(f, argnums=(0, 1))(x, v), jax.grad(seq, argnums=(0, 1))(x, v)
    close(g[0], gj[0])
    close(g[1], gj[1])
    close(tidu.hessian(f)(x, v), jax.hessian(seq)(x, v))


@pytest.mark.parametrize("mode", ["clip", "fill", "drop"])
@pytest.mark.parametrize("op", ["set", "add", "max"])
def test_at_modes_with_constant_indices_out_of_range(mode, op):
    x = np.arange(1.0, 13.0).reshape(3, 4)
    idx = (np.array([1, 3, 1]), np.array([4, -9, 0]))
    v = np.array([20.0, 30.0, 40.0])
    w = np.random.default_rng(1).normal(size=x.shape)
    want = getattr(jnp.asarray(x).at[idx], op)(v, mode=mode)
    close(tidu.jit(lambda a, b: getattr(a.at[idx], op)(b, mode=mode))(x, v), want)
    close(getattr(tnp.at(x)[idx], op)(v, mode=mode), want)
    g = tidu.grad(lambda a, b: tnp.sum(getattr(a.at[idx], op)(b, mode=mode) * w), argnums=(0, 1))(x, v)
    gj = jax.grad(lambda a, b: jnp.sum(getattr(a.at[idx], op)(b, mode=mode) * w), argnums=(0, 1))(x, v)
    close(g[0], gj[0])
    close(g[1], gj[1])


@pytest.mark.slow
@pytest.mark.parametrize("i", [-5, -1, 1, 3, 9])
@pytest.mark.parametrize("op", ["max", "min"])
def test_at_extremum_at_a_traced_index_with_a_tie(op, i):
    x = np.array([1.0, 2.0, 3.0, 2.0])
    w = np.array([1.0, 2.0, 3.0, 4.0])

    def f(m):
        return lambda a, b, k: m.sum(getattr(a.at[k], op)(b) * w) ** 2
    for t, jx in [(tidu.grad, jax.grad), (tidu.jacfwd, jax.jacfwd)]:
        g, gj = t(f(tnp), argnums=(0, 1))(x, 2.0, np.int64(i)), jx(f(jnp), argnums=(0, 1))(x, 2.0, np.int64(i))
        close(g[0], gj[0])
        close(g[1], gj[1])
    close(tidu.hessian(f(tnp))(x, 2.0, np.int64(i)), jax.hessian(f(jnp))(x, 2.0, np.int64(i)))


# --- basic and constant advanced indexing -------------------------------------------------------

BASIC = [(1,), (-1,), (slice(None, None, -1),), (slice(3, 0, -2),), (None, Ellipsis, 1), (np.array([0, -1, 2, 2]),),
         (np.array([[0, 1], [2, 2]]), slice(None), np.array([1, 0])), (slice(1, 3), np.array([0, 4, -5])),
         (1, np.array([0, 0, 2]), slice(None, None, -1)), (np.array([True, False, True]),),
         (slice(None), np.array([1, 3])), (np.array([], dtype=int),), (slice(5, 5),)]


@pytest.mark.slow
@pytest.mark.parametrize("index", BASIC, ids=range(len(BASIC)))
def test_constant_indexing_values_gradients_hessians(index):
    x = np.random.default_rng(0).normal(size=(3, 5, 2))
    close(tidu.jit(lambda a: a[index])(x), x[index])
    close(tidu.grad(lambda a: tnp.sum(tnp.sin(a[index])))(x), jax.grad(lambda a: jnp.sum(jnp.sin(a[index])))(x))
    close(tidu.hessian(lambda a: tnp.sum(a[index] ** 3))(x), jax.hessian(lambda a: jnp.sum(a[index] ** 3))(x))


# --- traced indices, take and dynamic slices ----------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("i", [-8, -4, -1, 0, 3, 5, 100])
def test_traced_scalar_reads_and_updates_against_jax(i):
    x = np.arange(1.0, 13.0).reshape(3, 4) ** 1.5
    fns = [lambda a, k: a[k], lambda a, k: a[:, k], lambda a, k: a[None, ..., k], lambda a, k: a.at[1, k].add(2.5),
           lambda a, k: a.at[:, k].multiply(a[:, 0]), lambda a, k: a.at[k, 1].get(mode="fill", fill_value=-2.0),
           lambda a, k: tnp.take(a, k, axis=1, mode="clip") if not isinstance(a, jax.Array)
           else jnp.take(a, k, axis=1, mode="clip")]
    for f in fns:
        k = np.int32(i)
        want = jax.jit(f)(jnp.asarray(x), k)
        close(tidu.jit(f)(x, k), want)
        w = np.random.default_rng(2).normal(size=want.shape)
        close(tidu.grad(lambda a, k, f=f, w=w: tnp.sum(f(a, k) * w))(x, k),
              jax.grad(lambda a, k, f=f, w=w: jnp.sum(f(a, k) * w))(x, k))


def test_dynamic_slice_refuses_a_constant_negative_start_without_negative_indices():
    a = np.arange(20.0).reshape(4, 5)
    with pytest.raises(ValueError, match="allow_negative_indices"):
        lax.dynamic_slice(a, (-1, 1), (2, 3), allow_negative_indices=False)
    with pytest.raises(ValueError, match="allow_negative_indices"):
        tidu.jit(lambda x: lax.dynamic_update_slice(x, x[:1, :1], (0, -2), allow_negative_indices=False))(a)
    close(lax.dynamic_slice(a, (-1, 1), (2, 3)), jax.lax.dynamic_slice(a, (-1, 1), (2, 3)))
    # a traced negative start is clamped to 0, as JAX's
    f = jax.jit(lambda x, i: jax.lax.dynamic_slice(x, (i, jnp.int32(1)), (2, 3), allow_negative_indices=False))
    close(tidu.jit(lambda x, i: lax.dynamic_slice(x, (i, 1), (2, 3), allow_negative_indices=False))(a, np.int32(-1)),
          f(a, np.int32(-1)))


@pytest.mark.parametrize("s", [-9, -1, 0, 3, 100])
def test_dynamic_update_slice_values_and_gradients(s):
    a = np.arange(1.0, 21.0).reshape(4, 5) ** 1.3
    u = np.array([[10.0, 20.0, 30.0], [40.0, 50.0, 60.0]])
    i, j = np.int32(s), np.int32(-s)

    def f(m, lx):
        return lambda x, v, i, j: m.sum(lx.dynamic_update_slice(x, v, (i, j)) ** 2 * x)
    close(tidu.jit(f(tnp, lax))(a, u, i, j), jax.jit(f(jnp, jax.lax))(a, u, i, j))
    g = tidu.grad(f(tnp, lax), argnums=(0, 1))(a, u, i, j)
    gj = jax.grad(f(jnp, jax.lax), argnums=(0, 1))(a, u, i, j)
    close(g[0], gj[0])
    close(g[1], gj[1])


def test_traced_index_array_out_of_range_reads_and_differentiates_the_clamped_element():
    """Documented (docs/control-flow.md): JAX's x[idx] clamps the value but drops the
    derivative of an index out of range; tidu's derivative is that of the value it reads,
    JAX's with mode="clip"."""
    x = np.arange(1.0, 13.0).reshape(3, 4) ** 1.5
    idx = np.array([0, -1, 3, -5, 4, 2])
    w = np.random.default_rng(3).normal(size=(3, idx.size))
    want = jax.jit(lambda a, i: a[:, i])(jnp.asarray(x), idx)
    close(tidu.jit(lambda a, i: a[:, i])(x, idx), want)
    g = tidu.grad(lambda a, i: tnp.sum(a[:, i] * w))(x, idx)
    close(g, jax.grad(lambda a, i: jnp.sum(a.at[:, i].get(mode="clip") * w))(x, idx))


@pytest.mark.parametrize("read", [lambda a, i: a[i], lambda a, i: a[:, i].T, lambda a, i: a.at[i].get(mode="clip"),
                                  lambda a, i: a[tnp.stack([i, i])][0]], ids=["[i]", "[:, i]", "get clip", "[idx]"])
def test_a_traced_read_from_an_axis_of_size_zero_is_an_index_error(read):
    """JAX refuses it at trace time; tidu returned -0.0 for the element that is not there."""
    with pytest.raises(IndexError, match="size 0"):
        tidu.jit(read)(np.zeros((0, 0)), np.int32(0))


def test_a_fill_read_from_an_axis_of_size_zero_reads_the_fill_value():
    got = tidu.jit(lambda a, i: a.at[i].get(mode="fill", fill_value=-1.0))(np.zeros((0, 3)), np.int32(0))
    close(got, [-1.0, -1.0, -1.0])
    got = tidu.jit(lambda a, i: a.at[None, :, i].get(mode="fill"))(np.zeros((2, 0)), np.int32(0))
    assert got.shape == (1, 2) and np.isnan(got).all()
    close(tidu.jit(lambda a, i: tnp.take(a, i, axis=0))(np.zeros((0, 2)), np.array([0, 1])), np.full((2, 2), np.nan))


# --- several index arrays, some traced: NumPy's broadcasting ----------------------------------------

X345 = np.arange(60.0).reshape(3, 4, 5) / 7
I3, J3 = np.array([0, 2, -1]), np.array([3, 1, 1])
SEVERAL = {
    "x[i, j]": lambda m, x, i, j: x[i, j],
    "outer x[i[:, None], j]": lambda m, x, i, j: x[i[:, None], j[None, :]],
    "x[ix_(i, j)]": lambda m, x, i, j: x[m.ix_(i, j)],
    "x[:, j, i] (adjacent, after a slice)": lambda m, x, i, j: x[:, j, i],
    "x[i, :, j] (apart: axes first)": lambda m, x, i, j: x[i, :, j],
    "x[i, 1, j]": lambda m, x, i, j: x[i, 1, j],
    "x[None, i, j, 2:]": lambda m, x, i, j: x[None, i, j, 2:],
    "x[i, constant array]": lambda m, x, i, j: x[i, np.array([1, 3, 0])],
    "x[..., i, j]": lambda m, x, i, j: x[..., i % 4, j],
    "x[i, j, constant column]": lambda m, x, i, j: x[i, j, np.array([[4], [0]])],
    "x[1:, j, None, i]": lambda m, x, i, j: x[1:, j, None, i % 5],
}


@pytest.mark.parametrize("name", list(SEVERAL))
def test_several_index_arrays_some_traced_against_jax(name):
    """Two traced index arrays, or a traced one beside a constant one, were refused (a
    TypeError); NumPy and JAX broadcast them together."""
    f = SEVERAL[name]
    got = tidu.jit(lambda x, i, j: f(tnp, x, i, j))(X345, I3, J3)
    want = jax.jit(lambda x, i, j: f(jnp, x, i, j))(X345, I3, J3)
    assert got.shape == want.shape
    close(got, want)
    w = np.random.default_rng(1).normal(size=want.shape)
    close(tidu.grad(lambda x, i, j: tnp.sum(f(tnp, x, i, j) * w))(X345, I3, J3),
          jax.grad(lambda x: jnp.sum(f(jnp, x, I3, J3) * w))(X345))


def test_several_traced_index_arrays_out_of_range_are_clamped_as_jax_reads():
    f = lambda x, i, j: x[i + 5, j - 9]  # noqa: E731
    close(tidu.jit(f)(X345, I3, J3), jax.jit(f)(X345, I3, J3))


# --- updates at traced index arrays: JAX's scatters --------------------------------------------------

I4, J4 = np.array([0, 2, 0, -1]), np.array([3, 1, 3, 1])  # (0, 3) twice
SCATTERS = {
    "x.at[i].add": (lambda x, v, i, j: x.at[i].add(v), (4, 4, 5)),
    "x.at[i, j].add": (lambda x, v, i, j: x.at[i, j].add(v), (4, 5)),
    "x.at[:, j].subtract": (lambda x, v, i, j: x.at[:, j].subtract(v), (3, 4, 5)),
    "x.at[i, j].min": (lambda x, v, i, j: x.at[i, j].min(v), (4, 5)),
    "x.at[i, :, j].max (apart: index axes first)": (lambda x, v, i, j: x.at[i, :, j].max(v), (4, 4)),
    "x.at[i, j].add a scalar": (lambda x, v, i, j: x.at[i, j].add(2.0 * v[0, 0]), (4, 5)),
    "x.at[i[:, None], j].add (outer)": (lambda x, v, i, j: x.at[i[:, None], j[None, :]].add(v), (4, 4, 5)),
    "x.at[i + 2, j].add (out of range: dropped)": (lambda x, v, i, j: x.at[i + 2, j].add(v), (4, 5)),
    "x.at[i, constant array].add": (lambda x, v, i, j: x.at[i, np.array([1, 1, 0, 2])].add(v), (4, 5)),
}


@pytest.mark.parametrize("name", list(SCATTERS))
def test_updates_at_traced_index_arrays_with_repeats_against_jax(name):
    """x.at[idx] with a traced index array was refused (a TypeError); repeated indices
    combine all their values, as JAX's scatters."""
    f, vshape = SCATTERS[name]
    v = np.random.default_rng(2).normal(size=vshape)
    close(tidu.jit(f)(X345, v, I4, J4), jax.jit(f)(X345, v, I4, J4))
    w = np.random.default_rng(3).normal(size=X345.shape)
    got = tidu.grad(lambda x, v, i, j: tnp.sum(f(x, v, i, j) * w), argnums=(0, 1))(X345, v, I4, J4)
    want = jax.grad(lambda x, v: jnp.sum(f(x, v, I4, J4) * w), argnums=(0, 1))(X345, v)
    close(got[0], want[0])
    close(got[1], want[1])


def test_multiply_and_set_at_traced_index_arrays():
    """multiply combines repeated values as their product (JAX has no derivative there:
    checked against finite differences); set keeps the last value, as NumPy's assignment."""
    v = np.random.default_rng(4).normal(size=(4, 5))
    f = lambda x, v, i, j: x.at[i, j].multiply(v)  # noqa: E731
    close(tidu.jit(f)(X345, v, I4, J4), jax.jit(f)(X345, v, I4, J4))
    g = tidu.grad(lambda v, i, j: tnp.sum(tnp.at(X345)[i, j].multiply(v) ** 2))(v, I4, J4)
    h, e = 1e-6, np.zeros_like(v)
    e[2, 1] = h  # the second update of (0, 3)
    sq = tidu.jit(lambda v, i, j: tnp.sum(tnp.at(X345)[i, j].multiply(v) ** 2))
    fd = (sq(v + e, I4, J4) - sq(v - e, I4, J4)) / (2 * h)
    assert np.isclose(g[2, 1], fd, rtol=1e-6)
    want = X345.copy()
    want[I4, J4] = v
    close(tidu.jit(lambda x, v, i, j: x.at[i, j].set(v))(X345, v, I4, J4), want)


# --- functions that write traced values into a constant array -------------------------------------

A23 = np.arange(6.0).reshape(2, 3)
WRITES = {
    "put": (lambda m, v: m.put(A23, np.array([0, 4, 4]), v, inplace=False), np.array([10.0, 20.0, 30.0])),
    "put_along_axis": (lambda m, v: m.put_along_axis(A23, np.array([[0], [2]]), v[:, None], axis=1, inplace=False),
                       np.array([10.0, 20.0])),
    "fill_diagonal": (lambda m, v: m.fill_diagonal(np.zeros((2, 2)), v, inplace=False), np.array([10.0, 20.0])),
    "piecewise": (lambda m, v: m.piecewise(A23[0], [A23[0] > 0], [v[1], v[0]]) if m is tnp
                  else jnp.piecewise(A23[0], [A23[0] > 0], [lambda x: v[1], lambda x: v[0]]), np.array([10.0, 20.0])),
    # functions closing over the traced values (NumPy called them and failed on the tracer)
    "piecewise closures": (lambda m, v: m.piecewise(A23[1], [A23[1] < 4, A23[1] >= 4],
                                                    [lambda x: x * v[0], lambda x: x * v[0] * v[1]]),
                           np.array([1.5, -0.5])),
}


@pytest.mark.parametrize("name", list(WRITES))
def test_traced_values_written_into_a_constant_array_keep_their_derivative(name):
    """With a NumPy array and traced values these went to NumPy, which read the values
    as constants: the gradient was 0."""
    f, v = WRITES[name]
    close(tidu.jit(lambda v: f(tnp, v))(v), f(jnp, jnp.asarray(v)))
    close(tidu.grad(lambda v: tnp.sum(f(tnp, v) ** 2))(v), jax.grad(lambda v: jnp.sum(f(jnp, v) ** 2))(v))


def test_compress_with_a_condition_past_the_axis():
    a = np.arange(8.0).reshape(2, 4)
    close(tidu.jit(lambda x: tnp.compress([1, 0, 1, 0, 0], x, axis=1))(a), np.compress([1, 0, 1, 0, 0], a, axis=1))
    with pytest.raises(IndexError, match="tnp.compress: the condition selects entry 4 of an axis of size 4"):
        tidu.jit(lambda x: tnp.compress([1, 0, 1, 0, 1], x, axis=1))(a)
