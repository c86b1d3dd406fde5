"""Every Redis key and pub/sub channel name, in one module: renaming one is
one change, and an operator can read here what Switchboard keeps in Redis.

Per job: `events` (pub/sub: under the web process that relays it, see
`reply_channel`), `abort`, `state`, `alive`.
Per person: `rpm` (admission), `active` (running jobs). Per pool: `queued`
(admitted, not yet taken: the queue bound), `drained` (Retry-After), and the
fair queue `fq:*` (the waiting jobs themselves, in the order workers take
them). Per upstream deployment (`deployment:*`): its requests in flight,
its rest after failures, its probe, and whose prompts it holds. Per process:
`worker` (presence, for /readyz), `loaded` (/api/ps), a web process's lease
and its stream count.
Metrics: `metrics:*`. The operator's records (ledger/): usage by day, the
request log and its kept bodies, the audit log, the last errors and the
status page's per-minute series.
"""
from __future__ import annotations

import json
from functools import lru_cache

from protocol.connection import database

PREFIX = "switchboard"
# How long per-job records (a finished job's state; abort marks of jobs never
# run) are kept: SWITCHBOARD_RECORD_SECONDS, set by `configure`.
RECORD_TTL_SECONDS = 600

# --- pub/sub channels ---------------------------------------------------------------
# Pub/sub is server-wide in Redis, not per database: channels carry the
# database's number, so two deployments on one Redis server (in different
# databases) never see each other's events, aborts or streams.
_channels = f"{PREFIX}:db0"


def configure(redis_url: str, record_seconds: int | None = None) -> None:
    """Called once at a process's start, from its settings."""
    global _channels, RECORD_TTL_SECONDS
    _channels = channels_prefix(redis_url)
    if record_seconds is not None:
        RECORD_TTL_SECONDS = record_seconds


def channels_prefix(redis_url: str) -> str:
    """The channel names' prefix for the database a URL names."""
    return f"{PREFIX}:db{database(redis_url)}"


def abort_channel(prefix: str | None = None) -> str:
    """Job ids, broadcast to every worker."""
    return f"{prefix or _channels}:abort"


def reply_channel(web_id: str, job_id: str) -> str:
    """Where a worker publishes a job's events: a channel under the web
    process relaying it, which listens to all of them with one pattern
    subscription (no subscribe and unsubscribe per job)."""
    return f"{_channels}:web:{web_id}:job:{job_id}:events"


def reply_pattern(web_id: str) -> str:
    return f"{_channels}:web:{web_id}:job:*:events"


def job_of_channel(channel: str) -> str:
    """The job id in a reply channel's name."""
    return channel.split(":job:", 1)[1].split(":", 1)[0]


def events_channel_pattern(prefix: str | None = None) -> str:
    """Every job's reply channel (for a listener outside, such as a test's tap)."""
    return f"{prefix or _channels}:*job:*:events"


# --- per job -------------------------------------------------------------------------
JOB_PREFIX = f"{PREFIX}:job:"  # + job id + ":abort", ":state", ":alive"
RUNNING_JOBS = f"{PREFIX}:running"  # jobs a worker runs now (zset: job id, scored by its start; jobqueue.running)


def abort_key(job_id: str) -> str:
    return f"{JOB_PREFIX}{job_id}:abort"


def state_key(job_id: str) -> str:
    return f"{JOB_PREFIX}{job_id}:state"


def alive_key(job_id: str) -> str:
    """Refreshed every second by the worker running the job."""
    return f"{JOB_PREFIX}{job_id}:alive"


def latest_completion_key(client: str, model: str) -> str:
    """A client's newest code completion for a model (superseding)."""
    return f"{PREFIX}:latest:{client}:{model}"


# --- admission -----------------------------------------------------------------------
def rpm_key(key_name: str) -> str:
    """A sorted set of the key's requests of the last minute (score: time): a sliding window."""
    return f"{PREFIX}:rpm:{key_name}"


