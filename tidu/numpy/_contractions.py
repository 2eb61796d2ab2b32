"""tidu.numpy contractions: matmul, dot, inner, vdot, outer, trace and einsum, as
``dot_general`` (the einsum subscripts are parsed by ``tidu.numpy._einsum_plan``)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from tidu.numpy import _einsum_plan as _einsum
from tidu.numpy._core import ArrayLike, _broadcast_to, _prep, _trace_of, broadcast_shapes, numpy_fallback
from tidu.numpy._dtypes import result_type
from tidu.numpy._elementwise import conj, multiply, not_equal
from tidu.numpy._reductions import sum as sum_
from tidu.numpy._shapes import expand_dims, moveaxis, ravel, reshape, stack, transpose
from tidu.trace.tracing import Tracer


def _dot_general(a: Tracer, b: Tracer, lc: Sequence[int], rc: Sequence[int],
                 lb: Sequence[int] = (), rb: Sequence[int] = ()) -> Tracer:
    return a.trace.emit("dot_general", [a, b], {
        "lhs_contract": tuple(lc), "rhs_contract": tuple(rc),
        "lhs_batch": tuple(lb), "rhs_batch": tuple(rb)})


def _pair(x: Any, y: Any, what: str, keep_bool: bool = False) -> tuple[Tracer, Tracer]:
    trace = _trace_of((x, y))
    assert trace is not None
    dtype = result_type(x, y)
    if dtype == "bool" and not keep_bool:
        dtype = "int64"  # (summed as integers: see _logical)
    return _prep(trace, x, dtype), _prep(trace, y, dtype)


def _logical(out: Tracer, *operands: Any) -> Tracer:
    """A contraction of booleans as NumPy's and JAX's: a boolean (any of the products),
    where it was summed as integers."""
    if all((o.aval.dtype if isinstance(o, Tracer) else np.asarray(o).dtype.name) == "bool" for o in operands):
        return not_equal(out, 0)
    return out


def _check_contract(a: Tracer, i: int, b: Tracer, j: int, what: str) -> None:
    if a.shape[i] != b.shape[j]:
        raise ValueError(f"tnp.{what}: shapes {a.shape} and {b.shape} are not aligned: "
                         f"axis {i} ({a.shape[i]}) != axis {j} ({b.shape[j]})")


def _same_dtype(np_fn: Any) -> Any:
    """NumPy's contraction, its result made the operands' dtype where both share one
    (ml_dtypes' bfloat16 products are float32: rounded once)."""

    def fn(x: Any, y: Any) -> Any:
        out = np_fn(x, y)
        dtype = getattr(x, "dtype", None)
        return out.astype(dtype) if dtype is not None and dtype == getattr(y, "dtype", None) != out.dtype else out

    fn.__name__ = np_fn.__name__
    return fn


@numpy_fallback(_same_dtype(np.matmul), "x", "y", accumulates=True)
def matmul(x: ArrayLike, y: ArrayLike) -> Any:
    """NumPy matmul: 1-D operands are vectors, leading axes are broadcast batch axes."""
    return _logical(_matmul(x, y), x, y)


def _matmul(x: ArrayLike, y: ArrayLike) -> Any:
    a, b = _pair(x, y, "matmul")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("tnp.matmul: operands must have at least one axis; use * for scalars")
    if b.ndim == 1:
        _check_contract(a, a.ndim - 1, b, 0, "matmul")
        return _dot_general(a, b, [a.ndim - 1], [0])
    if a.ndim == 1:
        _check_contract(a, 0, b, b.ndim - 2, "matmul")
        return _dot_general(a, b, [0], [b.ndim - 2])
    _check_contract(a, a.ndim - 1, b, b.ndim - 2, "matmul")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], what="matmul")
    a = _broadcast_to(a, batch + a.shape[-2:])
    b = _broadcast_to(b, batch + b.shape[-2:])
    nb = len(batch)
    return _dot_general(a, b, [nb + 1], [nb], range(nb), range(nb))


