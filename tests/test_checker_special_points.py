"""check-rules samples the points where rules break and random samples never go (issue 30):
ties of max-based rules (two equal maxima in a reduction's slice), size-1 and zero-size
axes of reductions and shape ops, and gauge-dependent linear algebra outputs, which are
checked as raw outputs in tidu's gauge (docs/verification.md). A wrong rule of each kind
fails; each passed the checker before these samples existed."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tidu.checkrules import check_rules
from tidu.checkrules._samples import samples, ties
from tidu.core.keys import Attrs
from tidu.ops.catalog import builtin_catalog, builtin_rule_files

BAD = Path(__file__).parent / "bad_rules"


def _mutated_catalog(tmp_path: Path, file: str, old: str, new: str) -> tuple[Path, int]:
    """A copy of the built-in rules with ``old`` replaced by ``new`` in ``file``, and the line."""
    d = tmp_path / "rules"
    d.mkdir()
    for name, text in builtin_rule_files():
        (d / Path(name).name).write_text(text, encoding="utf-8")
    text = (d / file).read_text(encoding="utf-8")
    assert old in text, f"{file} no longer has the rule this test mutates:\n{old}"
    (d / file).write_text(text.replace(old, new, 1), encoding="utf-8")
    return d, text[: text.index(old)].count("\n") + 1


def _derivative_failures(report) -> list[str]:
    return [r.detail for r in report.failures if r.check == "derivative"]


def test_a_reduce_max_rule_wrong_at_ties_fails(tmp_path):
    # every tied maximum gets the whole tangent instead of sharing it: right wherever the
    # maximum of a slice is unique, which it always is on random values
    d, line = _mutated_catalog(tmp_path, "structure.rules", "jvp:       reduce_sum(dx * ties) / reduce_sum(ties)",
                               "jvp:       reduce_sum(dx * ties)")
    report = check_rules(replace=d, lines={(str(d / "structure.rules"), line)})
    (detail,) = _derivative_failures(report)
    assert "fd real" in detail and "finite difference" in detail


def test_a_one_operand_rule_at_a_kink_takes_a_one_sided_derivative_or_fails(tmp_path):
    """abs's 1 at 0 (the derivative from the right) passes, as the mean of the one-sided
    derivatives (0) did; a value that is neither, 0.5 at 0, fails there."""
    report = check_rules(only=["abs"])
    assert not report.failures
    right = 'jvp:       select(compare(x, 0)[direction="GE"], 1, -1) * dx'
    for jvp, ok in ((right.replace('"GE"]', '"GT"]'), True),  # the left derivative, -1
                    ('jvp:       select(compare(x, 0)[direction="GT"], dx, select(compare(x, 0)[direction="EQ"], '
                     '0.5 * dx, -dx))', False)):
        (tmp_path / str(ok)).mkdir()
        d, line = _mutated_catalog(tmp_path / str(ok), "complex.rules", right, jvp)
        report = check_rules(replace=d, lines={(str(d / "complex.rules"), line)})
        failures = _derivative_failures(report)
        assert (not failures) if ok else ("at x=0" in failures[0])


def test_a_rule_whose_derivative_has_a_kink_takes_a_one_sided_second_derivative_or_fails(tmp_path):
    """i1e'' jumps at 0 (from 1 to -1): its rule's derivative there, -1 (from the right, as
    |x|'s), passes; a value that is neither side's nor their mean fails there."""
    report = check_rules(only=["i1e"])
    assert not report.failures
    old = "jvp:       select(small, near0, i0e(x)"
    d, line = _mutated_catalog(tmp_path, "special.rules", old, 'jvp:       select(small, near0 - 0.5 * xs * '
                               '(select(compare(xs, 0)[direction="EQ"], q + 1, q) - q), i0e(x)')
    report = check_rules(replace=d, lines={(str(d / "special.rules"), line)})
    failures = _derivative_failures(report)
    assert failures and "at x=0: derivative of the jvp" in failures[0]


def test_a_reduction_rule_wrong_only_at_size_1_fails():
    report = check_rules([BAD / "size_one_jvp.rules"])
    (detail,) = _derivative_failures(report)
    assert "jvp 0, finite difference" in detail


def test_a_reduction_rule_wrong_only_at_an_empty_slice_fails():
    report = check_rules([BAD / "empty_slice_jvp.rules"])
    (detail,) = _derivative_failures(report)
    assert "jvp nan, finite difference 0" in detail


def test_a_gauge_dependent_output_is_checked_with_its_gauge_term(tmp_path):
    # eigh_vectors without the term that keeps each eigenvector's first component real: its
    # gauge-invariant functions (projectors, |v|^2) are still right, the raw output is not
    old = ('jvp:       G - out * broadcast_in_dim(select(compare(V0, 0)[direction="EQ"], 0,\n'
           '                   (G0 - convert(real(G0))[dtype=dtype(x)]) / V0_or_1))[shape=shape(x), '
           'dims=all_axes(rank(x))]')
    new = "jvp:       G + out * broadcast_in_dim(0 * (V0_or_1 + G0))[shape=shape(x), dims=all_axes(rank(x))]"
    d, line = _mutated_catalog(tmp_path, "linalg.rules", old, new)
    report = check_rules(replace=d, lines={(str(d / "linalg.rules"), line)})
    (detail,) = _derivative_failures(report)
    assert "fd real: max err" in detail and "fd complex: max err" in detail
    assert detail.index("fd complex") < detail.index("finite difference")  # real ok: the term is 0 there


def test_reductions_and_shape_ops_are_sampled_at_size_1_and_0():
    cat = builtin_catalog()
    for name in ("reduce_sum", "reduce_max", "reduce_prod", "reshape", "transpose", "reverse", "slice", "pad",
                 "concatenate", "dot_general", "broadcast_in_dim"):
        prim = cat[name]
        # operands and results: a slice to an empty result reads a non-empty operand
        shapes = [av.shape for avals, attrs in samples(prim, "float64")
                  for av in [*avals, *prim.infer(avals, Attrs(attrs))]]
        assert any(0 in s for s in shapes), name
        assert any(1 in s for s in shapes), name
    axes_sizes = {tuple(avals[0].shape[i] for i in attrs["axes"])
                  for avals, attrs in samples(cat["reduce_max"], "float64")}
    assert {(1,), (0,)} <= axes_sizes


def test_reduction_ties_are_pairs_of_maxima():
    prim = builtin_catalog()["reduce_max"]
    (avals, attrs), *_ = samples(prim, "float64")
    x = np.random.default_rng(0).normal(size=avals[0].shape)
    (tied,) = ties(prim, avals, [x], attrs)
    moved = np.moveaxis(tied, attrs["axes"], range(-len(attrs["axes"]), 0)).reshape(-1, 8)
    top = np.sort(moved, axis=1)[:, -3:]
    assert np.all(top[:, 1] == top[:, 2]) and np.all(top[:, 0] < top[:, 1])  # exactly two tied maxima


def test_the_built_in_reductions_and_max_rules_pass_at_the_special_points():
    report = check_rules(only=["reduce_max", "reduce_sum", "reduce_prod", "maximum", "minimum", "concatenate",
                               "pad", "slice", "dot_general"])
    assert report.ok, report.table()
