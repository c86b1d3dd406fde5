"""The one writer of usage (ledger/usage.py reads it): a request counted
once, whichever process ends it, the last errors and the status page's
minute. Called only by the job queue, when a job ends (jobqueue/endings.py;
import-linter's records contract), with the job's other last writes.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from redis import Redis
from redis.client import Pipeline

from ledger.usage import ERRORS_KEPT, KEEP_DAYS, SEPARATOR, SERIES_MINUTES, today
from protocol import keys
from protocol.contract import Job
from protocol.events import DoneEvent, Usage, encode_event
from protocol.keys import ERRORS, series_key, usage_key, usage_tokens_key
from protocol.presence import batched
from protocol.scripts import ScriptBook

_SCRIPTS = ScriptBook(Path(__file__).with_name("lua"))


def record_request(redis: Redis | Pipeline, request_id: str, person: str, model: str, outcome: str,
                   used: Usage | None = None) -> None:
    """One request that ran (or was queued): outcome "ok", "error" or "abort",
    and the tokens it used.
    Counted once per request id, by whichever process sends it first: the
    worker that finished a request counts it with its final write (the web
    process then need not), the web process any other (its client left, its
    worker was lost, it never ran) or, in a race with the worker, the same.
    But an error is what the client was told, so it counts in place of an
    answer its worker had counted (lua/count_told_error.lua): that answer
    never reached the client (Redis stopped before delivering it)."""
    script = "count_told_error" if outcome == "error" else "count_once"
    script_keys = [keys.state_key(request_id)]  # its `counted` field
    args = _counts(person, model, outcome, used)
    if isinstance(redis, Pipeline):
        _SCRIPTS.queue_text(redis, script, script_keys, args)
    else:
        _SCRIPTS.run(redis, script, script_keys, args)


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


def record_error(redis: Redis | Pipeline, person: str, model: str, message: str) -> None:
    entry = json.dumps({"time": time.time(), "person": person, "model": model, "message": message[:300]})
    with batched(redis) as pipe:
        pipe.lpush(ERRORS, entry)
        pipe.ltrim(ERRORS, 0, ERRORS_KEPT - 1)


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
