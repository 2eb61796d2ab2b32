"""Hessians that do not grow with n, sparse Hessians, and vmap: tidu against JAX and CasADi.

In one run, each timed in this process:

- dense Rosenbrock Hessian, n = 50 and 1000: ``tidu.hessian(f)(x)`` (default NumPy
  evaluation; where the Hessian is sparse enough, tidu evaluates it through a star
  coloring and scatters it into the dense array) against ``jax.jit(jax.hessian(f))(x)``:
  build + first call (fresh function, empty caches; JAX: trace, lower, XLA compile, run)
  and per call (best of interleaved rounds). Targets (issue 11): both <= 1.0x JAX's.
  Also against CasADi (``ca.hessian``, densified, a ``ca.Function``, its first call):
  build + first call <= 1.0x CasADi's (issue 32), best of 9 rounds of both, interleaved
  (builds of a few milliseconds vary with the machine's load).
- sparse Hessians, Rosenbrock and a 1-D finite-difference energy (sum cosh(x[i+1]-x[i]) +
  x^4/4), n = 10^4 and 10^5: ``tidu.hessian(f, sparse=True)(x)`` (a SciPy CSR array)
  against CasADi (``ca.hessian`` of the same sum on an ``SX`` symbol, a ``ca.Function``,
  its first call; then per call). Targets: build + first call <= 2x CasADi's, per call
  <= 1x, values equal (max |difference| printed), nnz <= 3n.
- dense Hessians of five other banded functions (OTHER_DENSE), n = 50 and 1000, against
  CasADi as Rosenbrock's: build + first call, for information (the target is Rosenbrock's).
- an MLP loss (10 inputs, 16 tanh units, 1 output, squared error over 32 samples; the
  Hessian in the 193 parameters): tidu dense against jax.jit(jax.hessian) and CasADi.
- op counts of ``make_graph(tidu.hessian(f))`` at n = 10 and 1000 (equal: the graph does
  not grow with n) next to JAX's jaxpr equation count.
- ``vmap`` of a gradient over 10^3 points (Rosenbrock in 10 variables) on the XLA
  backend: ``jax.jit(tidu.to_jax(tidu.vmap(tidu.grad(f))))`` against
  ``jax.jit(jax.vmap(jax.grad(f)))``, per call. Target: <= 1.5x.

    python bench/hessian.py [--quick]      (--quick: n = 10^3 and 10^4 for the sparse part)
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
from common import best_interleaved, clear_tidu_caches, fmt_time, judge, setup_jax, table

jax = setup_jax()
import jax.numpy as jnp  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402

DENSE_TARGET = 1.0
SPARSE_BUILD_TARGET, SPARSE_CALL_TARGET = 2.0, 1.0
VMAP_TARGET = 1.5


def rosen(x: Any, xp: Any = tnp) -> Any:
    a, b = x[:-1], x[1:]
    return xp.sum(100.0 * (b - a * a) ** 2 + (1.0 - a) ** 2)


def energy(x: Any, xp: Any = tnp) -> Any:
    return xp.sum(xp.cosh(x[1:] - x[:-1])) + xp.sum(x ** 4) / 4


def casadi_fn(name: str, n: int) -> tuple[Any, Any]:
    import casadi as ca

    x = ca.SX.sym("x", n)
    if name == "rosenbrock":
        a, b = x[:-1], x[1:]
        f = ca.sum1(100.0 * (b - a * a) ** 2 + (1.0 - a) ** 2)
    else:
        f = ca.sum1(ca.cosh(x[1:] - x[:-1])) + ca.sum1(x ** 4) / 4
    return x, f


def first_call(make: Callable[[], Callable[[], Any]]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = make()()
    return time.perf_counter() - t0, out


def fresh(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A new function object with the same body (no cache of any library can match it)."""
    def f(*a: Any) -> Any:
        return fn(*a)
    return f


