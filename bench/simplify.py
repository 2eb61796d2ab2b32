"""How well and how fast the e-graph simplifies derivatives, against SymPy and JAX.

For every function of bench/simplify_suite.py (35 scalar functions of 1-10 variables) and
of bench/random_expressions.py (20 seeded random expressions of 3-6 variables):
the op counts of tidu's gradient and Hessian programs (``tidu.make_graph``; inputs and
constants not counted) under both rewrite semantics (``exact`` and ``real``), against

- ``sympy.cse(sympy.diff(...))`` and ``sympy.cse(sympy.simplify(sympy.diff(...)))``,
  counted with ``sympy.count_ops`` over the cse'd expressions and their replacements
  (``x - y`` one SUB, ``-x`` one NEG, ``a*b*c`` two MULs: ops of the shared DAG), and
- the equations of ``jax.make_jaxpr`` of ``jax.grad``/``jax.hessian`` (information),

and the build time of tidu (trace + AD + materialize_merge from a fresh function with
empty caches, ``real``) against SymPy's diff + cse. Every program's values are checked
against SymPy's at the function's point. Ratios are geometric means of
(tidu + 1) / (other + 1) over the functions.

    python bench/simplify.py [--set suite|random|both] [--quick] [--only NAME,...]
"""

from __future__ import annotations

import argparse
import itertools
import math
import multiprocessing
import resource
import sys
import time
from typing import Any

import numpy as np
import sympy
from common import clear_tidu_caches, judge, setup_jax, table
from random_expressions import FUNCTIONS as RANDOM_FUNCTIONS
from simplify_suite import FUNCTIONS

jax = setup_jax()
import jax.numpy as jnp  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402

TARGET_OPS = 1.0  # real-mode op counts at most SymPy simplify+cse's (geometric mean)
TARGET_TIME = 1.0  # build time at most SymPy diff+cse's (geometric mean)
SIMPLIFY_SECONDS = 10  # sympy.simplify's CPU time per expression; past it the entry stays unsimplified
SIMPLIFY_WORKERS = 2  # expressions simplified at once, each in a process of its own
SYMPY_SECONDS = 60  # CPU time of SymPy's side of one function (simplify's processes apart)
SIMPLIFY_WALL_SECONDS = 600  # a worker that has not finished by then is stopped too (a hang)


def _simplify_in_child(e: Any, conn: Any) -> None:
    # CPU time, not wall-clock time: what the load on a shared machine does not change
    resource.setrlimit(resource.RLIMIT_CPU, (SIMPLIFY_SECONDS, SIMPLIFY_SECONDS + 1))
    conn.send(sympy.simplify(e))
    conn.close()


def simplify_all(exprs: list[Any], stats: dict[str, int]) -> list[Any]:
    """``sympy.simplify`` of each expression, each in a forked process of its own that may
    use SIMPLIFY_SECONDS of CPU time (then the kernel stops it and the entry stays as it
    was: SymPy cannot be interrupted reliably), SIMPLIFY_WORKERS at a time."""
    ctx = multiprocessing.get_context("fork")
    out = list(exprs)
    todo = list(range(len(exprs)))
    running: list[tuple[int, Any, Any, float]] = []  # (entry, process, pipe end, start)
    while todo or running:
        while todo and len(running) < SIMPLIFY_WORKERS:
            i = todo.pop(0)
            receive, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_simplify_in_child, args=(exprs[i], send), daemon=True)
            proc.start()
            send.close()
            running.append((i, proc, receive, time.monotonic()))
        still = []
        for i, proc, receive, start in running:
            if receive.poll(0.02):
                try:
                    out[i] = receive.recv()
                except EOFError:  # stopped at its CPU limit
                    stats["timeouts"] = stats.get("timeouts", 0) + 1
                proc.join()
            elif not proc.is_alive() or time.monotonic() - start > SIMPLIFY_WALL_SECONDS:
                proc.kill()
                proc.join()
                stats["timeouts"] = stats.get("timeouts", 0) + 1
            else:
                still.append((i, proc, receive, start))
                continue
            receive.close()
        running = still
    return out


