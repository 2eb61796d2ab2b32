"""tidu.checkpoint_policies and tidu.checkpoint_name: JAX's rematerialization policies,
accepted by tidu.checkpoint (code written for jax.checkpoint runs unchanged) and giving
JAX's values and derivatives; each policy answers as JAX's does for the same primitive
(as JAX documents it)."""

from __future__ import annotations

import jax
import jax.ad_checkpoint
import jax.numpy as jnp
import numpy as np
import pytest

import tidu
import tidu.numpy as tnp
from tidu import checkpoint_policies as cp

jax.config.update("jax_enable_x64", True)

W = np.array([[0.5, -1.0, 0.25], [1.5, 0.3, -0.7]])
X = np.array([0.3, -1.2, 0.8])

POLICIES = {
    "everything_saveable": (cp.everything_saveable, jax.checkpoint_policies.everything_saveable),
    "nothing_saveable": (cp.nothing_saveable, jax.checkpoint_policies.nothing_saveable),
    "dots_saveable": (cp.dots_saveable, jax.checkpoint_policies.dots_saveable),
    "checkpoint_dots": (cp.checkpoint_dots, jax.checkpoint_policies.checkpoint_dots),
    "dots_with_no_batch_dims_saveable": (cp.dots_with_no_batch_dims_saveable,
                                         jax.checkpoint_policies.dots_with_no_batch_dims_saveable),
    "save_only_these_names": (cp.save_only_these_names("h"), jax.checkpoint_policies.save_only_these_names("h")),
    "save_any_names_but_these": (cp.save_any_names_but_these("h"),
                                 jax.checkpoint_policies.save_any_names_but_these("h")),
    "save_anything_except_these_names": (cp.save_anything_except_these_names("h"),
                                         jax.checkpoint_policies.save_anything_except_these_names("h")),
    "save_from_both_policies": (cp.save_from_both_policies(cp.dots_saveable, cp.save_only_these_names("h")),
                                jax.checkpoint_policies.save_from_both_policies(
                                    jax.checkpoint_policies.dots_saveable,
                                    jax.checkpoint_policies.save_only_these_names("h"))),
}


def _layer(m, name):
    def f(x):
        h = name(m.tanh(m.matmul(W, x)), "h")
        return m.sum(m.sin(h) * h) + m.sum(x ** 3)
    return f


def test_every_jax_policy_has_a_tidu_counterpart():
    want = {n for n in dir(jax.checkpoint_policies) if not n.startswith("_")}
    assert want <= set(cp.__all__)
    assert all(callable(getattr(cp, n)) for n in want)


@pytest.mark.parametrize("name", POLICIES)
def test_checkpoint_with_a_policy_gives_jax_values_and_derivatives(name):
    mine, theirs = POLICIES[name]
    f = tidu.checkpoint(_layer(tnp, tidu.checkpoint_name), policy=mine)
    g = jax.checkpoint(_layer(jnp, jax.ad_checkpoint.checkpoint_name), policy=theirs)
    np.testing.assert_allclose(f(X), g(X), rtol=1e-14)
    np.testing.assert_allclose(tidu.grad(f)(X), jax.grad(g)(X), rtol=1e-13)
    np.testing.assert_allclose(tidu.hessian(f)(X), jax.hessian(g)(X), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(tidu.jit(tidu.grad(f))(X), jax.grad(g)(X), rtol=1e-13)


def test_policies_answer_as_jax_policies_do():
    sin, dot, name = jax.lax.sin_p, jax.lax.dot_general_p, jax.ad_checkpoint.name_p
    plain = {"dimension_numbers": (((1,), (0,)), ((), ()))}
    batched = {"dimension_numbers": (((2,), (1,)), ((0,), (0,)))}
    calls = [(sin, {}), (dot, plain), (dot, batched), (name, {"name": "h"}), (name, {"name": "g"})]
    for label, (mine, theirs) in POLICIES.items():
        for prim, params in calls:
            if label == "save_anything_except_these_names":
                # as JAX documents it ("excluding the names given"); JAX 0.12's stores everything
                want = not (prim is name and params["name"] == "h")
            else:
                want = bool(theirs(prim, **params))
            assert mine(prim, **params) == want, (label, prim, params)
            assert mine(prim.name, **params) == want, (label, prim.name, params)  # tidu passes names


def test_checkpoint_name_is_the_value_with_its_derivatives():
    assert tidu.checkpoint_name(2.5, "a") == 2.5
    tree = {"a": np.ones(2), "b": (3.0,)}
    assert tidu.checkpoint_name(tree, "t") is tree
    f = lambda x: tnp.sum(tidu.checkpoint_name(tnp.exp(x), "e") ** 2)  # noqa: E731
    np.testing.assert_allclose(tidu.grad(f)(X), 2 * np.exp(2 * X), rtol=1e-14)


def test_bad_policy_and_names_are_one_line_errors():
    with pytest.raises(TypeError, match=r"tidu.checkpoint: policy must be None or a function.*got str 'dots'"):
        tidu.checkpoint(lambda x: x, policy="dots")
    with pytest.raises(TypeError, match=r"tidu.checkpoint_name: name must be a string, got int 3"):
        tidu.checkpoint_name(1.0, 3)
    with pytest.raises(TypeError, match=r"save_only_these_names: names are strings"):
        cp.save_only_these_names("a", 1)
    with pytest.raises(TypeError, match=r"save_from_both_policies takes two policies"):
        cp.save_from_both_policies(cp.dots_saveable, "x")


def test_offloading_policies_store_what_they_would_offload():
    p = cp.offload_dot_with_no_batch_dims("device", "pinned_host")
    assert p("dot_general", dimension_numbers=(((1,), (0,)), ((), ()))) and not p("sin")
    q = cp.save_and_offload_only_these_names(names_which_can_be_saved=["a"], names_which_can_be_offloaded=["b"],
                                             offload_src="device", offload_dst="pinned_host")
    assert q("name", name="a") and q("name", name="b") and not q("name", name="c") and not q("sin")
