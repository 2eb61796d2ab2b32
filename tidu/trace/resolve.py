"""resolve: a logical view over fragments and their parents, copying nothing.

The view answers ``definition(key)`` by asking the fragments that define the key, and
walks the logical DAG from given outputs in topological order (iteratively: graphs
may be 10^5 nodes deep). Input aliases make an input stand for an existing value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from tidu.core.keys import InputKey, ValueKey, input_key
from tidu.trace.fragments import Fragment


class UnresolvedKeyError(LookupError):
    """A value key is not defined by any fragment of a resolved view."""


class ResolvedView:
    """Logical DAG over ``fragments`` and, transitively, their parents."""

    def __init__(self, fragments: Sequence[Fragment], aliases: Mapping[InputKey | str, ValueKey] | None = None):
        seen: dict[int, Fragment] = {}
        stack = list(reversed(fragments))
        while stack:
            f = stack.pop()
            if not isinstance(f, Fragment):
                raise TypeError(f"resolve takes fragments, got {type(f).__name__}")
            if id(f) in seen:
                continue
            seen[id(f)] = f
            stack.extend(reversed(f.parents))
        self.fragments: tuple[Fragment, ...] = tuple(seen.values())
        self.aliases: dict[InputKey, ValueKey] = {input_key(k): v for k, v in (aliases or {}).items()}

    def with_aliases(self, aliases: Mapping[InputKey | str, ValueKey]) -> ResolvedView:
        merged = dict(self.aliases)
        merged.update({input_key(k): v for k, v in aliases.items()})
        return ResolvedView(self.fragments, merged)

    def defining_fragment(self, key: ValueKey) -> Fragment | None:
        for f in self.fragments:
            if key in f.index:
                return f
        return None

    def alias_of(self, key: ValueKey) -> ValueKey | None:
        """The value an aliased input stands for, or None."""
        if key.input is not None and self.aliases:
            return self.aliases.get(key.input)
        return None

    def definition(self, key: ValueKey) -> ValueKey:
        """Check ``key`` is defined in this view and return it (a key is its own
        definition: op, attrs, input keys, role, slot). Inputs are always defined."""
        if key.input is not None or self.defining_fragment(key) is not None:
            return key
        raise self._unresolved(key, None)

    def _unresolved(self, key: ValueKey, consumer: ValueKey | None) -> UnresolvedKeyError:
        names = ", ".join(f.name for f in self.fragments) or "no fragments"
        used = f" (operand of {consumer!r})" if consumer is not None else ""
        return UnresolvedKeyError(
            f"value {key!r}{used} is not defined by any fragment in this view; searched: {names}. "
            "Pass the fragment that built it to resolve(), or list it as a parent."
        )

    def topo_order(self, outputs: Iterable[ValueKey]) -> list[ValueKey]:
        """Every value the outputs depend on, each after its operands (deterministic)."""
        order: list[ValueKey] = []
        # True once ordered, False while on the DFS path (met again: an alias cycle).
        # One dict serves both, so each edge costs one look-up: on graphs of ~10^5
        # values the walk's time is mostly these look-ups.
        done: dict[ValueKey, bool] = {}
        # the biggest fragment first: most values are found there, in place
        indexes = sorted((f.index for f in self.fragments), key=len, reverse=True)
        first = indexes[0] if indexes else {}
        rest = indexes[1:]
        for root in outputs:
            if root in done:
                continue
            self.definition(root)
            # Iterative post-order DFS; each frame is (key, iterator over its deps).
            stack = [(root, iter(self._deps(root)))]
            done[root] = False
            while stack:
                key, deps = stack[-1]
                for dep in deps:
                    state = done.get(dep)
                    if state:
                        continue
                    if state is not None:
                        raise ValueError(f"input aliases form a cycle through {dep!r}")
                    if dep.input is None:
                        if dep not in first:  # in a fragment other than the first, or none
                            for index in rest:
                                if dep in index:
                                    break
                            else:
                                raise self._unresolved(dep, key)
                        stack.append((dep, iter(dep.inputs)))
                    else:
                        stack.append((dep, iter(self._deps(dep))))
                    done[dep] = False
                    break
                else:
                    stack.pop()
                    done[key] = True
                    order.append(key)
        return order

    def _deps(self, key: ValueKey) -> tuple[ValueKey, ...]:
        if key.input is not None:
            target = self.alias_of(key)
            return (target,) if target is not None else ()
        return key.inputs

    def __repr__(self) -> str:
        return f"<ResolvedView over {', '.join(f.name for f in self.fragments)}>"


def resolve(
    fragments: Fragment | Sequence[Fragment],
    aliases: Mapping[InputKey | str, ValueKey] | None = None,
) -> ResolvedView:
    """A logical view over ``fragments`` and their parents (nothing is copied)."""
    if isinstance(fragments, Fragment):
        fragments = [fragments]
    return ResolvedView(list(fragments), aliases)
