"""The rows of JVP and transpose rules, from numeric checks through the real engine
(``linearize``, ``linear_transpose``) and SymPy's verdicts (``_sympy``):

- a JVP against five-point finite differences of the primal, and for linearity:
  J(2t) = 2 J(t) and J(t1 + t2) = J(t1) + J(t2);
- the JVP's transpose (reverse mode) against the JVP by the adjoint identity, at every
  point, element by element for elementwise ops: where forward mode is finite, reverse
  mode must be too (a select of two tangents transposes to 0 * nan in the branch it
  does not take: forward and reverse derivatives then disagree at that point);
- a transpose against the adjoint identity Re<ct, J t> = Re<J^H ct, t>.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tidu.ad.linearize import LinearizedGraph, fresh_pass_id, linearize
from tidu.ad.transpose import linear_transpose
from tidu.checkrules._eval import Impl, _close, _primal, evaluate
from tidu.checkrules._report import FAIL, PASS, SKIP, WARN, Row, _fmt, _where
from tidu.checkrules._samples import (
    CONDITIONED,
    _dtypes,
    _rng,
    _tangent,
    compared_constants,
    condition,
    diagonal,
    draw,
    pinned,
    samples,
    ties,
)
from tidu.checkrules._sympy import _symbolic_jvp, _symbolic_linear
from tidu.core.keys import Aval, InputKey, Linearized, Named, Tangent, ValueKey, is_complex, is_inexact
from tidu.ops.catalog import Catalog, Primitive
from tidu.ops.dsl.ast import OperandRule
from tidu.trace.fragments import FragmentBuilder
from tidu.trace.resolve import resolve

# --- JVP rules: derivative and linearity ------------------------------------------------


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
    fragments: list = None  # the primal and linearized fragments, to differentiate the rule again
    linear: LinearizedGraph | None = None  # the linearized rule, to transpose it

    def feed(self, shift: float = 0.0, ts: Sequence[np.ndarray] = ()) -> dict[InputKey, np.ndarray]:
        vals = list(self.args)
        for i, t in zip(self.active, ts, strict=False):
            vals[i] = vals[i] + shift * t
        return {Named(f"a{i}"): v for i, v in enumerate(vals)}

    def primal(self, h: float, ts: Sequence[np.ndarray]) -> np.ndarray:
        return evaluate([self.key], self.feed(h, ts), self.impls)[0]

    def jvp(self, ts: Sequence[np.ndarray]) -> np.ndarray:
        return self.jvp_at(self.feed(), ts)

    def jvp_at(self, feed: dict[InputKey, np.ndarray], ts: Sequence[np.ndarray]) -> np.ndarray:
        if self.tangent_out is None:
            return np.zeros(self.key.aval.shape, self.key.aval.dtype)
        feed = {**feed, **dict(zip(self.tangent_in, ts, strict=True))}
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
    return _Jvp(key, tout, active, [k.input for k in lin.input_keys], args, impls, names,
                [frag] if lin.fragment is None else [frag, lin.fragment], lin)


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


def _jvp_numeric(prim: Primitive, rule: OperandRule, dtype: str, impls, rng) -> tuple[_Tally, _Tally, _Tally] | None:
    """(derivative, linearity, second-order) tallies over the samples of ``dtype`` in every
    domain; None if no operand or result of this dtype carries a tangent."""
    deriv, linear, second, reverse, seen = _Tally(), _Tally(), _Tally(), _Tally(), False
    consts = compared_constants(prim, rule.template)
    for avals, attrs in samples(prim, dtype):
        for args, gauge in _points(prim, avals, attrs, consts, rng):
            case = _linearized(prim, rule, avals, attrs, args, impls)
            if case is not None:
                seen = True
                t1, t2 = ([_tangent(avals[i], rng) for i in case.active] for _ in range(2))
                _check_derivative(case, t1, deriv, gauge)
                _check_linear(case, t1, t2, linear)
                _check_second(case, t1, t2, second, gauge)
                _check_reverse(case, t1, _tangent(case.key.aval, rng), reverse,
                               prim.decl.type_rule in ELEMENTWISE_TYPES)
    return (deriv, linear, second, reverse) if seen else None


def _points(prim: Primitive, avals: list[Aval], attrs: dict[str, Any], consts, rng
            ) -> Iterator[tuple[list[np.ndarray], bool]]:
    """Operand values in each domain: smooth, signed, ties (operands made equal where the
    rule compares them) and pinned (at 0 and at the constants the rule compares with; not
    for linear algebra, whose samples are conditioned matrices: zeros there make QR's
    LAPACK sign convention jump; a branching linear algebra rule gets diagonal matrices
    instead). The flag is True for points on gauge discontinuities (an eigenvector's
    first component exactly 0 flips sign with the perturbation), where kinks of the form
    |h| are left out: there the vectors have no derivative, only the rule's convention."""
    yield condition(prim, [draw(av, "smooth", rng) for av in avals]), False
    yield condition(prim, [draw(av, "signed", rng) for av in avals]), False
    tied = ties(prim, avals, [draw(av, "signed", rng) for av in avals], attrs)
    if tied is not None:
        yield tied, False
    if prim.decl.type_rule not in CONDITIONED:
        for args in pinned(avals, [draw(av, "smooth", rng) for av in avals], consts):
            yield args, False
    elif consts is not None:
        yield diagonal(avals, [draw(av, "smooth", rng) for av in avals]), True


