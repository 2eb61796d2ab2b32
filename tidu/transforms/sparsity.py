"""Sparsity patterns of Jacobians and Hessians, read from the traced graph.

The pattern of a value is a boolean matrix (its elements x the differentiated input's
elements): entry (i, j) is True when element i may depend on input element j. It is
propagated through the graph in one pass, op by op:

- an input is the identity, a constant (or another input) empty;
- an operand whose JVP rule is ``zero`` (``compare``, ``sign``, the predicate of
  ``select``, ...) contributes nothing;
- elementwise ops: the union of their operands' rows (a one-element operand's row goes
  to every element);
- ops that move elements (``reshape``, ``transpose``, ``broadcast_in_dim``, ``slice``,
  ``pad``, ``concatenate``, ``reverse``): the op is run on arrays of element indices, so
  each result element takes the row of the element it was copied from;
- reductions: the union of the rows of each reduced slice;
- ``dot_general``: result element (b, l, r) unites the rows of the lhs elements with
  its batch and lhs-free index and the rhs elements with its batch and rhs-free index
  (batched products give block-diagonal patterns);
- control flow (``scan``, ``cond``, ``while``): patterns go through the bodies; a carry's
  pattern is a fixpoint (the union over every step), an x slice's the union over the
  slices, and every stacked y takes its step's pattern;
- anything else (linear algebra, ...): every result element gets the union of every
  operand row (a superset, never too small).

The Hessian pattern is the Jacobian pattern of the gradient's graph, made symmetric.
Patterns are supersets of the true ones: a value that cancels to zero stays in the
pattern (as in every structural sparsity detector), which costs a color, never a value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from tidu.core.body import Body
from tidu.core.keys import InputKey, ValueKey, is_inexact
from tidu.ops import control
from tidu.ops.catalog import Catalog, Primitive, catalog
from tidu.ops.reference import evaluate
from tidu.simplify.loops import body_terms
from tidu.transforms.custom import elementwise_call

ELEMENTWISE = {"elementwise", "abs", "compare", "select", "make_complex", "to_real", "convert", "bitcast"}
MOVES = {"broadcast_in_dim", "reshape", "reverse", "transpose", "slice", "pad", "concatenate"}


def _empty(rows: int, n: int) -> sp.csr_array:
    return sp.csr_array((rows, n), dtype=bool)


class PatternTooDense(Exception):
    """A value's pattern would exceed the ``max_nnz`` given to :func:`graph_pattern`."""


def _rows_everywhere(p: sp.csr_array, rows: int, budget: int | None) -> sp.csr_array:
    """``rows`` copies of the union of the rows of ``p`` (PatternTooDense past ``budget``)."""
    cols = np.unique(p.indices)
    if budget is not None and rows * cols.size > budget:
        raise PatternTooDense(f"{rows} x {cols.size} entries")
    indptr = np.arange(rows + 1, dtype=np.int64) * cols.size
    return sp.csr_array((np.ones(rows * cols.size, bool), np.tile(cols, rows), indptr), shape=(rows, p.shape[1]))


def _take_rows(stacked: sp.csr_array, ids: np.ndarray) -> sp.csr_array:
    return sp.csr_array(stacked[ids.ravel()])


def _active(prim: Primitive, key: ValueKey) -> list[bool]:
    """Which operands the value's derivative depends on (their JVP rule is not ``zero``)."""
    operands = key.inputs
    if not hasattr(prim, "jvp_rule"):  # an internal op (custom_jvp call, ...): all of them
        return [is_inexact(k.aval.dtype) for k in operands]
    avals: dict[str, Any] = {}
    for i, k in enumerate(operands):
        name = prim.operand_name(i)
        if prim.variadic and i >= len(prim.operands) - 1:
            avals.setdefault(name, []).append(k.aval)
        else:
            avals[name] = k.aval
    whole = prim.jvp_rule(None, avals)
    if whole is not None:
        return [whole.template is not None and is_inexact(k.aval.dtype) for k in operands]
    out = []
    for i, k in enumerate(operands):
        rule = prim.jvp_rule(prim.operand_name(i), avals)
        out.append(is_inexact(k.aval.dtype) and (rule is None or rule.template is not None))
    return out


