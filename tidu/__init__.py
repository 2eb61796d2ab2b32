"""tidu: symbolic automatic differentiation on an e-graph.

Pipeline: build fragments -> resolve -> linearize -> [linear_transpose] -> resolve ->
... -> materialize_merge (e-graph extraction) -> compile -> eval / lowering.
"""

from tidu.ad.instantiate import ADRuleError
from tidu.ad.linearize import LinearizedGraph, linearize
from tidu.ad.transpose import linear_transpose
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
from tidu.lowering.compile import InputError, Program, cache_info, clear_cache, compile
from tidu.ops.catalog import OpError, catalog
from tidu.simplify.materialize import Limits, materialize_merge
from tidu.trace.fragments import External, Fragment, FragmentBuilder, Local
from tidu.trace.resolve import ResolvedView, UnresolvedKeyError, resolve

__version__ = "0.1.0"

__all__ = [
    "ADRuleError", "Attrs", "Aval", "Cotangent", "Derived", "External", "Fragment",
    "FragmentBuilder", "Input", "InputError", "InputKey", "Limits", "Linearized",
    "LinearizedGraph", "Literal", "Local", "MaterializedGraph", "Named", "OpError",
    "PRIMARY", "Program", "ResolvedView", "Role", "Tangent", "UnresolvedKeyError",
    "ValueKey", "cache_info", "catalog", "clear_cache", "compile", "linear_transpose",
    "linearize", "materialize_merge", "resolve",
]

# --- front end: tidu.numpy, transforms, inspection (appended) ---------------------------
from tidu import numpy  # noqa: E402,F401  (import tidu.numpy as tnp)
from tidu.core.pytree import tree_map  # noqa: E402
from tidu.trace.tracing import TraceError, Tracer  # noqa: E402
from tidu.transforms.api import (  # noqa: E402
    clear_trace_cache,
    grad,
    hessian,
    hvp,
    jacfwd,
    jacrev,
    jvp,
    trace_cache_info,
    value_and_grad,
    vjp,
    vmap,
)
from tidu.transforms.inspection import GraphView, make_graph, to_numpy_source, to_stablehlo  # noqa: E402

__all__ += [
    "GraphView", "TraceError", "Tracer", "clear_trace_cache", "grad", "hessian", "hvp",
    "jacfwd", "jacrev", "jvp", "make_graph", "numpy", "to_numpy_source", "to_stablehlo",
    "trace_cache_info", "tree_map", "value_and_grad", "vjp", "vmap",
]
from tidu.transforms.api import jit  # noqa: E402

__all__ += ["jit"]

# --- proofs of equality in the e-graph ------------------------------------------------
from tidu.transforms.prove import Proof, prove_equal  # noqa: E402

__all__ += ["Proof", "prove_equal"]
from tidu.simplify.materialize import current_semantics, rewrite_semantics  # noqa: E402

__all__ += ["current_semantics", "rewrite_semantics"]

# --- interop with JAX ----------------------------------------------------------------
from tidu.transforms.interop import to_jax  # noqa: E402

__all__ += ["to_jax"]

# --- resource limits ------------------------------------------------------------------
from tidu.core.resources import LimitError, resource_limits, set_resource_limits  # noqa: E402

__all__ += ["LimitError", "resource_limits", "set_resource_limits"]

# --- your own primitives: rule files --------------------------------------------------
from tidu.ops.user_rules import load_rules, op, use_rules  # noqa: E402

__all__ += ["load_rules", "op", "use_rules"]

# --- user-defined derivatives and differentiation barriers ------------------------------
from tidu import tree_util  # noqa: E402,F401
from tidu.transforms.custom import checkpoint, custom_jvp, custom_vjp, remat, stop_gradient  # noqa: E402

__all__ += ["checkpoint", "custom_jvp", "custom_vjp", "remat", "stop_gradient", "tree_util"]

# --- sparse Jacobians and Hessians ------------------------------------------------------
from tidu.transforms.sparse_ad import hessian_sparsity, jacobian_sparsity  # noqa: E402

__all__ += ["hessian_sparsity", "jacobian_sparsity"]
