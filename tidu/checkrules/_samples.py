"""Sample tables: the applications of a primitive that its JVP and transpose rules are
checked on, random operand values and tangents, and the special values rewrites are
sampled at. Generators are seeded by the rule's place: a report is the same on every run."""

from __future__ import annotations

import os
import zlib
from typing import Any

import numpy as np

from tidu.core.keys import Attrs, Aval, is_complex, is_inexact
from tidu.ops import catalog as _primitives
from tidu.ops.catalog import Primitive
from tidu.ops.dsl.ast import Call, Num, Var
from tidu.ops.type_rules import DTYPE_CLASSES

# --- JVP and transpose rules ------------------------------------------------------------


def _same_width(dtype: str) -> list[str]:
    """The other real dtypes of ``dtype``'s width (a bitcast's targets)."""
    if dtype not in DTYPE_CLASSES["real"]:
        return []
    width = np.dtype(dtype).itemsize
    return sorted(t for t in DTYPE_CLASSES["real"] if t != dtype and np.dtype(t).itemsize == width)


def samples(prim: Primitive, dtype: str) -> list[tuple[list[Aval], dict[str, Any]]]:
    """Applications of ``prim`` to check it on: (operand avals, attributes), chosen by its
    type rule; only those its dtypes and type rule accept."""
    def a(*shape: int) -> Aval:
        return Aval(shape, dtype)

    n = len(prim.operands)
    dirs = ("EQ", "NE") if is_complex(dtype) else ("LT", "EQ", "GE")
    table: dict[str, list[tuple[list[Aval], dict[str, Any]]]] = {
        # and the derivative orders a special function's derivative primitives carry
        "elementwise": [([a(8)] * n, {}), ([a(8)] * n, {"order": 1}), ([a(8)] * n, {"order": 3}),
                        ([a(8)] * n, {"order_a": 0, "order_x": 0}), ([a(8)] * n, {"order_a": 2, "order_x": 1}),
                        ([a(8)] * n, {"order_s": 1, "order_q": 0}), ([a(8)] * n, {"order_s": 2, "order_q": 1}),
                        ([a(8)] * n, {"order_a": 1, "order_b": 0}), ([a(8)] * n, {"order_a": 1, "order_b": 2}),
                        ([a(8)] * n, {"order_a": 0, "order_b": 1, "order_x": 2}),
                        ([a(8)] * n, {"order_a": 1, "order_b": 0, "order_c": 1, "order_x": 1}),
                        ([a(8)] * n, {"order_a": 0, "order_b": 2, "order_c": 0, "order_x": 0})],
        "to_real": [([a(8)], {})],
        "abs": [([a(8)], {})],
        "make_complex": [([a(8)] * n, {})],
        "compare": [([a(8)] * 2, {"direction": d}) for d in dirs],
        "select": [([Aval((8,), "bool"), a(8), a(8)], {})],
        "convert": [([a(8)], {"dtype": t}) for t in ("float64", "complex128")],
        "bitcast": [([a(8)], {"dtype": t}) for t in _same_width(dtype)],
        # size-1 and zero-size axes (SIZE_EDGES): where a rule that divides by a count, reads
        # a neighbour or assumes an element exists breaks, and random shapes never go
        "broadcast_in_dim": [([a(3, 1)], {"shape": (2, 3, 4), "dims": (1, 2)}),
                             ([a()], {"shape": (2,), "dims": ()}),
                             ([a(1, 3)], {"shape": (1, 0, 3), "dims": (0, 2)}),
                             ([a(0, 1)], {"shape": (0, 2), "dims": (0, 1)})],
        "reshape": [([a(2, 3)], {"shape": (3, 2)}), ([a(2, 3)], {"shape": (6,)}),
                    ([a(2, 1, 3)], {"shape": (3, 1, 2)}), ([a(2, 0)], {"shape": (0, 3)})],
        "transpose": [([a(2, 3, 4)], {"perm": (2, 0, 1)}), ([a(2, 1, 0)], {"perm": (1, 2, 0)})],
        "reverse": [([a(2, 3, 4)], {"dims": (0, 2)}), ([a(1, 3, 0)], {"dims": (0, 1, 2)})],
        "reduce": [([a(2, 3, 4)], {"axes": (0, 2)}), ([a(3)], {"axes": (0,)}),
                   ([a(2, 1, 3)], {"axes": (1,)}), ([a(1)], {"axes": (0,)}),
                   ([a(3, 0)], {"axes": (1,)}), ([a(0, 3)], {"axes": (1,)})],
        "dot_general": [
            ([a(2, 3, 4), a(2, 4, 5)], {"lhs_contract": (2,), "rhs_contract": (1,), "lhs_batch": (0,),
                                        "rhs_batch": (0,)}),
            ([a(4, 2, 3), a(3, 4)], {"lhs_contract": (2, 0), "rhs_contract": (0, 1), "lhs_batch": (),
                                     "rhs_batch": ()}),
            # batch axes elsewhere than in front, at different places in the two operands
            ([a(3, 2, 4), a(4, 5, 2)], {"lhs_contract": (2,), "rhs_contract": (0,), "lhs_batch": (1,),
                                        "rhs_batch": (2,)}),
            # two batch axes in opposite orders, contraction over the last and a middle axis
            ([a(2, 3, 4, 5), a(3, 2, 5, 6)], {"lhs_contract": (3,), "rhs_contract": (2,), "lhs_batch": (0, 1),
                                              "rhs_batch": (1, 0)}),
            # a transposed layout (contracting the first axes) and vectors
            ([a(4, 3), a(4, 5)], {"lhs_contract": (0,), "rhs_contract": (0,), "lhs_batch": (), "rhs_batch": ()}),
            ([a(4), a(4)], {"lhs_contract": (0,), "rhs_contract": (0,), "lhs_batch": (), "rhs_batch": ()}),
            # contractions over one element and over none (a zero result), a batch of one
            ([a(1, 3, 1), a(1, 1, 2)], {"lhs_contract": (2,), "rhs_contract": (1,), "lhs_batch": (0,),
                                        "rhs_batch": (0,)}),
            ([a(3, 0), a(0, 2)], {"lhs_contract": (1,), "rhs_contract": (0,), "lhs_batch": (), "rhs_batch": ()}),
        ],
        "slice": [([a(5, 6)], {"start": (1, 0), "limit": (5, 5), "strides": (2, 2)}),
                  ([a(1, 4)], {"start": (0, 2), "limit": (1, 2), "strides": (1, 1)})],
        # integer starts, drawn in and out of range (the primitives clamp them)
        "dynamic_slice": [([a(5, 3), Aval((), "int32")], {"axis": 0, "size": 2}),
                          ([a(2, 4), Aval((), "int64")], {"axis": 1, "size": 1}),
                          ([a(3), Aval((), "int32")], {"axis": 0, "size": 3})],
        "dynamic_update_slice": [([a(5, 3), a(2, 3), Aval((), "int32")], {"axis": 0}),
                                 ([a(2, 4), a(2, 1), Aval((), "int64")], {"axis": 1}),
                                 ([a(3), a(3), Aval((), "int32")], {"axis": 0})],
        "pad": [([a(2, 3), a()], {"low": (1, 0), "high": (0, 2), "interior": (1, 0)}),
                ([a(1, 0), a()], {"low": (0, 1), "high": (1, 0), "interior": (2, 0)})],
        "concatenate": [([a(2, 3), a(1, 3), a(4, 3)], {"axis": 0}), ([a(2, 0), a(2, 1), a(2, 0)], {"axis": 1})],
        **_linalg_samples(a),
        **_fft_samples(a),
        **_conv_samples(a),
    }
    out = []
    for avals, attrs in table.get(prim.decl.type_rule, []):
        if set(attrs) != set(prim.attrs):
            continue
        try:
            prim.infer(avals, Attrs(attrs))
        except _primitives.OpError:
            continue
        out.append((avals, attrs))
    return out


# --- linear algebra (rules/linalg.rules) ---


def _linalg_samples(a: Any) -> dict[str, list[tuple[list[Aval], dict[str, Any]]]]:
    """Single and batched matrices; the first operand is made well conditioned by
    ``condition`` (positive definite, distinct eigenvalues)."""
    return {
        "matrix": [([a(2, 3, 3)], {"lower": True, "strict": False}), ([a(3, 4)], {"lower": False, "strict": True})],
        "square": [([a(3, 3)], {}), ([a(2, 3, 3)], {})],
        "linear_solve": [([a(3, 3), a(3, 2)], {}), ([a(2, 3, 3), a(2, 3, 2)], {}),
                         ([a(3, 3), a(3, 2)], {"lower": True, "unit_diagonal": False}),
                         ([a(2, 3, 3), a(2, 3, 1)], {"lower": False, "unit_diagonal": True})],
        "eigenvalues": [([a(3, 3)], {}), ([a(2, 3, 3)], {})],
        "determinant": [([a(3, 3)], {}), ([a(2, 3, 3)], {})],
        "log_determinant": [([a(3, 3)], {}), ([a(2, 3, 3)], {})],
        "qr_q": [([a(3, 3)], {}), ([a(2, 4, 2)], {})],
        "qr_r": [([a(3, 3)], {}), ([a(2, 4, 2)], {})],
        **{rule: [([a(3, 3)], {}), ([a(2, 4, 2)], {}), ([a(2, 4)], {})] for rule in ("svdvals", "svd_u", "svd_vh")},
        "pinv": [([a(3, 3)], {"rtol": 1e-10}), ([a(2, 4, 2)], {"rtol": 1e-10}), ([a(2, 4)], {"rtol": 1e-10})],
        "frechet": [([a(3, 3), a(3, 3)], {}), ([a(2, 3, 3), a(2, 3, 3)], {})],
        "lu": [([a(3, 3)], {}), ([a(2, 3, 3)], {}), ([a(4, 2)], {}), ([a(2, 2, 4)], {})],
        "lu_pivots": [([a(3, 3)], {}), ([a(2, 3, 3)], {}), ([a(4, 2)], {}), ([a(2, 4)], {})],
        "eigvals": [([a(3, 3)], {}), ([a(2, 3, 3)], {})],
        "eig_vectors": [([a(3, 3)], {}), ([a(2, 3, 3)], {})],
        # integer pivots whatever the dtype checked (the rule has no tangent either way)
        "permutation_matrix": [([Aval((3,), "int32")], {}), ([Aval((2, 4), "int32")], {})],
    }


