"""The primitive catalog, loaded from the rule files in ``rules/``.

Each ``primitive`` declaration becomes a ``Primitive``: its operands and attributes,
its type rule, its meaning, JVP and transpose templates and its rewrites. Loading
checks every template against the catalog (known ops, arities, names in scope,
attribute functions, guards) and reports problems at ``file:line:col``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import itertools
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from tidu.core.keys import NO_ATTRS, Attrs, Aval
from tidu.ops.dsl.ast import (
    AFn,
    AName,
    AttrExpr,
    ATuple,
    Call,
    Expr,
    Loc,
    OperandRule,
    PrimitiveDecl,
    Rewrite,
    RuleSyntaxError,
    Splat,
    Var,
    walk,
)
from tidu.ops.dsl.attrfns import ATTR_FUNCTIONS, AVAL_FUNCTIONS
from tidu.ops.dsl.guards import GUARDS
from tidu.ops.dsl.parse import parse_rules
from tidu.ops.type_rules import DTYPE_CLASSES, TYPE_RULES, TypeRule, TypeRuleError


class OpError(TypeError):
    """An op was built with operands or attributes its primitive does not accept."""


@dataclass(eq=False)
class Primitive:
    name: str
    operands: tuple[str, ...]
    variadic: bool
    attrs: tuple[str, ...]
    type_rule: TypeRule
    dtypes: frozenset[str]
    decl: PrimitiveDecl
    jvp: dict[str | None, OperandRule] = field(default_factory=dict)
    # guarded alternatives (``jvp: zero when real(x)``), tried in order before ``jvp``
    jvp_when: dict[str | None, list[OperandRule]] = field(default_factory=dict)
    transpose: dict[str, OperandRule] = field(default_factory=dict)
    rewrites: list[Rewrite] = field(default_factory=list)
    # the ``numpy`` clause's function (resolved when loaded), or ``numpy meaning`` (the
    # meaning read as NumPy code is exact), and the ``stablehlo`` clause's op
    numpy_fn: Callable[..., Any] | None = None
    numpy_meaning: bool = False
    stablehlo_op: str | None = None
    # the ``c`` clause: a C function name (``exp``; the C back end knows which) or "meaning"
    c_function: str | None = None
    # declared in a rule file shipped with tidu: its ``numpy`` function returns the declared
    # dtype and shape (the lowerings inline it), its ``stablehlo`` op has the short syntax
    builtin: bool = False
    # the executable meaning (tidu.ops.kernels), made on first use
    kernel: Callable[..., Any] | None = field(default=None, repr=False)
    impl: Callable[..., Any] | None = field(default=None, repr=False)  # reference.impl_of's

    @property
    def loc(self) -> Loc:
        return self.decl.loc

    def jvp_rule(self, operand: str | None, avals: Mapping[str, Any]) -> OperandRule | None:
        """The JVP rule for ``operand`` (None: the whole-op rule) at these operand avals (by
        name): the first guarded alternative whose guards hold, else the unguarded rule."""
        for rule in self.jvp_when.get(operand, ()):
            if all(GUARDS[g.name](_AvalOf(avals[g.args[0]])) for g in rule.guards):
                return rule
        return self.jvp.get(operand)

    def operand_name(self, i: int) -> str:
        """The declared name of operand ``i`` (the variadic name for every extra one)."""
        return self.operands[min(i, len(self.operands) - 1)] if self.variadic else self.operands[i]

    def infer(self, avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
        """Output avals for these operand avals and attributes, or a clear ``OpError``."""
        n = len(self.operands)
        if (len(avals) != n) if not self.variadic else (len(avals) < n - 1 or len(avals) == 0):
            want = f"{n}" if not self.variadic else f"at least {max(1, n - 1)}"
            raise OpError(f"{self.name} takes {want} operand(s), got {len(avals)}")
        got, want = set(attrs.keys()), set(self.attrs)
        if got != want:
            parts = []
            if want - got:
                parts.append("missing " + ", ".join(sorted(want - got)))
            if got - want:
                parts.append("unknown " + ", ".join(sorted(got - want)))
            raise OpError(f"{self.name}: {'; '.join(parts)} attribute(s) (declared: {', '.join(self.attrs) or 'none'})")
        for a in avals:
            if a.dtype not in self.dtypes:
                raise OpError(
                    f"{self.name} does not accept dtype {a.dtype} (accepts {', '.join(sorted(self.dtypes))})"
                )
        try:
            return self.type_rule(avals, attrs)
        except (TypeRuleError, KeyError, TypeError, ValueError) as e:
            raise OpError(f"{self.name}({', '.join(map(str, avals))}) [{attrs}]: {e}") from None


class InternalPrimitive:
    """An op the front end adds to graphs for itself, not part of any rule catalog:
    ``stop_gradient`` and the calls of ``custom_jvp``/``custom_vjp`` functions
    (tidu.transforms.custom). Their derivatives are Python callbacks (``jvp``, ``transpose``,
    ``batch``), and ``materialize_merge`` removes them (``strip``: the operand that
    stands for the value) before anything is simplified or lowered. The control-flow ops
    (tidu.ops.control) are internal ops that stay (``strip=None``): the e-graph keeps them
    as they are and the back ends run them."""

    variadic = True

    def __init__(self, name: str, attrs: tuple[str, ...], infer: Callable[[Sequence[Aval], Attrs], list[Aval]],
                 *, jvp: Callable[..., Any], batch: Callable[..., Any], transpose: Callable[..., Any] | None = None,
                 strip: Callable[[Attrs], int] | str | None = "") -> None:
        self.name, self.attrs, self.operands = name, attrs, ("xs",)
        self._infer = infer
        self.jvp, self.batch, self.transpose, self.strip = jvp, batch, transpose, strip

    def operand_name(self, i: int) -> str:
        return "xs"

    def infer(self, avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
        if set(attrs.keys()) != set(self.attrs):
            raise OpError(f"{self.name} takes the attributes {', '.join(self.attrs)}, got {', '.join(attrs)}")
        return self._infer(avals, attrs)


INTERNAL: dict[str, InternalPrimitive] = {}


def register_internal(prim: InternalPrimitive) -> None:
    """Make ``prim`` known to every catalog (tidu.transforms.custom registers its ops on import)."""
    INTERNAL[prim.name] = prim


_SERIALS = itertools.count(1)


class Catalog(dict[str, Primitive]):
    """Primitives by name, plus the free-standing rewrites of the loaded files."""

    def __init__(self) -> None:
        super().__init__()
        self.free_rewrites: list[Rewrite] = []
        self.files: list[str] = []
        self.sources: list[tuple[str, str]] = []  # (path, text) of the files, in order
        # rewrites of files not shipped with tidu are unchecked until a soundness check
        # passes ("checked") or the caller vouches for the file ("trusted"); the e-graph
        # refuses a catalog with unchecked ones (tidu.simplify.vetting)
        self.rewrite_sources: list[tuple[str, str]] = []  # (path, text) of such files with rewrites
        self.vetted: dict[tuple[str, str], str] = {}  # (path, text) -> "checked" | "trusted"
        # a number no other catalog of this process has: what caches key on
        self.serial = next(_SERIALS)
        # infer_avals' memo: on the catalog, so it goes with it and never serves another
        self.inferred: dict[tuple, list[Aval]] = {}
        # op -> (arity, dtypes) of an elementwise primitive without attributes, else None
        self.same_aval: dict[str, tuple[int, frozenset[str]] | None] = {}
        # instantiate's compiled rule templates, by the template's id (with the template)
        self.templates: dict[int, tuple[Any, Any]] = {}

    def get_primitive(self, name: str) -> Primitive:
        try:
            return self[name]
        except KeyError:
            internal = INTERNAL.get(name)
            if internal is not None:
                return internal  # type: ignore[return-value]
            raise OpError(f"unknown primitive {name!r}; known: {', '.join(sorted(self))}") from None

    def all_rewrites(self) -> list[Rewrite]:
        out = [r for p in self.values() for r in p.rewrites]
        return out + self.free_rewrites

    def unvetted(self) -> list[tuple[str, str]]:
        """(path, text) of the non-built-in files whose rewrites were neither checked nor trusted."""
        return [s for s in self.rewrite_sources if s not in self.vetted]

    def vet(self, sources: Iterable[tuple[str, str]], how: str) -> None:
        """Record that the rewrites of ``sources`` passed the soundness check (``how`` =
        "checked") or that the caller trusts them ("trusted")."""
        if how not in ("checked", "trusted"):
            raise ValueError(f"vet: {how!r} is neither 'checked' nor 'trusted'")
        for s in sources:
            if s in self.rewrite_sources and self.vetted.get(s) != "checked":
                self.vetted[s] = how


JVP_GUARDS = ("real",)  # guards a jvp rule may carry: decided by the operands' avals


class _AvalOf:
    """What a dtype guard reads (``.aval``) of an operand known by its aval only."""

    __slots__ = ("aval",)

    def __init__(self, aval: Any) -> None:
        self.aval = aval[0] if isinstance(aval, list) else aval  # variadic: the first


def _declare(decl: PrimitiveDecl) -> Primitive:
    if not decl.type_rule:
        raise RuleSyntaxError(decl.loc, f"primitive {decl.name} needs a 'type' clause")
    if decl.type_rule not in TYPE_RULES:
        raise RuleSyntaxError(
            decl.loc, f"unknown type rule {decl.type_rule!r}; known: {', '.join(sorted(TYPE_RULES))}"
        )
    dtypes: set[str] = set()
    for c in decl.dtypes or ("any",):
        if c not in DTYPE_CLASSES:
            raise RuleSyntaxError(decl.loc, f"unknown dtype class {c!r}; known: {', '.join(DTYPE_CLASSES)}")
        dtypes |= DTYPE_CLASSES[c]
    prim = Primitive(
        decl.name, decl.operands, decl.variadic, decl.attrs, TYPE_RULES[decl.type_rule],
        frozenset(dtypes), decl,
    )
    for rule in decl.jvps:
        if rule.operand is not None and rule.operand not in decl.operands:
            raise RuleSyntaxError(rule.loc, f"{decl.name} has no operand {rule.operand!r}")
        if rule.guards:
            for g in rule.guards:
                if g.name not in JVP_GUARDS:
                    raise RuleSyntaxError(g.loc, f"a jvp rule can only be guarded by {', '.join(JVP_GUARDS)} "
                                                 f"(decided by the operands' dtypes), not {g.name!r}")
                if any(a not in decl.operands for a in g.args):
                    raise RuleSyntaxError(g.loc, f"the guard {g.name} of a jvp rule takes operands of "
                                                 f"{decl.name} ({', '.join(decl.operands)})")
            prim.jvp_when.setdefault(rule.operand, []).append(rule)
            continue
        if rule.operand in prim.jvp:
            raise RuleSyntaxError(rule.loc, f"second jvp rule for {rule.operand or 'the whole op'}")
        prim.jvp[rule.operand] = rule
    if None in prim.jvp and len(prim.jvp) > 1:
        raise RuleSyntaxError(decl.loc, f"{decl.name}: use either one whole-op 'jvp:' or per-operand rules")
    for operand, rules in prim.jvp_when.items():
        if operand not in prim.jvp:
            raise RuleSyntaxError(rules[0].loc, f"a guarded jvp rule needs an unguarded one for "
                                                f"{operand or 'the whole op'} after it (where the guard fails)")
    for rule in decl.transposes:
        if rule.operand not in decl.operands:
            raise RuleSyntaxError(rule.loc, f"{decl.name} has no operand {rule.operand!r}")
        if rule.operand in prim.transpose:
            raise RuleSyntaxError(rule.loc, f"second transpose rule for operand {rule.operand}")
        prim.transpose[rule.operand] = rule
    prim.rewrites = list(decl.rewrites)
    if decl.numpy is not None and decl.numpy[0] == "meaning":
        if decl.meaning is None or decl.variadic:
            raise RuleSyntaxError(decl.numpy[1], f"'numpy meaning' runs the meaning as NumPy code: {decl.name} "
                                                 "needs a meaning (and fixed operands)")
        prim.numpy_meaning = True
    elif decl.numpy is not None:
        prim.numpy_fn = _numpy_function(*decl.numpy)
    if decl.stablehlo is not None:
        name, loc = decl.stablehlo
        if not _STABLEHLO_OP.fullmatch(name):
            raise RuleSyntaxError(loc, f"{name!r} is not a StableHLO op name: write stablehlo.NAME or chlo.NAME "
                                       "(e.g. stablehlo.logistic, chlo.erf)")
        prim.stablehlo_op = name
    if decl.c is not None:
        name, loc = decl.c
        if name == "meaning" and (decl.meaning is None or decl.variadic):
            raise RuleSyntaxError(loc, f"'c meaning' writes the meaning in C: {decl.name} needs a meaning "
                                       "(and fixed operands)")
        prim.c_function = name
    return prim


# where a ``numpy`` clause may find its function (tidu: the built-in structural kernels of
# tidu.ops.reference; builtins: Python's abs, which rounds NumPy scalars as the generated code does)
NUMPY_MODULES = ("numpy", "scipy", "tidu", "builtins")
_STABLEHLO_OP = re.compile(r"(stablehlo|chlo)\.[a-z_][a-z0-9_]*")


def _numpy_function(name: str, loc: Loc) -> Callable[..., Any]:
    """The function a ``numpy`` clause names (``scipy.special.erf``): its module imported,
    then attributes looked up; the name is never evaluated. (``numpy meaning`` is handled
    by the caller.)"""
    parts = name.split(".")
    if parts[0] not in NUMPY_MODULES or len(parts) < 2:
        raise RuleSyntaxError(loc, f"numpy {name}: name a function of {' or '.join(NUMPY_MODULES)}, "
                                   "e.g. numpy.arctan2 or scipy.special.erf (or 'numpy meaning')")
    obj: Any = None
    for k in range(len(parts) - 1, 0, -1):  # the longest importable module prefix
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for attr in parts[k:]:
            obj = getattr(obj, attr, None)
            if obj is None:
                break
        break
    if obj is None or not callable(obj) or isinstance(obj, type):
        raise RuleSyntaxError(loc, f"numpy {name}: no such function (the name is looked up in the "
                                   f"{parts[0]} package, e.g. numpy.arctan2, scipy.special.erf)")
    return obj


# --- checking templates against the catalog ------------------------------------


def _check_attr(a: AttrExpr, scope: set[str], operands: set[str]) -> None:
    stack = [a]
    while stack:
        a = stack.pop()
        if isinstance(a, AName) and a.name not in scope:
            known = ", ".join(sorted(scope)) or "none"
            raise RuleSyntaxError(a.loc, f"unknown attribute name {a.name!r} (in scope: {known})")
        if isinstance(a, ATuple):
            stack.extend(a.items)
        if isinstance(a, AFn):
            if a.fn not in ATTR_FUNCTIONS:
                known = ", ".join(sorted(ATTR_FUNCTIONS))
                raise RuleSyntaxError(a.loc, f"unknown attribute function {a.fn!r}; known: {known}")
            if a.fn in AVAL_FUNCTIONS:
                if len(a.args) != 1 or not isinstance(a.args[0], AName) or a.args[0].name not in operands:
                    raise RuleSyntaxError(a.loc, f"{a.fn}(...) takes one operand name ({', '.join(sorted(operands))})")
                continue
            stack.extend(a.args)


def check_template(
    cat: Catalog, e: Expr, names: set[str], attr_scope: set[str], operands: set[str],
    inherit: set[str], what: str, pattern: bool = False,
) -> None:
    """Check that ``e`` only uses catalog ops, names in ``names`` and valid attributes."""
    for node in walk(e):
        if isinstance(node, Var):
            if node.name not in names and not pattern:
                raise RuleSyntaxError(
                    node.loc, f"unknown name {node.name!r} in {what} (in scope: {', '.join(sorted(names))})"
                )
        elif isinstance(node, Splat):
            if node.name not in names:
                raise RuleSyntaxError(node.loc, f"unknown variadic name {node.name!r} in {what}")
        elif isinstance(node, Call):
            if node.fn not in cat:
                raise RuleSyntaxError(node.loc, f"unknown primitive {node.fn!r} in {what}")
            callee = cat[node.fn]
            has_splat = any(isinstance(a, Splat) for a in node.args)
            if not has_splat and not callee.variadic and len(node.args) != len(callee.operands):
                raise RuleSyntaxError(
                    node.loc, f"{node.fn} takes {len(callee.operands)} operand(s), got {len(node.args)}"
                )
            given = {k for k, _ in node.attrs}
            for k, v in node.attrs:
                if k not in callee.attrs:
                    raise RuleSyntaxError(v.loc, f"{node.fn} has no attribute {k!r}")
                if pattern:
                    raise RuleSyntaxError(v.loc, "attributes cannot be matched in rewrite patterns")
                _check_attr(v, attr_scope, operands)
            missing = [a for a in callee.attrs if a not in given and a not in inherit]
            if missing and not pattern:  # in a pattern, an attribute left out matches any value
                raise RuleSyntaxError(
                    node.loc, f"{node.fn} needs attribute(s) {', '.join(missing)} (none to inherit here)"
                )


def _check_primitive(cat: Catalog, prim: Primitive) -> None:
    for name, loc in prim.decl.lets.items():  # the parser knows only its own file's primitives
        if name in cat:
            raise RuleSyntaxError(loc, f"let {name} clashes with the primitive declared at {cat[name].loc}: "
                                       "give the let another name")
    ops = set(prim.operands)
    attr_scope = set(prim.attrs)
    tangents = {"d" + o for o in prim.operands}
    if prim.variadic:
        attr_scope.add("i")
    for rule in [*prim.jvp.values(), *(r for rs in prim.jvp_when.values() for r in rs)]:
        if rule.template is not None:
            check_template(cat, rule.template, ops | tangents | {"out"}, attr_scope, ops | {"out"},
                           set(prim.attrs), f"the jvp of {prim.name}")
    for rule in prim.transpose.values():
        if rule.template is not None:
            allowed = (ops - {rule.operand}) | {"ct"}
            check_template(cat, rule.template, allowed, attr_scope, ops | {"ct"}, set(prim.attrs),
                           f"the transpose of {prim.name} for {rule.operand}")
    if prim.decl.meaning is not None:
        for node in walk(prim.decl.meaning):
            if isinstance(node, Var) and node.name not in ops:
                raise RuleSyntaxError(node.loc, f"unknown name {node.name!r} in the meaning of {prim.name} "
                                                f"(in scope: its operands {', '.join(prim.operands)}, pi, e)")


def check_rewrite(cat: Catalog, rw: Rewrite) -> None:
    if not isinstance(rw.lhs, Call):
        raise RuleSyntaxError(rw.loc, "a rewrite's pattern must start with an op")
    check_template(cat, rw.lhs, set(), set(), set(), set(cat[rw.lhs.fn].attrs) if rw.lhs.fn in cat else set(),
                   "a rewrite pattern", pattern=True)
    pattern_vars = {n.name for n in walk(rw.lhs) if isinstance(n, Var)}
    root_attrs = set(cat[rw.lhs.fn].attrs)
    for node in walk(rw.rhs):
        if isinstance(node, Var) and node.name not in pattern_vars:
            raise RuleSyntaxError(node.loc, f"{node.name!r} is not bound by the pattern")
        if isinstance(node, Call):
            if node.fn not in cat:
                raise RuleSyntaxError(node.loc, f"unknown primitive {node.fn!r} in a rewrite")
            if node.attrs:
                raise RuleSyntaxError(
                    node.loc, "rewrite replacements cannot set attributes; they inherit the pattern root's"
                )
            missing = set(cat[node.fn].attrs) - root_attrs
            if missing:
                names = ", ".join(sorted(missing))
                raise RuleSyntaxError(node.loc, f"{node.fn} needs attribute(s) {names} the pattern root lacks")
    for g in rw.guards:
        if g.name not in GUARDS:
            raise RuleSyntaxError(g.loc, f"unknown guard {g.name!r}; known: {', '.join(sorted(GUARDS))}")
        for a in g.args:
            if a != "self" and a not in pattern_vars:
                raise RuleSyntaxError(g.loc, f"guard argument {a!r} is not a pattern variable (or self)")


# --- loading --------------------------------------------------------------------


def builtin_rule_files() -> list[tuple[str, str]]:
    """(display path, text) of the rule files shipped in ``tidu.rules``."""
    root = resources.files("tidu.rules")
    out = []
    for entry in sorted(root.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".rules"):
            out.append((f"rules/{entry.name}", entry.read_text(encoding="utf-8")))
    return out


@functools.cache
def _shipped() -> dict[str, str]:
    return dict(builtin_rule_files())


def load_catalog(files: Iterable[tuple[str, str]], trusted: bool = False) -> Catalog:
    """Parse and check rule files given as (path, text); raises ``RuleSyntaxError``.

    The rewrites of files not shipped with tidu are not checked for soundness here (that
    needs the rule checker): the e-graph refuses them until ``tidu.checkrules.vet_catalog``
    has checked them, unless ``trusted`` says the caller vouches for every file."""
    cat = Catalog()
    parsed = []
    for path, text in files:
        rf = parse_rules(text, path)
        parsed.append(rf)
        cat.files.append(path)
        cat.sources.append((path, text))
        builtin = _shipped().get(path) == text
        for decl in rf.primitives:
            if decl.name in cat:
                raise RuleSyntaxError(decl.loc, f"primitive {decl.name} is already declared at {cat[decl.name].loc}")
            cat[decl.name] = _declare(decl)
            cat[decl.name].builtin = builtin
        cat.free_rewrites.extend(rf.rewrites)
        if not builtin and (rf.rewrites or any(d.rewrites for d in rf.primitives)):
            cat.rewrite_sources.append((path, text))
    for prim in cat.values():
        _check_primitive(cat, prim)
    for rw in cat.all_rewrites():
        check_rewrite(cat, rw)
    if trusted:
        cat.vet(cat.rewrite_sources, "trusted")
    return cat


def shipped_path(path: str | Path) -> str | None:
    """The display path (``rules/linalg.rules``) of a built-in rule file that ``path`` is
    (the same name and text), else None."""
    p = Path(path)
    name = f"rules/{p.name}"
    text = _shipped().get(name)
    try:
        return name if text is not None and p.read_text(encoding="utf-8") == text else None
    except (OSError, UnicodeDecodeError):
        return None


def load_rule_paths(paths: Iterable[str | Path], include_builtin: bool = True, trusted: bool = False) -> Catalog:
    """The catalog of the rule files at ``paths``, with the built-in ones unless
    ``include_builtin`` is false; a path that is a built-in file (``rules/fft.rules``) is
    that file, loaded once."""
    files = builtin_rule_files() if include_builtin else []
    for p in paths:
        p = Path(p)
        if include_builtin and shipped_path(p) is not None:
            continue
        try:
            data = p.read_bytes()
        except OSError as e:
            raise FileNotFoundError(f"cannot read rule file {p}: {e.strerror}") from None
        try:
            files.append((str(p), data.decode("utf-8")))
        except UnicodeDecodeError as e:
            line = data.count(b"\n", 0, e.start) + 1
            col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
            raise RuleSyntaxError(Loc(str(p), line, col), f"not UTF-8 text ({e.reason}: byte "
                                  f"0x{data[e.start]:02x}); save the file as UTF-8") from None
    return load_catalog(files, trusted=trusted)


_BUILTIN: Catalog | None = None
_BUILTIN_LOCK = threading.Lock()
# use_catalog's catalog, per thread (and asyncio task); None means the built-in one
_ACTIVE: ContextVar[Catalog | None] = ContextVar("tidu_catalog", default=None)


_PROCESS: Catalog | None = None  # tidu.load_rules' catalog (None: the built-in one)


def builtin_catalog() -> Catalog:
    """The catalog of the built-in rule files (loaded once)."""
    global _BUILTIN
    if _BUILTIN is None:
        with _BUILTIN_LOCK:
            if _BUILTIN is None:
                _BUILTIN = load_catalog(builtin_rule_files())
    return _BUILTIN


def catalog() -> Catalog:
    """The active catalog: ``use_catalog``'s (or ``tidu.use_rules``') in this thread or
    task, else the process-wide one (``tidu.load_rules``), else the built-in one."""
    cat = _ACTIVE.get()
    if cat is not None:
        return cat
    if _PROCESS is not None:
        return _PROCESS
    return _BUILTIN if _BUILTIN is not None else builtin_catalog()  # (one call fewer: it runs per op)


def set_process_catalog(cat: Catalog | None) -> None:
    """Make ``cat`` every thread's default catalog (None: back to the built-in one)."""
    global _PROCESS
    _PROCESS = cat


