"""An outside tester's checks of tidu.numpy and the transforms over it against JAX (x64)
and NumPy: ties and kinks, integer, boolean and half-precision inputs, reduction keywords
(``where=``, ``initial=``, NumPy's positional order), tuple axes of order statistics,
creation functions, and linalg second derivatives at exactly rank-deficient matrices.

Tests marked ``xfail(strict=True)`` fail today; each reason says what is wrong."""

from __future__ import annotations

import os
import warnings
from functools import partial

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import ml_dtypes
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from oracle_util import same as _same  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402
from tidu.scipy import special as tsp  # noqa: E402

RNG = np.random.default_rng(20261130)


# --- ties and kinks: what already agrees with JAX (regression guards) ------------------------

TIE = np.array([1.0, 3.0, 3.0, 2.0])
KINK_CASES = {
    "max": (lambda m, x: m.max(x), TIE),
    "min": (lambda m, x: m.min(x), np.array([1.0, 1.0, 2.0])),
    "amax_axis": (lambda m, x: m.sum(m.amax(x.reshape(2, 2), axis=1)), np.array([1.0, 1.0, 2.0, 3.0])),
    "maximum_scalar": (lambda m, x: m.sum(m.maximum(x, 3.0)), TIE),
    "minimum_scalar": (lambda m, x: m.sum(m.minimum(x, 3.0)), TIE),
    "maximum_self": (lambda m, x: m.sum(m.maximum(x, x[::-1])), np.array([1.0, 2.0, 2.0, 1.0])),
    "clip_at_bounds": (lambda m, x: m.sum(m.clip(x, 1.0, 3.0) ** 2), TIE),
    "sort_ties": (lambda m, x: m.sum(m.sort(x) * np.arange(4.0)), TIE),
    "median_even_ties": (lambda m, x: m.median(x), TIE),
    "median_all_equal": (lambda m, x: m.median(x), np.full(4, 2.0)),
    "quantile_ties": (lambda m, x: m.quantile(x, 0.3), np.array([2.0, 2.0, 1.0, 2.0])),
    "ptp_ties": (lambda m, x: m.ptp(x), TIE),
    "norm_inf_ties": (lambda m, x: m.linalg.norm(x, np.inf), np.array([1.0, -3.0, 3.0])),
    "argmax_index": (lambda m, x: x[m.argmax(x)] * 2.0, TIE),
    "where_branches": (lambda m, x: m.sum(m.where(x > 2, x ** 2, x)), TIE),
    "logsumexp_tie": (lambda m, x: m.log(m.sum(m.exp(x))), np.array([1.0, 1.0])),
    "sqrt_of_shifted_square": (lambda m, x: m.sum(m.sqrt(x ** 2 + 1.0)), np.array([0.0, 1.0])),
    "norm_squared_at_zero": (lambda m, x: m.linalg.norm(x) ** 2, np.array([0.0, 1.0, 2.0])),
    "x_pow_2_5_at_zero": (lambda m, x: m.sum(x ** 2.5), np.array([0.0, 1.0])),
}


@pytest.mark.parametrize("name", sorted(KINK_CASES))
def test_ties_and_kinks_first_and_second_derivatives_as_jax(name):
    f, x = KINK_CASES[name]
    ft, fj = (lambda x: f(tnp, x)), (lambda x: f(jnp, x))
    _same(tidu.jit(ft)(x), fj(x))
    _same(tidu.grad(ft)(x), jax.grad(fj)(x))
    _same(tidu.jacfwd(ft)(x), jax.jacfwd(fj)(x))
    _same(tidu.hessian(ft)(x), jax.hessian(fj)(x))


def test_sort_and_max_derivatives_at_ties_under_vmap_as_jax():
    xs = np.array([[3.0, 1.0, 3.0], [1.0, 2.0, 2.0]])
    _same(tidu.vmap(tidu.grad(tnp.max))(xs), jax.vmap(jax.grad(jnp.max))(xs))
    w = np.array([1.0, 2.0, 4.0])
    _same(tidu.vmap(tidu.grad(lambda r: tnp.sum(tnp.sort(r) * w)))(xs),
          jax.vmap(jax.grad(lambda r: jnp.sum(jnp.sort(r) * w)))(xs))


# --- kinks of abs: smooth functions written through it -----------------------------------


@pytest.mark.parametrize("y", [3.0, -0.5])
def test_hypot_second_derivative_where_one_operand_is_zero(y):
    # hypot works on |x| and |y|: with abs'(0) = 0 (before 9859912) d2/dx2 hypot(x, y) at x = 0 was 0
    f = lambda m: (lambda x: m.sum(m.hypot(x, y)))  # noqa: E731
    x = np.array([0.0, 2.0])
    _same(tidu.hessian(f(tnp))(x), jax.hessian(f(jnp))(x))
    _same(tidu.hessian(lambda x: tnp.sum(tnp.hypot(y, x)))(x), jax.hessian(f(jnp))(x))


def test_hypot_at_the_origin_and_infinity_keeps_its_documented_derivatives():
    g = tidu.grad(lambda p: tnp.hypot(p[0], p[1]))
    _same(g(np.array([0.0, 0.0])), np.zeros(2))
    _same(g(np.array([np.inf, 1.0])), np.zeros(2))
    _same(tidu.jit(lambda p: tnp.hypot(p[0], p[1]))(np.array([1e300, 1e300])), np.hypot(1e300, 1e300))


