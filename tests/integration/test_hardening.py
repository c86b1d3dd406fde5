"""Shared-server hardening through real processes: keys, limits, busy
answers with Retry-After, keep-alives while queued, expiry, a job waiting
for a worker that starts later, request limits, health, metrics, logs."""
from __future__ import annotations

import hashlib
import json
import threading

import httpx
import ollama
import openai
import pytest

from jobqueue.records import job_state
from scripts.processes import stack_env, start_web, start_worker
from tests.integration.http import DroppableStream, post_raw
from tests.integration.waits import queued, wait_until
from tests.integration.waits import waiting as jobs_waiting

KEYS = {"alice": "alice-key-1", "carol": "carol-key-2", "dave": "dave-key-3"}
LONG = " ".join(f"w{i}" for i in range(300))


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@pytest.fixture(scope="module")
def hardened(stack, redis_url, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hardened")
    (folder / "keys.toml").write_text(
        f'[keys.alice]\nsha256 = "{sha(KEYS["alice"])}"\n\n'
        f'[keys.carol]\nsha256 = "{sha(KEYS["carol"])}"\nmodels = ["echo*"]\nmax_concurrent = 1\n\n'
        f'[keys.dave]\nsha256 = "{sha(KEYS["dave"])}"\nrequests_per_minute = 2\n')
    registry = (open("models.toml").read() +
                '\n[models."tight"]\nbackend = "echo"\npool = "tight"\n'
                '\n[models."lonely"]\nbackend = "echo"\npool = "lonely"\n')
    (folder / "models.toml").write_text(registry)
    env = stack_env(redis_url, SWITCHBOARD_MODELS=str(folder / "models.toml"),
                    SWITCHBOARD_KEYS_FILE=str(folder / "keys.toml"), SWITCHBOARD_MAX_QUEUE="3",
                    SWITCHBOARD_MAX_QUEUE_WAIT="6", SWITCHBOARD_KEEPALIVE="0.5", SWITCHBOARD_HEARTBEAT_TIMEOUT="2",
                    SWITCHBOARD_MAX_BODY_BYTES=str(1024 * 1024), SWITCHBOARD_MAX_MESSAGES="50",
                    SWITCHBOARD_CONVERSATION_LOG_DIR=str(folder / "conversations"))
    web, base = start_web(env)
    yield {"base": base, "env": env, "folder": folder}
    web.stop()


@pytest.fixture
def h(hardened, clean_redis):
    return hardened


def auth(name: str) -> dict:
    return {"Authorization": f"Bearer {KEYS[name]}"}


def oai(base: str, name: str | None) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base}/v1", api_key=KEYS.get(name, "wrong-key"), max_retries=0)


CHAT = {"model": "echo", "messages": [{"role": "user", "content": "hi"}]}


# --- keys -------------------------------------------------------------------------

def test_open_routes_need_no_key(h):
    for path in ("/", "/api/version", "/healthz"):
        assert httpx.get(h["base"] + path).status_code == 200
    ready = httpx.get(h["base"] + "/readyz")
    assert ready.status_code == 503 and ready.json()["reason"] == "no worker consumes pool(s): lonely, tight"


def test_missing_and_wrong_keys_get_the_same_401(h):
    missing = httpx.get(h["base"] + "/api/tags")
    wrong = httpx.get(h["base"] + "/api/tags", headers={"Authorization": "Bearer nope"})
    empty = httpx.post(h["base"] + "/v1/chat/completions", json=CHAT, headers={"Authorization": "Bearer"})
    assert missing.status_code == wrong.status_code == empty.status_code == 401
    assert missing.json() == wrong.json() and "API key" in missing.json()["error"]
    with pytest.raises(openai.AuthenticationError):
        oai(h["base"], None).models.list()


def test_bearer_and_x_api_key_both_work(h):
    assert oai(h["base"], "alice").chat.completions.create(**CHAT).choices[0].message.content == "hi"
    assert httpx.post(h["base"] + "/api/chat", json=CHAT | {"stream": False},
                      headers={"x-api-key": KEYS["alice"]}).json()["message"]["content"] == "hi"


