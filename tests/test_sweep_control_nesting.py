"""An outside sweep of tidu.lax's control flow in deep combinations, against jax.lax (x64):
custom_linear_solve on complex systems with JAX's transpose_solve (a solve with A^T, not
the adjoint) and symmetric=True (A = A^T), map with batch_size over no slices, and
predicates and indices that are no arrays at all (one-line errors naming them)."""

from __future__ import annotations

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp
from tidu import lax

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from oracle_util import close_trees  # noqa: E402

TIDU = {"m": tnp, "L": lax, "grad": tidu.grad, "vmap": tidu.vmap, "hessian": tidu.hessian}
JAX = {"m": jnp, "L": jax.lax, "grad": jax.grad, "vmap": jax.vmap, "hessian": jax.hessian}


def conj(tree):
    """JAX's gradient of a real function of complex values conjugated: tidu's cotangents are
    adjoints (docs/transforms.md, complex numbers)."""
    return jax.tree.map(jnp.conj, tree)


# --- custom_linear_solve on complex systems ---------------------------------------------------

_rng = np.random.default_rng(9)
A = _rng.normal(size=(2, 2)) + 1j * _rng.normal(size=(2, 2)) + 3 * np.eye(2)
B = _rng.normal(size=2) + 1j * _rng.normal(size=2)


def _solved(t, kind):
    m, L = t["m"], t["L"]
    M = A + A.T if kind == "symmetric" else A

    def f(s, b):
        mv = lambda v: (s * M) @ v  # noqa: E731
        solve = lambda _, r: m.linalg.solve(s * M, r)  # noqa: E731
        if kind == "symmetric":
            x = L.custom_linear_solve(mv, b, solve, symmetric=True)
        elif kind == "explicit transpose":  # JAX's meaning: solves A^T x = r
            x = L.custom_linear_solve(mv, b, solve, transpose_solve=lambda _, r: m.linalg.solve((s * M).T, r))
        elif kind == "transpose from vecmat":
            def tsolve(vecmat, r):
                return m.linalg.solve(m.stack([vecmat(m.array([1.0 + 0j, 0j])), vecmat(m.array([0j, 1.0 + 0j]))],
                                              axis=1), r)
            x = L.custom_linear_solve(mv, b, solve, transpose_solve=tsolve)
        else:  # "aux"
            x, aux = L.custom_linear_solve(mv, b, lambda _, r: (solve(_, r), m.sum(r)),
                                           lambda _, r: (m.linalg.solve((s * M).T, r), 1.0), has_aux=True)
            x = x * aux
        return m.sum(m.abs(x) ** 2) + m.real(x[0] * x[1])
    return f


