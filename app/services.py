"""What one web process shares between requests: settings, the model
registry, Redis, the relay, the enqueue function and the API keys."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from flask import current_app
from redis import Redis

from app.auth import KeyRing
from app.presence import WebLease
from app.relay import Relay
from catalog.registry import Registry
from protocol.contract import Job
from protocol.errors import SwitchboardError
from protocol.queue import RUN_JOB_TASK
from queue_config import app as celery_app
from settings import Settings


@dataclass
class Services:
    settings: Settings
    registry: Registry
    redis: Redis
    relay: Relay
    enqueue: Callable[[Job, str], None]
    keys: KeyRing
    lease: WebLease = field(default_factory=WebLease)
    open_runs: set = field(default_factory=set)  # this process's unfinished requests (for shutdown)


def enqueue_by_name(job: Job, queue: str) -> None:
    """The front end knows the task by name only; it never imports worker code.

    Celery's own message API (create_task_message, router, send_task_message:
    the steps send_task takes) without send_task's extras: it would build a
    result backend object and an AsyncResult in every request greenlet and
    repr the whole job, about half a millisecond per request for nothing
    (results are ignored; events travel over pub/sub). The Celery task id
    is the job id."""
    amqp = celery_app.amqp
    try:
        message = amqp.create_task_message(job.id, RUN_JOB_TASK, [job.model_dump(mode="json")], {},
                                           argsrepr=f"job {job.id}", kwargsrepr="{}", ignore_result=True)
        options = amqp.router.route({"queue": queue}, RUN_JOB_TASK)
        with celery_app.producer_pool.acquire(block=True) as producer:
            amqp.send_task_message(producer, RUN_JOB_TASK, message, **options)
    except Exception as error:  # kombu raises OperationalError and friends when the broker is down
        raise SwitchboardError(f"the job queue is unavailable ({type(error).__name__}); try again", 503) from None


def services() -> Services:
    return current_app.extensions["switchboard"]
