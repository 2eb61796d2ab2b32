"""The Taylor check: a primitive's Taylor-mode rule (``tidu.transforms.jet.RULES``, the
recurrences ``tidu.jet`` propagates series with) against an independent derivation of
the same derivatives of ``t -> prim(x(t))`` along a random polynomial path ``x(t)``:

- SymPy's series of the primitive's ``meaning`` (elementwise primitives that have one),
  element by element, in exact arithmetic on the sample's binary values;
- otherwise repeated linearization (``jet``'s generic fallback: nested ``tidu.jvp``
  through the JVP rules, which the ``derivative`` check confirms against SymPy).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import sympy

from tidu.checkrules._eval import NoSemantics, evaluate
from tidu.checkrules._report import FAIL, PASS, SKIP, Row, _where
from tidu.checkrules._samples import _rng, condition, draw, samples
from tidu.core.keys import is_complex, is_inexact
from tidu.ops.catalog import Catalog, Primitive
from tidu.ops.meaning import meaning_sympy
from tidu.transforms import jet
from tidu.transforms.transformed import new_stage

ORDER = 4  # terms of the series checked (t^1 .. t^4)
ELEMENTS = 1  # elements of each sample compared with SymPy's series (the others are alike)
RTOL = 1e-9


def has_taylor_rule(prim: Primitive) -> bool:
    return prim.name in jet.RULES


def _series(values: list[np.ndarray], avals: list[Any], rng: np.random.Generator) -> list[list[Any]]:
    """Each operand's series [x0, x1, .., xK]: random coefficients for inexact operands
    (complex ones for complex operands), none (zeros) for integer and boolean ones."""
    out = []
    for v, aval in zip(values, avals, strict=True):
        if not is_inexact(aval.dtype):
            out.append([v] + [None] * ORDER)
            continue
        coefficients = []
        for _ in range(ORDER):
            c = rng.normal(0.0, 0.5, v.shape)
            if is_complex(aval.dtype):
                c = c + 1j * rng.normal(0.0, 0.5, v.shape)
            coefficients.append(np.asarray(c, dtype=v.dtype))
        out.append([v, *coefficients])
    return out


def _traced_run(fn: Callable[[list[list[Any]]], list[Any]], series: list[list[Any]],
                impls: dict[str, Any]) -> list[np.ndarray]:
    """``fn(series)`` (a series propagation) traced on the series' arrays and evaluated with
    the reference kernels: no program is compiled or simplified (a catalog under check is
    not vetted), and a coefficient ``None`` (zero) stays None."""
    arrays = [c for s in series for c in s if c is not None]
    with new_stage("check taylor") as st:
        ins = iter([st.add_inputs(v, f"a{i}") for i, v in enumerate(arrays)])
        out = fn([[None if c is None else next(ins) for c in s] for s in series])
        present = [o for o in out if o is not None]
        keys = st.keys(present)
        feed = {k.input: v for k, v in zip(st.inputs, arrays, strict=True)}
        values = iter(evaluate(keys, feed, impls, st.trace.aliases))
    y0 = None
    result = []
    for o in out:
        v = None if o is None else np.asarray(next(values))
        y0 = v if y0 is None else y0
        result.append(v)
    return [np.zeros_like(y0) if v is None else v for v in result]


def _sympy_reference(prim: Primitive, series: list[list[Any]], index: tuple[int, ...]) -> list[float]:
    """d^k/dt^k meaning(x(t)) at t = 0, k = 1..K, for one element (exact rationals)."""
    t = sympy.Symbol("t", real=True)
    paths = []
    for s in series:
        terms = [sympy.Rational(float(np.asarray(s[0])[index]))]
        terms += [sympy.Rational(float(np.asarray(c)[index])) * t**k / math.factorial(k)
                  for k, c in enumerate(s[1:], start=1) if c is not None]
        paths.append(sympy.Add(*terms))
    expr = meaning_sympy(prim, paths)
    out, d = [], expr
    for _ in range(ORDER):
        d = sympy.diff(d, t)
        out.append(float(sympy.N(d.subs(t, 0), 30)))
    return out


def check_taylor(cat: Catalog, prim: Primitive, impls: dict[str, Any]) -> Row:
    """One row: the Taylor rule on the first sample applications in float64 and complex128,
    against SymPy's series (float64, elementwise with a meaning) or repeated linearization."""
    where = _where(prim.loc)
    rule_name = "jet (tidu/transforms/jet.py)"
    if prim.name not in impls:
        raise NoSemantics(f"primitive {prim.name} has no NumPy semantics and no meaning: cannot evaluate it")
    rng = _rng("taylor", prim.name)
    has_meaning = prim.decl.type_rule == "elementwise" and prim.decl.meaning is not None and not prim.variadic
    checked, oracles = 0, set()
    applications = [(d, avals, attrs) for d in ("float64", "complex128") for avals, attrs in samples(prim, d)[:2]]
    for dtype, avals, attrs in applications:
        if not any(is_inexact(a.dtype) for a in avals):
            continue
        values = condition(prim, [draw(a, "smooth", rng) for a in avals])
        series = _series(values, avals, rng)
        got = _traced_run(lambda xs, a=attrs: jet.RULES[prim.name](xs, dict(a), ORDER), series, impls)[1:]
        by_sympy = has_meaning and dtype == "float64"
        if by_sympy:
            shape = np.asarray(got[0]).shape
            try:
                wants = [(index, _sympy_reference(prim, series, index))
                         for index in (np.unravel_index(f, shape) if shape else () for f in range(ELEMENTS))]
            except TypeError:  # SymPy's derivative of the meaning is no number (floor's jumps)
                by_sympy = False
        if by_sympy:
            oracles.add("SymPy's series of its meaning")
            for index, want in wants:
                have = [float(np.asarray(g)[index]) for g in got]
                if not np.allclose(have, want, rtol=RTOL, atol=RTOL * max(1.0, *map(abs, want))):
                    return Row(prim.name, rule_name, where, "taylor", FAIL,
                               f"element {index}: derivatives 1..{ORDER} along the path {have} != SymPy's "
                               f"series {want}")
        else:
            oracles.add("repeated linearization (nested jvp)")
            want = _traced_run(lambda xs, a=attrs: jet._fallback(prim.name, xs, dict(a), ORDER), series, impls)[1:]
            for k, (g, w) in enumerate(zip(got, want, strict=True), start=1):
                scale = float(np.max(np.abs(w), initial=1.0))
                if np.shape(g) != np.shape(w) or not np.allclose(g, w, rtol=RTOL, atol=RTOL * scale):
                    return Row(prim.name, rule_name, where, "taylor", FAIL,
                               f"order {k} on {[a.shape for a in avals]} {attrs}: max |diff| "
                               f"{float(np.max(np.abs(np.asarray(g) - np.asarray(w)))):.3g} against repeated "
                               "linearization")
        checked += 1
    if not checked:
        return Row(prim.name, rule_name, where, "taylor", SKIP, "no float or complex sample application")
    return Row(prim.name, rule_name, where, "taylor", PASS,
               f"orders 1..{ORDER} on {checked} sample application(s), against {' and '.join(sorted(oracles))}")


__all__ = ["check_taylor", "has_taylor_rule"]
