"""The thread every egglog call runs on.

egglog's native code recurses once per DAG level (design.md: it overflows an 8 MB stack
at about 15k levels), so its calls run on a thread with a 1 GB stack. There is one such
thread per process, started on first use and kept: it owns the persistent e-graphs
(``tidu.simplify.egraph.session``), which are reused across builds, and it runs one job at a
time, so callers on any number of threads are served in turn and never share an
e-graph concurrently. A job submitted from the worker itself runs inline.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

STACK_SIZE = 1 << 30

_lock = threading.Lock()
_jobs: queue.SimpleQueue[tuple[Callable[[], Any], list[Any], threading.Event]] | None = None
_thread: threading.Thread | None = None


_after: list[Callable[[], None]] = []  # clean-up of the job being served (worker thread only)


def _serve(jobs: queue.SimpleQueue) -> None:
    while True:
        fn, box, done = jobs.get()
        try:
            box.append((True, fn()))
        except BaseException as e:  # re-raised in the caller's thread
            box.append((False, e))
        finally:
            done.set()
        _run_after()


def _run_after() -> None:
    """Run the clean-ups the finished job left (its caller already has its result): egglog
    releases the GIL, so they overlap with the caller's next Python work."""
    while _after:
        task = _after.pop(0)
        with contextlib.suppress(Exception):  # a clean-up handles its own failure; the worker lives on
            task()


def after_job(task: Callable[[], None]) -> None:
    """Run ``task`` on the worker once the current job has handed back its result, before
    the next job starts (work nobody waits for, such as resetting an e-graph). Call on the
    worker thread."""
    assert on_worker(), "after_job is for code running on the egglog worker"
    _after.append(task)


def _start() -> queue.SimpleQueue:
    global _jobs, _thread
    with _lock:
        if _jobs is None:
            jobs: queue.SimpleQueue = queue.SimpleQueue()
            t = threading.Thread(target=_serve, args=(jobs,), name="tidu-egglog", daemon=True)
            old = threading.stack_size(STACK_SIZE)
            try:  # the size applies to threads started meanwhile: only this one (under _lock)
                t.start()
            finally:
                threading.stack_size(old)
            _jobs, _thread = jobs, t
        return _jobs


def _forget_after_fork() -> None:  # a forked child has no worker thread
    global _jobs, _thread
    _jobs = _thread = None


os.register_at_fork(after_in_child=_forget_after_fork)


def on_worker() -> bool:
    """Whether the calling thread is the egglog worker."""
    return _thread is not None and threading.current_thread() is _thread


def run_on_worker[R](fn: Callable[[], R]) -> R:
    """Run ``fn`` on the egglog thread, in a copy of the caller's context (its context
    variables: the active catalog, limits, semantics), and return its result (or raise
    its error)."""
    if on_worker():
        return fn()
    jobs = _jobs or _start()
    box: list[Any] = []
    done = threading.Event()
    jobs.put((functools.partial(contextvars.copy_context().run, fn), box, done))
    done.wait()
    ok, value = box[0]
    if not ok:
        raise value
    return value


# The historical name: everything that talks to egglog goes through the worker.
run_with_big_stack = run_on_worker

__all__ = ["STACK_SIZE", "after_job", "on_worker", "run_on_worker", "run_with_big_stack"]
