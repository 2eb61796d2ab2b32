"""An outside tester's sweep of tidu.lax, tidu.scipy.special, tidu.scipy.stats and
tidu.nn: each public function is called eagerly (on NumPy arrays), traced (``tidu.jit``
of the same call) and as JAX's function of that name (jax.lax, jax.scipy.special,
jax.scipy.stats, jax.nn with 64-bit types), on float64, float32, float16, bfloat16,
int32, int8, uint8 and bool arrays and on complex64 and complex128 ones, and:

- eager and traced give one dtype, shape and value (or both refuse with a TypeError or
  ValueError);
- where JAX takes the call, tidu gives JAX's dtype, shape and value (the documented
  exceptions are listed below with their reasons), and where JAX refuses a dtype that
  tidu takes, a float input keeps its dtype (no float16 made float64);
- nothing raises anything else than TypeError or ValueError;
- first derivatives (``tidu.grad`` of the sum of the results) equal ``jax.grad``'s on
  float64 inputs (float32, float16 and bfloat16: marked slow).

A name is called generically as ``f(x)``, ``f(x, y)`` or ``f(x, y, z)`` (arrays of shape
(3, 4)) when JAX's function takes that call, else as its entry in ``CASES`` says;
``test_every_public_name_is_swept`` fails for a new public name with neither.
Tests marked ``xfail(strict=True)`` fail today; each reason says what is wrong.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scipy.special  # noqa: E402
import scipy.stats  # noqa: E402

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.nn  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jax.scipy.special  # noqa: E402
import jax.scipy.stats  # noqa: E402

import tidu  # noqa: E402
import tidu.lax as tlax  # noqa: E402
import tidu.nn as tnn  # noqa: E402
import tidu.numpy as tnp  # noqa: E402
import tidu.scipy.special as tsp  # noqa: E402
import tidu.scipy.stats as tst  # noqa: E402

T = SimpleNamespace(lax=tlax, special=tsp, nn=tnn, stats=tst, np=tnp)
J = SimpleNamespace(lax=jax.lax, special=jax.scipy.special, nn=jax.nn, stats=jax.scipy.stats, np=jnp)
BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = ("float64", "float32", "float16", "bfloat16")
INTS = ("int32", "int8", "uint8", "bool")
COMPLEX = ("complex64", "complex128")
DTYPES = FLOATS + INTS + COMPLEX
# distributions of complex values are not defined (SciPy refuses them; JAX computes its
# formulas' analytic continuations, which tidu's other formulas do not reproduce)
REAL = FLOATS + INTS
# the dtypes every run sweeps (within a minute on two cores); the others are marked slow
FAST_DTYPES = ("float64", "int32")
SHAPE = (3, 4)
RTOL = {"float64": 1e-10, "complex128": 1e-10, "float32": 2e-5, "complex64": 2e-5, "float16": 4e-3,
        "bfloat16": 3e-2}


@dataclass(frozen=True)
class Case:
    """How to call one name: ``kinds`` of the arrays drawn, one letter each ("n" normal
    values, "p" positive, "u" in (0, 1), "k" counts 0, 1, 2, ...), of ``shapes``;
    ``call(m, *arrays)`` the call, written for the namespace ``m`` (``.lax``,
    ``.special``, ``.nn``, ``.stats``, ``.np``: tidu's or JAX's); ``dtypes`` the dtypes
    swept; ``grad``: the derivative is compared (float inputs and results)."""

    kinds: str
    call: Callable[..., Any]
    shapes: tuple[tuple[int, ...], ...] = ()
    dtypes: tuple[str, ...] = DTYPES
    grad: bool = True

    def arg_shapes(self) -> tuple[tuple[int, ...], ...]:
        return self.shapes or (SHAPE,) * len(self.kinds)


def _in(mod: str, name: str, *consts: Any, **kw: Any) -> Callable[..., Any]:
    """call(m, *arrays) = m.<mod>.<name>(*arrays, *consts, **kw)."""
    return lambda m, *a: getattr(getattr(m, mod), name)(*a, *consts, **kw)


def _lax(name: str, *consts: Any, **kw: Any) -> Callable[..., Any]:
    return _in("lax", name, *consts, **kw)


_SAME_WIDTH = {"float64": np.int64, "float32": np.int32, "float16": np.int16, "bfloat16": np.int16,
               "int32": np.float32, "int8": np.uint8, "uint8": np.int8, "complex64": np.float64}


def _bitcast(m: Any, a: Any) -> Any:
    return m.lax.bitcast_convert_type(a, _SAME_WIDTH[str(np.dtype(a.dtype))])


SPH_N = np.array([0, 1, 1, 2, 2, 3, 4, 5, 6, 7, 8, 8])
SPH_M = np.array([0, -1, 1, 0, -2, 3, -1, 4, -6, 2, 8, -5])


def _real_imag(m: Any, y: Any) -> Any:
    return m.np.stack([m.np.real(y), m.np.imag(y)])


CASES: dict[str, Case] = {
    # --- tidu.lax: shapes, reductions, scans, selection ---------------------------------
    "lax.argmax": Case("n", _lax("argmax", 1, np.int32)),
    # inside the domain: where a < 0 or x < 0 the value is nan, tidu's derivative nan, JAX's finite
    "lax.igamma": Case("pp", _lax("igamma")),
    "lax.igammac": Case("pp", _lax("igammac")),
    "lax.reduce": Case("n", lambda m, a: m.lax.reduce(a, np.zeros((), a.dtype), m.lax.add, (1,))),
    "lax.reduce_window": Case("n", lambda m, a: m.lax.reduce_window(a, np.zeros((), a.dtype), m.lax.add, (2, 2),
                                                                    (1, 2), "SAME")),
    "lax.reduce_precision": Case("n", _lax("reduce_precision", 5, 10)),
    "lax.conv_transpose": Case("nn", _lax("conv_transpose", (2, 1), "SAME"), shapes=((1, 5, 5, 2), (2, 2, 2, 3)),
                               dtypes=FLOATS + COMPLEX),
    "lax.argmin": Case("n", _lax("argmin", 0, np.int64)),
    "lax.associative_scan": Case("n", lambda m, a: m.lax.associative_scan(m.lax.add, a, axis=1)),
    "lax.batch_matmul": Case("nn", _lax("batch_matmul"), shapes=((2, 3, 4), (2, 4, 5))),
    "lax.bitcast_convert_type": Case("n", _bitcast, dtypes=tuple(d for d in DTYPES if d in _SAME_WIDTH), grad=False),
    "lax.broadcast": Case("n", _lax("broadcast", (2,))),
    "lax.broadcast_in_dim": Case("n", _lax("broadcast_in_dim", (2, 3, 4), (1, 2))),
    "lax.broadcast_to_rank": Case("n", _lax("broadcast_to_rank", 4)),
    "lax.broadcasted_iota": Case("n", lambda m, a: m.lax.broadcasted_iota(a.dtype, (3, 4), 1), grad=False),
    # min <= max: with min > max JAX's derivative is 0 where tidu's follows the value (max)
    "lax.clamp": Case("nnn", lambda m, lo, x, d: m.lax.clamp(lo, x, m.lax.add(lo, m.lax.abs(d)))),
    "lax.collapse": Case("n", _lax("collapse", 0, 2), shapes=((2, 3, 4),)),
    "lax.concatenate": Case("nn", lambda m, a, b: m.lax.concatenate([a, b], 1), shapes=((3, 4), (3, 2))),
    "lax.cond": Case("n", lambda m, a: m.lax.cond(True, lambda v: m.lax.mul(v, v), lambda v: m.lax.neg(v), a)),
    "lax.conv": Case("nn", _lax("conv", (1, 1), "SAME"), shapes=((1, 2, 5, 5), (3, 2, 2, 2)),
                     dtypes=FLOATS + COMPLEX),
    "lax.conv_general_dilated": Case("nn", _lax("conv_general_dilated", (2, 1), "VALID", (1, 1), (2, 1)),
                                     shapes=((1, 2, 6, 5), (3, 2, 2, 2)), dtypes=FLOATS + COMPLEX),
    "lax.conv_with_general_padding": Case("nn", _lax("conv_with_general_padding", (1, 1), ((1, 0), (0, 1)),
                                                     (1, 1), (1, 1)), shapes=((1, 2, 5, 5), (3, 2, 2, 2)),
                                          dtypes=FLOATS + COMPLEX),
    "lax.convert_element_type": Case("n", _lax("convert_element_type", np.float32)),
    "lax.dot": Case("nn", _lax("dot"), shapes=((3, 4), (4, 5))),
    "lax.dot_general": Case("nn", _lax("dot_general", (((2,), (1,)), ((0,), (0,)))), shapes=((2, 3, 4), (2, 4, 5))),
    "lax.dynamic_index_in_dim": Case("n", _lax("dynamic_index_in_dim", 1, 0, keepdims=False)),
    "lax.dynamic_slice": Case("n", _lax("dynamic_slice", (1, 1), (2, 2))),
    "lax.dynamic_slice_in_dim": Case("n", _lax("dynamic_slice_in_dim", 1, 2, axis=1)),
    "lax.dynamic_update_index_in_dim": Case("nn", _lax("dynamic_update_index_in_dim", 1, 0),
                                            shapes=((3, 4), (1, 4))),
    "lax.dynamic_update_slice": Case("nn", _lax("dynamic_update_slice", (1, 1)), shapes=((3, 4), (2, 2))),
    "lax.dynamic_update_slice_in_dim": Case("nn", _lax("dynamic_update_slice_in_dim", 1, axis=1),
                                            shapes=((3, 4), (3, 2))),
    "lax.expand_dims": Case("n", _lax("expand_dims", (0, 2))),
    "lax.fori_loop": Case("n", lambda m, a: m.lax.fori_loop(0, 3, lambda i, c: m.lax.mul(c, a), a)),
    "lax.full": Case("n", lambda m, v: m.lax.full((2, 3), v), shapes=((),)),
    "lax.full_like": Case("n", _lax("full_like", 1)),
    "lax.imag": Case("n", _lax("imag"), dtypes=COMPLEX),
    "lax.real": Case("n", _lax("real"), dtypes=COMPLEX),
    "lax.index_in_dim": Case("n", _lax("index_in_dim", 1, 0)),
    "lax.integer_pow": Case("n", _lax("integer_pow", 3)),
    "lax.iota": Case("n", lambda m, a: m.lax.iota(a.dtype, 5), grad=False),
    "lax.map": Case("n", lambda m, a: m.lax.map(lambda r: m.lax.mul(r, r), a)),
    "lax.pad": Case("nn", lambda m, a, v: m.lax.pad(a, v, [(1, 2, 1), (0, -1, 0)]), shapes=((3, 4), ())),
    **{f"lax.reduce_{n}": Case("n", _lax(f"reduce_{n}", (1,))) for n in ("sum", "prod", "max", "min")},
    **{f"lax.reduce_{n}": Case("n", _lax(f"reduce_{n}", (0,)), dtypes=INTS) for n in ("and", "or", "xor")},
    "lax.reshape": Case("n", _lax("reshape", (4, 3), (1, 0))),
    "lax.rev": Case("n", _lax("rev", (0,))),
    "lax.scan": Case("n", lambda m, a: m.lax.scan(lambda c, r: (m.lax.add(c, r), m.lax.mul(c, r)), a[0], a)),
    "lax.select": Case("nn", lambda m, a, b: m.lax.select(m.lax.gt(a, b), a, b)),
    "lax.select_n": Case("nnn", lambda m, a, b, c: m.lax.select_n(m.lax.lt(a, b), a, b, c)),
    **{f"lax.{n}": Case("nk", _lax(n), dtypes=INTS[:3])
       for n in ("shift_left", "shift_right_arithmetic", "shift_right_logical")},
    "lax.population_count": Case("n", _lax("population_count"), dtypes=INTS[:3]),
    "lax.clz": Case("n", _lax("clz"), dtypes=INTS[:3]),
    **{f"lax.bitwise_{n}": Case("nn", _lax(f"bitwise_{n}"), dtypes=INTS) for n in ("and", "or", "xor")},
    "lax.bitwise_not": Case("n", _lax("bitwise_not"), dtypes=INTS),
    "lax.slice": Case("n", _lax("slice", (0, 1), (3, 4), (2, 2))),
    "lax.slice_in_dim": Case("n", _lax("slice_in_dim", 1, 4, 2, axis=1)),
    "lax.split": Case("n", _lax("split", (1, 3), axis=1)),
    "lax.squeeze": Case("n", _lax("squeeze", (1,)), shapes=((3, 1, 4),)),
    "lax.switch": Case("n", lambda m, a: m.lax.switch(1, [lambda v: m.lax.neg(v), lambda v: m.lax.mul(v, v)], a)),
    "lax.tile": Case("n", _lax("tile", (2, 1))),
    "lax.top_k": Case("n", _lax("top_k", 2)),
    "lax.transpose": Case("n", _lax("transpose", (1, 0))),
    "lax.sort": Case("n", _lax("sort", dimension=0)),
    "lax.sort_key_val": Case("nn", _lax("sort_key_val", dimension=1)),
    "lax.while_loop": Case("n", lambda m, a: m.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, m.lax.mul(
        c[1], a)), (0, a))[1], grad=False),
    # --- tidu.scipy.special: integer orders, Python ints -------------------------------
    "special.bessel_jn": Case("n", _in("special", "bessel_jn", v=3)),
    "special.multigammaln": Case("p", lambda m, a: m.special.multigammaln(a + 1, 3)),
    "special.polygamma": Case("p", lambda m, a: m.special.polygamma(2, a)),
    "special.expn": Case("p", lambda m, a: m.special.expn(2, a)),
    # a, b, c positive, x in (0.03, 0.57): nearer 1 the x-derivative's rule, (a b / c)
    # 2F1(a + 1, b + 1; c + 1; x), in bfloat16 rounds a + 1, b + 1 and c + 1, which moves
    # 2F1 there by percents (c - a - b is its exponent at x = 1)
    "special.hyp2f1": Case("pppu", lambda m, a, b, c, x: m.special.hyp2f1(a, b, c, m.np.multiply(x, 0.6))),
    # n and m fixed (|m| <= n <= 8), theta in (0.15, 2.85), phi in (0.3, 5.7): the real and
    # imaginary parts stacked (one real result, so the derivatives are compared too)
    "special.sph_harm_y": Case("uu", lambda m, t, p: _real_imag(m, m.special.sph_harm_y(
        SPH_N, SPH_M, m.np.multiply(t, 3), m.np.multiply(p, 6), n_max=8)), shapes=((12,), (12,))),
    # --- tidu.nn --------------------------------------------------------------------------
    "nn.one_hot": Case("k", _in("nn", "one_hot", 5), grad=False),
    "nn.dot_product_attention": Case("nnn", lambda m, q, k, v: m.nn.dot_product_attention(q, k, v, is_causal=True),
                                     shapes=((2, 3, 4, 5), (2, 4, 2, 5), (2, 4, 2, 5)), dtypes=FLOATS),
}

# --- tidu.scipy.stats: each distribution's methods -------------------------------------------
# distribution -> (the kinds of its arguments after x: shape parameters, loc, scale)
STATS_PARAMS = {"norm": "np", "cauchy": "np", "logistic": "np", "laplace": "np", "expon": "np",
                "gamma": "pnp", "chi2": "pnp", "t": "pnp", "beta": "ppnp", "poisson": "pn", "bernoulli": "u",
                "binom": "pu"}


def _stats_case(dist: str, method: str) -> Case:
    params = STATS_PARAMS[dist]
    if method in ("ppf", "isf"):
        x = "u"
    elif dist in ("poisson", "binom", "bernoulli"):
        x = "k"
    elif dist in ("expon", "gamma", "chi2", "beta"):
        x = "u" if dist == "beta" else "p"
    else:
        x = "n"
    if dist == "poisson" and method == "cdf":
        params = "p"
    if dist == "binom":
        return Case("kku", lambda m, k, n, p: getattr(m.stats.binom, method)(k, n + k, p), dtypes=REAL)
    if dist in ("expon", "gamma", "chi2", "beta"):
        # loc 0: x > loc, the distribution's support
        params = params[:-2] + "p" if params.endswith("np") else params
        return Case(x + params, lambda m, *a: getattr(getattr(m.stats, dist), method)(*a[:-1], 0.0, a[-1]),
                    dtypes=REAL)
    return Case(x + params, lambda m, *a: getattr(getattr(m.stats, dist), method)(*a), dtypes=REAL)


def _stats_methods() -> dict[str, Case]:
    out = {}
    for dist in tst.__all__:
        if dist == "multivariate_normal":
            continue
        cls = getattr(tst, dist)
        for method in sorted(k for k in dir(cls) if not k.startswith("_")):
            out[f"stats.{dist}.{method}"] = _stats_case(dist, method)
    return out


CASES.update(_stats_methods())
_SPD = np.array([[2.0, 0.3, 0.1], [0.3, 1.5, -0.2], [0.1, -0.2, 1.2]])
CASES.update({f"stats.multivariate_normal.{n}": Case(
    "nn", lambda m, x, mu, n=n: getattr(m.stats.multivariate_normal, n)(x, mu, m.np.asarray(_SPD, x.dtype)),
    shapes=((4, 3), (3,)), dtypes=FLOATS) for n in ("logpdf", "pdf")})

# public names that are not functions of arrays to sweep, and why
NOT_SWEPT = {
    "lax.broadcast_shapes": "shape logic (tests/test_lax_reduce_window.py)",
    "lax.ConvDimensionNumbers": "a named tuple", "lax.RoundingMethod": "an enum",
    "lax.MemoryBudget": "a checkpointing schedule (docs/control-flow.md)", "lax.Revolve": "a checkpointing schedule",
    "lax.Schedule": "a checkpointing schedule", "lax.ReverseModeRefused": "an exception",
    "lax.conv_dimension_numbers": "shape logic", "lax.custom_root": "tests/test_control.py compares it with JAX",
    "lax.custom_linear_solve": "tests/test_transforms_parity.py compares it with JAX",
    "special.bernoulli": "its argument is a Python int; the result a constant (tests/test_special.py)",
}


def _lookup(ns: Any, name: str) -> Any:
    for part in name.split("."):
        ns = getattr(ns, part, None)
    return ns


def public_names() -> list[str]:
    names = [f"{mod}.{n}" for mod in ("lax", "special", "nn") for n in getattr(T, mod).__all__]
    return sorted(names) + sorted(k for k in CASES if k.startswith("stats."))


def _generic(name: str) -> Case | None:
    fn = _lookup(J, name)
    if fn is None or not callable(fn):
        return None
    probes = (np.linspace(0.1, 0.9, 12).reshape(SHAPE), np.arange(12, dtype=np.int32).reshape(SHAPE),
              np.linspace(0.1, 0.9, 12).reshape(SHAPE) * (1 + 1j))
    for k in (1, 2, 3):
        for x in probes:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fn(*[x] * k)
            except Exception:  # noqa: BLE001 - JAX's refusals have many types
                continue
            return Case("n" * k, lambda m, *a: _lookup(m, name)(*a))
    return None


@functools.cache
def how(name: str) -> Case | None:
    return CASES.get(name) or _generic(name)


def draw(kind: str, dtype: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":  # (a positive bool is True: no scale of 0, which SciPy's and tidu's nan)
        return np.ones(shape, bool) if kind == "p" else rng.random(size=shape) < 0.5
    if dtype in INTS:
        v = np.round(rng.normal(size=shape) * 3)
        v = {"n": v, "p": np.abs(v) + 1, "u": np.abs(v) % 2, "k": np.abs(v)}[kind]
        return (np.abs(v) if dtype == "uint8" else v).astype(dtype)
    v = {"n": rng.normal(size=shape), "p": np.abs(rng.normal(size=shape)) + 0.5,
         "u": rng.uniform(0.05, 0.95, size=shape), "k": np.round(np.abs(rng.normal(size=shape)) * 3)}[kind]
    if dtype in COMPLEX:
        v = v + 1j * rng.normal(size=shape) * (0 if kind == "k" else 1)
    return v.astype(BF16 if dtype == "bfloat16" else dtype)


def arrays_for(name: str, case: Case, dtype: str) -> list[np.ndarray]:
    seed = sum(map(ord, name))
    return [draw(k, dtype, s, seed + i) for i, (k, s) in enumerate(zip(case.kinds, case.arg_shapes(), strict=True))]


def leaves(out: Any) -> list[np.ndarray]:
    if isinstance(out, list | tuple):
        return [v for o in out for v in leaves(o)]
    return [np.asarray(out)]


def attempt(fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """("ok", result), ("refused", the TypeError or ValueError) or ("crash", another exception)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return "ok", fn(*args)
        except (TypeError, ValueError) as e:
            return "refused", e
        except Exception as e:  # noqa: BLE001 - what the sweep reports
            return "crash", e


