"""Queue names and the task name: how the web process reaches a worker
without importing it (it enqueues by name)."""
from __future__ import annotations

RUN_JOB_TASK = "switchboard.run_job"


def completion_queue(pool: str) -> str:
    """Code-completion jobs of a pool wait here, polled before the pool's
    chat queue: editors need them fast and abandon them on every keystroke."""
    return f"{pool}-completion"
