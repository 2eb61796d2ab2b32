"""x.at[idx] with a mode and a constant index out of range, where the index leaves trailing
axes whole: the positions came from a table one larger along every axis, so a left-out
axis gained an entry (get(mode="fill") of a (3, 2) array gave shape (2, 3); set and add
of array values with mode="drop" failed to broadcast). And einsum takes optimize=."""

from __future__ import annotations

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)

Y = np.arange(24.0).reshape(2, 3, 4)
INDICES = [(np.array([0, 5]),), (slice(None), np.array([0, 9])), (np.array([1, 4]), 1),
           (Ellipsis, np.array([0, 9])), (np.array([0, 1]), np.array([2, 7]))]


@pytest.mark.parametrize("idx", INDICES, ids=range(len(INDICES)))
def test_fill_reads_have_jaxs_shape_and_values(idx) -> None:
    want = np.asarray(jnp.asarray(Y).at[idx].get(mode="fill", fill_value=-1.0))
    eager = tnp.at(Y)[idx].get(mode="fill", fill_value=-1.0)
    traced = tidu.jit(lambda y: y.at[idx].get(mode="fill", fill_value=-1.0))(Y)
    np.testing.assert_array_equal(eager, want)
    np.testing.assert_array_equal(traced, want)
    program = tidu.make_graph(lambda y: y.at[idx].get(mode="fill", fill_value=-1.0))(Y).program
    np.testing.assert_array_equal(program.run([Y], backend="xla")[0], want)
    g = tidu.grad(lambda y: tnp.sum(y.at[idx].get(mode="fill", fill_value=-1.0) ** 2))(Y)
    gj = jax.grad(lambda y: jnp.sum(y.at[idx].get(mode="fill", fill_value=-1.0) ** 2))(Y)
    np.testing.assert_array_equal(g, gj)


def test_drop_updates_of_array_values() -> None:
    x = np.arange(12.0).reshape(3, 4)
    v = np.array([[10.0, 20, 30, 40], [50, 60, 70, 80]])
    for update in (lambda a: a.at[np.array([0, 7])].set(v, mode="drop"),
                   lambda a: a.at[np.array([0, 7])].add(np.arange(4.0), mode="drop"),
                   lambda a: a.at[np.array([0, -9, 2])].multiply(2.0, mode="drop")):
        want = np.asarray(update(jnp.asarray(x)))
        np.testing.assert_array_equal(tidu.jit(update)(x), want)


def test_einsum_takes_optimize() -> None:
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(4, 3)
    want = np.einsum("ij,kj->ik", a, b)
    for optimize in (False, True, "greedy", "optimal"):
        np.testing.assert_array_equal(tnp.einsum("ij,kj->ik", a, b, optimize=optimize), want)
        np.testing.assert_array_equal(
            tidu.jit(lambda a, b, o=optimize: tnp.einsum("ij,kj->ik", a, b, optimize=o))(a, b), want)
