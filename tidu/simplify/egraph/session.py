"""A persistent egglog e-graph per catalog, reused by every build.

Setting up an e-graph (sort, constructors, input relations with their load rules, the
compiled rewrites) costs several milliseconds, more than simplifying a small graph. A
``Session`` does it once per catalog and process; each build then runs inside
``(push)``/``(pop)``: its facts are loaded in bulk from tab-separated files (decision 3:
``(input ...)`` plus one load rule per relation; relations with the same column sorts
share one input relation and file, a tag column first), rewritten, frozen for extraction and
discarded, leaving the e-graph as it was (the pop, and the next build's push, run on the
worker after the build has returned its result). Declarations a build needs that are not there
yet (a variadic arity first seen, a guard relation) are added before its ``push``, so
they outlive it.

Sessions live on the egglog worker thread (``tidu.simplify.egraph.worker``): only code running
there may use them.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tidu.ops.catalog import Catalog
from tidu.ops.dsl.to_egglog import GROW, RULESET, RULESETS, CompiledRules, compiled_rules, constructor
from tidu.simplify.egraph.worker import after_job, on_worker

LOAD = "load"  # the ruleset of the load rules

# relation -> (column sorts, load action over the columns c0, c1, ...)
Schema = dict[str, tuple[list[str], str]]
# rows (a, b): the classes of keys a and b are one
UNION_ROWS: tuple[list[str], str] = (["i64", "i64"], "(union (Key c0) (Key c1))")


@functools.cache
def term_schema(name: str, arity: int, n_attrs: int) -> tuple[list[str], str]:
    """Rows of a term relation: graph id, type, operand ids, attribute codes; loading a
    row unions ``(Key id)`` with the term."""
    cols = [f"c{j}" for j in range(2 + arity + n_attrs)]
    kids = [f"(Key {c})" for c in cols[2 : 2 + arity]]
    term = " ".join([name, "c1", *kids, *cols[2 + arity :]])
    sorts = ["i64", "String"] + ["i64"] * arity + ["String"] * n_attrs
    return sorts, f"(union (Key c0) ({term}))"


def _fact_root() -> str | None:
    """Where fact files go: a RAM-backed directory when there is one (they are written
    and read once per build), else the system's temporary directory."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


_SORT_CODES = {"i64": "i", "String": "s", "f64": "f"}


# Column layouts that narrower relations share, padded with zeros: a guard's rows
# (i64) go with Eq and Out (i64 i64), a unary op's (i64 String i64) with the binary
# ops' (i64 String i64 i64). A small build then writes three files, not five.
_PADDED = {("i64",): ["i64", "i64"], ("i64", "String", "i64"): ["i64", "String", "i64", "i64"]}


def _group_of(sorts: list[str]) -> tuple[str, list[str]]:
    """The input relation that carries the rows of every relation with these column
    sorts (or sorts they are padded to, ``_PADDED``), a tag column first: one fact file
    per group instead of one per relation (a build loads a dozen relations; each file
    and ``input`` costs ~15-30 µs); and its column sorts."""
    wide = _PADDED.get(tuple(sorts), sorts)
    return "in_" + "".join(_SORT_CODES.get(x, x) for x in wide), wide


def _remove_facts(directory: str, files: dict[str, int]) -> None:
    for fd in files.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    shutil.rmtree(directory, True)


def size_of(outputs: list[Any]) -> int:
    """The e-node count in the output of a ``(print-size)`` command."""
    for out in outputs:
        sizes = getattr(out, "sizes", None)
        if sizes is not None:
            return sum(n for name, n in sizes if name.startswith("op_") or name in ("Inp", "Const", "Lit"))
    return 0