KINDS = ["explicit transpose", "symmetric", "transpose from vecmat", "aux"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("s", [1.5, 1.5 + 0.5j])
def test_complex_custom_linear_solve_gradient_in_b_and_in_the_matrix(kind, s):
    # tidu took transpose_solve (and solve, when symmetric) for a solve with the adjoint A^H:
    # with JAX's A^T solve the gradient in b (and in s, with b) was wrong
    f, fj = _solved(TIDU, kind), _solved(JAX, kind)
    close_trees(tidu.grad(f, argnums=(0, 1))(s, B), conj(jax.grad(fj, argnums=(0, 1))(s, B)))
    close_trees(tidu.vjp(lambda b: f(s, b), B)[1](1.0), conj(jax.vjp(lambda b: fj(s, b), B)[1](1.0)))


@pytest.mark.parametrize("kind", KINDS)
def test_complex_custom_linear_solve_under_vmap_and_to_second_order(kind):
    f, fj = _solved(TIDU, kind), _solved(JAX, kind)
    s = np.array([1.5, -0.7])
    close_trees(tidu.vmap(tidu.grad(f, argnums=(0, 1)), in_axes=(0, None))(s, B),
                conj(jax.vmap(jax.grad(fj, argnums=(0, 1)), in_axes=(0, None))(s, B)))
    if kind == "aux":
        return  # (jax.hessian of a has_aux custom_linear_solve fails in JAX itself)

    def along(t, g):
        return lambda u: g(1.5, B * u)  # b scaled: reverse mode through the solve, twice
    close_trees(tidu.hessian(along(TIDU, f), mode="RoR")(0.8), jax.hessian(along(JAX, fj))(0.8))
    close_trees(tidu.grad(tidu.grad(along(TIDU, f)))(0.8), jax.grad(jax.grad(along(JAX, fj)))(0.8))
    close_trees(tidu.hessian(f, mode="RoR")(1.5, B), jax.hessian(fj)(1.5, B))


# --- map with batch_size over no slices --------------------------------------------------------


@pytest.mark.parametrize("batch_size", [1, 2, 5])
def test_map_with_a_batch_size_over_an_empty_axis(batch_size):
    xs = np.zeros((0, 3))
    # tidu raised IndexError (no batch and no rest to concatenate)
    got = lax.map(lambda r: tnp.sin(r) * 2, xs, batch_size=batch_size)
    want = jax.lax.map(lambda r: jnp.sin(r) * 2, xs, batch_size=batch_size)
    assert got.shape == want.shape == (0, 3) and got.dtype == want.dtype
    g = tidu.grad(lambda w: tnp.sum(lax.map(lambda r: r * w, xs, batch_size=batch_size)))(0.5)
    assert float(g) == 0.0


# --- predicates and indices that are no arrays ---------------------------------------------------


@pytest.mark.parametrize("bad", ["yes", None, object()])
@pytest.mark.parametrize("where", ["cond", "switch"])
def test_a_predicate_or_index_that_is_no_array_is_refused_naming_it(bad, where):
    # tidu said "unsupported dtype str96; tidu handles bool, ..." (naming neither the function nor pred)
    def f(x):
        if where == "cond":
            return lax.cond(bad, lambda v: v, lambda v: -v, x)
        return lax.switch(bad, [lambda v: v, lambda v: -v], x)
    what = "pred must be a boolean scalar" if where == "cond" else "index must be an integer scalar"
    for run in (f, tidu.jit(f)):
        with pytest.raises(TypeError, match=f"{where}: {what}, got {type(bad).__name__}") as info:
            run(np.array([1.0, 2.0]))
        assert "\n" not in str(info.value)


def test_switch_branches_that_are_no_sequence_are_refused_naming_them():
    # tidu said "'function' object is not iterable"
    with pytest.raises(TypeError, match="switch: branches must be a non-empty sequence of functions"):
        lax.switch(0, lambda v: v, np.array([1.0]))


# --- custom_root: what solve returns ---------------------------------------------------------------


def _root_of(solve_result):
    return lambda th: lax.custom_root(lambda y: y ** 2 - th, 1.0, lambda f, y0: solve_result(y0),
                                      lambda g, y: y / g(1.0))


@pytest.mark.parametrize("result, got", [
    (lambda y0: tnp.array([1.0, 2.0]), r"\* \(f64\[2\]\)"),  # tidu: an OpError about sub(f64[2], f64[]) in grad
    (lambda y0: (y0, y0), r"\(\*, \*\) \(f64\[\], f64\[\]\)"),  # tidu: "zip() argument 2 is longer than argument 1"
    (lambda y0: np.float32(1.0), r"\* \(f32\[\]\)"),
])
def test_a_root_unlike_the_initial_guess_is_one_line_naming_solve(result, got):
    for run in (_root_of(result), tidu.grad(_root_of(result))):
        with pytest.raises(TypeError, match=r"custom_root: solve <lambda> must return a root like initial_guess: "
                                            r"\* \(f64\[\]\), got " + got) as info:
            run(2.0)
        assert "\n" not in str(info.value)


def test_a_python_scalar_root_takes_the_dtype_of_the_initial_guess():
    # y^2 = th at y = 1: dy/dth = 1 / (2 y), the solver's answer taken as the root (as JAX does)
    f = _root_of(lambda y0: 1)
    assert np.asarray(f(1.0)).dtype == np.float64 and float(f(1.0)) == 1.0
    assert float(tidu.grad(f)(1.0)) == 0.5


@pytest.mark.parametrize("xs, error, message", [
    (None, ValueError, "map: xs must hold arrays to map over, got None"),
    (3.0, TypeError, "map: every leaf of xs needs a leading axis to map over"),
    ((np.ones(2), np.ones(3)), ValueError, r"map: the leading axes of xs differ: \[2, 3\]"),
])
def test_map_errors_name_map_and_xs(xs, error, message):
    # (they said "scan:", the loop map becomes)
    with pytest.raises(error, match=message):
        tidu.lax.map(lambda x: x, xs)


def test_custom_root_names_a_tangent_solve_of_the_wrong_shape():
    # (it said "the tangent output 0 of root's JVP rule has shape (2,), expected ()")
    def f(a):
        def solve(g, x0):
            return lax.fori_loop(0, 20, lambda i, x: x - g(x) / (2 * x), x0)
        return lax.custom_root(lambda x: x * x - a, 1.0, solve, lambda g, y: tnp.stack([y, y]))
    with pytest.raises(TypeError, match=r"custom_root: tangent_solve <lambda> must return a value like initial_guess"):
        tidu.grad(f)(2.0)
