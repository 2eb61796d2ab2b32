"""tidu leaves JAX's configuration alone: after tidu.to_jax and Program.run(backend="xla")
a user's float32 JAX code still computes in float32 (jax_enable_x64 stays off), while
tidu's own float64 programs still run in float64 on XLA. In a fresh interpreter, since
the test session itself turns 64-bit types on."""

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("jax")

CODE = textwrap.dedent("""
    import numpy as np, jax, jax.numpy as jnp
    import tidu, tidu.numpy as tnp

    def f(x):
        return tnp.sum(tnp.sin(x) ** 2)

    g = jax.jit(tidu.to_jax(tidu.grad(f)))(jnp.ones(3, jnp.float32))
    assert g.dtype == jnp.float32 and np.allclose(g, np.sin(2.0)), g
    assert tidu.to_jax(f)(np.ones(3)).dtype == jnp.float32  # float64 NumPy input is float32 to JAX here
    assert not jax.config.jax_enable_x64 and jnp.ones(2).dtype == jnp.float32
    program = tidu.make_graph(tidu.grad(f))(np.ones(3)).program
    out = program.run([np.ones(3)], backend="xla")[0]
    assert out.dtype == np.float64 and np.allclose(out, np.sin(2.0), rtol=1e-13), out
    assert not jax.config.jax_enable_x64 and jnp.ones(2).dtype == jnp.float32
    print("ok")
""")


def test_to_jax_and_the_xla_backend_leave_jax_x64_off():
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
