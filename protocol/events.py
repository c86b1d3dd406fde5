"""The events a worker sends a job's web process on its reply channel, and
their encoding: text, thinking, tool calls, server-side tool calls,
embeddings, the prompt's size, and the job's end (its DoneEvent with usage
and timings, or an ErrorEvent with the status a client sees). Tolerant as
the job is (protocol/contract.py: the compatibility policy): a reader skips
an event type it does not know.
"""
from __future__ import annotations

import typing
from enum import StrEnum
from typing import Annotated, Literal, Union

from pydantic import Field, TypeAdapter, ValidationError

from protocol.contract import Strict
from protocol.errors import PromptTooLong, SwitchboardError


class Usage(Strict):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Prompt tokens found already evaluated (a local model's prompt cache);
    # None when the backend keeps no cache.
    cached_tokens: int | None = None
    # Of completion_tokens, those spent thinking.
    reasoning_tokens: int = 0


class Timings(Strict):
    """Nanoseconds, measured by the worker (Ollama reports these names)."""

    load_ns: int = 0
    prompt_eval_ns: int = 0
    eval_ns: int = 0
    total_ns: int = 0
    queue_ns: int = 0  # from its queueing to a worker's start (0: not told)


class PromptEvent(Strict):
    """The prompt's tokens, where the backend knows them before the first
    token (echo, a local model, an Anthropic upstream): sent only for a job
    that asks (Job.report_prompt)."""

    type: Literal["prompt"] = "prompt"
    prompt_tokens: int
    cached_tokens: int | None = None


class TextEvent(Strict):
    type: Literal["text"] = "text"
    text: str


class ThinkingEvent(Strict):
    """Reasoning the model wrote before (or between) its answer; an
    Anthropic upstream signs it at its end (the client sends it back so)."""

    type: Literal["thinking"] = "thinking"
    text: str
    signature: str | None = None


class RedactedThinkingEvent(Strict):
    """Thinking an Anthropic upstream sent encrypted (safety systems flagged
    it): opaque data, for Anthropic's clients to send back as it came."""

    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


class ToolCallEvent(Strict):
    """One complete call parsed from the reply; `index` counts from 0."""

    type: Literal["tool_call"] = "tool_call"
    index: int
    id: str
    name: str
    arguments: str  # JSON text


class ServerToolEvent(Strict):
    """A tool the worker ran itself on an MCP server (never the client's to
    run): `phase` "call" when it starts, "result" when it ended, with
    `status` ok, error (the tool failed, its server is down) or timeout.
    Writers show it only where standard clients look past it."""

    type: Literal["server_tool"] = "server_tool"
    phase: Literal["call", "result"]
    id: str
    server: str
    name: str
    arguments: str = "{}"  # JSON text
    status: Literal["ok", "error", "timeout"] | None = None
    seconds: float | None = None
    result_chars: int | None = None  # before truncation
    truncated: bool = False

    def summary(self) -> dict:
        """The fields a client extension or a log shows (no result text)."""
        return self.model_dump(exclude={"type"}, exclude_none=True)


class FinishReason(StrEnum):
    """Why a job ended: its DoneEvent's reason and its record's. On the wire a
    reason is any string (DoneEvent.reason is typed str), so a reason the
    next release adds does not break this one (writers map a reason they do
    not know to "stop")."""

    STOP = "stop"
    LENGTH = "length"  # its token limit
    TOOL_CALLS = "tool_calls"  # it called the client's tools
    STEP_LIMIT = "step_limit"  # a final answer forced by the tool-round limit (clients see "stop")
    # An emulated call of a declared tool that could not be read: the reply
    # went on as text (clients see "stop", Gemini's MALFORMED_FUNCTION_CALL)
    MALFORMED_CALL = "malformed_call"
    ABORTED = "aborted"  # its client left, or it was superseded
    LOAD = "load"  # an empty request that only loaded the model
    UNLOAD = "unload"  # ... or, with keep_alive 0, unloaded it
    COUNTED = "counted"  # a count_only job's prompt was counted
    EXPIRED = "expired"  # (records only) no worker started it in time
    ERROR = "error"  # (records only) it failed; its ErrorEvent says why


class EmbeddingEvent(Strict):
    """An embedding job's vectors, one per input, as the model made them
    (not normalised)."""

    type: Literal["embedding"] = "embedding"
    vectors: list[list[float]]


class DoneEvent(Strict):
    type: Literal["done"] = "done"
    reason: str  # a FinishReason (see there why a str)
    usage: Usage = Field(default_factory=Usage)
    timings: Timings = Field(default_factory=Timings)
    # The client's stop sequence that ended the reply (reason "stop"), where
    # the backend can tell (Anthropic's clients are told which one fired).
    stop_sequence: str | None = None
    rounds: int = 0  # model rounds it took (more than one: it ran server tools between them; 0: not told)
    # What the guard found in what went to its model: {"action": "redacted", "kinds": {kind: count}} (no value)
    guard: dict | None = None


class ErrorEvent(Strict):
    type: Literal["error"] = "error"
    message: str
    status: int = 500
    retry_after: int | None = None  # seconds, when the upstream said so
    # A prompt over the model's context: its size and the most the model
    # takes, in tokens (each dialect words this error its own way).
    prompt_tokens: int | None = None
    context_tokens: int | None = None
    guard: dict | None = None  # a refusal's findings, as DoneEvent.guard

    @classmethod
    def of(cls, error: SwitchboardError) -> "ErrorEvent":
        sizes = {"prompt_tokens": error.prompt_tokens, "context_tokens": error.context_tokens} \
            if isinstance(error, PromptTooLong) else {}
        return cls(message=error.message, status=error.status, retry_after=error.retry_after, **sizes)

    def error(self) -> SwitchboardError:
        """The typed error again, on the web side, for the client's dialect to render."""
        if self.prompt_tokens is not None and self.context_tokens is not None:
            return PromptTooLong(self.message, self.prompt_tokens, self.context_tokens)
        return SwitchboardError(self.message, self.status, retry_after=self.retry_after)


class KeepAliveEvent(Strict):
    """Made by the web process while a job is silent (never published): each
    dialect's writer turns it into its keep-alive frame."""

    type: Literal["keepalive"] = "keepalive"


class UnknownEvent(Strict):
    """An event of a type this reader does not know (a newer worker sent it):
    skipped by the web process."""

    type: str


Event = Annotated[
    Union[PromptEvent, TextEvent, ThinkingEvent, RedactedThinkingEvent, ToolCallEvent, ServerToolEvent,
          EmbeddingEvent, DoneEvent, ErrorEvent],
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
_KNOWN_TYPES = {kind.model_fields["type"].default for kind in typing.get_args(typing.get_args(Event)[0])}


def encode_event(event: Event) -> bytes:
    return event.model_dump_json().encode()


def is_text_payload(payload: bytes) -> bool:
    """Cheaper than decoding: pydantic writes fields in declaration order,
    so a text event's JSON starts with its type."""
    return payload.startswith(b'{"type":"text"')


def decode_event(payload: bytes | str) -> Event | UnknownEvent:
    try:
        return EVENT_ADAPTER.validate_json(payload)
    except ValidationError:
        unknown = UnknownEvent.model_validate_json(payload)  # no type at all: a malformed event, raised
        if unknown.type in _KNOWN_TYPES:
            raise
        return unknown
