"""jacfwd / jacrev / hessian / to_jax options against JAX: ``has_aux``, ``holomorphic``,
``hessian(sparse=True)`` with a ``mode``, non-array arguments of ``to_jax``, and argument
combinations (argnums, pytrees, dtypes). Every value is compared with JAX (x64)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.sparse as sp

import tidu
import tidu.numpy as tnp

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)

MODES = ("FoF", "FoR", "RoF", "RoR")


def close(got, want, rtol=1e-10, atol=1e-12):
    """Equal pytrees (structure and values; tidu's array leaves against JAX's)."""
    g_leaves, g_tree = jax.tree_util.tree_flatten(got)
    w_leaves, w_tree = jax.tree_util.tree_flatten(want)
    assert g_tree == w_tree, (g_tree, w_tree)
    for g, w in zip(g_leaves, w_leaves, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


X = np.array([0.3, -0.7, 1.1])
Z = np.array([0.3 + 0.2j, -0.5 + 1.1j, 0.7 - 0.4j])


# --- has_aux ------------------------------------------------------------------------------


def aux_fun(m):
    def f(x, y):
        out = {"s": m.sin(x) * y, "t": m.sum(x ** 2) * y}
        return out, {"r": m.cos(x), "pair": (x * y, y)}
    return f


@pytest.mark.parametrize("which", ["jacfwd", "jacrev"])
@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1, 0), -2])
def test_jacobian_has_aux_matches_jax(which, argnums):
    args = (X, 0.4)
    got = getattr(tidu, which)(aux_fun(tnp), argnums, has_aux=True)(*args)
    want = getattr(jax, which)(aux_fun(jnp), argnums, has_aux=True)(*args)
    close(got, want)


@pytest.mark.parametrize("mode", MODES)
def test_hessian_has_aux_matches_jax(mode):
    def f(m):
        return lambda x, y: (m.sum(x ** 3 * y) + m.sin(y) * x[0], {"x": x, "c": m.cos(y)})
    got = tidu.hessian(f(tnp), (0, 1), has_aux=True, mode=mode)(X, 0.5)
    want = jax.hessian(f(jnp), (0, 1), has_aux=True)(X, 0.5)
    close(got, want)


def test_has_aux_under_other_transforms_and_keywords():
    def f(m):
        return lambda x, scale=1.0: (m.sin(x) * scale, m.sum(x) * scale)
    xs = np.stack([X, 2 * X])
    got = tidu.vmap(tidu.jacfwd(f(tnp), has_aux=True))(xs)
    want = jax.vmap(jax.jacfwd(f(jnp), has_aux=True))(xs)
    close(got, want)
    close(tidu.jit(tidu.jacrev(f(tnp), has_aux=True))(X), jax.jacrev(f(jnp), has_aux=True)(X))
    close(tidu.jacrev(f(tnp), has_aux=True)(X, scale=3.0), jax.jacrev(f(jnp), has_aux=True)(X, scale=3.0))
    # a Jacobian of a Jacobian with aux: the aux passes through both (JAX's hessian)
    inner = tidu.jacrev(f(tnp), has_aux=True)
    got = tidu.jacfwd(inner, has_aux=True)(X)
    want = jax.jacfwd(jax.jacrev(f(jnp), has_aux=True), has_aux=True)(X)
    close(got, want)


def test_has_aux_needs_a_pair():
    for which in ("jacfwd", "jacrev", "hessian"):
        with pytest.raises(TypeError, match=r"(jacfwd|jacrev)\(has_aux=True\): <lambda> must return a pair"):
            getattr(tidu, which)(lambda x: tnp.sum(x ** 2), has_aux=True)(X)


@pytest.mark.parametrize("which", ["jacfwd", "jacrev", "hessian"])
def test_sparse_has_aux(which):
    def f(m):
        if which == "hessian":
            return lambda x: (m.sum(x[1:] * x[:-1] ** 2), {"x2": x * 2})
        return lambda x: (m.sin(x) * x[::-1], {"x2": x * 2})
    got, aux = getattr(tidu, which)(f(tnp), has_aux=True, sparse=True)(X)
    want, want_aux = getattr(jax, which)(f(jnp), has_aux=True)(X)
    assert isinstance(got, sp.csr_array)
    close(got.toarray(), want)
    close(aux, want_aux)
    with pytest.raises(TypeError, match=r"must return a pair \(output, aux\)"):
        getattr(tidu, which)(lambda x: tnp.sum(x), has_aux=True, sparse=True)(X)


# --- holomorphic ----------------------------------------------------------------------------


def holo(m):
    return lambda z, w: m.sin(z) * w + z[::-1] ** 2 * m.exp(w)


@pytest.mark.parametrize("which", ["jacfwd", "jacrev"])
@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_holomorphic_jacobians_match_jax(which, argnums):
    args = (Z, 0.2 - 0.3j)
    got = getattr(tidu, which)(holo(tnp), argnums, holomorphic=True)(*args)
    want = getattr(jax, which)(holo(jnp), argnums, holomorphic=True)(*args)
    close(got, want)


def test_holomorphic_jacrev_is_the_conjugate_of_tidus_adjoint_rows():
    """Without holomorphic=True jacrev keeps tidu's convention (documented): conj of JAX's."""
    got = tidu.jacrev(holo(tnp))(Z, 0.2 - 0.3j)
    want = jax.jacrev(holo(jnp), holomorphic=True)(Z, 0.2 - 0.3j)
    close(got, np.conj(want))
    close(tidu.jacrev(lambda z: z * z, holomorphic=True)(1 + 2j), 2 + 4j)


@pytest.mark.parametrize("mode", MODES)
def test_holomorphic_hessian_every_mode_matches_jax(mode):
    """The four modes disagree on complex arguments without holomorphic=True
    (tests/test_outside_sparse_jet.py); with it, each is JAX's f''(z)."""
    def f(m):
        return lambda z: m.sum(z ** 3) + z[0] * z[1] + m.sin(z[2]) * z[0]
    got = tidu.hessian(f(tnp), holomorphic=True, mode=mode)(Z)
    close(got, jax.hessian(f(jnp), holomorphic=True)(Z))


