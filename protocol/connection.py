"""The Redis client both processes use: a bounded, blocking pool."""
from __future__ import annotations

from redis import BlockingConnectionPool, Redis


def redis_client(url: str, name: str, max_connections: int = 32, **connection_options) -> Redis:
    """A client over a bounded pool: when all its connections are busy, a
    caller waits for one (up to 10 s) instead of opening more. `name` shows
    in Redis's CLIENT LIST, so an operator sees who holds which connection."""
    pool = BlockingConnectionPool.from_url(url, max_connections=max_connections, timeout=10,
                                           client_name=name, health_check_interval=10, **connection_options)
    return Redis(connection_pool=pool)
