"""Admission control, enforced in Redis so it holds across web processes:
requests per minute and concurrent jobs per key, and a bounded queue per
pool. One Lua script checks and records atomically. A rejection carries a
Retry-After computed from the observed drain rate of the pool's queue
(which workers count as they take jobs: see commands.take_job)."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

from redis import Redis

from protocol import keys
from protocol.commands import drained_recently
from protocol.queue import completion_queue

_ADMIT = """
local rpm_key, active_key = KEYS[1], KEYS[2]
local now, stale_before, rpm, max_active, max_queue, job = tonumber(ARGV[1]), tonumber(ARGV[2]),
    tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local depth = redis.call('LLEN', KEYS[3]) + redis.call('LLEN', KEYS[4])
if depth >= max_queue then return {'queue_full', depth} end
local requests = redis.call('INCR', rpm_key)
if requests == 1 then redis.call('EXPIRE', rpm_key, 120) end
if requests > rpm then return {'rate_limit', depth} end
redis.call('ZREMRANGEBYSCORE', active_key, '-inf', stale_before)
if redis.call('ZCARD', active_key) >= max_active then return {'concurrency', depth} end
redis.call('ZADD', active_key, now, job)
redis.call('EXPIRE', active_key, 86400)
return {'ok', depth}
"""


@dataclass(frozen=True)
class Busy(Exception):
    """Over a limit: 429 on OpenAI routes, 503 on Ollama's."""

    reason: str  # rate_limit, concurrency, queue_full
    message: str
    retry_after: int


def retry_after_seconds(redis: Redis, pool: str, ahead: int) -> int:
    """Seconds until `ahead` queued jobs have drained at the recent rate."""
    per_second = drained_recently(redis, pool) / 60
    if per_second <= 0:
        return 30
    return max(1, min(300, math.ceil((ahead + 1) / per_second)))


def admit(redis: Redis, key_name: str, job_id: str, pool: str, *, requests_per_minute: int, max_concurrent: int,
          max_queue: int, stale_after: float) -> None:
    now = time.time()
    minute = int(now // 60)
    reason, depth = redis.eval(
        _ADMIT, 4, keys.rpm_key(key_name, minute), keys.active_key(key_name), pool, completion_queue(pool),
        now, now - stale_after, requests_per_minute, max_concurrent, max_queue, job_id)
    reason = reason.decode() if isinstance(reason, bytes) else reason
    if reason == "ok":
        return
    if reason == "rate_limit":
        raise Busy(reason, f"rate limit reached: {requests_per_minute} requests per minute for this key",
                   max(1, 60 - int(now % 60)))
    if reason == "concurrency":
        raise Busy(reason, f"too many concurrent requests: {max_concurrent} at a time for this key",
                   retry_after_seconds(redis, pool, 0))
    raise Busy(reason, f"the {pool} queue is full ({depth} jobs waiting)", retry_after_seconds(redis, pool, depth))


def release(redis: Redis, key_name: str, job_id: str) -> None:
    redis.zrem(keys.active_key(key_name), job_id)
