"""The worker's event publisher: order kept, adjacent text merged, a slow
producer's events sent one by one, messages after the first at most an
interval apart (but never the end), failures surfaced to the runner."""
from __future__ import annotations

import threading
import time

import fakeredis
import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from protocol.keys import reply_channel
from protocol.events import DoneEvent, TextEvent, ToolCallEvent, decode_event
from workers.publisher import EventPublisher, merge_texts

CALL = ToolCallEvent(index=0, id="call_1", name="f", arguments="{}")


@pytest.mark.parametrize("events, merged", [
    ([], []),
    ([TextEvent(text="a")], [TextEvent(text="a")]),
    ([TextEvent(text="a"), TextEvent(text=" b"), TextEvent(text=" c")], [TextEvent(text="a b c")]),
    ([TextEvent(text="a"), CALL, TextEvent(text="b"), TextEvent(text="c")],
     [TextEvent(text="a"), CALL, TextEvent(text="bc")]),
], ids=["empty", "one", "run-of-text", "call-splits-runs"])
def test_merge_texts(events, merged):
    assert merge_texts(events) == merged


def _listen(redis, job_id):
    pubsub = redis.pubsub()
    pubsub.subscribe(reply_channel("web", job_id))
    pubsub.get_message(timeout=1)
    return pubsub


def _received(pubsub) -> list:
    events = []
    while (message := pubsub.get_message(timeout=0.2)) is not None:
        events.append(decode_event(message["data"]))
    return events


def test_everything_arrives_in_order_and_text_is_whole():
    redis = fakeredis.FakeRedis()
    pubsub = _listen(redis, "j")
    publisher = EventPublisher(redis, reply_channel("web", "j"))
    words = [f" w{i}" for i in range(500)]
    for word in words:
        publisher.put([TextEvent(text=word)])
    publisher.put([CALL])
    events = _received(pubsub) + publisher.close()  # what is left is the caller's to publish, after
    assert "".join(e.text for e in events if isinstance(e, TextEvent)) == "".join(words)
    assert events[-1] == CALL and len(events) <= 501


def _first_publish_held():
    """A publisher whose first publish ("first") is on its way, held up until
    `release` is set; and a listener on its channel."""
    redis, in_flight, release = fakeredis.FakeRedis(), threading.Event(), threading.Event()
    publish = redis.publish

    def held_publish(*args):
        in_flight.set()
        release.wait(2)
        return publish(*args)

    redis.publish = held_publish
    pubsub = _listen(redis, "j")
    publisher = EventPublisher(redis, reply_channel("web", "j"))
    publisher.put([TextEvent(text="first")])
    assert in_flight.wait(2)
    return publisher, pubsub, release


def test_what_is_left_at_close_is_returned_merged_after_the_batch_in_flight():
    publisher, pubsub, release = _first_publish_held()
    publisher.put([TextEvent(text="second"), TextEvent(text=" third")])
    threading.Timer(0.1, release.set).start()
    assert publisher.close() == [TextEvent(text="second third")]
    assert _received(pubsub) == [TextEvent(text="first")]


def test_held_events_all_wait_for_close_and_come_back_merged():
    """A reply its client takes whole: nothing is published on the way (no
    thread even starts); close returns it all, merged, for the final round trip."""
    redis = fakeredis.FakeRedis()
    pubsub = _listen(redis, "j")
    publisher = EventPublisher(redis, reply_channel("web", "j"), interval=0, hold=3600)
    for word in ("a", " b", " c"):
        publisher.put([TextEvent(text=word)])
        assert pubsub.get_message(timeout=0.05) is None
    publisher.put([CALL])
    assert publisher.close() == [TextEvent(text="a b c"), CALL]
    assert _received(pubsub) == []