def sympy_ops(exprs: list[Any]) -> int:
    """Ops of the cse'd DAG of ``exprs``."""
    reps, reduced = sympy.cse(exprs)
    return sum(sympy.count_ops(e) for _, e in reps) + sum(sympy.count_ops(e) for e in reduced)


_fresh = itertools.count()


def sympy_derivatives(fn: Any, n: int, hessian: bool, simplify: dict[str, int] | None = None,
                      prefix: str = "v") -> tuple[list[Any], list[Any]]:
    """Symbols and the gradient (or Hessian entries, row-major) of ``fn``; simplified
    (each entry within SIMPLIFY_SECONDS) when ``simplify`` is a dict for statistics."""
    syms = sympy.symbols(f"{prefix}0:{n}")
    expr = fn(sympy, *syms)
    grads = [sympy.diff(expr, s) for s in syms]
    out = [sympy.diff(g, s) for g in grads for s in syms] if hessian else grads
    if simplify is not None:
        out = simplify_all(out, simplify)
    return list(syms), out


def sympy_build_time(fn: Any, n: int, hessian: bool) -> float:
    """diff + cse of a new expression in a warm process: fresh symbol names every time,
    so SymPy's cache cannot hand back the derivatives of an earlier round (with the same
    names, a repeat costs 1-3% of the first build), as tidu starts every round from a
    fresh function with empty caches."""
    t0 = time.perf_counter()
    _, exprs = sympy_derivatives(fn, n, hessian, prefix=f"r{next(_fresh)}_")
    sympy.cse(exprs)
    return time.perf_counter() - t0


def tidu_transform(fn: Any, n: int, hessian: bool) -> Any:
    def f(*v: Any) -> Any:
        return fn(tnp, *v)

    argnums = tuple(range(n))
    return tidu.hessian(f, argnums=argnums) if hessian else tidu.grad(f, argnums=argnums)


def tidu_build(fn: Any, n: int, point: tuple[float, ...], hessian: bool, semantics: str) -> tuple[Any, float]:
    clear_tidu_caches()
    t0 = time.perf_counter()
    view = tidu.make_graph(tidu_transform(fn, n, hessian), semantics=semantics)(*point)
    return view.graph, time.perf_counter() - t0


def jax_ops(fn: Any, n: int, point: tuple[float, ...], hessian: bool) -> int:
    def f(*v: Any) -> Any:
        return fn(jnp, *v)

    argnums = tuple(range(n))
    t = jax.hessian(f, argnums=argnums) if hessian else jax.grad(f, argnums=argnums)
    return len(jax.make_jaxpr(t)(*point).jaxpr.eqns)


def jax_values(fn: Any, n: int, point: tuple[float, ...], hessian: bool) -> list[float]:
    def f(*v: Any) -> Any:
        return fn(jnp, *v)

    argnums = tuple(range(n))
    t = jax.hessian(f, argnums=argnums) if hessian else jax.grad(f, argnums=argnums)
    return [float(v) for v in jax.tree_util.tree_leaves(t(*point))]


def check_values(graph: Any, want: list[float], point: tuple[float, ...], what: str, by: str) -> None:
    got = np.array([np.asarray(v).item() for v in tidu.compile(graph).eval(list(point))], dtype=float)
    if not np.allclose(got, want, rtol=1e-9, atol=1e-12):
        raise AssertionError(f"{what}: tidu {got} != {by} {np.array(want)}")


def _sympy_side(fn: Any, n: int, hessian: bool, point: tuple[float, ...]) -> dict[str, Any]:
    """SymPy's numbers for one function: the ops of its derivatives cse'd and simplified
    (with the simplify timeouts), their values at ``point``, and its diff + cse time."""
    syms, plain = sympy_derivatives(fn, n, hessian)
    timeouts: dict[str, int] = {}
    _, simple = sympy_derivatives(fn, n, hessian, timeouts)
    return {"sympy_cse": sympy_ops(plain), "sympy_simplify": sympy_ops(simple),
            "timeouts": timeouts.get("timeouts", 0),
            "values": [float(e.subs(dict(zip(syms, point, strict=True)))) for e in plain],
            "sympy_s": min(sympy_build_time(fn, n, hessian) for _ in range(3))}


