"""Transform time: from a Python function to a program, tidu against JAX's trace + lower
and CasADi's SX build.

For the scalar chain of bench/common.py (1000 ops): grad, grad(grad) and the full
Hessian. tidu's time is trace + linearize + transpose + materialize_merge + compile to a
``Program`` (``tidu.compile(tidu.make_graph(T(f))(x).graph)``); JAX's is trace + lower
to StableHLO (``jax.jit(T(f)).lower(x)``), no XLA compile on either side. CasADi's (a
bench-only extra, ``pip install casadi``) is the chain on an ``SX`` symbol, ``ca.gradient``
(twice for grad(grad); ``ca.hessian`` for the Hessian) and a ``ca.Function`` of it, the
program it evaluates: the same work as tidu's, in C++. Every round
uses a fresh function object and, for tidu, empty trace and compile caches. The process
is warm for both (one untimed round first; JAX's per-primitive caches stay warm as tidu's
compiled rules do). Times are the best of N rounds.

    python bench/transforms.py [--quick]
"""

from __future__ import annotations

import argparse
import time

from common import (
    CHAIN_OPS,
    CHAIN_OPS_QUICK,
    CHAIN_X,
    chain,
    clear_tidu_caches,
    fmt_time,
    judge,
    make_chain,
    setup_jax,
    table,
    verdict,
)

jax = setup_jax()
import jax.numpy as jnp  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402

TARGET = 1.0  # tidu's time at most 1.0x JAX's
CASADI_TARGET = {"grad": 2.0, "grad(grad)": 3.0}  # tidu's time at most this times CasADi's

try:
    import casadi as ca
except ImportError:  # a bench-only extra: the table says so
    ca = None

TRANSFORMS = {
    "grad": (tidu.grad, jax.grad),
    "grad(grad)": (lambda f: tidu.grad(tidu.grad(f)), lambda f: jax.grad(jax.grad(f))),
    "hessian": (tidu.hessian, jax.hessian),
}


def tidu_once(transform, ops: int) -> dict:
    """One fresh tidu transform; the phases in seconds."""
    clear_tidu_caches()
    f = transform(make_chain(tnp, ops))
    t0 = time.perf_counter()
    graph = tidu.make_graph(f)(CHAIN_X).graph
    t1 = time.perf_counter()
    program = tidu.compile(graph)
    t2 = time.perf_counter()
    mat = graph.stats["total_s"]
    return {"total": t2 - t0, "trace_ad": t1 - t0 - mat, "materialize": mat, "compile": t2 - t1,
            "ops": len(program.instructions)}


def jax_once(transform, ops: int) -> float:
    f = jax.jit(transform(make_chain(jnp, ops)))
    t0 = time.perf_counter()
    f.lower(CHAIN_X)
    return time.perf_counter() - t0


def casadi_once(name: str, ops: int) -> float | None:
    if ca is None:
        return None
    t0 = time.perf_counter()
    x = ca.SX.sym("x")
    y = chain(x, ca, ops)
    if name == "hessian":
        out = ca.hessian(y, x)[0]
    else:
        out = ca.gradient(y, x)
        if name == "grad(grad)":
            out = ca.gradient(out, x)
    ca.Function("f", [x], [out])
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="100-op chain, 1 round")
    args = ap.parse_args()
    ops, rounds = (CHAIN_OPS_QUICK, 1) if args.quick else (CHAIN_OPS, 5)
    rows, ratios, ca_verdicts = [], [], []
    for name, (t_tidu, t_jax) in TRANSFORMS.items():
        tidu_once(t_tidu, ops), jax_once(t_jax, ops), casadi_once(name, ops)  # warm-up
        runs = [tidu_once(t_tidu, ops) for _ in range(rounds)]
        best = min(runs, key=lambda r: r["total"])
        j = min(jax_once(t_jax, ops) for _ in range(rounds))
        c = casadi_once(name, ops)
        c = None if c is None else min([c] + [casadi_once(name, ops) for _ in range(rounds - 1)])
        ratio = best["total"] / j
        ratios.append(ratio)
        c_ratio = None if c is None else best["total"] / c
        if c_ratio is not None and name in CASADI_TARGET:
            ca_verdicts.append(f"{name} {judge(c_ratio, CASADI_TARGET[name])}")
        rows.append([name, best["ops"], fmt_time(best["total"]), fmt_time(best["trace_ad"]),
                     fmt_time(best["materialize"]), fmt_time(best["compile"]), fmt_time(j),
                     f"{ratio:.2f}x", verdict(ratio <= TARGET), fmt_time(c),
                     "-" if c_ratio is None else f"{c_ratio:.2f}x"])
    print(f"## Transform time, {ops}-op scalar chain\n")
    print("From the Python function to a program: tidu trace + linearize + transpose + "
          "materialize_merge + compile (empty caches, fresh function) against JAX's trace + "
          "lower to StableHLO (`jax.jit(T(f)).lower(x)`, fresh function), neither compiled by "
          f"XLA; best of {rounds} in a warm process. Target tidu at most {TARGET}x JAX's time: "
          f"worst case {judge(max(ratios), TARGET)}.\n")
    print(table(["transform", "instr", "tidu total", "trace+AD", "materialize", "compile",
                 "JAX trace+lower", "tidu/JAX", f"target <= {TARGET}x", "CasADi SX build",
                 "tidu/CasADi"], rows))
    if ca is None:
        print("\nCasADi is not installed (`pip install casadi`): no comparison with it.")
    else:
        print("\nAgainst CasADi (targets: grad <= 2x, grad(grad) <= 3x): " + "; ".join(ca_verdicts) + ".")


if __name__ == "__main__":
    main()
