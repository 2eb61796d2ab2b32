"""jax.numpy functions a port from JAX or NumPy reaches for that tidu.numpy added: index
constructors and windows (tidu/numpy/_index_tricks.py), value-dependent selections with
jax.numpy's size= and integer utilities (tidu/numpy/_selection.py). Eager results against
NumPy, traced ones (tidu.jit) and gradients against jax.numpy / jax.grad."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402


def same(got, want, what=""):
    gl, wl = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(gl) == len(wl), f"{what}: {len(gl)} outputs, want {len(wl)}"
    for g, w in zip(gl, wl, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"{what}: shape {g.shape}, want {w.shape}"
        assert g.dtype == w.dtype, f"{what}: dtype {g.dtype}, want {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14, equal_nan=True, err_msg=what)


M = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0], [2.0, 0.25, 4.0]])


# --- index constructors ----------------------------------------------------------------------


def test_constant_constructors_are_numpys():
    same(tnp.indices((2, 3)), np.indices((2, 3)))
    same(tnp.indices((2, 3), sparse=True), np.indices((2, 3), sparse=True))
    same(tnp.tril_indices(4, -1, 3), np.tril_indices(4, -1, 3))
    same(tnp.triu_indices(3, 1), jnp.triu_indices(3, 1))
    same(tnp.diag_indices(3, 3), np.diag_indices(3, 3))
    same(tnp.mask_indices(3, tnp.triu, 1), np.mask_indices(3, np.triu, 1))
    same(tnp.mgrid[0:3, 0:1:4j], np.mgrid[0:3, 0:1:4j])
    same(tnp.ogrid[0:3, 0:2], np.ogrid[0:3, 0:2])
    same(tnp.r_[1:4, 7, np.array([8, 9])], np.r_[1:4, 7, np.array([8, 9])])
    same(tnp.c_[np.array([1, 2]), np.array([3, 4])], np.c_[np.array([1, 2]), np.array([3, 4])])
    assert tnp.s_[1:2, ::3] == np.s_[1:2, ::3] and tnp.index_exp[1:2] == np.index_exp[1:2]
    same(tnp.ix_([0, 2], [1]), np.ix_([0, 2], [1]))
    same(tnp.unravel_index([5, 7], (3, 4)), np.unravel_index([5, 7], (3, 4)))
    same(tnp.ravel_multi_index(([1, 2], [0, 3]), (3, 4)), np.ravel_multi_index(([1, 2], [0, 3]), (3, 4)))
    assert tnp.euler_gamma == np.euler_gamma
    same(tnp.fromfunction(lambda i, j: i + 2 * j, (2, 3)), np.fromfunction(lambda i, j: i + 2 * j, (2, 3)))


def test_shape_constructors_take_traced_arrays_and_index_them():
    """tril_indices_from(traced) is a constant that indexes traced arrays; the gradient
    through it is jax.grad's."""
    def f(m, mod):
        low = m[mod.tril_indices_from(m, -1)]
        up = m[mod.triu_indices_from(m)]
        d = m[mod.diag_indices_from(m)]
        return mod.sum(low ** 2) + mod.sum(mod.sin(up)) + mod.prod(d)

    same(tidu.jit(lambda m: f(m, tnp))(M), f(M, jnp), "value")
    same(tidu.grad(lambda m: f(m, tnp))(M), jax.grad(lambda m: f(m, jnp))(M), "gradient")
    with pytest.raises(ValueError, match="tnp.tril_indices_from: the input must be 2-D"):
        tidu.jit(lambda v: v[tnp.tril_indices_from(v)])(np.ones(3))


def test_fromfunction_closing_over_a_traced_value_is_traced():
    def f(a, mod):
        return mod.sum(mod.fromfunction(lambda i, j: mod.sin(a * i) + j * a ** 2, (3, 4)))

    same(tidu.jit(lambda a: f(a, tnp))(0.7), f(0.7, jnp), "value")
    same(tidu.grad(lambda a: f(a, tnp))(0.7), jax.grad(lambda a: f(a, jnp))(0.7), "gradient")


