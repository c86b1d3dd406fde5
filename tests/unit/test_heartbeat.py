"""workers.heartbeat on a real Redis: a running job's alive key and the
worker's presence are refreshed; a job that left is no longer beaten."""
from __future__ import annotations

import time
import uuid

from protocol import keys
from protocol.commands import ALIVE_TTL_SECONDS, live_workers
from workers.heartbeat import Heartbeat


def test_a_running_job_is_beaten_and_the_worker_announced(clean_redis):
    worker_id, job_id = f"host:{uuid.uuid4().hex[:8]}", uuid.uuid4().hex  # workers' presence outlives clean_redis
    heartbeat = Heartbeat(clean_redis, worker_id)
    heartbeat.beat_once()
    assert worker_id not in [w["id"] for w in live_workers(clean_redis)]  # not consuming yet: not announced
    heartbeat.queues = ["local-completion", "local"]
    with heartbeat.running(job_id):
        clean_redis.set(keys.alive_key(job_id), b"1", ex=1)  # the first beat is the take's (fairqueue.take)
        heartbeat.beat_once()
        assert 1 < clean_redis.ttl(keys.alive_key(job_id)) <= ALIVE_TTL_SECONDS
    clean_redis.delete(keys.alive_key(job_id))
    heartbeat.beat_once()
    assert not clean_redis.exists(keys.alive_key(job_id))
    [presence] = [w for w in live_workers(clean_redis) if w["id"] == worker_id]
    assert presence["queues"] == ["local-completion", "local"] and (presence["slots"], presence["busy"]) == (0, 0)
    assert abs(presence["beat_at"] - time.time()) < 60  # for the console's "last beat"
