"""tnp.linalg.cond and matrix_rank, tidu.scipy.linalg's Cholesky factor-and-solve: values
against NumPy/SciPy, derivatives against JAX (float64, CPU)."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest
import scipy.linalg as sl
from vmap_util import assert_default_applies_every_rule

import tidu
import tidu.numpy as tnp
import tidu.scipy.linalg as tsl

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jax.scipy.linalg as jsl  # noqa: E402

rng = np.random.default_rng(3)
A = rng.normal(size=(4, 4))
SPD = A @ A.T + 4 * np.eye(4)


COND_ORDERS = [None, 2, -2, "fro", "nuc", 1, -1, np.inf, -np.inf]
COND_SMOOTH = (None, 2, -2, "fro")  # smooth at A: compared with JAX's gradient


@pytest.mark.parametrize("p", COND_ORDERS)
def test_cond_values_and_gradient(p):
    got = tidu.jit(lambda a: tnp.linalg.cond(a, p))(A)
    np.testing.assert_allclose(got, np.linalg.cond(A, p), rtol=1e-12)
    np.testing.assert_allclose(tnp.linalg.cond(A, p), np.linalg.cond(A, p), rtol=1e-12)  # eager
    if p in COND_SMOOTH:
        g = tidu.grad(lambda a: tnp.linalg.cond(a, p))(A)
        want = jax.jit(jax.grad(lambda a: jnp.linalg.cond(a, p)))(A)
        np.testing.assert_allclose(g, want, rtol=1e-9, atol=1e-12)


def test_cond_batched_and_rectangular():
    stack = rng.normal(size=(3, 5, 4))
    np.testing.assert_allclose(tidu.jit(tnp.linalg.cond)(stack), np.linalg.cond(stack), rtol=1e-12)
    with pytest.raises(ValueError, match="square"):
        tidu.jit(lambda a: tnp.linalg.cond(a, 1))(stack)


LOW = A @ np.diag([1.0, 1.0, 1.0, 0.0]) @ A.T
RANK_STACK = np.stack([SPD, LOW, np.zeros((4, 4))])


def test_matrix_rank():
    low, stack = LOW, RANK_STACK
    got = tidu.jit(tnp.linalg.matrix_rank)(stack)
    np.testing.assert_array_equal(got, np.linalg.matrix_rank(stack))
    np.testing.assert_array_equal(got, [4, 3, 0])
    assert tidu.jit(lambda m: tnp.linalg.matrix_rank(m, tol=10.0))(SPD) == np.linalg.matrix_rank(SPD, tol=10.0)
    assert tidu.jit(lambda m: tnp.linalg.matrix_rank(m, rtol=0.5))(SPD) == np.linalg.matrix_rank(SPD, rtol=0.5)
    assert tnp.linalg.matrix_rank(low) == 3  # eager


@pytest.mark.parametrize("lower", [False, True])
def test_cho_factor_and_solve(lower):
    b, v = rng.normal(size=(4, 2)), rng.normal(size=4)
    c, low = tidu.jit(lambda s: tsl.cho_factor(s, lower=lower))(SPD)
    assert bool(low) is lower
    want_c = sl.cholesky(SPD, lower=lower)
    np.testing.assert_allclose(c, want_c, rtol=1e-12, atol=1e-14)
    for rhs in (b, v):
        f = tidu.jit(lambda s, r: tsl.cho_solve(tsl.cho_factor(s, lower=lower), r))
        np.testing.assert_allclose(f(SPD, rhs), sl.cho_solve(sl.cho_factor(SPD, lower=lower), rhs), rtol=1e-12)
        np.testing.assert_allclose(tsl.cho_solve(tsl.cho_factor(SPD, lower=lower), rhs),  # eager
                                   np.linalg.solve(SPD, rhs), rtol=1e-12)
    # derivatives: those of the Hermitian part (JAX's, read off one triangle, symmetrized)
    g = tidu.grad(lambda s: tnp.sum(tsl.cho_solve(tsl.cho_factor(s, lower=lower), b) ** 2))(SPD)
    gj = jax.jit(jax.grad(lambda s: jnp.sum(jsl.cho_solve(jsl.cho_factor(s, lower=lower), b) ** 2)))(SPD)
    np.testing.assert_allclose(g, (gj + gj.T) / 2, rtol=1e-9, atol=1e-14)
    gb = tidu.grad(lambda r: tnp.sum(tsl.cho_solve(tsl.cho_factor(SPD, lower=lower), r) ** 2))(b)
    gbj = jax.jit(jax.grad(lambda r: jnp.sum(jsl.cho_solve(jsl.cho_factor(SPD, lower=lower), r) ** 2)))(b)
    np.testing.assert_allclose(gb, gbj, rtol=1e-10)


def test_scipy_cholesky_is_upper_by_default_and_errors_are_clear():
    np.testing.assert_allclose(tidu.jit(tsl.cholesky)(SPD), sl.cholesky(SPD), rtol=1e-12)
    np.testing.assert_allclose(tsl.cholesky(SPD, lower=True), sl.cholesky(SPD, lower=True), rtol=1e-12)
    with pytest.raises(TypeError, match="takes \\(c, lower\\)"):
        tsl.cho_solve(SPD, np.ones(4))
    with pytest.raises(TypeError, match="lower must be a bool"):
        tsl.cho_factor(SPD, lower="yes")


LSTSQ_CASES = ["tall", "vector", "wide", "deficient"]


def _lstsq_args(case, draw):
    a, b = draw(size=(5, 3)), draw(size=(5, 2))
    if case == "vector":
        b = b[:, 0]
    elif case == "wide":
        a, b = draw(size=(3, 5)), b[:3]
    elif case == "deficient":
        a = a @ np.diag([1.0, 1.0, 0.0])
    return a, b


@pytest.mark.parametrize("case", LSTSQ_CASES)
def test_lstsq_matches_jax_eager_and_traced(case):
    a, b = _lstsq_args(case, rng.normal)
    want = jnp.linalg.lstsq(a, b)
    for got in (tidu.jit(lambda a, b: tnp.linalg.lstsq(a, b))(a, b), tnp.linalg.lstsq(a, b)):
        for g, w in zip(got, want, strict=True):
            assert np.shape(g) == np.shape(w)
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    if case == "tall":
        g = tidu.grad(lambda a: tnp.sum(tnp.linalg.lstsq(a, b)[0] ** 2))(a)
        gj = jax.jit(jax.grad(lambda a: jnp.sum(jnp.linalg.lstsq(a, b)[0] ** 2)))(a)
        np.testing.assert_allclose(g, gj, rtol=1e-10, atol=1e-12)
    with pytest.raises(NotImplementedError, match="numpy_resid"):
        tidu.jit(lambda a, b: tnp.linalg.lstsq(a, b, numpy_resid=True))(a, b)


# the array API standard's linalg functions: each called on tidu/jax values of these shapes
X3, V3, W4 = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3)), rng.normal(size=4)
STANDARD = {
    "cross": (lambda m, a, b: m.linalg.cross(a, b), (V3, rng.normal(size=3))),
    "diagonal": (lambda m, a: m.linalg.diagonal(a, offset=1), (X3,)),
    "matrix_norm": (lambda m, a: m.linalg.matrix_norm(a, ord="nuc", keepdims=True), (X3,)),
    "vector_norm": (lambda m, a: m.linalg.vector_norm(a, axis=(0, 2), ord=3), (X3,)),
    "matrix_transpose": (lambda m, a: m.linalg.matrix_transpose(a), (X3,)),
    "multi_dot": (lambda m, a, b, c: m.linalg.multi_dot([a, b, c]), (V3[0], X3[0], W4)),
    "outer": (lambda m, a, b: m.linalg.outer(a, b), (V3[0], W4)),
    "tensordot": (lambda m, a, b: m.linalg.tensordot(a, b, axes=1), (X3, rng.normal(size=(4, 2)))),
    "vecdot": (lambda m, a, b: m.linalg.vecdot(a, b), (X3, W4)),
    "matmul": (lambda m, a, b: m.linalg.matmul(a, b), (X3, rng.normal(size=(4, 2)))),
}


@pytest.mark.parametrize("name", list(STANDARD))
def test_array_api_linalg_functions_against_jax(name):
    """Values, the gradient of a weighted sum and its Hessian-vector product, against
    jax.numpy.linalg's function of the same name."""
    fn, args = STANDARD[name]
    want = fn(jnp, *args)
    np.testing.assert_allclose(tidu.jit(lambda *a: fn(tnp, *a))(*args), want, rtol=1e-12, atol=1e-13)
    w = rng.normal(size=np.shape(want))

    def loss(m):
        return lambda *a: m.sum(w * fn(m, *a) ** 2)

    nums = tuple(range(len(args)))
    tangents = tuple(rng.normal(size=np.shape(a)) for a in args)
    for got, ref in zip(tidu.grad(loss(tnp), argnums=nums)(*args), jax.jit(jax.grad(loss(jnp), argnums=nums))(*args),
                        strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)
    hvp = tidu.jvp(tidu.grad(loss(tnp), argnums=nums), args, tangents)[1]
    ref = jax.jit(jax.jvp, static_argnums=0)(jax.grad(loss(jnp), argnums=nums), args, tangents)[1]
    for got, want_ in zip(hvp, ref, strict=True):
        np.testing.assert_allclose(got, want_, rtol=1e-9, atol=1e-11)


