"""Every public tidu.numpy function against jax.numpy (float64 / complex128, CPU): values,
first and second derivatives, on random shapes, real and complex where defined.

``CASES`` maps a function name to how to call it (argument kinds, keyword arguments, which
arguments are differentiated). For real inputs the derivatives checked are the gradient of
``sum(w * f(x))`` (reverse mode) and its JVP (a Hessian-vector product, forward over
reverse); for complex inputs the JVP and the JVP of the JVP (both conventions agree with
JAX there). ``test_every_public_name_is_tested_or_excluded`` keeps the table complete.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from vmap_util import assert_default_applies_every_rule  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402

RTOL, ATOL = 1e-9, 1e-11


@dataclass
class Case:
    """How to call one function: ``args`` are argument kinds (see ``draw``) or constants
    (anything that is not a str), ``diff`` the positions differentiated (default: the drawn
    inexact ones), ``complex`` whether complex inputs are tried too, ``grad`` False for
    functions whose output has no derivative (bools, integers, piecewise constants)."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    diff: tuple[int, ...] | None = None
    complex: bool = True
    grad: bool = True
    jax_name: str | None = None
    jax_fn: Callable | None = None
    slow: bool = False
    via: Callable | None = None  # call as via(module, *args) (string arguments, ...)


def draw(rng: np.random.Generator, kind: str, dtype: str, shape: tuple[int, ...]) -> Any:
    """One argument: ``x`` (normal), ``u`` (in (-0.9, 0.9)), ``p`` (in (0.5, 2)), ``g1`` (> 1.2),
    ``s`` (a scalar), ``xn`` (normal, a quarter nan), ``i`` (integers in [-3, 3]), ``b``
    (bools); a suffix ``:2x3`` fixes the shape."""
    kind, _, fixed = kind.partition(":")
    if fixed:
        shape = tuple(int(d) for d in fixed.split("x")) if fixed != "0" else ()
    cplx = dtype == "complex128"
    if kind == "i":
        return rng.integers(-3, 4, size=shape)
    if kind == "b":
        return rng.random(shape) < 0.5
    if kind == "s":
        shape = ()
    lo_hi = {"u": (-0.9, 0.9), "p": (0.5, 2.0), "g1": (1.2, 3.0)}.get(kind)
    if kind == "xn":  # normal with some nan
        out = draw(rng, "x", dtype, shape)
        return np.where(rng.random(shape) < 0.25, np.nan, out)
    if lo_hi is None:
        re = rng.normal(size=shape)
        im = rng.normal(size=shape)
    else:
        re = rng.uniform(*lo_hi, size=shape)
        im = rng.uniform(-0.3, 0.3, size=shape)
    out = re + 1j * im if cplx else re
    return np.asarray(out) if shape else out.item() if isinstance(out, np.ndarray) else out


def _shape(rng: np.random.Generator) -> tuple[int, ...]:
    return [(5,), (3, 4), (2, 3, 4), (4, 3)][int(rng.integers(4))]


X, XN, U, P, G1, I_, B = "x", "xn", "u", "p", "g1", "i", "b"


def _nanstd_of_one_is_var(x: Any, axis: int) -> Any:
    """jnp.nanstd as tidu documents it: over one non-nan element it is nanvar itself, 0
    with derivative 0 (jnp.nanstd's is sqrt's nan at 0)."""
    v = jnp.nanvar(x, axis=axis)
    one = jnp.sum(~jnp.isnan(x), axis=axis) == 1
    return jnp.where(one, v, jnp.sqrt(jnp.where(one, 1.0, v)))


def _jax_sorted_roots(p: Any) -> Any:
    """jnp.roots(p, strip_zeros=False) in tnp.roots' order (sorted by real part, then
    imaginary part; jnp.roots keeps LAPACK's), with its second derivatives: the eigenvalues
    of the same companion matrix with enable_eigvec_derivs (jnp.roots' have none), sorted
    (jnp.sort_complex: the derivative follows each root)."""
    n = p.shape[0] - 1
    a = jnp.concatenate([(-p[1:] / p[0])[None, :], jnp.eye(n - 1, n, dtype=p.dtype)], axis=0)
    return jnp.sort_complex(jax.lax.linalg.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False,
                                               enable_eigvec_derivs=True)[0])


CASES: dict[str, Case] = {
    # elementwise: rounding and modular arithmetic
    "floor": Case((X,), complex=False, grad=False),
    "ceil": Case((X,), complex=False, grad=False),
    "rint": Case((X,), complex=False, grad=False),
    "trunc": Case((X,), complex=False, grad=False),
    "fix": Case((X,), complex=False, grad=False, jax_name="trunc"),
    "round": Case((X,), {"decimals": 2}, complex=False, grad=False),
    "around": Case((X,), complex=False, grad=False, jax_name="round"),
    "fmod": Case((X, P), complex=False),
    "remainder": Case((X, P), complex=False),
    "mod": Case((X, P), complex=False),
    "floor_divide": Case((X, P), complex=False, grad=False),
    "divmod": Case((X, P), complex=False, grad=False),
    "modf": Case((X,), complex=False),
    # inverse trigonometric and hyperbolic, angles
    "arctan2": Case((X, X), complex=False),
    "arctan": Case((X,)),
    "arcsin": Case((U,)),
    "arccos": Case((U,)),
    "arcsinh": Case((X,)),
    "arccosh": Case((G1,)),
    "arctanh": Case((U,)),
    "hypot": Case((X, X), complex=False),
    "deg2rad": Case((X,), complex=False),
    "rad2deg": Case((X,), complex=False),
    "radians": Case((X,), complex=False),
    "degrees": Case((X,), complex=False),
    "angle": Case((X,), grad=False),
    "exp2": Case((X,)),
    "logaddexp": Case((X, X), complex=False),
    "logaddexp2": Case((X, X), complex=False),
    "cbrt": Case((P,), complex=False),
    "sinc": Case((X,), complex=False),
    "i0": Case((X,), complex=False),
    "float_power": Case((P, X), complex=False),
    "fabs": Case((P,), complex=False),
    "copysign": Case((P, X), complex=False),
    "nextafter": Case((X, X), complex=False),  # derivative 1 in x1, 0 in x2 (JAX's); bits: test_numpy_gaps_s10
    "signbit": Case((X,), complex=False, grad=False),
    "heaviside": Case((X, X), complex=False, grad=False),
    "fmax": Case((X, X), complex=False),
    "fmin": Case((X, X), complex=False),
    "ldexp": Case((X, I_), complex=False),
    # predicates and logic
    "isnan": Case((X,), grad=False),
    "isfinite": Case((X,), grad=False),
    "isinf": Case((X,), grad=False),
    "isposinf": Case((X,), complex=False, grad=False),
    "isneginf": Case((X,), complex=False, grad=False),
    "nan_to_num": Case((X,)),
    "isclose": Case((X, X), grad=False),
    "allclose": Case((X, X), grad=False),
    "logical_and": Case((B, B), complex=False, grad=False),
    "logical_or": Case((B, B), complex=False, grad=False),
    "logical_xor": Case((B, B), complex=False, grad=False),
    "logical_not": Case((B,), complex=False, grad=False),
    # reductions and statistics
    "sum": Case((X,), {"axis": -1}),
    "prod": Case((X,), {"axis": 0}),
    "max": Case((X,), {"axis": -1}, complex=False),
    "amax": Case((X,), complex=False),
    "minmax": Case((X,), {"axis": -1}, complex=False),
    "min": Case((X,), {"axis": 0, "keepdims": True}, complex=False),
    "amin": Case((X,), complex=False),
    "mean": Case((X,), {"axis": 0}),
    "all": Case((B,), {"axis": 0}, complex=False, grad=False),
    "any": Case((X,), {"axis": -1}, grad=False),
    "count_nonzero": Case((I_,), {"axis": 0}, complex=False, grad=False),
    "ptp": Case((X,), {"axis": -1}, complex=False),
    "var": Case((X,), {"axis": 0, "ddof": 1}),
    "std": Case((X,), {"axis": -1}),
    "average": Case((X, None, P)),
    "logsumexp": Case((X,), {"axis": -1}, complex=False, jax_fn=jax.scipy.special.logsumexp),
    "nansum": Case(("xn:3x4",), {"axis": 0}),
    "nanprod": Case((XN,), {"axis": 0}),
    "nanmean": Case((XN,), {"axis": -1}),
    "nanmax": Case((XN,), complex=False),
    "nanmin": Case((XN,), {"axis": 0}, complex=False),
    "nanvar": Case((XN,), {"axis": 0}),
    "nanstd": Case((XN,), {"axis": 0}, jax_fn=lambda x, axis: _nanstd_of_one_is_var(x, axis)),
    "argmax": Case((X,), {"axis": -1}, complex=False, grad=False),
    "argmin": Case((X,), complex=False, grad=False),
    "nanargmax": Case((XN,), {"axis": 0}, complex=False, grad=False),
    "nanargmin": Case((XN,), complex=False, grad=False),
    "cumsum": Case((X,), {"axis": -1}),
    "cumprod": Case((X,), {"axis": 0}),
    "cumulative_sum": Case((X,), {"axis": 0, "include_initial": True}),
    "cumulative_prod": Case(("x:5",), {"include_initial": True}),
    "nancumsum": Case((XN,), {"axis": 0}),
    "cummax": Case((X,), {"axis": 0}, complex=False, jax_fn=lambda x, axis: jax.lax.cummax(x, axis=axis)),
    "cummin": Case((X,), {"axis": -1}, complex=False,
                   jax_fn=lambda x, axis: jax.lax.cummin(x, axis=axis % x.ndim)),
    "nancumprod": Case((XN,), {"axis": -1}),
    "diff": Case((X,), {"n": 2, "axis": 0}),
    "ediff1d": Case((X,), {"to_begin": np.array([1.0, 2.0])}),
    "trapezoid": Case((X,), {"dx": 0.5}),
    "sort": Case((X,), {"axis": 0}),
    "argsort": Case((X,), {"axis": -1}, grad=False),
    "median": Case((X,), {"axis": 0}, complex=False),
    "nanmedian": Case(("xn:4x5",), {"axis": 1}, complex=False),
    "quantile": Case((X, np.array([0.1, 0.5, 0.95])), {"axis": -1}, complex=False),
    "nanquantile": Case(("xn:3x6", 0.3), {"axis": 1}, complex=False),
    "percentile": Case((X, 37.0), complex=False),
    "nanpercentile": Case(("xn:7", np.array([20.0, 80.0])), complex=False),
    # shapes
    "moveaxis": Case(("x:2x3x4", 0, -1)),
    "permute_dims": Case(("x:2x3x4", (1, 2, 0))),
    "matrix_transpose": Case(("x:2x3x4",)),
    "atleast_1d": Case(("x:0",)),
    "atleast_2d": Case(("x:4",)),
    "atleast_3d": Case(("x:3x4",)),
    "flip": Case((X,), {"axis": 0}),
    "fliplr": Case(("x:3x4",)),
    "flipud": Case(("x:3x4",)),
    "rot90": Case(("x:3x4",), {"k": 3}),
    "roll": Case((X,), {"shift": 2, "axis": 0}),
    "tile": Case(("x:2x3", (2, 1, 2))),
    "repeat": Case(("x:2x3", 2), {"axis": 1}),
    "pad": Case(("x:3x4", ((1, 2), (2, 0))), {"mode": "reflect"}),
    "append": Case(("x:2x3", "x:1x3"), {"axis": 0}),
    "broadcast_arrays": Case(("x:3x1", "x:4")),
    "meshgrid": Case(("x:3", "x:4")),
    "split": Case(("x:6x2", 3)),
    "array_split": Case(("x:7x2", 3)),
    "vsplit": Case(("x:4x3", [1, 3])),
    "hsplit": Case(("x:3x4", 2)),
    "dsplit": Case(("x:2x2x4", 2)),
    # matrices and contractions
    "diagonal": Case(("x:3x4x5",), {"offset": 1, "axis1": 2, "axis2": 0}),
    "trace": Case(("x:4x3",), {"offset": -1}),
    "diag": Case(("x:4",), {"k": -1}),
    "diagflat": Case(("x:2x2",), {"k": 1}),
    "tril": Case(("x:3x4",), {"k": 1}),
    "triu": Case(("x:2x4x3",), {"k": -1}),
    "tensordot": Case(("x:2x3x4", "x:4x3x5"), {"axes": ([1, 2], [1, 0])}),
    "kron": Case(("x:2x3", "x:3x2")),
    "cross": Case(("x:4x3", "x:3")),
    "vecdot": Case(("x:3x4", "x:4")),
    "matvec": Case(("x:2x3x4", "x:4")),
    "vecmat": Case(("x:3", "x:3x4")),
    "take": Case(("x:4x5", np.array([[3, 0], [-1, 3]])), {"axis": 1}),
    "take_along_axis": Case(("x:3x4", np.array([[0, 3], [2, 2], [1, 0]])), {"axis": 1}),
}

