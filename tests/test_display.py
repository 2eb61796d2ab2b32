"""Notebook display: graphs as SVG (with a listing when Graphviz is missing), formulas as
LaTeX, check reports as HTML tables, short reprs; `tidu diff --emit latex`; the example
notebook in docs/ runs and shows what it should."""

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import sympy

import tidu
import tidu.numpy as tnp
from tidu import sympy as tsp
from tidu.cli import main
from tidu.ops.graph_sympy import compact
from tidu.transforms import display

ROOT = Path(__file__).resolve().parent.parent


def view():
    return tidu.make_graph(tidu.grad(lambda x, y: tnp.sin(x * y) + x**2))(1.0, 2.0)


@pytest.mark.skipif(not display.dot_available(), reason="Graphviz's dot program is not installed")
def test_graph_svg_is_an_svg_drawing_of_every_node():
    v = view()
    svg = v._repr_mimebundle_()["image/svg+xml"]
    root = ET.fromstring(svg.split("?>", 1)[-1].split("-->", 1)[-1] if svg.startswith("<?xml") else svg)
    assert root.tag.endswith("svg")
    drawn = [g for g in root.iter() if g.tag.endswith("g") and g.get("class") == "node"]
    assert len(drawn) == len(v.graph.nodes)
    assert "cos" in svg and v.to_svg() == svg
    bundle = v._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "image/svg+xml"} and bundle["text/plain"] == v.listing()


def test_without_dot_the_notebook_shows_the_listing(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    v = view()
    bundle = v._repr_mimebundle_()
    assert "image/svg+xml" not in bundle and "cos" in bundle["text/html"]
    with pytest.raises(display.DisplayError, match="dot program"):
        v.to_svg()


def test_big_graphs_are_listed_not_drawn():
    def chain(x):
        for _ in range(display.MAX_SVG_NODES):
            x = tnp.sin(x)
        return x

    v = tidu.make_graph(chain)(1.0)
    assert "image/svg+xml" not in v._repr_mimebundle_()
    with pytest.raises(display.DisplayError, match="at most"):
        v.formula()


@pytest.mark.parametrize("dot", [True, False])
def test_a_notebook_is_given_one_view_of_a_graph(monkeypatch, dot):
    """What IPython hands a notebook (every _repr_*_ merged): the picture or the listing,
    never both (JupyterLab and nbconvert would show the HTML listing over the picture)."""
    formatter = pytest.importorskip("IPython.core.formatters").DisplayFormatter()
    if dot and not display.dot_available():
        pytest.skip("Graphviz's dot program is not installed")
    if not dot:
        monkeypatch.setattr(shutil, "which", lambda name: None)
    data, _ = formatter.format(view())
    assert set(data) == {"text/plain", "image/svg+xml" if dot else "text/html"}


def test_a_rule_check_report_is_short_and_a_table_in_notebooks():
    from tidu.checkrules import check_rules

    report = check_rules(only=["exp"])
    assert repr(report).startswith("<Report: ") and repr(report).count("\n") == 0 and len(repr(report)) < 120
    page = report._repr_html_()
    assert page.count("<tr>") == 1 + len(report.rows) and "PASS" in page and "exp" in page


def test_formula_latex_is_sympys_latex_of_the_derivative():
    x, y = sympy.symbols("x y", real=True)
    f = view().formula()
    assert sympy.simplify(f.exprs[0] - (2 * x + y * sympy.cos(x * y))) == 0
    assert f._repr_latex_() == f"$${sympy.latex(f.exprs[0])}$$"
    assert view().to_latex() == sympy.latex(f.exprs[0])
    two = tidu.make_graph(tidu.grad(lambda x, y: x * y, argnums=(0, 1)))(1.0, 2.0).formula()
    assert two.to_latex().startswith(r"\begin{aligned}") and r"\mathrm{out}_{1}" in two.to_latex()


def test_reprs_are_short():
    v = view()
    assert repr(v.graph) == "<MaterializedGraph: 5 ops; inputs (x:f64[], y:f64[]) -> outputs (f64[])>"
    assert repr(v.program) == "<Program: 5 instructions; inputs (x:f64[], y:f64[]) -> outputs (f64[])>"


def test_check_report_html_table():
    x, y = sympy.symbols("x y")
    report = tsp.check_hessian(x**2 * y + sympy.sin(x * y), [x, y], [(1.0, 2.0)], ("FoR",))
    page = report._repr_html_()
    assert page.count("<tr>") == 1 + len(report.entries)
    assert "H[x,y]" in page and "PASS" in page and "FAIL</td>" not in page


def test_cli_emit_latex_prints_the_expression_as_latex(capsys):
    assert main(["diff", "x**2*y + sin(x*y)", "--wrt", "x"]) == 0
    printed = capsys.readouterr().out.splitlines()[1].split("= ", 1)[1]
    assert main(["diff", "x**2*y + sin(x*y)", "--wrt", "x", "--emit", "latex"]) == 0
    x, y = sympy.symbols("x y", real=True)
    expr = sympy.sympify(printed, locals={"x": x, "y": y})
    assert capsys.readouterr().out.strip() == sympy.latex(expr)
    assert sympy.simplify(expr - (2 * x * y + y * sympy.cos(x * y))) == 0


nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")


def test_example_notebook_runs_and_shows_pictures_formulas_and_tables():
    nb = nbformat.read(ROOT / "docs" / "example.ipynb", as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT / "docs")}}).execute()
    kinds = [set(o.get("data", {})) for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors[0]["evalue"]
    assert any("text/latex" in k for k in kinds)
    assert any("text/html" in k for k in kinds)
    if display.dot_available():
        assert any("image/svg+xml" in k for k in kinds)


def test_printed_sums_take_the_shorter_of_their_forms():
    """to_sympy(cse=True) writes each sum as the graph computes it or distributed, whichever
    prints shorter: a Horner scheme becomes the polynomial a mathematician writes, a
    power of a sum stays one, and x**(y - 1) is not split."""
    x, y = sympy.symbols("x y", real=True)
    horner = x**2 * (x**2 * (x**2 * (x**2 - 28) + 210) - 420) + 105
    assert compact(horner * sympy.exp(-x**2 / 2)) == sympy.expand(horner) * sympy.exp(-x**2 / 2)
    assert compact((x + 1) ** 5) == (x + 1) ** 5
    assert compact(x**(y - 1) + 2 * x) == x**(y - 1) + 2 * x
    assert compact(x * y + y * (x + sympy.cos(x * y))) == 2 * x * y + y * sympy.cos(x * y)
