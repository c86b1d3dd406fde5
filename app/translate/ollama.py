"""Ollama dialect: requests -> Job, events -> /api/chat and /api/generate objects."""
from __future__ import annotations

import re
from datetime import datetime, timezone

from app.errors import ApiError
from app.schemas.common import stop_list
from app.schemas.ollama import ChatRequest, GenerateRequest, Message as WireMessage, Options
from app.translate.tools import arguments_text, to_tool_specs
from workers.contract import (
    DoneEvent, Job, Message, PromptSpec, SamplingOptions, ToolCall, ToolCallEvent, json_object, new_call_id,
)


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def to_sampling(options: Options | None) -> SamplingOptions:
    if options is None:
        return SamplingOptions()
    limit = options.num_predict if options.num_predict and options.num_predict > 0 else None
    return SamplingOptions(
        max_tokens=limit,
        temperature=options.temperature,
        top_p=options.top_p,
        top_k=options.top_k,
        min_p=options.min_p,
        seed=options.seed,
        stop=stop_list(options.stop),
        repeat_penalty=options.repeat_penalty,
        num_ctx=options.num_ctx,
    )


def to_message(message: WireMessage) -> Message:
    # Ollama's calls carry no ids; results name the tool instead (tool_name).
    calls = [ToolCall(id=c.id or new_call_id(), name=c.function.name, arguments=arguments_text(c.function.arguments))
             for c in message.tool_calls or []]
    return Message(role=message.role, content=message.content, tool_calls=calls,
                   tool_call_id=message.tool_call_id, tool_name=message.tool_name)


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}


def keep_alive_seconds(value: str | int | float | None) -> float | None:
    """Ollama's keep_alive: seconds as a number, or a Go duration ("5m",
    "1h30m", "-1"); negative keeps the model loaded for good."""
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
        raise ApiError(400, f"keep_alive: invalid duration {value!r}", "keep_alive")
    return sign * sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


def _no_images(model: str, images: list | None, field: str) -> None:
    if images:
        raise ApiError(400, f'{field}: "{model}" does not support images (it has no vision capability)', field)


def chat_to_job(request: ChatRequest, job_id: str, model: str) -> Job:
    for i, message in enumerate(request.messages):
        _no_images(request.model, message.images, f"messages.{i}.images")
    messages = [to_message(m) for m in request.messages]
    return Job(id=job_id, model=model, messages=messages, options=to_sampling(request.options),
               tools=to_tool_specs(request.tools), format=request.format or None,
               keep_alive=keep_alive_seconds(request.keep_alive))


def tool_call_object(call: ToolCallEvent) -> dict:
    return {"id": call.id, "function": {"index": call.index, "name": call.name,
                                        "arguments": json_object(call.arguments)}}


def generate_to_job(request: GenerateRequest, job_id: str, model: str, capabilities: list[str]) -> Job:
    """Ollama's rules: raw excludes template, system and context; a suffix
    needs the insert capability; the prompt is built in the worker."""
    if request.raw and (request.template or request.system or request.context):
        raise ApiError(400, "raw mode does not support template, system, or context")
    if request.suffix and "insert" not in capabilities:
        raise ApiError(400, f'"{request.model}" does not support insert', "suffix")
    _no_images(request.model, request.images, "images")
    spec = PromptSpec(prompt=request.prompt, suffix=request.suffix, system=request.system,
                      template=request.template, raw=request.raw)
    return Job(id=job_id, model=model, prompt=spec, options=to_sampling(request.options),
               format=request.format or None, keep_alive=keep_alive_seconds(request.keep_alive))


def done_fields(done: DoneEvent) -> dict:
    """The statistics Ollama puts on its last line, in nanoseconds."""
    return {
        # Ollama says "stop" after tool calls too
        "done_reason": done.reason if done.reason in ("length", "load") else "stop",
        "total_duration": done.timings.total_ns,
        "load_duration": done.timings.load_ns,
        "prompt_eval_count": done.usage.prompt_tokens,
        "prompt_eval_duration": done.timings.prompt_eval_ns,
        "eval_count": done.usage.completion_tokens,
        "eval_duration": done.timings.eval_ns,
    }


class _Lines:
    """The objects of one reply; subclasses say where the text goes."""

    def __init__(self, model: str):
        self.model = model

    def _body(self, text: str) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def _line(self, text: str, done: bool) -> dict:
        return {"model": self.model, "created_at": now_rfc3339(), **self._body(text), "done": done}

    def text(self, text: str) -> dict:
        return self._line(text, False)

    def done(self, done: DoneEvent, content: str = "", calls: list[ToolCallEvent] = ()) -> dict:
        return self._line(content, True) | done_fields(done)


class ChatLines(_Lines):
    """/api/chat: every line carries message.role (the ollama client needs it
    on the last line too); tool-call arguments are objects."""

    def _body(self, text: str) -> dict:
        return {"message": {"role": "assistant", "content": text}}

    def tool_call(self, call: ToolCallEvent) -> dict:
        line = self._line("", False)
        line["message"]["tool_calls"] = [tool_call_object(call)]
        return line

    def done(self, done: DoneEvent, content: str = "", calls: list[ToolCallEvent] = ()) -> dict:
        line = super().done(done, content)
        if calls:
            line["message"]["tool_calls"] = [tool_call_object(c) for c in calls]
        return line


class GenerateLines(_Lines):
    """/api/generate: the text is `response`."""

    def _body(self, text: str) -> dict:
        return {"response": text}