CASES.update({
    # array-API aliases
    "acos": Case((U,)), "asin": Case((U,)), "atan": Case((X,)), "acosh": Case((G1,)), "asinh": Case((X,)),
    "atanh": Case((U,)), "atan2": Case((X, X), complex=False), "pow": Case((P, X)),
    # constructors with traced values, copies
    "full": Case(((2, 3), "x:0")),
    "linspace": Case(("x:0", "x:0", 7)),
    "logspace": Case(("x:0", "x:0", 5), complex=False),
    "geomspace": Case(("p:0", "p:0", 6), complex=False),
    "copy": Case((X,)),
    # more shapes
    "rollaxis": Case(("x:2x3x4", 2, 1)),
    "unstack": Case(("x:3x4",), {"axis": 1}),
    "block": Case(("x:2x2", "x:2x3", "x:1x5"), via=lambda m, a, b, c: m.block([[a, b], [c]])),
    "resize": Case(("x:2x3", (4, 4))),
    "delete": Case(("x:4x5", np.array([0, 3])), {"axis": 1}),
    "insert": Case(("x:3x4", 2, "x:3"), {"axis": 1}),
    # selection
    "select": Case(("x:5", "x:5"), via=lambda m, a, b: m.select([a > 0.5, b < 0], [a * b, m.sin(a)], 0.5),
                   complex=False),
    "piecewise": Case(("x:6",), via=lambda m, x: m.piecewise(x, [x < 0, x > 1], [lambda v: v ** 2, m.exp, 0.5]),
                      complex=False),
    "choose": Case(("x:3x4", "x:3x4", "x:3x4"),
                   via=lambda m, a, b, c: m.choose(np.array([[0, 1, 2, 1]] * 3), [a, b, c], mode="clip")),
    "compress": Case(("x:3x4", ), via=lambda m, a: m.compress(np.array([True, False, True, True]), a, axis=1,
                                                  **({"size": 3} if m is jnp else {}))),
    "put": Case(("x:3x4", "x:3"), via=lambda m, a, v: m.put(a, np.array([1, 7, 11]), v, inplace=False)),
    "place": Case(("x:3x4", "x:5"), via=lambda m, a, v: m.place(a, np.arange(12).reshape(3, 4) % 3 != 1, v,
                                                           inplace=False)),
    "put_along_axis": Case(("x:3x4", "x:3x1"), via=lambda m, a, v: m.put_along_axis(
        a, np.array([[0], [3], [1]]), v, axis=1, inplace=False)),
    "fill_diagonal": Case(("x:4x3", "x:3"), via=lambda m, a, v: m.fill_diagonal(a, v, inplace=False)),
    # statistics, sorting, interpolation
    "cov": Case(("x:3x6",), {"ddof": 0}),
    "corrcoef": Case(("x:3x6",)),
    "sort_complex": Case(("x:6",)),
    "searchsorted": Case((np.array([-1.5, -0.2, 0.0, 0.7, 2.0]), "x:3x4"), grad=False, complex=False,
                         via=lambda m, a, v: m.searchsorted(a, v, side="right")),
    "lexsort": Case(("i:8", "x:8"), grad=False, complex=False, via=lambda m, a, b: m.lexsort((b, a))),
    # sets: a static size (traced, as under jax.jit); values differentiated at first occurrences
    "unique": Case(("x:2x3",), {"size": 8}),
    "unique_values": Case(("x:6",), {"size": 4}),
    "unique_counts": Case(("i:8",), {"size": 9}, grad=False, complex=False),
    "unique_inverse": Case(("i:3x4",), {"size": 5}, grad=False, complex=False),
    "unique_all": Case(("i:8",), {"size": 6}, grad=False, complex=False),
    "union1d": Case(("x:4", "x:2x2"), {"size": 9}),
    "intersect1d": Case(("i:6", "i:5"), {"size": 4, "return_indices": True}, grad=False, complex=False),
    "setdiff1d": Case(("i:6", "i:4"), {"size": 5}, grad=False, complex=False),
    "setxor1d": Case(("i:6", "i:4"), {"size": 7}, grad=False, complex=False),
    "isin": Case(("i:3x4", "i:5"), grad=False, complex=False),
    "top_k": Case(("x:3x6", 3), complex=False),
    "partition": Case(("x:3x6", 2), {"axis": -1}, complex=False),  # (jax.numpy refuses complex values)
    "argpartition": Case(("i:4x6", -2), {"axis": 0}, grad=False, complex=False),
    "interp": Case(("x:7", np.array([-1.0, -0.2, 0.5, 1.5]), "x:4"), complex=False),
    "gradient": Case(("x:4x5",)),
    "unwrap": Case(("x:9",), complex=False, via=lambda m, p: m.unwrap(4 * p)),
    # polynomials and convolution
    "polyval": Case(("x:4", "x:5")),
    "polyadd": Case(("x:3", "x:5")),
    "polysub": Case(("x:4", "x:2")),
    "polymul": Case(("x:3", "x:4")),
    "polyder": Case(("x:5", 2)),
    "polyint": Case(("x:4", 2, "x:2")),
    "poly": Case(("x:3",)),
    "polydiv": Case(("x:6", "p:3")),
    "polyfit": Case(("p:8", "x:8", 3), complex=False),
    "roots": Case(("x:5",), {"strip_zeros": False}, jax_fn=lambda p, strip_zeros: _jax_sorted_roots(p)),
    "vander": Case(("x:4", 3)),
    "convolve": Case(("x:6", "x:3"), {"mode": "same"}),
    "correlate": Case(("x:6", "x:4"), {"mode": "full"}),
    # functions of functions
    "vectorize": Case(("x:2x3", "x:3"), via=lambda m, a, b: m.vectorize(lambda u, v: u * m.sin(v) + u ** 2)(a, b)),
    "apply_along_axis": Case(("x:3x4",), via=lambda m, a: m.apply_along_axis(lambda r: m.cumsum(r) * r[0], 1, a)),
    "apply_over_axes": Case(("x:2x3x4",), via=lambda m, a: m.apply_over_axes(m.sum, a, [0, 2])),
})