def dense_section(quick: bool) -> str:
    import casadi as ca

    rows, verdicts = [], []
    for n in (50, 1000):
        x = np.linspace(-1.2, 1.1, n)

        def build_tidu(x: np.ndarray = x) -> Callable[[], Any]:
            clear_tidu_caches()
            tf = tidu.hessian(fresh(rosen))
            return lambda: tf(x)

        def build_jax(x: np.ndarray = x) -> Callable[[], Any]:
            jf = jax.jit(jax.hessian(fresh(lambda x: rosen(x, jnp))))
            return lambda: jf(x).block_until_ready()

        rounds = 1 if quick else 3  # builds: best of rounds, each from a fresh function and empty caches
        t_tidu, h_tidu = min((first_call(build_tidu) for _ in range(rounds)), key=lambda r: r[0])
        t_jax, h_jax = min((first_call(build_jax) for _ in range(rounds)), key=lambda r: r[0])
        tf = tidu.hessian(fresh(rosen))
        jf = jax.jit(jax.hessian(fresh(lambda x: rosen(x, jnp))))
        tf(x), jf(x)

        def build_casadi(n: int = n, x: np.ndarray = x) -> Callable[[], Any]:
            xs, f = casadi_fn("rosenbrock", n)
            hf = ca.Function("h", [xs], [ca.densify(ca.hessian(f, xs)[0])])
            return lambda: np.asarray(hf(x))

        t_c, h_c = min((first_call(build_casadi) for _ in range(rounds)), key=lambda r: r[0])
        for _ in range(0 if quick else 6):  # more rounds of both, interleaved: builds of a few ms vary
            t_tidu = min(t_tidu, first_call(build_tidu)[0])
            t_c = min(t_c, first_call(build_casadi)[0])
        call_c = build_casadi()
        per = best_interleaved({"tidu": lambda tf=tf, x=x: tf(x), "jax": lambda jf=jf, x=x: jf(x).block_until_ready(),
                                "casadi": call_c}, rounds=5 if quick else 11)
        diff = max(float(np.max(np.abs(h_tidu - np.asarray(h_jax)))), float(np.max(np.abs(h_tidu - h_c))))
        b, c = t_tidu / t_jax, per["tidu"] / per["jax"]
        bc, cc = t_tidu / t_c, per["tidu"] / per["casadi"]
        rows.append([n, fmt_time(t_tidu), fmt_time(t_jax), f"{b:.2f}x", fmt_time(t_c), f"{bc:.2f}x",
                     fmt_time(per["tidu"]), fmt_time(per["jax"]), f"{c:.2f}x", fmt_time(per["casadi"]), f"{cc:.2f}x",
                     f"{diff:.1e}"])
        verdicts.append(f"n = {n}: build + first call {judge(b, DENSE_TARGET)} JAX and {judge(bc, DENSE_TARGET)} "
                        f"CasADi, per call {judge(c, DENSE_TARGET)} JAX")
    return ("### Dense Rosenbrock Hessian against jax.jit(jax.hessian) and CasADi\n\n"
            "CasADi: `ca.hessian` of the sum on an `SX` symbol, densified, a `ca.Function` and its first call. "
            + "; ".join(verdicts) + ".\n\n"
            + table(["n", "tidu build+1st", "jax build+1st", "ratio", "casadi build+1st", "ratio", "tidu per call",
                     "jax per call", "ratio", "casadi per call", "ratio", "max |diff|"], rows))


# Dense Hessians of other functions than Rosenbrock (the target is Rosenbrock's; a build
# that met it only there would not be fast in general): written once against a namespace
# with ``sum``, ``exp``, ``tanh``, ``sqrt``, ``log``, ``sin``, ``cos`` (tidu.numpy or _CasadiNp).
OTHER_DENSE: dict[str, Callable[[Any, Any], Any]] = {
    "chained exp": lambda x, xp: xp.sum(xp.exp(x[:-1] * x[1:])),
    "banded tanh": lambda x, xp: xp.sum(xp.tanh(x[2:] - 2.0 * x[1:-1] + x[:-2]) ** 2),
    "arc length": lambda x, xp: xp.sum(xp.sqrt(1.0 + (x[1:] - x[:-1]) ** 2)) - xp.sum(-x * xp.exp(-x)),
    "trig chain": lambda x, xp: xp.sum(xp.sin(x[1:]) * xp.cos(x[:-1]) - x[1:] / (2.0 + x[:-1] ** 2)),
    "Rosenbrock + log": lambda x, xp: xp.sum((x[1:] - x[:-1] ** 2) ** 2) + xp.sum(xp.log(1.0 + x ** 2)),
}


class _CasadiNp:
    """The functions OTHER_DENSE uses, on CasADi SX (made on first use: CasADi is a bench extra)."""

    def __getattr__(self, name: str) -> Any:
        import casadi as ca

        return ca.sum1 if name == "sum" else getattr(ca, name)


