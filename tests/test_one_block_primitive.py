"""A primitive is its rule block (issue 26): one block with a meaning, a JVP, a ``numpy``
and a ``stablehlo`` clause is all an elementwise primitive needs to be differentiated,
batched, lowered to NumPy and to StableHLO that XLA runs, and used from the command line.
The built-in primitives are evaluated and lowered the same way: no per-name tables of
elementwise ops remain in the evaluator or the lowerings."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import tidu
import tidu.numpy as tnp
from tidu.cli import main

RULE = """\
# The arc tangent: a new elementwise primitive, declared by this block alone.
primitive arctangent(x)
    type       elementwise
    dtypes     float
    meaning    atan(x)
    numpy      numpy.arctan
    stablehlo  chlo.atan
    jvp:       dx / (1 + x * x)
"""

arctangent = tidu.op("arctangent")
X = np.array([-1.5, -0.2, 0.3, 2.0])


@pytest.fixture(scope="module")
def rules(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("one_block") / "arctangent.rules"
    path.write_text(RULE)
    return str(path)


def f(x):
    return tnp.sum(arctangent(x) * x)


def grad_f(x: np.ndarray) -> np.ndarray:
    return np.arctan(x) + x / (1 + x * x)


def test_transforms(rules: str) -> None:
    with tidu.use_rules(rules):
        np.testing.assert_allclose(tidu.grad(f)(X), grad_f(X), rtol=1e-14)
        hess = np.asarray(tidu.hessian(f)(X))
        np.testing.assert_allclose(hess, np.diag(2 / (1 + X * X) ** 2), rtol=1e-13, atol=1e-15)
        batched = tidu.vmap(tidu.grad(f))(np.stack([X, 2 * X]))
        np.testing.assert_allclose(batched, np.stack([grad_f(X), grad_f(2 * X)]), rtol=1e-14)


def test_numpy_lowering(rules: str) -> None:
    with tidu.use_rules(rules):
        src = tidu.to_numpy_source(tidu.grad(f), X)
        view = tidu.make_graph(tidu.value_and_grad(f))(X)
        value, grad = view.program.run([X])
    assert "= arctangent(" in src and "by numpy numpy.arctan" in src
    np.testing.assert_allclose(value, np.sum(np.arctan(X) * X), rtol=1e-15)
    np.testing.assert_allclose(grad, grad_f(X), rtol=1e-14)


def test_stablehlo_runs_in_xla(rules: str) -> None:
    pytest.importorskip("jax")
    pytest.importorskip("jaxlib")
    with tidu.use_rules(rules):
        view = tidu.make_graph(tidu.value_and_grad(f))(X)
        text = view.to_stablehlo()
        got = view.program.run([X], backend="xla")
    assert '"chlo.atan"(' in text
    np.testing.assert_allclose(got[0], np.sum(np.arctan(X) * X), rtol=1e-13)
    np.testing.assert_allclose(got[1], grad_f(X), rtol=1e-13)


def test_cli(rules: str, capsys: pytest.CaptureFixture[str]) -> None:
    # the CLI reads function names from the catalog: arctangent(x) is the rule file's primitive
    assert main(["diff", "arctangent(x) * x", "--wrt", "x", "--rules", rules, "--at", "x=0.5"]) == 0
    out = capsys.readouterr().out
    assert float(out.split("=")[-1]) == pytest.approx(float(grad_f(np.array(0.5))), rel=1e-13)
    assert main(["lower", "arctangent(x)", "--rules", rules, "--to", "stablehlo"]) == 0
    assert '"chlo.atan"(%s0)' in capsys.readouterr().out


ROOT = Path(__file__).resolve().parents[1]
# the per-name tables of elementwise ops the rule blocks replaced
REMOVED = {
    "tidu/ops/reference.py": ["UNARY_UFUNCS", "KERNELS", "IMPLS", "LINALG_KERNELS"],
    "lowering/numpy.py": ["_UNARY", "_BINARY", "_KERNELS", "UNARY_UFUNCS"],
    "lowering/stablehlo.py": ["_UNARY", "_BINARY"],
}


def test_the_name_tables_are_gone() -> None:
    sources = sorted((ROOT / "tidu").rglob("*.py")) + sorted((ROOT / "lowering").rglob("*.py"))
    for name in ("UNARY_UFUNCS", "LINALG_KERNELS"):
        users = [str(p.relative_to(ROOT)) for p in sources if re.search(rf"\b{name}\b", p.read_text())]
        assert users == [], f"{name} is still used in {users}"
    for path, names in REMOVED.items():
        text = (ROOT / path).read_text()
        for name in names:
            assert not re.search(rf"^{re.escape(name)}\b.*=", text, re.M), f"{path} still defines {name}"
    # the lowerings dispatch on what the rule block names (its kernel, its stablehlo op),
    # never on a primitive's name (constants aside: they are values, written by name)
    for path in ("lowering/numpy.py", "lowering/stablehlo.py", "lowering/c_source.py"):
        text = (ROOT / path).read_text()
        assert not re.search(r'_lowers\("|op (==|in) \(?"(?!constant")', text), f"{path} dispatches on names"


def test_builtin_elementwise_primitives_are_declared_by_their_blocks() -> None:
    from tidu.ops.catalog import builtin_catalog

    cat = builtin_catalog()
    for name in ("add", "neg", "exp", "rsqrt", "abs", "sign", "maximum", "rem", "imag"):
        prim = cat[name]
        assert prim.builtin and prim.stablehlo_op is not None and prim.c_function is not None
        assert prim.numpy_fn is not None or prim.numpy_meaning
