"""``tidu check-rules``: verify every rule of the rule files, one table row per check.

- **derivative** (each ``jvp`` rule): against SymPy's derivative of the primitive's
  ``meaning`` (templates become SymPy trees, each template op replaced by its own
  meaning), on real and on complex symbols; and always numerically, against a
  five-point finite difference of the primal, on real and complex samples.
- **linear** (each ``jvp`` rule): J(2t) = 2 J(t) and J(t1 + t2) = J(t1) + J(t2), also
  symbolically where the template has a SymPy form.
- **adjoint** (each ``transpose`` rule): Re<ct, J t> = Re<J^H ct, t> on real and complex
  samples, J being the primitive itself (linear in that operand).
- **sound** (each ``rewrite``): both sides evaluated on samples that satisfy the guards,
  with 0, -0, +-1, +-inf, nan, tiny, huge, negative and complex values.

Numbers come from ``tidu.semantics``; a primitive of an extra rule file without NumPy
semantics is evaluated through its ``meaning`` (a SymPy tree built from the syntax tree,
``lambdify``-ed). Everything runs through the real engine (``linearize``,
``linear_transpose``, ``instantiate``) over the loaded catalog. See docs/verification.md.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import operator
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mpmath
import numpy as np
import sympy

from . import instantiate as _instantiate
from . import primitives as _primitives
from . import semantics
from .dsl.ast import AConst, Call, Expr, Num, OperandRule, Rewrite, RuleSyntaxError, Var, show, walk
from .dsl.guards import GUARDS
from .fragments import FragmentBuilder
from .instantiate import Env, Val, Zero, instantiate
from .keys import Attrs, Aval, InputKey, Linearized, Named, Tangent, ValueKey, aval_of, is_complex, is_inexact
from .linearize import LinearizedGraph, fresh_pass_id, linearize
from .primitives import Catalog, Primitive
from .resolve import resolve
from .sympy import number, pointwise, symbolic_difference
from .transpose import linear_transpose

# --- the report -------------------------------------------------------------------------

PASS, WARN, SKIP, FAIL = "pass", "warn", "skip", "FAIL"


@dataclass
class Row:
    primitive: str
    rule: str
    where: str  # file:line
    check: str  # derivative | linear | adjoint | sound
    result: str  # pass | warn | skip | FAIL
    detail: str


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def failures(self) -> list[Row]:
        return [r for r in self.rows if r.result == FAIL]

    def table(self) -> str:
        head = ("primitive", "rule", "file:line", "check", "result", "detail")
        rows = [head] + [(r.primitive, r.rule, r.where, r.check, r.result, r.detail) for r in self.rows]
        widths = [min(48, max(len(r[c]) for r in rows)) for c in range(5)]
        lines = ["  ".join([v.ljust(w) for v, w in zip(r[:5], widths, strict=True)] + [r[5]]).rstrip()
                 for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths) + "  ------")
        return "\n".join(lines)

    def summary(self) -> str:
        counts = {k: sum(r.result == k for r in self.rows) for k in (PASS, WARN, SKIP, FAIL)}
        text = f"{len(self.rows)} checks: " + ", ".join(f"{n} {k}" for k, n in counts.items())
        fails = [f"{r.where}: {r.primitive}: {r.check} of '{r.rule}' failed: {r.detail}" for r in self.failures]
        return "\n".join([text, *fails])

    def __str__(self) -> str:
        return self.table() + "\n\n" + self.summary()


# --- the catalog under check, and evaluating keys ------------------------------------------


@contextlib.contextmanager
def using_catalog(cat: Catalog) -> Iterator[None]:
    """Make ``cat`` the engine's catalog (``tidu.primitives.catalog()``) for a while."""
    saved = _primitives._CATALOG
    _primitives._CATALOG = cat
    _instantiate._ZERO_RULES.clear()  # cached per primitive name
    try:
        yield
    finally:
        _primitives._CATALOG = saved
        _instantiate._ZERO_RULES.clear()


Impl = Callable[[Sequence[np.ndarray], Any], np.ndarray]


class NoSemantics(LookupError):
    """A primitive has neither NumPy semantics nor a ``meaning``: checks that run it skip."""


def implementations(cat: Catalog) -> dict[str, Impl]:
    """NumPy implementations: ``tidu.semantics``, else the primitive's lambdified meaning."""
    impls: dict[str, Impl] = {}
    for name, prim in cat.items():
        if name in semantics.IMPLS:
            impls[name] = semantics.IMPLS[name]
        elif prim.decl.meaning is not None and not prim.variadic:
            impls[name] = _meaning_impl(prim)
    return impls


def _meaning_impl(prim: Primitive) -> Impl:
    syms = [sympy.Dummy(n) for n in prim.operands]
    fn = sympy.lambdify(syms, meaning_expr(prim, syms), modules="numpy")

    def impl(args: Sequence[np.ndarray], attrs: Any) -> np.ndarray:
        (aval,) = prim.infer([aval_of(a) for a in args], attrs)
        with np.errstate(all="ignore"):
            out = np.asarray(fn(*args))
        if not is_complex(aval.dtype) and np.iscomplexobj(out):
            out = out.real
        return np.broadcast_to(out, aval.shape).astype(aval.dtype)

    return impl


def evaluate(outputs: Sequence[ValueKey], feed: dict[InputKey, np.ndarray], impls: dict[str, Impl]) -> list:
    """Values of ``outputs`` (keys), inputs from ``feed`` (by input key); iterative."""
    memo: dict[ValueKey, np.ndarray] = {}
    stack = list(outputs)
    while stack:
        k = stack[-1]
        if k in memo:
            stack.pop()
        elif k.input is not None:
            memo[k] = np.asarray(feed[k.input])
            stack.pop()
        elif missing := [i for i in k.inputs if i not in memo]:
            stack.extend(missing)
        else:
            stack.pop()
            if k.op not in impls:
                raise NoSemantics(f"primitive {k.op} has no NumPy semantics and no meaning: cannot evaluate it")
            memo[k] = impls[k.op]([memo[i] for i in k.inputs], k.attrs)
    return [memo[o] for o in outputs]


