"""Memory after warm-up: does RSS stay flat over many distinct transformed calls?

Two workloads, each in a fresh process, for tidu and for JAX:

- distinct functions: ``grad(lambda x: sum(sin(x) * x))(ones(3))`` with a new lambda
  every call (tidu's trace cache keeps 256 functions, its compile cache 512 programs);
- distinct shapes: ``grad(f)(ones(k))`` for k = 1, 2, 3, ... (a new trace and program
  every call).

The first fifth of the calls is warm-up (caches fill); the table shows RSS growth over
the remaining calls, with the curve at tenths. Target (issue: no leaks): growth under
5 MB over 10^4 distinct functions and over 10^4 distinct shapes. JAX runs fewer calls
(its jit of a new function costs ~10x more); its growth is scaled to tidu's count for
the ratio.

    python bench/memory.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap

from common import judge, table

TARGET_MB = 5.0

_CODE = textwrap.dedent("""
    import gc, json, sys
    import numpy as np
    system, workload, n = {system!r}, {workload!r}, {n}
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096 / 2**20
    if system == "tidu":
        import tidu, tidu.numpy as xp
        grad = tidu.grad
    else:
        import jax, jax.numpy as xp
        jax.config.update("jax_enable_x64", True)
        grad = lambda f: jax.jit(jax.grad(f))
    f = lambda x: xp.sum(xp.sin(x) * x)
    def call(i):
        if workload == "functions":
            return grad(lambda x: xp.sum(xp.sin(x) * x))(np.ones(3))
        return grad(f)(np.ones(1 + i))
    warm = n // 5
    for i in range(warm):
        call(i)
    gc.collect()
    start = rss()
    curve = []
    for i in range(warm, n):
        call(i)
        if (i - warm + 1) % max(1, (n - warm) // 10) == 0:
            gc.collect()
            curve.append(rss() - start)
    print(json.dumps({{"start": start, "growth": curve[-1], "curve": curve}}))
""")


def measure(system: str, workload: str, n: int) -> dict:
    done = subprocess.run([sys.executable, "-c", _CODE.format(system=system, workload=workload, n=n)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{system} {workload} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="250 tidu calls, 100 JAX calls (smoke test)")
    args = ap.parse_args()
    n_tidu, n_jax = (250, 100) if args.quick else (10_000, 1500)
    rows, worst = [], 0.0
    for workload in ("functions", "shapes"):
        t = measure("tidu", workload, n_tidu)
        j = measure("jax", workload, n_jax)
        calls_t, calls_j = n_tidu - n_tidu // 5, n_jax - n_jax // 5
        jax_scaled = j["growth"] * calls_t / calls_j
        worst = max(worst, t["growth"])
        rows.append([f"distinct {workload}", f"{calls_t:,}", f"{t['start']:.0f} MB", f"{t['growth']:+.2f} MB",
                     " ".join(f"{c:+.1f}" for c in t["curve"]), f"{calls_j:,}", f"{j['growth']:+.2f} MB",
                     f"{jax_scaled:+.1f} MB"])
    print("## Memory after warm-up (bench/memory.py)\n")
    print(f"RSS growth after warm-up over distinct transformed calls, each workload in a fresh process. "
          f"Target growth under {TARGET_MB:.0f} MB over 10^4 calls: "
          f"{judge(worst, TARGET_MB, '{:.2f} MB')}"
          + (f" (quick run: {n_tidu - n_tidu // 5} calls)" if args.quick else "") + ".\n")
    print(table(["workload", "tidu calls", "tidu RSS after warm-up", "tidu growth", "tidu curve (MB, tenths)",
                 "JAX calls", "JAX growth", f"JAX growth per {n_tidu - n_tidu // 5:,} calls"], rows))


if __name__ == "__main__":
    main()
