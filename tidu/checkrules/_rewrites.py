"""Soundness of rewrites by sampling: the pattern built over samples of its variables
(inputs, or constants where a guard looks at them; special values included) that satisfy
the guards, both sides evaluated and compared. A mismatch explained by the exact (50-digit)
value of the lhs is a warning: the lhs overflows or rounds in floating point.

A ``real`` rewrite is a law of the real (complex) numbers, not of floating point: it is
checked on finite samples, comparing both sides' exact (50-digit) values, which must
agree; where the lhs is not finite in floating point, a division by zero or an overflow
inside it puts the sample outside the real semantics (skipped), while any other nan (a
logarithm or square root outside its domain) must stay nan: a rewrite may not turn an
undefined value into a number unless its guard excludes the point."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import mpmath
import numpy as np
import sympy

from tidu.ad.instantiate import Env, Val, Zero, instantiate
from tidu.checkrules._eval import Impl, _close, evaluate
from tidu.checkrules._report import FAIL, PASS, SKIP, WARN, Row, _fmt, _where
from tidu.checkrules._samples import _LONG, _rng, _specials
from tidu.checkrules._sympy import _RELATIONS
from tidu.core.keys import Aval, InputKey, Named, ValueKey, is_complex
from tidu.ops import catalog as _primitives
from tidu.ops.catalog import Catalog, Primitive
from tidu.ops.dsl.ast import Call, Expr, Num, Rewrite, Var, show, walk
from tidu.ops.dsl.guards import GUARDS
from tidu.ops.meaning import meaning_sympy
from tidu.trace.fragments import FragmentBuilder


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
        "reverse": [{"dims": c} for c in subsets],
        "slice": [{"start": z, "limit": x.shape, "strides": one},
                  {"start": z, "limit": x.shape, "strides": (2,) * r}],
        # the whole axis (an identity) and one entry less (not one: what a guard keeps out)
        "dynamic_slice": [{"axis": k, "size": n} for k in range(r)
                          for n in sorted({x.shape[k], max(x.shape[k] - 1, 0)}, reverse=True)],
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
        elif rule in _TIED_RULES and not others:  # only literals (exp(0)): a float64 scalar
            aval = Aval((), "float64")
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


def _nan_on_error(fn: Any, real_in_real_out: bool = False) -> Any:
    """``fn`` per element, nan where mpmath raises (a division by zero): one bad element
    must not lose the exact values of the others. With ``real_in_real_out`` (ops whose
    real operands give a real result), a complex result from real operands is nan, as in
    floating point: mpmath's ``log(-1)`` is ``i*pi``, a float64 ``log(-1)`` is nan, and
    ``exp(log(x)) -> x`` must not pass as exact at x = -1."""
    def safe(*args: Any) -> Any:
        try:
            out = fn(*args)
        except (ZeroDivisionError, ValueError, OverflowError):
            return mpmath.nan
        if real_in_real_out and isinstance(out, mpmath.mpc) and not any(isinstance(a, mpmath.mpc) for a in args):
            return mpmath.nan if out.imag != 0 else out.real
        return out
    return safe


def _mp_impls(cat: Catalog) -> dict[str, Impl]:
    """Elementwise ops with a meaning, at 50 digits (mpmath): the exact reference for an
    expression whose float evaluation overflows or rounds (``log(exp(1000))``)."""
    to_mp = np.frompyfunc(lambda v: mpmath.mpc(v) if isinstance(v, complex) else mpmath.mpf(v), 1, 1)
    impls: dict[str, Impl] = {"constant": lambda args, attrs: to_mp(attrs["value"].array.tolist())}
    for name, prim in cat.items():
        if prim.decl.meaning is not None and not prim.variadic and prim.decl.type_rule in (
                "elementwise", "to_real", "abs", "make_complex"):
            syms = [sympy.Dummy(n) for n in prim.operands]
            fn = np.frompyfunc(_nan_on_error(sympy.lambdify(syms, meaning_sympy(prim, syms), modules="mpmath"),
                                             prim.decl.type_rule == "elementwise"), len(syms), 1)
            impls[name] = lambda args, attrs, fn=fn: fn(*args)
    return impls


def _exact(key: ValueKey, feed: dict[InputKey, np.ndarray], cat: Catalog, dps: int = 50) -> np.ndarray | None:
    to_mp = np.frompyfunc(lambda v: mpmath.mpc(v) if isinstance(v, complex) else mpmath.mpf(v), 1, 1)
    try:
        with mpmath.workdps(dps), np.errstate(all="ignore"):
            (value,) = evaluate([key], {k: to_mp(np.asarray(v).tolist()) for k, v in feed.items()}, _mp_impls(cat))
            as_complex = np.asarray(np.frompyfunc(complex, 1, 1)(value), dtype=object)
        return np.asarray(as_complex.tolist(), dtype=complex).reshape(key.aval.shape)
    except (LookupError, TypeError, ValueError, ArithmeticError):
        return None


_RW_DTYPES = ("float64", "complex128", "int64", "bool")


def _rewrite_samples(cat: Catalog, rw: Rewrite, names: list[str], impls, rng) -> Iterator[tuple[str, str, str]]:
    """(verdict, detail, dtypes) for each sample of the rewrite that satisfies its guards."""
    guarded = {a for g in rw.guards for a in g.args if a != "self"}
    # a sign guard's domain is sampled where it holds (constants moved into it)
    domains = {a: g.name for g in rw.guards for a in g.args if g.name in _SIGN_DOMAINS}
    kinds = [("input", "constant", "finite constant") if v in guarded else ("input",) for v in names]
    shapes = [[s, ()] for s in ((_LONG,), (2, 3, 4))]  # each variable: the full shape or a scalar
    for base, dts in itertools.product(shapes, itertools.product(_RW_DTYPES, repeat=len(names))):
        for kind, shape in itertools.product(itertools.product(*kinds), itertools.product(base, repeat=len(names))):
            b = FragmentBuilder("rewrite")
            avals = [Aval(s, dt) for s, dt in zip(shape, dts, strict=True)]
            vals = {v: _in_domain(_specials(a, p, k == "finite constant", rng), domains.get(v))
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
                rhs_key = None if isinstance(rhs, Zero) else b.key_of(rhs.ref)
                got = np.zeros(lhs.aval.shape, lhs.aval.dtype) if rhs_key is None else evaluate(
                    [rhs_key], feed, impls)[0]
                if rw.semantics == "real":
                    verdict = _compare_real(want, got, lhs, rhs_key, feed, vals, cat, impls)
                    if verdict is None:
                        continue
                    yield (*verdict, "/".join(dts))
                else:
                    yield (*_compare_sides(want, got, lhs, feed, vals, cat), "/".join(dts))


def _compare_sides(lhs_val, rhs_val, lhs: ValueKey, feed, vals, cat: Catalog) -> tuple[str, str]:
    """An exact rewrite keeps every value as IEEE arithmetic gives it, bit for bit (nan
    for nan; only a zero's sign may change): a tolerance let x + 1e-13 -> x through."""
    bad = ~_close(lhs_val, rhs_val, 0.0, 0.0)
    if not bad.any():
        return PASS, ""
    k = int(np.flatnonzero(bad)[0])
    at = ", ".join(f"{v}={_fmt(a.flat[k])}" for v, a in vals.items() if a.shape == lhs_val.shape)
    msg = f"at {at or f'element {k}'}: lhs {_fmt(lhs_val.flat[k])}, rhs {_fmt(rhs_val.flat[k])}"
    exact = _exact(lhs, feed, cat, _REAL_DPS)  # (digits for the whole range: exp(5e-324) is 1 + 5e-324)
    if exact is None:
        return FAIL, msg
    exact = exact.astype(lhs_val.dtype) if is_complex(lhs_val.dtype) else exact.real
    if _single_operation(lhs) and _close(exact, rhs_val, 0.0, 0.0)[bad].all():
        # one operation, and the rhs its correctly rounded value: IEEE's own result for it
        # (pow(x, 2) -> x * x, where libm's pow is an ulp off at some x)
        return PASS, f"the rhs is the lhs correctly rounded where they differ ({msg})"
    if _close(exact, rhs_val, 4 * float(np.finfo(exact.dtype).eps), 0.0)[bad].all():  # (to a few ulps)
        return WARN, f"{msg} (the lhs overflows or rounds in floating point; its exact value is the rhs)"
    return FAIL, msg


def _single_operation(key: ValueKey) -> bool:
    """Whether ``key`` is one operation on inputs and constants (one rounding in IEEE)."""
    return key.input is None and all(k.input is not None or k.op == "constant" for k in key.inputs)


_SIGN_DOMAINS = {"positive", "nonneg", "nonzero"}
_REAL_DPS = 650


def _in_domain(values: np.ndarray, guard: str | None) -> np.ndarray:
    """Sample values moved into a sign guard's domain (real dtypes; others unchanged)."""
    if guard is None or values.dtype.kind != "f":
        return values
    with np.errstate(all="ignore"):
        mag = np.abs(np.where(np.isfinite(values), values, 2.0))
    if guard == "positive":
        return np.where(mag > 0, mag, 0.5).astype(values.dtype)
    if guard == "nonneg":
        return mag.astype(values.dtype)
    return np.where(values != 0, values, 1.5).astype(values.dtype)


def _outside_reals(lhs: ValueKey, feed, impls) -> np.ndarray:
    """Elements where a sub-term of ``lhs`` divides by zero or is infinite."""
    keys, stack, seen = [], [lhs], set()
    while stack:
        k = stack.pop()
        if k in seen or k.input is not None:
            continue
        seen.add(k)
        keys.append(k)
        stack.extend(k.inputs)
    values = dict(zip(keys, evaluate(keys, feed, impls), strict=True))
    out = np.zeros(lhs.aval.shape, bool)
    for k in keys:
        if k.aval.shape != lhs.aval.shape:
            continue
        v = np.asarray(values[k])
        if v.dtype.kind in "fc":
            out |= np.isinf(v)
        if k.op == "div":
            d = np.asarray(values.get(k.inputs[1], evaluate([k.inputs[1]], feed, impls)[0]))
            out |= np.broadcast_to(d == 0, out.shape)
    return out


def _compare_real(lhs_val, rhs_val, lhs: ValueKey, rhs: ValueKey | None, feed, vals, cat: Catalog, impls
                  ) -> tuple[str, str] | None:
    """The verdict on one sample of a real rewrite (None: outside the real semantics)."""
    with np.errstate(all="ignore"):
        outside = _outside_reals(lhs, feed, impls)
    for a in vals.values():  # the real semantics is about finite values
        if a.dtype.kind in "fc":
            outside |= np.broadcast_to(~np.isfinite(a), outside.shape) if a.shape in ((), outside.shape) \
                else np.zeros_like(outside)
    lhs_val, rhs_val = np.broadcast_arrays(np.asarray(lhs_val), np.asarray(rhs_val))
    keep = ~outside
    if not keep.any():
        return None
    undefined = np.isnan(lhs_val) & keep  # a domain error in floating point: must stay one
    # equal floats pass; where they differ at all (rounding, cancellation, overflow, or a
    # constant below the tolerance a float comparison would give: x + 1e-25 -> x), exact values decide
    same = _close(lhs_val, rhs_val, 0.0, 0.0)
    if (keep & ~undefined & ~same).any():
        # digits enough for the whole double range (1e300 + 0.5 - 1e300, 5e-324 * 0.5 / 5e-324)
        exact_l = _exact(lhs, feed, cat, _REAL_DPS)
        exact_r = _exact(rhs, feed, cat, _REAL_DPS) if rhs is not None else np.zeros(lhs.aval.shape)
        if exact_l is not None and exact_r is not None:
            same = same | _close(exact_l, exact_r, 1e-20, 1e-30)
    bad = keep & np.where(undefined, ~np.isnan(rhs_val), ~same)
    if not bad.any():
        return PASS, ""
    k = int(np.flatnonzero(bad)[0])
    at = ", ".join(f"{v}={_fmt(a.flat[k])}" for v, a in vals.items() if a.shape == lhs_val.shape)
    return FAIL, (f"at {at or f'element {k}'}: lhs {_fmt(lhs_val.flat[k])}, rhs {_fmt(rhs_val.flat[k])} "
                  "(real semantics: exact values of both sides differ, or an undefined lhs became defined)")


def check_rewrite(cat: Catalog, rw: Rewrite, impls: dict[str, Impl]) -> Row:
    """The soundness row of one rewrite."""
    tags = " ".join(t for t, on in ((rw.semantics, rw.semantics != "exact"), ("normalizer", rw.by_normalizer),
                                    ("merge", rw.merge)) if on)
    rule = f"rewrite {tags + ': ' if tags else ''}{show(rw.lhs)} -> {show(rw.rhs)}" + (
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
