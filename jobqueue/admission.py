"""Admission control, enforced in Redis so it holds across web processes:
requests per minute per person (a sliding window) and a bounded queue per
pool whose places are reserved at admission. One Lua script checks and
records atomically. (A person's concurrency limit does not refuse: their
job waits its turn in the fair queue, jobqueue/fairqueue.py.)

Every admitted job is recorded with the web process that holds it
(keys.lease_member): a queue place whose web process's lease has lapsed (it
crashed) is freed by the next admission, within seconds. A rejection carries
a Retry-After: exact for the rate limit, else from the observed drain rate
of the pool's queue (workers count as they take jobs: see
fairqueue.take)."""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Callable

from redis import Redis
from redis.client import Pipeline

from jobqueue.scripts import execute, queue_script, run_script
from protocol import keys
from protocol.contract import Job
from protocol.presence import batched, drained_recently

RATE_WINDOW_SECONDS = 60


class Verdict(StrEnum):
    """admit.lua's answer."""

    ADMITTED = "ok"
    RATE_LIMIT = "rate_limit"  # the person's requests per minute
    TOOL_RATE_LIMIT = "tool_rate_limit"  # the person's tool calls per minute (the MCP gateway's)
    QUEUE_FULL = "queue_full"  # the pool's queue bound


@dataclass(frozen=True)
class Limits:
    """What admission holds a job to."""
    requests_per_minute: int  # the person's
    max_queue: int  # the pool's queue bound
    stale_after: float  # seconds after which a queue place nobody took is free again


@dataclass(frozen=True)
class Busy(Exception):
    """Over a limit: 429 on OpenAI routes, 503 on Ollama's."""

    reason: Verdict  # RATE_LIMIT or QUEUE_FULL
    message: str
    retry_after: int


def retry_after_seconds(redis: Redis, pool: str, ahead: int) -> int:
    """Seconds until `ahead` queued jobs have drained at the recent rate."""
    per_second = drained_recently(redis, pool) / 60
    if per_second <= 0:
        return 30
    return max(1, min(300, math.ceil((ahead + 1) / per_second)))


def admit(redis: Redis, job: Job, person: str, pool: str, limits: Limits,
          then: Callable[[Redis | Pipeline], object] | None = None) -> object:
    """Admit the job, or raise Busy. `then` queues the command that follows
    an admission (queueing the job), sent in the same round trip: it must
    check in Redis that the job was admitted (fairqueue.push's
    `if_admitted`), and it is undone with the admission if it fails. Returns
    its result."""
    now = time.time()
    script_keys = [keys.rpm_key(person), keys.queued_key(pool)]
    named = {"now": now, "stale_before": now - limits.stale_after, "rpm": limits.requests_per_minute,
             "max_queue": limits.max_queue, "member": keys.lease_member(job.web_id, job.id),
             "window": RATE_WINDOW_SECONDS}
    args = [keys.lua_key_templates(), json.dumps(named)]
    if then is None:
        verdict, followed = run_script(redis, "admit", script_keys, args), None
    else:
        verdict, followed = _admit_then(redis, script_keys, args, then,
                                        lambda: release(redis, person, job.id, pool, job.web_id))
    _raise_if_refused(redis, verdict, now, pool, limits.requests_per_minute)
    return followed


def meter_mcp_method(redis: Redis, person: str, member: str, rates: tuple[int, int]) -> None:
    """Count an MCP method that reaches the servers or leaves state (a
    listing, a read, `initialize`) as admit_tool_call counts a call, without
    a slot or the pool's queue; Busy when over either rate."""
    admit_tool_call(redis, person, member, rates, "")


def admit_tool_call(redis: Redis, person: str, member: str, rates: tuple[int, int], call: str,
                    hold: bool = True) -> None:
    """Count a gateway tool call against the person's requests per minute
    and their own tool calls per minute (`rates`), or raise Busy (with when
    a place frees). Admitted, it holds one of the person's slots until
    `fairqueue.finish`: their jobs count it against their limit, and it
    never waits for one (its client waits on it already); a web process
    that dies drops it with its lease. `member`: keys.lease_member(web
    process, call id). Admitted, `call` (protocol.gateway.Call's JSON) is
    queued for the MCP pool. One round trip. A model's server-side call
    (`hold` False) is counted and queued alike; the job that runs the model
    holds the person's slot already."""
    now = time.time()
    requests_per_minute, tool_calls_per_minute = rates
    named = {"now": now, "rpm": requests_per_minute, "tool_rpm": tool_calls_per_minute, "member": member,
             "window": RATE_WINDOW_SECONDS, "hold": hold}
    verdict = run_script(redis, "admit_tool", [keys.rpm_key(person), keys.tool_rpm_key(person),
                                                 keys.active_key(person), keys.MCP_CALLS], [json.dumps(named), call])
    reason = Verdict(_text(verdict[0]))
    if reason == Verdict.ADMITTED:
        return
    retry = _window_frees(verdict[1], now)
    limit, what = (requests_per_minute, "requests") if reason == Verdict.RATE_LIMIT \
        else (tool_calls_per_minute, "tool calls")
    raise Busy(reason, f"rate limit reached: {limit} {what} per minute for this key", retry)


def _admit_then(redis: Redis, script_keys: list[str], args: list, then, undo) -> tuple[list, object]:
    pipe = redis.pipeline(transaction=False)
    queue_script(pipe, "admit", script_keys, args)
    then(pipe)
    verdict, *followers = execute(pipe, redis)
    if isinstance(verdict, Exception):
        raise verdict
    if _text(verdict[0]) != Verdict.ADMITTED:
        return verdict, None
    failed = next((f for f in followers if isinstance(f, Exception)), None)
    if failed is not None:
        undo()
        raise failed
    return verdict, followers[-1] if followers else None


def _raise_if_refused(redis: Redis, verdict: list, now: float, pool: str, requests_per_minute: int) -> None:
    reason, depth, *oldest = verdict
    reason = Verdict(_text(reason))
    if reason == Verdict.ADMITTED:
        return
    if reason == Verdict.RATE_LIMIT:
        raise Busy(reason, f"rate limit reached: {requests_per_minute} requests per minute for this key",
                   _window_frees(oldest[0], now))
    raise Busy(reason, f"the {pool} queue is full ({depth} jobs waiting)", retry_after_seconds(redis, pool, depth))


def _window_frees(oldest, now: float) -> int:
    """Seconds until the oldest counted request leaves the rate window (at least 1)."""
    return max(1, math.ceil(float(oldest) + RATE_WINDOW_SECONDS - now))


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


def release(redis, person: str, job_id: str, pool: str, web_id: str) -> None:
    """The job ended (or was never taken): its queue place and running slot
    are free (the worker frees the slot itself when the job ends; this is
    for a job it never ran or a worker that died)."""
    member = keys.lease_member(web_id, job_id)
    with batched(redis) as pipe:
        pipe.zrem(keys.active_key(person), member)
        pipe.zrem(keys.queued_key(pool), member)
