"""JobRun's reading of a job's events: text already waiting is merged."""
from __future__ import annotations

from types import SimpleNamespace

from app.jobs import JobRun
from app.relay import CLOSED, Subscription
from protocol.contract import DoneEvent, Job, StartedEvent, TextEvent, ToolCallEvent, encode_event

CALL = ToolCallEvent(index=0, id="call_1", name="f", arguments="{}")


def _run(*events) -> JobRun:
    settings = SimpleNamespace(keepalive_seconds=10, heartbeat_timeout_seconds=5, event_timeout_seconds=60)
    run = JobRun(SimpleNamespace(settings=settings), Job(id="j", model="m"), {}, "key", {})
    run._subscription = Subscription(b"j")
    for event in events:
        run._subscription.messages.put(event if event is CLOSED else encode_event(event))
    return run


def test_waiting_text_events_become_one_and_the_order_is_kept():
    run = _run(StartedEvent(), TextEvent(text="a"), TextEvent(text=" b"), TextEvent(text=" c"), CALL,
               TextEvent(text="d"), DoneEvent(reason="stop"))
    assert list(run.events()) == [TextEvent(text="a b c"), CALL, TextEvent(text="d"), DoneEvent(reason="stop")]


def test_an_event_of_a_newer_worker_is_skipped():
    run = _run(StartedEvent(), TextEvent(text="a"), DoneEvent(reason="stop"))
    run._subscription.messages.queue.insert(1, b'{"type":"tool_activity","tool":"time"}')
    assert list(run.events()) == [TextEvent(text="a"), DoneEvent(reason="stop")]