# --- discrete Fourier transforms (rules/fft.rules) ---


def _fft_samples(a: Any) -> dict[str, list[tuple[list[Aval], dict[str, Any]]]]:
    """One to three transformed axes, with and without batch axes, every norm; even and
    odd last lengths and the shortest ones (1 and 2: a half spectrum of edges only)."""
    def at(*lengths: int, norm: str = "backward") -> dict[str, Any]:
        return {"fft_lengths": lengths, "norm": norm}

    return {
        "fft": [([a(6)], at(6)), ([a(2, 3, 4)], at(3, 4, norm="ortho")), ([a(2, 5)], at(5, norm="forward")),
                ([a(2, 3, 2)], at(2, 3, 2)), ([a(3, 1)], at(1, norm="ortho"))],
        "rfft": [([a(8)], at(8)), ([a(2, 5)], at(5, norm="ortho")), ([a(3, 4)], at(3, 4, norm="forward")),
                 ([a(2, 3, 2, 5)], at(3, 2, 5)), ([a(3, 2)], at(2)), ([a(2, 1)], at(1, norm="ortho"))],
        "irfft": [([a(5)], at(8)), ([a(2, 3)], at(5, norm="ortho")), ([a(3, 3)], at(3, 4, norm="forward")),
                  ([a(2, 3, 2, 3)], at(3, 2, 5)), ([a(3, 2)], at(2)), ([a(2, 1)], at(1, norm="ortho")),
                  ([a(2, 4)], at(7))],
    }


# --- convolution (rules/conv.rules) ---


def _conv_samples(a: Any) -> dict[str, list[tuple[list[Aval], dict[str, Any]]]]:
    """One to three spatial axes; strides that do not divide the span, lhs and rhs
    dilation, padding high and low, negative (cropping) and one-sided; feature groups and
    batch groups; a window as large as the padded input (one output) and a 1x1 window."""
    def at(strides: tuple[int, ...], padding: tuple[tuple[int, int], ...], lhs_dilation: tuple[int, ...] | None = None,
           rhs_dilation: tuple[int, ...] | None = None, groups: int = 1, batch_groups: int = 1) -> dict[str, Any]:
        n = len(strides)
        return {"window_strides": strides, "padding": padding, "lhs_dilation": lhs_dilation or (1,) * n,
                "rhs_dilation": rhs_dilation or (1,) * n, "feature_group_count": groups,
                "batch_group_count": batch_groups}

    return {"conv": [
        ([a(2, 3, 7), a(4, 3, 3)], at((1,), ((0, 0),))),
        ([a(2, 2, 8), a(3, 2, 3)], at((3,), ((2, 1),), (1,), (2,))),
        ([a(1, 2, 5, 4), a(2, 2, 2, 3)], at((2, 1), ((1, -1), (0, 2)), (2, 1), (1, 2))),
        ([a(2, 4, 5, 3), a(6, 2, 2, 2)], at((1, 2), ((1, 0), (0, 1)), groups=2)),
        ([a(6, 2, 6), a(6, 2, 2)], at((2,), ((0, 1),), (2,), batch_groups=3)),
        ([a(1, 1, 3, 2, 4), a(2, 1, 2, 1, 2)], at((1, 1, 2), ((0, 0), (1, 1), (-1, 0)), (1, 2, 1))),
        ([a(2, 3, 4), a(2, 3, 6)], at((1,), ((1, 1),))),
        ([a(1, 2, 3, 3), a(3, 2, 1, 1)], at((2, 2), ((0, 0), (0, 0)))),
    ]}


