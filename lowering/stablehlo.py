"""StableHLO lowering: a compiled ``Program`` becomes an MLIR text module.

The module has one public ``func.func @main`` whose arguments are the program's input
slots and whose results are its output slots. Every instruction becomes one op per
line; the SSA value of slot ``k`` is ``%sk`` and helper values of that instruction are
``%sk_<what>`` (``%s7_re``, ``%s7_init``). Ops that are the identity for a dtype (``real``
and ``conj`` of a real value) emit nothing: the slot reuses its operand's value.

The text is a function of the program alone (same program, byte-identical text).
Constants round-trip exactly: finite floats in the shortest decimal that parses back
to the same bits, inf/nan (and any value that would not round-trip) as hex bit
patterns, complex values as ``(re, im)``.

Run by XLA on CPU (``tidu.lowering.xla``), results equal the NumPy reference
(``tidu.semantics``) to a few ulp, with these known differences (XLA's, not the text's):

- subnormal operands and results are flushed to zero;
- the sign of zero: ``sign(-0.0)`` is -0.0, ``maximum(-0.0, 0.0)`` is 0.0 and
  ``minimum`` -0.0 (NumPy: 0.0, and one of the operands);
- complex special values: at infinite parts ``sign`` gives nan (x/|x| taken literally;
  NumPy the direction), ``abs(inf + nan*j)`` is nan (NumPy inf), and exp, sin, cos,
  sqrt, rsqrt, div and pow differ at infinities, at extreme magnitudes and on branch
  cuts with a signed zero (``sqrt(-1 - 0j)`` is +1j, NumPy -1j).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable

import numpy as np

from tidu.compile import Instruction, Program
from tidu.keys import Attrs, Aval, is_complex, is_float, real_dtype

_ELEMENT = {
    "bool": "i1", "int32": "i32", "int64": "i64", "float32": "f32", "float64": "f64",
    "complex64": "complex<f32>", "complex128": "complex<f64>",
}

# Elementwise ops whose StableHLO op has the operand type as result type.
_UNARY = {
    "neg": "negate", "sign": "sign", "exp": "exponential", "log": "log",
    "expm1": "exponential_minus_one", "log1p": "log_plus_one", "sin": "sine",
    "cos": "cosine", "tanh": "tanh", "sqrt": "sqrt", "rsqrt": "rsqrt",
}
_BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "div": "divide", "pow": "power",
    "maximum": "maximum", "minimum": "minimum",
}
# Reductions: the combining op and the init value (None: the dtype's lowest value).
_REDUCE = {
    "reduce_sum": ("add", 0), "reduce_max": ("maximum", None), "reduce_prod": ("multiply", 1),
}


def tensor_type(aval: Aval) -> str:
    """The MLIR tensor type of an aval: ``tensor<2x3xf64>``, ``tensor<complex<f32>>``."""
    return "tensor<" + "".join(f"{d}x" for d in aval.shape) + _ELEMENT[aval.dtype] + ">"


# --- literals ---------------------------------------------------------------------


def _parses_back(text: str, v: np.floating) -> bool:
    """Whether MLIR reads ``text`` as ``v``, bit for bit: it parses a double (strtod)
    and rounds that to the element type, so f32 is checked through that double."""
    fmt = "<f" if v.dtype == np.float32 else "<d"
    try:
        return struct.pack(fmt, float(text)) == struct.pack(fmt, v)
    except OverflowError:  # rounds past the largest f32
        return False


def _float_literal(v: np.floating) -> str:
    """The shortest decimal that parses back to ``v`` (with a '.', as MLIR requires);
    hex bits for inf and nan (payload included)."""
    x = float(v)
    if math.isfinite(x):
        text = repr(x) if v.dtype == np.float64 else str(v)  # shortest for the dtype
        if not _parses_back(text, v):  # an f32 decimal that double-rounds: more digits
            text = next(t for t in (f"{x:.{d}e}" for d in range(1, 17)) if _parses_back(t, v))
        mantissa, e, exponent = text.partition("e")
        return (mantissa if "." in mantissa else mantissa + ".0") + e + exponent
    bits = v.view(np.uint32 if v.dtype == np.float32 else np.uint64)
    return f"0x{int(bits):0{2 * v.dtype.itemsize}X}"


def _element_literal(v: np.generic) -> str:
    if isinstance(v, np.bool_):
        return "true" if v else "false"
    if isinstance(v, np.integer):
        return str(int(v))
    if isinstance(v, np.complexfloating):
        return f"({_float_literal(v.real)}, {_float_literal(v.imag)})"
    return _float_literal(v)


def _nested(arr: np.ndarray) -> str:
    if arr.ndim == 0:
        return _element_literal(arr[()])
    return "[" + ", ".join(_nested(sub) for sub in arr) + "]"


def dense_literal(arr: np.ndarray) -> str:
    """``dense<...>`` for an array: one value for a splat, nested lists otherwise."""
    if arr.size == 0:
        return "dense<>"
    flat = arr.reshape(-1)
    raw = flat.view(np.uint8).reshape(flat.size, -1)
    if arr.ndim == 0 or bool(np.all(raw == raw[:1])):
        return f"dense<{_element_literal(flat[0])}>"
    return f"dense<{_nested(arr)}>"


def _scalar_literal(value: int | float, dtype: str) -> str:
    return dense_literal(np.array(value, dtype=dtype))


def _lowest(dtype: str) -> int | float:
    return -np.inf if is_float(dtype) else int(np.iinfo(dtype).min)


def _ints(values: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


# --- the emitter --------------------------------------------------------------------


class _Emitter:
    """Collects the body lines of @main; knows each slot's SSA name and aval."""

    def __init__(self, program: Program) -> None:
        self.avals = program.slot_avals
        self.names: dict[int, str] = {s: f"%s{s}" for s in program.input_slots}
        self.lines: list[str] = []

    def arg(self, ins: Instruction, i: int) -> str:
        return self.names[ins.inputs[i]]

    def arg_type(self, ins: Instruction, i: int) -> str:
        return tensor_type(self.avals[ins.inputs[i]])

    def arg_aval(self, ins: Instruction, i: int) -> Aval:
        return self.avals[ins.inputs[i]]

    def out_type(self, ins: Instruction) -> str:
        return tensor_type(self.avals[ins.outputs[0]])

    def sig(self, ins: Instruction) -> str:
        """The functional type ``(operand types) -> result type``."""
        ins_types = ", ".join(tensor_type(self.avals[s]) for s in ins.inputs)
        return f"({ins_types}) -> {self.out_type(ins)}"

    def emit(self, ins: Instruction, op_text: str, suffix: str = "") -> str:
        """Write ``%s<out>[_suffix] = op_text``; the unsuffixed name becomes the slot's."""
        out = ins.outputs[0]
        name = f"%s{out}_{suffix}" if suffix else f"%s{out}"
        self.lines.append(f"    {name} = {op_text}")
        if not suffix:
            self.names[out] = name
        return name

    def alias(self, ins: Instruction, name: str) -> None:
        """The slot is its operand's value (an identity op for this dtype): no op."""
        out = ins.outputs[0]
        self.lines.append(f"    // %s{out} = {ins.op} {name} is the identity here: uses {name}")
        self.names[out] = name


