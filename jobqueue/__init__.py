"""The job queue: the one owner of a job's life in Redis. The web process and
the workers change a job only through the functions below, one per
transition, in the order a job lives them:

    web process                         worker
    submit   admitted and queued  ──>   take      started (running)
    abort    its client left      ──>   (the worker's abort watch hears it)
    withdraw its request ended          finish    its last events, its record
             without an answer                    says how it ended
                                        release   its person's slot is free

finish and withdraw each write what the job's end leaves in the operator's
records (usage, errors, metrics: endings.py), so a job's outcome has one
writer whichever process ends it.

Below them: admission.py (a person's rate, the pool's queue bound),
fairqueue.py (the order workers take jobs in: fair shares across people,
each job charged its work: charges.py; completions first, one-at-a-time
models handed to an idle worker, the tickets counted on their way),
wakeups.py (the one module that knows Celery: its messages wake worker
slots), affinity.py (which worker holds a prompt's prefix in its cache),
records.py (a job's state, heartbeat and abort mark), states.py,
endings.py (what a job's end, or a tool call's, leaves in the records),
deployments.py (which server of an upstream model a request goes to, and
each server's health: its verbs are exported below), and lua/ (one script
per transition). The processes import
this package only (import-linter's job-owner contract). Only redis-py, the
protocol package, the records (ledger/) and telemetry are imported here,
and Celery's app (queue_config) by wakeups.py alone.
"""
from __future__ import annotations

import time
from functools import partial
from typing import Callable

from redis import Redis
from redis.client import Pipeline

from jobqueue import admission, affinity, charges, deployments, endings, fairqueue, records, wakeups
from jobqueue.admission import Busy, Limits, Verdict
from jobqueue.deployments import Attempt, DeploymentState, Pick, Rest, Target
from jobqueue.endings import Ending
from jobqueue.fairqueue import Asker, Idle, Placement, Taken, Ticketing
from jobqueue.states import JobState
from jobqueue.wakeups import Wakeups
from ledger import usage
from protocol import keys
from protocol.contract import Job
from protocol.errors import SwitchboardError
from protocol.events import DoneEvent, ErrorEvent, FinishReason
from protocol.presence import batched, publish_event
from protocol.queue import completion_queue, is_direct_queue, ticket_queue

__all__ = ["Asker", "Attempt", "Busy", "DeploymentState", "Ending", "Idle", "JobState", "Limits", "Pick",
           "Placement", "Rest", "Taken", "Target", "Verdict", "Wakeups", "abort", "aborted",
           "admit_tool_call", "free_slot", "meter_mcp_method",
           "aborted_among", "all_deployments_resting", "deployment_failed", "deployment_gate", "deployment_probed",
           "deployment_started", "deployment_states", "estimate_charge", "expected_wait", "finish", "finish_and_take",
           "forget_lost_wakeups", "keep_alive", "leave_deployment_lines", "lost", "maintain", "mark_free",
           "pick_deployment", "queue_depth", "reject", "release", "release_deployment", "remember_cache", "running",
           "started", "status", "submit", "supersede", "take", "targets_of", "tool_call_ended", "unserved_pools",
           "wake", "wake_held", "withdraw"]


# --- the web process's side ----------------------------------------------------------
admit_tool_call = admission.admit_tool_call  # a tool call (gateway, server-side): the rates, a slot, the pool's list
tool_call_ended = endings.tool_call  # its metric and the person's tool use, whoever called
meter_mcp_method = admission.meter_mcp_method  # any other MCP method that reaches the servers: the rates only


def free_slot(redis: Redis, person: str, lease: str, wakeups: Wakeups, batch: Pipeline | None = None) -> None:
    """A tool call's slot is free (`batch`: the caller's commands, sent
    first): the person's jobs that waited on it are woken, a pool each."""
    for pool in fairqueue.finish(redis, person, lease, batch=batch):
        wakeups.send(pool, pool, "")


