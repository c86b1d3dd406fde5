"""Every dialect's writer, driven directly (no Flask), the way Ollama tests
its chat writer: each operation's exact objects and, through the framing,
exact bytes."""
from __future__ import annotations

import json

import pytest

from app.streaming import ndjson, sse
from dialects import ollama_writer, openai_writer, simple_chat
from dialects.writer import Comment, Marker, NamedEvent, Transcript
from protocol.events import DoneEvent, Timings, ToolCallEvent, Usage
from protocol.errors import SwitchboardError

DONE = DoneEvent(reason="stop", usage=Usage(prompt_tokens=3, completion_tokens=2),
                 timings=Timings(load_ns=1, prompt_eval_ns=2, eval_ns=3, total_ns=6))
CALL = ToolCallEvent(index=0, id="call_1", name="grep", arguments='{"q": "x"}')
BOOM = SwitchboardError("worker died", 500)


def _without_time(line: dict) -> dict:
    assert line.pop("created_at").endswith("Z")
    return line


# --- OpenAI chat ----------------------------------------------------------------------
def test_openai_chat_stream_bytes():
    writer = openai_writer.ChatWriter("chatcmpl-1", "m", 7)
    head = '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,'
    assert b"".join(map(sse, writer.opening())) == (
        f'data: {head}"delta":{{"role":"assistant","content":""}},"logprobs":null,"finish_reason":null}}]}}\n\n'
    ).encode()
    assert b"".join(map(sse, writer.text("hi"))) == (
        f'data: {head}"delta":{{"content":"hi"}},"logprobs":null,"finish_reason":null}}]}}\n\n').encode()
    assert b"".join(map(sse, writer.finish(DONE))) == (
        f'data: {head}"delta":{{}},"logprobs":null,"finish_reason":"stop"}}]}}\n\n').encode()
    assert b"".join(map(sse, writer.keepalive())) == b": keep-alive\n\n"
    assert b"".join(map(sse, writer.closing())) == b"data: [DONE]\n\n"
    assert b"".join(map(sse, writer.error(BOOM))) == (
        b'data: {"error":{"message":"worker died","type":"server_error","param":null,"code":null}}\n\n'
        + f'data: {head}"delta":{{}},"logprobs":null,"finish_reason":"error"}}]}}\n\n'.encode())


def test_openai_chat_tool_call_is_two_pieces_and_usage_comes_last():
    writer = openai_writer.ChatWriter("c", "m", 1, include_usage=True)
    head, body = (f["choices"][0]["delta"]["tool_calls"][0] for f in writer.tool_call(CALL))
    assert head == {"index": 0, "id": "call_1", "type": "function", "function": {"name": "grep", "arguments": ""}}
    assert body == {"index": 0, "function": {"arguments": '{"q": "x"}'}}
    finish, usage = writer.finish(DoneEvent(reason="tool_calls", usage=Usage(prompt_tokens=1, completion_tokens=1)))
    assert finish["choices"][0]["finish_reason"] == "tool_calls" and finish["usage"] is None
    assert usage == {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [],
                     "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def test_openai_chat_whole_reply():
    writer = openai_writer.ChatWriter("c", "m", 1)
    reply = writer.reply(Transcript([], [CALL], DoneEvent(reason="tool_calls")))
    assert list(reply) == ["id", "object", "created", "model", "choices", "usage"]
    assert reply["object"] == "chat.completion"
    assert reply["choices"][0] == {"index": 0, "logprobs": None, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "grep", "arguments": '{"q": "x"}'}}]}}


# --- OpenAI completions ----------------------------------------------------------------
def test_openai_completion_writer():
    writer = openai_writer.CompletionWriter("cmpl-1", "m", 5, include_usage=True)
    assert writer.opening() == [] and writer.tool_call(CALL) == []
    assert writer.text("x") == [{"id": "cmpl-1", "object": "text_completion", "created": 5, "model": "m",
                                 "choices": [{"text": "x", "index": 0, "logprobs": None, "finish_reason": None}]}]
    finish, usage = writer.finish(DoneEvent(reason="length"))
    assert finish["choices"][0]["finish_reason"] == "length" and usage["choices"] == []
    reply = writer.reply(Transcript(["a", "b"], [], DONE))
    assert reply["choices"][0]["text"] == "ab" and reply["usage"]["total_tokens"] == 5


