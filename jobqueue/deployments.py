"""Which server (deployment) of an upstream model a request goes to, and
each deployment's health, shared by every worker through Redis. A request's
life on a deployment, one function per step (workers/backends/routed.py
calls them):

    pick      it gets a deployment, counted in flight there: one that served
              its prompt prefix or its person last, while not overloaded;
              else the least loaded, by weight; none at its bound. A
              session's turn whose server is full waits in line for it, for
              a while (the model's `affinity_wait`), rather than read its
              whole conversation again on another
    started   its first token came: the deployment is healthy, and the
              prefix and person stick to it
    failed    it failed before its first token: the deployment rests (a
              cooldown, shared by all workers) and the request moves on
    release   it ended: no longer in flight
    probed    a rested deployment was probed: back, or resting longer

A job of a model whose deployments are all bounded waits in the fair queue
while every one is full (fair_take.lua asks deployments.lua, as pick does).
A request that ends has its slot take the next job; places held by a worker
that died are found by wake_held, which every worker calls with its beat.
"""
from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass
from typing import Iterable

from redis import Redis

from jobqueue.fairqueue import AT_WORK_SECONDS
from jobqueue.scripts import run_script
from protocol import keys
from telemetry.metrics import SEPARATOR, TTFT_BUCKETS, cumulative, observe
from protocol.presence import batched

AFFINITY_SECONDS = 3600  # how long a person or a prefix sticks to the deployment that served it


@dataclass(frozen=True)
class Target:
    """A deployment as the router sees it."""
    name: str
    weight: float = 1.0
    max: int | None = None  # requests at once (None: unbounded)


@dataclass(frozen=True)
class Pick:
    deployment: str  # "" when none could be picked
    how: str  # "ready"; "last_resort" (all rest or recover); "full" (wait for room); "held" (in line for the
    #           deployment holding its session); "none" (all excluded)
    probe: str  # a recovering deployment this worker should probe ("" for none)


def targets_of(deployments: Iterable) -> list[Target]:
    """The registry's deployments (catalog.deployments.Deployment) as targets."""
    return [Target(d.name, d.weight, d.max_concurrent) for d in deployments]


def gate(targets: list[Target]) -> str:
    """What fair_take.lua needs to hold a model's jobs back while all its
    deployments are full (a job field); "" when one of them is unbounded."""
    if not targets or any(t.max is None for t in targets):
        return ""
    return json.dumps([asdict(t) for t in targets])


@dataclass(frozen=True)
class Attempt:
    """A request's attempt: how it is counted in flight ("worker|request"),
    whose prompts it shares (most specific first), the deployments that
    already failed it, and the names of `affinity` whose deployment it waits
    for while that one is full (a session's long conversation)."""
    member: str
    affinity: tuple[str, ...] = ()
    tried: tuple[str, ...] = ()
    hold: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rest:
    """How long a failed deployment rests: `first`, doubled per failure in a
    row, at most `most`; at least the upstream's Retry-After."""
    first: float
    most: float
    retry_after: float | None = None


def pick(redis: Redis, model: str, targets: list[Target], attempt: Attempt, probe_seconds: float,
         pool: str = "") -> Pick:
    """The deployment for the attempt, in flight there from now on; or, when
    the one that served one of its `hold` names (a session) is full, none:
    the attempt waits in line for it (how "held") until it is placed, or
    picks with no `hold`, or `leave_lines`. On the model's `pool`, a person
    holding a place while others are at work leaves each deployment's last
    free place (see deploy_pick.lua)."""
    named = {"model": model, "deployments": [asdict(t) for t in targets], "affinity": list(attempt.affinity),
             "hold": list(attempt.hold), "at_work": {"pool": pool, "recent": AT_WORK_SECONDS},
             "exclude": list(attempt.tried), "member": attempt.member, "now": time.time(), "random": random.random(),
             "probe_ms": int(probe_seconds * 1000)}
    name, how, probe = run_script(redis, "deploy_pick", [], [keys.lua_key_templates(), json.dumps(named)])
    return Pick(_text(name), _text(how), _text(probe))


def started(redis: Redis, model: str, deployment: str, affinity: tuple[str, ...], ttft_seconds: float) -> None:
    with batched(redis) as pipe:
        pipe.delete(keys.failures_key(model, deployment))
        for who in affinity:
            pipe.set(keys.deployment_affinity_key(model, who), deployment, ex=AFFINITY_SECONDS)
        observe(pipe, keys.deployment_ttft_key(model, deployment), ttft_seconds, TTFT_BUCKETS)


