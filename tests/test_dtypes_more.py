"""The 8/16-bit and unsigned integer dtypes, the bitwise primitives (rules/bitwise.rules)
and float16/bfloat16 (issue 31, items 6 and 5): promotion against jax.numpy.result_type
(x64), values against NumPy and jax.numpy, eager == traced, StableHLO run in XLA and the
C back end against the NumPy evaluation, gradients in the half-precision dtypes against
JAX."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp
from tidu.core.keys import Aval

sys.path.insert(0, os.path.dirname(__file__))
from tidu.lowering.stablehlo import to_stablehlo  # noqa: E402
from xla_util import assert_matches, op, program_of, run_both  # noqa: E402

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

SIGNED = ["int8", "int16", "int32", "int64"]
UNSIGNED = ["uint8", "uint16", "uint32", "uint64"]
INTS = SIGNED + UNSIGNED
OLD = ["bool", "int32", "int64", "float32", "float64", "complex64", "complex128"]
NEW_INTS = ["int8", "int16", "uint8", "uint16", "uint32", "uint64"]
HALF = ["float16", "bfloat16"]
SCALARS = [True, 3, 2.5, 1j]


def _ints(dtype: str, n: int, seed: int) -> np.ndarray:
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    vals = rng.integers(info.min, info.max, n, endpoint=True, dtype=dtype)
    vals[:4] = np.array([int(info.min), int(info.max), 0, 1], dtype=dtype)
    return vals


def _amounts(dtype: str, n: int) -> np.ndarray:
    """Shift amounts around the bit width (and a negative one for signed dtypes)."""
    bits = 8 * np.dtype(dtype).itemsize
    vals = (np.arange(n) * 5 + bits - 2 * n) % (bits + 3)
    out = vals.astype(dtype)
    if dtype in SIGNED:
        out[0] = -1
    return out


# --- promotion ----------------------------------------------------------------------------


def _jax_type(v):
    with jax.enable_x64(True):
        return np.dtype(jnp.result_type(*v)).name


@pytest.mark.parametrize("a", [*NEW_INTS, *HALF])
def test_promotion_of_new_dtypes_is_jaxs(a):
    """Every pair of a new dtype with every dtype and with Python scalars."""
    for b in [*OLD, *INTS, *HALF]:
        x, y = np.zeros(2, a), np.zeros(2, b)
        assert tnp.result_type(x, y) == _jax_type((np.dtype(a), np.dtype(b))), (a, b)
    for s in SCALARS:
        assert tnp.result_type(np.zeros(2, a), s) == _jax_type((np.dtype(a), s)), (a, s)
        assert tnp.result_type(s, np.zeros(2, a)) == _jax_type((s, np.dtype(a))), (s, a)


def test_result_type_takes_dtypes_as_jax():
    """Dtypes, NumPy scalar types and dtype names are strongly typed, Python's types weakly
    (tnp.result_type raised on all of them)."""
    import ml_dtypes

    cases = [(np.float64,), (np.float32,), (float,), (int,), (bool,), (complex,), (float, np.float32),
             (int, np.int8), (np.dtype("float32"), np.float16), ("float32",), ("bfloat16", "float16"),
             (ml_dtypes.bfloat16, np.float32), (np.float32, 1.0), (np.int32, 1.5), (np.zeros(2, np.float32), float),
             (np.uint8, np.int8), (complex, np.float32), (bool, np.int16)]
    for args in cases:
        assert tnp.result_type(*args) == _jax_type(args), args
    with pytest.raises(TypeError, match="not a NumPy dtype"):
        tnp.result_type("float33")


def test_dtype_introspection_is_jaxs():
    """finfo, iinfo, promote_types, can_cast, issubdtype, isdtype over every pair of tidu's
    dtypes (bfloat16 a floating dtype, as in JAX), and the value predicates, eager and on
    traced values (they read the aval: no op is traced)."""
    import ml_dtypes

    dtypes = [np.dtype(ml_dtypes.bfloat16) if d == "bfloat16" else np.dtype(d) for d in
              ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
               "bfloat16", "float32", "float64", "complex64", "complex128")]
    with jax.enable_x64(True):
        for a in dtypes:
            if a.kind in "fc" or a == dtypes[10]:
                for field in ("eps", "max", "min", "tiny", "bits", "resolution"):
                    assert getattr(tnp.finfo(a), field) == getattr(jnp.finfo(a), field), (a, field)
            if a.kind in "iu":
                assert (tnp.iinfo(a).min, tnp.iinfo(a).max) == (jnp.iinfo(a).min, jnp.iinfo(a).max)
            for b in dtypes:
                assert tnp.promote_types(a, b) == jnp.promote_types(a, b), (a, b)
                for casting in ("no", "equiv", "safe", "same_kind", "unsafe"):
                    assert tnp.can_cast(a, b, casting) == jnp.can_cast(a, b, casting=casting), (a, b, casting)
                assert tnp.issubdtype(a, b) == jnp.issubdtype(a, b), (a, b)
            for kind in (np.generic, np.number, np.inexact, np.floating, np.complexfloating, np.integer,
                         np.signedinteger, np.unsignedinteger, np.bool_):
                assert tnp.issubdtype(a, kind) == jnp.issubdtype(a, kind), (a, kind)
            for kind in ("bool", "signed integer", "unsigned integer", "integral", "real floating",
                         "complex floating", "numeric", ("bool", "complex floating"), a, "float32"):
                assert tnp.isdtype(a, kind) == jnp.isdtype(a, kind), (a, kind)
        for t in (float, int, bool, complex):
            assert tnp.promote_types(t, np.float32) == jnp.promote_types(t, np.float32), t
    values = [1.0, np.float32(2), np.zeros(()), np.zeros((2, 3)), np.zeros(2, np.complex64), [1, 2], "a", 3]
    for v in values:
        for name in ("isscalar", "iterable") if isinstance(v, str | list) else ("isscalar", "iterable", "size"):
            assert getattr(tnp, name)(v) == getattr(jnp, name)(v), (name, v)
        if not isinstance(v, str | list):
            assert (tnp.iscomplexobj(v), tnp.isrealobj(v)) == (jnp.iscomplexobj(v), jnp.isrealobj(v)), v
    assert tnp.size(np.zeros((2, 3)), 1) == 3

    def traced(x):
        assert tnp.isscalar(x[0, 0]) and not tnp.isscalar(x) and tnp.iterable(x) and not tnp.iterable(x[0, 0])
        assert tnp.size(x) == 6 and tnp.size(x, 0) == 2 and not tnp.iscomplexobj(x) and tnp.isrealobj(x)
        return tnp.finfo(x).eps * x + tnp.finfo(x.dtype).max * 0 + tnp.iinfo(np.int8).max

    np.testing.assert_array_equal(tidu.jit(traced)(np.ones((2, 3), np.float32)),
                                  np.ones((2, 3), np.float32) * np.finfo(np.float32).eps + 127)
    xp = tnp.array_api  # the array API namespace's are these (np.finfo raised on bfloat16 there)
    assert xp.finfo(dtypes[10]).eps == 2.0 ** -7 and xp.isdtype(dtypes[10], "real floating")
    assert xp.can_cast(dtypes[10], np.float32) and not xp.can_cast(np.float16, dtypes[10])
    for bad, message in [(lambda: tnp.finfo(np.int32), "not a floating or complex dtype"),
                         (lambda: tnp.iinfo(np.float32), "not an integer dtype"),
                         (lambda: tnp.isdtype(np.float32, "floats"), "unknown kind 'floats'")]:
        with pytest.raises(ValueError, match=message):
            bad()


def test_traced_arithmetic_promotes_as_jax():
    pairs = [("uint8", "int8"), ("uint32", "int32"), ("uint64", "int64"), ("uint16", "float32"),
             ("int16", "uint8"), ("uint8", "bool")]
    for a, b in pairs:
        out = tidu.jit(lambda x, y: x + y)(np.ones(2, a), np.ones(2, b))
        assert np.asarray(out).dtype.name == _jax_type((np.dtype(a), np.dtype(b))), (a, b)
    # weak Python scalars keep the array's dtype
    for a in NEW_INTS:
        assert np.asarray(tidu.jit(lambda x: x * 3 + 1)(np.ones(2, a))).dtype.name == a


# --- bitwise operations: values ----------------------------------------------------------

BINARY = ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"]


@pytest.mark.parametrize("dtype", INTS)
def test_bitwise_values_eager_traced_numpy_and_jax(dtype):
    x = _ints(dtype, 12, 1)
    y = _ints(dtype, 12, 2)
    s = _amounts(dtype, 12)

    def f(m, x, y, s):
        return [m.bitwise_and(x, y), m.bitwise_or(x, y), m.bitwise_xor(x, y), m.invert(x),
                m.left_shift(x, s), m.right_shift(x, s)]

    want = f(np, x, y, s)
    eager = f(tnp, x, y, s)
    traced = tidu.jit(lambda x, y, s: f(tnp, x, y, s))(x, y, s)
    with jax.enable_x64(True):
        ref = [np.asarray(v) for v in f(jnp, x, y, s)]
    for w, e, t, r in zip(want, eager, traced, ref, strict=True):
        t = np.asarray(t)
        assert e.dtype == t.dtype == r.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(e, w)
        np.testing.assert_array_equal(t, w)
        np.testing.assert_array_equal(t, r)


def test_tracer_operators_on_integers_and_bools():
    x = np.array([5, 12, 255, 0], np.uint8)
    y = np.array([3, 10, 1, 7], np.uint8)
    b = np.array([True, False, True, False])

    def f(x, y, b):
        return x & y, x | y, x ^ y, ~x, x << 2, x >> 1, 7 & x, ~b, b & (x > 4), b | b, b ^ True

    want = (x & y, x | y, x ^ y, ~x, x << 2, x >> 1, 7 & x, ~b, b & (x > 4), b | b, b ^ True)
    for got, w in zip(tidu.jit(f)(x, y, b), want, strict=True):
        assert np.asarray(got).dtype == w.dtype
        np.testing.assert_array_equal(got, w)


@pytest.mark.parametrize("dtype", ["int8", "uint16", "uint32", "uint64"])
def test_arithmetic_wraps_as_numpy(dtype):
    x, y = _ints(dtype, 10, 3), _ints(dtype, 10, 4)
    # a sum accumulates in int64 / uint64 unless given its dtype, as NumPy and JAX
    f = lambda x, y: [x + y, x - y, x * y, tnp.maximum(x, y), x < y, tnp.sum(x), tnp.sum(x, dtype=dtype), -x]  # noqa: E731
    with np.errstate(over="ignore"):
        want = [x + y, x - y, x * y, np.maximum(x, y), x < y, np.sum(x), np.sum(x, dtype=dtype), -x]
    for got, w in zip(tidu.jit(f)(x, y), want, strict=True):
        assert np.asarray(got).dtype == w.dtype
        np.testing.assert_array_equal(got, w)


def test_bitwise_errors_name_the_argument():
    x = np.arange(3, dtype=np.int32)
    with pytest.raises(TypeError, match="bitwise_and: y has dtype float64"):
        tnp.bitwise_and(x, np.ones(3))
    with pytest.raises(TypeError, match="bitwise_and: y has dtype float64"):
        tidu.jit(lambda x: tnp.bitwise_and(x, np.ones(3)))(x)
    with pytest.raises(TypeError, match="invert: x has dtype float64"):
        tidu.jit(lambda v: ~v)(np.ones(3))
    with pytest.raises(TypeError, match="left_shift: x has dtype float32"):
        tnp.left_shift(np.ones(3, np.float32), 1)
    with pytest.raises(TypeError, match="does not handle dtype float128"):
        tnp.astype(np.ones(2), np.longdouble)


def test_integers_have_no_tangent():
    def f(w, k):
        bits = (k << 3) ^ k
        return tnp.sum(w * bits.astype(np.float64))

    k = np.array([1, 2, 3], np.uint32)
    g = tidu.grad(f)(np.ones(3), k)
    np.testing.assert_array_equal(g, ((k << 3) ^ k).astype(np.float64))


# --- back ends ----------------------------------------------------------------------------

PRIMS = ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "shift_left", "shift_right_logical",
         "shift_right_arithmetic"]


def _bitwise_program(dtype: str, n: int):
    a = Aval((n,), dtype)

    def build(b, x, y):
        return [op(b, p, x) if p == "bitwise_not" else op(b, p, x, y) for p in PRIMS] + [
            op(b, "add", x, y), op(b, "mul", x, y), op(b, "compare", x, y, direction="LT"),
            op(b, "reduce_max", x, axes=(0,)), op(b, "convert", x, dtype="float64")]

    return program_of(build, [a, a])


@pytest.mark.parametrize("dtype", [*INTS, "bool"])
def test_bitwise_primitives_run_in_xla(dtype):
    if dtype == "bool":
        a = Aval((6,), "bool")
        prog = program_of(lambda b, x, y: [op(b, p, x) if p == "bitwise_not" else op(b, p, x, y)
                                           for p in PRIMS[:4]], [a, a])
        x = np.array([True, False, True, False, True, True])
        args = [x, x[::-1].copy()]
    else:
        prog = _bitwise_program(dtype, 12)
        args = [_ints(dtype, 12, 5), _amounts(dtype, 12)]
    got, want = run_both(prog, args)
    assert_matches(got, want, prog)
    text = to_stablehlo(prog)
    assert "stablehlo.shift_right_logical" in text or dtype == "bool"


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint8", "uint32", "uint64"])
def test_bitwise_primitives_in_c(dtype):
    pytest.importorskip("cffi")
    prog = _bitwise_program(dtype, 12)
    args = [_ints(dtype, 12, 6), _amounts(dtype, 12)]
    for got, want in zip(prog.run(args, backend="c"), prog.eval(args), strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


# --- float16 and bfloat16 -------------------------------------------------------------------

# (rtol, atol) for results of a few operations in each dtype (8 and 11 significant bits)
HALF_TOL = {"bfloat16": (3e-2, 3e-2), "float16": (4e-3, 4e-3)}


def _half(dtype: str, shape: tuple[int, ...], seed: int, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)


def _close(got, want, dtype, scale: float = 1.0) -> None:
    rtol, atol = HALF_TOL[dtype]
    got, want = np.asarray(got), np.asarray(want)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol * scale,
                               atol=atol * scale)


def _half_fns(m):
    """Functions written with the module's functions only (a bfloat16 NumPy array's own
    operators promote Python floats to float32: ml_dtypes')."""
    add, mul = m.add, m.multiply
    return [lambda x, y: add(mul(x, y), 1.5), lambda x, y: m.divide(x, add(mul(y, y), 1)),
            lambda x, y: m.subtract(m.exp(x), m.log(add(mul(y, y), 0.5))),
            lambda x, y: add(mul(m.tanh(x), m.sin(y)), m.sqrt(add(mul(x, x), 0.25))),
            lambda x, y: m.subtract(m.maximum(x, y), m.cos(x)), lambda x, y: m.sum(mul(x, y), axis=1),
            lambda x, y: m.matmul(x, m.transpose(y))]