def _propagate(key: ValueKey, pats: list[sp.csr_array], n: int, cat: Catalog, budget: int | None) -> sp.csr_array:
    if key.op in control.CONTROL_OPS:
        return _control(key, pats, n, cat, budget)
    size = key.aval.size
    prim = cat.get_primitive(key.op)
    active = _active(prim, key)
    used = [p for p, a in zip(pats, active, strict=True) if a and p.nnz]
    if not used:
        return _empty(size, n)
    kind = getattr(getattr(prim, "decl", None), "type_rule", None)
    if elementwise_call(key):  # tidu's own elementwise function with a rule of its own
        kind = "elementwise"
    if kind in ELEMENTWISE and all(p.shape[0] in (1, size) for p in used):
        total = _empty(size, n)
        for p in used:
            total = total + (p if p.shape[0] == size else _rows_everywhere(p, size, budget))
        return sp.csr_array(total)
    if kind in MOVES:
        moved = _moved(key, pats, active, n, cat)
        if moved is not None:
            return moved
    if kind in ("dynamic_slice", "dynamic_update_slice"):
        return _dynamic(key, pats, active, n)
    if kind == "reduce" and len(pats) == 1:
        return _reduced(key, pats[0])
    if key.op == "dot_general":
        return _dot_general(key, pats, active, budget)
    everything = sp.csr_array(sp.vstack(used)) if len(used) > 1 else used[0]
    return _rows_everywhere(everything, size, budget)


def _moved(key: ValueKey, pats: list[sp.csr_array], active: list[bool], n: int,
           cat: Catalog) -> sp.csr_array | None:
    """Run the op on element indices (1-based; 0 = a constant or an inactive operand) and
    take, for each result element, the row of the element it copies."""
    ids, blocks, offset = [], [_empty(1, n)], 1
    for k, p, a in zip(key.inputs, pats, active, strict=True):
        shape = k.aval.shape
        if a:
            ids.append(np.arange(offset, offset + k.aval.size, dtype=np.int64).reshape(shape))
            blocks.append(p)
            offset += k.aval.size
        else:
            ids.append(np.zeros(shape, np.int64))
    try:
        out = evaluate(key.op, ids, key.attrs, cat)
    except Exception:  # an op that cannot run on integers: the superset rule
        return None
    return _take_rows(sp.csr_array(sp.vstack(blocks)), np.asarray(out, np.int64))


def _dynamic(key: ValueKey, pats: list[sp.csr_array], active: list[bool], n: int) -> sp.csr_array:
    """A slice at a start known when the program runs: each result element unites the rows
    of every operand element it may be copied from, over every start (a window along the
    axis); an updated array also keeps the row of its own element."""
    axis = key.attrs["axis"]
    shape = key.aval.shape
    pos = np.indices(shape)  # each result element's index
    sources = [(key.inputs[0], pats[0], active[0])]
    if key.op == "dynamic_update_slice":
        sources.append((key.inputs[1], pats[1], active[1]))
    total = _empty(key.aval.size, n)
    for src, (k, p, a) in enumerate(sources):
        if not a or not p.nnz:
            continue
        size, extent = k.aval.shape[axis], shape[axis]
        if key.op == "dynamic_update_slice" and src == 0:  # the element itself
            total = total + p
            continue
        # result q reads operand q + s (a slice) or update q - s (an update), s any start
        rows, cols = [], []
        starts = range(size - extent + 1) if src == 0 else range(extent - size + 1)
        for s in starts:
            at = pos[axis] + s if src == 0 else pos[axis] - s
            ok = (at >= 0) & (at < size)
            index = list(pos)
            index[axis] = np.where(ok, at, 0)
            flat = np.ravel_multi_index(tuple(index), k.aval.shape)
            rows.append(np.flatnonzero(ok))
            cols.append(flat.ravel()[ok.ravel()])
        r, c = np.concatenate(rows), np.concatenate(cols)
        gather = sp.csr_array((np.ones(r.size, np.int8), (r, c)), shape=(key.aval.size, k.aval.size))
        total = total + sp.csr_array((gather @ p.astype(np.int8)) != 0)
    return sp.csr_array(total)


def _reduced(key: ValueKey, p: sp.csr_array) -> sp.csr_array:
    """Row o is the union of the rows of the slice reduced into result element o."""
    (operand,) = key.inputs
    shape = operand.aval.shape
    axes = set(key.attrs["axes"])
    kept = [a for a in range(len(shape)) if a not in axes]
    if kept:
        index = np.indices(shape)[kept].reshape(len(kept), -1)
        target = np.ravel_multi_index(tuple(index), tuple(shape[a] for a in kept))
    else:
        target = np.zeros(operand.aval.size, np.int64)
    gather = sp.csr_array((np.ones(target.size, np.int8), (target, np.arange(target.size))),
                          shape=(key.aval.size, operand.aval.size))
    return sp.csr_array((gather @ p.astype(np.int8)) != 0)


