"""Progress lines: shown on a terminal once work takes longer than DELAY, erased before
any output, never when piped or quiet."""

import io
import time

import pytest

from tidu.cli import main
from tidu.core import progress as P


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_sees_label_phase_and_time_then_a_clean_line(monkeypatch):
    monkeypatch.setattr(P, "DELAY", 0.05)
    term = Terminal()
    with P.progress("Hessian", stream=term):
        P.phase("e-graph")
        time.sleep(0.4)
    text = term.getvalue()
    assert "tidu: Hessian: e-graph" in text and " s" in text
    assert text.endswith("\r" + " " * 120 + "\r")  # erased at the end


@pytest.mark.parametrize("stream, quiet", [(io.StringIO(), False), (Terminal(), True)])
def test_nothing_when_piped_or_quiet(monkeypatch, stream, quiet):
    monkeypatch.setattr(P, "DELAY", 0.0)
    with P.progress("work", stream=stream, quiet=quiet):
        time.sleep(0.2)
    assert stream.getvalue() == ""


def test_short_work_shows_nothing():
    term = Terminal()
    with P.progress("work", stream=term):
        pass
    assert term.getvalue() == ""


def test_cli_output_is_not_mixed_with_the_line(monkeypatch, capsys):
    monkeypatch.setattr(P, "DELAY", 0.0)
    monkeypatch.setattr(P, "TICK", 0.001)
    term = Terminal()
    monkeypatch.setattr("sys.stderr", term)
    assert main(["hessian", "x**2*y + sin(x*y)"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Hessian of x**2*y + sin(x*y)") and "tidu:" not in out
    assert main(["hessian", "x*y", "--quiet"]) == 0


def test_counted_work_shows_a_bar(monkeypatch):
    monkeypatch.setattr(P, "DELAY", 0.0)
    term = Terminal()
    with P.progress("check-rules", stream=term):
        P.steps(4)
        for where in ("a.rules:1", "a.rules:2"):
            P.step(where)
        time.sleep(0.3)
    assert "tidu: check-rules [##########..........] 2/4: a.rules:2" in term.getvalue()


def test_check_rules_counts_its_rules(monkeypatch):
    from tidu.checkrules import check_rules

    seen = []
    monkeypatch.setattr(P, "DELAY", 30.0)  # the line never draws; the counts are read back
    term = Terminal()
    with P.progress("check-rules", stream=term):
        check_rules(only=["exp"])
        line = P._current.get()
        seen.append((line.done_steps, line.total_steps))
    assert seen[0][0] == seen[0][1] > 0
