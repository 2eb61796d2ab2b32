"""StableHLO lowering: a compiled ``Program`` becomes an MLIR text module.

The module has one public ``func.func @main`` whose arguments are the program's input
slots and whose results are its output slots. Every instruction becomes one op per
line; the SSA value of slot ``k`` is ``%sk`` and helper values of that instruction are
``%sk_<what>`` (``%s7_re``, ``%s7_init``). Ops that are the identity for a dtype (``real``
and ``conj`` of a real value) emit nothing: the slot reuses its operand's value.

What an op becomes comes from its primitive's rule block: a built-in elementwise primitive
is the op its ``stablehlo`` clause names, in the short syntax (``stablehlo.add %s0, %s1 :
T``), or in MLIR's generic form where it is a CHLO op, which has no short syntax
(``"chlo.erf"(%s0) : (T) -> T``); a structural one is written by the lowering registered here for the kernel its
``numpy`` clause names (several ops, or LAPACK calls); a primitive of a user's rule file
is its clause's op in MLIR's generic form, or its meaning in catalog ops.

The text is a function of the program (and the platform it is lowered for) alone: same
program, byte-identical text. Constants round-trip exactly: finite floats in the
shortest decimal that parses back to the same bits, inf/nan (and any value that would
not round-trip) as hex bit patterns, complex values as ``(re, im)``; structured ones
(identities, masks, ranges, repeats: ``tidu.lowering.constants``) are built with
iota/compare/select/broadcast ops, large unstructured ones are hex bytes. On CUDA and
ROCm, Cholesky is the vendor's solver as JAX lowers it (``platform_kernels``).

Run by XLA on CPU (``tidu.lowering.xla``), results equal the NumPy reference
(``tidu.ops.reference``) to a few ulp, with these known differences (XLA's, not the text's):

- subnormal operands and results are flushed to zero;
- the sign of zero: ``sign(-0.0)`` is -0.0, ``maximum(-0.0, 0.0)`` is 0.0 and
  ``minimum`` -0.0 (NumPy: 0.0, and one of the operands);
- complex special values: at infinite parts ``sign`` gives nan (x/|x| taken literally;
  NumPy the direction), and exp, sin, cos, sinh, cosh, sqrt, rsqrt, div and pow differ
  at infinities, at extreme magnitudes and on branch cuts with a signed zero
  (``sqrt(-1 - 0j)`` is +1j, NumPy -1j).

Where XLA's own op is less accurate than rounding allows, the text computes it another
way: complex sin, cos, sinh and cosh from real functions of the parts, complex abs with
its infinite parts, lgamma of 2- and 4-byte floats in float64 (not on TPUs), the
algorithms of ``stablehlo_numerics`` in float32 for 2-byte floats; a switch's index is
clamped into its branches (``stablehlo.case`` runs the last one for any other).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
from tidu.lowering import constants as structured
from tidu.lowering import platform_kernels
from tidu.lowering import stablehlo_numerics as numerics
from tidu.lowering.ssa import Instruction, SSAProgram, from_graph

from tidu.core.body import Body
from tidu.core.keys import HALF_DTYPES, Attrs, Aval, Literal, is_complex, is_float, is_integer, real_dtype
from tidu.ops import control
from tidu.ops import reference as sem
from tidu.ops.catalog import Catalog, Primitive, catalog
from tidu.ops.dsl.ast import Call, Expr, Num, RuleSyntaxError, Var
from tidu.ops.kernels import function_primitives, meaning_in_primitives

_ELEMENT = {
    "bool": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "ui8", "uint16": "ui16", "uint32": "ui32", "uint64": "ui64", "float16": "f16", "bfloat16": "bf16",
    "float32": "f32", "float64": "f64",
    "complex64": "complex<f32>", "complex128": "complex<f64>",
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
    if v.dtype.itemsize == 2:  # float16, bfloat16: their bits (MLIR rounds decimals through a double)
        return f"0x{int(v.view(np.uint16)):04X}"
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
    flat = arr.reshape(-1).copy()  # contiguous (a reshaped view may not be)
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

    def __init__(self, program: SSAProgram, prefix: str = "%s", counter: list[int] | None = None) -> None:
        self.avals = list(program.slot_avals)  # extended by rule-defined ops' intermediates
        self.prefix = prefix  # of its SSA names: a body's own (regions see the names around them)
        self.names: dict[int, str] = {s: f"{prefix}{s}" for s in program.input_slots}
        self.lines: list[str] = []
        self.counter = counter if counter is not None else [0]  # bodies lowered, for their prefixes
        self.platform = "cpu"  # where the module will run: "cpu", "cuda", "rocm", "tpu"
        self.jax_kernels = False  # linear algebra as JAX lowers it for the platform (GPUs)
        self.functions: dict[str, str] = {}  # private functions the module calls (platform kernels)

    def call_kernel(self, ins: Instruction, name: str, args: list[tuple[str, Aval]], results: list[Aval],
                    suffix: str = "kernel") -> str:
        """A call of the platform's kernel ``name`` (tidu.lowering.platform_kernels): the
        value's name, whose results are ``name#i`` when there are several."""
        try:
            symbol, text = platform_kernels.kernel(name, self.platform, tuple(a for _, a in args))
        except platform_kernels.PlatformKernelError as e:
            raise LoweringError(f"{ins.op}: {e}") from None
        self.functions.setdefault(symbol, text)
        types = ", ".join(tensor_type(a) for _, a in args)
        outs = ", ".join(tensor_type(r) for r in results)
        call = f"func.call @{symbol}({', '.join(n for n, _ in args)}) : ({types}) -> " + (
            outs if len(results) == 1 else f"({outs})")
        if len(results) == 1:
            return self.emit(ins, call, suffix)
        name_ = f"{self.prefix}{ins.outputs[0]}_{suffix}"
        self.lines.append(f"    {name_}:{len(results)} = {call}")
        return name_

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
        name = f"{self.prefix}{out}_{suffix}" if suffix else f"{self.prefix}{out}"
        self.lines.append(f"    {name} = {op_text}")
        if not suffix:
            self.names[out] = name
        return name

    def alias(self, ins: Instruction, name: str) -> None:
        """The slot is its operand's value (an identity op for this dtype): no op."""
        out = ins.outputs[0]
        self.lines.append(f"    // {self.prefix}{out} = {ins.op} {name} is the identity here: uses {name}")
        self.names[out] = name


Lowering = Callable[[_Emitter, Instruction], None]
# the lowerings of the structural ops, keyed by their kernel in tidu.ops.reference: what the
# primitive's rule block names (``numpy tidu.ops.reference.reshape``), so no primitive name
# appears here
_LOWERINGS: dict[Callable[..., Any], Lowering] = {}


def _lowers(*kernels: Callable[..., Any]) -> Callable[[Lowering], Lowering]:
    def register(fn: Lowering) -> Lowering:
        for kernel in kernels:
            _LOWERINGS[kernel] = fn
        return fn

    return register


def _elementwise(e: _Emitter, ins: Instruction, name: str) -> None:
    """A built-in primitive's ``stablehlo`` op, in the elementwise ops' short syntax: one
    type where operands and result share it (``stablehlo.add %a, %b : T``), else the
    functional type (``stablehlo.abs %z : (complex T) -> T``)."""
    args = ", ".join(e.arg(ins, i) for i in range(len(ins.inputs)))
    out = e.avals[ins.outputs[0]]
    if name in ("stablehlo.abs", "stablehlo.sign") and out.dtype.startswith("uint"):  # signed ints only
        if name == "stablehlo.abs":  # |x| of an unsigned x is x
            e.alias(ins, args)
            return
        one = e.emit(ins, f"stablehlo.constant dense<1> : {e.out_type(ins)}", "one")  # sign: 0 or 1
        e.emit(ins, f"stablehlo.minimum {args}, {one} : {e.out_type(ins)}")
        return
    if name == "stablehlo.remainder" and is_integer(out.dtype):  # 0 where y is 0 or (signed) -1, as NumPy's
        x, y, t = e.arg(ins, 0), e.arg(ins, 1), e.out_type(ins)
        b = tensor_type(out.with_dtype("bool"))
        zero = e.emit(ins, f"stablehlo.constant dense<0> : {t}", "zero")
        undefined = e.emit(ins, f"stablehlo.compare EQ, {y}, {zero} : ({t}, {t}) -> {b}", "by0")
        if not out.dtype.startswith("uint"):
            minus = e.emit(ins, f"stablehlo.constant dense<-1> : {t}", "minus1")
            by_minus = e.emit(ins, f"stablehlo.compare EQ, {y}, {minus} : ({t}, {t}) -> {b}", "bym1")
            undefined = e.emit(ins, f"stablehlo.or {undefined}, {by_minus} : {b}", "undefined")
        one = e.emit(ins, f"stablehlo.constant dense<1> : {t}", "one")
        safe = e.emit(ins, f"stablehlo.select {undefined}, {one}, {y} : {b}, {t}", "safe")
        r = e.emit(ins, f"stablehlo.remainder {x}, {safe} : {t}", "rem")
        e.emit(ins, f"stablehlo.select {undefined}, {zero}, {r} : {b}, {t}")
        return
    same = all(e.avals[s] == out for s in ins.inputs)
    e.emit(ins, f"{name} {args} : {e.out_type(ins) if same else e.sig(ins)}")


def _complex_parts(e: _Emitter, ins: Instruction) -> tuple[str, str, str, str]:
    """``(re, im, real type, bool type)`` of the complex operand of ``ins``."""
    aval = e.arg_aval(ins, 0)
    t_c, t_r = tensor_type(aval), tensor_type(aval.with_dtype(real_dtype(aval.dtype)))
    z = e.arg(ins, 0)
    re = e.emit(ins, f"stablehlo.real {z} : ({t_c}) -> {t_r}", "re")
    im = e.emit(ins, f"stablehlo.imag {z} : ({t_c}) -> {t_r}", "im")
    return re, im, t_r, tensor_type(aval.with_dtype("bool"))


def _complex_abs(e: _Emitter, ins: Instruction) -> None:
    """|z| with an infinite part is +inf even when the other part is nan (C99's cabs,
    NumPy's and JAX's); XLA's complex abs gives nan there."""
    re, im, t_r, t_b = _complex_parts(e, ins)
    real = np.dtype(real_dtype(e.arg_aval(ins, 0).dtype)).type
    inf = e.emit(ins, f"stablehlo.constant dense<{_float_literal(real(np.inf))}> : {t_r}", "inf")
    mag = e.emit(ins, f"stablehlo.abs {e.arg(ins, 0)} : {e.sig(ins)}", "mag")
    are = e.emit(ins, f"stablehlo.abs {re} : {t_r}", "absre")
    aim = e.emit(ins, f"stablehlo.abs {im} : {t_r}", "absim")
    inf_re = e.emit(ins, f"stablehlo.compare EQ, {are}, {inf}, FLOAT : ({t_r}, {t_r}) -> {t_b}", "infre")
    inf_im = e.emit(ins, f"stablehlo.compare EQ, {aim}, {inf}, FLOAT : ({t_r}, {t_r}) -> {t_b}", "infim")
    either = e.emit(ins, f"stablehlo.or {inf_re}, {inf_im} : {t_b}", "infinite")
    e.emit(ins, f"stablehlo.select {either}, {inf}, {mag} : {t_b}, {t_r}")


def _complex_trig(e: _Emitter, ins: Instruction, fn: str) -> None:
    """Complex sin, cos, sinh and cosh from real functions of the parts, sinh and cosh
    of a part from expm1 (as JAX lowers sin and cos): XLA's own complex ops lose a tiny
    part (sin(1 + 1e-30j) had imaginary part 0, sinh(1e-30 + 1j) real part 0) and give
    nan for a large one. With a the trigonometric and b the hyperbolic argument,

        sin(x + iy)  = sin a cosh b + i cos a sinh b    (a = x, b = y)
        cos(x + iy)  = cos a cosh b - i sin a sinh b    (a = x, b = y)
        sinh(x + iy) = cos a sinh b + i sin a cosh b    (a = y, b = x)
        cosh(x + iy) = cos a cosh b + i sin a sinh b    (a = y, b = x)

    Where a is zero the part with sin a is a zero of the sign the product has for finite
    b (a, or a times the sign of sinh b), not 0 * inf."""
    re, im, t_r, t_b = _complex_parts(e, ins)
    real = np.dtype(real_dtype(e.arg_aval(ins, 0).dtype)).type

    def const(v: float, tag: str) -> str:
        return e.emit(ins, f"stablehlo.constant dense<{_float_literal(real(v))}> : {t_r}", tag)

    def op(text: str, tag: str) -> str:
        return e.emit(ins, f"{text} : {t_r}", tag)

    a, b = (re, im) if fn in ("sin", "cos") else (im, re)
    zero, two = const(0.0, "zero"), const(2.0, "two")
    sin_a, cos_a = op(f"stablehlo.sine {a}", "sin"), op(f"stablehlo.cosine {a}", "cos")
    up = op(f"stablehlo.exponential_minus_one {b}", "em1")
    down = op(f"stablehlo.exponential_minus_one {op(f'stablehlo.negate {b}', 'negb')}", "em1neg")
    sinh_b = op(f"stablehlo.divide {op(f'stablehlo.subtract {up}, {down}', 'diff')}, {two}", "sinh")
    total = op(f"stablehlo.add {op(f'stablehlo.add {up}, {down}', 'total')}, {two}", "total2")
    cosh_b = op(f"stablehlo.divide {total}, {two}", "cosh")
    a_zero = e.emit(ins, f"stablehlo.compare EQ, {a}, {zero}, FLOAT : ({t_r}, {t_r}) -> {t_b}", "azero")
    # (the factor of cos a, the factor of sin a, whether the sin a part is the real one)
    cos_factor, sin_factor, sin_is_real = {"sin": (sinh_b, cosh_b, True), "cos": (cosh_b, sinh_b, False),
                                           "sinh": (sinh_b, cosh_b, False), "cosh": (cosh_b, sinh_b, False)}[fn]
    cos_part = op(f"stablehlo.multiply {cos_a}, {cos_factor}", "cospart")
    sin_part = op(f"stablehlo.multiply {sin_a}, {sin_factor}", "sinpart")
    if sin_factor == cosh_b:  # cosh b > 0: at a = +-0 the part is the zero a itself
        at_zero = a
    else:  # sinh b: at a = +-0 the zero a times the sign of sinh b (signed zeros kept, inf as 1)
        at_zero = op(f"stablehlo.multiply {a}, {op(f'stablehlo.sign {sinh_b}', 'signb')}", "asignb")
    if fn == "cos":
        sin_part = op(f"stablehlo.negate {sin_part}", "negsinpart")
        at_zero = op(f"stablehlo.negate {at_zero}", "negatzero")
    sin_part = e.emit(ins, f"stablehlo.select {a_zero}, {at_zero}, {sin_part} : {t_b}, {t_r}", "sinpart0")
    first, second = (sin_part, cos_part) if sin_is_real else (cos_part, sin_part)
    e.emit(ins, f"stablehlo.complex {first}, {second} : {e.out_type(ins)}")


