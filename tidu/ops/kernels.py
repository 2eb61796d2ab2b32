"""Executable meanings: a NumPy kernel for every primitive of a catalog.

A built-in primitive (declared in a rule file shipped with tidu) runs what its ``numpy``
clause says, exactly (``exact_kernel``): a NumPy function (``numpy numpy.exp``), Python's
``abs``, a structural kernel of ``tidu.ops.reference`` (``numpy tidu.ops.reference.pad``),
or ``numpy meaning``: the meaning read as NumPy code (``x + y``, ``1 / sqrt(x)``, its
functions those of the catalog primitives they name). ``numpy_inline`` writes that as one
expression of the generated source. A primitive declared in a user's rule file runs, in
this order of preference:

- the function its ``numpy`` clause names (``numpy scipy.special.erf``), called with the
  operands in declared order and the attributes as keywords;
- its ``meaning``, turned into SymPy (``tidu.ops.meaning``) and
  compiled with ``sympy.lambdify`` for NumPy arrays, SciPy's special functions where
  NumPy has none (``erf``, ``gamma``, ...). Never ``math``, which fails on arrays.

``kernel(prim)`` returns ``fn(*operands, **attrs)`` whose result has the declared dtype
and shape (the output of ``prim.infer``); it is made once per ``Primitive`` object.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tidu.core.keys import Attrs, aval_of, is_complex
from tidu.ops.catalog import Catalog, Primitive
from tidu.ops.dsl.ast import Call, Expr, Num, RuleSyntaxError, Var
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


def meaning_in_primitives(prim: Primitive, cat: Catalog) -> Expr:
    """``prim``'s meaning with every call a call of a catalog primitive's own arity, as
    the lowerings write it op by op: SymPy's two-argument ``log(x, b)`` is ``log(x) /
    log(b)`` (as SymPy reads it), ``Max``/``Min`` of three or more are nested pairs. A
    call with another number of arguments than the primitive meaning its function takes
    is a RuleSyntaxError at the call (file:line:col)."""
    assert prim.decl.meaning is not None
    ops = function_primitives(cat)

    def walk(e: Expr) -> Expr:  # meanings are tiny: recursion is fine
        if not isinstance(e, Call):
            return e
        args = tuple(walk(a) for a in e.args)
        if e.fn == "log" and len(args) == 2:
            return Call("div", (Call("log", args[:1], (), e.loc), Call("log", args[1:], (), e.loc)), (), e.loc)
        if e.fn in ("Max", "Min") and len(args) > 2:
            nested = args[0]
            for a in args[1:]:
                nested = Call(e.fn, (nested, a), (), e.loc)
            return nested
        callee = cat.get(ops.get(e.fn, ""))
        if callee is not None and len(callee.operands) != len(args):
            raise RuleSyntaxError(e.loc, f"the meaning of {prim.name} calls {e.fn} with {len(args)} argument(s), "
                                         f"but the primitive {callee.name} that means {e.fn} takes "
                                         f"{len(callee.operands)}: write it with {e.fn} of {len(callee.operands)} "
                                         "or give the primitive a clause naming its kernel")
        return Call(e.fn, args, e.attrs, e.loc)

    return walk(prim.decl.meaning)


# the arithmetic of meanings as Python operators (what NumPy arrays and scalars overload)
_OPERATORS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**"}


def numpy_inline(prim: Primitive, cat: Catalog, args: Sequence[str]) -> str | None:
    """The NumPy expression (source text, NumPy as ``np``) computing the built-in primitive
    ``prim`` on the operands named ``args``, exactly as ``exact_kernel`` does; None where
    it is not a single expression (a kernel of ``tidu.ops.reference``, a user primitive)."""
    if not prim.builtin:
        return None
    if prim.numpy_meaning:
        assert prim.decl.meaning is not None
        return _meaning_source(prim, cat, dict(zip(prim.operands, args, strict=True)), prim.decl.meaning, top=True)
    if prim.decl.numpy is None:
        return None
    module, _, name = prim.decl.numpy[0].rpartition(".")
    if module == "numpy":
        return f"np.{name}({', '.join(args)})"
    if module == "builtins":
        return f"{name}({', '.join(args)})"
    return None


def _meaning_source(prim: Primitive, cat: Catalog, env: dict[str, str], e: Expr, top: bool = False) -> str:
    """A meaning as Python source: operators for arithmetic, each function by the inline
    expression of the catalog primitive that means it; a compound operand is bracketed."""
    if isinstance(e, Num):
        text = repr(e.value)
        return text if top or (e.value.real >= 0 and not isinstance(e.value, complex)) else f"({text})"
    if isinstance(e, Var):
        return env[e.name]
    assert isinstance(e, Call)  # meanings are tiny: recursion is fine
    args = [_meaning_source(prim, cat, env, a) for a in e.args]
    if e.fn in _OPERATORS:
        text = f"{args[0]} {_OPERATORS[e.fn]} {args[1]}"
    elif e.fn == "neg":
        text = f"-{args[0]}"
    else:
        callee = cat.get(function_primitives(cat).get(e.fn, ""))
        text = numpy_inline(callee, cat, args) if callee is not None and callee is not prim else None
        if text is None:
            raise RuleSyntaxError(e.loc, f"'numpy meaning' of {prim.name}: {e.fn} is not a built-in primitive "
                                         "with a NumPy expression")
        return text
    return text if top else f"({text})"


def exact_kernel(prim: Primitive, cat: Catalog) -> Callable[..., Any]:
    """``fn(*operands, **attrs)`` of a built-in primitive: its ``numpy`` clause's function
    as it is, or its inline expression made a function; the caller makes rank-0 operands
    NumPy scalars (as the generated source carries them)."""
    if prim.numpy_fn is not None:
        return prim.numpy_fn
    made = prim.__dict__.get("_exact_kernel")  # made once per primitive (and catalog)
    if made is not None and made[0] is cat:
        return made[1]
    params = [f"a{i}" for i in range(len(prim.operands))]
    text = numpy_inline(prim, cat, params)
    if text is None:
        raise KernelError(f"{prim.loc}: primitive {prim.name} has no NumPy kernel: give it a 'numpy' clause")
    fn = eval(f"lambda {', '.join(params)}: {text}", {"np": np})  # tidu-generated source, from the rule
    fn.__name__ = fn.__qualname__ = prim.name
    prim.__dict__["_exact_kernel"] = (cat, fn)
    return fn


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


__all__ = ["KernelError", "exact_kernel", "function_primitives", "kernel", "meaning_in_primitives", "numpy_inline"]
