"""The C back end (lowering/c_source.py, lowering/c_build.py): ``Program.to_c``,
``tidu.to_c``, ``Program.run(backend="c")`` and ``tidu lower --to c``.

Values are checked against the NumPy back end (``program.eval``). The fast set compiles
one program that covers most ops (compiling C costs a tenth of a second a program); the
broad matrix of dtypes, axes and transforms is in the slow set.
"""

from __future__ import annotations

import itertools
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from tidu.lowering import c_build
from tidu.lowering.c_source import C_FUNCTIONS, CLoweringError

import tidu
import tidu.numpy as tnp
from tidu.cli import main
from tidu.ops.dsl.parse import CLAUSES, parse_rules

pytestmark = pytest.mark.skipif(c_build.compiler_or_none() is None, reason="no C compiler")


@pytest.fixture(scope="module", autouse=True)
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Compiled programs go to a fresh folder, not the user's cache."""
    folder = tmp_path_factory.mktemp("tidu_c_cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIDU_CACHE_DIR", str(folder))
        yield folder


def program_of(fn, *args):
    return tidu.make_graph(fn)(*args).program


def assert_same(program, args, rtol=1e-13, atol=0.0):
    got = program.run(list(args), backend="c")
    want = program.eval(list(args))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert type(g) is np.ndarray and g.dtype == w.dtype and g.shape == w.shape, (g, w)
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    return got


A = np.linspace(-1.5, 2.0, 12).reshape(3, 4)
B = np.cos(np.arange(20.0)).reshape(4, 5)
K = np.array([3, -4, 5, 0], np.int64)


def many(a, b, k):
    """Elementwise chains, broadcasts, reductions, a matmul, slices, pads, concatenation,
    transposes, reversal, comparisons, selection and conversions, in one program."""
    h = tnp.tanh(a @ b + 0.5) * tnp.exp(-a[:, :1])            # dot_general, broadcasts
    s = tnp.sum(h, axis=0) + tnp.max(h, axis=1).sum() * tnp.prod(a[0])
    p = tnp.pad(a[::-1, 1:3], ((1, 0), (2, 1)))                # reverse, strided slice, pad
    c = tnp.concatenate([a, p[:3, :4].T.T], axis=1)
    w = tnp.where(a > 0, tnp.sqrt(tnp.abs(a)), tnp.maximum(a, -1.0))
    j = k * k - 2 * k + tnp.sum(k)
    return tnp.sum(s ** 2) + tnp.sum(c * c.sum(axis=0)) + tnp.sum(w), c.T, j, (k > 0), w.astype(np.float32)


def test_many_ops_in_one_program() -> None:
    program = program_of(tidu.value_and_grad(lambda a, b: many(a, b, K)[0], argnums=(0, 1)), A, B)
    assert_same(program, [A, B], rtol=1e-12)
    program = program_of(many, A, B, K)
    out = assert_same(program, [A, B, K], rtol=1e-12)
    assert out[2].dtype == np.int64 and out[3].dtype == np.bool_ and out[4].dtype == np.float32
    # the elementwise run of w is one loop: no array per instruction
    text = program.to_c()
    assert text.count("sqrt(") == 1 and "fabs(" in text


def test_large_splat_constants() -> None:
    """A splat constant past the folding size (the dense Hessian's broadcast 100s) is a
    broadcast view: written as one value, and the values are the NumPy back end's."""
    def rosen(x):
        return tnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    x = np.linspace(-1.2, 1.1, 60)
    program = program_of(tidu.hessian(rosen, mode="FoF"), x)
    assert any(ins.op == "constant" and ins.attrs["value"].splat() is not None and ins.attrs["value"].array.size > 1024
               for ins in program.instructions)
    assert_same(program, [x], rtol=1e-12)
    # and in standalone NumPy source (written as np.full)
    namespace: dict = {}
    exec(compile(program.to_numpy_source(standalone=True), "<standalone>", "exec"), namespace)  # tidu's source
    np.testing.assert_array_equal(namespace["run"](x)[0], program.eval([x])[0])


