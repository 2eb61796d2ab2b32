"""NumPy semantics and lowering: every primitive through the real pipeline
(FragmentBuilder -> resolve -> materialize_merge -> compile -> eval), checked against
independent expressions; the generated source against the reference interpreter."""

from __future__ import annotations

import cmath
import itertools
import math
import operator

import numpy as np
import pytest
from tidu.lowering import numpy as lowering_numpy
from tidu.lowering.compile import InputError, Program, compile
from tidu.lowering.numpy import interpret, numpy_source, ready_call, run_numpy

import tidu
import tidu.numpy as tnp
from tidu import lax
from tidu.core.keys import Attrs, Aval, Literal
from tidu.ops import control
from tidu.ops import reference as semantics
from tidu.ops.catalog import catalog
from tidu.simplify.materialize import materialize_merge
from tidu.trace.fragments import FragmentBuilder
from tidu.trace.resolve import resolve

RNG = np.random.default_rng(20240607)
FLOATS = ("float32", "float64")
INEXACT = ("float32", "float64", "complex64", "complex128")
SHAPES = ((), (2, 3))


# --- helpers ----------------------------------------------------------------------


def program_of(op: str, avals: list[Aval], attrs: dict | None = None) -> Program:
    """A one-op program built through the real pipeline; inputs are x0, x1, ..."""
    b = FragmentBuilder()
    refs = [b.input(f"x{i}", a) for i, a in enumerate(avals)]
    (out,) = b.add_op(op, refs, attrs)
    b.output(out)
    frag = b.build()
    names = [f"x{i}" for i in range(len(avals))]
    graph = materialize_merge(resolve(frag), frag.outputs, inputs=names, simplify=False)
    return compile(graph, cache=False)


def assert_same_bits(a: np.ndarray, b: np.ndarray) -> None:
    assert type(a) is np.ndarray and type(b) is np.ndarray
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes(), f"{a!r} != {b!r} bitwise"


def run(op: str, args: list, attrs: dict | None = None) -> np.ndarray:
    """Evaluate ``op(*args)`` through a compiled program; checks that the generated
    source and the interpreter agree bit for bit and that the result has the declared
    aval."""
    args = [np.asarray(a) for a in args]
    avals = [Aval(a.shape, a.dtype.name) for a in args]
    prog = program_of(op, avals, attrs)
    (got,) = prog.eval({f"x{i}": a for i, a in enumerate(args)})
    (ref,) = interpret(prog, prog.bind_inputs(args))
    assert_same_bits(got, ref)
    (want,) = catalog()[op].infer(avals, Attrs(attrs or {}))
    assert got.dtype.name == want.dtype and got.shape == want.shape
    assert_same_bits(semantics.evaluate(op, args, Attrs(attrs or {})), got)
    return got


def sample(shape: tuple[int, ...], dtype: str, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    if dtype == "bool":
        return np.asarray(RNG.random(shape) < 0.5)
    if dtype.startswith("int"):
        return np.asarray(RNG.integers(-5, 6, shape)).astype(dtype)
    x = RNG.uniform(low, high, shape)
    if dtype.startswith("complex"):
        x = x + 1j * RNG.uniform(low, high, shape)
    return np.asarray(x).astype(dtype)


def pointwise(fn, *arrays: np.ndarray, dtype: str) -> np.ndarray:
    """``fn`` on Python scalars, element by element (an independent reference)."""
    out = np.empty(np.shape(arrays[0]), dtype)
    for idx in np.ndindex(out.shape):
        out[idx] = fn(*(a[idx].item() for a in arrays))
    return out


def assert_close(got: np.ndarray, want: np.ndarray, ulps: float = 8) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    eps = np.finfo(got.dtype).eps
    np.testing.assert_allclose(got, want, rtol=ulps * eps, atol=ulps * eps)


# --- elementwise --------------------------------------------------------------------

EXACT_BINARY = {"add": operator.add, "sub": operator.sub, "mul": operator.mul}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["int32", *INEXACT])
@pytest.mark.parametrize("op", sorted(EXACT_BINARY))
def test_exact_arithmetic(op: str, dtype: str, shape: tuple[int, ...]) -> None:
    x, y = sample(shape, dtype), sample(shape, dtype)
    want = pointwise(EXACT_BINARY[op], x, y, dtype=dtype)
    if dtype.startswith("complex"):
        assert_close(run(op, [x, y]), want, ulps=2)  # complex mul may round its products once
    else:
        np.testing.assert_array_equal(run(op, [x, y]), want)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", INEXACT)
def test_div_and_pow(dtype: str, shape: tuple[int, ...]) -> None:
    x, y = sample(shape, dtype, 0.5, 2.0), sample(shape, dtype, 0.5, 2.0)
    assert_close(run("div", [x, y]), pointwise(operator.truediv, x, y, dtype=dtype), ulps=4)
    assert_close(run("pow", [x, y]), pointwise(operator.pow, x, y, dtype=dtype), ulps=16)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["int64", *INEXACT])
