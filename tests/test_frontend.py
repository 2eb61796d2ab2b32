"""tidu.numpy against NumPy (values, shapes, dtypes), inspection, and error messages."""

from __future__ import annotations

import functools
import inspect

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp
from tidu.trace.tracing import TraceError
from tidu.transforms.staging import arg_names

rng = np.random.default_rng(1)


def run(f, *args):
    """Trace f with tidu.numpy, compile, evaluate."""
    return tidu.jit(f)(*args)


def same(got, want, rtol=1e-12, atol=1e-14):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def both(f, *args, **kw):
    """f written over a module: tidu (traced) and NumPy give the same result."""
    same(run(f(tnp), *args), f(np)(*args), **kw)


X = rng.normal(size=(2, 3, 4))
V3, V4 = rng.normal(size=3), rng.normal(size=4)
M34, M43 = rng.normal(size=(3, 4)), rng.normal(size=(4, 3))

# --- elementwise, broadcasting, promotion ------------------------------------------------


@pytest.mark.parametrize("name", ["exp", "sin", "cos", "tanh", "expm1", "log1p", "sign", "abs",
                                  "negative", "square", "tan", "sinh", "cosh"])
def test_unary(name):
    both(lambda m: getattr(m, name), X * 0.5)


@pytest.mark.parametrize("name", ["log", "sqrt", "log2", "log10", "reciprocal"])
def test_unary_positive(name):
    both(lambda m: getattr(m, name), np.abs(X) + 0.1)


@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide", "maximum", "minimum"])
@pytest.mark.parametrize("shapes", [((3,), (3,)), ((2, 3, 4), (4,)), ((3, 1), (1, 4)),
                                    ((2, 1, 4), (3, 1)), ((), (3,))])
def test_binary_broadcasting(op, shapes):
    a, b = rng.normal(size=shapes[0]), rng.normal(size=shapes[1]) + 3.0
    both(lambda m: getattr(m, op), a, b)


@pytest.mark.parametrize("expr", [
    lambda x, y: x + y, lambda x, y: x - 2.0 * y, lambda x, y: x * y / (y + 5.0),
    lambda x, y: -x + 1, lambda x, y: 3.0 - x, lambda x, y: 2.0 / (x * x + 1.0),
    lambda x, y: x @ y, lambda x, y: (x < y) == (y > x), lambda x, y: x <= 0.5,
])
def test_operators(expr):
    same(run(expr, V4, V4 + 1.0), expr(V4, V4 + 1.0))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 8, -1, -3, 2.0, 0.5, -0.5, 2.5, 1.7])
def test_power_with_constant_exponent(n):
    x = np.abs(V4) + 0.5
    same(run(lambda x: x**n, x), x**n)


def test_power_with_traced_exponent_and_base():
    x, y = np.abs(V4) + 0.5, V4
    same(run(lambda x, y: x**y, x, y), x**y)
    same(run(lambda y: 2.0**y, y), 2.0**y)
    same(run(lambda x: x**3, np.array([1, 2, 3])), np.array([1, 8, 27]))


@pytest.mark.parametrize("a, b, dtype", [
    (np.float32(1.5) * np.ones(3, np.float32), 2.0, "float32"),
    (np.ones(3, np.float32), np.float64(2.0), "float64"),
    (np.ones(3, np.int64), np.ones(3, np.float32), "float32"),
    (np.ones(3, np.int32), 2.5, "float64"),
    (np.ones(3, np.int64), 2, "int64"),
    (np.ones(3, np.int32), np.ones(3, np.int64), "int64"),
    (np.ones(3, np.float32), 1j, "complex64"),
    (np.ones(3, np.float64), np.ones(3, np.complex64), "complex128"),
    (np.ones(3, np.complex64), np.ones(3, np.float32), "complex64"),
    (np.ones(3, bool), 2, "int64"),
])
def test_dtype_promotion_like_jax(a, b, dtype):
    assert run(lambda x, y: x + y, a, b).dtype == np.dtype(dtype)
    assert tnp.result_type(a, b) == dtype


def test_int_division_is_true_division():
    same(run(lambda x, y: x / y, np.array([1, 2, 3]), np.array([2, 2, 2])), np.array([0.5, 1.0, 1.5]))


