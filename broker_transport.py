"""Kombu's Redis transport, publishing through one redis-py client per channel.

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


class Channel(kombu_redis.Channel):
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


class Transport(kombu_redis.Transport):
    Channel = Channel
