"""Ollama dialect: requests -> Job, events -> /api/chat and /api/generate objects."""
from __future__ import annotations

from datetime import datetime, timezone

from app.schemas.common import stop_list
from app.schemas.ollama import ChatRequest, GenerateRequest, Message as WireMessage, Options
from app.translate.tools import arguments_text, to_tool_specs
from workers.contract import DoneEvent, Job, Message, SamplingOptions, ToolCall, ToolCallEvent, json_object, new_call_id


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


def chat_to_job(request: ChatRequest, job_id: str, model: str) -> Job:
    messages = [to_message(m) for m in request.messages]
    return Job(id=job_id, model=model, messages=messages, options=to_sampling(request.options),
               tools=to_tool_specs(request.tools))


def tool_call_object(call: ToolCallEvent) -> dict:
    return {"id": call.id, "function": {"index": call.index, "name": call.name,
                                        "arguments": json_object(call.arguments)}}


def generate_to_job(request: GenerateRequest, job_id: str, model: str) -> Job:
    messages = [Message(role="system", content=request.system)] if request.system else []
    messages.append(Message(role="user", content=request.prompt))
    return Job(id=job_id, model=model, messages=messages, options=to_sampling(request.options))


def done_fields(done: DoneEvent) -> dict:
    """The statistics Ollama puts on its last line, in nanoseconds."""
    return {
        "done_reason": "length" if done.reason == "length" else "stop",  # Ollama says "stop" after tool calls too
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
