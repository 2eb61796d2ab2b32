"""Sparse Jacobians and Hessians: the pattern from the graph (tidu.transforms.sparsity), a coloring
(tidu.transforms.coloring), a few batched JVPs or Hessian-vector products in one compiled program,
then decompression into a ``scipy.sparse`` CSR array.

``jacfwd(f, sparse=True)`` pushes the ``k`` seed columns of a column coloring through one
batched JVP, ``jacrev(f, sparse=True)`` pulls the seed rows of a row coloring through one
batched VJP, ``hessian(f, sparse=True)`` pushes the seeds of a star coloring through one
batched forward-over-reverse HVP. ``k`` is the number of colors (3 for a tridiagonal
Hessian, whatever n), so the work grows with the nonzeros, not with n².
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from tidu.core.keys import is_inexact
from tidu.core.pytree import flatten, leaf_paths
from tidu.transforms.api import jit, jvp, vjp, vmap
from tidu.transforms.coloring import Recovery, column_coloring, compressed_recovery, seed_matrix, star_coloring
from tidu.transforms.nested import jacrev_nested, normalize_argnums
from tidu.transforms.sparsity import PatternTooDense, graph_pattern, symmetric
from tidu.transforms.staging import arg_names, check_leaf, function_name
from tidu.transforms.transformed import _Keywords, cached, concrete_args, fn_key, new_stage, staged_call, staged_eval


def _argnum(fun: Callable[..., Any], argnums: Any, args: tuple, what: str) -> int:
    if not isinstance(argnums, int) or isinstance(argnums, bool):
        raise TypeError(f"tidu.{what}: sparse derivatives take one argument to differentiate "
                        f"(an int argnums), got {argnums!r}")
    (i,) = normalize_argnums(argnums, len(args), what)
    names = arg_names(fun, len(args))
    for arg, name in zip(args, names, strict=True):  # a JAX tracer, a str: the dense transforms' errors
        for leaf, path in zip(flatten(arg)[0], leaf_paths(arg), strict=True):
            check_leaf(leaf, f"argument {name}{path}")
    leaves = flatten(args[i])[0]
    bare = leaf_paths(args[i]) == [""]  # one array, not a container of one
    if not bare or not is_inexact(np.asarray(leaves[0]).dtype):
        name = names[i]
        got = type(args[i]).__name__ if not bare else f"dtype {np.asarray(leaves[0]).dtype}"
        raise TypeError(f"tidu.{what}: argument {name} must be one float or complex array for a sparse "
                        f"derivative, got {got}; pass np.asarray(...) of floats, and the other arguments as "
                        f"further positional arguments")
    return i


def _with_keywords(fun: Callable[..., Any], argnums: Any, args: tuple, kwargs: dict[str, Any],
                   what: str) -> tuple[Callable[..., Any], Any, tuple]:
    """``fun``, ``argnums`` and ``args`` with the keyword arguments passed positionally
    after the others (as the dense transforms take them: not differentiated; argnums
    counts the positional arguments only)."""
    if not kwargs:
        return fun, argnums, args
    if isinstance(argnums, int) and not isinstance(argnums, bool):
        (argnums,) = normalize_argnums(argnums, len(args), what)
    names = tuple(sorted(kwargs))
    return _Keywords(fun, len(args), names), argnums, (*args, *(kwargs[k] for k in names))


def _pattern(fun: Callable[..., Any], i: int, args: tuple, of_gradient: bool, what: str,
             max_nnz: int | None = None) -> sp.csr_array:
    """The Jacobian pattern of ``fun`` (or of its gradient) in argument ``i``."""
    with new_stage(what) as st:
        ins = [st.add_inputs(a, n) for a, n in zip(args, arg_names(fun, len(args)), strict=True)]
        (wrt,) = st.keys(flatten(ins[i])[0], "argument")
        if of_gradient:
            _check_scalar(fun, fun(*ins), what)
        out = (_gradient(fun, i) if of_gradient else fun)(*ins)
        keys = st.keys(flatten(out)[0])
        p = graph_pattern(keys, wrt, st.trace.aliases, max_nnz=max_nnz)
    return symmetric(p) if of_gradient else p


def _gradient(fun: Callable[..., Any], i: int) -> Callable[..., Any]:
    """The gradient of the scalar ``fun`` in argument ``i`` inside a trace, as ``tidu.jacrev``
    takes it (the dense Hessian's inner Jacobian): also of a complex output (the adjoint; a
    real argument's stays real), which ``tidu.grad`` refuses."""
    return lambda *a: jacrev_nested(fun, i, a)


def _check_scalar(fun: Callable[..., Any], out: Any, what: str) -> None:
    leaves = flatten(out)[0]
    aval = getattr(leaves[0], "aval", None) if len(leaves) == 1 else None
    shape = tuple(np.shape(leaves[0])) if len(leaves) == 1 else None
    dtype = aval.dtype if aval is not None else np.asarray(leaves[0]).dtype if len(leaves) == 1 else None
    if shape != () or not is_inexact(np.dtype(dtype)):
        got = f"{len(leaves)} output leaves" if len(leaves) != 1 else f"shape {shape} and dtype {np.dtype(dtype)}"
        raise TypeError(f"tidu.{what}: {function_name(fun)} must return one float or complex scalar "
                        f"(a Hessian is of a scalar function), got {got}; reduce the output (tnp.sum) "
                        f"or use tidu.jacfwd(..., sparse=True)")


def jacobian_sparsity(fun: Callable[..., Any], argnums: int = 0) -> Callable[..., sp.csr_array]:
    """``jacobian_sparsity(f)(*args)``: the boolean pattern of f's Jacobian in argument
    ``argnums``, a ``scipy.sparse.csr_array`` of shape (output size, argument size) (output
    and argument flattened in C order, several output leaves stacked). A superset of the
    true pattern: entries that cancel numerically are kept."""
    def pattern(*args: Any, **kwargs: Any) -> sp.csr_array:
        f, nums, args = _with_keywords(fun, argnums, args, kwargs, "jacobian_sparsity")
        i = _argnum(f, nums, args, "jacobian_sparsity")
        return cached(("jacobian_sparsity", fn_key(f), i, concrete_args(f, args)[1]),
                       lambda: _pattern(f, i, args, False, "jacobian_sparsity"))
    return pattern


def hessian_sparsity(fun: Callable[..., Any], argnums: int = 0) -> Callable[..., sp.csr_array]:
    """``hessian_sparsity(f)(*args)``: the symmetric boolean pattern of the Hessian of the
    scalar function f in argument ``argnums`` (the Jacobian pattern of its gradient), a
    ``scipy.sparse.csr_array`` of shape (n, n) with n the argument's size."""
    def pattern(*args: Any, **kwargs: Any) -> sp.csr_array:
        f, nums, args = _with_keywords(fun, argnums, args, kwargs, "hessian_sparsity")
        i = _argnum(f, nums, args, "hessian_sparsity")
        return cached(("hessian_sparsity", fn_key(f), i, concrete_args(f, args)[1]),
                       lambda: _pattern(f, i, args, True, "hessian_sparsity"))
    return pattern


@dataclass(frozen=True)
class _Plan:
    """A compiled compressed evaluation: ``program(*args, seeds)`` gives the k compressed
    columns (or rows), ``recovery`` rebuilds the matrix from them."""

    program: Callable[..., Any]
    seeds: np.ndarray  # (k, *argument shape) or (k, *output shape) for jacrev
    recovery: Recovery
    transposed: bool  # jacrev: the recovery builds J^T
    colors: int


def _seeds(colors: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The k seed vectors, one per color, each shaped like the argument (or the output):
    (k, *shape), also where there are no elements (k = 0, where ``-1`` cannot be inferred)."""
    s = seed_matrix(colors)
    return s.T.reshape(s.shape[1], *shape)


def _replace(args: tuple, i: int, x: Any) -> tuple:
    return (*args[:i], x, *args[i + 1:])


def _plan(fun: Callable[..., Any], i: int, args: tuple, kind: str, pattern: sp.csr_array | None = None,
          colors: np.ndarray | None = None) -> _Plan:
    """The compressed evaluation of ``kind`` (``pattern`` and ``colors``: a Hessian's,
    when the caller has them already)."""
    x = np.asarray(flatten(args[i])[0][0])
    if kind == "hessian":
        if pattern is None:
            pattern = _pattern(fun, i, args, True, "hessian")
        # a complex argument's Hessian (of a real function of z) is not symmetric: every
        # entry is read in its own column, with a column coloring
        symmetric = not np.iscomplexobj(x)
        if colors is None:
            colors = star_coloring(pattern) if symmetric else column_coloring(pattern)
        seeds = _seeds(colors, x.shape)

        def compressed(*a: Any) -> Any:
            *rest, v = a
            return jvp(lambda xi: _gradient(fun, i)(*_replace(tuple(rest), i, xi)), (rest[i],), (v,))[1]
        recovery, transposed = compressed_recovery(pattern, colors, symmetric=symmetric), False
    else:
        pattern = _pattern(fun, i, args, False, "jacobian")
        out_shape = _output_shape(fun, args, kind)
        if kind == "jacfwd":
            colors = column_coloring(pattern)
            seeds = _seeds(colors, x.shape)

            def compressed(*a: Any) -> Any:
                *rest, v = a
                return jvp(lambda xi: fun(*_replace(tuple(rest), i, xi)), (rest[i],), (v,))[1]
            recovery, transposed = compressed_recovery(pattern, colors, symmetric=False), False
        else:
            pattern_t = sp.csr_array(pattern.T)
            colors = column_coloring(pattern_t)
            seeds = _seeds(colors, out_shape)

            def compressed(*a: Any) -> Any:
                *rest, u = a
                return vjp(lambda xi: fun(*_replace(tuple(rest), i, xi)), rest[i])[1](u)[0]
            recovery, transposed = compressed_recovery(pattern_t, colors, symmetric=False), True
    batched = vmap(compressed, in_axes=(*[None] * len(args), 0))
    program = jit(batched)
    return _Plan(program, seeds.astype(x.dtype), recovery, transposed, int(colors.max(initial=-1)) + 1)


def _output_shape(fun: Callable[..., Any], args: tuple, kind: str) -> tuple[int, ...]:
    with new_stage(kind) as st:
        ins = [st.add_inputs(a, n) for a, n in zip(args, arg_names(fun, len(args)), strict=True)]
        leaves = flatten(fun(*ins))[0]
        if len(leaves) != 1:
            raise TypeError(f"tidu.{kind}(sparse=True) needs a function returning one array, "
                            f"got {len(leaves)} output leaves")
        (key,) = st.keys(leaves)
    if kind != "hessian" and not is_inexact(key.aval.dtype):  # (a Hessian's scalar is checked before)
        raise TypeError(f"tidu.{kind}(sparse=True): {function_name(fun)} returns dtype {key.aval.dtype}; only "
                        f"float and complex outputs have derivatives: convert the output with .astype(float), "
                        f"or leave it out")
    return key.aval.shape


def sparse_derivative(fun: Callable[..., Any], argnums: int, kind: str) -> Callable[..., sp.csr_array]:
    """``fun``'s Jacobian (``kind`` "jacfwd"/"jacrev") or Hessian ("hessian") in argument
    ``argnums`` as a CSR array (rows: output elements, or the argument's for a Hessian;
    columns: the argument's elements, both flattened in C order)."""
    what = f"{kind}(sparse=True)"

    def call(*args: Any, **kwargs: Any) -> sp.csr_array:
        f, nums, args = _with_keywords(fun, argnums, args, kwargs, what)
        i = _argnum(f, nums, args, what)
        plan = cached(("sparse", kind, fn_key(f), i, concrete_args(f, args)[1]),
                       lambda: _plan(f, i, args, kind))
        if plan.colors == 0:  # no nonzero (or no element): nothing to evaluate
            out = plan.recovery.csr(np.zeros((plan.recovery.shape[0], 0), plan.seeds.dtype))
        else:
            compressed = np.asarray(plan.program(*args, plan.seeds))
            out = plan.recovery.csr(compressed.reshape(plan.colors, plan.recovery.shape[0]).T)
        return sp.csr_array(out.T) if plan.transposed else out

    call.__name__ = f"{kind}_sparse({getattr(fun, '__name__', 'f')})"
    return call


# The dense Hessian goes through the sparse machinery (HVPs over a star coloring, then
# scattered into a dense array) when the argument has at least this many elements and the
# coloring needs at most 1/COLOR_SHARE of them colors: k Hessian-vector products then do
# the work of the n basis vectors the batched jacfwd(jacrev) pushes, n/k times less.
DENSE_VIA_COLORS_MIN = 128
COLOR_SHARE = 8


def dense_hessian_call(fun: Callable[..., Any], argnums: Any) -> Callable[..., Any]:
    """The concrete call of ``tidu.hessian(fun, argnums)`` (mode FoR): through a star
    coloring where the Hessian is sparse enough to pay, else the batched dense program."""
    def call(tf: Any, *args: Any) -> Any:
        if not isinstance(argnums, int) or isinstance(argnums, bool) or not -len(args) <= argnums < len(args):
            return staged_call(tf, *args)
        x = args[argnums]  # cheap tests first: small calls must not pay for this route
        if type(x) is not np.ndarray or x.dtype.kind != "f" or x.size < DENSE_VIA_COLORS_MIN:
            return staged_call(tf, *args)
        arrays, sig = concrete_args(tf, args)
        plan = cached(("dense hessian via colors", tf, sig), lambda: _dense_plan(fun, argnums % len(args), args))
        if not plan:
            return staged_eval(tf, args, arrays, sig)
        compressed = np.asarray(plan.program(*args, plan.seeds))
        n = plan.recovery.shape[0]
        dense = plan.recovery.dense(compressed.reshape(plan.colors, n).T)  # float64: back to the HVPs' dtype
        return dense.astype(compressed.dtype, copy=False).reshape(*x.shape, *x.shape)

    return call


def _dense_plan(fun: Callable[..., Any], i: int, args: tuple) -> _Plan | bool:
    """The compressed plan of a scalar function's Hessian in argument ``i``, or False
    where the Hessian is not sparse enough for it to pay."""
    x = args[i]
    if _output_shape(fun, args, "hessian") != ():
        return False
    most = x.size // COLOR_SHARE  # colors; a row with more entries needs more colors
    try:
        pattern = _pattern(fun, i, args, True, "hessian", max_nnz=x.size * most)
    except PatternTooDense:  # a dense Hessian: stopped before its n x n pattern is built
        return False
    if np.diff(pattern.indptr).max(initial=0) >= most:
        return False
    colors = star_coloring(pattern)
    if colors.max(initial=0) + 1 > most:
        return False
    return _plan(fun, i, args, "hessian", pattern, colors)


__all__ = ["COLOR_SHARE", "DENSE_VIA_COLORS_MIN", "dense_hessian_call", "hessian_sparsity", "jacobian_sparsity",
           "sparse_derivative"]
