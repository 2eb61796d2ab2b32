"""The layout's rules (docs/architecture.md): no import cycles, no private name imported
across packages, function-level imports only to defer an optional dependency, and the
stage layering import-linter checks (.ci/lint_imports.py)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# where each package of the import namespace lives (pyproject's package-dir)
PACKAGE_DIRS = {"tidu": ROOT / "tidu", "tidu.lowering": ROOT / "lowering", "tidu.rules": ROOT / "rules"}
# external modules a function may import: optional dependencies, loaded only when used, and
# SymPy, which `import tidu` does not load (it takes about half a second to import)
DEFERRED_OK = ("jax", "jaxlib", "graphviz", "IPython", "scipy.special", "scipy.linalg", "cffi", "ml_dtypes",
               "sympy",
               # the rule checker (SymPy, mpmath): tidu.load_rules/use_rules check rewrites with it
               "tidu.checkrules",
               # egglog's package (its Python layer imports black) is a large part of `import tidu`,
               # and graphs that prematch.shortcut simplifies never open an e-graph
               "egglog",
               # the back ends other than NumPy, loaded by their first program
               "tidu.lowering.c_build", "tidu.lowering.c_source", "tidu.lowering.stablehlo", "tidu.lowering.xla")


def _modules() -> dict[str, tuple[Path, bool]]:
    mods = {}
    for pkg, root in PACKAGE_DIRS.items():
        for p in sorted(root.rglob("*.py")):
            parts = [x for x in p.relative_to(root).with_suffix("").parts if x != "__init__"]
            mods[".".join([pkg, *parts])] = (p, p.name == "__init__.py")
    return mods


MODULES = _modules()


def _imports(mod: str) -> list[tuple[str, str | None, bool, int]]:
    """(imported module, imported name or None, inside a function?, line) for each import."""
    path, is_pkg = MODULES[mod]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []

    def visit(node: ast.AST, in_func: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_func or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                out.extend((a.name, None, in_func, child.lineno) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    parts = parts[: len(parts) - (child.level - 1)]
                    base = ".".join(parts + ([child.module] if child.module else []))
                for a in child.names:
                    full = f"{base}.{a.name}"
                    out.append((full, None, in_func, child.lineno) if full in MODULES
                               else (base, a.name, in_func, child.lineno))
            visit(child, inner)

    visit(tree, False)
    return out


def _owner(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _package(mod: str) -> str:
    return mod if MODULES[mod][1] else mod.rpartition(".")[0]


def test_no_import_cycles():
    graph = {m: {t for name, _, _, _ in _imports(m) if (t := _owner(name)) and t != m} for m in MODULES}
    # a package importing its own submodules (re-exports) is not a cycle of design
    for m in MODULES:
        if MODULES[m][1]:
            for sub in list(graph[m]):
                if sub.startswith(m + "."):
                    graph[m].discard(sub)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles = []
    counter = 0
    for start in sorted(graph):  # Tarjan, iteratively
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        cycles.append(sorted(comp))
    assert not cycles, f"import cycles: {cycles}"


def test_no_private_name_crosses_a_package():
    bad = []
    for m in MODULES:
        for name, attr, _, line in _imports(m):
            target = _owner(name)
            if target is None or target == m:
                continue
            private = (attr or "").startswith("_") and not (attr or "").startswith("__")
            private_module = any(p.startswith("_") and not p.startswith("__") for p in target.split("."))
            if (private or private_module) and _package(m) != _package(target):
                bad.append(f"{m}:{line} imports {target}.{attr or ''}")
    assert not bad, "private names imported across packages:\n" + "\n".join(bad)


def test_function_level_imports_only_defer_optional_dependencies():
    bad = []
    for m in MODULES:
        for name, attr, in_func, line in _imports(m):
            if not in_func:
                continue
            full = f"{name}.{attr}" if attr else name
            if not any(full == d or full.startswith(d + ".") for d in DEFERRED_OK):
                bad.append(f"{MODULES[m][0].relative_to(ROOT)}:{line} imports {full} inside a function")
    assert not bad, "function-level imports that defer no optional dependency:\n" + "\n".join(bad)


@pytest.mark.skipif(shutil.which("lint-imports") is None
                    and not Path(sys.executable).with_name("lint-imports").exists(),
                    reason="import-linter is not installed")
def test_stages_import_downwards_only():
    done = subprocess.run([sys.executable, str(ROOT / ".ci" / "lint_imports.py")], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
