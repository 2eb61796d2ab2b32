"""Control flow: RK4 integration of an ODE with ``scan``, differentiated, against JAX and CasADi.

Five systems with parameters, integrated by a fixed-step RK4 ``scan`` of n steps (n = 10^2,
10^3, 10^4): Van der Pol (mu, omega), Lotka-Volterra (alpha, beta, gamma, delta), a damped
pendulum (damping, g/l: a sin in the step), Lorenz (sigma, rho, beta: three states) and a
neural ODE (x' = tanh(W diag(p) x) - x/10, eight states: matrix products in the step). The
loss is the squared norm of the final state plus the mean of the first component along
the trajectory (so both a carry and the stacked ys are differentiated).

- **Gradient** of the loss with respect to the parameters and the initial state:
  ``tidu.grad`` against ``jax.jit(jax.grad)`` of the same ``jax.lax.scan`` program.
  Build + first call: a fresh function, empty tidu caches (tidu: trace, AD, simplify,
  compile, NumPy eval; JAX: trace, lower, XLA compile, run). Per call: tidu's NumPy back
  end and tidu's StableHLO on XLA against jax.jit, interleaved rounds. tidu's graph size
  (ops after simplification) at each n: the same at every n (the body is not unrolled).
- **Forward sensitivities** of the final state (its Jacobian with respect to parameters
  and initial state): ``tidu.jacfwd`` against CasADi: an RK4 step as an SX Function,
  folded n times (``fold``) and called on MX symbols (so the loop stays a loop), and
  ``jacobian`` of the result: build + first call and per call.

- **Memory of reverse mode through a long loop**: the gradient of |x(T)|^2 after 10^4 steps
  of a 1000-element carry, with ``scan(..., checkpoint=...)`` storing every carry (None),
  one per 10 or per sqrt(n) steps, nested levels (1000, 100, 10), ``MemoryBudget`` and
  ``Revolve`` (the binomial schedule): peak memory of one call of the NumPy program
  (tracemalloc), against the footprint of sqrt(n) carries; the forward steps the program
  runs again (its sin evaluations, counted in the graph: loop lengths times bodies, less
  the n of the forward sweep), the carries the schedule stores at most and its loops.
- **Loops over data**: the gradients of a ``fori_loop`` that reads ``x[i]`` and
  ``x[(i + 1) % n]`` at its counter and of a recurrence writing ``y[i]`` from ``y[i - 1]``
  into a carried array (n = 10^3, 10^4), against ``jax.jit(jax.grad)``.

Values are checked equal to JAX's (and CasADi's), and equal across checkpoint policies.
Targets (issue 27): build + first call <= 1.0x jax.jit(grad); per call on XLA <= 1.2x
jax.jit; CasADi: build and per call <= 1.0x; peak memory with "sqrt" <= 3x the footprint
of sqrt(n) carries.

    python bench/control.py [--quick]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
from common import best_interleaved, clear_tidu_caches, fmt_time, judge, setup_jax, table

jax = setup_jax()
import jax.numpy as jnp  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402
from tidu import lax  # noqa: E402
from tidu.simplify.loops import executions  # noqa: E402

BUILD_TARGET = 1.0
XLA_TARGET = 1.2
CASADI_TARGET = 1.0
MEMORY_TARGET = 3.0  # peak memory with checkpoint="sqrt", in sqrt(n) carries' footprints


def vdp(x: Any, p: Any, xp: Any) -> Any:
    return xp.stack([x[1], p[0] * (1.0 - x[0] ** 2) * x[1] - p[1] ** 2 * x[0]])


def lotka(x: Any, p: Any, xp: Any) -> Any:
    return xp.stack([p[0] * x[0] - p[1] * x[0] * x[1], p[3] * x[0] * x[1] - p[2] * x[1]])


def pendulum(x: Any, p: Any, xp: Any) -> Any:  # damped, with a sin in the step (and a cos in its tangents)
    return xp.stack([x[1], -p[0] * x[1] - p[1] * xp.sin(x[0])])


def lorenz(x: Any, p: Any, xp: Any) -> Any:  # three states, three parameters: a 6 x 3 tangent carry
    return xp.stack([p[0] * (x[1] - x[0]), x[0] * (p[1] - x[2]) - x[1], x[0] * x[1] - p[2] * x[2]])


W_NEURAL = np.random.default_rng(0).normal(size=(8, 8)) / 3


def neural(x: Any, p: Any, xp: Any) -> Any:  # a neural ODE: matrix products in the step (W diag(p) x)
    return xp.tanh(xp.matmul(W_NEURAL, p * x)) - 0.1 * x


SYSTEMS: dict[str, tuple[Callable[..., Any], np.ndarray, np.ndarray, float]] = {
    # name: (right-hand side, parameters, initial state, time span)
    "Van der Pol": (vdp, np.array([1.5, 1.2]), np.array([1.0, 0.5]), 8.0),
    "Lotka-Volterra": (lotka, np.array([1.1, 0.4, 0.4, 0.1]), np.array([10.0, 5.0]), 8.0),
    "pendulum": (pendulum, np.array([0.3, 9.81]), np.array([1.0, 0.0]), 5.0),
    "Lorenz": (lorenz, np.array([10.0, 28.0, 8.0 / 3.0]), np.array([1.0, 1.0, 1.0]), 1.0),
    "neural ODE": (neural, np.linspace(0.8, 1.2, 8), np.linspace(-1.0, 1.0, 8), 2.0),
}


def rk4_step(rhs: Callable[..., Any], xp: Any, dt: float) -> Callable[[Any, Any], Any]:
    def step(x: Any, p: Any) -> Any:
        k1 = rhs(x, p, xp)
        k2 = rhs(x + 0.5 * dt * k1, p, xp)
        k3 = rhs(x + 0.5 * dt * k2, p, xp)
        k4 = rhs(x + dt * k3, p, xp)
        return x + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
    return step


def make_loss(rhs: Callable[..., Any], xp: Any, scan: Callable[..., Any], n: int, span: float) -> Callable[..., Any]:
    step = rk4_step(rhs, xp, span / n)

    def loss(p: Any, x0: Any) -> Any:
        def body(x: Any, _: Any) -> tuple[Any, Any]:
            x = step(x, p)
            return x, x[0]
        xT, first = scan(body, x0, None, length=n)
        return xp.sum(xT ** 2) + xp.mean(first)
    return loss


def make_final(rhs: Callable[..., Any], xp: Any, scan: Callable[..., Any], n: int, span: float) -> Callable[..., Any]:
    step = rk4_step(rhs, xp, span / n)

    def final(p: Any, x0: Any) -> Any:
        return scan(lambda x, _: (step(x, p), None), x0, None, length=n)[0]
    return final


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def gradient_row(name: str, n: int, rounds: int) -> tuple[list[Any], float, float]:
    rhs, p, x0, span = SYSTEMS[name]
    builds_np, builds_xla, builds_j = [], [], []
    args = [p, x0]
    for _ in range(rounds):  # fresh functions: nothing cached
        clear_tidu_caches()
        g = tidu.grad(make_loss(rhs, tnp, lax.scan, n, span), argnums=(0, 1))
        t_build, got = timed(lambda g=g: g(p, x0))
        builds_np.append(t_build)
        clear_tidu_caches()
        g2 = tidu.grad(make_loss(rhs, tnp, lax.scan, n, span), argnums=(0, 1))
        t_xla, got_xla = timed(lambda g2=g2: tidu.make_graph(g2)(p, x0).program.run(args, backend="xla"))
        builds_xla.append(t_xla)
        gj = jax.jit(jax.grad(make_loss(rhs, jnp, jax.lax.scan, n, span), argnums=(0, 1)))
        t_jax, want = timed(lambda gj=gj: jax.block_until_ready(gj(p, x0)))
        builds_j.append(t_jax)
    for a, b, c in zip(got, got_xla, want, strict=True):
        np.testing.assert_allclose(a, c, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(b, c, rtol=1e-8, atol=1e-10)
    graph = tidu.make_graph(g)(p, x0)
    program = graph.program
    t = best_interleaved({
        "numpy": lambda: program.eval(args),
        "xla": lambda: program.run(args, backend="xla"),
        "jax": lambda: jax.block_until_ready(gj(p, x0)),
    }, rounds=5)
    build_ratio = min(builds_xla) / min(builds_j)
    xla_ratio = t["xla"] / t["jax"]
    body_ops = sum(b.op_count for b in graph.graph.bodies())
    row = [name, n, f"{graph.graph.op_count} + {body_ops}", fmt_time(min(builds_xla)), fmt_time(min(builds_np)),
           fmt_time(min(builds_j)), f"{build_ratio:.2f}x", fmt_time(t["numpy"]), fmt_time(t["xla"]),
           fmt_time(t["jax"]), f"{xla_ratio:.2f}x"]
    return row, build_ratio, xla_ratio


def casadi_row(name: str, n: int, rounds: int) -> tuple[list[Any], float, float] | None:
    try:
        import casadi as ca
    except ImportError:
        return None
    rhs, p, x0, span = SYSTEMS[name]
    dt = span / n

    class CasadiNp:  # the operations rhs uses, on CasADi SX
        sin = staticmethod(ca.sin)
        tanh = staticmethod(ca.tanh)

        @staticmethod
        def matmul(a: np.ndarray, b: Any) -> Any:
            return ca.mtimes(ca.DM(a), b)

        @staticmethod
        def stack(parts: list[Any]) -> Any:
            return ca.vertcat(*parts)

    def build_casadi() -> Callable[..., Any]:
        xs, ps = ca.SX.sym("x", len(x0)), ca.SX.sym("p", len(p))
        step = ca.Function("step", [xs, ps], [rk4_step(rhs, CasadiNp, dt)(xs, ps)])
        run = step.fold(n)
        x0s, pv = ca.MX.sym("x0", len(x0)), ca.MX.sym("pv", len(p))  # MX: the fold stays a loop
        xT = run(x0s, ca.repmat(pv, 1, n))
        return ca.Function("sensitivities", [pv, x0s], [ca.jacobian(xT, ca.vertcat(pv, x0s))])

    builds_t, builds_c = [], []
    for _ in range(rounds):
        clear_tidu_caches()
        jf = tidu.jacfwd(make_final(rhs, tnp, lax.scan, n, span), argnums=(0, 1))
        t_build, got = timed(lambda jf=jf: jf(p, x0))
        builds_t.append(t_build)
        t_cas, jac = timed(build_casadi)
        t_call, want = timed(lambda jac=jac: np.asarray(jac(p, x0)))
        builds_c.append(t_cas + t_call)
    np.testing.assert_allclose(np.concatenate([got[0], got[1]], axis=1), want, rtol=1e-8, atol=1e-10)
    program = tidu.make_graph(jf)(p, x0).program
    args = [p, x0]
    np.testing.assert_allclose(program.run(args, backend="xla")[0], got[0], rtol=1e-10, atol=1e-12)
    t = best_interleaved({"numpy": lambda: jf(p, x0), "xla": lambda: program.run(args, backend="xla"),
                          "casadi": lambda: jac(p, x0)}, rounds=5)
    build_ratio, call_ratio = min(builds_t) / min(builds_c), t["xla"] / t["casadi"]
    row = [name, n, fmt_time(min(builds_t)), fmt_time(min(builds_c)), f"{build_ratio:.2f}x", fmt_time(t["numpy"]),
           fmt_time(t["xla"]), fmt_time(t["casadi"]), f"{call_ratio:.2f}x"]
    return row, build_ratio, call_ratio


def memory_rows(n: int, size: int) -> tuple[list[list[Any]], float]:
    a = np.linspace(0.5, 1.5, size)
    x = np.linspace(0.0, 1.0, size)

    def loss(policy: Any) -> Callable[..., Any]:
        def f(x: Any) -> Any:
            c, _ = lax.scan(lambda c, _: (c + 1e-3 * tnp.sin(c * a), None), x, None, length=n, checkpoint=policy)
            return tnp.sum(c ** 2)
        return f

    footprint = round(n ** 0.5) * size * 8
    rows, ratio, first = [], 0.0, None
    policies = (None, 10, "sqrt", (n // 10, n // 100, n // 1000), lax.MemoryBudget(150), lax.MemoryBudget(60),
                lax.Revolve(30))
    for policy in policies:
        t0 = time.perf_counter()
        graph = tidu.make_graph(tidu.grad(loss(policy)))(x)
        build = time.perf_counter() - t0
        program = graph.program
        program.eval([x])
        tracemalloc.start()
        t0 = time.perf_counter()
        got = program.eval([x])[0]
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        first = got if first is None else first
        np.testing.assert_array_equal(got, first)  # the same values under every policy
        if policy == "sqrt":
            ratio = peak / footprint
        again = executions(graph.graph, "sin") - n  # the forward sweep runs each step once
        plan = policy.schedule(n) if isinstance(policy, lax.MemoryBudget | lax.Revolve) else None
        if plan is not None:  # (a short segment written out may drop a last step no one reads)
            assert again <= plan.recomputed, (policy, plan.recomputed, again)
        stored = "" if plan is None else f"{plan.peak} ({plan.loops})"
        rows.append([repr(policy), f"{peak / 1e6:.2f} MB", f"{peak / footprint:.2f}", f"{again}",
                     f"{again / n:.2f}", stored, fmt_time(build), fmt_time(seconds)])
    return rows, ratio


def memory_section(n_mem: int, size: int) -> None:
    """Print the memory section: reverse mode through ``n_mem`` steps of a ``size``-element carry."""
    mem_rows, mem_ratio = memory_rows(n_mem, size)
    print("\n## Control flow: memory of reverse mode through a long scan\n")
    print(f"The gradient of |x(T)|^2 after {n_mem} steps of a {size}-element carry (x <- x + 1e-3 sin(a x)), "
          "NumPy back end, by checkpoint policy: peak memory of one call (tracemalloc), in units of the "
          f"footprint of sqrt(n) carries ({round(n_mem ** 0.5) * size * 8 / 1e6:.2f} MB); the forward steps "
          "run again in reverse mode (beyond the forward sweep; counted in the graph: at most what the "
          "schedule counts, as a segment of a few steps written out in its body may skip a last step no one "
          "reads), per step; for "
          "MemoryBudget and Revolve the carries their schedule stores at most (the rest of the peak: the "
          "cotangents and a step's temporaries) and its loops; the time to build the gradient's program "
          f"and of the call. checkpoint=\"sqrt\": {judge(mem_ratio, MEMORY_TARGET)}. The gradients are "
          "equal bit for bit across policies.\n")
    print(table(["checkpoint", "peak memory", "in sqrt(n) carries", "steps run again", "per step",
                 "stored (loops)", "build", "call"], mem_rows))


def _reads(n: int) -> tuple[Callable[..., Any], np.ndarray]:
    def loop(x: Any, m: Any, L: Any) -> Any:
        x = m.asarray(x)
        return L.fori_loop(0, n, lambda i, acc: acc + m.sin(x[i]) * x[(i + 1) % n], 0.0)
    return loop, np.linspace(0.1, 2.0, n)


def _recurrence(n: int) -> tuple[Callable[..., Any], np.ndarray]:
    def loop(a: Any, m: Any, L: Any) -> Any:
        a = m.asarray(a)
        body = lambda i, y: y.at[i].set(m.sin(y[i - 1]) * a[1] + a[0])  # noqa: E731
        return m.sum(L.fori_loop(1, n, body, m.zeros(n) + a[0]) ** 2)
    return loop, np.array([0.3, 0.9])


def indexing_rows(sizes: tuple[int, ...]) -> list[list[Any]]:
    """Loops over data against jax.jit: a fori_loop reading x[i] and x[(i + 1) % n] of an
    n-array (its gradient: every step's cotangent lands in one slice of x's), and a
    recurrence writing y[i] from y[i - 1] into a carried n-array (its gradient stores what
    the reverse steps read, a few numbers per step); peak memory of the NumPy call."""
    rows = []
    for name, make in (("x[i] reads", _reads), ("y[i] recurrence", _recurrence)):
        for n in sizes:
            loop, x = make(n)
            clear_tidu_caches()
            g = tidu.grad(lambda x, loop=loop: loop(x, tnp, lax))
            t_build, got = timed(lambda g=g, x=x: g(x))
            program = tidu.make_graph(g)(x).program
            jg = jax.jit(jax.grad(lambda x, loop=loop: loop(x, jnp, jax.lax)))
            t_jax, want = timed(lambda jg=jg, x=x: jg(x).block_until_ready())
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(program.run([x], backend="xla")[0], want, rtol=1e-12, atol=1e-14)
            tracemalloc.start()
            g(x)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            t = best_interleaved({"numpy": lambda g=g, x=x: g(x),
                                  "xla": lambda p=program, x=x: p.run([x], backend="xla"),
                                  "jax": lambda jg=jg, x=x: jg(x).block_until_ready()}, rounds=5)
            rows.append([name, n, fmt_time(t_build), fmt_time(t_jax), fmt_time(t["numpy"]), f"{peak / 1e6:.2f} MB",
                         fmt_time(t["xla"]), fmt_time(t["jax"]), f"{t['xla'] / t['jax']:.2f}x"])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    args = ap.parse_args()
    sizes = (10, 100) if args.quick else (100, 1000, 10_000)
    rounds = 1 if args.quick else 3
    for name in SYSTEMS:  # warm: imports, the e-graph session, XLA
        gradient_row(name, 5, 1)

    rows, builds, xlas = [], [], []
    for name in SYSTEMS:
        for n in sizes:
            row, b, x = gradient_row(name, n, rounds)
            rows.append(row)
            builds.append(b)
            xlas.append(x)
    print("## Control flow: gradients through an RK4 scan against JAX\n")
    print("tidu.grad of an RK4 lax.scan integration (loss: |x(T)|^2 + mean of x_0 along the path) against "
          "jax.jit(jax.grad) of the same jax.lax.scan program; build + first call with fresh functions and "
          f"empty caches, best of {rounds} (tidu on XLA: trace, AD, simplify, compile, StableHLO, XLA compile "
          "and run, as jax.jit's; tidu on NumPy for information); per call interleaved. "
          f"Build + first call on XLA: worst {judge(max(builds), BUILD_TARGET)}; per call on XLA: worst "
          f"{judge(max(xlas), XLA_TARGET)}. tidu's ops (the graph + its bodies) do not grow with n (the "
          "mean's cotangent is a folded constant up to 2^16 elements, a broadcast beyond).\n")
    print(table(["system", "steps", "tidu ops", "tidu build+call XLA", "tidu build+call NumPy", "JAX build+call",
                 "build XLA/JAX", "tidu NumPy call", "tidu XLA call", "jax.jit call", "call XLA/JAX"], rows))

    cas_rows, cas_builds, cas_calls = [], [], []
    for name in SYSTEMS:
        for n in sizes:
            got = casadi_row(name, n, rounds)
            if got is None:
                break
            cas_rows.append(got[0])
            cas_builds.append(got[1])
            cas_calls.append(got[2])
    memory_section(*((1000, 200) if args.quick else (10_000, 1000)))
    print("\n## Control flow: loops over data, indexed at their counter\n")
    print("tidu.grad against jax.jit(jax.grad) of the same program: a fori_loop that reads x[i] and x[(i + 1) % n] "
          "of an n-array (x[i] is a dynamic_slice; its cotangent is added into one slice of the carried gradient), "
          "and a recurrence y.at[i].set(sin(y[i - 1]) a1 + a0) on a carried n-array (reverse mode stores the few "
          "numbers per step its reverse steps read, not the array). A step costs O(1) on XLA; on NumPy an update "
          "copies the array. Build + first call: tidu on NumPy, JAX with its XLA compile; peak memory of tidu's "
          "NumPy call (tracemalloc); per call interleaved.\n")
    print(table(["program", "n", "tidu build+call", "JAX build+call", "tidu NumPy call", "NumPy peak", "tidu XLA call",
                 "jax.jit call", "call XLA/JAX"], indexing_rows((100, 1000) if args.quick else (1000, 10_000))))
    if cas_rows:
        print("\n## Control flow: forward sensitivities against CasADi\n")
        print("The Jacobian of the final state with respect to parameters and initial state: tidu.jacfwd of the "
              "scan against CasADi (an SX RK4 step Function, fold(n) called on MX, jacobian). Build + first call "
              "(tidu on NumPy, its quickest build): worst "
              f"{judge(max(cas_builds), CASADI_TARGET)}; per call (tidu on XLA; on NumPy for information): worst "
              f"{judge(max(cas_calls), CASADI_TARGET)}.\n")
        print(table(["system", "steps", "tidu build+call", "CasADi build+call", "build tidu/CasADi",
                     "tidu NumPy call", "tidu XLA call", "CasADi call", "call XLA/CasADi"], cas_rows))


if __name__ == "__main__":
    main()