def submit(redis: Redis, job: Job, asker: Asker, limits: Limits, where: Placement, wakeups: Wakeups) -> None:
    """Admit the job (or raise Busy) and queue it in one round trip, with its
    wake-up (a Celery message: the ticket of fairqueue.py) sent beside it
    when jobs of its queue have lately needed one (a free slot is waiting:
    it then costs the job no round trip of its own); else, if none on its
    way will wake a slot for it, send one after. A worker's take starts it.
    If the wake-up cannot be sent, the job is withdrawn and a retryable 503
    raised, unless a worker has taken it meanwhile (then it needed none)."""
    queue = ticket_queue(where.pool, where.job_class)
    sending = wakeups.beside(queue, where.pool, job.id)
    ticketing = Ticketing.ASK if sending is None else Ticketing.SENT

    def queue_it(client: Redis | Pipeline) -> object:
        return fairqueue.push(client, job, asker, where, ticketing, if_admitted=True)
    _, send_another, needed = admission.admit(redis, job, asker.person, where.pool, limits, then=queue_it)
    wakeups.learn(queue, bool(needed))
    if send_another:  # none went beside it, or a slot took that one before the job was queued
        sending = partial(wakeups.send, queue, where.pool, job.id)
    _sent_or_withdrawn(redis, job, asker.person, where, sending)


def _sent_or_withdrawn(redis: Redis, job: Job, person: str, where: Placement,
                       sent: Callable[[], None] | None) -> None:
    if sent is None:
        return
    try:
        sent()
    except Exception as error:
        queue = ticket_queue(where.pool, where.job_class)
        taken = not fairqueue.remove(redis, where.pool, job.id)
        with batched(redis) as pipe:
            pipe.zrem(keys.tickets_key(queue), job.id)  # never sent: not on its way
            if not taken:
                admission.release(pipe, person, job.id, where.pool, job.web_id)
        if taken:  # a slot another ticket woke took it: it runs, and its client hears it as any other
            return
        raise SwitchboardError(f"the job queue is unavailable: {error}; try again", 503, retry_after=1) from error


def abort(redis: Redis, job_id: str) -> None:
    """Its client left: a waiting job is never started, a running one stops
    within a token."""
    records.send_abort(redis, job_id)


def started(redis: Redis, job_id: str) -> bool:
    """A worker took it (for a web process that has heard nothing yet)."""
    return records.job_taken(redis, job_id)


def lost(redis: Redis, job: Job) -> bool:
    """Its worker stopped beating before it finished; if so, its record says
    so from now on, and it is counted as lost (endings.lost)."""
    if not records.worker_lost(redis, job.id):
        return False
    with batched(redis) as pipe:
        records.record_state(pipe, job.id, status=JobState.FINISHED, reason=FinishReason.ERROR, error="worker lost")
        endings.lost(pipe, job)
    return True


def withdraw(redis: Redis, job: Job, pool: str, started: bool, final: DoneEvent | ErrorEvent | None
             ) -> FinishReason | None:
    """Its request ended and its web process lets go of it, `final` the last
    event it relayed. Unless it ended, it is aborted. Unless its worker
    answered it (a DoneEvent), in one round trip: a job still waiting leaves
    the queue, recorded as expired or aborted (returned); its queue place and
    its person's slot are free; its outcome is recorded (endings.withdrawn)."""
    if final is None:
        abort(redis, job.id)
    if isinstance(final, DoneEvent):
        return None
    unrun = None
    if not started and fairqueue.remove(redis, pool, job.id):
        unrun = FinishReason.EXPIRED if job.expires_at is not None and time.time() > job.expires_at \
            else FinishReason.ABORTED
    with batched(redis) as pipe:
        if unrun is not None:
            records.record_state(pipe, job.id, status=JobState.FINISHED, reason=unrun)
        admission.release(pipe, job.usage_of, job.id, pool, job.web_id)  # (its person: job.usage_of)
        endings.withdrawn(pipe, job, unrun, final)
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


