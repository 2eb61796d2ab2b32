"""Packaging and CLI conventions: --version, python -m tidu, py.typed, and a docstring on
every public name of the public modules."""

import importlib
import importlib.resources
import inspect
import subprocess
import sys

import pytest

import tidu
from tidu.cli import main

PUBLIC_MODULES = [
    "tidu", "tidu.numpy", "tidu.sympy", "tidu.transforms.display", "tidu.checkrules", "tidu.transforms.interop",
]


def public_names(module):
    names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    for name in names:
        obj = getattr(module, name)
        if inspect.ismodule(obj) or not (callable(obj) or inspect.isclass(obj)):
            continue
        if type(obj).__module__ in ("typing", "types", "collections.abc"):  # type aliases
            continue
        yield name, obj


@pytest.mark.parametrize("modname", PUBLIC_MODULES)
def test_every_public_name_has_a_docstring(modname):
    module = importlib.import_module(modname)
    missing = [name for name, obj in public_names(module) if not (inspect.getdoc(obj) or "").strip()]
    assert not missing, f"{modname}: no docstring on {', '.join(missing)}"


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"tidu {tidu.__version__}"
    from importlib.metadata import version

    assert version("tidu") == tidu.__version__


def test_python_dash_m_tidu_is_the_cli():
    out = subprocess.run([sys.executable, "-m", "tidu", "diff", "x**3", "--wrt", "x"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "3*x**2" in out.stdout


@pytest.mark.slow  # a second process (about 1.7 s): tests/test_cli.py checks the error line in-process
def test_python_dash_m_tidu_reports_bad_input_as_the_cli():
    bad = subprocess.run([sys.executable, "-m", "tidu", "diff", "x**", "--wrt", "x"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("tidu: error:")


def test_package_is_typed():
    assert importlib.resources.files("tidu").joinpath("py.typed").is_file()
