"""Switchboard's front end (the web process): create_app() builds the Flask app.

Serve it with gunicorn's gevent worker class (the relay and the disconnect
watch are greenlets): `gunicorn 'app:create_app()'`, whose gunicorn.conf.py
names it (or `-k gevent`). It imports
`protocol`, `catalog`, `dialects` and `settings`, never `workers`.
"""
from __future__ import annotations

import gevent
from flask import Flask
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.retry import Retry

import jobqueue
from app.access_log import install_request_log
from app.audit import audit_changes
from app.auth import install_auth
from app.boundary import install_boundary
from app.errors import install_fallback_errors
from app.pathkey import PathKeyMiddleware
from app.presence import WebLease
from app.relay import Relay
from app.routes import (
    admin, anthropic, gemini, mcp, mcp_accounts, oauth, ollama, openai, ops, responses, signin, simple_chat,
)
from app.routes.signin import install_signin
from app.services import Services
from catalog.registry import load_registry
from identity.keys import load_keys
from identity.sealing import Sealer, office_secret
from protocol.connection import RedisTarget, redis_client
from protocol.keys import configure as configure_redis_names
from settings import load_settings
from telemetry import tracing


def create_app(overrides: dict | None = None) -> Flask:
    settings = load_settings(overrides)
    tracing.setup("switchboard-web")  # if OTEL_EXPORTER_OTLP_ENDPOINT says where to (telemetry/tracing.py)
    configure_redis_names(settings.redis_url, settings.record_seconds)
    registry = load_registry(settings.models_path)  # a bad registry stops start-up here
    keys = load_keys(settings.keys_file, settings.api_keys, settings.trusted_networks, settings.mcp_default_deny)
    # Fail fast when Redis is down (redis-py would retry for many seconds):
    # a stream should end with an error at once, and recover when Redis does.
    target = RedisTarget.of(settings)
    redis = redis_client(target, "switchboard-web", settings.redis_connections,
                         socket_connect_timeout=2, retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 2))
    app = Flask(__name__, static_folder=None)
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.json.sort_keys = False  # keep wire objects in the order the APIs document
    # The relay's pub/sub connection, never retried by redis-py: a lost one is a gap (app/relay.py).
    relay = Relay(redis_client(target, "switchboard-relay", 2, socket_connect_timeout=2,
                               retry=Retry(NoBackoff(), 0)))
    secret = office_secret(settings.secret.get_secret_value() if settings.secret else None, settings.data_dir)
    wakeups = jobqueue.Wakeups(gevent.spawn)
    shared = Services(settings, registry, redis, relay, wakeups, keys, WebLease(relay), Sealer(secret))
    app.extensions["switchboard"] = shared
    audit_changes(shared)
    install_request_log(app, settings.log_prompts)  # first: a refused request is logged too
    install_boundary(app, settings)  # then who may reach the server at all (Host, Origin, the client's address)
    install_auth(app, keys, install_signin(app, shared), oauth.challenge)
    install_fallback_errors(app)
    for blueprint in (ollama.bp, openai.bp, anthropic.bp, responses.bp, gemini.bp, simple_chat.bp, mcp.bp, ops.bp,
                      admin.bp, signin.bp, oauth.bp, mcp_accounts.bp):
        app.register_blueprint(blueprint)
    app.wsgi_app = PathKeyMiddleware(app.wsgi_app)
    return app
