"""Calls of custom_jvp and custom_vjp functions with keyword arguments and defaults, and
custom_jvp.defjvps, against JAX: a call binds to the function's signature (JAX's
resolve_kwargs), so keyword arguments become positional, defaults are filled in and the
rules get every argument positionally (the rules here differ on purpose from the
derivative of the body, so a pass that ignored them would fail)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)


def close(a, b, rtol=1e-11):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=1e-12)


def _jvp_pair():
    """f(a, b=2.0) = a b, whose rule says 10 b da + a db."""
    def make(cj):
        @cj
        def f(a, b=2.0):
            return a * b

        @f.defjvp
        def f_jvp(p, t):
            (a, b), (da, db) = p, t
            return f(a, b), da * b * 10 + db * a

        return f

    return make(tidu.custom_jvp), make(jax.custom_jvp)


def _vjp_pair():
    """g(a, b=2.0) = a b, whose bwd says (10 b ct, a ct); fwd has the default too."""
    def make(cv):
        @cv
        def g(a, b=2.0):
            return a * b

        g.defvjp(lambda a, b=2.0: (g(a, b), (a, b)), lambda r, ct: (ct * r[1] * 10, ct * r[0]))
        return g

    return make(tidu.custom_vjp), make(jax.custom_vjp)


# the calls of each test: (the custom function, its numpy module) -> a scalar function of a
CALLS = {
    "keyword": lambda f, np_: lambda a: f(a, b=3.0),
    "default": lambda f, np_: lambda a: f(a),
    "positional": lambda f, np_: lambda a: f(a, 3.0),
    "all_keywords": lambda f, np_: lambda a: f(b=a * a, a=a),
    "traced_keyword": lambda f, np_: lambda a: f(a * a, b=np_.sin(a)),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_custom_jvp_keywords_and_defaults(call):
    tf, jf = _jvp_pair()
    t, j = CALLS[call](tf, tnp), CALLS[call](jf, jnp)
    for a in (1.0, 0.7):
        close(t(a), j(a))
        close(tidu.grad(t)(a), jax.grad(j)(a))
        close(tidu.jvp(t, (a,), (0.5,)), jax.jvp(j, (a,), (0.5,)))
        close(tidu.vjp(t, a)[1](1.5), jax.vjp(j, a)[1](1.5))
        close(tidu.grad(tidu.grad(t))(a), jax.grad(jax.grad(j))(a))
    xs = np.array([0.3, -0.7, 1.1])
    close(tidu.vmap(t)(xs), jax.vmap(j)(xs))
    close(tidu.vmap(tidu.grad(t))(xs), jax.vmap(jax.grad(j))(xs))


def test_custom_jvp_the_brief_values():
    f, _ = _jvp_pair()
    assert f(1.0, b=3.0) == 3.0
    assert tidu.grad(lambda a: f(a, b=3.0))(1.0) == 30.0
    assert tidu.grad(lambda a: f(a))(1.0) == 20.0
    assert f(1.0) == 2.0


@pytest.mark.parametrize("call", sorted(CALLS))
def test_custom_vjp_keywords_and_defaults(call):
    tg, jg = _vjp_pair()
    t, j = CALLS[call](tg, tnp), CALLS[call](jg, jnp)
    for a in (1.0, 0.7):
        close(t(a), j(a))
        close(tidu.grad(t)(a), jax.grad(j)(a))
        close(tidu.vjp(t, a)[1](1.5), jax.vjp(j, a)[1](1.5))
        close(tidu.hessian(t, mode="RoR")(a), jax.grad(jax.grad(j))(a))
    xs = np.array([0.3, -0.7, 1.1])
    close(tidu.vmap(t)(xs), jax.vmap(j)(xs))
    close(tidu.vmap(tidu.grad(t))(xs), jax.vmap(jax.grad(j))(xs))


def test_custom_vjp_the_brief_values():
    g, _ = _vjp_pair()
    assert tidu.grad(lambda a: g(a, b=3.0))(1.0) == 30.0
    assert tidu.grad(lambda a: g(a))(1.0) == 20.0
    assert g(1.0) == 2.0 and g(1.0, b=3.0) == 3.0


def test_grad_with_respect_to_a_keyword_argument():
    tf, jf = _jvp_pair()
    tg, jg = _vjp_pair()
    for t, j in ((tf, jf), (tg, jg)):
        close(tidu.grad(lambda a, b, t=t: t(a, b=b), argnums=(0, 1))(1.5, 0.5),
              jax.grad(lambda a, b, j=j: j(a, b=b), argnums=(0, 1))(1.5, 0.5))


def test_nondiff_argnums_index_the_bound_arguments():
    def make(cj):
        @functools.partial(cj, nondiff_argnums=(1,))
        def h(a, n=2, c=1.0):
            return a**n * c

        @h.defjvp
        def h_jvp(n, p, t):
            (a, c), (da, dc) = p, t
            return h(a, n, c), 3 * n * a ** (n - 1) * c * da + a**n * dc

        return h

    th, jh = make(tidu.custom_jvp), make(jax.custom_jvp)
    calls = [lambda h: lambda a: h(a), lambda h: lambda a: h(a, n=3), lambda h: lambda a: h(a, n=3, c=2.0),
             lambda h: lambda a: h(a, c=a), lambda h: lambda a: h(c=a, n=1, a=a * a)]
    for c in calls:
        t, j = c(th), c(jh)
        close(t(1.3), j(1.3))
        close(tidu.grad(t)(1.3), jax.grad(j)(1.3))
        close(tidu.grad(tidu.grad(t))(1.3), jax.grad(jax.grad(j))(1.3))


def test_custom_vjp_nondiff_argnums_by_keyword():
    def make(cv):
        @functools.partial(cv, nondiff_argnums=(1,))
        def s(x, k=2.0):
            return x * k

        s.defvjp(lambda x, k=2.0: (s(x, k), None), lambda k, _, ct: (ct * k * 7,))
        return s

    ts, js = make(tidu.custom_vjp), make(jax.custom_vjp)
    for c in (lambda s: lambda x: s(x), lambda s: lambda x: s(x, k=3.0), lambda s: lambda x: s(k=0.5, x=x)):
        close(tidu.grad(c(ts))(1.2), jax.grad(c(js))(1.2))


def test_var_positional_arguments():
    def make(cj):
        @cj
        def total(*xs):
            return sum(x * x for x in xs)

        total.defjvp(lambda p, t: (total(*p), sum(3 * x * dx for x, dx in zip(p, t, strict=True))))
        return total

    tt, jt = make(tidu.custom_jvp), make(jax.custom_jvp)
    close(tidu.grad(lambda a: tt(a, 2 * a, 1.0))(0.5), jax.grad(lambda a: jt(a, 2 * a, 1.0))(0.5))


def test_keyword_only_parameters():
    """As JAX: a keyword-only parameter left to its default works (the function uses its
    default; the rule sees the positional arguments only); passing it is refused."""
    def make(cj):
        @cj
        def k(a, *, b=1.5):
            return a * b

        k.defjvp(lambda p, t: (k(*p), t[0] * 5))
        return k

    tk, jk = make(tidu.custom_jvp), make(jax.custom_jvp)
    close(tk(2.0), jk(2.0))
    close(tidu.grad(lambda a: tk(a))(2.0), jax.grad(lambda a: jk(a))(2.0))
    for call in (lambda: jk(2.0, b=3.0), lambda: jax.grad(lambda a: jk(a, b=3.0))(2.0)):
        with pytest.raises(TypeError, match="could not be resolved"):
            call()
    for call in (lambda: tk(2.0, b=3.0), lambda: tidu.grad(lambda a: tk(a, b=3.0))(2.0)):
        with pytest.raises(TypeError, match=r"custom_jvp function k\(a, \*, b=1.5\): b cannot be passed by keyword"):
            call()

    @tidu.custom_vjp
    def v(a, *, b=1.5):
        return a * b

    v.defvjp(lambda a: (v(a), None), lambda _, ct: (ct * 5,))
    assert tidu.grad(lambda a: v(a))(2.0) == 5.0
    with pytest.raises(TypeError, match="custom_vjp function v.*b cannot be passed by keyword"):
        tidu.grad(lambda a: v(a, b=3.0))(2.0)


def test_var_keyword_arguments_are_refused():
    @tidu.custom_jvp
    def kw(a, **extra):
        return a

    kw.defjvp(lambda p, t: (kw(*p), t[0]))
    assert kw(1.0) == 1.0
    with pytest.raises(TypeError, match="z cannot be passed by keyword"):
        kw(1.0, z=2.0)


@pytest.mark.parametrize("kind", ["jvp", "vjp"])
def test_calls_that_do_not_fit_the_signature(kind):
    f = _jvp_pair()[0] if kind == "jvp" else _vjp_pair()[0]
    name = "f" if kind == "jvp" else "g"
    prefix = rf"custom_{kind} function {name}\(a, b=2.0\): the call does not fit its signature: "
    for call, why in ((lambda: f(1.0, c=2.0), "unexpected keyword argument 'c'"),
                      (lambda: f(), "missing a required argument: 'a'"),
                      (lambda: f(1.0, 2.0, 3.0), "too many positional arguments"),
                      (lambda: f(1.0, a=2.0), "multiple values for argument 'a'"),
                      (lambda: tidu.grad(lambda a: f(a, c=2.0))(1.0), "unexpected keyword argument 'c'")):
        with pytest.raises(TypeError, match=prefix + ".*" + why) as info:
            call()
        assert "\n" not in str(info.value)


def test_a_partial_takes_no_keyword_arguments():
    """As JAX, a functools.partial's signature is opaque: positional calls only."""
    def mul(a, b):
        return a * b

    f = tidu.custom_jvp(functools.partial(mul, b=2.0))
    f.defjvp(lambda p, t: (f(*p), t[0] * 10))
    assert tidu.grad(lambda a: f(a))(1.0) == 10.0
    with pytest.raises(TypeError, match="custom_jvp function .* takes no keyword arguments .*pass b positionally"):
        f(1.0, b=3.0)


