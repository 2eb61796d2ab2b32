"""Pausing Python's cyclic garbage collector around tidu's own graph passes.

Tracing, the AD passes and materialize_merge allocate ~10^5-10^6 small objects (keys,
tuples, fragment nodes) and free few of them; each time the allocation count passes
the collector's threshold it scans the young objects, and every so often all of them,
the whole process included (with JAX or SymPy imported, 10^5+ objects per full pass).
Those passes find nothing to free here (the keys and fragments form no reference
cycles), so they are paused while tidu's passes run and resumed afterwards; anything
cyclic left meanwhile is collected at the next regular pass.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector inside the block (restored afterwards; nested
    blocks leave it to the outermost one)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


__all__ = ["paused_gc"]
