"""``jax.lax.reduce_window`` and ``jax.lax.reduce``, written with tidu.numpy functions
(pads, strided slices, stacks and reductions), so that every transform, batching and both
back ends go through them (docs/lax.md, "Windows and reductions"); and
``jax.lax.conv_transpose``, a ``conv_general_dilated``.

A window reduction pads the operand (base dilation as interior padding, then the
``padding``), takes one strided slice per window offset and reduces them: for ``add``,
``mul``, ``max`` and ``min`` axis by axis (the sum of the window sizes in slices), for any
other computation by folding it over the window offsets (their product). The graph grows
with the window, not with the output."""

from __future__ import annotations

import builtins
import itertools
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import tidu.numpy as tnp
from tidu.convolution import conv_dimension_numbers, conv_general_dilated
from tidu.core.pytree import flatten, unflatten
from tidu.lax_ops import _aval, _axes, _identity, _ints, _kind, _kinds, _shape, pad, reduce_max, reduce_min
from tidu.lax_ops import add as _add
from tidu.lax_ops import max as _max
from tidu.lax_ops import min as _min
from tidu.lax_ops import mul as _mul
from tidu.trace.tracing import Tracer

# the computations taken as monoids, by module and name (jax.lax's and tidu.lax's ``max``
# is elementwise; NumPy's ``max`` is a reduction, its elementwise one ``maximum``)
_LAX_NAMES = {"add": "add", "mul": "mul", "max": "max", "min": "min"}
_NUMPY_NAMES = {"add": "add", "multiply": "mul", "maximum": "max", "minimum": "min"}
_OPERATOR_NAMES = {"add": "add", "mul": "mul"}
_SUPPORTED = ("lax.add, lax.mul, lax.max, lax.min (jax.lax's or tidu.lax's), tnp/jnp/np.add, multiply, maximum, "
              "minimum, operator.add, operator.mul")


def _monoid(computation: Any) -> str | None:
    """``"add"``, ``"mul"``, ``"max"`` or ``"min"`` when ``computation`` is one of the
    functions known to be that monoid, else None."""
    jax = sys.modules.get("jax")  # (JAX's functions by identity: imported only if the user did)
    if jax is not None:
        for names, namespace in ((_LAX_NAMES, jax.lax), (_NUMPY_NAMES, jax.numpy)):
            for attr, monoid in names.items():
                if computation is getattr(namespace, attr, None):
                    return monoid
    module = getattr(computation, "__module__", None) or ""
    name = getattr(computation, "__name__", None)
    if not isinstance(name, str):
        return None
    if module in ("tidu.lax", "tidu.lax_ops"):
        return _LAX_NAMES.get(name)
    if module.split(".")[0] in ("numpy", "tidu"):
        return _NUMPY_NAMES.get(name)
    if module in ("operator", "_operator"):
        return _OPERATOR_NAMES.get(name)
    return None


def _monoid_identity(monoid: str, dtype: str) -> Any:
    if monoid == "add":
        return np.zeros((), dtype)
    if monoid == "mul":
        return np.ones((), dtype)
    if dtype == "bool":
        return np.array(monoid == "min")
    return _identity(dtype, monoid == "min")


def _combine(monoid: str) -> Callable[[Any, Any], Any]:
    return {"add": _add, "mul": _mul, "max": _max, "min": _min}[monoid]


def _reduce_axes(monoid: str, x: Any, axes: tuple[int, ...]) -> Any:
    dtype = _aval(x)[1]
    if monoid == "add":
        return tnp.sum(x, axis=axes, dtype=dtype)
    if monoid == "mul":
        return tnp.prod(x, axis=axes, dtype=dtype)
    return (reduce_max if monoid == "max" else reduce_min)(x, axes)


