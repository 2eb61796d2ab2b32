"""StableHLO lowering: every emitted module is run by XLA (CPU) and compared with the
NumPy reference, for every primitive and every dtype it admits, random graphs,
multiple outputs, exact constants, parse errors and determinism.

Tests that run XLA skip when jax is not installed; the ones marked ``@without_jax``
(text, determinism, the install hint) run either way."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tidu.lowering.compile import Instruction, Program, compile
from tidu.lowering.constants import SMALL
from tidu.lowering.stablehlo import _LOWERINGS, LoweringError, dense_literal, tensor_type, to_stablehlo
from tidu.lowering.xla import (
    StableHLOError,
    XlaUnavailableError,
    compile_text,
    run_xla,
    verify_stablehlo,
)
from xla_util import TOLERANCE, assert_matches, check, draw, op, program_of, reference, run_both

from tidu.ad.linearize import linearize
from tidu.ad.transpose import linear_transpose
from tidu.core.keys import Attrs, Aval, Named, is_complex, is_float
from tidu.ops.catalog import catalog
from tidu.simplify.materialize import materialize_merge
from tidu.trace.fragments import FragmentBuilder
from tidu.trace.resolve import resolve


def without_jax(test):
    """Mark a test that does not need jax (it runs when jax is absent too)."""
    test.without_jax = True
    return test


@pytest.fixture(autouse=True)
def _needs_jax(request: pytest.FixtureRequest) -> None:
    if not getattr(request.function, "without_jax", False):
        pytest.importorskip("jax")


SEED = 20240611


def dtypes_of(name: str) -> list[str]:
    return sorted(catalog()[name].dtypes)


def cases(name: str) -> list:
    return [pytest.param(d, id=d) for d in dtypes_of(name)]


def slow_unless(default: bool) -> tuple:
    """No mark for a case of the default run, ``slow`` for one of the slow step. The sweeps
    over two attributes (direction and dtype, source and target dtype, axes and dtype, kind
    and dtype) keep every dtype in the default run, each with one value of the other
    attribute, and every value of that attribute for a few dtypes; CI's slow step runs
    the rest of each product (one XLA compilation a case)."""
    return () if default else (pytest.mark.slow,)


# --- elementwise ops ------------------------------------------------------------------

UNARY_DOMAIN = {
    "neg": "any", "sign": "small_int", "abs": "any", "conj": "any", "real": "any",
    "imag": "any", "exp": "any", "log": "positive", "expm1": "any",
    "log1p": "above_minus_one", "sin": "any", "cos": "any", "tan": "any", "tanh": "any",
    "sqrt": "positive", "rsqrt": "positive", "floor": "any", "ceil": "any", "rint": "any",
    "erf": "any", "erfc": "any", "sinh": "any", "cosh": "any",  # chlo ops, written in MLIR's generic form
    "asin": "unit", "acos": "unit", "atan": "any", "asinh": "any", "acosh": "above_one", "atanh": "unit",
    "logistic": "any", "one_minus_square": "any", "cbrt": "any",
}
BINARY_DOMAIN = {
    "add": ("any", "any"), "sub": ("any", "any"), "mul": ("any", "any"),
    "div": ("any", "positive"), "pow": ("positive", "any"),
    "maximum": ("small_int", "small_int"), "minimum": ("small_int", "small_int"),
    "rem": ("any", "positive"), "atan2": ("any", "any"),
}


@pytest.mark.parametrize(("name", "dtype"), [
    pytest.param(n, d, id=f"{n}-{d}") for n in UNARY_DOMAIN for d in dtypes_of(n)
])
def test_unary(name: str, dtype: str) -> None:
    rng = np.random.default_rng(SEED)
    aval = Aval((3, 4), dtype)
    x = draw(rng, aval, UNARY_DOMAIN[name])
    check(lambda b, x: [op(b, name, x)], [aval], [x])


@pytest.mark.parametrize(("name", "dtype"), [
    pytest.param(n, d, id=f"{n}-{d}") for n in BINARY_DOMAIN for d in dtypes_of(n)
])
def test_binary(name: str, dtype: str) -> None:
    rng = np.random.default_rng(SEED)
    aval = Aval((2, 5), dtype)
    dx, dy = BINARY_DOMAIN[name]
    x, y = draw(rng, aval, dx), draw(rng, aval, dy)
    check(lambda b, x, y: [op(b, name, x, y)], [aval, aval], [x, y])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_extrema_propagate_nan(name: str, dtype: str) -> None:
    """XLA's default CPU options drop NaNs in max/min; the runner uses jax's."""
    aval = Aval((4,), dtype)
    x = np.array([np.nan, 1, 2, np.nan], dtype)
    y = np.array([1, np.nan, 3, np.nan], dtype)
    program = check(lambda b, x, y: [op(b, name, x, y)], [aval, aval], [x, y])
    assert np.isnan(run_xla(program, [x, y])[0][:2]).all()


@pytest.mark.parametrize("dtype", ["float32", "float64"])  # float16 and bfloat16 have no complex type
def test_complex(dtype: str) -> None:
    rng = np.random.default_rng(SEED)
    aval = Aval((3,), dtype)
    x, y = draw(rng, aval), draw(rng, aval)
    check(lambda b, x, y: [op(b, "complex", x, y)], [aval, aval], [x, y])


SPECIAL_REALS = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, np.inf, -np.inf, np.nan, 1e300, -1e300,
                 1e-30, 88.0, -104.0, 710.0, -750.0]


def without_subnormals(got: np.ndarray, want: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop the elements whose reference value is subnormal: XLA on CPU flushes those."""
    tiny = np.finfo(want.dtype).tiny
    keep = ~((np.abs(want) < tiny) & (want != 0))
    return got[keep], want[keep]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", [*(n for n in UNARY_DOMAIN if n != "imag"), *BINARY_DOMAIN])
def test_special_real_values(name: str, dtype: str) -> None:
    """inf, nan, signed zeros, overflow and underflow agree with NumPy for real dtypes."""
    with np.errstate(over="ignore"):
        vals = np.array(SPECIAL_REALS, dtype)
    n = 1 if name in UNARY_DOMAIN else 2
    args = [vals] if n == 1 else [a.ravel() for a in np.meshgrid(vals, vals)]
    aval = Aval(args[0].shape, dtype)
    program = program_of(lambda b, *xs: [op(b, name, *xs)], [aval] * n)
    (got,), (want,) = run_both(program, args)
    got, want = without_subnormals(got, want)
    np.testing.assert_allclose(got, want, rtol=TOLERANCE[dtype][0], atol=0, equal_nan=True)
    if name not in ("sign", "maximum", "minimum"):
        # XLA: sign(-0.0) = -0.0, max(-0.0, 0.0) = 0.0, min = -0.0 (IEEE 754-2019);
        # NumPy: sign(-0.0) = 0.0 and max/min return one operand. Elsewhere zeros match.
        assert (np.signbit(got) == np.signbit(want))[want == 0].all()


