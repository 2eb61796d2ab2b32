"""Evaluation speed of compiled tidu programs against hand-written NumPy and jax.jit.

Cases: the gradient of sum(exp(a*x)) in x (n = 10^3 and 10^6) and the Hessian of the
scalar chain of bench/common.py. Timed is one call on inputs already in host memory,
outputs back as NumPy arrays: ``Program.eval`` (generated NumPy),
``Program.run(backend="xla")`` (the program's StableHLO compiled by XLA; the compile is
done once beforehand and excluded), the hand-written NumPy code, and a ``jax.jit``
function (compiled beforehand) whose result is turned into a NumPy array with
``np.asarray``, as tidu's is. ``jax.jit (ready)`` is the same call timed up to
``block_until_ready`` (a JAX array left for the caller), shown for information. Times
are the best of 25 interleaved rounds (every contender runs about 20 ms of calls per
round, in rotating order), so that drifts in machine speed fall on all of them alike.
XLA compile times (once, not in the eval times) are shown for information.

Second table: the per-instruction cost of ``Program.eval`` on scalar graphs (the chain,
its gradient and its Hessian), i.e. eval time / number of instructions.

Third table: a cached transformed call on small functions (``tidu.grad(f)(x)`` with x of
4 elements, the issue's case; another shape; value_and_grad; hessian) against
``jax.jit`` of the same JAX transform with its result through ``np.asarray``: what one
call costs when the arrays are tiny and the call's own overhead is most of it.

    python bench/eval.py [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from common import (
    CHAIN_OPS,
    CHAIN_OPS_QUICK,
    CHAIN_X,
    best_auto,
    best_interleaved,
    chain,
    chain_d2,
    fmt_time,
    judge,
    make_chain,
    setup_jax,
    sum_exp,
    table,
    verdict,
)

jax = setup_jax()
import jax.numpy as jnp  # noqa: E402
from tidu.lowering.numpy import exact_call  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402

XLA_TARGET = 1.1  # tidu on XLA within 1.1x of jax.jit
SMALL_TARGET = 1.0  # a cached tidu.grad call on a small function within 1.0x of jax.jit(jax.grad)
DISPATCH_TARGET = 20e-6  # seconds of a cached call that are not the program itself
INSTR_TARGET = 1e-6  # seconds per instruction of Program.eval on scalar graphs


def seconds(fn) -> float:
    """Wall time of one call (used for the one-off XLA compiles)."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def case(name, tidu_fn, jax_fn, hand, args, expect):
    """One row: tidu NumPy, tidu XLA, hand NumPy, jax.jit; every result checked first."""
    program = tidu.make_graph(tidu_fn)(*args).program
    xla_compile = seconds(lambda: program.run(args, backend="xla"))
    jitted = jax.jit(jax_fn)
    jax_compile = seconds(lambda: jitted(*args).block_until_ready())
    for got in (program.eval(args)[0], program.run(args, backend="xla")[0], hand(*args),
                np.asarray(jitted(*args))):
        np.testing.assert_allclose(got, expect, rtol=1e-12)
    t = best_interleaved(rounds=25, fns={
        "numpy": lambda: program.eval(args),
        "xla": lambda: program.run(args, backend="xla"),
        "hand": lambda: hand(*args),
        "jax": lambda: np.asarray(jitted(*args)),
        "jax_ready": lambda: jitted(*args).block_until_ready(),
    })
    ratio = t["xla"] / t["jax"]
    return {"row": [name, len(program.instructions), fmt_time(t["numpy"]), fmt_time(t["xla"]),
                    fmt_time(t["hand"]), fmt_time(t["jax"]), fmt_time(t["jax_ready"]),
                    f"{ratio:.2f}x", verdict(ratio <= XLA_TARGET), f"{t['xla'] / t['jax_ready']:.2f}x",
                    f"{xla_compile:.2f} s", f"{jax_compile:.2f} s"],
            "ratio": ratio}