@pytest.mark.parametrize("dtype", HALF)
def test_half_values_eager_traced_and_jax(dtype):
    x, y = _half(dtype, (3, 4), 1), _half(dtype, (3, 4), 2)
    with jax.enable_x64(True):
        refs = [np.asarray(f(jnp.asarray(x), jnp.asarray(y))) for f in _half_fns(jnp)]
    for f, ref in zip(_half_fns(tnp), refs, strict=True):
        eager, traced = f(x, y), np.asarray(tidu.jit(f)(x, y))
        assert np.asarray(eager).dtype == traced.dtype == ref.dtype == np.dtype(dtype)
        _close(traced, eager, dtype)
        _close(traced, ref, dtype)


@pytest.mark.parametrize("dtype", HALF)
def test_half_promotion_in_traced_code(dtype):
    x = _half(dtype, (3,), 3)
    assert np.asarray(tidu.jit(lambda x: x * 0.1 + 1)(x)).dtype == np.dtype(dtype)  # weak scalars
    assert np.asarray(tnp.multiply(x, 0.1)).dtype == np.dtype(dtype)  # eager too (JAX's, not ml_dtypes')
    np.testing.assert_array_equal(tnp.multiply(x, 0.1), tidu.jit(lambda x: x * 0.1)(x))
    other = "float16" if dtype == "bfloat16" else "bfloat16"
    assert np.asarray(tidu.jit(lambda a, b: a + b)(x, x.astype(other))).dtype == np.float32
    assert np.asarray(tidu.jit(lambda a: a + np.ones(3, np.int8))(x)).dtype == np.dtype(dtype)
    assert np.asarray(tidu.jit(lambda a: a.astype(np.float64))(x)).dtype == np.float64


