"""Math expressions typed by users: tokenizer, recursive-descent parser, conversions.

Grammar (loosest binding first; columns in errors are 1-based)::

    expr  := term (('+' | '-') term)*
    term  := unary (('*' | '/') unary)*
    unary := ('-' | '+') unary | power
    power := atom (('**' | '^') unary)?        # right-associative
    atom  := NUMBER | NAME | NAME '(' expr (',' expr)* ')' | '(' expr ')'

- ``^`` is a power, like ``**`` (nobody types xor in a formula): ``exp(-x^2)``.
- As in Python, a power binds tighter than a unary minus on its left (``-x**2`` is
  ``-(x**2)``) and its exponent may be signed (``x**-1``); ``2**3**2`` is ``2**9``.
- Numbers: ``3``, ``2.5``, ``.5``, ``1e-3``, ``6.02E23``. They are exact in SymPy
  (``0.1`` is 1/10) and float64 in tidu. No implicit multiplication: write ``2*x``.
- Constants ``pi`` and ``e``. Functions (``functions()``) are the elementwise primitives of
  the active catalog, by name: ``exp log sin cos tanh sqrt abs sign log1p expm1`` and
  those that rule files add (``tidu.use_rules``); ``max(a, b)`` and ``min(a, b)`` are
  ``maximum`` and ``minimum``. tidu runs a built-in one with the ``tidu.numpy`` function
  of its name, a rule file's with ``tidu.op``; SymPy reads each through its ``meaning``.
  The usual functions that are compositions of primitives (``COMPOSITES``: ``tan``,
  ``atan``, ``log10``, ``hypot``...) run as the NumPy function of that name
  (``tidu.numpy``'s composition) and are SymPy's own; a primitive of the same name wins.
  So are the special functions SymPy knows (``gamma``, ``beta``, ``polygamma``,
  ``factorial``, ``sinc`` (SymPy's sin(x)/x), ``cot``...), computed with
  ``tidu.scipy.special`` or primitives (traced) and ``scipy.special`` (NumPy, eager);
  ``polygamma``'s order must be a number, a non-negative integer (``INTEGER_ARGUMENTS``).

Text is never handed to Python's ``eval`` (nor to ``sympy.sympify``/``parse_expr``,
which call it): the tree is built here and converted with SymPy constructors.

The tree is this grammar's own, not the rule DSL's (``tidu.ops.dsl.ast``): it keeps what
was typed (a number's exact value and its text, a unary plus, the operator written) and
leaves columns out of equality, so that ``to_text`` prints it back and ``0.1`` is 1/10 in
SymPy. What a call means is not the tree's: its name is a catalog primitive.
"""

from __future__ import annotations

import inspect
import keyword
import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from types import ModuleType
from typing import Any

import numpy as np
import scipy.special
import sympy

import tidu.numpy as tnp
import tidu.scipy.special as tidu_special
from tidu.numpy import op
from tidu.ops.catalog import builtin_catalog, catalog
from tidu.ops.meaning import meaning_sympy

CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}
# Functions are the active catalog's primitives, by name (``functions``), except these:
# the operators write the arithmetic ones; max and min are maximum and minimum (``ALIASES``);
# and a few built-ins stay out of this language of real functions, where conj is the
# identity, floor, ceil and rint are flat almost everywhere, rem is not smooth and
# rsqrt(x) is 1/sqrt(x). A primitive added to the rule files is a function with no edit here.
OPERATOR_PRIMITIVES = frozenset({"add", "sub", "neg", "mul", "div", "pow"})
ALIASES: dict[str, str] = {"max": "maximum", "min": "minimum"}
LEFT_OUT = frozenset({"conj", "floor", "ceil", "rint", "rem", "rsqrt"})
# the type rules of functions from reals to reals, elementwise
_ELEMENTWISE = ("elementwise", "abs")
# functions that are no primitive but a composition of them: name -> (arity, how it is
# computed, SymPy's function). How: the name of the NumPy (and tidu.numpy) function, or a
# function of the module the expression computes with (tidu.numpy, traced, or numpy, eager)
# returning the function (``composite_function``).
Computation = str | Callable[[ModuleType], Callable[..., Any]]


def _special(name: str) -> Callable[[ModuleType], Callable[..., Any]]:
    """The special function ``name`` of ``tidu.scipy.special`` for ``tidu.numpy`` (traced,
    so differentiated), of ``scipy.special`` for ``numpy`` (eager values)."""
    return lambda mod: getattr(special_module(mod), name)


