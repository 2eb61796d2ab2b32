"""cond and switch with a known predicate or index on concrete operands stage the branch
like tidu.jit, as every construct does (its operands are traced values: ``x.at[...]`` works
and dtypes promote as under a transform, as JAX's); scan takes a body returning a list
[carry, y]; cond takes JAX's older ``operand=`` keyword."""

from __future__ import annotations

import numpy as np
import pytest

import tidu
from tidu import lax

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)


def test_a_known_predicate_stages_its_branch_on_concrete_operands() -> None:
    x, n = np.float32(1.5), np.int32(3)

    def f(p, x, n):
        return lax.cond(p, lambda x, n: x * n, lambda x, n: x - n, x, n)

    got, traced = f(True, x, n), tidu.jit(f)(True, x, n)
    want = jax.lax.cond(True, lambda x, n: x * n, lambda x, n: x - n, x, n)
    assert np.asarray(got).dtype == np.asarray(traced).dtype == np.asarray(want).dtype == np.float32
    assert float(got) == float(want) == 4.5
    np.testing.assert_array_equal(lax.cond(True, lambda v: v.at[0].set(1.0), lambda v: v, np.zeros(3)),
                                  [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(lax.switch(1, [lambda v: v, lambda v: v.at[0].set(1.0)], np.zeros(3)),
                                  [1.0, 0.0, 0.0])
    assert float(lax.cond(np.sum(np.ones(2)) < 1, lambda: 1.0, lambda: 2.0)) == 2.0


def test_a_known_predicate_inside_a_transform_still_picks_one_branch() -> None:
    # (the other branch would fail to trace: only the one picked runs)
    def f(x):
        return lax.cond(True, lambda v: v * v, lambda v: v.no_such_method(), x)

    assert tidu.grad(f)(3.0) == 6.0


def test_scan_takes_a_list_pair_as_jax() -> None:
    carry, ys = lax.scan(lambda c, xi: [c + xi, c], 1.0, np.arange(3.0))
    want_c, want_y = jax.lax.scan(lambda c, xi: [c + xi, c], 1.0, np.arange(3.0))
    assert float(carry) == float(want_c) == 4.0
    np.testing.assert_array_equal(ys, want_y)
    g = tidu.grad(lambda a: lax.scan(lambda c, xi: [c * xi + a, c], a, np.arange(1.0, 4.0))[0])(2.0)
    gj = jax.grad(lambda a: jax.lax.scan(lambda c, xi: [c * xi + a, c], a, np.arange(1.0, 4.0))[0])(2.0)
    assert float(g) == float(gj)


def test_cond_operand_keyword() -> None:
    assert float(lax.cond(True, lambda v: v, lambda v: -v, operand=3.0)) == 3.0
    assert float(lax.cond(False, lambda v: v, lambda v: -v, operand=3.0)) == -3.0
    assert tidu.grad(lambda x: lax.cond(x > 0, lambda v: v * v, lambda v: -v, operand=x))(3.0) == 6.0
    with pytest.raises(TypeError, match="not both"):
        lax.cond(True, lambda v: v, lambda v: -v, 1.0, operand=3.0)