def test_text_is_deterministic_and_documented() -> None:
    def f(x):
        return tnp.sum(tnp.sin(x) * x[::-1]) / 3, x * 0.1
    x = np.linspace(0, 1, 5)
    text = tidu.to_c(f, x)
    assert text == program_of(f, x).to_c() == tidu.to_c(f, x + 1)
    head = text.split("*/")[0]
    assert "int tidu_program(const double *restrict in0, double *restrict out0, double *restrict out1, " \
        "void *work);" in head
    assert "row-major" in head and "in0: input x, f64[5]" in head and "out1: output 1, f64[5]" in head
    # constants are exact: hex floats (0.1 and 1/3 round-trip bit for bit)
    assert float.fromhex("0x1.999999999999ap-4") == 0.1 and "0x1.999999999999ap-4" in text
    assert "#include <complex.h>" not in text  # only for complex programs


def test_disk_cache_is_reused(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    calls = []
    real = c_build._compile
    monkeypatch.setattr(c_build, "_compile", lambda *a: (calls.append(a), real(*a)))

    def f(x):
        return tnp.exp(x) * 7.25
    x = np.linspace(0, 1, 7)
    graph = tidu.make_graph(f)(x).graph
    first = tidu.compile(graph, cache=False)
    np.testing.assert_allclose(first.run([x], backend="c")[0], np.exp(x) * 7.25, rtol=1e-15)
    assert len(calls) == 1
    assert any(cache_dir.rglob("*.so"))
    second = tidu.compile(graph, cache=False)  # a new Program: no compiled function on it yet
    assert second is not first and "c_call" not in second._cache
    np.testing.assert_array_equal(second.run({"x": x}, backend="c")[0], first.run([x], backend="c")[0])
    assert len(calls) == 1  # loaded from the disk cache, not compiled again
    with pytest.raises(tidu.InputError, match="expected shape"):
        second.run([np.ones(3)], backend="c")


def test_unsupported_primitives_are_named() -> None:
    program = program_of(lambda a: tnp.linalg.cholesky(a) * 2, np.eye(3))
    with pytest.raises(CLoweringError, match=r"no C lowering for cholesky \(.*linalg.rules.*\); .*backend='numpy'"):
        program.to_c()
    with pytest.raises(NotImplementedError, match="backend='xla'"):
        program.run([np.eye(3)], backend="c")

    def f(x):
        return tidu.lax.scan(lambda c, xi: (c * xi, c), x[0], x)[0]
    with pytest.raises(CLoweringError, match=r"scan \(control flow\)"):
        tidu.to_c(f, np.ones(3))


def test_missing_compiler_or_cffi(monkeypatch: pytest.MonkeyPatch) -> None:
    program = tidu.compile(tidu.make_graph(lambda x: x * 3.5 + 1)(np.ones(2)).graph, cache=False)
    monkeypatch.setenv("CC", "no-such-compiler-tidu")
    with pytest.raises(c_build.CBuildError, match=r"no C compiler found .*pip install 'tidu\[c\]'"):
        program.run([np.ones(2)], backend="c")
    monkeypatch.delenv("CC")
    monkeypatch.setitem(sys.modules, "cffi", None)
    with pytest.raises(c_build.CBuildError, match=r"cffi is not installed; .*pip install"):
        program.run([np.ones(2)], backend="c")


def test_cli_lower_to_c(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lower", "x^2*sin(y)", "--to", "c"]) == 0
    out = capsys.readouterr().out
    assert "int tidu_program(const double *restrict in0, const double *restrict in1, double *restrict out0" in out
    assert "sin(s1)" in out


def test_c_clause_in_the_rule_dsl(tmp_path: Path) -> None:
    assert "c" in CLAUSES
    decl = parse_rules("primitive f(x)\n    type elementwise\n    dtypes float\n    c exp\n").primitives[0]
    assert decl.c is not None and decl.c[0] == "exp"
    assert "tanh" in C_FUNCTIONS and "maximum" in C_FUNCTIONS
    rules = tmp_path / "mine.rules"
    rules.write_text("primitive twice(x)\n    type elementwise\n    dtypes float\n    meaning 2 * x\n"
                     "    numpy meaning\n    c meaning\n    jvp: 2 * dx\n\n"
                     "primitive cube(x)\n    type elementwise\n    dtypes float\n    meaning x * x * x\n"
                     "    jvp: 3 * x * x * dx\n\n"
                     "primitive arctangent(x)\n    type elementwise\n    dtypes float\n    meaning atan(x)\n"
                     "    numpy numpy.arctan\n    c atan\n    jvp: dx / (1 + x * x)\n")
    with tidu.use_rules(str(rules)):
        twice, cube, arctangent = tidu.op("twice"), tidu.op("cube"), tidu.op("arctangent")
        x = np.linspace(-1, 1, 4)
        assert "atan(" in tidu.to_c(lambda x: arctangent(twice(x)), x)
        with pytest.raises(CLoweringError, match=r"cube \(.*mine.rules:9:1: no 'c' clause\)"):
            tidu.to_c(cube, x)


# special functions C99's libm does not have (it has erf, erfc and lgamma)
NOT_IN_LIBM = ["beta_density_d", "betainc", "betainc_d", "cosine_integral", "digamma", "erfcx", "erfinv", "exp1",
               "expi", "expn", "fresnel_c", "fresnel_s", "gamma_density_d", "gammainc", "gammainc_da", "gammaincc",
               "hyp1f1", "hyp1f1_d", "hyp2f1", "hyp2f1_d", "i0", "i0e", "i1e", "ndtri", "sine_integral", "spence",
               "zeta", "zeta_d"]


def test_every_primitive_outside_linear_algebra_and_fft_lowers_to_c() -> None:
    from tidu.lowering.c_source import lowerable

    cat = tidu.catalog()
    # LAPACK's factorizations, FFTs and convolutions have no C99 spelling: to_c refuses them, naming the
    # primitive
    missing = sorted(p.name for p in cat.values() if not lowerable(p)
                     and not str(p.loc).startswith(("rules/linalg.rules", "rules/fft.rules", "rules/conv.rules")))
    assert missing == NOT_IN_LIBM


def test_special_functions_outside_libm_are_refused_by_name() -> None:
    from tidu.scipy import special

    with pytest.raises(Exception, match="digamma"):
        tidu.make_graph(special.digamma)(np.array([1.5, 2.5])).program.to_c()


def rosen(x):
    return tnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


SPECIAL = [np.inf, -np.inf, np.nan, 1e300, -0.0]


def test_regions_split_masked_loops_and_keep_nan() -> None:
    """A Hessian seeded by identity masks runs on its diagonals only (c_regions), under a
    finiteness check: inf and nan inputs give the NumPy back end's values, nan included."""
    x = np.linspace(-1.2, 1.1, 7)
    program = program_of(tidu.hessian(rosen), x)
    text = program.to_c()
    assert "off the lines i0 - i1 in {-1, 0, 1}" in text and "int tidu_program_zeroed(" in text
    assert text.count(" on the lines i0 - i1 in {0, 1} */") == 2  # two scratch values, as bands
    assert_same(program, [x])
    for v in SPECIAL:  # 1e300: finite inputs, an infinite intermediate value
        y = x.copy()
        y[3] = v
        got = assert_same(program, [y])
        assert np.array_equal(np.isnan(got[0]), np.isnan(program.eval([y])[0]))
    # the entry for outputs not zeroed writes every element
    call = program._cache["c_call"]
    out = np.full((7, 7), np.nan)
    assert call.lib.tidu_program(call.ffi.from_buffer(x), call.ffi.from_buffer(out), call.ffi.NULL) == 0
    np.testing.assert_array_equal(out, program.eval([x])[0])


def assert_identical(got, want, exact=True):
    """Equal values (bit for bit where ``exact``: elementwise work has one rounding order),
    nan and inf at the same positions, and the same sign wherever not nan (-0.0 too)."""
    for g, w in zip(got, want, strict=True):
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-13, equal_nan=True)
        assert np.array_equal(np.isnan(g), np.isnan(w)) and np.array_equal(np.isinf(g), np.isinf(w))
        number = ~np.isnan(w)
        assert np.array_equal(np.signbit(g[number]), np.signbit(w[number])), (g, w)


def banded_program(n: int):
    """A program whose ``s`` is +0.0 off two diagonals given x finite (c_regions), so it
    is stored as bands; several loops read it: a split one through a transpose (the band
    of its line), one that needs it finite through a reverse, a reduction, a dot product,
    exp. ``u`` is a band value of a loop whose check also needs ``s`` finite: a split
    reader of ``u`` that needs only ``exp(x)`` finite checks that loop's flag too."""
    e0, e1 = np.eye(n), np.eye(n, k=1)

    def banded(x):
        s = e0 * (x * 2.0)[:, None] + e1 * tnp.sin(x)[None, :] + e0
        u = e0 * tnp.exp(x)[:, None] + e0
        return (s.T - s, e0 * s[::-1] + e0, u.T * 3.0, tnp.exp(s[1:, :-1]), tnp.sum(s[:, 1:], axis=0), s @ x,
                tnp.sum(u[1:], 1))
    return program_of(banded, np.linspace(-1.0, 1.5, n))


BAND_INPUTS = (*SPECIAL, 1e308, -1e308, 800.0)  # +-1e308: x * 2.0 overflows; 800: exp(x) does


def test_band_storage_read_by_several_consumers() -> None:
    """A split loop's scratch values are stored as bands, one vector per line; readers
    get them directly (a split loop whose check includes the producer's), or choose at
    run time (the dense fallback: inf, nan or overflow make the proof's check fail)."""
    x = np.linspace(-1.0, 1.5, 6)
    program = banded_program(6)
    text = program.to_c()
    band = re.search(r"double \*const (b\d+) = .*/\* s(\d+) on the lines i0 - i1 in \{-1, 0\} \*/", text)
    assert band is not None
    b, s = band.groups()
    assert f"int fin{s} = 1;" in text and re.search(rf"const int ok\d+ = ok{s} && ", text)  # read on its lines
    assert re.search(rf"const double r\d+ = {b}\[i1 \+ 6\];", text)  # line 0 of s.T: line 0 of s
    assert f"(ok{s} ? (" in text  # elsewhere the layout is chosen at run time
    for v in (None, *BAND_INPUTS):
        for pos in (0, 4):
            y = x.copy()
            if v is not None:
                y[pos] = v
            got, want = program.run([y], backend="c"), program.eval([y])
            assert_identical(got[:2], want[:2])
            assert_identical(got[2:], want[2:], exact=False)  # libm's exp, the order of sums


def test_sparse_constant_contraction_and_lazy_outer_product() -> None:
    """A contraction with a one-hot constant visits its nonzeros (checked finite first,
    else the dense loop); an outer product is never stored."""
    e = np.eye(12)[:, 3:8]
    a = np.cos(np.arange(36.0)).reshape(3, 12)
    b = np.linspace(-1, 1, 4)

    def f(a, b):
        return a @ e, tnp.einsum("ij,k->ikj", a, b) * 2.0, e.T @ a.T
    program = program_of(f, a, b)
    text = program.to_c()
    assert "static const int32_t d" in text and "for (int64_t n = 0; n < 5; n++)" in text
    assert text.count("dot_general") == 2  # the outer product is read where it is used
    assert_same(program, [a, b])
    bad = a.copy()
    bad[1, 4], bad[2, 0] = np.inf, np.nan  # inf * 0 is nan: the dense loop runs
    got = assert_same(program, [bad, b])
    assert got[0][1, 1] == np.inf and np.isnan(np.delete(got[0][1], 1)).all() and np.isnan(got[2][:, 2]).all()


# --- the broad matrix (slow) ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("axes", [ax for r in range(4) for ax in itertools.combinations(range(3), r)])
def test_reductions_over_each_axis_set(axes: tuple[int, ...]) -> None:
    x = np.sin(np.arange(24.0)).reshape(2, 3, 4)
    program = program_of(lambda x: (tnp.sum(x, axis=axes), tnp.max(x, axis=axes), tnp.prod(x + 2, axis=axes),
                                    tnp.sum(tnp.exp(x) * x, axis=axes)), x)
    assert_same(program, [x], rtol=1e-12)


@pytest.mark.slow
def test_dot_general_with_batch_dims() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 4, 5))
    c, d = rng.normal(size=(3, 2, 4)), rng.normal(size=(4, 3))
    program = program_of(lambda a, b, c, d: (
        tnp.einsum("bij,bjk->bik", a, b), tnp.einsum("bij,bjk->kbi", a, b), tnp.einsum("ibj,jk->kib", c, d),
        tnp.einsum("bij,bij->b", a, a), tnp.einsum("bij,k->bijk", a, d[0]), a[0] @ b[1] @ b[0].T @ d), a, b, c, d)
    assert_same(program, [a, b, c, d], rtol=1e-12)


