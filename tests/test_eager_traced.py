"""Eager == traced == NumPy for every public name of tidu.numpy, tidu.numpy.linalg and
tidu.numpy.fft (issue 30).

Each name is called three ways on the same random inputs: eagerly (``tnp.f`` on NumPy
arrays), traced (``tidu.jit``), and as the reference, NumPy's function of that name
(jax.numpy's where NumPy has none). Two draws per name, of the same shapes (one
compilation): normal values, and values from {-1, -0.5, 0, 0.5, 1}, where ties and zeros
put NumPy's one-sided choices (max and min at ties, abs and sign at 0, sorting equal
values, clip at its bounds, rounding at integers) to the test.

A name is called generically as ``f(x)`` with x of shape (3, 4), else as ``f(x, y)`` with
y of shape (4,), when the reference accepts that call; otherwise it needs an entry in
``ARGS`` (or a reason in ``NOT_SWEPT``). ``test_every_public_name_is_swept`` fails for a
new public name with neither, so the sweep's coverage cannot silently shrink.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
pytest.importorskip("jax.scipy.linalg")
pytest.importorskip("jax.scipy.special")

SHAPE, SHAPE2 = (3, 4), (4,)
GRID = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
TRACED_RTOL, TRACED_ATOL = 1e-12, 1e-13  # compositions of primitives round differently from NumPy
EAGER_RTOL = 4 * np.finfo(float).eps  # eager calls NumPy's own function: equal up to a few ulp


@dataclass(frozen=True)
class Args:
    """How to call one name: ``shapes`` of the float arrays drawn (passed traced under jit),
    ``call(module, *arrays)`` the call, written for tidu.numpy and the reference module
    alike; ``ref`` the reference module (numpy, or jax.numpy where NumPy has no such
    function); ``positive`` draws |values| + 0.5 (for domains such as matrices to invert);
    ``complex`` adds a
    draw of complex values (generic calls: where the reference takes complex values)."""

    shapes: tuple[tuple[int, ...], ...]
    call: Callable[..., Any]
    ref: Any = np
    positive: bool = False
    complex: bool = False


def _m(name: str, *consts: Any, **kw: Any) -> Callable[..., Any]:
    """call(module, *arrays) = module.name(*arrays, *consts, **kw)."""
    return lambda m, *a: getattr(m, name)(*a, *consts, **kw)


def _linalg(name: str, *consts: Any, **kw: Any) -> Callable[..., Any]:
    return lambda m, *a: getattr(m.linalg, name)(*a, *consts, **kw)


X = (SHAPE,)
XY = (SHAPE, SHAPE2)
M = ((3, 3),)
ARGS: dict[str, Args] = {
    # reductions and statistics with other parameters
    "average": Args(((3, 4), (4,)), lambda m, a, w: m.average(a, axis=1, weights=w), positive=True),
    "logsumexp": Args(X, lambda m, a: m.logsumexp(a, axis=1) if m is tnp else
                      jax.scipy.special.logsumexp(a, axis=1), ref=jnp),
    "quantile": Args(X, _m("quantile", np.array([0.1, 0.5, 0.95]), axis=1)),
    "nanquantile": Args(X, _m("nanquantile", 0.3, axis=1)),
    "percentile": Args(X, _m("percentile", 37.0)),
    "nanpercentile": Args(X, _m("nanpercentile", np.array([20.0, 80.0]), axis=0)),
    "top_k": Args(X, lambda m, a: m.top_k(a, 2) if m is tnp else tuple(jax.lax.top_k(a, 2)), ref=jnp),
    # jax.numpy's layout (NumPy's differs: its order on either side of kth is unspecified)
    "partition": Args(X, _m("partition", 1, axis=1), ref=jnp),
    "argpartition": Args(X, _m("argpartition", -2, axis=0), ref=jnp),
    "cummax": Args(X, lambda m, a: m.cummax(a, axis=1) if m is tnp else jax.lax.cummax(a, axis=1), ref=jnp),
    "cummin": Args(X, lambda m, a: m.cummin(a, axis=0) if m is tnp else jax.lax.cummin(a, axis=0), ref=jnp),
    "rsqrt": Args(X, lambda m, a: m.rsqrt(a) if m is tnp else jax.lax.rsqrt(a), ref=jnp, positive=True),
    "interp": Args(((5,), (4,)), lambda m, x, fp: m.interp(x, np.array([-1.0, -0.2, 0.5, 1.5]), fp)),
    "ediff1d": Args(X, _m("ediff1d", to_begin=np.array([1.0, 2.0]))),
    "trapezoid": Args(X, _m("trapezoid", dx=0.5)),
    "gradient": Args(X, _m("gradient")),
    "unwrap": Args(((9,),), lambda m, p: m.unwrap(4 * p)),
    "cov": Args(((3, 6),), _m("cov", ddof=0)),
    "corrcoef": Args(((3, 6),), _m("corrcoef")),
    "diff": Args(X, _m("diff", n=2, axis=0)),
    "cumulative_sum": Args(X, _m("cumulative_sum", axis=0, include_initial=True)),
    "cumulative_prod": Args(X, _m("cumulative_prod", axis=1)),
    # shapes
    "reshape": Args(X, _m("reshape", (2, 6))),
    "resize": Args(X, _m("resize", (4, 4))),
    "transpose": Args(((2, 3, 4),), _m("transpose", (2, 0, 1))),
    "permute_dims": Args(((2, 3, 4),), _m("permute_dims", (1, 2, 0))),
    "swapaxes": Args(((2, 3, 4),), _m("swapaxes", 0, 2)),
    "moveaxis": Args(((2, 3, 4),), _m("moveaxis", 0, -1)),
    "rollaxis": Args(((2, 3, 4),), _m("rollaxis", 2, 1)),
    "expand_dims": Args(X, _m("expand_dims", 1)),
    "squeeze": Args(((3, 1, 4),), _m("squeeze")),
    "broadcast_to": Args(((4,),), _m("broadcast_to", (3, 4))),
    "flatten": Args(X, lambda m, a: m.flatten(a) if m is tnp else a.flatten()),
    "roll": Args(X, _m("roll", 2, axis=0)),
    "rot90": Args(X, _m("rot90", k=3)),
    "tile": Args(X, _m("tile", (2, 1, 2))),
    "repeat": Args(X, _m("repeat", 2, axis=1)),
    "pad": Args(X, _m("pad", ((1, 2), (2, 0)), mode="reflect")),
    "append": Args(((2, 4), (1, 4)), _m("append", axis=0)),
    "insert": Args(((3, 4), (3,)), lambda m, a, v: m.insert(a, 2, v, axis=1)),
    "delete": Args(X, _m("delete", np.array([0, 3]), axis=1)),
    "split": Args(((6, 2),), _m("split", 3)),
    "array_split": Args(((7, 2),), _m("array_split", 3)),
    "vsplit": Args(((4, 3),), _m("vsplit", [1, 3])),
    "hsplit": Args(X, _m("hsplit", 2)),
    "dsplit": Args(((2, 2, 4),), _m("dsplit", 2)),
    "unstack": Args(X, _m("unstack", axis=1)),
    "block": Args(((2, 2), (2, 3), (1, 5)), lambda m, a, b, c: m.block([[a, b], [c]])),
    "meshgrid": Args(((3,), (4,)), _m("meshgrid")),
    "full": Args(((),), lambda m, v: m.full((2, 3), v)),
    "full_like": Args(X, _m("full_like", 2.5)),
    # NumPy's empty_like is uninitialized; tidu's (as JAX's) is zeros
    "empty_like": Args(X, lambda m, a: m.empty_like(a) if m is tnp else np.zeros_like(a)),
    "linspace": Args(((), ()), lambda m, a, b: m.linspace(a, b, 7)),
    "logspace": Args(((), ()), lambda m, a, b: m.logspace(a, b, 5)),
    "geomspace": Args(((), ()), lambda m, a, b: m.geomspace(a, b, 6), positive=True),
    "astype": Args(X, lambda m, a: m.astype(a, np.float32) if m is tnp else a.astype(np.float32)),
    "fill_diagonal": Args(((4, 3), (3,)), lambda m, a, v: m.fill_diagonal(a, v, inplace=False) if m is not np
                          else _np_fill_diagonal(a, v)),
    "put": Args(((3, 4), (3,)), lambda m, a, v: m.put(a, np.array([1, 7, 11]), v, inplace=False) if m is not np
                else _np_put(a, v)),
    "place": Args(((3, 4), (5,)), lambda m, a, v: m.place(a, np.arange(12).reshape(3, 4) % 3 != 1, v, inplace=False),
                  ref=jnp),
    "minmax": Args(X, _m("minmax", axis=1), ref=jnp),
    "put_along_axis": Args(((3, 4), (3, 1)), lambda m, a, v: m.put_along_axis(
        a, np.array([[0], [3], [1]]), v, axis=1, inplace=False), ref=jnp),
    "at": Args(((3, 4), (2,)), lambda m, a, v: m.at(a)[[0, 0], [1, 1]].add(v) if m is tnp
               else jnp.asarray(a).at[np.array([0, 0]), np.array([1, 1])].add(v), ref=jnp),
    # selection
    "where": Args(XY, lambda m, a, b: m.where(a > 0, a, b)),
    "select": Args(((5,), (5,)), lambda m, a, b: m.select([a > 0.5, b < 0], [a * b, m.sin(a)], 0.5)),
    "piecewise": Args(((6,),), lambda m, x: m.piecewise(x, [x < 0, x > 1], [lambda v: v ** 2, m.exp, 0.5])),
    "choose": Args((SHAPE, SHAPE, SHAPE),
                   lambda m, a, b, c: m.choose(np.array([[0, 1, 2, 1]] * 3), [a, b, c], mode="clip")),
    "compress": Args(X, lambda m, a: m.compress(np.array([True, False, True, True]), a, axis=1)),
    "take": Args(X, _m("take", np.array([[3, 0], [-1, 3]]), axis=1)),
    "take_along_axis": Args(X, _m("take_along_axis", np.array([[0, 3], [2, 2], [1, 0]]), axis=1)),
    "getitem": Args(X, lambda m, a: m.getitem(a, (slice(None, None, -2), [3, 0, 3])) if m is tnp
                    else a[::-2, [3, 0, 3]]),
    "clip": Args(X, _m("clip", -0.5, 0.5)),
    # matrices and contractions
    "diagonal": Args(((3, 4, 5),), _m("diagonal", offset=1, axis1=2, axis2=0)),
    "trace": Args(((4, 3),), _m("trace", offset=-1)),
    "diag": Args(((4,),), _m("diag", k=-1)),
    "diagflat": Args(((2, 2),), _m("diagflat", k=1)),
    "tril": Args(X, _m("tril", k=1)),
    "triu": Args(((2, 4, 3),), _m("triu", k=-1)),
    "matmul": Args(((2, 3, 4), (4, 2)), _m("matmul")),
    "dot": Args(((3, 4), (4,)), _m("dot")),
    "inner": Args(((3, 4), (2, 4)), _m("inner")),
    "vdot": Args((SHAPE, SHAPE), _m("vdot")),
    "outer": Args(((3,), (4,)), _m("outer")),
    "tensordot": Args(((2, 3, 4), (4, 3, 5)), _m("tensordot", axes=([1, 2], [1, 0]))),
    "kron": Args(((2, 3), (3, 2)), _m("kron")),
    "cross": Args(((4, 3), (3,)), _m("cross")),
    "vecdot": Args(XY, _m("vecdot")),
    "matvec": Args(((2, 3, 4), (4,)), _m("matvec")),
    "vecmat": Args(((3,), (3, 4)), _m("vecmat")),
    "einsum": Args(((2, 3), (3, 4)), lambda m, a, b: m.einsum("ij,jk->ik", a, b)),
    # joining (lists of arrays)
    **{n: Args(((2, 3), (2, 3)), lambda m, a, b, n=n: getattr(m, n)([a, b]))
       for n in ("vstack", "hstack", "dstack", "column_stack", "stack", "concatenate", "concat")},
    # polynomials and convolution
    "polyval": Args(((4,), (5,)), _m("polyval")),
    "polyadd": Args(((3,), (5,)), _m("polyadd")),
    "polysub": Args(((4,), (2,)), _m("polysub")),
    "polymul": Args(((3,), (4,)), _m("polymul")),
    "polyder": Args(((5,),), _m("polyder", 2)),
    "polyint": Args(((4,), (2,)), lambda m, p, k: m.polyint(p, 2, k)),
    "poly": Args(((3,),), _m("poly")),
    "polydiv": Args(((6,), (3,)), _m("polydiv"), ref=jnp, positive=True),  # NumPy trims the remainder
    "polyfit": Args(((8,), (8,)), _m("polyfit", 2)),
    "vander": Args(((4,),), _m("vander", 3)),
    "convolve": Args(((6,), (3,)), _m("convolve", mode="same")),
    "correlate": Args(((6,), (4,)), _m("correlate", mode="full")),
    # functions of functions
    "vectorize": Args(((2, 3), (3,)), lambda m, a, b: m.vectorize(lambda u, v: u * m.sin(v) + u ** 2)(a, b)),
    "apply_along_axis": Args(X, lambda m, a: m.apply_along_axis(lambda r: m.cumsum(r) * r[0], 1, a)),
    "apply_over_axes": Args(((2, 3, 4),), lambda m, a: m.apply_over_axes(m.sum, a, [0, 2])),
    # value arguments that NumPy reads as something else
    "ldexp": Args(X, lambda m, a: m.ldexp(a, np.array([1, -2, 0, 3]))),
    "round": Args(X, _m("round", 2)),
    "around": Args(X, _m("around", 1)),
    "sort_complex": Args(((6,),), _m("sort_complex")),
    "searchsorted": Args(((5,), (3, 4)), lambda m, a, v: m.searchsorted(m.sort(a), v)),
    # sets: jax.numpy's static size (the ties draw pads; eager calls take it too)
    "unique": Args(X, lambda m, a: m.unique(a, return_index=True, return_inverse=True, return_counts=True,
                                            size=12), ref=jnp, complex=True),
    "unique_values": Args(((3, 4),), _m("unique_values", size=9), ref=jnp),
    "unique_counts": Args(X, _m("unique_counts", size=12), ref=jnp),
    "unique_inverse": Args(X, _m("unique_inverse", size=7, fill_value=2.0), ref=jnp),
    "unique_all": Args(X, _m("unique_all", size=12), ref=jnp, complex=True),
    "union1d": Args(XY, _m("union1d", size=16), ref=jnp),
    "intersect1d": Args(XY, _m("intersect1d", return_indices=True, size=4), ref=jnp),
    "setdiff1d": Args(XY, _m("setdiff1d", size=12), ref=jnp),
    "setxor1d": Args(XY, _m("setxor1d", size=16), ref=jnp),
    # linear algebra: square matrices (not symmetric, not positive definite: the one-sided cases)
    **{f"linalg.{n}": Args(M, _linalg(n)) for n in ("det", "inv", "slogdet", "qr", "svdvals", "pinv", "norm")},
    # tidu's definitions where NumPy's reads one triangle or keeps LAPACK's phases
    # (docs/linalg.md): JAX's (the Hermitian part; nan where not positive definite), the
    # vectors in tidu's phase gauge
    **{f"linalg.{n}": Args(M, _linalg(n), ref=jnp, complex=True) for n in ("eigvalsh", "cholesky")},
    "linalg.eigh": Args(M, lambda m, a: m.linalg.eigh(a) if m is tnp else _eigh_gauge(jnp.linalg.eigh(a)),
                        ref=jnp, complex=True),
    "linalg.svd": Args(M, lambda m, a: m.linalg.svd(a) if m is tnp else _svd_gauge(jnp.linalg.svd(a)),
                       ref=jnp, complex=True),
    # general eigenproblem: complex results (as JAX), tidu's order and gauge (docs/linalg.md)
    "linalg.eigvals": Args(M, lambda m, a: m.linalg.eigvals(a) if m is tnp else _eig_order(jnp.linalg.eig(a))[0],
                           ref=jnp, complex=True),
    "linalg.eig": Args(M, lambda m, a: m.linalg.eig(a) if m is tnp else _eig_order(jnp.linalg.eig(a)),
                       ref=jnp, complex=True),
    "roots": Args(((5,),), lambda m, a: m.roots(a, strip_zeros=False) if m is tnp else
                  np.sort_complex(np.asarray(jnp.roots(a, strip_zeros=False))), ref=jnp, complex=True),
    "linalg.solve": Args(((3, 3), (3,)), _linalg("solve")),
    "linalg.tensorinv": Args(((6, 2, 3),), _linalg("tensorinv", ind=1)),
    "linalg.tensorsolve": Args(((2, 3, 6), (2, 3)), _linalg("tensorsolve")),
    # JAX's resid (always, per column), eager and traced alike
    "linalg.lstsq": Args(((4, 3), (4,)), _linalg("lstsq"), ref=jnp),
    "linalg.matrix_power": Args(M, _linalg("matrix_power", 3)),
    # the array API standard's linalg functions (NumPy 2 has them too)
    "linalg.cross": Args(((2, 3), (3,)), _linalg("cross")),
    "linalg.diagonal": Args(((2, 3, 4),), _linalg("diagonal", offset=1)),
    "linalg.matrix_norm": Args(((2, 3, 4),), _linalg("matrix_norm", ord="fro", keepdims=True)),
    "linalg.vector_norm": Args(((2, 3, 4),), _linalg("vector_norm", axis=(0, 2), ord=3)),
    "linalg.matrix_transpose": Args(((2, 3, 4),), _linalg("matrix_transpose")),
    "linalg.multi_dot": Args(((3,), (3, 4), (4, 2)), lambda m, a, b, c: m.linalg.multi_dot([a, b, c])),
    "linalg.outer": Args(((3,), (4,)), _linalg("outer")),
    "linalg.tensordot": Args(((2, 3, 4), (4, 2)), _linalg("tensordot", axes=1)),
    "linalg.vecdot": Args(((2, 3, 4), (4,)), _linalg("vecdot")),
    "linalg.trace": Args(M, _linalg("trace")),
    "linalg.solve_triangular": Args(((3, 3), (3,)), lambda m, a, b: m.linalg.solve_triangular(a, b, lower=True)
                                    if m is tnp else jax.scipy.linalg.solve_triangular(a, b, lower=True), ref=jnp),
    "linalg.triangular_solve": Args(((3, 3), (3, 1)), lambda m, a, b: m.linalg.triangular_solve(a, b, left_side=True,
                                    lower=True) if m is tnp else jax.lax.linalg.triangular_solve(
                                        a, b, left_side=True, lower=True), ref=jnp),
    # discrete Fourier transforms: frequencies of a traced spacing d, and n/s, axes and norm
    "fft.fftfreq": Args(((),), lambda m, d: m.fft.fftfreq(7, d), positive=True),
    "fft.rfftfreq": Args(((),), lambda m, d: m.fft.rfftfreq(8, d), positive=True),
    "fft.fft": Args(X, lambda m, a: m.fft.fft(a, n=5, axis=0, norm="ortho"), complex=True),
    "fft.irfft": Args(X, lambda m, a: m.fft.irfft(a, n=7, norm="forward"), complex=True),
    "fft.hfft": Args(X, lambda m, a: m.fft.hfft(a, n=5, axis=0), complex=True),
    "fft.ihfft": Args(X, lambda m, a: m.fft.ihfft(a, n=6, norm="ortho")),
    "fft.fftn": Args(((2, 3, 4),), lambda m, a: m.fft.fftn(a, s=(3, 5), axes=(2, 0)), complex=True),
    "fft.irfftn": Args(((2, 3, 4),), lambda m, a: m.fft.irfftn(a, s=(2, 2, 5)), complex=True),
    "fft.fftshift": Args(((4, 5),), lambda m, a: m.fft.fftshift(a, axes=1), complex=True),
}


def _eigh_gauge(wv: Any) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvectors scaled so that each first component is real and >= 0 (tidu's gauge)."""
    w, v = (np.asarray(t) for t in wv)
    first = v[..., :1, :]
    return w, v * np.conj(first) / np.abs(first)