@contextlib.contextmanager
def use_catalog(cat: Catalog) -> Iterator[Catalog]:
    """Make ``cat`` the active catalog (what ``catalog()`` returns: the catalog tracing,
    the AD passes and the simplifier use) inside a ``with`` block; the previous one is
    restored on exit, also on an error. Blocks nest; the active catalog belongs to the
    calling thread (or asyncio task): other threads keep theirs.

    Caches that depend on the catalog are keyed by it (``infer_avals``, compiled rewrites,
    the trace cache of ``tidu.grad``, ``tidu.jit``, ..., compiled programs) or by its
    ``Primitive`` objects (``instantiate``): switching catalogs needs no cache clearing.

        with use_catalog(load_rule_paths(["my.rules"])):
            lin = linearize(resolve(fragment), outputs, ["x"])
    """
    token = _ACTIVE.set(cat)
    try:
        yield cat
    finally:
        _ACTIVE.reset(token)


def infer(op: str, avals: Sequence[Aval], attrs: Attrs) -> list[Aval]:
    return catalog().get_primitive(op).infer(avals, attrs)


MAX_INFERRED = 8192  # memo entries per catalog; past it the memo starts again


def infer_avals(op: str, avals: tuple[Aval, ...], attrs: Attrs) -> list[Aval]:
    """``infer`` memoized on (catalog, op, avals, attrs): tracing and AD passes build the
    same few op signatures over and over."""
    cat = _ACTIVE.get()  # catalog(), inlined: this runs once per op built
    if cat is None:
        cat = _PROCESS if _PROCESS is not None else _BUILTIN if _BUILTIN is not None else builtin_catalog()
    # an elementwise op of one or two operands of one aval: that aval (what the type rule
    # gives) once the arity, the dtype and the absence of attributes are checked
    same = cat.same_aval.get(op, False)
    if same is False:
        prim = cat.get(op)
        same = cat.same_aval[op] = ((len(prim.operands), prim.dtypes)
                                    if prim is not None and prim.decl.type_rule == "elementwise"
                                    and not prim.variadic and not prim.attrs else None)
    if same is not None and len(avals) == same[0] and attrs is NO_ATTRS:
        first = avals[0]
        if first.dtype in same[1]:
            if len(avals) == 1:
                return [first]
            if len(avals) == 2:
                second = avals[1]
                if second is first or (second.shape == first.shape and second.dtype == first.dtype):
                    return [first]
    memo = cat.inferred
    memo_key = (op, avals, attrs)
    out = memo.get(memo_key)
    if out is None:
        out = cat.get_primitive(op).infer(avals, attrs)
        if len(memo) >= MAX_INFERRED:
            memo.clear()
        memo[memo_key] = out
    return out


__all__ = ["INTERNAL", "Catalog", "InternalPrimitive", "OpError", "Primitive", "builtin_catalog", "catalog", "infer",
           "load_catalog", "load_rule_paths", "register_internal", "set_process_catalog", "use_catalog"]
