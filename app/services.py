"""What one web process shares between requests: settings, the model
registry, Redis, the relay and the enqueue function."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from flask import current_app
from redis import Redis

from app.auth import KeyRing
from app.config import Settings
from app.errors import ApiError
from app.relay import Relay
from queue_config import RUN_JOB_TASK
from queue_config import app as celery_app
from workers.contract import Job
from workers.registry import Registry


@dataclass
class Services:
    settings: Settings
    registry: Registry
    redis: Redis
    relay: Relay
    enqueue: Callable[[Job, str], None]
    keys: KeyRing


def enqueue_by_name(job: Job, queue: str) -> None:
    """The front end knows the task by name only; it never imports worker code.
    (Celery publishes to a direct queue on the anonymous exchange, so the
    message goes straight into the queue's list, bindings or not.)"""
    try:
        celery_app.send_task(RUN_JOB_TASK, args=[job.model_dump(mode="json")], queue=queue)
    except Exception as error:  # kombu raises OperationalError and friends when the broker is down
        raise ApiError(503, f"the job queue is unavailable ({type(error).__name__}); try again") from None


def services() -> Services:
    return current_app.extensions["switchboard"]
