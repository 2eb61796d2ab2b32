"""Property-based tests over random expression graphs (hypothesis).

Graphs come from the StableHLO tests' generator (elementwise chains with fan-out,
broadcasting, reductions, dot_general, constants, real and complex), extended here with
a few more primitives (exp, log, sqrt, rsqrt, pow, expm1, log1p, maximum, minimum,
select, reshape, transpose, slice, pad, concatenate, reduce_prod, convert, sign) whose
operands are kept inside their smooth domains. Properties:

- the JVP matches a five-point finite difference;
- the transpose satisfies Re<ct, J t> = Re<J^H ct, t>;
- the four second-order modes (FoF, FoR, RoF, RoR) agree;
- NumPy and XLA execution agree;
- ``simplify=True`` and ``simplify=False`` agree;
- the sparsity pattern read from the graph holds every nonzero of the Jacobian.

Profiles (tests/conftest.py): ``ci`` (default; derandomized) and ``slow``
(``HYPOTHESIS_PROFILE=slow``). See docs/verification.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from adutil import derivative_chain
from hypothesis import given, note
from hypothesis import strategies as st
from test_stablehlo import fill, random_graph, squash
from xla_util import op

import tidu
from tidu import FragmentBuilder, InputKey, ValueKey
from tidu.core.keys import Aval, is_complex, real_dtype

DTYPES = ("float64", "complex128")
EXTRAS = ("exp", "log", "sqrt", "rsqrt", "pow", "expm1", "log1p", "maximum", "minimum", "select",
          "reshape", "transpose", "slice", "pad", "concatenate", "reduce_prod", "convert", "sign", "dot")


# --- graphs ---------------------------------------------------------------------------------


def coerce(b: FragmentBuilder, w, like):
    """``w`` with the aval of ``like``: converted, and summed then broadcast if shapes differ."""
    have, want = b.aval(w), b.aval(like)
    if have.dtype != want.dtype:
        w = op(b, "convert", w, dtype=want.dtype)
    if have.shape != want.shape:
        total = op(b, "reduce_sum", w, axes=tuple(range(len(have.shape))))
        w = op(b, "broadcast_in_dim", total, shape=want.shape, dims=())
    return w


def shifted(b: FragmentBuilder, v, c: float):
    """c + v/(1 + |v|): real part within (c - 1, c + 1), away from 0 for c >= 1.5."""
    s = squash(b, v, b.aval(v).dtype)
    return op(b, "add", fill(b, s, c, b.aval(s).dtype), s)


def extra_node(b: FragmentBuilder, kind: str, v, w):
    """One more primitive applied to pool values ``v`` (and ``w``), in its smooth domain."""
    av = b.aval(v)
    dt, r = av.dtype, av.ndim
    cplx = is_complex(dt)
    if kind in ("exp", "expm1"):
        return op(b, kind, squash(b, v, dt))
    if kind in ("log", "sqrt", "rsqrt"):
        return op(b, kind, shifted(b, v, 1.5))
    if kind == "log1p":
        return op(b, "log1p", op(b, "mul", fill(b, v, 0.5, dt), squash(b, v, dt)))
    if kind == "pow":
        return op(b, "pow", shifted(b, v, 1.5), coerce(b, squash(b, w, b.aval(w).dtype), v))
    if kind in ("maximum", "minimum", "sign"):
        if cplx:
            return op(b, "mul", op(b, "conj", v), coerce(b, w, v))
        if kind == "sign":
            return op(b, "mul", op(b, "sign", v), coerce(b, w, v))
        return op(b, kind, v, coerce(b, w, v))
    if kind == "select":
        re = op(b, "real", v)
        pred = op(b, "compare", re, fill(b, re, 0.0, real_dtype(dt)), direction="GT")
        return op(b, "select", pred, v, coerce(b, w, v))
    if kind == "reshape":
        return op(b, "reshape", v, shape=av.shape[::-1] if r > 1 else (av.size, 1))
    if kind == "transpose":
        return op(b, "transpose", v, perm=tuple(reversed(range(r))))
    if kind == "slice":
        return op(b, "slice", v, start=(0,) * r, limit=av.shape, strides=(2,) * r)
    if kind == "pad":
        value = b.constant(np.asarray(0.25, dt))
        return op(b, "pad", v, value, low=(1,) * r, high=(0,) * r, interior=(1,) * r)
    if kind == "concatenate":
        v = v if r else op(b, "reshape", v, shape=(1,))
        return op(b, "concatenate", v, coerce(b, w, v), axis=0)
    if kind == "reduce_prod":
        return op(b, "reduce_prod", shifted(b, v, 1.5), axes=tuple(range(r)))
    if kind == "convert":
        return op(b, "convert", v, dtype="float64" if cplx else "complex128")
    assert kind == "dot"
    return op(b, "dot_general", v, coerce(b, w, v), lhs_contract=tuple(range(r)), rhs_contract=tuple(range(r)),
              lhs_batch=(), rhs_batch=())


@dataclass
class Case:
    """A random graph: its fragment, input and output keys, and input values."""

    frag: tidu.Fragment
    inputs: list[ValueKey]
    outputs: list[ValueKey]
    values: dict[InputKey, np.ndarray]
    rng: np.random.Generator
    wrt: ValueKey | None = None  # the input a scalar case is differentiated twice in

    def draw(self, aval: Aval) -> np.ndarray:
        """Values in [-1, 1] (both parts, for complex)."""
        x = self.rng.uniform(-1, 1, aval.shape)
        if is_complex(aval.dtype):
            x = x + 1j * self.rng.uniform(-1, 1, aval.shape)
        return np.asarray(x, dtype=aval.dtype)


def make_case(dtype: str, seed: int, n_ops: int, extras: list[tuple[str, int, int]], scalar_wrt: int | None = None
              ) -> Case:
    rng = np.random.default_rng(seed)
    build, avals = random_graph(rng, dtype, n_ops)
    b = FragmentBuilder("G")
    refs = [b.input(f"x{i}", a) for i, a in enumerate(avals)]
    pool = [*refs, *build(b, *refs)]
    outs = pool[len(refs):]
    for kind, i, j in extras:
        outs.append(extra_node(b, kind, pool[i % len(pool)], pool[j % len(pool)]))
        pool.append(outs[-1])
    if scalar_wrt is not None:  # one real scalar: sum of real parts, plus sum(re(x*x)) of input wrt
        x = refs[scalar_wrt]
        terms = [*outs, op(b, "mul", x, x)]
        parts = [op(b, "reduce_sum", op(b, "real", t), axes=tuple(range(b.aval(t).ndim))) for t in terms]
        total = parts[0]
        for p in parts[1:]:
            total = op(b, "add", total, coerce(b, p, total))
        outs = [total]
    out_keys = [b.output(o) for o in outs]
    inputs = [b.key_of(r) for r in refs]
    case = Case(b.build(), inputs, out_keys, {}, rng, None if scalar_wrt is None else inputs[scalar_wrt])
    case.values = {k.input: case.draw(k.aval) for k in case.inputs}
    note(f"dtype={dtype} seed={seed} n_ops={n_ops} extras={extras}\n{case.frag.listing()}")
    return case


extras_st = st.lists(st.tuples(st.sampled_from(EXTRAS), st.integers(0, 63), st.integers(0, 63)), max_size=4)


@st.composite
def cases(draw, scalar: bool = False) -> Case:
    dtype = draw(st.sampled_from(DTYPES))
    seed = draw(st.integers(0, 2**32 - 1))
    n_ops = draw(st.integers(1, 20))
    extras = draw(extras_st)
    wrt = draw(st.integers(0, 3)) if scalar else None
    return make_case(dtype, seed, n_ops, extras, wrt)


# --- running -------------------------------------------------------------------------------


def run(frags, outputs, feed, *, simplify: bool = False, backend: str = "numpy") -> list[np.ndarray]:
    g = tidu.materialize_merge(tidu.resolve(frags), list(outputs), simplify=simplify)
    return tidu.compile(g).run({k: feed[k] for k in g.input_keys}, backend=backend)


def inner(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.real(np.sum(np.conj(a) * b)))


def scale_of(arrays) -> float:
    return max([float(np.max(np.abs(a), initial=0.0)) for a in arrays] + [1.0])


def assert_close(got, want, rtol: float, what: str) -> None:
    """Elementwise within rtol * max(|want|, scale of the whole output); nan matches nan."""
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale_of([w]), equal_nan=True, err_msg=what)


# --- properties ------------------------------------------------------------------------------


@given(cases())
def test_jvp_matches_five_point_differences(case: Case) -> None:
    lin = tidu.passes.linearize(tidu.resolve(case.frag), case.outputs, case.inputs)
    tangents = {k.input: case.draw(k.aval) for k in case.inputs}
    feed = dict(case.values)
    for (ikey, ref) in lin.tangent_inputs:
        feed[lin.key(ref).input] = tangents[ikey]
    present = [k for k in lin.output_keys if k is not None]
    jvp = iter(run([lin.fragment], present, feed) if present else [])
    got = [np.zeros(o.aval.shape, o.aval.dtype) if k is None else next(jvp)
           for o, k in zip(case.outputs, lin.output_keys, strict=True)]

    def f(h: float) -> list[np.ndarray]:
        return run([case.frag], case.outputs, {k: v + h * tangents[k] for k, v in case.values.items()})

    def five_point(h: float) -> list[np.ndarray]:
        a, b, c, d = f(2 * h), f(h), f(-h), f(-2 * h)
        return [(-a_ + 8 * b_ - 8 * c_ + d_) / (12 * h) for a_, b_, c_, d_ in zip(a, b, c, d, strict=True)]

    checked = 0
    for g, fd1, fd2 in zip(got, five_point(1e-3), five_point(5e-4), strict=True):
        scale = 1 + np.abs(fd2)
        smooth = np.abs(fd1 - fd2) <= 1e-6 * scale  # a kink or a pole within 2h: left out
        checked += int(np.sum(smooth))
        np.testing.assert_array_less(np.abs(g - fd2)[smooth], 1e-6 * scale[smooth] + 1e-300)
    note(f"{checked} output elements checked")


@given(cases())
def test_transpose_satisfies_the_adjoint_identity(case: Case) -> None:
    lin = tidu.passes.linearize(tidu.resolve(case.frag), case.outputs, case.inputs)
    if all(k is None for k in lin.output_keys):
        return  # constant outputs: nothing flows (linearize returned no tangents)
    tr = tidu.passes.linear_transpose(lin)
    t_in = {lin.key(r).input: case.draw(lin.key(r).aval) for _, r in lin.tangent_inputs}
    present = [k for k in lin.output_keys if k is not None]
    jt = run([lin.fragment], present, {**case.values, **t_in})
    cts = {seed: case.draw(k.aval) for (seed, _), k in zip(tr.tangent_inputs, present, strict=True)}
    back_keys = [k for k in tr.output_keys if k is not None]
    back = run([tr.fragment], back_keys, {**case.values, **cts}) if back_keys else []
    lhs = sum(inner(c, j) for c, j in zip(cts.values(), jt, strict=True))
    got = iter(back)
    rhs = sum(inner(next(got), t_in[lin.key(r).input])
              for (_, r), k in zip(lin.tangent_inputs, tr.output_keys, strict=True) if k is not None)
    terms = sum(float(np.sum(np.abs(c) * np.abs(j))) for c, j in zip(cts.values(), jt, strict=True))
    assert lhs == pytest.approx(rhs, rel=1e-9, abs=1e-12 * (1 + terms))


MODES = {"FoF": "FF", "FoR": "RF", "RoF": "FR", "RoR": "RR"}  # outermost first; passes applied right to left


@given(cases(scalar=True))
def test_second_order_modes_agree(case: Case) -> None:
    (g,) = case.outputs
    x = case.wrt
    assert x is not None
    values = {str(k): v for k, v in case.values.items()}
    result = {}
    for name, passes in MODES.items():
        frag, out = derivative_chain(case.frag, g, str(x.input), passes)
        g2 = tidu.materialize_merge(tidu.resolve([frag]), [out], simplify=False)
        feed = {k: values[str(k)] if str(k) in values else np.ones(g2.nodes[i].aval.shape, g2.nodes[i].aval.dtype)
                for i, k in zip(g2.inputs, g2.input_keys, strict=True)}
        (result[name],) = tidu.compile(g2).eval(feed)
    hv = result["RoF"]  # H 1 (real seeds), shape of x
    assert hv.shape == x.aval.shape and result["FoF"].shape == ()
    assert_close([result["FoR"], result["RoR"]], [hv, hv], 1e-9, "FoR/RoR vs RoF")
    assert_close([np.real(result["FoF"])], [np.real(np.sum(hv))], 1e-9, "FoF vs sum(RoF)")


@pytest.mark.slow  # an XLA compile per example
@given(cases())
def test_numpy_and_xla_agree(case: Case) -> None:
    pytest.importorskip("jax")
    lin = tidu.passes.linearize(tidu.resolve(case.frag), case.outputs, case.inputs)
    feed = dict(case.values)
    feed.update({lin.key(r).input: case.draw(lin.key(r).aval) for _, r in lin.tangent_inputs})
    outputs = case.outputs + [k for k in lin.output_keys if k is not None]
    g = tidu.materialize_merge(tidu.resolve([lin.fragment]), outputs, simplify=False)
    prog = tidu.compile(g)
    args = {k: feed[k] for k in g.input_keys}
    assert_close(prog.run(args, backend="xla"), prog.eval(args), 1e-12, "XLA vs NumPy")


@given(cases())
def test_simplify_agrees_with_plain_materialize(case: Case) -> None:
    lin = tidu.passes.linearize(tidu.resolve(case.frag), case.outputs, case.inputs)
    if all(k is None for k in lin.output_keys):
        return
    tr = tidu.passes.linear_transpose(lin)
    outputs = case.outputs + [k for k in tr.output_keys if k is not None]
    feed = dict(case.values)
    feed.update({seed: case.draw(tr.key(r).aval) for seed, r in tr.tangent_inputs})
    plain = run([tr.fragment], outputs, feed, simplify=False)
    simple = run([tr.fragment], outputs, feed, simplify=True)
    assert_close(simple, plain, 1e-12, "simplify=True vs simplify=False")


@given(cases())
def test_real_semantics_agrees_with_exact(case: Case) -> None:
    """What the real rewrites cost in accuracy (docs/rules.md, 'Two semantics'): on random
    finite inputs their results stay within 1e-12 of the exact ones, relative to the
    output's scale."""
    lin = tidu.passes.linearize(tidu.resolve(case.frag), case.outputs, case.inputs)
    if all(k is None for k in lin.output_keys):
        return
    tr = tidu.passes.linear_transpose(lin)
    outputs = case.outputs + [k for k in tr.output_keys if k is not None]
    feed = dict(case.values)
    feed.update({seed: case.draw(tr.key(r).aval) for seed, r in tr.tangent_inputs})
    exact = run([tr.fragment], outputs, feed, simplify=True)
    g = tidu.materialize_merge(tidu.resolve([tr.fragment]), list(outputs), semantics="real")
    real = tidu.compile(g).run({k: feed[k] for k in g.input_keys})
    assert_close(real, exact, 1e-12, "semantics='real' vs 'exact'")