def _one_sided_agree(f: Callable[[float], np.ndarray], scale: np.ndarray) -> np.ndarray:
    """Where the forward and the backward difference agree: False at kinks like |h|, which
    the central differences see as smooth with derivative 0. Their gap is f'' h where f
    is smooth and the jump in slope at a kink, whatever h: a gap that does not shrink
    with h is a kink however small (a gauge flip of a vector's second-order term, say)."""
    f0 = f(0.0)

    def gap(h: float) -> np.ndarray:
        return np.abs((f(h) - f0) - (f0 - f(-h))) / h

    g1, g2 = gap(1e-5), gap(1e-6)
    kink = (g1 > 1e-7 * (scale + np.abs(f0))) & (g2 > 0.5 * g1)
    return (g1 <= 1e-2 * scale) & ~kink


def _check_derivative(case: _Jvp, ts: list[np.ndarray], tally: _Tally, gauge: bool = False) -> None:
    """J t against five-point differences with steps h and h/2; points where the two
    differ (a kink, a pole or a cut within 2h) or the primal is not finite are left out."""
    j = case.jvp(ts)
    with np.errstate(all="ignore"):
        fd1, fd2 = case.five_point(ts, 1e-3), case.five_point(ts, 5e-4)
        scale = 1 + np.abs(fd2)
        smooth = np.isfinite(fd1) & np.isfinite(fd2) & (np.abs(fd1 - fd2) <= 1e-6 * scale)
        smooth &= np.isfinite(case.primal(0.0, ts))
        if gauge:
            smooth &= _one_sided_agree(lambda h: case.primal(h, ts), scale)
        err = np.where(np.isfinite(j), np.abs(j - fd2) / scale, np.inf)
        if len(case.args) == 1 and len(ts) == 1 and j.shape == ts[0].shape and not np.iscomplexobj(ts[0]):
            err = _one_sided(case, ts[0], j, smooth, scale, err)
    tally.add(err, smooth, 1e-6, lambda k: f"at {case.point(k, j.shape)}: jvp {_fmt(j.flat[k])}, "
              f"finite difference {_fmt(fd2.flat[k])}")


def _one_sided(case: _Jvp, t: np.ndarray, j: np.ndarray, smooth: np.ndarray, scale: np.ndarray,
               err: np.ndarray) -> np.ndarray:
    """``err`` where a one-operand op has a kink (|x| at 0: its one-sided derivatives
    differ): there the derivative from the right or from the left in x, times t, is a
    convention as the mean of the two (what the five-point difference gives) is; JAX's
    abs has 1 at 0, the derivative from the right, which gives smooth functions of |x|
    (|x|**2, cos(|x|)) their true second derivatives. Anything else at a kink fails."""
    up = np.abs(t)
    return _sided(lambda h: case.primal(h, [up]), lambda h: case.primal(h, [t]), t, j, smooth, scale, err)


def _sided(along_abs: Callable[[float], np.ndarray], along: Callable[[float], np.ndarray], t: np.ndarray,
           got: np.ndarray, smooth: np.ndarray, scale: np.ndarray, err: np.ndarray) -> np.ndarray:
    """``err`` where ``along`` (a function at x + h t, elementwise in x) has a kink: there
    ``got`` may be its derivative from the right or from the left in x (``along_abs``: at
    x + h |t|), times t."""
    kink = smooth & ~_one_sided_agree(along, scale)
    if not kink.any():
        return err
    for side in (1.0, -1.0):  # from the right in x, then from the left
        def g(h: float, side: float = side) -> np.ndarray:
            return along_abs(side * h)

        g0 = g(0.0)
        d1, d2 = ((-3 * g0 + 4 * g(h) - g(2 * h)) / (2 * h) for h in (1e-4, 5e-5))  # second order, one side
        clean = np.isfinite(d1) & np.isfinite(d2) & (np.abs(d1 - d2) <= 1e-6 * scale)
        sided = side * np.sign(t) * d2
        err = np.where(kink & clean & np.isfinite(got), np.minimum(err, np.abs(got - sided) / scale), err)
    return err