def test_complex_parts():
    z = np.array([1 + 2j, -0.5 + 0.25j])
    for f in (lambda m: lambda z: z.real, lambda m: lambda z: z.imag, lambda m: lambda z: z.conj(),
              lambda m: m.abs, lambda m: lambda z: m.real(z * 2.0),
              lambda m: lambda z: m.imag(z) * m.real(z), lambda m: lambda z: m.conj(z) * z,
              lambda m: lambda z: z * 2.0 + 1j):
        both(f, z)
    assert run(tnp.abs, z).dtype == np.float64
    same(run(lambda x: x.imag, V3), np.zeros(3))
    same(run(tnp.conj, V3), V3)


def test_where_clip_and_comparisons():
    both(lambda m: lambda x: m.where(x > 0, x, 0.1 * x), X)
    both(lambda m: lambda x: m.where(x, 1.0, 2.0), np.array([0.0, 1.0, 2.0]))
    both(lambda m: lambda x, y: m.where(x > y[:, None], x, y[:, None]), M34, V3)
    both(lambda m: lambda x: m.clip(x, -0.5, 0.5), X)
    same(run(lambda x, y: tnp.greater_equal(x, y), V3, V3[::-1]), V3[::-1] <= V3)
    same(run(lambda x: tnp.not_equal(x, 0.0), np.array([0.0, 1.0])), np.array([False, True]))


# --- reductions -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sum", "mean", "prod", "max", "min"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), (2, 0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(name, axis, keepdims):
    both(lambda m: lambda x: getattr(m, name)(x, axis=axis, keepdims=keepdims), X)


def test_reduction_methods_and_bool_sum():
    for f in (lambda x: x.sum(), lambda x: x.mean(axis=1), lambda x: x.max(0), lambda x: x.prod(-1),
              lambda x: x.min(axis=(0, 1))):
        same(run(f, X), f(X))
    same(run(lambda x: tnp.sum(x > 0), X), np.sum(X > 0))


# --- shapes and indexing ------------------------------------------------------------------------


@pytest.mark.parametrize("index", [
    1, -1, (0, 1), (1, -1, 2), slice(1, None), slice(None, None, 2), (slice(None), slice(1, 3)),
    (Ellipsis, 1), (None, 0), (0, None, slice(None), None), (Ellipsis, None), (1, Ellipsis, 2),
    (slice(None), slice(0, 3, 2), slice(1, 4, 2)), slice(5, 9), (0, 0, 0), (),
    (slice(-2, None), slice(None, -1)),
])
def test_basic_indexing(index):
    same(run(lambda x: x[index], X), X[index])


def test_integer_index_and_stack_fast_paths_emit_the_general_paths_ops():
    """``x[i]`` with a Python int and ``stack`` of like tracers on axis 0 take a short path
    (ODE right-hand sides are made of them); it records what the general path records
    (reached here by a NumPy integer index and a negative axis)."""
    def fast(x):
        return tnp.stack([x[1], x[-1] * x[0]]), x[1][2], x[0, 1]

    def general(x):
        return (tnp.stack([x[np.int64(1)], x[np.int64(-1)] * x[np.int64(0)]], axis=-3),
                x[np.int64(1)][np.int64(2)], x[np.int64(0), np.int64(1)])

    want = str(tidu.make_graph(tidu.jit(general))(X)).split("\n", 1)[1]  # (less the title line)
    assert str(tidu.make_graph(tidu.jit(fast))(X)).split("\n", 1)[1] == want
    for a, b in zip(tidu.jit(fast)(X), (np.stack([X[1], X[-1] * X[0]]), X[1][2], X[0, 1]), strict=True):
        same(a, b)
    with pytest.raises(IndexError, match="out of bounds"):
        run(lambda x: x[2], X)


