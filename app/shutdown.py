"""Graceful shutdown of a web process: on SIGTERM gunicorn stops accepting
and lets open streams run for the grace period (SWITCHBOARD_GRACEFUL_TIMEOUT),
then cuts them. Just before that, every stream still open is ended with an
in-band error in its dialect ("the server is shutting down") and its job is
aborted, so no client is cut mid-chunk without a word and no job runs on for
nobody."""
from __future__ import annotations

import gevent

from app.services import Services

# Streams are ended this long before gunicorn's own deadline (its arbiter
# kills the worker at the same moment).
MARGIN_SECONDS = 2.0
SHUTTING_DOWN = "the server is shutting down and ended this stream at the end of its grace period; try again"


def watch_for_shutdown(worker) -> None:
    """Called in each gunicorn worker (post_worker_init)."""
    gevent.spawn(_watch, worker)


def _watch(worker) -> None:
    while worker.alive:
        gevent.sleep(0.2)
    shared = worker.wsgi.extensions["switchboard"]
    for session in list(shared.open_sockets):  # an idle WebSocket would hold the worker for the grace period
        session.stop()
    gevent.sleep(max(worker.cfg.graceful_timeout - MARGIN_SECONDS, 0.5))
    end_open_streams(shared, SHUTTING_DOWN)


def end_open_streams(services: Services, message: str) -> int:
    runs = list(services.open_runs)
    for run in runs:
        run.cut(message)
    return len(runs)
