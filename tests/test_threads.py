"""Transforms called from many threads at once give exactly the single-threaded results
(values bit for bit, StableHLO text byte for byte); each thread and asyncio task traces
with its own trace stack, catalog and semantics."""

import asyncio
import sys
import threading

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp

X = np.linspace(0.1, 0.9, 4)


def _cases():
    """(name, make) pairs: ``make()`` returns a fresh function to transform and call, so
    distinct calls trace distinct functions (no trace-cache sharing)."""
    def f(x):
        return tnp.sum(tnp.sin(x) * tnp.exp(0.5 * x)) + tnp.sum(x * x)

    def g(x, y):
        return tnp.tanh(x * y) + tnp.cos(x)

    return [
        ("grad", lambda: tidu.grad(lambda x: f(x))(X)),
        ("grad2", lambda: tidu.grad(lambda x: tidu.grad(lambda z: f(z * x[0]))(x)[1])(X)),
        ("hessian", lambda: tidu.hessian(lambda x: f(x))(X)),
        ("jvp", lambda: tidu.jvp(lambda x: tnp.sin(x) * x, (X,), (X[::-1].copy(),))[1]),
        ("vjp", lambda: tidu.vjp(lambda x, y: g(x, y), X, X + 1)[1](np.ones(4))[1]),
        ("vmap", lambda: tidu.vmap(tidu.grad(lambda x: tnp.sum(tnp.exp(x) * x)))(np.outer(X, X))),
        ("jacrev", lambda: tidu.jacrev(lambda x: g(x, 2.0 * x))(X)),
        ("shared", lambda: SHARED(X)),
        ("stablehlo", lambda: np.frombuffer(
            tidu.make_graph(tidu.grad(lambda x: f(x)))(X).to_stablehlo().encode(), dtype=np.uint8)),
        ("xla", lambda: tidu.make_graph(tidu.grad(lambda x: f(x)))(X).program.run([X], backend="xla")[0]),
    ]


SHARED = tidu.grad(lambda x: tnp.sum(tnp.log1p(x * x)) if hasattr(tnp, "log1p") else tnp.sum(tnp.log(1.0 + x * x)))


def _same(a, b):
    return np.asarray(a).dtype == np.asarray(b).dtype and np.array_equal(a, b, equal_nan=True)


@pytest.fixture
def expected():
    tidu.clear_trace_cache()
    return {name: make() for name, make in _cases()}


def test_threads_give_single_threaded_results(expected):
    tidu.clear_trace_cache()
    tidu.clear_cache()
    cases = _cases()
    results: list[tuple[str, object]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def work(offset: int) -> None:
        try:
            start.wait()
            for i in range(3 * len(cases)):
                name, make = cases[(offset + i) % len(cases)]
                results.append((name, make()))
        except BaseException as e:  # collected: a failure in a thread must fail the test
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often: races show up in every run
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        sys.setswitchinterval(interval)
    assert not errors, repr(errors[0])
    assert len(results) == 8 * 3 * len(cases)
    for name, value in results:
        assert _same(value, expected[name]), name


def test_asyncio_tasks_trace_independently(expected):
    async def one(name, make):
        await asyncio.sleep(0)
        return name, make()

    async def main():
        return await asyncio.gather(*(one(n, m) for n, m in _cases() * 2))

    for name, value in asyncio.run(main()):
        assert _same(value, expected[name]), name


def test_nested_transforms_in_threads_with_their_own_catalog_and_semantics():
    out = {}

    def work(k):
        with tidu.rewrite_semantics("real" if k % 2 else "exact"):
            out[k] = tidu.grad(tidu.grad(lambda x: tnp.sin(x) * tnp.exp(x)))(0.3 + k)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    for k in range(6):
        x = 0.3 + k
        assert np.isclose(out[k], 2 * np.cos(x) * np.exp(x), rtol=1e-12)
