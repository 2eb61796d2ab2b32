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

import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
from tidu.lowering.ssa import InputError, Instruction, SSAProgram, from_graph

from tidu.core.body import Body
from tidu.core.keys import Attrs, Aval, is_complex
from tidu.ops import control
from tidu.ops import reference as sem
from tidu.ops.catalog import Catalog, catalog
from tidu.ops.kernels import kernel, numpy_inline

# names the generated source binds itself: a rule-defined op of such a name is op_<name>
_RESERVED = re.compile(r"np|program|[sc]\d+|(complex_|op_).*")


class _Names:
    """What the generated source calls by name: the kernels of structural built-in ops (by
    their function's name) and of user primitives (by the op's name, or op_<name>), and
    each elementwise op's inline expression (a template over its operands)."""

    def __init__(self, cat: Catalog) -> None:
        self.cat = cat
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
        call = f"{name}({', '.join(args + kw)})"
        return call + "[()]" if out.ndim == 0 else call
    template = names.template(op)
    if template is not None:
        return template.format(*args)
    fn = prim.numpy_fn  # a structural op: the kernel its rule block names, written inline
    if fn is None:
        raise NotImplementedError(f"the NumPy lowering has no rule for primitive {op!r}")
    printer = _PRINTERS.get(fn)
    if printer is not None:
        expr, array = printer(args, at, ins_avals, out)
    else:  # called by its name
        names.kernels[fn.__name__] = fn
        kw = [f"{k}={v!r}" for k, v in at.items()]
        expr, array = f"{fn.__name__}({', '.join(args + kw)})", True
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
    return f"{args[0]}{'.real' if drop_imag else ''}.astype(np.{at['dtype']})", False


