"""Tokenizer and recursive-descent parser for ``.rules`` files.

The DSL is never evaluated as Python. Every error is a ``RuleSyntaxError`` whose message
starts with ``file:line:col`` and says what was expected.

Two conveniences of jvp and transpose templates are desugared here, so that nothing after
the parser sees them: ``let NAME = expr`` lines name a subexpression (each use is replaced by
a copy of it), and the matrix shorthands ``p @ q``, ``mT(p)`` and ``mH(p)`` become the
``dot_general``, ``transpose`` and ``conj`` calls one would write out (docs/rules.md).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from tidu.ops.dsl.ast import (
    AConst,
    AFn,
    AName,
    AttrExpr,
    ATuple,
    Call,
    Expr,
    Guard,
    Loc,
    Num,
    OperandRule,
    PrimitiveDecl,
    Rewrite,
    RuleFile,
    RuleSyntaxError,
    Splat,
    Var,
)

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t]+)
  | (?P<comment>\#[^\r\n]*)
  | (?P<nl>\r\n|\r|\n)
  | (?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?j?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<str>"[^"\r\n]*")
  | (?P<op>\.\.\.|->|\*\*|[()\[\],:=+\-*/.@])
    """,
    re.VERBOSE,
)

_BINARY = {"+": "add", "-": "sub", "*": "mul", "/": "div"}
MAX_NESTING = 100  # of parentheses, calls, signs and powers in one expression
# Rewrite semantics: "exact" rewrites hold in IEEE arithmetic (inf, nan and rounding
# included); "real" ones hold for finite real and complex numbers, as computer algebra
# assumes (``rewrite real: exp(x) * exp(y) -> exp(x + y)``). The tag "normalizer" marks
# a real law that the e-graph applies by normalizing sums and products
# (tidu/egraph/normalize.py) instead of as a rewrite (``rewrite real normalizer: ...``).
# The tag "merge" makes a rewrite apply only where its replacement already is in the
# e-graph: it merges two classes and adds no e-node (``rewrite merge: x + y -> y + x``
# identifies the two orders of a sum wherever both occur, without doubling every sum).
SEMANTICS = ("exact", "real")

CLAUSES = ("type", "dtypes", "meaning", "numpy", "stablehlo", "c", "let", "jvp", "transpose", "rewrite")
# Named constants of expressions (meanings, templates, rewrites), unless an operand or
# attribute of the primitive being declared has that name.
CONSTANTS = {"pi": math.pi, "e": math.e}
# Matrix shorthands of jvp and transpose templates (matrices are the last two axes, the
# leading ones batch axes): ``mT(p)`` swaps the last two axes, ``mH(p)`` is its conjugate.
# ``p @ q`` is the batched matrix product. The rank they use is the primitive's first
# operand's, as every matrix in a linear algebra rule has it.
MATRIX_HELPERS = ("mT", "mH")
# Words a let cannot take: the template keywords and the matrix shorthands.
RESERVED = ("let", "zero", "when", "exempt", *MATRIX_HELPERS)


# operand names the rules use for something else: a primitive's operand may not take them
RESERVED_OPERANDS = {"out": "the primitive's output (jvp and transpose rules)",
                     "ct": "the cotangent (transpose rules)"}


@dataclass(slots=True)
class _Let:
    """A ``let`` line: its expression, where it is, and whether a later line used it."""

    expr: Expr
    loc: Loc
    depth: int
    used: bool = False


@dataclass(slots=True)
class _Block:
    """What the parser knows inside one primitive's block (reset by the next one)."""

    decl: PrimitiveDecl
    lets: dict[str, _Let] = field(default_factory=dict)
    # names read as plain variables by the block's templates so far (first place each):
    # a let that comes after such a use must not change its meaning unseen
    reads: dict[str, Loc] = field(default_factory=dict)


@dataclass(slots=True)
class Tok:
    kind: str  # name num str op nl eof
    text: str
    loc: Loc
    indent: int  # column of the first token on this token's line


