"""One model on several upstream servers, driven as clients drive it: the
`openai` and `ollama` clients against a Switchboard whose models are spread
over real processes (the benchmark's upstream, of fixed capacity, which
says what it served), killed and restarted as a box would be."""
from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import ollama
import openai
import pytest

from scripts.embedded_redis import free_port
from scripts.processes import Process, ROOT, stack_env, start_fake_upstream, start_web, start_worker, stop_together
from tests.integration.scripted_upstream import ScriptedUpstream
from tests.integration.waits import wait_until, waiting

pytestmark = pytest.mark.slow

TOKENS, RATE = 8, 100  # a reply takes about 80 ms


class Box:
    """An upstream server that can be killed and started again on its port.
    It has no bound of its own: what it serves at once is what Switchboard
    sends it."""

    def __init__(self):
        self.port = free_port()
        self.process: Process | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.process = start_fake_upstream(self.port, TOKENS, RATE)

    def kill(self) -> None:
        self.process.stop(sig=9)

    def stats(self) -> dict:
        return httpx.get(f"{self.url}/stats", timeout=5).json()

    def served(self, model: str) -> int:
        return self.stats()["served"].get(model, 0)

    def most_at_once(self, model: str) -> int:
        return self.stats()["most_at_once"].get(model, 0)


def _deployment(box: Box, name: str, extra: str = "") -> str:
    return f'{{ base_url = "{box.url}/v1", name = "{name}"{extra} }}'


def _registry(boxes: dict[str, Box], ollama_url: str) -> str:
    a, b, c, d, e, f = (boxes[n] for n in "abcdef")
    # A pool of their own: the session's other upstream workers share this Redis, with other registries.
    common = 'backend = "openai"\npool = "routed"\ncontext_length = 8192\ncooldown = 0.5\nmax_cooldown = 2\n'
    models = {
        "spread": [_deployment(a, "a", ", weight = 3"), _deployment(b, "b")],
        "sticky": [_deployment(a, "a"), _deployment(b, "b")],
        "bounded": [_deployment(a, "a", ", max_concurrent = 2"), _deployment(b, "b", ", max_concurrent = 2")],
        "failover": [_deployment(a, "a"), _deployment(c, "c")],
        "kill": [_deployment(b, "b"), _deployment(d, "d")],
        "primary": [_deployment(e, "e"), _deployment(f, "f")],
        "backup": [_deployment(a, "a")],
        "mixed": [_deployment(a, "a", ", context_length = 4096, max_concurrent = 1"),
                  f'{{ base_url = "{ollama_url}", backend = "ollama", name = "ol" }}'],
    }
    tables = "".join(f'[models."{name}"]\n{common}upstream_model = "{name}"\ndeployments = [\n  '
                     + ",\n  ".join(listed) + "\n]\n\n" for name, listed in models.items())
    return tables.replace('[models."primary"]\n', '[models."primary"]\nfallbacks = ["backup"]\n') + _crash_model(ollama_url)


def _crash_model(scripted_url: str) -> str:
    """Two places in a pool of its own, on replies that last a minute."""
    places = ", ".join(f'{{ base_url = "{scripted_url}/v1", name = "{name}", max_concurrent = 1 }}' for name in "xy")
    return (f'[models."crash"]\nbackend = "openai"\npool = "crashed"\ncontext_length = 8192\n'
            f'upstream_model = "endless-60"\ndeployments = [{places}]\n')


@pytest.fixture(scope="module")
def routed(redis_url, tmp_path_factory):
    boxes = {name: Box() for name in "abcdef"}
    ollama_box = ScriptedUpstream()  # speaks Ollama's /api/chat
    registry = tmp_path_factory.mktemp("deployments") / "models.toml"
    registry.write_text(_registry(boxes, ollama_box.url))
    env = stack_env(redis_url, SWITCHBOARD_MODELS=str(registry), SWITCHBOARD_MAX_CONCURRENT="1000",
                    SWITCHBOARD_REQUESTS_PER_MINUTE="100000")
    worker = start_worker(env, concurrency=60, queues="routed-completion,routed", pool="gevent")
    web, base = start_web(env)
    yield {"base": base, "boxes": boxes, "env": env}
    stop_together([web, worker, *(box.process for box in boxes.values())])
    ollama_box.close()


def _chat(base: str, model: str, text: str = "hello") -> str:
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
    stream = client.chat.completions.create(model=model, messages=[{"role": "user", "content": text}], stream=True)
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


def _many(count: int, at_once: int, call) -> list:
    with ThreadPoolExecutor(at_once) as pool:
        return list(pool.map(call, range(count)))


