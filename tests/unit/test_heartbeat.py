"""workers.heartbeat on a real Redis: a running job's alive key and the
worker's presence are refreshed; a job that left is no longer beaten; a
worker with a free slot forgets tickets lost on their way; a job whose web
process died is cancelled even if what else the beat does fails."""
from __future__ import annotations

import time
import uuid

import pytest

from protocol import keys
from protocol.presence import ALIVE_TTL_SECONDS, live_workers
from protocol.queue import direct_queue
from workers.cancel import Cancel
from workers.heartbeat import LOST_WAKEUP_SECONDS, Heartbeat


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


@pytest.mark.parametrize("busy, forgotten", [(0, True), (2, False)], ids=["a-free-slot", "every-slot-busy"])
def test_a_worker_with_a_free_slot_forgets_tickets_lost_on_their_way(clean_redis, busy, forgotten):
    """A free slot takes a ticket within milliseconds: one counted on its way
    for longer was lost. With every slot busy, tickets rightly wait."""
    queue = f"q-{uuid.uuid4().hex[:6]}"
    heartbeat = Heartbeat(clean_redis, "w-tickets")
    heartbeat.queues, heartbeat.slots, heartbeat.counts_wakeups = [queue, direct_queue("w-tickets")], 2, True
    for n in range(busy):
        heartbeat._jobs[f"job-{n}"] = ("web", None)
    clean_redis.zadd(keys.tickets_key(queue), {"lost": time.time() - LOST_WAKEUP_SECONDS - 1, "fresh": time.time()})
    heartbeat.beat_once()
    assert clean_redis.zrange(keys.tickets_key(queue), 0, -1) == ([b"fresh"] if forgotten else [b"lost", b"fresh"])


def test_a_failing_extra_does_not_keep_a_dead_webs_job_running(clean_redis):
    heartbeat = Heartbeat(clean_redis, "w-extra")
    cancel = Cancel()
    heartbeat._jobs["job-1"] = (f"web-{uuid.uuid4().hex[:6]}", cancel)  # no lease: its web process is gone

    def broken() -> None:
        raise RuntimeError("the slots' refresh failed")
    heartbeat.on_beat = broken
    with pytest.raises(RuntimeError):
        heartbeat.beat_once()
    assert cancel.is_set()