@pytest.mark.parametrize("dtype", HALF)
def test_half_gradients_against_jax(dtype):
    x = _half(dtype, (5,), 4)

    def f(m):
        return lambda x: m.sum(m.tanh(x) * x ** 2 + m.exp(-x) * 0.5)

    g = tidu.grad(f(tnp))(x)
    with jax.enable_x64(True):
        want = np.asarray(jax.jit(jax.grad(f(jnp)))(jnp.asarray(x)))
    assert g.dtype == want.dtype == np.dtype(dtype)
    _close(g, want, dtype, scale=2)
    hv = tidu.jvp(tidu.grad(f(tnp)), (x,), (np.ones(5, dtype),))[1]
    with jax.enable_x64(True):
        hv_want = np.asarray(jax.jit(jax.jvp, static_argnums=0)(jax.grad(f(jnp)), (jnp.asarray(x),),
                                                                (jnp.ones(5, dtype),))[1])
    assert np.asarray(hv).dtype == np.dtype(dtype)
    _close(hv, hv_want, dtype, scale=4)


@pytest.mark.parametrize("dtype", HALF)
def test_half_programs_run_in_xla_as_numpy(dtype):
    from tidu.lowering.xla import run_xla

    x, y = _half(dtype, (3, 4), 5), _half(dtype, (3, 4), 6)
    f = lambda x, y: [g(x, y) for g in _half_fns(tnp)]  # noqa: E731
    prog = tidu.make_graph(f)(x, y).program
    text = to_stablehlo(prog)
    assert ("xbf16>" if dtype == "bfloat16" else "xf16>") in text
    for got, want in zip(run_xla(prog, [x, y]), prog.eval([x, y]), strict=True):
        assert got.dtype == want.dtype == np.dtype(dtype)
        _close(got, want, dtype)
    grad = tidu.make_graph(tidu.grad(lambda x: tnp.sum(tnp.sin(x) * x)))(x).program
    _close(run_xla(grad, [x])[0], grad.eval([x])[0], dtype)