def other_dense_section(quick: bool) -> str:
    import casadi as ca

    rows, worst = [], (0.0, "")
    for name, fn in OTHER_DENSE.items():
        for n in (50,) if quick else (50, 1000):
            x = np.linspace(-1.2, 1.1, n)

            def build_tidu(x: np.ndarray = x, fn: Any = fn) -> Callable[[], Any]:
                clear_tidu_caches()
                tf = tidu.hessian(fresh(lambda v: fn(v, tnp)))
                return lambda: tf(x)

            def build_casadi(n: int = n, x: np.ndarray = x, fn: Any = fn) -> Callable[[], Any]:
                xs = ca.SX.sym("x", n)
                hf = ca.Function("h", [xs], [ca.densify(ca.hessian(fn(xs, _CasadiNp()), xs)[0])])
                return lambda: np.asarray(hf(x))

            first_call(build_tidu), first_call(build_casadi)  # warm: this program's rules, CasADi's codegen
            t_t = t_c = np.inf
            for _ in range(1 if quick else 5):  # interleaved: builds of a few ms vary with the machine
                t, h_t = first_call(build_tidu)
                t_t = min(t_t, t)
                t, h_c = first_call(build_casadi)
                t_c = min(t_c, t)
            diff = float(np.max(np.abs(h_t - h_c))) / max(1.0, float(np.max(np.abs(h_c))))
            worst = max(worst, (t_t / t_c, f"{name}, n = {n}"))
            rows.append([name, n, fmt_time(t_t), fmt_time(t_c), f"{t_t / t_c:.2f}x", f"{diff:.1e}"])
    return ("### Dense Hessians of other functions against CasADi\n\n"
            "Build + first call as for Rosenbrock (fresh function, empty caches; CasADi: SX `hessian`, densified, "
            f"`Function`, first call), best of {1 if quick else 5} interleaved rounds. Worst: "
            f"{judge(worst[0], DENSE_TARGET)} on {worst[1]} (the target is Rosenbrock's; here for information).\n\n"
            + table(["function", "n", "tidu build+1st", "casadi build+1st", "ratio", "max rel diff"], rows))


def sparse_section(quick: bool) -> str:
    import casadi as ca

    sizes = (1000, 10_000) if quick else (10_000, 100_000)
    rows, verdicts = [], []
    for name, fn in (("rosenbrock", rosen), ("fd energy", energy)):
        for n in sizes:
            x = np.linspace(-1.2, 1.1, n)
            clear_tidu_caches()
            tf = tidu.hessian(fresh(fn), sparse=True)
            t_tidu, h_tidu = first_call(lambda tf=tf, x=x: lambda: tf(x))

            def build_casadi(name: str = name, n: int = n, x: np.ndarray = x) -> Callable[[], Any]:
                xs, f = casadi_fn(name, n)
                hf = ca.Function("h", [xs], [ca.hessian(f, xs)[0]])
                return lambda: hf(x), hf
            t0 = time.perf_counter()
            call_c, hf = build_casadi()
            h_c = call_c()
            t_c = time.perf_counter() - t0
            per = best_interleaved({"tidu": lambda tf=tf, x=x: tf(x), "casadi": lambda hf=hf, x=x: hf(x)},
                                   rounds=3 if quick else 7, target=0.05)
            ref = sp.csr_array(h_c.sparse())
            diff = float(abs(h_tidu - ref).max())
            scale = float(abs(ref).max())
            b, c = t_tidu / t_c, per["tidu"] / per["casadi"]
            ok_nnz = h_tidu.nnz <= 3 * n
            rows.append([name, n, fmt_time(t_tidu), fmt_time(t_c), f"{b:.2f}x", fmt_time(per["tidu"]),
                         fmt_time(per["casadi"]), f"{c:.2f}x", h_tidu.nnz, ref.nnz, f"{diff / scale:.1e}"])
            verdicts.append(f"{name} n = {n}: build {judge(b, SPARSE_BUILD_TARGET)}, per call "
                            f"{judge(c, SPARSE_CALL_TARGET)}, nnz {'met' if ok_nnz else 'MISSED'} "
                            f"({h_tidu.nnz} <= 3n = {3 * n})")
    return ("### Sparse Hessians (sparse=True) against CasADi\n\n" + "; ".join(verdicts) + ".\n\n"
            + table(["function", "n", "tidu build+1st", "casadi build+1st", "ratio", "tidu per call",
                     "casadi per call", "ratio", "nnz tidu", "nnz casadi", "max rel diff"], rows))


