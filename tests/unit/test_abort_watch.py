"""workers.abort_watch on a real Redis: one listener per process sets the
flag of the matching running job, and survives a dropped connection."""
from __future__ import annotations

import uuid

import redis

from protocol.commands import send_abort
from tests.integration.waits import wait_until
from workers.abort_watch import AbortWatch


def _watch(redis_url: str, name: str) -> AbortWatch:
    return AbortWatch(redis.Redis.from_url(redis_url, client_name=name))


def test_the_running_jobs_flag_is_set_and_others_are_not(clean_redis, redis_url):
    watch, job_id, other = _watch(redis_url, "abort-test-a"), uuid.uuid4().hex, uuid.uuid4().hex
    with watch.watch(job_id) as flag, watch.watch(other) as other_flag:
        assert not flag.is_set()
        send_abort(clean_redis, job_id)
        wait_until(flag.is_set, 5, "the abort to be heard")
        assert not other_flag.is_set()
    send_abort(clean_redis, job_id)  # a finished job's abort is ignored


def test_an_abort_sent_while_the_listener_reconnects_is_not_missed(clean_redis, redis_url):
    name = f"abort-test-{uuid.uuid4().hex[:8]}"
    watch, job_id = _watch(redis_url, name), uuid.uuid4().hex
    with watch.watch(job_id) as flag:
        for connection in clean_redis.client_list():
            if connection["name"] == name:
                clean_redis.client_kill_filter(_id=connection["id"])
        send_abort(clean_redis, job_id)  # broadcast while nobody may be listening
        wait_until(flag.is_set, 10, "the abort to be caught after the reconnect")
        later = uuid.uuid4().hex
        with watch.watch(later) as later_flag:  # and the listener hears new aborts again
            send_abort(clean_redis, later)
            wait_until(later_flag.is_set, 10, "a later abort to be heard")
