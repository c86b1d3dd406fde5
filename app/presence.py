"""A web process's lease in Redis, renewed every second by a greenlet while
the process lives. Its jobs carry its id: when the process dies (OOM,
SIGKILL, a worker timeout), the lease lapses within seconds, admission frees
its people's slots and queue places, and workers abort its jobs (nobody
reads them any more). The lease holds the number of streams the process
relays (/metrics sums them)."""
from __future__ import annotations

import logging

import gevent
from gevent.lock import Semaphore
from redis import Redis

from app.relay import Relay
from protocol.presence import renew_web_lease

log = logging.getLogger(__name__)
RENEW_EVERY_SECONDS = 1.0


class WebLease:
    def __init__(self, web_id: str, relay: Relay):
        self.web_id = web_id
        self._relay = relay
        self._greenlet = None
        self._lock = Semaphore()

    def ensure_held(self, redis: Redis) -> str:
        """The process's id, its lease renewed now if the renewing greenlet
        is not running yet (the first request after a fork)."""
        with self._lock:
            if self._greenlet is None or self._greenlet.dead:
                renew_web_lease(redis, self.web_id, self._relay.stream_count)
                self._greenlet = gevent.spawn(self._renew_forever, redis)
        return self.web_id

    def _renew_forever(self, redis: Redis) -> None:
        while True:
            gevent.sleep(RENEW_EVERY_SECONDS)
            try:
                renew_web_lease(redis, self.web_id, self._relay.stream_count)
            except Exception as error:  # noqa: BLE001 - must outlive a Redis restart
                log.warning("web lease renewal failed: %s", error)
