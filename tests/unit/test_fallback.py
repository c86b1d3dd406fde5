"""app/fallback.py's choice of the model a new job runs on, against a real
Redis: its own while a deployment of it is up and its queue moves; the
first fallback that is up when every deployment rests, or when the wait
would be longer than `fallback_after`; and which failures move a started
job to a fallback."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from app import fallback
from catalog.registry import Registry, parse_entry
from jobqueue import deployments, fairqueue
from jobqueue.deployments import Rest
from jobqueue.fairqueue import Asker, Placement
from protocol import keys
from protocol.contract import Image, Job, Message
from protocol.errors import BackendError

JOB = Job(id="j", model="coder", messages=[Message(role="user", content="hi")])
BOXES = [{"base_url": "http://gpu1/v1", "name": "gpu1"}, {"base_url": "http://gpu2/v1", "name": "gpu2"}]


@pytest.fixture
def shared(clean_redis):
    common = {"backend": "openai", "upstream_model": "m", "context_length": 100}
    entries = {"coder": parse_entry("coder", {**common, "deployments": BOXES, "fallbacks": ["hosted", "spare"],
                                              "fallback_after": 20}),
               "hosted": parse_entry("hosted", {**common, "deployments": BOXES[:1] + [
                   {"base_url": "http://gpu3/v1", "name": "gpu3"}]}),
               "spare": parse_entry("spare", {**common, "base_url": "http://spare/v1", "vision": True})}
    return SimpleNamespace(redis=clean_redis, registry=Registry(entries))


def _rest(redis, model: str, name: str) -> None:
    deployments.failed(redis, model, name, "", Rest(60, 60))


def test_a_model_with_a_deployment_up_and_a_moving_queue_runs_itself(shared):
    _rest(shared.redis, "coder", "gpu1")
    assert fallback._entry_to_run(shared, shared.registry.get("coder"), JOB).name == "coder"


def test_when_every_deployment_rests_the_first_fallback_that_is_up_answers(shared):
    for name in ("gpu1", "gpu2"):
        _rest(shared.redis, "coder", name)
    assert fallback._entry_to_run(shared, shared.registry.get("coder"), JOB).name == "hosted"
    for name in ("gpu1", "gpu3"):
        _rest(shared.redis, "hosted", name)
    assert fallback._entry_to_run(shared, shared.registry.get("coder"), JOB).name == "spare"


def test_once_its_rests_are_over_a_model_runs_itself_again_though_not_yet_probed(shared):
    for name in ("gpu1", "gpu2"):
        deployments.failed(shared.redis, "coder", name, "", Rest(0.001, 0.001))
    deadline = time.monotonic() + 10
    while shared.redis.exists(keys.cooldown_key("coder", "gpu1"), keys.cooldown_key("coder", "gpu2")):
        assert time.monotonic() < deadline
    assert shared.redis.exists(keys.failures_key("coder", "gpu1"))  # recovering: only a request will probe it
    assert fallback._entry_to_run(shared, shared.registry.get("coder"), JOB).name == "coder"


def test_a_queue_whose_wait_is_too_long_sends_new_jobs_to_the_fallback(shared, web):
    for n in range(5):  # waiting, with nothing drained lately: the estimate is 30 s, over fallback_after's 20
        job = Job(id=f"j{n}", model="coder", web_id=web, expires_at=time.time() + 60)
        fairqueue.push(shared.redis, job, Asker("bob", 10), Placement("upstream"))
    assert fallback._entry_to_run(shared, shared.registry.get("coder"), JOB).name == "hosted"
    shared.redis.set(keys.drained_key("upstream", int(time.time() // 10)), 600)  # 10 a second: half a second
    assert fallback._entry_to_run(shared, shared.registry.get("coder"), JOB).name == "coder"


@pytest.mark.parametrize("status, falls_back", [(502, True), (503, True), (504, True), (400, False), (429, False),
                                                (404, False)])
def test_which_failures_before_the_first_token_move_a_job_to_a_fallback(shared, status, falls_back):
    moved = fallback._fallback_after(shared, shared.registry.get("coder"), JOB, BackendError("x", status), {"coder"})
    assert (moved.name if moved else None) == ("hosted" if falls_back else None)
    assert fallback._fallback_after(shared, shared.registry.get("coder"), JOB, BackendError("x", 502),
                                    {"coder", "hosted", "spare"}) is None  # every one tried


def test_a_fallback_that_cannot_serve_the_job_as_translated_is_passed_over(shared):
    for name in ("gpu1", "gpu2"):
        _rest(shared.redis, "coder", name)
    seen = JOB.model_copy(update={"messages": [Message(role="user", content="this?", images=[Image(data="aGk=")])]})
    assert fallback._entry_to_run(shared, shared.registry.get("coder"), seen).name == "spare"  # hosted: no vision
    thinking = JOB.model_copy(update={"think": "high"})
    assert fallback._entry_to_run(shared, shared.registry.get("coder"), thinking).name == "coder"  # none thinks
    moved = fallback._fallback_after(shared, shared.registry.get("coder"), seen, BackendError("x", 502), {"coder"})
    assert moved.name == "spare"
