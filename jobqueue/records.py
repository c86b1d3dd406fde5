"""A job's record in Redis while and after it runs: its state (what became
of it), its heartbeat (the `alive` key its worker refreshes), its abort mark
and broadcast, and a code completion superseding the previous one. Names from
`protocol.keys`; each command takes a client or a pipeline (`batched`).
"""
from __future__ import annotations

import json
import time

from redis import Redis
from redis.client import Pipeline

from jobqueue.states import JobState
from protocol import keys
from protocol.contract import Job
from protocol.events import ErrorEvent
from protocol.presence import ALIVE_TTL_SECONDS, batched, publish_event


def send_abort(redis: Redis, job_id: str) -> None:
    """Mark the job aborted (for a worker that has not started it yet) and
    tell running workers at once."""
    with batched(redis) as pipe:
        pipe.set(keys.abort_key(job_id), b"1", ex=keys.RECORD_TTL_SECONDS)
        pipe.publish(keys.abort_channel(), job_id)


def is_aborted(redis: Redis, job_id: str) -> bool:
    return bool(redis.exists(keys.abort_key(job_id)))


def aborted_among(redis: Redis, job_ids: list[str]) -> set[str]:
    """Those of the jobs marked aborted (one round trip)."""
    if not job_ids:
        return set()
    return {job_id for job_id, mark in zip(job_ids, redis.mget([keys.abort_key(j) for j in job_ids])) if mark}


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


RUNNING_FIELDS = ("person", "model", "session", "priority", "worker", "started_at")
RUNNING_MOST = 500  # jobs the live view lists (the oldest first)


def running(redis: Redis) -> list[dict]:
    """The jobs workers run now, oldest first, each with its person, model,
    session, priority, worker and start. A job whose worker died (its
    heartbeat gone, unfinished) leaves the list here."""
    with redis.pipeline(transaction=False) as pipe:
        pipe.zremrangebyscore(keys.RUNNING_JOBS, "-inf", f"({time.time() - 86400}")
        pipe.zrange(keys.RUNNING_JOBS, 0, RUNNING_MOST - 1)
        job_ids = [job_id.decode() for job_id in pipe.execute()[1]]
    with redis.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.hmget(keys.state_key(job_id), *RUNNING_FIELDS)
            pipe.exists(keys.alive_key(job_id))
        found = pipe.execute()
    jobs, gone = [], []
    for job_id, values, alive in zip(job_ids, found[::2], found[1::2]):
        if not alive:
            gone.append(job_id)
            continue
        job = {"job": job_id} | {name: None if v is None else v.decode() for name, v in zip(RUNNING_FIELDS, values)}
        jobs.append(job | {"started_at": float(job["started_at"] or 0)})
    if gone:
        redis.zrem(keys.RUNNING_JOBS, *gone)
    return jobs


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
    return not alive and status != JobState.FINISHED.encode()


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
