"""tidu and JAX: tidu.to_jax under jax.jit and jax.vmap, JAX arrays as tidu inputs, a batch
of Hessians sharded over 8 (forced host) devices, and public JAX API only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def f(x):
    return tnp.sum(tnp.sin(x) ** 2 * x)


def df(x):
    return 2 * np.sin(x) * np.cos(x) * x + np.sin(x) ** 2


def test_to_jax_calls_jit_and_vmap():
    g = tidu.to_jax(tidu.grad(f))
    x = jnp.linspace(0.1, 1.0, 5)
    np.testing.assert_allclose(g(x), df(np.asarray(x)), rtol=1e-13)
    np.testing.assert_allclose(jax.jit(g)(x), df(np.asarray(x)), rtol=1e-13)
    xs = jnp.linspace(0.1, 1.0, 15).reshape(3, 5)
    np.testing.assert_allclose(jax.vmap(g)(xs), df(np.asarray(xs)), rtol=1e-13)
    np.testing.assert_allclose(jax.jit(jax.vmap(jax.vmap(g)))(xs[None]), df(np.asarray(xs))[None], rtol=1e-13)
    # vmap with an unmapped argument: tidu's own batching rule with in_axes None
    h = tidu.to_jax(lambda a, b: a * tnp.sum(b))
    np.testing.assert_allclose(jax.vmap(h, in_axes=(0, None))(xs, x), np.asarray(xs) * float(x.sum()))


def test_to_jax_pytrees_and_composition_with_jax_code():
    h = tidu.to_jax(lambda d: {"p": d["a"] * d["b"], "s": tnp.sum(d["a"])})
    out = jax.jit(lambda d: h(d)["p"] + jnp.cos(d["b"]))({"b": jnp.ones(2), "a": jnp.arange(2.0)})
    np.testing.assert_allclose(out, np.arange(2.0) + np.cos(1.0))


def test_jax_cannot_differentiate_a_tidu_program():
    g = tidu.to_jax(f)
    with pytest.raises(TypeError, match=r"tidu.to_jax\(tidu.grad\(f\)\)"):
        jax.grad(g)(jnp.ones(3))


def test_jax_arrays_are_tidu_inputs():
    x = jnp.linspace(0.1, 1.0, 4)
    np.testing.assert_allclose(tidu.grad(f)(x), df(np.asarray(x)), rtol=1e-13)
    np.testing.assert_allclose(tidu.hessian(f)(x), jax.hessian(lambda x: jnp.sum(jnp.sin(x) ** 2 * x))(x),
                               rtol=1e-12, atol=1e-13)
    program = tidu.compile(tidu.make_graph(f)(x).graph)
    assert program.eval([x])[0] == pytest.approx(float(jnp.sum(jnp.sin(x) ** 2 * x)), rel=1e-14)


SHARDED = """
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ["JAX_PLATFORMS"] = "cpu"
import jax, numpy as np
jax.config.update("jax_enable_x64", True)
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import tidu, tidu.numpy as tnp

def rosen(x):
    return tnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

xs = np.random.default_rng(0).uniform(0.5, 1.5, (64, 6))
hess = tidu.to_jax(tidu.vmap(tidu.hessian(rosen)))
mesh = Mesh(np.array(jax.devices()), ("batch",))
assert len(jax.devices()) == 8
sharded = jax.device_put(xs, NamedSharding(mesh, P("batch")))
out = jax.jit(jax.shard_map(hess, mesh=mesh, in_specs=P("batch"), out_specs=P("batch")))(sharded)
assert len(out.sharding.device_set) == 8, out.sharding
single = tidu.vmap(tidu.hessian(rosen))(xs)
np.testing.assert_allclose(np.asarray(out), single, rtol=1e-13, atol=1e-11)
print("ok")
"""


def test_a_sharded_batch_of_hessians_equals_one_device():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", SHARDED], capture_output=True, text=True, env=env, timeout=300,
                       check=False)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]


def test_no_private_jax_api():
    hits = [f"{p.relative_to(ROOT)}:{i}" for d in ("tidu", "lowering", "bench", "tests")
            for p in (ROOT / d).rglob("*.py") if p.name != "test_interop.py"
            for i, line in enumerate(p.read_text().splitlines(), 1) if "jax._src" in line]
    assert hits == []
