"""Linear algebra kernels of an accelerator platform, as JAX lowers them.

XLA runs the standard StableHLO ops everywhere, but on GPUs some of them are far from
the vendor's solvers (``stablehlo.cholesky`` is expanded into loops of small ops, while
JAX calls cuSOLVER's potrf). The solver calls themselves are custom calls whose names,
operands and layouts are the platform plugin's business. Rather than spell them here,
tidu asks JAX, through its public export API, for the module of the same operation on
that platform, and calls it as a private function of tidu's own module.

``kernel(name, platform, avals)`` returns ``(symbol, functions)``: the private function
to call and the text of the functions to add to the module (its callees renamed with the
same prefix). Deterministic for a given JAX version. Needs jax (imported here only).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import numpy as np

from tidu.core.keys import Aval


class PlatformKernelError(ValueError):
    """JAX could not give the kernel for this platform (no jax, no lowering there)."""


# Each kernel gives what the LAPACK routine of the same name gives on the CPU (tidu's
# StableHLO lowering reads the same results either way), except "qr": (Q, R) reduced.


def _cholesky(jax: Any) -> Callable[..., Any]:
    # lower triangle of the factor; nan where the matrix is not positive definite (as JAX)
    return lambda a: jax.lax.linalg.cholesky(a, symmetrize_input=False)


def _no_info(jax: Any, a: Any) -> Any:
    return jax.numpy.zeros(a.shape[:-2], "int32")  # LAPACK's info: JAX reports failures as nan


def _getrf(jax: Any) -> Callable[..., Any]:
    def getrf(a: Any) -> tuple[Any, ...]:  # (LU, 1-based row swaps as LAPACK's ipiv, info)
        lu, pivots, _ = jax.lax.linalg.lu(a)
        return lu, (pivots + 1).astype("int32"), _no_info(jax, a)

    return getrf


def _syevd(jax: Any) -> Callable[..., Any]:
    def syevd(a: Any) -> tuple[Any, ...]:  # (eigenvectors, ascending eigenvalues, info) of the lower triangle
        v, w = jax.lax.linalg.eigh(a, lower=True, symmetrize_input=False)
        return v, w, _no_info(jax, a)

    return syevd


def _gesdd(jax: Any) -> Callable[..., Any]:
    def gesdd(a: Any) -> tuple[Any, ...]:  # (a, s, U, Vh, info), reduced
        u, s, vh = jax.lax.linalg.svd(a, full_matrices=False)
        return a, s, u, vh, _no_info(jax, a)

    return gesdd


def _qr(jax: Any) -> Callable[..., Any]:
    return lambda a: jax.lax.linalg.qr(a, full_matrices=False)


# kernel name -> the JAX function of it (given the jax module)
KERNELS: dict[str, Callable[[Any], Callable[..., Any]]] = {
    "cholesky": _cholesky, "getrf": _getrf, "syevd": _syevd, "heevd": _syevd, "gesdd": _gesdd, "qr": _qr,
}

_FUNC = re.compile(r"func\.func (?:public |private )?@([A-Za-z_][\w$.]*)")


@cache
def kernel(name: str, platform: str, avals: tuple[Aval, ...]) -> tuple[str, str]:
    """(the symbol to call, the functions' text) of kernel ``name`` on ``platform`` for
    operands ``avals``."""
    try:
        import jax
        from jax import export
        from jax.extend.mlir import ir
        from jax.interpreters import mlir as jax_mlir
    except ImportError as e:
        raise PlatformKernelError(f"{name} on {platform} is lowered by JAX, which is not installed ({e})") from e
    make = KERNELS.get(name)
    if make is None:
        raise PlatformKernelError(f"no {platform} kernel for {name}")
    shapes = [jax.ShapeDtypeStruct(a.shape, np.dtype(a.dtype)) for a in avals]
    try:
        with jax.enable_x64(True):
            exp = export.export(jax.jit(make(jax)), platforms=[platform])(*shapes)
    except Exception as e:  # JAX's own message says what is missing on that platform
        raise PlatformKernelError(f"JAX cannot lower {name} for {platform}: {e}") from e
    with jax_mlir.make_ir_context():
        module = ir.Module.parse(exp.mlir_module())
        text = module.operation.get_asm(enable_debug_info=False)
    return _as_private_functions(text, name, platform, avals)


def _as_private_functions(text: str, name: str, platform: str, avals: Sequence[Aval]) -> tuple[str, str]:
    """The functions of a JAX module, private and renamed with a prefix of their own."""
    lines = text.strip().splitlines()
    if not (lines[0].startswith("module") and lines[0].endswith("{") and lines[-1] == "}"):
        raise PlatformKernelError(f"JAX's module for {name} on {platform} is not one module block")
    body = "\n".join(lines[1:-1])
    symbols = _FUNC.findall(body)
    if "main" not in symbols:
        raise PlatformKernelError(f"JAX's module for {name} on {platform} has no @main")
    tag = "x".join("_".join(map(str, a.shape)) + a.dtype for a in avals)
    prefix = f"tidu_{name}_{platform}_{tag}_"
    for sym in sorted(symbols, key=len, reverse=True):
        body = re.sub(rf"@{re.escape(sym)}\b", f"@{prefix}{sym}", body)
    body = body.replace("func.func public @", "func.func private @")
    return f"{prefix}main", "\n".join("  " + ln.strip() if ln.strip().startswith("func.func") else ln
                                      for ln in body.strip("\n").splitlines())


__all__ = ["KERNELS", "PlatformKernelError", "kernel"]