def test_shape_functions():
    for f in (
        lambda m: lambda x: m.reshape(x, (6, 4)), lambda m: lambda x: m.reshape(x, (-1,)),
        lambda m: lambda x: x.reshape(4, -1), lambda m: lambda x: m.transpose(x),
        lambda m: lambda x: m.transpose(x, (1, 2, 0)), lambda m: lambda x: x.transpose(2, 0, 1),
        lambda m: lambda x: x.T, lambda m: lambda x: m.swapaxes(x, 0, 2),
        lambda m: lambda x: m.expand_dims(x, 1), lambda m: lambda x: m.squeeze(x[:, :1], 1),
        lambda m: lambda x: m.ravel(x), lambda m: lambda x: m.broadcast_to(x[0, 0], (5, 4)),
        lambda m: lambda x: m.concatenate([x, x * 2], axis=1),
        lambda m: lambda x: m.concatenate([x[0], 1.0 + x[1], np.ones((3, 4))], axis=-1),
        lambda m: lambda x: m.stack([x[0], x[1]]), lambda m: lambda x: m.stack([x[0], x[1]], axis=-1),
        lambda m: lambda x: m.zeros_like(x) + m.ones_like(x[0]),
        lambda m: lambda x: m.full_like(x, 2.5) * x,
    ):
        both(f, X)
    t = []
    run(lambda x: t.append((x.shape, x.ndim, x.dtype, x.size, len(x), tnp.shape(x))) or x, X)
    assert t == [((2, 3, 4), 3, np.dtype("float64"), 24, 2, (2, 3, 4))]
    same(run(lambda x: tnp.stack(list(x)), M34), M34)


# --- contractions --------------------------------------------------------------------------------


@pytest.mark.parametrize("shapes", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                                    ((5, 2, 3), (3, 4)), ((5, 2, 3), (1, 3, 4)),
                                    ((2, 1, 2, 3), (4, 3, 2))])
def test_matmul(shapes):
    a, b = rng.normal(size=shapes[0]), rng.normal(size=shapes[1])
    both(lambda m: m.matmul, a, b)
    same(run(lambda x, y: x @ y, a, b), a @ b)


@pytest.mark.parametrize("shapes", [((3,), (3,)), ((2, 3), (3,)), ((2, 3), (3, 4)),
                                    ((2, 2, 3), (4, 3, 5)), ((), (3,))])
def test_dot_inner_outer(shapes):
    a, b = rng.normal(size=shapes[0]), rng.normal(size=shapes[1])
    both(lambda m: m.dot, a, b)
    if a.ndim and b.ndim:
        both(lambda m: m.outer, a, b)
    if a.shape[-1:] == b.shape[-1:]:
        both(lambda m: m.inner, a, b)


@pytest.mark.parametrize("spec, shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij->ji", [(2, 3)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]),
    ("ij,ij->", [(2, 3), (2, 3)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]), ("i,i", [(3,), (3,)]), ("ij", [(2, 3)]),
    ("ij,jk", [(2, 3), (3, 4)]), ("iij->j", [(3, 3, 2)]), ("ijk->kij", [(2, 3, 4)]),
    ("i,j->ij", [(2,), (3,)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("bi,bi->b", [(4, 3), (4, 3)]), ("ij,j->", [(2, 3), (3,)]), ("...i,...i->...", [(2, 3), (3,)]),
    ("ab,cd->", [(2, 3), (4, 5)]), ("iji->j", [(3, 2, 3)]), ("i...->...", [(2, 3, 4)]),
])
def test_einsum(spec, shapes):
    ops = [rng.normal(size=s) for s in shapes]
    both(lambda m: lambda *xs: m.einsum(spec, *xs), *ops)


def test_trace_and_vdot():
    both(lambda m: m.trace, M43[:3])
    z = np.array([1 + 1j, 2 - 1j])
    same(run(lambda a, b: tnp.vdot(a, b), z, z * 2), np.vdot(z, z * 2))


# --- concrete inputs and NumPy interop --------------------------------------------------------------


def test_plain_numpy_inputs_give_numpy_results():
    assert isinstance(tnp.exp(V3), np.ndarray)
    same(tnp.sum(tnp.sin(X), axis=1), np.sum(np.sin(X), axis=1))
    same(tnp.einsum("ij,jk->ik", M34, M43), M34 @ M43)
    same(tnp.where(V3 > 0, V3, 0.0), np.where(V3 > 0, V3, 0.0))
    same(tnp.concatenate([V3, V4]), np.concatenate([V3, V4]))
    same(tnp.getitem(X, (0, slice(1, None))), X[0, 1:])


