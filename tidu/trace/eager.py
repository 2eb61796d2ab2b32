"""An eager evaluator that speaks the builder protocol.

``linear_transpose(lin, builder=EagerBuilder(values))`` runs the reverse sweep and
executes each emitted op at once with NumPy, instead of building a fragment: the
transposed map applied directly (as an eager runtime would). ``values`` supplies the
primal values the rules refer to (``External`` keys) and the cotangent seeds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tidu.core.keys import PRIMARY, Attrs, Aval, InputKey, Literal, Role, ValueKey, aval_of
from tidu.ops.catalog import catalog
from tidu.ops.reference import evaluate
from tidu.trace.fragments import External, ValRef


class EagerBuilder:
    """Builder whose refs are NumPy arrays. ``primal(key)`` gives External values."""

    def __init__(self, primal: Callable[[ValueKey], np.ndarray], seeds: Mapping[InputKey, Any]) -> None:
        self.primal = primal
        self.seeds = dict(seeds)
        self.ops_run = 0

    def _value(self, ref: ValRef | np.ndarray) -> np.ndarray:
        if isinstance(ref, External):
            return self.primal(ref.key)
        return ref  # type: ignore[return-value]

    def aval(self, ref: Any) -> Aval:
        return ref.key.aval if isinstance(ref, External) else aval_of(ref)

    def input(self, key: InputKey, aval: Aval) -> np.ndarray:
        if key not in self.seeds:
            raise KeyError(f"no value for cotangent seed {key}")
        return np.asarray(self.seeds[key], dtype=aval.dtype).reshape(aval.shape)

    def add_op(self, op: str, operands: Sequence[Any], attrs: Attrs | None = None,
               role: Role = PRIMARY) -> list[np.ndarray]:
        attrs = attrs if isinstance(attrs, Attrs) else Attrs(attrs or {})
        args = [self._value(r) for r in operands]
        catalog().get_primitive(op).infer([aval_of(a) for a in args], attrs)  # same checks as a graph
        self.ops_run += 1
        return [np.asarray(evaluate(op, args, attrs))]

    def constant(self, value: Any, dtype: str | None = None) -> np.ndarray:
        return value.array if isinstance(value, Literal) else Literal(value, dtype).array
