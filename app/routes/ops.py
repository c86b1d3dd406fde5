"""Operations: /healthz (process up), /readyz (Redis and a worker for every
pool), /metrics (Prometheus, cluster-wide from Redis), /openapi.json."""
from __future__ import annotations

from flask import Blueprint, Response, jsonify
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.exceptions import RedisError

import jobqueue
from app.auth import current_key, public
from app.errors import register_error_handlers
from app.metrics import cluster_registry
from app.openapi import openapi_document
from app.services import services
from dialects.openai_writer import error_body
from protocol.presence import live_workers

bp = Blueprint("ops", __name__)
register_error_handlers(bp, error_body)


@bp.get("/healthz")
@public
def healthz():
    return jsonify({"status": "ok"})


@bp.get("/readyz")
@public
def readyz():
    shared = services()
    try:
        shared.redis.ping()
        workers = live_workers(shared.redis)
    except RedisError as error:
        return jsonify({"status": "unavailable", "reason": f"Redis unreachable: {type(error).__name__}"}), 503
    redis = shared.persistence.current(shared.redis).report()  # ready either way; a Redis that forgets is said
    consumed = {queue for worker in workers for queue in worker["queues"]}
    missing = jobqueue.unserved_pools(shared.registry.pools(), consumed)
    if missing:
        return jsonify({"status": "unavailable", "reason": f"no worker consumes pool(s): {', '.join(missing)}",
                        "redis": redis}), 503
    return jsonify({"status": "ready", "workers": len(workers), "redis": redis})


@bp.get("/metrics")
def metrics():
    key = current_key()  # a restricted key sees the numbers of its own models and MCP tools only, and nobody's name
    people = key.admin or not services().keys.enabled
    tools = (lambda server, tool: True) if people else \
        (lambda server, tool: key.grants.may_use(server, tool) if tool != "-" else key.grants.may_use_server(server))
    return Response(generate_latest(cluster_registry(services(), key.allows, people, tools)),
                    content_type=CONTENT_TYPE_LATEST)


@bp.get("/openapi.json")
def openapi():
    return jsonify(openapi_document())