def test_holomorphic_of_a_transformed_function_and_keywords():
    def f(m):
        return lambda z, k=1.0: m.exp(z) * z * k
    close(tidu.jacrev(tidu.jit(f(tnp)), holomorphic=True)(Z), jax.jacrev(f(jnp), holomorphic=True)(Z))
    close(tidu.jacrev(f(tnp), holomorphic=True)(Z, k=2.0), jax.jacrev(f(jnp), holomorphic=True)(Z, k=2.0))
    h = tidu.hessian(lambda z, k=1.0: (tnp.sum(f(tnp)(z, k)), z), has_aux=True, holomorphic=True, mode="RoR")
    close(h(Z, k=2.0), jax.hessian(lambda z, k=1.0: (jnp.sum(f(jnp)(z, k)), z), has_aux=True,
                                   holomorphic=True)(Z, k=2.0))


def test_holomorphic_with_has_aux():
    def f(m):
        return lambda z: (m.exp(z) * z, {"abs": m.abs(z)})
    for which in ("jacfwd", "jacrev"):
        close(getattr(tidu, which)(f(tnp), has_aux=True, holomorphic=True)(Z),
              getattr(jax, which)(f(jnp), has_aux=True, holomorphic=True)(Z))


@pytest.mark.parametrize("which", ["jacfwd", "jacrev", "hessian"])
def test_holomorphic_sparse_matches_jax(which):
    def f(m):
        if which == "hessian":
            return lambda z: m.sum(z[1:] * z[:-1] ** 2) + m.sum(m.sin(z))
        return lambda z: m.sin(z) * z[::-1]
    got = getattr(tidu, which)(f(tnp), holomorphic=True, sparse=True)(Z)
    close(got.toarray(), getattr(jax, which)(f(jnp), holomorphic=True)(Z))


@pytest.mark.parametrize("which", ["jacfwd", "jacrev", "hessian"])
def test_holomorphic_refuses_real_inputs_and_outputs(which):
    """JAX's rules: holomorphic=True needs complex arguments and complex outputs."""
    for sparse in (False, True):
        make = functools.partial(getattr(tidu, which), holomorphic=True, sparse=sparse)
        with pytest.raises(TypeError, match=r"holomorphic=True\) requires complex arguments to differentiate, "
                                            r"got argument x of dtype float64"):
            make(lambda x: tnp.sum(x * x))(X)
        with pytest.raises(TypeError, match=r"holomorphic=True\) requires complex outputs, got output of "
                                            r"<lambda> of dtype float64"):
            make(lambda z: tnp.sum(tnp.abs(z)))(Z)
    with pytest.raises(TypeError, match="holomorphic=True requires inputs with complex dtype"):
        getattr(jax, which)(lambda x: jnp.sum(x * x), holomorphic=True)(X)  # JAX refuses it too


