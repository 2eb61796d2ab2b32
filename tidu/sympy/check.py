"""Checks of tidu's derivatives against SymPy's (re-exported by ``tidu.sympy``):
``check_gradient`` / ``check_hessian`` compare tidu's derivative in each mode with
``sympy.diff`` / ``sympy.hessian``, symbolically and at points; see ``CheckReport``.
``check_derivative`` checks one derivative of any order. ``pointwise`` drops SymPy's
distributional terms; the symbolic comparison itself is ``tidu.sympy.symbolic``;
``derivative_fn``, ``make_graph`` and ``flat_outputs`` are the tidu transforms the checks
run.
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import mpmath
import numpy as np
import sympy
from sympy.core.evalf import fastlog

import tidu.numpy as tnp
from tidu.core.graph import MaterializedGraph
from tidu.core.pytree import flatten
from tidu.sympy import bridge
from tidu.sympy.bridge import number
from tidu.sympy.expr import name_parameters, parse, to_function
from tidu.sympy.expr import to_sympy as expr_to_sympy
from tidu.sympy.symbolic import SymbolicStep
from tidu.transforms import inspection, jacobians
from tidu.transforms.elementary import ElementaryDerivative
from tidu.transforms.prove import prove_equal

# ---------------------------------------------------------------------------
# checking tidu's derivatives against SymPy's
# ---------------------------------------------------------------------------

HESSIAN_MODES = ("FoF", "FoR", "RoF", "RoR")
GRADIENT_MODES = ("F", "R")
# modes that take every order at once (Taylor mode, the differential ring): labels only
WHOLE_ORDER_MODES = ("T", "E")
# Seconds for SymPy's comparison of one entry (4 times that for all): 5, or what the
# TIDU_SYMPY_TIMEOUT environment variable says (the test suite sets a hang guard there, so
# that a verdict never depends on how busy the machine is).
DEFAULT_TIMEOUT = float(os.environ.get("TIDU_SYMPY_TIMEOUT", "5"))

# what ``assume`` may say of a variable, as SymPy assumptions (the variables are real)
SYMPY_ASSUMPTIONS = {"positive": {"positive": True}, "nonneg": {"nonnegative": True},
                     "nonzero": {"nonzero": True}}


@dataclass
class EntryCheck:
    """One derivative entry in one mode: ``symbolic`` is "proved" (tidu's entry and
    SymPy's were proved equal in the e-graph, with the real rules), else SymPy's
    verdict on the difference: "yes" (simplifies to 0), "≈" (0 up to float rounding of
    constants), "no", "?" (SymPy could not decide), "timeout" (the symbolic step's time
    ran out) or "skipped"; ``where``: where or why it is inconclusive ("at x = 0",
    "timed out after 5 s"); ``max_abs``/``max_rel`` are the largest numeric errors over
    the points (relative to |SymPy's value|, absolute where that is 0); ``numeric_ok``:
    |error| <= atol + rtol * |SymPy's value| at every point.

    ``outcome`` is "proved" (symbolically equal and numerically agreeing), "agrees
    numerically" (every numeric check agrees, the symbolic step is inconclusive) or
    "differs" (a numeric disagreement); only "differs" fails (``ok``). ``unevaluated``
    counts the points (of ``points``) where SymPy's value cannot be computed (mpmath
    overflows or would need a precision past ``MAX_ARGUMENT_BITS``): they are not
    compared, and an entry with no point compared and no symbolic proof is "undecided"
    (not a failure; its errors are nan). ``proof`` says how it was proved: "proved" (by
    the e-graph), "sympy" (SymPy's simplify found the difference 0) or "numeric only"."""

    index: tuple[int, ...]
    mode: str
    symbolic: str
    max_abs: float
    max_rel: float
    numeric_ok: bool
    where: str = ""
    unevaluated: int = 0  # points where SymPy's value could not be computed (not compared)
    points: int = 0  # points compared or not (0: not counted)

    @property
    def outcome(self) -> str:
        if not self.numeric_ok:
            return "differs"
        if self.symbolic in ("proved", "yes", "≈"):
            return "proved"
        return "undecided" if self.points and self.unevaluated >= self.points else "agrees numerically"

    @property
    def ok(self) -> bool:
        return self.numeric_ok

    @property
    def proof(self) -> str:
        return {"proved": "proved", "yes": "sympy", "≈": "sympy"}.get(self.symbolic, "numeric only")

    @property
    def symbolic_text(self) -> str:
        """The symbolic column of the report: "proved", "sympy: ? at x = 0", "timed out"..."""
        if self.symbolic in ("proved", "skipped"):
            return self.symbolic
        if self.symbolic == "timeout":
            return "timed out"
        return f"sympy: {self.symbolic}" + (f" {self.where}" if self.where else "")

    @property
    def inconclusive(self) -> str:
        """Why the symbolic step did not prove the entry ("" when it did)."""
        if self.symbolic in ("proved", "yes", "≈"):
            return ""
        if self.symbolic == "timeout":
            return self.where or "timed out"
        if self.symbolic == "skipped":
            return "not run"
        if self.symbolic == "no":
            return "inconclusive (SymPy finds a nonzero difference, at none of the points)"
        return f"inconclusive {self.where}" if self.where else "inconclusive (SymPy cannot decide)"

    @property
    def result_text(self) -> str:
        """The last column: "ok" (proved), "agrees numerically", "undecided" or "FAIL"
        (differs)."""
        return {"proved": "ok", "differs": "FAIL"}.get(self.outcome, self.outcome)


@dataclass
class CheckReport:
    """Result of ``check_gradient``/``check_hessian``; ``str(report)`` is a table and a
    verdict. ``outcome`` is "differs" when an entry differs numerically, "proved" when
    every entry is proved, else "agrees numerically"; ``ok`` unless it differs."""

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
    def outcome(self) -> str:
        outcomes = {e.outcome for e in self.entries}
        if "differs" in outcomes:
            return "differs"
        for o in ("undecided", "agrees numerically"):
            if o in outcomes:
                return o
        return "proved"

    @property
    def ok(self) -> bool:
        return self.outcome != "differs"

    @property
    def failures(self) -> list[EntryCheck]:
        return [e for e in self.entries if not e.ok]

    def label(self, index: tuple[int, ...]) -> str:
        if self.kind == "derivative":  # (i,) * order
            x, k = self.symbols[index[0]], len(index)
            return f"d/d{x}" if k == 1 else f"d{k}/d{x}{k}"
        names = ",".join(str(self.symbols[i]) for i in index)
        return f"{'H' if self.kind == 'Hessian' else 'g'}[{names}]"

    def _rows(self) -> list[tuple[str, ...]]:
        return [(self.label(e.index), e.mode, e.symbolic_text, _err_text(e.max_abs), _err_text(e.max_rel),
                 e.result_text) for e in self.entries]

    def table(self) -> str:
        head = ("entry", "mode", "symbolic", "max abs err", "max rel err", "")
        rows = [head, *self._rows()]
        widths = [max(len(r[c]) for r in rows) for c in range(len(head))]
        lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
                 for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def verdict(self) -> str:
        """The last line: PASS (proved, or agrees numerically with where the symbolic
        step is inconclusive), UNDECIDED (an entry neither proved nor compared at any
        point: SymPy cannot evaluate it there) or FAIL (differs)."""
        n = len(self.entries)
        if self.outcome == "differs":
            bad = len(self.failures)
            return (f"FAIL: {bad} of {n} entries disagree with SymPy" if n > 1
                    else "FAIL: the entry disagrees with SymPy")
        unevaluated = [e for e in self.entries if e.unevaluated]
        where = "any" if all(e.unevaluated >= e.points for e in unevaluated) else "some"
        also = (f"; SymPy cannot evaluate {len(unevaluated)} of {n} entries at {where} of the points "
                "(not compared there)" if unevaluated else "")
        if self.outcome == "proved":
            proved = sum(e.symbolic == "proved" for e in self.entries)
            how = (f"{proved} proved equal in the e-graph" if proved == n else
                   f"proved: {proved} equal in the e-graph, {n - proved} by SymPy's simplify")
            return (f"PASS: all {n} entries agree with SymPy ({how}){also}" if n > 1
                    else f"PASS: the entry agrees with SymPy ({how}){also}")
        if self.outcome == "undecided":
            none = sum(e.outcome == "undecided" for e in self.entries)
            count = f"{none} of {n} entries" if n > 1 else "the entry"
            return (f"UNDECIDED: SymPy cannot evaluate {count} numerically at the points (too large for "
                    f"mpmath) and the symbolic step did not prove {'them' if none > 1 else 'it'}; "
                    "nothing differs")
        open_ = [e for e in self.entries if e.outcome == "agrees numerically"]
        why = "; ".join(dict.fromkeys(e.inconclusive for e in open_))
        count = f"{len(open_)} of {n} entries; {n - len(open_)} proved" if n > 1 else "the only entry"
        return f"PASS: agrees numerically, symbolic step {why} ({count}){also}"

    def _repr_html_(self) -> str:
        esc = html.escape
        color = {"ok": "green", "FAIL": "red"}
        head = "".join(f"<th>{h}</th>" for h in ("entry", "mode", "symbolic", "max abs err", "max rel err", ""))
        rows = "".join(
            "<tr>" + "".join(f"<td>{esc(v)}</td>" for v in row[:-1])
            + f"<td style=\"color:{color.get(row[-1], 'darkorange')}\">{esc(row[-1])}</td></tr>"
            for row in self._rows())
        title = esc(str(self).splitlines()[0])
        return (f"<p>{title}</p><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
                f"<p><b>{esc(self.verdict())}</b></p>")

    def __str__(self) -> str:
        syms = ", ".join(map(str, self.symbols))
        pts = "; ".join("(" + ", ".join(f"{v:.6g}" for v in p) + ")" for p in self.points)
        return (f"{self.kind} check of {self.expr} in ({syms}), modes {' '.join(self.modes)}\n"
                f"points: {pts}\n{self.table()}\n{self.verdict()}")


def pointwise(e: Any) -> Any:
    """``e`` with SymPy's distributional terms (DiracDelta and its derivatives) dropped:
    tidu differentiates pointwise, where the classical derivative exists."""
    deltas = e.atoms(sympy.DiracDelta)
    return e.xreplace({t: 0 for t in deltas}) if deltas else e


def _err_text(v: float) -> str:
    return "n/a" if math.isnan(v) else f"{v:.2e}"


class _Unevaluated:
    """SymPy's value at a point that cannot be computed (see ``_evaluate``)."""

    def __repr__(self) -> str:
        return "UNEVALUATED"


UNEVALUATED = _Unevaluated()
# SymPy's evalf of f(a) (exp, sin, a power's exponent...) works at a precision of
# log2|a| bits more; an argument past 2**MAX_ARGUMENT_BITS (exp(exp(exp(exp(1))))) would
# take mpmath minutes before it overflows, so such a value is not computed
MAX_ARGUMENT_BITS = 2**14


def _too_large(e: Any, subs: dict[Any, float]) -> bool:
    """Whether some function's argument or power's exponent in ``e`` is past
    2**MAX_ARGUMENT_BITS in magnitude at the point ``subs``. Inner ones first: an
    argument is evaluated only once those inside it are known to be small."""
    seen: set[Any] = set()
    stack: list[tuple[Any, bool]] = [(e, False)]
    while stack:
        node, done = stack.pop()
        if not done:
            if node.args and node not in seen:
                seen.add(node)
                stack.append((node, True))
                stack.extend((a, False) for a in node.args)
            continue
        if isinstance(node, sympy.Pow):
            args = (node.exp,)
        elif isinstance(node, sympy.Function):
            args = node.args
        else:
            continue
        for a in args:
            if a.is_Symbol or a.is_Rational:
                continue  # a float64 or an exact number: small
            try:
                v = a.evalf(15, subs=subs)
            except (ArithmeticError, TypeError, ValueError, RecursionError):
                continue  # the evaluation proper says what it makes of it
            for part in v.as_real_imag():
                if isinstance(part, sympy.Float) and part and fastlog(part._mpf_) > MAX_ARGUMENT_BITS:
                    return True
    return False


def _evaluate(e: Any, subs: dict[Any, float]) -> complex | _Unevaluated | None:
    """SymPy's value at a point (30 digits); None where it is an unsigned infinity
    (``zoo``, as for 1/0), nan where it is undefined, ``UNEVALUATED`` where it cannot be
    computed (an argument too large for mpmath: ``_too_large``, or its overflow). A
    derivative SymPy leaves unevaluated (of ``zeta`` or ``betainc_regularized`` in a
    parameter, of ``sign(gamma(x))``), alone or at a point (``Subs``), is computed
    numerically (``_numeric_derivative``)."""
    e = _derivatives_at(e, subs)
    if _too_large(e, subs):
        return UNEVALUATED
    try:
        try:
            v = e.evalf(30, subs=subs)
        except OverflowError:  # mpmath's numbers have no room for it
            return UNEVALUATED
        except (ArithmeticError, TypeError, ValueError, AttributeError):
            # mpmath divides by 0 at poles; floor's and ceiling's evalf take SymPy numbers only
            v = e.xreplace({k: number(x) for k, x in subs.items()}).evalf(30)
    except OverflowError:
        return UNEVALUATED
    except RecursionError:  # SymPy's evalf of what it cannot evaluate (Subs of a Derivative)
        return complex("nan")
    if (v.has(sympy.zoo) or v.has(sympy.oo) or v.has(-sympy.oo)) and _undefined_exactly(e, subs):
        # evalf's floats give 0 * log(0) as -inf (x**2 log(x) at 0, whose limit is 0): SymPy's
        # exact arithmetic says the formula is undefined there (0 * zoo is nan)
        return complex("nan")
    if v.has(sympy.zoo):
        return None
    try:
        return complex(v)
    except TypeError:  # nan, or an expression SymPy cannot evaluate
        return complex("nan")


def _undefined_exactly(e: Any, subs: dict[Any, float]) -> bool:
    """Whether ``e`` is nan in SymPy's exact arithmetic at the point (its floats as the
    rationals they are)."""
    exact = {k: sympy.Rational(x) if math.isfinite(x) else (sympy.oo if x > 0 else -sympy.oo)
             for k, x in subs.items() if isinstance(x, float | int) and not math.isnan(x)}
    if len(exact) != len(subs):
        return False
    try:
        return e.xreplace(exact) is sympy.nan
    except (ArithmeticError, TypeError, ValueError, AttributeError, RecursionError):
        return False


def _derivatives_at(e: Any, subs: dict[Any, float]) -> Any:
    """``e`` with its unevaluated ``Subs(Derivative(...), ...)`` and ``Derivative`` parts
    (those without another inside) replaced by their values at the point ``subs``."""
    if not e.has(sympy.Derivative):
        return e
    values = {}
    for s in e.atoms(sympy.Subs):
        if isinstance(s.expr, sympy.Derivative) and not s.expr.expr.has(sympy.Derivative, sympy.Subs):
            at = [_evaluate(p, subs) for p in s.point]
            if all(isinstance(v, complex) and v.imag == 0 and math.isfinite(v.real) for v in at):
                point = {**subs, **{var: v.real for var, v in zip(s.variables, at, strict=True)}}  # type: ignore[union-attr]
                values[s] = _numeric_derivative(s.expr, point)
    e = e.xreplace(values)
    return e.xreplace({d: _numeric_derivative(d, subs) for d in e.atoms(sympy.Derivative)
                       if not d.expr.has(sympy.Derivative, sympy.Subs)})


def _numeric_derivative(d: Any, subs: dict[Any, float]) -> Any:
    """The value of SymPy's unevaluated ``Derivative`` ``d`` at the point ``subs`` (a
    SymPy number): mpmath's numerical differentiation at 40 digits of the expression as
    SymPy evaluates it (``evalf``: its lambdified forms are not all right, ``betainc``'s
    drops the regularization); ``d`` itself where that fails (then no number is found)."""
    wrt = [v for v, _ in d.variable_count]
    if len(set(wrt)) != len(wrt) or any(v not in subs for v in wrt):
        return d
    orders = [int(k) for _, k in d.variable_count]
    expr = d.expr.xreplace({k: number(x) for k, x in subs.items() if k not in wrt})

    def f(*args: Any) -> Any:  # at mpmath's working precision: its differences take small steps
        dps = mpmath.mp.dps + 5
        v = expr.xreplace({w: sympy.Float(a, dps) for w, a in zip(wrt, args, strict=True)}).evalf(dps)
        re, im = v.as_real_imag()
        return mpmath.mpc(re, im) if im != 0 else mpmath.mpf(re)

    try:
        with mpmath.workdps(40):
            v = mpmath.diff(f, [mpmath.mpf(subs[s]) for s in wrt], orders)
        if isinstance(v, mpmath.mpc):
            return sympy.Float(v.real, 30) + sympy.I * sympy.Float(v.imag, 30)
        return sympy.Float(v, 30)
    except Exception:  # noqa: BLE001 (what SymPy cannot evaluate: no number, as before)
        return d


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


def real_symbols(names: Sequence[str], assume: dict[str, str] | None = None) -> list[Any]:
    """Real SymPy symbols named ``names``, each with the assumptions ``assume`` gives it
    ({"x": "positive"}: ``Symbol("x", real=True, positive=True)``)."""
    assume = assume or {}
    return [sympy.Symbol(n, real=True, **SYMPY_ASSUMPTIONS.get(assume.get(n, ""), {})) for n in names]


def _prepare(expr: Any, symbols: Sequence[Any] | str, assume: dict[str, str] | None
             ) -> tuple[Any, list[Any], dict[str, str], Callable[[], Callable[..., Any]]]:
    """The expression and its symbols, each with the SymPy assumptions ``assume`` gives
    it (a Symbol passed in is replaced by one that has them), ``assume`` completed
    from the Symbols' own assumptions (Symbol('x', positive=True): {"x": "positive"})
    for the e-graph, and what makes the function tidu differentiates: ``from_sympy`` of
    the expression, or for text where SymPy's form holds a function no primitive means
    alone (the ``gamma`` of ``lgamma``'s meaning, ``besseli`` of ``i0e``'s), the function
    of what was typed (``tidu.sympy.expr.to_function``, as ``tidu diff`` computes it)."""
    if isinstance(symbols, str):
        symbols = [s.strip() for s in symbols.split(",") if s.strip()]
    names = [str(s) for s in symbols]
    assume = dict(assume or {})
    for name, what in assume.items():
        if name not in names:
            raise ValueError(f"assume: unknown variable {name!r} (variables: {', '.join(names)})")
        if what not in SYMPY_ASSUMPTIONS:
            raise ValueError(f"assume: {name}={what!r}; use {', '.join(SYMPY_ASSUMPTIONS)}")
    syms, renamed = [], {}
    for s in symbols:
        name = str(s)
        if isinstance(s, str) or name in assume:
            new = real_symbols([name], assume)[0]
            if not isinstance(s, str):
                renamed[s] = new
            s = new
        elif s.is_positive:
            assume[name] = "positive"
        elif s.is_nonnegative:
            assume[name] = "nonneg"
        elif s.is_zero is False and s.is_real:
            assume[name] = "nonzero"
        syms.append(s)
    if isinstance(expr, str):  # parsed by tidu.sympy.expr, never by sympify
        node = parse(expr, names)
        expr = expr_to_sympy(node, dict(zip(names, syms, strict=True)))

        def function() -> Callable[..., Any]:
            try:
                return bridge.from_sympy(expr, syms)
            except TypeError:  # a SymPy function tidu cannot build: the primitive as typed
                return to_function(node, names)

        return expr, syms, assume, function
    if renamed:
        expr = expr.xreplace(renamed)
    return expr, syms, assume, lambda: bridge.from_sympy(expr, syms)


def _random_points(n: int, count: int, seed: int) -> list[tuple[float, ...]]:
    rng = np.random.default_rng(seed)
    return [tuple(float(v) for v in rng.uniform(0.3, 1.7, n)) for _ in range(count)]


@dataclass
class _Settings:
    symbolic: bool
    seed: int
    rtol: float
    atol: float
    assume: dict[str, str]
    timeout: float | None


def _check(kind: str, expr: Any, syms: list[Any], reference: Any, index: list[tuple[int, ...]],
           points: Any, modes: Sequence[str], derivative: Callable[[str], Callable[..., Any]],
           opts: _Settings, numeric: Callable[..., Any] | None = None) -> CheckReport:
    n = len(syms)
    names = [str(s) for s in syms]
    reference = pointwise(reference)
    flat_ref = list(reference)  # row-major, aligned with index and with tidu's outputs
    pts = _random_points(n, 3, opts.seed) if points is None else [
        tuple(float(v) for v in p) for p in points]
    try:  # SymPy's entries as tidu functions, for proofs in the e-graph
        refs_fn: list[Callable[..., Any]] | None = [bridge.from_sympy(r, syms) for r in flat_ref]
    except (TypeError, ValueError):  # a function tidu cannot build (Heaviside...): no proofs
        refs_fn = None
    report = CheckReport(kind, expr, syms, tuple(modes), reference, {}, pts, rtol=opts.rtol, atol=opts.atol)
    refs = [[_evaluate(r, dict(zip(syms, p, strict=True))) for p in pts] for r in flat_ref]
    cache: dict[tuple[Any, Any], tuple[str, str]] = {}
    with SymbolicStep(opts.timeout) as step:
        for mode in modes:
            built = derivative(mode)  # wrapped: naming its inputs must not change the caller's function
            deriv = name_parameters(lambda *a, _fn=built: _fn(*a), names, "derivative")
            evaluated = deriv if numeric is None else numeric
            values = [[complex(v) for v in flat_outputs(evaluated(*p))] for p in pts]
            if not opts.symbolic:
                got = None
            elif isinstance(built, ElementaryDerivative):  # its exact form, not the float graph's
                named, expr = built.to_sympy(syms)
                got = [expr.subs(list(reversed(named)))]
            else:
                got = bridge.to_sympy(make_graph(deriv, pts[0], assume=opts.assume), syms)
            proved = (_proved(deriv, refs_fn, pts[0], names, opts.assume) if opts.symbolic and refs_fn
                      else [False] * len(index))
            if got is not None:
                report.results[mode] = sympy.Matrix(*reference.shape, got)
            for k, ix in enumerate(index):
                status = ("skipped", "")
                if proved[k]:
                    status = ("proved", "")
                elif got is not None:
                    pair = (got[k], flat_ref[k])
                    if pair not in cache:
                        cache[pair] = step(*pair)
                    status = cache[pair]
                # compared where SymPy's value is known: not where it cannot be computed, nor where
                # its formula is undefined (nan: 0/0, 0 * log(0), as x**y * y / x at x = 0) while
                # tidu's value is a number (the function's limit there is not SymPy's to tell)
                pairs = [(v[k], r) for v, r in zip(values, refs[k], strict=True) if r is not UNEVALUATED
                         and not (r is not None and math.isnan(abs(r)) and math.isfinite(abs(v[k])))]
                unevaluated = len(pts) - len(pairs)
                err = (_numeric([v for v, _ in pairs], [r for _, r in pairs], opts.rtol, opts.atol) if pairs
                       else (math.nan, math.nan, True))
                report.entries.append(EntryCheck(ix, mode, status[0], *err, where=status[1],
                                                 unevaluated=unevaluated, points=len(pts)))
    return report


def _proved(deriv: Callable[..., Any], refs: list[Callable[..., Any]], point: Sequence[float],
            names: list[str], assume: dict[str, str]) -> list[bool]:
    """Per entry: tidu's derivative and SymPy's proved equal in the e-graph."""

    def reference(*args: Any) -> list[Any]:
        return [tnp.asarray(r(*args)) * tnp.ones_like(args[0]) for r in refs]

    proof = prove_equal(name_parameters(lambda *a: flat_outputs(deriv(*a)), names, "derivative"),
                        name_parameters(reference, names, "reference"),
                        *[np.float64(v) for v in point], assume=assume or None)
    return proof.proved if not proof.reason else [False] * len(refs)


def _settings(symbolic: bool, seed: int, rtol: float, atol: float, assume: dict[str, str],
              timeout: float | None) -> _Settings:
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be positive seconds or None, got {timeout!r}")
    return _Settings(symbolic, seed, rtol, atol, assume, timeout)


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
    assume: dict[str, str] | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> CheckReport:
    """tidu's Hessian of ``expr`` (SymPy, or text parsed by ``tidu.sympy.expr``) in each
    mode against ``sympy.hessian``: symbolically (first a proof in the e-graph that tidu's
    entry equals SymPy's, with the real rules; failing that, tidu's entry through
    ``to_sympy`` minus SymPy's must simplify to 0) and at ``points`` (default: 3 random
    points in (0.3, 1.7)^n from ``seed``). ``report.outcome`` is "proved", "agrees
    numerically" (every numeric check agrees, the symbolic step is inconclusive
    somewhere, and the report says where) or "differs"; ``report.ok`` unless it differs.

    ``assume`` states what is known of variables by name ({"x": "positive"}; "nonneg",
    "nonzero"): SymPy's symbols get the matching assumptions and the e-graph's real
    rewrites use it for their domain guards (a Symbol passed with such an assumption
    counts too). ``timeout`` bounds SymPy's part of the symbolic step: seconds for one
    entry's comparison, and 4 times that for all entries together (None: unbounded, in
    this process). An entry past it is inconclusive ("timed out after 5 s"; past the
    total: "stopped: the 20 s for all entries were spent") and its numeric verdict
    stands. SymPy then runs in a worker process, killed at the deadline
    (``tidu.sympy.symbolic.SymbolicStep``)."""
    expr, syms, assume, function = _prepare(expr, symbols, assume)
    n, f = len(syms), function()
    return _check("Hessian", expr, syms, sympy.hessian(expr, syms), [(i, j) for i in range(n) for j in range(n)],
                  points, modes, lambda mode: derivative_fn(f, n, "Hessian", mode),
                  _settings(symbolic, seed, rtol, atol, assume, timeout))


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
    assume: dict[str, str] | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> CheckReport:
    """Like ``check_hessian`` for the gradient, forward ("F") and reverse ("R") mode;
    ``assume`` and ``timeout`` as there."""
    expr, syms, assume, function = _prepare(expr, symbols, assume)
    n, f = len(syms), function()
    return _check("gradient", expr, syms, sympy.Matrix([sympy.diff(expr, s) for s in syms]),
                  [(i,) for i in range(n)], points, modes, lambda mode: derivative_fn(f, n, "gradient", mode),
                  _settings(symbolic, seed, rtol, atol, assume, timeout))


def check_derivative(
    expr: Any,
    symbols: Sequence[Any] | str,
    wrt: str,
    order: int = 1,
    points: Sequence[Sequence[float]] | None = None,
    modes: Sequence[str] | None = None,
    *,
    derivative: Callable[..., Any] | None = None,
    numeric: Callable[..., Any] | None = None,
    symbolic: bool = True,
    seed: int = 0,
    rtol: float = 1e-9,
    atol: float = 1e-12,
    assume: dict[str, str] | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> CheckReport:
    """tidu's ``order``-th derivative of ``expr`` in the variable ``wrt`` against
    ``sympy.diff``, as ``check_hessian`` checks a Hessian. A mode is one letter per
    derivative, outermost first ("FoR": jacfwd of jacrev; default "R", "FoR",
    "FoFoR", ...). ``derivative``: tidu's derivative to check instead (a function of
    every variable; its mode is ``modes[0]``), as ``tidu diff --check-sympy`` passes the
    one it printed; ``numeric``: the function whose values are compared, where it is not
    ``derivative`` (the CLI prints a closed form and evaluates in Taylor mode, which does
    not lose digits to cancellation). ``assume`` and ``timeout`` as in ``check_hessian``."""
    expr, syms, assume, function = _prepare(expr, symbols, assume)
    names = [str(s) for s in syms]
    if wrt not in names:
        raise ValueError(f"wrt: {wrt!r} is not a variable (variables: {', '.join(names)})")
    if order < 1:
        raise ValueError(f"order must be at least 1, got {order}")
    modes = tuple(modes or ("o".join(["F"] * (order - 1) + ["R"]),))
    for mode in modes:
        letters = mode.split("o")
        if derivative is not None and mode in WHOLE_ORDER_MODES:  # a label of the given derivative
            continue
        if len(letters) != order or any(c not in GRADIENT_MODES for c in letters):
            raise ValueError(f"mode {mode!r}: one of F or R per derivative, {order} joined by 'o'")
    i = names.index(wrt)
    f = function() if derivative is None else None  # a given derivative needs no function of expr

    def build(mode: str) -> Callable[..., Any]:
        if derivative is not None:
            return derivative
        g = f
        for letter in reversed(mode.split("o")):
            g = jacobians.jacrev(g, argnums=i) if letter == "R" else jacobians.jacfwd(g, argnums=i)
        return g

    return _check("derivative", expr, syms, sympy.Matrix([sympy.diff(expr, syms[i], order)]), [(i,) * order],
                  points, modes[:1] if derivative is not None else modes, build,
                  _settings(symbolic, seed, rtol, atol, assume, timeout), numeric)


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
