"""tidu's C back end per call, against CasADi's generated C, a CasADi Function and JAX.

Each case is one tidu program, run as ``Program.run([x], backend="c")`` (the C file of
``Program.to_c``, compiled by lowering/c_build.py and called through cffi), against:

- CasADi's C: the same derivative as an ``SX`` expression (``ca.gradient`` /
  ``ca.hessian``), ``casadi.Function.generate`` written to a file, compiled with the same
  compiler and flags as tidu's (``tidu.lowering.c_build.CFLAGS``) and called through cffi
  the same way (input pointer in, fresh output array out; a sparse Hessian is scattered
  into a fresh dense array, as tidu returns the dense one);
- a CasADi ``Function`` call from Python (``f(x)``, then ``.full()`` for the dense array).

Cases: the 1000-op scalar chain of bench/common.py, gradient and Hessian (``tidu.grad``,
``tidu.hessian``), and the dense Rosenbrock Hessian at n = 50 and 1000. One more row: the
MLP-loss Hessian of bench/hessian.py (193 parameters) against ``jax.jit(jax.hessian)``.
Every result is checked against tidu's NumPy back end (``program.eval``). Per call is the
best of interleaved rounds (bench/common.py); "build" is code generation + compilation
(tidu: ``to_c`` + the C compiler, on an empty disk cache; CasADi: ``generate`` + the C
compiler). Targets (issue 29): tidu C per call <= 1.0x each CasADi reference and <= 1.0x
JAX on the MLP Hessian.

    python bench/backends.py [--quick]      (--quick: a 100-op chain, n = 50 and 200)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from common import (
    CHAIN_OPS,
    CHAIN_OPS_QUICK,
    CHAIN_X,
    best_interleaved,
    fmt_time,
    judge,
    make_chain,
    rosenbrock,
    setup_jax,
    table,
)

jax = setup_jax()
import jax.numpy as jnp  # noqa: E402
from tidu.lowering import c_build  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402

TARGET = 1.0


def casadi_c(fn: Any, folder: Path) -> tuple[Callable[[np.ndarray], np.ndarray], float]:
    """CasADi Function ``fn`` as generated C, compiled like tidu's: a call (x -> fresh dense
    output) and the generate + compile time."""
    import cffi

    t0 = time.perf_counter()
    name = fn.name()
    c_file = folder / f"{name}.c"
    fn.generate(str(c_file.name), {"with_header": False})
    os.replace(c_file.name, c_file)
    so = folder / f"{name}.so"
    subprocess.run([c_build.compiler(), *c_build.CFLAGS, "-shared", "-fPIC", "-o", str(so), str(c_file), "-lm"],
                   check=True)
    build = time.perf_counter() - t0
    ffi = cffi.FFI()
    ffi.cdef(f"int {name}(const double** arg, double** res, long long int* iw, double* w, int mem);")
    lib = ffi.dlopen(str(so))
    call = getattr(lib, name)
    sz_arg, sz_res, sz_iw, sz_w = fn.sz_arg(), fn.sz_res(), fn.sz_iw(), fn.sz_w()
    arg, res = ffi.new("double*[]", max(sz_arg, 1)), ffi.new("double*[]", max(sz_res, 1))
    iw, w = ffi.new("long long int[]", max(sz_iw, 1)), ffi.new("double[]", max(sz_w, 1))
    sp = fn.sparsity_out(0)
    shape, nnz = (sp.size1(), sp.size2()), sp.nnz()
    dense = sp.is_dense()
    rows, cols = np.array(sp.row()), np.array(sp.get_col())
    flat = rows * shape[1] + cols  # column-major nonzeros -> row-major positions
    from_buffer, empty, zeros = ffi.from_buffer, np.empty, np.zeros

    def run(x: np.ndarray) -> np.ndarray:
        out = empty(nnz)
        arg[0] = ffi.cast("double *", from_buffer(x))
        res[0] = ffi.cast("double *", from_buffer(out))
        call(arg, res, iw, w, 0)
        if dense:
            return out.reshape(shape[1], shape[0]).T
        full = zeros(shape[0] * shape[1])
        full[flat] = out
        return full.reshape(shape)

    run.keep = (lib, ffi)  # type: ignore[attr-defined]
    return run, build


def tidu_c(program: Any, folder: Path) -> float:
    """to_c + compile time of ``program`` on an empty disk cache (``folder``)."""
    os.environ["TIDU_CACHE_DIR"] = str(folder)
    program._cache.pop("c_source", None)
    program._cache.pop("c_call", None)
    t0 = time.perf_counter()
    program.to_c()
    c_build.c_call(program)
    program._cache["c_call"] = c_build.c_call(program)  # (loaded from the disk cache)
    return time.perf_counter() - t0


def casadi_case(kind: str, n: int, ops: int) -> Any:
    import casadi as ca

    if kind.startswith("chain"):
        x = ca.SX.sym("x")
        y = make_chain(ca, ops)(x)
        out = ca.gradient(y, x) if kind == "chain grad" else ca.hessian(y, x)[0]
    else:
        x = ca.SX.sym("x", n)
        out = ca.hessian(rosenbrock(x, ca_module()), x)[0]
    return ca.Function(kind.replace(" ", "_"), [x], [out])


def ca_module() -> Any:
    """The operations rosenbrock(x, xp) needs, on CasADi SX vectors."""
    import casadi as ca

    class CA:
        @staticmethod
        def sum(v: Any) -> Any:
            return ca.sum1(v)

    return CA


def row(name: str, program: Any, x: np.ndarray, fn: Any, folder: Path, rounds: int) -> tuple[list, list]:
    build = tidu_c(program, folder)
    c_run, c_build_time = casadi_c(fn, folder)
    want = program.eval([x])[0]
    got = program.run([x], backend="c")[0]
    ref_c, ref_py = c_run(x), fn(x).full().reshape(want.shape)
    scale = max(1.0, float(np.max(np.abs(want))))
    diff = max(float(np.max(np.abs(got - want))), float(np.max(np.abs(ref_c.reshape(want.shape) - want))),
               float(np.max(np.abs(ref_py - want)))) / scale
    assert diff < 1e-10, (name, diff)
    per = best_interleaved({"tidu": lambda: program.run([x], backend="c"), "casadi_c": lambda: c_run(x),
                            "casadi_py": lambda: fn(x).full()}, rounds=rounds)
    a, b = per["tidu"] / per["casadi_c"], per["tidu"] / per["casadi_py"]
    cells = [name, fmt_time(per["tidu"]), fmt_time(per["casadi_c"]), f"{a:.2f}x", fmt_time(per["casadi_py"]),
             f"{b:.2f}x", fmt_time(build), fmt_time(c_build_time), f"{diff:.1e}"]
    return cells, [f"{name}: {judge(a, TARGET)} / {judge(b, TARGET)}"]


def mlp_row(folder: Path, rounds: int) -> tuple[list, str]:
    rng = np.random.default_rng(0)
    d, h, m = 10, 16, 32
    data, target = rng.normal(size=(m, d)), rng.normal(size=m)

    def loss(p: Any, xp: Any = tnp) -> Any:
        w1 = xp.reshape(p[:h * d], (h, d))
        b1, w2, b2 = p[h * d:h * d + h], p[h * d + h:h * d + 2 * h], p[-1]
        hidden = xp.tanh(data @ w1.T + b1)
        return xp.sum((hidden @ w2 + b2 - target) ** 2) / m

    p = rng.normal(size=h * d + 2 * h + 1) * 0.3
    program = tidu.make_graph(tidu.hessian(loss))(p).program
    build = tidu_c(program, folder)
    jf = jax.jit(jax.hessian(lambda p: loss(p, jnp)))
    want = program.eval([p])[0]
    diff = max(float(np.max(np.abs(program.run([p], backend="c")[0] - want))),
               float(np.max(np.abs(np.asarray(jf(p)) - want))))
    assert diff < 1e-10, diff
    per = best_interleaved({"tidu": lambda: program.run([p], backend="c"),
                            "jax": lambda: jf(p).block_until_ready()}, rounds=rounds)
    r = per["tidu"] / per["jax"]
    cells = ["MLP-loss Hessian (193 parameters)", fmt_time(per["tidu"]), fmt_time(per["jax"]), f"{r:.2f}x",
             fmt_time(build), f"{diff:.1e}"]
    return cells, f"MLP-loss Hessian against jax.jit(jax.hessian): {judge(r, TARGET)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    try:
        import casadi  # noqa: F401
    except ImportError:
        raise SystemExit("bench/backends.py compares with CasADi: pip install -e '.[bench]'") from None
    if c_build.compiler_or_none() is None:
        raise SystemExit(f"bench/backends.py needs a C compiler: {c_build.INSTALL_HINT}")
    ops = CHAIN_OPS_QUICK if args.quick else CHAIN_OPS
    sizes = (50, 200) if args.quick else (50, 1000)
    rounds = 5 if args.quick else 11
    rows, verdicts = [], []
    with tempfile.TemporaryDirectory() as tmp:
        x0 = np.array(CHAIN_X)
        for kind, transform in (("chain grad", tidu.grad), ("chain hessian", tidu.hessian)):
            program = tidu.make_graph(transform(make_chain(tnp, ops)))(x0).program
            folder = Path(tmp) / kind.replace(" ", "_")
            folder.mkdir()
            cells, v = row(f"{ops}-op chain, {kind.split()[1]}", program, x0, casadi_case(kind, 0, ops), folder,
                           rounds)
            rows.append(cells)
            verdicts += v
        for n in sizes:
            x = np.linspace(-1.2, 1.1, n)
            program = tidu.make_graph(tidu.hessian(lambda x: rosenbrock(x, tnp)))(x).program
            folder = Path(tmp) / f"rosen{n}"
            folder.mkdir()
            cells, v = row(f"Rosenbrock Hessian, n = {n}", program, x, casadi_case("rosenbrock", n, 0), folder,
                           rounds)
            rows.append(cells)
            verdicts += v
        folder = Path(tmp) / "mlp"
        folder.mkdir()
        mlp_cells, mlp_verdict = mlp_row(folder, rounds)
    print("## C back end per call (bench/backends.py)\n")
    print("tidu `Program.run(backend=\"c\")` against CasADi's generated C compiled with the same flags "
          f"(`{' '.join(c_build.CFLAGS)}`) and against a CasADi `Function` called from Python; every output a "
          "fresh dense NumPy array, checked against tidu's NumPy back end (max |diff| relative to the largest "
          "value). Build: code generation + C compile. Targets: tidu per call <= 1.0x each reference: "
          + "; ".join(verdicts) + f". {mlp_verdict}.\n")
    print(table(["case", "tidu C", "CasADi C", "ratio", "CasADi Function", "ratio", "tidu build",
                 "CasADi build", "max rel diff"], rows))
    print()
    print(table(["case (against JAX)", "tidu C", "jax.jit(jax.hessian)", "ratio", "tidu build", "max |diff|"],
                [mlp_cells]))


if __name__ == "__main__":
    main()
