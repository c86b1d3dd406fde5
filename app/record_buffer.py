"""This web process's request-log records on their way to Redis
(protocol/requestlog.py): a request only hands its record over; a greenlet
writes what gathered, every FLUSH_SECONDS, in one round trip with one trim,
off every request's path; and at shutdown (gunicorn's worker_exit). Redis
away: the batch is dropped with a warning (the request log is a record for
operators; usage, which bills, is counted apart)."""
from __future__ import annotations

import logging

import gevent
from redis import Redis
from redis.exceptions import RedisError

from protocol import requestlog

log = logging.getLogger(__name__)
FLUSH_SECONDS = 0.25


class RecordBuffer:
    def __init__(self, redis: Redis, settings):
        self._redis, self._settings = redis, settings
        self._pending: list[tuple[dict, dict | None]] = []
        self._flusher: gevent.Greenlet | None = None

    def add(self, record: dict, body: dict | None) -> None:
        self._pending.append((record, body))
        if self._flusher is None:
            self._flusher = gevent.spawn_later(FLUSH_SECONDS, self.flush)

    def flush(self) -> int:
        """Write what gathered; how many records it was."""
        pending, self._pending, self._flusher = self._pending, [], None
        if not pending:
            return 0
        settings = self._settings
        try:
            with self._redis.pipeline(transaction=False) as pipe:
                for record, body in pending:
                    requestlog.append(pipe, record, body, settings.request_log_body_days)
                requestlog.trim(pipe, settings.request_log_days, settings.request_log_max)
                pipe.execute()
        except RedisError as error:
            log.warning("%d request-log records could not be written (%s)", len(pending), error)
        return len(pending)