CONDITIONED = {"square", "linear_solve", "eigenvalues", "determinant", "log_determinant", "qr_q", "qr_r",
                "svdvals", "svd_u", "svd_vh", "pinv", "eigvals", "eig_vectors", "lu",
                "lu_pivots"}


def condition(prim: Primitive, args: list[np.ndarray]) -> list[np.ndarray]:
    """Operand values in the domain of a linear algebra primitive: its matrix operand
    plus a diagonal 4n + 3 (0, 1, .., n-1) makes the Hermitian part positive definite
    with well separated eigenvalues, and the matrix far from singular."""
    if prim.decl.type_rule not in CONDITIONED:
        return args
    m, n = args[0].shape[-2:]
    shift = np.eye(m, n) * (4.0 * n + 3.0 * np.arange(n))
    shift = shift.astype(args[0].dtype)
    return [args[0] + shift, *args[1:]]


def diagonal(avals: list[Aval], args: list[np.ndarray]) -> list[np.ndarray]:
    """The matrix operand of a linear algebra primitive made diagonal with entries 1, 2.5,
    4, ..: exact unit singular values and eigen/singular vectors that are unit vectors
    (first components exactly 1 and 0), where rules that guard a division compare
    intermediate values with 0 and 1. Random conditioned matrices never hit those points.
    (Not a zero singular value: its vectors have no derivative, the rules give nan.)"""
    m, n = avals[0].shape[-2:]
    k = min(m, n)
    d = np.zeros(avals[0].shape, dtype=avals[0].dtype)
    d[..., np.arange(k), np.arange(k)] = 1.0 + 1.5 * np.arange(k)
    return [d, *args[1:]]


def draw(aval: Aval, domain: str, rng: np.random.Generator) -> np.ndarray:
    """Random values: ``smooth`` (real parts in [0.5, 2], imaginary in [-0.3, 0.3]: away
    from every pole, cut and kink of the built-ins) or ``signed`` (normal, both signs)."""
    shape = aval.shape
    if aval.dtype == "bool":
        return rng.random(shape) < 0.5
    if not is_inexact(aval.dtype):
        return rng.integers(-5, 6, shape).astype(aval.dtype)
    smooth = domain == "smooth"
    re = rng.uniform(0.5, 2.0, shape) if smooth else rng.normal(0.0, 1.5, shape)
    if is_complex(aval.dtype):
        re = re + 1j * (rng.uniform(-0.3, 0.3, shape) if smooth else rng.normal(0.0, 1.0, shape))
    return np.asarray(re, dtype=aval.dtype)


def ties(prim: Primitive, avals: list[Aval], args: list[np.ndarray],
         attrs: dict[str, Any] | None = None) -> list[np.ndarray] | None:
    """Operands with ties where a rule compares or selects on them, or None where there are
    none to make: the two operands of an elementwise op equal at every other element (ties
    of ``maximum``, kinks of ``compare``-based rules), and in a reduction each slice's largest
    element repeated once (ties of ``reduce_max``). At a tie, a rule must give its documented
    convention, which the five-point finite difference also gives for a piecewise-smooth
    function: the mean of the one-sided derivatives (``maximum``: ``0.5 * (dx + dy)``; two
    tied maxima of a slice: the mean of their tangents). Only pairs: at a three-way tie that
    mean is (max + min) / 2 of the tangents, a convention no rule follows."""
    rule = prim.decl.type_rule
    if rule == "reduce" and attrs is not None and is_inexact(avals[0].dtype) and not is_complex(avals[0].dtype):
        tied = _tied_slices(args[0], tuple(attrs["axes"]))
        return None if tied is None else [tied, *args[1:]]
    if rule != "elementwise" or len(avals) < 2 or avals[0] != avals[1] or not args[0].ndim:
        return None
    tied = args[1].copy()
    tied.flat[::2] = args[0].flat[::2]
    return [args[0], tied, *args[2:]]


