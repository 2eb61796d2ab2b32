"""A second function set for bench/simplify.py: seeded random expressions of 3-6
variables, so that the small-function figures do not rest on hand-picked functions.

Each expression is a random tree: leaves are variables and small constants, inner nodes
+, -, *, a division by a positive denominator (1 + t^2), an integer power, and the unary
functions exp, sin, cos, tanh, log(1 + t^2), sqrt(1 + t^2) and the logistic 1 / (1 + exp(-t)).
Domains hold by construction, so every derivative is finite at every point; exp's
argument is squashed through tanh so that values stay moderate. Subtrees are reused with
some probability, as shared subexpressions are in real code. The same seed gives the same
functions (entries as bench/simplify_suite.py's: name, variables, function, point).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

Tree = tuple[Any, ...]  # ("var", i) | ("const", c) | (op, child, ...)

UNARY = ("exp", "sin", "cos", "tanh", "log1sq", "sqrt1sq", "logistic", "neg", "square")
BINARY = ("add", "sub", "mul", "div1sq", "add", "mul")


def _tree(rng: random.Random, n: int, depth: int, pool: list[Tree]) -> Tree:
    if pool and rng.random() < 0.15:  # a shared subexpression
        return rng.choice(pool)
    if depth == 0 or rng.random() < 0.15:
        if rng.random() < 0.8:
            return ("var", rng.randrange(n))
        return ("const", rng.choice((0.5, 1.5, 2.0, 3.0, -1.0)))
    if rng.random() < 0.4:
        node: Tree = (rng.choice(UNARY), _tree(rng, n, depth - 1, pool))
    else:
        node = (rng.choice(BINARY), _tree(rng, n, depth - 1, pool), _tree(rng, n, depth - 1, pool))
    pool.append(node)
    return node


def _evaluate(xp: Any, t: Tree, v: tuple[Any, ...]) -> Any:
    op = t[0]
    if op == "var":
        return v[t[1]]
    if op == "const":
        return t[1]
    a = _evaluate(xp, t[1], v)
    if op == "exp":
        return xp.exp(xp.tanh(a))
    if op == "sin":
        return xp.sin(a)
    if op == "cos":
        return xp.cos(a)
    if op == "tanh":
        return xp.tanh(a)
    if op == "log1sq":
        return xp.log(1.0 + a * a)
    if op == "sqrt1sq":
        return xp.sqrt(1.0 + a * a)
    if op == "logistic":
        return 1.0 / (1.0 + xp.exp(-a))
    if op == "neg":
        return -a
    if op == "square":
        return a * a
    b = _evaluate(xp, t[2], v)
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    assert op == "div1sq"
    return a / (1.0 + b * b)


def _uses_every_variable(t: Tree, n: int) -> bool:
    seen: set[int] = set()
    stack = [t]
    while stack:
        node = stack.pop()
        if node[0] == "var":
            seen.add(node[1])
        elif node[0] != "const":
            stack.extend(node[1:])
    return len(seen) == n


def random_functions(count: int = 20, seed: int = 2026) -> list[tuple[str, int, Callable[..., Any], tuple[float, ...]]]:
    """``count`` entries (name, n, fn(xp, *v), point) with n in 3..6 and depth 4-5."""
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        n = rng.randint(3, 6)
        tree = _tree(rng, n, rng.randint(4, 5), [])
        if not _uses_every_variable(tree, n):
            continue
        point = tuple(round(rng.uniform(-1.0, 1.0), 2) for _ in range(n))
        out.append((f"random{len(out):02d} ({n} vars)", n, lambda xp, *v, t=tree: _evaluate(xp, t, v), point))
    return out


FUNCTIONS = random_functions()
