"""OpenAI dialect: requests -> Job, events -> chat.completion(.chunk) objects."""
from __future__ import annotations

from app.errors import ApiError
from app.schemas.common import stop_list
from app.schemas.openai import ChatCompletionRequest, ImagePart, Message as WireMessage
from workers.contract import DoneEvent, Job, Message, SamplingOptions

_ROLES = {"developer": "system"}


def content_text(message: WireMessage, index: int) -> str:
    """Content as one string; list-of-parts content is joined in order."""
    if message.content is None or isinstance(message.content, str):
        return message.content or ""
    if any(isinstance(part, ImagePart) for part in message.content):
        raise ApiError(400, f"messages.{index}.content: this model does not support images", f"messages.{index}.content")
    return "".join(part.text for part in message.content)


def chat_to_job(request: ChatCompletionRequest, job_id: str, model: str) -> Job:
    messages = [
        Message(role=_ROLES.get(m.role, m.role), content=content_text(m, i))
        for i, m in enumerate(request.messages)
    ]
    options = SamplingOptions(
        max_tokens=request.max_completion_tokens or request.max_tokens,
        temperature=request.temperature,
        top_p=request.top_p,
        seed=request.seed,
        stop=stop_list(request.stop),
    )
    return Job(id=job_id, model=model, messages=messages, options=options)


def usage(done: DoneEvent) -> dict:
    prompt, completion = done.usage.prompt_tokens, done.usage.completion_tokens
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def finish_reason(done: DoneEvent) -> str:
    return "length" if done.reason == "length" else "stop"


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

    def role(self) -> dict:
        return self._chunk({"role": "assistant", "content": ""})

    def text(self, text: str) -> dict:
        return self._chunk({"content": text})

    def finish(self, done: DoneEvent) -> list[dict]:
        chunks = [self._chunk({}, finish_reason(done))]
        if self.include_usage:
            chunks.append(self.base | {"choices": [], "usage": usage(done)})
        return chunks


def chat_completion(completion_id: str, model: str, created: int, content: str, done: DoneEvent) -> dict:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "logprobs": None,
            "finish_reason": finish_reason(done),
        }],
        "usage": usage(done),
    }
