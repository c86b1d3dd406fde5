"""Redis names for a job, and the commands sent over them.

- events: pub/sub channel carrying the job's events as JSON (front end listens)
- abort: a key the worker checks before starting, plus a broadcast on
  ABORT_CHANNEL so a running job stops within one token
- state: a hash recording what became of the job (status, reason)
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

from redis import Redis
from redis.client import Pipeline

from workers.contract import ErrorEvent, Event, StartedEvent, encode_event

PREFIX = "switchboard"
ABORT_CHANNEL = f"{PREFIX}:abort"
RECORD_TTL_SECONDS = 24 * 3600


def events_channel(job_id: str) -> str:
    return f"{PREFIX}:job:{job_id}:events"


def abort_key(job_id: str) -> str:
    return f"{PREFIX}:job:{job_id}:abort"


def state_key(job_id: str) -> str:
    return f"{PREFIX}:job:{job_id}:state"


def alive_key(job_id: str) -> str:
    """Refreshed every second by the worker running the job (see heartbeat)."""
    return f"{PREFIX}:job:{job_id}:alive"


def claim_key(job_id: str) -> str:
    return f"{PREFIX}:job:{job_id}:claim"


def publish_event(redis: Redis, job_id: str, event: Event) -> None:
    redis.publish(events_channel(job_id), encode_event(event))


def send_abort(redis: Redis, job_id: str) -> None:
    """Mark the job aborted (for a worker that has not started it yet) and
    tell running workers at once."""
    pipe = redis.pipeline(transaction=False)
    pipe.set(abort_key(job_id), b"1", ex=RECORD_TTL_SECONDS)
    pipe.publish(ABORT_CHANNEL, job_id)
    pipe.execute()


def supersede(redis: Redis, client: str, model: str, job_id: str) -> str | None:
    """Make job_id the client's latest completion for the model; abort the
    previous one (its stream ends with an error). Returns the previous id."""
    previous = redis.set(f"{PREFIX}:latest:{client}:{model}", job_id, ex=RECORD_TTL_SECONDS, get=True)
    if previous is None or previous.decode() == job_id:
        return None
    previous_id = previous.decode()
    publish_event(redis, previous_id, ErrorEvent(message="superseded by a newer completion request", status=409))
    send_abort(redis, previous_id)
    return previous_id


def take_job(redis: Redis, job_id: str, worker_id: str, pool: str) -> tuple[bool, bool]:
    """A worker takes the job off its queue, in one round trip: claim it (False
    if another worker already did: a redelivery), count it as drained from
    the pool, and read its abort mark. Returns (claimed, aborted)."""
    bucket = _drained_key(pool, int(time.time() // 10))
    pipe = redis.pipeline(transaction=False)
    pipe.set(claim_key(job_id), worker_id.encode(), nx=True, ex=RECORD_TTL_SECONDS)
    pipe.exists(abort_key(job_id))
    pipe.incr(bucket)
    pipe.expire(bucket, 120)
    claimed, aborted, _, _ = pipe.execute()
    return bool(claimed), bool(aborted)


def announce_started(redis: Redis, job_id: str, worker_id: str, alive_seconds: int) -> None:
    """In one round trip: the job's first heartbeat, its state, and the
    started event (after the heartbeat, so the front end finds it alive)."""
    with batched(redis) as pipe:
        pipe.set(alive_key(job_id), b"1", ex=alive_seconds)
        record_state(pipe, job_id, status="running", started_at=time.time(), worker=worker_id)
        publish_event(pipe, job_id, StartedEvent())


def worker_lost(redis: Redis, job_id: str) -> bool:
    """A started job's heartbeat stopped and it did not finish. (A finished
    job's heartbeat ends with its last writes, after its final event: a
    front end that has not read that event yet must not call it lost.)"""
    pipe = redis.pipeline(transaction=False)
    pipe.exists(alive_key(job_id))
    pipe.hget(state_key(job_id), "status")
    alive, status = pipe.execute()
    return not alive and status != b"finished"


def is_aborted(redis: Redis, job_id: str) -> bool:
    return bool(redis.exists(abort_key(job_id)))


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


def record_state(redis: Redis | Pipeline, job_id: str, **fields: str | int | float) -> None:
    with batched(redis) as pipe:
        pipe.hset(state_key(job_id), mapping=fields)
        pipe.expire(state_key(job_id), RECORD_TTL_SECONDS)


def job_state(redis: Redis, job_id: str) -> dict[str, str]:
    raw = redis.hgetall(state_key(job_id))
    return {k.decode(): v.decode() for k, v in raw.items()}


def _loaded_key(model: str, worker_id: str) -> str:
    return f"{PREFIX}:loaded:{worker_id}:{model}"


def mark_loaded(redis: Redis, model: str, worker_id: str, seconds: int) -> None:
    """Note that a worker holds `model`; the note lapses after `seconds`."""
    redis.set(_loaded_key(model, worker_id), model.encode(), ex=seconds)


FOREVER_SECONDS = 10 * 365 * 24 * 3600  # keep_alive < 0


def forget_loaded(redis: Redis, model: str, worker_id: str) -> None:
    redis.delete(_loaded_key(model, worker_id))


def loaded_models(redis: Redis) -> dict[str, int]:
    """Models some worker holds, with the seconds left on the longest note."""
    keys = list(redis.scan_iter(match=f"{PREFIX}:loaded:*", count=500))
    if not keys:
        return {}
    pipe = redis.pipeline(transaction=False)
    for key in keys:
        pipe.get(key)
        pipe.ttl(key)
    values = pipe.execute()
    models: dict[str, int] = {}
    for model, ttl in zip(values[::2], values[1::2]):
        if model is not None:
            models[model.decode()] = max(models.get(model.decode(), 0), int(ttl))
    return models


def _drained_key(pool: str, bucket: int) -> str:
    return f"{PREFIX}:drained:{pool}:{bucket}"


def drained_recently(redis: Redis, pool: str) -> int:
    """Jobs taken from the pool's queue in the last minute."""
    now = int(time.time() // 10)
    return sum(int(v) for v in redis.mget([_drained_key(pool, now - i) for i in range(6)]) if v)