def test_r_c_and_ix_of_traced_arrays():
    x = np.array([0.5, -1.0, 2.0])

    def f(v, mod):
        a = mod.r_[v, 0.0, 1:3]
        b = mod.c_[v, 2 * v]
        c = mod.r_["0,2", v, v]
        return mod.sum(a ** 2) + mod.sum(b * mod.arange(6.0).reshape(3, 2)) + mod.sum(c[1] ** 3)

    same(tidu.jit(lambda v: tnp.r_[v, 0.0, 1:3])(x), jnp.r_[x, 0.0, 1:3], "r_")
    same(tidu.jit(lambda v: tnp.c_[v, 2 * v])(x), jnp.c_[x, 2 * x], "c_")
    same(tidu.jit(lambda v: tnp.r_["0,2", v, v])(x), jnp.r_["0,2", x, x], "r_ directive")
    same(tidu.jit(lambda v: tnp.r_[v.astype("float32"), 1.0])(x), jnp.r_[x.astype("float32"), 1.0], "r_ weak")
    same(tidu.grad(lambda v: f(v, tnp))(x), jax.grad(lambda v: f(v, jnp))(x), "gradient")
    idx = np.array([2, 0])
    same(tidu.jit(lambda i, j: tnp.ix_(i, j))(idx, idx[:1]), jnp.ix_(idx, idx[:1]), "ix_ traced")
    same(tidu.jit(lambda m, i: m[tnp.ix_(i, np.arange(3))[0], :])(M, idx), M[idx[:, None], :], "ix_ indexes")


def test_unravel_and_ravel_of_traced_indices_are_jaxs():
    i = np.array([0, 5, 11, 12, 40, -1, -12, -13, -50])
    same(tidu.jit(lambda v: tnp.unravel_index(v, (3, 4)))(i), jnp.unravel_index(i, (3, 4)), "unravel")
    rows, cols = np.array([0, 2, 5, -1]), np.array([3, -2, 1, 9])
    for mode in ("clip", "wrap"):
        for order in ("C", "F"):
            same(tidu.jit(lambda r, c, m=mode, o=order: tnp.ravel_multi_index((r, c), (3, 4), mode=m, order=o))(
                rows, cols), jnp.ravel_multi_index((rows, cols), (3, 4), mode=mode, order=order), f"{mode} {order}")
    r32, c32 = rows.astype(np.int32), cols.astype(np.int32)
    same(tidu.jit(lambda r, c: tnp.ravel_multi_index((r, c), (3, 4), mode="clip"))(r32, c32),
         jnp.ravel_multi_index((r32, c32), (3, 4), mode="clip"), "int32 stays int32")
    same(tidu.jit(lambda v: tnp.unravel_index(v, (3, 4)))(i.astype(np.int32)),
         jnp.unravel_index(i.astype(np.int32), (3, 4)), "unravel int32")
    with pytest.raises(TypeError, match="mode='raise' cannot check traced indices"):
        tidu.jit(lambda r: tnp.ravel_multi_index((r, r), (3, 4)))(rows)


def test_windows():
    for name in ("hamming", "hanning", "blackman", "bartlett"):
        for m in (0, 1, 2, 7):
            same(getattr(tnp, name)(m), getattr(np, name)(m), f"{name}({m})")
            same(getattr(tnp, name)(m), getattr(jnp, name)(m), f"{name}({m}) jax")
    same(tnp.kaiser(6, 2.5), np.kaiser(6, 2.5), "kaiser")
    for m in (1, 6, 7):
        same(tidu.jit(lambda b, m=m: tnp.kaiser(m, b))(2.5), jnp.kaiser(m, 2.5), f"kaiser traced {m}")
    same(tidu.grad(lambda b: tnp.sum(tnp.kaiser(7, b) ** 2))(2.5),
         jax.grad(lambda b: jnp.sum(jnp.kaiser(7, b) ** 2))(2.5), "kaiser gradient")


# --- selections -------------------------------------------------------------------------------

A = np.array([[0.0, 1.5, 0.0], [-2.0, 0.0, 3.0]])