def test_complex_sign_matches_numpy_for_finite_values() -> None:
    """StableHLO's sign of a complex value is x/|x| (0 at 0) without overflow or
    underflow in |x|. (Not at infinities: XLA gives nan there, NumPy the direction. And
    XLA on CPU flushes subnormal operands and results to zero, NumPy does not.)"""
    aval = Aval((6,), "complex128")
    z = np.array([0, 1 + 1j, -3j, 1e300 + 1e300j, 1e-160 - 2e-160j, -2.5 + 0.5j])
    check(lambda b, z: [op(b, "sign", z)], [aval], [z])


@pytest.mark.parametrize(("direction", "dtype"), [
    pytest.param(r, d, id=f"{r}-{d}", marks=slow_unless(
        r == ("NE" if is_complex(d) else "LT") or d in ("float64", "int32", "uint32", "bool")))
    for d in dtypes_of("compare")
    for r in ("EQ", "NE", "LT", "LE", "GT", "GE")
    if r in ("EQ", "NE") or not is_complex(d)  # complex values compare with EQ/NE only
])
def test_compare(direction: str, dtype: str) -> None:
    rng = np.random.default_rng(SEED)
    aval = Aval((4, 5), dtype)
    x, y = draw(rng, aval, "small_int"), draw(rng, aval, "small_int")
    program = check(lambda b, x, y: [op(b, "compare", x, y, direction=direction)],
                    [aval, aval], [x, y])
    kind = "UNSIGNED" if dtype == "bool" or dtype.startswith("uint") else \
        "SIGNED" if dtype.startswith("int") else "FLOAT"
    assert f"{direction}, %s0, %s1, {kind} :" in to_stablehlo(program)


@pytest.mark.parametrize("dtype", cases("select"))
def test_select(dtype: str) -> None:
    rng = np.random.default_rng(SEED)
    aval = Aval((3, 4), dtype)
    pred = draw(rng, aval.with_dtype("bool"))
    check(lambda b, p, x, y: [op(b, "select", p, x, y)],
          [aval.with_dtype("bool"), aval, aval], [pred, draw(rng, aval), draw(rng, aval)])


CONVERT_PAIRS = [
    (s, t) for s in dtypes_of("convert") for t in dtypes_of("convert")
    if not (is_complex(s) and not is_complex(t))
]


@pytest.mark.parametrize(("src", "dst"), [  # default: each dtype to and from float64 and bool, complex to complex
    pytest.param(s, t, id=f"{s}-{t}", marks=slow_unless(
        bool({s, t} & {"float64", "bool"}) or (is_complex(s) and is_complex(t))))
    for s, t in CONVERT_PAIRS])
def test_convert(src: str, dst: str) -> None:
    rng = np.random.default_rng(SEED)
    aval = Aval((3, 4), src)
    # float to unsigned is defined for values in range only: positive ones
    x = draw(rng, aval, "small_int" if dst == "bool" else "positive" if dst.startswith("uint") else "any")
    check(lambda b, x: [op(b, "convert", x, dtype=dst)], [aval], [x])


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_convert_complex_to_real_keeps_the_real_part(dtype: str) -> None:
    """The catalog's type rule forbids it, the lowering still defines it (real, convert)."""
    rng = np.random.default_rng(SEED)
    src, dst = Aval((5,), dtype), Aval((5,), "int32")
    ins = Instruction("convert", Attrs(dtype="int32"), (0,), (1,))
    program = Program([ins], [0], [1], [src, dst], [Named("z")])
    z = draw(rng, src) * 3
    np.testing.assert_array_equal(run_xla(program, [z])[0], z.real.astype("int32"))


# --- constants ------------------------------------------------------------------------

SPECIAL = [0.0, -0.0, 1.0, 0.1, -2.5, 1 / 3, np.inf, -np.inf, np.nan, 5e-324, 1e-310,
           1.7976931348623157e308, 2.2250738585072014e-308, 3.4028234663852886e38, 1e-45, 1e-40]


