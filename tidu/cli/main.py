"""The ``tidu`` command line.

    tidu diff EXPR --wrt x [--vars x,y] [--order N] [--mode M] [--emit KIND] [--at x=1,y=2]
              [--check-sympy] [--assume x=positive] [--sympy-timeout S]
    tidu hessian EXPR [--vars x,y] [--mode M] [--check-sympy] [--at x=1,y=2]
              [--assume x=positive] [--sympy-timeout S]
    tidu lower EXPR [--vars x,y] --to stablehlo|numpy|c
    tidu series EXPR --wrt x [--about x0] [--order K] [--at y=2]

EXPR is parsed by ``tidu.sympy.expr`` (``^`` is a power; never Python eval). ``--vars``
defaults to the expression's variables in order of appearance. A mode composes
derivatives outermost first: ``FoR`` is forward over reverse (``F``/``R`` for one
derivative, ``FoFoR`` for a third). Exit status: 0 success (a SymPy check proved, or
agreeing numerically where its symbolic step is inconclusive), 1 a SymPy check that
differs numerically, 2 bad input (one ``tidu: error: ...`` line on stderr), 3 an
internal error (one line; ``TIDU_TRACEBACK=1`` shows the traceback), 141 output closed
early (``| head``).

To add a subcommand: write ``setup(parser)`` and ``run(args) -> int`` and add them to
``COMMANDS``; ``run`` reports bad input by raising ``CliError`` (from ``tidu.cli.errors``,
so a subcommand defined in another module need not import this one).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np
import sympy

from tidu import __version__
from tidu import sympy as tsp
from tidu.checkrules.loading import UnsoundRewriteError, use_rules
from tidu.cli import check_rules
from tidu.cli.errors import CliError
from tidu.core.progress import phase, progress
from tidu.core.resources import LimitError, resource_limits
from tidu.ops.catalog import catalog
from tidu.ops.dsl.ast import RuleSyntaxError
from tidu.sympy.expr import (
    CONSTANTS,
    Call,
    ExprError,
    Node,
    euler_as_e,
    free_variables,
    functions,
    name_parameters,
    parse,
    to_function,
    to_sympy,
    walk,
)
from tidu.transforms.api import jvp
from tidu.transforms.display import aligned_latex, expand
from tidu.transforms.elementary import ElementaryDerivative, NotElementary, elementary_derivative
from tidu.transforms.inspection import graph_function, make_graph
from tidu.transforms.jacobians import jacrev
from tidu.transforms.jet import jet
from tidu.transforms.prove import prove_equal
from tidu.transforms.taylor import format_polynomial, taylor_coefficients


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, no usage dump
        raise CliError(f"{message} (see '{self.prog} --help')")


# --- shared helpers -----------------------------------------------------------


@dataclass
class Problem:
    """A parsed expression with its variables and a tidu-traceable function."""

    text: str
    variables: list[str]
    fn: Callable[..., Any]
    node: Node

    def require_sympy(self) -> None:
        """Bad input (before anything is printed) where SymPy cannot read the expression:
        a function whose primitive has no ``meaning`` in the rule files (``hyp1f1``, a
        rule file's primitive with only a ``numpy`` kernel)."""
        cat, fns = catalog(), functions()
        for n in walk(self.node):
            if isinstance(n, Call) and fns[n.fn][1] in cat:  # not a composition (COMPOSITES: SymPy's own)
                prim = cat.get_primitive(fns[n.fn][1])
                if prim.decl.meaning is None:
                    raise CliError(f"--check-sympy: col {n.col}: {n.fn} has no meaning in the rule files "
                                   f"({prim.loc}), so SymPy cannot differentiate it; leave out --check-sympy")
        to_sympy(self.node)  # ExprError now, not after printing: a constant too large to be exact


def _problem(text: str, vars_opt: str | None) -> Problem:

    declared = None if vars_opt is None else _names(vars_opt, "--vars")
    node = parse(text, declared)
    variables = declared if declared is not None else free_variables(node)
    if not variables:
        raise CliError("the expression has no variables; give some with --vars")
    return Problem(text, variables, to_function(node, variables), node)


def _names(spec: str, option: str) -> list[str]:
    names = [s.strip() for s in spec.split(",")]
    for s in names:
        if not s.isidentifier() or not s.isascii():
            raise CliError(f"{option}: {s!r} is not a variable name (expected e.g. x,y)")
        if s in functions() or s in CONSTANTS:
            kind = "function" if s in functions() else "constant"
            raise CliError(f"{option}: {s} is a {kind}, not a variable name")
    dup = sorted({s for s in names if names.count(s) > 1})
    if dup:
        raise CliError(f"{option}: {', '.join(dup)} listed twice")
    return names


def _split_top(text: str) -> list[str]:
    """Split at commas outside parentheses (``x=max(1,2),y=3``)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += (c == "(") - (c == ")")
        if c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def parse_at(spec: str, variables: Sequence[str]) -> list[float]:
    """``x=1,y=pi/2`` -> values in ``variables`` order; values are constant expressions."""
    values: dict[str, float] = {}
    for part in _split_top(spec):
        name, eq, value = part.partition("=")
        name = name.strip()
        if not eq or not name:
            raise CliError(f"--at: expected name=value, got {part.strip()!r} (e.g. --at x=1,y=2)")
        if name not in variables:
            raise CliError(f"--at: unknown variable {name!r} (variables: {', '.join(variables)})")
        if name in values:
            raise CliError(f"--at: {name} given twice")
        try:
            node = parse(value)
        except ExprError as e:
            raise CliError(f"--at {name}: {e}") from None
        names = free_variables(node)
        if names:
            raise CliError(f"--at {name}={value.strip()}: a value is a number or an expression of constants "
                           f"(e.g. 1.5, pi/4, sqrt(2)), not of the name{'s' * (len(names) > 1)} "
                           f"{', '.join(names)}")
        with np.errstate(all="ignore"):  # log(0) is -inf, sqrt(-1) nan: no warnings
            values[name] = float(to_function(node, [], np)())
    missing = [v for v in variables if v not in values]
    if missing:
        raise CliError(f"--at: no value for {', '.join(missing)}")
    return [values[v] for v in variables]


_ASSUME_OPS = {">0": "positive", ">=0": "nonneg", "!=0": "nonzero"}


def parse_assume(spec: str | None, variables: Sequence[str]) -> dict[str, str]:
    """``x>0,y>=0,z!=0`` (or ``x=positive,y=nonneg,z=nonzero``) -> {"x": "positive",
    "y": "nonneg", "z": "nonzero"}."""
    out: dict[str, str] = {}
    words = set(_ASSUME_OPS.values())
    for part in (spec or "").split(","):
        text = part.replace(" ", "")
        if not text:
            continue
        name, eq, word = text.partition("=")
        if eq and word in words and not name.endswith(("<", ">", "!")):
            what = word
        else:
            op = next((op for op in _ASSUME_OPS if text.endswith(op)), None)
            if op is None:
                raise CliError(f"--assume: expected name>0, name>=0, name!=0 or name=positive|nonneg|nonzero, "
                               f"got {part.strip()!r}")
            name, what = text[: -len(op)], _ASSUME_OPS[op]
        if name not in variables:
            raise CliError(f"--assume: unknown variable {name!r} (variables: {', '.join(variables)})")
        if name in out:
            raise CliError(f"--assume: {name} given twice (give one of positive, nonneg, nonzero)")
        out[name] = what
    return out


_HOLDS = {"positive": (lambda v: v > 0, ">0"), "nonneg": (lambda v: v >= 0, ">=0"),
          "nonzero": (lambda v: v != 0, "!=0")}


def check_assumed(option: str, names: Sequence[str], values: Sequence[float], assume: dict[str, str]) -> None:
    """Bad input where a point given with ``option`` breaks what ``--assume`` says: the
    e-graph and SymPy would simplify with a fact that does not hold there (with ``x > 0``,
    ``exp(log(x))`` is ``x``, whose value at -1 is not ``nan``)."""
    for name, v in zip(names, values, strict=True):
        if name in assume:
            holds, text = _HOLDS[assume[name]]
            if not holds(v):
                raise CliError(f"{option}: {name}={v:.12g} contradicts --assume {name}{text}; "
                               "give a point where the assumption holds")


def parse_mode(mode: str, order: int | None) -> list[str]:
    """``FoR`` -> ['F', 'R'] (outermost first); checks letters and the order. ``T``
    (Taylor mode: every order at once, by ``tidu.jet``) and ``E`` (exactly, in the
    differential ring of the expression's atoms) stand alone -> ['T'], ['E']."""
    if mode in ("T", "E"):
        return [mode]
    letters = mode.split("o")
    if not mode or any(s not in ("F", "R") for s in letters):
        raise CliError(f"unknown mode {mode!r}: use F or R per derivative, joined by 'o' "
                       "(e.g. R, FoR, FoFoR), T (Taylor mode, any order) or E (exact "
                       "differentiation of an elementary expression, any order)")
    if order is not None and len(letters) != order:
        raise CliError(f"mode {mode} has {len(letters)} derivative(s) but --order is {order}")
    return letters


def _fmt(v: Any) -> str:
    v = complex(v)
    re, im = v.real + 0.0, v.imag + 0.0  # -0.0 + 0.0 is 0.0: a zero prints as 0, not -0
    return f"{re:.12g}" if im == 0 else f"{re:.12g}{im:+.12g}j"


def _matrix(rows: list[list[str]], indent: str = "  ") -> str:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return "\n".join(indent + "[ " + "   ".join(s.ljust(w) for s, w in zip(r, widths, strict=True))
                     + " ]" for r in rows)


def _at_text(variables: Sequence[str], values: Sequence[float]) -> str:
    return ", ".join(f"{n}={v:.12g}" for n, v in zip(variables, values, strict=True))


def _shown(e: Any, sympy_simplify: bool) -> str:
    """How an expression is printed: the e-graph's result as is (SymPy only prints it),
    or what ``sympy.simplify`` makes of it when asked (``--sympy-simplify``)."""
    if sympy_simplify:

        e = sympy.simplify(e)
    return str(euler_as_e(e))


def nth_derivative(f: Callable[..., Any], index: int, letters: Sequence[str],
                   example: Sequence[float] | None = None,
                   assume: dict[str, str] | None = None) -> Callable[..., Any]:
    """The derivative of ``f`` with respect to argument ``index``, once per letter
    (outermost first): "R" is ``tidu.jacrev`` (reverse mode: ``tidu.grad`` would take a
    scalar argument's derivative forward), "F" a ``tidu.jvp`` with a unit tangent.
    With an ``example`` point (float64 scalars), each order is simplified in the e-graph
    before the next is taken: nested transforms would carry every unsimplified order and
    grow geometrically (the 20th derivative of exp(x)*sin(x) has ~2^20 terms unsimplified)."""

    def forward(g: Callable[..., Any]) -> Callable[..., Any]:
        def dg(*args: Any) -> Any:
            def along(xi: Any) -> Any:
                return g(*args[:index], xi, *args[index + 1:])

            return jvp(along, (args[index],), (np.float64(1.0),))[1]

        # Keep the variables' names, so graphs name their inputs after them.
        return name_parameters(dg, list(inspect.signature(g).parameters), f"d{g.__name__}")

    names = list(inspect.signature(f).parameters)
    g = f
    for k, letter in enumerate(reversed(letters)):
        g = jacrev(g, argnums=index) if letter == "R" else forward(g)
        if example is not None and k + 1 < len(letters):
            phase(f"order {k + 1} of {len(letters)}")
            g = name_parameters(graph_function(tsp.make_graph(g, example, assume=assume)), names, f"d{k + 1}")
    return g


# From this order on, a univariate derivative without --mode is taken in mode E or T: the
# nested transforms' graph grows geometrically with the order, theirs polynomially.
TAYLOR_FROM = 4
# Mode E's polynomial has about two ops a term; Taylor mode's graph of a product of two
# unrelated factors about ten ops per order (one convolution row of their series). So mode
# E where its polynomial has at most this many terms per order, or where the expression
# multiplies no two values of the variable (Taylor mode too then grows with the square of
# the order); otherwise Taylor mode. Past E_MAX_TERMS terms mode E's exact printing (SymPy
# rationals) costs more than Taylor mode.
E_TERMS_PER_ORDER = 5
E_MAX_TERMS = 1000


def exact_derivative(f: Callable[..., Any], index: int, order: int) -> Callable[..., Any]:
    """Mode E: ``tidu.elementary_derivative`` with the variables' names."""
    try:
        d = elementary_derivative(f, order, index)
    except NotElementary as e:
        raise CliError(f"--mode E: {e}; use --mode T (Taylor mode) for this expression") from None
    return name_parameters(d, list(inspect.signature(f).parameters), f"d{order}")


def high_order_derivative(f: Callable[..., Any], index: int, order: int) -> tuple[Callable[..., Any], str]:
    """The default from ``TAYLOR_FROM`` on: (the derivative, its mode letter), mode E
    where the expression is elementary and its polynomial stays small, else mode T."""
    linear = E_TERMS_PER_ORDER * (order + 1)
    try:  # given up as soon as the polynomial passes what mode E is taken for
        d = elementary_derivative(f, order, index, max_terms=lambda products: linear if products else
                                  max(linear, E_MAX_TERMS))
    except NotElementary:
        return taylor_derivative(f, index, order), "T"
    return name_parameters(d, list(inspect.signature(f).parameters), f"d{order}"), "E"


def taylor_derivative(f: Callable[..., Any], index: int, order: int) -> Callable[..., Any]:
    """The ``order``-th derivative of ``f`` in argument ``index`` by one ``tidu.jet``: the
    last coefficient of the series along the unit direction of that argument."""
    names = list(inspect.signature(f).parameters)

    def dk(*args: Any) -> Any:
        seeds = tuple([np.float64(i == index)] + [np.float64(0.0)] * (order - 1) for i in range(len(args)))
        return jet(f, tuple(args), seeds)[1][order - 1]

    return name_parameters(dk, names, f"d{order}")


def print_named(replacements: Sequence[tuple[Any, Any]], indent: str = "  ") -> None:
    """The shared subexpressions of a result, one ``x0 = ...`` line each (sympy.cse's form)."""
    for sym, e in replacements:
        print(f"{indent}{sym} = {euler_as_e(e)}")


def emit(fn: Callable[..., Any], args: Sequence[float], kind: str) -> str:
    """``fn`` at float64 scalar ``args`` as a graph listing, dot, StableHLO, C or NumPy source."""
    view = make_graph(fn)(*[np.float64(a) for a in args])
    if kind == "graph":
        return view.listing()
    if kind == "dot":
        return view.to_dot()
    if kind == "c":
        try:
            return view.to_c()
        except NotImplementedError as e:  # a primitive without a C lowering (zeta, ndtri): not a bug
            raise CliError(f"C: {str(e).split(';')[0]}; use numpy or stablehlo for this expression") from None
    return view.to_stablehlo() if kind == "stablehlo" else view.to_numpy_source()


# --- diff ---------------------------------------------------------------------


def _setup_diff(p: argparse.ArgumentParser) -> None:
    p.add_argument("expr", help="the expression, e.g. 'x**2*y + sin(x*y)'")
    p.add_argument("--wrt", required=True, help="the variable to differentiate with respect to")
    p.add_argument("--vars", help="all variables, comma separated (default: as they appear)")
    p.add_argument("--order", type=int, help="how many times to differentiate (default 1)")
    p.add_argument("--mode", help="F (forward) or R (reverse) per derivative, e.g. FoR")
    p.add_argument("--emit", default="expr",
                   help="expr (default), latex, graph, dot, stablehlo, numpy or c")
    p.add_argument("--at", help="a point, e.g. x=1,y=2: print the value there")
    p.add_argument("--sympy-simplify", action="store_true",
                   help="print what sympy.simplify makes of the e-graph's expression")
    p.add_argument("--assume", help="what is known of variables, e.g. x>0,y>=0,z!=0 or x=positive "
                   "(for domain-guarded rules such as exp(log(x)) -> x, and SymPy's symbols)")
    _add_check_sympy(p, "compare with sympy.diff, symbolically and numerically")


def _add_check_sympy(p: argparse.ArgumentParser, help_text: str) -> None:
    p.add_argument("--check-sympy", action="store_true", help=help_text)
    p.add_argument("--sympy-timeout", type=float, default=tsp.DEFAULT_TIMEOUT, metavar="SECONDS",
                   help="time for each of --check-sympy's symbolic comparisons (4 times that for all); "
                   "past it an entry is inconclusive and the numeric check decides "
                   f"(default {tsp.DEFAULT_TIMEOUT:g})")


def _sympy_timeout(args: argparse.Namespace) -> float:
    if not args.sympy_timeout > 0:  # also nan
        raise CliError(f"--sympy-timeout must be a positive number of seconds, got {args.sympy_timeout:g}")
    return args.sympy_timeout


def _print_check(report: tsp.CheckReport) -> int:
    """The report after a blank line; exit status 1 only when an entry differs numerically."""
    print()
    print(report)
    return 0 if report.ok else 1


EMITS = ("expr", "latex", "graph", "dot", "stablehlo", "numpy", "c")


def _run_diff(args: argparse.Namespace) -> int:

    prob = _problem(args.expr, args.vars)
    if args.wrt not in prob.variables:
        raise CliError(f"--wrt {args.wrt}: not a variable (variables: {', '.join(prob.variables)})")
    if args.order is not None and args.order < 1:
        raise CliError(f"--order must be at least 1, got {args.order}")
    if args.emit not in EMITS:
        raise CliError(f"--emit: unknown kind {args.emit!r} (use {', '.join(EMITS)})")
    if args.mode is not None and not args.mode.strip():  # (was read as no --mode at all)
        raise CliError("--mode is empty: give F or R per derivative, joined by 'o' (e.g. R, FoR), T or E, "
                       "or leave --mode out")
    order = args.order or (len(args.mode.split("o")) if args.mode and args.mode != "T" else 1)
    default = "auto" if order >= TAYLOR_FROM else "o".join(["F"] * (order - 1) + ["R"])
    letters = ["auto"] if args.mode is None and default == "auto" else parse_mode(args.mode or default, order)
    point = parse_at(args.at, prob.variables) if args.at else None
    example = point or [1.0] * len(prob.variables)
    assume = parse_assume(args.assume, prob.variables)
    if point is not None:
        check_assumed("--at", prob.variables, point, assume)
    timeout = _sympy_timeout(args)
    if args.check_sympy and args.emit not in ("expr", "latex"):
        raise CliError(f"--check-sympy checks the printed expression; it does not go with --emit {args.emit}")
    if args.check_sympy:
        prob.require_sympy()
    index = prob.variables.index(args.wrt)
    evaluate = None  # what computes values and programs, where not the printed derivative
    if letters == ["auto"]:
        fn, mode = high_order_derivative(prob.fn, index, order)
        letters = [mode]
        if mode == "E":  # the closed form is printed; values in Taylor mode, without its cancellation
            evaluate = taylor_derivative(prob.fn, index, order)
    elif letters == ["T"]:
        fn = taylor_derivative(prob.fn, index, order)
    elif letters == ["E"]:
        fn = exact_derivative(prob.fn, index, order)
    else:
        fn = nth_derivative(prob.fn, index, letters, example, assume)
    evaluate = evaluate or fn
    if args.emit not in ("expr", "latex"):
        print(emit(evaluate, example, args.emit).rstrip("\n"))
        return 0
    # read with the assumed symbols: a guard the assumption decides (Eq(x, 0)) is not printed;
    # shared values named (x0 = ...): the tree written out can be exponentially larger
    phase("printing")
    symbols = tsp.real_symbols(prob.variables, assume)
    if isinstance(fn, ElementaryDerivative):  # its own exact form: rational coefficients
        named, expr = fn.to_sympy(symbols)
    else:
        named, (expr,) = tsp.to_sympy(tsp.make_graph(fn, example, assume=assume), symbols, cse=True)
    if args.sympy_simplify:  # asked for: SymPy gets the whole tree
        (expr,), named = expand(named, [expr]), []
    if args.emit == "latex":
        shown = sympy.simplify(expr) if args.sympy_simplify else expr
        label = rf"\frac{{d^{{{order}}}}}{{d {args.wrt}^{{{order}}}}}" if order > 1 else rf"\frac{{d}}{{d {args.wrt}}}"
        print(aligned_latex(named, [(label, shown)]))
        return _check_diff(args, prob, fn, evaluate, letters, point, assume, timeout) if args.check_sympy else 0
    head = f"d{order if order > 1 else ''}/d{args.wrt}{order if order > 1 else ''}"
    print(f"{head} ({prob.text})   [mode {'o'.join(letters)}]")
    print_named(named)
    print(f"  = {_shown(expr, args.sympy_simplify)}")
    if point is not None:
        value = tsp.flat_outputs(evaluate(*point))[0]
        print(f"at {_at_text(prob.variables, point)}:\n  = {_fmt(value)}")
    return _check_diff(args, prob, fn, evaluate, letters, point, assume, timeout) if args.check_sympy else 0


def _check_diff(args: argparse.Namespace, prob: Problem, fn: Callable[..., Any], evaluate: Callable[..., Any],
                letters: list[str], point: list[float] | None, assume: dict[str, str], timeout: float) -> int:
    """The printed derivative (``fn``; its values from ``evaluate``) against ``sympy.diff``:
    ``check_derivative``."""
    phase("checking against SymPy")
    order = len(letters) if letters[0] not in ("T", "E") else args.order
    report = tsp.check_derivative(prob.text, prob.variables, args.wrt, order, [point] if point else None,
                                  ["o".join(letters)], derivative=fn, numeric=evaluate, assume=assume,
                                  timeout=timeout)
    return _print_check(report)


# --- series -------------------------------------------------------------------


def _setup_series(p: argparse.ArgumentParser) -> None:
    p.add_argument("expr", help="the expression, e.g. 'exp(x)*sin(x)'")
    p.add_argument("--wrt", required=True, help="the variable of the series")
    p.add_argument("--about", default="0", help="the point, a constant expression (default 0), e.g. pi/4")
    p.add_argument("--order", type=int, default=5, help="the highest power kept (default 5)")
    p.add_argument("--vars", help="all variables, comma separated (default: as they appear)")
    p.add_argument("--at", help="values of the other variables, e.g. y=2: print the coefficients' values")
    p.add_argument("--assume", help="what is known of the other variables, e.g. y>0")


def _run_series(args: argparse.Namespace) -> int:
    """The Taylor polynomial in --wrt about --about, coefficients exact from the
    simplified graph of one jet, then their values."""
    prob = _problem(args.expr, args.vars)
    if args.wrt not in prob.variables:
        raise CliError(f"--wrt {args.wrt}: not a variable (variables: {', '.join(prob.variables)})")
    if args.order < 0:
        raise CliError(f"--order must be at least 0, got {args.order}")
    index = prob.variables.index(args.wrt)
    others = [v for v in prob.variables if v != args.wrt]
    try:
        about_node = parse(args.about)
    except ExprError as e:
        raise CliError(f"--about: {e}") from None
    if free_variables(about_node):
        raise CliError(f"--about {args.about}: a point is a number or an expression of constants (e.g. 0, pi/4)")
    with np.errstate(all="ignore"):
        x0 = float(to_function(about_node, [], np)())
    if not np.isfinite(x0):
        raise CliError(f"--about {args.about}: the point is {x0:g}; a series is about a finite point")
    try:
        about = to_sympy(about_node, {})
    except ExprError as e:  # 2**(-10**10): finite in float64, too large to be exact
        raise CliError(f"--about: {e}") from None
    rest = parse_at(args.at, others) if args.at else None
    assume = parse_assume(args.assume, prob.variables)
    check_assumed("--about", [args.wrt], [x0], assume)
    if rest is not None:
        check_assumed("--at", others, rest, assume)
    example = [1.0] * len(prob.variables)
    example[index] = x0
    names = list(inspect.signature(prob.fn).parameters)

    def coefficients(*xs: Any) -> tuple[Any, ...]:
        return tuple(taylor_coefficients(prob.fn, tuple(xs), index, args.order))

    graph = tsp.make_graph(name_parameters(coefficients, names, "series"), example, assume=assume)
    symbols = tsp.real_symbols(prob.variables, assume)
    symbols[index] = about  # read the graph at the point itself: exp(0) is 1, sin(pi/4) sqrt(2)/2
    named, exact = tsp.to_sympy(graph, symbols, cse=True)
    if not others:  # numbers: nothing large to name
        exact, named = [sympy.nsimplify(c) if c.is_Float else c for c in expand(named, exact)], []
    for k, c in enumerate(expand(named, exact)):
        if _not_finite(c):
            raise CliError(f"{prob.text} has no Taylor series in {args.wrt} about {args.wrt} = {args.about}: "
                           f"its coefficient c{k} is {euler_as_e(c)} there (a pole, a branch point or a kink)")
    var = sympy.Symbol(args.wrt, real=True)
    print(f"{prob.text} about {args.wrt} = {args.about}, to order {args.order}")
    print_named(named)
    print(f"  = {format_polynomial([euler_as_e(c) for c in exact], var, euler_as_e(about), args.order)}")
    if not others or rest is not None:
        point = list(example)
        for name, v in zip(others, rest or [], strict=True):
            point[prob.variables.index(name)] = v
        values = coefficients(*[np.float64(v) for v in point])
        where = f" at {_at_text(others, rest or [])}" if others else ""
        power = f"{args.wrt}**k" if x0 == 0 else f"({args.wrt} - {args.about})**k"
        print(f"coefficients of {power}{where}:")
        for k, v in enumerate(values):
            print(f"  c{k} = {_fmt(v)}")
    return 0


def _not_finite(c: Any) -> bool:
    """Whether a series coefficient is a number that is infinite or undefined (``zoo``,
    ``-oo``, ``nan``); one that depends on other variables may be finite for some of them."""
    return c in (sympy.zoo, sympy.oo, -sympy.oo, sympy.nan)


# --- hessian ------------------------------------------------------------------


def _setup_hessian(p: argparse.ArgumentParser) -> None:
    p.add_argument("expr", help="the expression, e.g. 'x**2*y + sin(x*y)'")
    p.add_argument("--vars", help="the variables, comma separated (default: as they appear)")
    p.add_argument("--mode", help="FoF, FoR (default), RoF or RoR")
    _add_check_sympy(p, "compare with sympy.hessian, symbolically and numerically")
    p.add_argument("--at", help="a point, e.g. x=1,y=2: print the values there")
    p.add_argument("--sympy-simplify", action="store_true",
                   help="print what sympy.simplify makes of the e-graph's entries")
    p.add_argument("--assume", help="what is known of variables, e.g. x>0,y>=0,z!=0 or x=positive "
                   "(for the e-graph's domain-guarded rules, and SymPy's symbols)")


def _run_hessian(args: argparse.Namespace) -> int:

    prob = _problem(args.expr, args.vars)
    if args.mode is not None and args.mode not in tsp.HESSIAN_MODES:
        raise CliError(f"unknown mode {args.mode!r} (use {', '.join(tsp.HESSIAN_MODES)})")
    mode = args.mode or "FoR"
    point = parse_at(args.at, prob.variables) if args.at else None
    n = len(prob.variables)
    assume = parse_assume(args.assume, prob.variables)
    if point is not None:
        check_assumed("--at", prob.variables, point, assume)
    timeout = _sympy_timeout(args)
    if args.check_sympy:
        prob.require_sympy()
    fn = tsp.derivative_fn(prob.fn, n, "Hessian", mode)
    graph = tsp.make_graph(fn, point or [1.0] * n, assume=assume)
    named, exprs = tsp.to_sympy(graph, tsp.real_symbols(prob.variables, assume), cse=True)  # as in diff
    if args.sympy_simplify:
        exprs, named = expand(named, exprs), []
    # the e-graph proved H[i,j] = H[j,i] when both are the same node: printed once
    same = [[j < i and graph.outputs[i * n + j] == graph.outputs[j * n + i] for j in range(n)]
            for i in range(n)]
    print(f"Hessian of {prob.text} in ({', '.join(prob.variables)})   [mode {mode}]")
    print_named(named)
    print(_matrix([["sym." if same[i][j] else _shown(exprs[i * n + j], args.sympy_simplify)
                    for j in range(n)] for i in range(n)]))
    proved = sum(map(sum, same))
    if proved:
        print(f"  (sym.: the same node as its mirror entry: {proved} symmetric pair"
              f"{'s' if proved > 1 else ''} proved equal by the e-graph)")
    if point is not None:
        values = tsp.flat_outputs(fn(*point))
        print(f"at {_at_text(prob.variables, point)}:")
        print(_matrix([[_fmt(values[i * n + j]) for j in range(n)] for i in range(n)]))
    if not args.check_sympy:
        return 0
    modes = (mode,) if args.mode else tsp.HESSIAN_MODES
    phase("checking against SymPy")
    return _print_check(tsp.check_hessian(prob.text, prob.variables, [point] if point else None, modes,
                                          assume=assume, timeout=timeout))


# --- lower --------------------------------------------------------------------


def _setup_lower(p: argparse.ArgumentParser) -> None:
    p.add_argument("expr", help="the expression, e.g. 'x**2*y + sin(x*y)'")
    p.add_argument("--vars", help="the variables, comma separated (default: as they appear)")
    p.add_argument("--to", required=True, help="stablehlo, numpy or c")


def _run_lower(args: argparse.Namespace) -> int:

    if args.to not in ("stablehlo", "numpy", "c"):
        raise CliError(f"--to: unknown target {args.to!r} (use stablehlo, numpy or c)")
    prob = _problem(args.expr, args.vars)
    print(emit(prob.fn, [1.0] * len(prob.variables), args.to).rstrip("\n"))
    return 0


# --- equal --------------------------------------------------------------------


def _setup_equal(p: argparse.ArgumentParser) -> None:
    p.add_argument("expr1", help="an expression, e.g. 'sin(x)**2 + cos(x)**2'")
    p.add_argument("expr2", help="another expression, e.g. '1'")
    p.add_argument("--vars", help="the variables, comma separated (default: as they appear)")
    p.add_argument("--assume", help="what is known of variables, e.g. x>0,y>=0,z!=0")


def _run_equal(args: argparse.Namespace) -> int:
    """Exit 0 when proved equal, 1 when not proved (which is not a disproof)."""
    def which(k: int, fn: Callable[[str], Any]) -> Any:  # errors say which expression
        try:
            return fn((args.expr1, args.expr2)[k])
        except ExprError as e:
            raise CliError(f"{('first', 'second')[k]} expression: {e}") from None

    if args.vars is None:
        seen = [v for k in (0, 1) for v in which(k, lambda t: free_variables(parse(t, None)))]
        variables = list(dict.fromkeys(seen)) or ["x"]
        vars_opt = ",".join(variables)
    else:
        vars_opt = args.vars
    a, b = which(0, lambda t: _problem(t, vars_opt)), which(1, lambda t: _problem(t, vars_opt))
    example = [np.float64(1.0)] * len(a.variables)

    def broadcast(fn: Callable[..., Any]) -> Callable[..., Any]:  # constants as values of x
        return name_parameters(lambda *v: fn(*v) + 0.0 * v[0], a.variables, "expr")

    assume = parse_assume(args.assume, a.variables)
    proof = prove_equal(broadcast(a.fn), broadcast(b.fn), *example, assume=assume)
    print(f"{a.text}  =  {b.text}   in ({', '.join(a.variables)}): {proof}")
    if not proof:
        print("  (within tidu's real rules and bounds; not proved is not a disproof)")
    return 0 if proof else 1


# --- main ---------------------------------------------------------------------

Setup = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace], int]

