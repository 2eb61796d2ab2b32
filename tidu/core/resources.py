"""Resource limits: how many graph values one call of a transform may build.

A transform of a function whose derivative grows geometrically (deep nesting of
transforms, long unrolled loops) would otherwise run until memory is exhausted. With a
limit, the call stops with ``LimitError`` as soon as it has built more graph values
(op nodes recorded by tracing and the AD passes) than allowed, naming the limit and how
to raise it. No limit is set by default in the library; the CLI sets one (--max-nodes).

    with tidu.resource_limits(graph_values=100_000):
        tidu.grad(f)(x)            # LimitError past 100,000 values
    tidu.set_resource_limits(graph_values=1_000_000)   # process-wide default
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class LimitError(RuntimeError):
    """A call went past a resource limit (``tidu.resource_limits``)."""


class _Count:
    __slots__ = ("limit", "used")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0


_PROCESS_LIMIT: list[int | None] = [None]  # set_resource_limits
_LIMIT: ContextVar[int | None] = ContextVar("tidu_graph_value_limit", default=None)  # resource_limits
# The count of the limited transform call in progress (None: no limit). Hot paths test it
# before calling charge(): most calls run without a limit.
GRAPH_VALUE_COUNT: ContextVar[_Count | None] = ContextVar("tidu_graph_value_count", default=None)


def _check(graph_values: int | None) -> int | None:
    if graph_values is not None and (isinstance(graph_values, bool) or not isinstance(graph_values, int)
                                     or graph_values < 1):
        raise ValueError(f"graph_values must be a positive int or None, got {graph_values!r}")
    return graph_values


def set_resource_limits(*, graph_values: int | None) -> None:
    """Process-wide default: at most ``graph_values`` graph values per transform call
    (None: no limit). ``resource_limits`` blocks override it."""
    _PROCESS_LIMIT[0] = _check(graph_values)


@contextmanager
def resource_limits(*, graph_values: int | None) -> Iterator[None]:
    """Inside the block (this thread or task only), each call of a transform may build
    at most ``graph_values`` graph values, else ``LimitError``; None lifts the limit."""
    token = _LIMIT.set(_check(graph_values) if graph_values is not None else 0)
    try:
        yield
    finally:
        _LIMIT.reset(token)


def current_limit() -> int | None:
    """The graph-value limit in force here (None: none)."""
    block = _LIMIT.get()
    if block is not None:
        return block or None  # 0: lifted by resource_limits(graph_values=None)
    return _PROCESS_LIMIT[0]


@contextmanager
def counting() -> Iterator[None]:
    """Count the graph values of one top-level transform call against the limit."""
    limit = current_limit()
    if limit is None or GRAPH_VALUE_COUNT.get() is not None:  # no limit, or nested in a counted call
        yield
        return
    token = GRAPH_VALUE_COUNT.set(_Count(limit))
    try:
        yield
    finally:
        GRAPH_VALUE_COUNT.reset(token)


def charge() -> None:
    """One new graph value (called by the fragment builder)."""
    count = GRAPH_VALUE_COUNT.get()
    if count is not None:
        count.used += 1
        if count.used > count.limit:
            raise LimitError(
                f"this call built more than {count.limit:,} graph values (the limit); the derivative "
                "grows too fast: simplify between orders, use fewer nested transforms, or raise the "
                "limit with tidu.resource_limits(graph_values=...) or tidu.set_resource_limits(...)")


__all__ = ["GRAPH_VALUE_COUNT", "LimitError", "charge", "counting", "current_limit", "resource_limits",
           "set_resource_limits"]
