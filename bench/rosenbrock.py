"""The Hessian of the Rosenbrock function, end to end: tidu, JAX and SymPy.

Timed, for each system, from the Python function to the n x n Hessian at one point:

- tidu: ``tidu.hessian(rosen)(x)`` (default mode FoR) with the vectorised Rosenbrock of
  bench/common.py written with ``tidu.numpy``: trace + transforms + materialize + compile
  + NumPy eval (per basis vector), with empty tidu caches and a fresh function object;
- JAX: ``jax.jit(jax.hessian(rosen))(x)`` with ``jax.numpy``, fresh function: trace +
  lower + XLA compile + eval (``block_until_ready``);
- SymPy: the same sum over n symbols, ``sympy.hessian``, ``lambdify`` (NumPy) and eval,
  SymPy's cache cleared first. SymPy is skipped at n = 1000 (n = 100 alone takes ~10 s).

Both warm (one untimed run at n = 10 first). tidu and JAX: best of 3 rounds; SymPy: one
round from n = 50 up, best of 3 below. The "tidu cached" column is a second call of the
same transformed function (eval only), for information. All Hessians are checked equal.

    python bench/rosenbrock.py [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import sympy
from common import best_interleaved, clear_tidu_caches, fmt_time, judge, make_rosenbrock, setup_jax, table

jax = setup_jax()
import jax.numpy as jnp  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402

SYMPY_SPEEDUP = 100  # tidu at least 100x faster than SymPy at n = 100
E2E_LIMIT = 1.0  # tidu under 1 s end to end at n = 1000
SYMPY_MAX_N = 100


def best(fn, rounds: int):
    """(result, best wall time) over ``rounds`` calls of ``fn``."""
    times, out = [], None
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, min(times)


def run_tidu(x):
    clear_tidu_caches()
    return tidu.hessian(make_rosenbrock(tnp))(x)


def run_jax(x):
    return np.asarray(jax.jit(jax.hessian(make_rosenbrock(jnp)))(x).block_until_ready())


def run_sympy(x):
    sympy.core.cache.clear_cache()
    s = sympy.symbols(f"x0:{len(x)}")
    expr = sympy.Add(*[100 * (b - a**2) ** 2 + (1 - a) ** 2 for a, b in zip(s[:-1], s[1:], strict=True)])
    hess = sympy.lambdify(s, sympy.hessian(expr, s), "numpy")
    return np.asarray(hess(*x), dtype=float)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="n = 10 and 20, one round")
    args = ap.parse_args()
    sizes, rounds = ((10, 20), 1) if args.quick else ((10, 50, 100, 1000), 3)
    run_tidu(np.zeros(10)), run_jax(np.zeros(10)), run_sympy(np.zeros(3))  # warm-up
    rows, res = [], {}
    for n in sizes:
        x = np.linspace(-1.2, 1.5, n)
        h_tidu, t_tidu = best(lambda x=x: run_tidu(x), rounds)
        f = tidu.hessian(make_rosenbrock(tnp))
        f(x)
        _, t_cached = best(lambda x=x, f=f: f(x), 3)
        h_jax, t_jax = best(lambda x=x: run_jax(x), rounds)
        np.testing.assert_allclose(h_tidu, h_jax, rtol=1e-12, atol=1e-9)
        t_sym = None
        if n <= SYMPY_MAX_N:
            h_sym, t_sym = best(lambda x=x: run_sympy(x), rounds if n < 50 else 1)
            np.testing.assert_allclose(h_tidu, h_sym, rtol=1e-12, atol=1e-9)
        res[n] = (t_tidu, t_sym)
        speed = f"{t_sym / t_tidu:.0f}x" if t_sym else f"skipped (n > {SYMPY_MAX_N})"
        rows.append([n, fmt_time(t_tidu), fmt_time(t_cached), fmt_time(t_jax), f"{t_tidu / t_jax:.2f}x",
                     fmt_time(t_sym), speed])
    verdicts = []
    if 100 in res:
        verdicts.append(f"n = 100 at least {SYMPY_SPEEDUP}x faster than SymPy: "
                        f"{judge(res[100][1] / res[100][0], SYMPY_SPEEDUP, '{:.0f}x', True)}")
    if 1000 in res:
        verdicts.append(f"n = 1000 under {E2E_LIMIT:.0f} s end to end: "
                        f"{judge(res[1000][0], E2E_LIMIT, '{:.3f} s')}")
    print("## Rosenbrock Hessian, end to end\n")
    print("From the Python function to the n x n Hessian at one point: tidu `hessian` "
          "(trace, transforms, materialize, compile, NumPy eval; empty caches), JAX "
          "`jit(hessian)` (trace, lower, XLA compile, eval) and SymPy (`hessian` of n symbols, "
          f"`lambdify`, eval; cache cleared; skipped above n = {SYMPY_MAX_N}); best of {rounds} "
          "(SymPy: one round from n = 50), fresh functions. \"tidu cached\" is a repeated call "
          "(eval only). Targets: " + ("; ".join(verdicts) if verdicts else
                                      "at n = 100 and 1000, not measured in a quick run") + ".\n")
    print(table(["n", "tidu", "tidu cached", "JAX jit(hessian)", "tidu/JAX", "SymPy", "SymPy/tidu"], rows))
    print()
    print(xla_section(args.quick))


HLO_SIZE_LIMIT = 1_000_000  # bytes of StableHLO for the dense Hessian at n = 4000
HLO_BUILD_TARGET = 2.0  # jax.jit(to_jax(hessian)) build against jax.jit(jax.hessian)
HLO_CALL_TARGET = 1.1


def xla_section(quick: bool) -> str:
    """The dense Hessian through XLA on the CPU: StableHLO text size, and
    jax.jit(tidu.to_jax(tidu.hessian(f))) against jax.jit(jax.hessian(f)), build (first
    call, tidu caches cleared) and per call, at n = 1000 and 4000."""
    rows, verdicts = [], []
    for n in (50, 200) if quick else (1000, 4000):
        x = np.linspace(-1.2, 1.5, n)
        clear_tidu_caches()
        t0 = time.perf_counter()
        text = tidu.to_stablehlo(tidu.hessian(make_rosenbrock(tnp)), x)
        t_text = time.perf_counter() - t0
        builds_t, builds_j = [], []
        for _ in range(3):
            clear_tidu_caches()
            ft = jax.jit(tidu.to_jax(tidu.hessian(make_rosenbrock(tnp))))
            (h_t, t) = best(lambda ft=ft, x=x: np.asarray(ft(x).block_until_ready()), 1)
            builds_t.append(t)
            fj = jax.jit(jax.hessian(make_rosenbrock(jnp)))
            (h_j, t) = best(lambda fj=fj, x=x: np.asarray(fj(x).block_until_ready()), 1)
            builds_j.append(t)
        np.testing.assert_allclose(h_t, h_j, rtol=1e-12, atol=1e-9)
        per = best_interleaved({"tidu": lambda ft=ft, x=x: ft(x).block_until_ready(),
                                "jax": lambda fj=fj, x=x: fj(x).block_until_ready()}, rounds=3 if quick else 7)
        b, c = min(builds_t) / min(builds_j), per["tidu"] / per["jax"]
        rows.append([n, f"{len(text):,} B", fmt_time(t_text), fmt_time(min(builds_t)), fmt_time(min(builds_j)),
                     f"{b:.2f}x", fmt_time(per["tidu"]), fmt_time(per["jax"]), f"{c:.2f}x"])
        verdicts.append(f"n = {n}: text {judge(len(text), HLO_SIZE_LIMIT, '{:,} B')}, build "
                        f"{judge(b, HLO_BUILD_TARGET)}, per call {judge(c, HLO_CALL_TARGET)}")
    return ("### The dense Hessian through XLA (CPU)\n\n"
            "`tidu.to_stablehlo` of the Hessian (text size, time), and `jax.jit(tidu.to_jax(tidu.hessian(f)))` "
            "against `jax.jit(jax.hessian(f))`: build = first call (best of 3, tidu caches cleared), per call "
            f"best of interleaved rounds. Targets (at n = 4000): text <= {HLO_SIZE_LIMIT:,} B, build <= "
            f"{HLO_BUILD_TARGET:.0f}x, per call <= {HLO_CALL_TARGET}x: " + "; ".join(verdicts) + ".\n\n"
            + table(["n", "StableHLO", "to_stablehlo", "to_jax build", "jax build", "ratio", "to_jax per call",
                     "jax per call", "ratio"], rows))


if __name__ == "__main__":
    main()