def test_neg_abs_conj_real(dtype: str, shape: tuple[int, ...]) -> None:
    x = sample(shape, dtype)
    np.testing.assert_array_equal(run("neg", [x]), pointwise(operator.neg, x, dtype=dtype))
    real = "float32" if dtype == "complex64" else "float64" if dtype == "complex128" else dtype
    want_abs = pointwise(abs, x, dtype=real)
    if real != dtype:
        assert_close(run("abs", [x]), want_abs, ulps=2)  # the modulus rounds
    else:
        np.testing.assert_array_equal(run("abs", [x]), want_abs)
    conj = pointwise(lambda v: v.conjugate(), x, dtype=dtype)
    np.testing.assert_array_equal(run("conj", [x]), conj)
    np.testing.assert_array_equal(run("real", [x]), pointwise(lambda v: v.real, x, dtype=real))


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_imag_and_complex(dtype: str) -> None:
    z = sample((2, 3), dtype)
    real = "float32" if dtype == "complex64" else "float64"
    im = run("imag", [z])
    np.testing.assert_array_equal(im, pointwise(lambda v: v.imag, z, dtype=real))
    re = run("real", [z])
    assert_same_bits(run("complex", [re, im]), z)
    # no arithmetic: an infinite real part keeps a zero imaginary part (inf * 1j would be nan)
    inf = run("complex", [np.asarray(np.inf, real), np.asarray(-0.0, real)])
    assert inf.dtype == np.dtype(dtype) and inf.real == np.inf and inf.imag == 0
    assert math.copysign(1.0, inf.imag) == -1.0


@pytest.mark.parametrize("dtype", ["int32", *INEXACT])
def test_sign(dtype: str) -> None:
    x = sample((7,), dtype)
    x[0] = 0
    def ref(v):
        return 0 if v == 0 else v / abs(v) if isinstance(v, complex) else math.copysign(1, v)

    got, want = run("sign", [x]), pointwise(ref, x, dtype=dtype)
    if dtype.startswith("complex"):
        assert_close(got, want, ulps=2)
    else:
        np.testing.assert_array_equal(got, want)
    assert got[0] == 0
    assert np.isnan(run("sign", [np.asarray(np.nan, "float64")]))


REAL_UNARY = {
    "exp": math.exp, "log": math.log, "expm1": math.expm1, "log1p": math.log1p,
    "sin": math.sin, "cos": math.cos, "tanh": math.tanh, "sqrt": math.sqrt,
    "rsqrt": lambda v: 1 / math.sqrt(v),
}
COMPLEX_UNARY = {
    "exp": cmath.exp, "log": cmath.log, "sin": cmath.sin, "cos": cmath.cos,
    "tanh": cmath.tanh, "sqrt": cmath.sqrt, "rsqrt": lambda v: 1 / cmath.sqrt(v),
    # samples stay away from 0, so the plain formulas lose only a few ulps
    "expm1": lambda v: cmath.exp(v) - 1, "log1p": lambda v: cmath.log(1 + v),
}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", INEXACT)
@pytest.mark.parametrize("op", sorted(REAL_UNARY))
def test_transcendental(op: str, dtype: str, shape: tuple[int, ...]) -> None:
    x = sample(shape, dtype, 0.1, 1.5)
    table = COMPLEX_UNARY if dtype.startswith("complex") else REAL_UNARY
    want = pointwise(table[op], x, dtype=dtype)
    assert_close(run(op, [x]), want, ulps=16 if op in ("expm1", "log1p") else 8)


@pytest.mark.parametrize("dtype", ["bool", "int32", "float32", "float64"])
def test_compare_every_direction(dtype: str) -> None:
    x, y = sample((8,), dtype), sample((8,), dtype)
    y[:3] = x[:3]  # ties
    fns = {"EQ": operator.eq, "NE": operator.ne, "LT": operator.lt,
           "LE": operator.le, "GT": operator.gt, "GE": operator.ge}
    for direction, fn in fns.items():
        got = run("compare", [x, y], {"direction": direction})
        np.testing.assert_array_equal(got, pointwise(fn, x, y, dtype="bool"))
        scalar = run("compare", [x[0], y[0]], {"direction": direction})
        assert scalar.shape == () and bool(scalar) == fn(x[0].item(), y[0].item())


def test_compare_complex_and_nan() -> None:
    z = np.array([1 + 2j, 1 - 2j, np.nan])
    w = np.array([1 + 2j, 1 + 2j, np.nan])
    np.testing.assert_array_equal(run("compare", [z, w], {"direction": "EQ"}), [True, False, False])
    np.testing.assert_array_equal(run("compare", [z, w], {"direction": "NE"}), [False, True, True])


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["bool", "int32", *INEXACT])
def test_select(dtype: str, shape: tuple[int, ...]) -> None:
    p, a, b = sample(shape, "bool"), sample(shape, dtype), sample(shape, dtype)
    want = pointwise(lambda c, u, v: u if c else v, p, a, b, dtype=dtype)
    assert_same_bits(run("select", [p, a, b]), want)
    assert_same_bits(run("select", [np.asarray(True), a[()] if a.ndim == 0 else a[0, 0],
                                     b[()] if b.ndim == 0 else b[0, 0]]),
                     np.asarray(a[()] if a.ndim == 0 else a[0, 0]))


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64"])
def test_maximum_minimum_propagate_nan(dtype: str) -> None:
    x, y = sample((6,), dtype), sample((6,), dtype)
    if dtype.startswith("float"):
        x[0], y[1] = np.nan, np.nan

    def ref(pick):
        return lambda u, v: math.nan if u != u or v != v else pick(u, v)
    np.testing.assert_array_equal(run("maximum", [x, y]), pointwise(ref(max), x, y, dtype=dtype))
    np.testing.assert_array_equal(run("minimum", [x, y]), pointwise(ref(min), x, y, dtype=dtype))