def test_second_derivatives_of_smooth_functions_of_abs_at_zero():
    # with abs'(0) = 0 (before 9859912) the Hessians of |x|**2 and cos(|x|) at 0 were 0 (JAX: 2 and -1)
    x = np.array([0.0, 1.0])
    for f in (lambda m, x: m.sum(m.abs(x) ** 2), lambda m, x: m.sum(m.cos(m.abs(x)))):
        _same(tidu.hessian(partial(f, tnp))(x), jax.hessian(partial(f, jnp))(x))


# --- booleans and integers ----------------------------------------------------------------

BOOLS = np.array([True, False, True, False])


@pytest.mark.parametrize("op", ["add", "multiply", "abs", "square"])
def test_boolean_arithmetic_traced_as_numpy_and_jax(op):
    fn = {"add": lambda m, a: a + a[::-1], "multiply": lambda m, a: m.multiply(a, a[::-1]),
          "abs": lambda m, a: m.abs(a), "square": lambda m, a: m.square(a)}[op]
    want = fn(np if op == "square" else jnp, BOOLS)  # JAX squares booleans to int32, NumPy keeps bool
    _same(tidu.jit(lambda a: fn(tnp, a))(BOOLS), want)
    _same(fn(tnp, BOOLS), want)


def test_boolean_maximum_and_sum_of_products_as_jax():
    _same(tidu.jit(lambda a: tnp.maximum(a, a[::-1]))(BOOLS), jnp.maximum(BOOLS, BOOLS[::-1]))
    _same(tidu.jit(lambda a: tnp.sum(a * 2))(BOOLS), jnp.sum(BOOLS * 2))
    g = tidu.grad(lambda x: tnp.sum(x * (x > 0)))(np.array([0.5, -1.0]))
    _same(g, jax.grad(lambda x: jnp.sum(x * (x > 0)))(np.array([0.5, -1.0])))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "uint32"])
def test_sort_keeps_a_narrow_integer_dtype(dtype):
    x = np.array([3, 1, 2, 0, 2], dtype)
    _same(tidu.jit(tnp.sort)(x), jnp.sort(x))
    _same(tidu.jit(tnp.sort)(x), np.sort(x))


def test_median_and_argsort_of_integers_as_jax():
    x = np.array([3, 1, 2, 0, 2], np.int64)
    _same(tidu.jit(tnp.argsort)(x), np.argsort(x, kind="stable"), dtype=False)
    _same(tidu.jit(tnp.median)(x), np.median(x))


def test_argsort_descending_is_stable_at_ties():
    for x in (np.array([1.0, 2.0, 2.0, 0.0]), np.array([1.0, np.nan, 2.0, 2.0, np.nan, -1.0]),
              np.array([3, 1, 3, 3, 0], np.int8)):
        want = jnp.argsort(x, descending=True, stable=True)
        _same(tidu.jit(lambda a: tnp.argsort(a, descending=True))(x), want, dtype=False)
        _same(tnp.argsort(x, descending=True), want, dtype=False)


def test_integer_power_with_an_integer_array_exponent():
    x = np.array([2, -2, 1, -1, 0, 3], np.int8)
    y = np.array([7, 3, 2, 3, 1, 4], np.int8)
    _same(tidu.jit(tnp.power)(x, y), jnp.power(x, y))
    _same(tidu.jit(tnp.power)(x, y), np.power(x, y))
    _same(tidu.jit(lambda a: a ** np.array([2, 3]))(np.array([3, 4])), np.array([9, 64]))


@pytest.mark.parametrize(("a", "b"), [("int8", "uint8"), ("int32", "float32"), ("uint32", "int32"),
                                      ("bool", "float32"), ("int16", "float16")])
def test_binary_promotion_of_two_arrays_as_jax(a, b):
    x = np.array([1, 0, 3]).astype(a)
    y = np.array([2, 5, 1]).astype(b)
    for f in (lambda m, x, y: m.add(x, y), lambda m, x, y: m.maximum(x, y), lambda m, x, y: m.where(x > 0, x, y)):
        _same(tidu.jit(partial(f, tnp))(x, y), f(jnp, x, y), rtol=1e-3)


# --- float16 and bfloat16 ------------------------------------------------------------------

HALF = ["float16", "bfloat16"]


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("name", ["arctan2", "arctan", "arcsin", "arccos"])
def test_inverse_trigonometry_of_half_precision(dtype, name):
    x = np.array([0.25, 0.5, -0.75], dtype)
    args = (x, x[::-1].copy()) if name == "arctan2" else (x,)
    got = tidu.jit(getattr(tnp, name))(*args)
    want = getattr(jnp, name)(*args)
    assert got.dtype == want.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(want, np.float64), rtol=2e-2, atol=2e-2)
    g = tidu.grad(lambda *a: tnp.sum(getattr(tnp, name)(*a)))(*args)
    gj = jax.grad(lambda *a: jnp.sum(getattr(jnp, name)(*a)))(*args)
    assert g.dtype == np.dtype(dtype)
    np.testing.assert_allclose(g.astype(np.float64), np.asarray(gj, np.float64), rtol=3e-2, atol=3e-2)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("name", ["erf", "gammaln", "i0e", "erfc"])
def test_scipy_kernels_of_half_precision_under_jit(dtype, name):
    x = np.array([0.25, 0.5, 0.75], dtype)
    fn = getattr(tsp, name)
    for _ in range(3):  # interpreted for the first calls, then the generated source
        got = tidu.jit(fn)(x)
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_allclose(got.astype(np.float64), np.asarray(getattr(jax.scipy.special, name)(x),
                                                                       np.float64), rtol=2e-2)