def test_numpy_ufuncs_on_tracers_record_tidu_ops():
    same(run(lambda x: np.exp(x) + np.add(x, 1.0) * np.sin(x), V3), np.exp(V3) + (V3 + 1) * np.sin(V3))
    same(run(lambda x: V3 + x, V3), 2 * V3)  # ndarray on the left defers to the tracer


def test_constants_from_arrays_and_scalars():
    c = rng.normal(size=(3, 4))
    same(run(lambda x: x * c + np.float64(2.0) - 1, M34), M34 * c + 1)
    same(run(lambda x: x * np.pi, V3), V3 * np.pi)


# --- inspection ------------------------------------------------------------------------------------


def test_make_graph_listing_counts_and_formats():
    def f(x):
        return tnp.sum(tnp.exp(2.0 * x) * 1.0)

    g = tidu.make_graph(tidu.grad(f))(V3)
    text = str(g)
    assert text.startswith("# grad(f):") and "ops before simplification" in text
    assert "{ inputs %0:f64[3] = x" in text and "return" in text
    assert g.ops_before == g.stats["ops_before"] and g.ops_after == g.stats["ops_after"]
    assert g.ops_after <= g.ops_before
    assert g.to_dot().startswith("digraph") and g.to_html().startswith("<pre>")

    class Printer:
        def __init__(self):
            self.out = []

        def text(self, s):
            self.out.append(s)

    p = Printer()
    g._repr_pretty_(p, False)
    assert p.out == [text]
    same(g.program.eval([V3])[0], 2 * np.exp(2 * V3))


def test_make_graph_of_plain_function_and_pytrees():
    g = tidu.make_graph(lambda p: p["a"] * p["b"][0])({"a": V3, "b": (V3, 1.0)})
    assert "mul" in str(g)


def test_stablehlo_and_numpy_source_text():
    f = tidu.grad(lambda x: tnp.sum(tnp.sin(x) ** 2))
    text = tidu.to_stablehlo(f, V3)
    assert "func.func public @main" in text and "stablehlo.sine" in text
    assert text == tidu.to_stablehlo(f, V3)
    src = tidu.to_numpy_source(f, V3)
    assert "def " in src and "np.sin" in src


def test_input_names_follow_parameters_and_paths():
    g = tidu.make_graph(lambda weights, batch: tnp.sum(weights["w"] * batch[1]))(
        {"w": V3}, (V3, V3))
    text = str(g)
    assert "weights['w']" in text and "batch[1]" in text


def test_argument_names_are_what_inspect_reads():
    """Plain functions' names come off their code object (no inspect.signature per build):
    the same names as the signature gives, for every kind of parameter; wrapped
    functions, bound methods and partials go through the signature."""
    def f1(x, y): ...

    def f2(x, /, y, *rest, k=1, **kw): ...

    def f3(*args): ...

    def f4(a, b=2, *, c): ...

    def f5(**kw): ...

    def f6(x, *xs):
        z = w = 1  # locals after the parameters
        return z + w

    @functools.wraps(f1)
    def wrapped(*a): ...

    class C:
        def m(self, x, y): ...

    def by_signature(fn, n):
        params = inspect.signature(fn).parameters.values()
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        positional = [p.name for p in params if p.kind in kinds]
        var = next((p.name for p in params if p.kind is inspect.Parameter.VAR_POSITIONAL), None)
        return [positional[i] if i < len(positional) else f"{var}[{i - len(positional)}]" if var else f"arg{i}"
                for i in range(n)]

    for fn in (f1, f2, f3, f4, f5, f6, wrapped, lambda x, *r: x, C().m, functools.partial(f1, 1)):
        for n in range(4):
            assert arg_names(fn, n) == by_signature(fn, n), (fn, n)
    assert arg_names(f2, 4) == ["x", "y", "rest[0]", "rest[1]"]
    assert arg_names(min, 2) == ["arg0", "arg1"]  # no signature


# --- errors ----------------------------------------------------------------------------------------


def test_grad_of_non_scalar_says_what_to_do():
    with pytest.raises(TypeError, match=r"scalar \(shape \(\)\), got \(3,\).*jacrev"):
        tidu.grad(lambda x: x * 2)(V3)


def test_grad_of_complex_output():
    with pytest.raises(TypeError, match="real floating-point output"):
        tidu.grad(lambda z: z * z)(1j)