def _complex_sqrt(e: _Emitter, ins: Instruction, reciprocal: bool) -> None:
    """XLA's complex sqrt (rsqrt) with the imaginary part's sign C99's csqrt gives, that of
    z's imaginary part (the opposite for rsqrt), a zero's sign too: XLA puts sqrt(-4 - 0j)
    on the wrong side of the cut (2j; NumPy, JAX's C99 reference and tidu's other back ends
    give -2j)."""
    re, im, t_r, t_b = _complex_parts(e, ins)
    width = np.dtype(real_dtype(e.arg_aval(ins, 0).dtype)).itemsize * 8
    shape = e.arg_aval(ins, 0).shape
    t_i = tensor_type(Aval(shape, f"int{width}"))
    root = e.emit(ins, f"stablehlo.{'rsqrt' if reciprocal else 'sqrt'} {e.arg(ins, 0)} : {e.out_type(ins)}", "root")
    t_c = e.out_type(ins)
    root_re = e.emit(ins, f"stablehlo.real {root} : ({t_c}) -> {t_r}", "rootre")
    root_im = e.emit(ins, f"stablehlo.imag {root} : ({t_c}) -> {t_r}", "rootim")
    size = e.emit(ins, f"stablehlo.abs {root_im} : {t_r}", "absim")
    bits = e.emit(ins, f"stablehlo.bitcast_convert {im} : ({t_r}) -> {t_i}", "bits")
    zero = e.emit(ins, f"stablehlo.constant dense<0> : {t_i}", "zeroi")
    direction = "GE" if reciprocal else "LT"  # the sign bit of z's imaginary part (clear, for rsqrt)
    negative = e.emit(ins, f"stablehlo.compare {direction}, {bits}, {zero}, SIGNED : ({t_i}, {t_i}) -> {t_b}", "neg")
    flipped = e.emit(ins, f"stablehlo.negate {size} : {t_r}", "negim")
    imag = e.emit(ins, f"stablehlo.select {negative}, {flipped}, {size} : {t_b}, {t_r}", "signedim")
    e.emit(ins, f"stablehlo.complex {root_re}, {imag} : {t_c}")


_COMPLEX_EXPANDED: dict[str, Callable[[_Emitter, Instruction], None]] = {
    "stablehlo.abs": _complex_abs,
    "stablehlo.sqrt": lambda e, ins: _complex_sqrt(e, ins, False),
    "stablehlo.rsqrt": lambda e, ins: _complex_sqrt(e, ins, True),
    "stablehlo.sine": lambda e, ins: _complex_trig(e, ins, "sin"),
    "stablehlo.cosine": lambda e, ins: _complex_trig(e, ins, "cos"),
    "chlo.sinh": lambda e, ins: _complex_trig(e, ins, "sinh"),
    "chlo.cosh": lambda e, ins: _complex_trig(e, ins, "cosh"),
}


@_lowers(sem.real)
def _real(e: _Emitter, ins: Instruction) -> None:
    if not is_complex(e.arg_aval(ins, 0).dtype):  # the real part of a real value
        e.alias(ins, e.arg(ins, 0))
        return
    e.emit(ins, f"stablehlo.real {e.arg(ins, 0)} : {e.sig(ins)}")


@_lowers(sem.conj)
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


def _numerics(algorithm: Callable[..., str]) -> Lowering:
    """An elementwise special function written as an algorithm of elementwise ops
    (tidu.lowering.stablehlo_numerics), in its operand's dtype; float16 and bfloat16 in
    float32, rounded once (their range is too small for the algorithms' intermediates:
    exp(12) overflows float16, so i0, erfcx and the Fresnel integrals were nan there)."""
    def lower(e: _Emitter, ins: Instruction) -> None:
        out = e.avals[ins.outputs[0]]
        aval = out.with_dtype("float32") if out.dtype in HALF_DTYPES else out
        dtype = np.dtype(aval.dtype).type
        args = [e.arg(ins, i) for i in range(len(ins.inputs))]
        widened = aval != out

        def emit(text: str, suffix: str) -> str:  # the algorithm's final value is the float32 one when widened
            return e.emit(ins, text, suffix or "f32") if widened else e.emit(ins, text, suffix)

        if widened:
            args = [e.emit(ins, f"stablehlo.convert {a} : ({e.arg_type(ins, i)}) -> {tensor_type(aval)}", f"wide{i}")
                    for i, a in enumerate(args)]
        b = numerics.Elementwise(emit, tensor_type(aval), tensor_type(aval.with_dtype("bool")),
                                 lambda v: _float_literal(dtype(v)), aval.dtype, rank=aval.ndim,
                                 tag=f"{e.prefix}{ins.outputs[0]}_")
        b.wide_lgamma = e.platform != "tpu"
        value = algorithm(b, *args, **dict(ins.attrs))
        if widened:
            e.emit(ins, f"stablehlo.convert {value} : ({tensor_type(aval)}) -> {e.out_type(ins)}")

    return lower


_LOWERINGS[sem.bessel_i0] = _numerics(numerics.i0)
_LOWERINGS[sem.bessel_i0e] = _numerics(numerics.i0e)
_LOWERINGS[sem.ndtri] = _numerics(numerics.ndtri)
_LOWERINGS[sem.erfcx] = _numerics(numerics.erfcx)
_LOWERINGS[sem.exp1] = _numerics(numerics.exp1)
_LOWERINGS[sem.expi] = _numerics(numerics.expi)
_LOWERINGS[sem.sine_integral] = _numerics(numerics.sine_integral)
_LOWERINGS[sem.cosine_integral] = _numerics(numerics.cosine_integral)
_LOWERINGS[sem.gammainc] = _numerics(numerics.gammainc)
_LOWERINGS[sem.gammaincc] = _numerics(numerics.gammaincc)
_LOWERINGS[sem.gammainc_da] = _numerics(numerics.gammainc_da)
_LOWERINGS[sem.gamma_density_d] = _numerics(numerics.gamma_density_d)
_LOWERINGS[sem.zeta_d] = _numerics(numerics.zeta_d)
_LOWERINGS[sem.betainc] = _numerics(numerics.betainc)
_LOWERINGS[sem.betainc_d] = _numerics(numerics.betainc_d)
_LOWERINGS[sem.beta_density_d] = _numerics(numerics.beta_density_d)
_LOWERINGS[sem.expn] = _numerics(numerics.expn)
_LOWERINGS[sem.spence] = _numerics(numerics.spence)
_LOWERINGS[sem.fresnel_s] = _numerics(numerics.fresnel_s)
_LOWERINGS[sem.fresnel_c] = _numerics(numerics.fresnel_c)
_LOWERINGS[sem.hyp1f1] = _numerics(numerics.hyp1f1)
_LOWERINGS[sem.hyp1f1_d] = _numerics(numerics.hyp1f1_d)
_LOWERINGS[sem.hyp2f1] = _numerics(numerics.hyp2f1)
_LOWERINGS[sem.hyp2f1_d] = _numerics(numerics.hyp2f1_d)


@_lowers(sem.complex_)
def _complex(e: _Emitter, ins: Instruction) -> None:
    e.emit(ins, f"stablehlo.complex {e.arg(ins, 0)}, {e.arg(ins, 1)} : {e.out_type(ins)}")


def _comparison_type(dtype: str) -> str:
    if dtype == "bool" or dtype.startswith("uint"):
        return "UNSIGNED"
    return "SIGNED" if dtype.startswith("int") else "FLOAT"


@_lowers(sem.compare)
def _compare(e: _Emitter, ins: Instruction) -> None:
    kind = _comparison_type(e.arg_aval(ins, 0).dtype)
    e.emit(ins, f"stablehlo.compare {ins.attrs['direction']}, {e.arg(ins, 0)}, {e.arg(ins, 1)}, "
                f"{kind} : {e.sig(ins)}")


@_lowers(sem.select)
def _select(e: _Emitter, ins: Instruction) -> None:
    p, a, b = (e.arg(ins, i) for i in range(3))
    e.emit(ins, f"stablehlo.select {p}, {a}, {b} : {e.arg_type(ins, 0)}, {e.out_type(ins)}")


@_lowers(sem.constant)
def _constant(e: _Emitter, ins: Instruction) -> None:
    """A constant built from its structure (``tidu.lowering.constants``): identities,
    one-hot vectors, ranges and repeated values cost text in their dimensions, not their
    size; anything else is one literal (hex bytes when large)."""
    lit = ins.attrs["value"]
    size = lit.identity_size
    if size is not None:  # a basis: the identity reshaped, never made as an array
        plan: structured.Plan = structured.Reshape(structured.identity(size), (size, size))
    else:
        plan = structured.structure(lit.array)
    _ConstantBuilder(_Lines(e, ins)).build(plan, e.avals[ins.outputs[0]], last=True)


@_lowers(sem.convert)
def _convert(e: _Emitter, ins: Instruction) -> None:
    x, aval, t_out = e.arg(ins, 0), e.arg_aval(ins, 0), e.out_type(ins)
    if is_complex(aval.dtype) and not is_complex(ins.attrs["dtype"]):  # keeps the real part
        t_r = tensor_type(aval.with_dtype(real_dtype(aval.dtype)))
        x = e.emit(ins, f"stablehlo.real {x} : ({tensor_type(aval)}) -> {t_r}", "re")
        aval = aval.with_dtype(real_dtype(aval.dtype))
    e.emit(ins, f"stablehlo.convert {x} : ({tensor_type(aval)}) -> {t_out}")


@_lowers(sem.broadcast_in_dim)
def _broadcast_in_dim(e: _Emitter, ins: Instruction) -> None:
    dims = _ints(ins.attrs["dims"])
    e.emit(ins, f"stablehlo.broadcast_in_dim {e.arg(ins, 0)}, dims = {dims} : {e.sig(ins)}")


@_lowers(sem.reshape)
def _reshape(e: _Emitter, ins: Instruction) -> None:
    e.emit(ins, f"stablehlo.reshape {e.arg(ins, 0)} : {e.sig(ins)}")


@_lowers(sem.transpose)
def _transpose(e: _Emitter, ins: Instruction) -> None:
    perm = _ints(ins.attrs["perm"])
    e.emit(ins, f"stablehlo.transpose {e.arg(ins, 0)}, dims = {perm} : {e.sig(ins)}")


@_lowers(sem.reverse)
def _reverse(e: _Emitter, ins: Instruction) -> None:
    dims = _ints(ins.attrs["dims"])
    e.emit(ins, f"stablehlo.reverse {e.arg(ins, 0)}, dims = {dims} : {e.out_type(ins)}")


def _reduction(combine: str, init: int | None) -> Lowering:
    """A reduction by ``combine`` from ``init`` (None: the dtype's lowest value)."""

    def lower(e: _Emitter, ins: Instruction) -> None:
        aval, out = e.arg_aval(ins, 0), e.avals[ins.outputs[0]]
        x, dtype = e.arg(ins, 0), aval.dtype
        wide = init is not None and dtype in HALF_DTYPES
        if wide:  # sums and products of 2-byte floats accumulate in float32, as JAX's do
            dtype = "float32"
            x = e.emit(ins, f"stablehlo.convert {x} : ({tensor_type(aval)}) -> "
                            f"{tensor_type(aval.with_dtype(dtype))}", "wide")
        scalar = tensor_type(Aval((), dtype))
        literal = _scalar_literal(_lowest(dtype) if init is None else init, dtype)
        init_name = e.emit(ins, f"stablehlo.constant {literal} : {scalar}", "init")
        dims = _ints(tuple(sorted(ins.attrs["axes"])))
        result = tensor_type(out.with_dtype(dtype))
        sig = f"({tensor_type(aval.with_dtype(dtype))}, {scalar}) -> {result}"
        text = f"stablehlo.reduce({x} init: {init_name}) applies stablehlo.{combine} across dimensions = {dims} : {sig}"
        if not wide:
            e.emit(ins, text)
            return
        r = e.emit(ins, text, "reduced")
        e.emit(ins, f"stablehlo.convert {r} : ({result}) -> {e.out_type(ins)}")

    return lower


_lowers(sem.reduce_sum)(_reduction("add", 0))
_lowers(sem.reduce_max)(_reduction("maximum", None))
_lowers(sem.reduce_prod)(_reduction("multiply", 1))


def _dot_dims(attrs: Attrs) -> str:
    batch = f"{_ints(attrs['lhs_batch'])} x {_ints(attrs['rhs_batch'])}"
    contract = f"{_ints(attrs['lhs_contract'])} x {_ints(attrs['rhs_contract'])}"
    if not attrs["lhs_batch"]:
        return f"contracting_dims = {contract}"
    return f"batching_dims = {batch}, contracting_dims = {contract}"


@_lowers(sem.dot_general)
def _dot_general(e: _Emitter, ins: Instruction) -> None:
    e.emit(ins, f"stablehlo.dot_general {e.arg(ins, 0)}, {e.arg(ins, 1)}, "
                f"{_dot_dims(ins.attrs)} : {e.sig(ins)}")


@_lowers(sem.slice_)
def _slice(e: _Emitter, ins: Instruction) -> None:
    a = ins.attrs
    ranges = ", ".join(f"{s}:{lim}" + (f":{st}" if st != 1 else "")
                       for s, lim, st in zip(a["start"], a["limit"], a["strides"], strict=True))
    e.emit(ins, f"stablehlo.slice {e.arg(ins, 0)} [{ranges}] : {e.sig(ins)}")


def _dynamic_starts(e: _Emitter, ins: Instruction, start: int, axis: int, rank: int) -> tuple[str, str]:
    """The start operands of a one-axis dynamic slice (0 on the other axes) and their types."""
    it = e.arg_type(ins, start)
    zero = e.emit(ins, f"stablehlo.constant dense<0> : {it}", "zero") if rank > 1 else ""
    return ", ".join(e.arg(ins, start) if a == axis else zero for a in range(rank)), ", ".join([it] * rank)


@_lowers(sem.dynamic_slice)
def _dynamic_slice(e: _Emitter, ins: Instruction) -> None:
    x = e.arg_aval(ins, 0)
    starts, types = _dynamic_starts(e, ins, 1, ins.attrs["axis"], x.ndim)
    sizes = ", ".join(str(d) for d in e.avals[ins.outputs[0]].shape)
    e.emit(ins, f'"stablehlo.dynamic_slice"({e.arg(ins, 0)}, {starts}) {{slice_sizes = array<i64: {sizes}>}} : '
                f"({e.arg_type(ins, 0)}, {types}) -> {e.out_type(ins)}")


