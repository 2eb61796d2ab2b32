"""Eager, traced (tidu.jit) and NumPy agree on dtypes and values where they used to part
(docs/numpy.md, "Dtypes and promotion" and "Eager, traced and NumPy agree"):

- ``insert`` casts the values to the array's dtype, as NumPy;
- Python numbers stay weakly typed in ``hypot``, ``copysign`` and ``heaviside``, and
  ``copysign`` promotes both operands, as NumPy and JAX;
- a bfloat16 array with a Python float, and one-argument functions of a bfloat16 array
  (``sinc``, ``i0``, ``unwrap``, ``gradient``, ``nan_to_num``, ``ldexp``), give bfloat16
  eagerly as under ``tidu.jit`` (NumPy with ml_dtypes widens to float32 or float64);
- ``polyval`` has NumPy's dtype (a Python number ``x`` is int64 or float64);
- ``round`` of integers to negative decimals wraps around, of bools is a float;
- ``fmax`` and ``fmin`` at a tie of 0.0 and -0.0 give the second operand, eagerly too.
"""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

import tidu
import tidu.numpy as tnp

BF16 = np.dtype("bfloat16")
FLOATS = ["float16", "bfloat16", "float32", "float64"]


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind in "fV" else a


def assert_same(got, want, what: str) -> None:
    """Same dtype, shape and bits (nan for nan: its payload aside)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, want {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    if got.dtype.kind in "fV" and got.dtype != bool:
        nan = np.isnan(want.astype(np.float64))
        np.testing.assert_array_equal(np.isnan(got.astype(np.float64)), nan, err_msg=what)
        np.testing.assert_array_equal(np.where(nan, 0, _bits(got)), np.where(nan, 0, _bits(want)), err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def assert_close_ulps(got, want, dtype: str, ulps: float, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype == np.dtype(dtype), f"{what}: dtypes {got.dtype}, {want.dtype}, want {dtype}"
    info = ml_dtypes.finfo(dtype)
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_allclose(g, w, rtol=ulps * float(info.eps), atol=float(info.smallest_subnormal),
                               equal_nan=True, err_msg=what)


def _values(dtype: str, n: int = 40, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    special = [0.0, -0.0, 0.5, -0.5, 1.0, -2.0, 0.7, 3.0]
    return np.concatenate([special, rng.normal(size=n) * 3]).astype(dtype)


# --- insert ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int32", "int64", *FLOATS])
@pytest.mark.parametrize("values", [2.5, -1.75, 3, np.array([0.7, -2.25]), np.array([1, 5], np.int64)])
def test_insert_casts_values_to_the_arrays_dtype(dtype, values):
    a = np.array([1, 0, 3, 4]).astype(dtype)
    if dtype.startswith("uint") and np.any(np.asarray(values) < 0):
        pytest.skip("a negative value into unsigned integers is NumPy's error, or the platform's cast")
    obj = 1 if np.ndim(values) == 0 else [1, 3]
    want = np.insert(a, obj, values)
    assert want.dtype == a.dtype
    assert_same(tnp.insert(a, obj, values), want, "eager")
    assert_same(tidu.jit(lambda a: tnp.insert(a, obj, values))(a), want, "traced array")
    if np.ndim(values):
        assert_same(tidu.jit(lambda v: tnp.insert(a, obj, v))(values), want, "traced values")


def test_insert_derivatives_follow_the_cast():
    a = np.array([1.0, 2.0, 3.0], np.float32)
    g = tidu.grad(lambda v: tnp.sum(tnp.insert(a, 1, v) ** 2))(np.float64(1.5))
    assert g.dtype == np.float64 and g == 3.0
    ga = tidu.grad(lambda a: tnp.sum(tnp.insert(a, 1, 2.5) ** 2))(a)
    assert_same(ga, np.array([2.0, 4.0, 6.0], np.float32), "grad in arr")
    # into integers the values carry no tangent
    gi = tidu.grad(lambda v: tnp.sum(tnp.insert(np.array([1, 2], np.int32), 1, v).astype(np.float64) * v))(2.5)
    assert gi == 5.0  # d/dv (1 + 2 + 2) v: the inserted 2 is a constant


def test_insert_complex_values_into_reals_keep_the_real_part_with_a_warning():
    a = np.array([1.0, 2.0])
    want = np.array([1.0, 1.5, 2.0])
    with pytest.warns(np.exceptions.ComplexWarning):
        assert_same(tnp.insert(a, 1, np.array([1.5 + 2j])), want, "eager")
    with pytest.warns(np.exceptions.ComplexWarning):
        assert_same(tidu.jit(lambda v: tnp.insert(a, 1, v))(np.array([1.5 + 2j])), want, "traced")


# --- Python numbers stay weakly typed; operands promote together -------------------------

# function, NumPy's (ml_dtypes' for bfloat16) and tidu's values agree bit for bit
EXACT = {"copysign": True, "heaviside": True, "fmax": True, "fmin": True, "nextafter": True,
         "fmod": True, "floor_divide": True, "arctan2": False, "hypot": False, "remainder": True, "mod": True}


def _numpy_with_weak(name: str, x, y):
    """NumPy's f(x, y) with a Python number in the array's dtype (NumPy 2's weak scalars;
    ml_dtypes' bfloat16 would widen it to float32)."""
    fn = getattr(np, name)
    if isinstance(x, float):
        x = np.asarray(x, y.dtype)
    if isinstance(y, float):
        y = np.asarray(y, x.dtype)
    with np.errstate(all="ignore"):
        out = fn(x, y)
    return _tie_to_y(name, x, y, out)


def _tie_to_y(name, x, y, out):
    if name in ("fmax", "fmin"):  # the tie of 0.0 and -0.0: the second operand (test_fmax_fmin_...)
        out = np.where(np.equal(x, y), np.asarray(y, np.asarray(out).dtype), out)
    return out


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(EXACT))
@pytest.mark.parametrize("scalar_first", [False, True])
def test_python_float_takes_the_arrays_dtype(name, dtype, scalar_first):
    x = _values(dtype)
    s = 0.7
    call = (lambda a: getattr(tnp, name)(s, a)) if scalar_first else (lambda a: getattr(tnp, name)(a, s))
    want = _numpy_with_weak(name, s, x) if scalar_first else _numpy_with_weak(name, x, s)
    with np.errstate(all="ignore"):
        eager = call(x)
    traced = tidu.jit(call)(x)
    assert np.asarray(eager).dtype == np.dtype(dtype), f"eager {np.asarray(eager).dtype}"
    assert np.asarray(traced).dtype == np.dtype(dtype), f"traced {np.asarray(traced).dtype}"
    assert_same(eager, want, f"eager tnp.{name}")
    if name in ("remainder", "mod"):  # (the sign of a zero remainder is not matched: docs/numpy.md)
        np.testing.assert_array_equal(np.asarray(traced, np.float64), np.asarray(want, np.float64))
    elif EXACT[name]:
        assert_same(traced, want, f"traced tnp.{name}")
    else:
        assert_close_ulps(traced, want, dtype, 2, f"traced tnp.{name}")