@pytest.mark.slow
def test_structural_ops() -> None:
    x = np.arange(24.0).reshape(2, 3, 4) / 7
    program = program_of(lambda x: (
        x[:, ::2, 1:4:2], tnp.flip(x, (0, 2)), tnp.transpose(x, (2, 0, 1)), tnp.reshape(x, (4, 6)).T,
        tnp.pad(x, ((0, 1), (2, 0), (1, 1))), tnp.concatenate([x, x[:, :1]], axis=1),
        tnp.broadcast_to(x[:, :1, :], (2, 3, 4)) * x, tnp.expand_dims(x.sum(1), 1) - x,
        tnp.concatenate([x.reshape(-1), np.array([1.0, 2.0])])), x)
    assert_same(program, [x])
    # interior and negative padding through the gradient of a strided slice, and lax.pad
    program = program_of(tidu.grad(lambda x: tnp.sum(tnp.sin(x[1::3, ::2]) ** 2)), x[0])
    assert_same(program, [x[0]])


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_elementwise_dtypes(dtype: str) -> None:
    x = (np.linspace(0.2, 2.0, 6) + (0.5j if dtype.startswith("complex") else 0)).astype(dtype)
    real = not dtype.startswith("complex")
    fns = [tnp.exp, tnp.log, tnp.sin, tnp.cos, tnp.tanh, tnp.sqrt, tnp.expm1, tnp.log1p, tnp.abs, tnp.sign,
           lambda x: 1 / x, lambda x: x ** 2.5, lambda x: -x * x - x, tnp.conj, tnp.real]
    if real:
        fns += [tnp.floor, tnp.ceil, tnp.rint, lambda x: tnp.fmod(x, 0.7), lambda x: tnp.maximum(x, 1.1),
                lambda x: tnp.minimum(x, 1.1), lambda x: tnp.where(x > 1, x, -x)]
    else:
        fns += [tnp.imag, lambda x: x == x[0]]
    program = program_of(lambda x: tuple(f(x) for f in fns), x)
    assert_same(program, [x], rtol=2e-6 if dtype in ("float32", "complex64") else 1e-13)


