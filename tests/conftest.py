"""Hypothesis profiles for the property suite (tests/test_properties.py).

- ``ci`` (the default): 70 examples per property (5 properties: 350 in total),
  derandomized so every run tries the same examples, no example database.
- ``slow``: 2,100 examples per property (10,500 in total), random, with the example
  database; run with ``HYPOTHESIS_PROFILE=slow pytest tests/test_properties.py``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=70, derandomize=True, database=None, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "slow", max_examples=2100, deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
