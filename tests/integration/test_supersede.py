"""Concurrent code completions: all complete by default (as real Ollama);
on a model that opts in, a person's newer completion supersedes their older
one, and never another person's."""
from __future__ import annotations

import json
import threading

import httpx
import ollama
import pytest

from jobqueue.records import job_state
from scripts.processes import stack_env, start_stack
from tests.integration.events_tap import EventsTap
from tests.integration.http import DroppableStream
from tests.integration.waits import wait_until

LONG = " ".join(f"w{i}" for i in range(300))
KEYS = {"alice": "alice-key-9", "bob": "bob-key-8"}


@pytest.fixture(scope="module")
def editor_stack(stack, redis_url, tmp_path_factory):
    registry = tmp_path_factory.mktemp("supersede") / "models.toml"
    registry.write_text(open("models.toml").read() +
                        '\n[models."echo:editor"]\nbackend = "echo"\ndelay_ms = 50\nsupersede = true\npool = "editor"\n')
    env = stack_env(redis_url, SWITCHBOARD_MODELS=str(registry),
                    SWITCHBOARD_API_KEYS=",".join(f"{n}:{k}" for n, k in KEYS.items()))
    worker, web, base = start_stack(env, 4, queues="editor-completion,editor")
    yield base
    web.stop()
    worker.stop()


@pytest.fixture
def editor(editor_stack, clean_redis):
    return editor_stack


def test_concurrent_completions_from_one_client_all_complete_by_default(base_url):
    client = ollama.Client(host=base_url)
    results, errors = [], []

    def complete(n: int) -> None:
        try:
            results.append(client.generate(model="echo:slow", prompt=f"job {n} a b c", raw=True)["response"])
        except Exception as error:  # noqa: BLE001 - collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=complete, args=(n,)) for n in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and sorted(results) == [f"job {n} a b c" for n in range(5)]


def test_a_newer_completion_from_the_same_person_supersedes_the_older(editor, redis_client, redis_url):
    tap = EventsTap(redis_url)
    try:
        alice = {"User-Agent": "editor-completions/1.0", "Authorization": f"Bearer {KEYS['alice']}"}
        first = DroppableStream(editor, "/api/generate", {"model": "echo:editor", "prompt": LONG, "raw": True}, alice)
        assert first.read_line()
        second = httpx.post(f"{editor}/api/generate", json={"model": "echo:editor", "prompt": "a b", "raw": True},
                            headers=alice | {"Authorization": "", "x-api-key": KEYS["alice"]}, timeout=30)
        assert second.status_code == 200
        lines = []
        while (line := first.read_line()):
            lines.append(json.loads(line))
        assert lines[-1] == {"error": "superseded by a newer completion request"}
        assert len(lines) <= 4  # it ended within a token or two of the second request
        first.drop()
        aborted_at, job_id = tap.wait_for_abort()
        wait_until(lambda: job_state(redis_client, job_id).get("status") == "finished", what="the job to finish")
        assert job_state(redis_client, job_id)["reason"] == "aborted"
        late = [e for t, e in tap.events(job_id) if t > aborted_at and e["type"] == "text"]
        assert len(late) <= 1
    finally:
        tap.close()


def test_another_persons_completion_never_supersedes(editor):
    """Bob's key sent as x-api-key, from the same address and editor."""
    agent = {"User-Agent": "editor-completions/1.0"}
    words = " ".join(f"w{i}" for i in range(40))
    first = DroppableStream(editor, "/api/generate", {"model": "echo:editor", "prompt": words, "raw": True},
                            agent | {"Authorization": f"Bearer {KEYS['alice']}"})
    assert first.read_line()
    second = httpx.post(f"{editor}/api/generate", json={"model": "echo:editor", "prompt": "a b", "raw": True},
                        headers=agent | {"x-api-key": KEYS["bob"]}, timeout=30)
    assert second.status_code == 200
    lines = []
    while (line := first.read_line()):
        lines.append(json.loads(line))
    assert lines[-1]["done"] is True and "error" not in lines[-1]
    assert "".join(line["response"] for line in lines).endswith("w39")
