"""The Celery application (and nothing else): `celery -A queue_config worker`.

The web process uses it only to send tickets by task name (send_tickets);
workers start from it. Settings come from the one settings
model (settings/), read once per process.
"""
from __future__ import annotations

import sys
import uuid
from pathlib import Path

from celery import Celery

# `celery -A queue_config` puts the current directory on sys.path only while
# it finds the app, and removes it after (celery.utils.imports.cwd_in_path);
# a worker imports a backend's modules (and the packages they stand on)
# lazily, on its first job of that kind. An entry of our own, at the end,
# stays.
sys.path.append(str(Path(__file__).resolve().parent))

from protocol.connection import RedisTarget
from protocol.queue import TAKE_TASK
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


Ticket = tuple[str, str, str]  # the Celery queue, the pool, the job (the ticket's id)


def send_tickets(tickets: list[Ticket], producer=None) -> None:
    """Tickets for jobs the web process queued, in one round trip (kombu's
    publish batch, when there are several): a free slot that gets one takes
    the fairest job of its pool it may run (its job first if it may) and
    tells the job queue the ticket arrived (jobqueue/fairqueue.py). On
    `producer`, else on one from Celery's pool. Raises what kombu raises
    when the broker is down."""
    if producer is None:
        with app.producer_pool.acquire(block=True) as producer:
            return send_tickets(tickets, producer)
    if len(tickets) == 1:
        return _publish_ticket(producer, *tickets[0])
    with producer.batch():
        for ticket in tickets:
            _publish_ticket(producer, *ticket)


class HeldProducer:
    """One producer of Celery's pool, held by a process that sends from one
    place at a time (the web process's Tickets), instead of taking it from
    the pool and giving it back for every ticket. After a failure it goes
    back to the pool, and the next send takes one anew."""

    def __init__(self) -> None:
        self._producer = None

    def send_tickets(self, tickets: list[Ticket]) -> None:
        if self._producer is None:
            self._producer = app.producer_pool.acquire(block=True)
        try:
            send_tickets(tickets, self._producer)
        except BaseException:
            producer, self._producer = self._producer, None
            producer.release()
            raise


def _publish_ticket(producer, queue: str, pool: str, job_id: str) -> None:
    _publish(producer, queue, job_id, {"pool": pool, "job": job_id, "queue": queue})


def send_direct_ticket(queue: str, pool: str, job_id: str) -> None:
    """A ticket from a worker: to another worker's own queue (a job handed to
    its idle model) or for a person's job that waited on their limit. The
    job queue does not count these."""
    with app.producer_pool.acquire(block=True) as producer:
        _publish(producer, queue, uuid.uuid4().hex, {"pool": pool, "job": job_id})


def _publish(producer, queue: str, task_id: str, ticket: dict) -> None:
    """Celery's message for the task (its API's steps, without send_task's
    result object: results are ignored; events travel over pub/sub). Sent
    to the queue by name (Celery's anonymous exchange), so nothing is
    declared first: the workers declare the queues they consume."""
    message = app.amqp.create_task_message(task_id, TAKE_TASK, [ticket], {}, argsrepr=repr(ticket), kwargsrepr="{}",
                                           ignore_result=True)
    app.amqp.send_task_message(producer, TAKE_TASK, message, queue=queue, retry=False, declare=[])
