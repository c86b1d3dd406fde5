"""Ollama dialect mappings, both directions side by side:

- client side: an /api/chat or /api/generate request -> Job
- upstream side: a Job -> the request an upstream Ollama server gets

Ollama's tool calls carry object arguments and no ids, and its tool results
name the tool: both are converted to and from our JSON-text, id-matched form.
Sampling options share one table, so a new option is one change here.
"""
from __future__ import annotations

import re
from typing import Mapping

from dialects.common import stop_list
from dialects.ollama_schemas import ChatRequest, GenerateRequest, Message as WireMessage, Options
from dialects.tools import arguments_text, to_tool_specs, tool_definitions
from dialects.images import from_base64
from dialects.hints import Hints, read
from protocol.contract import (
    IMAGES_VERSION, Job, Message, PromptSpec, SamplingOptions, ToolCall, json_object, new_call_id,
)
from protocol.errors import InvalidRequest

# Ollama option -> SamplingOptions field, both ways (stop is a list on our
# side; num_predict <= 0 means "no limit" in Ollama).
OPTION_FIELDS = {"num_predict": "max_tokens", "temperature": "temperature", "top_p": "top_p", "top_k": "top_k",
                 "min_p": "min_p", "seed": "seed", "repeat_penalty": "repeat_penalty", "num_ctx": "num_ctx"}


# --- options, both directions --------------------------------------------------------
def to_sampling(options: Options | None) -> SamplingOptions:
    if options is None:
        return SamplingOptions()
    values = {ours: getattr(options, theirs) for theirs, ours in OPTION_FIELDS.items()}
    if values["max_tokens"] is not None and values["max_tokens"] < 1:
        values["max_tokens"] = None
    return SamplingOptions(stop=stop_list(options.stop), **values)


def from_sampling(options: SamplingOptions) -> dict:
    wire = {theirs: value for theirs, ours in OPTION_FIELDS.items() if (value := getattr(options, ours)) is not None}
    return wire | ({"stop": options.stop} if options.stop else {})


# --- client side: request -> Job -----------------------------------------------------
def to_message(message: WireMessage, index: int = 0) -> Message:
    # Ollama's calls carry no ids; results name the tool instead (tool_name).
    calls = [ToolCall(id=c.id or new_call_id(), name=c.function.name, arguments=arguments_text(c.function.arguments))
             for c in message.tool_calls or []]
    images = [from_base64(data, f"messages.{index}.images.{n}") for n, data in enumerate(message.images or [])]
    return Message(role=message.role, content=message.content, tool_calls=calls, images=images,
                   tool_call_id=message.tool_call_id, tool_name=message.tool_name)


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
MAX_KEEP_ALIVE_SECONDS = 10 * 365 * 24 * 3600  # longer is "forever": say so with a negative value


def keep_alive_seconds(value: str | int | float | None) -> float | None:
    """Ollama's keep_alive: seconds as a number, or a Go duration ("5m",
    "1h30m", "-1"); negative keeps the model loaded for good."""
    seconds = _keep_alive(value)
    if seconds is not None and not -MAX_KEEP_ALIVE_SECONDS <= seconds <= MAX_KEEP_ALIVE_SECONDS:
        raise InvalidRequest(f"keep_alive: {value!r} is longer than 10 years; use a negative value to keep the "
                             "model loaded for good", param="keep_alive")
    return seconds


def _keep_alive(value: str | int | float | None) -> float | None:
    if isinstance(value, int) and abs(value) > MAX_KEEP_ALIVE_SECONDS:  # too large for a float, maybe
        return float("inf") if value > 0 else float("-inf")
    if value is None or isinstance(value, (int, float)):
        return None if value is None else float(value)
    text = value.strip()
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("+-")
    try:
        return sign * float(body)
    except ValueError:
        pass
    parts = _DURATION.findall(body)
    if not parts or "".join(n + u for n, u in parts) != body:
        raise InvalidRequest(f"keep_alive: invalid duration {value!r}", param="keep_alive")
    return sign * sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


