"""Request bodies of the Ollama API (fields in the order of Ollama's docs)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from dialects.common import PositiveInt, Request, Seed, Tool, TopP

Role = Literal["system", "user", "assistant", "tool"]


class Options(Request):
    """Sampling options; options Switchboard does not use are ignored."""

    num_ctx: int | None = Field(default=None, ge=16)
    repeat_penalty: float | None = Field(default=None, ge=0)
    temperature: float | None = Field(default=None, ge=0)
    seed: Seed | None = None
    stop: list[str] | str | None = None
    num_predict: int | None = None  # -1 (or any value below 1) means no limit
    top_k: int | None = Field(default=None, ge=0)
    top_p: TopP | None = None
    min_p: TopP | None = None


class CallFunction(Request):
    name: str
    arguments: dict | str = Field(default_factory=dict)  # an object in Ollama's API
    index: int | None = None


class ToolCallIn(Request):
    id: str | None = None
    function: CallFunction


class Message(Request):
    role: Role
    content: str = ""
    images: list[str] | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None


Think = bool | Literal["high", "medium", "low"] | None


class ChatRequest(Request):
    model: str = Field(min_length=1)
    messages: list[Message] = Field(default_factory=list)  # none: just load the model
    tools: list[Tool] | None = None
    format: Format = None
    options: Options | None = None
    stream: bool = True
    think: Think = None
    keep_alive: str | int | float | None = None


Format = Literal["json", ""] | dict | None


class GenerateRequest(Request):
    model: str = Field(min_length=1)
    prompt: str = ""
    suffix: str = ""
    images: list[str] | None = None
    format: Format = None
    options: Options | None = None
    system: str | None = None
    template: str | None = None
    stream: bool = True
    raw: bool = False
    think: Think = None
    keep_alive: str | int | float | None = None
    context: list[int] | None = None


class NamedModelRequest(Request):
    """Requests that name a model as `model` or, from older clients (Continue
    still does), as `name`."""

    model: str | None = None
    name: str | None = None

    @model_validator(mode="after")
    def _needs_a_name(self) -> "NamedModelRequest":
        if not (self.model or self.name):
            raise ValueError("model is required")
        return self

    @property
    def model_name(self) -> str:
        return self.model or self.name or ""


class ShowRequest(NamedModelRequest):
    """/api/show."""


class PullRequest(NamedModelRequest):
    """/api/pull."""

    insecure: bool = False
    stream: bool = True


__all__ = ["ChatRequest", "GenerateRequest", "Message", "Options", "PullRequest", "ShowRequest", "PositiveInt"]


class EmbedRequest(Request):
    """/api/embed."""

    model: str
    input: str | list[str]
    truncate: bool = True
    dimensions: PositiveInt | None = None
    keep_alive: str | int | float | None = None
    options: Options | None = None


class EmbeddingsRequest(Request):
    """/api/embeddings, the legacy one: one prompt, one raw vector."""

    model: str
    prompt: str
    keep_alive: str | int | float | None = None
    options: Options | None = None