def _eig_order(wv: Any) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues sorted by real part, then imaginary part, the vectors' columns along, each
    vector's first largest-magnitude component made real and positive (tidu's order and gauge)."""
    w, v = (np.asarray(t) for t in wv)
    order = np.lexsort((w.imag, w.real))
    w, v = w[order], v[:, order]
    top = v[np.argmax(np.abs(v), axis=0), np.arange(v.shape[1])]
    return w, v * np.conj(top) / np.abs(top)


def _svd_gauge(usv: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of Vh scaled so that each first component is real and >= 0, U's columns alike."""
    u, s, vh = (np.asarray(t) for t in usv)
    phase = vh[..., :, :1] / np.abs(vh[..., :, :1])
    return u * np.swapaxes(phase, -1, -2), s, vh * np.conj(phase)


def _np_fill_diagonal(a: np.ndarray, v: np.ndarray) -> np.ndarray:
    out = a.copy()
    np.fill_diagonal(out, v)
    return out


def _np_put(a: np.ndarray, v: np.ndarray) -> np.ndarray:
    out = a.copy()
    np.put(out, np.array([1, 7, 11]), v)
    return out


def _bits(m: Any, a: Any) -> Any:
    """Integers from a float draw (negative ones too), for the bitwise operations."""
    return m.astype(a * 1000, "int32")