@pytest.mark.filterwarnings("error")
def test_nan_and_inf_are_values_not_warnings() -> None:
    zero, one = np.asarray(0.0), np.asarray(1.0)
    assert run("log", [zero]) == -np.inf
    assert np.isnan(run("div", [zero, zero]))
    assert run("div", [one, zero]) == np.inf
    assert run("exp", [np.asarray(1000.0)]) == np.inf
    assert run("mul", [np.asarray(1e300), np.asarray(1e300)]) == np.inf
    assert np.isnan(run("sqrt", [np.asarray(-1.0, "float32")]))
    assert run("rsqrt", [np.asarray(0.0, "float32")]) == np.inf


# --- structural ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bool", "int32", *INEXACT])
def test_constant(dtype: str) -> None:
    for value in (sample((), dtype), sample((2, 3), dtype)):
        b = FragmentBuilder()
        b.output(b.constant(value))
        frag = b.build()
        prog = compile(materialize_merge(resolve(frag), frag.outputs, simplify=False), cache=False)
        (got,) = prog.eval({})
        assert_same_bits(got, value)
        assert got.flags.writeable  # a fresh array, not the read-only literal
        got[...] = value  # and writing to it does not change the program
        assert_same_bits(prog.eval({})[0], value)


@pytest.mark.parametrize(("src", "dst", "value", "want"), [
    ("float64", "float32", 0.1, np.float32(0.1)),
    ("float32", "float64", np.float32(0.1), np.float64(np.float32(0.1))),
    ("float64", "int32", -2.7, -2),
    ("float64", "bool", 0.5, True),
    ("int32", "float32", 7, 7.0),
    ("float64", "complex128", 1.5, 1.5 + 0j),
    ("complex128", "complex64", 1.5 - 2j, np.complex64(1.5 - 2j)),
    ("bool", "float64", True, 1.0),
])
def test_convert(src: str, dst: str, value, want) -> None:
    for shape in SHAPES:
        x = np.full(shape, value, dtype=src)
        got = run("convert", [x], {"dtype": dst})
        assert got.dtype == np.dtype(dst)
        np.testing.assert_array_equal(got, np.full(shape, want, dtype=dst))


def test_convert_complex_to_real_keeps_real_part() -> None:
    # The catalog's type rule asks for `real` instead; the semantics still define it.
    got = semantics.evaluate("convert", [np.array([1.5 + 2j, -3 - 1j])], Attrs(dtype="float32"))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [1.5, -3.0])


def loop_broadcast(x: np.ndarray, shape: tuple[int, ...], dims: tuple[int, ...]) -> np.ndarray:
    out = np.empty(shape, x.dtype)
    for idx in np.ndindex(shape):
        out[idx] = x[tuple(0 if x.shape[i] == 1 else idx[d] for i, d in enumerate(dims))]
    return out


@pytest.mark.parametrize(("xshape", "shape", "dims"), [
    ((), (2, 3), ()),
    ((3,), (2, 3), (1,)),
    ((2,), (2, 3), (0,)),
    ((2, 1), (2, 4, 3), (0, 2)),
    ((1, 3), (4, 3), (0, 1)),
    ((2, 3), (2, 3), (0, 1)),
])
@pytest.mark.parametrize("dtype", ["int32", "float32", "complex128"])
def test_broadcast_in_dim(dtype: str, xshape, shape, dims) -> None:
    x = sample(xshape, dtype)
    got = run("broadcast_in_dim", [x], {"shape": shape, "dims": dims})
    assert_same_bits(got, loop_broadcast(x, shape, dims))


@pytest.mark.parametrize("dtype", ["float32", "complex128"])
def test_reshape_and_transpose(dtype: str) -> None:
    x = sample((2, 3, 4), dtype)
    flat = [v for v in x.ravel()]
    got = run("reshape", [x], {"shape": (4, 6)})
    assert [v for v in got.ravel()] == flat and got.shape == (4, 6)
    assert_same_bits(run("reshape", [x[:1, :1, :1]], {"shape": ()}), np.asarray(x[0, 0, 0]))
    perm = (2, 0, 1)
    got = run("transpose", [x], {"perm": perm})
    assert got.shape == (4, 2, 3)
    for i, j, k in itertools.product(range(4), range(2), range(3)):
        assert got[i, j, k] == x[j, k, i]


