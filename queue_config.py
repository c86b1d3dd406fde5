"""The Celery application and its settings, and the worker's environment.

The front end imports this module only to enqueue by task name (it never
imports worker code); workers start from it with `celery -A queue_config`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from celery import Celery
from redis import BlockingConnectionPool, Redis

RUN_JOB_TASK = "switchboard.run_job"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
# Connections one process's Redis client may open (pub/sub and Celery's own
# broker connections come on top): however many streams or jobs a process
# carries, its Redis connections stay bounded.
REDIS_CONNECTIONS = int(os.environ.get("SWITCHBOARD_REDIS_CONNECTIONS", "32"))
# What Celery's broker connections add per process: its producer pool, plus
# the consumer's connection and its spare.
BROKER_POOL_LIMIT = 10
BROKER_CONSUMER_CONNECTIONS = 2


def redis_client(url: str, name: str, **connection_options) -> Redis:
    """A client over a bounded pool: when all its connections are busy, a
    caller waits for one (up to 10 s) instead of opening more. `name` shows
    in Redis's CLIENT LIST, so an operator sees who holds which connection."""
    pool = BlockingConnectionPool.from_url(url, max_connections=REDIS_CONNECTIONS, timeout=10,
                                           client_name=name, health_check_interval=10, **connection_options)
    return Redis(connection_pool=pool)


@dataclass(frozen=True)
class WorkerSettings:
    redis_url: str
    models_path: Path | None
    max_job_seconds: float
    max_job_tokens: int
    loaded_marker_seconds: int


def worker_settings() -> WorkerSettings:
    models = os.environ.get("SWITCHBOARD_MODELS")
    return WorkerSettings(
        redis_url=os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL,
        models_path=Path(models) if models else None,
        # Server-side cap on one job's wall time, whatever its token limit.
        max_job_seconds=float(os.environ.get("SWITCHBOARD_MAX_JOB_SECONDS", "600")),
        # Server-side cap on the tokens one job may generate, whatever it asks.
        max_job_tokens=int(os.environ.get("SWITCHBOARD_MAX_JOB_TOKENS", "16384")),
        # How long /api/ps lists a model after a worker last ran it.
        loaded_marker_seconds=int(os.environ.get("SWITCHBOARD_LOADED_SECONDS", "300")),
    )


def completion_queue(pool: str) -> str:
    """Code-completion jobs of a pool wait here, polled before the pool's
    chat queue: editors need them fast and abandon them on every keystroke."""
    return f"{pool}-completion"


def secret_from_env(name: str) -> str | None:
    """An upstream's key, from the variable the registry names. Keys are
    read here only, at request time, and never logged."""
    return os.environ.get(name) or None


app = Celery("switchboard", broker=worker_settings().redis_url, include=["workers.tasks"])
app.conf.update(
    task_serializer="json",
    accept_content=["json"],
    task_ignore_result=True,
    task_default_queue="local",
    task_create_missing_queues=True,
    # One job at a time per worker slot, and none fetched ahead: a worker takes
    # a job only when a slot is free, so a completion queued after a chat job
    # still runs first (queue order) and waiting jobs stay in Redis, visible.
    worker_prefetch_multiplier=1,
    worker_disable_prefetch=True,
    # Acknowledged when a worker takes the job, not after it ran. A job is bound
    # to a live client stream: if its worker dies the client gets an error at
    # once (heartbeats), so redelivering it later could only run it for nobody
    # (runner.py's claim refuses that anyway). And late acks hit a Celery/kombu
    # defect: a job finishing while Redis is down acks on the dead connection,
    # and the worker never consumes again after Redis returns.
    task_acks_late=False,
    # Enforced by the prefork pool; the runner enforces max_job_seconds itself
    # for the thread and gevent pools, which ignore these.
    task_soft_time_limit=worker_settings().max_job_seconds + 30,
    task_time_limit=worker_settings().max_job_seconds + 60,
    broker_connection_retry_on_startup=True,
    # "priority": a worker polls its queues in the order given by -Q, so
    # "local-completion,local" serves completions first.
    # No ack emulation: kombu would record every job in an "unacked" hash and
    # remove it again (two round trips, about 1 ms before each job starts) only
    # to redeliver, an hour later, a job whose worker died: a job nobody waits
    # for any more (see task_acks_late). A worker that dies in the instant
    # between taking a job and starting it leaves a client that gets the
    # queue-wait error instead.
    broker_transport_options={"queue_order_strategy": "priority", "ack_emulation": False},
    worker_send_task_events=False,
    broker_pool_limit=BROKER_POOL_LIMIT,
)
