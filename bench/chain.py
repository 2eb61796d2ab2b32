"""The gradient of a long scalar chain built by a Python loop: time and peak memory.

For the chain of bench/common.py (sin, mul by x, scale, exp, tanh, cos, add x) at
10^4 and 10^5 ops, each contender in a fresh process (so peak RSS is its own):

- tidu ``grad(f)(x)``: trace, linearize, transpose, materialize_merge, compile, NumPy
  source, one evaluation;
- tidu ``make_graph(grad(f))`` + ``to_stablehlo()``: the graph and its StableHLO text;
- JAX ``jax.jit(jax.grad(f)).lower(x)`` + ``as_text()``: JAX's trace and lowering to
  StableHLO (JAX's XLA compilation of such a program is not timed: it takes minutes).

Peak RSS is the process's maximum resident set minus its size after imports. Targets
(issue 14): tidu's gradient of the 10^5-op chain within 2x JAX's time and at most 1 GB.

    python bench/chain.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from common import judge, table

HERE = Path(__file__).resolve().parent
MEMORY_BOUND_MB = 1024
TIME_BOUND = 2.0  # tidu's time at most this times JAX's

_CODE = textwrap.dedent("""
    import json, resource, sys, time
    sys.path.insert(0, {here!r})
    from common import make_chain, CHAIN_X
    import numpy as np
    kind, n = {kind!r}, {n}
    def rss():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if kind.startswith("tidu"):
        import tidu, tidu.numpy as tnp
        base = rss()
        t = time.perf_counter()
        if kind == "tidu grad":
            value = float(tidu.grad(make_chain(tnp, n))(np.float64(CHAIN_X)))
        else:
            text = tidu.make_graph(tidu.grad(make_chain(tnp, n)))(np.float64(CHAIN_X)).to_stablehlo()
            value = None
    else:
        import jax
        jax.config.update("jax_enable_x64", True)
        base = rss()
        t = time.perf_counter()
        text = jax.jit(jax.grad(make_chain(jax.numpy, n))).lower(CHAIN_X).as_text()
        value = None
    print(json.dumps({{"seconds": time.perf_counter() - t, "mb": rss() - base, "value": value}}))
""")

KINDS = ["tidu grad", "tidu graph+StableHLO", "JAX trace+lower"]


def measure(kind: str, n: int) -> dict:
    code = _CODE.format(here=str(HERE), kind=kind, n=n)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{kind} at n={n} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10^2 and 10^3 ops (smoke test)")
    args = ap.parse_args()
    sizes = [100, 1000] if args.quick else [10_000, 100_000]
    rows, worst_mb, worst_ratio = [], 0.0, 0.0
    for n in sizes:
        r = {k: measure(k, n) for k in KINDS}
        jax_s = r["JAX trace+lower"]["seconds"]
        worst_mb = max(worst_mb, r["tidu grad"]["mb"], r["tidu graph+StableHLO"]["mb"])
        worst_ratio = max(worst_ratio, r["tidu grad"]["seconds"] / jax_s, r["tidu graph+StableHLO"]["seconds"] / jax_s)
        rows.append([f"{n:,}"] + [f"{r[k]['seconds']:.1f} s / {r[k]['mb']:.0f} MB" for k in KINDS]
                    + [f"{r['tidu graph+StableHLO']['seconds'] / jax_s:.2f}x",
                       f"{r['tidu grad']['seconds'] / jax_s:.2f}x"])
    print("## Gradient of a long chain (bench/chain.py)\n")
    print("Time and peak memory above the process's size after imports, each in a fresh process: "
          "tidu `grad(f)(x)` end to end, tidu `make_graph(grad(f))` + `to_stablehlo()`, and JAX "
          "`jax.jit(jax.grad(f)).lower(x).as_text()`. Targets: tidu's peak memory at most "
          f"{MEMORY_BOUND_MB} MB: {judge(worst_mb, MEMORY_BOUND_MB, '{:.0f} MB')}; tidu's time at most "
          f"{TIME_BOUND:g}x JAX's: {judge(worst_ratio, TIME_BOUND, '{:.2f}x')}.\n")
    print(table(["ops", *KINDS, "tidu graph/JAX", "tidu grad/JAX"], rows))


if __name__ == "__main__":
    main()
