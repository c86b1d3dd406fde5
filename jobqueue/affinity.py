"""Prompt-cache affinity: which worker holds the prefix of a job's prompt in
its cache, so that the next job sharing it goes there while it is idle
(fair_take.lua follows it). A job's prefix is shared by its cache key's
holders, its session's and its person's, most specific first."""
from __future__ import annotations

import hashlib

from redis import Redis

from protocol import keys
from protocol.contract import Job

AFFINITY_SECONDS = 3600  # how long a person's affinity to a worker is remembered
AFFINITY_SEPARATOR = "\x1f"  # between a job's affinity names (fair_take.lua splits on it)


def affinity_of(job: Job, person: str) -> str:
    """Whose prompts a job's prefix is shared with, most specific first and
    joined by AFFINITY_SEPARATOR: its cache key's, its session's, its
    person's. fair_take.lua follows the first of them whose worker is known."""
    return AFFINITY_SEPARATOR.join(_cache_and_session(job) + [person])


def held_by_worker(job: Job, person: str) -> list[str]:
    """What a worker that ran the job holds the prefix of: its cache key's
    (a key shared by many people moves none of them), else its session's
    and its person's."""
    return _cache_and_session(job)[:1] if job.cache_key else _cache_and_session(job) + [person]


def _cache_and_session(job: Job) -> list[str]:
    """A cache key hashed, so a client's string of any length makes a short Redis key."""
    names = ["cache:" + hashlib.sha256(job.cache_key.encode()).hexdigest()[:32]] if job.cache_key else []
    return names + (["session:" + job.session] if job.session else [])


def remember_affinity(redis: Redis, model: str, names: list[str], worker_id: str) -> None:
    """The worker now holds the prefix of each name (held_by_worker) for the
    model in its cache."""
    with redis.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.set(keys.affinity_key(model, name), worker_id, ex=AFFINITY_SECONDS)
        pipe.execute()
