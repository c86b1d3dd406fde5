"""One job's run in this worker: the job, what the worker holds for every
job (RunContext), its model's registry entry and backend, its abort and when
it started. Built once, by workers/generate.py, and passed down to what runs
the job (as rq passes `perform_job(job, queue, execution)`, and as the web
process's JobRun holds a request's job)."""
from __future__ import annotations

from dataclasses import dataclass

from catalog.registry import ModelEntry
from protocol.contract import Job
from workers.backends.base import Backend
from workers.cancel import Cancel
from workers.context import RunContext


@dataclass(frozen=True)
class Execution:
    job: Job
    ctx: RunContext
    entry: ModelEntry
    backend: Backend
    aborted: Cancel
    started: int  # time.perf_counter_ns() when it started
