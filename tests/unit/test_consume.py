"""The worker's consume loop (workers/consume.py): while every slot is
busy it waits for a task to end, not out Celery's 2 s drain; thread and
prefork pools keep Celery's own loop, woken when a task ends; the Celery
app names this consumer."""
from __future__ import annotations

import socket
import threading

import pytest
from celery.signals import task_postrun
from celery.utils.imports import symbol_by_name

from queue_config import app
from workers import consume


class Hub:
    """kombu's event loop, as far as the waker uses it: what it was asked to
    run soon and later (run here by hand, as the loop would come round)."""
    def __init__(self):
        self.soon, self.later = [], []

    def call_soon(self, callback, *args):
        self.soon.append((callback, args))

    def call_later(self, delay, callback, *args):
        self.later.append((delay, callback, args))


def test_with_a_free_slot_it_drains_as_celery_does():
    calls = []
    drain = consume.woken_drain(lambda **kwargs: calls.append(kwargs) or "event", lambda: True, threading.Event())
    assert drain(timeout=2.0) == "event" and calls == [{"timeout": 2.0}]


def test_with_every_slot_busy_it_waits_for_a_task_to_end_not_for_the_timeout(monkeypatch):
    monkeypatch.setattr(consume, "RECHECK_SECONDS", 3600.0)  # only the task's end can end the wait
    checked, outcome = threading.Event(), []

    def slots_full() -> bool:
        checked.set()
        return False

    def drain_once() -> None:
        try:
            consume.woken_drain(lambda **_: outcome.append("drained"), slots_full)(timeout=3600.0)
        except socket.timeout:
            outcome.append("timed out")
    waiter = threading.Thread(target=drain_once, daemon=True)
    waiter.start()
    assert checked.wait(30)
    task_postrun.send(sender=None)  # as Celery does when a task ends
    waiter.join(30)
    assert outcome == ["timed out"]  # the loop comes round (and drains with its slot free)


@pytest.mark.parametrize("hub", [None, Hub()], ids=["green", "threads-or-prefork"])
def test_prefork_keeps_celerys_event_loop_and_the_others_get_the_woken_drain(monkeypatch, hub):
    ran = []
    monkeypatch.setattr(consume, "_wake_hub", [])
    monkeypatch.setattr(consume.loops, "synloop", lambda obj, connection, *rest: ran.append(("sync", connection)))
    monkeypatch.setattr(consume.loops, "asynloop", lambda obj, connection, *rest: ran.append(("async", connection)))

    class Connection:
        def drain_events(self, **kwargs):
            return kwargs

    class Qos:
        def can_consume(self):
            return True

    class TaskConsumer:
        channel = type("Channel", (), {"qos": Qos()})()
    connection = Connection()
    consume.consume_loop(None, connection, TaskConsumer(), None, hub, None)
    assert ran == [("async" if hub else "sync", connection)]
    assert ("drain_events" in vars(connection)) == (hub is None)
    assert connection.drain_events(timeout=1.0) == {"timeout": 1.0}


def test_on_celerys_event_loop_a_tasks_end_brings_the_loop_round(monkeypatch):
    """The thread pool's loop is kombu's hub: a slot freeing in a pool thread
    must wake it, and it looks again until Celery counts the slot free."""
    monkeypatch.setattr(consume.loops, "asynloop", lambda *args, **kwargs: None)
    monkeypatch.setattr(consume, "_wake_hub", [])
    counted_free = iter([False, False, True])
    hub = Hub()

    class TaskConsumer:
        channel = type("Channel", (), {"qos": type("Qos", (), {"can_consume": lambda self: next(counted_free)})()})()
    consume.consume_loop(None, object(), TaskConsumer(), None, hub, None)
    task_postrun.send(sender=None)  # as Celery does when a task ends, in the pool's thread
    (callback, args), = hub.soon
    callback(*args)  # the loop came round (its tick issues kombu's BRPOP if a slot is free): not yet counted
    delay, callback, args = hub.later.pop()
    assert delay == consume.RECHECK_SECONDS
    callback(*args)  # round again: still not
    delay, callback, args = hub.later.pop()
    callback(*args)  # counted free now: no more looks
    assert hub.later == []


def test_a_reconnected_consumer_replaces_the_waker(monkeypatch):
    monkeypatch.setattr(consume.loops, "asynloop", lambda *args, **kwargs: None)
    monkeypatch.setattr(consume, "_wake_hub", [])

    class TaskConsumer:
        channel = type("Channel", (), {"qos": type("Qos", (), {"can_consume": lambda self: True})()})()
    first, second = Hub(), Hub()
    consume.consume_loop(None, object(), TaskConsumer(), None, first, None)
    consume.consume_loop(None, object(), TaskConsumer(), None, second, None)
    task_postrun.send(sender=None)
    assert first.soon == [] and len(second.soon) == 1


def test_the_celery_app_runs_this_consumer():
    assert symbol_by_name(app.conf.worker_consumer) is consume.Consumer
    assert consume.Consumer.loop is consume.consume_loop
