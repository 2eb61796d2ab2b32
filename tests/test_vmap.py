"""tidu.vmap against a Python loop, for every kind of primitive and composed with every
transform; Jacobians and Hessians as one batched pass (graph size independent of n)."""

from __future__ import annotations

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp
from tidu.ad.batching import RULES, BatchingError
from tidu.ops.catalog import catalog

RNG = np.random.default_rng(7)


def loop(f, in_axes, args, out_axis=0):
    """The reference: f on each example, stacked."""
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    n = next(np.shape(a)[ax] for a, ax in zip(args, axes, strict=True) if ax is not None)
    outs = [f(*[a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, axes, strict=True)])
            for i in range(n)]
    return np.stack([np.asarray(o) for o in outs], axis=out_axis)


def check(f, in_axes, *args, out_axes=0, rtol=1e-13):
    got = tidu.vmap(f, in_axes=in_axes, out_axes=out_axes)(*args)
    want = loop(lambda *a: tidu.jit(f)(*a), in_axes, args, out_axes)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-14)


X = RNG.uniform(0.5, 2.0, (4, 3))
Y = RNG.uniform(0.5, 2.0, (4, 3))
Z = RNG.uniform(0.5, 2.0, (4, 3)) + 1j * RNG.uniform(-0.5, 0.5, (4, 3))
M = RNG.uniform(0.5, 2.0, (4, 3, 2))

# one function per primitive type (and per operand batching pattern)
CASES = {
    "elementwise": (lambda x, y: tnp.exp(x) * y - tnp.sqrt(x) / y, (0, 0), (X, Y)),
    "elementwise, one unbatched": (lambda x, y: tnp.sin(x) + y, (0, None), (X, Y[0])),
    "compare/select": (lambda x, y: tnp.where(x > y, x, y * 2.0), (0, 0), (X, Y)),
    "maximum": (lambda x, y: tnp.maximum(x, y), (0, None), (X, Y[1])),
    "convert": (lambda x: tnp.astype(x, "complex128") * 1j, 0, (X,)),
    "to_real/abs/complex": (lambda z: tnp.abs(z) + tnp.real(z) * tnp.imag(z), 0, (Z,)),
    "broadcast_in_dim": (lambda x: tnp.broadcast_to(x, (2, 3)) * 2.0, 0, (X,)),
    "reshape": (lambda m: tnp.reshape(m, (2, 3)), 0, (M,)),
    "transpose": (lambda m: tnp.transpose(m) + 1.0, 0, (M,)),
    "reduce_sum": (lambda m: tnp.sum(m, axis=0), 0, (M,)),
    "reduce_max/prod": (lambda m: tnp.max(m, axis=1) + tnp.prod(m, axis=0)[0], 0, (M,)),
    "slice": (lambda x: x[1:] - x[:-1], 0, (X,)),
    "concatenate": (lambda x: tnp.concatenate([x, x * 2.0]), 0, (X,)),
    # the transpose of a slice is a pad
    "pad": (lambda x: tidu.grad(lambda v: tnp.sum(v[1:] ** 2))(x), 0, (X,)),
    "dot, both batched": (lambda a, b: tnp.dot(a, b), (0, 0), (M, RNG.normal(size=(4, 2, 5)))),
    "dot, lhs batched": (lambda a, b: tnp.dot(a, b), (0, None), (M, RNG.normal(size=(2, 5)))),
    "dot, rhs batched": (lambda a, b: tnp.dot(a, b), (None, 0), (RNG.normal(size=(5, 3)), M)),
    "einsum with batch dims": (lambda a, b: tnp.einsum("ijk,ikl->ijl", a, b), (0, 0),
                               (RNG.normal(size=(4, 2, 3, 2)), RNG.normal(size=(4, 2, 2, 5)))),
    "matmul, unbatched lhs with batch dims": (lambda a, b: tnp.einsum("ijk,ikl->ijl", a, b), (None, 0),
                                              (RNG.normal(size=(2, 3, 2)), RNG.normal(size=(4, 2, 2, 5)))),
}

