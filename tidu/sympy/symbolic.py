"""The symbolic step of the SymPy checks: whether tidu's derivative entry minus SymPy's
is 0 (``compare``), and that step run under a time bound (``SymbolicStep``).

SymPy's ``simplify`` cannot be interrupted from inside: it has no cancellation hook,
and a thread that runs it cannot be stopped. So a bounded step runs in a worker
process, which is killed when the time is up. The worker is a fresh interpreter running
this file as a script: it imports SymPy and nothing of tidu (importing the ``tidu``
package would cost seconds and start the engine's machinery), and it is not a fork of
the caller, whose e-graph and progress threads a fork would copy in an unknown state.
It starts on the first comparison of a check that needs it (again after a kill), and
takes the comparisons one at a time as pickles over its stdin and stdout; starting it costs
about as much as importing SymPy, and each comparison a pickle round trip. Bounding
the work instead (by expression size or operation count) would refuse small
expressions that SymPy happens to find hard and admit large ones it finds easy.

This module imports only the standard library and SymPy, so that it can run as the
worker.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pickle
import queue
import subprocess
import sys
import threading
import time
from typing import Any

import sympy

# ---------------------------------------------------------------------------
# the comparison
# ---------------------------------------------------------------------------


def _chop(e: sympy.Expr, tol: float = 1e-12) -> sympy.Expr:
    small = {f: 0 for f in e.atoms(sympy.Float) if abs(f) < tol}
    return e.xreplace(small) if small else e


_TRUTH = {"<": lambda s: s < 0, "<=": lambda s: s <= 0, ">": lambda s: s > 0,
          ">=": lambda s: s >= 0, "==": lambda s: s == 0, "!=": lambda s: s != 0}


def _sides(d: sympy.Expr, max_kinks: int = 4) -> tuple[bool, list[str]] | None:
    """A piecewise ``d`` on every side of its kinks: each sign (<0, 0, >0) of each
    difference its conditions compare (x < y, Eq(x, y), ...) picks branches, which must
    simplify to 0. Returns (0 on every open side, the kinks where it is not shown to be
    0, as "x = 0" or "x*y = x + y"), or None past ``max_kinks`` differences. A kink
    that is a variable is also substituted into its side (x = 0: the branch's value
    there). Sign combinations are not checked for consistency (conservative)."""
    rels = [r for r in d.atoms(sympy.core.relational.Relational) if r.rel_op in _TRUTH]
    where: dict[sympy.Expr, str] = {}
    orient = []
    for r in rels:
        a = r.lhs - r.rhs
        flip = a.could_extract_minus_sign()
        key = -a if flip else a
        where.setdefault(key, f"{r.lhs} = {r.rhs}")
        orient.append((r, key, -1 if flip else 1))
    keys = list(where)
    if len(keys) > max_kinks:
        return None
    open_zero = True
    failed: list[frozenset[sympy.Expr]] = []
    for signs in itertools.product((-1, 0, 1), repeat=len(keys)):
        sign_of = dict(zip(keys, signs, strict=True))
        truth = {r: sympy.true if _TRUTH[r.rel_op](sign_of[k] * f) else sympy.false
                 for r, k, f in orient}
        side = d.xreplace(truth)
        on = frozenset(k for k in keys if sign_of[k] == 0)
        if on:
            side = side.xreplace({k: 0 for k in on if k.is_Symbol})
        if side == 0 or sympy.simplify(side) == 0:
            continue
        if not on:
            open_zero = False
            break
        failed.append(on)
    minimal = [s for s in failed if not any(o < s for o in failed)]
    loci = list(dict.fromkeys(" and ".join(sorted(where[k] for k in s)) for s in minimal))
    return open_zero, loci


def compare(a: Any, b: Any) -> tuple[str, str]:
    """SymPy's verdict on ``a - b`` and where it is inconclusive: ("yes", "") if the
    difference simplifies to 0 (piecewise: on every side of its kinks); ("?", "at x = 0")
    if it does on every open side but not on a kink, where one side may be undefined
    (SymPy's ``0**y*zoo`` against tidu's guarded ``log``) or follow another convention;
    ("≈", "") if it is 0 once float constants are evaluated and rounding residue
    dropped; ("?", "") if SymPy cannot decide; else ("no", "")."""
    return _compare(a, b, stop_at_kinks=True)


def symbolic_difference(a: Any, b: Any) -> str:
    """"yes", "≈", "?" or "no", as ``compare``, except that a difference not shown 0 on a
    kink goes on to ``simplify`` of the whole (as ``tidu check-rules`` has it), which can
    be far slower."""
    return _compare(a, b, stop_at_kinks=False)[0]


def _compare(a: Any, b: Any, stop_at_kinks: bool) -> tuple[str, str]:
    d = a - b
    if d == 0:
        return "yes", ""
    if d.has(sympy.Heaviside, sympy.Max, sympy.Min, sympy.Abs, sympy.sign, sympy.Piecewise):
        d = d.rewrite(sympy.Piecewise)
        # Fixing every condition collapses nested Piecewise without piecewise_fold, which
        # can take minutes on a derivative of max(...); before simplify of the whole.
        split = _sides(d) if d.has(sympy.Piecewise) else None
        if split is not None and split[0] and not split[1]:
            return "yes", ""
        if split is not None and split[0] and stop_at_kinks:
            return "?", "at " + " or ".join(split[1])
        d = sympy.piecewise_fold(d)
    d = sympy.simplify(d)
    if d == 0:
        return "yes", ""
    if sympy.simplify(_chop(sympy.expand(d.evalf()))) == 0:
        return "≈", ""
    same = d.equals(0)
    return ("yes", "") if same is True else (("?", "") if same is None else ("no", ""))


# ---------------------------------------------------------------------------
# the comparison under a time bound, in a worker process
# ---------------------------------------------------------------------------

_HEADER = 8  # bytes of a frame's length
_START_GUARD_S = 120.0  # a worker not ready by then is not coming (not part of the bound)


def _write_frame(stream: Any, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(len(data).to_bytes(_HEADER, "little") + data)
    stream.flush()


def _read_frame(stream: Any) -> Any:
    head = stream.read(_HEADER)
    if len(head) < _HEADER:
        raise EOFError
    n = int.from_bytes(head, "little")
    data = stream.read(n)
    if len(data) < n:
        raise EOFError
    return pickle.loads(data)  # noqa: S301 -- frames come from our own worker or parent only


def _serve() -> None:
    """The worker's loop: (a, b) in, ``compare(a, b)`` out, until stdin closes."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr  # nothing SymPy prints may corrupt the frames
    inp = sys.stdin.buffer
    _write_frame(out, "ready")
    while True:
        try:
            a, b, *kinks = _read_frame(inp)  # (with a third entry: stop_at_kinks)
        except EOFError:
            return
        try:
            result = _compare(a, b, stop_at_kinks=kinks[0] if kinks else True)
        except (RecursionError, MemoryError):
            result = ("?", "(too deep for SymPy)")
        except Exception as e:  # noqa: BLE001 -- SymPy failing to decide is an answer, not a crash
            result = ("?", f"(SymPy raised {type(e).__name__})")
        _write_frame(out, result)


