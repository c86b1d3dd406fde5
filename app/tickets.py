"""How this web process has a job's ticket sent (jobqueue.submit): through
Celery (queue_config), on one producer held for the process, those of
requests submitted together in one round trip; and beside the job's
queueing while the queue's jobs need tickets (slots are idle), so that the
ticket costs the request no round trip of its own (a worker's take marks a
ticket that overtakes its job, and the job's queueing then asks for another:
jobqueue.submit)."""
from __future__ import annotations

from typing import Callable

import gevent

from queue_config import HeldProducer, Ticket


class Tickets:
    def __init__(self, publish: Callable[[list[Ticket]], None] | None = None):
        self._publish = publish or HeldProducer().send_tickets
        self._pending: list[Ticket] = []
        self._sending = False
        self._needed: dict[str, bool] = {}  # per Celery queue: whether its last job needed a ticket

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

    def beside(self, queue: str, pool: str, job_id: str) -> Callable[[], None] | None:
        """If the queue's last job needed a ticket, send this one from a
        greenlet of its own, which runs once the caller waits on Redis: the
        job's queueing is written first, and the ticket goes out while Redis
        runs it (a slot that takes the ticket before the job is queued leaves
        a mark, and the queueing asks for another: jobqueue.submit). Returns
        what waits for the send and raises its error; None if not sent."""
        if not self._needed.get(queue, True):
            return None
        sending = gevent.spawn(self._send_catching, queue, pool, job_id)

        def wait() -> None:
            error = sending.get()
            if error is not None:
                raise error
        return wait

    def learn(self, queue: str, needed: bool) -> None:
        self._needed[queue] = needed

    def _send_catching(self, queue: str, pool: str, job_id: str) -> Exception | None:
        """The send's error as its result: a refused job's ticket is never
        waited for, and its failure is not worth a traceback."""
        try:
            self.send(queue, pool, job_id)
        except Exception as error:
            return error
        return None