def test_jacrev_of_complex_output_of_real_argument_is_the_real_part():
    """JAX refuses jacrev of a complex output of a real argument; tidu's adjoint rows keep
    a real argument's cotangent real (docs/transforms.md, complex numbers): the real part
    of the derivative, and jacfwd gives all of it, as JAX's."""
    def f(m):
        return lambda x: x * (1 + 1j) * m.sin(x)
    with pytest.raises(TypeError, match="real-valued outputs"):
        jax.jacrev(f(jnp))(X)
    full = jax.jacfwd(f(jnp))(X)
    close(tidu.jacfwd(f(tnp))(X), full)
    close(tidu.jacrev(f(tnp))(X), np.real(full))
    close(tidu.jacrev(f(tnp), sparse=True)(X).toarray(), np.real(full))


# --- hessian(sparse=True) and mode ---------------------------------------------------------------


def test_sparse_hessian_mode():
    def f(m):
        return lambda x: m.sum(x[1:] * x[:-1] ** 2)
    want = np.asarray(jax.hessian(f(jnp))(X))
    close(tidu.hessian(f(tnp), sparse=True)(X).toarray(), want)
    close(tidu.hessian(f(tnp), mode="FoR", sparse=True)(X).toarray(), want)
    for mode in ("FoF", "RoF", "RoR"):
        with pytest.raises(ValueError, match=rf"tidu.hessian\(sparse=True\) computes Hessian-vector products forward "
                                             rf"over reverse \(mode='FoR'\) only, got mode='{mode}'"):
            tidu.hessian(f(tnp), mode=mode, sparse=True)
        close(tidu.hessian(f(tnp), mode=mode)(X), want)  # the dense Hessian takes every mode
    with pytest.raises(ValueError, match="mode must be one of FoF, FoR, RoF, RoR"):
        tidu.hessian(f(tnp), mode="fwd", sparse=True)


def test_flags_are_checked():
    with pytest.raises(TypeError, match=r"tidu.hessian: has_aux must be True or False, got 'RoR' \(mode is a "
                                        r"keyword argument"):
        tidu.hessian(lambda x: tnp.sum(x), 0, "RoR")
    with pytest.raises(TypeError, match="tidu.jacfwd: holomorphic must be True or False, got 'yes'"):
        tidu.jacfwd(tnp.sin, holomorphic="yes")


# --- to_jax and non-array arguments ------------------------------------------------------------------


def _one_line_error(call, kind=TypeError):
    with pytest.raises(kind) as info:
        call()
    msg = str(info.value)
    assert "\n" not in msg, msg
    return msg


def test_to_jax_none_argument():
    def f(x):
        return tnp.sin(x) * 2.0
    msg = _one_line_error(lambda: tidu.to_jax(f)(None))
    assert msg.startswith("tidu.to_jax(f): argument x is None, which JAX and tidu take as an empty pytree"), msg
    assert "pass an array" in msg and "functools.partial(f, ...)" in msg
    # None a function accepts (an optional argument) passes through, as jax.jit's
    g = tidu.to_jax(lambda x, mask: x if mask is None else x * mask)
    close(g(X, None), X)


def test_to_jax_non_array_leaves():
    def f(x, opts):
        return tnp.sin(x)
    msg = _one_line_error(lambda: tidu.to_jax(f)("abc", {}))
    assert msg.startswith("tidu.to_jax(f): argument x is of type str; to_jax functions take JAX or NumPy arrays"), msg
    msg = _one_line_error(lambda: tidu.to_jax(f)(X, {"a": [1.0, object()]}))
    assert msg.startswith("tidu.to_jax(f): argument opts['a'][1] is of type object;"), msg
    msg = _one_line_error(lambda: tidu.to_jax(f)(np.array(["a"]), None))
    assert msg.startswith("tidu.to_jax(f): argument x has dtype <U1, which tidu does not handle"), msg
    msg = _one_line_error(lambda: tidu.to_jax(lambda x: tnp.sin(x))([1.0, 2.0]))
    assert msg.startswith("tidu.to_jax(<lambda>): argument x is a Python list, which JAX and tidu take as a "
                          "pytree"), msg
    # numbers, NumPy scalars and arrays are fine
    close(tidu.to_jax(lambda x, k: tnp.sin(x) * k)(X, np.float64(2.0)), 2 * np.sin(X))
    close(tidu.to_jax(lambda x, k: tnp.sin(x) * k)(X, 3), 3 * np.sin(X))