@pytest.mark.parametrize("dtype", HALF)
def test_i0_of_half_precision_under_jit_and_grad(dtype):
    x = np.array([0.25, 1.5], dtype)
    got = tidu.jit(tnp.i0)(x)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got.astype(np.float64), np.i0(x.astype(np.float64)), rtol=2e-2)
    assert tidu.grad(lambda x: tnp.sum(tnp.i0(x)))(x).dtype == np.dtype(dtype)


# --- reductions: NumPy's keywords and order ------------------------------------------------

X3 = RNG.normal(size=(2, 3, 4))
MASK = RNG.random((2, 3, 4)) < 0.6
XI = RNG.integers(-5, 5, size=(2, 3, 4)).astype(np.int8)

WHERE_CASES = {
    "sum": lambda m, a: m.sum(a, axis=1, where=MASK),
    "sum_initial": lambda m, a: m.sum(a, axis=0, initial=2.5),
    "prod": lambda m, a: m.prod(a, axis=-1, where=MASK, initial=2.0),
    "mean": lambda m, a: m.mean(a, axis=(0, 2), where=MASK, keepdims=True),
    "max": lambda m, a: m.max(a, axis=2, where=MASK, initial=-0.5),
    "max_initial": lambda m, a: m.max(a, axis=0, initial=0.5),
    "min": lambda m, a: m.min(a, where=MASK, initial=0.3),
    "var": lambda m, a: m.var(a, axis=0, where=MASK, ddof=1),
    "std": lambda m, a: m.std(a, axis=(0, 1), where=MASK),
    "all": lambda m, a: m.all(a > 0, axis=0, where=MASK),
    "any": lambda m, a: m.any(a > 0, axis=(1, 2), where=MASK),
}


@pytest.mark.parametrize("name", sorted(WHERE_CASES))
def test_reductions_with_where_and_initial_as_numpy_and_jax(name):
    f = WHERE_CASES[name]
    want = f(jnp, X3)
    _same(tidu.jit(lambda a: f(tnp, a))(X3), want)
    _same(f(tnp, X3), f(np, X3))
    if np.asarray(want).dtype.kind == "f":
        w = RNG.normal(size=np.shape(want))
        _same(tidu.grad(lambda a: tnp.sum(w * f(tnp, a)))(X3), jax.grad(lambda a: jnp.sum(w * f(jnp, a)))(X3),
              rtol=1e-8, atol=1e-10)


def test_reductions_take_numpys_positional_order():
    x = np.arange(6.0).reshape(2, 3)
    for f in (lambda m, a: m.sum(a, 1, np.float32), lambda m, a: m.mean(a, 1, np.float32),
              lambda m, a: m.prod(a, 1, np.float32), lambda m, a: m.max(a, 1, None, True)):
        _same(tidu.jit(partial(f, tnp))(x), f(np, x))
        _same(f(tnp, x), f(np, x))


def test_mean_var_std_with_dtype_and_correction():
    for f in (lambda m, a: m.mean(a, axis=0, dtype=np.float32), lambda m, a: m.var(a, axis=1, dtype=np.float32),
              lambda m, a: m.std(a, axis=1, correction=1), lambda m, a: m.mean(a, axis=1, where=MASK)):
        _same(tidu.jit(partial(f, tnp))(XI), f(np, XI), rtol=1e-6)


def test_integer_reductions_accumulate_as_documented():
    _same(tidu.jit(tnp.sum)(XI), np.sum(XI))
    _same(tidu.jit(lambda a: tnp.max(a, axis=1))(XI), jnp.max(XI, axis=1))
    _same(tidu.jit(lambda a: tnp.min(a, axis=(0, 2), keepdims=True))(XI), jnp.min(XI, axis=(0, 2), keepdims=True))
    _same(tidu.jit(lambda a: tnp.count_nonzero(a, axis=(0, 2)))(XI), np.count_nonzero(XI, axis=(0, 2)),
          dtype=False)


# --- order statistics over several axes ----------------------------------------------------

XN = X3.copy()
XN[0, 1, 2] = np.nan
TUPLE_AXIS = {
    "median": (lambda m, a: m.median(a, axis=(0, 2), keepdims=True), X3),
    "median_neg": (lambda m, a: m.median(a, axis=(-1, 0)), X3),
    "quantile": (lambda m, a: m.quantile(a, np.array([0.2, 0.7]), axis=(1, 2)), X3),
    "percentile": (lambda m, a: m.percentile(a, 30.0, axis=(0, 1), method="higher"), X3),
    "nanmedian": (lambda m, a: m.nanmedian(a, axis=(0, 1)), XN),
    "nanquantile": (lambda m, a: m.nanquantile(a, 0.3, axis=(2, 0), keepdims=True), XN),
}


@pytest.mark.parametrize("name", sorted(TUPLE_AXIS))
def test_order_statistics_over_a_tuple_of_axes(name):
    f, x = TUPLE_AXIS[name]
    want = f(jnp, x)
    _same(tidu.jit(lambda a: f(tnp, a))(x), want)
    w = RNG.normal(size=np.shape(want))
    _same(tidu.grad(lambda a: tnp.sum(w * f(tnp, a)))(x), jax.grad(lambda a: jnp.sum(w * f(jnp, a)))(x))


# --- joining and creation ------------------------------------------------------------------


