"""Taylor series and derivative tensors, built on ``tidu.jet`` and the Jacobians.

``series(f, x0, order)``: the Taylor coefficients of a univariate ``f`` about ``x0``,
numerically and symbolically (exact coefficients read from the simplified graph, printed
as a polynomial). ``derivative(f, order=k)``: the symmetric k-th derivative tensor of a
function of a vector, by nested forward mode (each level one JVP batched over the
identity, so entries share the lower levels' work), or only its unique entries.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from tidu.ops.graph_sympy import to_sympy
from tidu.ops.meaning import number
from tidu.transforms.display import expand
from tidu.transforms.inspection import make_graph
from tidu.transforms.jacobians import jacfwd
from tidu.transforms.jet import jet


def taylor_coefficients(f: Callable[..., Any], args: tuple[Any, ...], index: int, order: int) -> list[Any]:
    """``[c_0, ..., c_order]``, ``c_k = d^k f / d x_index^k / k!`` at ``args`` (one jet)."""
    seeds = tuple([np.float64(i == index)] + [np.float64(0.0)] * (order - 1) for i in range(len(args)))
    if order == 0:
        return [f(*args)]
    y0, ys = jet(f, args, seeds)
    return [y0] + [_over_factorial(y, k + 1) for k, y in enumerate(ys)]


def _over_factorial(y: Any, n: int) -> Any:
    """``y / n!`` in float64, also past n = 170 where ``n!`` overflows: powers of two taken
    out (exactly) 2**1000 at a time, so that a large ``y`` keeps its digits."""
    f = Fraction(math.factorial(n))
    while f > 2**1000:
        y = y * 2.0**-1000
        f /= 2**1000
    return y / float(f)


def format_polynomial(coefficients: list[Any], var: Any, about: Any, order: int) -> str:
    """``c0 + c1*(x - a) + ...`` in ascending powers (as ``sympy.series`` prints), with the
    order term ``O((x - a)**(order+1))``."""
    import sympy

    shift = var - about
    parts = []
    for k, c in enumerate(coefficients):
        if c == 0:
            continue
        term = c * shift ** k
        if k == 1 and shift.is_Add and term.is_Add:  # c*(x - a) kept whole, not c*x - c*a
            term = sympy.Mul(c, shift, evaluate=False) if c != 1 else sympy.Symbol(f"({shift})")
        text = str(term)
        if parts:
            parts.append(f"- {text[1:]}" if text.startswith("-") else f"+ {text}")
        else:
            parts.append(text)
    parts.append(("+ " if parts else "") + f"O({sympy.Pow(shift, order + 1)})")
    return " ".join(parts)


def _exact_number(c: Any) -> Any:
    """A float coefficient as the exact number it rounds: a fraction (0.5 is 1/2), or one
    of pi and E (erf's 2/sqrt(pi), a float constant of its rule); only a candidate within
    a few ulps of the float, else ``nsimplify``'s nearby fraction, as before."""
    import sympy

    value = float(c)
    plain = sympy.nsimplify(c)
    if not math.isfinite(value):
        return plain
    for candidate in (plain, sympy.nsimplify(c, [sympy.pi, sympy.E])):
        try:
            if abs(float(candidate) - value) <= 4 * math.ulp(value):
                return candidate
        except TypeError:  # not a real number
            continue
    return plain


class TaylorSeries:
    """The Taylor series of a univariate function about a point, truncated at ``order``:
    ``coefficients`` (floats, ``c_k = f^(k)(x0) / k!``), ``exact`` (SymPy numbers: the
    simplified graph read with ``x0`` as an exact SymPy number), ``str`` the polynomial,
    and a call evaluates the truncated polynomial."""

    def __init__(self, fun: Callable[[Any], Any], x0: float, order: int) -> None:
        self.fun, self.x0, self.order = fun, float(x0), order
        values = [np.asarray(v) for v in taylor_coefficients(fun, (np.float64(x0),), 0, order)]
        if values[0].shape != () or values[0].dtype.kind not in "fiu":
            raise TypeError(f"tidu.series: {getattr(fun, '__name__', 'fun')} must return a real scalar, got "
                            f"shape {values[0].shape} and dtype {values[0].dtype} (the series of one real "
                            f"function of one real variable)")
        self.coefficients = np.array([float(v) for v in values])

    def exact(self) -> list[Any]:
        """The coefficients as SymPy expressions (``exp(1)/2`` rather than 1.359...)."""
        def coefficients(x: Any) -> tuple[Any, ...]:
            return tuple(taylor_coefficients(self.fun, (x,), 0, self.order))

        graph = make_graph(coefficients, semantics="real")(np.float64(self.x0)).graph
        named, outs = to_sympy(graph, [number(self.x0)], cse=True)
        return [_exact_number(c) if c.is_Float else c for c in expand(named, outs)]

    def polynomial(self, var: Any = None) -> Any:
        """The truncated series as a SymPy expression in ``var`` (default real ``x``)."""
        import sympy

        var = sympy.Symbol("x", real=True) if var is None else var
        return sum((c * (var - number(self.x0)) ** k for k, c in enumerate(self.exact())), sympy.Integer(0))

    def __call__(self, x: Any) -> Any:
        h = np.asarray(x, dtype=np.float64) - self.x0
        return sum(c * h ** k for k, c in enumerate(self.coefficients))

    def __str__(self) -> str:
        import sympy

        return format_polynomial(self.exact(), sympy.Symbol("x", real=True), number(self.x0), self.order)

    def __repr__(self) -> str:
        return f"TaylorSeries({self})"


def series(fun: Callable[[Any], Any], x0: float, order: int) -> TaylorSeries:
    """The Taylor series of ``fun`` (a function of one real scalar) about ``x0`` up to
    ``(x - x0)**order``, by one ``tidu.jet``: ``.coefficients`` numerically, ``.exact()``
    and ``str`` symbolically (``docs/transforms.md#taylor-series``)."""
    if not callable(fun):
        raise TypeError(f"tidu.series takes a function, got {type(fun).__name__}")
    if isinstance(order, bool) or not isinstance(order, int) or order < 0:
        raise ValueError(f"tidu.series: order must be a non-negative int, got {order!r}")
    if isinstance(x0, bool) or not isinstance(x0, int | float | np.floating | np.integer):
        raise TypeError(f"tidu.series: x0 must be a real number, got {type(x0).__name__}")
    if not math.isfinite(float(x0)):
        raise ValueError(f"tidu.series: x0 must be finite, got {x0!r}")
    return TaylorSeries(fun, float(x0), order)


def unique_indices(n: int, order: int) -> list[tuple[int, ...]]:
    """The index tuples ``i1 <= i2 <= ... <= ik`` of a symmetric tensor's unique entries."""
    return list(itertools.combinations_with_replacement(range(n), order))


def derivative(fun: Callable[[Any], Any], order: int = 1, *, unique: bool = False) -> Callable[[Any], Any]:
    """``derivative(f, order=k)(x)``: the k-th derivative tensor of ``f`` at the vector ``x``,
    shaped ``f(x).shape + (n,) * k``, by k nested ``tidu.jacfwd``. With ``unique=True`` only
    the entries with ``i1 <= ... <= ik`` (``unique_indices(n, k)`` order) along the last
    axis: the tensor is symmetric in its last k axes, the others repeat them."""
    if not callable(fun):
        raise TypeError(f"tidu.derivative takes a function, got {type(fun).__name__}")
    if isinstance(order, bool) or not isinstance(order, int) or order < 1:
        raise ValueError(f"tidu.derivative: order must be a positive int, got {order!r}")
    g = fun
    for _ in range(order):
        g = jacfwd(g)

    def tensor(x: Any) -> Any:
        t = g(x)
        if not unique:
            return t
        n = np.shape(x)[0] if np.ndim(x) else 1
        flat = np.asarray(t).reshape(np.shape(t)[: np.ndim(t) - order] + (n,) * order)
        return np.stack([flat[(..., *idx)] for idx in unique_indices(n, order)], axis=-1)

    tensor.__name__ = f"derivative{order}"
    return tensor


__all__ = ["TaylorSeries", "derivative", "format_polynomial", "series", "taylor_coefficients", "unique_indices"]