def test_broadcast_error_names_both_shapes():
    with pytest.raises(ValueError, match=r"tnp.add: operands could not be broadcast together "
                                         r"with shapes \(3,\) \(4,\)"):
        run(lambda x, y: x + y, V3, V4)
    with pytest.raises(ValueError, match=r"\(3,\) and \(4,\) are not aligned"):
        run(lambda x, y: tnp.dot(x, y), V3, V4)
    with pytest.raises(ValueError, match="einsum"):
        run(lambda x, y: tnp.einsum("ij,jk->ik", x, y), M34, M34)


def test_bad_argnums():
    with pytest.raises(ValueError, match=r"argnums=2 is out of range for a call with 2"):
        tidu.grad(lambda x, y: x * y, argnums=2)(1.0, 2.0)
    with pytest.raises(TypeError, match="argnums must be an int or a non-empty tuple"):
        tidu.grad(lambda x: x, argnums="x")
    with pytest.raises(ValueError, match="repeats"):
        tidu.grad(lambda x, y: x * y, argnums=(0, 0))(1.0, 2.0)


def test_non_array_arguments():
    with pytest.raises(TypeError, match=r"argument x is a str; tidu transforms take NumPy \(or JAX\) arrays"):
        tidu.grad(lambda x: x)("a")
    with pytest.raises(TypeError, match=r"argument p\['k'\] is a NoneType|argument p\['k'\] is a"):
        tidu.grad(lambda p: p["k"])({"k": object()})
    with pytest.raises(TypeError, match="takes a function"):
        tidu.grad(3.0)


def test_integer_argument_to_grad():
    with pytest.raises(TypeError, match=r"dtype is int64.*\(3\.0, not 3\)"):
        tidu.grad(lambda x: x * 2.0)(3)
    with pytest.raises(TypeError, match="jacfwd cannot differentiate"):
        tidu.jacfwd(lambda x: x * 2.0)(np.array([1, 2]))


def test_tracer_of_finished_trace():
    leaked = []

    def f(x):
        leaked.append(x)
        return tnp.sum(x)

    tidu.grad(f)(V3)
    with pytest.raises(TraceError, match="finished trace.*Return it from the function"):
        tnp.sin(leaked[0])
    with pytest.raises(TraceError, match="finished trace"):
        leaked[0] + 1.0
    with pytest.raises(TraceError, match="finished trace"):
        tidu.grad(lambda x: tnp.sum(x))(leaked[0])


def test_python_control_flow_on_tracers():
    with pytest.raises(TraceError, match="bool.*tnp.where"):
        tidu.grad(lambda x: x if x > 0 else -x)(1.0)
    with pytest.raises(TraceError, match="NumPy array"):
        run(lambda x: np.asarray(x), V3)
    with pytest.raises(TraceError, match="float"):
        run(lambda x: float(x[0]), V3)


def test_unsupported_indexing():
    with pytest.raises(TypeError, match="a traced index must be integers"):
        run(lambda x: x[x > 0], V3)
    with pytest.raises(IndexError, match="out of bounds"):
        run(lambda x: x[np.array([0, 7])], V3)
    with pytest.raises(IndexError, match="out of bounds"):
        run(lambda x: x[5], V3)
    with pytest.raises(IndexError, match="too many indices"):
        run(lambda x: x[0, 0], V3)


def test_transform_argument_errors():
    with pytest.raises(ValueError, match="mode must be one of FoF, FoR, RoF, RoR"):
        tidu.hessian(lambda x: x, mode="FF")
    with pytest.raises(ValueError, match=r"tangent 0 has shape \(4,\), its primal has \(3,\)"):
        tidu.jvp(lambda x: x, (V3,), (V4,))
    with pytest.raises(TypeError, match="primals must be a tuple or list"):
        tidu.jvp(lambda x: x, V3, V3)
    _, pb = tidu.vjp(lambda x: (x, x), V3)
    with pytest.raises(ValueError, match="cotangent structure"):
        pb(V3)
    with pytest.raises(ValueError, match="cotangent 1 has shape"):
        pb((V3, V4))
    with pytest.raises(TypeError, match=r"has_aux=True\): <lambda> must return a pair"):
        tidu.grad(lambda x: x, has_aux=True)(1.0)
    with pytest.raises(TypeError, match="only float and complex outputs"):
        tidu.jacrev(lambda x: x > 0)(V3)


