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

A third section builds chains of ops the family's mixes leave out (abs, maximum, where,
arctan, erf, log1p, expm1, sigmoid, softplus, powers, arcsinh, cosh, rationals) against
CasADi the same way, for information (no target of its own).

    python bench/transforms.py [--quick] [--steps N ...] [--only TEXT] [--seeds S ...]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

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


# Chains of ops bench/program_family.py's mixes leave out (one step of each, applied
# ``CHAIN_STEPS`` times to y with x a second input), built in both libraries from the same
# lambda: the derivative rules and composite functions of these ops cost what they cost
# on every user program that has them.
OTHER_CHAINS = {
    "abs, maximum": lambda m, y, x: m.abs(y) * 0.5 + m.maximum(y, x) * 0.3 - y * x,
    "where": lambda m, y, x: m.where(y > x, m.sin(y), m.cos(y) * x),
    "arctan, erf": lambda m, y, x: m.arctan(y * x) + m.erf(y) * 0.5,
    "log1p, expm1": lambda m, y, x: m.log1p(y * y) - m.expm1(-y * x) * 0.5,
    "sigmoid": lambda m, y, x: 1 / (1 + m.exp(-y)) * x - 0.25 * y,
    "softplus": lambda m, y, x: m.logaddexp(0 * y, y - x) * 0.5,
    "gaussian": lambda m, y, x: m.exp(-y * y) * x + y * 0.5,
    "power 0.75": lambda m, y, x: m.power(1 + y * y, 0.75) * 0.5 - x * y,
    "arcsinh, cosh": lambda m, y, x: m.arcsinh(y) * x - 0.1 * m.cosh(y * 0.5),
    "minimum, tanh": lambda m, y, x: m.minimum(m.tanh(y), x) + 0.5 * y,
    "polynomial": lambda m, y, x: y * y * y * 0.1 - 2 * y * x + x * x - 0.3,
    "rational": lambda m, y, x: (y - x) / (1 + y * y) + x * y / (2 + x * x),
}
CHAIN_STEPS = 300


class _CasadiOps:
    """The NumPy names the chains use, in CasADi SX (logaddexp written out, overflow-safe)."""

    def __getattr__(self, name: str) -> Any:
        return {"arctan": ca.atan, "abs": ca.fabs, "maximum": ca.fmax, "minimum": ca.fmin, "arcsinh": ca.asinh,
                "where": ca.if_else, "power": lambda a, b: a ** b}.get(name) or getattr(ca, name)

    @staticmethod
    def logaddexp(a: Any, b: Any) -> Any:
        m = ca.fmax(a, b)
        return m + ca.log(ca.exp(a - m) + ca.exp(b - m))


class _TiduOps:
    def __getattr__(self, name: str) -> Any:
        return tidu.scipy.special.erf if name == "erf" else getattr(tnp, name)


def _chain(lib: Any, step: Callable[..., Any], steps: int) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        y = x[0]
        for _ in range(steps):
            y = step(lib, y, x[1])
        return y
    return f


CHAIN_TRANSFORMS = {"grad": tidu.grad, "grad(grad)": lambda f: tidu.grad(lambda v: tnp.sum(tidu.grad(f)(v))),
                    "hessian": tidu.hessian}
OTHER_X = np.array([0.3, 0.7])


def chain_tidu(step: Callable[..., Any], tname: str, steps: int) -> tuple[float, np.ndarray, int]:
    """tidu's build + first call (empty caches): seconds, value, ops."""
    clear_tidu_caches()
    f = CHAIN_TRANSFORMS[tname](_chain(_TiduOps(), step, steps))
    t0 = time.perf_counter()
    graph = tidu.make_graph(f)(OTHER_X).graph
    value = tidu.compile(graph).run([OTHER_X])[0]
    return time.perf_counter() - t0, np.asarray(value), graph.op_count


def chain_casadi(step: Callable[..., Any], tname: str, steps: int) -> tuple[float, np.ndarray, int]:
    """CasADi's SX expression, derivative, Function and first call: seconds, value, instructions."""
    t0 = time.perf_counter()
    xs = ca.SX.sym("x", 2)
    y = _chain(_CasadiOps(), step, steps)(xs)
    out = ca.hessian(y, xs)[0] if tname == "hessian" else ca.gradient(y, xs)
    if tname == "grad(grad)":
        out = ca.gradient(ca.sum1(out), xs)
    fn = ca.Function("f", [xs], [out])
    value = fn(OTHER_X)
    return time.perf_counter() - t0, np.asarray(value), fn.n_instructions()


def other_chains_section(quick: bool) -> None:
    steps, rounds = (30, 1) if quick else (CHAIN_STEPS, 3)
    rows, worst = [], {}
    for name, step in OTHER_CHAINS.items():
        for tname in CHAIN_TRANSFORMS:
            chain_tidu(step, tname, steps), chain_casadi(step, tname, steps)  # warm
            t, value, ops = min((chain_tidu(step, tname, steps) for _ in range(rounds)), key=lambda r: r[0])
            c, want, instructions = min((chain_casadi(step, tname, steps) for _ in range(rounds)), key=lambda r: r[0])
            diff = float(np.max(np.abs(value.reshape(want.shape) - want)) / max(float(np.max(np.abs(want))), 1e-300))
            ratio = t / c
            if ratio > worst.get(tname, (0.0, ""))[0]:
                worst[tname] = (ratio, name)
            rows.append([name, tname, ops, instructions, fmt_time(t), fmt_time(c), f"{ratio:.2f}x", f"{diff:.0e}"])
    print(f"\n## Build + first call on chains of other ops ({len(OTHER_CHAINS)} chains, {steps} steps)\n")
    print("Ops the family's mixes leave out (abs, maximum and minimum with their ties, where, arctan, erf, "
          "log1p, expm1, sigmoid written out, softplus as logaddexp, powers, arcsinh, cosh, rationals), one step "
          "applied to y with x a second input, from the Python function to the first result against CasADi SX, "
          f"best of {rounds}. No target of its own (issue 32's are the family's); worst per transform: "
          + "; ".join(f"{tname} {r:.2f}x on {name}" for tname, (r, name) in worst.items()) + ".\n")
    print(table(["chain", "transform", "ops", "CasADi instr.", "tidu", "CasADi", "tidu/CasADi", "max rel diff"], rows))


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
        if not args.only:
            other_chains_section(args.quick)


if __name__ == "__main__":
    main()
