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

from broker_transport import connection_options
from protocol.connection import RedisTarget
from settings import settings_from_environment

# What Celery's broker connections add per process: its producer pool, plus
# the consumer's connection and its spare.
BROKER_POOL_LIMIT = 10
BROKER_CONSUMER_CONNECTIONS = 2

_settings = settings_from_environment()
_broker = connection_options(RedisTarget.of(_settings))


app = Celery("switchboard", broker=_broker["hostname"], include=["workers.tasks"])
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
    # Its queue order and no ack emulation: broker_transport.py says why.
    broker_transport_options=_broker["transport_options"],
    worker_send_task_events=False,
    # Celery's consumer, its loop woken when a slot frees (not after its 2 s
    # wait): see workers/consume.py. Read by workers only.
    worker_consumer="workers.consume:Consumer",
    broker_pool_limit=BROKER_POOL_LIMIT,
    # Kombu's Redis transport with one client per channel for publishing, TLS
    # as protocol/connection.py reads it from the URL (broker_transport.py).
    broker_transport=_broker["transport"],
    broker_use_ssl=_broker["ssl"],
)

