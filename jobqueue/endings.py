"""What a job's end leaves in the operator's records, written once, by the
transition that ends it (jobqueue.finish or jobqueue.withdraw):

- finished: its worker answered it or failed it. Its last events go out; an
  answer is counted in its person's usage once, and only if a web process
  heard it (ledger/lua/deliver_final.lua); the job's metrics and the status
  page's minute.
  What the guard found in what went to its model goes into its records too
  (ledger/guard_log.py).
- lost: its worker died running it (counted as such; the request's error
  then by withdraw).
- withdrawn: its request ended without its worker's answer (its client left,
  its worker's error was relayed, it never ran). Its usage is counted as an
  error or an abort (once per request: a worker's answer that raced it is
  not counted twice), the error kept for the status page, a job that never
  ran counted as expired or aborted.

A tool call's end (tool_call), whoever made it (an agent through the MCP
gateway, a model server-side), leaves the same: its metric and its
person's tool use.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from redis.client import Pipeline

from ledger import counting, guard_log, tool_use
from protocol.contract import Job
from protocol.events import DoneEvent, ErrorEvent, Event, FinishReason
from protocol.presence import publish_event
from telemetry.metrics import count_guard_findings, count_job, count_prompt_cache, count_tool_call

# Outcomes of a call whose tool the caller may not name (not theirs, or none such): counted under "-".
UNNAMED_OUTCOMES = ("denied", "refused", "unknown")


@dataclass
class Ending:
    """How a job ended in its worker, and what it leaves behind."""
    reason: str  # a FinishReason
    final: DoneEvent | ErrorEvent | None = None  # its last event (None: aborted, nobody to tell)
    tail: list[Event] = field(default_factory=list)  # text the publisher still held: it goes out first
    tokens: int = 0  # generated
    ttft: float | None = None  # seconds from its queueing to its first token
    waited: float | None = None  # seconds in the queue
    loaded: bool = False  # its model ran: /api/ps lists it
    record: dict = field(default_factory=dict)  # more for its state (error, finished_at)
    guard: object | None = None  # what the guard found in what went to its model (workers' GuardReport)


def finished(pipe: Pipeline, job: Job, ending: Ending) -> None:
    """Queue on `pipe` its last events, its answer's count and its metrics."""
    final = ending.final
    if final is not None:
        for event in ending.tail:
            publish_event(pipe, job.reply_channel, event)
        if _answered(job, final):
            counting.deliver_answer(pipe, job, final)
        else:
            publish_event(pipe, job.reply_channel, final)
    count_job(pipe, job.model, ending.reason, ending.tokens, ending.ttft)
    if ending.guard is not None:
        report = ending.guard
        counted = report.kinds if report.action == "blocked" else dict(report.first_seen)
        guard_log.record(pipe, job.usage_of, job.model, job.id, report.action, counted)
        count_guard_findings(pipe, counted, report.action)
    if _answered(job, final):
        counting.record_minute(pipe, ending.ttft, ending.tokens, final.timings.eval_ns / 1e9, ending.waited)
    if isinstance(final, DoneEvent) and final.usage.cached_tokens is not None:
        count_prompt_cache(pipe, job.model, final.usage.cached_tokens, final.usage.prompt_tokens)


def withdrawn(pipe: Pipeline, job: Job, unrun: FinishReason | None, final: ErrorEvent | None) -> None:
    """Queue on `pipe` what a request that ended without its worker's answer
    leaves (in its person's records: job.usage_of)."""
    if unrun is not None:
        count_job(pipe, job.model, unrun, 0, None)
    counting.record_request(pipe, job.id, job.usage_of, job.model, "error" if final is not None else "abort")
    if final is not None:
        counting.record_error(pipe, job.usage_of, job.model, final.message)


def lost(pipe: Pipeline, job: Job) -> None:
    """Its worker stopped beating before it finished (its web process's
    withdraw then counts the request's error)."""
    count_job(pipe, job.model, "worker_lost", 0, None)


def _answered(job: Job, final: DoneEvent | ErrorEvent | None) -> bool:
    """An answer to count (counting a prompt uses no tokens)."""
    return isinstance(final, DoneEvent) and not job.count_only


def tool_call(pipe: Pipeline, person: str, server: str, tool: str, outcome: str, seconds: float) -> None:
    """A tool call ended (`outcome`: ok, error, timeout, unavailable, or
    before it ran: refused, denied, unknown): its metric and the person's
    tool use of the day."""
    count_tool_call(pipe, server, "-" if outcome in UNNAMED_OUTCOMES else tool, outcome, seconds)
    tool_use.count(pipe, datetime.now(timezone.utc).date().isoformat(), person, server, tool)
