"""Cluster-wide metrics, kept in Redis so that one scrape of any web process
sees every worker and web process (app/metrics.py renders them).

Counters are hash fields incremented in place; the time-to-first-token
histogram keeps cumulative bucket counts per model."""
from __future__ import annotations

from redis import Redis
from redis.client import Pipeline

from workers.channels import PREFIX, batched

JOBS_FINISHED = f"{PREFIX}:metrics:jobs_finished"  # field "model\x1freason"
TOKENS = f"{PREFIX}:metrics:tokens"  # field model
REJECTED = f"{PREFIX}:metrics:rejected"  # field reason
TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
SEPARATOR = "\x1f"


def ttft_key(model: str) -> str:
    return f"{PREFIX}:metrics:ttft:{model}"


def count_job(redis: Redis | Pipeline, model: str, reason: str, tokens: int, ttft_seconds: float | None) -> None:
    with batched(redis) as pipe:
        pipe.hincrby(JOBS_FINISHED, f"{model}{SEPARATOR}{reason}", 1)
        if tokens:
            pipe.hincrby(TOKENS, model, tokens)
        if ttft_seconds is not None:
            key = ttft_key(model)
            for bound in TTFT_BUCKETS:
                if ttft_seconds <= bound:
                    pipe.hincrby(key, repr(bound), 1)
            pipe.hincrby(key, "+Inf", 1)
            pipe.hincrbyfloat(key, "sum", ttft_seconds)


def count_rejection(redis: Redis, reason: str) -> None:
    redis.hincrby(REJECTED, reason, 1)
