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

A family of keys (one per job, person, pool...) is a `Key`: its template
names the family once, for Python (`keys.abort_key(job_id)`) and for the
job queue's Lua scripts alike (`lua_key_templates`).
"""
from __future__ import annotations

import json
from functools import lru_cache

from protocol.connection import database

PREFIX = "switchboard"
# How long per-job records (a finished job's state; abort marks of jobs never
# run) are kept: SWITCHBOARD_RECORD_SECONDS, set by `configure`.
RECORD_TTL_SECONDS = 600


class Key:
    """A family of keys: `Key("job:{}:abort")("j1")` is "switchboard:job:j1:abort"."""
    __slots__ = ("template", "_parts")

    def __init__(self, template: str):
        self.template, self._parts = f"{PREFIX}:{template}", template.count("{}")

    def __call__(self, *parts: object) -> str:
        if len(parts) != self._parts:
            raise TypeError(f"{self.template} is named by {self._parts} parts, not {len(parts)}")
        return self.template.format(*parts)

    @property
    def lua(self) -> str:
        """The template for Lua's string.format."""
        return self.template.replace("{}", "%s")


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


def reply_channel(listener: str, job_id: str) -> str:
    """Where a job's events (or a tool call's replies) are published: a
    channel under the process waiting for them (the web process relaying a
    job; the worker whose model made the call), which listens to all of them
    with one pattern subscription (no subscribe and unsubscribe per job).
    (Its text still says "web", its first listener: not worth renaming what operators watch.)"""
    return f"{_channels}:web:{listener}:job:{job_id}:events"


def reply_pattern(listener: str) -> str:
    return f"{_channels}:web:{listener}:job:*:events"


def job_of_channel(channel: str) -> str:
    """The job id in a reply channel's name."""
    return channel.split(":job:", 1)[1].split(":", 1)[0]


def mcp_cancel_channel() -> str:
    """Gateway call ids whose caller gave up, broadcast to every MCP pool process."""
    return f"{_channels}:mcp:cancel"


def events_channel_pattern(prefix: str | None = None) -> str:
    """Every job's reply channel (for a listener outside, such as a test's tap)."""
    return f"{prefix or _channels}:*job:*:events"


# --- per job -------------------------------------------------------------------------
abort_key = Key("job:{}:abort")
state_key = Key("job:{}:state")
alive_key = Key("job:{}:alive")  # refreshed every second by the worker running the job
RUNNING_JOBS = f"{PREFIX}:running"  # jobs a worker runs now (zset: job id, scored by its start; jobqueue.running)
latest_completion_key = Key("latest:{}:{}")  # client, model: its newest code completion (superseding)

# --- admission -----------------------------------------------------------------------
# A key's requests of the last minute (a sorted set scored by time): a sliding window.
rpm_key = Key("rpm:{}")
# A person's running jobs (score: when taken): their concurrency limit counts these (jobqueue/fairqueue.py).
ACTIVE_PREFIX = f"{PREFIX}:active:"
active_key = Key("active:{}")
# A pool's admitted jobs no worker took yet: the queue bound counts these, so
# simultaneous arrivals cannot overshoot it.
queued_key = Key("queued:{}")
# Tickets sent to a Celery queue and not taken yet (member: the ticket's id,
# score: when sent): a job needs one only while fewer are on their way than
# jobs wait (jobqueue/fairqueue.py).
tickets_key = Key("tickets:{}")
# A mark that a job's ticket reached a slot before the job was queued (a
# ticket sent beside its queueing, which it overtook): the queueing then asks
# for another. It lapses in seconds.
early_ticket_key = Key("early-ticket:{}")
drained_key = Key("drained:{}:{}")  # pool, 10-second bucket: the jobs taken from it then


def lease_member(web_id: str, job_id: str) -> str:
    """How admission records a job: with the web process that holds it, so a
    slot is freed when that process's lease lapses (it died)."""
    return f"{web_id}|{job_id}"