def _wide(a: np.ndarray) -> np.ndarray:
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64) if a.dtype.kind in "fcV" else a


def compare(got: Any, want: Any, what: str, dtypes: bool = True, rtol: float | None = None) -> None:
    gl, wl = leaves(got), leaves(want)
    assert len(gl) == len(wl), f"{what}: {len(gl)} outputs, reference {len(wl)}"
    for g, w in zip(gl, wl, strict=True):
        if dtypes:
            assert g.dtype == w.dtype, f"{what}: dtype {g.dtype}, reference {w.dtype}"
        assert g.shape == w.shape, f"{what}: shape {g.shape}, reference {w.shape}"
        if w.dtype.kind in "biu" and g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=what)
        else:
            tol = rtol if rtol is not None else max(RTOL.get(str(g.dtype), 0), RTOL.get(str(w.dtype), 0))
            np.testing.assert_allclose(_wide(g), _wide(w), rtol=tol, atol=tol, equal_nan=True, err_msg=what)


# --- what differs from JAX, and why --------------------------------------------------------

# tidu's documented promotion (docs/transforms.md, "Dtype promotion": "the transcendental
# functions and sqrt of integers give float64"): an integer or bool input to a function
# with float results gives float64, where this JAX (0.12) gives float32 for 8- to 32-bit
# integers and bools. The values are compared at float32's precision.
def _int_to_float64(dtype: str, got: np.ndarray, want: np.ndarray) -> bool:
    return dtype in INTS and got.dtype == np.float64 and want.dtype == np.float32