def active_key(person: str) -> str:
    """A sorted set of the person's running jobs (score: when taken): their
    concurrency limit counts these (jobqueue/fairqueue.py)."""
    return f"{ACTIVE_PREFIX}{person}"


def queued_key(pool: str) -> str:
    """A sorted set of the pool's admitted jobs no worker took yet: the queue
    bound counts these, so simultaneous arrivals cannot overshoot it."""
    return f"{PREFIX}:queued:{pool}"


def lease_member(web_id: str, job_id: str) -> str:
    """How admission records a job: with the web process that holds it, so a
    slot is freed when that process's lease lapses (it died)."""
    return f"{web_id}|{job_id}"


def tickets_key(queue: str) -> str:
    """Tickets sent to a Celery queue and not taken yet (member: the ticket's
    id, score: when it was sent): a job needs one only while fewer are on
    their way than jobs wait (jobqueue/fairqueue.py)."""
    return f"{PREFIX}:tickets:{queue}"


def early_ticket_key(job_id: str) -> str:
    """A mark that a job's ticket reached a slot before the job was queued
    (a ticket sent beside its queueing, which it overtook): the queueing
    then asks for another (jobqueue/fairqueue.py). It lapses in seconds."""
    return f"{PREFIX}:early-ticket:{job_id}"


def drained_key(pool: str, bucket: int) -> str:
    """Jobs taken from the pool in one 10-second bucket."""
    return f"{PREFIX}:drained:{pool}:{bucket}"


# --- processes -----------------------------------------------------------------------
def worker_key(worker_id: str) -> str:
    return f"{PREFIX}:worker:{worker_id}"


WEB_LEASE_PREFIX = f"{PREFIX}:weblease:"


def web_lease_key(web_id: str) -> str:
    """Renewed every second by a live web process; its jobs die with it."""
    return f"{WEB_LEASE_PREFIX}{web_id}"


WORKER_KEY_PATTERN = f"{PREFIX}:worker:*"


def loaded_key(model: str, worker_id: str) -> str:
    return f"{PREFIX}:loaded:{worker_id}:{model}"


LOADED_KEY_PATTERN = f"{PREFIX}:loaded:*"

# --- metrics -------------------------------------------------------------------------
JOBS_FINISHED = f"{PREFIX}:metrics:jobs_finished"  # field "model\x1freason"
TOKENS = f"{PREFIX}:metrics:tokens"  # field model
REJECTED = f"{PREFIX}:metrics:rejected"  # field reason
PROMPT_CACHE = f"{PREFIX}:metrics:prompt_cache"  # field "model\x1fhit|miss"
PROMPT_TOKENS = f"{PREFIX}:metrics:prompt_tokens"  # field "model\x1freused|evaluated"
TOOL_CALLS = f"{PREFIX}:metrics:tool_calls"  # field "server\x1ftool\x1fstatus"


ERRORS = f"{PREFIX}:errors"  # the last errors, newest first (a capped list of JSON)


def stored_response_key(response_id: str) -> str:
    """A stored Responses API response: its owner, input, output and the one it continued."""
    return f"{PREFIX}:response:{response_id}"


def background_key(response_id: str) -> str:
    """A background response's run: its job, the web process draining it,
    the job's reply channel, and whether it was cancelled (a hash)."""
    return f"{PREFIX}:response:{response_id}:run"


def response_events_key(response_id: str) -> str:
    """A background response's events, for streams that resume (a Redis
    stream; entry `0-<n + 1>` is the event of sequence number n)."""
    return f"{PREFIX}:response:{response_id}:events"


def usage_key(day: str) -> str:
    """A day's usage (UTC date): field "person\x1fmodel\x1fmetric"."""
    return f"{PREFIX}:usage:{day}"


def usage_folded_key(day: str) -> str:
    """A past day's usage, folded: its counters as one compressed string."""
    return f"{PREFIX}:usage:{day}:folded"


def usage_tokens_key(day: str) -> str:
    """A day's tokens per person (field person): the budget check's one read."""
    return f"{PREFIX}:usage:{day}:tokens"