@pytest.mark.slow
def test_integers_bool_and_conversions() -> None:
    k = np.array([3, -4, 5, 0, -2147483648], np.int32)
    m = np.array([[1, 2], [3, -9]], np.int64)
    program = program_of(lambda k, m: (
        k * k + k, -k, tnp.abs(k), tnp.sign(k), tnp.maximum(k, 0), tnp.sum(k), tnp.max(k), k > 0,
        tnp.where(k > 0, k, 2 * k), k.astype(np.float64), (k > 0).astype(np.int64), m @ m, tnp.prod(m, axis=0),
        m.T, tnp.max(m, axis=1), (m.astype(np.float32) / 3).astype(np.int32), m != 3,
        tnp.logical_and(k > 0, k < 4)), k, m)
    assert_same(program, [k, m])


@pytest.mark.slow
def test_nan_and_signed_zero_as_numpy() -> None:
    x = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 1.0, -2.0])
    y = np.array([1.0, 0.0, -0.0, np.nan, 2.0, np.nan, -2.0])
    program = program_of(lambda x, y: (tnp.maximum(x, y), tnp.minimum(x, y), tnp.sign(x), tnp.max(x),
                                       tnp.max(y[1:]), tnp.abs(x), x * y, tnp.where(x > y, x, y)), x, y)
    got = assert_same(program, [x, y])
    for g, w in zip(got, program.eval([x, y]), strict=True):  # bit for bit here, signs of zero included
        assert np.array_equal(np.signbit(g), np.signbit(w)) and np.array_equal(np.isnan(g), np.isnan(w))


