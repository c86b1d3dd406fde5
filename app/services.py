"""What one web process shares between requests: settings, the model
registry, Redis, the relay and the enqueue function."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from flask import current_app
from redis import Redis

from app.auth import KeyRing
from app.config import Settings
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
    """The front end knows the task by name only; it never imports worker code."""
    celery_app.send_task(RUN_JOB_TASK, args=[job.model_dump(mode="json")], queue=queue)


def services() -> Services:
    return current_app.extensions["switchboard"]
