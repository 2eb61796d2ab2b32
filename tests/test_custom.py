"""custom_jvp, custom_vjp, stop_gradient, checkpoint, keyword arguments and pytree
registration, against JAX's own (every rule here differs on purpose from the derivative
of the body, so a pass that ignored the rule would fail)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)

X = np.array([0.3, -0.7, 1.1])
HESSIAN_MODES = ("FoF", "FoR", "RoF", "RoR")


def close(a, b, rtol=1e-11):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=1e-12)


# --- custom_jvp: softplus with a rule that is 1.5 times the true derivative ------------------


def _softplus_pair():
    @tidu.custom_jvp
    def sp(x):
        return tnp.log1p(tnp.exp(x))

    @sp.defjvp
    def sp_jvp(primals, tangents):
        (x,), (dx,) = primals, tangents
        return sp(x), 1.5 * dx * tnp.exp(x) / (1 + tnp.exp(x))

    @jax.custom_jvp
    def jsp(x):
        return jnp.log1p(jnp.exp(x))

    @jsp.defjvp
    def jsp_jvp(primals, tangents):
        (x,), (dx,) = primals, tangents
        return jsp(x), 1.5 * dx * jnp.exp(x) / (1 + jnp.exp(x))

    return sp, jsp


SP, JSP = _softplus_pair()


def loss(xp, f):
    return lambda v: xp.sum(f(v) * v + f(v * v))


def test_custom_jvp_first_order_against_jax():
    close(SP(X), JSP(X))
    close(tidu.grad(loss(tnp, SP))(X), jax.jit(jax.grad(loss(jnp, JSP)))(X))
    v, g = tidu.value_and_grad(loss(tnp, SP))(X)
    jv, jg = jax.jit(jax.value_and_grad(loss(jnp, JSP)))(X)
    close(v, jv)
    close(g, jg)
    close(tidu.jvp(SP, (X,), (X + 1,))[1], jax.jit(jax.jvp, static_argnums=0)(JSP, (X,), (X + 1,))[1])
    close(tidu.vjp(SP, X)[1](X - 2)[0], jax.vjp(JSP, X)[1](X - 2)[0])
    close(tidu.jacfwd(SP)(X), jax.jit(jax.jacfwd(JSP))(X))
    close(tidu.jacrev(SP)(X), jax.jit(jax.jacrev(JSP))(X))


@pytest.mark.parametrize("mode", HESSIAN_MODES)
def test_custom_jvp_hessians_differentiate_the_rule(mode):
    close(tidu.hessian(loss(tnp, SP), mode=mode)(X), jax.jit(jax.hessian(loss(jnp, JSP)))(X))


def test_custom_jvp_higher_order_and_vmap():
    f, jf = (lambda x: SP(x) * x), (lambda x: JSP(x) * x)
    close(tidu.grad(tidu.grad(tidu.grad(f)))(0.4), jax.jit(jax.grad(jax.grad(jax.grad(jf))))(0.4))
    close(tidu.vmap(tidu.grad(f))(X), jax.jit(jax.vmap(jax.grad(jf)))(X))
    close(tidu.grad(lambda v: tnp.sum(tidu.vmap(f)(v)))(X), jax.jit(jax.grad(lambda v: jnp.sum(jax.vmap(jf)(v))))(X))
    close(tidu.jacfwd(tidu.vmap(tidu.grad(f)))(X), jax.jit(jax.jacfwd(jax.vmap(jax.grad(jf))))(X))


def test_custom_jvp_pytrees_several_outputs_and_nondiff_argnums():
    @tidu.custom_jvp
    def f(power, p):
        return {"a": p["x"] ** power * p["y"], "b": tnp.sin(p["x"])}

    f.nondiff_argnums = (0,)

    @f.defjvp
    def f_jvp(power, primals, tangents):
        (p,), (dp,) = primals, tangents
        x, y, dx, dy = p["x"], p["y"], dp["x"], dp["y"]
        return f(power, p), {"a": 2.0 * power * x ** (power - 1) * y * dx + x**power * dy,
                             "b": 3.0 * tnp.cos(x) * dx}

    @jax.custom_jvp
    def jf(power, p):
        return {"a": p["x"] ** power * p["y"], "b": jnp.sin(p["x"])}

    jf = jax.custom_jvp(jf.fun, nondiff_argnums=(0,))

    @jf.defjvp
    def jf_jvp(power, primals, tangents):
        (p,), (dp,) = primals, tangents
        x, y, dx, dy = p["x"], p["y"], dp["x"], dp["y"]
        return jf(power, p), {"a": 2.0 * power * x ** (power - 1) * y * dx + x**power * dy,
                              "b": 3.0 * jnp.cos(x) * dx}

    p = {"x": 0.7, "y": 1.3}
    for n in (2, 3):
        g = tidu.grad(lambda q, n=n: f(n, q)["a"] + f(n, q)["b"])(p)
        jg = jax.jit(jax.grad(lambda q, n=n: jf(n, q)["a"] + jf(n, q)["b"]))(p)
        close(g["x"], jg["x"])
        close(g["y"], jg["y"])
        h = tidu.hessian(lambda q, n=n: f(n, q)["a"] * f(n, q)["b"])(p)
        jh = jax.jit(jax.hessian(lambda q, n=n: jf(n, q)["a"] * jf(n, q)["b"]))(p)
        for i in "xy":
            for j in "xy":
                close(h[i][j], jh[i][j])


# --- custom_vjp ------------------------------------------------------------------------------


def _vjp_pair():
    @tidu.custom_vjp
    def f(x, y):
        return tnp.sin(x) * y

    def fwd(x, y):
        return f(x, y), (tnp.cos(x), tnp.sin(x), y)

    def bwd(res, g):
        c, s, y = res
        return (3.0 * g * c * y, g * s)  # 3x the true derivative in x

    f.defvjp(fwd, bwd)

    @jax.custom_vjp
    def jf(x, y):
        return jnp.sin(x) * y

    def jfwd(x, y):
        return jf(x, y), (jnp.cos(x), jnp.sin(x), y)

    def jbwd(res, g):
        c, s, y = res
        return (3.0 * g * c * y, g * s)

    jf.defvjp(jfwd, jbwd)
    return f, jf


CV, JCV = _vjp_pair()


def test_custom_vjp_reverse_mode_against_jax():
    Y = X[::-1] + 1
    close(CV(X, Y), JCV(X, Y))
    g = tidu.grad(lambda a, b: tnp.sum(CV(a, b) ** 2), (0, 1))(X, Y)
    jg = jax.jit(jax.grad(lambda a, b: jnp.sum(JCV(a, b) ** 2), (0, 1)))(X, Y)
    close(g[0], jg[0])
    close(g[1], jg[1])
    close(tidu.jacrev(lambda v: CV(v, v))(X), jax.jit(jax.jacrev(lambda v: JCV(v, v)))(X))
    close(tidu.vjp(CV, X, Y)[1](Y)[0], jax.vjp(JCV, X, Y)[1](Y)[0])
    close(tidu.vmap(tidu.grad(lambda a: CV(a, 2.0)))(X), jax.jit(jax.vmap(jax.grad(lambda a: JCV(a, 2.0))))(X))
    close(tidu.hessian(lambda v: tnp.sum(CV(v, v) ** 2), mode="RoR")(X),
          jax.jit(jax.jacrev(jax.jacrev(lambda v: jnp.sum(JCV(v, v) ** 2))))(X))


def test_custom_vjp_refuses_forward_mode_as_jax_does():
    with pytest.raises(TypeError, match="forward-mode differentiation .* custom_vjp"):
        tidu.jvp(lambda a: CV(a, 1.0), (0.3,), (1.0,))
    with pytest.raises(TypeError, match="forward-mode differentiation .* custom_vjp"):
        tidu.hessian(lambda v: tnp.sum(CV(v, v) ** 2), mode="FoR")(X)


# --- stop_gradient and checkpoint ---------------------------------------------------------------


@pytest.mark.parametrize("mode", HESSIAN_MODES)
def test_stop_gradient_against_jax(mode):
    def f(xp, sg):
        return lambda v: xp.sum(v**3 * sg(v) + xp.sin(sg(v * v) * v))

    close(tidu.grad(f(tnp, tidu.stop_gradient))(X), jax.jit(jax.grad(f(jnp, jax.lax.stop_gradient)))(X))
    close(tidu.hessian(f(tnp, tidu.stop_gradient), mode=mode)(X),
          jax.jit(jax.hessian(f(jnp, jax.lax.stop_gradient)))(X))
    close(tidu.vmap(tidu.grad(lambda a: a * tidu.stop_gradient(a) ** 2))(X),
          jax.jit(jax.vmap(jax.grad(lambda a: a * jax.lax.stop_gradient(a) ** 2)))(X))
    assert tidu.stop_gradient(2.5) == 2.5


def test_checkpoint_against_jax_and_merged_by_materialize():
    inner_t = tidu.checkpoint(lambda v: tnp.sin(v) * v)
    inner_j = jax.checkpoint(lambda v: jnp.sin(v) * v)
    close(tidu.grad(lambda v: tnp.sum(inner_t(v) ** 2))(X), jax.jit(jax.grad(lambda v: jnp.sum(inner_j(v) ** 2)))(X))
    close(tidu.hessian(lambda v: tnp.sum(inner_t(v) * v))(X),
          jax.jit(jax.hessian(lambda v: jnp.sum(inner_j(v) * v)))(X))
    plain = tidu.make_graph(tidu.grad(lambda v: tnp.sum(tnp.sin(v) * v * v)))(X)
    ckpt = tidu.make_graph(tidu.grad(lambda v: tnp.sum(inner_t(v) * v)))(X)
    assert ckpt.graph.op_count == plain.graph.op_count
    assert tidu.remat is tidu.checkpoint


# --- lowering ------------------------------------------------------------------------------------


def test_custom_rules_lower_to_numpy_and_stablehlo():
    f = tidu.grad(lambda v: tnp.sum(SP(v) * tidu.stop_gradient(v) + CV(v, v)))
    view = tidu.make_graph(f)(X)
    text = view.to_stablehlo()
    assert "custom" not in text and "stop_gradient" not in text
    assert "custom" not in view.to_numpy_source()
    want = jax.jit(jax.grad(lambda v: jnp.sum(JSP(v) * jax.lax.stop_gradient(v) + JCV(v, v))))(X)
    close(view.program.eval([X])[0], want)
    close(view.program.run([X], backend="xla")[0], want)


# --- keyword arguments -------------------------------------------------------------------------------


def test_keyword_arguments_pass_through_undifferentiated():
    def f(xp):
        return lambda x, y, *, scale=1.0: xp.sum(scale * x**2 * y)

    Y = X + 2
    for kw in ({"scale": 3.0}, {"scale": np.float64(0.5)}):
        close(tidu.grad(f(tnp))(X, Y, **kw), jax.jit(jax.grad(f(jnp)))(X, Y, **kw))
        close(tidu.grad(f(tnp), argnums=1)(X, Y, **kw), jax.jit(jax.grad(f(jnp), argnums=1))(X, Y, **kw))
        close(tidu.value_and_grad(f(tnp))(X, Y, **kw)[0], jax.jit(jax.value_and_grad(f(jnp)))(X, Y, **kw)[0])
        close(tidu.jacfwd(f(tnp))(X, Y, **kw), jax.jit(jax.jacfwd(f(jnp)))(X, Y, **kw))
        close(tidu.jacrev(f(tnp))(X, Y, **kw), jax.jit(jax.jacrev(f(jnp)))(X, Y, **kw))
        close(tidu.hessian(f(tnp))(X, Y, **kw), jax.jit(jax.hessian(f(jnp)))(X, Y, **kw))
        close(tidu.jit(f(tnp))(X, Y, **kw), f(jnp)(X, Y, **kw))
    scales = np.array([1.0, 10.0, 100.0])
    close(tidu.vmap(lambda a, *, s: a * s)(X, s=scales), jax.jit(jax.vmap(lambda a, *, s: a * s))(X, s=scales))
    g = tidu.grad(f(tnp))
    g(X, Y, scale=3.0)
    hits = tidu.trace_cache_info().hits
    g(X, Y, scale=4.0)
    assert tidu.trace_cache_info().hits == hits + 1  # one trace per set of keyword names
    with pytest.raises(ValueError, match="argnums=0 is out of range"):
        tidu.grad(lambda x: x)(x=1.0)


def test_a_list_argument_is_named_in_the_error():
    with pytest.raises(TypeError, match="argument a is a Python list"):
        tidu.grad(lambda a: tnp.sum(a**2))([1.0, 2.0])
    assert tidu.grad(lambda a: a[0] * a[1])([1.0, 2.0]) == [2.0, 1.0]  # a pytree, as in JAX


# --- pytree registration ---------------------------------------------------------------------------


@dataclasses.dataclass
class Params:
    w: object
    b: object
    kind: str = "affine"


tidu.tree_util.register_dataclass(Params, meta_fields=["kind"])


class Point:
    def __init__(self, a, b):
        self.a, self.b = a, b


tidu.tree_util.register_pytree_node(Point, lambda p: ((p.a, p.b), None), lambda aux, kids: Point(*kids))


def test_registered_classes_are_pytrees():
    p = Params(np.array([1.0, 2.0]), 0.5)
    xs = np.array([0.3, 0.4])
    g = tidu.grad(lambda q, x: tnp.sum((q.w * x + q.b) ** 2))(p, xs)
    jg = jax.jit(jax.grad(lambda q, x: jnp.sum((q["w"] * x + q["b"]) ** 2)))({"w": p.w, "b": p.b}, xs)
    assert isinstance(g, Params) and g.kind == "affine"
    close(g.w, jg["w"])
    close(g.b, jg["b"])
    q = tidu.grad(lambda pt: pt.a * pt.b**2)(Point(2.0, 3.0))
    assert isinstance(q, Point) and (q.a, q.b) == (9.0, 12.0)
    out = tidu.vmap(lambda pt: Point(pt.a * pt.b, pt.b))(Point(np.arange(3.0), np.full(3, 2.0)))
    close(out.a, [0.0, 2.0, 4.0])
    leaves, td = tidu.tree_util.tree_flatten(p)
    assert len(leaves) == 2 and "Params" in str(td)
    assert tidu.tree_util.tree_unflatten(td, leaves).kind == "affine"
    assert tidu.tree_util.tree_map(lambda v: v * 2, Point(1.0, 2.0)).b == 4.0


def test_registration_errors_are_clear():
    with pytest.raises(TypeError, match="takes a dataclass"):
        tidu.tree_util.register_dataclass(Point)
    with pytest.raises(ValueError, match="no field"):
        tidu.tree_util.register_dataclass(Params, meta_fields=["nope"])

    class Bad:
        def __init__(self, v):
            self.v = v

    tidu.tree_util.register_pytree_node(Bad, lambda b: ((b.v,), [1]), lambda aux, kids: Bad(*kids))
    with pytest.raises(TypeError, match="auxiliary data .* must be hashable"):
        tidu.grad(lambda b: b.v)(Bad(1.0))


# --- misuse ---------------------------------------------------------------------------------------------


def test_rule_errors_name_the_function():
    @tidu.custom_jvp
    def no_rule(x):
        return x

    with pytest.raises(TypeError, match="no_rule has no JVP rule"):
        tidu.grad(no_rule)(1.0)

    @tidu.custom_jvp
    def bad_pair(x):
        return x

    bad_pair.defjvp(lambda p, t: t[0])
    with pytest.raises(TypeError, match="JVP rule of bad_pair must return a pair"):
        tidu.grad(bad_pair)(1.0)

    @tidu.custom_vjp
    def bad_bwd(x, y):
        return x * y

    bad_bwd.defvjp(lambda x, y: (bad_bwd(x, y), (x, y)), lambda res, g: (g * res[1],))
    with pytest.raises(TypeError, match="bwd of bad_bwd must return a tuple with one cotangent per argument"):
        tidu.grad(bad_bwd)(1.0, 2.0)

    @tidu.custom_jvp
    def static_arg(n, x):
        return x * n

    static_arg.nondiff_argnums = (0,)
    static_arg.defjvp(lambda n, p, t: (static_arg(n, *p), t[0] * n))
    with pytest.raises(TypeError, match="nondiff_argnums .* traced value"):
        tidu.grad(lambda n, x: static_arg(n, x), argnums=1)(2.0, 1.0)


# --- custom rules under vmap: the rule is mapped over the examples (JAX's batching) ---------------


def _coupled_jvp(m, custom_jvp):
    """x * sum(x): its rule sums over the whole argument, so it is not elementwise."""
    @custom_jvp
    def f(x):
        return x * m.sum(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (dx,) = primals, tangents
        return f(x), dx * m.sum(x) + x * m.sum(dx)
    return f


def _coupled_vjp(m, custom_vjp):
    @custom_vjp
    def f(x):
        return m.sum(x ** 2) * x

    def fwd(x):
        return f(x), (x, m.sum(x ** 2))

    def bwd(res, g):
        x, s = res
        return (g * s + 2 * x * m.dot(g, x),)

    f.defvjp(fwd, bwd)
    return f


XB = np.arange(6.0).reshape(2, 3) / 5 + 0.1
WB = np.array([1.0, 2.0, 3.0])


@pytest.mark.parametrize("transform", ["jacfwd", "grad", "hessian", "vmap-vmap-grad", "vmap-grad"])
def test_vmapped_custom_jvp_maps_its_rule_over_the_examples(transform):
    """A batched custom_jvp call runs its rule once per example: a rule that sums over its
    argument gave derivatives summed over the whole batch before (silently wrong)."""
    f, fj = _coupled_jvp(tnp, tidu.custom_jvp), _coupled_jvp(jnp, jax.custom_jvp)
    loss, loss_j = (lambda x: tnp.sum(tidu.vmap(f)(x) * WB)), (lambda x: jnp.sum(jax.vmap(fj)(x) * WB))
    if transform == "jacfwd":
        close(tidu.jacfwd(tidu.vmap(f))(XB), jax.jacfwd(jax.vmap(fj))(XB))
    elif transform == "grad":
        close(tidu.grad(loss)(XB), jax.grad(loss_j)(XB))
    elif transform == "hessian":
        close(tidu.hessian(loss)(XB), jax.hessian(loss_j)(XB))
    elif transform == "vmap-vmap-grad":
        close(tidu.grad(lambda x: tnp.sum(tidu.vmap(tidu.vmap(f))(x)))(XB[None]),
              jax.grad(lambda x: jnp.sum(jax.vmap(jax.vmap(fj))(x)))(XB[None]))
    else:
        close(tidu.vmap(tidu.grad(lambda x: tnp.sum(f(x) * WB)))(XB),
              jax.vmap(jax.grad(lambda x: jnp.sum(fj(x) * WB)))(XB))


@pytest.mark.parametrize("transform", ["grad", "jacrev", "jacrev-of-vmap", "vmap-jacrev", "hessian-RoR"])
def test_vmapped_custom_vjp_maps_its_bwd_over_the_examples(transform):
    f, fj = _coupled_vjp(tnp, tidu.custom_vjp), _coupled_vjp(jnp, jax.custom_vjp)
    if transform == "grad":
        close(tidu.grad(lambda x: tnp.sum(tidu.vmap(f)(x) * WB))(XB),
              jax.grad(lambda x: jnp.sum(jax.vmap(fj)(x) * WB))(XB))
    elif transform == "jacrev":
        close(tidu.jacrev(f)(XB[0]), jax.jacrev(fj)(XB[0]))
    elif transform == "jacrev-of-vmap":
        close(tidu.jacrev(tidu.vmap(f))(XB), jax.jacrev(jax.vmap(fj))(XB))
    elif transform == "vmap-jacrev":
        close(tidu.vmap(tidu.jacrev(f))(XB), jax.vmap(jax.jacrev(fj))(XB))
    else:
        close(tidu.hessian(lambda x: tnp.sum(f(x) * WB), mode="RoR")(XB[0]),
              jax.jacrev(jax.grad(lambda x: jnp.sum(fj(x) * WB)))(XB[0]))


def test_a_transform_inside_a_custom_rule_reads_the_rules_values_as_jax():
    """jacfwd inside a custom_jvp rule (and a custom_vjp bwd) that closes over the rule's
    primal values: the nested view could not resolve them (UnresolvedKeyError)."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    jax.config.update("jax_enable_x64", True)

    def jvp_version(cj, m, jacfwd):
        @cj
        def h(a, b):
            return m.sin(a) * b

        @h.defjvp
        def h_jvp(p, t):
            a, b = p
            y = h(a, b)
            s = m.sum(y ** 2)
            return y, jacfwd(lambda v: v * s)(t[0]) @ t[0] + m.cos(a) * b * t[0] + m.sin(a) * t[1]

        return lambda th: m.sum(h(th * 2, th[0] + 1.0))

    def vjp_version(cv, m, jacfwd):
        @cv
        def h(a):
            return m.sin(a) * a

        def fwd(a):
            return h(a), (a, m.sum(a ** 2))

        def bwd(res, g):
            a, s = res
            return (g @ jacfwd(lambda v: m.sin(v) * v * s)(a) / s,)

        h.defvjp(fwd, bwd)
        return lambda th: m.sum(h(th * 2) ** 2)

    x = np.array([0.7, 1.3])
    f, g = jvp_version(tidu.custom_jvp, tnp, tidu.jacfwd), jvp_version(jax.custom_jvp, jnp, jax.jacfwd)
    np.testing.assert_allclose(tidu.grad(f)(x), jax.grad(g)(x), rtol=1e-12)
    for mode in ("FoF", "RoR"):
        np.testing.assert_allclose(tidu.hessian(f, mode=mode)(x), jax.hessian(g)(x), rtol=1e-12)
    f, g = vjp_version(tidu.custom_vjp, tnp, tidu.jacfwd), vjp_version(jax.custom_vjp, jnp, jax.jacfwd)
    np.testing.assert_allclose(tidu.grad(f)(x), jax.grad(g)(x), rtol=1e-12)
    np.testing.assert_allclose(tidu.jacrev(f)(x), jax.jacrev(g)(x), rtol=1e-12)


def test_a_custom_jvp_body_is_not_linearized():
    # the rule gives the output's tangent: the body's ops (here 2 per step, 200 steps)
    # are traced once for the value, and linearizing them (3 more per step) would build
    # values no output reads; the limit sits between the two counts
    def body(v):
        y = v
        for _ in range(200):
            y = tnp.sin(y) * 1.01
        return y

    g = tidu.custom_jvp(body)
    g.defjvp(lambda p, t: (None, t[0] * 2.0))
    with tidu.resource_limits(graph_values=1300):
        got = tidu.grad(lambda v: tnp.sum(g(v) * v))(np.arange(3.0))
    np.testing.assert_allclose(got, body(np.arange(3.0)) + 2.0 * np.arange(3.0), rtol=1e-14)
