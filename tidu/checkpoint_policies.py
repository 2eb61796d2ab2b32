"""JAX's rematerialization policies (``jax.checkpoint_policies``), so that code written for
``jax.checkpoint(f, policy=...)`` runs under ``tidu.checkpoint`` unchanged.

In JAX a policy decides, per primitive application inside a checkpointed function, whether
its output is stored for the backward pass or recomputed. tidu compiles whole programs:
after ``materialize_merge`` a recomputed value is the original node, so there is no stored
residual to choose and ``tidu.checkpoint`` checks a policy is callable and then needs no
answer from it. The policies are JAX's functions all the same (a primitive name, then the
operands' avals and the primitive's parameters, to a bool), so a policy combined or
written by hand behaves as in JAX. Storage through long loops is chosen where tidu does
store residuals: ``lax.scan(..., checkpoint=...)`` (docs/control-flow.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Policy = Callable[..., bool]

# the matrix products JAX's dot policies store: tidu's primitive and JAX's name of it
_DOTS = frozenset({"dot_general", "dot"})


def _name(prim: Any) -> str:
    """A primitive's name: tidu passes names, JAX passes objects with a ``name``."""
    return prim if isinstance(prim, str) else str(getattr(prim, "name", prim))


def everything_saveable(*_: Any, **__: Any) -> bool:
    """Store every value (JAX's default without checkpoint)."""
    return True


def nothing_saveable(*_: Any, **__: Any) -> bool:
    """Store nothing: recompute every value (``checkpoint``'s default)."""
    return False


def dots_saveable(prim: Any, *_: Any, **__: Any) -> bool:
    """Store matrix products only."""
    return _name(prim) in _DOTS


checkpoint_dots = dots_saveable


def dots_with_no_batch_dims_saveable(prim: Any, *_: Any, **params: Any) -> bool:
    """Store matrix products that have no batch dimensions."""
    if _name(prim) not in _DOTS:
        return False
    dims = params.get("dimension_numbers")
    if dims is None:  # a plain dot has none
        return True
    (_, _), (lhs_batch, rhs_batch) = dims
    return not lhs_batch and not rhs_batch


checkpoint_dots_with_no_batch_dims = dots_with_no_batch_dims_saveable


def _names(names: tuple[Any, ...], where: str) -> frozenset[str]:
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"tidu.checkpoint_policies.{where}: names are strings (as given to "
                            f"tidu.checkpoint_name), got {type(n).__name__} {n!r}")
    return frozenset(names)


def save_only_these_names(*names: str) -> Policy:
    """A policy that stores the values named by ``checkpoint_name`` with one of ``names``."""
    keep = _names(names, "save_only_these_names")

    def policy(prim: Any, *_: Any, **params: Any) -> bool:
        return _name(prim) == "name" and params.get("name") in keep
    return policy


def save_any_names_but_these(*names: str) -> Policy:
    """A policy that stores every named value except those named with one of ``names``."""
    drop = _names(names, "save_any_names_but_these")

    def policy(prim: Any, *_: Any, **params: Any) -> bool:
        return _name(prim) == "name" and params.get("name") not in drop
    return policy


def save_anything_except_these_names(*names: str) -> Policy:
    """A policy that stores every value except those named with one of ``names``."""
    drop = _names(names, "save_anything_except_these_names")

    def policy(prim: Any, *_: Any, **params: Any) -> bool:
        return not (_name(prim) == "name" and params.get("name") in drop)
    return policy


def save_from_both_policies(policy_1: Policy, policy_2: Policy) -> Policy:
    """A policy that stores what either policy stores."""
    for p in (policy_1, policy_2):
        if not callable(p):
            raise TypeError(f"tidu.checkpoint_policies.save_from_both_policies takes two policies "
                            f"(functions), got {type(p).__name__}")

    def policy(*args: Any, **params: Any) -> bool:
        return bool(policy_1(*args, **params)) or bool(policy_2(*args, **params))
    return policy


def offload_dot_with_no_batch_dims(offload_src: str, offload_dst: str) -> Policy:
    """JAX's host-offloading variant of ``dots_with_no_batch_dims_saveable``: tidu has no
    separate host memory to offload to, so the values it would offload are stored."""
    del offload_src, offload_dst
    return dots_with_no_batch_dims_saveable


def save_and_offload_only_these_names(*, names_which_can_be_saved: Any, names_which_can_be_offloaded: Any,
                                      offload_src: str, offload_dst: str) -> Policy:
    """JAX's host-offloading variant of ``save_only_these_names`` (offloaded names are
    stored: tidu has no separate host memory)."""
    del offload_src, offload_dst
    return save_only_these_names(*names_which_can_be_saved, *names_which_can_be_offloaded)


def checkpoint_name(x: Any, name: str) -> Any:
    """``x``, named for a checkpoint policy (``jax.ad_checkpoint.checkpoint_name``): the
    value and its derivatives are ``x``'s."""
    if not isinstance(name, str):
        raise TypeError(f"tidu.checkpoint_name: name must be a string, got {type(name).__name__} {name!r}")
    return x


__all__ = [
    "checkpoint_dots", "checkpoint_dots_with_no_batch_dims", "dots_saveable",
    "dots_with_no_batch_dims_saveable", "everything_saveable", "nothing_saveable", "offload_dot_with_no_batch_dims",
    "save_and_offload_only_these_names", "save_any_names_but_these", "save_anything_except_these_names",
    "save_from_both_policies", "save_only_these_names",
]
