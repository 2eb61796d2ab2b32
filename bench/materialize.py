"""Benchmark materialize_merge (collect, e-graph ingest, rewrite, extraction) and compile.

Two graph shapes at 10^3, 10^4 and 10^5 nodes:

- ``chain``: a deep chain with heavy sharing, x_{i+1} = f(x_i, x_{i-1}), mixing mul,
  add, sub and neg with x*1, x+0 and neg(neg x) redexes (about half the ops go away);
- ``wide``: many independent small terms with distinct constants (and the same redexes),
  summed by a balanced add tree: shallow, little sharing.

Each (shape, size, simplify) runs in a fresh subprocess so that its peak RSS
(``ru_maxrss``) is its own; a tiny warm-up graph first loads the catalog and egglog.
Times are wall clock, the fastest of ``--repeat`` runs; ``cpu`` is the process CPU time
of that materialize_merge run (the machine may be shared). The growth exponent is the
log-log slope of the materialize time from the smallest to the largest size.

    python bench/materialize.py            # 10^3, 10^4, 10^5
    python bench/materialize.py --quick    # 10^3, 10^4 only, one run each
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time

import numpy as np

SHAPES = ("chain", "wide")


def build(shape: str, n: int):
    """(fragment, output keys) with about ``n`` nodes."""
    from tidu import Aval, FragmentBuilder

    b = FragmentBuilder(f"{shape}{n}")

    def op(name, *args):
        return b.add_op(name, list(args))[0]

    if shape == "chain":
        x = b.input("x", Aval((), "float64"))
        one, zero, two = b.constant(1.0), b.constant(0.0), b.constant(2.0)
        prev, cur, i = x, op("mul", x, two), 0
        while i < n:
            k = i % 4
            if k == 0:
                t, i = op("mul", op("mul", cur, prev), one), i + 2
            elif k == 1:
                t, i = op("add", op("add", cur, prev), zero), i + 2
            elif k == 2:
                t, i = op("add", op("neg", op("neg", cur)), prev), i + 3
            else:
                t, i = op("sub", cur, prev), i + 1
            prev, cur = cur, t
        outs = [cur]
    else:
        xs = [b.input(f"x{j}", Aval((4,), "float64")) for j in range(16)]
        one = b.constant(np.ones(4))
        terms, i = [], 0
        while i < n:
            c = b.constant(np.full(4, 2.0 + i))
            a = op("mul", op("add", xs[i % 16], c), one)
            terms.append(op("sub", a, op("neg", op("neg", xs[(7 * i + 3) % 16]))))
            i += 5
        while len(terms) > 1:  # balanced sum: depth log2(n)
            terms = [op("add", terms[j], terms[j + 1]) if j + 1 < len(terms) else terms[j]
                     for j in range(0, len(terms), 2)]
        outs = terms
    return b.build(), [b.output(o) for o in outs]


def measure(shape: str, n: int, simplify: bool, repeat: int) -> dict:
    """One measurement, run inside a fresh subprocess: the fastest of ``repeat`` runs
    (the machine may be shared); peak RSS covers them all."""
    import tidu
    from tidu import materialize_merge, resolve

    warm, wk = build(shape, 20)
    tidu.compile(materialize_merge(resolve(warm), wk, simplify=simplify))
    frag, keys = build(shape, n)
    view = resolve(frag)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    runs = []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        g = materialize_merge(view, keys, simplify=simplify)
        t1, c1 = time.perf_counter(), time.process_time()
        tidu.compile(g, cache=False)
        t2 = time.perf_counter()
        runs.append((t1 - t0, c1 - c0, t2 - t1, g.stats))
        del g
    t, c, comp, st = min(runs, key=lambda r: r[0])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "shape": shape, "n": st["nodes_before"], "simplify": simplify,
        "collect": st["collect_s"], "ingest": st.get("ingest_s", 0.0),
        "rewrite": st.get("rewrite_s", 0.0), "extract": st.get("extract_s", 0.0),
        "total": t, "cpu": c, "compile": comp, "rss_base": base, "rss_peak": peak,
        "after": st["nodes_after"], "iters": st.get("iterations", 0),
        "stop": st.get("stop_reason", "-"),
    }


def run_child(shape: str, n: int, simplify: bool, repeat: int) -> dict:
    cmd = [sys.executable, __file__, "--child", shape, str(n), str(int(simplify)), str(repeat)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{shape} n={n} simplify={simplify} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(rows: list[dict]) -> str:
    head = (f"{'shape':6} {'nodes':>7} {'simp':>4} {'collect':>8} {'ingest':>7} {'rewrite':>8} "
            f"{'extract':>8} {'total':>7} {'cpu':>6} {'compile':>8} {'rss_MB':>7} {'after':>7} "
            f"{'it':>3} stop")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['shape']:6} {r['n']:7d} {'yes' if r['simplify'] else 'no':>4} "
            f"{r['collect']:8.3f} {r['ingest']:7.3f} {r['rewrite']:8.3f} {r['extract']:8.3f} "
            f"{r['total']:7.3f} {r['cpu']:6.3f} {r['compile']:8.3f} {r['rss_peak']:7.0f} "
            f"{r['after']:7d} {r['iters']:3d} {r['stop']}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="sizes 10^3 and 10^4 only")
    ap.add_argument("--repeat", type=int, default=3, help="runs per point; the fastest is kept")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        shape, n, simp, repeat = args.child
        print(json.dumps(measure(shape, int(n), bool(int(simp)), int(repeat))))
        return
    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
    if args.quick:
        args.repeat = 1
    rows = []
    for shape in SHAPES:
        for n in sizes:
            for simplify in (True, False):
                rows.append(run_child(shape, n, simplify, args.repeat))
                print(table(rows[-1:]).splitlines()[-1], flush=True)
    print()
    print("materialize_merge (total = collect + e-graph phase), compile; times in s; "
          "rss_MB = peak RSS of the process")
    print(table(rows))
    print()
    for shape in SHAPES:
        for simplify in (True, False):
            pts = [r for r in rows if r["shape"] == shape and r["simplify"] == simplify]
            lo, hi = pts[0], pts[-1]
            slope = math.log(hi["total"] / lo["total"]) / math.log(hi["n"] / lo["n"])
            print(f"growth exponent {shape:5} simplify={'yes' if simplify else 'no ':3}: "
                  f"{slope:.2f}  (total time, {lo['n']} -> {hi['n']} nodes)")


if __name__ == "__main__":
    main()
