"""Which rewrites simplification may use: ``"exact"`` (IEEE-exact) or ``"real"`` (valid for
finite real and complex numbers). The names are the rule language's (``tidu.ops.dsl``);
this module holds the choice in effect per thread and context."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from tidu.ops.dsl.parse import SEMANTICS

# The rewrite semantics materialize_merge uses when not told (per thread and context).
_SEMANTICS: ContextVar[str] = ContextVar("tidu_rewrite_semantics", default="exact")


def current_semantics() -> str:
    """The rewrite semantics in effect: "exact" unless ``rewrite_semantics`` says so."""
    return _SEMANTICS.get()


@contextmanager
def rewrite_semantics(name: str) -> Iterator[None]:
    """Simplify with ``name`` ("exact" or "real") inside a ``with`` block: every graph
    built there (``tidu.grad``, ``tidu.jit``, ``make_graph``...) unless one says
    otherwise. Transformed functions are cached per semantics."""
    if name not in SEMANTICS:
        raise ValueError(f"unknown rewrite semantics {name!r}; known: {', '.join(SEMANTICS)}")
    token = _SEMANTICS.set(name)
    try:
        yield
    finally:
        _SEMANTICS.reset(token)


__all__ = ["SEMANTICS", "current_semantics", "rewrite_semantics"]