def eval_table(quick: bool) -> tuple[str, list[dict]]:
    rng = np.random.default_rng(0)
    results = []
    for e in (3, 4 if quick else 6):
        x, a = rng.uniform(-1, 1, 10**e), rng.uniform(0.5, 2, 10**e)
        results.append(case(
            f"grad sum(exp(a*x)), n=10^{e}",
            tidu.grad(lambda x, a: sum_exp(x, a, tnp)), jax.grad(lambda x, a: sum_exp(x, a, jnp)),
            lambda x, a: a * np.exp(a * x), (x, a), a * np.exp(a * x)))
    ops = CHAIN_OPS_QUICK if quick else CHAIN_OPS
    results.append(case(
        f"Hessian of the {ops}-op chain",
        tidu.hessian(make_chain(tnp, ops)), jax.hessian(make_chain(jnp, ops)),
        lambda x: chain_d2(x, ops)[2], (CHAIN_X,), chain_d2(CHAIN_X, ops)[2]))
    head = ["case", "instr", "tidu NumPy", "tidu XLA", "hand NumPy", "jax.jit", "jax.jit (ready)",
            "XLA/jax", f"target <= {XLA_TARGET}x", "XLA/jax (ready)", "XLA compile tidu", "XLA compile jax"]
    return table(head, [r["row"] for r in results]), results


def instr_table(quick: bool) -> tuple[str, list[float]]:
    ops = CHAIN_OPS_QUICK if quick else CHAIN_OPS
    f = make_chain(tnp, ops)
    rows, per = [], []
    for name, fn in (("chain", f), ("grad", tidu.grad(f)), ("Hessian", tidu.hessian(f))):
        program = tidu.make_graph(fn)(CHAIN_X).program
        n = len(program.instructions)
        t = best_auto(lambda p=program: p.eval([CHAIN_X]))
        per.append(t / n)
        rows.append([f"{name} ({ops}-op chain)", n, fmt_time(t), f"{t / n * 1e9:.0f} ns",
                     verdict(t / n <= INSTR_TARGET)])
    tiny = tidu.make_graph(lambda x: x * x)(CHAIN_X).program
    rows.append(["x*x (fixed call cost)", len(tiny.instructions),
                 fmt_time(best_auto(lambda: tiny.eval([CHAIN_X]))), "-", "-"])
    return table(["scalar graph", "instr", "Program.eval", "per instruction", "target <= 1 µs"], rows), per


def small_f(xp):
    return lambda x: xp.sum(xp.sin(x) * x) + x[0] * x[1]


def small_g(xp):
    return lambda x, y: xp.sum(xp.tanh(x * y) + xp.cos(x))


def to_numpy(result):
    """A JAX result (an array or a tuple of them) as NumPy arrays, as tidu returns them."""
    return np.asarray(result) if isinstance(result, jax.Array) else tuple(np.asarray(r) for r in result)


