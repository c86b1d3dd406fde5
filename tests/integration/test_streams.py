"""The relay loses nothing and mixes nothing up."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx

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