Lowering = Callable[[_Emitter, Instruction], None]
_LOWERINGS: dict[str, Lowering] = {}


def _lowers(*ops: str) -> Callable[[Lowering], Lowering]:
    def register(fn: Lowering) -> Lowering:
        for op in ops:
            _LOWERINGS[op] = fn
        return fn

    return register


@_lowers(*_UNARY)
def _unary(e: _Emitter, ins: Instruction) -> None:
    e.emit(ins, f"stablehlo.{_UNARY[ins.op]} {e.arg(ins, 0)} : {e.out_type(ins)}")


@_lowers(*_BINARY)
def _binary(e: _Emitter, ins: Instruction) -> None:
    e.emit(ins, f"stablehlo.{_BINARY[ins.op]} {e.arg(ins, 0)}, {e.arg(ins, 1)} : {e.out_type(ins)}")


@_lowers("abs")
def _abs(e: _Emitter, ins: Instruction) -> None:
    complex_in = is_complex(e.arg_aval(ins, 0).dtype)
    e.emit(ins, f"stablehlo.abs {e.arg(ins, 0)} : {e.sig(ins) if complex_in else e.out_type(ins)}")


@_lowers("real", "imag")
def _part(e: _Emitter, ins: Instruction) -> None:
    if not is_complex(e.arg_aval(ins, 0).dtype):  # real of a real value (imag needs complex)
        e.alias(ins, e.arg(ins, 0))
        return
    e.emit(ins, f"stablehlo.{ins.op} {e.arg(ins, 0)} : {e.sig(ins)}")