@_lowers(sem.dynamic_update_slice)
def _dynamic_update_slice(e: _Emitter, ins: Instruction) -> None:
    x = e.arg_aval(ins, 0)
    starts, types = _dynamic_starts(e, ins, 2, ins.attrs["axis"], x.ndim)
    e.emit(ins, f'"stablehlo.dynamic_update_slice"({e.arg(ins, 0)}, {e.arg(ins, 1)}, {starts}) : '
                f"({e.arg_type(ins, 0)}, {e.arg_type(ins, 1)}, {types}) -> {e.out_type(ins)}")


@_lowers(sem.pad)
def _pad(e: _Emitter, ins: Instruction) -> None:
    a = ins.attrs
    e.emit(ins, f"stablehlo.pad {e.arg(ins, 0)}, {e.arg(ins, 1)}, low = {_ints(a['low'])}, "
                f"high = {_ints(a['high'])}, interior = {_ints(a['interior'])} : {e.sig(ins)}")


@_lowers(sem.concatenate)
def _concatenate(e: _Emitter, ins: Instruction) -> None:
    args = ", ".join(e.arg(ins, i) for i in range(len(ins.inputs)))
    e.emit(ins, f"stablehlo.concatenate {args}, dim = {ins.attrs['axis']} : {e.sig(ins)}")


# --- linear algebra (rules/linalg.rules) ----------------------------------------------
# Triangles and the Hermitian part are plain StableHLO; cholesky and triangular_solve are
# StableHLO ops XLA CPU expands; the factorizations are the LAPACK custom calls that
# jaxlib registers for XLA CPU (the same targets and operand layouts jax emits):
# ?getrf (LU: log|det| and the sign), ?geqrf + ?orgqr/?ungqr (QR: solve), ?syevd/?heevd.

_LAPACK_PREFIX = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}


class _Lines:
    """Fresh SSA names for the several lines one linear algebra op becomes."""

    def __init__(self, e: _Emitter, ins: Instruction) -> None:
        self.e, self.ins, self.n = e, ins, 0

    def __call__(self, text: str, results: int = 1) -> str:
        self.n += 1
        if results == 1:
            return self.e.emit(self.ins, text, f"l{self.n}")
        name = f"{self.e.prefix}{self.ins.outputs[0]}_l{self.n}"
        self.e.lines.append(f"    {name}:{results} = {text}")
        return name

    def last(self, text: str) -> str:
        return self.e.emit(self.ins, text)


class _ConstantBuilder:
    """Writes a constant's plan (``tidu.lowering.constants``) as StableHLO ops; the
    outermost op is the slot's value."""

    def __init__(self, lines: _Lines) -> None:
        self.lines = lines

    def op(self, text: str, last: bool) -> str:
        return self.lines.last(text) if last else self.lines(text)

    def build(self, plan: structured.Plan, aval: Aval, last: bool = False) -> str:
        t = tensor_type(aval)
        if isinstance(plan, structured.Splat):
            value = dense_literal(np.array(plan.value, dtype=aval.dtype))
            if aval.size <= structured.SMALL:
                return self.op(f"stablehlo.constant {value} : {t}", last)
            # a large splat constant is materialized by XLA at compile time: broadcast one value
            scalar = tensor_type(Aval((), aval.dtype))
            one = self.lines(f"stablehlo.constant {value} : {scalar}")
            return self.op(f"stablehlo.broadcast_in_dim {one}, dims = [] : ({scalar}) -> {t}", last)
        if isinstance(plan, structured.Dense):
            return self.dense(plan.array.reshape(aval.shape), aval, last)
        if isinstance(plan, structured.Broadcast):
            inner_aval = aval.with_shape(plan.inner_shape)
            inner = self.build(plan.inner, inner_aval)
            return self.op(f"stablehlo.broadcast_in_dim {inner}, dims = {_ints(plan.dims)} : "
                           f"({tensor_type(inner_aval)}) -> {t}", last)
        if isinstance(plan, structured.Reshape):
            inner_aval = aval.with_shape(plan.inner_shape)
            inner = self.build(plan.inner, inner_aval)
            return self.op(f"stablehlo.reshape {inner} : ({tensor_type(inner_aval)}) -> {t}", last)
        if isinstance(plan, structured.Iota):
            if plan.step == 1 and plan.start == 0:
                return self.op(f"stablehlo.iota dim = {plan.axis} : {t}", last)
            x = self.lines(f"stablehlo.iota dim = {plan.axis} : {t}")
            if plan.step != 1:
                step = self.build(structured.Splat(np.array(plan.step, aval.dtype)), aval)
                x = self.op(f"stablehlo.multiply {x}, {step} : {t}", last and plan.start == 0)
            if plan.start != 0:
                start = self.build(structured.Splat(np.array(plan.start, aval.dtype)), aval)
                x = self.op(f"stablehlo.add {x}, {start} : {t}", last)
            return x
        assert isinstance(plan, structured.Select)
        mask = self.mask(plan.mask, aval.shape)
        on_true = self.build(plan.on_true, aval)
        on_false = self.build(plan.on_false, aval)
        return self.op(f"stablehlo.select {mask}, {on_true}, {on_false} : "
                       f"{tensor_type(Aval(aval.shape, 'bool'))}, {t}", last)

    def dense(self, arr: np.ndarray, aval: Aval, last: bool) -> str:
        """One literal: numbers when small; the raw little-endian bytes in hex otherwise
        (bools as bytes, then converted: i1's hex form is not bytes)."""
        t = tensor_type(aval)
        if arr.size <= structured.SMALL:
            return self.op(f"stablehlo.constant {dense_literal(arr)} : {t}", last)
        if aval.dtype == "bool":
            t8 = t.replace("xi1>", "xi8>")
            raw = self.lines(f'stablehlo.constant dense<"0x{arr.astype(np.uint8).tobytes().hex().upper()}"> : {t8}')
            return self.op(f"stablehlo.convert {raw} : ({t8}) -> {t}", last)
        data = np.ascontiguousarray(arr, dtype=np.dtype(aval.dtype).newbyteorder("<"))
        return self.op(f'stablehlo.constant dense<"0x{data.tobytes().hex().upper()}"> : {t}', last)

    def mask(self, mask: structured.Mask, shape: tuple[int, ...]) -> str:
        """The bool tensor of ``mask``: one compare per condition, and-ed."""
        it = tensor_type(Aval(shape, "int32"))
        bt = tensor_type(Aval(shape, "bool"))
        parts = []

        def compare(direction: str, x: str, bound: int) -> str:
            b = self.build(structured.Splat(np.int32(bound)), Aval(shape, "int32"))
            return self.lines(f"stablehlo.compare {direction}, {x}, {b}, SIGNED : ({it}, {it}) -> {bt}")

        for c in mask.conditions:
            if isinstance(c, structured.Diagonal):
                ip = self.lines(f"stablehlo.iota dim = {c.p} : {it}")
                iq = self.lines(f"stablehlo.iota dim = {c.q} : {it}")
                if c.offset == 0:
                    parts.append(self.lines(f"stablehlo.compare EQ, {ip}, {iq}, SIGNED : ({it}, {it}) -> {bt}"))
                else:
                    d = self.lines(f"stablehlo.subtract {ip}, {iq} : {it}")
                    parts.append(compare("EQ", d, c.offset))
            elif c.where is not None:
                line_aval = Aval((shape[c.axis],), "bool")
                line = self.dense(c.where, line_aval, last=False)
                parts.append(self.lines(f"stablehlo.broadcast_in_dim {line}, dims = [{c.axis}] : "
                                        f"({tensor_type(line_aval)}) -> {bt}"))
            else:
                i = self.lines(f"stablehlo.iota dim = {c.axis} : {it}")
                if c.start > 0:
                    parts.append(compare("GE", i, c.start))
                if c.stop < shape[c.axis]:
                    parts.append(compare("LT", i, c.stop))
        out = parts[0]
        for p in parts[1:]:
            out = self.lines(f"stablehlo.and {out}, {p} : {bt}")
        return out


def _layout(rank: int, matrix: bool) -> str:
    """XLA layout (minor to major): column-major matrices, row-major batch axes."""
    if rank == 0:
        return "dense<> : tensor<0xindex>"
    order = [rank - 2, rank - 1, *range(rank - 3, -1, -1)] if matrix else list(range(rank - 1, -1, -1))
    return f"dense<{_ints(tuple(order))}> : tensor<{rank}xindex>"


def _lapack(lines: _Lines, name: str, args: list[tuple[str, Aval, bool]], results: list[tuple[Aval, bool]],
            config: str = "", overwrites: int | None = 0) -> str:
    """A LAPACK FFI custom call; args and results are (name/aval, is a matrix); the first
    result overwrites operand ``overwrites`` (None: none does). With the platform's kernels (GPUs), the
    same routine as JAX lowers it there."""
    routine = name.removeprefix("lapack_")[1:].removesuffix("_ffi")
    if lines.e.jax_kernels and routine in platform_kernels.KERNELS:
        lines.n += 1
        return lines.e.call_kernel(lines.ins, routine, [(a, av) for a, av, _ in args], [av for av, _ in results],
                                   f"l{lines.n}")
    if lines.e.platform != "cpu":
        raise LoweringError(f"{lines.ins.op} has no StableHLO lowering for {lines.e.platform} (it calls LAPACK's "
                            f"{routine}, which XLA provides on the CPU only): run it on the CPU (device='cpu') "
                            "or with NumPy")
    batch = args[0][1].ndim - 2
    ops = ", ".join(a for a, _, _ in args)
    in_layouts = ", ".join(_layout(av.ndim, m) for _, av, m in args)
    out_layouts = ", ".join(_layout(av.ndim, m) for av, m in results)
    in_types = ", ".join(tensor_type(av) for _, av, _ in args)
    out_types = ", ".join(tensor_type(av) for av, _ in results)
    alias = "" if overwrites is None else (
        "output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = "
        f"{'[0]' if len(results) > 1 else '[]'}, operand_index = {overwrites}, operand_tuple_indices = []>], ")
    ret = f"({out_types})" if len(results) > 1 else out_types
    return lines(f'stablehlo.custom_call @{name}({ops}) {{backend_config = "", mhlo.backend_config = {{{config}}}, '
                 f'mhlo.frontend_attributes = {{num_batch_dims = "{batch}"}}, operand_layouts = [{in_layouts}], '
                 f"{alias}result_layouts = [{out_layouts}]}} : ({in_types}) -> {ret}", len(results))


def _iota_compare(lines: _Lines, aval: Aval, direction: str) -> str:
    """bool tensor of aval's shape: (column index) direction (row index)."""
    it = tensor_type(Aval(aval.shape, "int64"))
    i = lines(f"stablehlo.iota dim = {aval.ndim - 2} : {it}")
    j = lines(f"stablehlo.iota dim = {aval.ndim - 1} : {it}")
    return lines(f"stablehlo.compare {direction}, {j}, {i}, SIGNED : ({it}, {it}) -> "
                 f"{tensor_type(Aval(aval.shape, 'bool'))}")


def _splat(lines: _Lines, value: complex | float, aval: Aval) -> str:
    c = lines(f"stablehlo.constant {dense_literal(np.array(value, dtype=aval.dtype))} : "
              f"{tensor_type(Aval((), aval.dtype))}")
    return lines(f"stablehlo.broadcast_in_dim {c}, dims = [] : ({tensor_type(Aval((), aval.dtype))}) -> "
                 f"{tensor_type(aval)}")


def _keep(lines: _Lines, x: str, aval: Aval, direction: str, last: bool = False) -> str:
    mask = _iota_compare(lines, aval, direction)
    zero = _splat(lines, 0, aval)
    text = (f"stablehlo.select {mask}, {x}, {zero} : {tensor_type(Aval(aval.shape, 'bool'))}, "
            f"{tensor_type(aval)}")
    return lines.last(text) if last else lines(text)


def _mT_text(x: str, aval: Aval) -> tuple[str, Aval]:
    perm = tuple(range(aval.ndim - 2)) + (aval.ndim - 1, aval.ndim - 2)
    out = aval.with_shape(tuple(aval.shape[p] for p in perm))
    return f"stablehlo.transpose {x}, dims = {_ints(perm)} : ({tensor_type(aval)}) -> {tensor_type(out)}", out


def _conj_of(lines: _Lines, x: str, aval: Aval) -> str:
    if not is_complex(aval.dtype):
        return x
    t_c, t_r = tensor_type(aval), tensor_type(aval.with_dtype(real_dtype(aval.dtype)))
    re = lines(f"stablehlo.real {x} : ({t_c}) -> {t_r}")
    im = lines(f"stablehlo.imag {x} : ({t_c}) -> {t_r}")
    return lines(f"stablehlo.complex {re}, {lines(f'stablehlo.negate {im} : {t_r}')} : {t_c}")


def _hermitian_part(lines: _Lines, x: str, aval: Aval) -> str:
    t = tensor_type(aval)
    xt = lines(_mT_text(x, aval)[0])
    s = lines(f"stablehlo.add {x}, {_conj_of(lines, xt, aval)} : {t}")
    return lines(f"stablehlo.multiply {s}, {_splat(lines, 0.5, aval)} : {t}")


def _diagonal(lines: _Lines, x: str, aval: Aval) -> tuple[str, Aval]:
    """The diagonal (..., n) of square matrices."""
    d = _keep(lines, x, aval, "EQ")
    out = aval.with_shape(aval.shape[:-1])
    init = lines(f"stablehlo.constant {_scalar_literal(0, aval.dtype)} : {tensor_type(Aval((), aval.dtype))}")
    sig = f"({tensor_type(aval)}, {tensor_type(Aval((), aval.dtype))}) -> {tensor_type(out)}"
    return lines(f"stablehlo.reduce({d} init: {init}) applies stablehlo.add across dimensions = "
                 f"[{aval.ndim - 1}] : {sig}"), out


@_lowers(sem.triangle)
def _triangle(e: _Emitter, ins: Instruction) -> None:
    lower, strict = ins.attrs["lower"], ins.attrs["strict"]
    direction = ("LT" if strict else "LE") if lower else ("GT" if strict else "GE")
    _keep(_Lines(e, ins), e.arg(ins, 0), e.arg_aval(ins, 0), direction, last=True)


