"""When a local model is in memory: loaded by the first job that needs it,
kept while any job uses it, unloaded after its keep-alive (Ollama's
`keep_alive`, default 5 minutes) once nobody does.

Several people's jobs use one loaded model at once, so an unload asked for
(keep_alive 0, or the timer) waits for the last of them: one person's
request never pulls the model from under another's.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Callable, Generic, Iterator, TypeVar

DEFAULT_KEEP_ALIVE = 300.0

T = TypeVar("T")


class Residency(Generic[T]):
    def __init__(self, load: Callable[[], T], unload: Callable[[T], None]):
        self._make, self._free = load, unload
        self._lock = threading.Lock()
        self._loaded: T | None = None
        self._users = 0
        self._unload_when_idle = False
        self._timer: threading.Timer | None = None

    @contextmanager
    def using(self, load: bool = True) -> Iterator[tuple[T | None, int]]:
        """The loaded model (loading it, unless `load` is False: then None if
        it is not loaded) and the nanoseconds its loading took; it stays
        loaded until the block ends."""
        with self._lock:
            load_ns = self._load() if load else 0
            loaded = self._loaded
            if loaded is not None:
                self._users += 1
        try:
            yield loaded, load_ns
        finally:
            if loaded is not None:
                with self._lock:
                    self._users -= 1
                    self._unload_if_idle()

    def load(self) -> int:
        with self._lock:
            return self._load()

    def keep_loaded(self, seconds: float | None) -> None:
        """Unload after `seconds` idle (None: the default; < 0: never; 0: as
        soon as no job uses it)."""
        seconds = DEFAULT_KEEP_ALIVE if seconds is None else seconds
        with self._lock:
            self._stop_timer()
            if seconds == 0:
                self._unload_when_idle = True
                self._unload_if_idle()
            elif seconds > 0:
                self._timer = threading.Timer(seconds, self._expire)
                self._timer.daemon = True
                self._timer.start()

    def _load(self) -> int:
        self._stop_timer()
        self._unload_when_idle = False
        if self._loaded is not None:
            return 0
        started = time.perf_counter_ns()
        self._loaded = self._make()
        return time.perf_counter_ns() - started

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        with self._lock:
            self._unload_when_idle = True
            self._unload_if_idle()

    def _unload_if_idle(self) -> None:
        if self._users == 0 and self._unload_when_idle:
            self._unload_when_idle = False
            loaded, self._loaded = self._loaded, None
            if loaded is not None:
                self._free(loaded)
