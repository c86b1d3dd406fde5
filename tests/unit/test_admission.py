"""The admission Lua script on a real Redis: rate, concurrency and queue
limits, checked and recorded atomically; Retry-After from the drain rate."""
from __future__ import annotations

import uuid

import pytest

from protocol import keys
from protocol.admission import Busy, admit, release, retry_after_seconds
from protocol.commands import take_job

LIMITS = {"requests_per_minute": 100, "max_concurrent": 2, "max_queue": 3, "stale_after": 900}


def admit_one(redis, key="alice", pool="local", **limits) -> str:
    job_id = uuid.uuid4().hex
    admit(redis, key, job_id, pool, **(LIMITS | limits))
    return job_id


def test_an_admitted_job_holds_a_slot_until_released(clean_redis):
    first = admit_one(clean_redis)
    assert clean_redis.zrange(keys.active_key("alice"), 0, -1) == [first.encode()]
    release(clean_redis, "alice", first)
    assert clean_redis.zcard(keys.active_key("alice")) == 0


def test_over_the_concurrency_limit(clean_redis):
    admit_one(clean_redis)
    admit_one(clean_redis)
    with pytest.raises(Busy) as busy:
        admit_one(clean_redis)
    assert busy.value.reason == "concurrency" and busy.value.message == (
        "too many concurrent requests: 2 at a time for this key") and busy.value.retry_after >= 1
    admit_one(clean_redis, key="bob")  # another key is not affected


def test_stale_slots_are_dropped(clean_redis):
    clean_redis.zadd(keys.active_key("alice"), {"ghost-1": 1.0, "ghost-2": 2.0})  # admitted long ago, never released
    admit_one(clean_redis)
    assert clean_redis.zcard(keys.active_key("alice")) == 1


def test_over_the_rate_limit(clean_redis):
    for _ in range(2):
        release(clean_redis, "alice", admit_one(clean_redis, requests_per_minute=2))
    with pytest.raises(Busy) as busy:
        admit_one(clean_redis, requests_per_minute=2)
    assert busy.value.reason == "rate_limit" and 1 <= busy.value.retry_after <= 60


def test_a_full_queue_counts_both_of_a_pools_queues(clean_redis):
    clean_redis.rpush("tight", "a", "b")
    clean_redis.rpush("tight-completion", "c")
    with pytest.raises(Busy) as busy:
        admit_one(clean_redis, pool="tight")
    assert busy.value.reason == "queue_full" and busy.value.message == "the tight queue is full (3 jobs waiting)"
    clean_redis.delete("tight", "tight-completion")


def test_retry_after_follows_the_drain_rate(clean_redis):
    assert retry_after_seconds(clean_redis, "local", 10) == 30  # nothing drained yet: a default
    for _ in range(60):
        take_job(clean_redis, uuid.uuid4().hex, "w", "local")  # 60 a minute: one a second
    assert retry_after_seconds(clean_redis, "local", 9) == 10
