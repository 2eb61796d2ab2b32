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

The rewrites of a loaded file must be sound: ``tidu.load_rules``/``tidu.use_rules``
(``tidu.checkrules.loading``) pass a ``check`` that runs the rule checker's soundness
check on them and refuses an unsound one unless ``trusted=True``. Loaded here without a
``check``, a file's rewrites stay unvetted and the e-graph refuses them.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from tidu.ops.catalog import _ACTIVE, Catalog, builtin_catalog, catalog, load_catalog, set_process_catalog
from tidu.ops.dsl.ast import Loc, RuleSyntaxError
from tidu.ops.meaning import meaning_sympy

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


# checks the rewrites of the files (path, text) of a catalog; raises if one is unsound
RewriteCheck = Callable[[Catalog, Sequence[tuple[str, str]]], None]


def catalog_with(*paths: str | Path, base: Catalog | None = None) -> Catalog:
    """The catalog of ``base`` (default: the active one) plus the rule files ``paths``,
    memoized by the files' paths and texts. A file already in ``base`` with the same text
    is not loaded twice. What ``base`` knows of its files' rewrites (checked, trusted)
    carries over; the new files' rewrites are unvetted (see ``vetted_catalog``)."""
    base = base if base is not None else catalog()
    return _memoized([*base.sources, *(_read(p) for p in paths)], base)


def _memoized(entries: list[tuple[str, str]], base: Catalog) -> Catalog:
    sources: list[tuple[str, str]] = []
    for entry in entries:
        if entry not in sources:
            sources.append(entry)
    key = tuple(sources)
    with _LOCK:
        cat = _MEMO.get(key)
        if cat is not None:
            _MEMO.move_to_end(key)
    if cat is None:
        cat = load_catalog(sources)
        _check_meanings(cat, {path for path, _ in sources} - {path for path, _ in builtin_catalog().sources})
        with _LOCK:
            cat = _MEMO.setdefault(key, cat)
            if len(_MEMO) > _MEMO_SIZE:
                _MEMO.popitem(last=False)
    for how in ("checked", "trusted"):  # base's files keep what is known of their rewrites
        cat.vet([s for s, h in base.vetted.items() if h == how], how)
    return cat


def _check_meanings(cat: Catalog, files: set[str]) -> None:
    """The meanings of the primitives of the rule files ``files`` read as SymPy reads them,
    at load time (as ``tidu check-rules`` does): a call of what SymPy lacks (``sinus(x)``)
    is a RuleSyntaxError at its position, not an error at the primitive's first call."""
    prims = [p for _, p in cat.items() if p.loc.file in files and p.decl.meaning is not None and not p.variadic]
    if not prims:
        return
    import sympy

    for prim in prims:
        meaning_sympy(prim, [sympy.Dummy(o) for o in prim.operands])


def vetted_catalog(cat: Catalog, paths: Sequence[str | Path], trusted: bool, check: RewriteCheck | None) -> Catalog:
    """``cat`` with the rewrites of the rule files ``paths`` trusted (``trusted``) or
    checked by ``check`` (each time they are loaded, unless checked before), and those
    of its other files checked if they were neither; ``check`` raises on an unsound one.
    Without a ``check``, unvetted rewrites stay so (the e-graph refuses them)."""
    new = {_read(p) for p in paths}
    if trusted:
        cat.vet(new, "trusted")
    # the files loaded now are checked even if trusted by an earlier load (unless checked before)
    todo = [s for s in cat.rewrite_sources
            if s not in cat.vetted or (s in new and not trusted and cat.vetted[s] != "checked")]
    if todo and check is not None:
        check(cat, todo)
        cat.vet(todo, "checked")
    return cat


def load_rules(*paths: str | Path, trusted: bool = False, check: RewriteCheck | None = None) -> Catalog:
    """Load rule files for the whole process: from now on every thread's default catalog
    is the built-in rules plus every file loaded so far (a file loaded again is re-read).
    Raises ``RuleSyntaxError`` (``file:line:col: ...``) and then changes nothing. The
    files' rewrites are vetted by ``vetted_catalog(cat, paths, trusted, check)``."""
    with _LOCK:
        files = list(_PROCESS_FILES)
    files += [str(Path(p)) for p in paths if str(Path(p)) not in files]
    previous = _PROCESS_CATALOG[0] if _PROCESS_CATALOG else builtin_catalog()
    cat = _memoized([*builtin_catalog().sources, *(_read(p) for p in files)], previous)
    vetted_catalog(cat, paths, trusted, check)
    with _LOCK:
        _PROCESS_CATALOG[:] = [cat]
        _PROCESS_FILES[:] = files
    set_process_catalog(cat)
    return cat


_PROCESS_FILES: list[str] = []  # what load_rules has loaded, in order
_PROCESS_CATALOG: list[Catalog] = []  # load_rules' latest catalog (what its files' vetting carries on from)


@contextlib.contextmanager
def use_rules(*paths: str | Path, trusted: bool = False, check: RewriteCheck | None = None) -> Iterator[Catalog]:
    """Inside the ``with`` block (in this thread or asyncio task), the active catalog is
    the current one plus the rule files ``paths``: tracing, the transforms, the
    simplifier, evaluation and lowering all see their primitives. Blocks nest. Traced
    and compiled programs are cached per catalog: no cache to clear when switching. The
    files' rewrites are vetted by ``vetted_catalog(cat, paths, trusted, check)``."""
    cat = vetted_catalog(catalog_with(*paths), paths, trusted, check)
    token = _ACTIVE.set(cat)
    try:
        yield cat
    finally:
        _ACTIVE.reset(token)


__all__ = ["RewriteCheck", "catalog_with", "load_rules", "use_rules", "vetted_catalog"]
