"""Every primitive's rules: JVP against a five-point finite difference, transpose
against the adjoint identity Re<ct, J t> = Re<J^H ct, t>, on real and complex inputs."""

import numpy as np
import pytest
from primspecs import SPECS, Spec, sample

import tidu
from tidu import FragmentBuilder
from tidu.core.keys import aval_of, is_inexact

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
    lin = tidu.passes.linearize(tidu.resolve(frag), [out], [f"a{i}" for i in wrt])
    return rng, args, frag, out, wrt, lin


def test_every_catalog_primitive_has_a_spec():
    assert {s.op for s in SPECS} == set(tidu.catalog()) - {"constant"}


@pytest.mark.parametrize("spec,dtype", CASES)
def test_jvp_matches_five_point_difference(spec, dtype):
    rng, args, frag, out, wrt, lin = linearized(spec, dtype, 0)
    tangents = {i: sample(spec, dtype, rng)[i] * 0.5 for i in wrt}
    if lin.tangent_outputs[0] is None:
        # piecewise constant, or an integer's bits read as a float
        assert not is_inexact(out.aval.dtype) or spec.op in ("sign", "floor", "ceil", "rint", "bitcast_convert")
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
    tr = tidu.passes.linear_transpose(lin)
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


def _apply(spec, args, wrt):
    """The primitive as a function of its active operands (the others fixed)."""
    from tidu.trace.tracing import current_trace

    def f(*xs):
        full = list(args)
        for i, x in zip(wrt, xs, strict=True):
            full[i] = x
        return current_trace().emit(spec.op, full, spec.attrs)
    return f


@pytest.mark.parametrize("spec,dtype", CASES)
def test_second_derivative_matches_difference_of_first(spec, dtype):
    """d/ds (J(x) t) against a five-point difference of J(x + h s) t: catches rules that
    are right at first order only (or on real values only: abs at complex points)."""
    rng = np.random.default_rng(2)
    args = sample(spec, dtype, rng)
    wrt = active(spec, args)
    f = _apply(spec, args, wrt)
    x = [args[i] for i in wrt]
    if not wrt or not is_inexact(np.asarray(tidu.jit(f)(*x)).dtype.name):
        pytest.skip("no differentiable operand or output")
    t = [sample(spec, dtype, rng)[i] * 0.5 for i in wrt]
    s = [sample(spec, dtype, rng)[i] * 0.5 for i in wrt]

    def first(step):
        shifted = tuple(a + step * d for a, d in zip(x, s, strict=True))
        return np.asarray(tidu.jvp(f, shifted, tuple(t))[1])

    second = np.asarray(tidu.jvp(lambda *xs: tidu.jvp(f, xs, tuple(t))[1], tuple(x), tuple(s))[1])
    h = 1e-3
    fd = (-first(2 * h) + 8 * first(h) - 8 * first(-h) + first(-2 * h)) / (12 * h)
    np.testing.assert_allclose(second, fd, rtol=1e-5, atol=1e-7)


def test_pow_y_derivative_at_zero_base_is_zero():
    import tidu.numpy as tnp

    assert tidu.grad(lambda y: tnp.power(0.0, y))(0.3) == 0.0  # was nan; JAX gives 0
    assert np.isclose(tidu.grad(lambda y: tnp.power(2.0, y))(0.3), np.log(2) * 2 ** 0.3)


def test_abs_second_derivative_at_complex_points():
    import tidu.numpy as tnp

    z, t = 1.1 + 1.3j, 0.3 - 0.7j
    got = tidu.jvp(tidu.grad(tnp.abs), (z,), (t,))[1]  # was 0j: sign had no complex tangent
    g = tidu.grad(tnp.abs)
    h = 1e-4
    fd = (-g(z + 2 * h * t) + 8 * g(z + h * t) - 8 * g(z - h * t) + g(z - 2 * h * t)) / (12 * h)
    assert abs(got - fd) < 1e-8 and abs(got - (0.3053545141476458 - 0.2583768965864695j)) < 1e-12
    assert tidu.grad(tidu.grad(tnp.abs))(0.7) == 0.0  # real: still piecewise linear


def test_abs_derivative_is_a_weight_of_the_primal():
    # select(x >= 0, 1, -1) * dx: reverse mode multiplies the cotangent by the weight (one
    # op); select(x >= 0, dx, -dx) transposed into two selects and a negation
    import tidu.numpy as tnp

    w = np.array([0.5, -1.0, 2.0])
    x = np.array([0.3, -2.0, 1.0])

    def f(v):
        return tnp.sum(tnp.abs(v * v - 1.0) * w)

    graph = tidu.make_graph(tidu.grad(f))(x).graph
    assert graph.op_count <= 7, graph.op_count
    np.testing.assert_array_equal(tidu.grad(f)(x), 2 * x * w * np.where(x * x - 1.0 >= 0, 1.0, -1.0))
    edges = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan])
    np.testing.assert_array_equal(tidu.vmap(tidu.grad(tnp.abs))(edges), [1.0, 1.0, 1.0, -1.0, -1.0])
