"""The one frame loop: a job's events x a dialect's writer x a framing.

Framings:
- SSE: exactly `data: <json>\\n\\n` (LF only, no `event:` lines except a
  writer's named event): Copilot's parser splits on `\\n` and the openai SDK
  on blank lines; comments (`: keep-alive`) are skipped by every parser but
  Google's Python SDK, whose dialect's keep-alive is an empty line.
- NDJSON: one object per line, every line ending in `\\n` and no blank
  lines, because the ollama client runs json.loads on every line.
- A JSON array (Google's streams without `?alt=sse`): `[`, the objects
  separated by `,\r\n` as they come, `]`; a keep-alive is a line break
  (whitespace between elements), comments are left out.
- WebSocket: one text message per object (app/routes/responses_socket.py).
- JSON: one object, the writer's whole reply, once the job has finished; an
  error (nothing was sent yet) is raised, to be answered with its status.

Observers (the conversation log) see every event the loop handles.
"""
from __future__ import annotations

import json
from typing import Callable, Iterable, Iterator

from dialects.writer import BLANK_LINE, KEEPALIVE_COMMENT, Comment, Frame, Marker, NamedEvent, Transcript, Writer
from protocol.events import (
    DoneEvent, EmbeddingEvent, ErrorEvent, Event, KeepAliveEvent, PromptEvent, RedactedThinkingEvent, ServerToolEvent,
    TextEvent, ThinkingEvent, ToolCallEvent,
)
from protocol.errors import SwitchboardError

SSE_CONTENT_TYPE = "text/event-stream"
NDJSON_CONTENT_TYPE = "application/x-ndjson"
JSON_CONTENT_TYPE = "application/json"

Observer = Callable[[Event], None]


