"""Helpers for the command-line tests: run ``tidu.cli.main`` in-process and read its
one-line errors."""

from __future__ import annotations

from tidu.cli import main


def run(capsys, *argv):
    """``main(argv)`` in this process: (exit status, stdout, stderr)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err):
    """The one ``tidu: error:`` line of ``err`` (and no traceback)."""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("tidu: error: ")
    assert "Traceback" not in err
    return lines[0]