def _amounts(m: Any, b: Any) -> Any:
    """Shift amounts 0 to about 40 from a float draw (past the width of int32 too)."""
    return m.astype(m.abs(b) * 16, "int32")


# bitwise operations take integers: the float draws are made integers first
ARGS.update({
    **{n: Args(XY, lambda m, a, b, n=n: getattr(m, n)(_bits(m, a), _bits(m, b)))
       for n in ("bitwise_and", "bitwise_or", "bitwise_xor")},
    **{n: Args(X, lambda m, a, n=n: getattr(m, n)(_bits(m, a))) for n in ("bitwise_not", "bitwise_invert", "invert")},
    **{n: Args(XY, lambda m, a, b, n=n: getattr(m, n)(_bits(m, a), _amounts(m, b)))
       for n in ("left_shift", "right_shift", "bitwise_left_shift", "bitwise_right_shift")},
})

# linalg functions another engineer is fixing (issue 30: one definition for NumPy's one-sided cases)
LINALG_PENDING: dict[str, str] = {}

# NumPy orders complex values lexicographically; traced, tidu.numpy orders them so in the
# comparisons, maximum/minimum, fmax/fmin, sort, median, nanmedian, partition, the
# max/min/ptp/argmax/argmin reductions and their nan forms; these refuse complex values
# with an error (docs/numpy.md) traced, while eagerly they are NumPy's
COMPLEX_UNORDERED: set[str] = set()