def test_half_constants_are_exact_in_stablehlo():
    for dtype in HALF:
        vals = np.array([0.1, -3.0, 65504.0 if dtype == "float16" else 3e38, np.inf, np.nan, -0.0], dtype)
        prog = tidu.make_graph(lambda x, v=vals: x + v)(np.zeros(6, dtype)).program
        from tidu.lowering.xla import run_xla

        got = run_xla(prog, [np.zeros(6, dtype)])[0]
        np.testing.assert_array_equal(got.view(np.uint16)[:3], vals.view(np.uint16)[:3])
        assert np.isinf(got[3]) and np.isnan(got[4])


def test_c_back_end_refuses_half_dtypes_by_name():
    x = np.ones(3, "bfloat16")
    prog = tidu.make_graph(lambda x: x * 2)(x).program
    with pytest.raises(NotImplementedError, match="does not handle bfloat16"):
        prog.to_c()
    with pytest.raises(NotImplementedError, match="does not handle float16"):
        tidu.make_graph(lambda x: tnp.exp(x))(np.ones(2, np.float16)).program.to_c()


@pytest.mark.parametrize(("src", "dst"), [("float64", "uint64"), ("uint64", "float64"), ("float32", "int32"),
                                          ("int16", "uint16"), ("float16", "int16")])
