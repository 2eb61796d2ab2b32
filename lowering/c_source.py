"""C lowering: a compiled ``Program`` becomes one self-contained C99 source file.

The file defines one function (``ENTRY``, documented in the comment at its top)::

    int tidu_program(const double *restrict in0, ..., double *restrict out0, ..., void *work);

Inputs and outputs are one pointer each, in program order (``program.input_slots``,
``program.output_slots``), every array row-major and contiguous, a scalar a pointer to
one element. ``work`` is scratch memory of ``tidu_program_work_bytes()`` bytes (aligned
to 64), or NULL: then the function allocates it. It needs libm only (and ``<complex.h>``
when the program has complex values).

How instructions become C:

- **Fused loops.** Elementwise instructions over one shape are one loop over the
  elements: each computes a scalar temporary (``const double t7 = exp(t5);``), and only
  values read elsewhere (by another loop, through a view, or as an output) are stored.
  A reduction whose operand has that shape accumulates inside the same loop.
  Instructions join a loop when all they read is ready before it; one reads a value of a
  loop still open other than at the same element (through a broadcast or transpose, or
  a reduction's result) closes that loop first.
- **Views cost nothing.** ``broadcast_in_dim``, ``reshape``, ``transpose``, ``reverse``,
  ``slice`` and ``pad`` are index arithmetic in the reads of whoever uses them (a pad a
  conditional read), never copies; constants whose elements are all equal are
  literals, and the identities and shifted identities of derivative seeds are a
  comparison of indices; other constants are ``static const`` arrays, spelled with hex
  float literals (``%a``), so every value round-trips bit for bit (inf as ``INFINITY``;
  a NaN keeps its sign, not its payload).
- **Regions.** A loop of rank >= 2 whose stored values are known constants off a few
  diagonals ``i_p - i_q == k`` (identity masks, shifted and padded: ``c_regions``) runs on
  those lines only, under a run-time check that the arrays the proof needs are finite
  (``inf * 0`` is nan), else as one dense loop. Off the lines, an output gets the
  constant (skipped for ``tidu_program_zeroed``, whose caller passes zeroed outputs); a
  scratch value is stored as bands, one vector per line (``c_bands``), and the dense
  loop writes a full array: readers know which from the check.
- ``dot_general`` (``c_dot``): blocked loops with register accumulators, or a loop over
  the nonzeros of a sparse constant operand; without contracting axes it is an outer
  product, read lazily like a view. ``concatenate`` is a plain loop into its own array.
- An elementwise primitive is spelled as its rule block's ``c`` clause says: ``c exp``
  names a C99 libm function by its double name (``expf``, ``cexp``, ``cexpf`` for the
  other dtypes) or one of the helpers here (``abs``, ``sign``, ``maximum``, ...),
  ``c meaning`` writes its meaning with C operators; ``compare``, ``select`` and
  ``convert`` are spelled here (keyed by their kernels, as the other lowerings do).
- Control flow (``scan``, ``cond``, ``while``) and primitives without a ``c`` clause
  (linear algebra, a user primitive without one) have no C lowering: ``to_c`` raises
  ``CLoweringError`` naming every one of them.

The text is a function of the program alone (same program, byte-identical text).
Compiled with ``tidu.lowering.c_build.CFLAGS`` (``-ffp-contract=off``: no fused
multiply-adds; ``-fwrapv``: integers wrap as in NumPy), results equal NumPy's to
rounding: libm's transcendental functions and the order of sums (NumPy sums pairwise,
the C loops in index order) differ in the last bits.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tidu.lowering import c_dot, c_regions
from tidu.lowering.c_bands import Band
from tidu.lowering.c_index import Index, NeedNest, lin, reshaped, strides
from tidu.lowering.c_regions import Finite, Known, Lines, Value
from tidu.lowering.ssa import Instruction, SSAProgram

from tidu.core.keys import Aval, is_complex, is_float, is_integer, real_dtype
from tidu.ops import control
from tidu.ops import reference as sem
from tidu.ops.catalog import Catalog, Primitive, catalog
from tidu.ops.dsl.ast import Call, Expr, Num, RuleSyntaxError, Var
from tidu.ops.kernels import function_primitives, meaning_in_primitives

ENTRY = "tidu_program"
C_TYPES = {"bool": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
           "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
           "float32": "float", "float64": "double",
           "complex64": "float complex", "complex128": "double complex"}
ALIGN = 64  # bytes: each scratch array starts on a cache line


class CLoweringError(NotImplementedError):
    """The program uses an op the C back end cannot lower; the message names them."""


# --- literals ---------------------------------------------------------------------------


def _float_literal(x: float, dtype: str) -> str:
    """Exact C spelling of a float32/float64 value: a hex float (``%a``)."""
    suffix = "f" if dtype == "float32" else ""
    if math.isnan(x):
        return "(-NAN)" if math.copysign(1.0, x) < 0 else "NAN"
    if math.isinf(x):
        return "INFINITY" if x > 0 else "(-INFINITY)"
    if x == 0:
        return f"-0.0{suffix}" if math.copysign(1.0, x) < 0 else f"0.0{suffix}"
    mantissa, _, exponent = float(x).hex().partition("p")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}p{exponent}{suffix}"


def _int_literal(v: int, dtype: str) -> str:
    if dtype.startswith("uint"):
        return f"{v}ULL" if dtype == "uint64" else f"{v}U"
    bits = 64 if dtype == "int64" else 32
    if v == -(1 << (bits - 1)):  # the lowest value has no literal of its own
        return f"(-{(1 << (bits - 1)) - 1}{'LL' if bits == 64 else ''} - 1)"
    return f"{v}LL" if bits == 64 else str(v)


def literal(value: Any, dtype: str) -> str:
    """A scalar of ``dtype`` as a C constant expression (complex: see ``_complex_literal``)."""
    if dtype == "bool":
        return "1" if bool(value) else "0"
    if is_integer(dtype):
        return _int_literal(int(value), dtype)
    return _float_literal(float(value), dtype)


def _parens(text: str) -> str:
    return f"({text})" if text.startswith("-") else text


# --- how a slot's elements are read -------------------------------------------------------


@dataclass
class _Scalar:
    """Every element is one C expression (a rank-0 value, a splat constant)."""

    expr: str


@dataclass
class _Buffer:
    """Elements in memory: ``name[offset + sum(strides * index)]`` (row-major)."""

    name: str
    shape: tuple[int, ...]


@dataclass
class _Diagonal:
    """A constant: ``value`` where the row index (flat over the first ``split`` axes)
    plus ``offset`` equals the column index (flat over the rest), ``zero`` elsewhere."""

    shape: tuple[int, ...]
    split: int
    offset: int
    value: str
    zero: str


@dataclass
class _View:
    """A view of another slot: ``parent`` read at ``to_parent(index)``."""

    parent: int
    to_parent: Callable[[Index], Index]


@dataclass
class _Outer:
    """A dot_general without contracting axes: ``lhs[b, p] * rhs[b, q]`` at ``[b, p, q]``."""

    lhs: int
    rhs: int
    lhs_axes: tuple[int, ...]  # the result axis each lhs axis reads
    rhs_axes: tuple[int, ...]


@dataclass
class _Pad:
    operand: int
    value: int
    low: tuple[int, ...]
    high: tuple[int, ...]
    interior: tuple[int, ...]
    operand_shape: tuple[int, ...]


# --- spelling elementwise ops ---------------------------------------------------------------

# C99 <math.h> functions a ``c`` clause may name (double names; float32 takes the f
# suffix) and their arity; those of <complex.h> (c prefix) for complex operands
_LIBM = {**dict.fromkeys(("exp", "log", "expm1", "log1p", "exp2", "log2", "log10", "sin", "cos", "tan", "sinh",
                          "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "sqrt", "cbrt", "erf",
                          "erfc", "lgamma", "tgamma", "floor", "ceil", "rint", "trunc", "round", "fabs"), 1),
         **dict.fromkeys(("fmod", "pow", "atan2", "hypot", "copysign"), 2)}
_CLIBM = {"exp", "log", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh",
          "atanh", "sqrt", "pow"}
# the helpers this module spells itself (NumPy's semantics where libm has none), arity
HELPERS = {"abs": 1, "sign": 1, "maximum": 2, "minimum": 2, "conj": 1, "real": 1, "imag": 1, "complex": 2, "rem": 2,
           "bitwise_and": 2, "bitwise_or": 2, "bitwise_xor": 2, "bitwise_not": 1, "shift_left": 2,
           "shift_right_logical": 2, "shift_right_arithmetic": 2, "bitcast": 1}
C_FUNCTIONS = tuple(sorted({*_LIBM, *HELPERS}))

# helper functions written into the file where a spelling needs one (complex only)
_HELPER_CODE = {
    "tidu_complex": "static inline {C} tidu_complex{S}({R} re, {R} im) {{\n"
                    "    union {{ {C} z; {R} p[2]; }} u;\n    u.p[0] = re;\n    u.p[1] = im;\n    return u.z;\n}}",
    "tidu_csign": "static inline {C} tidu_csign{S}({C} z) {{\n    {R} a = cabs{F}(z);\n"
                  "    return a == 0 ? ({C})0 : z / a;\n}}",
    # NumPy's complex expm1 and log1p (npymath): libm has no complex ones
    "tidu_cexpm1": "static inline {C} tidu_cexpm1{S}({C} z) {{\n    {R} x = creal{F}(z), y = cimag{F}(z);\n"
                   "    {R} h = sin{F}(y / 2);\n"
                   "    return tidu_complex{S}(expm1{F}(x) * cos{F}(y) - 2 * h * h, exp{F}(x) * sin{F}(y));\n}}",
    # NumPy's complex power at zero exponent and zero base; cpow (exp(w log z)) gives nan for
    # 0 ** 0 (log 0 is -inf) and inf + nan*j for 0 ** -1
    "tidu_cpow": "static inline {C} tidu_cpow{S}({C} z, {C} w) {{\n"
                 "    if (creal{F}(w) == 0 && cimag{F}(w) == 0) return tidu_complex{S}(1, 0);\n"
                 "    if (creal{F}(z) == 0 && cimag{F}(z) == 0)\n"
                 "        return creal{F}(w) > 0 ? tidu_complex{S}(0, 0) : tidu_complex{S}(NAN, NAN);\n"
                 "    return cpow{F}(z, w);\n}}",
    # log|1 + z| as log1p(x (2 + x) + y^2) / 2 near 0: log(hypot(1 + x, y)) is log(1) = 0 there
    # (npymath's, NumPy's: log1p(1e-30 + 0j) gave 0)
    "tidu_clog1p": "static inline {C} tidu_clog1p{S}({C} z) {{\n    {R} x = creal{F}(z), y = cimag{F}(z);\n"
                   "    {R} re = (fabs{F}(x) < 0.5{L} && fabs{F}(y) < 0.5{L}) ? log1p{F}(x * (2 + x) + y * y) / 2\n"
                   "                                           : log{F}(hypot{F}(x + 1, y));\n"
                   "    return tidu_complex{S}(re, atan2{F}(y, x + 1));\n}}",
}
_HELPER_NEEDS = {"tidu_cexpm1": "tidu_complex", "tidu_clog1p": "tidu_complex", "tidu_cpow": "tidu_complex"}


class _Spelling:
    """C expressions for elementwise ops on simple operands (names or literals), and the
    helper functions they need (written into the file in order of first use)."""

    def __init__(self, cat: Catalog) -> None:
        self.cat = cat
        self.helpers: dict[str, str] = {}
        self._fns: dict[str, str] | None = None

    def helper(self, name: str, dtype: str) -> str:
        """The name of helper ``name`` for complex ``dtype``, its code added once."""
        real = real_dtype(dtype)
        suffix = "f" if dtype == "complex64" else ""
        full = name + suffix
        if full not in self.helpers:
            if name in _HELPER_NEEDS:
                self.helper(_HELPER_NEEDS[name], dtype)
            self.helpers[full] = _HELPER_CODE[name].format(C=C_TYPES[dtype], R=C_TYPES[real], S=suffix, F=suffix,
                                                           L=suffix)
        return full

    def function(self, name: str, args: list[str], dtypes: list[str], out: str, prim: Primitive) -> str:
        """``name`` (a ``c`` clause's function) applied to ``args``."""
        arity = _LIBM.get(name, HELPERS.get(name))
        if arity is None:
            raise CLoweringError(f"{prim.loc}: c {name}: not a C function the C back end knows; use one of "
                                 f"{', '.join(C_FUNCTIONS)}, or 'c meaning'")
        if arity != len(args):
            raise CLoweringError(f"{prim.loc}: c {name} takes {arity} operand(s), {prim.name} has {len(args)}")
        dtype = dtypes[0]
        a = args
        if name in HELPERS:
            return self._helper_op(name, a, dtype, out)
        if dtype in ("float32", "float64"):
            return f"{name}{'f' if dtype == 'float32' else ''}({', '.join(a)})"
        if is_complex(dtype):
            suffix = "f" if dtype == "complex64" else ""
            if name == "pow":
                return f"{self.helper('tidu_cpow', dtype)}({a[0]}, {a[1]})"
            if name in _CLIBM:
                return f"c{name}{suffix}({', '.join(a)})"
            if name in ("expm1", "log1p"):
                return f"{self.helper('tidu_c' + name, dtype)}({a[0]})"
        raise CLoweringError(f"{prim.loc}: c {name}: C has no {name} for {dtype} operands ({prim.name})")

    def _helper_op(self, name: str, a: list[str], dtype: str, out: str) -> str:
        t = C_TYPES[dtype]
        cplx = is_complex(dtype)
        f = "f" if dtype in ("float32", "complex64") else ""
        if name.startswith(("bitwise_", "shift_")):
            return _bitwise(name, a, dtype)
        if name == "bitcast":  # the bits read as the other member of a union (a compound literal)
            return f"((union {{ {t} from; {C_TYPES[out]} to; }}){{{a[0]}}}).to"
        if name == "abs":
            if cplx:
                return f"cabs{f}({a[0]})"
            return f"fabs{f}({a[0]})" if is_float(dtype) else f"({a[0]} < 0 ? -{a[0]} : {a[0]})"
        if name == "sign":
            if cplx:
                return f"{self.helper('tidu_csign', dtype)}({a[0]})"
            if is_float(dtype):  # nan stays nan, -0.0 gives 0.0 (NumPy's)
                return (f"({a[0]} > 0 ? ({t})1 : {a[0]} < 0 ? ({t})-1 : {a[0]} == 0 ? ({t})0 : {a[0]})")
            return f"(({t})(({a[0]} > 0) - ({a[0]} < 0)))"
        if name in ("maximum", "minimum"):
            op = ">" if name == "maximum" else "<"
            nan = f" || {a[0]} != {a[0]}" if is_float(dtype) else ""  # NumPy's propagate nan
            return f"(({a[0]} {op} {a[1]}{nan}) ? {a[0]} : {a[1]})"
        if name == "rem":  # fmod; for integers % (C's truncation), 0 where it is undefined (NumPy's)
            if is_float(dtype):
                return f"fmod{f}({a[0]}, {a[1]})"
            undefined = f"{a[1]} == 0" + (f" || {a[1]} == -1" if not dtype.startswith("uint") else "")
            return f"(({undefined}) ? ({t})0 : ({t})({a[0]} % {a[1]}))"
        if name == "conj":
            return f"conj{f}({a[0]})" if cplx else a[0]
        if name == "real":
            return f"creal{f}({a[0]})" if cplx else a[0]
        if name == "imag":
            return f"cimag{f}({a[0]})" if cplx else f"(({t})0)"
        # complex(re, im): parts placed, no arithmetic (inf and nan stay where they are)
        return f"{self.helper('tidu_complex', out)}({a[0]}, {a[1]})"

    def elementwise(self, prim: Primitive, args: list[str], dtypes: list[str], out: str) -> str:
        """``prim`` (which has a ``c`` clause) on ``args``."""
        name = prim.c_function
        assert name is not None
        if name != "meaning":
            return self.function(name, args, dtypes, out, prim)
        try:
            meaning = meaning_in_primitives(prim, self.cat)
        except RuleSyntaxError as err:
            raise CLoweringError(f"'c meaning' of {prim.name}: {err}") from None
        return self._meaning(prim, meaning, dict(zip(prim.operands, args, strict=True)), dtypes[0], out)

    def _meaning(self, prim: Primitive, e: Expr, env: dict[str, str], dtype: str, out: str) -> str:
        """A meaning in C: operators for arithmetic, a function by the primitive that
        means it (its ``c`` clause); numbers are constants of the operands' dtype."""
        if isinstance(e, Num):
            if isinstance(e.value, complex):
                if not is_complex(dtype):
                    raise CLoweringError(f"{prim.loc}: the meaning of {prim.name} has a complex number "
                                         "in a real context")
                return (f"{self.helper('tidu_complex', dtype)}({literal(e.value.real, real_dtype(dtype))}, "
                        f"{literal(e.value.imag, real_dtype(dtype))})")
            return f"(({C_TYPES[dtype]}){_parens(literal(e.value, real_dtype(dtype)))})"
        if isinstance(e, Var):
            return env[e.name]
        assert isinstance(e, Call)  # meanings are tiny: recursion is fine
        args = [self._meaning(prim, a, env, dtype, out) for a in e.args]
        ops = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
        if e.fn in ops:
            return f"({args[0]} {ops[e.fn]} {args[1]})"
        if e.fn == "neg":
            return f"(-{args[0]})"
        if e.fn == "pow":
            return self.function("pow", args, [dtype, dtype], dtype, prim)
        if self._fns is None:
            self._fns = function_primitives(self.cat)
        callee = self.cat.get(self._fns.get(e.fn, ""))
        if callee is None or callee is prim or callee.c_function is None:
            raise CLoweringError(f"{prim.loc}: 'c meaning' of {prim.name}: {e.fn} is not a primitive with a "
                                 "'c' clause")
        return self.elementwise(callee, args, [dtype] * len(args), dtype)


def _bitwise(name: str, a: list[str], dtype: str) -> str:
    """StableHLO's bitwise ops in C (the result cast back: C computes small integers as
    int); a shift amount is read as unsigned, and shifts by the width or more are defined."""
    t = C_TYPES[dtype]
    if dtype == "bool":
        if name == "bitwise_not":  # one operand: the two-operand spellings below would index a[1]
            return f"(!{a[0]})"
        return {"bitwise_and": f"({a[0]} && {a[1]})", "bitwise_or": f"({a[0]} || {a[1]})",
                "bitwise_xor": f"({a[0]} != {a[1]})"}[name]
    if name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        op = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"}[name]
        return f"(({t})({a[0]} {op} {a[1]}))"
    if name == "bitwise_not":
        return f"(({t})~{a[0]})"
    bits = 8 * np.dtype(dtype).itemsize
    u, s = f"uint{bits}_t", f"int{bits}_t"
    fits = f"((uint64_t)({u}){a[1]} < {bits})"
    if name == "shift_left":
        return f"({fits} ? ({t})(({u})((uint64_t)({u}){a[0]} << ({u}){a[1]})) : ({t})0)"
    if name == "shift_right_logical":
        return f"({fits} ? ({t})(({u}){a[0]} >> ({u}){a[1]}) : ({t})0)"
    # arithmetic: the signed value shifted (GCC and Clang shift negative values arithmetically)
    return f"(({t})(({s}){a[0]} >> ({fits} ? ({u}){a[1]} : {bits - 1})))"


def _convert(args: list[str], src: str, dst: str, spell: _Spelling | None = None) -> str:
    a = args[0]
    if is_complex(src) and not is_complex(dst):  # keeps the real part
        a = f"creal{'f' if src == 'complex64' else ''}({a})"
        src = real_dtype(src)
    if dst == "bool":
        return f"({a} != 0)"
    if is_float(src) and is_integer(dst) and spell is not None:
        # a float outside the integer's range (or nan) cast in C is undefined behaviour:
        # XLA's conversion (JAX's), nan to 0 and out-of-range values saturated
        name = f"tidu_{src}_to_{dst}"
        if name not in spell.helpers:
            spell.helpers[name] = _float_to_int_helper(name, src, dst)
        return f"{name}({a})"
    return f"(({C_TYPES[dst]}){a})"


def _float_to_int_helper(name: str, src: str, dst: str) -> str:
    """``name``: float ``src`` to integer ``dst`` truncated, nan to 0, saturated at the
    integer's bounds (XLA's ``convert``)."""
    info = np.iinfo(dst)
    bits = 8 * np.dtype(dst).itemsize
    hi = _float_literal(2.0 ** (bits if dst.startswith("uint") else bits - 1), src)
    lo = "0" if dst.startswith("uint") else _float_literal(-(2.0 ** (bits - 1)), src)
    t, f = C_TYPES[dst], C_TYPES[src]
    spelled = dst if bits >= 32 else "uint32" if dst.startswith("uint") else "int32"  # literals of int width
    low = "0" if dst.startswith("uint") else f"({t}){_int_literal(int(info.min), spelled)}"
    high = f"({t}){_int_literal(int(info.max), spelled)}"
    return (f"static inline {t} {name}({f} x) {{\n"
            f"    return x != x ? ({t})0 : x <= {lo} ? {low} : x >= {hi} ? {high} : ({t})x;\n}}")


# --- the emitter ------------------------------------------------------------------------

_VIEWS = {sem.broadcast_in_dim, sem.reshape, sem.transpose, sem.reverse, sem.slice_}
_REDUCTIONS = {sem.reduce_sum: "sum", sem.reduce_prod: "prod", sem.reduce_max: "max"}
_SPELLED_HERE = {sem.compare, sem.select, sem.convert}
_STANDALONE = {sem.dot_general, sem.concatenate, sem.dynamic_slice, sem.dynamic_update_slice}


def _kind(prim: Primitive | None, ins: Instruction, avals: list[Aval]) -> str | None:
    """How an instruction is lowered: constant, view, pad, reduce, elementwise,
    standalone; None: it has no C lowering."""
    if prim is None:
        return None
    fn = prim.numpy_fn
    if fn is sem.constant:
        return "constant"
    if fn in _VIEWS:
        return "view"
    if fn is sem.pad:
        return "pad"
    if fn in _REDUCTIONS:
        return "reduce" if ins.attrs["axes"] else "elementwise"  # no axes: the identity
    if fn is sem.dot_general and not ins.attrs["lhs_contract"] and avals[ins.outputs[0]].dtype != "bool":
        return "outer"  # one product per element: read lazily, like a view
    if fn in _STANDALONE:
        return "standalone"
    if fn in _SPELLED_HERE or prim.c_function is not None:
        out = avals[ins.outputs[0]]
        if all(avals[i].shape == out.shape for i in ins.inputs):
            return "elementwise"
    return None


def lowerable(prim: Primitive) -> bool:
    """Whether the C back end lowers ``prim`` (a structural kernel it knows, or a ``c`` clause)."""
    fn = prim.numpy_fn
    return (fn is sem.constant or fn is sem.pad or fn in _VIEWS or fn in _REDUCTIONS or fn in _STANDALONE
            or fn in _SPELLED_HERE or prim.c_function is not None)


def unsupported(program: SSAProgram) -> list[str]:
    """The ops of ``program`` without a C lowering, each once, with where they are declared."""
    cat = program.catalog if program.catalog is not None else catalog()
    missing: dict[str, str] = {}
    for ins in program.instructions:
        prim = cat.get(ins.op)
        if _kind(prim, ins, program.slot_avals) is None and ins.op not in missing:
            if prim is None:
                missing[ins.op] = f"{ins.op} (control flow)" if ins.op in control.CONTROL_OPS else ins.op
            else:
                missing[ins.op] = f"{ins.op} ({prim.loc}: no 'c' clause)"
    return list(missing.values())


@dataclass
class _Group:
    """One fused loop over ``shape``: elementwise instructions and reductions of it."""

    shape: tuple[int, ...]
    members: list[Instruction] = field(default_factory=list)
    slots: set[int] = field(default_factory=set)  # the members' outputs
    open: bool = True


class _Body:
    """The statements of one loop body, with the temporaries its reads made (each read
    of a slot at an index is made once)."""

    def __init__(self, index: Index, indent: str) -> None:
        self.index = index
        self.indent = indent
        self.lines: list[str] = []
        self.temps: dict[int, str] = {}  # slot -> temporary holding its element at `index`
        self.reads: dict[tuple, str] = {}
        self.n = 0


class _Emitter:
    def __init__(self, program: SSAProgram) -> None:
        self.p = program
        self.avals = program.slot_avals
        self.cat = program.catalog if program.catalog is not None else catalog()
        self.spell = _Spelling(self.cat)
        self.refs: dict[int, Any] = {}
        self.lazy: dict[int, tuple[int, ...]] = {}  # view/pad slot -> the slots it reads
        self.group_of: dict[int, _Group] = {}
        self.open: dict[tuple[int, ...], _Group] = {}
        self.groups: list[_Group] = []
        self.statics: list[str] = []
        self.lines: list[str] = []  # the function body
        self.body: _Body | None = None
        self.uses_complex = any(is_complex(a.dtype) for a in program.slot_avals)
        # scratch memory: offset allocation with reuse once every reader has run
        self.work_top = 0
        self.free: list[tuple[int, int]] = []  # (offset, size) blocks
        self.where: dict[int, list[tuple[int, int]]] = {}  # slot -> its blocks
        self.readers: dict[int, int] = {}
        self.outputs = {s: k for k, s in reversed(list(enumerate(program.output_slots)))}
        self.written: dict[int, int] = {}  # output position -> the slot written there in place
        self.users: dict[int, list[int]] = {}  # slot -> instructions (by id) reading it directly
        self.viewed: set[int] = set()  # slots read by a view or a pad
        self.kinds: dict[int, str] = {}
        self.views_of: dict[int, list[Instruction]] = {}
        self.transposed: dict[int, tuple[int, tuple[int, ...]]] = {}  # slot -> (output, perm) it is written to
        self.producer: dict[int, Instruction] = {}
        self.constant_values: dict[int, np.ndarray | None] = {}
        self.finite_flags: dict[int, str] = {}  # base slot -> C variable: all its elements finite
        self.facts: dict[int, Lines | None] = {}  # slot -> where it is a known constant (c_regions)
        self.bands: dict[int, Band] = {}  # scratch slot of a split loop -> its band storage (c_bands)
        self.region: tuple[int, int, int] | None = None  # (p, q, k): the loop runs on the line i_p - i_q == k
        # reads reached through a fact that holds here: band slot -> the line of it they are on
        self.trusted: dict[int, int] = {}
        self.uses_zeroed = False  # some output fill is skipped when the caller passes zeroed outputs

    # --- scratch memory ---

    def alloc(self, slot: int) -> str:
        """The array that will hold ``slot``: its output, else a block of scratch memory."""
        aval = self.avals[slot]
        k = self.outputs.get(slot)
        name = f"s{slot}"
        t = C_TYPES[aval.dtype]
        if k is not None and k not in self.written:
            self.written[k] = slot
            self.lines.append(f"    {t} *const {name} = out{k};")
        else:
            self.lines.append(f"    {t} *const {name} = ({t} *)(w + {self.block(slot, aval.size)});")
        self.refs[slot] = _Buffer(name, aval.shape)
        return name

    def block(self, slot: int, elements: int) -> int:
        """The offset of a fresh block of scratch memory for ``elements`` of ``slot``'s
        dtype, freed with ``slot``."""
        size = -(-max(elements, 1) * np.dtype(self.avals[slot].dtype).itemsize // ALIGN) * ALIGN
        for n, (off, sz) in enumerate(self.free):
            if sz >= size:
                self.free[n:n + 1] = [(off + size, sz - size)] if sz > size else []
                break
        else:
            off = self.work_top
            self.work_top += size
        self.where.setdefault(slot, []).append((off, size))
        return off

    def release(self, *instructions: Instruction) -> None:
        """Drop one reader (each instruction) of the slots the instructions read; free
        blocks nobody reads any more."""
        for ins in instructions:
            for b in {b for s in ins.inputs for b in self.bases(s)}:
                left = self.readers.get(b, 0) - 1
                self.readers[b] = left
                if left <= 0 and b in self.where:
                    self.free += self.where.pop(b)
                    self.free.sort()
                    merged: list[tuple[int, int]] = []
                    for off, sz in self.free:
                        if merged and merged[-1][0] + merged[-1][1] == off:
                            merged[-1] = (merged[-1][0], merged[-1][1] + sz)
                        else:
                            merged.append((off, sz))
                    self.free = merged

    def bases(self, slot: int) -> set[int]:
        """The slots holding data that reading ``slot`` touches (through views and pads)."""
        todo, out = [slot], set()
        while todo:
            s = todo.pop()
            if s in self.lazy:
                todo.extend(self.lazy[s])
            else:
                out.add(s)
        return out

    # --- reads ---

    def read(self, slot: int, idx: Index) -> str:
        """A C expression for ``slot``'s element at ``idx``: a temporary or a literal in
        a loop body, else an expression."""
        body = self.body
        if body is not None:
            if idx is body.index and slot in body.temps:
                return body.temps[slot]
            key = (slot, idx.key())
            got = body.reads.get(key)
            if got is not None:
                return got
        trusted = self.trusted
        if self.region is not None and body is not None and idx is body.index:
            fact = self.fact(slot)
            if fact is not None and (fact.p, fact.q) == self.region[:2]:
                k = self.region[2]
                if k not in fact.offsets:
                    return self.float_literal(fact.outside, self.avals[slot].dtype)
                if fact.base is not None:
                    self.trusted = {**trusted, fact.base: fact.base_line(k)}
        try:
            expr = self._expr(slot, idx)
        finally:
            self.trusted = trusted
        if body is None or _simple(expr):
            return expr
        body.n += 1
        name = f"r{body.n}"
        body.lines.append(f"{body.indent}const {C_TYPES[self.avals[slot].dtype]} {name} = {expr};")
        body.reads[(slot, idx.key())] = name
        return name

    def _expr(self, slot: int, idx: Index) -> str:
        ref = self.refs[slot]
        if isinstance(ref, _Scalar):
            return ref.expr
        if isinstance(ref, _Buffer):
            band = self.bands.get(slot)
            if band is not None:  # the line is known where a fact brought the read here
                k = self.trusted.get(slot)
                return band.read(idx.axes(), idx.offset()) if k is None else band.at(idx.axes(), k)
            return f"{ref.name}[{idx.offset()}]"
        if isinstance(ref, _View):
            return self.read(ref.parent, ref.to_parent(idx))
        if isinstance(ref, _Diagonal):
            axes = idx.axes()
            st = strides(ref.shape)
            row = [(s // st[ref.split - 1], a) for s, a in zip(st[:ref.split], axes[:ref.split], strict=True)]
            col = [(s, a) for s, a in zip(st[ref.split:], axes[ref.split:], strict=True)]
            lhs = lin(row, ref.offset)
            return f"({lhs} == {lin(col)} ? {ref.value} : {ref.zero})"
        if isinstance(ref, _Outer):
            axes = idx.axes()
            x = self.read(ref.lhs, Index(self.avals[ref.lhs].shape, tuple(axes[d] for d in ref.lhs_axes), None, True))
            y = self.read(ref.rhs, Index(self.avals[ref.rhs].shape, tuple(axes[d] for d in ref.rhs_axes), None, True))
            return f"({x} * {y})"
        assert isinstance(ref, _Pad)
        axes = idx.axes()
        conds, inner = [], []
        for a, lo, hi, it, n in zip(axes, ref.low, ref.high, ref.interior, ref.operand_shape, strict=True):
            pos = lin([(1, a)], -lo)
            if lo > 0:  # (the loop starts at 0: a crop, lo < 0, needs no test)
                conds.append(f"{pos} >= 0")
            if it:
                conds += [f"{pos} < {(n - 1) * (it + 1) + 1}", f"({pos}) % {it + 1} == 0"]
                inner.append(f"({pos}) / {it + 1}")
            else:
                if hi > 0:  # (the loop ends at lo + n + hi)
                    conds.append(f"{pos} < {n}")
                inner.append(pos)
        inside = self.read_unbound(ref.operand, Index(ref.operand_shape, tuple(inner), None, True))
        fill = self.read(ref.value, Index((), (), "0", True))
        if not conds:
            return inside
        return f"(({' && '.join(conds)}) ? {inside} : {fill})"

    def read_unbound(self, slot: int, idx: Index) -> str:
        """A read that is not made a temporary (it is only valid under a condition)."""
        body, self.body = self.body, None
        try:
            return self.read(slot, idx)
        finally:
            self.body = body

    # --- instructions ---

    def view(self, ins: Instruction) -> None:
        (x,) = ins.inputs
        out = ins.outputs[0]
        fn = self.cat[ins.op].numpy_fn
        a = ins.attrs
        src = self.avals[x].shape
        dst = self.avals[out].shape
        if fn is sem.reshape or (fn is sem.broadcast_in_dim and math.prod(src) == math.prod(dst)
                                 and tuple(sorted(a["dims"])) == tuple(a["dims"])):
            def to_parent(idx: Index) -> Index:  # same row-major order: the flat index carries over
                if idx.dims is None:
                    return Index(src, None, idx.flat, idx.nest)
                return Index(src, reshaped(idx.dims, dst, src), None, idx.nest)
        elif fn is sem.broadcast_in_dim:
            dims = a["dims"]

            def to_parent(idx: Index) -> Index:
                axes = idx.axes()
                return Index(src, tuple("0" if src[i] == 1 else axes[d] for i, d in enumerate(dims)), None, idx.nest)
        elif fn is sem.transpose:
            perm = a["perm"]

            def to_parent(idx: Index) -> Index:
                axes = idx.axes()
                inv = [""] * len(perm)
                for i, p in enumerate(perm):
                    inv[p] = axes[i]
                return Index(src, tuple(inv), None, idx.nest)
        elif fn is sem.reverse:
            rev = set(a["dims"])

            def to_parent(idx: Index) -> Index:
                axes = idx.axes()
                return Index(src, tuple(lin([(-1, e)], src[i] - 1) if i in rev else e
                                         for i, e in enumerate(axes)), None, idx.nest)
        else:  # slice
            start, steps = a["start"], a["strides"]

            def to_parent(idx: Index) -> Index:
                axes = idx.axes()
                return Index(src, tuple(lin([(st, e)], s0) for e, s0, st in zip(axes, start, steps, strict=True)),
                              None, idx.nest)
        self.refs[out] = _View(x, to_parent)

    def constant(self, ins: Instruction) -> None:
        out = ins.outputs[0]
        lit = ins.attrs["value"]
        arr = lit.array
        dtype = arr.dtype.name
        if arr.size == 0:
            self.refs[out] = _Scalar("0")
            return
        if lit.splat() is not None:  # every element equal, bit for bit (a splat may be a broadcast view)
            self.refs[out] = _Scalar(self.scalar_literal(arr.reshape(-1)[0], dtype, f"c{out}"))
            return
        flat = np.ascontiguousarray(arr).reshape(-1)
        diag = _diagonal(arr) if arr.ndim >= 2 and not is_complex(dtype) else None
        if diag is not None:
            split, offset, value = diag
            self.refs[out] = _Diagonal(arr.shape, split, offset, _parens(literal(value, dtype)),
                                       literal(0, dtype))
            return
        name = f"c{out}"
        if is_complex(dtype):
            real = real_dtype(dtype)
            parts = np.stack([flat.real, flat.imag], axis=-1).reshape(-1)
            items = _wrap([literal(v, real) for v in parts.tolist()])
            self.statics.append(f"static const union {{ {C_TYPES[real]} r[{2 * flat.size}]; "
                                f"{C_TYPES[dtype]} c[{flat.size}]; }} {name} = {{{{\n{items}\n}}}};")
            self.refs[out] = _Buffer(f"{name}.c", arr.shape)
        else:
            items = _wrap([literal(v, dtype) for v in flat.tolist()])
            self.statics.append(f"static const {C_TYPES[dtype]} {name}[{flat.size}] = {{\n{items}\n}};")
            self.refs[out] = _Buffer(name, arr.shape)

    def scalar_literal(self, value: Any, dtype: str, name: str) -> str:
        if not is_complex(dtype):
            return _parens(literal(value, dtype))
        real = real_dtype(dtype)
        self.statics.append(f"static const union {{ {C_TYPES[real]} r[2]; {C_TYPES[dtype]} c; }} {name} = "
                            f"{{{{{literal(value.real, real)}, {literal(value.imag, real)}}}}};")
        return f"{name}.c"

    def elementwise_expr(self, ins: Instruction, args: list[str]) -> str:
        prim = self.cat[ins.op]
        dtypes = [self.avals[i].dtype for i in ins.inputs]
        out = self.avals[ins.outputs[0]].dtype
        fn = prim.numpy_fn
        if fn in _REDUCTIONS:  # a reduction over no axes
            return args[0]
        if fn is sem.compare:
            return f"({args[0]} {sem.COMPARISON_SYMBOLS[ins.attrs['direction']]} {args[1]})"
        if fn is sem.select:
            return f"({args[0]} ? {args[1]} : {args[2]})"
        if fn is sem.convert:
            return _convert(args, dtypes[0], out, self.spell)
        return self.spell.elementwise(prim, args, dtypes, out)

    def scalar(self, ins: Instruction) -> None:
        """A rank-0 elementwise instruction: one statement."""
        out = ins.outputs[0]
        idx = Index((), (), "0", True)
        args = [self.read(i, idx) for i in ins.inputs]
        expr = self.elementwise_expr(ins, args)
        self.lines.append(f"    const {C_TYPES[self.avals[out].dtype]} s{out} = {expr};")
        self.refs[out] = _Scalar(f"s{out}")
        self.release(ins)

    def close(self, g: _Group) -> None:
        """Write group ``g``'s loop."""
        g.open = False
        if self.open.get(g.shape) is g:
            del self.open[g.shape]
        member_ids = {id(m) for m in g.members}
        stored = []
        for m in g.members:
            out = m.outputs[0]
            if self.kinds[id(m)] == "reduce":
                continue
            if out in self.outputs or out in self.viewed or any(u not in member_ids for u in self.users.get(out, [])):
                stored.append(out)
        self.lines.append(f"    /* {', '.join(f's{m.outputs[0]} = {m.op}' for m in g.members)} */")
        for out in stored:
            target = self.transposed_output(out)
            if target is None:
                self.alloc(out)
            else:  # only an output's transpose reads it: written there, transposed, in the loop
                self.transposed[out] = target
        for m in g.members:  # reductions: accumulators, or their arrays set to the initial value
            if self.kinds[id(m)] == "reduce":
                self.start_reduction(m)
        split = self.split_plan(g, stored)
        for nest in (split is not None, True):
            try:
                lines = self.loop(g.shape, nest, lambda body: self.group_body(g, body, stored))
                break
            except NeedNest:
                continue
        if split is None:
            self.lines.extend(lines)
        else:
            self.split_loops(g, stored, split, lines)
        for m in g.members:
            out = m.outputs[0]
            if self.kinds[id(m)] == "reduce" and self.avals[out].ndim == 0:
                self.refs[out] = _Scalar(f"s{out}")
        self.release(*g.members)

    # --- region splitting (c_regions) ---

    def fact(self, slot: int) -> Lines | None:
        """Where ``slot`` is a known constant off a few lines (c_regions.Lines), or None."""
        if slot in self.facts:
            return self.facts[slot]
        ref, ins, aval = self.refs.get(slot), self.producer.get(slot), self.avals[slot]
        f = None
        if isinstance(ref, _Diagonal) and aval.ndim == 2 and ref.split == 1 and is_float(aval.dtype):
            f = Lines(0, 1, frozenset({-ref.offset}), np.zeros((), aval.dtype)[()])
        elif ins is not None and self.kinds[id(ins)] in ("view", "pad"):
            parent = self.fact(ins.inputs[0])
            if parent is not None:
                f = self._moved(parent, ins)
        self.facts[slot] = f
        return f

    def _moved(self, f: Lines, ins: Instruction) -> Lines | None:
        """Fact ``f`` of a view's or pad's operand, in the result's axes."""
        fn, a = self.cat[ins.op].numpy_fn, ins.attrs
        src, dst = self.avals[ins.inputs[0]].shape, self.avals[ins.outputs[0]].shape

        if fn is sem.transpose:
            perm = list(a["perm"])
            return f.moved(perm.index(f.p), perm.index(f.q), 0)
        if fn is sem.broadcast_in_dim and len(src) == len(a["dims"]):
            dims = a["dims"]
            if src[f.p] != dst[dims[f.p]] or src[f.q] != dst[dims[f.q]]:
                return None
            return f.moved(dims[f.p], dims[f.q], 0)
        if fn is sem.slice_ and a["strides"][f.p] == 1 and a["strides"][f.q] == 1:
            return f.moved(f.p, f.q, a["start"][f.p] - a["start"][f.q])
        if fn is sem.pad and a["interior"][f.p] == 0 and a["interior"][f.q] == 0:
            fill = self.constant_value(ins.inputs[1])
            if fill is None or np.asarray(fill).tobytes() != np.asarray(f.outside).astype(fill.dtype).tobytes():
                return None  # the border is not the value off the lines
            return f.moved(f.p, f.q, a["low"][f.q] - a["low"][f.p])
        return None

    def split_plan(self, g: _Group, stored: list[int]) -> tuple[int, int, list[int], str] | None:
        """(p, q, lines, C condition) where group ``g`` may run on a few lines i_p - i_q
        == k only: every value it stores is a known constant off them (given the
        condition: arrays the proof needs finite), else None."""
        if len(g.shape) < 2 or not math.prod(g.shape) or not stored \
                or any(self.kinds[id(m)] == "reduce" for m in g.members):
            return None
        values: dict[int, Value] = {}
        pair: list[tuple[int, int]] = []
        flags: list[str] = []

        def value(slot: int) -> Value:
            if slot in values:
                return values[slot]
            f = self.fact(slot)
            if f is not None and (not pair or pair[0] == (f.p, f.q)):
                pair[:1] = [(f.p, f.q)]
                if f.base in self.bands:  # its lines are read from the bands: they must hold it
                    flags.append(self.bands[f.base].flag)
                return Value(f.offsets, Known(f.outside), f.guards)
            const = self.constant_value(slot)
            if const is not None and const.size and bool(np.all(const == const.reshape(-1)[0])) \
                    and const.reshape(-1)[0].tobytes() * const.size == const.tobytes():
                return Value(None, Known(const.reshape(-1)[0]))
            if is_float(self.avals[slot].dtype) and not is_complex(self.avals[slot].dtype):
                return Value(None, Finite(frozenset({slot})))
            return Value(None, c_regions.UNKNOWN)

        for m in g.members:
            prim = self.cat[m.op]
            op = "select" if prim.numpy_fn is sem.select else m.op
            out = m.outputs[0]
            if not is_float(self.avals[out].dtype) or is_complex(self.avals[out].dtype):
                return None
            values[out] = c_regions.combine(op, [value(i) for i in m.inputs], np.dtype(self.avals[out].dtype))
        lines: set[int] = set()
        guards: set[int] = set()
        for out in stored:
            v = values[out]
            if v.lines is None or not isinstance(v.outside, Known):
                return None
            lines |= v.lines
            guards |= v.guards
        if not pair or len(lines) > c_regions.MAX_LINES:
            return None
        conds = flags
        for slot in sorted(guards):
            flag = self.finite_flag(slot)
            if flag is None or flag == "0":
                return None
            if flag != "1":
                conds.append(flag)
        p, q = pair[0]
        ok = f"ok{stored[0]}"
        self.lines.append(f"    const int {ok} = {' && '.join(dict.fromkeys(conds)) or '1'};")
        for out in stored:
            v = values[out]
            assert v.lines is not None and isinstance(v.outside, Known)
            self.facts[out] = Lines(p, q, v.lines, v.outside.value, frozenset(v.guards), base=out)
        return p, q, sorted(lines), ok

    def split_loops(self, g: _Group, stored: list[int], split: tuple[int, int, list[int], str],
                    generic: list[str]) -> None:
        """Group ``g`` on its lines where the condition holds, else ``generic``."""
        p, q, lines, ok = split
        shape = g.shape
        fills = []
        for out in stored:
            f = self.facts[out]
            assert f is not None
            k = self.outputs.get(out)
            if out in self.transposed:
                name = f"out{self.transposed[out][0]}"
            elif k is not None and self.written.get(k) == out:
                name = f"out{k}"
            else:  # scratch: bands of its lines (c_bands), its readers know what is off them
                dtype = self.avals[out].dtype
                band = Band(f"b{out}", f"s{out}", shape, p, q, tuple(sorted(f.offsets)),
                            self.float_literal(f.outside, dtype), ok)
                off = self.block(out, band.size * len(band.offsets))
                self.lines.append(f"    {C_TYPES[dtype]} *const {band.name} = ({C_TYPES[dtype]} *)(w + {off});  "
                                  f"/* s{out} on the lines i{p} - i{q} in {{{', '.join(map(str, band.offsets))}}} */")
                self.bands[out] = band
                continue
            value = self.float_literal(f.outside, self.avals[out].dtype)
            fill = f"for (int64_t i = 0; i < {self.avals[out].size}; i++) {name}[i] = {value};"
            if value in ("0.0", "0.0f"):  # a caller that passes zeroed outputs skips it
                self.uses_zeroed = True
                fill = f"if (!zeroed) {fill}"
            fills.append(f"        {fill}")
        self.lines += [f"    if ({ok}) {{  /* off the lines i{p} - i{q} in {{{', '.join(map(str, lines))}}}: "
                       "known constants */", *fills]
        names = tuple(f"i{d}" for d in range(len(shape)))

        def line(k: int, indent: str) -> list[str]:
            body = _Body(Index(shape, names, None, True), indent)
            self.body, self.region = body, (p, q, k)
            try:
                self.group_body(g, body, stored)
            finally:
                self.body, self.region = None, None
            return body.lines
        self.lines += c_regions.lines_loop(shape, p, q, lines, 2, line)
        self.lines.append("    } else {")
        self.lines.extend("    " + ln for ln in generic)
        self.lines.append("    }")

    def transposed_output(self, slot: int) -> tuple[int, tuple[int, ...]] | None:
        """(output position, perm) where ``slot`` is read only by a transpose that is an
        output and nothing else reads, else None."""
        views = self.views_of.get(slot, [])
        if slot in self.outputs or self.users.get(slot) or len(views) != 1:
            return None
        v = views[0]
        out = v.outputs[0]
        k = self.outputs.get(out)
        if (self.cat[v.op].numpy_fn is not sem.transpose or k is None or k in self.written
                or self.users.get(out) or out in self.viewed):
            return None
        self.written[k] = out
        self.refs[out] = _Buffer(f"out{k}", self.avals[out].shape)
        return k, tuple(v.attrs["perm"])

    def start_reduction(self, m: Instruction) -> None:
        out = m.outputs[0]
        aval = self.avals[out]
        dtype = aval.dtype
        how = _REDUCTIONS[self.cat[m.op].numpy_fn]
        if how == "max":
            init = "(-INFINITY)" if is_float(dtype) else _int_literal(int(np.iinfo(dtype).min), dtype)
        else:
            init = f"(({C_TYPES[dtype]}){0 if how == 'sum' else 1})"
        if aval.ndim == 0:
            self.lines.append(f"    {C_TYPES[dtype]} s{out} = {init};")
        else:
            name = self.alloc(out)
            self.lines.append(f"    for (int64_t i = 0; i < {aval.size}; i++) {name}[i] = {init};")

    def group_body(self, g: _Group, body: _Body, stored: list[int]) -> None:
        for m in g.members:
            out = m.outputs[0]
            t = C_TYPES[self.avals[out].dtype]
            if self.kinds[id(m)] == "reduce":
                x = self.read(m.inputs[0], body.index)
                target = f"s{out}"
                if self.avals[out].ndim:
                    axes = body.index.axes()
                    keep = [a for d, a in enumerate(axes) if d not in m.attrs["axes"]]
                    target = f"s{out}[{lin(list(zip(strides(self.avals[out].shape), keep, strict=True)))}]"
                how = _REDUCTIONS[self.cat[m.op].numpy_fn]
                if how == "sum":
                    body.lines.append(f"{body.indent}{target} += {x};")
                elif how == "prod":
                    body.lines.append(f"{body.indent}{target} *= {x};")
                else:  # NumPy's max propagates nan
                    nan = f" || {x} != {x}" if is_float(self.avals[out].dtype) else ""
                    body.lines.append(f"{body.indent}if ({x} > {target}{nan}) {target} = {x};")
                continue
            args = [self.read(i, body.index) for i in m.inputs]
            expr = self.elementwise_expr(m, args)
            body.lines.append(f"{body.indent}const {t} t{out} = {expr};")
            body.temps[out] = f"t{out}"
            if out in self.transposed:
                k, perm = self.transposed[out]
                axes = body.index.axes()
                shape = self.avals[self.p.output_slots[k]].shape
                offset = lin(list(zip(strides(shape), [axes[d] for d in perm], strict=True)))
                body.lines.append(f"{body.indent}out{k}[{offset}] = t{out};")
            elif out in self.bands and self.region is not None:  # off its own lines it is known: not stored
                band = self.bands[out]
                if self.region[2] in band.offsets:
                    body.lines.append(f"{body.indent}{band.at(body.index.axes(), self.region[2])} = t{out};")
            elif out in stored:
                body.lines.append(f"{body.indent}s{out}[{body.index.offset()}] = t{out};")

    def loop(self, shape: tuple[int, ...], nest: bool, fill: Callable[[_Body], None]) -> list[str]:
        """A loop over ``shape``: one flat loop, or a nest of one loop per axis."""
        if not nest:
            body = _Body(Index(shape, None, "i", False), "        ")
            head = [f"    for (int64_t i = 0; i < {math.prod(shape)}; i++) {{"]
            tail = ["    }"]
        else:
            names = tuple(f"i{d}" for d in range(len(shape)))
            body = _Body(Index(shape, names, None, True), "    " * (len(shape) + 1))
            head = [f"{'    ' * (d + 1)}for (int64_t i{d} = 0; i{d} < {n}; i{d}++) {{" for d, n in enumerate(shape)]
            tail = [f"{'    ' * (d + 1)}}}" for d in reversed(range(len(shape)))]
        self.body = body
        try:
            fill(body)
        finally:
            self.body = None
        return head + body.lines + tail

    def outer(self, ins: Instruction) -> None:
        lhs, rhs = ins.inputs
        a = ins.attrs
        lb, rb = a["lhs_batch"], a["rhs_batch"]
        nl, nr = self.avals[lhs].ndim, self.avals[rhs].ndim
        lfree = [d for d in range(nl) if d not in lb]
        rfree = [d for d in range(nr) if d not in rb]
        nb = len(lb)
        lhs_axes = tuple(lb.index(d) if d in lb else nb + lfree.index(d) for d in range(nl))
        rhs_axes = tuple(rb.index(d) if d in rb else nb + len(lfree) + rfree.index(d) for d in range(nr))
        self.refs[ins.outputs[0]] = _Outer(lhs, rhs, lhs_axes, rhs_axes)

    # --- what c_dot and c_regions ask of the emitter ---

    @staticmethod
    def c_type(dtype: str) -> str:
        return C_TYPES[dtype]

    @staticmethod
    def float_literal(value: Any, dtype: str) -> str:
        return _parens(literal(value, dtype))

    def read_plain(self, slot: int, idx: Index) -> str:
        return self.read_unbound(slot, idx)

    def scalar_ref(self, slot: int, expr: str) -> None:
        self.refs[slot] = _Scalar(expr)

    def static_array(self, name: str, ctype: str, items: list[str]) -> None:
        self.statics.append(f"static const {ctype} {name}[{len(items)}] = {{\n{_wrap(items)}\n}};")

    def constant_value(self, slot: int) -> np.ndarray | None:
        """``slot``'s value where it is a constant, through views and pads, else None."""
        if slot in self.constant_values:
            return self.constant_values[slot]
        ins = self.producer.get(slot)
        value = None
        if ins is not None and self.kinds[id(ins)] == "constant":
            value = np.asarray(ins.attrs["value"].array)
        elif ins is not None and self.kinds[id(ins)] in ("view", "pad"):
            parts = [self.constant_value(i) for i in ins.inputs]
            if all(v is not None for v in parts):
                value = np.asarray(self.cat[ins.op].numpy_fn(*parts, **dict(ins.attrs.items())))
        self.constant_values[slot] = value
        return value

    def finite_flag(self, slot: int) -> str | None:
        """A C condition that holds when every element ``slot`` reads is finite (checked
        once per array, where first asked), or None where that cannot be checked."""
        conds = []
        for b in sorted(self.bases(slot)):
            if not is_float(self.avals[b].dtype):
                return None
            value = self.constant_value(b)
            if value is not None:
                if not bool(np.all(np.isfinite(value))):
                    return "0"
                continue
            ref = self.refs.get(b)
            if isinstance(ref, _Scalar):
                conds.append(f"isfinite({ref.expr})")
            elif isinstance(ref, _Buffer):
                if b not in self.finite_flags:
                    name = self.finite_flags[b] = f"fin{b}"
                    self.lines.append(f"    int {name} = 1;  /* every element of s{b} finite */")
                    band = self.bands.get(b)
                    if band is not None:
                        fact = self.facts[b]
                        assert fact is not None
                        self.lines += band.all_finite(name, bool(np.isfinite(fact.outside)))
                    else:
                        x = f"{ref.name}[i]"
                        self.lines.append(f"    for (int64_t i = 0; i < {self.avals[b].size}; i++) "
                                          f"{name} &= {x} - {x} == 0;")
                conds.append(self.finite_flags[b])
            else:
                return None
        return " && ".join(conds) or "1"

    def concatenate(self, ins: Instruction) -> None:
        out = ins.outputs[0]
        oa = self.avals[out]
        axis = ins.attrs["axis"]
        name = self.alloc(out)
        self.lines.append(f"    /* s{out} = concatenate({', '.join(f's{i}' for i in ins.inputs)}) */")
        start = 0
        for x in ins.inputs:
            shape = self.avals[x].shape
            if math.prod(shape):
                names = tuple(f"i{d}" for d in range(len(shape)))
                dst = lin(list(zip(strides(oa.shape), names, strict=True)), start * strides(oa.shape)[axis])
                lines = [f"{'    ' * (d + 1)}for (int64_t i{d} = 0; i{d} < {n}; i{d}++) {{"
                         for d, n in enumerate(shape)]
                src = self.read(x, Index(shape, names, None, True))
                lines.append(f"{'    ' * (len(shape) + 1)}{name}[{dst}] = {src};")
                lines += [f"{'    ' * (d + 1)}}}" for d in reversed(range(len(shape)))]
                self.lines.extend(lines)
            start += shape[axis]
        self.release(ins)

    def dynamic_slice(self, ins: Instruction, update: bool) -> None:
        """A slice at a start read when the program runs, clamped so it fits (a plain loop
        into its own array); an update copies the operand, then writes the update there."""
        out = ins.outputs[0]
        oa = self.avals[out]
        axis = ins.attrs["axis"]
        part = ins.inputs[1] if update else out  # the slice's shape: the update's or the result's
        k, n = self.avals[part].shape[axis], oa.shape[axis] if update else self.avals[ins.inputs[0]].shape[axis]
        start_slot = ins.inputs[-1]
        name = self.alloc(out)
        st = f"st{out}"
        value = self.read(start_slot, Index((), (), "0", True))
        self.lines.append(f"    /* s{out} = {ins.op}({', '.join(f's{i}' for i in ins.inputs)}) */")
        if self.avals[start_slot].dtype.startswith("uint"):  # (no negative start)
            self.lines.append(f"    int64_t {st} = {value} > {n - k} ? {n - k} : (int64_t){value};")
        else:
            self.lines.append(f"    int64_t {st} = (int64_t){value};")
            self.lines.append(f"    {st} = {st} < 0 ? 0 : {st} > {n - k} ? {n - k} : {st};")

        def copy(shape: tuple[int, ...], src: int, dst_shift: bool, src_shift: bool) -> None:
            if not math.prod(shape):
                return
            names = tuple(f"i{d}" for d in range(len(shape)))
            shifted = tuple(f"i{d} + {st}" if d == axis else f"i{d}" for d in range(len(shape)))
            dst = lin(list(zip(strides(oa.shape), shifted if dst_shift else names, strict=True)))
            src_shape = self.avals[src].shape
            read = self.read(src, Index(src_shape, shifted if src_shift else names, None, True))
            lines = [f"{'    ' * (d + 1)}for (int64_t i{d} = 0; i{d} < {m}; i{d}++) {{" for d, m in enumerate(shape)]
            lines.append(f"{'    ' * (len(shape) + 1)}{name}[{dst}] = {read};")
            lines += [f"{'    ' * (d + 1)}}}" for d in reversed(range(len(shape)))]
            self.lines.extend(lines)

        if update:
            copy(oa.shape, ins.inputs[0], False, False)
            copy(self.avals[ins.inputs[1]].shape, ins.inputs[1], True, False)
        else:
            copy(oa.shape, ins.inputs[0], False, True)
        self.release(ins)

    def copy_out(self, k: int, slot: int) -> None:
        """Output ``k`` from ``slot``, which is not already there."""
        aval = self.avals[slot]
        t = C_TYPES[aval.dtype]
        if aval.ndim == 0:
            self.lines.append(f"    out{k}[0] = {self.read(slot, Index((), (), '0', True))};")
            return
        if aval.size == 0:
            return

        def fill(body: _Body) -> None:
            body.lines.append(f"{body.indent}out{k}[{body.index.offset()}] = {self.read(slot, body.index)};")

        self.lines.append(f"    /* out{k} = s{slot} ({t}) */")
        for nest in (False, True):
            try:
                self.lines.extend(self.loop(aval.shape, nest, fill))
                return
            except NeedNest:
                continue

    # --- the program ---

    def run(self) -> None:
        p = self.p
        ids: dict[int, str] = {}
        for ins in p.instructions:
            kind = _kind(self.cat.get(ins.op), ins, self.avals)
            assert kind is not None
            ids[id(ins)] = self.kinds[id(ins)] = kind
            self.producer[ins.outputs[0]] = ins
            if kind in ("view", "pad", "outer"):
                self.lazy[ins.outputs[0]] = tuple(ins.inputs)
                for i in ins.inputs:
                    self.views_of.setdefault(i, []).append(ins)
                self.viewed.update(ins.inputs)
            else:
                for i in set(ins.inputs):
                    self.users.setdefault(i, []).append(id(ins))
        for ins in p.instructions:  # readers of each base slot: instructions and outputs
            if ids[id(ins)] not in ("view", "pad", "outer"):
                for b in {b for i in ins.inputs for b in self.bases(i)}:
                    self.readers[b] = self.readers.get(b, 0) + 1
        for s in p.output_slots:
            for b in self.bases(s):
                self.readers[b] = self.readers.get(b, 0) + 1
        for k, s in enumerate(p.input_slots):
            aval = self.avals[s]
            if aval.ndim == 0:
                self.lines.append(f"    const {C_TYPES[aval.dtype]} s{s} = in{k}[0];")
                self.refs[s] = _Scalar(f"s{s}")
            else:
                self.refs[s] = _Buffer(f"in{k}", aval.shape)
        for ins in p.instructions:
            kind = ids[id(ins)]
            out = ins.outputs[0]
            if kind == "constant":
                self.constant(ins)
            elif kind == "view":
                self.view(ins)
            elif kind == "outer":
                self.outer(ins)
            elif kind == "pad":
                a = ins.attrs
                self.refs[out] = _Pad(ins.inputs[0], ins.inputs[1], a["low"], a["high"], a["interior"],
                                      self.avals[ins.inputs[0]].shape)
            elif kind in ("elementwise", "reduce"):
                shape = self.avals[ins.inputs[0]].shape if kind == "reduce" else self.avals[out].shape
                if not shape:
                    self.close_for(ins.inputs)
                    self.scalar(ins)
                    continue
                g = self.open.get(shape)
                direct = {i for i in ins.inputs if g is not None and self.group_of.get(i) is g
                          and self.kinds_of_slot(i) != "reduce"}
                self.close_for([i for i in ins.inputs if i not in direct])
                g = self.open.get(shape)
                if g is None:
                    g = self.open[shape] = _Group(shape)
                    self.groups.append(g)
                g.members.append(ins)
                g.slots.add(out)
                self.group_of[out] = g
            else:
                self.close_for(ins.inputs)
                fn = self.cat[ins.op].numpy_fn
                if fn is sem.dot_general:
                    c_dot.emit(self, ins)
                elif fn is sem.concatenate:
                    self.concatenate(ins)
                else:
                    self.dynamic_slice(ins, fn is sem.dynamic_update_slice)
        for g in self.groups:
            if g.open:
                self.close(g)
        for k, s in enumerate(p.output_slots):
            if self.written.get(k) != s:
                self.copy_out(k, s)

    def kinds_of_slot(self, slot: int) -> str:
        g = self.group_of.get(slot)
        if g is None:
            return ""
        for m in g.members:
            if m.outputs[0] == slot:
                return self.kinds[id(m)]
        return ""

    def close_for(self, slots: Sequence[int]) -> None:
        """Close every open loop that computes data ``slots`` read."""
        for s in slots:
            for b in sorted(self.bases(s)):
                g = self.group_of.get(b)
                if g is not None and g.open:
                    self.close(g)


_SIMPLE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*|\(?-?[0-9A-Za-z.+]+\)?")


def _simple(expr: str) -> bool:
    """A name or a literal: used as it is, never bound to a temporary."""
    return _SIMPLE.fullmatch(expr) is not None


def _wrap(items: list[str], width: int = 100) -> str:
    lines, cur = [], "    "
    for it in items:
        if len(cur) + len(it) + 2 > width and cur.strip():
            lines.append(cur.rstrip())
            cur = "    "
        cur += it + ", "
    lines.append(cur.rstrip().rstrip(","))
    return "\n".join(lines)


def _diagonal(arr: np.ndarray) -> tuple[int, int, Any] | None:
    """``(split, offset, value)`` when ``arr``, its axes split into rows and columns at
    ``split``, is ``value`` on the diagonal ``column == row + offset`` and 0 elsewhere."""
    nz = np.flatnonzero(arr.reshape(-1))
    if nz.size == 0 or nz.size > max(arr.shape) * 4:
        return None
    values = arr.reshape(-1)[nz]
    if not bool(np.all(values == values[0])) or values[0] != values[0]:
        return None
    for split in range(1, arr.ndim):
        cols = math.prod(arr.shape[split:])
        rows = math.prod(arr.shape[:split])
        r, c = np.divmod(nz, cols)
        offset = int(c[0] - r[0])
        # every (r, r + offset) in range is nonzero, and nothing else
        lo, hi = max(0, -offset), min(rows, cols - offset)
        if hi - lo == nz.size and bool(np.all(c - r == offset)):
            return split, offset, values[0]
    return None


def to_c(program: SSAProgram) -> str:
    """One self-contained C99 file computing ``program`` (see the module docstring)."""
    missing = unsupported(program)
    if missing:
        raise CLoweringError(f"no C lowering for {', '.join(missing)}; run this program with "
                             "backend='numpy' or backend='xla'")
    half = sorted({a.dtype for a in program.slot_avals if a.dtype not in C_TYPES})
    if half:  # C99 has no float16 or bfloat16 arithmetic
        raise CLoweringError(f"the C back end does not handle {' or '.join(half)} values; run this program "
                             "with backend='numpy' or backend='xla'")
    e = _Emitter(program)
    e.run()
    params = []
    for k, s in enumerate(program.input_slots):
        params.append(f"const {C_TYPES[program.slot_avals[s].dtype]} *restrict in{k}")
    for k, s in enumerate(program.output_slots):
        params.append(f"{C_TYPES[program.slot_avals[s].dtype]} *restrict out{k}")
    params.append("void *work")
    work = e.work_top
    doc = [f"/* Generated by tidu (C back end): {len(program.instructions)} instructions.",
           " *",
           " * Entry point:",
           f" *     int {ENTRY}({', '.join(params)});",
           " *",
           " * Every array is row-major (C order) and contiguous; a scalar is a pointer to one",
           " * element. One pointer per input, then one per output, in program order:"]
    for k, (s, key) in enumerate(zip(program.input_slots, program.input_keys, strict=True)):
        doc.append(f" *     in{k}: input {_comment(key)}, {program.slot_avals[s]}")
    for k, s in enumerate(program.output_slots):
        doc.append(f" *     out{k}: output {k}, {program.slot_avals[s]}")
    doc += [" * Outputs must not overlap the inputs or each other. work: scratch memory of",
            f" * {ENTRY}_work_bytes() bytes, aligned to {ALIGN}, or NULL (then it is malloc'ed and freed",
            " * here). Returns 0, or 1 where that malloc failed.",
            *([f" * {ENTRY}_zeroed (same arguments): the same, for outputs the caller has filled with",
               " * zeros (+0.0): where the program proves an output element is +0.0 it is not written."]
              if e.uses_zeroed else []),
            " * Compile: cc -std=c99 -O2 -ffp-contract=off -fno-math-errno -fwrapv -c file.c (link with -lm).",
            " */"]
    includes = ["#include <math.h>", "#include <stdbool.h>", "#include <stddef.h>", "#include <stdint.h>",
                "#include <stdlib.h>"]
    if e.uses_complex:
        includes.append("#include <complex.h>")
    setup = ["    unsigned char *w = (unsigned char *)work;", "    void *owned = NULL;"]
    if work:
        setup += [f"    if (w == NULL) {{ owned = malloc({work}); if (owned == NULL) return 1; "
                  "w = (unsigned char *)owned; }"]
    inner = setup + e.lines + ["    (void)w;", "    free(owned);", "    return 0;", "}"]
    body = [f"size_t {ENTRY}_work_bytes(void) {{ return {work}; }}", ""]
    if e.uses_zeroed:  # one body, two entries: outputs as they come, or known to be zeros
        names = [f"in{k}" for k in range(len(program.input_slots))] + \
                [f"out{k}" for k in range(len(program.output_slots))] + ["work"]
        body += [f"static int {ENTRY}_run({', '.join(params)}, const int zeroed) {{", *inner, "",
                 f"int {ENTRY}({', '.join(params)}) {{ return {ENTRY}_run({', '.join(names)}, 0); }}", "",
                 f"int {ENTRY}_zeroed({', '.join(params)}) {{ return {ENTRY}_run({', '.join(names)}, 1); }}"]
    else:
        body += [f"int {ENTRY}({', '.join(params)}) {{", *inner]
    parts = ["\n".join(doc), "\n".join(includes)]
    if e.spell.helpers:
        parts.append("\n\n".join(e.spell.helpers.values()))
    if e.statics:
        parts.append("\n".join(e.statics))
    parts.append("\n".join(body))
    return "\n\n".join(parts) + "\n"


def signature(program: SSAProgram, zeroed: bool = False) -> str:
    """The entry points' declarations, pointers as ``void *`` (for cffi); ``zeroed``:
    with ``tidu_program_zeroed`` (a source where ``has_zeroed_entry``)."""
    n = len(program.input_slots) + len(program.output_slots)
    params = ", ".join(["void *"] * (n + 1))
    extra = f"\nint {ENTRY}_zeroed({params});" if zeroed else ""
    return f"int {ENTRY}({params});\nsize_t {ENTRY}_work_bytes(void);{extra}"


def has_zeroed_entry(source: str) -> bool:
    """Whether ``source`` (of ``to_c``) defines ``tidu_program_zeroed``."""
    return f"\nint {ENTRY}_zeroed(" in source


def _comment(text: object) -> str:
    return str(text).replace("*/", "* /").replace("\n", " ")


__all__ = ["C_FUNCTIONS", "C_TYPES", "CLoweringError", "ENTRY", "HELPERS", "has_zeroed_entry", "literal",
           "lowerable", "signature",
           "to_c", "unsupported"]
