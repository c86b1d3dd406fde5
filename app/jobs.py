"""The request lifecycle, top to bottom: choose the queue, listen, admit,
enqueue, wait for the first event, stream the events, close.

Order matters: the relay listens for the job's events before it is enqueued,
so no event can be published before someone listens. If the client leaves
before the job finished, the job is aborted: a queued job is dropped before
it starts, a running one stops within a token. While waiting, the run yields
KeepAliveEvents (for streams), notices a worker that died (its heartbeat
stops) and gives up on a job no worker started in time.
"""
from __future__ import annotations

import hashlib
import itertools
import time
import uuid
from typing import Iterator

from flask import g, request
from gevent.queue import Empty
from redis.exceptions import RedisError

from app.auth import current_key
from app.conversation_log import ConversationLog
from app.disconnect import DisconnectWatch
from app.errors import ApiError, ClientGone
from app.relay import CLOSED, RelayUnavailable, Subscription
from app.requestlog import server_tool_logger
from app.services import Services, services
from app.streaming import Observer
from catalog.kinds import backend_kind
from catalog.registry import ModelEntry
import jobqueue
from protocol import keys, usage
from protocol.commands import batched
from protocol.contract import (
    DoneEvent, ErrorEvent, Event, FinishReason, Job, KeepAliveEvent, TextEvent, UnknownEvent, decode_event,
    encode_event, is_text_payload,
)
from protocol.metrics import count_job

KEEPALIVE = KeepAliveEvent()


def new_job_id() -> str:
    return uuid.uuid4().hex


# --- queue choice and identity -------------------------------------------------------
def is_code_completion(job: Job) -> bool:
    return job.prompt is not None and bool(job.prompt.raw or job.prompt.suffix)


def klass_of(job: Job) -> str:
    """Code completions wait in their own class, served first (its tickets
    on the pool's priority queue: protocol.queue.ticket_queue)."""
    return "completion" if is_code_completion(job) else "chat"


def person(keys_enabled: bool) -> str:
    """Who is asking, for limits and fair shares: their key's name when keys
    are on (however it was sent), else their address."""
    return current_key().name if keys_enabled else f"address:{request.remote_addr}"


def client_identity(keys_enabled: bool) -> str:
    """Who is asking, for superseding: the person and their editor (the user
    agent). Never a different person's request."""
    who = f"{person(keys_enabled)}|{request.user_agent.string}"
    return hashlib.sha256(who.encode()).hexdigest()[:32]


def _waiting(own: Services, entry: ModelEntry) -> jobqueue.Waiting:
    key = current_key()
    return jobqueue.Waiting(person(own.keys.enabled), key.max_concurrent or own.settings.max_concurrent, key.weight,
                   serial=backend_kind(entry.backend).serial)


def _admission_limits(own: Services) -> jobqueue.Limits:
    key, settings = current_key(), own.settings
    return jobqueue.Limits(key.requests_per_minute or settings.requests_per_minute, settings.max_queue,
                           stale_after=settings.max_queue_wait_seconds + settings.event_timeout_seconds)


