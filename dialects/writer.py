"""What every dialect's writer offers, and the pieces it writes.

A writer turns one job's events into its dialect's reply objects: the
opening, text, a tool call, the finish, an error after the first byte, a
keep-alive, the closing, and, for a non-streamed request, the whole reply
from a `Transcript`. It holds the little per-reply state (ids, counters) and
knows nothing of framing: app/streaming.py's frame loop encodes what it
returns as SSE, NDJSON or one JSON object.

A writer returns a list of frames: a dict is one data object; `Comment`,
`Marker` and `NamedEvent` are SSE's other shapes (a comment every parser
skips, or with no text an empty line; a literal data line such as `[DONE]`;
an `event:` line).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from protocol.events import DoneEvent, FinishReason, EmbeddingEvent, PromptEvent, ServerToolEvent, ToolCallEvent
from protocol.errors import SwitchboardError


@dataclass(frozen=True)
class Comment:
    text: str


@dataclass(frozen=True)
class Marker:
    data: str


@dataclass(frozen=True)
class NamedEvent:
    name: str
    body: dict


Frame = dict | Comment | Marker | NamedEvent
KEEPALIVE_COMMENT = Comment("keep-alive")
# A keep-alive for readers that take any line but `data:` for JSON (Google's
# Python SDK): an empty line, which every SSE reader passes over.
BLANK_LINE = Comment("")


@dataclass
class Transcript:
    """A reply as a whole: its text, its calls, how it ended."""

    texts: list[str] = field(default_factory=list)
    calls: list[ToolCallEvent] = field(default_factory=list)
    done: DoneEvent | None = None
    server_tools: list[ServerToolEvent] = field(default_factory=list)  # the ended ones
    embedding: EmbeddingEvent | None = None  # an embedding job's vectors
    thoughts: list[str] = field(default_factory=list)  # the model's thinking
    signature: str | None = None  # its signature, from an Anthropic upstream
    redacted: list[str] = field(default_factory=list)  # an Anthropic upstream's encrypted thinking

    @property
    def thinking(self) -> str:
        return "".join(self.thoughts)

    @property
    def text(self) -> str:
        return "".join(self.texts)


# Server-side tool activity and the step limit, in fields and frames that
# standard clients look past: an SSE comment (every parser skips it), an
# extra field on an NDJSON line or a whole reply (clients read the fields
# they know). Tool-call arguments stay JSON text, as OpenAI carries them.
def server_tool_comment(event: ServerToolEvent) -> Comment:
    return Comment("server_tool " + json.dumps(event.summary(), separators=(",", ":"), ensure_ascii=False))


def finish_extensions(done: DoneEvent) -> dict:
    return {"step_limit_reached": True} if done.reason == FinishReason.STEP_LIMIT else {}


def reply_extensions(transcript: Transcript) -> dict:
    fields = finish_extensions(transcript.done)
    if transcript.server_tools:
        fields["server_tools"] = [event.summary() for event in transcript.server_tools]
    return fields


class Writer:
    """Defaults for the operations a dialect does not need."""

    model: str

    def answered_by(self, model: str) -> None:
        """The model that answers is not the one asked for (a fallback): the
        reply names it."""
        self.model = model

    def opening(self) -> list[Frame]:
        return []

    def prompt(self, event: PromptEvent) -> list[Frame]:
        return []  # the prompt's size comes with the finish (a dialect that opens with it: Anthropic's)

    def text(self, text: str) -> list[Frame]:  # pragma: no cover - abstract
        raise NotImplementedError

    def tool_call(self, call: ToolCallEvent) -> list[Frame]:
        return []  # completions carry no tools

    def server_tool(self, event: ServerToolEvent) -> list[Frame]:
        return []  # completions run no tools

    def thinking(self, text: str) -> list[Frame]:
        return []  # a dialect without a thinking field (OpenAI's completions) drops it

    def thinking_signature(self, signature: str) -> list[Frame]:
        return []  # only Anthropic's dialect carries the signature an upstream put on its thinking

    def redacted_thinking(self, data: str) -> list[Frame]:
        return []  # encrypted thinking: only Anthropic's clients can send it back

    def embedding(self, event: EmbeddingEvent) -> None:
        """Vectors come only in whole replies (see the JSON framing's collector)."""

    def finish(self, done: DoneEvent) -> list[Frame]:  # pragma: no cover - abstract
        raise NotImplementedError

    def error(self, error: SwitchboardError) -> list[Frame]:
        """An error after the first byte: in band, in the dialect's error shape."""
        return [self.error_body(error)]

    def keepalive(self) -> list[Frame]:
        return [KEEPALIVE_COMMENT]

    def closing(self) -> list[Frame]:
        return []

    def reply(self, transcript: Transcript) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    @staticmethod
    def error_body(error: SwitchboardError) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError
