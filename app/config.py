"""Front-end settings, read from the environment in this one place (12-factor)."""
from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from pathlib import Path

from queue_config import DEFAULT_REDIS_URL


@dataclass(frozen=True)
class Settings:
    redis_url: str = DEFAULT_REDIS_URL
    models_path: Path | None = None
    # How long a running job may send nothing before the request gives up.
    event_timeout_seconds: float = 600.0
    # How long to wait for Redis to confirm a subscription before enqueueing.
    subscribe_timeout_seconds: float = 5.0
    # API keys (off when neither is set); see app/auth.py.
    keys_file: Path | None = None
    api_keys: str | None = None
    # Per-key defaults (a key may set its own), and the queue bound per pool.
    requests_per_minute: int = 600
    max_concurrent: int = 16
    max_queue: int = 500
    # A job not started within this is dropped: clients give up about then.
    max_queue_wait_seconds: float = 300.0
    # While a streaming job waits: SSE comments / empty NDJSON lines this often.
    keepalive_seconds: float = 10.0
    # A started job whose worker has not beaten for this long is lost.
    heartbeat_timeout_seconds: float = 5.0
    # Request limits.
    max_body_bytes: int = 32 * 1024 * 1024
    max_messages: int = 2000
    max_tools: int = 512
    # Logging: prompts only when asked; conversation logs (JSON lines) opt-in.
    log_prompts: bool = False
    conversation_log_dir: Path | None = None


def _path(name: str) -> Path | None:
    return Path(os.environ[name]) if os.environ.get(name) else None


def _number(name: str, default, kind=float):
    return kind(os.environ[name]) if os.environ.get(name) else default


def load_settings(overrides: dict | None = None) -> Settings:
    env, d = os.environ, Settings()
    settings = Settings(
        redis_url=env.get("REDIS_URL") or DEFAULT_REDIS_URL,
        models_path=_path("SWITCHBOARD_MODELS"),
        event_timeout_seconds=_number("SWITCHBOARD_EVENT_TIMEOUT", d.event_timeout_seconds),
        keys_file=_path("SWITCHBOARD_KEYS_FILE"),
        api_keys=env.get("SWITCHBOARD_API_KEYS") or None,
        requests_per_minute=_number("SWITCHBOARD_REQUESTS_PER_MINUTE", d.requests_per_minute, int),
        max_concurrent=_number("SWITCHBOARD_MAX_CONCURRENT", d.max_concurrent, int),
        max_queue=_number("SWITCHBOARD_MAX_QUEUE", d.max_queue, int),
        max_queue_wait_seconds=_number("SWITCHBOARD_MAX_QUEUE_WAIT", d.max_queue_wait_seconds),
        keepalive_seconds=_number("SWITCHBOARD_KEEPALIVE", d.keepalive_seconds),
        heartbeat_timeout_seconds=_number("SWITCHBOARD_HEARTBEAT_TIMEOUT", d.heartbeat_timeout_seconds),
        max_body_bytes=_number("SWITCHBOARD_MAX_BODY_BYTES", d.max_body_bytes, int),
        max_messages=_number("SWITCHBOARD_MAX_MESSAGES", d.max_messages, int),
        max_tools=_number("SWITCHBOARD_MAX_TOOLS", d.max_tools, int),
        log_prompts=env.get("SWITCHBOARD_LOG_PROMPTS", "") in ("1", "true", "yes"),
        conversation_log_dir=_path("SWITCHBOARD_CONVERSATION_LOG_DIR"),
    )
    overrides = overrides or {}
    unknown = set(overrides) - {f.name for f in fields(Settings)}
    if unknown:
        raise ValueError(f"unknown settings: {sorted(unknown)}")
    return replace(settings, **overrides)
