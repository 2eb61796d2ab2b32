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

A second section measures a family of generated programs (bench/program_family.py:
scalar and vector programs over seven op mixes, long chains and wide DAGs with shared
subexpressions, negations, divisions, powers, logs, trig and tanh) against CasADi SX:
grad, grad(grad) (of the sum of the gradient) and the Hessian, from the Python function
to the first result on both sides (tidu: trace, AD, materialize_merge, compile and the
first call; CasADi: the SX expression, its derivative, a ``Function`` and its first
call), with tidu's phases and the worst ratio per transform and the program that gave it.
Values are checked against CasADi's. ``--seeds`` draws other programs of the same mixes
(a speed-up that holds on seed 0's programs alone is not one).

    python bench/transforms.py [--quick] [--steps N ...] [--only TEXT] [--seeds S ...]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
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
from program_family import Library, Program, family  # noqa: E402

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


FAMILY_TARGET = {"grad": 2.0, "grad(grad)": 3.0, "hessian": 3.0}  # tidu / CasADi, build + first call
FAMILY_STEPS = (330,)  # template steps per program: 1100 to 2500 traced ops


def family_tidu(program: Program, name: str) -> dict:
    """One fresh tidu build and first call; the phases in seconds."""
    f = program.function(Library.of(tnp))
    transform = {"grad": tidu.grad, "grad(grad)": lambda f: tidu.grad(lambda x: tnp.sum(tidu.grad(f)(x))),
                 "hessian": tidu.hessian}[name]
    x = program.point()
    clear_tidu_caches()
    t0 = time.perf_counter()
    graph = tidu.make_graph(transform(f))(x).graph
    t1 = time.perf_counter()
    compiled = tidu.compile(graph)
    t2 = time.perf_counter()
    out = compiled.run([x])[0]
    t3 = time.perf_counter()
    mat = graph.stats["total_s"]
    return {"total": t3 - t0, "trace_ad": t1 - t0 - mat, "materialize": mat, "egglog": graph.stats["iterations"] > 0,
            "compile": t2 - t1, "first_call": t3 - t2, "ops": graph.op_count, "out": np.asarray(out)}


def family_casadi(program: Program, name: str) -> tuple[float, np.ndarray, int]:
    """CasADi's build and first call in seconds, its value, and the instructions of its
    ``Function`` (SX simplifies as it builds, in the real numbers: ``x - x`` is 0)."""
    t0 = time.perf_counter()
    x = ca.SX.sym("x", program.n_inputs)
    y = program.function(Library(ca.sin, ca.cos, ca.exp, ca.log, ca.tanh, ca.sqrt, ca.sum1))(x)
    if name == "hessian":
        out = ca.hessian(y, x)[0]
    else:
        out = ca.gradient(y, x)
        if name == "grad(grad)":
            out = ca.gradient(ca.sum1(out), x)
    fn = ca.Function("f", [x], [out])
    value = fn(program.point())
    return time.perf_counter() - t0, np.asarray(value), fn.n_instructions()


def family_section(quick: bool, steps: tuple[int, ...], only: str = "", seeds: tuple[int, ...] = (0,)) -> None:
    programs = [p for n in steps for seed in seeds for p in family(n, seed) if only in p.name]
    if quick:
        programs = programs[::7]
    rounds = 1 if quick else 3
    rows, worst, worst_kept = [], {}, {}
    collapsed: set[str] = set()
    for program in programs:
        for name in FAMILY_TARGET:
            family_tidu(program, name)  # warm: the rules this mix needs are compiled once per process
            family_casadi(program, name)
            runs, casadi_runs = [], []
            for _ in range(rounds):  # interleaved: a slow spell of the machine hits both sides
                runs.append(family_tidu(program, name))
                casadi_runs.append(family_casadi(program, name))
            best = min(runs, key=lambda r: r["total"])
            c, want, instructions = min(casadi_runs, key=lambda r: r[0])
            got = best["out"].reshape(want.shape)
            diff = float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-300))
            ratio = best["total"] / c
            label = f"{program.name}, {program.steps} steps" + (f", seed {program.seed}" if program.seed else "")
            if ratio > worst.get(name, (0.0, ""))[0]:
                worst[name] = (ratio, label)
            if 10 * instructions < best["ops"]:  # CasADi's simplifications left a tenth of the work
                collapsed.add(program.name)
            elif ratio > worst_kept.get(name, (0.0, ""))[0]:
                worst_kept[name] = (ratio, label)
            rows.append([label, name, best["ops"], instructions, fmt_time(best["total"]), fmt_time(best["trace_ad"]),
                         fmt_time(best["materialize"]) + (" (egglog)" if best["egglog"] else ""),
                         fmt_time(best["compile"]), fmt_time(best["first_call"]), fmt_time(c), f"{ratio:.2f}x",
                         verdict(ratio <= FAMILY_TARGET[name]), f"{diff:.0e}"])
    print(f"\n## Build + first call on a family of generated programs ({len(programs)} programs)\n")
    print("From the Python function to the first result, best of "
          f"{rounds} interleaved rounds (tidu: empty caches, after one warm-up build of the same program; "
          "CasADi after one warm-up build too) against CasADi SX "
          "(expression, derivative, `Function`, first call). Worst case per transform: "
          + "; ".join(f"{name} {judge(r, FAMILY_TARGET[name])} on {label}" for name, (r, label) in worst.items())
          + ". \"CasADi instr.\": the instructions of CasADi's `Function`, against tidu's ops. SX simplifies "
          "as it builds, in the real numbers (`x - x` is 0, `0 * x` is 0): where a program holds such a term "
          "its value collapses, and CasADi differentiates what is left. tidu's default rewrites are exact in "
          "IEEE arithmetic, where `x - x` is NaN at an infinite x, so its graph keeps the whole program (the "
          "values agree at the point, last column). "
          + (f"Programs CasADi collapses to under a tenth of tidu's ops: {len(collapsed)} "
             f"({', '.join(sorted(collapsed))})" if collapsed else "")
          + ("; worst case over the others, for information: "
             + "; ".join(f"{name} {r:.2f}x on {label}" for name, (r, label) in worst_kept.items()) + "."
             if collapsed and worst_kept else "." if collapsed else "")
          + "\n")
    print(table(["program", "transform", "ops", "CasADi instr.", "tidu total", "trace+AD", "materialize", "compile",
                 "first call", "CasADi", "tidu/CasADi", "target", "max rel diff"], rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="100-op chain, 1 round; 4 small family programs")
    ap.add_argument("--steps", type=int, nargs="+", default=None,
                    help=f"template steps of the family's programs (default {FAMILY_STEPS}; ~3300 for 10^4 ops)")
    ap.add_argument("--only", default="", help="only the family's programs whose name has this text "
                    "(e.g. 'tanh long')")
    ap.add_argument("--seeds", type=int, nargs="+", default=(0,),
                    help="the family's seeds (default 0): other seeds draw other programs of the same mixes")
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
        family_section(args.quick, tuple(args.steps or ((30,) if args.quick else FAMILY_STEPS)), args.only,
                       tuple(args.seeds))


if __name__ == "__main__":
    main()
