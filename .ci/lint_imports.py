"""Check the stage layering with import-linter (the contracts in pyproject.toml).

tidu.lowering and tidu.rules live at the repository's top level (lowering/, rules/) and
are mapped into the package by pyproject's package-dir; import-linter walks the package
folder and would not see them. So the check runs on a copy laid out as installed:
tidu/ with lowering/ and rules/ inside it. Usage: python .ci/lint_imports.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    with tempfile.TemporaryDirectory() as tmp:
        pkg = Path(tmp) / "tidu"
        shutil.copytree(ROOT / "tidu", pkg, ignore=ignore)
        shutil.copytree(ROOT / "lowering", pkg / "lowering", ignore=ignore)
        shutil.copytree(ROOT / "rules", pkg / "rules", ignore=ignore)
        exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
        env = {**os.environ, "PYTHONPATH": tmp}
        return subprocess.run([exe, "--no-cache", str(ROOT / "pyproject.toml")], cwd=tmp, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
