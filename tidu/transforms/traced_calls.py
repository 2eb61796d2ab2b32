"""Eager calls of tidu.numpy that run tidu's own implementation, traced and compiled, not
NumPy's (tidu.trace.evaluator): the accumulating functions on float16 and bfloat16
operands (``numpy_fallback``'s ``accumulates`` in tidu.numpy), whose NumPy counterparts
accumulate in half precision where tidu, XLA and JAX accumulate in float32.

A call is traced once per function, argument structure, dtypes and shapes, and values of
its non-array arguments (axes, flags, dtypes), as ``tidu.jit`` with static arguments;
later calls come from the trace cache."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tidu.core.pytree import flatten, tree_map, unflatten
from tidu.trace.evaluator import set_evaluator
from tidu.transforms.api import jit

# (the function, the arguments' structure, their non-array leaves (None where an array
# is), the positions of the arrays among the leaves, and the types of the leaves: the
# cache compares fixed values with ==, and 2 == 2.0, but polyval(p, 2) of integer p is an
# integer and polyval(p, 2.0) a float)
Spec = tuple[Callable[..., Any], Any, tuple[Any, ...], tuple[int, ...], tuple[type, ...]]


def _apply(spec: Spec, *arrays: Any) -> Any:
    impl, tree, statics, where, _ = spec
    leaves = list(statics)
    for i, a in zip(where, arrays, strict=True):
        leaves[i] = a
    args, kwargs = unflatten(tree, leaves)
    return impl(*args, **kwargs)


_APPLY = jit(_apply, static_argnums=0)


def _scalar(x: Any) -> Any:
    """A 0-d result as NumPy's eager functions give it: a NumPy scalar."""
    return x[()] if isinstance(x, np.ndarray) and x.ndim == 0 else x


def run_traced(impl: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
    """``impl(*args, **kwargs)`` on concrete arguments, traced and compiled: the arrays and
    NumPy scalars among the arguments' leaves are the program's inputs, the other leaves
    (Python numbers, axes, dtypes, strings) fixed values of the trace."""
    leaves, tree = flatten((tuple(args), dict(kwargs)))
    where = tuple(i for i, v in enumerate(leaves) if isinstance(v, np.ndarray | np.generic))
    arrays = [np.asarray(leaves[i]) for i in where]
    statics = tuple(None if isinstance(v, np.ndarray | np.generic) else v for v in leaves)
    spec = (impl, tree, statics, where, tuple(map(type, statics)))
    try:
        hash(spec)
    except TypeError:  # an unhashable fixed value: traced for this call alone
        return tree_map(_scalar, jit(lambda *a: _apply(spec, *a))(*arrays))
    return tree_map(_scalar, _APPLY(spec, *arrays))


set_evaluator(run_traced)

__all__ = ["run_traced"]
