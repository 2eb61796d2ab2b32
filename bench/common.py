"""Shared pieces of the benchmarks: the test functions, timing, tables, JAX set-up.

The functions are written once against a NumPy-like module ``xp`` (``tidu.numpy``,
``jax.numpy`` or ``numpy``) so that every system runs the very same computation.
"""

from __future__ import annotations

import gc
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

CHAIN_OPS = 1000
CHAIN_OPS_QUICK = 100  # the chain length of the --quick smoke runs
CHAIN_X = 0.7  # the scalar point the chain is evaluated and differentiated at


def chain(x: Any, xp: Any, n: int = CHAIN_OPS) -> Any:
    """A scalar chain of exactly ``n`` primitive ops, cycling through sin, mul by x,
    scale by 0.5, exp, tanh, cos and add x. Every value stays in a bounded range
    (|v| < 3 for x in [0, 1]), so no derivative overflows."""
    y = x
    for i in range(n):
        k = i % 7
        if k == 0:
            y = xp.sin(y)
        elif k == 1:
            y = y * x
        elif k == 2:
            y = 0.5 * y
        elif k == 3:
            y = xp.exp(y)
        elif k == 4:
            y = xp.tanh(y)
        elif k == 5:
            y = xp.cos(y)
        else:
            y = y + x
    return y


def make_chain(xp: Any, n: int = CHAIN_OPS) -> Callable[[Any], Any]:
    """A fresh function object for the chain (so no per-function cache can be reused)."""

    def f(x: Any) -> Any:
        return chain(x, xp, n)

    return f


def chain_d2(x: float, n: int = CHAIN_OPS) -> tuple[float, float, float]:
    """Hand-written (value, first, second derivative) of the chain: second-order forward
    propagation in plain Python floats with the math module."""
    import math

    v, d, dd = x, 1.0, 0.0
    for i in range(n):
        k = i % 7
        if k == 0:
            s, c = math.sin(v), math.cos(v)
            v, d, dd = s, c * d, c * dd - s * d * d
        elif k == 1:
            v, d, dd = v * x, d * x + v, dd * x + 2.0 * d
        elif k == 2:
            v, d, dd = 0.5 * v, 0.5 * d, 0.5 * dd
        elif k == 3:
            e = math.exp(v)
            v, d, dd = e, e * d, e * (dd + d * d)
        elif k == 4:
            t = math.tanh(v)
            g = 1.0 - t * t
            v, d, dd = t, g * d, g * dd - 2.0 * t * g * d * d
        elif k == 5:
            s, c = math.sin(v), math.cos(v)
            v, d, dd = c, -s * d, -s * dd - c * d * d
        else:
            v, d = v + x, d + 1.0
    return v, d, dd


def rosenbrock(x: Any, xp: Any) -> Any:
    """The vectorised Rosenbrock function sum(100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2)."""
    a, b = x[:-1], x[1:]
    return xp.sum(100.0 * (b - a * a) ** 2 + (1.0 - a) ** 2)


def make_rosenbrock(xp: Any) -> Callable[[Any], Any]:
    def rosen(x: Any) -> Any:
        return rosenbrock(x, xp)

    return rosen


def sum_exp(x: Any, a: Any, xp: Any) -> Any:
    """sum(exp(a * x)): its gradient in x is a * exp(a * x)."""
    return xp.sum(xp.exp(a * x))


# --- timing ----------------------------------------------------------------------------


def best_of(fn: Callable[[], Any], repeat: int = 5, warmup: int = 1, number: int = 1) -> float:
    """Best wall time in seconds of ``number`` calls of ``fn``, divided by ``number``,
    over ``repeat`` rounds after ``warmup`` untimed calls. GC is off while timing."""
    for _ in range(warmup):
        fn()
    best = float("inf")
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            best = min(best, (time.perf_counter() - t0) / number)
    finally:
        if gc_was:
            gc.enable()
    return best


def auto_number(fn: Callable[[], Any], target: float = 0.05) -> int:
    """How many calls make one timing round last about ``target`` seconds."""
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    return max(1, min(100_000, int(target / one)))


def best_auto(fn: Callable[[], Any], repeat: int = 5) -> float:
    """best_of with one warm-up call and the number of calls per round chosen by timing."""
    fn()
    return best_of(fn, repeat=repeat, warmup=0, number=auto_number(fn))


def best_interleaved(fns: dict[str, Callable[[], Any]], rounds: int = 15,
                     target: float = 0.02) -> dict[str, float]:
    """Best time per call of each function, measured in interleaved rounds: every round
    times each function once (about ``target`` seconds of calls), starting at a different
    function each round. Drifts in machine speed (other tenants, frequency scaling) then
    fall on all contenders alike instead of on whichever happened to run last. One
    warm-up call each; GC is off while timing."""
    names = list(fns)
    numbers = {}
    for name in names:
        fns[name]()
        numbers[name] = auto_number(fns[name], target)
    best = dict.fromkeys(names, float("inf"))
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                fn, number = fns[name], numbers[name]
                t0 = time.perf_counter()
                for _ in range(number):
                    fn()
                best[name] = min(best[name], (time.perf_counter() - t0) / number)
    finally:
        if gc_was:
            gc.enable()
    return best


def fmt_time(t: float | None) -> str:
    if t is None:
        return "-"
    if t < 1e-3:
        return f"{t * 1e6:.1f} µs"
    if t < 1:
        return f"{t * 1e3:.2f} ms"
    return f"{t:.2f} s"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table (also readable as plain text)."""
    cells = [[str(c) for c in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"

    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(cells[0]), sep] + [line(r) for r in cells[1:]])


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def judge(value: float, limit: float, fmt: str = "{:.2f}x", higher_is_better: bool = False) -> str:
    """'met (0.56x, target ≤ 1.00x)' or 'MISSED by a factor 3.65 (4.02x, target ≤ 1.10x)'."""
    ok = value >= limit if higher_is_better else value <= limit
    rel = "≥" if higher_is_better else "≤"
    shown = f"{fmt.format(value)}, target {rel} {fmt.format(limit)}"
    if ok:
        return f"met ({shown})"
    factor = limit / value if higher_is_better else value / limit
    return f"MISSED by a factor {factor:.2f} ({shown})"


# --- set-up ------------------------------------------------------------------------------


def setup_jax() -> Any:
    """jax on CPU with float64 (before any array exists)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    jax.config.update("jax_enable_x64", True)
    return jax


def clear_tidu_caches() -> None:
    """Forget every compiled tidu program (trace cache and compile cache)."""
    import tidu

    tidu.clear_trace_cache()
    tidu.clear_cache()


def machine_info() -> str:
    import numpy as np

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    parts = [f"{cpu}, {os.cpu_count()} CPUs", f"Python {sys.version.split()[0]}", f"NumPy {np.__version__}"]
    for mod in ("jax", "sympy", "egglog"):
        try:
            from importlib.metadata import version

            parts.append(f"{mod} {version(mod)}")
        except Exception:  # noqa: BLE001 (optional package)
            pass
    return "; ".join(parts)
