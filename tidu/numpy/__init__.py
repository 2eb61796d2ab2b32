"""tidu.numpy: a NumPy-like API that records into the current trace.

``import tidu.numpy as tnp``. Called with traced values (``Tracer``) the functions add
primitives to the trace, inserting the explicit ``broadcast_in_dim`` and ``convert``
that NumPy broadcasting and dtype promotion imply (promotion as in JAX with 64-bit
types: Python scalars are weakly typed, ``int + float32 -> float32``). Called with
plain NumPy values or Python numbers they return NumPy results.

The functions live in one module per concept; this package re-exports them and installs
the ``Tracer`` operators and methods. (``builtins``, ``math``, ``Sequence``, ... are imported
as they were when this package was one module, so that ``dir(tidu.numpy)`` is unchanged.)
The modules form layers, each importing (at module level) only from the layers below it:

  1. ``_dtypes`` (promotion), ``_introspection`` (``finfo``, ``promote_types``...), ``_einsum_plan``
     (subscript parsing)
  2. ``_core``: shapes and axes, the tracing helpers, and ``numpy_fallback``, the one place
     where a call with no traced operand goes to NumPy
  3. ``_filled`` (``zeros_like``...), ``_shapes``, ``_user_ops`` (``tidu.op``)
  4. ``_elementwise``
  5. ``_casting``, ``_ufuncs``
  6. ``_reductions``, ``_polynomials``, ``_functional``
  7. ``_contractions``, ``_indexing``, ``_matrices``, ``_scans``, ``_sorting``, ``linalg``, ``fft``
  8. ``_creation`` (``linspace`` writes its last value with ``.at``), ``_covariance``, ``_polyfit``,
     ``_sets`` (``unique`` and the set operations, in ``_sorting``'s order), ``_roots`` (``roots``:
     ``linalg.eigvals`` of the companion matrix), ``_index_tricks`` (``r_``, ``tril_indices``,
     windows...), ``_selection`` (``nonzero``, ``histogram``...; uses ``_sets``' ``size=`` check)
  9. ``array_api``: the array API standard's namespace (``tracer.__array_namespace__()``)

Lower modules may still use the operators of traced values (``x[i]``, ``x + y``) at run
time: this package installs them on ``Tracer`` before any function runs.
"""

from __future__ import annotations

import builtins  # noqa: F401
import inspect
import math  # noqa: F401
from collections.abc import Sequence  # noqa: F401
from typing import Any

import ml_dtypes as _ml_dtypes
import numpy as np  # noqa: F401
from numpy import (  # noqa: F401 (re-exported constants and dtypes)
    bool_,
    complex64,
    complex128,
    complexfloating,
    e,
    float16,
    float32,
    float64,
    floating,
    generic,
    inexact,
    inf,
    int8,
    int16,
    int32,
    int64,
    integer,
    nan,
    newaxis,
    number,
    pi,
    signedinteger,
    uint8,
    uint16,
    uint32,
    uint64,
    unsignedinteger,
)

