"""Server-side tools for one job: the agent loop's state between rounds.

A model round that calls only server tools (the operator's MCP servers the
job may use) does not end the reply: the worker runs the calls (at once,
concurrently), appends the calls and their results to the conversation, and
the next round continues it. The step limit counts these rounds like the
client's own (workers/toolcalls/prompt.py, tool_rounds), so at the limit no
tools are offered and the model is asked for its final answer.

Rules, stated once:
- a client tool and a server tool of one name: the client's (it declared
  it and expects the call); two servers: the one the model lists first;
- a round that calls a client tool ends the reply with the client's calls
  exactly as without server tools; its server calls are not run (their
  results could reach the model only through the client, which never sees
  them), so the model calls them again later if it still needs them;
- the client never sees a server call as its own: it gets ServerToolEvents,
  which writers show only where standard clients look past them.
"""
from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass, field

from redis import Redis

import jobqueue
from catalog.mcp import Grants
from catalog.registry import ModelEntry
from protocol.contract import Job, Message, ToolCall, ToolChoice, ToolSpec, json_object
from protocol.events import ServerToolEvent, TextEvent
from protocol.presence import batched
from telemetry import tracing
from workers.cancel import Cancel
from workers.model_output import Outcome
from workers.publisher import EventPublisher
from workers.toolbox import ServerTool, Toolbox, ToolResult

ROUND_SEPARATOR = "\n\n"


@dataclass
class Totals:
    """Usage over every model round of the job."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int | None = None
    reasoning_tokens: int = 0
    load_ns: int = 0
    first_token_at: int | None = None
    rounds: int = 0

    def add(self, outcome: Outcome, first_token_at: int | None) -> None:
        """A round's counts (its reasoning tokens known by now: see runner)."""
        self.rounds += 1
        self.prompt_tokens += outcome.prompt_tokens
        self.completion_tokens += outcome.completion_tokens
        self.reasoning_tokens += outcome.reasoning_tokens or 0
        self.load_ns += outcome.load_ns
        if outcome.cached_tokens is not None:
            self.cached_tokens = (self.cached_tokens or 0) + outcome.cached_tokens
        self.first_token_at = self.first_token_at or first_token_at

    def outcome(self, last: Outcome) -> Outcome:
        """The job's outcome: every round's counts, the last round's end."""
        return Outcome(last.reason, self.prompt_tokens, self.completion_tokens, self.load_ns, self.cached_tokens,
                       last.stop_sequence, self.reasoning_tokens)


@dataclass
class ServerTools:
    job: Job
    tools: dict[str, ServerTool] = field(default_factory=dict)
    text_sent: str = ""  # by earlier rounds
    round_text: str = ""  # by this round so far

    @classmethod
    def for_job(cls, job: Job, entry: ModelEntry, toolbox: Toolbox | None, cancel: Cancel) -> "ServerTools":
        """The server tools this job may call: the model's servers that the
        job allows (the web process checked the key), minus names the
        client's own tools take."""
        grants = Grants(tuple(job.server_tools))
        servers = [name for name in entry.mcp_servers if grants.may_use_server(name)]
        if not servers or toolbox is None or job.prompt is not None or job.tool_choice.mode == "none":
            return cls(job)
        client_names = {t.name for t in job.tools}
        offered = toolbox.offered(servers, job, cancel)
        return cls(job, {t.spec.name: t for t in offered
                         if t.spec.name not in client_names and grants.may_use(t.server, t.spec.name)})

    @property
    def specs(self) -> list[ToolSpec]:
        return [tool.spec for tool in self.tools.values()]

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.tools)

    def shown(self, events: list) -> list:
        """A round's events on their way out: the text of a later round is
        set apart from what an earlier round said; all text is kept, as the
        round's assistant message."""
        if not self.tools:  # the usual job: one round, nothing to set apart
            return events
        shown = []
        for event in events:
            if isinstance(event, TextEvent):
                apart = self.round_text == "" and self.text_sent and not self.text_sent.endswith("\n")
                self.round_text += event.text
                if apart:
                    event = TextEvent(text=ROUND_SEPARATOR + event.text)
            shown.append(event)
        return shown

    def run_round(self, calls: list[ToolCall], toolbox: Toolbox, publisher: EventPublisher, redis: Redis,
                  cancel: Cancel) -> bool:
        """Run one round's server calls (on the MCP pool, as an agent's
        gateway calls run: workers/toolbox.py) and extend the conversation;
        False if the job was cancelled meanwhile (its calls were cancelled)."""
        publisher.put([self._event("call", call) for call in calls])
        try:
            results = toolbox.call_all([(self.tools[c.name], json_object(c.arguments)) for c in calls], self.job,
                                       cancel)
        except concurrent.futures.CancelledError:
            return False
        publisher.put([self._event("result", call, result) for call, result in zip(calls, results)])
        person = self.job.usage_of
        with batched(redis) as pipe:  # the records and spans of a gateway call, the same for these
            for call, result in zip(calls, results):
                server = self.tools[call.name].server
                jobqueue.tool_call_ended(pipe, person, server, call.name, result.outcome, result.seconds)
                tracing.ToolCallSpan(call.name, server, person, call.id).record(result.seconds, result.outcome)
        self._extend(calls, results)
        return True

    def _event(self, phase: str, call: ToolCall, result: ToolResult | None = None) -> ServerToolEvent:
        fields = {} if result is None else {"status": result.status, "seconds": round(result.seconds, 3),
                                            "result_chars": result.result_chars, "truncated": result.truncated}
        return ServerToolEvent(phase=phase, id=call.id, server=self.tools[call.name].server, name=call.name,
                               arguments=call.arguments, **fields)

    def _extend(self, calls: list[ToolCall], results: list[ToolResult]) -> None:
        said = Message(role="assistant", content=self.round_text, tool_calls=calls)
        answers = [Message(role="tool", content=r.text, tool_call_id=c.id, tool_name=c.name, failed=r.status != "ok")
                   for c, r in zip(calls, results)]
        # A call was forced for the reply, and made: the next round may answer.
        choice = ToolChoice() if self.job.tool_choice.mode in ("required", "function") else self.job.tool_choice
        self.job = self.job.model_copy(update={"messages": self.job.messages + [said] + answers,
                                               "tool_choice": choice})
        self.text_sent += self.round_text
        self.round_text = ""