def _dot_general(key: ValueKey, pats: list[sp.csr_array], active: list[bool], budget: int | None) -> sp.csr_array:
    """Result element (b, l, r) sums lhs[b, l, :] * rhs[b, :, r]: the union of the rows
    of the lhs elements of its batch and lhs-free index and of the rhs elements of its
    batch and rhs-free index (block-diagonal for batched products)."""
    at = key.attrs
    groups, counts = [], []
    for k, p, a, contract, batch in zip(key.inputs, pats, active, (at["lhs_contract"], at["rhs_contract"]),
                                        (at["lhs_batch"], at["rhs_batch"]), strict=True):
        shape = k.aval.shape
        free = [i for i in range(len(shape)) if i not in contract and i not in batch]
        nb, nf, nc = (math.prod(shape[i] for i in axes) for axes in (batch, free, contract))
        counts.append(nf)
        if not a or not p.nnz:
            groups.append(None)
            continue
        ids = np.arange(k.aval.size).reshape(shape).transpose([*batch, *free, *contract]).reshape(-1)
        gather = sp.csr_array((np.ones(ids.size, np.int8), ids, np.arange(0, ids.size + 1, max(nc, 1))[:nb * nf + 1]
                               if nc else np.zeros(nb * nf + 1, np.int64)), shape=(nb * nf, k.aval.size))
        groups.append(sp.csr_array((gather @ p.astype(np.int8)) != 0))  # (batch, free) -> union over contract
    nb = math.prod(key.inputs[0].aval.shape[i] for i in at["lhs_batch"])
    nl, nr = counts
    b, l_, r = np.arange(nb)[:, None, None], np.arange(nl)[None, :, None], np.arange(nr)[None, None, :]
    rows = {0: np.broadcast_to(b * nl + l_, (nb, nl, nr)).reshape(-1),
            1: np.broadcast_to(b * nr + r, (nb, nl, nr)).reshape(-1)}
    if budget is not None:
        est = sum(int(np.diff(g.indptr)[rows[j]].sum()) for j, g in enumerate(groups) if g is not None)
        if est > budget:
            raise PatternTooDense(f"dot_general: about {est} entries")
    total = _empty(key.aval.size, pats[0].shape[1])
    for j, g in enumerate(groups):
        if g is not None:
            total = total + sp.csr_array(g[rows[j]])
    return sp.csr_array(total)


def _union(a: sp.csr_array, b: sp.csr_array) -> sp.csr_array:
    return sp.csr_array((a + b).astype(bool))


def _through(body: Body, params: list[sp.csr_array], n: int, cat: Catalog, budget: int | None) -> list[sp.csr_array]:
    """The patterns of ``body``'s results given its parameters' patterns."""
    ins, outs = body_terms(body)
    return _patterns(outs, dict(zip(ins, params, strict=True)), {}, n, cat, budget)


def _fixpoint(body: Body, fixed: list[sp.csr_array], carries: list[sp.csr_array], after: list[sp.csr_array],
              n: int, cat: Catalog, budget: int | None) -> tuple[list[sp.csr_array], list[sp.csr_array]]:
    """Carry patterns over every step (each carry's union with what the body makes of it)
    and the body's result patterns under them."""
    while True:
        outs = _through(body, [*fixed, *carries, *after], n, cat, budget)
        grown = [_union(c, o) for c, o in zip(carries, outs, strict=False)]
        if all(g.nnz == c.nnz for g, c in zip(grown, carries, strict=True)):
            return carries, outs
        carries = grown


def _control(key: ValueKey, pats: list[sp.csr_array], n: int, cat: Catalog, budget: int | None) -> sp.csr_array:
    attrs, index = key.attrs, key.attrs["index"]
    if key.op == "cond":  # any branch may run: the union over them (the selector has no derivative)
        outs = [_through(b, pats[1:], n, cat, budget)[index] for b in attrs["branches"]]
        total = outs[0]
        for o in outs[1:]:
            total = _union(total, o)
        return total
    if key.op == "while":
        ncc, nbc = attrs["n_cond_consts"], attrs["n_body_consts"]
        carries, _ = _fixpoint(attrs["body"], pats[ncc:ncc + nbc], pats[ncc + nbc:], [], n, cat, budget)
        return carries[index]
    body: Body = attrs["body"]
    nc, nk, length = attrs["n_consts"], attrs["n_carry"], attrs["length"]
    slices = []
    for x, a in zip(pats[nc + nk:], key.inputs[nc + nk:], strict=True):  # the union over the slices
        coo = x.tocoo()
        size = a.aval.size // max(length, 1)
        slices.append(sp.csr_array(sp.coo_array((np.ones(coo.nnz, bool), (coo.row % max(size, 1), coo.col)),
                                                shape=(size, n)).astype(bool)))
    carries, outs = _fixpoint(body, pats[:nc], pats[nc:nc + nk], slices, n, cat, budget)
    if index < nk:
        return carries[index]
    if not length:
        return _empty(0, n)
    # a stacked y: what its step makes of the consts and carries (the same at every step),
    # united with what it makes of its own step's x slices (y[t] of x[t], also in reverse),
    # so a map over rows (no carry) stays block diagonal
    ins = body_terms(body)[0]
    common = _through(body, [*pats[:nc], *carries, *(_empty(k.aval.size, n) for k in ins[nc + nk:])],
                      n, cat, budget)[index]
    if budget is not None and common.nnz * length > budget:
        raise PatternTooDense(f"{length} x {common.nnz} entries")
    total = sp.csr_array(sp.vstack([common] * length))
    local = _local_rows(body, pats, key, n, cat, budget)
    if local is not None:
        total = _union(total, local)
        if budget is not None and total.nnz > budget:
            raise PatternTooDense(f"{total.nnz} entries")
    return total


