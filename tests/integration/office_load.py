"""An office's load for the durability tests: several people, each with
two requests in flight at a time, taking turns at a streamed chat (SSE,
usage included), a non-streamed Ollama chat and a stored Responses turn.
Each request is recorded as answered (with the tokens its client was
told) or as a clean error (a 503 with Retry-After, or the dialect's
in-band error on a stream that had started); anything else (another
status, a stream cut without a word, a client timeout) is a failure."""
from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

from protocol import keys

WORDS = " ".join(f"w{i}" for i in range(16))  # echo:slow: 16 tokens, 50 ms apart
KINDS = ("stream", "ollama", "responses")


@dataclass
class Outcome:
    person: str
    kind: str
    answered: bool
    detail: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    response_id: str | None = None
    started_at: float = 0.0
    ended_at: float = field(default_factory=time.monotonic)


class Unclean(AssertionError):
    """A request that neither got its answer nor a clean error."""


def _stream(client: httpx.Client, headers: dict) -> Outcome:
    body = {"model": "echo:slow", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": WORDS}]}
    with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as response:
        if response.status_code != 200:
            return _refused(response)
        events = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]
    if events[-1:] != ["[DONE]"]:
        raise Unclean(f"a stream ended without [DONE]: {events[-2:]}")
    chunks = [json.loads(e) for e in events[:-1]]
    if any("error" in chunk for chunk in chunks):  # in band, then a chunk closing with finish_reason "error"
        error = next(chunk["error"]["message"] for chunk in chunks if "error" in chunk)
        assert chunks[-1]["choices"][0]["finish_reason"] == "error", chunks[-1]
        return Outcome("", "stream", False, f"in band: {error}")
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
    if text != WORDS:
        raise Unclean(f"a stream answered {text!r}")
    usage = chunks[-1]["usage"]
    return Outcome("", "stream", True, "", usage["prompt_tokens"], usage["completion_tokens"])


def _ollama(client: httpx.Client, headers: dict) -> Outcome:
    response = client.post("/api/chat", headers=headers, json={
        "model": "echo", "stream": False, "messages": [{"role": "user", "content": WORDS}]})
    if response.status_code != 200:
        return _refused(response)
    reply = response.json()
    if reply["message"]["content"] != WORDS:
        raise Unclean(f"an Ollama chat answered {reply!r}")
    return Outcome("", "ollama", True, "", reply["prompt_eval_count"], reply["eval_count"])


def _responses(client: httpx.Client, headers: dict) -> Outcome:
    response = client.post("/v1/responses", headers=headers, json={"model": "echo", "store": True, "input": WORDS})
    if response.status_code != 200:
        return _refused(response)
    reply = response.json()
    if reply["status"] != "completed" or reply["output"][0]["content"][0]["text"] != WORDS:
        raise Unclean(f"a Responses turn answered {reply!r}")
    usage = reply["usage"]
    return Outcome("", "responses", True, "", usage["input_tokens"], usage["output_tokens"], reply["id"])


def _refused(response: httpx.Response) -> Outcome:
    response.read()
    if response.status_code != 503 or not response.headers.get("Retry-After"):
        raise Unclean(f"HTTP {response.status_code} ({response.headers.get('Retry-After')!r}): {response.text[:300]}")
    return Outcome("", "", False, f"503: {response.text[:200]}")


ASK = {"stream": _stream, "ollama": _ollama, "responses": _responses}


class OfficeLoad:
    """`people`: name -> key. Two loops per person until `stop()`."""

    def __init__(self, base: str, people: dict[str, str], loops_each: int = 2, timeout: float = 60):
        self.base, self.people, self.timeout = base, people, timeout
        self.outcomes: list[Outcome] = []
        self.unclean: list[str] = []
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._loop, args=(name, index), daemon=True)
                         for name in people for index in range(loops_each)]

    def start(self) -> OfficeLoad:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(self.timeout + 10)
            assert not thread.is_alive(), "a request hung past its client's timeout"

    def answered(self, after: float = 0.0) -> int:
        with self._lock:
            return sum(1 for o in self.outcomes if o.answered and o.ended_at > after)

    def _loop(self, name: str, index: int) -> None:
        headers = {"Authorization": f"Bearer {self.people[name]}"}
        with httpx.Client(base_url=self.base, timeout=self.timeout) as client:
            turn = index
            while not self._stopping.is_set():
                kind = KINDS[turn % len(KINDS)]
                turn += 1
                started = time.monotonic()
                try:
                    outcome = ASK[kind](client, headers)
                except (Unclean, httpx.HTTPError, json.JSONDecodeError, KeyError, IndexError) as error:
                    with self._lock:
                        self.unclean.append(f"{name} {kind}: {type(error).__name__}: {error}")
                    continue
                outcome.person, outcome.kind, outcome.started_at = name, kind, started
                with self._lock:
                    self.outcomes.append(outcome)
                if not outcome.answered:
                    time.sleep(0.2)  # as a client honouring Retry-After would, briefly

    def failed_across(self, moment: float) -> Counter:
        """Per person, the requests under way at `moment` that got an error."""
        return Counter(o.person for o in self.outcomes if not o.answered and o.started_at < moment < o.ended_at)

    def totals(self) -> dict[str, dict[str, int]]:
        """Per person: answered requests and the tokens their clients were told."""
        found: dict[str, Counter] = {name: Counter() for name in self.people}
        for o in self.outcomes:
            if o.answered:
                found[o.person].update(requests=1, prompt_tokens=o.prompt_tokens,
                                       completion_tokens=o.completion_tokens)
        return {name: dict(counts) for name, counts in found.items()}


def held_places(redis, people: list[str], pools: list[str]) -> dict[str, int]:
    """What jobs still hold: each person's running slots, each pool's queue places and waiting jobs."""
    held = {f"active:{p}": redis.zcard(keys.active_key(p)) for p in people}
    held |= {f"queued:{pool}": redis.zcard(keys.queued_key(pool)) for pool in pools}
    held |= {f"waiting:{pool}": redis.zcard(keys.fair_ready_key(pool, "chat")) for pool in pools}
    return {name: count for name, count in held.items() if count}