def tokenize(text: str, path: str) -> list[Tok]:
    """The tokens of a rule file. Lines end with LF, CRLF (as Windows editors save them)
    or CR; a byte order mark at the start (the same editors' UTF-8) is skipped."""
    toks: list[Tok] = []
    line, line_start, depth, indent, pos = 1, 0, 0, -1, 0
    if text.startswith("\ufeff"):
        pos = line_start = 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        loc = Loc(path, line, pos - line_start + 1)
        if m is None:
            raise RuleSyntaxError(loc, f"unexpected character {text[pos]!r}")
        kind = m.lastgroup
        s = m.group()
        pos = m.end()
        if kind == "nl":
            if depth == 0 and toks and toks[-1].kind != "nl":
                toks.append(Tok("nl", "\\n", loc, indent))
            line, line_start, indent = line + 1, pos, -1
            continue
        if kind in ("ws", "comment"):
            continue
        if indent < 0:
            indent = loc.col
        if s in ("(", "["):
            depth += 1
        elif s in (")", "]"):
            depth = max(0, depth - 1)
        toks.append(Tok(kind, s, loc, indent))
    end = Loc(path, line, pos - line_start + 1)
    if toks and toks[-1].kind != "nl":
        toks.append(Tok("nl", "\\n", end, indent))
    toks.append(Tok("eof", "end of file", end, 0))
    return toks


def _doc_comments(text: str) -> dict[int, str]:
    """Map a line number to the ``#`` comment block that ends just above it."""
    docs: dict[int, str] = {}
    block: list[str] = []
    for i, raw in enumerate(text.removeprefix("\ufeff").splitlines(), start=1):
        s = raw.strip()
        if s.startswith("#"):
            block.append(s.lstrip("#").strip())
        else:
            if block and s:
                docs[i] = "\n".join(block)
            if s or block:
                block = [] if s else block
    return docs