def _init_value(fn: str, init: Any, dtype: str, what: str = "init_value") -> Any:
    """``init`` as a scalar of ``dtype``: a Python number is converted (as a weakly typed
    value in JAX), anything else must have ``dtype`` already."""
    if type(init) in (bool, int, float):
        kind = _kind(dtype)
        if (type(init) is float and kind in "biu") or (type(init) is int and kind == "b"):
            raise TypeError(f"{fn}: {what} {init!r} is a Python {type(init).__name__}, the operand has dtype {dtype}; "
                            "give an init value of the operand's dtype")
        return np.array(init, dtype)
    if not isinstance(init, Tracer):
        init = np.asarray(init)
    shape, d = _aval(init)
    if shape != ():
        raise TypeError(f"{fn}: {what} must be a scalar, got shape {shape}")
    if d != dtype:
        raise TypeError(f"{fn}: {what} has dtype {d}, the operand {dtype}; jax.lax does not promote, give them one "
                        "dtype (lax.convert_element_type)")
    return init


def _is_identity(init: Any, monoid: str, dtype: str) -> bool:
    return not isinstance(init, Tracer) and bool(np.asarray(init) == _monoid_identity(monoid, dtype))


def _padding(fn: str, padding: Any, shape: tuple[int, ...], windows: tuple[int, ...], strides: tuple[int, ...],
             window_dilation: tuple[int, ...]) -> list[tuple[int, int]]:
    """(low, high) per axis: 'VALID', 'SAME', 'SAME_LOWER' from the operand's shape and the
    dilated window (as jax.lax.padtype_to_pads), or the pairs given (negative crops)."""
    n = len(shape)
    if isinstance(padding, str):
        name = padding.upper()
        if name == "VALID":
            return [(0, 0)] * n
        if name not in ("SAME", "SAME_LOWER"):
            raise ValueError(f"{fn}: padding {padding!r} is not 'VALID', 'SAME', 'SAME_LOWER' or {n} (low, high) "
                             "pairs")
        pads = []
        for size, w, s, d in zip(shape, windows, strides, window_dilation, strict=True):
            total = builtins.max((-(-size // s) - 1) * s + (w - 1) * d + 1 - size, 0)
            low = total // 2 if name == "SAME" else total - total // 2
            pads.append((low, total - low))
        return pads
    if isinstance(padding, Tracer) or not isinstance(padding, Sequence | np.ndarray) or len(padding) != n:
        raise ValueError(f"{fn}: padding must be 'VALID', 'SAME', 'SAME_LOWER' or {n} (low, high) pairs (one per axis "
                         f"of the operand, shape {shape}), got {padding!r}")
    pairs = [_ints(fn, f"padding[{i}]", p) for i, p in enumerate(padding)]
    for i, p in enumerate(pairs):
        if len(p) != 2:
            raise ValueError(f"{fn}: padding[{i}] is {p}; give (low, high)")
    return [(p[0], p[1]) for p in pairs]


def _geometry(fn: str, shape: tuple[int, ...], window_dimensions: Any, window_strides: Any, padding: Any,
              base_dilation: Any, window_dilation: Any) -> tuple[tuple[int, ...], ...]:
    """The checked windows, strides, base and window dilations, (low, high, interior)
    padding and output shape."""
    n = len(shape)
    windows = _ints(fn, "window_dimensions", window_dimensions)
    if len(windows) != n:
        raise TypeError(f"{fn}: window_dimensions has {len(windows)} entries, the operand has {n} axes (shape {shape})")
    given = {}
    for arg, v in (("window_strides", window_strides), ("base_dilation", base_dilation),
                   ("window_dilation", window_dilation)):
        given[arg] = (1,) * n if v is None else _ints(fn, arg, v)
        if len(given[arg]) != n:
            raise TypeError(f"{fn}: {arg} has {len(given[arg])} entries, the operand has {n} axes (shape {shape})")
    for arg, v in (("window_dimensions", windows), *given.items()):
        for i, k in enumerate(v):
            if k < 1:
                raise ValueError(f"{fn}: {arg}[{i}] is {k}; it must be >= 1")
    strides, bdil, wdil = given["window_strides"], given["base_dilation"], given["window_dilation"]
    pads = _padding(fn, padding, shape, windows, strides, wdil)
    config, out = [], []
    for i, (size, (low, high), w, s, b, d) in enumerate(zip(shape, pads, windows, strides, bdil, wdil, strict=True)):
        padded = low + high + (size - 1) * b + 1 if size else low + high
        if padded < 0:
            raise ValueError(f"{fn}: padding[{i}] {(low, high)} crops axis {i} (size {size}, base dilation {b}) below "
                             "size 0")
        span = (w - 1) * d + 1
        config.append((low, high, b - 1))
        out.append((padded - span) // s + 1 if padded >= span else 0)
    return windows, strides, wdil, tuple(config), tuple(out)


def _window_slice(x: Any, axis: int, start: int, count: int, stride: int) -> Any:
    idx: list[Any] = [builtins.slice(None)] * len(_shape(x))
    idx[axis] = builtins.slice(start, start + (count - 1) * stride + 1, stride)
    return x[tuple(idx)] if isinstance(x, Tracer) else np.asarray(x)[tuple(idx)]


def reduce_window(operand: Any, init_value: Any, computation: Callable[[Any, Any], Any],
                  window_dimensions: Sequence[int], window_strides: Sequence[int] | None = None,
                  padding: str | Sequence[tuple[int, int]] = "VALID", base_dilation: Sequence[int] | None = None,
                  window_dilation: Sequence[int] | None = None) -> Any:
    """``computation`` over the windows of ``operand`` (``jax.lax.reduce_window``): pooling,
    moving sums. Entries that padding or base dilation add take no part (as XLA's); each
    output is ``init_value`` combined with its window's entries. ``add``, ``mul``, ``max``
    and ``min`` (jax.lax's, tidu.lax's, NumPy's ``maximum``, ...) reduce axis by axis; any
    other elementwise ``computation`` of scalars, on a pytree of operands too, is folded
    over the window. At a tie, ``max`` and ``min`` share the derivative among the tied
    entries (JAX's gives it to one of them)."""
    fn = "reduce_window"
    leaves, tree = flatten(operand)
    inits, init_tree = flatten(init_value)
    if not leaves:
        raise ValueError(f"{fn}: operand has no arrays")
    if init_tree != tree:
        raise ValueError(f"{fn}: init_value must have operand's pytree structure ({len(leaves)} leaves), got "
                         f"{init_value!r}")
    shapes = [_shape(v) for v in leaves]
    if len(set(shapes)) > 1:
        raise TypeError(f"{fn}: the operands have shapes {', '.join(map(str, shapes))}; they must have one shape")
    shape = shapes[0]
    dtypes = [_aval(v)[1] for v in leaves]
    inits = [_init_value(fn, i, d) for i, d in zip(inits, dtypes, strict=True)]
    windows, strides, wdil, config, out_shape = _geometry(fn, shape, window_dimensions, window_strides, padding,
                                                          base_dilation, window_dilation)
    monoid = _monoid(computation) if len(leaves) == 1 else None
    if monoid is not None:
        _kinds(fn, "biuf" if monoid in ("max", "min") else "iufc", {"operand": leaves[0]}, "c")
        if 0 in out_shape:
            return unflatten(tree, [np.zeros(out_shape, dtypes[0])])
        return unflatten(tree, [_monoid_window(monoid, leaves[0], inits[0], windows, strides, wdil, config,
                                               out_shape)])
    if 0 in out_shape:
        return unflatten(tree, [np.zeros(out_shape, d) for d in dtypes])
    return unflatten(tree, _fold_window(computation, tree, leaves, inits, windows, strides, wdil, config, out_shape))


def _monoid_window(monoid: str, x: Any, init: Any, windows: tuple[int, ...], strides: tuple[int, ...],
                   wdil: tuple[int, ...], config: tuple[tuple[int, ...], ...], out_shape: tuple[int, ...]) -> Any:
    dtype = _aval(x)[1]
    # padding and dilation holes hold the identity: they change no window's result
    if any(c != (0, 0, 0) for c in config):
        x = pad(x, _monoid_identity(monoid, dtype), config)
    for axis, (w, s, d, m) in enumerate(zip(windows, strides, wdil, out_shape, strict=True)):
        parts = [_window_slice(x, axis, k * d, m, s) for k in range(w)]
        x = parts[0] if w == 1 else _reduce_axes(monoid, tnp.stack(parts, axis=axis + 1), (axis + 1,))
    if not _is_identity(init, monoid, dtype):
        x = _combine(monoid)(init, x)
    return x


def _fold_window(computation: Callable[[Any, Any], Any], tree: Any, leaves: list[Any], inits: list[Any],
                 windows: tuple[int, ...], strides: tuple[int, ...], wdil: tuple[int, ...],
                 config: tuple[tuple[int, ...], ...], out_shape: tuple[int, ...]) -> list[Any]:
    """``acc = computation(acc, window entry)`` over the window offsets, from ``init``;
    entries added by padding or dilation leave ``acc`` as it is (a constant mask)."""
    fn = "reduce_window"
    shape = _shape(leaves[0])
    real = pad(np.ones(shape, bool), np.array(False), config) if any(c != (0, 0, 0) for c in config) else None
    padded = [pad(v, np.zeros((), _aval(v)[1]), config) if real is not None else v for v in leaves]
    acc = [tnp.broadcast_to(i, out_shape) for i in inits]
    for offset in itertools.product(*(range(w) for w in windows)):
        parts, mask = padded, real
        for axis, (k, s, d, m) in enumerate(zip(offset, strides, wdil, out_shape, strict=True)):
            parts = [_window_slice(v, axis, k * d, m, s) for v in parts]
            mask = None if mask is None else _window_slice(mask, axis, k * d, m, s)
        if mask is not None and not mask.any():
            continue
        try:
            result = computation(unflatten(tree, acc), unflatten(tree, parts))
        except TypeError as e:
            if "Tracer" not in str(e) or not any(isinstance(v, Tracer) for v in acc + parts):
                raise
            name = getattr(computation, "__name__", repr(computation))
            raise TypeError(f"{fn}: computation {name} failed on traced values ({str(e).splitlines()[0]}); write it "
                            "with tidu.numpy or tidu.lax functions (JAX's take no tidu values)") from None
        new, new_tree = flatten(result)
        if new_tree != tree:
            raise TypeError(f"{fn}: computation must return a pytree of operand's structure, got {new_tree}")
        for v, a in zip(new, acc, strict=True):
            if _aval(v) != _aval(a):
                raise TypeError(f"{fn}: computation returned shape and dtype {_aval(v)} for operands {_aval(a)}; it "
                                "must be elementwise (a function of scalars in jax.lax) and keep the dtype")
        acc = new if mask is None or mask.all() else [tnp.where(mask, v, a) for v, a in zip(new, acc, strict=True)]
    return [v if isinstance(v, Tracer) else np.asarray(v) for v in acc]  # NumPy out, also of JAX's functions


def reduce(operands: Any, init_values: Any, computation: Callable[[Any, Any], Any], dimensions: Sequence[int]) -> Any:
    """``computation`` over the axes ``dimensions`` (``jax.lax.reduce``), for the monoids
    ``add``, ``mul``, ``max`` and ``min`` (jax.lax's, tidu.lax's, NumPy's ``maximum``, ...),
    on an array or a pytree of arrays (each reduced alone); the result is ``init_value``
    combined with the reduced entries."""
    fn = "reduce"
    leaves, tree = flatten(operands)
    inits, init_tree = flatten(init_values)
    if init_tree != tree:
        raise ValueError(f"{fn}: init_values must have operands's pytree structure ({len(leaves)} leaves), got "
                         f"{init_values!r}")
    monoid = _monoid(computation)
    if monoid is None:
        raise TypeError(f"{fn}: computation {getattr(computation, '__name__', computation)!r} is not supported; tidu's "
                        f"reduce takes {_SUPPORTED} (or use reduce_sum, reduce_max, ... or a scan)")
    out = []
    for x, init in zip(leaves, inits, strict=True):
        shape, dtype = _aval(x)
        _kinds(fn, "biuf" if monoid in ("max", "min") else "iufc", {"operand": x}, "c")
        init = _init_value(fn, init, dtype, "init_values")
        axes = _axes(fn, "dimensions", dimensions, len(shape))
        if any(shape[a] == 0 for a in axes):
            kept = tuple(n for i, n in enumerate(shape) if i not in axes)
            r = np.full(kept, _monoid_identity(monoid, dtype))
        else:
            r = _reduce_axes(monoid, x, axes) if axes else x
        if not _is_identity(init, monoid, dtype):
            r = _combine(monoid)(init, r)
        out.append(r)
    return unflatten(tree, out)




def _conv_transpose_padding(k: int, s: int, padding: Any) -> tuple[int, int]:
    """(low, high) padding of the dilated input for a window of (dilated) size ``k`` and
    stride ``s`` (JAX's ``_conv_transpose_padding``): 'SAME' and 'VALID' name the forward
    convolution's padding, as does a pair with ``use_consistent_padding``."""
    if padding == "SAME":
        total = k + s - 2
        low = k - 1 if s > k - 1 else -(-total // 2)
    elif padding == "VALID":
        total = k + s - 2 + builtins.max(k - s, 0)
        low = k - 1
    else:
        low, high = k - padding[0] - 1, k - padding[1] - 1
        total = low + high
    return low, total - low


_CONV_DEFAULTS = {3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"), 5: ("NHWDC", "HWDIO", "NHWDC")}


def conv_transpose(lhs: Any, rhs: Any, strides: Sequence[int], padding: str | Sequence[tuple[int, int]],
                   rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                   transpose_kernel: bool = False, precision: Any = None, preferred_element_type: Any = None,
                   use_consistent_padding: bool = False) -> Any:
    """``jax.lax.conv_transpose``: the fractionally strided convolution, as
    ``conv_general_dilated`` with ``lhs_dilation=strides`` (dimension numbers default to
    TensorFlow's, 'NHWC', 'HWIO', 'NHWC'); 'SAME' and 'VALID' name the forward
    convolution's padding, pairs the transposed one's (the forward one's with
    ``use_consistent_padding``); ``transpose_kernel`` flips the window and swaps its
    feature axes (the gradient of a forward convolution, as Keras' Conv2DTranspose)."""
    fn = "conv_transpose"
    lshape, rshape = _shape(lhs), _shape(rhs)
    ndims = len(lshape)
    if len(rshape) != ndims:
        raise ValueError(f"{fn}: lhs and rhs must have the same rank, got shapes {lshape} and {rshape}")
    if dimension_numbers is None:
        if ndims not in _CONV_DEFAULTS:
            raise ValueError(f"{fn}: default dimension_numbers are for ranks 3 to 5, got rank {ndims}; give "
                             "dimension_numbers")
        dimension_numbers = _CONV_DEFAULTS[ndims]
    dn = conv_dimension_numbers(lshape, rshape, dimension_numbers)
    n = ndims - 2
    steps = _ints(fn, "strides", strides)
    dil = (1,) * n if rhs_dilation is None else _ints(fn, "rhs_dilation", rhs_dilation)
    for arg, v in (("strides", steps), ("rhs_dilation", dil)):
        if len(v) != n:
            raise ValueError(f"{fn}: {arg} has {len(v)} entries, the operands {n} spatial axes")
    windows = [(rshape[dn.rhs_spec[2 + i]] - 1) * dil[i] + 1 for i in range(n)]
    named = isinstance(padding, str)
    if named and padding not in ("SAME", "VALID"):
        raise ValueError(f"{fn}: padding must be 'SAME', 'VALID' or {n} (low, high) pairs, got {padding!r}")
    if named or use_consistent_padding:
        given = [padding] * n if named else [_ints(fn, f"padding[{i}]", p) for i, p in enumerate(padding)]
        pads: Any = [_conv_transpose_padding(k, s, p) for k, s, p in zip(windows, steps, given, strict=True)]
    else:
        pads = padding
    if transpose_kernel:
        rhs = tnp.flip(rhs, tuple(dn.rhs_spec[2:]))
        rhs = tnp.swapaxes(rhs, dn.rhs_spec[0], dn.rhs_spec[1])
    return conv_general_dilated(lhs, rhs, (1,) * n, pads, steps, dil, dn, precision=precision,
                                preferred_element_type=preferred_element_type)


__all__ = ["conv_transpose", "reduce", "reduce_window"]