@pytest.mark.parametrize("name", ["copysign", "hypot", "heaviside", "arctan2", "fmax", "fmin", "nextafter",
                                  "fmod", "remainder", "floor_divide"])
@pytest.mark.parametrize("dtypes", [("float32", "float64"), ("float64", "float32"), ("float16", "float32"),
                                    ("int32", "float32"), ("float32", "int8")])
def test_two_arrays_promote_together(name, dtypes):
    x = np.array([0.5, -1.5, 0.0, 2.0, -0.0, 3.0]).astype(dtypes[0])
    y = np.array([-1.0, 2.0, -0.0, 0.0, 0.7, -2.5]).astype(dtypes[1])
    with np.errstate(all="ignore"):
        want = _tie_to_y(name, x, y, getattr(np, name)(x, y))
        eager = getattr(tnp, name)(x, y)
    traced = tidu.jit(getattr(tnp, name))(x, y)
    # NumPy widens int32 with float32 to float64, JAX (and traced tidu) does not
    wide = "int32" in dtypes
    if not wide:
        assert np.asarray(traced).dtype == want.dtype, f"traced {np.asarray(traced).dtype}, NumPy {want.dtype}"
    assert_same(eager, want, f"eager tnp.{name}")
    t = np.asarray(traced)
    assert t.dtype == np.dtype(tnp.result_type(x, y)), "traced: JAX's promotion"
    with np.errstate(all="ignore"):  # NumPy's values in the traced dtype
        xt, yt = x.astype(t.dtype), y.astype(t.dtype)
        want_t = _tie_to_y(name, xt, yt, getattr(np, name)(xt, yt))
    if name in ("hypot", "arctan2"):
        assert_close_ulps(t, want_t, t.dtype.name, 2, f"traced tnp.{name}")
    elif name == "remainder":  # (the sign of a zero remainder is not matched: docs/numpy.md)
        np.testing.assert_array_equal(t, want_t)
    else:
        assert_same(t, want_t, f"traced tnp.{name}")


