"""Functions with a JVP rule of their own, for the stage below the one that makes them
(tidu.numpy, which declares them with ``with_jvp``; tidu.transforms.custom, which provides
``custom_jvp`` and installs it here), as tidu.trace.evaluator does for traced calls. A
function's ``custom_jvp`` object is made at its first call, once tidu is imported."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

# custom_jvp(fn) -> a callable with ``defjvp(jvp)`` (tidu.transforms.custom.custom_jvp)
CustomJvp = Callable[[Callable[..., Any]], Any]
_MAKER: list[CustomJvp] = []
_LOCK = threading.Lock()


def set_custom_jvp(make: CustomJvp) -> None:
    """Install ``custom_jvp`` (done once, by tidu.transforms.custom)."""
    _MAKER[:] = [make]


class WithJvp:
    """``fn`` whose derivative is ``jvp(primals, tangents) -> (out, tangent_out)``, as
    ``custom_jvp(fn).defjvp(jvp)`` (``jvp`` may call this function again: the rule of its
    own derivative). tidu reads only ``tangent_out`` (the value is the call's own, traced
    once), so a rule here may give None for ``out`` and save tracing it again."""

    __slots__ = ("_made", "elementwise", "fn", "jvp")

    def __init__(self, fn: Callable[..., Any], jvp: Callable[[tuple, tuple], tuple[Any, Any]],
                 elementwise: bool = False) -> None:
        self.fn, self.jvp, self.elementwise = fn, jvp, elementwise
        self._made: Any = None

    def __call__(self, *args: Any) -> Any:
        made = self._made
        if made is None:
            with _LOCK:
                if self._made is None:
                    if not _MAKER:
                        raise RuntimeError(f"{self.fn.__name__} has a derivative rule of its own, which needs "
                                           "tidu.transforms.custom: import tidu")
                    made = _MAKER[0](self.fn)
                    made.defjvp(self.jvp)
                    made.elementwise = self.elementwise  # (for sparsity patterns through its calls)
                    self._made = made
                made = self._made
        return made(*args)


def with_jvp(fn: Callable[..., Any], jvp: Callable[[tuple, tuple], tuple[Any, Any]],
             elementwise: bool = False) -> WithJvp:
    """``fn`` with the derivative rule ``jvp`` (see ``WithJvp``). ``elementwise``: each
    result element depends on the same element of each (broadcast) argument only, in value
    and derivative (sparsity patterns through the call stay elementwise)."""
    return WithJvp(fn, jvp, elementwise)


__all__ = ["CustomJvp", "WithJvp", "set_custom_jvp", "with_jvp"]
