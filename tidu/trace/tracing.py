"""Traces and tracers: recording NumPy-like calls as a fragment.

A ``Trace`` owns a ``FragmentBuilder``, the fragments produced by transforms nested in
it, and the input aliases that bind those transforms' inputs to its values. Traces
nest: a transform applied inside a traced function opens a child trace. All traces of
one top-level computation share its counters (pass ids and trace numbers), so the same
call builds the same keys every time.

A ``Tracer`` is a value of a trace: its trace, its ref in the trace's builder, and its
aval. Its operators and methods (and NumPy ufuncs applied to it) are the ``tidu.numpy``
functions, installed by that module. The traces being recorded form a stack
(``current_trace()``); a tracer whose trace has finished cannot be used any more, except
by a user rule that an AD pass over that trace runs (``read_finished``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

import numpy as np

from tidu.core.gcpause import paused_gc
from tidu.core.keys import NO_ATTRS, Attrs, Aval, InputKey, Named, ValueKey
from tidu.trace.fragments import External, Fragment, FragmentBuilder, Local, ValRef
from tidu.trace.resolve import ResolvedView, resolve

# The stack of traces being recorded, innermost last. A context variable: each thread
# (and each asyncio task) records its own traces, so transforms may run concurrently.
_STACK: ContextVar[tuple[Trace, ...]] = ContextVar("tidu_trace_stack", default=())
# The fragments of the view an AD pass reads while it runs (``reading``). A user rule runs
# in a trace whose values are the pass's (tidu.transforms.custom): that trace takes these
# as its fragments, so that a transform the rule calls (a jacfwd in a custom_jvp rule)
# resolves the primal values the rule reads.
PASS_FRAGMENTS: ContextVar[tuple[Fragment, ...]] = ContextVar("tidu_pass_fragments", default=())


class reading:  # noqa: N801 (a context manager, named for what it says)
    """``with reading(view.fragments):`` while an AD pass runs over that view."""

    __slots__ = ("fragments", "token")

    def __init__(self, fragments: Sequence[Fragment]) -> None:
        self.fragments = tuple(fragments)

    def __enter__(self) -> None:
        self.token = PASS_FRAGMENTS.set(self.fragments)

    def __exit__(self, *exc: object) -> None:
        PASS_FRAGMENTS.reset(self.token)


class TraceError(RuntimeError):
    """A traced value was used where it is not valid (finished trace, Python control flow)."""


def current_trace() -> Trace | None:
    """The innermost trace being recorded, or None outside any transform."""
    stack = _STACK.get()
    return stack[-1] if stack else None


class Trace:
    """One level of tracing. ``parent`` is the enclosing trace (None at top level)."""

    # whether a transform nested in this trace may leave its fragment here (``record``): not
    # in a trace whose ops go straight into an AD pass (a custom rule's), which has no
    # fragment of its own; a nested vmap then emits all its ops into it
    keeps_fragments = True
    # A user rule's trace (tidu.transforms.custom): the fragments of the AD pass it runs in
    # (None elsewhere). The rule may read the values of a finished trace whose fragment the
    # pass reads (a closure over an argument of a grad that is not differentiated): they
    # are the pass's values, read as External keys (``read_finished``); ``check_read``
    # refuses one the pass differentiates. Class attributes: nothing per trace or per op.
    reads: tuple[Fragment, ...] | None = None
    check_read: Callable[[ValueKey], None] | None = None
    _read_ids: frozenset[int] | None = None

    def __init__(self, parent: Trace | None, label: str) -> None:
        self.parent = parent
        self.depth: int = parent.depth + 1 if parent is not None else 0
        self.label = label
        if parent is None:
            self._passes = 0
            self._traces = 0
        self.number = 0 if parent is None else self.root._next("_traces")
        self.builder = FragmentBuilder(f"{label}{self.number}")
        self.fragments: list[Fragment] = []
        self.aliases: dict[InputKey, ValueKey] = {}
        self.active = True
        self.uses_outer = False
        # tangents along a unit seed of one of this trace's values (by that value's key),
        # made by forward-mode gradients nested in it: the values they traced depend on
        # that value alone (tidu.transforms.nested), so a gradient of this trace along it reuses them
        self.forward_tangents: dict[ValueKey, dict[ValueKey, ValueKey]] = {}
        self._fragment: Fragment | None = None
        self._names: set[str] = set()
        self._saved_stack: tuple[Trace, ...] = ()
        self._gc_pause: Any = None  # the collector's pause while recording (__enter__)

    @property
    def root(self) -> Trace:
        """The top-level trace (found by walking up, not stored: a top-level trace pointing
        at itself would be a reference cycle, and a long trace's values would then wait
        for the garbage collector instead of being freed when the trace is dropped)."""
        t = self
        while t.parent is not None:
            t = t.parent
        return t

    def _next(self, counter: str) -> int:
        n = getattr(self, counter) + 1
        setattr(self, counter, n)
        return n

    def next_pass_id(self) -> int:
        """A pass id unique within this top-level computation (deterministic)."""
        return self.root._next("_passes")

    # --- the trace stack ----------------------------------------------------------

    def __enter__(self) -> Trace:
        stack = _STACK.get()
        self._saved_stack = stack
        _STACK.set((*stack, self))
        # The cyclic collector is paused while recording (as in the AD passes: see
        # tidu.core.gcpause): a trace allocates many small objects and frees few of them.
        self._gc_pause = paused_gc()
        self._gc_pause.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        stack = _STACK.get()
        assert stack and stack[-1] is self, "trace stack out of order"
        _STACK.set(self._saved_stack)
        self._gc_pause.__exit__(None, None, None)

    def is_ancestor_of(self, other: Trace) -> bool:
        t: Trace | None = other
        while t is not None:
            if t is self:
                return True
            t = t.parent
        return False

    # --- values -------------------------------------------------------------------

    # A closed trace (a control-flow body, tidu.transforms.control) refers to nothing outside
    # itself: a value of an enclosing trace that it, or a transform nested in it, uses
    # becomes one of its parameters (``capture``).
    closed = False

    def capture(self, x: Tracer) -> Tracer:
        raise TraceError(f"internal: the trace of {self.label} does not capture values")

    def input_name(self, base: str) -> str:
        """Input names are the parameter names at top level, ``name@k`` in nested trace k."""
        return base if self.parent is None else f"{base}@{self.number}"

    def new_input(self, base: str, aval: Aval, weak: bool = False) -> Tracer:
        """A fresh input named after ``base`` (made unique within this trace); ``weak``
        marks a Python scalar argument (weakly typed in dtype promotion)."""
        self._check_open()
        name, k = self.input_name(base), 1
        while name in self._names:
            k += 1
            name = self.input_name(f"{base}#{k}")
        self._names.add(name)
        ref = self.builder.input(Named(name), aval)
        return Tracer(self, ref, aval, weak)

    def lift(self, x: Any) -> ValRef:
        """A ref in this trace's builder for a tracer (of this trace or an enclosing one)
        or a concrete value (a constant)."""
        if isinstance(x, Tracer):
            if not x.trace.active:
                made = self._lift_finished(x)
                if made is not None:
                    return made
            if x.trace is self:
                return x.ref
            if not x.trace.is_ancestor_of(self):
                raise TraceError(
                    "a traced value of an inner transform is used by an enclosing one; "
                    "return it from the inner function instead of storing it"
                )
            self.uses_outer = True
            t = self.parent
            while t is not x.trace:  # a closed body between here and x's trace takes x as a parameter
                if t.closed:
                    return External(t.capture(x).key)
                t = t.parent  # type: ignore[assignment]
            return External(x.key)
        return self.builder.constant(np.asarray(x))

    def _lift_finished(self, x: Tracer) -> ValRef | None:
        """``lift`` of a value of a finished trace, which a rule being traced may read
        (``read_finished``; else the finished-trace error): a constant made there after it
        finished (a Python number combined with its values) is made here; None for the others,
        which ``lift`` refers to as any value of an enclosing trace."""
        if not read_finished(x):
            x.check_alive()
        ref = x.ref
        if type(ref) is Local and ref.id >= len(x.trace.finish().keys):
            key = x.key
            if key.inputs:  # (only constants are made there: ``emit`` goes to the reading trace)
                raise TraceError(f"internal: {key!r} was added to the finished trace of {x.trace.label}")
            return self.builder.add_op(key.op, (), key.attrs)[0]
        return None

    def constant(self, value: Any, dtype: str | None = None) -> Tracer:
        ref = self.builder.constant(value, dtype)
        return Tracer(self, ref, self.builder.aval(ref))

    def emit(self, op: str, operands: Sequence[Any],
             attrs: Mapping[str, Any] | None = None, weak: bool = False) -> Tracer:
        """Add ``op(operands)`` to this trace; returns the (single) result as a tracer."""
        if not self.active:  # an op of a rule on values of this finished trace goes to the rule's trace
            return self._reader().emit(op, operands, attrs, weak)
        # a tracer of this (open) trace is alive: its ref as is; anything else through lift
        refs = [x.ref if type(x) is Tracer and x.trace is self else self.lift(x) for x in operands]
        if attrs is None or attrs is NO_ATTRS:
            attrs = NO_ATTRS
        elif type(attrs) is not Attrs:
            attrs = Attrs(attrs) if attrs else NO_ATTRS
        builder = self.builder
        (ref,) = builder.add_op(op, refs, attrs)
        return Tracer(self, ref, builder.keys[ref.id].aval, weak)

    def external(self, key: ValueKey, weak: bool = False) -> Tracer:
        """A tracer for a value defined by a fragment this trace has recorded."""
        return Tracer(self, External(key), key.aval, weak)

    def key(self, x: Any) -> ValueKey:
        return self.builder.key_of(self.lift(x))

    def record(self, fragments: Sequence[Fragment], aliases: Mapping[InputKey, ValueKey]) -> None:
        """Keep the fragments of a nested transform and the aliases that bind its inputs."""
        self._check_open()
        self.fragments.extend(fragments)
        self.aliases.update(aliases)

    def _check_open(self) -> None:
        if not self.active:
            raise TraceError(f"the trace of {self.label} has finished; no more values can be added")

    def _reader(self) -> Trace:
        """The trace being recorded, where a rule in it may read this finished trace's values."""
        current = current_trace()
        if current is None or self._fragment is None or not _reading_rules(current, self._fragment):
            self._check_open()
        return current  # type: ignore[return-value]

    # --- finishing ----------------------------------------------------------------

    def finish(self) -> Fragment:
        """Close the trace and return its fragment (parents: the recorded fragments and,
        when the traced function used values of enclosing traces, those traces' values)."""
        if self._fragment is None:
            parents = list(self.fragments)
            if self.uses_outer:
                t = self.parent
                while t is not None:
                    parents.append(t.builder.build(parents=t.fragments))
                    t = t.parent
            self._fragment = self.builder.build(parents=parents)
            self.active = False
        return self._fragment

    def view(self) -> ResolvedView:
        """The logical DAG of this (finished) trace, its nested fragments and aliases."""
        return resolve([self.finish()], aliases=self.aliases)

    def __repr__(self) -> str:
        state = "active" if self.active else "finished"
        return f"<Trace {self.label}{self.number} depth={self.depth} {state}>"