def values_of(dtype: str) -> np.ndarray:
    if dtype == "bool":
        return np.array([True, False, True])
    if dtype.startswith("int"):
        info = np.iinfo(dtype)
        return np.array([0, 1, -1, 7, info.min, info.max], dtype)
    part = {"complex64": "float32", "complex128": "float64"}.get(dtype, dtype)
    with np.errstate(over="ignore"):
        real = np.array(SPECIAL, dtype=np.float64).astype(part)
    if not is_complex(dtype):
        return real
    out = np.empty(real.shape, dtype)
    out.real, out.imag = real, real[::-1]
    return out


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", cases("constant"))
def test_constants_round_trip_bit_exactly(dtype: str) -> None:
    """Non-splat, splat and scalar constants, inf/nan/-0/subnormals included."""
    v = values_of(dtype)
    consts = [v, np.full((2, 3), v[-1]), v[1].copy(), v.reshape(1, -1)[:, ::-1].copy(), v[:0]]
    program = program_of(lambda b: [b.constant(c) for c in consts], [])
    got = run_xla(program, [])
    for g, c in zip(got, consts, strict=True):
        assert same_bits(g, c), (g, c)
    got_np = reference(program, [])
    for g, c in zip(got_np, consts, strict=True):
        assert same_bits(np.asarray(g), c)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_random_bit_patterns_round_trip(dtype: str) -> None:
    """Any bit pattern survives: finite values as the shortest decimal (which must not
    double-round through f64 for f32), inf and nan as hex with their payload."""
    rng = np.random.default_rng(SEED)
    real = "float32" if dtype in ("float32", "complex64") else "float64"
    uint = np.uint32 if real == "float32" else np.uint64
    bits = rng.integers(0, np.iinfo(uint).max, size=5000, dtype=uint, endpoint=True)
    vals = bits.view(real)  # NaNs (signalling ones too) keep their payload bits
    if is_complex(dtype):
        parts = vals[: len(vals) // 2 * 2]
        vals = np.empty(len(parts) // 2, dtype)
        vals.real, vals.imag = parts[0::2], parts[1::2]
    # large constants are hex bytes, small ones (chunks of SMALL) the shortest decimals
    chunks = [vals[i : i + SMALL] for i in range(0, 40 * SMALL, SMALL)]
    program = program_of(lambda b: [b.constant(c) for c in (vals, *chunks)], [])
    text = to_stablehlo(program)
    assert text.count('dense<"0x') == 1
    for got, want in zip(run_xla(program, [])[0:], (vals, *chunks), strict=True):
        assert same_bits(got, want)


def structured_cases() -> list[np.ndarray]:
    rng = np.random.default_rng(SEED)
    return [
        np.eye(40), np.eye(30, 29, k=1), -np.eye(20), np.eye(25, dtype=bool), np.eye(18) * (1 + 2j),
        np.eye(20, dtype=np.float32)[None].repeat(3, 0), np.diag(np.arange(1.0, 31.0)), np.diag(rng.random(24)),
        np.where(np.eye(20) > 0, np.nan, -0.0), np.arange(50.0), np.arange(40, dtype=np.int32) * 3 - 7,
        np.tile(np.arange(20, dtype=np.int64), (4, 1)), np.pad(np.ones((3, 3)), 10), np.eye(6)[:, :, None] * np.ones(5),
        (np.arange(30) % 7 == 2), rng.random((6, 7)), np.kron(np.eye(3), np.ones((4, 4))), np.linspace(0, 1, 30),
        np.arange(17.0) * 2**30, np.eye(12).reshape(12, 3, 4), np.eye(8, dtype=np.int32).reshape(2, 4, 2, 4),
    ]


def test_structured_constants_run_bit_exactly() -> None:
    """Identities, shifted and scaled diagonals, one-hot masks, ranges and repeated values
    are built from iota/compare/select/broadcast (text in their dimensions, not their
    size), irreducible ones are hex; XLA gives back the same bits."""
    cases_ = structured_cases()
    program = program_of(lambda b: [b.constant(c) for c in cases_], [])
    text = to_stablehlo(program)
    assert "stablehlo.iota" in text and "broadcast_in_dim" in text
    for got, want in zip(run_xla(program, []), cases_, strict=True):
        assert same_bits(got, want), want


@without_jax
def test_structured_constant_text_grows_with_the_dimensions_not_the_size() -> None:
    def text_of(n: int) -> str:
        return to_stablehlo(program_of(lambda b: [b.constant(np.eye(n)), b.constant(np.eye(n, k=1) * 2)], []))

    assert len(text_of(2000)) - len(text_of(1000)) < 100  # only the shapes' digits change


@without_jax
def test_nan_and_inf_literals_are_hex() -> None:
    text = dense_literal(np.array([np.inf, -np.inf, np.nan, 1.5]))
    assert text == "dense<[0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000, 1.5]>"
    assert dense_literal(np.array([np.nan], np.float32)) == "dense<0x7FC00000>"
    assert dense_literal(np.full((2, 2), 1 + 2j)) == "dense<(1.0, 2.0)>"
    assert dense_literal(np.array(0.1, np.float32)) == "dense<0.1>"
    assert dense_literal(np.array([1e16, 5e-324, -0.0])) == "dense<[1.0e+16, 5.0e-324, -0.0]>"
    assert dense_literal(np.array([[1, 2], [3, 4]], np.int32)) == "dense<[[1, 2], [3, 4]]>"
    assert dense_literal(np.zeros((0, 3))) == "dense<>"
    assert tensor_type(Aval((), "complex128")) == "tensor<complex<f64>>"


def test_inf_nan_constants_in_arithmetic() -> None:
    aval = Aval((4,), "float64")
    c = np.array([np.inf, -np.inf, np.nan, -0.0])
    program = check(lambda b, x: [op(b, "add", x, b.constant(c)), op(b, "mul", b.constant(c), x)],
                    [aval], [np.array([1.0, 2.0, 3.0, -0.0])])
    assert "0x7FF0000000000000" in to_stablehlo(program)


# --- structural ops -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", cases("broadcast_in_dim"))
def test_broadcast_in_dim(dtype: str) -> None:
    rng = np.random.default_rng(SEED)
    a, c, s = Aval((3,), dtype), Aval((1, 3), dtype), Aval((), dtype)
    check(lambda b, x, y, z: [
        op(b, "broadcast_in_dim", x, shape=(2, 3, 4), dims=(1,)),
        op(b, "broadcast_in_dim", y, shape=(5, 3), dims=(0, 1)),
        op(b, "broadcast_in_dim", z, shape=(2, 2), dims=()),
    ], [a, c, s], [draw(rng, a), draw(rng, c), draw(rng, s)])


@pytest.mark.parametrize("dtype", cases("reshape"))
def test_reshape_and_transpose(dtype: str) -> None:
    rng = np.random.default_rng(SEED)
    a, one = Aval((2, 3, 4), dtype), Aval((1, 1), dtype)
    check(lambda b, x, y: [
        op(b, "reshape", x, shape=(4, 6)), op(b, "reshape", y, shape=()),
        op(b, "transpose", x, perm=(2, 0, 1)), op(b, "transpose", x, perm=(1, 0, 2)),
        op(b, "reverse", x, dims=(0, 2)), op(b, "reverse", y, dims=(1,)),
    ], [a, one], [draw(rng, a), draw(rng, one)])


@pytest.mark.parametrize("dtype", cases("slice"))
def test_slice(dtype: str) -> None:
    rng = np.random.default_rng(SEED)
    a = Aval((5, 6), dtype)
    check(lambda b, x: [
        op(b, "slice", x, start=(1, 0), limit=(5, 6), strides=(2, 3)),
        op(b, "slice", x, start=(0, 2), limit=(5, 4), strides=(1, 1)),
        op(b, "slice", x, start=(2, 2), limit=(2, 6), strides=(1, 1)),
    ], [a], [draw(rng, a)])


@pytest.mark.parametrize("dtype", cases("pad"))
def test_pad(dtype: str) -> None:
    rng = np.random.default_rng(SEED)
    a, s = Aval((2, 3), dtype), Aval((), dtype)
    check(lambda b, x, v: [
        op(b, "pad", x, v, low=(1, 0), high=(0, 2), interior=(1, 2)),
        op(b, "pad", x, v, low=(0, 0), high=(0, 0), interior=(0, 0)),
        op(b, "pad", v, v, low=(), high=(), interior=()),
    ], [a, s], [draw(rng, a), draw(rng, s)])


@pytest.mark.parametrize("dtype", cases("concatenate"))
def test_concatenate(dtype: str) -> None:
    rng = np.random.default_rng(SEED)
    a, c = Aval((2, 3), dtype), Aval((2, 1), dtype)
    check(lambda b, x, y: [op(b, "concatenate", x, y, x, axis=1), op(b, "concatenate", x, axis=0),
                           op(b, "concatenate", x, x, axis=0)],
          [a, c], [draw(rng, a), draw(rng, c)])


@pytest.mark.parametrize(("name", "dtype", "axes"), [  # default: axes (2, 0) of every dtype, every axes of float64
    pytest.param(n, d, a, id=f"{n}-{d}-{a}", marks=slow_unless(a == (2, 0) or d == "float64"))
    for n in ("reduce_sum", "reduce_max", "reduce_prod")
    for d in dtypes_of(n)
    for a in [(), (0,), (1,), (2, 0), (0, 1, 2)]
])
def test_reductions(name: str, dtype: str, axes: tuple[int, ...]) -> None:
    rng = np.random.default_rng(SEED)
    a = Aval((2, 3, 4), dtype)
    x = draw(rng, a, "small_int" if name == "reduce_prod" and not is_float(dtype) else "any")
    check(lambda b, x: [op(b, name, x, axes=axes)], [a], [x])


DOTS = {  # lhs shape, rhs shape, lhs_contract, rhs_contract, lhs_batch, rhs_batch
    "matmul": ((2, 3), (3, 4), (1,), (0,), (), ()),
    "vector": ((3,), (3,), (0,), (0,), (), ()),
    "outer": ((3,), (2,), (), (), (), ()),
    "batched": ((2, 3, 4), (2, 4, 5), (2,), (1,), (0,), (0,)),
    "two_contractions": ((2, 3, 4), (4, 3), (1, 2), (1, 0), (), ()),
    "batch_in_the_middle": ((3, 2, 4), (4, 5, 2), (2,), (0,), (1,), (2,)),
}


@pytest.mark.parametrize(("dtype", "kind"), [  # default: every dtype's batch_in_the_middle, every kind of float64
    pytest.param(d, k, id=f"{d}-{k}", marks=slow_unless(k == "batch_in_the_middle" or d == "float64"))
    for d in dtypes_of("dot_general") for k in DOTS
])
def test_dot_general(dtype: str, kind: str) -> None:
    rng = np.random.default_rng(SEED)
    ls, rs, lc, rc, lb, rb = DOTS[kind]
    la, ra = Aval(ls, dtype), Aval(rs, dtype)
    check(lambda b, x, y: [op(b, "dot_general", x, y, lhs_contract=lc, rhs_contract=rc,
                              lhs_batch=lb, rhs_batch=rb)],
          [la, ra], [draw(rng, la), draw(rng, ra)])


@without_jax
def test_every_primitive_is_lowered_and_tested() -> None:
    tested = (set(UNARY_DOMAIN) | set(BINARY_DOMAIN)
              | {"complex", "compare", "select", "convert", "constant", "broadcast_in_dim",
                 "reshape", "transpose", "reverse", "slice", "pad", "concatenate", "reduce_sum",
                 "reduce_max", "reduce_prod", "dot_general"}
              # tests/test_dynamic_indexing.py::test_loops_indexed_by_their_counter and
              # ::test_a_read_at_the_counter_costs_its_slice_in_both_directions
              | {"dynamic_slice", "dynamic_update_slice"}
              # linear algebra: tests/test_linalg.py::test_primitives_run_in_xla
              | {"triangle", "cholesky", "triangular_solve", "solve", "logabsdet", "detsign", "eigvalsh",
                 "eigh_vectors", "qr_q", "qr_r", "svdvals", "svd_u", "svd_vh", "pinv"}
              # tests/test_linalg_more.py::test_primitives_run_in_xla
              | {"expm", "expm_frechet", "lu", "lu_pivots", "permutation_matrix", "eigvals", "eig_vectors"}
              # discrete Fourier transforms: tests/test_fft.py::test_primitives_run_in_xla
              | {"fft", "ifft", "rfft", "irfft"}
              # special functions: tests/test_special.py::test_special_stablehlo_runs_in_xla and
              # ::test_numerical_algorithms_in_xla
              | {"lgamma", "digamma", "zeta", "erfinv", "ndtri", "i0", "i0e", "i1e", "erfcx", "exp1", "expi",
                 "sine_integral", "cosine_integral", "gammainc", "gammaincc", "betainc", "expn",
                 "spence", "fresnel_s", "fresnel_c", "hyp1f1"}
              # tests/test_hyp2f1.py::test_series_and_transformations_in_xla and
              # ::test_derivatives_in_the_parameters_to_any_order
              | {"hyp2f1", "hyp2f1_d"}
              # ::test_incomplete_gamma_shape_hessians_in_every_mode_and_on_xla and
              # ::test_hurwitz_zeta_derivatives_in_s_to_any_order and
              # ::test_incomplete_beta_derivatives_in_the_shapes_to_any_order
              # and ::test_kummer_derivatives_in_its_parameters_to_any_order
              | {"gammainc_da", "gamma_density_d", "zeta_d", "betainc_d", "beta_density_d", "hyp1f1_d"}
              # convolution: tests/test_conv.py::test_primitive_runs_in_xla
              | {"conv"}
              # bitwise operations: tests/test_dtypes_more.py::test_bitwise_primitives_run_in_xla
              | {"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "shift_left", "shift_right_logical",
                 "shift_right_arithmetic", "bitcast_convert"})
    # a structural op by its lowering, an elementwise one by its rule block's stablehlo op
    # or its meaning in catalog ops (one_minus_square: (1 - x) * (1 + x))
    assert all(p.numpy_fn in _LOWERINGS or p.stablehlo_op is not None
               or (p.decl.meaning is not None and p.numpy_meaning) for p in catalog().values())
    assert set(catalog()) <= tested


# --- whole programs -------------------------------------------------------------------


def test_multiple_outputs_inputs_as_outputs_and_repeats() -> None:
    rng = np.random.default_rng(SEED)
    a = Aval((3,), "float64")
    x, y = draw(rng, a), draw(rng, a)

    def build(b, x, y):
        s = op(b, "mul", op(b, "sin", x), y)
        return [s, x, s, op(b, "compare", s, y, direction="LT"), b.constant(np.int32(7)),
                op(b, "reduce_sum", s, axes=(0,))]

    program = check(build, [a, a], [x, y])
    assert len(program.output_slots) == 6
    assert program.run({"x0": x, "x1": y}, backend="xla")[1].tolist() == x.tolist()
    (key,) = [k for k in program._cache if isinstance(k, tuple) and k[0] == "xla_jit"]
    exe = program._cache[key]  # compiled once (no second client compilation), reused
    assert "xla" not in program._cache
    run_xla(program, [x, y])
    assert program._cache[key] is exe


def test_no_outputs_and_no_inputs() -> None:
    program = program_of(lambda b: [], [])
    assert "func.func public @main() -> () {\n    return\n" in to_stablehlo(program)
    assert run_xla(program, []) == []


def test_run_accepts_what_bind_inputs_accepts_and_rejects_the_rest() -> None:
    """Program.run on XLA takes exact NumPy arrays straight through and everything else
    (dicts, names, Python lists, other dtypes or byte orders, subclasses, generators)
    through bind_inputs: the same values either way, and the same clear errors."""
    from tidu.lowering.compile import InputError

    rng = np.random.default_rng(SEED)
    a = Aval((3,), "float64")
    x, y = draw(rng, a), draw(rng, a)
    program = program_of(lambda b, x, y: [op(b, "mul", op(b, "sin", x), y)], [a, a])
    want = np.sin(x) * y
    for inputs in ([x, y], (x, y), {"x0": x, "x1": y}, [x.tolist(), y], [x.astype(">f8"), y],
                   [x.astype(np.float32), y.astype(np.float32)], [np.ma.asarray(x), y],
                   [np.stack([x, x], axis=1)[:, 0], y], (v for v in [x, y])):
        (got,) = program.run(inputs, backend="xla")
        rtol = 1e-6 if isinstance(inputs, list) and np.asarray(inputs[0]).dtype == np.float32 else 1e-13
        np.testing.assert_allclose(got, want, rtol=rtol)
        assert isinstance(got, np.ndarray) and not got.flags.writeable
    for inputs, message in (([x], "expected 2 input"), ([x, y[:2]], "input x1: expected shape (3,)"),
                            ([x, y.astype(np.complex128)], "input x1: expected dtype float64"),
                            ({"x0": x}, "missing input"), ({"x0": x, "x1": y, "z": y}, "unknown input")):
        with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
            program.run(inputs, backend="xla")


def test_direct_client_path_gives_the_same_results(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where jax lacks the pieces for the jax.jit path, calls go to the XLA client."""
    import tidu.lowering.xla as xla

    monkeypatch.setattr(xla, "_jitted", lambda program, device: None)
    puts = []
    putter = xla._putter
    monkeypatch.setattr(xla, "_putter", lambda program, device: puts.append(device) or putter(program, device))
    rng = np.random.default_rng(SEED)
    a = Aval((4,), "complex128")
    x, y = draw(rng, a), draw(rng, a)
    program = program_of(lambda b, x, y: [op(b, "mul", x, y), op(b, "exp", x)], [a, a], cache=False)
    got = program.run([x, y], backend="xla")
    assert len(puts) == 1  # inputs went to the device through the client
    np.testing.assert_allclose(got[0], x * y, rtol=1e-13)
    np.testing.assert_allclose(got[1], np.exp(x), rtol=1e-13)


def test_identity_ops_reuse_their_operand() -> None:
    a = Aval((2,), "float64")
    program = check(lambda b, x: [op(b, "conj", x), op(b, "real", x)], [a], [np.array([1.0, -2.0])])
    text = to_stablehlo(program)
    assert "return %s0, %s0" in text and "stablehlo.real" not in text


def test_conj_emits_real_imag_negate_complex() -> None:
    a = Aval((2,), "complex64")
    program = check(lambda b, z: [op(b, "conj", z)], [a], [np.array([1 + 2j, -3j], np.complex64)])
    body = [line.split("=", 1)[1].split()[0] for line in to_stablehlo(program).splitlines()
            if line.strip().startswith("%s")]
    assert body == ["stablehlo.real", "stablehlo.imag", "stablehlo.negate", "stablehlo.complex"]


def joint_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The shape both of (3, 4), (4,), (3,), () broadcast to."""
    if a == b or b == ():
        return a
    return b if a == () else (3, 4)


def to_shape(b, v, shape: tuple[int, ...]):
    """Broadcast a value of shape (), (3,) or (4,) to ``shape``."""
    have = b.aval(v).shape
    if have == shape:
        return v
    dims = {(): (), (3,): (0,), (4,): (len(shape) - 1,)}[have]
    return op(b, "broadcast_in_dim", v, shape=shape, dims=dims)


def fill(b, v, value: complex, dtype: str):
    """A constant of ``v``'s shape."""
    return b.constant(np.full(b.aval(v).shape, value, dtype))


def squash(b, v, dtype: str):
    """v / (1 + |v|): keeps magnitudes below 1 without tanh's complex poles."""
    real = "float32" if dtype in ("float32", "complex64") else "float64"
    den = op(b, "add", op(b, "abs", v), fill(b, v, 1, real))
    if is_complex(dtype):
        den = op(b, "complex", den, fill(b, den, 0, real))
    return op(b, "div", v, den)


def random_node(b, kind: str, x, y, u: np.ndarray, dtype: str):
    """One random step of ``kind`` on pool values x, y (u: uniform numbers)."""
    if kind == "unary":
        names = ["neg", "sin", "cos", "tanh", "squash"]
        names += ["conj", "parts"] if is_complex(dtype) else ["abs"]
        name = names[int(u[2] * len(names))]
        if name == "parts":
            return op(b, "complex", op(b, "real", x), op(b, "imag", x))
        return squash(b, x, dtype) if name == "squash" else op(b, name, x)
    if kind == "binary":
        shape = joint_shape(b.aval(x).shape, b.aval(y).shape)
        name = ["add", "sub", "mul"][int(u[2] * 3)]
        v = op(b, name, to_shape(b, x, shape), to_shape(b, y, shape))
        return squash(b, v, dtype) if u[3] < 0.3 else v
    if kind == "reduce":
        axes = [(0,), (1,), (0, 1)][int(u[2] * 3)]
        if not is_complex(dtype) and u[3] < 0.4:
            return op(b, "reduce_max", to_shape(b, x, (3, 4)), axes=axes)
        v = op(b, "reduce_sum", to_shape(b, x, (3, 4)), axes=axes)
        return op(b, "mul", v, fill(b, v, math.prod(b.aval(v).shape) / 12, dtype))  # a mean
    if kind == "dot":
        m = to_shape(b, x, (3, 4))
        if u[2] < 0.5:  # matrix-vector
            if b.aval(y).shape in ((3,), (3, 4)):
                y = op(b, "reduce_sum", to_shape(b, y, (3, 4)), axes=(0,))
            v = op(b, "dot_general", m, to_shape(b, y, (4,)), lhs_contract=(1,),
                   rhs_contract=(0,), lhs_batch=(), rhs_batch=())
        else:  # full contraction, or an outer product reduced again
            v = op(b, "dot_general", m, to_shape(b, y, (3, 4)), lhs_contract=(0, 1),
                   rhs_contract=(0, 1), lhs_batch=(), rhs_batch=())
        return squash(b, v, dtype)
    value = u[2] * 2 - 1 + (1j * u[3] if is_complex(dtype) else 0)
    return b.constant(np.asarray(value, dtype))


def random_graph(rng: np.random.Generator, dtype: str, n_ops: int):
    """A random program over inputs of shapes (3, 4), (4,), (3,), (): elementwise chains
    with fan-out, broadcasts, reductions, dot_general; 1 to 3 outputs.
    Returns (build, avals)."""
    avals = [Aval(s, dtype) for s in ((3, 4), (4,), (3,), ())]
    kinds = ["unary", "binary", "binary", "reduce", "dot", "const"]
    plan = [(kinds[int(rng.integers(len(kinds)))], rng.random(4)) for _ in range(n_ops)]
    outs = rng.random(int(rng.integers(0, 3)))

    def build(b, *xs):
        pool = list(xs)
        for kind, u in plan:
            # biased towards recent values (chains); any value may be reused (fan-out)
            x, y = (pool[min(len(pool) - 1, int(len(pool) * (1 - w * w)))] for w in u[:2])
            pool.append(random_node(b, kind, x, y, u, dtype))
        return [pool[-1]] + [pool[len(pool) // 2 + int(w * (len(pool) - len(pool) // 2))]
                             for w in outs]

    return build, avals


# ten seeds per dtype in the default run, forty in the slow step
@pytest.mark.parametrize("seed", [s if s < 10 else pytest.param(s, marks=pytest.mark.slow) for s in range(40)])
@pytest.mark.parametrize("dtype", ["float64", "complex128", "float32"])
def test_random_graphs(dtype: str, seed: int) -> None:
    rng = np.random.default_rng([SEED, seed])
    build, avals = random_graph(rng, dtype, int(rng.integers(6, 30)))
    program = program_of(build, avals)
    inputs = [draw(rng, a) for a in avals]
    got, want = run_both(program, inputs)
    scale = max([float(np.max(np.abs(w), initial=0.0)) for w in want] + [1.0])
    assert_matches(got, want, program, scale=scale)


# --- determinism ----------------------------------------------------------------------


def _sample_build(b, x, z):
    s = op(b, "reduce_sum", op(b, "mul", x, op(b, "exp", x)), axes=(1,))
    c = b.constant(np.array([[np.nan, 0.1], [np.inf, -0.0]]))
    w = op(b, "dot_general", op(b, "add", x, c), x, lhs_contract=(1,), rhs_contract=(1,),
           lhs_batch=(), rhs_batch=())
    return [s, w, op(b, "conj", z), op(b, "abs", z)]


SAMPLE_AVALS = [Aval((2, 2), "float64"), Aval((3,), "complex128")]


@without_jax
def test_same_program_same_text() -> None:
    a = program_of(_sample_build, SAMPLE_AVALS, cache=False)
    b = program_of(_sample_build, SAMPLE_AVALS, cache=False)
    assert a is not b
    assert to_stablehlo(a) == to_stablehlo(b) == to_stablehlo(a)


@without_jax
def test_text_is_identical_across_processes() -> None:
    script = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        from test_stablehlo import SAMPLE_AVALS, _sample_build
        from xla_util import program_of
        from tidu.lowering.stablehlo import to_stablehlo
        sys.stdout.write(to_stablehlo(program_of(_sample_build, SAMPLE_AVALS)))
    """)
    here = str(Path(__file__).parent)
    texts = []
    for hash_seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        out = subprocess.run([sys.executable, "-c", script, here], env=env, check=True,
                             capture_output=True, text=True)
        texts.append(out.stdout)
    assert texts[0] == texts[1] == to_stablehlo(program_of(_sample_build, SAMPLE_AVALS))


def test_text_is_readable() -> None:
    text = to_stablehlo(program_of(_sample_build, SAMPLE_AVALS))
    lines = text.splitlines()
    assert lines[0] == "module @tidu {"
    assert lines[1].startswith(
        "  func.func public @main(%s0: tensor<2x2xf64>, %s1: tensor<3xcomplex<f64>>)")
    assert all(line.count(" = stablehlo.") <= 1 for line in lines)
    verify_stablehlo(text)


# --- errors ---------------------------------------------------------------------------

BROKEN = """module @m {
  func.func public @main(%a: tensor<2xf64>) -> tensor<2xf64> {
    %b = stablehlo.addd %a, %a : tensor<2xf64>
    return %b : tensor<2xf64>
  }
}
"""


@pytest.mark.parametrize("check_text", [verify_stablehlo, compile_text], ids=["verify", "compile"])
def test_parse_errors_show_the_first_real_line(check_text) -> None:
    with pytest.raises(StableHLOError) as info:
        check_text(BROKEN)
    msg = str(info.value)
    assert "line 3:" in msg and "stablehlo.addd" in msg and "unknown" in msg
    assert "forward incompatibility" not in msg
    assert info.value.line == 3


def test_xla_compile_errors_show_the_first_real_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the parse-only check, XLA's own message is reduced to its first line."""
    import tidu.lowering.xla as xla

    monkeypatch.setattr(xla, "verify_stablehlo", lambda text: None)
    with pytest.raises(StableHLOError) as info:
        compile_text(BROKEN)
    assert str(info.value).startswith("StableHLO rejected: line 3:10: custom op 'stablehlo.addd'")
    assert "forward incompatibility" not in str(info.value)


def test_verifier_errors_are_reported() -> None:
    text = (BROKEN.replace("tensor<2xf64> {", "tensor<3xf64> {")
            .replace("return %b : tensor<2xf64>", "return %b : tensor<3xf64>")
            .replace("stablehlo.addd %a, %a : tensor<2xf64>",
                     "stablehlo.add %a, %a : (tensor<2xf64>, tensor<2xf64>) -> tensor<3xf64>"))
    with pytest.raises(StableHLOError, match="line 3:10: 'stablehlo.add' op requires the same"):
        verify_stablehlo(text)


@without_jax
def test_missing_jax_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ["jax", *[m for m in sys.modules if m.startswith("jax.")]]:
        monkeypatch.setitem(sys.modules, name, None)  # "import jax" now fails
    program = program_of(lambda b, x: [op(b, "neg", x)], [Aval((), "float64")])
    with pytest.raises(ImportError, match=r"pip install 'tidu\[xla\]'") as info:
        program.run([1.0], backend="xla")
    assert isinstance(info.value, XlaUnavailableError)


# --- derivative programs --------------------------------------------------------------


def gradient_program(build, avals: list[Aval], simplify: bool) -> Program:
    """The reverse-mode derivative (linearize, then linear_transpose) of ``build``:
    inputs are the primal inputs and one cotangent seed per output."""
    b = FragmentBuilder()
    refs = [b.input(f"x{i}", a) for i, a in enumerate(avals)]
    outputs = [b.output(r) for r in build(b, *refs)]
    lin = linearize(resolve([b.build()]), outputs, [b.key_of(r) for r in refs])
    tr = linear_transpose(lin)
    keys = [k for k in tr.output_keys if k is not None]
    graph = materialize_merge(resolve([tr.fragment]), keys, simplify=simplify)
    return compile(graph)


# four seeds per dtype and mode in the default run, eight in the slow step
@pytest.mark.parametrize("simplify", [False, True], ids=["plain", "simplified"])
@pytest.mark.parametrize("seed", [s if s < 4 else pytest.param(s, marks=pytest.mark.slow) for s in range(8)])
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_gradients_of_random_graphs(dtype: str, seed: int, simplify: bool) -> None:
    """AD output (conj, transposed broadcasts, reductions and dots) runs the same on XLA."""
    rng = np.random.default_rng([SEED, seed, 1])
    build, avals = random_graph(rng, dtype, int(rng.integers(6, 20)))
    program = gradient_program(build, avals, simplify)
    inputs = [draw(rng, program.slot_avals[s]) for s in program.input_slots]
    got, want = run_both(program, inputs)
    scale = max([float(np.max(np.abs(w), initial=0.0)) for w in want] + [1.0])
    assert_matches(got, want, program, scale=scale)


# --- platforms ------------------------------------------------------------------------


def _logdet_cholesky_program() -> Program:
    import tidu
    import tidu.numpy as tnp

    def f(a):
        return 2.0 * tnp.sum(tnp.log(tnp.diagonal(tnp.linalg.cholesky(a))))

    return tidu.compile(tidu.make_graph(tidu.grad(f))(np.eye(4) * 2.0 + 0.1).graph)


def test_gpu_modules_call_the_platform_solver_and_verify() -> None:
    """On CUDA, Cholesky is the vendor's solver as JAX lowers it (a private function of
    the module); the module parses and verifies without a GPU, and is deterministic."""
    program = _logdet_cholesky_program()
    text = to_stablehlo(program, "cuda")
    assert "stablehlo.cholesky" not in text and "@cusolver_potrf_ffi" in text
    assert re.search(r"func\.call @tidu_cholesky_cuda_\w+main\(", text)
    verify_stablehlo(text)
    assert to_stablehlo(program, "cuda") == text
    cpu = to_stablehlo(program)  # the CPU calls LAPACK's potrf and BLAS's trsm, as JAX there
    assert "stablehlo.cholesky" not in cpu and "@lapack_dpotrf_ffi" in cpu and "@lapack_dtrsm_ffi" in cpu
    assert "stablehlo.triangular_solve" not in cpu


@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128"])
def test_cpu_cholesky_and_triangular_solves_call_lapack_and_match_numpy(dtype: str) -> None:
    """potrf and trsm on the CPU, batched, every triangular_solve flag: the values of the
    NumPy evaluation, and nan for exactly the matrices that are not positive definite."""
    import tidu
    import tidu.numpy as tnp

    rng = np.random.default_rng(SEED)
    a = rng.normal(size=(3, 4, 4)) + (1j * rng.normal(size=(3, 4, 4)) if dtype == "complex128" else 0)
    spd = a @ np.conj(np.swapaxes(a, -1, -2)) + 4 * np.eye(4)
    spd[1] = np.diag([1.0, -1.0, 2.0, 3.0])  # not positive definite: nan for this matrix only
    b = rng.normal(size=(3, 4, 2)).astype(dtype)
    spd = spd.astype(dtype)

    def f(s: Any, b: Any) -> Any:
        l_ = tnp.linalg.cholesky(s)
        outs = [l_]
        for lower in (True, False):
            t = l_ if lower else tnp.conj(tnp.swapaxes(l_, -1, -2))
            for unit in (False, True):
                outs.append(tnp.linalg.triangular_solve(t, b, left_side=True, lower=lower, unit_diagonal=unit))
        return outs

    program = tidu.compile(tidu.make_graph(f)(spd, b).graph)
    text = to_stablehlo(program)
    prefix = {"float64": "d", "float32": "s", "complex128": "z"}[dtype]
    assert f"@lapack_{prefix}potrf_ffi" in text and f"@lapack_{prefix}trsm_ffi" in text
    got, want = program.run([spd, b], backend="xla"), program.eval([spd, b])
    tol = 1e-4 if dtype == "float32" else 1e-11
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g[[0, 2]], w[[0, 2]], rtol=tol, atol=tol)
    # the failed factor is nan, and so is every solve with it that reads its diagonal (a
    # unit-diagonal solve never reads it: trsm gives a finite first row there, rightly)
    assert np.isnan(got[0][1][np.tril_indices(4)]).all() and not np.isnan(got[0][[0, 2]]).any()
    for k in (1, 3):  # the non-unit solves, lower and upper
        assert np.isnan(got[k][1]).all()


def test_platform_kernels_run_where_they_are_lowered() -> None:
    """The splicing itself, run on the CPU: JAX's CPU kernel called from a module."""
    from tidu.lowering.platform_kernels import kernel

    aval = Aval((3, 3), "float64")
    symbol, functions = kernel("cholesky", "cpu", (aval,))
    text = "\n".join([
        "module @tidu {",
        "  func.func public @main(%a: tensor<3x3xf64>) -> tensor<3x3xf64> {",
        f"    %l = func.call @{symbol}(%a) : (tensor<3x3xf64>) -> tensor<3x3xf64>",
        "    return %l : tensor<3x3xf64>",
        "  }",
        functions,
        "}",
    ])
    import jax

    exe, device = compile_text(text)
    a = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
    with jax.enable_x64(True):
        (got,) = exe.execute([jax.device_put(a, device)])
    assert np.allclose(np.asarray(got), np.linalg.cholesky(a), rtol=1e-14, atol=1e-15)


def _linalg_cases() -> dict[str, tuple]:
    import tidu
    import tidu.numpy as tnp

    rng = np.random.default_rng(SEED)
    a, b, tall = rng.normal(size=(4, 4)), rng.normal(size=(4, 2)), rng.normal(size=(5, 3))
    spd = a @ a.T + 4 * np.eye(4)
    c = a + 1j * rng.normal(size=(4, 4))
    return {
        "slogdet": (lambda a: tnp.linalg.slogdet(a)[1] + tnp.linalg.slogdet(a)[0], [a]),
        "solve": (lambda a, b: tnp.linalg.solve(a, b), [a, b]),
        "eigh": (lambda s: tnp.linalg.eigh(s)[1] * tnp.linalg.eigh(s)[0], [spd]),
        "qr": (lambda t: tnp.linalg.qr(t)[0] @ tnp.linalg.qr(t)[1], [tall]),
        "svd": (lambda t: tnp.linalg.svd(t, full_matrices=False)[0] * tnp.linalg.svd(t, full_matrices=False)[1],
                [tall]),
        "pinv": (lambda t: tnp.linalg.pinv(t), [tall]),
        "grad slogdet": (tidu.grad(lambda a: tnp.linalg.slogdet(a)[1]), [a]),
        "complex det and eigh": (lambda c: tnp.linalg.det(c) * tnp.abs(tnp.linalg.eigh(c @ tnp.conj(c.T))[1]), [c]),
    }


FAST_LINALG = ("slogdet", "eigh", "svd")


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in FAST_LINALG else pytest.mark.slow)
                                  for n in _linalg_cases()])
