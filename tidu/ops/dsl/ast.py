"""Syntax tree of the rule DSL (see docs/rules.md for the grammar)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Loc:
    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class RuleSyntaxError(ValueError):
    """A rule file does not parse or does not check; the message starts with file:line:col."""

    def __init__(self, loc: Loc, message: str) -> None:
        super().__init__(f"{loc}: {message}")
        self.loc = loc
        self.message = message


# --- expressions (templates, patterns, meanings) ---------------------------


@dataclass(frozen=True, slots=True)
class Num:
    value: complex | float | int
    loc: Loc


@dataclass(frozen=True, slots=True)
class Var:
    name: str
    loc: Loc


@dataclass(frozen=True, slots=True)
class Splat:
    """``xs...`` inside a call: the operands of a variadic parameter."""

    name: str
    loc: Loc


@dataclass(frozen=True, slots=True)
class Call:
    fn: str
    args: tuple[Expr, ...]
    attrs: tuple[tuple[str, AttrExpr], ...]
    loc: Loc


Expr = Num | Var | Splat | Call

# --- attribute expressions ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class AConst:
    value: int | float | str | bool
    loc: Loc


@dataclass(frozen=True, slots=True)
class AName:
    name: str
    loc: Loc


@dataclass(frozen=True, slots=True)
class ATuple:
    items: tuple[AttrExpr, ...]
    loc: Loc


@dataclass(frozen=True, slots=True)
class AFn:
    fn: str
    args: tuple[AttrExpr, ...]
    loc: Loc


AttrExpr = AConst | AName | ATuple | AFn

# --- declarations -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Guard:
    name: str
    args: tuple[str, ...]
    loc: Loc


@dataclass(frozen=True, slots=True)
class Rewrite:
    lhs: Expr
    rhs: Expr
    guards: tuple[Guard, ...]
    loc: Loc
    # "exact" (IEEE-exact, the default) or "real" (valid for finite real/complex numbers)
    semantics: str = "exact"
    # a real law applied by the e-graph's normalizer, not compiled to an egglog rule
    by_normalizer: bool = False
    # ``exempt "why"``: the mathematical argument for a rule the checker cannot confirm
    exempt: str | None = None
    # ``rewrite merge:``: applies only where the replacement is in the e-graph already,
    # merging the two classes (adds no e-node)
    merge: bool = False


@dataclass(frozen=True, slots=True)
class OperandRule:
    """``jvp x: T`` or ``transpose x: T``; operand is None for a whole-op ``jvp: T``;
    template None means ``zero`` (no contribution); a jvp may be guarded (``when``)."""

    operand: str | None
    template: Expr | None
    loc: Loc
    # ``jvp: T when real(x)``: this rule applies where its guards hold (static guards on
    # the operands' avals); the same operand's unguarded rule applies elsewhere
    guards: tuple[Guard, ...] = ()
    exempt: str | None = None  # ``exempt "why"`` (see Rewrite)


@dataclass(slots=True)
class PrimitiveDecl:
    name: str
    operands: tuple[str, ...]
    variadic: bool
    attrs: tuple[str, ...]
    loc: Loc
    doc: str = ""
    type_rule: str = ""
    dtypes: tuple[str, ...] = ()
    meaning: Expr | None = None
    # ``numpy scipy.special.erf``: the NumPy kernel, a dotted name (never evaluated)
    numpy: tuple[str, Loc] | None = None
    # ``stablehlo chlo.erf``: the StableHLO (or CHLO) op this primitive lowers to
    stablehlo: tuple[str, Loc] | None = None
    # ``c exp`` / ``c meaning``: the C function (by its double-precision libm name, or one
    # of the C back end's helpers) or the meaning, written in C (lowering/c_source.py)
    c: tuple[str, Loc] | None = None
    jvps: list[OperandRule] = field(default_factory=list)
    transposes: list[OperandRule] = field(default_factory=list)
    rewrites: list[Rewrite] = field(default_factory=list)
    # the names its ``let`` lines bound (already written out into the templates): kept so
    # that the catalog can refuse one that is also a primitive of another file
    lets: dict[str, Loc] = field(default_factory=dict)


@dataclass(slots=True)
class RuleFile:
    path: str
    primitives: list[PrimitiveDecl]
    rewrites: list[Rewrite]  # free-standing rewrites (not under one primitive)


def walk(e: Expr):
    """Yield every sub-expression of ``e`` (pre-order), without recursion."""
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, Call):
            stack.extend(reversed(node.args))


def show(e: Expr) -> str:
    """Print an expression back in DSL syntax (calls only, no infix sugar)."""
    if isinstance(e, Num):
        return repr(e.value)
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Splat):
        return f"{e.name}..."
    args = ", ".join(show(a) for a in e.args)
    attrs = ", ".join(f"{k}={show_attr(v)}" for k, v in e.attrs)
    return f"{e.fn}({args})" + (f"[{attrs}]" if attrs else "")


def show_attr(a: AttrExpr) -> str:
    if isinstance(a, AConst):
        return repr(a.value)
    if isinstance(a, AName):
        return a.name
    if isinstance(a, ATuple):
        return "(" + ", ".join(show_attr(x) for x in a.items) + ("," if len(a.items) == 1 else "") + ")"
    return f"{a.fn}(" + ", ".join(show_attr(x) for x in a.args) + ")"