def _reciprocal(name: str) -> Callable[[ModuleType], Callable[..., Any]]:
    """1 / f(x) for the module's function ``name`` (cot is 1 / tan, sec 1 / cos...)."""
    return lambda mod: lambda x: 1.0 / getattr(mod, name)(x)


def _gamma_sign(x: Any) -> Any:
    """The sign of Gamma(x): 1 for x > 0; below, Gamma(x) Gamma(1 - x) = pi / sin(pi x)
    with Gamma(1 - x) > 0, so sin(pi x)'s (0 at 0: nan times the pole's inf)."""
    return tnp.where(x > 0, 1.0, tnp.sign(tnp.sin(math.pi * x)))


def _gamma(mod: ModuleType) -> Callable[..., Any]:
    # traced, its sign times exp(lgamma(x)), of primitives SymPy reads: tidu.scipy.special's
    # gamma takes its sign with signbit (a bitcast), which has no meaning to print
    if mod is not tnp:
        return special_module(mod).gamma
    return lambda x: _gamma_sign(x) * tnp.exp(tidu_special.gammaln(x))


def _beta(mod: ModuleType) -> Callable[..., Any]:
    # traced, as gamma: the signs times exp(lgamma(a) + lgamma(b) - lgamma(a + b)) (lgamma
    # cancels where the arguments are large: relative error 4e-14 at (50, 60), 2e-12 at
    # (1e4, 3); tidu.scipy.special's beta, exact there, takes its signs with signbit too)
    if mod is not tnp:
        return special_module(mod).beta

    def beta(a: Any, b: Any) -> Any:
        lg = tidu_special.gammaln
        return _gamma_sign(a) * _gamma_sign(b) * _gamma_sign(a + b) * tnp.exp(lg(a) + lg(b) - lg(a + b))

    return beta


def _factorial(mod: ModuleType) -> Callable[..., Any]:
    # SymPy's factorial, gamma(x + 1) on all the reals (SciPy's factorial is 0 for x < 0)
    return lambda x: _gamma(mod)(x + 1.0)


def _sinc(mod: ModuleType) -> Callable[..., Any]:
    # SymPy's (unnormalized) sinc, sin(x) / x and 1 at 0: NumPy's normalized one at x / pi,
    # whose series near 0 keeps every derivative right there
    return lambda x: mod.sinc(x / math.pi)


def _polygamma(mod: ModuleType) -> Callable[..., Any]:
    # n is a constant non-negative integer (INTEGER_ARGUMENTS): tidu's polygamma takes an
    # integer dtype, and n = 0 is the digamma primitive itself
    def polygamma(n: Any, x: Any) -> Any:
        k = int(n)
        return special_module(mod).digamma(x) if k == 0 else special_module(mod).polygamma(np.int64(k), x)

    return polygamma


COMPOSITES: dict[str, tuple[int, Computation, Callable[..., Any]]] = {
    "tan": (1, "tan", sympy.tan),
    **{f"{prefix}{f}": (1, f"arc{f}", getattr(sympy, f"a{f}"))
       for f in ("sin", "cos", "tan", "sinh", "cosh", "tanh") for prefix in ("a", "arc")},
    "log10": (1, "log10", lambda x: sympy.log(x, 10)), "log2": (1, "log2", lambda x: sympy.log(x, 2)),
    "exp2": (1, "exp2", lambda x: 2**x),
    "hypot": (2, "hypot", lambda x, y: sympy.sqrt(x**2 + y**2)),
    "atan2": (2, "arctan2", sympy.atan2), "arctan2": (2, "arctan2", sympy.atan2),
    # reciprocal trigonometric and hyperbolic functions
    **{f: (1, _reciprocal(g), getattr(sympy, f)) for f, g in (
        ("cot", "tan"), ("sec", "cos"), ("csc", "sin"), ("coth", "tanh"), ("sech", "cosh"), ("csch", "sinh"))},
    "sinc": (1, _sinc, sympy.sinc),
    # special functions (docs/cli.md#functions)
    "gamma": (1, _gamma, sympy.gamma),
    "beta": (2, _beta, sympy.beta),
    "factorial": (1, _factorial, sympy.factorial),
    "gammaln": (1, _special("gammaln"), lambda x: sympy.log(sympy.Abs(sympy.gamma(x)))),  # lgamma's name in SciPy
    "loggamma": (1, _special("loggamma"), sympy.loggamma),
    "polygamma": (2, _polygamma, sympy.polygamma),
    "trigamma": (1, lambda mod: lambda x: _polygamma(mod)(1, x), sympy.trigamma),
    # SymPy's erfcinv has no numeric value (evalf leaves it as it is): read as erfinv(1 - x)
    "erfcinv": (1, _special("erfcinv"), lambda x: sympy.erfinv(1 - x)),
}
# arguments of a composite that must be constant non-negative integers (at most
# MAX_INTEGER_ARGUMENT): name -> their positions
INTEGER_ARGUMENTS: dict[str, tuple[int, ...]] = {"polygamma": (0,)}
MAX_INTEGER_ARGUMENT = 100