class SymbolicStep:
    """``compare`` for the pairs of one check, each bounded by ``timeout`` seconds and all
    together by ``total`` (default 4 * ``timeout``); None: no bound, run here. A
    comparison past its time is stopped (its worker process killed; the next one starts
    a new worker) and is ("timeout", "timed out after T s"); once ``total`` is spent,
    the rest are ("timeout", "stopped: the S s for all entries were spent"). Times count
    from the worker being ready. Per comparison, so that a check of many easy entries is
    not cut short by their number; the total keeps many hard ones from taking minutes."""

    def __init__(self, timeout: float | None, total: float | None = None) -> None:
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be positive seconds or None, got {timeout!r}")
        self.timeout = timeout
        self.total = None if timeout is None else (4 * timeout if total is None else total)
        self.spent = 0.0
        self._proc: subprocess.Popen[bytes] | None = None
        self._answers: queue.Queue[Any] = queue.Queue()

    def timed_out(self) -> tuple[str, str]:
        return "timeout", f"timed out after {self.timeout:g} s"

    def spent_all(self) -> tuple[str, str]:
        return "timeout", f"stopped: the {self.total:g} s for all entries were spent"

    @staticmethod
    def _reader(proc: subprocess.Popen[bytes], answers: queue.Queue[Any]) -> None:
        """Puts each of ``proc``'s answers on ``answers``, its own queue: the reader of a
        killed worker, ending after a new one started, must not speak into the new one's."""
        try:
            while True:
                answers.put(_read_frame(proc.stdout))
        except (EOFError, OSError, pickle.UnpicklingError, ValueError):
            answers.put(EOFError)

    def _start(self) -> subprocess.Popen[bytes] | None:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        # -c, not -m: running this file by path imports SymPy only, not the tidu package
        code = "import runpy, sys; del sys.path[0]; runpy.run_path(sys.argv[1], run_name='__main__')"
        self._answers = queue.Queue()
        proc = subprocess.Popen([sys.executable, "-c", code, __file__], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        threading.Thread(target=self._reader, args=(proc, self._answers), daemon=True).start()
        try:
            ready = self._answers.get(timeout=_START_GUARD_S)
        except queue.Empty:
            ready = None
        if ready != "ready":
            self._stop(proc)
            return None
        self._proc = proc
        return proc

    @staticmethod
    def _stop(proc: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(OSError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)

    def __call__(self, a: Any, b: Any, stop_at_kinks: bool = True) -> tuple[str, str]:
        """``compare(a, b)`` under the bounds; with ``stop_at_kinks=False``, as
        ``symbolic_difference`` (and its detail)."""
        if self.timeout is None or self.total is None:
            return _compare(a, b, stop_at_kinks)
        if self.spent >= self.total:
            return self.spent_all()
        try:
            request = pickle.dumps((a, b, stop_at_kinks), protocol=pickle.HIGHEST_PROTOCOL)
        except (RecursionError, pickle.PicklingError, TypeError, AttributeError):
            return "?", "(not sent to SymPy: cannot be pickled)"
        proc = self._start()
        if proc is None:
            return "?", "(SymPy's worker process did not start)"
        t0 = time.monotonic()
        try:
            assert proc.stdin is not None
            proc.stdin.write(len(request).to_bytes(_HEADER, "little") + request)
            proc.stdin.flush()
            budget = min(self.timeout, self.total - self.spent)
            answer = self._answers.get(timeout=budget)
        except queue.Empty:
            self.spent += budget
            self._stop(proc)
            self._proc = None
            return self.timed_out() if budget == self.timeout else self.spent_all()
        except OSError:
            answer = EOFError
        self.spent += time.monotonic() - t0
        if answer is EOFError:
            self._stop(proc)
            self._proc = None
            return "?", "(SymPy's worker process stopped)"
        return answer

    def close(self) -> None:
        """Ends the worker (it exits when its stdin closes)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._stop(proc)

    def __enter__(self) -> SymbolicStep:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":
    _serve()