def test_linear_algebra_through_the_platform_kernels(name: str) -> None:
    """LU, QR, eigh and SVD as JAX lowers them (what a GPU module calls: cuSOLVER there),
    run here through JAX's CPU kernels: the same values as tidu's own LAPACK calls."""
    import jax

    import tidu

    f, args = _linalg_cases()[name]
    program = tidu.compile(tidu.make_graph(f)(*args).graph)
    text = to_stablehlo(program, "cpu", jax_kernels=True)
    assert "@lapack_" not in text.split("func.func private")[0]
    exe, device = compile_text(text)
    with jax.enable_x64(True):
        got = exe.execute([jax.device_put(a, device) for a in args])
    for g, want in zip(got, program.eval(args), strict=True):
        np.testing.assert_allclose(np.asarray(g), want, rtol=1e-10, atol=1e-12)
    cuda = to_stablehlo(program, "cuda")
    assert "@lapack_" not in cuda and "@cusolver" in cuda
    verify_stablehlo(cuda)


@without_jax
def test_lapack_ops_without_platform_kernels_are_refused_off_the_cpu() -> None:
    import tidu
    import tidu.numpy as tnp

    program = tidu.compile(tidu.make_graph(lambda a: tnp.linalg.slogdet(a)[1])(np.eye(3) * 2.0).graph)
    with pytest.raises(LoweringError, match=r"logabsdet has no StableHLO lowering for tpu .*getrf.*device='cpu'"):
        to_stablehlo(program, "tpu", jax_kernels=False)
    with pytest.raises(ValueError, match="unknown platform"):
        to_stablehlo(program, "metal")


