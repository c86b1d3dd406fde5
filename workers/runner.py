"""Run one job: backend text -> tool-call parsing -> abort and limit checks
-> published events.

The runner owns what is common to every backend: tool emulation, the abort
check between tokens, the token and wall-time caps, timings, the job's
recorded state, and turning failures into an error event (a client never
waits on a job that died).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace

from redis import Redis
from redis.client import Pipeline

from catalog.registry import ModelEntry
import jobqueue
from protocol.commands import FOREVER_SECONDS, forget_loaded, mark_loaded, publish_event
from protocol.contract import (
    CONTRACT_VERSION, DoneEvent, EmbeddingEvent, ErrorEvent, Event, FinishReason, Job, PromptEvent, Timings, Usage,
)
from protocol.errors import BackendError, SwitchboardError, UnknownModel
from protocol.metrics import count_job, count_prompt_cache
from protocol.usage import record_minute, record_request
from workers.abort_watch import AbortWatch
from workers.agent import ServerTools, Totals
from workers.backends.base import Backend
from workers.cancel import Cancel
from workers.heartbeat import Heartbeat
from workers.instances import BackendInstances
from workers.mcp.toolbox import Toolbox
from workers.pieces import Outcome, Prompted
from workers.prompts import is_load_only, resolve_prompt
from workers.publisher import STREAM_INTERVAL_SECONDS, EventPublisher
from workers.replies import Replies
from workers.slots import Slots
from workers.toolcalls.emulation import ReplyFilter, ToolPlan, plan_tools
from workers.toolcalls.grammar import forced_call_grammar

log = logging.getLogger(__name__)


@dataclass
class RunContext:
    redis: Redis
    backends: BackendInstances
    aborts: AbortWatch
    worker_id: str
    heartbeat: Heartbeat
    slots: Slots | None = None
    toolbox: Toolbox | None = None  # the registry's MCP servers (server-side tools)
    max_job_seconds: float = 600.0
    max_job_tokens: int = 16384
    loaded_marker_seconds: int = 300
    stream_interval_seconds: float = STREAM_INTERVAL_SECONDS


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


def run_job(job: Job, ctx: RunContext, taken_at: float, batch: Pipeline | None = None) -> str:
    """Run a job its take started (jobqueue.fairqueue.take: its heartbeat,
    state and started event; sent at `taken_at`, time.monotonic()) and
    return the reason it finished. With `batch`, what the finished job
    leaves in Redis is queued there for the caller to send (with its own
    commands: the slot's finish and next take), else sent at once."""
    with ctx.aborts.watch(job.id, taken_at) as aborted, ctx.heartbeat.running(job.id, job.web_id, aborted):
        refused = refusal(job, ctx)
        if refused is not None:
            log.error("refused job %s: %s", job.id, refused.message)
            return _finish(job, ctx, FinishReason.ERROR, final=refused, error=refused.message, batch=batch)
        if aborted.is_set():  # its client (or its web process) left between the take and now
            return _finish(job, ctx, FinishReason.ABORTED, batch=batch)
        return _run_started(job, ctx, aborted, batch)


def _run_started(job: Job, ctx: RunContext, aborted: Cancel, batch: Pipeline | None) -> str:
    """A job its take announced (its heartbeat, state and started event)."""
    started_wall = time.time()
    tail: list[Event] = []  # text the publisher still held at the end: it goes out with the final event
    try:
        done = _generate(job, ctx, aborted, tail)
    except Exception as error:
        if aborted.is_set():  # e.g. an upstream read broken off by the abort itself
            done = DoneEvent(reason=FinishReason.ABORTED)
        elif isinstance(error, SwitchboardError):
            return _fail(job, ctx, error, tail, batch)
        else:
            log.exception("job %s on model %s failed", job.id, job.model)
            return _fail(job, ctx, SwitchboardError("internal error while generating; see the worker log", 500),
                         tail, batch)
    first_token = (done.timings.load_ns + done.timings.prompt_eval_ns) / 1e9
    ttft = started_wall - job.enqueued_at + first_token if done.usage.completion_tokens else None
    return _finish(job, ctx, done.reason, tokens=done.usage.completion_tokens, ttft=ttft, finished_at=time.time(),
                   final=None if done.reason == FinishReason.ABORTED else done, loaded=True,
                   waited=started_wall - job.enqueued_at, tail=tail, batch=batch)


def _finish(job: Job, ctx: RunContext, reason: str, tokens: int = 0, ttft: float | None = None,
            final: DoneEvent | ErrorEvent | None = None, loaded: bool = False,
            waited: float | None = None, tail: list[Event] = (), batch: Pipeline | None = None, **fields) -> str:
    """Everything a finished job leaves in Redis, in one round trip (on
    `batch` if given, sent by the caller): its usage, its last events, its
    state, the end of its heartbeat, the loaded-model note, the metrics."""
    pipe = ctx.redis.pipeline(transaction=False) if batch is None else batch
    if isinstance(final, DoneEvent) and job.usage_of:  # counted here: its web process need not
        if not job.count_only:  # counting a prompt uses no tokens
            record_request(pipe, job.usage_of, job.model, final.usage.prompt_tokens, final.usage.completion_tokens,
                           "ok", job.id)
        final = final.model_copy(update={"usage_counted": True})
    if final is not None:
        for event in tail:
            publish_event(pipe, job.reply_channel, event)
        publish_event(pipe, job.reply_channel, final)
    jobqueue.finish(pipe, job.id, reason, **fields)
    if loaded:
        _note_loaded(pipe, job, ctx)
    count_job(pipe, job.model, reason, tokens, ttft)
    if isinstance(final, DoneEvent) and not job.count_only:
        record_minute(pipe, ttft, tokens, final.timings.eval_ns / 1e9, waited)
    if isinstance(final, DoneEvent) and final.usage.cached_tokens is not None:
        count_prompt_cache(pipe, job.model, final.usage.cached_tokens, final.usage.prompt_tokens)
    if batch is None:
        pipe.execute()
    return reason


def _fail(job: Job, ctx: RunContext, error: SwitchboardError, tail: list[Event] = (),
          batch: Pipeline | None = None) -> str:
    return _finish(job, ctx, FinishReason.ERROR, final=ErrorEvent.of(error), error=error.message,
                   finished_at=time.time(), tail=tail, batch=batch)


def _note_loaded(pipe, job: Job, ctx: RunContext) -> None:
    """For /api/ps: the model stays listed as long as it stays loaded."""
    seconds = ctx.loaded_marker_seconds if job.keep_alive is None else job.keep_alive
    if seconds == 0:
        forget_loaded(pipe, job.model, ctx.worker_id)
    else:
        mark_loaded(pipe, job.model, ctx.worker_id, int(seconds) if seconds > 0 else FOREVER_SECONDS)


def _backend_job(job: Job, ctx: RunContext, plan: ToolPlan, backend: Backend) -> Job:
    """What the backend sees: the planned conversation (the client's own
    messages for a backend that reads no prompt), tools only when passed
    through natively, the token limit capped, and, for a forced emulated call
    on a backend that follows grammars, the grammar that guarantees it."""
    limit = min(job.options.max_tokens or ctx.max_job_tokens, ctx.max_job_tokens)
    update = {"options": job.options.model_copy(update={"max_tokens": limit}),
              "tools": plan.tools if plan.native else []}
    if backend.reads_prompt:
        update["messages"] = plan.messages
    if plan.forced and not plan.native and backend.constrains_output:
        update["grammar"] = forced_call_grammar(plan.tools, plan.parallel)
    return job.model_copy(update=update)


def _check_forced_call(job: Job, plan: ToolPlan, replies: ReplyFilter) -> None:
    """tool_choice "required" (or a named function) that the model did not
    honour: a clear error, never a plain answer the client did not ask for."""
    if plan.forced and not replies.any_calls:
        wanted = f'the function "{job.tool_choice.name}"' if job.tool_choice.mode == "function" else "a tool"
        raise BackendError(f'tool_choice asked for a call to {wanted}, but model "{job.model}" answered without '
                           "one (only models that follow grammars, or native tool calling, can guarantee it)", 502)


def _generate(job: Job, ctx: RunContext, aborted: Cancel, tail: list[Event]) -> DoneEvent:
    started = time.perf_counter_ns()
    entry, backend = ctx.backends.entry(job.model), ctx.backends.get(job.model)
    if is_load_only(job) and job.keep_alive == 0:  # Ollama's idiom for "unload now"
        backend.keep_loaded(0)
        return _done(FinishReason.UNLOAD, Outcome(FinishReason.STOP, 0, 0), started, None)
    if is_load_only(job):
        return _done(FinishReason.LOAD, Outcome(FinishReason.STOP, 0, 0, load_ns=backend.load()), started, None)
    if job.embed is not None:
        try:
            return _embed(job, ctx, backend, aborted, started)
        finally:
            backend.keep_loaded(job.keep_alive)
    try:
        job = resolve_prompt(job, entry.fim, family_stops=backend.reads_prompt)
        if job.count_only:
            return _count(job, ctx, entry, backend, aborted, started)
        return _stream(job, ctx, entry, backend, aborted, started, tail)
    finally:
        backend.keep_loaded(job.keep_alive)


def _embed(job: Job, ctx: RunContext, backend: Backend, aborted: Cancel, started: int) -> DoneEvent:
    """One batch, one event with every vector (the web process shapes them)."""
    embedded = backend.embed(job.embed, aborted)
    if aborted.is_set():
        return DoneEvent(reason=FinishReason.ABORTED)
    publish_event(ctx.redis, job.reply_channel, EmbeddingEvent(vectors=embedded.vectors))
    return _done(FinishReason.STOP, Outcome(FinishReason.STOP, embedded.prompt_tokens, 0, load_ns=embedded.load_ns), started, None)


def _count(job: Job, ctx: RunContext, entry: ModelEntry, backend: Backend, aborted: Cancel,
           started: int) -> DoneEvent:
    """The prompt's tokens as the model would get it in the job's first
    round (tool instructions and server tools included), as that round's
    usage would report them."""
    server = ServerTools.for_job(job, entry, ctx.toolbox, aborted)
    plan = plan_tools(server.job, entry.tools, entry.system, entry.step_limit, server.specs)
    tokens = backend.count_tokens(_backend_job(server.job, ctx, plan, backend))
    return _done(FinishReason.COUNTED, Outcome(FinishReason.STOP, tokens, 0), started, None)


def _stream(job: Job, ctx: RunContext, entry: ModelEntry, backend: Backend, aborted: Cancel,
            started: int, tail: list[Event]) -> DoneEvent:
    """The model's rounds: one, or more while it calls only server tools.
    What the publisher still holds at the end is left in `tail`."""
    deadline = started + int(ctx.max_job_seconds * 1e9)
    publisher = EventPublisher(ctx.redis, job.reply_channel, ctx.stream_interval_seconds)
    server = ServerTools.for_job(job, entry, ctx.toolbox, aborted)
    totals = Totals()
    try:
        while True:
            plan = plan_tools(server.job, entry.tools, entry.system, entry.step_limit, server.specs)
            replies = Replies(ReplyFilter(plan, server.names), server, entry.think_tags, job.think)
            outcome = _round(server, ctx, plan, replies, backend, publisher, aborted, deadline, totals)
            if outcome is None or aborted.is_set():
                return DoneEvent(reason=FinishReason.ABORTED)
            _check_forced_call(server.job, plan, replies.filter)
            if replies.filter.calls or not replies.filter.server_calls or outcome.reason != FinishReason.STOP:
                break
            if not server.run_round(replies.filter.server_calls, ctx.toolbox, publisher, ctx.redis, aborted):
                return DoneEvent(reason=FinishReason.ABORTED)
            if time.perf_counter_ns() > deadline:  # no time left for another round
                outcome = Outcome(FinishReason.LENGTH, 0, 0)
                break
    finally:
        tail += publisher.close(drop=aborted.is_set())  # published just before the final event
    if aborted.is_set():  # the stream may have ended quietly because the abort closed it
        return DoneEvent(reason=FinishReason.ABORTED)
    reason = FinishReason.TOOL_CALLS if replies.filter.calls else \
        FinishReason.STEP_LIMIT if plan.step_limited and outcome.reason == FinishReason.STOP \
        else outcome.reason
    return _done(reason, totals.outcome(outcome), started, totals.first_token_at)


def _round(server: ServerTools, ctx: RunContext, plan: ToolPlan, replies: Replies, backend: Backend,
           publisher: EventPublisher, aborted: Cancel, deadline: int, totals: Totals) -> Outcome | None:
    """One model round, its events published; None if aborted."""
    first_token_at: int | None = None
    pieces = backend.generate(_backend_job(server.job, ctx, plan, backend), aborted)
    try:
        while True:
            try:
                text = next(pieces)
            except StopIteration as finished:
                outcome: Outcome = finished.value
                break
            if aborted.is_set():
                return None
            if isinstance(text, Prompted):  # no token yet: the prompt's size, for the first round's opening
                if server.job.report_prompt and not totals.rounds:
                    publisher.put([PromptEvent(prompt_tokens=text.prompt_tokens, cached_tokens=text.cached_tokens)])
                continue
            first_token_at = first_token_at or time.perf_counter_ns()
            publisher.put(replies.feed(text))
            if time.perf_counter_ns() > deadline:
                log.warning("job %s hit the %.0f s wall-time cap", server.job.id, ctx.max_job_seconds)
                outcome = Outcome(FinishReason.LENGTH, 0, 0)
                break
        if not aborted.is_set():
            publisher.put(replies.finish())  # held-back text, calls completed at the end
    finally:
        pieces.close()  # stops the backend (llama.cpp, an upstream socket) at once
    if outcome.reasoning_tokens is None and replies.thinking:  # counted here when the backend cannot tell
        outcome = replace(outcome, reasoning_tokens=backend.count_text(replies.thinking))
    totals.add(outcome, first_token_at)
    return outcome


def _done(reason: str, outcome: Outcome, started: int, first_token_at: int | None) -> DoneEvent:
    ended = time.perf_counter_ns()
    first = first_token_at or ended
    return DoneEvent(
        reason=reason,
        stop_sequence=outcome.stop_sequence if reason == FinishReason.STOP else None,
        usage=Usage(prompt_tokens=outcome.prompt_tokens, completion_tokens=outcome.completion_tokens,
                    cached_tokens=outcome.cached_tokens, reasoning_tokens=outcome.reasoning_tokens or 0),
        timings=Timings(
            load_ns=outcome.load_ns,
            prompt_eval_ns=max(first - started - outcome.load_ns, 0),
            eval_ns=ended - first,
            total_ns=ended - started,
        ),
    )
