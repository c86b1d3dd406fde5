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

