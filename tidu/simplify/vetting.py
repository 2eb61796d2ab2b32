"""The e-graph applies only rewrites it may trust: the built-in ones (checked in CI by
``tidu check-rules``) and those of rule files whose rewrites passed the soundness check
when they were loaded (``tidu.load_rules``, ``tidu.use_rules``) or that the caller
declared trusted. An unsound rewrite would change results silently (``exp(log(x)) -> x``
turns log's nan at x < 0 into x), so a catalog built with the low-level
``load_catalog`` and never vetted is refused here, with how to load it instead."""

from __future__ import annotations

from tidu.ops.catalog import Catalog


class UnvettedRewritesError(RuntimeError):
    """The active catalog has rewrites from rule files that were neither checked nor trusted."""


def require_vetted(cat: Catalog) -> None:
    """Raise ``UnvettedRewritesError`` if ``cat`` has unvetted rewrites."""
    unvetted = cat.unvetted()
    if unvetted:
        files = ", ".join(path for path, _ in unvetted)
        raise UnvettedRewritesError(
            f"the rewrites of {files} were not checked for soundness, so the simplifier will not apply them: "
            "load the file with tidu.load_rules or tidu.use_rules (they check its rewrites), check a catalog "
            "with tidu.checkrules.vet_catalog(cat), or, if you vouch for the rewrites, pass trusted=True "
            "(tidu.use_rules(path, trusted=True), load_catalog(files, trusted=True))")


__all__ = ["UnvettedRewritesError", "require_vetted"]
