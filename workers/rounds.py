"""A job's model rounds, streamed: one, or more while the model calls only
server tools (their results go back to it for the next round). Each round's
backend pieces become events (thinking apart, tool calls filtered:
workers/reply_events.py) that the publisher sends on the job's reply channel;
the abort, the wall-time cap and a forced tool call are checked here."""
from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Iterator

from protocol.contract import Job
from protocol.events import DoneEvent, Event, FinishReason, PromptEvent, Timings, Usage
from protocol.errors import BackendError
from workers.backends.base import Backend
from workers.context import RunContext
from workers.execution import Execution
from workers.model_output import Outcome, Prompted
from workers.publisher import EventPublisher
from workers.reply_events import Replies
from workers.server_tools import ServerTools, Totals
from workers.toolcalls.emulation import ReplyFilter, ToolPlan, plan_tools
from workers.toolcalls.grammar import forced_call_grammar

log = logging.getLogger(__name__)


class Rounds:
    def __init__(self, run: Execution):
        self.execution = run
        self.ctx, self.entry, self.backend, self.aborted, self.started = (run.ctx, run.entry, run.backend,
                                                                           run.aborted, run.started)
        self.deadline = run.started + int(run.ctx.max_job_seconds * 1e9)
        self.server = ServerTools.for_job(run.job, run.entry, run.ctx.toolbox, run.aborted)
        self.totals = Totals()

    def run(self, tail: list[Event]) -> DoneEvent:
        """The job's rounds, to its DoneEvent; what the publisher still holds
        at the end is left in `tail` (it goes out with the final event)."""
        publisher = EventPublisher(self.ctx.redis, self.server.job.reply_channel, self.ctx.stream_interval_seconds,
                                   on_unheard=self._nobody_listens,
                                   hold=self.ctx.whole_reply_interval_seconds if self.server.job.whole else None)
        try:
            ended = self._rounds(publisher)
        finally:
            tail += publisher.close(drop=self.aborted.is_set())
        if ended is None or self.aborted.is_set():  # the stream may have ended quietly because the abort closed it
            return DoneEvent(reason=FinishReason.ABORTED)
        outcome, plan, replies = ended
        reason = FinishReason.TOOL_CALLS if replies.filter.calls else \
            FinishReason.STEP_LIMIT if plan.step_limited and outcome.reason == FinishReason.STOP else \
            FinishReason.MALFORMED_CALL if replies.filter.malformed and outcome.reason == FinishReason.STOP else \
            outcome.reason
        return done(reason, self.totals.outcome(outcome), self.started, self.totals.first_token_at, self.totals.rounds)

    def _nobody_listens(self) -> None:
        if not self.aborted.is_set():
            log.warning("job %s: nobody hears its events any more (its web process lost Redis or died); "
                        "stopping it", self.server.job.id)
            self.aborted.set()

    def _rounds(self, publisher: EventPublisher) -> tuple[Outcome, ToolPlan, Replies] | None:
        """Rounds while the model calls only server tools; None if aborted."""
        server, entry = self.server, self.entry
        while True:
            plan = plan_tools(server.job, entry.tools, entry.system, entry.step_limit, server.specs)
            replies = Replies(ReplyFilter(plan, server.names), server, entry.think_tags, server.job.think)
            outcome = self._round(plan, replies, publisher)
            if outcome is None or self.aborted.is_set():
                return None
            check_forced_call(server.job, plan, replies.filter)
            if replies.filter.calls or not replies.filter.server_calls or outcome.reason != FinishReason.STOP:
                return outcome, plan, replies
            if not server.run_round(replies.filter.server_calls, self.ctx.toolbox, publisher, self.ctx.redis,
                                    self.aborted):
                return None
            if time.perf_counter_ns() > self.deadline:  # no time left for another round
                return Outcome(FinishReason.LENGTH, 0, 0), plan, replies

    def _round(self, plan: ToolPlan, replies: Replies, publisher: EventPublisher) -> Outcome | None:
        """One model round, its events published; None if aborted."""
        job = self.execution.outbound(backend_job(self.server.job, self.ctx, plan, self.backend))
        pieces = self.execution.restored(self.backend.generate(job, self.aborted))
        try:
            outcome, first_token_at = self._relay(pieces, replies, publisher)
            if outcome is not None and not self.aborted.is_set():
                publisher.put(replies.finish())  # held-back text, calls completed at the end
        finally:
            pieces.close()  # stops the backend (llama.cpp, an upstream socket) at once
        if outcome is None:
            return None
        if outcome.reasoning_tokens is None and replies.thinking:  # counted here when the backend cannot tell
            outcome = replace(outcome, reasoning_tokens=self.backend.count_text(replies.thinking))
        self.totals.add(outcome, first_token_at)
        return outcome

    def _relay(self, pieces: Iterator, replies: Replies,
               publisher: EventPublisher) -> tuple[Outcome | None, int | None]:
        """The backend's pieces, as events, until it ends (its outcome), the
        abort (None) or the wall-time cap; and when its first token came."""
        first_token_at = None
        while True:
            try:
                piece = next(pieces)
            except StopIteration as finished:
                return finished.value, first_token_at
            if self.aborted.is_set():
                return None, first_token_at
            if isinstance(piece, Prompted):  # no token yet: the prompt's size, for the first round's opening
                if self.server.job.report_prompt and not self.totals.rounds:
                    publisher.put([PromptEvent(prompt_tokens=piece.prompt_tokens, cached_tokens=piece.cached_tokens)])
                continue
            first_token_at = first_token_at or time.perf_counter_ns()
            publisher.put(replies.feed(piece))
            if time.perf_counter_ns() > self.deadline:
                log.warning("job %s hit the %.0f s wall-time cap", self.server.job.id, self.ctx.max_job_seconds)
                return Outcome(FinishReason.LENGTH, 0, 0), first_token_at


def backend_job(job: Job, ctx: RunContext, plan: ToolPlan, backend: Backend) -> Job:
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


def check_forced_call(job: Job, plan: ToolPlan, replies: ReplyFilter) -> None:
    """tool_choice "required" (or a named function) that the model did not
    honour: a clear error, never a plain answer the client did not ask for."""
    if plan.forced and not replies.any_calls:
        wanted = f'the function "{job.tool_choice.name}"' if job.tool_choice.mode == "function" else "a tool"
        raise BackendError(f'tool_choice asked for a call to {wanted}, but model "{job.model}" answered without '
                           "one (only models that follow grammars, or native tool calling, can guarantee it)", 502)


def done(reason: str, outcome: Outcome, started: int, first_token_at: int | None, rounds: int = 1) -> DoneEvent:
    """The job's final event: its reason, usage, timings and model rounds."""
    ended = time.perf_counter_ns()
    first = first_token_at or ended
    return DoneEvent(
        reason=reason,
        stop_sequence=outcome.stop_sequence if reason == FinishReason.STOP else None,
        rounds=rounds,
        usage=Usage(prompt_tokens=outcome.prompt_tokens, completion_tokens=outcome.completion_tokens,
                    cached_tokens=outcome.cached_tokens, reasoning_tokens=outcome.reasoning_tokens or 0),
        timings=Timings(load_ns=outcome.load_ns, prompt_eval_ns=max(first - started - outcome.load_ns, 0),
                        eval_ns=ended - first, total_ns=ended - started),
    )
