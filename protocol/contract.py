"""The internal job and event types shared by the front end and the workers.

A job does not know which API its request came from: the front end translates
every dialect into a `Job`, and translates the `Event`s back. Jobs travel as
JSON in the fair queue (jobqueue/fairqueue.py); events as JSON on the job's
reply channel (see `protocol.presence`).

Compatibility policy: a rolling deploy runs this release's processes beside
the previous release's, never an older one's: this web process with the
previous release's workers, and the previous release's web processes with
these workers. `PREVIOUS_RELEASE` names that release (a commit of this
repository); tests/integration/test_rolling_deploy.py runs each half of it
against the other half of this one. Code for releases before it is removed.
Both directions are tolerant: a reader ignores fields it does not know (the
newer side added them) and fills fields the other side did not send with
defaults; an event type a reader does not know is skipped. A change that the
previous release cannot safely ignore bumps `CONTRACT_VERSION`; a job carries
the lowest version that can run it, and a worker refuses a job of a newer
version with a clear error instead of running it wrongly.
"""
from __future__ import annotations

import json
import secrets
import uuid
import string
import typing
from enum import StrEnum
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from protocol.errors import PromptTooLong, SwitchboardError


CONTRACT_VERSION = 3  # what this code speaks
# The release this one must run beside during a rolling deploy (see above):
# the main branch as it last landed. Moved on when this release has landed.
PREVIOUS_RELEASE = "1e6e35f"
EMBED_VERSION = 2  # embedding jobs need a worker that knows them
IMAGES_VERSION = 2  # so do images (an older worker would drop them unseen)
COUNT_VERSION = 3  # so do token counts (an older worker would generate a reply)


class _Strict(BaseModel):
    """Tolerant of unknown fields (see the module docstring); the name is
    kept for the strictness of the values, which are still validated."""

    model_config = ConfigDict(extra="ignore")


class ToolSpec(_Strict):
    """A tool the client offers: a function, whose `parameters` is its JSON
    schema, or a freeform (`custom`) tool taking one text input (OpenAI's
    custom tools, Codex's and Copilot's `apply_patch`). A custom tool is
    also a function of one string parameter `input` (its `parameters`), so a
    model without custom tools, or a worker that does not know `kind`, calls
    it as one; `format` is the client's grammar or text format, passed on to
    an upstream that takes custom tools."""

    name: str
    description: str = ""
    parameters: dict = Field(default_factory=dict)
    kind: Literal["function", "custom"] = "function"
    format: dict | None = None  # a custom tool's: {"type": "grammar", "syntax", "definition"} or {"type": "text"}


_ID_ALPHABET = string.ascii_letters + string.digits


def new_call_id() -> str:
    """`call_` and 24 random alphanumerics, as OpenAI's ids look."""
    return "call_" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(24))


def json_object(text: str) -> dict:
    """Arguments JSON text as an object ({} if it is not one): Ollama's
    dialect carries objects where OpenAI's carries text."""
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class ToolCall(_Strict):
    id: str
    name: str
    arguments: str = "{}"  # JSON text, as OpenAI carries it


class ToolChoice(_Strict):
    mode: Literal["none", "auto", "required", "function"] = "auto"
    name: str | None = None  # for mode "function"


class Image(_Strict):
    """An image sent inline (never a URL: the server fetches nothing)."""

    data: str  # base64
    mime: str = "image/png"
    # Where it stood in its message: an offset into the message's text (a
    # client message of text and images is one message); None: after it.
    at: int | None = Field(default=None, ge=0)

    def data_url(self) -> str:
        return f"data:{self.mime};base64,{self.data}"


class Message(_Strict):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    images: list[Image] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)  # assistant messages
    tool_call_id: str | None = None  # tool messages: the call they answer...
    tool_name: str | None = None  # ...or, from Ollama clients, only its name
    failed: bool = False  # a tool result the client marked as failed
    thinking: str = ""  # an assistant turn's reasoning, passed back (for a model that thinks)
    thinking_signature: str = ""  # its signature, from an Anthropic upstream (which needs it back)
    redacted_thinking: list[str] = Field(default_factory=list)  # an Anthropic upstream's encrypted thinking


