"""Generated programs for build-speed benchmarks: seeded, over many op mixes, written once
for any library whose values support Python's arithmetic operators (tidu.numpy, CasADi SX,
jax.numpy, NumPy).

A program is a sequence of *steps*; each step applies one template (a small expression of
one or two earlier values) and appends its value to a pool. Every template maps values in
[-2, 2] into [-2, 2], so a program of any length evaluates to finite numbers, and each
holds the negations, subtractions, divisions, powers, logs, trig and tanh that real
derivatives contain. A *mix* weights the templates; a *shape* chooses the operands: "long"
from the last few values (a deep chain), "wide" from the whole pool (shared
subexpressions, many uses per value; the first operand is a value no step has used yet).
The output adds up the values no step uses, so every value is live. A "scalar" program's values are scalars drawn from
a few inputs; a "vector" program's are vectors (elementwise steps, plus reductions that
couple the entries), so its Hessian is a dense matrix.

    program = Program("negations", "wide", "scalar", steps=300, seed=0)
    f = program.function(Library.for_tidu())          # f(x) -> scalar
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Library:
    """The elementwise functions and the sum a program uses, for one library."""

    sin: Callable[[Any], Any]
    cos: Callable[[Any], Any]
    exp: Callable[[Any], Any]
    log: Callable[[Any], Any]
    tanh: Callable[[Any], Any]
    sqrt: Callable[[Any], Any]
    sum: Callable[[Any], Any]

    @staticmethod
    def of(module: Any, sum_: Callable[[Any], Any] | None = None) -> Library:
        return Library(module.sin, module.cos, module.exp, module.log, module.tanh, module.sqrt,
                       sum_ or module.sum)


# name -> (number of operands, template); every template maps [-2, 2] into [-2, 2]
TEMPLATES: dict[str, tuple[int, Callable[..., Any]]] = {
    "neg": (1, lambda L, a: -a),
    "sub": (2, lambda L, a, b: 0.5 * (a - b)),
    "negsub": (2, lambda L, a, b: 0.5 * (-a - b)),
    "add": (2, lambda L, a, b: 0.5 * (a + b)),
    "mul": (2, lambda L, a, b: 0.5 * a * b),
    "negmul": (2, lambda L, a, b: -(a * b) * 0.5),
    "div": (2, lambda L, a, b: a / (1.0 + b * b)),
    "recip": (1, lambda L, a: 1.0 / (1.0 + a * a)),
    "square": (1, lambda L, a: 0.5 * a**2),
    "cube": (1, lambda L, a: 0.25 * a**3),
    "sqrt": (1, lambda L, a: L.sqrt(1.0 + a * a) - 1.0),
    "log": (1, lambda L, a: L.log(1.0 + a * a)),
    "exp": (1, lambda L, a: L.exp(-a * a)),
    "expneg": (1, lambda L, a: L.exp(-a) * 0.1),
    "sin": (1, lambda L, a: L.sin(a)),
    "cos": (1, lambda L, a: L.cos(a)),
    "sinmul": (2, lambda L, a, b: L.sin(a) * b * 0.5),
    "tanh": (1, lambda L, a: L.tanh(a)),
    "tanhsub": (2, lambda L, a, b: L.tanh(a - b)),
}
# only in vector programs: couple the entries through a reduction
COUPLING = (2, lambda L, a, b: 0.5 * a + 0.1 * L.tanh(L.sum(b)))

MIXES: dict[str, dict[str, int]] = {
    "negations": {"neg": 3, "sub": 3, "negsub": 2, "negmul": 2, "sin": 1, "expneg": 1},
    "division": {"div": 3, "recip": 2, "neg": 1, "add": 1, "tanh": 1},
    "powers": {"square": 2, "cube": 2, "sqrt": 2, "mul": 1, "sub": 1},
    "logs": {"log": 3, "exp": 2, "mul": 1, "sub": 1},
    "trig": {"sin": 2, "cos": 2, "sinmul": 2, "neg": 1, "mul": 1},
    "tanh": {"tanh": 3, "tanhsub": 2, "mul": 1, "neg": 1},
    "all": {name: 1 for name in TEMPLATES},
}
SHAPES = ("long", "wide")
KINDS = ("scalar", "vector")
SCALAR_INPUTS = 4
VECTOR_SIZE = 16


@dataclass(frozen=True)
class Program:
    mix: str
    shape: str
    kind: str
    steps: int
    seed: int = 0

    @property
    def name(self) -> str:
        return f"{self.kind} {self.mix} {self.shape}"

    @property
    def n_inputs(self) -> int:
        return SCALAR_INPUTS if self.kind == "scalar" else VECTOR_SIZE

    def plan(self) -> tuple[list[tuple[str, tuple[int, ...]]], list[int]]:
        """(template, operand indices into the pool) per step, and the values no step uses
        (the output adds them up: every value is live). The pool starts with the inputs
        (scalar programs) or the input vector and two elementwise functions of it."""
        rng = random.Random(f"{self.kind}/{self.mix}/{self.shape}/{self.steps}/{self.seed}")
        weights = MIXES[self.mix]
        names = sorted(weights)
        w = [weights[n] for n in names]
        pool = SCALAR_INPUTS if self.kind == "scalar" else 3
        steps: list[tuple[str, tuple[int, ...]]] = []
        unused = list(range(pool))
        for i in range(self.steps):
            if self.kind == "vector" and i % 10 == 9:
                name, arity = "coupling", 2
            else:
                name = rng.choices(names, w)[0]
                arity = TEMPLATES[name][0]
            if self.shape == "long":  # the newest value and one of the few before it
                ops = (pool - 1, max(0, pool - 1 - rng.randrange(1, 4)))[:arity]
            else:  # a value no step has used yet, and any value
                ops = (unused[rng.randrange(len(unused))], rng.randrange(pool))[:arity]
            unused = [v for v in unused if v not in ops] + [pool]
            steps.append((name, ops))
            pool += 1
        return steps, unused

    def function(self, L: Library) -> Callable[[Any], Any]:
        """f(x) -> scalar, x: a vector of ``n_inputs`` values in [-2, 2]."""
        plan, last = self.plan()
        kind = self.kind

        def f(x: Any) -> Any:
            pool = [x[i] for i in range(SCALAR_INPUTS)] if kind == "scalar" else [x, L.sin(x), 0.5 * x * x]
            for name, ops in plan:
                template = COUPLING[1] if name == "coupling" else TEMPLATES[name][1]
                pool.append(template(L, *(pool[i] for i in ops)))
            out = pool[last[0]]
            for i in last[1:]:
                out = out - 0.5 * pool[i]
            return out if kind == "scalar" else L.sum(out)

        f.__name__ = self.name.replace(" ", "_")
        return f

    def point(self) -> Any:
        import numpy as np

        return np.linspace(-0.9, 0.8, self.n_inputs)


def family(steps: int, seed: int = 0) -> list[Program]:
    return [Program(mix, shape, kind, steps, seed) for kind in KINDS for mix in MIXES for shape in SHAPES]


__all__ = ["COUPLING", "KINDS", "Library", "MIXES", "Program", "SHAPES", "TEMPLATES", "family"]
