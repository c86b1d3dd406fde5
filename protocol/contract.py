"""The internal job shared by the front end and the workers (its events:
protocol/events.py), and the compatibility policy both follow.

A job does not know which API its request came from: the front end translates
every dialect into a `Job`, and translates the events back. Jobs travel as
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
import string
import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


CONTRACT_VERSION = 4  # what this code speaks
# The release this one must run beside during a rolling deploy (see above):
# the main branch as it last landed. Moved on when this release has landed.
PREVIOUS_RELEASE = "5d9abad"
EMBED_VERSION = 2  # embedding jobs need a worker that knows them
IMAGES_VERSION = 2  # so do images (an older worker would drop them unseen)
COUNT_VERSION = 3  # so do token counts (an older worker would generate a reply)
GUARD_VERSION = 4  # so does a key's own guard policy (an older worker would send its secrets)


class Strict(BaseModel):
    """Tolerant of unknown fields (see the module docstring); the name is
    kept for the strictness of the values, which are still validated."""

    model_config = ConfigDict(extra="ignore")


class ToolSpec(Strict):
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


class ToolCall(Strict):
    id: str
    name: str
    arguments: str = "{}"  # JSON text, as OpenAI carries it


class ToolChoice(Strict):
    mode: Literal["none", "auto", "required", "function"] = "auto"
    name: str | None = None  # for mode "function"


class Image(Strict):
    """An image sent inline (never a URL: the server fetches nothing)."""

    data: str  # base64
    mime: str = "image/png"
    # Where it stood in its message: an offset into the message's text (a
    # client message of text and images is one message); None: after it.
    at: int | None = Field(default=None, ge=0)

    def data_url(self) -> str:
        return f"data:{self.mime};base64,{self.data}"


class Message(Strict):
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


class SamplingOptions(Strict):
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


class PromptSpec(Strict):
    """A completion request (/api/generate, /v1/completions) before it is
    turned into model input, which depends on the model (see workers.prompts)."""

    prompt: str = ""
    suffix: str = ""  # fill-in-the-middle: the text after the cursor
    system: str | None = None
    template: str | None = None  # a request-level (Go-style) template override
    raw: bool = False  # the prompt is the model input, byte for byte
    images: list[Image] = Field(default_factory=list)  # for the user message a chat prompt becomes


class EmbedSpec(Strict):
    """An embedding request: texts (or token ids, OpenAI's token arrays),
    embedded as one batch; the web process normalises and shortens."""

    inputs: list[str] = Field(default_factory=list)
    tokens: list[list[int]] | None = None  # instead of inputs: the model's own token ids
    truncate: bool = True  # an input longer than the context is cut (else refused)


class Job(Strict):
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
    # What of the MCP servers the worker may run for this job: the client's
    # key's grants on the model's servers (catalog.mcp.Grants patterns, each
    # naming its server: "time", "git/git_status"; set by the web process; a
    # worker still offers only servers its model lists).
    server_tools: list[str] = Field(default_factory=list)
    # What the person's server-side tool calls carry and count against, as their gateway calls do (set by
    # the web process): per server, their own credentials as header -> the NAME of the variable holding
    # it on the worker's machine (never a value); their requests and tool calls per minute (empty: uncounted).
    tool_credentials: dict[str, dict[str, str]] = Field(default_factory=dict)
    tool_rates: list[int] = Field(default_factory=list)
    tool_root: str = ""  # the server's public URL as the person reached it (a tool result's link to connect)
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
    # Background work (dialects/hints.py): nobody watches it; it waits behind
    # interactive turns.
    background: bool = False
    # Its client takes the reply whole (not streamed): its events go out with
    # its final one, in one round trip (an older worker, ignoring it, streams them).
    whole: bool = False
    # The W3C trace context of the request's span in the web process (empty:
    # tracing is off there): the worker's spans continue its trace.
    traceparent: str = ""
    # The guard policy its key asks for ("log", "redact", "block"; workers/secrets_guard.py), where stricter
    # than its model's; empty: the model's.
    guard: str = ""

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