# public names that are not functions of arrays to sweep, and why
NOT_SWEPT = {
    "op": "tidu.op: a primitive of the active catalog by name (tests/test_user_primitives.py)",
    "shape": "reads the shape, traces nothing", "ndim": "reads the rank, traces nothing",
    "result_type": "dtype logic (tests/test_frontend.py)", "broadcast_shapes": "shape logic",
    **{n: "dtype or shape introspection, traces nothing (tests/test_dtypes_more.py)" for n in (
        "can_cast", "finfo", "iinfo", "iscomplexobj", "isdtype", "isrealobj", "isscalar", "issubdtype", "iterable",
        "promote_types", "size")},
    "zeros": "NumPy's constructor of a shape", "ones": "NumPy's constructor of a shape",
    "eye": "NumPy's constructor of a shape", "arange": "NumPy's constructor",
    "identity": "NumPy's constructor of a shape", "tri": "NumPy's constructor of a shape",
    "empty": "zeros of a shape (NumPy's are uninitialized)",
}


# jax.numpy's functions ported to tidu.numpy (tidu/numpy/_index_tricks.py, _selection.py;
# their edge cases: tests/test_numpy_ported.py). NumPy has no size=: those are jax.numpy's.
def _ints(m: Any, a: Any, scale: float = 3) -> Any:
    """Non-negative integers from a float draw."""
    return m.astype(m.abs(a) * scale, "int64")


