"""The batching check: ``tidu.vmap`` of one application of a primitive equals the loop of
its unbatched applications, with the examples on the first and on the last axis, every
operand batched and each one alone (the others shared by all examples)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tidu.checkrules._eval import Impl, NoSemantics, _close, _primal, evaluate
from tidu.checkrules._report import FAIL, PASS, SKIP, Row, _where
from tidu.checkrules._samples import CONDITIONED, _dtypes, _rng, condition, draw, samples
from tidu.core.keys import is_complex
from tidu.core.pytree import flatten
from tidu.numpy import op
from tidu.ops.catalog import Catalog, Primitive
from tidu.transforms.api import vmap
from tidu.transforms.transformed import new_stage

EXAMPLES = 3


def _variants(n_operands: int, first: bool) -> list[tuple[tuple[int, ...], int]]:
    """(batched operands, axis of the examples): all on axis 0; for the first sample also
    all on the last axis and each operand alone."""
    everything = tuple(range(n_operands))
    out = [(everything, 0)]
    if first:
        out.append((everything, -1))
        if n_operands > 1:
            out += [((i,), 0) for i in range(n_operands)]
    return out


def _batched_run(prim: Primitive, attrs: dict[str, Any], values: list[np.ndarray], in_axes: tuple,
                 impls: dict[str, Impl]) -> np.ndarray:
    """vmap(prim) traced on ``values`` and evaluated with the reference kernels."""
    fn = op(prim.name)
    with new_stage("check batching") as st:
        ins = [st.add_inputs(v, f"a{i}") for i, v in enumerate(values)]
        (key,) = st.keys(flatten(vmap(lambda *xs: fn(*xs, **attrs), in_axes=in_axes)(*ins))[0])
        feed = {k.input: v for k, v in zip(st.inputs, values, strict=True)}
        return evaluate([key], feed, impls, st.trace.aliases)[0]


def check_batching(cat: Catalog, prim: Primitive, impls: dict[str, Impl]) -> Row:
    """One row: every sample application batched, against the loop."""
    where = _where(prim.loc)
    if prim.name not in impls:
        raise NoSemantics(f"primitive {prim.name} has no NumPy semantics and no meaning: cannot evaluate it")
    rng = _rng("batching", prim.name)
    rtol = 1e-9 if prim.decl.type_rule in CONDITIONED else 1e-12
    checked, dtypes = 0, []
    for dtype in _dtypes(prim):
        dtypes.append(dtype)
        for n, (avals, attrs) in enumerate(samples(prim, dtype)):
            key, _ = _primal(prim, avals, attrs)
            examples = [condition(prim, [draw(av, "smooth", rng) for av in avals]) for _ in range(EXAMPLES)]
            for batched, axis in _variants(len(avals), n == 0):
                values, in_axes = [], []
                for i in range(len(avals)):
                    batch_i = i in batched
                    values.append(np.stack([ex[i] for ex in examples], axis=axis) if batch_i else examples[0][i])
                    in_axes.append(axis if batch_i else None)
                want = np.stack([impls[prim.name]([ex[i] if i in batched else examples[0][i]
                                                   for i in range(len(avals))], key.attrs) for ex in examples])
                got = _batched_run(prim, attrs, values, tuple(in_axes), impls)
                scale = float(np.max(np.abs(want[np.isfinite(want)]), initial=1.0))
                if got.shape != want.shape or not np.all(_close(got, want, rtol, rtol * scale)):
                    shown = ", ".join(f"{'a' + str(i)}: axis {a}" for i, a in enumerate(in_axes) if a is not None)
                    bad = (f"shape {got.shape}, loop {want.shape}" if got.shape != want.shape else
                           f"max |diff| {float(np.max(np.abs(got - want))):.3g}")
                    return Row(prim.name, "batching", where, "batched", FAIL,
                               f"vmap over {EXAMPLES} examples ({shown}) differs from the loop on {dtype} "
                               f"{[av.shape for av in avals]} {attrs}: {bad}")
                checked += 1
    if not checked:
        return Row(prim.name, "batching", where, "batched", SKIP,
                   f"no sample application for type rule {prim.decl.type_rule!r}")
    kinds = ", ".join("complex" if is_complex(d) else "real" for d in dtypes)
    return Row(prim.name, "batching", where, "batched", PASS,
               f"{checked} batched applications ({kinds}; examples on the first and last axis, each operand alone)")


__all__ = ["check_batching"]
