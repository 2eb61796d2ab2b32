"""The rule engine (tidu.ad.instantiate): its per-primitive steps (``jvp_function``,
``transpose_function``) against its per-template functions (``template_function``, what
``instantiate`` runs, as the passes use with ``SPECIALIZED`` off): every AD pass over every
primitive's sample application must give the very same fragments (keys are hash-consed, so
equal structure is the same key object, in the same order), and the same errors."""

import itertools

import numpy as np
import pytest
from adutil import build, op
from primspecs import SPECS

import tidu
from tidu import Aval
from tidu.ad import instantiate as engine
from tidu.ad.transpose import vjp


def _passes(frag, out, wrt):
    """Keys of the fragments of: linearize, linear_transpose, the fused vjp, and a second
    order (linearize of the transposed fragment)."""
    view = tidu.resolve(frag)
    lin = tidu.passes.linearize(view, [out], wrt, pass_id=201)
    tr = tidu.passes.linear_transpose(lin, pass_id=202)
    lin_fused, tr_fused = vjp(view, [out], wrt, lin_pass_id=203, pass_id=204)
    keys = [lin.fragment.keys, tr.fragment.keys, lin_fused.keys, tr_fused.fragment.keys]
    ct = tr.output_keys[0]
    if ct is not None:
        view2 = tidu.resolve([frag, lin.fragment, tr.fragment])
        if any(k.input is not None and str(k.input) == wrt[0] for k in view2.topo_order([ct])):
            keys.append(tidu.passes.linearize(view2, [ct], wrt[:1], pass_id=205).fragment.keys)
    return keys


def _both_engines(frag, out, wrt):
    got = _passes(frag, out, wrt)
    engine.SPECIALIZED = False
    try:
        want = _passes(frag, out, wrt)
    finally:
        engine.SPECIALIZED = True
    return got, want


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.op)
def test_the_steps_build_what_the_template_functions_build(spec):
    for dtype in spec.dtypes:
        avals = {}
        for i, shape in enumerate(spec.shapes):
            dt = "bool" if spec.op == "select" and i == 0 else dtype
            avals[f"x{i}"] = Aval(shape, dt)
        diff = spec.diff if spec.diff is not None else range(len(spec.shapes))
        try:
            frag, out = build(avals, lambda b, *xs: op(b, spec.op, *xs, **spec.attrs))
        except Exception:  # noqa: BLE001 (not a sample this dtype takes)
            continue
        if not np.issubdtype(np.dtype(out.aval.dtype), np.inexact):
            continue
        for r in range(1, len(diff) + 1):
            for wrt in itertools.combinations([f"x{i}" for i in diff], r):
                got, want = _both_engines(frag, out, list(wrt))
                assert got == want, (spec.op, dtype, wrt)


def test_a_chain_of_common_ops():
    f64 = Aval((), "float64")

    def body(b, x, y):
        z = x
        for i in range(24):
            z = [op(b, "sin", z), op(b, "mul", z, x), op(b, "tanh", z), op(b, "div", y, z),
                 op(b, "sub", x, z), op(b, "neg", z), op(b, "cos", z), op(b, "add", z, y)][i % 8]
        return z

    frag, out = build({"x": f64, "y": f64}, body)
    for wrt in (["x"], ["y"], ["x", "y"]):
        got, want = _both_engines(frag, out, wrt)
        assert got == want


BAD = """
# JVP rules that load but fail when instantiated on vectors.
primitive bad_mul(x, y)
    type       elementwise
    dtypes     inexact
    meaning    x * y
    jvp x:     dx * reduce_sum(y)[axes=(0,)]
    jvp y:     x * dy
primitive bad_sin(x)
    type       elementwise
    dtypes     inexact
    meaning    sin(x)
    jvp:       reduce_sum(cos(x))[axes=(0,)]
primitive lone_neg(x)
    type       elementwise
    dtypes     inexact
    meaning    -x
    jvp:       lone_neg(dx)
"""


@pytest.mark.parametrize("prim,wrt", [("bad_mul", ["x"]), ("bad_mul", ["y", "x"]), ("bad_sin", ["x"])])
def test_the_steps_fail_as_the_template_functions_do(prim, wrt):
    from tidu.ops.catalog import builtin_rule_files, load_catalog, use_catalog

    v3 = Aval((3,), "float64")
    cat = load_catalog(builtin_rule_files() + [("bad.rules", BAD)])
    with use_catalog(cat):
        args = (lambda b, x, y: (x,)) if prim == "bad_sin" else (lambda b, x, y: (x, y))
        frag, out = build({"x": v3, "y": v3}, lambda b, x, y: op(b, prim, *args(b, x, y)))
        messages = []
        for enabled in (True, False):
            engine.SPECIALIZED = enabled
            try:
                with pytest.raises(tidu.ADRuleError) as err:
                    tidu.passes.linearize(tidu.resolve(frag), [out], wrt, pass_id=301)
                with pytest.raises(tidu.ADRuleError) as err_vjp:
                    vjp(tidu.resolve(frag), [out], wrt, lin_pass_id=302, pass_id=303)
            finally:
                engine.SPECIALIZED = True
            messages.append((str(err.value), str(err_vjp.value)))
        assert messages[0] == messages[1]
        assert prim in messages[0][0]


def test_a_missing_transpose_rule_is_named_by_both_paths():
    from tidu.ops.catalog import builtin_rule_files, load_catalog, use_catalog

    cat = load_catalog(builtin_rule_files() + [("bad.rules", BAD)])
    with use_catalog(cat):
        frag, out = build({"x": Aval((3,), "float64")}, lambda b, x: op(b, "mul", op(b, "lone_neg", x), x))
        lin = tidu.passes.linearize(tidu.resolve(frag), [out], ["x"], pass_id=401)
        messages = []
        for enabled in (True, False):
            engine.SPECIALIZED = enabled
            try:
                with pytest.raises(tidu.ADRuleError) as err:
                    tidu.passes.linear_transpose(lin, pass_id=402)
            finally:
                engine.SPECIALIZED = True
            messages.append(str(err.value))
        assert messages[0] == messages[1]
        assert "lone_neg: transpose x: no transpose rule for operand 'x'" in messages[0]


def test_every_rule_of_the_catalog_is_generated_code():
    """One engine: every template of the built-in catalog (JVP and transpose rules, and
    rewrites' right-hand sides, which apply to symbolic zeros) becomes generated code, as
    a template function and inside each per-primitive step, for every builder kind."""
    from tidu.ad.instantiate import jvp_function, template_function, transpose_function
    from tidu.ops.catalog import catalog

    cat = catalog()
    for prim in cat.values():
        rules = [*prim.jvp.values(), *(r for rs in prim.jvp_when.values() for r in rs), *prim.transpose.values()]
        for t in [r.template for r in rules if r.template is not None] + [rw.rhs for rw in prim.rewrites]:
            assert callable(template_function(t, cat))
        if prim.variadic:
            continue
        if not prim.jvp_when:
            for kind in ("fragment", "tape", "other"):
                assert "def jvp(key):" in jvp_function(cat, prim, kind).__source__
        for j in range(len(prim.operands)):
            mask = tuple(i == j for i in range(len(prim.operands)))
            for keyed in (None, "fragment", "other"):
                assert "def transpose(" in transpose_function(cat, prim, mask, keyed).__source__
