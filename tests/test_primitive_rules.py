"""Every primitive's rules: JVP against a five-point finite difference, transpose
against the adjoint identity Re<ct, J t> = Re<J^H ct, t>, on real and complex inputs."""

import numpy as np
import pytest
from primspecs import SPECS, Spec, sample

import tidu
from tidu import FragmentBuilder
from tidu.keys import aval_of, is_inexact

CASES = [pytest.param(s, dt, id=f"{s.op}{i}-{dt}") for i, s in enumerate(SPECS) for dt in s.dtypes]


def inner(a, b):
    return float(np.real(np.sum(np.conj(a) * b)))


def primal(spec: Spec, args):
    b = FragmentBuilder("P")
    refs = [b.input(f"a{i}", aval_of(a)) for i, a in enumerate(args)]
    out = b.output(b.add_op(spec.op, refs, spec.attrs)[0])
    return b.build(), out


def run(frag, outputs, feed):
    g = tidu.materialize_merge(tidu.resolve([frag]), outputs, simplify=False)
    prog = tidu.compile(g)
    return prog.eval({k: feed[str(k)] for k in g.input_keys})


def active(spec, args):
    idx = spec.diff if spec.diff is not None else range(len(args))
    return [i for i in idx if is_inexact(args[i].dtype.name)]


def linearized(spec, dtype, seed):
    """Random inputs, the primal fragment and its linearization w.r.t. the active operands."""
    rng = np.random.default_rng(seed)
    args = sample(spec, dtype, rng)
    frag, out = primal(spec, args)
    wrt = active(spec, args)
    lin = tidu.linearize(tidu.resolve(frag), [out], [f"a{i}" for i in wrt])
    return rng, args, frag, out, wrt, lin


def test_every_catalog_primitive_has_a_spec():
    assert {s.op for s in SPECS} == set(tidu.catalog()) - {"constant"}


@pytest.mark.parametrize("spec,dtype", CASES)
def test_jvp_matches_five_point_difference(spec, dtype):
    rng, args, frag, out, wrt, lin = linearized(spec, dtype, 0)
    tangents = {i: sample(spec, dtype, rng)[i] * 0.5 for i in wrt}
    if lin.tangent_outputs[0] is None:
        assert not is_inexact(out.aval.dtype) or spec.op == "sign"
        return
    feed = {f"a{i}": a for i, a in enumerate(args)}
    for (ikey, ref) in lin.tangent_inputs:
        feed[str(lin.key(ref).input)] = tangents[int(str(ikey)[1:])]
    (jt,) = run(lin.fragment, lin.output_keys, feed)

    def f(h):
        shifted = {f"a{i}": (a + h * tangents[i] if i in tangents else a) for i, a in enumerate(args)}
        return run(frag, [out], shifted)[0]

    h = 1e-3
    fd = (-f(2 * h) + 8 * f(h) - 8 * f(-h) + f(-2 * h)) / (12 * h)
    np.testing.assert_allclose(jt, fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("spec,dtype", CASES)
def test_transpose_satisfies_adjoint_identity(spec, dtype):
    rng, args, frag, out, _, lin = linearized(spec, dtype, 1)
    if lin.tangent_outputs[0] is None:
        return
    tr = tidu.linear_transpose(lin)
    feed = {f"a{i}": a for i, a in enumerate(args)}
    t_in = {str(lin.key(r).input): sample(spec, dtype, rng)[int(str(k)[1:])] for k, r in lin.tangent_inputs}
    (jt,) = run(lin.fragment, lin.output_keys, {**feed, **t_in})
    ct = rng.normal(size=jt.shape).astype(jt.dtype)
    if np.iscomplexobj(jt):
        ct = ct + 1j * rng.normal(size=jt.shape)
    (seed_key, _), = tr.tangent_inputs
    cts = run(tr.fragment, [k for k in tr.output_keys if k is not None], {**feed, str(seed_key): ct})
    lhs = inner(ct, jt)
    present = [(k, r) for (k, r), o in zip(lin.tangent_inputs, tr.output_keys, strict=True) if o is not None]
    rhs = sum(inner(c, t_in[str(lin.key(r).input)]) for c, (k, r) in zip(cts, present, strict=True))
    assert lhs == pytest.approx(rhs, rel=1e-12, abs=1e-12)