@pytest.mark.slow
def test_gradients_and_hessian_against_finite_differences() -> None:
    def f(x):
        return tnp.sum(tnp.tanh(x[1:] * x[:-1])) + tnp.sum(tnp.exp(-x ** 2)) + tnp.sum(tnp.outer(x, x)[::2] ** 2)
    x = np.linspace(-1.0, 1.2, 7)
    g = tidu.make_graph(tidu.grad(f))(x).program
    h = tidu.make_graph(tidu.hessian(f))(x).program
    gc, hc = g.run([x], backend="c")[0], h.run([x], backend="c")[0]
    assert_same(g, [x], rtol=1e-12), assert_same(h, [x], rtol=1e-12, atol=1e-14)
    eps = 1e-6
    value = tidu.make_graph(f)(x).program
    fd = np.array([(value.run([x + eps * e], backend="c")[0] - value.run([x - eps * e], backend="c")[0]) / (2 * eps)
                   for e in np.eye(7)])
    np.testing.assert_allclose(gc, fd, rtol=1e-7, atol=1e-8)
    gfd = np.array([(g.run([x + eps * e], backend="c")[0] - g.run([x - eps * e], backend="c")[0]) / (2 * eps)
                    for e in np.eye(7)])
    np.testing.assert_allclose(hc, gfd, rtol=1e-6, atol=1e-7)