@_lowers(sem.cholesky)
def _cholesky(e: _Emitter, ins: Instruction) -> None:
    lines, aval = _Lines(e, ins), e.arg_aval(ins, 0)
    s = _hermitian_part(lines, e.arg(ins, 0), aval)
    if e.jax_kernels:  # the vendor's solver: XLA's expansion is far slower on GPUs
        factor = e.call_kernel(ins, "cholesky", [(s, aval)], [aval])
    elif _lapack_on_cpu(e, aval):  # as on GPUs: LAPACK's potrf is far faster than XLA's expansion
        info = Aval(aval.shape[:-2], "int32")
        res = _lapack(lines, f"lapack_{_LAPACK_PREFIX[aval.dtype]}potrf_ffi", [(s, aval, True)],
                      [(aval, True), (info, False)], "uplo = 76 : ui8")
        factor = _nan_where_failed(lines, f"{res}#0", f"{res}#1", aval)
    else:
        factor = lines(f"stablehlo.cholesky {s}, lower = true : {tensor_type(aval)}")
    # the upper triangle is unspecified (nan where s is not positive definite): 0, as the
    # NumPy evaluation and JAX
    _keep(lines, factor, aval, "LE", last=True)


def _tri_solve_text(a: str, b: str, a_aval: Aval, b_aval: Aval, lower: bool, unit: bool) -> str:
    flag = "true" if lower else "false"
    return (f'"stablehlo.triangular_solve"({a}, {b}) {{left_side = true, lower = {flag}, '
            f"unit_diagonal = {'true' if unit else 'false'}, transpose_a = #stablehlo<transpose NO_TRANSPOSE>}} : "
            f"({tensor_type(a_aval)}, {tensor_type(b_aval)}) -> {tensor_type(b_aval)}")


@_lowers(sem.triangular_solve)
def _triangular_solve(e: _Emitter, ins: Instruction) -> None:
    a, b, a_aval, b_aval = e.arg(ins, 0), e.arg(ins, 1), e.arg_aval(ins, 0), e.arg_aval(ins, 1)
    lower, unit = ins.attrs["lower"], ins.attrs["unit_diagonal"]
    if _lapack_on_cpu(e, a_aval) and a_aval.shape[:-2] == b_aval.shape[:-2]:
        # BLAS's trsm, as JAX on the CPU (XLA's expansion is several times slower); the
        # character codes are BLAS's: side L, uplo L/U, no transpose, diag U(nit)/N(on-unit)
        config = f"diag = {85 if unit else 78} : ui8, side = 76 : ui8, trans_x = 78 : ui8, " \
                 f"uplo = {76 if lower else 85} : ui8"
        lines = _Lines(e, ins)
        e.alias(ins, _lapack(lines, f"lapack_{_LAPACK_PREFIX[a_aval.dtype]}trsm_ffi", [(a, a_aval, True),
                             (b, b_aval, True)], [(b_aval, True)], config, overwrites=1))
        return
    e.emit(ins, _tri_solve_text(a, b, a_aval, b_aval, lower, unit))


def _lapack_on_cpu(e: _Emitter, aval: Aval) -> bool:
    """Whether linear algebra on ``aval`` calls the LAPACK routines of XLA's CPU runtime."""
    return e.platform == "cpu" and not e.jax_kernels and aval.dtype in _LAPACK_PREFIX


def _nan_where_failed(lines: _Lines, x: str, info: str, aval: Aval, per_matrix: int = 2) -> str:
    """``x`` where LAPACK's ``info`` (one per matrix) is 0, nan elsewhere (JAX's convention);
    ``x`` has ``per_matrix`` axes per matrix (2 for a factor, 1 for singular values)."""
    iv, bv = Aval(aval.shape[:-per_matrix], "int32"), Aval(aval.shape, "bool")
    zero = _splat(lines, 0, iv)
    ok = lines(f"stablehlo.compare EQ, {info}, {zero}, SIGNED : ({tensor_type(iv)}, {tensor_type(iv)}) -> "
               f"{tensor_type(Aval(iv.shape, 'bool'))}")
    dims = _ints(tuple(range(aval.ndim - per_matrix)))
    okb = lines(f"stablehlo.broadcast_in_dim {ok}, dims = {dims} : ({tensor_type(Aval(iv.shape, 'bool'))}) -> "
                f"{tensor_type(bv)}")
    nan = _splat(lines, complex(np.nan, np.nan) if is_complex(aval.dtype) else np.nan, aval)
    return lines(f"stablehlo.select {okb}, {x}, {nan} : {tensor_type(bv)}, {tensor_type(aval)}")


def _qr_parts(lines: _Lines, x: str, av: Aval) -> tuple[str, str, Aval]:
    """(Q, a matrix whose upper triangle's top n x n is R, its aval) of the reduced QR of an
    m x n matrix with m >= n: LAPACK's Householder form on the CPU, the platform's kernel
    (JAX's qr) with the kernels."""
    m, n = av.shape[-2:]
    if lines.e.jax_kernels:
        r_aval = av.with_shape(av.shape[:-2] + (n, n))
        lines.n += 1
        res = lines.e.call_kernel(lines.ins, "qr", [(x, av)], [av, r_aval], f"l{lines.n}")
        return f"{res}#0", f"{res}#1", r_aval
    qr = _householder(lines, x, av)
    tau = av.with_shape(av.shape[:-2] + (n,))
    orgqr = "ungqr" if is_complex(av.dtype) else "orgqr"
    q = _lapack(lines, f"lapack_{_LAPACK_PREFIX[av.dtype]}{orgqr}_ffi",
                [(f"{qr}#0", av, True), (f"{qr}#1", tau, False)], [(av, True)])
    return q, f"{qr}#0", av


@_lowers(sem.solve)
def _solve(e: _Emitter, ins: Instruction) -> None:
    """QR: x = R^-1 Q^H b."""
    lines = _Lines(e, ins)
    lines.last(_solve_text(lines, e.arg(ins, 0), e.arg(ins, 1), e.arg_aval(ins, 0), e.arg_aval(ins, 1)))


def _solve_text(lines: _Lines, a: str, b: str, av: Aval, bv: Aval) -> str:
    """The op giving x with a x = b (QR: x = R^-1 Q^H b), the lines before it written."""
    q, r_factor, _ = _qr_parts(lines, a, av)
    qc = _conj_of(lines, q, av)
    r = av.ndim
    batch = _ints(tuple(range(r - 2)))
    dims = (f"batching_dims = {batch} x {batch}, " if r > 2 else "") + \
        f"contracting_dims = [{r - 2}] x [{r - 2}]"
    c = lines(f"stablehlo.dot_general {qc}, {b}, {dims} : ({tensor_type(av)}, {tensor_type(bv)}) -> "
              f"{tensor_type(bv)}")
    return _tri_solve_text(r_factor, c, av, bv, False, False)


def _lu_diagonal(lines: _Lines, x: str, av: Aval) -> tuple[str, str, Aval]:
    """(LU factor's diagonal, pivots) of getrf."""
    piv = Aval(av.shape[:-1], "int32")
    lu = _lapack(lines, f"lapack_{_LAPACK_PREFIX[av.dtype]}getrf_ffi", [(x, av, True)],
                 [(av, True), (piv, False), (Aval(av.shape[:-2], "int32"), False)])
    d, dv = _diagonal(lines, f"{lu}#0", av)
    return d, f"{lu}#1", dv


@_lowers(sem.logabsdet)
def _logabsdet(e: _Emitter, ins: Instruction) -> None:
    lines, av = _Lines(e, ins), e.arg_aval(ins, 0)
    d, _, dv = _lu_diagonal(lines, e.arg(ins, 0), av)
    rv = dv.with_dtype(real_dtype(dv.dtype))
    sig = f"({tensor_type(dv)}) -> {tensor_type(rv)}" if is_complex(dv.dtype) else tensor_type(rv)
    mag = lines(f"stablehlo.abs {d} : {sig}")
    logs = lines(f"stablehlo.log {mag} : {tensor_type(rv)}")
    out = e.avals[ins.outputs[0]]
    init = lines(f"stablehlo.constant {_scalar_literal(0, rv.dtype)} : {tensor_type(Aval((), rv.dtype))}")
    lines.last(f"stablehlo.reduce({logs} init: {init}) applies stablehlo.add across dimensions = [{rv.ndim - 1}] "
               f": ({tensor_type(rv)}, {tensor_type(Aval((), rv.dtype))}) -> {tensor_type(out)}")


@_lowers(sem.detsign)
def _detsign(e: _Emitter, ins: Instruction) -> None:
    """prod(sign of U's diagonal) * (-1)^(number of row swaps)."""
    lines, av = _Lines(e, ins), e.arg_aval(ins, 0)
    d, piv, dv = _lu_diagonal(lines, e.arg(ins, 0), av)
    t = tensor_type(dv)
    if is_complex(dv.dtype):
        rv = dv.with_dtype(real_dtype(dv.dtype))
        mag = lines(f"stablehlo.abs {d} : ({t}) -> {tensor_type(rv)}")
        zero = _splat(lines, 0, rv)
        is0 = lines(f"stablehlo.compare EQ, {mag}, {zero}, FLOAT : ({tensor_type(rv)}, {tensor_type(rv)}) -> "
                    f"{tensor_type(Aval(rv.shape, 'bool'))}")
        magc = lines(f"stablehlo.complex {mag}, {zero} : {t}")
        unit = lines(f"stablehlo.divide {d}, {magc} : {t}")
        signs = lines(f"stablehlo.select {is0}, {_splat(lines, 0, dv)}, {unit} : "
                      f"{tensor_type(Aval(rv.shape, 'bool'))}, {t}")
    else:
        signs = lines(f"stablehlo.sign {d} : {t}")
    out = e.avals[ins.outputs[0]]
    scalar = tensor_type(Aval((), dv.dtype))
    one = lines(f"stablehlo.constant {_scalar_literal(1, dv.dtype)} : {scalar}")
    prod = lines(f"stablehlo.reduce({signs} init: {one}) applies stablehlo.multiply across dimensions = "
                 f"[{dv.ndim - 1}] : ({t}, {scalar}) -> {tensor_type(out)}")
    pv = Aval(dv.shape, "int32")
    it = tensor_type(pv)
    idx = lines(f"stablehlo.iota dim = {pv.ndim - 1} : {it}")
    idx1 = lines(f"stablehlo.add {idx}, {_splat(lines, 1, pv)} : {it}")
    swapped = lines(f"stablehlo.compare NE, {piv}, {idx1}, SIGNED : ({it}, {it}) -> "
                    f"{tensor_type(Aval(pv.shape, 'bool'))}")
    flips = lines(f"stablehlo.select {swapped}, {_splat(lines, -1, dv)}, {_splat(lines, 1, dv)} : "
                  f"{tensor_type(Aval(pv.shape, 'bool'))}, {t}")
    parity = lines(f"stablehlo.reduce({flips} init: {one}) applies stablehlo.multiply across dimensions = "
                   f"[{dv.ndim - 1}] : ({t}, {scalar}) -> {tensor_type(out)}")
    lines.last(f"stablehlo.multiply {prod}, {parity} : {tensor_type(out)}")


def _eigh(lines: _Lines, x: str, av: Aval) -> str:
    s = _hermitian_part(lines, x, av)
    kind = "heevd" if is_complex(av.dtype) else "syevd"
    w = Aval(av.shape[:-1], real_dtype(av.dtype))
    return _lapack(lines, f"lapack_{_LAPACK_PREFIX[av.dtype]}{kind}_ffi", [(s, av, True)],
                   [(av, True), (w, False), (Aval(av.shape[:-2], "int32"), False)],
                   "mode = 86 : ui8, uplo = 76 : ui8")


@_lowers(sem.eigvalsh)
def _eigvalsh(e: _Emitter, ins: Instruction) -> None:
    lines = _Lines(e, ins)
    res = _eigh(lines, e.arg(ins, 0), e.arg_aval(ins, 0))
    e.alias(ins, f"{res}#1")


@_lowers(sem.eigh_vectors)
def _eigh_vectors(e: _Emitter, ins: Instruction) -> None:
    """LAPACK's eigenvectors, each scaled so that its first component is real and >= 0."""
    lines, av = _Lines(e, ins), e.arg_aval(ins, 0)
    v = f"{_eigh(lines, e.arg(ins, 0), av)}#0"
    r = av.ndim
    row = av.with_shape(av.shape[:-2] + (1, av.shape[-1]))
    rv = row.with_dtype(real_dtype(av.dtype))
    lim = ", ".join(f"0:{d}" for d in av.shape[:-2]) + (", " if r > 2 else "") + f"0:1, 0:{av.shape[-1]}"
    first = lines(f"stablehlo.slice {v} [{lim}] : ({tensor_type(av)}) -> {tensor_type(row)}")
    t = tensor_type(row)
    mag = lines(f"stablehlo.abs {first} : " + (f"({t}) -> {tensor_type(rv)}" if is_complex(av.dtype) else t))
    zero_r = _splat(lines, 0, rv)
    is0 = lines(f"stablehlo.compare EQ, {mag}, {zero_r}, FLOAT : ({tensor_type(rv)}, {tensor_type(rv)}) -> "
                f"{tensor_type(Aval(rv.shape, 'bool'))}")
    one_r = _splat(lines, 1, rv)
    safe = lines(f"stablehlo.select {is0}, {one_r}, {mag} : {tensor_type(Aval(rv.shape, 'bool'))}, "
                 f"{tensor_type(rv)}")
    if is_complex(av.dtype):
        safe = lines(f"stablehlo.complex {safe}, {zero_r} : {t}")
    phase = lines(f"stablehlo.divide {_conj_of(lines, first, row)}, {safe} : {t}")
    phase = lines(f"stablehlo.select {is0}, {_splat(lines, 1, row)}, {phase} : "
                  f"{tensor_type(Aval(rv.shape, 'bool'))}, {t}")
    full = lines(f"stablehlo.broadcast_in_dim {phase}, dims = {_ints(tuple(range(r)))} : ({t}) -> "
                 f"{tensor_type(av)}")
    lines.last(f"stablehlo.multiply {v}, {full} : {tensor_type(av)}")


def _householder(lines: _Lines, x: str, av: Aval) -> str:
    tau = av.with_shape(av.shape[:-2] + (av.shape[-1],))
    return _lapack(lines, f"lapack_{_LAPACK_PREFIX[av.dtype]}geqrf_ffi", [(x, av, True)], [(av, True), (tau, False)])


@_lowers(sem.qr_q)
def _qr_q(e: _Emitter, ins: Instruction) -> None:
    q, _, _ = _qr_parts(_Lines(e, ins), e.arg(ins, 0), e.arg_aval(ins, 0))
    e.alias(ins, q)


