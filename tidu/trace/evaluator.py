"""Running a function traced, compiled and evaluated on concrete arguments, for the stages
below the one that can (tidu.numpy, which calls it; tidu.transforms, which provides it:
tidu.transforms.traced_calls). ``run_traced(fn, args, kwargs)`` is ``fn(*args, **kwargs)`` as
under ``tidu.jit``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Evaluator = Callable[[Callable[..., Any], tuple, dict[str, Any]], Any]
_EVALUATOR: list[Evaluator] = []


def set_evaluator(run: Evaluator) -> None:
    """Install ``run(fn, args, kwargs)`` (done once, by tidu.transforms.traced_calls)."""
    _EVALUATOR[:] = [run]


def run_traced(fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
    """``fn(*args, **kwargs)`` traced, compiled and run on the concrete arguments."""
    if not _EVALUATOR:
        raise RuntimeError("no evaluator of traced functions is installed: import tidu (tidu.transforms.traced_calls)")
    return _EVALUATOR[0](fn, args, kwargs)


__all__ = ["Evaluator", "run_traced", "set_evaluator"]
