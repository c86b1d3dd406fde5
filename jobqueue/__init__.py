"""The job queue: the one owner of a job's life in Redis. The web process and
the workers change a job only through the functions below, one per
transition, in the order a job lives them:

    web process                         worker
    submit   admitted and queued  ──>   take      started (running)
    abort    its client left      ──>   (the worker's abort watch hears it)
    withdraw its request ended          finish    its record says how it ended
                                        release   its person's slot is free

Below them: admission.py (a person's rate, the pool's queue bound),
fairqueue.py (the order workers take jobs in: fair shares across people,
each job charged its work: charges.py; completions first, one-at-a-time models handed to an idle worker, prompt
cache affinity, the tickets counted on their way), records.py (a job's
state, heartbeat and abort mark), states.py, deployments.py (which server
of an upstream model a request goes to, and each server's health), and lua/
(one script per transition). Only redis-py and the protocol package are imported here.
"""
from __future__ import annotations

import time
from functools import partial
from typing import Callable, Protocol

from redis import Redis
from redis.client import Pipeline

from jobqueue import admission, charges, deployments, fairqueue, records
from jobqueue.admission import Busy, Limits, Verdict
from jobqueue.fairqueue import Asker, Idle, Placement, Taken, Ticketing
from jobqueue.states import JobState
from protocol import keys
from protocol.contract import FinishReason, Job
from protocol.errors import SwitchboardError
from protocol.presence import batched
from protocol.queue import ticket_queue

__all__ = ["Asker", "Busy", "Idle", "JobState", "Limits", "Placement", "SendTicket", "Taken", "TicketSender", "Verdict",
           "abort", "aborted", "aborted_among", "expected_wait", "finish", "finish_and_take", "forget_lost_tickets",
           "keep_alive", "lost", "mark_free", "queue_depth", "release", "remember_cache", "running", "settle",
           "started", "status", "submit", "supersede", "take", "wake_held", "withdraw"]


# --- the web process's side ----------------------------------------------------------
SendTicket = Callable[[str, str, str], None]  # Celery queue, pool, the ticket's id (its job's)


class TicketSender(Protocol):
    """How the web process has tickets sent (app/tickets.py)."""

    def send(self, queue: str, pool: str, job_id: str) -> None:
        """Send it now; raise if it could not be."""

    def beside(self, queue: str, pool: str, job_id: str) -> Callable[[], None] | None:
        """Start sending it while the caller's next Redis call runs, if the
        queue's jobs have lately needed one; then what waits for it (raising
        if it could not be sent), else None."""

    def learn(self, queue: str, needed: bool) -> None:
        """Whether a job of the queue needed a ticket."""


def submit(redis: Redis, job: Job, asker: Asker, limits: Limits, where: Placement, tickets: TicketSender) -> None:
    """Admit the job (or raise Busy) and queue it in one round trip, with its
    ticket sent beside it when jobs of its queue have lately needed one (a
    free slot is waiting: the ticket then costs the job no round trip of
    its own); else, if no ticket on its way will wake a slot for it, send
    one after. A worker's take starts it. If the ticket cannot be sent, the
    job is withdrawn and a 503 raised."""
    queue = ticket_queue(where.pool, where.job_class)
    sending = tickets.beside(queue, where.pool, job.id)
    ticketing = Ticketing.ASK if sending is None else Ticketing.SENT

    def queue_it(client: Redis | Pipeline) -> object:
        return fairqueue.push(client, job, asker, where, ticketing, if_admitted=True)
    _, send_another, needed = admission.admit(redis, job, asker.person, where.pool, limits, then=queue_it)
    tickets.learn(queue, bool(needed))
    if send_another:  # none went beside it, or a slot took that one before the job was queued
        sending = partial(tickets.send, queue, where.pool, job.id)
    _sent_or_withdrawn(redis, job, asker.person, where, sending)


def _sent_or_withdrawn(redis: Redis, job: Job, person: str, where: Placement,
                       sent: Callable[[], None] | None) -> None:
    if sent is None:
        return
    try:
        sent()
    except Exception as error:
        queue = ticket_queue(where.pool, where.job_class)
        with batched(redis) as pipe:
            fairqueue.remove(redis, where.pool, job.id)
            admission.release(pipe, person, job.id, where.pool, job.web_id)
            pipe.zrem(keys.tickets_key(queue), job.id)
        raise SwitchboardError(f"the job queue is unavailable: {error}", 503) from error


