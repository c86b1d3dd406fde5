"""The shared pub/sub subscriber of one web process.

Every stream in the process shares ONE Redis pub/sub connection: a reader
greenlet receives all messages and hands each to the queue of the stream
waiting on that channel. A stream subscribes, waits for Redis to confirm the
subscription, and only then may its job be enqueued: pub/sub drops whatever
is published before the subscription is active.

Requires gevent (gunicorn's gevent worker class patches the socket module).
"""
from __future__ import annotations

import logging
import uuid

import gevent
from gevent.event import Event
from gevent.lock import Semaphore
from gevent.queue import Queue
from redis import Redis
from redis.exceptions import RedisError

from protocol.keys import web_channel

log = logging.getLogger(__name__)

CLOSED = object()  # put on a stream's queue when it must stop (disconnect, relay failure)


class RelayUnavailable(Exception):
    """Redis did not confirm the subscription in time."""


class Subscription:
    def __init__(self, channel: bytes):
        self.channel = channel
        self.messages: Queue = Queue()
        self.confirmed = Event()

    def close(self) -> None:
        self.messages.put(CLOSED)


class Relay:
    def __init__(self, redis: Redis):
        self._redis = redis
        self._subscriptions: dict[bytes, Subscription] = {}
        self._pubsub = None
        self._reader = None
        self._start_lock = Semaphore()
        # A channel of its own keeps the connection subscribed while idle, so
        # the reader can block on the socket instead of polling.
        self._own_channel = web_channel(uuid.uuid4().hex).encode()

    @property
    def stream_count(self) -> int:
        return len(self._subscriptions)

    def subscribe(self, channel: str, timeout: float) -> Subscription:
        """Sends the subscription; `confirm` waits until Redis confirmed it."""
        self._ensure_reader(timeout)
        subscription = Subscription(channel.encode())
        self._subscriptions[subscription.channel] = subscription
        try:
            self._pubsub.subscribe(subscription.channel)
        except RedisError as error:
            self._subscriptions.pop(subscription.channel, None)
            raise RelayUnavailable(f"cannot subscribe: {error}") from None
        return subscription

    def confirm(self, subscription: Subscription, timeout: float) -> None:
        if not subscription.confirmed.wait(timeout):
            self.unsubscribe(subscription)
            raise RelayUnavailable("Redis did not confirm the subscription")

    def unsubscribe(self, subscription: Subscription) -> None:
        if self._subscriptions.pop(subscription.channel, None) is not None:
            try:
                self._pubsub.unsubscribe(subscription.channel)
            except RedisError as error:
                log.warning("unsubscribe failed: %s", error)

    def _ensure_reader(self, timeout: float) -> None:
        with self._start_lock:
            if self._reader is not None and not self._reader.dead:
                return
            self._pubsub = self._redis.pubsub()
            own = Subscription(self._own_channel)
            self._subscriptions[own.channel] = own
            self._pubsub.subscribe(own.channel)
            self._reader = gevent.spawn(self._read_forever)
            if not own.confirmed.wait(timeout):
                raise RelayUnavailable("Redis did not confirm the relay's subscription")

    def _read_forever(self) -> None:
        try:
            while True:
                self._dispatch(self._pubsub.get_message(timeout=None))
        except RedisError as error:
            log.error("relay lost its Redis connection: %s", error)
        finally:
            self._fail_all()

    def _dispatch(self, message: dict | None) -> None:
        if message is None:
            return
        subscription = self._subscriptions.get(message["channel"])
        if subscription is None:
            return
        if message["type"] == "message":
            subscription.messages.put(message["data"])
        elif message["type"] == "subscribe":
            subscription.confirmed.set()

    def _fail_all(self) -> None:
        """End every waiting stream: their events can no longer arrive."""
        subscriptions, self._subscriptions = self._subscriptions, {}
        for subscription in subscriptions.values():
            subscription.close()
        try:
            self._pubsub.close()
        except RedisError:
            pass
