"""Ollama dialect writers: the lines of /api/chat and /api/generate, and
Ollama's error object. Every line is a whole JSON object (the framing adds
the newline): the ollama client runs json.loads on each."""
from __future__ import annotations

from datetime import datetime, timezone

from dialects.writer import Frame, Transcript, Writer, finish_extensions, reply_extensions
from protocol.contract import json_object
from protocol.events import DoneEvent, FinishReason, ServerToolEvent, ToolCallEvent
from protocol.errors import SwitchboardError

_OWN_REASONS = (FinishReason.LENGTH, FinishReason.LOAD, FinishReason.UNLOAD)  # Ollama's done_reason has these too


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def error_body(error: SwitchboardError) -> dict:
    return {"error": error.message}


def done_fields(done: DoneEvent) -> dict:
    """The statistics Ollama puts on its last line, in nanoseconds."""
    return {
        # Ollama says "stop" after tool calls too
        "done_reason": done.reason if done.reason in _OWN_REASONS else "stop",
        "total_duration": done.timings.total_ns,
        "load_duration": done.timings.load_ns,
        "prompt_eval_count": done.usage.prompt_tokens,
        "prompt_eval_duration": done.timings.prompt_eval_ns,
        "eval_count": done.usage.completion_tokens,
        "eval_duration": done.timings.eval_ns,
    }


def tool_call_object(call: ToolCallEvent) -> dict:
    return {"id": call.id, "function": {"index": call.index, "name": call.name,
                                        "arguments": json_object(call.arguments)}}


class _OllamaWriter(Writer):
    """The objects of one reply; subclasses say where the text goes."""

    error_body = staticmethod(error_body)

    def __init__(self, model: str):
        self.model = model

    def _body(self, text: str) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def _line(self, text: str, done: bool) -> dict:
        return {"model": self.model, "created_at": now_rfc3339(), **self._body(text), "done": done}

    def text(self, text: str) -> list[Frame]:
        return [self._line(text, False)]

    def thinking(self, text: str) -> list[Frame]:
        return [self._with_thinking(self._line("", False), text)]

    def _with_thinking(self, line: dict, thinking: str) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def keepalive(self) -> list[Frame]:
        return self.text("")  # an empty piece: valid for every NDJSON parser, unlike a blank line

    def finish(self, done: DoneEvent) -> list[Frame]:
        return [self._last_line(done, "")]

    def _last_line(self, done: DoneEvent, content: str) -> dict:
        return self._line(content, True) | done_fields(done) | finish_extensions(done)

    def reply(self, transcript: Transcript) -> dict:
        line = self._last_line(transcript.done, transcript.text) | reply_extensions(transcript)
        return self._with_thinking(line, transcript.thinking) if transcript.thoughts else line


class ChatWriter(_OllamaWriter):
    """/api/chat: every line carries message.role (the ollama client needs it
    on the last line too); tool-call arguments are objects."""

    def _body(self, text: str) -> dict:
        return {"message": {"role": "assistant", "content": text}}

    def _with_thinking(self, line: dict, thinking: str) -> dict:
        line["message"]["thinking"] = thinking
        return line

    def tool_call(self, call: ToolCallEvent) -> list[Frame]:
        line = self._line("", False)
        line["message"]["tool_calls"] = [tool_call_object(call)]
        return [line]

    def server_tool(self, event: ServerToolEvent) -> list[Frame]:
        """An empty piece with an extra field, never message.tool_calls: the
        client would run the call."""
        return [self._line("", False) | {"server_tool": event.summary()}]

    def reply(self, transcript: Transcript) -> dict:
        line = super().reply(transcript)
        if transcript.calls:
            line["message"]["tool_calls"] = [tool_call_object(c) for c in transcript.calls]
        return line


class GenerateWriter(_OllamaWriter):
    """/api/generate: the text is `response`; the last object of a non-raw
    request carries `context` (Ollama's conversation tokens, deprecated
    there; Switchboard keeps no such state, so it is empty)."""

    def __init__(self, model: str, with_context: bool = False):
        super().__init__(model)
        self.with_context = with_context

    def _body(self, text: str) -> dict:
        return {"response": text}

    def _with_thinking(self, line: dict, thinking: str) -> dict:
        line["thinking"] = thinking
        return line

    def _last_line(self, done: DoneEvent, content: str) -> dict:
        line = super()._last_line(done, content)
        return line | {"context": []} if self.with_context else line