def test_array_api_linalg_errors_name_the_argument():
    with pytest.raises(ValueError, match="x1 must have size 3"):
        tnp.linalg.cross(np.ones(4), np.ones(4))
    with pytest.raises(ValueError, match="x1 and x2 must be 1-D"):
        tnp.linalg.outer(np.ones((2, 2)), np.ones(2))
    with pytest.raises(ValueError, match="at least two arrays"):
        tnp.linalg.multi_dot([np.ones((2, 2))])


# --- batched: tidu.vmap against jax.vmap ------------------------------------------------------


def _batch(x, axis):
    """x and x reversed along every axis, stacked along ``axis``."""
    return np.stack([x, np.flip(x)], axis=axis)


def _vmap(f, axis, jit):
    return tidu.jit(tidu.vmap(f, in_axes=axis)) if jit else tidu.vmap(f, in_axes=axis)


def _standard_pairs(name, axis, jit):
    """STANDARD's function and the gradient of its loss (as above), every argument mapped."""
    fn, args = STANDARD[name]
    xs = [_batch(a, axis) for a in args]
    w = np.random.default_rng(5).normal(size=np.shape(fn(jnp, *args)))

    def loss(m):
        return lambda *a: m.sum(w * fn(m, *a) ** 2)

    nums = tuple(range(len(args)))
    return [("value", _vmap(lambda *a: fn(tnp, *a), axis, jit), jax.vmap(lambda *b: fn(jnp, *b), in_axes=axis), xs,
             (1e-12, 1e-13)),
            ("gradient", _vmap(tidu.grad(loss(tnp), argnums=nums), axis, jit),
             jax.vmap(jax.grad(loss(jnp), argnums=nums), in_axes=axis), xs, (1e-10, 1e-12))]