# complex operands refused where JAX takes them, as documented (docs/lax.md, "Where tidu
# differs"): max, min, atan2, clamp, the cumulative max, min and logsumexp
LAX_REFUSES_COMPLEX = {"lax.max", "lax.min", "lax.atan2", "lax.clamp", "lax.cummax", "lax.cummin",
                       "lax.cumlogsumexp", "lax.reduce_max", "lax.reduce_min"}

# (name, dtype) -> why tidu's value or dtype is not JAX's, deliberately
DIFFERS_FROM_JAX: dict[tuple[str, str], str] = {
    ("nn.dot_product_attention", "float64"): "its softmax is in float32 (JAX's too), and XLA's float32 exp is not "
                                             "NumPy's (40 % of values an ulp apart): tests/test_nn.py compares to "
                                             "float32 rounding",
    **{(n, "float32"): "JAX's norm.ppf and isf of float32 values are float64; tidu's float32"
       for n in ("stats.norm.ppf", "stats.norm.isf")},
    **{(n, "uint8"): "JAX subtracts the maximum (or negates) in uint8, which wraps around (softmax nan, log1mexp "
                     "nan); tidu computes in float64" for n in ("nn.softmax", "nn.log_softmax", "nn.log1mexp",
                                                               "special.softmax", "special.log_softmax")},
    ("nn.hard_tanh", "uint8"): "JAX compares with -1 wrapped around to 255 (hard_tanh(uint8 0) is 255); tidu clips "
                               "above only (tidu/nn.py)",
}

