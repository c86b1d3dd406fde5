"""/v1/messages with a scripted job source: what reaches the job, the
request log's note of the tools left out, errors in Anthropic's envelope
(a prompt over the context in Claude Code's words, a full queue as 529)."""
from __future__ import annotations

import logging

import pytest

from jobqueue import Busy, Verdict
from protocol.events import DoneEvent, ErrorEvent, TextEvent, Usage

BODY = {"model": "echo", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
HEADERS = {"anthropic-version": "2023-06-01", "anthropic-beta": "claude-code-20250219"}


@pytest.fixture
def request_log():
    records: list[dict] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(getattr(record, "fields", {}))
    logger = logging.getLogger("switchboard.requests")
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


def test_the_job_and_the_log_line(scripted, request_log):
    scripted.replies.append([TextEvent(text="hi"), DoneEvent(reason="stop", usage=Usage(prompt_tokens=1))])
    tools = [{"name": "Read", "input_schema": {"type": "object"}},
             {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]
    response = scripted.client.post("/v1/messages?beta=true", json=BODY | {"tools": tools}, headers=HEADERS)
    assert response.status_code == 200 and response.json["content"] == [{"type": "text", "text": "hi"}]
    job = scripted.jobs[-1][0]
    assert [t.name for t in job.tools] == ["Read"] and job.anthropic_beta == "claude-code-20250219"
    assert request_log[-1]["tools_left_out"] == ["web_search (web_search_20250305)"]
    assert request_log[-1]["path"] == "/v1/messages"


def test_a_prompt_over_the_context_in_claude_codes_words(scripted):
    scripted.replies.append([ErrorEvent(message="the prompt is 9000 tokens, more than the context window of 8192",
                                        status=400, prompt_tokens=9000, context_tokens=8192)])
    response = scripted.client.post("/v1/messages", json=BODY, headers=HEADERS)
    assert response.status_code == 400
    assert response.json["error"] == {"type": "invalid_request_error",
                                      "message": "prompt is too long: 9000 tokens > 8192 maximum"}
    assert response.json["request_id"] == response.headers["X-Request-Id"]


def test_an_error_after_the_opening_is_an_error_event(scripted):
    scripted.replies.append([TextEvent(text="Hi"), ErrorEvent(message="worker died", status=502)])
    response = scripted.client.post("/v1/messages", json=BODY | {"stream": True}, headers=HEADERS)
    frames = response.data.split(b"\n\n")
    assert frames[-2].startswith(b'event: error\ndata: {"type":"error","error":{"type":"api_error",'
                                 b'"message":"worker died"},"request_id":"')
    assert frames[-1] == b""


@pytest.mark.parametrize("reason, status, kind", [
    ("queue_full", 529, "overloaded_error"), ("rate_limit", 429, "rate_limit_error")], ids=["queue", "rate"])
def test_over_a_limit(scripted, monkeypatch, reason, status, kind):
    def refuse(*args, **kwargs):
        raise Busy(Verdict(reason), "over", 3)
    monkeypatch.setattr("jobqueue.submit", refuse)
    scripted.replies.append([])
    response = scripted.client.post("/v1/messages", json=BODY, headers=HEADERS)
    assert (response.status_code, response.json["error"]["type"], response.headers["Retry-After"]) == (
        status, kind, "3")


def test_a_wrong_key_gets_anthropics_401():
    from app import create_app

    client = create_app({"redis_url": "redis://unused:1/0", "api_keys": "alice:right-key"}).test_client()
    response = client.post("/v1/messages", json=BODY, headers={"x-api-key": "wrong"})
    assert response.status_code == 401 and response.json["type"] == "error"
    assert response.json["error"]["type"] == "authentication_error"