def abort(redis: Redis, job_id: str) -> None:
    """Its client left: a waiting job is never started, a running one stops
    within a token."""
    records.send_abort(redis, job_id)


def started(redis: Redis, job_id: str) -> bool:
    """A worker took it (for a web process that has heard nothing yet)."""
    return records.job_taken(redis, job_id)


def lost(redis: Redis, job_id: str) -> bool:
    """Its worker stopped beating before it finished; if so, its record says
    so from now on."""
    if not records.worker_lost(redis, job_id):
        return False
    records.record_state(redis, job_id, status=JobState.FINISHED, reason=FinishReason.ERROR, error="worker lost")
    return True


def withdraw(redis: Redis, pipe: Pipeline, job: Job, person: str, pool: str, started: bool) -> FinishReason | None:
    """Its request ended without its worker finishing it (the client left,
    the stream failed, the server shuts down): a job still waiting leaves the
    queue, recorded as expired or aborted (returned); its queue place and its
    person's slot are free. The writes go on `pipe`, for the caller to send
    with its own."""
    unrun = None
    if not started and fairqueue.remove(redis, pool, job.id):
        unrun = FinishReason.EXPIRED if job.expires_at is not None and time.time() > job.expires_at \
            else FinishReason.ABORTED
        records.record_state(pipe, job.id, status=JobState.FINISHED, reason=unrun)
    admission.release(pipe, person, job.id, pool, job.web_id)
    return unrun


def supersede(redis: Redis, client: str, model: str, job: Job) -> str | None:
    """The client's newer code completion aborts its previous one (returned)."""
    return records.supersede(redis, client, model, job)


def queue_depth(redis: Redis, pool: str) -> tuple[int, dict[str, int]]:
    """The pool's waiting jobs: how many, and how many per person."""
    return fairqueue.depth(redis, pool), fairqueue.waiting_by_person(redis, pool)


def expected_wait(redis: Redis, pool: str) -> float:
    """Seconds a job queued now would wait, at the pool's recent rate (0 if none waits)."""
    waiting = fairqueue.depth(redis, pool)
    return admission.retry_after_seconds(redis, pool, waiting) if waiting else 0


running = records.running  # the jobs workers run now (the console's live view)


def status(redis: Redis, job_id: str) -> dict[str, str]:
    """Its record (empty while it waits): its state, who ran it, when, why it ended."""
    return records.job_state(redis, job_id)


# --- the worker's side ---------------------------------------------------------------
take = fairqueue.take  # the fairest job this worker may run, started in the same round trip


def aborted(redis: Redis, job_id: str) -> bool:
    return records.is_aborted(redis, job_id)


def aborted_among(redis: Redis, job_ids: list[str]) -> set[str]:
    """Those of the jobs whose client left (for a listener that missed the broadcast)."""
    return records.aborted_among(redis, job_ids)


def keep_alive(redis: Redis, job_ids: list[str], worker: dict | None) -> None:
    """The worker's heartbeat: its running jobs stay alive (and it is present)."""
    records.beat(redis, job_ids, worker)


def finish(redis: Redis | Pipeline, job_id: str, reason: str, **fields: str | int | float) -> None:
    """Its record says how it ended, then its heartbeat ends (in that order:
    see records.worker_lost). The caller publishes its final event first."""
    with batched(redis) as pipe:
        records.record_state(pipe, job_id, status=JobState.FINISHED, reason=reason, **fields)
        records.end_heartbeat(pipe, job_id)
        pipe.zrem(keys.RUNNING_JOBS, job_id)


def release(redis: Redis, taken: Taken) -> list[str]:
    """Its person's slot is free. Returns the pools where that person's jobs
    wait on their limit (each needs a ticket)."""
    return fairqueue.finish(redis, taken.person, taken.lease)


finish_and_take = fairqueue.finish_and_take  # release, then take the next job: one round trip
mark_free = fairqueue.mark_free  # this worker's one-at-a-time models that are idle
forget_lost_tickets = fairqueue.forget_lost_tickets  # said by a worker with a free slot
wake_held = deployments.wake_held  # pools whose jobs held for full deployments may run: tickets for them
settle = charges.settle  # a job that ran: what it cost beyond its estimate, its person's debt


def remember_cache(redis: Redis, model: str, taken: Taken, worker_id: str) -> None:
    """This worker's prompt cache now holds the job's prefix (its cache key's,
    or its session's and person's): their next job comes here while it is idle."""
    fairqueue.remember_affinity(redis, model, fairqueue.held_by_worker(taken.job, taken.person), worker_id)
