"""The Celery task's process-wide set-up (workers/tasks.py)."""
from __future__ import annotations

import threading

from celery.backends.base import DisabledBackend

from protocol.queue import TAKE_TASK
from queue_config import app
from workers.tasks import _share_result_backend


def _backend_seen_by_another_thread():
    seen = []
    thread = threading.Thread(target=lambda: seen.append(app.tasks[TAKE_TASK].backend))
    thread.start()
    thread.join()
    return seen[0]


def test_every_task_greenlet_shares_one_disabled_result_backend():
    """Celery keeps the backend in a thread-local (greenlet-local under
    gevent): without sharing, each task's new greenlet built one of its own."""
    task = app.tasks[TAKE_TASK]
    try:
        assert _backend_seen_by_another_thread() is not _backend_seen_by_another_thread()  # Celery's own way
        _share_result_backend(app)
        shared = _backend_seen_by_another_thread()
        assert isinstance(shared, DisabledBackend) and _backend_seen_by_another_thread() is shared
    finally:
        task.backend = None  # back to Celery's lookup for the other tests
