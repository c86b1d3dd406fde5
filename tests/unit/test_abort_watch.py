"""workers.abort_watch on a real Redis: one listener per process sets the
flag of the matching running job, survives a dropped connection, and loses
no abort sent between a job's take and its watch."""
from __future__ import annotations

import time
import uuid

import redis

from jobqueue.records import send_abort
from protocol.keys import abort_key
from tests.integration.waits import wait_until
from workers.abort_watch import AbortWatch


def _watch(redis_url: str, name: str) -> AbortWatch:
    return AbortWatch(redis.Redis.from_url(redis_url, client_name=name))


def test_the_running_jobs_flag_is_set_and_others_are_not(clean_redis, redis_url):
    watch, job_id, other = _watch(redis_url, "abort-test-a"), uuid.uuid4().hex, uuid.uuid4().hex
    with watch.watch(job_id, time.monotonic()) as flag, watch.watch(other, time.monotonic()) as other_flag:
        assert not flag.is_set()
        send_abort(clean_redis, job_id)
        wait_until(flag.is_set, 5, "the abort to be heard")
        assert not other_flag.is_set()
    send_abort(clean_redis, job_id)  # a finished job's abort is ignored


def test_an_abort_sent_while_the_listener_reconnects_is_not_missed(clean_redis, redis_url):
    name = f"abort-test-{uuid.uuid4().hex[:8]}"
    watch, job_id = _watch(redis_url, name), uuid.uuid4().hex
    with watch.watch(job_id, time.monotonic()) as flag:
        for connection in clean_redis.client_list():
            if connection["name"] == name:
                clean_redis.client_kill_filter(_id=connection["id"])
        send_abort(clean_redis, job_id)  # broadcast while nobody may be listening
        wait_until(flag.is_set, 10, "the abort to be caught after the reconnect")
        later = uuid.uuid4().hex
        with watch.watch(later, time.monotonic()) as later_flag:  # and the listener hears new aborts again
            send_abort(clean_redis, later)
            wait_until(later_flag.is_set, 10, "a later abort to be heard")


def test_an_abort_heard_between_a_jobs_take_and_its_watch_is_not_lost(clean_redis, redis_url):
    """The take found no abort key; the abort was heard before the job's watch began."""
    watch, job_id, probe = _watch(redis_url, "abort-test-b"), uuid.uuid4().hex, uuid.uuid4().hex
    with watch.watch(probe, time.monotonic()) as probe_flag:  # the listener is up
        taken_at = time.monotonic()
        send_abort(clean_redis, job_id)
        send_abort(clean_redis, probe)  # heard after the first: broadcasts arrive in order
        wait_until(probe_flag.is_set, 5, "the aborts to be heard")
    clean_redis.delete(abort_key(job_id))  # heard only: the watch must not need the key
    with watch.watch(job_id, taken_at) as flag:
        assert flag.is_set()


def test_a_take_older_than_the_listeners_subscription_has_its_abort_key_read(clean_redis, redis_url):
    """An abort broadcast before the listener (re)subscribed went unheard: its
    key says it. A take after the subscription is covered by the broadcast
    and reads no key (the round trip the take saved)."""
    watch, job_id, later = _watch(redis_url, "abort-test-c"), uuid.uuid4().hex, uuid.uuid4().hex
    taken_at = time.monotonic()
    clean_redis.set(abort_key(job_id), b"1")
    with watch.watch(job_id, taken_at) as flag:
        assert flag.is_set()
    clean_redis.set(abort_key(later), b"1")  # a key without its broadcast
    with watch.watch(later, time.monotonic()) as flag:
        assert not flag.is_set()