# (name, dtype) -> where JAX's value is not SciPy's (JAX's float32 and float16 series give
# nan or lose digits at these points), the reference is SciPy's, in float64 rounded to the
# result's dtype: name -> (SciPy's function of the float64 arrays, the dtypes, why)
_JAX_NAN_F32 = "JAX's float32 (for integers: its float32 result) gives nan or its poles' limits wrongly; tidu SciPy's"
SCIPY_REFERENCE: dict[str, tuple[Callable[..., Any], tuple[str, ...], str]] = {
    "special.loggamma": (lambda x: scipy.special.loggamma(x), INTS, "JAX's loggamma is nan at 0, SciPy's inf"),
    "special.zeta": (lambda x, q: scipy.special.zeta(x, q), INTS, _JAX_NAN_F32),
    "special.hyp1f1": (lambda a, b, x: scipy.special.hyp1f1(a, b, x), INTS, "JAX's hyp1f1 at b = -1 is 1 (SciPy's "
                                                                           "inf)"),
    "special.polygamma": (lambda x: scipy.special.polygamma(2, x), ("bool",), "JAX's polygamma(2, 0) is nan, SciPy's "
                                                                            "-inf"),
    **{f"special.{n}": (getattr(scipy.special, n), ("float16",), "JAX's float16 series are nan for some x")
       for n in ("expi", "exp1")},
    "special.expn": (lambda x: scipy.special.expn(2, x), ("float16",), "JAX's float16 expn is nan at 1.5"),
    "special.poch": (lambda z, m: scipy.special.poch(z, m), INTS,
                     "JAX's poch is nan where gamma(z) has a pole (z <= 0 whole); SciPy's the limit (poch(-3, 2) = 6)"),
    "special.bessel_jn": (lambda z: np.stack([scipy.special.jv(v, z) for v in range(4)]),
                          ("float32", "bfloat16", *INTS), "JAX's float32 values are nan below |z| = 10 "
                                                          "(tests/test_special.py)"),
    "special.owens_t": (lambda h, a: scipy.special.owens_t(h, a), ("float32", "float16", "bfloat16", *INTS),
                        "JAX's owens_t is float64 for every input (tidu's keeps float32, float16 and bfloat16, as "
                        "SciPy's), of integers at float32's precision (owens_t(1, 2) 0.0784682008, SciPy's "
                        "0.0784681870)"),
    "special.sph_harm_y": (lambda t, p: (lambda y: np.stack([y.real, y.imag]))(scipy.special.sph_harm_y(
        SPH_N, SPH_M, 3 * t, 6 * p)), ("float32", *INTS),
        "JAX's sph_harm_y is complex128 for every input (tidu's complex64 for float32, as SciPy's) and of "
        "integer angles computed in float32 (Y_0^0 0.282094806, SciPy's 0.282094792)"),
    "stats.poisson.logpmf": (lambda k, mu, loc: scipy.stats.poisson.logpmf(k, mu, loc), ("bfloat16",),
                             "JAX rounds k - loc to bfloat16 (5 - -1.992 to 7: -13.5), SciPy's -inf (not an integer)"),
    "stats.beta.pdf": (lambda x, a, b, s: scipy.stats.beta.pdf(x, a, b, 0.0, s), INTS[:3],
                       "JAX's beta.pdf(1, 10, 1) is 9.999996 (its betaln), SciPy's 10"),
}

