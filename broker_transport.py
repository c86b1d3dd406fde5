"""Kombu's Redis transports (one Redis, or the master Redis Sentinel names),
publishing through one redis-py client per channel.

Celery loads it by name (queue_config: broker_transport, kombu's documented
way to name a transport class). Kombu's Redis channel builds a new redis-py
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

import redis
from kombu.transport import redis as kombu_redis


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