# --- Ollama ---------------------------------------------------------------------------
def test_ollama_chat_lines():
    writer = ollama_writer.ChatWriter("m")
    assert writer.opening() == [] and writer.closing() == []
    assert _without_time(writer.text("hi")[0]) == {
        "model": "m", "message": {"role": "assistant", "content": "hi"}, "done": False}
    assert _without_time(writer.keepalive()[0])["message"]["content"] == ""
    call = _without_time(writer.tool_call(CALL)[0])
    assert call["message"]["tool_calls"] == [{"id": "call_1", "function": {"index": 0, "name": "grep",
                                                                           "arguments": {"q": "x"}}}]
    last = _without_time(writer.finish(DONE)[0])
    assert last == {"model": "m", "message": {"role": "assistant", "content": ""}, "done": True,
                    "done_reason": "stop", "total_duration": 6, "load_duration": 1, "prompt_eval_count": 3,
                    "prompt_eval_duration": 2, "eval_count": 2, "eval_duration": 3}
    assert writer.error(BOOM) == [{"error": "worker died"}]
    assert ndjson(writer.error(BOOM)[0]) == b'{"error":"worker died"}\n'


def test_ollama_chat_whole_reply_carries_calls_and_generate_its_response():
    reply = ollama_writer.ChatWriter("m").reply(Transcript(["a"], [CALL], DoneEvent(reason="tool_calls")))
    assert reply["message"]["content"] == "a" and reply["done_reason"] == "stop"
    assert reply["message"]["tool_calls"][0]["function"]["arguments"] == {"q": "x"}
    generated = _without_time(ollama_writer.GenerateWriter("m").reply(Transcript(["x", "y"], [], DONE)))
    assert generated["response"] == "xy" and generated["done"] is True and "message" not in generated


# --- simple chat ------------------------------------------------------------------------
def test_simple_chat_lines_count_from_zero_and_only_the_last_is_done():
    writer = simple_chat.LinesWriter("chat-1", "m", 3)
    lines = writer.text("a") + writer.keepalive() + writer.finish(DONE)
    assert [(line["index"], line["done"], line["message"]["content"]) for line in lines] == [
        (0, False, "a"), (1, False, ""), (2, True, "")]
    assert writer.error(SwitchboardError("nope", 429)) == [
        {"error": {"message": "nope", "type": "rate_limit_error", "code": 429}}]
    assert writer.reply(Transcript(["x"], [], DONE)) == {
        "id": "chat-1", "model": "m", "created": 3, "message": {"role": "assistant", "content": "x"}, "done": True}


def test_simple_chat_events_over_sse():
    writer = simple_chat.EventsWriter("chat-1", "m", 3)
    assert writer.keepalive() == [Comment("keep-alive")] and writer.closing() == [Marker("[END]")]
    assert writer.error(BOOM) == [NamedEvent("error", {"message": "worker died", "type": "server_error",
                                                        "code": 500})]
    framed = b"".join(map(sse, writer.error(BOOM) + writer.closing()))
    assert framed == (b'event: error\ndata: {"message":"worker died","type":"server_error","code":500}\n\n'
                      b"data: [END]\n\n")


@pytest.mark.parametrize("writer", [
    openai_writer.ChatWriter("c", "m", 1), openai_writer.CompletionWriter("c", "m", 1),
    ollama_writer.ChatWriter("m"), ollama_writer.GenerateWriter("m"),
    simple_chat.LinesWriter("c", "m", 1), simple_chat.EventsWriter("c", "m", 1),
], ids=["openai-chat", "openai-completion", "ollama-chat", "ollama-generate", "simple-lines", "simple-events"])
def test_every_writer_offers_every_operation(writer):
    for frames in (writer.opening(), writer.text("t"), writer.tool_call(CALL), writer.finish(DONE), writer.error(BOOM),
                   writer.keepalive(), writer.closing()):
        assert isinstance(frames, list)
    assert json.dumps(writer.reply(Transcript(["t"], [], DONE)))


def test_ndjson_refuses_anything_but_an_object():
    with pytest.raises(TypeError):
        ndjson(Comment("keep-alive"))