from tidu.core.keys import is_complex, is_inexact  # noqa: F401
from tidu.numpy import array_api, fft, linalg  # noqa: F401 (tnp.fft, tnp.linalg; the array API namespace)
from tidu.numpy._bitwise import (  # noqa: F401
    bitwise_and,
    bitwise_invert,
    bitwise_left_shift,
    bitwise_not,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    invert,
    left_shift,
    right_shift,
)
from tidu.numpy._casting import array, asarray, astype  # noqa: F401
from tidu.numpy._contractions import (  # noqa: F401
    cross,
    dot,
    einsum,
    inner,
    kron,
    matmul,
    matvec,
    outer,
    tensordot,
    vdot,
    vecdot,
    vecmat,
)
from tidu.numpy._core import ArrayLike, broadcast_shapes  # noqa: F401
from tidu.numpy._covariance import corrcoef, cov  # noqa: F401
from tidu.numpy._creation import arange, copy, eye, full, geomspace, linspace, logspace, ones, zeros  # noqa: F401
from tidu.numpy._dtypes import result_type  # noqa: F401
from tidu.numpy._elementwise import (  # noqa: F401
    abs,
    absolute,
    add,
    clip,
    conj,
    conjugate,
    cos,
    cosh,
    divide,
    equal,
    exp,
    expm1,
    greater,
    greater_equal,
    imag,
    less,
    less_equal,
    log,
    log1p,
    log2,
    log10,
    maximum,
    minimum,
    multiply,
    negative,
    not_equal,
    positive,
    power,
    real,
    reciprocal,
    rsqrt,
    sign,
    sin,
    sinh,
    sqrt,
    square,
    subtract,
    tan,
    tanh,
    true_divide,
    where,
)
from tidu.numpy._filled import full_like, ones_like, zeros_like  # noqa: F401
from tidu.numpy._functional import apply_along_axis, apply_over_axes, vectorize  # noqa: F401
from tidu.numpy._index_tricks import (  # noqa: F401
    bartlett,
    blackman,
    c_,
    diag_indices,
    diag_indices_from,
    euler_gamma,
    fromfunction,
    hamming,
    hanning,
    index_exp,
    indices,
    ix_,
    kaiser,
    mask_indices,
    mgrid,
    ogrid,
    r_,
    ravel_multi_index,
    s_,
    tril_indices,
    tril_indices_from,
    triu_indices,
    triu_indices_from,
    unravel_index,
)
from tidu.numpy._indexing import (  # noqa: F401
    _At,
    at,
    choose,
    compress,
    fill_diagonal,
    getitem,
    piecewise,
    place,
    put,
    put_along_axis,
    select,
    take,
    take_along_axis,
)
from tidu.numpy._introspection import (  # noqa: F401
    can_cast,
    finfo,
    iinfo,
    iscomplexobj,
    isdtype,
    isrealobj,
    isscalar,
    issubdtype,
    iterable,
    promote_types,
    size,
)
from tidu.numpy._matrices import (  # noqa: F401
    diag,
    diagflat,
    diagonal,
    empty,
    empty_like,
    identity,
    trace,  # noqa: F401
    tri,
    tril,
    triu,
)
from tidu.numpy._padding import pad  # noqa: F401
from tidu.numpy._polyfit import polyfit  # noqa: F401
from tidu.numpy._polynomials import (  # noqa: F401
    convolve,
    correlate,
    poly,
    polyadd,
    polyder,
    polydiv,
    polyint,
    polymul,
    polysub,
    polyval,
    vander,
)
from tidu.numpy._reductions import (  # noqa: F401
    all,
    allclose,
    amax,
    amin,
    any,
    argmax,
    argmin,
    average,
    count_nonzero,
    logsumexp,
    max,
    mean,
    min,
    minmax,
    nanargmax,
    nanargmin,
    nanmax,
    nanmean,
    nanmin,
    nanprod,
    nanstd,
    nansum,
    nanvar,
    prod,
    ptp,
    std,
    sum,
    var,
)
from tidu.numpy._roots import roots  # noqa: F401
from tidu.numpy._scans import (  # noqa: F401
    cummax,
    cummin,
    cumprod,
    cumsum,
    cumulative_prod,
    cumulative_sum,
    diff,
    ediff1d,
    gradient,
    nancumprod,
    nancumsum,
    trapezoid,
    unwrap,
)
from tidu.numpy._selection import (  # noqa: F401
    argwhere,
    array_equal,
    array_equiv,
    bincount,
    bitwise_count,
    digitize,
    extract,
    flatnonzero,
    frexp,
    gcd,
    histogram,
    histogram_bin_edges,
    iscomplex,
    isreal,
    lcm,
    nonzero,
    spacing,
    trim_zeros,
)
from tidu.numpy._sets import (  # noqa: F401
    intersect1d,
    isin,
    setdiff1d,
    setxor1d,
    union1d,
    unique,
    unique_all,
    unique_counts,
    unique_inverse,
    unique_values,
)
from tidu.numpy._shapes import (  # noqa: F401
    append,
    array_split,
    atleast_1d,
    atleast_2d,
    atleast_3d,
    block,
    broadcast_arrays,
    broadcast_to,
    column_stack,
    concat,
    concatenate,
    delete,
    dsplit,
    dstack,
    expand_dims,
    flatten,
    flip,
    fliplr,
    flipud,
    hsplit,
    hstack,
    insert,
    matrix_transpose,
    meshgrid,
    moveaxis,
    ndim,
    permute_dims,
    ravel,
    repeat,
    reshape,
    resize,
    roll,
    rollaxis,
    rot90,
    shape,
    split,
    squeeze,
    stack,
    swapaxes,
    tile,
    transpose,
    unstack,
    vsplit,
    vstack,
)
from tidu.numpy._sorting import (  # noqa: F401
    argpartition,
    argsort,
    interp,
    lexsort,
    median,
    nanmedian,
    nanpercentile,
    nanquantile,
    partition,
    percentile,
    quantile,
    searchsorted,
    sort,
    sort_complex,
    top_k,
)
from tidu.numpy._ufuncs import (  # noqa: F401
    angle,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctan2,
    arctanh,
    around,
    cbrt,
    ceil,
    copysign,
    deg2rad,
    degrees,
    divmod,
    exp2,
    fabs,
    fix,
    float_power,
    floor,
    floor_divide,
    fmax,
    fmin,
    fmod,
    heaviside,
    hypot,
    i0,
    isclose,
    isfinite,
    isinf,
    isnan,
    isneginf,
    isposinf,
    ldexp,
    logaddexp,
    logaddexp2,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    mod,
    modf,
    nan_to_num,
    nextafter,
    rad2deg,
    radians,
    remainder,
    rint,
    round,
    signbit,
    sinc,
    trunc,
)
from tidu.numpy._user_ops import op  # noqa: F401 (tidu.op: a primitive of the active catalog)
from tidu.trace.tracing import Trace, TraceError, Tracer  # noqa: F401

