"""Mutation testing of a rule catalog (``tidu check-rules --mutate``): single-line mutants of
the rule files, each checked by ``check_rules`` on the rule it changed; a mutant the
checker passes is a wrong rule it would have missed.

Operators, applied to the template of every ``jvp``, ``transpose`` and ``rewrite`` line
(and to the expression of every ``let`` line, whose mutants are checked on the rules of its
block after it):
``sign`` (a binary ``+`` becomes ``-`` and back), ``negate`` (a unary minus dropped),
``drop-term`` (a sum or difference at the top of the template keeps one side),
``swap`` (the two operands of a call exchanged), ``attribute`` (``lhs_*`` and ``rhs_*``
attribute names exchanged), ``drop-conj`` (also ``mH`` made ``mT``), ``drop-guard`` (a ``when`` clause removed),
``compare`` (a comparison direction made strict or loose), ``constant`` (a number
doubled, 0 made 1), and ``unsound`` (a known-unsound rewrite appended to the catalog).
A mutant that no longer loads is killed by the loader. Mutants that mean the same rule
(operands of a commutative op exchanged) are reported as equivalent, with the reason.
"""

from __future__ import annotations

import random
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tidu.checkrules._driver import check_rules, replacement_files
from tidu.core.progress import step, steps
from tidu.ops.dsl.ast import RuleSyntaxError

COMMUTATIVE = ("add", "mul", "maximum", "minimum")
DIRECTIONS = {"GT": "GE", "GE": "GT", "LT": "LE", "LE": "LT", "EQ": "NE", "NE": "EQ"}
# rewrites that are wrong somewhere in their guard's domain: the checker must refuse each
UNSOUND = (
    ("transcendental.rules", "rewrite real: exp(log(x)) -> x   when real(x)"),
    ("transcendental.rules", "rewrite real: sqrt(x) * sqrt(x) -> x   when real(x)"),
    ("transcendental.rules", "rewrite real: log(x * y) -> log(x) + log(y)"),
    ("transcendental.rules", "rewrite real: sqrt(x * x) -> x"),
    ("transcendental.rules", "rewrite real: log(pow(x, y)) -> y * log(x)"),
    ("arithmetic.rules", "rewrite    x / x -> 1"),
    ("arithmetic.rules", "rewrite    x - x -> 0"),
    ("arithmetic.rules", "rewrite    x * 0 -> 0"),
    ("arithmetic.rules", "rewrite real: pow(x, y) * pow(x, z) -> pow(x, y + z)"),
    ("complex.rules", "rewrite    abs(x) * abs(x) -> x * x"),
)


@dataclass(frozen=True)
class Mutant:
    file: str  # name of the rule file in the catalog directory
    line: int  # 1-based line changed (appended line for ``unsound``)
    rule_line: int  # the first line of the rule it belongs to
    operator: str
    before: str
    after: str
    equivalent: str = ""  # why the mutant means the same rule (then it is not checked)
    # a ``let`` line's mutant: the jvp and transpose lines after it in its block (checked
    # instead of rule_line, which is the let's own line)
    rule_lines: tuple[int, ...] = ()


@dataclass
class Outcome:
    mutant: Mutant
    verdict: str  # killed, survived, equivalent, invalid (the loader refused it)
    detail: str = ""


# --- generating mutants ---------------------------------------------------------------------

_RULE = re.compile(r"^(\s+)(jvp\b[^:]*:|transpose\b[^:]*:|rewrite\b(?:[^:>]*:)?|let\s+\w+\s*=)(.*)$")


def _template_span(line: str) -> tuple[int, int] | None:
    """Where the template (or rewrite) text of a rule line is: from after its keyword up to
    a ``when`` clause, or None for a line that is not a rule."""
    m = _RULE.match(line)
    if m is None:
        return None
    start = m.start(3)
    when = line.find(" when ", start)
    exempt = line.find(" exempt ", start)
    ends = [e for e in (when, exempt) if e >= 0]
    return start, min(ends) if ends else len(line)


