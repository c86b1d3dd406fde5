"""Request bodies of Anthropic's Messages API (fields in the order of its
docs). Unknown fields are ignored: Claude Code sends `context_management`,
`output_config` and betas this server has no use for."""
from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field

from dialects.common import PositiveInt, Request, union_by_type


class TextBlock(Request):
    type: Literal["text"]
    text: str


class ImageSource(Request):
    type: Literal["base64", "url", "file"]
    media_type: str | None = None
    data: str | None = None
    url: str | None = None


class ImageBlock(Request):
    type: Literal["image"]
    source: ImageSource


class ToolUseBlock(Request):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict = Field(default_factory=dict)


class ToolResultBlock(Request):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[Annotated[Union[TextBlock, ImageBlock], Field(discriminator="type")]] = ""
    is_error: bool = False


class ThinkingBlock(Request):
    type: Literal["thinking"]
    thinking: str
    signature: str = ""


class RedactedThinkingBlock(Request):
    type: Literal["redacted_thinking"]
    data: str


class OtherBlock(Request):
    """A block this server has no use for (Anthropic's server tools' blocks,
    documents): refused where it would change the answer, else passed over."""

    type: str


ContentBlock = union_by_type({"text": TextBlock, "image": ImageBlock, "tool_use": ToolUseBlock,
                              "tool_result": ToolResultBlock, "thinking": ThinkingBlock,
                              "redacted_thinking": RedactedThinkingBlock}, other=OtherBlock)


class Message(Request):
    # "system" inside messages: Claude Code 2.1.154+ ends every request with one.
    role: Literal["user", "assistant", "system"]
    content: str | list[ContentBlock]


class Tool(Request):
    """A client tool (`input_schema`), or one of Anthropic's server tools
    (a `type` such as web_search_20250305), which this server cannot run."""

    type: str | None = None
    name: str = Field(min_length=1, max_length=128)
    description: str | None = None
    input_schema: dict | None = None

    @property
    def is_client_tool(self) -> bool:
        return self.type in (None, "custom")


class ToolChoice(Request):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool = False


class Metadata(Request):
    user_id: str | None = None


class OutputConfig(Request):
    effort: Literal["low", "medium", "high", "max"] | None = None


class Thinking(Request):
    type: Literal["enabled", "disabled", "adaptive"]
    budget_tokens: int | None = None


class CountTokensRequest(Request):
    """/v1/messages/count_tokens: the conversation of a Messages request."""

    model: str = Field(min_length=1)
    messages: list[Message] = Field(min_length=1)
    system: str | list[TextBlock] | None = None
    thinking: Thinking | None = None
    tool_choice: ToolChoice | None = None
    tools: list[Tool] | None = None


class MessagesRequest(CountTokensRequest):
    max_tokens: PositiveInt
    metadata: Metadata | None = None
    output_config: OutputConfig | None = None
    stop_sequences: list[str] | None = None
    stream: bool = False
    temperature: float | None = Field(default=None, ge=0, le=1)
    top_k: int | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, ge=0, le=1)