def test_complex_only_ops_raise_clearly():
    # fmax and maximum order complex values as NumPy does (real part, then imaginary)
    np.testing.assert_array_equal(run(lambda z: tnp.fmax(z, 1j), np.array([1j, 2j, -1 + 5j])), [1j, 2j, 1j])
    np.testing.assert_array_equal(run(lambda z: tnp.maximum(z, 1j), np.array([1j, 2j, -1 + 5j])), [1j, 2j, 1j])
    # An explicit cast keeps the real part with NumPy's warning; implicit promotion never narrows.
    with pytest.warns(np.exceptions.ComplexWarning, match="discards the imaginary part"):
        np.testing.assert_array_equal(run(lambda z: tnp.astype(z, np.float64), np.array([2 + 1j])), [2.0])


def test_keyword_arguments_pass_through_and_do_not_count_for_argnums():
    assert tidu.grad(lambda x, *, s: s * x * x)(3.0, s=2.0) == 12.0
    with pytest.raises(ValueError, match="argnums=0 is out of range for a call with 0 positional"):
        tidu.grad(lambda x: x)(x=1.0)


def test_numpy_functions_dispatching_to_tracer_methods():
    for f in (lambda x: np.sum(x), lambda x: np.mean(x, axis=1), lambda x: np.max(x, axis=0),
              lambda x: np.reshape(x, (4, 6)), lambda x: np.transpose(x), lambda x: x.flatten(),
              lambda x: x.conjugate(), lambda x: np.prod(x, axis=(0, 2), keepdims=True),
              lambda x: x.sum(dtype=np.float32)):
        same(run(f, X), f(X), rtol=1e-6)
    same(run(lambda x: np.dot(x, x), V3), np.dot(V3, V3))  # __array_function__
    with pytest.raises(TypeError, match="numpy.packbits has no tidu.numpy counterpart"):
        run(lambda x: np.packbits(x > 0), V3)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("scalar", [0.5, 3, -2.25])
def test_python_number_with_a_scalar_tracer_like_jax(dtype, scalar):
    # 0-d tracers take a short path for Python numbers; the dtype (weak typing) and the
    # values must be what JAX gives, in both operand orders
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    x = np.array(0.75 - (0.5j if "complex" in dtype else 0), dtype)
    for f in (lambda v: scalar * v, lambda v: v * scalar, lambda v: v - scalar, lambda v: scalar - v,
              lambda v: scalar / v, lambda v: v + scalar):
        got = tidu.jit(f)(x)
        want = f(jnp.asarray(x))
        assert got.dtype == want.dtype == np.dtype(dtype)
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-6)
    # a weak 0-d tracer (a Python argument) stays weak: float64 against a float32 array
    assert tidu.jit(lambda v, a: 2.0 * v * a)(1.5, np.ones(2, np.float32)).dtype == np.float32


# --- numpy_fallback: the switch between NumPy and tracing ---------------------------------


def _fallback_functions():
    for space, names in ((tnp, tnp.__all__), (tnp.linalg, tnp.linalg.__all__)):
        for name in names:
            fn = getattr(space, name)
            if getattr(fn, "numpy", None) is not None:
                yield f"{space.__name__}.{name}", fn


def test_every_numpy_counterpart_takes_the_call_numpy_fallback_makes():
    """numpy_fallback calls the NumPy counterpart with the required parameters positionally
    and the others by keyword: where NumPy's signature is known, it accepts them."""
    import inspect
    import operator

    checked = 0
    for name, fn in _fallback_functions():
        counterpart = fn.numpy
        if isinstance(counterpart, str):
            counterpart = operator.attrgetter(counterpart)(np)
        try:
            theirs = inspect.signature(counterpart)
        except (TypeError, ValueError):  # a ufunc or builtin without a signature
            continue
        ours = inspect.signature(fn).parameters.values()
        args = [p.name for p in ours if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                and p.default is p.empty]
        kwargs = {p.name: None for p in ours if p.default is not p.empty}
        try:
            theirs.bind(*args, **kwargs)
        except TypeError as e:
            raise AssertionError(f"{name}: NumPy's {counterpart} does not take {args} {sorted(kwargs)}: {e}") from None
        checked += 1
    assert checked > 100


