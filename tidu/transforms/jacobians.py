"""Derivative matrices: ``jacfwd``, ``jacrev``, ``hessian`` (dense, or ``sparse=True``
through a coloring of the sparsity pattern, ``tidu.transforms.sparse_ad``) and ``hvp``.

``has_aux`` and ``holomorphic`` are JAX's: with ``has_aux`` the function returns
``(output, aux)`` and the transform ``(jacobian, aux)``; with ``holomorphic`` the
differentiated arguments and the outputs must be complex, and the result is the complex
derivative f'(z) JAX gives (``jacrev``'s rows are tidu's adjoints, conjugated back)."""


from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

import numpy as np

from tidu import numpy as tnp
from tidu.core.keys import is_complex
from tidu.core.pytree import flatten, leaf_paths, tree_map
from tidu.trace.tracing import Tracer, current_trace
from tidu.transforms.api import check_primals, freeze_argnums, grad, jit, jvp
from tidu.transforms.nested import (
    check_argnums_type,
    jacfwd_nested,
    jacrev_nested,
    normalize_argnums,
)
from tidu.transforms.sparse_ad import dense_hessian_call, sparse_derivative
from tidu.transforms.staging import arg_names, function_name
from tidu.transforms.transformed import Transformed, fn_key


def jacfwd(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False, *, sparse: bool = False) -> Any:
    """The Jacobian by forward mode: one JVP batched over the identity of each input
    (tidu.vmap's machinery), so the program does not grow with the input's size.
    ``has_aux``: ``fun`` returns ``(output, aux)``; the result is ``(jacobian, aux)``.
    ``holomorphic``: complex arguments and outputs, the complex derivative (as JAX's).
    ``sparse=True``: a ``scipy.sparse`` CSR array from one JVP batched over the colors of
    its sparsity pattern (tidu.transforms.sparse_ad)."""
    return _jacobian("jacfwd", fun, argnums, has_aux, holomorphic, sparse)


def jacrev(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False, allow_int: bool = False, *, sparse: bool = False) -> Any:
    """The Jacobian by reverse mode: one VJP batched over the identity of each output
    (rows are tidu gradients, the conjugate of JAX's for complex inputs; with
    ``holomorphic=True`` they are conjugated back: JAX's f'(z)). ``has_aux``: ``fun``
    returns ``(output, aux)``; the result is ``(jacobian, aux)``. ``allow_int=True``, as
    JAX's: integer and boolean arguments in ``argnums`` get zero blocks of their dtype.
    ``sparse=True``: a CSR array from one VJP batched over the colors of the pattern's rows."""
    return _jacobian("jacrev", fun, argnums, has_aux, holomorphic, sparse, allow_int)


def _jacobian(kind: str, fun: Callable[..., Any], argnums: Any, has_aux: bool, holomorphic: bool,
              sparse: bool, allow_int: bool = False) -> Any:
    check_argnums_type(argnums, kind)
    _check_flags(kind, has_aux=has_aux, holomorphic=holomorphic, sparse=sparse, allow_int=allow_int)
    if sparse:
        if allow_int:
            raise TypeError(f"tidu.{kind}(sparse=True) differentiates float and complex arguments only; drop "
                            "allow_int=True, or leave the integer arguments out of argnums")
        return _sparse(fun, argnums, kind, has_aux, holomorphic)
    checked = _checked(fun, kind, argnums, has_aux, holomorphic)

    def nested(*args: Any) -> Any:
        out = (jacfwd_nested(checked, argnums, args, has_aux) if kind == "jacfwd" else
               jacrev_nested(checked, argnums, args, has_aux, allow_int))
        if holomorphic and kind == "jacrev":  # tidu's rows are adjoints: conj(f'(z))
            jac = tree_map(tnp.conj, out[0] if has_aux else out)
            out = (jac, out[1]) if has_aux else jac
        return out

    params = (freeze_argnums(argnums), has_aux, holomorphic) + ((True,) if allow_int else ())
    tf = Transformed(kind, fun, params, nested)
    tf._remake = lambda f: _jacobian(kind, f, argnums, has_aux, holomorphic, False, allow_int)
    return tf


def _check_flags(kind: str, **flags: Any) -> None:
    for name, value in flags.items():
        if not isinstance(value, bool | np.bool_):
            hint = (" (mode is a keyword argument: tidu.hessian(f, argnums, mode=...))"
                    if kind == "hessian" and isinstance(value, str) else "")
            raise TypeError(f"tidu.{kind}: {name} must be True or False, got {value!r}{hint}")