@_lowers("conj")
def _conj(e: _Emitter, ins: Instruction) -> None:
    x, aval = e.arg(ins, 0), e.arg_aval(ins, 0)
    if not is_complex(aval.dtype):
        e.alias(ins, x)
        return
    t_c, t_r = tensor_type(aval), tensor_type(aval.with_dtype(real_dtype(aval.dtype)))
    re = e.emit(ins, f"stablehlo.real {x} : ({t_c}) -> {t_r}", "re")
    im = e.emit(ins, f"stablehlo.imag {x} : ({t_c}) -> {t_r}", "im")
    neg = e.emit(ins, f"stablehlo.negate {im} : {t_r}", "negim")
    e.emit(ins, f"stablehlo.complex {re}, {neg} : {t_c}")


@_lowers("complex")
def _complex(e: _Emitter, ins: Instruction) -> None:
    e.emit(ins, f"stablehlo.complex {e.arg(ins, 0)}, {e.arg(ins, 1)} : {e.out_type(ins)}")


def _comparison_type(dtype: str) -> str:
    if dtype == "bool":
        return "UNSIGNED"
    return "SIGNED" if dtype.startswith("int") else "FLOAT"


@_lowers("compare")
def _compare(e: _Emitter, ins: Instruction) -> None:
    kind = _comparison_type(e.arg_aval(ins, 0).dtype)
    e.emit(ins, f"stablehlo.compare {ins.attrs['direction']}, {e.arg(ins, 0)}, {e.arg(ins, 1)}, "
                f"{kind} : {e.sig(ins)}")


@_lowers("select")
def _select(e: _Emitter, ins: Instruction) -> None:
    p, a, b = (e.arg(ins, i) for i in range(3))
    e.emit(ins, f"stablehlo.select {p}, {a}, {b} : {e.arg_type(ins, 0)}, {e.out_type(ins)}")


@_lowers("constant")
def _constant(e: _Emitter, ins: Instruction) -> None:
    e.emit(ins, f"stablehlo.constant {dense_literal(ins.attrs['value'].array)} : {e.out_type(ins)}")


@_lowers("convert")
def _convert(e: _Emitter, ins: Instruction) -> None:
    x, aval, t_out = e.arg(ins, 0), e.arg_aval(ins, 0), e.out_type(ins)
    if is_complex(aval.dtype) and not is_complex(ins.attrs["dtype"]):  # keeps the real part
        t_r = tensor_type(aval.with_dtype(real_dtype(aval.dtype)))
        x = e.emit(ins, f"stablehlo.real {x} : ({tensor_type(aval)}) -> {t_r}", "re")
        aval = aval.with_dtype(real_dtype(aval.dtype))
    e.emit(ins, f"stablehlo.convert {x} : ({tensor_type(aval)}) -> {t_out}")


@_lowers("broadcast_in_dim")
def _broadcast_in_dim(e: _Emitter, ins: Instruction) -> None:
    dims = _ints(ins.attrs["dims"])
    e.emit(ins, f"stablehlo.broadcast_in_dim {e.arg(ins, 0)}, dims = {dims} : {e.sig(ins)}")


@_lowers("reshape")
def _reshape(e: _Emitter, ins: Instruction) -> None:
    e.emit(ins, f"stablehlo.reshape {e.arg(ins, 0)} : {e.sig(ins)}")


@_lowers("transpose")
def _transpose(e: _Emitter, ins: Instruction) -> None:
    perm = _ints(ins.attrs["perm"])
    e.emit(ins, f"stablehlo.transpose {e.arg(ins, 0)}, dims = {perm} : {e.sig(ins)}")