def _matching(text: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _top_level_args(text: str, open_at: int, close_at: int) -> list[tuple[int, int]]:
    """The spans of the comma-separated arguments between the parentheses."""
    spans, depth, start = [], 0, open_at + 1
    for i in range(open_at + 1, close_at):
        c = text[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            spans.append((start, i))
            start = i + 1
    spans.append((start, close_at))
    return spans


def _line_mutants(line: str, span: tuple[int, int]) -> Iterator[tuple[str, str, str]]:
    """(operator, mutated line, equivalence reason or "") for one line of a rule, whose
    template text is at ``span``."""
    a, b = span
    body = line[a:b]

    def put(i: int, j: int, new: str) -> str:
        return line[: a + i] + new + line[a + j :]

    for m in re.finditer(r" ([+-]) ", body):
        yield "sign", put(m.start(1), m.end(1), "-" if m.group(1) == "+" else "+"), ""
    for m in re.finditer(r"(?:(?<=[(,:>])|(?<=^)|(?<=[(,] )|(?<=-> )|(?<=^ ))-(?=[A-Za-z(0-9])", body):
        yield "negate", put(m.start(), m.end(), ""), ""
    depth, ops = 0, []
    for i, c in enumerate(body):
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif depth == 0 and c in "+-" and body[i - 1 : i] == " " and body[i + 1 : i + 2] == " ":
            ops.append(i)
    if "->" not in body:
        for i in ops:
            left, right = body[:i].rstrip(), body[i + 1 :].lstrip()
            lead = len(body) - len(body.lstrip())
            yield "drop-term", line[:a] + left + line[b:], ""
            yield "drop-term", line[:a] + " " * lead + ("-" if body[i] == "-" else "") + right + line[b:], ""
    for m in re.finditer(r"\b([a-z_][a-z0-9_]*)\(", body):
        open_at = m.end() - 1
        close_at = _matching(body, open_at)
        if close_at < 0:
            continue
        args = _top_level_args(body, open_at, close_at)
        if len(args) != 2:
            continue
        (s1, e1), (s2, e2) = args
        x, y = body[s1:e1].strip(), body[s2:e2].strip()
        if x == y:
            continue
        fn = m.group(1)
        symmetric = fn in COMMUTATIVE or (fn == "compare" and re.match(r'\[direction="(EQ|NE)"\]',
                                                                        body[close_at + 1 :]) is not None)
        yield "swap", put(s1, e2, f"{y}, {x}"), f"{fn} is symmetric in its operands" if symmetric else ""
    for m in re.finditer(r"\b(lhs|rhs)_(batch|contract)\b(?!=)", body):  # references, not attribute keys
        other = ("rhs" if m.group(1) == "lhs" else "lhs") + "_" + m.group(2)
        yield "attribute", put(m.start(), m.end(), other), ""
    for m in re.finditer(r"\bconj\(", body):
        close_at = _matching(body, m.end() - 1)
        if close_at > 0:
            yield "drop-conj", line[: a + m.start()] + body[m.end() : close_at] + line[a + close_at + 1 :], ""
    for m in re.finditer(r"\bmH\(", body):  # the conjugate transpose shorthand loses its conj
        yield "drop-conj", put(m.start(), m.end() - 1, "mT"), ""
    for m in re.finditer(r'"(GT|GE|LT|LE|EQ|NE)"', body):
        yield "compare", put(m.start(1), m.end(1), DIRECTIONS[m.group(1)]), ""
    for m in re.finditer(r"(?<![\w.])(\d+(?:\.\d+)?)(?![\w.])", body):
        v = float(m.group(1))
        new = "1" if v == 0 else (f"{2 * v:g}" if "." not in m.group(1) else f"{2 * v!r}")
        yield "constant", put(m.start(1), m.end(1), new), ""
    if line.find(" when ", a) >= 0:
        yield "drop-guard", line[: line.find(" when ", a)], ""


def _let_users(lines: list[str]) -> dict[int, tuple[int, ...]]:
    """For each ``let`` line: the jvp and transpose lines after it in its primitive's block."""
    users: dict[int, tuple[int, ...]] = {}
    for no, line in enumerate(lines, 1):
        if re.match(r"\s+let\b", line):
            after = []
            for later, text in enumerate(lines[no:], no + 1):
                if text.strip() and not text[:1].isspace():
                    break  # the next declaration
                if re.match(r"\s+(jvp|transpose)\b", text):
                    after.append(later)
            users[no] = tuple(after)
    return users


def mutants(directory: str | Path) -> list[Mutant]:
    """Every single-line mutant of the catalog in ``directory``, in a fixed order."""
    out: list[Mutant] = []
    made: set[tuple[str, int, str]] = set()  # two operators can make the same line: checked once
    for path in replacement_files(directory):
        name = Path(path).name
        lines = Path(path).read_text(encoding="utf-8").split("\n")
        let_users = _let_users(lines)
        rule_line = 0
        for no, line in enumerate(lines, 1):
            span = _template_span(line)
            if span is not None:
                rule_line = no
            elif rule_line and line.startswith("        ") and line.strip():  # a template's continuation
                span = (len(line) - len(line.lstrip()), len(line))
            else:
                rule_line = 0
                continue
            for op, new, why in _line_mutants(line, span):
                if new != line and (name, no, new.strip()) not in made:
                    made.add((name, no, new.strip()))
                    out.append(Mutant(name, no, rule_line, op, line.strip(), new.strip(), why,
                                      let_users.get(rule_line, ())))
        for f, text in UNSOUND:
            if f == name:
                out.append(Mutant(name, len(lines) + 1, len(lines) + 1, "unsound", "", text))
    return out


# --- equivalent mutants: survivors that are still right rules, with the argument -------------------

# (file, operator (a regex), regex on the mutated line, why it is still right, or, where a
# mutant changes a value by less than the checks resolve, which test refuses it instead)
_SAME_VALUE = (
    ("arithmetic.rules", "sign", r"^rewrite\s+x - (0|broadcast_in_dim\(0\)) -> x$",
     "x - 0 is x exactly in IEEE arithmetic, signed zeros included"),
    ("arithmetic.rules", "sign", r"^rewrite\s+x \+ 0 -> x$", "the catalog has this rule already (x + 0 -> x)"),
    ("arithmetic.rules", "constant", r'^jvp y:\s+out \* log\(select\(compare\(x, 0\)\[direction="EQ"\], 2, x\)\)',
     "the branch is taken where x = 0, where out = 0**y is 0 or not finite: the product does not depend on it"),
    ("structure.rules", "constant", r'/ select\(is_zero, (?!1,)[^,]+, x\)\)\)$',
     "the divisor's value where x = 0 is never used: there the outer select takes the zero branches"),
    ("linalg.rules", "constant", r'^\s*1, 1 / svdvals\(x\)\)\)\[shape=min_square',
     "the branch is taken where a singular value is 0; there the rule gives nan for that singular vector "
     "(it has no derivative, as documented) and the other vectors do not use the branch"),
    ("rounding.rules", "compare", r'^jvp y:\s+-select\(compare\(x / y, 0\)\[direction="LE"\]',
     "at x / y = 0 both branches, ceil(0) and floor(0), are 0"),
    ("linalg.rules", "constant", r'^let V0_or_1 = select\(compare\(V0, 0\)\[direction="EQ"\], (?!1,)[^,]+, V0\)$',
     "the divisor's value where V0 = 0 is never used: there the select of the phase term takes 0"),
    ("special.rules", "constant", r'/ select\(at0, (?!1,)[^,]+, x\)',
     "the divisor's value at x = 0 is never used: there the outer select takes the limit"),
    ("complex.rules", "constant",
     r'^complex\(select\(compare\(x, 0\)\[direction="EQ"\], (?!1,)[^,]+, abs\(x\)\), 0\)\)$',
     "the divisor's value where x = 0 is never used: there the outer select takes 0"),
    ("special.rules", "constant", r'^rewrite\s+lgamma\(2\) -> 0$',
     "the catalog has this rule already (lgamma(2) -> 0)"),
    # lu's JVP pads L and U to square L_ and U_; what it pads with cancels (see the rule's comment)
    ("linalg.rules", "constant", r'lu_pivot(s\(x\)|_ones\(shape\(x\)\)\]), -2\)\[',
     "a padded pivot outside [0, n) swaps nothing, -1 or -2 alike"),
    ("linalg.rules", "constant", r'^let L = pad\(slice\(out\)\[start=zeros\(rank\(x\)\), '
     r'limit=lu_l_limit\(shape\(x\)\), strides=ones\(rank\(x\)\)\], (?!0\))',
     "only the padded block of the unit lower triangular L_ (tall matrices) changes: the top rows of "
     "F = L_^-1 P dx U_^-1 do not read it, and in L_ tril(F, -1), which is P dx U_^-1 less L_'s product "
     "with triu(F)'s top rows, it cancels"),
    ("linalg.rules", "(constant|sign)", r'^(let U = triangle\(pad\(slice\(out\)\[start=zeros\(rank\(x\)\), '
     r'limit=lu_u_limit\(shape\(x\)\), strides=ones\(rank\(x\)\)\], (?!0\))|low=zeros\(rank\(x\)\), '
     r'high=lu_u_pad\(shape\(x\)\), interior=zeros\(rank\(x\)\)\]\)\[lower=false, strict=false\] - I$)',
     "only U_'s block below U (wide matrices) changes, and it stays invertible: tril(F, -1) reads the "
     "columns of U_^-1 that do not see it, and triu(F) U_ = P L_^-1 dx less tril(F, -1) U_, which reads U's rows"),
    # the SVD vectors' rules count a projector's size as the sum of a pad of a zero matrix
    ("linalg.rules", "constant", r'^let [mn]_extra = reduce_sum\(pad\(D \* 0, (?!0\))[-0-9.e]+\)\[',
     "the sum is only compared with 0: padded with any nonzero value it is 0 exactly where nothing is padded"),
    # spence's derivative near z = 1 is the Taylor polynomial of log(z) / (1 - z) in w = z - 1
    ("special.rules", "compare", r'^jvp:\s+select\(compare\(abs\(w\), 0\.001\)\[direction="LE"\]',
     "only |w| = 0.001 itself changes branch, where the two forms agree to rounding"),
    ("special.rules", "constant", r'^jvp:\s+select\(compare\(abs\(w\), 0\.002\)',
     "the polynomial's branch grows to |w| < 0.002, where it is still right to 5e-15"),
    ("special.rules", "(sign|constant)",
     r'^jvp:\s+select\(compare\(abs\(w\), 0\.001\)\[direction="LT"\], w \* \(0\.5 (?!- w \* \(1 / 3 - w \* '
     r'\(0\.25 - w \* 0\.2\)\)\) - 1,)[-+] w \* \([12] / [36] [-+] w \* \(0\.(25|5) [-+] w \* 0\.[24]\)\)\) - 1,$',
     "NOT the same rule, but no finite difference can tell: a changed w^2, w^3 or w^4 term moves the "
     "derivative by under 7e-7 where |w| < 0.001; tests/test_special.py::"
     "test_spence_derivative_near_one_is_right_to_rounding compares it with mpmath and refuses each"),
    # the eigen- and singular-vector rules divide by the eigenvalue differences plus an identity
    ("linalg.rules", "(constant|sign)", r'^let E = 1 / \(D [-+] triangle\(triangle\(D \* [01] [-+] [12]\)'
     r'\[lower=true, strict=false\]\)\[lower=false, strict=false\]\)$',
     "E's diagonal is never used (F takes its strict triangles) and D's diagonal is 0: the identity "
     "added there may be any nonzero constant, which keeps 1 / 0 out of reverse mode alike"),
    # i1e's derivative below |x| = 1/2 is a form with I0's and I1(x)/x's series
    ("special.rules", "compare", r'^let small = compare\(abs\(x\), 0\.5\)\[direction="LE"\]$',
     "only |x| = 1/2 itself changes branch, where the two forms agree to rounding"),
    ("special.rules", "constant", r'^let xs = select\(small, x, (?!0\))[^)]+\)$',
     "the series' value where |x| >= 1/2 is never used: there the jvp's select takes the general form"),
    ("special.rules", "constant", r'/ select\(small, (?!1,)[^,]+, x\)',
     "the divisor's value below |x| = 1/2 is never used: there the jvp's select takes the series"),
    ("special.rules", "(sign|constant)",
     r'^(let i0_series = |let i1_over_x = |q \* \(6\.781684027777778e-\d+ [-+] q \* |'
     r'let small = compare\(abs\(x\), 1\.0\))',
     "NOT the same rule, but no finite difference can tell: a changed term of I0's or I1(x)/x's series "
     "(or the series' region grown to |x| < 1) moves i1e's derivative by under 1e-6; tests/test_special.py::"
     "test_i1e_derivative_is_right_to_rounding compares it with mpmath and refuses each"),
)
_LENGTHS_ONLY = "dot_ct_contract and dot_ct_batch use only the lengths of the axis lists, equal for both operands"
_K = "the helper treats every k but 0 alike (k = 1 is the rhs)"
_OTHER_BATCH = ("dot_transpose_perm uses the other operand's batch axes only to leave them out of its "
                "contracted axes, which are never batch axes")


def _changed_call(before: str, after: str) -> tuple[str, int] | None:
    """The innermost call around the first changed character, and the argument index."""
    i = next((k for k, (a, b) in enumerate(zip(before, after, strict=False)) if a != b), None)
    if i is None:
        return None
    depth, commas = 0, 0
    for k in range(i - 1, -1, -1):
        c = before[k]
        if c in ")]":
            depth += 1
        elif c in "([":
            if depth == 0:
                if c == "[":
                    return None
                m = re.search(r"([a-z_][a-z0-9_]*)$", before[:k])
                return (m.group(1), commas) if m else None
            depth -= 1
        elif c == "," and depth == 0:
            commas += 1
    return None


def equivalence(m: Mutant) -> str:
    """Why a surviving mutant is still a right rule, or "" (then it is a real survivor)."""
    rw = re.match(r"^rewrite(?:\s+[a-z ]+:)?\s+(.+?)\s+->\s+(.+?)(\s+when .*)?$", m.after)
    if rw and rw.group(1).strip() == rw.group(2).strip():
        return "a rewrite of a term to itself"
    for file, op, pattern, why in _SAME_VALUE:
        if m.file == file and re.fullmatch(op, m.operator) and re.search(pattern, m.after):
            return why
    call = _changed_call(m.before, m.after)
    if call is not None and m.file == "structure.rules":
        name, arg = call
        if name in ("dot_ct_contract", "dot_ct_batch"):
            return _K if arg == 0 and name == "dot_ct_contract" else _LENGTHS_ONLY
        if name == "dot_transpose_perm":
            k = re.search(r"dot_transpose_perm\((\d)", m.before)
            if arg == 0:
                return _K
            if k and arg == (4 if k.group(1) == "0" else 3):
                return _OTHER_BATCH
    return ""


# --- running them -------------------------------------------------------------------------------


def _apply(source: Path, work: Path, m: Mutant) -> None:
    for p in source.glob("*.rules"):
        shutil.copy(p, work / p.name)
    target = work / m.file
    lines = target.read_text(encoding="utf-8").split("\n")
    if m.operator == "unsound":
        lines.append("    " + m.after if not m.after.startswith("rewrite") else m.after)
    else:
        old = lines[m.line - 1]
        indent = old[: len(old) - len(old.lstrip())]
        lines[m.line - 1] = indent + m.after
    target.write_text("\n".join(lines) + ("\n" if m.operator == "unsound" else ""), encoding="utf-8")


def run_mutants(directory: str | Path, sample: int | None = None, seed: int = 0,
                files: Sequence[str] | None = None) -> list[Outcome]:
    """Check every mutant (or a seeded ``sample`` of them) of the catalog in ``directory``;
    ``files`` restricts the mutants to these rule files (names such as "select.rules")."""
    source = Path(directory)
    todo = [m for m in mutants(source) if files is None or m.file in files]
    if sample is not None and sample < len(todo):
        todo = sorted(random.Random(seed).sample(todo, sample), key=lambda m: (m.file, m.line, m.operator))
    out: list[Outcome] = []
    steps(len(todo))
    with tempfile.TemporaryDirectory(prefix="tidu-mutant-") as tmp:
        work = Path(tmp)
        for m in todo:
            step(f"{m.file}:{m.line} {m.operator}")
            if m.equivalent:
                out.append(Outcome(m, "equivalent", m.equivalent))
                continue
            _apply(source, work, m)
            try:
                checked = m.rule_lines or (m.rule_line,)
                report = check_rules(replace=work, lines={(str(work / m.file), n) for n in checked})
            except (RuleSyntaxError, ValueError) as e:
                out.append(Outcome(m, "invalid", str(e).splitlines()[0]))
                continue
            if not report.rows:
                out.append(Outcome(m, "invalid", "the mutated line is no rule the loader kept"))
            elif report.ok:
                why = equivalence(m)
                out.append(Outcome(m, "equivalent", why) if why else Outcome(m, "survived", ""))
            else:
                bad = next(r for r in report.rows if r.result not in ("pass", "exempt"))
                out.append(Outcome(m, "killed", f"{bad.check} {bad.result}: {bad.detail[:100]}"))
    return out


def summary(outcomes: Sequence[Outcome]) -> str:
    """One line: counts per verdict and the kill rate among non-equivalent mutants."""
    count = {v: sum(o.verdict == v for o in outcomes) for v in ("killed", "invalid", "survived", "equivalent")}
    live = count["killed"] + count["invalid"] + count["survived"]
    rate = 100.0 * (count["killed"] + count["invalid"]) / live if live else 100.0
    return (f"{len(outcomes)} mutants: {count['killed']} killed by the checker, {count['invalid']} refused by the "
            f"loader, {count['equivalent']} equivalent, {count['survived']} survived ({rate:.1f} % of the "
            "non-equivalent mutants killed)")


__all__ = ["Mutant", "Outcome", "UNSOUND", "equivalence", "mutants", "run_mutants", "summary"]
