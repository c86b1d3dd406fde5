"""OpenAI dialect mappings, both directions side by side:

- client side: a /v1/chat/completions or /v1/completions request -> Job
- upstream side: a Job -> the request an OpenAI-compatible upstream gets

The sampling fields and the output format are mapped by one table and one
pair of functions each, so a new field is one change here.
"""
from __future__ import annotations

from typing import Mapping

from dialects.common import Tool, stop_list
from dialects.images import check_vision, from_url
from dialects.openai_schemas import (
    ChatCompletionRequest, CompletionRequest, CustomDefinition, CustomTool, CustomToolCallIn, Message as WireMessage,
    NamedCustomChoice, NamedToolChoice, ResponseFormat, TextPart, ToolCallIn,
)
from dialects.parts import interleaved, joined
from dialects.tools import (
    arguments_text, custom_arguments, custom_input, custom_tool_names, custom_tool_spec, tool_definitions,
    to_tool_specs as function_tool_specs,
)
from dialects.hints import Hints, read
from protocol.contract import (
    IMAGES_VERSION, Image, Job, Message, PromptSpec, SamplingOptions, ToolCall, ToolChoice, ToolSpec,
)
from protocol.errors import InvalidRequest

_ROLES = {"developer": "system"}
# OpenAI request field -> SamplingOptions field, both ways (max_tokens is
# mapped apart: chat has two names for it). Stop is a list on our side.
SAMPLING_FIELDS = {"temperature": "temperature", "top_p": "top_p", "seed": "seed"}


# --- sampling and format, both directions ----------------------------------------------
def to_sampling(request: ChatCompletionRequest | CompletionRequest, max_tokens: int | None) -> SamplingOptions:
    values = {ours: getattr(request, theirs) for theirs, ours in SAMPLING_FIELDS.items()}
    return SamplingOptions(max_tokens=max_tokens, stop=stop_list(request.stop), **values)


def from_sampling(options: SamplingOptions) -> dict:
    body = {theirs: getattr(options, ours) for theirs, ours in SAMPLING_FIELDS.items()}
    return body | {"max_tokens": options.max_tokens, "stop": options.stop or None}


def to_format(response_format: ResponseFormat | None):
    if response_format is None or response_format.type == "text":
        return None
    if response_format.type == "json_object":
        return "json"
    if response_format.json_schema is None or not response_format.json_schema.schema_:
        raise InvalidRequest("response_format.json_schema.schema: required for type json_schema",
                             param="response_format.json_schema.schema")
    return response_format.json_schema.schema_


def from_format(output_format) -> dict | None:
    if output_format is None:
        return None
    if output_format == "json":
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": output_format}}


# --- client side: request -> Job -----------------------------------------------------
def _parts(message: WireMessage, index: int, vision: bool) -> list[str | Image]:
    if message.content is None or isinstance(message.content, str):
        return [message.content or ""]
    field = f"messages.{index}.content"
    parts: list[str | Image] = []
    for part in message.content:
        if isinstance(part, TextPart):
            parts.append(part.text)
            continue
        check_vision(vision, field)
        parts.append(from_url(part.image_url.get("url", "") if isinstance(part.image_url, dict) else part.image_url,
                              field))
    return parts


def _call(call: ToolCallIn | CustomToolCallIn) -> ToolCall:
    """A replayed call; a custom tool's text becomes its one `input`."""
    if isinstance(call, CustomToolCallIn):
        return ToolCall(id=call.id, name=call.custom.name, arguments=custom_arguments(call.custom.input))
    return ToolCall(id=call.id, name=call.function.name, arguments=arguments_text(call.function.arguments))


def to_message(message: WireMessage, index: int, vision: bool = False) -> Message:
    """One message, whatever parts it came in (dialects/parts.py)."""
    text, images = joined(_parts(message, index, vision))
    return Message(role=_ROLES.get(message.role, message.role), content=text, images=images,
                   tool_calls=[_call(c) for c in message.tool_calls or []], tool_call_id=message.tool_call_id,
                   failed=bool(message.is_error))


def to_tool_specs(tools: list[Tool | CustomTool] | None) -> list[ToolSpec]:
    """Function tools as they are; custom tools with their format flattened
    to the Responses shape the job carries."""
    specs = []
    for tool in tools or []:
        if isinstance(tool, CustomTool):
            specs.append(custom_tool_spec(tool.custom.name, tool.custom.description or "", _flat_format(tool.custom)))
        else:
            specs += function_tool_specs([tool])
    return specs


def _flat_format(custom: CustomDefinition) -> dict | None:
    form = custom.format
    if form is None:
        return None
    if form.type == "grammar" and form.grammar is not None:
        return {"type": "grammar", "syntax": form.grammar.syntax, "definition": form.grammar.definition}
    return {"type": "text"}


