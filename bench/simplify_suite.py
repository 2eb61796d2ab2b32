"""The function set of bench/simplify.py: scalar functions of a few variables, written
once against a NumPy-like namespace ``xp`` (``tidu.numpy``, ``jax.numpy`` or ``sympy``)
so that every system differentiates the very same computation.

Each entry is (name, number of variables, function, a point where every derivative is
finite). The kinds: Gaussians, logistic/softplus/log-sum-exp, Rosenbrock 2 and 10, small
MLPs, Lennard-Jones, polynomials (Horner and expanded), rational functions, products of
exponentials, identities that collapse, repeated subexpressions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def gaussian(xp: Any, x: Any) -> Any:
    return xp.exp(-x * x / 2.0)


def gaussian2(xp: Any, x: Any, y: Any) -> Any:
    return xp.exp(-(x * x + y * y) / 2.0)


def gaussian_shifted(xp: Any, x: Any, y: Any) -> Any:
    return 3.0 * xp.exp(-((x - 1.0) ** 2 + 2.0 * (y + 0.5) ** 2))


def logistic(xp: Any, x: Any) -> Any:
    return 1.0 / (1.0 + xp.exp(-x))


def softplus(xp: Any, x: Any) -> Any:
    return xp.log(1.0 + xp.exp(x))


def logsumexp3(xp: Any, x: Any, y: Any, z: Any) -> Any:
    return xp.log(xp.exp(x) + xp.exp(y) + xp.exp(z))


def rosenbrock2(xp: Any, x: Any, y: Any) -> Any:
    return (1.0 - x) ** 2 + 100.0 * (y - x * x) ** 2


def rosenbrock10(xp: Any, *v: Any) -> Any:
    total = 0.0
    for a, b in zip(v[:-1], v[1:], strict=True):
        total = total + 100.0 * (b - a * a) ** 2 + (1.0 - a) ** 2
    return total


_W1 = ((0.5, -0.3), (0.8, 0.2), (-0.6, 0.9))
_B1 = (0.1, -0.2, 0.05)
_W2 = (1.2, -0.7, 0.4)


def mlp_tanh(xp: Any, x: Any, y: Any) -> Any:
    out = 0.0
    for (w0, w1), b, v in zip(_W1, _B1, _W2, strict=True):
        out = out + v * xp.tanh(w0 * x + w1 * y + b)
    return out


def mlp_loss(xp: Any, x: Any, y: Any) -> Any:
    return (mlp_tanh(xp, x, y) - 0.3) ** 2


def mlp_logistic(xp: Any, x: Any, y: Any) -> Any:
    out = 0.0
    for (w0, w1), b, v in zip(_W1, _B1, _W2, strict=True):
        out = out + v / (1.0 + xp.exp(-(w0 * x + w1 * y + b)))
    return out


def lennard_jones(xp: Any, x: Any, y: Any) -> Any:
    r2 = x * x + y * y
    s6 = 1.0 / (r2 * r2 * r2)
    return 4.0 * (s6 * s6 - s6)


def coulomb(xp: Any, x1: Any, y1: Any, x2: Any, y2: Any) -> Any:
    return 1.0 / xp.sqrt((x1 - x2) ** 2 + (y1 - y2) ** 2)


def poly_horner(xp: Any, x: Any) -> Any:
    return (((3.0 * x - 2.0) * x + 5.0) * x - 1.0) * x + 7.0


def poly_expanded(xp: Any, x: Any) -> Any:
    return 3.0 * x**4 - 2.0 * x**3 + 5.0 * x**2 - x + 7.0


def poly2(xp: Any, x: Any, y: Any) -> Any:
    return x**3 * y + 2.0 * x * y**2 - 3.0 * x * y + y**3


def rational(xp: Any, x: Any) -> Any:
    return (x * x + 1.0) / (x * x + 2.0 * x + 3.0)


def rational2(xp: Any, x: Any, y: Any) -> Any:
    return x * y / (x * x + y * y + 1.0)


def michaelis_menten(xp: Any, v: Any, k: Any, s: Any) -> Any:
    return v * s / (k + s)


def exp_product(xp: Any, x: Any, y: Any) -> Any:
    return xp.exp(x) * xp.exp(y) * xp.exp(x * y)


def exp_cancel(xp: Any, x: Any) -> Any:
    return xp.exp(x) * xp.exp(-x) + x


def log_exp(xp: Any, x: Any, y: Any) -> Any:
    return xp.log(xp.exp(x * y)) + x


def pythagoras(xp: Any, x: Any, y: Any) -> Any:
    return (xp.sin(x) ** 2 + xp.cos(x) ** 2) * y + xp.sin(x * y)


def repeated(xp: Any, x: Any, y: Any) -> Any:
    u = x * y
    return xp.sin(u) + xp.cos(u) + u * u + xp.exp(u) * xp.sin(u)


def trig_product(xp: Any, x: Any, y: Any) -> Any:
    return xp.sin(x) * xp.cos(y) + xp.cos(x) * xp.sin(y)


def tanh_prod(xp: Any, x: Any, y: Any) -> Any:
    return xp.tanh(x * y) * x


def norm2(xp: Any, x: Any, y: Any, z: Any) -> Any:
    return xp.sqrt(x * x + y * y + z * z)


def log_norm(xp: Any, x: Any, y: Any) -> Any:
    return xp.log(x * x + y * y)


def cross_entropy(xp: Any, x: Any) -> Any:
    p = 1.0 / (1.0 + xp.exp(-x))
    return -0.3 * xp.log(p) - 0.7 * xp.log(1.0 - p)


def cosh_def(xp: Any, x: Any) -> Any:
    return (xp.exp(x) + xp.exp(-x)) / 2.0


def harmonic3(xp: Any, x: Any, y: Any, z: Any) -> Any:
    return (x - y) ** 2 + (y - z) ** 2 + (z - x) ** 2


def gaussian_mixture(xp: Any, x: Any) -> Any:
    return 0.3 * xp.exp(-((x - 1.0) ** 2)) + 0.7 * xp.exp(-((x + 1.0) ** 2))


def product3(xp: Any, x: Any, y: Any, z: Any) -> Any:
    return x * y * z + x * y + y * z


def sin_exp(xp: Any, x: Any) -> Any:
    return xp.exp(xp.sin(x)) * xp.cos(x)


def like_terms(xp: Any, x: Any, y: Any) -> Any:
    return x * y - y * x + 2.0 * x * 3.0 + (x + y) - y + x + x - 2.0 * x


FUNCTIONS: list[tuple[str, int, Callable[..., Any], tuple[float, ...]]] = [
    ("gaussian", 1, gaussian, (0.3,)),
    ("gaussian2", 2, gaussian2, (0.3, -0.4)),
    ("gaussian_shifted", 2, gaussian_shifted, (0.3, -0.4)),
    ("logistic", 1, logistic, (0.3,)),
    ("softplus", 1, softplus, (0.3,)),
    ("logsumexp3", 3, logsumexp3, (0.3, -0.4, 0.5)),
    ("rosenbrock2", 2, rosenbrock2, (0.3, -0.4)),
    ("rosenbrock10", 10, rosenbrock10, tuple(0.1 * i - 0.3 for i in range(10))),
    ("mlp_tanh", 2, mlp_tanh, (0.3, -0.4)),
    ("mlp_loss", 2, mlp_loss, (0.3, -0.4)),
    ("mlp_logistic", 2, mlp_logistic, (0.3, -0.4)),
    ("lennard_jones", 2, lennard_jones, (1.1, 0.4)),
    ("coulomb", 4, coulomb, (0.3, -0.4, 1.5, 0.8)),
    ("poly_horner", 1, poly_horner, (0.3,)),
    ("poly_expanded", 1, poly_expanded, (0.3,)),
    ("poly2", 2, poly2, (0.3, -0.4)),
    ("rational", 1, rational, (0.3,)),
    ("rational2", 2, rational2, (0.3, -0.4)),
    ("michaelis_menten", 3, michaelis_menten, (2.0, 0.5, 1.5)),
    ("exp_product", 2, exp_product, (0.3, -0.4)),
    ("exp_cancel", 1, exp_cancel, (0.3,)),
    ("log_exp", 2, log_exp, (0.3, -0.4)),
    ("pythagoras", 2, pythagoras, (0.3, -0.4)),
    ("repeated", 2, repeated, (0.3, -0.4)),
    ("trig_product", 2, trig_product, (0.3, -0.4)),
    ("tanh_prod", 2, tanh_prod, (0.3, -0.4)),
    ("norm2", 3, norm2, (0.3, -0.4, 0.5)),
    ("log_norm", 2, log_norm, (0.3, -0.4)),
    ("cross_entropy", 1, cross_entropy, (0.3,)),
    ("cosh_def", 1, cosh_def, (0.3,)),
    ("harmonic3", 3, harmonic3, (0.3, -0.4, 0.5)),
    ("gaussian_mixture", 1, gaussian_mixture, (0.3,)),
    ("product3", 3, product3, (0.3, -0.4, 0.5)),
    ("sin_exp", 1, sin_exp, (0.3,)),
    ("like_terms", 2, like_terms, (0.3, -0.4)),
]