@pytest.mark.parametrize("dtype", ["int32", "float64", "complex128"])
def test_reductions(dtype: str) -> None:
    x = sample((2, 3, 4), dtype)
    for axes in [(), (0,), (1, 2), (0, 1, 2), (2, 0)]:
        kept = [i for i in range(3) if i not in axes]
        shape = tuple(x.shape[i] for i in kept)
        sums, prods = np.zeros(shape, dtype), np.ones(shape, dtype)
        maxes = np.full(shape, -np.inf if dtype == "float64" else np.iinfo(np.int32).min,
                        dtype) if dtype != "complex128" else None
        for idx in np.ndindex(x.shape):
            out = tuple(idx[i] for i in kept)
            sums[out] += x[idx]
            with np.errstate(over="ignore"):  # int32 products wrap around, as reduce_prod's do
                prods[out] *= x[idx]
            if maxes is not None:
                maxes[out] = max(maxes[out], x[idx])
        got = run("reduce_sum", [x], {"axes": axes})
        assert got.dtype == x.dtype
        np.testing.assert_allclose(got, sums, rtol=1e-13)
        np.testing.assert_allclose(run("reduce_prod", [x], {"axes": axes}), prods, rtol=1e-13)
        if maxes is not None:
            np.testing.assert_array_equal(run("reduce_max", [x], {"axes": axes}), maxes)
    assert_same_bits(run("reduce_sum", [x], {"axes": ()}), x)


def test_reduce_float32_stays_float32_and_empty_max_is_lowest() -> None:
    x = np.full((3, 5), 0.1, np.float32)
    got = run("reduce_sum", [x], {"axes": (0, 1)})
    assert got.dtype == np.float32 and got.shape == ()
    assert abs(float(got) - 1.5) < 1e-6
    empty = run("reduce_max", [np.zeros((0, 2), np.float32)], {"axes": (0,)})
    np.testing.assert_array_equal(empty, np.full(2, -np.inf, np.float32))
    ints = run("reduce_max", [np.zeros((2, 0), np.int32)], {"axes": (1,)})
    np.testing.assert_array_equal(ints, np.full(2, np.iinfo(np.int32).min, np.int32))
    assert run("reduce_max", [np.array([1.0, np.nan, 3.0])], {"axes": (0,)}) != 0  # nan
    assert np.isnan(run("reduce_max", [np.array([1.0, np.nan, 3.0])], {"axes": (0,)}))


def dims(lc=(), rc=(), lb=(), rb=()) -> dict:
    return dict(lhs_contract=lc, rhs_contract=rc, lhs_batch=lb, rhs_batch=rb)


DOT_CASES = [  # lhs shape, rhs shape, attrs, einsum reference
    ((2, 3), (3, 4), dims((1,), (0,)), "ik,kj->ij"),
    ((3,), (3,), dims((0,), (0,)), "k,k->"),
    ((2, 3), (4,), dims(), "ij,k->ijk"),
    ((2, 3, 4), (2, 4, 5), dims((2,), (1,), (0,), (0,)), "bik,bkj->bij"),
    # batch axis last on the lhs, contraction first: result is batch, lhs free, rhs free
    ((4, 3, 2), (5, 2, 4), dims((0,), (2,), (2,), (1,)), "kmb,nbk->bmn"),
    ((2, 3, 4), (4, 3, 5), dims((1, 2), (1, 0)), "ikl,lkj->ij"),
]


@pytest.mark.parametrize(("lshape", "rshape", "attrs", "spec"), DOT_CASES)
@pytest.mark.parametrize("dtype", ["int32", "float32", "float64", "complex128"])
def test_dot_general(dtype: str, lshape, rshape, attrs, spec) -> None:
    lhs, rhs = sample(lshape, dtype), sample(rshape, dtype)
    got = run("dot_general", [lhs, rhs], attrs)
    want = np.einsum(spec, lhs, rhs)  # no conjugation for complex operands
    assert got.dtype == np.dtype(dtype) and got.shape == want.shape
    if dtype.startswith("int"):
        np.testing.assert_array_equal(got, want)
    else:
        # a sum of products is accurate relative to the sum of their magnitudes
        tol = 1e-5 if dtype == "float32" else 1e-13
        scale = np.einsum(spec, np.abs(lhs).astype("float64"), np.abs(rhs).astype("float64"))
        np.testing.assert_array_less(np.abs(got - want), tol * scale + 1e-300)


@pytest.mark.parametrize("dtype", ["bool", "float32", "complex128"])
def test_slice(dtype: str) -> None:
    x = sample((5, 7), dtype)
    got = run("slice", [x], {"start": (1, 0), "limit": (5, 7), "strides": (2, 3)})
    rows = x.tolist()[1:5:2]
    assert got.tolist() == [r[0:7:3] for r in rows]
    empty = run("slice", [x], {"start": (2, 2), "limit": (2, 7), "strides": (1, 1)})
    assert empty.shape == (0, 5)
    s = sample((), dtype)
    assert_same_bits(run("slice", [s], {"start": (), "limit": (), "strides": ()}), s)


@pytest.mark.parametrize("dtype", ["int32", "float64", "complex128"])
def test_pad(dtype: str) -> None:
    x = sample((2, 3), dtype)
    v = sample((), dtype)
    low, high, interior = (1, 0), (2, 1), (1, 2)
    got = run("pad", [x, v], {"low": low, "high": high, "interior": interior})
    shape = (1 + 2 + 1 + 2, 0 + 3 + 2 * 2 + 1)
    want = np.full(shape, v, dtype)
    for i, j in np.ndindex(x.shape):
        want[low[0] + i * (interior[0] + 1), low[1] + j * (interior[1] + 1)] = x[i, j]
    assert_same_bits(got, want)
    # negative edge padding crops (StableHLO)
    cropped = run("pad", [x, v], {"low": (-1, 0), "high": (0, -2), "interior": (0, 0)})
    assert_same_bits(cropped, x[1:, :1].copy())
    # an empty axis gets only its edge padding
    attrs = {"low": (1, 0), "high": (1, 0), "interior": (3, 0)}
    e = run("pad", [np.zeros((0, 2), dtype), v], attrs)
    assert_same_bits(e, np.full((2, 2), v, dtype))


