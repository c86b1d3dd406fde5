"""The commands the two processes send each other through Redis (names
from `protocol.keys`):

- events: a job's events, published on its channel (the web process listens)
- abort: a key the worker checks before starting, plus a broadcast on the
  abort channel so a running job stops within one token
- state: recording what became of a job (a worker's take starts it:
  protocol/fairqueue.py)
- liveness: each running job's `alive` key, each worker's presence
- loaded models, for /api/ps

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
from protocol.contract import ErrorEvent, Event, Job, encode_event

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


# --- events and aborts ---------------------------------------------------------------
def publish_event(redis: Redis | Pipeline, channel: str, event: Event) -> None:
    redis.publish(channel, encode_event(event))


def send_abort(redis: Redis, job_id: str) -> None:
    """Mark the job aborted (for a worker that has not started it yet) and
    tell running workers at once."""
    with batched(redis) as pipe:
        pipe.set(keys.abort_key(job_id), b"1", ex=keys.RECORD_TTL_SECONDS)
        pipe.publish(keys.abort_channel(), job_id)


def is_aborted(redis: Redis, job_id: str) -> bool:
    return bool(redis.exists(keys.abort_key(job_id)))


def supersede(redis: Redis, client: str, model: str, job: Job) -> str | None:
    """Make the job the client's latest completion for the model; abort the
    previous one (its stream ends with an error). Returns the previous id."""
    channel = job.reply_channel
    # The key holds the job's reply channel (the job id is in its name), so
    # whichever web process relays the previous job hears the error.
    previous = redis.set(keys.latest_completion_key(client, model), channel, ex=keys.RECORD_TTL_SECONDS, get=True)
    if previous is None or previous.decode() == channel:
        return None
    previous_channel = previous.decode()
    previous_id = keys.job_of_channel(previous_channel)
    publish_event(redis, previous_channel, ErrorEvent(message="superseded by a newer completion request", status=409))
    send_abort(redis, previous_id)
    return previous_id


# --- a job's life in a worker --------------------------------------------------------
def record_state(redis: Redis | Pipeline, job_id: str, **fields: str | int | float) -> None:
    with batched(redis) as pipe:
        pipe.hset(keys.state_key(job_id), mapping=fields)
        pipe.expire(keys.state_key(job_id), keys.RECORD_TTL_SECONDS)


def job_state(redis: Redis, job_id: str) -> dict[str, str]:
    raw = redis.hgetall(keys.state_key(job_id))
    return {k.decode(): v.decode() for k, v in raw.items()}


def end_heartbeat(redis: Redis | Pipeline, job_id: str) -> None:
    """With a finished job's last writes, after its state (see worker_lost);
    its abort mark goes too (nothing reads it once the job finished)."""
    redis.delete(keys.alive_key(job_id), keys.abort_key(job_id))


def job_taken(redis: Redis, job_id: str) -> bool:
    """A worker took (so started) the job: its take wrote `taken_at`."""
    return bool(redis.hexists(keys.state_key(job_id), "taken_at"))


def worker_lost(redis: Redis, job_id: str) -> bool:
    """A started job's heartbeat stopped and it did not finish. (A finished
    job's heartbeat ends with its last writes, after its final event: a
    front end that has not read that event yet must not call it lost.)"""
    pipe = redis.pipeline(transaction=False)
    pipe.exists(keys.alive_key(job_id))
    pipe.hget(keys.state_key(job_id), "status")
    alive, status = pipe.execute()
    return not alive and status != b"finished"


# --- liveness of workers -------------------------------------------------------------
def beat(redis: Redis, job_ids: list[str], worker: dict | None) -> None:
    """A worker's heartbeat: its running jobs stay alive, and (once it
    consumes queues) its presence with those queues. A job's key is only
    refreshed, never made again (XX): a beat racing the job's end must not
    bring back the key the end deleted, and a key that lapsed (the worker
    stalled past its TTL) stays lapsed."""
    with batched(redis) as pipe:
        for job_id in job_ids:
            pipe.set(keys.alive_key(job_id), b"1", ex=ALIVE_TTL_SECONDS, xx=True)
        if worker is not None:
            pipe.set(keys.worker_key(worker["id"]), json.dumps(worker), ex=ALIVE_TTL_SECONDS * 3)


def renew_web_lease(redis: Redis, web_id: str, streams: int = 0) -> None:
    """The lease's value is the number of streams the process relays."""
    redis.set(keys.web_lease_key(web_id), streams, ex=WEB_LEASE_SECONDS)


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
    redis.set(keys.loaded_key(model, worker_id), model.encode(), ex=seconds)


def forget_loaded(redis: Redis | Pipeline, model: str, worker_id: str) -> None:
    redis.delete(keys.loaded_key(model, worker_id))


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