def test_bitcast_convert_is_the_same_on_every_back_end(src, dst):
    """tidu.lax.bitcast_convert_type: NumPy's view, eager, traced, in XLA and in C."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=9).astype(src) if src.startswith("float") else _ints(src, 9, 1)
    if src.startswith("float"):
        x[:3] = np.array([0.0, -0.0, np.inf], dtype=src)
    want = x.view(dst)
    f = lambda v: tidu.lax.bitcast_convert_type(v, dst)  # noqa: E731
    np.testing.assert_array_equal(f(x), want)
    np.testing.assert_array_equal(tidu.jit(f)(x), want)
    prog = program_of(lambda b, v: [op(b, "bitcast_convert", v, dtype=dst)], [Aval((9,), src)])
    got, ref = run_both(prog, [x])
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(ref[0], want)
    if "16" not in src and pytest.importorskip("cffi"):
        np.testing.assert_array_equal(prog.run([x], backend="c")[0], want)


def test_bitcast_convert_errors_name_the_argument():
    with pytest.raises(TypeError, match="new_dtype float32 has 32 bits"):
        tidu.lax.bitcast_convert_type(np.ones(2), np.float32)
    with pytest.raises(TypeError, match="operand must have an integer or float dtype"):
        tidu.jit(lambda v: tidu.lax.bitcast_convert_type(v, np.float64))(np.ones(2, np.complex64))
    # the result carries no derivative (an integer's bits have no tangent to give)
    assert tidu.grad(lambda v: tnp.sum(tidu.lax.bitcast_convert_type(
        tidu.lax.bitcast_convert_type(v, np.uint64), np.float64) * v))(np.array([2.0]))[0] == 2.0


@pytest.mark.parametrize(("x", "y"), [
    (np.array([5, -7, 7, -7, np.iinfo(np.int64).min, 2**60 + 7, 2**62 - 1, 0]),
     np.array([0, 3, -3, -3, -1, 3, 2**40 + 1, 5])),
    (np.array([5, 7, 250, 0], np.uint8), np.array([0, 3, 7, 2], np.uint8)),
    (np.array([5, -7, 9, -2**31], np.int32), np.array([2, 3, -4, -1], np.int32)),
])
@pytest.mark.parametrize("name", ["fmod", "remainder"])
def test_integer_modular_arithmetic_is_exact_on_every_back_end(x, y, name):
    """fmod and remainder of integers are computed in their integer dtype (the rem
    primitive on integers): exact beyond 2^53, 0 where the divisor is 0 (and INT_MIN % -1),
    as NumPy's, traced, on XLA and in C."""
    fn, ref = getattr(tnp, name), getattr(np, name)
    with np.errstate(all="ignore"):
        want = ref(x, y)
    program = tidu.make_graph(fn)(x, y).program
    for got in (tidu.jit(fn)(x, y), program.run([x, y], backend="xla")[0], program.run([x, y], backend="c")[0]):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
