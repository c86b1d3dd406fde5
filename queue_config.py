"""The Celery application (and nothing else); workers start from it with `python -m workers`.

The job queue sends its wake-ups through it (jobqueue/wakeups.py: by task
name, so the web process never imports a task); workers start from it. Settings come from the one settings
model (settings/), read once per process.
"""
from __future__ import annotations

import sys
from pathlib import Path

from celery import Celery

# `celery -A queue_config` puts the current directory on sys.path only while
# it finds the app, and removes it after (celery.utils.imports.cwd_in_path);
# a worker imports a backend's modules (and the packages they stand on)
# lazily, on its first job of that kind. An entry of our own, at the end,
# stays.
sys.path.append(str(Path(__file__).resolve().parent))

from protocol.connection import RedisTarget
from settings import settings_from_environment

# What Celery's broker connections add per process: its producer pool, plus
# the consumer's connection and its spare.
BROKER_POOL_LIMIT = 10
BROKER_CONSUMER_CONNECTIONS = 2

_settings = settings_from_environment()
_redis = RedisTarget.of(_settings)


def _sentinel_options(target: RedisTarget) -> dict:
    """Kombu's Sentinel transport options: the master's name, and how to
    reach the sentinels themselves (their password, TLS)."""
    if not target.is_sentinel:
        return {}
    sentinels = {"password": target.sentinel_password} if target.sentinel_password else {}
    if target.tls:
        sentinels.update(ssl=True, **target.tls)
    return {"master_name": target.master, "sentinel_kwargs": sentinels}


app = Celery("switchboard", broker=_redis.celery_url(), include=["workers.tasks"])
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
    # (the take drops a job whose client left). And late acks hit a Celery/kombu
    # defect: a job finishing while Redis is down acks on the dead connection,
    # and the worker never consumes again after Redis returns.
    task_acks_late=False,
    # Enforced by the prefork pool; the runner enforces max_job_seconds itself
    # for the thread and gevent pools, which ignore these.
    task_soft_time_limit=_settings.max_job_seconds + 30,
    task_time_limit=_settings.max_job_seconds + 60,
    broker_connection_retry_on_startup=True,
    # "priority": a worker polls its queues in the order given by -Q, so
    # "local-completion,local" serves completions first.
    # No ack emulation: kombu would record every job in an "unacked" hash and
    # remove it again (two round trips, about 1 ms before each job starts) only
    # to redeliver, an hour later, a job whose worker died: a job nobody waits
    # for any more (see task_acks_late). A worker that dies in the instant
    # between taking a job and starting it leaves a client that gets the
    # queue-wait error instead.
    broker_transport_options={"queue_order_strategy": "priority", "ack_emulation": False,
                              **_sentinel_options(_redis)},
    worker_send_task_events=False,
    # Celery's consumer, its loop woken when a slot frees (not after its 2 s
    # wait): see workers/consume.py. Read by workers only.
    worker_consumer="workers.consume:Consumer",
    broker_pool_limit=BROKER_POOL_LIMIT,
    # Kombu's Redis transport with one client per channel for publishing (see
    # broker_transport.py), its Sentinel twin for a sentinel:// URL; the URL
    # still says where the broker is. TLS as protocol/connection.py reads it
    # from the URL (kombu alone would accept any certificate for rediss://).
    broker_transport="broker_transport:SentinelTransport" if _redis.is_sentinel else "broker_transport:Transport",
    broker_use_ssl=_redis.tls or False,
)