@_lowers(*_REDUCE)
def _reduce(e: _Emitter, ins: Instruction) -> None:
    combine, init = _REDUCE[ins.op]
    dtype = e.arg_aval(ins, 0).dtype
    scalar = tensor_type(Aval((), dtype))
    literal = _scalar_literal(_lowest(dtype) if init is None else init, dtype)
    init_name = e.emit(ins, f"stablehlo.constant {literal} : {scalar}", "init")
    dims = _ints(tuple(sorted(ins.attrs["axes"])))
    sig = f"({e.arg_type(ins, 0)}, {scalar}) -> {e.out_type(ins)}"
    e.emit(ins, f"stablehlo.reduce({e.arg(ins, 0)} init: {init_name}) "
                f"applies stablehlo.{combine} across dimensions = {dims} : {sig}")


def _dot_dims(attrs: Attrs) -> str:
    batch = f"{_ints(attrs['lhs_batch'])} x {_ints(attrs['rhs_batch'])}"
    contract = f"{_ints(attrs['lhs_contract'])} x {_ints(attrs['rhs_contract'])}"
    if not attrs["lhs_batch"]:
        return f"contracting_dims = {contract}"
    return f"batching_dims = {batch}, contracting_dims = {contract}"


@_lowers("dot_general")
def _dot_general(e: _Emitter, ins: Instruction) -> None:
    e.emit(ins, f"stablehlo.dot_general {e.arg(ins, 0)}, {e.arg(ins, 1)}, "
                f"{_dot_dims(ins.attrs)} : {e.sig(ins)}")


@_lowers("slice")
def _slice(e: _Emitter, ins: Instruction) -> None:
    a = ins.attrs
    ranges = ", ".join(f"{s}:{lim}" + (f":{st}" if st != 1 else "")
                       for s, lim, st in zip(a["start"], a["limit"], a["strides"], strict=True))
    e.emit(ins, f"stablehlo.slice {e.arg(ins, 0)} [{ranges}] : {e.sig(ins)}")


@_lowers("pad")
def _pad(e: _Emitter, ins: Instruction) -> None:
    a = ins.attrs
    e.emit(ins, f"stablehlo.pad {e.arg(ins, 0)}, {e.arg(ins, 1)}, low = {_ints(a['low'])}, "
                f"high = {_ints(a['high'])}, interior = {_ints(a['interior'])} : {e.sig(ins)}")


@_lowers("concatenate")
def _concatenate(e: _Emitter, ins: Instruction) -> None:
    args = ", ".join(e.arg(ins, i) for i in range(len(ins.inputs)))
    e.emit(ins, f"stablehlo.concatenate {args}, dim = {ins.attrs['axis']} : {e.sig(ins)}")


# --- the module -----------------------------------------------------------------------


class LoweringError(NotImplementedError):
    """The program uses an op this back end cannot lower."""


def _signature(program: Program) -> tuple[str, str]:
    args = ", ".join(f"%s{s}: {tensor_type(program.slot_avals[s])}" for s in program.input_slots)
    results = [tensor_type(program.slot_avals[s]) for s in program.output_slots]
    ret = results[0] if len(results) == 1 else "(" + ", ".join(results) + ")"
    return args, ret


def to_stablehlo(program: Program) -> str:
    """A StableHLO module (MLIR text) computing ``program``; deterministic."""
    e = _Emitter(program)
    for ins in program.instructions:
        lower = _LOWERINGS.get(ins.op)
        if lower is None:
            raise LoweringError(f"no StableHLO lowering for op {ins.op!r}; "
                                f"lowered ops: {', '.join(sorted(_LOWERINGS))}")
        if len(ins.outputs) != 1:
            raise LoweringError(f"{ins.op}: expected one output, got {len(ins.outputs)}")
        lower(e, ins)
    args, ret = _signature(program)
    results = [tensor_type(program.slot_avals[s]) for s in program.output_slots]
    names = [e.names[s] for s in program.output_slots]
    ret_line = f"    return {', '.join(names)} : {', '.join(results)}" if names else "    return"
    return "\n".join([
        "module @tidu {",
        f"  func.func public @main({args}) -> {ret} {{",
        *e.lines,
        ret_line,
        "  }",
        "}",
        "",
    ])


__all__ = ["LoweringError", "dense_literal", "tensor_type", "to_stablehlo"]
