"""Evaluating keys with NumPy (each primitive through ``tidu.ops.reference``, else through its
lambdified ``meaning``), one application of a primitive as a graph, and when two results
agree."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tidu.core.keys import Aval, InputKey, ValueKey
from tidu.ops import reference as semantics
from tidu.ops.catalog import Catalog, Primitive
from tidu.ops.kernels import KernelError
from tidu.trace.fragments import FragmentBuilder

Impl = Callable[[Sequence[np.ndarray], Any], np.ndarray]


class NoSemantics(LookupError):
    """A primitive has neither NumPy semantics nor a ``meaning``: checks that run it skip."""


def implementations(cat: Catalog) -> dict[str, Impl]:
    """NumPy implementations: ``tidu.ops.reference``, else the primitive's ``numpy`` clause or
    lambdified meaning (``tidu.ops.kernels``, what tidu runs)."""
    impls: dict[str, Impl] = {}
    for name, prim in cat.items():
        if prim.builtin or prim.numpy_fn is not None or (prim.decl.meaning is not None and not prim.variadic):
            with contextlib.suppress(KernelError):  # a meaning NumPy cannot run: checks that run it skip
                impls[name] = semantics.impl_of(name, cat)
    return impls


def evaluate(outputs: Sequence[ValueKey], feed: dict[InputKey, np.ndarray], impls: dict[str, Impl],
             aliases: dict[InputKey, ValueKey] | None = None) -> list:
    """Values of ``outputs`` (keys), inputs from ``feed`` (by input key) or, for the inputs
    of nested transforms, from the values ``aliases`` binds them to; iterative."""
    memo: dict[ValueKey, np.ndarray] = {}
    stack = list(outputs)
    while stack:
        k = stack[-1]
        if k in memo:
            stack.pop()
        elif k.input is not None and aliases and k.input in aliases:
            target = aliases[k.input]
            if target in memo:
                memo[k] = memo[target]
                stack.pop()
            else:
                stack.append(target)
        elif k.input is not None:
            memo[k] = np.asarray(feed[k.input])
            stack.pop()
        elif missing := [i for i in k.inputs if i not in memo]:
            stack.extend(missing)
        else:
            stack.pop()
            if k.op not in impls:
                raise NoSemantics(f"primitive {k.op} has no NumPy semantics and no meaning: cannot evaluate it")
            memo[k] = impls[k.op]([memo[i] for i in k.inputs], k.attrs)
    return [memo[o] for o in outputs]


def _primal(prim: Primitive, avals: Sequence[Aval], attrs: dict[str, Any]):
    b = FragmentBuilder("check")
    refs = [b.input(f"a{i}", av) for i, av in enumerate(avals)]
    (o,) = b.add_op(prim.name, refs, attrs)
    return b.output(o), b.build()


def _close(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """Elementwise agreement: nan matches nan, an infinity the same infinity; a complex
    value with a non-finite part matches any such value (complex infinity: NumPy's and
    XLA's complex arithmetic on non-finite parts is not specified); else a tolerance."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    if a.dtype.kind in "biu" and b.dtype.kind in "biu":
        return a == b
    fa, fb = np.isfinite(a), np.isfinite(b)
    with np.errstate(all="ignore"):
        near = np.abs(a - b) <= atol + rtol * np.maximum(np.abs(a), np.abs(b))
    if np.iscomplexobj(a) or np.iscomplexobj(b):
        return np.where(fa & fb, near, ~fa & ~fb)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    return np.where(fa & fb, near, same)
