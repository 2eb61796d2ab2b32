"""The soundness check of an exact rewrite compares the two sides bit for bit (up to a
zero's sign): a tolerance let rewrites that change values through, and a user file
loading them changed tidu.jit's results (x + 1e-13 -> x gave 0 for 1e-13); a real
rewrite's sides are compared exactly wherever their floats differ at all."""

from __future__ import annotations

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp
from tidu.checkrules import UnsoundRewriteError, check_rules

WRONG = {
    "rewrite    x + 1e-13 -> x": "FAIL",
    "rewrite    x * 1.0000000001 -> x": "FAIL",
    "rewrite    sin(x) + 1e-13 -> sin(x)": "FAIL",
    "rewrite real: x + 1e-25 -> x": "FAIL",
    "rewrite    (x * 3) / 3 -> x": "warn",  # exact in the reals, not in IEEE: unconfirmed
}


@pytest.mark.parametrize("line, verdict", list(WRONG.items()))
def test_a_rewrite_that_changes_values_is_refused(tmp_path, line, verdict) -> None:
    path = tmp_path / "user.rules"
    path.write_text(line + "\n", encoding="utf-8")
    report = check_rules([str(path)])
    assert [r.result for r in report.rows] == [verdict], report.rows
    assert not report.ok
    with pytest.raises(UnsoundRewriteError), tidu.use_rules(str(path)):
        pass


def test_right_rewrites_still_pass(tmp_path) -> None:
    path = tmp_path / "user.rules"
    path.write_text("rewrite    x * 1 -> x\nrewrite real: (x * 3) / 3 -> x\n", encoding="utf-8")
    report = check_rules([str(path)])
    assert report.ok and [r.result for r in report.rows] == ["pass", "pass"]
    with tidu.use_rules(str(path)):  # (the exact one applies: x * 1 is x, bit for bit)
        x = np.array([0.1, -0.0, np.inf])
        np.testing.assert_array_equal(tidu.jit(lambda v: v * 1.0 + 1e-13)(x), x + 1e-13)
        assert tidu.make_graph(lambda v: tnp.sum(v * 1.0))(x).graph.op_count == 1
