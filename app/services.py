"""What one web process shares between requests: settings, the model
registry, Redis, the relay, the job queue's wake-ups and the API keys."""
from __future__ import annotations

from dataclasses import dataclass, field

from flask import current_app
from redis import Redis

import jobqueue
from app.owed import OwedWrites
from app.persistence_check import PersistenceCheck
from app.presence import WebLease
from app.record_buffer import RecordBuffer
from app.relay import Relay
from catalog.registry import Registry
from identity.keys import KeyRing
from identity.sealing import Sealer
from protocol.connection import RedisTarget, redis_client
from settings import Settings


@dataclass
class Services:
    settings: Settings
    registry: Registry
    redis: Redis
    relay: Relay
    wakeups: jobqueue.Wakeups
    keys: KeyRing
    lease: WebLease
    sealer: Sealer  # what clients keep for us, sealed (identity/sealing.py)
    open_runs: set = field(default_factory=set)  # this process's unfinished requests (for shutdown)
    open_sockets: set = field(default_factory=set)  # its Responses WebSockets (closed at shutdown)
    persistence: PersistenceCheck = field(default_factory=PersistenceCheck)  # does its Redis keep what it holds
    owed: OwedWrites = field(default_factory=OwedWrites)  # requests' ends Redis could not take yet (app/owed.py)
    records: RecordBuffer | None = None  # its request-log records on their way (app/record_buffer.py)
    mcp_pool_heard_at: float = 0.0  # when it last saw an MCP pool process alive (app/mcp_gateway.py)
    signin: SignInService | None = None  # sign-in with the office's provider, when configured (identity/)

    def __post_init__(self):
        self.records = self.records or RecordBuffer(self.redis, self.settings)

    def dedicated_connection(self) -> Redis:
        """A client of one connection of its own, for a caller that blocks on
        Redis for long (a replayed stream's XREAD BLOCK): the pool every
        request shares is never held by a wait. The caller closes it."""
        return redis_client(RedisTarget.of(self.settings), "switchboard-web-replay", 1, socket_connect_timeout=2)


def services() -> Services:
    return current_app.extensions["switchboard"]
