"""Sharing the server (issue 14), through the real stack: the order in which
one worker serves two people's waiting jobs (fair and FIFO), people told
apart by address when keys are off, a burst of 64 requests from the official
`ollama` client with keys off, and the local model's prompt cache with
routing to the worker that holds a person's prefix."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import ollama
import pytest

from identity.keys import digest
from protocol.keys import job_of_channel
from scripts.processes import stack_env, start_web, start_worker
from tests.integration.events_tap import EventsTap
from tests.integration.http import DroppableStream
from tests.integration.waits import queued, wait_until, waiting

KEYS = "alice:alice-key,bob:bob-key"
TURNS = '[models."turns"]\nbackend = "echo"\npool = "turns"\ndelay_ms = 20\n'


@pytest.fixture(scope="module")
def turns_env(redis_url, tmp_path_factory):
    folder = tmp_path_factory.mktemp("sharing")
    (folder / "models.toml").write_text(open("models.toml").read() + "\n" + TURNS)
    # ops may read who waits in /metrics (an admin key); alice and bob may not
    (folder / "keys.toml").write_text(f'[keys.ops]\nsha256 = "{digest("ops-key")}"\nadmin = true\n')
    return stack_env(redis_url, SWITCHBOARD_MODELS=str(folder / "models.toml"), SWITCHBOARD_API_KEYS=KEYS,
                     SWITCHBOARD_KEYS_FILE=str(folder / "keys.toml"))


@pytest.fixture(scope="module")
def one_slot(turns_env):
    worker = start_worker(turns_env, concurrency=1, queues="turns-completion,turns")
    yield
    worker.stop()


def ask(base: str, person: str, text: str) -> DroppableStream:
    return DroppableStream(base, "/api/chat", {"model": "turns", "messages": [{"role": "user", "content": text}]},
                           {"Authorization": f"Bearer {person}-key"})


def gauges(exposition: str) -> dict:
    """(name, sorted labels) -> value, from a Prometheus text exposition."""
    from prometheus_client.parser import text_string_to_metric_families

    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(exposition) for sample in family.samples}


def service_order(tap: EventsTap, texts: list[str]) -> list[str]:
    """The texts, in the order their jobs started: their first events' order,
    the jobs running one at a time (one slot)."""
    started = {}
    for _, channel, data in tap.messages:
        event = json.loads(data) if data.startswith(b"{") else {}
        if "type" in event:
            started.setdefault(job_of_channel(channel), len(started))
    by_job = {}
    for _, channel, data in tap.messages:
        for text in texts:
            if text.encode() in data:
                by_job[job_of_channel(channel)] = text
    return [by_job[job] for job in sorted(by_job, key=lambda job: started[job])]


@pytest.mark.parametrize("policy, expected", [
    ("fair", ["bob-1", "bob-2", "alice-1", "alice-2", "alice-3", "alice-4"]),
    ("fifo", ["alice-1", "alice-2", "alice-3", "alice-4", "bob-1", "bob-2"]),
])
def test_waiting_jobs_are_shared_out_between_people(turns_env, one_slot, clean_redis, redis_url, policy, expected):
    """alice and bob use different web processes: the order is kept in Redis.
    Shares are of work: alice's holding job (200 words, and a guessed reply)
    is charged about twice a short one, so bob's two go before her next."""
    webs = [start_web(dict(turns_env, SWITCHBOARD_QUEUE_POLICY=policy)) for _ in range(2)]
    base = {"alice": webs[0][1], "bob": webs[1][1]}
    tap = EventsTap(redis_url)
    streams = [ask(base["alice"], "alice", " ".join(["hold"] * 200))]  # alice's batch holds the one slot
    try:
        assert streams[0].read_line()
        for person, n in [("alice", 1), ("alice", 2), ("alice", 3), ("alice", 4), ("bob", 1), ("bob", 2)]:
            streams.append(ask(base[person], person, f"{person}-{n}"))  # one after another: a known order
            wait_until(queued(clean_redis, "turns", len(streams) - 1), what=f"{person}-{n} to wait")
        samples = gauges(httpx.get(f"{base['bob']}/metrics", headers={"Authorization": "Bearer ops-key"}).text)
        assert samples["switchboard_queue_depth", (("pool", "turns"),)] == 6
        assert "alice" not in httpx.get(f"{base['bob']}/metrics", headers={"Authorization": "Bearer bob-key"}).text
        assert samples["switchboard_queue_waiting", (("person", "alice"), ("pool", "turns"))] == 4
        assert samples["switchboard_queue_waiting", (("person", "bob"), ("pool", "turns"))] == 2
        streams[0].drop()
        for stream in streams[1:]:
            while stream.read_line():
                pass
        # the tap hears the last events a moment after the client read them
        wait_until(lambda: len(service_order(tap, expected)) == len(expected), what="the tap to hear every job")
        assert service_order(tap, expected) == expected
    finally:
        tap.close()
        for stream in streams:
            stream.drop()
        for web, _ in webs:
            web.stop()


def test_with_keys_off_people_are_told_apart_by_address(stack, clean_redis, redis_url):
    web, base = start_web(stack_env(redis_url, SWITCHBOARD_MAX_CONCURRENT="1"))  # the stack's worker: 5 slots
    body = {"model": "echo:slow", "messages": [{"role": "user", "content": " ".join(["hold"] * 200)}]}
    first = DroppableStream(base, "/api/chat", body)
    try:
        assert first.read_line()  # 127.0.0.1 runs one job: its limit
        second = DroppableStream(base, "/api/chat", dict(body, messages=[{"role": "user", "content": "later"}]))
        wait_until(queued(clean_redis, "local"), what="127.0.0.1's second job to wait")
        other = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=30)
        reply = other.post(base + "/api/chat", json={
            "model": "echo", "stream": False, "messages": [{"role": "user", "content": "another person"}]})
        assert reply.status_code == 200 and reply.json()["message"]["content"] == "another person"
        assert waiting(clean_redis, "local") == 1  # 127.0.0.1's second job still waits its turn
        first.drop()
        assert b"later" in b"".join(iter(second.read_line, b""))
    finally:
        first.drop()
        web.stop()


def test_a_burst_of_64_from_the_ollama_client_with_keys_off_all_succeeds(base_url):
    client = ollama.Client(host=base_url, timeout=120)

    def one(n: int) -> str:  # any error (a 503 is ollama.ResponseError) fails the test
        return client.chat(model="echo:slow", messages=[{"role": "user", "content": f"burst {n}"}])["message"]["content"]

    with ThreadPoolExecutor(64) as pool:
        assert list(pool.map(one, range(64))) == [f"burst {n}" for n in range(64)]