# --- argument combinations ---------------------------------------------------------------------------


def two(m):
    return lambda x, p: m.sin(x) * p["a"] + m.sum(p["b"][0] * x) * p["b"][1]


P = {"a": np.array([0.5, 1.5, -0.2]), "b": (np.array([0.1, 0.2, 0.3]), 0.7)}


@pytest.mark.parametrize("which", ["jacfwd", "jacrev"])
@pytest.mark.parametrize("argnums", [0, 1, -1, (0, 1), (-1, 0), [1]])
def test_argnums_and_pytrees_match_jax(which, argnums):
    got = getattr(tidu, which)(two(tnp), argnums)(X, P)
    want = getattr(jax, which)(two(jnp), argnums)(X, P)
    close(got, want)


@pytest.mark.parametrize("which", ["jacfwd", "jacrev", "hessian"])
def test_bad_argnums(which):
    scalar = lambda x: tnp.sum(x ** 3)  # noqa: E731
    with pytest.raises(ValueError, match=rf"tidu.{which}: argnums=2 is out of range for a call with 1"):
        getattr(tidu, which)(scalar, 2)(X)
    with pytest.raises(ValueError, match=r"argnums=\(0, 0\) repeats an argument"):
        getattr(tidu, which)(scalar, (0, 0))(X)
    with pytest.raises(ValueError, match=r"argnums=\(0, -1\) repeats an argument"):
        getattr(tidu, which)(scalar, (0, -1))(X)
    for bad in ((), True, 0.0, "0"):
        with pytest.raises(TypeError, match="argnums must be an int or a non-empty tuple of ints"):
            getattr(tidu, which)(scalar, bad)
    # JAX refuses them too (with other words)
    with pytest.raises(ValueError):
        getattr(jax, which)(lambda x: jnp.sum(x ** 3), 2)(X)


@pytest.mark.parametrize("shape", [(), (1,), (3,), (2, 2)])
@pytest.mark.parametrize("which", ["jacfwd", "jacrev"])
def test_scalar_and_array_outputs(which, shape):
    def f(m):
        return lambda x, y: m.reshape(m.sin(x[: int(np.prod(shape))]) * y, shape)
    got = getattr(tidu, which)(f(tnp), (0, 1))(np.array([0.1, 0.2, 0.3, 0.4]), 0.5)
    want = getattr(jax, which)(f(jnp), (0, 1))(np.array([0.1, 0.2, 0.3, 0.4]), 0.5)
    close(got, want)


@pytest.mark.parametrize("which", ["grad", "jacfwd", "jacrev", "hessian"])
def test_integer_inputs_are_refused_as_in_jax(which):
    """JAX refuses integer arguments (grad/jacrev unless allow_int); so does tidu, naming it."""
    f = {"tidu": lambda x: tnp.sum(x * 2.0), "jax": lambda x: jnp.sum(x * 2.0)}
    if which in ("jacfwd", "jacrev"):
        f = {"tidu": lambda x: x * 2.0, "jax": lambda x: x * 2.0}
    with pytest.raises(TypeError):
        getattr(jax, which)(f["jax"])(np.arange(3))
    with pytest.raises(TypeError, match=r"cannot differentiate with respect to argument x .*its dtype is int64"):
        getattr(tidu, which)(f["tidu"])(np.arange(3))
    # an integer argument outside argnums is fine, in both
    g = {m: (lambda x, n: x * n) for m in ("tidu", "jax")}
    close(getattr(tidu, "jacfwd" if which == "hessian" else which)(g["tidu"] if which != "grad" else
                                                                  (lambda x, n: tnp.sum(x * n)))(X, np.arange(3)),
          getattr(jax, "jacfwd" if which == "hessian" else which)(g["jax"] if which != "grad" else
                                                                 (lambda x, n: jnp.sum(x * n)))(X, np.arange(3)))


def test_integer_output_of_jacfwd_is_zero_as_in_jax():
    got = tidu.jacfwd(lambda x: tnp.floor(x).astype(int))(X)
    want = jax.jacfwd(lambda x: jnp.floor(x).astype(int))(X)
    close(got, want)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    with pytest.raises(TypeError, match="only float and complex outputs have cotangents"):
        tidu.jacrev(lambda x: tnp.floor(x).astype(int))(X)