@_lowers(sem.qr_r)
def _qr_r(e: _Emitter, ins: Instruction) -> None:
    lines, av = _Lines(e, ins), e.arg_aval(ins, 0)
    _, packed, pv = _qr_parts(lines, e.arg(ins, 0), av)
    n = av.shape[-1]
    out = e.avals[ins.outputs[0]]
    lim = "".join(f"0:{d}, " for d in av.shape[:-2]) + f"0:{n}, 0:{n}"
    top = lines(f"stablehlo.slice {packed} [{lim}] : ({tensor_type(pv)}) -> {tensor_type(out)}")
    _keep(lines, top, out, "GE", last=True)



def _gesdd(lines: _Lines, x: str, av: Aval) -> tuple[str, str, str]:
    """(s, u, vt) of the reduced SVD (LAPACK ?gesdd, mode 'S'), nan for a matrix LAPACK
    failed on (one with a nan or an inf: its outputs are left uninitialized, 4.6e-310 or
    9e45, where NumPy's evaluation and JAX give nan)."""
    m, n = av.shape[-2:]
    k = min(m, n)
    lead = av.shape[:-2]
    s = Aval(lead + (k,), real_dtype(av.dtype))
    u, vt = av.with_shape(lead + (m, k)), av.with_shape(lead + (k, n))
    res = _lapack(lines, f"lapack_{_LAPACK_PREFIX[av.dtype]}gesdd_ffi", [(x, av, True)],
                  [(av, True), (s, False), (u, True), (vt, True), (Aval(lead, "int32"), False)],
                  "mode = 83 : ui8")
    info = f"{res}#4"
    return (_nan_where_failed(lines, f"{res}#1", info, s, per_matrix=1),
            _nan_where_failed(lines, f"{res}#2", info, u), _nan_where_failed(lines, f"{res}#3", info, vt))


@_lowers(sem.svdvals)
def _svdvals(e: _Emitter, ins: Instruction) -> None:
    e.alias(ins, _gesdd(_Lines(e, ins), e.arg(ins, 0), e.arg_aval(ins, 0))[0])


def _svd_phase(lines: _Lines, vt: str, vt_aval: Aval) -> tuple[str, Aval]:
    """Per singular triple, the phase (..., k, 1) that makes Vh's first column real >= 0."""
    col = vt_aval.with_shape(vt_aval.shape[:-1] + (1,))
    rv = col.with_dtype(real_dtype(col.dtype))
    lim = "".join(f"0:{d}, " for d in vt_aval.shape[:-1]) + "0:1"
    first = lines(f"stablehlo.slice {vt} [{lim}] : ({tensor_type(vt_aval)}) -> {tensor_type(col)}")
    t = tensor_type(col)
    mag = lines(f"stablehlo.abs {first} : " + (f"({t}) -> {tensor_type(rv)}" if is_complex(col.dtype) else t))
    zero_r = _splat(lines, 0, rv)
    bt = tensor_type(Aval(rv.shape, "bool"))
    is0 = lines(f"stablehlo.compare EQ, {mag}, {zero_r}, FLOAT : ({tensor_type(rv)}, {tensor_type(rv)}) -> {bt}")
    safe = lines(f"stablehlo.select {is0}, {_splat(lines, 1, rv)}, {mag} : {bt}, {tensor_type(rv)}")
    if is_complex(col.dtype):
        safe = lines(f"stablehlo.complex {safe}, {zero_r} : {t}")
    phase = lines(f"stablehlo.divide {first}, {safe} : {t}")
    return lines(f"stablehlo.select {is0}, {_splat(lines, 1, col)}, {phase} : {bt}, {t}"), col


@_lowers(sem.svd_u)
def _svd_u(e: _Emitter, ins: Instruction) -> None:
    lines, av = _Lines(e, ins), e.arg_aval(ins, 0)
    _, u, vt = _gesdd(lines, e.arg(ins, 0), av)
    m, n = av.shape[-2:]
    k = min(m, n)
    phase, col = _svd_phase(lines, vt, av.with_shape(av.shape[:-2] + (k, n)))
    out = e.avals[ins.outputs[0]]
    r = av.ndim
    row = lines(f"stablehlo.reshape {phase} : ({tensor_type(col)}) -> "
                f"{tensor_type(col.with_shape(col.shape[:-2] + (1, k)))}")
    full = lines(f"stablehlo.broadcast_in_dim {row}, dims = {_ints(tuple(range(r)))} : "
                 f"({tensor_type(col.with_shape(col.shape[:-2] + (1, k)))}) -> {tensor_type(out)}")
    lines.last(f"stablehlo.multiply {u}, {full} : {tensor_type(out)}")


@_lowers(sem.svd_vh)
def _svd_vh(e: _Emitter, ins: Instruction) -> None:
    lines, av = _Lines(e, ins), e.arg_aval(ins, 0)
    _, _, vt = _gesdd(lines, e.arg(ins, 0), av)
    out = e.avals[ins.outputs[0]]
    phase, col = _svd_phase(lines, vt, out)
    full = lines(f"stablehlo.broadcast_in_dim {_conj_of(lines, phase, col)}, dims = {_ints(tuple(range(av.ndim)))} : "
                 f"({tensor_type(col)}) -> {tensor_type(out)}")
    lines.last(f"stablehlo.multiply {vt}, {full} : {tensor_type(out)}")


@_lowers(sem.pinv)
def _pinv(e: _Emitter, ins: Instruction) -> None:
    """V diag(1/s) U^H over the singular values above rtol * the largest."""
    lines, av = _Lines(e, ins), e.arg_aval(ins, 0)
    s_val, u_val, vt_val = _gesdd(lines, e.arg(ins, 0), av)
    m, n = av.shape[-2:]
    k, lead, r = min(m, n), av.shape[:-2], av.ndim
    sv = Aval(lead + (k,), real_dtype(av.dtype))
    scalar = tensor_type(Aval((), sv.dtype))
    low = lines(f"stablehlo.constant {_scalar_literal(0, sv.dtype)} : {scalar}")
    top = lines(f"stablehlo.reduce({s_val} init: {low}) applies stablehlo.maximum across dimensions = [{r - 2}] : "
                f"({tensor_type(sv)}, {scalar}) -> {tensor_type(Aval(lead, sv.dtype))}")
    cut = lines(f"stablehlo.multiply {top}, {_splat(lines, ins.attrs['rtol'], Aval(lead, sv.dtype))} : "
                f"{tensor_type(Aval(lead, sv.dtype))}")
    cutb = lines(f"stablehlo.broadcast_in_dim {cut}, dims = {_ints(tuple(range(r - 2)))} : "
                 f"({tensor_type(Aval(lead, sv.dtype))}) -> {tensor_type(sv)}")
    bt = tensor_type(Aval(sv.shape, "bool"))
    keep = lines(f"stablehlo.compare GT, {s_val}, {cutb}, FLOAT : ({tensor_type(sv)}, {tensor_type(sv)}) -> {bt}")
    inv = lines(f"stablehlo.divide {_splat(lines, 1, sv)}, {s_val} : {tensor_type(sv)}")
    inv = lines(f"stablehlo.select {keep}, {inv}, {_splat(lines, 0, sv)} : {bt}, {tensor_type(sv)}")
    if is_complex(av.dtype):
        inv = lines(f"stablehlo.convert {inv} : ({tensor_type(sv)}) -> {tensor_type(sv.with_dtype(av.dtype))}")
    vt = av.with_shape(lead + (k, n))
    v_text, v_aval = _mT_text(vt_val, vt)
    v = _conj_of(lines, lines(v_text), v_aval)
    scaled = lines(f"stablehlo.broadcast_in_dim {inv}, dims = {_ints(tuple(range(r - 2)) + (r - 1,))} : "
                   f"({tensor_type(sv.with_dtype(av.dtype))}) -> {tensor_type(v_aval)}")
    vs = lines(f"stablehlo.multiply {v}, {scaled} : {tensor_type(v_aval)}")
    u = av.with_shape(lead + (m, k))
    ut_text, ut_aval = _mT_text(u_val, u)
    uh = _conj_of(lines, lines(ut_text), ut_aval)
    batch = _ints(tuple(range(r - 2)))
    dims = (f"batching_dims = {batch} x {batch}, " if r > 2 else "") + f"contracting_dims = [{r - 1}] x [{r - 2}]"
    lines.last(f"stablehlo.dot_general {vs}, {uh}, {dims} : ({tensor_type(v_aval)}, {tensor_type(ut_aval)}) -> "
               f"{tensor_type(e.avals[ins.outputs[0]])}")


# --- the matrix exponential: scaling and squaring (Higham 2005) -----------------------------
# exp(x) = r(x / 2^s)^(2^s), r the diagonal [m/m] Pade approximant, s the fewest squarings
# that bring the 1-norm of x / 2^s below theta_m: m = 13, theta = 5.371920351148152 in
# double precision, m = 7, theta = 3.925724783138660 in single (Higham's Table 2.3). Each
# matrix of a batch has its own s: a stablehlo.while runs the largest count and a select
# keeps the matrices that are done.

_PADE = {"float64": (13, 5.371920351148152), "float32": (7, 3.925724783138660)}


