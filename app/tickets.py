"""How this web process has a job's ticket sent (jobqueue.submit): through
Celery (queue_config.send_ticket), and for every job while a worker of the
previous release runs. Such a worker takes tickets without telling the job
queue (its presence lacks protocol.queue.COUNTED_TICKETS), so the tickets
counted on their way would never come down, and drops surplus tickets
itself. Its presence is read at most every few seconds, by the request that
finds the reading old."""
from __future__ import annotations

import time

from redis import Redis

from protocol.presence import live_workers
from protocol.queue import COUNTED_TICKETS
from queue_config import send_ticket

READ_EVERY_SECONDS = 3.0


class Tickets:
    def __init__(self, redis: Redis):
        self._redis = redis
        self._read_at = float("-inf")
        self._previous_release_runs = False
        self.send = send_ticket

    def for_every_job(self) -> bool:
        now = time.monotonic()
        if now - self._read_at > READ_EVERY_SECONDS:
            self._read_at = now
            workers = live_workers(self._redis)
            self._previous_release_runs = any(w.get("tickets") != COUNTED_TICKETS for w in workers)
        return self._previous_release_runs
