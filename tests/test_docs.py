"""Every code example in README.md and docs/*.md runs: ```python blocks execute in
order (one namespace per file), and each `tidu ...` line of a ```sh block runs through
the CLI and must succeed."""

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def blocks(path: Path, lang: str) -> list[str]:
    return [body for kind, body in BLOCK.findall(path.read_text()) if kind == lang]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_python_examples_run(path):
    namespace: dict = {"__name__": f"docs_{path.stem}"}
    for i, code in enumerate(blocks(path, "python")):
        exec(compile(code, f"{path.name}[python block {i}]", "exec"), namespace)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_cli_examples_succeed(path, capsys):
    from tidu.cli import main

    for code in blocks(path, "sh"):
        for line in code.splitlines():
            cmd = line.split("&&")[-1].split(" #")[0].strip()
            words = shlex.split(cmd)
            if not words:
                continue
            if words[0].endswith("tidu"):
                assert main(words[1:]) == 0, f"{path.name}: `{cmd}` failed:\n{capsys.readouterr().err}"
