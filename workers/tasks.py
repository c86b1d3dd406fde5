"""The Celery task: a thin wrapper that validates the job and calls the runner.

Each worker process builds its run context (Redis, registry, backends, abort
listener) on its first job, after any fork.
"""
from __future__ import annotations

import logging
import os
import socket
from functools import lru_cache

from celery.signals import worker_process_init, worker_ready
from pydantic import ValidationError

from catalog.registry import load_registry
from protocol import keys
from protocol.commands import publish_event
from protocol.connection import redis_client
from protocol.contract import ErrorEvent, Job
from protocol.queue import RUN_JOB_TASK
from queue_config import app
from settings import settings_from_environment
from workers.abort_watch import AbortWatch
from workers.heartbeat import Heartbeat
from workers.instances import BackendInstances
from workers.runner import RunContext, run_job

log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def _context(pid: int) -> RunContext:
    settings = settings_from_environment()
    keys.configure(settings.redis_url, settings.record_seconds)
    redis = redis_client(settings.redis_url, "switchboard-worker", settings.redis_connections)
    worker_id = f"{socket.gethostname()}:{pid}"
    return RunContext(
        redis=redis,
        backends=BackendInstances(load_registry(settings.models_path)),
        aborts=AbortWatch(redis),
        worker_id=worker_id,
        heartbeat=Heartbeat(redis, worker_id),
        max_job_seconds=settings.max_job_seconds,
        max_job_tokens=settings.max_job_tokens,
        loaded_marker_seconds=settings.loaded_marker_seconds,
    )


@app.task(name=RUN_JOB_TASK, ignore_result=True)
def run(payload: dict) -> str:
    ctx = _context(os.getpid())
    try:
        job = Job.model_validate(payload)
    except ValidationError as error:
        log.error("rejected a malformed job: %s", error)
        job_id = payload.get("id") if isinstance(payload, dict) else None
        if isinstance(job_id, str):
            publish_event(ctx.redis, job_id, ErrorEvent(message="malformed job", status=500))
        return "error"
    return run_job(job, ctx)


@worker_process_init.connect
def _warm_up(**_) -> None:
    """Build the run context at start-up, not on the first job: reading the
    registry describes every model. Prefork children get theirs after fork."""
    _context(os.getpid())


@worker_ready.connect
def _announce(sender=None, **_) -> None:
    """Publish this worker and its queues (for /readyz) from now on."""
    heartbeat = _context(os.getpid()).heartbeat
    heartbeat.queues = sorted(q.name for q in sender.task_consumer.queues)
    heartbeat.start()
