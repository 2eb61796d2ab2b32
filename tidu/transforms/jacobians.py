"""Derivative matrices: ``jacfwd``, ``jacrev``, ``hessian`` (dense, or ``sparse=True``
through a coloring of the sparsity pattern, ``tidu.transforms.sparse_ad``) and ``hvp``."""


from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tidu.trace.tracing import current_trace
from tidu.transforms.api import check_primals, freeze_argnums, grad, jvp
from tidu.transforms.nested import (
    check_argnums_type,
    jacfwd_nested,
    jacrev_nested,
)
from tidu.transforms.sparse_ad import dense_hessian_call, sparse_derivative
from tidu.transforms.staging import function_name
from tidu.transforms.transformed import Transformed


def jacfwd(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, sparse: bool = False) -> Any:
    """The Jacobian by forward mode: one JVP batched over the identity of each input
    (tidu.vmap's machinery), so the program does not grow with the input's size.
    ``sparse=True``: a ``scipy.sparse`` CSR array from one JVP batched over the colors of
    its sparsity pattern (tidu.transforms.sparse_ad)."""
    check_argnums_type(argnums, "jacfwd")
    if sparse:
        return _sparse(fun, argnums, "jacfwd")
    tf = Transformed("jacfwd", fun, (freeze_argnums(argnums),), lambda *args: jacfwd_nested(fun, argnums, args))
    tf._remake = lambda f: jacfwd(f, argnums)
    return tf


def jacrev(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, sparse: bool = False) -> Any:
    """The Jacobian by reverse mode: one VJP batched over the identity of each output
    (rows are tidu gradients, the conjugate of JAX's for complex inputs). ``sparse=True``:
    a CSR array from one VJP batched over the colors of the pattern's rows."""
    check_argnums_type(argnums, "jacrev")
    if sparse:
        return _sparse(fun, argnums, "jacrev")
    tf = Transformed("jacrev", fun, (freeze_argnums(argnums),), lambda *args: jacrev_nested(fun, argnums, args))
    tf._remake = lambda f: jacrev(f, argnums)
    return tf


HESSIAN_MODES = {"FoF": (jacfwd, jacfwd), "FoR": (jacfwd, jacrev), "RoF": (jacrev, jacfwd),
                 "RoR": (jacrev, jacrev)}


jacobian = jacrev  # JAX's name for the reverse-mode Jacobian


def hessian(fun: Callable[..., Any], argnums: int | Sequence[int] = 0,
            mode: str = "FoR", sparse: bool = False) -> Any:
    """Second derivatives: ``mode`` is outer-o-inner, F(orward) or R(everse):
    "FoF" jacfwd(jacfwd), "FoR" jacfwd(jacrev) (default), "RoF", "RoR". ``sparse=True``:
    a ``scipy.sparse`` CSR array from Hessian-vector products (forward over reverse)
    batched over a star coloring of its sparsity pattern (tidu.transforms.sparse_ad)."""
    if mode not in HESSIAN_MODES:
        raise ValueError(f"tidu.hessian: mode must be one of {', '.join(HESSIAN_MODES)}, "
                         f"got {mode!r}")
    if sparse:
        return _sparse(fun, argnums, "hessian")
    outer, inner = HESSIAN_MODES[mode]
    tf = outer(inner(fun, argnums), argnums)
    if mode == "FoR":  # concrete calls: a sparse Hessian is evaluated through a coloring
        tf._concrete = dense_hessian_call(fun, argnums)
    tf._remake, tf._base = (lambda f: hessian(f, argnums, mode)), fun
    return tf


def _sparse(fun: Callable[..., Any], argnums: Any, kind: str) -> Callable[..., Any]:
    """The sparse form of a derivative: concrete arguments only (its result is a SciPy
    array, which no transform can trace)."""
    if not callable(fun):
        raise TypeError(f"tidu.{kind} takes a function, got {type(fun).__name__}")
    dense = sparse_derivative(fun, argnums, kind)

    def call(*args: Any) -> Any:
        if current_trace() is not None:
            raise TypeError(f"tidu.{kind}(..., sparse=True) returns a scipy.sparse array and cannot be used "
                            f"inside another transform; use tidu.{kind}(...) (dense) there")
        return dense(*args)

    call.__name__ = call.__qualname__ = f"{kind}({function_name(fun)}, sparse=True)"
    return call


def hvp(fun: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]) -> Any:
    """Hessian-vector product (forward over reverse): jvp(grad(fun), primals, tangents)[1]."""
    check_primals("hvp", primals, tangents)
    argnums = 0 if len(primals) == 1 else tuple(range(len(primals)))
    return jvp(grad(fun, argnums), tuple(primals), tuple(tangents))[1]


__all__ = ["HESSIAN_MODES", "hessian", "hvp", "jacfwd", "jacobian", "jacrev"]
