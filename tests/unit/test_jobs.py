"""JobRun's reading of a job's events: text already waiting is merged; a
job is known to have started from its first event or, while silent, from
its state."""
from __future__ import annotations

import time
from types import SimpleNamespace

import fakeredis

from app.jobs import JobRun
from app.relay import CLOSED, Subscription
from protocol import keys
from protocol.contract import DoneEvent, Job, TextEvent, ToolCallEvent, encode_event

CALL = ToolCallEvent(index=0, id="call_1", name="f", arguments="{}")


def _run(*events) -> JobRun:
    settings = SimpleNamespace(keepalive_seconds=10, heartbeat_timeout_seconds=5, event_timeout_seconds=60)
    run = JobRun(SimpleNamespace(settings=settings), Job(id="j", model="m"), {}, "key", {})
    run._subscription = Subscription(b"j")
    for event in events:
        run._subscription.messages.put(event if event is CLOSED else encode_event(event))
    return run


def test_waiting_text_events_become_one_and_the_order_is_kept():
    run = _run(TextEvent(text="a"), TextEvent(text=" b"), TextEvent(text=" c"), CALL,
               TextEvent(text="d"), DoneEvent(reason="stop"))
    assert list(run.events()) == [TextEvent(text="a b c"), CALL, TextEvent(text="d"), DoneEvent(reason="stop")]


def test_an_event_of_a_newer_worker_is_skipped():
    run = _run(TextEvent(text="a"), DoneEvent(reason="stop"))
    run._subscription.messages.queue.insert(1, b'{"type":"tool_activity","tool":"time"}')
    assert list(run.events()) == [TextEvent(text="a"), DoneEvent(reason="stop")]


def test_a_start_is_known_from_the_jobs_first_event():
    run = _run(TextEvent(text="a"), DoneEvent(reason="stop"))
    events = run.events()
    assert not run.started
    assert next(events) == TextEvent(text="a") and run.started


def _silent_run(redis, taken: bool, alive: bool) -> JobRun:
    """A run whose job sent nothing yet and whose queue wait is over."""
    settings = SimpleNamespace(keepalive_seconds=10, heartbeat_timeout_seconds=5, event_timeout_seconds=60,
                               max_queue_wait_seconds=300)
    job = Job(id="j", model="m", expires_at=time.time() - 10)
    if taken:
        redis.hset(keys.state_key(job.id), mapping={"status": "running", "taken_at": str(time.time())})
    if alive:
        redis.set(keys.alive_key(job.id), "1")
    return JobRun(SimpleNamespace(settings=settings, redis=redis), job, {}, "key", {})


def test_a_silent_job_its_worker_took_is_started_not_unstarted():
    run = _silent_run(fakeredis.FakeRedis(), taken=True, alive=True)
    assert run._check_while_silent(keepalive=False) is None and run.started


def test_a_silent_job_whose_worker_died_after_a_quiet_start_is_lost():
    trouble = _silent_run(fakeredis.FakeRedis(), taken=True, alive=False)._check_while_silent(keepalive=False)
    assert (trouble.status, trouble.message) == (502, "the worker running this job stopped; try again")


def test_a_silent_job_no_worker_took_in_time_is_given_up():
    run = _silent_run(fakeredis.FakeRedis(), taken=False, alive=False)
    trouble = run._check_while_silent(keepalive=False)
    assert trouble.status == 503 and "no worker started the job" in trouble.message and not run.started
