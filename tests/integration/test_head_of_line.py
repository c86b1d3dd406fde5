"""Head of line (issue 44): one person's very long prompt does not hold
another person's short turn back beyond the model's capacity. On an upstream
that runs two requests at a time (the scripted upstream's "held" model,
which holds a long prompt until the test lets it answer), a 60,000-token
prompt takes one place and a short turn the other at once; with both places
taken by long prompts, the short turn is the next to run, ahead of the long
prompt queued before it. (On the local model, a short turn's first token
waits one chunk of a long prompt: tests/unit/test_llama_engine.py.)"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.integration.http import DroppableStream
from tests.integration.waits import queued, wait_until

LONG = " ".join(["word"] * 60_000)  # 60,000 tokens, about 300 KB


def chat(text: str) -> dict:
    return {"model": "held", "stream": True, "max_tokens": 16, "messages": [{"role": "user", "content": text}]}


def upstream_saw(scripted, count: int):
    return lambda: scripted.counts["held"] >= count


def is_long(request: dict) -> bool:
    return len(json.dumps(request["body"])) > 100_000


def test_a_60k_token_prompt_holds_nobody_back_beyond_the_upstreams_capacity(upstreams, clean_redis):
    base, scripted = upstreams["base"], upstreams["scripted"]
    other = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=30)  # another person
    started = len(scripted.requests)
    longs = [DroppableStream(base, "/v1/chat/completions", chat(LONG))]
    try:
        wait_until(upstream_saw(scripted, 1), what="the long prompt at the upstream")
        short = other.post(f"{base}/v1/chat/completions", json=chat("a short turn"))
        assert short.status_code == 200 and b"data: [DONE]" in short.content  # answered while the long one is held
        longs.append(DroppableStream(base, "/v1/chat/completions", chat(LONG)))
        wait_until(upstream_saw(scripted, 3), what="the second long prompt at the upstream: both places taken")
        longs.append(DroppableStream(base, "/v1/chat/completions", chat(LONG)))
        wait_until(queued(clean_redis, "upstream"), what="the third long prompt to wait for a place")
        with ThreadPoolExecutor(1) as pool:
            later = pool.submit(other.post, f"{base}/v1/chat/completions", json=chat("another short turn"))
            wait_until(queued(clean_redis, "upstream", 2), what="the short turn to wait behind it")
            scripted.release()  # the first long prompt answers: one place frees
            assert later.result(timeout=30).status_code == 200
        wait_until(upstream_saw(scripted, 5), what="the third long prompt at the upstream")
        order = [is_long(request) for request in scripted.requests[started:]]
        assert order == [True, False, True, False, True]
    finally:
        for _ in longs:
            scripted.release()
        for stream in longs:
            stream.drop()
        other.close()