def small_table(quick: bool) -> tuple[str, list[dict]]:
    """Cached calls of small transformed functions, tidu against jax.jit, interleaved."""
    rng = np.random.default_rng(1)
    x4, a, b = rng.uniform(-1, 1, 4), rng.uniform(-1, 1, (3, 3)), rng.uniform(-1, 1, (3, 3))
    cases = [
        ("grad, 4 variables", tidu.grad(small_f(tnp)), jax.grad(small_f(jnp)), (x4,)),
        ("grad of 2 arguments, 3x3 each", tidu.grad(small_g(tnp), argnums=(0, 1)),
         jax.grad(small_g(jnp), argnums=(0, 1)), (a, b)),
        ("value_and_grad, 4 variables", tidu.value_and_grad(small_f(tnp)), jax.value_and_grad(small_f(jnp)), (x4,)),
        ("hessian, 4 variables", tidu.hessian(small_f(tnp)), jax.hessian(small_f(jnp)), (x4,)),
    ]
    rows, results = [], []
    for name, tf, jf, args in cases:
        jitted = jax.jit(jf)
        got, want = tf(*args), to_numpy(jitted(*args))
        for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want), strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
        run = exact_call(tidu.make_graph(tf)(*args).program)  # the program alone, arguments known exact
        t = best_interleaved(rounds=9 if quick else 25, fns={
            "tidu": lambda tf=tf, args=args: tf(*args),
            "program": lambda run=run, args=args: run(*args),
            "jax": lambda jitted=jitted, args=args: to_numpy(jitted(*args)),
        })
        ratio, dispatch = t["tidu"] / t["jax"], t["tidu"] - t["program"]
        rows.append([name, fmt_time(t["tidu"]), fmt_time(t["program"]), fmt_time(dispatch), fmt_time(t["jax"]),
                     f"{ratio:.2f}x", verdict(ratio <= SMALL_TARGET)])
        results.append({"ratio": ratio, "dispatch": dispatch})
    head = ["small function", "tidu call", "of which the program", "checks and dispatch", "jax.jit",
            "tidu/jax", f"target <= {SMALL_TARGET}x"]
    return table(head, rows), results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="n = 10^3 and 10^4, 100-op chain")
    args = ap.parse_args()
    assert np.isclose(float(chain(np.float64(CHAIN_X), np)), chain_d2(CHAIN_X)[0])
    text, results = eval_table(args.quick)
    worst = max(r["ratio"] for r in results)
    print("## Evaluation time per call\n")
    print("One call with inputs in host memory and array outputs: tidu's generated NumPy "
          "(`Program.eval`), tidu's StableHLO on XLA (`Program.run(..., backend=\"xla\")`), "
          "hand-written NumPy (Python floats and `math` for the chain) and `jax.jit` "
          "(NumPy inputs, result through `np.asarray` as tidu's is; \"ready\" is the same "
          "call timed up to `block_until_ready`, for information); best of 25 interleaved "
          "rounds of ~20 ms per contender after a warm-up, XLA compiles excluded (shown once "
          "for information). "
          f"Target tidu on XLA within {XLA_TARGET}x of jax.jit: worst case "
          f"{judge(worst, XLA_TARGET)}.\n")
    print(text)
    text, per = instr_table(args.quick)
    print("\n## Per-instruction cost of tidu's NumPy eval on scalar graphs\n")
    print("`Program.eval` time (best of 5 rounds of ~50 ms after a warm-up) divided by the number of instructions "
          "of the scalar chain, its gradient and its Hessian; the fixed cost of one call is "
          "shown by a one-instruction program. Target at most 1 µs per instruction: worst case "
          f"{judge(max(per) * 1e9, INSTR_TARGET * 1e9, '{:.0f} ns')}.\n")
    print(text)
    text, results = small_table(args.quick)
    print("\n## Cached transformed calls on small functions\n")
    print("One call of a transformed function already traced and compiled for its arguments "
          "(`tidu.grad(f)(x)`: checks, dispatch, the generated NumPy program), against "
          "`jax.jit` of the same JAX transform with its result through `np.asarray` (a tuple "
          "element by element); the program alone (the generated function with warnings off and "
          "its outputs checked: `tidu.lowering.numpy.exact_call`) and the rest of the call "
          "(checks and dispatch) are shown apart. Best of 25 interleaved rounds. "
          f"Target on the issue's case (grad, 4 variables) tidu within {SMALL_TARGET}x of jax.jit: "
          f"{judge(results[0]['ratio'], SMALL_TARGET)}; its checks and dispatch within "
          f"{DISPATCH_TARGET * 1e6:.0f} µs: "
          f"{judge(results[0]['dispatch'] * 1e6, DISPATCH_TARGET * 1e6, '{:.1f} µs')}.\n")
    print(text)


if __name__ == "__main__":
    main()