# the functions tidu.numpy had before this table (tested in other files too): slow step
for _name in ("exp", "expm1", "sin", "cos", "tan", "tanh", "sinh", "cosh", "negative", "positive", "square",
              "conj", "conjugate", "real", "imag"):
    CASES[_name] = Case((X,), slow=True)
for _name in ("log", "log1p", "log2", "log10", "sqrt", "reciprocal"):
    CASES[_name] = Case((P,), slow=True)
CASES["abs"] = CASES["absolute"] = Case((P,), slow=True)
CASES["sign"] = Case((P,), complex=False, slow=True)
for _name in ("add", "subtract", "multiply", "divide", "true_divide"):
    CASES[_name] = Case((X, P), slow=True)
CASES["power"] = Case((P, X), slow=True)
for _name in ("maximum", "minimum"):
    CASES[_name] = Case((X, X), complex=False, slow=True)
for _name in ("less", "less_equal", "greater", "greater_equal"):
    CASES[_name] = Case((X, X), complex=False, grad=False, slow=True)
for _name in ("equal", "not_equal"):
    CASES[_name] = Case((X, X), grad=False, slow=True)
CASES["clip"] = Case((X, -0.5, 0.5), complex=False, slow=True)
CASES["where"] = Case((B, X, X), slow=True)
for _name, _args in {"matmul": ("x:2x3x4", "x:4x2"), "dot": ("x:3x4", "x:4"), "inner": ("x:3x4", "x:2x4"),
                     "vdot": ("x:3x4", "x:3x4"), "outer": ("x:3", "x:4")}.items():
    CASES[_name] = Case(_args, slow=True)
CASES["einsum"] = Case(("x:2x3", "x:3x4"), slow=True, via=lambda m, a, b: m.einsum("ij,jk->ik", a, b))
for _name, _args in {"reshape": ("x:2x6", (3, 4)), "ravel": ("x:2x3",), "transpose": ("x:2x3x4", (2, 0, 1)),
                     "swapaxes": ("x:2x3x4", 0, 2), "expand_dims": ("x:2x3", 1), "squeeze": ("x:2x1x3",),
                     "broadcast_to": ("x:3", (2, 3))}.items():
    CASES[_name] = Case(_args, slow=True)
for _name in ("zeros_like", "ones_like", "empty_like"):
    CASES[_name] = Case((X,), grad=False, slow=True)
CASES["full_like"] = Case((X, 2.5), grad=False, slow=True)
CASES["asarray"] = CASES["array"] = Case((X,), slow=True)
CASES["astype"] = Case((X,), complex=False, grad=False, slow=True, via=lambda m, a: m.astype(a, np.float32))

