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
from queue_config import send_ticket
from settings import Settings


@dataclass
class Services:
    settings: Settings
    registry: Registry
    redis: Redis
    relay: Relay
    enqueue: Callable[[Job, str, str], None]  # job, queue, pool: sends its ticket
    keys: KeyRing
    lease: WebLease = field(default_factory=WebLease)
    open_runs: set = field(default_factory=set)  # this process's unfinished requests (for shutdown)


def enqueue_by_name(job: Job, queue: str, pool: str) -> None:
    """Send the ticket of a job queued in its pool's fair queue, by task
    name: the front end never imports worker code."""
    try:
        send_ticket(queue, pool, job.id, job.id)
    except Exception as error:  # kombu raises OperationalError and friends when the broker is down
        raise SwitchboardError(f"the job queue is unavailable ({type(error).__name__}); try again", 503) from None


def services() -> Services:
    return current_app.extensions["switchboard"]
