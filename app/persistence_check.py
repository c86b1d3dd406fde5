"""Whether this web process's Redis persists, asked when the process starts
and again at most once a minute while /readyz or the console shows it. A
Redis that persists nothing is said once in the log, as a warning with the
line that fixes it (ledger/persistence.py)."""
from __future__ import annotations

import logging
import time

import gevent
from redis import Redis

from ledger.persistence import FIX, Persistence, persistence

log = logging.getLogger("switchboard.redis")
ASK_EVERY_SECONDS = 60.0


class PersistenceCheck:
    def __init__(self, every: float = ASK_EVERY_SECONDS):
        self._every = every
        self._found: Persistence | None = None
        self._asked_at = float("-inf")
        self._warned = False

    def current(self, redis: Redis) -> Persistence:
        if time.monotonic() - self._asked_at >= self._every:
            self._found, self._asked_at = persistence(redis), time.monotonic()
            if self._found.mode == "unknown" and "unreachable" in self._found.detail:
                self._asked_at = float("-inf")  # ask again once Redis answers
            self._warn_once(self._found)
        return self._found

    def _warn_once(self, found: Persistence) -> None:
        if found.forgets and not self._warned:
            self._warned = True
            log.warning("Redis persists nothing: a restart of it loses every person's usage and budget, the "
                        "stored responses and the queued jobs. Fix: %s", FIX)


def check_at_start(worker) -> None:
    """Called in each gunicorn worker (post_worker_init): asked beside the
    first requests, never in their way."""
    services = worker.wsgi.extensions["switchboard"]
    gevent.spawn(services.persistence.current, services.redis)
