"""The report of ``tidu check-rules``: the verdicts, one ``Row`` per check, the ``Report``
(its table and summary), and how places and values are shown in a row."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

import numpy as np

PASS, WARN, SKIP, FAIL, EXEMPT = "pass", "warn", "skip", "FAIL", "exempt"
# A rule the checker cannot confirm (warn: a difference it explains but cannot prove;
# skip: no way to test it) fails like a refuted one, unless the rule states why it is
# right (``exempt "..."``): then its row says "exempt". A FAIL (a counterexample) stays.
UNCONFIRMED = (WARN, SKIP, FAIL)


@dataclass
class Row:
    primitive: str
    rule: str
    where: str  # file:line
    check: str  # derivative | linear | adjoint | sound
    result: str  # pass | warn | skip | FAIL | exempt
    detail: str


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def failures(self) -> list[Row]:
        return [r for r in self.rows if r.result in UNCONFIRMED]

    def table(self) -> str:
        head = ("primitive", "rule", "file:line", "check", "result", "detail")
        rows = [head] + [(r.primitive, r.rule, r.where, r.check, r.result, r.detail) for r in self.rows]
        widths = [min(48, max(len(r[c]) for r in rows)) for c in range(5)]
        lines = ["  ".join([v.ljust(w) for v, w in zip(r[:5], widths, strict=True)] + [r[5]]).rstrip()
                 for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths) + "  ------")
        return "\n".join(lines)

    def summary(self) -> str:
        counts = {k: sum(r.result == k for r in self.rows) for k in (PASS, EXEMPT, WARN, SKIP, FAIL)}
        text = f"{len(self.rows)} checks: " + ", ".join(f"{n} {k}" for k, n in counts.items())
        fails = [f"{r.where}: {r.primitive}: {r.check} of '{r.rule}' "
                 f"{'failed' if r.result == FAIL else 'is not confirmed (' + r.result + ')'}: {r.detail}"
                 for r in self.failures]
        return "\n".join([text, *fails])

    def __str__(self) -> str:
        return self.table() + "\n\n" + self.summary()

    def __repr__(self) -> str:
        # the first line of the summary: the counts (str() and .table() give every row)
        return f"<Report: {self.summary().splitlines()[0]}>"

    def _repr_html_(self) -> str:
        """The table for notebooks, failures first, colored by verdict."""
        esc = html.escape
        color = {PASS: "green", EXEMPT: "gray", WARN: "darkorange", SKIP: "darkorange", FAIL: "red"}
        head = "".join(f"<th>{h}</th>" for h in ("primitive", "rule", "file:line", "check", "result", "detail"))
        ordered = [r for r in self.rows if r.result in UNCONFIRMED] + [r for r in self.rows
                                                                      if r.result not in UNCONFIRMED]
        rows = "".join(
            f"<tr><td>{esc(r.primitive)}</td><td><code>{esc(r.rule)}</code></td><td>{esc(r.where)}</td>"
            f"<td>{esc(r.check)}</td><td style=\"color:{color.get(r.result, 'black')}\">{esc(r.result)}</td>"
            f"<td>{esc(r.detail)}</td></tr>" for r in ordered)
        verdict = esc(self.summary().splitlines()[0])
        return (f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
                f"<p><b>{'PASS' if self.ok else 'FAIL'}: {verdict}</b></p>")


def _where(loc: Any) -> str:
    return f"{loc.file}:{loc.line}"


def _fmt(v: Any) -> str:
    v = complex(v) if np.iscomplexobj(v) else v
    if isinstance(v, complex):
        return f"{v.real:.6g}{v.imag:+.6g}j"
    return f"{float(v):.6g}" if isinstance(v, float | np.floating) else str(v)
