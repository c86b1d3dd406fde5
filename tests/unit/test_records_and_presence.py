"""protocol.keys and protocol.presence on a real Redis: the names, and what
each command leaves in Redis and publishes."""
from __future__ import annotations

import inspect
import json
import uuid

import pytest

from jobqueue import records
from protocol import keys, presence
from protocol.contract import Job
from protocol.events import ErrorEvent, decode_event


@pytest.fixture
def job_id():
    return uuid.uuid4().hex


@pytest.fixture
def listen(clean_redis):
    """Subscribe to channels; returns a function reading what arrived."""
    pubsub = clean_redis.pubsub(ignore_subscribe_messages=True)

    def subscribe(*channels):
        pubsub.subscribe(*channels)
        for _ in channels:
            pubsub.get_message(timeout=1)  # confirmations

        def received():
            out = []
            while (message := pubsub.get_message(timeout=0.2)) is not None:
                out.append((message["channel"].decode(), message["data"]))
            return out
        return received
    yield subscribe
    pubsub.close()


def test_every_name_is_under_the_prefix():
    names = [value for name, value in vars(keys).items() if name.isupper() and isinstance(value, str)]
    for name, function in vars(keys).items():
        if inspect.isfunction(function) and name.endswith(("_key", "_channel", "_pattern")) and "_of_" not in name:
            required = [p for p in inspect.signature(function).parameters.values() if p.default is p.empty]
            names.append(function(*["x"] * len(required)))
    assert names and all(name.startswith(keys.PREFIX + ":") for name in names if name != keys.PREFIX)


def test_send_abort_marks_the_job_and_tells_running_workers(clean_redis, listen, job_id):
    received = listen(keys.abort_channel())
    records.send_abort(clean_redis, job_id)
    assert records.is_aborted(clean_redis, job_id)
    assert 0 < clean_redis.ttl(keys.abort_key(job_id)) <= keys.RECORD_TTL_SECONDS
    assert received() == [(keys.abort_channel(), job_id.encode())]


def test_a_job_whose_heartbeat_stopped_is_lost_unless_it_finished(clean_redis, job_id):
    clean_redis.set(keys.alive_key(job_id), b"1")
    assert not records.worker_lost(clean_redis, job_id)
    records.end_heartbeat(clean_redis, job_id)
    records.record_state(clean_redis, job_id, status="running")
    assert records.worker_lost(clean_redis, job_id)
    records.record_state(clean_redis, job_id, status="finished", reason="stop")  # its final event is on its way
    assert not records.worker_lost(clean_redis, job_id)


def _job(web_id: str = "") -> Job:
    job = Job(id=uuid.uuid4().hex, model="echo", web_id=web_id)
    return job.model_copy(update={"reply_channel": keys.reply_channel(web_id, job.id) if web_id else ""})


def test_supersede_aborts_the_previous_completion_only(clean_redis, listen):
    first, second = _job("web-a"), _job("web-b")  # the previous one relayed by another web process
    received = listen(keys.reply_channel("web-a", first.id))
    assert records.supersede(clean_redis, "client", "echo", first) is None
    assert records.supersede(clean_redis, "client", "echo", first) is None  # the same job again
    assert records.supersede(clean_redis, "client", "echo", second) == first.id
    assert records.is_aborted(clean_redis, first.id) and not records.is_aborted(clean_redis, second.id)
    assert [decode_event(data) for _, data in received()] == [
        ErrorEvent(message="superseded by a newer completion request", status=409)]
    assert records.supersede(clean_redis, "other-client", "echo", _job("web-a")) is None


def test_a_reply_channel_names_its_job():
    assert keys.job_of_channel(keys.reply_channel("web-a", "abc")) == "abc"


def test_the_streams_relayed_are_what_live_leases_say(clean_redis):
    web_ids = [f"web-{uuid.uuid4().hex}" for _ in range(2)]  # leases outlive clean_redis
    presence.renew_web_lease(clean_redis, web_ids[0], 3)
    presence.renew_web_lease(clean_redis, web_ids[1], 2)
    try:
        assert presence.streams_relayed(clean_redis) == 5
        clean_redis.delete(keys.web_lease_key(web_ids[1]))  # lapsed: that process died
        assert presence.streams_relayed(clean_redis) == 3
    finally:
        clean_redis.delete(*(keys.web_lease_key(web_id) for web_id in web_ids))


def test_loaded_models_keep_the_longest_note(clean_redis):
    presence.mark_loaded(clean_redis, "echo", "w1", 100)
    presence.mark_loaded(clean_redis, "echo", "w2", 300)
    presence.mark_loaded(clean_redis, "smollm2:135m", "w1", 50)
    loaded = presence.loaded_models(clean_redis)
    assert set(loaded) == {"echo", "smollm2:135m"} and 250 < loaded["echo"] <= 300
    presence.forget_loaded(clean_redis, "smollm2:135m", "w1")
    assert set(presence.loaded_models(clean_redis)) == {"echo"}


def test_a_beat_keeps_jobs_alive_and_announces_the_worker(clean_redis, job_id):
    worker = {"id": f"host:{job_id[:8]}", "queues": ["local-completion", "local"]}  # presence outlives clean_redis
    clean_redis.set(keys.alive_key(job_id), b"1", ex=1)  # its first beat (the take's)
    records.beat(clean_redis, [job_id], worker)
    assert 1 < clean_redis.ttl(keys.alive_key(job_id)) <= presence.ALIVE_TTL_SECONDS  # refreshed
    assert worker in presence.live_workers(clean_redis)
    assert 0 < clean_redis.ttl(keys.worker_key(worker["id"])) <= 3 * presence.ALIVE_TTL_SECONDS
    records.beat(clean_redis, [], None)  # a worker not consuming yet announces nothing
    assert json.loads(clean_redis.get(keys.worker_key(worker["id"])))["id"] == worker["id"]


def test_a_beat_racing_a_jobs_end_does_not_bring_its_key_back(clean_redis, job_id):
    clean_redis.set(keys.alive_key(job_id), b"1", ex=presence.ALIVE_TTL_SECONDS)  # a running job's
    records.end_heartbeat(clean_redis, job_id)  # the job finished...
    records.beat(clean_redis, [job_id], None)  # ...while a beat was on its way with it
    assert not clean_redis.exists(keys.alive_key(job_id))


def test_channels_are_per_database_and_keys_per_database_by_redis_itself():
    assert keys.channels_prefix("redis://h:6379/3") == "switchboard:db3"
    assert keys.channels_prefix("redis://h:6379") == "switchboard:db0"
    assert keys.events_channel_pattern("switchboard:db3") == "switchboard:db3:*job:*:events"
