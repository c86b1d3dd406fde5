"""A worker's job, from its take to its last write, top to bottom:

    run_job      its abort watched and its heartbeat beating while it runs
      refusal    a job this worker cannot run at all is answered at once
      _run       its model generates (workers/generate.py, rounds.py below it)
      _finish    what it leaves in Redis, in one round trip: its usage, its
                 last events, its record (jobqueue.finish), the loaded-model
                 note and the metrics

Failures become an error event: a client never waits on a job that died.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from redis.client import Pipeline

import jobqueue
from protocol.contract import CONTRACT_VERSION, DoneEvent, ErrorEvent, Event, FinishReason, Job
from protocol.errors import SwitchboardError, UnknownModel
from protocol.metrics import count_job, count_prompt_cache
from protocol.presence import FOREVER_SECONDS, forget_loaded, mark_loaded, publish_event
from protocol.usage import deliver_answer, record_minute
from workers.cancel import Cancel
from workers.context import RunContext
from workers.generate import generate
from workers.job_trace import traced

log = logging.getLogger(__name__)


@dataclass
class Ending:
    """How a job ended, and what it leaves behind."""
    reason: str  # a FinishReason
    final: DoneEvent | ErrorEvent | None = None  # its last event (None: aborted, nobody to tell)
    tail: list[Event] = field(default_factory=list)  # text the publisher still held: it goes out first
    tokens: int = 0  # generated
    ttft: float | None = None  # seconds from its queueing to its first token
    waited: float | None = None  # seconds in the queue
    loaded: bool = False  # its model ran: /api/ps lists it
    record: dict = field(default_factory=dict)  # more for its record (error, finished_at)


def run_job(job: Job, ctx: RunContext, taken_at: float, batch: Pipeline | None = None) -> str:
    """Run a job its take started (jobqueue.take: its heartbeat and record;
    sent at `taken_at`, time.monotonic()) and return why it finished. With
    `batch`, what it leaves in Redis is queued there for the caller to send
    with its own commands (the slot's release and next take)."""
    with ctx.aborts.watch(job.id, taken_at) as aborted, ctx.heartbeat.running(job.id, job.web_id, aborted):
        refused = refusal(job, ctx)
        if refused is not None:
            log.error("refused job %s: %s", job.id, refused.message)
            ending = Ending(FinishReason.ERROR, final=refused, record={"error": refused.message})
        elif aborted.is_set():  # its client (or its web process) left between the take and now
            ending = Ending(FinishReason.ABORTED)
        else:
            ending = traced(job, ctx, lambda: _run(job, ctx, aborted))
        return _finish(job, ctx, ending, batch)


def refusal(job: Job, ctx: RunContext) -> ErrorEvent | None:
    """A job this worker cannot run at all, answered at once (its client
    would otherwise wait out the queue wait): a newer contract version than
    this worker speaks, or a model its registry does not list (registries
    out of sync during a deploy)."""
    if job.version > CONTRACT_VERSION:
        return ErrorEvent(message=f"this worker speaks job contract version {CONTRACT_VERSION}, the job is version "
                                  f"{job.version}: the worker must be upgraded", status=500)
    try:
        ctx.backends.entry(job.model)
    except UnknownModel:
        return ErrorEvent(message=f'model "{job.model}" is not served by any worker that took the job '
                                  f"(worker {ctx.worker_id} has no such model in its registry)", status=404)
    return None


def _run(job: Job, ctx: RunContext, aborted: Cancel) -> Ending:
    started_wall = time.time()
    tail: list[Event] = []
    try:
        done = generate(job, ctx, aborted, tail)
    except Exception as error:
        if not aborted.is_set():
            return _failed(job, error, tail)
        done = DoneEvent(reason=FinishReason.ABORTED)  # e.g. an upstream read broken off by the abort itself
    first_token = (done.timings.load_ns + done.timings.prompt_eval_ns) / 1e9
    ttft = started_wall - job.enqueued_at + first_token if done.usage.completion_tokens else None
    done.timings.queue_ns = max(int((started_wall - job.enqueued_at) * 1e9), 0)
    return Ending(done.reason, final=None if done.reason == FinishReason.ABORTED else done, tail=tail,
                  tokens=done.usage.completion_tokens, ttft=ttft, waited=started_wall - job.enqueued_at, loaded=True,
                  record={"finished_at": time.time()})


def _failed(job: Job, error: Exception, tail: list[Event]) -> Ending:
    if not isinstance(error, SwitchboardError):
        log.exception("job %s on model %s failed", job.id, job.model)
        error = SwitchboardError("internal error while generating; see the worker log", 500)
    return Ending(FinishReason.ERROR, final=ErrorEvent.of(error), tail=tail,
                  record={"error": error.message, "finished_at": time.time()})


def _finish(job: Job, ctx: RunContext, ending: Ending, batch: Pipeline | None) -> str:
    """Everything a finished job leaves in Redis, in one round trip (on
    `batch` if given, sent by the caller)."""
    pipe = ctx.redis.pipeline(transaction=False) if batch is None else batch
    final = ending.final
    if final is not None:
        for event in ending.tail:
            publish_event(pipe, job.reply_channel, event)
        _deliver(pipe, job, final)
    jobqueue.finish(pipe, job.id, ending.reason, **ending.record)
    if isinstance(final, DoneEvent):  # what it cost its person's share, by its backend's count
        jobqueue.settle(pipe, ctx.backends.entry(job.model).pool, job, final.usage)
    if ending.loaded:
        _note_loaded(pipe, job, ctx)
    _count_metrics(pipe, job, ending, final)
    if batch is None:
        pipe.execute()
    return ending.reason


def _deliver(pipe: Pipeline, job: Job, final: DoneEvent | ErrorEvent) -> None:
    """Its last event; an answer is counted by its worker, with it, if a web
    process heard it (the web process counts requests that end otherwise).
    Counting a prompt uses no tokens."""
    if isinstance(final, DoneEvent) and not job.count_only:
        deliver_answer(pipe, job, final)
    else:
        publish_event(pipe, job.reply_channel, final)


def _count_metrics(pipe: Pipeline, job: Job, ending: Ending, final: DoneEvent | ErrorEvent | None) -> None:
    count_job(pipe, job.model, ending.reason, ending.tokens, ending.ttft)
    if isinstance(final, DoneEvent) and not job.count_only:
        record_minute(pipe, ending.ttft, ending.tokens, final.timings.eval_ns / 1e9, ending.waited)
    if isinstance(final, DoneEvent) and final.usage.cached_tokens is not None:
        count_prompt_cache(pipe, job.model, final.usage.cached_tokens, final.usage.prompt_tokens)


def _note_loaded(pipe: Pipeline, job: Job, ctx: RunContext) -> None:
    """For /api/ps: the model stays listed as long as it stays loaded."""
    seconds = ctx.loaded_marker_seconds if job.keep_alive is None else job.keep_alive
    if seconds == 0:
        forget_loaded(pipe, job.model, ctx.worker_id)
    else:
        mark_loaded(pipe, job.model, ctx.worker_id, int(seconds) if seconds > 0 else FOREVER_SECONDS)