# --- SymPy trees from the syntax tree (never from text) ------------------------------------

_ARITH: dict[str, Callable[..., Any]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
    "neg": operator.neg, "pow": operator.pow,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {"sqrt": sympy.sqrt, "cbrt": sympy.cbrt}
_RELATIONS = {"EQ": sympy.Eq, "NE": sympy.Ne, "LT": sympy.Lt, "LE": sympy.Le, "GT": sympy.Gt, "GE": sympy.Ge}


def meaning_expr(prim: Primitive, args: Sequence[Any]) -> Any:
    """``prim``'s meaning as SymPy with its operands replaced by ``args``."""
    env = dict(zip(prim.operands, args, strict=True))

    def build(e: Expr) -> Any:  # meanings are tiny: recursion is fine
        if isinstance(e, Num):
            return number(e.value)
        if isinstance(e, Var):
            return env[e.name]
        if not isinstance(e, Call):
            raise TypeError(f"unexpected {type(e).__name__} in the meaning of {prim.name}")
        vals = [build(a) for a in e.args]
        if e.fn in _ARITH:
            return _ARITH[e.fn](*vals)
        fn = _FUNCTIONS.get(e.fn) or getattr(sympy, e.fn, None)
        if not (e.fn in _FUNCTIONS or isinstance(fn, sympy.FunctionClass)):
            raise RuleSyntaxError(e.loc, f"the meaning of {prim.name} calls {e.fn}, which is not a SymPy function")
        return fn(*vals)

    return build(prim.decl.meaning)


def template_expr(cat: Catalog, e: Expr, env: dict[str, Any]) -> Any | None:
    """A template as SymPy (each op through its meaning; select as Piecewise, compare as a
    relation), or None if it uses an op SymPy cannot express."""
    if isinstance(e, Num):
        return number(e.value)
    if isinstance(e, Var):
        return env[e.name]
    if not isinstance(e, Call):
        return None
    args = [template_expr(cat, a, env) for a in e.args]
    if any(a is None for a in args):
        return None
    prim = cat[e.fn]
    if prim.decl.meaning is not None and not prim.variadic:
        return meaning_expr(prim, args)
    if e.fn == "select":
        return sympy.Piecewise((args[1], args[0]), (args[2], True))
    direction = dict(e.attrs).get("direction")
    if e.fn == "compare" and isinstance(direction, AConst) and direction.value in _RELATIONS:
        return _RELATIONS[direction.value](*args)
    return None


# --- samples ------------------------------------------------------------------------------


def samples(prim: Primitive, dtype: str) -> list[tuple[list[Aval], dict[str, Any]]]:
    """Applications of ``prim`` to check it on: (operand avals, attributes), chosen by its
    type rule; only those its dtypes and type rule accept."""
    def a(*shape: int) -> Aval:
        return Aval(shape, dtype)

    n = len(prim.operands)
    dirs = ("EQ", "NE") if is_complex(dtype) else ("LT", "EQ", "GE")
    table: dict[str, list[tuple[list[Aval], dict[str, Any]]]] = {
        "elementwise": [([a(8)] * n, {})],
        "to_real": [([a(8)], {})],
        "abs": [([a(8)], {})],
        "make_complex": [([a(8)] * n, {})],
        "compare": [([a(8)] * 2, {"direction": d}) for d in dirs],
        "select": [([Aval((8,), "bool"), a(8), a(8)], {})],
        "convert": [([a(8)], {"dtype": t}) for t in ("float64", "complex128")],
        "broadcast_in_dim": [([a(3, 1)], {"shape": (2, 3, 4), "dims": (1, 2)}),
                             ([a()], {"shape": (2,), "dims": ()})],
        "reshape": [([a(2, 3)], {"shape": (3, 2)}), ([a(2, 3)], {"shape": (6,)})],
        "transpose": [([a(2, 3, 4)], {"perm": (2, 0, 1)})],
        "reduce": [([a(2, 3, 4)], {"axes": (0, 2)}), ([a(3)], {"axes": (0,)})],
        "dot_general": [
            ([a(2, 3, 4), a(2, 4, 5)], {"lhs_contract": (2,), "rhs_contract": (1,), "lhs_batch": (0,),
                                        "rhs_batch": (0,)}),
            ([a(4, 2, 3), a(3, 4)], {"lhs_contract": (2, 0), "rhs_contract": (0, 1), "lhs_batch": (),
                                     "rhs_batch": ()}),
        ],
        "slice": [([a(5, 6)], {"start": (1, 0), "limit": (5, 5), "strides": (2, 2)})],
        "pad": [([a(2, 3), a()], {"low": (1, 0), "high": (0, 2), "interior": (1, 0)})],
        "concatenate": [([a(2, 3), a(1, 3), a(4, 3)], {"axis": 0})],
    }
    out = []
    for avals, attrs in table.get(prim.decl.type_rule, []):
        if set(attrs) != set(prim.attrs):
            continue
        try:
            prim.infer(avals, Attrs(attrs))
        except _primitives.OpError:
            continue
        out.append((avals, attrs))
    return out


def draw(aval: Aval, domain: str, rng: np.random.Generator) -> np.ndarray:
    """Random values: ``smooth`` (real parts in [0.5, 2], imaginary in [-0.3, 0.3]: away
    from every pole, cut and kink of the built-ins) or ``signed`` (normal, both signs)."""
    shape = aval.shape
    if aval.dtype == "bool":
        return rng.random(shape) < 0.5
    if not is_inexact(aval.dtype):
        return rng.integers(-5, 6, shape).astype(aval.dtype)
    smooth = domain == "smooth"
    re = rng.uniform(0.5, 2.0, shape) if smooth else rng.normal(0.0, 1.5, shape)
    if is_complex(aval.dtype):
        re = re + 1j * (rng.uniform(-0.3, 0.3, shape) if smooth else rng.normal(0.0, 1.0, shape))
    return np.asarray(re, dtype=aval.dtype)


def _tangent(aval: Aval, rng: np.random.Generator) -> np.ndarray:
    t = rng.normal(size=aval.shape)
    if is_complex(aval.dtype):
        t = t + 1j * rng.normal(size=aval.shape)
    return np.asarray(t, dtype=aval.dtype)


def _inner(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.real(np.sum(np.conj(a) * b)))


def _where(loc: Any) -> str:
    return f"{loc.file}:{loc.line}"


def _rng(*parts: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(parts).encode()))


