"""OpenAI dialect: requests -> Job, events -> chat.completion(.chunk) objects."""
from __future__ import annotations

from app.errors import ApiError
from app.schemas.common import stop_list
from app.schemas.openai import (
    ChatCompletionRequest, CompletionRequest, ImagePart, Message as WireMessage, NamedToolChoice, ResponseFormat,
)
from app.translate.tools import arguments_text, to_tool_specs
from workers.contract import (
    DoneEvent, Job, Message, PromptSpec, SamplingOptions, ToolCall, ToolCallEvent, ToolChoice,
)

_ROLES = {"developer": "system"}


def content_text(message: WireMessage, index: int) -> str:
    """Content as one string; list-of-parts content is joined in order."""
    if message.content is None or isinstance(message.content, str):
        return message.content or ""
    if any(isinstance(part, ImagePart) for part in message.content):
        raise ApiError(400, f"messages.{index}.content: this model does not support images", f"messages.{index}.content")
    return "".join(part.text for part in message.content)


def to_message(message: WireMessage, index: int) -> Message:
    calls = [ToolCall(id=c.id, name=c.function.name, arguments=arguments_text(c.function.arguments))
             for c in message.tool_calls or []]
    return Message(role=_ROLES.get(message.role, message.role), content=content_text(message, index),
                   tool_calls=calls, tool_call_id=message.tool_call_id, failed=bool(message.is_error))


def to_tool_choice(request: ChatCompletionRequest) -> ToolChoice:
    choice = request.tool_choice
    if not isinstance(choice, NamedToolChoice):
        return ToolChoice(mode=choice or "auto")
    if choice.function.name not in {t.function.name for t in request.tools or []}:
        raise ApiError(400, f"tool_choice: function {choice.function.name!r} is not among the tools", "tool_choice")
    return ToolChoice(mode="function", name=choice.function.name)


def to_format(response_format: ResponseFormat | None):
    if response_format is None or response_format.type == "text":
        return None
    if response_format.type == "json_object":
        return "json"
    if response_format.json_schema is None or not response_format.json_schema.schema_:
        raise ApiError(400, "response_format.json_schema.schema: required for type json_schema",
                       "response_format.json_schema.schema")
    return response_format.json_schema.schema_


def _sampling(request: ChatCompletionRequest | CompletionRequest, max_tokens: int | None) -> SamplingOptions:
    return SamplingOptions(max_tokens=max_tokens, temperature=request.temperature, top_p=request.top_p,
                           seed=request.seed, stop=stop_list(request.stop))


def chat_to_job(request: ChatCompletionRequest, job_id: str, model: str) -> Job:
    messages = [to_message(m, i) for i, m in enumerate(request.messages)]
    return Job(id=job_id, model=model, messages=messages,
               options=_sampling(request, request.max_completion_tokens or request.max_tokens),
               tools=to_tool_specs(request.tools), tool_choice=to_tool_choice(request),
               format=to_format(request.response_format))


def completion_to_job(request: CompletionRequest, job_id: str, model: str, capabilities: list[str]) -> Job:
    """A /v1/completions prompt is raw text; with a suffix, the model's FIM template."""
    prompt = request.prompt
    if isinstance(prompt, list):
        if len(prompt) != 1:
            raise ApiError(400, "prompt: exactly one prompt is supported", "prompt")
        prompt = prompt[0]
    if request.suffix and "insert" not in capabilities:
        raise ApiError(400, f'suffix: "{request.model}" does not support insert', "suffix")
    spec = PromptSpec(prompt=prompt, suffix=request.suffix or "", raw=not request.suffix)
    return Job(id=job_id, model=model, prompt=spec, options=_sampling(request, request.max_tokens))


def usage(done: DoneEvent) -> dict:
    prompt, completion = done.usage.prompt_tokens, done.usage.completion_tokens
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def finish_reason(done: DoneEvent) -> str:
    return done.reason if done.reason in ("length", "tool_calls") else "stop"


def tool_call_object(call: ToolCallEvent) -> dict:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


class ChatChunks:
    """The chunks of one streamed chat completion, in order: role, content...,
    finish (empty delta), then usage when the client asked for it."""

    def __init__(self, completion_id: str, model: str, created: int, include_usage: bool):
        self.base = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model}
        self.include_usage = include_usage

    def _chunk(self, delta: dict, finish: str | None = None) -> dict:
        chunk = self.base | {"choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        if self.include_usage:
            chunk["usage"] = None  # as OpenAI does: only the last chunk carries usage
        return chunk

    def opening(self) -> list[dict]:
        return [self._chunk({"role": "assistant", "content": ""})]

    def text(self, text: str) -> dict:
        return self._chunk({"content": text})

    def tool_call(self, call: ToolCallEvent) -> list[dict]:
        """One call as two pieces: Copilot joins pieces by id (a piece without
        one extends the latest call), the openai SDK by index; so the first
        piece has index, id, type, name and empty arguments, the second only
        index and arguments."""
        head = {"index": call.index, "id": call.id, "type": "function",
                "function": {"name": call.name, "arguments": ""}}
        body = {"index": call.index, "function": {"arguments": call.arguments}}
        return [self._chunk({"tool_calls": [head]}), self._chunk({"tool_calls": [body]})]

    def finish(self, done: DoneEvent) -> list[dict]:
        chunks = [self._chunk({}, finish_reason(done))]
        if self.include_usage:
            chunks.append(self.base | {"choices": [], "usage": usage(done)})
        return chunks


def chat_completion(completion_id: str, model: str, created: int, content: str, calls: list[ToolCallEvent],
                    done: DoneEvent) -> dict:
    message = {"role": "assistant", "content": content or (None if calls else "")}
    if calls:
        message["tool_calls"] = [tool_call_object(c) for c in calls]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": finish_reason(done),
        }],
        "usage": usage(done),
    }


class CompletionChunks:
    """The chunks of one streamed /v1/completions reply: text pieces, one
    with finish_reason, then usage when asked for."""

    def __init__(self, completion_id: str, model: str, created: int, include_usage: bool):
        self.base = {"id": completion_id, "object": "text_completion", "created": created, "model": model}
        self.include_usage = include_usage

    def _chunk(self, text: str, finish: str | None) -> dict:
        return self.base | {"choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": finish}]}

    def opening(self) -> list[dict]:
        return []  # text completions start with text

    def tool_call(self, call: ToolCallEvent) -> list[dict]:  # pragma: no cover - completions carry no tools
        return []

    def text(self, text: str) -> dict:
        return self._chunk(text, None)

    def finish(self, done: DoneEvent) -> list[dict]:
        chunks = [self._chunk("", finish_reason(done))]
        if self.include_usage:
            chunks.append(self.base | {"choices": [], "usage": usage(done)})
        return chunks


def text_completion(completion_id: str, model: str, created: int, text: str, done: DoneEvent) -> dict:
    return {
        "id": completion_id, "object": "text_completion", "created": created, "model": model,
        "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": finish_reason(done)}],
        "usage": usage(done),
    }
