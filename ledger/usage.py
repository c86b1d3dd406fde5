"""Usage per person and model, by UTC day, kept in Redis across every
process: requests, prompt and completion tokens, errors, aborts. Also the
last errors and a per-minute series of time to first token and tokens per
second, for the operator's status page.

Written by ledger/counting.py alone, which only the job queue calls (its
finish and withdraw: jobqueue/endings.py), once per request; read here by the
admin endpoints, the status page, /metrics, the budget check and the admin
CLI, none of which writes. Old days are folded by a maintenance step
(fold_old_days), offered by the workers' heartbeat (jobqueue.maintain) and
run by one process under a lock, as rq cleans its registries.
"""
from __future__ import annotations

import csv
import io
import json
import time
import zlib
from datetime import datetime, timedelta, timezone

from redis import Redis

from protocol.keys import (
    ERRORS, budget_reset_key, maintenance_lock_key, series_key, usage_folded_key, usage_key, usage_tokens_key,
)
from protocol.presence import batched

SEPARATOR = "\x1f"
METRICS = ("requests", "prompt_tokens", "completion_tokens", "errors", "aborts")
# A year of billing and a month's slack. A day is counted in a hash while it
# lasts; once two days old it is folded into one compressed string (read as
# the hash was) by the next maintenance step: a year for 200 people is then
# a few megabytes (docs/benchmarks-notes.md).
KEEP_DAYS = 400
FOLD_AFTER_DAYS = 2
FOLD_EVERY_SECONDS = 3600  # the maintenance step runs once an hour in the whole cluster
ERRORS_KEPT = 20
SERIES_MINUTES = 30


_DAY = (0.0, 0.0, "")  # the last day asked for: its first second, the next day's, its name


def today(now: float | None = None) -> str:
    """The UTC day `now` is in (by default, now), as usage keys name it. (Asked
    for with every request's count: the day's name is made once a day.)"""
    global _DAY
    now = time.time() if now is None else now
    first, next_day, name = _DAY
    if first <= now < next_day:
        return name
    moment = datetime.fromtimestamp(now, timezone.utc)
    midnight = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    _DAY = (midnight.timestamp(), (midnight + timedelta(days=1)).timestamp(), moment.strftime("%Y-%m-%d"))
    return _DAY[2]