# --- one job's run -------------------------------------------------------------------
class JobRun:
    def __init__(self, services: Services, job: Job, environ: dict, waiting: jobqueue.Waiting, limits: jobqueue.Limits):
        self.job = job
        self._services = services
        self._environ = environ
        self._waiting = waiting
        self._limits = limits
        self._subscription: Subscription | None = None
        self._watch: DisconnectWatch | None = None
        self._admitted = False
        self._pool = ""
        self._last_event = self._last_keepalive = time.monotonic()
        self.observers: list[Observer] = []
        self.started = False
        self.finished = False
        self.final: Event | None = None  # the DoneEvent or ErrorEvent that ended it
        self.client_gone = False

    def start(self, klass: str, pool: str) -> "JobRun":
        """The relay listens for the job's events (on its reply channel,
        under this process); then, in one round trip, admission counts the
        job and, if admitted, it is queued in the pool's fair queue; a ticket
        goes to Celery unless one on its way will wake a slot for it."""
        settings, redis, relay = self._services.settings, self._services.redis, self._services.relay
        self.job.web_id, self._pool = self._services.lease.ensure_held(redis), pool
        self.job.reply_channel = keys.reply_channel(self.job.web_id, self.job.id)
        self.job.usage_of = self._waiting.person
        self.job.enqueued_at = time.time()
        self.job.expires_at = self.job.enqueued_at + settings.max_queue_wait_seconds
        tickets = self._services.tickets
        where = jobqueue.Placement(pool, klass, tickets.send, settings.queue_policy, tickets.for_every_job())
        try:
            subscription = relay.listen(self.job.id, settings.subscribe_timeout_seconds)
        except RelayUnavailable as error:
            raise ApiError(503, f"the job queue is unavailable: {error}") from None
        try:
            jobqueue.submit(redis, self.job, self._waiting, self._limits, where)
        except BaseException:
            relay.forget(subscription)
            raise
        self._admitted, self._subscription = True, subscription
        self._services.open_runs.add(self)
        self._watch = DisconnectWatch(self._environ, self._on_disconnect).start()
        return self

    def cut(self, message: str) -> None:
        """End the stream now with an in-band error (shutdown), aborting the job."""
        if self._subscription is not None and not self.finished:
            jobqueue.abort(self._services.redis, self.job.id)
            self._subscription.messages.put(encode_event(ErrorEvent(message=message, status=503)))

    def _on_disconnect(self) -> None:
        self.client_gone = True
        if self._subscription is not None:
            self._subscription.close()

    def _wait(self, keepalive: bool):
        """The next payload, or a KeepAliveEvent, or an ErrorEvent if waiting failed."""
        settings = self._services.settings
        poll = min(settings.keepalive_seconds if keepalive else 3600, settings.heartbeat_timeout_seconds)
        while True:
            try:
                payload = self._subscription.messages.get(timeout=poll)
                self._last_event = time.monotonic()
                return payload
            except Empty:
                pass
            trouble = self._check_while_silent(keepalive)
            if trouble is not None:
                return trouble

    def _check_while_silent(self, keepalive: bool) -> Event | None:
        settings, redis = self._services.settings, self._services.redis
        now = time.monotonic()
        idle = now - self._last_event
        if not self.started:  # no event yet: its state says whether a worker took it
            self.started = jobqueue.started(redis, self.job.id)
        if not self.started and time.time() > self.job.expires_at + 1:
            return ErrorEvent(message=f"no worker started the job within {settings.max_queue_wait_seconds:g} s",
                              status=503)
        if self.started and jobqueue.lost(redis, self.job.id):
            count_job(redis, self.job.model, "worker_lost", 0, None)
            return ErrorEvent(message="the worker running this job stopped; try again", status=502)
        if idle > settings.event_timeout_seconds:
            return ErrorEvent(message=f"the job sent nothing for {idle:.0f} s; giving up", status=504)
        if keepalive and now - max(self._last_event, self._last_keepalive) >= settings.keepalive_seconds:
            self._last_keepalive = now
            return KEEPALIVE
        return None

    def next_event(self, keepalive: bool = False) -> Event:
        try:
            payload = self._wait(keepalive)
        except RedisError:
            return ErrorEvent(message="lost the connection to the job queue", status=502)
        if isinstance(payload, (KeepAliveEvent, ErrorEvent)):
            return payload
        if payload is CLOSED:
            if self.client_gone:
                raise ClientGone()
            return ErrorEvent(message="lost the connection to the job queue", status=502)
        return decode_event(payload)

    def events(self, keepalive: bool = False) -> Iterator[Event]:
        """The job's events after it started, ending with its DoneEvent or
        ErrorEvent; KeepAliveEvents in between if asked for. Text events
        already waiting are merged into one (one frame, one write)."""
        while not self.finished:
            event = self.next_event(keepalive)
            if not isinstance(event, (KeepAliveEvent, ErrorEvent)):  # errors may be this process's own
                self.started = True  # its worker sent it, so its worker had started it
            if isinstance(event, UnknownEvent):  # a newer worker's event: nothing this version shows
                continue
            if isinstance(event, TextEvent):
                event = self._merge_waiting_text(event)
            self.finished = isinstance(event, (DoneEvent, ErrorEvent))
            if self.finished:
                self.final = event
            yield event

    def has_waiting(self) -> bool:
        """Whether the job's next event (or the end of the stream) has already arrived."""
        return self._subscription is not None and not self._subscription.messages.empty()

    def _merge_waiting_text(self, event: TextEvent) -> TextEvent:
        waiting, texts = self._subscription.messages, [event.text]
        while not waiting.empty() and waiting.peek() is not CLOSED and is_text_payload(waiting.peek()):
            texts.append(decode_event(waiting.get()).text)
        return event if len(texts) == 1 else TextEvent(text="".join(texts))

    def close(self) -> None:
        """Idempotent; aborts the job unless it finished; closes observers."""
        self._services.open_runs.discard(self)
        if self._watch is not None:
            self._watch.stop()
            self._watch = None
        if self._subscription is not None:
            if not self.finished:
                jobqueue.abort(self._services.redis, self.job.id)
            self._services.relay.forget(self._subscription)
            self._subscription = None
        if self._admitted and not self._counted_by_worker():
            redis = self._services.redis
            with batched(redis) as pipe:  # one round trip for what it leaves
                unrun = jobqueue.withdraw(redis, pipe, self.job, self._waiting.person, self._pool, self.started)
                if unrun is not None:
                    count_job(pipe, self.job.model, unrun, 0, None)
                self._record_usage(pipe)
        self._admitted = False
        observers, self.observers = self.observers, []
        for observer in observers:
            getattr(observer, "close", lambda: None)()

    def _counted_by_worker(self) -> bool:
        """Its worker finished it: that freed its place and slot, and counted
        its usage with the final event (no round trip here)."""
        return isinstance(self.final, DoneEvent) and self.final.usage_counted

    def _record_usage(self, pipe) -> None:
        """The person's usage of the day, and the error list."""
        final, person = self.final, self._waiting.person
        outcome = "ok" if isinstance(final, DoneEvent) and final.reason != FinishReason.ABORTED else \
            "error" if isinstance(final, ErrorEvent) else "abort"
        used = final.usage if isinstance(final, DoneEvent) else None
        usage.record_request(pipe, person, self.job.model, used.prompt_tokens if used else 0,
                             used.completion_tokens if used else 0, outcome, self.job.id)
        if isinstance(final, ErrorEvent):
            usage.record_error(pipe, person, self.job.model, final.message)


