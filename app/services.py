"""What one web process shares between requests: settings, the model
registry, Redis, the relay, the ticket maker and the API keys."""
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
from queue_config import ticket_message
from settings import Settings


@dataclass
class Services:
    settings: Settings
    registry: Registry
    redis: Redis
    relay: Relay
    ticket: Callable[[Job, str, str], tuple[str, bytes]]  # job, queue, pool -> the ticket's list and message
    keys: KeyRing
    lease: WebLease
    open_runs: set = field(default_factory=set)  # this process's unfinished requests (for shutdown)


def ticket_by_name(job: Job, queue: str, pool: str) -> tuple[str, bytes]:
    """The Celery message that lets a slot take the job (by task name: the
    front end never imports worker code); queued with the job itself."""
    return ticket_message(queue, pool, job.id, job.id)


def services() -> Services:
    return current_app.extensions["switchboard"]
