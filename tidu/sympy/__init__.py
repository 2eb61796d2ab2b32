"""Bridge to SymPy: SymPy expressions as tidu functions, tidu graphs as SymPy, and
checks of tidu's derivatives against SymPy's.

- ``from_sympy(expr, symbols)``: a function of the symbols (positionally) that tidu
  transforms can trace.
- ``to_sympy(graph, symbols=None)``: the outputs of a ``MaterializedGraph`` as SymPy,
  each elementwise primitive through its ``meaning`` in the rule files.
- ``check_gradient`` / ``check_hessian`` / ``check_derivative``: tidu's derivative in each
  mode against ``sympy.diff`` / ``sympy.hessian``, symbolically and at points, with
  ``assume`` and a ``timeout`` for the symbolic step; see ``CheckReport``.

This module is ``tidu.sympy``; it imports the real SymPy with absolute imports. The
conversions are in ``tidu.sympy.bridge``, the checks in ``tidu.sympy.check``, the
symbolic comparison (and its time bound) in ``tidu.sympy.symbolic``; this module
re-exports them. The checks call ``from_sympy`` and ``to_sympy`` through
``tidu.sympy.bridge`` and ``derivative_fn``, ``make_graph`` and ``flat_outputs`` through
``tidu.sympy.check``, so replacing them there (as tests do) changes what the checks run.
"""

from __future__ import annotations

from tidu.sympy.bridge import from_sympy, number, to_sympy
from tidu.sympy.check import (
    DEFAULT_TIMEOUT,
    GRADIENT_MODES,
    HESSIAN_MODES,
    CheckReport,
    EntryCheck,
    check_derivative,
    check_gradient,
    check_hessian,
    derivative_fn,
    flat_outputs,
    make_graph,
    pointwise,
    real_symbols,
)
from tidu.sympy.symbolic import compare, symbolic_difference

__all__ = [
    "DEFAULT_TIMEOUT", "GRADIENT_MODES", "HESSIAN_MODES", "CheckReport", "EntryCheck", "check_derivative",
    "check_gradient", "check_hessian", "compare", "derivative_fn", "flat_outputs", "from_sympy", "make_graph",
    "number", "pointwise", "real_symbols", "symbolic_difference", "to_sympy",
]