def _cond_pairs(p, axis, jit):
    xs = [_batch(A, axis)]
    pairs = [("value", _vmap(lambda a: tnp.linalg.cond(a, p), axis, jit),
              jax.vmap(lambda a: jnp.linalg.cond(a, p), in_axes=axis), xs, (1e-12, 0))]
    if p in COND_SMOOTH:
        pairs.append(("gradient", _vmap(tidu.grad(lambda a: tnp.linalg.cond(a, p)), axis, jit),
                      jax.vmap(jax.grad(lambda a: jnp.linalg.cond(a, p)), in_axes=axis), xs, (1e-9, 1e-12)))
    return pairs


def _matrix_rank_pairs(axis, jit):
    xs = [np.moveaxis(RANK_STACK, 0, axis)]  # ranks 4, 3, 0
    return [("value", _vmap(tnp.linalg.matrix_rank, axis, jit), jax.vmap(jnp.linalg.matrix_rank, in_axes=axis), xs,
             None)]


def _lstsq_pairs(case, axis, jit):
    a, b = _lstsq_args(case, np.random.default_rng(6).normal)
    xs = [_batch(a, axis), _batch(b, axis)]
    pairs = [("value", _vmap(lambda a, b: tnp.linalg.lstsq(a, b), axis, jit), jax.vmap(jnp.linalg.lstsq, in_axes=axis),
              xs, (1e-10, 1e-12))]
    if case == "tall":  # as above
        pairs.append(("gradient", _vmap(tidu.grad(lambda a, b: tnp.sum(tnp.linalg.lstsq(a, b)[0] ** 2)), axis, jit),
                      jax.vmap(jax.grad(lambda a, b: jnp.sum(jnp.linalg.lstsq(a, b)[0] ** 2)), in_axes=axis), xs,
                      (1e-10, 1e-12)))
    return pairs


