"""The shared pub/sub subscriber of one web process.

Workers publish a job's events on a reply channel under the web process that
queued it (protocol.keys.reply_channel). The relay holds ONE pattern
subscription to all of them, on one Redis pub/sub connection, made and
confirmed once: a stream only registers its job id here (no subscribe and
unsubscribe per job, no waiting for a confirmation), and a reader greenlet
hands each message to the queue of the stream waiting on that job. Events of
a job nobody here waits for (its stream ended) are dropped.

A lost connection is a gap: whatever was published meanwhile is gone, so
every stream waiting then ends (with a retryable error), and the relay
takes a new identity (`web_id`) for the streams after it. Nobody ever
listens under the old one again: a worker still running one of its jobs
finds that nobody hears it and stops it uncounted (workers/publisher.py),
and the old identity's lease is dropped (app/presence.py), freeing the
slots and queue places its jobs held. The pub/sub connection is therefore
never reconnected behind the relay's back (redis-py would resubscribe the
old pattern after a gap); a confirmation arriving after the first ones
says it was, and counts as a gap too.

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

from protocol.errors import SwitchboardError
from protocol.keys import job_of_channel, reply_pattern

log = logging.getLogger(__name__)

CLOSED = object()  # put on a stream's queue when it must stop (disconnect, relay failure)


class RelayUnavailable(SwitchboardError):
    """Redis did not confirm the subscription in time: a retryable 503."""

    def __init__(self, why: str):
        super().__init__(f"the job queue is unavailable: {why}", 503, retry_after=1)


class _Gap(RedisError):
    """The pub/sub connection was made again: messages may have been lost."""


def new_identity() -> str:
    return uuid.uuid4().hex


class Subscription:
    def __init__(self, job_id: str, web_id: str):
        self.job_id = job_id
        self.web_id = web_id  # the relay's identity it listens under: the job's reply channel is under it
        self.messages: Queue = Queue()

    def close(self) -> None:
        self.messages.put(CLOSED)


class Relay:
    def __init__(self, redis: Redis, web_id: str | None = None):
        """`redis`: a client whose connections redis-py does not retry (the
        relay's pub/sub connection must not be made again behind its back)."""
        self.web_id = web_id or new_identity()
        self.retired: list[str] = []  # identities given up after a gap (their leases are dropped)
        self._redis = redis
        self._subscriptions: dict[str, Subscription] = {}
        self._pubsub = None
        self._reader = None
        self._listening = Event()
        self._start_lock = Semaphore()

    @property
    def stream_count(self) -> int:
        return len(self._subscriptions)

    def listen(self, job_id: str, timeout: float) -> Subscription:
        """The queue of the job's events, from now on. Raises
        RelayUnavailable if the relay cannot listen (Redis is down)."""
        self._ensure_reader(timeout)
        subscription = Subscription(job_id, self.web_id)
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
            self._patterns = (reply_pattern(self.web_id),)
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
                    if self._listening.is_set():
                        raise _Gap("its subscription was made again after the connection dropped")
                    confirmed += 1
                    if confirmed == len(self._patterns):
                        self._listening.set()
        except RedisError as error:
            log.error("relay lost its Redis connection: %s; the streams it relayed end, and it listens anew "
                      "under a new identity", error)
        finally:
            self._retire_identity()
            self._fail_all()

    def _retire_identity(self) -> None:
        """Streams from now on listen under a new identity; nobody listens
        under the old one ever again."""
        self.retired.append(self.web_id)
        self.web_id = new_identity()

    def _dispatch(self, channel: bytes, data: bytes) -> None:
        subscription = self._subscriptions.get(job_of_channel(channel.decode()))
        if subscription is not None:
            subscription.messages.put(data)

    def _fail_all(self) -> None:
        """End every waiting stream: their events can no longer arrive (and
        nobody hears them from now on: the connection is closed first)."""
        try:
            self._pubsub.close()
        except RedisError:
            pass
        subscriptions, self._subscriptions = self._subscriptions, {}
        for subscription in subscriptions.values():
            subscription.close()
