"""JAX-like transforms: jit, grad, value_and_grad, vmap, jvp, vjp (Jacobians and Hessians:
``tidu.transforms.jacobians``).

A transform applied inside a trace is symbolic (``tidu.transforms.nested``). Applied to concrete
values, it stages itself on a top-level trace (``tidu.transforms.staging``), compiles the program
once per function, transform, parameters and input avals/structure (the trace cache
below), and evaluates it with NumPy. jacfwd and jacrev on concrete values compile one
JVP (VJP) program and evaluate it per basis vector.

Complex convention (design.md section 3): the transpose is the adjoint, so ``grad``,
``vjp`` and ``jacrev`` are the conjugates of JAX's; ``jvp`` and ``jacfwd`` agree with JAX.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tidu.ad.linearize import LinearizedGraph
from tidu.core.gcpause import paused_gc
from tidu.core.pytree import flatten, leaf_paths, unflatten
from tidu.dtypes import is_float0
from tidu.trace.resolve import ResolvedView
from tidu.trace.tracing import current_trace
from tidu.transforms.float0 import check_float0_tangent, cotangent_leaves, has_tangents, hide
from tidu.transforms.float0 import zeros as float0_zeros
from tidu.transforms.nested import (
    check_argnums_type,
    grad_nested,
    jvp_core,
    vjp_core,
    vmap_nested,
)
from tidu.transforms.staging import arg_names, check_leaf, function_name
from tidu.transforms.transformed import (
    NUMERIC_DTYPES,
    Entry,
    Transformed,
    cached,
    concrete_args,
    evaluate,
    fn_key,
    new_stage,
    staged_call,
    staged_entry,
)


def jit(fun: Callable[..., Any], device: Any = None, *, static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = (), donate_argnums: int | Sequence[int] = (),
        donate_argnames: str | Sequence[str] = (), keep_unused: bool = False,
        inline: bool = False) -> Transformed | StaticJit:
    """``fun`` traced once per input avals/structure, compiled and run with NumPy (no
    differentiation); inside another transform it is just ``fun``.

    ``device`` ("cpu", "gpu", "gpu:1", "tpu" or a ``jax.Device``): run the compiled
    program with XLA on that device instead (jax needed); arguments and results are
    NumPy arrays, moved to and from the device on each call.

    ``static_argnums`` / ``static_argnames``: arguments passed to ``fun`` as the Python
    values they are (a flag, a size, a function), not traced, as in JAX: one program per
    distinct value (compared by ``==``, so they must be hashable).

    ``donate_argnums`` / ``donate_argnames``, ``keep_unused`` and ``inline`` are JAX's,
    accepted (checked as JAX checks them) so that ported code runs: they change nothing
    here (arguments are NumPy arrays, never overwritten)."""
    if not callable(fun):
        raise TypeError(f"tidu.jit takes a function, got {type(fun).__name__}")
    nums = _static_tuple(static_argnums, int, "static_argnums")
    names = _static_tuple(static_argnames, str, "static_argnames")
    donated = _static_tuple(donate_argnums, int, "donate_argnums")
    donated_names = _static_tuple(donate_argnames, str, "donate_argnames")
    both = sorted(set(nums) & set(donated)) or sorted(set(names) & set(donated_names))
    if both:
        raise ValueError(f"tidu.jit: argument {both[0]!r} is both static and donated; a static argument is a "
                         "Python value, not a buffer to donate: drop it from one of them")
    _flag_check("jit", "keep_unused", keep_unused)
    _flag_check("jit", "inline", inline)
    if nums or names:
        return StaticJit(fun, device, nums, names)
    if device is None:
        tf = Transformed("jit", fun, (), fun)
    else:
        tf = Transformed("jit", fun, (("device", device),), fun,
                         concrete=lambda tf, *args: _on_device(tf, device, args))
    tf._remake = lambda f: jit(f, device)
    return tf


def _static_tuple(value: Any, kind: type, what: str) -> tuple:
    items = (value,) if isinstance(value, kind) and not isinstance(value, bool) else value
    try:
        items = tuple(items)
    except TypeError:
        items = None
    if items is None or not all(isinstance(v, kind) and not isinstance(v, bool) for v in items):
        raise TypeError(f"tidu.jit: {what} must be {'an int' if kind is int else 'a str'} or a sequence of them, "
                        f"got {value!r}")
    return items


class _WithStatic:
    """``fun`` with its static arguments fixed: called with the others, in order; equal
    to any other such wrapper of the same function and static values (trace cache)."""

    def __init__(self, fun: Callable[..., Any], n: int, fixed: tuple[tuple[int, Any], ...],
                 keywords: tuple[tuple[str, Any], ...]) -> None:
        self.fun, self.n, self.fixed, self.keywords = fun, n, fixed, keywords
        self.__name__ = getattr(fun, "__name__", type(fun).__name__)
        self._hash = hash((fn_key(fun), n, fixed, keywords))
        static = {i for i, _ in fixed}
        names = [a if a.isidentifier() else f"arg{i}" for i, a in enumerate(arg_names(fun, n)) if i not in static]
        self.__signature__ = inspect.Signature(  # what errors and graph listings call the traced arguments
            [inspect.Parameter(a, inspect.Parameter.POSITIONAL_ONLY) for a in names])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        full, it = [], iter(args)
        at = dict(self.fixed)
        for i in range(self.n):
            full.append(at[i] if i in at else next(it))
        return self.fun(*full, **dict(self.keywords), **kwargs)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, _WithStatic) and fn_key(other.fun) == fn_key(self.fun)
                and (other.n, other.fixed, other.keywords) == (self.n, self.fixed, self.keywords))

    def __hash__(self) -> int:
        return self._hash


class StaticJit:
    """``tidu.jit`` with static arguments: one ``tidu.jit`` of ``fun`` per distinct
    tuple of static values, the traced arguments its inputs."""

    def __init__(self, fun: Callable[..., Any], device: Any, nums: tuple[int, ...], names: tuple[str, ...]) -> None:
        self.fun, self.device, self.nums, self.names = fun, device, nums, names
        self.__wrapped__ = fun
        self.__name__ = f"jit({getattr(fun, '__name__', type(fun).__name__)})"
        self._jitted: dict[Any, Transformed] = {}
        # as jax.jit: a static parameter is static whether passed by position or by name,
        # so static_argnums name their parameters and static_argnames give their positions
        try:
            params = list(inspect.signature(fun).parameters.values())
        except (TypeError, ValueError):
            params = []
        positional = [p for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                        inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        self._params = positional
        by_name = [p.name for i, p in enumerate(positional) if i in nums
                   and p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        self._all_names = frozenset((*names, *by_name))
        self._name_nums = tuple(i for i, p in enumerate(positional) if p.name in names
                                and p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        n = len(args)
        nums = set()
        for i in self.nums:
            j = i + n if i < 0 else i
            if 0 <= j < n:
                nums.add(j)
            elif not (0 <= j < len(self._params)
                      and (self._params[j].name in kwargs or self._params[j].default is not inspect.Parameter.empty)):
                raise TypeError(f"{self.__name__}: static_argnums {self.nums} out of range for {n} positional "
                                "argument(s)")
        nums = tuple(sorted(nums | {i for i in self._name_nums if i < n}))
        fixed = tuple((i, args[i]) for i in nums)
        static_kw = tuple(sorted((k, v) for k, v in kwargs.items() if k in self._all_names))
        rest_kw = {k: v for k, v in kwargs.items() if k not in self._all_names}
        traced = [a for i, a in enumerate(args) if i not in nums]
        if current_trace() is not None:  # inside a transform: the function itself
            return self.fun(*args, **kwargs)
        try:
            # the values' types too, as jax.jit's: 1, 1.0 and True are equal, but a function
            # may tell them apart (isinstance, dtype promotion)
            key = (n, fixed, static_kw, tuple(type(v) for _, v in fixed), tuple(type(v) for _, v in static_kw))
            tf = self._jitted.get(key)
        except TypeError as e:
            raise TypeError(f"{self.__name__}: static arguments must be hashable (they select the program), "
                            f"got {e}; pass arrays as traced arguments instead") from None
        if tf is None:
            tf = jit(_WithStatic(self.fun, n, fixed, static_kw), self.device)
            if len(self._jitted) < 256:
                self._jitted[key] = tf
        return tf(*traced, **rest_kw)

    def __repr__(self) -> str:
        return f"<tidu {self.__name__} static_argnums={self.nums} static_argnames={self.names}>"


def _on_device(tf: Transformed, device: Any, args: tuple) -> Any:
    arrays, sig = concrete_args(tf, args)
    entry = staged_entry(tf, args, sig)
    return unflatten(entry.out_tree, entry.programs[0].run(arrays, backend="xla", device=device))


def grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0,
         has_aux: bool = False, holomorphic: bool = False, *, allow_int: bool = False) -> Transformed:
    """The gradient of a scalar real function with respect to the arguments ``argnums``
    (the conjugate of JAX's for complex arguments: grad(sum(|z|^2)) = 2z).
    ``holomorphic=True``, as JAX's: complex arguments, a complex scalar output, and the
    complex derivative f'(z). ``allow_int=True``, as JAX's: integer and boolean
    arguments in ``argnums`` are taken, their gradients float0 zeros (``tidu.dtypes.float0``)."""
    return _gradient("grad", grad, fun, argnums, has_aux, holomorphic, allow_int)


def value_and_grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0,
                   has_aux: bool = False, holomorphic: bool = False, *, allow_int: bool = False) -> Transformed:
    """(fun(*args), grad(fun)(*args)) in one pass (``holomorphic`` and ``allow_int`` as
    ``grad``'s)."""
    return _gradient("value_and_grad", value_and_grad, fun, argnums, has_aux, holomorphic, allow_int)


def _gradient(kind: str, transform: Callable[..., Transformed], fun: Callable[..., Any], argnums: Any,
              has_aux: bool, holomorphic: bool, allow_int: bool) -> Transformed:
    """grad's or value_and_grad's ``Transformed`` (``transform`` remakes it for another function)."""
    check_argnums_type(argnums, kind)
    _flag_check(kind, "allow_int", allow_int)
    _flag_check(kind, "holomorphic", holomorphic)
    params = (freeze_argnums(argnums), has_aux, allow_int) + ((True,) if holomorphic else ())
    with_value = kind == "value_and_grad"
    tf = Transformed(kind, fun, params,
                     lambda *args: grad_nested(fun, argnums, has_aux, with_value, args, allow_int, bool(holomorphic)))
    tf._remake = lambda f: transform(f, argnums, has_aux, holomorphic, allow_int=allow_int)
    return tf


def _flag_check(what: str, name: str, value: Any) -> None:
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"tidu.{what}: {name} must be True or False, got {value!r}")


def _with_statics(tf: Transformed, statics: dict[tuple, Transformed], fun: Callable[..., Any], in_axes: Any,
                  out_axes: Any, axis_name: Any, axis_size: int | None, args: tuple) -> Any:
    """A top-level vmap call: unmapped positional arguments that are Python ints (or bools)
    are static, as jax.vmap passes them through (``x[:n]``): bound into the function, one
    transform per their values, the others traced as usual."""
    unmapped = (range(len(args)) if in_axes is None else
                [i for i, a in enumerate(in_axes) if a is None] if isinstance(in_axes, tuple | list) else [])
    fixed = tuple((i, args[i]) for i in unmapped if i < len(args) and type(args[i]) in (int, bool))
    if not fixed:
        return staged_call(tf, *args)
    values = dict(fixed)
    key = (len(args), fixed, tuple(type(v) for _, v in fixed))
    bound = statics.get(key)
    if bound is None:
        def with_values(*rest: Any) -> Any:
            it = iter(rest)
            return fun(*[values[i] if i in values else next(it) for i in range(len(args))])

        with_values.__name__ = function_name(fun)
        axes = in_axes if in_axes is None else tuple(a for i, a in enumerate(in_axes) if i not in values)
        bound = vmap(with_values, axes, out_axes, axis_name, axis_size)
        if len(statics) < 64:
            statics[key] = bound
    return bound(*[a for i, a in enumerate(args) if i not in values])


def vmap(fun: Callable[..., Any], in_axes: Any = 0, out_axes: Any = 0, axis_name: Any = None,
         axis_size: int | None = None) -> Transformed:
    """``fun`` mapped over an axis of its arguments, as in JAX: ``in_axes`` (an int, None,
    or a tuple/pytree prefix of the arguments of them) says which axis of each argument
    holds the examples (None: not mapped), ``out_axes`` where the examples go in the
    outputs; ``axis_size`` the number of examples where no argument is mapped (it must
    equal the mapped axes' size otherwise). ``axis_name`` is accepted and ignored (tidu
    has no collectives). Computed as one batched graph (tidu.ad.batching), not a loop."""
    if axis_size is not None and (isinstance(axis_size, bool) or not isinstance(axis_size, int | np.integer)
                                  or axis_size < 0):
        raise TypeError(f"tidu.vmap: axis_size must be a non-negative int, got {axis_size!r}")
    _check_axes("in_axes", in_axes)
    _check_axes("out_axes", out_axes)
    size = None if axis_size is None else int(axis_size)
    statics: dict[tuple, Transformed] = {}  # per unmapped Python ints (positions, values): see _with_statics

    def concrete(tf: Transformed, *args: Any) -> Any:
        return _with_statics(tf, statics, fun, in_axes, out_axes, axis_name, axis_size, args)

    tf = Transformed("vmap", fun, (_freeze_axes(in_axes), _freeze_axes(out_axes), size),
                     lambda *args: vmap_nested(fun, in_axes, out_axes, args, size), concrete)
    # keyword arguments are mapped over axis 0, as in JAX
    tf._remake = lambda f: vmap(f, (*in_axes, *[0] * len(f.names)) if isinstance(in_axes, tuple | list)
                                else in_axes, out_axes, axis_name, axis_size)
    return tf


def _check_axes(what: str, axes: Any) -> None:
    """Each leaf of an axes specification an int or None, as JAX's: a bool (an int to
    Python) would map axis 0 or 1 silently, a float or a NumPy integer a wrong structure."""
    leaves, _ = flatten(axes, is_leaf=lambda a: a is None)
    bad = next((a for a in leaves if not (a is None or (isinstance(a, int) and not isinstance(a, bool)))), None)
    if bad is not None:
        of = "arguments'" if what == "in_axes" else "outputs'"
        hint = f"; write {int(bad)}" if isinstance(bad, np.integer) else ""
        raise TypeError(f"tidu.vmap: {what} must be an int, None, or a tuple/list/dict of them matching the "
                        f"{of} structure, got {axes!r} ({bad!r} is of type {type(bad).__name__}{hint})")


def _freeze_axes(axes: Any) -> Any:
    """A hashable form of an axes specification (for the trace cache): its structure and
    its leaves (a registered dataclass or class is a pytree prefix too, and unhashable)."""
    leaves, tree = flatten(axes)
    return tree, tuple(leaves)


def freeze_argnums(argnums: Any) -> Any:
    return tuple(argnums) if isinstance(argnums, list) else argnums


def check_primals(what: str, primals: Any, tangents: Any = None) -> None:
    for name, v in (("primals", primals), ("tangents", tangents)):
        if v is not None and not isinstance(v, tuple | list):
            raise TypeError(f"tidu.{what}: {name} must be a tuple or list of arguments, got "
                            f"{type(v).__name__}; write {what}(f, (x,), (t,)) for one argument")
    if tangents is not None:
        if len(primals) == len(tangents) and all(type(v) is np.ndarray for v in (*primals, *tangents)):
            return  # one leaf each: the same structure
        pt, tt = flatten(tuple(primals))[1], flatten(tuple(tangents))[1]
        if pt != tt:
            raise ValueError(f"tidu.{what}: tangents have structure {tt}, primals have {pt}")


def _aux_check(what: str, has_aux: Any) -> None:
    if not isinstance(has_aux, bool):
        raise TypeError(f"tidu.{what}: has_aux must be True or False, got {has_aux!r}")


def _tangent_inputs(st: Any, primal: Any, base: str) -> Any:
    """Tangent inputs of ``st`` structured like ``primal``: float0 zeros (no input) for
    its integer and boolean leaves, which have no tangents."""
    leaves, td = flatten(primal)
    return unflatten(td, [st.add_inputs(leaf, base + path) if has_tangents(np.asarray(leaf).dtype)
                          else float0_zeros(np.shape(leaf))
                          for leaf, path in zip(leaves, leaf_paths(primal), strict=True)])


def _aux_leaves(lvl: Any, has_aux: bool) -> tuple[list[Any], Any]:
    """The aux's leaves (float0 ones made structure) and structure, with has_aux."""
    return flatten(hide(lvl.aux)) if has_aux else ([], None)


def _main_output(fun: Callable[..., Any], has_aux: bool) -> Callable[..., Any]:
    """``fun`` without its aux (its output's first element) when ``has_aux``."""
    if not has_aux:
        return fun

    def main(*args: Any) -> Any:
        return fun(*args)[0]

    main.__name__ = function_name(fun)
    return main


def _split_aux(entry: Entry, values: list[Any]) -> tuple[list[Any], Any]:
    """Values of a program whose last outputs are the aux's leaves: (the others, aux)."""
    if entry.aux_tree is None:
        return values, None
    n = len(values) - entry.aux_tree.num_leaves
    return values[:n], unflatten(entry.aux_tree, values[n:])


def jvp(fun: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any],
        has_aux: bool = False) -> tuple[Any, ...]:
    """(fun(*primals), the directional derivative along ``tangents``). ``has_aux``, as in
    JAX: ``fun`` returns ``(output, aux)`` and the result is ``(output, tangent, aux)``."""
    _aux_check("jvp", has_aux)
    check_primals("jvp", primals, tangents)
    primals, tangents = tuple(primals), tuple(tangents)
    if current_trace() is not None:
        lvl, outs, touts = jvp_core("jvp", fun, primals, tuple(range(len(primals))),
                                     flatten(tangents)[0], has_aux)
        result = unflatten(lvl.out_tree, outs), unflatten(lvl.out_tree, touts)
        return (*result, lvl.aux) if has_aux else result
    arrays, sig = concrete_args(fun, primals)
    t_arrays = list(tangents) if all(type(t) is np.ndarray for t in tangents) else flatten(tangents)[0]
    read = _check_tangents("tidu.jvp", t_arrays, arrays, fun, primals)

    def build() -> Entry:
        names = arg_names(fun, len(primals))
        # the trace through the program (see tidu.core.gcpause: no collector pass meanwhile)
        with paused_gc():
            with new_stage("jvp") as st:
                ins = [st.add_inputs(a, n) for a, n in zip(primals, names, strict=True)]
                tins = [_tangent_inputs(st, a, n + ".dot") for a, n in zip(primals, names, strict=True)]
                lvl, outs, touts = jvp_core("jvp", fun, ins, tuple(range(len(ins))),
                                             flatten(tuple(tins))[0], has_aux)
                aux_leaves, aux_tree = _aux_leaves(lvl, has_aux)
                # (output, tangent): integer outputs' float0 tangents are its structure
                leaves, pair = flatten(hide((unflatten(lvl.out_tree, outs), unflatten(lvl.out_tree, touts))))
                keys = st.keys(leaves + aux_leaves)
            return Entry([st.program(keys)], pair, aux_tree=aux_tree)

    entry = cached(("jvp", fn_key(fun), sig, has_aux), build)
    values, aux = _split_aux(entry, evaluate(entry.programs[0], arrays + _read(t_arrays, read)))
    result = unflatten(entry.out_tree, values)
    return (*result, aux) if has_aux else result