def mlp_section(quick: bool) -> str:
    import casadi as ca

    rng = np.random.default_rng(0)
    d, h, m = 10, 16, 32
    data, target = rng.normal(size=(m, d)), rng.normal(size=m)
    sizes = [h * d, h, h, 1]

    def loss(p: Any, xp: Any = tnp) -> Any:
        w1 = xp.reshape(p[:h * d], (h, d))
        b1, w2, b2 = p[h * d:h * d + h], p[h * d + h:h * d + 2 * h], p[-1]
        hidden = xp.tanh(data @ w1.T + b1)
        return xp.sum((hidden @ w2 + b2 - target) ** 2) / m

    n = sum(sizes)
    p = rng.normal(size=n) * 0.3
    clear_tidu_caches()
    tf = tidu.hessian(fresh(loss))
    t_tidu, h_tidu = first_call(lambda: lambda: tf(p))
    jf = jax.jit(jax.hessian(fresh(lambda p: loss(p, jnp))))
    t_jax, h_jax = first_call(lambda: lambda: jf(p).block_until_ready())
    t0 = time.perf_counter()
    ps = ca.SX.sym("p", n)
    w1 = ca.reshape(ps[:h * d], d, h).T  # row-major like the NumPy reshape
    b1, w2, b2 = ps[h * d:h * d + h], ps[h * d + h:h * d + 2 * h], ps[n - 1]
    hidden = ca.tanh(ca.mtimes(ca.DM(data), w1.T) + ca.repmat(b1.T, m, 1))
    f = ca.sumsqr(ca.mtimes(hidden, w2) + b2 - ca.DM(target)) / m
    hf = ca.Function("h", [ps], [ca.hessian(f, ps)[0]])
    h_c = hf(p)
    t_c = time.perf_counter() - t0
    per = best_interleaved({"tidu": lambda: tf(p), "jax": lambda: jf(p).block_until_ready(), "casadi": lambda: hf(p)},
                           rounds=5 if quick else 11)
    diff = max(float(np.max(np.abs(h_tidu - np.asarray(h_jax)))), float(np.max(np.abs(h_tidu - h_c.full()))))
    return ("### MLP loss Hessian (193 parameters)\n\n"
            f"tidu against jax.jit(jax.hessian): build + first call {t_tidu / t_jax:.2f}x, per call "
            f"{per['tidu'] / per['jax']:.2f}x; against CasADi: {t_tidu / t_c:.2f}x and "
            f"{per['tidu'] / per['casadi']:.2f}x (for information; the targets are Rosenbrock's).\n\n"
            + table(["system", "build+1st", "per call", "max |diff| to tidu"],
                    [["tidu", fmt_time(t_tidu), fmt_time(per["tidu"]), "-"],
                     ["jax.jit(jax.hessian)", fmt_time(t_jax), fmt_time(per["jax"]), f"{diff:.1e}"],
                     ["CasADi SX", fmt_time(t_c), fmt_time(per["casadi"]), ""]]))


def opcount_section() -> str:
    rows = []
    for n in (10, 1000, 2000):
        x = np.linspace(-1.2, 1.1, n)
        ops = tidu.make_graph(tidu.hessian(rosen))(x).ops_after
        jaxpr = jax.make_jaxpr(jax.hessian(lambda x: rosen(x, jnp)))(x)
        rows.append([n, ops, len(jaxpr.jaxpr.eqns)])
    ok = rows[1][1] == rows[2][1] and rows[0][1] <= rows[1][1]
    return ("### Graph size of tidu.hessian against n\n\n"
            "Op count of make_graph(tidu.hessian(rosenbrock)): the same at n = 1000 and 2000, and no more at "
            "n = 10 (where the basis constants, up to 1024 elements, are folded): "
            f"{'met' if ok else 'MISSED'}. JAX's jaxpr equations for comparison.\n\n"
            + table(["n", "tidu ops", "jaxpr eqns"], rows))


def vmap_section(quick: bool) -> str:
    pts = np.random.default_rng(1).normal(size=(1000, 10))
    tv = jax.jit(tidu.to_jax(tidu.vmap(tidu.grad(rosen))))
    jv = jax.jit(jax.vmap(jax.grad(lambda x: rosen(x, jnp))))
    a, b = np.asarray(tv(pts)), np.asarray(jv(pts))
    per = best_interleaved({"tidu": lambda: tv(pts).block_until_ready(), "jax": lambda: jv(pts).block_until_ready()},
                           rounds=5 if quick else 15)
    r = per["tidu"] / per["jax"]
    return ("### vmap of a gradient over 10^3 points, XLA backend\n\n"
            f"jax.jit(tidu.to_jax(tidu.vmap(tidu.grad(f)))) against jax.jit(jax.vmap(jax.grad(f))), per call: "
            f"{judge(r, VMAP_TARGET)}.\n\n"
            + table(["system", "per call", "max |diff|"],
                    [["tidu on XLA", fmt_time(per["tidu"]), f"{float(np.max(np.abs(a - b))):.1e}"],
                     ["jax", fmt_time(per["jax"]), ""]]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    try:
        import casadi  # noqa: F401
    except ImportError:
        raise SystemExit("bench/hessian.py compares with CasADi: pip install -e '.[bench]'") from None
    # warm both libraries (imports, rule compilation, XLA client) outside the timings
    tidu.hessian(rosen)(np.linspace(0, 1, 10))
    tidu.hessian(rosen, sparse=True)(np.linspace(0, 1, 10))
    jax.jit(jax.hessian(lambda x: rosen(x, jnp)))(np.linspace(0, 1, 10)).block_until_ready()
    sections = [dense_section(args.quick), other_dense_section(args.quick), sparse_section(args.quick),
                mlp_section(args.quick), opcount_section(), vmap_section(args.quick)]
    print("## Hessians, sparse Hessians and vmap (bench/hessian.py)\n")
    print("\n\n".join(sections))


if __name__ == "__main__":
    main()