@pytest.mark.parametrize("dtype", ["bool", "float32", "complex128"])
def test_concatenate(dtype: str) -> None:
    a, b, c = sample((2, 1), dtype), sample((2, 3), dtype), sample((2, 2), dtype)
    got = run("concatenate", [a, b, c], {"axis": 1})
    rows = zip(a.tolist(), b.tolist(), c.tolist(), strict=True)
    assert got.tolist() == [ra + rb + rc for ra, rb, rc in rows]
    got0 = run("concatenate", [b, b], {"axis": 0})
    assert got0.tolist() == b.tolist() + b.tolist()
    assert_same_bits(run("concatenate", [b], {"axis": 0}), b)


def test_semantics_cover_the_catalog_with_declared_dtypes() -> None:
    for op in catalog():  # every primitive runs: the kernel its rule block names
        assert callable(semantics.impl_of(op))
    with pytest.raises(KeyError, match="no NumPy semantics for primitive 'nope'"):
        semantics.evaluate("nope", [], Attrs())
    out = semantics.evaluate("exp", [np.asarray(1.0, np.float32)], Attrs())
    assert type(out) is np.ndarray and out.dtype == np.float32 and out.shape == ()
    lit = semantics.evaluate("constant", [], Attrs(value=Literal(2.0, "float32")))
    assert type(lit) is np.ndarray and lit.dtype == np.float32 and lit == 2


# --- whole programs ------------------------------------------------------------------


def chain(n: int, dtype: str = "float64", shape: tuple[int, ...] = ()) -> Program:
    """x -> n mixed elementwise ops (with y and a constant) -> outputs (last, middle)."""
    b = FragmentBuilder()
    x, y = b.input("x", Aval(shape, dtype)), b.input("y", Aval(shape, dtype))
    c = b.constant(np.full(shape, 0.75, dtype))
    ops = ["mul", "sin", "add", "tanh", "sub", "exp", "div", "cos", "pow", "sqrt", "rsqrt",
           "log1p", "expm1", "neg", "abs", "log", "maximum", "minimum"]
    v, mid = x, None
    for i in range(n):
        op = ops[i % len(ops)]
        if op in ("add", "mul", "sub", "div", "maximum", "minimum"):
            (v,) = b.add_op(op, [v, y if i % 2 else c])
        elif op == "pow":
            (v,) = b.add_op("pow", [b.add_op("abs", [v])[0], c])
        else:
            (v,) = b.add_op(op, [v])
        mid = v if i == n // 2 else mid
    b.output(v)
    b.output(mid)
    frag = b.build()
    inputs = [b.key_of(x), b.key_of(y)]  # keys, not names: y may be unused in short chains
    return compile(materialize_merge(resolve(frag), frag.outputs, inputs=inputs,
                                     simplify=False), cache=False)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_chain_generated_equals_interpreter_and_keeps_dtype(dtype: str, shape) -> None:
    prog = chain(300, dtype, shape)
    x, y = sample(shape, dtype, 0.2, 0.9), sample(shape, dtype, 0.2, 0.9)
    arrays = prog.bind_inputs({"x": x, "y": y})
    got = run_numpy(prog, arrays)
    for g, r in zip(got, interpret(prog, arrays), strict=True):
        assert_same_bits(g, r)
        assert g.dtype == np.dtype(dtype) and g.shape == shape
    assert np.all(np.isfinite(got[0]))
    # Same answer from a float64 replay of the float32 program, to float32 accuracy
    if dtype == "float32":
        wide = chain(300, "float64", shape).eval({"x": x.astype(float), "y": y.astype(float)})
        assert np.all(np.abs(wide[1] - got[1]) < 1e-3)


def test_chain_values_against_plain_python() -> None:
    b = FragmentBuilder()
    x, y = b.input("x", Aval((), "float64")), b.input("y", Aval((), "float64"))
    (e,) = b.add_op("exp", [b.add_op("mul", [x, y])[0]])
    (s,) = b.add_op("add", [e, b.add_op("sin", [x])[0]])
    b.output(s)
    b.output(e)
    frag = b.build()
    prog = compile(materialize_merge(resolve(frag), frag.outputs, simplify=False))
    got = prog.eval({"x": 1.0, "y": 2.0})
    assert got[0] == pytest.approx(math.exp(2.0) + math.sin(1.0), rel=1e-15)
    assert got[1] == pytest.approx(math.exp(2.0), rel=1e-15)
    assert prog.eval([1.0, 2.0])[1] == got[1]  # positional inputs too


def test_generated_source_is_deterministic_and_readable() -> None:
    a, b = chain(12), chain(12)
    assert a is not b and numpy_source(a) == numpy_source(b)
    src = numpy_source(a)
    lines = src.splitlines()
    assert lines[0] == "def program(s0, s1):"
    assert lines[-1].strip().startswith("return (")
    assigned = [ln for ln in lines if ln.lstrip().startswith("s") and " = " in ln
                and "[()]  # rank 0" not in ln]
    assert len(assigned) == len(a.instructions)  # one line per instruction
    assert "np.sin(" in src and "np.tanh(" in src and " * " in src
    # elementwise ops are inlined: no helper calls, no wrappers
    assert "complex_(" not in src and "def " not in "\n".join(lines[1:])


