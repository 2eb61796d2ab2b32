"""One classical Runge-Kutta step, for tests that integrate ODEs with any array library."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def rk4_step(rhs: Callable[[Any, Any], Any], dt: float) -> Callable[[Any, Any], Any]:
    """``step(x, p)``: the state after one RK4 step of x' = rhs(x, p) of length dt."""
    def step(x: Any, p: Any) -> Any:
        k1 = rhs(x, p)
        k2 = rhs(x + 0.5 * dt * k1, p)
        k3 = rhs(x + 0.5 * dt * k2, p)
        k4 = rhs(x + dt * k3, p)
        return x + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
    return step