def test_nondiff_argnums_out_of_range():
    @functools.partial(tidu.custom_jvp, nondiff_argnums=(1,))
    def f(a):
        return a * 2

    f.defjvp(lambda n, p, t: (f(p[0]), t[0]))
    with pytest.raises(TypeError, match="nondiff_argnums 1 is out of range for a call with 1 arguments"):
        tidu.grad(f)(1.0)


# --- defjvps ----------------------------------------------------------------------------------------


def _defjvps_pair():
    def make(cj, np_):
        @cj
        def m(x, y=2.0):
            return np_.sin(x) * y

        m.defjvps(lambda xd, out, x, y: 3 * np_.cos(x) * xd * y, lambda yd, out, x, y: out / y * yd * 0.5)
        return m

    return make(tidu.custom_jvp, tnp), make(jax.custom_jvp, jnp)


def test_defjvps_against_jax():
    tm, jm = _defjvps_pair()
    close(tidu.grad(tm, argnums=(0, 1))(1.0, 3.0), jax.grad(jm, argnums=(0, 1))(1.0, 3.0))
    close(tidu.jvp(tm, (1.0, 3.0), (0.3, -0.2)), jax.jvp(jm, (1.0, 3.0), (0.3, -0.2)))
    close(tidu.vjp(tm, 1.0, 3.0)[1](1.5), jax.vjp(jm, 1.0, 3.0)[1](1.5))
    for c in (lambda m, np_: lambda x: m(x), lambda m, np_: lambda x: m(x, y=x),
              lambda m, np_: lambda x: m(y=np_.sin(x), x=x)):
        t, j = c(tm, tnp), c(jm, jnp)
        close(tidu.grad(t)(0.8), jax.grad(j)(0.8))
        close(tidu.grad(tidu.grad(t))(0.8), jax.grad(jax.grad(j))(0.8))
    xs = np.array([0.3, -0.7, 1.1])
    close(tidu.vmap(tidu.grad(tm))(xs), jax.vmap(jax.grad(jm))(xs))


