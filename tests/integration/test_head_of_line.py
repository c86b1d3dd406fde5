"""Head of line (issue 44): one person's very long prompt does not hold
another person's short turn back. On an upstream that runs two requests at
a time (the scripted upstream's "held" model, which holds a long prompt
until the test lets it answer), a 60,000-token prompt takes one place and a
short turn of another person the other at once; while that person is at
work, the first one's next long prompt leaves them the last place, so their
next turn runs at once too. (On the local model, a short turn's first token
waits one chunk of a long prompt: tests/unit/test_llama_engine.py.) And
on the local model, a colleague's four long jobs, started while they were
alone and filling its four sequences, hold nobody's short turns back: the
spare sequence takes them."""
from __future__ import annotations

import json

import httpx
import pytest

from protocol import keys
from tests.integration.http import DroppableStream
from tests.integration.waits import queued, wait_until, waiting

LONG = " ".join(["word"] * 60_000)  # 60,000 tokens, about 300 KB


def chat(text: str) -> dict:
    return {"model": "held", "stream": True, "max_tokens": 16, "messages": [{"role": "user", "content": text}]}


def upstream_saw(scripted, count: int):
    return lambda: scripted.counts["held"] >= count


def is_long(request: dict) -> bool:
    return len(json.dumps(request["body"])) > 100_000


def test_a_60k_token_prompt_holds_nobody_back(upstreams, clean_redis):
    base, scripted = upstreams["base"], upstreams["scripted"]
    other = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=30)  # another person
    started = len(scripted.requests)
    longs = [DroppableStream(base, "/v1/chat/completions", chat(LONG))]
    try:
        wait_until(upstream_saw(scripted, 1), what="the long prompt at the upstream")
        short = other.post(f"{base}/v1/chat/completions", json=chat("a short turn"))
        assert short.status_code == 200 and b"data: [DONE]" in short.content  # answered while the long one is held
        longs.append(DroppableStream(base, "/v1/chat/completions", chat(LONG)))
        wait_until(queued(clean_redis, "upstream"), what="the second long prompt to leave the last place")
        later = other.post(f"{base}/v1/chat/completions", json=chat("another short turn"))
        assert later.status_code == 200 and waiting(clean_redis, "upstream") == 1  # the long prompt still waits
        scripted.release()  # the first long prompt answers: its person holds no place, and the next one goes
        wait_until(upstream_saw(scripted, 4), what="the second long prompt at the upstream")
        assert [is_long(request) for request in scripted.requests[started:]] == [True, False, False, True]
    finally:
        for _ in longs:
            scripted.release()
        for stream in longs:
            stream.drop()
        other.close()


# A reply SmolLM2 greedily runs to its max_tokens (seen: 1,500 tokens, some 45 s beside nothing else here).
STORY = {"model": "smollm2:135m", "prompt": "Write a very long story about a dragon.",
         "options": {"temperature": 0, "repeat_penalty": 1.0, "num_predict": 1500}}


@pytest.mark.slow
def test_short_turns_run_beside_a_colleagues_four_long_jobs_on_the_local_model(base_url, clean_redis):
    """Alice's four long jobs fill the model's four sequences while she is
    alone; Bob's eight short turns, one after another, all end while every
    one of hers still runs (before the spare sequence, his first waited for
    one of hers to end: 0 turns in 19 s, the first after 44 s)."""
    longs = [DroppableStream(base_url, "/api/generate", STORY) for _ in range(4)]
    other = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=60)  # another person
    try:
        for stream in longs:
            assert stream.read_line().startswith(b"{")  # (its first token: it runs)
        running = {m.decode() for m in clean_redis.zrange(keys.RUNNING_JOBS, 0, -1)}
        assert len(running) == 4
        for turn in range(8):
            reply = other.post(f"{base_url}/api/chat", json={
                "model": "smollm2:135m", "stream": False, "options": {"num_predict": 4},
                "messages": [{"role": "user", "content": f"Say hello to number {turn}."}]})
            assert reply.status_code == 200 and reply.json()["eval_count"] > 0
        still = {m.decode() for m in clean_redis.zrange(keys.RUNNING_JOBS, 0, -1)}
        assert running <= still  # none of Alice's long jobs ended (or was held) while Bob took his turns
    finally:
        for stream in longs:
            stream.drop()
        other.close()
    wait_until(lambda: clean_redis.zcard(keys.RUNNING_JOBS) == 0, what="the long jobs to be stopped")