def _close(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """Elementwise agreement: nan matches nan, an infinity the same infinity; a complex
    value with a non-finite part matches any such value (complex infinity: NumPy's and
    XLA's complex arithmetic on non-finite parts is not specified); else a tolerance."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    if a.dtype.kind in "biu" and b.dtype.kind in "biu":
        return a == b
    fa, fb = np.isfinite(a), np.isfinite(b)
    with np.errstate(all="ignore"):
        near = np.abs(a - b) <= atol + rtol * np.maximum(np.abs(a), np.abs(b))
    if np.iscomplexobj(a) or np.iscomplexobj(b):
        return np.where(fa & fb, near, ~fa & ~fb)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    return np.where(fa & fb, near, same)


# --- JVP rules: derivative and linearity ----------------------------------------------------


def _primal(prim: Primitive, avals: Sequence[Aval], attrs: dict[str, Any]):
    b = FragmentBuilder("check")
    refs = [b.input(f"a{i}", av) for i, av in enumerate(avals)]
    (o,) = b.add_op(prim.name, refs, attrs)
    return b.output(o), b.build()


@dataclass
class _Jvp:
    """One application of a primitive, linearized in the operands of one JVP rule."""

    key: ValueKey
    tangent_out: ValueKey | None
    active: list[int]
    tangent_in: list[InputKey]
    args: list[np.ndarray]
    impls: dict[str, Impl]
    names: list[str]

    def feed(self, shift: float = 0.0, ts: Sequence[np.ndarray] = ()) -> dict[InputKey, np.ndarray]:
        vals = list(self.args)
        for i, t in zip(self.active, ts, strict=False):
            vals[i] = vals[i] + shift * t
        return {Named(f"a{i}"): v for i, v in enumerate(vals)}

    def primal(self, h: float, ts: Sequence[np.ndarray]) -> np.ndarray:
        return evaluate([self.key], self.feed(h, ts), self.impls)[0]

    def jvp(self, ts: Sequence[np.ndarray]) -> np.ndarray:
        if self.tangent_out is None:
            return np.zeros(self.key.aval.shape, self.key.aval.dtype)
        feed = {**self.feed(), **dict(zip(self.tangent_in, ts, strict=True))}
        return evaluate([self.tangent_out], feed, self.impls)[0]

    def five_point(self, ts: Sequence[np.ndarray], h: float) -> np.ndarray:
        f = self.primal
        return (-f(2 * h, ts) + 8 * f(h, ts) - 8 * f(-h, ts) + f(-2 * h, ts)) / (12 * h)

    def point(self, k: int, shape: tuple[int, ...]) -> str:
        """The operand values at element ``k`` of a result of ``shape`` (elementwise ops)."""
        shown = [f"{self.names[i]}={_fmt(a.flat[k])}" for i, a in enumerate(self.args) if a.shape == shape]
        return ", ".join(shown) or f"element {k}"


def _linearized(prim: Primitive, rule: OperandRule, avals, attrs, args, impls) -> _Jvp | None:
    key, frag = _primal(prim, avals, attrs)
    active = [i for i, av in enumerate(avals)
              if is_inexact(av.dtype) and rule.operand in (None, prim.operand_name(i))]
    if not active or not is_inexact(key.aval.dtype):
        return None
    lin = linearize(resolve(frag), [key], [f"a{i}" for i in active])
    (tout,) = lin.output_keys
    names = [prim.operand_name(i) for i in range(len(avals))]
    return _Jvp(key, tout, active, [k.input for k in lin.input_keys], args, impls, names)


@dataclass
class _Tally:
    """Numeric results of one check over its samples: points checked and left out, the
    largest error, and the first point that failed."""

    checked: int = 0
    masked: int = 0
    max_err: float = 0.0
    bad: str = ""

    def add(self, err: np.ndarray, mask: np.ndarray, tol: float, where: Callable[[int], str]) -> None:
        self.checked += int(np.sum(mask))
        self.masked += int(np.sum(~mask))
        errs = np.where(mask, err, 0.0)
        if errs.size:
            self.max_err = max(self.max_err, float(np.max(errs)))
            over = np.flatnonzero(errs > tol)
            if over.size and not self.bad:
                self.bad = where(int(over[0]))


def _jvp_numeric(prim: Primitive, rule: OperandRule, dtype: str, impls, rng) -> tuple[_Tally, _Tally] | None:
    """(derivative, linearity) tallies over the samples of ``dtype`` in the smooth and the
    signed domain; None if no operand or result of this dtype carries a tangent."""
    deriv, linear, seen = _Tally(), _Tally(), False
    for avals, attrs in samples(prim, dtype):
        for domain in ("smooth", "signed"):
            case = _linearized(prim, rule, avals, attrs, [draw(av, domain, rng) for av in avals], impls)
            if case is not None:
                seen = True
                t1, t2 = ([_tangent(avals[i], rng) for i in case.active] for _ in range(2))
                _check_derivative(case, t1, deriv)
                _check_linear(case, t1, t2, linear)
    return (deriv, linear) if seen else None


def _check_derivative(case: _Jvp, ts: list[np.ndarray], tally: _Tally) -> None:
    """J t against five-point differences with steps h and h/2; points where the two
    differ (a kink, a pole or a cut within 2h) or the primal is not finite are left out."""
    j = case.jvp(ts)
    with np.errstate(all="ignore"):
        fd1, fd2 = case.five_point(ts, 1e-3), case.five_point(ts, 5e-4)
        scale = 1 + np.abs(fd2)
        smooth = np.isfinite(fd1) & np.isfinite(fd2) & (np.abs(fd1 - fd2) <= 1e-6 * scale)
        smooth &= np.isfinite(case.primal(0.0, ts))
        err = np.where(np.isfinite(j), np.abs(j - fd2) / scale, np.inf)
    tally.add(err, smooth, 1e-6, lambda k: f"at {case.point(k, j.shape)}: jvp {_fmt(j.flat[k])}, "
              f"finite difference {_fmt(fd2.flat[k])}")


def _check_linear(case: _Jvp, t1: list[np.ndarray], t2: list[np.ndarray], tally: _Tally) -> None:
    """J(2 t1) = 2 J(t1) and J(t1 + t2) = J(t1) + J(t2) (nan matches nan)."""
    j1, j2 = case.jvp(t1), case.jvp(t2)
    pairs = {"J(2t) != 2 J(t)": (case.jvp([2 * t for t in t1]), 2 * j1),
             "J(t1+t2) != J(t1)+J(t2)": (case.jvp([a + b for a, b in zip(t1, t2, strict=True)]), j1 + j2)}
    for what, (got, want) in pairs.items():
        ok = _close(got, want, 1e-9, 1e-12 * (1 + _max_abs(want)))
        tally.add(np.where(ok, 0.0, 1.0), np.ones(ok.shape, bool), 0.5,
                  lambda k, got=got, want=want, what=what: f"{what} at {case.point(k, got.shape)}: "
                  f"{_fmt(got.flat[k])} vs {_fmt(want.flat[k])}")


def _max_abs(a: np.ndarray) -> float:
    finite = np.abs(a[np.isfinite(a)])
    return float(np.max(finite, initial=0.0))


def _fmt(v: Any) -> str:
    v = complex(v) if np.iscomplexobj(v) else v
    if isinstance(v, complex):
        return f"{v.real:.6g}{v.imag:+.6g}j"
    return f"{float(v):.6g}" if isinstance(v, float | np.floating) else str(v)


def _symbolic_jvp(cat: Catalog, prim: Primitive, rule: OperandRule, complex_: bool) -> tuple[str, str]:
    """SymPy's verdict on ``template == d/de meaning(x + e dx)``: yes / ≈ / no / ? / n/a."""
    if prim.decl.meaning is None or prim.variadic:
        return "n/a", "no meaning"
    eps = sympy.Dummy("e", real=True)
    env: dict[str, Any] = {}
    shifted = []
    for name in prim.operands:
        if complex_:
            a, b, da, db = sympy.symbols(f"{name}_re {name}_im d{name}_re d{name}_im", real=True)
            x, dx = a + sympy.I * b, da + sympy.I * db
        else:
            x, dx = sympy.Symbol(name, real=True), sympy.Symbol("d" + name, real=True)
        if rule.operand not in (None, name):
            dx = sympy.Integer(0)
        env[name], env["d" + name] = x, dx
        shifted.append(x + eps * dx)
    reference = pointwise(sympy.diff(meaning_expr(prim, shifted), eps).subs(eps, 0))
    env["out"] = meaning_expr(prim, [env[n] for n in prim.operands])
    got = sympy.Integer(0) if rule.template is None else template_expr(cat, rule.template, env)
    if got is None:
        return "n/a", "template uses ops without a meaning"
    verdict = symbolic_difference(got, reference)
    if verdict in ("no", "?"):
        verdict, detail = _spot_check(got - reference, verdict)
        return verdict, detail
    return verdict, ""


def _spot_check(diff: Any, verdict: str) -> tuple[str, str]:
    """Evaluate a difference SymPy could not simplify to 0 at a few points in [0.5, 2]:
    nonzero somewhere is a counterexample ("no"), else undecided ("?")."""
    syms = sorted(diff.free_symbols, key=str)
    rng = np.random.default_rng(0)
    for _ in range(3):
        point = {s: number(round(float(rng.uniform(0.5, 2.0)), 3)) for s in syms}
        try:
            value = complex(diff.xreplace(point).evalf(30))
        except (TypeError, ValueError, ArithmeticError):
            return "?", ""
        if abs(value) > 1e-9:
            pt = ", ".join(f"{s}={float(v):g}" for s, v in point.items())
            shown = _fmt(value.real if value.imag == 0 else value)
            return "no", f"jvp - derivative = {sympy.simplify(diff)} = {shown} at {pt}"
    return "?", ""


def _symbolic_linear(cat: Catalog, prim: Primitive, rule: OperandRule) -> str:
    """Whether SymPy shows the template linear in the tangents (real symbols): yes / no / ? / n/a."""
    if rule.template is None:
        return "yes"
    env: dict[str, Any] = {}
    for name in prim.operands:
        env[name] = sympy.Symbol(name, real=True)
    if prim.variadic:
        return "n/a"
    if prim.decl.meaning is not None:
        env["out"] = meaning_expr(prim, [env[n] for n in prim.operands])
    tangents = ["d" + n for n in prim.operands]
    t1 = {d: sympy.Symbol(d + "_1", real=True) for d in tangents}
    t2 = {d: sympy.Symbol(d + "_2", real=True) for d in tangents}
    if "out" not in env and any(isinstance(v, Var) and v.name == "out" for v in walk(rule.template)):
        return "n/a"

    def at(ts: dict[str, Any]) -> Any:
        return template_expr(cat, rule.template, {**env, **ts})

    one, two, both = at(t1), at(t2), at({d: t1[d] + t2[d] for d in tangents})
    doubled = at({d: 2 * t1[d] for d in tangents})
    if one is None:
        return "n/a"
    verdicts = {symbolic_difference(doubled, 2 * one), symbolic_difference(both, one + two)}
    return "no" if "no" in verdicts else ("?" if "?" in verdicts else "yes")


def _dtypes(prim: Primitive) -> list[str]:
    return [d for d in ("float64", "complex128") if samples(prim, d)]


def _worst(a: str, b: str) -> str:
    order = (PASS, SKIP, WARN, FAIL)
    return max(a, b, key=order.index)


def check_jvp(cat: Catalog, prim: Primitive, rule: OperandRule, impls: dict[str, Impl]) -> list[Row]:
    """The derivative and the linearity rows of one JVP rule."""
    name, where = (f"jvp {rule.operand}" if rule.operand else "jvp"), _where(rule.loc)
    dtypes = _dtypes(prim)
    if not dtypes:
        why = f"no sample application for type rule {prim.decl.type_rule!r} with attributes {prim.attrs}"
        return [Row(prim.name, name, where, c, SKIP, why) for c in ("derivative", "linear")]
    rng = _rng(rule.loc.file, rule.loc.line, prim.name)
    deriv: list[str] = []
    linear: list[str] = []
    d_result = l_result = PASS
    for dtype in dtypes:
        kind = "complex" if is_complex(dtype) else "real"
        verdict, why = _symbolic_jvp(cat, prim, rule, is_complex(dtype))
        if verdict != "n/a":
            deriv.append(f"sympy {kind}: {verdict}" + (f" ({why})" if why else ""))
            d_result = _worst(d_result, FAIL if verdict == "no" else PASS)
        numeric = _jvp_numeric(prim, rule, dtype, impls, rng)
        if numeric is None:
            deriv.append(f"{kind}: no tangent (boolean or integer operand or result)")
            continue
        d, lin = numeric
        left_out = f", {d.masked} left out" if d.masked else ""
        deriv.append(f"fd {kind}: max err {d.max_err:.1e} over {d.checked} points{left_out}")
        if d.bad:
            convention = rule.template is None and is_complex(dtype)  # zero by convention, as in JAX
            deriv.append(("declared zero by convention, but the complex derivative is not 0: " if convention
                          else "") + d.bad)
            d_result = _worst(d_result, WARN if convention else FAIL)
        linear.append(f"{kind}: {lin.bad or 'ok'}")
        l_result = _worst(l_result, FAIL if lin.bad else PASS)
    symbolic = _symbolic_linear(cat, prim, rule) if "float64" in dtypes else "n/a"
    if symbolic != "n/a":
        linear.append(f"sympy: {symbolic}")
        l_result = _worst(l_result, FAIL if symbolic == "no" else PASS)
    return [Row(prim.name, name, where, "derivative", d_result, "; ".join(deriv)),
            Row(prim.name, name, where, "linear", l_result, "zero" if rule.template is None else "; ".join(linear))]


# --- transpose rules: the adjoint identity --------------------------------------------------


def _adjoint_one(prim: Primitive, avals: list[Aval], attrs: dict[str, Any], i: int, impls, rng) -> tuple[str, str]:
    """(verdict, detail) of Re<ct, P t> = Re<P^T ct, t> for operand ``i``. Operands that are
    linear together with it (``x`` and ``y`` of ``add``) are active too, with zero tangents;
    the others (``y`` of ``mul``) are fixed random values."""
    args = [draw(av, "smooth", rng) for av in avals]
    key, _ = _primal(prim, avals, attrs)

    def apply(vals: list[np.ndarray]) -> np.ndarray:
        return evaluate([key], {Named(f"a{j}"): v for j, v in enumerate(vals)}, impls)[0]

    zero = [np.zeros_like(a) for a in args]
    at_zero = [zero[i] if j == i else a for j, a in enumerate(args)]
    partners = []
    if np.any(apply(at_zero) != 0):  # affine in operand i: its linear partners must be 0
        partners = [j for j, av in enumerate(avals) if j != i and is_inexact(av.dtype)
                    and prim.operand_name(j) in prim.transpose]
        for j in partners:
            args[j] = at_zero[j] = zero[j]
        if np.any(apply(at_zero) != 0):
            return FAIL, f"{prim.name} is not linear in operand {prim.operand_name(i)}"
    active = [i, *partners]
    pid = fresh_pass_id()
    b = FragmentBuilder("adjoint")
    refs = [b.input(Tangent(Named(f"a{j}"), pid) if j in active else Named(f"a{j}"), av)
            for j, av in enumerate(avals)]
    (o,) = b.add_op(prim.name, refs, attrs, Linearized([j in active for j in range(len(avals))]))
    b.output(o)
    lin = LinearizedGraph(b.build(), [(Named(f"a{j}"), refs[j]) for j in active], [o], pid)
    tr = linear_transpose(lin)
    t = _tangent(avals[i], rng)
    jt = apply([t if j == i else a for j, a in enumerate(args)])
    ct = _tangent(key.aval, rng)
    ct_key = tr.input_keys[0].input
    back = tr.output_keys[0]
    feed = {Named(f"a{j}"): a for j, a in enumerate(args) if j not in active}
    jct = np.zeros_like(t) if back is None else evaluate([back], {**feed, ct_key: ct}, impls)[0]
    lhs, rhs = _inner(ct, jt), _inner(jct, t)
    scale = float(np.sum(np.abs(ct) * np.abs(jt)) + np.sum(np.abs(jct) * np.abs(t))) + 1e-300
    if abs(lhs - rhs) <= 1e-10 * scale:
        return PASS, f"rel err {abs(lhs - rhs) / scale:.1e}"
    return FAIL, f"Re<ct, J t> = {lhs:.10g} but Re<J^T ct, t> = {rhs:.10g}"


def check_transpose(cat: Catalog, prim: Primitive, rule: OperandRule, impls: dict[str, Impl]) -> Row:
    """The adjoint row of one transpose rule, over real and complex samples."""
    rng = _rng(rule.loc.file, rule.loc.line, prim.name)
    parts, result = [], PASS
    for dtype in _dtypes(prim):
        kind = "complex" if is_complex(dtype) else "real"
        for avals, attrs in samples(prim, dtype):
            for i in range(len(avals)):
                if prim.operand_name(i) != rule.operand or not is_inexact(avals[i].dtype):
                    continue
                verdict, detail = _adjoint_one(prim, avals, attrs, i, impls, rng)
                if verdict == FAIL:
                    result = FAIL
                    parts.append(f"{kind}: {detail}")
                elif f"{kind} ok" not in parts:
                    parts.append(f"{kind} ok")
    if not parts:
        return Row(prim.name, f"transpose {rule.operand}", _where(rule.loc), "adjoint", SKIP,
                   f"no sample application for type rule {prim.decl.type_rule!r}")
    return Row(prim.name, f"transpose {rule.operand}", _where(rule.loc), "adjoint", result, "; ".join(parts))


# --- rewrites: soundness by sampling ----------------------------------------------------------

_REALS = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.75, np.inf, -np.inf, np.nan, 5e-324, -1e-300, 1e300, -1e300,
          710.0, -746.0, 1e-8]
