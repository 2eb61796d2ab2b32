"""Staging: tracing a function at top level and compiling what it computes.

A ``Stage`` owns a top-level ``Trace`` whose inputs stand for concrete arguments (named
after the function's parameters and pytree paths). The traced function, transforms
included, adds values to it; ``graph``/``program`` then resolve the trace with its
nested fragments and aliases, materialize the requested outputs and compile them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from types import FunctionType
from typing import Any

import numpy as np

from tidu.core.graph import MaterializedGraph
from tidu.core.keys import Aval, ValueKey, aval_of
from tidu.core.pytree import flatten, leaf_paths, unflatten
from tidu.core.resources import counting
from tidu.dtypes import float0, is_float0
from tidu.lowering.compile import Program, compile
from tidu.simplify.materialize import materialize_merge
from tidu.trace.tracing import Trace, TraceError, Tracer

SIMPLIFY = True  # run the e-graph simplifier in materialize_merge (tidu.transforms.staging.SIMPLIFY)

_NUMBER = (bool, int, float, complex, np.ndarray, np.generic)


def is_array_like(leaf: Any) -> bool:
    """Arrays of other libraries that convert to NumPy (JAX arrays): a shape, a dtype and
    ``__array__``."""
    return hasattr(leaf, "__array__") and hasattr(leaf, "shape") and hasattr(leaf, "dtype")


def check_leaf(leaf: Any, where: str) -> None:
    """Raise a clear TypeError unless ``leaf`` is an array (NumPy's, or one that converts
    to it such as a JAX array), a Python number or a tracer."""
    if isinstance(leaf, Tracer):
        leaf.check_alive()
        return
    if _is_jax_tracer(leaf):
        raise TypeError(
            f"{where} is a JAX tracer: a tidu function was called inside jax.jit, jax.vmap or jax.grad. "
            "Convert it for JAX first, e.g. jax.jit(tidu.to_jax(tidu.grad(f)))")
    if not isinstance(leaf, _NUMBER) and not is_array_like(leaf):
        raise TypeError(
            f"{where} is a {type(leaf).__name__}; tidu transforms take NumPy (or JAX) arrays, "
            "Python numbers and (nested) tuples, lists and dicts of them"
        )
    if is_float0(leaf):
        raise TypeError(f"{where} is a float0 array (the tangent of an integer or boolean value, which has no "
                        "values): it cannot be traced or computed with; jit and vmap pass it through, other "
                        "transforms take it only as the tangent (cotangent) of an integer value")
    try:
        aval_of(leaf)
    except TypeError as e:
        raise TypeError(f"{where}: {e}") from None


def foreign_library_hint(error: BaseException, fn: Callable[..., Any]) -> Exception | None:
    """A clearer error for ``error``, raised by ``fn`` on tidu's traced values, when it is a
    JAX function refusing them (``fn`` uses jax.numpy where tidu.numpy is needed) or JAX's
    ``.at`` asked of a NumPy array; None for any other error."""
    text = str(error)
    if isinstance(error, AttributeError) and text.endswith("object has no attribute 'at'"):
        return AttributeError(f"{text} (in {function_name(fn)}): only traced values have .at; write "
                              "tnp.at(x)[index].set(v) (import tidu.numpy as tnp), which works on NumPy "
                              "arrays and traced values alike (docs/numpy.md)")
    if "tidu.trace.tracing.Tracer" not in text or "JAX" not in text:
        return None
    return TypeError(f"{function_name(fn)} called a JAX function on a tidu traced value: in functions that "
                     "tidu transforms, use tidu.numpy (import tidu.numpy as tnp: tnp.sin, tnp.sum, ...) instead "
                     "of jax.numpy. To call a tidu function from JAX, convert it with tidu.to_jax(f)")


def _is_jax_tracer(leaf: Any) -> bool:
    # by class name, so that jax (an optional dependency) is not imported to ask
    return any(c.__name__ == "Tracer" and c.__module__.startswith("jax") for c in type(leaf).__mro__)


def is_weak(leaf: Any) -> bool:
    """Python scalars (and values computed from them only) are weakly typed."""
    return leaf.weak if isinstance(leaf, Tracer) else type(leaf) in (int, float, complex)


def concrete_leaves(tree: Any, where: str) -> tuple[list[np.ndarray], Any]:
    """The leaves of a concrete pytree as arrays (checked) and its structure."""
    leaves, treedef = flatten(tree)
    paths = leaf_paths(tree)
    out = []
    for leaf, path in zip(leaves, paths, strict=True):
        check_leaf(leaf, f"{where}{path}")
        if isinstance(leaf, Tracer):
            raise TraceError(f"{where}{path} is a traced value but no trace is active")
        out.append(np.asarray(leaf))
    return out, treedef


def arg_names(fn: Callable[..., Any], n: int) -> list[str]:
    """Names for ``n`` positional arguments of ``fn``: its parameter names if known."""
    if type(fn) is FunctionType and "__wrapped__" not in fn.__dict__ and "__signature__" not in fn.__dict__:
        # a plain function's parameters, read off its code object (what inspect.signature
        # reads, without its cost per call: transforms name the arguments of every build)
        code = fn.__code__
        positional = list(code.co_varnames[:code.co_argcount])
        var = (code.co_varnames[code.co_argcount + code.co_kwonlyargcount]
               if code.co_flags & inspect.CO_VARARGS else None)
    else:
        try:
            params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            return [f"arg{i}" for i in range(n)]
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        positional = [p.name for p in params if p.kind in kinds]
        var = next((p.name for p in params if p.kind is inspect.Parameter.VAR_POSITIONAL), None)
    names = []
    for i in range(n):
        if i < len(positional):
            names.append(positional[i])
        elif var is not None:
            names.append(f"{var}[{i - len(positional)}]")
        else:
            names.append(f"arg{i}")
    return names


def function_name(fn: Any) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


class Stage:
    """A top-level trace over concrete argument avals; use as a context manager."""

    def __init__(self, label: str) -> None:
        self.trace = Trace(None, label)
        self.inputs: list[ValueKey] = []

    def __enter__(self) -> Stage:
        self._counting = counting()  # graph values of this call, against tidu.resource_limits
        self._counting.__enter__()
        self.trace.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.trace.__exit__(*exc)
        self._counting.__exit__(*exc)
        if exc[0] is not None:
            self.trace.active = False

    def add_inputs(self, tree: Any, base: str) -> Any:
        """Tracer inputs with the avals of a concrete pytree (or of avals), same structure."""
        leaves, treedef = flatten(tree)
        out = []
        for leaf, path in zip(leaves, leaf_paths(tree), strict=True):
            if is_float0(leaf):  # a tangent of integers: no values, so no input (the array itself)
                out.append(np.zeros(np.shape(leaf), float0))
                continue
            aval = leaf if isinstance(leaf, Aval) else aval_of(leaf)
            t = self.trace.new_input(base + path, aval, is_weak(leaf))
            self.inputs.append(t.key)
            out.append(t)
        return unflatten(treedef, out)

    def keys(self, leaves: Sequence[Any], where: str = "output") -> list[ValueKey]:
        """Keys of output leaves (tracers of this trace, or constants)."""
        out = []
        for i, leaf in enumerate(leaves):
            check_leaf(leaf, f"{where} {i}")
            out.append(self.trace.key(leaf))
        return out

    def graph(self, outputs: Sequence[ValueKey], inputs: Sequence[ValueKey] | None = None,
              simplify: bool | None = None, semantics: str | None = None,
              assume: dict[str, str] | None = None, *, last: bool = False,
              keep_marks: bool = False) -> MaterializedGraph:
        """The graph of ``outputs``. ``last``: the stage's last use, and ``outputs`` a list
        the caller gives up: the trace and the list are let go once the graph is
        collected, so the traced values (most of the memory of a long trace) are freed
        before the e-graph phase needs its own. ``keep_marks``: ``stop_gradient`` and the
        custom calls stay in the graph (materialize_merge's)."""
        ins = list(self.inputs if inputs is None else inputs)
        if not last:
            return materialize_merge(self.trace.view(), list(outputs), inputs=ins,
                                     simplify=SIMPLIFY if simplify is None else simplify,
                                     semantics=semantics, assume=assume, keep_marks=keep_marks)
        # the view is passed, not bound here: materialize_merge holds its only reference
        return materialize_merge(self._take_view(), outputs, inputs=ins,  # type: ignore[arg-type]
                                 simplify=SIMPLIFY if simplify is None else simplify,
                                 semantics=semantics, assume=assume, consume=True, keep_marks=keep_marks)

    def _take_view(self) -> Any:
        trace, self.trace = self.trace, None
        return trace.view()

    def program(self, outputs: Sequence[ValueKey],
                inputs: Sequence[ValueKey] | None = None, *, last: bool = False) -> Program:
        return compile(self.graph(outputs, inputs, last=last))


__all__ = ["SIMPLIFY", "Stage", "arg_names", "check_leaf", "concrete_leaves", "function_name",
           "is_weak"]