def test_generated_source_small_program_exactly() -> None:
    b = FragmentBuilder()
    x = b.input("x", Aval((2, 3), "float32"))
    y = b.input("y", Aval((), "float32"))
    (e,) = b.add_op("exp", [x])
    (yb,) = b.add_op("broadcast_in_dim", [y], {"shape": (2, 3), "dims": ()})
    (m,) = b.add_op("mul", [e, yb])
    (s,) = b.add_op("reduce_sum", [m], {"axes": (0, 1)})
    (r,) = b.add_op("add", [s, b.constant(2.0, "float32")])
    b.output(r)
    b.output(m)
    frag = b.build()
    prog = compile(materialize_merge(resolve(frag), frag.outputs, simplify=False), cache=False)
    assert numpy_source(prog) == (
        "def program(s0, s1):\n"
        "    # input s0 = x : f32[2,3]\n"
        "    # input s1 = y : f32[]\n"
        "    s1 = s1[()]  # rank 0: a NumPy scalar\n"
        "    s2 = np.exp(s0)  # f32[2,3]\n"
        "    s3 = s1  # f32[2,3], broadcast by its users\n"
        "    s4 = s2 * s3  # f32[2,3]\n"
        "    del s2, s3\n"
        "    s5 = s4.sum(axis=(0, 1), dtype=np.float32)[()]  # f32[]\n"
        "    s6 = c6  # f32[] = 2.0\n"
        "    s7 = s5 + s6  # f32[]\n"
        "    return (s7, s4)\n"
    )
    r, m = prog.eval({"x": np.zeros((2, 3), np.float32), "y": np.float32(3)})
    assert r.dtype == np.float32 and r == 20.0
    np.testing.assert_array_equal(m, np.full((2, 3), 3.0, np.float32))
    assert prog._cache["numpy"].source is prog._cache["numpy"].source  # compiled once


def test_outputs_are_fresh_arrays() -> None:
    b = FragmentBuilder()
    x = b.input("x", Aval((3,), "float64"))
    (same,) = b.add_op("reduce_sum", [x], {"axes": ()})  # identity: the input itself
    (view,) = b.add_op("slice", [x], {"start": (1,), "limit": (3,), "strides": (1,)})
    b.output(same)
    b.output(same)
    b.output(view)
    frag = b.build()
    prog = compile(materialize_merge(resolve(frag), frag.outputs, simplify=False), cache=False)
    xs = np.array([1.0, 2.0, 3.0])
    o1, o2, o3 = prog.run({"x": xs})
    assert not np.shares_memory(o1, xs) and not np.shares_memory(o1, o2)
    assert not np.shares_memory(o3, xs) and o3.flags.writeable
    o1[0] = 99.0
    np.testing.assert_array_equal(xs, [1.0, 2.0, 3.0])


def test_input_errors_are_clear() -> None:
    prog = chain(4)
    with pytest.raises(InputError, match="missing input"):
        prog.eval({"x": 1.0})
    with pytest.raises(InputError, match="unknown input.*z"):
        prog.eval({"x": 1.0, "y": 2.0, "z": 3.0})
    with pytest.raises(InputError, match=r"input x: expected shape \(\), got \(2,\)"):
        prog.eval({"x": [1.0, 2.0], "y": 2.0})
    with pytest.raises(InputError, match="expected dtype float64, got complex128"):
        prog.eval({"x": 1j, "y": 2.0})
    with pytest.raises(InputError, match="expected 2 input"):
        prog.eval([1.0])
    with pytest.raises(InputError, match="takes 2 input array"):
        run_numpy(prog, [np.asarray(1.0)])
    with pytest.raises(InputError, match="takes 2 input array"):
        interpret(prog, [])


def test_large_programs_are_interpreted_until_called_again(monkeypatch) -> None:
    import tidu.lowering.numpy as low

    import tidu
    import tidu.numpy as tnp

    monkeypatch.setattr(low, "LARGE_PROGRAM", 10)
    monkeypatch.setattr(low, "HUGE_PROGRAM", 10_000)

    def f(x):
        for _ in range(8):
            x = tnp.sin(x) * x + tnp.exp(-x)
        return tnp.sum(x)

    prog = tidu.make_graph(tidu.grad(f))(np.linspace(0.1, 1, 5)).program
    assert len(prog.instructions) > 10
    x = [np.linspace(0.1, 1, 5)]
    results = []
    for _ in range(4):
        results.append(run_numpy(prog, x)[0])
        if len(results) < low.CALLS_BEFORE_COMPILING:
            assert "numpy" not in prog._cache  # interpreted: no source compiled yet
    assert "numpy" in prog._cache
    for r in results[1:]:
        assert np.array_equal(r, results[0])  # interpreter and generated source agree bit for bit
    monkeypatch.setattr(low, "HUGE_PROGRAM", 10)
    prog2 = tidu.make_graph(tidu.grad(lambda x: f(x) * 2.0))(np.linspace(0.1, 1, 5)).program
    for _ in range(4):
        run_numpy(prog2, x)
    assert "numpy" not in prog2._cache  # huge: always interpreted


