"""Gaps of tidu.numpy and tidu.lax against jax.numpy / jax.lax and NumPy, closed in one
sweep: ``sinc`` at +-inf, signed zeros through sorting and one-hot selections (``sort``,
``argsort``, ``lax.sort``, ``take``, ``take_along_axis``, traced indexing), ``nextafter``
and jax.numpy's dtype names, ``take`` / ``take_along_axis`` modes and ``fill_value``, and
``lax.population_count`` / ``lax.clz``. Each result is compared with an oracle (JAX with
64-bit types, or NumPy) eagerly, under ``tidu.jit`` and on each back end."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import ml_dtypes
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from oracle_util import same  # noqa: E402
from tidu.lowering import c_build  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402
from tidu import lax  # noqa: E402

HAVE_CC = c_build.compiler_or_none() is not None


def backends(dtypes: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The back ends a program runs on here (C has no 16-bit floats, and needs a compiler)."""
    half = any(d in ("float16", "bfloat16") for d in dtypes)
    return ("numpy", "xla") + (("c",) if HAVE_CC and not half else ())


def results(fn, *args):
    """``fn(*args)`` eagerly, under tidu.jit and as a program on each back end."""
    out = {"eager": fn(*args), "jit": tidu.jit(fn)(*args)}
    program = tidu.make_graph(fn)(*args).program
    for b in backends(tuple(np.asarray(a).dtype.name for a in args)):
        out[b] = program.run(list(args), backend=b)[0]
    return out


def same_bits_every_way(f, a, i, want):
    """``f(a, i)`` equal to ``want`` bit for bit eagerly, with ``a`` traced, with ``i`` traced,
    with both (tidu.jit) and as a program on each back end."""
    same_bits(f(a, i), want, "eager")
    same_bits(tidu.jit(lambda a: f(a, i))(a), want, "traced array")
    same_bits(tidu.jit(lambda i: f(a, i))(i), want, "traced indices")
    for where, got in results(f, a, i).items():
        same_bits(got, want, where)


def bits(v):
    v = np.asarray(v)
    return v.view(f"uint{8 * v.dtype.itemsize}") if v.dtype.kind == "f" else v


