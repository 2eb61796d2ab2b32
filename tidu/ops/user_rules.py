"""Your own primitives: rule files loaded process-wide or for a ``with`` block. Their
primitives are called with ``tidu.op(name)`` (``tidu.numpy._user_ops``).

A primitive declared in a rule file is complete: its ``meaning`` (or ``numpy`` clause)
runs it, its ``stablehlo`` clause (or its meaning, decomposed) lowers it, its ``jvp`` and
``transpose`` rules differentiate it. Nothing in the package needs editing::

    tidu.load_rules("my.rules")                # for the whole process
    with tidu.use_rules("my.rules"):           # for a block (this thread/task only)
        logistic = tidu.op("logistic")
        tidu.grad(lambda x: tnp.sum(logistic(x)))(x)

Catalogs are memoized by the files' paths and texts, so entering the same ``use_rules``
again reuses the same catalog, and with it the traced and compiled programs.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

from tidu.ops.catalog import _ACTIVE, Catalog, builtin_catalog, catalog, load_catalog, set_process_catalog
from tidu.ops.dsl.ast import Loc, RuleSyntaxError

_MEMO: OrderedDict[tuple[tuple[str, str], ...], Catalog] = OrderedDict()
_MEMO_SIZE = 32
_LOCK = threading.Lock()


def _read(path: str | Path) -> tuple[str, str]:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise FileNotFoundError(f"cannot read rule file {p}: {e.strerror}") from None
    try:
        return str(p), data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise RuleSyntaxError(Loc(str(p), line, col), f"not UTF-8 text ({e.reason}: byte "
                              f"0x{data[e.start]:02x}); save the file as UTF-8") from None


def catalog_with(*paths: str | Path, base: Catalog | None = None) -> Catalog:
    """The catalog of ``base`` (default: the active one) plus the rule files ``paths``,
    memoized by the files' paths and texts. A file already in ``base`` with the same text
    is not loaded twice."""
    base = base if base is not None else catalog()
    sources = list(base.sources)
    for p in paths:
        entry = _read(p)
        if entry not in sources:
            sources.append(entry)
    key = tuple(sources)
    with _LOCK:
        hit = _MEMO.get(key)
        if hit is not None:
            _MEMO.move_to_end(key)
            return hit
    cat = load_catalog(sources)
    with _LOCK:
        cat = _MEMO.setdefault(key, cat)
        if len(_MEMO) > _MEMO_SIZE:
            _MEMO.popitem(last=False)
    return cat


def load_rules(*paths: str | Path) -> Catalog:
    """Load rule files for the whole process: from now on every thread's default catalog
    is the built-in rules plus every file loaded so far (a file loaded again is re-read).
    Raises ``RuleSyntaxError`` (``file:line:col: ...``) and then changes nothing."""
    with _LOCK:
        files = list(_PROCESS_FILES)
    files += [str(Path(p)) for p in paths if str(Path(p)) not in files]
    cat = catalog_with(*files, base=builtin_catalog())
    with _LOCK:
        _PROCESS_FILES[:] = files
    set_process_catalog(cat)
    return cat


_PROCESS_FILES: list[str] = []  # what load_rules has loaded, in order


@contextlib.contextmanager
def use_rules(*paths: str | Path) -> Iterator[Catalog]:
    """Inside the ``with`` block (in this thread or asyncio task), the active catalog is
    the current one plus the rule files ``paths``: tracing, the transforms, the
    simplifier, evaluation and lowering all see their primitives. Blocks nest. Traced
    and compiled programs are cached per catalog: no cache to clear when switching."""
    cat = catalog_with(*paths)
    token = _ACTIVE.set(cat)
    try:
        yield cat
    finally:
        _ACTIVE.reset(token)


__all__ = ["catalog_with", "load_rules", "use_rules"]
