"""tidu.numpy indexing: basic indexing (integers, slices, None, ...) as ``slice`` and
``reshape``."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from ..tracing import Tracer
from ._core import ArrayLike
from ._shapes import reshape


def getitem(x: ArrayLike, index: Any) -> Any:
    """Basic indexing: integers, slices with positive steps, None and Ellipsis."""
    if not isinstance(x, Tracer):
        return np.asarray(x)[index]
    x.check_alive()
    items = index if isinstance(index, tuple) else (index,)
    for it in items:
        if not (it is None or it is Ellipsis or isinstance(it, slice)
                or (isinstance(it, int | np.integer) and not isinstance(it, bool | np.bool_))):
            raise TypeError(f"tidu.numpy supports basic indexing only (integers, slices, None, "
                            f"...), got {type(it).__name__}; select with tnp.where or a one-hot "
                            "product instead")
    if builtins.sum(it is Ellipsis for it in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = builtins.sum(1 for it in items if it is not None and it is not Ellipsis)
    if used > x.ndim:
        raise IndexError(f"too many indices for array: array is {x.ndim}-dimensional, "
                         f"but {used} were indexed")
    fill = [slice(None)] * (x.ndim - used)
    if Ellipsis in items:
        k = items.index(Ellipsis)
        items = items[:k] + tuple(fill) + items[k + 1:]
    else:
        items = items + tuple(fill)
    start, limit, strides, out_shape = [], [], [], []
    axis = 0
    for it in items:
        if it is None:
            out_shape.append(1)
            continue
        d = x.shape[axis]
        if isinstance(it, slice):
            s, e_, st = it.indices(d)
            if st < 0:
                raise NotImplementedError("negative slice steps are not supported by tidu.numpy "
                                          "(there is no reverse primitive)")
            n = len(range(s, e_, st))
            start.append(s if n else 0)
            limit.append(s + (n - 1) * st + 1 if n else 0)
            strides.append(st)
            out_shape.append(n)
        else:
            i = int(it)
            if not -d <= i < d:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {d}")
            i %= d
            start.append(i)
            limit.append(i + 1)
            strides.append(1)
        axis += 1
    out = x
    if (tuple(start), tuple(limit), tuple(strides)) != ((0,) * x.ndim, x.shape, (1,) * x.ndim):
        out = x.trace.emit("slice", [x], {"start": tuple(start), "limit": tuple(limit),
                                          "strides": tuple(strides)})
    return reshape(out, tuple(out_shape))
