"""tidu on whatever device JAX finds (a GPU when there is one), side by side with JAX.

For each case, tidu's program runs through XLA two ways and is compared with the same
transform written in JAX, ``jax.jit(jax.<transform>(f))``, in the same process:

- ``to_jax``: ``jax.jit(tidu.to_jax(tidu.<transform>(f)))`` called on arrays already on
  the device; JAX called the same way. Build = the first call (tidu: trace, transform,
  e-graph, StableHLO; both: XLA compile and one run), per call = best wall time of a
  call with ``block_until_ready``.
- ``Program.run``: ``tidu.compile(make_graph(...)).run(arrays, backend="xla",
  device=device)`` from NumPy arrays to NumPy arrays; JAX called as
  ``np.asarray(jf(host arrays))``, the same round trip.

Cases: vmap(grad) of a 3-variable function over many points, vmap(hessian) of it, the
gradient of a 74k-parameter tanh MLP's loss over a large batch, the dense Hessian of a
193-parameter MLP loss, the dense Rosenbrock Hessian (n = 4000), and
grad(logdet(cholesky(A))) of an SPD matrix. Every result is checked against JAX's.

On an accelerator each build is timed in a fresh child process of its own (both
libraries' one-time costs warmed there on a tiny case first): XLA's GPU compiler tunes
every new matrix product once per process and keeps the result, so in one process
whichever library compiles a case first pays the tuning that the other then reuses.
On the CPU (no tuning) builds are timed in this process; ``--isolate`` forces children.

Targets (issue 29): per call <= 1.1x JAX on every case; build <= 2x JAX's.

    python bench/gpu.py [--quick]       (--quick: small sizes, the CPU smoke run)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax  # noqa: I001 (on every platform JAX finds: no JAX_PLATFORMS default here)
import numpy as np
from common import best_interleaved, clear_tidu_caches, fmt_time, judge, table

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402

PER_CALL_TARGET = 1.1
BUILD_TARGET = 2.0


# --- the functions, written once for both libraries (xp: tidu.numpy or jax.numpy) --------


def point_energy(xp: Any) -> Callable[[Any], Any]:
    def f(p: Any) -> Any:
        return xp.sin(p[0] * p[1]) + xp.exp(-p[2] ** 2) * p[0] + p[1] * p[2] ** 3

    return f


def mlp_loss(xp: Any, widths: tuple[int, ...]) -> Callable[..., Any]:
    def loss(params: list[Any], x: Any, y: Any) -> Any:
        h = x
        for k in range(0, len(params) - 2, 2):
            h = xp.tanh(h @ params[k] + params[k + 1])
        out = h @ params[-2] + params[-1]
        return xp.mean((out[:, 0] - y) ** 2)

    return loss


def mlp_params(rng: np.random.Generator, widths: tuple[int, ...]) -> list[np.ndarray]:
    params = []
    for a, b in zip(widths[:-1], widths[1:], strict=True):
        params += [rng.normal(size=(a, b)) / np.sqrt(a), rng.normal(size=b) * 0.1]
    return params


def flat_mlp_loss(xp: Any, data: np.ndarray, target: np.ndarray, hidden: int) -> Callable[[Any], Any]:
    m, d = data.shape

    def loss(p: Any) -> Any:
        w1 = xp.reshape(p[: hidden * d], (hidden, d))
        b1, w2, b2 = p[hidden * d : hidden * d + hidden], p[hidden * d + hidden : hidden * d + 2 * hidden], p[-1]
        h = xp.tanh(data @ w1.T + b1)
        return xp.sum((h @ w2 + b2 - target) ** 2) / m

    return loss


def rosenbrock(xp: Any) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        return xp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    return f


def logdet_cholesky(xp: Any) -> Callable[[Any], Any]:
    def f(a: Any) -> Any:
        return 2.0 * xp.sum(xp.log(xp.diagonal(xp.linalg.cholesky(a))))

    return f


def cases(quick: bool, rng: np.random.Generator) -> list[tuple[str, Callable[[Any], Any], Callable[[Any], Any], tuple]]:
    """(name, tidu transform of f, jax transform of f, host arguments)."""
    n_points = 1000 if quick else 1_000_000
    n_hess_points = 1000 if quick else 100_000
    widths = (8, 16, 16, 1) if quick else (32, 256, 256, 1)  # 74,497 parameters at full size
    batch = 256 if quick else 65_536
    n_rosen = 50 if quick else 4000
    n_chol = 20 if quick else 500
    points = rng.normal(size=(n_points, 3))
    hess_points = rng.normal(size=(n_hess_points, 3))
    params = mlp_params(rng, widths)
    x, y = rng.normal(size=(batch, widths[0])), rng.normal(size=batch)
    data, target = rng.normal(size=(32, 10)), rng.normal(size=32)
    p193 = rng.normal(size=16 * 10 + 16 + 16 + 1) * 0.3
    a = rng.normal(size=(n_chol, n_chol))
    spd = a @ a.T / n_chol + np.eye(n_chol)
    n_params = sum(p.size for p in params)
    return [
        (f"vmap(grad), {n_points:,} points", tidu.vmap(tidu.grad(point_energy(tnp))),
         jax.vmap(jax.grad(point_energy(jnp))), (points,)),
        (f"vmap(hessian), {n_hess_points:,} points", tidu.vmap(tidu.hessian(point_energy(tnp))),
         jax.vmap(jax.hessian(point_energy(jnp))), (hess_points,)),
        (f"MLP grad, {n_params:,} params, batch {batch:,}", tidu.grad(mlp_loss(tnp, widths)),
         jax.grad(mlp_loss(jnp, widths)), (params, x, y)),
        ("MLP-loss Hessian, 193 params", tidu.hessian(flat_mlp_loss(tnp, data, target, 16)),
         jax.hessian(flat_mlp_loss(jnp, data, target, 16)), (p193,)),
        (f"Rosenbrock Hessian, n = {n_rosen}", tidu.hessian(rosenbrock(tnp)), jax.hessian(rosenbrock(jnp)),
         (np.linspace(-1.0, 1.0, n_rosen),)),
        (f"grad logdet(cholesky), n = {n_chol}", tidu.grad(logdet_cholesky(tnp)),
         jax.grad(logdet_cholesky(jnp)), (spd,)),
    ]


# --- measuring --------------------------------------------------------------------------


def block(tree: Any) -> Any:
    return jax.block_until_ready(tree)


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def leaves(tree: Any) -> list[np.ndarray]:
    return [np.asarray(v) for v in jax.tree_util.tree_leaves(tree)]


def max_rel_diff(a: Any, b: Any) -> float:
    worst = 0.0
    for u, v in zip(leaves(a), leaves(b), strict=True):
        scale = max(float(np.max(np.abs(v))), 1e-300)
        worst = max(worst, float(np.max(np.abs(u - v))) / scale)
    return worst


BUILDS = ("to_jax", "jax", "Program.run", "jax host")  # the four builds of a case, as measure times them


def tidu_program(tf: Callable, host_args: tuple) -> Any:
    return tidu.compile(tidu.make_graph(tf)(*host_args).graph)


def build_once(which: str, tf: Callable, jf: Callable, host_args: tuple, device: Any) -> tuple[Any, Any, float]:
    """(the function or program built, its first result, seconds to build and run it once)."""
    if which in ("to_jax", "jax"):
        dev_args = jax.device_put(host_args, device)
        fn = jax.jit(tidu.to_jax(tf)) if which == "to_jax" else jax.jit(jf)
        out, seconds = timed(lambda: block(fn(*dev_args)))
        return fn, out, seconds
    if which == "Program.run":
        flat_host = leaves(host_args)

        def build() -> tuple[Any, list[np.ndarray]]:
            program = tidu_program(tf, host_args)
            return program, program.run(flat_host, backend="xla", device=device)

        (program, out), seconds = timed(build)
        return program, out, seconds
    fn = jax.jit(jf)
    out, seconds = timed(lambda: leaves(fn(*host_args)))
    return fn, out, seconds


def warm_up(device: Any) -> None:
    """Both libraries' one-time costs (imports, the device's start), on a tiny case."""
    measure("warm-up", tidu.grad(point_energy(tnp)), jax.grad(point_energy(jnp)), (np.ones(3),), device, 1, False)


def isolated_build(case: str, which: str, quick: bool) -> float:
    """Seconds of one build in a fresh process (see the module docstring)."""
    cmd = [sys.executable, __file__, "--child-build", which, "--only", case] + (["--quick"] if quick else [])
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the child build of {which} for {case!r} failed:\n{done.stderr[-3000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def measure(name: str, tf: Callable, jf: Callable, host_args: tuple, device: Any, rounds: int,
            isolate: bool, quick: bool = False) -> dict[str, Any]:
    dev_args = jax.device_put(host_args, device)
    # to_jax, on device-resident arrays
    clear_tidu_caches()
    t_fn, out_t, build_t = build_once("to_jax", tf, jf, host_args, device)
    j_fn, out_j, build_j = build_once("jax", tf, jf, host_args, device)
    per = best_interleaved({"tidu": lambda: block(t_fn(*dev_args)), "jax": lambda: block(j_fn(*dev_args))},
                           rounds=rounds)
    # Program.run from and to NumPy arrays
    clear_tidu_caches()
    flat_host = leaves(host_args)
    program, out_p, build_p = build_once("Program.run", tf, jf, host_args, device)
    j_host, out_jh, build_jh = build_once("jax host", tf, jf, host_args, device)
    per_host = best_interleaved({"tidu": lambda: program.run(flat_host, backend="xla", device=device),
                                 "jax": lambda: leaves(j_host(*host_args))}, rounds=rounds)
    if isolate:
        build_t, build_j, build_p, build_jh = (isolated_build(name, which, quick) for which in BUILDS)
    diff = max(max_rel_diff(out_t, out_j), max(max_rel_diff(u, v) for u, v in zip(out_p, leaves(out_jh),
                                                                                   strict=True)))
    return dict(name=name, build_t=build_t, build_j=build_j, per_t=per["tidu"], per_j=per["jax"],
                build_p=build_p, build_jh=build_jh, per_p=per_host["tidu"], per_jh=per_host["jax"], diff=diff)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (the CPU smoke run)")
    parser.add_argument("--only", default="", help="run only the cases whose name contains this text")
    parser.add_argument("--save", default="", help="also write the report to this file (bench/results/gpu.md: "
                        "bench/run_all.py puts the last GPU run in docs/benchmarks.md)")
    parser.add_argument("--isolate", action="store_true", help="time every build in a fresh process (the default "
                        "on accelerators)")
    parser.add_argument("--child-build", default="", choices=("", *BUILDS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    device = jax.devices()[0]
    rng = np.random.default_rng(0)
    warm_up(device)
    chosen = [c for c in cases(args.quick, rng) if args.only in c[0]]
    if args.child_build:  # one build, in this fresh process: its seconds on the last line
        (_, tf, jf, host), = chosen
        clear_tidu_caches()
        print(build_once(args.child_build, tf, jf, host, device)[2])
        return
    isolate = args.isolate or device.platform != "cpu"
    results = [measure(name, tf, jf, host, device, 3 if args.quick else 7, isolate, args.quick)
               for name, tf, jf, host in chosen]
    rows, verdicts = [], []
    for r in results:
        rows.append([r["name"], fmt_time(r["build_t"]), fmt_time(r["build_j"]), f"{r['build_t'] / r['build_j']:.2f}x",
                     fmt_time(r["per_t"]), fmt_time(r["per_j"]), f"{r['per_t'] / r['per_j']:.2f}x",
                     fmt_time(r["build_p"]), f"{r['build_p'] / r['build_jh']:.2f}x",
                     fmt_time(r["per_p"]), fmt_time(r["per_jh"]), f"{r['per_p'] / r['per_jh']:.2f}x",
                     f"{r['diff']:.1e}"])
        verdicts.append(f"{r['name']}: per call {judge(r['per_t'] / r['per_j'], PER_CALL_TARGET)}, "
                        f"build {judge(r['build_t'] / r['build_j'], BUILD_TARGET)}")
    kind = getattr(device, "device_kind", device.platform)
    report = "\n".join([
        f"## tidu on {device.platform.upper()} ({kind}) against JAX {jax.__version__}\n",
        f"Measured {time.strftime('%Y-%m-%d')} by `python bench/gpu.py{' --quick' if args.quick else ''}`"
        f"{', each build in a fresh process' if isolate else ''}. "
        "Targets: per call <= 1.1x and build <= 2x `jax.jit` of the same JAX transform (the to_jax columns); "
        "the Program.run columns go from NumPy arrays to NumPy arrays, as does the JAX call they are compared "
        "with.\n",
        "; ".join(verdicts) + ".\n",
        table(["case", "to_jax build", "jax build", "ratio", "to_jax per call", "jax per call", "ratio",
               "Program.run build", "ratio", "Program.run per call", "jax host per call", "ratio",
               "max rel diff"], rows),
    ])
    print(report)
    if args.save:
        Path(args.save).parent.mkdir(parents=True, exist_ok=True)
        Path(args.save).write_text(report + "\n")


if __name__ == "__main__":
    main()
