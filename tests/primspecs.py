"""One sample application per primitive, for rule tests: operand shapes, attributes,
dtypes to try, and the input domain where the primitive is smooth."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Spec:
    op: str
    shapes: list[tuple[int, ...]]
    attrs: dict = field(default_factory=dict)
    dtypes: tuple[str, ...] = ("float64", "complex128")
    # any | positive | unit (0, 1) | above_one | order (the first operand an integer in 1..4,
    # the others positive) | away_from_ties | well_conditioned | start (the last operand an
    # integer start, in and out of range)
    domain: str = "any"
    diff: tuple[int, ...] | None = None  # operands that may be differentiated (default: all)


SPECS = [
    Spec("add", [(3,), (3,)]),
    Spec("sub", [(3,), (3,)]),
    Spec("neg", [(2, 2)]),
    Spec("mul", [(3,), (3,)]),
    Spec("div", [(3,), (3,)], domain="positive"),
    Spec("pow", [(3,), (3,)], domain="positive"),
    Spec("conj", [(3,)]),
    Spec("real", [(3,)]),
    Spec("imag", [(3,)], dtypes=("complex128",)),
    Spec("complex", [(3,), (3,)], dtypes=("float64",)),
    Spec("abs", [(3,)], domain="positive"),
    Spec("sign", [(3,)], domain="positive"),
    Spec("compare", [(3,), (3,)], {"direction": "LT"}, dtypes=("float64",)),
    Spec("select", [(3,), (3,), (3,)], diff=(1, 2)),
    Spec("maximum", [(4,), (4,)], dtypes=("float64",), domain="away_from_ties"),
    Spec("minimum", [(4,), (4,)], dtypes=("float64",), domain="away_from_ties"),
    Spec("exp", [(3,)]),
    Spec("log", [(3,)], domain="positive"),
    Spec("expm1", [(3,)]),
    Spec("log1p", [(3,)], domain="positive"),
    Spec("sin", [(3,)]),
    Spec("tan", [(3,)]),
    Spec("asin", [(3,)], dtypes=("float64",), domain="unit"),
    Spec("acos", [(3,)], dtypes=("float64",), domain="unit"),
    Spec("atan", [(3,)], dtypes=("float64",)),
    Spec("asinh", [(3,)], dtypes=("float64",)),
    Spec("acosh", [(3,)], dtypes=("float64",), domain="above_one"),
    Spec("atanh", [(3,)], dtypes=("float64",), domain="unit"),
    Spec("logistic", [(3,)], dtypes=("float64",)),
    Spec("one_minus_square", [(3,)], dtypes=("float64",)),
    Spec("cbrt", [(3,)], dtypes=("float64",), domain="positive"),
    Spec("atan2", [(3,), (3,)], dtypes=("float64",), domain="positive"),
    Spec("cos", [(3,)]),
    Spec("sinh", [(3,)]),
    Spec("cosh", [(3,)]),
    Spec("tanh", [(3,)]),
    Spec("sqrt", [(3,)], domain="positive"),
    Spec("rsqrt", [(3,)], domain="positive"),
    Spec("erf", [(3,)], dtypes=("float64",)),
    Spec("erfc", [(3,)], dtypes=("float64",)),
    Spec("erfinv", [(3,)], dtypes=("float64",), domain="unit"),
    Spec("ndtri", [(3,)], dtypes=("float64",), domain="unit"),
    Spec("lgamma", [(3,)], dtypes=("float64",), domain="positive"),
    Spec("digamma", [(3,)], dtypes=("float64",), domain="positive"),
    Spec("zeta", [(3,), (3,)], dtypes=("float64",), domain="above_one"),
    Spec("betainc_d", [(3,), (3,), (3,)], {"order_a": 1, "order_b": 1}, dtypes=("float64",), domain="unit"),
    Spec("beta_density_d", [(3,), (3,), (3,)], {"order_a": 1, "order_b": 0, "order_x": 1}, dtypes=("float64",),
         domain="unit"),
    Spec("zeta_d", [(3,), (3,)], {"order_s": 2, "order_q": 1}, dtypes=("float64",), domain="above_one"),
    Spec("i0", [(3,)], dtypes=("float64",)),
    Spec("i0e", [(3,)], dtypes=("float64",)),
    Spec("i1e", [(3,)], dtypes=("float64",)),
    Spec("erfcx", [(3,)], dtypes=("float64",)),
    Spec("exp1", [(3,)], dtypes=("float64",), domain="positive"),
    Spec("expi", [(3,)], dtypes=("float64",), domain="positive"),
    Spec("sine_integral", [(3,)], dtypes=("float64",)),
    Spec("cosine_integral", [(3,)], dtypes=("float64",), domain="positive"),
    Spec("gammainc", [(3,), (3,)], dtypes=("float64",), domain="positive"),
    Spec("gammaincc", [(3,), (3,)], dtypes=("float64",), domain="positive"),
    Spec("gammainc_da", [(3,), (3,)], {"order": 2}, dtypes=("float64",), domain="positive"),
    Spec("gamma_density_d", [(3,), (3,)], {"order_a": 1, "order_x": 1}, dtypes=("float64",), domain="positive"),
    Spec("betainc", [(3,), (3,), (3,)], dtypes=("float64",), domain="unit", diff=(2,)),
    Spec("expn", [(3,), (3,)], dtypes=("float64",), domain="order", diff=(1,)),
    Spec("spence", [(3,)], dtypes=("float64",), domain="positive"),
    Spec("fresnel_s", [(3,)], dtypes=("float64",)),
    Spec("fresnel_c", [(3,)], dtypes=("float64",)),
    Spec("hyp1f1", [(3,), (3,), (3,)], dtypes=("float64",), domain="positive"),
    Spec("hyp1f1_d", [(3,), (3,), (3,)], {"order_a": 1, "order_b": 1, "order_x": 1}, dtypes=("float64",),
         domain="positive"),
    Spec("hyp2f1", [(3,), (3,), (3,), (3,)], dtypes=("float64",), domain="unit"),
    Spec("hyp2f1_d", [(3,), (3,), (3,), (3,)], {"order_a": 1, "order_b": 1, "order_c": 1, "order_x": 1},
         dtypes=("float64",), domain="unit"),
    Spec("floor", [(3,)], dtypes=("float64",)),
    Spec("ceil", [(3,)], dtypes=("float64",)),
    Spec("rint", [(3,)], dtypes=("float64",)),
    Spec("rem", [(3,), (3,)], dtypes=("float64",), domain="positive"),
    Spec("convert", [(3,)], {"dtype": "complex128"}, dtypes=("float64",)),
    # bitwise operations (rules/bitwise.rules): integers, no tangent
    Spec("bitwise_and", [(3,), (3,)], dtypes=("uint32", "int8")),
    Spec("bitwise_or", [(3,), (3,)], dtypes=("uint32", "int8")),
    Spec("bitwise_xor", [(3,), (3,)], dtypes=("uint32", "int8")),
    Spec("bitwise_not", [(3,)], dtypes=("uint32", "int8")),
    Spec("shift_left", [(3,), (3,)], dtypes=("uint32", "int8")),
    Spec("shift_right_logical", [(3,), (3,)], dtypes=("uint32", "int8")),
    Spec("shift_right_arithmetic", [(3,), (3,)], dtypes=("uint32", "int8")),
    Spec("bitcast_convert", [(3,)], {"dtype": "uint64"}, dtypes=("float64",)),
    Spec("bitcast_convert", [(3,)], {"dtype": "float32"}, dtypes=("int32",), diff=()),  # an int: no tangent
    Spec("broadcast_in_dim", [(3, 1)], {"shape": (2, 3, 4), "dims": (1, 2)}),
    Spec("reshape", [(2, 3)], {"shape": (3, 2)}),
    Spec("transpose", [(2, 3, 4)], {"perm": (2, 0, 1)}),
    Spec("reverse", [(2, 3, 4)], {"dims": (0, 2)}),
    Spec("reduce_sum", [(2, 3, 4)], {"axes": (0, 2)}),
    Spec("reduce_max", [(3, 4)], {"axes": (1,)}, dtypes=("float64",), domain="away_from_ties"),
    Spec("reduce_prod", [(3, 4)], {"axes": (0,)}, domain="positive"),
    Spec("dot_general", [(2, 3, 4), (2, 4, 5)],
         {"lhs_contract": (2,), "rhs_contract": (1,), "lhs_batch": (0,), "rhs_batch": (0,)}),
    Spec("dot_general", [(3, 4), (5, 3)],
         {"lhs_contract": (0,), "rhs_contract": (1,), "lhs_batch": (), "rhs_batch": ()}),
    Spec("dot_general", [(4, 2, 3), (3, 4)],
         {"lhs_contract": (2, 0), "rhs_contract": (0, 1), "lhs_batch": (), "rhs_batch": ()}),
    Spec("slice", [(5, 6)], {"start": (1, 0), "limit": (5, 5), "strides": (2, 2)}),
    Spec("pad", [(2, 3), ()], {"low": (1, 0), "high": (0, 2), "interior": (1, 0)}),
    Spec("dynamic_slice", [(5, 3), ()], {"axis": 0, "size": 2}, domain="start", diff=(0,)),
    Spec("dynamic_update_slice", [(2, 5), (2, 2), ()], {"axis": 1}, domain="start", diff=(0, 1)),
    Spec("concatenate", [(2, 3), (1, 3), (4, 3)], {"axis": 0}),
    # linear algebra (rules/linalg.rules)
    Spec("triangle", [(2, 3, 3)], {"lower": True, "strict": False}),
    Spec("triangle", [(3, 4)], {"lower": False, "strict": True}),
    Spec("cholesky", [(2, 3, 3)], domain="well_conditioned"),
    Spec("triangular_solve", [(3, 3), (3, 2)], {"lower": True, "unit_diagonal": False}, domain="well_conditioned"),
    Spec("triangular_solve", [(2, 3, 3), (2, 3, 2)], {"lower": False, "unit_diagonal": True},
         domain="well_conditioned"),
    Spec("solve", [(2, 3, 3), (2, 3, 2)], domain="well_conditioned"),
    Spec("logabsdet", [(2, 3, 3)], domain="well_conditioned"),
    Spec("detsign", [(3, 3)], domain="well_conditioned"),
    Spec("eigvalsh", [(2, 3, 3)], domain="well_conditioned"),
    Spec("eigh_vectors", [(2, 3, 3)], domain="well_conditioned"),
    Spec("qr_q", [(2, 4, 3)], domain="well_conditioned"),
    Spec("qr_r", [(3, 3)], domain="well_conditioned"),
    Spec("svdvals", [(2, 4, 3)], domain="well_conditioned"),
    Spec("svd_u", [(2, 3, 4)], domain="well_conditioned"),
    Spec("svd_vh", [(4, 3)], domain="well_conditioned"),
    Spec("pinv", [(2, 4, 3)], {"rtol": 1e-10}, domain="well_conditioned"),
    Spec("expm", [(2, 3, 3)]),
    Spec("expm_frechet", [(3, 3), (3, 3)]),
    Spec("lu", [(2, 3, 3)], domain="well_conditioned"),
    Spec("lu", [(2, 4, 3)], domain="well_conditioned"),
    Spec("lu_pivots", [(3, 3)], domain="well_conditioned"),
    Spec("permutation_matrix", [(2, 4)], dtypes=("int32",)),
    Spec("eigvals", [(2, 3, 3)], domain="well_conditioned"),
    Spec("eig_vectors", [(3, 3)], domain="well_conditioned"),
    # discrete Fourier transforms (rules/fft.rules)
    Spec("fft", [(2, 4)], {"fft_lengths": (4,), "norm": "backward"}, dtypes=("complex128",)),
    Spec("ifft", [(3, 2, 3)], {"fft_lengths": (2, 3), "norm": "ortho"}, dtypes=("complex128",)),
    Spec("rfft", [(2, 5)], {"fft_lengths": (5,), "norm": "forward"}, dtypes=("float64",)),
    Spec("irfft", [(2, 3)], {"fft_lengths": (4,), "norm": "backward"}, dtypes=("complex128",)),
    # convolution (rules/conv.rules)
    Spec("conv", [(2, 4, 5), (6, 2, 3)], {"window_strides": (2,), "padding": ((1, 0),), "lhs_dilation": (1,),
                                          "rhs_dilation": (2,), "feature_group_count": 2, "batch_group_count": 1}),
]


def sample(spec: Spec, dtype: str, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for i, shape in enumerate(spec.shapes):
        dt = dtype
        if spec.op == "select" and i == 0:
            out.append(rng.random(shape) < 0.5)
            continue
        if spec.domain == "start" and i == len(spec.shapes) - 1:  # in range or out (clamped)
            out.append(np.asarray(rng.integers(-2, 7), dtype=np.int64))
            continue
        if np.dtype(dt).kind in "iu":
            out.append(rng.integers(0, 9, shape).astype(dt))
            continue
        bounds = {"positive": (0.5, 2.0), "unit": (0.05, 0.95), "above_one": (1.5, 3.0)}.get(spec.domain)
        re = rng.normal(size=shape) if bounds is None else rng.uniform(*bounds, shape)
        if spec.domain == "order":
            re = rng.integers(1, 5, shape).astype(float) if i == 0 else rng.uniform(0.5, 2.0, shape)
        if spec.domain == "away_from_ties":
            re = re + 0.1 * i + np.arange(re.size).reshape(shape) * 0.37
        if spec.domain == "well_conditioned" and i == 0:  # positive definite, distinct eigenvalues
            m, n = shape[-2:]
            re = re + np.eye(m, n) * (4.0 * n + 3.0 * np.arange(n))
        if dt.startswith("complex"):
            im = rng.uniform(-0.3, 0.3, shape) if spec.domain == "positive" else rng.normal(size=shape)
            out.append((re + 1j * im).astype(dt))
        else:
            out.append(np.asarray(re, dtype=dt))
    return out
