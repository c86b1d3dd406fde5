"""A request's end that Redis could not take (app/owed.py): written once
Redis is back, oldest first; given up once it waited too long; and
JobRun.close owes its end instead of dropping it."""
from __future__ import annotations

import time
from types import SimpleNamespace

import gevent
from redis.exceptions import ConnectionError as RedisConnectionError

from app import jobs
from app.jobs import JobRun
from app.owed import OwedWrites
from app.relay import Subscription
from protocol.contract import Job
from protocol.events import ErrorEvent


class Redis:
    """Away until `back` is set; records what was written."""

    def __init__(self):
        self.back, self.written = False, []

    def write(self, what: str) -> None:
        if not self.back:
            raise RedisConnectionError("Connection refused")
        self.written.append(what)


def _wait(condition, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        gevent.sleep(0.01)


def test_what_is_owed_is_written_in_order_once_redis_is_back():
    redis, owed = Redis(), OwedWrites(retry_seconds=0.01)
    owed.owe("first", lambda: redis.write("first"))
    owed.owe("second", lambda: redis.write("second"))
    gevent.sleep(0.05)  # a few retries refused
    assert redis.written == [] and len(owed) == 2
    redis.back = True
    _wait(lambda: len(owed) == 0)
    assert redis.written == ["first", "second"]


def test_a_write_owed_too_long_or_past_the_bound_is_given_up(caplog):
    redis, owed = Redis(), OwedWrites(retry_seconds=0.01, owed_seconds=0.05, max_owed=2)
    for name in ("a", "b", "c"):  # "a" is pushed out by "c"
        owed.owe(name, lambda name=name: redis.write(name))
    _wait(lambda: len(owed) == 0)
    redis.back = True
    owed.pay()
    assert redis.written == [] and "a given up: too many writes wait" in caplog.text
    assert "b given up: Redis was away for over 0.05 s" in caplog.text


def test_a_write_that_fails_otherwise_does_not_hold_the_rest_back(caplog):
    redis, owed = Redis(), OwedWrites(retry_seconds=0.01)
    redis.back = True
    owed.owe("broken", lambda: 1 / 0)
    owed.owe("fine", lambda: redis.write("fine"))
    _wait(lambda: len(owed) == 0)
    assert redis.written == ["fine"] and "broken failed" in caplog.text


def test_a_request_that_ends_while_redis_is_away_owes_its_end(monkeypatch):
    redis, ends = Redis(), []

    def withdraw(client, job, pool, started, final):
        client.write(job.id)
        ends.append((job.id, pool, started, final))
    monkeypatch.setattr(jobs.jobqueue, "withdraw", withdraw)
    services = SimpleNamespace(open_runs=set(), relay=SimpleNamespace(forget=lambda subscription: None),
                               redis=redis, owed=OwedWrites(retry_seconds=0.01))
    run = JobRun(services, Job(id="j1", model="echo"), None)
    run._pool, run.final = "local", ErrorEvent(message="lost the connection to the job queue", status=503)
    run._reader = SimpleNamespace(started=False, subscription=Subscription("j1", "web"), stop_watching=lambda: None)
    run.close()
    assert len(services.owed) == 1 and ends == []
    redis.back = True
    _wait(lambda: len(services.owed) == 0)
    assert ends == [("j1", "local", False, run.final)]
