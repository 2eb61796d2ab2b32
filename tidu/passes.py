"""The pipeline by hand, one level below the transforms (docs/concepts.md): build
fragments, ``resolve`` them into a logical view, ``linearize`` (JVP) and
``linear_transpose`` (VJP) as passes over fragments, ``materialize_merge`` (e-graph
extraction), ``compile``.

    from tidu.passes import FragmentBuilder, linearize, linear_transpose, resolve

``tidu.linearize(f, *primals)`` and ``tidu.linear_transpose(f, *primals)`` are JAX's
transforms of functions; the fragment-level passes of the same names are these.
"""

from tidu.ad.linearize import LinearizedGraph, linearize
from tidu.ad.transpose import linear_transpose
from tidu.lowering.compile import Program, compile
from tidu.simplify.materialize import materialize_merge
from tidu.trace.fragments import External, Fragment, FragmentBuilder, Local
from tidu.trace.resolve import ResolvedView, resolve

__all__ = ["External", "Fragment", "FragmentBuilder", "LinearizedGraph", "Local", "Program", "ResolvedView",
           "compile", "linear_transpose", "linearize", "materialize_merge", "resolve"]