def test_requests_spread_in_proportion_to_the_weights(routed):
    base, boxes = routed["base"], routed["boxes"]
    replies = _many(64, 16, lambda n: _chat(base, "spread", f"question {n}"))
    assert all(reply.startswith("tok") for reply in replies)
    on_a, on_b = boxes["a"].served("spread"), boxes["b"].served("spread")
    assert on_a + on_b == 64
    assert 0.6 <= on_a / 64 <= 0.9, (on_a, on_b)  # weights 3 : 1


def test_a_person_and_a_shared_prompt_stay_on_one_deployment(routed):
    """Equal weights and one request at a time: without affinity each would
    go either way."""
    base, boxes = routed["base"], routed["boxes"]
    client = ollama.Client(host=base)
    history = [{"role": "system", "content": "You review code. " * 300}]
    for turn in range(8):
        history.append({"role": "user", "content": f"and file {turn}?"})
        reply = client.chat(model="sticky", messages=history)
        history.append({"role": "assistant", "content": reply.message.content})
    assert sorted([boxes["a"].served("sticky"), boxes["b"].served("sticky")]) == [0, 8]


def test_bounded_deployments_are_never_over_their_bound_and_the_rest_wait(routed):
    base, boxes = routed["base"], routed["boxes"]
    sent_before = _requests_counted(base, "bounded")
    replies = _many(40, 40, lambda n: _chat(base, "bounded", f"q{n}"))  # 4 places for 40 requests at once
    assert len(replies) == 40 and all(reply.startswith("tok") for reply in replies)
    assert boxes["a"].served("bounded") + boxes["b"].served("bounded") == 40
    assert _requests_counted(base, "bounded") - sent_before == 40
    assert 1 <= boxes["a"].most_at_once("bounded") <= 2 and 1 <= boxes["b"].most_at_once("bounded") <= 2


def _requests_counted(base: str, model: str) -> float:
    """Requests sent to the model's deployments, as /metrics counts them (in Redis: since it was last emptied)."""
    metrics = httpx.get(f"{base}/metrics").text
    if "switchboard_deployment_requests_total" not in metrics:
        return 0
    return sum(_metric(metrics, "switchboard_deployment_requests_total", model, name, 0) for name in "ab")


def test_a_dead_deployment_is_skipped_and_comes_back_by_itself(routed):
    base, boxes = routed["base"], routed["boxes"]
    boxes["c"].kill()
    replies = _many(12, 4, lambda n: _chat(base, "failover", f"q{n}"))
    assert all(reply.startswith("tok") for reply in replies)  # none failed: each went on to a
    metrics = httpx.get(f"{base}/metrics").text
    assert _metric(metrics, "switchboard_deployment_failures_total", "failover", "c") >= 1
    assert _metric(metrics, "switchboard_deployment_cooldowns_total", "failover", "c") >= 1
    boxes["c"].start()  # a new process: it has served nothing
    deadline = time.monotonic() + 30
    # Its rest ends, a request's pick has it probed, and it takes requests again: bursts of four, as
    # the person's affinity keeps one request at a time on a.
    while boxes["c"].served("failover") == 0:
        assert time.monotonic() < deadline, "the restarted deployment never came back"
        assert all(reply.startswith("tok") for reply in _many(4, 4, lambda n: _chat(base, "failover", f"r{n}")))
    metrics = httpx.get(f"{base}/metrics").text
    assert _metric(metrics, "switchboard_deployment_ready", "failover", "c") == 1


def test_killing_a_deployment_under_load_loses_no_request_that_had_not_started(routed):
    base, boxes = routed["base"], routed["boxes"]
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
    outcomes = []

    def one(n: int) -> None:
        if n == 60:
            boxes["d"].kill()
        started = False
        try:
            stream = client.chat.completions.create(model="kill", stream=True,
                                                    messages=[{"role": "user", "content": f"q{n}"}])
            for chunk in stream:
                started = started or bool(chunk.choices and chunk.choices[0].delta.content)
            outcomes.append("ok")
        except openai.APIError as error:
            outcomes.append("broken mid-stream" if started else f"lost: {error}")

    try:
        _many(200, 20, one)
    finally:
        boxes["d"].start()
    lost = [outcome for outcome in outcomes if outcome.startswith("lost")]
    assert len(outcomes) == 200 and not lost, lost[:3]


