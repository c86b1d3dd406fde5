"""The admission Lua script on a real Redis: rate (a sliding window) and
queue limits, checked and recorded atomically; places held by a dead web
process freed; Retry-After exact or from the drain rate. (The concurrency
limit makes a job wait, not refuse it: tests/unit/test_fairqueue.py.)"""
from __future__ import annotations

import threading
import time
import uuid
from urllib.parse import urlsplit

import pytest
import redis as redis_py

from jobqueue import fairqueue
from jobqueue.admission import Busy, Limits, admit, admit_tool_call, release, retry_after_seconds
from jobqueue.fairqueue import Asker, Placement
from protocol import keys
from protocol.connection import database
from protocol.contract import Job, Message
from protocol.presence import renew_web_lease
from tests.conftest import clear_switchboard_keys

LIMITS = {"requests_per_minute": 100, "max_queue": 3, "stale_after": 900}


def _limits(**limits) -> Limits:
    return Limits(**(LIMITS | limits))


def admit_one(redis, web_id, key="alice", pool="local", **limits) -> str:
    job_id = uuid.uuid4().hex
    admit(redis, Job(id=job_id, model="echo", web_id=web_id), key, pool, _limits(**limits))
    return job_id


def test_an_admitted_job_holds_a_queue_place_until_released(clean_redis, web):
    first = admit_one(clean_redis, web)
    member = keys.lease_member(web, first).encode()
    assert clean_redis.zrange(keys.queued_key("local"), 0, -1) == [member]
    clean_redis.zadd(keys.active_key("alice"), {member: time.time()})  # a worker took it (fairqueue.take)
    release(clean_redis, "alice", first, "local", web)
    assert clean_redis.zcard(keys.active_key("alice")) == 0 and clean_redis.zcard(keys.queued_key("local")) == 0


def test_a_worker_taking_the_job_frees_its_queue_place(clean_redis, web):
    job_id = admit_one(clean_redis, web)
    job = Job(id=job_id, model="echo", messages=[Message(role="user", content="hi")], web_id=web,
              expires_at=time.time() + 60)
    fairqueue.push(clean_redis, job, Asker("alice", 16), Placement("local"))
    assert fairqueue.take(clean_redis, "local", "w").job.id == job_id
    assert clean_redis.zcard(keys.queued_key("local")) == 0


def test_many_jobs_of_one_person_are_admitted_up_to_the_queue_bound(clean_redis, web):
    for _ in range(10):
        admit_one(clean_redis, web, max_queue=10)  # no concurrency refusal: they wait their turn
    with pytest.raises(Busy) as busy:
        admit_one(clean_redis, web, max_queue=10)
    assert busy.value.reason == "queue_full"


def test_stale_places_are_dropped(clean_redis, web):
    clean_redis.zadd(keys.queued_key("local"), {"ghost-1": 1.0, "ghost-2": 2.0, "ghost-3": 3.0})  # never released
    admit_one(clean_redis, web)
    assert clean_redis.zcard(keys.queued_key("local")) == 1


def test_a_dead_web_processs_places_are_freed(clean_redis, web):
    dead = uuid.uuid4().hex  # its lease was never renewed (or lapsed): the process is gone
    for _ in range(3):
        clean_redis.zadd(keys.queued_key("local"), {keys.lease_member(dead, uuid.uuid4().hex): time.time()})
    admit_one(clean_redis, web)  # would be over the bound if the dead process's entries counted
    assert clean_redis.zcard(keys.queued_key("local")) == 1


def test_a_job_of_a_dead_web_process_is_never_taken(clean_redis, web):
    job = _job(web)
    _admit_and_queue(clean_redis, web, job)
    clean_redis.delete(keys.web_lease_key(web))
    assert fairqueue.take(clean_redis, "local", "w").job is None
    assert clean_redis.zcard(keys.queued_key("local")) == 0 and not clean_redis.exists(keys.state_key(job.id))


