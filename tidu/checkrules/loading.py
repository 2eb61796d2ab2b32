"""Loading rule files with their rewrites checked: ``tidu.load_rules`` and
``tidu.use_rules``. A rewrite of a loaded file runs inside the e-graph on every program
traced while the file is active, so an unsound one (``exp(log(x)) -> x``, which turns
log's nan at x = -1 into -1) would change results silently. Loading runs the rewrite
soundness check of ``tidu check-rules`` on the file's rewrites and refuses the file when
one fails, unless the caller declares it ``trusted``. The verdicts are cached per
catalog content (the files' paths and texts), so loading the same files again is free.

Built-in rules are not checked here: CI runs ``tidu check-rules`` on them."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from tidu.checkrules._driver import _guarded
from tidu.checkrules._eval import implementations
from tidu.checkrules._report import UNCONFIRMED, Row
from tidu.checkrules._rewrites import check_rewrite
from tidu.ops import user_rules
from tidu.ops.catalog import Catalog, use_catalog
from tidu.ops.dsl.ast import Call, Loc, RuleSyntaxError, show


class UnsoundRewriteError(RuleSyntaxError):
    """A loaded rule file has a rewrite the soundness check refutes or cannot confirm;
    the message names file:line, the rewrite and the counterexample. ``problems``: one
    line per such rewrite (``file:line: rewrite ...: fail: ...``), for a one-line report."""

    def __init__(self, loc: Loc, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(loc, message)
        self.problems = list(problems)


_VERDICTS: dict[tuple[tuple[tuple[str, str], ...], tuple[str, str]], list[tuple[Loc, Row]]] = {}
_VERDICTS_LOCK = threading.Lock()
_VERDICTS_SIZE = 64


def rewrite_problems(cat: Catalog, source: tuple[str, str]) -> list[tuple[Loc, Row]]:
    """The rewrites of the rule file ``source`` (path, text) of ``cat`` that ``tidu
    check-rules`` would fail (a counterexample, or no way to confirm them without an
    ``exempt`` reason), with their rows; cached per catalog content."""
    key = (tuple(cat.sources), source)
    with _VERDICTS_LOCK:
        hit = _VERDICTS.get(key)
    if hit is not None:
        return hit
    path = source[0]
    rewrites = [rw for rw in cat.all_rewrites() if rw.loc.file == path]
    impls = implementations(cat) if rewrites else {}
    out = []
    with use_catalog(cat):  # the engine (instantiate, type inference) reads the active catalog
        for rw in rewrites:
            op = rw.lhs.fn if isinstance(rw.lhs, Call) else "?"
            rows = _guarded(lambda r=rw: [check_rewrite(cat, r, impls)], op, f"rewrite {show(rw.lhs)}",
                            f"{rw.loc.file}:{rw.loc.line}", "sound", exempt=rw.exempt)
            out += [(rw.loc, row) for row in rows if row.result in UNCONFIRMED]
    with _VERDICTS_LOCK:
        if len(_VERDICTS) >= _VERDICTS_SIZE:
            _VERDICTS.pop(next(iter(_VERDICTS)))
        _VERDICTS[key] = out
    return out


def check_rewrites(cat: Catalog, sources: Sequence[tuple[str, str]]) -> None:
    """Raise ``UnsoundRewriteError`` if a rewrite of the files ``sources`` of ``cat`` is
    unsound (or cannot be confirmed); the ``check`` of ``tidu.ops.user_rules``."""
    problems = [p for s in sources for p in rewrite_problems(cat, s)]
    if not problems:
        return
    lines = [f"{row.where}: {row.rule}: {row.result.lower()}: {row.detail}" for _, row in problems]
    raise UnsoundRewriteError(
        problems[0][0],
        f"{len(problems)} rewrite{'s' if len(problems) > 1 else ''} failed the soundness check, "
        "so the file is not loaded:\n  " + "\n  ".join(lines)
        + "\nFix the rewrite (a guard such as 'when positive(x)' limits it to where it holds) or, if you "
        "vouch for it, load the file with trusted=True (tidu check-rules FILE shows every check).", lines)


def vet_catalog(cat: Catalog, trusted: bool = False) -> Catalog:
    """``cat`` (from ``tidu.ops.catalog.load_catalog``) with its rule files' rewrites
    checked (``UnsoundRewriteError`` if one fails) or, with ``trusted``, marked trusted:
    what the simplifier needs before it applies them."""
    if trusted:
        cat.vet(cat.unvetted(), "trusted")
    else:
        todo = cat.unvetted()
        check_rewrites(cat, todo)
        cat.vet(todo, "checked")
    return cat


def load_rules(*paths: str | Path, trusted: bool = False) -> Catalog:
    """Load rule files for the whole process (``tidu.ops.user_rules.load_rules``), their
    rewrites checked for soundness first: ``UnsoundRewriteError`` (file:line, the rewrite,
    a counterexample) and nothing changes if one fails, unless ``trusted``."""
    return user_rules.load_rules(*paths, trusted=trusted, check=check_rewrites)


@contextlib.contextmanager
def use_rules(*paths: str | Path, trusted: bool = False) -> Iterator[Catalog]:
    """The rule files ``paths`` active inside the ``with`` block
    (``tidu.ops.user_rules.use_rules``), their rewrites checked for soundness first:
    ``UnsoundRewriteError`` if one fails, unless ``trusted``."""
    with user_rules.use_rules(*paths, trusted=trusted, check=check_rewrites) as cat:
        yield cat


__all__ = ["UnsoundRewriteError", "check_rewrites", "load_rules", "rewrite_problems", "use_rules", "vet_catalog"]
