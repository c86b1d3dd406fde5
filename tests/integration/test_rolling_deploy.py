"""The compatibility policy (protocol/contract.py) with real processes: during
a rolling deploy the previous release's worker serves this release's web
process, and this release's worker the previous release's web process, on
one Redis. The previous release is taken from this clone's history."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import ollama
import openai
import pytest
import redis

from protocol.contract import PREVIOUS_RELEASE
from scripts.embedded_redis import EmbeddedRedis
from scripts.processes import ROOT, stack_env, start_web, start_worker
from tests.integration.http import DroppableStream

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def previous_tree(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("previous-release")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", PREVIOUS_RELEASE], capture_output=True)
    if archive.returncode != 0:
        pytest.fail(f"the previous release {PREVIOUS_RELEASE} is not in this clone's history: "
                    f"{archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder


@pytest.fixture(scope="module")
def own_redis():
    server = EmbeddedRedis()
    yield server
    server.stop()


@pytest.fixture(params=["web-new+worker-previous", "web-previous+worker-new"])
def mixed_base(request, previous_tree, own_redis):
    web_tree, worker_tree = (ROOT, previous_tree) if request.param.startswith("web-new") else (previous_tree, ROOT)
    redis.Redis.from_url(own_redis.url).flushdb()
    env = stack_env(own_redis.url)
    worker = start_worker(env, concurrency=4, cwd=worker_tree)
    try:
        web, base = start_web(env, cwd=web_tree)
    except BaseException:
        worker.stop()
        raise
    yield base
    web.stop()
    worker.stop()


def test_answers_streams_and_embeds(mixed_base):
    client = openai.OpenAI(base_url=f"{mixed_base}/v1", api_key="none", max_retries=0)
    chunks = list(client.chat.completions.create(model="echo", messages=[{"role": "user", "content": "one two"}],
                                                 stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "one two"
    assert chunks[-1].usage.completion_tokens == 2
    reply = ollama.Client(host=mixed_base).chat(model="echo", messages=[{"role": "user", "content": "three"}])
    assert reply.message.content == "three" and reply.done_reason == "stop"
    assert len(client.embeddings.create(model="echo", input=["a b"]).data[0].embedding) > 0


def test_a_client_that_leaves_aborts_its_job(mixed_base, own_redis):
    stream = DroppableStream(mixed_base, "/api/generate", {"model": "echo:slow", "prompt": " ".join(["w"] * 400)})
    assert stream.read_line()  # it started
    stream.drop()
    states = redis.Redis.from_url(own_redis.url)
    deadline = time.monotonic() + 30
    while not any(states.hget(key, "reason") == b"aborted" for key in states.scan_iter("switchboard:job:*:state")):
        assert time.monotonic() < deadline, "the job was not aborted"
        time.sleep(0.05)
    reply = httpx.post(f"{mixed_base}/api/generate", json={"model": "echo", "prompt": "after", "stream": False},
                       timeout=30)
    assert reply.json()["response"] == "after"