def test_operands_by_keyword_eagerly_and_traced():
    c, a, b = V3 > 0, V3, 2 * V3
    same(tnp.where(condition=c, x=a, y=b), np.where(c, a, b))
    same(tnp.sum(x=X, axis=1), np.sum(X, axis=1))
    same(tnp.multiply(y=V3, x=2.0), 2.0 * V3)
    grad = tidu.grad(lambda v: tnp.sum(x=tnp.multiply(x=v, y=v)))(V3)
    same(grad, 2 * V3)


def test_a_dead_tracer_is_refused_before_numpy_fallback_chooses():
    kept = []
    tidu.jit(lambda v: kept.append(v) or v)(V3)
    with pytest.raises(TraceError, match="finished trace"):
        tnp.floor(kept[0])
    with pytest.raises(TraceError, match="finished trace"):
        tnp.hypot(kept[0], 1.0)


def test_jit_static_arguments_choose_the_program() -> None:
    """static_argnums/static_argnames: Python values passed as they are, one program per
    distinct value; unhashable ones and bad specifications get one-line errors."""
    traced = []

    def f(x, times, scale=1.0, *, mode="sin"):
        traced.append((times, mode))
        for _ in range(times):
            x = tnp.sin(x) if mode == "sin" else tnp.cos(x)
        return x * scale

    jf = tidu.jit(f, static_argnums=1, static_argnames="mode")
    x = np.arange(3.0)
    np.testing.assert_allclose(jf(x, 2), np.sin(np.sin(x)))
    np.testing.assert_allclose(jf(x, 2), np.sin(np.sin(x)))
    np.testing.assert_allclose(jf(x, 1, mode="cos"), np.cos(x))
    np.testing.assert_allclose(jf(x, -1 + 2, 2.0, mode="cos"), 2 * np.cos(x))  # scale traced
    assert traced == [(2, "sin"), (1, "cos"), (1, "cos")]  # the second call reused its program
    np.testing.assert_allclose(tidu.grad(lambda v: tnp.sum(jf(v, 1)))(x), np.cos(x))
    with pytest.raises(TypeError, match="static arguments must be hashable"):
        jf(x, np.array([1, 2]))
    with pytest.raises(TypeError, match="static_argnums must be an int or a sequence"):
        tidu.jit(f, static_argnums="times")
    with pytest.raises(TypeError, match="out of range"):
        tidu.jit(f, static_argnums=3)(x, 1)


def test_eval_shape_traces_only_and_matches_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def body(m):
        def f(x, p):
            return {"y": m.tanh(x @ p["w"]), "s": (m.sum(x, axis=0), x.astype(np.float32))}
        return f

    x, p = np.ones((5, 3)), {"w": np.ones((3, 2))}
    got = tidu.eval_shape(body(tnp), x, p)
    want = jax.eval_shape(body(jnp), x, p)
    for g, w in zip(jax.tree_util.tree_leaves(got, is_leaf=lambda v: isinstance(v, tidu.ShapeDtypeStruct)),
                    jax.tree_util.tree_leaves(want), strict=True):
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
    # arguments as shapes, of a size no array could have, through transforms
    big = tidu.ShapeDtypeStruct((10**10,), np.float64)
    assert tidu.eval_shape(tidu.grad(lambda v: tnp.sum(tnp.sin(v))), big).shape == (10**10,)
    assert tidu.eval_shape(tidu.vmap(tnp.outer), jax.ShapeDtypeStruct((4, 3), np.float32),
                           jax.ShapeDtypeStruct((4, 2), np.float32)) == tidu.ShapeDtypeStruct((4, 3, 2), np.float32)
    np.testing.assert_allclose(tidu.jacobian(tnp.sin)(V3), np.diag(np.cos(V3)))
    with pytest.raises(TypeError, match="argument x is a str"):
        tidu.eval_shape(lambda x: x, "abc")
    with pytest.raises(TypeError, match="eval_shape: argument x: unknown dtype 'object'"):
        tidu.eval_shape(lambda x: x, tidu.ShapeDtypeStruct((2,), np.dtype("object")))
