"""What the guard found, for the operator: per UTC day a counter per person,
model, kind and action (the console's "secrets kept from hosted models"),
and an audit entry naming whose request, which model and how many of each
kind. Written once per job, by its end (jobqueue.finish). Each secret
counts once, when it is first found (agents resend it with every turn of
the conversation); each refused request counts its findings. Never a
value: kinds and counts.
"""
from __future__ import annotations

import json
import time
from datetime import datetime, timezone

from redis import Redis
from redis.client import Pipeline

from ledger.audit import MOST
from protocol.keys import AUDIT_LOG, guard_use_key

SEPARATOR = "\x1f"
USE_DAYS = 35


def record(pipe: Pipeline, person: str, model: str, request: str, action: str, kinds: dict[str, int]) -> None:
    """Queue on `pipe` the findings `kinds` (kind -> count) that got `action` (logged, redacted, blocked)."""
    kinds = {kind: count for kind, count in kinds.items() if count}
    if not kinds:
        return
    key = guard_use_key(datetime.now(timezone.utc).date().isoformat())
    for kind, count in kinds.items():
        pipe.hincrby(key, SEPARATOR.join((person, model, kind, action)), count)
    pipe.expire(key, USE_DAYS * 86400)
    entry = {"time": time.time(), "who": person or "anonymous", "from": "the guard", "action": f"secrets {action}",
             "target": model, "details": {"request": request, "kinds": kinds}}
    pipe.xadd(AUDIT_LOG, {"entry": json.dumps(entry)}, maxlen=MOST, approximate=True)


def of_day(redis: Redis, day: str) -> list[dict]:
    """The day's findings, most first."""
    rows = []
    for field, count in redis.hgetall(guard_use_key(day)).items():
        person, model, kind, action = field.decode().split(SEPARATOR, 3)
        rows.append({"person": person, "model": model, "kind": kind, "action": action, "count": int(count)})
    return sorted(rows, key=lambda row: (-row["count"], row["person"], row["model"], row["kind"]))