# not compared here, and why
EXCLUDED = {
    **{n: "integer bit operations (no derivative): tests/test_dtypes_more.py" for n in (
        "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_invert", "invert", "left_shift",
        "right_shift", "bitwise_left_shift", "bitwise_right_shift")},
    "linalg": "a module: tests/test_linalg.py",
    "flatten": "no jax.numpy counterpart (ndarray method); it is ravel",
    "rsqrt": "no jax.numpy counterpart (jax.lax.rsqrt); tests/test_frontend.py",
    "getitem": "the indexing operator; tests/test_numpy_coverage.py::test_indexing",
    "shape": "not traced: reads the shape", "ndim": "not traced: reads the rank",
    "result_type": "dtype logic: tests/test_frontend.py", "broadcast_shapes": "shape logic",
    **{n: "dtype or shape introspection: tests/test_dtypes_more.py" for n in (
        "can_cast", "finfo", "iinfo", "iscomplexobj", "isdtype", "isrealobj", "isscalar", "issubdtype", "iterable",
        "promote_types", "size")},
    "zeros": "NumPy's constructor", "ones": "NumPy's constructor", "full": "NumPy's constructor",
    "eye": "NumPy's constructor", "arange": "NumPy's constructor", "linspace": "NumPy's constructor",
    "identity": "NumPy's constructor", "tri": "NumPy's constructor", "empty": "zeros, a constructor",
    "ArrayLike": "a type alias", "Tracer": "the traced value type",
    "op": "tidu.op, a primitive of the active catalog: tests/test_user_primitives.py",
    "at": "tnp.at(x)[index]: JAX's x.at as a function (no jax.numpy counterpart); tests/test_numpy_issue30.py",
}


# ported from jax.numpy (tests/test_numpy_ported.py has their edge cases): selections with a
# static size=, binning, and the functions of a traced value among the index tricks
CASES.update({
    "nonzero": Case((X,), {"size": 3}, complex=False, grad=False),
    "flatnonzero": Case((X,), {"size": 4, "fill_value": -1}, complex=False, grad=False),
    "argwhere": Case((X,), {"size": 3}, complex=False, grad=False),
    "extract": Case((B, X), {"size": 3, "fill_value": 0.5}),
    "bincount": Case(("i:6", "x:6"), {"length": 4}, complex=False, diff=(1,), jax_fn=lambda v, w, length: jnp.bincount(
        v, w, length=length)),
    "digitize": Case((X, np.array([-1.0, 0.0, 0.5])), complex=False, grad=False,
                     jax_fn=lambda x, b: jnp.digitize(x, b).astype("int64")),  # (jax.numpy's is int32)
    "histogram": Case((X,), {"bins": 4}, complex=False),
    "histogram_bin_edges": Case((X,), {"bins": 3}, complex=False),
    "kaiser": Case((7, "p:0"), complex=False),
    "spacing": Case((X,), complex=False),
    "frexp": Case((X,), complex=False),
    "iscomplex": Case((X,), grad=False),
    "isreal": Case((X,), grad=False),
    "array_equal": Case((X, X), complex=False, grad=False),
    "array_equiv": Case((X, X), complex=False, grad=False),
    "unravel_index": Case(("i",), {"shape": (2, 4)}, complex=False, grad=False),
    "ix_": Case(("i:3", "i:2"), complex=False, grad=False),
})
EXCLUDED.update({
    **{n: "a constant of shapes (NumPy's): tests/test_numpy_ported.py" for n in (
        "indices", "fromfunction", "tril_indices", "triu_indices", "tril_indices_from", "triu_indices_from",
        "diag_indices", "diag_indices_from", "mask_indices", "hamming", "hanning", "blackman", "bartlett")},
    "ravel_multi_index": "integer indices of a tuple of arrays: tests/test_numpy_ported.py",
    "trim_zeros": "constants only (value-dependent length): tests/test_numpy_ported.py",
    **{n: "integers, constants only (NumPy's): tests/test_numpy_ported.py" for n in ("gcd", "lcm")},
    "bitwise_count": "integer bit operations (no derivative): tests/test_numpy_ported.py",
})


# functions called with a list of arrays
for _name in ("vstack", "hstack", "dstack", "column_stack", "stack", "concatenate", "concat"):
    CASES[_name] = Case(("x:2x3", "x:2x3"), jax_name=_name)
_LIST_ARGS = {"vstack", "hstack", "dstack", "column_stack", "stack", "concatenate", "concat"}


# --- the checks ----------------------------------------------------------------------------


def close(got: Any, want: Any, what: str) -> None:
    g_leaves = jax.tree_util.tree_leaves(got)
    w_leaves = jax.tree_util.tree_leaves(want)
    assert len(g_leaves) == len(w_leaves), f"{what}: {len(g_leaves)} outputs, JAX {len(w_leaves)}"
    for g, w in zip(g_leaves, w_leaves, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"{what}: shape {g.shape}, JAX {w.shape}"
        if w.dtype == bool or np.issubdtype(w.dtype, np.integer):
            np.testing.assert_array_equal(g, w, err_msg=what)
        else:
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=what)


def _weights(rng: np.random.Generator, out: Any) -> list[np.ndarray]:
    return [rng.normal(size=np.shape(o)) for o in jax.tree_util.tree_leaves(out)]


def _callables(name: str, case: Case, every: list, drawn: list[int]) -> tuple[Callable, Callable]:
    """tidu's and JAX's function of the drawn arguments (positions ``drawn`` of ``every``;
    the other arguments bound to their values)."""
    fn_t: Callable = getattr(tnp, name)
    fn_j: Callable = case.jax_fn or getattr(jnp, case.jax_name or name)
    if case.via is not None:
        fn_t = lambda *a, **k: case.via(tnp, *a, **k)  # noqa: E731
        fn_j = lambda *a, **k: case.via(jnp, *a, **k)  # noqa: E731
    kw = case.kwargs

    def fill(a: tuple) -> list:
        full = list(every)
        for i, v in zip(drawn, a, strict=True):
            full[i] = v
        return full

    def ft(*a: Any) -> Any:
        return fn_t(fill(a), **kw) if name in _LIST_ARGS else fn_t(*fill(a), **kw)

    def fj(*a: Any) -> Any:
        return fn_j(fill(a), **kw) if name in _LIST_ARGS else fn_j(*fill(a), **kw)

    return ft, fj