def budget_reset_key(day: str) -> str:
    """A day's budget resets (field person): the tokens they had used when
    an operator reset their budget, not counted against it after."""
    return f"{PREFIX}:usage:{day}:budget-reset"


# --- the operator's records (ledger/) -------------------------------------------------
REQUEST_LOG = f"{PREFIX}:requests"  # the request log (a stream: one entry per request, by its end)
AUDIT_LOG = f"{PREFIX}:audit"  # the audit log (a stream: who changed keys and models)


def request_body_key(request_id: str) -> str:
    """A request's kept body and reply text (where the operator keeps bodies)."""
    return f"{PREFIX}:request-body:{request_id}"


def audit_state_key(subject: str) -> str:
    """The last state the audit log saw of a subject (the keys file, the
    registry), to tell a change from a restart."""
    return f"{PREFIX}:audit:state:{subject}"


def maintenance_lock_key(step: str) -> str:
    """Held by the process doing a maintenance step (folding old usage
    days), for as long as the step's period: one process does it."""
    return f"{PREFIX}:maintenance:{step}"


def series_key(minute: int) -> str:
    """One minute's job numbers (epoch minute): for the status page's chart."""
    return f"{PREFIX}:series:{minute}"


# Histograms count each observation in its own bucket (telemetry/metrics.py);
# their keys end in `_buckets`, apart from the cumulative ones ("...:ttft:"),
# which a reader must not mix in.
def tool_seconds_key(server: str, tool: str) -> str:
    """A server tool's call durations (a histogram)."""
    return f"{PREFIX}:metrics:tool_seconds_buckets:{server}\x1f{tool}"


def ttft_key(model: str) -> str:
    return f"{PREFIX}:metrics:ttft_buckets:{model}"


# --- the fair queue (jobqueue/fairqueue.py) ---------------------------------------------
def fair_ready_key(pool: str, klass: str) -> str:
    """A pool's waiting jobs of one class ("completion" or "chat"), scored by fair tag (background work
    BACKGROUND_OFFSET behind it: jobqueue/fairqueue.py)."""
    return f"{PREFIX}:fq:{pool}:ready:{klass}"


def fair_seen_key(pool: str) -> str:
    """The people a pool served, scored by when it last started a job of theirs (who is at work)."""
    return f"{PREFIX}:fq:{pool}:seen"


def fair_background_since_key(pool: str) -> str:
    """A pool's waiting background jobs again, scored by when they were queued (their patience)."""
    return f"{PREFIX}:fq:{pool}:background_since"


def fair_state_key(pool: str) -> str:
    """A pool's virtual time, arrival counter and each person's last tag (one
    field per person who queued; the hash lapses a day after its last use)."""
    return f"{PREFIX}:fq:{pool}:state"


def fair_waiting_key(pool: str) -> str:
    """A pool's waiting jobs per person (for metrics)."""
    return f"{PREFIX}:fq:{pool}:waiting"


FAIR_JOB_PREFIX = f"{PREFIX}:fq:job:"  # + job id: a waiting job's payload and scheduling fields
FAIR_FREE_PREFIX = f"{PREFIX}:fq:free:"  # + model: workers whose copy of a one-at-a-time model is idle
FAIR_AFFINITY_PREFIX = f"{PREFIX}:fq:affinity:"  # + model:person: the worker holding the person's prompt cache
FAIR_RESERVED_PREFIX = f"{PREFIX}:fq:reserved:"  # + model:worker: a job handed to that worker
FAIR_BLOCKED_PREFIX = f"{PREFIX}:fq:blocked:"  # + person: pools where their jobs wait on their concurrency limit
ACTIVE_PREFIX = f"{PREFIX}:active:"


def fair_job_key(job_id: str) -> str:
    return f"{FAIR_JOB_PREFIX}{job_id}"


def affinity_key(model: str, person: str) -> str:
    return f"{FAIR_AFFINITY_PREFIX}{model}:{person}"


def free_workers_key(model: str) -> str:
    """Workers whose copy of a one-at-a-time model is idle (score: when last said)."""
    return f"{FAIR_FREE_PREFIX}{model}"