def finish(redis: Redis | Pipeline, job: Job, ending: Ending, pool: str) -> None:
    """Its worker ended it: its last events and its outcome in the records
    (endings.finished), then its record says how it ended and its heartbeat
    ends (in that order: see records.worker_lost); an answer's cost beyond
    its estimate becomes its person's debt in `pool`."""
    with batched(redis) as pipe:
        endings.finished(pipe, job, ending)
        _finished(pipe, job.id, ending.reason, **ending.record)
        if isinstance(ending.final, DoneEvent):
            charges.settle(pipe, pool, job, ending.final.usage)


def reject(redis: Redis | Pipeline, taken: Taken) -> None:
    """A taken (so started) job whose payload is not a job: its client hears
    why (where its reply channel could be read), and its record ends."""
    with batched(redis) as pipe:
        if taken.reply_channel:  # else there is nowhere to say it; its web process times out waiting
            publish_event(pipe, taken.reply_channel, ErrorEvent(message="malformed job", status=500))
        _finished(pipe, taken.job_id, FinishReason.ERROR, error="malformed job")


def _finished(pipe: Pipeline, job_id: str, reason: str, **fields: str | int | float) -> None:
    records.record_state(pipe, job_id, status=JobState.FINISHED, reason=reason, **fields)
    records.end_heartbeat(pipe, job_id)
    pipe.zrem(keys.RUNNING_JOBS, job_id)


def release(redis: Redis, taken: Taken) -> list[str]:
    """Its person's slot is free. Returns the pools where that person's jobs
    wait on their limit (each needs a ticket)."""
    return fairqueue.finish(redis, taken.person, taken.lease)


finish_and_take = fairqueue.finish_and_take  # release, then take the next job: one round trip
mark_free = fairqueue.mark_free  # this worker's one-at-a-time models that are idle
wake = wakeups.wake  # a worker wakes a pool (a person's jobs that waited on their limit) or another worker


def forget_lost_wakeups(redis: Redis, consumed: list[str], sent_before: float) -> None:
    """Said by a worker with a free slot, of the Celery queues it consumes:
    wake-ups sent before then that no slot took were lost."""
    fairqueue.forget_lost_tickets(redis, [queue for queue in consumed if not is_direct_queue(queue)], sent_before)


def unserved_pools(pools: list[str], consumed: set[str]) -> list[str]:
    """The pools no live worker consumes a queue of (`consumed`: the queues
    the workers announce)."""
    return sorted(pool for pool in pools if pool not in consumed and completion_queue(pool) not in consumed)


estimate_charge = charges.estimate  # what a job will cost its person's share (set it as job.charge)
wake_held = deployments.wake_held  # pools whose jobs held for full deployments may run: wake them


def maintain(redis: Redis) -> list[str]:
    """The cluster's upkeep of what jobs leave, offered by every worker's
    heartbeat and done by one process an hour: old usage days folded
    (ledger.usage.fold_old_days; the days returned)."""
    return usage.fold_old_days(redis)


def remember_cache(redis: Redis, model: str, taken: Taken, worker_id: str) -> None:
    """This worker's prompt cache now holds the job's prefix (its cache key's,
    or its session's and person's): their next job comes here while it is idle."""
    affinity.remember_affinity(redis, model, affinity.held_by_worker(taken.job, taken.person), worker_id)


# --- an upstream model's deployments (deployments.py): which server a request goes to --------------------
targets_of = deployments.targets_of  # the registry's deployments as the router sees them
deployment_gate = deployments.gate  # a job's hold while all its model's deployments are full (Placement)
pick_deployment = deployments.pick  # the deployment for an attempt, in flight there from now on
deployment_started = deployments.started  # its first token came: its time to it, the session's affinity
deployment_failed = deployments.failed  # it failed the attempt: it rests (seconds returned)
release_deployment = deployments.release  # the attempt ended: its place there is free
leave_deployment_lines = deployments.leave_lines  # an attempt stops waiting for a full deployment
deployment_probed = deployments.probed  # a resting deployment answered a probe, or did not
all_deployments_resting = deployments.all_resting  # every deployment of the model rests (a fallback's cue)
deployment_states = deployments.states  # each deployment's health and load (the console)
