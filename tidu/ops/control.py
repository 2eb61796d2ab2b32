"""The control-flow primitives: ``scan``, ``cond`` and ``while``, ops whose attributes
hold the functions they apply (``tidu.core.body.Body``).

A graph node has one output, so a control-flow op with several results appears as one
node per result, the same op, operands and attributes except ``index`` (which result).
Such nodes are *siblings*: the back ends run the loop once for all of them, and the
AD passes handle them together (tidu.transforms.control).

``scan[body, n_consts, n_carry, length, reverse](consts..., carries..., xs...)``
    ``body(consts, carries, x slices) -> (carries, y slices)`` applied ``length`` times
    along axis 0 of the xs (from the end when ``reverse``); results: the final carries,
    then the ys stacked along a new axis 0.
``cond[branches](selector, operands...)``
    ``branches[clip(selector, 0, n-1)](operands)``; the selector is an int32 scalar.
``while[cond_body, body, n_cond_consts, n_body_consts](cond consts..., body consts..., carries...)``
    ``while cond_body(cond consts, carries): carries = body(body consts, carries)``.

This module gives their signatures and type rules; their evaluation is in
tidu.ops.reference and the back ends, their derivatives and batching in
tidu.transforms.control, which registers them with the catalog.
"""

from __future__ import annotations

from collections.abc import Sequence

from tidu.core.body import Body
from tidu.core.keys import Attrs, Aval, Derived, ValueKey
from tidu.ops.catalog import OpError

CONTROL_OPS = frozenset(("scan", "cond", "while"))  # looked up per op in the AD passes

SCAN_ATTRS = ("body", "index", "length", "n_carry", "n_consts", "reverse")
COND_ATTRS = ("branches", "index")
WHILE_ATTRS = ("body", "cond_body", "index", "n_body_consts", "n_cond_consts")
ATTRS = {"scan": SCAN_ATTRS, "cond": COND_ATTRS, "while": WHILE_ATTRS}


def without_index(attrs: Attrs) -> Attrs:
    """The attributes shared by all siblings (all but ``index``)."""
    return Attrs({k: v for k, v in attrs.items() if k != "index"})


def with_index(attrs: Attrs, index: int) -> Attrs:
    return Attrs({**dict(attrs.items()), "index": index})


def result_avals(op: str, attrs: Attrs) -> list[Aval]:
    """Every result's aval (what the siblings ``index`` 0, 1, ... are)."""
    if op == "scan":
        body: Body = attrs["body"]
        n_carry, length = attrs["n_carry"], attrs["length"]
        outs = body.out_avals
        return [*outs[:n_carry], *(Aval((length, *a.shape), a.dtype) for a in outs[n_carry:])]
    if op == "cond":
        return list(attrs["branches"][0].out_avals)
    if op == "while":
        return list(attrs["body"].out_avals)
    raise KeyError(op)


def _mismatch(what: str, got: Sequence[Aval], want: Sequence[Aval]) -> str:
    return f"{what}: got ({', '.join(map(str, got))}), expected ({', '.join(map(str, want))})"


def check_operands(op: str, avals: Sequence[Aval], attrs: Attrs) -> None:
    """Raise OpError unless ``avals`` fit the op's bodies."""
    if op == "scan":
        body: Body = attrs["body"]
        nc, nk, length = attrs["n_consts"], attrs["n_carry"], attrs["length"]
        consts, carries, xs = avals[:nc], avals[nc:nc + nk], avals[nc + nk:]
        for x in xs:
            if not x.shape or x.shape[0] != length:
                raise OpError(f"scan: every xs operand needs a leading axis of length {length}, got {x}")
        slices = [Aval(x.shape[1:], x.dtype) for x in xs]
        if tuple([*consts, *carries, *slices]) != body.in_avals:
            raise OpError("scan: " + _mismatch("operands", [*consts, *carries, *slices], body.in_avals))
        if tuple(body.out_avals[:nk]) != tuple(carries):
            raise OpError("scan: " + _mismatch("the body's carry results", body.out_avals[:nk], carries))
    elif op == "cond":
        branches: tuple[Body, ...] = attrs["branches"]
        if not avals or avals[0] != Aval((), "int32"):
            raise OpError(f"cond: the selector must be an int32 scalar, got {avals[0] if avals else 'nothing'}")
        for b in branches:
            if b.in_avals != tuple(avals[1:]):
                raise OpError("cond: " + _mismatch("operands", avals[1:], b.in_avals))
            if b.out_avals != branches[0].out_avals:
                raise OpError("cond: " + _mismatch("branch results", b.out_avals, branches[0].out_avals))
    elif op == "while":
        cond_body: Body = attrs["cond_body"]
        body = attrs["body"]
        ncc, nbc = attrs["n_cond_consts"], attrs["n_body_consts"]
        carries = tuple(avals[ncc + nbc:])
        if cond_body.in_avals != (*avals[:ncc], *carries) or cond_body.out_avals != (Aval((), "bool"),):
            raise OpError("while: the condition does not fit its operands")
        if body.in_avals != (*avals[ncc:ncc + nbc], *carries) or body.out_avals != carries:
            raise OpError("while: " + _mismatch("the body's results", body.out_avals, carries))


def infer(op: str, avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    """The type rule of sibling ``attrs['index']``."""
    check_operands(op, avals, attrs)
    return [result_avals(op, attrs)[attrs["index"]]]


def sibling_keys(key: ValueKey) -> list[ValueKey]:
    """The keys of every result of the op ``key`` is a result of, by ``index``."""
    shared = without_index(key.attrs)
    avals = result_avals(key.op, key.attrs)
    return [Derived(key.op, with_index(shared, j), key.inputs, key.role, 0, a) for j, a in enumerate(avals)]


def bodies(op: str, attrs: Attrs) -> list[Body]:
    """The functions a control-flow op applies."""
    if op == "scan":
        return [attrs["body"]]
    if op == "cond":
        return list(attrs["branches"])
    if op == "while":
        return [attrs["cond_body"], attrs["body"]]
    return []


__all__ = ["ATTRS", "CONTROL_OPS", "bodies", "check_operands", "infer", "result_avals", "sibling_keys",
           "with_index", "without_index"]