def seconds_to_midnight(now: float | None = None) -> int:
    moment = datetime.fromtimestamp(now if now is not None else time.time(), timezone.utc)
    midnight = (moment + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return max(int((midnight - moment).total_seconds()) + 1, 1)


def tokens_today(redis: Redis, person: str) -> int:
    return int(redis.hget(usage_tokens_key(today()), person) or 0)


def budget_used(redis: Redis, person: str) -> int:
    """Today's tokens that count against the person's budget: those since
    an operator last reset it (usage itself keeps counting them all)."""
    day = today()
    with redis.pipeline(transaction=False) as pipe:
        pipe.hget(usage_tokens_key(day), person)
        pipe.hget(budget_reset_key(day), person)
        used, reset_at = pipe.execute()
    return int(used or 0) - int(reset_at or 0)


def reset_budget(redis: Redis, person: str) -> int:
    """Let the person spend a whole budget again today; the tokens they had
    used (still in their usage)."""
    day = today()
    used = tokens_today(redis, person)
    with redis.pipeline(transaction=False) as pipe:
        pipe.hset(budget_reset_key(day), person, used)
        pipe.expire(budget_reset_key(day), 2 * 86400)
        pipe.execute()
    return used


def usage(redis: Redis, day: str | None = None) -> dict[str, dict[str, dict[str, int]]]:
    """person -> model -> metric -> count, for a day (today by default)."""
    found: dict[str, dict[str, dict[str, int]]] = {}
    for field, value in _counters(redis, day or today()).items():
        person, model, metric = field.split(SEPARATOR, 2)
        found.setdefault(person, {}).setdefault(model, dict.fromkeys(METRICS, 0))[metric] = int(value)
    return found


def _counters(redis: Redis, day: str) -> dict[str, int]:
    """A day's counters, from its hash or, once folded, from its fold
    (written before the hash is deleted: an empty hash means no usage that
    day, or a fold)."""
    counters = _hash(redis, day)
    if not counters:
        folded = redis.get(usage_folded_key(day))
        return json.loads(zlib.decompress(folded)) if folded is not None else {}
    return counters


def _hash(redis: Redis, day: str) -> dict[str, int]:
    return {field.decode(): int(value) for field, value in redis.hgetall(usage_key(day)).items()}


def fold_old_days(redis: Redis, now: float | None = None) -> list[str]:
    """The maintenance step: every kept day at least FOLD_AFTER_DAYS old that
    is still a hash is folded (returned). Whichever process takes the hour's
    lock does it; the others return at once (one SET NX a call)."""
    if not redis.set(maintenance_lock_key("usage-fold"), b"1", nx=True, ex=FOLD_EVERY_SECONDS):
        return []
    days = [_days_ago(n, now) for n in range(FOLD_AFTER_DAYS, KEEP_DAYS + 1)]
    with redis.pipeline(transaction=False) as pipe:
        for day in days:
            pipe.exists(usage_key(day))
        present = pipe.execute()
    old = [day for day, there in zip(days, present) if there]
    for day in old:
        _fold(redis, day, _hash(redis, day))
    return old


def _fold(redis: Redis, day: str, counters: dict[str, int]) -> None:
    ttl = redis.ttl(usage_key(day))
    with batched(redis) as pipe:
        pipe.set(usage_folded_key(day), zlib.compress(json.dumps(counters, separators=(",", ":")).encode(), 9),
                 ex=ttl if ttl > 0 else KEEP_DAYS * 86400)
        pipe.delete(usage_key(day), usage_tokens_key(day))


def _days_ago(days: int, now: float | None = None) -> str:
    return today((now if now is not None else time.time()) - days * 86400)


def days_between(first: str, last: str) -> list[str]:
    """The UTC dates from `first` to `last`, both included (ValueError if
    either is not a date like 2026-11-01, or they are the wrong way round)."""
    start, end = (datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=timezone.utc) for day in (first, last))
    if end < start:
        raise ValueError(f"{first} is after {last}")
    return [(start + timedelta(days=n)).strftime("%Y-%m-%d") for n in range((end - start).days + 1)]


COLUMNS = ("day", "person", "model", *METRICS, "cost")


def as_csv(rows: list[dict]) -> str:
    """Rows (from `rows`) as CSV, RFC 4180 (CRLF line ends), a header first;
    an unknown cost is left empty."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS)
    writer.writeheader()
    writer.writerows({k: ("" if v is None else v) for k, v in row.items()} for row in rows)
    return out.getvalue()


def rows(redis: Redis, first: str, last: str, prices: dict[str, tuple[float, float]] | None = None) -> list[dict]:
    """Per day, person and model: the counters, and the estimated cost where
    `prices` gives the model's (input, output) price per million tokens."""
    found = []
    for day in days_between(first, last):
        for person, models in sorted(usage(redis, day).items()):
            for model, counts in sorted(models.items()):
                price = (prices or {}).get(model)
                cost = None if price is None else round(
                    (counts["prompt_tokens"] * price[0] + counts["completion_tokens"] * price[1]) / 1e6, 6)
                found.append({"day": day, "person": person, "model": model, **counts, "cost": cost})
    return found


def totals_by_person(report: dict) -> dict[str, dict[str, int]]:
    return {person: {metric: sum(m[metric] for m in models.values()) for metric in METRICS}
            for person, models in report.items()}


# --- the status page's extras ---------------------------------------------------------
def last_errors(redis: Redis) -> list[dict]:
    return [json.loads(entry) for entry in redis.lrange(ERRORS, 0, ERRORS_KEPT - 1)]


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
