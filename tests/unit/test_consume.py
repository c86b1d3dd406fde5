"""The worker's consume loop (workers/consume.py): while every slot is
busy it waits for a task to end, not out Celery's 2 s drain; prefork
workers keep Celery's own loop; the Celery app names this consumer."""
from __future__ import annotations

import socket
import threading

import pytest
from celery.signals import task_postrun
from celery.utils.imports import symbol_by_name

from queue_config import app
from workers import consume


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


@pytest.mark.parametrize("hub", [None, object()], ids=["green-or-threads", "prefork"])
def test_prefork_keeps_celerys_event_loop_and_the_others_get_the_woken_drain(monkeypatch, hub):
    ran = []
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


def test_the_celery_app_runs_this_consumer():
    assert symbol_by_name(app.conf.worker_consumer) is consume.Consumer
    assert consume.Consumer.loop is consume.consume_loop