@numpy_fallback(_same_dtype(np.dot), "x", "y", accumulates=True)
def dot(x: ArrayLike, y: ArrayLike) -> Any:
    """NumPy dot: sum over the last axis of x and the second-to-last (or only) axis of y."""
    a, b = _pair(x, y, "dot")
    if a.ndim == 0 or b.ndim == 0:
        return _logical(multiply(a, b), x, y)
    j = 0 if b.ndim == 1 else b.ndim - 2
    _check_contract(a, a.ndim - 1, b, j, "dot")
    return _logical(_dot_general(a, b, [a.ndim - 1], [j]), x, y)


@numpy_fallback(np.inner, "x", "y", accumulates=True)
def inner(x: ArrayLike, y: ArrayLike) -> Any:
    a, b = _pair(x, y, "inner")
    if a.ndim == 0 or b.ndim == 0:
        return _logical(multiply(a, b), x, y)
    _check_contract(a, a.ndim - 1, b, b.ndim - 1, "inner")
    return _logical(_dot_general(a, b, [a.ndim - 1], [b.ndim - 1]), x, y)


@numpy_fallback(np.vdot, "x", "y", accumulates=True)
def vdot(x: ArrayLike, y: ArrayLike) -> Any:
    """sum(conj(x) * y) over the flattened arrays."""
    return inner(ravel(conj(x)), ravel(y))


@numpy_fallback(np.outer, "x", "y")
def outer(x: ArrayLike, y: ArrayLike) -> Any:
    return multiply(reshape(ravel(x), (-1, 1)), reshape(ravel(y), (1, -1)))