def test_copysign_takes_the_sign_operands_dtype_into_account():
    x = np.array([0.5, -1.5, 0.0], np.float32)
    y = np.array([-1.0, 2.0, -0.0])
    want = np.copysign(x, y)
    assert want.dtype == np.float64
    assert_same(tnp.copysign(x, y), want, "eager")
    assert_same(tidu.jit(tnp.copysign)(x, y), want, "traced")


def test_weak_scalar_functions_keep_their_derivatives():
    x = np.array([0.5, -1.5, 2.0], np.float32)
    g = tidu.grad(lambda v: tnp.sum(tnp.hypot(v, 1.5)))(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, x / np.hypot(x, 1.5), rtol=1e-6)
    g = tidu.grad(lambda v: tnp.sum(tnp.copysign(v, -1.0)))(x)
    assert_same(g, -np.sign(x), "d copysign(v, -1)")
    g = tidu.grad(lambda h: tnp.sum(tnp.heaviside(np.array([0.0, 1.0, 0.0]), h)))(np.float32(0.5))
    assert g == 2.0
    # hypot of half-precision values is computed in float32: its derivative still flows
    g = tidu.grad(lambda v: tnp.sum(tnp.hypot(v, 0.75)))(np.array([1.0, -1.0], np.float16))
    assert g.dtype == np.float16
    np.testing.assert_allclose(g.astype(np.float64), [0.8, -0.8], rtol=2e-3)


# --- bfloat16: eager as traced -----------------------------------------------------------


@pytest.mark.parametrize("name", ["sinc", "i0", "unwrap", "gradient", "nan_to_num"])
def test_one_argument_functions_keep_bfloat16(name):
    x = _values("bfloat16")
    if name == "nan_to_num":
        x = np.concatenate([x, np.array([np.nan, np.inf, -np.inf], BF16)])
    fn = getattr(tnp, name)
    eager = fn(x)
    assert_same(eager, tidu.jit(fn)(x), f"tnp.{name}: eager vs traced")
    assert eager.dtype == BF16
    # NumPy's values in float32 (or float64), rounded: to an ulp or two of bfloat16
    with np.errstate(all="ignore"):
        ref = getattr(np, name)(x.astype(np.float32))
    if name == "nan_to_num":
        ref = np.nan_to_num(x.astype(np.float32), posinf=float(ml_dtypes.finfo(BF16).max),
                            neginf=-float(ml_dtypes.finfo(BF16).max))
    if name == "sinc":
        ref = np.where(np.isinf(x.astype(np.float32)), 0, ref)
    # (unwrap adds multiples of 2 pi rounded to bfloat16, 6.28125, as JAX's: a few ulps more)
    atol = 2.0**-4 if name == "unwrap" else 2.0**-8
    np.testing.assert_allclose(eager.astype(np.float64), ref.astype(np.float64), rtol=2 * 2.0**-8, atol=atol)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("name", ["sinc", "i0", "unwrap", "gradient"])
