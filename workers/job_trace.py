"""A job's span in the worker (telemetry/tracing.py): its time in the queue,
then the job itself under its request's trace, named and described by
OpenTelemetry's GenAI conventions (what it ran on, its tokens, its first
token, why it ended); never its text. A job sent without a trace runs as is."""
from __future__ import annotations

from typing import Callable

from catalog.deployments import Deployments
from catalog.registry import ModelEntry
from jobqueue import Ending
from protocol.contract import Job
from protocol.events import DoneEvent, ErrorEvent
from telemetry import tracing
from workers.context import RunContext


def traced(job: Job, ctx: RunContext, run: Callable[[], Ending]) -> Ending:
    """`run` (the job's generation) under the job's span."""
    if not job.traceparent or not tracing.on():
        return run()
    entry = ctx.backends.entry(job.model)
    operation = "embeddings" if job.embed else "text_completion" if job.prompt else "chat"
    with tracing.job_span(job.traceparent, f"{operation} {job.model}", {
            "gen_ai.operation.name": operation, "gen_ai.request.model": job.model,
            "gen_ai.provider.name": entry.backend, "gen_ai.request.max_tokens": job.options.max_tokens},
            job.enqueued_at) as span:  # (the worker that ran it: the span's service.instance.id)
        ending = run()
        _annotate(span, entry, ending)
    return ending


def _annotate(span, entry: ModelEntry, ending: Ending) -> None:
    if not tracing.recording(span):  # (the sampler left its trace out)
        return
    final = ending.final
    usage = final.usage if isinstance(final, DoneEvent) else None
    tracing.annotate(span, _answered_by(entry) | {
        "gen_ai.response.finish_reasons": [str(ending.reason)],
        "gen_ai.usage.input_tokens": usage.prompt_tokens if usage else None,
        "gen_ai.usage.output_tokens": usage.completion_tokens if usage else None,
        "gen_ai.usage.cache_read.input_tokens": usage.cached_tokens if usage else None,
        "gen_ai.server.time_to_first_token": ending.ttft,
        "switchboard.tool_rounds": final.rounds - 1 if isinstance(final, DoneEvent) and final.rounds > 1 else None})
    if isinstance(final, ErrorEvent):
        tracing.fail(span, str(final.status))


def _answered_by(entry: ModelEntry) -> dict:
    """The model and deployment that answer: a local model itself, an
    upstream's one server; a routed upstream's are named as it places the
    job (workers/backends/routed.py)."""
    settings = entry.settings
    if not isinstance(settings, Deployments):
        return {"gen_ai.response.model": entry.name}
    if settings.routed:
        return {}
    only = settings.deployments[0]
    return {"gen_ai.response.model": only.settings.upstream_model, "switchboard.deployment": only.name}