def _tied_slices(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray | None:
    """``x`` with the largest element of each slice over ``axes`` copied to the next
    element of the slice (cyclically): two tied maxima per slice; None if slices have
    fewer than two elements."""
    rest = [i for i in range(x.ndim) if i not in axes]
    order = rest + list(axes)
    k = int(np.prod([x.shape[i] for i in axes], dtype=int))
    if k < 2 or x.size == 0:
        return None
    moved = np.transpose(x, order).reshape(-1, k).copy()
    rows = np.arange(moved.shape[0])
    top = np.argmax(moved, axis=1)
    moved[rows, (top + 1) % k] = moved[rows, top]
    shaped = moved.reshape([x.shape[i] for i in order])
    return np.transpose(shaped, np.argsort(order))


def compared_constants(prim: Primitive, template: Any) -> dict[int, list[complex]] | None:
    """For a rule that branches (its template has a ``compare``): operand index -> the
    constants a ``compare(operand, c)`` tests it against, the points where the rule
    branches, which random samples never hit (also through abs, neg and arithmetic with
    numbers: ``compare(abs(z - 1), 0.001)`` gives 1 +- 0.001, and 1 +- 0.0005 and 1
    inside), and where a divisor of such a form vanishes. None for a rule without
    ``compare``."""
    names = {prim.operand_name(i): i for i in range(len(prim.operands))}
    out: dict[int, list[complex]] = {}
    branches = False

    def walk(e: Any) -> None:
        nonlocal branches
        if isinstance(e, Call):
            if e.fn == "div" and len(e.args) == 2:  # where a divisor vanishes (log(z) / (1 - z) at 1)
                found = _preimages(e.args[1], [0], names)
                if found is not None:
                    out.setdefault(names[found[0]], []).extend(found[1])
            if e.fn == "compare" and len(e.args) == 2:
                branches = True
                for a, b in (e.args, e.args[::-1]):
                    if isinstance(a, Var) and a.name in names and isinstance(b, Num):
                        out.setdefault(names[a.name], []).append(b.value)
                    elif isinstance(b, Num):
                        # compare(abs(x - 1), 0.001): the operand where the branch switches,
                        # and inside a narrow branch, at half the threshold and at its centre
                        found = _preimages(a, [b.value, b.value / 2, 0], names)
                        if found is not None:
                            out.setdefault(names[found[0]], []).extend(found[1])
            for a in e.args:
                walk(a)

    walk(template)
    return out if branches else None


def _preimages(e: Any, values: list[complex], names: dict[str, int]) -> tuple[str, list[complex]] | None:
    """(operand, the operand's values where ``e`` takes one of ``values``) for ``e`` an
    operand under abs, neg, and + - * / by numbers; None for any other expression."""
    while True:
        if isinstance(e, Var):
            return (e.name, list(dict.fromkeys(values))) if e.name in names else None
        if not isinstance(e, Call):
            return None
        args = e.args
        if e.fn == "abs" and len(args) == 1:
            values, e = [w for v in values for w in (v, -v)], args[0]
        elif e.fn == "neg" and len(args) == 1:
            values, e = [-v for v in values], args[0]
        elif e.fn in ("add", "sub", "mul", "div") and len(args) == 2:
            x, k = (args[0], args[1]) if isinstance(args[1], Num) else (args[1], args[0])
            if not isinstance(k, Num) or isinstance(x, Num):
                return None
            c, first = k.value, args[0] is x
            if e.fn == "add":
                values = [v - c for v in values]
            elif e.fn == "sub":
                values = [v + c if first else c - v for v in values]
            elif e.fn == "mul" and c != 0:
                values = [v / c for v in values]
            elif e.fn == "div" and first:
                values = [v * c for v in values]
            else:
                return None
            e = x
        else:
            return None


def pinned(avals: list[Aval], args: list[np.ndarray],
           consts: dict[int, list[complex]] | None) -> list[list[np.ndarray]]:
    """For a rule that branches: variants of ``args`` with operands pinned where rules branch
    and divide (none when there is nothing to pin). The first sets each operand to 0 and to
    the constants the rule compares it with at every few elements, the second to those
    constants only (if there are any but 0); the next ones set 1, 2
    and 3 seeded random elements, then half of them, to 0, so that the slices of a
    reduction hold one, two, more zeros (``reduce_prod`` branches on their number)."""
    if consts is None:
        return []
    targets = [i for i, a in enumerate(args) if a.ndim and is_inexact(avals[i].dtype)]
    if not targets:
        return []
    variants = []
    for with_zero in (True, False):  # without 0 too: a slice with a zero hides what 1 changes
        spread = list(args)
        for i in targets:
            values = list(dict.fromkeys([0, *consts.get(i, [])] if with_zero else [c for c in consts.get(i, []) if c]))
            if not values:
                continue
            a, step = args[i].copy(), 2 * len(values) + 1
            for k, c in enumerate(values):
                a.flat[k::step] = c if is_complex(avals[i].dtype) else np.real(c)
            spread[i] = a
        if with_zero or any(spread[i] is not args[i] for i in targets):
            variants.append(spread)
    for count in (1, 2, 3, "half"):
        rng = _rng("pinned", count, tuple(av.shape for av in avals))
        zeros = list(args)
        for i in targets:
            size = args[i].size
            n = size // 2 if count == "half" else count
            if n >= size:
                continue
            a = args[i].copy()
            a.flat[rng.choice(size, n, replace=False)] = 0
            zeros[i] = a
        variants.append(zeros)
    return variants


def _tangent(aval: Aval, rng: np.random.Generator) -> np.ndarray:
    t = rng.normal(size=aval.shape)
    if is_complex(aval.dtype):
        t = t + 1j * rng.normal(size=aval.shape)
    return np.asarray(t, dtype=aval.dtype)


def _rng(*parts: object) -> np.random.Generator:
    """A generator seeded by ``parts``; a path among them counts by its file's name, so
    a rule file's samples are the same wherever it lies (an installed package, a fresh
    clone, a copy in a temporary folder)."""
    parts = tuple(os.path.basename(p) if isinstance(p, str) and os.sep in p else p for p in parts)
    return np.random.default_rng(zlib.crc32(repr(parts).encode()))


def _dtypes(prim: Primitive) -> list[str]:
    """The dtypes a primitive's rules are checked in: float64 and complex128 where it takes
    them, else (integer and bitwise primitives, which carry no tangent but still batch)
    int64 and bool."""
    inexact = [d for d in ("float64", "complex128") if samples(prim, d)]
    return inexact or [d for d in ("int64", "bool") if samples(prim, d)]


# --- rewrites ---------------------------------------------------------------------------


_REALS = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.75, np.inf, -np.inf, np.nan, 5e-324, -1e-300, 1e300, -1e300,
          710.0, -746.0, 1e-8]
