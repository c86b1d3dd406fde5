"""One request's job: subscribe, enqueue, read its events, abort if abandoned.

Order matters: subscribe (and wait for Redis to confirm) before enqueueing,
so no event can be published before someone listens. If the client leaves
before the job finished, the job is aborted: a queued job is dropped before
it starts, a running one stops within a token.
"""
from __future__ import annotations

import time
import uuid
from typing import Iterator

from gevent.queue import Empty

from app.disconnect import DisconnectWatch
from app.errors import ApiError, ClientGone
from app.relay import CLOSED, RelayUnavailable, Subscription
from app.services import Services
from workers.channels import events_channel, send_abort
from workers.contract import DoneEvent, ErrorEvent, Event, Job, StartedEvent, decode_event

Result = DoneEvent | ErrorEvent


def new_job_id() -> str:
    return uuid.uuid4().hex


class JobRun:
    def __init__(self, services: Services, job: Job, environ: dict):
        self.job = job
        self._services = services
        self._environ = environ
        self._subscription: Subscription | None = None
        self._watch: DisconnectWatch | None = None
        self.finished = False
        self.client_gone = False

    def start(self, queue: str) -> "JobRun":
        settings = self._services.settings
        try:
            self._subscription = self._services.relay.subscribe(
                events_channel(self.job.id), settings.subscribe_timeout_seconds
            )
        except RelayUnavailable as error:
            raise ApiError(503, f"the job queue is unavailable: {error}") from None
        self.job.enqueued_at = time.time()
        self._services.enqueue(self.job, queue)
        self._watch = DisconnectWatch(self._environ, self._on_disconnect).start()
        return self

    def _on_disconnect(self) -> None:
        self.client_gone = True
        if self._subscription is not None:
            self._subscription.close()

    def next_event(self) -> Event:
        timeout = self._services.settings.event_timeout_seconds
        try:
            payload = self._subscription.messages.get(timeout=timeout)
        except Empty:
            return ErrorEvent(message=f"the job sent nothing for {timeout:.0f} s; giving up", status=504)
        if payload is CLOSED:
            if self.client_gone:
                raise ClientGone()
            return ErrorEvent(message="lost the connection to the job queue", status=502)
        return decode_event(payload)

    def events(self) -> Iterator[Event]:
        """The job's text events, ending with its DoneEvent or ErrorEvent."""
        while not self.finished:
            event = self.next_event()
            if isinstance(event, StartedEvent):
                continue
            self.finished = isinstance(event, (DoneEvent, ErrorEvent))
            yield event

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