def special_module(module: ModuleType) -> ModuleType:
    """Where the special functions of ``module``'s expressions are: ``tidu.scipy.special``
    for ``tidu.numpy``, ``scipy.special`` for ``numpy``."""
    if module is tnp:
        return tidu_special
    if module is np:
        return scipy.special
    raise ValueError(f"special functions (gamma, beta, ...) compute with tidu.numpy or numpy, not {module.__name__}")


def composite_function(name: str, module: ModuleType) -> Callable[..., Any]:
    """The function computing the composite ``name`` (``COMPOSITES``) with ``module``."""
    how = COMPOSITES[name][1]
    return getattr(module, how) if isinstance(how, str) else how(module)


def functions() -> dict[str, tuple[int, str]]:
    """The functions of the language, from the active catalog (so a rule file's primitive,
    ``tidu.use_rules``, is one): name -> (arity, name of the primitive). A function is an
    elementwise primitive of real values without attributes, except those written
    otherwise or left out (see ``OPERATOR_PRIMITIVES``, ``ALIASES``, ``LEFT_OUT``)."""
    cat = catalog()
    hidden = OPERATOR_PRIMITIVES | LEFT_OUT | set(ALIASES.values())
    out = {name: (len(p.operands), name) for name, p in cat.items()
           if name not in hidden and not p.variadic and not p.attrs and p.decl.type_rule in _ELEMENTWISE
           and "float64" in p.dtypes}  # functions of reals: not the integer (bitwise) ones
    out.update((alias, (len(cat[name].operands), name)) for alias, name in ALIASES.items() if name in cat)
    for name, (arity, _, _) in COMPOSITES.items():
        out.setdefault(name, (arity, name))
    return out


def _composite(name: str) -> tuple[int, Computation, Callable[..., Any]] | None:
    """``COMPOSITES[name]`` when the function ``name`` is that composition (no primitive
    of that name shadows it), else None."""
    got = COMPOSITES.get(name)
    return got if got is not None and name not in catalog() else None


def function_of(prim: str, module: ModuleType) -> Callable[..., Any]:
    """The function computing the primitive ``prim`` with ``module``: a built-in primitive
    is the module's function of the same name (``tidu.numpy.exp``, ``numpy.maximum``), a
    rule file's primitive (or one the module lacks) is ``tidu.op(prim)``."""
    fn = getattr(module, prim, None) if prim in builtin_catalog() else None
    return fn if fn is not None else op(prim)


MAX_DEPTH = 100  # nesting of parentheses, signs and powers
_FLOAT64_MAX = Fraction(sys.float_info.max)


class ExprError(ValueError):
    """The text is not a valid expression; ``col`` is the 1-based column of the problem."""

    def __init__(self, col: int, message: str) -> None:
        super().__init__(f"col {col}: {message}")
        self.col = col
        self.message = message


# --- syntax tree --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Num:
    value: Fraction
    text: str
    col: int = field(compare=False)


@dataclass(frozen=True, slots=True)
class Name:
    """A variable or a constant (``pi``, ``e``)."""

    name: str
    col: int = field(compare=False)


@dataclass(frozen=True, slots=True)
class Unary:
    op: str  # '-' or '+'
    operand: Node
    col: int = field(compare=False)


@dataclass(frozen=True, slots=True)
class Binary:
    op: str  # '+', '-', '*', '/', '**' ('^' is stored as '**')
    left: Node
    right: Node
    col: int = field(compare=False)


@dataclass(frozen=True, slots=True)
class Call:
    fn: str
    args: tuple[Node, ...]
    col: int = field(compare=False)


Node = Num | Name | Unary | Binary | Call