class SamplingOptions(_Strict):
    """Generation options in one vocabulary (Ollama's names where they differ)."""

    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, ge=0, le=1)
    top_k: int | None = Field(default=None, ge=0)
    min_p: float | None = Field(default=None, ge=0, le=1)
    seed: int | None = None
    stop: list[str] = Field(default_factory=list)
    repeat_penalty: float | None = Field(default=None, ge=0)
    num_ctx: int | None = Field(default=None, ge=16)


class PromptSpec(_Strict):
    """A completion request (/api/generate, /v1/completions) before it is
    turned into model input, which depends on the model (see workers.prompts)."""

    prompt: str = ""
    suffix: str = ""  # fill-in-the-middle: the text after the cursor
    system: str | None = None
    template: str | None = None  # a request-level (Go-style) template override
    raw: bool = False  # the prompt is the model input, byte for byte
    images: list[Image] = Field(default_factory=list)  # for the user message a chat prompt becomes


class EmbedSpec(_Strict):
    """An embedding request: texts (or token ids, OpenAI's token arrays),
    embedded as one batch; the web process normalises and shortens."""

    inputs: list[str] = Field(default_factory=list)
    tokens: list[list[int]] | None = None  # instead of inputs: the model's own token ids
    truncate: bool = True  # an input longer than the context is cut (else refused)


class Job(_Strict):
    version: int = 1  # the lowest contract version that can run it
    id: str
    model: str
    messages: list[Message] = Field(default_factory=list)
    prompt: PromptSpec | None = None  # completion jobs; chat jobs have messages
    embed: EmbedSpec | None = None  # embedding jobs
    format: Literal["json"] | dict | None = None  # JSON mode, or a JSON schema to follow
    keep_alive: float | None = None  # seconds an idle local model stays loaded; < 0: forever
    options: SamplingOptions = Field(default_factory=SamplingOptions)
    tools: list[ToolSpec] = Field(default_factory=list)
    tool_choice: ToolChoice = Field(default_factory=ToolChoice)
    parallel_tool_calls: bool = True  # False: at most one call in the reply
    # Thinking, as Ollama's `think` says it: True/False, a level ("low",
    # "medium", "high"), or None for the model's default.
    think: bool | str | None = None
    # Set by the worker for its backend (a GBNF grammar forcing a tool call),
    # never by the web process.
    grammar: str | None = None
    # The MCP servers (registry names) whose tools the worker may run for this
    # job: the model's servers that the client's key may use (set by the web
    # process; a worker still offers only servers its model lists).
    server_tools: list[str] = Field(default_factory=list)
    web_id: str = ""  # the web process holding the job: workers abort it when that process is gone
    reply_channel: str = ""  # where its events go (protocol.keys.reply_channel)
    enqueued_at: float = 0.0
    expires_at: float | None = None  # epoch seconds: not started by then, it is dropped
    # The person whose usage the worker counts with a finished job's final
    # write (ledger/usage.py); its web process counts an unfinished one's.
    usage_of: str = ""
    # Only count the prompt's tokens, as the model would get them (Anthropic's
    # count_tokens): the DoneEvent's usage.prompt_tokens, reason "counted".
    count_only: bool = False
    # Publish the prompt's token count as soon as the backend knows it (a
    # PromptEvent before the reply), for dialects that open a reply with it.
    report_prompt: bool = False
    # The client's anthropic-beta header, passed on to an Anthropic upstream
    # (features such as interleaved thinking are asked for by it).
    anthropic_beta: str = ""
    # A client's name for prompts that share a prefix (OpenAI's
    # prompt_cache_key): such jobs go to the worker whose cache holds the
    # last one, whoever sends them; empty: the person's own last job's worker.
    cache_key: str = ""
    # The agent session the job is a turn of: a digest of its person and the
    # client's own id for the session (app/exchange.py; empty: none known).
    # A session's jobs go to the worker or deployment holding its last prefix.
    session: str = ""
    # What it is charged against its person's share, in thousands of tokens,
    # estimated when it was queued (jobqueue/charges.py; 0: not charged by
    # its cost): its worker corrects it by what it cost.
    charge: float = 0.0
    # Background work (app/priority.py): nobody watches it; it waits behind
    # interactive turns.
    background: bool = False
    # The W3C trace context of the request's span in the web process (empty:
    # tracing is off there): the worker's spans continue its trace.
    traceparent: str = ""

    def prompt_characters(self) -> int:
        """How long its input is, in characters: what the model reads of it
        (for an embedding job, its longest input: each is embedded alone)."""
        if self.embed is not None:
            return max((len(text) for text in self.embed.inputs), default=0)
        spec = self.prompt
        prompt = len(spec.prompt) + len(spec.suffix) + len(spec.system or "") + len(spec.template or "") if spec else 0
        messages = sum(len(m.content) + sum(len(c.arguments) for c in m.tool_calls) for m in self.messages)
        tools = sum(len(t.description) + len(str(t.parameters)) for t in self.tools)
        return prompt + messages + tools


