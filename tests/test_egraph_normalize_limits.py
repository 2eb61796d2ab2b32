"""The real semantics' normal forms keep exact coefficients; written back into the
e-graph they are float64 constants. A normal form whose coefficient float64 cannot hold
(past its range, or under its normal range) or whose exponent it cannot hold exactly is
not used: its class stays as the e-graph had it (tidu/simplify/egraph/normalize.py)."""

from fractions import Fraction

import numpy as np
import pytest

import tidu
from tidu.simplify.egraph.normalize import QC, _fits, _writable


def graph(f, *args):
    return tidu.make_graph(f, semantics="real")(*args).graph


def values(g, *args):
    return [np.asarray(v).item() for v in tidu.compile(g).eval(list(args))]


@pytest.mark.parametrize(("f", "x"), [
    # 2e400*x: was an OverflowError writing the coefficient
    (lambda x: (x * 1e200 + x * 1e200) * 1e200, 1e-300),
    (lambda x: (x * 1e200 + x * 1e200) * 1e200, 1.0),
    # 2e-400*x: was written as 0.0*x, so the value was 0
    (lambda x: (x * 1e-200 + x * 1e-200) * 1e-200, 1e300),
    (lambda x: (x * 1e-200 + x * 1e-200) * 1e-200, 1.0),
])
def test_a_coefficient_float64_cannot_hold_is_not_written(f, x):
    with np.errstate(over="ignore", under="ignore"):
        want = float(f(np.float64(x)))  # NumPy, as the expression is written
    assert values(graph(f, x), x) == [want]


def test_ordinary_coefficients_are_still_collected():
    g = graph(lambda x: (x * 3.0 + x * 5.0) * 0.25, 0.7)
    assert g.op_count == 1 and values(g, 0.7) == [pytest.approx(2.0 * 0.7, rel=1e-15)]
    g = graph(lambda x: (x * 1e150 + x * 1e150) * 1e150, 0.7)  # 2e300: in range
    assert g.op_count == 1 and values(g, 0.7) == [pytest.approx(2e300 * 0.7, rel=1e-15)]


def test_fits_and_writable():
    assert _fits(0) and _fits(2**53) and _fits(Fraction(1, 3)) and _fits(2**1000)
    assert not _fits(2 * 10**308) and not _fits(-(2**1024)) and not _fits(Fraction(1, 10**400))
    assert _fits(Fraction(1, 2**1074))  # the least subnormal is exact
    assert not _fits(Fraction(1, 3 * 10**310))  # a subnormal that keeps a few digits
    assert _fits(QC(Fraction(1), Fraction(-2))) and not _fits(QC(Fraction(1), Fraction(10**400)))
    x = 7  # an atom's class
    assert _writable({((x, 2),): 3}) and _writable({((x, 2**53),): 1})
    assert not _writable({((x, 3**34),): 1})  # odd, rounded to an even float64
    assert not _writable({((x, 1),): 10**400})
