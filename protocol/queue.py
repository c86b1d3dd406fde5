"""Queue names and the task name: how the web process reaches a worker
without importing it (it sends tickets by task name)."""
from __future__ import annotations

# A ticket: "a free slot may take a job of this pool" (jobqueue/fairqueue.py).
TAKE_TASK = "switchboard.take"


def completion_queue(pool: str) -> str:
    """Tickets for code-completion jobs of a pool wait here, polled before the
    pool's chat queue: editors need them fast and abandon them on every
    keystroke."""
    return f"{pool}-completion"


def ticket_queue(pool: str, klass: str) -> str:
    """The Celery queue (a Redis list: kombu's at priority 0) where a job of
    this class ("completion" or "chat") brings its ticket."""
    return completion_queue(pool) if klass == "completion" else pool


def direct_queue(worker_id: str) -> str:
    """A worker's own queue: tickets for a job handed to it (it is idle and
    can run the job's model, or holds the person's prompt cache)."""
    return f"direct.{worker_id}"


def is_direct_queue(queue: str) -> bool:
    return queue.startswith("direct.")


# A field of a worker's presence: its take marks a ticket that came before
# its job (jobqueue/lua/fair_take.lua). Every worker since e3516a2 does; the
# previous release's web processes (1e6e35f) send a ticket beside the job's
# queueing only while every live worker's presence says so.
MARKS_EARLY_TICKETS = "marks_early_tickets"
