"""Abort flags for the jobs running in this worker process.

One pub/sub listener thread per process hears every abort broadcast and sets
the `Cancel` of the matching running job, so the runner's per-token check is
in memory and a backend blocked in I/O is woken through its callbacks.

No gap between the take and the watch: the take (jobqueue/fairqueue.py)
drops a job whose abort key is set, so an abort it missed was broadcast
after it. The listener remembers the aborts it heard for no job of this
process (the job may be between its take and its watch); if the listener's
subscription is younger than the take (it was reconnecting), `watch` reads
the abort key itself.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from typing import Iterator

from redis import Redis

import jobqueue
from protocol.keys import abort_channel
from workers.cancel import Cancel

log = logging.getLogger(__name__)
# Aborts heard for no job of this process, remembered this many (a job's take
# and its watch are a moment apart; every worker hears every abort).
REMEMBERED_ABORTS = 4096


class AbortWatch:
    def __init__(self, redis: Redis):
        self._redis = redis
        self._flags: dict[str, Cancel] = {}
        self._heard: OrderedDict[str, bool] = OrderedDict()  # aborts of no job here (yet)
        self._lock = threading.Lock()  # flags and heard change together
        self._subscribed_at: float | None = None  # time.monotonic() of the current subscription
        self._listening = threading.Event()
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @contextmanager
    def watch(self, job_id: str, taken_at: float) -> Iterator[Cancel]:
        """The job's abort flag while it runs; already set if its abort came
        after its take (sent at `taken_at`, time.monotonic()) but before now."""
        self._ensure_listening()
        flag = Cancel()
        with self._lock:
            self._flags[job_id] = flag
            heard = self._heard.pop(job_id, False)
            subscribed_before = self._subscribed_at is not None and self._subscribed_at <= taken_at
        if heard or (not subscribed_before and jobqueue.aborted(self._redis, job_id)):
            flag.set()
        try:
            yield flag
        finally:
            with self._lock:
                self._flags.pop(job_id, None)

    def _hear(self, job_id: str) -> None:
        with self._lock:
            flag = self._flags.get(job_id)
            if flag is None:
                self._heard[job_id] = True
                if len(self._heard) > REMEMBERED_ABORTS:
                    self._heard.popitem(last=False)
        if flag is not None:
            flag.set()

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
                self._subscribed_at = None
                log.warning("abort listener lost Redis (%s: %s); reconnecting", type(error).__name__, error)
                time.sleep(0.5)

    def _catch_up(self) -> None:
        """Aborts broadcast while nobody listened left their abort keys."""
        with self._lock:
            job_ids = list(self._flags)
        for job_id in jobqueue.aborted_among(self._redis, job_ids):
            flag = self._flags.get(job_id)
            if flag is not None:
                flag.set()

    def _listen(self) -> None:
        pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(abort_channel())
        pubsub.get_message(timeout=5)  # the subscribe confirmation
        self._subscribed_at = time.monotonic()
        self._catch_up()
        self._listening.set()
        for message in pubsub.listen():
            if message["type"] == "message":
                self._hear(message["data"].decode())
