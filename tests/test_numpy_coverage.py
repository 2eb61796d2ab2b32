"""Every public tidu.numpy function against jax.numpy (float64 / complex128, CPU): values,
first and second derivatives, on random shapes, real and complex where defined.

``CASES`` maps a function name to how to call it (argument kinds, keyword arguments, which
arguments are differentiated). For real inputs the derivatives checked are the gradient of
``sum(w * f(x))`` (reverse mode) and its JVP (a Hessian-vector product, forward over
reverse); for complex inputs the JVP and the JVP of the JVP (both conventions agree with
JAX there). ``test_every_public_name_is_tested_or_excluded`` keeps the table complete.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import tidu  # noqa: E402
import tidu.numpy as tnp  # noqa: E402

RTOL, ATOL = 1e-9, 1e-11


@dataclass
class Case:
    """How to call one function: ``args`` are argument kinds (see ``draw``) or constants
    (anything that is not a str), ``diff`` the positions differentiated (default: the drawn
    inexact ones), ``complex`` whether complex inputs are tried too, ``grad`` False for
    functions whose output has no derivative (bools, integers, piecewise constants)."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    diff: tuple[int, ...] | None = None
    complex: bool = True
    grad: bool = True
    jax_name: str | None = None
    jax_fn: Callable | None = None
    slow: bool = False


def draw(rng: np.random.Generator, kind: str, dtype: str, shape: tuple[int, ...]) -> Any:
    """One argument: ``x`` (normal), ``u`` (in (-0.9, 0.9)), ``p`` (in (0.5, 2)), ``g1`` (> 1.2),
    ``s`` (a scalar), ``xn`` (normal, a quarter nan), ``i`` (integers in [-3, 3]), ``b``
    (bools); a suffix ``:2x3`` fixes the shape."""
    kind, _, fixed = kind.partition(":")
    if fixed:
        shape = tuple(int(d) for d in fixed.split("x")) if fixed != "0" else ()
    cplx = dtype == "complex128"
    if kind == "i":
        return rng.integers(-3, 4, size=shape)
    if kind == "b":
        return rng.random(shape) < 0.5
    if kind == "s":
        shape = ()
    lo_hi = {"u": (-0.9, 0.9), "p": (0.5, 2.0), "g1": (1.2, 3.0)}.get(kind)
    if kind == "xn":  # normal with some nan
        out = draw(rng, "x", dtype, shape)
        return np.where(rng.random(shape) < 0.25, np.nan, out)
    if lo_hi is None:
        re = rng.normal(size=shape)
        im = rng.normal(size=shape)
    else:
        re = rng.uniform(*lo_hi, size=shape)
        im = rng.uniform(-0.3, 0.3, size=shape)
    out = re + 1j * im if cplx else re
    return np.asarray(out) if shape else out.item() if isinstance(out, np.ndarray) else out


def _shape(rng: np.random.Generator) -> tuple[int, ...]:
    return [(5,), (3, 4), (2, 3, 4), (4, 3)][int(rng.integers(4))]


X, XN, U, P, G1, I_, B = "x", "xn", "u", "p", "g1", "i", "b"

CASES: dict[str, Case] = {
    # elementwise: rounding and modular arithmetic
    "floor": Case((X,), complex=False, grad=False),
    "ceil": Case((X,), complex=False, grad=False),
    "rint": Case((X,), complex=False, grad=False),
    "trunc": Case((X,), complex=False, grad=False),
    "fix": Case((X,), complex=False, grad=False, jax_name="trunc"),
    "round": Case((X,), {"decimals": 2}, complex=False, grad=False),
    "around": Case((X,), complex=False, grad=False, jax_name="round"),
    "fmod": Case((X, P), complex=False),
    "remainder": Case((X, P), complex=False),
    "mod": Case((X, P), complex=False),
    "floor_divide": Case((X, P), complex=False, grad=False),
    "divmod": Case((X, P), complex=False, grad=False),
    "modf": Case((X,), complex=False),
    # inverse trigonometric and hyperbolic, angles
    "arctan2": Case((X, X), complex=False),
    "arctan": Case((X,)),
    "arcsin": Case((U,)),
    "arccos": Case((U,)),
    "arcsinh": Case((X,)),
    "arccosh": Case((G1,)),
    "arctanh": Case((U,)),
    "hypot": Case((X, X), complex=False),
    "deg2rad": Case((X,), complex=False),
    "rad2deg": Case((X,), complex=False),
    "radians": Case((X,), complex=False),
    "degrees": Case((X,), complex=False),
    "angle": Case((X,), grad=False),
    "exp2": Case((X,)),
    "logaddexp": Case((X, X), complex=False),
    "logaddexp2": Case((X, X), complex=False),
    "cbrt": Case((P,), complex=False),
    "sinc": Case((X,), complex=False),
    "float_power": Case((P, X), complex=False),
    "fabs": Case((P,), complex=False),
    "copysign": Case((P, X), complex=False),
    "signbit": Case((X,), complex=False, grad=False),
    "heaviside": Case((X, X), complex=False, grad=False),
    "fmax": Case((X, X), complex=False),
    "fmin": Case((X, X), complex=False),
    "ldexp": Case((X, I_), complex=False),
    # predicates and logic
    "isnan": Case((X,), grad=False),
    "isfinite": Case((X,), grad=False),
    "isinf": Case((X,), grad=False),
    "isposinf": Case((X,), complex=False, grad=False),
    "isneginf": Case((X,), complex=False, grad=False),
    "nan_to_num": Case((X,)),
    "isclose": Case((X, X), grad=False),
    "allclose": Case((X, X), grad=False),
    "logical_and": Case((B, B), complex=False, grad=False),
    "logical_or": Case((B, B), complex=False, grad=False),
    "logical_xor": Case((B, B), complex=False, grad=False),
    "logical_not": Case((B,), complex=False, grad=False),
    # reductions and statistics
    "sum": Case((X,), {"axis": -1}),
    "prod": Case((X,), {"axis": 0}),
    "max": Case((X,), {"axis": -1}, complex=False),
    "amax": Case((X,), complex=False),
    "min": Case((X,), {"axis": 0, "keepdims": True}, complex=False),
    "amin": Case((X,), complex=False),
    "mean": Case((X,), {"axis": 0}),
    "all": Case((B,), {"axis": 0}, complex=False, grad=False),
    "any": Case((X,), {"axis": -1}, grad=False),
    "count_nonzero": Case((I_,), {"axis": 0}, complex=False, grad=False),
    "ptp": Case((X,), {"axis": -1}, complex=False),
    "var": Case((X,), {"axis": 0, "ddof": 1}),
    "std": Case((X,), {"axis": -1}),
    "average": Case((X, None, P)),
    "logsumexp": Case((X,), {"axis": -1}, complex=False, jax_fn=jax.scipy.special.logsumexp),
    "nansum": Case(("xn:3x4",), {"axis": 0}),
    "nanprod": Case((XN,), {"axis": 0}),
    "nanmean": Case((XN,), {"axis": -1}),
    "nanmax": Case((XN,), complex=False),
    "nanmin": Case((XN,), {"axis": 0}, complex=False),
    "nanvar": Case((XN,), {"axis": 0}),
    "nanstd": Case((XN,), {"axis": 0}),
    "argmax": Case((X,), {"axis": -1}, complex=False, grad=False),
    "argmin": Case((X,), complex=False, grad=False),
    "nanargmax": Case((XN,), {"axis": 0}, complex=False, grad=False),
    "nanargmin": Case((XN,), complex=False, grad=False),
}