def to_tool_choice(request: ChatCompletionRequest) -> ToolChoice:
    choice = request.tool_choice
    if not isinstance(choice, (NamedToolChoice, NamedCustomChoice)):
        return ToolChoice(mode=choice or "auto")
    name = choice.custom.name if isinstance(choice, NamedCustomChoice) else choice.function.name
    if name not in {(t.custom if isinstance(t, CustomTool) else t.function).name for t in request.tools or []}:
        raise InvalidRequest(f"tool_choice: {choice.type} {name!r} is not among the tools", param="tool_choice")
    return ToolChoice(mode="function", name=name)


def to_think(effort: str | None, capabilities) -> bool | str | None:
    """reasoning_effort, for a model that thinks ("none": no thinking); a
    model that does not ignores it, as OpenAI-compatible servers do."""
    if effort is None or "thinking" not in capabilities:
        return None
    return False if effort == "none" else effort


def hints(request, headers: Mapping[str, str]) -> Hints:
    """Its routing hints (dialects/hints.py): the client's session, whether it is background work."""
    return read(headers, request.model)


def chat_to_job(request: ChatCompletionRequest, job_id: str, model: str, capabilities=()) -> Job:
    vision = "vision" in capabilities
    messages = [to_message(m, i, vision) for i, m in enumerate(request.messages)]
    return Job(id=job_id, model=model, messages=messages,
               options=to_sampling(request, request.max_completion_tokens or request.max_tokens),
               tools=to_tool_specs(request.tools), tool_choice=to_tool_choice(request),
               parallel_tool_calls=request.parallel_tool_calls is not False, format=to_format(request.response_format),
               think=to_think(request.reasoning_effort, capabilities), cache_key=request.prompt_cache_key or "",
               version=IMAGES_VERSION if any(m.images for m in messages) else 1)


def completion_to_job(request: CompletionRequest, job_id: str, model: str, capabilities: list[str]) -> Job:
    """A /v1/completions prompt is raw text; with a suffix, the model's FIM template."""
    prompt = request.prompt
    if isinstance(prompt, list):
        if len(prompt) != 1:
            raise InvalidRequest("prompt: exactly one prompt is supported", param="prompt")
        prompt = prompt[0]
    if request.suffix and "insert" not in capabilities:
        raise InvalidRequest(f'suffix: "{request.model}" does not support insert', param="suffix")
    spec = PromptSpec(prompt=prompt, suffix=request.suffix or "", raw=not request.suffix)
    return Job(id=job_id, model=model, prompt=spec, options=to_sampling(request, request.max_tokens))


# --- upstream side: Job -> request ---------------------------------------------------
def _wire_message(message: Message, custom: frozenset[str]) -> dict:
    wire: dict = {"role": message.role, "content": message.content}
    if message.images:  # OpenAI's content parts: the text and each image (a data URL) where it stood
        wire["content"] = [{"type": "image_url", "image_url": {"url": piece.data_url()}} if isinstance(piece, Image)
                           else {"type": "text", "text": piece} for piece in interleaved(message)]
    if message.tool_calls:
        wire["content"] = message.content or None
        wire["tool_calls"] = [_wire_call(c, custom) for c in message.tool_calls]
    if message.role == "tool":
        wire["tool_call_id"] = message.tool_call_id or ""
    return wire


def _wire_call(call: ToolCall, custom: frozenset[str]) -> dict:
    if call.name in custom:
        return {"id": call.id, "type": "custom", "custom": {"name": call.name, "input": custom_input(call.arguments)}}
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def _wire_tool_choice(choice: ToolChoice, custom: frozenset[str]):
    if choice.mode == "function" and choice.name in custom:
        return {"type": "custom", "custom": {"name": choice.name}}
    if choice.mode == "function":
        return {"type": "function", "function": {"name": choice.name}}
    return choice.mode


def upstream_request(job: Job, upstream_model: str, custom_tools: bool = False) -> tuple[str, dict]:
    """Chat jobs go to /chat/completions, raw prompts to /completions; always
    streamed, asking for usage in the stream. Custom tools go as such to an
    upstream that takes them (`custom_tools`), else as functions of one `input`."""
    custom = custom_tool_names(job.tools) if custom_tools else frozenset()
    if job.prompt is not None:
        path, body = "/completions", {"model": upstream_model, "prompt": job.prompt.prompt}
    else:
        path, body = "/chat/completions", {"model": upstream_model,
                                           "messages": [_wire_message(m, custom) for m in job.messages],
                                           "response_format": from_format(job.format)}
    body |= {"stream": True, "stream_options": {"include_usage": True}} | from_sampling(job.options)
    if isinstance(job.think, str):  # a level: OpenAI's (and vLLM's, Ollama's) reasoning_effort
        body["reasoning_effort"] = job.think
    if job.tools:
        body["tools"] = tool_definitions(job.tools, custom=custom_tools)
        body["tool_choice"] = _wire_tool_choice(job.tool_choice, custom)
        if not job.parallel_tool_calls:
            body["parallel_tool_calls"] = False
    return path, {k: v for k, v in body.items() if v is not None}
