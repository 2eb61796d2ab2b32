"""What a saved program needs of the catalog, and finding it again when it is loaded.

A program compiled under the built-in catalog needs nothing: it loads under the built-in
catalog. One that applies primitives of a user's rule file records, per file, its path,
a SHA-256 of its text and the primitives it uses (never code). When it is loaded, the
active catalog (``tidu.use_rules`` / ``tidu.load_rules``) must declare each of them
from a file of that very text, else ``CatalogMismatchError`` says which file and
primitives to load.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from tidu.ops.catalog import INTERNAL, Catalog, OpError, builtin_catalog, catalog


class CatalogMismatchError(OpError):
    """A saved program applies primitives the active catalog lacks (or declares differently)."""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def catalog_needs(cat: Catalog | None, ops: Iterable[str]) -> list[dict[str, Any]]:
    """Per user rule file whose primitives ``ops`` apply: ``{"file", "sha256",
    "primitives"}`` (JSON data; empty for a program of built-in primitives only)."""
    cat = cat if cat is not None else builtin_catalog()
    texts = dict(cat.sources)
    by_file: dict[str, list[str]] = {}
    for op in sorted(set(ops)):
        prim = cat.get(op)
        if prim is not None and not prim.builtin:
            by_file.setdefault(prim.loc.file, []).append(op)
    return [{"file": path, "sha256": _digest(texts.get(path, "")), "primitives": names}
            for path, names in sorted(by_file.items())]


def catalog_for(needs: list[dict[str, Any]], ops: Iterable[str], what: str) -> Catalog:
    """The catalog a program loaded from ``what`` (a path, or "pickle") runs under: the
    built-in one when ``needs`` is empty, else the active one, which must declare every
    primitive of ``needs`` from a file of the recorded text; every op of ``ops`` must be
    known to it. Raises ``CatalogMismatchError`` naming the files and primitives."""
    cat = builtin_catalog() if not needs else catalog()
    problems = []
    for entry in needs:
        texts = {path: _digest(text) for path, text in cat.sources}
        missing, differ = [], []
        for name in entry["primitives"]:
            prim = cat.get(name)
            if prim is None or prim.builtin:
                missing.append(name)
            elif texts.get(prim.loc.file) != entry["sha256"]:
                differ.append(f"{name} (declared at {prim.loc})")
        if missing:
            problems.append(f"primitive(s) {', '.join(missing)} of the rules file {entry['file']} are not "
                            "in the active catalog")
        if differ:
            problems.append(f"{', '.join(differ)}: the active catalog's rules file is not the text "
                            f"{entry['file']} had when the program was saved (sha256 {entry['sha256'][:12]}...)")
    if problems:
        raise CatalogMismatchError(
            f"{what}: the program was compiled under user rules: {'; '.join(problems)}. Load that rules file "
            "first: tidu.load_rules(path), or load the program inside `with tidu.use_rules(path):`")
    unknown = sorted({op for op in ops if op not in cat and op not in INTERNAL})
    if unknown:
        raise CatalogMismatchError(
            f"{what}: unknown primitive(s) {', '.join(unknown)}: the active catalog does not declare them "
            "(a program saved by a newer tidu, or under rules the file does not record)")
    return cat


__all__ = ["CatalogMismatchError", "catalog_for", "catalog_needs"]
