"""A request's job, top to bottom: it listens for its events, is submitted (admission, the fair queue, a wake-up),
waits for its first event (an error before any text gets a real status), and is closed (aborted if its client left
first), telling its request's record (app/exchange.py). Below: app/asker.py, app/job_events.py, jobqueue/."""
from __future__ import annotations

import itertools
import logging
from functools import partial
from typing import Iterator

from flask import g, request
from redis.exceptions import RedisError

import jobqueue
from app import asker
from app.access_log import job_observers
from app.exchange import UNRECORDED, Exchange
from app.job_events import JobEvents
from app.services import Services, services
from app.streaming import Observer
from catalog.registry import ModelEntry
from protocol.contract import Job
from protocol.events import DoneEvent, ErrorEvent, Event, UnknownEvent

log = logging.getLogger(__name__)


def submit_job(job: Job, entry: ModelEntry, watch_client: bool = True) -> JobRun:
    """Admit and queue the job (or refuse it, with its status); a code completion supersedes the person's previous
    one where the model opts in (`supersede = true`). A WebSocket's reader calls `client_left` itself."""
    shared = services()
    asker.check_budget(shared)
    asker.fit_terms(shared, job, entry)
    run = JobRun(shared, job, asker.terms(shared), g.get("exchange") or UNRECORDED)
    try:
        run.start(asker.placement(shared, entry, job), asker.limits(shared), watch_client)
        if entry.supersede and asker.is_code_completion(job):
            jobqueue.supersede(shared.redis, asker.client_identity(shared.keys.enabled), entry.name, job)
    except BaseException:
        run.close()
        raise
    return run


def start_job(job: Job, entry: ModelEntry, stream: bool = False, watch_client: bool = True
              ) -> tuple[JobRun, Iterator[Event]]:
    """Submit the job and wait for its first event (an error: its status)."""
    run = submit_job(job, entry, watch_client)
    try:
        events = run.events(keepalive=stream)  # a stream starts at once if the job keeps it waiting
        first = next(events)
        if isinstance(first, ErrorEvent):
            raise first.error()
    except BaseException:
        run.close()
        raise
    run.observers += job_observers(entry.name, bool(job.server_tools))
    return run, itertools.chain([first], events)


class JobRun:
    def __init__(self, services: Services, job: Job, terms: jobqueue.Asker, exchange: Exchange = UNRECORDED):
        self.job, self._services, self._asker, self._pool = job, services, terms, ""
        self._reader: JobEvents | None = None  # once started
        self.observers: list[Observer] = []
        self.finished, self.final = False, None  # and the DoneEvent or ErrorEvent that ended it
        self.exchange = exchange  # its request's record and span

    def start(self, where: jobqueue.Placement, limits: jobqueue.Limits, watch_client: bool = True) -> JobRun:
        """Listen on its reply channel (under this process), then submit it."""
        settings, redis, relay = self._services.settings, self._services.redis, self._services.relay
        job, self._pool = self.job, where.pool
        subscription = relay.listen(job.id, settings.subscribe_timeout_seconds)  # or RelayUnavailable: a 503
        asker.address(job, subscription.web_id, self._asker.person, settings.max_queue_wait_seconds)
        job.traceparent = self.exchange.traceparent  # its request's trace goes with it
        self.exchange.job_started(job)
        try:
            self._services.lease.ensure_held(redis)
            jobqueue.submit(redis, job, self._asker, limits, where, self._services.wakeups)
        except BaseException:
            relay.forget(subscription)
            raise
        self._reader = JobEvents(subscription, job, settings, redis, request.environ if watch_client else None)
        self._services.open_runs.add(self)
        return self

    def events(self, keepalive: bool = False) -> Iterator[Event]:
        """Its events, to its DoneEvent or ErrorEvent (KeepAliveEvents if asked)."""
        while not self.finished:
            event = self._reader.next(keepalive)
            if isinstance(event, UnknownEvent):  # a newer worker's event: nothing this version shows
                continue
            self.finished = isinstance(event, (DoneEvent, ErrorEvent))
            self.final = event if self.finished else None
            self.exchange.saw(event)
            yield event

    def has_waiting(self) -> bool:
        return self._reader is not None and self._reader.has_waiting()

    def cut(self, message: str) -> None:
        """End the stream now with an in-band error (shutdown), aborting the job."""
        if self._reader is not None and not self.finished:
            jobqueue.abort(self._services.redis, self.job.id)
            self._reader.cut(message)

    def client_left(self) -> None:
        if self._reader is not None:
            self._reader.client_left()

    def close(self) -> None:
        """Idempotent: the job queue lets go of the job (aborted unless it ended, withdrawn unless its worker
        answered it; with Redis away, once it is back: app/owed.py)."""
        self._services.open_runs.discard(self)
        if self._reader is not None:
            self._reader.stop_watching()
            self._services.relay.forget(self._reader.subscription)
            end = partial(jobqueue.withdraw, self._services.redis, self.job, self._pool, self._reader.started,
                          self.final)
            try:
                end()
            except RedisError as error:
                log.warning("job %s: its end is written once Redis is back (%s)", self.job.id, error)
                self._services.owed.owe(f"job {self.job.id}: its end", end)
            self._reader = None
        self.exchange.job_closed(self.job.id, self.finished)
        observers, self.observers = self.observers, []
        for observer in observers:
            getattr(observer, "close", lambda: None)()