ARGS.update({
    **{n: Args(X, _m(n, size=6, fill_value=-1), ref=jnp) for n in ("nonzero", "argwhere", "flatnonzero")},
    "extract": Args(X, lambda m, a: m.extract(a > 0, a, size=6, fill_value=0.5), ref=jnp),
    "bincount": Args(X, lambda m, a: m.bincount(m.ravel(_ints(m, a)), m.ravel(a), length=5), ref=jnp),
    "digitize": Args(X, _m("digitize", np.array([-0.5, 0.0, 0.5]))),
    "histogram": Args(X, _m("histogram", bins=4)),
    "histogram_bin_edges": Args(X, _m("histogram_bin_edges", bins=4)),
    "kaiser": Args(((),), lambda m, b: m.kaiser(6, b)),
    "unravel_index": Args(X, lambda m, a: m.unravel_index(_ints(m, a), (3, 5))),
    "ravel_multi_index": Args(XY, lambda m, a, b: m.ravel_multi_index((_ints(m, a), _ints(m, b)), (4, 6),
                                                                      mode="clip")),
    "ix_": Args(((3,), (2,)), lambda m, a, b: m.ix_(_ints(m, a, 2), _ints(m, b, 2))),
    "diag_indices_from": Args(M, _m("diag_indices_from")),
    "bitwise_count": Args(X, lambda m, a: m.bitwise_count(_bits(m, a))),
})
NOT_SWEPT.update({
    **{n: "NumPy's constant of a shape or length, traces nothing (tests/test_numpy_ported.py)" for n in (
        "indices", "tril_indices", "triu_indices", "diag_indices", "mask_indices", "hamming", "hanning",
        "blackman", "bartlett")},
    "fromfunction": "calls a function on index arrays (tests/test_numpy_ported.py)",
    **{n: "NumPy's on constants only: a traced operand is a TypeError (tests/test_numpy_ported.py)" for n in (
        "trim_zeros", "gcd", "lcm")},
})