def _no_images(model: str, images: list | None, field: str, capabilities: list[str]) -> None:
    if images and "vision" not in capabilities:
        raise InvalidRequest(f'{field}: "{model}" does not support images (it has no vision capability)', param=field)


def _no_thinking(model: str, think, capabilities: list[str]) -> None:
    """Ollama's answer when a model without thinking is asked to think."""
    if think and "thinking" not in capabilities:
        raise InvalidRequest(f'"{model}" does not support thinking', param="think")


def job_version(messages: list[Message]) -> int:
    """Images need a worker that knows them (see protocol.contract)."""
    return IMAGES_VERSION if any(m.images for m in messages) else 1


def hints(request, headers: Mapping[str, str]) -> Hints:
    """Its routing hints (dialects/hints.py): the client's session, whether it is background work."""
    return read(headers, request.model)


def chat_to_job(request: ChatRequest, job_id: str, model: str, capabilities: list[str]) -> Job:
    _no_thinking(request.model, request.think, capabilities)
    for i, message in enumerate(request.messages):
        _no_images(request.model, message.images, f"messages.{i}.images", capabilities)
    messages = [to_message(m, i) for i, m in enumerate(request.messages)]
    return Job(id=job_id, model=model, messages=messages, options=to_sampling(request.options),
               tools=to_tool_specs(request.tools), format=request.format or None, think=request.think,
               keep_alive=keep_alive_seconds(request.keep_alive), version=job_version(messages))


def generate_to_job(request: GenerateRequest, job_id: str, model: str, capabilities: list[str]) -> Job:
    """Ollama's rules: raw excludes template, system and context; a suffix
    needs the insert capability; the prompt is built in the worker."""
    if request.raw and (request.template or request.system or request.context):
        raise InvalidRequest("raw mode does not support template, system, or context")
    if request.suffix and "insert" not in capabilities:
        raise InvalidRequest(f'"{request.model}" does not support insert', param="suffix")
    _no_thinking(request.model, request.think, capabilities)
    _no_images(request.model, request.images, "images", capabilities)
    images = [from_base64(data, f"images.{n}") for n, data in enumerate(request.images or [])]
    spec = PromptSpec(prompt=request.prompt, suffix=request.suffix, system=request.system,
                      template=request.template, raw=request.raw, images=images)
    return Job(id=job_id, model=model, prompt=spec, options=to_sampling(request.options),
               format=request.format or None, keep_alive=keep_alive_seconds(request.keep_alive), think=request.think,
               version=IMAGES_VERSION if images else 1)


# --- upstream side: Job -> request ---------------------------------------------------
def _wire_messages(messages: list[Message]) -> list[dict]:
    names = {c.id: c.name for m in messages for c in m.tool_calls}
    wire = []
    for message in messages:
        item: dict = {"role": message.role, "content": message.content}
        if message.tool_calls:
            item["tool_calls"] = [{"function": {"name": c.name, "arguments": json_object(c.arguments)}}
                                  for c in message.tool_calls]
        if message.role == "tool":
            item["tool_name"] = message.tool_name or names.get(message.tool_call_id or "", "")
        if message.images:
            item["images"] = [image.data for image in message.images]
        wire.append(item)
    return wire


def upstream_request(job: Job, upstream_model: str) -> tuple[str, dict]:
    """Chat jobs go to /api/chat, raw prompts to /api/generate (raw: true)."""
    body = {"model": upstream_model, "stream": True, "options": from_sampling(job.options)}
    if job.format is not None:
        body["format"] = job.format
    if job.keep_alive is not None:
        body["keep_alive"] = job.keep_alive
    if job.think is not None:
        body["think"] = job.think
    if job.prompt is not None:
        return "/api/generate", body | {"prompt": job.prompt.prompt, "raw": True}
    body["messages"] = _wire_messages(job.messages)
    if job.tools:
        body["tools"] = tool_definitions(job.tools)
    return "/api/chat", body
