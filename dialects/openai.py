"""OpenAI dialect mappings, both directions side by side:

- client side: a /v1/chat/completions or /v1/completions request -> Job
- upstream side: a Job -> the request an OpenAI-compatible upstream gets

The sampling fields and the output format are mapped by one table and one
pair of functions each, so a new field is one change here.
"""
from __future__ import annotations

from dialects.common import stop_list
from dialects.images import check_vision, from_url
from dialects.openai_schemas import (
    ChatCompletionRequest, CompletionRequest, ImagePart, Message as WireMessage, NamedToolChoice, ResponseFormat,
    TextPart,
)
from dialects.tools import arguments_text, to_tool_specs, tool_definitions
from protocol.contract import IMAGES_VERSION, Image, Job, Message, PromptSpec, SamplingOptions, ToolCall, ToolChoice
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
def content_texts(message: WireMessage) -> list[str]:
    """Content as texts: one, or one per text part of a list (kept apart, as
    Ollama's OpenAI layer does: each part becomes a message of its own)."""
    if message.content is None or isinstance(message.content, str):
        return [message.content or ""]
    return [part.text for part in message.content if isinstance(part, TextPart)] or [""]


def content_images(message: WireMessage, index: int, vision: bool) -> list[Image]:
    parts = [p for p in message.content or [] if isinstance(p, ImagePart)] if isinstance(message.content, list) else []
    if parts:
        check_vision(vision, f"messages.{index}.content")
    urls = [part.image_url.get("url", "") if isinstance(part.image_url, dict) else part.image_url for part in parts]
    return [from_url(url, f"messages.{index}.content") for url in urls]


def to_messages(message: WireMessage, index: int, vision: bool = False) -> list[Message]:
    """One message per text part; the calls and the images go with the last."""
    calls = [ToolCall(id=c.id, name=c.function.name, arguments=arguments_text(c.function.arguments))
             for c in message.tool_calls or []]
    texts, images = content_texts(message), content_images(message, index, vision)
    last = len(texts) - 1
    return [Message(role=_ROLES.get(message.role, message.role), content=text,
                    tool_calls=calls if n == last else [], images=images if n == last else [],
                    tool_call_id=message.tool_call_id, failed=bool(message.is_error)) for n, text in enumerate(texts)]


def to_tool_choice(request: ChatCompletionRequest) -> ToolChoice:
    choice = request.tool_choice
    if not isinstance(choice, NamedToolChoice):
        return ToolChoice(mode=choice or "auto")
    if choice.function.name not in {t.function.name for t in request.tools or []}:
        raise InvalidRequest(f"tool_choice: function {choice.function.name!r} is not among the tools",
                             param="tool_choice")
    return ToolChoice(mode="function", name=choice.function.name)


def to_think(effort: str | None, capabilities) -> bool | str | None:
    """reasoning_effort, for a model that thinks ("none": no thinking); a
    model that does not ignores it, as OpenAI-compatible servers do."""
    if effort is None or "thinking" not in capabilities:
        return None
    return False if effort == "none" else effort


def chat_to_job(request: ChatCompletionRequest, job_id: str, model: str, capabilities=()) -> Job:
    vision = "vision" in capabilities
    messages = [part for i, m in enumerate(request.messages) for part in to_messages(m, i, vision)]
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
def _wire_message(message: Message) -> dict:
    wire: dict = {"role": message.role, "content": message.content}
    if message.images:  # OpenAI's content parts: the text, then each image as a data URL
        wire["content"] = [{"type": "text", "text": message.content}] + [
            {"type": "image_url", "image_url": {"url": image.data_url()}} for image in message.images]
    if message.tool_calls:
        wire["content"] = message.content or None
        wire["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                              for c in message.tool_calls]
    if message.role == "tool":
        wire["tool_call_id"] = message.tool_call_id or ""
    return wire


def _wire_tool_choice(choice: ToolChoice):
    if choice.mode == "function":
        return {"type": "function", "function": {"name": choice.name}}
    return choice.mode


def upstream_request(job: Job, upstream_model: str) -> tuple[str, dict]:
    """Chat jobs go to /chat/completions, raw prompts to /completions; always
    streamed, asking for usage in the stream."""
    if job.prompt is not None:
        path, body = "/completions", {"model": upstream_model, "prompt": job.prompt.prompt}
    else:
        path, body = "/chat/completions", {"model": upstream_model,
                                           "messages": [_wire_message(m) for m in job.messages],
                                           "response_format": from_format(job.format)}
    body |= {"stream": True, "stream_options": {"include_usage": True}} | from_sampling(job.options)
    if isinstance(job.think, str):  # a level: OpenAI's (and vLLM's, Ollama's) reasoning_effort
        body["reasoning_effort"] = job.think
    if job.tools:
        body["tools"] = tool_definitions(job.tools)
        body["tool_choice"] = _wire_tool_choice(job.tool_choice)
        if not job.parallel_tool_calls:
            body["parallel_tool_calls"] = False
    return path, {k: v for k, v in body.items() if v is not None}
