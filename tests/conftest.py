"""Hypothesis profiles for the property suite (tests/test_properties.py).

- ``ci`` (the default): 70 examples per property (5 properties: 350 in total),
  derandomized so every run tries the same examples, no example database.
- ``slow``: 2,100 examples per property (10,500 in total), random, with the example
  database; run with ``HYPOTHESIS_PROFILE=slow pytest tests/test_properties.py``.

Neither has a deadline or the too-slow health check: on a loaded machine an example may
take any time, and a test's outcome must not depend on the machine's speed. Every
``@settings`` in the tests inherits this.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import sys

import pytest
from hypothesis import HealthCheck, settings

# SymPy's part of a derivative check is bounded by time (tidu.sympy.check): here the bound
# is a hang guard, so a test's verdict ("proved", "yes") never depends on the machine's
# speed; tests of the bound itself pass their own timeout. Subprocesses inherit it.
os.environ.setdefault("TIDU_SYMPY_TIMEOUT", "600")

settings.register_profile(
    "ci", max_examples=70, derandomize=True, database=None, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "slow", max_examples=2100, deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True, scope="module")
def _release_memory_between_modules():
    """After each test module, drop tidu's program caches and JAX's compiled executables and give
    freed heap back to the OS, so that a worker's memory reflects one module, not the whole run
    (`pytest -q` runs two workers and must stay under 2 GB together). What survives that is
    frozen (gc.freeze): imported modules, JAX, SymPy and the test modules' globals, which the
    collector would otherwise scan again in every full collection of the modules after."""
    yield
    from tidu.lowering.compile import clear_cache

    from tidu.transforms.transformed import clear_trace_cache

    clear_trace_cache()
    clear_cache()
    jax = sys.modules.get("jax")
    if jax is not None:
        jax.clear_caches()
    gc.collect()
    gc.freeze()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):  # not glibc
            ctypes.CDLL("libc.so.6").malloc_trim(0)
