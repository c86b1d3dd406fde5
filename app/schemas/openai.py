"""Request bodies of the OpenAI API (fields in the order of OpenAI's docs)."""
from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field

from app.schemas.common import PositiveInt, Request, Seed, Temperature, Tool, TopP


class TextPart(Request):
    type: Literal["text"]
    text: str


class ImagePart(Request):
    type: Literal["image_url"]
    image_url: dict | str


ContentPart = Annotated[Union[TextPart, ImagePart], Field(discriminator="type")]


class CallFunction(Request):
    name: str
    arguments: str | dict = ""  # OpenAI sends JSON text; some clients send an object


class ToolCallIn(Request):
    id: str
    type: Literal["function"] = "function"
    function: CallFunction


class Message(Request):
    # "developer" is the newer name OpenAI uses for system instructions.
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: str | None = None
    is_error: bool | None = None  # some agents mark failed tool results so


class FunctionName(Request):
    name: str


class NamedToolChoice(Request):
    type: Literal["function"] = "function"
    function: FunctionName


class StreamOptions(Request):
    include_usage: bool = False


class ChatCompletionRequest(Request):
    messages: list[Message] = Field(min_length=1)
    model: str = Field(min_length=1)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    max_completion_tokens: PositiveInt | None = None
    max_tokens: PositiveInt | None = None
    n: Literal[1] = 1
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    seed: Seed | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: Temperature | None = None
    top_p: TopP | None = None
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    user: str | None = None