def test_a_key_without_access_to_a_model_cannot_tell_it_from_an_unknown_one(h):
    hidden, unknown = (post_raw(h["base"], "/v1/chat/completions", {"model": name, "messages": CHAT["messages"]},
                                auth("carol")) for name in ("smollm2:135m", "smollm2:136m"))
    assert hidden[0] == unknown[0] == 404
    assert json.loads(hidden[2])["error"]["message"] == 'model "smollm2:135m" not found, try pulling it first'
    assert json.loads(unknown[2])["error"]["message"] == 'model "smollm2:136m" not found, try pulling it first'
    names = [m["name"] for m in httpx.get(h["base"] + "/api/tags", headers=auth("carol")).json()["models"]]
    assert names == ["echo", "echo:embed", "echo:slow", "echo:coder", "echo:tools"]


def test_a_restricted_key_sees_only_its_models_in_ps_and_metrics(h, redis_client):
    from protocol.presence import mark_loaded
    from telemetry.metrics import count_job

    mark_loaded(redis_client, "smollm2:135m", "some-worker", 60)
    count_job(redis_client, "smollm2:135m", "stop", 5, 0.1)
    oai(h["base"], "carol").chat.completions.create(**CHAT)
    ps = [m["name"] for m in httpx.get(h["base"] + "/api/ps", headers=auth("carol")).json()["models"]]
    assert "smollm2:135m" not in ps
    assert "smollm2:135m" in [m["name"] for m in httpx.get(h["base"] + "/api/ps", headers=auth("alice")).json()["models"]]
    carols = httpx.get(h["base"] + "/metrics", headers=auth("carol")).text
    assert 'model="echo"' in carols and "smollm2" not in carols
    assert 'model="smollm2:135m"' in httpx.get(h["base"] + "/metrics", headers=auth("alice")).text


# --- limits -----------------------------------------------------------------------

def test_requests_per_minute(h):
    for _ in range(2):
        assert post_raw(h["base"], "/v1/chat/completions", CHAT, auth("dave"))[0] == 200
    status, headers, body = post_raw(h["base"], "/v1/chat/completions", CHAT, auth("dave"))
    assert status == 429 and 1 <= int(headers["Retry-After"]) <= 60
    assert json.loads(body)["error"]["message"] == "rate limit reached: 2 requests per minute for this key"
    status, headers, body = post_raw(h["base"], "/api/chat", CHAT, auth("dave"))
    assert status == 503 and "Retry-After" in headers
    assert json.loads(body) == {"error": "server busy, please try again.  maximum pending requests exceeded"}


def test_over_their_concurrency_limit_a_person_waits_their_turn(h, patient, redis_client):
    first = DroppableStream(patient, "/api/chat", {"model": "echo:slow", "messages": [
        {"role": "user", "content": LONG}]}, auth("carol"))
    assert first.read_line()
    second = DroppableStream(patient, "/api/chat", {"model": "echo", "messages": [
        {"role": "user", "content": "my turn"}]}, auth("carol"))
    wait_until(queued(redis_client, "local"), what="carol's second job to wait (not be refused)")
    assert post_raw(patient, "/v1/chat/completions", CHAT, auth("alice"))[0] == 200  # others are not held up
    assert jobs_waiting(redis_client, "local") == 1 and json.loads(second.read_line())["message"]["content"] == ""
    first.drop()  # carol's slot frees: her waiting job runs
    lines = [json.loads(line) for line in iter(second.read_line, b"")]
    assert "".join(l["message"]["content"] for l in lines) == "my turn" and lines[-1]["done"] is True


def test_a_full_queue_is_busy_with_retry_after_and_a_job_past_its_wait_expires(h, redis_client):
    waiting = [DroppableStream(h["base"], "/v1/chat/completions", {"model": "tight", "stream": True, "messages": [
        {"role": "user", "content": f"job {i}"}]}, auth("alice")) for i in range(3)]
    wait_until(queued(redis_client, "tight", 3), what="three jobs to wait in the tight queue")
    status, headers, body = post_raw(h["base"], "/v1/chat/completions", {"model": "tight", "messages": [
        {"role": "user", "content": "one too many"}]}, auth("alice"))
    assert status == 429 and json.loads(body)["error"]["message"] == "the tight queue is full (3 jobs waiting)"
    assert 1 <= int(headers["Retry-After"]) <= 300
    # While queued, the streams get keep-alive comments; after 6 s they give up with an in-band error.
    assert waiting[0].read_line().startswith(b"data: ")  # the role chunk opens the stream
    lines = []
    while (line := waiting[0].read_line()):
        lines.append(line)
    assert b": keep-alive\n" in lines
    error = json.loads(next(line for line in lines if b'"error"' in line).removeprefix(b"data: "))
    assert error["error"]["message"] == "no worker started the job within 6 s"
    for stream in waiting:
        stream.drop()
    # The expired jobs left the queue with their streams: a worker that starts now runs none of them.
    def unrun_states():
        states = [job_state(redis_client, k.decode().split(":")[2])
                  for k in redis_client.scan_iter(match="switchboard:job:*:state")]
        return len(states) >= 3 and all(s.get("reason") in ("expired", "aborted") for s in states) and states
    wait_until(unrun_states, timeout=10, what="the three jobs to be recorded as unrun")
    assert jobs_waiting(redis_client, "tight") == 0
    worker = start_worker(h["env"], concurrency=2, queues="tight")
    try:
        wait_until(lambda: "tight" in str(redis_client.mget(list(redis_client.scan_iter(
            match="switchboard:worker:*")))), what="the tight worker to consume")
        assert all("started_at" not in state for state in unrun_states())
    finally:
        worker.stop()