def _leaf_dtype(leaf: Any) -> str:
    if isinstance(leaf, Tracer):
        return str(leaf.aval.dtype)
    if isinstance(getattr(leaf, "dtype", None), np.dtype):  # (a JAX tracer refuses np.asarray)
        return leaf.dtype.name
    return np.asarray(leaf).dtype.name


def _checked(fun: Callable[..., Any], kind: str, argnums: Any, has_aux: bool,
             holomorphic: bool) -> Callable[..., Any]:
    """``fun`` with JAX's dtype rules for ``holomorphic=True`` checked on each trace: the
    differentiated arguments and the outputs are complex."""
    if not holomorphic:
        return fun

    @functools.wraps(fun, updated=())  # (not a Transformed's attributes)
    def checked(*args: Any) -> Any:
        for where, dtype in _differentiated_leaves(fun, kind, argnums, args):
            if not is_complex(dtype):
                raise TypeError(
                    f"tidu.{kind}(holomorphic=True) requires complex arguments to differentiate, got "
                    f"argument {where} of dtype {dtype}; pass a complex value "
                    "(np.asarray(x, complex)) or drop holomorphic=True")
        out = fun(*args)
        primary = out[0] if has_aux and isinstance(out, tuple) and len(out) == 2 else out
        for leaf, path in zip(flatten(primary)[0], leaf_paths(primary), strict=True):
            dtype = _leaf_dtype(leaf)
            if not is_complex(dtype):
                raise TypeError(f"tidu.{kind}(holomorphic=True) requires complex outputs, got output{path} of "
                                f"{function_name(fun)} of dtype {dtype}; return a complex value or drop "
                                "holomorphic=True")
        return out

    return checked


HESSIAN_MODES = {"FoF": (jacfwd, jacfwd), "FoR": (jacfwd, jacrev), "RoF": (jacrev, jacfwd),
                 "RoR": (jacrev, jacrev)}


jacobian = jacrev  # JAX's name for the reverse-mode Jacobian


def hessian(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
            holomorphic: bool = False, *, mode: str = "FoR", sparse: bool = False) -> Any:
    """Second derivatives: ``mode`` is outer-o-inner, F(orward) or R(everse):
    "FoF" jacfwd(jacfwd), "FoR" jacfwd(jacrev) (default), "RoF", "RoR". ``has_aux`` and
    ``holomorphic`` as JAX's (both Jacobians take them: the result is ``(hessian, aux)``,
    resp. f''(z) in every mode). ``sparse=True``: a ``scipy.sparse`` CSR array from
    Hessian-vector products (forward over reverse: mode "FoR" only) batched over a star
    coloring of its sparsity pattern (tidu.transforms.sparse_ad)."""
    if not callable(fun):  # (here, or the inner Jacobian's error would name jacrev)
        raise TypeError(f"tidu.hessian takes a function, got {type(fun).__name__}")
    _check_flags("hessian", has_aux=has_aux, holomorphic=holomorphic, sparse=sparse)
    check_argnums_type(argnums, "hessian")
    if mode not in HESSIAN_MODES:
        raise ValueError(f"tidu.hessian: mode must be one of {', '.join(HESSIAN_MODES)}, "
                         f"got {mode!r}")
    if sparse:
        if mode != "FoR":
            raise ValueError(f"tidu.hessian(sparse=True) computes Hessian-vector products forward over reverse "
                             f"(mode='FoR') only, got mode={mode!r}; drop mode=, or use the dense "
                             f"tidu.hessian(f, mode={mode!r})")
        return _sparse(fun, argnums, "hessian", has_aux, holomorphic)
    outer, inner = HESSIAN_MODES[mode]
    tf = outer(inner(fun, argnums, has_aux, holomorphic), argnums, has_aux, holomorphic)
    jacobians = tf._nested

    def nested(*args: Any) -> Any:
        normalize_argnums(argnums, len(args), "hessian")  # (its errors name the Hessian, not a Jacobian)
        if not holomorphic:
            _refuse_complex(fun, argnums, args)
        return jacobians(*args)

    tf._nested = nested
    if mode == "FoR" and not has_aux:  # concrete calls: a sparse Hessian is evaluated through a coloring
        coloring = dense_hessian_call(fun, argnums)

        def concrete(*args: Any) -> Any:
            if not holomorphic:
                _refuse_complex(fun, argnums, args)
            return coloring(*args)

        tf._concrete = concrete
    tf._remake, tf._base = (lambda f: hessian(f, argnums, has_aux, holomorphic, mode=mode)), fun
    return tf