def test_one_argument_functions_keep_other_float_dtypes(name, dtype):
    x = _values(dtype)
    fn = getattr(tnp, name)
    want = getattr(np, name)(x)
    eager = fn(x)
    assert eager.dtype == want.dtype == np.dtype(dtype)
    assert tidu.jit(fn)(x).dtype == np.dtype(dtype)


def test_ldexp_of_bfloat16_keeps_bfloat16():
    x = np.array([1.5, 1.5, -3.0, 0.0, 1.0, -np.inf, 1.0078125, 3.0], BF16)
    for itype in (np.int32, np.int64):  # (with int64 exponents NumPy's ldexp of bfloat16 is float32)
        i = np.array([1, -140, 3, 5, -133, 2, -134, 2**40], itype) if itype == np.int64 else \
            np.array([1, -140, 3, 5, -133, 2, -134, 300], itype)
        with np.errstate(over="ignore"):
            want = np.ldexp(x.astype(np.float64), np.clip(i, -400, 400)).astype(BF16)  # exact, rounded once
            assert_same(tnp.ldexp(x, i), want, f"eager, {itype.__name__}")
        assert_same(tidu.jit(tnp.ldexp)(x, i), want, f"traced, {itype.__name__}")
    assert tnp.ldexp(x, 2).dtype == BF16


def test_bfloat16_with_a_wider_array_follows_numpy():
    """The bfloat16 rule is for bfloat16 operands and Python numbers only: with a float32
    array NumPy's promotion (float32) is JAX's too."""
    x = _values("bfloat16")
    y = _values("float32", seed=1)
    for name in ["fmax", "copysign", "hypot", "arctan2"]:
        assert getattr(tnp, name)(x, y).dtype == np.float32
        assert tidu.jit(getattr(tnp, name))(x, y).dtype == np.float32
    assert tnp.gradient(x, 0.5).dtype == BF16
    assert tnp.astype(x, "float32").dtype == np.float32  # a requested dtype is kept


def test_gradient_with_float64_coordinates_keeps_the_values_dtype():
    f = np.array([0.5, -1.5, 0.0, 2.0], np.float32)
    c = np.array([0.0, 1.0, 3.0, 3.5])
    want = np.gradient(f, c)
    assert want.dtype == np.float32
    assert tnp.gradient(f, c).dtype == np.float32
    traced = tidu.jit(tnp.gradient)(f, c)
    assert traced.dtype == np.float32
    np.testing.assert_allclose(traced, want, rtol=1e-6)


# --- polyval ----------------------------------------------------------------------------


POLY_CASES = [
    (np.array([1, 2, 3], np.int32), 2),
    (np.array([1, -2, 3], np.int32), np.array([1, -2, 4], np.int32)),
    (np.array([1, 2, 3], np.int8), np.array([1, 200], np.uint8)),
    (np.array([1, 2, 3], np.float32), 2),
    (np.array([1, 2, 3], np.float32), 2.0),
    (np.array([1, 2, 3], np.float32), np.array([1.5, -2.0], np.float32)),
    (np.array([1, 2, 3], np.int32), np.array([1.5, -2.0], np.float32)),
    (np.array([1.5, -2.0, 0.25]), np.array([-np.inf, -1.0, 0.0, -0.0])),
    (np.array([0.5, 1], np.float16), np.array([1.5, -2.0], np.float16)),
    (np.array([True, False]), np.array([True, False])),
]


@pytest.mark.parametrize("p, x", POLY_CASES)
def test_polyval_has_numpys_dtype(p, x):
    with np.errstate(invalid="ignore"):
        want = np.asarray(np.polyval(p, x))
        assert_same(tnp.polyval(p, x), want, "eager")
        assert_same(tidu.jit(lambda p: tnp.polyval(p, x))(p), want, "traced p")
        if not isinstance(x, int | float):
            assert_same(tidu.jit(lambda x: tnp.polyval(p, x))(x), want, "traced x")
            assert_same(tidu.jit(tnp.polyval)(p, x), want, "traced p and x")