class Session:
    """An e-graph with the catalog's declarations and rewrites, and a fact directory."""

    def __init__(self, cat: Catalog, rules: CompiledRules, semantics: str = "real") -> None:
        assert on_worker(), "egglog sessions live on the egglog worker thread"
        self.cat, self.rules = cat, rules
        self.directory = tempfile.mkdtemp(prefix="tidu-egraph-", dir=_fact_root())
        # fact files stay open (group -> descriptor): rewritten in place every build, as
        # opening one costs ~15 µs
        self._files: dict[str, int] = {}
        self._finalizer = weakref.finalize(self, _remove_facts, self.directory, self._files)
        _LIVE.add(self)
        # (imported here: egglog's package is a large part of `import tidu`, and the graphs
        # prematch.shortcut simplifies never reach egglog)
        from egglog.bindings import EGraph

        self.eg = EGraph(fact_directory=self.directory)
        self.relations: set[str] = set()
        self.constructors: set[tuple[str, int]] = set()
        self.depth = 0  # open pushes
        self._scoped: set[str] = set()  # relations declared inside the open scope only
        self._later: dict[str, str] = {}  # their declarations, to run again at its pop
        self._groups: set[str] = set()  # input relations (see _group_of) declared for good
        self._later_groups: dict[str, str] = {}  # ... and inside the open scope only
        self._tags: dict[str, tuple[str, int, int]] = {}  # relation -> (its group, its tag, zero columns)
        self.builds = 0
        self.semantics = semantics
        # The session starts without op constructors and rules: each costs the pop and
        # push after every build ~5 and ~2.5 µs. An exact session takes the exact rules
        # only; a rule goes in once a build could match it (``install_rules``), with the
        # constructors it names.
        wanted = {RULESETS["exact"], RULESETS["exact"] + GROW} if semantics == "exact" else None
        self._waiting = [i for i, rs in enumerate(rules.rulesets) if wanted is None or rs in wanted]
        self.installed: list[int] = []  # the rules in the e-graph (indices into rules.rules)
        self._reach: set[tuple[str, int]] = set()  # ops the installed rules can meet or make
        self._reach_constants: set[tuple[float, float]] = set()  # ... and splat constants
        # what "any constant" means to these rules: every constant a pattern names
        self._all_constants = {c for i in self._waiting for c in rules.rule_needs_constants[i]}
        decl = [rules.declarations(cat, set(), only=set()), f"(ruleset {LOAD})"]
        self._cold = {LOAD, *(wanted or {rs for rs in rules.rulesets})}
        self.eg.parse_and_run_program("\n".join(decl) + "\n" + self._warm_program())

    def _relation_program(self, rel: str, sorts: list[str], action: str, scoped: bool = False) -> str:
        """The load rule of relation ``rel`` (its rows come tagged in its group's input
        relation), and the group's declaration when it is new."""
        group, wide = _group_of(sorts)
        program = ""
        if group not in self._groups and group not in self._later_groups:
            program = decl = f"(relation {group} (i64 {' '.join(wide)}))\n"
            if scoped:
                self._later_groups[group] = decl
            else:
                self._groups.add(group)
        hit = self._tags.get(rel)
        if hit is None:
            tag = sum(1 for g, _, _ in self._tags.values() if g == group)
            hit = self._tags[rel] = (group, tag, len(wide) - len(sorts))
        cols = " ".join(f"c{j}" for j in range(len(wide)))  # the padding columns: unused
        return program + f"(rule (({group} {hit[1]} {cols})) ({action}) :ruleset {LOAD})"

    def _warm_program(self) -> str:
        """Runs of the rulesets with rules never run in the base e-graph. egglog prepares a
        rule on its first run, and a ``(pop)`` forgets what was prepared inside the scope:
        without this, the first iteration of every build paid ~3 µs per rule (57 exact
        rules: a third of a small build's rewriting). Run here, outside every push and on
        an e-graph without terms, they match nothing and the preparation is kept for good.
        Only for a program that runs outside every push (even inside a ``scope`` whose
        push is still pending)."""
        program = "".join(f"(run {rs} 1)\n" for rs in sorted(self._cold))
        self._cold.clear()
        return program

    def install_rules(self, ops: set[tuple[str, int]], constants: set[tuple[float, float]] | None) -> None:
        """Install the rules a graph with the (op, arity) constructors ``ops`` and the splat
        constants ``constants`` ((re, im); None: any) could match: those whose pattern
        needs only ops and constants the graph has or installed rules make, to a fixpoint
        (outside any push; a rule never installed could never have matched)."""
        if constants is None:  # any constant may turn up (the real normal forms write them)
            constants = self._all_constants
        if ops <= self._reach and constants <= self._reach_constants:
            return
        reach, reach_constants = self._reach | ops, self._reach_constants | constants
        rules, new = self.rules, []
        while True:
            fit = [i for i in self._waiting
                   if rules.rule_needs[i] <= reach and rules.rule_needs_constants[i] <= reach_constants]
            if not fit:
                break
            for i in fit:
                reach |= rules.rule_makes[i]
                reach_constants |= rules.rule_makes_constants[i]
            new += fit
            taken = set(fit)
            self._waiting = [i for i in self._waiting if i not in taken]
        self._reach, self._reach_constants = reach, reach_constants
        self.installed += new
        if new:
            needed = set().union(*(rules.rule_needs[i] | rules.rule_makes[i] for i in new))
            self.declare({}, needed)
            self._cold.update(rules.rulesets[i] for i in new)
            self.declare_program("\n".join(rules.rules[i] for i in sorted(new)))

    def declare_all_terms(self, ops: frozenset[str] = frozenset()) -> None:
        """Input relations for what a normalization round writes (tidu.simplify.egraph.normalize):
        ``Eq`` (unions by key), constants, inputs, sign facts and the terms of ``ops``
        (its field operations). A term of another constructor (a key for a class that has
        none) is declared when a load first needs it (``load``): every declared relation
        makes each push/pop and saturation iteration dearer (~4 µs each)."""
        if self._all_terms_done:
            return
        schema: Schema = {"Eq": UNION_ROWS,
                          "Const": (["i64", "String", "f64", "f64"], "(union (Key c0) (Const c1 c2 c3))"),
                          "Inp": (["i64", "String", "i64"], "(union (Key c0) (Inp c1 c2))"),
                          "Lit": (["i64", "String", "i64"], "(union (Key c0) (Lit c1 c2))")}
        for g in self.rules.class_guards:
            schema["g_" + g] = (["i64"], f"(g_{g} (Key c0))")
        arities = {(op, len(self.cat[op].operands)) for op in ops}
        for op, n in arities:
            name = constructor(self.cat[op], n)
            schema[name] = term_schema(name, n, 0)
        self.declare(schema, arities)
        self._all_terms_done = True

    _all_terms_done = False

    def declare(self, schema: Schema, arities: set[tuple[str, int]]) -> None:
        """Declare what a build needs and the session lacks (outside any push)."""
        assert self.depth == 0
        lines = []
        for op, n in sorted(arities - self.constructors):
            prim = self.cat.get_primitive(op)  # control-flow ops too
            args = " ".join(["String"] + ["T"] * n + ["String"] * len(prim.attrs))
            lines.append(f"(constructor {constructor(prim, n)} ({args}) T)")
            self.constructors.add((op, n))
        for rel in sorted(set(schema) - self.relations):
            lines.append(self._relation_program(rel, *schema[rel]))
            self.relations.add(rel)
            self._cold.add(LOAD)
        if lines:
            self.declare_program("\n".join(lines))

    @contextmanager
    def scope(self) -> Iterator[None]:
        """A push/pop scope: everything added inside is gone afterwards. The ``(pop)``
        and the next scope's ``(push)`` (together ~0.5-1 ms, more than a small build's
        rewriting) run on the worker after the build has handed back its result
        (``worker.after_job``), so a build finds its ``(push)`` open already; otherwise
        the push goes out with the scope's first ``load``."""
        self._settle()
        self._pending_push = not self._open
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            if not self._pending_push:  # something was pushed: reset off the critical path
                self._dirty, self._open = True, False
                after_job(self._reset)
            self._pending_push = False
            self.builds += 1

    _pending_push = False  # the scope's (push) is still to be sent (with the first load)
    _open = False  # a (push) is open and empty: the next scope starts inside it
    _dirty = False  # a scope ended and its (pop) has not run yet
    broken = False  # a background reset failed: session_for replaces the session

    def _reset(self) -> None:
        """Pop the last scope and open the next one (on the worker, between jobs)."""
        if not self._dirty:
            return
        try:
            later = self._later_program()
            self.eg.parse_and_run_program(f"(pop)\n{later}{self._warm_program()}(push)")
        except Exception:
            self.broken = True
            raise
        self._dirty, self._open = False, True

    def _settle(self) -> None:
        """Run a pending reset now (a second scope in the same worker job)."""
        if self._dirty:
            self._reset()

    def _outside(self) -> None:
        """Leave every push (declarations must outlive the scopes)."""
        assert self.depth == 0
        if self._dirty or self._open:
            later = self._later_program()
            self.eg.parse_and_run_program(f"(pop)\n{later}{self._warm_program()}")
            self._dirty = self._open = False

    def _later_program(self) -> str:
        """Declarations of the relations first declared inside the popped scope, for good."""
        program = "".join(self._later_groups.values())
        program += "".join(line + "\n" for line in self._later.values())
        if self._later:
            self._cold.add(LOAD)
        self.relations.update(self._later)
        self._groups.update(self._later_groups)
        self._later.clear()
        self._later_groups.clear()
        self._scoped.clear()
        return program

    def declare_program(self, program: str) -> None:
        """Run declarations (rulesets...) outside every push, so that they persist."""
        self._outside()
        self.eg.parse_and_run_program(program + "\n" + self._warm_program())

    def load(self, rows: dict[str, list[str]], schema: Schema | None = None) -> int:
        """Load fact rows (relation -> tab-separated lines), run the load rules, and
        return the e-graph's size (all in one egglog call). A relation not declared yet
        is declared from ``schema`` inside the scope, and for good at its pop."""
        program = [self._warm_program() + "(push)"] if self._pending_push else []
        self._pending_push = False
        files: dict[str, list[str]] = {}
        for rel in sorted(rows):
            lines = rows[rel]
            if not lines:
                continue
            if rel not in self.relations and rel not in self._scoped:
                if schema is None or rel not in schema:
                    raise KeyError(f"relation {rel} is not declared and no schema was given for it")
                decl = self._relation_program(rel, *schema[rel], scoped=True)
                program.append(decl)
                self._scoped.add(rel)
                self._later[rel] = decl.rsplit("\n", 1)[-1]  # the rule (the group: _later_groups)
            group, tag, pad = self._tags[rel]
            prefix = f"{tag}\t"
            if pad:
                suffix = "\t0" * pad
                chunk = prefix + f"{suffix}\n{prefix}".join(lines) + suffix
            else:
                chunk = prefix + f"\n{prefix}".join(lines)
            files.setdefault(group, []).append(chunk)
        for group, chunks in files.items():
            fd = self._files.get(group)
            if fd is None:
                fd = self._files[group] = os.open(os.path.join(self.directory, group + ".tsv"),
                                                  os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            data = ("\n".join(chunks) + "\n").encode()
            done = 0
            while done < len(data):  # os-level writes: ~5 µs a file instead of ~12
                done += os.pwrite(fd, memoryview(data)[done:], done)
            os.ftruncate(fd, len(data))
            program.append(f'(input {group} "{group}.tsv")')
        program.append(f"(run {LOAD} 1)")
        program.append("(print-size)")
        return size_of(self.eg.parse_and_run_program("\n".join(program)))

    def size(self) -> int:
        """E-nodes in the term tables (Key, relations and guards excluded)."""
        return size_of(self.eg.parse_and_run_program("(print-size)"))

    def run(self, program: str) -> list[Any]:
        return self.eg.parse_and_run_program(program)


_SESSIONS: dict[tuple[int, str], Session] = {}
MAX_SESSIONS = 4  # catalogs in use at once are few; older sessions are dropped
# egglog keeps a few KB per push/pop scope after the pop (measured ~6 KB a build): a
# session is replaced after this many builds (about 10 ms), so memory stays flat
BUILDS_PER_SESSION = 200
_LIVE: weakref.WeakSet[Session] = weakref.WeakSet()  # every session (see _forget_after_fork)


def _forget_after_fork() -> None:
    """A forked child makes sessions of its own: the inherited ones share the parent's
    fact files, and cleaning them up at the child's exit would delete them under the
    parent."""
    for session in list(_LIVE):
        session._finalizer.detach()
    _LIVE.clear()
    _SESSIONS.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def session_for(cat: Catalog, semantics: str = "real") -> Session:
    """The session of ``cat`` for ``semantics`` (created on first use; a real one also
    serves proofs). Call on the worker thread."""
    key = (id(cat), semantics)
    s = _SESSIONS.get(key)
    if s is None or s.cat is not cat or s.builds >= BUILDS_PER_SESSION or s.broken:
        _SESSIONS.pop(key, None)
        if len(_SESSIONS) >= MAX_SESSIONS:
            _SESSIONS.pop(next(iter(_SESSIONS)))
        s = _SESSIONS[key] = Session(cat, compiled_rules(cat), semantics)
    else:  # most recently used last
        _SESSIONS[key] = _SESSIONS.pop(key)
    return s


__all__ = ["LOAD", "RULESET", "UNION_ROWS", "Schema", "Session", "session_for", "size_of", "term_schema"]
