"""A job's events as its web process waits for them on its subscription.

While the job is silent the reader looks after it: a keep-alive for a
stream that must not look dead, the job's record for whether a worker took
it (a worker's first event says so too), a worker that died (its heartbeat
stopped), a job no worker started in time, a job that sent nothing for too
long. Text events already waiting are merged into one (one frame, one write).
"""
from __future__ import annotations

import time

from gevent.queue import Empty
from redis import Redis
from redis.exceptions import RedisError

import jobqueue
from app.disconnect import DisconnectWatch
from app.errors import ClientGone
from app.relay import CLOSED, Subscription
from protocol.contract import Job
from protocol.events import (
    ErrorEvent, Event, KeepAliveEvent, TextEvent, decode_event, encode_event, is_text_payload,
)

KEEPALIVE = KeepAliveEvent()
# Redis went away (a restart, a failover): what the job sent meanwhile is
# lost, so its request ends; retryable, as any client takes a 503.
LOST_QUEUE = ErrorEvent(message="lost the connection to the job queue (Redis); try again", status=503,
                        retry_after=1)


class JobEvents:
    def __init__(self, subscription: Subscription, job: Job, settings, redis: Redis, environ: dict | None = None):
        """With the request's `environ`, a client that leaves ends the wait even while the job is silent."""
        self.subscription, self._job, self._settings, self._redis = subscription, job, settings, redis
        self.started = False  # a worker took the job
        self.client_gone = False
        self._last_event = self._last_keepalive = time.monotonic()
        self._watch = DisconnectWatch(environ, self.client_left).start() if environ is not None else None

    def next(self, keepalive: bool = False) -> Event:
        """The next event, a KeepAliveEvent, or an ErrorEvent if waiting failed."""
        try:
            payload = self._wait(keepalive)
        except RedisError:
            return LOST_QUEUE
        if isinstance(payload, (KeepAliveEvent, ErrorEvent)):
            return payload
        if payload is CLOSED:
            if self.client_gone:
                raise ClientGone()
            return LOST_QUEUE
        event = decode_event(payload)
        if not isinstance(event, ErrorEvent):  # (an error may be a superseding web process's)
            self.started = True  # its worker sent it, so its worker had started it
        return self._merge_waiting_text(event) if isinstance(event, TextEvent) else event

    def has_waiting(self) -> bool:
        """Whether the job's next event (or the end of the stream) has already arrived."""
        return not self.subscription.messages.empty()

    def client_left(self) -> None:
        """Its client left: the wait ends (ClientGone)."""
        self.client_gone = True
        self.subscription.close()

    def stop_watching(self) -> None:
        """Before the request's socket is reused or closed (app/disconnect.py)."""
        if self._watch is not None:
            self._watch.stop()
            self._watch = None

    def cut(self, message: str) -> None:
        """The next event is an in-band error (the server shuts down)."""
        self.subscription.messages.put(encode_event(ErrorEvent(message=message, status=503)))

    def _wait(self, keepalive: bool):
        poll = min(self._settings.keepalive_seconds if keepalive else 3600, self._settings.heartbeat_timeout_seconds)
        while True:
            try:
                payload = self.subscription.messages.get(timeout=poll)
                self._last_event = time.monotonic()
                return payload
            except Empty:
                pass
            trouble = self.check_while_silent(keepalive)
            if trouble is not None:
                return trouble

    def check_while_silent(self, keepalive: bool) -> Event | None:
        settings, job = self._settings, self._job
        if not self.started:
            self.started = jobqueue.started(self._redis, job.id)
        if not self.started and time.time() > job.expires_at + 1:
            return ErrorEvent(message=f"no worker started the job within {settings.max_queue_wait_seconds:g} s",
                              status=503)
        if self.started and jobqueue.lost(self._redis, job):
            return ErrorEvent(message="the worker running this job stopped; try again", status=502)
        now = time.monotonic()
        if now - self._last_event > settings.event_timeout_seconds:
            return ErrorEvent(message=f"the job sent nothing for {now - self._last_event:.0f} s; giving up",
                              status=504)
        if keepalive and now - max(self._last_event, self._last_keepalive) >= settings.keepalive_seconds:
            self._last_keepalive = now
            return KEEPALIVE
        return None

    def _merge_waiting_text(self, event: TextEvent) -> TextEvent:
        waiting, texts = self.subscription.messages, [event.text]
        while not waiting.empty() and waiting.peek() is not CLOSED and is_text_payload(waiting.peek()):
            texts.append(decode_event(waiting.get()).text)
        return event if len(texts) == 1 else TextEvent(text="".join(texts))
