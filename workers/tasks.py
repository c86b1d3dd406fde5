"""The Celery task: a ticket lets a slot take jobs from the fair queue
(workers/slots.py); each job is validated and run by the runner.

Each worker process builds its run context (Redis, registry, backends, abort
listener) on its first job, after any fork.
"""
from __future__ import annotations

import logging
import os
import socket
from functools import lru_cache

from celery.backends.base import DisabledBackend
from celery.signals import worker_process_init, worker_ready, worker_shutting_down

import jobqueue
from catalog.registry import load_registry
from protocol import keys
from protocol.connection import RedisTarget, redis_client
from protocol.queue import TAKE_TASK, direct_queue
from queue_config import app
from settings import settings_from_environment
from settings.collector import tune_garbage_collector
from telemetry import tracing
from workers.abort_watch import AbortWatch
from workers.context import RunContext
from workers.secrets_guard import Guards
from workers.heartbeat import Heartbeat
from workers.model_backends import ModelBackends
from workers.runner import run_job
from workers.slots import Slots
from workers.toolbox import Toolbox

log = logging.getLogger(__name__)
# Celery logs two INFO lines per task ("received", "succeeded in"), a
# noticeable share of an upstream worker's CPU with a task per job. Kept for
# SWITCHBOARD_LOG_TASKS=1; failures are logged either way.
if not settings_from_environment().log_tasks:
    for _name in ("celery.app.trace", "celery.worker.strategy"):
        logging.getLogger(_name).setLevel(logging.WARNING)


@lru_cache(maxsize=1)
def _context(pid: int) -> RunContext:
    settings = settings_from_environment()
    keys.configure(settings.redis_url, settings.record_seconds)
    tracing.setup("switchboard-worker")  # after any fork: the exporter's thread is this process's
    redis = redis_client(RedisTarget.of(settings), "switchboard-worker", settings.redis_connections)
    worker_id = f"{socket.gethostname()}:{pid}"
    registry = load_registry(settings.models_path)
    return RunContext(
        redis=redis,
        backends=ModelBackends(registry, redis, worker_id),
        slots=Slots(redis, worker_id, registry, jobqueue.wake),
        aborts=AbortWatch(redis),
        toolbox=Toolbox(redis, registry.servers, worker_id),
        guards=Guards.of(redis, settings),
        worker_id=worker_id,
        heartbeat=Heartbeat(redis, worker_id),
        max_job_seconds=settings.max_job_seconds,
        max_job_tokens=settings.max_job_tokens,
        loaded_marker_seconds=settings.loaded_marker_seconds,
        stream_interval_seconds=settings.stream_interval_seconds,
        whole_reply_interval_seconds=min(60.0, settings.event_timeout_seconds / 4),
    )


@app.task(name=TAKE_TASK, ignore_result=True)
def take(ticket: dict) -> str:
    """Run the fairest job this slot may run, then the next while any waits."""
    ctx = _context(os.getpid())
    if not isinstance(ticket, dict) or not isinstance(ticket.get("pool"), str):
        log.error("dropped a malformed ticket: %r", ticket)
        return "error"
    pool = ticket["pool"]
    reason = "none"
    if ctx.slots.stopping:  # a warm shutdown: running jobs finish, nothing new starts
        return reason
    taken = ctx.slots.take(pool, str(ticket.get("job") or ""), str(ticket.get("queue") or ""))
    while taken.job is not None or taken.malformed:
        # The finished job's writes, its slot's release and the next take: one round trip.
        batch = ctx.redis.pipeline(transaction=False)
        if taken.malformed:
            log.error("rejected a malformed job %s: %s", taken.job_id, taken.malformed)
            jobqueue.reject(batch, taken)
        else:
            try:
                reason = run_job(taken.job, ctx, taken.taken_at, batch)
            except BaseException:
                ctx.slots.finish(pool, taken)
                raise
        taken = ctx.slots.finish(pool, taken, take_next=not ctx.slots.stopping, batch=batch)
    return reason


@worker_process_init.connect
def _warm_up(**_) -> None:
    """Build the run context at start-up, not on the first job: reading the
    registry describes every model. Prefork children get theirs after fork."""
    _context(os.getpid())
    tune_garbage_collector(settings_from_environment().gc_threshold)


@worker_ready.connect
def _announce(sender=None, **_) -> None:
    """Publish this worker and its queues (for /readyz) from now on."""
    ctx = _context(os.getpid())
    queues = sorted(q.name for q in sender.task_consumer.queues)
    if type(sender.pool).__module__ != "celery.concurrency.prefork":  # this process runs its jobs
        ctx.slots.start_tracking({q.removesuffix("-completion") for q in queues})
        sender.add_task_queue(direct_queue(ctx.worker_id))
        ctx.heartbeat.on_beat = ctx.slots.refresh
        ctx.heartbeat.counts_wakeups = True  # its slots run here: it knows when one is free
    ctx.heartbeat.queues = queues
    ctx.heartbeat.slots = int(getattr(getattr(sender, "controller", None), "concurrency", 0) or 0)
    ctx.slots.check_threads(ctx.heartbeat.slots)
    ctx.heartbeat.start()
    _share_result_backend(sender.app)
    tune_garbage_collector(settings_from_environment().gc_threshold)  # started: what lives now, lives on


def _share_result_backend(celery) -> None:
    """Celery keeps the app's result backend in a thread-local, which
    gevent makes greenlet-local: each task's new greenlet built a backend of
    its own (0.05 ms a job) only to mark a result it never stores
    (ignore_result). With results disabled there is nothing to share
    unsafely, so the task gets one for the process."""
    if isinstance(celery.backend, DisabledBackend):
        celery.tasks[TAKE_TASK].backend = celery.backend


@worker_shutting_down.connect
def _stop_taking(**_) -> None:
    """A warm shutdown lets running jobs finish; their slots take no more."""
    _context(os.getpid()).slots.stopping = True