def test_eager_selections_are_numpys():
    same(tnp.nonzero(A), np.nonzero(A))
    same(tnp.flatnonzero(A), np.flatnonzero(A))
    same(tnp.argwhere(A), np.argwhere(A))
    same(tnp.argwhere(5.0), np.argwhere(5.0))
    same(tnp.extract(A > 0, A), np.extract(A > 0, A))
    same(tnp.bincount([0, 2, 2, 5]), np.bincount([0, 2, 2, 5]))
    same(tnp.bincount([0, 2, 2], [0.5, 1.0, 2.0], minlength=4), np.bincount([0, 2, 2], [0.5, 1.0, 2.0], minlength=4))
    same(tnp.digitize([0.2, 1.0, 3.5], [0.0, 1.0, 2.0]), np.digitize([0.2, 1.0, 3.5], [0.0, 1.0, 2.0]))
    same(tnp.histogram(A, bins=4), np.histogram(A, bins=4))
    same(tnp.histogram_bin_edges(A, bins=3, range=(-1, 1)), np.histogram_bin_edges(A, bins=3, range=(-1, 1)))
    same(tnp.trim_zeros(np.array([0, 0, 1, 2, 0])), np.trim_zeros(np.array([0, 0, 1, 2, 0])))


def test_eager_size_is_jaxs():
    for size, fill in ((2, None), (6, -1), (5, (7, 8))):
        same(tnp.nonzero(A, size=size, fill_value=fill), jnp.nonzero(A, size=size, fill_value=fill), f"{size}")
        same(tnp.argwhere(A, size=size, fill_value=fill), jnp.argwhere(A, size=size, fill_value=fill), f"{size}")
    same(tnp.bincount(np.array([0, -1, 5, 1]), length=3), jnp.bincount(np.array([0, -1, 5, 1]), length=3))
    same(tnp.extract(A > 0, A, size=1), jnp.extract(A > 0, A, size=1))


def test_traced_selections_with_size_are_jaxs():
    x = np.array([0.0, 1.5, 0.0, -2.0, 0.0, 3.0])
    for size, fill in ((3, None), (2, None), (5, -1), (4, 9)):
        same(tidu.jit(lambda v, s=size, f=fill: tnp.nonzero(v.reshape(2, 3), size=s, fill_value=f))(x),
             jnp.nonzero(x.reshape(2, 3), size=size, fill_value=fill), f"nonzero {size} {fill}")
        same(tidu.jit(lambda v, s=size, f=fill: tnp.flatnonzero(v, size=s, fill_value=f))(x),
             jnp.flatnonzero(x, size=size, fill_value=fill), f"flatnonzero {size}")
        same(tidu.jit(lambda v, s=size, f=fill: tnp.argwhere(v.reshape(3, 2), size=s, fill_value=f))(x),
             jnp.argwhere(x.reshape(3, 2), size=size, fill_value=fill), f"argwhere {size}")
    same(tidu.jit(lambda v: tnp.nonzero(v.reshape(2, 3), size=3, fill_value=(1, 2)))(x),
         jnp.nonzero(x.reshape(2, 3), size=3, fill_value=(1, 2)), "fill per axis")
    same(tidu.jit(lambda v: tnp.argwhere(v[1], size=2))(x), jnp.argwhere(x[1], size=2), "argwhere 0-d")
    with pytest.raises(TypeError, match="tnp.nonzero: the output size depends on the values.*pass a static size="):
        tidu.jit(tnp.nonzero)(x)
    for name in ("argwhere", "flatnonzero"):
        with pytest.raises(TypeError, match=f"tnp.{name}: the output size depends on the values.*pass a static size="):
            tidu.jit(getattr(np, name))(x)  # NumPy's function of a traced value is tidu's


def test_extract_with_size_differentiates_the_picked_entries():
    x = np.array([1.0, -1.0, 2.0, 3.0, -0.5])

    def f(v, mod, size):
        return mod.sum(mod.extract(v > 0, v, size=size, fill_value=0.25) * mod.arange(1.0, size + 1.0))

    for size in (2, 3, 5):
        same(tidu.jit(lambda v, s=size: tnp.extract(v > 0, v, size=s, fill_value=0.25))(x),
             jnp.extract(x > 0, x, size=size, fill_value=0.25), f"value {size}")
        same(tidu.grad(lambda v, s=size: f(v, tnp, s))(x), jax.grad(lambda v, s=size: f(v, jnp, s))(x), f"grad {size}")
    # a constant condition with a traced array needs no size
    cond = x > 0
    same(tidu.grad(lambda v: tnp.sum(tnp.extract(cond, v) ** 2))(x), jax.grad(lambda v: jnp.sum(v[cond] ** 2))(x))
    with pytest.raises(TypeError, match="tnp.extract: .*pass a static size="):
        tidu.jit(lambda v: tnp.extract(v > 0, v))(x)


def test_bincount_traced_is_jaxs():
    xi = np.array([0, 2, 2, -1, 7, 1])
    w = np.array([0.5, 1.0, 2.0, 4.0, 8.0, 16.0])
    same(tidu.jit(lambda v: tnp.bincount(v, length=4))(xi), jnp.bincount(xi, length=4), "counts")
    same(tidu.jit(lambda v, u: tnp.bincount(v, u, length=3))(xi, w), jnp.bincount(xi, w, length=3), "weighted")
    g = np.array([1.0, -2.0, 3.0, 0.5])
    same(tidu.grad(lambda u: tnp.sum(tnp.bincount(xi, u, length=4) * g))(w),
         jax.grad(lambda u: jnp.sum(jnp.bincount(xi, u, length=4) * g))(w), "gradient in weights")
    same(tidu.grad(lambda u: tnp.sum(tnp.bincount(xi[:3], u[:3]) ** 2))(w),
         jax.grad(lambda u: jnp.sum(jnp.bincount(xi[:3], u[:3]) ** 2))(w), "constant x, traced weights")
    w32 = w.astype(np.float32)
    same(tidu.jit(lambda u: tnp.bincount(xi[:3], u))(w32[:3]), np.bincount(xi[:3], w32[:3]), "float64, NumPy's")
    same(tnp.bincount(xi, w32, length=3), tidu.jit(lambda v, u: tnp.bincount(v, u, length=3))(xi, w32), "eager")
    with pytest.raises(TypeError, match="tnp.bincount: .*pass a static length="):
        tidu.jit(tnp.bincount)(xi)


def test_digitize_traced_is_numpys():
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, 2.5, np.nan])
    for bins in (np.array([0.0, 1.0, 2.0]), np.array([2.0, 1.0, 0.0]), np.array([1.0])):
        for right in (False, True):
            got = tidu.jit(lambda v, b, r=right: tnp.digitize(v, b, right=r))(x, bins)
            np.testing.assert_array_equal(got, np.digitize(x, bins, right=right))
            np.testing.assert_array_equal(got, jnp.digitize(x, bins, right=right))


def test_histogram_traced_is_numpys_with_jaxs_gradient():
    """Traced values and dtypes are NumPy's (as the eager call's: int64 counts), the
    gradient jax.grad's."""
    a = np.array([0.1, 0.5, 0.5, 0.9, 1.0, -0.3, 2.0, np.nan])[:7]
    w = np.linspace(0.5, 2.0, 7)
    for kw in ({}, {"bins": 4}, {"bins": 3, "range": (0.0, 1.0)}, {"bins": np.array([0.0, 0.5, 1.0, 3.0])},
               {"bins": 5, "density": True}):
        same(tidu.jit(lambda v, k=kw: tnp.histogram(v, **k))(a), np.histogram(a, **kw), f"{kw}")
        same(tidu.jit(lambda v, u, k=kw: tnp.histogram(v, weights=u, **k))(a, w), np.histogram(a, weights=w, **kw),
             f"weighted {kw}")
        same(tidu.jit(lambda v, k=kw: tnp.histogram_bin_edges(v, **{n: x for n, x in k.items() if n != "density"}))(a),
             np.histogram_bin_edges(a, **{n: x for n, x in kw.items() if n != "density"}), f"edges {kw}")
    same(tidu.jit(lambda v: tnp.histogram(v, bins=2))(np.ones(3)), np.histogram(np.ones(3), bins=2), "equal")
    same(tidu.jit(lambda v, r: tnp.histogram(v, bins=3, range=(r, 4.0)))(a, -0.5),
         np.histogram(a, bins=3, range=(-0.5, 4.0)), "traced range")
    same(tidu.jit(lambda v: tnp.histogram(v, bins=3))(np.array([1, 2, 2, 5])), np.histogram(np.array([1, 2, 2, 5]),
                                                                                                bins=3), "ints")
    a32, wi = a.astype(np.float32), np.arange(7, dtype=np.int32)
    for kw in ({"bins": 3}, {"bins": 3, "density": True}, {"bins": np.array([0, 1, 3])}):
        same(tidu.jit(lambda v, k=kw: tnp.histogram(v, **k))(a32), np.histogram(a32, **kw), f"float32 {kw}")
        same(tidu.jit(lambda v, u, k=kw: tnp.histogram(v, weights=u, **k))(a32, wi),
             np.histogram(a32, weights=wi, **kw), f"int weights {kw}")

    def f(v, u, mod):
        counts, edges = mod.histogram(v, bins=3, weights=u)
        return mod.sum(counts * mod.arange(1.0, 4.0)) + mod.sum(edges ** 2)

    gt = tidu.grad(lambda v, u: f(v, u, tnp), argnums=(0, 1))(a, w)
    same(gt, jax.grad(lambda v, u: f(v, u, jnp), argnums=(0, 1))(a, w), "gradient")