def _differentiated_leaves(fun: Callable[..., Any], kind: str, argnums: Any,
                           args: tuple) -> Iterator[tuple[str, str]]:
    """(name and path, dtype) of each leaf of the arguments ``argnums`` differentiates
    (none where argnums is wrong: the transform says what is wrong with it)."""
    try:
        nums = normalize_argnums(argnums, len(args), kind)
    except (ValueError, TypeError):
        return
    names = arg_names(fun, len(args))
    for a in nums:
        for leaf, path in zip(flatten(args[a])[0], leaf_paths(args[a]), strict=True):
            yield f"{names[a]}{path}", _leaf_dtype(leaf)


def _refuse_complex(fun: Callable[..., Any], argnums: Any, args: tuple) -> None:
    """A Hessian by complex arguments needs ``holomorphic=True`` (as JAX's): without it the
    modes would disagree (a reverse pass gives the conjugate of a forward one)."""
    for where, dtype in _differentiated_leaves(fun, "hessian", argnums, args):
        if is_complex(dtype):
            raise TypeError(
                f"tidu.hessian: argument {where} is complex ({dtype}); pass holomorphic=True "
                "for the Hessian f''(z) of a holomorphic function (as JAX requires), or differentiate by the "
                "real and imaginary parts as separate real arguments")


# the parts of a function for a sparse derivative, per (function, role): one object
# each, so that the trace cache (keyed on a function's identity) serves them again
_PARTS: dict[Hashable, Callable[..., Any]] = {}
_PARTS_LOCK = threading.Lock()


def _part(fun: Callable[..., Any], kind: str, role: str, argnums: Any, has_aux: bool,
          holomorphic: bool) -> Callable[..., Any]:
    """``fun``'s output (``role`` "out") or aux ("aux") where it returns a pair; with
    ``holomorphic``, its outputs are checked to be complex."""
    key = (fn_key(fun), kind, role, freeze_argnums(argnums), has_aux, holomorphic)
    with _PARTS_LOCK:
        part = _PARTS.get(key)
    if part is not None:
        return part

    def pick(*args: Any) -> Any:
        out = fun(*args)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError(f"{kind}(has_aux=True): {function_name(fun)} must return a pair "
                            f"(output, aux), got {type(out).__name__}")
        return out[0] if role == "out" else out[1]

    part = functools.wraps(fun, updated=())(pick) if has_aux else fun
    if role == "out":
        part = _checked(part, kind, argnums, False, holomorphic)
    with _PARTS_LOCK:
        if len(_PARTS) >= 256:
            _PARTS.pop(next(iter(_PARTS)))
        part = _PARTS.setdefault(key, part)
    return part


def _sparse(fun: Callable[..., Any], argnums: Any, kind: str, has_aux: bool = False,
            holomorphic: bool = False) -> Callable[..., Any]:
    """The sparse form of a derivative: concrete arguments only (its result is a SciPy
    array, which no transform can trace). With ``has_aux``, ``(array, aux)``, the aux
    evaluated by ``tidu.jit``; with ``holomorphic``, JAX's complex derivative."""
    if not callable(fun):
        raise TypeError(f"tidu.{kind} takes a function, got {type(fun).__name__}")
    dense = sparse_derivative(_part(fun, kind, "out", argnums, has_aux, holomorphic), argnums, kind)
    aux = jit(_part(fun, kind, "aux", argnums, has_aux, False)) if has_aux else None

    def call(*args: Any, **kwargs: Any) -> Any:
        if current_trace() is not None:
            raise TypeError(f"tidu.{kind}(..., sparse=True) returns a scipy.sparse array and cannot be used "
                            f"inside another transform; use tidu.{kind}(...) (dense) there")
        if kind == "hessian" and not holomorphic:
            _refuse_complex(fun, argnums, args)
        out = dense(*args, **kwargs)  # (keyword arguments are passed through, not differentiated)
        if holomorphic and kind != "jacfwd":  # reverse passes give adjoints: conj(f'(z)), conj(f''(z))
            out = out.conj()
        return (out, aux(*args, **kwargs)) if has_aux else out

    call.__name__ = call.__qualname__ = f"{kind}({function_name(fun)}, sparse=True)"
    return call


def hvp(fun: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]) -> Any:
    """Hessian-vector product (forward over reverse): jvp(grad(fun), primals, tangents)[1]."""
    check_primals("hvp", primals, tangents)
    argnums = 0 if len(primals) == 1 else tuple(range(len(primals)))
    return jvp(grad(fun, argnums), tuple(primals), tuple(tangents))[1]


__all__ = ["HESSIAN_MODES", "hessian", "hvp", "jacfwd", "jacobian", "jacrev"]
