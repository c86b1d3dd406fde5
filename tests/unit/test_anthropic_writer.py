"""The Anthropic Messages writer, driven directly (no Flask): each
operation's exact frames and, through the SSE framing, exact bytes, as
Anthropic's API sends them."""
from __future__ import annotations

import json

import pytest

from app.streaming import frames, sse
from dialects.anthropic_writer import MessagesWriter, error_body, model_page, signature, tool_use_id
from dialects.writer import Transcript
from protocol.events import (
    DoneEvent, ErrorEvent, KeepAliveEvent, PromptEvent, ServerToolEvent, TextEvent, ThinkingEvent, ToolCallEvent,
    Usage,
)
from protocol.errors import PromptTooLong, SwitchboardError

CALL = ToolCallEvent(index=0, id="call_abc", name="Write", arguments='{"file_path": "/tmp/a", "content": "x"}')
DONE = DoneEvent(reason="stop", usage=Usage(prompt_tokens=7, completion_tokens=2, cached_tokens=5))


def _opened() -> MessagesWriter:
    """A writer past its opening (message_start goes with the first event)."""
    writer = MessagesWriter("msg_1", "m")
    writer.prompt(PromptEvent(prompt_tokens=1))
    return writer


def _bytes(writer_frames) -> bytes:
    return b"".join(sse(frame) for frame in writer_frames)


def _stream(events) -> bytes:
    return _bytes(frames(events, MessagesWriter("msg_1", "echo", "req_1")))


def test_a_text_reply_streams_byte_for_byte_as_anthropic_does():
    assert _stream([TextEvent(text="Hello"), TextEvent(text=" world"), DONE]) == (
        b'event: message_start\n'
        b'data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"echo",'
        b'"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,'
        b'"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}}\n\n'
        b'event: content_block_start\n'
        b'data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
        b'event: content_block_delta\n'
        b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}\n\n'
        b'event: content_block_delta\n'
        b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" world"}}\n\n'
        b'event: content_block_stop\n'
        b'data: {"type":"content_block_stop","index":0}\n\n'
        b'event: message_delta\n'
        b'data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":'
        b'{"input_tokens":2,"cache_creation_input_tokens":0,"cache_read_input_tokens":5,"output_tokens":2}}\n\n'
        b'event: message_stop\n'
        b'data: {"type":"message_stop"}\n\n')


def test_the_opening_carries_the_prompts_size_when_it_comes_first():
    prompt = PromptEvent(prompt_tokens=12, cached_tokens=8)
    start = _stream([prompt, TextEvent(text="x"), DONE]).split(b"\n\n")[0]
    assert start.endswith(b'"usage":{"input_tokens":4,"cache_creation_input_tokens":0,"cache_read_input_tokens":8,'
                          b'"output_tokens":0}}}')
    assert _stream([KeepAliveEvent(), DONE]).split(b"\n\n")[:2] == [  # a ping never comes before the opening
        _stream([DONE]).split(b"\n\n")[0], b'event: ping\ndata: {"type":"ping"}']


def _types(events) -> list[tuple]:
    out = []
    for frame in frames(events, MessagesWriter("msg_1", "m")):
        body = frame.body
        assert body["type"] == frame.name  # the SDKs read the type from the data
        out.append((frame.name, body.get("index"), (body.get("delta") or body.get("content_block") or {}).get("type")))
    return out


def test_blocks_open_one_at_a_time_thinking_closes_with_its_signature():
    events = [ThinkingEvent(text="let me"), ThinkingEvent(text=" see"), TextEvent(text="I will write."), CALL,
              DoneEvent(reason="tool_calls")]
    assert _types(events) == [
        ("message_start", None, None),
        ("content_block_start", 0, "thinking"), ("content_block_delta", 0, "thinking_delta"),
        ("content_block_delta", 0, "thinking_delta"), ("content_block_delta", 0, "signature_delta"),
        ("content_block_stop", 0, None),
        ("content_block_start", 1, "text"), ("content_block_delta", 1, "text_delta"), ("content_block_stop", 1, None),
        ("content_block_start", 2, "tool_use"), ("content_block_delta", 2, "input_json_delta"),
        ("content_block_stop", 2, None),
        ("message_delta", None, None), ("message_stop", None, None)]


def test_a_tool_use_block_starts_empty_and_its_input_follows_as_json():
    start, delta, stop = (frame.body for frame in _opened().tool_call(CALL))
    assert start["content_block"] == {"type": "tool_use", "id": "toolu_abc", "name": "Write", "input": {}}
    assert json.loads(delta["delta"]["partial_json"]) == {"file_path": "/tmp/a", "content": "x"}
    assert stop == {"type": "content_block_stop", "index": 0}