# --- processes -----------------------------------------------------------------------
worker_key = Key("worker:{}")
WORKER_KEY_PATTERN = f"{PREFIX}:worker:*"
WEB_LEASE_PREFIX = f"{PREFIX}:weblease:"
web_lease_key = Key("weblease:{}")  # renewed every second by a live web process; its jobs die with it
loaded_key = Key("loaded:{}:{}")  # worker id, model
LOADED_KEY_PATTERN = f"{PREFIX}:loaded:*"

# --- metrics -------------------------------------------------------------------------
JOBS_FINISHED = f"{PREFIX}:metrics:jobs_finished"  # field "model\x1freason"
TOKENS = f"{PREFIX}:metrics:tokens"  # field model
REJECTED = f"{PREFIX}:metrics:rejected"  # field reason
PROMPT_CACHE = f"{PREFIX}:metrics:prompt_cache"  # field "model\x1fhit|miss"
PROMPT_TOKENS = f"{PREFIX}:metrics:prompt_tokens"  # field "model\x1freused|evaluated"
TOOL_CALLS = f"{PREFIX}:metrics:tool_calls"  # field "server\x1ftool\x1fstatus"
GUARD_FINDINGS = f"{PREFIX}:metrics:guard_findings"  # field "kind\x1faction": secrets the guard found
# Histograms count each observation in its own bucket (telemetry/metrics.py);
# their keys end in `_buckets`, apart from the cumulative ones ("...:ttft:"),
# which a reader must not mix in.
tool_seconds_key = Key("metrics:tool_seconds_buckets:{}\x1f{}")  # server, tool: a server tool's call durations
ttft_key = Key("metrics:ttft_buckets:{}")  # model

# --- stored and background responses (the Responses API) ---------------------------
stored_response_key = Key("response:{}")  # its owner, input, output and the one it continued
# A background response's run (a hash): its job, the web process draining it,
# the job's reply channel, and whether it was cancelled.
background_key = Key("response:{}:run")
# A background response's events, for streams that resume (a Redis stream;
# entry `0-<n + 1>` is the event of sequence number n).
response_events_key = Key("response:{}:events")

# --- the operator's records (ledger/) -------------------------------------------------
usage_key = Key("usage:{}")  # a day's usage (UTC date): field "person\x1fmodel\x1fmetric"
usage_folded_key = Key("usage:{}:folded")  # a past day's usage, folded: its counters as one compressed string
usage_tokens_key = Key("usage:{}:tokens")  # a day's tokens per person (field person): the budget check's one read
# A day's budget resets (field person): the tokens they had used when an
# operator reset their budget, not counted against it after.
budget_reset_key = Key("usage:{}:budget-reset")
ERRORS = f"{PREFIX}:errors"  # the last errors, newest first (a capped list of JSON)
REQUEST_LOG = f"{PREFIX}:requests"  # the request log (a stream: one entry per request, by its end)
request_body_key = Key("request-body:{}")  # a request's kept body and reply text (where the operator keeps bodies)
AUDIT_LOG = f"{PREFIX}:audit"  # the audit log (a stream: who changed keys and models)
# The last state the audit log saw of a subject (the keys file, the registry),
# to tell a change from a restart.
audit_state_key = Key("audit:state:{}")
# Held by the process doing a maintenance step (folding old usage days), for
# as long as the step's period: one process does it.
maintenance_lock_key = Key("maintenance:{}")
series_key = Key("series:{}")  # one minute's job numbers (epoch minute): for the status page's chart

# --- the MCP gateway (/mcp: app/mcp_gateway.py, workers/mcp/pool.py) -------------------
MCP_CALLS = f"{PREFIX}:mcp:calls"  # calls waiting for an MCP pool process (a list of protocol.gateway.Call)
mcp_session_key = Key("mcp:session:{}")  # a 2025-11-25-era client session: whose, which servers, its version
mcp_session_calls_key = Key("mcp:session:{}:calls")  # its calls running now: JSON-RPC id -> call id
mcp_sessions_key = Key("mcp:sessions:{}")  # a person's open sessions (zset: id, scored by when opened)
tool_rpm_key = Key("tool-rpm:{}")  # a person's gateway tool calls of the last minute (a sliding window)
MCP_POOLS = f"{PREFIX}:mcp:pools"  # the live MCP pool processes (zset: pool id, scored by when last heard)
mcp_pool_key = Key("mcp:pool:{}")  # an MCP pool process's servers' health (JSON), lapsing with it
tool_use_key = Key("usage:{}:tools")  # a day's gateway tool calls: field "person\x1fserver\x1ftool"

