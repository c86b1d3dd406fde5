"""One asyncio event loop per worker process, in a thread of its own, for
the MCP SDK (built on anyio over asyncio).

Jobs run in threads (the threads pool) or greenlets (the gevent pool); they
hand the loop coroutines and wait for the results. Under gevent the loop
runs in a real OS thread (gevent's original `threading.Thread`): its
sockets, pipes and child processes stay asyncio's, and a greenlet waiting on
a `concurrent.futures.Future` yields to the hub (gevent's patched locks are
woken across threads). A job's cancellation cancels its coroutine at once:
the SDK then tells the server (`notifications/cancelled`).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Awaitable, TypeVar

from workers.cancel import Cancel

T = TypeVar("T")


def _native_thread_class() -> type[threading.Thread]:
    try:
        from gevent import monkey
    except ImportError:  # pragma: no cover - gevent is a dependency
        return threading.Thread
    if monkey.is_module_patched("threading"):
        return monkey.get_original("threading", "Thread")
    return threading.Thread


class BackgroundLoop:
    def __init__(self):
        self._loop: asyncio.AbstractEventLoop | None = None
        self._start_lock = threading.Lock()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        with self._start_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                _native_thread_class()(target=loop.run_forever, name="mcp-loop", daemon=True).start()
                self._loop = loop
        return self._loop

    def submit(self, coroutine: Awaitable[T]) -> "concurrent.futures.Future[T]":
        """The coroutine, started on the loop; cancelling the future cancels it."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, coroutine: Awaitable[T], cancel: Cancel | None = None) -> T:
        """The coroutine's result; raises concurrent.futures.CancelledError
        at once if `cancel` is set first (the coroutine is cancelled too)."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        if cancel is not None:
            cancel.on_cancel(future.cancel)
        return future.result()