# (name, dtype) -> why tidu refuses a call JAX takes
TIDU_REFUSES: dict[tuple[str, str], str] = {
    **{(n, d): "complex operands refused (docs/lax.md)" for n in LAX_REFUSES_COMPLEX for d in COMPLEX},
    **{("special.erfcx", d): "erfcx is a real primitive (rules/special.rules)" for d in COMPLEX},
    **{("special.loggamma", d): "lgamma is a real primitive (rules/special.rules)" for d in COMPLEX},
    **{("special.gamma", d): "gamma of complex values: no complex lgamma (rules/special.rules)" for d in COMPLEX},
    **{("special.owens_t", d): "Owen's T is real (SciPy's too); JAX computes complex values" for d in COMPLEX},
    ("nn.hard_tanh", "bool"): "NumPy's negative of bools (-1 as a bool bound): a TypeError, eager and traced",
}

# (name, dtype) -> a known bug: the test is a strict xfail with this reason
KNOWN: dict[tuple[str, str], str] = {}


def _params(dtypes: tuple[str, ...] = DTYPES) -> list[Any]:
    out = []
    for name in public_names():
        if name in NOT_SWEPT:
            continue
        case = CASES.get(name)  # (a generic call is found when the test runs)
        for dtype in dtypes:
            if case is not None and dtype not in case.dtypes:
                continue
            marks = [pytest.mark.slow] if dtype not in FAST_DTYPES else []
            if (name, dtype) in KNOWN:
                marks.append(pytest.mark.xfail(strict=True, reason=KNOWN[name, dtype]))
            out.append(pytest.param(name, dtype, marks=marks, id=f"{name}-{dtype}"))
    return out