# --- the checks ----------------------------------------------------------------------------


def close(got: Any, want: Any, what: str) -> None:
    g_leaves = jax.tree_util.tree_leaves(got)
    w_leaves = jax.tree_util.tree_leaves(want)
    assert len(g_leaves) == len(w_leaves), f"{what}: {len(g_leaves)} outputs, JAX {len(w_leaves)}"
    for g, w in zip(g_leaves, w_leaves, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"{what}: shape {g.shape}, JAX {w.shape}"
        if w.dtype == bool or np.issubdtype(w.dtype, np.integer):
            np.testing.assert_array_equal(g, w, err_msg=what)
        else:
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=what)


def _weights(rng: np.random.Generator, out: Any) -> list[np.ndarray]:
    return [rng.normal(size=np.shape(o)) for o in jax.tree_util.tree_leaves(out)]


def check(name: str, dtype: str) -> None:
    case = CASES[name]
    rng = np.random.default_rng(zlib.crc32(f"{name}/{dtype}".encode()))
    shape = _shape(rng)
    args = [draw(rng, a, dtype, shape) if isinstance(a, str) else a for a in case.args]
    fn_t: Callable = getattr(tnp, name)
    fn_j: Callable = case.jax_fn or getattr(jnp, case.jax_name or name)
    kw = case.kwargs

    def ft(*a: Any) -> Any:
        return fn_t(*a, **kw)

    def fj(*a: Any) -> Any:
        return fn_j(*a, **kw)

    want = fj(*args)
    close(tidu.jit(ft)(*args), want, f"{name} value")
    if not case.grad:
        return
    diff = case.diff if case.diff is not None else tuple(
        i for i, a in enumerate(case.args) if isinstance(a, str) and a.split(":")[0] not in ("i", "b"))
    ws = _weights(rng, want)

    def partial(f: Callable) -> Callable:
        def g(*d: Any) -> Any:
            full = list(args)
            for i, v in zip(diff, d, strict=True):
                full[i] = v
            return f(*full)
        return g

    primals = tuple(args[i] for i in diff)
    tangents = tuple(draw(rng, "x", dtype, np.shape(args[i])) for i in diff)
    if dtype == "float64":
        def loss(m: Any, f: Callable) -> Callable:
            return lambda *d: sum(m.sum(w * m.real(o)) for w, o in zip(
                ws, jax.tree_util.tree_leaves(f(*d)), strict=True))

        lt, lj = loss(tnp, partial(ft)), loss(jnp, partial(fj))
        argnums = tuple(range(len(diff)))
        close(tidu.grad(lt, argnums=argnums)(*primals), jax.grad(lj, argnums=argnums)(*primals),
              f"{name} gradient")
        close(tidu.jvp(tidu.grad(lt, argnums=argnums), primals, tangents)[1],
              jax.jvp(jax.grad(lj, argnums=argnums), primals, tangents)[1], f"{name} hvp")
    else:
        close(tidu.jvp(partial(ft), primals, tangents)[1], jax.jvp(partial(fj), primals, tangents)[1],
              f"{name} jvp")
        t2 = tuple(draw(rng, "x", dtype, np.shape(args[i])) for i in diff)
        close(tidu.jvp(lambda *p: tidu.jvp(partial(ft), p, tangents)[1], primals, t2)[1],
              jax.jvp(lambda *p: jax.jvp(partial(fj), p, tangents)[1], primals, t2)[1],
              f"{name} second jvp")


def _params() -> list[Any]:
    out = []
    for name, case in CASES.items():
        for dtype in ("float64", "complex128") if case.complex else ("float64",):
            marks = [pytest.mark.slow] if case.slow else []
            out.append(pytest.param(name, dtype, id=f"{name}-{dtype}", marks=marks))
    return out


@pytest.mark.parametrize(("name", "dtype"), _params())
def test_against_jax(name: str, dtype: str) -> None:
    check(name, dtype)
