"""Shared helpers for AD tests: build small fragments, chain AD passes, evaluate."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

import tidu
from tidu import Aval, FragmentBuilder, ValueKey

F64 = Aval((), "float64")
C128 = Aval((), "complex128")


def build(inputs: Mapping[str, Aval], body: Callable, name: str = "F0"):
    """Fragment from ``body(builder, *input_refs) -> output ref``; returns (fragment, key)."""
    b = FragmentBuilder(name)
    refs = [b.input(n, a) for n, a in inputs.items()]
    out = b.output(body(b, *refs))
    return b.build(), out


def op(b, name, *args, **attrs):
    return b.add_op(name, list(args), attrs or None)[0]


def derivative_chain(frag, out: ValueKey, wrt: str, modes: str):
    """Apply one AD pass per letter: F = linearize, R = linearize then transpose, each
    time differentiating the previous result with respect to the primal input ``wrt``.
    Returns (last fragment, output key)."""
    for m in modes:
        lin = tidu.passes.linearize(tidu.resolve([frag]), [out], [wrt])
        res = lin if m == "F" else tidu.passes.linear_transpose(lin)
        (out,) = [k for k in res.output_keys]
        assert out is not None, "derivative is identically zero"
        frag = res.fragment
    return frag, out


def evaluate(frag, outputs, values: Mapping[str, object], *, simplify: bool = True, seed=1.0):
    """Materialize, compile and run; inputs not named in ``values`` (tangent and
    cotangent seeds) are filled with ``seed``."""
    g = tidu.materialize_merge(tidu.resolve([frag]), list(outputs), simplify=simplify)
    prog = tidu.compile(g)
    feed = {}
    for i in g.inputs:
        n = g.nodes[i]
        name = str(n.input)
        feed[n.input] = values[name] if name in values else np.full(n.aval.shape, seed, dtype=n.aval.dtype)
    return prog.eval(feed), g