def check_budget(own: Services) -> None:
    """A key's daily token budget, counted across every web process (the
    tokens of requests still running count once they end)."""
    budget = current_key().daily_tokens
    if budget is None:
        return
    used = usage.tokens_today(own.redis, person(own.keys.enabled))
    if used >= budget:
        wait = usage.seconds_to_midnight()
        raise ApiError(429, f"daily token budget of {budget} tokens used up ({used} used today); it resets at "
                            f"00:00 UTC, in {wait // 3600} h {wait % 3600 // 60} min", retry_after=wait)


def start_job(job: Job, entry: ModelEntry, stream: bool = False) -> tuple[JobRun, Iterator[Event]]:
    """Enqueue the job and wait for its first result, so that an error before
    any text (a prompt too long, a failed model) still gets a real status.
    On a model that opts in (registry `supersede = true`), a code completion
    supersedes the same person's previous completion for the model (only once
    admitted and queued: a refused request cancels nothing)."""
    own = services()
    check_budget(own)
    job.server_tools = [server for server in entry.mcp_servers if current_key().may_use_server(server)]
    run = JobRun(own, job, request.environ, _waiting(own, entry), _admission_limits(own))
    try:
        run.start(klass_of(job), entry.pool)
        if entry.supersede and is_code_completion(job):
            jobqueue.supersede(own.redis, client_identity(own.keys.enabled), entry.name, job)
        events = run.events(keepalive=stream)  # a stream starts at once if the job keeps it waiting
        first = next(events)
    except BaseException:
        run.close()
        raise
    if isinstance(first, ErrorEvent):
        run.close()
        raise first.error()
    if own.settings.conversation_log_dir is not None:
        run.observers.append(ConversationLog(own.settings.conversation_log_dir, {
            "request_id": g.get("request_id"), "key": current_key().name, "path": request.path,
            "model": entry.name, "request": g.get("request_body")}))
    if job.server_tools:
        run.observers.append(server_tool_logger(g.get("request_id"), current_key().name))
    return run, itertools.chain([first], events)
