"""Liveness, published by every worker process once a second (see
jobqueue.keep_alive):

- each running job's `alive` key (it lapses after a few seconds), so a web
  process can tell a job whose worker was killed from one that is thinking;
- the worker itself with the queues it consumes, for /readyz.

With each beat it also checks the leases of the web processes holding its
running jobs: a job whose web process died is cancelled (nobody reads it).
And every MAINTENANCE_SECONDS it offers to do the cluster's maintenance
(folding old usage days: jobqueue.maintain), which one process does under a
lock, as rq's workers clean its registries.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from redis import Redis

import jobqueue
from protocol.presence import dead_webs
from workers.cancel import Cancel

log = logging.getLogger(__name__)
INTERVAL = 1.0
# A wake-up sent this long ago that no free slot took was lost (a free slot
# takes one within milliseconds).
LOST_WAKEUP_SECONDS = 5.0
MAINTENANCE_SECONDS = 60.0


class Heartbeat:
    def __init__(self, redis: Redis, worker_id: str):
        self._redis = redis
        self._worker_id = worker_id
        self._jobs: dict[str, tuple[str, Cancel | None]] = {}  # job id -> (its web process, its cancel)
        self.queues: list[str] = []
        self.slots = 0  # the worker's concurrency (for the operator's console)
        self.on_beat: Callable[[], None] | None = None  # more to refresh with each beat
        # Its slots run in this process (not prefork's children), so it knows
        # when one is free: then wake-ups it has not received were lost.
        self.counts_wakeups = False
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._maintained_at = -MAINTENANCE_SECONDS  # (time.monotonic(): its first beat offers)

    def start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._beat_forever, name="heartbeat", daemon=True)
                self._thread.start()

    def running(self, job_id: str, web_id: str = "", cancel: Cancel | None = None) -> "_Running":
        return _Running(self, job_id, web_id, cancel)

    def _beat_forever(self) -> None:
        while True:
            try:
                self.beat_once()
            except Exception as error:  # noqa: BLE001 - must outlive a Redis restart
                log.warning("heartbeat failed: %s", error)
            time.sleep(INTERVAL)

    def beat_once(self) -> None:
        presence = {"id": self._worker_id, "queues": self.queues, "slots": self.slots, "busy": len(self._jobs),
                    "beat_at": time.time()} if self.queues else None
        jobs = dict(self._jobs)
        jobqueue.keep_alive(self._redis, list(jobs), presence)
        if self.counts_wakeups and len(jobs) < self.slots:
            jobqueue.forget_lost_wakeups(self._redis, self.queues, time.time() - LOST_WAKEUP_SECONDS)
        dead = dead_webs(self._redis, {web for web, _ in jobs.values() if web})
        for job_id, (web_id, cancel) in jobs.items():
            if web_id in dead and cancel is not None and not cancel.is_set():
                log.warning("job %s: its web process %s is gone; aborting it", job_id, web_id)
                cancel.set()
        if self.on_beat is not None:  # whatever it fails, the beat's own work is done
            self.on_beat()
        self._maintain()  # last: the same

    def _maintain(self) -> None:
        if time.monotonic() - self._maintained_at < MAINTENANCE_SECONDS:
            return
        self._maintained_at = time.monotonic()
        folded = jobqueue.maintain(self._redis)
        if folded:
            log.info("folded the usage of %d past days (%s to %s)", len(folded), folded[-1], folded[0])


class _Running:
    """`with heartbeat.running(job_id):` beats for the job while it runs."""

    def __init__(self, heartbeat: Heartbeat, job_id: str, web_id: str, cancel: Cancel | None):
        self._heartbeat, self._job_id, self._entry = heartbeat, job_id, (web_id, cancel)

    def __enter__(self):
        self._heartbeat.start()
        self._heartbeat._jobs[self._job_id] = self._entry  # its first beat is its take's (jobqueue.take)
        return self

    def __exit__(self, *exc):
        self._heartbeat._jobs.pop(self._job_id, None)  # the runner deletes its key with the job's last writes