def check(name: str, dtype: str) -> None:
    case = CASES[name]
    rng = np.random.default_rng(zlib.crc32(f"{name}/{dtype}".encode()))
    shape = _shape(rng)
    drawn = [i for i, a in enumerate(case.args) if isinstance(a, str)]
    every = [draw(rng, a, dtype, shape) if isinstance(a, str) else a for a in case.args]
    args = [every[i] for i in drawn]  # the drawn ones are passed (traced); the others are bound
    ft, fj = _callables(name, case, every, drawn)

    # one XLA compilation per case (op by op is ~10x slower): the value alone, or the value
    # with the derivatives below
    if not case.grad:
        close(tidu.jit(ft)(*args), jax.jit(fj)(*args), f"{name} value")
        return
    diff = case.diff if case.diff is not None else tuple(
        k for k, i in enumerate(drawn) if case.args[i].split(":")[0] not in ("i", "b"))
    ws = _weights(rng, jax.eval_shape(fj, *args))

    def partial(f: Callable) -> Callable:
        def g(*d: Any) -> Any:
            full = list(args)
            for i, v in zip(diff, d, strict=True):
                full[i] = v
            return f(*full)
        return g

    primals = tuple(args[i] for i in diff)
    tangents = tuple(draw(rng, "x", dtype, np.shape(args[i])) for i in diff)
    if dtype == "float64":
        def loss(m: Any, f: Callable) -> Callable:
            return lambda *d: sum(m.sum(w * m.real(o)) for w, o in zip(
                ws, jax.tree_util.tree_leaves(f(*d)), strict=True))

        lt, lj = loss(tnp, partial(ft)), loss(jnp, partial(fj))
        argnums = tuple(range(len(diff)))
        want, g_want, h_want = jax.jit(lambda a, p: (fj(*a), jax.grad(lj, argnums=argnums)(*p), jax.jvp(
            jax.grad(lj, argnums=argnums), p, tangents)[1]))(args, primals)
        close(tidu.jit(ft)(*args), want, f"{name} value")
        close(tidu.grad(lt, argnums=argnums)(*primals), g_want, f"{name} gradient")
        close(tidu.jvp(tidu.grad(lt, argnums=argnums), primals, tangents)[1], h_want, f"{name} hvp")
    else:
        t2 = tuple(draw(rng, "x", dtype, np.shape(args[i])) for i in diff)
        want, j_want, j2_want = jax.jit(lambda a, p: (fj(*a), jax.jvp(partial(fj), p, tangents)[1], jax.jvp(
            lambda *q: jax.jvp(partial(fj), q, tangents)[1], p, t2)[1]))(args, primals)
        close(tidu.jit(ft)(*args), want, f"{name} value")
        close(tidu.jvp(partial(ft), primals, tangents)[1], j_want, f"{name} jvp")
        close(tidu.jvp(lambda *p: tidu.jvp(partial(ft), p, tangents)[1], primals, t2)[1], j2_want,
              f"{name} second jvp")


# Complex inputs take their own code path in these functions: their complex runs are in the
# default step; the other functions' complex runs (the same primitives as the real ones)
# go to the slow step, which keeps the default run fast.
COMPLEX_PATHS = {"arctan", "arcsin", "arccos", "arcsinh", "arccosh", "arctanh", "acos", "asin", "atan",
                 "acosh", "asinh", "atanh", "angle", "exp2", "isnan", "isfinite", "isinf", "nan_to_num",
                 "isclose", "var", "std", "sort", "sort_complex", "vecdot", "vdot", "corrcoef", "cov",
                 "correlate", "linspace", "where"}


def _aliases() -> dict[str, str]:
    """{alias: the first name in CASES bound to the same function} (acos: arccos, ...)."""
    first: dict[int, str] = {}
    out = {}
    for name in CASES:
        fn = getattr(tnp, name)
        if id(fn) in first:
            out[name] = first[id(fn)]
        else:
            first[id(fn)] = name
    return out


def _params() -> list[Any]:
    out = []
    aliases = _aliases()  # an alias runs the same function: its cases go to the slow step
    for name, case in CASES.items():
        for dtype in ("float64", "complex128") if case.complex else ("float64",):
            slow = case.slow or name in aliases or (dtype == "complex128" and name not in COMPLEX_PATHS)
            marks = [pytest.mark.slow] if slow else []
            out.append(pytest.param(name, dtype, id=f"{name}-{dtype}", marks=marks))
    return out


@pytest.mark.parametrize(("name", "dtype"), _params())
def test_against_jax(name: str, dtype: str) -> None:
    check(name, dtype)


def test_aliases_are_the_function_they_name() -> None:
    """The default run checks one name of each alias pair; the other is the same object."""
    aliases = _aliases()
    assert {"acos": "arccos", "absolute": "abs", "true_divide": "divide"}.items() <= aliases.items()
    for alias, name in aliases.items():
        assert getattr(tnp, alias) is getattr(tnp, name)


def test_every_public_name_is_tested_or_excluded() -> None:
    names = {n for n in tnp.__all__ if callable(getattr(tnp, n)) and not isinstance(getattr(tnp, n), type)}
    missing = names - set(CASES) - set(EXCLUDED)
    assert not missing, f"tidu.numpy functions without a case in CASES: {sorted(missing)}"


