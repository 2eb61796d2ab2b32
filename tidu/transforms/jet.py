"""Taylor mode: ``jet(f, primals, series)`` propagates truncated Taylor series through
``f``, with the meaning of ``jax.experimental.jet``.

A primal ``x0`` with series ``[x1, ..., xK]`` is the path
``x(t) = x0 + x1 t + x2 t^2/2! + ... + xK t^K/K!``; the result is ``f(x0)`` and the
derivatives ``d^k/dt^k f(x(t))`` at ``t = 0`` for ``k = 1..K`` (JAX's convention). In this
form every recurrence below has binomial coefficients, integers, so a symbolic jet
(``tidu.make_graph`` of a function that calls ``jet``) has exact constants, which the
e-graph folds without rounding.

Where the rules live: in ``RULES`` below, one entry per primitive. The rule DSL's
templates are single expressions of a primitive's operands and tangents; a Taylor
recurrence is a loop over orders with sums whose length depends on the order, which the
template language has no way to say. So the recurrences are Python, one readable table
keyed by primitive name, each rule written with ``tidu.op`` (so a jet works on NumPy
values and inside every transform). A primitive without an entry (a user's primitive,
the decompositions of linear algebra) goes through the generic fallback: the
derivatives of ``t -> prim(x(t))`` by nested ``tidu.jvp`` (repeated linearization), whose
size grows quickly with the order: meant for a few orders.

``f`` is traced once on the primals' avals (unsimplified, ``stop_gradient`` kept) and its
graph is read node by node, so ``f`` must not close over values traced by an enclosing
transform: pass them as primals with zero series instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tidu.core.keys import Literal, is_complex, is_inexact
from tidu.core.pytree import flatten
from tidu.numpy import op
from tidu.ops.catalog import INTERNAL
from tidu.trace.tracing import Tracer
from tidu.transforms.api import jvp
from tidu.transforms.custom import jvp_tangent
from tidu.transforms.staging import Stage

# A series [x0, x1, ..., xK]: x0 the primal, then the derivative-form coefficients;
# None is a coefficient known to be zero (it builds nothing).
Series = list[Any]
Rule = Callable[[list[Series], dict[str, Any], int], Series]


class JetError(ValueError):
    """Bad arguments to ``tidu.jet``, or a graph op it cannot propagate series through."""


# --- arithmetic on coefficients that may be None (a symbolic zero) ------------------------


def _is_const(a: Any, value: float) -> bool:
    """``a`` is a concrete array equal to ``value`` everywhere (a seed such as [1, 0, 0])."""
    return isinstance(a, np.ndarray | np.generic | float | int) and bool(np.all(np.asarray(a) == value))


def _add(a: Any, b: Any) -> Any:
    if a is None:
        return b
    return a if b is None else a + b


def _sub(a: Any, b: Any) -> Any:
    if b is None:
        return a
    return -b if a is None else a - b


def _mul(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    if _is_const(a, 1.0) and np.ndim(a) <= np.ndim(b):
        return b
    if _is_const(b, 1.0) and np.ndim(b) <= np.ndim(a):
        return a
    return a * b


def _scale(c: int, a: Any) -> Any:
    if a is None or c == 0:
        return None
    if c == 1:
        return a
    return -a if c == -1 else a * float(c)


def _leibniz(a: Series, b: Series, m: int, lo: int = 0, hi: int | None = None,
             mul: Callable[[Any, Any], Any] = _mul) -> Any:
    """sum_{i=lo..hi} C(m, i) a_i b_{m-i}: the m-th derivative of a product (Leibniz)."""
    total = None
    for i in range(lo, m + 1 if hi is None else hi + 1):
        total = _add(total, _scale(math.comb(m, i), mul(a[i], b[m - i]) if a[i] is not None
                                   and b[m - i] is not None else None))
    return total


def _zeros_like(x: Any) -> Any:
    return op("mul")(x, 0.0) if isinstance(x, Tracer) else np.zeros_like(x)


def _dense(c: Any, like: Any) -> Any:
    return _zeros_like(like) if c is None else c


# --- rules ----------------------------------------------------------------------------------


def _ode(u: Series, y0: Any, factor: Callable[[Series, int], Any], K: int) -> Series:
    """y with y' = a * u' where a's m-th coefficient is ``factor(y, m)`` (known from y_0..y_m):
    y_k = (a u')_{k-1} = sum_{i=0..k-1} C(k-1, i) a_i u_{k-i}."""
    y: Series = [y0]
    a: Series = []
    for k in range(1, K + 1):
        a.append(factor(y, k - 1))
        total = None
        for i in range(k):
            if a[i] is not None and u[k - i] is not None:
                total = _add(total, _scale(math.comb(k - 1, i), _mul(a[i], u[k - i])))
        y.append(total)
    return y


def _exp(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
    return _ode(xs[0], op("exp")(xs[0][0]), lambda y, m: y[m], K)


def _expm1(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
    y0 = op("expm1")(xs[0][0])
    e0 = op("exp")(xs[0][0])  # (expm1)' = expm1 + 1: the factor's 0th coefficient is exp(x)
    return _ode(xs[0], y0, lambda y, m: e0 if m == 0 else y[m], K)


def _tanh(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
    # tanh' = 1 - tanh^2
    def factor(y: Series, m: int) -> Any:
        if m == 0:
            return 1.0 - y[0] * y[0]
        sq = _leibniz(y, y, m)
        return None if sq is None else -sq
    return _ode(xs[0], op("tanh")(xs[0][0]), factor, K)


def _sin_cos(u: Series, K: int) -> tuple[Series, Series]:
    s: Series = [op("sin")(u[0])]
    c: Series = [op("cos")(u[0])]
    for k in range(1, K + 1):  # s' = c u', c' = -s u'
        sk = ck = None
        for i in range(k):
            if u[k - i] is not None:
                w = math.comb(k - 1, i)
                sk = _add(sk, _scale(w, _mul(c[i], u[k - i])))
                ck = _sub(ck, _scale(w, _mul(s[i], u[k - i])))
        s.append(sk)
        c.append(ck)
    return s, c


def _sin(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
    return _sin_cos(xs[0], K)[0]


def _cos(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
    return _sin_cos(xs[0], K)[1]


def _quotient(x: Series, y: Series, w0: Any, K: int) -> Series:
    """w = x / y from w y = x: w_m = (x_m - sum_{i=1..m} C(m, i) y_i w_{m-i}) / y_0."""
    w: Series = [w0]
    for m in range(1, K + 1):
        num = _sub(x[m], _leibniz(y, w, m, lo=1))
        w.append(None if num is None else num / y[0])
    return w


def _div(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
    return _quotient(xs[0], xs[1], op("div")(xs[0][0], xs[1][0]), K)


def _log_like(u: Series, y0: Any, base: Any, K: int) -> Series:
    """y' = u' / (base + u - u_0): the quotient's series shifted by one order."""
    du = u[1:] + [None]
    q = _quotient(du, [base, *u[1:]], None if du[0] is None else du[0] / base, K - 1)
    return [y0, *q[:K]]


def _log(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
    return _log_like(xs[0], op("log")(xs[0][0]), xs[0][0], K)


def _log1p(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
    return _log_like(xs[0], op("log1p")(xs[0][0]), xs[0][0] + 1.0, K)


def _sqrt_series(u: Series, y0: Any, K: int) -> Series:
    """y^2 = u: y_m = (u_m - sum_{i=1..m-1} C(m, i) y_i y_{m-i}) / (2 y_0)."""
    y: Series = [y0]
    two_y0 = None
    for m in range(1, K + 1):
        y.append(None)  # y_m is not in the sum below (i runs from 1 to m-1)
        num = _sub(u[m], _leibniz(y, y, m, lo=1, hi=m - 1))
        if num is not None and two_y0 is None:
            two_y0 = 2.0 * y0
        y[m] = None if num is None else num / two_y0
    return y


def _sqrt(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
    return _sqrt_series(xs[0], op("sqrt")(xs[0][0]), K)


def _rsqrt(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
    s = _sqrt_series(xs[0], op("sqrt")(xs[0][0]), K)
    return _quotient([1.0] + [None] * K, s, op("rsqrt")(xs[0][0]), K)


def _cbrt(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
    """y^3 = u, with s = y^2: u_m = (s y)_m, whose only terms in y_m make 3 y_0^2 y_m, so
    y_m = (u_m - y_0 r_m - sum_{i=1..m-1} C(m, i) s_i y_{m-i}) / (3 y_0^2), where
    r_m = sum_{i=1..m-1} C(m, i) y_i y_{m-i} and s_m = 2 y_0 y_m + r_m."""
    u = xs[0]
    y0 = op("cbrt")(u[0])
    y: Series = [y0]
    s: Series = [None]  # (s_0 = y_0^2 is in the divisor only)
    three_y0_sq = None
    for m in range(1, K + 1):
        y.append(None)  # y_m and s_m are not in the sums below (i runs from 1 to m-1)
        s.append(None)
        r = _leibniz(y, y, m, lo=1, hi=m - 1)
        num = _sub(_sub(u[m], _mul(y0, r)), _leibniz(s, y, m, lo=1, hi=m - 1))
        if num is not None and three_y0_sq is None:
            three_y0_sq = 3.0 * (y0 * y0)
        y[m] = None if num is None else num / three_y0_sq
        s[m] = _add(_scale(2, _mul(y0, y[m])), r)
    return y


def _bell(x: Series, K: int) -> dict[tuple[int, int], Any]:
    """The partial Bell polynomials B_{m,k}(x_1, ..., x_{m-k+1}) for 1 <= k <= m <= K (None
    where zero): B_{m,k} = sum_{i=1..m-k+1} C(m-1, i-1) x_i B_{m-i,k-1}, B_{0,0} = 1."""
    B: dict[tuple[int, int], Any] = {(0, 0): 1.0}
    for m in range(1, K + 1):
        for k in range(1, m + 1):
            total = None
            for i in range(1, m - k + 2):
                prev = B.get((m - i, k - 1))
                if x[i] is not None and prev is not None:
                    total = _add(total, _scale(math.comb(m - 1, i - 1), _mul(x[i], prev)))
            B[m, k] = total
    return B


def _pow_constant(x: Series, p: np.ndarray, w0: Any, K: int) -> Series:
    """x ** p for a concrete exponent by Faa di Bruno: y_m = sum_k f_k B_{m,k}(x_1, ...),
    f_k = p (p - 1) ... (p - k + 1) x_0 ** (p - k). No division by x_0, so a base of zero
    gives the derivatives of grad's chain (x ** 2.5 at 0: 0, 0, inf), where the quotient
    recurrence divides 0 by 0; a factor that is zero (an integer p below k) stays zero."""
    B = _bell(x, K)
    f: list[Any] = [None]
    c = np.ones_like(p)
    for k in range(1, K + 1):
        c = c * (p - (k - 1))
        if not np.any(c):
            f.append(None)
            continue
        exponent = np.where(c == 0, 0, p - k).astype(p.dtype)  # x_0 ** 0 = 1 beside a zero factor
        f.append(_mul(op("pow")(x[0], exponent), c))
    return [w0] + [_leibniz_sum(f, B, m) for m in range(1, K + 1)]


def _leibniz_sum(f: list[Any], B: dict[tuple[int, int], Any], m: int) -> Any:
    """sum_{k=1..m} f_k B_{m,k}."""
    total = None
    for k in range(1, m + 1):
        if f[k] is not None and B[m, k] is not None:
            total = _add(total, _mul(f[k], B[m, k]))
    return total


def _pow(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
    x, p = xs
    w0 = op("pow")(x[0], p[0])
    if all(c is None for c in p[1:]) and isinstance(p[0], np.ndarray) and is_inexact(p[0].dtype) \
            and not is_complex(p[0].dtype):
        return _pow_constant(x, p[0], w0, K)
    if all(c is None for c in p[1:]):
        # x w' = p w x', for w' (=: q): q_m = (p (w x')_m - sum_{i=1..m} C(m, i) x_i q_{m-i}) / x_0
        w: Series = [w0]
        dx = x[1:] + [None]
        q: Series = []
        for m in range(K):
            rhs = _leibniz(w, dx, m)
            rhs = None if rhs is None else p[0] * rhs
            for i in range(1, m + 1):
                if x[i] is not None and q[m - i] is not None:
                    rhs = _sub(rhs, _scale(math.comb(m, i), x[i] * q[m - i]))
            q.append(None if rhs is None else rhs / x[0])
            w.append(q[m])
        return w
    # x ** p = exp(p log x) where the exponent moves too
    lx = _log([x], {}, K)
    e = [_leibniz(p, lx, m) if m else p[0] * lx[0] for m in range(K + 1)]
    return _ode(e, w0, lambda y, m: y[m], K)


def _one_minus_square(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
    """(1 - x)(1 + x): its series are those of -x^2 past the primal (Leibniz)."""
    x = xs[0]
    return [op("one_minus_square")(x[0])] + [_scale(-1, _leibniz(x, x, m)) for m in range(1, K + 1)]


def _mul_rule(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
    return [xs[0][0] * xs[1][0]] + [_leibniz(xs[0], xs[1], m) for m in range(1, K + 1)]


def _dot_general(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
    def dot(a: Any, b: Any) -> Any:
        return op("dot_general")(a, b, **attrs)
    return [dot(xs[0][0], xs[1][0])] + [_leibniz(xs[0], xs[1], m, mul=dot) for m in range(1, K + 1)]


def _linear(name: str) -> Rule:
    """A primitive linear in all its operands jointly: each coefficient goes through it."""
    def rule(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
        prim = op(name)
        out = [prim(*(s[0] for s in xs), **attrs)]
        for k in range(1, K + 1):
            cs = [s[k] for s in xs]
            if all(c is None for c in cs):
                out.append(None)
            elif name in ("add", "sub") and any(c is None for c in cs):
                out.append((_add if name == "add" else _sub)(*cs))
            else:
                out.append(prim(*(_dense(c, s[0]) for c, s in zip(cs, xs, strict=True)), **attrs))
        return out
    return rule


def _linear_before_start(name: str) -> Rule:
    """dynamic_slice(x, start), dynamic_update_slice(x, update, start): linear in the
    operands before the integer start, which every coefficient shares."""
    def rule(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
        prim, start = op(name), xs[-1][0]
        out = [prim(*(s[0] for s in xs[:-1]), start, **attrs)]
        for k in range(1, K + 1):
            cs = [s[k] for s in xs[:-1]]
            out.append(None if all(c is None for c in cs) else
                       prim(*(_dense(c, s[0]) for c, s in zip(cs, xs, strict=False)), start, **attrs))
        return out
    return rule


def _constant_series(name: str) -> Rule:
    """Piecewise constant (sign, floor, ...) or boolean (compare): no series. The sign of
    a complex value, z / |z|, is smooth: it goes through the fallback."""
    def rule(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
        if any(is_complex(str(np.dtype(s[0].dtype))) for s in xs if hasattr(s[0], "dtype")):
            return _fallback(name, xs, attrs, K)
        return [op(name)(*(s[0] for s in xs), **attrs)] + [None] * K
    return rule


def _abs(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
    x = xs[0]
    if is_complex(str(np.dtype(x[0].dtype))):
        return _fallback("abs", xs, attrs, K)
    # |x| = x near x0 >= 0 and -x below, as abs's JVP rule (rules/complex.rules) takes it at
    # 0, the derivative from the right (JAX's): Taylor mode agrees with the other modes there
    # (sign(0) = 0 made every coefficient 0: x*|x| about 0 printed as O(x**4))
    right = op("compare")(x[0], 0.0, direction="GE")
    return [op("abs")(x[0])] + [None if c is None else op("select")(right, c, op("neg")(c)) for c in x[1:]]


def _select_like(pred: Any, y0: Any, a: Series, b: Series, K: int) -> Series:
    out = [y0]
    for k in range(1, K + 1):
        if a[k] is None and b[k] is None:
            out.append(None)
        else:
            out.append(op("select")(pred, _dense(a[k], a[0]), _dense(b[k], b[0])))
    return out


def _select(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
    pred, a, b = xs
    return _select_like(pred[0], op("select")(pred[0], a[0], b[0]), a, b, K)


def _extremum(name: str, direction: str) -> Rule:
    # away from ties the larger (smaller) operand's series; at a tie the mean of the two,
    # every order: the JVP rules' mean at first order (tidu.jvp's and JAX's), and
    # jax.experimental.jet's rule at every order
    def rule(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
        x, y = xs
        pred = op("compare")(x[0], y[0], direction=direction)
        tie = op("compare")(x[0], y[0], direction="EQ")
        out = _select_like(pred, op(name)(x[0], y[0]), x, y, K)
        for k in range(1, K + 1):
            if out[k] is not None:
                mean = (_dense(x[k], x[0]) + _dense(y[k], y[0])) * 0.5
                out[k] = op("select")(tie, mean, out[k])
        return out
    return rule


def _rem(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
    x, y = xs
    out = op("rem")(x[0], y[0])
    if all(c is None for c in y[1:]):
        return [out, *x[1:]]
    ratio = x[0] / y[0]  # fmod(x, y) = x - trunc(x / y) y, trunc locally constant
    trunc = op("select")(op("compare")(ratio, 0.0, direction="LT"), op("ceil")(ratio), op("floor")(ratio))
    return [out] + [_sub(x[k], None if y[k] is None else trunc * y[k]) for k in range(1, K + 1)]


def _linear_in_last(name: str) -> Rule:
    """triangular_solve(a, b), solve(a, b): linear in b while a has no series."""
    def rule(xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
        if all(c is None for c in xs[0][1:]):
            a0 = xs[0][0]
            prim = op(name)
            out = [prim(a0, xs[1][0], **attrs)]
            return out + [None if c is None else prim(a0, c, **attrs) for c in xs[1][1:]]
        return _fallback(name, xs, attrs, K)
    return rule


# --- the generic fallback: repeated linearization ----------------------------------------------


def _fallback(name: str, xs: list[Series], attrs: dict[str, Any], K: int) -> Series:
    """The derivatives of h(t) = prim(x(t)) at t = 0 by nested ``tidu.jvp`` (each order one
    more linearization of the one before)."""
    prim = op(name)
    y0 = prim(*(s[0] for s in xs), **attrs)
    # an integer or boolean result (compare of complex values) has no series: its tangents are float0
    if all(c is None for s in xs for c in s[1:]) or not is_inexact(str(np.dtype(y0.dtype))):
        return [y0] + [None] * K

    def path(s: Series, t: Any) -> Any:
        total, power = s[0], None
        for k in range(1, len(s)):
            power = t if power is None else power * t
            if s[k] is not None:
                total = total + s[k] * (power / float(math.factorial(k)))
        return total

    def h(t: Any) -> Any:
        return prim(*(path(s, t) for s in xs), **attrs)

    def derivative(g: Callable[[Any], Any]) -> Callable[[Any], Any]:
        return lambda t: jvp(g, (t,), (np.float64(1.0),))[1]

    out, g = [y0], h
    for _ in range(K):
        g = derivative(g)
        out.append(g(np.float64(0.0)))
    return out


_LINEAR = ("add", "sub", "neg", "conj", "real", "imag", "complex", "convert", "broadcast_in_dim",
           "reshape", "transpose", "reverse", "reduce_sum", "slice", "pad", "concatenate", "triangle",
           "fft", "ifft", "rfft", "irfft")
_PIECEWISE_CONSTANT = ("sign", "floor", "ceil", "rint", "compare")

# primitive -> its Taylor rule; anything else: _fallback
RULES: dict[str, Rule] = {
    **{name: _linear(name) for name in _LINEAR},
    **{name: _constant_series(name) for name in _PIECEWISE_CONSTANT},
    "mul": _mul_rule,
    "dot_general": _dot_general,
    "div": _div,
    "pow": _pow,
    "one_minus_square": _one_minus_square,
    "exp": _exp,
    "expm1": _expm1,
    "log": _log,
    "log1p": _log1p,
    "sin": _sin,
    "cos": _cos,
    "tanh": _tanh,
    "sqrt": _sqrt,
    "rsqrt": _rsqrt,
    "cbrt": _cbrt,
    "abs": _abs,
    "select": _select,
    "maximum": _extremum("maximum", "GT"),
    "minimum": _extremum("minimum", "LT"),
    "rem": _rem,
    "dynamic_slice": _linear_before_start("dynamic_slice"),
    "dynamic_update_slice": _linear_before_start("dynamic_update_slice"),
    "triangular_solve": _linear_in_last("triangular_solve"),
    "solve": _linear_in_last("solve"),
}


# --- custom_jvp functions: by their rule ---------------------------------------------------------


def _custom_jvp_series(attrs: Any, y0: Any, args: list[Series], K: int) -> Series:
    """The series of a custom_jvp function's output y(t) = f(x(t)) from its JVP rule, not
    from the ops of its body: y' = rule_tangent(x, x') along the path, so y_1..y_K are the
    jet of order K - 1 of t -> rule_tangent(x(t), x'(t)), x'(t) being the path of x_1 with
    series [x_2, ..., x_K]. The body may be correct in value only (logaddexp's has kinks
    at the tie that its rule smooths over); every other transform uses the rule too.
    (JAX's jet differentiates the body.)"""
    if all(c is None for s in args for c in s[1:]):
        return [y0] + [None] * K
    tangent = jvp_tangent(attrs)
    n = len(args)
    primals = [s[0] for s in args] + [_dense(s[1], s[0]) for s in args]  # (zeros: no tangent)
    series = [[_dense(c, s[0]) for c in s[1:K]] for s in args] + \
             [[_dense(c, s[0]) for c in s[2:K + 1]] for s in args]
    g0, gs = jet(lambda *v: tangent(v[:n], v[n:]), primals, series)
    return [y0, g0, *[None if _is_const(g, 0.0) else g for g in gs]]


# --- the transform ------------------------------------------------------------------------------


def _leaf(x: Any, where: str) -> Any:
    if isinstance(x, Tracer):
        return x
    if isinstance(x, bool) or not isinstance(x, int | float | complex | np.ndarray | np.generic):
        raise JetError(f"tidu.jet: {where} must be an array or a number, got {type(x).__name__}")
    return np.asarray(x, dtype=np.float64) if isinstance(x, int | float) else np.asarray(x)


def _example(x: Any) -> np.ndarray:
    return np.zeros(x.shape, dtype=x.dtype)


def jet(fun: Callable[..., Any], primals: Sequence[Any], series: Sequence[Sequence[Any]],
        ) -> tuple[Any, list[Any]]:
    """Truncated Taylor propagation through ``fun`` (``jax.experimental.jet``'s meaning):
    ``primals`` are ``fun``'s positional arguments (arrays or numbers), ``series[i]`` the
    derivative-form coefficients ``[x1, ..., xK]`` of argument i's path (same K for all,
    each shaped like its primal). Returns ``(fun(*primals), [y1, ..., yK])`` with ``y_k``
    the k-th derivative of ``fun`` along the path at t = 0; a tuple of outputs gives a
    tuple of primals and a tuple of series lists. Coefficients that are exact concrete
    zeros build nothing (like JAX's symbolic zeros)."""
    if not callable(fun):
        raise JetError(f"tidu.jet takes a function, got {type(fun).__name__}")
    if not isinstance(primals, tuple | list) or not isinstance(series, tuple | list):
        raise JetError("tidu.jet: primals and series must be tuples (one entry per argument)")
    if len(primals) != len(series):
        raise JetError(f"tidu.jet: {len(primals)} primal(s) but {len(series)} series")
    orders = {len(s) if isinstance(s, tuple | list) else -1 for s in series}
    if -1 in orders:
        raise JetError("tidu.jet: each series must be a list of coefficients [x1, ..., xK]")
    if len(orders) > 1:
        raise JetError(f"tidu.jet: the series have different lengths {sorted(orders)}; give each K terms")
    K = orders.pop() if orders else 0
    xs = [_leaf(p, f"primal {i}") for i, p in enumerate(primals)]
    ins: list[Series] = []
    for i, (x, s) in enumerate(zip(xs, series, strict=True)):
        coeffs = [_leaf(c, f"series {i} term {k + 1}") for k, c in enumerate(s)]
        for k, c in enumerate(coeffs):
            if tuple(c.shape) != tuple(x.shape):
                raise JetError(f"tidu.jet: series {i} term {k + 1} has shape {tuple(c.shape)}, "
                               f"its primal {tuple(x.shape)}")
        ins.append([x] + [None if _is_const(c, 0.0) else c for c in coeffs])
    # stop_gradient stays in the graph (marks kept): its series is the primal alone
    with Stage("jet") as st:
        traced = [st.add_inputs(_example(x), f"x{i}") for i, x in enumerate(xs)]
        keys = st.keys(flatten(fun(*traced))[0])
        del traced
    graph = st.graph(keys, simplify=False, last=True, keep_marks=True)
    if len(graph.inputs) != len(xs):
        raise JetError("tidu.jet: primals must be arrays or numbers (pytrees are not supported)")
    values: dict[int, Series] = dict(zip(graph.inputs, ins, strict=True))
    for i, node in enumerate(graph.nodes):
        if node.op is None:
            continue
        mark = INTERNAL.get(node.op)
        if node.op == "custom_jvp_call" and K:
            values[i] = _custom_jvp_series(node.attrs, values[node.inputs[0]][0],
                                           [values[j] for j in node.inputs[1:]], K)
            continue
        if mark is not None and mark.strip is not None:
            # a custom_vjp call is its function's value (forward mode has no rule of it, and
            # JAX's jet ignores it too); stop_gradient is a constant along the path
            value = values[node.inputs[mark.strip(node)]]
            values[i] = [value[0]] + [None] * K if node.op == "stop_gradient" else value
            continue
        attrs = dict(node.attrs.items()) if node.attrs else {}
        if node.op == "constant":
            lit: Literal = attrs["value"]
            values[i] = [np.asarray(lit.array)] + [None] * K
            continue
        args = [values[j] for j in node.inputs]
        rule = RULES.get(node.op)
        values[i] = rule(args, attrs, K) if rule is not None else _fallback(node.op, args, attrs, K)
    outs = []
    for o in graph.outputs:
        s = values[o]
        outs.append((s[0], [_dense(c, s[0]) for c in s[1:]]))
    if len(outs) == 1:
        return outs[0]
    return tuple(p for p, _ in outs), tuple(s for _, s in outs)  # type: ignore[return-value]


__all__ = ["RULES", "JetError", "jet"]