class Tracer:
    """A traced array value. Supports the NumPy operators; see ``tidu.numpy``. ``weak``
    values (from Python scalars) take the dtype of what they are combined with."""

    __slots__ = ("trace", "ref", "aval", "weak")
    __array_priority__ = 1000

    def __init__(self, trace: Trace, ref: ValRef, aval: Aval, weak: bool = False) -> None:
        self.trace = trace
        self.ref = ref
        self.aval = aval
        self.weak = weak

    @property
    def key(self) -> ValueKey:
        return self.trace.builder.key_of(self.ref)

    def check_alive(self) -> None:
        if not self.trace.active and not read_finished(self):
            raise TraceError(
                f"this traced value ({self.aval}) belongs to a finished trace "
                f"({self.trace.label}): it escaped the function being transformed (stored in a "
                "global, an attribute or a list). Return it from the function instead, or "
                "compute it outside the transform."
            )

    # --- array attributes ----------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return self.aval.shape

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.aval.dtype)

    @property
    def ndim(self) -> int:
        return self.aval.ndim

    @property
    def size(self) -> int:
        return self.aval.size

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d traced array")
        return self.shape[0]

    def __iter__(self) -> Iterator[Tracer]:
        if not self.shape:
            raise TypeError("iteration over a 0-d traced array")
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self) -> str:
        return f"Tracer<{self.aval}>"

    # --- refusing concretization ----------------------------------------------------

    def _concrete(self, what: str) -> TraceError:
        return TraceError(
            f"cannot use a traced value ({self.aval}) as a concrete {what}: its value is not "
            "known while the function is traced. For control flow on traced values use tidu.lax: "
            "cond or switch for if/else, while_loop for while, fori_loop or scan for loops (or "
            "tnp.where, tnp.maximum for a choice between values), and tidu.numpy functions "
            "instead of numpy ones."
        )

    def __bool__(self) -> bool:
        raise self._concrete("bool (if/while/and/or)")

    def __float__(self) -> float:
        raise self._concrete("float")

    def __int__(self) -> int:
        raise self._concrete("int")

    def __complex__(self) -> complex:
        raise self._concrete("complex")

    def __index__(self) -> int:
        raise self._indexing(self._concrete("index"))

    def item(self, *args: Any) -> Any:
        raise self._concrete("Python number (item())")

    def tolist(self) -> Any:
        raise self._concrete("Python list (tolist())")

    def __format__(self, spec: str) -> str:
        if not spec:  # f"{x}" is its repr, as print(x)
            return repr(self)
        raise self._concrete(f"number to format with {spec!r}")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise self._indexing(self._concrete("NumPy array"))

    @staticmethod
    def _indexing(error: TraceError) -> TraceError:
        # NumPy's own indexing asks for these when a NumPy array is indexed by a tracer
        return TraceError(f"{error} To index a NumPy array x at a traced integer i, use tnp.take(x, i, axis) or "
                          "tidu.lax.dynamic_slice (a traced array indexes itself: x[i]).")

    __hash__ = object.__hash__