def test_a_held_reply_still_goes_out_every_hold_seconds():
    """A whole reply running longer than its hold: what gathered goes out then, from the producer's thread
    (its web process would give up on a job silent for its event timeout)."""
    redis = fakeredis.FakeRedis()
    pubsub = _listen(redis, "j")
    publisher = EventPublisher(redis, reply_channel("web", "j"), hold=60)
    publisher.put([TextEvent(text="a")])
    assert pubsub.get_message(timeout=0.05) is None
    publisher._held_since -= 61  # (a minute has passed since it started)
    publisher.put([TextEvent(text=" b")])
    assert _received(pubsub) == [TextEvent(text="a b")]
    publisher.put([TextEvent(text=" c")])
    assert publisher.close() == [TextEvent(text=" c")]


def test_a_slow_producers_events_go_out_one_by_one():
    redis = fakeredis.FakeRedis()
    pubsub = _listen(redis, "j")
    publisher = EventPublisher(redis, reply_channel("web", "j"))
    for word in ("a", "b", "c"):
        publisher.put([TextEvent(text=word)])
        message = pubsub.get_message(timeout=2)  # published before the next token exists
        assert decode_event(message["data"]) == TextEvent(text=word)
    publisher.close()


def test_after_the_first_message_pieces_wait_for_the_interval_and_go_out_as_one():
    redis = fakeredis.FakeRedis()
    pubsub = _listen(redis, "j")
    publisher = EventPublisher(redis, reply_channel("web", "j"), interval=60)
    publisher.put([TextEvent(text="a")])
    first = pubsub.get_message(timeout=5)  # the first never waits: the time to first token
    assert first is not None and decode_event(first["data"]) == TextEvent(text="a")
    publisher.put([TextEvent(text="b")])
    publisher.put([TextEvent(text="c")])
    assert _received(pubsub) == []  # within the interval: nothing yet
    started = time.monotonic()
    assert publisher.close() == [TextEvent(text="bc")]  # the end does not wait out the interval
    assert time.monotonic() - started < 30


def test_an_interval_of_zero_sends_each_piece_at_once():
    redis = fakeredis.FakeRedis()
    pubsub = _listen(redis, "j")
    publisher = EventPublisher(redis, reply_channel("web", "j"), interval=0)
    for word in ("a", "b"):
        publisher.put([TextEvent(text=word)])
        message = pubsub.get_message(timeout=5)
        assert message is not None and decode_event(message["data"]) == TextEvent(text=word)
    assert publisher.close() == []


def test_drop_discards_what_is_pending():
    publisher, pubsub, release = _first_publish_held()
    publisher.put([TextEvent(text="second"), DoneEvent(reason="stop")])
    threading.Timer(0.1, release.set).start()  # after close has dropped what was pending
    publisher.close(drop=True)
    assert _received(pubsub) == [TextEvent(text="first")]


def test_a_redis_failure_reaches_the_runner():
    redis, attempted = fakeredis.FakeRedis(), threading.Event()

    def broken(*_):
        attempted.set()
        raise RedisConnectionError("gone")

    redis.publish = broken
    publisher = EventPublisher(redis, reply_channel("web", "j"))
    publisher.put([TextEvent(text="a")])
    assert attempted.wait(2)  # the publishing thread tried (not at once: the first event does not yield)
    with pytest.raises(RedisConnectionError):
        publisher.close()


def test_events_nobody_hears_tell_the_runner(clean_redis):
    """PUBLISH reached no subscriber: the job's web process lost Redis (it
    listens under a new identity now) or died, so the job is stopped."""
    unheard = threading.Event()
    publisher = EventPublisher(clean_redis, reply_channel("web", "nobody"), interval=0, on_unheard=unheard.set)
    publisher.put([TextEvent(text="anyone?")])
    assert unheard.wait(5)
    publisher.close()
    heard = threading.Event()
    pubsub = _listen(clean_redis, "somebody")
    publisher = EventPublisher(clean_redis, reply_channel("web", "somebody"), interval=0, on_unheard=heard.set)
    publisher.put([TextEvent(text="hello"), CALL])  # two messages: one pipeline
    assert _received(pubsub) == [TextEvent(text="hello"), CALL]
    assert publisher.close() == [] and not heard.is_set()
    pubsub.close()