# the array-API names of jax.numpy
acos, acosh, asin, asinh, atan, atanh, atan2, pow = arccos, arccosh, arcsin, arcsinh, arctan, arctanh, arctan2, power

# jax.numpy's other dtype names (with 64-bit types: int_ is int64, float_ float64, ...); bfloat16 is
# ml_dtypes' (a dependency), the one tidu handles
bool = bool_  # noqa: A001 (jax.numpy's name)
bfloat16 = _ml_dtypes.bfloat16
dtype = np.dtype
int_, uint, float_, complex_ = int64, uint64, float64, complex128
single, double, csingle, cdouble = float32, float64, complex64, complex128

# --- tracer operators and methods ----------------------------------------------------


def _install() -> None:
    def binary(fn: Any, reflected: bool = False) -> Any:
        return (lambda self, other: fn(other, self)) if reflected else (
            lambda self, other: fn(self, other))

    for name, fn in {"add": add, "sub": subtract, "mul": multiply, "truediv": divide,
                     "pow": power, "matmul": matmul, "mod": remainder, "floordiv": floor_divide,
                     "divmod": divmod, "and": bitwise_and, "or": bitwise_or,
                     "xor": bitwise_xor, "lshift": left_shift, "rshift": right_shift}.items():
        setattr(Tracer, f"__{name}__", binary(fn))
        setattr(Tracer, f"__r{name}__", binary(fn, reflected=True))
    for name, fn in {"lt": less, "le": less_equal, "gt": greater, "ge": greater_equal,
                     "eq": equal, "ne": not_equal}.items():
        setattr(Tracer, f"__{name}__", binary(fn))
    Tracer.__array_ufunc__ = _array_ufunc
    Tracer.__array_function__ = _array_function
    Tracer.__array_namespace__ = _array_namespace
    Tracer.device = property(lambda self: "cpu")
    Tracer.to_device = _to_device
    Tracer.at = property(_At)
    Tracer.__neg__ = negative
    Tracer.__pos__ = positive
    Tracer.__abs__ = abs
    Tracer.__invert__ = invert
    Tracer.__round__ = round
    Tracer.__getitem__ = getitem
    Tracer.__setitem__ = _setitem
    Tracer.T = property(transpose)
    Tracer.mT = property(lambda self: swapaxes(self, -1, -2))
    Tracer.real = property(real)
    Tracer.imag = property(imag)
    for name, fn in {"conj": conj, "conjugate": conj, "reshape": reshape, "transpose": transpose,
                     "astype": astype, "dot": dot, "ravel": ravel, "flatten": ravel,
                     "squeeze": squeeze, "swapaxes": swapaxes, "clip": clip, "round": round,
                     "argmax": argmax, "argmin": argmin, "cumsum": cumsum, "cumprod": cumprod,
                     "diagonal": diagonal, "repeat": repeat, "sort": sort,
                     "argsort": argsort, "take": take}.items():
        setattr(Tracer, name, fn)
    for fn in (sum, mean, prod, max, min, all, any, var, std, ptp):
        setattr(Tracer, fn.__name__, _reduction_method(fn))