def public_names() -> list[str]:
    names = [n for n in tnp.__all__ if callable(getattr(tnp, n)) and not isinstance(getattr(tnp, n), type)]
    return (sorted(names) + [f"linalg.{n}" for n in sorted(tnp.linalg.__all__)]
            + [f"fft.{n}" for n in sorted(tnp.fft.__all__)])


def _lookup(module: Any, name: str) -> Any:
    for part in name.split("."):
        module = getattr(module, part, None)
    return module


def _generic(name: str) -> Args | None:
    """f(x), else f(x, y), when the reference (NumPy, else jax.numpy) takes that call."""
    ref = np if _lookup(np, name) is not None else jnp if _lookup(jnp, name) is not None else None
    if ref is None:
        return None
    fn = _lookup(ref, name)
    x, y = np.linspace(0.1, 0.9, 12).reshape(SHAPE), np.linspace(0.2, 0.8, 4)
    for shapes, args in ((X, (x,)), (XY, (x, y))):
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                fn(*args)
        except (TypeError, ValueError):
            continue
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                fn(*(a * (1 + 0.5j) for a in args))
            cplx = True
        except (TypeError, ValueError):
            cplx = False
        return Args(shapes, lambda m, *a: _lookup(m, name)(*a), ref=ref, complex=cplx)
    return None


def how(name: str) -> Args | None:
    return ARGS.get(name) or _generic(name)


def draws(args: Args, seed: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    normal = [rng.normal(size=s) for s in args.shapes]
    ties = [rng.choice(GRID, size=s) for s in args.shapes]
    if args.positive:
        normal = [np.abs(a) + 0.5 for a in normal]
        ties = [np.abs(a) + 0.5 for a in ties]
    out = [normal, ties]
    if args.complex:
        out.append([a + 1j * rng.choice(GRID, size=a.shape) for a in normal])
    return out


def _leaves(out: Any) -> list[np.ndarray]:
    if isinstance(out, list | tuple):
        return [v for o in out for v in _leaves(o)]
    return [np.asarray(out)]


def _structure(out: Any) -> Any:
    """Lists and tuples with their items (a named tuple counts as a tuple here; see
    test_linalg_results_are_named_tuples)."""
    if isinstance(out, list | tuple):
        return "list" if isinstance(out, list) else "tuple", [_structure(o) for o in out]
    return "array"


def compare(got: Any, want: Any, what: str, rtol: float, atol: float) -> None:
    gl, wl = _leaves(got), _leaves(want)
    assert len(gl) == len(wl), f"{what}: {len(gl)} outputs, reference {len(wl)}"
    for g, w in zip(gl, wl, strict=True):
        assert g.shape == w.shape, f"{what}: shape {g.shape}, reference {w.shape}"
        if w.dtype == bool or np.issubdtype(w.dtype, np.integer):
            np.testing.assert_array_equal(g, w, err_msg=what)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(reason=LINALG_PENDING[n]))
                                  if n in LINALG_PENDING else n for n in public_names()])
def test_eager_equals_traced_equals_reference(name):
    if name in NOT_SWEPT:
        pytest.skip(NOT_SWEPT[name])
    args = how(name)
    assert args is not None, f"tnp.{name}: no generic call fits; add an entry to ARGS (or NOT_SWEPT with a reason)"
    traced = tidu.jit(lambda *a: args.call(tnp, *a))
    for k, arrays in enumerate(draws(args, seed=sum(map(ord, name)))):
        what = f"tnp.{name} ({['normal', 'ties', 'complex'][k]} draw)"
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            if args.ref is jnp:
                with jax.enable_x64(True):
                    want = jax.tree_util.tree_map(np.asarray, args.call(jnp, *arrays))
            else:
                want = args.call(np, *arrays)
            eager = args.call(tnp, *arrays)
            if k == 2 and name in COMPLEX_UNORDERED:
                with pytest.raises((TypeError, ValueError), match="complex"):
                    traced(*arrays)
                continue
            got = traced(*arrays)
        if args.ref is np:
            assert _structure(eager) == _structure(want), f"{what}: eager returns {_structure(eager)}"
        assert _structure(got) == _structure(eager), f"{what}: traced returns {_structure(got)}"
        exact = args.ref is np  # eager tidu is NumPy's own function (numpy_fallback)
        compare(eager, want, f"{what}: eager", EAGER_RTOL if exact else TRACED_RTOL, 0.0 if exact else TRACED_ATOL)
        compare(got, want, f"{what}: traced", TRACED_RTOL, TRACED_ATOL)
        for e, g, w in zip(_leaves(eager), _leaves(got), _leaves(want), strict=True):
            assert e.dtype == g.dtype, f"{what}: eager dtype {e.dtype}, traced {g.dtype}"
            assert g.dtype == w.dtype or args.ref is not np, f"{what}: dtype {g.dtype}, reference {w.dtype}"