def test_run_on_a_named_device_and_jit_with_a_device() -> None:
    import jax

    import tidu
    import tidu.numpy as tnp

    program = _logdet_cholesky_program()
    a = np.eye(4) * 2.0 + 0.1
    want = program.eval([a])[0]
    for device in ("cpu", "cpu:0", jax.devices("cpu")[0]):
        got = program.run([a], backend="xla", device=device)[0]
        np.testing.assert_allclose(got, want, rtol=1e-13)
    with pytest.raises(ValueError, match=r"unknown device 'metal'"):
        program.run([a], backend="xla", device="metal")
    with pytest.raises(ValueError, match=r"device='cpu:7': JAX has 1 cpu device"):
        program.run([a], backend="xla", device="cpu:7")
    with pytest.raises(TypeError, match="device must be a jax.Device or a name"):
        program.run([a], backend="xla", device=3)
    with pytest.raises(ValueError, match="backend='numpy' runs on the CPU"):
        program.run([a], device="gpu")
    if jax.devices("cpu") == jax.devices():  # no accelerator here: asking for one is refused clearly
        with pytest.raises(ValueError, match=r"no gpu device for device='gpu'"):
            program.run([a], backend="xla", device="gpu")

    def f(x, y):
        return tnp.sin(x) * y, {"s": tnp.sum(x)}

    x = np.arange(3.0)
    on_cpu, plain = tidu.jit(f, device="cpu")(x, 2.0), tidu.jit(f)(x, 2.0)
    np.testing.assert_allclose(on_cpu[0], plain[0], rtol=1e-15)
    np.testing.assert_allclose(on_cpu[1]["s"], plain[1]["s"], rtol=1e-15)


