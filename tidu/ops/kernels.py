"""Executable meanings: a NumPy kernel for every primitive of a catalog.

Built-in primitives run their hand-written kernels (``tidu.ops.reference``). A primitive
declared in a rule file runs, in this order of preference:

- the function its ``numpy`` clause names (``numpy scipy.special.erf``), called with the
  operands in declared order and the attributes as keywords;
- its ``meaning``, turned into SymPy (``tidu.ops.meaning``) and
  compiled with ``sympy.lambdify`` for NumPy arrays, SciPy's special functions where
  NumPy has none (``erf``, ``gamma``, ...). Never ``math``, which fails on arrays.

``kernel(prim)`` returns ``fn(*operands, **attrs)`` whose result has the declared dtype
and shape (the output of ``prim.infer``); it is made once per ``Primitive`` object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tidu.core.keys import Attrs, aval_of, is_complex
from tidu.ops.catalog import Catalog, Primitive
from tidu.ops.dsl.ast import Call, Var
from tidu.ops.meaning import meaning_sympy


class KernelError(ValueError):
    """A primitive has no executable meaning; the message names its rule at file:line:col."""


def function_primitives(cat: Catalog) -> dict[str, str]:
    """SymPy function name -> the primitive of ``cat`` whose meaning is exactly that
    function of its operands, in order (``exp`` -> exp, ``Abs`` -> abs, ``Max`` -> maximum,
    ``erf`` -> a rule file's erf): how a meaning or a SymPy expression is written back in
    primitives."""
    out: dict[str, str] = {}
    for p in cat.values():
        m = p.decl.meaning
        if (isinstance(m, Call) and not p.variadic and not p.attrs
                and [a.name if isinstance(a, Var) else None for a in m.args] == list(p.operands)):
            out.setdefault(m.fn, p.name)
    return out


def _lambdified(prim: Primitive) -> Callable[..., Any]:
    import sympy

    syms = [sympy.Dummy(n) for n in prim.operands]
    expr = meaning_sympy(prim, syms)
    fn = sympy.lambdify(syms, expr, modules=["scipy", "numpy"])
    probe = [np.full(2, 0.5) for _ in syms]
    try:  # a function neither NumPy nor SciPy has is a NameError at the first call
        with np.errstate(all="ignore"):
            fn(*probe)
    except (NameError, TypeError, AttributeError) as e:
        loc = prim.decl.meaning.loc if prim.decl.meaning is not None else prim.loc
        raise KernelError(f"{loc}: the meaning of {prim.name} ({expr}) cannot run on NumPy arrays ({e}); "
                          f"give {prim.name} a 'numpy' clause naming its function, e.g. numpy scipy.special.erf") \
            from None
    return fn


def kernel(prim: Primitive) -> Callable[..., Any]:
    """``fn(*operands, **attrs)`` computing ``prim`` on NumPy arrays: its ``numpy`` clause,
    else its lambdified meaning; the result has the declared dtype and shape."""
    if prim.kernel is not None:
        return prim.kernel
    if prim.numpy_fn is not None:
        raw = prim.numpy_fn
    elif prim.decl.meaning is not None and not prim.variadic:
        lam = _lambdified(prim)

        def raw(*args: Any, **attrs: Any) -> Any:
            return lam(*args)
    else:
        raise KernelError(f"{prim.loc}: primitive {prim.name} has no NumPy kernel: give it a 'meaning' "
                          "or a 'numpy' clause (docs/rules.md#adding-a-primitive)")

    def fn(*args: Any, **attrs: Any) -> np.ndarray:
        (aval,) = prim.infer([aval_of(a) for a in args], Attrs(attrs))
        with np.errstate(all="ignore"):
            out = np.asarray(raw(*args, **attrs))
        if not is_complex(aval.dtype) and np.iscomplexobj(out):
            out = out.real
        if out.shape != aval.shape:
            out = np.broadcast_to(out, aval.shape)
        return out.astype(aval.dtype, copy=False)

    fn.__name__ = fn.__qualname__ = prim.name
    fn.__doc__ = f"The primitive {prim.name} ({prim.loc}) on NumPy arrays."
    prim.kernel = fn
    return fn


__all__ = ["KernelError", "function_primitives", "kernel"]