def test_a_fallback_answers_when_every_deployment_is_down(routed):
    base, boxes = routed["base"], routed["boxes"]
    assert _chat(base, "primary").startswith("tok") and boxes["a"].served("backup") == 0
    boxes["e"].kill()
    boxes["f"].kill()
    try:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
        reply = client.chat.completions.with_raw_response.create(
            model="primary", messages=[{"role": "user", "content": "hi"}])  # the first to find both down
        assert reply.headers["x-switchboard-model"] == "backup"
        assert reply.parse().model == "backup" and reply.parse().choices[0].message.content.startswith("tok")
        streamed = client.chat.completions.create(model="primary", stream=True,
                                                  messages=[{"role": "user", "content": "and now?"}])
        assert {chunk.model for chunk in streamed} == {"backup"}
        assert ollama.Client(host=base).chat(model="primary", messages=[{"role": "user", "content": "hi"}]).model \
            == "backup"
        assert boxes["a"].served("backup") == 3
    finally:
        boxes["e"].start()
        boxes["f"].start()
    # Back by itself: once their rests are over (2 s at most here), a request tries them again.
    deadline = time.monotonic() + 30
    while client.chat.completions.with_raw_response.create(
            model="primary", messages=[{"role": "user", "content": "back?"}]).headers["x-switchboard-model"] != "primary":
        assert time.monotonic() < deadline, "primary never came back from its fallback"


def test_a_model_over_two_kinds_of_server_reports_the_smaller_context(routed):
    base = routed["base"]
    shown = httpx.post(f"{base}/api/show", json={"model": "mixed"}).json()
    assert shown["model_info"]["upstream.context_length"] == 4096
    # The fake upstream's replies, and the Ollama server's: a takes one at a time, so bursts of
    # eight reach both.
    seen, deadline = set(), time.monotonic() + 30
    while seen != {"tok", "ok"}:
        assert time.monotonic() < deadline, seen
        seen |= {reply.split()[0] for reply in _many(8, 8, lambda n: _chat(base, "mixed", "same words"))}


def test_operators_see_the_deployments(routed):
    base = routed["base"]
    status = httpx.get(f"{base}/admin/status").json()
    listed = {(d["model"], d["name"]) for d in status["deployments"]}
    assert {("spread", "a"), ("spread", "b"), ("mixed", "ol")} <= listed
    ps = subprocess.run([sys.executable, str(ROOT / "scripts" / "admin.py"), "ps"], env=routed["env"],
                        capture_output=True, text=True, timeout=60, check=True).stdout
    assert re.search(r"^bounded\s+a\s+ready\s+0/2\s+\d+\s+0$", ps, re.M), ps


def test_places_held_by_a_worker_that_died_go_to_the_job_waiting_for_them(routed, redis_client):
    """Both places of "crash" are taken by a worker that is then killed, and
    a third request waits for a place: it starts once the dead worker's
    presence lapses, with no other request to wake it."""
    env, base = routed["env"], routed["base"]
    doomed = start_worker(env, concurrency=4, queues="crashed-completion,crashed", pool="gevent")
    holders = [_Streaming(base, "crash", f"hold {n}") for n in range(2)]
    try:
        for holder in holders:
            holder.wait_first_token()
        third = _Streaming(base, "crash", "wait for a place")
        wait_until(lambda: waiting(redis_client, "crashed") == 1, 60, "the third request to be held")
        survivor = start_worker(env, concurrency=4, queues="crashed-completion,crashed", pool="gevent")
        try:
            assert not any(holder.ended.is_set() for holder in holders)  # the dead worker's places: still held
            doomed.stop(sig=9)
            third.wait_first_token(timeout=45)  # presence lapses in 12 s, then a beat wakes it
        finally:
            survivor.stop()
    finally:
        doomed.stop()


class _Streaming:
    """A streamed request read in a thread: `first_token` once text came
    (a waiting one then leaves), `ended` when its stream closed."""

    def __init__(self, base: str, model: str, text: str):
        self.first_token, self.ended = threading.Event(), threading.Event()
        self._leave_at_first = text.startswith("wait")
        body = {"model": model, "stream": True, "messages": [{"role": "user", "content": text}]}
        threading.Thread(target=self._read, args=(f"{base}/v1/chat/completions", body), daemon=True).start()

    def _read(self, url: str, body: dict) -> None:
        try:
            with httpx.stream("POST", url, json=body, timeout=120) as reply:
                for line in reply.iter_lines():
                    if line.startswith("data:") and "tick" in line:
                        self.first_token.set()
                        if self._leave_at_first:
                            return
        except httpx.HTTPError:
            pass
        finally:
            self.ended.set()

    def wait_first_token(self, timeout: float = 60) -> None:
        assert self.first_token.wait(timeout), "no text came"


def _metric(text: str, name: str, model: str, deployment: str, default: float | None = None) -> float:
    found = re.search(rf'^{name}{{deployment="{re.escape(deployment)}",model="{model}"}} (\S+)$', text, re.M)
    assert found or default is not None, f"{name} for {model}/{deployment} not in /metrics"
    return float(found[1]) if found else default