INDEXING_CASES = [
    lambda m, a: a[::-1, ::-2],
    lambda m, a: a[[3, 0, 3], [1, 4, 0]],
    lambda m, a: a[np.array([[1, 2], [0, 0]])],
    lambda m, a: a[INDEX_MASK],
    lambda m, a: a[1:, [4, 2, 0]],
    lambda m, a: a.at[1:3, ::2].set(2.0 * a[0, :3]),
    lambda m, a: a.at[[0, 0, 2], [1, 1, 3]].add(a[1, :3]),
    lambda m, a: a.at[[2, 0], :].multiply(a[3], unique_indices=True),
    lambda m, a: a.at[0].max(0.0),
    lambda m, a: a[m.argmax(a, axis=0)],
    lambda m, a: m.mean(m.array([a[0, 0], 2 * a[1, 1], a[2, 2] ** 2])),
    lambda m, a: m.where(a > 0, a, 0.5 * a),
    lambda m, a: m.trace(a, offset=1),
]
INDEX_X = np.random.default_rng(7).normal(size=(4, 5))
INDEX_MASK = INDEX_X > 0


@pytest.mark.parametrize("k", range(len(INDEXING_CASES)))
def test_indexing(k: int) -> None:
    """Advanced and negative-step indexing, ``.at`` updates and traced lists, vs JAX."""
    case, x = INDEXING_CASES[k], INDEX_X
    w = np.random.default_rng(7 + k).normal(size=64)
    want = case(jnp, jnp.asarray(x))
    close(tidu.jit(lambda a: case(tnp, a))(x), want, f"indexing case {k} value")
    n = int(np.size(want))

    def loss(m):
        return lambda a: m.sum(m.ravel(case(m, a)) * w[:n])

    close(tidu.grad(loss(tnp))(x), jax.jit(jax.grad(loss(jnp)))(x), f"indexing case {k} gradient")


def test_numpy_functions_dispatch_to_tidu() -> None:
    """``np.dot(tracer, a)`` and friends run the tidu.numpy function (__array_function__)."""
    a = np.arange(6.0).reshape(3, 2)
    x = np.array([0.3, -1.2, 2.0])

    def f(x):
        return np.sum(np.dot(x, a) ** 2) + np.linalg.norm(x) + np.mean(np.cumsum(np.sort(x)))

    def fj(x):
        return jnp.sum(jnp.dot(x, a) ** 2) + jnp.linalg.norm(x) + jnp.mean(jnp.cumsum(jnp.sort(x)))

    close(tidu.jit(f)(x), fj(x), "value")
    close(tidu.grad(f)(x), jax.jit(jax.grad(fj))(x), "gradient")
    close(tidu.jit(lambda x: np.partition(x, 1))(x), jnp.partition(x, 1), "partition")
    with pytest.raises(TypeError, match="tnp.unique: the output size depends on the values.*pass a static size="):
        tidu.jit(lambda x: np.unique(x))(x)  # (NumPy's unique takes no size=)
    with pytest.raises(TypeError, match="numpy.packbits has no tidu.numpy counterpart"):
        tidu.jit(lambda x: np.packbits(x > 0))(x)


# --- batched: tidu.vmap against jax.vmap ------------------------------------------------------

BATCH = 3


def batched_pairs(name: str, dtype: str, axis: int = 0, jit: bool = False,
                  only_first: bool = False) -> list[tuple[str, Callable, Callable, list]]:
    """``tidu.vmap`` of the function (and of its gradient, or for complex inputs its JVP)
    and ``jax.vmap`` of jax.numpy's, as (what, tidu's, JAX's, the arguments), on BATCH
    examples of CASES' inputs stacked along ``axis`` of each drawn argument (-1: the last;
    an axis beyond an argument's rank is its last), under ``tidu.jit`` if ``jit``;
    ``only_first``: the other arguments are not mapped (None)."""
    case = CASES[name]
    rng = np.random.default_rng(zlib.crc32(f"{name}/{dtype}/vmap".encode()))
    shape = _shape(rng)
    drawn = [i for i, a in enumerate(case.args) if isinstance(a, str)]
    every = [draw(rng, a, dtype, shape) if isinstance(a, str) else a for a in case.args]
    one = [np.asarray(every[i]) for i in drawn]  # one example of each drawn argument
    in_axes = tuple(None if only_first and k else axis if axis < 0 else min(axis, o.ndim) for k, o in enumerate(one))

    def stack(kind: str, example: np.ndarray, ax: int | None) -> np.ndarray:
        if ax is None:
            return example
        return np.stack([np.asarray(draw(rng, kind, dtype, example.shape)) for _ in range(BATCH)], axis=ax)

    batched = [stack(case.args[i], o, ax) for i, o, ax in zip(drawn, one, in_axes, strict=True)]
    ft, fj = _callables(name, case, every, drawn)

    def vmap_t(f: Callable, axes: tuple = in_axes) -> Callable:
        return tidu.jit(tidu.vmap(f, in_axes=axes)) if jit else tidu.vmap(f, in_axes=axes)

    pairs = [("value", vmap_t(ft), jax.vmap(fj, in_axes=in_axes), batched)]
    if not case.grad:
        return pairs
    diff = case.diff if case.diff is not None else tuple(
        k for k, i in enumerate(drawn) if case.args[i].split(":")[0] not in ("i", "b"))
    if dtype == "float64":
        ws = _weights(rng, jax.eval_shape(fj, *one))

        def loss(m: Any, f: Callable) -> Callable:
            return lambda *d: sum(m.sum(w * m.real(o)) for w, o in zip(
                ws, jax.tree_util.tree_leaves(f(*d)), strict=True))

        return [*pairs, ("gradient", vmap_t(tidu.grad(loss(tnp, ft), argnums=diff)),
                         jax.vmap(jax.grad(loss(jnp, fj), argnums=diff), in_axes=in_axes), batched)]
    # complex: the JVP (tangents batched along the same axis, also where the primal is not)
    t_axes = tuple(axis if axis < 0 else min(axis, one[k].ndim) for k in diff)
    tangents = [stack("x", one[k], ax) for k, ax in zip(diff, t_axes, strict=True)]

    def jvp_of(f: Callable, jvp: Callable) -> Callable:
        def g(*a: Any) -> Any:
            prim, tang = a[:len(drawn)], a[len(drawn):]

            def part(*d: Any) -> Any:
                full = list(prim)
                for k, v in zip(diff, d, strict=True):
                    full[k] = v
                return f(*full)
            return jvp(part, tuple(prim[k] for k in diff), tuple(tang))[1]
        return g

    return [*pairs, ("jvp", vmap_t(jvp_of(ft, tidu.jvp), in_axes + t_axes),
                     jax.vmap(jvp_of(fj, jax.jvp), in_axes=in_axes + t_axes), [*batched, *tangents])]