@without_jax
@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128", "complex64", "int32", "bool"])
def test_identity_literals_are_their_array_without_making_it(dtype: str) -> None:
    """A basis (Literal.identity) hashes and compares as np.eye(n).reshape(shape), pickles,
    and StableHLO builds it from its structure: the n x n array is never made."""
    import pickle

    import tidu
    import tidu.numpy as tnp
    from tidu.core.keys import Literal

    for n, shape in [(80, (80, 80)), (72, (72, 8, 9))]:
        lazy, again = Literal.identity(n, shape, dtype), Literal.identity(n, shape, dtype)
        assert lazy == again and hash(lazy) == hash(again) and lazy.identity_size == n
        dense = Literal(np.eye(n, dtype=dtype).reshape(shape))
        assert hash(lazy) == hash(dense) and lazy == dense and dense == lazy
        assert pickle.loads(pickle.dumps(again)) == dense and repr(lazy) == repr(dense)
    x = np.linspace(-1.0, 1.0, 100)
    view = tidu.make_graph(tidu.hessian(lambda v: tnp.sum(v[1:] * v[:-1] ** 2)))(x)
    (basis,) = [nd.attrs["value"] for nd in view.graph.nodes if nd.op == "constant" and nd.aval.size == 10_000]
    assert basis.identity_size == 100
    text = view.to_stablehlo()
    assert basis._array is None and len(text) < 5000  # never made, and the text is O(1) in n