def reserved_key(model: str, worker_id: str) -> str:
    """The job handed to that worker's idle copy of the model, for a moment."""
    return f"{FAIR_RESERVED_PREFIX}{model}:{worker_id}"


def held_for_deployments_key(pool: str) -> str:
    """Models with jobs waiting in the pool while all their deployments are
    full: model -> its deployments (jobqueue.deployments.gate)."""
    return f"{PREFIX}:fq:{pool}:held"


def blocked_pools_key(person: str) -> str:
    """Pools where the person's jobs wait on their concurrency limit."""
    return f"{FAIR_BLOCKED_PREFIX}{person}"


# --- upstream deployments (jobqueue/deployments.py) ------------------------------------
DEPLOYMENT_PREFIX = f"{PREFIX}:deployment:"  # + model, \x1f, and deployment:... or affinity\x1f...
DEPLOYMENT_METRICS = f"{PREFIX}:metrics:deployments"  # field "model\x1fdeployment\x1fmetric"


def _deployment_key(model: str, deployment: str, kind: str) -> str:
    # A unit separator, not ":", after the model: model and deployment names may hold ":"
    # ("qwen2.5-coder:7b", an IPv6 host), and model "a:b" with deployment "c" must not meet
    # model "a" with deployment "b:c".
    return f"{DEPLOYMENT_PREFIX}{model}\x1f{deployment}:{kind}"


def inflight_key(model: str, deployment: str) -> str:
    """The requests a deployment serves now (member "worker|request", score:
    when sent): its bound counts these; a dead worker's are dropped."""
    return _deployment_key(model, deployment, "inflight")


def deploy_waiting_key(model: str, deployment: str) -> str:
    """Requests waiting for a place on a full deployment that holds their
    session's conversation (member "worker|request|person", score: since)."""
    return _deployment_key(model, deployment, "waiting")


def cooldown_key(model: str, deployment: str) -> str:
    """Present while a failed deployment rests (it lapses when the rest ends)."""
    return _deployment_key(model, deployment, "cooldown")


def failures_key(model: str, deployment: str) -> str:
    """Its failures in a row (each rest is twice the last); gone once it is healthy."""
    return _deployment_key(model, deployment, "failures")


def probe_key(model: str, deployment: str) -> str:
    """A worker is probing a rested deployment (only one does)."""
    return _deployment_key(model, deployment, "probe")


def deployment_affinity_key(model: str, who: str) -> str:
    """The deployment that last served a person, or a prompt prefix ("prefix:" + its hash)."""
    return f"{DEPLOYMENT_PREFIX}{model}\x1faffinity\x1f{who}"


def deployment_ttft_key(model: str, deployment: str) -> str:
    return f"{PREFIX}:metrics:deployment_ttft_buckets:{model}\x1f{deployment}"


@lru_cache(maxsize=1)
def lua_key_templates() -> str:
    """The key names the job queue's Lua scripts build for the jobs, people,
    models and workers they meet, as string.format templates made by the
    functions above: a script never spells a key itself (jobqueue/lua)."""
    s = "%s"
    return json.dumps({"job": fair_job_key(s), "active": active_key(s), "free": free_workers_key(s),
                       "affinity": affinity_key(s, s), "reserved": reserved_key(s, s),
                       "blocked": blocked_pools_key(s), "web_lease": web_lease_key(s), "abort": abort_key(s),
                       "alive": alive_key(s), "state": state_key(s),
                       "early_ticket": early_ticket_key(s), "worker": worker_key(s),
                       "inflight": inflight_key(s, s), "deploy_waiting": deploy_waiting_key(s, s),
                       "cooldown": cooldown_key(s, s), "failures": failures_key(s, s),
                       "probe": probe_key(s, s), "deploy_affinity": deployment_affinity_key(s, s),
                       "held": held_for_deployments_key(s), "running": RUNNING_JOBS, "seen": fair_seen_key(s),
                       "deployment_metrics": DEPLOYMENT_METRICS})
