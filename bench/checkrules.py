"""How long the rule checker takes, and how many wrong rules it kills.

Times ``tidu check-rules`` on the whole built-in catalog (in process, after imports), and
runs a seeded sample of single-line mutants of the catalog (``tidu check-rules --mutate
--sample N --seed 0``): the share of non-equivalent mutants the checker refuses (target:
100 %, issue 13; the whole catalog's run is the slow test
tests/test_mutation.py::test_every_mutant_of_the_catalog_is_refused_or_equivalent).

    python bench/checkrules.py [--quick]

--quick is the smoke run of tests/test_bench_smoke.py: the rules of a few primitives and a
few mutants of one rule file, the same code paths on a fraction of the work.
"""

from __future__ import annotations

import argparse
import time
from importlib import resources

from common import judge, table

from tidu.checkrules import check_rules
from tidu.checkrules._mutate import mutants, run_mutants, summary

QUICK_PRIMITIVES = ["exp", "reshape"]
QUICK_FILES = ["structure.rules"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rules = str(resources.files("tidu.rules"))
    t0 = time.perf_counter()
    report = check_rules(only=QUICK_PRIMITIVES if args.quick else None)
    check_s = time.perf_counter() - t0
    passed = sum(r.result in ("pass", "exempt") for r in report.rows)
    sample = 4 if args.quick else 60
    t0 = time.perf_counter()
    out = run_mutants(rules, sample=sample, seed=0, files=QUICK_FILES if args.quick else None)
    mut_s = time.perf_counter() - t0
    live = [o for o in out if o.verdict != "equivalent"]
    killed = sum(o.verdict in ("killed", "invalid") for o in live)
    rate = 100.0 * killed / len(live) if live else 100.0
    total = len(mutants(rules))
    what = f"the rules of {', '.join(QUICK_PRIMITIVES)} (quick run)" if args.quick else "the built-in catalog"
    among = f"mutants, drawn from {' and '.join(QUICK_FILES)} (quick run)" if args.quick else "mutants"
    row = "check-rules, " + ("quick run" if args.quick else "whole catalog")
    print("## Rule checker and mutation testing (bench/checkrules.py)\n")
    print(f"`tidu check-rules` on {what}: {len(report.rows)} checks in {check_s:.1f} s "
          f"({passed} pass). Mutation sample ({sample} of the catalog's {total} {among}, seed 0): "
          f"{summary(out)}; kill rate {judge(rate, 100.0, '{:.1f} %', higher_is_better=True)}.\n")
    print(table(["what", "count", "time", "per item"],
                [[row, str(len(report.rows)), f"{check_s:.1f} s",
                  f"{1e3 * check_s / max(1, len(report.rows)):.0f} ms per check"],
                 ["mutants checked (sample)", str(len(out)), f"{mut_s:.1f} s",
                  f"{mut_s / max(1, len(out)):.2f} s per mutant"]]))


if __name__ == "__main__":
    main()