class Parser:
    def __init__(self, text: str, path: str) -> None:
        self.toks = tokenize(text, path)
        self.i = 0
        self.path = path
        self.docs = _doc_comments(text)
        self.nesting = 0
        self.scope: set[str] = set()  # operand and attribute names of the primitive being read
        self.block: _Block | None = None  # the primitive being read
        # inside a jvp or transpose template (or a let): lets and matrix shorthands apply
        self.in_template = False
        self.file_primitives = {
            self.toks[k + 1].text for k, t in enumerate(self.toks[:-1])
            if t.text == "primitive" and t.kind == "name" and t.loc.col == 1 and self.toks[k + 1].kind == "name"
        }

    # --- token helpers ---
    @property
    def tok(self) -> Tok:
        return self.toks[self.i]

    def error(self, expected: str, tok: Tok | None = None) -> RuleSyntaxError:
        tok = tok or self.tok
        found = "end of line" if tok.kind == "nl" else repr(tok.text) if tok.kind != "eof" else tok.text
        return RuleSyntaxError(tok.loc, f"expected {expected}, found {found}")

    def at(self, text: str) -> bool:
        return self.tok.text == text and self.tok.kind in ("op", "name")

    def eat(self, text: str) -> bool:
        if self.at(text):
            self.i += 1
            return True
        return False

    def expect(self, text: str, what: str | None = None) -> Tok:
        if not self.at(text):
            raise self.error(what or repr(text))
        t = self.tok
        self.i += 1
        return t

    def name(self, what: str = "a name") -> Tok:
        if self.tok.kind != "name":
            raise self.error(what)
        t = self.tok
        self.i += 1
        return t

    def end_of_line(self) -> None:
        if self.tok.kind != "nl":
            raise self.error("end of line")
        self.i += 1

    # --- file structure ---
    def parse_file(self) -> RuleFile:
        prims: list[PrimitiveDecl] = []
        free: list[Rewrite] = []
        while self.tok.kind != "eof":
            if self.tok.kind == "nl":
                self.i += 1
                continue
            if self.tok.loc.col != 1:
                raise RuleSyntaxError(
                    self.tok.loc, "unexpected indentation: clauses belong under a 'primitive' line"
                )
            if self.at("primitive"):
                prims.append(self.primitive())
            elif self.at("rewrite"):
                self.i += 1
                free.append(self.rewrite())
            else:
                raise self.error("'primitive' or 'rewrite' at the start of a line")
        return RuleFile(self.path, prims, free)

    def primitive(self) -> PrimitiveDecl:
        start = self.expect("primitive")
        name = self.name("the primitive's name").text
        self.expect("(", "'(' and the operand names")
        operands: list[str] = []
        variadic = False
        while not self.at(")"):
            if operands and not self.eat(","):
                raise self.error("',' or ')'")
            t = self.name("an operand name")
            if t.text in operands:
                raise RuleSyntaxError(t.loc, f"operand {t.text} of {name} is named twice: give each operand "
                                             "its own name")
            if t.text in RESERVED_OPERANDS:  # (the rules would read the output or the cotangent)
                raise RuleSyntaxError(t.loc, f"operand {t.text} of {name} has a name the rules give to "
                                             f"{RESERVED_OPERANDS[t.text]}: give the operand another name")
            clash = next((o for o in operands if t.text in (f"d{o}", o[1:] if o.startswith("d") else None)), None)
            if clash is not None:  # (dx is the tangent of x in the jvp templates)
                raise RuleSyntaxError(t.loc, f"operands {clash} and {t.text} of {name}: d{min(clash, t.text, key=len)} "
                                             "names the tangent of the other in the jvp rules; rename one")
            operands.append(t.text)
            if self.eat("..."):
                variadic = True
                if not self.at(")"):
                    raise self.error("')' (only the last operand can be variadic)")
        close = self.expect(")")
        attrs: list[str] = []
        if self.eat("["):
            while not self.at("]"):
                if attrs and not self.eat(","):
                    raise self.error("',' or ']'")
                t = self.name("an attribute name")
                if t.text in attrs or t.text in operands:
                    what = "an attribute" if t.text in attrs else "an operand"
                    raise RuleSyntaxError(t.loc, f"attribute {t.text} of {name} has the name of {what} "
                                                 "already declared: give it its own name")
                attrs.append(t.text)
            self.expect("]")
        self.end_of_line()
        if not operands and not attrs:
            raise RuleSyntaxError(close.loc, f"primitive {name} has no operands and no attributes: nothing "
                                             "to compute its value from (a constant is a number in a rule)")
        if name in MATRIX_HELPERS:
            raise RuleSyntaxError(start.loc, f"{name} is the DSL's matrix shorthand ({name}(p) in templates): "
                                             "give the primitive another name")
        decl = PrimitiveDecl(name, tuple(operands), variadic, tuple(attrs), start.loc)
        decl.doc = self.docs.get(start.loc.line, "")
        self.scope = set(operands) | set(attrs)
        self.block = _Block(decl)
        try:
            while self.tok.kind == "name" and self.tok.loc.col > 1:
                self.clause(decl)
            for let_name, let in self.block.lets.items():
                if not let.used:
                    raise RuleSyntaxError(let.loc, f"let {let_name} is never used: a let serves the jvp and "
                                                   "transpose lines (and lets) after it")
        finally:
            self.scope = set()
            self.block = None
        return decl

    def clause(self, decl: PrimitiveDecl) -> None:
        t = self.tok
        if t.text not in CLAUSES:
            raise self.error("a clause (" + ", ".join(CLAUSES) + ")")
        self.i += 1
        if t.text == "type":
            if decl.type_rule:
                raise RuleSyntaxError(t.loc, f"{decl.name} already has a type clause")
            decl.type_rule = self.name("a type rule name").text
            self.end_of_line()
        elif t.text == "dtypes":
            names = [self.name("a dtype class").text]
            while self.tok.kind == "name":
                names.append(self.name().text)
            decl.dtypes = tuple(names)
            self.end_of_line()
        elif t.text == "meaning":
            decl.meaning = self.expr()
            self.end_of_line()
        elif t.text in ("numpy", "stablehlo"):
            if getattr(decl, t.text) is not None:
                raise RuleSyntaxError(t.loc, f"{decl.name} already has a {t.text} clause")
            self.eat(":")
            setattr(decl, t.text, self.dotted_name(t.text))
            self.end_of_line()
        elif t.text == "c":
            if decl.c is not None:
                raise RuleSyntaxError(t.loc, f"{decl.name} already has a c clause")
            self.eat(":")
            name = self.name("a C function name such as exp (or 'meaning')")
            decl.c = (name.text, name.loc)
            self.end_of_line()
        elif t.text == "let":
            self.let(decl)
        elif t.text in ("jvp", "transpose"):
            operand: str | None = None
            if self.tok.kind == "name":
                operand = self.name().text
                if self.eat("["):
                    self.expect("i", "'i' (the index of a variadic operand)")
                    self.expect("]")
            elif t.text == "transpose":
                raise self.error("the operand being transposed")
            self.expect(":", "':' before the template")
            if self.at("zero"):
                self.i += 1
                template = None
            else:
                template = self.template()
            guards = self.guards() if t.text == "jvp" and self.eat("when") else ()
            exempt = self.exempt()
            self.end_of_line()
            rule = OperandRule(operand, template, t.loc, guards, exempt)
            (decl.jvps if t.text == "jvp" else decl.transposes).append(rule)
        else:
            decl.rewrites.append(self.rewrite())

    def template(self) -> Expr:
        """A jvp or transpose template (or a let's expression): lets and matrix shorthands apply."""
        self.in_template = True
        try:
            return self.expr()
        finally:
            self.in_template = False

    def let(self, decl: PrimitiveDecl) -> None:
        """``let NAME = expr``: NAME stands for expr in the templates and lets after it."""
        assert self.block is not None
        t = self.name("the let's name (let NAME = expression)")
        n = t.text
        why = ""
        if n in decl.operands:
            why = f"an operand of {decl.name}"
        elif n.startswith("d") and n[1:] in decl.operands:
            why = f"the tangent of operand {n[1:]}"
        elif n == "out":
            why = "the primal output (out)"
        elif n == "ct":
            why = "the output cotangent (ct)"
        elif n in decl.attrs or (n == "i" and decl.variadic):
            why = f"an attribute of {decl.name}"
        elif n in CONSTANTS:
            why = "a named constant"
        elif n in RESERVED:
            why = "a reserved word"
        elif n in self.file_primitives:
            why = "a primitive"
        elif n in self.block.lets:
            why = f"the let at {self.block.lets[n].loc}"
        if why:
            raise RuleSyntaxError(t.loc, f"let {n} clashes with {why}: give the let another name")
        if n in self.block.reads:
            raise RuleSyntaxError(self.block.reads[n], f"{n} is bound by the let at {t.loc}, after this use: "
                                                       "a let must come before the lines that use it")
        self.expect("=", "'=' after the let's name")
        expr = self.template()
        self.end_of_line()
        self.block.lets[n] = _Let(expr, t.loc, _depth(expr))
        decl.lets[n] = t.loc

    def rewrite(self) -> Rewrite:
        loc = self.tok.loc
        semantics, by_normalizer, merge = "exact", False, False
        j = self.i
        while self.toks[j].kind == "name":
            j += 1
        if j > self.i and self.toks[j].text == ":" and self.toks[j].kind == "op":  # tags
            for t in self.toks[self.i : j]:
                if t.text in SEMANTICS:
                    semantics = t.text
                elif t.text == "normalizer":
                    by_normalizer = True
                elif t.text == "merge":
                    merge = True
                else:
                    raise RuleSyntaxError(t.loc, f"unknown rewrite tag {t.text!r}; known: "
                                          f"{', '.join(SEMANTICS)}, normalizer, merge")
            if by_normalizer and semantics != "real":
                raise RuleSyntaxError(loc, "'normalizer' laws belong to the real semantics: "
                                      "write 'rewrite real normalizer:'")
            if by_normalizer and merge:
                raise RuleSyntaxError(loc, "a rewrite is either a 'normalizer' law or a 'merge' "
                                      "rule, not both: drop one of the tags")
            self.i = j + 1
        lhs = self.expr()
        self.expect("->", "'->' between pattern and replacement")
        rhs = self.expr()
        guards = self.guards() if self.eat("when") else ()
        exempt = self.exempt()
        self.end_of_line()
        return Rewrite(lhs, rhs, guards, loc, semantics, by_normalizer, exempt, merge)

    def dotted_name(self, clause: str) -> tuple[str, Loc]:
        """``scipy.special.erf`` (numpy) or ``chlo.erf`` (stablehlo): names joined by dots."""
        example = "scipy.special.erf" if clause == "numpy" else "stablehlo.logistic"
        first = self.name(f"a dotted function name such as {example}")
        parts = [first.text]
        while self.eat("."):
            parts.append(self.name(f"a name after '.' (such as {example})").text)
        return ".".join(parts), first.loc

    def exempt(self) -> str | None:
        """``exempt "reason"`` at the end of a rule: why it is right although the checker
        cannot confirm it (docs/verification.md); the reason must say something."""
        if not (self.tok.kind == "name" and self.tok.text == "exempt"):
            return None
        self.i += 1
        t = self.tok
        if t.kind != "str" or len(t.text.strip('"').strip()) < 10:
            raise RuleSyntaxError(t.loc, 'exempt needs a reason in quotes that states the mathematical '
                                         'argument, e.g. exempt "exact in the reals; only rounding differs"')
        self.i += 1
        return t.text[1:-1].strip()

    def guards(self) -> tuple[Guard, ...]:
        """``g(a), h(b, c)`` after ``when``."""
        guards: list[Guard] = []
        while True:
            g = self.name("a guard name")
            self.expect("(", "'(' after the guard name")
            args = [self.name("a pattern variable").text]
            while self.eat(","):
                args.append(self.name("a pattern variable").text)
            self.expect(")")
            guards.append(Guard(g.text, tuple(args), g.loc))
            if not self.eat(","):
                return tuple(guards)

    # --- expressions ---
    def expr(self) -> Expr:
        top, start = self.nesting == 0, self.tok.loc
        left = self.term()
        while self.tok.text in ("+", "-") and self.tok.kind == "op":
            op = self.tok
            self.i += 1
            left = Call(_BINARY[op.text], (left, self.term()), (), op.loc)
        if top and _depth(left) > MAX_NESTING:
            # a chain (a + b + c + ...) nests one level per operator without parentheses:
            # the tree's depth is what the checker, its printer and SymPy recurse through
            raise RuleSyntaxError(start, f"expression nested more than {MAX_NESTING} deep (each operator of a "
                                         "chain such as a + b + c counts as a level); split it into several "
                                         "rules or name parts of it with let")
        return left

    def term(self) -> Expr:
        left = self.unary()
        while self.tok.text in ("*", "/", "@") and self.tok.kind == "op":
            op = self.tok
            self.i += 1
            if op.text == "@":
                rank = self.matrix_rank(op, "'@' (the matrix product)")
                left = Call("dot_general", (left, self.unary()), (
                    ("lhs_contract", AFn("mm_lhs", (rank,), op.loc)),
                    ("rhs_contract", AFn("mm_rhs", (rank,), op.loc)),
                    ("lhs_batch", AFn("mm_batch", (rank,), op.loc)),
                    ("rhs_batch", AFn("mm_batch", (rank,), op.loc)),
                ), op.loc)
            else:
                left = Call(_BINARY[op.text], (left, self.unary()), (), op.loc)
        return left

    def matrix_rank(self, at: Tok, what: str) -> AttrExpr:
        """``rank(x)`` of the primitive's first operand x: the rank of the matrices of a
        matrix shorthand (``@``, ``mT``, ``mH``)."""
        if not self.in_template or self.block is None:
            raise RuleSyntaxError(at.loc, f"{what} belongs in jvp and transpose templates (and lets), "
                                          "where the primitive's first operand gives the matrices' rank")
        decl = self.block.decl
        if not decl.operands or (decl.variadic and len(decl.operands) == 1):
            raise RuleSyntaxError(at.loc, f"{what} takes the matrices' rank from the first operand of "
                                          f"{decl.name}, which has no single first operand")
        return AFn("rank", (AName(decl.operands[0], at.loc),), at.loc)

    def unary(self) -> Expr:
        # every nested expression passes here (parentheses, arguments, signs, powers):
        # a bound on the nesting keeps the recursive descent off Python's recursion limit
        self.nesting += 1
        try:
            if self.nesting > MAX_NESTING:
                raise RuleSyntaxError(self.tok.loc, f"expression nested more than {MAX_NESTING} deep; "
                                                    "split it into several rules or name parts of it")
            if self.at("-"):
                loc = self.tok.loc
                self.i += 1
                inner = self.unary()
                if isinstance(inner, Num):
                    return Num(-inner.value, loc)
                return Call("neg", (inner,), (), loc)
            return self.power()
        finally:
            self.nesting -= 1

    def power(self) -> Expr:
        base = self.atom()
        if self.at("**"):
            loc = self.tok.loc
            self.i += 1
            return Call("pow", (base, self.unary()), (), loc)
        return base

    def atom(self) -> Expr:
        t = self.tok
        if t.kind == "num":
            self.i += 1
            text = t.text
            if text.endswith("j"):
                return Num(complex(0, float(text[:-1])), t.loc)
            return Num(float(text) if any(c in text for c in ".eE") else int(text), t.loc)
        if self.eat("("):
            e = self.expr()
            self.expect(")")
            return e
        if t.kind != "name":
            raise self.error("an expression")
        self.i += 1
        if self.eat("..."):
            return Splat(t.text, t.loc)
        if not self.at("("):
            if t.text in CONSTANTS and t.text not in self.scope:
                return Num(CONSTANTS[t.text], t.loc)
            return self.variable(t)
        if t.text in MATRIX_HELPERS:
            return self.matrix_helper(t)
        self.i += 1
        args: list[Expr] = []
        while not self.at(")"):
            if args and not self.eat(","):
                raise self.error("',' or ')'")
            args.append(self.expr())
        self.expect(")")
        attrs: list[tuple[str, AttrExpr]] = []
        if self.eat("["):
            while not self.at("]"):
                if attrs and not self.eat(","):
                    raise self.error("',' or ']'")
                key = self.name("an attribute name")
                self.expect("=", "'=' after the attribute name")
                attrs.append((key.text, self.attr()))
            self.expect("]")
        return Call(t.text, tuple(args), tuple(attrs), t.loc)

    def variable(self, t: Tok) -> Expr:
        """A name in an expression: a let's expression (a fresh copy) or a variable."""
        block = self.block
        let = block.lets.get(t.text) if block is not None else None
        if let is None:
            if block is not None and self.in_template:
                block.reads.setdefault(t.text, t.loc)
            return Var(t.text, t.loc)
        if not self.in_template:
            raise RuleSyntaxError(t.loc, f"{t.text} is the let at {let.loc}: lets serve jvp and transpose "
                                         "templates (and later lets), not meanings or rewrites")
        if self.nesting + let.depth > MAX_NESTING:
            raise RuleSyntaxError(t.loc, f"expression nested more than {MAX_NESTING} deep with let {t.text} "
                                         "written out; split it into several rules")
        let.used = True
        return _copy(let.expr)

    def matrix_helper(self, t: Tok) -> Expr:
        """``mT(p)``: transpose(p)[perm=mT(r)]; ``mH(p)``: conj of that (r the matrices' rank)."""
        rank = self.matrix_rank(t, f"{t.text}(...) (the matrix {'conjugate ' if t.text == 'mH' else ''}transpose)")
        self.expect("(")
        arg = self.expr()
        if not self.at(")"):
            raise self.error(f"')': {t.text} takes one matrix")
        self.i += 1
        if self.at("["):
            raise RuleSyntaxError(self.tok.loc, f"{t.text}(...) takes no attributes (its perm is the last two axes)")
        out: Expr = Call("transpose", (arg,), (("perm", AFn("mT", (rank,), t.loc)),), t.loc)
        if t.text == "mH":
            out = Call("conj", (out,), (), t.loc)
        return out

    def attr(self) -> AttrExpr:
        t = self.tok
        if t.kind == "num" or (t.text == "-" and self.toks[self.i + 1].kind == "num"):
            neg = self.eat("-")
            t = self.tok
            self.i += 1
            if t.text.endswith("j"):
                raise RuleSyntaxError(t.loc, "complex numbers are not attribute values")
            v = float(t.text) if any(c in t.text for c in ".eE") else int(t.text)
            return AConst(-v if neg else v, t.loc)
        if t.kind == "str":
            self.i += 1
            return AConst(t.text[1:-1], t.loc)
        if self.eat("("):
            items: list[AttrExpr] = []
            while not self.at(")"):
                if items and not self.eat(","):
                    raise self.error("',' or ')'")
                if self.at(")"):
                    break
                items.append(self.attr())
            self.expect(")")
            return ATuple(tuple(items), t.loc)
        if t.kind == "name":
            self.i += 1
            if t.text in ("true", "false"):
                return AConst(t.text == "true", t.loc)
            if self.eat("("):
                args: list[AttrExpr] = []
                while not self.at(")"):
                    if args and not self.eat(","):
                        raise self.error("',' or ')'")
                    args.append(self.attr())
                self.expect(")")
                return AFn(t.text, tuple(args), t.loc)
            return AName(t.text, t.loc)
        raise self.error("an attribute value (number, string, name, tuple or function call)")


def _depth(e: Expr) -> int:
    """The number of nested calls in ``e`` (without recursion)."""
    deepest, stack = 0, [(e, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        if isinstance(node, Call):
            stack.extend((a, d + 1) for a in node.args)
    return deepest


def _copy(e: Expr) -> Expr:
    """A fresh copy of ``e`` (the same locations): each use of a let gets its own tree, as
    if it were written out there (caches key on a template's identity)."""
    done: list[Expr] = []
    stack: list[tuple[Expr, bool]] = [(e, False)]
    while stack:
        node, ready = stack.pop()
        if not isinstance(node, Call):
            done.append(node)  # leaves carry no identity anything keys on
        elif ready:
            k = len(done) - len(node.args)
            args = tuple(done[k:])
            del done[k:]
            done.append(Call(node.fn, args, node.attrs, node.loc))
        else:
            stack.append((node, True))
            stack.extend((a, False) for a in reversed(node.args))
    return done[0]


def parse_rules(text: str, path: str = "<rules>") -> RuleFile:
    """Parse the text of one ``.rules`` file."""
    return Parser(text, path).parse_file()
