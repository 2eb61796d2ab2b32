"""Loading a rule file checks its rewrites (issue 30): ``tidu.use_rules``/``tidu.load_rules``
and the CLI's ``--rules`` run check-rules' soundness check on them and refuse an unsound
one (file:line, the rewrite, a counterexample) unless the file is declared trusted; the
e-graph refuses a catalog whose rewrites were neither checked nor trusted, so the
low-level ``use_catalog(load_catalog(...))`` cannot slip one in."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp
from tidu.checkrules import UnsoundRewriteError, vet_catalog
from tidu.checkrules.loading import rewrite_problems
from tidu.cli import main
from tidu.ops.catalog import catalog, load_rule_paths, use_catalog
from tidu.ops.dsl.ast import RuleSyntaxError
from tidu.simplify.vetting import UnvettedRewritesError

BAD = Path(__file__).parent / "bad_rules"
UNSOUND = str(BAD / "unsound_real.rules")  # the example at line 4: exp(log(x)) -> x, unguarded
GOOD = str(BAD / "good_softplus.rules")  # sound: real: log1p(exp(x)) -> softplus(x)


def exp_log(x):
    return tnp.exp(tnp.log(x))


def test_an_unsound_rewrite_is_refused_with_where_what_and_a_counterexample():
    with pytest.raises(UnsoundRewriteError) as e, tidu.use_rules(UNSOUND):
        pass
    msg = str(e.value)
    assert msg.startswith(f"{UNSOUND}:4:")
    assert f"{UNSOUND}:4: rewrite real: exp(log(x)) -> x: fail: float64: at x=-1: lhs nan, rhs -1" in msg
    assert "trusted=True" in msg
    assert isinstance(e.value, RuleSyntaxError)  # what callers of load_rules already catch


def test_load_rules_refuses_and_changes_nothing():
    before = catalog()
    with pytest.raises(UnsoundRewriteError):
        tidu.load_rules(UNSOUND)
    assert catalog() is before
    assert math.isnan(tidu.jit(exp_log)(-1.0))


def test_a_trusted_file_loads_and_behaves_as_before():
    with tidu.use_rules(UNSOUND, trusted=True), tidu.rewrite_semantics("real"):
        assert tidu.jit(exp_log)(-1.0) == -1.0  # the unsound rewrite applies: the caller vouched for it
    # trust is per load: the same file loaded again without it is checked (and refused)
    with pytest.raises(UnsoundRewriteError), tidu.use_rules(UNSOUND):
        pass


def test_a_sound_user_rewrite_loads_and_applies():
    with tidu.use_rules(GOOD) as cat:
        assert not cat.unvetted()
        # (a real rewrite: log(1 + exp(x)) rounds differently, so the exact semantics keeps log1p)
        g = tidu.make_graph(lambda x: tnp.sum(tnp.log1p(tnp.exp(x))), semantics="real")(np.ones(3))
        assert g.graph.op_histogram() == {"softplus": 1, "reduce_sum": 1}
        np.testing.assert_allclose(tidu.jit(lambda x: tnp.log1p(tnp.exp(x)))(np.ones(3)), np.log1p(np.e))


def test_the_low_level_api_cannot_slip_an_unsound_rewrite_in():
    cat = load_rule_paths([UNSOUND])
    with use_catalog(cat), tidu.rewrite_semantics("real"), pytest.raises(UnvettedRewritesError) as e:
        tidu.jit(exp_log)(-1.0)
    assert "unsound_real.rules" in str(e.value) and "trusted=True" in str(e.value)
    with pytest.raises(UnsoundRewriteError):
        vet_catalog(cat)
    assert cat.unvetted()  # still refused
    with use_catalog(load_rule_paths([UNSOUND], trusted=True)), tidu.rewrite_semantics("real"):
        assert tidu.jit(exp_log)(-1.0) == -1.0
    with use_catalog(vet_catalog(load_rule_paths([GOOD]))):
        np.testing.assert_allclose(tidu.jit(lambda x: tnp.log1p(tnp.exp(x)))(1.0), np.log1p(np.e))


def test_verdicts_are_cached_per_file_content():
    cat = load_rule_paths([GOOD])
    (source,) = cat.rewrite_sources
    assert rewrite_problems(cat, source) == [] and rewrite_problems(cat, source) is rewrite_problems(cat, source)


def test_cli_rules_are_checked_unless_trusted(capsys):
    assert main(["diff", "exp(log(x))", "--wrt", "x", "--rules", UNSOUND]) == 2
    err = capsys.readouterr().err
    assert f"--rules: {UNSOUND}:4:" in err and "exp(log(x)) -> x" in err
    assert main(["diff", "exp(log(x))", "--wrt", "x", "--rules", UNSOUND, "--trust-rules"]) == 0
    assert main(["diff", "log1p(exp(x))", "--wrt", "x", "--rules", GOOD]) == 0