def _pade_coefficients(m: int) -> list[int]:
    """b_k = (2m - k)! / (k! (m - k)!), the [m/m] Pade approximant's coefficients scaled to b_m = 1."""
    return [math.factorial(2 * m - k) // (math.factorial(k) * math.factorial(m - k)) for k in range(m + 1)]


def _matmul_text(x: str, y: str, av: Aval) -> str:
    """x @ y for stacks of square matrices of one aval."""
    r, t = av.ndim, tensor_type(av)
    batch = _ints(tuple(range(r - 2)))
    dims = (f"batching_dims = {batch} x {batch}, " if r > 2 else "") + f"contracting_dims = [{r - 1}] x [{r - 2}]"
    return f"stablehlo.dot_general {x}, {y}, {dims} : ({t}, {t}) -> {t}"


def _one_norm(lines: _Lines, x: str, av: Aval) -> str:
    """The 1-norm (the largest column sum of |x|) of each matrix: a real (...) tensor."""
    rv = av.with_dtype(real_dtype(av.dtype))
    sig = f"({tensor_type(av)}) -> {tensor_type(rv)}" if is_complex(av.dtype) else tensor_type(rv)
    mag = lines(f"stablehlo.abs {x} : {sig}")
    scalar = tensor_type(Aval((), rv.dtype))
    zero = lines(f"stablehlo.constant {_scalar_literal(0, rv.dtype)} : {scalar}")
    cols = rv.with_shape(rv.shape[:-2] + rv.shape[-1:])
    sums = lines(f"stablehlo.reduce({mag} init: {zero}) applies stablehlo.add across dimensions = [{rv.ndim - 2}] : "
                 f"({tensor_type(rv)}, {scalar}) -> {tensor_type(cols)}")
    out = tensor_type(cols.with_shape(rv.shape[:-2]))
    return lines(f"stablehlo.reduce({sums} init: {zero}) applies stablehlo.maximum across dimensions = "
                 f"[{cols.ndim - 1}] : ({tensor_type(cols)}, {scalar}) -> {out}")


def _per_matrix_scale(lines: _Lines, factor: str, fv: Aval, x: str, av: Aval) -> str:
    """x with each matrix multiplied by its real factor (a (...) tensor)."""
    rv = av.with_dtype(fv.dtype)
    fb = lines(f"stablehlo.broadcast_in_dim {factor}, dims = {_ints(tuple(range(av.ndim - 2)))} : "
               f"({tensor_type(fv)}) -> {tensor_type(rv)}")
    if is_complex(av.dtype):
        fb = lines(f"stablehlo.complex {fb}, {_splat(lines, 0, rv)} : {tensor_type(av)}")
    return lines(f"stablehlo.multiply {x}, {fb} : {tensor_type(av)}")


def _expm_lines(lines: _Lines, x: str, av: Aval) -> str:
    """exp of each matrix of x (scaling, the Pade approximant, squaring): the result's name."""
    t, rd, lead = tensor_type(av), real_dtype(av.dtype), av.shape[:-2]
    m, theta = _PADE["float32" if rd == "float32" else "float64"]
    # s = max(0, ceil(log2(|x|_1 / theta))) per matrix; 0 where the norm is not finite (nan out anyway)
    bv = Aval(lead, rd)
    bt = tensor_type(bv)
    norm = _one_norm(lines, x, av)
    logs = lines(f"stablehlo.log {lines(f'stablehlo.divide {norm}, {_splat(lines, theta, bv)} : {bt}')} : {bt}")
    c = lines(f"stablehlo.ceil {lines(f'stablehlo.divide {logs}, {_splat(lines, math.log(2.0), bv)} : {bt}')} : {bt}")
    c = lines(f"stablehlo.maximum {c}, {_splat(lines, 0, bv)} : {bt}")
    fin = lines(f"stablehlo.is_finite {c} : ({bt}) -> {tensor_type(Aval(lead, 'bool'))}")
    c = lines(f"stablehlo.select {fin}, {c}, {_splat(lines, 0, bv)} : {tensor_type(Aval(lead, 'bool'))}, {bt}")
    scale = lines(f"stablehlo.power {_splat(lines, 2, bv)}, {lines(f'stablehlo.negate {c} : {bt}')} : {bt}")
    a = _per_matrix_scale(lines, scale, bv, x, av)
    # the Pade approximant r = (V - U)^-1 (V + U), U the odd part, V the even part
    b = _pade_coefficients(m)
    eye = _keep(lines, _splat(lines, 1, av), av, "EQ")
    a2 = lines(_matmul_text(a, a, av))
    a4 = lines(_matmul_text(a2, a2, av))
    a6 = lines(_matmul_text(a4, a2, av))
    powers = {0: eye, 2: a2, 4: a4, 6: a6}

    def combo(terms: list[tuple[int, int]]) -> str:  # sum of b_k A^p over (k, p)
        out = None
        for k, p in terms:
            term = lines(f"stablehlo.multiply {powers[p]}, {_splat(lines, float(b[k]), av)} : {t}")
            out = term if out is None else lines(f"stablehlo.add {out}, {term} : {t}")
        assert out is not None
        return out

    if m == 13:
        u_high = lines(_matmul_text(a6, combo([(13, 6), (11, 4), (9, 2)]), av))
        u_in = lines(f"stablehlo.add {u_high}, {combo([(7, 6), (5, 4), (3, 2), (1, 0)])} : {t}")
        v_high = lines(_matmul_text(a6, combo([(12, 6), (10, 4), (8, 2)]), av))
        v = lines(f"stablehlo.add {v_high}, {combo([(6, 6), (4, 4), (2, 2), (0, 0)])} : {t}")
    else:  # m == 7
        u_in = combo([(7, 6), (5, 4), (3, 2), (1, 0)])
        v = combo([(6, 6), (4, 4), (2, 2), (0, 0)])
    u = lines(_matmul_text(a, u_in, av))
    r = lines(_solve_text(lines, lines(f"stablehlo.subtract {v}, {u} : {t}"),
                          lines(f"stablehlo.add {v}, {u} : {t}"), av, av))
    # square s times: the loop carries (i, r, s, max s)
    it, iv = tensor_type(Aval((), "int32")), Aval(lead, "int32")
    st, sb = tensor_type(iv), tensor_type(Aval(lead, "bool"))
    s = lines(f"stablehlo.convert {c} : ({bt}) -> {st}")
    zero_i = lines(f"stablehlo.constant dense<0> : {it}")
    smax = s if not lead else lines(
        f"stablehlo.reduce({s} init: {zero_i}) applies stablehlo.maximum across dimensions = "
        f"{_ints(tuple(range(len(lead))))} : ({st}, {it}) -> {it}")
    e = lines.e
    lines.n += 1
    tag = f"{e.prefix}{lines.ins.outputs[0]}_l{lines.n}"
    args, types = [f"{tag}_a{k}" for k in range(4)], [it, t, st, it]
    block = "  ^bb0(" + ", ".join(f"{n}: {ty}" for n, ty in zip(args, types, strict=True)) + "):"
    e.lines.append(f'    {tag}:4 = "stablehlo.while"({zero_i}, {r}, {s}, {smax}) ({{')
    e.lines.append(block)
    more = lines(f"stablehlo.compare LT, {args[0]}, {args[3]}, SIGNED : ({it}, {it}) -> tensor<i1>")
    e.lines.append(f'      "stablehlo.return"({more}) : (tensor<i1>) -> ()')
    e.lines.append("    }, {")
    e.lines.append(block)
    sq = lines(_matmul_text(args[1], args[1], av))
    ib = lines(f"stablehlo.broadcast_in_dim {args[0]}, dims = [] : ({it}) -> {st}")
    go = lines(f"stablehlo.compare LT, {ib}, {args[2]}, SIGNED : ({st}, {st}) -> {sb}")
    gob = lines(f"stablehlo.broadcast_in_dim {go}, dims = {_ints(tuple(range(len(lead))))} : ({sb}) -> "
                f"{tensor_type(Aval(av.shape, 'bool'))}")
    nxt = lines(f"stablehlo.select {gob}, {sq}, {args[1]} : {tensor_type(Aval(av.shape, 'bool'))}, {t}")
    inc = lines(f"stablehlo.add {args[0]}, {lines(f'stablehlo.constant dense<1> : {it}')} : {it}")
    e.lines.append(f'      "stablehlo.return"({inc}, {nxt}, {args[2]}, {args[3]}) : ({", ".join(types)}) -> ()')
    e.lines.append(f"    }}) : ({', '.join(types)}) -> ({', '.join(types)})")
    return f"{tag}#1"


@_lowers(sem.expm)
def _expm(e: _Emitter, ins: Instruction) -> None:
    lines = _Lines(e, ins)
    e.names[ins.outputs[0]] = _expm_lines(lines, e.arg(ins, 0), e.arg_aval(ins, 0))


@_lowers(sem.expm_frechet)
def _expm_frechet(e: _Emitter, ins: Instruction) -> None:
    """The top-right block of expm([[a, e / |e|_1], [0, a]]), times |e|_1 (L is linear in e)."""
    lines, av = _Lines(e, ins), e.arg_aval(ins, 0)
    a, d = e.arg(ins, 0), e.arg(ins, 1)
    lead, (n, _) = av.shape[:-2], av.shape[-2:]
    rv = Aval(lead, real_dtype(av.dtype))
    rt, bt = tensor_type(rv), tensor_type(Aval(lead, "bool"))
    size = _one_norm(lines, d, av)
    is0 = lines(f"stablehlo.compare EQ, {size}, {_splat(lines, 0, rv)}, FLOAT : ({rt}, {rt}) -> {bt}")
    size = lines(f"stablehlo.select {is0}, {_splat(lines, 1, rv)}, {size} : {bt}, {rt}")
    unit = _per_matrix_scale(lines, lines(f"stablehlo.divide {_splat(lines, 1, rv)}, {size} : {rt}"), rv, d, av)
    r = av.ndim
    wide, big = av.with_shape(lead + (n, 2 * n)), av.with_shape(lead + (2 * n, 2 * n))
    t = tensor_type(av)
    zero = _splat(lines, 0, av)
    top = lines(f"stablehlo.concatenate {a}, {unit}, dim = {r - 1} : ({t}, {t}) -> {tensor_type(wide)}")
    bottom = lines(f"stablehlo.concatenate {zero}, {a}, dim = {r - 1} : ({t}, {t}) -> {tensor_type(wide)}")
    block = lines(f"stablehlo.concatenate {top}, {bottom}, dim = {r - 2} : ({tensor_type(wide)}, "
                  f"{tensor_type(wide)}) -> {tensor_type(big)}")
    full = _expm_lines(lines, block, big)
    corner = lines(f"stablehlo.slice {full} [{', '.join(['0:' + str(k) for k in lead] + [f'0:{n}', f'{n}:{2 * n}'])}]"
                   f" : ({tensor_type(big)}) -> {t}")
    rv_b = av.with_dtype(rv.dtype)
    sb = lines(f"stablehlo.broadcast_in_dim {size}, dims = {_ints(tuple(range(r - 2)))} : ({rt}) -> "
               f"{tensor_type(rv_b)}")
    if is_complex(av.dtype):
        sb = lines(f"stablehlo.complex {sb}, {_splat(lines, 0, rv_b)} : {t}")
    lines.last(f"stablehlo.multiply {corner}, {sb} : {t}")


# --- LU with partial pivoting (LAPACK's getrf) -----------------------------------------------


def _getrf(lines: _Lines, x: str, av: Aval) -> str:
    """getrf's (packed LU, 1-based pivots, info)."""
    return _lapack(lines, f"lapack_{_LAPACK_PREFIX[av.dtype]}getrf_ffi", [(x, av, True)],
                   [(av, True), (Aval(av.shape[:-2] + (min(av.shape[-2:]),), "int32"), False),
                    (Aval(av.shape[:-2], "int32"), False)])


@_lowers(sem.lu)
def _lu(e: _Emitter, ins: Instruction) -> None:
    lines = _Lines(e, ins)
    e.names[ins.outputs[0]] = f"{_getrf(lines, e.arg(ins, 0), e.arg_aval(ins, 0))}#0"


@_lowers(sem.lu_pivots)
def _lu_pivots(e: _Emitter, ins: Instruction) -> None:
    lines, av = _Lines(e, ins), e.arg_aval(ins, 0)
    pv = Aval(av.shape[:-2] + (min(av.shape[-2:]),), "int32")
    res = _getrf(lines, e.arg(ins, 0), av)
    lines.last(f"stablehlo.subtract {res}#1, {_splat(lines, 1, pv)} : {tensor_type(pv)}")


@_lowers(sem.permutation_matrix)
def _permutation_matrix(e: _Emitter, ins: Instruction) -> None:
    """The swaps k <-> pivots[k] applied in turn to 0..n-1 (a stablehlo.while over k; each
    swap selects on iota == k and iota == pivots[k]), then P[i, j] = (perm[i] == j)."""
    lines, pv = _Lines(e, ins), e.arg_aval(ins, 0)
    piv = e.arg(ins, 0)
    if pv.dtype != "int32":
        iv = pv.with_dtype("int32")
        piv = lines(f"stablehlo.convert {piv} : ({tensor_type(pv)}) -> {tensor_type(iv)}")
        pv = iv
    n, lead = pv.shape[-1], pv.shape[:-1]
    t, it = tensor_type(pv), tensor_type(Aval((), "int32"))
    lv, bt = Aval(lead, "int32"), tensor_type(Aval(pv.shape, "bool"))
    lt, lbt = tensor_type(lv), tensor_type(Aval(lead, "bool"))
    last, batch = pv.ndim - 1, _ints(tuple(range(len(lead))))
    # (regions capture nothing from outside: each makes its own constants)

    def pick(values: str, mask: str) -> str:  # values[..., k] where mask is the one-hot of k
        picked = lines(f"stablehlo.select {mask}, {values}, {_splat(lines, 0, pv)} : {bt}, {t}")
        zero = lines(f"stablehlo.constant dense<0> : {it}")
        return lines(f"stablehlo.reduce({picked} init: {zero}) applies stablehlo.add across dimensions = "
                     f"[{last}] : ({t}, {it}) -> {lt}")

    def spread(v: str) -> str:  # (...) -> (..., n)
        return lines(f"stablehlo.broadcast_in_dim {v}, dims = {batch} : ({lt}) -> {t}")

    def compare(direction: str, x: str, y: str, ty: str, out: str) -> str:
        return lines(f"stablehlo.compare {direction}, {x}, {y}, SIGNED : ({ty}, {ty}) -> {out}")

    start = lines(f"stablehlo.iota dim = {last} : {t}")
    zero_i = lines(f"stablehlo.constant dense<0> : {it}")
    lines.n += 1
    tag = f"{e.prefix}{ins.outputs[0]}_l{lines.n}"
    args, types = [f"{tag}_a{k}" for k in range(3)], [it, t, t]
    block = "  ^bb0(" + ", ".join(f"{a}: {ty}" for a, ty in zip(args, types, strict=True)) + "):"
    e.lines.append(f'    {tag}:3 = "stablehlo.while"({zero_i}, {start}, {piv}) ({{')
    e.lines.append(block)
    more = compare("LT", args[0], lines(f"stablehlo.constant dense<{n}> : {it}"), it, "tensor<i1>")
    e.lines.append(f'      "stablehlo.return"({more}) : (tensor<i1>) -> ()')
    e.lines.append("    }, {")
    e.lines.append(block)
    k, perm, pivs = args
    iota = lines(f"stablehlo.iota dim = {last} : {t}")
    at_k = compare("EQ", iota, lines(f"stablehlo.broadcast_in_dim {k}, dims = [] : ({it}) -> {t}"), t, bt)
    j = pick(pivs, at_k)
    kb = lines(f"stablehlo.broadcast_in_dim {k}, dims = [] : ({it}) -> {lt}")
    low_ok = compare("GE", j, _splat(lines, 0, lv), lt, lbt)
    high_ok = compare("LT", j, _splat(lines, n, lv), lt, lbt)
    inside = lines(f"stablehlo.and {low_ok}, {high_ok} : {lbt}")
    j = lines(f"stablehlo.select {inside}, {j}, {kb} : {lbt}, {lt}")
    at_j = compare("EQ", iota, spread(j), t, bt)
    p_k, p_j = spread(pick(perm, at_k)), spread(pick(perm, at_j))
    moved = lines(f"stablehlo.select {at_j}, {p_k}, {perm} : {bt}, {t}")
    swapped = lines(f"stablehlo.select {at_k}, {p_j}, {moved} : {bt}, {t}")
    inc = lines(f"stablehlo.add {k}, {lines(f'stablehlo.constant dense<1> : {it}')} : {it}")
    e.lines.append(f'      "stablehlo.return"({inc}, {swapped}, {pivs}) : ({", ".join(types)}) -> ()')
    e.lines.append(f"    }}) : ({', '.join(types)}) -> ({', '.join(types)})")
    out = e.avals[ins.outputs[0]]
    ot, obt = tensor_type(out), tensor_type(Aval(out.shape, "bool"))
    rows = lines(f"stablehlo.broadcast_in_dim {tag}#1, dims = {_ints(tuple(range(pv.ndim)))} : ({t}) -> {ot}")
    cols = lines(f"stablehlo.iota dim = {out.ndim - 1} : {ot}")
    hit = lines(f"stablehlo.compare EQ, {rows}, {cols}, SIGNED : ({ot}, {ot}) -> {obt}")
    lines.last(f"stablehlo.convert {hit} : ({obt}) -> {ot}")


# --- eigenvalues and eigenvectors of general matrices (LAPACK's geev) --------------------------
# geev's order is sorted (real part, then imaginary part) with a stablehlo.sort, the
# vectors' columns along; each vector is scaled so that its first largest-magnitude
# component is real and positive (reference.eig).


def _geev(lines: _Lines, x: str, av: Aval) -> tuple[str, str, str]:
    """(real parts, imaginary parts, right eigenvectors) of each matrix, geev's order; nan
    for a matrix with an inf or nan (given to geev as zeros: LAPACK refuses them)."""
    lead, n = av.shape[:-2], av.shape[-1]
    bav, bl = Aval(av.shape, "bool"), Aval(lead, "bool")
    parts = [x] if not is_complex(av.dtype) else [
        lines(f"stablehlo.{f} {x} : ({tensor_type(av)}) -> {tensor_type(av.with_dtype(real_dtype(av.dtype)))}")
        for f in ("real", "imag")]
    rt = tensor_type(av.with_dtype(real_dtype(av.dtype)))
    fins = [lines(f"stablehlo.is_finite {p} : ({rt}) -> {tensor_type(bav)}") for p in parts]
    fin = fins[0] if len(fins) == 1 else lines(f"stablehlo.and {fins[0]}, {fins[1]} : {tensor_type(bav)}")
    true = lines("stablehlo.constant dense<true> : tensor<i1>")
    finite = lines(f"stablehlo.reduce({fin} init: {true}) applies stablehlo.and across dimensions = "
                   f"[{av.ndim - 2}, {av.ndim - 1}] : ({tensor_type(bav)}, tensor<i1>) -> {tensor_type(bl)}")
    batch = _ints(tuple(range(len(lead))))
    fin_m = lines(f"stablehlo.broadcast_in_dim {finite}, dims = {batch} : ({tensor_type(bl)}) -> {tensor_type(bav)}")
    x = lines(f"stablehlo.select {fin_m}, {x}, {_splat(lines, 0, av)} : {tensor_type(bav)}, {tensor_type(av)}")
    rd = real_dtype(av.dtype)
    cd = av.dtype if is_complex(av.dtype) else {"float32": "complex64", "float64": "complex128"}[av.dtype]
    wv, vv, info = Aval(lead + (n,), cd), av.with_dtype(cd), Aval(lead, "int32")
    config = "compute_left = 78 : ui8, compute_right = 86 : ui8"
    name = f"lapack_{_LAPACK_PREFIX[av.dtype]}geev_ffi"
    rw = Aval(lead + (n,), rd)
    if is_complex(av.dtype):
        res = _lapack(lines, name, [(x, av, True)], [(wv, False), (vv, True), (vv, True), (info, False)], config,
                      overwrites=None)
        w, v, ok = f"{res}#0", f"{res}#2", f"{res}#3"
        re = lines(f"stablehlo.real {w} : ({tensor_type(wv)}) -> {tensor_type(rw)}")
        im = lines(f"stablehlo.imag {w} : ({tensor_type(wv)}) -> {tensor_type(rw)}")
    else:
        res = _lapack(lines, name, [(x, av, True)], [(rw, False), (rw, False), (vv, True), (vv, True),
                                                     (info, False)], config, overwrites=None)
        re, im, v, ok = f"{res}#0", f"{res}#1", f"{res}#3", f"{res}#4"
    # nan where the matrix was not finite (or, rarely, geev did not converge)
    zero_i = _splat(lines, 0, info)
    good = lines(f"stablehlo.compare EQ, {ok}, {zero_i}, SIGNED : ({tensor_type(info)}, {tensor_type(info)}) -> "
                 f"{tensor_type(bl)}")
    good = lines(f"stablehlo.and {good}, {finite} : {tensor_type(bl)}")
    bw = Aval(rw.shape, "bool")
    good_w = lines(f"stablehlo.broadcast_in_dim {good}, dims = {batch} : ({tensor_type(bl)}) -> {tensor_type(bw)}")
    good_v = lines(f"stablehlo.broadcast_in_dim {good}, dims = {batch} : ({tensor_type(bl)}) -> "
                   f"{tensor_type(Aval(vv.shape, 'bool'))}")
    nan_w = _splat(lines, np.nan, rw)
    re, im = (lines(f"stablehlo.select {good_w}, {p}, {nan_w} : {tensor_type(bw)}, {tensor_type(rw)}")
              for p in (re, im))
    nan_v = _splat(lines, complex(np.nan, np.nan), vv)
    v = lines(f"stablehlo.select {good_v}, {v}, {nan_v} : {tensor_type(Aval(vv.shape, 'bool'))}, {tensor_type(vv)}")
    return re, im, v


def _sort_by_keys(lines: _Lines, re: str, im: str, key_aval: Aval, rest: list[tuple[str, Aval]]) -> str:
    """stablehlo.sort of (re, im, *rest) along the last axis, ordered by re, then im: the
    name of its results (#0, #1, ...)."""
    e = lines.e
    operands = [(re, key_aval), (im, key_aval), *rest]
    lines.n += 1
    tag = f"{e.prefix}{lines.ins.outputs[0]}_l{lines.n}"
    params = []
    for k, (_, av) in enumerate(operands):
        scalar = tensor_type(Aval((), av.dtype))
        params += [(f"{tag}_x{k}", scalar), (f"{tag}_y{k}", scalar)]
    types = ", ".join(tensor_type(av) for _, av in operands)
    e.lines.append(f'    {tag}:{len(operands)} = "stablehlo.sort"({", ".join(n for n, _ in operands)}) ({{')
    e.lines.append("  ^bb0(" + ", ".join(f"{n}: {t}" for n, t in params) + "):")
    st, bt = tensor_type(Aval((), key_aval.dtype)), "tensor<i1>"
    xr, yr, xi, yi = params[0][0], params[1][0], params[2][0], params[3][0]
    less = lines(f"stablehlo.compare LT, {xr}, {yr}, FLOAT : ({st}, {st}) -> {bt}")
    same = lines(f"stablehlo.compare EQ, {xr}, {yr}, FLOAT : ({st}, {st}) -> {bt}")
    less_im = lines(f"stablehlo.compare LT, {xi}, {yi}, FLOAT : ({st}, {st}) -> {bt}")
    tie = lines(f"stablehlo.and {same}, {less_im} : {bt}")
    pred = lines(f"stablehlo.or {less}, {tie} : {bt}")
    e.lines.append(f'      "stablehlo.return"({pred}) : ({bt}) -> ()')
    e.lines.append(f"    }}) {{dimension = {key_aval.ndim - 1} : i64, is_stable = true}} : ({types}) -> ({types})")
    return tag


@_lowers(sem.eigvals)
def _eigvals(e: _Emitter, ins: Instruction) -> None:
    lines, av = _Lines(e, ins), e.arg_aval(ins, 0)
    re, im, _ = _geev(lines, e.arg(ins, 0), av)
    out = e.avals[ins.outputs[0]]
    key = out.with_dtype(real_dtype(out.dtype))
    srt = _sort_by_keys(lines, re, im, key, [])
    lines.last(f"stablehlo.complex {srt}#0, {srt}#1 : {tensor_type(out)}")


@_lowers(sem.eig_vectors)
def _eig_vectors(e: _Emitter, ins: Instruction) -> None:
    lines, av = _Lines(e, ins), e.arg_aval(ins, 0)
    out = e.avals[ins.outputs[0]]
    re, im, v = _geev(lines, e.arg(ins, 0), av)
    r, lead, n = av.ndim, av.shape[:-2], av.shape[-1]
    kv = Aval(lead + (n,), real_dtype(out.dtype))
    key = out.with_dtype(kv.dtype)
    row_dims = _ints(tuple(range(r - 2)) + (r - 1,))
    keys = [lines(f"stablehlo.broadcast_in_dim {k}, dims = {row_dims} : ({tensor_type(kv)}) -> {tensor_type(key)}")
            for k in (re, im)]
    srt = _sort_by_keys(lines, keys[0], keys[1], key, [(v, out)])
    v = f"{srt}#2"
    # the gauge: the first largest-magnitude component of each column real and positive
    t, kt, bt = tensor_type(out), tensor_type(key), tensor_type(Aval(out.shape, "bool"))
    mag = lines(f"stablehlo.abs {v} : ({t}) -> {kt}")
    scalar = tensor_type(Aval((), key.dtype))
    low = lines(f"stablehlo.constant {_scalar_literal(0, key.dtype)} : {scalar}")
    top = lines(f"stablehlo.reduce({mag} init: {low}) applies stablehlo.maximum across dimensions = [{r - 2}] : "
                f"({kt}, {scalar}) -> {tensor_type(kv)}")
    topb = lines(f"stablehlo.broadcast_in_dim {top}, dims = {row_dims} : ({tensor_type(kv)}) -> {kt}")
    is_top = lines(f"stablehlo.compare EQ, {mag}, {topb}, FLOAT : ({kt}, {kt}) -> {bt}")
    iv = Aval(out.shape, "int32")
    it, ikt = tensor_type(iv), tensor_type(Aval(lead + (n,), "int32"))
    rows = lines(f"stablehlo.iota dim = {r - 2} : {it}")
    cand = lines(f"stablehlo.select {is_top}, {rows}, {_splat(lines, n, iv)} : {bt}, {it}")
    big = lines(f"stablehlo.constant dense<{n}> : tensor<i32>")
    first = lines(f"stablehlo.reduce({cand} init: {big}) applies stablehlo.minimum across dimensions = [{r - 2}] : "
                  f"({it}, tensor<i32>) -> {ikt}")
    firstb = lines(f"stablehlo.broadcast_in_dim {first}, dims = {row_dims} : ({ikt}) -> {it}")
    at = lines(f"stablehlo.compare EQ, {rows}, {firstb}, SIGNED : ({it}, {it}) -> {bt}")
    picked = lines(f"stablehlo.select {at}, {v}, {_splat(lines, 0, out)} : {bt}, {t}")
    zero = lines(f"stablehlo.constant {_scalar_literal(0, out.dtype)} : {tensor_type(Aval((), out.dtype))}")
    cv = out.with_shape(lead + (n,))
    comp = lines(f"stablehlo.reduce({picked} init: {zero}) applies stablehlo.add across dimensions = [{r - 2}] : "
                 f"({t}, {tensor_type(Aval((), out.dtype))}) -> {tensor_type(cv)}")
    size = lines(f"stablehlo.abs {comp} : ({tensor_type(cv)}) -> {tensor_type(kv)}")
    is0 = lines(f"stablehlo.compare EQ, {size}, {_splat(lines, 0, kv)}, FLOAT : ({tensor_type(kv)}, "
                f"{tensor_type(kv)}) -> {tensor_type(Aval(kv.shape, 'bool'))}")
    safe = lines(f"stablehlo.select {is0}, {_splat(lines, 1, kv)}, {size} : {tensor_type(Aval(kv.shape, 'bool'))}, "
                 f"{tensor_type(kv)}")
    safe = lines(f"stablehlo.complex {safe}, {_splat(lines, 0, kv)} : {tensor_type(cv)}")
    phase = lines(f"stablehlo.divide {_conj_of(lines, comp, cv)}, {safe} : {tensor_type(cv)}")
    phase = lines(f"stablehlo.select {is0}, {_splat(lines, 1, cv)}, {phase} : {tensor_type(Aval(kv.shape, 'bool'))}, "
                  f"{tensor_type(cv)}")
    full = lines(f"stablehlo.broadcast_in_dim {phase}, dims = {row_dims} : ({tensor_type(cv)}) -> {t}")
    lines.last(f"stablehlo.multiply {v}, {full} : {t}")


# --- discrete Fourier transforms (rules/fft.rules) ----------------------------------------
# stablehlo.fft over the trailing axes; its FFT and RFFT are unscaled, its IFFT and IRFFT
# scaled by 1/N (numpy.fft's "backward"): the other norms multiply by a constant after it.


def _fft_lowering(fft_type: str) -> Lowering:
    inverse = fft_type in ("IFFT", "IRFFT")

    def lower(e: _Emitter, ins: Instruction) -> None:
        lengths, norm = tuple(ins.attrs["fft_lengths"]), ins.attrs["norm"]
        size = math.prod(lengths)
        scale = {"backward": 1.0, "ortho": math.sqrt(size) if inverse else 1 / math.sqrt(size),
                 "forward": float(size) if inverse else 1 / size}[norm]
        text = f"stablehlo.fft {e.arg(ins, 0)}, type = {fft_type}, length = {_ints(lengths)} : {e.sig(ins)}"
        if scale == 1.0:
            e.emit(ins, text)
            return
        lines = _Lines(e, ins)
        out = e.avals[ins.outputs[0]]
        y = lines(text)
        factor = _splat(lines, scale, out)
        lines.last(f"stablehlo.multiply {y}, {factor} : {tensor_type(out)}")

    return lower


_lowers(sem.fft)(_fft_lowering("FFT"))
_lowers(sem.ifft)(_fft_lowering("IFFT"))
_lowers(sem.rfft)(_fft_lowering("RFFT"))
_lowers(sem.irfft)(_fft_lowering("IRFFT"))


# --- convolution (rules/conv.rules) ------------------------------------------------------
# stablehlo.convolution in the primitive's one layout: [b, f, 0, ..]x[o, i, 0, ..]->[b, f, 0, ..].


@_lowers(sem.conv)
def _conv(e: _Emitter, ins: Instruction) -> None:
    a = ins.attrs
    axes = ", ".join(str(i) for i in range(len(a["window_strides"])))
    pad = "[" + ", ".join(f"[{int(lo)}, {int(hi)}]" for lo, hi in a["padding"]) + "]"
    e.emit(ins, f"stablehlo.convolution({e.arg(ins, 0)}, {e.arg(ins, 1)}) "
                f"dim_numbers = [b, f, {axes}]x[o, i, {axes}]->[b, f, {axes}], "
                f"window = {{stride = {_ints(a['window_strides'])}, pad = {pad}, "
                f"lhs_dilate = {_ints(a['lhs_dilation'])}, rhs_dilate = {_ints(a['rhs_dilation'])}}} "
                f"{{batch_group_count = {int(a['batch_group_count'])} : i64, "
                f"feature_group_count = {int(a['feature_group_count'])} : i64}} : {e.sig(ins)}")


# --- rule-defined primitives (a rule file's stablehlo clause, or its meaning) -------------


class LoweringError(NotImplementedError):
    """The program uses an op this back end cannot lower."""


def _clause_op(e: _Emitter, ins: Instruction, name: str, prim: Primitive) -> None:
    """The op a ``stablehlo`` clause names, in MLIR's generic form (any op, no attributes)."""
    if ins.attrs:
        raise LoweringError(f"{prim.loc}: {prim.name} has attributes, which a stablehlo clause cannot pass")
    out = e.avals[ins.outputs[0]]
    if (prim.builtin and name in _WIDENED_CHLO and out.dtype in ("float16", "bfloat16", "float32")
            and e.platform != "tpu"):  # TPUs have no float64
        # XLA's float32 lgamma loses most digits next to its roots 1 and 2 (lgamma(1) is not
        # 0); its float64 one, rounded once, is right there
        wide = out.with_dtype("float64")
        t_w, t = tensor_type(wide), tensor_type(out)
        args = [e.emit(ins, f"stablehlo.convert {e.arg(ins, i)} : ({e.arg_type(ins, i)}) -> {t_w}", f"wide{i}")
                for i in range(len(ins.inputs))]
        value = e.emit(ins, f'"{name}"({", ".join(args)}) : ({", ".join([t_w] * len(args))}) -> {t_w}', "f64")
        e.emit(ins, f"stablehlo.convert {value} : ({t_w}) -> {t}")
        return
    args = ", ".join(e.arg(ins, i) for i in range(len(ins.inputs)))
    e.emit(ins, f'"{name}"({args}) : {e.sig(ins)}')


# CHLO ops whose 2- and 4-byte float lowering XLA gets wrong by far more than rounding:
# computed in float64 and rounded once
_WIDENED_CHLO = frozenset({"chlo.lgamma"})


def _decomposed(e: _Emitter, ins: Instruction, prim: Primitive, cat: Catalog) -> None:
    """The primitive's meaning as catalog ops, each lowered as such; numbers are splat
    constants of a sibling operand's type (of the result's when they have none)."""
    ops = function_primitives(cat)
    out_aval = e.avals[ins.outputs[0]]
    env = {name: ins.inputs[i] for i, name in enumerate(prim.operands)}
    e.lines.append(f"    // {e.prefix}{ins.outputs[0]} = {prim.name}: its meaning ({prim.loc}) in catalog ops")

    def new_slot(aval: Aval) -> int:
        e.avals.append(aval)
        return len(e.avals) - 1

    def constant(value: complex | float | int, aval: Aval) -> int:
        if isinstance(value, complex) and not is_complex(aval.dtype):
            raise LoweringError(f"{prim.loc}: the meaning of {prim.name} has a complex number in a real context")
        slot = new_slot(aval)
        lit = Instruction("constant", Attrs({"value": Literal(np.full(aval.shape, value, dtype=aval.dtype))}),
                          (), (slot,))
        _constant(e, lit)
        return slot

    def build(node: Expr) -> int | tuple[complex | float | int]:  # a slot, or (a number,)
        if isinstance(node, Num):
            return (node.value,)
        if isinstance(node, Var):
            return env[node.name]
        assert isinstance(node, Call)  # meanings are tiny: recursion is fine
        op = node.fn if node.fn in ("add", "sub", "mul", "div", "neg", "pow") else ops.get(node.fn)
        if op is None or (cat[op].numpy_fn not in _LOWERINGS and cat[op].stablehlo_op is None):
            raise LoweringError(f"{prim.loc}: no StableHLO lowering for {prim.name}: its meaning calls {node.fn}, "
                                "which no lowerable catalog primitive means; give it a 'stablehlo' clause naming "
                                "the op (e.g. stablehlo.atan2, chlo.erf)")
        args = [build(a) for a in node.args]
        sibling = next((e.avals[a] for a in args if isinstance(a, int)), out_aval)
        slots = tuple(a if isinstance(a, int) else constant(a[0], sibling) for a in args)
        (aval,) = cat[op].infer([e.avals[a] for a in slots], Attrs({}))
        step = Instruction(op, Attrs({}), slots, (new_slot(aval),))
        _lower(e, step, cat)
        return step.outputs[0]

    try:
        meaning = meaning_in_primitives(prim, cat)
    except RuleSyntaxError as err:
        raise LoweringError(f"no StableHLO lowering for {prim.name}: {err}") from None
    result = build(meaning)
    if not isinstance(result, int):
        result = constant(result[0], out_aval)
    if e.avals[result] != out_aval:
        raise LoweringError(f"{prim.loc}: the meaning of {prim.name} gives {e.avals[result]}, "
                            f"the primitive {out_aval}")
    e.names[ins.outputs[0]] = e.names[result]


def _lower(e: _Emitter, ins: Instruction, cat: Catalog) -> None:
    """Emit ``ins``: a structural op by its lowering here, a built-in elementwise one by
    its rule block's ``stablehlo`` op, a user's primitive by its clause or its meaning."""
    prim = cat.get(ins.op)
    if prim is None and ins.op in control.CONTROL_OPS:
        _control(e, ins, cat)
        return
    if prim is None:
        raise LoweringError(f"no StableHLO lowering for op {ins.op!r}: it is not in the catalog")
    lower = _LOWERINGS.get(prim.numpy_fn)  # type: ignore[arg-type]
    if lower is not None:
        lower(e, ins)
        return
    if prim.builtin and prim.stablehlo_op in _COMPLEX_EXPANDED and is_complex(e.arg_aval(ins, 0).dtype):
        _COMPLEX_EXPANDED[prim.stablehlo_op](e, ins)
        return
    # CHLO ops have no short syntax: a built-in primitive naming one is written generically
    if prim.stablehlo_op is not None and prim.builtin and prim.stablehlo_op.startswith("stablehlo."):
        _elementwise(e, ins, prim.stablehlo_op)
    elif prim.stablehlo_op is not None:
        _clause_op(e, ins, prim.stablehlo_op, prim)
    elif prim.decl.meaning is not None and not prim.variadic:
        _decomposed(e, ins, prim, cat)
    else:
        raise LoweringError(f"{prim.loc}: no StableHLO lowering for {prim.name}: give it a 'stablehlo' clause "
                            "or a meaning written with catalog functions")


# --- control flow (tidu.ops.control) --------------------------------------------------
# A control-flow op is one node per result (siblings): the first one met emits the op with
# every result (``%r<slot>:<n>``), each sibling names its own (``%r<slot>#<index>``). The
# bodies are lowered into the op's regions with names of their own. Loops carry every
# value they read (consts and xs too), as XLA's while takes one tuple.


def _control(e: _Emitter, ins: Instruction, cat: Catalog) -> None:
    shared = control.without_index(ins.attrs)
    key = (ins.op, shared, ins.inputs)
    groups = e.__dict__.setdefault("control_groups", {})
    results = groups.get(key)
    if results is None:
        results = groups[key] = _CONTROL_LOWERINGS[ins.op](e, ins, shared, cat)
    e.names[ins.outputs[0]] = results[ins.attrs["index"]]


def _region_body(e: _Emitter, body: Body, args: list[str], cat: Catalog) -> tuple[list[str], list[str]]:
    """``body`` lowered on the values named ``args``: its lines and its results' names."""
    program = from_graph(body.graph, cat)
    e.counter[0] += 1
    sub = _Emitter(program, f"%b{e.counter[0]}_", e.counter)
    sub.platform, sub.jax_kernels, sub.functions = e.platform, e.jax_kernels, e.functions
    for slot, name in zip(program.input_slots, args, strict=True):
        sub.names[slot] = name
    for step in program.instructions:
        _lower(sub, step, cat)
    return sub.lines, [sub.names[s] for s in program.output_slots]


def _block(params: list[tuple[str, Aval]]) -> str:
    return "  ^bb0(" + ", ".join(f"{n}: {tensor_type(a)}" for n, a in params) + "):"


def _ret(names: list[str], avals: list[Aval]) -> str:
    return (f'      "stablehlo.return"({", ".join(names)}) : '
            f'({", ".join(tensor_type(a) for a in avals)}) -> ()')


def _indent(lines: list[str]) -> list[str]:
    return ["  " + line for line in lines]


def _multi(e: _Emitter, ins: Instruction, op: str, operands: list[str], in_avals: list[Aval],
           regions: list[list[str]], out_avals: list[Aval], attrs: str = "") -> list[str]:
    # (a body's loops carry its prefix: a region sees the names around it, which it must not redefine)
    name = f"%r{ins.outputs[0]}" if e.prefix == "%s" else f"{e.prefix}r{ins.outputs[0]}"
    head = f'    {name}:{len(out_avals)} = "{op}"({", ".join(operands)}) ({{' if len(out_avals) > 1 else \
        f'    {name} = "{op}"({", ".join(operands)}) ({{'
    e.lines.append(head)
    for k, region in enumerate(regions):
        e.lines.extend(region)
        e.lines.append("    }, {" if k < len(regions) - 1 else "    })" + attrs + " : ("
                       + ", ".join(tensor_type(a) for a in in_avals) + ") -> ("
                       + ", ".join(tensor_type(a) for a in out_avals) + ")")
    if len(out_avals) == 1:
        return [name]
    return [f"{name}#{k}" for k in range(len(out_avals))]


def _cond(e: _Emitter, ins: Instruction, attrs: Attrs, cat: Catalog) -> list[str]:
    operands = [e.names[s] for s in ins.inputs[1:]]
    regions = []
    for b in attrs["branches"]:
        lines, outs = _region_body(e, b, operands, cat)
        regions.append(_indent(lines) + [_ret(outs, list(b.out_avals))])
    out_avals = list(attrs["branches"][0].out_avals)
    # stablehlo.case runs its last branch for an index out of range; tidu's (and JAX's)
    # switch clamps the index into [0, n - 1], so a negative one selects the first branch
    index, index_aval = e.names[ins.inputs[0]], e.avals[ins.inputs[0]]
    t = tensor_type(index_aval)
    low = e.emit(ins, f"stablehlo.constant dense<0> : {t}", "low")
    high = e.emit(ins, f"stablehlo.constant dense<{len(regions) - 1}> : {t}", "high")
    index = e.emit(ins, f"stablehlo.clamp {low}, {index}, {high} : {t}", "index")
    return _multi(e, ins, "stablehlo.case", [index], [index_aval], regions, out_avals)


def _while(e: _Emitter, ins: Instruction, attrs: Attrs, cat: Catalog) -> list[str]:
    ncc, nbc = attrs["n_cond_consts"], attrs["n_body_consts"]
    avals = [e.avals[s] for s in ins.inputs]
    e.counter[0] += 1
    args = [f"%w{e.counter[0]}_{k}" for k in range(len(avals))]
    params = list(zip(args, avals, strict=True))
    c_lines, (pred,) = _region_body(e, attrs["cond_body"], [*args[:ncc], *args[ncc + nbc:]], cat)
    b_lines, new = _region_body(e, attrs["body"], args[ncc:], cat)
    regions = [[_block(params), *_indent(c_lines), _ret([pred], [Aval((), "bool")])],
               [_block(params), *_indent(b_lines), _ret([*args[:ncc + nbc], *new], avals)]]
    res = _multi(e, ins, "stablehlo.while", [e.names[s] for s in ins.inputs], avals, regions, avals)
    return res[ncc + nbc:]  # the loop carries its consts too


def _scan(e: _Emitter, ins: Instruction, attrs: Attrs, cat: Catalog) -> list[str]:
    body: Body = attrs["body"]
    nc, nk, length = attrs["n_consts"], attrs["n_carry"], attrs["length"]
    avals = [e.avals[s] for s in ins.inputs]
    consts, carries, xs = avals[:nc], avals[nc:nc + nk], avals[nc + nk:]
    y_avals = control.result_avals("scan", control.with_index(attrs, 0))[nk:]
    counter = Aval((), "int64")
    loop_avals = [counter, *consts, *xs, *carries, *y_avals]
    e.counter[0] += 1
    w = f"%w{e.counter[0]}_"
    if length == 0:  # no step (and no x slice to read): the carries as they are, empty ys
        ys = []
        for k, a in enumerate(y_avals):
            e.lines.append(f"    {w}y0_{k} = stablehlo.constant {dense_literal(np.zeros((), a.dtype))} : "
                           f"{tensor_type(a)}")
            ys.append(f"{w}y0_{k}")
        return [*(e.names[s] for s in ins.inputs[nc:nc + nk]), *ys]
    args = [f"{w}{k}" for k in range(len(loop_avals))]
    i, c_args = args[0], args[1:1 + nc]
    x_args, k_args = args[1 + nc:1 + nc + len(xs)], args[1 + nc + len(xs):1 + nc + len(xs) + nk]
    y_args = args[1 + nc + len(xs) + nk:]
    it = tensor_type(counter)
    params = list(zip(args, loop_avals, strict=True))
    cond_region = [_block(params),
                   f"      {w}n = stablehlo.constant dense<{length}> : {it}",
                   f"      {w}p = stablehlo.compare LT, {i}, {w}n, SIGNED : ({it}, {it}) -> tensor<i1>",
                   _ret([f"{w}p"], [Aval((), "bool")])]
    lines = [f"    {w}zero = stablehlo.constant dense<0> : {it}",
             f"    {w}one = stablehlo.constant dense<1> : {it}",
             f"    {w}next = stablehlo.add {i}, {w}one : {it}"]
    step = i
    if attrs["reverse"]:
        lines += [f"    {w}last = stablehlo.constant dense<{length - 1}> : {it}",
                  f"    {w}j = stablehlo.subtract {w}last, {i} : {it}"]
        step = f"{w}j"
    slices = []
    for k, (name, a) in enumerate(zip(x_args, xs, strict=True)):
        one = Aval((1, *a.shape[1:]), a.dtype)
        starts = ", ".join([step] + [f"{w}zero"] * (a.ndim - 1))
        sizes = ", ".join(str(d) for d in one.shape)
        lines += [f'    {w}xs{k} = "stablehlo.dynamic_slice"({name}, {starts}) '
                  f'{{slice_sizes = array<i64: {sizes}>}} : ({tensor_type(a)}, {", ".join([it] * a.ndim)}) '
                  f'-> {tensor_type(one)}',
                  f"    {w}x{k} = stablehlo.reshape {w}xs{k} : ({tensor_type(one)}) -> "
                  f"{tensor_type(Aval(a.shape[1:], a.dtype))}"]
        slices.append(f"{w}x{k}")
    b_lines, outs = _region_body(e, body, [*c_args, *k_args, *slices], cat)
    lines += b_lines
    new_ys = []
    for k, (name, a) in enumerate(zip(y_args, y_avals, strict=True)):
        one = Aval((1, *a.shape[1:]), a.dtype)
        starts = ", ".join([step] + [f"{w}zero"] * (a.ndim - 1))
        lines += [f"    {w}yr{k} = stablehlo.reshape {outs[nk + k]} : "
                  f"({tensor_type(Aval(a.shape[1:], a.dtype))}) -> {tensor_type(one)}",
                  f'    {w}y{k} = "stablehlo.dynamic_update_slice"({name}, {w}yr{k}, {starts}) : '
                  f'({tensor_type(a)}, {tensor_type(one)}, {", ".join([it] * a.ndim)}) -> {tensor_type(a)}']
        new_ys.append(f"{w}y{k}")
    body_region = [_block(params), *_indent(lines),
                   _ret([f"{w}next", *c_args, *x_args, *outs[:nk], *new_ys], loop_avals)]
    # the initial values: the counter, and zeros for the stacked ys
    e.lines.append(f"    {w}i0 = stablehlo.constant dense<0> : {it}")
    inits = [f"{w}i0", *(e.names[s] for s in ins.inputs[:nc]), *(e.names[s] for s in ins.inputs[nc + nk:]),
             *(e.names[s] for s in ins.inputs[nc:nc + nk])]
    for k, a in enumerate(y_avals):
        e.lines.append(f"    {w}y0_{k} = stablehlo.constant {dense_literal(np.zeros((), a.dtype))} : {tensor_type(a)}")
        inits.append(f"{w}y0_{k}")
    res = _multi(e, ins, "stablehlo.while", inits, loop_avals, [cond_region, body_region], loop_avals)
    return res[1 + nc + len(xs):]  # the loop carries its counter, consts and xs too


_CONTROL_LOWERINGS = {"scan": _scan, "cond": _cond, "while": _while}


# --- the module -----------------------------------------------------------------------


def _signature(program: SSAProgram) -> tuple[str, str]:
    args = ", ".join(f"%s{s}: {tensor_type(program.slot_avals[s])}" for s in program.input_slots)
    results = [tensor_type(program.slot_avals[s]) for s in program.output_slots]
    ret = results[0] if len(results) == 1 else "(" + ", ".join(results) + ")"
    return args, ret


def to_stablehlo(program: SSAProgram, platform: str = "cpu", jax_kernels: bool | None = None) -> str:
    """A StableHLO module (MLIR text) computing ``program`` on ``platform`` ("cpu",
    "cuda", "rocm", "tpu": what linear algebra becomes depends on it); deterministic.
    ``jax_kernels``: linear algebra as JAX lowers it for the platform (the vendor's
    solvers; needs jax); by default everywhere but the CPU, where XLA's runtime has the
    LAPACK routines tidu calls itself."""
    if platform not in ("cpu", "cuda", "rocm", "tpu"):
        raise ValueError(f"unknown platform {platform!r}; use 'cpu', 'cuda', 'rocm' or 'tpu'")
    e = _Emitter(program)
    e.platform = platform
    e.jax_kernels = platform != "cpu" if jax_kernels is None else jax_kernels
    cat = program.catalog if program.catalog is not None else catalog()
    for ins in program.instructions:
        if len(ins.outputs) != 1:
            raise LoweringError(f"{ins.op}: expected one output, got {len(ins.outputs)}")
        _lower(e, ins, cat)
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
        *(e.functions[name] for name in sorted(e.functions)),
        "}",
        "",
    ])


__all__ = ["LoweringError", "dense_literal", "tensor_type", "to_stablehlo"]
