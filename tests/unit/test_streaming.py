"""The one frame loop: events x writer x framing, with observers."""
from __future__ import annotations

import pytest

from app.streaming import frames, ndjson, sse, stream, whole_reply
from dialects import ollama_writer, openai_writer
from protocol.events import DoneEvent, ErrorEvent, KeepAliveEvent, TextEvent, ToolCallEvent, Usage
from protocol.errors import SwitchboardError

DONE = DoneEvent(reason="stop", usage=Usage(prompt_tokens=1, completion_tokens=2))
CALL = ToolCallEvent(index=0, id="call_1", name="f", arguments="{}")


def test_sse_stream_opens_relays_and_closes():
    writer = openai_writer.ChatWriter("c", "m", 1)
    body = b"".join(stream([TextEvent(text="a"), KeepAliveEvent(), TextEvent(text="b"), DONE], writer, sse))
    parts = body.split(b"\n\n")
    assert parts[0].startswith(b'data: {"id":"c"') and b'"role":"assistant"' in parts[0]
    assert b'"content":"a"' in parts[1] and parts[2] == b": keep-alive" and b'"content":"b"' in parts[3]
    assert b'"finish_reason":"stop"' in parts[4] and parts[5:] == [b"data: [DONE]", b""]


def test_each_event_is_one_piece_the_opening_riding_with_the_first_and_the_closing_with_the_last():
    writer = openai_writer.ChatWriter("c", "m", 1)
    pieces = list(stream([TextEvent(text="a"), KeepAliveEvent(), TextEvent(text="b"), DONE], writer, sse))
    assert [piece.count(b"\n\n") for piece in pieces] == [2, 1, 1, 2]  # one socket write each
    assert b'"role":"assistant"' in pieces[0] and b'"content":"a"' in pieces[0]
    assert b'"finish_reason":"stop"' in pieces[3] and pieces[3].endswith(b"data: [DONE]\n\n")


def test_events_already_waiting_go_out_in_the_same_write():
    writer = openai_writer.ChatWriter("c", "m", 1)
    waiting = [TextEvent(text="a"), TextEvent(text="b"), DONE]
    arrived_together = {1}  # the end had arrived by the time "b" was handled; "b" came after "a" was written

    def events():
        while waiting:
            yield waiting.pop(0)
    pieces = list(stream(events(), writer, sse, more_waiting=lambda: len(waiting) in arrived_together))
    assert [piece.count(b"\n\n") for piece in pieces] == [2, 3]
    assert b'"content":"b"' in pieces[1] and pieces[1].endswith(b"data: [DONE]\n\n")
    everything_at_once = list(stream([TextEvent(text="a"), DONE], openai_writer.ChatWriter("c", "m", 1), sse,
                                     more_waiting=lambda: True))
    assert len(everything_at_once) == 1 and everything_at_once[0].count(b"\n\n") == 4


def test_an_error_ends_the_stream_in_band_and_later_events_are_not_read():
    seen = []

    def events():
        yield TextEvent(text="a")
        yield ErrorEvent(message="boom", status=502)
        seen.append("read past the error")
        yield TextEvent(text="never")

    body = b"".join(stream(events(), ollama_writer.GenerateWriter("m"), ndjson))
    lines = body.split(b"\n")
    assert lines[-2:] == [b'{"error":"boom"}', b""] and b"never" not in body and seen == []


def test_observers_see_every_event_of_a_stream_and_of_a_whole_reply():
    events = [TextEvent(text="a"), CALL, DONE]
    seen = []
    list(frames(iter(events), openai_writer.ChatWriter("c", "m", 1), (seen.append,)))
    assert seen == events
    seen.clear()
    whole_reply(iter(events), openai_writer.ChatWriter("c", "m", 1), (seen.append,))
    assert seen == events


def test_the_json_framing_is_the_writers_whole_reply():
    reply = whole_reply(iter([KeepAliveEvent(), TextEvent(text="a"), TextEvent(text="b"), CALL,
                              DoneEvent(reason="tool_calls")]), openai_writer.ChatWriter("c", "m", 1))
    assert reply["choices"][0]["message"]["content"] == "ab"
    assert reply["choices"][0]["message"]["tool_calls"][0]["id"] == "call_1"


def test_the_json_framing_raises_an_error_with_its_status():
    with pytest.raises(SwitchboardError) as raised:
        whole_reply(iter([TextEvent(text="a"), ErrorEvent(message="busy", status=503, retry_after=4)]),
                    ollama_writer.ChatWriter("m"))
    assert (raised.value.status, raised.value.message, raised.value.headers) == (503, "busy", {"Retry-After": "4"})
