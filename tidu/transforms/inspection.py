"""Looking at what a function computes: graph listings, Graphviz, StableHLO, C, NumPy source,
and the shapes and dtypes of its results.

``make_graph(f)(*args)`` stages ``f`` (a plain or transformed function) on the avals of
``args`` and returns a ``GraphView`` of the materialized graph: a jaxpr-like listing
with the op counts before and after the e-graph simplification. ``eval_shape(f, *args)``
traces ``f`` only, for the shapes and dtypes of its results (JAX's ``eval_shape``).
"""

from __future__ import annotations

import html
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tidu.core.gcpause import paused_gc
from tidu.core.graph import MaterializedGraph
from tidu.core.keys import Aval, aval_of
from tidu.core.pytree import flatten, unflatten
from tidu.lowering.compile import Program, compile
from tidu.lowering.saving import PathLike, read_program
from tidu.trace.tracing import Tracer, current_trace
from tidu.transforms import display
from tidu.transforms.float0 import hide
from tidu.transforms.staging import Stage, arg_names, check_leaf, function_name


class GraphView:
    """The materialized graph of a staged function, for reading."""

    def __init__(self, name: str, graph: MaterializedGraph) -> None:
        self.name = name
        self.graph = graph

    @property
    def stats(self) -> dict[str, Any]:
        return self.graph.stats

    @property
    def ops_before(self) -> int:
        return int(self.graph.stats.get("ops_before", self.graph.op_count))

    @property
    def ops_after(self) -> int:
        return int(self.graph.stats.get("ops_after", self.graph.op_count))

    def listing(self) -> str:
        head = f"# {self.name}: {self.ops_before} ops before simplification, {self.ops_after} after"
        return head + "\n" + self.graph.listing()

    __str__ = listing

    def __repr__(self) -> str:
        return self.listing()

    def to_dot(self) -> str:
        return self.graph.to_dot()

    def to_html(self) -> str:
        """The listing as an HTML ``<pre>`` block."""
        return f"<pre>{html.escape(self.listing())}</pre>"

    def to_svg(self) -> str:
        """The graph drawn by Graphviz (SVG text); needs the graphviz package and ``dot``."""
        return display.svg(self.graph)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        # One picture, not several: JupyterLab and nbconvert show HTML over SVG when given
        # both, and IPython adds what any other _repr_*_ method gives to this bundle, so
        # this is the only one. The listing is shown where there is no picture (no
        # Graphviz, or a graph too big to draw).
        picture = display.notebook_svg(self.graph)
        shown = {"image/svg+xml": picture} if picture else {"text/html": self.to_html()}
        return {"text/plain": self.listing(), **shown}

    def formula(self, symbols: Any = None) -> display.Formula:
        """The outputs as SymPy expressions that notebooks show as LaTeX (``symbols`` as
        in ``tidu.sympy.to_sympy``); ``.to_latex()`` gives the LaTeX text."""
        return display.Formula.of(self.graph, symbols)

    def to_latex(self, symbols: Any = None) -> str:
        """The outputs as LaTeX, through SymPy."""
        return self.formula(symbols).to_latex()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text("GraphView(...)" if cycle else self.listing())

    @property
    def program(self) -> Program:
        return compile(self.graph)

    def to_stablehlo(self, platform: str = "cpu") -> str:
        return self.program.to_stablehlo(platform)

    def to_c(self) -> str:
        return self.program.to_c()

    def to_numpy_source(self, standalone: bool = False) -> str:
        return self.program.to_numpy_source(standalone)


def make_graph(fun: Callable[..., Any], *, simplify: bool | None = None,
               semantics: str | None = None, assume: dict[str, str] | None = None,
               ) -> Callable[..., GraphView]:
    """``make_graph(f)(*args)``: the graph ``f`` computes for arguments shaped like ``args``
    (arrays, Python numbers or pytrees of them; only their shapes and dtypes matter).
    ``semantics``: "exact" or "real" rewrites (default: ``tidu.current_semantics()``);
    ``assume``: what is known of inputs, by name ({"x": "positive"}), for real rewrites'
    domain guards (docs/egraph.md)."""
    if not callable(fun):
        raise TypeError(f"tidu.make_graph takes a function, got {type(fun).__name__}")

    @paused_gc()  # the trace through the graph (see tidu.core.gcpause: no collector pass meanwhile)
    def staged(*args: Any) -> GraphView:
        with Stage("make_graph") as st:
            names = arg_names(fun, len(args))
            ins = [st.add_inputs(a, n) for a, n in zip(args, names, strict=True)]
            keys = st.keys(flatten(hide(fun(*ins)))[0])  # (float0 results have no values: not in the graph)
            del ins  # tracers: the traced values are freed once collected
        return GraphView(function_name(fun), st.graph(keys, simplify=simplify, semantics=semantics,
                                                      assume=assume, last=True))

    staged.__name__ = f"make_graph({function_name(fun)})"
    return staged


