"""What this web process owes Redis: a request's end it could not write
while Redis was away (a restart, a failover), written once Redis is back.

A request's end (jobqueue.withdraw) frees its queue place and its person's
slot, and counts its outcome; the error its client was told counts in
place of an answer its worker had counted that never reached it
(ledger/lua/count_told_error.lua). Dropped, that end would leave the answer
counted, and a slot held until the process's lease lapses. A greenlet
writes what is owed every RETRY_SECONDS until Redis takes it; an end still
unwritten after OWED_SECONDS is given up (logged): by then its job's record
may be gone, and writing it would count the request a second time. At most
MAX_OWED wait; beyond that the oldest is given up. What is owed when the
process exits is lost, as is everything else it held (its lease lapses)."""
from __future__ import annotations

import logging
import time
from collections import deque
from typing import Callable

import gevent
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

RETRY_SECONDS = 0.5
OWED_SECONDS = 60.0  # well inside a job record's lifetime (protocol.keys.RECORD_TTL_SECONDS)
MAX_OWED = 10_000


class OwedWrites:
    def __init__(self, retry_seconds: float = RETRY_SECONDS, owed_seconds: float = OWED_SECONDS,
                 max_owed: int = MAX_OWED):
        self._retry, self._owed_for = retry_seconds, owed_seconds
        self._owed: deque[tuple[float, str, Callable[[], object]]] = deque(maxlen=max_owed)
        self._writer: gevent.Greenlet | None = None

    def __len__(self) -> int:
        return len(self._owed)

    def owe(self, what: str, write: Callable[[], object]) -> None:
        """`write` raised RedisError: retry it until Redis takes it (`what`
        names it in the log)."""
        if len(self._owed) == self._owed.maxlen:
            log.warning("%s given up: too many writes wait for Redis", self._owed[0][1])
        self._owed.append((time.monotonic(), what, write))
        if self._writer is None:
            self._writer = gevent.spawn(self._write_until_paid)

    def _write_until_paid(self) -> None:
        try:
            while self._owed:
                gevent.sleep(self._retry)
                self.pay()
        finally:
            self._writer = None

    def pay(self) -> None:
        """Write what is owed, oldest first, until Redis refuses one again."""
        while self._owed:
            since, what, write = self._owed[0]
            if time.monotonic() - since > self._owed_for:
                log.warning("%s given up: Redis was away for over %g s", what, self._owed_for)
                self._owed.popleft()
                continue
            try:
                write()
            except RedisError:
                return
            except Exception:  # noqa: BLE001 - one bad write must not hold the rest back
                log.exception("%s failed", what)
            self._owed.popleft()
