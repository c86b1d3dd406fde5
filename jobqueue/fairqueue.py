"""The waiting room of each pool: jobs wait in Redis, and a worker with a free
slot takes the fairest one it may run. Celery carries only *tickets* ("a
slot may take a job of pool P"), one per job: which job a ticket runs is
decided when a worker takes it, so the order can be fair however many web
processes queue jobs and however many workers take them.

Order: code completions before chat (editors abandon them on every
keystroke), and within each class start-time fair queueing across people: a
person's job is tagged with the pool's virtual time or their previous job's
tag plus 1/weight, whichever is later, and the lowest tag goes first. A
person with 200 jobs queued is interleaved with someone who sends one; with
the "fifo" policy (kept for comparison) tags are arrival order.

A job is skipped, not refused, while its person runs as many jobs as their
concurrency limit allows (see `finish`: their next job is taken when one
ends). Models that run one job at a time per worker (llama.cpp: one context
per process) are taken only by a worker whose copy is idle; a worker that
cannot run one hands it to a worker that can (a direct ticket), preferring
the worker that ran the same person's previous job on that model (its prompt
cache holds their prefix; jobs naming a cache key follow that key instead
of their person), and never waiting for a busy worker for the
cache's sake.

A job of an upstream model whose deployments are all bounded
(`max_concurrent`) is skipped while every one is full (jobqueue/deployments.py):
it waits here, in its turn, rather than on a worker.

Jobs whose client left, whose web process died or whose time is up are
dropped by whoever meets them first.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from enum import Enum

from pydantic import ValidationError
from redis import Redis
from redis.client import Pipeline

from jobqueue import charges
from jobqueue import affinity
from jobqueue.scripts import execute, queue_script, run_script as _run
from jobqueue.states import JobState
from protocol import keys
from protocol.contract import Job
from protocol.presence import ALIVE_TTL_SECONDS
from protocol.queue import is_direct_queue, ticket_queue

CLASSES = ("completion", "chat")  # served in this order
# Background work (Job.background: a call nobody watches) waits in its class's set this far behind its fair
# tag, so every interactive job goes first, for a worker of any release; in its own order among itself.
BACKGROUND_OFFSET = 2.0 ** 40
# A background job that waited this long is served before chat (none starves).
BACKGROUND_PATIENCE = 30.0
# A person served on a pool this recently counts as at work between turns: on a bounded upstream, another
# person holding a place leaves them the last one.
AT_WORK_SECONDS = 30.0
# How long a job handed to a particular worker is held for it.
HOLD_SECONDS = 3.0
# A worker's free mark counts this long after its last refresh (its heartbeat).
FREE_FRESH_SECONDS = ALIVE_TTL_SECONDS * 3


@dataclass(frozen=True)
class Placement:
    """Where a job waits, and what it needs."""
    pool: str
    job_class: str = "chat"  # or "completion", served first
    policy: str = "fair"  # or "fifo"
    serial: bool = False  # its model runs one job at a time per worker
    deployments: str = ""  # its model's bounded deployments (jobqueue.deployments.gate): it waits while all are full


@dataclass(frozen=True)
class Asker:
    """Who asked for a job, and their terms: how many of their jobs may run
    at once, and their share of the queue (a job costs them its work, in
    thousands of tokens, over their weight: jobqueue/charges.py)."""
    person: str
    limit: int
    weight: float = 1.0


class Ticketing(Enum):
    """What queueing a job does about its ticket (fair_push.lua)."""
    NONE = "none"  # nothing: no ticket is counted (a job queued by hand, as tests do)
    ASK = "ask"  # the result says whether the caller must send one
    SENT = "sent"  # one was sent beside the call: counted on its way; the result says if another is needed


def push(redis: Redis | Pipeline, job: Job, asker: Asker, where: Placement, tickets: Ticketing = Ticketing.NONE,
         if_admitted: bool = False) -> object:
    """Queue the job. Unless `tickets` is NONE, the result is (its member,
    whether the caller must send a ticket for it, whether it needed one:
    fair_push.lua, while fewer tickets are on their way than jobs wait). On
    a pipeline, queued by SHA (the caller sends it with scripts.execute). With
    `if_admitted`, only if admission recorded the job (jobqueue.admission:
    sent in the same round trip as its admission)."""
    pool, job_class = where.pool, where.job_class
    member = keys.lease_member(job.web_id, job.id)
    job.charge = job.charge or charges.estimate(job)  # (its worker settles it: charges.settle)
    fields = {"limit": asker.limit, "lease": member, "model": job.model,
              "serial": "1" if where.serial else "0", "expires": repr(job.expires_at), "web": job.web_id,
              "enqueued": repr(job.enqueued_at), "affinity": affinity.affinity_of(job, asker.person),
              "deployments": where.deployments, "session": job.session}
    named = {"job_id": job.id, "person": asker.person, "weight": asker.weight, "cost": job.charge,
             "policy": where.policy, "behind": BACKGROUND_OFFSET if job.background else 0,
             "member": member, "fields": {name: str(value) for name, value in fields.items()}, "now": time.time(),
             "reply": charges.reply_guess(job)}
    args = [json.dumps(named), job.model_dump_json()]
    script_keys = [keys.fair_ready_key(pool, job_class), keys.fair_job_key(job.id), keys.fair_state_key(pool),
                   keys.fair_waiting_key(pool),
                   keys.tickets_key(ticket_queue(pool, job_class)) if tickets != Ticketing.NONE else "-",
                   keys.queued_key(pool) if if_admitted else "-",
                   keys.early_ticket_key(job.id) if tickets == Ticketing.SENT else "-",
                   keys.fair_background_since_key(pool) if job.background else "-",
                   *charges.replies_keys(pool, job, asker.person)]
    return (queue_script if isinstance(redis, Pipeline) else _run)(redis, "fair_push", script_keys, args)


def remove(redis: Redis, pool: str, job_id: str) -> bool:
    """Take a job out of the queue unrun (its client left, its time is up).
    False if it is not waiting (a worker took it)."""
    return bool(_run(redis, "fair_remove", [keys.fair_job_key(job_id), keys.fair_waiting_key(pool)], []))


@dataclass(frozen=True)
class Taken:
    """A job taken is started (see take)."""
    job: Job | None  # None: nothing this worker may run now (or a malformed payload)
    person: str = ""
    lease: str = ""
    forward_to: str = ""  # a worker to send a direct ticket for forward_job
    forward_job: str = ""
    job_id: str = ""
    malformed: str = ""  # why the taken payload is not a job
    reply_channel: str = ""  # a malformed job's, if it could be read: where to say so
    taken_at: float = 0.0  # time.monotonic() before the take was sent (workers.abort_watch)


# A worker's one-at-a-time models with a free sequence: (free, sequences, the busy ones' people and how many,
# the spare ones among the sequences: kept for a person with none).
Idle = dict[str, tuple[int, int, dict[str, int], int]]


def take(redis: Redis, pool: str, worker_id: str, want: str = "", idle_serial: Idle | None = None,
         ticket_from: str = "") -> Taken:
    """The fairest job this worker may run (`want` first, if it may and its
    ticket was sent to this worker alone: see _take_call), counted
    as running for its person and started in the same round trip: its count
    in the pool's drain rate, its first heartbeat and its state. A job whose
    client left, whose web process died or whose time is up is dropped, never
    taken. `idle_serial`: the one-at-a-time models whose copy in this worker
    has a free sequence, with how many of how many and whose the busy ones
    are (None: the worker does not track them, and takes any job).
    Background work not past its patience, and a person holding one, leave
    the spare ones free (at least one, unless all are free, for background
    work and for a person holding one while others are at work).
    `ticket_from`: the Celery queue of the ticket that woke the slot (its id
    is `want`): that ticket is no longer on its way."""
    taken_at = time.monotonic()
    return _taken(_run(redis, "fair_take", *_take_call(pool, worker_id, want, idle_serial, ticket_from)), taken_at)


def _take_call(pool: str, worker_id: str, want: str, idle_serial: Idle | None,
               ticket_from: str = "") -> tuple[list[str], list]:
    """fair_take.lua's keys and arguments."""
    now = time.time()
    # A ticket of the pool's queue takes the fairest job, not its own: a flood's tickets, queued ahead of a
    # colleague's job, would otherwise take the flood's jobs first. One sent to this worker alone (handed
    # to it: its model's copy is idle here, or holds the person's cache) takes its job first.
    first = bool(want) and (not ticket_from or is_direct_queue(ticket_from))
    named = {"worker": worker_id, "now": repr(now), "want": {"job": want, "first": first}, "idle_serial": idle_serial,
             "fresh_after": now - FREE_FRESH_SECONDS, "hold": HOLD_SECONDS, "pool": pool,
             "room": {"patience": BACKGROUND_PATIENCE, "offset": BACKGROUND_OFFSET, "recent": AT_WORK_SECONDS},
             "ttl": {"record": keys.RECORD_TTL_SECONDS, "alive": ALIVE_TTL_SECONDS}, "running": JobState.RUNNING}
    args = [keys.lua_key_templates(), json.dumps(named)]
    return [*(keys.fair_ready_key(pool, k) for k in CLASSES), keys.fair_state_key(pool),
            keys.fair_waiting_key(pool), keys.queued_key(pool), keys.drained_key(pool, int(now // 10)),
            keys.tickets_key(ticket_from) if ticket_from else "-", keys.fair_background_since_key(pool)], args


def _taken(result: list, taken_at: float) -> Taken:
    found, payload, person, lease, job_id, forward_to, forward_job, *charged = result
    taken = Taken(None, _text(person), _text(lease), _text(forward_to), _text(forward_job), _text(job_id),
                  taken_at=taken_at)
    if found != b"job":
        return taken
    try:
        job = Job.model_validate_json(payload)
    except ValidationError as error:
        return replace(taken, malformed=str(error), reply_channel=_reply_channel(payload))
    if charged and charged[0]:  # (what fair_push.lua charged it, its reply's length learned: charges.settle)
        job.charge = float(charged[0])
    return replace(taken, job=job)


def _reply_channel(payload: bytes) -> str:
    try:
        channel = json.loads(payload).get("reply_channel")
    except (ValueError, AttributeError):
        return ""
    return channel if isinstance(channel, str) else ""


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def finish(redis: Redis, person: str, lease: str, batch: Pipeline | None = None) -> list[str]:
    """A taken job ended: its person's slot is free. Returns the pools where
    that person's jobs were skipped for their limit (each needs a ticket).
    `batch`: a pipeline holding the caller's commands to send first."""
    pipe = redis.pipeline(transaction=False) if batch is None else batch
    _queue_finish(pipe, person, lease)
    *_, blocked = pipe.execute()
    return sorted(_text(pool) for pool in blocked)


def finish_and_take(redis: Redis, person: str, lease: str, pool: str, worker_id: str,
                    batch: Pipeline | None = None) -> tuple[list[str], Taken]:
    """`finish`, then `take` for a worker that does not track one-at-a-time
    models, in one round trip: the slot of a job that ended takes the next.
    `batch`: a pipeline holding the caller's commands to send first (what
    the finished job leaves in Redis: runner.run_job)."""
    pipe = redis.pipeline(transaction=False) if batch is None else batch
    _queue_finish(pipe, person, lease)
    queue_script(pipe, "fair_take", *_take_call(pool, worker_id, "", None))
    taken_at = time.monotonic()
    *before, _, blocked, result = execute(pipe, redis)
    failed = next((r for r in (*before, blocked, result) if isinstance(r, Exception)), None)
    if failed is not None:
        raise failed
    return sorted(_text(p) for p in blocked), _taken(result, taken_at)


def _queue_finish(pipe, person: str, lease: str) -> None:
    """Free the person's slot and read and clear, in one command, the pools
    where their jobs were skipped for their limit: a skip marked meanwhile
    is read now or stays for the next finish, never lost. (One SPOP needs
    no MULTI around a read and a delete, so a finished job's batch is a
    plain pipeline: no QUEUED reply per command.)"""
    pipe.zrem(keys.active_key(person), lease)
    pipe.spop(keys.blocked_pools_key(person), _ALL_POOLS)


_ALL_POOLS = 10_000  # SPOP's count: more than any registry has pools


def mark_free(redis: Redis, worker_id: str, models: list[str]) -> None:
    """The worker's copies of these one-at-a-time models are idle."""
    if models:
        named = {"worker": worker_id, "now": time.time(), "models": models}
        _run(redis, "fair_free", [], [keys.lua_key_templates(), json.dumps(named)])


def forget_lost_tickets(redis: Redis, queues: list[str], sent_before: float) -> None:
    """Tickets still counted as on their way to these queues, sent before
    `sent_before`: a worker with a free slot consuming them says they were
    lost (it would have taken them at once). A ticket is lost when its web
    process dies between counting and sending it; left counted, it would
    stand in for a ticket a waiting job needs."""
    pipe = redis.pipeline(transaction=False)
    for queue in queues:
        pipe.zremrangebyscore(keys.tickets_key(queue), "-inf", sent_before)
    pipe.execute()


def depth(redis: Redis, pool: str) -> int:
    pipe = redis.pipeline(transaction=False)
    for job_class in CLASSES:
        pipe.zcard(keys.fair_ready_key(pool, job_class))
    return sum(pipe.execute())


def waiting_by_person(redis: Redis, pool: str) -> dict[str, int]:
    return {_text(person): int(count) for person, count in redis.hgetall(keys.fair_waiting_key(pool)).items()}
