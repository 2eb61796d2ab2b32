"""tidu.jet against jax.experimental.jet (and, for primitives JAX's jet has no rule for,
against the derivatives of t -> f(x(t)) by nested jax.jvp), one case per primitive that
has a Taylor rule or goes through the fallback."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp
from tidu.transforms.jet import RULES, JetError

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy
from jax.experimental.jet import jet as jax_jet  # noqa: E402

RNG = np.random.default_rng(28)


def vec(*shape, lo=0.4, hi=1.6):
    return RNG.uniform(lo, hi, shape)


def spd(n):
    a = RNG.normal(size=(n, n))
    return a @ a.T + n * np.eye(n)


def nested_jvp_series(f, primals, series):
    """Derivatives of t -> f(x(t)) at 0 by nested jax.jvp: the reference where JAX's jet
    has no rule."""
    K = len(series[0])

    def path(t):
        return [p + sum(s[k] * t ** (k + 1) / math.factorial(k + 1) for k in range(K))
                for p, s in zip(primals, series, strict=True)]

    g = lambda t: f(*path(t))  # noqa: E731
    out = []
    for _ in range(K):
        g = (lambda h: lambda t: jax.jvp(h, (t,), (1.0,))[1])(g)
        out.append(jax.jit(g)(0.0))  # one XLA compilation per order, not one per op
    return f(*primals), out


SPD3 = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
TRIL3 = np.tril(SPD3)

# name -> (tidu function, JAX function, primals, reference: "jet" or "jvp")
CASES = {
    "add": (lambda x, y: x + y, lambda x, y: x + y, (vec(3), vec(3)), "jet"),
    "sub": (lambda x, y: x - y, lambda x, y: x - y, (vec(3), vec(3)), "jet"),
    "neg": (lambda x: -x, lambda x: -x, (vec(3),), "jet"),
    "mul": (lambda x, y: x * y, lambda x, y: x * y, (vec(3), vec(3)), "jet"),
    "div": (lambda x, y: x / y, lambda x, y: x / y, (vec(3), vec(3)), "jet"),
    "pow": (lambda x: x ** 2.5, lambda x: x ** 2.5, (vec(3),), "jet"),
    "pow (both move)": (lambda x, y: x ** y, lambda x, y: x ** y, (vec(3), vec(3)), "jet"),
    "exp": (tnp.exp, jnp.exp, (vec(3),), "jet"),
    "log": (tnp.log, jnp.log, (vec(3),), "jet"),
    "expm1": (tnp.expm1, jnp.expm1, (vec(3),), "jet"),
    "log1p": (tnp.log1p, jnp.log1p, (vec(3),), "jet"),
    "sin": (tnp.sin, jnp.sin, (vec(3),), "jet"),
    "cos": (tnp.cos, jnp.cos, (vec(3),), "jet"),
    "tanh": (tnp.tanh, jnp.tanh, (vec(3),), "jet"),
    "sqrt": (tnp.sqrt, jnp.sqrt, (vec(3),), "jet"),
    "rsqrt": (tidu.op("rsqrt"), jax.lax.rsqrt, (vec(3),), "jet"),
    "one_minus_square": (tidu.op("one_minus_square"), lambda x: (1 - x) * (1 + x), (vec(3),), "jet"),
    # (JAX's jet has no cbrt rule; both signs: the real root)
    "cbrt": (tnp.cbrt, jnp.cbrt, (np.array([-1.3, 0.7, -0.45, 1.6]),), "jvp"),
    "abs": (lambda x: tnp.abs(x - 1.0), lambda x: jnp.abs(x - 1.0), (vec(3),), "jet"),
    "sign": (lambda x: tnp.sign(x - 1.0) * x, lambda x: jnp.sign(x - 1.0) * x, (vec(3),), "jet"),
    "floor": (lambda x: tnp.floor(3 * x) * x, lambda x: jnp.floor(3 * x) * x, (vec(3),), "jet"),
    "ceil": (lambda x: tnp.ceil(3 * x) * x, lambda x: jnp.ceil(3 * x) * x, (vec(3),), "jet"),
    "rint": (lambda x: tnp.rint(3 * x) * x, lambda x: jnp.rint(3 * x) * x, (vec(3),), "jet"),
    "rem": (lambda x, y: tnp.fmod(3 * x, y), lambda x, y: jnp.fmod(3 * x, y), (vec(3), vec(3)), "jet"),
    "maximum": (lambda x: tnp.maximum(x * x, tnp.sin(x)), lambda x: jnp.maximum(x * x, jnp.sin(x)),
                (vec(3),), "jet"),
    "minimum": (lambda x: tnp.minimum(x * x, tnp.sin(x)), lambda x: jnp.minimum(x * x, jnp.sin(x)),
                (vec(3),), "jet"),
    "select/compare": (lambda x: tnp.where(x > 1.0, tnp.exp(x), x * x), lambda x: jnp.where(x > 1.0, jnp.exp(x), x * x),
                       (vec(4),), "jet"),
    "convert": (lambda x: tnp.exp(x.astype(np.float32)).astype(np.float64),
                lambda x: jnp.exp(x.astype(np.float32)).astype(np.float64), (vec(3),), "tol-f32"),
    "broadcast_in_dim": (lambda x: tnp.sin(tnp.broadcast_to(x, (2, 3))), lambda x: jnp.sin(jnp.broadcast_to(x, (2, 3))),
                         (vec(3),), "jet"),
    "reshape": (lambda x: tnp.exp(tnp.reshape(x, (3, 2))), lambda x: jnp.exp(jnp.reshape(x, (3, 2))), (vec(6),), "jet"),
    "transpose": (lambda x: tnp.tanh(tnp.transpose(x)), lambda x: jnp.tanh(jnp.transpose(x)), (vec(2, 3),), "jet"),
    "reverse": (lambda x: x * tnp.flip(x), lambda x: x * jnp.flip(x), (vec(4),), "jet"),
    "reduce_sum": (lambda x: tnp.sum(tnp.exp(x)), lambda x: jnp.sum(jnp.exp(x)), (vec(4),), "jet"),
    "reduce_max": (lambda x: tnp.max(tnp.sin(x)), lambda x: jnp.max(jnp.sin(x)), (vec(4),), "jet"),
    "reduce_prod": (lambda x: tnp.prod(x), lambda x: jnp.prod(x), (vec(4),), "jvp"),
    "dot_general": (lambda a, b: tnp.sin(a @ b), lambda a, b: jnp.sin(a @ b), (vec(2, 3), vec(3, 2)), "jet"),
    "slice": (lambda x: tnp.exp(x[1:3]), lambda x: jnp.exp(x[1:3]), (vec(4),), "jet"),
    "dynamic_slice/dynamic_update_slice": (  # at a traced index
        lambda x: tnp.exp(tnp.at(x)[tnp.argmax(x)].set(x[tnp.argmin(x)] * x[0])),
        lambda x: jnp.exp(x.at[jnp.argmax(x)].set(x[jnp.argmin(x)] * x[0])), (vec(4),), "jvp"),
    "pad": (lambda x: tnp.sin(tnp.pad(x, 2)), lambda x: jnp.sin(jnp.pad(x, 2)), (vec(3),), "jet"),
    "concatenate": (lambda x, y: tnp.exp(tnp.concatenate([x, y])), lambda x, y: jnp.exp(jnp.concatenate([x, y])),
                    (vec(2), vec(3)), "jet"),
    "triangle": (lambda x: tnp.tril(x) * x, lambda x: jnp.tril(x) * x, (vec(3, 3),), "jvp"),
    "complex/real/imag/conj": (
        lambda x, y: tnp.real(tnp.conj(x + 1j * y) * (x - 1j * y)) + tnp.imag((x + 1j * y) ** 2),
        lambda x, y: jnp.real(jnp.conj(x + 1j * y) * (x - 1j * y)) + jnp.imag((x + 1j * y) ** 2),
        (vec(3), vec(3)), "jvp"),
    "cholesky (fallback)": (tnp.linalg.cholesky, jnp.linalg.cholesky, (spd(3),), "jvp"),
    "solve (a moves: fallback)": (tnp.linalg.solve, jnp.linalg.solve, (spd(3), vec(3)), "jvp"),
    "solve (b moves)": (lambda b: tnp.linalg.solve(SPD3, tnp.sin(b)),
                        lambda b: jnp.linalg.solve(SPD3, jnp.sin(b)), (vec(3),), "jvp"),
    "triangular_solve (b moves)": (lambda b: tnp.linalg.solve_triangular(TRIL3, tnp.exp(b), lower=True),
                                   lambda b: jax.scipy.linalg.solve_triangular(TRIL3, jnp.exp(b), lower=True),
                                   (vec(3),), "jvp"),
    "triangular_solve (a moves: fallback)": (
        lambda a: tnp.linalg.solve_triangular(tnp.tril(a), TRIL3[0], lower=True),
        lambda a: jax.scipy.linalg.solve_triangular(jnp.tril(a), TRIL3[0], lower=True), (SPD3,), "jvp"),
    "logabsdet (fallback)": (lambda a: tnp.linalg.slogdet(a)[1], lambda a: jnp.linalg.slogdet(a)[1], (spd(3),), "jvp"),
    # the discrete Fourier transforms: linear, their series pass through
    "fft/ifft": (lambda x: tnp.real(tnp.fft.ifft(tnp.fft.fft(tnp.sin(x)) * tnp.fft.fft(x))),
                 lambda x: jnp.real(jnp.fft.ifft(jnp.fft.fft(jnp.sin(x)) * jnp.fft.fft(x))), (vec(4),), "jvp"),
    "rfft/irfft": (lambda x: tnp.fft.irfft(tnp.fft.rfft(x) ** 2, n=6),
                   lambda x: jnp.fft.irfft(jnp.fft.rfft(x) ** 2, n=6), (vec(6),), "jvp"),
}
FAST = ("tanh", "pow (both move)", "dot_general")


def check(name, K=4):
    f, g, primals, ref = CASES[name]
    series = tuple([RNG.normal(size=np.shape(p)) for _ in range(K)] for p in primals)
    y0, ys = tidu.jet(f, primals, series)
    jp = tuple(jnp.asarray(p) for p in primals)
    js = tuple([jnp.asarray(c) for c in s] for s in series)
    z0, zs = jax_jet(g, jp, js) if ref == "jet" else nested_jvp_series(g, jp, js)
    tol = dict(rtol=1e-5, atol=1e-5) if ref == "tol-f32" else dict(rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.asarray(y0), np.asarray(z0), **tol)
    assert len(ys) == K
    for k, (a, b) in enumerate(zip(ys, zs, strict=True)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), err_msg=f"{name}: term {k + 1}", **tol)


@pytest.mark.parametrize("name", FAST)
def test_jet_agrees_with_jax(name):
    check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(CASES) - set(FAST)))
def test_jet_agrees_with_jax_every_primitive(name):
    check(name)


def test_every_rule_has_a_case():
    covered = " ".join(CASES)
    missing = [p for p in RULES if p not in covered and p not in ("select", "compare")]
    assert not missing


def test_jet_inside_a_transform_and_symbolic_coefficients_are_exact():
    # jet composes: the gradient of a Taylor coefficient is the next derivative's factor
    d3 = lambda x: tidu.jet(tnp.exp, (x,), ([1.0, 0.0, 0.0],))[1][2] * tnp.sin(x)  # noqa: E731
    x = 0.3
    assert np.isclose(tidu.grad(d3)(x), np.exp(x) * (np.sin(x) + np.cos(x)))
    view = tidu.make_graph(lambda x: tidu.jet(tnp.exp, (2.0 * x,), ([2.0, 0.0, 0.0],))[1][2], semantics="real")(x)
    assert str(view.formula()) == "8*exp(2*x)"


def test_bad_arguments_are_clear_errors():
    with pytest.raises(JetError, match="different lengths"):
        tidu.jet(lambda x, y: x * y, (1.0, 2.0), ([1.0], [1.0, 0.0]))
    with pytest.raises(JetError, match="1 primal"):
        tidu.jet(tnp.sin, (1.0,), ([1.0], [1.0]))
    with pytest.raises(JetError, match="shape"):
        tidu.jet(tnp.sin, (np.ones(3),), ([np.ones(2)],))


def test_stop_gradient_is_a_constant_of_the_series():
    # stop_gradient(x) is x's value with no series (JAX's jet); the graph jet reads keeps it
    x, s = 0.7, [1.3, -0.4, 0.25, 0.5]
    cases = [(lambda m, sg: lambda v: v * v + sg(v ** 3)),
             (lambda m, sg: lambda v: m.sin(sg(v) * v) + m.exp(sg(m.cos(v))))]
    for make in cases:
        got = tidu.jet(make(tnp, tidu.stop_gradient), (x,), (s,))
        want = jax_jet(make(jnp, jax.lax.stop_gradient), (x,), (s,))
        np.testing.assert_allclose(got[0], want[0], rtol=1e-14)
        np.testing.assert_allclose(np.asarray(got[1], float), np.asarray(want[1], float), rtol=1e-12, atol=1e-14)


def test_custom_jvp_functions_follow_their_rule():
    # a custom_jvp function's series is its rule's, as its derivatives by every other
    # transform are (y' = rule_tangent(x, x') along the path), not its body's: here the
    # rule deliberately says y' = 2 x' (JAX's jet differentiates the body)
    f = tidu.custom_jvp(lambda v: tnp.log1p(tnp.exp(v)))
    f.defjvp(lambda p, t: (None, t[0] * 2.0))
    got = tidu.jet(f, (0.3,), ([1.0, 0.5, -1.0],))
    np.testing.assert_allclose(got[0], np.log1p(np.exp(0.3)), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(got[1], float), [2.0, 1.0, -2.0], rtol=1e-15)
    # a rule that reads the primal, and calls the function itself: y' = (1 - y^2) x' is
    # tanh's; the body is a deliberately wrong value's series (its jet would be cos's)
    g = tidu.custom_jvp(lambda v: tnp.tanh(v) + 0.0 * tnp.cos(v))
    g.defjvp(lambda p, t: (None, (1.0 - g(p[0]) ** 2) * t[0]))
    s = [1.3, -0.4, 0.25, 0.5]
    got = tidu.jet(g, (0.7,), (s,))
    want = jax_jet(jnp.tanh, (0.7,), (s,))
    np.testing.assert_allclose(np.asarray(got[1], float), np.asarray(want[1], float), rtol=1e-12)
    # and it agrees with nested forward mode (which uses the rule at every order)
    d = tidu.jacfwd(tidu.jacfwd(tidu.jacfwd(g)))(0.7)
    third = tidu.jet(g, (0.7,), ([1.0, 0.0, 0.0],))[1][2]
    np.testing.assert_allclose(third, d, rtol=1e-12)


def test_softplus_series_at_the_tie_are_its_rules():
    # logaddexp's body has kinks at x == y (max, |x - y|) that its rule smooths over: the
    # series at the tie are sigmoid's, as mpmath's
    got = tidu.jet(tidu.nn.softplus, (0.0,), ([1.0, 0.0, 0.0, 0.0],))
    np.testing.assert_allclose(got[0], np.log(2.0), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(got[1], float), [0.5, 0.25, 0.0, -0.125], rtol=1e-14, atol=1e-16)
    two = tidu.jet(lambda a, b: tnp.logaddexp(a, b), (1.5, 1.5), ([1.0, 0.0], [-1.0, 0.0]))
    np.testing.assert_allclose(np.asarray(two[1], float), [0.0, 1.0], atol=1e-15)


def test_a_boolean_of_complex_values_has_no_series():
    # compare of complex operands goes through the generic fallback, whose nested jvp gives
    # float0 tangents for a boolean: it has no series, so the select's is its branch's
    def f(z):
        return tnp.where(z == 1 + 1j, 2.0, 3.0) * tnp.real(z * z)
    z, s = 1 + 1j, [1.0 + 0.5j, 0.25 - 1j]
    got = tidu.jet(f, (z,), (s,))
    def path(t):
        return z + s[0] * t + s[1] * t ** 2 / 2
    def h(t):
        return 2.0 * jnp.real(path(t) ** 2)
    want = [jax.jvp(h, (0.0,), (1.0,))[1], jax.jvp(lambda t: jax.jvp(h, (t,), (1.0,))[1], (0.0,), (1.0,))[1]]
    np.testing.assert_allclose(got[0], 2.0 * np.real(z * z))
    np.testing.assert_allclose(np.asarray(got[1], float), np.asarray(want, float), rtol=1e-13)


@pytest.mark.parametrize("p", [2.5, 3.0, 0.5, 1.0, 4.0])
def test_power_series_at_base_zero_are_the_exact_derivatives(p):
    # x ** p at x0 = 0 along x(t) = 2 t + 3 t^2 / 2 - t^3 / 6: SymPy's derivatives of the
    # composition (one-sided where p - k < 0), where the quotient recurrence divided 0 by 0
    # and gave nan at every order (as JAX's jet does)
    import sympy as sp
    t = sp.symbols("t", positive=True)
    y = (2 * t + sp.Rational(3, 2) * t ** 2 - t ** 3 / 6) ** sp.nsimplify(p)
    want = [float(sp.limit(sp.diff(y, t, k), t, 0, "+")) for k in (1, 2, 3)]
    got = tidu.jet(lambda x: x ** p, (0.0,), ([2.0, 3.0, -1.0],))
    assert got[0] == 0.0
    np.testing.assert_allclose(np.asarray(got[1], float), want, rtol=1e-14)


def test_power_series_at_base_zero_agree_with_nested_grad():
    # the Taylor coefficients along x(t) = t are the derivatives grad's chain gives
    f = lambda x: x ** 2.5  # noqa: E731
    got = tidu.jet(f, (0.0,), ([1.0, 0.0, 0.0],))[1]
    want = [tidu.grad(f)(0.0), tidu.grad(tidu.grad(f))(0.0), tidu.grad(tidu.grad(tidu.grad(f)))(0.0)]
    np.testing.assert_array_equal(np.asarray(got, float), np.asarray(want, float))
    assert list(map(float, want)) == [0.0, 0.0, math.inf]
