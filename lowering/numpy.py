"""NumPy lowering: a compiled ``Program`` becomes readable Python/NumPy source.

``numpy_source(program)`` writes one function, one line per instruction::

    def program(s0, s1):
        s2 = np.exp(s0)  # f64[3]
        ...
        return (s5, s7)

A built-in elementwise primitive is inlined as the expression its rule block gives
(``tidu.ops.kernels.numpy_inline``: ``numpy numpy.exp`` is ``np.exp(s0)``, ``numpy meaning``
writes the meaning, ``x + y``), the very expression ``tidu.ops.reference`` runs;
structural ops are single NumPy calls or call the kernel their ``numpy`` clause names
(``dot_general(...)``), and a primitive of a user's rule file calls its kernel
(``tidu.ops.kernels.kernel``). Rank-0 values are carried as NumPy scalars (``s0 = s0[()]``
on entry), which keeps scalar graphs fast and their dtypes exact. ``interpret`` runs the
same kernels one by one (``reference.impl_of``) and gives the same bits.
"""

from __future__ import annotations

import ast
import base64
import builtins
import dis
import functools
import inspect
import re
import textwrap
import types
import zlib
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import ml_dtypes
import numpy as np
from tidu.lowering.ssa import InputError, Instruction, SSAProgram, from_graph

from tidu.core.body import Body
from tidu.core.gcpause import paused_gc
from tidu.core.keys import HALF_DTYPES, NO_ATTRS, Attrs, Aval, is_complex, is_float, is_inexact, is_integer
from tidu.ops import control
from tidu.ops import reference as sem
from tidu.ops.catalog import Catalog, catalog
from tidu.ops.kernels import exact_kernel, kernel, numpy_inline

# names the generated source binds itself: a rule-defined op of such a name is op_<name>
_RESERVED = re.compile(r"np|program|[sc]\d+|(complex_|op_).*")


class _Names:
    """What the generated source calls by name: the kernels of structural built-in ops (by
    their function's name) and of user primitives (by the op's name, or op_<name>), and
    each elementwise op's inline expression (a template over its operands)."""

    def __init__(self, cat: Catalog, standalone: bool = False) -> None:
        self.cat = cat
        self.standalone = standalone  # user kernels called through user_op (no tidu at run time)
        self.rule_ops: dict[str, str] = {}  # user op -> the name its kernel has in the source
        self.kernels: dict[str, Callable[..., Any]] = {}  # built-in kernels called by name
        self.inline: dict[str, str | None] = {}  # op -> its expression over {0}, {1}, ...

    def template(self, op: str) -> str | None:
        if op not in self.inline:
            prim = self.cat.get_primitive(op)
            self.inline[op] = numpy_inline(prim, self.cat, [f"{{{i}}}" for i in range(len(prim.operands))]) \
                if not prim.variadic else None
        return self.inline[op]


def _expr(ins: Instruction, args: list[str], ins_avals: list[Aval], out: Aval, names: _Names) -> str:
    """The right-hand side for ``ins``; mirrors ``reference.impl_of(ins.op)`` exactly."""
    op, at = ins.op, dict(ins.attrs.items())
    prim = names.cat.get_primitive(op)
    if not prim.builtin:  # a user's primitive: its kernel, by name
        name = names.rule_ops.get(op)
        if name is None:
            name = op if op.isidentifier() and not _RESERVED.fullmatch(op) and op not in names.kernels else f"op_{op}"
            names.rule_ops[op] = name
        kw = [f"{k}={v!r}" for k, v in at.items()]
        if names.standalone:  # the raw function, its result made the declared aval (as kernel() does)
            args = [name, _np_type(out.dtype), repr(out.shape), *args]
            name = "user_op"
        call = f"{name}({', '.join(args + kw)})"
        return call + "[()]" if out.ndim == 0 else call
    template = names.template(op)
    if template is not None:
        if out.dtype in HALF_DTYPES:  # SciPy and ml_dtypes compute some of these in float32
            t = _np_type(out.dtype)
            return f"{t}({template.format(*args)})" if out.ndim == 0 else \
                f"({template.format(*args)}).astype({t}, copy=False)"
        return template.format(*args)
    fn = prim.numpy_fn  # a structural op: the kernel its rule block names, written inline
    if fn is None:
        raise NotImplementedError(f"the NumPy lowering has no rule for primitive {op!r}")
    printer = _PRINTERS.get(fn)
    if printer is not None:
        expr, array = printer(args, at, ins_avals, out)
        helper = expr[:expr.find("(")]
        if helper in _HELPERS:  # a kernel the printer calls by name
            names.kernels[helper] = _HELPERS[helper]
    else:  # called by its name
        names.kernels[fn.__name__] = fn
        kw = [f"{k}={v!r}" for k, v in at.items()]
        expr, array = f"{fn.__name__}({', '.join(args + kw)})", True
        if out.dtype in HALF_DTYPES:  # SciPy computes its functions of 2-byte floats in float32 (erf)
            t = _np_type(out.dtype)
            return f"{t}({expr})" if out.ndim == 0 else f"({expr}).astype({t}, copy=False)"
    return expr + "[()]" if array and out.ndim == 0 else expr  # a 0-d array becomes a NumPy scalar


# How the generated source writes a structural kernel of tidu.ops.reference inline, keyed
# by the kernel (what the primitive's ``numpy`` clause names): the expression, and whether
# it gives a 0-d array at rank 0 (made a NumPy scalar) rather than a scalar already.
Printer = Callable[[list[str], dict[str, Any], list[Aval], Aval], tuple[str, bool]]
_PRINTERS: dict[Callable[..., Any], Printer] = {}


def _prints(kernel: Callable[..., Any]) -> Callable[[Printer], Printer]:
    def register(printer: Printer) -> Printer:
        _PRINTERS[kernel] = printer
        return printer

    return register


