"""The simple chat API (in-house tools): one message object, or lines /
events `{"message": {...}, "done": false, "index": N}` with `index` counting
from 0 and only the last one `done: true`. Over SSE (/chat/sse) the stream
ends with `data: [END]`, and an error is an `event: error`."""
from __future__ import annotations

from dialects.openai_writer import error_body as openai_error_body
from dialects.writer import Frame, Marker, NamedEvent, Transcript, Writer, finish_extensions, reply_extensions
from protocol.events import DoneEvent, ServerToolEvent
from protocol.errors import SwitchboardError

END = Marker("[END]")


def error_object(error: SwitchboardError) -> dict:
    """`{"message", "type", "code"}`: OpenAI's error without `param`; the
    code is the HTTP status."""
    body = openai_error_body(error)["error"]
    return {"message": body["message"], "type": body["type"], "code": error.status}


def error_body(error: SwitchboardError) -> dict:
    return {"error": error_object(error)}


class LinesWriter(Writer):
    """/chat/completions: NDJSON lines, or one message object."""

    error_body = staticmethod(error_body)

    def __init__(self, completion_id: str, model: str, created: int):
        self.completion_id, self.model, self.created = completion_id, model, created
        self.index = 0

    def _line(self, content: str, done: bool) -> dict:
        line = {"message": {"role": "assistant", "content": content}, "done": done, "index": self.index}
        self.index += 1
        return line

    def text(self, text: str) -> list[Frame]:
        return [self._line(text, False)]

    def thinking(self, text: str) -> list[Frame]:
        line = self._line("", False)
        line["message"]["thinking"] = text
        return [line]

    def keepalive(self) -> list[Frame]:
        return self.text("")

    def server_tool(self, event: ServerToolEvent) -> list[Frame]:
        return [self._line("", False) | {"server_tool": event.summary()}]

    def finish(self, done: DoneEvent) -> list[Frame]:
        return [self._line("", True) | finish_extensions(done)]

    def reply(self, transcript: Transcript) -> dict:
        message = {"role": "assistant", "content": transcript.text}
        if transcript.thoughts:
            message["thinking"] = transcript.thinking
        return {"id": self.completion_id, "model": self.model, "created": self.created, "message": message,
                "done": True} | reply_extensions(transcript)


class EventsWriter(LinesWriter):
    """/chat/sse: the same lines as SSE events, keep-alive comments, and
    `data: [END]` at the end (after an error too)."""

    def keepalive(self) -> list[Frame]:
        return Writer.keepalive(self)

    def error(self, error: SwitchboardError) -> list[Frame]:
        return [NamedEvent("error", error_object(error))]

    def closing(self) -> list[Frame]:
        return [END]