def _reading_rules(t: Trace | None, fragment: Fragment) -> list[Trace]:
    """The traces of the rules from ``t`` up (innermost first) whose passes read ``fragment``."""
    rules = []
    while t is not None:
        if t.reads is not None:
            ids = t._read_ids
            if ids is None:  # the pass's fragments and their parents, once per rule
                ids = t._read_ids = frozenset(id(f) for f in resolve(list(t.reads)).fragments)
            if id(fragment) in ids:
                rules.append(t)
        t = t.parent
    return rules


def read_finished(x: Tracer) -> bool:
    """Whether the rules being traced may read ``x``, a value of a finished trace
    (``Trace.reads``): every rule whose pass reads that trace's fragment has accepted it
    (``check_read``), and the outermost one's trace is made a descendant of ``x``'s (its
    ops work on the values of the trace its pass differentiates: ``x`` is an enclosing
    value to them). Called only where the finished-trace error would be raised."""
    owner, fragment = x.trace, x.trace._fragment
    if fragment is None:
        return False
    rules = _reading_rules(current_trace(), fragment)
    if not rules:
        return False
    rule = rules[-1]
    if not owner.is_ancestor_of(rule):
        if rule.parent is None or not rule.parent.is_ancestor_of(owner):
            return False  # (values of two finished traces neither of which encloses the other)
        rule.parent = owner
        stack = _STACK.get()
        for t in stack[stack.index(rule) if rule in stack else len(stack):]:
            t.depth = t.parent.depth + 1 if t.parent is not None else 0
    ref = x.ref
    if type(ref) is not Local or ref.id < len(fragment.keys):  # (not a constant made after it finished)
        for r in rules:
            assert r.check_read is not None
            r.check_read(x.key)
    return True


__all__ = ["Trace", "TraceError", "Tracer", "current_trace"]