def test_first_calls_run_a_loop_once_over_its_compiled_body(monkeypatch):
    """A program's first calls are interpreted, but a loop runs as the generated source
    runs it: once for all its results (carry and stacked), over the compiled body, with
    the values of the compiled program."""
    runs = []
    run_scan = lowering_numpy.run_scan
    monkeypatch.setattr(lowering_numpy, "run_scan", lambda *a: runs.append(1) or run_scan(*a))

    def f(x):
        carry, ys = lax.scan(lambda c, _: (c ** 1.5 * 1.1, c[0] * c[1]), x, None, length=50)  # a power: not on floats
        return carry, ys

    program = tidu.make_graph(f)(np.array([0.3, 0.7])).program
    x = np.array([0.3, 0.7])
    first = interpret(program, [x])
    assert len(runs) == 1  # one loop for both results
    for _ in range(1 + lowering_numpy.CALLS_BEFORE_COMPILING):
        compiled = run_numpy(program, [x])
    assert ready_call(program) is not None  # the generated source ran
    for a, b in zip(first, compiled, strict=True):
        np.testing.assert_array_equal(a, b)


# --- scans of a few float64 numbers, run on Python floats ---------------------------------


def _scans(fn, *args):
    """Each loop of ``fn``'s graph at ``args``: (attrs without index, its operand values)."""
    made = tidu.make_graph(fn)(*args)
    graph, program = made.graph, made.program
    loops = {}
    for node in graph.nodes:
        if node.op == "scan":
            loops[(control.without_index(node.attrs), node.inputs)] = None
    values = {}
    kernel = lowering_numpy.control_kernel

    def spy(op, attrs, cat):
        fn_ = kernel(op, attrs, cat)

        def run(*operands):
            values[attrs] = operands
            return fn_(*operands)
        return run

    lowering_numpy.control_kernel = spy
    program._cache.clear()  # (its interpreter steps bind the loops' kernels)
    try:
        interpret(program, program.bind_inputs(list(args)))
    finally:
        lowering_numpy.control_kernel = kernel
        program._cache.clear()
    return [(attrs, values[attrs]) for attrs, _ in loops]


def _compiled_scan(attrs):
    fn, args = lowering_numpy.loop_arguments("scan", attrs, lambda b: lowering_numpy.body_function(b, catalog()))

    def run(*operands):
        with np.errstate(all="ignore"):  # (as programs run)
            return fn(*args, *operands)
    return run


def _same_bits(got, want) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes(), (g, w)


SCALAR_CASES = {
    # RK4-like: slices, concatenate, constants, a stacked y
    "rk": (lambda p, x: lax.scan(lambda c, _: (c + 0.1 * tnp.stack([c[1], -p[0] * c[0] - p[1] * c[1] ** 2]),
                                               c[0] * p[1]), x, None, length=40), (np.array([1.3, 0.2]),
                                                                                 np.array([0.8, -0.1]))),
    # xs, reverse, division (by zero too), neg, abs, -0.0, rank-0 carry
    "xs": (lambda a, xs: lax.scan(lambda c, x: ((c[0] * x[0] - tnp.abs(x[1]) / (c[1] - 1.0), -c[1] * -0.0 + x[0]),
                                                (x / c[1], c[0] - 1.0)),
                                  (a, 1.0), xs, reverse=True), (np.float64(0.5), np.array([[1.0, -2.0], [0.5, 3.0],
                                                                                           [-0.25, 0.0]] * 4))),
    # transposes, broadcasts and pads of a matrix carry
    "matrix": (lambda m: lax.scan(lambda c, _: (0.5 * c.T + tnp.pad(c[:1, :], ((0, 1), (0, 0))) - c[0, 0], None),
                                  m, None, length=17)[0], (np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])[:, :2],)),
    # a long chain of terms each read once: written as nested expressions a few levels deep
    "chain": (lambda x: lax.scan(lambda c, _: (_chain(c), c[0]), x, None, length=11), (np.array([0.3, -0.2]),)),
    # one-operand ufuncs on the numbers (NaN-free results): a pendulum's step, and its jacfwd (tangents)
    "ufuncs": (lambda x: lax.scan(lambda c, _: (c + 0.05 * tnp.stack([
        tnp.sin(c[1]) * tnp.cos(c[0]) - tnp.tanh(c[2]), tnp.exp(-c[0] * c[0]) + tnp.log1p(c[1] * c[1]),
        tnp.sqrt(1.0 + c[2] * c[2]) - tnp.expm1(0.1 * c[0]) + tnp.sinh(0.1 * c[1]) - tnp.cosh(0.1 * c[2])
        + tnp.floor(c[0]) * 1e-3 + tnp.sign(c[1]) * 1e-3]), tnp.log(1.0 + c[0] * c[0])), x, None, length=60),
        (np.array([0.3, -1.2, 2.0]),)),
    "pendulum jacfwd": (tidu.jacfwd(lambda p, x: lax.scan(lambda c, _: (c + 0.01 * tnp.stack(
        [c[1], -p[0] * c[1] - p[1] * tnp.sin(c[0])]), None), x, None, length=50)[0], argnums=(0, 1)),
        (np.array([0.3, 9.81]), np.array([1.0, 0.0]))),
}