@_prints(sem.conj)
def _conj(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
    return (f"np.conjugate({args[0]})" if is_complex(ins_avals[0].dtype) else args[0]), False


@_prints(sem.real)
def _real(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
    return (f"{args[0]}.real" if is_complex(ins_avals[0].dtype) else args[0]), False


@_prints(sem.compare)
def _compare(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
    return f"{args[0]} {sem.COMPARISON_SYMBOLS[at['direction']]} {args[1]}", False


@_prints(sem.select)
def _select(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
    if out.ndim == 0:
        return f"{args[1]} if {args[0]} else {args[2]}", False
    return f"np.where({args[0]}, {args[1]}, {args[2]})", False


@_prints(sem.convert)
def _convert(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
    drop_imag = is_complex(ins_avals[0].dtype) and not is_complex(at["dtype"])
    if is_integer(at["dtype"]) and is_inexact(ins_avals[0].dtype):  # saturating, nan 0: XLA's
        x = f"{args[0]}{'.real' if drop_imag else ''}"
        return f"float_to_int({x}, {_np_type(at['dtype'])})" + ("[()]" if out.ndim == 0 else ""), True
    return f"{args[0]}{'.real' if drop_imag else ''}.astype({_np_type(at['dtype'])})", False


@_prints(sem.slice_)
def _slice(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
    bounds = zip(at["start"], at["limit"], at["strides"], strict=True)
    return f"{args[0]}[{', '.join(f'{s}:{e}:{st}' for s, e, st in bounds) or '()'}]", False


# Operands of rank >= 1 are ndarrays: their methods (x.sum, x.reshape...) compute what
# the np.* functions do, without those functions' dispatch, which costs more than the
# operation itself on small arrays. Rank-0 operands are NumPy scalars: np.* functions.

def _reduction(method: str) -> Printer:
    def printer(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
        if not at["axes"]:
            return args[0], False
        dtype = ins_avals[0].dtype
        if dtype in HALF_DTYPES:  # accumulated in float32 (JAX's), as reference.reduce_sum does
            return (f"np.asarray({args[0]}.{method}(axis={at['axes']!r}, dtype=np.float32))"
                    f".astype({_np_type(dtype)})"), True
        return f"{args[0]}.{method}(axis={at['axes']!r}, dtype={_np_type(dtype)})", True

    return printer


_PRINTERS[sem.reduce_sum] = _reduction("sum")
_PRINTERS[sem.reduce_prod] = _reduction("prod")


@_prints(sem.reduce_max)
def _reduce_max(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
    if not at["axes"]:
        return args[0], False
    dtype = ins_avals[0].dtype
    lowest = "-np.inf" if is_float(dtype) else repr(int(np.iinfo(dtype).min))
    return f"{args[0]}.max(axis={at['axes']!r}, initial={lowest})", True


@_prints(sem.reshape)
def _reshape(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
    if tuple(at["shape"]) == ins_avals[0].shape:  # the same shape: the value itself
        return args[0], False
    if ins_avals[0].ndim == 0:
        return f"np.reshape({args[0]}, {at['shape']!r})", True
    return f"{args[0]}.reshape({at['shape']!r})", True


@_prints(sem.transpose)
def _transpose(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
    return f"{args[0]}.transpose({at['perm']!r})", True


@_prints(sem.reverse)
def _reverse(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
    return f"np.flip({args[0]}, {at['dims']!r})", True


@_prints(sem.concatenate)
def _concatenate(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
    return f"np.concatenate(({', '.join(args)},), axis={at['axis']!r})", True


def _broadcast_plan(at: Attrs | dict[str, Any], in_aval: Aval, out: Aval) -> tuple[tuple[int, ...] | None, bool]:
    """How a broadcast runs, decided once where the avals are known: the shape its operand
    is reshaped to (None: a scalar, as it is), and whether it is made as a new array
    (``broadcast_filled``) rather than as ``np.broadcast_to``'s view."""
    expanded = [1] * len(at["shape"])
    for i, d in enumerate(at["dims"]):
        expanded[d] = in_aval.shape[i]
    return (tuple(expanded) if in_aval.ndim else None), out.size <= BROADCAST_COPY_SIZE


@_prints(sem.broadcast_in_dim)
def _broadcast_in_dim(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
    expanded, filled = _broadcast_plan(at, ins_avals[0], out)  # known here: no helper call per run
    operand = args[0] if expanded is None else f"{args[0]}.reshape({expanded!r})"
    if filled:
        return f"broadcast_filled({operand}, {tuple(at['shape'])!r})", True
    return f"np.broadcast_to({operand}, {tuple(at['shape'])!r})", True


def _broadcast_kernel(at: Attrs, in_aval: Aval, out: Aval) -> Callable[[Any], np.ndarray]:
    """The interpreter's ``broadcast_in_dim`` for one instruction, as the generated source
    runs it (``_broadcast_in_dim``): the generic kernel plans the reshape and calls
    np.broadcast_to on every run, several times the cost of the broadcast itself."""
    expanded, filled = _broadcast_plan(at, in_aval, out)
    shape = tuple(at["shape"])
    fill = sem.broadcast_filled if filled else np.broadcast_to
    if expanded is None:
        return lambda x: fill(x, shape)
    return lambda x: fill(np.reshape(x, expanded), shape)


# dot_general written out where the operands' dtype is one NumPy's matmul keeps: the
# transposes, reshapes and matmul of ``reference.dot_general`` with its plan made here
# once (the same operations, so the same bits), without the call and the planning per
# run, several times the cost of a small product (a loop body's matrix-vector products).
_DOT_INLINE_DTYPES = frozenset({"float32", "float64", "complex64", "complex128"})


@_prints(sem.dot_general)
def _dot_general(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
    la, ra = ins_avals
    if la.ndim == 0 or ra.ndim == 0 or la.dtype != ra.dtype or la.dtype not in _DOT_INLINE_DTYPES:
        kw = "".join(f", {k}={at[k]!r}" for k in ("lhs_contract", "rhs_contract", "lhs_batch", "rhs_batch"))
        return f"dot_general({args[0]}, {args[1]}{kw})", True
    pa, pb, sa, sb, shape = sem.dot_plan(la.shape, ra.shape, tuple(at["lhs_contract"]), tuple(at["rhs_contract"]),
                                         tuple(at["lhs_batch"]), tuple(at["rhs_batch"]))

    def operand(x: str, perm: list[int], shape3: tuple[int, int, int]) -> str:
        moved = "" if perm == sorted(perm) else f".transpose({tuple(perm)!r})"
        return f"{x}{moved}.reshape({shape3!r})"

    a, b = operand(args[0], pa, sa), operand(args[1], pb, sb)
    product = f"({a} @ {b})" if at["lhs_contract"] else f"({a} * {b})"  # (no contraction: an outer product)
    return f"{product}.reshape({shape!r})", True


@_prints(sem.pad)
def _pad(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
    plan = sem.pad_plan(ins_avals[0].shape, at["low"], at["high"], at["interior"])  # made once, here
    return f"pad_to({args[0]}, {args[1]}, {', '.join(map(repr, plan))})", True


# Kernels printers call by name (bound in the namespace of the source when called).
_HELPERS: dict[str, Callable[..., Any]] = {"broadcast_filled": sem.broadcast_filled, "pad_to": sem.pad_to,
                                           "dot_general": sem.dot_general,
                                           "float_to_int": sem.float_to_int}
# Up to this many elements a broadcast is made as a new array (broadcast_filled): the
# same values, and np.broadcast_to's own cost is that of copying a few thousand numbers.
BROADCAST_COPY_SIZE = 1024


def _comment(text: object) -> str:
    return str(text).replace("\n", " ").replace("\r", " ")


Loop = Callable[[str, Attrs, Catalog], Any]  # what a control-flow op's name is bound to


def _generate(program: SSAProgram, name: str = "program", prefix: str = "", loop: Loop | None = None,
              standalone: bool = False) -> tuple[str, dict[str, Any]]:
    """The source of ``def program(...)`` (``name``) and the constants it refers to by name
    (``prefix`` before the names of constants and loops: a body's own, in standalone
    source); ``loop(op, attrs, cat)`` gives what a control-flow op's name is bound to
    (default: its kernel)."""
    avals = program.slot_avals
    consts: dict[str, Any] = {}
    params = ", ".join(f"s{s}" for s in program.input_slots)
    lines = [f"def {name}({params}):"]
    for s, k in zip(program.input_slots, program.input_keys, strict=True):
        lines.append(f"    # input s{s} = {_comment(k)} : {avals[s]}")
    for s in program.input_slots:
        if avals[s].ndim == 0:
            lines.append(f"    s{s} = s{s}[()]  # rank 0: a NumPy scalar")
    last_use = _last_uses(program)
    cat = program.catalog if program.catalog is not None else catalog()
    names = _Names(cat, standalone)
    by_users = _broadcast_by_users(program, names)
    loop = loop or control_kernel
    known: dict[int, np.ndarray] = {}  # slots whose value is fixed: constants and what is folded
    folded = 0
    loops: dict[tuple, str] = {}  # a control-flow op's siblings -> the tuple of all its results
    # the last sibling taken from each loop's tuple: the tuple goes then, so that a result
    # is freed after its own last use (a stacked residual, say), not at the end
    last_sibling = {(ins.op, control.without_index(ins.attrs), ins.inputs): n
                    for n, ins in enumerate(program.instructions) if ins.op in control.CONTROL_OPS}
    for n, ins in enumerate(program.instructions):
        (out,) = ins.outputs
        if ins.op in control.CONTROL_OPS:  # one call for all siblings, each takes its result
            shared = control.without_index(ins.attrs)
            results = loops.get((ins.op, shared, ins.inputs))
            if results is None:
                results = loops[(ins.op, shared, ins.inputs)] = f"r{out}"
                fn = f"{prefix}{ins.op}{out}"
                consts[fn] = loop(ins.op, shared, cat)
                bodies = ", ".join(b.name for b in control.bodies(ins.op, shared))
                lines.append(f"    r{out} = {fn}({', '.join(f's{i}' for i in ins.inputs)})  # {bodies}")
            lines.append(f"    s{out} = {results}[{ins.attrs['index']}]  # {avals[out]}")
            if last_sibling[(ins.op, shared, ins.inputs)] == n:
                lines.append(f"    del {results}")
        elif ins.op == "constant":
            value = ins.attrs["value"]
            consts[f"{prefix}c{out}"] = value.array[()] if value.array.ndim == 0 else value.array
            known[out] = value.array
            lines.append(f"    s{out} = {prefix}c{out}  # {avals[out]} = {_comment(value)}")
        elif (ins.inputs and all(i in known for i in ins.inputs) and avals[out].size <= FOLD_SIZE
              and folded + avals[out].size <= FOLD_TOTAL
              and (value := _fold(ins, [known[i] for i in ins.inputs], program)) is not None):
            # every operand is fixed: computed once here, as XLA folds constants
            folded += avals[out].size
            known[out] = value
            consts[f"{prefix}c{out}"] = value[()] if value.ndim == 0 else value
            lines.append(f"    s{out} = {prefix}c{out}  # {avals[out]} = {ins.op} of constants, folded")
        elif out in by_users:
            expanded, _ = _broadcast_plan(ins.attrs, avals[ins.inputs[0]], avals[out])
            operand = f"s{ins.inputs[0]}" if expanded is None else f"s{ins.inputs[0]}.reshape({expanded!r})"
            lines.append(f"    s{out} = {operand}  # {avals[out]}, broadcast by its users")
        else:
            args = [f"s{i}" for i in ins.inputs]
            rhs = _expr(ins, args, [avals[i] for i in ins.inputs], avals[out], names)
            lines.append(f"    s{out} = {rhs}  # {avals[out]}")
        dead = last_use.get(n)
        if dead:
            lines.append(f"    del {', '.join(f's{d}' for d in dead)}")
    outs = ", ".join(f"s{s}" for s in program.output_slots)
    lines.append(f"    return ({outs}{',' if len(program.output_slots) == 1 else ''})")
    consts.update(names.kernels)
    header = []
    for op, name in names.rule_ops.items():  # their kernels, bound by name like the constants
        prim = cat.get_primitive(op)
        consts[name] = kernel(prim)
        how = f"numpy {prim.decl.numpy[0]}" if prim.decl.numpy else "its meaning, lambdified"
        header.append(f"    # {name}: the primitive {op} ({_comment(prim.loc)}), by {how}")
    lines[1:1] = header
    return "\n".join(lines) + "\n", consts


def body_function(body: Body, cat: Catalog) -> Callable[..., tuple[Any, ...]]:
    """``body``'s graph as generated NumPy source: a function of its parameters (rank 0 as
    NumPy scalars) returning the tuple of its results."""
    key = (body, cat.serial)
    fn = _BODIES.get(key)
    if fn is None:
        if len(_BODIES) > 1024:
            _BODIES.clear()
        fn = _BODIES[key] = _compiled(from_graph(body.graph, cat)).fn
    return fn


_BODIES: dict[tuple, Callable[..., tuple[Any, ...]]] = {}


def control_kernel(op: str, attrs: Attrs, cat: Catalog) -> Callable[..., tuple[Any, ...]]:
    """The function that runs control-flow op ``op`` (tidu.ops.control; ``attrs`` without
    ``index``) over the compiled bodies and returns every result."""
    faster = _ON_FLOATS.get(op)  # (a scan of a few float64 numbers: below)
    if faster is not None and (run := faster(attrs, cat)) is not None:
        return run
    fn, args = loop_arguments(op, attrs, lambda b: body_function(b, cat))
    return functools.partial(fn, *args)


# A control-flow op runs one of these loops, bound to its compiled bodies and counts by
# functools.partial (``loop_arguments``); standalone source binds the same functions.


def run_cond(branches: Sequence[Callable[..., tuple[Any, ...]]], selector: Any, *operands: Any) -> tuple[Any, ...]:
    return branches[min(max(int(selector), 0), len(branches) - 1)](*operands)


def run_while(cond_fn: Callable[..., tuple[Any, ...]], body_fn: Callable[..., tuple[Any, ...]], ncc: int, nbc: int,
              *args: Any) -> tuple[Any, ...]:
    cond_consts, body_consts, carry = args[:ncc], args[ncc:ncc + nbc], args[ncc + nbc:]
    while cond_fn(*cond_consts, *carry)[0]:
        carry = body_fn(*body_consts, *carry)
    return tuple(carry)


def run_scan(fn: Callable[..., tuple[Any, ...]], nc: int, nk: int, steps: range,
             y_types: Sequence[tuple[tuple[int, ...], str]], *args: Any) -> tuple[Any, ...]:
    consts, carry, xs = args[:nc], args[nc:nc + nk], args[nc + nk:]
    ys = [np.empty(shape, dtype) for shape, dtype in y_types]
    for i in steps:
        out = fn(*consts, *carry, *[x[i] for x in xs])
        carry = out[:nk]
        for y, v in zip(ys, out[nk:], strict=True):
            y[i] = v
    return (*carry, *ys)


# --- scans of a few float64 numbers, run on Python floats -----------------------------------
# A scan whose body holds only small float64 values (an ODE step and its tangents, say)
# spends its time in NumPy's per-call overhead: a ufunc on 2 numbers costs ~20 times an
# operation on Python floats. Such a scan runs as one generated loop over Python floats,
# every array element a local variable: the carries stay floats from step to step and are
# made arrays once at the end. Python's float +, -, *, / and abs are the IEEE double
# operations NumPy's float64 loops perform (a division by zero, which Python refuses, is
# done by NumPy). A built-in one-operand op whose kernel is a NumPy ufunc is that ufunc
# called on the number and made a Python float again (``float(np.sin(x))``): a ufunc's
# one-operand loop gives an element the same bits alone as in an array. (Not so for two
# operands: NumPy's power of two float64 scalars differs from its array loop in the last
# bit at some points, so ``**`` and the like keep the compiled body.) So every number is
# NumPy's to the bit, with one exception: where both operands are NaN, the result is one
# of them, and which one depends on the machine code (NumPy's array loops, its scalars
# and Python's floats differ, and Python's changes once it specializes a loop). A NaN
# whose bits differ can only reach a result as a NaN, so a scan that returns a NaN is run
# again by its compiled body (``run_scan``), whose bits are NumPy's. Any other op or
# dtype, a larger value, or a body whose floats would cost more than its NumPy calls: the
# scan runs its compiled body from the start.

SCALAR_SIZE = 256  # elements: the largest value a scalar scan holds as separate floats
# Per step, a scalar scan runs one float operation per element of each arithmetic op,
# the compiled body one NumPy call per op (element moves cost floats nothing). In units
# of a float +, -, * or /: a NumPy call on the body's small arrays costs about 50, a
# ufunc on one float (``float(np.sin(x))``) about 10. The scalar loop runs while it costs
# at most SCALAR_PER_OP per op of the body (bench/control.py's systems: 3 to 15).
SCALAR_PER_OP = 40
UFUNC_ON_FLOAT = 10
SCALAR_STATEMENTS = 20_000  # a longer loop body would cost more to compile than it saves
INLINE_DEPTH = 6  # ops in one expression of a scalar scan's step, at most

# the element-wise ops written on floats, as Python expressions over {0}, {1}
_FLOAT_OPS = {"add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "neg": "-{0}", "abs": "abs({0})",
              "div": "({0} / {1} if {1} else div0({0}, {1}))"}
_ARITHMETIC = frozenset(_FLOAT_OPS.values())
_UFUNC_CALL = re.compile(r"np\.\w+\(\{0\}\)")  # np.sin({0}): a unary ufunc, which takes a float as it is
# the ops that only move elements: their kernels, run on the element numbers
_MOVES: dict[str, Callable[..., Any]] = {
    "slice": sem.slice_, "reshape": sem.reshape, "transpose": sem.transpose, "reverse": sem.reverse,
    "broadcast_in_dim": sem.broadcast_in_dim, "concatenate": sem.concatenate, "pad": sem.pad}


def _on_floats(op: str, cat: Catalog) -> str | None:
    """Built-in element-wise ``op`` as an expression over Python floats {0}, {1}... giving
    a Python float with NumPy's bits (see above), or None."""
    got = _FLOAT_OPS.get(op)
    if got is not None:
        return got
    prim = cat.get_primitive(op)
    if not getattr(prim, "builtin", False) or prim.variadic or prim.attrs or len(prim.operands) != 1:
        return None
    template = numpy_inline(prim, cat, ["{0}"])
    return None if template is None or not _UFUNC_CALL.fullmatch(template) else f"float({template})"


def _div0(a: float, b: float) -> float:
    with np.errstate(all="ignore"):
        return float(np.float64(a) / np.float64(b))


@functools.lru_cache(maxsize=4096)
def _moved(op: str, attrs: Attrs, shapes: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    """Which operand element (numbered through the operands in order) each result element
    of data-movement op ``op`` is."""
    numbers, start = [], 0
    for shape in shapes:
        size = int(np.prod(shape, dtype=np.int64))
        numbers.append(np.arange(start, start + size, dtype=np.int64).reshape(shape))
        start += size
    return tuple(np.asarray(_MOVES[op](*numbers, **dict(attrs.items()))).ravel().tolist())


def scalar_scan(attrs: Attrs, cat: Catalog) -> Callable[..., tuple[Any, ...]] | None:
    """The scan of ``attrs`` (without ``index``) as a loop over Python floats, or None where
    its body does not qualify (see above). Made once per scan and catalog."""
    key = (attrs, cat.serial)
    got = _SCALAR_SCANS.get(key, _NOT_MADE)
    if got is _NOT_MADE:
        if len(_SCALAR_SCANS) > 1024:
            _SCALAR_SCANS.clear()
        got = _SCALAR_SCANS[key] = _scalar_scan(attrs, cat)
    return got


_NOT_MADE = object()
_SCALAR_SCANS: dict[tuple, Callable[..., tuple[Any, ...]] | None] = {}
# the control-flow ops that may run on Python floats, by name (as _LOOP_ARGUMENTS)
_ON_FLOATS: dict[str, Callable[[Attrs, Catalog], Callable[..., tuple[Any, ...]] | None]] = {"scan": scalar_scan}


def clear_bodies() -> None:
    """Forget the compiled loop bodies and scalar scans (``tidu.clear_cache``)."""
    _BODIES.clear()
    _SCALAR_SCANS.clear()


def _scalar_scan(attrs: Attrs, cat: Catalog) -> Callable[..., tuple[Any, ...]] | None:
    body: Body = attrs["body"]
    graph = body.graph
    nodes = graph.nodes
    if any(n.aval.dtype != "float64" or n.aval.size > SCALAR_SIZE for n in nodes):
        return None
    # the body's values element by element: terms (a template and its operand terms, an
    # input element, a constant's bits) numbered in order, each once; per node, its
    # elements' terms in C order
    terms: list[tuple[str, Any]] = []
    numbered: dict[tuple[str, Any], int] = {}
    setdefault = numbered.setdefault

    def term(t: tuple[str, Any]) -> int:
        got = setdefault(t, len(terms))
        if got == len(terms):
            terms.append(t)
        return got

    elements: list[list[int]] = [[] for _ in nodes]
    ops = 0  # the body's arithmetic ops (one NumPy call each in the compiled body)
    for p, i in enumerate(graph.inputs):
        elements[i] = [term(("in", (p, j))) for j in range(nodes[i].aval.size)]
    for i, n in enumerate(nodes):
        op = n.op
        if op is None:
            continue
        if op == "constant":  # by its bits: 0.0 and -0.0 are two constants
            values = np.asarray(n.attrs["value"].array, dtype=np.float64).ravel()
            elements[i] = [term(("const", v)) for v in values.view(np.int64).tolist()]
        elif op in _MOVES:
            flat = [t for j in n.inputs for t in elements[j]]
            elements[i] = [flat[k] for k in _moved(op, n.attrs, tuple(nodes[j].aval.shape for j in n.inputs))]
        elif (kind := _on_floats(op, cat)) is not None:
            size = n.aval.size
            operands = []
            for j in n.inputs:
                e = elements[j]
                if len(e) != size:
                    if nodes[j].aval.ndim or size == 0:
                        return None  # operands have the result's shape or rank 0
                    e = e * size
                operands.append(e)
            ops += 1
            elements[i] = [term((kind, args)) for args in zip(*operands, strict=True)]
        else:
            return None
    nc, nk = attrs["n_consts"], attrs["n_carry"]
    outputs = [elements[o] for o in graph.outputs]
    live = [False] * len(terms)  # the terms the results read
    stack = [t for out in outputs for t in out]
    while stack:
        t = stack.pop()
        if not live[t]:
            live[t] = True
            kind, payload = terms[t]
            if kind != "in" and kind != "const":
                stack.extend(payload)
    # names; the terms of constants and of the scan's constants alone are computed once,
    # before the loop
    invariant = [False] * len(terms)
    for t, (kind, payload) in enumerate(terms):
        if kind == "in":
            invariant[t] = payload[0] < nc
        elif kind == "const":
            invariant[t] = True
        else:
            invariant[t] = all([invariant[a] for a in payload])
    # a step's term read once, by another of the step's terms, is written inside its reader's
    # expression (fewer statements to compile and run): not into a division (which writes
    # its operands twice), and a few levels deep at most (deep expressions strain the compiler)
    reads = [0] * len(terms)
    for out in outputs:
        for t in out:
            reads[t] += 2  # (a result is a variable)
    work = 0  # a step's cost in float operations
    twice: dict[str, bool] = {}  # whether an expression writes an operand twice (a division)
    for t, (kind, payload) in enumerate(terms):
        if live[t] and kind != "in" and kind != "const":
            if not invariant[t]:
                work += 1 if kind in _ARITHMETIC else UFUNC_ON_FLOAT
            if kind not in twice:
                twice[kind] = any(kind.count(f"{{{j}}}") > 1 for j in range(len(payload)))
            for a in payload:
                reads[a] += 1 + twice[kind]
    names: list[str] = []
    depth = [0] * len(terms)
    namespace: dict[str, Any] = {"np": np, "div0": _div0}
    before, inside = [], []
    for t, (kind, payload) in enumerate(terms):
        if kind == "in":
            p, j = payload
            names.append(f"a{p}_{j}")
        elif kind == "const":
            value = float(np.int64(payload).view(np.float64))
            if np.isfinite(value) and not np.signbit(value):
                names.append(repr(value))
            else:  # bound by name: the same bits
                names.append(f"k{t}")
                namespace[f"k{t}"] = value
        elif not live[t]:
            names.append(f"t{t}")
        else:
            expr = kind.format(*[names[a] for a in payload])
            d = depth[t] = 1 + max([depth[a] for a in payload])
            if reads[t] == 1 and d <= INLINE_DEPTH and not invariant[t]:
                names.append(f"({expr})")
            else:
                depth[t] = 0
                names.append(f"t{t}")
                (before if invariant[t] else inside).append(f"t{t} = {expr}")
    if len(before) + len(inside) > SCALAR_STATEMENTS or work > SCALAR_PER_OP * max(ops, 1):
        return None
    in_avals, out_avals = body.in_avals, body.out_avals
    length, n_in, ny = attrs["length"], len(in_avals), len(out_avals) - nk
    params = ", ".join(f"a{p}" for p in range(n_in))
    lines = [f"def scan({params}):"]
    for p in range(nc + nk):
        a = in_avals[p]
        if a.ndim == 0:
            lines.append(f"    a{p}_0 = float(a{p})")
        elif a.size:
            lines.append(f"    {''.join(f'a{p}_{j}, ' for j in range(a.size))}= a{p}.ravel().tolist()")
    for p in range(nc + nk, n_in):  # (a slice of one number: a list of floats, not of 1-lists)
        if in_avals[p].size == 1:
            lines.append(f"    x{p} = a{p}.ravel().tolist()")
        elif in_avals[p].size:
            lines.append(f"    x{p} = a{p}.reshape({length}, {in_avals[p].size}).tolist()")
    lines += [f"    y{k} = []" for k in range(ny)]
    lines += [f"    {line}" for line in before]
    lines.append(f"    for i in {f'range({length - 1}, -1, -1)' if attrs['reverse'] else f'range({length})'}:")
    for p in range(nc + nk, n_in):
        if in_avals[p].size == 1:
            lines.append(f"        a{p}_0 = x{p}[i]")
        elif in_avals[p].size:
            lines.append(f"        {''.join(f'a{p}_{j}, ' for j in range(in_avals[p].size))}= x{p}[i]")
    lines += [f"        {line}" for line in inside]
    for k in range(ny):  # (before the carries change: a y may be a carry the step received)
        if outputs[nk + k]:
            lines.append(f"        y{k} += ({''.join(names[t] + ', ' for t in outputs[nk + k])})")
    carried = [(f"a{nc + k}_{j}", names[t]) for k in range(nk) for j, t in enumerate(outputs[k])]
    if carried:
        lines.append(f"        {', '.join(c for c, _ in carried)} = {', '.join(v for _, v in carried)}")
    if lines[-1].endswith(":"):
        lines.append("        pass")  # a loop with nothing to do
    nan = [f"{c} != {c}" for c, _ in carried]  # (x != x: x is NaN)
    results = []
    for k in range(nk):
        a = out_avals[k]
        if a.ndim == 0:
            results.append(f"np.float64(a{nc + k}_0)")
        else:
            values = "".join(f"a{nc + k}_{j}, " for j in range(a.size))
            results.append(f"np.array(({values}), dtype=np.float64).reshape({a.shape!r})")
    for k in range(ny):
        lines.append(f"    y{k} = np.array(y{k}, dtype=np.float64).reshape({(length, *out_avals[nk + k].shape)!r})")
        nan.append(f"np.isnan(y{k}).any()")
        results.append(f"y{k}[::-1].copy()" if attrs["reverse"] else f"y{k}")
    if nan:  # NaN's bits are NumPy's where its loop makes them
        lines += [f"    if {' or '.join(nan)}:", f"        return compiled()({params})"]
    lines.append(f"    return ({''.join(r + ', ' for r in results)})")

    @functools.cache
    def compiled() -> Callable[..., tuple[Any, ...]]:
        fn, args = loop_arguments("scan", attrs, lambda b: body_function(b, cat))
        return functools.partial(fn, *args)

    namespace["compiled"] = compiled
    exec(compile("\n".join(lines) + "\n", "<tidu numpy scan>", "exec"), namespace)  # tidu-generated source
    return namespace["scan"]


def _cond_arguments(attrs: Attrs, body: Callable[[Body], Any]) -> tuple[Callable[..., Any], tuple]:
    return run_cond, ([body(b) for b in attrs["branches"]],)


def _while_arguments(attrs: Attrs, body: Callable[[Body], Any]) -> tuple[Callable[..., Any], tuple]:
    return run_while, (body(attrs["cond_body"]), body(attrs["body"]), attrs["n_cond_consts"],
                       attrs["n_body_consts"])


def _scan_arguments(attrs: Attrs, body: Callable[[Body], Any]) -> tuple[Callable[..., Any], tuple]:
    nk, length = attrs["n_carry"], attrs["length"]
    y_types = [(a.shape, a.dtype) for a in control.result_avals("scan", control.with_index(attrs, 0))[nk:]]
    steps = range(length - 1, -1, -1) if attrs["reverse"] else range(length)
    return run_scan, (body(attrs["body"]), attrs["n_consts"], nk, steps, y_types)


# the control-flow ops of tidu.ops.control, each with how its loop function is called
_LOOP_ARGUMENTS = {"cond": _cond_arguments, "while": _while_arguments, "scan": _scan_arguments}


def loop_arguments(op: str, attrs: Attrs, body: Callable[[Body], Any]) -> tuple[Callable[..., Any], tuple]:
    """The loop function of control-flow op ``op`` and its leading arguments, each body
    given as ``body(b)`` (a compiled body function, or its name in standalone source)."""
    return _LOOP_ARGUMENTS[op](attrs, body)


# Instructions whose operands are all constants are evaluated when the program is
# compiled, up to this many elements each and in total (the folded values live as long
# as the compiled program).
FOLD_SIZE = 1 << 16
FOLD_TOTAL = 1 << 20


def _fold(ins: Instruction, args: list[np.ndarray], program: SSAProgram) -> np.ndarray | None:
    """The value of ``ins`` on constant operands, with the interpreter's kernels (what the
    generated line would compute), or None where it cannot be computed here."""
    try:
        with np.errstate(all="ignore"):
            value = sem.impl_of(ins.op, program.catalog)(args, ins.attrs)
    except Exception:  # e.g. a rule-defined kernel that fails: left to run time
        return None
    value = np.array(value)  # a fresh, writable array (a broadcast view is not)
    value.setflags(write=False)  # shared by every run: never an output itself (_finish copies)
    return value


# Two-operand elementwise templates that broadcast as NumPy does: infix arithmetic and
# comparisons, and NumPy ufuncs called on the two operands.
_BROADCASTING = re.compile(r"\{0\} (?:[-+*/]|[<>]=?|[!=]=) \{1\}|np\.(\w+)\(\{0\}, \{1\}\)")


def _broadcast_by_users(program: SSAProgram, names: _Names) -> set[int]:
    """The slots of broadcasts that need not be made: every user is a two-operand
    elementwise op (``_BROADCASTING``) whose other operand has the broadcast's shape and
    is no such broadcast itself, and the value is no output. Such a broadcast is its
    operand reshaped to the broadcast's rank (a view), and each user broadcasts it as
    NumPy does: the same values, without the copy, which costs a loop body's small
    arrays more than the ops that read it."""
    insts = program.instructions
    avals = program.slot_avals
    primitive = names.cat.get_primitive
    made = {ins.outputs[0] for ins in insts
            if ins.op not in control.CONTROL_OPS and primitive(ins.op).numpy_fn is sem.broadcast_in_dim}
    if not made:
        return set()
    users: dict[int, list[int]] = {}
    for n, ins in enumerate(insts):
        for i in ins.inputs:
            if i in made:
                users.setdefault(i, []).append(n)
    outputs = set(program.output_slots)
    out: set[int] = set()
    for slot, users_of in users.items():
        if slot in outputs:
            continue
        for n in users_of:
            ins = insts[n]
            if len(ins.inputs) != 2 or ins.inputs[0] == ins.inputs[1] or ins.op in control.CONTROL_OPS:
                break
            prim = primitive(ins.op)
            if not prim.builtin or prim.variadic:
                break
            template = names.template(ins.op)
            match = _BROADCASTING.fullmatch(template) if template is not None else None
            if match is None or (match.group(1) and not isinstance(getattr(np, match.group(1), None), np.ufunc)):
                break
            other = ins.inputs[1] if ins.inputs[0] == slot else ins.inputs[0]
            if other in made or avals[other] != avals[slot] or avals[ins.outputs[0]].shape != avals[slot].shape:
                break
        else:
            out.add(slot)
    return out


def _last_uses(program: SSAProgram) -> dict[int, list[int]]:
    """Per instruction index, the array slots (rank >= 1) no longer needed after it,
    so large intermediates are freed early. Inputs and outputs are kept."""
    keep = set(program.input_slots) | set(program.output_slots)
    last: dict[int, int] = {}
    for n, ins in enumerate(program.instructions):
        for i in ins.inputs:
            last[i] = n
    dead: dict[int, list[int]] = {}
    for slot, n in sorted(last.items()):
        if slot not in keep and program.slot_avals[slot].ndim > 0:
            dead.setdefault(n, []).append(slot)
    return dead


class _Compiled(NamedTuple):
    source: str
    fn: Callable[..., tuple[Any, ...]]
    outputs: list[tuple[np.dtype, tuple[int, ...]]]  # declared dtype and shape per output


def numpy_source(program: SSAProgram, standalone: bool = False) -> str:
    """Readable, deterministic Python/NumPy source of ``program`` (one function). With
    ``standalone``, a whole module that defines its constants and kernels and imports only
    NumPy (SciPy where a kernel is SciPy's): see ``standalone_source``."""
    return standalone_source(program) if standalone else _compiled(program).source


# --- standalone source ----------------------------------------------------------------------

STANDALONE_INLINE = 64  # constants up to this many (finite) elements are written as numbers

def _in_docstring(name: str) -> str:
    """An input's name (a dict key may hold any text) as docstring text that cannot end
    the docstring or break the source: backslashes, quotes and control characters escaped."""
    return name.encode("unicode_escape").decode("ascii").replace('"', '\\"')


_STANDALONE_HEAD = '''\
"""{title}

Generated by tidu (to_numpy_source(..., standalone=True)); needs only NumPy{scipy}.

    run({signature})
        -> [{outputs}]

``run(*inputs)`` takes the inputs in this order (arrays or numbers, converted to the
declared dtypes within their kind) and returns a list of fresh arrays. ``program`` is
the same computation on exactly typed inputs (rank 0 as NumPy scalars), without checks.
``INPUTS`` and ``OUTPUTS`` list the (name, dtype, shape) of each.
"""

from __future__ import annotations

{imports}


def _array(data: str, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """A constant from the base64 of its zlib-compressed little-endian bytes (read-only)."""
    raw = np.frombuffer(zlib.decompress(base64.b64decode(data)), dtype=np.dtype(dtype).newbyteorder("<"))
    return _fixed(raw.astype(dtype).reshape(shape))


def _fixed(value: np.ndarray) -> np.ndarray:
    value.setflags(write=False)  # shared by every call
    return value
'''

_STANDALONE_RUN = '''

INPUTS = {inputs!r}
OUTPUTS = {outputs!r}


def run(*inputs):
    """The outputs for ``inputs`` (in ``INPUTS`` order), as a list of fresh arrays."""
    if len(inputs) != len(INPUTS):
        raise TypeError(f"expected {{len(INPUTS)}} input(s) ({{', '.join(n for n, _, _ in INPUTS)}}), "
                        f"got {{len(inputs)}}")
    arrays = []
    for (name, dtype, shape), value in zip(INPUTS, inputs):
        a = np.asarray(value)
        if a.shape != shape:
            raise ValueError(f"input {{name}}: expected shape {{shape}}, got {{a.shape}}")
        if a.dtype != dtype:
            if not np.can_cast(a.dtype, dtype, casting="same_kind"):
                raise TypeError(f"input {{name}}: expected dtype {{dtype}}, got {{a.dtype.name}}")
            a = a.astype(dtype)
        arrays.append(a)
    with np.errstate(all="ignore"):
        values = program(*arrays)
    return [np.array(v, dtype=dtype) for v, (_, dtype, _) in zip(values, OUTPUTS)]


if __name__ == "__main__":
    print("run(" + ", ".join(f"{{n}}: {{d}}{{list(s)}}" for n, d, s in INPUTS) + ") -> ["
          + ", ".join(f"{{d}}{{list(s)}}" for _, d, s in OUTPUTS) + "]")
'''


class StandaloneError(NotImplementedError):
    """The program applies something standalone source cannot define without tidu."""


def standalone_source(program: SSAProgram) -> str:
    """A module that runs ``program`` in a fresh interpreter with NumPy alone (and SciPy
    where a kernel is SciPy's): the source of ``numpy_source``, its constants written out
    (numbers with the shortest exact spelling, else the base64 of their zlib-compressed
    bytes), the tidu kernels it calls copied from their source, each control-flow body a
    function of its own, and ``run(*inputs)`` that checks and converts the inputs."""
    cat = program.catalog if program.catalog is not None else catalog()
    kernels: dict[str, Any] = {"user_op": user_op}
    consts: dict[str, Any] = {}
    defs: list[str] = []
    done: dict[Body, str] = {}

    def body_name(body: Body) -> str:
        name = done.get(body)
        if name is None:
            name = done[body] = f"{body.name}"
            text = generate(from_graph(body.graph, cat), name, f"{name}_")
            defs.append(text)
        return name

    def loop(op: str, attrs: Attrs, cat: Catalog) -> str:
        fn, args = loop_arguments(op, attrs, body_name)
        kernels[fn.__name__] = fn
        return f"functools.partial({fn.__name__}, {', '.join(_literal_args(a) for a in args)})"

    def generate(prog: SSAProgram, name: str, prefix: str) -> str:
        source, named = _generate(prog, name, prefix, loop, standalone=True)
        for k, v in named.items():
            if isinstance(v, str):  # a loop's binding, after its bodies' functions
                consts[k] = v
            elif callable(v):
                kernels[k] = _raw_kernel(k, v, cat)
            else:
                consts[k] = _constant_source(v)
        return source

    main = generate(program, "program", "")
    imports, kernel_defs = _kernel_sources(kernels)
    avals = program.slot_avals
    inputs = tuple((str(k), avals[s].dtype, avals[s].shape)
                   for s, k in zip(program.input_slots, program.input_keys, strict=True))
    outputs = tuple((f"output {i}", avals[s].dtype, avals[s].shape) for i, s in enumerate(program.output_slots))
    head = _STANDALONE_HEAD.format(
        title=f"A tidu program: {len(program.instructions)} instructions.",
        scipy=" and SciPy" if any(m.startswith("scipy") for m, _ in imports) else "",
        signature=", ".join(f"{_in_docstring(n)}: {Aval(s, d)}" for n, d, s in inputs),
        outputs=", ".join(str(Aval(s, d)) for _, d, s in outputs),
        imports="\n".join(sorted({"import base64", "import functools", "import zlib", "import numpy as np"}
                                 | ({"from ml_dtypes import bfloat16"} if any(a.dtype == "bfloat16" for a in avals)
                                    else set())
                                 | {f"import {m}" if a is None else f"import {m} as {a}" for m, a in imports})))
    parts = [head, *kernel_defs, "\n".join(f"{k} = {v}" for k, v in consts.items() if not v.startswith("functools"))]
    parts += defs
    parts.append("\n".join(f"{k} = {v}" for k, v in consts.items() if v.startswith("functools")))
    parts.append(main.rstrip("\n"))
    text = "\n\n\n".join(p.strip("\n") for p in parts if p.strip())
    return text + "\n" + _STANDALONE_RUN.format(inputs=inputs, outputs=outputs)


def user_op(raw: Callable[..., Any], dtype: Any, shape: tuple[int, ...], *args: Any, **attrs: Any) -> np.ndarray:
    """A user primitive's ``numpy`` function, its result made the declared aval (what
    ``tidu.ops.kernels.kernel`` does, with the aval known when the source is written)."""
    out = np.asarray(raw(*args, **attrs))
    if np.dtype(dtype).kind != "c" and np.iscomplexobj(out):
        out = out.real
    if out.shape != shape:
        out = np.broadcast_to(out, shape)
    return out.astype(dtype, copy=False)


def _raw_kernel(name: str, fn: Callable[..., Any], cat: Catalog) -> Any:
    """What a kernel called by ``name`` is in standalone source: a tidu function (copied),
    or for a user primitive the function its ``numpy`` clause names."""
    op = name[3:] if name.startswith("op_") and name[3:] in cat else name
    prim = cat.get(op)
    if prim is None:  # a kernel named by its function (lgamma's is scipy.special.gammaln): its primitive
        prim = next((p for p in cat.values() if p.builtin and p.numpy_fn is fn), None)
    if (prim is not None and prim.builtin and prim.decl.numpy is not None and fn is prim.numpy_fn
            and not prim.decl.numpy[0].startswith("tidu.")):
        return _Named(prim.decl.numpy[0], fn)  # a SciPy function of a built-in (erf): imported by name
    if prim is None or prim.builtin or fn is not prim.kernel:
        return fn
    if prim.numpy_fn is not None and prim.decl.numpy is not None and prim.decl.numpy[0].startswith("tidu."):
        return prim.numpy_fn  # copied like the built-in kernels
    if prim.decl.numpy is None or prim.numpy_fn is None:
        raise StandaloneError(f"standalone source: the primitive {op} ({prim.loc}) runs its meaning through "
                              "SymPy; give it a 'numpy' clause naming a NumPy or SciPy function "
                              "(e.g. numpy scipy.special.erf) to write it without tidu")
    return _Named(prim.decl.numpy[0], prim.numpy_fn)


class _Named(NamedTuple):
    """A function known by its dotted name (``scipy.special.erf``), bound by an import."""

    dotted: str
    fn: Callable[..., Any]


def _literal_args(value: Any) -> str:
    """Source of a loop argument: names (of body functions) bare, the rest as literals."""
    if isinstance(value, list):
        return "[" + ", ".join(_literal_args(v) for v in value) + "]"
    if isinstance(value, str):
        return value  # a body function's name
    return repr(value)


def _scalar_source(v: Any, dtype: str) -> str:
    if dtype == "bool":
        return repr(bool(v))
    if dtype.startswith(("int", "uint")):
        return repr(int(v))
    if dtype.startswith("complex"):
        return f"complex({_scalar_source(v.real, 'float64')}, {_scalar_source(v.imag, 'float64')})"
    f = float(v)  # a float32 is exact as a float64: its repr reads back to the same bits
    return repr(f) if np.isfinite(f) else ("np.inf" if f > 0 else "-np.inf")


def _np_type(dtype: str) -> str:
    # np.bool is NumPy 2's only; bfloat16 is ml_dtypes' (bound by name in generated source)
    return "np.bool_" if dtype == "bool" else "bfloat16" if dtype == "bfloat16" else f"np.{dtype}"


def _constant_source(value: Any) -> str:
    """A constant as source: a NumPy scalar for rank 0 (as the generated code carries it),
    a splat as ``np.full``, a small array as numbers, else base64 bytes; read-only."""
    arr = np.asarray(value)
    dtype = arr.dtype.name
    exact = arr.dtype.kind not in "fc" or not np.isnan(arr).any()  # nan: payload kept only in bytes
    if arr.ndim == 0 and exact:
        return f"{_np_type(dtype)}({_scalar_source(arr[()], dtype)})"
    flat = np.ascontiguousarray(arr.reshape(-1))  # (a splat may be a broadcast view: stride 0)
    if exact and arr.size and bool(np.all(flat.view(np.uint8).reshape(flat.size, -1) == flat[:1].view(np.uint8))):
        return f"_fixed(np.full({arr.shape!r}, {_scalar_source(flat[0], dtype)}, dtype={_np_type(dtype)}))"
    if exact and arr.size <= STANDALONE_INLINE:
        items = ", ".join(_scalar_source(v, dtype) for v in flat)
        return f"_fixed(np.array([{items}], dtype={_np_type(dtype)}).reshape({arr.shape!r}))"
    data = base64.b64encode(zlib.compress(np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes(),
                                          9)).decode()
    text = f"_array({data!r}, {dtype!r}, {arr.shape!r})"
    return f"{text}[()]" if arr.ndim == 0 else text


def _kernel_sources(kernels: dict[str, Any]) -> tuple[set[tuple[str, str | None]], list[str]]:
    """(imports as (module, alias), definitions) of the functions ``kernels`` binds by
    name: tidu's own copied from their source with every global they use (functions,
    plain data), NumPy and SciPy ones imported."""
    imports: set[tuple[str, str | None]] = set()
    defs: list[str] = []
    seen: dict[str, Any] = {}

    def bind(name: str, obj: Any, where: str) -> None:
        if name in seen:
            if seen[name] is not obj:
                raise StandaloneError(f"standalone source: two different objects are named {name} ({where})")
            return
        seen[name] = obj
        if isinstance(obj, _Named):
            module, _, attr = obj.dotted.rpartition(".")
            if module == "builtins":
                defs.append(f"{name} = {attr}")
            else:
                imports.add(("numpy", "np") if module == "numpy" else (module, None))
                defs.append(f"{name} = {'np' if module == 'numpy' else module}.{attr}")
        elif isinstance(obj, types.ModuleType):
            imports.add((obj.__name__, None if obj.__name__ == name else name))
        elif callable(obj) and getattr(inspect.unwrap(obj), "__module__", "").startswith("tidu."):
            fn = inspect.unwrap(obj)
            source = textwrap.dedent(inspect.getsource(fn))
            tree = ast.parse(source)
            node = tree.body[0]
            names = {n.id for d in getattr(node, "decorator_list", []) for n in ast.walk(d) if isinstance(n, ast.Name)}
            names |= _global_names(fn.__code__)
            for g in sorted(names):  # what it uses first (definitions run in order)
                if g in fn.__globals__:
                    bind(g, fn.__globals__[g], f"used by {fn.__name__}")
                elif not hasattr(builtins, g):
                    raise StandaloneError(f"standalone source: {fn.__qualname__} uses {g}, which is not a global")
            defs.append(source if fn.__name__ == name else f"{source}\n{name} = {fn.__name__}")
        elif _plain(obj):
            defs.append(f"{name} = {obj!r}")
        else:
            raise StandaloneError(f"standalone source: cannot write {name} ({type(obj).__name__}, {where}) "
                                  "without tidu")

    for name, obj in kernels.items():
        if name == "user_op" and not any(isinstance(k, _Named) for k in kernels.values()):
            continue  # only user primitives call it
        bind(name, obj, "a kernel the program calls")
    return imports, defs


def _global_names(code: types.CodeType) -> set[str]:
    """The globals a function's code reads (its nested functions' too)."""
    out = {ins.argval for ins in dis.get_instructions(code) if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _global_names(c)
    return out


def _plain(v: Any) -> bool:
    if v is None or isinstance(v, bool | int | float | str):
        return True
    if isinstance(v, tuple | list | frozenset):
        return all(_plain(x) for x in v)
    if isinstance(v, dict):
        return all(_plain(k) and _plain(x) for k, x in v.items())
    return False


def _compiled(program: SSAProgram) -> _Compiled:
    cached = program._cache.get("numpy")
    if cached is None:
        source, consts = _generate(program)
        namespace: dict[str, Any] = {"np": np, "bfloat16": ml_dtypes.bfloat16, **consts}
        exec(compile(source, "<tidu numpy program>", "exec"), namespace)  # tidu-generated source
        outputs = [(np.dtype(program.slot_avals[s].dtype), program.slot_avals[s].shape)
                   for s in program.output_slots]
        cached = program._cache["numpy"] = _Compiled(source, namespace["program"], outputs)
    return cached


def _finish(program: SSAProgram, values: Sequence[Any], inputs: Sequence[Any],
            declared: Sequence[tuple[np.dtype, tuple[int, ...]]] | None = None) -> list[np.ndarray]:
    """Outputs as fresh, writable ndarrays of the declared dtypes (never an input, a
    constant, a view, or the same array twice)."""
    out: list[np.ndarray] = []
    for v, (dtype, shape) in zip(values, declared or _compiled(program).outputs, strict=True):
        if type(v) is np.ndarray:
            # identities compared in C: no set of ids built per call
            if (v.base is not None or not v.flags.writeable or id(v) in map(id, inputs)
                    or id(v) in map(id, out)):
                v = v.copy()
        else:
            v = np.asarray(v)  # a NumPy scalar: always a new 0-d array
        if v.dtype != dtype or v.shape != shape:
            raise AssertionError(f"NumPy lowering bug: an output is {v.dtype}{list(v.shape)}, "
                                 f"declared {dtype}{list(shape)}")
        out.append(v)
    return out


def _check_count(program: SSAProgram, arrays: Sequence[Any]) -> None:
    if len(arrays) != len(program.input_slots):
        raise InputError(f"program takes {len(program.input_slots)} input array(s), "
                         f"got {len(arrays)}; use Program.eval to pass inputs by name")


# Compiling generated source costs about 10 µs and 2.5 KB of transient memory per
# instruction (a 300k-instruction gradient: ~8 s and +700 MB), while interpreting costs
# about 1 µs per instruction per call: a program is interpreted for its first call (a
# build's first result comes ~10x sooner: much of symbolic work and of one-shot use never
# calls again) and compiled when it is called again; a huge one is always interpreted
# (the results are the same, bit for bit).
LARGE_PROGRAM = 0  # instructions: programs past this many are interpreted first
HUGE_PROGRAM = 200_000
CALLS_BEFORE_COMPILING = 2


# Generated programs run with floating-point warnings off, as np.errstate(all="ignore")
# gives. On NumPy 2 the error state is a context variable: setting it directly saves
# errstate's per-call object and keyword parsing, a large part of a small program's call.
try:
    from numpy._core._ufunc_config import _extobj_contextvar as _ERROR_STATE
    from numpy._core._ufunc_config import _make_extobj
except ImportError:  # NumPy 1.x: np.errstate as a decorator
    _ERROR_STATE = None
_QUIET_STATES: dict[Any, Any] = {}  # an error state -> the same with every warning off


def _quiet_state(current: Any) -> Any:
    """``current`` (the error state in effect) with every warning off; its buffer size and
    callback kept."""
    ignoring = _make_extobj(all="ignore")
    if len(_QUIET_STATES) < 64:
        _QUIET_STATES[current] = ignoring
    return ignoring


def _wrong_output(v: np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> None:
    raise AssertionError(f"NumPy lowering bug: an output is {v.dtype}{list(v.shape)}, "
                         f"declared {dtype}{list(shape)}")


# A program's call (warnings off, then its outputs made what _finish makes them) is
# straight-line code generated per number of inputs and outputs up to this many: at a
# few microseconds per call, a loop over the outputs and its zip are a large share.
_UNROLL = 16
_CALL_MAKERS: dict[tuple[int, int], Callable[..., Callable[..., list[np.ndarray]]]] = {}


def _call_maker(n_in: int, n_out: int) -> Callable[..., Callable[..., list[np.ndarray]]]:
    """``make(fn, d0, h0, d1, h1, ...)``: the call of generated function ``fn`` whose
    outputs have dtypes d0, d1... and shapes h0, h1..."""
    make = _CALL_MAKERS.get((n_in, n_out))
    if make is not None:
        return make
    ins = [f"a{i}" for i in range(n_in)]
    outs = [f"v{j}" for j in range(n_out)]
    lines = [f"def make(fn, {''.join(f'd{j}, h{j}, ' for j in range(n_out))}):",
             f"    def call({', '.join(ins)}):"]
    run = f"({''.join(o + ', ' for o in outs)}) = fn({', '.join(ins)})"
    if _ERROR_STATE is None:  # fn is wrapped in np.errstate
        lines.append(f"        {run}")
    else:
        lines += ["        current = get_state()",
                  "        ignoring = quiet_states.get(current)",
                  "        if ignoring is None:",
                  "            ignoring = quiet_state(current)",
                  "        token = set_state(ignoring)",
                  "        try:",
                  f"            {run}",
                  "        finally:",
                  "            reset_state(token)"]
    for j, v in enumerate(outs):  # never an input, a constant, a view or an earlier output
        same = "".join(f" or {v} is {o}" for o in ins + outs[:j])
        lines += [f"        if type({v}) is not ndarray:",
                  f"            {v} = asarray({v})",
                  f"        elif {v}.base is not None or not {v}.flags.writeable{same}:",
                  f"            {v} = {v}.copy()",
                  f"        if {v}.dtype != d{j} or {v}.shape != h{j}:",
                  f"            wrong({v}, d{j}, h{j})"]
    lines += [f"        return [{', '.join(outs)}]", "    return call"]
    namespace: dict[str, Any] = {"ndarray": np.ndarray, "asarray": np.asarray, "wrong": _wrong_output}
    if _ERROR_STATE is not None:
        namespace.update(get_state=_ERROR_STATE.get, set_state=_ERROR_STATE.set, reset_state=_ERROR_STATE.reset,
                         quiet_states=_QUIET_STATES, quiet_state=_quiet_state)
    exec(compile("\n".join(lines) + "\n", "<tidu numpy call>", "exec"), namespace)  # tidu-generated source
    return _CALL_MAKERS.setdefault((n_in, n_out), namespace["make"])


def run_numpy(program: SSAProgram, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run the generated source on ``arrays`` (as from ``Program.bind_inputs``)."""
    _check_count(program, arrays)
    call = exact_call(program)
    if call is None:  # a large program, interpreted for its first calls
        # its ~10^4-10^5 values die with the call (no cycles): no collector pass meanwhile,
        # which would also scan every object the build left (tidu.core.gcpause)
        with np.errstate(all="ignore"), paused_gc():
            return interpret(program, arrays)
    return call(*arrays)


def exact_call(program: SSAProgram) -> Callable[..., list[np.ndarray]] | None:
    """``run_numpy`` for ``program`` taking its input arrays as positional arguments, already
    of exactly the input shapes and dtypes (not checked: callers that know them skip
    ``bind_inputs``); None while a large program is still to be interpreted. Counts a call
    towards compiling a large program."""
    call = program._cache.get("numpy call")
    if call is not None:
        return call
    n = len(program.instructions)
    if n > LARGE_PROGRAM and "numpy" not in program._cache:
        calls = program._cache["numpy calls"] = program._cache.get("numpy calls", 0) + 1
        if n > HUGE_PROGRAM or calls < CALLS_BEFORE_COMPILING:
            return None
    compiled = _compiled(program)
    fn = compiled.fn if _ERROR_STATE is not None else np.errstate(all="ignore")(compiled.fn)
    n_in, n_out = len(program.input_slots), len(compiled.outputs)
    if n_in <= _UNROLL and n_out <= _UNROLL:
        call = _call_maker(n_in, n_out)(fn, *[x for d in compiled.outputs for x in d])
    else:
        def call(*arrays: np.ndarray) -> list[np.ndarray]:
            with np.errstate(all="ignore"):
                values = compiled.fn(*arrays)
            return _finish(program, values, arrays, compiled.outputs)

    # what the call takes: (type, dtype, shape) per input, compared as one list by callers
    call.input_types = program.exact_types  # type: ignore[attr-defined]
    program._cache["numpy call"] = call
    return call


def ready_call(program: SSAProgram) -> Callable[..., list[np.ndarray]] | None:
    """``exact_call(program)`` once it has been made (by a run: a large program is
    compiled only after a few), else None; counts no call."""
    return program._cache.get("numpy call")


def interpret(program: SSAProgram, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Reference interpretation: ``reference.impl_of``'s kernels, one instruction at a
    time. A built-in primitive's kernel is called directly, rank-0 values carried as NumPy
    scalars (what ``impl_of`` makes of them, and what the generated source does)."""
    _check_count(program, arrays)
    env: list[Any] = [None] * program.n_slots
    for s, a in zip(program.input_slots, arrays, strict=True):
        env[s] = np.asarray(a)[()] if np.ndim(a) == 0 else a
    ndarray, asarray, generic = np.ndarray, np.asarray, np.generic
    loops: dict[tuple, tuple[Any, ...]] = {}  # a control-flow op's results, run once for its siblings
    with np.errstate(all="ignore"):
        for fn, ins, out, loop in _steps(program):
            if loop is None:  # one and two operands spelt out: most instructions
                n = len(ins)
                if n == 2:
                    v = fn(env[ins[0]], env[ins[1]])
                elif n == 1:
                    v = fn(env[ins[0]])
                else:
                    v = fn(*[env[i] for i in ins])
            else:
                key, index = loop
                results = loops.get(key)
                if results is None:
                    results = loops[key] = fn(*[env[i] for i in ins])
                v = results[index]
            if type(v) is ndarray:
                env[out] = v[()] if v.ndim == 0 else v
            elif isinstance(v, generic):  # a NumPy scalar already (scalar programs: every value)
                env[out] = v
            else:
                v = asarray(v)
                env[out] = v[()] if v.ndim == 0 else v
    outputs = [env[s] for s in program.output_slots]
    dtypes = [(np.dtype(program.slot_avals[s].dtype), program.slot_avals[s].shape) for s in program.output_slots]
    return _finish(program, outputs, arrays, dtypes)


Step = tuple[Callable[..., Any], tuple[int, ...], int, tuple[tuple, int] | None]


def _half_result(fn: Callable[..., Any], dtype: str) -> Callable[..., Any]:
    """``fn`` with its result made ``dtype`` (float16 or bfloat16): SciPy computes some of
    its functions of 2-byte floats in float32 (``erf``), as ``_expr`` casts them."""
    t = np.dtype(dtype)

    def cast(*args: Any) -> Any:
        v = fn(*args)
        return v.astype(t) if getattr(v, "dtype", t) != t else v

    return cast


def _steps(program: SSAProgram) -> list[Step]:
    """Per instruction (kernel with its attributes bound, operand slots, result slot, loop), made
    once per program: a built-in primitive's kernel, a user's primitive by ``impl_of``'s
    implementation, and a control-flow op by its compiled bodies (``control_kernel``, as
    the generated source runs it: a loop multiplies the cost per instruction by its steps)
    with ``loop`` = (its siblings' key, this result's index), run once for all siblings."""
    steps = program._cache.get("interpreter steps")
    if steps is None:
        cat = program.catalog if program.catalog is not None else catalog()
        # per op: its kernel, whether it is called directly (a built-in's), and whether it
        # is a broadcast run as the generated source runs it (``_broadcast_kernel``: what
        # its rule block's ``numpy`` clause names decides, as for the printers)
        kernels: dict[str, tuple[Callable[..., Any], bool, bool]] = {}
        bound: dict[tuple, Callable[..., Any]] = {}  # per (op, attrs[, operand shape]): instructions repeat them
        avals = program.slot_avals
        steps = []
        # the kernels called as they are, by op: a built-in's without attributes, on any
        # dtype but the half ones (most instructions: no signature hashed for them)
        plain: dict[str, Callable[..., Any]] = {}
        append = steps.append
        for ins in program.instructions:
            op, attrs = ins.op, ins.attrs
            if attrs is NO_ATTRS:
                got = plain.get(op)
                if got is not None and avals[ins.outputs[0]].dtype not in HALF_DTYPES:
                    append((got, ins.inputs, ins.outputs[0], None))
                    continue
            if op in control.CONTROL_OPS:
                shared = control.without_index(attrs)
                append((control_kernel(op, shared, cat), ins.inputs, ins.outputs[0],
                        ((op, shared, ins.inputs), attrs["index"])))
                continue
            hit = kernels.get(op)
            if hit is None:
                prim = cat.get(op)
                if prim is not None and prim.builtin:
                    hit = kernels[op] = (exact_kernel(prim, cat), True, prim.numpy_fn is sem.broadcast_in_dim)
                    if not hit[2]:
                        plain[op] = hit[0]
                else:
                    hit = kernels[op] = (sem.impl_of(op, program.catalog), False, False)
            fn, direct, broadcast = hit
            sig = (op, attrs, avals[ins.inputs[0]].shape) if broadcast else (op, attrs)
            got = bound.get(sig)
            if got is None:
                if broadcast:
                    got = _broadcast_kernel(attrs, avals[ins.inputs[0]], avals[ins.outputs[0]])
                elif not direct:
                    got = functools.partial(_through_impl, fn, attrs)
                elif attrs:
                    got = functools.partial(fn, **dict(attrs.items()))
                else:
                    got = fn
                bound[sig] = got
            if direct and avals[ins.outputs[0]].dtype in HALF_DTYPES:
                got = _half_result(got, avals[ins.outputs[0]].dtype)  # as the generated source casts it
            append((got, ins.inputs, ins.outputs[0], None))
        program._cache["interpreter steps"] = steps
    return steps


def _through_impl(impl: Callable[..., Any], attrs: Attrs, *args: Any) -> Any:
    return impl(list(args), attrs)


__all__ = ["StandaloneError", "clear_bodies", "exact_call", "interpret", "numpy_source", "ready_call", "run_numpy",
           "standalone_source"]