# --- the guard (workers/secrets_guard.py): secrets kept from hosted models ---------------
# What a text (by its digest) was found to hold: its findings' kinds and spans, never a value.
guard_scanned_key = Key("guard:scanned:{}")
# A person's secrets their requests carried (placeholder -> the value sealed under the office secret):
# put back into their replies, and replaced wherever they come again.
guard_values_key = Key("guard:values:{}")
guard_use_key = Key("usage:{}:guard")  # a day's findings: field "person\x1fmodel\x1fkind\x1faction"

# --- sign-in (identity/signin.py, identity/own_keys.py, identity/device_login.py) ----------------------------
# Every secret here is kept as its SHA-256 digest (a key, a session's cookie, a login's token, a device
# code); a person's refresh token at the identity provider is sealed (identity/sealing.py).
signin_flow_key = Key("signin:flow:{}")  # a sign-in under way, by its state: its nonce, PKCE verifier, browser
signin_session_key = Key("signin:session:{}")  # a console session (by its cookie's digest): whose, admin or not
signin_person_key = Key("signin:person:{}")  # a signed-in person: their refresh token (sealed), groups, admin
signin_suspended_key = Key("signin:suspended:{}")  # set while the provider no longer answers for the person
SIGNIN_RECHECKS = f"{PREFIX}:signin:rechecks"  # people to ask the provider about again (zset, scored by when)
own_key_key = Key("signin:key:{}")  # a key a person minted (by its digest): its record (JSON), to its expiry
own_keys_key = Key("signin:person:{}:keys")  # a person's minted keys (zset: digest, scored by expiry)
signin_sessions_key = Key("signin:person:{}:sessions")  # a person's console sessions (set of digests)
cli_login_key = Key("signin:login:{}")  # a command-line login (by its refresh token's digest): whose, its name
cli_logins_key = Key("signin:person:{}:logins")  # a person's command-line logins (set of digests)
device_code_key = Key("signin:device:{}")  # a device login waiting for its person (by its device code's digest)
device_user_code_key = Key("signin:device-user:{}")  # its user code -> the device code's digest
device_approved_key = Key("signin:person:{}:approved")  # a person's approved device codes not yet collected
mcp_client_key = Key("signin:mcp-client:{}")  # an agent registered with the MCP gateway's authorization server
mcp_ask_key = Key("signin:mcp-ask:{}")  # an authorization request waiting on its consent page
mcp_code_key = Key("signin:mcp-code:{}")  # an authorization code (by its digest), until taken or a minute old
# A person's own account on an OAuth-protected MCP server (identity/mcp_accounts.py): its tokens, sealed.
mcp_account_key = Key("signin:mcp-account:{}:{}")  # server, person: tokens (sealed), when connected, expiry
mcp_account_lock_key = Key("signin:mcp-account:{}:{}:refreshing")  # held by the pool process refreshing them
mcp_accounts_key = Key("signin:mcp-accounts:{}")  # a server's connected people (zset, scored by last renewal)
mcp_person_accounts_key = Key("signin:person:{}:mcp")  # the servers a person connected (set)
mcp_connect_key = Key("signin:mcp-connect:{}")  # a connection under way, by its state (sealed to its person)
mcp_upstream_client_key = Key("signin:mcp-upstream:{}")  # our client at a server's authorization server (sealed)
signin_throttle_key = Key("signin:throttle:{}:{}")  # what, by whom: a count over its window (public routes' bound)

