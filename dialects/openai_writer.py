"""OpenAI dialect writers: chat.completion(.chunk) and text_completion
objects, and OpenAI's error object."""
from __future__ import annotations

from dialects.tools import custom_input
from dialects.writer import (
    Frame, Marker, Transcript, Writer, finish_extensions, reply_extensions, server_tool_comment,
)
from protocol.events import DoneEvent, FinishReason, ServerToolEvent, ToolCallEvent
from protocol.errors import SwitchboardError

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}
DONE = Marker("[DONE]")


def error_body(error: SwitchboardError) -> dict:
    kind = _ERROR_TYPES.get(error.status, "server_error" if error.status >= 500 else "invalid_request_error")
    return {"error": {"message": error.message, "type": kind, "param": error.param, "code": None}}


def usage(done: DoneEvent) -> dict:
    prompt, completion = done.usage.prompt_tokens, done.usage.completion_tokens
    counts = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if done.usage.cached_tokens is not None:  # OpenAI's field for prompt tokens served from its cache
        counts["prompt_tokens_details"] = {"cached_tokens": done.usage.cached_tokens}
    if done.usage.reasoning_tokens:
        counts["completion_tokens_details"] = {"reasoning_tokens": done.usage.reasoning_tokens}
    return counts


def finish_reason(done: DoneEvent) -> str:
    return done.reason if done.reason in (FinishReason.LENGTH, FinishReason.TOOL_CALLS) else "stop"


def tool_call_object(call: ToolCallEvent, custom: frozenset[str] = frozenset()) -> dict:
    """A function's call, or a custom (freeform) tool's with its text whole."""
    if call.name in custom:
        return {"id": call.id, "type": "custom", "custom": {"name": call.name, "input": custom_input(call.arguments)}}
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


class _OpenAIWriter(Writer):
    object_name = ""

    def __init__(self, completion_id: str, model: str, created: int, include_usage: bool = False):
        self.base = {"id": completion_id, "object": self.object_name, "created": created, "model": model}
        self.include_usage = include_usage

    def answered_by(self, model: str) -> None:
        self.base["model"] = model

    def _usage_chunk(self, done: DoneEvent) -> list[Frame]:
        return [self.base | {"choices": [], "usage": usage(done)}] if self.include_usage else []

    def closing(self) -> list[Frame]:
        return [DONE]  # after an error too

    error_body = staticmethod(error_body)


class ChatWriter(_OpenAIWriter):
    """The chunks of one streamed chat completion, in order: role, content...,
    finish (empty delta), then usage when the client asked for it."""

    object_name = "chat.completion.chunk"

    def __init__(self, completion_id: str, model: str, created: int, include_usage: bool = False,
                 custom_tools: frozenset[str] = frozenset()):
        super().__init__(completion_id, model, created, include_usage)
        self.custom_tools = custom_tools  # the request's custom tools: their calls are written as such

    def _chunk(self, delta: dict, finish: str | None = None) -> dict:
        chunk = self.base | {"choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        if self.include_usage:
            chunk["usage"] = None  # as OpenAI does: only the last chunk carries usage
        return chunk

    def opening(self) -> list[Frame]:
        return [self._chunk({"role": "assistant", "content": ""})]

    def text(self, text: str) -> list[Frame]:
        return [self._chunk({"content": text})]

    def thinking(self, text: str) -> list[Frame]:
        """vLLM's and DeepSeek's field, which the openai SDK keeps as an extra."""
        return [self._chunk({"reasoning_content": text})]

    def tool_call(self, call: ToolCallEvent) -> list[Frame]:
        """One call as two pieces: Copilot joins pieces by id (a piece without
        one extends the latest call), the openai SDK by index; so the first
        piece has index, id, type, name and empty arguments, the second only
        index and arguments. A custom tool's call has the same two pieces,
        its text in `custom.input` (as the openai SDKs accumulate it)."""
        kind = "custom" if call.name in self.custom_tools else "function"
        field, text = ("input", custom_input(call.arguments)) if kind == "custom" else ("arguments", call.arguments)
        head = {"index": call.index, "id": call.id, "type": kind, kind: {"name": call.name, field: ""}}
        body = {"index": call.index, kind: {field: text}}
        return [self._chunk({"tool_calls": [head]}), self._chunk({"tool_calls": [body]})]

    def server_tool(self, event: ServerToolEvent) -> list[Frame]:
        """A comment, never a tool_calls delta: the client would run it."""
        return [server_tool_comment(event)]

    def finish(self, done: DoneEvent) -> list[Frame]:
        return [self._chunk({}, finish_reason(done)) | finish_extensions(done)] + self._usage_chunk(done)

    def error(self, error: SwitchboardError) -> list[Frame]:
        """An error after the first byte: OpenAI's error object (the openai
        SDKs raise APIError with its message), then the pending answer closed
        with finish_reason "error". Copilot (src/platform/networking/node/
        stream.ts, SSEProcessor.processSSE) turns the error object into a
        ServerError completion carrying the error, and [DONE] would otherwise
        close the answer opened by the role chunk as an ordinary finish
        (finishSolutions, reason "DONE"); chatMLFetcher.ts judges the reply by
        its first completion (completions.at(0): ServerError -> Failed with
        streamError), which the BYOK provider shows (byok/node/
        openAIEndpoint.ts, hydrateBYOKErrorMessages)."""
        return [error_body(error), self._chunk({}, "error")]

    def reply(self, transcript: Transcript) -> dict:
        calls = transcript.calls
        message = {"role": "assistant", "content": transcript.text or (None if calls else "")}
        if transcript.thoughts:
            message["reasoning_content"] = transcript.thinking
        if calls:
            message["tool_calls"] = [tool_call_object(c, self.custom_tools) for c in calls]
        return self.base | {
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": finish_reason(transcript.done)}],
            "usage": usage(transcript.done),
        } | reply_extensions(transcript)


class CompletionWriter(_OpenAIWriter):
    """The chunks of one streamed /v1/completions reply: text pieces, one
    with finish_reason, then usage when asked for."""

    object_name = "text_completion"

    def _chunk(self, text: str, finish: str | None) -> dict:
        return self.base | {"choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": finish}]}

    def text(self, text: str) -> list[Frame]:
        return [self._chunk(text, None)]

    def finish(self, done: DoneEvent) -> list[Frame]:
        return [self._chunk("", finish_reason(done))] + self._usage_chunk(done)

    def reply(self, transcript: Transcript) -> dict:
        return self._chunk(transcript.text, finish_reason(transcript.done)) | {"usage": usage(transcript.done)}
