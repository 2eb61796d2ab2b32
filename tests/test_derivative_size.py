"""Derivative graphs stay small after materialize_merge (cheap-gradient principle): the
gradient of the 100-op scalar benchmark chain has at most 3x the primal's ops."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp

_spec = importlib.util.spec_from_file_location("bench_common", Path(__file__).parent.parent / "bench" / "common.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def ops(fn, x) -> int:
    return tidu.make_graph(fn)(x).ops_after


def test_gradient_of_100_op_chain_is_at_most_3x_the_primal():
    f = bench.make_chain(tnp, 100)
    x = np.float64(bench.CHAIN_X)
    primal, grad = ops(f, x), ops(tidu.grad(f), x)
    assert primal == 100
    assert grad <= 3 * primal, f"gradient has {grad} ops for a {primal}-op primal"
    # And the values are right: against the hand-written derivative of the chain.
    _, d, dd = bench.chain_d2(bench.CHAIN_X, 100)
    assert tidu.grad(f)(x) == pytest.approx(d, rel=1e-12)
    assert tidu.grad(tidu.grad(f))(x) == pytest.approx(dd, rel=1e-11)


def test_simplification_never_grows_a_derivative_graph():
    f = bench.make_chain(tnp, 100)
    view = tidu.make_graph(tidu.grad(tidu.grad(f)))(np.float64(bench.CHAIN_X))
    assert view.ops_after <= view.ops_before
