"""Exact bytes of the streams, as strict clients parse them."""
from __future__ import annotations

import json
import re

from tests.integration.http import post_raw

COPILOT_HEADERS = {"Authorization": "Bearer ", "X-Request-Id": "0d6f2b1e", "X-Interaction-Type": "conversation-agent"}


def test_sse_frames_are_exact(base_url):
    # echo:slow: a token every 50 ms, so each is its own chunk (the instant echo's
    # tokens may arrive merged into one chunk, as a fast model's do)
    status, headers, body = post_raw(base_url, "/v1/chat/completions", {
        "model": "echo:slow", "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "Hello world"}]}, COPILOT_HEADERS)
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    assert b"\r" not in body and b"event:" not in body
    frames = body.split(b"\n\n")
    assert frames[-1] == b"" and frames[-2] == b"data: [DONE]"
    chunks = [json.loads(f.removeprefix(b"data: ")) for f in frames[:-2]]
    ident = chunks[0]["id"]
    assert re.fullmatch(r"chatcmpl-[0-9a-f]{32}", ident)
    expected = [
        {"delta": {"role": "assistant", "content": ""}, "finish_reason": None},
        {"delta": {"content": "Hello"}, "finish_reason": None},
        {"delta": {"content": " world"}, "finish_reason": None},
        {"delta": {}, "finish_reason": "stop"},
    ]
    for chunk, want in zip(chunks, expected):
        assert chunk["id"] == ident and chunk["object"] == "chat.completion.chunk" and chunk["model"] == "echo:slow"
        assert chunk["choices"] == [{"index": 0, "logprobs": None, **want}]
    assert chunks[4]["choices"] == [] and chunks[4]["usage"] == {"prompt_tokens": 2, "completion_tokens": 2,
                                                                  "total_tokens": 4}
    assert len(chunks) == 5


def test_sse_without_usage_ends_with_finish_then_done(base_url):
    _, _, body = post_raw(base_url, "/v1/chat/completions", {
        "model": "echo", "stream": True, "messages": [{"role": "user", "content": "Hi"}]})
    frames = body.split(b"\n\n")
    assert frames[-2:] == [b"data: [DONE]", b""]
    last = json.loads(frames[-3].removeprefix(b"data: "))
    assert last["choices"][0]["finish_reason"] == "stop" and "usage" not in last


def test_ndjson_lines_are_exact(base_url):
    status, headers, body = post_raw(base_url, "/api/chat", {
        "model": "echo:slow", "messages": [{"role": "user", "content": "Hello world"}]})
    assert status == 200 and headers["Content-Type"] == "application/x-ndjson"
    assert body.endswith(b"\n") and b"\n\n" not in body
    lines = [json.loads(line) for line in body.split(b"\n")[:-1]]
    assert [(l["message"], l["done"]) for l in lines] == [
        ({"role": "assistant", "content": "Hello"}, False),
        ({"role": "assistant", "content": " world"}, False),
        ({"role": "assistant", "content": ""}, True),
    ]
    last = lines[-1]
    assert last["done_reason"] == "stop"
    for field in ("total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count",
                  "eval_duration"):
        assert isinstance(last[field], int), field
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", last["created_at"])


def test_stream_false_returns_one_object(base_url):
    status, _, body = post_raw(base_url, "/api/generate", {"model": "echo", "prompt": "a b", "stream": False})
    assert status == 200
    reply = json.loads(body)
    assert reply["response"] == "a b" and reply["done"] is True and reply["eval_count"] == 2


def test_root_and_version(base_url):
    import httpx

    assert httpx.get(base_url).text == "Ollama is running"
    assert httpx.head(base_url).status_code == 200
    major, minor, patch = (int(x) for x in httpx.get(f"{base_url}/api/version").json()["version"].split("."))
    assert (major, minor, patch) >= (0, 6, 4)


def test_bad_input_names_the_field(base_url):
    status, _, body = post_raw(base_url, "/api/chat", {"model": "echo", "messages": [{"role": "user", "content": 5}]})
    assert status == 400 and json.loads(body) == {"error": "messages.0.content: Input should be a valid string"}
    status, _, body = post_raw(base_url, "/v1/chat/completions", {"model": "echo", "messages": "hi"})
    assert status == 400 and json.loads(body)["error"]["param"] == "messages"
