"""Op counts of tidu's programs against the equations of JAX's jaxprs.

For the scalar chain of bench/common.py (1000 ops) and the Rosenbrock function (n = 100):
the primal, the gradient and a Hessian-vector product (forward over reverse). tidu: ops
of the graph after materialize_merge (``tidu.make_graph``; constants not counted). JAX:
equations of ``jax.make_jaxpr(T(f))``, counted recursively into sub-jaxprs (a pjit or
closed_call equation counts as the equations inside it), and for information the same
count after JAX's dead-code elimination (make_jaxpr does not remove dead equations).
No timing.

    python bench/opcounts.py [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np
from common import CHAIN_OPS, CHAIN_OPS_QUICK, CHAIN_X, judge, make_chain, make_rosenbrock, setup_jax, table, verdict

jax = setup_jax()
import jax.numpy as jnp  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402

GRAD_RATIO = 3.0  # gradient ops at most 3x the primal's


def count_eqns(jaxpr) -> int:
    """Equations of a (closed) jaxpr, recursing into sub-jaxprs held in equation params."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    total = 0
    for eqn in jaxpr.eqns:
        subs = [p for v in eqn.params.values() for p in (v if isinstance(v, tuple | list) else [v])
                if hasattr(p, "eqns") or hasattr(getattr(p, "jaxpr", None), "eqns")]
        total += sum(count_eqns(s) for s in subs) if subs else 1
    return total


def count_eqns_dce(closed) -> int:
    """Equations that an output depends on (dead-code elimination over the public jaxpr
    data: a backward pass over the equations, keeping those whose results are used)."""
    jaxpr = getattr(closed, "jaxpr", closed)
    live = {id(v) for v in jaxpr.outvars}
    kept = 0
    for eqn in reversed(jaxpr.eqns):
        if any(id(v) in live for v in eqn.outvars):
            subs = [p for v in eqn.params.values() for p in (v if isinstance(v, tuple | list) else [v])
                    if hasattr(p, "eqns") or hasattr(getattr(p, "jaxpr", None), "eqns")]
            kept += sum(count_eqns(s) for s in subs) if subs else 1
            live |= {id(v) for v in eqn.invars}
    return kept


def tidu_hvp(f):
    return lambda x, v: tidu.hvp(f, (x,), (v,))


def jax_hvp(f):
    return lambda x, v: jax.jvp(jax.grad(f), (x,), (v,))[1]


def counts(name: str, f_tidu, f_jax, x) -> list[list]:
    rows = []
    primal = None
    for kind, t, j, args in (("primal", f_tidu, f_jax, (x,)),
                             ("gradient", tidu.grad(f_tidu), jax.grad(f_jax), (x,)),
                             ("HVP", tidu_hvp(f_tidu), jax_hvp(f_jax), (x, x))):
        ops = tidu.make_graph(t)(*args).ops_after
        closed = jax.make_jaxpr(j)(*args)
        eqns, dce = count_eqns(closed), count_eqns_dce(closed)
        primal = primal or ops
        ratio = ops / primal
        target = verdict(ratio <= GRAD_RATIO) if kind == "gradient" else "-"
        fewer = verdict(ops < eqns) if kind != "primal" else "-"
        rows.append([name, kind, ops, f"{ratio:.2f}", target, eqns, dce, f"{ops / eqns:.2f}", fewer])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="100-op chain, Rosenbrock n = 10")
    args = ap.parse_args()
    ops, n = (CHAIN_OPS_QUICK, 10) if args.quick else (CHAIN_OPS, 100)
    rows = counts(f"chain ({ops} ops)", make_chain(tnp, ops), make_chain(jnp, ops), CHAIN_X)
    rows += counts(f"Rosenbrock n={n}", make_rosenbrock(tnp), make_rosenbrock(jnp), np.linspace(-1, 1, n))
    grads = [r for r in rows if r[1] == "gradient"]
    derived = [r for r in rows if r[1] != "primal"]
    worst_grad = max(float(r[3]) for r in grads)
    worst_jax = max(float(r[7]) for r in derived)
    print("## Op counts after materialize_merge against JAX's jaxpr\n")
    print("Ops of tidu's graph after materialize_merge (constants not counted) for the primal, "
          "gradient and Hessian-vector product (forward over reverse), against the equations "
          "of `jax.make_jaxpr` of the same functions counted through sub-jaxprs (and after "
          "JAX's dead-code elimination, for information). Targets: gradient/primal ≤ "
          f"{GRAD_RATIO:.0f}: worst case {judge(worst_grad, GRAD_RATIO, '{:.2f}')}; fewer ops "
          f"than JAX's jaxpr for every derivative: worst tidu/JAX {judge(worst_jax, 1.0)} "
          "(strictly fewer needed).\n")
    print(table(["function", "program", "tidu ops", "/ primal", f"target <= {GRAD_RATIO:.0f}",
                 "JAX eqns", "JAX eqns after DCE", "tidu/JAX", "fewer than JAX"], rows))


if __name__ == "__main__":
    main()