def _check_second(case: _Jvp, t: list[np.ndarray], u: list[np.ndarray], tally: _Tally, gauge: bool = False) -> None:
    """The rule's own derivative: J(x) t differentiated along u (a second linearization,
    what higher orders use) against five-point differences of J(x + h u) t. A rule can be
    right in value and wrong in derivative (the branch of ``reduce_prod`` for two zeros is
    0 in value but not in derivative), and the Hessians built from it would be wrong."""
    if case.tangent_out is None or case.tangent_out.input is not None:
        return
    lin = linearize(resolve(case.fragments), [case.tangent_out], [case.key.inputs[i] for i in case.active])
    (second,) = lin.output_keys
    base = {**case.feed(), **dict(zip(case.tangent_in, t, strict=True))}

    def g(h: float) -> np.ndarray:
        return case.jvp_at(case.feed(h, u), t)

    with np.errstate(all="ignore"):
        if second is None:
            got = np.zeros(case.key.aval.shape, case.key.aval.dtype)
        else:
            got = evaluate([second], {**base, **dict(zip((k.input for k in lin.input_keys), u, strict=True))},
                           case.impls)[0]
        fd1, fd2 = ((-g(2 * h) + 8 * g(h) - 8 * g(-h) + g(-2 * h)) / (12 * h) for h in (1e-3, 5e-4))
        scale = 1 + np.abs(fd2)
        smooth = np.isfinite(fd1) & np.isfinite(fd2) & (np.abs(fd1 - fd2) <= 1e-6 * scale)
        smooth &= np.isfinite(g(0.0))
        if gauge:
            smooth &= _one_sided_agree(g, scale)
        err = np.where(np.isfinite(got), np.abs(got - fd2) / scale, np.inf)
        if (len(case.args) == 1 and len(t) == 1 and len(u) == 1 and got.shape == u[0].shape
                and not np.iscomplexobj(u[0]) and not np.iscomplexobj(got)):
            # a kink of the derivative itself (i1e'' jumps at 0): the derivative of the jvp
            # from either side in x is a convention too, as for the first derivative
            up = np.abs(u[0])
            err = _sided(lambda h: case.jvp_at(case.feed(h, [up]), t), g, u[0], got, smooth, scale, err)
    tally.add(err, smooth, 1e-6, lambda k: f"at {case.point(k, got.shape)}: derivative of the jvp "
              f"{_fmt(got.flat[k])}, finite difference {_fmt(fd2.flat[k])}")


# type rules whose result element k reads only element k of each operand
ELEMENTWISE_TYPES = frozenset(("elementwise", "to_real", "abs", "make_complex", "select", "convert"))


def _check_reverse(case: _Jvp, t: list[np.ndarray], ct: np.ndarray, tally: _Tally, elementwise: bool) -> None:
    """Reverse mode (the linearized rule transposed) against forward mode: Re<ct, J t> =
    Re<J^H ct, t>, per element for an ``elementwise`` op whose active operands have the
    result's shape (both sides are then sums over one element), else summed. Points
    where forward mode is not finite are left out; where it is, reverse mode must be
    finite and agree."""
    if case.tangent_out is None or case.linear is None or case.linear.fragment is None:
        return
    tr = linear_transpose(case.linear)
    if not tr.tangent_inputs:
        return
    ct_key = tr.input_keys[0].input
    with np.errstate(all="ignore"):
        jt = case.jvp(t)
        backs = [np.zeros_like(ti) if k is None else evaluate([k], {**case.feed(), ct_key: ct}, case.impls)[0]
                 for k, ti in zip(tr.output_keys, t, strict=True)]
        shape = jt.shape
        if elementwise and all(ti.shape == shape for ti in t):
            lhs = np.real(np.conj(ct) * jt)
            rhs = sum((np.real(np.conj(b) * ti) for b, ti in zip(backs, t, strict=True)), np.zeros(shape))
            scale = np.abs(ct) * np.abs(jt) + sum((np.abs(b) * np.abs(ti) for b, ti in zip(backs, t, strict=True)),
                                                  np.zeros(shape))
        else:
            lhs = np.asarray(_inner(ct, jt))
            rhs = np.asarray(sum(_inner(b, ti) for b, ti in zip(backs, t, strict=True)))
            scale = np.asarray(float(np.sum(np.abs(ct) * np.abs(jt)))
                               + sum(float(np.sum(np.abs(b) * np.abs(ti))) for b, ti in zip(backs, t, strict=True)))
        err = np.where(np.isfinite(rhs), np.abs(lhs - rhs) / (scale + 1e-300), np.inf)
    tally.add(err, np.isfinite(lhs), 1e-9,
              lambda k: (f"reverse mode at {case.point(k, shape)}: Re<J^H ct, t> {_fmt(rhs.flat[k])}, "
                         f"forward Re<ct, J t> {_fmt(lhs.flat[k])}") if lhs.shape == shape
              else f"reverse mode: Re<J^H ct, t> = {_fmt(float(rhs))}, forward Re<ct, J t> = {_fmt(float(lhs))}")


