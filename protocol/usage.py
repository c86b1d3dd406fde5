"""Usage per person and model, by UTC day, kept in Redis across every
process: requests, prompt and completion tokens, errors, aborts. Also the
last errors and a per-minute series of time to first token and tokens per
second, for the operator's status page.

Written when a request ends (by its worker, else app/jobs.py), read by the admin endpoints, the
status page, /metrics, the budget check and the admin CLI.
"""
from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from redis import Redis
from redis.client import Pipeline

from protocol import keys
from protocol.contract import DoneEvent, Job, Usage, encode_event
from protocol.keys import ERRORS, series_key, usage_key, usage_tokens_key
from protocol.presence import batched
from protocol.scripts import ScriptBook

SEPARATOR = "\x1f"
METRICS = ("requests", "prompt_tokens", "completion_tokens", "errors", "aborts")
KEEP_DAYS = 35
ERRORS_KEPT = 20
SERIES_MINUTES = 30
_SCRIPTS = ScriptBook(Path(__file__).with_name("lua"))


def today(now: float | None = None) -> str:
    return datetime.fromtimestamp(now if now is not None else time.time(), timezone.utc).strftime("%Y-%m-%d")


def seconds_to_midnight(now: float | None = None) -> int:
    moment = datetime.fromtimestamp(now if now is not None else time.time(), timezone.utc)
    midnight = (moment + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return max(int((midnight - moment).total_seconds()) + 1, 1)


def record_request(redis: Redis | Pipeline, request_id: str, person: str, model: str, outcome: str,
                   used: Usage | None = None) -> None:
    """One request that ran (or was queued): outcome "ok", "error" or "abort",
    and the tokens it used.
    Counted once per request id, by whichever process sends it first: the
    worker that finished a request counts it with its final write (the web
    process then need not), the web process any other (its client left, its
    worker was lost, it never ran) or, in a race with the worker, the same."""
    script_keys = [keys.state_key(request_id)]  # its `counted` field
    args = _counts(person, model, outcome, used)
    if isinstance(redis, Pipeline):
        _SCRIPTS.queue_text(redis, "count_once", script_keys, args)
    else:
        _SCRIPTS.run(redis, "count_once", script_keys, args)


def deliver_answer(pipe: Pipeline, job: Job, final: DoneEvent) -> None:
    """A finished job's final event published, and its request counted as
    answered (once) only if a web process heard it (lua/deliver_final.lua)."""
    _SCRIPTS.queue_text(pipe, "deliver_final", [keys.state_key(job.id)],
                        [job.reply_channel, encode_event(final), *_counts(job.usage_of, job.model, "ok", final.usage)])


def _counts(person: str, model: str, outcome: str, used: Usage | None) -> list:
    """count_once's arguments (lua/counting.lua): TTLs, then the counters."""
    day = today()
    prompt_tokens, completion_tokens = (used.prompt_tokens, used.completion_tokens) if used else (0, 0)
    counts = {"requests": 1, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
              "errors": int(outcome == "error"), "aborts": int(outcome == "abort")}
    args: list = [keys.RECORD_TTL_SECONDS, KEEP_DAYS * 86400]
    for metric, value in counts.items():
        if value:
            args += [usage_key(day), SEPARATOR.join((person, model, metric)), value]
    if prompt_tokens + completion_tokens:
        args += [usage_tokens_key(day), person, prompt_tokens + completion_tokens]
    return args


def tokens_today(redis: Redis, person: str) -> int:
    return int(redis.hget(usage_tokens_key(today()), person) or 0)


def usage(redis: Redis, day: str | None = None) -> dict[str, dict[str, dict[str, int]]]:
    """person -> model -> metric -> count, for a day (today by default)."""
    found: dict[str, dict[str, dict[str, int]]] = {}
    for field, value in redis.hgetall(usage_key(day or today())).items():
        person, model, metric = field.decode().split(SEPARATOR, 2)
        found.setdefault(person, {}).setdefault(model, dict.fromkeys(METRICS, 0))[metric] = int(value)
    return found


def totals_by_person(report: dict) -> dict[str, dict[str, int]]:
    return {person: {metric: sum(m[metric] for m in models.values()) for metric in METRICS}
            for person, models in report.items()}


# --- the status page's extras ---------------------------------------------------------
def record_error(redis: Redis | Pipeline, person: str, model: str, message: str) -> None:
    entry = json.dumps({"time": time.time(), "person": person, "model": model, "message": message[:300]})
    with batched(redis) as pipe:
        pipe.lpush(ERRORS, entry)
        pipe.ltrim(ERRORS, 0, ERRORS_KEPT - 1)


def last_errors(redis: Redis) -> list[dict]:
    return [json.loads(entry) for entry in redis.lrange(ERRORS, 0, ERRORS_KEPT - 1)]


def record_minute(redis: Redis | Pipeline, ttft_seconds: float | None, tokens: int, eval_seconds: float,
                  waited_seconds: float | None = None) -> None:
    """A finished job's numbers in this minute's bucket (kept half an hour)."""
    key = series_key(int(time.time() // 60))
    with batched(redis) as pipe:
        if waited_seconds is not None:
            pipe.hincrbyfloat(key, "wait_sum", max(waited_seconds, 0.0))
            pipe.hincrby(key, "wait_count", 1)
        if ttft_seconds is not None:
            pipe.hincrbyfloat(key, "ttft_sum", ttft_seconds)
            pipe.hincrby(key, "ttft_count", 1)
        if tokens:
            pipe.hincrby(key, "tokens", tokens)
            pipe.hincrbyfloat(key, "eval_seconds", eval_seconds)
        pipe.expire(key, SERIES_MINUTES * 60 + 120)


def series(redis: Redis, minutes: int = SERIES_MINUTES) -> list[dict]:
    """Per minute, oldest first: time to first token and queue wait (means),
    tokens per second, jobs finished."""
    now = int(time.time() // 60)
    pipe = redis.pipeline(transaction=False)
    for minute in range(now - minutes + 1, now + 1):
        pipe.hgetall(series_key(minute))
    points = []
    for minute, raw in zip(range(now - minutes + 1, now + 1), pipe.execute()):
        values = {k.decode(): float(v) for k, v in raw.items()}
        count, seconds = values.get("ttft_count", 0), values.get("eval_seconds", 0)
        waits = values.get("wait_count", 0)
        points.append({"minute": minute * 60, "ttft": values["ttft_sum"] / count if count else None,
                       "tokens_per_second": values.get("tokens", 0) / seconds if seconds else None,
                       "queue_wait": values["wait_sum"] / waits if waits else None, "jobs": int(waits)})
    return points
