"""A helper thread that starts only once it is of use.

Under gevent (the upstream workers' pool) `start_soon` spawns its greenlet
when the calling greenlet next lets others run (waits on I/O, sleeps): work
that ends before then (a job whose whole reply came in one read) never needs
one. Each greenlet a job started cost about 0.1 ms of its CPU, measured, far
more than its spawn alone (cold caches, a new frame stack). With real
threads (the local pool) it starts at once.

Started with `_thread`, not `threading.Thread`: Thread.start waits for the
new thread to say it runs, and the gevent hub, where a deferred start runs,
must never wait. Like threading.Thread, it lets go of its target once that
ran (or never will): the target is mostly a method of the object that holds
the thread, and the two in a cycle would keep a job's objects for the
garbage collector to find.
"""
from __future__ import annotations

import _thread
import threading
from typing import Callable


def _under_gevent() -> bool:
    try:
        from gevent import monkey
    except ImportError:  # pragma: no cover - gevent is a dependency
        return False
    return monkey.is_module_patched("threading")


class LazyThread:
    def __init__(self, target: Callable[[], None]):
        self._target = target
        self._done = threading.Event()
        self._started = False
        self._given_up = False
        self._deferred = None  # gevent's pending callback

    def start_soon(self) -> None:
        """Start it, now or (gevent) when the caller next lets others run."""
        if self._started or self._deferred is not None or self._given_up:
            return
        if _under_gevent():
            from gevent import get_hub
            self._deferred = get_hub().loop.run_callback(self._start)
        else:
            self._start()

    def _start(self) -> None:
        self._deferred = None
        if not self._given_up and not self._started:
            self._started = True
            _thread.start_new_thread(self._run, ())

    def _run(self) -> None:
        try:
            self._target()
        finally:
            self._target = None
            self._done.set()

    def join(self) -> None:
        """Wait until it ended; one that has not started never will."""
        if self._started:
            self._done.wait()
            return
        self._given_up, self._target = True, None
        if self._deferred is not None:
            self._deferred.stop()
            self._deferred = None

    @property
    def started(self) -> bool:
        return self._started
