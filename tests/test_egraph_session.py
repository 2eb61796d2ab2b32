"""The persistent e-graph session: relations first needed inside a build's scope (a term
a normalization round writes for a constructor no load declared yet) share input
relations by column sorts, survive the scope's pop, and load the right facts later."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tidu.ops.catalog import catalog
from tidu.ops.dsl.ast import show
from tidu.ops.dsl.to_egglog import compiled_rules, rule_name
from tidu.simplify.egraph.session import Session
from tidu.simplify.egraph.worker import run_on_worker

# two relations with the same column sorts (one input relation between them), new to the session
SCHEMA = {
    "t_first": (["i64", "String"], "(union (Key c0) (Inp c1 7))"),
    "t_second": (["i64", "String"], "(union (Key c0) (Inp c1 8))"),
}


def _holds(s: Session, fact: str) -> bool:
    try:
        s.run(f"(check {fact})")
    except Exception:
        return False
    return True


def _scenario() -> list[bool]:
    cat = catalog()
    s = Session(cat, compiled_rules(cat), "exact")
    out = []
    with s.scope():  # both relations declared inside the scope, in one load
        s.load({"t_first": ["5\tf64[]"], "t_second": ["6\tf64[]"]}, SCHEMA)
        out += [_holds(s, '(= (Key 5) (Inp "f64[]" 7))'), _holds(s, '(= (Key 6) (Inp "f64[]" 8))'),
                _holds(s, '(= (Key 5) (Key 6))')]
    with s.scope():  # declared for good at the pop: no schema needed; the old facts are gone
        s.load({"t_second": ["9\tf64[]"], "t_first": ["10\tf64[]"]})
        out += [_holds(s, '(= (Key 9) (Inp "f64[]" 8))'), _holds(s, '(= (Key 10) (Inp "f64[]" 7))'),
                _holds(s, '(= (Key 5) (Inp "f64[]" 7))')]
    return out


def test_scoped_relations_share_an_input_relation_and_outlive_the_scope():
    assert run_on_worker(_scenario) == [True, True, False, True, True, False]


def test_an_undeclared_relation_without_schema_is_a_clear_error():
    def go() -> None:
        cat = catalog()
        s = Session(cat, compiled_rules(cat), "exact")
        with s.scope():
            s.load({"t_nowhere": ["1\tx"]})

    with pytest.raises(KeyError, match="t_nowhere is not declared"):
        run_on_worker(go)


def test_rules_go_in_when_a_build_could_match_them():
    """A session starts without rules; a build's ops and constants bring in the rules it
    could match, and those that the replacements of these can reach. Rules on ops or
    constants no build has (pow, a 0) stay out: the pop and push after each build copy
    every rule and constructor."""
    def go() -> list[bool]:
        cat = catalog()
        rules = compiled_rules(cat)
        s = Session(cat, rules, "exact")
        names = {show(rw.lhs) + " -> " + show(rw.rhs): rule_name(rw.loc) for rw in cat.all_rewrites()}

        def has(rule: str) -> bool:
            return any(f'"{names[rule]}"' in rules.rules[i] for i in s.installed)

        before = [has("mul(x, 1) -> x")]
        s.install_rules({("mul", 2)}, {(1.0, 0.0)})
        after = [has("mul(x, 1) -> x"), has("mul(x, 2) -> add(x, x)"), has("add(x, x) -> mul(2, x)"),
                 has("pow(x, 1) -> x"), has("mul(x, 0) -> 0")]
        s.install_rules({("mul", 2)}, {(2.0, 0.0)})  # x * 2 can match now, and make sums
        return before + after + [has("mul(x, 2) -> add(x, x)"), has("add(x, x) -> mul(2, x)"),
                                 has("mul(x, 0) -> 0")]

    # x * 0 -> 0 waits for a 0, which no build had and no rule makes
    assert run_on_worker(go) == [False, True, False, False, False, False, True, True, False]


FORK_SCRIPT = """
import os, sys, warnings
warnings.simplefilter("ignore")  # fork() in a process with threads: the child builds and exits
import tidu, tidu.numpy as tnp
tidu.make_graph(tidu.hessian(lambda x: tnp.exp(-x * x) * tnp.sin(x)))(0.3)
pid = os.fork()
if pid == 0:
    tidu.clear_trace_cache(); tidu.clear_cache()
    tidu.make_graph(tidu.hessian(lambda x: tnp.sin(x) * tnp.cos(x)))(0.3)
    sys.exit(0)
_, status = os.waitpid(pid, 0)
tidu.clear_trace_cache(); tidu.clear_cache()
g = tidu.make_graph(tidu.hessian(lambda x: tnp.tanh(x) * x))(0.3).graph
print("child", status, "parent", g.op_count)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_leaves_the_parents_sessions_alone():
    """A forked child builds with sessions of its own: the inherited ones share the
    parent's fact files, which the child's clean-up at exit used to delete (the parent's
    next build then failed to load its facts)."""
    out = subprocess.run([sys.executable, "-c", FORK_SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[:3] == ["child", "0", "parent"], out.stdout