def _check_linear(case: _Jvp, t1: list[np.ndarray], t2: list[np.ndarray], tally: _Tally) -> None:
    """J(2 t1) = 2 J(t1) and J(t1 + t2) = J(t1) + J(t2) (nan matches nan)."""
    with np.errstate(all="ignore"):  # inf and nan tangents at poles are expected here
        j1, j2 = case.jvp(t1), case.jvp(t2)
        pairs = {"J(2t) != 2 J(t)": (case.jvp([2 * t for t in t1]), 2 * j1),
                 "J(t1+t2) != J(t1)+J(t2)": (case.jvp([a + b for a, b in zip(t1, t2, strict=True)]), j1 + j2)}
    # where the derivative is infinite (log, sqrt at 0) inf - inf is nan: only finite points count
    finite = np.isfinite(j1) & np.isfinite(j2)
    for what, (got, want) in pairs.items():
        ok = _close(got, want, 1e-9, 1e-12 * (1 + _max_abs(want)))
        tally.add(np.where(ok, 0.0, 1.0), finite, 0.5,
                  lambda k, got=got, want=want, what=what: f"{what} at {case.point(k, got.shape)}: "
                  f"{_fmt(got.flat[k])} vs {_fmt(want.flat[k])}")


def _max_abs(a: np.ndarray) -> float:
    finite = np.abs(a[np.isfinite(a)])
    return float(np.max(finite, initial=0.0))



def _worst(a: str, b: str) -> str:
    order = (PASS, SKIP, WARN, FAIL)
    return max(a, b, key=order.index)


def check_jvp(cat: Catalog, prim: Primitive, rule: OperandRule, impls: dict[str, Impl]) -> list[Row]:
    """The derivative and the linearity rows of one JVP rule."""
    name, where = (f"jvp {rule.operand}" if rule.operand else "jvp"), _where(rule.loc)
    if rule.guards:
        name += " when " + ", ".join(f"{g.name}({', '.join(g.args)})" for g in rule.guards)
    # a guarded rule is checked where it applies; the unguarded one where none of them does
    dtypes = [dt for dt in _dtypes(prim)
              if prim.jvp_rule(rule.operand, dict.fromkeys(prim.operands, Aval((), dt))) is rule]
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
        d, lin, d2, rev = numeric
        left_out = f", {d.masked} left out" if d.masked else ""
        deriv.append(f"fd {kind}: max err {d.max_err:.1e} over {d.checked} points{left_out}")
        if rev.bad:
            deriv.append(rev.bad)
            d_result = FAIL
        if d.bad:
            convention = rule.template is None and is_complex(dtype)  # zero by convention, as in JAX
            deriv.append(("declared zero by convention, but the complex derivative is not 0: " if convention
                          else "") + d.bad)
            d_result = _worst(d_result, WARN if convention else FAIL)
        if d2.checked or d2.bad:
            deriv.append(f"its derivative {kind}: max err {d2.max_err:.1e}" + (f"; {d2.bad}" if d2.bad else ""))
            d_result = _worst(d_result, FAIL if d2.bad else PASS)
        linear.append(f"{kind}: {lin.bad or 'ok'}")
        l_result = _worst(l_result, FAIL if lin.bad else PASS)
    symbolic = _symbolic_linear(cat, prim, rule) if "float64" in dtypes else "n/a"
    if symbolic != "n/a":
        linear.append(f"sympy: {symbolic}")
        l_result = _worst(l_result, FAIL if symbolic == "no" else PASS)
    return [Row(prim.name, name, where, "derivative", d_result, "; ".join(deriv)),
            Row(prim.name, name, where, "linear", l_result, "zero" if rule.template is None else "; ".join(linear))]


# --- transpose rules: the adjoint identity ----------------------------------------------


def _inner(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.real(np.sum(np.conj(a) * b)))


def _adjoint_one(prim: Primitive, avals: list[Aval], attrs: dict[str, Any], i: int, impls, rng) -> tuple[str, str]:
    """(verdict, detail) of Re<ct, P t> = Re<P^T ct, t> for operand ``i``. Operands that are
    linear together with it (``x`` and ``y`` of ``add``) are active too, with zero tangents;
    the others (``y`` of ``mul``) are fixed random values."""
    args = condition(prim, [draw(av, "smooth", rng) for av in avals])
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