def test_every_public_name_is_swept():
    """A new public name needs a generic call, an ARGS entry or a NOT_SWEPT reason."""
    missing = [n for n in public_names() if n not in NOT_SWEPT and how(n) is None]
    assert not missing, f"add these to ARGS in {__file__} (or to NOT_SWEPT, with a reason): {missing}"
    stale = [n for n in (*ARGS, *NOT_SWEPT, *LINALG_PENDING, *COMPLEX_UNORDERED) if n not in public_names()]
    assert not stale, f"entries for names tidu.numpy no longer has: {stale}"


@pytest.mark.parametrize("name", ["qr", "slogdet", "eigh", "svd"])
def test_linalg_results_are_named_tuples(name):
    a = np.random.default_rng(0).normal(size=(3, 3))
    fn = getattr(tnp.linalg, name)
    want = type(getattr(np.linalg, name)(a))
    assert type(fn(a)) is want
    assert type(tidu.jit(fn)(a)) is want


@pytest.mark.parametrize("name", ["sinh", "arcsinh", "cbrt", "tanh", "expm1", "log1p", "sin"])
def test_composed_functions_keep_tiny_values_and_signed_zeros(name):
    """Near 0 these are x to within rounding, -0.0 included: traced compositions must not
    cancel (sinh as (e^x - e^-x) / 2 gave 0 at 1e-300 and 1e-8 to 8 digits) nor lose the
    sign of zero (NumPy's and IEEE's)."""
    x = np.array([0.0, -0.0, 1e-300, -1e-300, 1e-8, -1e-8, 1e-3])
    want = getattr(np, name)(x)
    traced = np.asarray(tidu.jit(getattr(tnp, name))(x))
    np.testing.assert_array_equal(np.signbit(traced), np.signbit(want))
    np.testing.assert_allclose(traced, want, rtol=4e-16, atol=0)


def test_logaddexp_derivative_is_nan_where_an_operand_is_nan():
    """A nan operand makes the value nan and every derivative nan, in both modes; equal
    infinities keep the (x + y) / 2 form's one-half."""
    x = np.array([0.3, np.nan, np.inf, 1.0])
    y = np.array([np.nan, 0.3, np.inf, 1.0])
    want = [np.nan, np.nan, 0.5, 0.5]
    f = lambda a, b: tnp.sum(tnp.logaddexp(a, b))  # noqa: E731
    np.testing.assert_array_equal(tidu.grad(f)(x, y), want)
    np.testing.assert_array_equal(tidu.grad(f, argnums=1)(x, y), want)
    np.testing.assert_array_equal(tidu.jvp(f, (x, y), (np.ones(4), np.zeros(4)))[1], np.nansum(want) + np.nan)


def test_heaviside_and_hypot_at_nan_and_inf_are_numpys():
    """heaviside(nan, h0) is nan (it was 1); hypot(inf, nan) is inf, as C's hypot and
    NumPy's (it was nan)."""
    s = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 0.5, -2.0])
    a, b = np.repeat(s, len(s)), np.tile(s, len(s))
    np.testing.assert_array_equal(tidu.jit(tnp.heaviside)(a, b), np.heaviside(a, b))
    np.testing.assert_array_equal(tidu.jit(tnp.hypot)(a, b), np.hypot(a, b))


