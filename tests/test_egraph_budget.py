"""The e-graph's budgets hold inside an iteration: the worst rule set a user can write
(associativity and commutativity of add) ends with the best result so far and names the
budget that stopped it; memory stays bounded (issue: a 20-term sum used to abort the
process allocating 1.9 GB in one iteration)."""

from __future__ import annotations

import resource
import time

import numpy as np
import pytest

import tidu
from tidu import Aval, FragmentBuilder, Limits, materialize_merge, resolve
from tidu.ops.catalog import builtin_rule_files, load_catalog, use_catalog

AC = """
rewrite x + y -> y + x
rewrite (x + y) + z -> x + (y + z)
rewrite x + (y + z) -> (x + y) + z
"""

F64 = Aval((), "float64")


def _sum_chain(n: int):
    b = FragmentBuilder("S")
    xs = [b.input(f"x{i}", F64) for i in range(n)]
    acc = xs[0]
    for x in xs[1:]:
        acc = b.add_op("add", [acc, x])[0]
    return b.build(), [b.output(acc)], [f"x{i}" for i in range(n)]


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# No time budget (seconds=inf): what stops the run is the e-node count, on any machine.
# The "seconds" stop is tested speed-independently by tests/test_materialize.py (seconds=0).
NO_CLOCK = float("inf")
HANG_GUARD = 60.0  # seconds; a quiet machine needs a fraction of one


@pytest.mark.parametrize("limits", [
    Limits(nodes=200_000, seconds=NO_CLOCK, iterations=100),
    Limits(nodes=10_000_000, growth=1000.0, seconds=NO_CLOCK, iterations=100),
])
def test_ac_rules_on_a_20_term_sum_stop_within_budget(limits):
    # trusted: associativity is not a law of floating point ((x + y) + z with y = -z = 1e300),
    # so the load-time soundness check would refuse these rules; they are here to blow the e-graph up
    cat = load_catalog([*builtin_rule_files(), ("ac.rules", AC)], trusted=True)
    frag, keys, names = _sum_chain(20)
    before = _rss_mb()
    t0 = time.perf_counter()
    with use_catalog(cat):
        g = materialize_merge(resolve(frag), keys, limits=limits)
    elapsed = time.perf_counter() - t0
    assert g.stats["stop_reason"] == "nodes", g.stats["stop_reason"]
    assert g.stats["egraph_nodes"] <= g.stats["node_budget"]
    assert elapsed < HANG_GUARD
    assert _rss_mb() - before < 2048
    # the best result so far: still a sum of the 20 inputs, 19 adds
    assert g.op_count == 19
    vals = np.arange(1.0, 21.0)
    (y,) = tidu.compile(g).eval({n: v for n, v in zip(names, vals, strict=True)})
    assert y == vals.sum()


def test_budget_is_proportional_to_the_input():
    lim = Limits()
    assert lim.node_budget(10) == lim.min_nodes
    assert lim.node_budget(1_000_000) == lim.nodes
    assert lim.node_budget(10_000) == int(lim.growth * 10_000)