def test_concatenate_with_axis_none():
    x = RNG.normal(size=(2, 3))
    f = lambda m: (lambda a: m.concatenate([a, a[:1] * 2.0, np.arange(2.0)], axis=None))  # noqa: E731
    _same(tidu.jit(f(tnp))(x), f(jnp)(x))
    _same(tidu.grad(lambda a: tnp.sum(f(tnp)(a) ** 2))(x), jax.grad(lambda a: jnp.sum(f(jnp)(a) ** 2))(x))


def test_geomspace_of_negative_endpoints():
    f = lambda m: (lambda s: m.geomspace(s, -2.0, 4))  # noqa: E731
    _same(tidu.jit(f(tnp))(-1.0), np.geomspace(-1.0, -2.0, 4))
    _same(tidu.grad(lambda s: tnp.sum(f(tnp)(s)))(-1.0), jax.grad(lambda s: jnp.sum(f(jnp)(s)))(-1.0))


def test_linspace_keeps_float32():
    a = np.array([0.5, 1.5], np.float32)
    for f in (lambda m, a: m.linspace(a[0], a[1], 4), lambda m, a: m.linspace(a, 2 * a, 3),
              lambda m, a: m.logspace(a[0], a[1], 3)):
        _same(tidu.jit(partial(f, tnp))(a), f(jnp, a), rtol=1e-6)
        _same(f(tnp, a), f(np, a), rtol=1e-6)


def test_pad_modes_with_large_widths_and_derivatives_as_jax():
    v = RNG.normal(size=5)
    for mode, width in (("wrap", 7), ("reflect", 6), ("symmetric", 7), ("edge", 3)):
        def loss(m, a, w, width=width, mode=mode):
            return m.sum(w * m.pad(a, width, mode=mode))

        want = jnp.pad(v, width, mode=mode)
        _same(tidu.jit(lambda a, width=width, mode=mode: tnp.pad(a, width, mode=mode))(v), want)
        w = RNG.normal(size=want.shape)
        _same(tidu.grad(partial(loss, tnp), argnums=0)(v, w), jax.grad(partial(loss, jnp), argnums=0)(v, w))


# --- linear algebra ------------------------------------------------------------------------

SINGULAR = {
    "diag_0_1_2": np.diag([0.0, 1.0, 2.0]),
    "diag_2_1_0": np.diag([2.0, 1.0, 0.0]),
    "rank_one_2x2": np.array([[1.0, 0.0], [0.0, 0.0]]),
    "lower_triangular": np.diag([0.0, 1.0, 2.0]) + np.array([[0, 0, 0], [0, 0, 0], [0.1, 0, 0.0]]),
}


@pytest.mark.parametrize("name", sorted(SINGULAR))
def test_largest_singular_value_hessian_at_exactly_singular_matrices(name):
    a = SINGULAR[name]
    for f in (lambda m, a: m.linalg.svd(a, compute_uv=False)[0], lambda m, a: m.linalg.norm(a, 2) ** 2):
        _same(tidu.hessian(partial(f, tnp))(a), jax.hessian(partial(f, jnp))(a), atol=1e-12)


def test_largest_singular_value_hessian_at_generic_rank_deficient_matrix():
    u = RNG.normal(size=(3, 2))
    a = u @ RNG.normal(size=(2, 3))
    f = lambda m, a: m.linalg.norm(a, 2) ** 2  # noqa: E731
    _same(tidu.hessian(lambda a: f(tnp, a))(a), jax.hessian(lambda a: f(jnp, a))(a), rtol=1e-7, atol=1e-10)


LINALG_F32 = {
    "inv": lambda m, a: m.linalg.inv(a),
    "solve": lambda m, a: m.linalg.solve(a, np.ones(3, np.float32)),
    "eigvalsh": lambda m, a: m.linalg.eigvalsh(a + a.T),
    "slogdet": lambda m, a: m.linalg.slogdet(a)[1],
    "pinv": lambda m, a: m.linalg.pinv(a),
}


@pytest.mark.parametrize("name", sorted(LINALG_F32))
def test_linalg_in_float32_keeps_float32_and_matches_jax(name):
    f = LINALG_F32[name]
    a = (RNG.normal(size=(3, 3)) + 3 * np.eye(3)).astype(np.float32)
    _same(tidu.jit(lambda a: f(tnp, a))(a), f(jnp, a), rtol=1e-4, atol=1e-5)
    w = RNG.normal(size=np.shape(f(jnp, a))).astype(np.float32)
    _same(tidu.grad(lambda a: tnp.sum(w * f(tnp, a)))(a), jax.grad(lambda a: jnp.sum(w * f(jnp, a)))(a),
          rtol=1e-3, atol=1e-4)