def to_json(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def sse(frame: Frame) -> bytes:
    if isinstance(frame, Comment):
        return b": " + frame.text.encode() + b"\n\n" if frame.text else b"\n"
    if isinstance(frame, Marker):
        return b"data: " + frame.data.encode() + b"\n\n"
    if isinstance(frame, NamedEvent):
        return b"event: " + frame.name.encode() + b"\n" + sse(frame.body)
    return b"data: " + to_json(frame) + b"\n\n"


def websocket_text(frame: Frame) -> str | None:
    """A frame as one WebSocket text message: the JSON of an object, or of a
    named event's body (its name is its `type`); None for a comment (a
    keep-alive: a ping on a socket)."""
    if isinstance(frame, Comment):
        return None
    if isinstance(frame, NamedEvent):
        return websocket_text(frame.body)
    if isinstance(frame, Marker):
        raise TypeError(f"a WebSocket carries objects only, not {frame!r}")
    return to_json(frame).decode()


def ndjson(frame: Frame) -> bytes:
    if not isinstance(frame, dict):
        raise TypeError(f"NDJSON carries objects only, not {frame!r}")
    return to_json(frame) + b"\n"


class JsonArray:
    """One stream's JSON array framing: it knows whether it has opened and
    written an element; `end()` closes it (`[]` if nothing was written)."""

    def __init__(self):
        self._opened = self._written = False

    def __call__(self, frame: Frame) -> bytes:
        head, self._opened = b"" if self._opened else b"[", True
        if isinstance(frame, Comment):
            return head + (b"\n" if frame in (KEEPALIVE_COMMENT, BLANK_LINE) else b"")
        if not isinstance(frame, dict):
            raise TypeError(f"a JSON array carries objects only, not {frame!r}")
        separator, self._written = b",\r\n" if self._written else b"", True
        return head + separator + to_json(frame)

    def end(self) -> bytes:
        return (b"" if self._opened else b"[") + b"]"


def frames(events: Iterable[Event], writer: Writer, observers: tuple[Observer, ...] = ()) -> Iterator[Frame]:
    """The writer's frames for a job's events, from opening to closing; an
    error ends the reply in band."""
    for group in frame_groups(events, writer, observers):
        yield from group


def frame_groups(events: Iterable[Event], writer: Writer, observers: tuple[Observer, ...] = (),
                 more_waiting: Callable[[], bool] = lambda: False) -> Iterator[list[Frame]]:
    """The same frames, in lists that are each one socket write: the opening
    goes with the first event (which has arrived by the time a stream opens:
    start_job waits for it), the closing with the last, and an event's frames
    wait for those of the events already waiting behind it (`more_waiting`):
    a reply that arrived at once is one write, a slow one a write per event."""
    group = list(writer.opening())
    for event in events:
        for observe in observers:
            observe(event)
        group += _frames_of(event, writer)
        if isinstance(event, (DoneEvent, ErrorEvent)):
            break
        if not more_waiting():
            yield group
            group = []
    yield group + list(writer.closing())


def _frames_of(event: Event, writer: Writer) -> list[Frame]:
    if isinstance(event, KeepAliveEvent):
        return list(writer.keepalive())
    if isinstance(event, TextEvent):
        return list(writer.text(event.text))
    if isinstance(event, PromptEvent):
        return list(writer.prompt(event))
    if isinstance(event, ThinkingEvent):
        signed = list(writer.thinking_signature(event.signature)) if event.signature else []
        return list(writer.thinking(event.text)) + signed
    if isinstance(event, RedactedThinkingEvent):
        return list(writer.redacted_thinking(event.data))
    if isinstance(event, ToolCallEvent):
        return list(writer.tool_call(event))
    if isinstance(event, ServerToolEvent):
        return list(writer.server_tool(event))
    if isinstance(event, EmbeddingEvent):
        writer.embedding(event)
        return []
    if isinstance(event, DoneEvent):
        return list(writer.finish(event))
    if isinstance(event, ErrorEvent):
        return list(writer.error(event.error()))
    return []


def stream(events: Iterable[Event], writer: Writer, encode: Callable[[Frame], bytes],
           observers: tuple[Observer, ...] = (), more_waiting: Callable[[], bool] = lambda: False
           ) -> Iterator[bytes]:
    """SSE or NDJSON bytes (encode = sse or ndjson): one piece per write."""
    for group in frame_groups(events, writer, observers, more_waiting):
        if group:
            yield b"".join(encode(frame) for frame in group)


def stream_array(events: Iterable[Event], writer: Writer, observers: tuple[Observer, ...] = (),
                 more_waiting: Callable[[], bool] = lambda: False) -> Iterator[bytes]:
    """The JSON array framing's pieces, its closing `]` the last."""
    array = JsonArray()
    yield from stream(events, writer, array, observers, more_waiting)
    yield array.end()


class _Collector(Writer):
    """The JSON framing's writer: it keeps the reply instead of writing
    pieces, and raises an error (no byte was sent: it gets its real status)."""

    def __init__(self):
        self.transcript = Transcript()

    def text(self, text: str) -> list[Frame]:
        self.transcript.texts.append(text)
        return []

    def tool_call(self, call: ToolCallEvent) -> list[Frame]:
        self.transcript.calls.append(call)
        return []

    def thinking(self, text: str) -> list[Frame]:
        self.transcript.thoughts.append(text)
        return []

    def thinking_signature(self, signature: str) -> list[Frame]:
        self.transcript.signature = signature
        return []

    def redacted_thinking(self, data: str) -> list[Frame]:
        self.transcript.redacted.append(data)
        return []

    def embedding(self, event: EmbeddingEvent) -> None:
        self.transcript.embedding = event

    def server_tool(self, event: ServerToolEvent) -> list[Frame]:
        if event.phase == "result":
            self.transcript.server_tools.append(event)
        return []

    def finish(self, done: DoneEvent) -> list[Frame]:
        self.transcript.done = done
        return []

    def error(self, error: SwitchboardError) -> list[Frame]:
        raise error

    def keepalive(self) -> list[Frame]:
        return []


def whole_reply(events: Iterable[Event], writer: Writer, observers: tuple[Observer, ...] = ()) -> dict:
    """The JSON framing: the same loop, then the writer's whole reply."""
    collector = _Collector()
    for _ in frames(events, collector, observers):
        pass
    return writer.reply(collector.transcript)