def _local_rows(body: Body, pats: list[sp.csr_array], key: ValueKey, n: int, cat: Catalog,
                budget: int | None) -> sp.csr_array | None:
    """The rows of stacked y ``key`` (a scan's) made of each step's own x slices: the
    body's pattern of y in its x-slice parameters (seeded with the identity over the slices'
    elements), applied to the rows of step t's slices, for every t (None: no x has any)."""
    attrs = key.attrs
    nc, nk, length, index = attrs["n_consts"], attrs["n_carry"], attrs["length"], attrs["index"]
    xs, xkeys = pats[nc + nk:], key.inputs[nc + nk:]
    if not any(p.nnz for p in xs):
        return None
    ins = body_terms(body)[0]
    sizes = [k.aval.size // length for k in xkeys]
    width = sum(sizes)
    params, offset = [_empty(k.aval.size, width) for k in ins[:nc + nk]], 0
    for size in sizes:  # slice j's elements are the columns offset .. offset + size of the seed
        params.append(sp.csr_array((np.ones(size, bool), np.arange(offset, offset + size), np.arange(size + 1)),
                                   shape=(size, width)))
        offset += size
    step = _through(body, params, width, cat, budget)[index]  # (y slice size, width)
    if not step.nnz:
        return None
    # the x rows step t reads, in the seed's column order: (t, slice j, element)
    starts = np.cumsum([0, *[p.shape[0] for p in xs]])[:-1]
    order = np.concatenate([start + t * size + np.arange(size)
                            for t in range(length) for start, size in zip(starts, sizes, strict=True)])
    stacked = sp.csr_array(sp.vstack(xs))[order] if order.size else _empty(0, n)
    blocks = sp.kron(sp.identity(length, dtype=np.int8, format="csr"), step.astype(np.int8), format="csr")
    return sp.csr_array((blocks @ stacked.astype(np.int8)) != 0)


def graph_pattern(outputs: Sequence[ValueKey], wrt: ValueKey, aliases: Mapping[InputKey, ValueKey] | None = None,
                  cat: Catalog | None = None, max_nnz: int | None = None) -> sp.csr_array:
    """The sparsity pattern of ``outputs`` (stacked, in order, each flattened) with respect
    to the input ``wrt``: a boolean CSR array (total output size, wrt size). ``aliases``
    (a trace's: the inputs of nested transforms standing for outer values) are followed.
    ``max_nnz``: raise :class:`PatternTooDense` as soon as a dense value's pattern would
    have more entries (a caller that only wants sparse patterns stops early)."""
    cat = cat or catalog()
    n = wrt.aval.size
    identity = sp.csr_array(sp.identity(n, dtype=bool, format="csr"))
    blocks = _patterns(outputs, {wrt: identity}, aliases or {}, n, cat, max_nnz)
    return sp.csr_array(sp.vstack(blocks)) if len(blocks) != 1 else blocks[0]


def _patterns(outputs: Sequence[ValueKey], seeds: Mapping[ValueKey, sp.csr_array],
              aliases: Mapping[InputKey, ValueKey], n: int, cat: Catalog, max_nnz: int | None) -> list[sp.csr_array]:
    """The patterns of ``outputs`` given those of ``seeds`` (every other input: empty)."""
    memo: dict[ValueKey, sp.csr_array] = dict(seeds)
    stack: list[tuple[ValueKey, bool]] = [(k, False) for k in outputs]
    while stack:  # iterative post-order: graphs are deep
        k, ready = stack.pop()
        if k in memo:
            continue
        if k.input is not None and k.input in aliases:
            target = aliases[k.input]
            if target in memo:
                memo[k] = memo[target]
            else:
                stack.extend([(k, False), (target, False)])
        elif k.input is not None or not k.inputs:
            memo[k] = _empty(k.aval.size, n)
        elif ready:
            memo[k] = _propagate(k, [memo[i] for i in k.inputs], n, cat, max_nnz)
        else:
            stack.append((k, True))
            stack.extend((i, False) for i in k.inputs if i not in memo)
    return [memo[k] for k in outputs]


def symmetric(p: sp.csr_array) -> sp.csr_array:
    """``p`` or its transpose (a Hessian pattern from the gradient's graph)."""
    return sp.csr_array((p + p.T) != 0)


__all__ = ["PatternTooDense", "graph_pattern", "symmetric"]