BATCHED = {
    **{name: (_standard_pairs, name) for name in STANDARD},
    **{f"cond-{p}": (_cond_pairs, p) for p in COND_ORDERS},
    "matrix_rank": (_matrix_rank_pairs,),
    **{f"lstsq-{case}": (_lstsq_pairs, case) for case in LSTSQ_CASES},
}


def batched_pairs(case, axis=0, jit=False):
    """The case's function (and gradient, where the tests above compare one) under
    tidu.vmap and jax.vmap, as (what, tidu's, JAX's, the arguments, (rtol, atol) or None
    for equality): x and x reversed stacked along ``axis``, the axis mapped."""
    fn, *args = BATCHED[case]
    return fn(*args, axis, jit)


def check_batched(case, axis=0, jit=False):
    pairs = batched_pairs(case, axis, jit)
    wants = jax.jit(lambda *a: [j(*x) for (_, _, j, _, _), x in zip(pairs, a, strict=True)])(*[p[3] for p in pairs])
    for (what, fn, _, xs, tol), want in zip(pairs, wants, strict=True):
        for g, w in zip(jax.tree_util.tree_leaves(fn(*xs)), jax.tree_util.tree_leaves(want), strict=True):
            assert np.shape(g) == np.shape(w), f"{case} {what}"
            if tol is None:
                np.testing.assert_array_equal(g, w, err_msg=f"{case} {what}")
            else:
                np.testing.assert_allclose(g, w, rtol=tol[0], atol=tol[1], err_msg=f"{case} {what}")


# The default run: these cases (of _batched_params' ids): cases that together apply every
# batching rule, with every pattern of batched and unbatched operands, that the whole sweep
# applies (tests/vmap_util.py; test_the_default_batched_cases_apply_every_batching_rule, in
# the slow step, keeps it so). The slow step: every case mapped over axis 0 and over the
# last axis (under tidu.jit).
BATCHED_DEFAULT = ["matmul-axis0", "cond-None-axis-1", "matrix_rank-axis0", "lstsq-tall-axis0", "multi_dot-axis-1",
                   "cond-fro-axis0", "cross-axis0", "vector_norm-axis0"]


def _batched_params():
    return [pytest.param(c, a, id=f"{c}-axis{a}", marks=[] if f"{c}-axis{a}" in BATCHED_DEFAULT else [pytest.mark.slow])
            for c in BATCHED for a in (0, -1)]


@pytest.mark.parametrize("case,axis", _batched_params())
def test_vmap_against_jax(case, axis):
    check_batched(case, axis, jit=axis != 0)


@pytest.mark.slow
def test_the_default_batched_cases_apply_every_batching_rule():
    """Every batching rule, with every pattern of batched operands, that tidu.vmap applies
    in the whole sweep is applied by a case of BATCHED_DEFAULT (tidu's side only: traces)."""
    assert_default_applies_every_rule(_batched_params(), BATCHED_DEFAULT,
                                      lambda p: [fn(*xs) for _, fn, _, xs, _ in batched_pairs(*p.values)])
