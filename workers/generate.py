"""What a job asks of its model, done: an unload or a load (Ollama's empty
requests), an embedding, a token count, or the streamed rounds of a reply
(workers/rounds.py). Returns the job's DoneEvent; its other events are
published on its reply channel on the way."""
from __future__ import annotations

import time

from protocol.contract import Job
from protocol.events import DoneEvent, EmbeddingEvent, Event, FinishReason
from protocol.presence import publish_event
from workers.cancel import Cancel
from workers.context import RunContext
from workers.execution import Execution
from workers.model_output import Outcome
from workers.prompts import is_load_only, resolve_prompt
from workers.rounds import Rounds, backend_job, done
from workers.secrets_guard import JobGuard
from workers.server_tools import ServerTools
from workers.toolcalls.emulation import plan_tools


def generate(job: Job, ctx: RunContext, aborted: Cancel, tail: list[Event], guard: JobGuard | None = None) -> DoneEvent:
    started = time.perf_counter_ns()
    entry, backend = ctx.backends.entry(job.model), ctx.backends.get(job.model)
    if is_load_only(job) and job.keep_alive == 0:  # Ollama's idiom for "unload now"
        backend.keep_loaded(0)
        return done(FinishReason.UNLOAD, Outcome(FinishReason.STOP, 0, 0), started, None)
    if is_load_only(job):
        return done(FinishReason.LOAD, Outcome(FinishReason.STOP, 0, 0, load_ns=backend.load()), started, None)
    try:
        if job.embed is not None:
            return _embed(Execution(job, ctx, entry, backend, aborted, started, guard))
        job = resolve_prompt(job, entry.fim, family_stops=backend.reads_prompt)
        run = Execution(job, ctx, entry, backend, aborted, started, guard)
        return _count(run) if job.count_only else Rounds(run).run(tail)
    finally:
        backend.keep_loaded(job.keep_alive)


def _embed(run: Execution) -> DoneEvent:
    """One batch, one event with every vector (the web process shapes them)."""
    embedded = run.backend.embed(run.outbound(run.job).embed, run.aborted)
    if run.aborted.is_set():
        return DoneEvent(reason=FinishReason.ABORTED)
    publish_event(run.ctx.redis, run.job.reply_channel, EmbeddingEvent(vectors=embedded.vectors))
    outcome = Outcome(FinishReason.STOP, embedded.prompt_tokens, 0, load_ns=embedded.load_ns)
    return done(FinishReason.STOP, outcome, run.started, None)


def _count(run: Execution) -> DoneEvent:
    """The prompt's tokens as the model would get it in the job's first
    round (tool instructions and server tools included), as that round's
    usage would report them."""
    entry = run.entry
    server = ServerTools.for_job(run.job, entry, run.ctx.toolbox, run.aborted)
    plan = plan_tools(server.job, entry.tools, entry.system, entry.step_limit, server.specs)
    tokens = run.backend.count_tokens(run.outbound(backend_job(server.job, run.ctx, plan, run.backend)))
    return done(FinishReason.COUNTED, Outcome(FinishReason.STOP, tokens, 0), run.started, None)