def _float_like(dtype: str) -> str | None:
    """The float dtype results of a ``dtype`` input keep (complex: the real counterpart)."""
    return {"complex64": "float32", "complex128": "float64"}.get(dtype, dtype if dtype in FLOATS else None)


@pytest.mark.parametrize(("name", "dtype"), _params())
def test_eager_traced_and_jax_agree(name: str, dtype: str) -> None:
    case = how(name)
    assert case is not None, f"{name}: no generic call fits; add an entry to CASES (or NOT_SWEPT with a reason)"
    arrays = arrays_for(name, case, dtype)
    jstat, want = attempt(lambda *a: jax.tree_util.tree_map(np.asarray, case.call(J, *a)), *arrays)
    estat, eager = attempt(lambda *a: case.call(T, *a), *arrays)
    tstat, traced = attempt(lambda *a: tidu.jit(lambda *b: case.call(T, *b))(*a), *arrays)
    what = f"{name} on {dtype}"
    assert estat != "crash", f"{what}: eager raises {eager!r}"
    assert tstat != "crash", f"{what}: traced raises {traced!r}"
    assert estat == tstat, f"{what}: eager {estat} ({eager!r:.200}), traced {tstat} ({traced!r:.200})"
    if estat == "refused":
        assert jstat != "ok" or (name, dtype) in TIDU_REFUSES, f"{what}: tidu refuses ({eager}), JAX takes it"
        return
    compare(traced, eager, f"{what}: traced against eager")
    if jstat != "ok":
        # tidu takes what JAX refuses (a float16 ndtr, an integer sigmoid): floats keep their dtype
        keep = _float_like(dtype)
        for out in leaves(traced):
            if keep is not None and out.dtype.kind == "f":
                assert str(out.dtype) == keep, f"{what}: JAX refuses, tidu gives {out.dtype}"
        return
    if (name, dtype) in DIFFERS_FROM_JAX:
        return
    if name in SCIPY_REFERENCE and dtype in SCIPY_REFERENCE[name][1]:
        with np.errstate(all="ignore"):
            ref = SCIPY_REFERENCE[name][0](*(a.astype(np.float64) for a in arrays))
        for g in leaves(traced):
            compare(g, np.asarray(ref).astype(g.dtype), f"{what}: traced against SciPy ({SCIPY_REFERENCE[name][2]})")
        return
    gl, wl = leaves(traced), leaves(want)
    assert len(gl) == len(wl), f"{what}: {len(gl)} outputs, JAX {len(wl)}"
    for g, w in zip(gl, wl, strict=True):
        if _int_to_float64(dtype, g, w):
            compare(g, w, f"{what}: traced against JAX (float64 against JAX's float32)", dtypes=False)
        else:
            compare(g, w, f"{what}: traced against JAX")


