"""tidu: symbolic automatic differentiation on an e-graph.

The user API: ``tidu.numpy`` (a NumPy-like front end), the JAX-like transforms (``grad``,
``jvp``, ``vjp``, ``hessian``, ``vmap``, ``jit``…), inspection (``make_graph``,
``to_stablehlo``), proofs of equality, user rule files and user-defined derivatives.

The pipeline by hand, one level down (``tidu.passes``, docs/concepts.md): build fragments
-> ``resolve`` -> ``passes.linearize`` -> [``passes.linear_transpose``] -> ``resolve`` ->
... -> ``materialize_merge`` (e-graph extraction) -> ``compile`` -> eval / lowering.
``tidu.linearize`` and ``tidu.linear_transpose`` are JAX's transforms of functions.
docs/architecture.md says which stage package holds what.
"""

import contextlib
from pathlib import Path

from tidu import checkpoint_policies, dtypes, lax, nn, numpy, passes, random, scipy, tree_util
from tidu.ad.instantiate import ADRuleError
from tidu.ad.linearize import LinearizedGraph
from tidu.checkpoint_policies import checkpoint_name
from tidu.core.graph import MaterializedGraph
from tidu.core.keys import (
    PRIMARY,
    Attrs,
    Aval,
    Cotangent,
    Derived,
    Input,
    InputKey,
    Linearized,
    Literal,
    Named,
    Role,
    Tangent,
    ValueKey,
)
from tidu.core.pytree import tree_map
from tidu.core.resources import LimitError, resource_limits, set_resource_limits
from tidu.dtypes import float0
from tidu.lowering.compile import InputError, Program, cache_info, clear_cache, compile
from tidu.lowering.saving import ProgramFileError
from tidu.numpy import op
from tidu.ops.catalog import Catalog, OpError, catalog
from tidu.ops.needs import CatalogMismatchError
from tidu.simplify.budget import EGraphLimits, Limits
from tidu.simplify.materialize import materialize_merge
from tidu.simplify.semantics import current_semantics, rewrite_semantics
from tidu.trace.fragments import External, Fragment, FragmentBuilder, Local
from tidu.trace.resolve import ResolvedView, UnresolvedKeyError, resolve
from tidu.trace.tracing import TraceError, Tracer
from tidu.transforms import traced_calls as _traced_calls  # noqa: F401 (installs tidu.trace.evaluator)
from tidu.transforms.api import grad, jit, jvp, linear_transpose, linearize, value_and_grad, vjp, vmap
from tidu.transforms.custom import checkpoint, custom_jvp, custom_vjp, remat, stop_gradient
from tidu.transforms.elementary import ElementaryDerivative, NotElementary, elementary_derivative
from tidu.transforms.inspection import (
    GraphView,
    ShapeDtypeStruct,
    eval_shape,
    load_program,
    make_graph,
    to_c,
    to_numpy_source,
    to_stablehlo,
)
from tidu.transforms.interop import to_jax
from tidu.transforms.jacobians import hessian, hvp, jacfwd, jacobian, jacrev
from tidu.transforms.jet import jet
from tidu.transforms.prove import Proof, prove_equal
from tidu.transforms.sparse_ad import hessian_sparsity, jacobian_sparsity
from tidu.transforms.taylor import TaylorSeries, derivative, series
from tidu.transforms.transformed import clear_trace_cache, trace_cache_info


def load_rules(*paths: str | Path, trusted: bool = False) -> Catalog:
    """Load rule files for the whole process, their rewrites checked for soundness first
    (``tidu.checkrules.loading.load_rules``; ``trusted=True`` skips the check)."""
    # the rule checker loads SymPy and mpmath: imported on first use, so that `import tidu` does not load them
    from tidu.checkrules import loading
    return loading.load_rules(*paths, trusted=trusted)


def use_rules(*paths: str | Path, trusted: bool = False) -> contextlib.AbstractContextManager[Catalog]:
    """The rule files ``paths`` active inside a ``with`` block, their rewrites checked for
    soundness first (``tidu.checkrules.loading.use_rules``; ``trusted=True`` skips it)."""
    # the rule checker loads SymPy and mpmath: imported on first use, so that `import tidu` does not load them
    from tidu.checkrules import loading
    return loading.use_rules(*paths, trusted=trusted)


__version__ = "0.1.0"

__all__ = [
    # the user API
    "EGraphLimits", "GraphView", "LimitError", "Limits", "Proof", "TraceError", "Tracer", "cache_info",
    "checkpoint", "checkpoint_name", "checkpoint_policies", "clear_cache", "clear_trace_cache",
    "current_semantics", "custom_jvp", "custom_vjp", "derivative",
    "dtypes", "float0",
    "ElementaryDerivative", "elementary_derivative", "eval_shape", "NotElementary", "grad",
    "hessian", "hessian_sparsity", "hvp", "jacfwd", "jacobian", "jacobian_sparsity", "jacrev", "jet", "jit", "jvp",
    "lax",
    "linear_transpose", "linearize",
    "load_program",
    "load_rules", "nn", "random", "scipy", "CatalogMismatchError", "ProgramFileError",
    "make_graph", "numpy", "op", "prove_equal", "remat", "resource_limits", "rewrite_semantics",
    "series", "set_resource_limits", "ShapeDtypeStruct", "stop_gradient", "TaylorSeries", "to_c", "to_jax",
    "to_numpy_source",
    "to_stablehlo", "trace_cache_info",
    "tree_map", "tree_util", "use_rules", "value_and_grad", "vjp", "vmap",
    # the pipeline by hand (the AD passes over fragments: tidu.passes): keys, fragments, resolve,
    # materialize_merge, compile
    "ADRuleError", "Attrs", "Aval", "Cotangent", "Derived", "External", "Fragment", "FragmentBuilder", "Input",
    "InputError", "InputKey", "Linearized", "LinearizedGraph", "Literal", "Local", "MaterializedGraph", "Named",
    "OpError", "PRIMARY", "Program", "ResolvedView", "Role", "Tangent", "UnresolvedKeyError", "ValueKey",
    "catalog", "compile", "materialize_merge", "passes", "resolve",
]
