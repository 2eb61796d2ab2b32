"""Every code example in README.md and docs/*.md runs, and prints what the docs say.

```python blocks execute in order (one namespace per file); each `tidu ...` line of a
```sh block runs through the CLI and must succeed. A ```text block that directly follows
a code block (nothing but blank lines between them) is that block's output: it must equal
what the block printed (trailing spaces aside). Volatile parts are written `...`: inside
a line it matches any text on that line, a line of its own matches any number of lines
(docs/index.md, "Writing docs").
"""

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```\n?", re.S | re.M)


def examples(path: Path) -> list[tuple[str, str, int, str | None]]:
    """(language, body, line, expected output or None) for each code block of ``path``."""
    text = path.read_text()
    found = list(BLOCK.finditer(text))
    out = []
    for i, m in enumerate(found):
        lang = m.group(1)
        if lang not in ("python", "sh"):
            continue
        expected = None
        nxt = found[i + 1] if i + 1 < len(found) else None
        if nxt is not None and nxt.group(1) == "text" and not text[m.end():nxt.start()].strip():
            expected = nxt.group(2)
        out.append((lang, m.group(2), text[:m.start()].count("\n") + 1, expected))
    return out


def pattern(expected: str) -> re.Pattern[str]:
    parts = []
    for line in expected.rstrip("\n").split("\n"):
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(map(re.escape, line.rstrip().split("..."))) + r"[ \t]*\n")
    return re.compile("".join(parts))


def matches(expected: str, actual: str) -> bool:
    actual = "\n".join(line.rstrip() for line in actual.rstrip("\n").split("\n")) + "\n"
    return pattern(expected).fullmatch(actual) is not None


def run_block(lang: str, body: str, where: str, namespace: dict) -> str:
    from tidu.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        if lang == "python":
            exec(compile(body, where, "exec"), namespace)
        else:
            for line in body.splitlines():
                cmd = line.split("&&")[-1].split(" #")[0].strip()
                words = shlex.split(cmd)
                if words and words[0].endswith("tidu"):
                    err = io.StringIO()
                    with contextlib.redirect_stderr(err):
                        code = main(words[1:])
                    assert code == 0, f"{where}: `{cmd}` failed (exit {code}):\n{err.getvalue()}"
    return buf.getvalue()


# verification.md's examples run the checker on the catalog, one a seeded sample of 12
# mutants (about 10 s): CI's slow step runs them; the default run runs the same commands in
# tests/test_checkrules.py::test_cli_subprocess_on_builtin_primitives (check-rules --only
# exp,reshape) and tests/test_mutation.py::test_cli_mutate_sample (a sample of 6)
SLOW = {"verification.md"}


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.slow) if p.name in SLOW else p for p in FILES],
                         ids=lambda p: p.name)
def test_examples_run_and_print_what_the_docs_say(path):
    namespace: dict = {"__name__": f"docs_{path.stem}"}
    for lang, body, line, expected in examples(path):
        where = f"{path.name}:{line}"
        actual = run_block(lang, body, where, namespace)
        if expected is not None:
            assert matches(expected, actual), (
                f"{where}: the {lang} block prints\n{actual}\nbut the text block after it says\n{expected}")


def test_ellipsis_rules():
    assert matches("a ... b\n", "a 12 ms b\n")
    assert matches("x\n...\ny\n", "x\n1\n2\ny\n")
    assert matches("x\n...\ny\n", "x\ny\n")
    assert not matches("a b\n", "a c\n")
    assert not matches("x\ny\n", "x\ny\nz\n")
