"""Parsing einsum subscripts into a plan of axis labels.

``parse(subscripts, ndims)`` expands ``...`` into reserved labels (aligned to the
right, as NumPy broadcasts them), checks every term against its operand's rank and
returns the input terms and the output term as strings of single-character labels.
The tracing itself (diagonals, sums, pairwise ``dot_general``) is in ``tidu.numpy``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

# Labels standing for the axes an ellipsis covers (never valid user labels).
_ELLIPSIS_LABELS = "".join(chr(0x2460 + i) for i in range(32))


class EinsumError(ValueError):
    """The einsum subscripts do not fit the operands."""


def parse(subscripts: str, ndims: Sequence[int]) -> tuple[list[str], str]:
    """(input terms, output term) with ellipses expanded into reserved labels."""
    spec = subscripts.replace(" ", "")
    lhs, arrow, rhs = spec.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ndims):
        raise EinsumError(f"einsum: subscripts {subscripts!r} name {len(terms)} operand(s), "
                          f"got {len(ndims)}")
    n_ell = 0
    for t, nd in zip(terms, ndims, strict=True):
        _check_labels(t, subscripts)
        if "..." in t:
            n_ell = max(n_ell, nd - (len(t) - 3))
    ell = _ELLIPSIS_LABELS[:n_ell]
    expanded = []
    for i, (t, nd) in enumerate(zip(terms, ndims, strict=True)):
        if "..." in t:
            k = nd - (len(t) - 3)
            if k < 0:
                raise EinsumError(f"einsum: operand {i} has {nd} axes, fewer than {t!r} names")
            t = t.replace("...", ell[n_ell - k:])
        if len(t) != nd:
            raise EinsumError(f"einsum: operand {i} has {nd} axes but its subscripts {t!r} "
                              f"name {len(t)}")
        expanded.append(t)
    if arrow:
        _check_labels(rhs, subscripts)
        out = rhs.replace("...", ell)
        if len(set(out)) != len(out):
            raise EinsumError(f"einsum: output subscripts {rhs!r} repeat a label")
        known = set("".join(expanded))
        missing = [c for c in out if c not in known]
        if missing:
            raise EinsumError(f"einsum: output label(s) {', '.join(missing)} do not appear in "
                              "the inputs")
    else:
        counts = Counter("".join(expanded))
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    return expanded, out


def _check_labels(term: str, subscripts: str) -> None:
    if term.count("...") > 1:
        raise EinsumError(f"einsum: more than one ellipsis in {term!r}")
    bad = [c for c in term.replace("...", "") if not c.isalpha() or c in _ELLIPSIS_LABELS]
    if bad:
        raise EinsumError(f"einsum: invalid label(s) {' '.join(map(repr, bad))} in {subscripts!r}; "
                          "use letters and at most one '...' per term")


__all__ = ["EinsumError", "parse"]