@_prints(sem.slice_)
def _slice(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
    bounds = zip(at["start"], at["limit"], at["strides"], strict=True)
    return f"{args[0]}[{', '.join(f'{s}:{e}:{st}' for s, e, st in bounds) or '()'}]", False


def _reduction(fn: str) -> Printer:
    def printer(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
        if not at["axes"]:
            return args[0], False
        return f"{fn}({args[0]}, axis={at['axes']!r}, dtype=np.{ins_avals[0].dtype})", True

    return printer


_PRINTERS[sem.reduce_sum] = _reduction("np.sum")
_PRINTERS[sem.reduce_prod] = _reduction("np.prod")


@_prints(sem.reduce_max)
def _reduce_max(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
    if not at["axes"]:
        return args[0], False
    dtype = ins_avals[0].dtype
    lowest = "-np.inf" if dtype.startswith("float") else repr(int(np.iinfo(dtype).min))
    return f"np.max({args[0]}, axis={at['axes']!r}, initial={lowest})", True


@_prints(sem.reshape)
def _reshape(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
    return f"np.reshape({args[0]}, {at['shape']!r})", True


@_prints(sem.transpose)
def _transpose(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
    return f"np.transpose({args[0]}, {at['perm']!r})", True


@_prints(sem.reverse)
def _reverse(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
    return f"np.flip({args[0]}, {at['dims']!r})", True


@_prints(sem.concatenate)
def _concatenate(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
    return f"np.concatenate(({', '.join(args)},), axis={at['axis']!r})", True


@_prints(sem.broadcast_in_dim)
def _broadcast_in_dim(args: list[str], at: dict[str, Any], ins_avals: list[Aval], out: Aval) -> tuple[str, bool]:
    expanded = [1] * len(at["shape"])  # known here: no helper call per run
    for i, d in enumerate(at["dims"]):
        expanded[d] = ins_avals[0].shape[i]
    return f"np.broadcast_to(np.reshape({args[0]}, {tuple(expanded)!r}), {tuple(at['shape'])!r})", True


def _comment(text: object) -> str:
    return str(text).replace("\n", " ").replace("\r", " ")


def _generate(program: SSAProgram) -> tuple[str, dict[str, Any]]:
    """The source of ``def program(...)`` and the constants it refers to by name."""
    avals = program.slot_avals
    consts: dict[str, Any] = {}
    params = ", ".join(f"s{s}" for s in program.input_slots)
    lines = [f"def program({params}):"]
    for s, k in zip(program.input_slots, program.input_keys, strict=True):
        lines.append(f"    # input s{s} = {_comment(k)} : {avals[s]}")
    for s in program.input_slots:
        if avals[s].ndim == 0:
            lines.append(f"    s{s} = s{s}[()]  # rank 0: a NumPy scalar")
    last_use = _last_uses(program)
    cat = program.catalog if program.catalog is not None else catalog()
    names = _Names(cat)
    known: dict[int, np.ndarray] = {}  # slots whose value is fixed: constants and what is folded
    folded = 0
    loops: dict[tuple, str] = {}  # a control-flow op's siblings -> the tuple of all its results
    for n, ins in enumerate(program.instructions):
        (out,) = ins.outputs
        if ins.op in control.CONTROL_OPS:  # one call for all siblings, each takes its result
            shared = control.without_index(ins.attrs)
            results = loops.get((ins.op, shared, ins.inputs))
            if results is None:
                results = loops[(ins.op, shared, ins.inputs)] = f"r{out}"
                consts[f"{ins.op}{out}"] = control_kernel(ins.op, shared, cat)
                bodies = ", ".join(b.name for b in control.bodies(ins.op, shared))
                lines.append(f"    r{out} = {ins.op}{out}({', '.join(f's{i}' for i in ins.inputs)})  # {bodies}")
            lines.append(f"    s{out} = {results}[{ins.attrs['index']}]  # {avals[out]}")
        elif ins.op == "constant":
            value = ins.attrs["value"]
            consts[f"c{out}"] = value.array[()] if value.array.ndim == 0 else value.array
            known[out] = value.array
            lines.append(f"    s{out} = c{out}  # {avals[out]} = {_comment(value)}")
        elif (ins.inputs and all(i in known for i in ins.inputs) and avals[out].size <= FOLD_SIZE
              and folded + avals[out].size <= FOLD_TOTAL
              and (value := _fold(ins, [known[i] for i in ins.inputs], program)) is not None):
            # every operand is fixed: computed once here, as XLA folds constants
            folded += avals[out].size
            known[out] = value
            consts[f"c{out}"] = value[()] if value.ndim == 0 else value
            lines.append(f"    s{out} = c{out}  # {avals[out]} = {ins.op} of constants, folded")
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
    return _CONTROL_KERNELS[op](attrs, cat)


def _cond_kernel(attrs: Attrs, cat: Catalog) -> Callable[..., tuple[Any, ...]]:
    branches = [body_function(b, cat) for b in attrs["branches"]]
    last = len(branches) - 1

    def run_cond(selector: Any, *operands: Any) -> tuple[Any, ...]:
        return branches[min(max(int(selector), 0), last)](*operands)

    return run_cond


def _while_kernel(attrs: Attrs, cat: Catalog) -> Callable[..., tuple[Any, ...]]:
    cond_fn, body_fn = body_function(attrs["cond_body"], cat), body_function(attrs["body"], cat)
    ncc, nbc = attrs["n_cond_consts"], attrs["n_body_consts"]

    def run_while(*args: Any) -> tuple[Any, ...]:
        cond_consts, body_consts, carry = args[:ncc], args[ncc:ncc + nbc], args[ncc + nbc:]
        while cond_fn(*cond_consts, *carry)[0]:
            carry = body_fn(*body_consts, *carry)
        return tuple(carry)

    return run_while


def _scan_kernel(attrs: Attrs, cat: Catalog) -> Callable[..., tuple[Any, ...]]:
    fn = body_function(attrs["body"], cat)
    nc, nk, length = attrs["n_consts"], attrs["n_carry"], attrs["length"]
    y_avals = control.result_avals("scan", control.with_index(attrs, 0))[nk:]
    steps = range(length - 1, -1, -1) if attrs["reverse"] else range(length)

    def run_scan(*args: Any) -> tuple[Any, ...]:
        consts, carry, xs = args[:nc], args[nc:nc + nk], args[nc + nk:]
        ys = [np.empty(a.shape, a.dtype) for a in y_avals]
        for i in steps:
            out = fn(*consts, *carry, *[x[i] for x in xs])
            carry = out[:nk]
            for y, v in zip(ys, out[nk:], strict=True):
                y[i] = v
        return (*carry, *ys)

    return run_scan


_CONTROL_KERNELS = {"scan": _scan_kernel, "cond": _cond_kernel, "while": _while_kernel}


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


def numpy_source(program: SSAProgram) -> str:
    """Readable, deterministic Python/NumPy source of ``program`` (one function)."""
    return _compiled(program).source


def _compiled(program: SSAProgram) -> _Compiled:
    cached = program._cache.get("numpy")
    if cached is None:
        source, consts = _generate(program)
        namespace: dict[str, Any] = {"np": np, **consts}
        exec(compile(source, "<tidu numpy program>", "exec"), namespace)  # tidu-generated source
        outputs = [(np.dtype(program.slot_avals[s].dtype), program.slot_avals[s].shape)
                   for s in program.output_slots]
        cached = program._cache["numpy"] = _Compiled(source, namespace["program"], outputs)
    return cached


def _finish(program: SSAProgram, values: Sequence[Any], inputs: Sequence[Any],
            declared: Sequence[tuple[np.dtype, tuple[int, ...]]] | None = None) -> list[np.ndarray]:
    """Outputs as fresh, writable ndarrays of the declared dtypes (never an input, a
    constant, a view, or the same array twice)."""
    seen = {id(a) for a in inputs}
    out = []
    for v, (dtype, shape) in zip(values, declared or _compiled(program).outputs, strict=True):
        if type(v) is np.ndarray:
            if id(v) in seen or v.base is not None or not v.flags.writeable:
                v = v.copy()
            seen.add(id(v))
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
# about 3 µs per instruction per call: a large program is interpreted for its first
# calls and compiled only once it is called again and again; a huge one is always
# interpreted (the results are the same, bit for bit).
LARGE_PROGRAM = 20_000  # instructions
HUGE_PROGRAM = 200_000
CALLS_BEFORE_COMPILING = 3


def run_numpy(program: SSAProgram, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run the generated source on ``arrays`` (as from ``Program.bind_inputs``)."""
    _check_count(program, arrays)
    n = len(program.instructions)
    if n > LARGE_PROGRAM and "numpy" not in program._cache:
        calls = program._cache["numpy calls"] = program._cache.get("numpy calls", 0) + 1
        if n > HUGE_PROGRAM or calls < CALLS_BEFORE_COMPILING:
            with np.errstate(all="ignore"):
                return interpret(program, arrays)
    fn = _compiled(program).fn
    with np.errstate(all="ignore"):
        values = fn(*arrays)
    return _finish(program, values, arrays)


def interpret(program: SSAProgram, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Reference interpretation: ``reference.impl_of``'s kernels, one instruction at a time."""
    _check_count(program, arrays)
    env: list[Any] = [None] * program.n_slots
    for s, a in zip(program.input_slots, arrays, strict=True):
        env[s] = a
    impls: dict[str, Any] = {}
    for ins in program.instructions:
        impl = impls.get(ins.op)
        if impl is None:
            impl = impls[ins.op] = sem.impl_of(ins.op, program.catalog)
        env[ins.outputs[0]] = impl([env[i] for i in ins.inputs], ins.attrs)
    outputs = [env[s] for s in program.output_slots]
    dtypes = [(np.dtype(program.slot_avals[s].dtype), program.slot_avals[s].shape) for s in program.output_slots]
    return _finish(program, outputs, arrays, dtypes)


__all__ = ["interpret", "numpy_source", "run_numpy"]