# --- tokens -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # 'num', 'name', 'op', 'end'
    text: str
    col: int


_OPS = ("**", "+", "-", "*", "/", "^", "(", ")", ",")


def _describe(tok: Token) -> str:
    return "end of input" if tok.kind == "end" else repr(tok.text)


_DIGITS = frozenset("0123456789")  # ASCII only: str.isdigit() also takes '²' and '⑴'
MAX_DIGITS = 1000  # digits of one number literal (float64 holds 17 significant ones)


def number_value(text: str, col: int) -> Fraction:
    """The exact value of the literal ``text``, refused (ExprError at ``col``) when it is
    not a float64: beyond its range, or nonzero but below its smallest subnormal. Works
    in time proportional to the text, whatever its exponent (``1e99999999999``)."""
    mantissa, _, exponent = text.lower().partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    if len(whole) + len(frac) > MAX_DIGITS:
        raise ExprError(col, f"number {text[:20]}... has more than {MAX_DIGITS} digits")
    if not digits:
        return Fraction(0)
    if len(exponent.lstrip("+-").lstrip("0")) > 6:
        power = 10**7 if not exponent.startswith("-") else -(10**7)
    else:
        power = int(exponent or "0")
    # value = 0.d1d2... x 10^(magnitude): d1 is the first nonzero digit
    magnitude = power + len(whole.lstrip("0")) if whole.lstrip("0") else power - (len(frac) - len(frac.lstrip("0")))
    if magnitude > 309:
        raise ExprError(col, f"number {_short(text)} is too large for float64 (max about 1.8e308)")
    if magnitude < -323:
        raise ExprError(col, f"number {_short(text)} is too small for float64: it would round to 0 "
                             "(smallest about 4.9e-324); write 0 if you mean 0")
    value = Fraction(text)
    if value > _FLOAT64_MAX:
        raise ExprError(col, f"number {_short(text)} is too large for float64 (max about 1.8e308)")
    if float(value) == 0.0:
        raise ExprError(col, f"number {_short(text)} is too small for float64: it would round to 0 "
                             "(smallest about 4.9e-324); write 0 if you mean 0")
    return value


def _short(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:10]}...{text[-10:]}"


def _number(text: str, i: int) -> int:
    """End index of the number starting at ``i`` (digits, optional fraction, exponent)."""
    n = len(text)
    j = i
    while j < n and text[j] in _DIGITS:
        j += 1
    if j < n and text[j] == ".":
        j += 1
        while j < n and text[j] in _DIGITS:
            j += 1
    if j < n and text[j] in "eE":
        k = j + 1
        if k < n and text[k] in "+-":
            k += 1
        if k < n and text[k] in _DIGITS:
            while k < n and text[k] in _DIGITS:
                k += 1
            j = k
        else:
            raise ExprError(k + 1, f"expected digits in the exponent of {text[i:k]!r}")
    return j


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text``, ending with an 'end' token."""
    return list(_tokens(text))


def _tokens(text: str) -> Iterator[Token]:
    """Tokens one at a time, so that the parser reports the leftmost problem first."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in _DIGITS or (c == "." and i + 1 < n and text[i + 1] in _DIGITS):
            j = _number(text, i)
            yield Token("num", text[i:j], i + 1)
            i = j
        elif c.isascii() and (c.isalpha() or c == "_"):
            j = i
            while j < n and text[j].isascii() and (text[j].isalnum() or text[j] == "_"):
                j += 1
            yield Token("name", text[i:j], i + 1)
            i = j
        else:
            op = next((o for o in _OPS if text.startswith(o, i)), None)
            if op is None:
                raise ExprError(i + 1, f"unexpected character {c!r}")
            yield Token("op", op, i + 1)
            i += len(op)
    yield Token("end", "", n + 1)