def _numpy_promotes_bfloat16() -> bool:
    try:
        np.result_type(np.asarray(2), BF16)
    except (TypeError, np.exceptions.DTypePromotionError):
        return False
    return True


def test_polyval_of_bfloat16_coefficients_and_derivatives():
    p = np.array([1.0, -2.0, 0.5], BF16)
    for x in (2, 1.5):
        eager = tnp.polyval(p, x)
        assert_same(eager, tidu.jit(lambda p, x=x: tnp.polyval(p, x))(p), f"x = {x!r}")
    # a Python int with bfloat16: NumPy's promotion (float64 from NumPy 2.5 with ml_dtypes 0.7,
    # before that none: JAX's, bfloat16), eager and traced alike
    want = np.result_type(np.asarray(2), BF16) if _numpy_promotes_bfloat16() else BF16
    assert tnp.polyval(p, 2).dtype == want
    assert tnp.polyval(p, 2.0).dtype == np.float64  # NumPy's: 2.0 is a float64 array there
    assert tnp.polyval(p, 2).dtype == want  # (the two calls do not share a trace)
    assert tidu.jit(lambda p: tnp.polyval(p, 2))(p).dtype == want
    c = np.array([1.0, 2.0, 3.0])
    assert tidu.grad(lambda x: tnp.polyval(c, x))(2.0) == 6.0
    np.testing.assert_array_equal(tidu.grad(lambda p: tnp.polyval(p, 2.0))(c), [4.0, 2.0, 1.0])
    assert tidu.jit(lambda a, b: tnp.polyval([a, b, 1.0], 2.0))(np.float32(1), np.float32(2)) == 9.0


# --- round ------------------------------------------------------------------------------


def _round_exact(a: np.ndarray, decimals: int) -> np.ndarray:
    """Integers to a multiple of 10**-decimals, ties to even, wrapped to their dtype, in
    Python's integers."""
    f = 10 ** -decimals
    out = []
    for v in a.tolist():
        q, r = divmod(v, f)
        if 2 * r > f or (2 * r == f and q % 2):
            q += 1
        out.append(q * f)
    bits = a.dtype.itemsize * 8
    wrapped = [(v % 2**bits) for v in out]
    return np.array(wrapped, dtype=f"uint{bits}").view(a.dtype)


@pytest.mark.parametrize("dtype", ["int8", "int16", "uint8", "uint16", "int32", "uint32", "int64", "uint64"])
@pytest.mark.parametrize("decimals", [-1, -2, 0, 2])
def test_round_integers_wraps_around(dtype, decimals):
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -(2**53)), min(info.max, 2**53)  # (64-bit integers: through float64, exact to 2**53)
    rng = np.random.default_rng(3)
    a = np.concatenate([[hi, lo, hi - 3, lo + 5, 0, 5, 15, 25, 35, 45, 55, 150, 250],
                        rng.integers(max(lo, -10**6), min(hi, 10**6), size=30)])
    a = np.array([v for v in a if info.min <= v <= info.max]).astype(dtype)
    want = a if decimals >= 0 else _round_exact(a, decimals)
    assert_same(tnp.round(a, decimals), want, "eager")
    assert_same(tidu.jit(lambda a: tnp.round(a, decimals))(a), want, "traced")
    if dtype in ("int8", "int16", "uint8", "uint16"):  # NumPy's float64 result cast back: it wraps
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            assert_same(np.round(a, decimals), want, "NumPy")