def _chain(c):
    for k in range(60):
        c = (c * 1.0001 - 0.001 * k) / 1.0001 if k % 7 == 0 else -(c * 1.0001) + 0.25
    return c


@pytest.mark.parametrize("case", sorted(SCALAR_CASES))
def test_scalar_scan_gives_the_compiled_bodys_bits(case: str) -> None:
    """A scan of small float64 values runs on Python floats, with the bits of its compiled
    body (run_scan), in both directions, with xs, ys and divisions by zero."""
    fn, args = SCALAR_CASES[case]
    loops = _scans(fn, *args)
    assert loops
    for attrs, operands in loops:
        scalar = lowering_numpy.scalar_scan(attrs, catalog())
        assert scalar is not None
        with np.errstate(all="ignore"):
            got = scalar(*operands)
        _same_bits(got, _compiled_scan(attrs)(*operands))


def test_scalar_scan_returning_nan_takes_numpys_bits() -> None:
    """Where both operands of an op are NaN, which one is the result depends on the machine
    code: a scan that returns a NaN is run by its compiled body, whose bits are NumPy's."""
    nan, other = (np.array(b, dtype=np.uint64).view(np.float64)[()] for b in (0x7FF8000000000001, 0xFFF8000000000002))

    def f(x):
        return lax.scan(lambda c, _: (tnp.stack([c[0] + c[1], c[1] * c[0]]), c[0] - c[1]), x, None, length=12)

    for x in (np.array([nan, other]), np.array([other, nan]), np.array([np.inf, -np.inf])):
        ((attrs, operands),) = _scans(f, x)
        with np.errstate(all="ignore"):
            got = lowering_numpy.scalar_scan(attrs, catalog())(*operands)
        _same_bits(got, _compiled_scan(attrs)(*operands))


def test_scalar_scan_only_for_small_float64_arithmetic() -> None:
    """Another op (a power: NumPy's scalar and array loops differ in the last bit), another
    dtype, a larger value, or more floats per op than a NumPy call costs: the compiled body
    runs."""
    n = lowering_numpy.SCALAR_PER_OP // lowering_numpy.UFUNC_ON_FLOAT + 1  # sin on n numbers costs more
    cases = [(lambda x: lax.scan(lambda c, _: (c ** 1.5, None), x, None, length=12)[0], np.ones(2)),
             (lambda x: lax.scan(lambda c, _: (c * c, None), x, None, length=12)[0], np.ones(2, np.float32)),
             (lambda x: lax.scan(lambda c, _: (c * c, None), x, None, length=12)[0],
              np.ones(lowering_numpy.SCALAR_SIZE + 1)),
             (lambda x: lax.scan(lambda c, _: (tnp.sin(c), None), x, None, length=12)[0], np.ones(n))]
    for fn, x in cases:
        ((attrs, _),) = _scans(fn, x)
        assert lowering_numpy.scalar_scan(attrs, catalog()) is None


def test_a_broadcast_is_left_to_its_users_only_where_they_broadcast_it() -> None:
    """A broadcast read only by two-operand elementwise ops whose other operand has its
    shape is its operand reshaped (a view) in the source: the users broadcast it. Read by
    a one-operand op, by another broadcast's op, by a product, or returned, it is made."""
    b = FragmentBuilder()
    x = b.input("x", Aval((4, 3), "float64"))
    v = b.input("v", Aval((3,), "float64"))
    w = b.input("w", Aval((4,), "float64"))
    (vb,) = b.add_op("broadcast_in_dim", [v], {"shape": (4, 3), "dims": (1,)})  # by its users
    (wb,) = b.add_op("broadcast_in_dim", [w], {"shape": (4, 3), "dims": (0,)})  # read by tanh: made
    (ub,) = b.add_op("broadcast_in_dim", [w], {"shape": (3, 4), "dims": (1,)})  # read by a product: made
    (m,) = b.add_op("mul", [x, vb])
    (d,) = b.add_op("sub", [vb, m])
    (c,) = b.add_op("maximum", [d, vb])
    (t,) = b.add_op("tanh", [wb])
    (p,) = b.add_op("dot_general", [x, ub], {"lhs_contract": (1,), "rhs_contract": (0,), "lhs_batch": (),
                                              "rhs_batch": ()})
    (o,) = b.add_op("broadcast_in_dim", [v], {"shape": (2, 3), "dims": (1,)})  # returned: made
    for out in (d, c, t, p, o):
        b.output(out)
    frag = b.build()
    prog = compile(materialize_merge(resolve(frag), frag.outputs, simplify=False), cache=False)
    source = numpy_source(prog)
    views = [line for line in source.splitlines() if "broadcast by its users" in line]
    assert len(views) == 1 and ".reshape((1, 3))" in views[0], source
    assert source.count("broadcast_filled(") == 3, source
    args = {"x": RNG.normal(size=(4, 3)), "v": RNG.normal(size=3), "w": RNG.normal(size=4)}
    got = prog.eval(args)
    ref = interpret(prog, prog.bind_inputs(args))
    for g, r in zip(got, ref, strict=True):
        assert_same_bits(g, r)
        assert g.shape == r.shape