def _array_ufunc(self: Tracer, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """``np.exp(tracer)``, ``ndarray + tracer``: the tidu.numpy function of that name."""
    fn = globals().get(ufunc.__name__)
    if method != "__call__" or kwargs or not callable(fn):
        return NotImplemented
    return fn(*inputs)


def _array_function(self: Tracer, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
    """``np.dot(tracer, a)``, ``np.where(c, tracer, 0)``, ``np.linalg.norm(tracer)``,
    ``np.fft.fft(tracer)``: the tidu.numpy (or tidu.numpy.linalg, tidu.numpy.fft) function of
    that name, with the same arguments."""
    module = getattr(func, "__module__", "") or ""
    space = linalg if module.endswith("linalg") else fft if module.endswith(".fft") else None
    fn = getattr(space, func.__name__, None) if space is not None else globals().get(func.__name__)
    if fn is None or not callable(fn) or isinstance(fn, type):
        where_ = f"numpy.{space.__name__.rpartition('.')[2]}" if space is not None else "numpy"
        raise TypeError(f"{where_}.{func.__name__} has no tidu.numpy counterpart for traced values; "
                        "see docs/numpy.md for what tidu.numpy provides")
    # a traced value is among the arguments: tidu's implementation itself, not its switch to
    # NumPy, which would hand the tracer back to NumPy (and here again) were it in an argument
    # the switch does not look at
    impl = fn.__wrapped__ if hasattr(fn, "numpy") and hasattr(fn, "__wrapped__") else fn
    return impl(*args, **kwargs)


def _setitem(self: Tracer, index: Any, value: Any) -> None:
    """``x[index] = value``: ``x`` (this Python object) becomes ``x.at[index].set(value)``,
    as code written for NumPy or the array API standard expects. Only this object
    changes: values computed from ``x`` before, and slices taken from it (copies, not
    views), keep what they were. A traced boolean mask of ``x``'s shape is a ``where``."""
    if isinstance(index, Tracer) and index.aval.dtype == "bool" and index.shape == self.shape:
        new = where(index, value, self)
    else:
        new = _At(self)[index].set(value)
    if not isinstance(new, Tracer) or new.aval != self.aval:
        new = astype(broadcast_to(new, self.shape), self.aval.dtype)
    self.ref, self.weak = new.ref, False


def _array_namespace(self: Tracer, api_version: str | None = None) -> Any:
    """The array API standard's namespace (``tidu.numpy.array_api``)."""
    if api_version not in (None, "2021.12", "2022.12", "2023.12"):
        raise ValueError(f"tidu's array API namespace implements the standard up to 2023.12, not {api_version!r}")
    return array_api


def _to_device(self: Tracer, device: Any, /, *, stream: Any = None) -> Tracer:
    if device != "cpu":
        raise ValueError(f"a traced value has one device, 'cpu'; got {device!r}")
    return self


def _reduction_method(fn: Any) -> Any:
    """``x.sum(...)`` etc., also as called by ``np.sum(x)`` (dtype=, out=)."""

    params = inspect.signature(fn).parameters

    def method(self: Tracer, axis: Any = None, dtype: Any = None, out: Any = None,
               keepdims: bool = False, **kwargs: Any) -> Any:
        # the function's own keywords (ddof, initial, where, ...) pass through
        unknown = [k for k in kwargs if k not in params or k in ("x", "a", "out")]
        if out is not None or unknown:
            bad = ", ".join(["out"] * (out is not None) + unknown)
            raise TypeError(f"{fn.__name__}: {bad} is not supported on traced arrays")
        if "dtype" in params:  # accumulate (or compute) in dtype, as NumPy
            return fn(self, axis=axis, keepdims=keepdims, dtype=dtype, **kwargs)
        result = fn(self, axis=axis, keepdims=keepdims, **kwargs)
        return result if dtype is None else astype(result, dtype)

    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


_install()

__all__ = [n for n in dir() if not n.startswith("_") and n not in (
    "annotations", "builtins", "math", "np", "Any", "Sequence", "Trace", "TraceError",
    "is_complex", "is_inexact", "real_dtype")]


def _document() -> None:
    """Functions with no docstring of their own say which NumPy function they follow,
    with NumPy's one-line summary."""
    for name in __all__:
        fn = globals()[name]
        if not callable(fn) or isinstance(fn, type) or (getattr(fn, "__doc__", None) or "").strip():
            continue
        origin = "numpy" if hasattr(np, name) else "numpy.ndarray"
        ref = getattr(np, name, None) or getattr(np.ndarray, name, None)
        paragraphs = [p.strip() for p in (getattr(ref, "__doc__", None) or "").split("\n\n")]
        summary = next((" ".join(p.split()) for p in paragraphs
                        if p and not p.startswith(f"{name}(") and "(" not in p.split()[0]), "")
        fn.__doc__ = (f"``{origin}.{name}`` for tidu values" + (f": {summary}" if summary else ".")
                      + "\n\nTraced and differentiated by tidu's transforms (docs/transforms.md).")


_document()
