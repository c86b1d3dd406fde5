"""Request bodies of Google's Gemini API (generateContent and its kin), in
the order of its reference. Fields are read by their JSON names
(`systemInstruction`) or their proto names (`system_instruction`): Google's
REST API takes both. Unknown fields are ignored; enums are Google's
capitalised names."""
from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field
from pydantic.alias_generators import to_camel

from dialects.common import Request


class Wire(Request):
    model_config = ConfigDict(extra="ignore", alias_generator=to_camel, populate_by_name=True)


class Blob(Wire):
    mime_type: str = Field(min_length=1)
    data: str  # base64


class FileData(Wire):
    mime_type: str | None = None
    file_uri: str


class FunctionCall(Wire):
    id: str | None = None
    name: str = Field(min_length=1)
    args: dict = Field(default_factory=dict)


class FunctionResponse(Wire):
    id: str | None = None
    name: str = Field(min_length=1)
    response: dict = Field(default_factory=dict)


class Part(Wire):
    """One of `text`, `inlineData`, `functionCall`, `functionResponse` or
    `fileData` (refused: this server fetches nothing); `thought` marks a
    text part as the model's thinking, `thoughtSignature` is opaque."""

    text: str | None = None
    inline_data: Blob | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None
    file_data: FileData | None = None
    thought: bool = False
    thought_signature: str | None = None


class Content(Wire):
    role: Literal["user", "model", "function", "system"] = "user"
    parts: list[Part] = Field(default_factory=list)


class FunctionDeclaration(Wire):
    name: str = Field(min_length=1, max_length=128)
    description: str | None = None
    parameters: dict | None = None  # Google's OpenAPI subset (types in capitals)
    parameters_json_schema: dict | None = None  # or a JSON schema


class Tool(Wire):
    """Functions; Google's own tools (search, code execution, URL context,
    ...) run only at Google: named here to be left out, and said so."""

    function_declarations: list[FunctionDeclaration] | None = None
    google_search: dict | None = None
    google_search_retrieval: dict | None = None
    code_execution: dict | None = None
    url_context: dict | None = None
    google_maps: dict | None = None
    computer_use: dict | None = None
    file_search: dict | None = None


class FunctionCallingConfig(Wire):
    mode: Literal["MODE_UNSPECIFIED", "AUTO", "ANY", "NONE", "VALIDATED"] = "AUTO"
    allowed_function_names: list[str] | None = None


class ToolConfig(Wire):
    function_calling_config: FunctionCallingConfig | None = None


class ThinkingConfig(Wire):
    include_thoughts: bool = False
    thinking_budget: int | None = Field(default=None, ge=-1)  # -1: the model decides; 0: off
    thinking_level: Literal["THINKING_LEVEL_UNSPECIFIED", "MINIMAL", "LOW", "MEDIUM", "HIGH"] | None = None


class GenerationConfig(Wire):
    stop_sequences: list[str] | None = Field(default=None, max_length=5)
    response_mime_type: str | None = None
    response_schema: dict | None = None  # Google's OpenAPI subset
    response_json_schema: dict | None = None
    candidate_count: int | None = Field(default=None, ge=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    top_k: int | None = Field(default=None, ge=0)
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    thinking_config: ThinkingConfig | None = None


class CountableRequest(Wire):
    """What a conversation is: generateContent's body without the model."""

    contents: list[Content] = Field(default_factory=list)
    tools: list[Tool] | None = None
    tool_config: ToolConfig | None = None
    system_instruction: Content | None = None
    generation_config: GenerationConfig | None = None
    cached_content: str | None = None


class GenerateContentRequest(CountableRequest):
    model: str | None = None  # the URL names it; a body's own is ignored
    contents: list[Content] = Field(min_length=1)


class CountTokensRequest(Wire):
    """countTokens: `contents`, or a whole `generateContentRequest`."""

    contents: list[Content] | None = None
    generate_content_request: CountableRequest | None = None


class EmbedContentRequest(Wire):
    model: str | None = None
    content: Content
    task_type: str | None = None
    title: str | None = None
    output_dimensionality: int | None = Field(default=None, ge=1)


class BatchEmbedContentsRequest(Wire):
    requests: list[EmbedContentRequest] = Field(min_length=1)