def _sympy_side_in_child(fn: Any, n: int, hessian: bool, point: tuple[float, ...], conn: Any) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (SYMPY_SECONDS, SYMPY_SECONDS + 1))
    conn.send(_sympy_side(fn, n, hessian, point))
    conn.close()


def sympy_side(fn: Any, n: int, hessian: bool, point: tuple[float, ...]) -> dict[str, Any] | None:
    """``_sympy_side`` in a forked process that may use SYMPY_SECONDS of CPU time (its
    simplify processes apart), or None where SymPy does not get through: an expression
    whose shared subexpressions SymPy handles as a tree (its building, differentiating or
    cse can take exponential time; bench/random_expressions.py reuses subtrees)."""
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    # (not a daemon: it starts simplify's processes; stopped below whatever happens)
    proc = ctx.Process(target=_sympy_side_in_child, args=(fn, n, hessian, point, send))
    proc.start()
    send.close()
    try:
        while True:
            if receive.poll(0.05):
                try:
                    return receive.recv()
                except EOFError:  # stopped at its CPU limit
                    return None
            if not proc.is_alive():
                return None
    finally:
        proc.kill()
        proc.join()
        receive.close()


def geo(ratios: list[float]) -> float:
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios))


def measure(name: str, n: int, fn: Any, point: tuple[float, ...], hessian: bool) -> dict[str, Any]:
    side = sympy_side(fn, n, hessian, point)
    if side is None:
        name += f" (SymPy did not finish in {SYMPY_SECONDS} s)"
        want, by = jax_values(fn, n, point, hessian), "JAX"
    else:
        if side["timeouts"]:
            name += f" ({side['timeouts']} simplify timeouts)"
        want, by = side["values"], "SymPy"
    row: dict[str, Any] = {"name": name, "sympy": side, "jax": jax_ops(fn, n, point, hessian)}
    if side is not None:
        row.update(sympy_cse=side["sympy_cse"], sympy_simplify=side["sympy_simplify"], sympy_s=side["sympy_s"])
    for sem in ("exact", "real"):
        tidu_build(fn, n, point, hessian, sem)  # warm: rules compiled, e-graph set up
        graph, dt = min((tidu_build(fn, n, point, hessian, sem) for _ in range(3)), key=lambda r: r[1])
        check_values(graph, want, point, f"{name} {'Hessian' if hessian else 'gradient'} ({sem})", by)
        row[sem] = graph.op_count
        row[f"{sem}_s"] = dt
    return row