# --- the fair queue (jobqueue/fairqueue.py) ---------------------------------------------
# A pool's waiting jobs of one class ("completion" or "chat"), scored by fair
# tag (background work BACKGROUND_OFFSET behind it).
fair_ready_key = Key("fq:{}:ready:{}")
fair_seen_key = Key("fq:{}:seen")  # the people a pool served, scored by when it last started a job of theirs
# A pool's waiting background jobs again, scored by when they were queued (their patience).
fair_background_since_key = Key("fq:{}:background_since")
# A pool's virtual time, arrival counter and each person's last tag (one field
# per person who queued; the hash lapses a day after its last use).
fair_state_key = Key("fq:{}:state")
fair_waiting_key = Key("fq:{}:waiting")  # a pool's waiting jobs per person (for metrics)
# How long the replies of a session, or of a person, ran on a pool, per model and kind of request
# ("n:model|kind": how many, decayed; "s:...": their tokens: jobqueue/charges.py).
fair_replies_key = Key("fq:{}:replies:{}")
# Models with jobs waiting in the pool while all their deployments are full:
# model -> its deployments (jobqueue.deployments.gate).
held_for_deployments_key = Key("fq:{}:held")
FAIR_JOB_PREFIX = f"{PREFIX}:fq:job:"
fair_job_key = Key("fq:job:{}")  # a waiting job's payload and scheduling fields
FAIR_FREE_PREFIX = f"{PREFIX}:fq:free:"
free_workers_key = Key("fq:free:{}")  # model: workers whose copy of a one-at-a-time model is idle (score: when)
affinity_key = Key("fq:affinity:{}:{}")  # model, person: the worker holding the person's prompt cache
reserved_key = Key("fq:reserved:{}:{}")  # model, worker: the job handed to that worker's idle copy, for a moment
FAIR_BLOCKED_PREFIX = f"{PREFIX}:fq:blocked:"
blocked_pools_key = Key("fq:blocked:{}")  # person: pools where their jobs wait on their concurrency limit

# --- upstream deployments (jobqueue/deployments.py) ------------------------------------
# A unit separator, not ":", after the model: model and deployment names may
# hold ":" ("qwen2.5-coder:7b", an IPv6 host), and model "a:b" with deployment
# "c" must not meet model "a" with deployment "b:c".
DEPLOYMENT_PREFIX = f"{PREFIX}:deployment:"
DEPLOYMENT_METRICS = f"{PREFIX}:metrics:deployments"  # field "model\x1fdeployment\x1fmetric"
# The requests a deployment serves now (member "worker|request", score: when
# sent): its bound counts these; a dead worker's are dropped.
inflight_key = Key("deployment:{}\x1f{}:inflight")
# Requests waiting for a place on a full deployment that holds their session's
# conversation (member "worker|request|person", score: since).
deploy_waiting_key = Key("deployment:{}\x1f{}:waiting")
cooldown_key = Key("deployment:{}\x1f{}:cooldown")  # present while a failed deployment rests
failures_key = Key("deployment:{}\x1f{}:failures")  # its failures in a row (each rest twice the last)
probe_key = Key("deployment:{}\x1f{}:probe")  # a worker is probing a rested deployment (only one does)
# The deployment that last served a person, or a prompt prefix ("prefix:" + its hash).
deployment_affinity_key = Key("deployment:{}\x1faffinity\x1f{}")
deployment_ttft_key = Key("metrics:deployment_ttft_buckets:{}\x1f{}")


@lru_cache(maxsize=1)
def lua_key_templates() -> str:
    """The key names the job queue's Lua scripts build for the jobs, people,
    models and workers they meet, as string.format templates: a script never
    spells a key itself (jobqueue/lua)."""
    families = {"job": fair_job_key, "active": active_key, "free": free_workers_key, "affinity": affinity_key,
                "reserved": reserved_key, "blocked": blocked_pools_key, "web_lease": web_lease_key,
                "abort": abort_key, "alive": alive_key, "state": state_key, "early_ticket": early_ticket_key,
                "worker": worker_key, "inflight": inflight_key, "deploy_waiting": deploy_waiting_key,
                "cooldown": cooldown_key, "failures": failures_key, "probe": probe_key,
                "deploy_affinity": deployment_affinity_key, "held": held_for_deployments_key,
                "seen": fair_seen_key}
    return json.dumps({name: family.lua for name, family in families.items()}
                      | {"running": RUNNING_JOBS, "deployment_metrics": DEPLOYMENT_METRICS})
