"""Cluster-wide metrics, kept in Redis so that one scrape of any web process
sees every worker and web process (app/metrics.py renders them).

Counters are hash fields incremented in place; a histogram (time to first
token per model, tool call seconds) counts each observation in its own
bucket, made cumulative when read."""
from __future__ import annotations

from redis import Redis
from redis.client import Pipeline

from protocol.presence import batched
from protocol.keys import (
    GUARD_FINDINGS, JOBS_FINISHED, PROMPT_CACHE, PROMPT_TOKENS, REJECTED, TOKENS, TOOL_CALLS, tool_seconds_key,
    ttft_key,
)

TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
TOOL_SECONDS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
SEPARATOR = "\x1f"


def observe(pipe: Pipeline, key: str, seconds: float, buckets: tuple[float, ...]) -> None:
    """One observation into a histogram hash: its own bucket (the smallest
    bound it fits under, or +Inf) and the sum; two commands, where keeping
    cumulative counts would take one per bucket above it (`histogram` adds
    them up when read)."""
    bound = next((repr(b) for b in buckets if seconds <= b), "+Inf")
    pipe.hincrby(key, bound, 1)
    pipe.hincrbyfloat(key, "sum", seconds)


def histogram(redis: Redis, key: str, buckets: tuple[float, ...]) -> dict[str, float]:
    """Bucket bound (repr) or "+Inf" -> the cumulative count, and "sum";
    empty if nothing was observed yet."""
    return cumulative(redis.hgetall(key), buckets)


def cumulative(stored: dict[bytes, bytes], buckets: tuple[float, ...]) -> dict[str, float]:
    """A histogram's hash as read from Redis, as `histogram` returns it."""
    raw = {k.decode(): float(v) for k, v in stored.items()}
    if not raw:
        return {}
    cumulative, running = {"sum": raw.get("sum", 0.0)}, 0.0
    for bound in [repr(b) for b in buckets] + ["+Inf"]:
        running += raw.get(bound, 0.0)
        cumulative[bound] = running
    return cumulative


def count_job(redis: Redis | Pipeline, model: str, reason: str, tokens: int, ttft_seconds: float | None) -> None:
    with batched(redis) as pipe:
        pipe.hincrby(JOBS_FINISHED, f"{model}{SEPARATOR}{reason}", 1)
        if tokens:
            pipe.hincrby(TOKENS, model, tokens)
        if ttft_seconds is not None:
            observe(pipe, ttft_key(model), ttft_seconds, TTFT_BUCKETS)


def count_tool_call(redis: Redis | Pipeline, server: str, tool: str, status: str, seconds: float) -> None:
    """A server-side (MCP) tool call: its outcome and its duration."""
    with batched(redis) as pipe:
        pipe.hincrby(TOOL_CALLS, SEPARATOR.join((server, tool, status)), 1)
        observe(pipe, tool_seconds_key(server, tool), seconds, TOOL_SECONDS_BUCKETS)


def tool_calls(redis: Redis) -> dict[tuple[str, str, str], int]:
    """(server, tool, status) -> count."""
    return {tuple(field.decode().split(SEPARATOR, 2)): int(value)
            for field, value in redis.hgetall(TOOL_CALLS).items()}


def count_prompt_cache(redis: Redis | Pipeline, model: str, cached_tokens: int, prompt_tokens: int) -> None:
    """A local model's prompt-cache lookup: a hit if part of the prompt was
    already evaluated; tokens reused and evaluated."""
    with batched(redis) as pipe:
        pipe.hincrby(PROMPT_CACHE, f"{model}{SEPARATOR}{'hit' if cached_tokens else 'miss'}", 1)
        pipe.hincrby(PROMPT_TOKENS, f"{model}{SEPARATOR}reused", cached_tokens)
        pipe.hincrby(PROMPT_TOKENS, f"{model}{SEPARATOR}evaluated", max(prompt_tokens - cached_tokens, 0))


def prompt_cache_counts(redis: Redis) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
    """(model, hit|miss) -> lookups, and (model, reused|evaluated) -> prompt tokens."""
    def split(key: str) -> dict[tuple[str, str], int]:
        return {tuple(f.decode().split(SEPARATOR, 1)): int(v) for f, v in redis.hgetall(key).items()}
    return split(PROMPT_CACHE), split(PROMPT_TOKENS)


def count_rejection(redis: Redis, reason: str) -> None:
    redis.hincrby(REJECTED, reason, 1)


def jobs_finished(redis: Redis) -> dict[tuple[str, str], int]:
    """(model, reason) -> count."""
    return {tuple(field.decode().split(SEPARATOR, 1)): int(value)
            for field, value in redis.hgetall(JOBS_FINISHED).items()}


def ttft_histogram(redis: Redis, model: str) -> dict[str, float]:
    return histogram(redis, ttft_key(model), TTFT_BUCKETS)


def count_guard_findings(redis: Redis | Pipeline, kinds: dict[str, int], action: str) -> None:
    """Secrets the guard found (kind -> count) and what it did with them."""
    with batched(redis) as pipe:
        for kind, count in kinds.items():
            pipe.hincrby(GUARD_FINDINGS, f"{kind}{SEPARATOR}{action}", count)


def guard_findings(redis: Redis) -> dict[tuple[str, str], int]:
    """(kind, action) -> count."""
    return {tuple(field.decode().split(SEPARATOR, 1)): int(value)
            for field, value in redis.hgetall(GUARD_FINDINGS).items()}