@dataclass(frozen=True)
class ShapeDtypeStruct:
    """The shape and dtype of an array, without its values (JAX's ``ShapeDtypeStruct``):
    what ``eval_shape`` returns, and an argument it accepts (a pytree leaf)."""

    shape: tuple[int, ...]
    dtype: np.dtype

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def eval_shape(fun: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The shapes and dtypes of ``fun(*args, **kwargs)`` (a pytree of ``ShapeDtypeStruct``),
    found by tracing ``fun`` once, with nothing computed, simplified or compiled. ``args``
    and ``kwargs`` are arrays, numbers, or anything with ``.shape`` and ``.dtype``
    (``ShapeDtypeStruct``, ``jax.ShapeDtypeStruct``), in pytrees."""
    if not callable(fun):
        raise TypeError(f"tidu.eval_shape takes a function, got {type(fun).__name__}")
    if kwargs:  # as JAX: keyword arguments are traced like the others
        keys, n, inner = tuple(kwargs), len(args), fun

        def fun(*values: Any) -> Any:
            return inner(*values[:n], **dict(zip(keys, values[n:], strict=True)))

        fun.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter(a, inspect.Parameter.POSITIONAL_ONLY) for a in (*arg_names(inner, n), *keys)])
        args = (*args, *kwargs.values())

    def aval(leaf: Any, where: str) -> Aval:
        if hasattr(leaf, "shape") and hasattr(leaf, "dtype") and not isinstance(leaf, np.ndarray | np.generic):
            try:
                return Aval(tuple(int(d) for d in leaf.shape), np.dtype(leaf.dtype).name)
            except (TypeError, ValueError) as e:
                raise TypeError(f"tidu.eval_shape: {where}: {e}") from None
        check_leaf(leaf, where)
        return aval_of(leaf)

    names = arg_names(fun, len(args))
    with Stage("eval_shape") as st:
        ins = []
        for a, name in zip(args, names, strict=True):
            leaves, tree = flatten(a)
            ins.append(st.add_inputs(unflatten(tree, [aval(leaf, f"argument {name}") for leaf in leaves]), name))
        leaves, tree = flatten(fun(*ins))
        shapes = [ShapeDtypeStruct(leaf.shape, np.dtype(leaf.aval.dtype)) if isinstance(leaf, Tracer)
                  else ShapeDtypeStruct(np.shape(leaf), np.asarray(leaf).dtype) for leaf in leaves]
        del ins
    return unflatten(tree, shapes)


def to_stablehlo(fun: Callable[..., Any], *args: Any, platform: str = "cpu") -> str:
    """StableHLO text (an MLIR module with ``func.func @main``) of ``fun`` at ``args``, for
    ``platform`` ("cpu", "cuda", "rocm", "tpu": linear algebra differs between them)."""
    return make_graph(fun)(*args).to_stablehlo(platform)


def to_c(fun: Callable[..., Any], *args: Any) -> str:
    """One self-contained C99 file computing ``fun`` at arguments shaped like ``args``: the
    function ``tidu_program`` of pointers to the inputs and outputs (docs/lowering.md#c)."""
    return make_graph(fun)(*args).to_c()


def to_numpy_source(fun: Callable[..., Any], *args: Any, standalone: bool = False) -> str:
    """The Python/NumPy source tidu generates to evaluate ``fun`` at ``args``; with
    ``standalone``, a module that defines its constants and kernels, imports only NumPy
    (and SciPy where a kernel is SciPy's) and whose ``run(*inputs)`` returns the outputs
    (docs/lowering.md#standalone-source)."""
    return make_graph(fun)(*args).to_numpy_source(standalone)


def load_program(path: PathLike) -> Program:
    """The program ``Program.save`` wrote to ``path`` (docs/lowering.md#saving-programs), under
    the built-in catalog, or the active one where it applies primitives of a user's rule
    file. Raises ``tidu.ProgramFileError`` for a file that is not a program file, is
    corrupt, or is of a newer format, and ``tidu.CatalogMismatchError`` naming the rules
    file and primitives to load where the active catalog lacks them."""
    return read_program(path, Program)


def graph_function(graph: MaterializedGraph) -> Callable[..., Any]:
    """A function computing ``graph``: its arguments are the graph's inputs in order and it
    returns the single output (a tuple for several). Under a transform it records the
    graph's ops in the transform's trace, so a simplified derivative can be
    differentiated again without carrying the unsimplified one (the CLI's higher orders);
    outside any transform it evaluates the compiled program."""
    def replay(*args: Any) -> Any:
        if len(args) != len(graph.inputs):
            raise TypeError(f"the graph takes {len(graph.inputs)} arguments, got {len(args)}")
        trace = current_trace()
        if trace is None:
            out = compile(graph).run(list(args))
            return out[0] if len(out) == 1 else tuple(out)
        values: dict[int, Any] = dict(zip(graph.inputs, args, strict=True))
        for i, node in enumerate(graph.nodes):
            if node.op is not None:
                values[i] = trace.emit(node.op, [values[j] for j in node.inputs], node.attrs)
        outs = [values[o] for o in graph.outputs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    return replay


__all__ = ["GraphView", "graph_function", "load_program", "make_graph", "to_c", "to_numpy_source", "to_stablehlo"]