@pytest.mark.slow
def test_bench_functions_and_float32() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from common import make_chain, rosenbrock

    for transform in (tidu.grad, tidu.hessian):
        assert_same(program_of(transform(make_chain(tnp, 200)), 0.7), [np.float64(0.7)], rtol=1e-12)
    for n in (5, 60):
        x = np.linspace(-1.2, 1.1, n)
        assert_same(program_of(tidu.hessian(lambda x: rosenbrock(x, tnp)), x), [x], rtol=1e-13)
    x32 = np.linspace(-1, 1, 8, dtype=np.float32)
    program = program_of(tidu.value_and_grad(lambda x: tnp.sum(tnp.exp(x) * tnp.sin(x))), x32)
    out = assert_same(program, [x32], rtol=1e-5)
    assert out[1].dtype == np.float32


@pytest.mark.slow
def test_inputs_are_checked_and_converted() -> None:
    program = program_of(lambda x, n: x * n, np.ones((2, 3)), np.int64(2))
    x = np.arange(12.0).reshape(3, 4)[:2, :3]  # not contiguous: copied
    np.testing.assert_array_equal(program.run([x, 2], backend="c")[0], x * 2)
    np.testing.assert_array_equal(program.run({"x": x.tolist(), "n": np.int32(3)}, backend="c")[0], x * 3)
    with pytest.raises(tidu.InputError, match="expected dtype int64, got float64"):
        program.run([x, 2.5], backend="c")
    out = program.run([np.ones((2, 3)), np.int64(1)], backend="c")[0]
    assert out.flags.writeable and out.flags.c_contiguous


@pytest.mark.slow
@pytest.mark.parametrize("special", SPECIAL)
def test_region_split_hessians_with_special_values(special: float) -> None:
    def tri(x):
        return tnp.sum(tnp.sin(x[1:] * x[:-1])) + tnp.sum(x ** 3) + tnp.sum(tnp.exp(x[2:] - x[:-2]))

    def diag(x):
        return tnp.sum(tnp.tanh(x) * x)
    for f in (rosen, tri, diag):
        for n in (3, 9):
            x = np.linspace(-0.9, 1.3, n)
            program = program_of(tidu.hessian(f), x)
            assert f is not rosen or "off the lines" in program.to_c()
            for pos in range(n):
                y = x.copy()
                y[pos] = special
                got = assert_same(program, [y], rtol=1e-12)
                want = program.eval([y])[0]
                assert np.array_equal(np.isnan(got[0]), np.isnan(want)), (f.__name__, n, pos)
                assert np.array_equal(np.isinf(got[0]), np.isinf(want)), (f.__name__, n, pos)


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 3, 6, 40])
def test_band_storage_with_special_values(n: int) -> None:
    """Band-stored scratch values (c_bands) against the NumPy back end: the readers of
    ``banded_program`` and Hessians on three and five diagonals (arrays of size 0 at
    n = 2), with inf, nan, overflow and -0.0 at each position and at pairs."""

    def five(x):
        return rosen(x) + tnp.sum(x[2:] * x[:-2] ** 2)

    x = np.linspace(-1.1, 1.3, n)
    positions = [(p,) for p in range(n)] + [(0, n - 1), (n // 2, n // 2 - 1)]
    programs = [banded_program(n), program_of(tidu.hessian(five), x), program_of(tidu.hessian(rosen), x)]
    for program, elementwise in zip(programs, (2, 0, 1), strict=True):
        assert " on the lines " in program.to_c()  # some scratch value as bands
        for v in BAND_INPUTS:
            for pos in positions if n <= 6 else positions[::7]:
                y = x.copy()
                y[list(pos)] = v
                got, want = program.run([y], backend="c"), program.eval([y])
                assert_identical(got[:elementwise], want[:elementwise])
                assert_identical(got[elementwise:], want[elementwise:], exact=False)
