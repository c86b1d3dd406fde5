"""Kombu's Redis transports (one Redis, or the master Redis Sentinel names),
publishing through one redis-py client per channel.

Celery loads it by name (queue_config: broker_transport, kombu's documented
way to name a transport class); the web process, which sends tickets with
kombu alone (jobqueue/wakeups.py), connects with the same options
(`connection_options`). Kombu's Redis channel builds a new redis-py
client for every publish (Channel.conn_or_acquire), and building one copies
redis-py's table of reply callbacks: a third of what a ticket costs the web
process. A client is only a handle on the channel's connection pool, which
the channel already shares, so one serves every publish of the channel. It
follows the pool: kombu makes a new one after a fork or a lost connection.
Consuming (the workers' BRPOP) keeps kombu's own asynchronous client.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import kombu
import redis
from kombu.transport import redis as kombu_redis

from protocol.connection import RedisTarget
from settings import settings_from_environment

# "priority": a worker polls its queues in the order given by -Q, so
# "local-completion,local" serves completions first.
# No ack emulation: kombu would record every job in an "unacked" hash and
# remove it again (two round trips, about 1 ms before each job starts) only
# to redeliver, an hour later, a job whose worker died: a job nobody waits
# for any more (queue_config: task_acks_late). A worker that dies in the
# instant between taking a job and starting it leaves a client that gets the
# queue-wait error instead.
TRANSPORT_OPTIONS = {"queue_order_strategy": "priority", "ack_emulation": False}


def connection_options(target: RedisTarget) -> dict:
    """How kombu reaches the broker (a kombu.Connection's arguments). The
    transport: the one below with one client per channel for publishing,
    its Sentinel twin for a sentinel:// URL; the URL still says where the
    broker is. TLS as protocol/connection.py reads it from the URL (kombu
    alone would accept any certificate for rediss://)."""
    return {"hostname": target.celery_url(),
            "transport": f"{__name__}:{'SentinelTransport' if target.is_sentinel else 'Transport'}",
            "transport_options": {**TRANSPORT_OPTIONS, **_sentinel_options(target)}, "ssl": target.tls or False}


def broker_connection() -> kombu.Connection:
    """A connection to the broker as Celery's app makes them, where the
    environment's settings say (as queue_config reads them): the web
    process's tickets go on one (jobqueue/wakeups.py)."""
    return kombu.Connection(**connection_options(RedisTarget.of(settings_from_environment())))


def _sentinel_options(target: RedisTarget) -> dict:
    """Kombu's Sentinel transport options: the master's name, and how to
    reach the sentinels themselves (their password, TLS)."""
    if not target.is_sentinel:
        return {}
    sentinels = {"password": target.sentinel_password} if target.sentinel_password else {}
    if target.tls:
        sentinels.update(ssl=True, **target.tls)
    return {"master_name": target.master, "sentinel_kwargs": sentinels}


class OnePublisher:
    """A channel's publishes through one client on its pool."""
    _publisher: redis.Redis | None = None

    @contextmanager
    def conn_or_acquire(self, client: redis.Redis | None = None) -> Iterator[redis.Redis]:
        if client is not None:
            yield client
            return
        pool = self.pool
        if self._publisher is None or self._publisher.connection_pool is not pool:
            self._publisher = self._create_client()
        yield self._publisher


class Channel(OnePublisher, kombu_redis.Channel):
    pass


class SentinelChannel(OnePublisher, kombu_redis.SentinelChannel):
    pass


class Transport(kombu_redis.Transport):
    Channel = Channel


class SentinelTransport(kombu_redis.SentinelTransport):
    Channel = SentinelChannel
