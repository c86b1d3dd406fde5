"""Abort flags for the jobs running in this worker process.

One pub/sub listener thread per process hears every abort broadcast and sets
the `Cancel` of the matching running job, so the runner's per-token check is
in memory and a backend blocked in I/O is woken through its callbacks. A job
aborted before it started is caught by its abort key, which the caller reads
inside `watch` (after the flag is registered: no gap to fall into).
"""
from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from typing import Iterator

from redis import Redis

from protocol.keys import abort_channel, abort_key
from workers.cancel import Cancel

log = logging.getLogger(__name__)


class AbortWatch:
    def __init__(self, redis: Redis):
        self._redis = redis
        self._flags: dict[str, Cancel] = {}
        self._listening = threading.Event()
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @contextmanager
    def watch(self, job_id: str) -> Iterator[Cancel]:
        self._ensure_listening()
        flag = self._flags[job_id] = Cancel()
        try:
            yield flag
        finally:
            self._flags.pop(job_id, None)

    def _ensure_listening(self, timeout: float = 5.0) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._listen_forever, name="abort-watch", daemon=True)
                self._thread.start()
        self._listening.wait(timeout)

    def _listen_forever(self) -> None:
        while True:
            try:
                self._listen()
            except Exception as error:  # noqa: BLE001 - this thread must never die
                self._listening.clear()
                log.warning("abort listener lost Redis (%s: %s); reconnecting", type(error).__name__, error)
                time.sleep(0.5)

    def _catch_up(self) -> None:
        """Aborts broadcast while nobody listened left their abort keys."""
        job_ids = list(self._flags)
        if job_ids:
            for job_id, aborted in zip(job_ids, self._redis.mget([abort_key(j) for j in job_ids])):
                flag = self._flags.get(job_id)
                if aborted and flag is not None:
                    flag.set()

    def _listen(self) -> None:
        pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(abort_channel())
        pubsub.get_message(timeout=5)  # the subscribe confirmation
        self._catch_up()
        self._listening.set()
        for message in pubsub.listen():
            if message["type"] == "message":
                flag = self._flags.get(message["data"].decode())
                if flag is not None:
                    flag.set()