def test_round_of_64_bit_integers_past_2_53_is_numpys_float64_rounding():
    a = np.array([2**62 + 12345, -(2**60) - 7, 2**53 + 15], np.int64)
    want = np.round(a, -1)  # NumPy's x / 10 rounded, * 10, in float64
    assert_same(tnp.round(a, -1), want, "eager")
    assert_same(tidu.jit(lambda a: tnp.round(a, -1))(a), want, "traced")
    # past int64's range the conversion saturates (XLA's), eagerly too (NumPy's is the platform's)
    top = np.array([2**63 - 1, -(2**63)], np.int64)
    want = np.array([2**63 - 1, -(2**63)], np.int64)
    assert_same(tnp.round(top, -1), want, "eager")
    assert_same(tidu.jit(lambda a: tnp.round(a, -1))(top), want, "traced")


def test_round_of_an_integer_scalar_is_a_scalar():
    assert_same(tnp.round(np.int8(127), -1), np.int8(-126), "np.int8")
    assert isinstance(tnp.round(np.int8(127), -1), np.int8)
    assert isinstance(tnp.round(np.array(127, np.int8), -1), np.int8)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("decimals", [-2, -1, 0, 1, 3])
def test_round_floats_takes_numpys_steps(dtype, decimals):
    rng = np.random.default_rng(4)
    scale = 10.0 ** (-decimals + 1)
    a = np.concatenate([[25.0, 35.0, 15.0, 45.0, -25.0, 0.125, -0.0, 2.5e-3], rng.normal(size=60) * scale])
    a = a.astype(dtype)
    with np.errstate(all="ignore"):
        want = np.round(a, decimals)
        assert want.dtype == np.dtype(dtype)
        assert_same(tnp.round(a, decimals), want, "eager")
    assert_same(tidu.jit(lambda a: tnp.round(a, decimals))(a), want, "traced")


def test_round_of_bools_is_a_float():
    b = np.array([True, False])
    want = np.round(b).astype(np.float64)  # NumPy's float16, computed in float64 (as sin of bools)
    assert_same(tnp.round(b), want, "eager")
    assert_same(tidu.jit(tnp.round)(b), want, "traced")
    with pytest.raises(TypeError):
        tnp.round(b, 1)
    with pytest.raises(TypeError, match="decimals"):
        tidu.jit(lambda b: tnp.round(b, 1))(b)


# --- fmax and fmin at signed zeros -------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 3, 8, 17, 64, 1000])
@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_fmin_tie_of_signed_zeros_is_the_second_operand(name, dtype, n):
    """NumPy's own choice at a tie of 0.0 and -0.0 depends on the loop (float64 of length 1:
    the first operand, of length 64: the second, of length 17: both within the array), so
    tidu takes y's, as JAX's, eagerly and traced alike."""
    rng = np.random.default_rng(n)
    x = np.where(rng.random(n) < 0.5, -0.0, 0.0).astype(dtype)
    y = np.where(rng.random(n) < 0.5, -0.0, 0.0).astype(dtype)
    x[::5] = np.nan
    x[1::7], y[1::7] = 1.5, -1.5
    fn = getattr(tnp, name)
    for a, b in ((x, y), (y, x)):
        want = np.where(np.isnan(b), a, np.where(np.isnan(a), b, getattr(np, name)(a, b)))
        want = np.where(a == b, b, want)  # the tie: y's bits
        assert_same(fn(a, b), want, f"eager tnp.{name}")
        assert_same(tidu.jit(fn)(a, b), want, f"traced tnp.{name}")
        np.testing.assert_array_equal(getattr(np, name)(a, b), want)  # NumPy's values (== ignores the sign)


def test_fmax_tie_derivative_goes_to_the_second_operand():
    x = np.array([0.0, -0.0, 1.0, 2.0])
    y = np.array([-0.0, 0.0, 1.0, 1.0])
    gx, gy = tidu.grad(lambda a, b: tnp.sum(tnp.fmax(a, b)), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(gx, [0.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(gy, [1.0, 1.0, 1.0, 0.0])
    assert_same(tnp.fmax(np.float64(-0.0), 0.0), np.float64(0.0), "scalars")
    assert_same(tnp.fmin(0.0, np.array(-0.0)), np.float64(-0.0), "0-d")
