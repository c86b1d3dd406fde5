"""Who is asking, and what that means for their job: their name for limits
and fair shares, their identity for superseding, their place in the queue
(limit, weight, class), their admission limits, their daily budget and the
server tools their key may use; and the job's address and terms."""
from __future__ import annotations

import hashlib
import time

from flask import request

import jobqueue
from app.auth import current_key
from app.boundary import public_root
from app.errors import ApiError
from app.services import Services
from catalog.deployments import Deployments
from catalog.kinds import backend_kind
from catalog.registry import ModelEntry
from dialects.hints import session_of
from ledger import usage
from protocol import keys
from protocol.contract import GUARD_VERSION, Job


def person(keys_enabled: bool) -> str:
    """Who is asking, for limits and fair shares: their key's name when keys
    are on (however it was sent), else their address."""
    return current_key().name if keys_enabled else f"address:{request.remote_addr}"


def client_identity(keys_enabled: bool) -> str:
    """Who is asking, for superseding: the person and their editor (the user
    agent). Never a different person's request."""
    who = f"{person(keys_enabled)}|{request.user_agent.string}"
    return hashlib.sha256(who.encode()).hexdigest()[:32]


def is_code_completion(job: Job) -> bool:
    return job.prompt is not None and bool(job.prompt.raw or job.prompt.suffix)


def job_class(job: Job) -> str:
    """Code completions wait in their shared class, served first (woken
    first: jobqueue.submit)."""
    return "completion" if is_code_completion(job) else "chat"


def terms(shared: Services) -> jobqueue.Asker:
    """Who asks, how many of their jobs may run at once, and their weight."""
    key = current_key()
    return jobqueue.Asker(person(shared.keys.enabled), key.max_concurrent or shared.settings.max_concurrent,
                          key.weight)


def placement(shared: Services, entry: ModelEntry, job: Job) -> jobqueue.Placement:
    """Where the job waits: its model's pool, its class, whether its model
    runs a bounded number of jobs per worker (llama.cpp), the bounds of its
    upstream deployments, and the queue's policy (fair or first come)."""
    bounded = isinstance(entry.settings, Deployments) and entry.settings.bounded
    gate = jobqueue.deployment_gate(jobqueue.targets_of(entry.settings.deployments)) if bounded else ""
    return jobqueue.Placement(entry.pool, job_class(job), serial=backend_kind(entry.backend).serial, deployments=gate,
                              policy=shared.settings.queue_policy)


def limits(shared: Services) -> jobqueue.Limits:
    key, settings = current_key(), shared.settings
    return jobqueue.Limits(key.requests_per_minute or settings.requests_per_minute, settings.max_queue,
                           stale_after=settings.max_queue_wait_seconds + settings.event_timeout_seconds)


def server_tools(entry: ModelEntry) -> list[str]:
    """The key's grants on the model's MCP servers (catalog.mcp.Grants
    patterns with the server spelt out: "time", "git/git_status")."""
    grants = current_key().grants
    return [pattern for server in entry.mcp_servers for pattern in grants.for_server(server)]


def fit_terms(shared: Services, job: Job, entry: ModelEntry) -> None:
    """What the job may use, on whose terms: the model's server tools the key
    may call, with the person's credentials and rates for them; and whether
    it is background work (the model the operator marks as agents' small one)."""
    job.server_tools = server_tools(entry)
    job.tool_credentials, job.tool_rates = tool_terms(shared, entry) if job.server_tools else ({}, [])
    if any(shared.registry.servers[name].auth == "oauth" for name in entry.mcp_servers
           if name in shared.registry.servers) and job.server_tools:
        job.tool_root = public_root(shared.settings)
    job.background = job.background or entry.background
    job.guard = current_key().guard
    if job.guard:
        job.version = max(job.version, GUARD_VERSION)  # (an older worker would not know to guard it)


def address(job: Job, web_id: str, person: str, max_wait_seconds: float) -> None:
    """Where the job's events go (this web process's relay listens under
    `web_id`), whose it is, how long it may wait, and its session, scoped to
    its person (a client's session name is theirs alone)."""
    job.web_id, job.usage_of = web_id, person
    job.reply_channel = keys.reply_channel(web_id, job.id)
    job.enqueued_at, job.expires_at = (now := time.time()), now + max_wait_seconds
    job.session = session_of(person, job.session) if job.session else ""


def tool_terms(shared: Services, entry: ModelEntry) -> tuple[dict[str, dict[str, str]], list[int]]:
    """What the key's server-side tool calls carry and count against: its own credentials per server (the
    variables' names), and its requests and tool calls per minute (a gateway call's rates)."""
    key, settings = current_key(), shared.settings
    own = {server: headers for server in entry.mcp_servers if (headers := key.own_headers_env(server))}
    return own, [key.requests_per_minute or settings.requests_per_minute,
                 key.tool_calls_per_minute or settings.tool_calls_per_minute]


def check_budget(shared: Services) -> None:
    """A key's daily token budget, counted across every web process (the
    tokens of requests still running count once they end)."""
    budget = current_key().daily_tokens
    if budget is None:
        return
    used = usage.budget_used(shared.redis, person(shared.keys.enabled))
    if used >= budget:
        wait = usage.seconds_to_midnight()
        raise ApiError(429, f"daily token budget of {budget} tokens used up ({used} used today); it resets at "
                            f"00:00 UTC, in {wait // 3600} h {wait % 3600 // 60} min", retry_after=wait)
