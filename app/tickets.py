"""How this web process has a job's ticket sent (jobqueue.submit): through
Celery (queue_config), on one producer held for the process, those of
requests submitted together in one round trip."""
from __future__ import annotations

from typing import Callable

from queue_config import HeldProducer, Ticket


class Tickets:
    def __init__(self, publish: Callable[[list[Ticket]], None] | None = None):
        self._publish = publish or HeldProducer().send_tickets
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