def _read(leaves: Sequence[Any], read: Sequence[bool] | None) -> list[np.ndarray]:
    """The leaves a program reads (``read``: None for all), as arrays."""
    if read is None:
        return [np.asarray(t) for t in leaves]
    return [np.asarray(t) for t, r in zip(leaves, read, strict=True) if r]


def vjp(fun: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """(fun(*primals), pullback): ``pullback(ct)`` gives one cotangent per primal (the
    adjoint: conjugate of JAX's for complex values). ``has_aux``, as in JAX: ``fun``
    returns ``(output, aux)`` and the result is ``(output, pullback, aux)``. The pullback
    may be called inside other transforms (``vmap(pullback)``), as JAX's."""
    _aux_check("vjp", has_aux)
    argnums = tuple(range(len(primals)))
    if not primals:
        raise TypeError("tidu.vjp needs at least one primal argument")
    if current_trace() is not None:
        lvl, outs, pb = vjp_core("vjp", fun, primals, argnums, has_aux)

        def pullback_nested(ct: Any) -> tuple:
            return lvl.per_argnum(pb(cotangent_leaves("vjp pullback", ct, lvl.out_tree)))

        result = unflatten(lvl.out_tree, outs), pullback_nested
        return (*result, lvl.aux) if has_aux else result
    arrays, sig = concrete_args(fun, primals)

    def build() -> Entry:
        names = arg_names(fun, len(primals))
        # the trace through the program (see tidu.core.gcpause: no collector pass meanwhile)
        with paused_gc():
            with new_stage("vjp") as st:
                ins = [st.add_inputs(a, n) for a, n in zip(primals, names, strict=True)]
                lvl, outs, pb = vjp_core("vjp", fun, ins, argnums, has_aux)
                aux_leaves, aux_tree = _aux_leaves(lvl, has_aux)
                primal_inputs = list(st.inputs)
                # integer and boolean outputs: float0 cotangents, not read
                cts = [st.add_inputs(k.aval, f"out{i}.ct") if has_tangents(k.aval.dtype) else
                       float0_zeros(k.aval.shape) for i, k in enumerate(lvl.out_keys)]
                # one cotangent per primal, integer ones float0 (the structure)
                grad_leaves, grad_tree = flatten(hide(lvl.per_argnum(pb(cts))))
                out_keys, grad_keys = st.keys(outs + aux_leaves), st.keys(grad_leaves)
            return Entry([st.program(out_keys, primal_inputs), st.program(grad_keys)],
                         lvl.out_tree, [k.aval for k in lvl.out_keys], aux_tree=aux_tree, second_tree=grad_tree)

    entry = cached(("vjp", fn_key(fun), sig, has_aux), build)
    out_tree = entry.out_tree
    outs, aux = _split_aux(entry, evaluate(entry.programs[0], arrays))

    def pullback(ct: Any) -> tuple:
        if current_trace() is not None:  # inside a transform (vmap, grad, jit): traced there
            return vjp(_main_output(fun, has_aux), *primals)[1](ct)
        leaves, read = _cotangent_leaves("vjp pullback", ct, entry)
        grads = evaluate(entry.programs[1], arrays + _read(leaves, read))
        return unflatten(entry.second_tree, grads)  # the structure of the primals

    result = unflatten(out_tree, outs), pullback
    return (*result, aux) if has_aux else result


def linearize(fun: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """``(fun(*primals), f_jvp)`` as in JAX: ``f_jvp(*tangents)`` (tangents structured
    like the primals) is the JVP of ``fun`` at ``primals``. Its program is built once and
    reads the primals it was linearized at (the e-graph keeps what the tangents need).
    ``has_aux``, as in JAX: ``fun`` returns ``(output, aux)``, the result is ``(output,
    f_jvp, aux)``. ``f_jvp`` may be called inside other transforms (``vmap(f_jvp)``).
    The fragment-level pass of this name is ``tidu.passes.linearize``."""
    _not_a_fragment_pass("linearize", fun, "a ResolvedView, its outputs and the inputs to differentiate")
    _aux_check("linearize", has_aux)
    if not primals:
        raise TypeError("tidu.linearize needs at least one primal argument: linearize(f, x, ...)")
    main = _main_output(fun, has_aux)
    if current_trace() is not None:  # inside another transform: the JVP traced there
        def f_jvp_nested(*tangents: Any) -> Any:
            return jvp(main, primals, tangents)[1]

        out = fun(*primals)
        return (out[0], f_jvp_nested, out[1]) if has_aux else (out, f_jvp_nested)
    arrays, sig = concrete_args(fun, primals)

    def build() -> Entry:
        names = arg_names(fun, len(primals))
        # the trace through the program (tidu.core.gcpause)
        with paused_gc(), new_stage("linearize") as st:
            ins = [st.add_inputs(a, n) for a, n in zip(primals, names, strict=True)]
            primal_inputs = list(st.inputs)
            tins = [_tangent_inputs(st, a, n + ".dot") for a, n in zip(primals, names, strict=True)]
            lvl, outs, touts = jvp_core("linearize", fun, ins, tuple(range(len(ins))), flatten(tuple(tins))[0],
                                        has_aux)
            aux_leaves, aux_tree = _aux_leaves(lvl, has_aux)
            # integer outputs' float0 tangents are the structure of the tangent
            t_leaves, t_tree = flatten(hide(unflatten(lvl.out_tree, touts)))
            out_keys, tangent_keys = st.keys(outs + aux_leaves), st.keys(t_leaves)
        return Entry([st.program(out_keys, primal_inputs), st.program(tangent_keys)], lvl.out_tree,
                     aux_tree=aux_tree, second_tree=t_tree)

    entry = cached(("linearize", fn_key(fun), sig, has_aux), build)
    outs, aux = _split_aux(entry, evaluate(entry.programs[0], arrays))

    def f_jvp(*tangents: Any) -> Any:
        if current_trace() is not None:  # inside a transform (vmap, grad, jit): traced there
            return jvp(main, primals, tangents)[1]
        leaves, tree = flatten(tuple(tangents))
        if tree != sig[0]:
            raise ValueError(f"tidu.linearize: f_jvp takes tangents structured like the primals ({sig[0]}), "
                             f"got {tree}")
        read = _check_tangents("tidu.linearize", leaves, arrays, fun, primals)
        return unflatten(entry.second_tree, evaluate(entry.programs[1], arrays + _read(leaves, read)))

    result = unflatten(entry.out_tree, outs), f_jvp
    return (*result, aux) if has_aux else result


def _shape_only(tree: Any) -> Any:
    """``tree`` with each ``ShapeDtypeStruct`` leaf (tidu's or JAX's: a shape and a dtype,
    no values) replaced by a zero array of that shape and dtype (a broadcast view, no
    memory), as ``linear_transpose`` takes them for its example arguments."""
    leaves, td = flatten(tree)
    if not any(_is_shape_struct(x) for x in leaves):
        return tree
    return unflatten(td, [np.broadcast_to(np.zeros((), np.dtype(x.dtype)), tuple(x.shape)) if _is_shape_struct(x)
                          else x for x in leaves])


def _is_shape_struct(leaf: Any) -> bool:
    return (hasattr(leaf, "shape") and hasattr(leaf, "dtype") and not hasattr(leaf, "__array__")
            and not isinstance(leaf, np.generic))


def linear_transpose(fun: Callable[..., Any], *primals: Any) -> Callable[[Any], tuple]:
    """The transpose of the linear function ``fun`` as in JAX: ``primals`` give the
    argument shapes and dtypes (arrays, whose values do not matter, or
    ``ShapeDtypeStruct``s), and ``f_t(ct)`` gives one
    cotangent per argument (the adjoint: conjugate-linear in ``ct`` for complex values,
    as ``tidu.vjp``'s). A constant offset (an affine ``fun``) is dropped, as JAX drops
    it; a ``fun`` whose transpose depends on its arguments is not linear: TypeError. The
    fragment-level pass of this name is ``tidu.passes.linear_transpose``."""
    _not_a_fragment_pass("linear_transpose", fun, "a LinearizedGraph")
    if not primals:
        raise TypeError("tidu.linear_transpose needs example arguments: linear_transpose(f, x, ...)")
    primals = tuple(_shape_only(p) for p in primals)
    if current_trace() is not None:  # inside another transform: the pullback traced there
        return vjp(fun, *primals)[1]
    arrays, sig = concrete_args(fun, primals)

    def build() -> Entry:
        names = arg_names(fun, len(primals))
        # the trace through the program (tidu.core.gcpause)
        with paused_gc(), new_stage("linear_transpose") as st:
            ins = [st.add_inputs(a, n) for a, n in zip(primals, names, strict=True)]
            lvl, _, pb = vjp_core("linear_transpose", fun, ins, tuple(range(len(ins))))
            n_primal = len(st.inputs)
            cts = [st.add_inputs(k.aval, f"out{i}.ct") if has_tangents(k.aval.dtype) else
                   float0_zeros(k.aval.shape) for i, k in enumerate(lvl.out_keys)]
            program = st.program(st.keys(pb(cts)))
        reads = {i for ins_ in program.instructions for i in ins_.inputs} | set(program.output_slots)
        if reads & set(program.input_slots[:n_primal]):
            raise TypeError(f"tidu.linear_transpose: {function_name(fun)} is not linear in its arguments (its "
                            "transpose depends on their values); for the adjoint of its derivative at a point "
                            "use tidu.vjp(f, *primals)")
        return Entry([program], lvl.out_tree, [k.aval for k in lvl.out_keys])

    entry = cached(("linear_transpose", fn_key(fun), sig), build)

    def f_t(ct: Any) -> tuple:
        if current_trace() is not None:  # inside a transform (vmap, grad, jit): traced there
            return vjp(fun, *primals)[1](ct)
        leaves, read = _cotangent_leaves("tidu.linear_transpose", ct, entry)
        return unflatten(sig[0], evaluate(entry.programs[0], arrays + _read(leaves, read)))

    return f_t


def _check_tangents(what: str, tangents: Sequence[Any], primals: Sequence[np.ndarray], fun: Any,
                    args: Sequence[Any]) -> list[bool] | None:
    """Each tangent leaf a numeric value of its primal's shape and dtype kind, float0 for
    an integer or boolean primal (as JAX), else a clear error naming the argument. Which
    leaves the program reads (not the float0 ones); None for all."""
    read: list[bool] | None = None
    for i, (p, t) in enumerate(zip(primals, tangents, strict=True)):
        if type(t) is np.ndarray and t.dtype == p.dtype and t.shape == p.shape and p.dtype in _INEXACT:
            continue  # what its primal is: checked already
        if read is None:
            read = [True] * len(primals)
            names = [f"{n}{path}" for a, n in zip(args, arg_names(fun, len(args)), strict=True)
                     for path in leaf_paths(a)]
        if check_float0_tangent(what, f"the tangent of argument {names[i]}", t, p.dtype, p.shape):
            read[i] = False
            continue
        check_leaf(t, f"tangent {i}")
        if np.shape(t) != p.shape:
            raise ValueError(f"{what}: tangent {i} has shape {np.shape(t)}, its primal has {p.shape}")
        _real_for_real(what, f"tangent {i} (of argument {names[i]})", t, p.dtype, "its primal")
    return read


def _real_for_real(what: str, which: str, v: Any, dtype: Any, of: str) -> None:
    """A complex tangent or cotangent for a real value has no meaning there: a clear error
    (as JAX's dtype check), not one from inside the program."""
    got = np.result_type(v)
    if got.kind == "c" and np.dtype(dtype).kind != "c":
        raise TypeError(f"{what}: {which} is complex ({got}) but {of} is real ({np.dtype(dtype)}); pass a real "
                        f"value, or make the value complex (x + 0j) to differentiate in the complex plane")


_INEXACT = frozenset(d for d in NUMERIC_DTYPES if has_tangents(d))


def _cotangent_leaves(what: str, ct: Any, entry: Entry) -> tuple[list[Any], list[bool] | None]:
    """The leaves of ``ct``, checked against the outputs' structure and avals of
    ``entry``, and which of them the program reads (None for all): an integer or
    boolean output's cotangent (float0, as JAX's) is not read."""
    leaves = cotangent_leaves(what, ct, entry.out_tree)
    read: list[bool] | None = None
    for i, (c, a) in enumerate(zip(leaves, entry.out_avals, strict=True)):
        integer = not has_tangents(a.dtype)
        if not integer and type(c) is np.ndarray and c.shape == a.shape and c.dtype in NUMERIC_DTYPES \
                and c.dtype.kind == "f":
            continue  # (check_leaf's answer, sooner)
        if is_float0(c) and not integer:
            raise TypeError(f"{what}: cotangent {i} is float0, the output has dtype {a.dtype}; pass a {a.dtype} "
                            "value (float0 cotangents are for integer and boolean outputs)")
        if not is_float0(c):
            check_leaf(c, f"cotangent {i}")
        if np.shape(c) != a.shape:
            raise ValueError(f"{what}: cotangent {i} has shape {np.shape(c)}, the output has {a.shape}")
        if not is_float0(c):
            _real_for_real(what, f"cotangent {i}", c, a.dtype, "the output")
            if not integer and np.result_type(c).kind in "iub":  # as JAX: never for a float output
                raise TypeError(f"{what}: cotangent {i} is {np.result_type(c)}, the output has dtype {a.dtype}; "
                                f"pass a {a.dtype} value (1.0, not 1)")
        if integer:
            read = read or [True] * len(leaves)
            read[i] = False
    return leaves, read


def _not_a_fragment_pass(name: str, fun: Any, takes: str) -> None:
    """The clear error for the fragment-level call of ``tidu.<name>`` (now tidu.passes.<name>)."""
    if isinstance(fun, ResolvedView | LinearizedGraph):
        raise TypeError(f"tidu.{name}(f, *primals) is JAX's {name} of a function; the fragment-level pass taking "
                        f"{takes} is tidu.passes.{name}")
    if not callable(fun):
        raise TypeError(f"tidu.{name} takes a function, got {type(fun).__name__}")


__all__ = ["grad", "jit", "jvp", "linear_transpose", "linearize", "value_and_grad", "vjp", "vmap"]
