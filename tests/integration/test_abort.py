"""Abort on disconnect, for real: a dropped socket makes the front end abort
the job, and the worker stops (running) or never starts it (queued)."""
from __future__ import annotations

import time

import pytest

from jobqueue.records import job_state
from scripts.processes import WORKER_SLOTS
from tests.integration.http import DroppableStream
from tests.integration.waits import queued, wait_until

LONG_TEXT = " ".join(f"word{i}" for i in range(400))  # 20 s at echo:slow's 50 ms per token


def chat_body(model: str = "echo:slow", text: str = LONG_TEXT) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": text}]}


def wait_for_state(redis, job_id: str, reason: str, timeout: float = 30) -> dict:
    return wait_until(lambda: (state := job_state(redis, job_id)).get("reason") == reason and state, timeout,
                      f"job {job_id} to be recorded as {reason}")


GEMINI_STREAM = "/v1beta/models/echo:slow:streamGenerateContent?alt=sse"


@pytest.mark.parametrize("path", ["/api/chat", "/v1/chat/completions", "/v1/messages", GEMINI_STREAM],
                         ids=["ndjson", "sse", "anthropic", "gemini"])
def test_dropping_a_stream_stops_the_worker_within_a_token(base_url, redis_client, tap, path):
    body = chat_body() | ({"stream": True} if path.startswith("/v1") else {}) | (
        {"max_tokens": 1000} if path == "/v1/messages" else {})
    if path == GEMINI_STREAM:
        body = {"contents": [{"role": "user", "parts": [{"text": LONG_TEXT}]}]}
    stream = DroppableStream(base_url, path, body)
    for _ in range(3):
        assert stream.read_line()
    stream.drop()
    dropped_at = time.monotonic()

    aborted_at, job_id = tap.wait_for_abort()
    assert aborted_at - dropped_at < 1.0
    state = wait_for_state(redis_client, job_id, "aborted", timeout=1.0)
    assert state["status"] == "finished"
    time.sleep(0.3)  # several echo:slow tokens' worth: nothing more may come
    after = [e for t, e in tap.events(job_id) if t > aborted_at and e["type"] == "text"]
    assert len(after) <= 1


def test_a_queued_job_whose_client_left_never_starts(base_url, redis_client, tap):
    blockers = [DroppableStream(base_url, "/api/chat", chat_body()) for _ in range(WORKER_SLOTS)]  # all its slots
    for blocker in blockers:
        assert blocker.read_line()
    waiting = DroppableStream(base_url, "/api/chat", chat_body(text="should never run"))
    wait_until(queued(redis_client, "local"), what="the job to wait in the queue")  # silent meanwhile
    waiting.drop()
    dropped_at = time.monotonic()
    aborted_at, job_id = tap.wait_for_abort()
    assert aborted_at - dropped_at < 1.0  # noticed while the stream was silent

    for blocker in blockers:
        blocker.drop()
    state = wait_for_state(redis_client, job_id, "aborted")  # once a slot frees, the worker drops it unrun
    assert "started_at" not in state
    assert tap.events(job_id) == []