def new_job_id() -> str:
    return uuid.uuid4().hex


class Usage(_Strict):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Prompt tokens found already evaluated (a local model's prompt cache);
    # None when the backend keeps no cache.
    cached_tokens: int | None = None
    # Of completion_tokens, those spent thinking.
    reasoning_tokens: int = 0


class Timings(_Strict):
    """Nanoseconds, measured by the worker (Ollama reports these names)."""

    load_ns: int = 0
    prompt_eval_ns: int = 0
    eval_ns: int = 0
    total_ns: int = 0
    queue_ns: int = 0  # from its queueing to a worker's start (0: not told)


class PromptEvent(_Strict):
    """The prompt's tokens, where the backend knows them before the first
    token (echo, a local model, an Anthropic upstream): sent only for a job
    that asks (Job.report_prompt)."""

    type: Literal["prompt"] = "prompt"
    prompt_tokens: int
    cached_tokens: int | None = None


class TextEvent(_Strict):
    type: Literal["text"] = "text"
    text: str


class ThinkingEvent(_Strict):
    """Reasoning the model wrote before (or between) its answer; an
    Anthropic upstream signs it at its end (the client sends it back so)."""

    type: Literal["thinking"] = "thinking"
    text: str
    signature: str | None = None


class RedactedThinkingEvent(_Strict):
    """Thinking an Anthropic upstream sent encrypted (safety systems flagged
    it): opaque data, for Anthropic's clients to send back as it came."""

    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


class ToolCallEvent(_Strict):
    """One complete call parsed from the reply; `index` counts from 0."""

    type: Literal["tool_call"] = "tool_call"
    index: int
    id: str
    name: str
    arguments: str  # JSON text


class ServerToolEvent(_Strict):
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
    ABORTED = "aborted"  # its client left, or it was superseded
    LOAD = "load"  # an empty request that only loaded the model
    UNLOAD = "unload"  # ... or, with keep_alive 0, unloaded it
    COUNTED = "counted"  # a count_only job's prompt was counted
    EXPIRED = "expired"  # (records only) no worker started it in time
    ERROR = "error"  # (records only) it failed; its ErrorEvent says why


class EmbeddingEvent(_Strict):
    """An embedding job's vectors, one per input, as the model made them
    (not normalised)."""

    type: Literal["embedding"] = "embedding"
    vectors: list[list[float]]


class DoneEvent(_Strict):
    type: Literal["done"] = "done"
    reason: str  # a FinishReason (see there why a str)
    usage: Usage = Field(default_factory=Usage)
    timings: Timings = Field(default_factory=Timings)
    # The client's stop sequence that ended the reply (reason "stop"), where
    # the backend can tell (Anthropic's clients are told which one fired).
    stop_sequence: str | None = None
    rounds: int = 0  # model rounds it took (more than one: it ran server tools between them; 0: not told)


class ErrorEvent(_Strict):
    type: Literal["error"] = "error"
    message: str
    status: int = 500
    retry_after: int | None = None  # seconds, when the upstream said so
    # A prompt over the model's context: its size and the most the model
    # takes, in tokens (each dialect words this error its own way).
    prompt_tokens: int | None = None
    context_tokens: int | None = None

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


class KeepAliveEvent(_Strict):
    """Made by the web process while a job is silent (never published): each
    dialect's writer turns it into its keep-alive frame."""

    type: Literal["keepalive"] = "keepalive"


class UnknownEvent(_Strict):
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