def same_bits(got, want, where=""):
    """Equal dtype, shape and bits (every nan counts as any nan)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (where, got.dtype, want.dtype, got.shape, want.shape)
    if want.dtype.kind == "c":
        same_bits(got.real, want.real, where)
        same_bits(got.imag, want.imag, where)
        return
    if want.dtype.kind == "f" or want.dtype == ml_dtypes.bfloat16:
        nan = np.isnan(want.astype(np.float64))
        assert np.array_equal(np.isnan(got.astype(np.float64)), nan), (where, got, want)
        got, want = got[~nan], want[~nan]
        assert np.array_equal(bits(got), bits(want)), (where, got, want)
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)


# --- 1. sinc at +-inf ---------------------------------------------------------------------------------

SINC_X = np.array([np.inf, -np.inf, 0.0, -0.0, 1e-3, 0.25, -1.5, 2.75, 1e3 + 0.5, np.nan])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sinc_is_zero_at_infinity_and_right_elsewhere(dtype):
    x = SINC_X.astype(dtype)
    want = np.asarray(jnp.sinc(x))
    assert want[0] == 0 and want[1] == 0
    for where, got in results(tnp.sinc, x).items():
        same(got, want, rtol=1e-6 if dtype == "float32" else 1e-12, atol=0)
        assert np.asarray(got)[0] == 0 and np.asarray(got)[1] == 0, where


def test_sinc_of_complex_infinities_is_jaxs():
    z = np.array([np.inf + 0j, -np.inf + 1j, 1 + 1j * np.inf, 0.5 + 0.25j, 0j])
    want = np.asarray(jnp.sinc(z))
    same(tnp.sinc(z), want, rtol=1e-12)
    same(tidu.jit(tnp.sinc)(z), want, rtol=1e-12)


def test_sinc_derivatives_at_infinity_zero_and_elsewhere_are_jaxs():
    for x0 in (np.inf, -np.inf, 0.0, 0.3, -2.5, 1e-3):
        same(tidu.grad(tnp.sinc)(x0), jax.grad(jnp.sinc)(x0), rtol=1e-10, atol=1e-12, dtype=False)
    same(tidu.grad(tidu.grad(tnp.sinc))(0.0), jax.grad(jax.grad(jnp.sinc))(0.0), rtol=1e-10, dtype=False)
    x = np.array([np.inf, 0.0, 0.7, -np.inf, 3.25])
    same(tidu.grad(lambda v: tnp.sum(tnp.sinc(v)))(x), jax.grad(lambda v: jnp.sum(jnp.sinc(v)))(x), rtol=1e-10,
         atol=1e-12)


# --- 2. signed zeros through sorting and one-hot selections ---------------------------------------------

ZEROS = np.array([0.0, -0.0, 1.0, -0.0, 0.0, -1.0, np.nan, -0.0, np.inf, 0.0, -np.inf])


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_sort_keeps_the_bits_of_signed_zeros(dtype):
    x = ZEROS.astype(dtype)
    want = np.sort(x, kind="stable")  # -0.0 and 0.0 tie and keep their order (JAX's too)
    same_bits(np.asarray(jnp.sort(x)), want, "jax")
    for where, got in results(tnp.sort, x).items():
        same_bits(got, want, where)
    for where, got in results(lambda v: tnp.sort(v, descending=True), x).items():
        same_bits(got, np.asarray(jnp.sort(x, descending=True)), where)
    for where, got in results(tnp.argsort, x).items():
        same_bits(got, np.argsort(x, kind="stable"), where)


def test_sort_along_an_axis_and_lax_sort_keep_signed_zeros():
    x = np.stack([ZEROS, ZEROS[::-1], -ZEROS])
    for axis in (0, 1, -1, None):
        want = np.sort(x, axis=axis, kind="stable")
        for where, got in results(lambda v, a=axis: tnp.sort(v, axis=a), x).items():
            same_bits(got, want, f"{where} axis {axis}")
    for where, got in results(lambda v: lax.sort(v, dimension=1), x).items():
        same_bits(got, np.asarray(jax.lax.sort(x, dimension=1)), where)
    keys, vals = lax.sort_key_val(ZEROS, -ZEROS)
    jk, jv = jax.lax.sort_key_val(ZEROS, -ZEROS)
    same_bits(keys, np.asarray(jk))
    same_bits(vals, np.asarray(jv))
    same_bits(tidu.jit(lambda a: lax.sort_key_val(a, -a)[1])(ZEROS), np.asarray(jv))


def test_sort_complex_and_median_keep_signed_zeros():
    z = np.array([complex(-0.0, 0.0), complex(0.0, -0.0), complex(-0.0, -0.0), 1 - 1j])
    for where, got in results(tnp.sort_complex, z).items():
        same_bits(got, np.sort_complex(z), where)  # ties keep their order: NumPy's sort is stable at this size
    m = np.array([-0.0, -0.0, -0.0])
    for where, got in results(tnp.median, m).items():  # eagerly NumPy's (0.0: a mean), traced JAX's
        same_bits(got, np.median(m) if where == "eager" else np.asarray(jnp.median(m)), where)


def test_derivative_of_sort_follows_signed_zeros_as_jax():
    x = np.array([0.0, -0.0, 2.0, -0.0, -1.0])
    w = np.arange(1.0, 6.0)
    got = tidu.grad(lambda v: tnp.sum(tnp.sort(v) * w))(x)
    same(got, jax.grad(lambda v: jnp.sum(jnp.sort(v) * w))(x), rtol=0, atol=0)


def test_traced_indices_and_take_along_axis_keep_signed_zeros():
    a = np.array([[-0.0, 1.0, -0.0], [0.0, -0.0, 2.0]])
    i = np.array([2, 0, 1, 0])
    for where, got in results(lambda v, k: v[:, k], a, i).items():
        same_bits(got, np.asarray(jnp.asarray(a)[:, i]), where)
    j = np.array([[0, 2, 1], [1, 1, 0]])
    for where, got in results(lambda v, k: tnp.take_along_axis(v, k, axis=1), a, j).items():
        same_bits(got, np.asarray(jnp.take_along_axis(a, j, axis=1)), where)
    for where, got in results(lambda v, k: tnp.take(v, k, axis=1), a, i).items():
        same_bits(got, np.asarray(jnp.take(a, i, axis=1)), where)


# --- 3. nextafter and dtype names ----------------------------------------------------------------------


def _grid(dtype):
    fi = ml_dtypes.finfo(dtype)
    sub, normal, big = float(fi.smallest_subnormal), float(fi.smallest_normal), float(fi.max)
    sp = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, sub, -sub, 2 * sub, normal, -normal,
                   big, -big, 0.5, -3.0])
    return np.repeat(sp, sp.size).astype(dtype), np.tile(sp, sp.size).astype(dtype)


@pytest.mark.filterwarnings("ignore:overflow encountered in nextafter")  # NumPy's, eagerly
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_nextafter_is_numpys_bit_for_bit(dtype):
    x1, x2 = _grid(dtype)
    want = np.nextafter(x1, x2)
    for where, got in results(tnp.nextafter, x1, x2).items():
        same_bits(got, want, where)
    for where, got in results(lax.nextafter, x1, x2).items():  # lax.nextafter: the same values
        same_bits(got, want, f"lax {where}")


def test_nextafter_promotes_and_broadcasts_as_numpy():
    x = np.array([1.0, -0.0, 3.0], np.float32)
    same_bits(tidu.jit(lambda v: tnp.nextafter(v, 2.0))(x), np.nextafter(x, np.float32(2.0)))
    same_bits(tidu.jit(lambda v: tnp.nextafter(v, np.float64(-1.0)))(x), np.nextafter(x, np.float64(-1.0)))
    k = np.array([1, 0, -4])
    same_bits(tidu.jit(lambda v: tnp.nextafter(v, np.array([[5], [-5]])))(k), np.nextafter(k, np.array([[5], [-5]])))
    same_bits(tidu.jit(tnp.nextafter)(np.zeros(0), np.zeros(0)), np.nextafter(np.zeros(0), np.zeros(0)))
    with pytest.raises(TypeError, match="nextafter is not defined for complex"):
        tidu.jit(tnp.nextafter)(np.array([1j]), np.array([1.0]))


def test_nextafter_derivative_is_jaxs():
    x1 = np.array([0.5, -2.0, 3.0, 1e300, 7.0, -1.0, 2.0])
    x2 = np.array([1.0, -3.0, 3.0, np.inf, -np.inf, 1.0, np.nan])
    for argnums in (0, 1):
        got = tidu.grad(lambda a, b: tnp.sum(tnp.nextafter(a, b) * np.arange(1.0, 8.0)), argnums=argnums)(x1, x2)
        want = jax.grad(lambda a, b: jnp.sum(jnp.nextafter(a, b) * np.arange(1.0, 8.0)), argnums=argnums)(x1, x2)
        same(got, want, rtol=0, atol=0)
    same(tidu.jacfwd(lambda a: tnp.nextafter(a, x2))(x1), jax.jacfwd(lambda a: jnp.nextafter(a, x2))(x1), rtol=0,
         atol=0)


JAX_DTYPE_NAMES = ("bool", "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                   "float16", "bfloat16", "float32", "float64", "complex64", "complex128", "int_", "uint", "float_",
                   "complex_", "single", "double", "csingle", "cdouble")
JAX_ABSTRACT_NAMES = ("generic", "number", "integer", "signedinteger", "unsignedinteger", "inexact", "floating",
                      "complexfloating")


def test_jax_numpy_dtype_names_are_there():
    for name in JAX_DTYPE_NAMES:
        assert np.dtype(getattr(tnp, name)) == np.dtype(getattr(jnp, name)), name
        x = np.ones(2)
        assert tidu.jit(lambda v, n=name: tnp.astype(v, getattr(tnp, n)))(x).dtype == np.dtype(getattr(jnp, name))
    for name in JAX_ABSTRACT_NAMES:
        assert getattr(tnp, name) is getattr(jnp, name), name
    assert tnp.dtype is np.dtype
    assert np.issubdtype(tnp.int8, tnp.signedinteger) and np.issubdtype(tnp.uint16, tnp.unsignedinteger)
    assert "bool" in dir(tnp) and tnp.bool is np.bool_


# --- 4. take and take_along_axis: modes and fill_value ------------------------------------------------------

TAKE_A = np.array([[0.0, -0.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0, 9.0]])
TAKE_I = np.array([-7, -6, -5, -1, 0, 4, 5, 6, 11])


@pytest.mark.parametrize("mode,fill_value", [("fill", None), ("fill", -3.0), (None, 7.5), ("clip", None),
                                             ("wrap", None)])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_take_out_of_range_is_jaxs(mode, fill_value, axis):
    want = np.asarray(jnp.take(TAKE_A, TAKE_I, axis=axis, mode=mode, fill_value=fill_value))

    def f(a, i):
        return tnp.take(a, i, axis=axis, mode=mode, fill_value=fill_value)

    same_bits_every_way(f, TAKE_A, TAKE_I, want)


@pytest.mark.parametrize("dtype", ["int32", "uint8", "bool", "float32"])
def test_take_fill_values_by_dtype_are_jaxs(dtype):
    a = (np.arange(5) % 3).astype(dtype)
    for fv in (None, 2):
        want = np.asarray(jnp.take(a, TAKE_I, mode="fill", fill_value=fv))
        same_bits(tnp.take(a, TAKE_I, mode="fill", fill_value=fv), want, "eager")
        same_bits(tidu.jit(lambda i, fv=fv: tnp.take(a, i, mode="fill", fill_value=fv))(TAKE_I), want, "traced")
        same_bits(tidu.jit(lambda i: tnp.take(a, i))(TAKE_I), np.asarray(jnp.take(a, TAKE_I)), "default")


def test_take_derivatives_with_modes_are_jaxs():
    x = np.arange(1.0, 6.0)
    w = np.arange(1.0, 10.0)
    for mode, fv in (("fill", 0.0), ("clip", None), ("wrap", None), ("fill", None)):
        got = tidu.grad(lambda v, m=mode, f=fv: tnp.nansum(tnp.take(v, TAKE_I, mode=m, fill_value=f) * w))(x)
        want = jax.grad(lambda v, m=mode, f=fv: jnp.nansum(jnp.take(v, TAKE_I, mode=m, fill_value=f) * w))(x)
        same(got, want, rtol=0, atol=0)


TA = np.array([[0.0, -0.0, 2.0], [3.0, 4.0, 5.0]])
TJ = np.array([[-4, -1, 3], [0, 5, 2]])


@pytest.mark.parametrize("mode,fill_value", [("fill", None), ("fill", 9.0), (None, 9.0), ("clip", None)])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_take_along_axis_out_of_range_is_jaxs(mode, fill_value, axis):
    want = np.asarray(jnp.take_along_axis(TA, TJ, axis=axis, mode=mode, fill_value=fill_value))

    def f(a, j):
        return tnp.take_along_axis(a, j, axis=axis, mode=mode, fill_value=fill_value)

    same_bits_every_way(f, TA, TJ, want)


def test_take_along_axis_traced_indices_default_to_jaxs_fill():
    want = np.asarray(jnp.take_along_axis(TA, TJ, axis=1))
    same_bits(tidu.jit(lambda j: tnp.take_along_axis(TA, j, axis=1))(TJ), want)
    same_bits(tidu.jit(lambda j: tnp.take_along_axis(TA, j))(TJ), np.asarray(jnp.take_along_axis(TA, TJ)))
    w = np.arange(6.0).reshape(2, 3)
    got = tidu.grad(lambda a: tnp.sum(tnp.take_along_axis(a, TJ, axis=1, mode="fill", fill_value=0.0) * w))(TA)
    same(got, jax.grad(lambda a: jnp.sum(jnp.take_along_axis(a, TJ, axis=1, mode="fill", fill_value=0.0) * w))(TA),
         rtol=0, atol=0)


def test_take_errors_name_the_problem():
    with pytest.raises(ValueError, match="mode 'bogus' is not one of"):
        tnp.take(TAKE_A, TAKE_I, mode="bogus")
    with pytest.raises(ValueError, match="mode 'wrap' is not one of"):  # jax.numpy refuses it too
        tnp.take_along_axis(TA, TJ, axis=1, mode="wrap")
    with pytest.raises(IndexError, match="mode='fill'"):  # NumPy's default "raise" for constant indices
        tidu.jit(lambda a: tnp.take(a, TAKE_I))(TAKE_A)
    with pytest.raises(TypeError, match="fill_value must be a constant"):
        tidu.jit(lambda f: tnp.take(TAKE_A, TAKE_I, mode="fill", fill_value=f))(1.0)
    with pytest.raises(TypeError, match="out= is not supported"):
        tnp.take(TAKE_A, TAKE_I, out=np.zeros(9), mode="clip")
    with pytest.raises(TypeError, match="indices must be integers"):
        tidu.jit(lambda i: tnp.take(TAKE_A, i, mode="clip"))(np.array([0.5]))


# --- 5. lax.population_count and lax.clz ---------------------------------------------------------------

INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("name", ["population_count", "clz"])
def test_population_count_and_clz_are_jax_laxs(name, dtype):
    info = np.iinfo(dtype)
    edge = [0, 1, 2, 3, info.max, info.max - 1, info.min, info.min + 1] + ([-1, -2] if info.min else [])
    rng = np.random.default_rng(sum(map(ord, name + dtype)))
    x = np.concatenate([np.array(edge, dtype), rng.integers(info.min, info.max, 300, dtype=dtype, endpoint=True),
                        (np.uint64(1) << np.arange(info.bits, dtype=np.uint64)).astype(dtype)])
    want = np.asarray(getattr(jax.lax, name)(x))
    for where, got in results(getattr(lax, name), x).items():
        same_bits(got, want, where)
    same_bits(getattr(lax, name)(x[0]), np.asarray(getattr(jax.lax, name)(x[0])), "scalar")


def test_population_count_and_clz_refuse_floats():
    for fn in (lax.population_count, lax.clz):
        with pytest.raises(TypeError, match="takes signed integer or unsigned integer values"):
            fn(np.array([1.0]))


# --- sweep: the sign bit of a negative nan ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_signbit_and_copysign_read_the_sign_of_a_negative_nan(dtype):
    x = np.array([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1.0, -1.0, 5e-324, -5e-324]).astype(dtype)
    for where, got in results(tnp.signbit, x).items():
        same_bits(got, np.asarray(jnp.signbit(x)), where)
    for where, got in results(lambda v: tnp.copysign(np.ones((), dtype), v), x).items():
        same_bits(got, np.asarray(jnp.copysign(np.ones((), dtype), x)), where)


# --- sweep: order statistics on edge inputs (numpy_gaps) ----------------------------------------------------

EDGE = np.array([np.nan, 1.0, -np.inf, np.inf, 0.0, -0.0, 1.0, 2.0])


def eager_and_traced(f, x):
    return {"eager": f(x), "jit": tidu.jit(f)(x)}


@pytest.mark.parametrize("name", ["sort", "sort-descending", "argsort", "argsort-descending", "top_k", "lexsort",
                                  "searchsorted"])
def test_ordering_bfloat16_eagerly_puts_nan_last_as_jax(name):
    """NumPy's sort of ml_dtypes.bfloat16 does not put nan last (it compared as unordered):
    eager calls sorted [nan, 1, -inf, ...] as [nan, -inf, 0, ...]; JAX and traced put it last."""
    x = EDGE.astype(ml_dtypes.bfloat16)
    calls = {
        "sort": (lambda m, v: m.sort(v)),
        "sort-descending": (lambda m, v: m.sort(v, descending=True)),
        "argsort": (lambda m, v: m.argsort(v)),
        "argsort-descending": (lambda m, v: m.argsort(v, descending=True)),
        "top_k": (lambda m, v: (tnp.top_k(v, 8) if m is tnp else jax.lax.top_k(v, 8))[1]),
        "lexsort": (lambda m, v: m.lexsort((v, -v))),
        "searchsorted": (lambda m, v: m.searchsorted(m.sort(v), np.array([0.5, 2.0, np.inf], v.dtype))),
    }
    want = np.asarray(calls[name](jnp, x))
    for where, got in eager_and_traced(lambda v: calls[name](tnp, v), x).items():
        same_bits(np.asarray(got).astype(want.dtype), want, where)


def test_argsort_descending_of_the_flattened_array_eagerly():
    """argsort(x, axis=None, descending=True) on NumPy arrays raised TypeError (an axis of None
    indexed the shape)."""
    x = np.array([[3.0, 1.0, 1.0], [np.nan, -0.0, 0.0]])
    want = np.asarray(jnp.argsort(x, axis=None, descending=True))
    for where, got in eager_and_traced(lambda v: tnp.argsort(v, axis=None, descending=True), x).items():
        np.testing.assert_array_equal(got, want, err_msg=where)


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "nearest", "midpoint"])
def test_nanquantile_takes_every_method_traced(method):
    """Traced nanquantile raised NotImplementedError for any method but 'linear'; its values
    are NumPy's (JAX's too, but for 'nearest' at a position halfway between two: NumPy rounds
    to even, JAX down)."""
    rng = np.random.default_rng(11)
    x = rng.integers(-3, 4, size=(4, 7)).astype(float)
    x[rng.random(x.shape) < 0.3] = np.nan
    q = np.array([0.0, 0.1, 0.3, 0.5, 0.9, 1.0])
    want = np.nanquantile(x, q, axis=1, method=method)
    for where, got in eager_and_traced(lambda v: tnp.nanquantile(v, q, axis=1, method=method), x).items():
        np.testing.assert_allclose(got, want, rtol=1e-15, atol=0, err_msg=where)
    if method != "nearest":
        np.testing.assert_allclose(tidu.jit(lambda v: tnp.nanquantile(v, q, axis=1, method=method))(x),
                                   jnp.nanquantile(x, q, axis=1, method=method), rtol=1e-15, atol=0)


def test_nanmedian_of_complex_values_is_numpys_traced():
    """Traced nanmedian of complex values raised TypeError (floor of complex), while eager
    (NumPy's) gives the median of the non-nan ones in NumPy's order."""
    rng = np.random.default_rng(12)
    z = rng.normal(size=(3, 6)) + 1j * rng.integers(-1, 2, size=(3, 6))
    z[0, 1], z[1, 2], z[2, :] = np.nan, complex(0, np.nan), np.nan
    for axis in (None, 1):
        want = np.nanmedian(z, axis=axis)
        for where, got in eager_and_traced(lambda v, axis=axis: tnp.nanmedian(v, axis=axis), z).items():
            np.testing.assert_allclose(got, want, rtol=1e-15, atol=0, equal_nan=True, err_msg=where)


@pytest.mark.parametrize("name", ["quantile", "percentile", "nanquantile", "nanpercentile"])
def test_complex_quantiles_are_refused_naming_the_function(name):
    """jax.numpy refuses complex quantiles (so does NumPy): one message, eager and traced."""
    z = np.array([1 + 2j, 3 - 1j, 1 - 5j])
    with pytest.raises(ValueError, match="complex"):
        getattr(jnp, name)(z, 0.5)
    for f in (lambda v: getattr(tnp, name)(v, 0.5), tidu.jit(lambda v: getattr(tnp, name)(v, 0.5))):
        with pytest.raises(TypeError, match=f"tnp.{name}: complex input is not supported"):
            f(z)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["quantile", "nanquantile", "median", "nanmedian", "percentile", "nanpercentile"])
def test_order_statistics_of_half_floats_are_jaxs_eagerly(name, dtype):
    """Eager calls on float16 / bfloat16 went to NumPy: a float64 result for quantiles, and
    for bfloat16 wrong values (nan not sorted last: quantile of EDGE gave [nan, -inf, 0.5,
    1, nan] for JAX's all-nan)."""
    x = EDGE.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    q = {"quantile": np.array([0.1, 0.5]), "nanquantile": np.array([0.3, 0.6]), "percentile": np.array([10.0, 60.0]),
         "nanpercentile": np.array([25.0])}.get(name)
    call = (lambda m, v: getattr(m, name)(v)) if q is None else (lambda m, v: getattr(m, name)(v, q))
    for v in (x, x[1:]):
        want = np.asarray(call(jnp, v))
        for where, got in eager_and_traced(lambda u: call(tnp, u), v).items():
            assert np.asarray(got).dtype == want.dtype, where
            same_bits(np.asarray(got), want, where)


def test_quantiles_of_bools_are_jaxs_eagerly():
    """NumPy's quantile of bools fails (it subtracts them); JAX's and traced ones order them
    as 0 and 1."""
    b = np.array([True, False, True, True, False])
    for name, q in (("quantile", 0.3), ("nanquantile", 0.7), ("percentile", 45.0), ("nanpercentile", 90.0)):
        want = np.asarray(getattr(jnp, name)(b, q))
        for where, got in eager_and_traced(lambda v, name=name, q=q: getattr(tnp, name)(v, q), b).items():
            np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"{name} {where}")


def test_nanquantile_of_an_empty_array_has_no_q_axis():
    """NumPy's (and JAX's) nanquantile of an empty array is its nanmean: nan with no axis for
    q; traced it had one."""
    x = np.zeros((2, 0))
    q = np.array([0.2, 0.5, 0.9])
    for axis, keepdims in ((None, False), (-1, False), (-1, True), (None, True)):
        want = np.asarray(jnp.nanquantile(x, q, axis=axis, keepdims=keepdims))
        for where, got in eager_and_traced(
                lambda v, axis=axis, keepdims=keepdims: tnp.nanquantile(v, q, axis=axis, keepdims=keepdims), x).items():
            np.testing.assert_array_equal(got, want, err_msg=f"{where} axis={axis} keepdims={keepdims}")


def test_nanquantile_keeps_a_negative_zero_as_jax():
    """The nan-ignoring order statistics summed the picked value with a +0.0 start: -0.0 came
    back as 0.0."""
    x = np.array([3.0, 1.0, np.nan, -0.0, 0.0, 2.0])
    for name, q in (("nanquantile", 0.0), ("nanpercentile", 0.0)):
        got = tidu.jit(lambda v, name=name, q=q: getattr(tnp, name)(v, q))(x)
        same_bits(np.asarray(got), np.asarray(getattr(jnp, name)(x, q)), name)


ON_A_STATISTIC = (np.array([-np.inf, 0.0, 1.0, np.inf]), np.array([0.0, 1 / 3, 2 / 3, 1.0]))


@pytest.mark.parametrize("name", ["quantile", "nanquantile"])
def test_a_quantile_on_an_order_statistic_is_that_value_traced(name):
    """The oracle is the order statistic itself (-inf, 0, 1, inf); JAX gives nan at both ends
    (low * 1 + high * 0 with an infinite value), NumPy at three (a + (b - a) * 0)."""
    x, q = ON_A_STATISTIC
    np.testing.assert_array_equal(tidu.jit(lambda v: getattr(tnp, name)(v, q))(x), x)


@pytest.mark.parametrize("name", ["quantile", "nanquantile"])
def test_a_quantile_on_an_order_statistic_is_that_value_eagerly(name):
    """NumPy's a + (b - a) t gives nan for an infinite order statistic at a whole position
    ([nan, 0, nan, nan] for [-inf, 0, 1, inf]): the eager call gives the traced values."""
    x, q = ON_A_STATISTIC
    np.testing.assert_array_equal(getattr(tnp, name)(x, q), x)