@pytest.fixture
def patient(h):
    """A web process whose jobs may wait long: a worker starting on a loaded
    machine can take longer than the main fixture's 6 s queue wait."""
    web, base = start_web(dict(h["env"], SWITCHBOARD_MAX_QUEUE_WAIT="300"))
    yield base
    web.stop()


def test_a_job_accepted_with_no_worker_runs_when_one_starts(h, patient, redis_client):
    stream = DroppableStream(patient, "/api/chat", {"model": "lonely", "messages": [
        {"role": "user", "content": "patience pays"}]}, auth("alice"))
    lines = [json.loads(stream.read_line())]  # a keep-alive: the job is accepted and waits
    wait_until(queued(redis_client, "lonely"), what="the job to wait in the lonely queue")
    worker = start_worker(h["env"], concurrency=1, queues="lonely")
    try:
        while (line := stream.read_line()):
            lines.append(json.loads(line))
        # keep-alives while waiting are empty pieces that every NDJSON parser accepts
        assert all("message" in l for l in lines), lines
        assert "".join(l["message"]["content"] for l in lines) == "patience pays"
        assert lines[0]["message"]["content"] == "" and lines[-1]["done"] is True
    finally:
        worker.stop()


def test_request_limits(h):
    status, _, body = post_raw(h["base"], "/api/chat", {"model": "echo", "messages": [
        {"role": "user", "content": "x" * (2 * 1024 * 1024)}]}, auth("alice"))
    assert status == 413 and "larger than 1048576 bytes" in json.loads(body)["error"]
    status, _, body = post_raw(h["base"], "/v1/chat/completions", {"model": "echo", "messages": [
        {"role": "user", "content": "x"}] * 51}, auth("alice"))
    assert status == 400 and json.loads(body)["error"]["param"] == "messages"


# --- observability ----------------------------------------------------------------

def test_request_id_is_echoed_or_made(h):
    given = httpx.get(h["base"] + "/api/version", headers={"X-Request-Id": "req-123"})
    assert given.headers["X-Request-Id"] == "req-123"
    assert len(httpx.get(h["base"] + "/api/version").headers["X-Request-Id"]) == 32


def test_metrics(h):
    client = oai(h["base"], "alice")
    client.chat.completions.create(**CHAT)
    client.chat.completions.create(model="echo", messages=CHAT["messages"], max_tokens=1)
    for _ in range(3):
        post_raw(h["base"], "/api/chat", CHAT, auth("dave"))
    assert httpx.get(h["base"] + "/metrics").status_code == 401
    text = httpx.get(h["base"] + "/metrics", headers=auth("alice")).text
    assert 'switchboard_jobs_finished_total{model="echo",reason="stop"} ' in text
    assert 'switchboard_tokens_generated_total{model="echo"}' in text
    assert 'switchboard_rejected_total{reason="rate_limit"} 1.0' in text
    assert 'switchboard_queue_depth{pool="local"} 0.0' in text and "switchboard_active_streams " in text
    assert 'switchboard_time_to_first_token_seconds_bucket{le="+Inf",model="echo"}' in text


def test_openapi_document(h):
    document = httpx.get(h["base"] + "/openapi.json", headers=auth("alice")).json()
    assert document["openapi"].startswith("3.") and "/v1/chat/completions" in document["paths"]
    ref = document["paths"]["/api/generate"]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert "suffix" in document["components"]["schemas"][ref.rsplit("/", 1)[1]]["properties"]


