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

Numbers come from ``tidu.ops.reference``; a primitive of an extra rule file without NumPy
semantics is evaluated through its ``meaning`` (a SymPy tree built from the syntax tree,
``lambdify``-ed). Everything runs through the real engine (``linearize``,
``linear_transpose``, ``instantiate``) over the loaded catalog. See docs/verification.md.

The modules, in import order: ``_report`` (rows, the table), ``_sympy`` (SymPy trees and
verdicts), ``_eval`` (evaluating keys), ``_samples`` (sample tables), ``_numeric`` (JVP
and transpose rows), ``_rewrites`` (rewrite soundness), ``_driver`` (``check_rules``).
The ``tidu check-rules`` command is ``tidu.cli.check_rules``.
"""

from tidu.checkrules._driver import check_rules
from tidu.checkrules._eval import Impl, NoSemantics, evaluate, implementations
from tidu.checkrules._mutate import run_mutants
from tidu.checkrules._mutate import summary as mutation_summary
from tidu.checkrules._numeric import check_jvp, check_transpose
from tidu.checkrules._report import EXEMPT, FAIL, PASS, SKIP, WARN, Report, Row
from tidu.checkrules._rewrites import check_rewrite
from tidu.checkrules._samples import draw, samples
from tidu.checkrules._sympy import SYMPY_TIMEOUT, template_expr
from tidu.checkrules.loading import UnsoundRewriteError, vet_catalog
from tidu.ops.catalog import use_catalog as using_catalog

__all__ = [
    "EXEMPT", "FAIL", "Impl", "NoSemantics", "PASS", "Report", "Row", "SKIP", "SYMPY_TIMEOUT", "WARN", "check_jvp",
    "UnsoundRewriteError", "check_rewrite", "check_rules", "check_transpose", "draw", "evaluate",
    "implementations", "mutation_summary", "run_mutants", "samples", "template_expr", "using_catalog",
    "vet_catalog",
]
