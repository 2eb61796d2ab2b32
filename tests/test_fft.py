"""tidu.numpy.fft against jax.numpy.fft: values (real and complex input, float64 and
complex128, every norm, n/s and axis/axes), first derivatives (grad, jvp, vjp of real
losses) and second derivatives (hessians), under tidu.vmap, eager (NumPy values) and traced
alike; the primitives (rules/fft.rules) and whole programs run in XLA from their StableHLO;
bad arguments get one-line errors naming them."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from typing import Any

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)

RTOL, ATOL = 1e-12, 1e-12
NORMS = [None, "backward", "ortho", "forward"]

# (function, input shape, keyword arguments): n/s and axis/axes as numpy.fft reads them
CASES: list[tuple[str, tuple[int, ...], dict[str, Any]]] = [
    ("fft", (5,), {}),
    ("fft", (3, 6), {"n": 4, "axis": 0}),
    ("fft", (3, 6), {"n": 8}),
    ("ifft", (2, 3, 4), {"axis": 1}),
    ("ifft", (6,), {"n": 9}),
    ("rfft", (6,), {}),
    ("rfft", (7,), {"n": 10}),
    ("rfft", (3, 5), {"n": 3, "axis": 0}),
    ("irfft", (5,), {}),
    ("irfft", (3, 4), {"n": 7}),
    ("irfft", (4, 3), {"n": 5, "axis": 0}),
    ("hfft", (5,), {}),
    ("hfft", (3, 4), {"n": 5, "axis": 0}),
    ("ihfft", (6,), {}),
    ("ihfft", (3, 5), {"n": 4}),
    ("fftn", (2, 3, 4), {}),
    ("fftn", (2, 3, 4), {"s": (3, 5), "axes": (2, 0)}),
    ("fftn", (2, 3, 4), {"s": (2, 2)}),
    ("fftn", (2, 2, 3, 2), {}),  # four axes: two transforms
    ("ifftn", (2, 3, 4), {"axes": (0, 1)}),
    ("ifftn", (2, 2, 2, 3), {"s": (3, 2, 2, 2)}),
    ("rfftn", (2, 3, 4), {}),
    ("rfftn", (3, 4, 5), {"s": (6, 3), "axes": (2, 0)}),
    ("rfftn", (2, 3, 2, 3), {}),
    ("irfftn", (2, 3, 4), {}),
    ("irfftn", (3, 4, 3), {"s": (4, 5), "axes": (0, 2)}),
    ("irfftn", (2, 2, 3, 3), {}),
    ("fft2", (3, 4), {}),
    ("ifft2", (2, 3, 4), {"s": (4, 3)}),
    ("rfft2", (3, 4, 2), {"axes": (0, 1)}),
    ("irfft2", (2, 3, 4), {"s": (5, 5)}),
    ("irfft2", (3, 4), {}),
    ("fftshift", (5,), {}),
    ("fftshift", (4, 5), {"axes": 0}),
    ("ifftshift", (4, 5), {}),
    ("ifftshift", (4, 5, 3), {"axes": (2, 1)}),
]
REAL_ONLY = {"rfft", "rfftn", "rfft2", "ihfft"}
NO_NORM = {"fftshift", "ifftshift"}


def _ids(case: tuple[str, tuple[int, ...], dict[str, Any]]) -> str:
    name, shape, kw = case
    return f"{name}-{'x'.join(map(str, shape))}-" + ",".join(f"{k}={v}" for k, v in kw.items())


def draw(shape: tuple[int, ...], dtype: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape)
    if dtype.startswith("complex"):
        x = x + 1j * rng.normal(size=shape)
    return x.astype(dtype)


def call(module: Any, name: str, x: Any, kw: dict[str, Any], norm: str | None) -> Any:
    extra = {} if name in NO_NORM else {"norm": norm}
    return getattr(module.fft, name)(x, **kw, **extra)


def close(got: Any, want: Any, rtol: float = RTOL, atol: float = ATOL) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


# --- values --------------------------------------------------------------------------------


def _default_first(values: list, keep: int = 1) -> list:
    """The first ``keep`` values in the default run, the rest in the slow one (the default
    run keeps every function, in one norm and dtype; the slow one every combination)."""
    return [v if i < keep else pytest.param(v, marks=pytest.mark.slow) for i, v in enumerate(values)]



@pytest.mark.parametrize("norm", _default_first(NORMS))
@pytest.mark.parametrize("dtype", _default_first(["float64", "complex128"]))
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_values_match_jax_eager_and_traced(case, dtype, norm):
    name, shape, kw = case
    if name in NO_NORM and norm is not None:
        pytest.skip("no norm")
    x = draw(shape, dtype)
    if name in REAL_ONLY and dtype.startswith("complex"):
        with pytest.raises(TypeError, match=rf"tnp.fft.{name}: a must be real, got complex128"):
            call(tnp, name, x, kw, norm)
        with pytest.raises(TypeError, match=rf"tnp.fft.{name}: a must be real"):
            tidu.jit(lambda v: call(tnp, name, v, kw, norm))(x)
        return
    want = np.asarray(jax.jit(lambda v: call(jnp, name, v, kw, norm))(x))
    eager = call(tnp, name, x, kw, norm)
    traced = tidu.jit(lambda v: call(tnp, name, v, kw, norm))(x)
    assert isinstance(eager, np.ndarray) and eager.dtype == want.dtype == traced.dtype
    close(eager, want)
    close(traced, want)


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fftn", "rfftn", "irfftn"])
def test_single_precision_stays_single(name):
    x = draw((4, 6), "complex64" if name in ("irfft", "hfft", "irfftn") else "float32")
    eager = getattr(tnp.fft, name)(x)
    traced = tidu.jit(getattr(tnp.fft, name))(x)
    want = np.asarray(jax.jit(getattr(jnp.fft, name))(x))
    assert eager.dtype == traced.dtype == want.dtype
    close(traced, want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("n", [1, 2, 7, 8])
@pytest.mark.parametrize("name", ["fftfreq", "rfftfreq"])
def test_frequencies(name, n):
    for d in (1.0, 0.25):
        want = np.asarray(getattr(jnp.fft, name)(n, d))
        close(getattr(tnp.fft, name)(n, d), want, rtol=0, atol=0)
        close(tidu.jit(lambda d: getattr(tnp.fft, name)(n, d))(d), want, rtol=1e-15, atol=0)
    assert getattr(tnp.fft, name)(n, 0.5, dtype=np.float32).dtype == np.float32
    # d traced and differentiated: d/dd sum(k / (n d)) = -sum(k) / (n d^2)
    g = tidu.grad(lambda d: tnp.sum(getattr(tnp.fft, name)(n, d)))(0.5)
    close(g, jax.grad(lambda d: jnp.sum(getattr(jnp.fft, name)(n, d)))(0.5))


def test_numpy_functions_on_traced_values_are_tidus():
    x = draw((3, 4), "float64")
    got = tidu.jit(lambda v: np.fft.rfft2(v, norm="ortho") * 2.0)(x)
    close(got, np.fft.rfft2(x, norm="ortho") * 2.0)
    close(tidu.jit(lambda v: np.fft.fftshift(v, axes=1))(x), np.fft.fftshift(x, axes=1))


# --- derivatives ---------------------------------------------------------------------------


def _loss(m: Any, y: Any, w: np.ndarray, c: np.ndarray) -> Any:
    """A real, nonlinear function of y (real or complex)."""
    return m.sum(m.real(y * m.conj(y)) * w) + m.sum(m.sin(m.real(y * c)))


def _weights(name: str, shape: tuple[int, ...], kw: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    out = np.asarray(call(tnp, name, draw(shape, "complex128" if name not in REAL_ONLY else "float64"), kw, None))
    rng = np.random.default_rng(7)
    return rng.uniform(0.5, 1.5, out.shape), rng.normal(size=out.shape) + 1j * rng.normal(size=out.shape)


GRAD_CASES = [c for i, c in enumerate(CASES) if i % 2 == 0 or c[0] in ("irfft", "hfft", "irfftn", "irfft2")]


@pytest.mark.parametrize("dtype", _default_first(["float64", "complex128"]))
@pytest.mark.parametrize("case", GRAD_CASES, ids=_ids)
def test_first_derivatives_match_jax(case, dtype):
    name, shape, kw = case
    if name in REAL_ONLY and dtype.startswith("complex"):
        pytest.skip("real input only")
    norm = None if name in NO_NORM else ["ortho", "forward", "backward"][len(name) % 3]
    w, c = _weights(name, shape, kw)
    x = draw(shape, dtype, seed=1)
    t = draw(shape, dtype, seed=2)

    def f(m: Any) -> Any:
        return lambda v: call(m, name, v, kw, norm)

    # grad of a real loss (tidu's gradient of a complex input is the conjugate of JAX's)
    g = tidu.grad(lambda v: _loss(tnp, f(tnp)(v), w, c))(x)
    want = jax.jit(jax.grad(lambda v: _loss(jnp, f(jnp)(v), w, c)))(x)
    close(g, np.conj(want) if dtype.startswith("complex") else want)
    # jvp
    y, dy = tidu.jvp(f(tnp), (x,), (t,))
    y_j, dy_j = jax.jit(lambda x, t: jax.jvp(f(jnp), (x,), (t,)))(x, t)
    close(y, y_j)
    close(dy, dy_j)
    # vjp with a cotangent of the output's dtype (tidu's transpose is the adjoint for
    # Re sum conj(a) b; JAX's vjp of a complex function is its conjugate)
    ct = draw(np.shape(y_j), np.asarray(y_j).dtype.name, seed=3)
    _, back = tidu.vjp(f(tnp), x)
    (got,) = back(ct)
    (want_ct,) = jax.jit(lambda x, ct: jax.vjp(f(jnp), x)[1](ct))(x, np.conj(ct) if np.iscomplexobj(ct) else ct)
    close(got, np.conj(want_ct) if dtype.startswith("complex") else want_ct)


HESS_CASES = [("fft", (4,), {}), ("ifft", (5,), {"n": 4}), ("rfft", (5,), {}), ("irfft", (3,), {"n": 5}),
              ("irfft", (4,), {}), ("hfft", (3,), {}), ("ihfft", (4,), {}), ("fft2", (2, 3), {}),
              ("rfftn", (2, 4), {"s": (3, 4)}), ("irfftn", (2, 3), {}), ("fftshift", (5,), {})]


@pytest.mark.parametrize("case", _default_first(HESS_CASES, keep=4), ids=_ids)
def test_hessians_match_jax(case):
    """The Hessian of a real loss in the real and imaginary parts of the input (just the
    real values for the real-input transforms)."""
    name, shape, kw = case
    size = int(np.prod(shape))
    cplx = name not in REAL_ONLY
    norm = None if name in NO_NORM else "ortho"
    w, c = _weights(name, shape, kw)

    def loss(m: Any) -> Any:
        def h(p: Any) -> Any:
            x = m.reshape(p[:size] + 1j * p[size:], shape) if cplx else m.reshape(p, shape)
            return _loss(m, call(m, name, x, kw, norm), w, c)
        return h

    p = draw((2 * size if cplx else size,), "float64", seed=4)
    close(tidu.hessian(loss(tnp))(p), jax.jit(jax.hessian(loss(jnp)))(p), rtol=1e-10, atol=1e-10)


# --- vmap ----------------------------------------------------------------------------------


# every function of jax.numpy.fft that takes an array, batched (fftfreq and rfftfreq take
# a length and a spacing: nothing to map); the default run keeps one case of each kind of
# transform, the slow step runs every case of CASES
VMAP_DEFAULT = (1, 4, 7, 10, 13, 16, 22, 25, 29, 33)
NOT_BATCHED = {"fftfreq": "its arguments are a length and a spacing (Python numbers), as in jax.vmap",
               "rfftfreq": "its arguments are a length and a spacing (Python numbers), as in jax.vmap"}


def test_every_fft_function_is_batched():
    jfft = jax.numpy.fft
    public = {n for n in dir(jfft) if not n.startswith("_") and callable(getattr(jfft, n))}
    assert public <= {name for name, _, _ in CASES} | set(NOT_BATCHED)


@pytest.mark.parametrize("case", [c if i in VMAP_DEFAULT else pytest.param(c, marks=pytest.mark.slow)
                                  for i, c in enumerate(CASES)], ids=_ids)
def test_vmap_matches_the_loop_and_jax(case):
    name, shape, kw = case
    dtype = "float64" if name in REAL_ONLY else "complex128"
    xs = draw((3, *shape), dtype, seed=5)
    norm = "ortho" if name not in NO_NORM else None
    fn = lambda v: call(tnp, name, v, kw, norm)  # noqa: E731
    want = np.stack([fn(x) for x in xs])
    close(tidu.vmap(fn)(xs), want)
    close(tidu.jit(tidu.vmap(fn))(xs), want)
    close(jax.jit(jax.vmap(lambda v: call(jnp, name, v, kw, norm)))(xs), want)
    # the examples on the last axis, and the gradient of a batched loss (tidu's gradient
    # of a complex input is the conjugate of JAX's)
    close(tidu.vmap(fn, in_axes=-1)(np.moveaxis(xs, 0, -1)), want)
    w, c = _weights(name, shape, kw)
    per = [tidu.grad(lambda v: _loss(tnp, fn(v), w, c))(x) for x in xs]
    batched = tidu.vmap(tidu.grad(lambda v: _loss(tnp, fn(v), w, c)))(xs)
    close(batched, np.stack(per))
    theirs = jax.jit(jax.vmap(jax.grad(lambda v: _loss(jnp, call(jnp, name, v, kw, norm), w, c))))(xs)
    close(batched, np.conj(theirs) if dtype.startswith("complex") else theirs)


# --- the rules, the primitives and whole programs on XLA ------------------------------------------------


@pytest.mark.slow  # tests/test_checkrules.py and CI's tidu check-rules check the catalog in the default run
def test_check_rules_confirms_every_fft_rule():
    """tidu check-rules rules/fft.rules: each JVP (finite differences, linearity), each
    transpose (the adjoint identity, real and complex), the batching and the Taylor rule
    (tidu.jet) of the four primitives; the built-in file named by its path is checked, not
    refused as declared twice."""
    from pathlib import Path

    from tidu.checkrules import PASS, check_rules

    report = check_rules([Path(__file__).resolve().parent.parent / "rules" / "fft.rules"])
    assert {r.primitive for r in report.rows} == {"fft", "ifft", "rfft", "irfft"}
    assert len(report.rows) == 20 and all(r.result == PASS for r in report.rows), report.summary()


XLA_PRIMS = [("fft", (2, 3, 4), "complex128", (3, 4)), ("ifft", (5,), "complex128", (5,)),
             ("rfft", (2, 6), "float64", (6,)), ("rfft", (3, 4, 5), "float64", (3, 4, 5)),
             ("irfft", (2, 4), "complex128", (7,)), ("irfft", (3, 4), "complex128", (3, 6)),
             ("irfft", (2, 1), "complex128", (1,)), ("fft", (4,), "complex64", (4,)),
             ("irfft", (2, 3), "complex64", (4,)), ("rfft", (3,), "float32", (3,))]


@pytest.mark.parametrize("norm", _default_first(["backward", "ortho", "forward"]))
@pytest.mark.parametrize("prim", XLA_PRIMS, ids=lambda p: f"{p[0]}-{p[2]}-{'x'.join(map(str, p[1]))}")
def test_primitives_run_in_xla(prim, norm):
    """stablehlo.fft (and the norm's scale) compiled and run by XLA equals the NumPy
    kernels, on random (not Hermitian) input for the inverse real transform too."""
    from xla_util import check, op

    from tidu.core.keys import Aval

    name, shape, dtype, lengths = prim
    x = draw(shape, dtype, seed=6)
    program = check(lambda b, v: [op(b, name, v, fft_lengths=lengths, norm=norm)], [Aval(shape, dtype)], [x])
    text = program.to_stablehlo()
    assert f"stablehlo.fft %s0, type = {name.upper()}, length = [{', '.join(map(str, lengths))}]" in text
    assert text == program.to_stablehlo()  # deterministic


def _program_loss(x: Any) -> Any:
    y = tnp.fft.rfftn(x, s=(4, 6), axes=(1, 0), norm="ortho")
    z = tnp.fft.irfft(y * tnp.conj(y), n=5, axis=0)
    return tnp.sum(tnp.sin(z)) + tnp.sum(tnp.abs(tnp.fft.fftshift(tnp.fft.ifft2(x + 0j))) ** 2)


def _program_loss_jax(x: Any) -> Any:
    y = jnp.fft.rfftn(x, s=(4, 6), axes=(1, 0), norm="ortho")
    z = jnp.fft.irfft(y * jnp.conj(y), n=5, axis=0)
    return jnp.sum(jnp.sin(z)) + jnp.sum(jnp.abs(jnp.fft.fftshift(jnp.fft.ifft2(x + 0j))) ** 2)


def test_programs_run_in_xla():
    """Values, gradient and a vmapped gradient built from every primitive and their
    transposes: StableHLO run by XLA equals NumPy's values (and JAX's)."""
    from tidu.lowering.xla import run_xla

    x = draw((5, 3), "float64", seed=8)
    xs = draw((2, 5, 3), "float64", seed=9)
    for fn, args, want in [
        (_program_loss, (x,), jax.jit(_program_loss_jax)(x)),
        (tidu.grad(_program_loss), (x,), jax.jit(jax.grad(_program_loss_jax))(x)),
        (tidu.vmap(tidu.grad(_program_loss)), (xs,), jax.jit(jax.vmap(jax.grad(_program_loss_jax)))(xs)),
    ]:
        program = tidu.make_graph(fn)(*args).program
        numpy_values = program.eval(list(args))
        xla_values = run_xla(program, list(args))
        for got, ref in zip(xla_values, numpy_values, strict=True):
            close(got, ref)
        close(numpy_values[0], want)
        assert "stablehlo.fft" in program.to_stablehlo()


def test_taylor_coefficients_match_nested_jvps():
    """tidu.jet through the transforms (linear: each coefficient goes through them)."""
    x, t = draw((6,), "float64", seed=10), draw((6,), "float64", seed=11)

    def f(v: Any) -> Any:
        return tnp.sum(tnp.abs(tnp.fft.rfft(v * v, norm="ortho")) ** 2) + tnp.sum(tnp.fft.hfft(v[:4] + 0j) ** 3)

    y0, (y1, y2) = tidu.jet(f, (x,), ([t, np.zeros(6)],))
    d1 = lambda v: tidu.jvp(f, (v,), (t,))[1]  # noqa: E731
    close(y0, f(x))
    close(y1, d1(x))
    close(y2, tidu.jvp(d1, (x,), (t,))[1], rtol=1e-10, atol=1e-10)


def test_other_back_ends():
    """Standalone NumPy source runs the transforms without tidu; the C back end refuses
    them by name."""
    x = draw((6,), "float64", seed=12)
    g = tidu.grad(lambda v: tnp.sum(tnp.abs(tnp.fft.rfft(v * v, norm="forward")) ** 2))
    program = tidu.make_graph(g)(x).program
    namespace: dict[str, Any] = {}
    exec(program.to_numpy_source(standalone=True), namespace)
    out = namespace["run"](x)
    close(out[0] if isinstance(out, list | tuple) else out, g(x))
    from tidu.lowering.c_source import CLoweringError

    with pytest.raises(CLoweringError, match=r"no C lowering for rfft \(rules/fft.rules:\d+:1: no 'c' clause\)"):
        program.to_c()


# --- arguments -----------------------------------------------------------------------------


BAD = [
    (lambda m, x: m.fft.fft(x, n=2.5), TypeError, r"tnp.fft.fft: n must be a positive integer, got 2.5"),
    (lambda m, x: m.fft.rfft(x, n=0), ValueError, r"tnp.fft.rfft: n must be a positive integer, got 0"),
    (lambda m, x: m.fft.ifft(x, axis=2), ValueError, r"tnp.fft.ifft: axis 2 is out of bounds for an array of rank 2"),
    (lambda m, x: m.fft.irfft(x, axis=1.0), TypeError, r"tnp.fft.irfft: axis must be an integer, got 1.0"),
    (lambda m, x: m.fft.fft(x, norm="unitary"), ValueError,
     r'tnp.fft.fft: norm must be "backward", "ortho", "forward" or None, got \'unitary\''),
    (lambda m, x: m.fft.fftn(x, axes=(0, -2)), ValueError, r"tnp.fft.fftn: axes \(0, -2\) repeats an axis"),
    (lambda m, x: m.fft.fftn(x, axes=(0, 5)), ValueError,
     r"tnp.fft.fftn: axes entry 5 is out of bounds for an array of rank 2"),
    (lambda m, x: m.fft.rfftn(x, s=(3, 4), axes=(1,)), ValueError,
     r"tnp.fft.rfftn: s has 2 lengths for 1 axes; give one per axis"),
    (lambda m, x: m.fft.irfftn(x, s=(3, "4")), TypeError, r"tnp.fft.irfftn: s entry must be a positive integer"),
    (lambda m, x: m.fft.fft2(x, s=4), TypeError, r"tnp.fft.fft2: s must be a sequence of positive integers, got 4"),
    (lambda m, x: m.fft.fftn(x, s=(2, 2, 2)), ValueError, r"tnp.fft.fftn: s has 3 lengths but the array has rank 2"),
    (lambda m, x: m.fft.fftshift(x, axes=3), ValueError,
     r"tnp.fft.fftshift: axes 3 is out of bounds for an array of rank 2"),
    (lambda m, x: m.fft.irfft(x[:, :1]), ValueError, r"tnp.fft.irfft: a half spectrum of 1 entry along axis 1"),
    (lambda m, x: m.fft.fftfreq(4.0, x[0, 0]), TypeError, r"tnp.fft.fftfreq: n must be a positive integer, got 4.0"),
    (lambda m, x: m.fft.rfftfreq(4, x[0, 0], dtype=np.int32), TypeError,
     r"tnp.fft.rfftfreq: dtype must be a float dtype"),
]


@pytest.mark.parametrize("k", range(len(BAD)))
def test_bad_arguments_name_the_argument(k):
    fn, error, message = BAD[k]
    x = draw((3, 4), "float64")
    with pytest.raises(error, match=message) as eager:
        fn(tnp, x)
    with pytest.raises(error, match=message) as traced:
        tidu.jit(lambda v: fn(tnp, v))(x)
    for info in (eager, traced):
        assert "\n" not in str(info.value)
