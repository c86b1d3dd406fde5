"""How this web process has a job's ticket sent (jobqueue.submit): through
Celery (queue_config.send_tickets), those of requests submitted together in
one round trip; and for every job while a worker of the previous release
runs. Such a worker takes tickets without telling the job queue (its
presence lacks protocol.queue.COUNTED_TICKETS), so the tickets counted on
their way would never come down, and drops surplus tickets itself. Its
presence is read at most every few seconds, by the request that finds the
reading old."""
from __future__ import annotations

import time
from typing import Callable

from redis import Redis

from protocol.presence import live_workers
from protocol.queue import COUNTED_TICKETS
from queue_config import Ticket, send_tickets

READ_EVERY_SECONDS = 3.0


class Tickets:
    def __init__(self, redis: Redis, publish: Callable[[list[Ticket]], None] = send_tickets):
        self._redis, self._publish = redis, publish
        self._read_at = float("-inf")
        self._previous_release_runs = False
        self._pending: list[Ticket] = []
        self._sending = False

    def send(self, queue: str, pool: str, job_id: str) -> None:
        """Send the ticket now, or, while this process's greenlet sending
        tickets waits on Redis, leave it for that greenlet's next batch: under
        load, many requests' tickets go in one round trip. The caller whose
        greenlet sends hears a failure (its ticket in the batch); a ticket
        left to another's batch that fails is lost, and a free worker forgets
        it within seconds (jobqueue.forget_lost_tickets)."""
        self._pending.append((queue, pool, job_id))
        if self._sending:
            return
        self._sending = True
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                self._publish(batch)
        finally:
            self._sending = False

    def for_every_job(self) -> bool:
        now = time.monotonic()
        if now - self._read_at > READ_EVERY_SECONDS:
            self._read_at = now
            workers = live_workers(self._redis)
            self._previous_release_runs = any(w.get("tickets") != COUNTED_TICKETS for w in workers)
        return self._previous_release_runs
