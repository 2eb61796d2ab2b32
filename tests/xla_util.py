"""Helpers for the XLA tests: build programs through the real pipeline, draw inputs,
run a program on XLA and on the NumPy reference, compare."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from tidu.lowering.compile import Program, compile

from tidu.core.keys import Aval, is_complex
from tidu.ops.reference import evaluate
from tidu.simplify.materialize import materialize_merge
from tidu.trace.fragments import FragmentBuilder, ValRef
from tidu.trace.resolve import resolve

Build = Callable[..., Sequence[ValRef]]

# (rtol, atol) by dtype; XLA differs from NumPy by a few ulp (tanh up to about 6).
TOLERANCE = {
    "float64": (1e-13, 1e-14), "complex128": (1e-13, 1e-14),
    "float32": (2e-5, 1e-6), "complex64": (2e-5, 1e-6),
    "float16": (4e-3, 1e-3), "bfloat16": (3e-2, 1e-2),  # XLA may compute these in float32 and round once
}


def program_of(build: Build, avals: Sequence[Aval], cache: bool = True) -> Program:
    """Program whose inputs ``x0, x1, ...`` have ``avals`` and whose outputs are what
    ``build(builder, *input_refs)`` returns; through resolve, materialize, compile."""
    b = FragmentBuilder()
    refs = [b.input(f"x{i}", a) for i, a in enumerate(avals)]
    outputs = [b.output(r) for r in build(b, *refs)]
    inputs = [b.key_of(r) for r in refs]  # keys, not names: inputs may be unused
    graph = materialize_merge(resolve(b.build()), outputs, inputs=inputs, simplify=False)
    return compile(graph, cache=cache)


def op(b: FragmentBuilder, name: str, *args: ValRef, **attrs: object) -> ValRef:
    return b.add_op(name, list(args), attrs)[0]


def draw(rng: np.random.Generator, aval: Aval, domain: str = "any") -> np.ndarray:
    """Random values of ``aval``: ``any`` (about [-2, 2]), ``positive`` ([0.2, 2.5]),
    ``above_minus_one`` ((-0.8, 2]), ``unit`` ([-0.95, 0.95]), ``above_one`` ([1.05, 3]),
    ``small_int`` (ties for comparisons)."""
    shape, dtype = aval.shape, aval.dtype
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith(("int", "uint")):
        hi = 4 if domain == "small_int" else 50
        lo = 1 if domain == "positive" else 0 if dtype.startswith("uint") else -hi
        return rng.integers(lo, hi, size=shape).astype(dtype)
    lo, hi = {"any": (-2.0, 2.0), "positive": (0.2, 2.5), "above_minus_one": (-0.8, 2.0),
              "unit": (-0.95, 0.95), "above_one": (1.05, 3.0), "small_int": (-2.0, 2.0)}[domain]

    def part() -> np.ndarray:
        if domain == "small_int":
            return rng.integers(-2, 3, size=shape).astype(np.float64)
        return rng.uniform(lo, hi, size=shape)

    if is_complex(dtype):
        re, im = part(), part()
        if domain in ("positive", "above_minus_one"):  # keep clear of branch cuts
            im = im * 0.5
        return (re + 1j * im).astype(dtype)
    return part().astype(dtype)


def reference(program: Program, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The program evaluated op by op with the NumPy semantics (``tidu.ops.reference``)."""
    env = dict(zip(program.input_slots, arrays, strict=True))
    for ins in program.instructions:
        env[ins.outputs[0]] = evaluate(ins.op, [env[s] for s in ins.inputs], ins.attrs)
    return [np.asarray(env[s]) for s in program.output_slots]


def run_both(program: Program, arrays: Sequence[np.ndarray]) -> tuple[list, list]:
    """(XLA results, NumPy reference results) for ``program`` on ``arrays``."""
    from tidu.lowering.xla import run_xla

    return run_xla(program, arrays), reference(program, arrays)


def assert_matches(got: Sequence[np.ndarray], want: Sequence[np.ndarray],
                   program: Program, scale: float | None = None) -> None:
    """Same count, dtypes and shapes as the program's outputs; values within the
    dtype's tolerance (exact for bool and integers; NaNs must match NaNs).
    ``scale`` widens the absolute tolerance to ``atol * scale`` (for random graphs)."""
    assert len(got) == len(want) == len(program.output_slots)
    for i, (g, w, s) in enumerate(zip(got, want, program.output_slots, strict=True)):
        aval = program.slot_avals[s]
        w = np.asarray(w)
        assert g.dtype.name == aval.dtype, f"output {i}: XLA dtype {g.dtype} != {aval.dtype}"
        assert w.dtype.name == aval.dtype, f"output {i}: NumPy dtype {w.dtype} != {aval.dtype}"
        assert g.shape == w.shape == aval.shape, f"output {i}: shapes {g.shape} {w.shape}"
        if aval.dtype not in TOLERANCE:
            np.testing.assert_array_equal(g, w, err_msg=f"output {i}")
            continue
        rtol, atol = TOLERANCE[aval.dtype]
        if scale is not None:
            atol *= max(1.0, scale)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=f"output {i} ({aval})\n{program.listing()}")


def check(build: Build, avals: Sequence[Aval], arrays: Sequence[np.ndarray]) -> Program:
    """Build, run on XLA and NumPy, compare; returns the program."""
    program = program_of(build, avals)
    got, want = run_both(program, arrays)
    assert_matches(got, want, program)
    return program
