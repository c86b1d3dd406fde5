"""A model's fallbacks (registry `fallbacks`, opt-in): the model a job runs
on instead of the one asked for. Before a job is queued, when every
deployment of its model rests after failures, or its queue's wait would
exceed `fallback_after` seconds; after, when its first event says no server
of its model could serve it (nothing has reached the client yet). The reply
then names the model that answered: its `model` field, the
X-Switchboard-Model header and the request log."""
from __future__ import annotations

from typing import Iterator

from flask import g

import jobqueue
from app.jobs import JobRun, start_job
from app.services import Services, services
from catalog.deployments import Deployments
from catalog.registry import ModelEntry
from protocol.contract import Job, new_job_id
from protocol.events import Event
from protocol.errors import SwitchboardError

# A job failing with one of these before its first token: its model's servers could not serve it
# (or its queue is full).
UNSERVED_STATUSES = (502, 503, 504)


def start_on_a_model(job: Job, entry: ModelEntry, stream: bool,
                     watch_client: bool = True) -> tuple[JobRun, Iterator[Event]]:
    """app.jobs.start_job on the job's model or, when that cannot serve it,
    its fallbacks in order (the run's job names the model that answers)."""
    shared, asked, tried = services(), entry.name, set()
    entry = _entry_to_run(shared, entry, job)
    while True:
        tried.add(entry.name)
        try:
            run, events = start_job(job.model_copy(update={"model": entry.name}), entry, stream, watch_client)
            break
        except SwitchboardError as error:
            entry = _fallback_after(shared, entry, job, error, tried)
            if entry is None:
                raise
        job = job.model_copy(update={"id": new_job_id()})
    if entry.name != asked:
        g.log_fields = g.get("log_fields", {}) | {"answered_by": entry.name}  # for the request log
    return run, events


def _entry_to_run(shared: Services, entry: ModelEntry, job: Job) -> ModelEntry:
    """The model a new job runs on: its own, unless it must fall back (and
    a fallback can take it)."""
    if not entry.fallbacks or (_up(shared, entry) and not _waits_too_long(shared, entry)):
        return entry
    return next((e for e in _fallbacks(shared, entry, job) if _up(shared, e)), entry)


def _fallback_after(shared: Services, entry: ModelEntry, job: Job, error: SwitchboardError,
                    tried: set[str]) -> ModelEntry | None:
    """The model to run the job on after it failed before its first token."""
    if error.status not in UNSERVED_STATUSES:
        return None
    return next((e for e in _fallbacks(shared, entry, job) if e.name not in tried), None)


def _fallbacks(shared: Services, entry: ModelEntry, job: Job) -> list[ModelEntry]:
    """Those that can serve the job as it was translated for the model asked
    for: one without vision would drop its images, one without "insert" its
    suffix."""
    needs = _needs(job)
    return [e for e in (shared.registry.get(name) for name in entry.fallbacks) if needs <= set(e.capabilities)]


def _needs(job: Job) -> set[str]:
    prompt, needs = job.prompt, set()
    if any(m.images for m in job.messages) or (prompt is not None and prompt.images):
        needs.add("vision")
    if prompt is not None and prompt.suffix:
        needs.add("insert")
    if job.tools:
        needs.add("tools")
    if job.think not in (None, False):
        needs.add("thinking")
    return needs


def _up(shared: Services, entry: ModelEntry) -> bool:
    """Not every deployment of it rests (an upstream model whose requests are
    routed; any other model counts as up). Its rest over, a deployment is up
    again: the job tries it, and fails over to the fallback if it still fails."""
    settings = entry.settings
    if not isinstance(settings, Deployments) or not settings.routed:
        return True
    return not jobqueue.all_deployments_resting(shared.redis, entry.name, jobqueue.targets_of(settings.deployments))


def _waits_too_long(shared: Services, entry: ModelEntry) -> bool:
    if entry.fallback_after is None:
        return False
    return jobqueue.expected_wait(shared.redis, entry.pool) > entry.fallback_after
