"""tidu.numpy functions that take functions: ``vectorize``, ``apply_along_axis``,
``apply_over_axes``. They call the Python function on traced slices (one call per slice,
unrolled into the graph) and stack the results.

On constant arrays NumPy's own function runs, unless the Python function closes over a
traced value (``lambda r: r * a`` under tidu.grad by ``a``): NumPy cannot store what it
returns, so the first such result sends the call to the traced implementation
(``numpy_calling_back``)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tidu.numpy._core import ArrayLike, _norm_axis, _trace_of, numpy_fallback
from tidu.numpy._shapes import broadcast_arrays, expand_dims, moveaxis, reshape, stack
from tidu.trace.tracing import Tracer


class _TracedResult(Exception):
    """A user's function returned a traced value where NumPy was calling it."""


def guarded(fn: Any) -> Any:
    """``fn`` (when callable) raising ``_TracedResult`` where it returns a traced value."""
    if not callable(fn):
        return fn

    def call(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        if isinstance(out, Tracer):
            raise _TracedResult
        return out

    return call


def numpy_calling_back(numpy_call: Callable[[], Any], traced_call: Callable[[], Any]) -> Any:
    """``numpy_call()`` (NumPy's function, called with ``guarded`` user functions), or
    ``traced_call()`` where one of them returned a traced value."""
    try:
        return numpy_call()
    except _TracedResult:
        return traced_call()


def vectorize(pyfunc: Callable, *, excluded: Any = None, signature: str | None = None) -> Callable:
    """``pyfunc`` applied elementwise to broadcast array arguments, keyword ones too unless
    ``excluded`` names them (scalar core only): on traced values it is called once per
    element; otherwise NumPy's np.vectorize."""
    if signature is not None:
        raise NotImplementedError("tnp.vectorize: signature= is not supported")
    excluded = set(excluded or ())
    numpy_version = np.vectorize(guarded(pyfunc), excluded=excluded)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        # the operands are the arguments not ``excluded``, known only per call: numpy_fallback
        # names its operands once, so this is the one place that chooses NumPy by itself
        active = [i for i in range(len(args)) if i not in excluded]
        named = [k for k in kwargs if k not in excluded]  # NumPy's: keywords are vectorized too
        if _trace_of([args[i] for i in active] + list(kwargs.values())) is None:
            try:
                return numpy_version(*args, **kwargs)
            except _TracedResult:  # pyfunc closes over a traced value: called per element below
                pass
        if not active and not named:
            return pyfunc(*args, **kwargs)
        arrays = broadcast_arrays(*(args[i] for i in active), *(kwargs[k] for k in named))
        shape = np.shape(arrays[0]) if not isinstance(arrays[0], Tracer) else arrays[0].shape
        if 0 in shape:
            raise ValueError(f"tnp.vectorize: the arguments broadcast to shape {shape}, of size 0: with no "
                             "element to call the function on, the result's dtype is unknown (as np.vectorize)")
        outs = []
        for idx in itertools.product(*(range(d) for d in shape)):
            call, keywords = list(args), dict(kwargs)
            for i, arr in zip(active, arrays, strict=False):
                call[i] = arr[idx]
            for k, arr in zip(named, arrays[len(active):], strict=True):
                keywords[k] = arr[idx]
            outs.append(pyfunc(*call, **keywords))
        if not shape:
            return outs[0]
        return reshape(stack(outs), shape)

    wrapped.__doc__ = pyfunc.__doc__
    return wrapped


def _numpy_apply_along_axis(func1d: Callable, axis: int, arr: ArrayLike, *args: Any, **kwargs: Any) -> Any:
    return numpy_calling_back(lambda: np.apply_along_axis(guarded(func1d), axis, arr, *args, **kwargs),
                              lambda: _apply_along_axis(func1d, axis, arr, *args, **kwargs))


@numpy_fallback(_numpy_apply_along_axis, "arr")
def apply_along_axis(func1d: Callable, axis: int, arr: ArrayLike, *args: Any, **kwargs: Any) -> Any:
    """``func1d`` applied to the 1-D slices of ``arr`` along ``axis``; its result's axes
    replace that axis."""
    return _apply_along_axis(func1d, axis, arr, *args, **kwargs)


def _apply_along_axis(func1d: Callable, axis: int, arr: ArrayLike, *args: Any, **kwargs: Any) -> Any:
    arr = arr if isinstance(arr, Tracer) else np.asarray(arr)
    ax = _norm_axis(axis, arr.ndim, "apply_along_axis")
    m = moveaxis(arr, ax, -1)
    lead = m.shape[:-1]
    if 0 in lead:
        raise ValueError(f"tnp.apply_along_axis: cannot apply along axis {axis} of an array of shape {arr.shape}: "
                         "another axis has size 0 (as NumPy)")
    outs = [func1d(m[idx], *args, **kwargs) for idx in itertools.product(*(range(d) for d in lead))]
    first = outs[0]
    res_shape = first.shape if isinstance(first, Tracer) else np.shape(first)
    out = reshape(stack(outs), lead + tuple(res_shape))
    k = len(res_shape)
    return moveaxis(out, list(range(len(lead), len(lead) + k)), list(range(ax, ax + k))) if k else out


def _numpy_apply_over_axes(func: Callable, a: ArrayLike, axes: int | Sequence[int]) -> Any:
    return numpy_calling_back(lambda: np.apply_over_axes(guarded(func), a, axes),
                              lambda: _apply_over_axes(func, a, axes))


@numpy_fallback(_numpy_apply_over_axes, "a")
def apply_over_axes(func: Callable, a: ArrayLike, axes: int | Sequence[int]) -> Any:
    """``func(a, axis)`` applied for each axis in turn, keeping the rank (as np.apply_over_axes)."""
    return _apply_over_axes(func, a, axes)


def _apply_over_axes(func: Callable, a: ArrayLike, axes: int | Sequence[int]) -> Any:
    for axis in [axes] if isinstance(axes, int | np.integer) else list(axes):
        res = func(a, axis)
        a = res if res.ndim == a.ndim else expand_dims(res, axis)
    return a