def test_signature_delta_signs_the_whole_thinking_text():
    writer = _opened()
    writer.thinking("a")
    writer.thinking("b")
    signed = writer.text("x")[0].body
    assert signed["delta"] == {"type": "signature_delta", "signature": signature("ab")}


@pytest.mark.parametrize("done, reason, sequence", [
    (DoneEvent(reason="stop"), "end_turn", None),
    (DoneEvent(reason="step_limit"), "end_turn", None),
    (DoneEvent(reason="length"), "max_tokens", None),
    (DoneEvent(reason="tool_calls"), "tool_use", None),
    (DoneEvent(reason="stop", stop_sequence="END"), "stop_sequence", "END"),
], ids=["stop", "step-limit", "length", "tool-calls", "stop-sequence"])
def test_stop_reasons(done, reason, sequence):
    delta = _opened().finish(done)[0].body
    assert delta["delta"] == {"stop_reason": reason, "stop_sequence": sequence}


def test_errors_keepalives_and_server_tools_in_the_stream():
    assert _stream([KeepAliveEvent(), ErrorEvent(message="worker died", status=502)]).split(b"\n\n")[1:3] == [
        b'event: ping\ndata: {"type":"ping"}',
        b'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"worker died"},'
        b'"request_id":"req_1"}']
    tool = ServerToolEvent(phase="call", id="t1", server="time", name="now")
    assert _bytes(_opened().server_tool(tool)).startswith(b": server_tool {")


@pytest.mark.parametrize("status, kind", [
    (400, "invalid_request_error"), (401, "authentication_error"), (403, "permission_error"),
    (404, "not_found_error"), (413, "request_too_large"), (429, "rate_limit_error"), (500, "api_error"),
    (502, "api_error"), (503, "overloaded_error"), (504, "timeout_error"), (529, "overloaded_error"),
    (409, "invalid_request_error"),
])
def test_error_types_by_status(status, kind):
    assert error_body(SwitchboardError("no", status), "r") == {
        "type": "error", "error": {"type": kind, "message": "no"}, "request_id": "r"}


def test_a_prompt_too_long_is_worded_as_claude_code_expects():
    body = error_body(PromptTooLong("the prompt is 9000 tokens, more than 8192", 9000, 8192))
    assert body["error"] == {"type": "invalid_request_error", "message": "prompt is too long: 9000 tokens > 8192 maximum"}


def test_the_whole_message_keeps_block_order_and_usage():
    transcript = Transcript(texts=["I will ", "write."], calls=[CALL], done=DoneEvent(
        reason="tool_calls", usage=Usage(prompt_tokens=3, completion_tokens=4)), thoughts=["hmm"])
    reply = MessagesWriter("msg_1", "echo").reply(transcript)
    assert reply == {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "echo",
        "content": [{"type": "thinking", "thinking": "hmm", "signature": signature("hmm")},
                    {"type": "text", "text": "I will write."},
                    {"type": "tool_use", "id": "toolu_abc", "name": "Write",
                     "input": {"file_path": "/tmp/a", "content": "x"}}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 3, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                  "output_tokens": 4}}


def test_redacted_thinking_is_a_whole_block_of_its_own():
    frames = [frame.body for frame in _opened().redacted_thinking("EnC")]
    assert frames == [{"type": "content_block_start", "index": 0, "content_block": {
        "type": "redacted_thinking", "data": "EnC"}}, {"type": "content_block_stop", "index": 0}]
    reply = MessagesWriter("msg_1", "m").reply(Transcript(texts=["x"], done=DoneEvent(reason="stop"), redacted=["EnC"]))
    assert reply["content"] == [{"type": "redacted_thinking", "data": "EnC"}, {"type": "text", "text": "x"}]


def test_tool_use_ids_map_one_to_one():
    assert tool_use_id("call_XYZ") == "toolu_XYZ"
    assert tool_use_id("toolu_01A") == "toolu_01A"


def test_model_pages():
    models = [{"id": name} for name in "abcde"]
    assert model_page(models, {}) == {"data": models, "has_more": False, "first_id": "a", "last_id": "e"}
    assert model_page(models, {"limit": "2", "after_id": "a"}) == {
        "data": models[1:3], "has_more": True, "first_id": "b", "last_id": "c"}
    assert model_page(models, {"limit": "2", "before_id": "e"})["data"] == models[2:4]
