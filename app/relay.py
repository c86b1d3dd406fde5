"""The shared pub/sub subscriber of one web process.

Workers publish a job's events on a reply channel under the web process that
queued it (protocol.keys.reply_channel). The relay holds ONE pattern
subscription to all of them, on one Redis pub/sub connection, made and
confirmed once: a stream only registers its job id here (no subscribe and
unsubscribe per job, no waiting for a confirmation), and a reader greenlet
hands each message to the queue of the stream waiting on that job. Events of
a job nobody here waits for (its stream ended) are dropped.

Requires gevent (gunicorn's gevent worker class patches the socket module).
"""
from __future__ import annotations

import logging

import gevent
from gevent.event import Event
from gevent.lock import Semaphore
from gevent.queue import Queue
from redis import Redis
from redis.exceptions import RedisError

from protocol.keys import job_of_channel, reply_pattern

log = logging.getLogger(__name__)

CLOSED = object()  # put on a stream's queue when it must stop (disconnect, relay failure)


class RelayUnavailable(Exception):
    """Redis did not confirm the subscription in time."""


class Subscription:
    def __init__(self, job_id: str):
        self.job_id = job_id
        self.messages: Queue = Queue()

    def close(self) -> None:
        self.messages.put(CLOSED)


class Relay:
    def __init__(self, redis: Redis, web_id: str):
        self.web_id = web_id
        self._redis = redis
        self._subscriptions: dict[str, Subscription] = {}
        self._pubsub = None
        self._reader = None
        self._listening = Event()
        self._start_lock = Semaphore()
        self._patterns = (reply_pattern(web_id),)

    @property
    def stream_count(self) -> int:
        return len(self._subscriptions)

    def listen(self, job_id: str, timeout: float) -> Subscription:
        """The queue of the job's events, from now on. Raises
        RelayUnavailable if the relay cannot listen (Redis is down)."""
        self._ensure_reader(timeout)
        subscription = Subscription(job_id)
        self._subscriptions[job_id] = subscription
        return subscription

    def forget(self, subscription: Subscription) -> None:
        if self._subscriptions.get(subscription.job_id) is subscription:
            del self._subscriptions[subscription.job_id]

    def _ensure_reader(self, timeout: float) -> None:
        """The first stream (and the first after the connection was lost)
        makes the subscription and waits until Redis confirmed it: pub/sub
        drops whatever is published before."""
        with self._start_lock:
            if self._reader is not None and not self._reader.dead:
                return
            self._listening.clear()
            self._pubsub = self._redis.pubsub()
            try:
                self._pubsub.psubscribe(*self._patterns)
            except RedisError as error:
                self._pubsub.close()
                raise RelayUnavailable(f"cannot subscribe: {error}") from None
            self._reader = gevent.spawn(self._read_forever)
            if not self._listening.wait(timeout):
                self._reader.kill()
                raise RelayUnavailable("Redis did not confirm the relay's subscription")

    def _read_forever(self) -> None:
        confirmed = 0
        try:
            while True:
                message = self._pubsub.get_message(timeout=None)
                if message is None:
                    continue
                if message["type"] == "pmessage":
                    self._dispatch(message["channel"], message["data"])
                elif message["type"] == "psubscribe":
                    confirmed += 1
                    if confirmed == len(self._patterns):
                        self._listening.set()
        except RedisError as error:
            log.error("relay lost its Redis connection: %s", error)
        finally:
            self._fail_all()

    def _dispatch(self, channel: bytes, data: bytes) -> None:
        subscription = self._subscriptions.get(job_of_channel(channel.decode()))
        if subscription is not None:
            subscription.messages.put(data)

    def _fail_all(self) -> None:
        """End every waiting stream: their events can no longer arrive."""
        subscriptions, self._subscriptions = self._subscriptions, {}
        for subscription in subscriptions.values():
            subscription.close()
        try:
            self._pubsub.close()
        except RedisError:
            pass