GAUGE_INVARIANT = {
    "svdvals_cubed": lambda m, a: m.sum(m.linalg.svd(a, compute_uv=False) ** 3),
    "pinv_squared": lambda m, a: m.sum(m.linalg.pinv(a) ** 2),
    "lstsq_squared": lambda m, a: m.sum(m.linalg.lstsq(a, np.arange(4.0))[0] ** 2),
    "nuclear_norm": lambda m, a: m.linalg.norm(a, "nuc"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(GAUGE_INVARIANT))
def test_linalg_hessians_of_gauge_invariant_functions_as_jax(name):
    f = GAUGE_INVARIANT[name]
    a = np.random.default_rng(7).normal(size=(4, 3))
    _same(tidu.hessian(lambda a: f(tnp, a))(a), jax.hessian(lambda a: f(jnp, a))(a), rtol=1e-6, atol=1e-9)


# --- errors --------------------------------------------------------------------------------


def test_boolean_subtract_is_refused_as_in_numpy_and_jax():
    with pytest.raises(TypeError):
        np.subtract(BOOLS, BOOLS)
    with pytest.raises(TypeError):
        jnp.subtract(BOOLS, BOOLS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception) as info:
            tidu.jit(lambda a: a - a)(BOOLS)
    assert "bool" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("call", [lambda a: tnp.sum(a, axis=2), lambda a: tnp.reshape(a, (4, 2)),
                                  lambda a: a @ np.ones((2, 2)), lambda a: tnp.median(a, axis=3),
                                  lambda a: tnp.linalg.inv(a), lambda a: tnp.concatenate([a, np.ones((2, 2))])])
def test_bad_shapes_and_axes_are_one_line_errors_naming_the_function(call):
    with pytest.raises(ValueError) as info:
        tidu.jit(call)(np.ones((2, 3)))
    msg = str(info.value)
    assert msg.startswith("tnp.") and "\n" not in msg


def test_bfloat16_gradient_dtype_and_value():
    x = np.array([0.5, 1.25, -2.0], ml_dtypes.bfloat16)
    g = tidu.grad(lambda x: tnp.sum(tnp.tanh(x) * x))(x)
    assert g.dtype == x.dtype
    gj = jax.grad(lambda x: jnp.sum(jnp.tanh(x) * x))(x)
    np.testing.assert_allclose(g.astype(np.float64), np.asarray(gj, np.float64), rtol=3e-2, atol=3e-2)


def test_filled_like_take_a_shape_as_jax():
    """full_like, zeros_like and ones_like with shape= (NumPy's and JAX's), eager and
    traced, a traced fill value's derivative flowing; a bad shape is a one-line TypeError."""
    x = np.arange(3.0)
    cases = ((lambda m, x: m.full_like(x, 2.5, shape=(2, 3))), (lambda m, x: m.zeros_like(x, shape=4)),
             (lambda m, x: m.ones_like(x, np.int32, shape=(2,))), (lambda m, x: m.full_like(x, x[0], shape=(2, 2))))
    for f in cases:
        want = np.asarray(f(jnp, x))
        for got in (np.asarray(f(tnp, x)), np.asarray(tidu.jit(lambda v, f=f: f(tnp, v))(x))):
            assert got.dtype == want.dtype and np.array_equal(got, want)
    _same(tidu.grad(lambda v: tnp.sum(tnp.full_like(v, v[1], shape=(2, 2))))(x),
          jax.grad(lambda v: jnp.sum(jnp.full_like(v, v[1], shape=(2, 2))))(x))
    with pytest.raises(TypeError, match="shape= must be"):
        tidu.jit(lambda v: tnp.full_like(v, 1.0, shape="ab"))(x)


def test_top_k_ranks_nan_largest_and_gives_ties_to_the_lower_index():
    """tnp.top_k as lax.top_k: nan above inf, the lower index first among equal values, for
    the values, the indices and the derivative (eager and traced)."""
    x = np.array([[1.0, np.nan, 3.0, 2.0, 3.0], [np.inf, 0.0, -np.inf, np.nan, np.nan]])
    want_v, want_i = (np.asarray(v) for v in jax.lax.top_k(x, 3))
    for v, i in (tnp.top_k(x, 3), tidu.jit(lambda x: tnp.top_k(x, 3))(x)):
        np.testing.assert_array_equal(v, want_v)
        np.testing.assert_array_equal(i, want_i)
    y, w = np.array([1.0, 3.0, 3.0, 2.0]), np.array([1.0, 2.0])
    _same(tidu.grad(lambda x: tnp.sum(tnp.top_k(x, 2)[0] * w))(y),
          jax.grad(lambda x: jnp.sum(jax.lax.top_k(x, 2)[0] * w))(y))


@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_fmin_give_a_tie_and_its_derivative_to_y_as_jax(name):
    for a, b in [(1.0, 1.0), (2.0, 1.0), (1.0, 2.0), (np.nan, 1.0), (1.0, np.nan), (np.nan, np.nan)]:
        want = jax.grad(getattr(jnp, name), (0, 1))(a, b)
        got = tidu.grad(getattr(tnp, name), (0, 1))(a, b)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        np.testing.assert_array_equal(tidu.jit(getattr(tnp, name))(a, b), getattr(np, name)(a, b))
    z, w = np.array([1 + 2j, np.nan + 0j, 3 - 1j, 2j]), np.array([1 + 3j, 1j, complex(0, np.nan), 2j])
    np.testing.assert_array_equal(tidu.jit(getattr(tnp, name))(z, w), getattr(np, name)(z, w))  # lexicographic


_NAN_X = np.array([[np.nan, 1.0, 3.0], [np.nan, np.nan, np.nan], [2.0, -1.0, np.nan]])
_NAN_W = np.array([[True, False, True], [True, True, False], [False, True, True]])


@pytest.mark.parametrize("name, kw", [
    ("nansum", dict(axis=1, initial=2.0, where=_NAN_W)), ("nansum", dict(axis=0, keepdims=True)),
    ("nanprod", dict(axis=1, where=_NAN_W)), ("nanmean", dict(axis=1, where=_NAN_W)),
    ("nanmax", dict(axis=1, initial=-5.0, where=_NAN_W)), ("nanmax", dict(axis=1, initial=0.5)),
    ("nanmax", dict(axis=1)), ("nanmin", dict(axis=1, initial=5.0, where=_NAN_W)),
    ("nanvar", dict(axis=1, where=_NAN_W)), ("nanstd", dict(axis=0, ddof=1, where=_NAN_W)),
    ("nanvar", dict(axis=1, correction=1)), ("nansum", dict(axis=1, dtype=np.float32)),
    ("nanmean", dict(axis=1, dtype=np.float32))])
def test_nan_reductions_take_numpy_keywords(name, kw):
    """The nan-ignoring reductions with where=, initial=, dtype=, correction=: values and
    dtypes as NumPy's (eager and traced), derivatives as JAX's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's all-nan slice warnings
        want = getattr(np, name)(_NAN_X, **kw)
    for got in (getattr(tnp, name)(_NAN_X, **kw), tidu.jit(lambda x: getattr(tnp, name)(x, **kw))(_NAN_X)):
        assert np.asarray(got).dtype == np.asarray(want).dtype
        np.testing.assert_allclose(got, want, equal_nan=True)
    jkw = {k: v for k, v in kw.items() if k != "correction"} | ({"ddof": 1} if "correction" in kw else {})
    x = np.where(np.isnan(_NAN_X), 0.7, _NAN_X)
    _same(tidu.grad(lambda x: tnp.sum(getattr(tnp, name)(x, **kw)))(x),
          jax.grad(lambda x: jnp.sum(getattr(jnp, name)(x, **jkw)))(x))


def test_nansum_reads_numpy_positional_order():
    x = np.arange(4, dtype=np.int8).reshape(2, 2)
    for got in (tnp.nansum(x, 1, np.float32), tidu.jit(lambda v: tnp.nansum(v, 1, np.float32))(x)):
        assert got.dtype == np.float32 and np.array_equal(got, [1.0, 5.0])


_PAD_X = (RNG.normal(size=(3, 4)), np.arange(12, dtype=np.int32).reshape(3, 4) * 3 - 7,
          np.array([[1, 2], [3, 4]], np.uint8))
_PAD_MODES = [("edge", {}), ("wrap", {}), ("reflect", {}), ("symmetric", {}), ("reflect", {"reflect_type": "odd"}),
              ("symmetric", {"reflect_type": "odd"}), ("linear_ramp", {}),
              ("linear_ramp", {"end_values": ((1, -2), (3, 4))}),
              ("constant", {"constant_values": ((1, 2), (3, 4))})] + [
    (m, kw) for m in ("maximum", "minimum", "mean", "median")
    for kw in ({}, {"stat_length": 1}, {"stat_length": ((2, 1), (3, 100))})]


@pytest.mark.parametrize("mode, kw", _PAD_MODES, ids=lambda v: str(v))
def test_pad_modes_and_keywords_as_numpy(mode, kw):
    """Every NumPy pad mode with its keyword (reflect_type, stat_length, end_values), pad
    widths beyond the axis included, traced, against np.pad (values and dtype)."""
    for x in _PAD_X:
        for width in (1, (2, 3), ((1, 7), (9, 2))):
            got = tidu.jit(lambda v, width=width: tnp.pad(v, width, mode=mode, **kw))(x)
            if x.dtype == np.uint8 and "end_values" in kw:  # a ramp to -2 in uint8: NumPy's float-to-uint8
                # cast of -2.0 is the platform's (254 on x86); XLA's, JAX's and tidu's saturates (0)
                if width == 1:
                    np.testing.assert_array_equal(got, jnp.pad(x, width, mode=mode, **kw))
                continue
            want = np.pad(x, width, mode=mode, **kw)
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got, want, err_msg=f"{x.dtype} {width}")


@pytest.mark.parametrize("mode, kw", [("mean", {"stat_length": 2}), ("reflect", {"reflect_type": "odd"}),
                                      ("linear_ramp", {"end_values": 2.0}), ("median", {}), ("wrap", {})])
def test_pad_modes_derivative_as_jax(mode, kw):
    x = _PAD_X[0]
    _same(tidu.grad(lambda v: tnp.sum(tnp.sin(tnp.pad(v, ((1, 7), (3, 2)), mode=mode, **kw))))(x),
          jax.grad(lambda v: jnp.sum(jnp.sin(jnp.pad(v, ((1, 7), (3, 2)), mode=mode, **kw))))(x))


def test_pad_bad_keywords_and_empty_axes_are_one_line_errors():
    with pytest.raises(ValueError, match="mode 'edge' takes no keyword constant_values"):
        tidu.jit(lambda v: tnp.pad(v, 1, mode="edge", constant_values=1))(np.ones(3))
    with pytest.raises(ValueError, match="reflect_type must be 'even' or 'odd'"):
        tidu.jit(lambda v: tnp.pad(v, 1, mode="reflect", reflect_type="up"))(np.ones(3))
    with pytest.raises(ValueError, match="axis 0 is empty"):
        tidu.jit(lambda v: tnp.pad(v, 1, mode="edge"))(np.ones((0, 3)))
    with pytest.raises(ValueError, match="mode 'spiral' is not known"):
        tidu.jit(lambda v: tnp.pad(v, 1, mode="spiral"))(np.ones(3))


# --- eager (NumPy) against traced: a differential sweep's findings ---------------------------------


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolve_spreads_no_nan_to_entries_without_it(mode):
    """Each output entry sums the products of its own pairs only: the padding is added after
    the product, so 0 * inf never enters an entry (NumPy's and JAX's values)."""
    x, y = np.array([0.5, np.nan, -np.inf, 2.0]), np.array([1.0, np.inf, 3.0])
    for f in (tnp.convolve, tnp.correlate):
        want = getattr(np, f.__name__)(x, y, mode)
        np.testing.assert_array_equal(tidu.jit(lambda a, b, f=f: f(a, b, mode))(x, y), want)


def test_arcsinh_float16_at_infinity_and_large_values():
    h = np.array([0.0, -np.inf, np.inf, 1.5, 100, 127, 129, 255, 300, 6e4, -6e4, np.nan], np.float16)
    want = np.arcsinh(h.astype(np.float64)).astype(np.float16)
    np.testing.assert_array_equal(tidu.jit(tnp.arcsinh)(h), want)


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "fabs", "signbit", "copysign"])
def test_real_functions_refuse_complex_values_as_numpy(name):
    c = np.array([1.5 + 2j])
    args = (c, c) if name == "copysign" else (c,)
    with pytest.raises(TypeError, match=f"tnp.{name} is not defined for complex values"):
        tidu.jit(getattr(tnp, name))(*args)


def test_complex_comparisons_and_extremes_are_lexicographic_as_numpy():
    a = np.array([1 + 2j, 1 + 2j, 1 + 3j, 2 + 0j, np.nan + 1j, -0.0 + 0j, 1 + 2j])
    b = np.array([1 + 2j, 1 + 3j, 1 + 2j, 1 + 5j, 1 + 0j, 0.0 + 0j, np.nan + 0j])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for name in ("less", "less_equal", "greater", "greater_equal", "maximum", "minimum"):
            np.testing.assert_array_equal(tidu.jit(getattr(tnp, name))(a, b), getattr(np, name)(a, b), err_msg=name)
    x, y = np.array([1 + 2j, 2 + 0j, 1 + 3j]), np.array([1 + 3j, 1 + 5j, 1 + 2j])
    g = tidu.grad(lambda v: tnp.sum(tnp.real(tnp.maximum(v, y)) * np.array([1.0, 2.0, 3.0])))(x)
    np.testing.assert_array_equal(g, [0, 2, 3])  # the larger operand takes the derivative


@pytest.mark.parametrize("name", ["dot", "inner", "matmul", "vdot", "outer", "kron", "tensordot", "vecdot", "matvec"])
def test_boolean_contractions_are_boolean_as_numpy(name):
    if name in ("matmul", "tensordot", "matvec"):
        x, y = np.array([[True, False], [True, True]]), np.array([[False, False], [False, True]])
        y = y[0] | y[1] if name == "matvec" else y
    else:
        x, y = np.array([True, False, True]), np.array([False, False, True])
    want = getattr(np, name)(x, y)
    got = tidu.jit(getattr(tnp, name))(x, y)
    assert got.dtype == want.dtype == np.bool_
    np.testing.assert_array_equal(got, want)


def test_boolean_einsum_and_cross():
    x, y = np.array([[True, False], [True, True]]), np.array([[False, False], [False, True]])
    got = tidu.jit(lambda a, b: tnp.einsum("ij,jk->ik", a, b))(x, y)
    assert got.dtype == np.bool_ and np.array_equal(got, np.einsum("ij,jk->ik", x, y))
    with pytest.raises(TypeError, match="tnp.cross is not defined for boolean arrays"):
        tidu.jit(tnp.cross)(np.ones(3, bool), np.ones(3, bool))


@pytest.mark.parametrize("kw", [{}, {"n": 2}, {"axis": 0}, {"prepend": True}])
def test_diff_of_booleans_is_whether_neighbours_differ(kw):
    b = np.array([[True, False, True, True], [False, False, True, False]])
    got = tidu.jit(lambda x: tnp.diff(x, **kw))(b)
    assert got.dtype == np.bool_ and np.array_equal(got, np.diff(b, **kw))


def test_i0_derivatives_at_and_near_zero_to_fourth_order():
    """tnp.i0 is a primitive whose derivative I1 is a series below |x| = 1/2: as the product
    exp(|x|) i0e(x) its derivative at 0 was 1 (I0'(0) = 0), the two kinks' conventions summed."""
    mpmath = pytest.importorskip("mpmath")
    x = np.array([-3.5, -0.6, -0.5, -0.2, 0.0, 1e-8, 0.3, 0.5, 1.0, 5.5])
    d = tnp.i0
    for k in (1, 2, 3, 4):
        d = tidu.grad(d)
        want = np.array([float(mpmath.diff(lambda z: mpmath.besseli(0, z), t, k)) for t in x])
        np.testing.assert_allclose(tidu.vmap(d)(x), want, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(jax.vmap(jax.grad(jnp.i0))(x), tidu.vmap(tidu.grad(tnp.i0))(x), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin", "ptp", "nanmax", "nanmin", "nanargmax",
                                  "nanargmin"])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_complex_reductions_order_lexicographically_as_numpy(name, axis):
    rng = np.random.default_rng(3)
    z = rng.choice([-1.0, 0.0, 1.0], size=(4, 5)) + 1j * rng.choice([-1.0, 0.0, 1.0], size=(4, 5))
    if name.startswith("nan"):
        z[1, 2], z[3, 0] = complex(np.nan, 0.0), complex(2.0, np.nan)
    elif axis == 1:
        z[2, 3] = complex(0.0, np.nan)  # the first nan wins, in either part
    want = getattr(np, name)(z, axis=axis)
    got = tidu.jit(lambda z: getattr(tnp, name)(z, axis=axis))(z)
    np.testing.assert_array_equal(got, want)


def test_complex_max_derivative_reaches_the_element_it_picks():
    z = np.array([1 + 2j, 3 - 1j, 3 + 0.5j, -4 + 9j])
    f_t = lambda z: tnp.real(tnp.max(z) * (2 - 1j)) + tnp.imag(tnp.min(z))  # noqa: E731
    f_j = lambda z: jnp.real(jnp.max(z) * (2 - 1j)) + jnp.imag(jnp.min(z))  # noqa: E731
    # tidu's gradient of a real function of complex values is the conjugate of JAX's
    np.testing.assert_allclose(tidu.grad(f_t)(z), np.conj(jax.grad(f_j)(z)))


def test_complex_sort_argsort_and_median_order_nan_parts_as_numpy():
    """NumPy sorts complex values R + Rj, R + nanj, nan + Rj, nan + nanj (the traced sort
    ignored nan parts: [3+1j, 1-2j, 1+5j, nan] gave [nan-2j, 1+5j, 3+1j, -0-0j]); median
    of complex values (it was refused traced) is the middle of that order, a nan where the
    slice holds one."""
    rng = np.random.default_rng(7)
    vals = [1.0, -1.0, 0.0, np.nan, 2.0, 0.5]

    def parts(a):
        a = np.atleast_1d(np.asarray(a, complex))
        return np.stack([a.real, a.imag])

    for _ in range(40):
        z = rng.choice(vals, (2, 5)) + 1j * rng.choice(vals, (2, 5))
        np.testing.assert_array_equal(parts(tidu.jit(tnp.sort)(z)), parts(np.sort(z)))
        np.testing.assert_array_equal(tidu.jit(tnp.argsort)(z), np.argsort(z, kind="stable"))
        for axis in (None, 1):
            np.testing.assert_array_equal(parts(tidu.jit(lambda v, axis=axis: tnp.median(v, axis=axis))(z)),
                                          parts(np.median(z, axis=axis)))


def test_searchsorted_and_lexsort_as_numpy_with_nans_complex_and_sorters():
    rng = np.random.default_rng(11)
    vals = [1.0, -1.0, 0.0, np.nan, 2.0, 0.5]
    for _ in range(30):
        a = np.sort(rng.choice(vals, 6))
        v = rng.choice(vals + [3.0, -2.0], (2, 3))
        z = np.sort(rng.choice(vals, 5) + 1j * rng.choice(vals, 5))
        w = rng.choice(vals, 4) + 1j * rng.choice(vals, 4)
        for side in ("left", "right"):
            got = tidu.jit(lambda a, v, side=side: tnp.searchsorted(a, v, side=side))(a, v)
            assert got.dtype == np.int64
            np.testing.assert_array_equal(got, np.searchsorted(a, v, side=side))
            np.testing.assert_array_equal(tidu.jit(lambda a, v, side=side: tnp.searchsorted(a, v, side=side))(z, w),
                                          np.searchsorted(z, w, side=side))
        keys = (rng.choice(vals, 7), rng.integers(0, 3, 7), rng.choice(vals, 7))
        np.testing.assert_array_equal(tidu.jit(lambda *k: tnp.lexsort(k))(*keys), np.lexsort(keys))
    unsorted = np.array([3.0, 1.0, 2.0])
    np.testing.assert_array_equal(
        tidu.jit(lambda a, v: tnp.searchsorted(a, v, sorter=np.array([1, 2, 0])))(unsorted, np.array([2.5, 0.0])),
        np.searchsorted(unsorted, [2.5, 0.0], sorter=[1, 2, 0]))
    m, n = rng.choice(vals, (3, 5)), rng.choice(vals, (3, 5))
    np.testing.assert_array_equal(tidu.jit(lambda m, n: tnp.lexsort((m, n), axis=0))(m, n), np.lexsort((m, n), axis=0))
    with pytest.raises(ValueError, match="side must be 'left' or 'right'"):
        tidu.jit(lambda a: tnp.searchsorted(a, 1.0, side="middle"))(unsorted)


def test_complex_logaddexp_and_logsumexp_as_jax_eager_and_traced():
    """Traced logaddexp of complex values was wrong (its real form takes |x - y|, the
    modulus: exp(result) was not exp(x) + exp(y)); eager refused them (NumPy has none);
    logsumexp refused them traced. Now the principal value, as JAX's, both ways."""
    rng = np.random.default_rng(5)
    z = 3 * rng.normal(size=(3, 4)) + 3j * rng.normal(size=(3, 4))
    w = 3 * rng.normal(size=(3, 4)) + 3j * rng.normal(size=(3, 4))
    for name in ("logaddexp", "logaddexp2"):
        want = np.asarray(getattr(jnp, name)(z, w))
        np.testing.assert_allclose(tidu.jit(getattr(tnp, name))(z, w), want, rtol=1e-12)
        np.testing.assert_allclose(getattr(tnp, name)(z, w), want, rtol=1e-12)
    np.testing.assert_allclose(np.exp(tidu.jit(tnp.logaddexp)(z, w)), np.exp(z) + np.exp(w), rtol=1e-12)
    for axis in (None, 0, 1):
        want = np.asarray(jax.scipy.special.logsumexp(z, axis=axis))
        np.testing.assert_allclose(tidu.jit(lambda v, axis=axis: tnp.logsumexp(v, axis=axis))(z), want, rtol=1e-12)
    g = tidu.grad(lambda a: tnp.real(tnp.sum(tnp.logaddexp(a, w))))(z)
    np.testing.assert_allclose(g, np.conj(jax.grad(lambda a: jnp.real(jnp.sum(jnp.logaddexp(a, w))))(z)), rtol=1e-12)