# --- first derivatives ------------------------------------------------------------------------

# name -> why the derivative is not compared with JAX's
NO_GRAD = {
    "lax.argmax": "integer results", "lax.argmin": "integer results", "nn.one_hot": "no derivative in x",
    "nn.dot_product_attention": "a float32 softmax: tests/test_nn.py compares its gradients to float32 rounding",
    "lax.population_count": "integers", "lax.clz": "integers",
}


def _grad_params(dtypes: tuple[str, ...]) -> list[Any]:
    out = []
    for p in _params(dtypes):
        name, dtype = p.values
        case = CASES.get(name)
        if (case is not None and not case.grad) or name in NO_GRAD or (name, dtype) in KNOWN:
            continue
        out.append(pytest.param(name, dtype, marks=[pytest.mark.slow] if dtype != "float64" else [],
                                id=f"{name}-{dtype}"))
    return out


def _total(m: Any, out: Any) -> Any:
    total = 0.0
    for leaf in jax.tree_util.tree_leaves(out):
        if np.dtype(leaf.dtype).kind == "f" or np.dtype(leaf.dtype) == BF16:
            total = total + m.np.sum(leaf.astype(np.float64) if m is J else m.np.astype(leaf, np.float64))
    return total


@pytest.mark.parametrize(("name", "dtype"), _grad_params(FLOATS))
def test_first_derivatives_as_jax(name: str, dtype: str) -> None:
    case = how(name)
    if not name.startswith(("lax.", "nn.")):
        # special functions and distributions inside their domains: positive arguments (out
        # of their domains tidu's values and derivatives are SciPy's nan, JAX's vary)
        case = Case(case.kinds.replace("n", "p"), case.call, case.shapes, case.dtypes, case.grad)
    arrays = arrays_for(name, case, dtype)
    argnums = tuple(range(len(arrays)))
    wide = (name, dtype) in GRAD_JAX_IN_FLOAT64  # JAX's own derivative in this dtype is wrong
    jstat, want = attempt(lambda *a: jax.tree_util.tree_map(np.asarray, jax.grad(
        lambda *b: _total(J, case.call(J, *b)), argnums=argnums)(*a)),
        *([_wide(a) for a in arrays] if wide else arrays))
    if jstat != "ok":
        pytest.skip(f"JAX: {want}")
    if wide:
        want = jax.tree_util.tree_map(lambda w: w.astype(dtype), want)
        if name == "stats.cauchy.isf":  # JAX's derivative is 0 at q = 0.5 (bfloat16 rounds a draw there)
            want = jax.tree_util.tree_map(lambda w: np.where(w == 0, np.nan, w).astype(dtype), want)
    tstat, got = attempt(lambda *a: tidu.grad(lambda *b: _total(T, case.call(T, *b)), argnums=argnums)(*a), *arrays)
    assert tstat == "ok", f"{name} on {dtype}: tidu.grad {tstat}: {got!r}"
    rtol = {"float64": 1e-8, "float32": 1e-4}.get(dtype, 3e-2)
    if name in GRAD_WHERE_JAX_IS_FINITE or wide:
        for g, w in zip(leaves(got), leaves(want), strict=True):
            finite = np.isfinite(_wide(w))
            why = GRAD_WHERE_JAX_IS_FINITE.get(name) or GRAD_JAX_IN_FLOAT64[name, dtype]
            compare(g[finite], w[finite], f"d {name} on {dtype} ({why})", rtol=rtol)
        return
    if name in GRAD_NOT_IN_COUNTS:
        got, want = leaves(got)[1:], leaves(want)[1:]
    compare(got, want, f"d {name} on {dtype}", rtol=rtol)


