"""Fingerprint of the graphs tidu builds: op totals and a hash of the printed graphs, per
group. A change meant only to make tidu faster must leave every hash as it was; one that
changes graphs shows here which groups, and whether their op totals went down.

Groups: the functions of bench/simplify_suite.py (gradients and Hessians, exact and real
semantics, each built with ``tidu.make_graph``) and the scalar chain of bench/common.py
(grad, grad(grad), hessian). No timing, no peer: a tool for checking changes, not a
benchmark, so bench/run_all.py does not run it.

    python bench/fingerprint.py [--quick] [--verbose]
"""

from __future__ import annotations

import argparse
import hashlib
from typing import Any

from common import CHAIN_OPS, CHAIN_OPS_QUICK, CHAIN_X, make_chain, table
from simplify import tidu_transform
from simplify_suite import FUNCTIONS

import tidu
import tidu.numpy as tnp

CHAIN_TRANSFORMS = {"grad": tidu.grad, "grad(grad)": lambda f: tidu.grad(tidu.grad(f)), "hessian": tidu.hessian}


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="4 suite functions and a 100-op chain")
    ap.add_argument("--verbose", action="store_true", help="a row per function as well")
    args = ap.parse_args()
    funcs = FUNCTIONS[:4] if args.quick else FUNCTIONS
    ops = CHAIN_OPS_QUICK if args.quick else CHAIN_OPS
    rows: list[list[Any]] = []
    total = hashlib.sha256()
    for sem in ("exact", "real"):
        for hessian in (False, True):
            kind = "Hessians" if hessian else "gradients"
            listings = []
            count = 0
            for name, n, fn, point in funcs:
                graph = tidu.make_graph(tidu_transform(fn, n, hessian), semantics=sem)(*point).graph
                listings.append(str(graph))
                count += graph.op_count
                if args.verbose:
                    rows.append([f"{name}, {kind}", sem, graph.op_count, digest(listings[-1])])
            text = "\n".join(listings)
            total.update(text.encode())
            rows.append([f"suite {kind} ({len(funcs)} functions)", sem, count, digest(text)])
    for name, transform in CHAIN_TRANSFORMS.items():
        graph = tidu.make_graph(transform(make_chain(tnp, ops)))(CHAIN_X).graph
        text = str(graph)
        total.update(text.encode())
        rows.append([f"chain ({ops} ops), {name}", "exact", graph.op_count, digest(text)])
    rows.append(["all of the above", "", "", total.hexdigest()[:16]])
    print(f"## Graph fingerprint ({'quick' if args.quick else 'full'})\n")
    print(table(["graphs", "semantics", "ops", "hash of the listings"], rows))


if __name__ == "__main__":
    main()
