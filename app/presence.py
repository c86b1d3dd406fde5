"""A web process's lease in Redis, renewed every second by a greenlet while
the process lives. Its jobs carry its id: when the process dies (OOM,
SIGKILL, a worker timeout), the lease lapses within seconds, admission frees
its people's slots and queue places, and workers abort its jobs (nobody
reads them any more). The same happens at once to the jobs of an identity
its relay gave up after losing Redis. The lease holds the number of
streams the process relays (/metrics sums them)."""
from __future__ import annotations

import logging

import gevent
from gevent.lock import Semaphore
from redis import Redis

from app.relay import Relay
from protocol.presence import batched, drop_web_lease, renew_web_lease

log = logging.getLogger(__name__)
RENEW_EVERY_SECONDS = 1.0


class WebLease:
    """The lease of the relay's identity, which changes after a Redis gap
    (app/relay.py): the new one's is taken at once, the old ones' dropped."""

    def __init__(self, relay: Relay):
        self._relay = relay
        self._held: str | None = None  # the identity last renewed
        self._greenlet = None
        self._lock = Semaphore()

    @property
    def web_id(self) -> str:
        return self._relay.web_id

    def ensure_held(self, redis: Redis) -> str:
        """The relay's identity, its lease renewed now if the renewing
        greenlet is not running yet (the first request after a fork) or the
        identity is new (a request after a gap)."""
        with self._lock:
            if self._greenlet is None or self._greenlet.dead or self._held != self._relay.web_id:
                self._renew(redis)
            if self._greenlet is None or self._greenlet.dead:
                self._greenlet = gevent.spawn(self._renew_forever, redis)
        return self._held

    def _renew(self, redis: Redis) -> None:
        current, retired = self._relay.web_id, list(self._relay.retired)
        with batched(redis) as pipe:
            renew_web_lease(pipe, current, self._relay.stream_count)
            for web_id in retired:
                drop_web_lease(pipe, web_id)
        self._held = current
        del self._relay.retired[:len(retired)]

    def _renew_forever(self, redis: Redis) -> None:
        while True:
            gevent.sleep(RENEW_EVERY_SECONDS)
            try:
                with self._lock:
                    self._renew(redis)
            except Exception as error:  # noqa: BLE001 - must outlive a Redis restart
                log.warning("web lease renewal failed: %s", error)