def report(kind: str, all_rows: list[dict[str, Any]]) -> tuple[float, float]:
    rows = [x for x in all_rows if x["sympy"] is not None]  # the ratios need SymPy's side

    def r(a: str, b: str) -> float:
        return geo([(x[a] + 1) / (x[b] + 1) for x in rows])

    body = [[x["name"], x["exact"], x["real"], x["sympy_cse"], x["sympy_simplify"], x["jax"],
             f"{(x['real'] + 1) / (x['sympy_simplify'] + 1):.2f}", f"{x['real_s'] * 1e3:.1f} ms",
             f"{x['sympy_s'] * 1e3:.1f} ms", f"{x['real_s'] / x['sympy_s']:.2f}"] if x["sympy"] is not None
            else [x["name"], x["exact"], x["real"], "-", "-", x["jax"], "-", f"{x['real_s'] * 1e3:.1f} ms",
                  f"> {SYMPY_SECONDS} s", "-"] for x in all_rows]
    ops_ratio, time_ratio = r("real", "sympy_simplify"), geo([x["real_s"] / x["sympy_s"] for x in rows])
    body.append(["geo-mean vs simplify+cse", f"{r('exact', 'sympy_simplify'):.2f}", f"{ops_ratio:.2f}",
                 f"{r('sympy_cse', 'sympy_simplify'):.2f}", "1.00", f"{r('jax', 'sympy_simplify'):.2f}", "", "",
                 "", f"{time_ratio:.2f}"])
    body.append(["geo-mean vs cse", f"{r('exact', 'sympy_cse'):.2f}", f"{r('real', 'sympy_cse'):.2f}", "1.00",
                 "", "", "", "", "", ""])
    print(f"### {kind}\n")
    print(table(["function", "tidu exact", "tidu real", "SymPy cse", "SymPy simplify+cse", "JAX jaxpr",
                 "real/simplify", "tidu build (real)", "SymPy diff+cse", "time ratio"], body))
    print(f"SymPy's simplify gets {SIMPLIFY_SECONDS} s of CPU time per expression (in a process of its own, "
          "so the load on the machine does not change which entries finish); an entry it does not finish "
          "stays as differentiated (marked in the table)."
          + (f" SymPy's side of a function (its expression, derivatives, cse and counts) gets {SYMPY_SECONDS} s of "
             f"CPU time: {len(all_rows) - len(rows)} of {len(all_rows)} did not finish (SymPy handles shared "
             "subexpressions as a tree), and the geometric means are over the others; tidu's values are checked "
             "against JAX's there." if len(rows) < len(all_rows) else ""))
    print(f"\nOps, real vs SymPy simplify+cse: {judge(ops_ratio, TARGET_OPS)}; build time vs SymPy "
          f"diff+cse: {judge(time_ratio, TARGET_TIME)}.\n")
    return ops_ratio, time_ratio


def fixed_cost() -> str:
    """The e-graph phase's fixed cost: make_graph with simplification minus without, on a
    small function (best of 30), for each semantics."""
    def f(x: Any) -> Any:
        return tnp.exp(-x * x / 2.0) * tnp.sin(x)

    h = tidu.hessian(f)

    def best(**kw: Any) -> float:
        out = float("inf")
        for _ in range(30):
            clear_tidu_caches()
            t0 = time.perf_counter()
            tidu.make_graph(h, **kw)(0.3)
            out = min(out, time.perf_counter() - t0)
        return out

    plain = best(simplify=False)
    rows = []
    for sem in ("exact", "real"):
        best(semantics=sem)  # warm
        t = best(semantics=sem)  # one measurement for both columns
        rows.append([sem, f"{plain * 1e3:.2f} ms", f"{t * 1e3:.2f} ms", f"{(t - plain) * 1e3:.2f} ms"])
    return ("### Fixed cost of the e-graph phase\n\nmake_graph of the Hessian of exp(-x²/2)·sin(x) "
            "(a 40-node graph), best of 30, with and without simplification; the difference is "
            "what the e-graph phase costs a small build.\n\n"
            + table(["semantics", "simplify=False", "simplify=True", "e-graph overhead"], rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the first 4 functions only")
    ap.add_argument("--only", default="", help="comma-separated function names")
    ap.add_argument("--set", choices=("suite", "random", "both"), default="both",
                    help="bench/simplify_suite.py's functions, the random expressions, or both (default)")
    args = ap.parse_args()
    sets = [("suite", FUNCTIONS, f"## Simplification: {len(FUNCTIONS)} functions, tidu against SymPy and JAX"),
            ("random", RANDOM_FUNCTIONS, f"## Simplification: {len(RANDOM_FUNCTIONS)} random expressions of 3-6 "
             "variables (bench/random_expressions.py, seeded), tidu against SymPy and JAX")]
    for which, funcs, title in sets:
        if args.set not in (which, "both"):
            continue
        funcs = funcs[:4] if args.quick else funcs
        if args.only:
            wanted = set(args.only.split(","))
            funcs = [f for f in funcs if f[0] in wanted]
        print(f"{title}\n", flush=True)
        for kind, hessian in (("Gradients", False), ("Hessians", True)):
            rows = []
            for name, n, fn, point in funcs:  # (progress on stderr: the random set runs for long)
                rows.append(measure(name, n, fn, point, hessian))
                print(f"{kind}: {rows[-1]}", file=sys.stderr, flush=True)
            report(kind, rows)
    print(fixed_cost())


if __name__ == "__main__":
    main()
