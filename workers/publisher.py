"""Publishes one job's events in order from a helper thread, merging the
text events that pile up while a publish is on its way to Redis.

Why: a fast producer (echo, a fast upstream, a small model on a big machine)
makes thousands of tokens a second. One PUBLISH per token caps a worker at
its Redis round trips, and costs the web process a message, a frame and a
socket write per token. With this, whatever arrives while one publish is in
flight goes out as one message, and what is left at the end goes with the
job's final event. Text events merge; every other event keeps its own
message, in order.

And a job's messages go out at most `interval` apart (50 ms by default:
twenty updates a second, as smooth as a typing effect needs): its first
goes out at once (the time to first token is untouched), and its final
event never waits (closing cuts the wait short). Why: under overload a
worker runs many more jobs than it has cores for, so each job's upstream
reply reaches it in many small pieces, and without this each piece was a
message, a relay wake-up, a frame and a client write, which cost much of
the throughput (docs/benchmarks-notes.md has the measurements). Most clients
render streamed text no faster than this anyway.

A message nobody received (PUBLISH counted no subscriber) means nobody will:
the web process that queued the job lost Redis and listens under a new
identity now (app/relay.py), or it died. `on_unheard` is called once then
(the runner stops the job, and it is not counted as answered).
"""
from __future__ import annotations

import threading
import time
from itertools import groupby
from typing import Callable

from redis import Redis

from protocol.events import Event, TextEvent, ThinkingEvent, encode_event
from settings import Settings
from workers.lazy_thread import LazyThread

# A producer that never blocks yields to the publishing thread this often.
YIELD_EVERY_SECONDS = 0.01
# A job's messages at most this far apart, unless the worker's settings say otherwise.
STREAM_INTERVAL_SECONDS = Settings.model_fields["stream_interval_seconds"].default


def merge_texts(events: list[Event]) -> list[Event]:
    """Adjacent text events become one (thinking too); the order of
    everything is kept. One event per run, its texts joined once."""
    merged: list[Event] = []
    for kind, run in groupby(events, type):
        if kind is TextEvent or kind is ThinkingEvent:
            texts = list(run)
            merged.append(texts[0] if len(texts) == 1 else _joined(kind, texts))
        else:
            merged.extend(run)
    return merged


def _joined(kind: type, events: list) -> Event:
    text = "".join(e.text for e in events)
    if kind is ThinkingEvent:  # a signature ends its thinking: the run keeps it
        return ThinkingEvent(text=text, signature=next((e.signature for e in reversed(events) if e.signature), None))
    return TextEvent(text=text)


class EventPublisher:
    """`put` never waits for Redis; `close` returns what is left (merged, for
    the caller to publish with the job's final event in the same round trip)
    unless told to drop it, and re-raises a failure of the publishing thread."""

    def __init__(self, redis: Redis, channel: str, interval: float = STREAM_INTERVAL_SECONDS,
                 on_unheard: Callable[[], None] = lambda: None, hold: float | None = None):
        """`hold`: a reply its client takes whole: its events wait for `close` (they go with the final one,
        in one round trip), but go out at most `hold` seconds apart meanwhile, from the producer's own
        thread, so that its web process never finds the job silent for longer (its event timeout)."""
        self._hold = hold
        self._held_since = time.monotonic()
        self._redis = redis
        self._channel = channel
        self._interval = interval
        self._on_unheard = on_unheard
        self._pending: list[Event] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = threading.Event()  # cuts the wait between messages short
        self._published_at = float("-inf")
        self._closed = False
        self._failure: Exception | None = None
        self._yielded_at = time.monotonic()
        # Started with the first events, and under gevent only once the producer
        # lets it run: a reply that came whole goes with the final event, and needs none.
        self._thread = LazyThread(self._run)

    def put(self, events: list[Event]) -> None:
        if self._failure is not None:
            raise self._failure
        if not events:
            return
        with self._lock:
            idle = not self._pending  # else the publishing thread has yet to take those: it takes these too
            self._pending.extend(events)
        if self._hold is not None:
            self._publish_held()
            return
        if idle:
            self._wake.set()
            self._thread.start_soon()
        # Under gevent nothing preempts a producer that does not block (echo, a
        # burst of tokens already read from an upstream): yield to the
        # publishing greenlet at most once every YIELD_EVERY_SECONDS, so a burst
        # goes out in a few messages, not one per token. Not at the first event:
        # a producer that waits for its next token (upstreams, local models)
        # lets it go out then, and a reply that came whole (a fast upstream's
        # one read) goes out whole, with the final event: one message, not two.
        # (With threads this is a GIL hint.)
        now = time.monotonic()
        if now - self._yielded_at >= YIELD_EVERY_SECONDS:
            self._yielded_at = now
            time.sleep(0)

    def _publish_held(self) -> None:
        """A held reply's events, once `hold` seconds passed since its last message (or its start)."""
        if time.monotonic() - self._held_since < self._hold:
            return
        with self._lock:
            batch, self._pending = self._pending, []
        self._publish(merge_texts(batch))
        self._held_since = time.monotonic()

    def close(self, drop: bool = False) -> list[Event]:
        with self._lock:
            left, self._pending = self._pending, []
        self._closed = True
        self._closing.set()
        self._wake.set()
        self._thread.join()  # a batch taken before is published first: order is kept (never started: none was)
        if drop:
            return []
        if self._failure is not None:
            raise self._failure
        return merge_texts(left)

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wait_for_interval()
            self._wake.clear()
            with self._lock:
                batch, self._pending = self._pending, []
            if batch and self._failure is None:
                try:
                    self._publish(merge_texts(batch))
                    self._published_at = time.monotonic()
                except Exception as error:  # a Redis failure: the runner raises it at its next put
                    self._failure = error
            if self._closed and not self._pending:
                return

    def _wait_for_interval(self) -> None:
        """Until `interval` after the last message (what arrives meanwhile
        joins the batch), or until closing: then close takes what waits."""
        wait = self._published_at + self._interval - time.monotonic()
        if wait > 0:
            self._closing.wait(wait)

    def _publish(self, events: list[Event]) -> None:
        if len(events) == 1:
            heard = self._redis.publish(self._channel, encode_event(events[0]))
        else:
            pipe = self._redis.pipeline(transaction=False)
            for event in events:
                pipe.publish(self._channel, encode_event(event))
            heard = max(pipe.execute())
        if not heard:
            self._on_unheard()