def check_batched(name: str, dtype: str, axis: int = 0, jit: bool = False, only_first: bool = False) -> None:
    """batched_pairs: tidu's results against JAX's (JAX's in one jit: one XLA compilation)."""
    pairs = batched_pairs(name, dtype, axis, jit, only_first)
    wants = jax.jit(lambda *a: [j(*x) for (_, _, j, _), x in zip(pairs, a, strict=True)])(*[p[3] for p in pairs])
    for (what, t, _, args), want in zip(pairs, wants, strict=True):
        close(t(*args), want, f"{name} vmap {what}")


# The default run: these cases (of _batched_params' ids): some common functions, and with them
# cases that together apply every batching rule, with every pattern of batched and
# unbatched operands, that the whole sweep applies (tests/vmap_util.py;
# test_the_default_batched_cases_apply_every_batching_rule, in the slow step, keeps it so).
# JAX's side of each case is an XLA compilation: every function would add ~25 s. The slow
# step: every function in float64 and complex128, mapped over axes 0, 1 and the last, and
# with only the first argument mapped.
BATCHED_DEFAULT = [
    "sum-float64-axis0", "cumsum-float64-axis-1", "sort-complex128-axis-1", "tensordot-float64-axis1",
    "var-complex128-axis0", "matmul-float64-axis0-first", "nanmean-float64-axis0", "where-complex128-axis0-first",
    "take_along_axis-float64-axis-1", "arcsinh-complex128-axis-1", "polyfit-float64-axis0",
    "floor_divide-float64-axis0-first", "insert-float64-axis0-first", "arctan2-float64-axis0",
    "arctan2-float64-axis0-first", "hypot-float64-axis0", "ediff1d-float64-axis0", "nanmedian-float64-axis0",
    "tril-float64-axis0", "logaddexp-float64-axis0", "logaddexp-float64-axis0-first", "log2-complex128-axis0",
    "logsumexp-float64-axis0", "roots-float64-axis0",
]


def _batched_params() -> list[Any]:
    """Every function (its aliases too) in float64 and, where CASES tries it, complex128,
    mapped over axes 0, -1 (under tidu.jit) and 1 (under tidu.jit), and over axis 0 with
    only the first argument mapped; BATCHED_DEFAULT in the default run."""
    out = []
    for name, case in CASES.items():
        for dtype in ("float64", "complex128") if case.complex else ("float64",):
            n_drawn = sum(isinstance(a, str) for a in case.args)
            for axis, only_first in ((0, False), (-1, False), (1, False), (0, True)):
                if only_first and n_drawn < 2:
                    continue
                pid = f"{name}-{dtype}-axis{axis}{'-first' if only_first else ''}"
                out.append(pytest.param(name, dtype, axis, only_first, id=pid,
                                        marks=[] if pid in BATCHED_DEFAULT else [pytest.mark.slow]))
    return out


@pytest.mark.parametrize(("name", "dtype", "axis", "only_first"), _batched_params())
def test_vmap_against_jax(name: str, dtype: str, axis: int, only_first: bool) -> None:
    check_batched(name, dtype, axis, jit=axis != 0, only_first=only_first)


@pytest.mark.slow
def test_the_default_batched_cases_apply_every_batching_rule() -> None:
    """Every batching rule, with every pattern of batched operands, that tidu.vmap applies
    in the whole sweep is applied by a case of BATCHED_DEFAULT (tidu's side only: traces)."""
    def run(p: Any) -> None:
        for _, fn, _, args in batched_pairs(*p.values[:3], False, p.values[3]):
            fn(*args)

    assert_default_applies_every_rule(_batched_params(), BATCHED_DEFAULT, run)


def test_nanargmax_of_an_all_nan_slice_is_jaxs() -> None:
    """Traced, an all-nan slice's index is -1, as JAX's (NumPy raises, as the eager call does)."""
    x = np.array([[np.nan, 1.0, np.nan], [np.nan, np.nan, 2.0]])
    for name in ("nanargmax", "nanargmin"):
        for kw in ({"axis": 0}, {"axis": 1, "keepdims": True}, {}):
            got = tidu.jit(lambda v, n=name, k=kw: getattr(tnp, n)(v, **k))(x)
            close(got, getattr(jnp, name)(x, **kw), f"{name} {kw}")
    close(tidu.jit(tnp.nanargmax)(np.full((2, 2), np.nan)), -1, "nanargmax of all nan")
