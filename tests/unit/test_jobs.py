"""Reading a job's events (app/job_events.py, as JobRun does): text already
waiting is merged; a newer worker's event is skipped; a job is known to
have started from its first event or, while silent, from its record."""
from __future__ import annotations

import time
from types import SimpleNamespace

import fakeredis

from app.job_events import JobEvents
from app.jobs import JobRun
from app.relay import CLOSED, Subscription
from protocol import keys
from protocol.contract import Job
from protocol.events import DoneEvent, TextEvent, ToolCallEvent, encode_event

CALL = ToolCallEvent(index=0, id="call_1", name="f", arguments="{}")
SETTINGS = SimpleNamespace(keepalive_seconds=10, heartbeat_timeout_seconds=5, event_timeout_seconds=60,
                           max_queue_wait_seconds=300)


def _reader(*events, job=Job(id="j", model="m"), redis=None) -> JobEvents:
    reader = JobEvents(Subscription("j", "web"), job, SETTINGS, redis)
    for event in events:
        reader.subscription.messages.put(event if event is CLOSED else encode_event(event))
    return reader


def _run(reader: JobEvents) -> JobRun:
    run = JobRun(SimpleNamespace(settings=SETTINGS), reader._job, None)
    run._reader = reader
    return run


def test_waiting_text_events_become_one_and_the_order_is_kept():
    run = _run(_reader(TextEvent(text="a"), TextEvent(text=" b"), TextEvent(text=" c"), CALL,
                       TextEvent(text="d"), DoneEvent(reason="stop")))
    assert list(run.events()) == [TextEvent(text="a b c"), CALL, TextEvent(text="d"), DoneEvent(reason="stop")]


def test_an_event_of_a_newer_worker_is_skipped():
    reader = _reader(TextEvent(text="a"), DoneEvent(reason="stop"))
    reader.subscription.messages.queue.insert(1, b'{"type":"tool_activity","tool":"time"}')
    assert list(_run(reader).events()) == [TextEvent(text="a"), DoneEvent(reason="stop")]


def test_a_start_is_known_from_the_jobs_first_event():
    reader = _reader(TextEvent(text="a"), DoneEvent(reason="stop"))
    assert not reader.started
    assert reader.next() == TextEvent(text="a") and reader.started


def _silent(redis, taken: bool, alive: bool) -> JobEvents:
    """A reader whose job sent nothing yet and whose queue wait is over."""
    job = Job(id="j", model="m", expires_at=time.time() - 10)
    if taken:
        redis.hset(keys.state_key(job.id), mapping={"status": "running", "taken_at": str(time.time())})
    if alive:
        redis.set(keys.alive_key(job.id), "1")
    return _reader(job=job, redis=redis)


def test_a_silent_job_its_worker_took_is_started_not_unstarted():
    reader = _silent(fakeredis.FakeRedis(), taken=True, alive=True)
    assert reader.check_while_silent(keepalive=False) is None and reader.started


def test_a_silent_job_whose_worker_died_after_it_started_is_lost():
    trouble = _silent(fakeredis.FakeRedis(), taken=True, alive=False).check_while_silent(keepalive=False)
    assert (trouble.status, trouble.message) == (502, "the worker running this job stopped; try again")


def test_a_silent_job_no_worker_took_in_time_is_given_up():
    reader = _silent(fakeredis.FakeRedis(), taken=False, alive=False)
    trouble = reader.check_while_silent(keepalive=False)
    assert trouble.status == 503 and "no worker started the job" in trouble.message and not reader.started