def test_the_rate_limit_is_a_sliding_window_with_an_exact_retry_after(clean_redis, web):
    now = time.time()
    clean_redis.zadd(keys.rpm_key("alice"), {"old": now - 61, "a": now - 50, "b": now - 20})  # "old" left the window
    with pytest.raises(Busy) as busy:
        admit_one(clean_redis, web, requests_per_minute=2)
    assert busy.value.reason == "rate_limit" and busy.value.retry_after in (10, 11)  # when "a" leaves the window
    clean_redis.zrem(keys.rpm_key("alice"), "a")
    admit_one(clean_redis, web, requests_per_minute=2)


def test_simultaneous_arrivals_cannot_overshoot_the_queue_bound(clean_redis, redis_url, web):
    admitted, refused = [], []

    def arrive(n: int) -> None:
        client = redis_py.Redis.from_url(redis_url)
        try:
            admitted.append(admit_one(client, web, key=f"person-{n}", pool="tight", max_queue=5))
        except Busy as busy:
            refused.append(busy.reason)

    threads = [threading.Thread(target=arrive, args=(n,)) for n in range(100)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(admitted) == 5 and refused == ["queue_full"] * 95


def test_a_full_queue_names_its_depth(clean_redis, web):
    for n in range(3):
        admit_one(clean_redis, web, key=f"p{n}", pool="tight")
    with pytest.raises(Busy) as busy:
        admit_one(clean_redis, web, pool="tight")
    assert busy.value.reason == "queue_full" and busy.value.message == "the tight queue is full (3 jobs waiting)"


def test_retry_after_follows_the_drain_rate(clean_redis, web):
    assert retry_after_seconds(clean_redis, "local", 10) == 30  # nothing drained yet: a default
    for _ in range(60):  # 60 taken in the last minute: one a second
        fairqueue.push(clean_redis, _job(web), Asker("alice", 100), Placement("local"))
        assert fairqueue.take(clean_redis, "local", "w").job is not None
    assert retry_after_seconds(clean_redis, "local", 9) == 10


def _job(web: str) -> Job:
    return Job(id=uuid.uuid4().hex, model="echo", messages=[Message(role="user", content="hi")], web_id=web,
               expires_at=time.time() + 60)


def _admit_and_queue(redis, web: str, job: Job, **limits) -> None:
    def queue_job(client):
        fairqueue.push(client, job, Asker("alice", 16), Placement("local"), if_admitted=True)
    admit(redis, job, "alice", "local", _limits(**limits), then=queue_job)


def test_a_job_admitted_with_its_queueing_is_queued_in_the_same_round_trip(clean_redis, web):
    job = _job(web)
    _admit_and_queue(clean_redis, web, job)
    assert fairqueue.depth(clean_redis, "local") == 1 and fairqueue.take(clean_redis, "local", "w").job.id == job.id


def test_a_refused_job_is_not_queued_though_its_queueing_was_sent_with_it(clean_redis, web):
    for _ in range(3):
        _admit_and_queue(clean_redis, web, _job(web))
    with pytest.raises(Busy):
        _admit_and_queue(clean_redis, web, _job(web))
    assert fairqueue.depth(clean_redis, "local") == 3


def test_admission_and_queueing_work_on_a_redis_that_lost_its_scripts(clean_redis, web):
    clean_redis.script_flush()  # as after a Redis restart
    job = _job(web)
    _admit_and_queue(clean_redis, web, job)
    assert fairqueue.depth(clean_redis, "local") == 1
    assert clean_redis.zcard(keys.queued_key("local")) == 1  # admitted once


def test_a_job_is_queued_when_only_its_admission_script_was_missing(clean_redis, web):
    """Its queueing ran first (a no-op: not admitted yet); the admission runs
    again loaded, and so does what followed it (scripts.execute)."""
    from jobqueue.scripts import SCRIPTS

    clean_redis.script_flush()
    clean_redis.script_load(SCRIPTS._text("fair_push"))
    _admit_and_queue(clean_redis, web, _job(web))
    assert fairqueue.depth(clean_redis, "local") == 1 and clean_redis.zcard(keys.queued_key("local")) == 1


def test_queueing_that_fails_when_run_again_after_a_restart_gives_the_place_back(clean_redis, web):
    """Both scripts lost (a Redis restart): the admission runs again and
    admits; the queueing, run again after it, fails: the admission is undone
    (scripts.execute keeps a rerun's error among the results)."""
    clean_redis.script_flush()
    clean_redis.set(keys.fair_ready_key("local", "chat"), "not a sorted set")  # fair_push's ZADD: WRONGTYPE
    with pytest.raises(Exception, match="WRONGTYPE"):
        _admit_and_queue(clean_redis, web, _job(web))
    assert clean_redis.zcard(keys.queued_key("local")) == 0
    clean_redis.delete(keys.fair_ready_key("local", "chat"))


def test_queueing_that_fails_after_admission_gives_the_place_back(clean_redis, web):
    def broken(client):
        client.hset("a-hash-key-used-as-a-list", "x", "1")
        client.lpush("a-hash-key-used-as-a-list", "y")  # WRONGTYPE, after the admission
    clean_redis.delete("a-hash-key-used-as-a-list")
    job = _job(web)
    with pytest.raises(Exception, match="WRONGTYPE"):
        admit(clean_redis, job, "alice", "local", _limits(), then=broken)
    assert clean_redis.zcard(keys.queued_key("local")) == 0
    clean_redis.delete("a-hash-key-used-as-a-list")


def test_queueing_only_if_admitted_does_nothing_for_a_job_admission_never_saw(clean_redis, web):
    fairqueue.push(clean_redis, _job(web), Asker("alice", 16), Placement("local"), if_admitted=True)
    assert fairqueue.depth(clean_redis, "local") == 0


@pytest.fixture
def unwatched_redis(redis_url):
    """A database of the suite's Redis next to its own, which no process of
    the suite watches: the integration tests' MCP pool (a session fixture)
    takes calls off `keys.MCP_CALLS` in the suite's own database as they
    come. (Never database 0, where `make run` keeps its data.)"""
    own = database(redis_url)
    client = redis_py.Redis.from_url(urlsplit(redis_url)._replace(path=f"/{own + 1 if own < 15 else own - 1}")
                                     .geturl())
    clear_switchboard_keys(client)
    yield client
    clear_switchboard_keys(client)
    client.close()


@pytest.mark.parametrize("rates, refused", [((100, 100), None), ((100, 1), "tool calls"), ((1, 100), "requests")],
                         ids=["admitted", "over-tool-calls", "over-requests"])
def test_a_tool_call_is_admitted_and_queued_for_the_pool_in_one_script(unwatched_redis, rates, refused):
    """Admitted, a gateway tool call holds one of the person's slots and is on the MCP pool's list; refused
    (after one earlier call counted against the rate), neither."""
    clean_redis, web = unwatched_redis, uuid.uuid4().hex
    renew_web_lease(clean_redis, web)
    earlier = keys.lease_member(web, "earlier")
    admit_tool_call(clean_redis, "alice", earlier, (100, 100), '{"id": "earlier"}')
    fairqueue.finish(clean_redis, "alice", earlier)
    clean_redis.delete(keys.MCP_CALLS)
    member = keys.lease_member(web, "call")
    if refused is None:
        admit_tool_call(clean_redis, "alice", member, rates, '{"id": "call"}')
        assert clean_redis.lrange(keys.MCP_CALLS, 0, -1) == [b'{"id": "call"}']
        assert clean_redis.zrange(keys.active_key("alice"), 0, -1) == [member.encode()]
        return
    with pytest.raises(Busy, match=refused) as busy:
        admit_tool_call(clean_redis, "alice", member, rates, '{"id": "call"}')
    assert busy.value.retry_after >= 1
    assert clean_redis.llen(keys.MCP_CALLS) == 0 and clean_redis.zcard(keys.active_key("alice")) == 0