_PARTS = [0.0, -0.0, 1.0, -1.0, 2.5, -0.5, np.inf, -np.inf, np.nan, 1e300, 1e-300]
_INTS = [0, 1, -1, 2, -7, 3, 2**40, -(2**40)]
_LONG = 400  # elements of the 1-D samples: every pair of two real specials, and more


def _specials(aval: Aval, position: int, finite: bool, rng: np.random.Generator) -> np.ndarray:
    """Values of ``aval``: special values (every pair of them across positions 0 and 1 of
    a long 1-D sample) mixed with random ones; ``finite`` leaves out inf and nan."""
    dt, size = aval.dtype, aval.size
    if dt == "bool":
        return rng.random(aval.shape) < 0.5
    if dt.startswith("int"):
        pool = np.array(_INTS, dtype=dt)
    elif is_complex(dt):
        parts = [p for p in _PARTS if np.isfinite(p) or not finite]
        pool = np.array([complex(a, b) for a in parts for b in parts], dtype=dt)
    else:
        pool = np.array([v for v in _REALS if np.isfinite(v) or not finite], dtype=dt)
    idx = np.arange(size)
    pick = (idx // len(pool) ** position) % len(pool) if position < 2 else rng.integers(0, len(pool), size)
    vals = pool[pick]
    if not dt.startswith("int"):
        noise = rng.normal(0, 3, size) * (1j if is_complex(dt) and position % 2 else 1)
        vals = np.where(idx >= len(pool) ** 2, noise.astype(dt), vals) if position < 2 else vals
    return vals.reshape(aval.shape)


def _attr_candidates(prim: Primitive, avals: list[Aval], context: list[Aval]) -> list[dict[str, Any]]:
    """Attribute choices for an op inside a rewrite pattern (identities included; a
    broadcast also to the shape of each pattern variable in ``context``)."""
    if not prim.attrs:
        return [{}]
    x = avals[0] if avals else Aval((), "float64")
    r, z, one = x.ndim, (0,) * x.ndim, (1,) * x.ndim
    subsets = [c for k in range(r + 1) for c in itertools.combinations(range(r), k)]
    table: dict[str, list[dict[str, Any]]] = {
        "compare": [{"direction": d} for d in _RELATIONS],
        "convert": [{"dtype": d} for d in ("float64", "complex128", "int64", "bool")],
        "reshape": [{"shape": x.shape}, {"shape": (x.size,)}, {"shape": (1, *x.shape)}, {"shape": x.shape[::-1]}],
        "transpose": [{"perm": p} for p in itertools.permutations(range(r))],
        "broadcast_in_dim": [{"shape": x.shape, "dims": tuple(range(r))},
                             {"shape": (2, *x.shape), "dims": tuple(range(1, r + 1))}]
        + [{"shape": c.shape, "dims": tuple(range(c.ndim - r, c.ndim))} for c in context if c.ndim > r],
        "reduce": [{"axes": c} for c in subsets],
        "slice": [{"start": z, "limit": x.shape, "strides": one},
                  {"start": z, "limit": x.shape, "strides": (2,) * r}],
        "pad": [{"low": z, "high": z, "interior": z}, {"low": one, "high": z, "interior": one}],
        "concatenate": [{"axis": k} for k in range(r)],
        "dot_general": [{"lhs_contract": (r - 1,), "rhs_contract": (0,), "lhs_batch": (), "rhs_batch": ()}],
    }
    return [c for c in table.get(prim.decl.type_rule, []) if set(c) == set(prim.attrs)]


_TIED_RULES = {"elementwise", "compare", "make_complex", "select"}


def _with_literals(prim: Primitive, args: list[Any], b: FragmentBuilder) -> list[Any] | None:
    """Pattern literals become splat constants of a sibling's aval (as in the e-graph)."""
    lits = [k for k, a in enumerate(args) if isinstance(a, Num)]
    if not lits:
        return args
    rule = prim.decl.type_rule
    others = [b.aval(a) for k, a in enumerate(args) if not isinstance(a, Num) and (rule != "select" or k > 0)]
    out = list(args)
    for k in lits:
        if rule == "pad" and k == 1 and not isinstance(args[0], Num):
            aval = Aval((), b.aval(args[0]).dtype)
        elif rule in _TIED_RULES and others and not (rule == "select" and k == 0):
            aval = others[0]
        else:
            return None
        value = args[k].value
        if isinstance(value, complex) and not is_complex(aval.dtype):
            return None
        out[k] = b.constant(np.full(aval.shape, value, dtype=aval.dtype))
    return out


def _lhs_builds(cat: Catalog, e: Expr, b: FragmentBuilder, bound: dict[str, Any]) -> Iterator[Any]:
    """Every way to build pattern ``e`` over the bound variables (attribute choices)."""
    if isinstance(e, Var):
        yield bound[e.name]
        return
    if isinstance(e, Num):
        yield e
        return
    assert isinstance(e, Call)
    prim = cat[e.fn]
    context = [b.aval(r) for r in bound.values()]
    options = []
    for a in e.args:
        if isinstance(a, Num) and prim.decl.type_rule not in _TIED_RULES | {"pad"}:
            options.append(_free_literals(a.value, context, b))  # any constant of that value
        else:
            options.append(list(itertools.islice(_lhs_builds(cat, a, b, bound), 6)))
    for args in itertools.product(*options):
        operands = _with_literals(prim, list(args), b)
        if operands is None:
            continue
        for attrs in _attr_candidates(prim, [b.aval(r) for r in operands], context):
            try:
                (ref,) = b.add_op(prim.name, operands, attrs)
            except _primitives.OpError:
                continue
            yield ref


def _free_literals(value: complex | float | int, context: list[Aval], b: FragmentBuilder) -> list[Any]:
    """Splat constants ``value`` that a literal not tied to a sibling may match: a scalar or
    a tensor of a pattern variable's shape, of each variable's dtype."""
    avals = dict.fromkeys(Aval(s, a.dtype) for a in context for s in ((), a.shape))
    return [b.constant(np.full(av.shape, value, dtype=av.dtype)) for av in avals
            if is_complex(av.dtype) or not isinstance(value, complex)]


def _mp_impls(cat: Catalog) -> dict[str, Impl]:
    """Elementwise ops with a meaning, at 50 digits (mpmath): the exact reference for an
    expression whose float evaluation overflows or rounds (``log(exp(1000))``)."""
    to_mp = np.frompyfunc(lambda v: mpmath.mpc(v) if isinstance(v, complex) else mpmath.mpf(v), 1, 1)
    impls: dict[str, Impl] = {"constant": lambda args, attrs: to_mp(attrs["value"].array.tolist())}
    for name, prim in cat.items():
        if prim.decl.meaning is not None and not prim.variadic and prim.decl.type_rule in (
                "elementwise", "to_real", "abs", "make_complex"):
            syms = [sympy.Dummy(n) for n in prim.operands]
            fn = np.frompyfunc(sympy.lambdify(syms, meaning_expr(prim, syms), modules="mpmath"), len(syms), 1)
            impls[name] = lambda args, attrs, fn=fn: fn(*args)
    return impls


def _exact(key: ValueKey, feed: dict[InputKey, np.ndarray], cat: Catalog) -> np.ndarray | None:
    to_mp = np.frompyfunc(lambda v: mpmath.mpc(v) if isinstance(v, complex) else mpmath.mpf(v), 1, 1)
    try:
        with mpmath.workdps(50), np.errstate(all="ignore"):
            (value,) = evaluate([key], {k: to_mp(np.asarray(v).tolist()) for k, v in feed.items()}, _mp_impls(cat))
            as_complex = np.frompyfunc(complex, 1, 1)(value)
        return np.asarray(as_complex.tolist(), dtype=complex).reshape(key.aval.shape)
    except (LookupError, TypeError, ValueError, ArithmeticError):
        return None


_RW_DTYPES = ("float64", "complex128", "int64", "bool")


def _rewrite_samples(cat: Catalog, rw: Rewrite, names: list[str], impls, rng) -> Iterator[tuple[str, str, str]]:
    """(verdict, detail, dtypes) for each sample of the rewrite that satisfies its guards."""
    guarded = {a for g in rw.guards for a in g.args if a != "self"}
    kinds = [("input", "constant", "finite constant") if v in guarded else ("input",) for v in names]
    shapes = [[s, ()] for s in ((_LONG,), (2, 3, 4))]  # each variable: the full shape or a scalar
    for base, dts in itertools.product(shapes, itertools.product(_RW_DTYPES, repeat=len(names))):
        for kind, shape in itertools.product(itertools.product(*kinds), itertools.product(base, repeat=len(names))):
            b = FragmentBuilder("rewrite")
            avals = [Aval(s, dt) for s, dt in zip(shape, dts, strict=True)]
            vals = {v: _specials(a, p, k == "finite constant", rng)
                    for p, (v, a, k) in enumerate(zip(names, avals, kind, strict=True))}
            bound = {v: b.input(v, a) if k == "input" else b.constant(vals[v])
                     for v, a, k in zip(names, avals, kind, strict=True)}
            for root in itertools.islice(_lhs_builds(cat, rw.lhs, b, bound), 8):
                lhs = b.key_of(root)
                if not all(GUARDS[g.name](lhs if a == "self" else b.key_of(bound[a]))
                           for g in rw.guards for a in g.args):
                    continue
                env = Env(b, {v: Val(r, False, b.aval(r)) for v, r in bound.items()}, lhs.attrs,
                          {v: b.aval(r) for v, r in bound.items()}, rule="rewrite", prim=lhs.op or "")
                rhs = instantiate(rw.rhs, env, lhs.aval)
                feed = {Named(v): vals[v] for v, k in zip(names, kind, strict=True) if k == "input"}
                want = evaluate([lhs], feed, impls)[0]
                got = np.zeros(lhs.aval.shape, lhs.aval.dtype) if isinstance(rhs, Zero) else evaluate(
                    [b.key_of(rhs.ref)], feed, impls)[0]
                yield (*_compare_sides(want, got, lhs, feed, vals, cat), "/".join(dts))


def _compare_sides(lhs_val, rhs_val, lhs: ValueKey, feed, vals, cat: Catalog) -> tuple[str, str]:
    bad = ~_close(lhs_val, rhs_val, 1e-9, 1e-12)
    if not bad.any():
        return PASS, ""
    k = int(np.flatnonzero(bad)[0])
    at = ", ".join(f"{v}={_fmt(a.flat[k])}" for v, a in vals.items() if a.shape == lhs_val.shape)
    msg = f"at {at or f'element {k}'}: lhs {_fmt(lhs_val.flat[k])}, rhs {_fmt(rhs_val.flat[k])}"
    exact = _exact(lhs, feed, cat)
    if exact is not None and _close(exact.astype(lhs_val.dtype) if is_complex(lhs_val.dtype) else exact.real,
                                    rhs_val, 1e-9, 1e-12)[bad].all():
        return WARN, f"{msg} (the lhs overflows or rounds in floating point; its exact value is the rhs)"
    return FAIL, msg


def check_rewrite(cat: Catalog, rw: Rewrite, impls: dict[str, Impl]) -> Row:
    """The soundness row of one rewrite."""
    rule = f"rewrite {show(rw.lhs)} -> {show(rw.rhs)}" + (
        " when " + ", ".join(f"{g.name}({', '.join(g.args)})" for g in rw.guards) if rw.guards else "")
    op = rw.lhs.fn if isinstance(rw.lhs, Call) else "?"
    names = list(dict.fromkeys(v.name for v in walk(rw.lhs) if isinstance(v, Var)))
    n, dtypes, first = 0, set(), {PASS: "", WARN: "", FAIL: ""}
    for verdict, detail, dts in _rewrite_samples(cat, rw, names, impls, _rng(rw.loc.file, rw.loc.line)):
        n += 1
        dtypes.add(dts)
        first[verdict] = first[verdict] or f"{dts}: {detail}"
    if n == 0:
        return Row(op, rule, _where(rw.loc), "sound", SKIP, "no sample satisfies the pattern's types and guards")
    result = FAIL if first[FAIL] else (WARN if first[WARN] else PASS)
    detail = first[FAIL] or first[WARN] or f"{n} samples ({', '.join(sorted(dtypes))})"
    return Row(op, rule, _where(rw.loc), "sound", result, detail)


# --- driver and command line --------------------------------------------------------------------


def _guarded(row_fn: Callable[[], list[Row]], prim: str, rule: str, where: str, *checks: str) -> list[Row]:
    """Run the checks of one rule; a rule that makes the engine fail fails its checks."""
    try:
        return row_fn()
    except NoSemantics as e:
        return [Row(prim, rule, where, c, SKIP, str(e)) for c in checks]
    except Exception as e:  # noqa: BLE001 (any error in a rule under check is its failure)
        return [Row(prim, rule, where, c, FAIL, f"{type(e).__name__}: {e}") for c in checks]


def check_rules(
    paths: Sequence[str | Path] | None = None,
    *,
    include_builtin_rules: bool | None = None,
    only: Sequence[str] | None = None,
) -> Report:
    """Check the rules of the built-in rule files, or of ``paths`` (extra rule files,
    loaded together with the built-ins, whose primitives may use the built-in ones).
    ``include_builtin_rules`` (default: only when no paths are given) also checks the
    built-in rules; ``only`` restricts to those primitives. Raises ``RuleSyntaxError`` for
    a malformed file, ``FileNotFoundError`` for an unreadable one, ``ValueError`` for an
    unknown primitive in ``only``."""
    paths = [str(p) for p in paths or []]
    cat = _primitives.load_rule_paths(paths)
    unknown = sorted(set(only or ()) - set(cat))
    if unknown:
        raise ValueError(f"unknown primitive(s) {', '.join(unknown)}; known: {', '.join(sorted(cat))}")
    builtin = not paths if include_builtin_rules is None else include_builtin_rules
    files = set(cat.files) if builtin else set(paths)
    impls = implementations(cat)
    report = Report()
    with using_catalog(cat):
        for prim in cat.values():
            if only and prim.name not in only:
                continue
            for rule in prim.jvp.values():
                if rule.loc.file in files:
                    name = f"jvp {rule.operand}" if rule.operand else "jvp"
                    report.rows += _guarded(lambda p=prim, r=rule: check_jvp(cat, p, r, impls), prim.name, name,
                                            _where(rule.loc), "derivative", "linear")
            for rule in prim.transpose.values():
                if rule.loc.file in files:
                    report.rows += _guarded(lambda p=prim, r=rule: [check_transpose(cat, p, r, impls)], prim.name,
                                            f"transpose {rule.operand}", _where(rule.loc), "adjoint")
        for rw in cat.all_rewrites():
            op = rw.lhs.fn if isinstance(rw.lhs, Call) else "?"
            if rw.loc.file in files and (not only or op in only):
                report.rows += _guarded(lambda r=rw: [check_rewrite(cat, r, impls)], op, f"rewrite {show(rw.lhs)}",
                                        _where(rw.loc), "sound")
    return report


def setup_cli(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="*", metavar="FILES",
                        help="extra rule files, loaded with the built-ins; their rules are checked")
    parser.add_argument("--all", action="store_true", help="with FILES, check the built-in rules too")
    parser.add_argument("--only", metavar="PRIMS", help="only these primitives (comma-separated)")
    parser.add_argument("--failures", action="store_true", help="print only the rows that did not pass")


def run_cli(args: argparse.Namespace) -> int:
    """Print the table; exit 1 if a check failed (bad input raises the CLI's error: exit 2)."""
    from .cli import CliError

    only = [s.strip() for s in args.only.split(",") if s.strip()] if args.only else None
    try:
        report = check_rules(args.files, include_builtin_rules=args.all or None, only=only)
    except UnicodeDecodeError as e:
        raise CliError(f"a rule file is not UTF-8 text: {e.reason} at byte {e.start}") from None
    except (FileNotFoundError, ValueError) as e:  # RuleSyntaxError is a ValueError
        raise CliError(str(e)) from None
    shown = Report([r for r in report.rows if r.result != PASS]) if args.failures else report
    print(shown.table() + "\n\n" + report.summary())
    return 0 if report.ok else 1


__all__ = ["Report", "Row", "check_jvp", "check_rewrite", "check_rules", "check_transpose", "evaluate",
           "implementations", "run_cli", "setup_cli", "using_catalog"]