def failed(redis: Redis, model: str, deployment: str, member: str, rest: Rest) -> float:
    """Seconds the deployment now rests."""
    named = {"model": model, "deployment": deployment, "member": member, "cooldown_ms": int(rest.first * 1000),
             "max_cooldown_ms": int(rest.most * 1000), "retry_after_ms": int((rest.retry_after or 0) * 1000)}
    return int(run_script(redis, "deploy_failed", [], [keys.lua_key_templates(), json.dumps(named)])) / 1000


def release(redis: Redis, model: str, deployment: str, member: str) -> None:
    redis.zrem(keys.inflight_key(model, deployment), member)


def leave_lines(redis: Redis, model: str, targets: list[Target], member: str) -> None:
    """An attempt that gave up waiting is out of every deployment's line."""
    with batched(redis) as pipe:
        for t in targets:
            pipe.zrem(keys.deploy_waiting_key(model, t.name), member)


def probed(redis: Redis, model: str, deployment: str, healthy: bool, rest: Rest) -> None:
    if healthy:
        redis.delete(keys.failures_key(model, deployment), keys.probe_key(model, deployment))
    else:
        failed(redis, model, deployment, "", rest)


def wake_held(redis: Redis, pools: list[str]) -> list[str]:
    """The pools whose jobs held for full deployments can run now that a dead
    worker's places are dropped (deploy_wake.lua): each needs a ticket."""
    if not pools:
        return []
    woken = run_script(redis, "deploy_wake", [], [keys.lua_key_templates(), json.dumps({"pools": pools})])
    return [_text(pool) for pool in woken]


def all_resting(redis: Redis, model: str, targets: list[Target]) -> bool:
    """Whether every deployment of the model rests after failures. One whose
    rest is over counts as awake though not yet found healthy: the next
    request goes there and has it probed, which is how a model that sends
    its jobs to a fallback meanwhile comes back."""
    return redis.exists(*(keys.cooldown_key(model, t.name) for t in targets)) == len(targets)


@dataclass(frozen=True)
class DeploymentState:
    """One deployment as an operator sees it."""
    model: str
    name: str
    state: str  # "ready", "resting" or "recovering"
    in_flight: int
    waiting: int  # sessions' turns in line for a place on it (it holds their conversations)
    max: int | None
    rest_seconds: float  # left of its cooldown
    requests: int
    failures: int
    cooldowns: int
    ttft: dict[str, float]  # the cumulative histogram (telemetry.metrics.histogram)


def states(redis: Redis, routed: dict[str, list[Target]]) -> list[DeploymentState]:
    """Every routed model's deployments (model -> its targets), read in one
    round trip: a scrape costs the same with one model or fifty."""
    listed = [(model, t) for model, targets in routed.items() for t in targets]
    pipe = redis.pipeline(transaction=False)
    pipe.hgetall(keys.DEPLOYMENT_METRICS)
    for model, t in listed:
        pipe.zcard(keys.inflight_key(model, t.name))
        pipe.zcard(keys.deploy_waiting_key(model, t.name))
        pipe.pttl(keys.cooldown_key(model, t.name))
        pipe.exists(keys.failures_key(model, t.name))
        pipe.hgetall(keys.deployment_ttft_key(model, t.name))
    counted, *read = pipe.execute()
    counters = _counters(counted)
    return [_state(model, t, counters, read[5 * i:5 * i + 5]) for i, (model, t) in enumerate(listed)]


def _state(model: str, t: Target, counters: dict, read: list) -> DeploymentState:
    in_flight, waiting, rest_ms, failing, ttft = read
    count = {metric: counters.get((model, t.name, metric), 0) for metric in ("requests", "failures", "cooldowns")}
    state = "resting" if rest_ms > 0 else "recovering" if failing else "ready"
    return DeploymentState(model, t.name, state, in_flight, waiting, t.max, max(rest_ms, 0) / 1000, **count,
                           ttft=cumulative(ttft, TTFT_BUCKETS))


def _counters(counted: dict[bytes, bytes]) -> dict[tuple[str, str, str], int]:
    """The counters hash as (model, deployment, metric) -> count."""
    return {tuple(field.decode().split(SEPARATOR, 2)): int(value) for field, value in counted.items()}


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
