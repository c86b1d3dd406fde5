"""Ollama dialect: requests -> Job, events -> /api/chat and /api/generate objects."""
from __future__ import annotations

from datetime import datetime, timezone

from app.schemas.common import stop_list
from app.schemas.ollama import ChatRequest, GenerateRequest, Options
from workers.contract import DoneEvent, Job, Message, SamplingOptions


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


def chat_to_job(request: ChatRequest, job_id: str, model: str) -> Job:
    messages = [Message(role=m.role, content=m.content) for m in request.messages]
    return Job(id=job_id, model=model, messages=messages, options=to_sampling(request.options))


def generate_to_job(request: GenerateRequest, job_id: str, model: str) -> Job:
    messages = [Message(role="system", content=request.system)] if request.system else []
    messages.append(Message(role="user", content=request.prompt))
    return Job(id=job_id, model=model, messages=messages, options=to_sampling(request.options))


def done_fields(done: DoneEvent) -> dict:
    """The statistics Ollama puts on its last line, in nanoseconds."""
    return {
        "done_reason": "length" if done.reason == "length" else "stop",
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

    def done(self, done: DoneEvent, content: str = "") -> dict:
        return self._line(content, True) | done_fields(done)


class ChatLines(_Lines):
    """/api/chat: every line carries message.role (the ollama client needs it
    on the last line too)."""

    def _body(self, text: str) -> dict:
        return {"message": {"role": "assistant", "content": text}}


class GenerateLines(_Lines):
    """/api/generate: the text is `response`."""

    def _body(self, text: str) -> dict:
        return {"response": text}
