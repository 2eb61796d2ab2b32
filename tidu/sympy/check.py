"""Checks of tidu's derivatives against SymPy's (re-exported by ``tidu.sympy``):
``check_gradient`` / ``check_hessian`` compare tidu's derivative in each mode with
``sympy.diff`` / ``sympy.hessian``, symbolically and at points; see ``CheckReport``.
``symbolic_difference`` and ``pointwise`` are the symbolic comparison; ``derivative_fn``,
``make_graph`` and ``flat_outputs`` the tidu transforms the checks run.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy

import tidu.numpy as tnp
from tidu.core.graph import MaterializedGraph
from tidu.core.pytree import flatten
from tidu.sympy import bridge
from tidu.sympy.bridge import number
from tidu.sympy.expr import parse
from tidu.sympy.expr import to_sympy as expr_to_sympy
from tidu.transforms import inspection, jacobians
from tidu.transforms.prove import prove_equal

# ---------------------------------------------------------------------------
# checking tidu's derivatives against SymPy's
# ---------------------------------------------------------------------------

HESSIAN_MODES = ("FoF", "FoR", "RoF", "RoR")
GRADIENT_MODES = ("F", "R")


@dataclass
class EntryCheck:
    """One derivative entry in one mode: ``symbolic`` is "proved" (tidu's entry and
    SymPy's were proved equal in the e-graph, with the real rules), else SymPy's
    verdict on the difference: "yes" (simplifies to 0), "≈" (0 up to float rounding of
    constants), "no", "?" (SymPy could not decide), or "skipped"; ``max_abs``/
    ``max_rel`` are the largest numeric errors over the points (relative to |SymPy's
    value|, absolute where that is 0); ``numeric_ok``: |error| <= atol + rtol *
    |SymPy's value| at every point. ``proof`` sums it up: "proved" (by the e-graph),
    "sympy" (SymPy's simplify found the difference 0) or "numeric only"."""

    index: tuple[int, ...]
    mode: str
    symbolic: str
    max_abs: float
    max_rel: float
    numeric_ok: bool

    @property
    def ok(self) -> bool:
        return self.numeric_ok and self.symbolic in ("proved", "yes", "≈", "skipped")

    @property
    def proof(self) -> str:
        return {"proved": "proved", "yes": "sympy", "≈": "sympy"}.get(self.symbolic, "numeric only")


@dataclass
class CheckReport:
    """Result of ``check_gradient``/``check_hessian``; ``str(report)`` is a table."""

    kind: str  # "gradient" or "Hessian"
    expr: Any
    symbols: list[Any]
    modes: tuple[str, ...]
    reference: Any  # SymPy's derivative (a Matrix)
    results: dict[str, Any]  # mode -> tidu's derivative as a SymPy Matrix
    points: list[tuple[float, ...]]
    entries: list[EntryCheck] = field(default_factory=list)
    rtol: float = 1e-9
    atol: float = 1e-12

    @property
    def ok(self) -> bool:
        return all(e.ok for e in self.entries)

    @property
    def failures(self) -> list[EntryCheck]:
        return [e for e in self.entries if not e.ok]

    def label(self, index: tuple[int, ...]) -> str:
        names = ",".join(str(self.symbols[i]) for i in index)
        return f"{'H' if self.kind == 'Hessian' else 'g'}[{names}]"

    def table(self) -> str:
        head = ("entry", "mode", "symbolic", "max abs err", "max rel err", "")
        rows = [head] + [
            (self.label(e.index), e.mode, e.symbolic if e.symbolic == "proved" else f"sympy: {e.symbolic}",
             f"{e.max_abs:.2e}", f"{e.max_rel:.2e}", "ok" if e.ok else "FAIL")
            for e in self.entries
        ]
        widths = [max(len(r[c]) for r in rows) for c in range(len(head))]
        lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
                 for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        esc = html.escape
        head = "".join(f"<th>{h}</th>" for h in ("entry", "mode", "symbolic", "max abs err", "max rel err", ""))
        rows = "".join(
            f"<tr><td>{esc(self.label(e.index))}</td><td>{esc(e.mode)}</td>"
            f"<td>{esc(e.symbolic if e.symbolic == 'proved' else 'sympy: ' + e.symbolic)}</td>"
            f"<td>{e.max_abs:.2e}</td><td>{e.max_rel:.2e}</td>"
            f"<td style=\"color:{'green' if e.ok else 'red'}\">{'ok' if e.ok else 'FAIL'}</td></tr>"
            for e in self.entries)
        title = esc(str(self).splitlines()[0])
        verdict = esc(str(self).splitlines()[-1])
        return (f"<p>{title}</p><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
                f"<p><b>{verdict}</b></p>")

    def __str__(self) -> str:
        syms = ", ".join(map(str, self.symbols))
        pts = "; ".join("(" + ", ".join(f"{v:.6g}" for v in p) + ")" for p in self.points)
        bad = len(self.failures)
        proved = sum(e.symbolic == "proved" for e in self.entries)
        verdict = (f"PASS: all {len(self.entries)} entries agree with SymPy ({proved} proved equal "
                   "in the e-graph)" if not bad else
                   f"FAIL: {bad} of {len(self.entries)} entries disagree with SymPy")
        return (f"{self.kind} check of {self.expr} in ({syms}), modes {' '.join(self.modes)}\n"
                f"points: {pts}\n{self.table()}\n{verdict}")


def _chop(e: sympy.Expr, tol: float = 1e-12) -> sympy.Expr:
    small = {f: 0 for f in e.atoms(sympy.Float) if abs(f) < tol}
    return e.xreplace(small) if small else e


_TRUTH = {"<": lambda s: s < 0, "<=": lambda s: s <= 0, ">": lambda s: s > 0,
          ">=": lambda s: s >= 0, "==": lambda s: s == 0, "!=": lambda s: s != 0}


def _zero_on_every_side(d: sympy.Expr, max_kinks: int = 4) -> bool:
    """Whether a piecewise ``d`` is 0 for every sign of the differences its conditions
    compare (x < y, Eq(x, y), x > y, ...): each combination picks branches, which must
    simplify to 0. Combinations are not checked for consistency (conservative)."""
    rels = [r for r in d.atoms(sympy.core.relational.Relational) if r.rel_op in _TRUTH]
    diffs: dict[sympy.Expr, None] = {}
    orient = []
    for r in rels:
        a = r.lhs - r.rhs
        flip = a.could_extract_minus_sign()
        diffs.setdefault(-a if flip else a, None)
        orient.append((r, -a if flip else a, -1 if flip else 1))
    keys = list(diffs)
    if len(keys) > max_kinks:
        return False
    for signs in itertools.product((-1, 0, 1), repeat=len(keys)):
        sign_of = dict(zip(keys, signs, strict=True))
        truth = {r: sympy.true if _TRUTH[r.rel_op](sign_of[k] * f) else sympy.false
                 for r, k, f in orient}
        side = d.xreplace(truth)
        if side != 0 and sympy.simplify(side) != 0:
            return False
    return True


def symbolic_difference(a: Any, b: Any) -> str:
    """"yes" if ``a - b`` simplifies to 0 (piecewise: on every side of its kinks), "≈"
    if it does once float constants are evaluated and rounding residue dropped, "?" if
    SymPy cannot decide, else "no"."""
    d = a - b
    if d == 0:
        return "yes"
    if d.has(sympy.Heaviside, sympy.Max, sympy.Min, sympy.Abs, sympy.sign, sympy.Piecewise):
        d = sympy.piecewise_fold(d.rewrite(sympy.Piecewise))
        if d.has(sympy.Piecewise) and _zero_on_every_side(d):  # before simplify: cheaper
            return "yes"
    d = sympy.simplify(d)
    if d == 0:
        return "yes"
    if sympy.simplify(_chop(sympy.expand(d.evalf()))) == 0:
        return "≈"
    same = d.equals(0)
    return "yes" if same is True else ("?" if same is None else "no")


def pointwise(e: Any) -> Any:
    """``e`` with SymPy's distributional terms (DiracDelta and its derivatives) dropped:
    tidu differentiates pointwise, where the classical derivative exists."""
    deltas = e.atoms(sympy.DiracDelta)
    return e.xreplace({t: 0 for t in deltas}) if deltas else e


def _evaluate(e: Any, subs: dict[Any, float]) -> complex | None:
    """SymPy's value at a point (30 digits); None where it is an unsigned infinity
    (``zoo``, as for 1/0), nan where it is undefined."""
    try:
        v = e.evalf(30, subs=subs)
    except (ArithmeticError, TypeError, ValueError):  # mpmath divides by 0 at poles
        v = e.xreplace({k: number(x) for k, x in subs.items()}).evalf(30)
    if v.has(sympy.zoo):
        return None
    try:
        return complex(v)
    except TypeError:  # nan, or an expression SymPy cannot evaluate
        return complex("nan")


def _numeric(values: list[complex], refs: list[complex | None], rtol: float, atol: float
             ) -> tuple[float, float, bool]:
    """(max abs error, max rel error, all within atol + rtol*|ref|); nan matches nan,
    inf matches the same inf, any infinity matches an unsigned one (ref None)."""
    max_abs = max_rel = 0.0
    ok = True
    for v, r in zip(values, refs, strict=True):
        if r is None:
            err = 0.0 if math.isinf(abs(v)) else math.inf
        elif math.isnan(abs(v)) or math.isnan(abs(r)):
            err = 0.0 if math.isnan(abs(v)) and math.isnan(abs(r)) else math.inf
        else:
            err = 0.0 if v == r else abs(v - r)
        scale = abs(r) if r is not None and math.isfinite(abs(r)) else 0.0
        max_abs = max(max_abs, err)
        max_rel = max(max_rel, err / scale if scale else err)
        ok = ok and err <= atol + rtol * scale
    return max_abs, max_rel, ok


def _as_expr_and_symbols(expr: Any, symbols: Sequence[Any] | str) -> tuple[Any, list[Any]]:
    if isinstance(symbols, str):
        symbols = [s.strip() for s in symbols.split(",") if s.strip()]
    syms = [sympy.Symbol(s, real=True) if isinstance(s, str) else s for s in symbols]
    if isinstance(expr, str):  # parsed by tidu.sympy.expr, never by sympify
        expr = expr_to_sympy(parse(expr, [str(s) for s in syms]), {str(s): s for s in syms})
    return expr, syms


def _random_points(n: int, count: int, seed: int) -> list[tuple[float, ...]]:
    rng = np.random.default_rng(seed)
    return [tuple(float(v) for v in rng.uniform(0.3, 1.7, n)) for _ in range(count)]


def _check(kind: str, expr: Any, symbols: Any, points: Any, modes: Sequence[str],
           symbolic: bool, seed: int, rtol: float, atol: float) -> CheckReport:
    expr, syms = _as_expr_and_symbols(expr, symbols)
    n = len(syms)
    if kind == "Hessian":
        reference = sympy.hessian(expr, syms)
        index = [(i, j) for i in range(n) for j in range(n)]
    else:
        reference = sympy.Matrix([sympy.diff(expr, s) for s in syms])
        index = [(i,) for i in range(n)]
    reference = pointwise(reference)
    flat_ref = list(reference)  # row-major, aligned with index and with tidu's outputs
    pts = _random_points(n, 3, seed) if points is None else [
        tuple(float(v) for v in p) for p in points]
    f = bridge.from_sympy(expr, syms)
    try:  # SymPy's entries as tidu functions, for proofs in the e-graph
        refs_fn: list[Callable[..., Any]] | None = [bridge.from_sympy(r, syms) for r in flat_ref]
    except (TypeError, ValueError):  # a function tidu cannot build (Heaviside...): no proofs
        refs_fn = None
    report = CheckReport(kind, expr, syms, tuple(modes), reference, {}, pts, rtol=rtol, atol=atol)
    refs = [[_evaluate(r, dict(zip(syms, p, strict=True))) for p in pts] for r in flat_ref]
    cache: dict[tuple[Any, Any], str] = {}
    for mode in modes:
        deriv = derivative_fn(f, n, kind, mode)
        values = [[complex(v) for v in flat_outputs(deriv(*p))] for p in pts]
        got = bridge.to_sympy(make_graph(deriv, pts[0]), syms) if symbolic else None
        proved = _proved(deriv, refs_fn, pts[0]) if symbolic and refs_fn else [False] * len(index)
        if got is not None:
            report.results[mode] = sympy.Matrix(*reference.shape, got)
        for k, ix in enumerate(index):
            status = "skipped"
            if proved[k]:
                status = "proved"
            elif got is not None:
                pair = (got[k], flat_ref[k])
                if pair not in cache:
                    cache[pair] = symbolic_difference(*pair)
                status = cache[pair]
            err = _numeric([v[k] for v in values], refs[k], rtol, atol)
            report.entries.append(EntryCheck(ix, mode, status, *err))
    return report


def _proved(deriv: Callable[..., Any], refs: list[Callable[..., Any]], point: Sequence[float]) -> list[bool]:
    """Per entry: tidu's derivative and SymPy's proved equal in the e-graph."""

    def reference(*args: Any) -> list[Any]:
        return [tnp.asarray(r(*args)) * tnp.ones_like(args[0]) for r in refs]

    proof = prove_equal(lambda *a: flat_outputs(deriv(*a)), reference, *[np.float64(v) for v in point])
    return proof.proved if not proof.reason else [False] * len(refs)


def check_hessian(
    expr: Any,
    symbols: Sequence[Any] | str,
    points: Sequence[Sequence[float]] | None = None,
    modes: Sequence[str] = HESSIAN_MODES,
    *,
    symbolic: bool = True,
    seed: int = 0,
    rtol: float = 1e-9,
    atol: float = 1e-12,
) -> CheckReport:
    """tidu's Hessian of ``expr`` (SymPy, or text parsed by ``tidu.sympy.expr``) in each mode
    against ``sympy.hessian``: symbolically (first a proof in the e-graph that tidu's
    entry equals SymPy's, with the real rules; failing that, tidu's entry through
    ``to_sympy`` minus SymPy's must simplify to 0) and at ``points`` (default: 3 random points in
    (0.3, 1.7)^n from ``seed``). ``report.ok`` says whether every entry agrees."""
    return _check("Hessian", expr, symbols, points, modes, symbolic, seed, rtol, atol)


def check_gradient(
    expr: Any,
    symbols: Sequence[Any] | str,
    points: Sequence[Sequence[float]] | None = None,
    modes: Sequence[str] = GRADIENT_MODES,
    *,
    symbolic: bool = True,
    seed: int = 0,
    rtol: float = 1e-9,
    atol: float = 1e-12,
) -> CheckReport:
    """Like ``check_hessian`` for the gradient, forward ("F") and reverse ("R") mode."""
    return _check("gradient", expr, symbols, points, modes, symbolic, seed, rtol, atol)


# --- the transforms used by the checks ------------------------------------------


def derivative_fn(f: Callable[..., Any], n: int, kind: str, mode: str) -> Callable[..., Any]:
    """tidu's gradient ("F": jacfwd, "R": jacrev) or Hessian (FoF, FoR, RoF, RoR) of a
    scalar function of ``n`` scalar arguments, with respect to all of them."""
    argnums = tuple(range(n))
    if kind == "Hessian":
        if mode not in HESSIAN_MODES:
            raise ValueError(f"unknown Hessian mode {mode!r}; use {', '.join(HESSIAN_MODES)}")
        return jacobians.hessian(f, argnums=argnums, mode=mode)
    if mode not in GRADIENT_MODES:
        raise ValueError(f"unknown gradient mode {mode!r}; use F or R")
    return jacobians.jacrev(f, argnums=argnums) if mode == "R" else jacobians.jacfwd(f, argnums=argnums)


def make_graph(fn: Callable[..., Any], args: Sequence[float], semantics: str = "real",
               assume: dict[str, str] | None = None) -> MaterializedGraph:
    """The simplified graph of ``fn`` at float64 scalar arguments (inputs in order),
    simplified with the ``real`` rules by default (symbolic work: as computer algebra);
    ``assume``: what is known of inputs by name ({"x": "positive"})."""
    return inspection.make_graph(fn, semantics=semantics, assume=assume)(*[np.float64(a) for a in args]).graph


def flat_outputs(tree: Any) -> list[Any]:
    """The leaves of a result pytree, in order (row-major for a nested Hessian)."""
    return flatten(tree)[0]