# name -> (one-line help, setup, run)
COMMANDS: dict[str, tuple[str, Setup, Run]] = {
    "diff": ("differentiate an expression (any order, any mode)", _setup_diff, _run_diff),
    "series": ("the Taylor series of an expression in one variable (Taylor mode)", _setup_series, _run_series),
    "hessian": ("the Hessian of an expression, optionally checked against SymPy",
                _setup_hessian, _run_hessian),
    "lower": ("lower an expression to StableHLO text, NumPy source or C", _setup_lower, _run_lower),
    "equal": ("prove two expressions equal in the e-graph (real rules)", _setup_equal, _run_equal),
    "check-rules": ("verify the rules: JVPs, their linearity, transposes, rewrites (docs/verification.md)",
                    check_rules.setup_cli, check_rules.run_cli),
}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tidu", description="Symbolic automatic differentiation on an e-graph.")
    parser.add_argument("--version", action="version", version=f"tidu {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (help_text, setup, run) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        setup(p)
        with contextlib.suppress(argparse.ArgumentError):  # a command may define its own
            p.add_argument("-q", "--quiet", action="store_true",
                           help="no progress line on the terminal (it never shows when piped)")
        with contextlib.suppress(argparse.ArgumentError):  # a command may define its own
            p.add_argument("--rules", action="append", default=[], metavar="FILE",
                           help="a rule file of your own primitives, loaded with the built-ins (repeatable); "
                                "its rewrites must pass the soundness check of check-rules")
        if name != "check-rules":
            p.add_argument("--trust-rules", action="store_true",
                           help="load the --rules files without checking their rewrites (you vouch for them)")
        if name != "check-rules":
            _add_limits(p, with_order=name in ("diff", "series"))
        p.set_defaults(run=run)
    return parser


MAX_LENGTH = 20_000  # characters of one expression
MAX_ORDER = 100
MAX_NODES = 1_000_000  # graph values one transform call may build
# Wall-clock seconds of one command: the graph-value limit is per transform call, so a
# derivative simplified between many orders (--mode RoRoRo...) or a huge Hessian can
# stay under it and still run for many minutes.
MAX_SECONDS = 120.0


def _add_limits(p: argparse.ArgumentParser, with_order: bool) -> None:
    g = p.add_argument_group("limits (docs/cli.md#limits)")
    g.add_argument("--max-length", type=int, default=MAX_LENGTH, metavar="N",
                   help=f"refuse expressions longer than N characters (default {MAX_LENGTH:,})")
    if with_order:
        g.add_argument("--max-order", type=int, default=MAX_ORDER, metavar="N",
                       help=f"refuse --order above N (default {MAX_ORDER})")
    g.add_argument("--max-nodes", type=int, default=MAX_NODES, metavar="N",
                   help=f"stop when one derivative builds more than N graph values (default {MAX_NODES:,})")
    g.add_argument("--max-seconds", type=float, default=MAX_SECONDS, metavar="S",
                   help=f"stop the command after S seconds (default {MAX_SECONDS:g})")


def _check_limits(args: argparse.Namespace) -> None:
    if not hasattr(args, "max_length"):
        return
    for what in ("max_length", "max_nodes", "max_order"):
        if getattr(args, what, 1) < 1:
            raise CliError(f"--{what.replace('_', '-')} must be at least 1")
    if not args.max_seconds > 0:  # also nan
        raise CliError(f"--max-seconds must be a positive number of seconds, got {args.max_seconds:g}")
    for what in ("expr", "expr1", "expr2"):
        text = getattr(args, what, None)
        if text is not None and len(text) > args.max_length:
            raise CliError(f"the expression has {len(text):,} characters, more than --max-length "
                           f"{args.max_length:,}; raise it if you mean it")
    order = getattr(args, "order", None)
    if order is not None and order > args.max_order:
        raise CliError(f"--order {order} is above --max-order {args.max_order}; raise it if you mean it")


@contextlib.contextmanager
def _rules(args: argparse.Namespace) -> Any:
    """The ``--rules`` files active while the command runs (check-rules checks them)."""
    files = getattr(args, "rules", None) or []
    if args.command == "check-rules" and hasattr(args, "files"):
        args.files = list(args.files) + [f for f in files if f not in args.files]
        files = []
    if not files:
        yield
        return
    try:
        rules = use_rules(*files, trusted=getattr(args, "trust_rules", False))
        rules.__enter__()
    except UnsoundRewriteError as e:  # one line: the rewrites, then what to do on the command line
        n = len(e.problems)
        raise CliError(f"--rules: {e.loc}: {n} rewrite{'s' * (n > 1)} failed the soundness check, so the file "
                       f"is not loaded: {'; '.join(e.problems)}. Fix the rewrite (a guard such as 'when "
                       "positive(x)' limits it to where it holds) or, if you vouch for the file, add "
                       "--trust-rules ('tidu check-rules FILE' shows every check)") from None
    except (FileNotFoundError, RuleSyntaxError) as e:
        raise CliError(f"--rules: {e}") from None
    try:
        yield
    finally:
        rules.__exit__(None, None, None)


def _expressions_as_positionals(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """argparse takes any word starting with '-' for an option, so ``tidu diff "-x^2"``
    would fail; a word starting with a single '-' that is not one of the command's
    options is an expression (or a value): a leading space keeps argparse from reading it
    as an option and the expression parser skips it."""
    argv = list(argv)
    if not argv or argv[0] not in COMMANDS:
        return argv
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    options = set(sub.choices[argv[0]]._option_string_actions)  # noqa: SLF001

    def expression(a: str) -> bool:
        if a.startswith("--"):  # "---x", "--(x)", "--x+1" are no option; "--x" is refused below
            return len(a) > 2 and _OPTION_SHAPE.fullmatch(a) is None
        return a.startswith("-") and len(a) > 1 and a not in options and a[:2] not in options

    for a in argv[1:]:
        name = a.partition("=")[0]
        if _OPTION_SHAPE.fullmatch(a) and not any(o.startswith(name) for o in options):
            hint = "" if "=" in a else f"; an expression that starts with '--' needs a space first: ' {a}'"
            raise CliError(f"unknown option {name} (see 'tidu {argv[0]} --help'){hint}")

    return [argv[0]] + [" " + a if expression(a) else a for a in argv[1:]]


_OPTION_SHAPE = re.compile(r"--[A-Za-z][A-Za-z0-9_-]*(=.*)?", re.DOTALL)


class TimeLimit(BaseException):  # noqa: N818 (a limit, as LimitError)
    """The command ran past ``--max-seconds``; a BaseException (as KeyboardInterrupt), so
    that no ``except Exception`` on the way catches it and carries on."""


@contextlib.contextmanager
def _deadline(seconds: float | None) -> Any:
    """Raise ``TimeLimit`` in the main thread once ``seconds`` have passed (SIGALRM; where
    there is none, or off the main thread, no limit). Code inside one long call into
    a compiled library (the e-graph) stops when that call returns."""
    if seconds is None or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        raise TimeLimit(f"stopped after {seconds:g} s (--max-seconds); simplify the expression, use a lower "
                        "--order, or raise --max-seconds")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (never raises on bad input)."""
    try:
        parser = build_parser()
        args = parser.parse_args(_expressions_as_positionals(parser, sys.argv[1:] if argv is None else argv))
        for name, value in vars(args).items():  # undo the protecting space
            if isinstance(value, str) and value.startswith(" -"):
                setattr(args, name, value[1:])
        if getattr(args, "run", None) is None:
            raise CliError(f"give a command: {', '.join(COMMANDS)} (see 'tidu --help')")
        _check_limits(args)
        limit = getattr(args, "max_nodes", None)
        # IEEE arithmetic at the user's point (log(0), 0/0) gives inf and nan, which the
        # output shows: no NumPy RuntimeWarning lines on stderr
        with progress(args.command, quiet=args.quiet), resource_limits(graph_values=limit), \
                _rules(args), np.errstate(all="ignore"), _deadline(getattr(args, "max_seconds", None)):
            phase("tracing and differentiating")
            return args.run(args)
    except SystemExit as e:  # --help
        return e.code if isinstance(e.code, int) else 0
    except TimeLimit as e:
        sys.stdout.flush()
        print(f"tidu: error: {e}", file=sys.stderr)
        return 2
    except LimitError as e:
        print(f"tidu: error: {str(e).split(';')[0]}; simplify the expression or raise --max-nodes",
              file=sys.stderr)
        return 2
    except (CliError, ExprError) as e:
        print(f"tidu: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head`: stop quietly
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as e:  # an engine bug: still one line, unless asked for details
        if os.environ.get("TIDU_TRACEBACK"):
            raise
        print(f"tidu: internal error: {type(e).__name__}: {e} (set TIDU_TRACEBACK=1 "
              "for the traceback)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
