"""The relay loses nothing and mixes nothing up."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx

from protocol.keys import job_of_channel
from tests.integration.events_tap import EventsTap
from tests.integration.http import post_raw
from tests.integration.waits import wait_until

WORDS = " ".join(f"w{i}" for i in range(300))


def chat(base: str, model: str, text: str) -> str:
    lines = []
    with httpx.stream("POST", f"{base}/api/chat", json={"model": model, "messages": [{"role": "user", "content": text}]},
                      timeout=60) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            lines.append(line)
    import json

    objects = [json.loads(line) for line in lines]
    assert objects[-1]["done"] is True
    return "".join(o["message"]["content"] for o in objects)


def test_no_token_is_lost_when_the_worker_starts_at_once(base_url):
    for _ in range(20):
        assert chat(base_url, "echo", WORDS) == WORDS


def test_concurrent_streams_never_receive_each_others_tokens(base_url):
    texts = [" ".join(f"s{n}-{i}" for i in range(40)) for n in range(8)]
    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda t: chat(base_url, "echo:slow", t), texts))
    assert replies == texts


def test_a_fast_streams_tokens_arrive_merged_and_complete(base_url):
    words = " ".join(f"w{i}" for i in range(2000))
    status, _, body = post_raw(base_url, "/v1/chat/completions", {
        "model": "echo", "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": words}]})
    chunks = [json.loads(frame.removeprefix(b"data: ")) for frame in body.split(b"\n\n")[:-2]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert status == 200 and text == words and chunks[-1]["usage"]["completion_tokens"] == 2000
    assert len(chunks) < 2000  # what piled up went out together


def test_a_reply_taken_whole_is_published_with_its_end(base_url, redis_url):
    """Not streamed, a paced reply (echo:slow: 40 tokens 50 ms apart) is one
    text message with the final one, not one every 50 ms; streamed, it is many."""
    words = " ".join(f"w{i}" for i in range(40))
    tap = EventsTap(redis_url)
    try:
        kinds = {}
        for stream in (False, True):
            reply = httpx.post(f"{base_url}/api/chat", timeout=60, json={
                "model": "echo:slow", "stream": stream, "messages": [{"role": "user", "content": f"{'streamed' if stream else 'whole'} {words}"}]})
            assert reply.status_code == 200 and (stream or words in reply.text)
            job = job_of_channel(tap.wait_for_channel(b"streamed" if stream else b"whole"))
            wait_until(lambda: any(e["type"] == "done" for _, e in tap.events(job)), what="the final event")
            kinds[stream] = [e["type"] for _, e in tap.events(job)]
        assert kinds[False] == ["text", "done"]
        assert kinds[True].count("text") > 5
    finally:
        tap.close()