def test_defjvps_none_and_arrays():
    def make(cj, np_):
        @cj
        def m(x, y):
            return np_.sum(np_.sin(x) * y)

        m.defjvps(None, lambda yd, out, x, y: np_.sum(np_.sin(x) * yd) * 4)
        return m

    tm, jm = make(tidu.custom_jvp, tnp), make(jax.custom_jvp, jnp)
    x, y = np.array([0.3, -0.7, 1.1]), np.array([1.0, 2.0, -0.5])
    close(tidu.grad(tm, argnums=(0, 1))(x, y), jax.grad(jm, argnums=(0, 1))(x, y))
    close(tidu.jacfwd(tm, argnums=1)(x, y), jax.jacfwd(jm, argnums=1)(x, y))

    @tidu.custom_jvp
    def nothing(x):
        return x * x

    nothing.defjvps(None)
    assert tidu.grad(nothing)(3.0) == 0.0
    assert tidu.jvp(nothing, (3.0,), (1.0,))[1] == 0.0


def test_defjvps_refusals():
    @functools.partial(tidu.custom_jvp, nondiff_argnums=(1,))
    def f(x, n):
        return x * n

    with pytest.raises(TypeError, match="custom_jvp function f: defjvps cannot be used with nondiff_argnums"):
        f.defjvps(lambda xd, out, x, n: xd)

    @tidu.custom_jvp
    def g(x):
        return x

    g.defjvps(lambda xd, out, x: xd, lambda yd, out, x: yd)
    assert g(1.0) == 1.0
    with pytest.raises(TypeError, match="defjvps was given 2 functions, for a call with 1 arguments"):
        tidu.grad(g)(1.0)
