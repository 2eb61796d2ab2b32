"""Progress on long work, for people at a terminal.

``with progress("Hessian"):`` shows, once the work has taken more than a second, one
self-erasing status line on stderr: what is being built, which phase it is in (passes
report theirs with ``phase("e-graph")``) and how long it has taken. Nothing is shown
when stderr is not a terminal (pipes, CI logs, tests) or when ``quiet`` is set, so
output that is captured never contains progress text. Library calls show nothing unless
a caller opened a ``progress`` block: the CLI does, for every command.
"""

from __future__ import annotations

import contextvars
import itertools
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

DELAY = 1.0  # seconds of silence before the line appears: short work shows nothing
TICK = 0.2


def _columns(stream: TextIO) -> int:
    """The terminal's width (a status line longer than it would wrap, and "\r" would then
    return to its last row only, leaving the first on screen)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return shutil.get_terminal_size().columns


class _Line:
    def __init__(self, label: str, stream: TextIO) -> None:
        self.label = label
        self.stream = stream
        self.phase = ""
        self.done_steps = 0
        self.total_steps = 0
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.shown = 0  # characters of the line on screen (0: none)
        self.start = time.monotonic()
        # Whether printed output ends at the start of a line: a status line drawn after a
        # partial line ("\r" first) would overwrite it, so none is drawn until it ends.
        self.at_line_start = True
        self.output: TextIO | None = None  # stdout, flushed before a line is drawn

    def run(self) -> None:
        if self.done.wait(DELAY):
            return
        spin = itertools.cycle("|/-\\")
        while not self.done.is_set():
            self.draw(next(spin))
            self.done.wait(TICK)

    def text(self, spinner: str) -> str:
        return (f"tidu: {self.label}{self._bar()}{': ' + self.phase if self.phase else ''} {spinner} "
                f"{time.monotonic() - self.start:.0f} s")

    def draw(self, spinner: str = "|") -> None:
        """Show the status line now (in place of the one shown), unless printed output has
        a partial line."""
        with self.lock:
            if not self.at_line_start:
                return
            if self.output is not None:
                self.output.flush()  # what was printed is on screen before the line
            text = self.text(spinner)[: max(_columns(self.stream) - 1, 1)]
            self.stream.write("\r" + text.ljust(self.shown))
            self.stream.flush()
            self.shown = len(text)

    def _bar(self) -> str:
        if not self.total_steps:
            return ""
        width = 20
        filled = width * min(self.done_steps, self.total_steps) // self.total_steps
        return f" [{'#' * filled}{'.' * (width - filled)}] {self.done_steps}/{self.total_steps}"

    def clear(self) -> None:
        with self.lock:
            if self.shown:
                self.stream.write("\r" + " " * self.shown + "\r")
                self.stream.flush()
                self.shown = 0


class _ClearingWriter:
    """stdout while a status line may be shown: the line is erased before any output,
    and none is drawn while the output has a partial line."""

    def __init__(self, inner: TextIO, line: _Line) -> None:
        self._inner = inner
        self._line = line
        line.output = inner

    def write(self, text: str) -> int:
        self._line.clear()
        if text:
            self._line.at_line_start = text.endswith("\n")
        return self._inner.write(text)

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


# a context variable: passes that run on tidu's egglog worker thread run in a copy of
# the caller's context, so they report to the caller's line
_current: contextvars.ContextVar[_Line | None] = contextvars.ContextVar("tidu_progress", default=None)


@contextmanager
def progress(label: str, *, quiet: bool = False, stream: TextIO | None = None) -> Iterator[None]:
    """Show a status line for the work inside the block if it takes more than a second
    and ``stream`` (default stderr) is a terminal; never when ``quiet``."""
    out = stream if stream is not None else sys.stderr
    if quiet or not getattr(out, "isatty", lambda: False)():
        yield
        return
    line = _Line(label, out)
    token = _current.set(line)
    stdout = sys.stdout
    sys.stdout = _ClearingWriter(stdout, line)  # type: ignore[assignment]
    worker = threading.Thread(target=line.run, name="tidu-progress", daemon=True)
    worker.start()
    try:
        yield
    finally:
        line.done.set()
        worker.join()
        line.clear()
        sys.stdout = stdout
        _current.reset(token)


def phase(name: str) -> None:
    """Name the phase the current work is in (shown on the status line, if any)."""
    line = _current.get()
    if line is not None:
        line.phase = name


def steps(total: int) -> None:
    """Announce that the current work is ``total`` steps (shown as a bar, if any line)."""
    line = _current.get()
    if line is not None:
        line.total_steps, line.done_steps = total, 0


def step(name: str = "") -> None:
    """Count one step done (``name`` says what comes next)."""
    line = _current.get()
    if line is not None:
        line.done_steps += 1
        if name:
            line.phase = name


__all__ = ["progress", "phase", "steps", "step"]