_PARTS = [0.0, -0.0, 1.0, -1.0, 2.5, -0.5, np.inf, -np.inf, np.nan, 1e300, 1e-300]
_INTS = [0, 1, -1, 2, -7, 3, 2**40, -(2**40)]
_LONG = 400  # elements of the 1-D samples: every pair of two real specials, and more


def _specials(aval: Aval, position: int, finite: bool, rng: np.random.Generator) -> np.ndarray:
    """Values of ``aval``: special values (every pair of them across positions 0 and 1 of
    a long 1-D sample) mixed with random ones; ``finite`` leaves out inf and nan."""
    dt, size = aval.dtype, aval.size
    if dt == "bool":
        return rng.random(aval.shape) < 0.5
    if dt.startswith("int"):
        pool = np.array(_INTS, dtype=dt)
    elif is_complex(dt):
        parts = [p for p in _PARTS if np.isfinite(p) or not finite]
        pool = np.array([complex(a, b) for a in parts for b in parts], dtype=dt)
    else:
        pool = np.array([v for v in _REALS if np.isfinite(v) or not finite], dtype=dt)
    idx = np.arange(size)
    pick = (idx // len(pool) ** position) % len(pool) if position < 2 else rng.integers(0, len(pool), size)
    vals = pool[pick]
    if not dt.startswith("int"):
        noise = rng.normal(0, 3, size) * (1j if is_complex(dt) and position % 2 else 1)
        vals = np.where(idx >= len(pool) ** 2, noise.astype(dt), vals) if position < 2 else vals
    return vals.reshape(aval.shape)
