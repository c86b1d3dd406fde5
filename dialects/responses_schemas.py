"""Request bodies of OpenAI's Responses API (fields in the order of its
docs). Unknown fields are ignored: Codex sends `include`,
`client_metadata` and betas this server has no use for."""
from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, PrivateAttr

from dialects.common import PositiveInt, Request, Temperature, TopP, union_by_type


class InputText(Request):
    type: Literal["input_text", "output_text"]
    text: str


class InputImage(Request):
    type: Literal["input_image"]
    image_url: str | None = None
    file_id: str | None = None


class Refusal(Request):
    type: Literal["refusal"]
    refusal: str


ContentPart = Annotated[Union[InputText, InputImage, Refusal], Field(discriminator="type")]


class MessageItem(Request):
    """A message; the `type` may be left out (the shorthand `{role, content}`)."""

    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[ContentPart]


class FunctionCallItem(Request):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str = "{}"


class FunctionCallOutputItem(Request):
    type: Literal["function_call_output"]
    call_id: str
    output: str | list[ContentPart] = ""


class CustomToolCallItem(Request):
    type: Literal["custom_tool_call"]
    call_id: str
    name: str
    input: str = ""


class CustomToolCallOutputItem(Request):
    type: Literal["custom_tool_call_output"]
    call_id: str
    output: str | list[ContentPart] = ""


class LocalShellCallItem(Request):
    """Codex's older shell tool: a call whose `action` is the command."""

    type: Literal["local_shell_call"]
    call_id: str
    action: dict = Field(default_factory=dict)


class LocalShellCallOutputItem(Request):
    type: Literal["local_shell_call_output"]
    call_id: str
    output: str = ""


class SummaryText(Request):
    type: str = "summary_text"
    text: str = ""


class ReasoningItem(Request):
    type: Literal["reasoning"]
    summary: list[SummaryText] = Field(default_factory=list)
    encrypted_content: str | None = None  # the model's reasoning, as this server sealed it
    _signature: str = PrivateAttr(default="")  # an Anthropic upstream's, from the sealed content


class CompactionTriggerItem(Request):
    """Codex's request to compact the conversation before it (its last item)."""

    type: Literal["compaction_trigger"]


class CompactionItem(Request):
    """A compacted conversation: its summary, as this server sealed it."""

    type: Literal["compaction"]
    encrypted_content: str
    id: str | None = None


class OtherItem(Request):
    """An item this server has no use for (a web search's): passed over."""

    type: str


# An item without a type is a message (the openai SDK sends {"role", "content"}).
InputItem = union_by_type({"message": MessageItem, "function_call": FunctionCallItem,
                           "function_call_output": FunctionCallOutputItem, "custom_tool_call": CustomToolCallItem,
                           "custom_tool_call_output": CustomToolCallOutputItem,
                           "local_shell_call": LocalShellCallItem, "local_shell_call_output": LocalShellCallOutputItem,
                           "reasoning": ReasoningItem, "compaction_trigger": CompactionTriggerItem,
                           "compaction": CompactionItem}, other=OtherItem, absent="message")


class Tool(Request):
    """A function tool (flat: name and parameters beside the type), a
    `custom` (freeform) tool taking one text input, a `namespace` of tools,
    or a tool the server cannot run (`web_search`, ...)."""

    type: str
    name: str | None = None
    description: str | None = None
    parameters: dict | None = None
    strict: bool | None = None
    format: dict | None = None  # a custom tool's: {"type": "grammar", "syntax", "definition"} or {"type": "text"}
    tools: list["Tool"] | None = None  # a namespace's


class NamedToolChoice(Request):
    type: Literal["function", "custom"]
    name: str


class TextFormat(Request):
    type: Literal["text", "json_object", "json_schema"] = "text"
    name: str | None = None
    schema_: dict | None = Field(default=None, alias="schema")
    strict: bool | None = None


class TextOptions(Request):
    format: TextFormat | None = None


class Reasoning(Request):
    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    summary: str | None = None


class ResponsesRequest(Request):
    model: str = Field(min_length=1)
    input: str | list[InputItem] = ""
    instructions: str | None = None
    max_output_tokens: PositiveInt | None = None
    metadata: dict[str, str] | None = None
    parallel_tool_calls: bool = True
    previous_response_id: str | None = None
    include: list[str] = Field(default_factory=list)  # "reasoning.encrypted_content": reasoning sealed
    background: bool = False  # run on without the client's connection (app/background.py)
    # WebSocket only: false asks for no output (Codex warms a socket with its prompt so, then continues it).
    generate: bool = True
    prompt_cache_key: str | None = None
    reasoning: Reasoning | None = None
    store: bool = True
    stream: bool = False
    temperature: Temperature | None = None
    text: TextOptions | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice = "auto"
    tools: list[Tool] = Field(default_factory=list)
    top_p: TopP | None = None
    user: str | None = None
