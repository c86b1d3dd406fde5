"""A worker's job, from its take to its last write, top to bottom:

    run_job      its abort watched and its heartbeat beating while it runs
      refusal    a job this worker cannot run at all is answered at once
      _run       its model generates (workers/generate.py, rounds.py below it)
      _finish    what it leaves in Redis, in one round trip: its last events,
                 its usage, metrics and record (jobqueue.finish), the
                 loaded-model note

Failures become an error event: a client never waits on a job that died.
"""
from __future__ import annotations

import logging
import time

from redis.client import Pipeline

import jobqueue
from jobqueue import Ending
from protocol.contract import CONTRACT_VERSION, Job
from protocol.events import DoneEvent, ErrorEvent, Event, FinishReason
from protocol.errors import SwitchboardError, UnknownModel
from protocol.presence import FOREVER_SECONDS, forget_loaded, mark_loaded
from workers.cancel import Cancel
from workers.context import RunContext
from workers.generate import generate
from workers.job_trace import traced
from workers.secrets_guard import JobGuard

log = logging.getLogger(__name__)


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
    guard = ctx.guards.for_job(job, ctx.backends.entry(job.model)) if ctx.guards is not None else None
    try:
        done = generate(job, ctx, aborted, tail, guard)
    except Exception as error:
        if not aborted.is_set():
            return _failed(job, error, tail, guard)
        done = DoneEvent(reason=FinishReason.ABORTED)  # e.g. an upstream read broken off by the abort itself
    report = guard.report() if guard is not None else None
    if report is not None:
        done.guard = report.summary()
    first_token = (done.timings.load_ns + done.timings.prompt_eval_ns) / 1e9
    ttft = started_wall - job.enqueued_at + first_token if done.usage.completion_tokens else None
    done.timings.queue_ns = max(int((started_wall - job.enqueued_at) * 1e9), 0)
    return Ending(done.reason, final=None if done.reason == FinishReason.ABORTED else done, tail=tail,
                  tokens=done.usage.completion_tokens, ttft=ttft, waited=started_wall - job.enqueued_at, loaded=True,
                  record={"finished_at": time.time()}, guard=report)


def _failed(job: Job, error: Exception, tail: list[Event], guard: JobGuard | None = None) -> Ending:
    if not isinstance(error, SwitchboardError):
        log.exception("job %s on model %s failed", job.id, job.model)
        error = SwitchboardError("internal error while generating; see the worker log", 500)
    final, report = ErrorEvent.of(error), guard.report() if guard is not None else None
    if report is not None:
        final.guard = report.summary()
    return Ending(FinishReason.ERROR, final=final, tail=tail, guard=report,
                  record={"error": error.message, "finished_at": time.time()})


def _finish(job: Job, ctx: RunContext, ending: Ending, batch: Pipeline | None) -> str:
    """Everything a finished job leaves in Redis, in one round trip (on
    `batch` if given, sent by the caller)."""
    pipe = ctx.redis.pipeline(transaction=False) if batch is None else batch
    answered = isinstance(ending.final, DoneEvent)  # (a refused job's model may be unknown here)
    jobqueue.finish(pipe, job, ending, ctx.backends.entry(job.model).pool if answered else "")
    if ending.loaded:
        _note_loaded(pipe, job, ctx)
    if batch is None:
        pipe.execute()
    return ending.reason


def _note_loaded(pipe: Pipeline, job: Job, ctx: RunContext) -> None:
    """For /api/ps: the model stays listed as long as it stays loaded."""
    seconds = ctx.loaded_marker_seconds if job.keep_alive is None else job.keep_alive
    if seconds == 0:
        forget_loaded(pipe, job.model, ctx.worker_id)
    else:
        mark_loaded(pipe, job.model, ctx.worker_id, int(seconds) if seconds > 0 else FOREVER_SECONDS)
