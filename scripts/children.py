"""What a launcher started, stopped however the launcher ends.

A supervisor or `timeout` ends a launcher (`make run`, the benchmark) with
SIGTERM, and Python's default for it is to die on the spot: no `finally`
runs, and gunicorn, Celery, Redis and the upstream fakes it started outlive
it. `stop_on_signals()` makes SIGTERM, SIGHUP and SIGINT end the launcher
by an exception, so every `finally` stops what it started; whatever is still
tracked is stopped at exit, newest first.

SIGINT gets the handler too rather than Python's KeyboardInterrupt: a shell
without job control starts a background job (`make run &` in a script) with
SIGINT ignored, Python then keeps it ignored, and a supervisor's SIGINT would
leave everything running. gunicorn and Celery handle SIGINT themselves for
the same reason.
"""
from __future__ import annotations

import atexit
import signal
from contextlib import contextmanager
from typing import Iterator, Protocol


class Stoppable(Protocol):
    def stop(self) -> None: ...


_running: list[Stoppable] = []
_starting = 0  # blocks of `starting` open now
_deferred: list[int] = []  # stop signals that arrived in one


def track(child: Stoppable) -> None:
    _running.append(child)


def untrack(child: Stoppable) -> None:
    if child in _running:
        _running.remove(child)


def stop_all() -> None:
    while _running:
        _running.pop().stop()


@contextmanager
def starting() -> Iterator[None]:
    """Around starting a child and tracking it: a stop signal that arrives
    in between is acted on at the end of the block. Acted on at once, it
    would end the launcher with the child started but not yet tracked, and
    left running (a supervisor's SIGTERM can come the moment the child's
    command line shows)."""
    global _starting
    _starting += 1
    try:
        yield
    finally:
        _starting -= 1
        if not _starting and _deferred:
            _exit_by_exception(_deferred.pop(), None)


def begin_stop_all() -> None:
    """Every child still running begins to stop at once; each `finally` (or stop) then waits for its own."""
    for child in list(_running):
        begin_stop = getattr(child, "begin_stop", None)
        if begin_stop is not None:
            begin_stop()


def _exit_by_exception(signum: int, _frame) -> None:
    if _starting:
        _deferred.append(signum)
        return
    signal.signal(signum, signal.SIG_IGN)  # a second signal must not cut the clean-up short
    begin_stop_all()
    raise SystemExit(128 + signum)


def stop_on_signals() -> None:
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, _exit_by_exception)
    atexit.register(stop_all)