@given(cases(), st.integers(0, 3))
def test_sparsity_pattern_holds_every_nonzero_of_the_jacobian(case: Case, which: int) -> None:
    """tidu.transforms.sparsity.graph_pattern is a superset of the true pattern: every output element
    whose JVP along a basis direction (real and, for complex inputs, imaginary) of one
    input element is nonzero is marked as depending on it. A missed entry would make the
    sparse Jacobians and Hessians silently wrong."""
    from tidu.transforms.sparsity import graph_pattern

    wrt = case.inputs[which % len(case.inputs)]
    pattern = graph_pattern(case.outputs, wrt).toarray()
    assert pattern.shape == (sum(o.aval.size for o in case.outputs), wrt.aval.size)
    lin = tidu.passes.linearize(tidu.resolve(case.frag), case.outputs, [wrt])
    present = [k for k in lin.output_keys if k is not None]
    if not present:
        return
    (tangent_in,) = [lin.key(ref).input for _, ref in lin.tangent_inputs]
    units = [1.0, 1j] if is_complex(wrt.aval.dtype) else [1.0]
    for j in range(wrt.aval.size):
        for u in units:
            t = np.zeros(wrt.aval.size, wrt.aval.dtype)
            t[j] = u
            outs = iter(run([lin.fragment], present, {**case.values, tangent_in: t.reshape(wrt.aval.shape)}))
            column = np.concatenate([np.zeros(o.aval.size) if k is None else np.ravel(next(outs))
                                     for o, k in zip(case.outputs, lin.output_keys, strict=True)])
            missed = (np.abs(column) > 0) & np.isfinite(column) & ~pattern[:, j]
            assert not missed.any(), f"input element {j}: output elements {np.flatnonzero(missed)} depend on it"
