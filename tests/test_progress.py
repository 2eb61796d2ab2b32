"""Progress lines: shown on a terminal once work takes longer than DELAY, erased before
any output, never over a partial line of output, never wider than the terminal, never
when piped or quiet. The drawing is tested directly (``_Line.draw``); the threaded tests
wait for an event, with a generous hang guard, instead of sleeping a fixed time."""

import io
import threading

import pytest

from tidu.cli import main
from tidu.core import progress as P

HANG_GUARD = 60.0  # seconds; a quiet machine needs milliseconds


class Terminal(io.StringIO):
    def __init__(self, columns: int = 100) -> None:
        super().__init__()
        self.columns = columns
        self.written = threading.Event()

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.written.set()
        return super().write(text)


@pytest.fixture
def columns(monkeypatch):
    monkeypatch.setattr(P, "_columns", lambda stream: getattr(stream, "columns", 100))


def test_a_terminal_sees_label_phase_and_time_then_a_clean_line(monkeypatch, columns):
    monkeypatch.setattr(P, "DELAY", 0.0)
    term = Terminal()
    with P.progress("Hessian", stream=term):
        P.phase("e-graph")
        term.written.clear()
        assert term.written.wait(HANG_GUARD)  # a line drawn after the phase was named
    text = term.getvalue()
    assert "tidu: Hessian: e-graph" in text and " s" in text
    shown = len(text.rsplit("\r", 2)[-2])  # the last line drawn, then its erasure
    assert text.endswith("\r" + " " * shown + "\r")


def test_the_line_fits_the_terminal(columns):
    term = Terminal(columns=30)
    line = P._Line("a label long enough to wrap a narrow terminal", term)
    line.phase = "and a phase"
    line.draw()
    drawn = term.getvalue()[1:]
    assert len(drawn) == 29 and drawn.startswith("tidu: a label")
    line.clear()
    assert term.getvalue().endswith("\r" + " " * 29 + "\r")


def test_no_line_over_a_partial_line_of_output(columns):
    term, out = Terminal(), io.StringIO()
    line = P._Line("diff", term)
    stdout = P._ClearingWriter(out, line)
    stdout.write("d/dx = 3*x**2")  # no newline yet: "\r" would return over it
    line.draw()
    assert term.getvalue() == ""
    stdout.write("\n")
    line.draw()
    assert term.getvalue().startswith("\rtidu: diff")
    shown = line.shown
    stdout.write("next output\n")  # erases the line first
    assert shown > 0 and term.getvalue().endswith("\r" + " " * shown + "\r")
    assert out.getvalue() == "d/dx = 3*x**2\nnext output\n"


@pytest.mark.parametrize("stream, quiet", [(io.StringIO(), False), (Terminal(), True)])
def test_nothing_when_piped_or_quiet(monkeypatch, stream, quiet):
    monkeypatch.setattr(P, "DELAY", 0.0)
    with P.progress("work", stream=stream, quiet=quiet):
        assert P._current.get() is None  # no line was set up
    assert stream.getvalue() == ""


def test_short_work_shows_nothing(monkeypatch):
    monkeypatch.setattr(P, "DELAY", HANG_GUARD)
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
    assert "tidu: tidu" not in term.getvalue()  # the label is the command, once prefixed
    assert main(["hessian", "x*y", "--quiet"]) == 0


def test_counted_work_shows_a_bar(columns):
    term = Terminal()
    line = P._Line("check-rules", term)
    token = P._current.set(line)
    try:
        P.steps(4)
        for where in ("a.rules:1", "a.rules:2"):
            P.step(where)
    finally:
        P._current.reset(token)
    line.draw()
    assert "tidu: check-rules [##########..........] 2/4: a.rules:2" in term.getvalue()


def test_check_rules_counts_its_rules(monkeypatch):
    from tidu.checkrules import check_rules

    seen = []
    monkeypatch.setattr(P, "DELAY", HANG_GUARD)  # the line never draws; the counts are read back
    term = Terminal()
    with P.progress("check-rules", stream=term):
        check_rules(only=["exp"])
        line = P._current.get()
        seen.append((line.done_steps, line.total_steps))
    assert seen[0][0] == seen[0][1] > 0