# --- parser -------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str, variables: Sequence[str] | None) -> None:
        self.toks = _tokens(text)
        self.tok = next(self.toks)
        self.depth = 0
        self.variables = None if variables is None else list(variables)
        self.functions = functions()

    def take(self) -> Token:
        t = self.tok
        if t.kind != "end":
            self.tok = next(self.toks)
        return t

    def at(self, *ops: str) -> bool:
        return self.tok.kind == "op" and self.tok.text in ops

    def expect(self, op: str, context: str) -> Token:
        if not self.at(op):
            raise ExprError(self.tok.col, f"expected {op!r} {context}, found {_describe(self.tok)}")
        return self.take()

    def parse(self) -> Node:
        if self.tok.kind == "end":
            raise ExprError(self.tok.col, "expected an expression, found end of input")
        node = self.expr()
        if self.tok.kind != "end":
            what = "')' without a matching '('" if self.at(")") else _describe(self.tok)
            raise ExprError(self.tok.col, f"expected an operator or end of input, found {what}")
        return node

    def expr(self) -> Node:
        node = self.term()
        while self.at("+", "-"):
            t = self.take()
            node = Binary(t.text, node, self.term(), t.col)
        return node

    def term(self) -> Node:
        node = self.unary()
        while self.at("*", "/"):
            t = self.take()
            node = Binary(t.text, node, self.unary(), t.col)
        return node

    def unary(self) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExprError(self.tok.col, f"expression nested more than {MAX_DEPTH} levels deep")
        try:
            if self.at("-", "+"):
                t = self.take()
                return Unary(t.text, self.unary(), t.col)
            base = self.atom()
            if self.at("**", "^"):
                t = self.take()
                return Binary("**", base, self.unary(), t.col)
            return base
        finally:
            self.depth -= 1

    def atom(self) -> Node:
        t = self.tok
        if t.kind == "num":
            self.take()
            return Num(number_value(t.text, t.col), t.text, t.col)
        if t.kind == "name":
            self.take()
            if self.at("("):
                return self.call(t)
            return self.name(t)
        if self.at("("):
            self.take()
            node = self.expr()
            self.expect(")", f"to close the '(' at col {t.col}")
            return node
        raise ExprError(t.col, f"expected a number, a name or '(', found {_describe(t)}")

    def name(self, t: Token) -> Name:
        if t.text in self.functions:
            raise ExprError(t.col, f"{t.text} is a function: write {t.text}(...)")
        if t.text in CONSTANTS or self.variables is None or t.text in self.variables:
            return Name(t.text, t.col)
        declared = ", ".join(self.variables) or "none"
        raise ExprError(t.col, f"unknown variable {t.text!r} (declared: {declared})")

    def call(self, t: Token) -> Call:
        if t.text not in self.functions:
            known = ", ".join(sorted(self.functions))
            raise ExprError(t.col, f"unknown function {t.text!r} (known: {known})")
        open_col = self.take().col
        args = [self.expr()]
        while self.at(","):
            self.take()
            args.append(self.expr())
        self.expect(")", f"to close the call of {t.text} at col {open_col}")
        arity = self.functions[t.text][0]
        if len(args) != arity:
            plural = "s" if arity > 1 else ""
            raise ExprError(t.col, f"{t.text} takes {arity} argument{plural}, got {len(args)}")
        for i in INTEGER_ARGUMENTS.get(t.text, ()) if _composite(t.text) else ():
            _check_integer_argument(t.text, i, args[i])
        return Call(t.text, tuple(args), t.col)


def _start(node: Node) -> int:
    """The column where ``node``'s text starts (a binary operation's is its left operand's)."""
    while isinstance(node, Binary):
        node = node.left
    return node.col


def _check_integer_argument(fn: str, i: int, arg: Node) -> None:
    """ExprError at ``arg`` unless it is a number that is a non-negative integer of at most
    ``MAX_INTEGER_ARGUMENT``: the order of polygamma, which no derivative may vary."""
    if isinstance(arg, Num) and arg.value.denominator == 1 and 0 <= arg.value <= MAX_INTEGER_ARGUMENT:
        return
    ordinal = ("first", "second", "third")[i]
    got = to_text(arg)
    raise ExprError(_start(arg), f"{fn}'s {ordinal} argument must be a constant non-negative integer (at most "
                                 f"{MAX_INTEGER_ARGUMENT}), such as {fn}(1, x); got {_short(got)}")


def parse(text: str, variables: Sequence[str] | None = None) -> Node:
    """Parse ``text``. With ``variables``, any other name is an error; without, any
    name that is not a constant is a variable (see ``free_variables``)."""
    if not isinstance(text, str):
        raise TypeError(f"parse takes a string, got {type(text).__name__}")
    return _Parser(text, variables).parse()


# --- walking and converting ---------------------------------------------------


def children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Unary):
        return (node.operand,)
    if isinstance(node, Binary):
        return (node.left, node.right)
    if isinstance(node, Call):
        return node.args
    return ()