# where JAX's derivative is nan (tidu's finite), the derivatives are compared elsewhere
GRAD_WHERE_JAX_IS_FINITE = {
    "special.spence": "JAX's derivative is nan for 1 < z <= 2 (tests/test_special.py)",
    "special.zeta": "JAX's derivative in q is nan at some points where tidu's is finite",
    "stats.beta.logpdf": "outside the support tidu's derivative is 0 (tidu/scipy/stats.py), JAX's nan",
    "stats.beta.pdf": "outside the support tidu's derivative is 0 (tidu/scipy/stats.py), JAX's nan",
}
# (name, dtype) -> why JAX's derivative in that dtype is no reference: tidu's is compared
# with JAX's on the same points in float64, to the dtype's tolerance
GRAD_JAX_IN_FLOAT64 = {
    ("special.bessel_jn", "float32"): "JAX's bessel_jn is nan below |z| = 10 in float32 (its values too)",
    ("special.bessel_jn", "bfloat16"): "JAX's bessel_jn is nan below |z| = 10 in bfloat16 (its values too)",
    ("special.expn", "float16"): "JAX's float16 expn derivative is nan at some points (its values are too: SciPy's "
                                 "are the reference there)",
    ("stats.cauchy.isf", "float16"): "JAX's float16 isf derivative is nan at q near 0.5",
    ("stats.cauchy.isf", "bfloat16"): "JAX's isf derivative is 0 at q = 0.5, where a bfloat16 draw rounds (its "
                                      "true value there is -pi scale): compared elsewhere",
}
# the derivative in a discrete count k is 0 in tidu; JAX differentiates its formula in k
GRAD_NOT_IN_COUNTS = {"stats.bernoulli.logpmf", "stats.bernoulli.pmf"}


def test_every_public_name_is_swept() -> None:
    """A new public name needs a generic call, a CASES entry or a NOT_SWEPT reason."""
    missing = [n for n in public_names() if n not in NOT_SWEPT and how(n) is None]
    assert not missing, f"add these to CASES in {__file__} (or to NOT_SWEPT, with a reason): {missing}"
    stale = [n for n in (*CASES, *NOT_SWEPT) if n not in public_names()]
    assert not stale, f"entries for names the modules no longer have: {stale}"