# linear algebra (stacks of matrices): SPD and well-conditioned examples, batched on axis 0,
# with an unbatched operand where the function has two
_G = RNG.normal(size=(3, 2, 4, 4))
SPD = np.einsum("bkij,bklj->bkil", _G, _G) + 4 * np.eye(4)
SQ = RNG.normal(size=(3, 4, 4)) + 4 * np.eye(4)
WIDE = RNG.normal(size=(3, 3, 5))
CASES |= {
    "cholesky, stacked": (lambda a: tnp.linalg.cholesky(a), (0,), (SPD,)),
    "solve, matrix unbatched": (lambda a, b: tnp.linalg.solve(a, b), (None, 0), (SQ[0], RNG.normal(size=(3, 4, 2)))),
    "solve, both batched": (lambda a, b: tnp.linalg.solve(a, b), (0, 0), (SQ, RNG.normal(size=(3, 4, 2)))),
    "solve_triangular": (lambda a, b: tnp.linalg.solve_triangular(a, b, lower=True), (0, None),
                         (SQ, RNG.normal(size=(4, 2)))),
    "det and slogdet": (lambda a: tnp.linalg.det(a) + tnp.linalg.slogdet(a)[1], (0,), (SQ,)),
    "eigh": (lambda a: tnp.linalg.eigvalsh(a) + tnp.sum(tnp.abs(tnp.linalg.eigh(a)[1]), axis=-1), (0,), (SPD[:, 0],)),
    "qr": (lambda a: tnp.abs(tnp.linalg.qr(a)[0]) + tnp.abs(tnp.linalg.qr(a)[1]), (0,), (SQ,)),
    "svd and pinv": (lambda a: tnp.linalg.svdvals(a)[..., None] * tnp.sum(tnp.linalg.pinv(a), axis=-1)[..., :3],
                     (0,), (WIDE,)),
    "svd vectors": (lambda a: tnp.abs(tnp.linalg.svd(a)[0]), (0,), (SQ,)),
    "inv, batch axis 1": (lambda a: tnp.linalg.inv(a), (1,), (np.moveaxis(SQ, 0, 1),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_matches_a_loop(name):
    f, in_axes, args = CASES[name]
    check(f, in_axes, *args)


def test_every_primitive_type_has_a_batching_rule():
    types = {p.decl.type_rule for p in catalog().values()} - {"constant"}
    assert types <= set(RULES), types - set(RULES)


@pytest.mark.parametrize("in_axes, out_axes", [(1, 0), (-1, 1), (0, -1), (1, 1)])
def test_axes(in_axes, out_axes):
    check(lambda m: tnp.sin(m) * tnp.sum(m), in_axes, M, out_axes=out_axes)


def test_pytrees_and_none_axes():
    f = lambda d, c: d["a"] * c + d["b"][0]  # noqa: E731
    d = {"a": X, "b": (Y[0], Y)}
    got = tidu.vmap(f, in_axes=({"a": 0, "b": (None, 0)}, None))(d, 3.0)
    np.testing.assert_allclose(got, X * 3.0 + Y[0], rtol=1e-15)
    out = tidu.vmap(lambda x: (x * 2.0, {"s": tnp.sum(x)}), out_axes=(1, {"s": 0}))(X)
    np.testing.assert_allclose(out[0], (X * 2.0).T)
    np.testing.assert_allclose(out[1]["s"], X.sum(1))


def test_unbatched_outputs_are_broadcast_or_kept():
    got = tidu.vmap(lambda x, c: c * 2.0, in_axes=(0, None))(X, np.float64(3.0))
    np.testing.assert_allclose(got, np.full(4, 6.0))
    kept = tidu.vmap(lambda x, c: (tnp.sum(x), c * 2.0), in_axes=(0, None), out_axes=(0, None))(X, 3.0)
    assert np.asarray(kept[1]).shape == ()


f = lambda x: tnp.sum(tnp.sin(x) * x * x)  # noqa: E731


@pytest.mark.parametrize("name, transform, reference", [
    ("vmap(grad)", lambda: tidu.vmap(tidu.grad(f)),
     lambda xs: np.cos(xs) * xs**2 + 2 * xs * np.sin(xs)),
    ("grad(vmap)", lambda: tidu.grad(lambda xs: tnp.sum(tidu.vmap(f)(xs))),
     lambda xs: np.cos(xs) * xs**2 + 2 * xs * np.sin(xs)),
    ("vmap(hessian)", lambda: tidu.vmap(tidu.hessian(f)),
     lambda xs: np.stack([np.diag(-np.sin(x) * x**2 + 4 * x * np.cos(x) + 2 * np.sin(x)) for x in xs])),
    ("vmap(vmap)", lambda: tidu.vmap(tidu.vmap(tnp.sin)), np.sin),
    ("jacfwd(vmap)", lambda: lambda xs: tidu.jacfwd(tidu.vmap(tnp.sin))(xs[0]),
     lambda xs: np.diag(np.cos(xs[0]))),
    ("vmap(jacrev)", lambda: tidu.vmap(tidu.jacrev(lambda x: tnp.sin(x) * tnp.sum(x))),
     lambda xs: np.stack([np.diag(np.cos(x)) * x.sum() + np.sin(x)[:, None] for x in xs])),
])
def test_vmap_composes_with_every_transform(name, transform, reference):
    np.testing.assert_allclose(transform()(X), reference(X), rtol=1e-12, atol=1e-13)


def test_errors_name_what_is_wrong():
    with pytest.raises(ValueError, match="different sizes"):
        tidu.vmap(lambda a, b: a + b)(X, np.ones((5, 3)))
    with pytest.raises(ValueError, match="at least one argument must be mapped"):
        tidu.vmap(lambda a: a, in_axes=None)(X)
    with pytest.raises(ValueError, match="out of range"):
        tidu.vmap(lambda a: a, in_axes=3)(X)
    with pytest.raises(ValueError, match="in_axes has 1 entries for 2"):
        tidu.vmap(lambda a, b: a, in_axes=(0,))(X, X)
    with pytest.raises(ValueError, match="out_axes is None"):
        tidu.vmap(lambda a: a, out_axes=None)(X)
    assert issubclass(BatchingError, TypeError)


# --- Jacobians and Hessians: one batched pass ------------------------------------------------


def rosenbrock(x):
    return tnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


W = RNG.normal(size=(8,))


def mlp_loss(x):
    h = tnp.tanh(x[:, None] * W[None, :])
    return tnp.sum((tnp.sum(h, axis=1) - 0.3) ** 2)


@pytest.mark.parametrize("fun", [rosenbrock, mlp_loss], ids=["rosenbrock", "mlp_loss"])
@pytest.mark.parametrize("mode", ["FoF", "FoR", "RoF", "RoR"])
def test_hessian_graph_does_not_grow_with_n(fun, mode):
    # above 1024 elements no constant of the batch is folded: the graphs are the same but
    # for shapes; at n = 10 folded constants can only make it smaller
    counts = {n: tidu.make_graph(tidu.hessian(fun, mode=mode))(RNG.uniform(0.5, 1.5, n)).graph.op_count
              for n in (10, 1030, 1700)}
    assert counts[1030] == counts[1700], counts
    assert counts[10] <= counts[1030] < 60, counts


@pytest.mark.parametrize("mode", ["FoF", "FoR", "RoF", "RoR"])
def test_batched_hessian_matches_jax(mode):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)  # as tests/test_transforms_vs_jax.py does
    jnp = jax.numpy
    x = RNG.uniform(0.5, 1.5, 12)

    def r(x, xp):
        return xp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    got = tidu.hessian(lambda x: r(x, tnp), mode=mode)(x)
    want = np.asarray(jax.jit(jax.hessian(lambda x: r(x, jnp)))(x))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-10)


def test_jacobians_of_several_leaves_and_outputs():
    def fn(a, b):
        return {"u": tnp.sin(a) * tnp.sum(b), "v": a[0] * b}

    a, b = RNG.normal(size=3), RNG.normal(size=(2, 2))
    for jac in (tidu.jacfwd, tidu.jacrev):
        J = jac(fn, argnums=(0, 1))(a, b)
        np.testing.assert_allclose(J["u"][0], np.diag(np.cos(a)) * b.sum(), atol=1e-14)
        np.testing.assert_allclose(J["u"][1], np.broadcast_to(np.sin(a)[:, None, None], (3, 2, 2)), atol=1e-14)
        dv_da = np.zeros((2, 2, 3))
        dv_da[..., 0] = b
        np.testing.assert_allclose(J["v"][0], dv_da, atol=1e-14)
        np.testing.assert_allclose(J["v"][1], a[0] * np.eye(4).reshape(2, 2, 2, 2), atol=1e-14)


def test_check_rules_checks_every_batching_rule(monkeypatch):
    from tidu.ad import batching
    from tidu.checkrules import check_rules

    prims = ["reverse", "dot_general", "pad", "select", "svd_u", "reduce_max"]
    rows = [r for r in check_rules(only=prims).rows if r.check == "batched"]
    assert sorted(r.primitive for r in rows) == sorted(prims)
    assert all(r.result == "pass" for r in rows), [r for r in rows if r.result != "pass"]

    def wrong_reverse(trace, key, ins, size):  # the dims not shifted past the batch axis
        return batching._shifted(trace, key, ins[0][0], dims=tuple(key.attrs["dims"]))
    monkeypatch.setitem(batching.RULES, "reverse", wrong_reverse)
    (row,) = [r for r in check_rules(only=["reverse"]).rows if r.check == "batched"]
    assert row.result == "FAIL" and "differs from the loop" in row.detail


def test_pad_with_a_batched_padding_value():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    x, v = RNG.normal(size=(3, 4)), np.array([7.0, 8.0, 9.0])

    def f(x, v):
        return tidu.op("pad")(x, v, low=(1,), high=(2,), interior=(1,))
    want = np.stack([f(x[i], v[i]) for i in range(3)])
    np.testing.assert_array_equal(tidu.vmap(f)(x, v), want)
    np.testing.assert_array_equal(tidu.vmap(f, in_axes=(None, 0))(x[0], v), np.stack([f(x[0], c) for c in v]))
    g = tidu.grad(lambda v: tnp.sum(tidu.vmap(f)(x, v) ** 2))(v)
    pad = jax.vmap(lambda x, v: jax.lax.pad(x, v, ((1, 2, 1),)))
    gj = jax.jit(jax.grad(lambda v: jax.numpy.sum(pad(x, v) ** 2)))(v)
    np.testing.assert_allclose(g, gj, rtol=1e-13)