def test_trim_zeros_of_a_traced_value_says_so():
    with pytest.raises(TypeError, match="tnp.trim_zeros: the result's length depends on the values"):
        tidu.jit(tnp.trim_zeros)(np.array([0.0, 1.0]))


# --- integer and float utilities ---------------------------------------------------------------


def test_utilities_eager_and_traced():
    x = np.array([1.0, -1.0, 0.0, -0.0, 1e300, 5e-324, np.inf, np.nan, 3.5])
    same(tnp.spacing(x), np.spacing(x), "spacing eager")
    same(tidu.jit(tnp.spacing)(x), np.spacing(x), "spacing traced")
    x32 = np.array([1.0, -1.0, 0.0, 1e30, 1e-45, np.inf, np.nan], np.float32)
    same(tidu.jit(tnp.spacing)(x32), np.spacing(x32), "spacing float32")
    same(tidu.grad(lambda v: tnp.sum(tnp.spacing(v)))(x[:4]), jax.grad(lambda v: jnp.sum(jnp.spacing(v)))(x[:4]))
    z = np.array([1 + 1j, 2.0, -0.0j, 1j])
    for name in ("iscomplex", "isreal"):
        same(getattr(tnp, name)(z), getattr(np, name)(z), name)
        same(tidu.jit(getattr(tnp, name))(z), getattr(jnp, name)(z), f"{name} traced")
        same(tidu.jit(getattr(tnp, name))(x), getattr(jnp, name)(x), f"{name} real traced")
    same(tnp.gcd(np.array([12, -8, 0]), 18), np.gcd(np.array([12, -8, 0]), 18))
    same(tnp.lcm(np.array([4, 6]), 10), np.lcm(np.array([4, 6]), 10))
    same(tnp.frexp(x), np.frexp(x))
    same(tidu.jit(tnp.frexp)(x), np.frexp(x), "frexp traced")  # subnormals from the bits
    same(tidu.jit(tnp.frexp)(x32), np.frexp(x32), "frexp float32")
    xs = np.array([3.0, -0.3, 1e-300, 7.5e10, 0.0])
    same(tidu.grad(lambda v: tnp.sum(tnp.frexp(v)[0]))(xs), jax.grad(lambda v: jnp.sum(jnp.frexp(v)[0]))(xs))
    with pytest.raises(TypeError, match="tnp.gcd is computed by NumPy on constants only"):
        tidu.jit(lambda v: tnp.gcd(v, 2))(np.array([4, 6]))
    ints = np.array([0, 1, 7, -1, -128, 127, 255, 2**40 + 3, -(2**62)], np.int64)
    for dt in ("int8", "uint8", "int16", "int32", "int64", "uint64"):
        v = ints.astype(dt)
        same(tnp.bitwise_count(v), np.bitwise_count(v), f"bitwise_count {dt}")
        same(tidu.jit(tnp.bitwise_count)(v), jnp.bitwise_count(v), f"bitwise_count {dt} traced")


def test_array_equal_and_equiv():
    a, b = np.array([1.0, np.nan]), np.array([1.0, np.nan])
    for args, kw in (((a, b), {}), ((a, b), {"equal_nan": True}), ((a, a[:1]), {})):
        assert tnp.array_equal(*args, **kw) == np.array_equal(*args, **kw)
        assert bool(tidu.jit(lambda u, v, k=kw: tnp.array_equal(u, v, **k))(*args)) == bool(
            jnp.array_equal(*args, **kw))
    for u, v in ((np.ones((2, 3)), np.ones(3)), (np.ones((2, 3)), np.ones(2)), (M, M.T)):
        assert tnp.array_equiv(u, v) == np.array_equiv(u, v)
        assert bool(tidu.jit(tnp.array_equiv)(u, v)) == bool(jnp.array_equiv(u, v))