# Eager calls are NumPy's own; traced ones promote as JAX (docs/numpy.md, "Dtypes and
# promotion"). Where NumPy widens more, the two dtypes differ by design:
NUMPY_WIDENS = {
    ("corrcoef", "float32"): "NumPy computes cov and corrcoef in float64",
    ("cov", "float32"): "NumPy computes cov and corrcoef in float64",
    ("quantile", "float32"): "NumPy promotes with the float64 q",
    ("nanpercentile", "float32"): "NumPy promotes with the float64 q",
    ("polyfit", "float32"): "NumPy's least squares run in float64",
    ("polyder", "float32"): "NumPy multiplies by an int64 arange",
    ("polyder", "int32"): "NumPy keeps integers (int64); traced derivatives are floats, as JAX's",
    ("vander", "float32"): "NumPy's vander of float32 is float64",
    ("vander", "int32"): "NumPy widens int32 powers to int64",
    ("reciprocal", "int32"): "NumPy's integer reciprocal truncates (0 beyond 1); traced is float, as JAX's",
    ("fft.fftfreq", "float32"): "NumPy computes 1/(n d) in float32 for a float32 d, tidu in float64",
    ("fft.rfftfreq", "float32"): "NumPy computes 1/(n d) in float32 for a float32 d, tidu in float64",
    ("polyder", "uint8"): "NumPy keeps integers (int64); traced derivatives are floats, as JAX's",
    ("polyder", "int16"): "NumPy keeps integers (int64); traced derivatives are floats, as JAX's",
    ("polyder", "bool"): "NumPy keeps integers (int64); traced derivatives are floats, as JAX's",
    ("vander", "uint8"): "NumPy widens integer powers to int64",
    ("vander", "int16"): "NumPy widens integer powers to int64",
    ("reciprocal", "uint8"): "NumPy's integer reciprocal truncates (0 beyond 1); traced is float, as JAX's",
    ("reciprocal", "int16"): "NumPy's integer reciprocal truncates (0 beyond 1); traced is float, as JAX's",
    ("unwrap", "uint8"): "NumPy takes the differences in uint8 (they wrap around); traced in float64",
}
# NumPy does some arithmetic on bools in int8 or as logic (a bool polynomial); traced bools
# stay bools where the operation is logical and are integers where it is arithmetic, as
# NumPy's other integer types (floor_divide, remainder, fmod and power of bools are int8,
# as NumPy's, traced too)
NUMPY_BOOL_ARITHMETIC = {"conj", "conjugate", "reciprocal", "polymul", "polyval", "geomspace"}


def _narrow_draw(args: Args, dtype: str) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    if dtype == "bool":
        return [rng.random(size=s) < 0.5 for s in args.shapes]
    if dtype != "float32":
        return [(np.abs(np.round(rng.normal(size=s) * 3)) + (1 if args.positive else 0)).astype(dtype)
                for s in args.shapes]
    return [(np.abs(rng.normal(size=s)) + 0.5 if args.positive else rng.normal(size=s)).astype(dtype)
            for s in args.shapes]


@pytest.mark.parametrize("dtype", ["float32", "int32", "int16", "uint8", "bool"])
@pytest.mark.parametrize("name", public_names())
def test_eager_equals_traced_on_narrow_dtypes(name: str, dtype: str) -> None:
    """The sweep above on float32, int32, int16, uint8 and bool draws: eager and traced
    calls give one dtype, shape and value (or both refuse), except where NumPy widens more
    (NUMPY_WIDENS) or computes on bools as int8 (NUMPY_BOOL_ARITHMETIC). (NumPy's float16
    result of sin(uint8), float32 of sin(int16), is not one of them: eager tidu computes
    such calls in float64, as traced.)"""
    if name in NOT_SWEPT or name in LINALG_PENDING:
        pytest.skip(NOT_SWEPT.get(name) or LINALG_PENDING[name])
    args = how(name)
    if (name, dtype) in NUMPY_WIDENS:
        pytest.skip(NUMPY_WIDENS[name, dtype])
    if dtype == "bool" and name in NUMPY_BOOL_ARITHMETIC:
        pytest.skip("NumPy's arithmetic on bools (NUMPY_BOOL_ARITHMETIC)")
    arrays = _narrow_draw(args, dtype)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            eager = args.call(tnp, *arrays)
        except (TypeError, ValueError, OverflowError, np.linalg.LinAlgError):
            # NumPy refuses some dtypes that tidu's traced code takes (linalg of bools), and
            # some calls written for float draws do not fit the dtype (x * 1000 of uint8)
            return
        got = tidu.jit(lambda *a: args.call(tnp, *a))(*arrays)
    el, gl = _leaves(eager), _leaves(got)
    assert len(el) == len(gl)
    for e, g in zip(el, gl, strict=True):
        assert g.dtype == e.dtype, f"tnp.{name} on {dtype}: traced dtype {g.dtype}, eager {e.dtype}"
        assert g.shape == e.shape, f"tnp.{name} on {dtype}: traced shape {g.shape}, eager {e.shape}"
        if e.dtype.kind in "fc":
            tol = 1e-10 if e.dtype in (np.float64, np.complex128) else 3e-5
            np.testing.assert_allclose(g, e, rtol=tol, atol=tol, equal_nan=True, err_msg=f"tnp.{name} on {dtype}")
        else:
            np.testing.assert_array_equal(g, e, err_msg=f"tnp.{name} on {dtype}")


def test_signed_zero_constants_stay_apart():
    # the builders share the constants of Python numbers, zeros too: 0.0 and -0.0 are
    # equal numbers, and must stay two constants
    x = np.array([1.0, -2.0])
    got = tidu.jit(lambda v: (tnp.where(v > 0, 0.0, -0.0), tnp.where(v > 0, -0.0, 0.0)))(x)
    np.testing.assert_array_equal(np.signbit(got), [[False, True], [True, False]])
    np.testing.assert_array_equal(np.signbit(tidu.jit(lambda v: v * -0.0 + -0.0)(x)), [True, False])
