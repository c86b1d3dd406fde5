"""One request's job: admit, subscribe, enqueue, read its events, abort if
abandoned.

Order matters: subscribe (and wait for Redis to confirm) before enqueueing,
so no event can be published before someone listens. If the client leaves
before the job finished, the job is aborted: a queued job is dropped before
it starts, a running one stops within a token. While waiting, the run
yields KEEPALIVE markers (for streams), notices a worker that died (its
heartbeat stops) and gives up on a job no worker started in time.
"""
from __future__ import annotations

import time
import uuid
from typing import Iterator

from gevent.queue import Empty
from redis.exceptions import RedisError

from app.disconnect import DisconnectWatch
from app.errors import ApiError, ClientGone
from app.limits import admit, release
from app.relay import CLOSED, RelayUnavailable, Subscription
from app.services import Services
from workers.channels import events_channel, record_state, send_abort, worker_lost
from workers.contract import DoneEvent, ErrorEvent, Event, Job, StartedEvent, TextEvent, decode_event, is_text_payload

KEEPALIVE = object()  # yielded by JobRun.events(keepalive=True) while the job is silent


def new_job_id() -> str:
    return uuid.uuid4().hex


class JobRun:
    def __init__(self, services: Services, job: Job, environ: dict, key_name: str, limits: dict):
        self.job = job
        self._services = services
        self._environ = environ
        self._key_name = key_name
        self._limits = limits
        self._subscription: Subscription | None = None
        self._watch: DisconnectWatch | None = None
        self._admitted = False
        self._last_event = self._last_keepalive = time.monotonic()
        self.started = False
        self.finished = False
        self.client_gone = False

    def start(self, queue: str, pool: str) -> "JobRun":
        """Admission runs while Redis confirms the subscription (two round
        trips overlapped); the job is enqueued once both are done."""
        settings, redis, relay = self._services.settings, self._services.redis, self._services.relay
        stale_after = settings.max_queue_wait_seconds + settings.event_timeout_seconds
        try:
            subscription = relay.subscribe(events_channel(self.job.id), settings.subscribe_timeout_seconds)
            try:
                admit(redis, self._key_name, self.job.id, pool, stale_after=stale_after, **self._limits)
            except BaseException:
                relay.unsubscribe(subscription)
                raise
            self._admitted = True
            relay.confirm(subscription, settings.subscribe_timeout_seconds)
            self._subscription = subscription
        except RelayUnavailable as error:
            raise ApiError(503, f"the job queue is unavailable: {error}") from None
        self.job.enqueued_at = time.time()
        self.job.expires_at = self.job.enqueued_at + settings.max_queue_wait_seconds
        self._services.enqueue(self.job, queue)
        self._watch = DisconnectWatch(self._environ, self._on_disconnect).start()
        return self

    def _on_disconnect(self) -> None:
        self.client_gone = True
        if self._subscription is not None:
            self._subscription.close()

    def _wait(self, keepalive: bool):
        """The next payload, or KEEPALIVE, or an ErrorEvent if waiting failed."""
        settings = self._services.settings
        poll = min(settings.keepalive_seconds if keepalive else 3600, settings.heartbeat_timeout_seconds)
        while True:
            try:
                payload = self._subscription.messages.get(timeout=poll)
                self._last_event = time.monotonic()
                return payload
            except Empty:
                pass
            now = time.monotonic()
            idle = now - self._last_event
            if not self.started and time.time() > self.job.expires_at + 1:
                return ErrorEvent(message=f"no worker started the job within {settings.max_queue_wait_seconds:g} s",
                                  status=503)
            if self.started and worker_lost(self._services.redis, self.job.id):
                record_state(self._services.redis, self.job.id, status="finished", reason="error", error="worker lost")
                return ErrorEvent(message="the worker running this job stopped; try again", status=502)
            if idle > settings.event_timeout_seconds:
                return ErrorEvent(message=f"the job sent nothing for {idle:.0f} s; giving up", status=504)
            if keepalive and now - max(self._last_event, self._last_keepalive) >= settings.keepalive_seconds:
                self._last_keepalive = now
                return KEEPALIVE

    def next_event(self, keepalive: bool = False):
        try:
            payload = self._wait(keepalive)
        except RedisError:
            return ErrorEvent(message="lost the connection to the job queue", status=502)
        if payload is KEEPALIVE or isinstance(payload, ErrorEvent):
            return payload
        if payload is CLOSED:
            if self.client_gone:
                raise ClientGone()
            return ErrorEvent(message="lost the connection to the job queue", status=502)
        return decode_event(payload)

    def events(self, keepalive: bool = False) -> Iterator[Event]:
        """The job's events after it started, ending with its DoneEvent or
        ErrorEvent; KEEPALIVE markers in between if asked for. Text events
        already waiting are merged into one (one frame, one write)."""
        while not self.finished:
            event = self.next_event(keepalive)
            if isinstance(event, StartedEvent):
                self.started = True
                continue
            if isinstance(event, TextEvent):
                event = self._merge_waiting_text(event)
            self.finished = isinstance(event, (DoneEvent, ErrorEvent))
            yield event

    def _merge_waiting_text(self, event: TextEvent) -> TextEvent:
        waiting, texts = self._subscription.messages, [event.text]
        while not waiting.empty() and waiting.peek() is not CLOSED and is_text_payload(waiting.peek()):
            texts.append(decode_event(waiting.get()).text)
        return event if len(texts) == 1 else TextEvent(text="".join(texts))

    def close(self) -> None:
        """Idempotent; aborts the job unless it finished."""
        if self._watch is not None:
            self._watch.stop()
            self._watch = None
        if self._subscription is not None:
            if not self.finished:
                send_abort(self._services.redis, self.job.id)
            self._services.relay.unsubscribe(self._subscription)
            self._subscription = None
        if self._admitted:
            release(self._services.redis, self._key_name, self.job.id)
            self._admitted = False
