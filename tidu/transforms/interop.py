"""tidu functions as JAX functions: ``tidu.to_jax(fun)``.

``to_jax(fun)`` is a function of JAX arrays (or anything array-like) that JAX can call,
``jax.jit``, ``jax.vmap`` and shard: for the shapes and dtypes it is called with, tidu
traces, differentiates and simplifies ``fun`` as usual, lowers the program to StableHLO
and hands that module to JAX as a ``jax.export.Exported`` (public API only; see
``tidu.lowering.xla.exported``). The program is built once per signature and cached.

- ``jax.jit``: the module is inlined into the jitted computation, where XLA optimizes and
  compiles it with the rest.
- ``jax.vmap``: the batching rule is tidu's own: the batched call runs the program of
  ``tidu.vmap(fun)`` (one batched graph; nested vmaps nest).
- sharding: ``jax.shard_map`` runs the function on each device's shard
  (docs/lowering.md, "Scaling out").
- keyword arguments are traced like the positional ones, Python numbers too (a static
  one is bound first: ``to_jax(functools.partial(fun, n=2))``).
- ``jax.grad`` of a ``to_jax`` function is refused with an error: differentiate with tidu
  (``to_jax(tidu.grad(f))``) instead.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from tidu.core.keys import DTYPES
from tidu.core.pytree import flatten, unflatten
from tidu.lowering.compile import Program
from tidu.trace.tracing import TraceError
from tidu.transforms.api import vmap
from tidu.transforms.staging import Stage, arg_names, function_name
from tidu.transforms.transformed import _Keywords

_NUMBERS = (bool, int, float, complex, np.generic)
_WEAK = {"int64": 0, "float64": 0.0, "complex128": 0j}  # the dtypes of tidu's weakly typed Python numbers


def _is_weak(leaf: Any, array: Any) -> bool:
    """Whether ``leaf`` is weakly typed to JAX (a Python number, not a bool) and tidu can
    trace it so (a scalar of a Python number's dtype)."""
    if array.shape != () or np.dtype(array.dtype).name not in _WEAK:
        return False
    if isinstance(leaf, bool | np.generic | np.ndarray):
        return False
    if isinstance(leaf, int | float | complex):
        return True
    return getattr(leaf, "weak_type", False) is True  # a JAX array's or tracer's


def _program(fun: Callable[..., Any], treedef: Any, avals: tuple[tuple[tuple[int, ...], str, bool], ...]
             ) -> tuple[Program, Any]:
    """tidu's program of ``fun`` for arguments of these leaf avals (shape, dtype, weakly
    typed), and its output tree."""
    # a weakly typed scalar (a Python number, or JAX's weak value of one) stays weak, as in
    # JAX: float32 array * 2.0 is float32
    examples = unflatten(treedef, [_WEAK[dtype] if weak else np.zeros(shape, dtype) for shape, dtype, weak in avals])
    with Stage("to_jax") as st:
        names = arg_names(fun, len(examples))
        ins = [st.add_inputs(a, n) for a, n in zip(examples, names, strict=True)]
        try:
            out = fun(*ins)
        except (TypeError, AttributeError, ValueError, TraceError) as e:
            hint = _argument_hint(fun, examples, names, e)
            if hint is None:
                raise
            raise hint from e
        out_leaves, out_tree = flatten(out)
        keys = st.keys(out_leaves)
    return st.program(keys), out_tree


def _argument_hint(fun: Callable[..., Any], args: tuple, names: list[str], error: Exception) -> TypeError | None:
    """A one-line error for ``fun`` failing on an argument that is None (an empty pytree,
    as in JAX) or a Python list (a pytree of separate values), or None."""
    for arg, name in zip(args, names, strict=True):
        if arg is None or isinstance(arg, list):
            what = ("None, which JAX and tidu take as an empty pytree (no array)" if arg is None else
                    "a Python list, which JAX and tidu take as a pytree of separate values")
            fix = "pass an array" if arg is None else "pass np.array(...) (or jnp.array) for one array"
            first = str(error).splitlines()[0] if str(error) else ""
            return TypeError(f"tidu.to_jax({function_name(fun)}): argument {name} is {what}, and "
                             f"{function_name(fun)} failed on it ({type(error).__name__}: {first}); {fix}, or bind "
                             f"it before converting: tidu.to_jax(functools.partial({function_name(fun)}, ...))")
    return None


def _static_hint(jax: Any, fun: Callable[..., Any], args: tuple, leaves: list[Any],
                 error: TraceError) -> TraceError | None:
    """Where ``fun`` failed on the value of a traced scalar integer and an argument is a
    Python int (traced, as by jax.jit without static_argnums), a TraceError that says how
    to keep it static; else None."""
    at = next((i for i, leaf in enumerate(leaves) if type(leaf) is int), None)
    if at is None or not re.search(r"\(i(8|16|32|64)\[\]\)", str(error)):
        return None
    path, _ = jax.tree_util.tree_flatten_with_path(args)
    key = path[at][0]
    where = arg_names(fun, len(args))[key[0].idx] + jax.tree_util.keystr(key[1:])
    name = function_name(fun)
    first = str(error).split(": ", 1)[0]
    return TraceError(f"tidu.to_jax({name}): {name} needs the value of a traced integer ({first}); every argument "
                      f"of a to_jax function is traced, also the Python int {where} = {leaves[at]!r} (jax.jit's "
                      f"static_argnums do not reach it): if it is that one, bind it before converting: "
                      f"tidu.to_jax(functools.partial({name}, ...))")


def _leaf_array(jax: Any, leaf: Any, args: tuple, index: int, fun: Callable[..., Any]) -> Any:
    """``leaf`` as an array JAX can take, or a one-line TypeError naming the argument (its
    path) and what to pass instead."""
    if hasattr(leaf, "dtype") and hasattr(leaf, "shape"):
        if np.dtype(leaf.dtype).name in DTYPES:
            return leaf
        problem = f"has dtype {np.dtype(leaf.dtype)}, which tidu does not handle ({', '.join(DTYPES)})"
        fix = "convert it to one of them first"
    elif isinstance(leaf, _NUMBERS):
        return np.asarray(leaf)
    else:
        problem = f"is of type {type(leaf).__name__}"
        fix = ("to_jax functions take JAX or NumPy arrays, numbers and pytrees of them: pass an array, or bind "
               f"other values before converting: tidu.to_jax(functools.partial({function_name(fun)}, ...))")
    path, _ = jax.tree_util.tree_flatten_with_path(args)
    key = path[index][0]
    names = arg_names(fun, len(args))
    where = names[key[0].idx] + jax.tree_util.keystr(key[1:])
    raise TypeError(f"tidu.to_jax({function_name(fun)}): argument {where} {problem}; {fix}")


def to_jax(fun: Callable[..., Any]) -> Callable[..., Any]:
    """``fun`` (a function tidu can trace: tidu.numpy code, tidu transforms of it) as a
    JAX function of arrays and pytrees of arrays; see the module docstring."""
    if not callable(fun):
        raise TypeError(f"tidu.to_jax takes a function, got {type(fun).__name__}")
    from tidu.lowering.xla import exported, jax_module  # (the StableHLO back end: on first use)

    jax = jax_module()
    cache: dict[Any, tuple[Callable[..., Any], Any]] = {}

    def flat_call(treedef: Any, avals: tuple) -> tuple[Callable[..., Any], Any]:
        entry = cache.get((treedef, avals))
        if entry is None:
            program, out_tree = _program(fun, treedef, avals)
            exp = exported(program)

            @jax.custom_jvp
            def call(*leaves: Any) -> Any:
                return batchable(*leaves)

            @call.defjvp
            def no_jvp(primals: Any, tangents: Any) -> Any:
                raise TypeError(f"jax cannot differentiate to_jax({function_name(fun)}): it is a "
                                "tidu program. Differentiate with tidu and convert the result, e.g. "
                                "tidu.to_jax(tidu.grad(f))")

            @jax.custom_batching.custom_vmap
            def batchable(*leaves: Any) -> Any:
                return tuple(exp.call(*leaves))

            @batchable.def_vmap
            def batched(axis_size: int, in_batched: list[bool], *leaves: Any) -> Any:
                in_axes = tuple(0 if b else None for b in in_batched)

                def per_leaf(*ls: Any) -> Any:
                    return flatten(fun(*unflatten(treedef, list(ls))))[0]

                outs = to_jax(vmap(per_leaf, in_axes=in_axes))(*leaves)
                return tuple(outs), (True,) * len(outs)

            entry = cache[(treedef, avals)] = (call, out_tree)
        return entry

    by_keywords: dict[tuple[int, tuple[str, ...]], Callable[..., Any]] = {}

    @functools.wraps(fun)
    def call(*args: Any, **kwargs: Any) -> Any:
        if kwargs:  # as JAX functions take them: traced like the positional arguments
            names = tuple(sorted(kwargs))
            inner = by_keywords.get((len(args), names))
            if inner is None:
                inner = by_keywords.setdefault((len(args), names), to_jax(_Keywords(fun, len(args), names)))
            return inner(*args, *(kwargs[k] for k in names))
        leaves, treedef = jax.tree_util.tree_flatten(args)
        # tidu's leaf order (its pytrees may order dict keys differently from JAX's)
        order, tidu_tree = flatten(jax.tree_util.tree_unflatten(treedef, list(range(len(leaves)))))
        arrays = [_leaf_array(jax, leaves[i], args, i, fun) for i in order]
        # dtypes as JAX has them: without 64-bit types a float64 NumPy argument is float32 to
        # JAX, so the program is float32 too (tidu leaves JAX's x64 setting alone)
        avals = tuple((tuple(a.shape), np.dtype(jax.dtypes.canonicalize_dtype(a.dtype)).name) for a in arrays)
        avals = tuple((*av, _is_weak(leaves[i], a)) for av, a, i in zip(avals, arrays, order, strict=True))
        try:
            fn, out_tree = flat_call(tidu_tree, avals)
        except TraceError as e:
            hint = _static_hint(jax, fun, args, leaves, e)
            if hint is None:
                raise
            raise hint from e
        # a weak Python number goes to JAX as it is, so that a batching rule sees it weak too
        values = [leaves[i] if weak and isinstance(leaves[i], int | float | complex) else a
                  for a, i, (_, _, weak) in zip(arrays, order, avals, strict=True)]
        return unflatten(out_tree, list(fn(*values)))

    call.__name__ = f"to_jax({function_name(fun)})"
    return call


__all__ = ["to_jax"]
