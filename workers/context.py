"""What a worker process holds for every job it runs (built once, after any
fork: workers/tasks.py)."""
from __future__ import annotations

from dataclasses import dataclass

from redis import Redis

from workers.abort_watch import AbortWatch
from workers.heartbeat import Heartbeat
from workers.model_backends import ModelBackends
from workers.publisher import STREAM_INTERVAL_SECONDS
from workers.secrets_guard import Guards
from workers.slots import Slots
from workers.toolbox import Toolbox


@dataclass
class RunContext:
    redis: Redis
    backends: ModelBackends
    aborts: AbortWatch
    worker_id: str
    heartbeat: Heartbeat
    slots: Slots | None = None
    toolbox: Toolbox | None = None  # server-side tools, run by the MCP pool
    guards: Guards | None = None  # secrets kept from hosted models (None: nothing guarded)
    max_job_seconds: float = 600.0
    max_job_tokens: int = 16384
    loaded_marker_seconds: int = 300
    stream_interval_seconds: float = STREAM_INTERVAL_SECONDS
    # A reply taken whole goes out at most this far apart (its web process gives up on a job silent for its
    # event timeout: a quarter of it, and at most a minute).
    whole_reply_interval_seconds: float = 60.0