def test_conversation_log_redacts_secrets(h):
    oai(h["base"], "alice").chat.completions.create(model="echo", messages=CHAT["messages"],
                                                    extra_body={"api_key": "leaky"})
    files = list((h["folder"] / "conversations").glob("*.jsonl"))
    record = json.loads(files[0].read_text().splitlines()[-1])
    assert record["key"] == "alice" and record["reply"] == "hi" and record["outcome"] == "stop"
    assert record["request"]["api_key"] == "[redacted]" and KEYS["alice"] not in files[0].read_text()


# --- keys for clients that have only a URL (Copilot), and trusted networks ----------------

def test_a_key_in_the_url_path_works_for_every_client(h):
    base = f"{h['base']}/k/{KEYS['alice']}"
    client = ollama.Client(host=base)  # what Copilot's Ollama provider does: a URL, no key
    assert "echo" in [m.model for m in client.list().models]
    assert client.show("echo").capabilities
    assert client.chat("echo", messages=[{"role": "user", "content": "via path"}]).message.content == "via path"
    sdk = openai.OpenAI(base_url=f"{base}/v1", api_key="ignored-when-the-path-has-a-key", max_retries=0)
    assert sdk.chat.completions.create(**CHAT).choices[0].message.content == "hi"
    status, _, _ = post_raw(h["base"], f"/k/{KEYS['alice']}/v1/chat/completions", CHAT,
                            {"Authorization": "Bearer "})  # Copilot's chat, byte for byte
    assert status == 200
    assert httpx.get(f"{h['base']}/k/wrong-key/api/tags").status_code == 401


def test_a_key_in_the_path_or_the_query_is_never_logged_in_clear(h):
    web, base = start_web(h["env"], extra_args=("--access-logfile", "-"))
    try:
        assert httpx.get(f"{base}/k/{KEYS['carol']}/api/tags").status_code == 200
        assert httpx.get(f"{base}/k/{KEYS['carol']}-typo/api/tags").status_code == 401
        wait_until(lambda: "/k/[redacted]/api/tags" in web.output(), 10, "the access log line")
        # the Gemini API's REST form: ?key= (and a parameter that merely ends in "key" is no key)
        assert httpx.get(f"{base}/v1beta/models?pageSize=1&key={KEYS['carol']}").status_code == 200
        assert httpx.get(f"{base}/v1beta/models?monkey={KEYS['carol']}").status_code == 401
        wait_until(lambda: "/v1beta/models?pageSize=1&key=[redacted]" in web.output(), 10, "its access log line")
        assert web.output().count(KEYS["carol"]) == 1  # only the monkey's, which is no key
    finally:
        web.stop()


def test_trusted_networks_need_no_key(h):
    web, base = start_web(dict(h["env"], SWITCHBOARD_TRUSTED_NETWORKS="10.0.0.0/8,127.0.0.0/8"))
    try:
        assert httpx.get(f"{base}/api/tags").status_code == 200
        assert httpx.post(f"{base}/api/chat", json=CHAT | {"stream": False}).json()["message"]["content"] == "hi"
        wait_until(lambda: '"key": "trusted:127.0.0.1"' in web.output(), 10, "the request log line")
    finally:
        web.stop()
    other, base = start_web(dict(h["env"], SWITCHBOARD_TRUSTED_NETWORKS="10.0.0.0/8"))
    try:
        assert httpx.get(f"{base}/api/tags").status_code == 401
    finally:
        other.stop()


def test_unknown_paths_are_json_with_keys_on_too(h):
    # (the embedding routes, once examples here, are served since issue 16)
    for method, path in (("POST", "/api/rerank"), ("GET", "/nowhere"), ("POST", "/v1/rerank")):
        response = httpx.request(method, h["base"] + path, json={})
        assert response.status_code == 404 and response.headers["content-type"] == "application/json"


def test_simultaneous_arrivals_cannot_overshoot_the_queue_bound(h):
    """100 requests at once for a pool no worker serves, against a bound of
    3: exactly 3 wait in the queue, 97 are told the queue is full."""
    results, ready, answered = [], threading.Barrier(100), threading.Barrier(100)

    def arrive(n: int) -> None:
        ready.wait()
        with httpx.stream("POST", h["base"] + "/v1/chat/completions", headers=auth("alice"), timeout=30, json={
                "model": "lonely", "stream": True, "messages": [{"role": "user", "content": f"arrival {n}"}]}) as answer:
            results.append(answer.status_code)
            answered.wait()  # an admitted stream holds its place until every arrival was answered

    threads = [threading.Thread(target=arrive, args=(n,)) for n in range(100)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [200] * 3 + [429] * 97
