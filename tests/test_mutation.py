"""Mutation testing of the built-in catalog (tidu check-rules --mutate): single-line mutants
of rules/ must be refused by the checker, unless they are still right rules (equivalent,
with the argument). CI runs a seeded sample; the whole run is a slow test."""

from __future__ import annotations

import os
from importlib import resources

import pytest

from tidu.checkrules._mutate import Mutant, equivalence, mutants, run_mutants, summary
from tidu.cli import main

RULES = str(resources.files("tidu.rules"))
NOT_LINALG = ("arithmetic.rules", "complex.rules", "rounding.rules", "select.rules", "structure.rules",
              "transcendental.rules")


def test_mutants_are_made_by_every_operator():
    ms = mutants(RULES)
    ops = {m.operator for m in ms}
    assert ops >= {"sign", "negate", "drop-term", "swap", "attribute", "drop-conj", "drop-guard", "compare",
                   "constant", "unsound"}
    assert len(ms) > 400 and len({(m.file, m.line, m.after) for m in ms}) == len(ms)
    assert any(m.equivalent.endswith(" is symmetric in its operands") for m in ms)


# Both samples run in CI's slow step (seed 11's holds a complex.rules mutant whose SymPy
# proof is a slow piecewise simplification); the fast suite runs a sample through the CLI
# (test_cli_mutate_sample).
@pytest.mark.slow
@pytest.mark.parametrize("seed", [24, 11])
def test_a_seeded_sample_is_all_refused(seed):
    out = run_mutants(RULES, sample=16, seed=seed, files=NOT_LINALG)
    survivors = [o for o in out if o.verdict == "survived"]
    assert not survivors, "\n".join(f"{o.mutant.file}:{o.mutant.line} {o.mutant.after}" for o in survivors)
    assert sum(o.verdict == "killed" for o in out) >= 10, summary(out)


def test_equivalence_arguments_are_specific():
    right = Mutant("complex.rules", 47, 47, "negate", "rewrite    abs(-x) -> abs(x)", "rewrite    abs(x) -> abs(x)")
    wrong = Mutant("complex.rules", 47, 47, "negate", "rewrite    abs(-x) -> abs(x)", "rewrite    abs(x) -> x")
    assert equivalence(right) == "a rewrite of a term to itself"
    assert equivalence(wrong) == ""
    assert equivalence(Mutant("arithmetic.rules", 15, 15, "sign", "rewrite    x + 0 -> x",
                              "rewrite    x - 0 -> x")).startswith("x - 0 is x exactly")
    assert equivalence(Mutant("arithmetic.rules", 15, 15, "sign", "rewrite    x + 1 -> x",
                              "rewrite    x - 1 -> x")) == ""


def test_cli_mutate_sample(capsys):
    assert main(["check-rules", "--mutate", "--sample", "6", "--seed", "2", "--replace", RULES,
                 "--failures"]) == 0
    assert "6 mutants:" in capsys.readouterr().out
    assert main(["check-rules", "--mutate", "--only", "mul"]) == 2


@pytest.mark.slow
def test_a_larger_seeded_sample_over_every_file_is_all_refused():
    # CI's slow step: 60 mutants of every rule file, linear algebra included (about a minute)
    out = run_mutants(RULES, sample=60, seed=5)
    survivors = [o for o in out if o.verdict == "survived"]
    assert not survivors, "\n".join(f"{o.mutant.file}:{o.mutant.line} {o.mutant.after}" for o in survivors)
    assert {o.mutant.file for o in out} >= {"linalg.rules", "structure.rules", "arithmetic.rules"}


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("TIDU_MUTATION_FULL"),
                    reason="the whole catalog takes about 8 minutes: TIDU_MUTATION_FULL=1 pytest -m slow "
                           "tests/test_mutation.py (or tidu check-rules --mutate)")
def test_every_mutant_of_the_catalog_is_refused_or_equivalent():
    out = run_mutants(RULES)
    survivors = [o.mutant for o in out if o.verdict == "survived"]
    assert not survivors, summary(out) + "\n" + "\n".join(f"{m.file}:{m.line} {m.operator} {m.after}"
                                                           for m in survivors)
    assert sum(o.verdict == "killed" for o in out) > 380, summary(out)


def _jvp_under(m: Mutant, work, f, points):
    """The JVPs of ``f`` at ``points`` (x, t) with mutant ``m``'s catalog active."""
    import numpy as np

    import tidu
    from tidu.checkrules._mutate import _apply
    from tidu.ops.catalog import load_catalog, use_catalog

    _apply(resources.files("tidu.rules"), work, m)
    cat = load_catalog([(str(p), p.read_text(encoding="utf-8")) for p in sorted(work.glob("*.rules"))], trusted=True)
    with use_catalog(cat):
        return [np.asarray(tidu.jvp(f, (x,), (t,))[1]) for x, t in points]


@pytest.mark.slow
def test_numeric_equivalence_arguments_hold(tmp_path):
    """The equivalences argued with numbers: each listed mutant of lu's JVP gives the rule's
    JVP on square, tall and wide matrices; each listed coefficient mutant of spence's
    Taylor branch is off from mpmath by more than the 4e-16 that
    tests/test_special.py::test_spence_derivative_near_one_is_right_to_rounding allows."""
    import mpmath
    import numpy as np

    import tidu
    import tidu.numpy as tnp
    from tidu.scipy import special as tss

    rng = np.random.default_rng(0)
    mats = [(x, rng.normal(size=x.shape)) for x in (rng.normal(size=s) for s in [(3, 3), (4, 2), (2, 4), (5, 3)])]
    lu = tnp.op("lu")
    base = [np.asarray(tidu.jvp(lu, (x,), (t,))[1]) for x, t in mats]
    z = 1.0 + np.array([-9.9e-4, -3e-4, 2.5e-4, 9.9e-4])
    exact = np.array([float(mpmath.log(mpmath.mpf(v)) / (1 - mpmath.mpf(v))) for v in z])
    from test_special import I1E_POINTS, I1E_TOL, i1e_derivative_exact

    i1e_exact = i1e_derivative_exact(I1E_POINTS)
    lu_seen = spence_seen = i1e_seen = 0
    for m in mutants(RULES):
        why = equivalence(m)
        # (lu's mutants: the SVD rules' size counters pad with lu's helpers too, argued apart)
        if m.file == "linalg.rules" and "lu_" in m.after and "_extra = " not in m.after and why:
            got = _jvp_under(m, tmp_path, lu, mats)
            for g, b in zip(got, base, strict=True):
                np.testing.assert_allclose(g, b, rtol=0, atol=1e-13, err_msg=m.after)
            lu_seen += 1
        elif m.file == "special.rules" and why.startswith("NOT the same rule") and "spence" in why:
            (got,) = _jvp_under(m, tmp_path, tnp.op("spence"), [(z, np.ones_like(z))])  # (the rule's)
            assert np.max(np.abs(got - exact) / np.abs(exact)) > 4e-16, m.after
            spence_seen += 1
        elif m.file == "special.rules" and why.startswith("NOT the same rule") and "i1e" in why:
            (got,) = _jvp_under(m, tmp_path, tss.i1e, [(I1E_POINTS, np.ones_like(I1E_POINTS))])
            assert np.max(np.abs(got - i1e_exact) / np.abs(i1e_exact)) > I1E_TOL, m.after
            i1e_seen += 1
    assert (lu_seen, spence_seen, i1e_seen) == (5, 7, 25)
