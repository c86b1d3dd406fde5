"""What the operator's console shows, as one JSON-ready snapshot of the
cluster: served models (loaded or idle), upstream deployments (their state,
requests in flight, failures), workers (slots, last beat), queues, the jobs
running now (the page groups them by session), active streams, the last
half hour per minute, today's usage per person, the last errors. Read from
Redis and the registry only, so the admin CLI (scripts/admin.py) shows the
same numbers as the page."""
from __future__ import annotations

import json
import time

from redis import Redis

from catalog.deployments import Deployments
from catalog.registry import Registry
from identity import mcp_accounts
import jobqueue
from ledger import guard_log, tool_use, usage
from protocol import keys
from protocol.presence import live_workers, loaded_models, streams_relayed


def models(redis: Redis, registry: Registry) -> list[dict]:
    loaded = loaded_models(redis)
    return [{"name": e.name, "backend": e.backend, "pool": e.pool, "context_length": e.info.context_length,
             "capabilities": e.capabilities, "loaded": e.name in loaded,
             "expires_in": loaded.get(e.name)} for e in registry.entries()]


def deployment_states(redis: Redis, registry: Registry) -> list[jobqueue.DeploymentState]:
    """Every routed upstream model's deployments (several, or bounded)."""
    return jobqueue.deployment_states(redis, {entry.name: jobqueue.targets_of(entry.settings.deployments)
                                  for entry in registry.entries()
                                  if isinstance(entry.settings, Deployments) and entry.settings.routed})


def deployments(redis: Redis, registry: Registry) -> list[dict]:
    return [{"model": d.model, "name": d.name, "state": d.state, "in_flight": d.in_flight, "waiting": d.waiting,
             "max": d.max, "rest_seconds": round(d.rest_seconds, 1), "requests": d.requests, "failures": d.failures,
             "cooldowns": d.cooldowns} for d in deployment_states(redis, registry)]


def workers(redis: Redis) -> list[dict]:
    now = time.time()
    found = []
    for worker in sorted(live_workers(redis), key=lambda w: w.get("id", "")):
        host, _, pid = str(worker.get("id", "")).rpartition(":")
        found.append({"id": worker.get("id"), "host": host, "pid": pid, "queues": worker.get("queues", []),
                      "slots": worker.get("slots", 0), "busy": worker.get("busy", 0),
                      "beat_seconds_ago": round(now - worker["beat_at"], 1) if "beat_at" in worker else None})
    return found


def queues(redis: Redis, registry: Registry) -> list[dict]:
    rows = []
    for pool in sorted(registry.pools()):
        waiting, by_person = jobqueue.queue_depth(redis, pool)
        rows.append({"pool": pool, "waiting": waiting, "waiting_by_person": by_person})
    return rows


def mcp_servers(redis: Redis, registry: Registry) -> dict:
    """The MCP gateway: each registry server's health as the live MCP pool
    processes saw it (calls, failures, the last failure), who connected their
    own account on each OAuth server, and who used which tools today."""
    pool_keys = [keys.mcp_pool_key(pool.decode()) for pool in redis.zrange(keys.MCP_POOLS, 0, -1)]
    pools = [json.loads(view) for view in (redis.mget(pool_keys) if pool_keys else []) if view]
    accounts = mcp_accounts.people_of(redis, [name for name, s in registry.servers.items() if s.auth == "oauth"])
    servers = []
    for name, server in registry.servers.items():
        seen = [pool["servers"].get(name, {}) for pool in pools]
        calls, failures = sum(s.get("calls", 0) for s in seen), sum(s.get("failures", 0) for s in seen)
        last = max(seen, key=lambda s: s.get("last_used", 0), default={})
        state = "no pool" if not pools else "failing" if last.get("failing") else "ok" if calls else "unused"
        servers.append({"name": name, "transport": server.transport, "per_person": server.per_person,
                        "state": state, "calls": calls, "failures": failures, "last_error": last.get("last_error", ""),
                        "auth": server.auth, "connected": accounts.get(name)})
    return {"pools": len(pools), "servers": servers, "tools_today": tool_use.of_day(redis, usage.today())}


def snapshot(redis: Redis, registry: Registry) -> dict:
    report = usage.usage(redis)
    return {
        "time": time.time(),
        "models": models(redis, registry),
        "deployments": deployments(redis, registry),
        "workers": workers(redis),
        "queues": queues(redis, registry),
        "running": jobqueue.running(redis),
        "active_streams": streams_relayed(redis),
        "series": usage.series(redis),
        "usage_today": {"day": usage.today(), "by_person": usage.totals_by_person(report)},
        "errors": usage.last_errors(redis),
        "mcp": mcp_servers(redis, registry),
        "guard_today": guard_log.of_day(redis, usage.today()),
    }
