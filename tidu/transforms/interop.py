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
- ``jax.grad`` of a ``to_jax`` function is refused with an error: differentiate with tidu
  (``to_jax(tidu.grad(f))``) instead.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from tidu.core.pytree import flatten, unflatten
from tidu.lowering.compile import Program
from tidu.lowering.xla import exported, jax_module
from tidu.transforms.api import vmap
from tidu.transforms.staging import Stage, arg_names, function_name


def _program(fun: Callable[..., Any], treedef: Any, avals: tuple[tuple[tuple[int, ...], str], ...]
             ) -> tuple[Program, Any]:
    """tidu's program of ``fun`` for arguments of these leaf avals, and its output tree."""
    examples = unflatten(treedef, [np.zeros(shape, dtype) for shape, dtype in avals])
    with Stage("to_jax") as st:
        names = arg_names(fun, len(examples))
        ins = [st.add_inputs(a, n) for a, n in zip(examples, names, strict=True)]
        out_leaves, out_tree = flatten(fun(*ins))
        keys = st.keys(out_leaves)
    return st.program(keys), out_tree


def to_jax(fun: Callable[..., Any]) -> Callable[..., Any]:
    """``fun`` (a function tidu can trace: tidu.numpy code, tidu transforms of it) as a
    JAX function of arrays and pytrees of arrays; see the module docstring."""
    if not callable(fun):
        raise TypeError(f"tidu.to_jax takes a function, got {type(fun).__name__}")
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

    @functools.wraps(fun)
    def call(*args: Any) -> Any:
        leaves, treedef = jax.tree_util.tree_flatten(args)
        # tidu's leaf order (its pytrees may order dict keys differently from JAX's)
        order, tidu_tree = flatten(jax.tree_util.tree_unflatten(treedef, list(range(len(leaves)))))
        arrays = [leaves[i] if hasattr(leaves[i], "dtype") and hasattr(leaves[i], "shape")
                  else np.asarray(leaves[i]) for i in order]
        # dtypes as JAX has them: without 64-bit types a float64 NumPy argument is float32 to
        # JAX, so the program is float32 too (tidu leaves JAX's x64 setting alone)
        avals = tuple((tuple(a.shape), np.dtype(jax.dtypes.canonicalize_dtype(a.dtype)).name) for a in arrays)
        fn, out_tree = flat_call(tidu_tree, avals)
        return unflatten(out_tree, list(fn(*arrays)))

    call.__name__ = f"to_jax({function_name(fun)})"
    return call


__all__ = ["to_jax"]