def _sublist_subscripts(args: Sequence[Any]) -> tuple[str, list[Any]]:
    """NumPy's sublist form ``einsum(a, [0, 1], b, [1, 2], [0, 2])`` as (subscripts, operands):
    label k is a letter (0-25 'A'-'Z', 26-51 'a'-'z', so the implicit output's alphabetical
    order is the labels' numerical order, as NumPy's), ``...`` (Ellipsis) stays."""
    def term(sub: Any) -> str:
        out = []
        for k in sub:
            if k is Ellipsis:
                out.append("...")
            elif isinstance(k, int | np.integer) and not isinstance(k, bool) and 0 <= k < 52:
                out.append(chr(ord("A") + k) if k < 26 else chr(ord("a") + k - 26))
            else:
                raise ValueError(f"tnp.einsum: sublist label {k!r} is not an integer in [0, 52) or ...")
        return "".join(out)

    ops = list(args[0::2][:len(args) // 2])
    terms = [term(s) for s in args[1::2][:len(args) // 2]]
    spec = ",".join(terms)
    if len(args) % 2:
        spec += "->" + term(args[-1])
    return spec, ops


@numpy_fallback(np.einsum, "subscripts", "operands", nested=True, accumulates=True)
def einsum(subscripts: Any, *operands: ArrayLike, optimize: Any = False) -> Any:
    """Einstein summation: pairwise ``dot_general`` contractions left to right, repeated
    labels in one operand (diagonals, traces) by a product with the identity, and labels
    used by one operand only summed first. ``...`` broadcasts as in NumPy. The sublist form
    (``einsum(a, [0, 1], b, [1, 2], [0, 2])``) is NumPy's too. ``optimize`` (NumPy's and
    JAX's contraction-order choice) is taken and not read when traced: the e-graph and the
    plan above decide, and the value does not depend on it."""
    if not isinstance(subscripts, str):
        subscripts, operands = _sublist_subscripts((subscripts, *operands))  # type: ignore[assignment]
    tr = _trace_of(operands)
    assert tr is not None
    dtype = result_type(*operands)
    ops = [_prep(tr, o, "int64" if dtype == "bool" else dtype) for o in operands]
    terms, out = _einsum.parse(subscripts, [o.ndim for o in ops])
    sizes: dict[str, int] = {}  # a label's size: the one that is not 1 (which may be 0)
    for o, t in zip(ops, terms, strict=True):
        for c, d in zip(t, o.shape, strict=True):
            if sizes.get(c, 1) not in (1, d) and d != 1:
                raise ValueError(f"tnp.einsum: label {c!r} has sizes {sizes[c]} and {d} in "
                                 f"{subscripts!r}")
            if d != 1 or c not in sizes:
                sizes[c] = d
    work = []
    for k, (o, t) in enumerate(zip(ops, terms, strict=True)):
        o = _broadcast_to(o, tuple(sizes[c] for c in t)) if o.shape != tuple(sizes[c] for c in t) \
            else o
        o, t = _einsum_diagonals(o, t)
        others = set(out).union(*(terms[j] for j in range(len(terms)) if j != k))
        o, t = _sum_labels(o, t, [c for c in t if c not in others])
        work.append((o, t))
    cur, ct = work[0]
    for k in range(1, len(work)):
        other, ot = work[k]
        later = set(out).union(*(t for _, t in work[k + 1:]))
        shared = [c for c in ct if c in ot]
        batch = [c for c in shared if c in later]
        contract = [c for c in shared if c not in later]
        cur = _dot_general(cur, other, [ct.index(c) for c in contract],
                           [ot.index(c) for c in contract], [ct.index(c) for c in batch],
                           [ot.index(c) for c in batch])
        ct = "".join(batch) + "".join(c for c in ct if c not in ot) + "".join(
            c for c in ot if c not in shared)
    cur, ct = _sum_labels(cur, ct, [c for c in ct if c not in out])
    return _logical(transpose(cur, [ct.index(c) for c in out]), *operands)


def _einsum_diagonals(o: Tracer, t: str) -> tuple[Tracer, str]:
    """Reduce repeated labels of one operand: multiply by the identity, sum one axis."""
    while len(set(t)) != len(t):
        c = next(c for c in t if t.count(c) > 1)
        p = t.index(c)
        q = t.index(c, p + 1)
        n = o.shape[p]
        eye_ = o.trace.constant(np.eye(n, dtype=o.aval.dtype))
        mask = o.trace.emit("broadcast_in_dim", [eye_], {"shape": o.shape, "dims": (p, q)})
        o = o.trace.emit("reduce_sum", [multiply(o, mask)], {"axes": (q,)})
        t = t[:q] + t[q + 1:]
    return o, t


def _sum_labels(o: Tracer, t: str, labels: Sequence[str]) -> tuple[Tracer, str]:
    if not labels:
        return o, t
    axes = tuple(sorted(t.index(c) for c in labels))
    return o.trace.emit("reduce_sum", [o], {"axes": axes}), "".join(c for c in t if c not in labels)


@numpy_fallback(np.tensordot, "a", "b", accumulates=True)
def tensordot(a: ArrayLike, b: ArrayLike, axes: int | Sequence[Any] = 2) -> Any:
    """Sum over the last ``axes`` axes of a and the first of b, or over the axis lists
    ``axes = (a_axes, b_axes)``."""
    x, y = _pair(a, b, "tensordot")
    if isinstance(axes, int | np.integer):
        n = int(axes)
        if not 0 <= n <= builtins.min(x.ndim, y.ndim):
            raise ValueError(f"tnp.tensordot: axes={n} must be between 0 and the smaller rank "
                             f"({x.ndim} and {y.ndim}), or a pair of axis lists")
        ax, ay = list(range(x.ndim - n, x.ndim)), list(range(n))
    else:
        if not isinstance(axes, Sequence) or len(axes) != 2:
            raise TypeError(f"tnp.tensordot: axes must be an int or a pair (a_axes, b_axes), got {axes!r}")
        ax, ay = ([axes[0]] if isinstance(axes[0], int | np.integer) else list(axes[0]),
                  [axes[1]] if isinstance(axes[1], int | np.integer) else list(axes[1]))
        ax, ay = [a_ % x.ndim for a_ in ax], [b_ % y.ndim for b_ in ay]
    if len(ax) != len(ay):
        raise ValueError(f"tnp.tensordot: {len(ax)} axes of a but {len(ay)} of b")
    for i, j in zip(ax, ay, strict=True):
        _check_contract(x, i, y, j, "tensordot")
    return _logical(_dot_general(x, y, ax, ay), a, b)


@numpy_fallback(np.kron, "a", "b")
def kron(a: ArrayLike, b: ArrayLike) -> Any:
    """Kronecker product: blocks a[i, j] * b."""
    x, y = _pair(a, b, "kron", keep_bool=True)  # (bools: the product is their and)
    nd = builtins.max(x.ndim, y.ndim)
    xs, ys = (1,) * (nd - x.ndim) + x.shape, (1,) * (nd - y.ndim) + y.shape
    xr = reshape(x, tuple(v for d in xs for v in (d, 1)))
    yr = reshape(y, tuple(v for d in ys for v in (1, d)))
    return reshape(multiply(xr, yr), tuple(p * q for p, q in zip(xs, ys, strict=True)))


@numpy_fallback(np.cross, "a", "b")
def cross(a: ArrayLike, b: ArrayLike, axisa: int = -1, axisb: int = -1, axisc: int = -1,
          axis: int | None = None) -> Any:
    """Cross product of 3-vectors (or the z-component for 2-vectors) along the given axes."""
    if result_type(a, b) == "bool":  # NumPy and JAX refuse it too (a - b of booleans)
        raise TypeError("tnp.cross is not defined for boolean arrays")
    pair = _pair(a, b, "cross")
    if axis is not None:
        axisa = axisb = axisc = axis
    x, y = moveaxis(pair[0], axisa, -1), moveaxis(pair[1], axisb, -1)
    if x.shape[-1] not in (2, 3) or y.shape[-1] not in (2, 3):
        raise ValueError("tnp.cross: incompatible dimensions for cross product (dimension must be 2 or 3)")

    def comp(v: Tracer, i: int) -> Any:
        return v[..., i] if i < v.shape[-1] else None

    def sub_(p: Any, q: Any) -> Any:
        if p is None and q is None:
            return None
        if q is None:
            return p
        return multiply(q, -1) if p is None else p - q

    def mul_(p: Any, q: Any) -> Any:
        return None if p is None or q is None else multiply(p, q)

    x0, x1, x2 = (comp(x, i) for i in range(3))
    y0, y1, y2 = (comp(y, i) for i in range(3))
    cz = sub_(mul_(x0, y1), mul_(x1, y0))
    if x.shape[-1] == 2 and y.shape[-1] == 2:
        return cz
    cx = sub_(mul_(x1, y2), mul_(x2, y1))
    cy = sub_(mul_(x2, y0), mul_(x0, y2))
    shape = broadcast_shapes(cz.shape, *(c.shape for c in (cx, cy) if c is not None))
    parts = [_broadcast_to(c, shape) if c is not None else multiply(_broadcast_to(cz, shape), 0)
             for c in (cx, cy, cz)]
    return moveaxis(stack(parts, axis=-1), -1, axisc)


@numpy_fallback("vecdot", "x", "y", accumulates=True)
def vecdot(x: ArrayLike, y: ArrayLike, axis: int = -1) -> Any:
    """sum(conj(x) * y) along ``axis`` (broadcasting the other axes), in the products'
    dtype (an int32 vecdot is int32, as NumPy's and JAX's; bools: see ``_logical``)."""
    products = multiply(conj(x), y)
    dtype = products.aval.dtype
    return _logical(sum_(products, axis=axis, dtype=None if dtype == "bool" else dtype), x, y)


@numpy_fallback("matvec", "a", "v", accumulates=True)
def matvec(a: ArrayLike, v: ArrayLike) -> Any:
    """Matrix-vector products over the last axes (batch axes broadcast)."""
    return matmul(a, expand_dims(v, -1))[..., 0]


@numpy_fallback("vecmat", "v", "a", accumulates=True)
def vecmat(v: ArrayLike, a: ArrayLike) -> Any:
    """conj(v) @ a over the last axes (batch axes broadcast)."""
    return matmul(expand_dims(conj(v), -2), a)[..., 0, :]
