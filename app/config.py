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
    # How long a request waits for its job's next event before giving up.
    event_timeout_seconds: float = 600.0
    # How long to wait for Redis to confirm a subscription before enqueueing.
    subscribe_timeout_seconds: float = 5.0


def load_settings(overrides: dict | None = None) -> Settings:
    env = os.environ
    settings = Settings(
        redis_url=env.get("REDIS_URL") or DEFAULT_REDIS_URL,
        models_path=Path(env["SWITCHBOARD_MODELS"]) if env.get("SWITCHBOARD_MODELS") else None,
        event_timeout_seconds=float(env.get("SWITCHBOARD_EVENT_TIMEOUT", "600")),
    )
    overrides = overrides or {}
    unknown = set(overrides) - {f.name for f in fields(Settings)}
    if unknown:
        raise ValueError(f"unknown settings: {sorted(unknown)}")
    return replace(settings, **overrides)