def walk(node: Node) -> Iterator[Node]:
    """Every node of the tree, pre-order, without recursion."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(children(n)))


def fold(node: Node, leaf: Callable[[Node], Any], combine: Callable[[Node, list[Any]], Any]) -> Any:
    """Bottom-up evaluation without recursion (left-nested sums can be very deep)."""
    values: list[Any] = []
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        n, expanded = stack.pop()
        kids = children(n)
        if not kids:
            values.append(leaf(n))
        elif expanded:
            args = values[len(values) - len(kids):]
            del values[len(values) - len(kids):]
            values.append(combine(n, args))
        else:
            stack.append((n, True))
            stack.extend((k, False) for k in reversed(kids))
    return values[0]


def free_variables(node: Node) -> list[str]:
    """Variable names in order of first appearance (constants excluded)."""
    seen: dict[str, None] = {}
    for n in walk(node):
        if isinstance(n, Name) and n.name not in CONSTANTS:
            seen.setdefault(n.name, None)
    return list(seen)


def _arith(op: str, a: Any, b: Any) -> Any:
    if type(a) is float and type(b) is float:
        # Constant parts of a formula follow float64 (IEEE) arithmetic: 2^10000 is inf
        # and 1/0 is inf, as they would be at run time, not Python exceptions.
        with np.errstate(all="ignore"):
            return float(_arith(op, np.float64(a), np.float64(b)))
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a / b
    return a**b


def to_function(
    node: Node, variables: Sequence[str], module: ModuleType | None = None
) -> Callable[..., Any]:
    """A function of the variables (positionally, in ``variables`` order) computing the
    expression with ``module`` (default ``tidu.numpy``, so tidu can trace it; plain
    ``numpy`` works too). Numbers and constants are Python floats."""
    unknown = [v for v in free_variables(node) if v not in variables]
    if unknown:
        raise ValueError(f"variables {', '.join(unknown)} are not in {list(variables)}")
    names = list(variables)

    def fn(*args: Any) -> Any:
        if len(args) != len(names):
            want = f"{len(names)} argument(s) ({', '.join(names)})"
            raise TypeError(f"expected {want}, got {len(args)}")
        mod = tnp if module is None else module
        fns = functions()
        env = dict(zip(names, args, strict=True))

        def leaf(n: Node) -> Any:
            if isinstance(n, Num):
                return float(n.value)
            assert isinstance(n, Name)
            return CONSTANTS[n.name] if n.name in CONSTANTS else env[n.name]

        def combine(n: Node, vals: list[Any]) -> Any:
            if isinstance(n, Unary):
                return -vals[0] if n.op == "-" else vals[0]
            if isinstance(n, Binary):
                return _arith(n.op, vals[0], vals[1])
            assert isinstance(n, Call)
            composite = _composite(n.fn)
            if composite is not None:
                return composite_function(n.fn, mod)(*vals)
            return function_of(fns[n.fn][1], mod)(*vals)

        return fold(node, leaf, combine)

    fn.__doc__ = f"The expression {to_text(node)} of ({', '.join(names)})."
    return name_parameters(fn, names, "expr_fn")


def name_parameters(fn: Callable[..., Any], names: Sequence[str], name: str) -> Callable[..., Any]:
    """Give ``fn(*args)`` the signature ``name(<names>)``, so that tidu names the graph
    inputs after the variables (when they are valid Python parameter names)."""
    fn.__name__ = fn.__qualname__ = name
    if all(n.isidentifier() and not keyword.iskeyword(n) for n in names) and \
            len(set(names)) == len(names):
        kind = inspect.Parameter.POSITIONAL_ONLY
        fn.__signature__ = inspect.Signature([inspect.Parameter(n, kind) for n in names])
    return fn


def to_sympy(node: Node, symbols: Mapping[str, Any] | None = None) -> Any:
    """The expression as SymPy, built from constructors. Variables are ``symbols[name]``
    when given, else real ``sympy.Symbol``s."""
    cat, fns = catalog(), functions()
    syms = dict(symbols or {})
    consts = {"pi": sympy.pi, "e": sympy.E}

    def leaf(n: Node) -> Any:
        if isinstance(n, Num):
            return sympy.Rational(n.value.numerator, n.value.denominator)
        assert isinstance(n, Name)
        if n.name in consts:
            return consts[n.name]
        if n.name not in syms:
            syms[n.name] = sympy.Symbol(n.name, real=True)
        return syms[n.name]

    def combine(n: Node, vals: list[Any]) -> Any:
        if isinstance(n, Unary):
            return -vals[0] if n.op == "-" else vals[0]
        if isinstance(n, Binary):
            _check_exact_size(n, vals[0], vals[1])
            return _arith(n.op, vals[0], vals[1])
        assert isinstance(n, Call)
        composite = _composite(n.fn)
        if composite is not None:
            return composite[2](*vals)
        return meaning_sympy(cat.get_primitive(fns[n.fn][1]), vals)

    return fold(node, leaf, combine)


# SymPy computes arithmetic on exact numbers at once, whatever their size: 10**10**10
# would run out of memory (or time) before anything is printed, and Python refuses to
# print an int of more than 4,300 digits. Digits an exact constant may have in SymPy
# (numerator and denominator each); float64 holds 309 at most.
MAX_EXACT_DIGITS = 4_000


def _bits(r: Any) -> int:
    return max(int(r.p).bit_length(), int(r.q).bit_length())


def _check_exact_size(n: Binary, a: Any, b: Any) -> None:
    """ExprError at ``n`` when SymPy's exact result of ``a n.op b`` (both Rationals) would
    have more than ``MAX_EXACT_DIGITS`` digits; estimated (in bits) before computing it."""
    if not (isinstance(a, sympy.Rational) and isinstance(b, sympy.Rational)):
        return
    if n.op == "**":
        if abs(a.p) == a.q or a.p == 0:  # 0, 1, -1: every power is small
            return
        # a**(p/q) is a**(p//q) times a root: the integer part decides the size
        estimate = abs(int(b.p) // int(b.q)) * math.log2(max(abs(int(a.p)), int(a.q)))
    else:
        estimate = _bits(a) + _bits(b)  # a sum's denominator is at most the product's
    if estimate > MAX_EXACT_DIGITS * math.log2(10):
        raise ExprError(n.col, f"{_short(to_text(n))} has too many digits to compute exactly (more than "
                               f"{MAX_EXACT_DIGITS:,}; float64 holds about 1.8e308); write a smaller constant")


def euler_as_e(e: Any) -> Any:
    """``e`` (a SymPy expression) with Euler's number as this language writes it: SymPy
    prints it ``E``, which here is a variable (``tidu diff "E*e" --wrt E`` is ``e``, not the
    variable ``E``), so it becomes the symbol ``e``, printed ``e`` (LaTeX: ``e``) and read
    back as the constant. For printing only."""
    if isinstance(e, sympy.Basic) and e.has(sympy.E):
        return e.xreplace({sympy.E: sympy.Symbol("e", positive=True)})
    return e


_PREC = {"+": 1, "-": 1, "*": 2, "/": 2, "u": 3, "**": 4}


def to_text(node: Node) -> str:
    """Canonical text with minimal parentheses; parses back to the same tree."""

    def leaf(n: Node) -> tuple[str, int]:
        return (n.text if isinstance(n, Num) else n.name), 5  # type: ignore[union-attr]

    def combine(n: Node, vals: list[tuple[str, int]]) -> tuple[str, int]:
        if isinstance(n, Call):
            return f"{n.fn}({', '.join(v for v, _ in vals)})", 5
        if isinstance(n, Unary):
            s, p = vals[0]
            return n.op + (s if p >= _PREC["u"] else f"({s})"), _PREC["u"]
        (ls, lp), (rs, rp) = vals
        p = _PREC[n.op]
        if n.op == "**":  # right-associative; a signed exponent needs no parentheses
            left = ls if lp > p else f"({ls})"
            return f"{left}**{rs if rp >= _PREC['u'] else f'({rs})'}", p
        left = ls if lp >= p else f"({ls})"
        right = rs if rp > p else f"({rs})"
        return f"{left} {n.op} {right}", p

    return fold(node, leaf, combine)[0]


__all__ = [
    "ALIASES", "COMPOSITES", "CONSTANTS", "INTEGER_ARGUMENTS", "LEFT_OUT", "MAX_INTEGER_ARGUMENT",
    "OPERATOR_PRIMITIVES", "Binary", "Call", "ExprError", "Name", "Node", "Num", "Unary", "children",
    "composite_function", "euler_as_e", "fold", "free_variables", "function_of", "functions", "name_parameters",
    "parse", "special_module", "to_function", "to_sympy", "to_text", "tokenize", "walk",
]
