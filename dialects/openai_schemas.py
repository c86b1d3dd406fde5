"""Request bodies of the OpenAI API (fields in the order of OpenAI's docs)."""
from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field

from dialects.common import PositiveInt, Request, Seed, Temperature, Tool, ToolName, TopP, union_by_type


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


class CustomCall(Request):
    name: str
    input: str = ""


class CustomToolCallIn(Request):
    """A call of a freeform tool, as the client replays it: its text whole."""

    id: str
    type: Literal["custom"]
    custom: CustomCall


AnyToolCallIn = union_by_type({"function": ToolCallIn, "custom": CustomToolCallIn}, other=ToolCallIn,
                              absent="function")


class Message(Request):
    # "developer" is the newer name OpenAI uses for system instructions.
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[AnyToolCallIn] | None = None
    tool_call_id: str | None = None
    is_error: bool | None = None  # some agents mark failed tool results so


class FunctionName(Request):
    name: str


class NamedToolChoice(Request):
    type: Literal["function"] = "function"
    function: FunctionName


class NamedCustomChoice(Request):
    type: Literal["custom"]
    custom: FunctionName


class Grammar(Request):
    syntax: str = "lark"  # OpenAI's: "lark" or "regex"
    definition: str


class CustomFormat(Request):
    """`text` (any text) or `grammar`; a kind OpenAI adds later is taken as text."""

    type: str = "text"
    grammar: Grammar | None = None


class CustomDefinition(Request):
    name: ToolName
    description: str | None = None
    format: CustomFormat | None = None


class CustomTool(Request):
    """A freeform tool (Copilot CLI's `apply_patch` for Codex-family models)."""

    type: Literal["custom"]
    custom: CustomDefinition


# An unknown type is refused as a function tool's would be ("Input should be 'function'").
ChatTool = union_by_type({"function": Tool, "custom": CustomTool}, other=Tool, absent="function")
ToolChoiceObject = union_by_type({"function": NamedToolChoice, "custom": NamedCustomChoice}, other=NamedToolChoice,
                                 absent="function")


class StreamOptions(Request):
    include_usage: bool = False


class JsonSchemaFormat(Request):
    name: str = "output"
    schema_: dict = Field(default_factory=dict, alias="schema")
    strict: bool | None = None


class ResponseFormat(Request):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class ChatCompletionRequest(Request):
    messages: list[Message] = Field(min_length=1)
    model: str = Field(min_length=1)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    max_completion_tokens: PositiveInt | None = None
    max_tokens: PositiveInt | None = None
    n: Literal[1] = 1
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    response_format: ResponseFormat | None = None
    seed: Seed | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: Temperature | None = None
    top_p: TopP | None = None
    tools: list[ChatTool] | None = None
    tool_choice: Literal["none", "auto", "required"] | ToolChoiceObject | None = None
    parallel_tool_calls: bool | None = None
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None = None
    prompt_cache_key: str | None = None  # routes prompts sharing a prefix to one cache
    user: str | None = None


class CompletionRequest(Request):
    """/v1/completions: a raw prompt (with `suffix`, fill-in-the-middle)."""

    model: str = Field(min_length=1)
    prompt: str | list[str] = Field(default="")
    echo: Literal[False] = False  # echoing the prompt back is not supported
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    max_tokens: PositiveInt | None = 16  # OpenAI's default for this endpoint
    n: Literal[1] = 1
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    seed: Seed | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    suffix: str | None = None
    temperature: Temperature | None = None
    top_p: TopP | None = None
    user: str | None = None


class EmbeddingsRequest(Request):
    """/v1/embeddings: text, texts, or token arrays (as the openai SDK and
    LangChain's OpenAIEmbeddings send them)."""

    model: str
    input: str | list[str] | list[int] | list[list[int]]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: PositiveInt | None = None
    user: str | None = None
