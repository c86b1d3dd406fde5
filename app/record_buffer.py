"""This web process's request-log records on their way to Redis
(ledger/request_log.py): a request only hands its record over, and a
greenlet writes it within LINGER_SECONDS, off the request's path, with every
record that gathered meanwhile (a group commit: one round trip and one trim
for them all); what is left at shutdown is written then (gunicorn's
worker_exit). Redis away: the batch is dropped with a
warning (the request log is a record for operators; usage, which bills, is
counted apart)."""
from __future__ import annotations

import logging

import gevent
from redis import Redis
from redis.exceptions import RedisError

from ledger import request_log

log = logging.getLogger(__name__)
# How long a record waits for others to share its write: at one client's pace a write then carries a handful
# (a write per record cost the web process 10% of its CPU on short chats), and a record is readable within it.
LINGER_SECONDS = 0.1


class RecordBuffer:
    def __init__(self, redis: Redis, settings):
        self._redis, self._settings = redis, settings
        self._pending: list[tuple[dict, dict | None]] = []
        self._writer: gevent.Greenlet | None = None

    def add(self, record: dict, body: dict | None) -> None:
        self._pending.append((record, body))
        if self._writer is None:
            self._writer = gevent.spawn_later(LINGER_SECONDS, self._write_while_any)

    def _write_while_any(self) -> None:
        try:
            while self.flush():
                pass
        finally:
            self._writer = None

    def drain(self, timeout: float = 5.0) -> None:
        """At shutdown, or for a test: the write under way finished, then what is left."""
        if self._writer is not None:
            self._writer.join(timeout)
        self.flush()

    def flush(self) -> int:
        """Write what gathered; how many records it was."""
        pending, self._pending = self._pending, []
        if not pending:
            return 0
        settings = self._settings
        try:
            with self._redis.pipeline(transaction=False) as pipe:
                for record, body in pending:
                    request_log.append(pipe, record, body, settings.request_log_body_days)
                request_log.trim(pipe, settings.request_log_days, settings.request_log_max)
                pipe.execute()
        except RedisError as error:
            log.warning("%d request-log records could not be written (%s)", len(pending), error)
        return len(pending)
