"""The commands about processes (not jobs: jobqueue/ owns those) that the
two sides send each other through Redis, names from `protocol.keys`:

- events: publishing an event on a reply channel (the web process listens)
- web leases: a web process's liveness and the streams it relays
- worker presence (/readyz) and the models workers hold (/api/ps)
- the pools' drain rate (Retry-After)

Each command takes a client or a pipeline (`batched`), so a caller can send
several in one round trip.
"""
from __future__ import annotations

import json
import time
from contextlib import contextmanager
from typing import Iterator

from redis import Redis
from redis.client import Pipeline

from protocol import keys
from protocol.events import Event, encode_event

# A running job's `alive` key lapses this long after its worker's last beat
# (workers beat once a second), and a worker's presence three times that.
ALIVE_TTL_SECONDS = 4
# A web process renews its lease every second; when it has lapsed this long,
# its concurrency slots and queue places are free and workers abort its jobs.
WEB_LEASE_SECONDS = 8
FOREVER_SECONDS = 10 * 365 * 24 * 3600  # keep_alive < 0


@contextmanager
def batched(redis: Redis | Pipeline) -> Iterator[Pipeline]:
    """Commands queued together: on the caller's pipeline if given one (they
    go out with it), else on a new one sent at the end of the block."""
    if isinstance(redis, Pipeline):
        yield redis
        return
    pipe = redis.pipeline(transaction=False)
    yield pipe
    pipe.execute()


def publish_event(redis: Redis | Pipeline, channel: str, event: Event) -> None:
    redis.publish(channel, encode_event(event))


# --- liveness of web processes and workers -------------------------------------------
def renew_web_lease(redis: Redis | Pipeline, web_id: str, streams: int = 0) -> None:
    """The lease's value is the number of streams the process relays."""
    redis.set(keys.web_lease_key(web_id), streams, ex=WEB_LEASE_SECONDS)


def drop_web_lease(redis: Redis | Pipeline, web_id: str) -> None:
    """Its jobs are nobody's from now on (an identity a relay gave up)."""
    redis.delete(keys.web_lease_key(web_id))


def streams_relayed(redis: Redis) -> int:
    """The streams every live web process relays (as of their last renewal,
    at most a second ago)."""
    found = list(redis.scan_iter(match=keys.WEB_LEASE_PREFIX + "*", count=500))
    return sum(int(value) for value in redis.mget(found) if value and value.isdigit()) if found else 0


def dead_webs(redis: Redis, web_ids: set[str]) -> set[str]:
    """Those of the web processes whose lease has lapsed."""
    ordered = sorted(web_ids)
    if not ordered:
        return set()
    pipe = redis.pipeline(transaction=False)
    for web_id in ordered:
        pipe.exists(keys.web_lease_key(web_id))
    return {web_id for web_id, alive in zip(ordered, pipe.execute()) if not alive}


def live_workers(redis: Redis) -> list[dict]:
    found = list(redis.scan_iter(match=keys.WORKER_KEY_PATTERN, count=500))
    return [json.loads(v) for v in redis.mget(found) if v] if found else []


# --- loaded models (/api/ps) ---------------------------------------------------------
def mark_loaded(redis: Redis | Pipeline, model: str, worker_id: str, seconds: int) -> None:
    """Note that a worker holds `model`; the note lapses after `seconds`."""
    redis.set(keys.loaded_key(worker_id, model), model.encode(), ex=seconds)


def forget_loaded(redis: Redis | Pipeline, model: str, worker_id: str) -> None:
    redis.delete(keys.loaded_key(worker_id, model))


def loaded_models(redis: Redis) -> dict[str, int]:
    """Models some worker holds, with the seconds left on the longest note."""
    found = list(redis.scan_iter(match=keys.LOADED_KEY_PATTERN, count=500))
    if not found:
        return {}
    pipe = redis.pipeline(transaction=False)
    for key in found:
        pipe.get(key)
        pipe.ttl(key)
    values = pipe.execute()
    models: dict[str, int] = {}
    for model, ttl in zip(values[::2], values[1::2]):
        if model is not None:
            models[model.decode()] = max(models.get(model.decode(), 0), int(ttl))
    return models


def drained_recently(redis: Redis, pool: str) -> int:
    """Jobs taken from the pool's queue in the last minute."""
    now = int(time.time() // 10)
    return sum(int(v) for v in redis.mget([keys.drained_key(pool, now - i) for i in range(6)]) if v)
