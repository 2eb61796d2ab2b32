"""tnp.unique, the array API's unique_* and the set operations (union1d, intersect1d,
setdiff1d, setxor1d, isin) against jax.numpy with x64: eager calls (data-dependent sizes,
or a given size) and traced ones (a static size=), values, indices, inverse, counts,
padding, dtypes, and derivatives of the values."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import ml_dtypes
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402


def _plain(a):
    a = np.asarray(a)
    return a.astype(np.float64) if a.dtype.name in ("bfloat16", "float16") else a


def same(got, want, what):
    """Equal leaves: dtype, shape, values (nan where nan) and the sign of zeros."""
    gl = list(got) if isinstance(got, tuple | list) else [got]
    wl = list(want) if isinstance(want, tuple | list) else [want]
    assert len(gl) == len(wl), f"{what}: {len(gl)} outputs, JAX {len(wl)}"
    for g, w in zip(gl, wl, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype, f"{what}: dtype {g.dtype}, JAX {w.dtype}"
        assert g.shape == w.shape, f"{what}: shape {g.shape}, JAX {w.shape}"
        g, w = _plain(g), _plain(w)
        np.testing.assert_array_equal(g, w, err_msg=what)
        if w.dtype.kind in "fc":
            np.testing.assert_array_equal(np.signbit(g.real), np.signbit(w.real), err_msg=f"{what}: signs")


ARRAYS = {
    "float64": np.array([3.0, -0.0, np.nan, 1.0, 0.0, np.nan, 1.0, -2.0]),
    "zeros": np.array([0.0, -0.0, 1.0, -0.0]),
    "float32": np.array([2.5, np.nan, -1.0, 2.5, np.nan], np.float32),
    "float16": np.array([3.0, -0.0, np.nan, 1.0, np.nan, 0.0], np.float16),
    "bfloat16": np.array([3.0, -0.0, np.nan, 1.0, 3.0, np.nan], ml_dtypes.bfloat16),
    "int8": np.array([3, 1, 3, 2, 1, -4], np.int8),
    "bool": np.array([True, False, True, True]),
    "complex": np.array([1 + 1j, 1 - 1j, np.nan, 0, 1 + 1j, complex(1, np.nan), complex(np.nan, 0), -0.0]),
    "scalar": np.array(2.0),
    "matrix": np.array([[1.0, 2.0], [1.0, 2.0], [0.0, 5.0], [np.nan, 1.0], [np.nan, 1.0]]),
    "int_matrix": np.array([[1, 2, 1], [1, 2, 1], [0, 5, 0]]),
}
ALL = {"return_index": True, "return_inverse": True, "return_counts": True}


def _axes(x):
    return [None] + ([0, 1, -1] if x.ndim == 2 else [])


@pytest.mark.parametrize("name", ARRAYS)
@pytest.mark.parametrize("equal_nan", [True, False])
def test_unique_is_jaxs_eager_and_traced(name, equal_nan):
    """Every output, every axis, no size (eager), and a size that pads, truncates, and
    pads with a fill_value, eager and traced."""
    x = ARRAYS[name]
    for axis in _axes(x):
        kw = dict(ALL, axis=axis, equal_nan=equal_nan)
        same(tnp.unique(x, **kw), jnp.unique(x, **kw), f"{name} {kw}")
        same(tnp.unique(x, axis=axis), jnp.unique(x, axis=axis), f"{name} values, axis {axis}")
        n = x.size if axis is None else x.shape[axis]
        for size, fill in ((n + 2, None), (2, None), (n + 1, 7)):
            k2 = dict(kw, size=size, fill_value=fill)
            want = jnp.unique(x, **k2)
            same(tnp.unique(x, **k2), want, f"{name} eager {k2}")
            same(tidu.jit(lambda v, k2=k2: tnp.unique(v, **k2))(x), want, f"{name} traced {k2}")


def test_unique_eager_is_numpys_where_numpy_agrees():
    """Eager sizes are data-dependent, as NumPy's (whose values and outputs are JAX's here)."""
    x = np.array([[3, 1, 3], [2, 1, 0]])
    for got, want in zip(tnp.unique(x, **ALL), np.unique(x, **ALL), strict=True):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(tnp.unique(x, axis=1, **ALL), np.unique(x, axis=1, **ALL), strict=True):
        np.testing.assert_array_equal(got, want)


def test_array_api_unique_functions():
    x = np.array([2.0, -1.0, 2.0, np.nan, 0.5, np.nan])
    for name in ("unique_values", "unique_counts", "unique_inverse", "unique_all"):
        for kw in ({}, {"size": 7}, {"size": 2, "fill_value": 9.0}):
            want = getattr(jnp, name)(x, **kw)
            same(getattr(tnp, name)(x, **kw), want, f"{name} eager {kw}")
            if kw:
                same(tidu.jit(lambda v, n=name, k=kw: getattr(tnp, n)(v, **k))(x), want, f"{name} traced {kw}")
    got = tnp.unique_all(x)
    assert got.counts.tolist() == [1, 1, 2, 1, 1] and got.indices.tolist() == [1, 4, 0, 3, 5]  # nan apart


def test_empty_input():
    e = np.zeros((0,))
    same(tnp.unique(e), jnp.unique(e), "empty")
    kw = dict(ALL, size=3, fill_value=1.5)
    same(tnp.unique(e, **kw), jnp.unique(e, **kw), "empty eager, size")
    same(tidu.jit(lambda v: tnp.unique(v, **kw))(e), jnp.unique(e, **kw), "empty traced, size")
    with pytest.raises(ValueError, match="tnp.unique: the input is empty and size=3 > 0: pass fill_value="):
        tnp.unique(e, size=3)


def test_traced_unique_needs_a_static_size():
    x = np.array([1.0, 2.0, 1.0])
    with pytest.raises(TypeError, match="tnp.unique: the output size depends on the values.*pass a static size="):
        tidu.jit(tnp.unique)(x)
    for name in ("union1d", "intersect1d", "setdiff1d", "setxor1d"):
        with pytest.raises(TypeError, match=f"tnp.{name}: the output size depends on the values"):
            tidu.jit(lambda a, n=name: getattr(tnp, n)(a, np.array([1.0])))(x)
    with pytest.raises(TypeError, match="tnp.unique_values: .*pass a static size=|tnp.unique: .*static size="):
        tidu.jit(tnp.unique_values)(x)


@pytest.mark.parametrize("kw", [{"size": 9}, {"size": 3}, {"size": 9, "fill_value": 2.5}, {"size": 4, "axis": 0}])
def test_gradient_of_unique_values_is_jaxs(kw):
    """The derivative of each value goes to its first occurrence, and of the default
    padding (the smallest value) there too, as jax.grad of jnp.unique gives."""
    x = np.array([3.0, 1.0, 3.0, 2.0, 1.0, -0.0, 0.0]) if "axis" not in kw else np.array(
        [[1.0, 2.0], [1.0, 2.0], [0.0, 5.0]])
    w = np.random.default_rng(0).normal(size=(kw["size"], *x.shape[1:]))

    def loss(m):
        return lambda v: m.sum(m.unique(v, **kw) * w)

    np.testing.assert_array_equal(tidu.grad(loss(tnp))(x), jax.grad(loss(jnp))(x))


PAIRS = [
    (np.array([3.0, 1.0, 2.0, 1.0, -0.0]), np.array([2.0, 1.0, 5.0, 0.0])),
    (np.array([1, 2, 3]), np.array([1, 2, 3])),
    (np.array([1, 2, 3]), np.array([4.0])),
    (np.array([3.0, np.nan, 1.0]), np.array([np.nan, 1.0])),
    (np.array([[1, 5], [2, 2]]), np.array([5, 7, 2])),
    (np.array([True, False]), np.array([True])),
    (np.array([1 + 1j, 2, 1 + 1j]), np.array([2 + 0j, 3j])),
    (np.zeros(0), np.array([1.0, 2.0])),
]


# the float pairs in the default run (nan, -0.0, 0.0); the others in the slow step
@pytest.mark.parametrize("k", [k if k in (0, 3) else pytest.param(k, marks=pytest.mark.slow)
                               for k in range(len(PAIRS))])
def test_set_operations_are_jaxs(k):
    a, b = PAIRS[k]
    calls = [("union1d", {}), ("intersect1d", {}), ("intersect1d", {"return_indices": True}),
             ("setdiff1d", {}), ("setxor1d", {})]
    if len(np.unique(a)) == a.size:
        calls.append(("setdiff1d", {"assume_unique": True}))
    for name, kw in calls:
        fn_t, fn_j = getattr(tnp, name), getattr(jnp, name)
        same(fn_t(a, b, **kw), fn_j(a, b, **kw), f"{name} {kw} eager")
        for size, fill in ((a.size + b.size + 1, None), (1, None), (4, 9)):
            if a.size == 0 and kw.get("return_indices"):
                continue  # (jax.numpy's gather fails there)
            k2 = dict(kw, size=size, fill_value=fill)
            want = fn_j(a, b, **k2)
            same(fn_t(a, b, **k2), want, f"{name} {k2} eager")
            same(tidu.jit(lambda u, v, f=fn_t, k2=k2: f(u, v, **k2))(a, b), want, f"{name} {k2} traced")
    for kw in ({}, {"invert": True}):
        same(tnp.isin(a, b, **kw), jnp.isin(a, b, **kw), f"isin {kw} eager")
        same(tidu.jit(lambda u, v, kw=kw: tnp.isin(u, v, **kw))(a, b), jnp.isin(a, b, **kw), f"isin {kw} traced")


@pytest.mark.parametrize("name", ["union1d", "intersect1d", "setdiff1d", "setxor1d"])
def test_gradient_of_set_operations_is_jaxs(name):
    x = np.array([3.0, 1.0, 3.0, 2.0, 1.0, -0.0, 0.0])
    other = np.array([2.0, 7.0, 0.0])
    w = np.arange(5.0) + 1

    def loss(m):
        return lambda v: m.sum(getattr(m, name)(v, other, size=5) * w)

    np.testing.assert_array_equal(tidu.grad(loss(tnp))(x), jax.grad(loss(jnp))(x))


def test_vmap_of_unique_is_jaxs():
    x = np.array([[3.0, 1.0, 3.0], [2.0, 2.0, 0.0]])

    def f(m):
        return lambda v: m.unique(v, size=3, **ALL)

    same(tidu.vmap(f(tnp))(x), jax.vmap(f(jnp))(x), "vmap")
