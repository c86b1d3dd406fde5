"""A corpus of hostile and broken input (from an attack on loopback): every
one is a prompt 4xx in the API's error shape naming the problem, never a
5xx, a hung stream or a lost job."""
from __future__ import annotations

import json
import time

import httpx
import pytest


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def any_of(levels: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(levels):
        schema = {"anyOf": [schema, {"type": "null"}]}
    return schema


def chat(content: str, **extra) -> bytes:
    return json.dumps({"model": "echo", "messages": [{"role": "user", "content": content}], **extra}).encode()


TEN_MB = "word " * (2 * 1024 * 1024)
CORPUS = [
    ("/api/chat", b'{"model": "echo", "messages": ' + nested(10_000).encode() + b"}", "nests deeper than 64"),
    ("/v1/chat/completions", b'{"model": "echo", "x": ' + nested(900).encode() + b"}", "nests deeper than 64"),
    ("/chat/completions", b'{"model": "echo", "x": ' + nested(65).encode() + b"}", "nests deeper than 64"),
    ("/api/generate", b'{"model": "echo", "prompt": "a \\ud800 b"}', "lone UTF-16 surrogate (\\ud800)"),
    ("/v1/chat/completions", chat("a \udc00 b").replace(b"\\udc00", b"\\udc00"), "lone UTF-16 surrogate (\\udc00)"),
    ("/v1/chat/completions", json.dumps({"model": "echo", "stream": True, "messages": [
        {"role": "user", "content": "x \ud83d"}]}).encode(), "lone UTF-16 surrogate (\\ud83d)"),
    ("/v1/chat/completions", chat("hi", tools=[{"type": "function", "function": {
        "name": "f", "parameters": any_of(150)}}]), "nests deeper than 64"),
    ("/api/generate", json.dumps({"model": "echo", "prompt": "p",
                                  "template": "{{ if .Prompt }}" * 3000 + "x" + "{{ end }}" * 3000}).encode(),
     "template: `if` blocks nest deeper than 32 levels"),
    ("/api/generate", b'{"model": "echo", "prompt": "p", "keep_alive": 1e300}', "keep_alive: 1e+300 is longer than"),
    ("/api/chat", chat("hi", keep_alive="99999999999999h"), "keep_alive: '99999999999999h' is longer than"),
    ("/api/chat", b'{"model": "echo", "keep_alive": NaN, "messages": []}', "keep_alive: nan is longer than"),
    ("/api/generate", json.dumps({"model": "smollm2:135m", "prompt": TEN_MB}).encode(),
     'more than the 8192-token context of "smollm2:135m" can hold'),
    ("/v1/chat/completions", json.dumps({"model": "echo", "messages": [
        {"role": "user", "content": TEN_MB * 2}]}).encode(), 'more than the 131072-token context of "echo"'),
    ("/api/chat", b'{"model": "echo", "options": {"num_predict": 1e400}, "messages": []}', "num_predict"),
]


def message_of(path: str, body: dict) -> str:
    error = body["error"]
    return error if path.startswith("/api/") else error["message"]


@pytest.mark.parametrize("path, raw, expected", CORPUS, ids=[
    "nest-10000", "nest-900", "nest-65", "surrogate-prompt", "surrogate-low", "surrogate-stream", "anyof-150",
    "template-3000", "keep-alive-1e300", "keep-alive-hours", "keep-alive-nan", "10mb-local", "20mb-echo",
    "num-predict-huge"])
def test_bad_input_is_a_prompt_4xx_naming_the_problem(base_url, path, raw, expected):
    started = time.monotonic()
    response = httpx.post(base_url + path, content=raw, headers={"Content-Type": "application/json"}, timeout=60)
    assert 400 <= response.status_code < 500, response.text[:500]
    assert expected in message_of(path, response.json()), response.text[:500]
    assert time.monotonic() - started < 10  # refused up front, not after tokenizing 10 MB
