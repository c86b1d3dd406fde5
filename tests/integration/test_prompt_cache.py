"""The local model's prompt cache and cache-aware routing, on the real model
with two workers: people taking turns each keep their prefix (cache hits in
/metrics and in OpenAI's usage), a person's next request goes to the worker
holding their prefix while it has a free sequence (beside someone else's
job), and to the other one when it has none."""
from __future__ import annotations

import json
import re

import httpx
import pytest

from jobqueue.records import job_state
from scripts.processes import stack_env, start_web, start_worker, stop_together
from tests.integration.waits import wait_until

MODEL = ('[models."cached"]\nbackend = "llamacpp"\npool = "cache"\nn_ctx = 2048\nprompt_cache_mb = 256\n'
         # one job at a time per worker: a worker busy with someone else's job has no room for the next
         '[models."single"]\nbackend = "llamacpp"\npool = "cache"\nn_ctx = 2048\nparallel = 1\n')


def source(person: str) -> str:
    """A person's file: a few hundred tokens of their own."""
    return "".join(f"def {person}_{n}(x):\n    return x * {n} + len('{person}')\n\n" for n in range(24))


@pytest.fixture(scope="module")
def cache_stack(redis_url, tmp_path_factory):
    folder = tmp_path_factory.mktemp("cache")
    (folder / "models.toml").write_text(MODEL)
    env = stack_env(redis_url, SWITCHBOARD_MODELS=str(folder / "models.toml"))
    workers = [start_worker(env, concurrency=2, queues="cache-completion,cache") for _ in range(2)]
    web, base = start_web(env)
    yield base
    stop_together([web, *workers])


def complete(base: str, person: str, tail: str, max_tokens: int = 2, model: str = "cached", **extra) -> dict:
    """An editor's completion request: the person's file, then what they typed."""
    reply = httpx.post(f"{base}/v1/completions", json={
        "model": model, "prompt": source(person) + tail, "max_tokens": max_tokens, "temperature": 0, **extra},
        timeout=300)
    assert reply.status_code == 200, reply.text
    return reply.json()


def worker_of(redis, reply: dict) -> str:
    return job_state(redis, reply["id"].removeprefix("cmpl-"))["worker"]


def cached(reply: dict) -> int:
    return reply["usage"]["prompt_tokens_details"]["cached_tokens"]


def metric(base: str, name: str, **labels) -> float:
    text = httpx.get(f"{base}/metrics").text
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    found = re.search(rf"^{name}{{{re.escape(wanted)}}} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def test_people_taking_turns_each_keep_their_prefix_on_their_worker(cache_stack, clean_redis):
    first = {person: complete(cache_stack, person, "def ") for person in ("alice", "bob", "carol")}
    hits = metric(cache_stack, "switchboard_prompt_cache_lookups_total", model="cached", result="hit")
    for round_ in range(2):
        for person in ("alice", "bob", "carol"):
            again = complete(cache_stack, person, f"def next_{round_}")
            # the file was evaluated before: only what was typed since is new
            assert cached(again) >= again["usage"]["prompt_tokens"] - 12, (person, again["usage"])
            assert worker_of(clean_redis, again) == worker_of(clean_redis, first[person])
    assert metric(cache_stack, "switchboard_prompt_cache_lookups_total", model="cached", result="hit") >= hits + 6
    assert metric(cache_stack, "switchboard_prompt_tokens_total", model="cached", source="reused") > 0


def dave_counting(base: str, redis, model: str, while_streaming):
    """Runs `while_streaming()` while dave's long job streams; returns its
    result, dave's worker, and dave's job's record once it ended."""
    counting = ", ".join(str(n) for n in range(1, 30)) + ","
    with httpx.stream("POST", f"{base}/v1/completions", timeout=300, json={
            "model": model, "prompt": counting, "max_tokens": 1500, "stream": True, "temperature": 0}) as stream:
        lines = stream.iter_lines()  # kept: a dropped iterator would close the stream (and abort the job)
        dave_id = json.loads(next(lines).removeprefix("data: "))["id"].removeprefix("cmpl-")
        dave_worker = job_state(redis, dave_id)["worker"]
        result = while_streaming()
    dave_state = wait_until(lambda: (state := job_state(redis, dave_id)).get("finished_at") and state,
                            what="dave's job to end")
    return result, dave_worker, dave_state


def test_a_busy_worker_is_not_waited_for_only_for_its_cache(cache_stack, clean_redis):
    home = worker_of(clean_redis, complete(cache_stack, "alice", "def ", model="single"))
    again, dave_worker, dave_state = dave_counting(
        cache_stack, clean_redis, "single", lambda: complete(cache_stack, "alice", "def more", model="single"))
    alice_state = job_state(clean_redis, again["id"].removeprefix("cmpl-"))
    assert float(alice_state["started_at"]) < float(dave_state["finished_at"])  # she did not wait for dave's job
    if dave_worker == home:
        assert alice_state["worker"] != home  # her worker was busy: the other one took her request
    else:
        assert alice_state["worker"] == home and cached(again) > 0


def test_a_worker_with_a_free_sequence_serves_its_person_beside_someone_elses_job(cache_stack, clean_redis):
    home = worker_of(clean_redis, complete(cache_stack, "erin", "def "))
    again, _, dave_state = dave_counting(
        cache_stack, clean_redis, "cached", lambda: complete(cache_stack, "erin", "def more"))
    erin_state = job_state(clean_redis, again["id"].removeprefix("cmpl-"))
    assert float(erin_state["started_at"]) < float(dave_state["finished_at"])
    assert erin_state["worker"] == home and cached(again) >= again["usage"]["prompt_tokens"] - 12
