"""The Celery application (and nothing else): `celery -A queue_config worker`.

The web process uses it only to publish jobs by task name (see
app/services.py); workers start from it. Settings come from the one settings
model (settings/), read once per process.
"""
from __future__ import annotations

import base64
import json
import sys
import uuid
from functools import lru_cache
from pathlib import Path

from celery import Celery
from kombu.serialization import dumps

# `celery -A queue_config` puts the current directory on sys.path only while
# it finds the app, and removes it after (celery.utils.imports.cwd_in_path);
# a worker imports a backend's modules (and the packages they stand on)
# lazily, on its first job of that kind. An entry of our own, at the end,
# stays.
sys.path.append(str(Path(__file__).resolve().parent))

from protocol.queue import TAKE_TASK
from settings import settings_from_environment

# What Celery's broker connections add per process: its producer pool, plus
# the consumer's connection and its spare.
BROKER_POOL_LIMIT = 10
BROKER_CONSUMER_CONNECTIONS = 2

_settings = settings_from_environment()
app = Celery("switchboard", broker=_settings.redis_url, include=["workers.tasks"])
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
    broker_transport_options={"queue_order_strategy": "priority", "ack_emulation": False},
    worker_send_task_events=False,
    # Celery's consumer, its loop woken when a slot frees (not after its 2 s
    # wait): see workers/consume.py. Read by workers only.
    worker_consumer="workers.consume:Consumer",
    broker_pool_limit=BROKER_POOL_LIMIT,
)


def _task_message(pool: str, job_id: str, message_id: str):
    return app.amqp.create_task_message(message_id, TAKE_TASK, [{"pool": pool, "job": job_id}], {},
                                        argsrepr=f"pool {pool} job {job_id}", kwargsrepr="{}", ignore_result=True)


def ticket_message(queue: str, pool: str, job_id: str, message_id: str) -> tuple[str, bytes]:
    """The Redis list and the bytes that `send_ticket` would push there, for
    a caller that pushes them itself in a round trip it makes anyway (the
    web process queues the job and its ticket in one script: fairqueue.push).

    kombu's Redis transport keeps a message as this JSON envelope (its
    virtual channel's prepare_message plus what basic_publish adds); a queue
    at priority 0 is the list named after it. tests/unit/test_tickets.py
    checks the envelope against what kombu itself pushes. Celery builds the
    same message for every ticket of a pool but its ids, so it is built once
    per queue and pool (about 0.1 ms a request) and the ids are filled in."""
    envelope, body = _ticket_template(queue, pool)
    ids = {_JOB_ID: _json_text(job_id), _MESSAGE_ID: _json_text(message_id)}
    body = base64.b64encode(_fill(body, ids).encode()).decode()
    return queue, _fill(envelope, {**ids, _BODY: body, _DELIVERY_TAG: str(uuid.uuid4())}).encode()


# Placeholders for what differs between two tickets of a pool (no Celery
# header or kombu field holds text like these).
_JOB_ID, _MESSAGE_ID, _BODY, _DELIVERY_TAG = "@@job-id@@", "@@message-id@@", "@@body@@", "@@delivery-tag@@"


@lru_cache(maxsize=256)
def _ticket_template(queue: str, pool: str) -> tuple[str, str]:
    """The envelope and the body's JSON, with placeholders for the ids."""
    headers, properties, body, _ = _task_message(pool, _JOB_ID, _MESSAGE_ID)
    content_type, encoding, data = dumps(body, serializer="json")
    delivery = {"delivery_mode": 2, "delivery_info": {"exchange": "", "routing_key": queue}, "priority": 0,
                "body_encoding": "base64", "delivery_tag": _DELIVERY_TAG}
    envelope = {"body": _BODY, "content-encoding": encoding, "content-type": content_type, "headers": headers,
                "properties": {**properties, **delivery}}
    return json.dumps(envelope), data


def _fill(template: str, values: dict[str, str]) -> str:
    for placeholder, value in values.items():
        template = template.replace(placeholder, value)
    return template


def _json_text(value: str) -> str:
    """The value as it reads inside a JSON string."""
    return json.dumps(value)[1:-1]


def send_ticket(queue: str, pool: str, job_id: str, message_id: str) -> None:
    """Put a ticket on a queue: a free slot that gets it takes the fairest job
    of `pool` it may run (`job_id` first if it may; see jobqueue/fairqueue.py).
    Raises what kombu raises when the broker is down."""
    with app.producer_pool.acquire(block=True) as producer:
        publish_ticket(producer, queue, pool, job_id, message_id)


def publish_ticket(producer, queue: str, pool: str, job_id: str, message_id: str) -> None:
    """Celery's own message API (create_task_message, router,
    send_task_message: the steps send_task takes) without send_task's
    extras: it would build a result backend object and an AsyncResult per
    call, about half a millisecond for nothing (results are ignored; events
    travel over pub/sub)."""
    amqp = app.amqp
    options = amqp.router.route({"queue": queue}, TAKE_TASK)
    amqp.send_task_message(producer, TAKE_TASK, _task_message(pool, job_id, message_id), **options)
