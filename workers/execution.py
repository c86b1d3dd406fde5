"""One job's run in this worker: the job, what the worker holds for every
job (RunContext), its model's registry entry and backend, its abort and when
it started. Built once, by workers/generate.py, and passed down to what runs
the job (as rq passes `perform_job(job, queue, execution)`, and as the web
process's JobRun holds a request's job)."""
from __future__ import annotations

from dataclasses import dataclass

from catalog.registry import ModelEntry
from protocol.contract import Job
from workers.model_output import TextGenerator
from workers.backends.base import Backend
from workers.cancel import Cancel
from workers.context import RunContext
from workers.secrets_guard import JobGuard


@dataclass(frozen=True)
class Execution:
    job: Job
    ctx: RunContext
    entry: ModelEntry
    backend: Backend
    aborted: Cancel
    started: int  # time.perf_counter_ns() when it started
    guard: JobGuard | None = None  # what leaves for its model, scanned; its reply, restored

    def outbound(self, job: Job) -> Job:
        """`job` as its model may get it (the guard's scan: redacted, or refused)."""
        return job if self.guard is None else self.guard.outbound(job)

    def restored(self, pieces: TextGenerator) -> TextGenerator:
        """The reply's pieces with the person's redacted values back."""
        return pieces if self.guard is None else self.guard.restored(pieces)
